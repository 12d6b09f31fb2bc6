/* client.c: one HTTP request against the isostack API over a reusable libcurl
 * easy handle: headers (bearer token, JSON, request id), a bounded response
 * buffer, and transport failures turned into struct iso_error. The token lives
 * only in this struct and in the Authorization header; it is never printed. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "client/client_internal.h"
#include "isostack/client.h"

struct iso_client {
	CURL *curl;
	char *url; /* the base URL in use (one of urls[]), no trailing '/' */
	/* Several controllers on one store (docs/cli.md, "Several
	 * controllers"): the comma-separated list, plus a leader named by a
	 * follower that the list did not hold; the client sticks to cur. */
	char *urls[ISO_CLIENT_MAX_URLS + 1];
	int n_urls, cur;
	char *auth;    /* "Authorization: Bearer ..." or NULL; secret */
	char *ca_file; /* NULL: system store */
	char *user_agent;
	long timeout_ms;
	size_t max_response;
	uint64_t seq; /* mixed into request ids when getrandom() fails */
};

/* Growable response body bounded by max; `over` records that the bound hit. */
struct body_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;
	bool over;
	bool oom;
};

/* The X-Request-Id of the answer, taken from the header callback. */
struct header_state {
	char request_id[ISO_CLIENT_REQUEST_ID_MAX];
};

static void free_secret(char *s)
{
	if (!s)
		return;
	/* Do not leave the bearer token lying in freed heap memory. */
	explicit_bzero(s, strlen(s));
	free(s);
}

void iso_client_free(struct iso_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	for (int i = 0; i < c->n_urls; i++)
		free(c->urls[i]);
	free_secret(c->auth);
	free(c->ca_file);
	free(c->user_agent);
	free(c);
}

const char *iso_client_url(const struct iso_client *c)
{
	return c->url;
}

static int check_token(const char *token, struct iso_error *err)
{
	size_t n = strlen(token);

	/* The API's tokens are ~60 chars; a far longer one is a wrong file. */
	if (n > 1024)
		return iso_error_set(err, ISO_E_INVALID, "token",
		                     "token is longer than 1024 characters");
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)token[i];
		/* Printable, no space: nothing that could split or extend a header. */
		if (ch <= 0x20 || ch >= 0x7f)
			return iso_error_set(err, ISO_E_INVALID, "token",
			                     "token holds a space, control or non-ASCII character "
			                     "at position %zu",
			                     i + 1);
	}
	return 0;
}

static int check_ca_file(const char *path, struct iso_error *err)
{
	FILE *f = fopen(path, "re");

	if (!f)
		return iso_error_set(err, ISO_E_INVALID, "ca_file", "cannot read CA file %s: %s",
		                     path, strerror(errno));
	fclose(f);
	return 0;
}

/* "URL[,URL...]": each checked as a base URL; at most ISO_CLIENT_MAX_URLS. */
static int split_urls(struct iso_client *c, const char *list, struct iso_error *err)
{
	const char *p = list;

	for (;;) {
		size_t n = strcspn(p, ",");
		char one[1024];
		int r;

		if (c->n_urls == ISO_CLIENT_MAX_URLS)
			return iso_error_set(err, ISO_E_INVALID, "url", "at most %d URLs in a list",
			                     ISO_CLIENT_MAX_URLS);
		if (n == 0 || n >= sizeof(one))
			return iso_error_set(err, ISO_E_INVALID, "url",
			                     "URL list: an empty or over-long entry (%zu of %d)",
			                     (size_t)c->n_urls + 1, ISO_CLIENT_MAX_URLS);
		memcpy(one, p, n);
		one[n] = '\0';
		r = iso_client_base_url(one, &c->urls[c->n_urls], err);
		if (r < 0)
			return r;
		c->n_urls++;
		if (!p[n])
			break;
		p += n + 1;
	}
	c->cur = 0;
	c->url = c->urls[0];
	return 0;
}

int iso_client_new(const struct iso_client_options *opts, struct iso_client **out,
                   struct iso_error *err)
{
	static const struct iso_client_options defaults = {0};
	struct iso_client *c;
	int r;

	*out = NULL;
	if (!opts)
		opts = &defaults;
	c = calloc(1, sizeof(*c));
	if (!c)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	r = split_urls(c, opts->url ? opts->url : ISO_CLIENT_DEFAULT_URL, err);
	if (r < 0)
		goto fail;
	if (opts->token && opts->token[0]) {
		r = check_token(opts->token, err);
		if (r < 0)
			goto fail;
		if (asprintf(&c->auth, "Authorization: Bearer %s", opts->token) < 0) {
			c->auth = NULL;
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			goto fail;
		}
	}
	if (opts->ca_file) {
		r = check_ca_file(opts->ca_file, err);
		if (r < 0)
			goto fail;
		c->ca_file = strdup(opts->ca_file);
	}
	c->user_agent =
	    strdup(opts->user_agent ? opts->user_agent : "isostack-client/" ISO_VERSION);
	if (opts->timeout_ms < 0) {
		r = iso_error_set(err, ISO_E_INVALID, "timeout", "timeout must not be negative");
		goto fail;
	}
	c->timeout_ms = opts->timeout_ms ? opts->timeout_ms : ISO_CLIENT_DEFAULT_TIMEOUT_MS;
	c->max_response = opts->max_response ? opts->max_response : ISO_CLIENT_MAX_RESPONSE;
	c->curl = curl_easy_init();
	if (!c->user_agent || (opts->ca_file && !c->ca_file) || !c->curl) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		goto fail;
	}
	*out = c;
	return 0;
fail:
	iso_client_free(c);
	return r;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct body_buf *b = userdata;
	size_t n = size * nmemb;

	if (n > b->max - b->len) {
		b->over = true;
		return 0; /* makes libcurl stop with CURLE_WRITE_ERROR */
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;
		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->data, cap);
		if (!p) {
			b->oom = true;
			return 0;
		}
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *userdata)
{
	static const char name[] = "x-request-id:";
	struct header_state *h = userdata;
	size_t n = size * nitems;
	size_t i, j;

	/* A new status line (100 Continue, then the answer): forget the old one. */
	if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		h->request_id[0] = '\0';
		return n;
	}
	if (n < sizeof(name) - 1 || strncasecmp(line, name, sizeof(name) - 1) != 0)
		return n;
	i = sizeof(name) - 1;
	while (i < n && (line[i] == ' ' || line[i] == '\t'))
		i++;
	for (j = 0; i < n && j < sizeof(h->request_id) - 1; i++) {
		unsigned char ch = (unsigned char)line[i];
		if (ch == '\r' || ch == '\n')
			break;
		/* Keep only what the API allows; anything else would reach a terminal. */
		if (ch > 0x20 && ch < 0x7f)
			h->request_id[j++] = (char)ch;
	}
	h->request_id[j] = '\0';
	return n;
}

static void new_request_id(struct iso_client *c, char *buf, size_t size)
{
	uint64_t v;

	c->seq++;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = iso_mono_ns() ^ ((uint64_t)iso_now_ms() << 20) ^
		    (c->seq * 0x9e3779b97f4a7c15ull);
	snprintf(buf, size, "c-%016llx", (unsigned long long)v);
}

static bool method_valid(const char *m)
{
	static const char *const known[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(known); i++)
		if (strcmp(m, known[i]) == 0)
			return true;
	return false;
}

/* Maps a failed transfer to an error the user can act on. Messages name the
 * server URL; it carries no secret (credentials in URLs are refused). */
static int transport_error(const struct iso_client *c, CURLcode rc, long os_errno,
                           const struct body_buf *b, const char *method, const char *path,
                           const char *errbuf, struct iso_error *err)
{
	const char *detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);
	char os_detail[96] = "";

	if (b->over)
		return iso_error_set(err, ISO_E_TOO_LARGE, NULL,
		                     "%s %s%s: the server's response body is larger than this "
		                     "client's limit of %zu bytes (%.1f MiB)",
		                     method, c->url, path, b->max, (double)b->max / 1048576.0);
	if (b->oom || rc == CURLE_OUT_OF_MEMORY)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s %s%s: out of memory", method,
		                     c->url, path);
	if (os_errno > 0 && !strstr(detail, strerror((int)os_errno)))
		snprintf(os_detail, sizeof(os_detail), " (%s)", strerror((int)os_errno));
	switch (rc) {
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return iso_error_set(err, ISO_E_INVALID, "url", "bad server URL %s: %s", c->url,
		                     detail);
	case CURLE_SSL_CACERT_BADFILE:
		return iso_error_set(err, ISO_E_INVALID, "ca_file", "CA file %s: %s",
		                     c->ca_file ? c->ca_file : "(system store)", detail);
	case CURLE_PEER_FAILED_VERIFICATION:
		/* Reachable, but not trusted: field names the option to look at. */
		return iso_error_set(err, ISO_E_UNAVAILABLE, "ca_file",
		                     "TLS with server at %s failed (%s %s): %s", c->url, method,
		                     path, detail);
	case CURLE_OPERATION_TIMEDOUT:
		return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
		                     "server at %s did not answer %s %s in time: %s", c->url,
		                     method, path, detail);
	default:
		return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
		                     "cannot reach server at %s (%s %s): %s%s", c->url, method,
		                     path, detail, os_detail);
	}
}

static int parse_body(const struct iso_client *c, const struct body_buf *b, long status,
                      const char *method, const char *path, struct iso_response *out,
                      struct iso_error *err)
{
	json_error_t jerr;
	size_t i = 0;

	while (i < b->len && (b->data[i] == ' ' || b->data[i] == '\t' || b->data[i] == '\r' ||
	                      b->data[i] == '\n'))
		i++;
	if (i == b->len)
		return 0; /* empty body: 204, or an error answer without one */
	out->body = json_loadb(b->data, b->len, JSON_DECODE_ANY, &jerr);
	if (out->body)
		return 0;
	if (status >= 200 && status < 300)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "%s %s%s: HTTP %ld answer is not JSON: %s at byte %d", method,
		                     c->url, path, status, jerr.text, jerr.position);
	/* A proxy's HTML error page: the status alone tells what happened. */
	return 0;
}

struct request_ctx {
	struct curl_slist *headers;
	char *url;
	char *payload;
	struct body_buf body;
};

static void request_ctx_clear(struct request_ctx *r)
{
	/* One of the headers is the bearer token: wipe before freeing. */
	for (struct curl_slist *l = r->headers; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(r->headers);
	free(r->url);
	free(r->payload);
	free(r->body.data);
}

static int append_header(struct curl_slist **list, const char *h)
{
	struct curl_slist *n = curl_slist_append(*list, h);

	if (!n)
		return -ENOMEM;
	*list = n;
	return 0;
}

static int set_options(struct iso_client *c, const char *method, struct request_ctx *r,
                       struct header_state *hs, char *errbuf)
{
	CURL *h = c->curl;
	CURLcode rc = CURLE_OK;

	/* Each call starts from clean options; the connection cache survives. */
	curl_easy_reset(h);
#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (rc == CURLE_OK)                                                                \
			rc = curl_easy_setopt(h, opt, val);                                        \
	} while (0)
	SET(CURLOPT_URL, r->url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PATH_AS_IS, 1L); /* "..": the server decides, not URL squashing */
	SET(CURLOPT_TIMEOUT_MS, c->timeout_ms);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_USERAGENT, c->user_agent);
	SET(CURLOPT_HTTPHEADER, r->headers);
	SET(CURLOPT_ERRORBUFFER, errbuf);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, &r->body);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, hs);
	if (c->ca_file)
		SET(CURLOPT_CAINFO, c->ca_file);
	if (r->payload) {
		SET(CURLOPT_POSTFIELDS, r->payload);
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(r->payload));
	} else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
	           strcmp(method, "PATCH") == 0) {
		SET(CURLOPT_POSTFIELDS, "");
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	}
	if (strcmp(method, "GET") == 0)
		SET(CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "HEAD") == 0)
		SET(CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "POST") != 0)
		SET(CURLOPT_CUSTOMREQUEST, method);
#undef SET
	return rc == CURLE_OK ? 0 : -EINVAL;
}

/* An extra header the caller adds ("Idempotency-Key: slurm-42"): a token
 * name, ':', then printable ASCII only, so that it can neither split nor
 * extend the request; the ones this client sets itself are refused. */
static int check_header(const char *h, struct iso_error *err)
{
	static const char *const own[] = {"authorization", "content-type", "accept", "expect",
	                                  "x-request-id"};
	size_t name = strcspn(h, ":");

	if (name == 0 || h[name] != ':' || strlen(h) > 1024)
		return iso_error_set(err, ISO_E_INVALID, "headers",
		                     "a request header must be 'Name: value', at most 1024 bytes");
	for (size_t i = 0; h[i]; i++) {
		unsigned char ch = (unsigned char)h[i];
		bool ok = i < name ? (ch > 0x20 && ch < 0x7f) : (ch >= 0x20 && ch < 0x7f);
		if (!ok)
			return iso_error_set(err, ISO_E_INVALID, "headers",
			                     "request header holds a control, space or non-ASCII "
			                     "character at position %zu",
			                     i + 1);
	}
	for (size_t i = 0; i < ISO_ARRAY_SIZE(own); i++)
		if (strlen(own[i]) == name && strncasecmp(h, own[i], name) == 0)
			return iso_error_set(err, ISO_E_INVALID, "headers",
			                     "request header %.*s is set by the client itself",
			                     (int)name, h);
	return 0;
}

static int request_once(struct iso_client *c, const char *method, const char *path,
                        const json_t *body, const char *const *extra, struct iso_response *out,
                        bool *not_sent, struct iso_error *err)
{
	_cleanup_(request_ctx_clear) struct request_ctx r = {0};
	struct header_state hs = {{0}};
	char sent_id[ISO_CLIENT_REQUEST_ID_MAX];
	char idhdr[ISO_CLIENT_REQUEST_ID_MAX + 16];
	char errbuf[CURL_ERROR_SIZE] = "";
	CURLcode rc;
	long status = 0, os_errno = 0;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!method_valid(method))
		return iso_error_set(err, ISO_E_INVALID, "method", "unsupported HTTP method");
	ret = iso_client_check_path(path, err);
	if (ret < 0)
		return ret;
	for (size_t i = 0; extra && extra[i]; i++) {
		ret = check_header(extra[i], err);
		if (ret < 0)
			return ret;
	}
	if (asprintf(&r.url, "%s%s", c->url, path) < 0) {
		r.url = NULL;
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	if (body) {
		r.payload = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
		if (!r.payload)
			return iso_error_set(err, ISO_E_INVALID, "body",
			                     "%s %s: request body cannot be encoded as JSON",
			                     method, path);
	}
	new_request_id(c, sent_id, sizeof(sent_id));
	snprintf(idhdr, sizeof(idhdr), "X-Request-Id: %s", sent_id);
	if (append_header(&r.headers, "Content-Type: application/json") < 0 ||
	    append_header(&r.headers, "Accept: application/json") < 0 ||
	    append_header(&r.headers, "Expect:") < 0 || append_header(&r.headers, idhdr) < 0 ||
	    (c->auth && append_header(&r.headers, c->auth) < 0))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (size_t i = 0; extra && extra[i]; i++)
		if (append_header(&r.headers, extra[i]) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	r.body.max = c->max_response;
	if (set_options(c, method, &r, &hs, errbuf) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s %s: libcurl refused an option",
		                     method, path);

	rc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
	/* Drop libcurl's pointers into this frame (error buffer, body, headers
	 * with the token); the connection cache survives the reset. */
	curl_easy_reset(c->curl);
	*not_sent = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST;
	if (rc != CURLE_OK)
		return transport_error(c, rc, os_errno, &r.body, method, path, errbuf, err);
	ret = parse_body(c, &r.body, status, method, path, out, err);
	if (ret < 0)
		return ret;
	out->status = status;
	iso_strlcpy(out->request_id, hs.request_id[0] ? hs.request_id : sent_id,
	            sizeof(out->request_id));
	return 0;
}

/* The leader a follower's not_leader answer names, as an index of urls[]
 * (added when the list did not hold it); -1 when it names none usable. */
static int leader_of(struct iso_client *c, const struct iso_response *resp)
{
	const json_t *e = json_object_get(resp->body, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *leader = json_string_value(json_object_get(resp->body, "leader"));
	char *url = NULL;

	if (resp->status != 503 || !code || strcmp(code, "not_leader") != 0 || !leader)
		return -1;
	if (iso_client_base_url(leader, &url, NULL) < 0)
		return -1;
	for (int i = 0; i < c->n_urls; i++)
		if (strcmp(c->urls[i], url) == 0) {
			free(url);
			return i;
		}
	if (c->n_urls > ISO_CLIENT_MAX_URLS) { /* the one extra slot is taken */
		free(c->urls[c->n_urls - 1]);
		c->n_urls--;
	}
	c->urls[c->n_urls] = url;
	return c->n_urls++;
}

/* With several URLs: a server that cannot be connected to (nothing was
 * sent) or a follower's 503 not_leader moves the client on, to the leader it
 * names or else to the next URL, a bounded number of times; the client then
 * sticks to the one that answered. Any other answer, and any failure after
 * the request may have been sent, is the caller's, as with one URL. */
int iso_client_request(struct iso_client *c, const char *method, const char *path,
                       const json_t *body, struct iso_response *out, struct iso_error *err)
{
	return iso_client_request_headers(c, method, path, body, NULL, out, err);
}

int iso_client_request_headers(struct iso_client *c, const char *method, const char *path,
                               const json_t *body, const char *const *headers,
                               struct iso_response *out, struct iso_error *err)
{
	int tries = 2 * (c->n_urls + 1);

	for (int t = 0;; t++) {
		bool not_sent = false;
		int r = request_once(c, method, path, body, headers, out, &not_sent, err);
		int next = -1;

		if (c->n_urls < 2 || t + 1 >= tries)
			return r;
		/* Move on when nothing was sent, or to the leader a follower names;
		 * a follower that knows no leader yet ("leader": null) sends the
		 * client to the next URL too. */
		bool unsent = r < 0 && not_sent;
		bool follower = r == 0 && (next = leader_of(c, out)) < 0 && out->status == 503 &&
		                json_is_object(json_object_get(out->body, "error")) &&
		                json_object_get(out->body, "leader");
		if (unsent || follower)
			next = (c->cur + 1) % c->n_urls;
		if (next < 0)
			return r;
		if (r == 0)
			iso_response_clear(out);
		if (next == c->cur) /* named itself (a stale view): try the next */
			next = (c->cur + 1) % c->n_urls;
		c->cur = next;
		c->url = c->urls[next];
	}
}

/* request.c: isoctl's side of a request: where the server and the token come
 * from (flags, then environment, then defaults), building escaped paths, and
 * turning every failure into one stderr line and the documented exit code.
 * The token is read, handed to the client library and wiped; never printed. */
#include <errno.h>
#include <string.h>

#include "isoctl/isoctl.h"

#define TOKEN_FILE_MAX 4096

void isoctl_clear(struct isoctl *ctx)
{
	iso_client_free(ctx->client);
	ctx->client = NULL;
}

int isoctl_oom(void)
{
	fputs("isoctl: out of memory\n", stderr);
	return ISOCTL_EXIT_INTERNAL;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? v : NULL;
}

/* Reads the first line of a token file into buf, trimmed. Returns 0 or the
 * usage exit code with the message printed. */
static int read_token_file(const char *path, const char *origin, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t n, start = 0;
	bool too_big;
	int e = 0;

	if (!f) {
		fprintf(stderr, "isoctl: cannot read token file %s (%s): %s\n", path, origin,
		        strerror(errno));
		return ISOCTL_EXIT_USAGE;
	}
	n = fread(buf, 1, size - 1, f);
	if (ferror(f))
		e = errno ? errno : EIO;
	too_big = !e && n == size - 1 && fgetc(f) != EOF;
	fclose(f);
	if (e || too_big)
		explicit_bzero(buf, size);
	if (e) {
		fprintf(stderr, "isoctl: cannot read token file %s (%s): %s\n", path, origin,
		        strerror(e));
		return ISOCTL_EXIT_USAGE;
	}
	if (too_big) {
		fprintf(stderr, "isoctl: token file %s (%s) is larger than %d bytes\n", path,
		        origin, TOKEN_FILE_MAX);
		return ISOCTL_EXIT_USAGE;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0'; /* first line only */
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	while (buf[start] == ' ' || buf[start] == '\t')
		start++;
	memmove(buf, buf + start, n - start + 1);
	if (buf[0] == '\0') {
		fprintf(stderr, "isoctl: token file %s (%s) is empty\n", path, origin);
		return ISOCTL_EXIT_USAGE;
	}
	return 0;
}

static void print_error(const char *code, const char *message, const char *field,
                        const char *request_id)
{
	bool has_field = field && field[0];
	bool has_id = request_id && request_id[0];

	fprintf(stderr, "isoctl: %s: ", code);
	isoctl_fputs_clean(message, stderr);
	if (has_field || has_id) {
		fputs(" (", stderr);
		if (has_field) {
			fputs("field: ", stderr);
			isoctl_fputs_clean(field, stderr);
		}
		if (has_id)
			fprintf(stderr, "%srequest id: %s", has_field ? ", " : "", request_id);
		fputc(')', stderr);
	}
	fputc('\n', stderr);
}

/* Creates the client on first use. Returns 0 or an exit code. */
static int ensure_client(struct isoctl *ctx)
{
	char token[TOKEN_FILE_MAX + 1] = "";
	const char *tok = NULL, *env;
	struct iso_client_options o = {0};
	struct iso_error err = {0};
	int r = 0;

	if (ctx->client)
		return 0;
	if (ctx->token && ctx->token_file)
		return isoctl_usage_error(ctx, "--token and --token-file exclude each other");
	if (ctx->token) {
		if (!ctx->token[0])
			return isoctl_usage_error(ctx, "--token: empty token");
		tok = ctx->token;
	} else if (ctx->token_file) {
		r = read_token_file(ctx->token_file, "--token-file", token, sizeof(token));
		tok = token;
	} else if ((env = env_nonempty("ISOSTACK_TOKEN"))) {
		tok = env;
	} else if ((env = env_nonempty("ISOSTACK_TOKEN_FILE"))) {
		r = read_token_file(env, "ISOSTACK_TOKEN_FILE", token, sizeof(token));
		tok = token;
	}
	if (r) {
		explicit_bzero(token, sizeof(token));
		return r;
	}
	o.url = ctx->url ? ctx->url : env_nonempty("ISOSTACK_URL");
	o.token = tok;
	o.ca_file = ctx->ca_file;
	o.timeout_ms = ctx->timeout_ms;
	o.user_agent = "isoctl/" ISO_VERSION;
	r = iso_client_new(&o, &ctx->client, &err);
	explicit_bzero(token, sizeof(token));
	if (r < 0) {
		print_error(iso_errcode_name(err.code), err.message, err.field, NULL);
		return err.code == ISO_E_INVALID ? ISOCTL_EXIT_USAGE : ISOCTL_EXIT_INTERNAL;
	}
	ctx->have_token = tok != NULL;
	return 0;
}

static int exit_for_status(long status)
{
	switch (status) {
	case 400:
	case 413:
		return ISOCTL_EXIT_INVALID;
	case 401:
	case 403:
		return ISOCTL_EXIT_AUTH;
	case 404:
		return ISOCTL_EXIT_NOT_FOUND;
	case 409:
	case 422:
		return ISOCTL_EXIT_CONFLICT;
	default:
		return status >= 500 ? ISOCTL_EXIT_UNAVAILABLE : ISOCTL_EXIT_INTERNAL;
	}
}

static int transport_failed(const struct isoctl *ctx, const struct iso_error *err)
{
	print_error(iso_errcode_name(err->code), err->message, err->field, NULL);
	switch (err->code) {
	case ISO_E_UNAVAILABLE:
		if (strcmp(err->field, "ca_file") == 0)
			fputs("hint: --cacert FILE must hold the CA that signed the server's "
			      "certificate.\n",
			      stderr);
		else
			fputs("hint: is isostackd running there? Choose the server with --url or "
			      "ISOSTACK_URL.\n",
			      stderr);
		return ISOCTL_EXIT_UNAVAILABLE;
	case ISO_E_INVALID:
		return ISOCTL_EXIT_USAGE; /* --url or --cacert the library refused */
	default:
		return ISOCTL_EXIT_INTERNAL;
	}
}

static int server_failed(const struct isoctl *ctx, const struct iso_response *resp)
{
	struct iso_error err = {0};
	json_t *e = json_object_get(resp->body, "error");
	const char *code = json_string_value(json_object_get(e, "code"));

	iso_response_error(resp, &err);
	print_error(code ? code : iso_errcode_name(err.code), err.message, err.field,
	            resp->request_id);
	if (resp->status == 401 && !ctx->have_token)
		fputs("hint: no token given; use --token-file FILE, ISOSTACK_TOKEN_FILE or "
		      "ISOSTACK_TOKEN.\n",
		      stderr);
	return exit_for_status(resp->status);
}

/* One request, or with method NULL every page of the list at `path`. With
 * `why` the failure is not printed but described there (the server's code,
 * message and field, or the transport's error). */
static int request(struct isoctl *ctx, const char *method, const char *path, const json_t *body,
                   const char *const *headers, struct iso_response *resp, struct iso_error *why)
{
	struct iso_error err = {0};
	int r;

	memset(resp, 0, sizeof(*resp));
	/* Refused before anything is sent: only `token issue` has a secret. */
	if (ctx->output == ISOCTL_OUT_TOKEN && !ctx->token_output)
		return isoctl_usage_error(ctx, "-o token: only 'token issue' prints a secret");
	r = ensure_client(ctx);
	if (r)
		return r;
	if (method)
		r = iso_client_request_headers(ctx->client, method, path, body, headers, resp,
		                               &err);
	else
		r = iso_client_list_all(ctx->client, path, resp, &err);
	if (r < 0) {
		if (!why)
			return transport_failed(ctx, &err);
		*why = err;
		return err.code == ISO_E_UNAVAILABLE ? ISOCTL_EXIT_UNAVAILABLE
		                                     : ISOCTL_EXIT_INTERNAL;
	}
	if (!iso_response_ok(resp)) {
		if (why) {
			iso_response_error(resp, why);
			r = exit_for_status(resp->status);
		} else {
			r = server_failed(ctx, resp);
		}
		iso_response_clear(resp);
		return r;
	}
	return 0;
}

int isoctl_call(struct isoctl *ctx, const char *method, const char *path, const json_t *body,
                struct iso_response *resp)
{
	return request(ctx, method, path, body, NULL, resp, NULL);
}

int isoctl_call_quiet(struct isoctl *ctx, const char *method, const char *path, const json_t *body,
                      const char *const *headers, struct iso_response *resp, struct iso_error *why)
{
	return request(ctx, method, path, body, headers, resp, why);
}

int isoctl_list(struct isoctl *ctx, const char *path, struct iso_response *resp)
{
	return request(ctx, NULL, path, NULL, NULL, resp, NULL);
}

int isoctl_set_string(const struct isoctl *ctx, json_t *obj, const char *key, const char *what,
                      const char *value)
{
	json_t *v = json_string(value);

	if (!v) /* jansson refuses only invalid UTF-8 (or memory) */
		return isoctl_usage_error(ctx, "%s: not valid UTF-8", what);
	return json_object_set_new(obj, key, v) < 0 ? isoctl_oom() : 0;
}

int isoctl_set_int(json_t *obj, const char *key, long long value)
{
	return json_object_set_new(obj, key, json_integer(value)) < 0 ? isoctl_oom() : 0;
}

char *isoctl_path(const char *prefix, const char *segment, const char *suffix)
{
	_cleanup_free_ char *esc = iso_client_escape(segment);
	char *p;

	if (!esc || asprintf(&p, "%s%s%s", prefix, esc, suffix) < 0)
		return NULL;
	return p;
}

int isoctl_query_add(char **path, const char *key, const char *value)
{
	_cleanup_free_ char *esc = iso_client_escape(value);
	char *p;

	if (!esc || asprintf(&p, "%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', key, esc) < 0)
		return -1;
	free(*path);
	*path = p;
	return 0;
}

/* One line for -o id: the object's id, or its name for objects named by
 * the user (tenants, organisations, nodes). Returns 0 or -1 without either. */
static int print_id(const json_t *obj)
{
	const char *id = json_string_value(json_object_get(obj, "id"));

	if (!id)
		id = json_string_value(json_object_get(obj, "name"));
	if (!id)
		return -1;
	isoctl_fputs_clean(id, stdout);
	fputc('\n', stdout);
	return 0;
}

static int print_ids(const struct isoctl *ctx, const json_t *body)
{
	const json_t *items = json_object_get(body, "items");
	size_t i;
	json_t *it;

	if (!body) /* 204 No Content: nothing to name */
		return 0;
	if (!json_is_array(items))
		return print_id(body) < 0 ? isoctl_usage_error(ctx, "-o id: the answer has no id")
		                          : 0;
	json_array_foreach (items, i, it) {
		if (print_id(it) < 0)
			return isoctl_usage_error(ctx, "-o id: the answer has no id");
	}
	return 0;
}

int isoctl_render(const struct isoctl *ctx, const struct iso_response *resp,
                  int (*table)(const json_t *body))
{
	const char *secret;

	switch (ctx->output) {
	case ISOCTL_OUT_JSON:
		isoctl_print_json(resp->body);
		return 0;
	case ISOCTL_OUT_ID:
		return print_ids(ctx, resp->body);
	case ISOCTL_OUT_TOKEN:
		secret = json_string_value(json_object_get(resp->body, "token"));
		if (!secret)
			return ISOCTL_EXIT_INTERNAL;
		isoctl_fputs_clean(secret, stdout);
		fputc('\n', stdout);
		return 0;
	case ISOCTL_OUT_TABLE:
		break;
	}
	return table(resp->body);
}

int isoctl_call_render(struct isoctl *ctx, const char *method, const char *path, const json_t *body,
                       int (*table)(const json_t *body))
{
	_cleanup_response_ struct iso_response resp = {0};
	int r = isoctl_call(ctx, method, path, body, &resp);

	return r ? r : isoctl_render(ctx, &resp, table);
}

int isoctl_exit_of_error(const struct iso_error *e)
{
	switch (e->code) {
	case ISO_E_INVALID:
		return ISOCTL_EXIT_INVALID;
	case ISO_E_NOT_FOUND:
		return ISOCTL_EXIT_NOT_FOUND;
	default:
		return ISOCTL_EXIT_INTERNAL;
	}
}

int isoctl_fail_local(const struct iso_error *e)
{
	fprintf(stderr, "isoctl: %s\n", e->message);
	return isoctl_exit_of_error(e);
}

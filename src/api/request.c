/* request.c: one HTTP request's head as the rest of the API sees it. The
 * server collects the target and the header lines once (from libmicrohttpd,
 * or from api_handle_raw for the fuzzer) and this file decodes them with our
 * own limits, refusing what is ambiguous rather than guessing: a control
 * character or NUL in the decoded path, repeated query keys, more parameters
 * or header lines than any route needs, two Authorization headers, a body
 * framed both by Content-Length and Transfer-Encoding. Nothing here reads a
 * socket or libmicrohttpd's connection. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <strings.h>

#include "api/internal.h"

struct api_request *api_request_new(struct iso_controller *ctl, const char *method,
                                    const char *target)
{
	struct api_request *r = calloc(1, sizeof(*r));
	size_t n;

	if (!r)
		return NULL;
	r->ctl = ctl;
	iso_strlcpy(r->method, method ? method : "", sizeof(r->method));
	target = target ? target : "";
	n = strlen(target);
	if (n > API_MAX_TARGET) {
		r->target_too_long = true;
		n = API_MAX_TARGET;
	}
	r->target = strndup(target, n);
	if (!r->target) {
		free(r);
		return NULL;
	}
	return r;
}

static void kv_free(struct api_kv *kv, int n)
{
	for (int i = 0; i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

void api_request_free(struct api_request *r)
{
	if (!r)
		return;
	json_decref(r->reply);
	free(r->body);
	free(r->target);
	kv_free(r->query, r->n_query);
	kv_free(r->headers, r->n_headers);
	sodium_memzero(&r->who, sizeof(r->who));
	sodium_memzero(r->set_cookie, sizeof(r->set_cookie));
	free(r);
}

static int kv_add(struct api_kv **kv, int *n, const char *name, size_t name_len, const char *value,
                  size_t value_len)
{
	struct api_kv *nk = realloc(*kv, sizeof(**kv) * (size_t)(*n + 1));

	if (!nk)
		return -ENOMEM;
	*kv = nk;
	nk[*n].name = strndup(name, name_len);
	nk[*n].value = strndup(value ? value : "", value ? value_len : 0);
	if (!nk[*n].name || !nk[*n].value) {
		free(nk[*n].name);
		free(nk[*n].value);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

int api_request_add_header(struct api_request *r, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = value ? strlen(value) : 0;

	r->header_bytes += nl + vl;
	if (r->n_headers >= API_MAX_HEADERS || r->header_bytes > API_MAX_HEADER_BYTES) {
		r->too_many_headers = true; /* counted, not kept */
		return 0;
	}
	return kv_add(&r->headers, &r->n_headers, name, nl, value, vl);
}

const char *api_header(const struct api_request *r, const char *name, int *count)
{
	const char *first = NULL;
	int n = 0;

	for (int i = 0; i < r->n_headers; i++) {
		if (strcasecmp(r->headers[i].name, name) != 0)
			continue;
		if (!first)
			first = r->headers[i].value;
		n++;
	}
	if (count)
		*count = n;
	return first;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes src[0..len) into dst (at least len + 1 bytes), '+' as a
 * space when plus; -EINVAL on a broken escape or a decoded control byte. */
static int decode(const char *src, size_t len, bool plus, char *dst, size_t *out_len)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)src[i];
		if (c == '%') {
			int hi = i + 2 < len ? hexval(src[i + 1]) : -1;
			int lo = i + 2 < len ? hexval(src[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
		} else if (c == '+' && plus) {
			c = ' ';
		}
		if (c < 0x20 || c == 0x7f)
			return -EINVAL;
		dst[o++] = (char)c;
	}
	dst[o] = '\0';
	*out_len = o;
	return 0;
}

int api_request_parse_path(struct api_request *r)
{
	size_t plen = strcspn(r->target, "?"), n;
	char *tmp;

	if (r->target_too_long) {
		r->err_status = 414;
		r->err_code = "uri_too_long";
		return iso_error_set(&r->err, ISO_E_INVALID, "path", "request target over %d bytes",
		                     API_MAX_TARGET);
	}
	tmp = malloc(plen + 1);
	if (!tmp)
		return iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "out of memory");
	if (decode(r->target, plen, false, tmp, &n) < 0 || strlen(tmp) != n) {
		free(tmp);
		return iso_error_set(&r->err, ISO_E_INVALID, "path",
		                     "path: a control character, NUL or broken %%-escape");
	}
	if (iso_strlcpy(r->path, tmp, sizeof(r->path)) < 0)
		r->path[0] = '\0'; /* too long for any route: 404 */
	free(tmp);
	return 0;
}

static int header_once(struct api_request *r, const char *name)
{
	int n = 0;

	api_header(r, name, &n);
	if (n > 1)
		return iso_error_set(&r->err, ISO_E_INVALID, name, "header %s: given %d times",
		                     name, n);
	return 0;
}

int api_request_check_headers(struct api_request *r)
{
	const char *te;

	if (r->too_many_headers) {
		r->err_status = 431;
		r->err_code = "header_fields_too_large";
		return iso_error_set(&r->err, ISO_E_INVALID, "headers",
		                     "request headers over %d lines or %d bytes", API_MAX_HEADERS,
		                     API_MAX_HEADER_BYTES);
	}
	if (header_once(r, "Authorization") < 0 || header_once(r, "Content-Length") < 0 ||
	    header_once(r, "Transfer-Encoding") < 0 || header_once(r, "X-Request-Id") < 0)
		return -EINVAL;
	te = api_header(r, "Transfer-Encoding", NULL);
	if (te && api_header(r, "Content-Length", NULL))
		return iso_error_set(&r->err, ISO_E_INVALID, "Transfer-Encoding",
		                     "both Content-Length and Transfer-Encoding: the body's length "
		                     "is ambiguous");
	if (te && strcasecmp(te, "chunked") != 0)
		return iso_error_set(&r->err, ISO_E_INVALID, "Transfer-Encoding",
		                     "Transfer-Encoding: only \"chunked\" is accepted");
	return 0;
}

int api_request_parse_query(struct api_request *r)
{
	const char *q = strchr(r->target, '?');
	_cleanup_free_ char *key = NULL, *val = NULL;

	if (!q || r->n_query > 0)
		return 0;
	q++;
	key = malloc(strlen(q) + 1);
	val = malloc(strlen(q) + 1);
	if (!key || !val)
		return iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "out of memory");
	while (*q) {
		size_t len = strcspn(q, "&"), klen = strcspn(q, "="), kn, vn = 0;
		bool has_val = klen < len;

		if (len == 0) { /* "a&&b": nothing between */
			q++;
			continue;
		}
		if (r->n_query == API_MAX_QUERY_PARAMS)
			return iso_error_set(&r->err, ISO_E_INVALID, "query",
			                     "query: more than %d parameters",
			                     API_MAX_QUERY_PARAMS);
		if (decode(q, has_val ? klen : len, true, key, &kn) < 0 || strlen(key) != kn ||
		    (has_val && decode(q + klen + 1, len - klen - 1, true, val, &vn) < 0))
			return iso_error_set(&r->err, ISO_E_INVALID, "query",
			                     "query: a control character, NUL or broken %%-escape");
		if (!has_val)
			val[0] = '\0';
		if (api_query(r, key)) {
			char field[ISO_ERR_FIELD_MAX];
			snprintf(field, sizeof(field), "%.80s", key);
			return iso_error_set(&r->err, ISO_E_INVALID, field,
			                     "query parameter \"%s\": given more than once", field);
		}
		if (kv_add(&r->query, &r->n_query, key, kn, val, vn) < 0)
			return iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "out of memory");
		q += len;
		if (*q == '&')
			q++;
	}
	return 0;
}

int api_form_parse(const char *body, size_t len, const char *const *allowed, char **values,
                   struct iso_error *err)
{
	size_t n_allowed = 0, i = 0;

	while (allowed[n_allowed])
		values[n_allowed++] = NULL;
	if (len > API_MAX_FORM)
		return iso_error_set(err, ISO_E_INVALID, NULL, "form body: over %d bytes",
		                     API_MAX_FORM);
	while (i < len) {
		size_t end = i, eq, kn, vn;
		char key[API_MAX_FORM + 1], val[API_MAX_FORM + 1];
		int k = -1;

		while (end < len && body[end] != '&')
			end++;
		for (eq = i; eq < end && body[eq] != '='; eq++)
			;
		if (eq == end || eq == i)
			goto bad;
		if (decode(body + i, eq - i, true, key, &kn) < 0 || strlen(key) != kn)
			goto bad;
		for (size_t a = 0; a < n_allowed && k < 0; a++)
			if (strcmp(allowed[a], key) == 0)
				k = (int)a;
		if (k < 0) {
			char field[ISO_ERR_FIELD_MAX];
			snprintf(field, sizeof(field), "%.60s", key);
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "form field \"%s\": unknown", field);
		}
		if (values[k])
			return iso_error_set(err, ISO_E_INVALID, allowed[k],
			                     "form field \"%s\": given more than once", allowed[k]);
		if (decode(body + eq + 1, end - eq - 1, true, val, &vn) < 0 || strlen(val) != vn)
			return iso_error_set(
			    err, ISO_E_INVALID, allowed[k],
			    "form field \"%s\": a control character, NUL or broken "
			    "%%-escape",
			    allowed[k]);
		values[k] = strndup(val, vn);
		sodium_memzero(val, sizeof(val));
		if (!values[k])
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		i = end + 1;
	}
	return 0;
bad:
	return iso_error_set(err, ISO_E_INVALID, NULL,
	                     "form body: want name=value pairs separated by '&' "
	                     "(application/x-www-form-urlencoded)");
}

void api_form_free(char **values, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (values[i])
			sodium_memzero(values[i], strlen(values[i]));
		free(values[i]);
		values[i] = NULL;
	}
}

int api_cookie(const struct api_request *r, const char *name, char *buf, size_t size,
               struct iso_error *err)
{
	size_t nl = strlen(name);
	int found = 0;

	buf[0] = '\0';
	for (int h = 0; h < r->n_headers; h++) {
		const char *p = r->headers[h].value;
		if (strcasecmp(r->headers[h].name, "Cookie") != 0)
			continue;
		while (*p) {
			size_t len = strcspn(p, ";");
			const char *q = p;
			while (*q == ' ' && q < p + len)
				q++;
			if ((size_t)(p + len - q) > nl && strncmp(q, name, nl) == 0 &&
			    q[nl] == '=') {
				size_t vl = (size_t)(p + len - q) - nl - 1;
				if (++found > 1 || vl >= size)
					return iso_error_set(
					    err, ISO_E_INVALID, "Cookie",
					    "header Cookie: %s given twice or too long", name);
				memcpy(buf, q + nl + 1, vl);
				buf[vl] = '\0';
			}
			p += len;
			if (*p == ';')
				p++;
		}
	}
	return found;
}

int api_request_append_body(struct api_request *r, const char *data, size_t len)
{
	char *nb;

	if (len == 0)
		return 0;
	if (r->body_too_large || r->body_len + len > ISO_API_MAX_BODY) {
		r->body_too_large = true; /* read on and discarded: the client gets its 413 */
		return 0;
	}
	nb = realloc(r->body, r->body_len + len + 1);
	if (!nb)
		return -ENOMEM;
	memcpy(nb + r->body_len, data, len);
	r->body = nb;
	r->body_len += len;
	r->body[r->body_len] = '\0';
	return 0;
}

void api_request_log_target(const struct api_request *r, char *buf, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (const char *p = r->target; *p && o + 5 < size; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o] = '\0';
}

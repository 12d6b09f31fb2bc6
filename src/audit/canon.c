/* canon.c: the one canonical JSON writer of the audit log. An event must have
 * exactly one byte string, so that its hash means something and any other
 * verifier can rebuild it: this reproduces Python's
 * json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
 * byte for byte for the values the audit log allows (no reals). The rules are
 * spelt out in docs/audit.md; tests/unit/test_audit.c holds golden strings
 * made with Python. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/internal.h"

void canon_put(struct canon_buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 512; /* most events fit at once */
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0'; /* always a C string too */
}

void canon_int(struct canon_buf *b, long long v)
{
	char num[24];
	char *p = num + sizeof(num);
	/* Through unsigned, so that LLONG_MIN has a magnitude too. */
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;

	do
		*--p = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		*--p = '-';
	canon_put(b, p, (size_t)(num + sizeof(num) - p));
}

/* Decodes the UTF-8 sequence at s[0..n) into *cp and returns how many bytes
 * it took. An ill-formed sequence gives U+FFFD for its "maximal subpart"
 * (Unicode 3.9, table 3-7): the lead byte and the continuation bytes that
 * could still have been valid, or the one byte when no valid sequence starts
 * with it. That is what Python's bytes.decode("utf-8", "replace") does, so an
 * event with stray bytes is still recorded, the same way everywhere. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp, bool *valid)
{
	uint32_t c = s[0];
	unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
	size_t len;

	*valid = true;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2, c &= 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, c &= 0x0f;
		lo = c == 0x0 ? 0xa0 : 0x80; /* no overlongs */
		hi = c == 0xd ? 0x9f : 0xbf; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, c &= 0x07;
		lo = c == 0x0 ? 0x90 : 0x80; /* no overlongs */
		hi = c == 0x4 ? 0x8f : 0xbf; /* nothing above U+10FFFF */
	} else {
		*valid = false;
		*cp = 0xfffd;
		return 1;
	}
	for (size_t i = 1; i < len; i++) {
		if (i >= n || s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf)) {
			*valid = false;
			*cp = 0xfffd;
			return i;
		}
		c = (c << 6) | (s[i] & 0x3f);
	}
	*cp = c;
	return len;
}

static void put_u(struct canon_buf *b, uint32_t unit)
{
	static const char hexd[] = "0123456789abcdef";
	char esc[6] = {'\\',
	               'u',
	               hexd[(unit >> 12) & 15],
	               hexd[(unit >> 8) & 15],
	               hexd[(unit >> 4) & 15],
	               hexd[unit & 15]};

	canon_put(b, esc, sizeof(esc));
}

/* Printable ASCII except '"' and '\\' goes out as it is; '"', '\\', \b, \f,
 * \n, \r and \t get their two-character escapes; every other byte below 0x20,
 * DEL (0x7f) and every non-ASCII code point becomes \uXXXX with lowercase hex
 * (above U+FFFF: a UTF-16 surrogate pair). "/" is not escaped. Ill-formed
 * UTF-8 becomes \ufffd as utf8_next says. */
void canon_string(struct canon_buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0;

	canon_put(b, "\"", 1);
	while (i < n) {
		unsigned char c = u[i];
		if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\') {
			i++;
			continue;
		}
		canon_put(b, s + run, i - run);
		if (c < 0x80) {
			const char *short_esc = NULL;
			switch (c) {
			case '"':
				short_esc = "\\\"";
				break;
			case '\\':
				short_esc = "\\\\";
				break;
			case '\b':
				short_esc = "\\b";
				break;
			case '\f':
				short_esc = "\\f";
				break;
			case '\n':
				short_esc = "\\n";
				break;
			case '\r':
				short_esc = "\\r";
				break;
			case '\t':
				short_esc = "\\t";
				break;
			default:
				break;
			}
			if (short_esc)
				canon_put(b, short_esc, 2);
			else
				put_u(b, c);
			i++;
		} else {
			uint32_t cp;
			bool valid;
			size_t len = utf8_next(u + i, n - i, &cp, &valid); /* U+FFFD if not */
			if (cp >= 0x10000) {
				cp -= 0x10000;
				put_u(b, 0xd800 + (cp >> 10));
				put_u(b, 0xdc00 + (cp & 0x3ff));
			} else {
				put_u(b, cp);
			}
			i += len;
		}
		run = i;
	}
	canon_put(b, s + run, n - run);
	canon_put(b, "\"", 1);
}

static int key_cmp(const void *a, const void *b)
{
	/* Byte order of UTF-8 is code point order: what Python's sort_keys uses. */
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Extend path with a segment for messages; return the old length. */
static size_t path_key(char *path, size_t size, const char *key)
{
	size_t old = strlen(path);

	if (old < size)
		snprintf(path + old, size - old, ".%s", key);
	return old;
}

static size_t path_index(char *path, size_t size, size_t index)
{
	size_t old = strlen(path);

	if (old < size)
		snprintf(path + old, size - old, "[%zu]", index);
	return old;
}

int canon_value(struct canon_buf *b, const json_t *v, char *path, size_t path_size,
                struct iso_error *err)
{
	size_t old;
	int r;

	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		size_t n = json_object_size(v), i = 0;
		const char **keys = malloc((n ? n : 1) * sizeof(*keys));
		const char *key;
		json_t *child;

		if (!keys) {
			b->oom = true;
			return -ENOMEM;
		}
		json_object_foreach ((json_t *)v, key, child)
			keys[i++] = key;
		qsort(keys, n, sizeof(*keys), key_cmp);
		canon_put(b, "{", 1);
		for (i = 0; i < n; i++) {
			if (i)
				canon_put(b, ",", 1);
			canon_string(b, keys[i], strlen(keys[i]));
			canon_put(b, ":", 1);
			old = path_key(path, path_size, keys[i]);
			r = canon_value(b, json_object_get(v, keys[i]), path, path_size, err);
			path[old] = '\0';
			if (r < 0) {
				free(keys);
				return r;
			}
		}
		free(keys);
		canon_put(b, "}", 1);
		return 0;
	}
	case JSON_ARRAY:
		canon_put(b, "[", 1);
		for (size_t i = 0; i < json_array_size(v); i++) {
			if (i)
				canon_put(b, ",", 1);
			old = path_index(path, path_size, i);
			r = canon_value(b, json_array_get(v, i), path, path_size, err);
			path[old] = '\0';
			if (r < 0)
				return r;
		}
		canon_put(b, "]", 1);
		return 0;
	case JSON_STRING:
		canon_string(b, json_string_value(v), json_string_length(v));
		return 0;
	case JSON_INTEGER:
		canon_int(b, (long long)json_integer_value(v));
		return 0;
	case JSON_REAL:
		return iso_error_set(
		    err, ISO_E_INVALID, path,
		    "audit event: %s is a number with a fraction or an exponent; "
		    "only integers are allowed, so that the encoding is unambiguous",
		    path);
	case JSON_TRUE:
		canon_put(b, "true", 4);
		return 0;
	case JSON_FALSE:
		canon_put(b, "false", 5);
		return 0;
	case JSON_NULL:
		canon_put(b, "null", 4);
		return 0;
	}
	return iso_error_set(err, ISO_E_INTERNAL, path, "audit event: %s has an unknown type",
	                     path);
}

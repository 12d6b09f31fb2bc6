/* yaml.c: the only file of the inventory loader that talks to libfyaml. It
 * parses exactly one document with libfyaml's diagnostics collected (never
 * printed), and offers strict typed accessors that refuse aliases, tags,
 * nulls, wrong types and out-of-range values, each with an error of the form
 * "FILE:LINE: path: message". Scalars are typed by the YAML 1.2 core schema. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "internal.h"

/* ---- errors and paths ---- */

int inv_fail(struct inv_ctx *c, const char *path, int line, const char *fmt, ...)
{
	char msg[ISO_ERR_MSG_MAX] = "";
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		msg[0] = '\0';
	if (path && path[0])
		return iso_error_set(c->err, ISO_E_INVALID, path, "%s:%d: %s: %s", c->name, line,
		                     path, msg);
	return iso_error_set(c->err, ISO_E_INVALID, "", "%s:%d: %s", c->name, line, msg);
}

int inv_oom(struct inv_ctx *c)
{
	iso_error_set(c->err, ISO_E_INTERNAL, "", "%s: out of memory", c->name);
	return -ENOMEM;
}

void inv_path_key(char out[ISO_ERR_FIELD_MAX], const char *parent, const char *key)
{
	int n;

	if (parent[0])
		n = snprintf(out, ISO_ERR_FIELD_MAX, "%s.%s", parent, key);
	else
		n = snprintf(out, ISO_ERR_FIELD_MAX, "%s", key);
	if (n < 0)
		out[0] = '\0';
	/* n >= ISO_ERR_FIELD_MAX: truncated, the prefix still points the way. */
}

void inv_path_index(char out[ISO_ERR_FIELD_MAX], const char *parent, int i)
{
	int n = snprintf(out, ISO_ERR_FIELD_MAX, "%s[%d]", parent, i);

	if (n < 0)
		out[0] = '\0';
}

/* ---- parsing ---- */

static void sanitize(const char *s, size_t len, char *buf, size_t size);

/* Everything libfyaml would print goes nowhere: errors are collected and
 * turned into one iso_error by inv_yaml_parse. */
static void diag_sink(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
	(void)diag;
	(void)user;
	(void)buf;
	(void)len;
}

static int report_diag(struct inv_ctx *c, struct fy_diag *diag)
{
	void *it = NULL;
	struct fy_diag_error *e = fy_diag_errors_iterate(diag, &it);
	const char *msg, *tok = NULL;
	char what[64] = "";
	size_t len = 0;

	if (!e)
		return inv_fail(c, "", 1, "YAML syntax error");
	msg = e->msg ? e->msg : "unknown";
	/* Name the key of a duplicate-key error: libfyaml leaves it out. */
	if (e->fyt && strcmp(msg, "duplicate key") == 0)
		tok = fy_token_get_text(e->fyt, &len);
	if (tok && len) {
		char t[48];
		sanitize(tok, len, t, sizeof(t));
		snprintf(what, sizeof(what), " '%s'", t);
	}
	return inv_fail(c, "", e->line > 0 ? e->line : 1, "YAML syntax error: %s%s", msg, what);
}

static void diag_destroyp(struct fy_diag **d)
{
	if (*d)
		fy_diag_destroy(*d);
}

static void parser_destroyp(struct fy_parser **p)
{
	if (*p)
		fy_parser_destroy(*p);
}

static void document_destroyp(struct fy_document **d)
{
	if (*d)
		fy_document_destroy(*d);
}

int inv_yaml_parse(struct inv_ctx *c, const char *yaml, size_t len, struct fy_document **doc)
{
	_cleanup_(diag_destroyp) struct fy_diag *diag = NULL;
	_cleanup_(parser_destroyp) struct fy_parser *parser = NULL;
	_cleanup_(document_destroyp) struct fy_document *first = NULL;
	_cleanup_(document_destroyp) struct fy_document *second = NULL;
	struct fy_diag_cfg dcfg;
	struct fy_parse_cfg pcfg;
	size_t utf8 = iso_utf8_prefix(yaml, len);

	/* YAML is Unicode text, and libfyaml 0.7.12 spins for ever on a byte
	 * that is not UTF-8 in a directive line ("%\xff"; found by
	 * tests/fuzz/fuzz_inventory.c): such bytes never reach it. */
	if (utf8 < len) {
		int line = 1;
		for (size_t i = 0; i < utf8; i++)
			line += yaml[i] == '\n';
		return inv_fail(c, "", line,
		                "byte 0x%02x is not UTF-8 (the inventory is UTF-8 text)",
		                (unsigned char)yaml[utf8]);
	}
	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL;
	dcfg.output_fn = diag_sink;
	dcfg.user = NULL;
	dcfg.colorize = false;
	dcfg.level = FYET_ERROR;
	diag = fy_diag_create(&dcfg);
	if (!diag)
		return inv_oom(c);
	fy_diag_set_collect_errors(diag, true);

	memset(&pcfg, 0, sizeof(pcfg));
	pcfg.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2;
	pcfg.diag = diag;
	parser = fy_parser_create(&pcfg);
	if (!parser)
		return inv_oom(c);
	if (fy_parser_set_string(parser, yaml, len) != 0)
		return inv_oom(c);

	first = fy_parse_load_document(parser);
	if (fy_diag_got_error(diag))
		return report_diag(c, diag);
	if (first) {
		second = fy_parse_load_document(parser);
		if (fy_diag_got_error(diag))
			return report_diag(c, diag);
		if (second)
			return inv_fail(c, "", inv_line(fy_document_root(second), 1),
			                "a second YAML document ('---'): the inventory is one "
			                "document");
	}
	*doc = ISO_TAKE(first);
	return 0;
}

int inv_line(struct fy_node *n, int fallback)
{
	void *it = NULL;

	if (!n)
		return fallback;
	switch (fy_node_get_type(n)) {
	case FYNT_SCALAR: {
		struct fy_token *t = fy_node_get_scalar_token(n);
		const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
		return m ? m->line + 1 : fallback;
	}
	case FYNT_MAPPING: {
		struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
		return p ? inv_line(fy_node_pair_key(p), fallback) : fallback;
	}
	case FYNT_SEQUENCE:
		return inv_line(fy_node_sequence_iterate(n, &it), fallback);
	}
	return fallback;
}

/* ---- scalar typing (YAML 1.2 core schema) ---- */

enum inv_kind {
	K_NULL,
	K_BOOL,
	K_INT,
	K_FLOAT,
	K_STRING,
	K_MAP,
	K_SEQ,
	K_ALIAS,
};

static bool text_is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && memcmp(s, word, n) == 0;
}

static bool all_in(const char *s, size_t n, const char *set)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(set, s[i]))
			return false;
	return true;
}

#define DIGITS    "0123456789"
#define HEXDIGITS "0123456789abcdefABCDEF"

static bool text_is_int(const char *s, size_t n)
{
	if (n > 2 && s[0] == '0' && s[1] == 'x')
		return all_in(s + 2, n - 2, HEXDIGITS);
	if (n > 2 && s[0] == '0' && s[1] == 'o')
		return all_in(s + 2, n - 2, "01234567");
	if (n > 0 && (s[0] == '-' || s[0] == '+'))
		s++, n--;
	return all_in(s, n, DIGITS);
}

static bool text_is_float(const char *s, size_t n)
{
	size_t i = 0, digits = 0;

	if (n > 0 && (s[0] == '-' || s[0] == '+'))
		i++;
	if (text_is(s + i, n - i, ".inf") || text_is(s + i, n - i, ".Inf") ||
	    text_is(s + i, n - i, ".INF"))
		return true;
	if (text_is(s, n, ".nan") || text_is(s, n, ".NaN") || text_is(s, n, ".NAN"))
		return true;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++, digits++;
	if (i < n && s[i] == '.') {
		i++;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++, digits++;
	}
	if (digits == 0)
		return false;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		size_t exp = 0;
		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			i++;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++, exp++;
		if (exp == 0)
			return false;
	}
	return i == n;
}

static bool is_null_scalar(struct fy_node *n)
{
	size_t len = 0;
	const char *s;

	if (fy_node_get_style(n) != FYNS_PLAIN)
		return false;
	s = fy_node_get_scalar(n, &len);
	return !s || len == 0 || text_is(s, len, "~") || text_is(s, len, "null") ||
	       text_is(s, len, "Null") || text_is(s, len, "NULL");
}

static enum inv_kind kind_of(struct fy_node *n)
{
	size_t len = 0;
	const char *s;

	if (!n)
		return K_NULL;
	switch (fy_node_get_type(n)) {
	case FYNT_MAPPING:
		return K_MAP;
	case FYNT_SEQUENCE:
		return K_SEQ;
	case FYNT_SCALAR:
		break;
	}
	if (fy_node_get_style(n) == FYNS_ALIAS)
		return K_ALIAS;
	if (fy_node_get_style(n) != FYNS_PLAIN)
		return K_STRING;
	if (is_null_scalar(n))
		return K_NULL;
	s = fy_node_get_scalar(n, &len);
	if (text_is(s, len, "true") || text_is(s, len, "True") || text_is(s, len, "TRUE") ||
	    text_is(s, len, "false") || text_is(s, len, "False") || text_is(s, len, "FALSE"))
		return K_BOOL;
	if (text_is_int(s, len))
		return K_INT;
	if (text_is_float(s, len))
		return K_FLOAT;
	return K_STRING;
}

static const char *kind_name(enum inv_kind k)
{
	switch (k) {
	case K_NULL:
		return "no value";
	case K_BOOL:
		return "a boolean";
	case K_INT:
		return "an integer";
	case K_FLOAT:
		return "a float";
	case K_STRING:
		return "a string";
	case K_MAP:
		return "a mapping";
	case K_SEQ:
		return "a list";
	case K_ALIAS:
		return "an alias";
	}
	return "something else";
}

/* Text for a message: at most `size` - 4 bytes, unprintables as '?'. */
static void sanitize(const char *s, size_t len, char *buf, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; s && i < len && o + 4 < size; i++) {
		unsigned char ch = (unsigned char)s[i];
		buf[o++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	if (s && o < len && o + 3 < size) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
}

/* A scalar's text as " 'text'" for a message. */
static void quote_scalar(struct fy_node *n, char *buf, size_t size)
{
	size_t len = 0;
	const char *s = fy_node_get_scalar(n, &len);
	char t[48];

	sanitize(s, len, t, sizeof(t));
	snprintf(buf, size, " '%s'", t);
}

/* "a string 'abc'", "a list", ... for "expected X, got Y". */
static void describe(struct fy_node *n, char *buf, size_t size)
{
	enum inv_kind k = kind_of(n);
	char q[64] = "";

	if (k == K_BOOL || k == K_INT || k == K_FLOAT || k == K_STRING)
		quote_scalar(n, q, sizeof(q));
	snprintf(buf, size, "%s%s", kind_name(k), q);
}

/* Refuses what no key of the inventory accepts: aliases, tags, nulls. */
static int check_value(struct inv_ctx *c, struct fy_node *n, const char *path, int line,
                       const char *expected)
{
	size_t tlen = 0;

	if (!n || kind_of(n) == K_NULL)
		return inv_fail(c, path, inv_line(n, line), "has no value (expected %s)", expected);
	if (kind_of(n) == K_ALIAS)
		return inv_fail(c, path, inv_line(n, line),
		                "aliases are not supported (use node_classes to share settings)");
	if (fy_node_get_tag(n, &tlen))
		return inv_fail(c, path, inv_line(n, line),
		                "YAML tags are not supported (expected %s)", expected);
	return 0;
}

static int wrong_type(struct inv_ctx *c, struct fy_node *n, const char *path, int line,
                      const char *expected)
{
	char got[96];

	describe(n, got, sizeof(got));
	return inv_fail(c, path, inv_line(n, line), "expected %s, got %s", expected, got);
}

bool inv_is_map(struct fy_node *n)
{
	return kind_of(n) == K_MAP;
}
bool inv_is_seq(struct fy_node *n)
{
	return kind_of(n) == K_SEQ;
}

/* ---- accessors ---- */

int inv_get_map(struct inv_ctx *c, struct fy_node *n, const char *path, int line)
{
	int r = check_value(c, n, path, line, "a mapping");

	if (r < 0)
		return r;
	if (kind_of(n) != K_MAP)
		return wrong_type(c, n, path, line, "a mapping");
	return 0;
}

int inv_map_match(struct inv_ctx *c, struct fy_node *map, const char *path, int line,
                  struct inv_field *fields, size_t nf, const char *(*hint)(const char *key))
{
	struct fy_node_pair *p;
	void *it = NULL;
	int r;

	r = inv_get_map(c, map, path, line);
	if (r < 0)
		return r;
	for (size_t i = 0; i < nf; i++) {
		fields[i].val = NULL;
		fields[i].line = 0;
		fields[i].present = false;
	}
	while ((p = fy_node_mapping_iterate(map, &it))) {
		struct fy_node *k = fy_node_pair_key(p);
		char key[ISO_NAME_MAX], kpath[ISO_ERR_FIELD_MAX], allowed[ISO_ERR_MSG_MAX];
		const char *s, *why;
		size_t len = 0, o = 0;
		int kline = inv_line(k, line);
		size_t i;

		if (kind_of(k) != K_STRING && kind_of(k) != K_INT && kind_of(k) != K_BOOL)
			return inv_fail(c, path, kline, "keys must be plain words, got %s",
			                kind_name(kind_of(k)));
		s = fy_node_get_scalar(k, &len);
		for (i = 0; i < nf; i++)
			if (text_is(s, len, fields[i].key))
				break;
		if (i < nf) {
			fields[i].val = fy_node_pair_value(p);
			fields[i].line = kline;
			fields[i].present = true;
			continue;
		}
		sanitize(s, len, key, sizeof(key));
		allowed[0] = '\0';
		for (size_t j = 0; j < nf && o < sizeof(allowed); j++) {
			int w = snprintf(allowed + o, sizeof(allowed) - o, "%s%s", j ? ", " : "",
			                 fields[j].key);
			if (w < 0)
				break;
			o += (size_t)w;
		}
		inv_path_key(kpath, path, key);
		why = hint ? hint(key) : NULL;
		return inv_fail(c, kpath, kline, "unknown key '%s'%s%s (allowed: %s)", key,
		                why ? ": " : "", why ? why : "", allowed);
	}
	return 0;
}

int inv_missing(struct inv_ctx *c, const char *parent, int line, const char *key, const char *why)
{
	char path[ISO_ERR_FIELD_MAX];

	inv_path_key(path, parent, key);
	return inv_fail(c, path, line, "missing required key '%s'%s%s", key, why ? ": " : "",
	                why ? why : "");
}

int inv_get_string(struct inv_ctx *c, struct fy_node *n, const char *path, int line, char *buf,
                   size_t size)
{
	size_t len = 0;
	const char *s;
	int r;

	r = check_value(c, n, path, line, "a string");
	if (r < 0)
		return r;
	if (kind_of(n) == K_MAP || kind_of(n) == K_SEQ)
		return wrong_type(c, n, path, line, "a string");
	s = fy_node_get_scalar(n, &len);
	if (!s)
		return wrong_type(c, n, path, line, "a string");
	if (len >= size)
		return inv_fail(c, path, inv_line(n, line), "too long (%zu bytes, at most %zu)",
		                len, size - 1);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return inv_fail(c, path, inv_line(n, line),
			                "control characters are not allowed");
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

int inv_get_name(struct inv_ctx *c, struct fy_node *n, const char *path, int line, char *buf)
{
	int r = inv_get_string(c, n, path, line, buf, ISO_NAME_MAX);

	if (r < 0)
		return r;
	if (!iso_name_valid(buf))
		return inv_fail(c, path, inv_line(n, line),
		                "'%s' is not a valid name (1-63 of a-z 0-9 . _ -, starting with "
		                "a letter or digit)",
		                buf);
	return 0;
}

/* Magnitude of a decimal or 0x-hex integer text; false on overflow. */
static bool parse_magnitude(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	unsigned base = 10;

	if (n > 2 && s[0] == '0' && s[1] == 'x') {
		base = 16;
		s += 2;
		n -= 2;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned d;
		if (s[i] >= '0' && s[i] <= '9')
			d = (unsigned)(s[i] - '0');
		else if (s[i] >= 'a' && s[i] <= 'f')
			d = (unsigned)(s[i] - 'a' + 10);
		else
			d = (unsigned)(s[i] - 'A' + 10);
		if (v > (UINT64_MAX - d) / base)
			return false;
		v = v * base + d;
	}
	*out = v;
	return true;
}

int inv_get_int(struct inv_ctx *c, struct fy_node *n, const char *path, int line, int64_t min,
                int64_t max, int64_t *out)
{
	char q[64];
	size_t len = 0;
	const char *s;
	bool neg = false;
	uint64_t mag;
	int64_t v;
	int r;

	r = check_value(c, n, path, line, "an integer");
	if (r < 0)
		return r;
	if (kind_of(n) != K_INT)
		return wrong_type(c, n, path, line, "an integer");
	s = fy_node_get_scalar(n, &len);
	quote_scalar(n, q, sizeof(q));
	if (len > 2 && s[0] == '0' && s[1] == 'o')
		return inv_fail(c, path, inv_line(n, line),
		                "octal is not accepted, write decimal or 0x hex (got%s)", q);
	if (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-';
		s++;
		len--;
	}
	if (len > 1 && s[0] == '0' && s[1] != 'x')
		return inv_fail(c, path, inv_line(n, line),
		                "leading zeros are ambiguous, write decimal without them or 0x "
		                "hex (got%s)",
		                q);
	if (!parse_magnitude(s, len, &mag) || mag > (uint64_t)INT64_MAX)
		return inv_fail(c, path, inv_line(n, line),
		                "must be between %" PRId64 " and %" PRId64 ", got%s", min, max, q);
	v = neg ? -(int64_t)mag : (int64_t)mag;
	if (v < min || v > max)
		return inv_fail(c, path, inv_line(n, line),
		                "must be between %" PRId64 " and %" PRId64 ", got%s", min, max, q);
	*out = v;
	return 0;
}

int inv_get_bool(struct inv_ctx *c, struct fy_node *n, const char *path, int line, bool *out)
{
	size_t len = 0;
	const char *s;
	int r;

	r = check_value(c, n, path, line, "true or false");
	if (r < 0)
		return r;
	if (kind_of(n) != K_BOOL)
		return wrong_type(c, n, path, line, "true or false");
	s = fy_node_get_scalar(n, &len);
	*out = s[0] == 't' || s[0] == 'T';
	return 0;
}

int inv_get_guid(struct inv_ctx *c, struct fy_node *n, const char *path, int line, uint64_t *out)
{
	char text[24];
	size_t len = 0;
	const char *s;
	uint64_t v;
	int r;

	r = check_value(c, n, path, line, "a GUID");
	if (r < 0)
		return r;
	if (fy_node_get_type(n) != FYNT_SCALAR)
		return wrong_type(c, n, path, line, "a GUID (0x and 1-16 hex digits)");
	s = fy_node_get_scalar(n, &len);
	if (!s || len >= sizeof(text) || memchr(s, '\0', len))
		return wrong_type(c, n, path, line, "a GUID (0x and 1-16 hex digits)");
	memcpy(text, s, len);
	text[len] = '\0';
	if (iso_parse_guid(text, &v) < 0)
		return wrong_type(c, n, path, line, "a GUID (0x and 1-16 hex digits)");
	if (v == 0)
		return inv_fail(c, path, inv_line(n, line), "GUID 0 is not a valid GUID");
	*out = v;
	return 0;
}

int inv_get_seq(struct inv_ctx *c, struct fy_node *n, const char *path, int line, int min, int max,
                int *count)
{
	int r, k;

	r = check_value(c, n, path, line, "a list");
	if (r < 0)
		return r;
	if (kind_of(n) != K_SEQ)
		return wrong_type(c, n, path, line, "a list");
	k = fy_node_sequence_item_count(n);
	if (k < min)
		return inv_fail(c, path, inv_line(n, line), "needs at least %d entr%s, got %d", min,
		                min == 1 ? "y" : "ies", k);
	if (k > max)
		return inv_fail(c, path, inv_line(n, line), "has %d entries, at most %d allowed", k,
		                max);
	*count = k;
	return 0;
}

/* ---- the same on matched fields ---- */

int inv_fget_string(struct inv_ctx *c, const char *parent, const struct inv_field *f, char *buf,
                    size_t size)
{
	char path[ISO_ERR_FIELD_MAX];

	inv_path_key(path, parent, f->key);
	return inv_get_string(c, f->val, path, f->line, buf, size);
}

int inv_fget_name(struct inv_ctx *c, const char *parent, const struct inv_field *f, char *buf)
{
	char path[ISO_ERR_FIELD_MAX];

	inv_path_key(path, parent, f->key);
	return inv_get_name(c, f->val, path, f->line, buf);
}

int inv_fget_int(struct inv_ctx *c, const char *parent, const struct inv_field *f, int64_t min,
                 int64_t max, int64_t *out)
{
	char path[ISO_ERR_FIELD_MAX];

	inv_path_key(path, parent, f->key);
	return inv_get_int(c, f->val, path, f->line, min, max, out);
}

int inv_fget_bool(struct inv_ctx *c, const char *parent, const struct inv_field *f, bool *out)
{
	char path[ISO_ERR_FIELD_MAX];

	inv_path_key(path, parent, f->key);
	return inv_get_bool(c, f->val, path, f->line, out);
}

int inv_fget_guid(struct inv_ctx *c, const char *parent, const struct inv_field *f, uint64_t *out)
{
	char path[ISO_ERR_FIELD_MAX];

	inv_path_key(path, parent, f->key);
	return inv_get_guid(c, f->val, path, f->line, out);
}

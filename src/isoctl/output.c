/* output.c: how isoctl shows answers: the server's JSON as it came (pretty),
 * or aligned text tables and key/value blocks built from it. Text from the
 * server is stripped of control characters before it reaches a terminal. */
#include <stdarg.h>
#include <string.h>

#include "isoctl/isoctl.h"

#define COLUMN_GAP "   "

void isoctl_print_json(const json_t *j)
{
	if (!j)
		return;
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
	fputc('\n', stdout);
}

void isoctl_fputs_clean(const char *s, FILE *f)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, f);
	}
}

static void clean(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* Columns a UTF-8 string takes, counting code points (close enough for the
 * names and labels a cluster has). */
static size_t text_width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

void isoctl_table_init(struct isoctl_table *t, size_t ncols, const char *const *headers)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->headers = headers;
}

void isoctl_table_add_owned(struct isoctl_table *t, char *cell)
{
	if (cell && !cell[0]) {
		free(cell);
		cell = strdup("-");
	}
	if (!cell) {
		t->oom = true;
		return;
	}
	if (t->ncells == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		char **p = realloc(t->cells, cap * sizeof(*p));
		if (!p) {
			free(cell);
			t->oom = true;
			return;
		}
		t->cells = p;
		t->cap = cap;
	}
	clean(cell);
	t->cells[t->ncells++] = cell;
}

void isoctl_table_add(struct isoctl_table *t, const char *text)
{
	isoctl_table_add_owned(t, strdup(text && text[0] ? text : "-"));
}

void isoctl_table_addf(struct isoctl_table *t, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	isoctl_table_add_owned(t, n < 0 ? NULL : s);
}

static char *json_text(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		return strdup(json_string_value(v)[0] ? json_string_value(v) : "-");
	case JSON_INTEGER: {
		char *s;
		return asprintf(&s, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) < 0 ? NULL : s;
	}
	case JSON_REAL: {
		char *s;
		return asprintf(&s, "%g", json_real_value(v)) < 0 ? NULL : s;
	}
	case JSON_TRUE:
		return strdup("yes");
	case JSON_FALSE:
		return strdup("no");
	case JSON_NULL:
		return strdup("-");
	default:
		return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	}
}

void isoctl_table_add_json(struct isoctl_table *t, const json_t *v)
{
	isoctl_table_add_owned(t, v ? json_text(v) : strdup("-"));
}

static void print_row(char *const *cells, size_t ncols, const size_t *widths)
{
	for (size_t c = 0; c < ncols; c++) {
		fputs(cells[c], stdout);
		if (c + 1 < ncols) {
			for (size_t w = text_width(cells[c]); w < widths[c]; w++)
				fputc(' ', stdout);
			fputs(COLUMN_GAP, stdout);
		}
	}
	fputc('\n', stdout);
}

int isoctl_table_print(struct isoctl_table *t)
{
	_cleanup_free_ size_t *widths = calloc(t->ncols, sizeof(*widths));
	size_t nrows = t->ncols ? t->ncells / t->ncols : 0;

	if (t->oom || !widths || t->ncells % t->ncols != 0)
		return isoctl_oom();
	for (size_t c = 0; c < t->ncols; c++) {
		if (t->headers)
			widths[c] = text_width(t->headers[c]);
		for (size_t r = 0; r < nrows; r++) {
			size_t w = text_width(t->cells[r * t->ncols + c]);
			if (w > widths[c])
				widths[c] = w;
		}
	}
	if (t->headers)
		print_row((char *const *)t->headers, t->ncols, widths);
	for (size_t r = 0; r < nrows; r++)
		print_row(t->cells + r * t->ncols, t->ncols, widths);
	return 0;
}

void isoctl_table_clear(struct isoctl_table *t)
{
	for (size_t i = 0; i < t->ncells; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

int isoctl_print_object(const json_t *obj)
{
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const char *key;
	json_t *v;

	isoctl_table_init(&t, 2, NULL);
	json_object_foreach ((json_t *)obj, key, v) {
		isoctl_table_addf(&t, "%s:", key);
		isoctl_table_add_json(&t, v);
	}
	return isoctl_table_print(&t);
}

int isoctl_print_rows(const json_t *body, const char *const *headers, size_t ncols,
                      void (*add_row)(struct isoctl_table *t, const json_t *item))
{
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const json_t *items = json_object_get(body, "items");
	size_t i;
	json_t *it;

	isoctl_table_init(&t, ncols, headers);
	if (!items && json_is_object(body))
		add_row(&t, body);
	json_array_foreach (items, i, it) {
		add_row(&t, it);
	}
	return isoctl_table_print(&t);
}

char *isoctl_fmt_gib(const json_t *mib)
{
	json_int_t v;
	char *s;
	int n;

	if (!json_is_integer(mib))
		return strdup("-");
	v = json_integer_value(mib);
	if (v % 1024 == 0)
		n = asprintf(&s, "%" JSON_INTEGER_FORMAT, v / 1024);
	else
		n = asprintf(&s, "%.1f", (double)v / 1024.0);
	return n < 0 ? NULL : s;
}

char *isoctl_fmt_used_total(const json_t *used, const json_t *total, bool gib)
{
	_cleanup_free_ char *u = gib ? isoctl_fmt_gib(used) : json_text(used ? used : json_null());
	_cleanup_free_ char *t =
	    gib ? isoctl_fmt_gib(total) : json_text(total ? total : json_null());
	char *s;

	if (!u || !t || asprintf(&s, "%s/%s", u, t) < 0)
		return NULL;
	return s;
}

/* csv.c: the strict reader of the trace CSVs. The Alibaba files are plain:
 * comma-separated, unquoted, one header line. Anything that is not exactly
 * that (a missing or unknown column, a short line, a number with garbage
 * after it, a blank line, a NUL byte) is reported with the file, line and
 * column, never guessed around. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/internal.h"

#define SIM_FILE_MAX (256u << 20)

int sim_csv_error(struct sim_csv *c, int pos, const char *fmt, ...)
{
	char what[ISO_ERR_MSG_MAX];
	const char *col = pos >= 0 && pos < c->ncols ? c->col_name[pos] : NULL;
	va_list ap;

	va_start(ap, fmt);
	/* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start is one line up */
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return iso_error_set(c->err, ISO_E_INVALID, col ? col : "", "%s:%d: %s%s%s", c->name,
	                     c->line, col ? col : "", col ? ": " : "", what);
}

/* The next line into c->buf, without its line end. 1, 0 at the end, or an
 * error. */
static int read_line(struct sim_csv *c)
{
	const char *nl;
	size_t n;

	if (c->p >= c->end)
		return 0;
	c->line++;
	nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	n = (size_t)((nl ? nl : c->end) - c->p);
	if (n > 0 && c->p[n - 1] == '\r')
		n--;
	if (n > SIM_CSV_MAX_LINE)
		return sim_csv_error(c, -1, "line longer than %d bytes", SIM_CSV_MAX_LINE);
	if (memchr(c->p, '\0', n))
		return sim_csv_error(c, -1, "contains a NUL byte");
	memcpy(c->buf, c->p, n);
	c->buf[n] = '\0';
	c->p = nl ? nl + 1 : c->end;
	if (n == 0)
		return sim_csv_error(c, -1, "empty line");
	if (memchr(c->buf, '"', n))
		return sim_csv_error(c, -1, "quoted fields are not supported");
	return 1;
}

/* Splits c->buf at commas; the number of fields. */
static int split(struct sim_csv *c, int max)
{
	char *s = c->buf;
	int n = 0;

	for (;;) {
		char *comma = strchr(s, ',');
		if (n < max)
			c->field[n] = s;
		n++;
		if (!comma)
			return n;
		*comma = '\0';
		s = comma + 1;
	}
}

int sim_csv_header(struct sim_csv *c, const char *name, const char *text, size_t len,
                   const struct sim_csv_col *cols, int ncols, struct iso_error *err)
{
	char expected[512] = "";
	int n, r;

	memset(c, 0, sizeof(*c));
	c->name = name;
	c->err = err;
	c->p = text;
	c->end = text + len;
	for (int i = 0; i < ncols; i++) {
		size_t l = strlen(expected);
		snprintf(expected + l, sizeof(expected) - l, "%s%s", i ? "," : "", cols[i].name);
		*cols[i].pos = -1;
	}
	if (len == 0)
		return iso_error_set(err, ISO_E_INVALID, "",
		                     "%s: empty file; expected a header line (%s)", name, expected);
	r = read_line(c);
	if (r < 0)
		return r;
	n = split(c, SIM_CSV_MAX_COLS);
	if (n > SIM_CSV_MAX_COLS)
		return sim_csv_error(c, -1, "%d columns in the header; expected %s", n, expected);
	c->ncols = n;
	for (int j = 0; j < n; j++) {
		int k;

		for (k = 0; k < ncols && strcmp(c->field[j], cols[k].name) != 0; k++)
			;
		if (k == ncols)
			return sim_csv_error(c, -1,
			                     "unknown column '%s' in the header; expected a header "
			                     "line (%s)",
			                     c->field[j], expected);
		if (*cols[k].pos >= 0)
			return sim_csv_error(c, -1, "column '%s' appears twice in the header",
			                     cols[k].name);
		*cols[k].pos = j;
		c->col_name[j] = cols[k].name;
	}
	for (int k = 0; k < ncols; k++)
		if (cols[k].required && *cols[k].pos < 0)
			return sim_csv_error(c, -1, "missing column '%s' in the header (%s)",
			                     cols[k].name, expected);
	return 0;
}

int sim_csv_next(struct sim_csv *c)
{
	int r = read_line(c), n;

	if (r <= 0)
		return r;
	n = split(c, SIM_CSV_MAX_COLS);
	if (n != c->ncols)
		return sim_csv_error(c, -1, "%d fields; the header has %d", n, c->ncols);
	return 1;
}

int sim_csv_int(struct sim_csv *c, int pos, int64_t min, int64_t max, int64_t *out)
{
	const char *s = c->field[pos];
	char *end = NULL;
	long long v;

	if (s[0] == '\0')
		return sim_csv_error(c, pos, "empty; expected an integer");
	if (!(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
		return sim_csv_error(c, pos, "'%s' is not an integer", s);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end != '\0' || end == s || (s[0] == '-' && end == s + 1))
		return sim_csv_error(c, pos, "'%s' is not an integer", s);
	if (errno == ERANGE || v < min || v > max)
		return sim_csv_error(c, pos, "%s is out of range %lld..%lld", s, (long long)min,
		                     (long long)max);
	*out = v;
	return 0;
}

int sim_read_file(const char *path, char **text, size_t *len, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "rb");
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t n;

	*text = NULL;
	*len = 0;
	if (!f)
		return iso_error_set(err, errno == ENOENT ? ISO_E_NOT_FOUND : ISO_E_INVALID, "",
		                     "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode))
		return iso_error_set(err, ISO_E_INVALID, "", "%s: not a regular file", path);
	if ((uint64_t)st.st_size > SIM_FILE_MAX)
		return iso_error_set(err, ISO_E_INVALID, "", "%s: larger than %u MiB", path,
		                     SIM_FILE_MAX >> 20);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	n = fread(buf, 1, (size_t)st.st_size, f);
	if (ferror(f))
		return iso_error_set(err, ISO_E_INVALID, "", "%s: cannot read: %s", path,
		                     strerror(errno));
	buf[n] = '\0';
	*len = n;
	*text = ISO_TAKE(buf);
	return 0;
}

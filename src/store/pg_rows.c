/* pg_rows.c: the boundary between PostgreSQL values and model structs, the
 * twin of sqlite_rows.c. Parameters go out as text (numbers formatted here,
 * strings bounded by their field) or binary (bytea); results come back as
 * text and the strict reader parses each column: a value that does not fit
 * its field is reported as corruption (table, id, column), never truncated
 * or guessed. No bound value (secrets, hashes) ever reaches a message. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "store/pg_int.h"

/* ---- parameters ---- */

static int slot(struct pg_params *p)
{
	if (p->n >= PG_PARAM_MAX) {
		p->bad = true;
		return -1;
	}
	return p->n++;
}

void iso_pg_p_text(struct pg_params *p, const char *s, size_t max)
{
	int i = slot(p);
	size_t len;

	if (i < 0)
		return;
	len = strnlen(s, max);
	/* A fixed-size field without its terminator, or a string PostgreSQL
	 * cannot hold (NUL), is refused rather than cut. */
	if (len == max || len > INT_MAX) {
		p->bad = true;
		len = 0;
	}
	p->val[i] = s;
	p->len[i] = (int)len;
	p->fmt[i] = 0;
}

/* The next parameter, as a number written into its own buffer; NULL when
 * there is no room left (p->bad is set). */
static char *number_slot(struct pg_params *p)
{
	int i = slot(p);

	if (i < 0)
		return NULL;
	p->val[i] = p->num[i];
	p->fmt[i] = 0;
	return p->num[i];
}

static void number_done(struct pg_params *p)
{
	p->len[p->n - 1] = (int)strlen(p->num[p->n - 1]);
}

void iso_pg_p_i64(struct pg_params *p, int64_t v)
{
	char *buf = number_slot(p);

	if (!buf)
		return;
	snprintf(buf, sizeof(p->num[0]), "%" PRId64, v);
	number_done(p);
}

void iso_pg_p_i64_or_null(struct pg_params *p, int64_t v)
{
	if (v == 0)
		iso_pg_p_null(p);
	else
		iso_pg_p_i64(p, v);
}

void iso_pg_p_double(struct pg_params *p, double v)
{
	if (!isfinite(v)) {
		p->bad = true;
		v = 0;
	}
	char *buf = number_slot(p);

	if (!buf)
		return;
	snprintf(buf, sizeof(p->num[0]), "%.17g", v);
	number_done(p);
}

void iso_pg_p_null(struct pg_params *p)
{
	int i = slot(p);

	if (i < 0)
		return;
	p->val[i] = NULL;
	p->len[i] = 0;
	p->fmt[i] = 0;
}

void iso_pg_p_bytea(struct pg_params *p, const void *data, size_t len)
{
	int i = slot(p);

	if (i < 0)
		return;
	if (len > INT_MAX) {
		p->bad = true;
		len = 0;
	}
	p->val[i] = len ? data : "";
	p->len[i] = (int)len;
	p->fmt[i] = 1;
}

/* ---- rows ---- */

void iso_pg_row_init(struct pg_row *r, const PGresult *res, int row)
{
	r->res = res;
	r->row = row;
	r->col = 0;
	r->bad = -1;
}

static int next_col(struct pg_row *r, bool ok)
{
	int col = r->col++;

	if (!ok && r->bad < 0)
		r->bad = col;
	return col;
}

static bool is_null(const struct pg_row *r)
{
	return r->col >= PQnfields(r->res) || PQgetisnull(r->res, r->row, r->col);
}

static const char *value(const struct pg_row *r)
{
	return PQgetvalue(r->res, r->row, r->col);
}

void iso_pg_rd_text(struct pg_row *r, char *buf, size_t size)
{
	bool ok = !is_null(r);
	size_t len = 0;

	if (ok) {
		len = (size_t)PQgetlength(r->res, r->row, r->col);
		ok = len < size;
	}
	if (ok) {
		memcpy(buf, value(r), len);
		buf[len] = '\0';
	} else if (size > 0) {
		buf[0] = '\0';
	}
	next_col(r, ok);
}

/* A whole decimal number, nothing else. */
static bool parse_i64(const char *t, int64_t *v)
{
	char *end = NULL;
	long long x;

	errno = 0;
	x = strtoll(t, &end, 10);
	if (errno || end == t || *end)
		return false;
	*v = x;
	return true;
}

int64_t iso_pg_rd_i64(struct pg_row *r)
{
	int64_t v = 0;
	bool ok = !is_null(r) && parse_i64(value(r), &v);

	next_col(r, ok);
	return ok ? v : 0;
}

int64_t iso_pg_rd_i64_or_null(struct pg_row *r)
{
	if (r->col < PQnfields(r->res) && is_null(r)) {
		next_col(r, true);
		return 0;
	}
	return iso_pg_rd_i64(r);
}

void iso_pg_rd_text_or_null(struct pg_row *r, char *buf, size_t size)
{
	if (r->col < PQnfields(r->res) && is_null(r)) {
		if (size > 0)
			buf[0] = '\0';
		next_col(r, true);
		return;
	}
	iso_pg_rd_text(r, buf, size);
}

int64_t iso_pg_rd_limit(struct pg_row *r)
{
	if (r->col < PQnfields(r->res) && is_null(r)) {
		next_col(r, true);
		return INT64_MAX;
	}
	return iso_pg_rd_i64(r);
}

double iso_pg_rd_double(struct pg_row *r)
{
	char *end = NULL;
	double v = 0;
	bool ok = !is_null(r);

	if (ok) {
		errno = 0;
		v = strtod(value(r), &end);
		ok = !errno && end != value(r) && !*end && isfinite(v);
	}
	next_col(r, ok);
	return ok ? v : 0;
}

int iso_pg_rd_int(struct pg_row *r, int min, int max)
{
	int64_t v = 0;
	bool ok = !is_null(r) && parse_i64(value(r), &v) && v >= min && v <= max;

	next_col(r, ok);
	return ok ? (int)v : 0;
}

bool iso_pg_rd_bool(struct pg_row *r)
{
	return iso_pg_rd_int(r, 0, 1) == 1;
}

unsigned char *iso_pg_bytea(const PGresult *res, int row, int col, size_t *len)
{
	*len = 0;
	if (col >= PQnfields(res) || PQgetisnull(res, row, col))
		return NULL;
	return PQunescapeBytea((const unsigned char *)PQgetvalue(res, row, col), len);
}

void iso_pg_rd_blob(struct pg_row *r, uint8_t *buf, size_t exact)
{
	size_t len = 0;
	unsigned char *b = iso_pg_bytea(r->res, r->row, r->col, &len);
	bool ok = b && len == exact;

	if (ok)
		memcpy(buf, b, exact);
	else
		memset(buf, 0, exact);
	PQfreemem(b);
	next_col(r, ok);
}

/* An enum column: its text must be one of the names `name_of` gives for 0,
 * 1, 2, ... (name_of answers "unknown" past the last value). */
static int rd_enum(struct pg_row *r, const char *(*name_of)(int))
{
	char text[32];
	int col = r->col;

	iso_pg_rd_text(r, text, sizeof(text));
	if (r->bad == col)
		return 0;
	for (int i = 0; i < 64; i++) {
		const char *name = name_of(i);
		if (strcmp(name, "unknown") == 0)
			break;
		if (strcmp(name, text) == 0)
			return i;
	}
	r->bad = r->bad < 0 ? col : r->bad;
	return 0;
}

static const char *role_name_of(int v)
{
	return iso_role_name((enum iso_role)v);
}
static const char *state_name_of(int v)
{
	return iso_alloc_state_name((enum iso_alloc_state)v);
}
static const char *sched_name_of(int v)
{
	return iso_node_sched_name((enum iso_node_sched)v);
}

enum iso_role iso_pg_rd_role(struct pg_row *r)
{
	return (enum iso_role)rd_enum(r, role_name_of);
}

enum iso_alloc_state iso_pg_rd_alloc_state(struct pg_row *r)
{
	return (enum iso_alloc_state)rd_enum(r, state_name_of);
}

enum iso_node_sched iso_pg_rd_node_sched(struct pg_row *r)
{
	return (enum iso_node_sched)rd_enum(r, sched_name_of);
}

int iso_pg_row_check(const struct pg_row *r, const char *table, const char *id,
                     struct iso_error *err)
{
	const char *col;

	if (r->bad < 0)
		return 0;
	col = r->bad < PQnfields(r->res) ? PQfname(r->res, r->bad) : NULL;
	return iso_error_set(err, ISO_E_INTERNAL, NULL,
	                     "store: corrupt row in %s (id %s): column %s holds a value that is "
	                     "missing, of the wrong type, too long or unknown",
	                     table, id, col ? col : "?");
}

int iso_pg_list(struct pg_store *s, const char *sql, struct pg_params *p, size_t elem,
                iso_pg_read_fn read_row, const char *table, void **out, int *n,
                struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = NULL;
	_cleanup_free_ char *items = NULL;
	int rows, r;

	*out = NULL;
	*n = 0;
	r = iso_pg_query(s, sql, p, table, NULL, NULL, &res, err);
	if (r < 0)
		return r;
	rows = PQntuples(res);
	if (rows == 0)
		return 0;
	items = calloc((size_t)rows, elem);
	if (!items)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
	for (int i = 0; i < rows; i++) {
		struct pg_row row;

		iso_pg_row_init(&row, res, i);
		read_row(&row, items + (size_t)i * elem);
		r = iso_pg_row_check(&row, table, "row", err);
		if (r < 0)
			return r;
	}
	*out = ISO_TAKE(items);
	*n = rows;
	return 0;
}

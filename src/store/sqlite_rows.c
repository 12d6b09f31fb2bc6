/* sqlite_rows.c: the boundary between SQLite values and model structs.
 * Binding goes one way, the strict row reader the other: a stored value that
 * does not fit its field is reported as corruption (table, id, column), never
 * truncated or guessed. SQLite failures become ISO_E_INTERNAL with
 * sqlite3_errmsg; no bound value (secrets, hashes) ever reaches a message. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "store/sqlite_int.h"

int iso_sqlite_fail(sqlite3 *db, const char *op, struct iso_error *err)
{
	return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: %s: %s", op, sqlite3_errmsg(db));
}

int iso_sqlite_insert_fail(sqlite3 *db, const char *op, const char *what, const char *key,
                           struct iso_error *err)
{
	int ext = sqlite3_extended_errcode(db);

	if (ext == SQLITE_CONSTRAINT_UNIQUE || ext == SQLITE_CONSTRAINT_PRIMARYKEY)
		return iso_error_set(err, ISO_E_CONFLICT, NULL, "%s \"%s\" already exists", what,
		                     key);
	return iso_sqlite_fail(db, op, err);
}

int iso_sqlite_exec_stmt(sqlite3 *db, sqlite3_stmt *st, const char *op, struct iso_error *err)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(db, op, err);
	return 0;
}

int iso_sqlite_bind_text(sqlite3_stmt *st, int idx, const char *s, size_t max)
{
	size_t len = strnlen(s, max);

	if (len > INT_MAX)
		return SQLITE_TOOBIG;
	return sqlite3_bind_text(st, idx, s, (int)len, SQLITE_STATIC);
}

int iso_sqlite_bind_i64(sqlite3_stmt *st, int idx, int64_t v)
{
	return sqlite3_bind_int64(st, idx, v);
}

int iso_sqlite_bind_i64_or_null(sqlite3_stmt *st, int idx, int64_t v)
{
	return v == 0 ? sqlite3_bind_null(st, idx) : sqlite3_bind_int64(st, idx, v);
}

void iso_sqlite_row_init(struct iso_sqlite_row *r, sqlite3_stmt *st)
{
	r->st = st;
	r->col = 0;
	r->bad = -1;
}

/* Takes the next column; marks it bad when `ok` is false. */
static int next_col(struct iso_sqlite_row *r, bool ok)
{
	int col = r->col++;

	if (!ok && r->bad < 0)
		r->bad = col;
	return col;
}

static bool col_is(struct iso_sqlite_row *r, int type)
{
	return sqlite3_column_type(r->st, r->col) == type;
}

void iso_sqlite_rd_text(struct iso_sqlite_row *r, char *buf, size_t size)
{
	const unsigned char *t = NULL;
	size_t len = 0;
	bool ok = col_is(r, SQLITE_TEXT);

	if (ok) {
		t = sqlite3_column_text(r->st, r->col);
		len = (size_t)sqlite3_column_bytes(r->st, r->col);
		ok = t && len < size && !memchr(t, '\0', len);
	}
	if (ok) {
		memcpy(buf, t, len);
		buf[len] = '\0';
	} else if (size > 0) {
		buf[0] = '\0';
	}
	next_col(r, ok);
}

void iso_sqlite_rd_text_or_null(struct iso_sqlite_row *r, char *buf, size_t size)
{
	if (col_is(r, SQLITE_NULL)) {
		if (size > 0)
			buf[0] = '\0';
		next_col(r, true);
		return;
	}
	iso_sqlite_rd_text(r, buf, size);
}

int64_t iso_sqlite_rd_i64(struct iso_sqlite_row *r)
{
	bool ok = col_is(r, SQLITE_INTEGER);
	int64_t v = ok ? sqlite3_column_int64(r->st, r->col) : 0;

	next_col(r, ok);
	return v;
}

double iso_sqlite_rd_double(struct iso_sqlite_row *r)
{
	bool ok = col_is(r, SQLITE_FLOAT) || col_is(r, SQLITE_INTEGER);
	double v = ok ? sqlite3_column_double(r->st, r->col) : 0;

	next_col(r, ok);
	return v;
}

int64_t iso_sqlite_rd_i64_or_null(struct iso_sqlite_row *r)
{
	if (col_is(r, SQLITE_NULL)) {
		next_col(r, true);
		return 0;
	}
	return iso_sqlite_rd_i64(r);
}

int iso_sqlite_rd_int(struct iso_sqlite_row *r, int min, int max)
{
	bool ok = col_is(r, SQLITE_INTEGER);
	int64_t v = ok ? sqlite3_column_int64(r->st, r->col) : 0;

	ok = ok && v >= min && v <= max;
	next_col(r, ok);
	return ok ? (int)v : 0;
}

bool iso_sqlite_rd_bool(struct iso_sqlite_row *r)
{
	return iso_sqlite_rd_int(r, 0, 1) == 1;
}

void iso_sqlite_rd_blob(struct iso_sqlite_row *r, uint8_t *buf, size_t exact)
{
	bool ok = col_is(r, SQLITE_BLOB) && (size_t)sqlite3_column_bytes(r->st, r->col) == exact;
	const void *p = ok ? sqlite3_column_blob(r->st, r->col) : NULL;

	ok = ok && p;
	if (ok)
		memcpy(buf, p, exact);
	else
		memset(buf, 0, exact);
	next_col(r, ok);
}

/* Reads an enum column: its text must be one of the names `name_of` gives
 * for 0, 1, 2, ... (name_of answers "unknown" past the last value). */
static int rd_enum(struct iso_sqlite_row *r, const char *(*name_of)(int))
{
	char text[32];
	int col = r->col;

	iso_sqlite_rd_text(r, text, sizeof(text));
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

enum iso_role iso_sqlite_rd_role(struct iso_sqlite_row *r)
{
	return (enum iso_role)rd_enum(r, role_name_of);
}

enum iso_alloc_state iso_sqlite_rd_alloc_state(struct iso_sqlite_row *r)
{
	return (enum iso_alloc_state)rd_enum(r, state_name_of);
}

enum iso_node_sched iso_sqlite_rd_node_sched(struct iso_sqlite_row *r)
{
	return (enum iso_node_sched)rd_enum(r, sched_name_of);
}

int iso_sqlite_row_check(const struct iso_sqlite_row *r, const char *table, const char *id,
                         struct iso_error *err)
{
	const char *col;

	if (r->bad < 0)
		return 0;
	col = sqlite3_column_name(r->st, r->bad);
	return iso_error_set(err, ISO_E_INTERNAL, NULL,
	                     "store: corrupt row in %s (id %s): column %s holds a value that is "
	                     "missing, of the wrong type, too long or unknown",
	                     table, id, col ? col : "?");
}

static const char *enum_text(const char *name)
{
	return strcmp(name, "unknown") ? name : NULL;
}

const char *iso_sqlite_role_text(enum iso_role r)
{
	return enum_text(iso_role_name(r));
}

const char *iso_sqlite_alloc_state_text(enum iso_alloc_state s)
{
	return enum_text(iso_alloc_state_name(s));
}

const char *iso_sqlite_node_sched_text(enum iso_node_sched s)
{
	return enum_text(iso_node_sched_name(s));
}

int iso_sqlite_grow(void **arr, int *cap, int n, size_t elem)
{
	void *p;
	int ncap;

	if (n < *cap)
		return 0;
	if (*cap > INT_MAX / 2)
		return -ENOMEM;
	ncap = *cap ? *cap * 2 : 16;
	p = reallocarray(*arr, (size_t)ncap, elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* sqlite_alloc.c: allocations in SQLite: one row of columns plus its placed
 * members and slots in child tables. Writes of the three tables sit in a
 * savepoint so that a failure half way leaves nothing behind, inside or
 * outside the caller's transaction. Lists page by (created_ms, id) and pick
 * the statement whose index matches the filter. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>

#include "store/sqlite_int.h"

/* A stored allocation is at most this big; anything larger is corruption. */
#define MAX_MEMBERS 65536
#define MAX_SLOTS   (1 << 22)

/* Checks what the schema cannot: dense member indexes and slots that point
 * at a placed member. A violation is a caller bug, not a user's input. */
static int check_alloc(const struct iso_allocation *a, const char **state, struct iso_error *err)
{
	*state = iso_sqlite_alloc_state_text(a->state);
	if (!*state)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: allocation \"%s\": state %d is unknown", a->id,
		                     (int)a->state);
	if (a->n_members < 0 || a->n_slots < 0 || (a->n_members > 0 && !a->placed) ||
	    (a->n_slots > 0 && !a->slots))
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: allocation \"%s\": bad member or slot arrays", a->id);
	for (int i = 0; i < a->n_members; i++)
		if (a->placed[i].index != i)
			return iso_error_set(err, ISO_E_INTERNAL, NULL,
			                     "store: allocation \"%s\": member %d has index %d",
			                     a->id, i, a->placed[i].index);
	for (int i = 0; i < a->n_slots; i++)
		if (a->slots[i].member < 0 || a->slots[i].member >= a->n_members)
			return iso_error_set(err, ISO_E_INTERNAL, NULL,
			                     "store: allocation \"%s\": slot %d names member %d "
			                     "of %d",
			                     a->id, i, a->slots[i].member, a->n_members);
	return 0;
}

/* Binds ?1..?17 in the column order shared by ST_ALLOC_INSERT and UPDATE. */
static int bind_alloc(sqlite3_stmt *st, const struct iso_allocation *a, const char *state)
{
	const struct iso_shape *sh = &a->shape;

	return BIND_FIELD(st, 1, a->id) || iso_sqlite_bind_i64(st, 2, a->tenant_id) ||
	       BIND_FIELD(st, 3, a->tenant) || BIND_FIELD(st, 4, a->name) ||
	       BIND_STR(st, 5, state) || BIND_FIELD(st, 6, a->reason) ||
	       iso_sqlite_bind_i64(st, 7, a->members) || iso_sqlite_bind_i64(st, 8, sh->whole) ||
	       iso_sqlite_bind_i64(st, 9, sh->gpu_count) || BIND_FIELD(st, 10, sh->profile) ||
	       BIND_FIELD(st, 11, sh->gpu_model) || iso_sqlite_bind_i64(st, 12, sh->cpus) ||
	       iso_sqlite_bind_i64(st, 13, sh->memory_mib) || BIND_FIELD(st, 14, sh->pool) ||
	       BIND_FIELD(st, 15, a->owner) || iso_sqlite_bind_i64(st, 16, a->created_ms) ||
	       iso_sqlite_bind_i64(st, 17, a->updated_ms) || BIND_FIELD(st, 18, a->project) ||
	       iso_sqlite_bind_i64(st, 19, a->priority) || BIND_FIELD(st, 20, a->isolation) ||
	       BIND_FIELD(st, 21, a->spread) || iso_sqlite_bind_i64(st, 22, a->fail_on_preempt) ||
	       iso_sqlite_bind_i64(st, 23, a->duration_ms) ||
	       iso_sqlite_bind_i64(st, 24, a->started_ms);
}

/* ?25, ?26 of ST_ALLOC_INSERT: the key and its request hash, NULL when
 * none (NULLs never clash in the unique index). Only the insert writes
 * them: an allocation's key never changes. */
static int bind_key(sqlite3_stmt *st, const struct iso_allocation *a)
{
	if (!a->idem_key[0])
		return sqlite3_bind_null(st, 25) != SQLITE_OK || sqlite3_bind_null(st, 26) != SQLITE_OK;
	return BIND_FIELD(st, 25, a->idem_key) || BIND_FIELD(st, 26, a->idem_hash);
}

static int insert_children(struct sqlite_store *s, const struct iso_allocation *a,
                           struct iso_error *err)
{
	for (int i = 0; i < a->n_members; i++) {
		_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_MEMBER_INSERT];

		if (BIND_FIELD(st, 1, a->id) || iso_sqlite_bind_i64(st, 2, i) ||
		    BIND_FIELD(st, 3, a->placed[i].node) || sqlite3_step(st) != SQLITE_DONE)
			return iso_sqlite_fail(s->db, "allocation member insert", err);
	}
	for (int i = 0; i < a->n_slots; i++) {
		_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_SLOT_INSERT];
		const struct iso_slot *sl = &a->slots[i];

		if (BIND_FIELD(st, 1, a->id) || iso_sqlite_bind_i64(st, 2, i) ||
		    iso_sqlite_bind_i64(st, 3, sl->member) || iso_sqlite_bind_i64(st, 4, sl->gpu) ||
		    iso_sqlite_bind_i64(st, 5, sl->whole) || BIND_FIELD(st, 6, sl->profile) ||
		    iso_sqlite_bind_i64(st, 7, sl->start) ||
		    iso_sqlite_bind_i64(st, 8, sl->width) || sqlite3_step(st) != SQLITE_DONE)
			return iso_sqlite_fail(s->db, "allocation slot insert", err);
	}
	return 0;
}

static int delete_children(struct sqlite_store *s, const char *id, struct iso_error *err)
{
	static const enum sqlite_stmt_id ids[] = {ST_SLOT_DELETE, ST_MEMBER_DELETE};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(ids); i++) {
		_cleanup_stmt_ sqlite3_stmt *st = s->st[ids[i]];

		if (BIND_STR(st, 1, id) || sqlite3_step(st) != SQLITE_DONE)
			return iso_sqlite_fail(s->db, "allocation children delete", err);
	}
	return 0;
}

/* The row write (insert or update) and its children, all or nothing. */
static int write_alloc(struct sqlite_store *s, const struct iso_allocation *a, bool update,
                       struct iso_error *err)
{
	const char *state;
	int r = check_alloc(a, &state, err);

	if (r < 0)
		return r;
	r = iso_sqlite_savepoint(s, err);
	if (r < 0)
		return r;
	{
		_cleanup_stmt_ sqlite3_stmt *st = s->st[update ? ST_ALLOC_UPDATE : ST_ALLOC_INSERT];
		const char *op = update ? "allocation update" : "allocation insert";

		if (bind_alloc(st, a, state) || (!update && bind_key(st, a)))
			r = iso_sqlite_fail(s->db, op, err);
		else if (sqlite3_step(st) != SQLITE_DONE)
			r = iso_sqlite_insert_fail(s->db, op, "allocation", a->id, err);
		else if (update && sqlite3_changes(s->db) == 0)
			r = iso_error_set(err, ISO_E_NOT_FOUND, NULL, "allocation \"%s\" not found",
			                  a->id);
	}
	if (r == 0 && update)
		r = delete_children(s, a->id, err);
	if (r == 0)
		r = insert_children(s, a, err);
	if (r < 0) {
		iso_sqlite_rollback_to(s);
		return r;
	}
	return iso_sqlite_release(s, err);
}

int iso_sqlite_alloc_insert(struct iso_store *is, const struct iso_allocation *a,
                            struct iso_error *err)
{
	return write_alloc(sqlite_store_of(is), a, false, err);
}

int iso_sqlite_alloc_update(struct iso_store *is, const struct iso_allocation *a,
                            struct iso_error *err)
{
	return write_alloc(sqlite_store_of(is), a, true, err);
}

/* ---- reading ---- */

static int read_members(struct sqlite_store *s, struct iso_allocation *a, struct iso_error *err)
{
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_MEMBER_LIST];
	int cap = 0, rc, r;

	if (BIND_FIELD(st, 1, a->id))
		return iso_sqlite_fail(s->db, "allocation members", err);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_sqlite_row row;
		struct iso_member *m;

		if (a->n_members >= MAX_MEMBERS)
			return iso_error_set(err, ISO_E_INTERNAL, NULL,
			                     "store: corrupt rows in alloc_members (id %s): more "
			                     "than %d members",
			                     a->id, MAX_MEMBERS);
		if (iso_sqlite_grow((void **)&a->placed, &cap, a->n_members, sizeof(*m)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		m = &a->placed[a->n_members];
		memset(m, 0, sizeof(*m));
		iso_sqlite_row_init(&row, st);
		/* dense: the i-th row must be member i */
		m->index = iso_sqlite_rd_int(&row, a->n_members, a->n_members);
		RD_FIELD(&row, m->node);
		r = iso_sqlite_row_check(&row, "alloc_members", a->id, err);
		if (r < 0)
			return r;
		a->n_members++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "allocation members", err);
	return 0;
}

static int read_slots(struct sqlite_store *s, struct iso_allocation *a, struct iso_error *err)
{
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_SLOT_LIST];
	int cap = 0, rc, r;

	if (BIND_FIELD(st, 1, a->id))
		return iso_sqlite_fail(s->db, "allocation slots", err);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_sqlite_row row;
		struct iso_slot *sl;

		if (a->n_slots >= MAX_SLOTS)
			return iso_error_set(err, ISO_E_INTERNAL, NULL,
			                     "store: corrupt rows in alloc_slots (id %s): more "
			                     "than %d slots",
			                     a->id, MAX_SLOTS);
		if (iso_sqlite_grow((void **)&a->slots, &cap, a->n_slots, sizeof(*sl)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		sl = &a->slots[a->n_slots];
		memset(sl, 0, sizeof(*sl));
		iso_sqlite_row_init(&row, st);
		sl->member = iso_sqlite_rd_int(&row, 0, a->n_members - 1);
		sl->gpu = iso_sqlite_rd_int(&row, 0, INT_MAX);
		sl->whole = iso_sqlite_rd_bool(&row);
		RD_FIELD(&row, sl->profile);
		sl->start = iso_sqlite_rd_int(&row, 0, INT_MAX);
		sl->width = iso_sqlite_rd_int(&row, 0, INT_MAX);
		r = iso_sqlite_row_check(&row, "alloc_slots", a->id, err);
		if (r < 0)
			return r;
		a->n_slots++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "allocation slots", err);
	return 0;
}

/* Reads the current row of an ST_ALLOC_* select into a zeroed *a, and its
 * children (members and slots) when `children`; on error *a is cleared. */
static int read_alloc(struct sqlite_store *s, sqlite3_stmt *st, bool children,
                      struct iso_allocation *a, struct iso_error *err)
{
	struct iso_sqlite_row row;
	struct iso_shape *sh = &a->shape;
	int r;

	memset(a, 0, sizeof(*a));
	iso_sqlite_row_init(&row, st);
	RD_FIELD(&row, a->id);
	a->tenant_id = iso_sqlite_rd_i64(&row);
	RD_FIELD(&row, a->tenant);
	RD_FIELD(&row, a->name);
	a->state = iso_sqlite_rd_alloc_state(&row);
	RD_FIELD(&row, a->reason);
	a->members = iso_sqlite_rd_int(&row, 0, INT_MAX);
	sh->whole = iso_sqlite_rd_bool(&row);
	sh->gpu_count = iso_sqlite_rd_int(&row, 0, INT_MAX);
	RD_FIELD(&row, sh->profile);
	RD_FIELD(&row, sh->gpu_model);
	sh->cpus = iso_sqlite_rd_int(&row, 0, INT_MAX);
	sh->memory_mib = iso_sqlite_rd_i64(&row);
	RD_FIELD(&row, sh->pool);
	RD_FIELD(&row, a->owner);
	a->created_ms = iso_sqlite_rd_i64(&row);
	a->updated_ms = iso_sqlite_rd_i64(&row);
	RD_FIELD(&row, a->project);
	a->priority = iso_sqlite_rd_int(&row, INT_MIN, INT_MAX);
	RD_FIELD(&row, a->isolation);
	RD_FIELD(&row, a->spread);
	a->fail_on_preempt = iso_sqlite_rd_bool(&row);
	a->duration_ms = iso_sqlite_rd_i64(&row);
	a->started_ms = iso_sqlite_rd_i64(&row);
	iso_sqlite_rd_text_or_null(&row, a->idem_key, sizeof(a->idem_key));
	iso_sqlite_rd_text_or_null(&row, a->idem_hash, sizeof(a->idem_hash));
	r = iso_sqlite_row_check(&row, "allocations", a->id, err);
	if (r == 0 && children)
		r = read_members(s, a, err);
	if (r == 0 && children)
		r = read_slots(s, a, err);
	if (r < 0)
		iso_allocation_clear(a);
	return r;
}

int iso_sqlite_alloc_get(struct iso_store *is, const char *id, struct iso_allocation *out,
                         struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_ALLOC_GET];
	int rc;

	memset(out, 0, sizeof(*out));
	if (BIND_STR(st, 1, id))
		return iso_sqlite_fail(s->db, "allocation get", err);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "allocation \"%.*s\" not found",
		                     ISO_ID_MAX, id);
	if (rc != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "allocation get", err);
	return read_alloc(s, st, true, out, err);
}

int iso_sqlite_alloc_get_by_key(struct iso_store *is, int64_t tenant_id, const char *key,
                                struct iso_allocation *out, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_ALLOC_BY_KEY];
	int rc;

	memset(out, 0, sizeof(*out));
	if (BIND_STR(st, 1, key) || iso_sqlite_bind_i64(st, 2, tenant_id))
		return iso_sqlite_fail(s->db, "allocation by key", err);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no allocation with that key");
	if (rc != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "allocation by key", err);
	return read_alloc(s, st, true, out, err);
}

/* Resolves the `after` cursor to its (created_ms, id). The cursor must be an
 * allocation the same filter could have listed (tenant and owner never
 * change), so it tells a caller nothing about other tenants' allocations. */
static int resolve_cursor(struct sqlite_store *s, const struct iso_alloc_filter *f,
                          int64_t *created_ms, struct iso_error *err)
{
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_ALLOC_CURSOR];
	int rc;

	if (BIND_STR(st, 1, f->after) || iso_sqlite_bind_i64(st, 2, f->tenant_id) ||
	    (f->owner && BIND_STR(st, 3, f->owner)))
		return iso_sqlite_fail(s->db, "allocation list", err);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return iso_error_set(err, ISO_E_INVALID, "after", "unknown cursor \"%.*s\"",
		                     ISO_ID_MAX, f->after);
	if (rc != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "allocation list", err);
	if (sqlite3_column_type(st, 0) != SQLITE_INTEGER)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: corrupt row in allocations (id %.*s): column "
		                     "created_ms is not an integer",
		                     ISO_ID_MAX, f->after);
	*created_ms = sqlite3_column_int64(st, 0);
	return 0;
}

/* Steps `st` to its end, reading every row as an allocation (read_alloc). */
static int read_allocs(struct sqlite_store *s, sqlite3_stmt *st, bool children,
                       struct iso_allocation **out, int *n, struct iso_error *err)
{
	struct iso_allocation *items = NULL;
	int count = 0, cap = 0, rc, r = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (iso_sqlite_grow((void **)&items, &cap, count, sizeof(*items)) < 0) {
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
			break;
		}
		r = read_alloc(s, st, children, &items[count], err);
		if (r < 0)
			break;
		count++;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = iso_sqlite_fail(s->db, "allocation list", err);
	if (r < 0) {
		iso_allocations_free(items, count);
		return r;
	}
	*out = items;
	*n = count;
	return 0;
}

int iso_sqlite_alloc_recent(struct iso_store *is, int limit, struct iso_allocation **out, int *n,
                            struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_ALLOC_RECENT];

	*out = NULL;
	*n = 0;
	if (limit <= 0)
		return iso_error_set(err, ISO_E_INVALID, "limit", "must be > 0, got %d", limit);
	if (iso_sqlite_bind_i64(st, 1, limit))
		return iso_sqlite_fail(s->db, "allocation list", err);
	return read_allocs(s, st, false, out, n, err); /* the requests, not where they ran */
}

int iso_sqlite_alloc_list(struct iso_store *is, const struct iso_alloc_filter *f,
                          struct iso_allocation **out, int *n, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	int64_t after_ms = INT64_MIN;
	int r;
	const char *state = NULL;
	bool live;

	*out = NULL;
	*n = 0;
	if (f->state >= 0) {
		state = iso_sqlite_alloc_state_text((enum iso_alloc_state)f->state);
		if (!state)
			return iso_error_set(err, ISO_E_INVALID, "state", "state %d is unknown",
			                     f->state);
	}
	if (f->tenant_id < 0)
		return iso_error_set(err, ISO_E_INVALID, "tenant",
		                     "tenant id %" PRId64 " is invalid", f->tenant_id);
	if (f->after) {
		r = resolve_cursor(s, f, &after_ms, err);
		if (r < 0)
			return r;
	}
	/* A non-terminal state filter implies live: use the smaller index. */
	live = f->live_only || (state && !iso_alloc_state_terminal((enum iso_alloc_state)f->state));

	/* By key: the key's index, whatever else filters (0 or 1 row per tenant). */
	_cleanup_stmt_ sqlite3_stmt *st =
	    s->st[f->idem_key ? ST_ALLOC_LIST_KEY
	                      : ST_ALLOC_LIST + (f->tenant_id > 0 ? 1 : 0) + (live ? 2 : 0)];
	if (iso_sqlite_bind_i64(st, 1, after_ms) || BIND_STR(st, 2, f->after ? f->after : "") ||
	    (f->owner && BIND_STR(st, 3, f->owner)) || (state && BIND_STR(st, 4, state)) ||
	    ((f->tenant_id > 0 || f->idem_key) && iso_sqlite_bind_i64(st, 5, f->tenant_id)) ||
	    iso_sqlite_bind_i64(st, 6, f->limit > 0 ? f->limit : -1) ||
	    (f->idem_key && (BIND_STR(st, 7, f->idem_key) || iso_sqlite_bind_i64(st, 8, live))))
		return iso_sqlite_fail(s->db, "allocation list", err);
	return read_allocs(s, st, true, out, n, err);
}

int iso_sqlite_alloc_count_live(struct iso_store *is, int64_t tenant_id, int *n,
                                struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st =
	    s->st[tenant_id > 0 ? ST_ALLOC_COUNT_LIVE : ST_ALLOC_COUNT_LIVE_ALL];
	int64_t count;

	*n = 0;
	if (tenant_id < 0)
		return iso_error_set(err, ISO_E_INVALID, "tenant",
		                     "tenant id %" PRId64 " is invalid", tenant_id);
	if (tenant_id > 0 && iso_sqlite_bind_i64(st, 1, tenant_id))
		return iso_sqlite_fail(s->db, "allocation count", err);
	if (sqlite3_step(st) != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "allocation count", err);
	count = sqlite3_column_int64(st, 0);
	if (count > INT_MAX)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: live allocation count %" PRId64 " overflows", count);
	*n = (int)count;
	return 0;
}

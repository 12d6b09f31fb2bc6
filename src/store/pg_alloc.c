/* pg_alloc.c: allocations in PostgreSQL: one row of columns plus its placed
 * members and slots in child tables, as in sqlite_alloc.c. The writes of the
 * three tables sit in a savepoint (or a transaction of their own outside the
 * caller's) so that a failure half way leaves nothing behind. Lists page by
 * (created_ms, id), the cursor checked against the same filter. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>

#include "store/pg_int.h"

#define ALLOC_COLS                                                                                 \
	"id, tenant_id, tenant, name, state, reason, members, whole, gpu_count, profile, "         \
	"gpu_model, cpus, memory_mib, pool, owner, created_ms, updated_ms, project, priority, "    \
	"isolation, spread, fail_on_preempt, duration_ms, started_ms, idempotency_key, "           \
	"idempotency_hash"
#define LIVE "state NOT IN ('released', 'failed')" /* as in the partial indexes */
/* $1, $2: cursor (created_ms, id); $3 owner or NULL; $4 state or NULL;
 * $5 limit (NULL: none); $6 tenant_id in the tenant variants. As in SQLite,
 * one statement per index that serves it (all or live, every tenant or
 * one), so that a generic plan never scans history it does not need. */
#define ALLOC_LIST(extra)                                                                          \
	"SELECT " ALLOC_COLS " FROM allocations WHERE (created_ms, id) > ($1::bigint, $2::text)"   \
	" AND ($3::text IS NULL OR owner = $3::text) AND ($4::text IS NULL OR state = "            \
	"$4::text)" extra " ORDER BY created_ms, id LIMIT $5::bigint"

#define MAX_MEMBERS 65536
#define MAX_SLOTS   (1 << 22)

static const char *state_text(enum iso_alloc_state st)
{
	const char *name = iso_alloc_state_name(st);

	return strcmp(name, "unknown") ? name : NULL;
}

/* Checks what the schema cannot: dense member indexes and slots that point
 * at a placed member. A violation is a caller bug, not a user's input. */
static int check_alloc(const struct iso_allocation *a, const char **state, struct iso_error *err)
{
	*state = state_text(a->state);
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

static void p_alloc(struct pg_params *p, const struct iso_allocation *a, const char *state)
{
	const struct iso_shape *sh = &a->shape;

	P_FIELD(p, a->id);
	iso_pg_p_i64(p, a->tenant_id);
	P_FIELD(p, a->tenant);
	P_FIELD(p, a->name);
	P_STR(p, state);
	P_FIELD(p, a->reason);
	iso_pg_p_i64(p, a->members);
	iso_pg_p_i64(p, sh->whole);
	iso_pg_p_i64(p, sh->gpu_count);
	P_FIELD(p, sh->profile);
	P_FIELD(p, sh->gpu_model);
	iso_pg_p_i64(p, sh->cpus);
	iso_pg_p_i64(p, sh->memory_mib);
	P_FIELD(p, sh->pool);
	P_FIELD(p, a->owner);
	iso_pg_p_i64(p, a->created_ms);
	iso_pg_p_i64(p, a->updated_ms);
	P_FIELD(p, a->project);
	iso_pg_p_i64(p, a->priority);
	P_FIELD(p, a->isolation);
	P_FIELD(p, a->spread);
	iso_pg_p_i64(p, a->fail_on_preempt);
	iso_pg_p_i64(p, a->duration_ms);
	iso_pg_p_i64(p, a->started_ms);
}

static int insert_children(struct pg_store *s, const struct iso_allocation *a,
                           struct iso_error *err)
{
	for (int i = 0; i < a->n_members; i++) {
		struct pg_params p = {0};
		int r;

		P_FIELD(&p, a->id);
		iso_pg_p_i64(&p, i);
		P_FIELD(&p, a->placed[i].node);
		r = iso_pg_exec(s,
		                "INSERT INTO alloc_members(alloc_id, idx, node)"
		                " VALUES ($1::text, $2::integer, $3::text)",
		                &p, "allocation member insert", err);
		if (r < 0)
			return r;
	}
	for (int i = 0; i < a->n_slots; i++) {
		const struct iso_slot *sl = &a->slots[i];
		struct pg_params p = {0};
		int r;

		P_FIELD(&p, a->id);
		iso_pg_p_i64(&p, i);
		iso_pg_p_i64(&p, sl->member);
		iso_pg_p_i64(&p, sl->gpu);
		iso_pg_p_i64(&p, sl->whole);
		P_FIELD(&p, sl->profile);
		iso_pg_p_i64(&p, sl->start);
		iso_pg_p_i64(&p, sl->width);
		r = iso_pg_exec(
		    s,
		    "INSERT INTO alloc_slots(alloc_id, idx, member, gpu, whole, profile,"
		    " start, width) VALUES ($1::text, $2::integer, $3::bigint, $4::bigint,"
		    " $5::bigint, $6::text, $7::bigint, $8::bigint)",
		    &p, "allocation slot insert", err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int delete_children(struct pg_store *s, const char *id, struct iso_error *err)
{
	struct pg_params p = {0};
	int r;

	P_STR(&p, id);
	r = iso_pg_exec(s, "DELETE FROM alloc_slots WHERE alloc_id = $1::text", &p,
	                "allocation children delete", err);
	if (r == 0)
		r = iso_pg_exec(s, "DELETE FROM alloc_members WHERE alloc_id = $1::text", &p,
		                "allocation children delete", err);
	return r;
}

/* The row write (insert or update) and its children, all or nothing. */
static int write_alloc(struct pg_store *s, const struct iso_allocation *a, bool update,
                       struct iso_error *err)
{
	const char *op = update ? "allocation update" : "allocation insert";
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	const char *state;
	int r = check_alloc(a, &state, err);

	if (r < 0)
		return r;
	p_alloc(&p, a, state);
	if (!update && a->idem_key[0]) { /* only the insert writes the key: it never changes */
		P_FIELD(&p, a->idem_key);
		P_FIELD(&p, a->idem_hash);
	} else if (!update) {
		iso_pg_p_null(&p);
		iso_pg_p_null(&p);
	}
	r = iso_pg_atomic_begin(s, op, err);
	if (r < 0)
		return r;
	if (update)
		r = iso_pg_query(
		    s,
		    "UPDATE allocations SET tenant_id = $2::bigint, tenant = $3::text,"
		    " name = $4::text, state = $5::text, reason = $6::text,"
		    " members = $7::bigint, whole = $8::bigint, gpu_count = $9::bigint,"
		    " profile = $10::text, gpu_model = $11::text, cpus = $12::bigint,"
		    " memory_mib = $13::bigint, pool = $14::text, owner = $15::text,"
		    " created_ms = $16::bigint, updated_ms = $17::bigint,"
		    " project = $18::text, priority = $19::bigint, isolation = $20::text,"
		    " spread = $21::text, fail_on_preempt = $22::bigint,"
		    " duration_ms = $23::bigint, started_ms = $24::bigint"
		    " WHERE id = $1::text",
		    &p, op, "allocation", a->id, &res, err);
	else
		r = iso_pg_query(s,
		                 "INSERT INTO allocations(" ALLOC_COLS ") VALUES ($1::text,"
		                 " $2::bigint, $3::text, $4::text, $5::text, $6::text, $7::bigint,"
		                 " $8::bigint, $9::bigint, $10::text, $11::text, $12::bigint,"
		                 " $13::bigint, $14::text, $15::text, $16::bigint, $17::bigint,"
		                 " $18::text, $19::bigint, $20::text, $21::text, $22::bigint,"
		                 " $23::bigint, $24::bigint, $25::text, $26::text)"
		                 " ON CONFLICT (id) DO NOTHING",
		                 &p, op, "allocation", a->id, &res, err);
	if (r == 0 && iso_pg_changes(res) == 0)
		r = update ? iso_error_set(err, ISO_E_NOT_FOUND, NULL,
		                           "allocation \"%s\" not found", a->id)
		           : iso_error_set(err, ISO_E_CONFLICT, NULL,
		                           "allocation \"%s\" already exists", a->id);
	if (r == 0 && update)
		r = delete_children(s, a->id, err);
	if (r == 0)
		r = insert_children(s, a, err);
	if (r < 0) {
		iso_pg_atomic_abort(s);
		return r;
	}
	return iso_pg_atomic_end(s, op, err);
}

int iso_pg_alloc_insert(struct iso_store *is, const struct iso_allocation *a, struct iso_error *err)
{
	return write_alloc(pg_store_of(is), a, false, err);
}

int iso_pg_alloc_update(struct iso_store *is, const struct iso_allocation *a, struct iso_error *err)
{
	return write_alloc(pg_store_of(is), a, true, err);
}

/* ---- reading ---- */

/* A text[] literal of the allocations' ids: {"a-1","a-2"}, each element
 * quoted with " and \ escaped. NULL when out of memory. */
static char *id_array(const struct iso_allocation *items, int n)
{
	size_t cap = 3, k = 0;
	char *lit;

	for (int i = 0; i < n; i++)
		cap += 2 * strnlen(items[i].id, sizeof(items[i].id)) + 3;
	lit = malloc(cap);
	if (!lit)
		return NULL;
	lit[k++] = '{';
	for (int i = 0; i < n; i++) {
		const char *id = items[i].id;

		if (i > 0)
			lit[k++] = ',';
		lit[k++] = '"';
		for (size_t c = 0; c < sizeof(items[i].id) && id[c]; c++) {
			if (id[c] == '"' || id[c] == '\\')
				lit[k++] = '\\';
			lit[k++] = id[c];
		}
		lit[k++] = '"';
	}
	lit[k++] = '}';
	lit[k] = '\0';
	return lit;
}

static int cmp_order(const void *a, const void *b, void *arg)
{
	const struct iso_allocation *items = arg;

	return strcmp(items[*(const int *)a].id, items[*(const int *)b].id);
}

/* The allocation of `items` whose id is `id`, through `order` (indexes of
 * items sorted by id); NULL when none. */
static struct iso_allocation *find_alloc(struct iso_allocation *items, const int *order, int n,
                                         const char *id)
{
	int lo = 0, hi = n - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(items[order[mid]].id, id);

		if (c == 0)
			return &items[order[mid]];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* Rows [from, to) of `res` all belong to allocation a (column 0 is its id):
 * its members (idx, node) or its slots (idx, member, gpu, whole, profile,
 * start, width). */
static int read_group(const PGresult *res, int from, int to, bool slots, struct iso_allocation *a,
                      struct iso_error *err)
{
	int rows = to - from, r;

	if (rows > (slots ? MAX_SLOTS : MAX_MEMBERS))
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: corrupt rows in %s (id %s): more than %d",
		                     slots ? "alloc_slots" : "alloc_members", a->id,
		                     slots ? MAX_SLOTS : MAX_MEMBERS);
	if (slots) {
		a->slots = calloc((size_t)rows, sizeof(*a->slots));
		if (!a->slots)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
	} else {
		a->placed = calloc((size_t)rows, sizeof(*a->placed));
		if (!a->placed)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
	}
	for (int i = 0; i < rows; i++) {
		struct pg_row row;

		iso_pg_row_init(&row, res, from + i);
		row.col = 2; /* past alloc_id and idx (idx orders the rows) */
		if (slots) {
			struct iso_slot *sl = &a->slots[i];

			sl->member = iso_pg_rd_int(&row, 0, a->n_members - 1);
			sl->gpu = iso_pg_rd_int(&row, 0, INT_MAX);
			sl->whole = iso_pg_rd_bool(&row);
			PRD_FIELD(&row, sl->profile);
			sl->start = iso_pg_rd_int(&row, 0, INT_MAX);
			sl->width = iso_pg_rd_int(&row, 0, INT_MAX);
		} else {
			struct iso_member *m = &a->placed[i];

			row.col = 1; /* dense: the i-th member's idx is i */
			m->index = iso_pg_rd_int(&row, i, i);
			PRD_FIELD(&row, m->node);
		}
		r = iso_pg_row_check(&row, slots ? "alloc_slots" : "alloc_members", a->id, err);
		if (r < 0)
			return r;
		if (slots)
			a->n_slots++;
		else
			a->n_members++;
	}
	return 0;
}

/* Reads the members, then the slots, of every allocation in items[0..n) in
 * two queries (not two per allocation: a restart reads them all). */
static int read_children(struct pg_store *s, struct iso_allocation *items, int n,
                         struct iso_error *err)
{
	/* One id (alloc_get) is an equality, so that the plan is an index
	 * lookup whatever the planner guesses of an array's length. */
	static const char *const sql[2][2] = {
	    {"SELECT alloc_id, idx, node FROM alloc_members WHERE alloc_id = ANY($1::text[])"
	     " ORDER BY alloc_id, idx",
	     "SELECT alloc_id, idx, member, gpu, whole, profile, start, width FROM alloc_slots"
	     " WHERE alloc_id = ANY($1::text[]) ORDER BY alloc_id, idx"},
	    {"SELECT alloc_id, idx, node FROM alloc_members WHERE alloc_id = $1::text"
	     " ORDER BY idx",
	     "SELECT alloc_id, idx, member, gpu, whole, profile, start, width FROM alloc_slots"
	     " WHERE alloc_id = $1::text ORDER BY idx"},
	};
	_cleanup_free_ char *ids = n == 1 ? strdup(items[0].id) : id_array(items, n);
	_cleanup_free_ int *order = calloc((size_t)n, sizeof(int));
	int r;

	if (!ids || !order)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, (size_t)n, sizeof(int), cmp_order, items);
	for (int k = 0; k < 2; k++) {
		_cleanup_pgres_ PGresult *res = NULL;
		struct pg_params p = {0};
		int rows, from = 0;

		P_STR(&p, ids);
		r = iso_pg_query(s, sql[n == 1][k], &p,
		                 k ? "allocation slots" : "allocation members", NULL, NULL, &res,
		                 err);
		if (r < 0)
			return r;
		rows = PQntuples(res);
		while (from < rows) {
			const char *id = PQgetvalue(res, from, 0);
			struct iso_allocation *a = find_alloc(items, order, n, id);
			int to = from + 1;

			while (to < rows && strcmp(PQgetvalue(res, to, 0), id) == 0)
				to++;
			if (!a)
				return iso_error_set(
				    err, ISO_E_INTERNAL, NULL,
				    "store: %s: a row of an allocation not asked for",
				    k ? "allocation slots" : "allocation members");
			r = read_group(res, from, to, k == 1, a, err);
			if (r < 0)
				return r;
			from = to;
		}
	}
	return 0;
}

/* Reads row i of an allocation select into a zeroed *a (not its children:
 * read_children); on error *a is cleared. */
static int read_alloc(const PGresult *res, int i, struct iso_allocation *a, struct iso_error *err)
{
	struct iso_shape *sh = &a->shape;
	struct pg_row row;
	int r;

	memset(a, 0, sizeof(*a));
	iso_pg_row_init(&row, res, i);
	PRD_FIELD(&row, a->id);
	a->tenant_id = iso_pg_rd_i64(&row);
	PRD_FIELD(&row, a->tenant);
	PRD_FIELD(&row, a->name);
	a->state = iso_pg_rd_alloc_state(&row);
	PRD_FIELD(&row, a->reason);
	a->members = iso_pg_rd_int(&row, 0, INT_MAX);
	sh->whole = iso_pg_rd_bool(&row);
	sh->gpu_count = iso_pg_rd_int(&row, 0, INT_MAX);
	PRD_FIELD(&row, sh->profile);
	PRD_FIELD(&row, sh->gpu_model);
	sh->cpus = iso_pg_rd_int(&row, 0, INT_MAX);
	sh->memory_mib = iso_pg_rd_i64(&row);
	PRD_FIELD(&row, sh->pool);
	PRD_FIELD(&row, a->owner);
	a->created_ms = iso_pg_rd_i64(&row);
	a->updated_ms = iso_pg_rd_i64(&row);
	PRD_FIELD(&row, a->project);
	a->priority = iso_pg_rd_int(&row, INT_MIN, INT_MAX);
	PRD_FIELD(&row, a->isolation);
	PRD_FIELD(&row, a->spread);
	a->fail_on_preempt = iso_pg_rd_bool(&row);
	a->duration_ms = iso_pg_rd_i64(&row);
	a->started_ms = iso_pg_rd_i64(&row);
	iso_pg_rd_text_or_null(&row, a->idem_key, sizeof(a->idem_key));
	iso_pg_rd_text_or_null(&row, a->idem_hash, sizeof(a->idem_hash));
	r = iso_pg_row_check(&row, "allocations", a->id, err);
	if (r < 0)
		iso_allocation_clear(a);
	return r;
}

int iso_pg_alloc_get(struct iso_store *is, const char *id, struct iso_allocation *out,
                     struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	int r;

	memset(out, 0, sizeof(*out));
	P_STR(&p, id);
	r = iso_pg_query(s, "SELECT " ALLOC_COLS " FROM allocations WHERE id = $1::text", &p,
	                 "allocation get", NULL, NULL, &res, err);
	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "allocation \"%.*s\" not found",
		                     ISO_ID_MAX, id);
	r = read_alloc(res, 0, out, err);
	if (r == 0)
		r = read_children(s, out, 1, err);
	if (r < 0)
		iso_allocation_clear(out);
	return r;
}

int iso_pg_alloc_get_by_key(struct iso_store *is, int64_t tenant_id, const char *key,
                            struct iso_allocation *out, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	int r;

	memset(out, 0, sizeof(*out));
	P_STR(&p, key);
	iso_pg_p_i64(&p, tenant_id);
	/* by the unique index allocations_idempotency (key, tenant_id) */
	r = iso_pg_query(s,
	                 "SELECT " ALLOC_COLS " FROM allocations WHERE idempotency_key = $1::text"
	                 " AND tenant_id = $2::bigint",
	                 &p, "allocation by key", NULL, NULL, &res, err);
	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no allocation with that key");
	r = read_alloc(res, 0, out, err);
	if (r == 0)
		r = read_children(s, out, 1, err);
	if (r < 0)
		iso_allocation_clear(out);
	return r;
}

/* Runs an allocation select and reads every row (read_alloc), and their
 * children when `children`. */
static int read_allocs(struct pg_store *s, const char *sql, struct pg_params *p, bool children,
                       struct iso_allocation **out, int *n, struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = NULL;
	struct iso_allocation *items;
	int rows, r;

	r = iso_pg_query(s, sql, p, "allocation list", NULL, NULL, &res, err);
	if (r < 0)
		return r;
	rows = PQntuples(res);
	if (rows == 0)
		return 0;
	items = calloc((size_t)rows, sizeof(*items));
	if (!items)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
	for (int i = 0; i < rows; i++) {
		r = read_alloc(res, i, &items[i], err);
		if (r < 0) {
			iso_allocations_free(items, i);
			return r;
		}
	}
	if (children) {
		r = read_children(s, items, rows, err);
		if (r < 0) {
			iso_allocations_free(items, rows);
			return r;
		}
	}
	*out = items;
	*n = rows;
	return 0;
}

int iso_pg_alloc_recent(struct iso_store *is, int limit, struct iso_allocation **out, int *n,
                        struct iso_error *err)
{
	struct pg_params p = {0};

	*out = NULL;
	*n = 0;
	if (limit <= 0)
		return iso_error_set(err, ISO_E_INVALID, "limit", "must be > 0, got %d", limit);
	iso_pg_p_i64(&p, limit);
	return read_allocs(pg_store_of(is),
	                   "SELECT " ALLOC_COLS " FROM allocations"
	                   " ORDER BY created_ms DESC, id DESC LIMIT $1::bigint",
	                   &p, false, out, n, err); /* the requests, not where they ran */
}

/* Resolves the `after` cursor to its created_ms. The cursor must be an
 * allocation the same filter could have listed (tenant and owner never
 * change), so it tells a caller nothing about other tenants' allocations. */
static int resolve_cursor(struct pg_store *s, const struct iso_alloc_filter *f, int64_t *created_ms,
                          struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	struct pg_row row;
	int r;

	P_STR(&p, f->after);
	iso_pg_p_i64(&p, f->tenant_id);
	if (f->owner)
		P_STR(&p, f->owner);
	else
		iso_pg_p_null(&p);
	r = iso_pg_query(s,
	                 "SELECT created_ms FROM allocations WHERE id = $1::text"
	                 " AND ($2::bigint = 0 OR tenant_id = $2::bigint)"
	                 " AND ($3::text IS NULL OR owner = $3::text)",
	                 &p, "allocation list", NULL, NULL, &res, err);
	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return iso_error_set(err, ISO_E_INVALID, "after", "unknown cursor \"%.*s\"",
		                     ISO_ID_MAX, f->after);
	iso_pg_row_init(&row, res, 0);
	*created_ms = iso_pg_rd_i64(&row);
	return iso_pg_row_check(&row, "allocations", f->after, err);
}

int iso_pg_alloc_list(struct iso_store *is, const struct iso_alloc_filter *f,
                      struct iso_allocation **out, int *n, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	struct pg_params p = {0};
	int64_t after_ms = INT64_MIN;
	const char *state = NULL;
	bool live;
	int r;

	*out = NULL;
	*n = 0;
	if (f->state >= 0) {
		state = state_text((enum iso_alloc_state)f->state);
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
	/* A non-terminal state filter implies live: the smaller index serves it. */
	live = f->live_only || (state && !iso_alloc_state_terminal((enum iso_alloc_state)f->state));
	iso_pg_p_i64(&p, after_ms);
	P_STR(&p, f->after ? f->after : "");
	if (f->owner)
		P_STR(&p, f->owner);
	else
		iso_pg_p_null(&p);
	if (state)
		P_STR(&p, state);
	else
		iso_pg_p_null(&p);
	if (f->limit > 0)
		iso_pg_p_i64(&p, f->limit);
	else
		iso_pg_p_null(&p);
	if (f->idem_key) {
		/* by the key's index, whatever else filters (0 or 1 row per tenant) */
		iso_pg_p_i64(&p, f->tenant_id);
		P_STR(&p, f->idem_key);
		iso_pg_p_i64(&p, live);
		return read_allocs(s,
		                   ALLOC_LIST(" AND ($6::bigint = 0 OR tenant_id = $6::bigint)"
		                              " AND idempotency_key = $7::text"
		                              " AND ($8::bigint = 0 OR " LIVE ")"),
		                   &p, true, out, n, err);
	}
	if (f->tenant_id > 0)
		iso_pg_p_i64(&p, f->tenant_id);
	static const char *const sql[2][2] = {
	    {ALLOC_LIST(""), ALLOC_LIST(" AND " LIVE)},
	    {ALLOC_LIST(" AND tenant_id = $6::bigint"),
	     ALLOC_LIST(" AND tenant_id = $6::bigint AND " LIVE)},
	};
	return read_allocs(s, sql[f->tenant_id > 0][live], &p, true, out, n, err);
}

int iso_pg_alloc_count_live(struct iso_store *is, int64_t tenant_id, int *n, struct iso_error *err)
{
	struct pg_params p = {0};

	*n = 0;
	if (tenant_id < 0)
		return iso_error_set(err, ISO_E_INVALID, "tenant",
		                     "tenant id %" PRId64 " is invalid", tenant_id);
	iso_pg_p_i64(&p, tenant_id);
	return iso_pg_count(pg_store_of(is),
	                    "SELECT count(*) FROM allocations WHERE ($1::bigint = 0 OR"
	                    " tenant_id = $1::bigint) AND " LIVE,
	                    &p, "allocation count", n, err);
}

/* pg_access.c: the PostgreSQL rows behind access and cluster facts: meta
 * key/values, tenants, tokens and node runtime state, with the contract of
 * store.h (missing row -ENOENT, unique clash -EEXIST, else -EIO) and the
 * same answers as sqlite_access.c. Inserts that can clash use ON CONFLICT
 * DO NOTHING and read "no row" as the clash, so that a clash inside the
 * caller's transaction does not abort it (PostgreSQL aborts a transaction
 * on any failed statement; SQLite only undoes the statement). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "store/pg_int.h"

#define TENANT_COLS                                                                                \
	"id, name, description, created_ms, updated_ms, org, shares, isolation, tags, "            \
	"max_pending, max_live, max_user_priority, writes_per_s, reads_per_s, io_uring, "            \
	"partition_mode"
#define TOKEN_COLS                                                                                 \
	"id, tenant_id, role, \"user\", description, hash, created_ms, expires_ms, revoked_ms, "   \
	"node"

/* ---- meta ---- */

int iso_pg_meta_get(struct iso_store *is, const char *key, char *buf, size_t size,
                    struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	struct pg_row row;
	int r;

	P_STR(&p, key);
	r = iso_pg_query(s, "SELECT value FROM meta WHERE key = $1::text", &p, "meta get", NULL,
	                 NULL, &res, err);
	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "meta key \"%s\" not found", key);
	if (!PQgetisnull(res, 0, 0) && (size_t)PQgetlength(res, 0, 0) >= size)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: meta key \"%s\": value of %d bytes does not fit a "
		                     "buffer of %zu",
		                     key, PQgetlength(res, 0, 0), size);
	iso_pg_row_init(&row, res, 0);
	iso_pg_rd_text(&row, buf, size);
	return iso_pg_row_check(&row, "meta", key, err);
}

int iso_pg_meta_set(struct iso_store *is, const char *key, const char *value, struct iso_error *err)
{
	struct pg_params p = {0};

	P_STR(&p, key);
	P_STR(&p, value);
	return iso_pg_exec(pg_store_of(is),
	                   "INSERT INTO meta(key, value) VALUES ($1::text, $2::text)"
	                   " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
	                   &p, "meta set", err);
}

/* ---- tenants ---- */

static void read_tenant(struct pg_row *row, void *item)
{
	struct iso_tenant *t = item;

	t->id = iso_pg_rd_i64(row);
	PRD_FIELD(row, t->name);
	PRD_FIELD(row, t->description);
	t->created_ms = iso_pg_rd_i64(row);
	t->updated_ms = iso_pg_rd_i64(row);
	PRD_FIELD(row, t->org);
	t->shares = iso_pg_rd_double(row);
	PRD_FIELD(row, t->isolation);
	PRD_FIELD(row, t->tags);
	t->max_pending = iso_pg_rd_int(row, INT32_MIN, INT32_MAX);
	t->max_live = iso_pg_rd_int(row, INT32_MIN, INT32_MAX);
	t->max_user_priority = iso_pg_rd_int(row, INT32_MIN, INT32_MAX);
	t->writes_per_s = iso_pg_rd_int(row, INT32_MIN, INT32_MAX);
	t->reads_per_s = iso_pg_rd_int(row, INT32_MIN, INT32_MAX);
	t->io_uring = iso_pg_rd_bool(row);
	t->partition = iso_pg_rd_bool(row) ? ISO_PARTITION_PER_ALLOCATION : ISO_PARTITION_PER_TENANT;
}

/* org, shares, isolation, tags, the limits and io_uring (defaults for a
 * zeroed struct). */
static void p_tenant_policy(struct pg_params *p, const struct iso_tenant *t)
{
	P_FIELD(p, t->org);
	iso_pg_p_double(p, t->shares > 0 ? t->shares : 1.0);
	P_STR(p, t->isolation[0] ? t->isolation : "shared");
	P_FIELD(p, t->tags);
	iso_pg_p_i64(p, t->max_pending);
	iso_pg_p_i64(p, t->max_live);
	iso_pg_p_i64(p, t->max_user_priority);
	iso_pg_p_i64(p, t->writes_per_s);
	iso_pg_p_i64(p, t->reads_per_s);
	iso_pg_p_i64(p, t->io_uring);
	iso_pg_p_i64(p, t->partition == ISO_PARTITION_PER_ALLOCATION);
}

static int get_tenant(struct pg_store *s, const char *sql, struct pg_params *p, const char *what,
                      struct iso_tenant *out, struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_row row;
	char id[24];
	int r = iso_pg_query(s, sql, p, "tenant get", NULL, NULL, &res, err);

	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "tenant %s not found", what);
	memset(out, 0, sizeof(*out));
	iso_pg_row_init(&row, res, 0);
	read_tenant(&row, out);
	snprintf(id, sizeof(id), "%" PRId64, out->id);
	return iso_pg_row_check(&row, "tenants", id, err);
}

int iso_pg_tenant_insert(struct iso_store *is, struct iso_tenant *t, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	struct pg_row row;
	int r;

	P_FIELD(&p, t->name);
	P_FIELD(&p, t->description);
	iso_pg_p_i64(&p, t->created_ms);
	iso_pg_p_i64(&p, t->updated_ms);
	p_tenant_policy(&p, t);
	r = iso_pg_query(s,
	                 "INSERT INTO tenants(name, description, created_ms, updated_ms, org,"
	                 " shares, isolation, tags, max_pending, max_live, max_user_priority,"
	                 " writes_per_s, reads_per_s, io_uring, partition_mode) VALUES ($1::text,"
	                 " $2::text, $3::bigint, $4::bigint, $5::text, $6::float8, $7::text,"
	                 " $8::text, $9::bigint, $10::bigint, $11::bigint, $12::bigint,"
	                 " $13::bigint, $14::bigint, $15::bigint)"
	                 " ON CONFLICT (name) DO NOTHING RETURNING id",
	                 &p, "tenant insert", "tenant", t->name, &res, err);
	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return iso_error_set(err, ISO_E_CONFLICT, NULL, "tenant \"%s\" already exists",
		                     t->name);
	iso_pg_row_init(&row, res, 0);
	t->id = iso_pg_rd_i64(&row);
	return iso_pg_row_check(&row, "tenants", t->name, err);
}

int iso_pg_tenant_update(struct iso_store *is, const struct iso_tenant *t, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	int r;

	iso_pg_p_i64(&p, t->id);
	P_FIELD(&p, t->name);
	P_FIELD(&p, t->description);
	iso_pg_p_i64(&p, t->updated_ms);
	p_tenant_policy(&p, t);
	/* A rename onto another tenant's name is a clash; the savepoint keeps
	 * the caller's transaction usable after it, as in SQLite. */
	r = iso_pg_atomic_begin(s, "tenant update", err);
	if (r < 0)
		return r;
	r = iso_pg_query(s,
	                 "UPDATE tenants SET name = $2::text, description = $3::text,"
	                 " updated_ms = $4::bigint, org = $5::text, shares = $6::float8,"
	                 " isolation = $7::text, tags = $8::text, max_pending = $9::bigint,"
	                 " max_live = $10::bigint, max_user_priority = $11::bigint,"
	                 " writes_per_s = $12::bigint, reads_per_s = $13::bigint,"
	                 " io_uring = $14::bigint, partition_mode = $15::bigint"
	                 " WHERE id = $1::bigint",
	                 &p, "tenant update", "tenant", t->name, &res, err);
	if (r == 0 && iso_pg_changes(res) == 0)
		r = iso_error_set(err, ISO_E_NOT_FOUND, NULL, "tenant %" PRId64 " not found",
		                  t->id);
	if (r < 0) {
		iso_pg_atomic_abort(s);
		return r;
	}
	return iso_pg_atomic_end(s, "tenant update", err);
}

int iso_pg_tenant_delete(struct iso_store *is, int64_t id, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	int r;

	iso_pg_p_i64(&p, id);
	r = iso_pg_query(s, "DELETE FROM tenants WHERE id = $1::bigint", &p, "tenant delete", NULL,
	                 NULL, &res, err);
	if (r == 0 && iso_pg_changes(res) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "tenant %" PRId64 " not found",
		                     id);
	return r;
}

int iso_pg_tenant_get_by_name(struct iso_store *is, const char *name, struct iso_tenant *out,
                              struct iso_error *err)
{
	struct pg_params p = {0};
	char what[ISO_NAME_MAX + 8];

	P_STR(&p, name);
	snprintf(what, sizeof(what), "\"%.*s\"", ISO_NAME_MAX, name);
	return get_tenant(pg_store_of(is),
	                  "SELECT " TENANT_COLS " FROM tenants WHERE name = $1::text", &p, what,
	                  out, err);
}

int iso_pg_tenant_get_by_id(struct iso_store *is, int64_t id, struct iso_tenant *out,
                            struct iso_error *err)
{
	struct pg_params p = {0};
	char what[24];

	iso_pg_p_i64(&p, id);
	snprintf(what, sizeof(what), "%" PRId64, id);
	return get_tenant(pg_store_of(is),
	                  "SELECT " TENANT_COLS " FROM tenants WHERE id = $1::bigint", &p, what,
	                  out, err);
}

int iso_pg_tenant_list(struct iso_store *is, const char *after, int limit, struct iso_tenant **out,
                       int *n, struct iso_error *err)
{
	struct pg_params p = {0};

	/* Names are never empty, so "" starts at the beginning; LIMIT NULL is
	 * no limit. */
	P_STR(&p, after ? after : "");
	if (limit > 0)
		iso_pg_p_i64(&p, limit);
	else
		iso_pg_p_null(&p);
	return iso_pg_list(pg_store_of(is),
	                   "SELECT " TENANT_COLS " FROM tenants WHERE name > $1::text"
	                   " ORDER BY name LIMIT $2::bigint",
	                   &p, sizeof(**out), read_tenant, "tenants", (void **)out, n, err);
}

/* ---- tokens ---- */

static void read_token(struct pg_row *row, void *item)
{
	struct iso_token *t = item;

	PRD_FIELD(row, t->id);
	t->tenant_id = iso_pg_rd_i64_or_null(row);
	t->role = iso_pg_rd_role(row);
	PRD_FIELD(row, t->user);
	PRD_FIELD(row, t->description);
	iso_pg_rd_blob(row, t->hash, sizeof(t->hash));
	t->created_ms = iso_pg_rd_i64(row);
	t->expires_ms = iso_pg_rd_i64_or_null(row);
	t->revoked_ms = iso_pg_rd_i64_or_null(row);
	PRD_FIELD(row, t->node);
}

static const char *role_text(enum iso_role r)
{
	const char *name = iso_role_name(r);

	return strcmp(name, "unknown") ? name : NULL;
}

int iso_pg_token_insert(struct iso_store *is, const struct iso_token *t, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	const char *role = role_text(t->role);
	int r;

	if (!role)
		return iso_error_set(err, ISO_E_INVALID, "role", "token role %d is unknown",
		                     (int)t->role);
	if (t->tenant_id < 0)
		return iso_error_set(err, ISO_E_INVALID, "tenant",
		                     "token tenant id %" PRId64 " is invalid", t->tenant_id);
	if (t->tenant_id > 0) {
		_cleanup_pgres_ PGresult *ex = NULL;
		struct pg_params q = {0};

		iso_pg_p_i64(&q, t->tenant_id);
		r = iso_pg_query(s, "SELECT 1 FROM tenants WHERE id = $1::bigint", &q,
		                 "token insert", NULL, NULL, &ex, err);
		if (r < 0)
			return r;
		if (PQntuples(ex) == 0)
			return iso_error_set(err, ISO_E_NOT_FOUND, "tenant",
			                     "tenant %" PRId64 " not found", t->tenant_id);
	}
	P_FIELD(&p, t->id);
	iso_pg_p_i64_or_null(&p, t->tenant_id);
	P_STR(&p, role);
	P_FIELD(&p, t->user);
	P_FIELD(&p, t->description);
	iso_pg_p_bytea(&p, t->hash, sizeof(t->hash));
	iso_pg_p_i64(&p, t->created_ms);
	iso_pg_p_i64_or_null(&p, t->expires_ms);
	iso_pg_p_i64_or_null(&p, t->revoked_ms);
	P_FIELD(&p, t->node);
	r = iso_pg_query(s,
	                 "INSERT INTO tokens(" TOKEN_COLS ") VALUES ($1::text, $2::bigint,"
	                 " $3::text, $4::text, $5::text, $6::bytea, $7::bigint, $8::bigint,"
	                 " $9::bigint, $10::text) ON CONFLICT (id) DO NOTHING",
	                 &p, "token insert", "token", t->id, &res, err);
	if (r == 0 && iso_pg_changes(res) == 0)
		return iso_error_set(err, ISO_E_CONFLICT, NULL, "token \"%s\" already exists",
		                     t->id);
	return r;
}

int iso_pg_token_get(struct iso_store *is, const char *id, struct iso_token *out,
                     struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	struct pg_row row;
	int r;

	P_STR(&p, id);
	r = iso_pg_query(s, "SELECT " TOKEN_COLS " FROM tokens WHERE id = $1::text", &p,
	                 "token get", NULL, NULL, &res, err);
	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "token \"%.*s\" not found",
		                     ISO_TOKEN_ID_LEN, id);
	memset(out, 0, sizeof(*out));
	iso_pg_row_init(&row, res, 0);
	read_token(&row, out);
	return iso_pg_row_check(&row, "tokens", out->id, err);
}

int iso_pg_token_list(struct iso_store *is, int64_t tenant_id, const char *after, int limit,
                      struct iso_token **out, int *n, struct iso_error *err)
{
	struct pg_params p = {0};

	P_STR(&p, after ? after : "");
	if (limit > 0)
		iso_pg_p_i64(&p, limit);
	else
		iso_pg_p_null(&p);
	if (tenant_id < 0)
		return iso_pg_list(pg_store_of(is),
		                   "SELECT " TOKEN_COLS " FROM tokens WHERE id > $1::text"
		                   " ORDER BY id LIMIT $2::bigint",
		                   &p, sizeof(**out), read_token, "tokens", (void **)out, n, err);
	/* tenant 0: the cluster-wide tokens (NULL tenant_id) */
	iso_pg_p_i64_or_null(&p, tenant_id);
	return iso_pg_list(pg_store_of(is),
	                   "SELECT " TOKEN_COLS " FROM tokens"
	                   " WHERE tenant_id IS NOT DISTINCT FROM $3::bigint AND id > $1::text"
	                   " ORDER BY id LIMIT $2::bigint",
	                   &p, sizeof(**out), read_token, "tokens", (void **)out, n, err);
}

int iso_pg_token_revoke(struct iso_store *is, const char *id, int64_t when_ms,
                        struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	int r;

	if (when_ms <= 0)
		return iso_error_set(err, ISO_E_INVALID, "revoked", "revocation time must be > 0");
	P_STR(&p, id);
	iso_pg_p_i64(&p, when_ms);
	r = iso_pg_query(s,
	                 "UPDATE tokens SET revoked_ms = coalesce(revoked_ms, $2::bigint)"
	                 " WHERE id = $1::text",
	                 &p, "token revoke", NULL, NULL, &res, err);
	if (r == 0 && iso_pg_changes(res) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "token \"%.*s\" not found",
		                     ISO_TOKEN_ID_LEN, id);
	return r;
}

int iso_pg_token_revoke_tenant(struct iso_store *is, int64_t tenant_id, int64_t when_ms,
                               struct iso_error *err)
{
	struct pg_params p = {0};

	/* 0 would be every cluster-wide token: never what a caller means here. */
	if (tenant_id <= 0)
		return iso_error_set(err, ISO_E_INVALID, "tenant",
		                     "tenant id %" PRId64 " is invalid", tenant_id);
	if (when_ms <= 0)
		return iso_error_set(err, ISO_E_INVALID, "revoked", "revocation time must be > 0");
	iso_pg_p_i64(&p, tenant_id);
	iso_pg_p_i64(&p, when_ms);
	return iso_pg_exec(pg_store_of(is),
	                   "UPDATE tokens SET revoked_ms = $2::bigint"
	                   " WHERE tenant_id = $1::bigint AND revoked_ms IS NULL",
	                   &p, "token revoke tenant", err);
}

int iso_pg_count(struct pg_store *s, const char *sql, struct pg_params *p, const char *op, int *n,
                 struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_row row;
	int r = iso_pg_query(s, sql, p, op, NULL, NULL, &res, err);

	*n = 0;
	if (r < 0)
		return r;
	if (PQntuples(res) != 1)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: %s: no count", op);
	iso_pg_row_init(&row, res, 0);
	*n = iso_pg_rd_int(&row, 0, INT32_MAX);
	if (row.bad >= 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: %s: count overflows", op);
	return 0;
}

int iso_pg_token_count_live(struct iso_store *is, int64_t tenant_id, int64_t now_ms, int *n,
                            struct iso_error *err)
{
	struct pg_params p = {0};

	iso_pg_p_i64(&p, tenant_id);
	iso_pg_p_i64(&p, now_ms);
	return iso_pg_count(
	    pg_store_of(is),
	    "SELECT count(*) FROM tokens WHERE tenant_id = $1::bigint"
	    " AND revoked_ms IS NULL AND (expires_ms IS NULL OR expires_ms > $2::bigint)",
	    &p, "token count", n, err);
}

/* ---- node runtime state ---- */

int iso_pg_node_state_set(struct iso_store *is, const struct iso_node_state *ns,
                          struct iso_error *err)
{
	const char *sched = iso_node_sched_name(ns->sched);
	struct pg_params p = {0};

	if (strcmp(sched, "unknown") == 0)
		return iso_error_set(err, ISO_E_INVALID, "state", "node state %d is unknown",
		                     (int)ns->sched);
	P_FIELD(&p, ns->name);
	P_STR(&p, sched);
	return iso_pg_exec(pg_store_of(is),
	                   "INSERT INTO node_state(name, sched) VALUES ($1::text, $2::text)"
	                   " ON CONFLICT (name) DO UPDATE SET sched = excluded.sched",
	                   &p, "node state set", err);
}

static void read_node_state(struct pg_row *row, void *item)
{
	struct iso_node_state *ns = item;

	PRD_FIELD(row, ns->name);
	ns->sched = iso_pg_rd_node_sched(row);
}

int iso_pg_node_state_list(struct iso_store *is, struct iso_node_state **out, int *n,
                           struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is), "SELECT name, sched FROM node_state ORDER BY name",
	                   NULL, sizeof(**out), read_node_state, "node_state", (void **)out, n,
	                   err);
}

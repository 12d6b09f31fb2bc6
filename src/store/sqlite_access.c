/* sqlite_access.c: the SQLite rows behind access and cluster facts: meta
 * key/values, tenants, tokens and node runtime state. Each op binds, steps
 * one cached statement and maps the outcome to the store contract
 * (store.h): missing row -ENOENT, unique clash -EEXIST, else -EIO. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "store/sqlite_int.h"

/* ---- meta ---- */

int iso_sqlite_meta_get(struct iso_store *is, const char *key, char *buf, size_t size,
                        struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_META_GET];
	struct iso_sqlite_row row;
	int rc;

	if (BIND_STR(st, 1, key))
		return iso_sqlite_fail(s->db, "meta get", err);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "meta key \"%s\" not found", key);
	if (rc != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "meta get", err);
	if (sqlite3_column_type(st, 0) == SQLITE_TEXT &&
	    (size_t)sqlite3_column_bytes(st, 0) >= size)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: meta key \"%s\": value of %d bytes does not fit a "
		                     "buffer of %zu",
		                     key, sqlite3_column_bytes(st, 0), size);
	iso_sqlite_row_init(&row, st);
	iso_sqlite_rd_text(&row, buf, size);
	return iso_sqlite_row_check(&row, "meta", key, err);
}

int iso_sqlite_meta_set(struct iso_store *is, const char *key, const char *value,
                        struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_META_SET];

	if (BIND_STR(st, 1, key) || BIND_STR(st, 2, value))
		return iso_sqlite_fail(s->db, "meta set", err);
	return iso_sqlite_exec_stmt(s->db, st, "meta set", err);
}

/* ---- tenants ---- */

static int read_tenant(sqlite3_stmt *st, struct iso_tenant *t, struct iso_error *err)
{
	struct iso_sqlite_row row;
	char id[24];

	memset(t, 0, sizeof(*t));
	iso_sqlite_row_init(&row, st);
	t->id = iso_sqlite_rd_i64(&row);
	RD_FIELD(&row, t->name);
	RD_FIELD(&row, t->description);
	t->created_ms = iso_sqlite_rd_i64(&row);
	t->updated_ms = iso_sqlite_rd_i64(&row);
	RD_FIELD(&row, t->org);
	t->shares = iso_sqlite_rd_double(&row);
	RD_FIELD(&row, t->isolation);
	RD_FIELD(&row, t->tags);
	t->max_pending = (int)iso_sqlite_rd_i64(&row);
	t->max_live = (int)iso_sqlite_rd_i64(&row);
	t->max_user_priority = (int)iso_sqlite_rd_i64(&row);
	t->writes_per_s = (int)iso_sqlite_rd_i64(&row);
	t->reads_per_s = (int)iso_sqlite_rd_i64(&row);
	t->io_uring = iso_sqlite_rd_bool(&row);
	t->partition = iso_sqlite_rd_bool(&row) ? ISO_PARTITION_PER_ALLOCATION
	                                        : ISO_PARTITION_PER_TENANT;
	snprintf(id, sizeof(id), "%" PRId64, t->id);
	return iso_sqlite_row_check(&row, "tenants", id, err);
}

/* org, shares, isolation, tags, the limits, io_uring and the partition mode at ?first..
 * (defaults for a zeroed struct). */
static int bind_tenant_policy(sqlite3_stmt *st, int first, const struct iso_tenant *t)
{
	return BIND_FIELD(st, first, t->org) ||
	       sqlite3_bind_double(st, first + 1, t->shares > 0 ? t->shares : 1.0) ||
	       BIND_STR(st, first + 2, t->isolation[0] ? t->isolation : "shared") ||
	       BIND_FIELD(st, first + 3, t->tags) ||
	       sqlite3_bind_int(st, first + 4, t->max_pending) ||
	       sqlite3_bind_int(st, first + 5, t->max_live) ||
	       sqlite3_bind_int(st, first + 6, t->max_user_priority) ||
	       sqlite3_bind_int(st, first + 7, t->writes_per_s) ||
	       sqlite3_bind_int(st, first + 8, t->reads_per_s) ||
	       sqlite3_bind_int(st, first + 9, t->io_uring) ||
	       sqlite3_bind_int(st, first + 10, t->partition == ISO_PARTITION_PER_ALLOCATION);
}

/* Steps a single-row lookup; `what` names the object for not-found. */
static int get_tenant(struct sqlite_store *s, sqlite3_stmt *st, const char *what,
                      struct iso_tenant *out, struct iso_error *err)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_DONE)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "tenant %s not found", what);
	if (rc != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "tenant get", err);
	return read_tenant(st, out, err);
}

int iso_sqlite_tenant_insert(struct iso_store *is, struct iso_tenant *t, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TENANT_INSERT];

	if (BIND_FIELD(st, 1, t->name) || BIND_FIELD(st, 2, t->description) ||
	    iso_sqlite_bind_i64(st, 3, t->created_ms) ||
	    iso_sqlite_bind_i64(st, 4, t->updated_ms) || bind_tenant_policy(st, 5, t))
		return iso_sqlite_fail(s->db, "tenant insert", err);
	if (sqlite3_step(st) != SQLITE_DONE)
		return iso_sqlite_insert_fail(s->db, "tenant insert", "tenant", t->name, err);
	t->id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

int iso_sqlite_tenant_update(struct iso_store *is, const struct iso_tenant *t,
                             struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TENANT_UPDATE];

	if (iso_sqlite_bind_i64(st, 1, t->id) || BIND_FIELD(st, 2, t->name) ||
	    BIND_FIELD(st, 3, t->description) || iso_sqlite_bind_i64(st, 4, t->updated_ms) ||
	    bind_tenant_policy(st, 5, t))
		return iso_sqlite_fail(s->db, "tenant update", err);
	if (sqlite3_step(st) != SQLITE_DONE)
		return iso_sqlite_insert_fail(s->db, "tenant update", "tenant", t->name, err);
	if (sqlite3_changes(s->db) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "tenant %" PRId64 " not found",
		                     t->id);
	return 0;
}

int iso_sqlite_tenant_delete(struct iso_store *is, int64_t id, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TENANT_DELETE];
	int r;

	if (iso_sqlite_bind_i64(st, 1, id))
		return iso_sqlite_fail(s->db, "tenant delete", err);
	r = iso_sqlite_exec_stmt(s->db, st, "tenant delete", err);
	if (r == 0 && sqlite3_changes(s->db) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "tenant %" PRId64 " not found",
		                     id);
	return r;
}

int iso_sqlite_tenant_get_by_name(struct iso_store *is, const char *name, struct iso_tenant *out,
                                  struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TENANT_BY_NAME];
	char what[ISO_NAME_MAX + 8];

	if (BIND_STR(st, 1, name))
		return iso_sqlite_fail(s->db, "tenant get", err);
	snprintf(what, sizeof(what), "\"%.*s\"", ISO_NAME_MAX, name);
	return get_tenant(s, st, what, out, err);
}

int iso_sqlite_tenant_get_by_id(struct iso_store *is, int64_t id, struct iso_tenant *out,
                                struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TENANT_BY_ID];
	char what[24];

	if (iso_sqlite_bind_i64(st, 1, id))
		return iso_sqlite_fail(s->db, "tenant get", err);
	snprintf(what, sizeof(what), "%" PRId64, id);
	return get_tenant(s, st, what, out, err);
}

int iso_sqlite_tenant_list(struct iso_store *is, const char *after, int limit,
                           struct iso_tenant **out, int *n, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TENANT_LIST];
	_cleanup_free_ struct iso_tenant *items = NULL;
	int count = 0, cap = 0, rc, r;

	*out = NULL;
	*n = 0;
	/* Names are never empty, so "" starts at the beginning; a cursor need not
	 * exist any more (the tenant may have been deleted between pages). */
	if (BIND_STR(st, 1, after ? after : "") ||
	    iso_sqlite_bind_i64(st, 2, limit > 0 ? limit : -1))
		return iso_sqlite_fail(s->db, "tenant list", err);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (iso_sqlite_grow((void **)&items, &cap, count, sizeof(*items)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		r = read_tenant(st, &items[count], err);
		if (r < 0)
			return r;
		count++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "tenant list", err);
	*out = ISO_TAKE(items);
	*n = count;
	return 0;
}

/* ---- tokens ---- */

static int read_token(sqlite3_stmt *st, struct iso_token *t, struct iso_error *err)
{
	struct iso_sqlite_row row;

	memset(t, 0, sizeof(*t));
	iso_sqlite_row_init(&row, st);
	RD_FIELD(&row, t->id);
	t->tenant_id = iso_sqlite_rd_i64_or_null(&row);
	t->role = iso_sqlite_rd_role(&row);
	RD_FIELD(&row, t->user);
	RD_FIELD(&row, t->description);
	iso_sqlite_rd_blob(&row, t->hash, sizeof(t->hash));
	t->created_ms = iso_sqlite_rd_i64(&row);
	t->expires_ms = iso_sqlite_rd_i64_or_null(&row);
	t->revoked_ms = iso_sqlite_rd_i64_or_null(&row);
	RD_FIELD(&row, t->node);
	return iso_sqlite_row_check(&row, "tokens", t->id, err);
}

int iso_sqlite_token_insert(struct iso_store *is, const struct iso_token *t, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TOKEN_INSERT];
	const char *role = iso_sqlite_role_text(t->role);

	if (!role)
		return iso_error_set(err, ISO_E_INVALID, "role", "token role %d is unknown",
		                     (int)t->role);
	if (t->tenant_id < 0)
		return iso_error_set(err, ISO_E_INVALID, "tenant",
		                     "token tenant id %" PRId64 " is invalid", t->tenant_id);
	if (t->tenant_id > 0) {
		_cleanup_stmt_ sqlite3_stmt *ex = s->st[ST_TENANT_EXISTS];
		int rc;

		if (iso_sqlite_bind_i64(ex, 1, t->tenant_id))
			return iso_sqlite_fail(s->db, "token insert", err);
		rc = sqlite3_step(ex);
		if (rc == SQLITE_DONE)
			return iso_error_set(err, ISO_E_NOT_FOUND, "tenant",
			                     "tenant %" PRId64 " not found", t->tenant_id);
		if (rc != SQLITE_ROW)
			return iso_sqlite_fail(s->db, "token insert", err);
	}
	if (BIND_FIELD(st, 1, t->id) || iso_sqlite_bind_i64_or_null(st, 2, t->tenant_id) ||
	    BIND_STR(st, 3, role) || BIND_FIELD(st, 4, t->user) ||
	    BIND_FIELD(st, 5, t->description) ||
	    sqlite3_bind_blob(st, 6, t->hash, sizeof(t->hash), SQLITE_STATIC) ||
	    iso_sqlite_bind_i64(st, 7, t->created_ms) ||
	    iso_sqlite_bind_i64_or_null(st, 8, t->expires_ms) ||
	    iso_sqlite_bind_i64_or_null(st, 9, t->revoked_ms) || BIND_FIELD(st, 10, t->node))
		return iso_sqlite_fail(s->db, "token insert", err);
	if (sqlite3_step(st) != SQLITE_DONE)
		return iso_sqlite_insert_fail(s->db, "token insert", "token", t->id, err);
	return 0;
}

int iso_sqlite_token_get(struct iso_store *is, const char *id, struct iso_token *out,
                         struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TOKEN_GET];
	int rc;

	if (BIND_STR(st, 1, id))
		return iso_sqlite_fail(s->db, "token get", err);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "token \"%.*s\" not found",
		                     ISO_TOKEN_ID_LEN, id);
	if (rc != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "token get", err);
	return read_token(st, out, err);
}

int iso_sqlite_token_list(struct iso_store *is, int64_t tenant_id, const char *after, int limit,
                          struct iso_token **out, int *n, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st =
	    s->st[tenant_id < 0 ? ST_TOKEN_LIST_ALL : ST_TOKEN_LIST_TENANT];
	_cleanup_free_ struct iso_token *items = NULL;
	int count = 0, cap = 0, rc, r;

	*out = NULL;
	*n = 0;
	if (BIND_STR(st, 1, after ? after : "") ||
	    iso_sqlite_bind_i64(st, 2, limit > 0 ? limit : -1) ||
	    (tenant_id >= 0 && iso_sqlite_bind_i64_or_null(st, 3, tenant_id)))
		return iso_sqlite_fail(s->db, "token list", err);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (iso_sqlite_grow((void **)&items, &cap, count, sizeof(*items)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		r = read_token(st, &items[count], err);
		if (r < 0)
			return r;
		count++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "token list", err);
	*out = ISO_TAKE(items);
	*n = count;
	return 0;
}

int iso_sqlite_token_revoke(struct iso_store *is, const char *id, int64_t when_ms,
                            struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TOKEN_REVOKE];
	int r;

	if (when_ms <= 0)
		return iso_error_set(err, ISO_E_INVALID, "revoked", "revocation time must be > 0");
	if (BIND_STR(st, 1, id) || iso_sqlite_bind_i64(st, 2, when_ms))
		return iso_sqlite_fail(s->db, "token revoke", err);
	r = iso_sqlite_exec_stmt(s->db, st, "token revoke", err);
	if (r == 0 && sqlite3_changes(s->db) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "token \"%.*s\" not found",
		                     ISO_TOKEN_ID_LEN, id);
	return r;
}

int iso_sqlite_token_revoke_tenant(struct iso_store *is, int64_t tenant_id, int64_t when_ms,
                                   struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TOKEN_REVOKE_TENANT];

	/* 0 would be every cluster-wide token: never what a caller means here. */
	if (tenant_id <= 0)
		return iso_error_set(err, ISO_E_INVALID, "tenant",
		                     "tenant id %" PRId64 " is invalid", tenant_id);
	if (when_ms <= 0)
		return iso_error_set(err, ISO_E_INVALID, "revoked", "revocation time must be > 0");
	if (iso_sqlite_bind_i64(st, 1, tenant_id) || iso_sqlite_bind_i64(st, 2, when_ms))
		return iso_sqlite_fail(s->db, "token revoke tenant", err);
	return iso_sqlite_exec_stmt(s->db, st, "token revoke tenant", err);
}

int iso_sqlite_token_count_live(struct iso_store *is, int64_t tenant_id, int64_t now_ms, int *n,
                                struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_TOKEN_COUNT_LIVE];

	if (iso_sqlite_bind_i64(st, 1, tenant_id) || iso_sqlite_bind_i64(st, 2, now_ms) ||
	    sqlite3_step(st) != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "token count", err);
	*n = sqlite3_column_int(st, 0);
	return 0;
}

/* ---- node runtime state ---- */

int iso_sqlite_node_state_set(struct iso_store *is, const struct iso_node_state *ns,
                              struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_NODE_SET];
	const char *sched = iso_sqlite_node_sched_text(ns->sched);

	if (!sched)
		return iso_error_set(err, ISO_E_INVALID, "state", "node state %d is unknown",
		                     (int)ns->sched);
	if (BIND_FIELD(st, 1, ns->name) || BIND_STR(st, 2, sched))
		return iso_sqlite_fail(s->db, "node state set", err);
	return iso_sqlite_exec_stmt(s->db, st, "node state set", err);
}

int iso_sqlite_node_state_list(struct iso_store *is, struct iso_node_state **out, int *n,
                               struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_NODE_LIST];
	_cleanup_free_ struct iso_node_state *items = NULL;
	int count = 0, cap = 0, rc, r;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_sqlite_row row;
		struct iso_node_state *ns;

		if (iso_sqlite_grow((void **)&items, &cap, count, sizeof(*items)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		ns = &items[count];
		memset(ns, 0, sizeof(*ns));
		iso_sqlite_row_init(&row, st);
		RD_FIELD(&row, ns->name);
		ns->sched = iso_sqlite_rd_node_sched(&row);
		r = iso_sqlite_row_check(&row, "node_state", ns->name, err);
		if (r < 0)
			return r;
		count++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "node state list", err);
	*out = ISO_TAKE(items);
	*n = count;
	return 0;
}

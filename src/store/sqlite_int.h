/* sqlite_int.h: what the files of the SQLite store share and nobody else sees:
 * the store struct with its cached prepared statements, the statement ids,
 * and the small helpers that turn SQLite results into iso_error records.
 * Split by job: sqlite.c (open, close, transactions, statement table),
 * sqlite_schema.c (migrations), sqlite_rows.c (row reader, bind and error
 * helpers), sqlite_access.c (meta, tenants, tokens, node state),
 * sqlite_alloc.c (allocations). */
#ifndef ISOSTACK_STORE_SQLITE_INT_H
#define ISOSTACK_STORE_SQLITE_INT_H

#include <sqlite3.h>

#include "isostack/store.h"

/* Every statement the store runs, prepared once at open. The SQL lives in
 * sqlite.c next to this list's order; keep both in step. */
enum sqlite_stmt_id {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_SAVEPOINT,
	ST_RELEASE,
	ST_ROLLBACK_TO,
	ST_META_GET,
	ST_META_SET,
	ST_TENANT_INSERT,
	ST_TENANT_UPDATE,
	ST_TENANT_DELETE,
	ST_TENANT_BY_NAME,
	ST_TENANT_BY_ID,
	ST_TENANT_LIST,
	ST_TENANT_EXISTS,
	ST_TOKEN_INSERT,
	ST_TOKEN_GET,
	ST_TOKEN_LIST_ALL,
	ST_TOKEN_LIST_TENANT,
	ST_TOKEN_REVOKE,
	ST_TOKEN_REVOKE_TENANT,
	ST_TOKEN_COUNT_LIVE,
	ST_NODE_SET,
	ST_NODE_LIST,
	ST_FKEY_PUT,
	ST_FKEY_DELETE,
	ST_FKEY_LIST,
	ST_FPORT_PUT,
	ST_FPORT_DELETE,
	ST_FPORT_LIST,
	ST_NPROJ_PUT,
	ST_NPROJ_DELETE,
	ST_NPROJ_LIST,
	ST_NOBJ_PUT,
	ST_NOBJ_DELETE,
	ST_NOBJ_LIST,
	ST_ALLOC_INSERT,
	ST_ALLOC_UPDATE,
	ST_ALLOC_GET,
	ST_ALLOC_CURSOR,
	/* The four list variants, in this order (base + tenant + 2 * live): one
	 * per index that serves them, so no filter scans history it does not
	 * need. */
	ST_ALLOC_LIST,
	ST_ALLOC_LIST_TENANT,
	ST_ALLOC_LIST_LIVE,
	ST_ALLOC_LIST_LIVE_TENANT,
	ST_ALLOC_COUNT_LIVE,
	ST_ALLOC_COUNT_LIVE_ALL,
	ST_ALLOC_RECENT,
	ST_ALLOC_BY_KEY,
	ST_ALLOC_LIST_KEY,
	ST_MEMBER_INSERT,
	ST_MEMBER_DELETE,
	ST_MEMBER_LIST,
	ST_SLOT_INSERT,
	ST_SLOT_DELETE,
	ST_SLOT_LIST,
	ST_AUDIT_APPEND,
	ST_AUDIT_COUNT,
	ST_AUDIT_SCAN,
	ST_AUDIT_SCAN_TENANT,
	ST_AUDIT_HEAD_PUT,
	ST_AUDIT_HEAD_LATEST,
	ST_AUDIT_HEAD_SCAN,
	ST__COUNT,
};

struct sqlite_store {
	struct iso_store base;
	sqlite3 *db;
	sqlite3_stmt *st[ST__COUNT];
	bool in_tx; /* between a successful begin and commit/rollback */
};

static inline struct sqlite_store *sqlite_store_of(struct iso_store *s)
{
	return (struct sqlite_store *)s;
}

/* Resets a cached statement and drops its bindings when the variable holding
 * it goes out of scope, so every return path leaves it ready for reuse. */
static inline void iso_sqlite_stmt_donep(sqlite3_stmt **st)
{
	if (*st) {
		sqlite3_reset(*st);
		sqlite3_clear_bindings(*st);
	}
}
#define _cleanup_stmt_ _cleanup_(iso_sqlite_stmt_donep)

/* ---- sqlite_rows.c ---- */

/* ISO_E_INTERNAL "store: <op>: <sqlite3_errmsg>". */
int iso_sqlite_fail(sqlite3 *db, const char *op, struct iso_error *err);
/* After a failed step on an insert: a unique/primary key clash becomes
 * ISO_E_CONFLICT "<what> \"<key>\" already exists", anything else
 * iso_sqlite_fail(). */
int iso_sqlite_insert_fail(sqlite3 *db, const char *op, const char *what, const char *key,
                           struct iso_error *err);
/* Runs a statement that returns no rows (SQLITE_DONE); 0 or iso_sqlite_fail(). */
int iso_sqlite_exec_stmt(sqlite3 *db, sqlite3_stmt *st, const char *op, struct iso_error *err);

/* Binds: all return an SQLite result code (SQLITE_OK == 0), so calls chain
 * with || and one failure check covers the lot. Text from fixed-size model
 * fields is bounded by the field (BIND_FIELD). */
int iso_sqlite_bind_text(sqlite3_stmt *st, int idx, const char *s, size_t max);
int iso_sqlite_bind_i64(sqlite3_stmt *st, int idx, int64_t v);
int iso_sqlite_bind_i64_or_null(sqlite3_stmt *st, int idx, int64_t v); /* 0 -> NULL */
#define BIND_FIELD(st, idx, field) iso_sqlite_bind_text((st), (idx), (field), sizeof(field))
#define BIND_STR(st, idx, s)       iso_sqlite_bind_text((st), (idx), (s), (size_t)-1)

/* Reads the columns of the current row left to right. The first column that
 * does not fit its field (NULL where not allowed, wrong type, too long, out of
 * range, an unknown enum name) is remembered; iso_sqlite_row_check() then
 * reports the row as corrupt, naming table, id and column. Nothing is guessed. */
struct iso_sqlite_row {
	sqlite3_stmt *st;
	int col;
	int bad; /* first bad column, or -1 */
};
void iso_sqlite_row_init(struct iso_sqlite_row *r, sqlite3_stmt *st);
void iso_sqlite_rd_text(struct iso_sqlite_row *r, char *buf, size_t size);
int64_t iso_sqlite_rd_i64(struct iso_sqlite_row *r);
double iso_sqlite_rd_double(struct iso_sqlite_row *r);       /* REAL or INTEGER */
int64_t iso_sqlite_rd_i64_or_null(struct iso_sqlite_row *r); /* NULL -> 0 */
void iso_sqlite_rd_text_or_null(struct iso_sqlite_row *r, char *buf, size_t size); /* NULL -> "" */
int iso_sqlite_rd_int(struct iso_sqlite_row *r, int min, int max);
bool iso_sqlite_rd_bool(struct iso_sqlite_row *r);
void iso_sqlite_rd_blob(struct iso_sqlite_row *r, uint8_t *buf, size_t exact);
enum iso_role iso_sqlite_rd_role(struct iso_sqlite_row *r);
enum iso_alloc_state iso_sqlite_rd_alloc_state(struct iso_sqlite_row *r);
enum iso_node_sched iso_sqlite_rd_node_sched(struct iso_sqlite_row *r);
#define RD_FIELD(r, field) iso_sqlite_rd_text((r), (field), sizeof(field))
int iso_sqlite_row_check(const struct iso_sqlite_row *r, const char *table, const char *id,
                         struct iso_error *err);

/* Enum names as stored; NULL when the value is outside its enum. */
const char *iso_sqlite_role_text(enum iso_role r);
const char *iso_sqlite_alloc_state_text(enum iso_alloc_state s);
const char *iso_sqlite_node_sched_text(enum iso_node_sched s);

/* Grows *arr (elements of `elem` bytes) so that it holds at least n + 1. */
int iso_sqlite_grow(void **arr, int *cap, int n, size_t elem);

/* ---- sqlite_audit.c ---- */
int iso_sqlite_audit_append(struct iso_store *s, const struct iso_audit_record *rec,
                            struct iso_error *err);
int iso_sqlite_audit_count(struct iso_store *s, int64_t *n, struct iso_error *err);
int iso_sqlite_audit_scan(struct iso_store *s, int64_t after, int64_t tenant_id, int limit,
                          iso_audit_record_fn fn, void *arg, struct iso_error *err);
int iso_sqlite_audit_head_put(struct iso_store *s, const struct iso_audit_head *h,
                              struct iso_error *err);
int iso_sqlite_audit_head_latest(struct iso_store *s, struct iso_audit_head *out,
                                 struct iso_error *err);
int iso_sqlite_audit_head_scan(struct iso_store *s, iso_audit_head_fn fn, void *arg,
                               struct iso_error *err);

/* ---- sqlite_schema.c ---- */

/* Creates or upgrades the schema, one transaction per missing migration;
 * refuses a database newer than this binary. */
int iso_sqlite_migrate(sqlite3 *db, const char *path, struct iso_error *err);
int iso_sqlite_schema_version_known(void);

/* ---- sqlite.c: a savepoint around multi-statement writes, so a failure in
 * the middle leaves nothing behind even outside begin..commit ---- */
int iso_sqlite_savepoint(struct sqlite_store *s, struct iso_error *err);
int iso_sqlite_release(struct sqlite_store *s, struct iso_error *err);
void iso_sqlite_rollback_to(struct sqlite_store *s);

/* ---- the ops, by file ---- */
int iso_sqlite_meta_get(struct iso_store *s, const char *key, char *buf, size_t size,
                        struct iso_error *err);
int iso_sqlite_meta_set(struct iso_store *s, const char *key, const char *value,
                        struct iso_error *err);
int iso_sqlite_tenant_insert(struct iso_store *s, struct iso_tenant *t, struct iso_error *err);
int iso_sqlite_tenant_update(struct iso_store *s, const struct iso_tenant *t,
                             struct iso_error *err);
int iso_sqlite_tenant_delete(struct iso_store *s, int64_t id, struct iso_error *err);
int iso_sqlite_tenant_get_by_name(struct iso_store *s, const char *name, struct iso_tenant *out,
                                  struct iso_error *err);
int iso_sqlite_tenant_get_by_id(struct iso_store *s, int64_t id, struct iso_tenant *out,
                                struct iso_error *err);
int iso_sqlite_tenant_list(struct iso_store *s, const char *after, int limit,
                           struct iso_tenant **out, int *n, struct iso_error *err);
int iso_sqlite_token_insert(struct iso_store *s, const struct iso_token *t, struct iso_error *err);
int iso_sqlite_token_get(struct iso_store *s, const char *id, struct iso_token *out,
                         struct iso_error *err);
int iso_sqlite_token_list(struct iso_store *s, int64_t tenant_id, const char *after, int limit,
                          struct iso_token **out, int *n, struct iso_error *err);
int iso_sqlite_token_revoke(struct iso_store *s, const char *id, int64_t when_ms,
                            struct iso_error *err);
int iso_sqlite_token_revoke_tenant(struct iso_store *s, int64_t tenant_id, int64_t when_ms,
                                   struct iso_error *err);
int iso_sqlite_node_state_set(struct iso_store *s, const struct iso_node_state *ns,
                              struct iso_error *err);
int iso_sqlite_neutron_project_put(struct iso_store *s, const struct iso_neutron_project *p,
                                   struct iso_error *err);
int iso_sqlite_neutron_project_delete(struct iso_store *s, const char *project_id,
                                      struct iso_error *err);
int iso_sqlite_neutron_project_list(struct iso_store *s, struct iso_neutron_project **out, int *n,
                                    struct iso_error *err);
int iso_sqlite_neutron_object_put(struct iso_store *s, const struct iso_neutron_object *o,
                                  struct iso_error *err);
int iso_sqlite_neutron_object_delete(struct iso_store *s, const char *uuid,
                                     struct iso_error *err);
int iso_sqlite_neutron_object_list(struct iso_store *s, struct iso_neutron_object **out, int *n,
                                   struct iso_error *err);
int iso_sqlite_org_put(struct iso_store *s, const struct iso_org *o, struct iso_error *err);
int iso_sqlite_org_delete(struct iso_store *s, const char *name, struct iso_error *err);
int iso_sqlite_org_list(struct iso_store *s, struct iso_org **out, int *n, struct iso_error *err);
int iso_sqlite_project_put(struct iso_store *s, const struct iso_project *p, struct iso_error *err);
int iso_sqlite_project_delete(struct iso_store *s, int64_t tenant_id, const char *name,
                              struct iso_error *err);
int iso_sqlite_project_list(struct iso_store *s, struct iso_project **out, int *n,
                            struct iso_error *err);
int iso_sqlite_quota_put(struct iso_store *s, const struct iso_quota_row *q, struct iso_error *err);
int iso_sqlite_token_count_live(struct iso_store *s, int64_t tenant_id, int64_t now_ms, int *n,
                                struct iso_error *err);
int iso_sqlite_account_forget(struct iso_store *s, const char *tenant, struct iso_error *err);
int iso_sqlite_quota_delete(struct iso_store *s, const char *account, const char *kind,
                            struct iso_error *err);
int iso_sqlite_quota_list(struct iso_store *s, struct iso_quota_row **out, int *n,
                          struct iso_error *err);
int iso_sqlite_usage_append(struct iso_store *s, const struct iso_usage_row *u,
                            struct iso_error *err);
int iso_sqlite_usage_list(struct iso_store *s, int64_t since_ms, struct iso_usage_row **out, int *n,
                          struct iso_error *err);
int iso_sqlite_gpu_fault_put(struct iso_store *s, const struct iso_gpu_fault *f,
                             struct iso_error *err);
int iso_sqlite_gpu_fault_delete(struct iso_store *s, const char *node, int gpu,
                                struct iso_error *err);
int iso_sqlite_gpu_fault_list(struct iso_store *s, struct iso_gpu_fault **out, int *n,
                              struct iso_error *err);
int iso_sqlite_fabric_key_put(struct iso_store *s, const struct iso_fabric_key_row *k,
                              struct iso_error *err);
int iso_sqlite_fabric_key_delete(struct iso_store *s, int pkey, struct iso_error *err);
int iso_sqlite_fabric_key_list(struct iso_store *s, struct iso_fabric_key_row **out, int *n,
                               struct iso_error *err);
int iso_sqlite_fabric_port_put(struct iso_store *s, const struct iso_fabric_port_row *p,
                               struct iso_error *err);
int iso_sqlite_fabric_port_delete(struct iso_store *s, const char *node, int vf,
                                  struct iso_error *err);
int iso_sqlite_fabric_port_list(struct iso_store *s, struct iso_fabric_port_row **out, int *n,
                                struct iso_error *err);
int iso_sqlite_node_state_list(struct iso_store *s, struct iso_node_state **out, int *n,
                               struct iso_error *err);
int iso_sqlite_alloc_insert(struct iso_store *s, const struct iso_allocation *a,
                            struct iso_error *err);
int iso_sqlite_alloc_update(struct iso_store *s, const struct iso_allocation *a,
                            struct iso_error *err);
int iso_sqlite_alloc_get(struct iso_store *s, const char *id, struct iso_allocation *out,
                         struct iso_error *err);
int iso_sqlite_alloc_list(struct iso_store *s, const struct iso_alloc_filter *f,
                          struct iso_allocation **out, int *n, struct iso_error *err);
int iso_sqlite_alloc_count_live(struct iso_store *s, int64_t tenant_id, int *n,
                                struct iso_error *err);
int iso_sqlite_alloc_recent(struct iso_store *s, int limit, struct iso_allocation **out, int *n,
                            struct iso_error *err);
int iso_sqlite_alloc_get_by_key(struct iso_store *s, int64_t tenant_id, const char *key,
                                struct iso_allocation *out, struct iso_error *err);

#endif

/* pg_int.h: what the files of the PostgreSQL store share and nobody else sees:
 * the store struct with its one connection and its table of statements
 * prepared on the connection, the parameter builder, the strict row reader
 * and the helpers that turn libpq results into iso_error records.
 * Split by job like the SQLite store: pg.c (connect, transactions, statement
 * cache, ops table), pg_schema.c (migrations), pg_rows.c (parameters, rows,
 * errors), pg_access.c (meta, tenants, tokens, node state), pg_tenancy.c
 * (fabric, organisations, projects, quotas, usage, GPU faults), pg_alloc.c
 * (allocations), pg_audit.c (the audit log). */
#ifndef ISOSTACK_STORE_PG_INT_H
#define ISOSTACK_STORE_PG_INT_H

#include <libpq-fe.h>

#include "isostack/store.h"

/* Statements prepared on the connection, keyed by their SQL text's address
 * (string literals at the call sites): the first use prepares "iso_<slot>". */
#define PG_STMT_MAX 128

struct pg_store {
	struct iso_store base;
	PGconn *conn;
	bool in_tx;     /* between a successful begin and commit/rollback */
	bool group;     /* group commit on: sessions run synchronous_commit=off */
	bool unsynced;  /* group: something may have committed since the last sync */
	bool sync_lost; /* group: the session ended with unsynced commits (pg.c) */
	/* The server's system identifier and WAL timeline at the first session;
	 * a reconnect that finds others (a promoted standby) sets `diverged`. */
	char origin[64];
	bool diverged;
	int n_prepared; /* slots of prepared[] in use */
	const char *prepared[PG_STMT_MAX];
	/* the leader lease (pg_lease.c) when several isostackd share the
	 * database: every write transaction is fenced by its term (pg_fence) */
	struct iso_lease *lease;
	int64_t idle_tx_timeout_ms; /* idle_in_transaction_session_timeout; 0: none */
};

/* The leader lease (pg_lease.c): its own connection, the holder id of this
 * process, the term while it leads, what a follower last read. */
struct iso_lease {
	PGconn *conn;
	struct pg_store *store;
	char holder[25]; /* 12 random bytes in hex, new at every start */
	char url[256];   /* this daemon's advertised URL */
	char session_sql[160];
	int64_t lease_ms, renew_ms;
	enum iso_lease_role role;
	int64_t term;         /* the term held while leader */
	uint64_t renewed_ns;  /* last successful renew (monotonic) */
	uint64_t next_ns;     /* next attempt (monotonic) */
	bool fence_lost;      /* a write transaction found the term moved */
	char leader_url[256]; /* who leads ("" when nobody, as far as we know) */
	int64_t leader_term;
};

/* pg.c: sets the server's idle_in_transaction_session_timeout on the store's
 * session (now and at every reconnect). */
int iso_pg_set_idle_timeout(struct pg_store *s, int64_t ms, struct iso_error *err);

static inline struct pg_store *pg_store_of(struct iso_store *s)
{
	return (struct pg_store *)s;
}

static inline void iso_pg_clearp(PGresult **res)
{
	PQclear(*res);
}
#define _cleanup_pgres_ _cleanup_(iso_pg_clearp)

/* ---- pg_rows.c: parameters ---- */

/* Parameters in text form, except bytea (binary). Values are copied into the
 * builder (numbers) or borrowed (strings, blobs) until the query ran. A
 * failed add (too many, or a string longer than its field) sets `bad`, and
 * iso_pg_query then fails the op. */
#define PG_PARAM_MAX 32
struct pg_params {
	int n;
	bool bad;
	const char *val[PG_PARAM_MAX];
	int len[PG_PARAM_MAX];
	int fmt[PG_PARAM_MAX];
	char num[PG_PARAM_MAX][32];
};
void iso_pg_p_text(struct pg_params *p, const char *s, size_t max);
void iso_pg_p_i64(struct pg_params *p, int64_t v);
void iso_pg_p_i64_or_null(struct pg_params *p, int64_t v); /* 0 -> NULL */
void iso_pg_p_double(struct pg_params *p, double v);
void iso_pg_p_null(struct pg_params *p);
void iso_pg_p_bytea(struct pg_params *p, const void *data, size_t len);
#define P_FIELD(p, field) iso_pg_p_text((p), (field), sizeof(field))
#define P_STR(p, s)       iso_pg_p_text((p), (s), (size_t)-1)

/* ---- pg.c: running statements ---- */

/* Runs `sql` (prepared once per connection) with `p` (NULL: none). On
 * success *res holds the result (PGRES_TUPLES_OK or PGRES_COMMAND_OK); on
 * failure the error is mapped: unique violation (23505) ISO_E_CONFLICT
 * "<what> \"<key>\" already exists" when `what` is set, else ISO_E_INTERNAL
 * "store: <op>: <server message>". A dropped connection outside a
 * transaction is reset once and the statement retried. */
int iso_pg_query(struct pg_store *s, const char *sql, struct pg_params *p, const char *op,
                 const char *what, const char *key, PGresult **res, struct iso_error *err);
/* The same for a statement whose result is not needed. */
int iso_pg_exec(struct pg_store *s, const char *sql, struct pg_params *p, const char *op,
                struct iso_error *err);
/* Rows a command changed (PQcmdTuples). */
int64_t iso_pg_changes(const PGresult *res);

/* A savepoint inside the caller's transaction, or a transaction of its own
 * outside one, around writes that must land together; a failure after
 * iso_pg_atomic_begin must call iso_pg_atomic_abort. */
int iso_pg_atomic_begin(struct pg_store *s, const char *op, struct iso_error *err);
int iso_pg_atomic_end(struct pg_store *s, const char *op, struct iso_error *err);
void iso_pg_atomic_abort(struct pg_store *s);

/* ---- pg_rows.c: rows ---- */

/* ISO_E_INTERNAL "store: <op>: <message>" from the connection. */
int iso_pg_fail(struct pg_store *s, const char *op, struct iso_error *err);

/* Reads the columns of one result row left to right, as the SQLite reader
 * does: the first value that does not fit (NULL where not allowed, not a
 * number, too long, out of range, an unknown enum name) is remembered and
 * iso_pg_row_check reports the row as corrupt, naming table, id and column. */
struct pg_row {
	const PGresult *res;
	int row;
	int col;
	int bad; /* first bad column, or -1 */
};
void iso_pg_row_init(struct pg_row *r, const PGresult *res, int row);
void iso_pg_rd_text(struct pg_row *r, char *buf, size_t size);
int64_t iso_pg_rd_i64(struct pg_row *r);
int64_t iso_pg_rd_i64_or_null(struct pg_row *r); /* NULL -> 0 */
void iso_pg_rd_text_or_null(struct pg_row *r, char *buf, size_t size); /* NULL -> "" */
int64_t iso_pg_rd_limit(struct pg_row *r);       /* NULL -> INT64_MAX */
double iso_pg_rd_double(struct pg_row *r);
int iso_pg_rd_int(struct pg_row *r, int min, int max);
bool iso_pg_rd_bool(struct pg_row *r);
void iso_pg_rd_blob(struct pg_row *r, uint8_t *buf, size_t exact);
enum iso_role iso_pg_rd_role(struct pg_row *r);
enum iso_alloc_state iso_pg_rd_alloc_state(struct pg_row *r);
enum iso_node_sched iso_pg_rd_node_sched(struct pg_row *r);
#define PRD_FIELD(r, field) iso_pg_rd_text((r), (field), sizeof(field))
int iso_pg_row_check(const struct pg_row *r, const char *table, const char *id,
                     struct iso_error *err);
/* A bytea column in text (hex) form, decoded; NULL when it is not one. The
 * caller frees it with PQfreemem. */
unsigned char *iso_pg_bytea(const PGresult *res, int row, int col, size_t *len);

/* Runs `sql` and reads every row into a new array of `elem`-byte items
 * (zeroed, then filled by read_row); `table` names them in a corrupt-row
 * error. *out is NULL when there are none. */
typedef void (*iso_pg_read_fn)(struct pg_row *row, void *item);
int iso_pg_list(struct pg_store *s, const char *sql, struct pg_params *p, size_t elem,
                iso_pg_read_fn read_row, const char *table, void **out, int *n,
                struct iso_error *err);

/* Runs a count(*) query into *n (0..INT32_MAX). */
int iso_pg_count(struct pg_store *s, const char *sql, struct pg_params *p, const char *op, int *n,
                 struct iso_error *err);

/* ---- pg_schema.c ---- */
int iso_pg_migrate(struct pg_store *s, struct iso_error *err);
int iso_pg_schema_version_known(void);

/* ---- the ops, by file ---- */
int iso_pg_meta_get(struct iso_store *s, const char *key, char *buf, size_t size,
                    struct iso_error *err);
int iso_pg_meta_set(struct iso_store *s, const char *key, const char *value, struct iso_error *err);
int iso_pg_tenant_insert(struct iso_store *s, struct iso_tenant *t, struct iso_error *err);
int iso_pg_tenant_update(struct iso_store *s, const struct iso_tenant *t, struct iso_error *err);
int iso_pg_tenant_delete(struct iso_store *s, int64_t id, struct iso_error *err);
int iso_pg_tenant_get_by_name(struct iso_store *s, const char *name, struct iso_tenant *out,
                              struct iso_error *err);
int iso_pg_tenant_get_by_id(struct iso_store *s, int64_t id, struct iso_tenant *out,
                            struct iso_error *err);
int iso_pg_tenant_list(struct iso_store *s, const char *after, int limit, struct iso_tenant **out,
                       int *n, struct iso_error *err);
int iso_pg_token_insert(struct iso_store *s, const struct iso_token *t, struct iso_error *err);
int iso_pg_token_get(struct iso_store *s, const char *id, struct iso_token *out,
                     struct iso_error *err);
int iso_pg_token_list(struct iso_store *s, int64_t tenant_id, const char *after, int limit,
                      struct iso_token **out, int *n, struct iso_error *err);
int iso_pg_token_revoke(struct iso_store *s, const char *id, int64_t when_ms,
                        struct iso_error *err);
int iso_pg_token_revoke_tenant(struct iso_store *s, int64_t tenant_id, int64_t when_ms,
                               struct iso_error *err);
int iso_pg_token_count_live(struct iso_store *s, int64_t tenant_id, int64_t now_ms, int *n,
                            struct iso_error *err);
int iso_pg_node_state_set(struct iso_store *s, const struct iso_node_state *ns,
                          struct iso_error *err);
int iso_pg_node_state_list(struct iso_store *s, struct iso_node_state **out, int *n,
                           struct iso_error *err);
int iso_pg_fabric_key_put(struct iso_store *s, const struct iso_fabric_key_row *k,
                          struct iso_error *err);
int iso_pg_fabric_key_delete(struct iso_store *s, int pkey, struct iso_error *err);
int iso_pg_fabric_key_list(struct iso_store *s, struct iso_fabric_key_row **out, int *n,
                           struct iso_error *err);
int iso_pg_fabric_port_put(struct iso_store *s, const struct iso_fabric_port_row *p,
                           struct iso_error *err);
int iso_pg_fabric_port_delete(struct iso_store *s, const char *node, int vf, struct iso_error *err);
int iso_pg_fabric_port_list(struct iso_store *s, struct iso_fabric_port_row **out, int *n,
                            struct iso_error *err);
int iso_pg_neutron_project_put(struct iso_store *s, const struct iso_neutron_project *p,
                               struct iso_error *err);
int iso_pg_neutron_project_delete(struct iso_store *s, const char *project_id,
                                  struct iso_error *err);
int iso_pg_neutron_project_list(struct iso_store *s, struct iso_neutron_project **out, int *n,
                                struct iso_error *err);
int iso_pg_neutron_object_put(struct iso_store *s, const struct iso_neutron_object *o,
                              struct iso_error *err);
int iso_pg_neutron_object_delete(struct iso_store *s, const char *uuid, struct iso_error *err);
int iso_pg_neutron_object_list(struct iso_store *s, struct iso_neutron_object **out, int *n,
                               struct iso_error *err);
int iso_pg_org_put(struct iso_store *s, const struct iso_org *o, struct iso_error *err);
int iso_pg_org_delete(struct iso_store *s, const char *name, struct iso_error *err);
int iso_pg_org_list(struct iso_store *s, struct iso_org **out, int *n, struct iso_error *err);
int iso_pg_project_put(struct iso_store *s, const struct iso_project *p, struct iso_error *err);
int iso_pg_project_delete(struct iso_store *s, int64_t tenant_id, const char *name,
                          struct iso_error *err);
int iso_pg_project_list(struct iso_store *s, struct iso_project **out, int *n,
                        struct iso_error *err);
int iso_pg_quota_put(struct iso_store *s, const struct iso_quota_row *q, struct iso_error *err);
int iso_pg_account_forget(struct iso_store *s, const char *tenant, struct iso_error *err);
int iso_pg_quota_delete(struct iso_store *s, const char *account, const char *kind,
                        struct iso_error *err);
int iso_pg_quota_list(struct iso_store *s, struct iso_quota_row **out, int *n,
                      struct iso_error *err);
int iso_pg_usage_append(struct iso_store *s, const struct iso_usage_row *u, struct iso_error *err);
int iso_pg_usage_list(struct iso_store *s, int64_t since_ms, struct iso_usage_row **out, int *n,
                      struct iso_error *err);
int iso_pg_gpu_fault_put(struct iso_store *s, const struct iso_gpu_fault *f, struct iso_error *err);
int iso_pg_gpu_fault_delete(struct iso_store *s, const char *node, int gpu, struct iso_error *err);
int iso_pg_gpu_fault_list(struct iso_store *s, struct iso_gpu_fault **out, int *n,
                          struct iso_error *err);
int iso_pg_alloc_insert(struct iso_store *s, const struct iso_allocation *a, struct iso_error *err);
int iso_pg_alloc_update(struct iso_store *s, const struct iso_allocation *a, struct iso_error *err);
int iso_pg_alloc_get(struct iso_store *s, const char *id, struct iso_allocation *out,
                     struct iso_error *err);
int iso_pg_alloc_list(struct iso_store *s, const struct iso_alloc_filter *f,
                      struct iso_allocation **out, int *n, struct iso_error *err);
int iso_pg_alloc_count_live(struct iso_store *s, int64_t tenant_id, int *n, struct iso_error *err);
int iso_pg_alloc_recent(struct iso_store *s, int limit, struct iso_allocation **out, int *n,
                        struct iso_error *err);
int iso_pg_alloc_get_by_key(struct iso_store *s, int64_t tenant_id, const char *key,
                            struct iso_allocation *out, struct iso_error *err);
int iso_pg_audit_append(struct iso_store *s, const struct iso_audit_record *rec,
                        struct iso_error *err);
int iso_pg_audit_count(struct iso_store *s, int64_t *n, struct iso_error *err);
int iso_pg_audit_scan(struct iso_store *s, int64_t after, int64_t tenant_id, int limit,
                      iso_audit_record_fn fn, void *arg, struct iso_error *err);
int iso_pg_audit_head_put(struct iso_store *s, const struct iso_audit_head *h,
                          struct iso_error *err);
int iso_pg_audit_head_latest(struct iso_store *s, struct iso_audit_head *out,
                             struct iso_error *err);
int iso_pg_audit_head_scan(struct iso_store *s, iso_audit_head_fn fn, void *arg,
                           struct iso_error *err);

#endif

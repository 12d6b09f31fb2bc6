/* store.h: durable desired state behind a small vtable. SQLite (WAL, full
 * sync) is the embedded default; a PostgreSQL backend implements the same ops
 * so that no caller changes. Every API mutation is one begin..commit. Reads
 * may run outside a transaction. Functions return 0 or a negative errno and
 * fill err: -ENOENT (ISO_E_NOT_FOUND) when a row is missing, -EEXIST
 * (ISO_E_CONFLICT) on a unique-key clash, -EIO (ISO_E_INTERNAL) otherwise. */
#ifndef ISOSTACK_STORE_H
#define ISOSTACK_STORE_H

#include "isostack/audit.h"
#include "isostack/model.h"

struct iso_store;

/* One stored audit event: its canonical bytes and leaf hash (audit.h). */
struct iso_audit_record {
	int64_t seq;
	int64_t tenant_id; /* owning tenant of the event's object, 0 when none */
	const char *body;  /* canonical encoding; borrowed for the callback's duration */
	size_t len;
	uint8_t leaf[ISO_AUDIT_HASH_LEN];
};
/* Scan callbacks return 0 to go on, > 0 to stop early, < 0 to fail the scan. */
typedef int (*iso_audit_record_fn)(void *arg, const struct iso_audit_record *rec);
typedef int (*iso_audit_head_fn)(void *arg, const struct iso_audit_head *head);

/* Runtime state of a node that outlives restarts (hardware is in the inventory). */
struct iso_node_state {
	char name[ISO_NAME_MAX];
	enum iso_node_sched sched;
};

/* The fabric's durable state (docs/fabric.md). A P_Key row is a tenant's key
 * (tenant_id > 0) or a key in quarantine since released_ms (tenant_id 0). A
 * port row gives (node, vf) to a tenant; vf -1 is the PF of a node without
 * VFs. */
/* alloc_id: "" for a tenant's own key or port; an allocation's id for the
 * key and the VFs of an allocation of a per-allocation tenant
 * (docs/fabric.md, "Per-allocation partitions"). A key in quarantine has
 * tenant_id 0, or (after an allocation's release) keeps the tenant and the
 * allocation it came from with released_ms > 0. */
struct iso_fabric_key_row {
	int pkey;
	int64_t tenant_id;
	int64_t released_ms;
	char alloc_id[ISO_ID_MAX];
};
struct iso_fabric_port_row {
	char node[ISO_NAME_MAX];
	int vf;
	int64_t tenant_id;
	char alloc_id[ISO_ID_MAX];
};

/* Tenancy (docs/tenancy.md). An account is "org:NAME", "tenant:NAME" or
 * "project:TENANT/NAME"; a quota kind is a label ("h100-80gb", "gpus",
 * "cpus", "memory_mib", "nodes"). Limits of INT64_MAX are stored as NULL:
 * unlimited. */
struct iso_org {
	char name[ISO_NAME_MAX];
	double shares;
	int64_t created_ms;
};
struct iso_project {
	int64_t tenant_id;
	char name[ISO_NAME_MAX];
	double shares;
};
#define ISO_ACCOUNT_MAX 160
struct iso_quota_row {
	char account[ISO_ACCOUNT_MAX];
	char kind[ISO_NAME_MAX];
	int64_t guaranteed, borrow_limit, lend_limit;
};
/* Work that ended: its account and usage vector (JSON text {kind: amount})
 * over [start_ms, end_ms), so that fair share can be rebuilt at start. */
struct iso_usage_row {
	char account[ISO_ACCOUNT_MAX];
	char usage[512];
	int64_t start_ms, end_ms;
};
struct iso_gpu_fault {
	char node[ISO_NAME_MAX];
	int gpu;
	int xid;
	int64_t at_ms;
};

/* OpenStack Neutron (docs/openstack.md): a Neutron project mapped to the
 * isostack tenant that owns its networks, and the networks and ports the
 * mlnx_sdn_assist driver sent, by Neutron UUID. A network holds P_Key `pkey`
 * (its fabric_keys row has alloc_id "n:<uuid>"); a port is the membership of
 * GUID `guid` on node `host` in network `network`'s partition. */
#define ISO_NEUTRON_ID_MAX 65 /* a Neutron/Keystone id: up to 64 characters */
struct iso_neutron_project {
	char project_id[ISO_NEUTRON_ID_MAX];
	int64_t tenant_id;
	int64_t created_ms;
};
enum iso_neutron_kind { ISO_NEUTRON_NETWORK = 0, ISO_NEUTRON_PORT = 1 };
struct iso_neutron_object {
	char uuid[ISO_NEUTRON_ID_MAX];
	enum iso_neutron_kind kind;
	char domain[ISO_NAME_MAX];
	char project_id[ISO_NEUTRON_ID_MAX];
	int64_t tenant_id;
	int pkey;                         /* a network's */
	char network[ISO_NEUTRON_ID_MAX]; /* a port's network */
	char host[ISO_NAME_MAX];          /* a port's node */
	uint64_t guid;                    /* a port's */
	int64_t updated_ms;
};

struct iso_alloc_filter {
	int64_t tenant_id; /* 0: every tenant */
	const char *owner; /* NULL: any owner */
	bool live_only;    /* only non-terminal states */
	int state;         /* -1: any, else enum iso_alloc_state */
	const char *after; /* cursor: id of the last item of the previous page, or NULL */
	int limit;         /* <= 0: no limit */
	/* only the allocation(s) created with this Idempotency-Key (one per
	 * tenant at most), found by its index; NULL: any */
	const char *idem_key;
};

struct iso_store_ops {
	const char *name;
	void (*close)(struct iso_store *s);

	int (*begin)(struct iso_store *s, struct iso_error *err);
	/* -ENOTCONN: the answer to COMMIT was lost with the connection (a
	 * PostgreSQL failover), so whether it committed is unknown. */
	int (*commit)(struct iso_store *s, struct iso_error *err);
	void (*rollback)(struct iso_store *s);

	/* small key/value facts: schema notes, cluster identity */
	int (*meta_get)(struct iso_store *s, const char *key, char *buf, size_t size,
	                struct iso_error *err);
	int (*meta_set)(struct iso_store *s, const char *key, const char *value,
	                struct iso_error *err);

	/* tenants: ordered by name; `after` is a name */
	int (*tenant_insert)(struct iso_store *s, struct iso_tenant *t, struct iso_error *err);
	int (*tenant_update)(struct iso_store *s, const struct iso_tenant *t,
	                     struct iso_error *err);
	int (*tenant_delete)(struct iso_store *s, int64_t id, struct iso_error *err);
	int (*tenant_get_by_name)(struct iso_store *s, const char *name, struct iso_tenant *out,
	                          struct iso_error *err);
	int (*tenant_get_by_id)(struct iso_store *s, int64_t id, struct iso_tenant *out,
	                        struct iso_error *err);
	int (*tenant_list)(struct iso_store *s, const char *after, int limit,
	                   struct iso_tenant **out, int *n, struct iso_error *err);

	/* tokens: ordered by id; tenant_id < 0 lists every token */
	int (*token_insert)(struct iso_store *s, const struct iso_token *t, struct iso_error *err);
	int (*token_get)(struct iso_store *s, const char *id, struct iso_token *out,
	                 struct iso_error *err);
	int (*token_list)(struct iso_store *s, int64_t tenant_id, const char *after, int limit,
	                  struct iso_token **out, int *n, struct iso_error *err);
	int (*token_revoke)(struct iso_store *s, const char *id, int64_t when_ms,
	                    struct iso_error *err);
	int (*token_revoke_tenant)(struct iso_store *s, int64_t tenant_id, int64_t when_ms,
	                           struct iso_error *err);

	/* node runtime state */
	int (*node_state_set)(struct iso_store *s, const struct iso_node_state *ns,
	                      struct iso_error *err);
	int (*node_state_list)(struct iso_store *s, struct iso_node_state **out, int *n,
	                       struct iso_error *err);

	/* fabric: P_Keys and port assignments (upsert, delete, list all) */
	int (*fabric_key_put)(struct iso_store *s, const struct iso_fabric_key_row *k,
	                      struct iso_error *err);
	int (*fabric_key_delete)(struct iso_store *s, int pkey, struct iso_error *err);
	int (*fabric_key_list)(struct iso_store *s, struct iso_fabric_key_row **out, int *n,
	                       struct iso_error *err);
	int (*fabric_port_put)(struct iso_store *s, const struct iso_fabric_port_row *p,
	                       struct iso_error *err);
	int (*fabric_port_delete)(struct iso_store *s, const char *node, int vf,
	                          struct iso_error *err);
	int (*fabric_port_list)(struct iso_store *s, struct iso_fabric_port_row **out, int *n,
	                        struct iso_error *err);

	/* Neutron: project mappings and networks/ports (upsert, delete, list
	 * all in key order; a missing row's delete is not an error) */
	int (*neutron_project_put)(struct iso_store *s, const struct iso_neutron_project *p,
	                           struct iso_error *err);
	int (*neutron_project_delete)(struct iso_store *s, const char *project_id,
	                              struct iso_error *err);
	int (*neutron_project_list)(struct iso_store *s, struct iso_neutron_project **out, int *n,
	                            struct iso_error *err);
	int (*neutron_object_put)(struct iso_store *s, const struct iso_neutron_object *o,
	                          struct iso_error *err);
	int (*neutron_object_delete)(struct iso_store *s, const char *uuid, struct iso_error *err);
	int (*neutron_object_list)(struct iso_store *s, struct iso_neutron_object **out, int *n,
	                           struct iso_error *err);

	/* tenancy: organisations, projects, quotas (upsert, delete, list all),
	 * the usage log (append, list in order), GPU faults */
	int (*org_put)(struct iso_store *s, const struct iso_org *o, struct iso_error *err);
	int (*org_delete)(struct iso_store *s, const char *name, struct iso_error *err);
	int (*org_list)(struct iso_store *s, struct iso_org **out, int *n, struct iso_error *err);
	int (*project_put)(struct iso_store *s, const struct iso_project *p, struct iso_error *err);
	int (*project_delete)(struct iso_store *s, int64_t tenant_id, const char *name,
	                      struct iso_error *err);
	int (*project_list)(struct iso_store *s, struct iso_project **out, int *n,
	                    struct iso_error *err);
	int (*quota_put)(struct iso_store *s, const struct iso_quota_row *q, struct iso_error *err);
	/* Tokens of a tenant neither revoked nor expired at now_ms. */
	int (*token_count_live)(struct iso_store *s, int64_t tenant_id, int64_t now_ms, int *n,
	                        struct iso_error *err);
	/* Deletes the quotas and usage log of a tenant and its projects. */
	int (*account_forget)(struct iso_store *s, const char *tenant, struct iso_error *err);
	int (*quota_delete)(struct iso_store *s, const char *account, const char *kind,
	                    struct iso_error *err);
	int (*quota_list)(struct iso_store *s, struct iso_quota_row **out, int *n,
	                  struct iso_error *err);
	int (*usage_append)(struct iso_store *s, const struct iso_usage_row *u,
	                    struct iso_error *err);
	int (*usage_list)(struct iso_store *s, int64_t since_ms, struct iso_usage_row **out, int *n,
	                  struct iso_error *err);
	int (*gpu_fault_put)(struct iso_store *s, const struct iso_gpu_fault *f,
	                     struct iso_error *err);
	int (*gpu_fault_delete)(struct iso_store *s, const char *node, int gpu,
	                        struct iso_error *err);
	int (*gpu_fault_list)(struct iso_store *s, struct iso_gpu_fault **out, int *n,
	                      struct iso_error *err);

	/* allocations with their members and slots; ordered by (created_ms, id) */
	int (*alloc_insert)(struct iso_store *s, const struct iso_allocation *a,
	                    struct iso_error *err);
	/* Replaces every column and the members/slots of an existing row. */
	int (*alloc_update)(struct iso_store *s, const struct iso_allocation *a,
	                    struct iso_error *err);
	int (*alloc_get)(struct iso_store *s, const char *id, struct iso_allocation *out,
	                 struct iso_error *err);
	int (*alloc_list)(struct iso_store *s, const struct iso_alloc_filter *f,
	                  struct iso_allocation **out, int *n, struct iso_error *err);
	int (*alloc_count_live)(struct iso_store *s, int64_t tenant_id, int *n,
	                        struct iso_error *err);
	/* The `limit` newest allocations in any state, newest first: the demand
	 * a restarted placement engine learns from. Only the rows: placed[] and
	 * slots[] are not read (NULL). */
	int (*alloc_recent)(struct iso_store *s, int limit, struct iso_allocation **out, int *n,
	                    struct iso_error *err);
	/* The allocation of tenant `tenant_id` created with Idempotency-Key
	 * `key` (a->idem_key, written by alloc_insert and never changed), by
	 * the unique index on (key, tenant); -ENOENT when none. */
	int (*alloc_get_by_key)(struct iso_store *s, int64_t tenant_id, const char *key,
	                        struct iso_allocation *out, struct iso_error *err);

	/* audit log: events by seq (append-only), signed heads by size */
	int (*audit_append)(struct iso_store *s, const struct iso_audit_record *rec,
	                    struct iso_error *err);
	/* One past the highest seq stored (0 when empty). */
	int (*audit_count)(struct iso_store *s, int64_t *n, struct iso_error *err);
	/* Events with seq > after in seq order, of one tenant when tenant_id > 0,
	 * at most limit (<= 0: all). */
	int (*audit_scan)(struct iso_store *s, int64_t after, int64_t tenant_id, int limit,
	                  iso_audit_record_fn fn, void *arg, struct iso_error *err);
	int (*audit_head_put)(struct iso_store *s, const struct iso_audit_head *h,
	                      struct iso_error *err);
	/* -ENOENT when no head was signed yet. */
	int (*audit_head_latest)(struct iso_store *s, struct iso_audit_head *out,
	                         struct iso_error *err);
	/* Heads in the order they were signed. */
	int (*audit_head_scan)(struct iso_store *s, iso_audit_head_fn fn, void *arg,
	                       struct iso_error *err);

	/* Group commit (docs/store.md, "Group commit"); NULL in a backend whose
	 * every commit is durable on its own. With `on`, a commit is atomic and
	 * seen by every later read but may be lost with the machine (not with
	 * the process) until sync, which makes every commit so far durable with
	 * one flush. Outside a transaction. */
	int (*set_group_commit)(struct iso_store *s, bool on, struct iso_error *err);
	int (*sync)(struct iso_store *s, struct iso_error *err);
};

struct iso_store {
	const struct iso_store_ops *ops;
};

/* Opens (creating when missing) and migrates to the current schema. */
int iso_store_open_sqlite(const char *path, struct iso_store **out, struct iso_error *err);
/* Connects with a libpq conninfo (URI or keywords), checks that commits are
 * synchronous, and creates or migrates the schema (docs/store.md). */
int iso_store_open_postgres(const char *conninfo, struct iso_store **out, struct iso_error *err);
/* The caller is about to rebuild its state from the store (an elected
 * follower's controller opens): the server's timeline is taken again, so
 * that only a failover after this point stops the daemon (docs/store.md,
 * "PostgreSQL failover"). Does nothing for another store. */
int iso_store_postgres_rebase(struct iso_store *s, struct iso_error *err);
/* isostackd's --store: NULL or "sqlite" opens STATE_DIR/state.db; a
 * "postgres://" or "postgresql://" URI, or a keyword conninfo, PostgreSQL.
 * Errors name --store and never echo the conninfo (it may hold a password). */
int iso_store_open(const char *spec, const char *state_dir, struct iso_store **out,
                   struct iso_error *err);
bool iso_store_spec_is_postgres(const char *spec);

/* `isoctl store migrate` (src/store/migrate.c, docs/store.md): copies every
 * table of the SQLite store at `sqlite_path` into the empty PostgreSQL
 * database `conninfo` in one transaction (refused, ISO_E_CONFLICT, when the
 * target holds a row), compares row counts per table, then reads the audit
 * log back from PostgreSQL and verifies it against the newest signed head,
 * which must be the source's (its signature too when `pubkey` is given).
 * Errors name the flag: "from" or "to". The caller keeps the daemon away
 * (its state dir's lock). */
#define ISO_STORE_MIGRATE_TABLES 18
struct iso_store_migrate_report {
	int n_tables;
	const char *table[ISO_STORE_MIGRATE_TABLES];
	int64_t rows[ISO_STORE_MIGRATE_TABLES];
	int64_t audit_events;
	bool head; /* a signed head was there and verified */
	bool head_signature_checked;
	uint64_t head_size;
	uint8_t head_root[ISO_AUDIT_HASH_LEN];
};
int iso_store_migrate_to_postgres(const char *sqlite_path, const char *conninfo,
                                  const uint8_t *pubkey, struct iso_store_migrate_report *rep,
                                  struct iso_error *err);

static inline void iso_store_close(struct iso_store *s)
{
	if (s)
		s->ops->close(s);
}
static inline void iso_store_closep(struct iso_store **s)
{
	iso_store_close(*s);
}

/* One leader among several isostackd on one PostgreSQL (src/store/pg_lease.c,
 * docs/store.md "High availability"): a lease row renewed on the database
 * clock by its own connection, with a term bumped at every takeover. While
 * this process leads, every write transaction of `store` checks the term in
 * the same transaction and fails (ISO_E_UNAVAILABLE) when it moved; the
 * lease is then deposed. */
struct iso_lease;
enum iso_lease_role { ISO_LEASE_FOLLOWER, ISO_LEASE_LEADER, ISO_LEASE_DEPOSED };
struct iso_lease_config {
	const char *url;  /* this daemon's advertised URL, shown to clients by followers */
	int64_t lease_ms; /* default 5000 */
	int64_t renew_ms; /* default 1000; 0 < renew <= lease / 2 */
};
/* `store` must be the PostgreSQL store opened with `conninfo`; the lease is
 * tied to it until iso_lease_close. Starts as a follower. */
int iso_lease_open(struct iso_store *store, const char *conninfo,
                   const struct iso_lease_config *cfg, struct iso_lease **out,
                   struct iso_error *err);
void iso_lease_close(struct iso_lease *l);
/* Called every tick of the loop: renews (leader) or reads and, when nobody
 * leads, tries to acquire (follower) once per renew interval. Returns the
 * role; DEPOSED is final for this process. */
int iso_lease_tick(struct iso_lease *l);
void iso_lease_depose(struct iso_lease *l, const char *why);
/* Ends the lease now, keeping its term (graceful handoff; the next taker
 * bumps the term). */
void iso_lease_release(struct iso_lease *l);
enum iso_lease_role iso_lease_role(const struct iso_lease *l);
/* True while this process leads and its lease is live by its own monotonic
 * clock: less than lease_ms since the start of the last successful renew
 * (taken before the statement was sent, so it ends no later than the row's
 * expires_at). A leader frozen past its lease (SIGSTOP, a stall) finds it
 * false the moment it runs again, before its next renew tells it so: what
 * it would send then is a stale leader's (docs/store.md, "Pause"). */
bool iso_lease_holds(const struct iso_lease *l);
int64_t iso_lease_term(const struct iso_lease *l);           /* ours, or the leader's last read */
const char *iso_lease_leader_url(const struct iso_lease *l); /* "" when unknown */

/* Frees arrays returned by the list functions. */
void iso_allocations_free(struct iso_allocation *a, int n);

/* Fault injection for tests (src/store/faultsim.c): a store over `inner`
 * (borrowed; closing the wrapper leaves it open) that counts the ops of the
 * armed kinds and fails the nth of them (1-based; 0: none, only counting)
 * with -error, and every later one too when `persistent`. Rollback and close
 * never fail. Arming resets the counts. */
enum {
	ISO_FAULTSIM_BEGIN = 1,
	ISO_FAULTSIM_COMMIT = 2,
	ISO_FAULTSIM_WRITE = 4,
	ISO_FAULTSIM_READ = 8,
	ISO_FAULTSIM_ALL = 15,
};
int iso_store_faultsim_open(struct iso_store *inner, struct iso_store **out, struct iso_error *err);
void iso_store_faultsim_arm(struct iso_store *s, unsigned kinds, int64_t nth, int error,
                            bool persistent);
int64_t iso_store_faultsim_ops(const struct iso_store *s);      /* counted since armed */
int64_t iso_store_faultsim_injected(const struct iso_store *s); /* failed since armed */
const char *iso_store_faultsim_last(const struct iso_store *s); /* the op failed last */

#endif

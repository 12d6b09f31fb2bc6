/* controller.h: the use cases of isostack. Each state change is one function
 * here, authorised against the caller's principal, applied in one store
 * transaction, and only then reflected in the in-memory cluster state. The
 * API layer parses and encodes; every decision about who may see or change
 * what is made here, so no other entry point can bypass it. */
#ifndef ISOSTACK_CONTROLLER_H
#define ISOSTACK_CONTROLLER_H

#include "isostack/audit.h"
#include "isostack/codec.h"
#include "isostack/inventory.h"
#include "isostack/model.h"
#include "isostack/sched.h"
#include "isostack/store.h"

#include <jansson.h>

struct iso_controller;

/* Who is calling, resolved from a bearer token, and from where: the request
 * id and source address travel with it so every log line (and later every
 * audit event) of a request can name them. */
struct iso_principal {
	char request_id[72];
	char source[64]; /* client address, "" when unknown */
	char token_id[ISO_TOKEN_ID_LEN + 1];
	enum iso_role role;
	int64_t tenant_id; /* 0 for cluster-wide roles */
	char tenant[ISO_NAME_MAX];
	char node[ISO_NAME_MAX]; /* node-agent: the node it acts for, else "" */
	char user[ISO_NAME_MAX];
	char owner[ISO_NAME_MAX + 8]; /* what allocations it creates record as owner */
};

/* What one tenant may have at once (docs/tenancy.md, "Limits"): a tenant's
 * own value wins, 0 takes the daemon's default. */
struct iso_tenant_limits {
	int max_pending;               /* pending allocations; default 1000 */
	int max_live;                  /* allocations holding resources; default 2000 */
	int writes_per_s, reads_per_s; /* in force (iso_controller_tenant_limits only) */
};
#define ISO_DEFAULT_MAX_PENDING 1000
#define ISO_MAX_PROJECTS        256  /* projects of one tenant */
#define ISO_MAX_TENANT_TOKENS   1000 /* live tokens of one tenant */
#define ISO_DEFAULT_MAX_LIVE    2000

/* How fast one tenant may ask (docs/tenancy.md, "Request rates"): token
 * buckets per tenant, a burst of two seconds' worth. 0 takes the default. */
struct iso_rate_limits {
	double writes_per_s; /* changes (POST, PUT, PATCH, DELETE); default 20 */
	double reads_per_s;  /* reads (GET); default 200 */
};
#define ISO_DEFAULT_WRITES_PER_S 20.0
#define ISO_DEFAULT_READS_PER_S  200.0

struct iso_controller_params {
	const struct iso_inventory *inv; /* borrowed; outlives the controller */
	struct iso_store *store;         /* borrowed; outlives the controller */
	const struct iso_placer *placer;
	const char *state_dir;   /* where the audit signing key lives */
	bool accept_audit_break; /* start over a log that fails its check, recording that */
	/* the published audit key set (docs/audit.md "Key ids and key sets"):
	 * heads are valid only when signed by one of its keys, and this daemon's
	 * own key must be one; NULL: STATE_DIR/audit-keys when it exists, else
	 * only the daemon's own key */
	const char *audit_keys;
	/* tenancy (docs/tenancy.md); zero values take the defaults */
	int64_t fair_share_half_life_ms;       /* decay of past usage; default 7 days */
	int64_t preempt_min_run_ms;            /* never preempt younger work; default 0 */
	int64_t preempt_grace_ms;              /* signal, then evict this much later; default 0 */
	const char *const *admission_policies; /* Lua files, run in order on every request */
	int n_admission_policies;
	struct iso_tenant_limits tenant_limits; /* defaults for tenants that set none */
	struct iso_rate_limits tenant_rates;    /* per tenant; cluster roles are not limited */
	/* node agents (docs/agents.md); zero values take the defaults */
	int agent_max_waiters; /* long polls waiting at once, all nodes; default 10,000 */
	int agent_lease_s;     /* silent longer: unreachable; default 10 */
	int agent_grace_s;     /* unreachable longer: evicted; default 300 */
	bool agents_required;  /* nodes whose agent never reported are held to the lease too */
	/* the provisioning gate: active only once every member's agent reports
	 * its instances ready, failed after the timeout; no_agents skips it */
	bool no_agents;
	int provisioning_timeout_s; /* default 300 */
	/* group commit (docs/store.md): commits are made durable in batches by
	 * iso_controller_sync; false, or a store without it: each commit alone */
	bool group_commit;
	/* the agents' fencing term: 0 takes one more than the stored one; with
	 * a leader lease (several isostackd on PostgreSQL) the lease's term */
	int64_t agent_term;
};

/* May `p` send one more request now (a change when `write`)? ISO_E_LIMIT
 * (429) naming limits.writes_per_s / limits.reads_per_s, with the seconds
 * until it may in *retry_after_s, when its tenant is past its rate. */
int iso_controller_rate_admit(struct iso_controller *c, const struct iso_principal *p, bool write,
                              int *retry_after_s, struct iso_error *err);

/* Opens the controller: checks the audit log against its last signed head
 * (refusing a broken one unless told to accept it), rebuilds the cluster
 * state from the store, reconciles allocations left mid-transition by a
 * crash, and records the start. */
int iso_controller_open(const struct iso_controller_params *params, struct iso_controller **out,
                        struct iso_error *err);
/* Records the stop and signs a final head; call before iso_controller_free. */
void iso_controller_shutdown(struct iso_controller *c);
/* The controller is single-threaded: only the daemon's one loop thread
 * touches it (src/api/loop.c). At the end of each of its turns the loop
 * settles it: the node agents' documents catch up with what changed
 * (committed or undone) and their waiting long polls are answered. */
void iso_controller_settle(struct iso_controller *c);
/* Periodic work (the loop calls it every 50 ms): fabric
 * confirmations promote provisioning allocations; incidents are raised. */
void iso_controller_tick(struct iso_controller *c);
/* Group commit (docs/store.md, "Group commit"): with it on, a committed
 * transaction is seen at once but durable only after the next sync, so no
 * answer may leave while iso_controller_unsynced is true. The loop syncs
 * once a turn: one flush for every commit of the turn. A failed sync leaves
 * durability unknown (the kernel may have dropped the pages): the caller
 * answers what waited with an error and stops. */
bool iso_controller_unsynced(const struct iso_controller *c);
int iso_controller_sync(struct iso_controller *c, struct iso_error *err);
/* Counters since the start, for GET /v1/version. */
void iso_controller_commit_stats(const struct iso_controller *c, bool *group_commit,
                                 uint64_t *commits, uint64_t *syncs);

/* The fabric (cluster-admin and auditor): the driver's progress, the
 * intent as JSON (iso_fabric_intent_to_json), and a live verification:
 * every reachable port's P_Key table read and judged against the intent. */
struct iso_fabric_report;
/* The tenant's P_Key (infiniband / omnipath), or -1 when it has none. */
int iso_controller_tenant_pkey(const struct iso_controller *c, int64_t tenant_id);
/* The P_Key an allocation's members are in: its own (a per-allocation
 * tenant's, docs/fabric.md), else its tenant's; -1 when none. */
int iso_controller_alloc_pkey(const struct iso_controller *c, const struct iso_allocation *a);
/* The tenant's VXLAN VNI on an ethernet fabric; 0 when none (issue 14). */
uint32_t iso_controller_tenant_vni(const struct iso_controller *c, int64_t tenant_id);
/* The tenant's RoCE VLAN on an ethernet fabric with fabric.vlan_range; 0
 * when none (docs/fabric.md "RoCE VFs"). */
uint16_t iso_controller_tenant_vlan(const struct iso_controller *c, int64_t tenant_id);
/* ---- OpenStack Neutron (docs/openstack.md): networking-mlnx's
 * mlnx_sdn_assist driver pointed at isostack ---- */
#define ISO_NEUTRON_JOB_MAX 24 /* "job-" + 16 hex */
/* A network's partition: provider:segmentation_id is its P_Key. */
struct iso_neutron_network_req {
	const char *domain, *uuid, *project_id;
	int pkey;
};
/* A port's membership: guid (from guid_field of the body) on node host in
 * network network_id's partition. */
struct iso_neutron_port_req {
	const char *domain, *uuid, *project_id, *network_id, *host;
	uint64_t guid;
	const char *guid_field;
};
/* Writes: one transaction each (store, audit event, staged intent); *job
 * gets the job id ("job-<16 hex>") that completes once the fabric confirmed
 * the generation that carried the change. The same content again changes
 * nothing and gets a job of the current generation. A delete of something
 * not held (or held by another tenant) is -ENOENT. */
int iso_controller_neutron_network_put(struct iso_controller *c, const struct iso_principal *p,
                                       const struct iso_neutron_network_req *req, char *job,
                                       struct iso_error *err);
int iso_controller_neutron_network_delete(struct iso_controller *c, const struct iso_principal *p,
                                          const char *domain, const char *uuid, char *job,
                                          struct iso_error *err);
int iso_controller_neutron_port_put(struct iso_controller *c, const struct iso_principal *p,
                                    const struct iso_neutron_port_req *req, char *job,
                                    struct iso_error *err);
int iso_controller_neutron_port_delete(struct iso_controller *c, const struct iso_principal *p,
                                       const char *domain, const char *uuid, char *job,
                                       struct iso_error *err);
/* "Completed" or "Running"; -ENOENT for a job not held (ids are random;
 * jobs live in memory, so a restart forgets them: docs/openstack.md). */
int iso_controller_neutron_job(struct iso_controller *c, const struct iso_principal *p,
                               const char *id, const char **status, struct iso_error *err);
/* The domain's objects of one kind in uuid order after `after`, at most limit. */
int iso_controller_neutron_list(struct iso_controller *c, const struct iso_principal *p,
                                const char *domain, enum iso_neutron_kind kind, const char *after,
                                int limit, struct iso_neutron_object **out, int *n,
                                struct iso_error *err);
/* Project -> tenant mappings (cluster-admin; auditor reads). */
int iso_controller_neutron_project_map(struct iso_controller *c, const struct iso_principal *p,
                                       const char *project_id, const char *tenant,
                                       struct iso_neutron_project *out, struct iso_error *err);
int iso_controller_neutron_project_unmap(struct iso_controller *c, const struct iso_principal *p,
                                         const char *project_id, struct iso_error *err);
int iso_controller_neutron_project_list(struct iso_controller *c, const struct iso_principal *p,
                                        const char *after, int limit,
                                        struct iso_neutron_project **out, int *n,
                                        struct iso_error *err);

int iso_controller_fabric_status(struct iso_controller *c, const struct iso_principal *p,
                                 json_t **out, struct iso_error *err);
int iso_controller_fabric_intent(struct iso_controller *c, const struct iso_principal *p,
                                 json_t **out, struct iso_error *err);
/* GET /v1/fabric/health: whether the driver's SM is reachable
 * (iso_codec_fabric_health_encode); cluster roles get the full answer, any
 * node agent the small one (the CNI plugin's STATUS), tenants 403. O(1). */
int iso_controller_fabric_health(struct iso_controller *c, const struct iso_principal *p,
                                 json_t **out, struct iso_error *err);
int iso_controller_fabric_verify(struct iso_controller *c, const struct iso_principal *p,
                                 struct iso_fabric_report *out, struct iso_error *err);
/* The same in three steps, so that reading the fabric holds no lock: begin
 * (under the controller lock: checks the caller, copies the intent), run
 * (without it: reads the fabric and judges it), end (under the lock: learns
 * the port capacities, records fabric.verify; *out is the caller's to clear).
 * The job is freed by iso_fabric_verify_job_free whatever happened. */
struct iso_fabric_verify_job;
int iso_controller_fabric_verify_begin(struct iso_controller *c, const struct iso_principal *p,
                                       struct iso_fabric_verify_job **out, struct iso_error *err);
void iso_fabric_verify_job_run(struct iso_fabric_verify_job *j);
int iso_controller_fabric_verify_end(struct iso_controller *c, const struct iso_principal *p,
                                     struct iso_fabric_verify_job *j, struct iso_fabric_report *out,
                                     struct iso_error *err);
void iso_fabric_verify_job_free(struct iso_fabric_verify_job *j);
void iso_controller_free(struct iso_controller *c);
static inline void iso_controller_freep(struct iso_controller **c)
{
	if (*c)
		iso_controller_free(*c);
}

const struct iso_inventory *iso_controller_inventory(const struct iso_controller *c);
const struct iso_cluster_state *iso_controller_state(const struct iso_controller *c);
const char *iso_controller_placer_name(const struct iso_controller *c);
const char *iso_controller_store_name(const struct iso_controller *c);

/* Writes DIR/admin.token (0600) with a new cluster-admin token when the store
 * has never issued one, or always when `force` (recovery of a lost file).
 * *created tells whether a token was written. The secret is never logged. */
int iso_controller_bootstrap_admin(struct iso_controller *c, const char *state_dir, bool force,
                                   bool *created, struct iso_error *err);

/* ---- authentication ---- */
int iso_controller_authenticate(struct iso_controller *c, const char *bearer,
                                struct iso_principal *out, struct iso_error *err);

/* ---- tenants ---- */
/* A tenant's tenancy policy as a request gives it (docs/tenancy.md); NULL /
 * 0 fields: unchanged on update, defaults on create. Cluster-admin only. */
struct iso_tenant_policy {
	const char *org;       /* its organisation; "" = none */
	double shares;         /* fair-share weight among its siblings, > 0 */
	const char *isolation; /* shared | exclusive-gpu | exclusive-node | exclusive-rack */
	const char *tags;      /* comma-separated [a-z0-9-] labels, "" = none */
	/* limits (docs/tenancy.md, "Limits"), by enum iso_tenant_limit; each
	 * only when set (0 for most: the daemon's default) */
	struct {
		bool set;
		int value;
	} limit[ISO_TENANT_LIMITS];
	bool io_uring_set; /* io_uring: given (set by cluster-admins only) */
	bool io_uring;
	bool partition_set; /* partition: given (cluster-admins only) */
	enum iso_partition_mode partition;
};
/* The limits in force for tenant `t` (its own, or the daemon's defaults). */
void iso_controller_tenant_limits(const struct iso_controller *c, const struct iso_tenant *t,
                                  struct iso_tenant_limits *out);
int iso_controller_tenant_create(struct iso_controller *c, const struct iso_principal *p,
                                 const char *name, const char *description,
                                 const struct iso_tenant_policy *pol, struct iso_tenant *out,
                                 struct iso_error *err);
int iso_controller_tenant_get(struct iso_controller *c, const struct iso_principal *p,
                              const char *name, struct iso_tenant *out, struct iso_error *err);
int iso_controller_tenant_list(struct iso_controller *c, const struct iso_principal *p,
                               const char *after, int limit, struct iso_tenant **out, int *n,
                               struct iso_error *err);
int iso_controller_tenant_update(struct iso_controller *c, const struct iso_principal *p,
                                 const char *name, const char *description,
                                 const struct iso_tenant_policy *pol, struct iso_tenant *out,
                                 struct iso_error *err);
int iso_controller_tenant_delete(struct iso_controller *c, const struct iso_principal *p,
                                 const char *name, struct iso_error *err);

/* ---- tokens ---- */
struct iso_token_request {
	enum iso_role role;
	const char *tenant;      /* NULL: none / the caller's own */
	const char *node;        /* node-agent only: the inventory node it acts for */
	const char *user;        /* NULL: "" */
	const char *description; /* NULL: "" */
	int64_t expires_in_s;    /* 0: never */
};
/* On success `secret` (>= ISO_TOKEN_MAX bytes) holds the bearer string, shown once. */
int iso_controller_token_issue(struct iso_controller *c, const struct iso_principal *p,
                               const struct iso_token_request *req, struct iso_token *out,
                               char *secret, size_t secret_size, struct iso_error *err);
int iso_controller_token_get(struct iso_controller *c, const struct iso_principal *p,
                             const char *id, struct iso_token *out, struct iso_error *err);
int iso_controller_token_list(struct iso_controller *c, const struct iso_principal *p,
                              const char *tenant, const char *after, int limit,
                              struct iso_token **out, int *n, struct iso_error *err);
int iso_controller_token_revoke(struct iso_controller *c, const struct iso_principal *p,
                                const char *id, struct iso_error *err);
/* Name of a tenant by id, for rendering tokens; "" when none. */
void iso_controller_tenant_name(struct iso_controller *c, int64_t tenant_id, char *buf,
                                size_t size);

/* ---- authorisation ---- */
/* The door every authenticated route passes before its handler: ISO_E_FORBIDDEN
 * when the role x action table (src/controller/authz.c) gives `p` no right to
 * `action` (a role or an action missing from the table included). Rights that
 * depend on the target are then checked by the use case. */
int iso_controller_authorize(const struct iso_principal *p, const char *action,
                             struct iso_error *err);

/* ---- nodes, GPUs, capacity ---- */
/* Infrastructure views (nodes, GPUs) are for cluster-wide roles only. */
int iso_controller_check_infra_read(const struct iso_principal *p, struct iso_error *err);
int iso_controller_node_set_sched(struct iso_controller *c, const struct iso_principal *p,
                                  const char *node, enum iso_node_sched sched,
                                  struct iso_error *err);
/* Live allocations, for the GPU view (cluster-wide roles only). */
int iso_controller_live_allocations(struct iso_controller *c, const struct iso_principal *p,
                                    struct iso_allocation **out, int *n, struct iso_error *err);

/* ---- faults and maintenance (docs/tenancy.md "Faults and maintenance") ----
 * cluster-admin; a GPU fault also by the node agent of that node (another
 * node is ISO_E_NOT_FOUND for it); unknown nodes, GPUs (by device index)
 * and pools are ISO_E_NOT_FOUND. */
/* Does this XID take the whole GPU out of service (79, 48, 95, 119, 120)? */
bool iso_xid_takes_gpu(int xid);
/* struct iso_fault_report (a GPU fault as a node agent reports it) and
 * ISO_XID_MAX are the codec's (include/isostack/codec.h). */
/* iso_controller_gpu_fault with what the agent knows of the fault. */
int iso_controller_gpu_fault_report(struct iso_controller *c, const struct iso_principal *p,
                                    const char *node, const struct iso_fault_report *f,
                                    json_t **out, struct iso_error *err);
/* Reports XID `xid` on GPU `gpu` of `node`. An XID that takes the GPU: the
 * fault is stored, every allocation with a slot there is evicted (requeued,
 * or failed when it asked to fail on preemption) and the GPU is quarantined
 * until iso_controller_gpu_restore. Other XIDs are audited only. A report
 * for a quarantined GPU changes nothing. *out: {"node","gpu","xid",
 * "quarantined","effect":"quarantined|already_quarantined|recorded",
 * "evicted":[ids]}. */
int iso_controller_gpu_fault(struct iso_controller *c, const struct iso_principal *p,
                             const char *node, int gpu, int xid, json_t **out,
                             struct iso_error *err);
/* Clears a stored fault and puts the GPU back in service (ISO_E_NOT_FOUND
 * when it has none). */
int iso_controller_gpu_restore(struct iso_controller *c, const struct iso_principal *p,
                               const char *node, int gpu, struct iso_error *err);
/* The stored faults (cluster-wide roles), ordered by node and GPU. */
int iso_controller_gpu_fault_list(struct iso_controller *c, const struct iso_principal *p,
                                  struct iso_gpu_fault **out, int *n, struct iso_error *err);
/* The node is down (ISO_NODE_DOWN, stored): every allocation with a member
 * there is evicted; *evicted (owned by the caller) lists their ids. Up
 * makes a down node schedulable; on any other node it changes nothing. */
int iso_controller_node_down(struct iso_controller *c, const struct iso_principal *p,
                             const char *node, json_t **evicted, struct iso_error *err);
int iso_controller_node_up(struct iso_controller *c, const struct iso_principal *p,
                           const char *node, struct iso_error *err);
/* Cordon, drain or uncordon every node of a pool (one transaction per
 * node; down nodes are skipped). *out: {"pool","state","nodes","skipped"}. */
int iso_controller_pool_set_sched(struct iso_controller *c, const struct iso_principal *p,
                                  const char *pool, enum iso_node_sched sched, json_t **out,
                                  struct iso_error *err);

struct iso_capacity {
	int nodes, schedulable_nodes;
	int gpus, gpus_free;
	int memory_slices, memory_slices_free;
	int compute_slices, compute_slices_free;
	int64_t cpus, cpus_free;
	int64_t memory_mib, memory_mib_free;
};
/* Capacity as `p` sees it: free is what it can still get. */
void iso_controller_capacity(struct iso_controller *c, const struct iso_principal *p,
                             struct iso_capacity *out);

/* ---- allocations ---- */
struct iso_alloc_request {
	const char *tenant; /* NULL: the caller's own */
	const char *name;   /* NULL: "" */
	int members;
	struct iso_shape shape;
	/* tenancy (docs/tenancy.md); NULL / 0: defaults */
	const char *project;   /* one of the tenant's projects */
	int priority;          /* within the tenant; higher may preempt lower */
	const char *isolation; /* shared | exclusive-gpu | exclusive-node | exclusive-rack */
	const char *spread;    /* gpu | node | rack */
	bool fail_on_preempt;  /* a victim fails rather than going back to the queue */
	int64_t duration_ms;   /* expected run time, for backfill */
	/* Idempotency-Key (docs/api.md) and the hex SHA-256 of the canonical
	 * request it comes with; NULL: none. Scoped by the tenant. */
	const char *idem_key;
	const char *idem_hash;
	/* "nodes": member i on nodes[i] (cluster roles only; n_nodes must be
	 * `members`); such a request is placed now or refused, never pending.
	 * has_nodes: the field was given (even empty). */
	bool has_nodes;
	const char *const *nodes;
	int n_nodes;
};
/* 0: created (201); 1: the tenant's allocation of req->idem_key, created
 * before with the same request, is in *out as it is now (200); < 0 refused,
 * nothing stored. */
int iso_controller_alloc_create(struct iso_controller *c, const struct iso_principal *p,
                                const struct iso_alloc_request *req, struct iso_allocation *out,
                                struct iso_error *err);
int iso_controller_alloc_get(struct iso_controller *c, const struct iso_principal *p,
                             const char *id, struct iso_allocation *out, struct iso_error *err);
struct iso_alloc_query {
	const char *tenant;   /* NULL: all visible */
	const char *idem_key; /* NULL: any; else only the one(s) created with it */
	int state;            /* -1: any */
	const char *after;
	int limit;
};
int iso_controller_alloc_list(struct iso_controller *c, const struct iso_principal *p,
                              const struct iso_alloc_query *q, struct iso_allocation **out, int *n,
                              struct iso_error *err);
int iso_controller_alloc_resize(struct iso_controller *c, const struct iso_principal *p,
                                const char *id, int members, struct iso_allocation *out,
                                struct iso_error *err);
int iso_controller_alloc_release(struct iso_controller *c, const struct iso_principal *p,
                                 const char *id, struct iso_allocation *out, struct iso_error *err);

/* ---- tenancy accounts: organisations, projects, quotas, the queue,
 * fair-share standing (accounts.c; docs/tenancy.md "The API") ----
 * Organisations and tenants share one namespace. Quota accounts are an
 * organisation's name, a tenant's name, or "tenant/project". */
int iso_controller_org_create(struct iso_controller *c, const struct iso_principal *p,
                              const char *name, double shares, struct iso_org *out,
                              struct iso_error *err);
int iso_controller_org_list(struct iso_controller *c, const struct iso_principal *p,
                            struct iso_org **out, int *n, struct iso_error *err);
int iso_controller_org_delete(struct iso_controller *c, const struct iso_principal *p,
                              const char *name, struct iso_error *err);
int iso_controller_project_create(struct iso_controller *c, const struct iso_principal *p,
                                  const char *tenant, const char *name, double shares,
                                  struct iso_project *out, struct iso_error *err);
int iso_controller_project_list(struct iso_controller *c, const struct iso_principal *p,
                                const char *tenant, struct iso_project **out, int *n,
                                struct iso_error *err);
int iso_controller_project_delete(struct iso_controller *c, const struct iso_principal *p,
                                  const char *tenant, const char *name, struct iso_error *err);
/* {"account", "level", "parent", "quotas": {kind: {guaranteed, borrow_limit,
 * lend_limit}}, "used": {kind: n}}; null limits are unlimited. */
int iso_controller_quota_get(struct iso_controller *c, const struct iso_principal *p,
                             const char *account, json_t **out, struct iso_error *err);
/* One kind's new quota; limits of INT64_MAX are unlimited. */
struct iso_quota_change {
	const char *kind; /* "gpus", "cpus", "memory_mib", "nodes" or a GPU model */
	int64_t guaranteed, borrow_limit, lend_limit;
};
/* Sets n kinds in one transaction (all or none); nesting errors are
 * ISO_E_INVALID "quota.ACCOUNT.KIND". *out as iso_controller_quota_get. */
int iso_controller_quota_set(struct iso_controller *c, const struct iso_principal *p,
                             const char *account, const struct iso_quota_change *ch, int n,
                             json_t **out, struct iso_error *err);
/* One page of the pending queue in fair-share order, after position `after`
 * (0: from the start): {"items", "next"}. A tenant sees only its own items,
 * numbered among themselves; a tenant-user only its own. */
int iso_controller_queue(struct iso_controller *c, const struct iso_principal *p, int limit,
                         int after, json_t **out, struct iso_error *err);
/* One page of the fair-share standing of the accounts the caller may see,
 * after account `after` (NULL: from the start): {"items", "next"}. */
int iso_controller_usage(struct iso_controller *c, const struct iso_principal *p, int limit,
                         const char *after, json_t **out, struct iso_error *err);

/* ---- audit log (docs/audit.md) ---- */
/* One event as the API hands it out: canonical bytes, leaf, and optionally
 * its inclusion proof against a tree size. */
struct iso_audit_item {
	int64_t seq;
	uint8_t leaf[ISO_AUDIT_HASH_LEN];
	const char *body; /* canonical encoding, borrowed for the callback */
	size_t len;
	uint64_t proof_size; /* 0: no proof */
	int n_proof;
	uint8_t proof[ISO_AUDIT_MAX_PROOF][ISO_AUDIT_HASH_LEN];
};
typedef int (*iso_audit_item_fn)(void *arg, const struct iso_audit_item *item);

/* Records an attempt that failed or was refused (the API calls it for every
 * refused or failed change and every failed authentication), in its own
 * transaction. `p` may be unauthenticated (empty token id). */
void iso_controller_audit_failure(struct iso_controller *c, const struct iso_principal *p,
                                  const char *action, const char *kind, const char *id,
                                  enum iso_audit_outcome outcome, const char *reason);
/* The latest signed head; signs a new one first when events came since. */
int iso_controller_audit_head(struct iso_controller *c, const struct iso_principal *p,
                              struct iso_audit_head *out, struct iso_error *err);
/* Events with seq > after, oldest first, at most limit; a tenant-admin gets
 * only events about its tenant's objects (tenant must then be NULL or its
 * own); tenant-users may not read the log. With proof_size > 0 (at most the
 * latest head's size) each event carries its inclusion proof. *next is the
 * seq to pass as `after` for the next page, or -1 at the end. */
int iso_controller_audit_events(struct iso_controller *c, const struct iso_principal *p,
                                const char *tenant, int64_t after, int limit, uint64_t proof_size,
                                iso_audit_item_fn fn, void *arg, int64_t *next,
                                struct iso_error *err);
int iso_controller_audit_inclusion(struct iso_controller *c, const struct iso_principal *p,
                                   uint64_t seq, uint64_t size, struct iso_audit_item *out,
                                   struct iso_error *err);
int iso_controller_audit_consistency(struct iso_controller *c, const struct iso_principal *p,
                                     uint64_t from, uint64_t to,
                                     uint8_t proof[][ISO_AUDIT_HASH_LEN], int *n,
                                     struct iso_error *err);
const uint8_t *iso_controller_audit_pubkey(const struct iso_controller *c);

/* ---- node agents (docs/agents.md; agents.c) ---- */
/* Called once with a waiting request's document (owned by the callee): when
 * the node's generation moved, at the deadline, or at shutdown. */
typedef void (*iso_desired_fn)(void *arg, json_t *doc);
struct iso_desired_wait {
	uint64_t after; /* answer when the generation is no longer this */
	int wait_s;     /* 0..60; 0: answer now */
	bool heartbeat; /* the node's agent renews its lease (docs/agents.md) */
	iso_desired_fn fn;
	void *arg;
};
/* Node `node`'s desired state {"node","generation","term","gpus","vfs"}
 * (node-agent of that node, cluster-admin, auditor; another node is
 * ISO_E_NOT_FOUND for a node-agent). With `wait` (may be NULL) and its
 * generation still `after`, the request is registered instead (*out NULL)
 * and wait->fn answers it later; ISO_E_LIMIT when too many already wait. */
int iso_controller_node_desired(struct iso_controller *c, const struct iso_principal *p,
                                const char *node, const struct iso_desired_wait *wait, json_t **out,
                                struct iso_error *err);
/* Answers every waiting request now, and any that comes later at once
 * (before the API stops). */
void iso_controller_agents_release_waiters(struct iso_controller *c);
/* The SM host's partitions document (GET /v1/fabric/sm/partitions,
 * docs/fabric.md "partitions.conf through the SM host's agent"):
 * {"term","generation","text"} with this leader's term, for the agent of
 * fabric.sm_node only (every other principal ISO_E_FORBIDDEN); ISO_E_NOT_FOUND
 * unless the opensm driver runs with fabric.partitions_writer agent. With
 * `wait` and the served generation still wait->after, registered like a node's
 * desired state (*out NULL, at most 4 waiting). */
int iso_controller_sm_partitions(struct iso_controller *c, const struct iso_principal *p,
                                 const struct iso_desired_wait *wait, json_t **out,
                                 struct iso_error *err);
struct iso_sm_report;
/* The SM agent's report (PUT /v1/fabric/sm/status): a term above this
 * controller's is ISO_E_CONFLICT (a newer leader exists); what it wrote
 * under this term advances the driver's applied generation. */
int iso_controller_sm_status(struct iso_controller *c, const struct iso_principal *p,
                             const struct iso_sm_report *rep, struct iso_error *err);
/* The controller's fencing term: stored, bumped at every start. */
int64_t iso_controller_agent_term(const struct iso_controller *c);

/* A node agent's status report (PUT /v1/nodes/{node}/status), as parsed:
 * struct iso_agent_status and its parts are the codec's
 * (include/isostack/codec.h). */
/* Keeps `st` (copied) as node `node`'s latest status, which is also its
 * agent's heartbeat. ISO_E_INVALID naming the field for a GPU or profile the
 * inventory does not have there; ISO_E_CONFLICT when term_seen is above the
 * controller's term (a newer controller exists). */
int iso_controller_node_status(struct iso_controller *c, const struct iso_principal *p,
                               const char *node, const struct iso_agent_status *st,
                               struct iso_error *err);
/* Node `ni`'s agent as the API shows it; false when none reported since the
 * controller started. */
struct iso_agent_view {
	bool connected; /* reported within the lease */
	int64_t last_seen_ms;
	char version[65];
	int64_t term_seen;
};
bool iso_controller_node_agent(const struct iso_controller *c, int ni, struct iso_agent_view *out);
/* Node `ni`'s conditions as its agent last reported them, as a JSON array
 * [{"type","gpu","want","have","since"}] (empty when none or never reported). */
json_t *iso_controller_node_conditions(const struct iso_controller *c, int ni);
/* Is node `ni` unreachable (its agent silent past the lease)? */
bool iso_controller_node_unreachable(const struct iso_controller *c, int ni);
/* Member `k` of `a` as its node's agent last reported it: *ready -1 (no
 * report of it), 0 or 1; the reported instances with a UUID, by GPU and
 * start, into out[max] (*n of them). */
struct iso_member_device {
	int gpu;
	char uuid[ISO_AGENT_TEXT_MAX];
};
void iso_controller_member_devices(const struct iso_controller *c, const struct iso_allocation *a,
                                   int k, int *ready, struct iso_member_device *out, int max,
                                   int *n);
/* The VF that member `k` of `a` uses on its node (its tenant's VF there),
 * when the node's agent reported it ready with the desired GUID: true and
 * *out filled; false otherwise (no VF on that node, not reported, not
 * ready). */
struct iso_member_vf {
	int index;
	char netdev[16];
	uint64_t guid;
	uint16_t vlan; /* a RoCE VF: its VLAN as read back (then no guid); 0: InfiniBand */
};
bool iso_controller_member_vf(const struct iso_controller *c, const struct iso_allocation *a, int k,
                              struct iso_member_vf *out);
/* Member k's sandbox as its node's agent last reported it (issue 14,
 * docs/agents.md "sandboxes"): true and *out filled when the report names
 * one with its cgroup; false otherwise. Cluster roles only see it (the API
 * leaves the key out for tenants). */
struct iso_member_sandbox {
	char cgroup[64];
	char cpus[129];
};
bool iso_controller_member_sandbox(const struct iso_controller *c, const struct iso_allocation *a,
                                   int k, struct iso_member_sandbox *out);

#define ISO_MAX_MEMBERS 1024

#endif

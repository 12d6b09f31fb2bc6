/* internal.h: the controller's own state, shared by its use-case files only. */
#ifndef ISOSTACK_CONTROLLER_INTERNAL_H
#define ISOSTACK_CONTROLLER_INTERNAL_H

#include "isostack/controller.h"

#include <jansson.h>
#include <limits.h>

#include "isostack/fabric.h"

struct ctl_agents;
struct ctl_uring;
struct ctl_costs;
struct ctl_fabric;
struct ctl_preempt;
struct ctl_queue;
struct ctl_rates;
struct ctl_tenancy;
struct iso_tenancy;
struct iso_running;

struct iso_controller {
	const struct iso_inventory *inv; /* borrowed */
	struct iso_store *store;         /* borrowed */
	const struct iso_placer *placer;
	struct iso_cluster_state cs; /* what live allocations hold, mirrors the store */
	int64_t last_created_ms;     /* the newest allocation's creation time (ctl_created_ms) */

	/* audit log: the tree mirrors the stored events, the head is the latest
	 * signed one; events of the open transaction wait in `queue` */
	struct iso_merkle *tree;
	struct iso_audit_key key;
	struct iso_audit_keyset keys; /* the published key set, own key included */
	char keys_file[PATH_MAX];     /* where it was read, "" for own key only */
	struct iso_audit_head head;
	bool have_head;
	struct iso_audit_event *queue;
	int n_queue, cap_queue;
	struct ctl_audit_failures *failures; /* audit.c: unauthenticated failures being counted */

	struct ctl_fabric *fabric;         /* fabric.c */
	struct ctl_vnis *vnis;             /* vni.c: tenants' VNIs, ethernet fabrics only */
	struct ctl_tenancy *tenancy;       /* tenancy.c */
	struct ctl_costs *costs;           /* demand.c */
	struct ctl_queue *pending;         /* queue.c: pending queue and running set */
	struct ctl_preempt *preempt;       /* preempt.c */
	struct ctl_rates *rates;           /* ratelimit.c */
	struct ctl_auth_cache *auth_cache; /* authcache.c: tokens read lately */
	uint64_t auth_epoch;               /* bumped at every transaction's end */
	struct ctl_agents *agents;         /* agents.c: desired state, status, leases */
	struct ctl_sm *sm;                 /* sm.c: the SM host's agent's long polls */
	struct ctl_neutron *neutron;       /* neutron.c: OpenStack's networks and ports */
	struct ctl_uring *uring;           /* uring.c: tenants whose io_uring switch is on */
	struct iso_tenant_limits limits;   /* defaults for tenants that set none */
	bool queue_more;                   /* the last queue pass stopped at its depth */
	int64_t queue_pass_ms;             /* when the last pass ran */
	struct iso_capacity capacity;      /* nodes.c: free as a tenant holding nothing sees it */
	uint64_t capacity_version;         /* cs.version it was counted at, 0: never */
	bool fabric_async;                 /* allocations wait in provisioning for the fabric */
	bool agent_gate;                   /* ...and for every member's agent (not --no-agents) */
	int64_t provision_ms;              /* the gate fails what waits longer */
	int64_t gate_checked_ms;           /* the last pass over provisioning allocations */
	/* group commit (iso_controller_sync): commits wait for one flush */
	bool group_commit;
	bool unsynced;           /* a commit since the last sync is not yet durable */
	bool sync_failed;        /* a sync failed: none may succeed after it */
	uint64_t commits, syncs; /* since the start: transactions committed, flushes */
};

/* An audit event as a use case describes it; the actor comes from the
 * principal (NULL: the daemon itself). */
struct ctl_event {
	const char *action; /* "tenant.create" */
	const char *kind;   /* "tenant" */
	const char *id;
	const char *tenant; /* the object's tenant, NULL/"" when none */
	int64_t tenant_id;
	json_t *details; /* stolen; NULL = {} */
};

/* Queues an event of the current (or the next begun) transaction; ctl_tx_end
 * writes it with the change, or drops it when the change rolls back. */
void ctl_emit(struct iso_controller *c, const struct iso_principal *p, const struct ctl_event *ev);
/* Records events in a transaction of their own (the daemon's start and stop,
 * audit reads, refused attempts). */
void ctl_record(struct iso_controller *c, const struct iso_principal *p, const struct ctl_event *ev,
                enum iso_audit_outcome outcome, const char *reason);

/* ---- audit.c ---- */
int ctl_audit_open(struct iso_controller *c, const char *state_dir, const char *keys_file,
                   bool accept_break, struct iso_error *err);
void ctl_audit_close(struct iso_controller *c);
/* Inside the open transaction: writes the queued events, and a new signed
 * head when the last is a second old or `force`. */
int ctl_audit_flush(struct iso_controller *c, bool force, struct iso_error *err);
/* After a rollback: forget what the flush appended in memory. */
void ctl_audit_undo(struct iso_controller *c, uint64_t size, const struct iso_audit_head *head,
                    bool have_head);
void ctl_audit_drop_queue(struct iso_controller *c);
/* Signs a head over everything now, in a transaction of its own. */
int ctl_audit_sign_now(struct iso_controller *c, struct iso_error *err);
/* Writes the counted unauthenticated failures as one event per (source,
 * outcome, action) once their interval is over, or now when `force` (the
 * tick calls it; shutdown forces it, so a clean stop loses no count). */
void ctl_audit_failures_flush(struct iso_controller *c, bool force);

/* The one store transaction of a use case: begin, then the writes, then
 * end, which commits when r == 0 and otherwise rolls back (also when the
 * commit itself fails). Returns the final result. Every state change goes
 * through this pair, so it is the one place a change's companions (the audit
 * event) will join the same transaction. */
int ctl_tx_begin(struct iso_controller *c, struct iso_error *err);
int ctl_tx_end(struct iso_controller *c, int r, struct iso_error *err);

/* ---- authz.c: the role x action table (docs/api.md, "Roles") ---- */
enum ctl_scope {
	CTL_SCOPE_NONE,   /* refused */
	CTL_SCOPE_LOOKUP, /* refused, but after the target is looked up in the caller's
	                   * tenant: another tenant's target answers 404 like a missing
	                   * one, the caller's own 403 (a narrower action may allow part) */
	CTL_SCOPE_OWN,    /* the caller's own objects: its token, its user's allocations */
	CTL_SCOPE_TENANT, /* everything of the caller's tenant */
	CTL_SCOPE_NODE,   /* the node a node-agent token names */
	CTL_SCOPE_ALL,    /* the whole cluster */
};
/* The scope `p` has for `action`; NONE for a role or an action missing from
 * the table. */
enum ctl_scope ctl_scope_of(const struct iso_principal *p, const char *action);
/* 0 with *scope (may be NULL) when `p` may do `action` at some scope, else
 * ISO_E_FORBIDDEN naming the role and the action. */
int ctl_authorize(const struct iso_principal *p, const char *action, enum ctl_scope *scope,
                  struct iso_error *err);
/* Filter choice: does `p` read every tenant (tenant.read at scope all), or
 * only its own? */
bool ctl_sees_all_tenants(const struct iso_principal *p);
/* Resolves a tenant name as the caller may see it: another tenant's name is
 * ISO_E_NOT_FOUND exactly like a missing one. NULL name = the caller's own
 * (cluster roles must name one). */
/* A node agent's pod attachment: one member, key "cni:<p->node>:..."
 * (allocations.c; issue 17). */
bool ctl_node_attachment(const struct iso_principal *p, const char *key, int members);
int ctl_resolve_tenant(struct iso_controller *c, const struct iso_principal *p, const char *name,
                       const char *field, struct iso_tenant *out, struct iso_error *err);

/* Places pending allocations that now fit, oldest first, one transaction
 * each. Called after anything frees capacity, and at start. */
void ctl_place_pending(struct iso_controller *c);

/* ---- vni.c: tenants' VXLAN VNIs on an ethernet fabric, handed out with
 * the tenant like its P_Key (fabric.c calls each step from its own) ---- */
int ctl_vni_open(struct iso_controller *c, struct iso_error *err);
void ctl_vni_close(struct iso_controller *c);
uint32_t ctl_vni_of(const struct iso_controller *c, int64_t tenant_id); /* 0: none */
int64_t ctl_vni_owner(const struct iso_controller *c, uint32_t vni);    /* 0: none */
int ctl_vni_count(const struct iso_controller *c);                      /* tenants with one */
int ctl_vni_tenant_create(struct iso_controller *c, const struct iso_tenant *t,
                          struct iso_error *err);
void ctl_vni_tenant_create_undo(struct iso_controller *c, int64_t tenant_id);
int ctl_vni_tenant_delete(struct iso_controller *c, int64_t tenant_id, struct iso_error *err);
void ctl_vni_tenant_deleted(struct iso_controller *c, int64_t tenant_id);

/* ---- agents.c: what the overlay verifier (overlay.c) reads of a node ---- */
struct ctl_overlay_view {
	bool seen;         /* its agent reported since the controller started */
	bool sandbox_real; /* ...and makes sandboxes, so it builds overlays */
	const struct iso_agent_overlay *overlay; /* as read back; NULL: not reported */
	int n_members;                           /* live members on the node */
	/* RoCE VFs: the node's VF assignments and its VFs as read back */
	const struct ctl_node_vf *want_vf;
	int n_want_vf;
	const struct iso_agent_vf *vf;
	int n_vf;
	/* Slingshot: the CXI services as read back; NULL: not reported */
	const struct iso_agent_cxi_report *cxi;
};
void ctl_agents_overlay_view(const struct iso_controller *c, int ni, struct ctl_overlay_view *out);
/* Live member i (0..n_members-1) of node ni. */
void ctl_agents_node_member(const struct iso_controller *c, int ni, int i, const char **alloc,
                            int *member, int64_t *tenant_id);
/* Does node ni hold a member of the tenant? (O(the tenant's nodes)) */
bool ctl_agents_tenant_on_node(const struct iso_controller *c, int64_t tenant_id, int ni);
/* The tenant's members changed (its io_uring switch): the documents of the
 * nodes holding them are rebuilt at the next settle, no other node's. */
void ctl_agents_tenant_changed(struct iso_controller *c, int64_t tenant_id);

/* ---- uring.c: the tenants whose members may use io_uring (docs/sandbox.md) ---- */
int ctl_uring_open(struct iso_controller *c, struct iso_error *err);
void ctl_uring_close(struct iso_controller *c);
bool ctl_uring_allowed(const struct iso_controller *c, int64_t tenant_id);
/* After the commit that changed tenant_id's switch (or deleted it: off). */
void ctl_uring_set(struct iso_controller *c, int64_t tenant_id, bool on);
/* The findings of the agent-read verifier modes (overlay.c, cxi.c), in the
 * P_Key verifier's shape. */
struct ctl_findings {
	struct iso_fabric_report *rep;
	int cap;
	bool oom;
};
/* A new finding, its message left to the caller (CTL_FINDING); NULL when
 * out of memory (f->oom then). */
struct iso_violation *ctl_finding_new(struct ctl_findings *f, enum iso_violation_kind kind,
                                      uint32_t vni, const char *const nodes[2],
                                      const char *const tenants[2]);
#define CTL_FINDING(f, kind, vni, nodes, tenants, ...)                                             \
	do {                                                                                       \
		struct iso_violation *v_ =                                                         \
		    ctl_finding_new((f), (kind), (vni), (nodes), (tenants));                       \
		if (v_)                                                                            \
			snprintf(v_->message, sizeof(v_->message), __VA_ARGS__);                   \
	} while (0)
/* ok, partitions_checked (the tenants' VNIs) and elapsed_ms of f->rep;
 * -ENOMEM (the report cleared) after an out-of-memory finding. */
int ctl_findings_end(struct iso_controller *c, struct ctl_findings *f, int64_t t0,
                     struct iso_error *err);
/* The Ethernet mode of the verifier (overlay.c): proves from the overlays
 * the agents read back that no cross-tenant path exists. */
int ctl_overlay_verify(struct iso_controller *c, struct iso_fabric_report *out,
                       struct iso_error *err);
/* The Slingshot mode (cxi.c): judges every CXI service the agents read
 * back against which tenant holds which VNI and which members live where. */
int ctl_cxi_verify(struct iso_controller *c, struct iso_fabric_report *out, struct iso_error *err);

/* ---- fabric.c: tenant P_Keys, VF assignments, the driver ---- */
int ctl_fabric_open(struct iso_controller *c, const char *state_dir, struct iso_error *err);
void ctl_fabric_close(struct iso_controller *c);
bool ctl_fabric_partitioned(const struct iso_controller *c);
int ctl_fabric_tenant_pkey(const struct iso_controller *c, int64_t tenant_id); /* -1: none */
/* Does the tenant have per-allocation partitions (docs/fabric.md)? */
bool ctl_fabric_tenant_per_alloc(const struct iso_controller *c, int64_t tenant_id);
/* After a committed tenant update: its partition mode in memory. */
void ctl_fabric_tenant_mode_set(struct iso_controller *c, int64_t tenant_id,
                                enum iso_partition_mode mode);
/* Inside the tenant's transaction. */
int ctl_fabric_tenant_create(struct iso_controller *c, const struct iso_tenant *t,
                             struct iso_error *err);
void ctl_fabric_tenant_create_undo(struct iso_controller *c, int64_t tenant_id);
/* In the deleting transaction: the key goes to quarantine in the store;
 * after the commit: ..._deleted releases it in memory. */
int ctl_fabric_tenant_delete(struct iso_controller *c, int64_t tenant_id, int64_t now,
                             struct iso_error *err);
void ctl_fabric_tenant_deleted(struct iso_controller *c, int64_t tenant_id, int64_t now);
/* Inside a transaction, after the cluster state holds the change: writes
 * the new port assignments and builds the intent (refusing capacity
 * overflows and cross-tenant ports). After the commit: ctl_fabric_commit
 * hands it to the driver and returns its generation; after a rollback:
 * ctl_fabric_abort. */
/* ---- neutron.c (docs/openstack.md) ---- */
int ctl_neutron_open(struct iso_controller *c, struct iso_error *err);
void ctl_neutron_close(struct iso_controller *c);
/* Every network and bound port held, sorted by uuid (for the staging). */
const struct iso_neutron_object *ctl_neutron_objects(const struct iso_controller *c, int *n);
/* The index in ctl_neutron_objects of network `uuid`, or -1. */
int ctl_neutron_find(const struct iso_controller *c, const char *uuid);
/* A network's fabric key's alloc_id, "n-<uuid>", and whether alloc is one. */
void ctl_neutron_key_alloc(const char *uuid, char *out, size_t size);
bool ctl_neutron_is_key(const char *alloc);
/* Inside the tenant delete's transaction: refused while a project maps to it. */
int ctl_neutron_tenant_delete(struct iso_controller *c, int64_t tenant_id, const char *name,
                              struct iso_error *err);
int ctl_fabric_stage(struct iso_controller *c, struct iso_error *err);
uint64_t ctl_fabric_commit(struct iso_controller *c);
void ctl_fabric_abort(struct iso_controller *c);
bool ctl_fabric_confirmed(const struct iso_controller *c, uint64_t generation);
/* Allocation `id` becomes active once `generation` is confirmed. */
int ctl_fabric_wait(struct iso_controller *c, const char *id, uint64_t generation);
/* Is allocation `id` still waiting for the fabric's confirmation? */
bool ctl_fabric_waiting(const struct iso_controller *c, const char *id);
/* The generation of the intent last committed (0: no fabric). */
uint64_t ctl_fabric_generation(const struct iso_controller *c);
void ctl_fabric_tick(struct iso_controller *c);
json_t *ctl_fabric_status_json(const struct iso_controller *c);
const struct iso_fabric_intent *ctl_fabric_intent(const struct iso_controller *c);
struct iso_fabric_driver *ctl_fabric_driver(const struct iso_controller *c);
/* Does the driver confirm an intent as it applies it (sim, opafm)? */
bool ctl_fabric_driver_sync(const struct iso_controller *c);
/* At start: stages and applies the whole intent from the allocations held,
 * and makes every provisioning allocation wait for it. */
int ctl_fabric_resync(struct iso_controller *c, struct iso_error *err);
/* The committed VF assignments of node `ni` (PF assignments of nodes without
 * VFs are not listed): up to `max` into out, the count returned. The tenant
 * name points into the fabric's keys, valid until the next mutation. */
struct ctl_node_vf {
	int vf;
	uint64_t guid;
	int64_t tenant_id;
	const char *tenant; /* "" on RoCE (no P_Key kept with a name) */
	uint16_t pkey;      /* the tenant's P_Key, without the membership bit */
	uint16_t vlan;      /* RoCE VFs on ethernet: the tenant's VLAN; else 0 */
	/* the allocation whose VF it is (a per-allocation tenant's), "" for the
	 * tenant's (a copy: the node agents keep these past the next mutation) */
	char alloc[ISO_ID_MAX];
};
int ctl_fabric_node_vfs(const struct iso_controller *c, int ni, struct ctl_node_vf *out, int max);
/* Is member i of node ni's view a pod's CNI attachment (key "cni:...")? */
bool ctl_agents_node_member_attachment(const struct iso_controller *c, int ni, int i);

/* ---- agents.c: the node agents' desired state, status and leases ---- */
/* Before the allocations are rebuilt: hooks the cluster state, bumps the
 * stored term. */
int ctl_agents_open(struct iso_controller *c, const struct iso_controller_params *params,
                    struct iso_error *err);
void ctl_agents_close(struct iso_controller *c);
/* Rebuilds the documents of nodes touched since, moving generations and
 * answering waiters (at every unlock: every change is committed or undone). */
void ctl_agents_settle(struct iso_controller *c);
/* Waiters past their deadline, leases. */
void ctl_agents_tick(struct iso_controller *c);

/* ---- the SM host's agent (sm.c) ---- */
/* Answers the SM agent's long polls whose document moved or whose wait is
 * over; `all` answers every one (the API is stopping). */
void ctl_sm_tick(struct iso_controller *c, bool all);
void ctl_sm_close(struct iso_controller *c);

/* ---- demand.c: what an allocation is charged (what it denies others) ---- */
int ctl_costs_open(struct iso_controller *c, struct iso_error *err);
void ctl_costs_free(struct iso_controller *c);
struct iso_resvec;
/* The charge of members [0, members) of `a`: read off its placement when
 * they are placed, else the least any placement could cost. */
void ctl_demand_members(const struct iso_controller *c, const struct iso_allocation *a, int members,
                        struct iso_resvec *out);
void ctl_demand(const struct iso_controller *c, const struct iso_allocation *a,
                struct iso_resvec *out);
enum iso_isolation ctl_alloc_isolation(const struct iso_allocation *a);
bool ctl_shape_asks_nothing(const struct iso_shape *sh);

/* ---- tenancy.c: the account tree, admission, charges ---- */
int ctl_tenancy_open(struct iso_controller *c, const struct iso_controller_params *params,
                     struct iso_error *err);
void ctl_tenancy_close(struct iso_controller *c);
/* The leaf account `a` is charged to, or -1. */
int ctl_tenancy_account_of(const struct iso_controller *c, const struct iso_allocation *a);
/* Refuses what can never run: an admission policy says no, or the request
 * alone is above a hard limit (ISO_E_CAPACITY naming it). */
int ctl_tenancy_check_request(struct iso_controller *c, const struct iso_tenant *tenant,
                              const struct iso_allocation *a, struct iso_error *err);
/* May `a` take `v` more now under the quotas? */
int ctl_tenancy_admit(struct iso_controller *c, const struct iso_allocation *a,
                      const struct iso_resvec *v, struct iso_error *err);
/* In memory, after the commit that placed or freed `v` of `a`. */
void ctl_tenancy_charge(struct iso_controller *c, const struct iso_allocation *a,
                        const struct iso_resvec *v);
void ctl_tenancy_uncharge(struct iso_controller *c, const struct iso_allocation *a,
                          const struct iso_resvec *v);
/* Inside the transaction that stops `a` holding `v`: its usage since
 * a->started_ms goes to the usage log. */
int ctl_tenancy_log(struct iso_controller *c, const struct iso_allocation *a,
                    const struct iso_resvec *v, int64_t now, struct iso_error *err);
int ctl_tenancy_constraints(struct iso_controller *c, const struct iso_allocation *a,
                            struct iso_place_constraints *pc, struct iso_error *err);
/* May the tenant add one more pending or live allocation? ISO_E_LIMIT
 * naming the limit ("limits.max_pending") when not. */
int ctl_tenancy_check_limits(struct iso_controller *c, const struct iso_tenant *t,
                             struct iso_error *err);
int ctl_tenancy_tenant_added(struct iso_controller *c, const struct iso_tenant *t,
                             struct iso_error *err);
/* After the commit that deleted it: the tenant's accounts leave the tree's
 * names (their usage stays counted in the organisation until it decays). */
void ctl_tenancy_tenant_deleted(struct iso_controller *c, const struct iso_tenant *t);

/* ---- queue.c: the pending queue and the running set, in memory ---- */
int ctl_queue_open(struct iso_controller *c, struct iso_error *err);
void ctl_queue_close(struct iso_controller *c);
int ctl_queue_add(struct iso_controller *c, const struct iso_allocation *a);
void ctl_queue_remove(struct iso_controller *c, const struct iso_allocation *a);
/* Records whether `a` holds resources now (placed..active), with its charge. */
int ctl_queue_running_set(struct iso_controller *c, const struct iso_allocation *a, bool holds);
/* Of a tenant (its account and its projects'): allocations pending, live,
 * and live with an exclusive isolation class (exclusive may be NULL). */
void ctl_queue_tenant_counts(const struct iso_controller *c, int tenant_acct, int *pending,
                             int *live, int *exclusive);
int ctl_queue_size(const struct iso_controller *c);
/* Items tried per pass, like Slurm's default_queue_depth. */
#define CTL_PLAN_MAX 64
struct ctl_queue_plan {
	int n;
	struct {
		char id[ISO_ID_MAX];
		bool start; /* the backfill plan lets it start now */
	} item[CTL_PLAN_MAX];
	bool more; /* items beyond the plan's depth wait for the next pass */
};
/* The first items in fair-share order, and which of them may start now. */
int ctl_queue_plan(struct iso_controller *c, struct ctl_queue_plan *plan);
bool ctl_queue_is_head(struct iso_controller *c, const struct iso_allocation *a);
/* Every running item (owned by the caller), for preemption. */
struct iso_running *ctl_queue_running(struct iso_controller *c, int *n);
struct ctl_queue_view {
	char id[ISO_ID_MAX];
	int position; /* among what the viewer may see */
	int acct;
};
int ctl_queue_view(struct iso_controller *c, const struct iso_principal *p, int limit, int after,
                   struct ctl_queue_view *out, int *n, bool *more);

/* ---- authcache.c: tokens that authenticated lately ---- */
int ctl_auth_cache_open(struct iso_controller *c, struct iso_error *err);
void ctl_auth_cache_close(struct iso_controller *c);
/* The token `id` and its tenant's name as read since the last transaction
 * ended; false when not cached. */
bool ctl_auth_cache_get(struct iso_controller *c, const char *id, struct iso_token *token,
                        char *tenant, size_t tenant_size);
void ctl_auth_cache_put(struct iso_controller *c, const struct iso_token *token,
                        const char *tenant);

/* ---- ratelimit.c: per-tenant request rates ---- */
int ctl_rates_open(struct iso_controller *c, const struct iso_rate_limits *lim,
                   struct iso_error *err);
void ctl_rates_close(struct iso_controller *c);
/* A tenant's rates in force: its own, or the daemon's defaults. */
void ctl_rates_of(const struct iso_controller *c, const struct iso_tenant *t, int *writes,
                  int *reads);
/* After a tenant's limits changed: its bucket reads them again. */
void ctl_rates_forget(struct iso_controller *c, int64_t tenant_id);

/* ---- preempt.c: preemption for a blocked head, and its victims ---- */
int ctl_preempt_open(struct iso_controller *c, const struct iso_controller_params *params,
                     struct iso_error *err);
void ctl_preempt_close(struct iso_controller *c);
void ctl_preempt_for(struct iso_controller *c, const struct iso_allocation *a);
void ctl_preempt_tick(struct iso_controller *c);

const struct iso_tenancy *ctl_tenancy_tree(const struct iso_controller *c);
/* Quota kinds by API name: "gpus", "cpus", "memory_mib", "nodes", a GPU model. */
void ctl_tenancy_kind_name(const struct iso_tenancy *t, int k, char *buf, size_t size);
int ctl_tenancy_kind_parse(const struct iso_tenancy *t, const char *name);
/* Tree changes (accounts.c, tenants.c): after the commit, or dry_run inside
 * the transaction (checked, then undone). put_account adds an account (level:
 * enum iso_acct_level; parent "" for a tenant = no organisation) or updates
 * its shares; an account is never removed from the tree (fair share keeps
 * its history), only emptied. */
struct iso_quota;
int ctl_tenancy_put_account(struct iso_controller *c, const char *name, int level,
                            const char *parent, double shares, struct iso_error *err);
int ctl_tenancy_set_quotas(struct iso_controller *c, const char *account, const int *kinds,
                           const struct iso_quota *q, int n, bool dry_run, struct iso_error *err);
/* After the commit that deleted an organisation or project: its quotas go,
 * and its name is free for a fresh account. */
void ctl_tenancy_forget_account(struct iso_controller *c, const char *account);
int ctl_tenancy_move_tenant(struct iso_controller *c, const char *tenant, const char *org,
                            bool dry_run, struct iso_error *err);
void ctl_tenancy_accrue(struct iso_controller *c);
int ctl_tenancy_default_org(const struct iso_controller *c);
/* accounts.c: lookups and the tenant policy fields, shared with tenants.c
 * and allocations.c. */
bool ctl_org_exists(struct iso_controller *c, const char *name);
bool ctl_project_exists(struct iso_controller *c, int64_t tenant_id, const char *name);
int ctl_tenant_policy_apply(struct iso_controller *c, const struct iso_tenant_policy *pol,
                            struct iso_tenant *t, struct iso_error *err);

/* Takes what `a` holds (members >= from) into the cluster state with its
 * isolation class in force, as at placement: restores and undos. */
int ctl_take(struct iso_controller *c, const struct iso_allocation *a, int from,
             struct iso_error *err);

/* allocations.c: tries one pending allocation (admission, placement, one
 * transaction); 0 when it started, else *blocked says it lacked capacity
 * (rather than quota). */
int ctl_alloc_place_pending(struct iso_controller *c, struct iso_allocation *a, bool *blocked);
/* Takes a live allocation off its nodes (preemption, a fault, a node going
 * down): capacity, fabric ports and quota go back, its usage is logged, and
 * it is requeued (pending again) or failed, in one transaction audited as
 * `action` with `reason`. */
int ctl_alloc_evict(struct iso_controller *c, struct iso_allocation *a, bool requeue,
                    const char *action, const char *reason, const char *by, struct iso_error *err);
int ctl_alloc_evict_id(struct iso_controller *c, const char *id, bool requeue, const char *action,
                       const char *reason, const char *by, struct iso_error *err);
/* Tells a victim it will be preempted at kill_at_ms (audited; the reason
 * shows it). */
void ctl_alloc_signal_preempt(struct iso_controller *c, const char *id, const char *by,
                              const char *mode, int64_t kill_at_ms);

/* allocations.c: provisioning -> active once the fabric confirmed. */
int ctl_alloc_activate(struct iso_controller *c, struct iso_allocation *a, uint64_t generation,
                       struct iso_error *err);
/* The provisioning gate (docs/agents.md): `a`, provisioning with its fabric
 * part confirmed, goes active when every member's agent reports its
 * instances ready (audited, one transaction); else its reason names the
 * node waited for. 1: activated, 0: still waiting, -errno. */
int ctl_alloc_gate(struct iso_controller *c, struct iso_allocation *a, uint64_t generation,
                   struct iso_error *err);
/* The gate of every provisioning allocation, and the provisioning timeout
 * (the tick, at most once a second); the fabric's waiters are left to the
 * fabric until it confirms. */
void ctl_alloc_gate_pass(struct iso_controller *c);
/* The gate of allocation `id` if it is provisioning and not waiting for the
 * fabric. 0: still waiting; 1: activated or past provisioning; -errno. */
int ctl_alloc_gate_id(struct iso_controller *c, const char *id);
/* agents.c: has member `k` of `a` every instance and whole GPU of its slots
 * reported present and ready by its node's agent? */
bool ctl_agents_member_ready(const struct iso_controller *c, const struct iso_allocation *a, int k);
/* agents.c: the GPUs no new work may go to while a node condition holds on
 * them (a MIG mode that differs from the inventory), at most `max`, into
 * out (names borrowed from the inventory); returns how many. */
int ctl_agents_avoid(const struct iso_controller *c, struct iso_gpu_ref *out, int max);

/* faults.c: at start, after the allocations are rebuilt: stored GPU faults
 * are quarantined again and whatever is still on faulted GPUs or down nodes
 * is evicted. */
int ctl_faults_reapply(struct iso_controller *c, struct iso_error *err);

/* faults.c: evicts every live allocation with a member on `node` (requeued
 * or failed by its own policy, audited as allocation.fault with `reason`),
 * as a node going down does; agents.c calls it when a lease's grace ends. */
int ctl_evict_node(struct iso_controller *c, const char *node, const char *reason,
                   struct iso_error *err);

/* Token generation, shared by bootstrap and issuance. */
int ctl_token_new(struct iso_token *t, char *secret, size_t size, struct iso_error *err);

/* A new allocation's creation time: now, or 1 ms after the previous one.
 * Allocations list and queue by (created, id) and ids are random, so two
 * created in the same millisecond, or after the clock stepped back, would
 * otherwise come out in random order. */
int64_t ctl_created_ms(struct iso_controller *c);
/* Now, for a later time of allocation `a` (updated, started): never before
 * its creation time, which ctl_created_ms may have moved ahead. */
static inline int64_t ctl_alloc_now(const struct iso_allocation *a)
{
	int64_t now = iso_now_ms();

	return now > a->created_ms ? now : a->created_ms;
}

#endif

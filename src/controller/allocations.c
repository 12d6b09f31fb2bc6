/* allocations.c: a tenant's virtual cluster or job, N members of one shape.
 * Placement is decided against the in-memory cluster state, made durable in
 * one store transaction, and undone in memory if the commit fails, so the
 * memory never holds what the store does not. With the sim drivers,
 * provisioning completes inside the same call; the state machine still walks
 * every edge so that a refused edge is caught here, not in a driver. */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

static void vec_sub(struct iso_resvec *a, const struct iso_resvec *b)
{
	for (int k = 0; k < ISO_RES_MAX; k++)
		a->v[k] -= b->v[k];
}

static int advance(struct iso_allocation *a, enum iso_alloc_state to, struct iso_error *err)
{
	if (!iso_alloc_transition_allowed(a->state, to))
		return iso_error_set(err, ISO_E_CONFLICT, NULL,
		                     "allocation %s: %s -> %s is not allowed", a->id,
		                     iso_alloc_state_name(a->state), iso_alloc_state_name(to));
	a->state = to;
	a->updated_ms = ctl_alloc_now(a);
	return 0;
}

#define WAIT_FABRIC "waiting for the fabric to confirm P_Key membership"

/* The provisioning gate's agent part: NULL when every member's agent has
 * reported its instances ready (or --no-agents), else the first node
 * waited for. */
static const char *agent_waited(const struct iso_controller *c, const struct iso_allocation *a)
{
	if (!c->agent_gate)
		return NULL;
	for (int k = 0; k < a->n_members; k++)
		if (!ctl_agents_member_ready(c, a, k))
			return a->placed[k].node;
	return NULL;
}

static void set_wait_reason(struct iso_allocation *a, const char *node)
{
	snprintf(a->reason, sizeof(a->reason), "waiting for the agent of node %s", node);
}

/* placed -> provisioning -> active. With a fabric that confirms later
 * (OpenSM) the allocation stays in provisioning until the tick sees the
 * read-back; the sim drivers confirm as they apply. Then, unless
 * --no-agents, it waits for every member's agent (ctl_alloc_gate). */
static int provision(struct iso_controller *c, struct iso_allocation *a, struct iso_error *err)
{
	const char *node = NULL;
	int r = advance(a, ISO_ALLOC_PLACED, err);

	if (r == 0)
		r = advance(a, ISO_ALLOC_PROVISIONING, err);
	if (r == 0 && !c->fabric_async)
		node = agent_waited(c, a);
	if (r == 0 && !c->fabric_async && !node) {
		r = advance(a, ISO_ALLOC_ACTIVE, err);
		a->started_ms = a->updated_ms;
	}
	if (r == 0 && node)
		set_wait_reason(a, node);
	else if (r == 0)
		iso_strlcpy(a->reason, c->fabric_async ? WAIT_FABRIC : "", sizeof(a->reason));
	return r;
}

/* A node agent's pod attachment (issue 17, docs/cni.md): one member, its
 * key "cni:<the agent's node>:<rest>". The key is stored with the
 * allocation and never changed, so it is the attachment's marker. */
bool ctl_node_attachment(const struct iso_principal *p, const char *key, int members)
{
	size_t n = strlen(p->node);

	return p->node[0] && members == 1 && key && strncmp(key, "cni:", 4) == 0 &&
	       strncmp(key + 4, p->node, n) == 0 && key[4 + n] == ':' && key[5 + n];
}

/* What a node agent may create: its own node's attachment, pinned there,
 * no GPUs. Refused naming the field, before anything is looked up. */
static int check_node_attachment(const struct iso_principal *p, const struct iso_alloc_request *req,
                                 struct iso_error *err)
{
	if (!req->has_nodes || req->n_nodes != 1 || !req->nodes[0] ||
	    strcmp(req->nodes[0], p->node) != 0)
		return iso_error_set(err, ISO_E_FORBIDDEN, "nodes",
		                     "nodes: a node agent creates only attachments pinned to its "
		                     "own node (nodes: [\"%s\"])",
		                     p->node);
	if (req->members != 1)
		return iso_error_set(err, ISO_E_FORBIDDEN, "members",
		                     "members: a node agent's attachment has one member");
	if (!ctl_node_attachment(p, req->idem_key, req->members))
		return iso_error_set(err, ISO_E_FORBIDDEN, "Idempotency-Key",
		                     "Idempotency-Key: a node agent's attachment is keyed "
		                     "cni:%s:...",
		                     p->node);
	if (req->shape.gpu_count)
		return iso_error_set(err, ISO_E_FORBIDDEN, "gpus",
		                     "gpus: a node agent's attachment holds no GPUs");
	return 0;
}

/* Is `a` within `scope` of principal `p`? */
static bool alloc_in_scope(enum ctl_scope scope, const struct iso_principal *p,
                           const struct iso_allocation *a)
{
	switch (scope) {
	case CTL_SCOPE_ALL:
		return true;
	case CTL_SCOPE_TENANT:
		return p->tenant_id > 0 && a->tenant_id == p->tenant_id;
	case CTL_SCOPE_OWN:
		return p->tenant_id > 0 && a->tenant_id == p->tenant_id &&
		       strcmp(a->owner, p->owner) == 0;
	case CTL_SCOPE_NODE:
		return ctl_node_attachment(p, a->idem_key, a->members) &&
		       (a->n_members == 0 || strcmp(a->placed[0].node, p->node) == 0);
	default:
		return false;
	}
}

static bool alloc_visible(const struct iso_principal *p, const struct iso_allocation *a)
{
	return alloc_in_scope(ctl_scope_of(p, "allocation.read"), p, a);
}

/* May `p` do `action` (to `a`, when not NULL)? */
static int require_writer(const struct iso_principal *p, const char *action,
                          const struct iso_allocation *a, struct iso_error *err)
{
	enum ctl_scope scope;
	int r = ctl_authorize(p, action, &scope, err);

	if (r == 0 && a && !alloc_in_scope(scope, p, a))
		r = iso_error_set(err, ISO_E_FORBIDDEN, NULL, "role %s may not do %s to %s",
		                  iso_role_name(p->role), action, a->id);
	return r;
}

/* [member, node, gpu, profile or "whole", start, width] for members >= from. */
static json_t *placement_json(const struct iso_allocation *a, int from)
{
	json_t *arr = json_array();

	for (int i = 0; i < a->n_slots; i++) {
		const struct iso_slot *s = &a->slots[i];
		if (s->member < from || s->member >= a->n_members)
			continue;
		json_array_append_new(
		    arr, json_pack("[i, s, i, s, i, i]", s->member, a->placed[s->member].node,
		                   s->gpu, s->whole ? "whole" : s->profile, s->start, s->width));
	}
	for (int m = from; m < a->n_members; m++)
		if (a->shape.gpu_count == 0)
			json_array_append_new(arr, json_pack("[i, s]", m, a->placed[m].node));
	return arr;
}

static void emit_alloc(struct iso_controller *c, const struct iso_principal *p,
                       const struct iso_allocation *a, const char *action, json_t *details)
{
	ctl_emit(c, p,
	         &(struct ctl_event){.action = action,
	                             .kind = "allocation",
	                             .id = a->id,
	                             .tenant = a->tenant,
	                             .tenant_id = a->tenant_id,
	                             .details = details});
}

/* The events of members [from, n_members) being placed and provisioned. */
static void emit_placed(struct iso_controller *c, const struct iso_principal *p,
                        const struct iso_allocation *a, int from)
{
	emit_alloc(c, p, a, "allocation.place",
	           json_pack("{s:s, s:o}", "policy", c->placer->name, "placement",
	                     placement_json(a, from)));
	emit_alloc(c, p, a, "allocation.provision",
	           json_pack("{s:s, s:s}", "driver",
	                     ctl_fabric_driver(c) ? ctl_fabric_driver(c)->ops->name : "sim",
	                     "state", iso_alloc_state_name(a->state)));
}

/* One transaction: the allocation record, its audit events and, when the
 * cluster state changed (`fabric`), the fabric's new port assignments. The
 * intent goes to the driver only after the commit; an allocation left in
 * provisioning waits for its generation to be confirmed. */
struct ended {
	const struct iso_allocation *a; /* as it ran (started_ms, shape) */
	struct iso_resvec charge;       /* what it held over that segment */
	bool any;
};

static int store_write_ended(struct iso_controller *c, const struct iso_allocation *a, bool insert,
                             bool fabric, const struct ended *ended, struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	uint64_t generation;
	int r = ctl_tx_begin(c, err);

	if (r == 0)
		r = insert ? ops->alloc_insert(c->store, a, err)
		           : ops->alloc_update(c->store, a, err);
	if (r == 0 && ended && ended->any)
		r = ctl_tenancy_log(c, ended->a, &ended->charge, ctl_alloc_now(ended->a), err);
	if (r == 0 && fabric)
		r = ctl_fabric_stage(c, err);
	r = ctl_tx_end(c, r, err);
	if (r < 0) {
		ctl_fabric_abort(c);
		return r;
	}
	if (!fabric)
		return 0;
	generation = ctl_fabric_commit(c);
	if (a->state == ISO_ALLOC_PROVISIONING && ctl_fabric_partitioned(c))
		ctl_fabric_wait(c, a->id, generation);
	return 0;
}

static int store_write(struct iso_controller *c, const struct iso_allocation *a, bool insert,
                       bool fabric, struct iso_error *err)
{
	return store_write_ended(c, a, insert, fabric, NULL, err);
}

int ctl_take(struct iso_controller *c, const struct iso_allocation *a, int from,
             struct iso_error *err)
{
	struct iso_place_constraints pc;
	int r;

	/* The exclusive level of what is taken is read from the constraints:
	 * without them a restored exclusive allocation would stop excluding. */
	if (ctl_tenancy_constraints(c, a, &pc, NULL) < 0)
		memset(&pc, 0, sizeof(pc));
	c->cs.constraints = &pc;
	r = from > 0 ? iso_cluster_state_take_members(&c->cs, a, from, err)
	             : iso_cluster_state_take(&c->cs, a, err);
	c->cs.constraints = NULL;
	return r;
}

/* Places `want` members of `a` under its isolation class and spreading,
 * member i on pins[i] for i < n_pins (POST's "nodes"). */
static int place_pinned(struct iso_controller *c, struct iso_allocation *a, int want,
                        const char *const *pins, int n_pins, struct iso_error *err)
{
	struct iso_place_constraints pc;
	struct iso_gpu_ref avoid[64];
	int r = ctl_tenancy_constraints(c, a, &pc, err);

	if (r < 0)
		return r;
	pc.member_nodes = pins;
	pc.n_member_nodes = n_pins;
	/* GPUs under a node condition take no new work (agents.c). */
	pc.avoid_gpus = avoid;
	pc.n_avoid_gpus = ctl_agents_avoid(c, avoid, (int)ISO_ARRAY_SIZE(avoid));
	return iso_placer_place_ex(c->placer, &c->cs, a, want, &pc, err);
}

static int place(struct iso_controller *c, struct iso_allocation *a, int want,
                 struct iso_error *err)
{
	return place_pinned(c, a, want, NULL, 0, err);
}

int ctl_alloc_activate(struct iso_controller *c, struct iso_allocation *a, uint64_t generation,
                       struct iso_error *err)
{
	int r = advance(a, ISO_ALLOC_ACTIVE, err);

	if (r < 0)
		return r;
	a->reason[0] = '\0';
	a->started_ms = ctl_alloc_now(a);
	emit_alloc(c, NULL, a, "allocation.active",
	           json_pack("{s:s, s:I, s:s}", "fabric", "confirmed", "generation",
	                     (json_int_t)generation, "agents",
	                     c->agent_gate ? "ready" : "not waited for"));
	r = store_write(c, a, false, false, err);
	if (r == 0)
		ctl_queue_running_set(c, a, true); /* its start time moved */
	if (r == 0)
		iso_log(ISO_LOG_INFO, "allocation_active", "id=%s tenant=%s generation=%llu", a->id,
		        a->tenant, (unsigned long long)generation);
	return r;
}

int ctl_alloc_gate(struct iso_controller *c, struct iso_allocation *a, uint64_t generation,
                   struct iso_error *err)
{
	const char *node = agent_waited(c, a);
	char was[sizeof(a->reason)];
	int r;

	if (!node) {
		r = ctl_alloc_activate(c, a, generation, err);
		return r < 0 ? r : 1;
	}
	iso_strlcpy(was, a->reason, sizeof(was));
	set_wait_reason(a, node);
	if (strcmp(was, a->reason) == 0)
		return 0;
	r = store_write(c, a, false, false, err);
	return r < 0 ? r : 0;
}

int ctl_alloc_gate_id(struct iso_controller *c, const char *id)
{
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	struct iso_error err = {0};
	int r;

	if (ctl_fabric_waiting(c, id))
		return 0;
	r = c->store->ops->alloc_get(c->store, id, &a, &err);
	if (r == 0 && a.state != ISO_ALLOC_PROVISIONING)
		return 1;
	if (r == 0)
		r = ctl_alloc_gate(c, &a, ctl_fabric_generation(c), &err);
	if (r < 0)
		iso_log(ISO_LOG_ERR, "provision_gate_failed", "id=%s error=\"%s\"", id,
		        err.message);
	return r;
}

void ctl_alloc_gate_pass(struct iso_controller *c)
{
	struct iso_alloc_filter filter = {.state = ISO_ALLOC_PROVISIONING};
	struct iso_allocation *waiting = NULL;
	struct iso_error err = {0};
	int64_t now = iso_now_ms();
	int n = 0;

	if (!c->agent_gate || now - c->gate_checked_ms < 1000)
		return;
	c->gate_checked_ms = now;
	if (c->store->ops->alloc_list(c->store, &filter, &waiting, &n, &err) < 0) {
		iso_log(ISO_LOG_ERR, "provision_gate_failed", "error=\"%s\"", err.message);
		return;
	}
	for (int i = 0; i < n; i++) {
		struct iso_allocation *a = &waiting[i];
		char why[ISO_DESC_MAX];

		if (now - a->updated_ms >= c->provision_ms) {
			snprintf(why, sizeof(why), "provisioning timed out after %llds: %s",
			         (long long)(c->provision_ms / 1000), a->reason);
			if (ctl_alloc_evict(c, a, false, "allocation.provision_timeout", why, NULL,
			                    &err) < 0)
				iso_log(ISO_LOG_ERR, "provision_timeout_failed",
				        "id=%s error=\"%s\"", a->id, err.message);
		} else if (!ctl_fabric_waiting(c, a->id) &&
		           ctl_alloc_gate(c, a, ctl_fabric_generation(c), &err) < 0) {
			iso_log(ISO_LOG_ERR, "provision_gate_failed", "id=%s error=\"%s\"", a->id,
			        err.message);
		}
	}
	iso_allocations_free(waiting, n);
}

/* The request's tenancy fields, checked. The allocation keeps the class it
 * runs under: the stricter of its tenant's and its own. */
static int fill_policy(struct iso_controller *c, const struct iso_principal *p,
                       const struct iso_tenant *tn, const struct iso_alloc_request *req,
                       struct iso_allocation *a, struct iso_error *err)
{
	enum iso_isolation iso = ISO_ISOLATION_SHARED, tenant_iso = ISO_ISOLATION_SHARED;
	enum iso_spread sp;

	if (req->project && req->project[0]) {
		if (!iso_name_valid(req->project))
			return iso_error_set(
			    err, ISO_E_INVALID, "project",
			    "project: invalid name (want [a-z0-9][a-z0-9._-]{0,62})");
		/* Else the tree would charge the tenant instead, silently. */
		if (!ctl_project_exists(c, tn->id, req->project))
			return iso_error_set(err, ISO_E_INVALID, "project",
			                     "project: tenant %s has no project \"%s\"", tn->name,
			                     req->project);
		iso_strlcpy(a->project, req->project, sizeof(a->project));
	}
	if (tn->isolation[0])
		iso_isolation_parse(tn->isolation, &tenant_iso);
	if (req->isolation && req->isolation[0] && iso_isolation_parse(req->isolation, &iso) < 0)
		return iso_error_set(err, ISO_E_INVALID, "isolation",
		                     "isolation: want shared, exclusive-gpu, exclusive-node "
		                     "or exclusive-rack");
	/* A whole rack is a policy decision, not a tenant's: only a tenant
	 * whose own class a cluster admin set to exclusive-rack gets one. */
	if (iso == ISO_ISOLATION_EXCLUSIVE_RACK && tenant_iso != ISO_ISOLATION_EXCLUSIVE_RACK)
		return iso_error_set(err, ISO_E_FORBIDDEN, "isolation",
		                     "isolation: exclusive-rack is only for tenants whose class "
		                     "is exclusive-rack (tenant %s is %s; a cluster admin sets it)",
		                     tn->name, iso_isolation_name(tenant_iso));
	if (tenant_iso > iso)
		iso = tenant_iso;
	iso_strlcpy(a->isolation, iso_isolation_name(iso), sizeof(a->isolation));
	if (req->spread && req->spread[0]) {
		if (iso_spread_parse(req->spread, &sp) < 0 || sp == ISO_SPREAD_NONE)
			return iso_error_set(err, ISO_E_INVALID, "spread",
			                     "spread: want gpu, node or rack");
		iso_strlcpy(a->spread, req->spread, sizeof(a->spread));
	}
	if (req->priority < -1000 || req->priority > 1000)
		return iso_error_set(err, ISO_E_INVALID, "priority",
		                     "priority: must be -1000..1000");
	/* Priority orders a tenant's own work and lets it preempt its own
	 * lower-priority work: above the ceiling its admin set, a tenant-user
	 * could evict its colleagues. */
	if (ctl_scope_of(p, "allocation.create") == CTL_SCOPE_OWN &&
	    req->priority > tn->max_user_priority)
		return iso_error_set(err, ISO_E_FORBIDDEN, "priority",
		                     "priority: tenant-users of %s may ask for at most %d (the "
		                     "tenant's max_user_priority, set by its tenant-admin)",
		                     tn->name, tn->max_user_priority);
	if (req->duration_ms < 0)
		return iso_error_set(err, ISO_E_INVALID, "duration_s", "duration_s: must be >= 0");
	a->priority = req->priority;
	a->fail_on_preempt = req->fail_on_preempt;
	a->duration_ms = req->duration_ms;
	return 0;
}

static int slots_of_first(struct iso_allocation *a, int keep);

/* Gives members [from, n_members) back and forgets where they were. */
static void unplace(struct iso_controller *c, struct iso_allocation *a, int from)
{
	if (from > 0) {
		int keep = slots_of_first(a, from);
		iso_cluster_state_give_members(&c->cs, a, from);
		a->n_members = from;
		a->n_slots = keep;
		return;
	}
	iso_cluster_state_give(&c->cs, a);
	free(a->placed);
	free(a->slots);
	a->placed = NULL;
	a->slots = NULL;
	a->n_members = a->n_slots = 0;
}

/* Admission for what a placement really takes: members [from, members) of
 * `a` just placed. The charge of exclusive classes depends on where they
 * landed, so it is checked again here; a refusal gives the members back. */
static int admit_placed(struct iso_controller *c, struct iso_allocation *a, int from,
                        struct iso_resvec *delta, struct iso_error *err)
{
	struct iso_resvec before;
	int r;

	ctl_demand_members(c, a, a->n_members, delta);
	if (from > 0) {
		ctl_demand_members(c, a, from, &before);
		vec_sub(delta, &before);
	}
	r = ctl_tenancy_admit(c, a, delta, err);
	if (r < 0)
		unplace(c, a, from);
	return r;
}

/* A request spread over more GPUs, nodes or racks than the empty cluster
 * can hold one member on can never run: 422 now, not pending forever. */
static int check_spread(struct iso_controller *c, const struct iso_alloc_request *req,
                        struct iso_error *err)
{
	enum iso_spread sp = ISO_SPREAD_NONE;
	const struct iso_inventory *inv = c->inv;
	int most = 0;

	if (!req->spread || !req->spread[0] || iso_spread_parse(req->spread, &sp) < 0 ||
	    sp == ISO_SPREAD_NONE || sp == ISO_SPREAD_GPU)
		return 0; /* distinct GPUs: the member count check above bounds it */
	for (int n = 0; n < inv->n_nodes && most < req->members; n++) {
		if (iso_shape_node_members(&inv->nodes[n], &req->shape, 1) < 1)
			continue;
		bool first = true;
		/* A rack counts once: at its first node that can hold a member. */
		for (int m = 0; sp == ISO_SPREAD_RACK && m < n && first; m++)
			first = !inv->nodes[n].rack[0] ||
			        strcmp(inv->nodes[m].rack, inv->nodes[n].rack) != 0 ||
			        iso_shape_node_members(&inv->nodes[m], &req->shape, 1) < 1;
		most += first;
	}
	if (most < req->members)
		return iso_error_set(
		    err, ISO_E_CAPACITY, "spread",
		    "spread: members must be on distinct %ss, and this cluster has "
		    "%d that can hold one member of this shape, even when empty",
		    iso_spread_name(sp), most);
	return 0;
}

#define IDEM_FIELD "Idempotency-Key"

/* The tenant's allocation of req->idem_key, when there is one: 1 with it in
 * *out when the request is the same (a retry), a 409 when it is not; 0 when
 * the key is new. The lookup is by the store's unique index on (key,
 * tenant), so a tenant's keys neither see nor slow another tenant's. */
static int idem_replay(struct iso_controller *c, const struct iso_principal *p,
                       const struct iso_tenant *tn, const struct iso_alloc_request *req,
                       struct iso_allocation *out, struct iso_error *err)
{
	int r;

	if (!req->idem_key)
		return 0;
	if (!iso_idem_key_valid(req->idem_key))
		return iso_error_set(err, ISO_E_INVALID, IDEM_FIELD,
		                     IDEM_FIELD ": want 1-128 characters of [A-Za-z0-9._:-]");
	if (!req->idem_hash || strlen(req->idem_hash) != 64)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "idempotency key without its hash");
	r = c->store->ops->alloc_get_by_key(c->store, tn->id, req->idem_key, out, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	/* A tenant-user's colleague's allocation is not its to see. */
	if (!alloc_visible(p, out)) {
		iso_allocation_clear(out);
		return iso_error_set(err, ISO_E_CONFLICT, IDEM_FIELD,
		                     IDEM_FIELD ": already used by another allocation of tenant %s",
		                     tn->name);
	}
	if (strcmp(out->idem_hash, req->idem_hash) != 0) {
		char id[ISO_ID_MAX];
		iso_strlcpy(id, out->id, sizeof(id));
		iso_allocation_clear(out);
		return iso_error_set(
		    err, ISO_E_CONFLICT, IDEM_FIELD,
		    IDEM_FIELD ": already used for allocation %s with another request", id);
	}
	return 1;
}

/* The request's "nodes": cluster roles only (a tenant never sees nodes:
 * checked before any name is looked at), one distinct inventory node per
 * member, each able to hold a member of the shape when empty. */
static int check_nodes(struct iso_controller *c, const struct iso_alloc_request *req,
                       struct iso_error *err)
{
	_cleanup_free_ bool *seen = NULL;
	char field[ISO_ERR_FIELD_MAX];

	if (req->n_nodes != req->members)
		return iso_error_set(err, ISO_E_INVALID, "nodes",
		                     "nodes: give one node per member (%d members, %d nodes)",
		                     req->members, req->n_nodes);
	seen = calloc((size_t)(c->inv->n_nodes > 0 ? c->inv->n_nodes : 1), sizeof(*seen));
	if (!seen)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < req->n_nodes; i++) {
		int ni = req->nodes[i] ? iso_cluster_state_node_index(&c->cs, req->nodes[i]) : -1;

		snprintf(field, sizeof(field), "nodes[%d]", i);
		if (ni < 0)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: no such node in the inventory", field);
		if (seen[ni])
			return iso_error_set(
			    err, ISO_E_INVALID, field,
			    "%s: node %s is named twice (members go on distinct nodes)", field,
			    req->nodes[i]);
		seen[ni] = true;
		if (iso_shape_node_members(&c->inv->nodes[ni], &req->shape, 1) < 1)
			return iso_error_set(
			    err, ISO_E_CAPACITY, field,
			    "member %d: node %s cannot hold one member of this shape, "
			    "even when empty",
			    i, req->nodes[i]);
	}
	return 0;
}

int iso_controller_alloc_create(struct iso_controller *c, const struct iso_principal *p,
                                const struct iso_alloc_request *req, struct iso_allocation *out,
                                struct iso_error *err)
{
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	struct iso_error perr = {0};
	struct iso_tenant tn;
	unsigned char raw[8];
	char hex[17];
	int r;

	enum ctl_scope scope;
	r = ctl_authorize(p, "allocation.create", &scope, err);
	if (r < 0)
		return r;
	if (req->has_nodes && iso_role_is_tenant_scoped(p->role))
		return iso_error_set(err, ISO_E_FORBIDDEN, "nodes",
		                     "nodes: only cluster roles may place members on named nodes");
	if (scope == CTL_SCOPE_NODE) {
		/* the pod's tenant is named by the agent, which serves every
		 * tenant's pods on its node; it learns nothing of the tenant but
		 * what it created (answers are its own attachments only) */
		if ((r = check_node_attachment(p, req, err)) < 0)
			return r;
		if (!req->tenant || !iso_name_valid(req->tenant))
			return iso_error_set(err, ISO_E_INVALID, "tenant",
			                     "tenant: required, a tenant name");
		r = c->store->ops->tenant_get_by_name(c->store, req->tenant, &tn, err);
		if (r == -ENOENT)
			r = iso_error_set(err, ISO_E_NOT_FOUND, "tenant", "no such tenant");
	} else {
		r = ctl_resolve_tenant(c, p, req->tenant, "tenant", &tn, err);
	}
	if (r < 0)
		return r;
	/* A retry comes before every other check: what was created stays the
	 * answer, whatever the limits say now. */
	r = idem_replay(c, p, &tn, req, out, err);
	if (r != 0)
		return r;
	if (req->members < 1 || req->members > ISO_MAX_MEMBERS)
		return iso_error_set(err, ISO_E_INVALID, "members", "members: must be 1..%d",
		                     ISO_MAX_MEMBERS);
	if (req->name && req->name[0] && !iso_name_valid(req->name))
		return iso_error_set(err, ISO_E_INVALID, "name",
		                     "name: invalid (want [a-z0-9][a-z0-9._-]{0,62})");
	r = iso_shape_validate(&req->shape, c->inv, err);
	if (r < 0)
		return r;
	if (ctl_shape_asks_nothing(&req->shape))
		return iso_error_set(err, ISO_E_INVALID, "gpus",
		                     "a member must ask for something: gpus, cpus or memory_mib");
	if (req->has_nodes) {
		r = check_nodes(c, req, err);
		if (r < 0)
			return r;
	}
	int most = iso_shape_max_members(&req->shape, c->inv, req->members);
	if (most == 0)
		return iso_error_set(err, ISO_E_CAPACITY, "gpus",
		                     "no node of this cluster can hold one member of this shape, "
		                     "even when empty");
	if (most < req->members)
		return iso_error_set(
		    err, ISO_E_CAPACITY, "members",
		    "members: this cluster holds at most %d members of this shape, "
		    "even when empty",
		    most);
	r = check_spread(c, req, err);
	if (r < 0)
		return r;
	r = ctl_tenancy_check_limits(c, &tn, err);
	if (r < 0)
		return r;

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(hex, sizeof(hex), raw, sizeof(raw));
	snprintf(a.id, sizeof(a.id), "a-%s", hex);
	a.tenant_id = tn.id;
	iso_strlcpy(a.tenant, tn.name, sizeof(a.tenant));
	iso_strlcpy(a.name, req->name ? req->name : "", sizeof(a.name));
	iso_strlcpy(a.owner, p->owner, sizeof(a.owner));
	a.members = req->members;
	a.shape = req->shape;
	a.state = ISO_ALLOC_PENDING;
	a.created_ms = a.updated_ms = ctl_created_ms(c);
	if (req->idem_key) {
		iso_strlcpy(a.idem_key, req->idem_key, sizeof(a.idem_key));
		iso_strlcpy(a.idem_hash, req->idem_hash, sizeof(a.idem_hash));
	}
	r = fill_policy(c, p, &tn, req, &a, err);
	if (r < 0)
		return r;
	/* Pinned members never wait, so they never go back to the queue (to
	 * be placed elsewhere) either: evicted, they fail. */
	if (req->has_nodes)
		a.fail_on_preempt = true;
	r = ctl_tenancy_check_request(c, &tn, &a, err);
	if (r < 0)
		return r;

	/* Quota first: a request over what its tenant may hold now waits. The
	 * estimate is the least it could cost; the placement's real charge is
	 * admitted before anything is written. */
	struct iso_resvec charge;
	ctl_demand(c, &a, &charge);
	r = ctl_tenancy_admit(c, &a, &charge, &perr);
	if (r == 0)
		r = place_pinned(c, &a, a.members, req->has_nodes ? req->nodes : NULL,
		                 req->has_nodes ? req->n_nodes : 0, &perr);
	if (r == 0)
		r = admit_placed(c, &a, 0, &charge, &perr);
	if (r == -ENOSPC && req->has_nodes) {
		/* Pinned: refused now (409, the quota or the node it would have
		 * waited for), nothing stored, never pending. */
		if (err)
			*err = perr;
		return r;
	}
	bool placed = r == 0;
	if (placed) {
		r = provision(c, &a, err);
		if (r < 0) {
			iso_cluster_state_give(&c->cs, &a);
			return r;
		}
	} else if (r == -ENOSPC) {
		snprintf(a.reason, sizeof(a.reason), "%s: %s",
		         perr.field[0] && strncmp(perr.field, "quota.", 6) == 0
		             ? "waiting for quota"
		             : "waiting for capacity",
		         perr.message);
	} else {
		if (err)
			*err = perr;
		return r;
	}
	json_t *details = json_pack(
	    "{s:i, s:i, s:b, s:s, s:i, s:I, s:s}", "members", a.members, "gpus", a.shape.gpu_count,
	    "whole", a.shape.whole, "profile", a.shape.profile, "cpus", a.shape.cpus, "memory_mib",
	    (json_int_t)a.shape.memory_mib, "state", iso_alloc_state_name(a.state));
	if (details && a.idem_key[0])
		json_object_set_new(details, "idempotency_key", json_string(a.idem_key));
	if (details && req->has_nodes)
		json_object_set_new(details, "pinned", json_true());
	emit_alloc(c, p, &a, "allocation.create", details);
	if (placed)
		emit_placed(c, p, &a, 0);
	r = store_write(c, &a, true, placed, err);
	if (r < 0) {
		if (placed)
			iso_cluster_state_give(&c->cs, &a);
		return r;
	}
	if (placed) {
		ctl_tenancy_charge(c, &a, &charge);
		ctl_queue_running_set(c, &a, true);
	} else {
		/* Nothing freed: only a new head may need to reclaim lent capacity. */
		ctl_queue_add(c, &a);
		if (ctl_queue_is_head(c, &a))
			ctl_preempt_for(c, &a);
	}
	iso_log(ISO_LOG_INFO, "allocation_created",
	        "request_id=%s by=%s id=%s tenant=%s state=%s members=%d", p->request_id,
	        p->token_id, a.id, a.tenant, iso_alloc_state_name(a.state), a.members);
	*out = a;
	memset(&a, 0, sizeof(a)); /* ownership of placed/slots moved to *out */
	return 0;
}

static int get_visible(struct iso_controller *c, const struct iso_principal *p, const char *id,
                       struct iso_allocation *out, struct iso_error *err)
{
	int r = c->store->ops->alloc_get(c->store, id, out, err);

	if (r == 0 && !alloc_visible(p, out)) {
		iso_allocation_clear(out);
		r = -ENOENT;
	}
	if (r == -ENOENT)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such allocation");
	return r;
}

int iso_controller_alloc_get(struct iso_controller *c, const struct iso_principal *p,
                             const char *id, struct iso_allocation *out, struct iso_error *err)
{
	return get_visible(c, p, id, out, err);
}

int iso_controller_alloc_list(struct iso_controller *c, const struct iso_principal *p,
                              const struct iso_alloc_query *q, struct iso_allocation **out, int *n,
                              struct iso_error *err)
{
	struct iso_alloc_filter f = {
	    .state = q->state, .after = q->after, .limit = q->limit, .idem_key = q->idem_key};
	enum ctl_scope scope;
	struct iso_tenant tn;
	int r = ctl_authorize(p, "allocation.list", &scope, err);

	if (r < 0)
		return r;
	if (q->idem_key && !iso_idem_key_valid(q->idem_key))
		return iso_error_set(err, ISO_E_INVALID, "idempotency_key",
		                     "idempotency_key: want 1-128 characters of [A-Za-z0-9._:-]");
	if (q->tenant) {
		r = ctl_resolve_tenant(c, p, q->tenant, "tenant", &tn, err);
		if (r < 0)
			return r;
		f.tenant_id = tn.id;
	} else if (scope != CTL_SCOPE_ALL) {
		f.tenant_id = p->tenant_id;
	}
	if (scope == CTL_SCOPE_OWN)
		f.owner = p->owner;
	if (q->after) {
		/* A cursor the caller could not see is as unknown as a made-up one. */
		struct iso_allocation cur = {0};
		r = get_visible(c, p, q->after, &cur, NULL);
		iso_allocation_clear(&cur);
		if (r < 0)
			return iso_error_set(err, ISO_E_INVALID, "after", "after: unknown cursor");
	}
	return c->store->ops->alloc_list(c->store, &f, out, n, err);
}

static int slot_order(const void *x, const void *y)
{
	const struct iso_slot *a = x, *b = y;

	if (a->member != b->member)
		return a->member < b->member ? -1 : 1;
	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	return (a->start > b->start) - (a->start < b->start);
}

/* Orders slots by member so that members >= keep form the tail; returns how
 * many slots the first `keep` members hold. Members are dense by index. */
static int slots_of_first(struct iso_allocation *a, int keep)
{
	int n = 0;

	if (a->n_slots > 0)
		qsort(a->slots, (size_t)a->n_slots, sizeof(*a->slots), slot_order);
	while (n < a->n_slots && a->slots[n].member < keep)
		n++;
	return n;
}

int iso_controller_alloc_resize(struct iso_controller *c, const struct iso_principal *p,
                                const char *id, int members, struct iso_allocation *out,
                                struct iso_error *err)
{
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	int old, r;

	r = get_visible(c, p, id, &a, err);
	if (r < 0)
		return r;
	r = require_writer(p, "allocation.resize", &a, err);
	if (r < 0)
		return r;
	if (members < 1 || members > ISO_MAX_MEMBERS)
		return iso_error_set(err, ISO_E_INVALID, "members", "members: must be 1..%d",
		                     ISO_MAX_MEMBERS);
	if (a.state != ISO_ALLOC_ACTIVE)
		return iso_error_set(err, ISO_E_CONFLICT, NULL,
		                     "allocation %s is %s; only active allocations can be resized",
		                     a.id, iso_alloc_state_name(a.state));
	old = a.members;
	struct iso_allocation ran = a; /* shallow: the segment that ends here, for the usage log */
	struct ended seg = {.a = &ran, .any = true};
	ctl_demand(c, &a, &seg.charge);
	if (members > old) {
		struct iso_resvec delta;
		r = place(c, &a, members, err);
		if (r < 0)
			return r;
		r = admit_placed(c, &a, old, &delta, err);
		if (r < 0)
			return r;
		a.members = members;
		a.updated_ms = ctl_alloc_now(&a);
		a.started_ms = a.updated_ms; /* a new usage segment */
		emit_alloc(c, p, &a, "allocation.resize",
		           json_pack("{s:i, s:i}", "from", old, "to", members));
		emit_placed(c, p, &a, old);
		r = store_write_ended(c, &a, false, true, &seg, err);
		if (r < 0) {
			iso_cluster_state_give_members(&c->cs, &a, old);
			return r;
		}
		ctl_tenancy_charge(c, &a, &delta);
		ctl_queue_running_set(c, &a, true);
	} else if (members < old) {
		int all_members = a.n_members, all_slots = a.n_slots;
		struct iso_resvec delta = seg.charge, kept;

		/* The dropped members' capacity goes back first, so that the
		 * fabric's new intent (staged in the same transaction) no longer
		 * holds their ports; a failed write takes it again. */
		int keep = slots_of_first(&a, members);

		ctl_demand_members(c, &a, members, &kept);
		vec_sub(&delta, &kept);
		a.updated_ms = ctl_alloc_now(&a);
		a.started_ms = a.updated_ms; /* a new usage segment */
		iso_cluster_state_give_members(&c->cs, &a, members);
		a.members = members;
		a.n_members = members;
		a.n_slots = keep;
		emit_alloc(c, p, &a, "allocation.resize",
		           json_pack("{s:i, s:i}", "from", old, "to", members));
		r = store_write_ended(c, &a, false, true, &seg, err);
		if (r < 0) {
			a.n_members = all_members;
			a.n_slots = all_slots;
			if (ctl_take(c, &a, members, NULL) < 0)
				iso_log(ISO_LOG_ERR, "resize_undo_failed", "id=%s", a.id);
			return r;
		}
		ctl_tenancy_uncharge(c, &ran, &delta);
		ctl_queue_running_set(c, &a, true);
		ctl_place_pending(c);
	}
	iso_log(ISO_LOG_INFO, "allocation_resized", "request_id=%s by=%s id=%s members=%d->%d",
	        p->request_id, p->token_id, a.id, old, members);
	*out = a;
	memset(&a, 0, sizeof(a));
	return 0;
}

int iso_controller_alloc_release(struct iso_controller *c, const struct iso_principal *p,
                                 const char *id, struct iso_allocation *out, struct iso_error *err)
{
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	bool held;
	int r;

	r = get_visible(c, p, id, &a, err);
	if (r < 0)
		return r;
	r = require_writer(p, "allocation.release", &a, err);
	if (r < 0)
		return r;
	if (!iso_alloc_state_terminal(a.state)) {
		const char *from_state = iso_alloc_state_name(a.state);
		held = a.state != ISO_ALLOC_PENDING;
		if (held) {
			r = advance(&a, ISO_ALLOC_RELEASING, err);
			if (r == 0)
				r = advance(&a, ISO_ALLOC_RELEASED, err);
		} else {
			r = advance(&a, ISO_ALLOC_RELEASED, err);
		}
		if (r < 0)
			return r;
		a.reason[0] = '\0';
		emit_alloc(c, p, &a, "allocation.release", json_pack("{s:s}", "from", from_state));
		/* Capacity back first so that the staged intent drops the ports;
		 * a failed write takes it again. */
		struct ended seg = {.a = &a, .any = held};
		if (held)
			ctl_demand(c, &a, &seg.charge);
		if (held)
			iso_cluster_state_give(&c->cs, &a);
		r = store_write_ended(c, &a, false, held, &seg, err);
		if (r < 0) {
			if (held && ctl_take(c, &a, 0, NULL) < 0)
				iso_log(ISO_LOG_ERR, "release_undo_failed", "id=%s", a.id);
			return r;
		}
		if (held) {
			ctl_tenancy_uncharge(c, &a, &seg.charge);
			ctl_queue_running_set(c, &a, false);
		} else {
			ctl_queue_remove(c, &a);
		}
		iso_log(ISO_LOG_INFO, "allocation_released", "request_id=%s by=%s id=%s tenant=%s",
		        p->request_id, p->token_id, a.id, a.tenant);
		if (held)
			ctl_place_pending(c);
	}
	*out = a;
	memset(&a, 0, sizeof(a));
	return 0;
}

/* One pass over the head of the queue: the queue decides what to try
 * (ctl_queue_plan, bounded), this file places it, preemption acts for a head
 * that still cannot start. A pass cut short by its depth goes on at the
 * daemon tick, at most once a second (iso_controller_tick). */
void ctl_place_pending(struct iso_controller *c)
{
	struct ctl_queue_plan plan;

	if (ctl_queue_plan(c, &plan) < 0) {
		iso_log(ISO_LOG_ERR, "queue_failed", "error=\"out of memory\"");
		return;
	}
	c->queue_more = plan.more;
	c->queue_pass_ms = iso_now_ms();
	for (int i = 0; i < plan.n; i++) {
		_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
		bool blocked_head = false;

		if (c->store->ops->alloc_get(c->store, plan.item[i].id, &a, NULL) < 0) {
			iso_log(ISO_LOG_ERR, "queue_item_unreadable", "id=%s", plan.item[i].id);
			c->queue_more = true; /* the tick tries it again */
			continue;
		}
		if (a.state != ISO_ALLOC_PENDING) {
			/* The queue must only hold pending work: heal, and say so. */
			iso_log(ISO_LOG_ERR, "queue_item_not_pending", "id=%s state=%s", a.id,
			        iso_alloc_state_name(a.state));
			ctl_queue_remove(c, &a);
			continue;
		}
		if (!plan.item[i].start) {
			/* A head the plan cannot start now may still reclaim what
			 * its tenant lent (the planner counts borrowed work as
			 * running on). */
			if (i == 0)
				ctl_preempt_for(c, &a);
			continue;
		}
		if (ctl_alloc_place_pending(c, &a, &blocked_head) == 0)
			continue;
		if (i == 0 && blocked_head)
			ctl_preempt_for(c, &a);
	}
}

int ctl_alloc_place_pending(struct iso_controller *c, struct iso_allocation *a, bool *blocked)
{
	struct iso_error err = {0};
	struct iso_resvec charge;
	int r;

	*blocked = false;
	ctl_demand(c, a, &charge);
	r = ctl_tenancy_admit(c, a, &charge, &err);
	if (r == 0) {
		r = place(c, a, a->members, &err);
		*blocked = r == -ENOSPC;
	}
	if (r == 0)
		r = admit_placed(c, a, 0, &charge, &err);
	if (r == -EIO) {
		/* Not a wait but a failure (the store could not be read): no
		 * reason to record, and the tick's pass tries it again. */
		iso_log(ISO_LOG_ERR, "pending_place_failed", "id=%s error=\"%s\"", a->id,
		        err.message);
		c->queue_more = true;
		return r;
	}
	if (r < 0) {
		/* Still waiting: say why, where it is seen (GET /v1/queue). */
		char why[ISO_DESC_MAX];
		snprintf(why, sizeof(why), "%s: %s",
		         *blocked ? "waiting for capacity" : "waiting for quota", err.message);
		if (strcmp(why, a->reason) != 0) {
			iso_strlcpy(a->reason, why, sizeof(a->reason));
			store_write(c, a, false, false, &err);
		}
		return r;
	}
	r = provision(c, a, &err);
	if (r == 0) {
		emit_placed(c, NULL, a, 0);
		r = store_write(c, a, false, true, &err);
	}
	if (r < 0) {
		iso_cluster_state_give(&c->cs, a);
		iso_log(ISO_LOG_ERR, "pending_place_failed", "id=%s error=\"%s\"", a->id,
		        err.message);
		/* It fits, but the store failed: nothing else may free capacity
		 * on a quiet cluster, so the tick's pass tries it again. */
		c->queue_more = true;
		return r;
	}
	ctl_queue_remove(c, a);
	ctl_tenancy_charge(c, a, &charge);
	ctl_queue_running_set(c, a, true);
	iso_log(ISO_LOG_INFO, "allocation_placed", "id=%s tenant=%s", a->id, a->tenant);
	return 0;
}

int ctl_alloc_evict(struct iso_controller *c, struct iso_allocation *a, bool requeue,
                    const char *action, const char *reason, const char *by, struct iso_error *err)
{
	struct iso_allocation ran = *a; /* shallow: as it ran, for undo and the usage log */
	struct ended seg = {.a = &ran, .any = true};
	bool held = a->state != ISO_ALLOC_PENDING && !iso_alloc_state_terminal(a->state);
	const char *from_state = iso_alloc_state_name(a->state);
	int r;

	if (!held)
		return iso_error_set(err, ISO_E_CONFLICT, NULL, "allocation %s holds nothing",
		                     a->id);
	if (a->state != ISO_ALLOC_RELEASING) {
		r = advance(a, ISO_ALLOC_RELEASING, err);
		if (r < 0)
			return r;
	}
	r = advance(a, requeue ? ISO_ALLOC_PENDING : ISO_ALLOC_FAILED, err);
	if (r < 0) {
		*a = ran;
		return r;
	}
	ctl_demand(c, &ran, &seg.charge);
	snprintf(a->reason, sizeof(a->reason), "%s: %s", requeue ? "requeued" : "failed", reason);
	a->started_ms = 0;
	iso_cluster_state_give(&c->cs, &ran);
	if (requeue) {
		a->n_members = 0;
		a->n_slots = 0; /* the arrays stay with `ran`, freed by the caller's a */
	}
	/* Who preempted whom is for the operators' log, never the reason a
	 * tenant reads. */
	json_t *details = json_pack("{s:s, s:s, s:s}", "from", from_state, "to",
	                            iso_alloc_state_name(a->state), "reason", reason);
	if (by)
		json_object_set_new(details, "by", json_string(by));
	emit_alloc(c, NULL, a, action, details);
	r = store_write_ended(c, a, false, true, &seg, err);
	if (r < 0) {
		if (ctl_take(c, &ran, 0, NULL) < 0)
			iso_log(ISO_LOG_ERR, "evict_undo_failed", "id=%s", ran.id);
		*a = ran;
		return r;
	}
	ctl_tenancy_uncharge(c, &ran, &seg.charge);
	ctl_queue_running_set(c, &ran, false);
	if (requeue)
		ctl_queue_add(c, a);
	iso_log(ISO_LOG_WARN, "allocation_evicted", "id=%s tenant=%s to=%s reason=\"%s\"", a->id,
	        a->tenant, iso_alloc_state_name(a->state), reason);
	if (requeue) {
		a->n_members = ran.n_members;
		a->n_slots = ran.n_slots; /* so that clearing `a` frees them */
	}
	return 0;
}

int ctl_alloc_evict_id(struct iso_controller *c, const char *id, bool requeue, const char *action,
                       const char *reason, const char *by, struct iso_error *err)
{
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	int r = c->store->ops->alloc_get(c->store, id, &a, err);

	if (r < 0)
		return r;
	if (a.state == ISO_ALLOC_PENDING || iso_alloc_state_terminal(a.state))
		return 0; /* gone already: nothing to take */
	return ctl_alloc_evict(c, &a, requeue, action, reason, by, err);
}

void ctl_alloc_signal_preempt(struct iso_controller *c, const char *id, const char *by,
                              const char *mode, int64_t kill_at_ms)
{
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	struct iso_error err = {0};
	char when[40];

	if (c->store->ops->alloc_get(c->store, id, &a, &err) < 0)
		return;
	iso_format_time(kill_at_ms, when, sizeof(when));
	snprintf(a.reason, sizeof(a.reason), "preempted (%s): stop by %s", mode, when);
	a.updated_ms = ctl_alloc_now(&a);
	emit_alloc(c, NULL, &a, "allocation.preempt_signal",
	           json_pack("{s:s, s:s, s:s}", "mode", mode, "kill_at", when, "for", by));
	if (store_write(c, &a, false, false, &err) < 0)
		iso_log(ISO_LOG_ERR, "preempt_signal_failed", "id=%s error=\"%s\"", id,
		        err.message);
	else
		iso_log(ISO_LOG_WARN, "allocation_preempt_signal",
		        "id=%s for=%s mode=%s kill_at=%s", id, by, mode, when);
}

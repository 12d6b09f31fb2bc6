/* controller.c: the controller's lifetime: opening over a store and an
 * inventory, rebuilding what live allocations hold after a restart (or a
 * kill -9), the shared transaction wrapper and tenant resolution as the
 * caller may see it (the rights themselves: authz.c). */
#include <errno.h>
#include <string.h>

#include "controller/internal.h"

const struct iso_inventory *iso_controller_inventory(const struct iso_controller *c)
{
	return c->inv;
}
const struct iso_cluster_state *iso_controller_state(const struct iso_controller *c)
{
	return &c->cs;
}
const char *iso_controller_placer_name(const struct iso_controller *c)
{
	return c->placer->name;
}
const char *iso_controller_store_name(const struct iso_controller *c)
{
	return c->store->ops->name;
}

int ctl_tx_begin(struct iso_controller *c, struct iso_error *err)
{
	/* Events queued just before belong to this transaction. After a failed
	 * flush nothing more is committed: the daemon is stopping (group commit,
	 * iso_controller_sync). */
	int r = c->sync_failed ? iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
	                                       "store: a flush failed; the daemon is stopping")
	                       : c->store->ops->begin(c->store, err);

	/* The store can no longer vouch for what this process holds (PostgreSQL
	 * failed over to another timeline): stop as after a failed flush. */
	if (r == -ENOTCONN)
		c->sync_failed = true;
	if (r < 0)
		ctl_audit_drop_queue(c);
	/* Committed or undone, the store may differ from what authenticated
	 * before: tokens are read again (authcache.c). */
	c->auth_epoch++;
	return r;
}

int ctl_tx_end(struct iso_controller *c, int r, struct iso_error *err)
{
	uint64_t size = iso_merkle_size(c->tree);
	struct iso_audit_head head = c->head;
	bool have_head = c->have_head;

	/* The events go into the same transaction as the change they record:
	 * no change without its event, no event for a change that did not happen. */
	if (r == 0)
		r = ctl_audit_flush(c, false, err);
	if (r == 0) {
		r = c->store->ops->commit(c->store, err);
		/* Whether it committed is unknown (PostgreSQL failed over under
		 * COMMIT): memory and the audit tree may now lag the store, so
		 * nothing more is committed and the daemon stops as after a failed
		 * flush; its restart reads what the store kept (docs/store.md,
		 * "PostgreSQL failover"). */
		if (r == -ENOTCONN)
			c->sync_failed = true;
	}
	if (r == 0) {
		c->commits++;
		c->unsynced = c->group_commit; /* durable at the next sync */
	}
	if (r < 0) {
		c->store->ops->rollback(c->store);
		ctl_audit_undo(c, size, &head, have_head);
	}
	ctl_audit_drop_queue(c);
	return r;
}

int ctl_resolve_tenant(struct iso_controller *c, const struct iso_principal *p, const char *name,
                       const char *field, struct iso_tenant *out, struct iso_error *err)
{
	bool all = ctl_sees_all_tenants(p);

	if (!name) {
		if (all)
			return iso_error_set(err, ISO_E_INVALID, field, "%s: required", field);
		if (!p->tenant[0]) /* a principal of no tenant that may not read them all */
			return iso_error_set(err, ISO_E_NOT_FOUND, field, "no such tenant");
		name = p->tenant;
	}
	if (!iso_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: invalid name (want [a-z0-9][a-z0-9._-]{0,62})", field);
	/* Same answer for another tenant and for no tenant, and the name is not
	 * echoed: nothing to learn, and nothing of another tenant in any body. */
	if (!all && strcmp(name, p->tenant) != 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, field, "no such tenant");
	int r = c->store->ops->tenant_get_by_name(c->store, name, out, err);
	if (r == -ENOENT)
		return iso_error_set(err, ISO_E_NOT_FOUND, field, "no such tenant");
	return r;
}

int iso_controller_check_infra_read(const struct iso_principal *p, struct iso_error *err)
{
	return ctl_authorize(p, "node.read", NULL, err);
}

/* An allocation found mid-transition after a restart is carried to where the
 * sim drivers would have taken it: work that was being set up finishes, work
 * that was being torn down is gone. Level-triggered, like the node agents. */
static int reconcile_one(struct iso_controller *c, struct iso_allocation *a)
{
	struct iso_error err = {0};
	enum iso_alloc_state want = a->state;

	/* With a fabric that confirms later, provisioning waits for it (the
	 * whole intent is applied again at start). */
	if (a->state == ISO_ALLOC_PLACED || a->state == ISO_ALLOC_PROVISIONING)
		want = c->fabric_async || c->agent_gate ? ISO_ALLOC_PROVISIONING : ISO_ALLOC_ACTIVE;
	else if (a->state == ISO_ALLOC_RELEASING)
		want = ISO_ALLOC_RELEASED;

	if (want != ISO_ALLOC_RELEASED && a->state != ISO_ALLOC_PENDING) {
		if (ctl_take(c, a, 0, &err) < 0) {
			/* The inventory no longer has what this allocation holds. */
			iso_log(ISO_LOG_ERR, "allocation_lost", "id=%s tenant=%s reason=\"%s\"",
			        a->id, a->tenant, err.message);
			want = ISO_ALLOC_FAILED;
			snprintf(a->reason, sizeof(a->reason), "inventory changed: %s",
			         err.message);
		}
	}
	if (want == a->state)
		return 0;
	iso_log(ISO_LOG_WARN, "allocation_reconciled", "id=%s from=%s to=%s", a->id,
	        iso_alloc_state_name(a->state), iso_alloc_state_name(want));
	struct ctl_event ev = {
	    .action = "allocation.reconcile",
	    .kind = "allocation",
	    .id = a->id,
	    .tenant = a->tenant,
	    .tenant_id = a->tenant_id,
	    .details = json_pack("{s:s, s:s, s:s}", "from", iso_alloc_state_name(a->state), "to",
	                         iso_alloc_state_name(want), "reason", a->reason),
	};
	a->state = want;
	a->updated_ms = ctl_alloc_now(a);
	int r = ctl_tx_begin(c, &err);
	if (r == 0)
		r = c->store->ops->alloc_update(c->store, a, &err);
	if (r == 0)
		ctl_emit(c, NULL, &ev);
	else
		json_decref(ev.details);
	if (ctl_tx_end(c, r, &err) < 0) {
		iso_log(ISO_LOG_ERR, "reconcile_failed", "id=%s error=\"%s\"", a->id, err.message);
		return -EIO;
	}
	return 0;
}

/* The engine learns demand from its own decisions, and after a restart it has
 * made none: left alone, the first few requests would stand for all demand
 * (docs/placement.md, "Demand known in advance"). The newest allocations,
 * whatever became of them, are the decisions it had learned from before;
 * what still runs alone would over-weigh long jobs. PRIME_RECENT is about
 * what its decayed history weighs (a half-life of ~2,840 decisions).
 * Policies that learn nothing ignore it; a failure only costs placement
 * quality, so it is logged, not fatal. */
#define PRIME_RECENT 4096

static void prime_engine(struct iso_controller *c)
{
	_cleanup_free_ struct iso_shape *shapes = NULL;
	_cleanup_free_ double *weights = NULL;
	struct iso_allocation *recent = NULL;
	struct iso_error err = {0};
	int n = 0, r;

	if (!c->placer->learn)
		return;
	r = c->store->ops->alloc_recent(c->store, PRIME_RECENT, &recent, &n, &err);
	if (r < 0) {
		iso_log(ISO_LOG_WARN, "engine_learn_failed", "reason=\"%s\"", err.message);
		return;
	}
	if (n == 0)
		return;
	shapes = calloc((size_t)n, sizeof(*shapes));
	weights = calloc((size_t)n, sizeof(*weights));
	if (!shapes || !weights) {
		iso_allocations_free(recent, n);
		iso_log(ISO_LOG_WARN, "engine_learn_failed", "reason=\"out of memory\"");
		return;
	}
	for (int i = 0; i < n; i++) {
		shapes[i] = recent[i].shape;
		weights[i] = recent[i].members;
	}
	iso_allocations_free(recent, n);
	r = iso_placer_learn(c->placer, &c->cs, shapes, weights, n);
	if (r < 0)
		iso_log(ISO_LOG_WARN, "engine_learn_failed", "reason=\"%s\"", strerror(-r));
	else
		iso_log(ISO_LOG_INFO, "engine_primed", "policy=%s allocations=%d", c->placer->name,
		        n);
}

int64_t ctl_created_ms(struct iso_controller *c)
{
	int64_t now = iso_now_ms();

	if (now <= c->last_created_ms)
		now = c->last_created_ms + 1;
	c->last_created_ms = now;
	return now;
}

static int rebuild_state(struct iso_controller *c, struct iso_error *err)
{
	struct iso_node_state *states = NULL;
	struct iso_allocation *live = NULL;
	int n_states = 0, n_live = 0, r;
	struct iso_alloc_filter f = {.live_only = true, .state = -1};

	r = c->store->ops->node_state_list(c->store, &states, &n_states, err);
	if (r < 0)
		return r;
	for (int i = 0; i < n_states; i++) {
		int idx = iso_cluster_state_node_index(&c->cs, states[i].name);
		if (idx >= 0)
			c->cs.sched[idx] = states[i].sched;
		c->cs.version++;
	}
	free(states);

	r = c->store->ops->alloc_list(c->store, &f, &live, &n_live, err);
	if (r < 0)
		return r;
	for (int i = 0; i < n_live; i++)
		if (live[i].created_ms > c->last_created_ms)
			c->last_created_ms = live[i].created_ms;
	for (int i = 0; i < n_live && r == 0; i++)
		r = reconcile_one(c, &live[i]);
	if (r == 0)
		prime_engine(c);
	iso_allocations_free(live, n_live);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "could not reconcile allocations; see the log");
	return 0;
}

int iso_controller_open(const struct iso_controller_params *params, struct iso_controller **out,
                        struct iso_error *err)
{
	_cleanup_(iso_controller_freep) struct iso_controller *c = NULL;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->inv = params->inv;
	c->store = params->store;
	c->placer = params->placer;
	if (params->group_commit && c->store->ops->set_group_commit && c->store->ops->sync) {
		r = c->store->ops->set_group_commit(c->store, true, err);
		if (r < 0)
			return r;
		c->group_commit = true;
	}
	r = iso_cluster_state_init(&c->cs, c->inv);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	/* The log is checked before anything can add to it. */
	r = ctl_audit_open(c, params->state_dir, params->audit_keys, params->accept_audit_break,
	                   err);
	if (r < 0)
		return r;
	struct ctl_event start = {
	    .action = "daemon.start",
	    .kind = "daemon",
	    .id = c->inv->cluster_name,
	    .details = json_pack("{s:s, s:s, s:i}", "version", ISO_VERSION, "placement",
	                         c->placer->name, "nodes", c->inv->n_nodes),
	};
	ctl_record(c, NULL, &start, ISO_AUDIT_SUCCESS, NULL);
	r = ctl_fabric_open(c, params->state_dir, err);
	if (r < 0)
		return r;
	c->fabric_async = ctl_fabric_partitioned(c) && !ctl_fabric_driver_sync(c);
	c->agent_gate = !params->no_agents;
	c->provision_ms =
	    1000LL * (params->provisioning_timeout_s > 0 ? params->provisioning_timeout_s : 300);
	c->limits = params->tenant_limits;
	if (c->limits.max_pending <= 0)
		c->limits.max_pending = ISO_DEFAULT_MAX_PENDING;
	if (c->limits.max_live <= 0)
		c->limits.max_live = ISO_DEFAULT_MAX_LIVE;
	r = ctl_auth_cache_open(c, err);
	if (r == 0)
		r = ctl_uring_open(c, err);
	if (r == 0)
		r = ctl_agents_open(c, params, err);
	if (r == 0)
		r = rebuild_state(c, err);
	if (r == 0)
		r = ctl_costs_open(c, err);
	if (r == 0)
		r = ctl_queue_open(c, err);
	if (r == 0)
		r = ctl_preempt_open(c, params, err);
	if (r == 0)
		r = ctl_rates_open(c, &params->tenant_rates, err);
	if (r == 0)
		r = ctl_tenancy_open(c, params, err);
	if (r == 0)
		r = ctl_neutron_open(c, err);
	if (r == 0)
		r = ctl_fabric_resync(c, err);
	if (r == 0)
		r = ctl_faults_reapply(c, err);
	if (r == 0)
		r = ctl_audit_sign_now(c, err); /* the start and any reconciling, signed */
	if (r < 0)
		return r;
	ctl_place_pending(c);
	*out = ISO_TAKE(c);
	return 0;
}

void iso_controller_settle(struct iso_controller *c)
{
	/* Whatever changed in this turn is committed or undone by now: the node
	 * agents' documents catch up before the loop waits again. */
	ctl_agents_settle(c);
}

bool iso_controller_unsynced(const struct iso_controller *c)
{
	return c->unsynced;
}

int iso_controller_sync(struct iso_controller *c, struct iso_error *err)
{
	int r;

	if (c->sync_failed)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: an earlier sync failed; durability is unknown");
	if (!c->unsynced)
		return 0;
	r = c->store->ops->sync(c->store, err);
	if (r < 0) {
		/* After a failed fsync the kernel may have dropped the dirty pages
		 * and a later fsync can succeed without them (PostgreSQL's
		 * "fsyncgate"): no later sync is trusted either. */
		c->sync_failed = true;
		return r;
	}
	c->unsynced = false;
	c->syncs++;
	return 0;
}

void iso_controller_commit_stats(const struct iso_controller *c, bool *group_commit,
                                 uint64_t *commits, uint64_t *syncs)
{
	*group_commit = c->group_commit;
	*commits = c->commits;
	*syncs = c->syncs;
}

void iso_controller_tick(struct iso_controller *c)
{
	ctl_audit_failures_flush(c, false);
	ctl_fabric_tick(c);
	ctl_sm_tick(c, false);
	ctl_preempt_tick(c);
	ctl_agents_tick(c);
	ctl_alloc_gate_pass(c);
	/* The last pass stopped at its depth: try again, at most once a second
	 * (a full cluster with a long queue must not cost a pass every tick). */
	if (c->queue_more && iso_now_ms() - c->queue_pass_ms >= 1000)
		ctl_place_pending(c);
}

void iso_controller_shutdown(struct iso_controller *c)
{
	struct iso_error err = {0};
	struct ctl_event stop = {
	    .action = "daemon.stop", .kind = "daemon", .id = c->inv->cluster_name};
	int r;

	ctl_audit_failures_flush(c, true); /* counted failures are not lost at a clean stop */
	r = ctl_tx_begin(c, &err);

	if (r == 0) {
		ctl_emit(c, NULL, &stop);
		r = ctl_audit_flush(c, true, &err); /* a final head over everything */
	}
	r = ctl_tx_end(c, r, &err);
	if (r == 0)
		r = iso_controller_sync(c, &err);
	if (r < 0)
		iso_log(ISO_LOG_ERR, "audit_stop_failed", "error=\"%s\"", err.message);
}

void iso_controller_free(struct iso_controller *c)
{
	if (!c)
		return;
	ctl_sm_close(c);
	ctl_fabric_close(c);
	ctl_neutron_close(c);
	ctl_tenancy_close(c);
	ctl_queue_close(c);
	ctl_preempt_close(c);
	ctl_rates_close(c);
	ctl_auth_cache_close(c);
	ctl_costs_free(c);
	ctl_agents_close(c);
	ctl_uring_close(c);
	ctl_audit_close(c);
	iso_cluster_state_free(&c->cs);
	free(c);
}

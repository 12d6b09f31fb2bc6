/* nodes.c: node scheduling state (cordon, drain, uncordon), the GPU view and
 * aggregate capacity. Nodes and GPUs are infrastructure: only cluster-wide
 * roles see them; tenants get totals without a per-tenant breakdown. */
#include <errno.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

int iso_controller_node_set_sched(struct iso_controller *c, const struct iso_principal *p,
                                  const char *node, enum iso_node_sched sched,
                                  struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	struct iso_node_state ns = {.sched = sched};
	int idx, r;

	r = iso_controller_check_infra_read(p, err);
	if (r < 0)
		return r;
	idx = iso_cluster_state_node_index(&c->cs, node);
	if (idx < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "node \"%s\" not found", node);
	/* the audit action and the right it needs */
	static const char *const actions[] = {[ISO_NODE_SCHEDULABLE] = "node.uncordon",
	                                      [ISO_NODE_CORDONED] = "node.cordon",
	                                      [ISO_NODE_DRAINING] = "node.drain"};
	r = ctl_authorize(p, (unsigned)sched < ISO_ARRAY_SIZE(actions) ? actions[sched] : NULL,
	                  NULL, err);
	if (r < 0)
		return r;
	iso_strlcpy(ns.name, node, sizeof(ns.name));
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = ops->node_state_set(c->store, &ns, err);
	if (r == 0) {
		ctl_emit(
		    c, p,
		    &(struct ctl_event){.action = actions[sched],
		                        .kind = "node",
		                        .id = node,
		                        .details = json_pack("{s:s, s:s}", "from",
		                                             iso_node_sched_name(c->cs.sched[idx]),
		                                             "to", iso_node_sched_name(sched))});
	}
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	enum iso_node_sched before = c->cs.sched[idx];
	c->cs.sched[idx] = sched;
	c->cs.version++;
	iso_log(ISO_LOG_INFO, "node_state", "request_id=%s by=%s node=%s from=%s to=%s",
	        p->request_id, p->token_id, node, iso_node_sched_name(before),
	        iso_node_sched_name(sched));
	if (sched == ISO_NODE_SCHEDULABLE && before != sched)
		ctl_place_pending(c);
	return 0;
}

int iso_controller_live_allocations(struct iso_controller *c, const struct iso_principal *p,
                                    struct iso_allocation **out, int *n, struct iso_error *err)
{
	struct iso_alloc_filter f = {.live_only = true, .state = -1};
	int r = iso_controller_check_infra_read(p, err);

	if (r < 0)
		return r;
	return c->store->ops->alloc_list(c->store, &f, out, n, err);
}

/* Counts capacity over every node, as `viewer` (0: a tenant holding
 * nothing) sees it: O(nodes x GPUs). */
static void count_capacity(const struct iso_controller *c, int64_t viewer,
                           struct iso_capacity *out)
{
	const struct iso_inventory *inv = c->inv;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < inv->n_nodes; i++) {
		const struct iso_node *node = &inv->nodes[i];
		const struct iso_node_usage *u = &c->cs.usage[i];
		/* Free capacity counts only where new work may land. */
		bool open = iso_cluster_state_node_open(&c->cs, i) &&
		            iso_cluster_state_open_to(&c->cs, i, -1, viewer);

		out->nodes++;
		out->schedulable_nodes += open;
		out->cpus += node->cpus;
		out->memory_mib += node->memory_mib;
		if (open) {
			out->cpus_free += node->cpus - u->cpus_used;
			out->memory_mib_free += node->memory_mib - u->memory_mib_used;
		}
		for (int g = 0; g < node->n_gpus; g++) {
			const struct iso_gpu *gpu = &node->gpus[g];
			const struct iso_gpu_occupancy *o = &u->gpus[g];
			bool untouched = !o->whole && o->free_mask == iso_mig_full_mask(gpu->model);

			out->gpus++;
			bool gpu_open = open && iso_cluster_state_open_to(&c->cs, i, g, viewer);

			out->gpus_free += gpu_open && untouched;
			if (!gpu->mig_enabled)
				continue;
			out->memory_slices += gpu->model->memory_slices;
			out->compute_slices += gpu->model->compute_slices;
			if (gpu_open) {
				out->memory_slices_free += __builtin_popcount(o->free_mask);
				out->compute_slices_free +=
				    o->whole ? 0 : gpu->model->compute_slices - o->compute_used;
			}
		}
	}
}

void iso_controller_capacity(struct iso_controller *c, const struct iso_principal *p,
                             struct iso_capacity *out)
{
	/* Free is what the viewer can still get: a node, rack or GPU another
	 * tenant holds exclusively is not free to it (cluster roles see what a
	 * tenant holding nothing could get). */
	int64_t viewer = p && ctl_scope_of(p, "capacity.read") != CTL_SCOPE_ALL ? p->tenant_id : 0;
	int exclusive = 0, pending, live;

	/* A tenant that holds nothing exclusively sees what one holding nothing
	 * sees: one count per change of the cluster state, not per request. */
	if (viewer) {
		int acct = iso_tenancy_find(ctl_tenancy_tree(c), p->tenant);
		ctl_queue_tenant_counts(c, acct, &pending, &live, &exclusive);
	}
	if (exclusive > 0) {
		count_capacity(c, viewer, out);
		return;
	}
	if (c->capacity_version != c->cs.version + 1) {
		count_capacity(c, 0, &c->capacity);
		c->capacity_version = c->cs.version + 1; /* +1: 0 means never counted */
	}
	*out = c->capacity;
}

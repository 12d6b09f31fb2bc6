/* first_fit.c: the plain baseline placement policy. First-fit: nodes in
 * inventory order, GPUs in index order, the lowest allowed MIG start. It
 * knows nothing of fragmentation on purpose; the geometry-aware policies are
 * measured against it. It obeys the same hard rules as every policy: cordons,
 * pools, cpus and memory, the fabric's VF rule and per-request constraints.
 * Its cost per member grows with the number of nodes it passes over. */
#include <errno.h>
#include <string.h>

#include "sched/internal.h"

#define FF_GPUS_MAX 256

/* Finds the GPUs for member `k` on node `ni` without changing anything and
 * writes shape.gpu_count slots to `out`. True when the whole member fits. */
static bool fit_member(const struct iso_cluster_state *cs, int ni, const struct iso_allocation *a,
                       int k, int *order, struct iso_slot *out)
{
	const struct iso_shape *shape = &a->shape;
	const struct iso_node *node = &cs->inv->nodes[ni];
	const struct iso_node_usage *u = &cs->usage[ni];
	int n = 0;

	if (!iso_cluster_state_node_open(cs, ni) || !iso_sched_node_in_pool(node, shape))
		return false;
	if ((int64_t)u->cpus_used + shape->cpus > node->cpus ||
	    u->memory_mib_used + shape->memory_mib > node->memory_mib)
		return false;
	if (!iso_place_fabric_allows(cs, ni, a->tenant_id) || !iso_place_node_allowed(cs, ni))
		return false;
	if (shape->gpu_count > node->n_gpus * ISO_MIG_MAX_SLICES)
		return false;
	iso_sched_gpu_order(node, order);
	for (int t = 0; t < node->n_gpus && n < shape->gpu_count; t++) {
		const struct iso_gpu *g = &node->gpus[order[t]];
		const struct iso_gpu_occupancy *o = &u->gpus[order[t]];
		const struct iso_mig_profile *p;
		struct iso_gpu_occupancy scratch;
		int start;

		if (!iso_place_gpu_allowed(cs, ni, order[t]))
			continue;
		if (shape->whole) {
			if (!iso_sched_gpu_model_ok(g, shape) ||
			    !iso_gpu_occupancy_empty(g->model, o))
				continue;
			out[n++] = (struct iso_slot){.member = k,
			                             .gpu = g->index,
			                             .whole = true,
			                             .start = 0,
			                             .width = g->model->memory_slices};
			continue;
		}
		p = iso_sched_gpu_profile(g, shape);
		if (!p)
			continue;
		scratch = *o;
		while (n < shape->gpu_count &&
		       (start = iso_mig_first_start(g->model, &scratch, p)) >= 0) {
			iso_mig_take(g->model, &scratch, p, start);
			out[n] = (struct iso_slot){
			    .member = k, .gpu = g->index, .start = start, .width = p->width};
			iso_strlcpy(out[n].profile, p->name, sizeof(out[n].profile));
			n++;
		}
	}
	return n == shape->gpu_count;
}

int iso_sched_first_fit_choose(void *ctx, struct iso_cluster_state *cs,
                               const struct iso_allocation *a, int k, struct iso_slot *out)
{
	int order[FF_GPUS_MAX];
	int pin = iso_sched_member_pin(cs);

	if (pin >= 0) /* a pinned member: its node or nothing, without the walk */
		return cs->inv->nodes[pin].n_gpus <= FF_GPUS_MAX &&
		               fit_member(cs, pin, a, k, order, out)
		           ? pin
		           : -1;
	for (int i = 0; i < cs->inv->n_nodes; i++) {
		if (cs->inv->nodes[i].n_gpus > FF_GPUS_MAX)
			continue; /* the inventory loader allows far fewer */
		if (fit_member(cs, i, a, k, order, out))
			return i;
	}
	return -1;
}

static int place(const struct iso_placer *self, struct iso_cluster_state *cs,
                 struct iso_allocation *a, int want, struct iso_error *err)
{
	return iso_sched_place(cs, a, want, iso_sched_first_fit_choose, NULL, err);
}

const struct iso_placer iso_placer_first_fit = {.name = "first-fit", .place = place};

/* first_fit.c: the plain baseline placement policy, and the table of
 * policies. First-fit: nodes in inventory order, GPUs in index order, the
 * lowest allowed MIG start. It knows nothing of fragmentation on purpose; the
 * geometry-aware policies are measured against it. */
#include <errno.h>
#include <string.h>

#include "sched/internal.h"

#define PLACE_GPU_COUNT_MAX 64

/* Positions in node->gpus sorted by device index (the inventory does not
 * promise its GPUs are listed in index order). */
static void gpu_order(const struct iso_node *node, int *order)
{
	for (int j = 0; j < node->n_gpus; j++) {
		int t = j;
		while (t > 0 && node->gpus[order[t - 1]].index > node->gpus[j].index) {
			order[t] = order[t - 1];
			t--;
		}
		order[t] = j;
	}
}

/* Finds the GPUs for member `k` on node `ni` without changing anything and
 * writes shape.gpu_count slots to `out`. True when the whole member fits. */
static bool fit_member(const struct iso_cluster_state *cs, int ni, const struct iso_shape *shape,
                       int k, int *order, struct iso_slot *out)
{
	const struct iso_node *node = &cs->inv->nodes[ni];
	const struct iso_node_usage *u = &cs->usage[ni];
	int n = 0;

	if (cs->sched[ni] != ISO_NODE_SCHEDULABLE || !iso_sched_node_in_pool(node, shape))
		return false;
	if ((int64_t)u->cpus_used + shape->cpus > node->cpus ||
	    u->memory_mib_used + shape->memory_mib > node->memory_mib)
		return false;
	gpu_order(node, order);
	for (int t = 0; t < node->n_gpus && n < shape->gpu_count; t++) {
		const struct iso_gpu *g = &node->gpus[order[t]];
		const struct iso_gpu_occupancy *o = &u->gpus[order[t]];
		const struct iso_mig_profile *p;
		struct iso_gpu_occupancy scratch;
		int start;

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

static int no_fit(const struct iso_allocation *a, int k, int want, struct iso_error *err)
{
	const struct iso_shape *s = &a->shape;
	char gpus[96] = "";
	char pool[ISO_NAME_MAX + 16] = "";

	if (s->gpu_count > 0)
		snprintf(gpus, sizeof(gpus), ", %d free %s%s%s", s->gpu_count,
		         s->whole ? "whole " : "", s->whole ? "" : s->profile,
		         s->whole ? (s->gpu_count == 1 ? "GPU" : "GPUs") : " instances");
	if (s->gpu_model[0])
		snprintf(gpus + strlen(gpus), sizeof(gpus) - strlen(gpus), " of %s", s->gpu_model);
	if (s->pool[0])
		snprintf(pool, sizeof(pool), " in pool %s", s->pool);
	return iso_error_set(err, ISO_E_NO_CAPACITY, NULL,
	                     "member %d of %d does not fit: no schedulable node%s has %d cpus, "
	                     "%lld MiB memory%s free",
	                     k, want, pool, s->cpus, (long long)s->memory_mib, gpus);
}

static int place(const struct iso_placer *self, struct iso_cluster_state *cs,
                 struct iso_allocation *a, int want,
                 struct iso_error *err)
{
	const struct iso_shape *shape = &a->shape;
	const int old_members = a->n_members, old_slots = a->n_slots;
	struct iso_allocation tmp = *a;
	_cleanup_free_ int *order = NULL;
	int max_gpus = 1, r = 0;
	size_t n_slots_max;

	if (want < old_members || old_members < 0 || old_slots < 0)
		return iso_error_set(err, ISO_E_INVALID, "members",
		                     "cannot place %d members: %d already placed", want,
		                     old_members);
	if (shape->gpu_count < 0 || shape->gpu_count > PLACE_GPU_COUNT_MAX || shape->cpus < 0 ||
	    shape->memory_mib < 0)
		return iso_error_set(err, ISO_E_INVALID, NULL, "invalid shape");
	if (want == old_members)
		return 0;

	for (int i = 0; i < cs->inv->n_nodes; i++)
		if (cs->inv->nodes[i].n_gpus > max_gpus)
			max_gpus = cs->inv->nodes[i].n_gpus;
	n_slots_max = (size_t)old_slots + (size_t)(want - old_members) * (size_t)shape->gpu_count;
	if (n_slots_max > INT32_MAX)
		return iso_error_set(err, ISO_E_INVALID, "members", "too many GPUs requested");
	order = calloc((size_t)max_gpus, sizeof(*order));
	tmp.placed = calloc((size_t)want, sizeof(*tmp.placed));
	tmp.slots = calloc(n_slots_max ? n_slots_max : 1, sizeof(*tmp.slots));
	if (!order || !tmp.placed || !tmp.slots) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		goto fail;
	}
	if (old_members)
		memcpy(tmp.placed, a->placed, (size_t)old_members * sizeof(*tmp.placed));
	if (old_slots)
		memcpy(tmp.slots, a->slots, (size_t)old_slots * sizeof(*tmp.slots));

	for (int k = old_members; k < want; k++) {
		bool placed = false;

		for (int i = 0; i < cs->inv->n_nodes && !placed; i++) {
			if (!fit_member(cs, i, shape, k, order, &tmp.slots[tmp.n_slots]))
				continue;
			tmp.placed[k].index = k;
			iso_strlcpy(tmp.placed[k].node, cs->inv->nodes[i].name,
			            sizeof(tmp.placed[k].node));
			tmp.n_members = k + 1;
			tmp.n_slots += shape->gpu_count;
			r = iso_cluster_state_take_members(cs, &tmp, k, err);
			if (r < 0) {
				/* The search and take disagree: a bug, not lack of room. */
				tmp.n_members = k;
				tmp.n_slots -= shape->gpu_count;
				iso_log(ISO_LOG_ERR, "sched.take_failed", "alloc=%s node=%s", a->id,
				        cs->inv->nodes[i].name);
				goto fail;
			}
			placed = true;
		}
		if (!placed) {
			r = no_fit(a, k, want, err);
			goto fail;
		}
	}

	free(a->placed);
	free(a->slots);
	a->placed = tmp.placed;
	a->slots = tmp.slots;
	a->n_members = tmp.n_members;
	a->n_slots = tmp.n_slots;
	return 0;

fail:
	if (tmp.n_members > old_members)
		iso_cluster_state_give_members(cs, &tmp, old_members);
	free(tmp.placed);
	free(tmp.slots);
	return r;
}

const struct iso_placer iso_placer_first_fit = {.name = "first-fit", .place = place};

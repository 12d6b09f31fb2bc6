/* place.c: the frame that every placement policy's place() shares, so that
 * the all-or-nothing contract of struct iso_placer is written once: check
 * the request, choose one member at a time with the policy's function, take
 * each member in the cluster state before choosing the next, and on failure
 * give back everything and leave the allocation exactly as it was. */
#include <errno.h>
#include <string.h>

#include "sched/index.h"

#define PLACE_GPU_COUNT_MAX 64

void iso_sched_gpu_order(const struct iso_node *node, int *order)
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
	                     "%lld MiB memory%s free (and a fabric port open to this tenant)",
	                     k, want, pool, s->cpus, (long long)s->memory_mib, gpus);
}

static int place_members(struct iso_cluster_state *cs, struct iso_allocation *a, int want,
                         iso_sched_choose_fn choose, void *ctx, struct iso_error *err)
{
	const struct iso_shape *shape = &a->shape;
	const int old_members = a->n_members, old_slots = a->n_slots;
	struct iso_allocation tmp = *a;
	int r = 0;
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

	n_slots_max = (size_t)old_slots + (size_t)(want - old_members) * (size_t)shape->gpu_count;
	if (n_slots_max > INT32_MAX)
		return iso_error_set(err, ISO_E_INVALID, "members", "too many GPUs requested");
	tmp.placed = calloc((size_t)want, sizeof(*tmp.placed));
	tmp.slots = calloc(n_slots_max ? n_slots_max : 1, sizeof(*tmp.slots));
	if (!tmp.placed || !tmp.slots) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		goto fail;
	}
	if (old_members)
		memcpy(tmp.placed, a->placed, (size_t)old_members * sizeof(*tmp.placed));
	if (old_slots)
		memcpy(tmp.slots, a->slots, (size_t)old_slots * sizeof(*tmp.slots));

	for (int k = old_members; k < want; k++) {
		int ni = choose(ctx, cs, a, k, &tmp.slots[tmp.n_slots]);

		if (ni < 0) {
			r = no_fit(a, k, want, err);
			goto fail;
		}
		tmp.placed[k].index = k;
		iso_strlcpy(tmp.placed[k].node, cs->inv->nodes[ni].name,
		            sizeof(tmp.placed[k].node));
		tmp.n_members = k + 1;
		tmp.n_slots += shape->gpu_count;
		r = iso_cluster_state_take_members(cs, &tmp, k, err);
		if (r < 0) {
			/* The search and take disagree: a bug, not lack of room. */
			tmp.n_members = k;
			tmp.n_slots -= shape->gpu_count;
			iso_log(ISO_LOG_ERR, "sched.take_failed", "alloc=%s node=%s", a->id,
			        cs->inv->nodes[ni].name);
			goto fail;
		}
		ix_request_member_placed(cs, &tmp, k);
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

/* The request's isolation and spreading hold for the whole placement
 * (index.h: ix_request_*). */
int iso_sched_place(struct iso_cluster_state *cs, struct iso_allocation *a, int want,
                    iso_sched_choose_fn choose, void *ctx, struct iso_error *err)
{
	int r;

	ix_request_begin(cs, a);
	r = place_members(cs, a, want, choose, ctx, err);
	ix_request_end(cs);
	return r;
}

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

/* Why member k of `a` does not fit now on node ni, the node it is pinned
 * to (member_nodes): the first rule it breaks there, in the order every
 * policy checks them. Only cluster roles pin, so naming the node's state is
 * no leak. */
static int pinned_no_fit(const struct iso_cluster_state *cs, const struct iso_allocation *a,
                         int k, int ni, struct iso_error *err)
{
	const struct iso_shape *s = &a->shape;
	const struct iso_node *node = &cs->inv->nodes[ni];
	const struct iso_node_usage *u = &cs->usage[ni];
	char field[ISO_ERR_FIELD_MAX];

	snprintf(field, sizeof(field), "nodes[%d]", k);
#define NO_FIT(...) return iso_error_set(err, ISO_E_NO_CAPACITY, field, __VA_ARGS__)
	if (cs->sched[ni] != ISO_NODE_SCHEDULABLE)
		NO_FIT("member %d: node %s is %s and takes no new work", k, node->name,
		       iso_node_sched_name(cs->sched[ni]));
	if (cs->unreachable && cs->unreachable[ni])
		NO_FIT("member %d: node %s is unreachable (its agent is silent) and takes no new "
		       "work",
		       k, node->name);
	if (!iso_sched_node_in_pool(node, s))
		NO_FIT("member %d: node %s is in pool %s, not %s (pool)", k, node->name, node->pool,
		       s->pool);
	if ((int64_t)u->cpus_used + s->cpus > node->cpus)
		NO_FIT("member %d: node %s has %d of %d cpus free, the member needs %d (cpus)", k,
		       node->name, node->cpus - u->cpus_used, node->cpus, s->cpus);
	if (u->memory_mib_used + s->memory_mib > node->memory_mib)
		NO_FIT("member %d: node %s has %lld of %lld MiB memory free, the member needs "
		       "%lld (memory)",
		       k, node->name, (long long)(node->memory_mib - u->memory_mib_used),
		       (long long)node->memory_mib, (long long)s->memory_mib);
	if (!iso_place_fabric_allows(cs, ni, a->tenant_id))
		NO_FIT("member %d: node %s has no fabric port (VF) free for another tenant "
		       "(fabric)",
		       k, node->name);
	if (cs->index && !ix_request_node_ok(cs->index, ni))
		NO_FIT("member %d: node %s is closed to this request by isolation or spread "
		       "(exclusive work there, or the request's own class or spread)",
		       k, node->name);
	if (!iso_place_node_allowed(cs, ni))
		NO_FIT("member %d: node %s is excluded by the placement's constraints", k,
		       node->name);
	if (s->whole)
		NO_FIT("member %d: no %d free whole GPU%s%s%s on %s (GPUs)", k, s->gpu_count,
		       s->gpu_count == 1 ? "" : "s", s->gpu_model[0] ? " of " : "", s->gpu_model,
		       node->name);
	if (s->gpu_count > 1)
		NO_FIT("member %d: no %d free %s placements on %s (MIG geometry)", k, s->gpu_count,
		       s->profile, node->name);
	if (s->gpu_count == 1)
		NO_FIT("member %d: no free %s placement on %s (MIG geometry)", k, s->profile,
		       node->name);
	NO_FIT("member %d: does not fit on node %s now", k, node->name);
#undef NO_FIT
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
		int ni, pin;

		ix_constraints_pin(cs, k);
		pin = iso_sched_member_pin(cs);
		ni = choose(ctx, cs, a, k, &tmp.slots[tmp.n_slots]);
		if (ni < 0) {
			r = pin >= 0 ? pinned_no_fit(cs, a, k, pin, err) : no_fit(a, k, want, err);
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
	ix_constraints_pin(cs, -1);
	ix_request_end(cs);
	return r;
}

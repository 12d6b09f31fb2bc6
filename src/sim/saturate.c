/* saturate.c: FGD's method (Weng et al., ATC'23, section 6): pods drawn from
 * the trace arrive one after another and never leave; each is placed or, when
 * the policy finds no room, skipped for good. Measured against the offered
 * demand (compute slices asked for so far, a whole GPU counting all of the
 * model's compute slices) at every 1% of the cluster's capacity up to the
 * configured maximum: the share of compute and of memory slices allocated. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim/internal.h"

static int place_failed(const struct iso_placer *pl, const struct iso_sim_pod *pod, int r,
                        const struct iso_error *e, struct iso_error *err)
{
	return iso_error_set(err, r == -EIO ? ISO_E_INTERNAL : e->code, e->field,
	                     "policy %s, pod %s (line %d): %s", pl->name, pod->name, pod->line,
	                     e->message);
}

/* Where a placed arrival went (its one member). */
static struct iso_sim_place place_of(const struct iso_cluster_state *cs,
                                     const struct iso_allocation *a)
{
	struct iso_sim_place p = {.node = iso_cluster_state_node_index(cs, a->placed[0].node),
	                          .start = -1};

	for (int k = 0; k < a->n_slots; k++) {
		p.gpus |= UINT64_C(1) << a->slots[k].gpu;
		if (!a->slots[k].whole)
			p.start = a->slots[k].start;
	}
	return p;
}

int sim_run_saturate(struct iso_sim *s, const struct sim_policy *p, struct iso_sim_result *res,
                     struct iso_error *err)
{
	const struct iso_placer *pl = p->use;
	static const struct iso_sim_place left_out = {.node = -1, .start = -1};
	struct iso_cluster_state cs;
	const int max_pct = s->cfg.max_demand_pct;
	int64_t offered = 0, held_c, held_m;
	int next_pct = 1, r;

	if (s->cfg.record_places) {
		res->places = calloc((size_t)s->n_seq + 1, sizeof(*res->places));
		if (!res->places)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	r = sim_state_init(s, pl, &cs, err);
	if (r < 0)
		return r;
	res->unfit = s->unfit;
	res->requeue_share_at_100 = NAN;
	for (int q = 0; q < s->n_seq; q++) {
		const int i = s->seq[q];
		const struct iso_sim_request *req = &s->req[i];
		struct iso_allocation a;
		struct iso_error e = {0};

		const int64_t misses = sim_policy_misses(p);

		sim_alloc_init(&a, req, i);
		r = iso_placer_place(pl, &cs, &a, 1, &e);
		if (sim_policy_misses(p) > misses) {
			res->requeued++;
			res->requeues += sim_policy_misses(p) - misses;
		}
		if (res->places)
			res->places[q] = r == 0 ? place_of(&cs, &a) : left_out;
		iso_allocation_clear(&a); /* the cluster state keeps what it holds */
		if (r == 0) {
			res->placed++;
			res->alloc_compute += req->compute;
			res->alloc_memory += req->memory;
		} else if (r == -ENOSPC) {
			res->rejected++;
		} else {
			iso_cluster_state_free(&cs);
			return place_failed(pl, &s->trace->v[i], r, &e, err);
		}
		res->pods++;
		if (req->shape.gpu_count == 0)
			res->cpu_only++;
		offered += req->compute;
		while (next_pct <= max_pct &&
		       offered * 100 >= (int64_t)next_pct * res->slices_total) {
			if (next_pct == 100)
				res->requeue_share_at_100 =
				    res->pods > res->cpu_only
				        ? (double)res->requeued /
				              (double)(res->pods - res->cpu_only)
				        : 0;
			res->curve[res->n_curve++] = (struct iso_sim_point){
			    .offered_pct = next_pct,
			    .alloc_ratio = (double)res->alloc_compute / (double)res->slices_total,
			    .mem_alloc_ratio =
			        (double)res->alloc_memory / (double)res->mem_slices_total};
			next_pct++;
		}
	}
	sim_held_slices(&cs, &held_c, &held_m);
	iso_cluster_state_free(&cs);
	if (held_c != res->alloc_compute || held_m != res->alloc_memory)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "policy %s: the cluster holds %lld compute and %lld memory "
		                     "slices, the placements add up to %lld and %lld",
		                     pl->name, (long long)held_c, (long long)held_m,
		                     (long long)res->alloc_compute, (long long)res->alloc_memory);
	res->alloc_ratio_at_100 = res->alloc_ratio_at_130 = NAN;
	res->mem_alloc_ratio_at_100 = res->mem_alloc_ratio_at_130 = NAN;
	for (int k = 0; k < res->n_curve; k++) {
		if (res->curve[k].offered_pct == 100) {
			res->alloc_ratio_at_100 = res->curve[k].alloc_ratio;
			res->mem_alloc_ratio_at_100 = res->curve[k].mem_alloc_ratio;
		}
		if (res->curve[k].offered_pct == 130) {
			res->alloc_ratio_at_130 = res->curve[k].alloc_ratio;
			res->mem_alloc_ratio_at_130 = res->curve[k].mem_alloc_ratio;
		}
	}
	return 0;
}

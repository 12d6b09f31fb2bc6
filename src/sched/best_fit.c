/* best_fit.c: the best-fit placement policy, and the scored search that
 * best-fit, FGD and the static layout policy share. A policy is then only a
 * score per candidate (GPU, start); the search owns the bookkeeping every
 * policy must get right: node eligibility, all-or-nothing taking through the
 * cluster state, and an allocation left exactly as it was on -ENOSPC. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "sched/internal.h"

#define PLACE_GPU_COUNT_MAX 64

/* One member's search: the scorer, the request, and scratch space. */
struct search {
	const struct iso_placer_scorer *sc;
	const struct iso_cluster_state *cs;
	const struct iso_allocation *a;
	int *order;                        /* GPU positions by device index */
	struct iso_gpu_occupancy *scratch; /* the node's GPUs, this member's picks applied */
	struct iso_slot *slots;            /* the member's instances on the node */
	double total;                      /* their summed score */
	/* The shape's profile per GPU model, looked up once per call. */
	int n_prof;
	struct {
		const struct iso_gpu_model *m;
		const struct iso_mig_profile *p;
	} prof[16];
};

/* iso_sched_gpu_profile() with the name lookup cached per model. */
static const struct iso_mig_profile *gpu_profile(struct search *s, const struct iso_gpu *g)
{
	const struct iso_shape *shape = &s->a->shape;
	const struct iso_mig_profile *p;

	if (shape->whole || !g->mig_enabled || !iso_sched_gpu_model_ok(g, shape))
		return NULL;
	for (int i = 0; i < s->n_prof; i++)
		if (s->prof[i].m == g->model)
			return s->prof[i].p;
	p = iso_mig_profile_find(g->model, shape->profile);
	if (s->n_prof < (int)ISO_ARRAY_SIZE(s->prof)) {
		s->prof[s->n_prof].m = g->model;
		s->prof[s->n_prof].p = p;
		s->n_prof++;
	}
	return p;
}

static void scratch_take(const struct iso_gpu *g, struct iso_gpu_occupancy *o,
                         const struct iso_mig_profile *p, int start)
{
	if (p) {
		iso_mig_take(g->model, o, p, start);
		return;
	}
	o->whole = true;
	o->free_mask = 0;
	o->compute_used = g->model->compute_slices;
}

/* A cheap necessary condition, so that full scans skip full nodes before
 * scoring anything: enough empty GPUs, or enough free compute slices on
 * GPUs that hold the profile. */
static bool node_may_fit(struct search *s, const struct iso_node *node)
{
	const struct iso_shape *shape = &s->a->shape;
	int n = 0;

	for (int j = 0; j < node->n_gpus && n < shape->gpu_count; j++) {
		const struct iso_gpu *g = &node->gpus[j];
		const struct iso_mig_profile *p;

		if (shape->whole) {
			n += iso_sched_gpu_model_ok(g, shape) &&
			     iso_gpu_occupancy_empty(g->model, &s->scratch[j]);
			continue;
		}
		p = gpu_profile(s, g);
		if (p && p->compute > 0)
			n += (g->model->compute_slices - s->scratch[j].compute_used) / p->compute;
		else if (p)
			n += shape->gpu_count;
	}
	return n >= shape->gpu_count;
}

/* The lowest-scoring candidate for one instance on node `ni`; false when
 * there is none. */
static bool pick_instance(struct search *s, int ni, int pick)
{
	const struct iso_placer_scorer *sc = s->sc;
	const struct iso_shape *shape = &s->a->shape;
	const struct iso_node *node = &s->cs->inv->nodes[ni];
	const struct iso_mig_profile *best_p = NULL;
	double best = INFINITY, v;
	int best_pos = -1, best_start = 0;
	struct iso_slot *slot = &s->slots[pick];

	if (sc->prepare && !sc->prepare(sc->ctx, s->cs, ni, s->scratch, s->a, pick))
		return false;
	for (int t = 0; t < node->n_gpus; t++) {
		const int pos = s->order[t];
		const struct iso_gpu *g = &node->gpus[pos];
		const struct iso_gpu_occupancy *o = &s->scratch[pos];
		const struct iso_mig_profile *p;

		if (!iso_place_gpu_allowed(s->cs, ni, pos))
			continue;
		if (shape->whole) {
			if (!iso_sched_gpu_model_ok(g, shape) ||
			    !iso_gpu_occupancy_empty(g->model, o) ||
			    !sc->score(sc->ctx, s->cs, ni, s->scratch, pos, NULL, 0, &v))
				continue;
			if (best_pos < 0 || v < best) {
				best = v;
				best_pos = pos;
			}
			if (sc->first_wins)
				break;
			continue;
		}
		p = gpu_profile(s, g);
		if (!p || g->model->compute_slices - o->compute_used < p->compute)
			continue;
		for (int st = 0; st < g->model->memory_slices; st++) {
			if (!iso_mig_fits_at(g->model, o, p, st) ||
			    !sc->score(sc->ctx, s->cs, ni, s->scratch, pos, p, st, &v))
				continue;
			if (best_pos < 0 || v < best) {
				best = v;
				best_pos = pos;
				best_start = st;
				best_p = p;
			}
			if (sc->first_wins)
				break;
		}
		if (sc->first_wins && best_pos >= 0)
			break;
	}
	if (best_pos < 0)
		return false;
	scratch_take(&node->gpus[best_pos], &s->scratch[best_pos], best_p, best_start);
	s->total += best;
	*slot = (struct iso_slot){.member = 0, /* set by the caller */
	                          .gpu = node->gpus[best_pos].index,
	                          .whole = best_p == NULL,
	                          .start = best_p ? best_start : 0,
	                          .width = best_p ? best_p->width
	                                          : node->gpus[best_pos].model->memory_slices};
	if (best_p)
		iso_strlcpy(slot->profile, best_p->name, sizeof(slot->profile));
	return true;
}

/* Chooses the member's instances on node `ni` without changing the cluster
 * state: each instance in turn on the lowest-scoring candidate. Honours the
 * request's constraints and the fabric's tenant limit (sched.h). True when
 * all fit; s->slots and s->total then hold the choice. */
static bool fit_member(struct search *s, int ni, int k)
{
	const struct iso_cluster_state *cs = s->cs;
	const struct iso_shape *shape = &s->a->shape;
	const struct iso_node *node = &cs->inv->nodes[ni];
	const struct iso_node_usage *u = &cs->usage[ni];

	if (!iso_cluster_state_node_open(cs, ni) || !iso_sched_node_in_pool(node, shape) ||
	    !iso_place_node_allowed(cs, ni) || !iso_place_fabric_allows(cs, ni, s->a->tenant_id))
		return false;
	if ((int64_t)u->cpus_used + shape->cpus > node->cpus ||
	    u->memory_mib_used + shape->memory_mib > node->memory_mib)
		return false;
	s->total = 0;
	if (node->n_gpus)
		memcpy(s->scratch, u->gpus, (size_t)node->n_gpus * sizeof(*s->scratch));
	if (shape->gpu_count == 0) {
		if (s->sc->prepare && !s->sc->prepare(s->sc->ctx, cs, ni, s->scratch, s->a, 0))
			return false;
		return s->sc->score(s->sc->ctx, cs, ni, s->scratch, -1, NULL, 0, &s->total);
	}
	if (!node_may_fit(s, node))
		return false;
	iso_sched_gpu_order(node, s->order);
	for (int n = 0; n < shape->gpu_count; n++) {
		if (!pick_instance(s, ni, n))
			return false;
		s->slots[n].member = k;
	}
	return true;
}

/* The scored policies' choice: the node whose member fits at the lowest
 * total score (the first that fits when first_wins). */
static int scored_choose(void *ctx, struct iso_cluster_state *cs, const struct iso_allocation *a,
                         int k, struct iso_slot *out)
{
	struct search *s = ctx;
	const int gpus = a->shape.gpu_count;
	double best = INFINITY;
	int best_node = -1;

	for (int i = 0; i < cs->inv->n_nodes; i++) {
		if (!fit_member(s, i, k))
			continue;
		if (best_node >= 0 && !(s->total < best))
			continue;
		best = s->total;
		best_node = i;
		if (gpus)
			memcpy(out, s->slots, (size_t)gpus * sizeof(*out));
		if (s->sc->first_wins)
			break;
	}
	return best_node;
}

int iso_placer_place_scored(const struct iso_placer_scorer *sc, struct iso_cluster_state *cs,
                            struct iso_allocation *a, int want, struct iso_error *err)
{
	_cleanup_free_ int *order = NULL;
	_cleanup_free_ struct iso_gpu_occupancy *scratch = NULL;
	_cleanup_free_ struct iso_slot *cand = NULL;
	struct search s = {.sc = sc, .cs = cs, .a = a};
	int max_gpus = 1;

	if (a->shape.gpu_count < 0 || a->shape.gpu_count > PLACE_GPU_COUNT_MAX)
		return iso_error_set(err, ISO_E_INVALID, NULL, "invalid shape");
	for (int i = 0; i < cs->inv->n_nodes; i++)
		if (cs->inv->nodes[i].n_gpus > max_gpus)
			max_gpus = cs->inv->nodes[i].n_gpus;
	s.order = order = calloc((size_t)max_gpus, sizeof(*order));
	s.scratch = scratch = calloc((size_t)max_gpus, sizeof(*scratch));
	s.slots = cand = calloc((size_t)a->shape.gpu_count + 1, sizeof(*cand));
	if (!order || !scratch || !cand)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	/* The shared frame checks the request and keeps it all or nothing. */
	return iso_sched_place(cs, a, want, scored_choose, &s, err);
}

/* ---- best-fit ---- */

static int free_memory_slices(const struct iso_gpu_occupancy *o)
{
	return __builtin_popcount(o->free_mask);
}

static bool best_fit_score(void *ctx, const struct iso_cluster_state *cs, int node,
                           const struct iso_gpu_occupancy *gpus, int pos,
                           const struct iso_mig_profile *p, int start, double *out)
{
	int free_slices = 0;

	if (pos < 0) {
		*out = 0; /* no GPUs: the first node with room */
		return true;
	}
	if (p) {
		*out = free_memory_slices(&gpus[pos]);
		return true;
	}
	/* Whole GPUs: every empty GPU is alike, so the node decides. */
	for (int j = 0; j < cs->inv->nodes[node].n_gpus; j++)
		free_slices += free_memory_slices(&gpus[j]);
	*out = free_slices;
	return true;
}

static int best_fit_place(const struct iso_placer *self, struct iso_cluster_state *cs,
                          struct iso_allocation *a, int want, struct iso_error *err)
{
	const struct iso_placer_scorer sc = {.score = best_fit_score, .policy = self->name};

	return iso_placer_place_scored(&sc, cs, a, want, err);
}

const struct iso_placer iso_placer_best_fit = {.name = "best-fit", .place = best_fit_place};

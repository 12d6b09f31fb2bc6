/* isostack.c: the default placement policy: MIG-geometry-aware and
 * fragmentation-aware (docs/placement.md). A member's first MIG instance
 * goes where the expected fragmentation against the learned demand mix
 * falls most (mix.c); the candidates are read from the index's buckets in
 * score order, so a decision looks at O(MIG states x pools) bucket heads and
 * then at GPUs only until one's node passes the node checks (schedulable,
 * pool, cpus, memory, the fabric's VF rule, the request's constraints).
 * Whole GPUs go to the node with the fewest empty GPUs that still holds the
 * member (best fit keeps empty nodes for big jobs); CPU-only members prefer
 * nodes without GPUs, then nodes with the fewest empty GPUs.
 *
 * Completeness: every GPU that could hold the member is in some bucket that
 * the walk reaches, and a node is passed over only when it fails a hard
 * rule, so the engine refuses a member only when no node can hold it. */
#include <errno.h>
#include <string.h>

#include "sched/index.h"

/* Explicit allow-lists up to this many nodes are evaluated node by node;
 * larger ones use the bucket walk with O(1) membership checks. */
#define DIRECT_MAX 1024

/* The node term: a placement is charged for the GPU capacity it leaves
 * stranded on its node, i.e. free compute slices that the node's remaining
 * cores or memory cannot feed at the demand's learned cores (MiB) per slice.
 * The trace's 8-GPU nodes have fewer cores per slice than the demand brings,
 * its 2-GPU nodes many more: ignoring this strands a few percent of the
 * slices (docs/placement.md). NODE_WEIGHT converts slices to score units;
 * NODE_BUDGET bounds how many feasible nodes one decision scores, so a
 * decision's cost stays independent of the cluster's size. */
#define NODE_WEIGHT  1000000.0
#define NODE_BUDGET  32
#define EMPTY_WEIGHT 0.25 /* slices charged per empty GPU a whole member leaves beside it */

enum fill { FILL_OK, FILL_GPU, FILL_NODE };

/* One decision. */
struct req {
	struct iso_cluster_state *cs;
	struct iso_sched_index *ix;
	const struct iso_allocation *a;
	const struct iso_shape *shape;
	int k;
	struct iso_slot *out;
	uint32_t stamp;       /* ix_node.seen == stamp: rejected in this decision */
	int pool;             /* pool index; -1: any */
	const int32_t *pools; /* the pools to search, in order */
	int n_pools;
	bool constrained;
};

static uint32_t new_stamp(struct iso_sched_index *ix)
{
	if (++ix->decision == 0) {
		for (int i = 0; i < ix->n_nodes; i++)
			ix->nodes[i].seen = 0;
		ix->decision = 1;
	}
	return ix->decision;
}

/* The node-level hard rules, each O(1). */
static bool node_ok(const struct req *q, int ni)
{
	const struct iso_cluster_state *cs = q->cs;
	const struct iso_node *node = &cs->inv->nodes[ni];
	const struct iso_node_usage *u = &cs->usage[ni];

	if (!iso_cluster_state_node_open(cs, ni))
		return false;
	if (q->pool >= 0 && q->ix->nodes[ni].pool != q->pool)
		return false;
	if ((int64_t)u->cpus_used + q->shape->cpus > node->cpus ||
	    u->memory_mib_used + q->shape->memory_mib > node->memory_mib)
		return false;
	if (!ix_fabric_allows(q->ix, ni, q->a->tenant_id) || !ix_request_node_ok(q->ix, ni))
		return false;
	return !q->constrained || iso_place_node_allowed(cs, ni);
}

static bool gpu_ok(const struct req *q, int ni, int pos)
{
	if (!ix_request_gpu_ok(q->ix, q->ix->nodes[ni].gpu_base + pos))
		return false;
	return !q->constrained || iso_place_gpu_allowed(q->cs, ni, pos);
}

/* Free compute slices of the node's GPUs that MIG members could use. */
static int node_free_slices(const struct req *q, int ni)
{
	const struct iso_node *node = &q->cs->inv->nodes[ni];
	const struct iso_gpu_occupancy *o = q->cs->usage[ni].gpus;
	int f = 0;

	for (int g = 0; g < node->n_gpus; g++)
		if (node->gpus[g].model && !o[g].whole)
			f += node->gpus[g].model->compute_slices - o[g].compute_used;
	return f;
}

static double stranded(double f, double cpus, double mem, double per_cpu, double per_mem)
{
	double s = 0;

	if (per_cpu > 0 && f - cpus / per_cpu > s)
		s = f - cpus / per_cpu;
	if (per_mem > 0 && f - mem / per_mem > s)
		s = f - mem / per_mem;
	return s;
}

/* Score units by which placing `slices` compute slices of this member on
 * node `ni` changes the slices stranded there; never below -slices. */
static int64_t node_term(const struct req *q, int ni, int slices)
{
	const struct iso_sched_index *ix = q->ix;
	const struct iso_node *node = &q->cs->inv->nodes[ni];
	const struct iso_node_usage *u = &q->cs->usage[ni];
	double per_cpu, per_mem, f, c, m, before, after;

	if (ix->d_slices <= 0 || node->n_gpus == 0)
		return 0;
	per_cpu = ix->d_cpus / ix->d_slices;
	per_mem = ix->d_mem / ix->d_slices;
	f = node_free_slices(q, ni);
	c = node->cpus - u->cpus_used;
	m = (double)(node->memory_mib - u->memory_mib_used);
	before = stranded(f, c, m, per_cpu, per_mem);
	after = stranded(f - slices, c - q->shape->cpus, m - (double)q->shape->memory_mib, per_cpu,
	                 per_mem);
	return (int64_t)((after - before) * NODE_WEIGHT);
}

/* Cores the node keeps beyond what its free slices need after the
 * placement. Among equal scores the engine takes the node that keeps the
 * most: spreading the cores left over keeps room for the CPU-heavy members
 * still to come (on gpushare100 this is worth 0.1% of the slices). */
static int64_t node_surplus(const struct req *q, int ni, int slices)
{
	const struct iso_sched_index *ix = q->ix;
	const struct iso_node *node = &q->cs->inv->nodes[ni];
	double per_cpu = ix->d_slices > 0 ? ix->d_cpus / ix->d_slices : 0;

	return (int64_t)(node->cpus - q->cs->usage[ni].cpus_used - q->shape->cpus -
	                 per_cpu * (node_free_slices(q, ni) - slices));
}

/* The best feasible choice a decision has scored so far. */
struct pick {
	bool have;
	int64_t score;
	int free_after, empties, ni, pos, hint;
	int64_t surplus;
};

static bool pick_better(const struct pick *a, const struct pick *b)
{
	if (!b->have)
		return true;
	if (a->score != b->score)
		return a->score < b->score;
	if (a->free_after != b->free_after)
		return a->free_after < b->free_after;
	if (a->surplus != b->surplus)
		return a->surplus > b->surplus;
	return a->empties < b->empties;
}

/* The shape's profile on GPU `pos` of node `ni` as (engine model, profile
 * index), or NULL when that GPU cannot hold it. */
static const struct ix_engine_model *gpu_profile(const struct req *q, int ni, int pos, int *j)
{
	const struct iso_gpu *g = &q->cs->inv->nodes[ni].gpus[pos];
	const struct iso_mig_profile *p = iso_sched_gpu_profile(g, q->shape);
	int mi = q->ix->gpus[q->ix->nodes[ni].gpu_base + pos].model;

	if (!p || mi < 0)
		return NULL;
	*j = (int)(p - g->model->profiles);
	return q->ix->models[mi].eng;
}

static void mig_slot(const struct req *q, int n, const struct iso_gpu *g,
                     const struct iso_mig_profile *p, int start)
{
	struct iso_slot *s = &q->out[n];

	*s = (struct iso_slot){.member = q->k, .gpu = g->index, .start = start, .width = p->width};
	iso_strlcpy(s->profile, p->name, sizeof(s->profile));
}

/* Places the member's gpu_count instances on node `ni` in scratch, the first
 * on GPU `first` (at `hint` when it fits there), each further one where the
 * score is best. Writes the slots on success. */
static enum fill fill_node(const struct req *q, int ni, int first, int hint)
{
	const struct iso_node *node = &q->cs->inv->nodes[ni];
	struct iso_gpu_occupancy *occ = q->ix->scratch_occ;
	const struct ix_engine_model *em;
	const struct iso_gpu *g = &node->gpus[first];
	const struct iso_mig_profile *p;
	int j, s;

	em = gpu_profile(q, ni, first, &j);
	if (!em)
		return FILL_GPU;
	p = &g->model->profiles[j];
	occ[first] = q->cs->usage[ni].gpus[first];
	s = hint >= 0 && iso_mig_fits_at(g->model, &occ[first], p, hint)
	        ? hint
	        : eng_best_start(em, j, &occ[first], NULL);
	if (s < 0)
		return FILL_GPU;
	mig_slot(q, 0, g, p, s);
	if (q->shape->gpu_count == 1)
		return FILL_OK;

	memcpy(occ, q->cs->usage[ni].gpus, (size_t)node->n_gpus * sizeof(*occ));
	iso_mig_take(g->model, &occ[first], p, s);
	for (int n = 1; n < q->shape->gpu_count; n++) {
		int best_pos = -1, best_s = -1, best_free = 0, best_j = 0;
		int32_t best = INT32_MAX;

		for (int pos = 0; pos < node->n_gpus; pos++) {
			int32_t d;
			int jj, ss, free_after;
			const struct ix_engine_model *e2 = gpu_profile(q, ni, pos, &jj);

			if (!e2 || !gpu_ok(q, ni, pos))
				continue;
			ss = eng_best_start(e2, jj, &occ[pos], &d);
			if (ss < 0)
				continue;
			free_after = __builtin_popcount(occ[pos].free_mask) -
			             node->gpus[pos].model->profiles[jj].width;
			if (d < best || (d == best && free_after < best_free)) {
				best = d;
				best_pos = pos;
				best_s = ss;
				best_free = free_after;
				best_j = jj;
			}
		}
		if (best_pos < 0)
			return FILL_NODE;
		g = &node->gpus[best_pos];
		p = &g->model->profiles[best_j];
		iso_mig_take(g->model, &occ[best_pos], p, best_s);
		mig_slot(q, n, g, p, best_s);
	}
	return FILL_OK;
}

/* The walk's progress: the best pick, and how many more nodes it may score. */
struct walk {
	struct pick best;
	int budget;
	int slices; /* compute slices of the member */
};

/* Scores the GPUs of one bucket (state delta `delta`, best start `hint`)
 * into w->best; each node once per candidate state. */
static void score_bucket(const struct req *q, struct walk *w, int32_t head, int32_t delta,
                         int free_after, int hint)
{
	struct iso_sched_index *ix = q->ix;

	for (int32_t g = head; g >= 0 && w->budget > 0; g = ix->gpus[g].next) {
		const struct ix_gpu *x = &ix->gpus[g];
		struct ix_node *xn = &ix->nodes[x->node];
		struct pick p;
		enum fill f;

		if (xn->seen == q->stamp || xn->tried == ix->cand_stamp)
			continue;
		if (!node_ok(q, x->node)) {
			xn->seen = q->stamp;
			continue;
		}
		if (!gpu_ok(q, x->node, x->pos))
			continue;
		f = fill_node(q, x->node, x->pos, hint);
		if (f == FILL_NODE)
			xn->seen = q->stamp; /* the node holds fewer than gpu_count */
		if (f != FILL_OK)
			continue;
		xn->tried = ix->cand_stamp;
		w->budget--;
		p = (struct pick){.have = true,
		                  .score = delta + node_term(q, x->node, w->slices),
		                  .free_after = free_after,
		                  .empties = x->empty ? xn->n_empty : 0,
		                  .ni = x->node,
		                  .pos = x->pos,
		                  .hint = hint,
		                  .surplus = node_surplus(q, x->node, w->slices)};
		if (pick_better(&p, &w->best))
			w->best = p;
	}
}

/* ---- MIG members: the bucket walk in score order ---- */

struct cursor {
	int mi, j, at;
};

static int mig_member(const struct req *q)
{
	struct iso_sched_index *ix = q->ix;
	struct cursor cur[16];
	struct walk w = {.budget = NODE_BUDGET};
	int n_cur = 0;

	for (int mi = 0; mi < ix->n_models && n_cur < (int)ISO_ARRAY_SIZE(cur); mi++) {
		const struct iso_gpu_model *m = ix->models[mi].m;
		const struct iso_mig_profile *p;

		if (q->shape->gpu_model[0] && strcasecmp(q->shape->gpu_model, m->name) != 0)
			continue;
		p = iso_mig_profile_find(m, q->shape->profile);
		if (p && ix->models[mi].eng) {
			cur[n_cur++] = (struct cursor){.mi = mi, .j = (int)(p - m->profiles)};
			if (!w.slices)
				w.slices = q->shape->gpu_count * p->compute;
		}
	}
	while (w.budget > 0) {
		const struct ix_cand *c = NULL;
		struct cursor *best = NULL;
		const int32_t *key_gpus;
		int mi;

		/* The next candidate state over every eligible model, best first. */
		for (int i = 0; i < n_cur; i++) {
			const struct ix_engine_model *em = ix->models[cur[i].mi].eng;
			const struct ix_cand *ci;

			if (cur[i].at >= em->n_cand[cur[i].j])
				continue;
			ci = &em->cand[cur[i].j][cur[i].at];
			if (!c || ci->delta < c->delta ||
			    (ci->delta == c->delta && ci->free_after < c->free_after)) {
				c = ci;
				best = &cur[i];
			}
		}
		if (!c)
			break;
		/* No later state can win: the node term gains at most the
		 * member's own slices. */
		if (w.best.have && c->delta - (int64_t)(w.slices * NODE_WEIGHT) >= w.best.score)
			break;
		best->at++;
		mi = best->mi;
		if (++ix->cand_stamp == 0) {
			for (int i = 0; i < ix->n_nodes; i++)
				ix->nodes[i].tried = 0;
			ix->cand_stamp = 1;
		}
		key_gpus = &ix->key_gpus[(int64_t)mi * ix->n_keys];
		if (c->key == iso_mig_state_empty(ix->models[mi].m)) {
			/* Empty GPUs: on the nodes with the fewest empty GPUs first. */
			for (int e = 1; e <= ix->gmax; e++) {
				if (!key_gpus[IX_KEY_EMPTY(e)])
					continue;
				for (int i = 0; i < q->n_pools; i++)
					score_bucket(q, &w,
					             ix->gbuckets[ix_gbucket_id(ix, q->pools[i], mi,
					                                        IX_KEY_EMPTY(e))],
					             c->delta, c->free_after, c->start);
			}
			continue;
		}
		if (!key_gpus[c->key])
			continue; /* no GPU of this model is in this state, in any pool */
		for (int i = 0; i < q->n_pools; i++)
			score_bucket(q, &w,
			             ix->gbuckets[ix_gbucket_id(ix, q->pools[i], mi, c->key)],
			             c->delta, c->free_after, c->start);
	}
	if (!w.best.have)
		return -1;
	/* Scoring overwrote the slots: write the winner's again. */
	if (fill_node(q, w.best.ni, w.best.pos, w.best.hint) != FILL_OK)
		return -1;
	return w.best.ni;
}

/* ---- whole GPUs and CPU-only members: the node buckets ---- */

/* Chooses gpu_count empty GPUs of node `ni` for a whole member: GPUs without
 * MIG first (they serve nothing else), then by device index. */
static bool whole_on_node(const struct req *q, int ni)
{
	const struct iso_node *node = &q->cs->inv->nodes[ni];
	const struct ix_node *xn = &q->ix->nodes[ni];
	int n = 0;

	for (int pass = 0; pass < 2 && n < q->shape->gpu_count; pass++) {
		int last = -1;
		for (;;) {
			int pick = -1;
			/* The next eligible GPU by device index after `last`. */
			for (int pos = 0; pos < node->n_gpus; pos++) {
				const struct iso_gpu *g = &node->gpus[pos];
				if (g->mig_enabled != (pass == 1) || g->index <= last ||
				    !q->ix->gpus[xn->gpu_base + pos].empty ||
				    !iso_sched_gpu_model_ok(g, q->shape) || !gpu_ok(q, ni, pos))
					continue;
				if (pick < 0 || g->index < node->gpus[pick].index)
					pick = pos;
			}
			if (pick < 0 || n == q->shape->gpu_count)
				break;
			last = node->gpus[pick].index;
			q->out[n++] =
			    (struct iso_slot){.member = q->k,
			                      .gpu = last,
			                      .whole = true,
			                      .start = 0,
			                      .width = node->gpus[pick].model->memory_slices};
		}
	}
	return n == q->shape->gpu_count;
}

/* Scores the nodes of node bucket e (nodes with e empty GPUs) into w->best:
 * the node term, plus for whole GPUs a charge per empty GPU the node would
 * keep beyond the member (best fit keeps empty nodes for big jobs). */
static void score_nodes(const struct req *q, struct walk *w, int e, bool whole)
{
	struct iso_sched_index *ix = q->ix;

	for (int i = 0; i < q->n_pools && w->budget > 0; i++)
		for (int32_t ni = ix->nbuckets[ix_nbucket_id(ix, q->pools[i], e)];
		     ni >= 0 && w->budget > 0; ni = ix->nodes[ni].next) {
			struct pick p;

			if (ix->nodes[ni].seen == q->stamp)
				continue;
			ix->nodes[ni].seen = q->stamp;
			if (!node_ok(q, ni) || (whole && !whole_on_node(q, ni)))
				continue;
			w->budget--;
			p = (struct pick){.have = true,
			                  .score =
			                      node_term(q, ni, w->slices) +
			                      (whole ? (int64_t)(e - q->shape->gpu_count) *
			                                   (int64_t)(EMPTY_WEIGHT * NODE_WEIGHT)
			                             : 0),
			                  .empties = e,
			                  .ni = ni,
			                  .surplus = node_surplus(q, ni, w->slices)};
			if (pick_better(&p, &w->best))
				w->best = p;
		}
}

static int whole_member(const struct req *q)
{
	struct walk w = {.budget = NODE_BUDGET};

	for (int mi = 0; mi < q->ix->n_models && !w.slices; mi++)
		w.slices = eng_member_slices(q->ix->models[mi].m, q->shape);
	for (int e = q->shape->gpu_count; e <= q->ix->gmax && w.budget > 0; e++)
		score_nodes(q, &w, e, true);
	if (!w.best.have)
		return -1;
	whole_on_node(q, w.best.ni); /* rewrite the slots for the node chosen */
	return w.best.ni;
}

/* CPU-only members: nodes without GPUs cost nothing; elsewhere the node term
 * charges the slices the member's cores and memory would strand. */
static int cpu_member(const struct req *q)
{
	struct walk w = {.budget = NODE_BUDGET};

	score_nodes(q, &w, q->ix->gmax + 1, false);
	if (w.best.have && w.best.score == 0)
		return w.best.ni;
	for (int e = 0; e <= q->ix->gmax && w.budget > 0; e++)
		score_nodes(q, &w, e, false);
	return w.best.have ? w.best.ni : -1;
}

/* ---- explicit allow-lists: node by node ---- */

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* The nodes an allow-list names, deduplicated and sorted; -1 when there is
 * no allow-list or it is too large (then the bucket walk is used). */
static int direct_candidates(const struct req *q)
{
	const struct iso_place_constraints *c = q->cs->constraints;
	struct iso_sched_index *ix = q->ix;
	uint32_t mark = new_stamp(ix);
	int n = 0;

#define ADD(ni_)                                                                                   \
	do {                                                                                       \
		int32_t ni__ = (ni_);                                                              \
		if (ni__ >= 0 && ix->nodes[ni__].seen != mark) {                                   \
			if (n == DIRECT_MAX)                                                       \
				return -1;                                                         \
			ix->nodes[ni__].seen = mark;                                               \
			ix->scratch_nodes[n++] = ni__;                                             \
		}                                                                                  \
	} while (0)

	if (ix->c_pin >= 0) { /* a pinned member: its node is the only candidate */
		ADD(ix->c_pin);
	} else if (c->n_nodes > 0) {
		for (int i = 0; i < c->n_nodes; i++)
			ADD(ix_strmap_find(&ix->node_names, c->nodes[i]));
	} else if (c->n_gpus > 0) {
		for (int i = 0; i < c->n_gpus; i++)
			ADD(ix_strmap_find(&ix->node_names, c->gpus[i].node));
	} else if (c->n_racks > 0) {
		for (int i = 0; i < c->n_racks; i++) {
			int r = ix_strmap_find(&ix->racks, c->racks[i]);
			for (int32_t ni = r >= 0 ? ix->rack_first[r] : -1; ni >= 0;
			     ni = ix->rack_next[ni])
				ADD(ni);
		}
	} else {
		return -1;
	}
#undef ADD
	qsort(ix->scratch_nodes, (size_t)n, sizeof(ix->scratch_nodes[0]), cmp_int);
	return n;
}

struct ranked {
	int32_t delta;
	int free_after, empties, ni, pos;
};

static int ranked_cmp(const void *pa, const void *pb)
{
	const struct ranked *a = pa, *b = pb;

	if (a->delta != b->delta)
		return a->delta < b->delta ? -1 : 1;
	if (a->free_after != b->free_after)
		return a->free_after - b->free_after;
	if (a->empties != b->empties)
		return a->empties - b->empties;
	return a->ni - b->ni;
}

static int direct_member(const struct req *q, int n)
{
	struct iso_sched_index *ix = q->ix;
	const struct iso_shape *shape = q->shape;
	_cleanup_free_ struct ranked *rk = NULL;
	int n_rk = 0, best = -1, best_key = 0;

	if (shape->gpu_count > 0 && !shape->whole) {
		rk = calloc(n ? (size_t)n : 1, sizeof(*rk));
		if (!rk)
			return -1;
		for (int i = 0; i < n; i++) {
			int ni = ix->scratch_nodes[i];
			const struct iso_node *node = &q->cs->inv->nodes[ni];
			struct ranked r = {.delta = INT32_MAX, .ni = ni, .pos = -1};

			if (!node_ok(q, ni))
				continue;
			for (int pos = 0; pos < node->n_gpus; pos++) {
				const struct ix_engine_model *em;
				const struct iso_gpu_occupancy *o = &q->cs->usage[ni].gpus[pos];
				struct ranked t = {.ni = ni, .pos = pos};
				int j;

				em = gpu_profile(q, ni, pos, &j);
				if (!em || !gpu_ok(q, ni, pos) ||
				    eng_best_start(em, j, o, &t.delta) < 0)
					continue;
				t.free_after = __builtin_popcount(o->free_mask) -
				               node->gpus[pos].model->profiles[j].width;
				t.empties = ix->gpus[ix->nodes[ni].gpu_base + pos].empty
				                ? ix->nodes[ni].n_empty
				                : 0;
				if (r.pos < 0 || ranked_cmp(&t, &r) < 0)
					r = t;
			}
			if (r.pos >= 0)
				rk[n_rk++] = r;
		}
		qsort(rk, (size_t)n_rk, sizeof(*rk), ranked_cmp);
		for (int i = 0; i < n_rk; i++)
			if (fill_node(q, rk[i].ni, rk[i].pos, -1) == FILL_OK)
				return rk[i].ni;
		return -1;
	}
	/* Whole GPUs: fewest empty GPUs first; CPU-only: nodes without GPUs
	 * first, then fewest empty GPUs. Ties: inventory order. */
	for (int i = 0; i < n; i++) {
		int ni = ix->scratch_nodes[i];
		int key = q->cs->inv->nodes[ni].n_gpus == 0 ? -1 : ix->nodes[ni].n_empty;

		if (best >= 0 && key >= best_key)
			continue;
		if (!node_ok(q, ni) ||
		    (shape->whole && shape->gpu_count > 0 &&
		     (ix->nodes[ni].n_empty < shape->gpu_count || !whole_on_node(q, ni))))
			continue;
		best = ni;
		best_key = key;
	}
	if (best >= 0 && shape->whole && shape->gpu_count > 0)
		whole_on_node(q, best); /* rewrite the slots for the node chosen */
	return best;
}

/* ---- the policy ---- */

/* The pools a request may use, the one with the largest share of empty GPUs
 * first: a request that names no pool leaves the tight pools to those that
 * must use them. O(pools^2) for the few pools an inventory has. */
static void pool_order(struct req *q)
{
	struct iso_sched_index *ix = q->ix;
	int32_t *order = ix->pool_order;
	int n = 0;

	if (q->pool >= 0) {
		order[n++] = q->pool;
	} else {
		for (int pl = 0; pl < ix->n_pools; pl++) {
			int t = n++;
			/* empty/gpus descending, compared without division */
			while (t > 0) {
				int o = order[t - 1];
				int64_t lhs = (int64_t)ix->pool_empty[pl] * ix->pool_gpus[o];
				int64_t rhs = (int64_t)ix->pool_empty[o] * ix->pool_gpus[pl];
				if (lhs < rhs ||
				    (lhs == rhs && ix->pool_gpus[pl] <= ix->pool_gpus[o]))
					break;
				order[t] = order[t - 1];
				t--;
			}
			order[t] = pl;
		}
	}
	q->pools = order;
	q->n_pools = n;
}

static int choose(void *ctx, struct iso_cluster_state *cs, const struct iso_allocation *a, int k,
                  struct iso_slot *out)
{
	struct iso_sched_index *ix = cs->index;
	struct req q = {.cs = cs, .ix = ix, .a = a, .shape = &a->shape, .k = k, .out = out};
	int n;

	if (!ix || eng_prepare(ix) < 0)
		return iso_sched_first_fit_choose(ctx, cs, a, k, out);
	ix->decisions++;
	eng_record(ix, q.shape);
	eng_refresh(ix, false);
	q.pool = -1;
	if (q.shape->pool[0]) {
		q.pool = ix_strmap_find(&ix->pools, q.shape->pool);
		if (q.pool < 0)
			return -1;
	}
	pool_order(&q);
	q.constrained = ix_constraints_active(cs);
	if (q.constrained && (n = direct_candidates(&q)) >= 0)
		return direct_member(&q, n);
	q.stamp = new_stamp(ix);
	if (q.shape->gpu_count == 0)
		return cpu_member(&q);
	if (q.shape->whole)
		return whole_member(&q);
	return mig_member(&q);
}

static int place(const struct iso_placer *self, struct iso_cluster_state *cs,
                 struct iso_allocation *a, int want, struct iso_error *err)
{
	return iso_sched_place(cs, a, want, choose, NULL, err);
}

static int learn(const struct iso_placer *self, struct iso_cluster_state *cs,
                 const struct iso_shape *shapes, const double *weights, int n)
{
	(void)self;
	return cs->index ? eng_learn(cs->index, shapes, weights, n) : -ENOMEM;
}

const struct iso_placer iso_placer_isostack = {.name = "isostack", .place = place, .learn = learn};

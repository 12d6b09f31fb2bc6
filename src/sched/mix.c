/* mix.c: what the isostack engine has learned about demand, and the scores
 * it derives from it. In the spirit of FGD (Weng et al., ATC'23): a GPU's
 * fragmentation is measured against the workload mix, and a placement is
 * chosen along the steepest descent of that measure.
 *
 * Fragmentation of a MIG state k, against mix w (shares per profile and
 * for whole GPUs, summing to 1):
 *   frag(k) = sum_j w_j * unusable_j(k) + w_whole * (k empty ? 0 : free(k))
 * where unusable_j(k) counts the free memory slices that no placement of
 * profile j can cover in k (its holes: a teardown hole between two used
 * slices is unusable for every profile wider than one slice). The score of
 * placing profile p at start s, taking state k to k', is
 *   frag(k') - frag(k) + w_strand * strand(k, p, s)
 * (lower is better), where strand = potential(k) - potential(k') -
 * compute(p) is the compute slices the placement makes unusable for good,
 * whatever arrives later (potential: the most compute that placements in
 * the free slices can still add; src/mig/states.c). frag counts memory
 * slices and sees the next arrival only, so alone it cannot tell that a
 * 3g.40gb at slice 0 beside another at 4 leaves a compute slice that no
 * instance can ever use, while one at slice 4 of an empty GPU loses none
 * (docs/placement.md). It stands where a term charged free memory slices
 * that no profile can cover: on an H100 that is slice 7 beside a used
 * slice 6, which holds no compute of its own, so that term kept 1g.10gb
 * pods from completing GPUs at 7 of 7 compute slices.
 *
 * Demand is counted per model (a request counts for every model it could
 * use), decays exponentially (half-life ~2,840 decisions) and has a floor, so
 * no profile is ever treated as impossible. Given the mix and the strand
 * weight, scores depend on the state only, so they are tabulated per
 * (model, state, profile) and rebuilt only when the mix has moved by more
 * than MIX_MOVE (L1) or the strand weight has changed step, checked every
 * MIX_CHECK decisions. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "sched/index.h"

#define MIX_DECAY       (1.0 - 1.0 / 4096.0)
#define MIX_FLOOR       0.02 /* every kind keeps at least this share */
#define MIX_CHECK       32
#define MIX_MOVE        0.10
#define MIX_PRIOR_ME    0.25 /* prior weight of a "+me" profile; others 1 */
#define SCORE_PER_SLICE 1000000.0
/* Per compute slice a placement strands for good, against the score units
 * of frag (a memory slice that the whole mix cannot use). What it weighs is
 * stranding a slice against breaking an empty GPU that 7g and whole-GPU
 * demand want kept, and an empty GPU is worth more the fewer remain. So the
 * weight runs from W_STRAND_FULL, when none of the model's MIG GPUs is
 * empty, to W_STRAND_EMPTY, when all are, in quarter steps (the tables are
 * rebuilt when the step changes, which eng_refresh checks). One fixed
 * weight could not serve both ends: at 2, a 3g.40gb still went to slice 0
 * beside a 2g.20gb under gpushare100's mix (7g the most common pod), which
 * needs more than about 2.2; at 3 throughout, bench/placement's fill
 * refused its first 8-GPU job at ~95.5% of the slices instead of ~99%
 * (docs/benchmarks.md). test_strand needs more than about 1.2. */
#define W_STRAND_FULL  1.5
#define W_STRAND_EMPTY 3.0

/* The strand weight for the share of the model's MIG GPUs now empty. */
static double strand_weight(const struct ix_model *xm)
{
	if (xm->mig_gpus <= 0)
		return W_STRAND_EMPTY;
	return W_STRAND_FULL + floor((W_STRAND_EMPTY - W_STRAND_FULL) * 4.0 *
	                                 (double)xm->mig_empty / (double)xm->mig_gpus +
	                             0.5) /
	                           4.0;
}

/* The score of taking `p` at `start` in state k: the change of expected
 * fragmentation plus the compute slices stranded for good. */
static int32_t score_of(const struct ix_engine_model *em, int k, const struct iso_mig_profile *p,
                        int start)
{
	const int after = iso_mig_state_after(k, p, start);
	/* Never negative on an exact model (test_state_tables); on others the
	 * potential ignores compute already used, so it may undercount. */
	const int lost = em->tab.potential[k] - em->tab.potential[after] - p->compute;
	const int strand = lost > 0 ? lost : 0;

	return em->frag[after] - em->frag[k] +
	       (int32_t)lround(em->w_strand * SCORE_PER_SLICE * strand);
}

static int kinds(const struct iso_gpu_model *m)
{
	return m->n_profiles < ISO_MIG_MAX_PROFILES ? m->n_profiles : ISO_MIG_MAX_PROFILES;
}

/* The normalised mix with its floor. */
static void mix_of(const struct ix_engine_model *em, int n, double *w)
{
	double total = 0;

	for (int j = 0; j < n; j++)
		total += em->counts[j];
	total += em->counts[IX_WHOLE];
	for (int j = 0; j <= IX_WHOLE; j++) {
		double c = j < n || j == IX_WHOLE ? em->counts[j] : 0;
		w[j] = j < n || j == IX_WHOLE
		           ? MIX_FLOOR + (1.0 - MIX_FLOOR * (n + 1)) * (total > 0 ? c / total : 0)
		           : 0;
	}
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct ix_cand *a = pa, *b = pb;

	if (a->delta != b->delta)
		return a->delta < b->delta ? -1 : 1;
	if (a->free_after != b->free_after)
		return a->free_after < b->free_after ? -1 : 1;
	return (int)a->key - (int)b->key;
}

static void rebuild(struct ix_engine_model *em)
{
	const struct iso_mig_state_table *t = &em->tab;
	const struct iso_gpu_model *m = t->model;
	int n = kinds(m), empty = iso_mig_state_empty(m);
	int64_t wi[IX_WHOLE + 1];

	mix_of(em, n, em->w);
	/* Whole score units per slice first, so that frag sums exactly and
	 * placements that change it equally tie exactly (then the one leaving
	 * fewer free slices wins), whatever the rounding of the weights. */
	for (int j = 0; j <= IX_WHOLE; j++)
		wi[j] = llround(em->w[j] * SCORE_PER_SLICE);
	for (int r = 0; r < t->n_reachable; r++) {
		int k = t->reachable[r];
		int64_t f = 0;

		for (int j = 0; j < n; j++)
			f += wi[j] * t->unusable[k][j];
		if (k != empty)
			f += wi[IX_WHOLE] * __builtin_popcount(k & iso_mig_full_mask(m));
		em->frag[k] = (int32_t)f;
	}
	for (int j = 0; j < n; j++) {
		const struct iso_mig_profile *p = &m->profiles[j];
		int nc = 0;

		for (int r = 0; r < t->n_reachable; r++) {
			int k = t->reachable[r];
			int32_t best = INT32_MAX;
			int best_s = -1;

			for (int s = 0; s < m->memory_slices; s++) {
				int32_t d;
				if (!((t->fits[k][j] >> s) & 1u))
					continue;
				d = score_of(em, k, p, s);
				if (d < best) {
					best = d;
					best_s = s;
				}
			}
			if (best_s < 0)
				continue;
			em->cand[j][nc++] = (struct ix_cand){
			    .delta = best,
			    .key = (uint16_t)k,
			    .start = (uint8_t)best_s,
			    .free_after =
			        (uint8_t)(__builtin_popcount(k & iso_mig_full_mask(m)) - p->width)};
		}
		qsort(em->cand[j], (size_t)nc, sizeof(em->cand[j][0]), cand_cmp);
		em->n_cand[j] = nc;
	}
}

int eng_prepare(struct iso_sched_index *ix)
{
	if (ix->eng_ready)
		return 0;
	for (int mi = 0; mi < ix->n_models; mi++) {
		struct ix_model *xm = &ix->models[mi];
		struct ix_engine_model *em = xm->eng;

		if (!em) {
			em = calloc(1, sizeof(*em));
			if (!em)
				return -ENOMEM;
			xm->eng = em;
		}
		iso_mig_state_table_build(xm->m, &em->tab);
		for (int j = 0; j < kinds(xm->m); j++)
			em->counts[j] = xm->m->profiles[j].media_engine ? MIX_PRIOR_ME : 1.0;
		em->counts[IX_WHOLE] = 1.0;
		em->w_strand = strand_weight(xm);
		rebuild(em);
	}
	ix->eng_ready = true;
	return 0;
}

int eng_member_slices(const struct iso_gpu_model *m, const struct iso_shape *shape)
{
	const struct iso_mig_profile *p;

	if (shape->gpu_count <= 0)
		return 0;
	if (shape->whole)
		return shape->gpu_count * m->compute_slices;
	p = iso_mig_profile_find(m, shape->profile);
	return p ? shape->gpu_count * p->compute : 0;
}

/* Demand decays by MIX_DECAY per decision. */
static void decay(struct iso_sched_index *ix)
{
	ix->d_slices *= MIX_DECAY;
	ix->d_cpus *= MIX_DECAY;
	ix->d_mem *= MIX_DECAY;
	for (int mi = 0; mi < ix->n_models; mi++) {
		struct ix_engine_model *em = ix->models[mi].eng;

		for (int j = 0; em && j <= IX_WHOLE; j++)
			em->counts[j] *= MIX_DECAY;
	}
}

/* Adds `weight` requests of `shape` to what the engine knows of demand. */
static void add_demand(struct iso_sched_index *ix, const struct iso_shape *shape, double weight)
{
	int slices = 0;

	/* Cores and memory per compute slice of GPU demand, on the first model
	 * that serves the shape (slices per profile differ little by model). */
	for (int mi = 0; mi < ix->n_models && !slices; mi++)
		if (!shape->gpu_model[0] ||
		    strcasecmp(shape->gpu_model, ix->models[mi].m->name) == 0)
			slices = eng_member_slices(ix->models[mi].m, shape);
	if (slices > 0) {
		ix->d_slices += weight * slices;
		ix->d_cpus += weight * shape->cpus;
		ix->d_mem += weight * (double)shape->memory_mib;
	}
	for (int mi = 0; mi < ix->n_models; mi++) {
		const struct iso_gpu_model *m = ix->models[mi].m;
		struct ix_engine_model *em = ix->models[mi].eng;
		int slot = -1;

		if (!em || (shape->gpu_model[0] && strcasecmp(shape->gpu_model, m->name) != 0))
			continue;
		if (shape->whole) {
			slot = IX_WHOLE;
		} else {
			const struct iso_mig_profile *p = iso_mig_profile_find(m, shape->profile);
			if (p)
				slot = (int)(p - m->profiles);
		}
		if (slot >= 0)
			em->counts[slot] += weight * shape->gpu_count;
	}
}

void eng_record(struct iso_sched_index *ix, const struct iso_shape *shape)
{
	if (shape->gpu_count <= 0)
		return;
	decay(ix);
	add_demand(ix, shape, 1.0);
}

int eng_learn(struct iso_sched_index *ix, const struct iso_shape *shapes, const double *weights,
              int n)
{
	/* The prime weighs what the decay keeps of a long history. */
	const double history = 1.0 / (1.0 - MIX_DECAY);
	double total = 0;
	int r = eng_prepare(ix);

	if (r < 0)
		return r;
	for (int i = 0; i < n; i++) {
		if (!(weights[i] >= 0) || !isfinite(weights[i]))
			return -EINVAL;
		if (shapes[i].gpu_count > 0)
			total += weights[i];
	}
	if (total <= 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (shapes[i].gpu_count > 0)
			add_demand(ix, &shapes[i], weights[i] * history / total);
	eng_refresh(ix, true);
	return 0;
}

void eng_refresh(struct iso_sched_index *ix, bool force)
{
	if (!force && ++ix->since_refresh < MIX_CHECK)
		return;
	ix->since_refresh = 0;
	for (int mi = 0; mi < ix->n_models; mi++) {
		struct ix_engine_model *em = ix->models[mi].eng;
		double w[IX_WHOLE + 1], moved = 0, w_strand;

		if (!em)
			continue;
		w_strand = strand_weight(&ix->models[mi]);
		mix_of(em, kinds(ix->models[mi].m), w);
		for (int j = 0; j <= IX_WHOLE; j++)
			moved += fabs(w[j] - em->w[j]);
		if (force || moved > MIX_MOVE || w_strand != em->w_strand) {
			em->w_strand = w_strand;
			rebuild(em);
			ix->refreshes++;
		}
	}
}

int eng_best_start(const struct ix_engine_model *em, int j, const struct iso_gpu_occupancy *o,
                   int32_t *delta)
{
	const struct iso_gpu_model *m = em->tab.model;
	const struct iso_mig_profile *p = &m->profiles[j];
	int k = iso_mig_state_of(o), best_s = -1;
	uint8_t fits;
	int32_t best = INT32_MAX;

	if (o->whole || k >= ISO_MIG_STATES || !em->tab.is_reachable[k])
		return -1;
	fits = em->tab.fits[k][j];
	for (int s = 0; s < m->memory_slices; s++) {
		int32_t d;
		if (!((fits >> s) & 1u) || !iso_mig_fits_at(m, o, p, s))
			continue;
		d = score_of(em, k, p, s);
		if (d < best) {
			best = d;
			best_s = s;
		}
	}
	if (delta)
		*delta = best;
	return best_s;
}

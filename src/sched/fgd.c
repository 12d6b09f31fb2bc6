/* fgd.c: Fragmentation Gradient Descent (Weng et al., "Beware of
 * Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient
 * Descent", USENIX ATC 2023) adapted to MIG, as a baseline for the
 * geometry-aware policy. FGD measures a node's fragmentation against the
 * workload: for each request type m of the mix, F_n(m) is the GPU capacity
 * of node n that m could not use; weighted by the types' popularity that is
 * the expected fragmentation F_n(M). A request goes where F grows least.
 *
 * As in the paper, a type that the node cannot run at all (too few free cpus
 * or memory, or no room for its GPUs) finds every free GPU resource of the
 * node unusable. Otherwise, on MIG, resources are compute slices and "could
 * not use" is geometric:
 *   - MIG profile p: on each GPU, the free compute slices minus those that the
 *     most instances of p still placeable there would use (3g.40gb strands
 *     one slice of an empty GPU; 4g.40gb cannot use a GPU whose slice 0 is
 *     taken); a GPU without p (MIG off, other model) counts all its free ones;
 *   - k whole GPUs: the free slices of GPUs in partial use when the node has
 *     k empty GPUs, else all free slices of the node;
 *   - CPU only: nothing when the node has the cpus and memory.
 * Full scan of every (GPU, start) with caches: per GPU state, the per-type
 * fragments (they depend on the free-mask, the media-engine slot and the
 * compute in use only); per cpu/memory point, the weight of the types that
 * still fit (a 2-D prefix sum over the mix). */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "sched/internal.h"

#define FGD_MAX_MODELS 16
#define FGD_KEYS       4096 /* free-mask (8 bits), +me (1), compute in use (3) */

enum fgd_kind { KIND_CPU, KIND_MIG, KIND_WHOLE };

struct fgd_shape {
	enum fgd_kind kind;
	int count;                                       /* whole: GPUs */
	char profile[32];                                /* MIG */
	const struct iso_mig_profile *p[FGD_MAX_MODELS]; /* MIG: per model, NULL if none */
	double weight;                                   /* of all its types */
};

struct iso_fgd {
	int n_shapes;
	struct fgd_shape shapes[ISO_FGD_MAX_SHAPES];
	double total;
	/* Weight per shape of the types needing at most cpu_vals[i] cpus and
	 * mem_vals[j] MiB: grid[(s * nc + i) * nm + j]. */
	int nc, nm;
	int64_t *cpu_vals, *mem_vals; /* ascending, distinct */
	double *grid;
	/* Per model: per-GPU fragment of each MIG shape per state key. */
	double *memo[FGD_MAX_MODELS];
	uint8_t *memo_ok[FGD_MAX_MODELS];
};

static int model_index(const struct iso_gpu_model *m)
{
	const struct iso_gpu_model *x;

	for (int i = 0; i < FGD_MAX_MODELS && (x = iso_gpu_model_at(i)); i++)
		if (x == m)
			return i;
	return -1;
}

/* ---- building ---- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int uniq_i64(int64_t *v, int n)
{
	int k = 0;

	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	for (int i = 0; i < n; i++)
		if (k == 0 || v[k - 1] != v[i])
			v[k++] = v[i];
	return k;
}

static int find_shape(struct iso_fgd *f, const struct iso_fgd_type *t)
{
	enum fgd_kind kind = t->whole ? KIND_WHOLE : (t->count == 0 ? KIND_CPU : KIND_MIG);
	const struct iso_gpu_model *m;

	for (int s = 0; s < f->n_shapes; s++) {
		const struct fgd_shape *x = &f->shapes[s];
		if (x->kind == kind && (kind != KIND_WHOLE || x->count == t->count) &&
		    (kind != KIND_MIG || strcasecmp(x->profile, t->profile) == 0))
			return s;
	}
	if (f->n_shapes == ISO_FGD_MAX_SHAPES)
		return -1;
	f->shapes[f->n_shapes] = (struct fgd_shape){.kind = kind, .count = t->count};
	if (kind == KIND_MIG) {
		iso_strlcpy(f->shapes[f->n_shapes].profile, t->profile,
		            sizeof(f->shapes[f->n_shapes].profile));
		for (int i = 0; i < FGD_MAX_MODELS && (m = iso_gpu_model_at(i)); i++)
			f->shapes[f->n_shapes].p[i] = iso_mig_profile_find(m, t->profile);
	}
	return f->n_shapes++;
}

/* Index of the largest value <= x, or -1. */
static int floor_i64(const int64_t *v, int n, int64_t x)
{
	int lo = 0, hi = n - 1, r = -1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		if (v[mid] <= x) {
			r = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return r;
}

int iso_fgd_new(const struct iso_fgd_mix *mix, struct iso_fgd **out, struct iso_error *err)
{
	struct iso_fgd *f = calloc(1, sizeof(*f));
	_cleanup_free_ int *shape_of = NULL;
	size_t cells;

	*out = NULL;
	if (!f)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	shape_of = calloc((size_t)mix->n + 1, sizeof(*shape_of));
	f->cpu_vals = calloc((size_t)mix->n + 1, sizeof(*f->cpu_vals));
	f->mem_vals = calloc((size_t)mix->n + 1, sizeof(*f->mem_vals));
	if (!shape_of || !f->cpu_vals || !f->mem_vals) {
		iso_fgd_free(f);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	for (int i = 0; i < mix->n; i++) {
		const struct iso_fgd_type *t = &mix->types[i];

		if (!(t->weight > 0) || !isfinite(t->weight) || t->cpus < 0 || t->memory_mib < 0 ||
		    t->count < 0 || (t->whole && t->count == 0)) {
			iso_fgd_free(f);
			return iso_error_set(err, ISO_E_INVALID, "mix",
			                     "request type %d: weight, cpus, memory and count must "
			                     "be positive",
			                     i);
		}
		shape_of[i] = find_shape(f, t);
		if (shape_of[i] < 0) {
			iso_fgd_free(f);
			return iso_error_set(err, ISO_E_INVALID, "mix",
			                     "more than %d kinds of GPU request",
			                     ISO_FGD_MAX_SHAPES);
		}
		f->shapes[shape_of[i]].weight += t->weight;
		f->total += t->weight;
		f->cpu_vals[i] = t->cpus;
		f->mem_vals[i] = t->memory_mib;
	}
	f->nc = mix->n ? uniq_i64(f->cpu_vals, mix->n) : 0;
	f->nm = mix->n ? uniq_i64(f->mem_vals, mix->n) : 0;
	cells = (size_t)f->n_shapes * (size_t)f->nc * (size_t)f->nm;
	f->grid = calloc(cells ? cells : 1, sizeof(*f->grid));
	if (!f->grid) {
		iso_fgd_free(f);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	for (int i = 0; i < mix->n; i++) {
		const struct iso_fgd_type *t = &mix->types[i];
		int ci = floor_i64(f->cpu_vals, f->nc, t->cpus);
		int mi = floor_i64(f->mem_vals, f->nm, t->memory_mib);
		f->grid[((size_t)shape_of[i] * f->nc + ci) * f->nm + mi] += t->weight;
	}
	/* 2-D prefix sums per shape. */
	for (int s = 0; s < f->n_shapes; s++)
		for (int i = 0; i < f->nc; i++)
			for (int j = 0; j < f->nm; j++) {
				double *g = &f->grid[(size_t)s * f->nc * f->nm];
				double v = g[i * f->nm + j];
				if (i)
					v += g[(i - 1) * f->nm + j];
				if (j)
					v += g[i * f->nm + j - 1];
				if (i && j)
					v -= g[(i - 1) * f->nm + j - 1];
				g[i * f->nm + j] = v;
			}
	*out = f;
	return 0;
}

void iso_fgd_free(struct iso_fgd *f)
{
	if (!f)
		return;
	for (int i = 0; i < FGD_MAX_MODELS; i++) {
		free(f->memo[i]);
		free(f->memo_ok[i]);
	}
	free(f->cpu_vals);
	free(f->mem_vals);
	free(f->grid);
	free(f);
}

/* The stateless default: every plain profile of the models in the
 * inventory and one whole GPU, equally weighted, needing nothing else of the
 * node. */
static int default_fgd(const struct iso_inventory *inv, struct iso_fgd **out, struct iso_error *err)
{
	struct iso_fgd_type types[ISO_FGD_MAX_SHAPES];
	struct iso_fgd_mix mix = {.types = types};
	const struct iso_gpu_model *seen[FGD_MAX_MODELS];
	int n_seen = 0;

	types[mix.n++] = (struct iso_fgd_type){.whole = true, .count = 1, .weight = 1};
	for (int i = 0; i < inv->n_nodes; i++)
		for (int g = 0; g < inv->nodes[i].n_gpus; g++) {
			const struct iso_gpu_model *m = inv->nodes[i].gpus[g].model;
			int k;

			for (k = 0; k < n_seen && seen[k] != m; k++)
				;
			if (!m || k < n_seen || n_seen == FGD_MAX_MODELS)
				continue;
			seen[n_seen++] = m;
			for (int j = 0; j < m->n_profiles; j++) {
				bool dup = false;

				if (m->profiles[j].media_engine)
					continue;
				for (k = 1; k < mix.n; k++)
					dup |=
					    strcasecmp(types[k].profile, m->profiles[j].name) == 0;
				if (dup || mix.n == ISO_FGD_MAX_SHAPES)
					continue;
				types[mix.n] = (struct iso_fgd_type){.count = 1, .weight = 1};
				iso_strlcpy(types[mix.n].profile, m->profiles[j].name,
				            sizeof(types[mix.n].profile));
				mix.n++;
			}
		}
	return iso_fgd_new(&mix, out, err);
}

/* ---- fragments of one GPU ---- */

static int free_compute(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o)
{
	return o->whole ? 0 : m->compute_slices - o->compute_used;
}

/* How many more instances of `p` fit on `o`. The allowed placements of one
 * profile never overlap one another (true of every table in mig.md), so
 * counting the free ones is exact. */
static int max_more(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o,
                    const struct iso_mig_profile *p)
{
	int idx = (int)(p - m->profiles), n = 0, room;

	if (o->whole || (p->media_engine && o->media_engine_used) || p->compute < 1)
		return 0;
	room = free_compute(m, o) / p->compute;
	if (p->max_count - o->count[idx] < room)
		room = p->max_count - o->count[idx];
	for (int s = 0; s < m->memory_slices && n < room; s++) {
		uint8_t span;

		if (!((p->starts >> s) & 1u) || s + p->width > m->memory_slices)
			continue;
		span = iso_mig_span(s, p->width);
		if ((o->free_mask & span) == span)
			n++;
	}
	return n;
}

/* Can a state key stand for the occupancy: do max counts never bind before
 * the placements run out (the media-engine slot is in the key)? */
static bool model_keyable(const struct iso_gpu_model *m)
{
	if (m->memory_slices > 8 || m->compute_slices > 7)
		return false;
	for (int j = 0; j < m->n_profiles; j++) {
		const struct iso_mig_profile *p = &m->profiles[j];
		if (!p->media_engine && p->max_count < __builtin_popcount(p->starts))
			return false;
	}
	return true;
}

static void gpu_fragments_raw(const struct iso_fgd *f, const struct iso_gpu *g, int mi,
                              const struct iso_gpu_occupancy *o, double *out)
{
	const int fc = free_compute(g->model, o);

	for (int s = 0; s < f->n_shapes; s++) {
		const struct fgd_shape *sh = &f->shapes[s];
		const struct iso_mig_profile *p = mi >= 0 ? sh->p[mi] : NULL;

		if (sh->kind != KIND_MIG)
			out[s] = 0;
		else if (!p || !g->mig_enabled)
			out[s] = fc;
		else
			out[s] = fc - p->compute * max_more(g->model, o, p);
	}
}

/* Per-shape fragments of GPU `g` in state `o`: a pointer into the cache, or
 * into `buf` when the state cannot be cached. */
static const double *gpu_fragments(struct iso_fgd *f, const struct iso_gpu *g,
                                   const struct iso_gpu_occupancy *o, double *buf)
{
	const int mi = model_index(g->model);
	int key;

	if (o->whole || free_compute(g->model, o) == 0) {
		for (int s = 0; s < f->n_shapes; s++)
			buf[s] = 0;
		return buf;
	}
	if (mi < 0 || !g->mig_enabled || !model_keyable(g->model)) {
		gpu_fragments_raw(f, g, mi, o, buf);
		return buf;
	}
	key = o->free_mask | (o->media_engine_used ? 0x100 : 0) | (o->compute_used << 9);
	if (!f->memo[mi]) {
		f->memo[mi] = calloc((size_t)FGD_KEYS * (size_t)(f->n_shapes ? f->n_shapes : 1),
		                     sizeof(double));
		f->memo_ok[mi] = calloc(FGD_KEYS, 1);
		if (!f->memo[mi] || !f->memo_ok[mi]) {
			free(f->memo[mi]);
			free(f->memo_ok[mi]);
			f->memo[mi] = NULL;
			f->memo_ok[mi] = NULL;
			gpu_fragments_raw(f, g, mi, o, buf);
			return buf;
		}
	}
	if (!f->memo_ok[mi][key]) {
		gpu_fragments_raw(f, g, mi, o, &f->memo[mi][(size_t)key * f->n_shapes]);
		f->memo_ok[mi][key] = 1;
	}
	return &f->memo[mi][(size_t)key * f->n_shapes];
}

/* ---- fragmentation of one node ---- */

/* What F_n needs of a node's GPUs, summed. */
struct node_sums {
	double g[ISO_FGD_MAX_SHAPES]; /* MIG shapes: the sum of the GPUs' fragments */
	int empty, free_all, free_used;
};

static void sums_add(const struct iso_fgd *f, struct node_sums *ns, const double *frag,
                     const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o, int sign)
{
	const int fc = free_compute(m, o);

	for (int s = 0; s < f->n_shapes; s++)
		ns->g[s] += sign * frag[s];
	ns->free_all += sign * fc;
	if (iso_gpu_occupancy_empty(m, o))
		ns->empty += sign;
	else
		ns->free_used += sign * fc;
}

/* Weight per shape of the types that fit in `cpus` and `mib`. */
static void fitting_weight(const struct iso_fgd *f, int64_t cpus, int64_t mib, double *out)
{
	int ci = floor_i64(f->cpu_vals, f->nc, cpus);
	int mi = floor_i64(f->mem_vals, f->nm, mib);

	for (int s = 0; s < f->n_shapes; s++)
		out[s] = ci < 0 || mi < 0 ? 0 : f->grid[((size_t)s * f->nc + ci) * f->nm + mi];
}

/* F_n(M) times the mix's total weight. Scores compare these unnormalised:
 * with whole-number weights (pod counts) every sum is exact, so decisions
 * and ties do not depend on rounding, compiler or machine. */
static double node_value(const struct iso_fgd *f, const struct node_sums *ns, const double *fit)
{
	double v = 0;

	for (int s = 0; s < f->n_shapes; s++) {
		const struct fgd_shape *sh = &f->shapes[s];
		double usable;

		switch (sh->kind) {
		case KIND_CPU:
			usable = 0;
			break;
		case KIND_WHOLE:
			usable = ns->empty >= sh->count ? ns->free_used : ns->free_all;
			break;
		default:
			usable = ns->g[s];
			break;
		}
		v += fit[s] * usable + (sh->weight - fit[s]) * ns->free_all;
	}
	return v;
}

/* ---- the policy ---- */

struct fgd_call {
	struct iso_fgd *f;
	int max_gpus;
	double *frag;          /* per node GPU, per shape: the current fragments */
	struct node_sums sums; /* of the node being scored */
	double fit_before[ISO_FGD_MAX_SHAPES], fit_after[ISO_FGD_MAX_SHAPES];
	double before;
};

static bool fgd_prepare(void *ctxp, const struct iso_cluster_state *cs, int ni,
                        const struct iso_gpu_occupancy *gpus, const struct iso_allocation *a,
                        int pick)
{
	struct fgd_call *c = ctxp;
	struct iso_fgd *f = c->f;
	const struct iso_node *node = &cs->inv->nodes[ni];
	const struct iso_node_usage *u = &cs->usage[ni];
	const int64_t cpus = (int64_t)node->cpus - u->cpus_used;
	const int64_t mib = node->memory_mib - u->memory_mib_used;

	if (node->n_gpus > c->max_gpus)
		return false;
	memset(&c->sums, 0, sizeof(c->sums));
	for (int j = 0; j < node->n_gpus; j++) {
		double *dst = &c->frag[(size_t)j * ISO_FGD_MAX_SHAPES];
		const double *fr = gpu_fragments(f, &node->gpus[j], &gpus[j], dst);

		if (fr != dst)
			memcpy(dst, fr, (size_t)f->n_shapes * sizeof(*dst));
		sums_add(f, &c->sums, dst, node->gpus[j].model, &gpus[j], 1);
	}
	/* The member's cpus and memory are taken with its first instance. */
	fitting_weight(f, pick ? cpus - a->shape.cpus : cpus,
	               pick ? mib - a->shape.memory_mib : mib, c->fit_before);
	fitting_weight(f, cpus - a->shape.cpus, mib - a->shape.memory_mib, c->fit_after);
	c->before = node_value(f, &c->sums, c->fit_before);
	return true;
}

static bool fgd_score(void *ctxp, const struct iso_cluster_state *cs, int ni,
                      const struct iso_gpu_occupancy *gpus, int pos,
                      const struct iso_mig_profile *p, int start, double *out)
{
	struct fgd_call *c = ctxp;
	struct iso_fgd *f = c->f;
	const struct iso_node *node = &cs->inv->nodes[ni];
	struct node_sums ns = c->sums;
	struct iso_gpu_occupancy after;
	double buf[ISO_FGD_MAX_SHAPES];
	const double *fr;

	if (pos < 0) {
		*out = node_value(f, &ns, c->fit_after) - c->before;
		return true;
	}
	after = gpus[pos];
	if (p) {
		iso_mig_take(node->gpus[pos].model, &after, p, start);
	} else {
		after.whole = true;
		after.free_mask = 0;
		after.compute_used = node->gpus[pos].model->compute_slices;
	}
	sums_add(f, &ns, &c->frag[(size_t)pos * ISO_FGD_MAX_SHAPES], node->gpus[pos].model,
	         &gpus[pos], -1);
	fr = gpu_fragments(f, &node->gpus[pos], &after, buf);
	sums_add(f, &ns, fr, node->gpus[pos].model, &after, 1);
	*out = node_value(f, &ns, c->fit_after) - c->before;
	return true;
}

static int fgd_run(struct iso_fgd *f, const char *name, struct iso_cluster_state *cs,
                   struct iso_allocation *a, int want, struct iso_error *err)
{
	struct fgd_call c = {.f = f, .max_gpus = 1};
	struct iso_placer_scorer sc = {
	    .prepare = fgd_prepare, .score = fgd_score, .ctx = &c, .policy = name};
	int r;

	for (int i = 0; i < cs->inv->n_nodes; i++)
		if (cs->inv->nodes[i].n_gpus > c.max_gpus)
			c.max_gpus = cs->inv->nodes[i].n_gpus;
	c.frag = calloc((size_t)c.max_gpus * ISO_FGD_MAX_SHAPES, sizeof(*c.frag));
	if (!c.frag)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	r = iso_placer_place_scored(&sc, cs, a, want, err);
	free(c.frag);
	return r;
}

static int fgd_place(const struct iso_placer *self, struct iso_cluster_state *cs,
                     struct iso_allocation *a, int want, struct iso_error *err)
{
	struct iso_fgd *f = self->state;
	int r;

	if (f)
		return fgd_run(f, self->name, cs, a, want, err);
	r = default_fgd(cs->inv, &f, err);
	if (r < 0)
		return r;
	if (!f)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "no FGD mix");
	r = fgd_run(f, self->name, cs, a, want, err);
	iso_fgd_free(f);
	return r;
}

const struct iso_placer iso_placer_fgd = {.name = "fgd", .place = fgd_place};

void iso_placer_fgd_init(struct iso_placer *p, struct iso_fgd *f)
{
	*p = (struct iso_placer){.name = "fgd", .place = fgd_place, .state = f};
}

double iso_fgd_node_fragmentation(struct iso_fgd *f, const struct iso_cluster_state *cs, int node)
{
	struct iso_fgd *own = NULL;
	const struct iso_node *n;
	struct node_sums ns = {0};
	double fit[ISO_FGD_MAX_SHAPES], buf[ISO_FGD_MAX_SHAPES], v;

	if (node < 0 || node >= cs->inv->n_nodes)
		return NAN;
	if (!f) {
		if (default_fgd(cs->inv, &own, NULL) < 0 || !own)
			return NAN;
		f = own;
	}
	n = &cs->inv->nodes[node];
	for (int j = 0; j < n->n_gpus; j++) {
		const double *fr = gpu_fragments(f, &n->gpus[j], &cs->usage[node].gpus[j], buf);
		sums_add(f, &ns, fr, n->gpus[j].model, &cs->usage[node].gpus[j], 1);
	}
	fitting_weight(f, (int64_t)n->cpus - cs->usage[node].cpus_used,
	               n->memory_mib - cs->usage[node].memory_mib_used, fit);
	v = f->total > 0 ? node_value(f, &ns, fit) / f->total : 0;
	iso_fgd_free(own);
	return v;
}

/* sim.c: a prepared simulation and the policies it runs. Preparing builds
 * the cluster, maps every pod of the trace to a request once, measures the
 * trace's demand (for the static oracle) and request mix (for FGD), and draws
 * the saturate arrival sequence, so that every policy is measured on exactly
 * the same arrivals. Running a policy starts from an empty cluster state. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "sim/internal.h"

const char *const iso_sim_policies[] = {"static",   "first-fit",   "best-fit",         "fgd",
                                        "isostack", "slurm-count", "slurm-count-first"};
const int iso_sim_n_policies = (int)ISO_ARRAY_SIZE(iso_sim_policies);

void sim_alloc_init(struct iso_allocation *a, const struct iso_sim_request *r, int pod)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->id, sizeof(a->id), "p-%d", pod);
	a->tenant_id = 1;
	iso_strlcpy(a->tenant, "sim", sizeof(a->tenant));
	a->state = ISO_ALLOC_PENDING;
	a->members = 1;
	a->shape = r->shape;
}

void sim_held_slices(const struct iso_cluster_state *cs, int64_t *compute, int64_t *memory)
{
	*compute = *memory = 0;
	for (int i = 0; i < cs->inv->n_nodes; i++)
		for (int j = 0; j < cs->inv->nodes[i].n_gpus; j++) {
			const struct iso_gpu_model *m = cs->inv->nodes[i].gpus[j].model;
			const struct iso_gpu_occupancy *o = &cs->usage[i].gpus[j];

			*compute += o->compute_used;
			*memory += m->memory_slices - __builtin_popcount(o->free_mask);
		}
}

/* The trace's requests by kind (GPU shape, cpus, memory), weighted by how
 * many pods ask: FGD's "popularity" of each task type. */
static int cmp_req(const struct iso_sim_request *x, const struct iso_sim_request *y)
{
	int c;

	if (x->shape.whole != y->shape.whole)
		return x->shape.whole ? 1 : -1;
	if (x->shape.gpu_count != y->shape.gpu_count)
		return x->shape.gpu_count < y->shape.gpu_count ? -1 : 1;
	if ((c = strcmp(x->shape.profile, y->shape.profile)) != 0)
		return c;
	if (x->shape.cpus != y->shape.cpus)
		return x->shape.cpus < y->shape.cpus ? -1 : 1;
	if (x->shape.memory_mib != y->shape.memory_mib)
		return x->shape.memory_mib < y->shape.memory_mib ? -1 : 1;
	return 0;
}

static int cmp_req_index(const void *a, const void *b, void *ctx)
{
	const struct iso_sim_request *req = ctx;

	return cmp_req(&req[*(const int *)a], &req[*(const int *)b]);
}

static int build_mix(struct iso_sim *s, struct iso_error *err)
{
	_cleanup_free_ int *by = calloc((size_t)s->trace->n, sizeof(*by));
	struct iso_fgd_mix *mix = &s->mix;

	if (!by)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	mix->types = calloc((size_t)s->trace->n, sizeof(*mix->types));
	s->mix_shapes = calloc((size_t)s->trace->n, sizeof(*s->mix_shapes));
	if (!mix->types || !s->mix_shapes)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < s->trace->n; i++)
		by[i] = i;
	qsort_r(by, (size_t)s->trace->n, sizeof(*by), cmp_req_index, s->req);
	for (int i = 0; i < s->trace->n; i++) {
		const struct iso_shape *sh = &s->req[by[i]].shape;
		struct iso_fgd_type *t;

		if (i == 0 || cmp_req(&s->req[by[i - 1]], &s->req[by[i]]) != 0) {
			t = &mix->types[mix->n++];
			t->whole = sh->whole;
			t->count = sh->gpu_count;
			iso_strlcpy(t->profile, sh->profile, sizeof(t->profile));
			t->cpus = sh->cpus;
			t->memory_mib = sh->memory_mib;
			s->mix_shapes[mix->n - 1] = *sh; /* the same type, for iso_placer_learn */
		}
		mix->types[mix->n - 1].weight += 1;
	}
	return 0;
}

int sim_arrivals(const struct iso_sim *s, int pct, const char *bound, int *n, struct iso_error *err)
{
	const int64_t total = (int64_t)s->cluster.n_gpus * s->cluster.model->compute_slices;
	int64_t offered = 0;

	*n = 0;
	if (s->cfg.mode != ISO_SIM_SATURATE)
		return iso_error_set(err, ISO_E_INVALID, "mode", "the %s needs saturate mode",
		                     bound);
	if (pct < 1 || pct > s->cfg.max_demand_pct)
		return iso_error_set(err, ISO_E_INVALID, "pct", "must be 1-%d, got %d",
		                     s->cfg.max_demand_pct, pct);
	while (*n < s->n_seq && offered * 100 < total * pct)
		offered += s->req[s->seq[(*n)++]].compute;
	return 0;
}

int sim_state_init(const struct iso_sim *s, const struct iso_placer *pl,
                   struct iso_cluster_state *cs, struct iso_error *err)
{
	_cleanup_free_ double *weights = NULL;
	int r;

	if (!s->cfg.cold && pl->learn) {
		weights = calloc((size_t)s->mix.n + 1, sizeof(*weights));
		if (!weights)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		for (int k = 0; k < s->mix.n; k++)
			weights[k] = s->mix.types[k].weight;
	}
	r = iso_cluster_state_init(cs, &s->cluster.inv);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "cluster state: %s", strerror(-r));
	r = weights ? iso_placer_learn(pl, cs, s->mix_shapes, weights, s->mix.n) : 0;
	if (r < 0) {
		iso_cluster_state_free(cs);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "policy %s: learning the mix: %s",
		                     pl->name, strerror(-r));
	}
	return 0;
}

static void build_demand(struct iso_sim *s)
{
	const struct iso_gpu_model *m = s->cluster.model;

	memset(&s->demand, 0, sizeof(s->demand));
	for (int i = 0; i < s->trace->n; i++) {
		const struct iso_sim_request *r = &s->req[i];
		if (r->profile)
			s->demand.profile[r->profile - m->profiles] += r->compute;
		else if (r->shape.gpu_count)
			s->demand.whole += r->compute;
	}
}

/* Saturate: pods drawn with replacement until the offered demand (compute
 * slices asked for) reaches max_demand_pct of the cluster's. A pod that could
 * not fit even the empty cluster is not offered: the daemon refuses it (422). */
static int draw_sequence(struct iso_sim *s, struct iso_error *err)
{
	const int64_t total = (int64_t)s->cluster.n_gpus * s->cluster.model->compute_slices;
	const int64_t target = total * s->cfg.max_demand_pct;
	_cleanup_free_ signed char *fits = calloc((size_t)s->trace->n, 1);
	struct iso_sim_rng rng;
	int64_t offered = 0;
	int cap = 0;
	bool any = false;

	if (!fits)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < s->trace->n; i++) {
		fits[i] = iso_shape_ever_fits(&s->req[i].shape, &s->cluster.inv) ? 1 : 0;
		if (fits[i] && s->req[i].compute > 0)
			any = true;
	}
	if (!any)
		return iso_error_set(err, ISO_E_INVALID, "",
		                     "%s: no pod that asks for GPUs fits the cluster of %s",
		                     s->trace->path, s->cluster.inv.path);
	iso_sim_rng_seed(&rng, s->cfg.seed);
	while (offered * 100 < target) {
		const int i = (int)iso_sim_rng_below(&rng, (uint64_t)s->trace->n);

		if (!fits[i]) {
			s->unfit++;
			continue;
		}
		if (s->n_seq == cap) {
			int nc = cap ? cap * 2 : 1024;
			int *nv = realloc(s->seq, (size_t)nc * sizeof(*nv));
			if (!nv)
				return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			s->seq = nv;
			cap = nc;
		}
		s->seq[s->n_seq++] = i;
		offered += s->req[i].compute;
	}
	return 0;
}

int iso_sim_prepare(const struct iso_sim_nodes *nodes, const struct iso_sim_trace *trace,
                    const struct iso_sim_config *cfg, struct iso_sim **out, struct iso_error *err)
{
	_cleanup_(iso_sim_freep) struct iso_sim *s = NULL;
	_cleanup_free_ int *pick = NULL;
	int n_pick = 0, r;

	*out = NULL;
	if (!cfg->model)
		return iso_error_set(err, ISO_E_INVALID, "gpu_model", "no GPU model given");
	if (cfg->max_demand_pct < 0 || cfg->max_demand_pct > ISO_SIM_CURVE_MAX)
		return iso_error_set(err, ISO_E_INVALID, "max_demand", "must be 1-%d (%%), got %d",
		                     ISO_SIM_CURVE_MAX, cfg->max_demand_pct);
	if (trace->n == 0)
		return iso_error_set(err, ISO_E_INVALID, "", "%s: no pods", trace->path);
	if (cfg->mode == ISO_SIM_REPLAY && !trace->has_times)
		return iso_error_set(err, ISO_E_INVALID, "",
		                     "%s: replay needs the columns creation_time and deletion_time",
		                     trace->path);
	s = calloc(1, sizeof(*s));
	if (!s)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	s->trace = trace;
	s->cfg = *cfg;
	if (!s->cfg.max_demand_pct)
		s->cfg.max_demand_pct = 130;
	if (cfg->sub_gpus > 0) {
		r = iso_sim_cluster_pick(nodes, cfg->sub_gpus, cfg->seed, &pick, &n_pick, err);
		if (r < 0)
			return r;
	}
	r = iso_sim_cluster_build(nodes, cfg->model, pick, n_pick, &s->cluster, err);
	if (r < 0)
		return r;
	s->req = calloc((size_t)trace->n, sizeof(*s->req));
	if (!s->req)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < trace->n; i++) {
		r = iso_sim_pod_request(&trace->v[i], cfg->model, &s->req[i], err);
		if (r < 0)
			return r;
	}
	build_demand(s);
	r = build_mix(s, err);
	if (r < 0)
		return r;
	if (cfg->mode == ISO_SIM_SATURATE) {
		r = draw_sequence(s, err);
		if (r < 0)
			return r;
	}
	*out = ISO_TAKE(s);
	return 0;
}

void iso_sim_free(struct iso_sim *s)
{
	if (!s)
		return;
	iso_sim_cluster_free(&s->cluster);
	free(s->mix.types);
	free(s->mix_shapes);
	free(s->req);
	free(s->seq);
	free(s);
}

const struct iso_sim_cluster *iso_sim_cluster_of(const struct iso_sim *s)
{
	return &s->cluster;
}

const int *iso_sim_sequence(const struct iso_sim *s, int *n)
{
	*n = s->n_seq;
	return s->seq;
}

/* ---- policies ---- */

static int static_policy(struct iso_sim *s, struct sim_policy *p, struct iso_error *err)
{
	const struct iso_gpu_model *m = s->cluster.model;
	_cleanup_free_ struct iso_mig_layout *layouts = NULL;
	_cleanup_free_ int *counts = NULL;
	int n = 0, unpartitioned = 0, r;

	r = iso_mig_layouts_maximal(m, iso_mig_profiles_plain(m), &layouts, &n);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "cannot enumerate layouts of %s",
		                     m->name);
	counts = calloc((size_t)n + 1, sizeof(*counts));
	if (!counts)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	r = iso_sim_oracle_counts(m, &s->demand, layouts, n, s->cluster.n_gpus, counts,
	                          &unpartitioned);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "static oracle failed");
	r = iso_sim_oracle_assign(&s->cluster, layouts, n, counts, unpartitioned, &p->layout, err);
	if (r < 0)
		return r;
	p->has_layout = true;
	iso_placer_static_init(&p->placer, &p->layout);
	p->use = &p->placer;
	return 0;
}

int sim_policy_init(struct iso_sim *s, const char *name, struct sim_policy *p,
                    struct iso_error *err)
{
	memset(p, 0, sizeof(*p));
	if (strcmp(name, "static") == 0)
		return static_policy(s, p, err);
	if (strcmp(name, "first-fit") == 0) {
		p->use = &iso_placer_first_fit;
	} else if (strcmp(name, "best-fit") == 0) {
		p->use = &iso_placer_best_fit;
	} else if (strcmp(name, "fgd") == 0) {
		int r = iso_fgd_new(&s->mix, &p->fgd, err);
		if (r < 0)
			return r;
		iso_placer_fgd_init(&p->placer, p->fgd);
		p->use = &p->placer;
	} else if (strcmp(name, "isostack") == 0) {
		p->use = iso_placer_find("isostack");
		if (!p->use)
			return iso_error_set(err, ISO_E_NOT_FOUND, "policy",
			                     "policy isostack not available in this build");
	} else if (strcmp(name, "slurm-count") == 0 || strcmp(name, "slurm-count-first") == 0) {
		p->slurm.rule =
		    strcmp(name, "slurm-count") == 0 ? ISO_SLURM_BEST_FIT : ISO_SLURM_FIRST;
		p->has_slurm = true;
		iso_placer_slurm_count_init(&p->placer, &p->slurm);
		p->use = &p->placer;
	} else {
		return iso_error_set(err, ISO_E_INVALID, "policy",
		                     "unknown policy '%s' (static, first-fit, best-fit, fgd, "
		                     "isostack, slurm-count, slurm-count-first)",
		                     name);
	}
	return 0;
}

void sim_policy_clear(struct sim_policy *p)
{
	if (p->has_layout)
		iso_static_layout_free(&p->layout);
	iso_fgd_free(p->fgd);
	memset(p, 0, sizeof(*p));
}

int iso_sim_run(struct iso_sim *s, const char *policy, struct iso_sim_result *res,
                struct iso_error *err)
{
	struct sim_policy p;
	struct timespec t0, t1;
	int r;

	memset(res, 0, sizeof(*res));
	r = sim_policy_init(s, policy, &p, err);
	if (r < 0)
		return r;
	iso_strlcpy(res->policy, policy, sizeof(res->policy));
	res->mode = s->cfg.mode;
	res->nodes = s->cluster.inv.n_nodes;
	res->gpus = s->cluster.n_gpus;
	res->slices_total = (int64_t)s->cluster.n_gpus * s->cluster.model->compute_slices;
	res->mem_slices_total = (int64_t)s->cluster.n_gpus * s->cluster.model->memory_slices;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	res->counts_requeues = p.has_slurm;
	if (s->cfg.mode == ISO_SIM_SATURATE)
		r = sim_run_saturate(s, &p, res, err);
	else
		r = sim_run_replay(s, &p, res, err);
	if (r == 0)
		res->requeue_share =
		    res->pods > res->cpu_only
		        ? (double)res->requeued / (double)(res->pods - res->cpu_only)
		        : 0;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->elapsed_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	sim_policy_clear(&p);
	if (r < 0)
		iso_sim_result_clear(res);
	return r;
}

void iso_sim_result_clear(struct iso_sim_result *res)
{
	free(res->places);
	res->places = NULL;
}

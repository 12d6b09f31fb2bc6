/* ilp.c: the exact upper bounds the heuristics are measured against. Given a
 * small cluster and a set of pods, the most compute slices that any subset of
 * the pods can hold at once, whatever the order, solved as an integer program
 * with GLPK (branch and cut). Sizes that GLPK solves in seconds are a few
 * dozen pods on 4-32 GPUs; the simulator's --ilp-gpus runs exactly that. The
 * in-order variant (further down) adds the rule every online policy lives by,
 * "a pod that fits is placed", and solves only much smaller instances.
 *
 * Variables (binary):
 *   x[i,g,s]  MIG pod i on GPU g at memory slice s (an allowed start of i's
 *             profile on g's model)
 *   z[i,n]    whole-GPU pod i (k GPUs) on node n, w[i,g] its GPUs on n
 * Rows:
 *   each pod at most once:           sum x[i,.,.] + sum z[i,.] <= 1
 *   each memory slice j of GPU g:    sum of x whose span covers j + sum w[.,g] <= 1
 *   compute of GPU g:                sum compute(i) x[i,g,.] + C w[.,g] <= C
 *   max count of profile p on g:     sum x[i,g,.] over i of profile p <= max_count(p)
 *   one "+me" per GPU:               sum x of +me profiles on g <= 1
 *   node cpus and memory:            sum over pods on n <= capacity
 *   k GPUs per whole pod:            sum w[i,g in n] - k z[i,n] = 0
 * Objective: maximise sum compute(i) x + k C z. Symmetry is cut where it is
 * exact: identical pods are placed in order, identical GPUs of a node and
 * identical nodes are ordered by the compute slices they hold. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sim/internal.h"

#ifdef ISO_SIM_HAVE_GLPK
#include <glpk.h>

bool iso_sim_ilp_available(void)
{
	return true;
}

/* What a placement column places, for the in-order rows that sum the state
 * a later arrival finds. */
struct col_info {
	int col;          /* GLPK column */
	int pod;          /* arrival index */
	int node;         /* node index */
	int gpu;          /* global GPU index; -1: a node-level column */
	int pos;          /* the GPU's position on its node (with gpu >= 0) */
	int start, width; /* memory slices held on gpu */
	int compute;      /* compute slices held on gpu */
	int profile;      /* index in the GPU model's table; -1: none */
	bool me;          /* holds the GPU's "+me" slot */
	bool assign;      /* the pod's own column: carries its cpus and memory */
	int cpus;
	int64_t memory_mib;
};

struct ilp {
	glp_prob *lp;
	int *ia, *ja;
	double *ar;
	int ne, cap;
	bool oom;
	struct col_info *pc; /* placement columns, in arrival order of their pods */
	int n_pc, pc_cap;
};

static void nz(struct ilp *m, int row, int col, double v)
{
	if (m->oom)
		return;
	if (m->ne + 1 >= m->cap) {
		int nc = m->cap ? m->cap * 2 : 4096;
		int *ia = realloc(m->ia, (size_t)nc * sizeof(*ia));
		if (ia)
			m->ia = ia;
		int *ja = realloc(m->ja, (size_t)nc * sizeof(*ja));
		if (ja)
			m->ja = ja;
		double *ar = realloc(m->ar, (size_t)nc * sizeof(*ar));
		if (ar)
			m->ar = ar;
		if (!ia || !ja || !ar) {
			m->oom = true;
			return;
		}
		m->cap = nc;
	}
	m->ne++;
	m->ia[m->ne] = row;
	m->ja[m->ne] = col;
	m->ar[m->ne] = v;
}

static int add_row(struct ilp *m, int type, double lb, double ub)
{
	int r = glp_add_rows(m->lp, 1);

	glp_set_row_bnds(m->lp, r, type, lb, ub);
	return r;
}

static int add_col(struct ilp *m, double obj)
{
	int c = glp_add_cols(m->lp, 1);

	glp_set_col_kind(m->lp, c, GLP_BV);
	glp_set_obj_coef(m->lp, c, obj);
	return c;
}

/* A placement column, remembered with what it places. */
static int add_placement(struct ilp *m, double obj, struct col_info info)
{
	if (m->oom)
		return 0;
	if (m->n_pc == m->pc_cap) {
		int nc = m->pc_cap ? m->pc_cap * 2 : 1024;
		struct col_info *pc = realloc(m->pc, (size_t)nc * sizeof(*pc));
		if (!pc) {
			m->oom = true;
			return 0;
		}
		m->pc = pc;
		m->pc_cap = nc;
	}
	info.col = add_col(m, obj);
	m->pc[m->n_pc++] = info;
	return info.col;
}

/* Row numbers of the per-GPU and per-node constraints. */
struct gpu_rows {
	int slice[ISO_MIG_MAX_SLICES];
	int compute;
	int count[ISO_MIG_MAX_PROFILES];
	int me;
	int used; /* free row: compute slices held, for the symmetry cuts (0: none) */
};

struct cb_data {
	double bound;
};

static void callback(glp_tree *t, void *info)
{
	struct cb_data *d = info;
	int b = glp_ios_best_node(t);

	if (b) {
		double v = glp_ios_node_bound(t, b);
		if (v < d->bound)
			d->bound = v;
	}
}

static bool same_pod(const struct iso_shape *a, const struct iso_shape *b)
{
	return a->whole == b->whole && a->gpu_count == b->gpu_count && a->cpus == b->cpus &&
	       a->memory_mib == b->memory_mib && strcmp(a->profile, b->profile) == 0 &&
	       strcmp(a->gpu_model, b->gpu_model) == 0 && strcmp(a->pool, b->pool) == 0;
}

static bool same_node(const struct iso_node *a, const struct iso_node *b)
{
	if (a->cpus != b->cpus || a->memory_mib != b->memory_mib || a->n_gpus != b->n_gpus ||
	    strcmp(a->pool, b->pool) != 0)
		return false;
	for (int j = 0; j < a->n_gpus; j++)
		if (a->gpus[j].model != b->gpus[j].model ||
		    a->gpus[j].mig_enabled != b->gpus[j].mig_enabled)
			return false;
	return true;
}

static bool uniform_gpus(const struct iso_node *n)
{
	for (int j = 1; j < n->n_gpus; j++)
		if (n->gpus[j].model != n->gpus[0].model ||
		    n->gpus[j].mig_enabled != n->gpus[0].mig_enabled)
			return false;
	return true;
}

/* ---- in arrival order ----
 *
 * The bound for policies that place every arrival that fits: pod i may be
 * left out only if, in the state the pods before it left, every one of its
 * options is blocked. Option by option, a blocked option has a reason, a
 * binary that may be 1 only when the state makes it true:
 *   a MIG start:  a memory slice of its span held, the GPU's compute too full,
 *                 the profile at its max count, the "+me" slot taken;
 *   whole GPUs:   more than n - k of the node's GPUs hold something;
 *   any option:   the node's cpus or memory too full;
 * and "accepted + reasons >= 1". The state at arrival i is a running sum of
 * the placement columns of pods 0..i-1, kept as continuous columns chained
 * from one checkpoint to the next, so each row stays short. */

/* One quantity of the state: a node's cpus or memory, a GPU's compute, memory
 * slice k, count of profile p, or "+me" slot. */
struct state_keys {
	int n_nodes, n_gpus;
};

enum { KEY_CPU, KEY_MEM, KEY_COMPUTE, KEY_SLICE, KEY_COUNT, KEY_ME };

static int key_of(const struct state_keys *k, int kind, int idx, int sub)
{
	const int N = k->n_nodes, G = k->n_gpus;

	switch (kind) {
	case KEY_CPU:
		return idx;
	case KEY_MEM:
		return N + idx;
	case KEY_COMPUTE:
		return 2 * N + idx;
	case KEY_SLICE:
		return 2 * N + G + idx * ISO_MIG_MAX_SLICES + sub;
	case KEY_COUNT:
		return 2 * N + G * (1 + ISO_MIG_MAX_SLICES) + idx * ISO_MIG_MAX_PROFILES + sub;
	default:
		return 2 * N + G * (1 + ISO_MIG_MAX_SLICES + ISO_MIG_MAX_PROFILES) + idx;
	}
}

static int keys_total(const struct state_keys *k)
{
	return key_of(k, KEY_ME, k->n_gpus, 0);
}

/* What column c adds to the quantity (kind, idx, sub). */
static double coef_of(const struct col_info *c, int kind, int idx, int sub)
{
	switch (kind) {
	case KEY_CPU:
		return c->assign && c->node == idx ? c->cpus : 0;
	case KEY_MEM:
		return c->assign && c->node == idx ? (double)c->memory_mib : 0;
	case KEY_COMPUTE:
		return c->gpu == idx ? c->compute : 0;
	case KEY_SLICE:
		return c->gpu == idx && sub >= c->start && sub < c->start + c->width ? 1 : 0;
	case KEY_COUNT:
		return c->gpu == idx && c->profile == sub ? 1 : 0;
	default:
		return c->gpu == idx && c->me ? 1 : 0;
	}
}

struct checkpoint {
	int t;   /* the arrival it was taken before */
	int col; /* 0: the quantity is still 0 */
};

struct in_order {
	struct ilp *m;
	struct state_keys keys;
	struct checkpoint *cp; /* per key */
	int *pc_first;         /* per pod: first placement column in m->pc */
};

/* The column holding the quantity as arrival t finds it; 0 when it is 0. */
static int state_at(struct in_order *o, int kind, int idx, int sub, int t)
{
	struct ilp *m = o->m;
	struct checkpoint *cp = &o->cp[key_of(&o->keys, kind, idx, sub)];
	const int from = o->pc_first[cp->t], to = o->pc_first[t];
	int v = 0, row = 0;

	for (int k = from; k < to; k++) {
		double a = coef_of(&m->pc[k], kind, idx, sub);

		if (a == 0)
			continue;
		if (!v) {
			v = glp_add_cols(m->lp, 1);
			glp_set_col_bnds(m->lp, v, GLP_LO, 0, 0);
			row = add_row(m, GLP_FX, 0, 0);
			nz(m, row, v, 1);
			if (cp->col)
				nz(m, row, cp->col, -1);
		}
		nz(m, row, m->pc[k].col, -a);
	}
	if (v)
		cp->col = v;
	cp->t = t;
	return cp->col;
}

/* A reason that may be 1 only when the column `state` reaches `threshold`;
 * 0 when it never can. */
static int reason_at_least(struct ilp *m, int state, double threshold)
{
	int y, row;

	if (!state)
		return 0;
	y = add_col(m, 0);
	row = add_row(m, GLP_LO, 0, 0);
	nz(m, row, state, 1);
	nz(m, row, y, -threshold);
	return y;
}

/* accepted(i) + reasons >= 1 */
static void option_row(struct in_order *o, int pod, const int *reasons, int n_reasons)
{
	struct ilp *m = o->m;
	int row = add_row(m, GLP_LO, 1, 0);

	for (int k = o->pc_first[pod]; k < o->pc_first[pod + 1]; k++)
		if (m->pc[k].assign)
			nz(m, row, m->pc[k].col, 1);
	for (int k = 0; k < n_reasons; k++)
		if (reasons[k])
			nz(m, row, reasons[k], 1);
}

static int add_in_order_rows(struct ilp *m, const struct iso_inventory *inv,
                             const struct iso_shape *pods, int n, const int *first, int n_gpus)
{
	struct in_order o = {.m = m, .keys = {.n_nodes = inv->n_nodes, .n_gpus = n_gpus}};
	_cleanup_free_ struct checkpoint *cp = NULL;
	_cleanup_free_ int *pc_first = calloc((size_t)n + 2, sizeof(int));
	_cleanup_free_ int *busy = calloc((size_t)n_gpus + 1, sizeof(int));

	cp = calloc((size_t)keys_total(&o.keys) + 1, sizeof(*cp));
	if (!cp || !pc_first || !busy)
		return -ENOMEM;
	/* Placement columns were made pod by pod, in arrival order. */
	for (int i = 0, k = 0; i <= n; i++) {
		while (k < m->n_pc && m->pc[k].pod < i)
			k++;
		pc_first[i] = k;
	}
	pc_first[n + 1] = m->n_pc;
	o.cp = cp;
	o.pc_first = pc_first;

	for (int i = 0; i < n && !m->oom; i++) {
		const struct iso_shape *sh = &pods[i];

		for (int ni = 0; ni < inv->n_nodes; ni++) {
			const struct iso_node *node = &inv->nodes[ni];
			int node_reason[2] = {0, 0};
			bool any = false;

			/* Only nodes where the pod has an option: it has columns there. */
			for (int k = pc_first[i]; k < pc_first[i + 1]; k++)
				any |= m->pc[k].node == ni;
			if (!any)
				continue;
			if (sh->cpus > 0)
				node_reason[0] = reason_at_least(m, state_at(&o, KEY_CPU, ni, 0, i),
				                                 (double)node->cpus - sh->cpus + 1);
			if (sh->memory_mib > 0)
				node_reason[1] = reason_at_least(
				    m, state_at(&o, KEY_MEM, ni, 0, i),
				    (double)(node->memory_mib - sh->memory_mib + 1));
			if (sh->gpu_count <= 0) {
				option_row(&o, i, node_reason, 2);
				continue;
			}
			if (sh->whole) {
				int r[3] = {node_reason[0], node_reason[1], 0}, n_busy = 0;

				for (int j = 0; j < node->n_gpus; j++) {
					busy[j] = reason_at_least(
					    m, state_at(&o, KEY_COMPUTE, first[ni] + j, 0, i), 1);
					n_busy += busy[j] != 0;
				}
				if (n_busy >= node->n_gpus - sh->gpu_count + 1) {
					int row = add_row(m, GLP_LO, 0, 0);

					r[2] = add_col(m, 0);
					for (int j = 0; j < node->n_gpus; j++)
						if (busy[j])
							nz(m, row, busy[j], 1);
					nz(m, row, r[2],
					   -(double)(node->n_gpus - sh->gpu_count + 1));
				}
				option_row(&o, i, r, 3);
				continue;
			}
			for (int j = 0; j < node->n_gpus; j++) {
				const int g = first[ni] + j;
				const struct iso_gpu_model *gm = node->gpus[j].model;
				const struct iso_mig_profile *p = NULL;
				int r[6] = {node_reason[0], node_reason[1]}, pi;

				for (int k = pc_first[i]; k < pc_first[i + 1] && !p; k++)
					if (m->pc[k].gpu == g)
						p = &gm->profiles[m->pc[k].profile];
				if (!p)
					continue; /* no option on this GPU */
				pi = (int)(p - gm->profiles);
				r[2] = reason_at_least(m, state_at(&o, KEY_COMPUTE, g, 0, i),
				                       gm->compute_slices - p->compute + 1);
				r[3] = reason_at_least(m, state_at(&o, KEY_COUNT, g, pi, i),
				                       p->max_count);
				if (p->media_engine)
					r[4] = reason_at_least(m, state_at(&o, KEY_ME, g, 0, i), 1);
				for (int k = pc_first[i]; k < pc_first[i + 1]; k++) {
					const struct col_info *c = &m->pc[k];
					int row = 0;

					if (c->gpu != g)
						continue;
					/* Some slice of this start's span already held. */
					r[5] = 0;
					for (int sl = c->start; sl < c->start + c->width; sl++) {
						int st = state_at(&o, KEY_SLICE, g, sl, i);
						if (!st)
							continue;
						if (!r[5]) {
							r[5] = add_col(m, 0);
							row = add_row(m, GLP_UP, 0, 0);
							nz(m, row, r[5], 1);
						}
						nz(m, row, st, -1);
					}
					option_row(&o, i, r, 6);
				}
			}
		}
	}
	return m->oom ? -ENOMEM : 0;
}

static int build(struct ilp *m, const struct iso_inventory *inv, const struct iso_shape *pods,
                 int n, bool in_order, int *n_pods)
{
	const int n_nodes = inv->n_nodes;
	int n_gpus = 0, g0;
	_cleanup_free_ int *first = calloc((size_t)n_nodes + 1, sizeof(int));
	_cleanup_free_ struct gpu_rows *gr = NULL;
	_cleanup_free_ int *cpu_row = calloc((size_t)n_nodes + 1, sizeof(int));
	_cleanup_free_ int *mem_row = calloc((size_t)n_nodes + 1, sizeof(int));
	_cleanup_free_ int *node_used = calloc((size_t)n_nodes + 1, sizeof(int));
	_cleanup_free_ int *assign = calloc((size_t)n + 1, sizeof(int));

	if (!first || !cpu_row || !mem_row || !node_used || !assign)
		return -ENOMEM;
	for (int i = 0; i < n_nodes; i++) {
		first[i] = n_gpus;
		n_gpus += inv->nodes[i].n_gpus;
	}
	gr = calloc((size_t)n_gpus + 1, sizeof(*gr));
	if (!gr)
		return -ENOMEM;

	/* Per GPU and per node rows. */
	for (int i = 0; i < n_nodes; i++) {
		const struct iso_node *node = &inv->nodes[i];

		cpu_row[i] = add_row(m, GLP_UP, 0, node->cpus);
		mem_row[i] = add_row(m, GLP_UP, 0, (double)node->memory_mib);
		node_used[i] = add_row(m, GLP_FR, 0, 0);
		for (int j = 0; j < node->n_gpus; j++) {
			const struct iso_gpu_model *gm = node->gpus[j].model;
			struct gpu_rows *r = &gr[first[i] + j];

			for (int s = 0; s < gm->memory_slices; s++)
				r->slice[s] = add_row(m, GLP_UP, 0, 1);
			r->compute = add_row(m, GLP_UP, 0, gm->compute_slices);
			for (int p = 0; p < gm->n_profiles; p++)
				r->count[p] = add_row(m, GLP_UP, 0, gm->profiles[p].max_count);
			r->me = add_row(m, GLP_UP, 0, 1);
			r->used = add_row(m, GLP_FR, 0, 0);
		}
	}

	*n_pods = 0;
	for (int i = 0; i < n; i++) {
		const struct iso_shape *sh = &pods[i];

		if (sh->gpu_count <= 0 && !in_order)
			continue; /* CPU only: adds nothing to the objective */
		if (sh->gpu_count > 0)
			(*n_pods)++;
		assign[i] = add_row(m, GLP_UP, 0, 1);
		for (int ni = 0; ni < n_nodes; ni++) {
			const struct iso_node *node = &inv->nodes[ni];
			const struct col_info at_node = {.pod = i,
			                                 .node = ni,
			                                 .gpu = -1,
			                                 .profile = -1,
			                                 .assign = true,
			                                 .cpus = sh->cpus,
			                                 .memory_mib = sh->memory_mib};

			if (sh->pool[0] && strcmp(sh->pool, node->pool) != 0)
				continue;
			if ((int64_t)sh->cpus > node->cpus || sh->memory_mib > node->memory_mib)
				continue;
			if (sh->gpu_count <= 0) {
				/* In order only: CPU-only pods take cores later pods need. */
				int c = add_placement(m, 0, at_node);
				nz(m, assign[i], c, 1);
				nz(m, cpu_row[ni], c, sh->cpus);
				nz(m, mem_row[ni], c, (double)sh->memory_mib);
				continue;
			}
			if (sh->whole) {
				int link, z, eligible = 0;
				double obj = 0;

				for (int j = 0; j < node->n_gpus; j++)
					if (!sh->gpu_model[0] ||
					    strcasecmp(node->gpus[j].model->name, sh->gpu_model) ==
					        0)
						eligible++;
				if (eligible < sh->gpu_count || !uniform_gpus(node))
					continue;
				obj = (double)sh->gpu_count * node->gpus[0].model->compute_slices;
				z = add_placement(m, obj, at_node);
				link = add_row(m, GLP_FX, 0, 0);
				nz(m, assign[i], z, 1);
				nz(m, cpu_row[ni], z, sh->cpus);
				nz(m, mem_row[ni], z, (double)sh->memory_mib);
				nz(m, link, z, -sh->gpu_count);
				for (int j = 0; j < node->n_gpus; j++) {
					const struct iso_gpu_model *gm = node->gpus[j].model;
					const struct gpu_rows *r = &gr[first[ni] + j];
					int w;

					if (sh->gpu_model[0] &&
					    strcasecmp(gm->name, sh->gpu_model) != 0)
						continue;
					w = add_placement(
					    m, 0,
					    (struct col_info){.pod = i,
					                      .node = ni,
					                      .gpu = first[ni] + j,
					                      .pos = j,
					                      .width = gm->memory_slices,
					                      .compute = gm->compute_slices,
					                      .profile = -1});
					nz(m, link, w, 1);
					for (int s = 0; s < gm->memory_slices; s++)
						nz(m, r->slice[s], w, 1);
					nz(m, r->compute, w, gm->compute_slices);
					nz(m, r->used, w, gm->compute_slices);
					nz(m, node_used[ni], w, gm->compute_slices);
				}
				continue;
			}
			if (sh->gpu_count != 1)
				return -ENOTSUP; /* the simulator never asks for more */
			for (int j = 0; j < node->n_gpus; j++) {
				const struct iso_gpu *g = &node->gpus[j];
				const struct iso_gpu_model *gm = g->model;
				const struct iso_mig_profile *p;
				const struct gpu_rows *r = &gr[first[ni] + j];
				int pi;

				if (!g->mig_enabled ||
				    (sh->gpu_model[0] && strcasecmp(gm->name, sh->gpu_model) != 0))
					continue;
				p = iso_mig_profile_find(gm, sh->profile);
				if (!p)
					continue;
				pi = (int)(p - gm->profiles);
				for (int s = 0; s + p->width <= gm->memory_slices; s++) {
					int x;

					if (!((p->starts >> s) & 1u))
						continue;
					x = add_placement(
					    m, p->compute,
					    (struct col_info){.pod = i,
					                      .node = ni,
					                      .gpu = first[ni] + j,
					                      .pos = j,
					                      .start = s,
					                      .width = p->width,
					                      .compute = p->compute,
					                      .profile = pi,
					                      .me = p->media_engine,
					                      .assign = true,
					                      .cpus = sh->cpus,
					                      .memory_mib = sh->memory_mib});
					nz(m, assign[i], x, 1);
					nz(m, cpu_row[ni], x, sh->cpus);
					nz(m, mem_row[ni], x, (double)sh->memory_mib);
					for (int k = s; k < s + p->width; k++)
						nz(m, r->slice[k], x, 1);
					nz(m, r->compute, x, p->compute);
					nz(m, r->count[pi], x, 1);
					if (p->media_engine)
						nz(m, r->me, x, 1);
					nz(m, r->used, x, p->compute);
					nz(m, node_used[ni], x, p->compute);
				}
			}
		}
	}

	/* The "used" rows are free rows carrying sums; a symmetry cut is the
	 * difference of two of them, written out over their columns. */
	for (int i = 0; i < n && !in_order; i++) {
		int j = i + 1;

		if (!assign[i])
			continue;
		while (j < n && !(assign[j] && same_pod(&pods[i], &pods[j])))
			j++;
		if (j < n) {
			/* The next identical pod is placed only if this one is. */
			int row = add_row(m, GLP_LO, 0, 0), ne = m->ne;
			for (int k = 1; k <= ne; k++) {
				if (m->ia[k] == assign[i])
					nz(m, row, m->ja[k], 1);
				else if (m->ia[k] == assign[j])
					nz(m, row, m->ja[k], -1);
			}
		}
	}
	g0 = 0;
	for (int ni = 0; ni < n_nodes; ni++) {
		const struct iso_node *node = &inv->nodes[ni];

		if (uniform_gpus(node))
			for (int j = 0; j + 1 < node->n_gpus; j++) {
				/* used(g) >= used(g+1) */
				int row = add_row(m, GLP_LO, 0, 0), ne = m->ne;
				for (int k = 1; k <= ne; k++) {
					if (m->ia[k] == gr[g0 + j].used)
						nz(m, row, m->ja[k], m->ar[k]);
					else if (m->ia[k] == gr[g0 + j + 1].used)
						nz(m, row, m->ja[k], -m->ar[k]);
				}
			}
		for (int nj = ni + 1; nj < n_nodes; nj++) {
			if (!same_node(node, &inv->nodes[nj]))
				continue;
			/* The next identical node holds no more than this one. */
			int row = add_row(m, GLP_LO, 0, 0), ne = m->ne;
			for (int k = 1; k <= ne; k++) {
				if (m->ia[k] == node_used[ni])
					nz(m, row, m->ja[k], m->ar[k]);
				else if (m->ia[k] == node_used[nj])
					nz(m, row, m->ja[k], -m->ar[k]);
			}
			break;
		}
		g0 += node->n_gpus;
	}
	if (in_order && !m->oom)
		return add_in_order_rows(m, inv, pods, n, first, n_gpus);
	return m->oom ? -ENOMEM : 0;
}

/* The best placement found, read back from the placement columns: a pod's
 * own column names its node (and, for a MIG pod, its GPU and start); the
 * per-GPU columns of a whole-GPU pod name its GPUs. */
static void read_places(const struct ilp *m, const struct iso_inventory *inv,
                        struct iso_sim_place *places)
{
	for (int k = 0; k < m->n_pc; k++) {
		const struct col_info *c = &m->pc[k];
		struct iso_sim_place *p = &places[c->pod];
		int index;

		if (glp_mip_col_val(m->lp, c->col) < 0.5)
			continue;
		if (c->assign)
			p->node = c->node;
		if (c->gpu < 0)
			continue;
		index = inv->nodes[c->node].gpus[c->pos].index;
		if (index >= 0 && index < 64) /* as a trace node's; others are not named */
			p->gpus |= UINT64_C(1) << index;
		if (c->assign) /* a MIG instance: the pod's column is on the GPU */
			p->start = c->start;
	}
}

int iso_sim_ilp_solve(const struct iso_inventory *inv, const struct iso_shape *pods, int n,
                      enum iso_sim_ilp_kind kind, double time_limit_s, struct iso_sim_place *places,
                      struct iso_sim_ilp_result *res, struct iso_error *err)
{
	struct ilp m = {0};
	struct cb_data cb = {.bound = INFINITY};
	struct timespec t0, t1;
	glp_smcp sp;
	glp_iocp ip;
	int r, ret;

	memset(res, 0, sizeof(*res));
	for (int i = 0; places && i < n; i++) /* left out unless a solution says otherwise */
		places[i] = (struct iso_sim_place){.node = pods[i].gpu_count <= 0 &&
		                                                   kind != ISO_SIM_ILP_IN_ORDER
		                                               ? ISO_SIM_NOT_MODELLED
		                                               : -1,
		                                   .start = -1};
	if (n < 0 || !(time_limit_s > 0) || time_limit_s > 86400)
		return iso_error_set(err, ISO_E_INVALID, "ilp_time_limit",
		                     "must be in (0, 86400] seconds");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	glp_term_out(GLP_OFF);
	m.lp = glp_create_prob();
	glp_set_obj_dir(m.lp, GLP_MAX);
	r = build(&m, inv, pods, n, kind == ISO_SIM_ILP_IN_ORDER, &res->pods);
	if (r < 0) {
		r = r == -ENOTSUP ? iso_error_set(err, ISO_E_INVALID, "gpus.count",
		                                  "the ILP takes one MIG instance per pod")
		                  : iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	res->rows = glp_get_num_rows(m.lp);
	res->columns = glp_get_num_cols(m.lp);
	if (res->columns == 0) {
		res->optimal = true;
		goto done;
	}
	glp_load_matrix(m.lp, m.ne, m.ia, m.ja, m.ar);
	glp_scale_prob(m.lp, GLP_SF_AUTO);
	glp_init_smcp(&sp);
	sp.msg_lev = GLP_MSG_OFF;
	sp.meth = GLP_DUALP;
	ret = glp_simplex(m.lp, &sp);
	if (ret != 0 || glp_get_status(m.lp) != GLP_OPT) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL,
		                  "ILP: the LP relaxation failed (%d, status %d)", ret,
		                  glp_get_status(m.lp));
		goto out;
	}
	cb.bound = glp_get_obj_val(m.lp);
	glp_init_iocp(&ip);
	ip.msg_lev = GLP_MSG_OFF;
	ip.tm_lim = (int)fmin(time_limit_s * 1000.0, (double)INT32_MAX);
	ip.cb_func = callback;
	ip.cb_info = &cb;
	ip.gmi_cuts = GLP_ON;
	ip.clq_cuts = GLP_ON;
	ret = glp_intopt(m.lp, &ip);
	if (ret != 0 && ret != GLP_ETMLIM) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "ILP: glp_intopt failed (%d)", ret);
		goto out;
	}
	if (glp_mip_status(m.lp) == GLP_OPT || glp_mip_status(m.lp) == GLP_FEAS) {
		res->best = floor(glp_mip_obj_val(m.lp) + 0.5); /* whole slices */
		if (places)
			read_places(&m, inv, places);
	}
	res->optimal = ret == 0 && glp_mip_status(m.lp) == GLP_OPT;
done:
	/* Every coefficient of the objective is a whole number of slices. */
	res->bound = res->optimal ? res->best : floor(cb.bound + 1e-6);
	if (res->bound < res->best)
		res->bound = res->best;
	r = 0;
out:
	glp_delete_prob(m.lp);
	glp_free_env();
	free(m.ia);
	free(m.ja);
	free(m.ar);
	free(m.pc);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->elapsed_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	return r;
}

#else /* !ISO_SIM_HAVE_GLPK */

bool iso_sim_ilp_available(void)
{
	return false;
}

int iso_sim_ilp_solve(const struct iso_inventory *inv, const struct iso_shape *pods, int n,
                      enum iso_sim_ilp_kind kind, double time_limit_s, struct iso_sim_place *places,
                      struct iso_sim_ilp_result *res, struct iso_error *err)
{
	memset(res, 0, sizeof(*res));
	return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
	                     "this build has no ILP: GLPK (libglpk-dev) was missing at configure "
	                     "time");
}

#endif

int iso_sim_ilp(const struct iso_sim *s, int pct, enum iso_sim_ilp_kind kind, double time_limit_s,
                struct iso_sim_ilp_result *res, struct iso_error *err)
{
	_cleanup_free_ struct iso_shape *shapes = NULL;
	_cleanup_free_ struct iso_sim_place *places = NULL;
	int n, r;

	memset(res, 0, sizeof(*res));
	r = sim_arrivals(s, pct, "ILP bound", &n, err);
	if (r < 0)
		return r;
	shapes = calloc((size_t)n + 1, sizeof(*shapes));
	if (!shapes)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int q = 0; q < n; q++)
		shapes[q] = s->req[s->seq[q]].shape;
	if (s->cfg.record_places) {
		places = calloc((size_t)n + 1, sizeof(*places));
		if (!places)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	r = iso_sim_ilp_solve(&s->cluster.inv, shapes, n, kind, time_limit_s, places, res, err);
	if (r < 0)
		return r;
	res->arrivals = n;
	res->places = places;
	places = NULL;
	return 0;
}

void iso_sim_ilp_result_clear(struct iso_sim_ilp_result *res)
{
	free(res->places);
	res->places = NULL;
}

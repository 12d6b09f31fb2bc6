/* lp_bound.c: an upper bound on the optimum for clusters far too large for
 * the exact ILP (ilp.c), so that a policy's distance from optimal is still a
 * measured number on the whole 6,212-GPU openb cluster. It relaxes the ILP:
 * identical nodes are pooled into one class (same cores, memory and GPU
 * count), identical pods into one type, and pods of a type may be spread over
 * a class in fractions. What it keeps is what binds at full scale: every
 * class's compute and memory slices, cores and memory. What it drops is MIG
 * geometry inside a GPU and the node boundary inside a class, so the bound is
 * loose where those bind, and never below the true optimum.
 *
 *   0 <= y[t,c] <= nodes(c) * (most pods of t one node of c holds, each
 *                   resource alone); only where one fits a node of c
 *   sum_c y[t,c] <= pods of type t arrived
 *   per class c:    sum_t compute(t) y <= nodes(c) * gpus(c) * C
 *                   sum_t memory_slices(t) y <= nodes(c) * gpus(c) * M
 *                   sum_t cpus(t) y <= nodes(c) * cpus(c), memory likewise
 *   maximise        sum compute(t) y
 * CPU-only pods are left out: they add nothing and any subset may drop them. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/internal.h"

#ifdef ISO_SIM_HAVE_GLPK
#include <glpk.h>

struct pod_type {
	int gpus; /* whole GPUs; 0 for one MIG instance */
	int compute, memory_slices, cpus;
	int64_t memory_mib;
	int count;
};

struct node_class {
	int gpus, nodes;
	int64_t cpus, memory_mib;
};

static int find_type(struct pod_type *v, int n, const struct iso_sim_request *r)
{
	const int gpus = r->shape.whole ? r->shape.gpu_count : 0;

	for (int i = 0; i < n; i++)
		if (v[i].gpus == gpus && v[i].compute == r->compute &&
		    v[i].memory_slices == r->memory && v[i].cpus == r->shape.cpus &&
		    v[i].memory_mib == r->shape.memory_mib)
			return i;
	v[n] = (struct pod_type){.gpus = gpus,
	                         .compute = r->compute,
	                         .memory_slices = r->memory,
	                         .cpus = r->shape.cpus,
	                         .memory_mib = r->shape.memory_mib};
	return n;
}

static int find_class(struct node_class *v, int n, const struct iso_node *node)
{
	for (int i = 0; i < n; i++)
		if (v[i].gpus == node->n_gpus && v[i].cpus == node->cpus &&
		    v[i].memory_mib == node->memory_mib)
			return i;
	v[n] = (struct node_class){
	    .gpus = node->n_gpus, .cpus = node->cpus, .memory_mib = node->memory_mib};
	return n;
}

static bool fits(const struct pod_type *t, const struct node_class *c)
{
	return c->gpus > 0 && t->gpus <= c->gpus && t->cpus <= c->cpus &&
	       t->memory_mib <= c->memory_mib;
}

/* The most pods of type t one node of class c can hold, each resource alone:
 * pooling lets fractions of a pod fill a class, this keeps whole pods per
 * node where a single resource decides (two 3-core pods never share 4 cores). */
static int64_t per_node_max(const struct pod_type *t, const struct node_class *c,
                            const struct iso_gpu_model *m)
{
	int64_t n;

	if (t->gpus > 0) {
		n = c->gpus / t->gpus;
	} else {
		const int64_t by_compute = m->compute_slices / t->compute;
		const int64_t by_memory = m->memory_slices / t->memory_slices;
		n = (int64_t)c->gpus * (by_compute < by_memory ? by_compute : by_memory);
	}
	if (t->cpus > 0 && c->cpus / t->cpus < n)
		n = c->cpus / t->cpus;
	if (t->memory_mib > 0 && c->memory_mib / t->memory_mib < n)
		n = c->memory_mib / t->memory_mib;
	return n;
}

int iso_sim_lp_bound(const struct iso_sim *s, int pct, struct iso_sim_lp_bound *res,
                     struct iso_error *err)
{
	const struct iso_inventory *inv = &s->cluster.inv;
	const struct iso_gpu_model *m = s->cluster.model;
	_cleanup_free_ struct pod_type *types = calloc((size_t)s->n_seq + 1, sizeof(*types));
	_cleanup_free_ struct node_class *classes =
	    calloc((size_t)inv->n_nodes + 1, sizeof(*classes));
	_cleanup_free_ int *ia = NULL, *ja = NULL;
	_cleanup_free_ double *ar = NULL;
	struct timespec t0, t1;
	int n_types = 0, n_classes = 0, ne = 0, n, cap, ret, r;
	glp_prob *lp;
	glp_smcp sp;

	memset(res, 0, sizeof(*res));
	r = sim_arrivals(s, pct, "LP bound", &n, err);
	if (r < 0)
		return r;
	if (!types || !classes)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int q = 0; q < n; q++) {
		const struct iso_sim_request *req = &s->req[s->seq[q]];

		if (req->shape.gpu_count <= 0)
			continue;
		res->pods++;
		int t = find_type(types, n_types, req);
		n_types += t == n_types;
		types[t].count++;
	}
	for (int i = 0; i < inv->n_nodes; i++) {
		int c = find_class(classes, n_classes, &inv->nodes[i]);
		n_classes += c == n_classes;
		classes[c].nodes++;
	}
	cap = n_types * n_classes * 5 + 1;
	ia = calloc((size_t)cap + 1, sizeof(int));
	ja = calloc((size_t)cap + 1, sizeof(int));
	ar = calloc((size_t)cap + 1, sizeof(double));
	if (!ia || !ja || !ar)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");

	glp_term_out(GLP_OFF);
	lp = glp_create_prob();
	glp_set_obj_dir(lp, GLP_MAX);
	/* Rows 1..n_types: arrivals per type; then four per class. */
	if (n_types)
		glp_add_rows(lp, n_types);
	for (int t = 0; t < n_types; t++)
		glp_set_row_bnds(lp, t + 1, GLP_UP, 0, types[t].count);
	if (n_classes)
		glp_add_rows(lp, 4 * n_classes);
	for (int c = 0; c < n_classes; c++) {
		const struct node_class *k = &classes[c];
		const int row = n_types + 4 * c + 1;

		glp_set_row_bnds(lp, row, GLP_UP, 0,
		                 (double)k->nodes * k->gpus * m->compute_slices);
		glp_set_row_bnds(lp, row + 1, GLP_UP, 0,
		                 (double)k->nodes * k->gpus * m->memory_slices);
		glp_set_row_bnds(lp, row + 2, GLP_UP, 0, (double)k->nodes * (double)k->cpus);
		glp_set_row_bnds(lp, row + 3, GLP_UP, 0, (double)k->nodes * (double)k->memory_mib);
	}
	for (int t = 0; t < n_types; t++)
		for (int c = 0; c < n_classes; c++) {
			const struct pod_type *p = &types[t];
			const int row = n_types + 4 * c + 1;
			const double v[5] = {1, p->compute, p->memory_slices, p->cpus,
			                     (double)p->memory_mib};
			const int rows[5] = {t + 1, row, row + 1, row + 2, row + 3};
			int col;

			if (!fits(p, &classes[c]))
				continue;
			col = glp_add_cols(lp, 1);
			res->columns++;
			glp_set_col_bnds(
			    lp, col, GLP_DB, 0,
			    (double)(classes[c].nodes * per_node_max(p, &classes[c], m)));
			glp_set_obj_coef(lp, col, p->compute);
			for (int k = 0; k < 5; k++) {
				ne++;
				ia[ne] = rows[k];
				ja[ne] = col;
				ar[ne] = v[k];
			}
		}
	res->rows = glp_get_num_rows(lp);
	if (res->columns > 0) {
		glp_load_matrix(lp, ne, ia, ja, ar);
		glp_scale_prob(lp, GLP_SF_AUTO);
		glp_init_smcp(&sp);
		sp.msg_lev = GLP_MSG_OFF;
		ret = glp_simplex(lp, &sp);
		if (ret != 0 || glp_get_status(lp) != GLP_OPT)
			r = iso_error_set(err, ISO_E_INTERNAL, NULL,
			                  "LP bound: the simplex failed (%d, status %d)", ret,
			                  glp_get_status(lp));
		else /* whole slices: the integer problem's optimum is a whole number */
			res->bound = floor(glp_get_obj_val(lp) + 1e-6);
	}
	glp_delete_prob(lp);
	glp_free_env();
	res->pod_types = n_types;
	res->node_classes = n_classes;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->elapsed_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	return r;
}

#else /* !ISO_SIM_HAVE_GLPK */

int iso_sim_lp_bound(const struct iso_sim *s, int pct, struct iso_sim_lp_bound *res,
                     struct iso_error *err)
{
	memset(res, 0, sizeof(*res));
	return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
	                     "this build has no LP: GLPK (libglpk-dev) was missing at configure "
	                     "time");
}

#endif

/* oracle.c: the best static partitioning for a known demand, which is what a
 * Slurm site would configure if it knew its workload in advance. The static
 * policy is only as good as its layout, so the comparison is fair only if it
 * gets the best one: this oracle sees the whole trace's demand per profile
 * before the run. Method (docs/sim.md): the target is the demand in compute
 * slices per profile (and for whole GPUs) scaled to the cluster's compute
 * slices; the aim, supply as near the target as can be in L1 distance. GPUs
 * are added one at a time, each taking the option (one of the maximal
 * layouts, or no partitioning for whole GPUs) that brings the supply nearest
 * the demand scaled to the GPUs laid so far (ties: the option that strands
 * fewer compute slices, then enumeration order); then single moves of GPUs
 * from one option to another are made while they bring the supply nearer
 * the target (local search to a local optimum). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "sim/internal.h"

#define DIMS (ISO_MIG_MAX_PROFILES + 1) /* profiles, then whole GPUs */

static void supply_of(const struct iso_gpu_model *m, const struct iso_mig_layout *l, double *out)
{
	memset(out, 0, DIMS * sizeof(*out));
	if (!l) {
		out[ISO_MIG_MAX_PROFILES] = m->compute_slices;
		return;
	}
	for (int i = 0; i < l->n; i++) {
		int idx = (int)(l->inst[i].profile - m->profiles);
		if (idx >= 0 && idx < ISO_MIG_MAX_PROFILES)
			out[idx] += l->inst[i].profile->compute;
	}
}

int iso_sim_oracle_counts(const struct iso_gpu_model *m, const struct iso_sim_demand *d,
                          const struct iso_mig_layout *layouts, int n_layouts, int n_gpus,
                          int *counts, int *unpartitioned)
{
	_cleanup_free_ double *supply = NULL;
	double demand[DIMS], cur[DIMS] = {0}, total = 0;

	if (!m || n_layouts < 0 || n_gpus < 0)
		return -EINVAL;
	memset(counts, 0, (size_t)n_layouts * sizeof(*counts));
	*unpartitioned = 0;
	memcpy(demand, d->profile, sizeof(d->profile));
	demand[ISO_MIG_MAX_PROFILES] = d->whole;
	for (int k = 0; k < DIMS; k++) {
		if (!(demand[k] >= 0) || !isfinite(demand[k]))
			return -EINVAL;
		total += demand[k];
	}
	if (total <= 0) {
		*unpartitioned = n_gpus; /* no GPU demand: nothing to partition for */
		return 0;
	}
	/* Option o < n_layouts: layouts[o]; o == n_layouts: unpartitioned. */
	supply = calloc((size_t)(n_layouts + 1) * DIMS, sizeof(*supply));
	if (!supply)
		return -ENOMEM;
	for (int o = 0; o <= n_layouts; o++)
		supply_of(m, o < n_layouts ? &layouts[o] : NULL, &supply[(size_t)o * DIMS]);

	/* Greedy: each GPU in turn takes the option that brings the supply
	 * nearest the demand scaled to the GPUs laid so far. */
	for (int g = 1; g <= n_gpus; g++) {
		const double scale = (double)g * m->compute_slices / total;
		double best = INFINITY, best_sum = -1;
		int best_o = n_layouts;

		for (int o = 0; o <= n_layouts; o++) {
			const double *s = &supply[(size_t)o * DIMS];
			double dist = 0, sum = 0;

			for (int k = 0; k < DIMS; k++) {
				dist += fabs(cur[k] + s[k] - demand[k] * scale);
				sum += s[k];
			}
			/* Ties: the option that strands fewer compute slices. */
			if (dist < best - 1e-9 || (fabs(dist - best) <= 1e-9 && sum > best_sum)) {
				best = dist;
				best_sum = sum;
				best_o = o;
			}
		}
		for (int k = 0; k < DIMS; k++)
			cur[k] += supply[(size_t)best_o * DIMS + k];
		if (best_o == n_layouts)
			(*unpartitioned)++;
		else
			counts[best_o]++;
	}
	/* Polish: while moving GPUs from one option to another brings the
	 * supply nearer the demand scaled to the whole cluster, make the best
	 * such move (as many GPUs at once as keep improving). */
	for (int k = 0; k < DIMS; k++)
		demand[k] *= (double)n_gpus * m->compute_slices / total;
	for (int iter = 0; iter < 100000; iter++) {
		double now = 0, best_gain = 1e-9;
		int best_a = -1, best_b = -1;

		for (int k = 0; k < DIMS; k++)
			now += fabs(cur[k] - demand[k]);
		for (int a = 0; a <= n_layouts; a++) {
			const double *sa = &supply[(size_t)a * DIMS];

			if ((a < n_layouts ? counts[a] : *unpartitioned) == 0)
				continue;
			for (int b = 0; b <= n_layouts; b++) {
				const double *sb = &supply[(size_t)b * DIMS];
				double dist = 0;

				if (b == a)
					continue;
				for (int k = 0; k < DIMS; k++)
					dist += fabs(cur[k] - sa[k] + sb[k] - demand[k]);
				if (now - dist > best_gain) {
					best_gain = now - dist;
					best_a = a;
					best_b = b;
				}
			}
		}
		if (best_a < 0)
			break;
		for (;;) {
			int *from = best_a < n_layouts ? &counts[best_a] : unpartitioned;
			int *to = best_b < n_layouts ? &counts[best_b] : unpartitioned;
			double before = 0, after = 0;

			for (int k = 0; k < DIMS; k++) {
				const double next = cur[k] - supply[(size_t)best_a * DIMS + k] +
				                    supply[(size_t)best_b * DIMS + k];
				before += fabs(cur[k] - demand[k]);
				after += fabs(next - demand[k]);
			}
			if (*from == 0 || !(after < before - 1e-9))
				break;
			for (int k = 0; k < DIMS; k++)
				cur[k] += supply[(size_t)best_b * DIMS + k] -
				          supply[(size_t)best_a * DIMS + k];
			(*from)--;
			(*to)++;
		}
	}
	return 0;
}

struct node_size {
	int node, gpus;
};

static int cmp_size_desc(const void *a, const void *b)
{
	const struct node_size *x = a, *y = b;

	if (x->gpus != y->gpus)
		return x->gpus < y->gpus ? 1 : -1;
	return (x->node > y->node) - (x->node < y->node);
}

int iso_sim_oracle_assign(const struct iso_sim_cluster *c, const struct iso_mig_layout *layouts,
                          int n_layouts, const int *counts, int unpartitioned,
                          struct iso_static_layout *sl, struct iso_error *err)
{
	const struct iso_inventory *inv = &c->inv;
	_cleanup_free_ struct node_size *by_size = NULL;
	_cleanup_free_ int *left = NULL;
	_cleanup_free_ bool *whole = NULL;
	int sum = unpartitioned, next = 0;

	for (int i = 0; i < n_layouts; i++)
		sum += counts[i];
	if (sum != c->n_gpus || unpartitioned < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "static layout for %d GPUs on a cluster of %d", sum,
		                     c->n_gpus);
	if (iso_static_layout_init(sl, inv) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	by_size = calloc((size_t)inv->n_nodes, sizeof(*by_size));
	left = calloc((size_t)n_layouts + 1, sizeof(*left));
	whole = calloc((size_t)sl->n_gpus + 1, sizeof(*whole));
	if (!by_size || !left || !whole) {
		iso_static_layout_free(sl);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	/* Whole GPUs fill the largest nodes first, so that requests for several
	 * whole GPUs on one node find them together. */
	for (int i = 0; i < inv->n_nodes; i++)
		by_size[i] = (struct node_size){i, inv->nodes[i].n_gpus};
	qsort(by_size, (size_t)inv->n_nodes, sizeof(*by_size), cmp_size_desc);
	for (int i = 0; i < inv->n_nodes && unpartitioned > 0; i++) {
		const int ni = by_size[i].node;
		for (int j = 0; j < inv->nodes[ni].n_gpus && unpartitioned > 0; j++) {
			whole[sl->node_first[ni] + j] = true;
			unpartitioned--;
		}
	}
	/* The layouts are dealt round-robin over the other GPUs in node order:
	 * L0 L1 L2 L0 L1 L0 ... while each has GPUs left. */
	memcpy(left, counts, (size_t)n_layouts * sizeof(*left));
	for (int gi = 0; gi < sl->n_gpus; gi++) {
		if (whole[gi])
			continue;
		for (int tries = 0; tries < n_layouts && left[next] == 0; tries++)
			next = (next + 1) % n_layouts;
		if (n_layouts == 0 || left[next] == 0) {
			iso_static_layout_free(sl);
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "static layout ran short");
		}
		sl->gpus[gi].partitioned = true;
		sl->gpus[gi].layout = layouts[next];
		left[next]--;
		next = (next + 1) % n_layouts;
	}
	return 0;
}

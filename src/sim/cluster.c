/* cluster.c: the synthetic inventory the simulator places into. One node per
 * node of the trace, in the trace's order, with the trace's CPU and memory;
 * every GPU becomes a GPU of the chosen MIG-capable model with MIG enabled.
 * CPUs are kept in millicores (the node's `cpus` holds cpu_milli and a pod
 * asks for its cpu_milli), so no rounding changes what fits. Built in memory
 * and handed to iso_cluster_state_init() like a loaded cluster.yaml. */
#include <errno.h>
#include <string.h>

#include "sim/internal.h"

int iso_sim_cluster_build(const struct iso_sim_nodes *nodes, const struct iso_gpu_model *model,
                          const int *pick, int n_pick, struct iso_sim_cluster *out,
                          struct iso_error *err)
{
	struct iso_sim_cluster c = {.model = model};
	int n = pick ? n_pick : nodes->n;

	memset(out, 0, sizeof(*out));
	if (!model)
		return iso_error_set(err, ISO_E_INVALID, "gpu_model", "no GPU model given");
	if (n <= 0)
		return iso_error_set(err, ISO_E_INVALID, "", "%s: no nodes", nodes->path);
	c.inv.nodes = calloc((size_t)n, sizeof(*c.inv.nodes));
	if (!c.inv.nodes)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	iso_strlcpy(c.inv.path, nodes->path, sizeof(c.inv.path));
	iso_strlcpy(c.inv.cluster_name, "sim", sizeof(c.inv.cluster_name));
	iso_strlcpy(c.inv.controller.placement, "first-fit", sizeof(c.inv.controller.placement));
	c.inv.n_nodes = n;
	for (int i = 0; i < n; i++) {
		const int src = pick ? pick[i] : i;
		const struct iso_sim_node *sn;
		struct iso_node *node = &c.inv.nodes[i];

		if (src < 0 || src >= nodes->n) {
			iso_sim_cluster_free(&c);
			return iso_error_set(err, ISO_E_INVALID, "", "node pick %d out of range",
			                     src);
		}
		sn = &nodes->v[src];
		iso_strlcpy(node->name, sn->name, sizeof(node->name));
		node->cpus = sn->cpu_milli;
		node->memory_mib = sn->memory_mib;
		node->sched = ISO_NODE_SCHEDULABLE;
		if (sn->gpus == 0)
			continue;
		node->gpus = calloc((size_t)sn->gpus, sizeof(*node->gpus));
		if (!node->gpus) {
			iso_sim_cluster_free(&c);
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		}
		node->n_gpus = sn->gpus;
		for (int j = 0; j < sn->gpus; j++)
			node->gpus[j] =
			    (struct iso_gpu){.index = j, .model = model, .mig_enabled = true};
		c.n_gpus += sn->gpus;
	}
	if (c.n_gpus == 0) {
		iso_sim_cluster_free(&c);
		return iso_error_set(err, ISO_E_INVALID, "", "%s: no node has a GPU", nodes->path);
	}
	*out = c;
	return 0;
}

void iso_sim_cluster_free(struct iso_sim_cluster *c)
{
	for (int i = 0; i < c->inv.n_nodes; i++)
		iso_node_clear(&c->inv.nodes[i]);
	free(c->inv.nodes);
	memset(c, 0, sizeof(*c));
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

int iso_sim_cluster_pick(const struct iso_sim_nodes *nodes, int gpus, uint64_t seed, int **pick,
                         int *n_pick, struct iso_error *err)
{
	_cleanup_free_ int *order = NULL;
	_cleanup_free_ int *out = NULL;
	struct iso_sim_rng rng;
	int n = 0, have = 0;

	*pick = NULL;
	*n_pick = 0;
	if (gpus <= 0)
		return iso_error_set(err, ISO_E_INVALID, "ilp_gpus", "must be > 0, got %d", gpus);
	order = calloc(nodes->n > 0 ? (size_t)nodes->n : 1, sizeof(*order));
	out = calloc(nodes->n > 0 ? (size_t)nodes->n : 1, sizeof(*out));
	if (!order || !out)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < nodes->n; i++)
		order[i] = i;
	/* Fisher-Yates with its own stream, so that the sub-cluster and the
	 * arrival sequence of one seed are independent draws. */
	iso_sim_rng_seed(&rng, seed ^ UINT64_C(0x5ee0c1a5ee0c1a5e));
	for (int i = nodes->n - 1; i > 0; i--) {
		int j = (int)iso_sim_rng_below(&rng, (uint64_t)i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int i = 0; i < nodes->n && have < gpus; i++) {
		const struct iso_sim_node *sn = &nodes->v[order[i]];
		if (sn->gpus > 0 && have + sn->gpus <= gpus) {
			out[n++] = order[i];
			have += sn->gpus;
		}
	}
	if (n == 0)
		return iso_error_set(err, ISO_E_INVALID, "ilp_gpus",
		                     "%s: no node has between 1 and %d GPUs", nodes->path, gpus);
	qsort(out, (size_t)n, sizeof(*out), cmp_int);
	*pick = ISO_TAKE(out);
	*n_pick = n;
	return 0;
}

/* internal.h: the few eligibility rules that the cluster state, the shape
 * checks and every placement policy share, so that "may this GPU serve this
 * shape" is decided in one place. Private to src/sched. */
#ifndef ISOSTACK_SCHED_INTERNAL_H
#define ISOSTACK_SCHED_INTERNAL_H

#include <string.h>
#include <strings.h>

#include "isostack/sched.h"

/* Is the node in the shape's pool (any pool when the shape names none)? */
static inline bool iso_sched_node_in_pool(const struct iso_node *n, const struct iso_shape *s)
{
	return s->pool[0] == '\0' || strcmp(n->pool, s->pool) == 0;
}

/* Does the GPU's model satisfy the shape's optional model constraint? */
static inline bool iso_sched_gpu_model_ok(const struct iso_gpu *g, const struct iso_shape *s)
{
	return g->model &&
	       (s->gpu_model[0] == '\0' || strcasecmp(g->model->name, s->gpu_model) == 0);
}

/* The shape's MIG profile on this GPU when the GPU may hold instances of it
 * (MIG enabled, model allowed, profile exists on the model), else NULL. */
static inline const struct iso_mig_profile *iso_sched_gpu_profile(const struct iso_gpu *g,
                                                                  const struct iso_shape *s)
{
	if (s->whole || !g->mig_enabled || !iso_sched_gpu_model_ok(g, s))
		return NULL;
	return iso_mig_profile_find(g->model, s->profile);
}

/* ---- the frame every policy's place() shares (place.c) ---- */

/* A policy's choice for member k of `a` (its shape, its tenant): writes
 * a->shape.gpu_count slots to `out` (member = k) and returns the node index,
 * or -1 when no node can hold the member now. It must not change `cs`
 * except through the private index's scratch state. `ctx` is the policy's
 * own search state, passed through by iso_sched_place. */
typedef int (*iso_sched_choose_fn)(void *ctx, struct iso_cluster_state *cs,
                                   const struct iso_allocation *a, int k, struct iso_slot *out);

/* Places members [a->n_members, want) one at a time with `choose`, taking
 * each in `cs` before choosing the next; all or nothing (see struct
 * iso_placer). */
int iso_sched_place(struct iso_cluster_state *cs, struct iso_allocation *a, int want,
                    iso_sched_choose_fn choose, void *ctx, struct iso_error *err);

/* Positions 0..n_gpus-1 of node->gpus, ordered by device index (the
 * inventory does not promise its GPUs are listed in index order): the order
 * in which first-fit and the scored baselines try a node's GPUs. */
void iso_sched_gpu_order(const struct iso_node *node, int *order);

/* The node (index) the member being chosen is pinned to by the request's
 * member_nodes, -1 when none (constraints.c). A policy may go straight to
 * it; iso_place_node_allowed() refuses every other node anyway. */
int iso_sched_member_pin(const struct iso_cluster_state *cs);

/* First-fit's choice (first_fit.c): nodes in inventory order. */
int iso_sched_first_fit_choose(void *ctx, struct iso_cluster_state *cs,
                               const struct iso_allocation *a, int k, struct iso_slot *out);

/* ---- the search the baselines share (best_fit.c, fgd.c, static_layout.c) ---- */

/* The search the three share: for each member, every schedulable node with
 * room for its cpus and memory; on it, each GPU instance in turn goes to the
 * candidate (GPU in device index order, start ascending) of lowest score, and
 * the node of lowest total score wins. Ties go to the first candidate seen, so
 * lowest node, GPU index and start. `first_wins`: take the first acceptable
 * candidate and node instead of scanning (first-fit over acceptable ones). */
struct iso_placer_scorer {
	/* Optional: called on node `node` before the candidates of instance
	 * `pick` (0-based) of a member are scored, with the node's GPUs as the
	 * member's earlier instances left them. False skips the node. */
	bool (*prepare)(void *ctx, const struct iso_cluster_state *cs, int node,
	                const struct iso_gpu_occupancy *gpus, const struct iso_allocation *a,
	                int pick);
	/* Score of taking `p` at `start` (p NULL: the whole GPU) on GPU position
	 * `pos` of node `node`, whose GPUs' occupancy is `gpus`; pos -1 (and p
	 * NULL): a member without GPUs on this node. Lower is better; false
	 * refuses the candidate. */
	bool (*score)(void *ctx, const struct iso_cluster_state *cs, int node,
	              const struct iso_gpu_occupancy *gpus, int pos,
	              const struct iso_mig_profile *p, int start, double *out);
	void *ctx;
	bool first_wins;
	const char *policy; /* for messages */
};
int iso_placer_place_scored(const struct iso_placer_scorer *sc, struct iso_cluster_state *cs,
                            struct iso_allocation *a, int want, struct iso_error *err);

/* Best-fit: the GPU with the fewest free memory slices where the profile fits
 * (lowest start); whole GPUs on the node with the fewest free memory slices. */

#endif

/* static_layout.c: the Slurm-style baseline. Slurm expects MIG devices to be
 * partitioned ahead of time and schedules the instances as typed GRES; it
 * never repartitions. So every GPU carries a fixed layout (or none: it is
 * then handed out only whole), and a request takes the first free instance of
 * exactly its profile, nodes in order, GPUs by index, starts ascending. The
 * layout is the policy's state; which layout is best is someone else's
 * question (the simulator's oracle, src/sim/oracle.c). */
#include <errno.h>
#include <string.h>

#include "sched/internal.h"

int iso_static_layout_init(struct iso_static_layout *sl, const struct iso_inventory *inv)
{
	int n = 0;

	memset(sl, 0, sizeof(*sl));
	sl->inv = inv;
	sl->node_first =
	    calloc(inv->n_nodes > 0 ? (size_t)inv->n_nodes : 1, sizeof(*sl->node_first));
	if (!sl->node_first)
		return -ENOMEM;
	for (int i = 0; i < inv->n_nodes; i++) {
		sl->node_first[i] = n;
		n += inv->nodes[i].n_gpus;
	}
	sl->gpus = calloc(n > 0 ? (size_t)n : 1, sizeof(*sl->gpus));
	if (!sl->gpus) {
		iso_static_layout_free(sl);
		return -ENOMEM;
	}
	sl->n_gpus = n;
	return 0;
}

void iso_static_layout_free(struct iso_static_layout *sl)
{
	free(sl->node_first);
	free(sl->gpus);
	memset(sl, 0, sizeof(*sl));
}

static bool static_score(void *ctx, const struct iso_cluster_state *cs, int node,
                         const struct iso_gpu_occupancy *gpus, int pos,
                         const struct iso_mig_profile *p, int start, double *out)
{
	const struct iso_static_layout *sl = ctx;
	const struct iso_static_gpu *g;

	*out = 0;
	if (sl->inv != cs->inv || node >= sl->inv->n_nodes)
		return false;
	if (pos < 0)
		return true; /* no GPUs: the first node with room */
	g = iso_static_layout_gpu(sl, node, pos);
	if (!p)
		return !g->partitioned;
	if (!g->partitioned)
		return false;
	for (int i = 0; i < g->layout.n; i++)
		if (g->layout.inst[i].profile == p && g->layout.inst[i].start == start)
			return true;
	return false;
}

static int static_place(const struct iso_placer *self, struct iso_cluster_state *cs,
                        struct iso_allocation *a, int want, struct iso_error *err)
{
	const struct iso_placer_scorer sc = {
	    .score = static_score, .ctx = self->state, .first_wins = true, .policy = self->name};

	if (!self->state)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "static policy without a layout");
	return iso_placer_place_scored(&sc, cs, a, want, err);
}

void iso_placer_static_init(struct iso_placer *p, const struct iso_static_layout *sl)
{
	*p = (struct iso_placer){.name = "static", .place = static_place, .state = (void *)sl};
}

/* slurm_count.c: Slurm's count-based node choice in front of the isostack
 * engine's slice choice, so that the simulator can measure "geometry
 * misses" (issue 15, docs/placement.md "Slurm's count-based node choice").
 *
 * A site that declares its MIG capacity to Slurm as a count GRES (gres.conf
 * `Name=isogpu Count=<7 x GPUs>` without files; a job asks
 * `--gres=isogpu:C`, C the compute slices of its profile times its
 * instances, 7 per whole H100) lets Slurm choose the node by counts alone.
 * isostack then finds the slice on that node: the member is pinned to it
 * by a `nodes` constraint, as the SPANK plugin pins it, and the engine
 * (isostack.c) chooses GPU and start there. When the node's free count is
 * enough but no GPU of it can hold the profile (alignment, memory slices, a
 * whole GPU among partly used ones, slice 7) the job fails on that node
 * and is requeued: a miss. The model lets the requeue exclude the node that
 * missed (the best case for Slurm; without it Slurm would choose the same
 * node again), so Slurm's next choice is the next node its counts allow.
 *
 * Slurm's choice is select/cons_tres's default (Slurm 22.05, Debian 12:
 * src/plugins/select/cons_tres/job_test.c, _eval_nodes(); 23.02 and later
 * _eval_nodes_consec()), without topology, CR_LLN, pack_serial_at_end or
 * bf_busy_nodes: the usable nodes (partition, up, enough free CPUs, memory
 * and GRES count) fall into runs of consecutive nodes of equal Weight; the
 * run with the fewest free CPUs wins ("tightest fit", ties to the first),
 * and in it a one-node job takes the node with the fewest free CPUs ("best
 * fit single node", ties to the first). With Weight rising in node order
 * (slurm.conf(5) Weight: the lowest weight that satisfies the job) every
 * node is a run of its own and the first usable node wins: ISO_SLURM_FIRST.
 * Free CPUs here are the simulator's millicores (Slurm counts whole CPUs). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/index.h"

/* What Slurm knows of one node for the member being placed. */
struct sl_node {
	int64_t cpus; /* free CPUs */
	bool ok;      /* usable by counts and not excluded by a requeue */
};

/* The compute slices the member asks of Slurm's count on node `node`: as
 * eng_member_slices() on the first model of the node that has the
 * profile; 0 when none has it (the site declares no count there). */
static int count_asked(const struct iso_node *node, const struct iso_shape *shape)
{
	for (int g = 0; g < node->n_gpus; g++) {
		int c;

		if (!iso_sched_gpu_model_ok(&node->gpus[g], shape))
			continue;
		c = eng_member_slices(node->gpus[g].model, shape);
		if (c > 0)
			return c;
	}
	return 0;
}

/* What Slurm's filter sees: partition, node state, CPUs, memory, the GRES
 * count, the job's node list (constraints). Nothing of MIG geometry, VFs or
 * isolation classes: those are isostack's to refuse. */
static bool slurm_usable(const struct iso_cluster_state *cs, int ni, const struct iso_allocation *a)
{
	const struct iso_node *node = &cs->inv->nodes[ni];
	const struct iso_node_usage *u = &cs->usage[ni];
	const struct iso_shape *shape = &a->shape;

	if (!iso_cluster_state_node_open(cs, ni) || !iso_sched_node_in_pool(node, shape))
		return false;
	if ((int64_t)u->cpus_used + shape->cpus > node->cpus ||
	    u->memory_mib_used + shape->memory_mib > node->memory_mib)
		return false;
	if (!iso_place_node_allowed(cs, ni))
		return false;
	if (shape->gpu_count > 0) {
		int need = count_asked(node, shape);
		if (need <= 0 || iso_sched_node_free_compute(cs, ni) < need)
			return false;
	}
	return true;
}

/* Slurm's node among the usable ones (file comment), or -1. */
static int slurm_pick(const struct sl_node *v, int n, enum iso_slurm_rule rule)
{
	int run = -1, run_end = -1, best = -1;
	int64_t run_cpus = 0;

	for (int i = 0; i < n;) {
		int j = i;
		int64_t sum = 0;

		if (!v[i].ok) {
			i++;
			continue;
		}
		if (rule == ISO_SLURM_FIRST)
			return i;
		while (j < n && v[j].ok)
			sum += v[j++].cpus;
		if (run < 0 || sum < run_cpus) {
			run = i;
			run_end = j;
			run_cpus = sum;
		}
		i = j;
	}
	for (int i = run; run >= 0 && i < run_end; i++)
		if (best < 0 || v[i].cpus < v[best].cpus)
			best = i;
	return best;
}

/* Member k of `a`: Slurm's node, then the engine on it, until the engine
 * places it (0), Slurm's counts allow no node left (-ENOSPC) or an error. */
static int place_member(struct iso_cluster_state *cs, struct iso_allocation *a, int k,
                        struct sl_node *v, enum iso_slurm_rule rule, int64_t *misses,
                        struct iso_error *err)
{
	const struct iso_place_constraints *outer = cs->constraints;
	struct iso_place_constraints pin = {0};
	const char *name[1];
	int tried = 0;

	if (outer)
		pin = *outer;
	for (int i = 0; i < cs->inv->n_nodes; i++)
		v[i] = (struct sl_node){.cpus = cs->inv->nodes[i].cpus - cs->usage[i].cpus_used,
		                        .ok = slurm_usable(cs, i, a)};
	for (;;) {
		int ni = slurm_pick(v, cs->inv->n_nodes, rule);
		struct iso_error e = {0};
		int r;

		if (ni < 0) {
			const struct iso_shape *s = &a->shape;
			return iso_error_set(err, ISO_E_NO_CAPACITY, NULL,
			                     "member %d does not fit: no schedulable node has %d "
			                     "cpus, %lld MiB memory and the GRES count of %d x %s "
			                     "free (%d node%s chosen by count could not hold it)",
			                     k, s->cpus, (long long)s->memory_mib, s->gpu_count,
			                     s->whole ? "whole GPU" : s->profile, tried,
			                     tried == 1 ? "" : "s");
		}
		name[0] = cs->inv->nodes[ni].name;
		pin.nodes = name;
		pin.n_nodes = 1;
		r = iso_placer_place_ex(&iso_placer_isostack, cs, a, k + 1, &pin, &e);
		if (r != -ENOSPC) {
			if (r < 0)
				*err = e;
			return r;
		}
		/* Counts said yes, geometry (or a rule Slurm does not see) said
		 * no: the job fails there and comes back without that node. */
		(*misses)++;
		tried++;
		v[ni].ok = false;
	}
}

static int place(const struct iso_placer *self, struct iso_cluster_state *cs,
                 struct iso_allocation *a, int want, struct iso_error *err)
{
	struct iso_slurm_count *sc = self->state;
	const enum iso_slurm_rule rule = sc ? sc->rule : ISO_SLURM_BEST_FIT;
	const int old_members = a->n_members, old_slots = a->n_slots;
	_cleanup_free_ struct sl_node *v = NULL;
	int64_t misses = 0;
	int r = 0;

	if (want <= old_members || old_members < 0)
		return iso_placer_place(&iso_placer_isostack, cs, a, want, err);
	v = calloc((size_t)cs->inv->n_nodes + 1, sizeof(*v));
	if (!v)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int k = old_members; k < want && r == 0; k++)
		r = place_member(cs, a, k, v, rule, &misses, err);
	if (r < 0 && a->n_members > old_members) {
		/* All or nothing: give back the members this call placed. */
		iso_cluster_state_give_members(cs, a, old_members);
		a->n_members = old_members;
		a->n_slots = old_slots;
	}
	if (sc) {
		sc->misses += misses;
		sc->requeued += misses > 0;
	}
	return r;
}

static int learn(const struct iso_placer *self, struct iso_cluster_state *cs,
                 const struct iso_shape *shapes, const double *weights, int n)
{
	(void)self;
	return iso_placer_learn(&iso_placer_isostack, cs, shapes, weights, n);
}

const struct iso_placer iso_placer_slurm_count = {
    .name = "slurm-count", .place = place, .learn = learn};

void iso_placer_slurm_count_init(struct iso_placer *p, struct iso_slurm_count *sc)
{
	*p = iso_placer_slurm_count;
	p->state = sc;
}

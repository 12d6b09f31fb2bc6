/* sched.h: the in-memory picture of what is in use on every node and GPU, and
 * the placement policies that search it. The controller owns one
 * iso_cluster_state, rebuilt from the store at start and updated only after a
 * store transaction commits. Policies are a small vtable so that later ones
 * (MIG-geometry-aware, FGD) slot in beside first-fit without touching callers. */
#ifndef ISOSTACK_SCHED_H
#define ISOSTACK_SCHED_H

#include "isostack/inventory.h"
#include "isostack/mig.h"
#include "isostack/model.h"

struct iso_node_usage {
	int cpus_used;
	int64_t memory_mib_used;
	int members;                    /* members placed here */
	struct iso_gpu_occupancy *gpus; /* one per node GPU, same order as node->gpus */
};

struct iso_cluster_state {
	const struct iso_inventory *inv; /* borrowed; outlives the state */
	struct iso_node_usage *usage;    /* inv->n_nodes entries */
	enum iso_node_sched *sched;      /* inv->n_nodes entries: cordon state */
};

int iso_cluster_state_init(struct iso_cluster_state *cs, const struct iso_inventory *inv);
void iso_cluster_state_free(struct iso_cluster_state *cs);
int iso_cluster_state_node_index(const struct iso_cluster_state *cs, const char *node);

/* Take (or give back) everything an allocation's placement holds. Taking
 * validates every slot against the inventory and the rules of MIG geometry and
 * changes nothing when it fails. */
int iso_cluster_state_take(struct iso_cluster_state *cs, const struct iso_allocation *a,
                           struct iso_error *err);
void iso_cluster_state_give(struct iso_cluster_state *cs, const struct iso_allocation *a);

/* Same for members [from, a->n_members) only: used by resize. */
int iso_cluster_state_take_members(struct iso_cluster_state *cs, const struct iso_allocation *a,
                                   int from, struct iso_error *err);
void iso_cluster_state_give_members(struct iso_cluster_state *cs, const struct iso_allocation *a,
                                    int from);

/* Validates a shape against the built-in MIG tables (profile exists on some
 * model of the inventory, counts in range). Errors name the request field. */
int iso_shape_validate(const struct iso_shape *shape, const struct iso_inventory *inv,
                       struct iso_error *err);

/* How many members of this shape the whole inventory could hold, empty and
 * with every node schedulable, counting no further than `limit`. A request
 * for more could never be placed (422), one for fewer may wait (pending). */
int iso_shape_max_members(const struct iso_shape *shape, const struct iso_inventory *inv,
                          int limit);
static inline bool iso_shape_ever_fits(const struct iso_shape *shape,
                                       const struct iso_inventory *inv)
{
	return iso_shape_max_members(shape, inv, 1) >= 1;
}

struct iso_placer {
	const char *name;
	/* Places members [a->n_members, want) of `a`, appending to a->placed and
	 * a->slots (reallocated). Returns 0 and leaves the new members taken in
	 * `cs`, or -ENOSPC with `a` and `cs` exactly as they were. */
	int (*place)(const struct iso_placer *self, struct iso_cluster_state *cs,
		     struct iso_allocation *a, int want, struct iso_error *err);
	void *state; /* policy-private (e.g. a static layout); NULL when stateless */
};

static inline int iso_placer_place(const struct iso_placer *p, struct iso_cluster_state *cs,
				   struct iso_allocation *a, int want, struct iso_error *err)
{
	return p->place(p, cs, a, want, err);
}

extern const struct iso_placer iso_placer_first_fit;
/* The stateless policies the daemon can be started with, by name; NULL when unknown. */
const struct iso_placer *iso_placer_find(const char *name);
/* Their names, comma-separated, for messages. */
const char *iso_placer_names(void);

#endif

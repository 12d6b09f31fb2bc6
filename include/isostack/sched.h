/* sched.h: the in-memory picture of what is in use on every node and GPU, and
 * the placement policies that search it. The controller owns one
 * iso_cluster_state, rebuilt from the store at start and updated only after a
 * store transaction commits. Policies are a small vtable so that later ones
 * (MIG-geometry-aware, FGD) slot in beside first-fit without touching callers.
 * Placement engine and its index: docs/placement.md. */
#ifndef ISOSTACK_SCHED_H
#define ISOSTACK_SCHED_H

#include "isostack/inventory.h"
#include "isostack/mig.h"
#include "isostack/model.h"

ISO_PUBLIC_BEGIN

struct iso_node_usage {
	int cpus_used;
	int64_t memory_mib_used;
	int members;                    /* members placed here */
	struct iso_gpu_occupancy *gpus; /* one per node GPU, same order as node->gpus */
	int tenants;                    /* distinct tenants with members here */
	/* SR-IOV VFs in use: one per tenant present, on an InfiniBand or
	 * Omni-Path fabric when the node's port has VFs; 0 otherwise. */
	int vfs_used;
};

struct iso_place_constraints;
struct iso_sched_index;

struct iso_cluster_state {
	const struct iso_inventory *inv; /* borrowed; outlives the state */
	struct iso_node_usage *usage;    /* inv->n_nodes entries */
	enum iso_node_sched *sched;      /* inv->n_nodes entries: cordon state */
	/* The current request's placement constraints, set only for the
	 * duration of iso_placer_place_ex() (NULL: none). Policies honour them
	 * through iso_place_node_allowed() / iso_place_gpu_allowed(). */
	const struct iso_place_constraints *constraints;
	/* Private to src/sched: node names, per-node tenants and the placement
	 * index, kept current by take/give. Change usage only through
	 * take/give (or call iso_cluster_state_reindex() after writing it). */
	struct iso_sched_index *index;
	/* GPUs out of service after a fault (iso_cluster_state_gpu_quarantine),
	 * one flag per GPU numbered node by node in inventory order; NULL until
	 * the first quarantine. */
	bool *quarantined;
	/* Bumped by every take, give, quarantine and restore here, and by the
	 * controller when it writes `sched`: a cache of anything derived from
	 * the state (capacity) is current while this is unchanged. */
	uint64_t version;
	/* Told of every member a take or give (that succeeded) put on or took
	 * off node `node`: the node agents' desired state follows it
	 * (src/controller/agents.c). NULL: nobody listens. */
	void (*on_member)(void *arg, int node, const struct iso_allocation *a, int member,
	                  bool taken);
	void *on_member_arg;
	/* Per node, true while its agent is silent past the lease (the
	 * controller's agents.c): placed on like a cordoned node, without
	 * changing `sched`. NULL: every node is reachable. */
	const bool *unreachable;
};

/* May new work go to node `ni` (schedulable and reachable)? */
static inline bool iso_cluster_state_node_open(const struct iso_cluster_state *cs, int ni)
{
	return cs->sched[ni] == ISO_NODE_SCHEDULABLE && !(cs->unreachable && cs->unreachable[ni]);
}

int iso_cluster_state_init(struct iso_cluster_state *cs, const struct iso_inventory *inv);
void iso_cluster_state_free(struct iso_cluster_state *cs);
/* May `tenant` (0: a tenant that holds nothing) still use node `node` (and its
 * GPU at position `gpu_pos`, -1 for the node alone), given the exclusive
 * marks of others' isolation classes? */
bool iso_cluster_state_open_to(const struct iso_cluster_state *cs, int node, int gpu_pos,
                               int64_t tenant);
int iso_cluster_state_node_index(const struct iso_cluster_state *cs, const char *node);

/* Rebuilds the private index from `usage`, for callers that wrote usage
 * directly. Tenants present per node cannot be derived from usage and are
 * kept as they are. */
void iso_cluster_state_reindex(struct iso_cluster_state *cs);

/* Verifies the private index against usage (every GPU and node in the
 * right bucket, lists intact, tenants per node adding up to usage.members,
 * no node over its VF limit). For tests and debugging; 0 or -EIO
 * (ISO_E_INTERNAL with the first inconsistency). */
int iso_cluster_state_check(const struct iso_cluster_state *cs, struct iso_error *err);

/* Take (or give back) everything an allocation's placement holds. Taking
 * validates every slot against the inventory and the rules of MIG geometry and
 * changes nothing when it fails.
 *
 * Fabric co-tenancy (docs/placement.md): on an InfiniBand or Omni-Path
 * fabric every tenant present on a node needs its own SR-IOV VF of the
 * node's port, so a node holds members of at most port.n_vfs tenants
 * (a->tenant_id names the tenant); a node whose port has no VFs is
 * fabric-exclusive: one tenant at a time. A node without a port, and every
 * node on Ethernet, has no such limit. A member that would need a VF the
 * node does not have is refused with ISO_E_NO_CAPACITY, field
 * "nodes[K].node". */
int iso_cluster_state_take(struct iso_cluster_state *cs, const struct iso_allocation *a,
                           struct iso_error *err);
void iso_cluster_state_give(struct iso_cluster_state *cs, const struct iso_allocation *a);

/* Same for members [from, a->n_members) only: used by resize. */
int iso_cluster_state_take_members(struct iso_cluster_state *cs, const struct iso_allocation *a,
                                   int from, struct iso_error *err);
void iso_cluster_state_give_members(struct iso_cluster_state *cs, const struct iso_allocation *a,
                                    int from);

/* Faults (docs/tenancy.md "Faults and maintenance"). Quarantine takes GPU
 * position `pos` of node `node` (an index into inv->nodes) out of service:
 * it must be empty (-EBUSY otherwise; -EINVAL for a position that does not
 * exist, -ENOMEM), and then looks fully used to every policy and to take,
 * so nothing is placed there until restore gives it back empty. Both are
 * O(GPUs of the node) and idempotent. */
int iso_cluster_state_gpu_quarantine(struct iso_cluster_state *cs, int node, int pos);
void iso_cluster_state_gpu_restore(struct iso_cluster_state *cs, int node, int pos);
bool iso_cluster_state_gpu_quarantined(const struct iso_cluster_state *cs, int node, int pos);

/* Validates a shape against the built-in MIG tables (profile exists on some
 * model of the inventory, counts in range). Errors name the request field. */
int iso_shape_validate(const struct iso_shape *shape, const struct iso_inventory *inv,
                       struct iso_error *err);

/* A request by size rather than by name: "at least min_gib GiB and
 * min_compute compute slices". Copies `in` to `out` (whole = false) with
 * out->profile set to the smallest covering profile over the models of the
 * inventory's MIG-enabled GPUs that the shape allows (in->gpu_model,
 * in->pool): fewest memory slices, then fewest compute slices, then least
 * memory, never a "+me" profile unless nothing else covers (as
 * iso_mig_profile_resolve). Memory is the table's usable GiB, compared
 * exactly (H100-80's 1g.10gb holds 9.75). A name qualifies only if it covers
 * on every eligible model that has it (1g.10gb is 10 GiB on A100-80 but
 * 9.75 on H100-80), so the placer may use any of them. Errors, `out`
 * untouched: ISO_E_INVALID "gpus.memory_gib" (negative or not finite) or
 * "gpus.compute" (negative); ISO_E_CAPACITY (can never fit)
 * "gpus.memory_gib" (no eligible MIG GPU, or more memory than any profile
 * has) or "gpus.compute" (memory is covered, not with that many compute
 * slices). One process uses one MIG device, so the answer is one profile
 * per instance, never several smaller ones. `out` may be `in`. */
int iso_shape_resolve(const struct iso_shape *in, const struct iso_inventory *inv, double min_gib,
                      int min_compute, struct iso_shape *out, struct iso_error *err);

/* How many members of this shape the whole inventory could hold, empty and
 * with every node schedulable, counting no further than `limit`. A request
 * for more could never be placed (422), one for fewer may wait (pending). */
/* Members of the shape one empty node holds, at most `limit`. */
int iso_shape_node_members(const struct iso_node *node, const struct iso_shape *shape, int limit);
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
	/* Optional, for policies that learn demand: weights[i] requests of
	 * shapes[i] to expect, as if decided already (the simulator gives each
	 * policy the trace's mix; FGD takes the same mix at creation). Returns 0
	 * or -EINVAL (a negative or non-finite weight) / -ENOMEM. */
	int (*learn)(const struct iso_placer *self, struct iso_cluster_state *cs,
	             const struct iso_shape *shapes, const double *weights, int n);
};

static inline int iso_placer_place(const struct iso_placer *p, struct iso_cluster_state *cs,
                                   struct iso_allocation *a, int want, struct iso_error *err)
{
	return p->place(p, cs, a, want, err);
}

/* 0 for a policy that learns nothing. */
static inline int iso_placer_learn(const struct iso_placer *p, struct iso_cluster_state *cs,
                                   const struct iso_shape *shapes, const double *weights, int n)
{
	return p->learn ? p->learn(p, cs, shapes, weights, n) : 0;
}

/* ---- per-request placement constraints (the tenancy work supplies them) ----
 * Names are as in the inventory. An empty allow-list (n_* == 0) allows all;
 * a node is eligible when it is in `nodes` (if given), in none of
 * `avoid_nodes`, its rack is in `racks` (if given) and in none of
 * `avoid_racks`, and, when `gpus` is given, it has one of those GPUs (so a
 * GPU allow-list also limits CPU-only members). A GPU is eligible when its
 * node is, it is in `gpus` (if given) and in none of `avoid_gpus`. */
struct iso_gpu_ref {
	const char *node;
	int gpu; /* device index on that node */
};

struct iso_place_constraints {
	const char *const *nodes;
	int n_nodes;
	const char *const *avoid_nodes;
	int n_avoid_nodes;
	const char *const *racks;
	int n_racks;
	const char *const *avoid_racks;
	int n_avoid_racks;
	const struct iso_gpu_ref *gpus;
	int n_gpus;
	const struct iso_gpu_ref *avoid_gpus;
	int n_avoid_gpus;
	/* Isolation (docs/tenancy.md; enum iso_isolation in tenancy.h): 0
	 * shared, 1 exclusive GPU, 2 exclusive node, 3 exclusive rack. The
	 * request's members go only where no other tenant is at that level,
	 * and take marks those GPUs, nodes or racks so that no other tenant is
	 * placed there while this tenant has work on them. Every request, with
	 * or without constraints, keeps out of other tenants' marked places. */
	int exclusive;
	/* Spreading across fault domains (enum iso_spread): 0 none, 1 GPUs,
	 * 2 nodes, 3 racks: the allocation's members on distinct ones. */
	int spread;
	/* Pinning (POST /v1/allocations' "nodes"): member k, for every
	 * k < n_member_nodes, goes to node member_nodes[k] and nowhere else
	 * (every other rule still applies there). A member pinned to a node it
	 * does not fit on now is refused with ISO_E_NO_CAPACITY, field
	 * "nodes[K]", the message naming the node and why ("member 0: no free
	 * 3g.40gb placement on n1 (MIG geometry)", "... (cpus)"). */
	const char *const *member_nodes;
	int n_member_nodes;
};

/* iso_placer_place() under constraints `c` (NULL: none): sets
 * cs->constraints for the call. A name that the inventory does not have is
 * refused (ISO_E_INVALID, field "constraints.nodes[I]", ".avoid_nodes[I]",
 * ".racks[I]", ".avoid_racks[I]", ".member_nodes[I]", ".gpus[I].node" or ".gpus[I].gpu",
 * ".avoid_gpus[I].node" or ".avoid_gpus[I].gpu"; a negative count or a NULL
 * list with a count: "constraints"). Checking a constraint costs O(1) per
 * candidate after O(list length) set-up. */
int iso_placer_place_ex(const struct iso_placer *p, struct iso_cluster_state *cs,
                        struct iso_allocation *a, int want, const struct iso_place_constraints *c,
                        struct iso_error *err);
/* For policies: may the current request use node `node` (an index into
 * inv->nodes) / GPU position `pos` of it? Always true outside
 * iso_placer_place_ex() or without constraints. */
bool iso_place_node_allowed(const struct iso_cluster_state *cs, int node);
bool iso_place_gpu_allowed(const struct iso_cluster_state *cs, int node, int pos);
/* For policies: does the fabric let tenant `tenant` add a member to node
 * `node` (see iso_cluster_state_take)? */
bool iso_place_fabric_allows(const struct iso_cluster_state *cs, int node, int64_t tenant);
/* The tenants with members on node `node`: up to `max` ids into `out` (in no
 * particular order); returns how many there are. O(tenants there). */
int iso_cluster_state_node_tenants(const struct iso_cluster_state *cs, int node, int64_t *out,
                                   int max);

extern const struct iso_placer iso_placer_first_fit;
/* Baselines of the trace benchmark (src/sched/best_fit.c, fgd.c): best-fit
 * packs onto the GPU with the fewest free slices; fgd as registered scores
 * against a uniform mix (iso_placer_fgd_init below learns one). */
extern const struct iso_placer iso_placer_best_fit;
extern const struct iso_placer iso_placer_fgd;
/* The MIG-geometry-aware, fragmentation-aware engine (docs/placement.md).
 * Its learned demand mix and index live in the cluster state, so the placer
 * itself is stateless and one cluster state may be used with any policy. */
extern const struct iso_placer iso_placer_isostack;
/* The stateless policies the daemon can be started with, by name; NULL when unknown. */
const struct iso_placer *iso_placer_find(const char *name);
/* Their names, comma-separated, for messages. */
const char *iso_placer_names(void);

/* ---- baseline policies with state (src/sched/fgd.c, static_layout.c) ---- */

/* FGD (Weng et al., USENIX ATC'23) adapted to MIG: each candidate is scored by
 * how much it raises the node's expected fragmentation against a request mix:
 * the compute slices of the node that a request drawn from the mix could not
 * use, either because the node lacks the request's cpus or memory (then all
 * of them) or because of MIG geometry (src/sched/fgd.c). */
struct iso_fgd_type {
	bool whole;       /* whole GPUs on one node */
	int count;        /* GPUs when whole (1..64); 0 and no profile: CPU only */
	char profile[32]; /* MIG profile when !whole and count == 1 */
	int cpus;         /* what the request needs of a node besides GPUs */
	int64_t memory_mib;
	double weight; /* popularity: share of requests, any positive scale */
};
struct iso_fgd_mix {
	int n;
	struct iso_fgd_type *types;
};
struct iso_fgd; /* a mix prepared for scoring, with its caches */
/* Copies what it needs of `mix`. At most ISO_FGD_MAX_SHAPES distinct GPU
 * requests (cpu and memory may vary freely). */
#define ISO_FGD_MAX_SHAPES 32
int iso_fgd_new(const struct iso_fgd_mix *mix, struct iso_fgd **out, struct iso_error *err);
void iso_fgd_free(struct iso_fgd *f);
/* (The registered iso_placer_fgd in sched.h is stateless: its mix is every
 * plain profile of the inventory's GPU models and one whole GPU, equally
 * weighted, needing no cpus or memory.) FGD against `f` (borrowed; outlives the placer; its caches
 * change). */
void iso_placer_fgd_init(struct iso_placer *p, struct iso_fgd *f);
/* F_n(M): the expected fragmentation of node `node` in compute slices (f
 * NULL: the stateless default mix). */
double iso_fgd_node_fragmentation(struct iso_fgd *f, const struct iso_cluster_state *cs, int node);

/* Static (Slurm-style): every GPU is partitioned ahead of time into a fixed
 * layout, or left unpartitioned; an instance goes into the first free
 * instance of exactly its profile (nodes in order, GPU index, start), whole
 * GPUs only onto unpartitioned GPUs. */
struct iso_static_gpu {
	bool partitioned;
	struct iso_mig_layout layout; /* when partitioned */
};
struct iso_static_layout {
	const struct iso_inventory *inv;
	int *node_first;             /* per node: index of its first GPU in gpus[] */
	struct iso_static_gpu *gpus; /* per node, per position in node->gpus */
	int n_gpus;
};
/* Empty layout (every GPU unpartitioned) for `inv`; free with _free. */
int iso_static_layout_init(struct iso_static_layout *sl, const struct iso_inventory *inv);
void iso_static_layout_free(struct iso_static_layout *sl);
static inline struct iso_static_gpu *iso_static_layout_gpu(const struct iso_static_layout *sl,
                                                           int node, int pos)
{
	return &sl->gpus[sl->node_first[node] + pos];
}
/* Placer over `sl` (borrowed; outlives the placer). */
void iso_placer_static_init(struct iso_placer *p, const struct iso_static_layout *sl);

ISO_PUBLIC_END

#endif

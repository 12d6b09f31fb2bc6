/* sim.h: offline, trace-driven simulation of MIG placement, and the baseline
 * policies it measures the geometry-aware scheduler against. The simulator
 * reads the Alibaba openb CSVs (nodes and pods), builds a synthetic inventory
 * in memory whose GPUs are all of one MIG-capable model, maps every pod to an
 * allocation shape, and drives a placement policy through iso_placer_place()
 * exactly as the daemon does: a policy cannot tell a simulated cluster from a
 * real one. Method, mapping tables and measured numbers: docs/sim.md. */
#ifndef ISOSTACK_SIM_H
#define ISOSTACK_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "isostack/sched.h"

/* ---- trace input (Alibaba clusterdata cluster-trace-gpu-v2023, "openb") ----
 * Every parse error is ISO_E_INVALID with field = the column ("" for whole-line
 * problems) and message "FILE:LINE: column: what is wrong". */

struct iso_sim_node {
	char name[ISO_NAME_MAX]; /* sn */
	int cpu_milli;
	int64_t memory_mib;
	int gpus;
	int line;
};

struct iso_sim_nodes {
	char path[256];
	int n;
	struct iso_sim_node *v; /* owned */
};

struct iso_sim_pod {
	char name[ISO_NAME_MAX];
	int cpu_milli;
	int64_t memory_mib;
	int num_gpu;   /* 0: CPU only; > 1: whole GPUs on one node */
	int gpu_milli; /* share of one GPU when num_gpu == 1 (1..1000), else 0 or 1000 */
	int64_t creation, deletion; /* seconds; valid when the trace has_times */
	int line;
};

struct iso_sim_trace {
	char path[256];
	bool has_times; /* creation_time and deletion_time columns present */
	int n;
	struct iso_sim_pod *v; /* owned */
};

/* From a file (ISO_E_NOT_FOUND when it does not exist) or from memory, where
 * `name` stands in for the file name in messages. On error *out is left
 * empty. */
int iso_sim_nodes_load(const char *path, struct iso_sim_nodes *out, struct iso_error *err);
int iso_sim_nodes_parse(const char *name, const char *text, size_t len, struct iso_sim_nodes *out,
                        struct iso_error *err);
void iso_sim_nodes_clear(struct iso_sim_nodes *n);
int iso_sim_trace_load(const char *path, struct iso_sim_trace *out, struct iso_error *err);
int iso_sim_trace_parse(const char *name, const char *text, size_t len, struct iso_sim_trace *out,
                        struct iso_error *err);
void iso_sim_trace_clear(struct iso_sim_trace *t);

/* ---- pods as allocations ---- */

/* The smallest MIG profile of `m` that covers `milli` thousandths of a GPU:
 * compute slices ceil(milli * compute_slices / 1000) and memory slices
 * ceil(milli * memory_slices / 1000), never a "+me" profile. NULL for milli
 * outside 1..1000. */
const struct iso_mig_profile *iso_sim_profile_for_milli(const struct iso_gpu_model *m, int milli);

/* What a pod asks of one node (members = 1), and what it costs in slices of
 * `m`: a whole GPU counts all compute and memory slices of the model. */
struct iso_sim_request {
	struct iso_shape shape;                /* cpus in millicores (see iso_sim_cluster) */
	const struct iso_mig_profile *profile; /* NULL: whole GPUs or CPU only */
	int compute;                           /* compute slices in all */
	int memory;                            /* memory slices in all */
};
int iso_sim_pod_request(const struct iso_sim_pod *pod, const struct iso_gpu_model *m,
                        struct iso_sim_request *out, struct iso_error *err);

/* ---- the synthetic cluster ----
 * One iso_node per trace node, every GPU of model `model` with MIG enabled.
 * The node's `cpus` holds the trace's cpu_milli: in the simulator cpus are
 * millicores, and pods ask for millicores, so nothing is rounded. */
struct iso_sim_cluster {
	struct iso_inventory inv; /* nodes owned; no pools, racks or fabric */
	const struct iso_gpu_model *model;
	int n_gpus;
};

/* All nodes (pick NULL) or nodes pick[0..n_pick) in that order. */
int iso_sim_cluster_build(const struct iso_sim_nodes *nodes, const struct iso_gpu_model *model,
                          const int *pick, int n_pick, struct iso_sim_cluster *out,
                          struct iso_error *err);
void iso_sim_cluster_free(struct iso_sim_cluster *c);
/* A sub-cluster of exactly `gpus` GPUs (or as close below as the node sizes
 * allow): nodes drawn in a seeded random order, each kept while it fits the
 * budget; returned in trace order. *pick is malloc'd. */
int iso_sim_cluster_pick(const struct iso_sim_nodes *nodes, int gpus, uint64_t seed, int **pick,
                         int *n_pick, struct iso_error *err);

/* ---- reproducible randomness: splitmix64 (Steele, Lea, Flood 2014) ---- */
struct iso_sim_rng {
	uint64_t state;
};
void iso_sim_rng_seed(struct iso_sim_rng *r, uint64_t seed);
uint64_t iso_sim_rng_next(struct iso_sim_rng *r);
/* Uniform in [0, n), n > 0, by rejection: the same on every machine. */
uint64_t iso_sim_rng_below(struct iso_sim_rng *r, uint64_t n);

/* ---- MIG layouts: maximal sets of instances on one GPU ---- */
struct iso_mig_instance {
	const struct iso_mig_profile *profile;
	int start;
};
struct iso_mig_layout {
	int n;
	struct iso_mig_instance inst[ISO_MIG_MAX_SLICES]; /* by start */
};
/* Every layout of `m` built from the profiles whose bit is set in `profiles`
 * (bit i: m->profiles[i]) to which no further instance of those profiles can
 * be added. 19 for 1g/2g/3g/4g/7g on the 8-slice models, 78 with the 1g
 * double-memory profile (mig.md). *out is malloc'd, in a fixed order. */
int iso_mig_layouts_maximal(const struct iso_gpu_model *m, uint32_t profiles,
                            struct iso_mig_layout **out, int *n);
/* Mask of m's profiles without the "+me" ones. */
uint32_t iso_mig_profiles_plain(const struct iso_gpu_model *m);

/* ---- baseline placement policies (src/sched/best_fit.c, fgd.c, static_layout.c) ---- */

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

/* ---- the static policy's oracle ---- */
/* Demand in compute slices per profile of `m` (index as in m->profiles) and
 * for whole GPUs. */
struct iso_sim_demand {
	double profile[ISO_MIG_MAX_PROFILES];
	double whole;
};
/* How many GPUs get each layout (counts[i] for layouts[i]) and how many stay
 * unpartitioned, so that the supply of compute slices of every profile and of
 * whole GPUs is as near as can be, in L1 distance, to the demand scaled to the
 * cluster: a greedy pass GPU by GPU, then local search moving GPUs between
 * options while that helps (docs/sim.md). */
int iso_sim_oracle_counts(const struct iso_gpu_model *m, const struct iso_sim_demand *d,
                          const struct iso_mig_layout *layouts, int n_layouts, int n_gpus,
                          int *counts, int *unpartitioned);
/* Lays the counts out over the cluster: unpartitioned GPUs fill the largest
 * nodes first (multi-GPU requests need them together), the layouts are dealt
 * round-robin over the rest so that every node holds a mix. */
int iso_sim_oracle_assign(const struct iso_sim_cluster *c, const struct iso_mig_layout *layouts,
                          int n_layouts, const int *counts, int unpartitioned,
                          struct iso_static_layout *sl, struct iso_error *err);

/* ---- the simulation ---- */
enum iso_sim_mode { ISO_SIM_SATURATE, ISO_SIM_REPLAY };

struct iso_sim_config {
	const struct iso_gpu_model *model;
	enum iso_sim_mode mode;
	uint64_t seed;
	int max_demand_pct; /* saturate: stop at this offered demand (default 130) */
	int sub_gpus;       /* > 0: a sub-cluster of this many GPUs (the ILP's) */
	bool cold;          /* policies that learn demand start from nothing, rather
	                     * than from the trace's mix (which FGD always has) */
	bool record_places; /* saturate: keep where each arrival went, in
	                     * iso_sim_result.places and iso_sim_ilp_result.places */
};

/* Where one saturate arrival went. node ISO_SIM_NOT_MODELLED: a CPU-only pod,
 * which the any-subset ILP leaves out of its model (it holds no slices). */
#define ISO_SIM_NOT_MODELLED (-2)
struct iso_sim_place {
	int node;      /* index into the cluster's nodes; -1: left out; ISO_SIM_NOT_MODELLED */
	uint64_t gpus; /* bit i: GPU index i held (a trace node has at most 64) */
	int start;     /* start of its MIG instance; -1: whole GPUs or none */
};

#define ISO_SIM_CURVE_MAX 400
struct iso_sim_point {
	int offered_pct;
	double alloc_ratio;     /* compute slices allocated / total */
	double mem_alloc_ratio; /* memory slices allocated / total */
};

struct iso_sim_result {
	char policy[32];
	enum iso_sim_mode mode;
	int nodes, gpus;
	int64_t slices_total, mem_slices_total;
	int64_t pods;     /* submitted */
	int64_t placed;   /* placed (in replay: at creation or later) */
	int64_t rejected; /* saturate: failed and skipped; replay: never placed */
	int64_t cpu_only; /* of the submitted, pods without GPUs */
	int64_t unfit;    /* saturate: drawn but could never fit the cluster, not submitted */
	int64_t alloc_compute, alloc_memory; /* slices held at the end (saturate) */
	/* saturate */
	double alloc_ratio_at_100, alloc_ratio_at_130;
	double mem_alloc_ratio_at_100, mem_alloc_ratio_at_130;
	int n_curve;
	struct iso_sim_point curve[ISO_SIM_CURVE_MAX];
	/* replay */
	double utilisation,
	    mem_utilisation; /* time-weighted, over [first creation, last deletion] */
	int64_t queued;      /* could not be placed at creation */
	double mean_wait_s;  /* of the queued that were placed later */
	double elapsed_s;    /* wall clock of the run (informational) */
	/* record_places, saturate: `pods` entries in arrival order; owned. */
	struct iso_sim_place *places;
};
/* Frees what a result owns; safe on a zeroed or cleared result. */
void iso_sim_result_clear(struct iso_sim_result *res);

struct iso_sim; /* a prepared simulation: cluster, requests, arrival sequence */

/* Builds the cluster (the whole node list, or a sub-cluster when
 * cfg->sub_gpus > 0), maps every pod, and draws the saturate sequence, so
 * that every policy run on it sees the same arrivals. */
int iso_sim_prepare(const struct iso_sim_nodes *nodes, const struct iso_sim_trace *trace,
                    const struct iso_sim_config *cfg, struct iso_sim **out, struct iso_error *err);
void iso_sim_free(struct iso_sim *s);
static inline void iso_sim_freep(struct iso_sim **s)
{
	if (*s)
		iso_sim_free(*s);
}
const struct iso_sim_cluster *iso_sim_cluster_of(const struct iso_sim *s);
/* The saturate sequence: indexes into the trace, in arrival order. */
const int *iso_sim_sequence(const struct iso_sim *s, int *n);

/* The policies the simulator knows, by name ("static", "first-fit",
 * "best-fit", "fgd", "isostack"). */
extern const char *const iso_sim_policies[];
extern const int iso_sim_n_policies;

/* Runs one policy from an empty cluster. Unknown name: ISO_E_INVALID; a known
 * policy missing from this build: ISO_E_NOT_FOUND ("policy isostack not
 * available in this build"). The caller clears `res` (iso_sim_result_clear);
 * on failure nothing is left to clear. */
int iso_sim_run(struct iso_sim *s, const char *policy, struct iso_sim_result *res,
                struct iso_error *err);

/* ---- exact upper bound (GLPK) ---- */
struct iso_sim_ilp_result {
	bool optimal; /* proven optimal; else the time limit was hit */
	double best;  /* compute slices of the best placement found */
	double bound; /* upper bound on the optimum (= best when optimal) */
	int pods, columns, rows;
	double elapsed_s;
	/* iso_sim_ilp() with record_places: where the best placement found puts
	 * each of the `arrivals` pods (all left out when none was found); owned. */
	int arrivals;
	struct iso_sim_place *places;
};
void iso_sim_ilp_result_clear(struct iso_sim_ilp_result *res);
/* Which optimum the ILP finds:
 * ANY_SUBSET  the most compute slices that pods[0..n) can hold at once, any
 *             subset, any order: an offline optimum that chooses which
 *             arrivals to keep;
 * IN_ORDER    the most that a policy placing every arrival that fits can hold:
 *             the pods come in the order given, and one is left out only when
 *             the state the earlier ones left blocks every place it could go.
 *             It bounds every policy the simulator runs, whatever where-to-put
 *             rule it uses, and is never above ANY_SUBSET. */
enum iso_sim_ilp_kind { ISO_SIM_ILP_ANY_SUBSET, ISO_SIM_ILP_IN_ORDER };
/* True when this build has GLPK. */
bool iso_sim_ilp_available(void);
/* The optimum of `kind` for pods[0..n) on `inv`: one binary per pod x GPU x
 * allowed start (and per pod x node for whole GPUs), memory slices of a GPU
 * used at most once, compute, max count and the one "+me" per GPU, node cpus
 * and memory (docs/sim.md). `places`, when not NULL, has n entries and gets
 * the best placement found. ISO_E_UNAVAILABLE without GLPK. */
int iso_sim_ilp_solve(const struct iso_inventory *inv, const struct iso_shape *pods, int n,
                      enum iso_sim_ilp_kind kind, double time_limit_s, struct iso_sim_place *places,
                      struct iso_sim_ilp_result *res, struct iso_error *err);
/* The ILP on a prepared (sub-cluster) saturate simulation's arrivals up to
 * and including the one at which the offered demand reaches `pct` % of the
 * cluster's compute slices (the pods a policy had seen at that point of its
 * curve). */
int iso_sim_ilp(const struct iso_sim *s, int pct, enum iso_sim_ilp_kind kind, double time_limit_s,
                struct iso_sim_ilp_result *res, struct iso_error *err);

/* ---- a bound for whole clusters (GLPK) ---- */
struct iso_sim_lp_bound {
	double bound; /* compute slices no placement can exceed */
	int pods;     /* GPU pods among the arrivals */
	int pod_types, node_classes, columns, rows;
	double elapsed_s;
};
/* An upper bound on the most compute slices the arrivals up to the one that
 * crosses `pct` % offered demand can hold at once: the ILP relaxed by pooling
 * identical nodes into classes and identical pods into types, solved as an LP
 * (src/sim/lp_bound.c). Any size of cluster; never below the true optimum.
 * ISO_E_UNAVAILABLE without GLPK. */
int iso_sim_lp_bound(const struct iso_sim *s, int pct, struct iso_sim_lp_bound *res,
                     struct iso_error *err);

#endif

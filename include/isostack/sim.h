/* sim.h: offline, trace-driven simulation of MIG placement. It measures the
 * geometry-aware scheduler against the baseline policies (best-fit, FGD,
 * static layouts: declared in sched.h, the layer below). The simulator
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

ISO_PUBLIC_BEGIN

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
	/* Slurm's count-based node choice (the slurm-count policies,
	 * counts_requeues): GPU pods that Slurm's counts sent at least once to a
	 * node that could not hold them (each would have failed there and been
	 * requeued), and such misses in all. 0 for every other policy: they
	 * choose node and slice together and never send a pod where it does
	 * not fit. Shares are of the GPU pods submitted (pods - cpu_only);
	 * saturate also over the arrivals up to the one that crosses 100%
	 * offered demand (NAN in replay, or when the run never gets there). */
	bool counts_requeues;
	int64_t requeued, requeues;
	double requeue_share, requeue_share_at_100;
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
 * "best-fit", "fgd", "isostack", "slurm-count", "slurm-count-first"; the
 * last two: Slurm's count-based node choice, cons_tres's best fit or the
 * first node, in front of isostack's slice choice). */
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

ISO_PUBLIC_END

#endif

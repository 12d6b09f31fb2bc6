/* index.h: the private index a cluster state keeps beside its usage, so that
 * nothing in the placement path scans the cluster: node names hashed to
 * indexes, the tenants present on every node (the fabric's VF rule), and
 * GPUs bucketed by (pool, model, MIG state) and nodes by (pool, empty GPUs).
 * take/give keep it current in O(1) per slot (O(GPUs of the node) when a
 * GPU becomes empty or stops being empty). Private to src/sched; the design
 * is in docs/placement.md. */
#ifndef ISOSTACK_SCHED_INDEX_H
#define ISOSTACK_SCHED_INDEX_H

#include "sched/internal.h"

/* Strings (borrowed from the inventory) hashed to int values. */
struct ix_strslot {
	const char *name; /* NULL: empty slot */
	int32_t value;
};
struct ix_strmap {
	struct ix_strslot *slot;
	uint32_t mask;
	int32_t n;
};
/* The value stored for `s`, or -1. */
int ix_strmap_find(const struct ix_strmap *m, const char *s);

struct ix_tenant {
	int64_t id;
	int members;
};

/* Tenants present on one node or rack (counting members) or one GPU
 * (counting slots), in the order they came, and the tenant holding it
 * exclusively (exclusive.c). */
struct ix_tset {
	int n, cap;
	struct ix_tenant *t;
	int64_t excl_owner;
	bool excl;
};
/* Index of the tenant in the set, or -1. */
int ix_tset_find(const struct ix_tset *s, int64_t tenant);
/* One more member (slot) of the tenant: 0 or -ENOMEM. */
int ix_tset_add(struct ix_tset *s, int64_t tenant);
/* One fewer; a tenant's last leaves the set (the others keep their order)
 * and takes the exclusive mark with it when it held it. */
void ix_tset_remove(struct ix_tset *s, int64_t tenant);
/* Is any tenant but `tenant` in the set? */
static inline bool ix_tset_others(const struct ix_tset *s, int64_t tenant)
{
	return s->n > 1 || (s->n == 1 && s->t[0].id != tenant);
}

struct ix_node {
	int32_t gpu_base; /* global id of the node's first GPU */
	int32_t pool, rack;
	int32_t n_empty;                     /* GPUs with nothing in use (any MIG mode) */
	int32_t nbucket;                     /* node bucket, or -1 */
	int32_t next, prev;                  /* neighbours in the node bucket's list, -1: none */
	int32_t vf_limit;                    /* distinct tenants allowed; INT32_MAX: none */
	bool vfs;                            /* tenants use VFs (counted in usage.vfs_used) */
	struct ix_tset ten;                  /* tenants with members here; exclusive-node holder */
	uint32_t seen;                       /* decision stamp: rejected in this decision */
	uint32_t tried;                      /* candidate stamp: scored for this candidate */
	uint32_t c_allow, c_avoid, c_hasgpu; /* constraint stamps */
	uint32_t spread;                     /* stamp: the current request has a member here */
};

struct ix_gpu {
	int32_t node;
	int16_t pos;        /* position in node->gpus */
	int16_t model;      /* index into ix->models; -1 without a model */
	int32_t bucket;     /* GPU bucket, or -1 when in none (whole, no MIG, no model) */
	int32_t next, prev; /* neighbours in the bucket's list, -1: none */
	bool empty;
	uint32_t c_allow, c_avoid; /* constraint stamps */
	uint32_t spread;           /* stamp: the current request has a member here */
	struct ix_tset ten;        /* tenants with slots here; exclusive-gpu holder */
};

/* The engine's per-model data (mix.c), built on first use. Scores are
 * fragmentation in millionths of a memory slice, so that ties are exact. */
struct ix_cand {
	int32_t delta;      /* change of expected fragmentation: lower is better */
	uint16_t key;       /* MIG state */
	uint8_t start;      /* best start there */
	uint8_t free_after; /* free memory slices after */
};

struct ix_engine_model {
	struct iso_mig_state_table tab;
	double counts[ISO_MIG_MAX_PROFILES + 1]; /* decayed demand; last: whole GPUs */
	double w[ISO_MIG_MAX_PROFILES + 1];      /* the mix the scores were built with */
	int32_t frag[ISO_MIG_STATES];            /* expected unusable slices per state */
	double w_strand;                         /* the strand weight they were built with */
	int n_cand[ISO_MIG_MAX_PROFILES];
	struct ix_cand cand[ISO_MIG_MAX_PROFILES][ISO_MIG_STATES]; /* best first */
};

#define IX_WHOLE ISO_MIG_MAX_PROFILES /* the demand slot of whole GPUs */

struct ix_model {
	const struct iso_gpu_model *m;
	struct ix_engine_model *eng; /* NULL until the engine first needs it */
	/* MIG-enabled GPUs of this model, and how many of them are empty: how
	 * scarce empty GPUs are, for the engine's strand weight (mix.c). */
	int32_t mig_gpus, mig_empty;
};

/* GPU buckets: key < ISO_MIG_STATES is a MIG state of a non-empty MIG GPU;
 * ISO_MIG_STATES + e holds empty MIG GPUs of nodes with e empty GPUs. */
#define IX_KEY_EMPTY(e) (ISO_MIG_STATES + (e))

struct iso_sched_index {
	struct ix_strmap node_names, pools, racks;
	int n_nodes, n_gpus, n_models, gmax;
	struct ix_node *nodes;
	struct ix_gpu *gpus;
	struct ix_model *models;
	int n_keys; /* GPU bucket keys per (pool, model) */
	/* Buckets are intrusive doubly linked lists (heads here, links in the
	 * GPUs and nodes), so keeping them never allocates: newest first. */
	int32_t *gbuckets; /* [pool][model][key]: first GPU or -1 */
	int32_t *nbuckets; /* [pool][e]: first node or -1; e = gmax + 1: nodes without GPUs */
	int32_t *key_gpus; /* [model][key]: GPUs in that key's buckets over every pool */
	int32_t *rack_first, *rack_next; /* nodes of each rack, inventory order */
	int n_pools, n_racks;
	int32_t *pool_gpus, *pool_empty; /* GPUs and empty GPUs per pool */
	int32_t *pool_order;             /* scratch: pools of one decision, best first */
	bool fabric_limited;             /* infiniband / omnipath */
	uint32_t decision;               /* stamp for ix_node.seen */
	/* Resolved constraints (constraints.c). */
	const struct iso_place_constraints *c_for;
	uint32_t c_gen;
	/* The node the member being chosen is pinned to (member_nodes), -1
	 * none; set by iso_sched_place around each member's choice. */
	int32_t c_pin;
	uint32_t *rack_allow, *rack_avoid;
	/* Isolation and spreading (exclusive.c): tenants per rack, and the
	 * request being placed (set by iso_sched_place). */
	struct ix_tset *rack_ten;
	uint32_t *rack_spread;
	uint32_t spread_gen;
	bool req_active;
	int64_t req_tenant;
	int req_excl, req_spread;
	/* Engine state (mix.c, isostack.c). */
	bool eng_ready;
	uint64_t decisions, refreshes;
	/* What a compute slice of GPU demand brings along (decayed sums over
	 * the members decided): cores and MiB, for the node term. */
	double d_slices, d_cpus, d_mem;
	uint32_t cand_stamp; /* for ix_node.tried */
	int since_refresh;
	int32_t *scratch_nodes;                /* n_nodes: candidate lists of one decision */
	struct iso_gpu_occupancy *scratch_occ; /* gmax: one node's GPUs, tried */
};

int ix_build(struct iso_cluster_state *cs);
void ix_free(struct iso_sched_index *ix);

static inline int32_t ix_gbucket_id(const struct iso_sched_index *ix, int pool, int model, int key)
{
	return (int32_t)(((int64_t)pool * ix->n_models + model) * ix->n_keys + key);
}

static inline int32_t ix_nbucket_id(const struct iso_sched_index *ix, int pool, int e)
{
	return (int32_t)((int64_t)pool * (ix->gmax + 2) + e);
}

/* Keeps the index current after GPU `pos` of node `ni` changed. */
void ix_gpu_changed(struct iso_cluster_state *cs, int ni, int pos);

/* Tenants on a node (the VF rule). */
bool ix_fabric_allows(const struct iso_sched_index *ix, int ni, int64_t tenant);
int ix_tenant_add(struct iso_cluster_state *cs, int ni, int64_t tenant);
void ix_tenant_remove(struct iso_cluster_state *cs, int ni, int64_t tenant);

/* Isolation classes and spreading (exclusive.c; docs/tenancy.md). take and
 * give keep the tenants per GPU and rack and the exclusive marks; level is
 * the exclusive level the allocation was taken with (0: shared). */
int ix_excl_member_take(struct iso_cluster_state *cs, int ni, int64_t tenant, int level);
void ix_excl_member_give(struct iso_cluster_state *cs, int ni, int64_t tenant);
int ix_excl_slot_take(struct iso_cluster_state *cs, int ni, int pos, int64_t tenant, int level);
void ix_excl_slot_give(struct iso_cluster_state *cs, int ni, int pos, int64_t tenant);
/* May `tenant`, asking for exclusive level `level`, add a member to node ni
 * / a slot to GPU gid? O(1). */
bool ix_excl_node_allows(const struct iso_sched_index *ix, int ni, int64_t tenant, int level);
bool ix_excl_gpu_allows(const struct iso_sched_index *ix, int gid, int64_t tenant, int level);
/* The request being placed: its isolation and spreading, checked by every
 * policy through iso_place_node_allowed() / iso_place_gpu_allowed() and by
 * the engine's node and GPU checks. */
void ix_request_begin(struct iso_cluster_state *cs, const struct iso_allocation *a);
void ix_request_member_placed(struct iso_cluster_state *cs, const struct iso_allocation *a, int k);
void ix_request_end(struct iso_cluster_state *cs);
bool ix_request_node_ok(const struct iso_sched_index *ix, int ni);
bool ix_request_gpu_ok(const struct iso_sched_index *ix, int gid);
void ix_excl_free(struct iso_sched_index *ix);

/* Constraints (constraints.c). Resolves cs->constraints into stamps;
 * returns 0 or -EINVAL naming the culprit. */
int ix_constraints_resolve(struct iso_cluster_state *cs, struct iso_error *err);
/* Sets ix->c_pin for member k of the request (-1 when k is not pinned or
 * outside a placement). */
void ix_constraints_pin(struct iso_cluster_state *cs, int k);
bool ix_constraints_active(const struct iso_cluster_state *cs);

/* The engine's demand mix and scores (mix.c). */
int eng_prepare(struct iso_sched_index *ix); /* builds every model's tables once */
void eng_record(struct iso_sched_index *ix, const struct iso_shape *shape);
/* Demand known in advance: weights[i] requests of shapes[i], scaled to weigh
 * what the decay keeps of a long history; then the tables are rebuilt. */
int eng_learn(struct iso_sched_index *ix, const struct iso_shape *shapes, const double *weights,
              int n);
/* Compute slices a member of `shape` takes on model m (0 when CPU-only). */
int eng_member_slices(const struct iso_gpu_model *m, const struct iso_shape *shape);
/* Rebuilds a model's scores when its mix moved (checked every few decisions). */
void eng_refresh(struct iso_sched_index *ix, bool force);
/* The best start of profile index j on a GPU with occupancy `o` (checked
 * with iso_mig_fits_at), its score in *delta; -1 when it does not fit. */
int eng_best_start(const struct ix_engine_model *em, int j, const struct iso_gpu_occupancy *o,
                   int32_t *delta);

#endif

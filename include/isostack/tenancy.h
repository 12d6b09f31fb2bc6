/* tenancy.h: the policy core of multi-tenancy, as a pure library: quotas
 * with guaranteed, borrowing and lending limits on a tree of accounts
 * (organisation > tenant > project), decayed-usage Fair Tree ordering of the
 * pending queue with dominant shares, backfill against a reservation
 * profile, minimal deterministic preemption, isolation classes as placement
 * constraints, and admission policies in a Lua sandbox. Nothing here talks
 * to the store, the API or the clock: callers pass timestamps in, so the
 * same history always gives the same answers. Semantics: docs/tenancy.md. */
#ifndef ISOSTACK_TENANCY_H
#define ISOSTACK_TENANCY_H

#include <stdbool.h>
#include <stdint.h>

#include "isostack/sched.h"
#include "isostack/util.h"

ISO_PUBLIC_BEGIN

/* ---- resource vectors ----
 * Kinds 0..3 are fixed; each GPU model with MIG slices gets a kind of its own
 * ("compute slices of h100-80gb"), added by name to the tree. */
enum {
	ISO_RES_GPUS = 0,   /* whole GPUs */
	ISO_RES_CPUS = 1,   /* cores */
	ISO_RES_MEMORY = 2, /* MiB */
	ISO_RES_NODES = 3,  /* whole (exclusive) nodes */
	ISO_RES_FIRST_MODEL = 4,
};
#define ISO_RES_MAX       16
#define ISO_QUOTA_NONE    INT64_MAX /* a limit that is not set: unlimited */
#define ISO_RES_MODEL_MAX 32

struct iso_resvec {
	int64_t v[ISO_RES_MAX];
};

/* ---- the account tree ---- */
enum iso_acct_level {
	ISO_ACCT_ROOT,
	ISO_ACCT_ORG,
	ISO_ACCT_TENANT,
	ISO_ACCT_PROJECT,
};
const char *iso_acct_level_name(enum iso_acct_level l); /* "organisation", "tenant", ... */

/* One kind's limits on one account. guaranteed: always available to the
 * account (lent capacity is reclaimed by preemption); borrow_limit: how far
 * above guaranteed it may go using idle capacity of its cohort; lend_limit:
 * how much of its unused guarantee its cohort may borrow. */
struct iso_quota {
	int64_t guaranteed;
	int64_t borrow_limit; /* ISO_QUOTA_NONE: unlimited */
	int64_t lend_limit;   /* ISO_QUOTA_NONE: all of its unused guarantee */
};

struct iso_account {
	char name[ISO_NAME_MAX];
	enum iso_acct_level level;
	int parent;                    /* index, -1 for the root */
	int first_child, next_sibling; /* -1: none; children in insertion order */
	double shares;                 /* fair-share weight among its siblings (> 0) */
	struct iso_quota q[ISO_RES_MAX];
	struct iso_resvec used; /* in use now: own plus all descendants' */
	/* Decayed usage (fairshare.c): weighted resource-milliseconds, per kind,
	 * as of decayed_at_ms. */
	double decayed[ISO_RES_MAX];
	int64_t decayed_at_ms;
};

struct iso_tenancy {
	int n_kinds;
	char model[ISO_RES_MAX][ISO_RES_MODEL_MAX]; /* names of model kinds, "" for fixed ones */
	double model_weight[ISO_RES_MAX];           /* value of one slice of that model */
	struct iso_resvec capacity;                 /* the cluster's, for dominant shares */
	int64_t half_life_ms;                       /* decay of usage; > 0 */
	int n_accounts, cap_accounts;
	struct iso_account *acct; /* [0] is the root, named "root" */
	/* names -> index + 1 (0: empty), open addressing, at most half full:
	 * iso_tenancy_find is O(1), not O(accounts), on every request */
	int *by_name;
	int by_name_cap;
};

/* A tree with only the root (unlimited guarantees). 0 or -ENOMEM. */
int iso_tenancy_init(struct iso_tenancy *t, int64_t half_life_ms);
void iso_tenancy_free(struct iso_tenancy *t);
/* The kind for compute slices of `model` (added on first use, with weight 1). */
int iso_tenancy_kind(struct iso_tenancy *t, const char *model, struct iso_error *err);
/* "h100-80gb compute slices", "whole GPUs", "cpus", "memory MiB", "nodes". */
void iso_tenancy_kind_label(const struct iso_tenancy *t, int kind, char *buf, size_t size);
/* Adds an account below `parent` (its level must be one above `level`); its
 * quotas start unset: guaranteed 0, borrowing and lending unlimited.
 * Returns the new index or a negative errno (ISO_E_INVALID "name",
 * "parent"; ISO_E_CONFLICT when the name exists). */
int iso_tenancy_add(struct iso_tenancy *t, const char *name, enum iso_acct_level level, int parent,
                    double shares, struct iso_error *err);
int iso_tenancy_find(const struct iso_tenancy *t, const char *name);
/* Renames an account (the controller's tombstones for deleted ones). The name
 * is not checked: a name no object can have is the point. 0 or -ENOMEM. */
int iso_tenancy_rename(struct iso_tenancy *t, int acct, const char *name);
/* Sets one kind's quota; checks it nests: a child's guarantee never exceeds its
 * parent's and the children's guarantees never add up to more than the
 * parent's (ISO_E_INVALID "quota.<account>.<kind>"). */
int iso_tenancy_set_quota(struct iso_tenancy *t, int acct, int kind, struct iso_quota q,
                          struct iso_error *err);

/* May `acct` (usually a leaf) start a request of `req` now? Checks every
 * kind at the account and every ancestor below the root: the hard limit
 * (in use + request <= guaranteed + borrowing limit), and that what the
 * account would borrow is idle in its cohort (the siblings' unused
 * guarantees up to their lending limits, plus the parent's unassigned
 * guarantee, plus what the parent itself may borrow). 0, or ISO_E_NO_CAPACITY
 * naming the account, the kind and the limit, field "quota.<account>.<kind>". */
int iso_tenancy_admit(const struct iso_tenancy *t, int acct, const struct iso_resvec *req,
                      struct iso_error *err);
/* Charges or releases `r` on the account and its ancestors (no checks). */
void iso_tenancy_charge(struct iso_tenancy *t, int acct, const struct iso_resvec *r);
void iso_tenancy_release(struct iso_tenancy *t, int acct, const struct iso_resvec *r);
/* True when the account uses more than its guarantee of some kind. */
bool iso_tenancy_borrowing(const struct iso_tenancy *t, int acct);

/* ---- fair share (fairshare.c) ---- */

/* Integrates every account's current usage into its decayed usage up to
 * now_ms (exact for piecewise-constant usage): U <- U*d + used*H/ln2*(1-d),
 * d = 2^(-dt/H). Timestamps must not go back (-EINVAL). */
int iso_fairshare_accrue(struct iso_tenancy *t, int64_t now_ms);
/* Adds a finished piece of work directly (resource-milliseconds at now_ms). */
void iso_fairshare_add(struct iso_tenancy *t, int acct, const struct iso_resvec *r, double ms);
/* The dominant share of a usage vector: max over GPU (weighted slices plus
 * whole GPUs), cpus, memory and nodes of usage / capacity. */
double iso_fairshare_dominant(const struct iso_tenancy *t, const double *usage);
/* Fair Tree: level fair share LF = S/U of every account among its siblings
 * (S = shares / sum of siblings' shares, U = dominant decayed usage / sum
 * of siblings'; LF = +inf when U is 0), siblings sorted by LF (ties: name),
 * walked depth first. Fills rank[acct] (0 = best) for every account that
 * has no children, and lf[acct] when lf is not NULL; n_accounts entries. */
int iso_fairshare_rank(const struct iso_tenancy *t, int *rank, double *lf);

struct iso_pending {
	char id[ISO_ID_MAX];
	int acct; /* the leaf account it is charged to */
	int priority;
	int64_t submit_ms;
	struct iso_resvec req;
	int64_t duration_ms; /* expected run time (backfill) */
};

struct iso_queue_entry {
	int item;     /* index into the pending array */
	int position; /* 1-based */
	int ahead_other_accounts;
	double level_fs; /* the owner's level fair share at the level that decided */
	char reason[ISO_DESC_MAX];
};

/* Orders pending items by the owner's Fair Tree rank, then priority (higher
 * first), then submit time, then id. Deterministic. out has n entries. */
int iso_fairshare_order(const struct iso_tenancy *t, const struct iso_pending *items, int n,
                        struct iso_queue_entry *out, struct iso_error *err);
/* What the owner of entry `pos` (0-based in out) may see: its position and
 * why it waits, never another tenant's name. -ENOENT (ISO_E_NOT_FOUND) when
 * `viewer` is not the item's account or one of its ancestors. */
int iso_fairshare_explain(const struct iso_tenancy *t, const struct iso_pending *items,
                          const struct iso_queue_entry *out, int n, int pos, int viewer, char *buf,
                          size_t size, struct iso_error *err);

/* ---- backfill (backfill.c) ---- */
struct iso_running {
	char id[ISO_ID_MAX];
	int acct;
	int priority;
	int64_t start_ms;
	int64_t end_ms; /* expected end */
	struct iso_resvec use;
	bool fail_on_preempt; /* victim policy: fail instead of requeue */
};

/* Walks the ordered queue (out of iso_fairshare_order) against `capacity`
 * and the running work: items that fit now start (start[i] = true); the
 * first that does not gets a reservation at the earliest time the profile
 * lets it run for its duration, and a later item starts now only if it fits
 * both now and beside that reservation for its whole duration, so the
 * blocked head is never delayed. *head_start_ms: the reservation, or -1.
 * start has n entries, indexed like `items`. */
int iso_backfill_plan(const struct iso_resvec *capacity, const struct iso_running *run, int n_run,
                      const struct iso_pending *items, const struct iso_queue_entry *order, int n,
                      int64_t now_ms, bool *start, int64_t *head_start_ms, struct iso_error *err);

/* ---- preemption (preempt.c) ---- */
enum iso_preempt_mode {
	ISO_PREEMPT_RECLAIM,  /* a lender takes back what it lent above borrowers' guarantees */
	ISO_PREEMPT_PRIORITY, /* lower-priority work of the same tenant */
};

struct iso_preempt_params {
	int64_t now_ms;
	int64_t min_run_ms; /* never a victim younger than this */
	int64_t grace_ms;   /* signal at now, kill at now + grace */
	int64_t max_nodes;  /* search budget; 0: default (2,000,000) */
};

struct iso_victim {
	int run; /* index into the running array */
	int64_t signal_at_ms, kill_at_ms;
	bool requeue; /* else fail */
};

struct iso_preempt_plan {
	int n;
	struct iso_victim v[64];
	int64_t lost_ms; /* run time lost: sum over victims of now - start */
	bool exact;      /* false when the search budget ran out (greedy answer) */
};

/* Chooses the minimal victim set (fewest, then least lost run time, then
 * the lexicographically smallest sorted ids) among eligible running work
 * whose release covers `need` (per kind). Reclaim: the preemptor's tenant
 * must stay within its guarantee with the request, victims belong to
 * other tenants and started while their tenant was above its guarantee
 * (the oldest work that fits in a guarantee is inside it and never a
 * victim). Priority: victims are the same tenant's lower-priority work.
 * ISO_E_NO_CAPACITY when no eligible set covers. */
int iso_preempt_choose(const struct iso_tenancy *t, enum iso_preempt_mode mode, int acct,
                       int priority, const struct iso_resvec *req, const struct iso_resvec *need,
                       const struct iso_running *run, int n_run, const struct iso_preempt_params *p,
                       struct iso_preempt_plan *plan, struct iso_error *err);
/* May running item `i` ever be a victim for this preemptor (the rules
 * above, without minimality)? For tests and explanations. */
bool iso_preempt_eligible(const struct iso_tenancy *t, enum iso_preempt_mode mode, int acct,
                          int priority, const struct iso_running *run, int n_run, int i,
                          const struct iso_preempt_params *p);

/* ---- isolation (isolation.c) ---- */
enum iso_isolation {
	ISO_ISOLATION_SHARED,
	ISO_ISOLATION_EXCLUSIVE_GPU,
	ISO_ISOLATION_EXCLUSIVE_NODE,
	ISO_ISOLATION_EXCLUSIVE_RACK,
};
enum iso_spread {
	ISO_SPREAD_NONE,
	ISO_SPREAD_GPU,  /* members on distinct GPUs */
	ISO_SPREAD_NODE, /* members on distinct nodes */
	ISO_SPREAD_RACK, /* members on distinct racks (PDUs) */
};
const char *iso_isolation_name(enum iso_isolation i);
int iso_isolation_parse(const char *s, enum iso_isolation *out);
const char *iso_spread_name(enum iso_spread s);
int iso_spread_parse(const char *s, enum iso_spread *out);
/* Fills the placement constraints' isolation and spread fields from the
 * request's class (the stricter of the tenant's and the request's). */
void iso_isolation_constraints(enum iso_isolation tenant_class, enum iso_isolation request_class,
                               enum iso_spread spread, struct iso_place_constraints *c);

/* ---- admission policies in Lua (admission_lua.c) ---- */
struct iso_admission_gpu {
	const char *profile; /* "" when whole */
	int count;
	bool whole;
};
struct iso_admission_request {
	const char *tenant;
	const char *const *tags;
	int n_tags;
	int members;
	struct iso_admission_gpu gpus;
	int cpus;
	int64_t memory_mib;
	enum iso_isolation isolation;
};

struct iso_admission_limits {
	size_t memory_bytes;  /* 0: 4 MiB */
	int64_t instructions; /* 0: 1,000,000 VM instructions */
};

/* Runs policy `name` (its source `src`) against the request in a fresh
 * sandbox (base without file access or bytecode loading, string, table,
 * math; no io, os, package, debug). Returns 0 when it returns true;
 * ISO_E_FORBIDDEN with "policy NAME: REASON" when it returns false, REASON;
 * ISO_E_FORBIDDEN also for a script that fails ("policy NAME: line N: ..."),
 * runs out of instructions ("policy NAME: exceeded its instruction budget")
 * or memory ("policy NAME: exceeded its memory limit"), or returns
 * anything else. Never aborts the process. field "policy.NAME". */
int iso_admission_lua_eval(const char *name, const char *src, size_t len,
                           const struct iso_admission_request *req,
                           const struct iso_admission_limits *lim, struct iso_error *err);

ISO_PUBLIC_END

#endif

/* model.h: the plain data of isostack and its invariants: tenants, roles and
 * tokens, nodes with their GPUs and fabric port, and allocations with their
 * state machine. No storage, HTTP or driver knowledge lives here. */
#ifndef ISOSTACK_MODEL_H
#define ISOSTACK_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isostack/util.h"

ISO_PUBLIC_BEGIN

/* A GPU names its model (mig.h, a layer above) by pointer only. */
struct iso_gpu_model;

/* ---- access model ---- */
enum iso_role {
	ISO_ROLE_CLUSTER_ADMIN,
	ISO_ROLE_AUDITOR,
	ISO_ROLE_TENANT_ADMIN,
	ISO_ROLE_TENANT_USER,
	ISO_ROLE_NODE_AGENT, /* one node's agent (its token names the node); never a tenant */
	ISO_ROLE_NEUTRON,    /* an OpenStack Neutron driver (docs/openstack.md); never a tenant */
};
const char *iso_role_name(enum iso_role role); /* "cluster-admin", ... */
int iso_role_parse(const char *s, enum iso_role *out);
bool iso_role_is_tenant_scoped(enum iso_role role);

#define ISO_DESC_MAX 256
#define ISO_ID_MAX   40 /* textual object ids: "a-0000000000000001", token ids */

/* How a tenant's allocations map to fabric partitions (P_Keys). */
enum iso_partition_mode {
	ISO_PARTITION_PER_TENANT = 0,     /* one P_Key shared by all its allocations */
	ISO_PARTITION_PER_ALLOCATION = 1, /* each allocation its own P_Key and VFs */
};
/* "per-tenant" / "per-allocation"; parse returns -EINVAL for anything else. */
const char *iso_partition_mode_name(enum iso_partition_mode m);
int iso_partition_mode_parse(const char *s, enum iso_partition_mode *out);

struct iso_tenant {
	int64_t id;
	char name[ISO_NAME_MAX];
	char description[ISO_DESC_MAX];
	int64_t created_ms;
	int64_t updated_ms;
	/* tenancy policy (docs/tenancy.md) */
	char org[ISO_NAME_MAX];  /* its organisation, "" = none */
	double shares;           /* fair-share weight among its siblings; 1 by default */
	char isolation[24];      /* shared | exclusive-gpu | exclusive-node | exclusive-rack */
	char tags[ISO_DESC_MAX]; /* comma-separated labels ("hipaa"), for admission policies */
	int max_pending;         /* pending allocations at once; 0 = the daemon's default */
	int max_live;            /* allocations holding resources at once; 0 = the default */
	int max_user_priority;   /* highest priority its tenant-users may ask for */
	int writes_per_s;        /* its request rates; 0 = the daemon's defaults */
	int reads_per_s;
	/* io_uring allowed by its members' seccomp filter (docs/sandbox.md);
	 * false by default, set by cluster-admins only */
	bool io_uring;
	/* its fabric partitions (docs/fabric.md, "Per-allocation partitions"):
	 * one P_Key for the whole tenant, or one per allocation */
	enum iso_partition_mode partition;
};

/* The per-tenant limits above as one table (docs/tenancy.md, "Limits"), so
 * the API, the controller and isoctl parse, check and name them alike. */
enum iso_tenant_limit {
	ISO_LIMIT_MAX_PENDING,
	ISO_LIMIT_MAX_LIVE,
	ISO_LIMIT_MAX_USER_PRIORITY,
	ISO_LIMIT_WRITES_PER_S,
	ISO_LIMIT_READS_PER_S,
	ISO_TENANT_LIMITS
};
struct iso_tenant_limit_def {
	const char *name; /* "max_pending": the key in "limits", the field in errors */
	const char *flag; /* "--max-pending": isoctl's */
	size_t offset;    /* of its int in struct iso_tenant */
	int min, max;
};
const struct iso_tenant_limit_def *iso_tenant_limit_def(enum iso_tenant_limit l);
static inline int *iso_tenant_limit(struct iso_tenant *t, enum iso_tenant_limit l)
{
	return (int *)(void *)((char *)t + iso_tenant_limit_def(l)->offset);
}

/* A bearer token is "iso_<id>_<secret>": the id finds the row, the secret is
 * compared in constant time against a stored BLAKE2b hash. */
#define ISO_TOKEN_ID_LEN     12 /* hex chars */
#define ISO_TOKEN_SECRET_LEN 43 /* base64url of 32 random bytes */
#define ISO_TOKEN_HASH_LEN   32
#define ISO_TOKEN_MAX        64

struct iso_token {
	char id[ISO_TOKEN_ID_LEN + 1];
	int64_t tenant_id; /* 0 for cluster-wide roles */
	enum iso_role role;
	char node[ISO_NAME_MAX]; /* node-agent: the node it acts for; "" for other roles */
	char user[ISO_NAME_MAX]; /* who holds it: free-form label, may be "" */
	char description[ISO_DESC_MAX];
	uint8_t hash[ISO_TOKEN_HASH_LEN];
	int64_t created_ms;
	int64_t expires_ms; /* 0: never */
	int64_t revoked_ms; /* 0: live */
};

/* ---- hardware ---- */
enum iso_fabric_type {
	ISO_FABRIC_INFINIBAND,
	ISO_FABRIC_ETHERNET,
	ISO_FABRIC_OMNIPATH,
	ISO_FABRIC_SLINGSHOT /* HPE Slingshot: a VNI per tenant, CXI services per node */
};
const char *iso_fabric_type_name(enum iso_fabric_type t);

struct iso_gpu {
	int index; /* device index on its node */
	const struct iso_gpu_model *model;
	bool mig_enabled;
};

struct iso_port {
	char device[32]; /* "mlx5_0" */
	int port_num;    /* 1-based HCA port */
	uint64_t guid;   /* port GUID of the physical function */
	int pkey_capacity;
	int n_vfs;          /* SR-IOV virtual functions; 0 = fabric-exclusive node */
	uint64_t *vf_guids; /* n_vfs entries, owned */
};

enum iso_node_sched {
	ISO_NODE_SCHEDULABLE,
	ISO_NODE_CORDONED, /* no new work; running work stays */
	ISO_NODE_DRAINING, /* cordoned, and its work is being released */
	ISO_NODE_DOWN,     /* reported down: no work; its work was evicted */
};
const char *iso_node_sched_name(enum iso_node_sched s);

struct iso_node {
	char name[ISO_NAME_MAX];
	char pool[ISO_NAME_MAX];
	char rack[ISO_NAME_MAX];
	char pdu[ISO_NAME_MAX];
	int cpus;           /* schedulable cores */
	int64_t memory_mib; /* schedulable memory */
	int n_gpus;
	struct iso_gpu *gpus; /* owned, indexes unique */
	bool has_port;
	struct iso_port port;
	enum iso_node_sched sched; /* runtime state, from the store */
	/* ethernet fabrics: the node's underlay IPv4 address, dotted quad, for
	 * the tenant overlay's VXLAN (docs/inventory.md); "" when none */
	char underlay_ip[16];
};

/* ---- allocations ---- */
enum iso_alloc_state {
	ISO_ALLOC_PENDING,
	ISO_ALLOC_PLACED,
	ISO_ALLOC_PROVISIONING,
	ISO_ALLOC_ACTIVE,
	ISO_ALLOC_RELEASING,
	ISO_ALLOC_RELEASED,
	ISO_ALLOC_FAILED,
};
const char *iso_alloc_state_name(enum iso_alloc_state s);
int iso_alloc_state_parse(const char *s, enum iso_alloc_state *out);
bool iso_alloc_state_terminal(enum iso_alloc_state s);
/* The only legal edges of the state machine; everything else is refused. */
bool iso_alloc_transition_allowed(enum iso_alloc_state from, enum iso_alloc_state to);

/* What one member of an allocation needs, on one node. */
struct iso_shape {
	bool whole;              /* whole GPUs */
	int gpu_count;           /* GPUs (whole) or MIG instances (profile) */
	char profile[32];        /* MIG profile name when !whole, else "" */
	char gpu_model[32];      /* optional model constraint, "" = any */
	int cpus;                /* cores per member */
	int64_t memory_mib;      /* memory per member */
	char pool[ISO_NAME_MAX]; /* optional pool constraint, "" = any */
};

/* Where one member of an allocation runs: one node. */
struct iso_member {
	int index; /* 0-based, dense */
	char node[ISO_NAME_MAX];
};

/* One GPU (or MIG instance) held by one member, on that member's node. */
struct iso_slot {
	int member; /* index of the owning iso_member */
	int gpu;    /* GPU index on the member's node */
	bool whole;
	char profile[32]; /* "" when whole */
	int start;        /* first memory slice; 0 when whole */
	int width;        /* memory slices; all of them when whole */
};

struct iso_allocation {
	char id[ISO_ID_MAX];
	int64_t tenant_id;
	char tenant[ISO_NAME_MAX];
	char name[ISO_NAME_MAX]; /* optional label from the request */
	enum iso_alloc_state state;
	char reason[ISO_DESC_MAX]; /* why failed/pending, may be "" */
	int members;
	struct iso_shape shape;
	char owner[ISO_NAME_MAX + 8]; /* creating token's user, or "token:<id>" */
	int64_t created_ms;
	int64_t updated_ms;
	int n_members;             /* placed members; 0 while pending */
	struct iso_member *placed; /* owned, n_members entries */
	int n_slots;
	struct iso_slot *slots; /* owned */
	/* tenancy (docs/tenancy.md) */
	char project[ISO_NAME_MAX]; /* the tenant's project it is charged to, "" = none */
	int priority;               /* within its tenant: higher first, may preempt lower */
	char isolation[24];         /* "" = the tenant's class, or a stricter one */
	char spread[8];             /* "" | gpu | node | rack: members on distinct ones */
	bool fail_on_preempt;       /* a victim fails instead of going back to the queue */
	int64_t duration_ms;        /* expected run time, for backfill (0: unknown) */
	int64_t started_ms;         /* when it last became active; 0 = not running */
	/* The create's Idempotency-Key (docs/api.md), "" when none: unique per
	 * tenant, never changed after the insert; and the SHA-256 (hex) of the
	 * request it created, that a retry must repeat. */
	char idem_key[ISO_IDEM_KEY_MAX];
	char idem_hash[65];
};

/* Frees placed/slots and zeroes the struct. */
void iso_allocation_clear(struct iso_allocation *a);
static inline void iso_allocation_clearp(struct iso_allocation *a)
{
	iso_allocation_clear(a);
}
void iso_node_clear(struct iso_node *n);

ISO_PUBLIC_END

#endif

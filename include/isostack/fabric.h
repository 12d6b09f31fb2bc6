/* fabric.h: tenant partitions on the fabric (docs/fabric.md). The controller
 * computes an *intent* (every partition and its member port GUIDs, from the
 * tenants' P_Keys and the live allocations), hands it to a driver (sim,
 * opensm, opafm), and counts an allocation active only once the driver has
 * confirmed the intent on the fabric by reading it back. The verifier reads
 * the fabric's P_Key tables and proves that no cross-tenant path exists.
 * Facts: docs/reference-fabric.md. */
#ifndef ISOSTACK_FABRIC_H
#define ISOSTACK_FABRIC_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "isostack/inventory.h"
#include "isostack/smfile.h"
#include "isostack/util.h"

#define ISO_PKEY_DEFAULT   0x7fff /* the default partition, never a tenant's */
#define ISO_PKEY_FULL_BIT  0x8000 /* membership bit in a P_Key table entry */
#define ISO_PKEY_BASE_MASK 0x7fff

/* ---- P_Key pool (pkey_pool.c) ----
 * Tenant P_Keys from [min, max]; never 0x0000, 0x7fff or 0xffff, never a
 * shared service's key. A released key sits in quarantine for
 * `quarantine_ms` before it is handed out again, so that a port that still
 * carries it (a stale table, a standby SM's old file) never meets a new
 * tenant. The pool is plain memory; the controller persists it (store). */
struct iso_pkey_pool {
	uint16_t min, max;
	int64_t quarantine_ms;
	uint8_t *state; /* per key in [min, max]: enum below */
	int64_t *released_ms;
	int n_free;
};
enum { ISO_PKEY_FREE = 0, ISO_PKEY_USED = 1, ISO_PKEY_QUARANTINED = 2, ISO_PKEY_RESERVED = 3 };

int iso_pkey_pool_init(struct iso_pkey_pool *p, uint16_t min, uint16_t max, int64_t quarantine_ms,
                       const struct iso_fabric_config *fc);
void iso_pkey_pool_free(struct iso_pkey_pool *p);
/* Marks a key in use (at start, from the store). -EEXIST when it is not free. */
int iso_pkey_pool_mark_used(struct iso_pkey_pool *p, uint16_t pkey);
/* Marks a key quarantined since `released_ms` (at start, from the store). */
int iso_pkey_pool_mark_quarantined(struct iso_pkey_pool *p, uint16_t pkey, int64_t released_ms);
/* The lowest free key (quarantine over at `now_ms` counts as free); -ENOSPC
 * with err naming `fabric.pkey_range` when none is left. */
int iso_pkey_pool_take(struct iso_pkey_pool *p, int64_t now_ms, uint16_t *out,
                       struct iso_error *err);
/* Takes exactly `pkey` (a quarantine that is over counts as free): -ERANGE
 * outside the pool's range, -EEXIST when it is in use, in quarantine or
 * reserved. No error text: the caller words the refusal for its client. */
int iso_pkey_pool_take_exact(struct iso_pkey_pool *p, int64_t now_ms, uint16_t pkey);
/* The (pick mod n)-th of the n takeable keys, in key order (pick 0: the
 * lowest, as take). An allocation's key is taken with a random pick, so that
 * its number says nothing about which keys others hold (docs/fabric.md,
 * "Per-allocation partitions"). The same -ENOSPC as take when none is left. */
int iso_pkey_pool_take_pick(struct iso_pkey_pool *p, int64_t now_ms, uint32_t pick, uint16_t *out,
                            struct iso_error *err);
/* Back into quarantine from `now_ms`. */
void iso_pkey_pool_release(struct iso_pkey_pool *p, uint16_t pkey, int64_t now_ms);

/* ---- intent ---- */
enum iso_pkey_membership { ISO_MEMBER_LIMITED = 0, ISO_MEMBER_FULL = 1 };

struct iso_fabric_member {
	uint64_t guid;
	enum iso_pkey_membership membership;
	/* an external assignment's GUID (ISO_VF_EXTERNAL: a VF of the node
	 * whose GUID Neutron's agent wrote), not one of the inventory's */
	bool external;
};

enum iso_partition_kind {
	ISO_PART_DEFAULT, /* Default=0x7fff, ipoib : ALL=limited, SELF=full ; */
	ISO_PART_SERVICE, /* a shared service: its ports full, tenant ports limited */
	ISO_PART_TENANT,  /* a tenant: the ports (VFs) its members use, full */
};

struct iso_partition {
	enum iso_partition_kind kind;
	char name[64];     /* OpenSM partition name: "Default", "svc_storage", "t_acme" */
	uint16_t pkey;     /* 15-bit base */
	int64_t tenant_id; /* ISO_PART_TENANT only */
	char tenant[64];   /* ISO_PART_TENANT only */
	/* ISO_PART_TENANT of one allocation of a per-allocation tenant: its id;
	 * "" for the tenant's own partition */
	char alloc[ISO_ID_MAX];
	bool ipoib, indx0;                 /* flags rendered on the definition */
	int n_members;                     /* sorted by guid, unique */
	struct iso_fabric_member *members; /* owned */
};

/* The whole desired partitioning of the fabric. Partitions sorted: Default,
 * then services by pkey, then tenants by pkey. */
struct iso_fabric_intent {
	uint64_t generation; /* increases with every change the controller makes */
	int n_parts;
	struct iso_partition *parts; /* owned */
};
void iso_fabric_intent_clear(struct iso_fabric_intent *in);
/* A deep copy into *dst (overwritten). 0 or -ENOMEM (dst left empty). */
int iso_fabric_intent_copy(const struct iso_fabric_intent *src, struct iso_fabric_intent *dst);

/* One (node, tenant) port assignment: the GUID a tenant's members on a node
 * use. On a node with VFs: VF `vf` of the node's port; fabric-exclusive
 * nodes (no VFs): the PF itself (vf = -1). */
/* The vf of an external assignment: a GUID on the node's HCA that isostack
 * neither hands out nor sets (an OpenStack VF whose GUID Neutron's agent
 * wrote, docs/openstack.md). Any GUID but the inventory's own for the node;
 * it counts against the node's P_Key table like a VF. */
#define ISO_VF_EXTERNAL (-2)

struct iso_port_assignment {
	int node; /* inventory index */
	int64_t tenant_id;
	int vf; /* VF index, -1 = the PF (fabric-exclusive node), ISO_VF_EXTERNAL */
	uint64_t guid;
	/* the allocation whose partition the port is in ("": the tenant's own;
	 * a per-allocation tenant's allocation: its id) */
	char alloc[ISO_ID_MAX];
	/* alloc holds this VF of its own but is in its tenant's own partition:
	 * a pod's CNI attachment (docs/fabric.md, "VFs of pod attachments") */
	bool own_vf;
};

/* A tenant's partition as the controller knows it: the tenant's own
 * (alloc NULL or ""), or one allocation's of a per-allocation tenant. */
struct iso_fabric_tenant {
	int64_t tenant_id;
	const char *name;
	uint16_t pkey;
	const char *alloc;
};

/* Builds the intent: Default; every shared service (its GUIDs full, every
 * assigned tenant port limited); every tenant with at least one assignment
 * (its assigned GUIDs full). Refuses, with ISO_E_CONFLICT naming the GUID and
 * both tenants, an intent in which one GUID is a full member of two tenants'
 * partitions, and with ISO_E_NO_CAPACITY naming the port an intent that puts
 * more P_Keys on a port than its pkey_capacity (counting Default and the
 * services). The PF of a node with VFs stays a limited member of Default only. */
int iso_fabric_intent_build(const struct iso_inventory *inv,
                            const struct iso_fabric_tenant *tenants, int n_tenants,
                            const struct iso_port_assignment *assign, int n_assign,
                            struct iso_fabric_intent *out, struct iso_error *err);

/* P_Key table capacities as read from the fabric (NodeInfo.PartitionCap),
 * sorted by GUID. A port's capacity is the smaller of this and the
 * inventory's pkey_capacity: an HCA that has less than the inventory says
 * must not be overfilled (OpenSM would drop keys with ERR 0512). */
struct iso_port_caps {
	int n;
	uint64_t *guid; /* owned, sorted */
	int *cap;       /* owned */
};
struct iso_fabric_snapshot;
void iso_port_caps_clear(struct iso_port_caps *c);
/* From a snapshot (ports with capacity 0 are left out). 0 or -ENOMEM. */
int iso_port_caps_from_snapshot(const struct iso_fabric_snapshot *s, struct iso_port_caps *out);
/* How many P_Keys one P_Key table holds when its GUIDs join n_partitions
 * tenant or allocation partitions: Default + every shared service +
 * n_partitions. A node's PF and its VFs share one table (ConnectX: 128
 * entries, docs/reference-fabric.md), so the intent counts, per node, the
 * distinct partitions of all its GUIDs and refuses more than the port's
 * capacity (ISO_E_NO_CAPACITY, field "nodes.<node>.port"). */
int iso_fabric_port_table_count(const struct iso_inventory *inv, int n_partitions);
/* iso_fabric_intent_build with the capacities read from the fabric (NULL:
 * the inventory's only). */
int iso_fabric_intent_build_caps(const struct iso_inventory *inv,
                                 const struct iso_fabric_tenant *tenants, int n_tenants,
                                 const struct iso_port_assignment *assign, int n_assign,
                                 const struct iso_port_caps *caps, struct iso_fabric_intent *out,
                                 struct iso_error *err);

/* ---- the intent as JSON (intent_json.c): GET /v1/fabric/intent ---- */
/* {generation, partitions: [{name, kind: default|service|tenant, pkey:
 * "0x0101", tenant, tenant_id, ipoib, indx0, members: [{guid: "0x...",
 * membership: full|limited}]}]}; malloc'd. */
char *iso_fabric_intent_json(const struct iso_fabric_intent *in);
json_t *iso_fabric_intent_to_json(const struct iso_fabric_intent *in); /* the same, as JSON */
/* Strict reader of the same; errors name the field. */
int iso_fabric_intent_parse_json(const char *text, struct iso_fabric_intent *out,
                                 struct iso_error *err);

/* ---- partitions.conf (partitions.c) ---- */
/* Canonical text: one rule per line, "0x" GUIDs, full words only. *out malloc'd. */
int iso_partitions_render(const struct iso_fabric_intent *in, char **out, struct iso_error *err);
/* A parser that mirrors OpenSM's grammar (osm_prtn_config.c), strict where
 * OpenSM would fall back to the default config: any error is reported with
 * `name:LINE: what`. Fills `out` (generation 0). Keywords match by prefix as
 * OpenSM does; the returned members are resolved only for explicit GUIDs
 * (ALL, ALL_CAS, SELF... are kept as flags on the partition in `all_*`). */
struct iso_partitions_file {
	struct iso_fabric_intent parts;
	/* per part: membership given to ALL / ALL_CAS / SELF, -1 when absent */
	int8_t *all, *all_cas, *self;
};
int iso_partitions_parse(const char *name, const char *text, size_t len,
                         struct iso_partitions_file *out, struct iso_error *err);
void iso_partitions_file_clear(struct iso_partitions_file *f);

/* ---- Omni-Path (opafm.c) ---- */
/* opafm.xml with one DeviceGroup and one VirtualFabric (Security=1) per
 * tenant and service, the Admin VF (0x7fff) and a default VF, complete enough
 * for `config_check -s`. *out malloc'd. */
int iso_opafm_render(const struct iso_fabric_intent *in, char **out, struct iso_error *err);

/* ---- what the fabric holds, and the verifier (verify.c) ---- */
struct iso_port_table {
	uint64_t guid; /* port GUID */
	uint16_t lid;
	int port_num;
	bool is_switch; /* switch port 0 (switch external ports are not end ports) */
	char node_desc[64];
	int capacity;    /* NodeInfo.PartitionCap (0: unknown) */
	int n_pkeys;     /* non-zero entries */
	uint16_t *pkeys; /* owned; raw entries with the membership bit */
};
struct iso_fabric_snapshot {
	int n_ports;
	struct iso_port_table *ports; /* owned */
	int64_t read_ms;              /* how long reading took */
};
void iso_fabric_snapshot_clear(struct iso_fabric_snapshot *s);
/* Reads the fabric from this host, as the diag tools do (libibnetdisc
 * discovery, then every end port's NodeInfo and P_Key table over SMP through
 * libibumad; under ibsim through umad2sim's LD_PRELOAD). Ports that did not
 * answer are counted in *n_failed (may be NULL). ISO_E_UNAVAILABLE without an
 * InfiniBand port. `isoctl fabric verify --live` uses it. */
int iso_fabric_read_live(struct iso_fabric_snapshot *out, int *n_failed, struct iso_error *err);

enum iso_violation_kind {
	ISO_VIOL_CROSS_TENANT,  /* two tenants' ports can reach each other */
	ISO_VIOL_UNKNOWN_FULL,  /* a port full in a tenant key that the intent does not give it */
	ISO_VIOL_MISSING,       /* intent says member, fabric says not (drift) */
	ISO_VIOL_EXTRA,         /* fabric holds a key the intent does not (drift) */
	ISO_VIOL_NEAR_CAPACITY, /* table at >= 90% of capacity */
	ISO_VIOL_UNREACHABLE,   /* an intended member port was not found on the fabric */
	/* the Ethernet overlay (issue 14; src/controller/overlay.c judges what
	 * the agents read back from their kernels, docs/fabric.md "Ethernet") */
	ISO_VIOL_SHARED_VNI, /* one VNI carries members of two tenants */
	ISO_VIOL_NO_GUARD,   /* a node holds overlay members without its VXLAN guard */
	ISO_VIOL_STRAY_PEER, /* the guard lets in a (peer, vni) that holds no member of its tenant
	                      */
	/* two partitions of one tenant (per-allocation: two of its allocations)
	 * share a key on the fabric */
	ISO_VIOL_CROSS_PARTITION,
};
const char *iso_violation_kind_name(enum iso_violation_kind k);

struct iso_violation {
	enum iso_violation_kind kind;
	uint16_t pkey; /* base */
	int n_ports;
	uint64_t ports[2];   /* the ports involved (1 or 2) */
	char tenants[2][64]; /* owning tenants as the intent knows them, "" when none */
	char message[256];
	/* the Ethernet overlay's findings: the VNI (0: none) and the nodes
	 * involved, instead of ports */
	uint32_t vni;
	int n_nodes;
	char nodes[2][64];
};
struct iso_fabric_report {
	bool ok; /* no violation other than near-capacity warnings */
	int ports_checked;
	int partitions_checked;
	int n_violations;
	struct iso_violation *violations; /* owned */
	int64_t elapsed_ms;
};
void iso_fabric_report_clear(struct iso_fabric_report *r);
/* Who can reach whom: two ports talk iff they share a P_Key base and at least
 * one is full. Ports are attributed to tenants through the intent's
 * assignments; a path between ports of different tenants (or a tenant port
 * and an unknown full member of its key) is a violation, except through a
 * shared service key where the tenant side is limited. Cost: O(ports x
 * pkeys) with a hash per key, no pairwise scan. */
int iso_fabric_verify(const struct iso_fabric_intent *intent,
                      const struct iso_fabric_snapshot *snap, struct iso_fabric_report *out,
                      struct iso_error *err);
/* JSON text of a report ({ok, ports_checked, partitions_checked,
 * violations[{kind, pkey, ports, tenants, message}], elapsed_ms}); malloc'd. */
char *iso_fabric_report_json(const struct iso_fabric_report *r);
json_t *iso_fabric_report_to_json(const struct iso_fabric_report *r); /* the same, as JSON */

/* ---- ibsim (ibsim_net.c, discover.c) ----
 * A simulated fabric whose GUIDs are the inventory's, so that OpenSM, the
 * opensm driver and the verifier run without hardware (docs/fabric.md). */
#define ISO_IBSIM_SM_GUID_DEFAULT     0x0002c90300000001ULL /* port GUID of the SM's HCA */
#define ISO_IBSIM_SWITCH_GUID_DEFAULT 0x0002c90300f00001ULL /* first switch's GUID */
#define ISO_IBSIM_SWITCH_PORTS        36

/* What a net file holds, for ibsim's limits (-N nodes, -S switches, -P
 * ports; defaults 2048, 256, 13312). */
struct iso_ibsim_net_stats {
	int n_cas;    /* single-port CAs: the SM, every PF, VF and service port */
	int n_leaves; /* leaf switches */
	int n_spines; /* spine switches */
	int n_nodes;  /* CAs + switches (ibsim -N) */
	int n_ports;  /* ibsim's port count: 1 per CA, ports + 1 per switch (-P) */
};

struct iso_ibsim_net_opts {
	uint64_t sm_guid;          /* port GUID of the SM's HCA (first record); 0: default */
	uint64_t switch_guid_base; /* switch k gets base + k; 0: default */
	int switch_ports;          /* ports per switch, 4-254; 0: 36 */
	struct iso_ibsim_net_stats *stats; /* filled when not NULL */
};

/* An ibsim net file (two-level fat tree) for an infiniband inventory: the
 * SM's HCA first (ibsim attaches the SM to the first port of the file, so
 * OpenSM's SELF is that HCA); leaves per rack, half their ports down to CAs,
 * half up to spines; every PF port GUID a CA of its own, every VF one more
 * single-port CA on the node's leaf (ibsim has no vports), every shared
 * service GUID a CA. CA port GUIDs are exactly the inventory's (ibsim gives
 * a CA's port 1 its node GUID + 1). Refuses a non-infiniband fabric and an
 * SM or switch GUID that collides with the inventory's. `o` may be NULL.
 * *out malloc'd. */
int iso_ibsim_net_render(const struct iso_inventory *inv, const struct iso_ibsim_net_opts *o,
                         char **out, struct iso_error *err);
/* The inventory YAML of a synthetic cluster of `n_hcas` nodes (1-65536),
 * `vfs_per_hca` VFs each (0-127), 16 nodes a rack, and a storage service of
 * two ports; GUIDs never collide with the ibsim defaults. *out malloc'd. */
int iso_ibsim_inventory_synthetic(int n_hcas, int vfs_per_hca, char **out, struct iso_error *err);
/* The net file of that same synthetic inventory (so its GUIDs match). */
int iso_ibsim_net_synthetic(int n_hcas, int vfs_per_hca, const struct iso_ibsim_net_opts *o,
                            char **out, struct iso_error *err);

/* ibnetdiscover's default output, read back: its channel adapters. */
struct iso_discovered_port {
	int port_num;
	uint64_t guid;
	uint16_t lid; /* 0 before the SM assigned one */
};
struct iso_discovered_ca {
	uint64_t node_guid;
	char desc[65]; /* NodeDescription (64 bytes on the wire): "host mlx5_0" */
	int line;      /* where its record starts */
	int n_ports;
	struct iso_discovered_port *ports; /* owned, in file order */
};
struct iso_discovered {
	int n_cas;
	struct iso_discovered_ca *cas; /* owned, in file order */
	int n_switches;                /* seen and skipped */
};
void iso_discovered_free(struct iso_discovered *d);
static inline void iso_discovered_freep(struct iso_discovered **d)
{
	if (*d)
		iso_discovered_free(*d);
}
/* Strict: a line that is not part of the format, a truncated record, a bad
 * GUID or port number, or input with no CA at all is ISO_E_INVALID with
 * "NAME:LINE: what". */
int iso_fabric_discover_parse(const char *name, const char *text, size_t len,
                              struct iso_discovered **out, struct iso_error *err);
/* Inventory YAML `nodes:` entries for the operator to merge: one per CA,
 * named from the first word of its description (sanitised to a node name),
 * `port: {device, port, guid}` of its first port; CAs named "<node>-vf<i>"
 * (ibsim's stand-ins for VFs) fold into <node>'s `vfs`. *out malloc'd. */
int iso_fabric_discover_yaml(const struct iso_discovered *d, char **out, struct iso_error *err);

/* ---- drivers (driver.c, sim.c, opensm.c, opafm_driver.c) ---- */
struct iso_fabric_driver;

/* What a driver has done with the intents it was given. */
struct iso_fabric_status {
	uint64_t confirmed; /* highest generation read back complete on the fabric */
	uint64_t applied;   /* highest generation written to the SM */
	bool incident;      /* the SM refused or degraded the last file */
	char incident_msg[256];
	/* whether the SM is reachable (docs/fabric.md, "Is the SM reachable"):
	 * sim NONE (it models the SM itself), opafm UNKNOWN, opensm UP/DOWN from
	 * the SM's process (local: the pid files, checked once a second by the
	 * worker; agent: the SM host's agent's reports), UNKNOWN when it cannot
	 * tell */
	struct iso_sm_health sm;
};

struct iso_fabric_driver_ops {
	const char *name;
	/* Takes a copy of the intent; returns at once. The driver writes it
	 * (coalescing intents that arrive within its window) and confirms it by
	 * reading back; poll() tells how far it got. */
	int (*apply)(struct iso_fabric_driver *d, const struct iso_fabric_intent *in,
	             struct iso_error *err);
	int (*poll)(struct iso_fabric_driver *d, struct iso_fabric_status *st);
	/* Reads every reachable port's P_Key table (blocking). */
	int (*snapshot)(struct iso_fabric_driver *d, struct iso_fabric_snapshot *out,
	                struct iso_error *err);
	void (*free)(struct iso_fabric_driver *d);
	/* Only a driver whose SM files are written by the SM host's agent
	 * (opensm with fabric.partitions_writer agent); NULL for the others.
	 * sm_document: the newest file to write, rendered and parse-checked by
	 * apply(), and its intent generation; 0 with *text malloc'd, -ENOENT
	 * before the first apply. sm_applied: what the agent reported, under
	 * this controller's term: the intent generation it wrote and signalled,
	 * and (incident != NULL) what OpenSM logged after the file of
	 * incident_generation. applied advances; confirmation is still the
	 * driver's SMP read-back. */
	int (*sm_document)(struct iso_fabric_driver *d, uint64_t *generation, char **text);
	void (*sm_applied)(struct iso_fabric_driver *d, uint64_t generation, const char *incident,
	                   uint64_t incident_generation);
	/* Every report of the SM host's agent, of any term: whether its OpenSM
	 * process runs (1, 0; -1: an older agent that does not say). A report
	 * missing for 3 x ISO_SM_REPORT_S makes the SM DOWN. */
	void (*sm_reported)(struct iso_fabric_driver *d, int alive);
};
struct iso_fabric_driver {
	const struct iso_fabric_driver_ops *ops;
};

/* The driver named by inv->fabric.driver ("sim", "opensm", "opafm"). */
int iso_fabric_driver_open(const struct iso_inventory *inv, const char *state_dir,
                           struct iso_fabric_driver **out, struct iso_error *err);
/* The in-process model of what OpenSM would program (sim_driver.c): every
 * inventory port (PF, VF and service GUIDs) limited in 0x7fff, members with
 * their keys, tables capped at the port's capacity (ERR 0512 sets incident).
 * An intent is confirmed as soon as it is applied. */
int iso_fabric_sim_driver_new(const struct iso_inventory *inv, struct iso_fabric_driver **out,
                              struct iso_error *err);
/* Test hook: adds the raw entry `raw_pkey` to port `guid`'s table until the
 * next apply. -ENOENT for an unknown port, -ENOSPC when its table is full,
 * -EINVAL when `d` is not a sim driver. */
int iso_fabric_sim_inject(struct iso_fabric_driver *d, uint64_t guid, uint16_t raw_pkey);
/* OpenSM (opensm.c): writes partitions.conf to the primary SM and every
 * standby (fabric.partitions_file, fabric.standby_sms), SIGHUPs each pid
 * file, watches the logs for "retrying with default config", ERR 0507 and
 * ERR 0512 (an incident: the previous good file is restored), and confirms
 * by reading the changed ports' P_Key tables back over SMP. A worker thread
 * does all of it; apply() and poll() never block. Needs fabric.type
 * infiniband and fabric.partitions_file. With fabric.partitions_writer
 * agent it writes nothing and signals nothing: apply() publishes the file
 * (sm_document) for the SM host's agent, the worker waits for the agent's
 * report (sm_applied) and then reads back as above. */
int iso_fabric_opensm_driver_new(const struct iso_inventory *inv, struct iso_fabric_driver **out,
                                 struct iso_error *err);
/* Writes inv->fabric.opafm_file (opafm_driver.c). No FM runs beside us to
 * read back from, so a written file counts as confirmed; snapshot is
 * -EOPNOTSUPP. */
int iso_fabric_opafm_driver_new(const struct iso_inventory *inv, struct iso_fabric_driver **out,
                                struct iso_error *err);
static inline void iso_fabric_driver_freep(struct iso_fabric_driver **d)
{
	if (*d)
		(*d)->ops->free(*d);
}

#endif

/* codec.h: the JSON shapes that cross the line between the controller and
 * its clients, each written once. Why: the node agent (isostack-client) and
 * the API (isostack-server) used to build and parse the same documents each
 * in its own way, so a field added on one side could be refused, or silently
 * dropped, by the other. Here each shape has one C struct and one pair of
 * functions: encode (struct -> JSON, what the sender sends) and decode (JSON
 * -> struct, with every check the receiver makes: every key known and typed,
 * bounds, and an error whose field is the path of the culprit, such as
 * "instances[0].start"). The codec is pure logic (isostack-core): it does no
 * I/O and knows nothing of the controller or of GPU drivers.
 *
 * Shapes: the GPU fault report (POST /v1/nodes/{node}/gpus/{gpu}/fault),
 * the agent's status report (PUT /v1/nodes/{node}/status) and a node's
 * desired state (GET /v1/nodes/{node}/desired); docs/api.md and
 * docs/agents.md describe them. */
#ifndef ISOSTACK_CODEC_H
#define ISOSTACK_CODEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "isostack/smfile.h"
#include "isostack/util.h"

ISO_PUBLIC_BEGIN

/* Textual object ids ("a-0000000000000001"): ISO_ID_MAX of model.h, which
 * the agent cannot include (its struct iso_gpu is the GPU driver's). */
#define ISO_CODEC_ID_MAX 40

/* The highest member index a report may name (allocations have at most
 * 1024 members, ISO_MAX_MEMBERS of controller.h). */
#define ISO_CODEC_MEMBER_MAX 1023

/* ---- the GPU fault report ---- */

#define ISO_XID_MAX 1000
/* A GPU fault as a node agent reports it (docs/agents.md, "Faults"). The
 * body is {"xid"[,"gi","ci","allocation","member","seq"]}; the GPU is the
 * route's, not the body's. */
struct iso_fault_report {
	int gpu, xid;
	int gi, ci;                        /* the GPU/compute instance it names; -1: none */
	char allocation[ISO_CODEC_ID_MAX]; /* the owner of that instance; "" when none */
	int member;                        /* its member; -1 when none */
	/* The agent's number for it, growing per node; 0: none. A report whose
	 * seq is not above the highest applied for the node changes nothing
	 * ("effect":"duplicate"), so an agent may send it again until it is
	 * acknowledged. */
	uint64_t seq;
};
/* The body of `f` (gi, ci when >= 0; allocation and member when an
 * allocation is named; seq when not 0); NULL when out of memory. */
json_t *iso_codec_fault_encode(const struct iso_fault_report *f);
/* Parses a report's body strictly into *out (every field but gpu, which it
 * leaves alone): xid required 0..ISO_XID_MAX, gi and ci 0..65535, member
 * 0..ISO_CODEC_MEMBER_MAX, seq 1..INT64_MAX, allocation an allocation id,
 * and allocation and member together. -EINVAL with *err naming the field. */
int iso_codec_fault_decode(json_t *body, struct iso_fault_report *out, struct iso_error *err);

/* ---- the node agent's status report ---- */

#define ISO_AGENT_MAX_GPUS      64
#define ISO_AGENT_MAX_INSTANCES 256
#define ISO_AGENT_TEXT_MAX      97  /* model, uuid: up to 96 bytes */
#define ISO_AGENT_REASON_MAX    257 /* reason: up to 256 bytes */
struct iso_agent_gpu {
	int index;
	char model[ISO_AGENT_TEXT_MAX];
	char uuid[ISO_AGENT_TEXT_MAX];
	bool mig;
};
struct iso_agent_instance {
	int gpu, start, member;
	char profile[32]; /* a MIG profile, or "whole" */
	char uuid[ISO_AGENT_TEXT_MAX];
	char allocation[ISO_CODEC_ID_MAX];
	bool ready;
	char reason[ISO_AGENT_REASON_MAX];
};
/* A VF as the agent read it back (docs/agents.md, status "vfs"). */
#define ISO_AGENT_MAX_VFS 128
struct iso_agent_vf {
	int index;
	char netdev[16]; /* IFNAMSIZ; "" when none */
	uint64_t guid;   /* read back; 0 with has_guid false when unread */
	bool has_guid;
	/* a RoCE VF (docs/agents.md "vfs"): its VLAN (0: none) and spoof check
	 * as read back; has_vlan false when not a RoCE VF or unread */
	bool has_vlan;
	uint16_t vlan;
	bool spoofchk;
	bool ready;
	char reason[ISO_AGENT_REASON_MAX];
};
/* A node condition (docs/agents.md, "Conditions"): today only
 * "MigModeMismatch", a GPU whose MIG mode (`have`) differs from the
 * inventory's (`want`). While it holds, no new work goes to that GPU. */
#define ISO_AGENT_COND_MIG_MODE "MigModeMismatch"
struct iso_agent_condition {
	char type[32];
	int gpu;
	bool want, have;
};
/* A member's sandbox as the agent found it (docs/agents.md, status
 * "sandboxes"; issue 14). */
#define ISO_AGENT_MAX_SANDBOXES 1024
#define ISO_AGENT_CPUS_MAX      129 /* a cpuset list, "2-3,8": up to 128 bytes */
struct iso_agent_sandbox {
	char allocation[ISO_CODEC_ID_MAX];
	int member;
	bool ready;
	char cgroup[ISO_NAME_MAX];     /* "iso-<allocation>-<member>"; "" while none */
	char cpus[ISO_AGENT_CPUS_MAX]; /* the cpuset it holds, "" while none */
	char reason[ISO_AGENT_REASON_MAX];
};
/* The node's tenant overlay as the agent READ IT BACK from the kernel
 * (netlink, nft), never copied from the desired document: the Ethernet
 * verifier relies on that (docs/agents.md, status "overlay"). */
#define ISO_AGENT_MAX_OVERLAY_TENANTS 256
#define ISO_AGENT_MAX_OVERLAY_MEMBERS 253 /* per tenant per node: 10.x.y.2 .. .254 */
#define ISO_AGENT_MAX_OVERLAY_ALLOWED 4096
#define ISO_AGENT_IFNAME_MAX          16        /* IFNAMSIZ */
#define ISO_VNI_MAX                   16777215u /* 24 bits */
struct iso_agent_overlay_member {
	char allocation[ISO_CODEC_ID_MAX];
	int member;
	char ifname[ISO_AGENT_IFNAME_MAX];
	char address[ISO_IPV4_MAX]; /* "" when it has none */
};
struct iso_agent_overlay_tenant {
	uint32_t vni;
	char bridge[ISO_AGENT_IFNAME_MAX]; /* the bridge its members' veths are on */
	char vxlan[ISO_AGENT_IFNAME_MAX];  /* the VXLAN device on that bridge ("" when none) */
	int n_members;
	struct iso_agent_overlay_member *members; /* malloc'd */
};
struct iso_agent_overlay_allow {
	char peer[ISO_IPV4_MAX];
	uint32_t vni;
};
struct iso_agent_overlay {
	bool guard;     /* the nft guard is in place */
	uint64_t drops; /* its drop counter, packets */
	int n_allowed;
	struct iso_agent_overlay_allow *allowed; /* malloc'd */
	int n_tenants;
	struct iso_agent_overlay_tenant *tenants; /* malloc'd */
};
/* The node's CXI services (Slingshot) as the agent READ THEM BACK from the
 * NIC with cxil_get_svc_list (docs/agents.md, status "cxi"): every service,
 * the default one and foreign ones included, so that the Slingshot verifier
 * judges what the NIC holds. */
#define ISO_CXI_MAX_SERVICES 1024
#define ISO_CXI_MAX_VNIS     4      /* CXI_SVC_MAX_VNIS */
#define ISO_CXI_MAX_MEMBERS  2      /* CXI_SVC_MAX_MEMBERS */
#define ISO_CXI_VNI_MAX      65535u /* a Slingshot VNI is 16 bits, 0 invalid */
enum iso_cxi_member_type { ISO_CXI_MEMBER_UID = 1, ISO_CXI_MEMBER_GID = 2 };
struct iso_cxi_member {
	enum iso_cxi_member_type type;
	uint32_t id;
};
struct iso_cxi_service {
	uint32_t svc_id; /* 1 is the NIC's default service */
	bool enabled, system;
	bool restricted_members, restricted_vnis;
	int n_vnis;
	uint32_t vnis[ISO_CXI_MAX_VNIS];
	int n_members;
	struct iso_cxi_member members[ISO_CXI_MAX_MEMBERS];
};
struct iso_agent_cxi_report {
	char device[16]; /* "cxi0" */
	int n_services;
	struct iso_cxi_service *services; /* malloc'd */
};
/* One member's CXI service as the agent reports it ("cxi_members"; the
 * provisioning gate reads `ready`): ready with svc_id > 0 when its service
 * is on the NIC, ready with svc_id 0 while no identity was admitted yet
 * (the attachment comes after activation: a Slurm task, a pod); not ready,
 * with the reason, when the node's CXI driver is not there or its service
 * is due and cannot be made. */
struct iso_agent_cxi_member_status {
	char allocation[ISO_CODEC_ID_MAX];
	int member;
	uint32_t vni;
	uint32_t svc_id; /* 0: none */
	bool ready;
	char reason[ISO_AGENT_REASON_MAX];
};
struct iso_agent_status {
	int64_t term_seen;
	char version[65];
	int n_gpus, n_instances;
	struct iso_agent_gpu *gpus;
	struct iso_agent_instance *instances;
	int n_vfs; /* "vfs" is optional: absent is none */
	struct iso_agent_vf *vfs;
	int n_conditions; /* at most ISO_AGENT_MAX_GPUS */
	struct iso_agent_condition *conditions;
	/* "sandbox_mode": "real" (the agent makes a sandbox per member, and
	 * a member is ready only with it) or "off" (absent is "off"). */
	bool sandbox_real;
	int n_sandboxes; /* "sandboxes" is optional: absent is none */
	struct iso_agent_sandbox *sandboxes;
	bool has_overlay; /* "overlay" is absent on nodes without overlay members */
	struct iso_agent_overlay overlay;
	bool has_cxi; /* "cxi" is absent on nodes without a CXI NIC driver */
	struct iso_agent_cxi_report cxi;
	int n_cxi_members; /* "cxi_members" is optional: absent is none */
	struct iso_agent_cxi_member_status *cxi_members;
};
/* Copies `reason` into out (ISO_AGENT_REASON_MAX bytes), cut to 256 bytes
 * at a UTF-8 character boundary: what an agent says of a failure fits the
 * report rather than getting the whole report refused. */
void iso_codec_reason_copy(char *out, const char *reason);
/* The report's body: term_seen, version, gpus, instances, conditions,
 * sandbox_mode and sandboxes always, vfs when `with_vfs`, overlay when
 * st->has_overlay. NULL when out of memory. */
json_t *iso_codec_status_encode(const struct iso_agent_status *st, bool with_vfs);
/* One entry of "vfs" (the agent adds them after its VF pass). */
json_t *iso_codec_status_vf_encode(const struct iso_agent_vf *v);
/* One entry of "sandboxes", and the "overlay" object (for an agent that
 * adds them after its own passes). */
json_t *iso_codec_status_sandbox_encode(const struct iso_agent_sandbox *sb);
json_t *iso_codec_status_overlay_encode(const struct iso_agent_overlay *ov);
/* The "cxi" object: {"device","services":[{"svc_id","enabled","system",
 * "restricted_members","restricted_vnis","vnis","members":[{"type","id"}]}]} */
json_t *iso_codec_status_cxi_encode(const struct iso_agent_cxi_report *cx);
/* One entry of "cxi_members": {"allocation","member","vni","svc_id","ready","reason"}. */
json_t *iso_codec_status_cxi_member_encode(const struct iso_agent_cxi_member_status *m);
/* Is s a cpuset list as the kernel writes it ("0-3,8,10-11": ascending
 * single CPUs or ranges a-b with a < b, up to CPU 65535)? */
bool iso_codec_cpus_valid(const char *s);
/* Parses a report strictly into *out, whose arrays are malloc'd (free them
 * with iso_codec_status_clear, also after a failure). -EINVAL with *err
 * naming the field ("instances[2].ready", "overlay.tenants[0].vni"),
 * -ENOMEM. Besides each field's type and bounds: a sandbox is listed once
 * per (allocation, member) and a ready one has its cgroup and cpus; an
 * overlay tenant's VNI, and an allowed (peer, vni) pair, are listed once. */
int iso_codec_status_decode(json_t *body, struct iso_agent_status *out, struct iso_error *err);
void iso_codec_status_clear(struct iso_agent_status *st);

/* ---- the desired state of a node (GET /v1/nodes/{node}/desired) ---- */

#define ISO_AGENT_ALLOC_MAX   32 /* "a-" + 16 hex digits, with room */
#define ISO_CODEC_PROFILE_MAX 32 /* a MIG profile's name: ISO_GPU_PROFILE_MAX of gpu.h */

/* One desired MIG instance, or (profile "whole") a GPU held whole. */
struct iso_agent_want {
	unsigned gpu;
	char profile[ISO_CODEC_PROFILE_MAX]; /* a MIG profile, or "whole" */
	/* Set by the agent's reconcile for a GPU held whole while its MIG mode
	 * is on: the one instance that spans it ("7g.80gb" at start 0), whose
	 * MIG UUID is what the tenant gets. Empty otherwise; never sent. */
	char as_profile[ISO_CODEC_PROFILE_MAX];
	int start;
	int width;
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
};

struct iso_agent_desired_gpu {
	unsigned index;
	bool mig;
};

/* A member a desired VF serves. */
struct iso_agent_vf_member {
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
};

/* One desired VF (docs/agents.md, "vfs"): VF `index` of the node's HCA
 * `device` gets `guid` (InfiniBand), or on an Ethernet cluster with RoCE VFs
 * its tenant's `vlan` with the spoof check on (then guid and pkey are 0);
 * one VF serves one tenant on a node. */
#define ISO_AGENT_VF_MAX   128
#define ISO_AGENT_VLAN_MAX 4094u
struct iso_agent_vf_want {
	unsigned index;
	char device[32];
	uint64_t guid;
	char tenant[ISO_NAME_MAX];
	uint16_t pkey; /* full-membership form, 0x8000 set */
	uint16_t vlan; /* RoCE: 1..ISO_AGENT_VLAN_MAX; 0: an InfiniBand VF */
	unsigned n_members;
	struct iso_agent_vf_member *members; /* malloc'd, n_members of them */
};

/* A member the node runs (docs/agents.md, "members"; issue 14): one per
 * member of an allocation on this node that is placed, provisioning or
 * active. The agent makes its sandbox: `cpus` cores, `memory_mib` of
 * memory, io_uring allowed or not, and on an Ethernet cluster its tenant's
 * overlay. */
#define ISO_AGENT_MEMBERS_MAX 1024
#define ISO_AGENT_PEERS_MAX   4096
struct iso_agent_member_want {
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	char tenant[ISO_NAME_MAX];
	/* its allocation's Idempotency-Key ("key"; iso_idem_key_valid), ""
	 * when it has none (the key is then absent from the document) */
	char key[ISO_IDEM_KEY_MAX];
	unsigned cpus;
	uint64_t memory_mib;
	bool io_uring;
	/* the overlay (an ethernet fabric), else null: */
	bool has_overlay;
	uint32_t vni;        /* the tenant's VNI, 1..ISO_VNI_MAX */
	unsigned node_index; /* this node's index in the inventory's nodes */
	/* the underlay IPv4 addresses of the OTHER nodes that hold a member
	 * of the same tenant, sorted (as strings), unique; malloc'd */
	size_t n_peers;
	char (*peers)[16];
	/* on a Slingshot fabric, "cxi": {"vni"[,"uid","gid"]}, else absent:
	 * the tenant's VNI, and the identity its CXI service admits when the
	 * controller knows it (else the attachment path gives it to the agent;
	 * docs/agents.md "cxi") */
	bool has_cxi;
	uint32_t cxi_vni; /* 1..ISO_CXI_VNI_MAX */
	bool cxi_ident;   /* uid and gid given */
	uint32_t cxi_uid, cxi_gid;
};

/* The document, parsed. */
struct iso_agent_desired {
	char node[ISO_NAME_MAX];
	uint64_t generation;
	uint64_t term;
	size_t n_gpus;
	struct iso_agent_desired_gpu gpus[ISO_AGENT_MAX_GPUS];
	size_t n_wants;
	struct iso_agent_want *wants; /* malloc'd */
	size_t n_vfs;
	struct iso_agent_vf_want *vfs; /* malloc'd; see src/agent/vf.c */
	size_t n_members;
	struct iso_agent_member_want *members; /* malloc'd; absent in a document is none */
};

/* The document of `d`: each GPU of d->gpus in order, with the wants on it
 * (instances in d->wants' order, the "whole" one as "whole", else null),
 * then the VFs, then the members. NULL when out of memory. */
json_t *iso_codec_desired_encode(const struct iso_agent_desired *d);
/* The document around arrays already encoded (a server keeps the arrays
 * it served and answers with the generation of the moment); takes a
 * reference to each. `members` NULL: the key is left out. */
json_t *iso_codec_desired_wrap(const char *node, uint64_t generation, uint64_t term, json_t *gpus,
                               json_t *vfs, json_t *members);
/* One entry of "members" ("overlay" null unless m->has_overlay). */
json_t *iso_codec_member_want_encode(const struct iso_agent_member_want *m);
/* Parses a document strictly (docs/agents.md): every field known and
 * typed, `node` equal to `node`. An error names the field
 * ("gpus[1].instances[0].start", "members[2].overlay.vni"). A member is
 * listed once per (allocation, member); its peers are IPv4 addresses,
 * sorted and unique. *out is cleared first, and left clear after a
 * failure. */
int iso_codec_desired_decode(const json_t *doc, const char *node, struct iso_agent_desired *out,
                             struct iso_error *err);
void iso_codec_desired_clear(struct iso_agent_desired *d);

/* ---- strict readers of one JSON value, for the codec and the API's
 * request bodies alike (fields.c): every refusal names the field as
 * "prefix.key", and an explicit null is the same as an absent key ---- */
/* "prefix.key", or "key" when prefix is NULL or "". */
void iso_json_field(char *buf, size_t size, const char *prefix, const char *key);
/* One JSON object of at most `max` bytes from a file or a socket, duplicate
 * keys refused: "[WHAT ]over MAX bytes" (code too_large; `what` may be
 * NULL), "not JSON: ...", "expected a JSON object". *out owned. */
int iso_json_load_object(const char *text, size_t len, size_t max, enum iso_errcode too_large,
                         const char *what, json_t **out, struct iso_error *err);
/* Refuses a key not in `allowed` (NULL-terminated): "F: unknown field". */
int iso_json_check_keys(json_t *obj, const char *prefix, const char *const *allowed,
                        struct iso_error *err);
/* Each leaves *out alone and returns 0 when the key is absent or null and
 * not required. */
int iso_json_get_string(json_t *obj, const char *key, const char *prefix, bool required,
                        const char **out, struct iso_error *err);
int iso_json_get_int(json_t *obj, const char *key, const char *prefix, bool required, int64_t min,
                     int64_t max, int64_t *out, struct iso_error *err);
int iso_json_get_bool(json_t *obj, const char *key, const char *prefix, bool required, bool *out,
                      struct iso_error *err);
int iso_json_get_number(json_t *obj, const char *key, const char *prefix, double min, double max,
                        double *out, struct iso_error *err);

/* ---- the subnet manager's partitions.conf through the SM host's agent ----
 * (docs/fabric.md, "partitions.conf through the SM host's agent"). The
 * document GET /v1/fabric/sm/partitions serves: {"term","generation","text"},
 * the file OpenSM is to read, rendered and parse-checked by the controller,
 * with the leader's term (the node agents' term) and the served generation
 * (term << 32 | the intent's generation). The decode is the agent's: every
 * key known, both numbers in range, the text as iso_sm_text_check wants it.
 * Field names are the keys. */
struct iso_sm_document {
	uint64_t term, generation;
	char *text; /* owned */
};
json_t *iso_codec_sm_document_encode(const struct iso_sm_document *d);
int iso_codec_sm_document_decode(json_t *body, struct iso_sm_document *out, struct iso_error *err);
void iso_codec_sm_document_clear(struct iso_sm_document *d);

/* The SM agent's report (PUT /v1/fabric/sm/status): {"version","term",
 * "generation"[,"refused":{"term","generation","reason"}][,"incident":
 * {"generation","line"}][,"sm_alive"]}. term/generation: the highest document
 * written to the file and signalled to the primary SM (0, 0: none yet);
 * refused: the last document it would not write; incident: what OpenSM
 * logged after the file of that generation (the previous file is back);
 * sm_alive: whether OpenSM's process (the agent's --sm-pid-file) runs, sent
 * at once when it changes and at least every ISO_SM_REPORT_S (absent from an
 * older agent's report: has_sm_alive false). */
struct iso_sm_report {
	char version[65];
	uint64_t term, generation;
	bool refused;
	uint64_t refused_term, refused_generation;
	char refused_reason[256];
	bool incident;
	uint64_t incident_generation;
	char incident_line[256];
	bool has_sm_alive, sm_alive;
};
json_t *iso_codec_sm_report_encode(const struct iso_sm_report *r);
int iso_codec_sm_report_decode(json_t *body, struct iso_sm_report *out, struct iso_error *err);

/* GET /v1/fabric/health (docs/api.md, "Fabric"): whether the fabric
 * driver's subnet manager is reachable, what the CNI plugin's STATUS asks
 * through the node agent. {"driver","sm":{"state":"none|unknown|up|down",
 * "reason","since":RFC 3339}} for every reader; cluster roles' answer (full)
 * adds "generation","applied","confirmed","incident" (GET /v1/fabric's).
 * The decode is the node agent's: every key known, driver 1..15 bytes of
 * printable ASCII, the state one of the four, the reason at most
 * ISO_SM_REASON_MAX - 1 bytes of text, since exactly as iso_format_time
 * writes it, and the four full keys all or none. Field names "sm.state". */
struct iso_fabric_health {
	char driver[16];
	struct iso_sm_health sm;
	bool full;
	uint64_t generation, applied, confirmed;
	bool incident;
};
json_t *iso_codec_fabric_health_encode(const struct iso_fabric_health *h);
int iso_codec_fabric_health_decode(json_t *body, struct iso_fabric_health *out,
                                   struct iso_error *err);

ISO_PUBLIC_END

#endif

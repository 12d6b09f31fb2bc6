/* internal.h: what the node agent's sandbox files (issue 14: sandboxes.c,
 * socket.c, cpuset.c, devices.c) share with each other, the daemon and
 * their unit tests, and nobody else: the cpuset choice, the device list,
 * the sandbox records and the table the socket answers from. */
#ifndef ISOSTACK_AGENT_INTERNAL_H
#define ISOSTACK_AGENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isostack/agent.h"
#include "isostack/codec.h"
#include "isostack/sandbox.h"

/* ---- cpu sets (cpuset.c) ---- */

#define AGENT_CPUS_MAX 4096 /* CPUs a mask holds */

struct agent_cpumask {
	uint64_t w[AGENT_CPUS_MAX / 64];
};

/* "0-3,8" (a trailing newline allowed) into *m; "" is the empty set.
 * -EINVAL on anything else. */
int agent_cpumask_parse(const char *list, struct agent_cpumask *m);
/* The kernel's spelling ("0-3,8"); -ENOSPC when it does not fit. */
int agent_cpumask_format(const struct agent_cpumask *m, char *buf, size_t size);
unsigned agent_cpumask_count(const struct agent_cpumask *m);
static inline bool agent_cpumask_has(const struct agent_cpumask *m, unsigned c)
{
	return c < AGENT_CPUS_MAX && (m->w[c / 64] >> (c % 64) & 1);
}
static inline void agent_cpumask_set(struct agent_cpumask *m, unsigned c)
{
	if (c < AGENT_CPUS_MAX)
		m->w[c / 64] |= UINT64_C(1) << (c % 64);
}

/* Picks `n` cores of this host that are not in *taken: those of the NUMA
 * node of the GPU at PCI address `pci_bus_id` first (NULL or unknown
 * topology: none preferred), lowest first, then the lowest free others.
 * Writes the cpuset list to cpus and the memory node(s) of the chosen cores
 * to mems ("" when the host shows no NUMA nodes). -ENOSPC with the reason
 * when fewer than n are free. Reads under sysfs_root ("/" on a host):
 * sys/devices/system/cpu/online, sys/bus/pci/devices/ADDR/numa_node,
 * sys/devices/system/node/{online,nodeN/cpulist}. */
int agent_cpuset_choose(const char *sysfs_root, const char *pci_bus_id, unsigned n,
                        const struct agent_cpumask *taken, char *cpus, size_t cpus_size, char *mems,
                        size_t mems_size, struct iso_error *err);

/* ---- device nodes (devices.c) ---- */

struct agent_host_roots {
	const char *dev_root;   /* "/dev" */
	const char *proc_root;  /* "/proc" */
	const char *sysfs_root; /* "/" (sysfs under sys/) */
};

/* One MIG instance a member holds, as the GPU driver lists it (gi -1:
 * a whole GPU, no capability nodes). */
struct agent_gpu_slice {
	unsigned gpu;
	int gi, ci;
};

/* One VF a member uses: VF `index` of the HCA `device` (mlx5_0). */
struct agent_vf_ref {
	const char *device;
	unsigned index;
};

#define AGENT_DEVICES_MAX ISO_SANDBOX_DEVICES_MAX
#define AGENT_DEV_PATH    256

/* The device nodes a member may open, those of them that exist on this
 * host: nvidiactl, nvidia-uvm, nvidia-uvm-tools, each GPU's nvidiaN, each
 * MIG instance's GI and CI access capability nodes (minors from
 * PROC/driver/nvidia-caps/mig-minors; DEV/nvidia-caps/nvidia-cap<minor>),
 * each VF's uverbsN (sysfs infiniband_verbs of the VF's PCI function) and
 * infiniband/rdma_cm. No duplicates. */
int agent_sandbox_devices(const struct agent_host_roots *roots, const struct agent_gpu_slice *gpus,
                          size_t n_gpus, const struct agent_vf_ref *vfs, size_t n_vfs,
                          char (*out)[AGENT_DEV_PATH], size_t *n_out, struct iso_error *err);

/* The RDMA device of VF `vf->index` of HCA `vf->device` ("mlx5_3"): the
 * entry of SYSFS/sys/class/infiniband/ whose `device` is that VF's PCI
 * function (SYSFS/sys/class/infiniband/<pf>/device/virtfn<i>). 1 with the
 * name, 0 when none is seen from the agent's namespace (no RDMA driver on
 * the VF, or the device moved into a member's namespace), -errno. */
int agent_vf_rdma_device(const struct agent_host_roots *roots, const struct agent_vf_ref *vf,
                         char name[ISO_RDMA_NAME_MAX], struct iso_error *err);

/* ---- a member's RDMA (sandboxes.c; docs/agent.md "Sandboxes") ---- */

struct agent_sandboxes;

#define AGENT_RDMA_HCA_HANDLES 16   /* default --rdma-hca-handles */
#define AGENT_CNI_SM_WAIT_S    10   /* default --cni-sm-wait-s */
#define AGENT_CNI_SM_WAIT_MAX  300  /* its bound */
#define AGENT_RDMA_HCA_OBJECTS 8192 /* default --rdma-hca-objects */

/* What the agent does with a member's RDMA, decided from the host's RDMA
 * netns mode, the rdma cgroup controller's presence, the member's fabric
 * (an overlay: Ethernet; a VF and no overlay: InfiniBand) and its VF's
 * RDMA device (rdma_device "" when none was found on the host). */
struct agent_rdma_plan {
	bool new_netns;     /* a net namespace of its own */
	bool move;          /* its VF's RDMA device moved into that namespace */
	bool limit;         /* rdma.max for that device */
	bool no_controller; /* a limit was due but the host has no rdma controller */
	const char *refuse; /* non-NULL: the sandbox cannot be made, why */
};
void agent_rdma_plan(enum iso_rdma_netns_mode mode, bool rdma_controller, bool has_overlay,
                     bool has_vf, const char *rdma_device, struct agent_rdma_plan *out);
/* A member's plan on this host: its VF's RDMA device from sysfs (rdev, ""
 * when none), the plan for the agent's mode and cgroup controllers, and
 * its rdma.max line (*lim, which points into rdev; used when plan->limit).
 * A refused plan is -errno with the reason; the missing rdma controller is
 * logged once per agent. */
int agent_member_rdma(struct agent_sandboxes *s, const struct agent_vf_ref *vfs, size_t nv,
                      bool has_overlay, struct agent_rdma_plan *plan, char rdev[ISO_RDMA_NAME_MAX],
                      struct iso_cgroup_rdma *lim, struct iso_error *err);

/* Each tick, for a live sandbox in exclusive mode: an InfiniBand member's
 * VF RDMA device that the host's sysfs lists is not in the member's
 * namespace (the agent stopped between make and move, or someone moved it
 * out), and is moved in again; one the host does not list is left alone.
 * 0, or -errno with *err (the member is then not ready). */
int agent_rdma_keep_in(struct agent_sandboxes *s, const struct agent_vf_ref *vfs, size_t nv,
                       bool has_overlay, const struct iso_sandbox *sb, struct iso_error *err);

/* ---- the sandbox records and the table (sandboxes.c) ---- */

#define AGENT_SANDBOX_DIR      "sandboxes"
#define AGENT_TOMBSTONES       4096
#define AGENT_SANDBOX_PIDS     16384 /* pids.max of a member */
#define AGENT_SANDBOX_NAME_FMT "iso-%s-%u"

/* STATE_DIR/sandboxes/<name>.json: what the agent needs to find a
 * member's sandbox again after a restart. holder_pid 0: the cores are
 * reserved, the sandbox not made yet (or a make cut short). */
struct agent_sandbox_record {
	char node[ISO_NAME_MAX];
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	struct iso_sandbox sb;
	char cpus[ISO_AGENT_CPUS_MAX];
	char mems[ISO_AGENT_CPUS_MAX];
	bool io_uring;
};

int agent_record_load(const char *dir, const char *name, struct agent_sandbox_record *out,
                      struct iso_error *err);
int agent_record_store(const char *dir, const struct agent_sandbox_record *rec,
                       struct iso_error *err);
/* Strict decode of a record's text (tests and the fuzzer). */
int agent_record_decode(const char *text, size_t len, struct agent_sandbox_record *out,
                        struct iso_error *err);

/* What the socket answers for one member. */
struct agent_table_entry {
	char node[ISO_NAME_MAX];
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	bool ready; /* its sandbox is there (real mode) */
	char reason[ISO_AGENT_REASON_MAX];
	struct iso_sandbox sb;
	char cpus[ISO_AGENT_CPUS_MAX];
	bool io_uring;
	/* issue 15, the (tenant, key) lookup: the member's tenant and its
	 * allocation's key ("" when none); member_ready: what a plugin may
	 * start on (real mode: `ready`; off: its GPU instances and VF ready),
	 * else member_reason; its instances' UUIDs as the agent made them,
	 * comma-joined; its VF (an InfiniBand one) and the tenant's P_Key */
	char tenant[ISO_NAME_MAX];
	char key[ISO_IDEM_KEY_MAX];
	bool member_ready;
	char member_reason[ISO_AGENT_REASON_MAX];
	char cuda[ISO_AGENT_CUDA_MAX];
	bool has_vf;
	char vf_device[32];
	unsigned vf_index;
	uint16_t pkey; /* 0: none (RoCE, or no VF) */
	/* issue 17: its tenant's VNI on a Slingshot node (the document's
	 * "cxi"), 0 when none */
	uint32_t cxi_vni;
};

struct agent_cxi;

struct agent_tombstone {
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	char tenant[ISO_NAME_MAX]; /* "" when only the record was known */
	char key[ISO_IDEM_KEY_MAX];
};

/* ---- pod attachments (cni.c; issue 17, docs/cni.md) ---- */

#define AGENT_CNI_DIR         "cni"
#define AGENT_CNI_ID_MAX      129
#define AGENT_CNI_NETNS_MAX   256
#define AGENT_CNI_NETWORK_MAX 129
#define AGENT_CNI_REQUEST_MAX 65536
/* How long an emptied tenant's bridge stays on the node (its ports, tunnel
 * and guard pairs go at once): a pod replaced within it does not wait for
 * the kernel to unregister and make the bridge again. */
#define AGENT_OVERLAY_LINGER_MS 3000

/* STATE_DIR/cni/<hash>.json: one pod's attachment, (node, container id,
 * ifname) hashed; allocation "" until the controller answered. */
struct agent_attachment {
	char node[ISO_NAME_MAX];
	char container_id[AGENT_CNI_ID_MAX];
	char ifname[16];
	char netns[AGENT_CNI_NETNS_MAX];
	char network[AGENT_CNI_NETWORK_MAX];
	char tenant[ISO_NAME_MAX];
	char key[ISO_IDEM_KEY_MAX]; /* cni:<node>:<hash>:<lease, 8 hex> */
	char hash[33];
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	bool joined;      /* a member of an allocation it did not create */
	char address[24]; /* "A.B.C.D/N" from the pod's IPAM, "" the slot plan */
	unsigned cpus;    /* the created allocation's member shape */
	uint64_t memory_mib;
	char alloc_name[ISO_NAME_MAX]; /* its allocation's name, cni-<hash 16> */
	bool deleting; /* DEL began: off the overlay, its allocation being released */
	/* Slingshot mode: no interface of ours; the pod's uid and gid are
	 * admitted to its member's CXI service (cxi_node.c's cxi_admit) */
	bool cxi;
	uint32_t uid, gid;
	/* InfiniBand mode (docs/cni.md): the allocation's own VF, its host
	 * netdev (moved into the pod as ifname), the RDMA device moved with
	 * it ("" none); vf_index -1 until known */
	bool ib;
	int vf_index;
	char vf_device[32];
	char vf_netdev[16];
	char rdma_dev[64];
};

/* One attachment's outcome of an overlay pass. */
struct agent_attach_result {
	bool ready;
	char reason[ISO_AGENT_REASON_MAX];
};

/* One attachment the tick's overlay pass plugged in. */
struct agent_plugged {
	char hash[33];
	char allocation[ISO_AGENT_ALLOC_MAX];
	char netns[AGENT_CNI_NETNS_MAX];
	char address[24];
};

/* A VF of the node's desired document and the member it serves (the
 * document's "vfs", one row per member named). */
struct agent_view_vf {
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	unsigned index;
	char device[32];
	uint64_t guid;
	uint16_t pkey;
};

/* A node's members as its last desired document listed them. */
struct agent_node_view {
	char node[ISO_NAME_MAX];
	uint64_t generation; /* bumped by every tick */
	size_t n;
	struct iso_agent_member_want *members;
	/* the attachments the tick's own overlay pass left ready, by record
	 * (hash, allocation, netns, address as that pass read them): an ADD
	 * answers from these instead of a second pass */
	size_t n_plugged;
	struct agent_plugged *plugged;
	/* its VFs, by member served (an InfiniBand ADD finds its pod's own) */
	size_t n_vfs;
	struct agent_view_vf *vfs;
};

bool agent_cni_key_is_attachment(const char *key);
bool agent_cni_ifname_valid(const char *s);
void agent_attachment_name(const struct agent_attachment *a, char out[ISO_NAME_MAX]);
int agent_attachment_decode(const char *text, size_t len, struct agent_attachment *out,
                            struct iso_error *err);
/* The records of `node` (NULL: every node); a bad one is logged, skipped. */
int agent_attachments_list(const char *state_root, const char *node, struct agent_attachment **out,
                           size_t *n, struct iso_error *err);
/* Records whose create the controller committed but whose answer the ADD
 * has not stored yet (allocation ""): their allocation and member, in
 * these copies, from d's member of the same key (the record's lease) and
 * tenant. So a pass that reads such a record plugs its pod in instead of
 * removing the tenant's bridge that no other input explains. */
void agent_attachments_resolve(const struct iso_agent_desired *d, struct agent_attachment *att,
                               size_t n_att);
/* The overlay inputs of the attachments whose member d lists: a created
 * one takes its member's input (in[0..*n_in) holds one per member), a
 * joined one is appended (names[] its veth aliases). */
void agent_attachment_inputs(const struct iso_agent_desired *d, const struct agent_attachment *att,
                             size_t n_att, struct iso_agent_overlay_member_in *in,
                             char (*names)[ISO_NAME_MAX], size_t *n_in);

/* The sandboxes of every node this agent serves: written by the node
 * threads after each tick, read by the socket's thread. */
struct agent_sandboxes {
	pthread_mutex_t lock;          /* the table (entries, tombstones) */
	pthread_mutex_t work;          /* one node's reconcile at a time: records and cores */
	bool real;                     /* sandbox_mode */
	char off_reason[128];          /* why off */
	struct iso_cgroup cg;          /* opened when real */
	struct agent_host_roots roots; /* devices and topology */
	char dir[4096];                /* STATE_DIR/sandboxes */
	size_t n, cap;
	struct agent_table_entry *entries;
	struct agent_tombstone *tombs; /* a ring of AGENT_TOMBSTONES */
	size_t n_tombs, tomb_next;
	/* The emptied tenants' bridges that linger (iso_agent_overlay_env
	 * .linger, AGENT_OVERLAY_LINGER_MS), under `work`. */
	struct iso_agent_overlay_linger overlay_linger;
	/* The last overlay pass wanted nothing and found nothing of ours in the
	 * kernel: until a member wants an overlay again, the pass (a netlink
	 * dump and nft calls) is skipped. Starts false, so an agent's first
	 * tick always looks and removes what a previous run left. */
	bool overlay_clean;
	/* Off mode: a tick's pass ran (for attachments). It runs on until it
	 * found the node clean; an off agent that never had one touches no
	 * network (other agents' namespaces in tests). */
	bool overlay_touched;
	/* RDMA: the host's netns mode (read at start), rdma.max's defaults,
	 * and whether "no rdma controller" was logged already (once). */
	enum iso_rdma_netns_mode rdma_mode;
	int64_t rdma_hca_handles, rdma_hca_objects;
	bool rdma_nocg_logged;
	/* issue 15: where a member's VF's P_Key table is read (the agent's VF
	 * driver; the sim's tree is under state_root/<node>/vf-sim), and the
	 * nodes whose first tick has published (a key not found before every
	 * node ticked is "the agent is starting", not unknown) */
	struct iso_vf_host vf;
	char state_root[4096];
	size_t nodes_expected, n_ticked;
	int cni_sm_wait_ms; /* --cni-sm-wait-s, in ms */
	char (*ticked)[ISO_NAME_MAX];
	/* issue 17: the node's CXI services (cxi_node.c); NULL only in
	 * tests without one (a cxi_admit is then refused) */
	struct agent_cxi *cxi;
	/* issue 17, the CNI requests (cni.c): each node's last desired members
	 * (under lock; ticked_cond broadcast after every tick), the
	 * controller the attachments are created at, the nodes served, and
	 * the request threads running */
	pthread_cond_t ticked_cond;
	struct agent_node_view *views;
	size_t n_views;
	const char *controller, *token;
	const char *const *nodes;
	size_t n_nodes;
	atomic_int cni_busy;
	/* the controller calls of CNI requests under way: at most
	 * AGENT_CNI_HTTP_MAX, well under isostackd's 64 connections from one
	 * client address (docs/api.md), which the node's long poll shares */
	pthread_mutex_t cni_http_lock;
	pthread_cond_t cni_http_cond;
	unsigned cni_http;
};
#define AGENT_CNI_HTTP_MAX 16

/* dir: the agent's state dir; cgroup_root NULL when mode is off. */
int agent_sandboxes_init(struct agent_sandboxes *s, const char *state_dir, bool real,
                         const char *cgroup_root, const struct agent_host_roots *roots,
                         struct iso_error *err);
void agent_sandboxes_free(struct agent_sandboxes *s);

/* One tick for `node` (after the MIG and VF passes, under a term obeyed):
 * makes the sandbox of every member of d whose instances (and VF) are ready
 * in `status`, removes those of members no longer in d, and sets
 * status["sandbox_mode"] and status["sandboxes"]. */
struct agent_sandbox_tick {
	unsigned created, destroyed, failed;
};
int agent_sandboxes_reconcile(struct agent_sandboxes *s, struct iso_gpu *g, const char *node,
                              const struct iso_agent_desired *d, json_t *status,
                              struct agent_sandbox_tick *tick, struct iso_error *err);

/* The tenant overlay of the tick's members (overlay.c): made from the
 * ready entries' namespaces, an entry with an overlay that is not in place
 * made not ready with the reason, status["overlay"] set when any member
 * has an overlay (read back from the kernel). *clean as in
 * agent_sandboxes.overlay_clean. */
void agent_overlay_tick(const char *node, const struct iso_agent_desired *d,
                        struct agent_table_entry *entries, const struct agent_attachment *att,
                        size_t n_att, struct agent_attach_result *res, const char *only,
                        json_t *status, bool *clean, struct iso_agent_overlay_linger *linger);

/* ---- the CNI requests (cni.c) ---- */
/* The node's members, kept for the requests; broadcasts ticked_cond. */
/* The tick's: node's desired members and the attachments (att, with
 * res[i] its overlay pass's outcome; res NULL: none ran) that pass left
 * ready; wakes the requests that wait for them. */
void agent_view_store(struct agent_sandboxes *s, const char *node,
                      const struct iso_agent_desired *d, const struct agent_attachment *att,
                      const struct agent_attach_result *res, size_t n_att);
void agent_views_free(struct agent_sandboxes *s);
/* One request {"cni": VERB, ...}: the answer object (never NULL but out
 * of memory). */
json_t *agent_cni_answer(struct agent_sandboxes *s, const char *text, size_t len);
/* Serves it on a thread of its own, which answers on fd and closes it;
 * -EBUSY when too many run (fd is then still the caller's). */
int agent_cni_serve(struct agent_sandboxes *s, int fd, const char *text, size_t len);
/* Waits for the request threads to finish. */
void agent_cni_drain(struct agent_sandboxes *s);

/* The socket's answer for (allocation, member): 0 with *out, or a refusal
 * written to reason: "not on this node", "released", "not ready yet (...)". */
int agent_sandboxes_lookup(struct agent_sandboxes *s, const char *allocation, unsigned member,
                           struct agent_table_entry *out, char *reason, size_t size);

/* The answer for (tenant, key) (issue 15): 0 with *out, the entry of the
 * lowest member of this node whose allocation has that tenant and key, or
 * a refusal in reason: "no allocation with key K for tenant T on this
 * node" (-ENOENT), "released" (-ENOENT), "not ready yet (...)" (-EAGAIN;
 * also while not every node has ticked since the start). */
int agent_sandboxes_lookup_key(struct agent_sandboxes *s, const char *tenant, const char *key,
                               struct agent_table_entry *out, char *reason, size_t size);

/* The entry of (allocation, member) whatever its readiness (the CXI
 * admit): 0 with *out, or -ENOENT with "not on this node" or "released". */
int agent_sandboxes_member(struct agent_sandboxes *s, const char *allocation, unsigned member,
                           struct agent_table_entry *out, char *reason, size_t size);

/* ---- CXI services in the daemon (cxi_node.c; docs/agent.md "CXI
 * services") ---- */

#define AGENT_CXI_ADMITTED_FILE "cxi-admitted.json"
#define AGENT_CXI_FILE_MAX      (256 * 1024)

/* An identity the attachment path admitted to a member's service (the
 * socket's cxi_admit), kept in NODE_DIR/cxi-admitted.json so that a
 * restarted agent keeps the services of running members. */
struct agent_cxi_admit {
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	uint32_t vni, uid, gid;
};
/* Strict decode of the file's text (tests and the fuzzer): at most
 * ISO_AGENT_MEMBERS_MAX entries, each member once; *out malloc'd. */
int agent_cxi_admitted_decode(const char *text, size_t len, struct agent_cxi_admit **out, size_t *n,
                              struct iso_error *err);

struct agent_cxi_config {
	const char *library; /* NULL: $ISOSTACK_CXI_LIBRARY, else libcxi.so.1 */
	bool off;            /* --cxi-library none */
	bool always;         /* --cxi-library PATH given: opened at the first tick */
	unsigned dev_id;     /* --cxi-device cxiN */
	const char *node;    /* the node served; NULL: several (CXI is off) */
	const char *node_dir;
};
/* The node's CXI state; with cfg->off or no cfg->node it loads nothing
 * and its members with a VNI are reported not ready, saying why. */
int agent_cxi_new(const struct agent_cxi_config *cfg, struct agent_cxi **out,
                  struct iso_error *err);
void agent_cxi_free(struct agent_cxi *c);
/* One tick, after the node's other passes, under a term obeyed: the
 * services brought to d's members (iso_agent_cxi_reconcile with the
 * admitted identities; those of released members dropped), status["cxi"]
 * (the read-back) and status["cxi_members"]. Nothing is done (nor
 * reported) on a node whose document has no member with a VNI unless
 * --cxi-library was given or the driver is open already. */
void agent_cxi_tick(struct agent_cxi *c, const char *node, const struct iso_agent_desired *d,
                    json_t *status);
/* The socket's cxi_admit for the member e (its table entry): JSON text
 * (malloc'd), the grant or {"error","message"}. */
char *agent_cxi_admit_answer(struct agent_cxi *c, const struct agent_table_entry *e,
                             const char *tenant, uint32_t uid, uint32_t gid);
/* CHECK of a pod's Slingshot attachment, changing nothing: member
 * (allocation, member) admits exactly uid and gid, and the NIC holds an
 * enabled service of exactly vni and them (read back now). 0 with
 * *svc_id, or -errno with why. */
int agent_cxi_check(struct agent_cxi *c, const char *allocation, unsigned member, uint32_t vni,
                    uint32_t uid, uint32_t gid, uint32_t *svc_id, char *why, size_t size);

/* ---- the socket (socket.c) ---- */

/* "a-" and 16 lowercase hex digits. */
bool agent_alloc_id_valid(const char *s);
/* {"error": CODE, "message": M} as JSON text (malloc'd). */
char *agent_answer_error(enum iso_errcode code, const char *message);

#define AGENT_SOCKET_NAME "agent.sock"
#define AGENT_REQUEST_MAX 1024
#define AGENT_ANSWER_MAX  (ISO_AGENT_CUDA_MAX + 2048)

/* One request, any shape. */
struct agent_request {
	bool by_key;    /* {"tenant","key"}, else {"allocation","member"} */
	bool cxi_admit; /* {"op":"cxi_admit","tenant","allocation","member","uid","gid"} */
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	char tenant[ISO_NAME_MAX];
	char key[ISO_IDEM_KEY_MAX];
	uint32_t uid, gid; /* cxi_admit: 1..4294967294 */
};
/* Strict parse of one request: {"allocation": A, "member": M}, or (a
 * "tenant" or "key" in it) {"tenant": T, "key": K}, or (an "op" in it)
 * {"op": "cxi_admit", "tenant": T, "allocation": A, "member": M, "uid": U,
 * "gid": G}; the error names the field. */
int agent_request_parse(const char *text, size_t len, struct agent_request *out,
                        struct iso_error *err);
/* The answer to one request's bytes from a caller of uid `uid` (malloc'd
 * JSON text). */
char *agent_socket_answer(struct agent_sandboxes *s, unsigned uid, const char *req, size_t len);

struct agent_socket;
int agent_socket_start(struct agent_sandboxes *s, const char *state_dir, atomic_bool *stop,
                       struct agent_socket **out, struct iso_error *err);
void agent_socket_stop(struct agent_socket *sk);

#endif

/* agent.h: the node agent's logic (isostack-agent, docs/agent.md), kept in
 * the library so that it is tested without HTTP. Reconcile is
 * level-triggered: each call derives the node's actual MIG instances from the
 * GPU driver, destroys what is not desired, creates what is desired and
 * missing at the desired start, never touches an instance that is desired and
 * present, and builds the status document of docs/agents.md from what the
 * driver reports afterwards. The only state it keeps is the highest fencing
 * term seen, in a file of the state dir, so that a restart keeps it. The
 * daemon loop (long poll, status, heartbeat, back-off) is iso_agent_run. */
#ifndef ISOSTACK_AGENT_H
#define ISOSTACK_AGENT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isostack/codec.h"
#include "isostack/gpu.h"
#include "isostack/sandbox.h"
#include "isostack/util.h"

ISO_PUBLIC_BEGIN

#define ISO_AGENT_TERM_FILE   "agent-term"
#define ISO_AGENT_FAULTS_FILE "agent-faults.json"

/* The desired document (struct iso_agent_desired, its wants and VFs) is the
 * codec's (include/isostack/codec.h); these two are its decode and clear
 * under the agent's names. */
/* Parses a desired-state document strictly (docs/agents.md): every field
 * known and typed, `node` equal to `node`. An error names the field
 * ("gpus[1].instances[0].start"). *out is cleared first. */
int iso_agent_desired_parse(const json_t *doc, const char *node, struct iso_agent_desired *out,
                            struct iso_error *err);
void iso_agent_desired_clear(struct iso_agent_desired *d);

/* The highest term seen, kept in DIR/agent-term; 0 when the file is absent. */
int iso_agent_term_load(const char *dir, uint64_t *out, struct iso_error *err);
int iso_agent_term_store(const char *dir, uint64_t term, struct iso_error *err);

/* What one reconcile did. */
struct iso_agent_tick {
	unsigned created, destroyed;
	unsigned busy;   /* destroys refused IN_USE, retried next tick */
	unsigned failed; /* creates or destroys that failed otherwise */
	uint64_t term_seen;
};

/* Makes the node match `d` through driver `g`, remembering terms in
 * `state_dir`, and sets *status to the status document (the caller owns it;
 * also on a refused document, from the actual state unchanged). A document
 * whose term is below the highest seen is refused (ISO_E_CONFLICT, field
 * "term") and nothing is touched. Failures of single instances do not fail
 * the call: they show as ready false with a reason. */
int iso_agent_reconcile(struct iso_gpu *g, const char *state_dir, const struct iso_agent_desired *d,
                        json_t **status, struct iso_agent_tick *tick, struct iso_error *err);

/* A sim host's GPU driver for the node whose state dir is `dir`
 * (src/agent/sim_host.c): a sim state on disk is opened as it is; a new one
 * is made from `d`, the node's desired document (one H100-80GB per listed
 * GPU index, with the document's MIG mode). With `d` NULL and no state yet,
 * 0 and *out NULL: open again when the first document comes. */
int iso_agent_sim_open(const char *dir, const struct iso_agent_desired *d, struct iso_gpu **out,
                       struct iso_error *err);

/* ---- GPU faults (src/agent/faults.c, docs/agent.md "Faults") ---- */

#define ISO_AGENT_FAULTS_MAX    4096 /* unsent faults kept in the outbox */
#define ISO_AGENT_XIDS_PER_TICK 64

/* One XID as the agent reports it (POST /v1/nodes/{node}/gpus/{gpu}/fault). */
struct iso_agent_fault {
	uint64_t seq; /* grows per node; the controller applies each once */
	unsigned gpu;
	unsigned long long xid;
	int gi, ci;                           /* ISO_GPU_ID_NONE: not attributable */
	char allocation[ISO_AGENT_ALLOC_MAX]; /* the owner of that instance, or "" */
	int member;                           /* -1 with no owner */
};

/* The faults not yet acknowledged, in DIR/agent-faults.json. */
struct iso_agent_outbox {
	uint64_t last_seq; /* the highest seq handed out */
	size_t n;
	struct iso_agent_fault *faults; /* by seq */
};
int iso_agent_outbox_load(const char *dir, struct iso_agent_outbox *out, struct iso_error *err);
void iso_agent_outbox_clear(struct iso_agent_outbox *o);
/* Adds `f` to the outbox (durably, before returning 0) and sets f->seq:
 * above every seq handed out before and at least the wall clock in ms. */
int iso_agent_fault_record(const char *dir, struct iso_agent_fault *f, struct iso_error *err);
/* Removes the fault `seq` from the outbox (answered by the controller). */
int iso_agent_fault_ack(const char *dir, uint64_t seq, struct iso_error *err);
/* The report's body: {"xid","seq"[,"gi","ci","allocation","member"]}. */
json_t *iso_agent_fault_json(const struct iso_agent_fault *f);
/* Reads every XID the driver has now (no waiting) into the outbox, each
 * mapped through the driver's instances and `d` (may be NULL) to the
 * allocation and member that own the instance it names. */
int iso_agent_xids_drain(struct iso_gpu *g, const char *dir, const struct iso_agent_desired *d,
                         unsigned *recorded, struct iso_error *err);
struct iso_client;
/* Reports the outbox's faults in order; each answered one leaves it (one
 * the controller refuses for good, 400 or 404, is logged and dropped). Stops
 * at the first that could not be sent: it is sent again next time. */
int iso_agent_faults_flush(struct iso_client *client, const char *node, const char *dir,
                           unsigned *sent, struct iso_error *err);

/* ---- VF GUIDs on the host (src/agent/vf.c, docs/agent.md "VFs") ---- */

enum iso_vf_driver {
	ISO_VF_NONE,  /* no VFs on this host: a desired VF is reported not ready */
	ISO_VF_MLX5,  /* sysfs: sriov/<vf>/{node,port,policy}, rebind by PCI address */
	ISO_VF_IBSIM, /* read only: the VFs are ibsim CAs, GUIDs from the net file */
	ISO_VF_SIM,   /* mlx5's code over a sysfs tree of plain files that it keeps in
	               * state_dir/vf-sim (sim hosts: make run, tests) */
};

struct iso_vf_host {
	enum iso_vf_driver driver;
	const char *sysfs_root; /* "/" on a real host; a fake tree in tests */
	const char *ibsim_net;  /* the ibsim net file (ISO_VF_IBSIM) */
	/* Called with every file the driver writes, before the write (tests
	 * check the order); may be NULL. */
	void (*trace)(void *arg, const char *path, const char *data);
	void *trace_arg;
};

struct iso_vf_tick {
	unsigned programmed, restored, failed;
};

/* "mlx5", "ibsim", "sim" or "none"; -EINVAL otherwise. */
int iso_vf_driver_parse(const char *name, enum iso_vf_driver *out);
const char *iso_vf_driver_name(enum iso_vf_driver d);

/* Makes the node's VFs match d->vfs (level-triggered: each VF's GUID is read
 * back every call and only a VF that differs is written), restores the
 * saved original GUID of every VF the document no longer holds, and sets
 * status["vfs"]: per desired VF its index, netdev, the GUID read back,
 * ready and reason. Originals are kept in state_dir/vf-<dev>-<index>.guid.
 * Single VFs that fail show as ready false; the call fails only for
 * out-of-memory. */
int iso_agent_vf_reconcile(const struct iso_vf_host *h, const char *state_dir,
                           const struct iso_agent_desired *d, json_t *status,
                           struct iso_vf_tick *tick, struct iso_error *err);

/* ---- members' sandboxes (src/agent/sandboxes.c, socket.c, cpuset.c,
 * devices.c; docs/agent.md "Sandboxes", issue 14) ---- */

/* A member's sandbox as the agent's socket (STATE_DIR/agent.sock) hands it
 * out: enough to join it (iso_sandbox_enter, iso_sandbox_run). */
struct iso_agent_sandbox_handle {
	struct iso_sandbox sb; /* name (the cgroup's), holder pid and start */
	char cgroup_root[ISO_CGROUP_PATH_MAX];
	char cpus[ISO_AGENT_CPUS_MAX];
	bool io_uring; /* the tenant's switch, for the seccomp policy */
};

/* Asks the agent whose state dir is `state_dir` for the sandbox of member
 * `member` of `allocation` (root only: the agent refuses other callers).
 * A refusal is -errno with the agent's words in err->message: "not on
 * this node" and "released" (ISO_E_NOT_FOUND), "not ready yet (why)"
 * (ISO_E_UNAVAILABLE), "refused: only root ..." (ISO_E_FORBIDDEN). */
int iso_agent_sandbox_lookup(const char *state_dir, const char *allocation, unsigned member,
                             struct iso_agent_sandbox_handle *h, struct iso_error *err);
/* ---- a member by its allocation's key (issue 15; the Slurm plugin) ---- */

#define ISO_AGENT_CUDA_MAX (ISO_AGENT_MAX_GPUS * ISO_AGENT_TEXT_MAX)

/* What the agent tells of the member of this node whose allocation has a
 * tenant and a key. */
struct iso_agent_member_info {
	char allocation[ISO_AGENT_ALLOC_MAX];
	unsigned member;
	bool ready; /* true on success; false with reason on "not ready yet" */
	char reason[ISO_AGENT_REASON_MAX + 32];
	/* its GPU instances' UUIDs as the agent made them, comma-joined
	 * ("MIG-...,MIG-..."; "GPU-..." for a GPU held whole without MIG) */
	char cuda_visible_devices[ISO_AGENT_CUDA_MAX];
	bool has_pkey;     /* the member has an InfiniBand VF */
	uint16_t pkey;     /* the tenant's P_Key, full membership (0x8001) */
	int pkey_index;    /* its index in the VF's P_Key table as read; -1: unknown */
	bool sandbox_real; /* the node's sandbox mode: real, or off (--sandbox off) */
	bool has_sandbox;  /* false only when sandbox_real is false */
	struct iso_agent_sandbox_handle sandbox;
	/* issue 17: on a Slingshot node, the tenant's VNI: the member needs its
	 * identity admitted (iso_agent_cxi_admit) before it uses the fabric */
	bool has_vni;
	uint32_t vni;
};

/* Asks the agent whose state dir is `state_dir` (root only) for the
 * member of `tenant`'s allocation with idempotency key `key` on this node.
 * 0 with *info; a refusal is -errno with the agent's words in
 * err->message: "no allocation with key K for tenant T on this node" and
 * "released" (ISO_E_NOT_FOUND), "not ready yet (why)" (ISO_E_UNAVAILABLE,
 * also info->reason), "cannot reach the agent at PATH: ..."
 * (ISO_E_UNAVAILABLE, field state_dir), a bad tenant or key
 * (ISO_E_INVALID, field tenant or key). With the node's sandboxes off the
 * answer has no sandbox (has_sandbox false, sandbox_real false). */
int iso_agent_member_lookup(const char *state_dir, const char *tenant, const char *key,
                            struct iso_agent_member_info *info, struct iso_error *err);
/* What a member's CXI service is, once an identity is admitted to it. */
struct iso_agent_cxi_grant {
	uint32_t vni;    /* the tenant's, from the controller */
	uint32_t svc_id; /* the service on the NIC (SLINGSHOT_SVC_IDS) */
	char device[16]; /* "cxi0" (SLINGSHOT_DEVICES) */
};
/* Asks the agent whose state dir is `state_dir` (root only) to admit uid
 * and gid to the CXI service of member `member` of `tenant`'s allocation
 * on this node (issue 17; the Slurm plugin for a job's tasks, the CNI
 * plugin for a pod): the service that admits exactly them to exactly the
 * tenant's VNI is made or found, and the identity kept for the member
 * until it leaves the node (idempotent: the same identity again is the
 * same service). Refusals, -errno with the agent's words: uid or gid 0 or
 * 4294967295 (ISO_E_INVALID, field uid/gid; also before asking), another
 * tenant's member (ISO_E_FORBIDDEN, field tenant), a member without a VNI
 * (ISO_E_INVALID), a member that already admits another identity, an
 * identity already admitted to another tenant's VNI on this node
 * (ISO_E_CONFLICT, field uid/gid), "not on this node" and "released"
 * (ISO_E_NOT_FOUND), no CXI driver on the node (ISO_E_UNAVAILABLE). */
int iso_agent_cxi_admit(const char *state_dir, const char *tenant, const char *allocation,
                        unsigned member, uint32_t uid, uint32_t gid, struct iso_agent_cxi_grant *g,
                        struct iso_error *err);

/* Where a VF's tenant P_Key sits in its P_Key table as this host shows it:
 * SYSFS/sys/class/infiniband/<the VF's RDMA device>/ports/1/pkeys/<i>
 * (mlx5; sim: the tree under node_dir/vf-sim, which the sim driver keeps:
 * index 0 0xffff, the tenant's P_Key at 1 while the VF is set up). The
 * entry whose low 15 bits are pkey's, full membership first. *out -1 when
 * not there, no RDMA device is seen, or the driver cannot read the table
 * (ibsim, none); -errno only for a bad argument. */
/* The host's netdev of VF `index` of `device` (docs/cni.md, "InfiniBand"):
 * mlx5: the VF's PCI function's net/ entry; sim and ibsim, whose VFs have no
 * kernel netdev: the stand-in "<device>v<index>" the host provides (a
 * veth in the tests). */
int iso_agent_vf_netdev(const struct iso_vf_host *h, const char *device, unsigned index,
                        char out[16], struct iso_error *err);
int iso_agent_vf_pkey_index(const struct iso_vf_host *h, const char *node_dir, const char *device,
                            unsigned index, uint16_t pkey, int *out, struct iso_error *err);

/* iso_agent_sandbox_lookup, then iso_sandbox_enter with the member's
 * seccomp policy: the calling process is in the sandbox when it returns 0
 * (irreversible; for the Slurm/CNI plugins, in a single-threaded child). */
int iso_agent_sandbox_join(const char *state_dir, const char *allocation, unsigned member,
                           const struct iso_sandbox_identity *id, struct iso_error *err);
/* `isostack-agent exec --state-dir DIR --allocation A --member M [--uid U
 * --gid G] -- CMD...` (argv from "exec" on): CMD's exit status, 126/127
 * when it cannot start, 125 on a refusal or a bad flag (why on stderr). */
int iso_agent_exec_main(int argc, char **argv);

enum iso_agent_sandbox_mode {
	ISO_AGENT_SANDBOX_AUTO, /* real when root and the cgroup root opens, else off */
	ISO_AGENT_SANDBOX_REAL,
	ISO_AGENT_SANDBOX_OFF,
};

/* ---- the daemon (src/agent/daemon.c) ---- */

#define ISO_AGENT_NODES_MAX 256

#define ISO_AGENT_SM_STANDBY_MAX 8

struct iso_agent_config {
	const char *controller; /* base URL */
	const char *token;
	const char *nodes[ISO_AGENT_NODES_MAX];
	size_t n_nodes;
	const struct iso_gpu_driver_ops *driver;
	const char *state_dir; /* each node works in state_dir/<node>/ */
	int heartbeat_s;       /* status at least this often; also the long poll's wait_s (<= 25) */
	struct iso_vf_host vf; /* --vf-driver, --sysfs-root, --ibsim-net */
	atomic_bool *stop;     /* set by the caller (SIGTERM) to stop */
	char *config_text;     /* --config's text, which values may point into (owned) */
	enum iso_agent_sandbox_mode sandbox; /* --sandbox */
	const char *cgroup_root;             /* --cgroup-root (default /sys/fs/cgroup) */
	const char *dev_root;                /* "/dev" (tests: a fake tree) */
	const char *proc_root;               /* "/proc" */
	/* --rdma-hca-handles/--rdma-hca-objects: rdma.max of a member's VF RDMA
	 * device; -1 "max", 0 the default (16 and 8192; docs/agent.md) */
	int64_t rdma_hca_handles, rdma_hca_objects;
	/* --cni-sm-wait-s: how long an InfiniBand pod's ADD waits for the
	 * subnet manager's read-back (docs/cni.md); 0 the default (10 s) */
	int cni_sm_wait_s;
	/* --sm-partitions, --sm-pid-file, --sm-log, --sm-standby: this agent
	 * serves the subnet manager of the SM host (fabric.partitions_writer
	 * agent; docs/agent.md "The SM host") instead of GPUs and sandboxes */
	/* --cxi-library PATH|none, --cxi-device cxiN (docs/agent.md "CXI
	 * services"): NULL the default (libcxi.so.1, opened when the desired
	 * document first lists a member with a VNI) */
	const char *cxi_library;
	unsigned cxi_device;
	bool cxi_device_given;
	struct iso_agent_sm {
		const char *partitions; /* OpenSM's partitions.conf (-P); NULL: not an SM agent */
		const char *pid_file;   /* its pid, for SIGHUP */
		const char *log_file;   /* its log (-f), scanned for incidents; NULL: none */
		const char *standby[ISO_AGENT_SM_STANDBY_MAX]; /* standbys' partitions.conf */
		size_t n_standby;
	} sm;
};

/* The SM agent's state: the highest term and generation it wrote, in
 * STATE_DIR/sm-mark ("term T generation G"). */
#define ISO_AGENT_SM_MARK_FILE "sm-mark"
/* Serves the SM (src/agent/sm.c): long-polls GET /v1/fabric/sm/partitions,
 * refuses a document below the highest mark written (the state file's and
 * the partitions file's header, whichever is higher), writes the file with
 * its header atomically (and every standby's), SIGHUPs the SM, scans its log
 * and reports with PUT /v1/fabric/sm/status, until *cfg->stop. */
int iso_agent_sm_run(const struct iso_agent_config *cfg, struct iso_error *err);

/* Parses the command line (docs/agent.md), after the lines of --config FILE
 * when given. Returns 0 and fills *cfg (strings point into argv or
 * cfg->config_text, token read from --token-file into *token_buf, malloc'd);
 * 1 when --help printed usage; -EINVAL with *err naming the flag. */
int iso_agent_parse_args(int argc, char **argv, struct iso_agent_config *cfg, char **token_buf,
                         struct iso_error *err);
extern const char iso_agent_usage[];
/* Frees what iso_agent_parse_args allocated in cfg (not the token buffer). */
void iso_agent_config_clear(struct iso_agent_config *cfg);

/* Serves every node of cfg, one thread and one connection per node, until
 * *cfg->stop. Returns 0, or -errno when a node could not start. */
int iso_agent_run(const struct iso_agent_config *cfg, struct iso_error *err);

/* ---- overlay (src/agent/overlay.c; docs/agents.md "overlay") ---- */

/* Where the node's overlay lives. */
/* The tenants whose last member left, whose bridge lingers (the agent's
 * memory across passes; see iso_agent_overlay_env.linger). */
struct iso_agent_overlay_linger {
	uint64_t hold_ns; /* how long an emptied bridge stays */
	size_t n;
	struct {
		uint32_t vni;
		uint64_t since_ns; /* iso_mono_ns() when first found empty */
	} t[ISO_AGENT_MAX_OVERLAY_TENANTS];
};
struct iso_agent_overlay_env {
	const char *host_netns;   /* NULL: the agent's own namespace */
	const char *underlay_ip;  /* this node's underlay IPv4; NULL or "": none */
	const char *underlay_dev; /* the interface holding it (iso_overlay_underlay_dev) */
	/* NULL: the whole pass. Else the input of that veth alias alone (a CNI
	 * request, issue 17): its tenant, it and the guard are brought up,
	 * nothing is removed and nothing read back (the next tick does both) */
	const char *only_name;
	/* NULL: a tenant with no member left goes at once (bridge and VXLAN
	 * device). Else its member veths, its VXLAN device and its guard pairs
	 * go at once, and its bridge alone (no port, no tunnel: nothing
	 * reaches it) stays until it has been empty for linger->hold_ns, so
	 * that a pod replaced at once does not wait for the kernel to
	 * unregister the bridge and make it again (40-50 ms, under the rtnl
	 * lock that every other change waits for) */
	struct iso_agent_overlay_linger *linger;
};
/* One desired member, with what the agent knows of its sandbox. */
struct iso_agent_overlay_member_in {
	const struct iso_agent_member_want *want;
	const char *netns; /* its sandbox's /proc/HOLDER/ns/net; NULL while none */
	/* issue 17, a pod's CNI attachment: its veth's alias (NULL: the
	 * member's iso-<allocation>-<member>), its interface in netns (NULL:
	 * eth0) and its address from the pod's IPAM ("A.B.C.D/N"; NULL: the
	 * slot plan's) */
	const char *name;
	const char *ifname;
	const char *address;
	bool ready; /* out: true without an overlay, or with its veth and address */
	char reason[ISO_AGENT_REASON_MAX]; /* out: why not ready, "" when ready */
};
/* Brings the node's overlay to the members in[0..n), level-triggered:
 * tenants, members' veths and the guard made or fixed, what no member
 * explains removed (the guard too when no overlay member is left). Per
 * member, ready/reason. Fills *out (read back, iso_agent_overlay_read) when
 * any member has an overlay, else leaves it empty. -errno only when the
 * kernel's state could not be read; a member's own failure is its reason. */
int iso_agent_overlay_reconcile(const struct iso_agent_overlay_env *env,
                                struct iso_agent_overlay_member_in *in, size_t n,
                                struct iso_agent_overlay *out, struct iso_error *err);
/* The status `overlay` read back from the kernel (nft and netlink): the
 * guard, its drops and pairs, the tenants' devices and their members, each
 * member's address from its own namespace when in[] names it. */
int iso_agent_overlay_read(const struct iso_agent_overlay_env *env,
                           struct iso_agent_overlay_member_in *in, size_t n,
                           struct iso_agent_overlay *out, struct iso_error *err);
void iso_agent_overlay_clear(struct iso_agent_overlay *ov);

/* ---- end overlay ---- */

/* ---- CXI services on a Slingshot node (src/agent/cxi.c; docs/agent.md
 * "CXI services"): libcxi.so.1 loaded with dlopen, one service per
 * (VNI, uid, gid), restricted to those members and that VNI ---- */

struct iso_agent_cxi;
/* Opens libcxi (`library`, else $ISOSTACK_CXI_LIBRARY, else "libcxi.so.1")
 * and CXI device dev_id (cxi<dev_id>). -EAGAIN naming "library" when the
 * library cannot be loaded or lacks a function; -errno of cxil_open_device. */
int iso_agent_cxi_open(const char *library, unsigned dev_id, struct iso_agent_cxi **out,
                       struct iso_error *err);
void iso_agent_cxi_close(struct iso_agent_cxi *x);
/* Every service on the device as libcxi reads it back (the default one and
 * foreign ones too), sorted by svc_id, into *out (iso_agent_cxi_report_clear). */
int iso_agent_cxi_list(struct iso_agent_cxi *x, struct iso_agent_cxi_report *out,
                       struct iso_error *err);
void iso_agent_cxi_report_clear(struct iso_agent_cxi_report *r);
/* The service that admits exactly uid and gid to exactly `vni`, made when
 * there is none (idempotent: a second call finds the first's). Refused:
 * uid or gid 0 (-EINVAL, field "uid"/"gid"), vni outside 1..65535 (-EINVAL,
 * "vni"), a uid or gid that another enabled service already admits to
 * another VNI (-EEXIST, "uid"/"gid": two tenants' processes with one
 * identity could use each other's VNI). What cxil_alloc_svc made is read
 * back; a service that does not read back as asked is destroyed again
 * (-EIO): nothing half made is left. */
int iso_agent_cxi_ensure(struct iso_agent_cxi *x, uint32_t vni, uint32_t uid, uint32_t gid,
                         uint32_t *svc_id, struct iso_error *err);
/* The service that admits exactly uid and gid to exactly vni, read back
 * from the NIC, changing nothing: 0 with *svc_id, -ENOENT when none. */
int iso_agent_cxi_find(struct iso_agent_cxi *x, uint32_t vni, uint32_t uid, uint32_t gid,
                       uint32_t *svc_id, struct iso_error *err);
/* Destroys service svc_id; the default service and system services are
 * refused (-EPERM); -ENOENT when there is none; -EBUSY while a process
 * uses it (cxil_destroy_svc). */
int iso_agent_cxi_destroy(struct iso_agent_cxi *x, uint32_t svc_id, struct iso_error *err);

/* One desired member for the CXI pass. */
struct iso_agent_cxi_member_in {
	const struct iso_agent_member_want *want; /* want->has_cxi: its VNI */
	/* the identity the attachment path (the CNI plugin) gave for this
	 * member, used when the desired document carries none */
	bool has_ident;
	uint32_t uid, gid;
	uint32_t svc_id;                   /* out: its service, 0 while none */
	bool ready;                        /* out: true without cxi, or with its service */
	char reason[ISO_AGENT_REASON_MAX]; /* out: why not ready */
};
/* Brings the device's services to the members in[0..n), level-triggered:
 * the service of each member with a VNI and an identity made (ensure), every
 * other service destroyed except the default one (id 1) and system services.
 * A uid or gid that two members of different VNIs share gets neither a
 * service (reason says so). *out is the read-back after the pass. -errno
 * only when the device could not be read; a member's failure is its reason. */
int iso_agent_cxi_reconcile(struct iso_agent_cxi *x, struct iso_agent_cxi_member_in *in, size_t n,
                            struct iso_agent_cxi_report *out, struct iso_error *err);
/* ---- pod attachments (issue 17; the CNI plugin, docs/cni.md) ---- */

/* One CNI request to the node agent's socket at socket_path (root only):
 * `req` is {"cni": "ADD"|"DEL"|"CHECK"|"GC"|"STATUS", ...} (docs/agent.md,
 * "CNI attachments"). 0 with the agent's answer object in *answer (the
 * caller decrefs it); a refusal is -errno with the agent's code and words
 * in *err; an agent that cannot be reached is ISO_E_UNAVAILABLE, field
 * agentSocket. */
int iso_agent_cni_request(const char *socket_path, const json_t *req, json_t **answer,
                          struct iso_error *err);

ISO_PUBLIC_END

#endif

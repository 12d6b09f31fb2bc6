/* sandbox.h: the job sandbox (issue 14), the kernel layer around every
 * allocation member: cgroups, namespaces and a seccomp filter. Library code
 * of isostack-client, so that the node agent and the Slurm/CNI plugins share
 * one implementation (docs/sandbox.md). */
#ifndef ISOSTACK_SANDBOX_H
#define ISOSTACK_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>

#include "isostack/util.h"

ISO_PUBLIC_BEGIN

/* ---- seccomp ---- */

/* What a tenant may switch on beyond the fixed deny-list (docs/sandbox.md,
 * "seccomp"). Zeroed means the strictest filter. */
struct iso_seccomp_policy {
	/* io_uring_setup/enter/register: denied by default (their rings reach
	 * kernel code paths no other filter sees); a tenant-level switch. */
	bool allow_io_uring;
	/* ptrace: a filter cannot see whether the target pid is inside the
	 * sandbox, so it is denied unless the caller says the process runs in
	 * the sandbox's own pid namespace, where the kernel itself confines
	 * every pid it can name to the sandbox. */
	bool allow_ptrace;
};

/* Installs the sandbox's seccomp filter in the calling thread (and what it
 * forks and execs from then on): every call allowed but the deny-list, which
 * answers EPERM (never a kill). Sets no_new_privs first (libseccomp's
 * default, kept on purpose: it is what lets an unprivileged process load a
 * filter, and stops a setuid binary from gaining privilege past it). Not
 * undone: call it in the single-threaded child that will exec the job.
 * Returns 0 or -errno with *err naming the failing step. */
int iso_sandbox_seccomp_load(const struct iso_seccomp_policy *p, struct iso_error *err);

/* ---- end seccomp ---- */

/* ---- cgroups ---- */

/* One interface over cgroup v1 (a hierarchy per controller under the root:
 * ROOT/cpuset, ROOT/memory, ROOT/pids, ROOT/devices) and v2 (one unified
 * tree, ROOT/cgroup.controllers). The root is a parameter so that tests run
 * against a fake tree of plain directories (docs/sandbox.md, "cgroups"). */
enum iso_cgroup_version { ISO_CGROUP_V1 = 1, ISO_CGROUP_V2 = 2 };

/* The v1 controllers this module uses, as bits of iso_cgroup.controllers. */
enum {
	ISO_CGROUP_CPUSET = 1u << 0,
	ISO_CGROUP_MEMORY = 1u << 1,
	ISO_CGROUP_PIDS = 1u << 2,
	ISO_CGROUP_DEVICES = 1u << 3,
	ISO_CGROUP_RDMA = 1u << 4,
};

#define ISO_CGROUP_PATH_MAX 256

struct iso_cgroup {
	enum iso_cgroup_version version;
	unsigned controllers; /* ISO_CGROUP_* found under the root */
	char root[ISO_CGROUP_PATH_MAX];
};

/* One device rule: type 'a' (all), 'c' or 'b'; major/minor -1 for '*';
 * access a non-empty subset of "rwm". */
struct iso_cgroup_device {
	char type;
	long major, minor;
	char access[4];
};

/* One RDMA device's limit (rdma.max, the same on v1 and v2): how many HCA
 * handles and HCA objects (QPs, CQs, MRs, ...) the group may open on it.
 * -1: no limit ("max"). */
#define ISO_CGROUP_RDMA_LIMIT_MAX 0x7fffffff /* the kernel keeps an int */
struct iso_cgroup_rdma {
	const char *device; /* "mlx5_0": [A-Za-z0-9_.-], 1 to 63 characters */
	int64_t hca_handle; /* -1 .. ISO_CGROUP_RDMA_LIMIT_MAX */
	int64_t hca_object;
};

struct iso_cgroup_limits {
	const char *cpus;   /* cpuset list "0-3,8"; NULL: v1 copies the parent's, v2 leaves it */
	const char *mems;   /* likewise for memory nodes */
	int64_t memory_max; /* bytes; 0: no limit */
	int64_t pids_max;   /* 0: no limit */
	/* filter_devices: deny every device but the n_devices rules (v1:
	 * devices.deny/allow; v2: a BPF_PROG_TYPE_CGROUP_DEVICE program attached
	 * to the group, src/sandbox/cgroup_bpf.c). false: the group's device
	 * filter is left as it is. */
	bool filter_devices;
	const struct iso_cgroup_device *devices;
	size_t n_devices;
	/* rdma.max per device; devices not listed keep (or get back) "max".
	 * Needs the rdma controller: refused (unavailable, field rdma) without. */
	const struct iso_cgroup_rdma *rdma;
	size_t n_rdma;
};

/* Detects the version under root. -ENOENT when neither is found. */
int iso_cgroup_open(const char *root, struct iso_cgroup *cg, struct iso_error *err);
/* Creates group `name` (iso_name_valid) or brings an existing one to the
 * limits: level-triggered, a value already in place is not written again.
 * A group this call created is removed again when a later step fails. */
int iso_cgroup_create(const struct iso_cgroup *cg, const char *name,
                      const struct iso_cgroup_limits *lim, struct iso_error *err);
/* Moves pid into the group (every controller on v1). -ENOENT when absent. */
int iso_cgroup_attach(const struct iso_cgroup *cg, const char *name, int pid,
                      struct iso_error *err);
/* Removes an empty group; 0 when it is already gone. Kills nothing: -EBUSY
 * while processes remain (the caller moves or kills them first). */
int iso_cgroup_destroy(const struct iso_cgroup *cg, const char *name, struct iso_error *err);
/* True when the group exists (in any controller, on v1). */
bool iso_cgroup_exists(const struct iso_cgroup *cg, const char *name);

/* ---- end cgroups ---- */

/* ---- the sandbox: namespaces, identity and the launcher (src/sandbox/sandbox.c,
 * ns.c, creds.c; docs/sandbox.md "Namespaces" and "Launching") ---- */

/* A sandbox is a holder process, pid 1 of the member's own pid namespace, in
 * fresh mount, ipc, uts (and optionally net) namespaces and in the member's
 * cgroup. Its mount namespace sees the host's mounts (slave propagation:
 * nothing mounted inside leaks out) with a private /tmp and /dev/shm (tmpfs,
 * gone with the namespace), a /proc of its own pid namespace, and a /dev
 * holding only the allowed device nodes. Processes join it by setns(2) into
 * the holder's namespaces, so the holder is the sandbox's handle: its pid and
 * start time are what the agent keeps on disk to find it again after a
 * restart (a reused pid has another start time and is not the holder). */

#define ISO_SANDBOX_DEVICES_MAX 64

struct iso_sandbox_spec {
	const char *name; /* the cgroup's name and the uts hostname (iso_name_valid) */
	/* cpus, mems, memory_max and pids_max as in iso_cgroup_create. The
	 * device rules are derived from device_paths and limits.devices is
	 * ignored: the host's null, zero, full, random, urandom, tty and
	 * ptmx/pts are always added. */
	struct iso_cgroup_limits limits;
	/* Host paths of the device nodes the member may open (/dev/nvidia0,
	 * /dev/nvidia-caps/nvidia-cap12, /dev/infiniband/uverbs3, ...). Each is
	 * stat()ed for its type and major:minor (the cgroup rule) and bind
	 * mounted at the same path under the sandbox's /dev. A path that does
	 * not exist is refused (-ENOENT, field device_paths[i]). */
	const char *const *device_paths;
	size_t n_device_paths;
	bool new_netns; /* an empty net namespace (only lo, up); the Ethernet overlay adds its
	                   interface */
};

struct iso_sandbox {
	char name[ISO_NAME_MAX];
	int holder_pid;                  /* as the host sees it */
	unsigned long long holder_start; /* /proc/PID/stat field 22, clock ticks since boot */
};

/* Makes the sandbox: the cgroup (iso_cgroup_create), then the holder in it.
 * Returns when the holder's mounts are in place. On failure nothing is left
 * (no group, no holder). */
int iso_sandbox_create(const struct iso_cgroup *cg, const struct iso_sandbox_spec *spec,
                       struct iso_sandbox *out, struct iso_error *err);
/* 0 when sb's holder is alive and is that holder (pid and start time);
 * -ESRCH otherwise. */
int iso_sandbox_check(const struct iso_sandbox *sb, struct iso_error *err);
/* Kills every process of the sandbox (the holder last; its pid namespace
 * takes the rest with it), waits until the cgroup is empty and removes it.
 * 0 when already gone. Idempotent: an agent that restarts calls it again. */
int iso_sandbox_destroy(const struct iso_cgroup *cg, const struct iso_sandbox *sb,
                        struct iso_error *err);

/* Who the joining process becomes. */
struct iso_sandbox_identity {
	bool set;     /* false: keep the caller's uid/gid (still drops capabilities) */
	unsigned uid; /* not 0 */
	unsigned gid;
};

/* Moves the calling process into sandbox sb: its cgroup, its mount, ipc,
 * uts and net namespaces, and its pid namespace for the children it forks
 * from then on (setns(2) cannot move the caller itself into a pid
 * namespace). Then the identity: supplementary groups cleared, gid, uid,
 * the bounding set emptied, no ambient or inheritable capabilities,
 * no_new_privs; then the seccomp filter of `policy`. Irreversible: call it
 * in a single-threaded child that will fork or exec the job (the Slurm and
 * CNI plugins; iso_sandbox_run). */
int iso_sandbox_enter(const struct iso_cgroup *cg, const struct iso_sandbox *sb,
                      const struct iso_sandbox_identity *id,
                      const struct iso_seccomp_policy *policy, struct iso_error *err);

/* Runs argv in the sandbox and waits for it: fork, iso_sandbox_enter, fork
 * again (so that the job is in the sandbox's pid namespace), execvp. Sets
 * *status to the job's exit status, 128+N when signal N killed it, 126 when
 * argv[0] was found but could not run, 127 when it was not found. Returns
 * -errno (with *err) when the sandbox could not be entered: the job never
 * ran, and never ran outside the sandbox. stdin/stdout/stderr are the
 * caller's. */
int iso_sandbox_run(const struct iso_cgroup *cg, const struct iso_sandbox *sb,
                    const struct iso_sandbox_identity *id, const struct iso_seccomp_policy *policy,
                    char *const argv[], int *status, struct iso_error *err);

/* ---- end sandbox ---- */

/* ---- overlay ---- */

/* The tenant overlay of Ethernet fabrics (src/sandbox/overlay.c,
 * overlay_guard.c, overlay_vf.c; docs/sandbox.md "Tenant overlay"). Every
 * call takes the network namespace it acts in as a path (/proc/PID/ns/net,
 * /run/netns/NAME; NULL: the caller's own), so tests use namespaces as
 * hosts. Level-triggered: ensure brings the kernel to the spec and changes
 * nothing that already matches; remove answers 0 when already gone. */

#define ISO_OVERLAY_PORT     4789 /* the IANA VXLAN port */
#define ISO_OVERLAY_IFNAME   16   /* IFNAMSIZ */
#define ISO_OVERLAY_SLOT_MAX 252  /* slots 0..252: addresses .2 to .254 */

/* One tenant on this node: bridge isobr<vni> and VXLAN device isovx<vni>
 * (dstport 4789, local underlay address, over underlay_dev, no learning),
 * with one all-zeros FDB entry per peer (head-end replication). With no
 * peer and no local_ip (NULL or ""), the bridge alone: a tenant whose
 * members are all on this node needs no tunnel. */
struct iso_overlay_tenant {
	uint32_t vni;             /* 1 .. 2^24-1 */
	const char *underlay_dev; /* the host's underlay interface */
	const char *local_ip;     /* its IPv4 address (iso_parse_ipv4) */
	const char *const *peers; /* the other nodes holding the tenant (IPv4) */
	size_t n_peers;
};

int iso_overlay_tenant_ensure(const char *netns, const struct iso_overlay_tenant *t,
                              struct iso_error *err);
/* Deletes the tenant's VXLAN device and bridge; -EBUSY while a member's
 * veth is still on the bridge. */
int iso_overlay_tenant_remove(const char *netns, uint32_t vni, struct iso_error *err);

/* One member: a veth isov<hash of name> on the tenant's bridge whose peer is
 * eth0 in the member's namespace, up, with address
 * 10.<node_index/256>.<node_index%256>.<slot+2>/8. */
struct iso_overlay_member {
	const char *name; /* the sandbox's name (iso_name_valid); kept as the veth's alias */
	uint32_t vni;     /* the tenant, whose bridge must exist */
	const char *member_netns; /* path of the member's namespace */
	unsigned node_index;      /* 0 .. 65535 */
	unsigned slot;            /* 0 .. ISO_OVERLAY_SLOT_MAX */
	/* issue 17, a CNI attachment: the interface's name in member_netns
	 * (NULL: "eth0") and its address "A.B.C.D/N" from the pod's IPAM
	 * (NULL: the slot plan's 10.x.y.z/8; node_index and slot unused) */
	const char *ifname;
	const char *address;
};

/* A member's interface as its namespace shows it: MAC, up, the first IPv4
 * address and its prefix ("" / 0 when none). */
struct iso_overlay_member_link {
	char mac[18];
	bool up;
	char address[ISO_IPV4_MAX];
	unsigned prefixlen;
};
/* ifname NULL: eth0. -ENODEV when the namespace has no such interface. */
int iso_overlay_member_link_read(const char *member_netns, const char *ifname,
                                 struct iso_overlay_member_link *out, struct iso_error *err);

/* Moves interface `name` of namespace `from` (NULL: the caller's) into
 * namespace `to` (NULL: the caller's) as `newname`, up there, with
 * `address` ("A.B.C.D/N", NULL or "": none): a VF's netdev into a pod and
 * back (docs/cni.md, "InfiniBand"). -ENODEV (ISO_E_NOT_FOUND) when `from`
 * has no `name`. */
int iso_overlay_link_move(const char *from, const char *name, const char *to, const char *newname,
                          const char *address, struct iso_error *err);

/* The member's address, "10.A.B.C" (without the /8). */
int iso_overlay_address(unsigned node_index, unsigned slot, char out[ISO_IPV4_MAX],
                        struct iso_error *err);
/* The host-side veth's name for a member: "isov" and 8 hex digits. */
void iso_overlay_veth_name(const char *name, char out[ISO_OVERLAY_IFNAME]);
int iso_overlay_member_ensure(const char *netns, const struct iso_overlay_member *m,
                              struct iso_error *err);
/* Deletes the member's veth (its peer goes with it); 0 when gone. */
int iso_overlay_member_remove(const char *netns, const char *name, struct iso_error *err);
/* eth0's IPv4 address in a member's namespace, read from the kernel
 * ("" when eth0 has none; -ENODEV when there is no eth0). */
int iso_overlay_member_address(const char *member_netns, char out[ISO_IPV4_MAX],
                               struct iso_error *err);

/* The interface holding IPv4 address ip in netns (the node's underlay
 * device, found from its underlay address); -ENODEV when none holds it. */
int iso_overlay_underlay_dev(const char *netns, const char *ip, char out[ISO_OVERLAY_IFNAME],
                             struct iso_error *err);

/* What the kernel holds, read back (never copied from a spec). */
struct iso_overlay_member_state {
	char ifname[ISO_OVERLAY_IFNAME]; /* isov... on the host */
	char name[ISO_NAME_MAX];         /* its alias: the sandbox's name */
	bool up;
};
struct iso_overlay_tenant_state {
	uint32_t vni; /* from the VXLAN device, not from its name */
	char bridge[ISO_OVERLAY_IFNAME], vxlan[ISO_OVERLAY_IFNAME];
	char local_ip[ISO_IPV4_MAX];
	unsigned port;
	bool learning, up, vxlan_present;
	size_t n_peers; /* all-zeros FDB entries, sorted */
	char (*peers)[ISO_IPV4_MAX];
	size_t n_members;
	struct iso_overlay_member_state *members;
};
struct iso_overlay_state {
	size_t n_tenants; /* sorted by vni */
	struct iso_overlay_tenant_state *tenants;
};
int iso_overlay_read(const char *netns, struct iso_overlay_state *out, struct iso_error *err);
void iso_overlay_state_clear(struct iso_overlay_state *st);

/* The nft guard: table inet isostack, set `allowed` of (ipv4 saddr . vni),
 * chain vxlan_guard (hook input, priority -100): VXLAN arriving on
 * underlay_dev whose (saddr . VNI) is in the set is accepted, every other
 * VXLAN packet on it is counted (named counter `drops`) and dropped. Applied
 * in one transaction; nothing is written when the kernel already holds
 * exactly this guard, and the counter survives a change of the set. */
struct iso_overlay_allow {
	char peer[ISO_IPV4_MAX];
	uint32_t vni;
};
int iso_overlay_guard_apply(const char *netns, const char *underlay_dev,
                            const struct iso_overlay_allow *allow, size_t n, struct iso_error *err);
struct iso_overlay_guard_state {
	bool present; /* the table, its set, chain and both rules */
	char underlay_dev[ISO_OVERLAY_IFNAME];
	size_t n_allowed; /* sorted by (peer, vni) */
	struct iso_overlay_allow *allowed;
	uint64_t drops;
};
int iso_overlay_guard_read(const char *netns, struct iso_overlay_guard_state *out,
                           struct iso_error *err);
void iso_overlay_guard_state_clear(struct iso_overlay_guard_state *st);
/* Deletes the table; 0 when absent. */
int iso_overlay_guard_remove(const char *netns, struct iso_error *err);

/* RoCE: the NIC's RDMA engine bypasses netfilter, so a RoCE member's guard
 * is its VF's VLAN and spoof check, set on the PF by netlink
 * (IFLA_VF_VLAN, IFLA_VF_SPOOFCHK in IFLA_VFINFO_LIST) and read back. */
struct iso_overlay_vf {
	unsigned vf;   /* the VF's index on the PF */
	unsigned vlan; /* 1 .. 4094 */
	unsigned qos;  /* 0 .. 7 */
	bool spoofchk;
};
int iso_overlay_vf_set(const char *netns, const char *pf, const struct iso_overlay_vf *want,
                       struct iso_error *err);
/* -ENOENT when the PF reports no such VF. */
int iso_overlay_vf_read(const char *netns, const char *pf, unsigned vf, struct iso_overlay_vf *out,
                        struct iso_error *err);

/* ---- end overlay ---- */

/* ---- RDMA (src/sandbox/rdma.c; docs/sandbox.md "RDMA") ---- */

/* The host's RDMA network-namespace mode (`rdma system`, rdma-system(8)):
 * shared, every RDMA device is seen from every net namespace; exclusive, a
 * device belongs to one namespace and only that one may use it; none, the
 * kernel has no RDMA subsystem (no NETLINK_RDMA). */
enum iso_rdma_netns_mode {
	ISO_RDMA_NETNS_NONE,
	ISO_RDMA_NETNS_SHARED,
	ISO_RDMA_NETNS_EXCLUSIVE,
};
#define ISO_RDMA_NAME_MAX 64 /* IB_DEVICE_NAME_MAX */

const char *iso_rdma_netns_mode_name(enum iso_rdma_netns_mode m); /* "none", ... */
/* RDMA_NLDEV_CMD_SYS_GET. No RDMA subsystem is 0 with ISO_RDMA_NETNS_NONE. */
int iso_rdma_netns_mode_read(enum iso_rdma_netns_mode *out, struct iso_error *err);
/* Whether RDMA device `name` is visible from the net namespace at path
 * `netns` (NULL: the caller's): in exclusive mode, whether it is there.
 * 1 (with *index when not NULL), 0 when not, or -errno. */
int iso_rdma_dev_find(const char *netns, const char *name, uint32_t *index, struct iso_error *err);
/* Moves RDMA device `name` from the namespace at path `from` into the one
 * at path `to` (NULL: the caller's own), by RDMA_NLDEV_CMD_SET with
 * RDMA_NLDEV_NET_NS_FD, and reads it back. Level-triggered: a device
 * already in `to` is left alone (0). -ENODEV when it is in neither. */
int iso_rdma_dev_move(const char *from, const char *name, const char *to, struct iso_error *err);
/* In exclusive mode, moves every RDMA device the namespace `from` holds
 * into `to` (a member's namespace given back to the host before it goes);
 * in shared or no mode, nothing (0). *moved: how many moved. */
int iso_rdma_dev_move_all(const char *from, const char *to, unsigned *moved, struct iso_error *err);

/* ---- end RDMA ---- */

ISO_PUBLIC_END

#endif

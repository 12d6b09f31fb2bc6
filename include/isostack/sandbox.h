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

struct iso_cgroup_limits {
	const char *cpus; /* cpuset list "0-3,8"; NULL: v1 copies the parent's, v2 leaves it */
	const char *mems; /* likewise for memory nodes */
	int64_t memory_max; /* bytes; 0: no limit */
	int64_t pids_max;   /* 0: no limit */
	/* filter_devices: deny every device but the n_devices rules (v1 only;
	 * v2 needs a BPF program and is refused with -EOPNOTSUPP for now). */
	bool filter_devices;
	const struct iso_cgroup_device *devices;
	size_t n_devices;
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

ISO_PUBLIC_END

#endif

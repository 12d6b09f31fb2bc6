/* seccomp.c: the sandbox's seccomp filter (issue 14, docs/sandbox.md
 * "seccomp"). Why a deny-list and not Docker's allow-list: an HPC job runs
 * arbitrary binaries (MPI, CUDA, verbs, debuggers) whose syscall needs we do
 * not know, and Docker's allow-list is known to break them (mbind and
 * friends, io_uring, mlock in its history). So every call is allowed except
 * the kernel-administration calls a tenant never needs on a shared node; a
 * blocked call answers EPERM and never kills, so a program sees an ordinary
 * permission error and may fall back. Built on libseccomp, which compiles
 * the rules to BPF for every ABI of the machine. */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>

#include "isostack/sandbox.h"

/* Kept allowed on purpose (a default-allow filter needs no rule for them;
 * listed here so that nobody adds them to the deny-list below):
 * - ioctl: the verbs ABI (/dev/infiniband/uverbs*) and CUDA (/dev/nvidia*)
 *   are ioctls, so ioctl stays unfiltered, as in Docker's profile;
 * - mbind, set_mempolicy, get_mempolicy: MPI and hwloc/numactl NUMA binding.
 *   Docker's default gates them on CAP_SYS_NICE and so breaks NUMA binding;
 * - process_vm_readv, process_vm_writev: MPI's cross-memory attach (CMA)
 *   between ranks of one job; the kernel checks ptrace access to the target,
 *   and with the sandbox's pid namespace no outsider can be named;
 * - mlock, mlock2, munlock, mlockall: RDMA memory registration pins pages
 *   (RLIMIT_MEMLOCK, set by the cgroup part, still bounds it);
 * - io_uring: allowed only by the tenant's switch (allow_io_uring). */

/* The kernel-administration calls no tenant makes on a shared node. */
static const int deny_always[] = {
    /* loading code into the kernel */
    SCMP_SYS(init_module),
    SCMP_SYS(finit_module),
    SCMP_SYS(delete_module),
    SCMP_SYS(kexec_load),
    SCMP_SYS(kexec_file_load),
    SCMP_SYS(bpf),
    /* the machine itself */
    SCMP_SYS(reboot),
    SCMP_SYS(swapon),
    SCMP_SYS(swapoff),
    /* mounts, old API and new (the new one reaches the same code) */
    SCMP_SYS(mount),
    SCMP_SYS(umount),
    SCMP_SYS(umount2),
    SCMP_SYS(pivot_root),
    SCMP_SYS(fsopen),
    SCMP_SYS(fsconfig),
    SCMP_SYS(fsmount),
    SCMP_SYS(fspick),
    SCMP_SYS(move_mount),
    SCMP_SYS(open_tree),
    SCMP_SYS(mount_setattr),
    /* leaving or entering namespaces: the sandbox's are fixed by the agent
     * (clone with namespace flags is denied below, clone3 too) */
    SCMP_SYS(unshare),
    SCMP_SYS(setns),
    /* performance counters see other tenants' code on shared cores */
    SCMP_SYS(perf_event_open),
    /* the kernel keyring is not namespaced: keys are per uid, host-wide */
    SCMP_SYS(keyctl),
    SCMP_SYS(add_key),
    SCMP_SYS(request_key),
};

static const int deny_io_uring[] = {
    SCMP_SYS(io_uring_setup),
    SCMP_SYS(io_uring_enter),
    SCMP_SYS(io_uring_register),
};

/* clone's namespace flags: clone(CLONE_NEWUSER|...) would do what unshare
 * does. CLONE_NEWTIME is left out: in clone's flags that bit is part of the
 * exit signal (it is only valid in clone3 and unshare, both denied). */
static const uint64_t clone_ns_flags[] = {
    CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
};

/* The other ABIs a process of this machine can call the kernel through (the
 * 32-bit and x32 syscall tables of x86-64, AArch32 on arm64): a filter on
 * the native table alone would leave int 0x80 open. */
static const uint32_t compat_arches[] = {
#if defined(__x86_64__)
    SCMP_ARCH_X86,
    SCMP_ARCH_X32,
#elif defined(__aarch64__)
    SCMP_ARCH_ARM,
#endif
    0,
};

static void release_ctx(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

static int deny_list(scmp_filter_ctx ctx, const int *calls, size_t n, struct iso_error *err)
{
	for (size_t i = 0; i < n; i++) {
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), calls[i], 0);
		if (rc < 0) {
			char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, calls[i]);
			iso_error_set(err, ISO_E_INTERNAL, "seccomp", "seccomp_rule_add(%s): %d",
			              name ? name : "?", rc);
			free(name);
			return rc;
		}
	}
	return 0;
}

int iso_sandbox_seccomp_load(const struct iso_seccomp_policy *p, struct iso_error *err)
{
	static const struct iso_seccomp_policy strictest = {0};
	if (!p)
		p = &strictest;

	_cleanup_(release_ctx) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return iso_error_set(err, ISO_E_INTERNAL, "seccomp", "seccomp_init failed");

	/* no_new_privs before the filter: libseccomp's default, set explicitly
	 * so that no change of default can drop it. It lets a process without
	 * CAP_SYS_ADMIN load the filter and keeps a setuid binary from gaining
	 * privilege under it. A process of a foreign architecture (not one of
	 * the ABIs added below) gets EPERM on every call rather than a kill. */
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
	if (rc < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "seccomp", "seccomp_attr_set: %d", rc);

	for (size_t i = 0; compat_arches[i]; i++) {
		rc = seccomp_arch_add(ctx, compat_arches[i]);
		if (rc < 0 && rc != -EEXIST)
			return iso_error_set(err, ISO_E_INTERNAL, "seccomp",
			                     "seccomp_arch_add(0x%x): %d", compat_arches[i], rc);
	}

	rc = deny_list(ctx, deny_always, ISO_ARRAY_SIZE(deny_always), err);
	if (rc < 0)
		return rc;
	if (!p->allow_io_uring) {
		rc = deny_list(ctx, deny_io_uring, ISO_ARRAY_SIZE(deny_io_uring), err);
		if (rc < 0)
			return rc;
	}
	/* ptrace: a filter cannot tell whether the target pid is inside the
	 * sandbox. With the sandbox's own pid namespace the kernel can: no pid
	 * outside it can be named, so the caller may allow ptrace (debuggers,
	 * MPI tools). Without one, ptrace is denied outright: a same-uid
	 * process of the host would otherwise be reachable. */
	if (!p->allow_ptrace) {
		static const int ptrace_call[] = {SCMP_SYS(ptrace)};
		rc = deny_list(ctx, ptrace_call, 1, err);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < ISO_ARRAY_SIZE(clone_ns_flags); i++) {
		rc = seccomp_rule_add(
		    ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, clone_ns_flags[i], clone_ns_flags[i]));
		if (rc < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "seccomp",
			                     "seccomp_rule_add(clone): %d", rc);
	}
	/* clone3 passes its flags in memory, out of a filter's sight: ENOSYS
	 * (as Docker does) makes glibc fall back to clone, which is filtered. */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (rc < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "seccomp", "seccomp_rule_add(clone3): %d",
		                     rc);

	rc = seccomp_load(ctx);
	if (rc < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "seccomp", "seccomp_load: %d", rc);
	return 0;
}

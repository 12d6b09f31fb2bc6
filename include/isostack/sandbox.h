/* sandbox.h: the job sandbox (issue 14), the kernel layer around every
 * allocation member: cgroups, namespaces and a seccomp filter. Library code
 * of isostack-client, so that the node agent and the Slurm/CNI plugins share
 * one implementation (docs/sandbox.md). */
#ifndef ISOSTACK_SANDBOX_H
#define ISOSTACK_SANDBOX_H

#include <stdbool.h>

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

ISO_PUBLIC_END

#endif

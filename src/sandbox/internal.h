/* internal.h: what the sandbox's own files share and nobody else: the
 * holder's plan (ns.c builds the namespaces from it, sandbox.c fills it), the
 * /proc/PID/stat reader that identifies a holder, and the identity step
 * (creds.c) that iso_sandbox_enter runs after the namespaces. */
#ifndef ISOSTACK_SANDBOX_INTERNAL_H
#define ISOSTACK_SANDBOX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

/* A device node's host path and its path in the sandbox's /dev. */
#define SB_PATH_MAX 256
/* The always-present nodes (null, zero, full, random, urandom, tty) and the
 * member's own. */
#define SB_BASE_NODES 6
#define SB_NODES_MAX  (SB_BASE_NODES + ISO_SANDBOX_DEVICES_MAX)

struct sb_node {
	char host[SB_PATH_MAX];
	char target[SB_PATH_MAX];
};

/* Everything the holder needs, prepared by the caller before the clone: the
 * holder runs in a child of a possibly multithreaded process and may only
 * make system calls (no malloc, no stdio, no formatting). */
struct sb_plan {
	char hostname[ISO_NAME_MAX];
	bool new_netns;
	size_t n_nodes;
	struct sb_node nodes[SB_NODES_MAX];
};

/* The holder's process name (prctl PR_SET_NAME, /proc/PID/comm). */
#define SB_HOLDER_COMM "iso-holder"

/* Starts the holder for plan in the new namespaces, attached to cgroup
 * `name` before it mounts anything, and returns when its mounts are in
 * place (*pid: as this process sees it, a child of it). On failure the
 * holder is killed and reaped, and *err names the step that failed. */
int sb_holder_spawn(const struct iso_cgroup *cg, const char *name, const struct sb_plan *plan,
                    int *pid, struct iso_error *err);

/* Reads /proc/PID/stat: the state letter and the start time (field 22).
 * -ENOENT when no such process. */
int sb_proc_stat(int pid, char *state, unsigned long long *start);

/* The identity step of iso_sandbox_enter: bounding set emptied (every cap
 * up to /proc/sys/kernel/cap_last_cap), supplementary groups cleared,
 * gid/uid set when id->set, ambient, inheritable, permitted and effective
 * capabilities cleared, no_new_privs. Irreversible. */
int sb_creds_drop(const struct iso_sandbox_identity *id, struct iso_error *err);

#endif

/* cgroup_bpf.h: private to src/sandbox/: the cgroup v2 device filter
 * (cgroup_bpf.c), called by cgroup.c's v2 path. */
#ifndef ISOSTACK_SANDBOX_CGROUP_BPF_H
#define ISOSTACK_SANDBOX_CGROUP_BPF_H

#include <stddef.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

/* The name the filter is loaded under, which tells our program apart from
 * others attached to the same group. */
#define CG_BPF_PROG_NAME "iso_devices"

/* Brings the device filter of the cgroup2 directory `dir` to the allow-list
 * devs[0..n): keeps an attached filter with the same instructions (the same
 * tag), otherwise attaches the new one and then detaches the old. Fails with
 * -EOPNOTSUPP (unavailable) when dir is not on a cgroup2 mount; the
 * verifier's log ends the message when the kernel refuses the program.
 * Errors name the field "devices". */
int cg_bpf_devices_apply(const char *dir, const struct iso_cgroup_device *devs, size_t n,
                         struct iso_error *err);

#endif

/* creds.c: who a process becomes when it joins a sandbox (issue 14,
 * docs/sandbox.md "Launching"): the job's uid and gid with no supplementary
 * groups, and no capability it could ever regain: the bounding set emptied
 * (so that an exec of a root-owned or file-capable binary gains nothing),
 * ambient and inheritable sets cleared, permitted and effective cleared, and
 * no_new_privs (so that a setuid binary gains nothing either). A separate
 * file because the order matters and is easy to get wrong: the bounding set
 * must be dropped while CAP_SETPCAP is still held, before setuid. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* The highest capability the running kernel knows. */
static int cap_last_cap(struct iso_error *err)
{
	char buf[16];
	_cleanup_close_ int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "capabilities",
		                     "open /proc/sys/kernel/cap_last_cap: %s", strerror(errno));
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return iso_error_set(err, ISO_E_INTERNAL, "capabilities",
		                     "read /proc/sys/kernel/cap_last_cap failed");
	buf[n] = '\0';
	char *end;
	long v = strtol(buf, &end, 10);
	if (end == buf || v < 0 || v > 255)
		return iso_error_set(err, ISO_E_INTERNAL, "capabilities",
		                     "bad /proc/sys/kernel/cap_last_cap: %s", buf);
	return (int)v;
}

int sb_creds_drop(const struct iso_sandbox_identity *id, struct iso_error *err)
{
	if (id && id->set && id->uid == 0)
		return iso_error_set(err, ISO_E_INVALID, "uid",
		                     "a sandboxed job never runs as uid 0");
	int last = cap_last_cap(err);
	if (last < 0)
		return last;
	/* The bounding set first: dropping needs CAP_SETPCAP, which setuid
	 * to a non-root uid takes away. */
	for (int c = 0; c <= last; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return iso_error_set(err, ISO_E_INTERNAL, "capabilities",
			                     "PR_CAPBSET_DROP %d: %s", c, strerror(errno));
	/* No supplementary group, also for a caller that keeps its uid and
	 * gid: groups are privileges too (disk, video, docker). */
	if (setgroups(0, NULL) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "gid", "setgroups: %s", strerror(errno));
	if (id && id->set) {
		if (setresgid(id->gid, id->gid, id->gid) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "gid", "setgid %u: %s", id->gid,
			                     strerror(errno));
		if (setresuid(id->uid, id->uid, id->uid) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "uid", "setuid %u: %s", id->uid,
			                     strerror(errno));
		uid_t r, e, s;
		if (getresuid(&r, &e, &s) < 0 || r != id->uid || e != id->uid || s != id->uid)
			return iso_error_set(err, ISO_E_INTERNAL, "uid", "uid %u did not stick",
			                     id->uid);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return iso_error_set(err, ISO_E_INTERNAL, "capabilities",
		                     "PR_CAP_AMBIENT_CLEAR_ALL: %s", strerror(errno));
	/* Also for a caller that kept uid 0: no capability from here on, and
	 * none after exec (an empty bounding and inheritable set). */
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "capabilities", "capset: %s",
		                     strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "no_new_privs", "PR_SET_NO_NEW_PRIVS: %s",
		                     strerror(errno));
	return 0;
}

/* exec.c: `isostack-agent exec` (issue 14, docs/cli.md), the launchers'
 * way into a member's sandbox: ask the running agent's socket for the
 * member's sandbox, then run the command in it (iso_sandbox_run) and give
 * back its exit status. Run as root on the member's node. Exit codes: the
 * command's own, 126 when it was found but could not run, 127 when it was
 * not found, 128+N when signal N killed it, and 125 when isostack-agent
 * itself refused or failed (a bad flag, the agent's refusal, a sandbox that
 * could not be entered), with the reason on stderr, so a launcher can tell
 * "the job failed" from "the job never ran". */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/agent.h"

#define EXIT_REFUSED 125

static const char exec_usage[] =
    "usage: isostack-agent exec --state-dir DIR --allocation A --member M\n"
    "                           [--uid U --gid G] -- CMD [ARG...]\n"
    "Runs CMD in the sandbox of member M of allocation A, as uid U and gid G\n"
    "(default: the caller's, root only). Exit status: CMD's, 126 when it could\n"
    "not run, 127 when not found, 125 when refused (the reason on stderr).\n"
    "See docs/cli.md.\n";

static int fail(const char *fmt, ...) _printf_(1, 2);
static int fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "isostack-agent exec: %s\n", msg);
	return EXIT_REFUSED;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoul(s, &end, 10);
	if (errno || *end || *out > max)
		return -EINVAL;
	return 0;
}

int iso_agent_exec_main(int argc, char **argv)
{
	const char *state_dir = NULL, *alloc = NULL, *member_s = NULL, *uid_s = NULL, *gid_s = NULL;
	struct iso_sandbox_identity id = {0};
	struct iso_agent_sandbox_handle h;
	struct iso_seccomp_policy pol = {0};
	struct iso_error err = {0};
	struct iso_cgroup cg;
	unsigned long member, v;
	int i, status = 0;

	for (i = 1; i < argc; i++) {
		const char **slot = NULL;

		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--help") == 0) {
			fputs(exec_usage, stdout);
			return 0;
		}
		if (strcmp(argv[i], "--state-dir") == 0)
			slot = &state_dir;
		else if (strcmp(argv[i], "--allocation") == 0)
			slot = &alloc;
		else if (strcmp(argv[i], "--member") == 0)
			slot = &member_s;
		else if (strcmp(argv[i], "--uid") == 0)
			slot = &uid_s;
		else if (strcmp(argv[i], "--gid") == 0)
			slot = &gid_s;
		if (!slot)
			return fail("unknown option '%s'", argv[i]);
		if (*slot)
			return fail("%s given twice", argv[i]);
		if (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0)
			return fail("option '%s' needs a value", argv[i]);
		*slot = argv[++i];
	}
	if (!state_dir || !*state_dir)
		return fail("--state-dir is required");
	if (!alloc)
		return fail("--allocation is required");
	if (!member_s)
		return fail("--member is required");
	if (parse_uint(member_s, 1023, &member) < 0)
		return fail("--member: expected 0..1023, got \"%s\"", member_s);
	if (!uid_s != !gid_s)
		return fail("--uid and --gid go together");
	if (uid_s) {
		if (parse_uint(uid_s, 4294967294UL, &v) < 0 || v == 0)
			return fail("--uid: expected a uid 1..4294967294, got \"%s\"", uid_s);
		id.uid = (unsigned)v;
		if (parse_uint(gid_s, 4294967294UL, &v) < 0)
			return fail("--gid: expected a gid 0..4294967294, got \"%s\"", gid_s);
		id.gid = (unsigned)v;
		id.set = true;
	}
	if (i >= argc || i + 1 >= argc)
		return fail("no command: put it after --");
	if (iso_agent_sandbox_lookup(state_dir, alloc, (unsigned)member, &h, &err) < 0)
		return fail("%s", err.message);
	if (iso_cgroup_open(h.cgroup_root, &cg, &err) < 0)
		return fail("%s", err.message);
	pol.allow_io_uring = h.io_uring;
	if (iso_sandbox_run(&cg, &h.sb, &id, &pol, argv + i + 1, &status, &err) < 0)
		return fail("cannot enter the sandbox: %s", err.message);
	return status;
}

/* sandbox.c: one sandbox per allocation member (issue 14, docs/sandbox.md
 * "Namespaces" and "Launching"), put together from the module's parts: the
 * cgroup (cgroup.c), the holder and its namespaces (ns.c), the identity
 * (creds.c) and the seccomp filter (seccomp.c). Create checks all input
 * before it makes anything and leaves nothing when a later step fails;
 * check and destroy work from what the agent keeps on disk (name, holder pid
 * and start time), so they are level-triggered and idempotent across agent
 * restarts. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

/* How long destroy waits for the cgroup to empty once the holder is dead. */
#define DESTROY_WAIT_MS 5000
/* How long a process left in the cgroup may take to exit by itself first. */
#define DESTROY_GRACE_MS 200

/* Always in the sandbox's /dev (and allowed by its cgroup): the nodes every
 * program expects. */
static const char *const base_nodes[SB_BASE_NODES] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
};
/* Their cgroup rules, plus /dev/ptmx (5:2) and the devpts nodes (136-143:*),
 * which the sandbox's own devpts instance serves. */
static const struct iso_cgroup_device base_rules[] = {
    {'c', 1, 3, "rw"},    {'c', 1, 5, "rw"},    {'c', 1, 7, "rw"},    {'c', 1, 8, "rw"},
    {'c', 1, 9, "rw"},    {'c', 5, 0, "rw"},    {'c', 5, 2, "rw"},    {'c', 136, -1, "rw"},
    {'c', 137, -1, "rw"}, {'c', 138, -1, "rw"}, {'c', 139, -1, "rw"}, {'c', 140, -1, "rw"},
    {'c', 141, -1, "rw"}, {'c', 142, -1, "rw"}, {'c', 143, -1, "rw"},
};
#define N_BASE_RULES ISO_ARRAY_SIZE(base_rules)

/* Where a member's device node appears inside: a path under /dev/ at the
 * same path, any other at /dev + path (a test's mknod copy in a temp dir). */
static int node_target(const char *host, char *buf, size_t size)
{
	int n = strncmp(host, "/dev/", 5) == 0 ? snprintf(buf, size, "%s", host)
	                                       : snprintf(buf, size, "/dev%s", host);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The holder's own entries of /dev: a member's node may not land on or
 * under one of them. */
static bool target_reserved(const char *t)
{
	static const char *const own[] = {"/dev/pts",   "/dev/shm",    "/dev/fd",    "/dev/ptmx",
	                                  "/dev/stdin", "/dev/stdout", "/dev/stderr"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(own); i++) {
		size_t n = strlen(own[i]);
		if (strncmp(t, own[i], n) == 0 && (t[n] == '\0' || t[n] == '/'))
			return true;
	}
	return false;
}

static bool path_clean(const char *p)
{
	if (p[0] != '/')
		return false;
	for (const char *s = p; *s; s++) {
		if (s[0] == '/' && s[1] == '.' && (s[2] == '/' || s[2] == '\0'))
			return false;
		if (s[0] == '/' && s[1] == '.' && s[2] == '.' && (s[3] == '/' || s[3] == '\0'))
			return false;
		if (s[0] == '/' && s[1] == '/')
			return false;
	}
	return p[strlen(p) - 1] != '/';
}

/* Checks the spec and fills the holder's plan and the cgroup's device rules
 * (*n_rules of them). Nothing is made. */
static int build_plan(const struct iso_sandbox_spec *spec, struct sb_plan *plan,
                      struct iso_cgroup_device *rules, size_t *n_rules, struct iso_error *err)
{
	if (!spec->name || !iso_name_valid(spec->name))
		return iso_error_set(err, ISO_E_INVALID, "name",
		                     "sandbox name must match [a-z0-9][a-z0-9._-]{0,62}");
	if (spec->n_device_paths > ISO_SANDBOX_DEVICES_MAX)
		return iso_error_set(err, ISO_E_INVALID, "device_paths", "at most %d device paths",
		                     ISO_SANDBOX_DEVICES_MAX);
	if (spec->n_device_paths > 0 && !spec->device_paths)
		return iso_error_set(err, ISO_E_INVALID, "device_paths", "device_paths missing");
	iso_strlcpy(plan->hostname, spec->name, sizeof(plan->hostname));
	plan->new_netns = spec->new_netns;

	memcpy(rules, base_rules, sizeof(base_rules));
	*n_rules = N_BASE_RULES;
	for (size_t i = 0; i < SB_BASE_NODES; i++) {
		iso_strlcpy(plan->nodes[i].host, base_nodes[i], SB_PATH_MAX);
		iso_strlcpy(plan->nodes[i].target, base_nodes[i], SB_PATH_MAX);
	}
	plan->n_nodes = SB_BASE_NODES;

	for (size_t i = 0; i < spec->n_device_paths; i++) {
		char field[32];
		const char *p = spec->device_paths[i];
		struct stat st;
		struct sb_node *nd = &plan->nodes[plan->n_nodes];

		snprintf(field, sizeof(field), "device_paths[%zu]", i);
		if (!p || !path_clean(p))
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "not a clean absolute path: %s", p ? p : "(null)");
		if (iso_strlcpy(nd->host, p, SB_PATH_MAX) < 0 ||
		    node_target(p, nd->target, SB_PATH_MAX) < 0)
			return iso_error_set(err, ISO_E_INVALID, field, "path too long: %s", p);
		if (target_reserved(nd->target))
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s would cover the sandbox's own %s", p, nd->target);
		if (stat(p, &st) < 0) {
			int e = errno;
			iso_error_set(err, e == ENOENT ? ISO_E_NOT_FOUND : ISO_E_INVALID, field,
			              "%s: %s", p, strerror(e));
			return -e;
		}
		if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
			return iso_error_set(err, ISO_E_INVALID, field, "not a device node: %s", p);
		rules[*n_rules] = (struct iso_cgroup_device){
		    .type = S_ISCHR(st.st_mode) ? 'c' : 'b',
		    .major = (long)major(st.st_rdev),
		    .minor = (long)minor(st.st_rdev),
		    .access = "rw",
		};
		(*n_rules)++;
		/* one bind mount per target: a base node or a repeated path is
		 * already there */
		bool dup = false;
		for (size_t k = 0; k < plan->n_nodes; k++)
			dup = dup || strcmp(plan->nodes[k].target, nd->target) == 0;
		if (!dup)
			plan->n_nodes++;
	}
	return 0;
}

int iso_sandbox_check(const struct iso_sandbox *sb, struct iso_error *err)
{
	char state;
	unsigned long long start;

	if (!sb || sb->holder_pid <= 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "holder_pid", "no holder");
	int r = sb_proc_stat(sb->holder_pid, &state, &start);
	if (r < 0 || state == 'Z' || state == 'X' || start != sb->holder_start) {
		iso_error_set(err, ISO_E_NOT_FOUND, "holder_pid",
		              "the holder of sandbox %s (pid %d) is gone", sb->name,
		              sb->holder_pid);
		return -ESRCH;
	}
	return 0;
}

/* SIGKILLs every process listed in the group's cgroup.procs (any hierarchy:
 * on v1 each lists the same processes, a hierarchy may be missing).
 * Returns how many it found. */
static int kill_group(const struct iso_cgroup *cg, const char *name)
{
	static const char *const ctrls[] = {"pids", "memory", "cpuset", "devices"};
	int found = 0;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(ctrls); i++) {
		char path[PATH_MAX];
		if (cg->version == ISO_CGROUP_V2)
			snprintf(path, sizeof(path), "%s/%s/cgroup.procs", cg->root, name);
		else
			snprintf(path, sizeof(path), "%s/%s/%s/cgroup.procs", cg->root, ctrls[i],
			         name);
		_cleanup_fclose_ FILE *f = fopen(path, "re");
		if (!f)
			continue;
		for (int pid; fscanf(f, "%d", &pid) == 1;) {
			if (pid > 0 && pid != getpid()) {
				kill(pid, SIGKILL);
				found++;
			}
		}
		if (cg->version == ISO_CGROUP_V2)
			break;
	}
	return found;
}

int iso_sandbox_destroy(const struct iso_cgroup *cg, const struct iso_sandbox *sb,
                        struct iso_error *err)
{
	if (!sb || !iso_name_valid(sb->name))
		return iso_error_set(err, ISO_E_INVALID, "name", "bad sandbox name");
	/* The holder first, and only when it is the holder (a reused pid is
	 * someone else): its pid namespace dies with it, every process in it
	 * killed by the kernel. */
	char state;
	unsigned long long start;
	if (sb->holder_pid > 0 && sb_proc_stat(sb->holder_pid, &state, &start) == 0 &&
	    start == sb->holder_start) {
		if (state != 'Z' && state != 'X')
			kill(sb->holder_pid, SIGKILL);
		/* ours to reap when this process made it (also a holder that
		 * died on its own); ECHILD otherwise */
		waitpid(sb->holder_pid, NULL, 0);
	}
	/* Then whatever joined the cgroup from outside the pid namespace (a
	 * launcher's middle process), until the group is empty. A middle
	 * process whose job just died gets a grace period to report its
	 * status (128+9) before it is killed too. */
	uint64_t start_ns = iso_mono_ns();
	uint64_t grace = start_ns + (uint64_t)DESTROY_GRACE_MS * 1000000u;
	uint64_t deadline = start_ns + (uint64_t)DESTROY_WAIT_MS * 1000000u;
	for (;;) {
		struct iso_error e2 = {0};
		int r = iso_cgroup_destroy(cg, sb->name, &e2);
		if (r == 0)
			return 0;
		if (r != -EBUSY) {
			if (err)
				*err = e2;
			return r;
		}
		if (iso_mono_ns() > deadline)
			return iso_error_set(err, ISO_E_CONFLICT, "name",
			                     "cgroup %s still holds processes after %d ms",
			                     sb->name, DESTROY_WAIT_MS);
		if (iso_mono_ns() > grace)
			kill_group(cg, sb->name);
		if (sb->holder_pid > 0)
			waitpid(sb->holder_pid, NULL, WNOHANG);
		usleep(2000);
	}
}

int iso_sandbox_create(const struct iso_cgroup *cg, const struct iso_sandbox_spec *spec,
                       struct iso_sandbox *out, struct iso_error *err)
{
	struct iso_cgroup_device rules[N_BASE_RULES + ISO_SANDBOX_DEVICES_MAX];
	size_t n_rules = 0;
	int r;

	memset(out, 0, sizeof(*out));
	if (!spec)
		return iso_error_set(err, ISO_E_INVALID, "spec", "no spec");
	_cleanup_free_ struct sb_plan *plan = calloc(1, sizeof(*plan));
	if (!plan)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if ((r = build_plan(spec, plan, rules, &n_rules, err)) < 0)
		return r;

	struct iso_cgroup_limits lim = spec->limits;
	lim.filter_devices = true;
	lim.devices = rules;
	lim.n_devices = n_rules;
	bool existed = iso_cgroup_exists(cg, spec->name);
	if ((r = iso_cgroup_create(cg, spec->name, &lim, err)) < 0)
		return r;

	int pid = -1;
	char state;
	unsigned long long start = 0;
	r = sb_holder_spawn(cg, spec->name, plan, &pid, err);
	if (r == 0 && (r = sb_proc_stat(pid, &state, &start)) < 0) {
		iso_error_set(err, ISO_E_INTERNAL, "holder", "reading the holder's start time: %s",
		              strerror(-r));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (r < 0) {
		/* no partial state: the holder is reaped by now; the group goes
		 * unless it was there before */
		if (!existed)
			iso_cgroup_destroy(cg, spec->name, NULL);
		return r;
	}
	iso_strlcpy(out->name, spec->name, sizeof(out->name));
	out->holder_pid = pid;
	out->holder_start = start;
	return 0;
}

int iso_sandbox_enter(const struct iso_cgroup *cg, const struct iso_sandbox *sb,
                      const struct iso_sandbox_identity *id,
                      const struct iso_seccomp_policy *policy, struct iso_error *err)
{
	/* mnt last: it moves our root and cwd, and after it /proc is the
	 * sandbox's, where the holder is pid 1. */
	static const struct {
		const char *name;
		int type;
	} nss[] = {
	    {"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS}, {"net", CLONE_NEWNET},
	    {"pid", CLONE_NEWPID}, {"mnt", CLONE_NEWNS},
	};
	int fds[ISO_ARRAY_SIZE(nss)];
	char cwd[PATH_MAX];
	int r = 0;

	if (!sb || !iso_name_valid(sb->name))
		return iso_error_set(err, ISO_E_INVALID, "name", "bad sandbox name");
	if (id && id->set && id->uid == 0)
		return iso_error_set(err, ISO_E_INVALID, "uid",
		                     "a sandboxed job never runs as uid 0");
	for (size_t i = 0; i < ISO_ARRAY_SIZE(nss); i++)
		fds[i] = -1;
	/* Open the namespaces, then check that the pid is still the holder:
	 * had it died and the pid been reused before the opens, the start
	 * time differs; the descriptors we hold are then the holder's. */
	for (size_t i = 0; i < ISO_ARRAY_SIZE(nss) && r == 0; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", sb->holder_pid, nss[i].name);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0)
			r = -ESRCH;
	}
	if (r == 0)
		r = iso_sandbox_check(sb, err);
	else
		iso_error_set(err, ISO_E_NOT_FOUND, "holder_pid",
		              "the holder of sandbox %s (pid %d) is gone", sb->name,
		              sb->holder_pid);
	if (r == 0 && !getcwd(cwd, sizeof(cwd)))
		iso_strlcpy(cwd, "/", sizeof(cwd));
	if (r == 0)
		r = iso_cgroup_attach(cg, sb->name, getpid(), err);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(nss) && r == 0; i++) {
		if (setns(fds[i], nss[i].type) < 0) {
			char field[32];
			r = -errno;
			snprintf(field, sizeof(field), "namespace.%s", nss[i].name);
			iso_error_set(err, ISO_E_INTERNAL, field, "setns %s of pid %d: %s",
			              nss[i].name, sb->holder_pid, strerror(-r));
		}
	}
	for (size_t i = 0; i < ISO_ARRAY_SIZE(nss); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (r < 0)
		return r;
	/* The caller's directory when the sandbox sees it too (the host's
	 * filesystem is visible but for /tmp, /dev/shm, /dev and /proc). */
	if (chdir(cwd) < 0 && chdir("/") < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "cwd", "chdir /: %s", strerror(errno));
	if ((r = sb_creds_drop(id, err)) < 0)
		return r;
	return iso_sandbox_seccomp_load(policy, err);
}

/* What the middle process tells the caller. */
struct run_result {
	int rc;     /* 0, or the -errno of iso_sandbox_enter */
	int status; /* the job's, when rc is 0 */
	struct iso_error err;
};

static void write_result(int fd, const struct run_result *res)
{
	ssize_t w = write(fd, res, sizeof(*res));
	(void)w;
}

static ssize_t read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)got;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* The middle process: enters, forks the job (the first process in the pid
 * namespace from here), reports its status. Never returns. */
static void run_middle(const struct iso_cgroup *cg, const struct iso_sandbox *sb,
                       const struct iso_sandbox_identity *id,
                       const struct iso_seccomp_policy *policy, char *const argv[], int res_fd)
{
	struct run_result res;
	memset(&res, 0, sizeof(res));
	res.rc = iso_sandbox_enter(cg, sb, id, policy, &res.err);
	if (res.rc < 0) {
		write_result(res_fd, &res);
		_exit(1);
	}
	/* The job gets default signal handling, whatever the caller blocked
	 * or ignored (a daemon blocks SIGTERM, ignores SIGPIPE). */
	sigset_t none;
	sigemptyset(&none);
	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa;
		if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) {
			sa.sa_handler = SIG_DFL;
			sigaction(s, &sa, NULL);
		}
	}

	int ex[2];
	if (pipe2(ex, O_CLOEXEC) < 0) {
		res.rc =
		    iso_error_set(&res.err, ISO_E_INTERNAL, "argv", "pipe: %s", strerror(errno));
		write_result(res_fd, &res);
		_exit(1);
	}
	pid_t job = fork();
	if (job < 0) {
		res.rc = iso_error_set(&res.err, ISO_E_INTERNAL, "argv", "fork in the sandbox: %s",
		                       strerror(errno));
		write_result(res_fd, &res);
		_exit(1);
	}
	if (job == 0) {
		close(ex[0]);
		close(res_fd);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[0], argv);
		int e = errno;
		ssize_t w = write(ex[1], &e, sizeof(e));
		(void)w;
		_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
	}
	close(ex[1]);
	int exec_errno = 0;
	ssize_t n = read_full(ex[0], &exec_errno, sizeof(exec_errno));
	close(ex[0]);
	int st = 0;
	while (waitpid(job, &st, 0) < 0 && errno == EINTR)
		;
	if (n == (ssize_t)sizeof(exec_errno))
		res.status = exec_errno == ENOENT || exec_errno == ENOTDIR ? 127 : 126;
	else if (WIFEXITED(st))
		res.status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		res.status = 128 + WTERMSIG(st);
	else
		res.status = 126;
	write_result(res_fd, &res);
	_exit(0);
}

int iso_sandbox_run(const struct iso_cgroup *cg, const struct iso_sandbox *sb,
                    const struct iso_sandbox_identity *id, const struct iso_seccomp_policy *policy,
                    char *const argv[], int *status, struct iso_error *err)
{
	int fds[2];

	if (!argv || !argv[0] || argv[0][0] == '\0')
		return iso_error_set(err, ISO_E_INVALID, "argv", "no command");
	if (!status)
		return iso_error_set(err, ISO_E_INVALID, "status", "no status to fill");
	if (!sb || !iso_name_valid(sb->name))
		return iso_error_set(err, ISO_E_INVALID, "name", "bad sandbox name");
	if (pipe2(fds, O_CLOEXEC) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "pipe: %s", strerror(errno));
	pid_t mid = fork();
	if (mid < 0) {
		int e = errno;
		close(fds[0]);
		close(fds[1]);
		iso_error_set(err, ISO_E_INTERNAL, "", "fork: %s", strerror(e));
		return -e;
	}
	if (mid == 0) {
		close(fds[0]);
		run_middle(cg, sb, id, policy, argv, fds[1]);
	}
	close(fds[1]);
	struct run_result res;
	memset(&res, 0, sizeof(res));
	ssize_t n = read_full(fds[0], &res, sizeof(res));
	close(fds[0]);
	int st = 0;
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(res))
		return iso_error_set(err, ISO_E_INTERNAL, "",
		                     "the launcher died (wait status 0x%x)", st);
	if (res.rc < 0) {
		if (err)
			*err = res.err;
		return res.rc;
	}
	*status = res.status;
	return 0;
}

/* ns.c: the sandbox's holder, the process that owns its namespaces (issue
 * 14, docs/sandbox.md "Namespaces"). Why a process and not bind-mounted
 * namespace files: a pid namespace lives exactly as long as its pid 1, so
 * the sandbox needs a pid 1 anyway, and making it the handle gives one thing
 * to find after an agent restart (pid + start time) and one thing to kill.
 *
 * The holder is cloned from a process that may run other threads (the node
 * agent), so between clone and its loop it only makes system calls: every
 * string it needs was prepared by the caller in a struct sb_plan. It is not
 * given PR_SET_PDEATHSIG on purpose: it must outlive an agent restart. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

#define HOLDER_STACK  ((size_t)256 * 1024)
#define READY_WAIT_MS 10000

/* The steps the holder reports a failure at (its message names one). */
enum step {
	ST_READY = 0,
	ST_GO,
	ST_PROPAGATION,
	ST_OPEN_NODE,
	ST_DEV,
	ST_NODE,
	ST_PTS,
	ST_SHM,
	ST_LINKS,
	ST_TMP,
	ST_PROC,
	ST_HOSTNAME,
	ST_LO,
	ST_SIGNALS,
};
static const char *const step_name[] = {
    [ST_READY] = "ready",
    [ST_GO] = "waiting for its cgroup",
    [ST_PROPAGATION] = "mount propagation (MS_SLAVE|MS_REC on /)",
    [ST_OPEN_NODE] = "opening a device node",
    [ST_DEV] = "tmpfs on /dev",
    [ST_NODE] = "bind mount of a device node",
    [ST_PTS] = "devpts on /dev/pts",
    [ST_SHM] = "tmpfs on /dev/shm",
    [ST_LINKS] = "/dev symlinks",
    [ST_TMP] = "tmpfs on /tmp",
    [ST_PROC] = "proc on /proc",
    [ST_HOSTNAME] = "sethostname",
    [ST_LO] = "loopback up",
    [ST_SIGNALS] = "signal mask",
};

struct report {
	int step;
	int err;  /* errno */
	int node; /* the node index, for ST_OPEN_NODE and ST_NODE */
};

struct holder_args {
	const struct sb_plan *plan;
	int go_fd;     /* read end: the caller writes once the holder sits in its cgroup */
	int report_fd; /* write end: one struct report */
};

/* ---- the holder: system calls only from here to holder_main's end ---- */

static void report_exit(int fd, int step, int node)
{
	struct report r = {.step = step, .err = errno, .node = node};
	ssize_t w = write(fd, &r, sizeof(r));
	(void)w;
	_exit(1);
}

/* "/proc/self/fd/N" into buf (36 bytes). */
static void fd_path(int fd, char *buf)
{
	static const char prefix[] = "/proc/self/fd/";
	char digits[12];
	int n = 0;
	do {
		digits[n++] = (char)('0' + fd % 10);
		fd /= 10;
	} while (fd > 0);
	memcpy(buf, prefix, sizeof(prefix) - 1);
	size_t k = sizeof(prefix) - 1;
	while (n > 0)
		buf[k++] = digits[--n];
	buf[k] = '\0';
}

/* mkdir -p of the directories above path (its last component excluded). */
static int mkdir_parents(const char *path)
{
	char buf[SB_PATH_MAX];
	size_t len = strlen(path);
	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, path, len + 1);
	for (size_t i = 1; i < len; i++) {
		if (buf[i] != '/')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		buf[i] = '/';
	}
	return 0;
}

/* The loopback of the new net namespace, up (an empty namespace has lo
 * down). */
static int loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	int r = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP;
		r = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	int e = errno;
	close(s);
	errno = e;
	return r;
}

static int holder_main(void *p)
{
	const struct holder_args *a = p;
	const struct sb_plan *plan = a->plan;
	int rep = a->report_fd;
	char c;

	/* Wait until the caller has put us in the cgroup, so that everything
	 * the sandbox ever runs is counted there. */
	if (read(a->go_fd, &c, 1) != 1)
		report_exit(rep, ST_GO, -1);
	/* Hold none of the caller's descriptors (its sockets, its database):
	 * only the report pipe, until ready. */
	if (rep > 3)
		close_range(3, (unsigned)rep - 1, 0);
	close_range((unsigned)rep + 1, ~0u, 0);
	if (chdir("/") < 0)
		report_exit(rep, ST_PROPAGATION, -1);

	/* Nothing mounted in here propagates to the host; the host's later
	 * mounts still reach in. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		report_exit(rep, ST_PROPAGATION, -1);

	/* The nodes are opened before /dev is covered by the tmpfs, then bind
	 * mounted from their descriptors. */
	int fds[SB_NODES_MAX];
	for (size_t i = 0; i < plan->n_nodes; i++) {
		fds[i] = open(plan->nodes[i].host, O_PATH | O_CLOEXEC);
		if (fds[i] < 0)
			report_exit(rep, ST_OPEN_NODE, (int)i);
	}
	if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m") < 0)
		report_exit(rep, ST_DEV, -1);
	for (size_t i = 0; i < plan->n_nodes; i++) {
		const char *t = plan->nodes[i].target;
		char src[40];
		int fd;
		fd_path(fds[i], src);
		if (mkdir_parents(t) < 0)
			report_exit(rep, ST_NODE, (int)i);
		fd = open(t, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			report_exit(rep, ST_NODE, (int)i);
		close(fd);
		if (mount(src, t, NULL, MS_BIND, NULL) < 0)
			report_exit(rep, ST_NODE, (int)i);
		close(fds[i]);
	}
	if (mkdir("/dev/pts", 0755) < 0 ||
	    mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	          "newinstance,ptmxmode=0666,mode=0620,gid=5") < 0)
		report_exit(rep, ST_PTS, -1);
	if (mkdir("/dev/shm", 01777) < 0 ||
	    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
		report_exit(rep, ST_SHM, -1);
	if (symlink("pts/ptmx", "/dev/ptmx") < 0 || symlink("/proc/self/fd", "/dev/fd") < 0 ||
	    symlink("/proc/self/fd/0", "/dev/stdin") < 0 ||
	    symlink("/proc/self/fd/1", "/dev/stdout") < 0 ||
	    symlink("/proc/self/fd/2", "/dev/stderr") < 0)
		report_exit(rep, ST_LINKS, -1);
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
		report_exit(rep, ST_TMP, -1);
	/* The pid namespace's own /proc: a process inside sees its sandbox's
	 * processes only. */
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		report_exit(rep, ST_PROC, -1);
	if (sethostname(plan->hostname, strlen(plan->hostname)) < 0)
		report_exit(rep, ST_HOSTNAME, -1);
	if (plan->new_netns && loopback_up() < 0)
		report_exit(rep, ST_LO, -1);
	prctl(PR_SET_NAME, SB_HOLDER_COMM, 0, 0, 0);

	/* The caller's handlers are not ours: every signal to its default.
	 * SIGTERM and SIGCHLD are taken by sigwaitinfo below. */
	sigset_t wait_set;
	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIGCHLD);
	sigaddset(&wait_set, SIGTERM);
	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sigaction(s, &sa, NULL); /* fails harmlessly for SIGKILL/SIGSTOP and RT gaps */
	}
	if (sigprocmask(SIG_SETMASK, &wait_set, NULL) < 0)
		report_exit(rep, ST_SIGNALS, -1);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}

	struct report ready = {.step = ST_READY, .err = 0, .node = -1};
	if (write(rep, &ready, sizeof(ready)) != (ssize_t)sizeof(ready))
		_exit(1);
	close(rep);

	/* An init: reap whatever is reparented to us. SIGTERM ends the
	 * sandbox only from outside it (si_pid 0: the sender's pid is not in
	 * this namespace), so that a job cannot stop its own holder. */
	for (;;) {
		siginfo_t si;
		int s = sigwaitinfo(&wait_set, &si);
		if (s == SIGCHLD) {
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		} else if (s == SIGTERM && si.si_pid == 0) {
			_exit(0);
		}
	}
}

/* ---- the caller's side ---- */

int sb_proc_stat(int pid, char *state, unsigned long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	buf[n] = '\0';
	/* pid (comm) state ...: comm may hold spaces and parentheses, so the
	 * fields start after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EINVAL;
	p += 2;
	*state = *p;
	/* state is field 3; starttime field 22 */
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
		p++;
	}
	char *end;
	errno = 0;
	*start = strtoull(p, &end, 10);
	if (errno || end == p)
		return -EINVAL;
	return 0;
}

static void unmap_stack(void **stack)
{
	if (*stack && *stack != MAP_FAILED)
		munmap(*stack, HOLDER_STACK);
}

static void close_now(int *fd)
{
	close(*fd);
	*fd = -1;
}

static void kill_and_reap(int pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int sb_holder_spawn(const struct iso_cgroup *cg, const char *name, const struct sb_plan *plan,
                    int *pid_out, struct iso_error *err)
{
	int go[2] = {-1, -1}, rep[2] = {-1, -1};
	_cleanup_close_ int go_r = -1, go_w = -1, rep_r = -1, rep_w = -1;
	_cleanup_(unmap_stack) void *stack = NULL;

	if (pipe2(go, O_CLOEXEC) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "holder", "pipe: %s", strerror(errno));
	go_r = go[0];
	go_w = go[1];
	if (pipe2(rep, O_CLOEXEC) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "holder", "pipe: %s", strerror(errno));
	rep_r = rep[0];
	rep_w = rep[1];
	stack = mmap(NULL, HOLDER_STACK, PROT_READ | PROT_WRITE,
	             MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return iso_error_set(err, ISO_E_INTERNAL, "holder", "mmap: %s", strerror(errno));

	struct holder_args args = {.plan = plan, .go_fd = go_r, .report_fd = rep_w};
	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD;
	if (plan->new_netns)
		flags |= CLONE_NEWNET;
	int pid = clone(holder_main, (char *)stack + HOLDER_STACK, flags, &args);
	if (pid < 0) {
		int e = errno;
		iso_error_set(err, e == EPERM ? ISO_E_FORBIDDEN : ISO_E_INTERNAL, "holder",
		              "clone of the holder: %s", strerror(e));
		return -e;
	}
	close_now(&go_r); /* the holder's ends */
	close_now(&rep_w);

	int r = iso_cgroup_attach(cg, name, pid, err);
	if (r < 0) {
		kill_and_reap(pid);
		return r;
	}
	if (write(go_w, "g", 1) != 1) {
		int e = errno;
		kill_and_reap(pid);
		iso_error_set(err, ISO_E_INTERNAL, "holder", "starting the holder: %s",
		              strerror(e));
		return -e;
	}

	struct report got = {0};
	ssize_t n = -1;
	struct pollfd pfd = {.fd = rep_r, .events = POLLIN};
	int pr;
	while ((pr = poll(&pfd, 1, READY_WAIT_MS)) < 0 && errno == EINTR)
		;
	if (pr > 0)
		while ((n = read(rep_r, &got, sizeof(got))) < 0 && errno == EINTR)
			;
	if (n == (ssize_t)sizeof(got) && got.step == ST_READY) {
		*pid_out = pid;
		return 0;
	}
	kill_and_reap(pid);
	if (pr == 0)
		return iso_error_set(err, ISO_E_INTERNAL, "holder",
		                     "the holder was not ready within %d ms", READY_WAIT_MS);
	if (n != (ssize_t)sizeof(got) || got.step < 0 || got.step >= (int)ISO_ARRAY_SIZE(step_name))
		return iso_error_set(err, ISO_E_INTERNAL, "holder",
		                     "the holder exited before it was ready");
	int e = got.err > 0 ? got.err : EIO;
	if (got.node >= 0 && (size_t)got.node < plan->n_nodes)
		iso_error_set(err, ISO_E_INTERNAL, "holder", "holder: %s %s: %s",
		              step_name[got.step], plan->nodes[got.node].host, strerror(e));
	else
		iso_error_set(err, ISO_E_INTERNAL, "holder", "holder: %s: %s", step_name[got.step],
		              strerror(e));
	return -e;
}

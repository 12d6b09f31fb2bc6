/* test_sandbox_real.c: the sandbox (src/sandbox/sandbox.c, ns.c, creds.c) on
 * the real kernel with real processes, as root: two sandboxes do not see
 * each other's processes, /tmp or /dev/shm; /dev holds only the allowed
 * nodes and the cgroup denies the others by their host path; no_new_privs
 * stops a setuid-root binary; blocked syscalls answer EPERM while ioctl,
 * mbind and process_vm_readv work; iso_sandbox_run's statuses (127, 126,
 * the exit code, 128+signal); the identity (uid, groups, no capabilities);
 * destroy leaves nothing and create works again; check sees a dead holder;
 * a bad device path leaves nothing. Each test counts this run's cgroups,
 * its holder processes and the host's mounts before and after.
 *
 * The jobs are this binary itself, run with --probe WHAT (see probe()),
 * so that every check inside the sandbox is plain C. Needs the v1 devices
 * controller (this machine); skips saying why elsewhere. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

#define CG_ROOT "/sys/fs/cgroup"

static char self_exe[4096];

/* ---- probes: run inside a sandbox as `self --probe WHAT ARGS...` ----
 * Each exits 0 on success and a small distinct code otherwise; _exit
 * because LeakSanitizer's exit check would need ptrace. */

/* Only pid 1 (the holder) and ourselves in /proc. */
static int probe_pids(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 10;
	int n = 0, others = 0;
	for (struct dirent *de; (de = readdir(d));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name)
			continue;
		n++;
		if (pid != 1 && pid != getpid())
			others++;
	}
	closedir(d);
	return n == 2 && others == 0 && getpid() != 1 ? 0 : 11;
}

static int probe_write_files(const char *tag)
{
	char p[128];
	const char *dirs[] = {"/tmp", "/dev/shm"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s/iso-sb-%s", dirs[i], tag);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			return 20 + (int)i;
		close(fd);
	}
	return 0;
}

/* 0 when both files exist, 1 when neither does, 2 otherwise */
static int probe_files(const char *tag)
{
	char p[128];
	int seen = 0;
	const char *dirs[] = {"/tmp", "/dev/shm"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s/iso-sb-%s", dirs[i], tag);
		seen += access(p, F_OK) == 0;
	}
	return seen == 2 ? 0 : seen == 0 ? 1 : 2;
}

static int probe_hostname(const char *want)
{
	struct utsname u;
	return uname(&u) == 0 && strcmp(u.nodename, want) == 0 ? 0 : 30;
}

/* open(path, O_WRONLY): 0, or the errno (ENOENT 2, EPERM 1, ...). */
static int probe_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* Every device node under dir (recursively, /dev/pts aside: the sandbox's
 * own devpts instance) is one of allowed[]; counts them in *n. */
static int walk_dev(const char *dir, char **allowed, int n_allowed, int *n)
{
	DIR *d = opendir(dir);
	if (!d)
		return 40;
	int bad = 0;
	for (struct dirent *de; (de = readdir(d)) && !bad;) {
		char p[512];
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st) < 0) {
			bad = 41;
		} else if (S_ISDIR(st.st_mode)) {
			if (strcmp(p, "/dev/pts") != 0)
				bad = walk_dev(p, allowed, n_allowed, n);
		} else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
			bool ok = false;
			for (int i = 0; i < n_allowed; i++)
				ok = ok || strcmp(allowed[i], p) == 0;
			if (!ok) {
				fprintf(stderr, "unexpected node %s\n", p);
				bad = 42;
			}
			(*n)++;
		}
	}
	closedir(d);
	return bad;
}

static int probe_dev(char **allowed, int n_allowed)
{
	int n = 0;
	int r = walk_dev("/dev", allowed, n_allowed, &n);
	if (r)
		return r;
	return n == n_allowed ? 0 : 43;
}

static int probe_euid(void)
{
	return geteuid() == 0 ? 0 : 3;
}

/* The identity after enter: uid/gid as given, no groups, no capability in
 * any set, no_new_privs. */
static int probe_creds(unsigned uid, unsigned gid)
{
	if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid)
		return 50;
	if (getgroups(0, NULL) != 0)
		return 51;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return 52;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return 53;
	char line[256];
	int caps = 0, bad = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Cap", 3) != 0)
			continue;
		caps++;
		char *v = strchr(line, ':');
		if (!v || strtoull(v + 1, NULL, 16) != 0)
			bad++;
	}
	fclose(f);
	return caps == 5 && bad == 0 ? 0 : 54; /* CapInh, CapPrm, CapEff, CapBnd, CapAmb */
}

/* Each blocked call answers EPERM; ioctl, mbind and process_vm_readv work. */
static int probe_syscalls(void)
{
	if (mount("none", "/mnt", "tmpfs", 0, NULL) == 0 || errno != EPERM)
		return 60;
	if (unshare(CLONE_NEWNS) == 0 || errno != EPERM)
		return 61;
	if (syscall(SYS_bpf, 0, NULL, 0) == 0 || errno != EPERM)
		return 62;
	int p[2];
	if (pipe(p) < 0)
		return 63;
	int avail = -1;
	if (ioctl(p[0], FIONREAD, &avail) < 0 || avail != 0)
		return 64;
	size_t len = 4096;
	void *m = aligned_alloc(4096, len);
	if (!m)
		return 65;
	unsigned long nodes = 1;
	if (syscall(SYS_mbind, m, len, MPOL_PREFERRED, &nodes, 2, 0) < 0)
		return 66;
	free(m);
	char src[16] = "sandboxed", dst[16] = "";
	struct iovec lo = {dst, sizeof(dst)}, ro = {src, sizeof(src)};
	if (syscall(SYS_process_vm_readv, getpid(), &lo, 1, &ro, 1, 0) != (long)sizeof(src) ||
	    strcmp(dst, "sandboxed") != 0)
		return 67;
	return 0;
}

static int probe(int argc, char **argv)
{
	const char *w = argv[2];
	if (!strcmp(w, "pids"))
		return probe_pids();
	if (!strcmp(w, "write-files") && argc == 4)
		return probe_write_files(argv[3]);
	if (!strcmp(w, "files") && argc == 4)
		return probe_files(argv[3]);
	if (!strcmp(w, "hostname") && argc == 4)
		return probe_hostname(argv[3]);
	if (!strcmp(w, "open") && argc == 4)
		return probe_open(argv[3]);
	if (!strcmp(w, "dev"))
		return probe_dev(argv + 3, argc - 3);
	if (!strcmp(w, "euid"))
		return probe_euid();
	if (!strcmp(w, "creds") && argc == 5)
		return probe_creds((unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]));
	if (!strcmp(w, "syscalls"))
		return probe_syscalls();
	return 99;
}

/* ---- the fixture: this run's groups, holders and the host's mounts ---- */

struct fixture {
	struct iso_cgroup cg;
	char prefix[32]; /* isotest-PID-: this run's groups */
	int groups, holders, mounts;
	struct iso_sandbox sb[2];
	char tmpdir[64]; /* not under /tmp: the sandbox has its own */
	/* this binary, copied into tmpdir: the probes run from the copy, since
	 * a build tree under /tmp (a CI clone) is hidden by the sandbox's own */
	char probe[96];
};

static const char *hierarchies[] = {"cpuset", "memory", "pids", "devices"};

static int count_groups(const struct fixture *f)
{
	int n = 0;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(hierarchies); i++) {
		char dir[256];
		snprintf(dir, sizeof(dir), "%s/%s", f->cg.root, hierarchies[i]);
		DIR *d = opendir(dir);
		if (!d)
			continue;
		for (struct dirent *de; (de = readdir(d));)
			if (strncmp(de->d_name, f->prefix, strlen(f->prefix)) == 0)
				n++;
		closedir(d);
	}
	return n;
}

/* Live holders that are children of this process. */
static int count_holders(void)
{
	DIR *d = opendir("/proc");
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *de; (de = readdir(d));) {
		char path[300], buf[1024];
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		FILE *s = fopen(path, "re");
		if (!s)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, s);
		fclose(s);
		buf[len] = '\0';
		char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
		if (!open_paren || !close_paren)
			continue;
		char state;
		int ppid;
		if (sscanf(close_paren + 2, "%c %d", &state, &ppid) != 2)
			continue;
		*close_paren = '\0';
		if (!strcmp(open_paren + 1, "iso-holder") && state != 'Z' && ppid == getpid())
			n++;
	}
	closedir(d);
	return n;
}

static int count_mounts(void)
{
	FILE *m = fopen("/proc/self/mountinfo", "re");
	int n = 0;
	if (!m)
		return -1;
	for (int c; (c = fgetc(m)) != EOF;)
		n += c == '\n';
	fclose(m);
	return n;
}

static void rm_tree(const char *dir);

/* Copies an executable (0755); -1 with errno on failure. */
static int copy_executable(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n = 0;
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);

	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			n = -1;
	if (in >= 0)
		close(in);
	if (out < 0 || close(out) < 0 || n < 0)
		return -1;
	return 0;
}

static int setup(void **state)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: test_sandbox_real needs root (CI runs as root)\n");
		return 0;
	}
	struct fixture *f = calloc(1, sizeof(*f));
	struct iso_error err = {0};
	snprintf(f->prefix, sizeof(f->prefix), "isotest-%d-", (int)getpid());
	if (iso_cgroup_open(CG_ROOT, &f->cg, &err) < 0 || f->cg.version != ISO_CGROUP_V1 ||
	    !(f->cg.controllers & ISO_CGROUP_DEVICES)) {
		fprintf(stderr,
		        "SKIP: the sandbox filters devices, and only cgroup v1's devices "
		        "controller is supported here; none at %s\n",
		        CG_ROOT);
		free(f);
		return 0;
	}
	snprintf(f->tmpdir, sizeof(f->tmpdir), "/var/tmp/iso-sb-XXXXXX");
	if (!mkdtemp(f->tmpdir) || chmod(f->tmpdir, 0755) < 0) {
		free(f);
		return -1;
	}
	snprintf(f->probe, sizeof(f->probe), "%s/probe", f->tmpdir);
	if (copy_executable(self_exe, f->probe) < 0) {
		fprintf(stderr, "cannot copy %s to %s: %s\n", self_exe, f->probe, strerror(errno));
		rm_tree(f->tmpdir);
		free(f);
		return -1;
	}
	f->groups = count_groups(f);
	f->holders = count_holders();
	f->mounts = count_mounts();
	*state = f;
	return 0;
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	for (struct dirent *de; (de = readdir(d));) {
		char p[512];
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	if (!f)
		return 0;
	for (size_t i = 0; i < 2; i++)
		if (f->sb[i].name[0])
			iso_sandbox_destroy(&f->cg, &f->sb[i], NULL);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	int groups = count_groups(f), holders = count_holders(), mounts = count_mounts();
	rm_tree(f->tmpdir);
	bool same = groups == f->groups && holders == f->holders && mounts == f->mounts;
	if (!same)
		fprintf(stderr, "left behind: groups %d -> %d, holders %d -> %d, mounts %d -> %d\n",
		        f->groups, groups, f->holders, holders, f->mounts, mounts);
	free(f);
	return same ? 0 : -1;
}

#define SKIP_UNLESS_READY(f)                                                                       \
	do {                                                                                       \
		if (!(f))                                                                          \
			skip();                                                                    \
		assert_int_equal((f)->groups, 0);                                                  \
	} while (0)

static void make(struct fixture *f, int i, const char *suffix, const char *const *devs,
                 size_t n_devs)
{
	char name[ISO_NAME_MAX];
	struct iso_error err = {0};
	snprintf(name, sizeof(name), "%s%s", f->prefix, suffix);
	struct iso_sandbox_spec spec = {
	    .name = name, .device_paths = devs, .n_device_paths = n_devs, .new_netns = true};
	int r = iso_sandbox_create(&f->cg, &spec, &f->sb[i], &err);
	if (r < 0)
		fail_msg("create %s: %d %s: %s", name, r, err.field, err.message);
}

/* Runs `self --probe ...` in sandbox i (NULL-terminated args after what),
 * as id (NULL: root without capabilities); returns its status. */
static int run_probe(struct fixture *f, int i, const struct iso_sandbox_identity *id, ...)
{
	char *argv[32] = {f->probe, "--probe"};
	int n = 2;
	va_list ap;
	va_start(ap, id);
	for (char *a; n < 31 && (a = va_arg(ap, char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	/* allow_ptrace: the job is in the sandbox's pid namespace, and an ASan
	 * build's leak check ptraces */
	struct iso_seccomp_policy pol = {.allow_ptrace = true};
	struct iso_error err = {0};
	int status = -1;
	int r = iso_sandbox_run(&f->cg, &f->sb[i], id, &pol, argv, &status, &err);
	if (r < 0)
		fail_msg("run %s: %d %s: %s", argv[2], r, err.field, err.message);
	return status;
}

static void test_two_sandboxes_are_apart(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	make(f, 0, "a", NULL, 0);
	make(f, 1, "b", NULL, 0);

	/* b's job leaves files in its /tmp and /dev/shm; b sees them, a and
	 * the host do not */
	char tag[32], host_tmp[64], host_shm[64];
	snprintf(tag, sizeof(tag), "b-%d", (int)getpid());
	snprintf(host_tmp, sizeof(host_tmp), "/tmp/iso-sb-%s", tag);
	snprintf(host_shm, sizeof(host_shm), "/dev/shm/iso-sb-%s", tag);
	assert_int_equal(run_probe(f, 1, NULL, "write-files", tag, NULL), 0);
	assert_int_equal(run_probe(f, 1, NULL, "files", tag, NULL), 0);
	assert_int_equal(run_probe(f, 0, NULL, "files", tag, NULL), 1);
	bool leaked = access(host_tmp, F_OK) == 0 || access(host_shm, F_OK) == 0;
	unlink(host_tmp);
	unlink(host_shm);
	assert_false(leaked);
	/* processes: a job sees its holder and itself, not b's holder nor the
	 * host's processes */
	assert_int_equal(run_probe(f, 0, NULL, "pids", NULL), 0);
	assert_int_equal(run_probe(f, 1, NULL, "pids", NULL), 0);
	/* uts: the sandbox's name */
	assert_int_equal(run_probe(f, 0, NULL, "hostname", f->sb[0].name, NULL), 0);
	/* both holders alive and checked */
	assert_int_equal(iso_sandbox_check(&f->sb[0], NULL), 0);
	assert_int_equal(iso_sandbox_check(&f->sb[1], NULL), 0);
	assert_int_equal(count_holders(), f->holders + 2);
}

static void mknod_copy(const char *dir, const char *name, unsigned maj, unsigned min, char *out,
                       size_t size)
{
	snprintf(out, size, "%s/%s", dir, name);
	assert_int_equal(mknod(out, S_IFCHR | 0666, makedev(maj, min)), 0);
}

static void test_dev_holds_only_allowed_nodes(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	/* /dev/null (1:3) and /dev/zero (1:5) are in every sandbox, so the
	 * member's own node is a copy of /dev/kmsg (1:11), which opens
	 * write-only without any capability. */
	char kmsg[128], inside[160];
	mknod_copy(f->tmpdir, "kmsg", 1, 11, kmsg, sizeof(kmsg));
	snprintf(inside, sizeof(inside), "/dev%s", kmsg);
	const char *devs[] = {kmsg};
	make(f, 0, "a", devs, 1);
	make(f, 1, "b", NULL, 0);

	/* a: its node at /dev/<host path>, and by host path too */
	assert_int_equal(run_probe(f, 0, NULL, "open", inside, NULL), 0);
	assert_int_equal(run_probe(f, 0, NULL, "open", kmsg, NULL), 0);
	assert_int_equal(run_probe(f, 0, NULL, "open", "/dev/null", NULL), 0);
	/* b: absent from /dev, and the cgroup denies it by host path */
	assert_int_equal(run_probe(f, 1, NULL, "open", inside, NULL), ENOENT);
	assert_int_equal(run_probe(f, 1, NULL, "open", kmsg, NULL), EPERM);
	assert_int_equal(run_probe(f, 1, NULL, "open", "/dev/null", NULL), 0);
	/* the host's other nodes are not there at all */
	assert_int_equal(run_probe(f, 1, NULL, "open", "/dev/kmsg", NULL), ENOENT);
	/* /dev holds exactly the allowed nodes */
	assert_int_equal(run_probe(f, 0, NULL, "dev", "/dev/null", "/dev/zero", "/dev/full",
	                           "/dev/random", "/dev/urandom", "/dev/tty", inside, NULL),
	                 0);
	assert_int_equal(run_probe(f, 1, NULL, "dev", "/dev/null", "/dev/zero", "/dev/full",
	                           "/dev/random", "/dev/urandom", "/dev/tty", NULL),
	                 0);
	unlink(kmsg);
}

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	assert_true(in >= 0 && out >= 0);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	assert_int_equal(n, 0);
	close(in);
	close(out);
}

static void test_no_new_privs_stops_setuid(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char suid[128];
	snprintf(suid, sizeof(suid), "%s/euid", f->tmpdir);
	copy_file(self_exe, suid);
	assert_int_equal(chown(suid, 0, 0), 0);
	assert_int_equal(chmod(suid, 04755), 0);

	/* bare, as uid 65534: the setuid bit works */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(254);
		execl(suid, suid, "--probe", "euid", (char *)NULL);
		_exit(127);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	/* in the sandbox as uid 65534: it does not */
	make(f, 0, "a", NULL, 0);
	struct iso_sandbox_identity nobody = {.set = true, .uid = 65534, .gid = 65534};
	char *argv[] = {suid, "--probe", "euid", NULL};
	struct iso_seccomp_policy pol = {.allow_ptrace = true};
	struct iso_error err = {0};
	int status = -1;
	assert_int_equal(iso_sandbox_run(&f->cg, &f->sb[0], &nobody, &pol, argv, &status, &err), 0);
	assert_int_equal(status, 3);
	unlink(suid);
}

static void test_identity(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	make(f, 0, "a", NULL, 0);
	struct iso_sandbox_identity nobody = {.set = true, .uid = 65534, .gid = 65534};
	assert_int_equal(run_probe(f, 0, &nobody, "creds", "65534", "65534", NULL), 0);
	/* without an identity: root's uid, but no capability either */
	assert_int_equal(run_probe(f, 0, NULL, "creds", "0", "0", NULL), 0);
	/* a caller with supplementary groups and inheritable capabilities
	 * (which a root exec would turn into permitted ones) passes neither
	 * on */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		gid_t groups[] = {0, 4, 27, 100};
		struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
		struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
		if (setgroups(4, groups) < 0 || syscall(SYS_capget, &hdr, data) < 0)
			_exit(90);
		for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
			data[i].inheritable = data[i].permitted;
		if (syscall(SYS_capset, &hdr, data) < 0)
			_exit(91);
		int a = run_probe(f, 0, &nobody, "creds", "65534", "65534", NULL);
		int b = run_probe(f, 0, NULL, "creds", "0", "0", NULL);
		_exit((a != 0) + 2 * (b != 0));
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* uid 0 is refused, and nothing ran */
	struct iso_sandbox_identity root = {.set = true, .uid = 0, .gid = 0};
	char *argv[] = {"/bin/true", NULL};
	struct iso_error err = {0};
	int status = -1;
	assert_int_equal(iso_sandbox_run(&f->cg, &f->sb[0], &root, NULL, argv, &status, &err),
	                 -EINVAL);
	assert_string_equal(err.field, "uid");
	assert_int_equal(status, -1);
}

static void test_blocked_and_kept_syscalls(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	make(f, 0, "a", NULL, 0);
	struct iso_sandbox_identity nobody = {.set = true, .uid = 65534, .gid = 65534};
	assert_int_equal(run_probe(f, 0, NULL, "syscalls", NULL), 0);
	assert_int_equal(run_probe(f, 0, &nobody, "syscalls", NULL), 0);
}

static int run_cmd(struct fixture *f, char *const argv[])
{
	struct iso_error err = {0};
	int status = -1;
	int r = iso_sandbox_run(&f->cg, &f->sb[0], NULL, NULL, argv, &status, &err);
	if (r < 0)
		fail_msg("run %s: %s", argv[0], err.message);
	return status;
}

static void test_run_statuses(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	make(f, 0, "a", NULL, 0);
	char *missing[] = {"/nonexistent/iso-no-such-command", NULL};
	char *missing_path[] = {"iso-no-such-command-in-path", NULL};
	char *not_exec[] = {"/etc/passwd", NULL};
	char *exit7[] = {"/bin/sh", "-c", "exit 7", NULL};
	char *killed[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
	char *ok[] = {"true", NULL};
	assert_int_equal(run_cmd(f, missing), 127);
	assert_int_equal(run_cmd(f, missing_path), 127);
	assert_int_equal(run_cmd(f, not_exec), 126);
	assert_int_equal(run_cmd(f, exit7), 7);
	assert_int_equal(run_cmd(f, killed), 128 + SIGKILL);
	assert_int_equal(run_cmd(f, ok), 0);
}

static void test_destroy_leaves_nothing_and_create_again(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	struct iso_error err = {0};
	make(f, 0, "a", NULL, 0);
	assert_int_equal(count_groups(f), f->groups + 4);
	assert_int_equal(count_holders(), f->holders + 1);
	struct iso_sandbox old = f->sb[0];

	assert_int_equal(iso_sandbox_destroy(&f->cg, &f->sb[0], &err), 0);
	assert_int_equal(count_groups(f), f->groups);
	assert_int_equal(count_holders(), f->holders);
	assert_int_equal(count_mounts(), f->mounts);
	assert_int_equal(iso_sandbox_check(&old, NULL), -ESRCH);
	/* again: already gone */
	assert_int_equal(iso_sandbox_destroy(&f->cg, &f->sb[0], &err), 0);
	/* a job of a destroyed sandbox never runs, not even outside it */
	char *argv[] = {"/bin/true", NULL};
	int status = -1;
	assert_int_equal(iso_sandbox_run(&f->cg, &old, NULL, NULL, argv, &status, &err), -ESRCH);
	assert_int_equal(status, -1);

	/* the same name again */
	make(f, 0, "a", NULL, 0);
	assert_int_equal(run_probe(f, 0, NULL, "pids", NULL), 0);
	assert_int_equal(iso_sandbox_destroy(&f->cg, &f->sb[0], &err), 0);
	assert_int_equal(count_groups(f), f->groups);
}

static void test_destroy_kills_a_running_job(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	struct iso_error err = {0};
	make(f, 0, "a", NULL, 0);
	/* a child of ours runs a long job in the sandbox; once the job's
	 * middle process is in the cgroup, destroy must kill it and empty it */
	pid_t launcher = fork();
	assert_true(launcher >= 0);
	if (launcher == 0) {
		char *argv[] = {"/bin/sleep", "1000", NULL};
		int status = -1;
		int r = iso_sandbox_run(&f->cg, &f->sb[0], NULL, NULL, argv, &status, NULL);
		_exit(r == 0 ? status & 0xff : 200);
	}
	/* wait until sleep runs in the sandbox: the cgroup holds the holder,
	 * the middle process and the job */
	char procs[256];
	snprintf(procs, sizeof(procs), "%s/pids/%s/cgroup.procs", CG_ROOT, f->sb[0].name);
	for (int tries = 0;; tries++) {
		FILE *p = fopen(procs, "re");
		assert_non_null(p);
		int n = 0;
		for (int pid; fscanf(p, "%d", &pid) == 1;)
			n++;
		fclose(p);
		if (n >= 3)
			break;
		assert_true(tries < 5000);
		usleep(1000);
	}
	assert_int_equal(iso_sandbox_destroy(&f->cg, &f->sb[0], &err), 0);
	int st;
	assert_int_equal(waitpid(launcher, &st, 0), launcher);
	/* 137: the job was killed and its middle process reported it; 200:
	 * the middle process was still in the group after destroy's grace
	 * period (a loaded machine) and was killed too */
	assert_true(WIFEXITED(st));
	assert_true(WEXITSTATUS(st) == 128 + SIGKILL || WEXITSTATUS(st) == 200);
	assert_int_equal(count_groups(f), f->groups);
}

static void test_check_sees_dead_holder(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	struct iso_error err = {0};
	make(f, 0, "a", NULL, 0);
	assert_int_equal(iso_sandbox_check(&f->sb[0], &err), 0);
	/* another start time is another process */
	struct iso_sandbox other = f->sb[0];
	other.holder_start++;
	assert_int_equal(iso_sandbox_check(&other, &err), -ESRCH);
	/* SIGTERM from outside ends the holder (it is pid 1 of its
	 * namespace, which ignores signals it has no handler for) */
	assert_int_equal(kill(f->sb[0].holder_pid, SIGTERM), 0);
	/* a dead holder not yet reaped (a zombie) is dead */
	siginfo_t si;
	assert_int_equal(waitid(P_PID, (id_t)f->sb[0].holder_pid, &si, WEXITED | WNOWAIT), 0);
	assert_int_equal(iso_sandbox_check(&f->sb[0], &err), -ESRCH);
	int st;
	assert_int_equal(waitpid(f->sb[0].holder_pid, &st, 0), f->sb[0].holder_pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(iso_sandbox_check(&f->sb[0], &err), -ESRCH);
	/* destroy after the holder's death removes the group */
	assert_int_equal(iso_sandbox_destroy(&f->cg, &f->sb[0], &err), 0);
	assert_int_equal(count_groups(f), f->groups);
}

static void test_bad_device_leaves_nothing(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char name[ISO_NAME_MAX], missing[128], plain[128];
	struct iso_error err = {0};
	struct iso_sandbox sb;
	snprintf(name, sizeof(name), "%sa", f->prefix);
	snprintf(missing, sizeof(missing), "%s/no-such-node", f->tmpdir);
	snprintf(plain, sizeof(plain), "%s/plain", f->tmpdir);
	int fd = open(plain, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);

	const char *devs1[] = {"/dev/null", missing};
	struct iso_sandbox_spec spec = {.name = name, .device_paths = devs1, .n_device_paths = 2};
	assert_int_equal(iso_sandbox_create(&f->cg, &spec, &sb, &err), -ENOENT);
	assert_string_equal(err.field, "device_paths[1]");
	const char *devs2[] = {plain};
	spec.device_paths = devs2;
	spec.n_device_paths = 1;
	assert_int_equal(iso_sandbox_create(&f->cg, &spec, &sb, &err), -EINVAL);
	assert_string_equal(err.field, "device_paths[0]");
	const char *devs3[] = {"/dev/../dev/null"};
	spec.device_paths = devs3;
	assert_int_equal(iso_sandbox_create(&f->cg, &spec, &sb, &err), -EINVAL);
	/* a node where the sandbox has its own /dev entries */
	const char *devs4[] = {"/dev/pts/ptmx"};
	spec.device_paths = devs4;
	assert_int_equal(iso_sandbox_create(&f->cg, &spec, &sb, &err), -EINVAL);
	assert_string_equal(err.field, "device_paths[0]");
	spec.n_device_paths = 0;
	spec.name = "Bad/Name";
	assert_int_equal(iso_sandbox_create(&f->cg, &spec, &sb, &err), -EINVAL);
	assert_string_equal(err.field, "name");
	assert_int_equal(count_groups(f), f->groups);
	assert_int_equal(count_holders(), f->holders);
	assert_int_equal(count_mounts(), f->mounts);
}

/* A holder that dies before it is ready (here: OOM-killed in a group of
 * 8 KiB) leaves neither a group nor a process: the cgroup made for it is
 * removed again. */
static void test_failed_holder_leaves_nothing(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char name[ISO_NAME_MAX];
	struct iso_error err = {0};
	struct iso_sandbox sb;
	snprintf(name, sizeof(name), "%sa", f->prefix);
	struct iso_sandbox_spec spec = {.name = name, .limits = {.memory_max = 8192}};
	int r = iso_sandbox_create(&f->cg, &spec, &sb, &err);
	assert_true(r < 0);
	assert_string_equal(err.field, "holder");
	assert_int_equal(sb.holder_pid, 0);
	assert_false(iso_cgroup_exists(&f->cg, name));
	assert_int_equal(count_groups(f), f->groups);
	assert_int_equal(count_holders(), f->holders);
	assert_int_equal(count_mounts(), f->mounts);
	/* and the name works with a sane limit */
	make(f, 0, "a", NULL, 0);
	assert_int_equal(run_probe(f, 0, NULL, "pids", NULL), 0);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "--probe") == 0)
		_exit(probe(argc, argv));
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0)
		return 1;
	self_exe[n] = '\0';
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_two_sandboxes_are_apart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dev_holds_only_allowed_nodes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_new_privs_stops_setuid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_identity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_blocked_and_kept_syscalls, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_statuses, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_destroy_leaves_nothing_and_create_again, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_destroy_kills_a_running_job, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_check_sees_dead_holder, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_device_leaves_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failed_holder_leaves_nothing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_cgroup_real.c: the sandbox's cgroup module (src/sandbox/cgroup.c) on
 * the real kernel, with real processes: a memory hog is OOM-killed while its
 * neighbour in another group lives, a fork bomb stops at pids.max with
 * EAGAIN, a device list lets a process open an allowed mknod copy of a node
 * but not a denied one, and a cpuset confines the affinity. Runs as root on
 * cgroup v1 (/sys/fs/cgroup/{memory,pids,...}); on a pure v2 host the memory
 * and pids tests run there. The v2 device filter (a BPF program) needs no
 * controller, so its test runs on any cgroup2 mount (here the hybrid
 * /sys/fs/cgroup/unified). Skips, saying why, when not root or the
 * controllers are absent. Every test counts its groups before and after and kills every
 * process it started. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <cmocka.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

#define CG_ROOT "/sys/fs/cgroup"

struct fixture {
	struct iso_cgroup cg;
	char prefix[32]; /* isotest-PID-: this run's groups */
	int before;
};

static const char *hierarchies[] = {"cpuset", "memory", "pids", "devices", "rdma"};

/* This run's groups in every hierarchy (v1) or the unified tree (v2). */
static int count_groups(const struct fixture *f)
{
	int n = 0;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(hierarchies); i++) {
		char dir[256];
		if (f->cg.version == ISO_CGROUP_V2)
			snprintf(dir, sizeof(dir), "%s", f->cg.root);
		else
			snprintf(dir, sizeof(dir), "%s/%s", f->cg.root, hierarchies[i]);
		DIR *d = opendir(dir);
		if (!d)
			continue;
		for (struct dirent *de; (de = readdir(d));)
			if (strncmp(de->d_name, f->prefix, strlen(f->prefix)) == 0)
				n++;
		closedir(d);
		if (f->cg.version == ISO_CGROUP_V2)
			break;
	}
	return n;
}

static void name_of(const struct fixture *f, const char *suffix, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s", f->prefix, suffix);
}

/* SIGKILLs and reaps whatever a group still holds (a failed test's leftovers),
 * then destroys it. */
static void kill_and_destroy(const struct fixture *f, const char *name)
{
	for (int round = 0; round < 50 && iso_cgroup_exists(&f->cg, name); round++) {
		bool any = false; /* killed something this round */
		for (size_t i = 0; i < ISO_ARRAY_SIZE(hierarchies); i++) {
			char path[256];
			if (f->cg.version == ISO_CGROUP_V2)
				snprintf(path, sizeof(path), "%s/%s/cgroup.procs", f->cg.root,
				         name);
			else
				snprintf(path, sizeof(path), "%s/%s/%s/cgroup.procs", f->cg.root,
				         hierarchies[i], name);
			FILE *p = fopen(path, "r");
			if (!p)
				continue;
			for (int pid; fscanf(p, "%d", &pid) == 1;) {
				kill(pid, SIGKILL);
				any = true;
			}
			fclose(p);
		}
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (iso_cgroup_destroy(&f->cg, name, NULL) == 0)
			return;
		(void)any;
		usleep(20000);
	}
}

static int setup_needs(void **state, unsigned need, enum iso_cgroup_version only)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: test_cgroup_real needs root (CI runs as root)\n");
		return 0;
	}
	struct fixture *f = calloc(1, sizeof(*f));
	struct iso_error err = {0};
	snprintf(f->prefix, sizeof(f->prefix), "isotest-%d-", (int)getpid());
	/* v1 hierarchies at /sys/fs/cgroup, else a v2 tree at /sys/fs/cgroup or
	 * its hybrid mount /sys/fs/cgroup/unified. */
	const char *roots[] = {CG_ROOT, CG_ROOT "/unified"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(roots); i++) {
		if (iso_cgroup_open(roots[i], &f->cg, &err) == 0 &&
		    (f->cg.controllers & need) == need && (!only || f->cg.version == only)) {
			f->before = count_groups(f);
			*state = f;
			return 0;
		}
	}
	fprintf(stderr,
	        "SKIP: no cgroup %s with the controllers this test needs (mask 0x%x) under %s or "
	        "%s/unified\n",
	        only == ISO_CGROUP_V1   ? "v1"
	        : only == ISO_CGROUP_V2 ? "v2"
	                                : "v1 or v2",
	        need, CG_ROOT, CG_ROOT);
	free(f);
	return 0;
}

static int setup_memory(void **state)
{
	return setup_needs(state, ISO_CGROUP_MEMORY, 0);
}
static int setup_pids(void **state)
{
	return setup_needs(state, ISO_CGROUP_PIDS, 0);
}
static int setup_devices(void **state)
{
	return setup_needs(state, ISO_CGROUP_DEVICES, ISO_CGROUP_V1);
}
static int setup_cpuset(void **state)
{
	return setup_needs(state, ISO_CGROUP_CPUSET, 0);
}
/* Any cgroup2 tree, with or without controllers. */
static int setup_v2(void **state)
{
	return setup_needs(state, 0, ISO_CGROUP_V2);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	if (!f)
		return 0;
	const char *suffixes[] = {"a", "b"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(suffixes); i++) {
		char name[64];
		name_of(f, suffixes[i], name, sizeof(name));
		kill_and_destroy(f, name);
	}
	int after = count_groups(f);
	free(f);
	if (after != 0)
		fprintf(stderr, "%d cgroups of this run left behind\n", after);
	return after == 0 ? 0 : -1;
}

#define SKIP_UNLESS_READY(f)                                                                       \
	do {                                                                                       \
		if (!(f))                                                                          \
			skip();                                                                    \
		assert_int_equal((f)->before, 0);                                                  \
	} while (0)

/* Forks a child that waits until it sits in group `name`, then runs fn(arg)
 * and exits with its result. The child closes close_fd (>= 0): the write end
 * of a pipe it waits on for EOF. */
static pid_t run_in_group(const struct fixture *f, const char *name, int (*fn)(void *), void *arg,
                          int close_fd)
{
	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		close(go[1]);
		if (close_fd >= 0)
			close(close_fd);
		if (read(go[0], &c, 1) != 1)
			_exit(99);
		_exit(fn(arg));
	}
	close(go[0]);
	struct iso_error err = {0};
	int r = iso_cgroup_attach(&f->cg, name, pid, &err);
	if (r < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("attach %d to %s: %s", (int)pid, name, err.message);
	}
	assert_int_equal(write(go[1], "x", 1), 1);
	close(go[1]);
	return pid;
}

struct hog_arg {
	size_t bytes;
	int hold_fd; /* neighbour: waits for EOF here after touching its memory */
	int ready_fd;
};

static int hog(void *p)
{
	struct hog_arg *a = p;
	char *m = mmap(NULL, a->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 2;
	for (size_t i = 0; i < a->bytes; i += 4096)
		m[i] = 1;
	if (a->ready_fd >= 0) {
		if (write(a->ready_fd, "r", 1) != 1)
			return 3;
		char c;
		while (read(a->hold_fd, &c, 1) > 0)
			;
	}
	return 0;
}

static void test_memory_hog_killed_neighbour_lives(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char a[64], b[64];
	struct iso_error err = {0};
	struct iso_cgroup_limits lim = {.memory_max = 32 << 20};

	name_of(f, "a", a, sizeof(a));
	name_of(f, "b", b, sizeof(b));
	assert_int_equal(iso_cgroup_create(&f->cg, a, &lim, &err), 0);
	assert_int_equal(iso_cgroup_create(&f->cg, b, &lim, &err), 0);

	/* The neighbour takes 8 MiB in b and holds it. */
	int hold[2], ready[2];
	assert_int_equal(pipe(hold), 0);
	assert_int_equal(pipe(ready), 0);
	struct hog_arg small = {.bytes = 8 << 20, .hold_fd = hold[0], .ready_fd = ready[1]};
	pid_t nb = run_in_group(f, b, hog, &small, hold[1]);
	close(hold[0]);
	close(ready[1]);
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);

	/* The hog wants 512 MiB in a, 32 MiB allowed, no swap to fall back on. */
	struct hog_arg big = {.bytes = (size_t)512 << 20, .ready_fd = -1};
	pid_t h = run_in_group(f, a, hog, &big, hold[1]);
	int st;
	assert_int_equal(waitpid(h, &st, 0), h);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);

	/* The neighbour is alive and finishes normally. */
	assert_int_equal(waitpid(nb, &st, WNOHANG), 0);
	close(hold[1]);
	assert_int_equal(waitpid(nb, &st, 0), nb);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	assert_int_equal(iso_cgroup_destroy(&f->cg, a, &err), 0);
	assert_int_equal(iso_cgroup_destroy(&f->cg, b, &err), 0);
}

struct bomb_arg {
	int report_fd;
};

/* Forks children that block until the bomb exits, until fork fails; reports
 * how many it made and fork's errno, then reaps them all. */
static int bomb(void *p)
{
	struct bomb_arg *a = p;
	int hold[2];
	if (pipe(hold) < 0)
		return 2;
	int made = 0, e = 0;
	for (; made < 1000; made++) {
		pid_t c = fork();
		if (c < 0) {
			e = errno;
			break;
		}
		if (c == 0) {
			char x;
			close(hold[1]);
			while (read(hold[0], &x, 1) > 0)
				;
			_exit(0);
		}
	}
	close(hold[1]);
	int rep[2] = {made, e};
	if (write(a->report_fd, rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		return 3;
	while (wait(NULL) > 0)
		;
	return 0;
}

static void test_fork_bomb_stops_at_pids_max(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char a[64];
	struct iso_error err = {0};
	struct iso_cgroup_limits lim = {.pids_max = 16};

	name_of(f, "a", a, sizeof(a));
	assert_int_equal(iso_cgroup_create(&f->cg, a, &lim, &err), 0);
	int rep[2];
	assert_int_equal(pipe(rep), 0);
	struct bomb_arg arg = {.report_fd = rep[1]};
	pid_t b = run_in_group(f, a, bomb, &arg, -1);
	close(rep[1]);
	int got[2] = {-1, -1};
	assert_int_equal(read(rep[0], got, sizeof(got)), (ssize_t)sizeof(got));
	close(rep[0]);
	int st;
	assert_int_equal(waitpid(b, &st, 0), b);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(got[0], 15); /* the bomb itself is the 16th */
	assert_int_equal(got[1], EAGAIN);
	assert_int_equal(iso_cgroup_destroy(&f->cg, a, &err), 0);
}

struct dev_arg {
	const char *allowed, *denied;
};

/* Exit 0 when the allowed node opens and the denied one fails with EPERM. */
static int try_devices(void *p)
{
	struct dev_arg *a = p;
	int fd = open(a->allowed, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 10;
	close(fd);
	fd = open(a->denied, O_RDWR | O_CLOEXEC);
	if (fd >= 0)
		return 11;
	return errno == EPERM ? 0 : 12;
}

static void test_devices_allow_list(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char a[64], b[64], dir[] = "/tmp/iso-cg-dev-XXXXXX", null_copy[64], zero_copy[64];
	struct iso_error err = {0};

	assert_non_null(mkdtemp(dir));
	snprintf(null_copy, sizeof(null_copy), "%s/null", dir);
	snprintf(zero_copy, sizeof(zero_copy), "%s/zero", dir);
	assert_int_equal(mknod(null_copy, S_IFCHR | 0666, makedev(1, 3)), 0);
	assert_int_equal(mknod(zero_copy, S_IFCHR | 0666, makedev(1, 5)), 0);

	/* a allows 1:3 only, b 1:5 only: each denies the other's node. */
	struct iso_cgroup_device only_null = {.type = 'c', .major = 1, .minor = 3, .access = "rw"};
	struct iso_cgroup_device only_zero = {.type = 'c', .major = 1, .minor = 5, .access = "rw"};
	struct iso_cgroup_limits la = {
	    .filter_devices = true, .devices = &only_null, .n_devices = 1};
	struct iso_cgroup_limits lb = {
	    .filter_devices = true, .devices = &only_zero, .n_devices = 1};
	name_of(f, "a", a, sizeof(a));
	name_of(f, "b", b, sizeof(b));
	assert_int_equal(iso_cgroup_create(&f->cg, a, &la, &err), 0);
	assert_int_equal(iso_cgroup_create(&f->cg, b, &lb, &err), 0);
	/* Idempotent on the kernel too: devices.list holds exactly the rule. */
	assert_int_equal(iso_cgroup_create(&f->cg, a, &la, &err), 0);

	struct dev_arg in_a = {.allowed = null_copy, .denied = zero_copy};
	struct dev_arg in_b = {.allowed = zero_copy, .denied = null_copy};
	int st;
	pid_t pa = run_in_group(f, a, try_devices, &in_a, -1);
	assert_int_equal(waitpid(pa, &st, 0), pa);
	int ra = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	pid_t pb = run_in_group(f, b, try_devices, &in_b, -1);
	assert_int_equal(waitpid(pb, &st, 0), pb);
	int rb = WIFEXITED(st) ? WEXITSTATUS(st) : -1;

	unlink(null_copy);
	unlink(zero_copy);
	rmdir(dir);
	assert_int_equal(ra, 0);
	assert_int_equal(rb, 0);
	assert_int_equal(iso_cgroup_destroy(&f->cg, a, &err), 0);
	assert_int_equal(iso_cgroup_destroy(&f->cg, b, &err), 0);
}

/* The ids of the device programs attached to group `name` (v2); returns how
 * many. */
static unsigned attached_ids(const struct fixture *f, const char *name, uint32_t ids[8])
{
	char dir[256];
	uint32_t cnt = 8, flags = 0;
	snprintf(dir, sizeof(dir), "%s/%s", f->cg.root, name);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(bpf_prog_query(fd, BPF_CGROUP_DEVICE, 0, &flags, ids, &cnt), 0);
	close(fd);
	return cnt;
}

struct open_arg {
	const char *path;
	int flags;
};

/* Exit 0 when the node opens, the errno when it does not. */
static int try_open(void *p)
{
	struct open_arg *a = p;
	int fd = open(a->path, a->flags | O_CLOEXEC);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int open_in_group(const struct fixture *f, const char *name, const char *path, int flags)
{
	struct open_arg arg = {.path = path, .flags = flags};
	int st;
	pid_t p = run_in_group(f, name, try_open, &arg, -1);
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* v2: the BPF filter allows one mknod copy and denies the other; the same
 * rules again keep the attached program, new rules replace it (one program
 * attached, the old one gone), access subsets and wildcards hold, and the
 * group's removal takes the program with it. */
static void test_v2_device_filter(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char a[64], dir[] = "/tmp/iso-cg-bpf-XXXXXX", null_copy[64], zero_copy[64];
	struct iso_error err = {0};
	uint32_t ids[8], first, second;

	assert_non_null(mkdtemp(dir));
	snprintf(null_copy, sizeof(null_copy), "%s/null", dir);
	snprintf(zero_copy, sizeof(zero_copy), "%s/zero", dir);
	assert_int_equal(mknod(null_copy, S_IFCHR | 0666, makedev(1, 3)), 0);
	assert_int_equal(mknod(zero_copy, S_IFCHR | 0666, makedev(1, 5)), 0);

	struct iso_cgroup_device only_null = {.type = 'c', .major = 1, .minor = 3, .access = "rw"};
	struct iso_cgroup_device only_zero = {.type = 'c', .major = 1, .minor = 5, .access = "rw"};
	struct iso_cgroup_limits lim = {
	    .filter_devices = true, .devices = &only_null, .n_devices = 1};
	name_of(f, "a", a, sizeof(a));
	assert_int_equal(iso_cgroup_create(&f->cg, a, &lim, &err), 0);
	assert_int_equal(attached_ids(f, a, ids), 1);
	first = ids[0];
	assert_int_equal(open_in_group(f, a, null_copy, O_RDWR), 0);
	assert_int_equal(open_in_group(f, a, zero_copy, O_RDWR), EPERM);

	/* Level-triggered: the same rules keep the program in place. */
	assert_int_equal(iso_cgroup_create(&f->cg, a, &lim, &err), 0);
	assert_int_equal(attached_ids(f, a, ids), 1);
	assert_int_equal(ids[0], first);

	/* New rules: a new program, the old one detached; the answer flips. */
	lim.devices = &only_zero;
	assert_int_equal(iso_cgroup_create(&f->cg, a, &lim, &err), 0);
	assert_int_equal(attached_ids(f, a, ids), 1);
	assert_int_not_equal(ids[0], first);
	assert_int_equal(open_in_group(f, a, zero_copy, O_RDWR), 0);
	assert_int_equal(open_in_group(f, a, null_copy, O_RDWR), EPERM);

	/* Access is a subset: read allowed, write denied. A wildcard minor
	 * (1:*) and a block rule next to it. */
	struct iso_cgroup_device sub[] = {
	    {.type = 'b', .major = 1, .minor = -1, .access = "rwm"},
	    {.type = 'c', .major = 1, .minor = 3, .access = "r"},
	};
	lim.devices = sub;
	lim.n_devices = 2;
	assert_int_equal(iso_cgroup_create(&f->cg, a, &lim, &err), 0);
	assert_int_equal(open_in_group(f, a, null_copy, O_RDONLY), 0);
	assert_int_equal(open_in_group(f, a, null_copy, O_WRONLY), EPERM);
	assert_int_equal(open_in_group(f, a, zero_copy, O_RDONLY), EPERM);
	struct iso_cgroup_device wild = {.type = 'c', .major = 1, .minor = -1, .access = "rw"};
	lim.devices = &wild;
	lim.n_devices = 1;
	assert_int_equal(iso_cgroup_create(&f->cg, a, &lim, &err), 0);
	assert_int_equal(open_in_group(f, a, null_copy, O_RDWR), 0);
	assert_int_equal(open_in_group(f, a, zero_copy, O_RDWR), 0);
	assert_int_equal(attached_ids(f, a, ids), 1);
	second = ids[0];

	unlink(null_copy);
	unlink(zero_copy);
	rmdir(dir);

	/* The group removed leaves nothing: the kernel releases its programs
	 * (asynchronously, after the rmdir), so poll until the id is gone. */
	assert_int_equal(iso_cgroup_destroy(&f->cg, a, &err), 0);
	assert_false(iso_cgroup_exists(&f->cg, a));
	int fd = -1;
	for (int i = 0; i < 200; i++) {
		fd = bpf_prog_get_fd_by_id(second);
		if (fd < 0)
			break;
		close(fd);
		usleep(25000);
	}
	assert_true(fd < 0);
	assert_int_equal(errno, ENOENT);
}

static int affinity_count(void *p)
{
	(void)p;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 100;
	return CPU_ISSET(0, &set) ? CPU_COUNT(&set) : 101;
}

static void test_cpuset_confines(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char a[64];
	struct iso_error err = {0};
	struct iso_cgroup_limits lim = {.cpus = "0", .mems = "0"};

	name_of(f, "a", a, sizeof(a));
	assert_int_equal(iso_cgroup_create(&f->cg, a, &lim, &err), 0);
	pid_t p = run_in_group(f, a, affinity_count, NULL, -1);
	int st;
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 1);
	assert_int_equal(iso_cgroup_destroy(&f->cg, a, &err), 0);
}

/* destroy kills nothing: EBUSY while a process remains, the group whole. */
static int wait_for_eof(void *p)
{
	char c;
	while (read(*(int *)p, &c, 1) > 0)
		;
	return 0;
}

static void test_destroy_busy(void **state)
{
	struct fixture *f = *state;
	SKIP_UNLESS_READY(f);
	char a[64];
	struct iso_error err = {0};
	int hold[2];

	name_of(f, "a", a, sizeof(a));
	assert_int_equal(iso_cgroup_create(&f->cg, a, NULL, &err), 0);
	assert_int_equal(pipe(hold), 0);
	pid_t p = run_in_group(f, a, wait_for_eof, &hold[0], hold[1]);
	close(hold[0]);
	assert_int_equal(iso_cgroup_destroy(&f->cg, a, &err), -EBUSY);
	assert_true(iso_cgroup_exists(&f->cg, a));
	assert_int_equal(kill(p, 0), 0);
	close(hold[1]);
	int st;
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_int_equal(iso_cgroup_destroy(&f->cg, a, &err), 0);
	assert_false(iso_cgroup_exists(&f->cg, a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_memory_hog_killed_neighbour_lives, setup_memory,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_fork_bomb_stops_at_pids_max, setup_pids, teardown),
	    cmocka_unit_test_setup_teardown(test_devices_allow_list, setup_devices, teardown),
	    cmocka_unit_test_setup_teardown(test_v2_device_filter, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_cpuset_confines, setup_cpuset, teardown),
	    cmocka_unit_test_setup_teardown(test_destroy_busy, setup_pids, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

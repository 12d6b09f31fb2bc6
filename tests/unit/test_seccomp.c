/* test_seccomp.c: the sandbox's seccomp filter (src/sandbox/seccomp.c) in
 * real processes. Each case forks a child; the child loads the filter (or,
 * for the baseline, does not) and makes the call with arguments that are
 * harmless and, unfiltered, fail with another errno than EPERM or succeed
 * (checked here in an unfiltered child first), so that an EPERM under the
 * filter proves the filter answered. The HPC calls the filter keeps (ioctl,
 * mbind, get/set_mempolicy, process_vm_readv, mlock) must still work;
 * io_uring is EPERM by default and back to its unfiltered answer with the
 * tenant's switch. Needs root for the unfiltered answers (CI runs as root). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/sandbox.h"

#define MPOL_DEFAULT 0 /* <numaif.h> is libnuma's; the kernel's value */

enum mode { BARE, FILTER, FILTER_IO_URING, FILTER_PTRACE };

typedef long (*probe_fn)(void);

/* The errno of fn() in a child (0 when it returned >= 0), after loading the
 * filter per mode. The child exits with the errno (all below 255), or 255
 * when the load fails. */
static int child_errno(enum mode m, probe_fn fn)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (m != BARE) {
			struct iso_seccomp_policy p = {.allow_io_uring = m == FILTER_IO_URING,
			                               .allow_ptrace = m == FILTER_PTRACE};
			struct iso_error err = {0};
			if (iso_sandbox_seccomp_load(&p, &err) < 0) {
				fprintf(stderr, "load: %s\n", err.message);
				_exit(255);
			}
		}
		errno = 0;
		long rc = fn();
		_exit(rc >= 0 ? 0 : errno);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_not_equal(WEXITSTATUS(st), 255);
	return WEXITSTATUS(st);
}

/* ---- denied calls: harmless arguments ---- */
static long p_init_module(void)
{
	return syscall(SYS_init_module, NULL, 0, "");
}
static long p_finit_module(void)
{
	return syscall(SYS_finit_module, -1, "", 0);
}
static long p_delete_module(void)
{
	return syscall(SYS_delete_module, "isostack_no_such_module", O_NONBLOCK);
}
static long p_kexec_load(void)
{
	return syscall(SYS_kexec_load, 0, 0, NULL, 0x7fff0000ul); /* bad flags: EINVAL */
}
static long p_kexec_file_load(void)
{
	return syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0x7fff0000ul);
}
static long p_reboot(void)
{
	return syscall(SYS_reboot, 0, 0, 0, NULL); /* bad magic: EINVAL */
}
static long p_mount(void)
{
	return syscall(SYS_mount, "none", "/nonexistent/isostack", "tmpfs", 0, NULL);
}
static long p_umount2(void)
{
	return syscall(SYS_umount2, "/nonexistent/isostack", 0);
}
static long p_swapon(void)
{
	return syscall(SYS_swapon, "/nonexistent/isostack", 0);
}
static long p_swapoff(void)
{
	return syscall(SYS_swapoff, "/nonexistent/isostack");
}
static long p_bpf(void)
{
	return syscall(SYS_bpf, -1, NULL, 0); /* bad command: EINVAL */
}
static long p_perf_event_open(void)
{
	return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0); /* EFAULT */
}
static long p_unshare(void)
{
	return syscall(SYS_unshare, 0); /* succeeds unfiltered, changes nothing */
}
static long p_setns(void)
{
	return syscall(SYS_setns, -1, 0);
}
static long p_keyctl(void)
{
	return syscall(SYS_keyctl, -1, 0, 0, 0, 0); /* unknown op */
}
static long p_add_key(void)
{
	return syscall(SYS_add_key, NULL, NULL, NULL, 0, 0);
}
static long p_request_key(void)
{
	return syscall(SYS_request_key, NULL, NULL, NULL, 0);
}
static long p_ptrace(void)
{
	return syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, (pid_t)0x3ffffffe, 0, 0); /* ESRCH */
}
static long p_clone_newuts(void)
{
	/* a child in a new UTS namespace that exits at once */
	long rc = syscall(SYS_clone, CLONE_NEWUTS | SIGCHLD, NULL, NULL, NULL, 0);
	if (rc == 0)
		_exit(0);
	if (rc > 0)
		waitpid((pid_t)rc, NULL, 0);
	return rc;
}
static long p_fsopen(void)
{
	return syscall(SYS_fsopen, "isostack-no-such-fs", 0); /* ENODEV */
}

struct denied {
	const char *name;
	probe_fn fn;
};
static const struct denied denied[] = {
    {"init_module", p_init_module},
    {"finit_module", p_finit_module},
    {"delete_module", p_delete_module},
    {"kexec_load", p_kexec_load},
    {"kexec_file_load", p_kexec_file_load},
    {"reboot", p_reboot},
    {"mount", p_mount},
    {"umount2", p_umount2},
    {"swapon", p_swapon},
    {"swapoff", p_swapoff},
    {"bpf", p_bpf},
    {"perf_event_open", p_perf_event_open},
    {"unshare", p_unshare},
    {"setns", p_setns},
    {"keyctl", p_keyctl},
    {"add_key", p_add_key},
    {"request_key", p_request_key},
    {"ptrace", p_ptrace},
    {"clone(CLONE_NEWUTS)", p_clone_newuts},
    {"fsopen", p_fsopen},
};

static void denied_calls_answer_eperm(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		int bare = child_errno(BARE, denied[i].fn);
		int filt = child_errno(FILTER, denied[i].fn);
		printf("# %-20s unfiltered errno %d, filtered %d\n", denied[i].name, bare, filt);
		if (bare == EPERM)
			fail_msg("%s: EPERM without the filter: run as root (the test cannot tell "
			         "the filter's EPERM from the kernel's)",
			         denied[i].name);
		if (filt != EPERM)
			fail_msg("%s: errno %d under the filter, want EPERM", denied[i].name, filt);
	}
}

/* ---- kept calls ---- */
static long p_ioctl_fionread(void)
{
	int fds[2];
	if (pipe(fds) < 0 || write(fds[1], "abc", 3) != 3)
		return -1;
	int n = -1;
	long rc = ioctl(fds[0], FIONREAD, &n);
	if (rc == 0 && n != 3) {
		errno = EIO;
		rc = -1;
	}
	return rc;
}
static long p_get_mempolicy(void)
{
	int mode = -1;
	return syscall(SYS_get_mempolicy, &mode, NULL, 0, NULL, 0);
}
static long p_set_mempolicy(void)
{
	return syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0);
}
static long p_mbind(void)
{
	long page = sysconf(_SC_PAGESIZE);
	void *m =
	    mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	return syscall(SYS_mbind, m, page, MPOL_DEFAULT, NULL, 0, 0);
}
static long p_process_vm_readv(void)
{
	char src[16] = "isostack-cma", dst[16] = {0};
	struct iovec l = {dst, sizeof dst}, r = {src, sizeof src};
	long n = syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0);
	if (n >= 0 && (n != (long)sizeof src || strcmp(dst, "isostack-cma") != 0)) {
		errno = EIO;
		return -1;
	}
	return n;
}
static long p_mlock(void)
{
	static char buf[4096] __attribute__((aligned(4096)));
	return mlock(buf, sizeof buf);
}
static long p_no_new_privs(void)
{
	/* 0 when set, EINVAL otherwise */
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
		return 0;
	errno = EINVAL;
	return -1;
}

static void hpc_calls_still_work(void **state)
{
	(void)state;
	struct {
		const char *name;
		probe_fn fn;
	} kept[] = {
	    {"ioctl(FIONREAD)", p_ioctl_fionread},    {"get_mempolicy", p_get_mempolicy},
	    {"set_mempolicy", p_set_mempolicy},       {"mbind", p_mbind},
	    {"process_vm_readv", p_process_vm_readv}, {"mlock", p_mlock},
	};
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		int e = child_errno(FILTER, kept[i].fn);
		if (e != 0)
			fail_msg("%s: errno %d under the filter, want success", kept[i].name, e);
	}
}

static void filter_sets_no_new_privs(void **state)
{
	(void)state;
	assert_int_equal(child_errno(BARE, p_no_new_privs), EINVAL);
	assert_int_equal(child_errno(FILTER, p_no_new_privs), 0);
}

static long p_io_uring_setup(void)
{
	return syscall(SYS_io_uring_setup, 0, NULL); /* zero entries: EINVAL (or EFAULT) */
}

static void io_uring_behind_the_tenant_switch(void **state)
{
	(void)state;
	int bare = child_errno(BARE, p_io_uring_setup);
	assert_int_not_equal(bare, EPERM);
	assert_int_equal(child_errno(FILTER, p_io_uring_setup), EPERM);
	assert_int_equal(child_errno(FILTER_IO_URING, p_io_uring_setup), bare);
}

static void ptrace_behind_the_pid_namespace_switch(void **state)
{
	(void)state;
	int bare = child_errno(BARE, p_ptrace);
	assert_int_equal(bare, ESRCH);
	assert_int_equal(child_errno(FILTER, p_ptrace), EPERM);
	assert_int_equal(child_errno(FILTER_PTRACE, p_ptrace), ESRCH);
}

/* clone3 hides its flags in memory: ENOSYS, so that libc falls back to
 * clone, whose flags the filter reads. */
static long p_clone3(void)
{
	return syscall(SYS_clone3, NULL, 0); /* EINVAL unfiltered (size 0) */
}
static void clone3_answers_enosys(void **state)
{
	(void)state;
	assert_int_not_equal(child_errno(BARE, p_clone3), ENOSYS);
	assert_int_equal(child_errno(FILTER, p_clone3), ENOSYS);
	/* fork through libc still works under the filter */
}

#if defined(__x86_64__)
/* The 32-bit ABI (int 0x80) must not bypass the deny-list (unshare(0) is
 * i386 syscall 310), and 32-bit programs must still run under it (getpid is
 * i386 syscall 20): the filter carries the i386 table, it does not just
 * refuse a foreign ABI. */
static long int80(long nr, long a1)
{
	long rc;
	__asm__ volatile("int $0x80" : "=a"(rc) : "a"(nr), "b"(a1) : "memory");
	if (rc < 0 && rc > -4096) {
		errno = (int)-rc;
		return -1;
	}
	return rc;
}
static long p_unshare_int80(void)
{
	return int80(310, 0);
}
static long p_getpid_int80(void)
{
	long pid = int80(20, 0);
	if (pid >= 0 && pid != getpid()) {
		errno = EIO;
		return -1;
	}
	return pid;
}
static void compat_abi_is_filtered(void **state)
{
	(void)state;
	int bare = child_errno(BARE, p_unshare_int80);
	if (bare == ENOSYS) {
		printf("# skipped: this kernel has no 32-bit syscall ABI (int 0x80: ENOSYS)\n");
		skip();
	}
	assert_int_equal(bare, 0);
	assert_int_equal(child_errno(FILTER, p_unshare_int80), EPERM);
	assert_int_equal(child_errno(FILTER, p_getpid_int80), 0);
}
#endif

/* no_new_privs: a setuid-root copy of this test binary (run with
 * --print-euid, it exits 0 when its effective uid is 0) gains root when an
 * unprivileged child execs it bare, and does not when the child loaded the
 * filter first. The child loads it as uid 65534, which also shows that a
 * process without CAP_SYS_ADMIN can load the filter (no_new_privs is what
 * lets it). */
static int exec_setuid_copy(const char *path, bool filtered)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(254);
		struct iso_error err = {0};
		if (filtered && iso_sandbox_seccomp_load(NULL, &err) < 0) {
			fprintf(stderr, "load as uid 65534: %s\n", err.message);
			_exit(255);
		}
		execl(path, path, "--print-euid", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void no_new_privs_stops_setuid(void **state)
{
	(void)state;
	char dir[] = "/tmp/iso-seccomp-XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0755), 0);
	char path[sizeof dir + 8];
	snprintf(path, sizeof path, "%s/euid", dir);
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	assert_true(in >= 0 && out >= 0);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	assert_int_equal(n, 0);
	close(in);
	close(out);
	assert_int_equal(chown(path, 0, 0), 0);
	assert_int_equal(chmod(path, 04755), 0);

	int bare = exec_setuid_copy(path, false);
	int filt = exec_setuid_copy(path, true);
	unlink(path);
	rmdir(dir);
	/* 0: euid 0 (the setuid bit worked), 3: it did not */
	assert_int_equal(bare, 0);
	assert_int_equal(filt, 3);
}

static long p_fork(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return -1;
	int st;
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? 0 : -1;
}
static void fork_still_works(void **state)
{
	(void)state;
	assert_int_equal(child_errno(FILTER, p_fork), 0);
}

int main(int argc, char **argv)
{
	/* _exit: under ASan, LeakSanitizer's exit check ptraces, which the
	 * filter denies */
	if (argc == 2 && strcmp(argv[1], "--print-euid") == 0)
		_exit(geteuid() == 0 ? 0 : 3);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(denied_calls_answer_eperm),
		cmocka_unit_test(hpc_calls_still_work),
		cmocka_unit_test(filter_sets_no_new_privs),
		cmocka_unit_test(no_new_privs_stops_setuid),
		cmocka_unit_test(io_uring_behind_the_tenant_switch),
		cmocka_unit_test(ptrace_behind_the_pid_namespace_switch),
		cmocka_unit_test(clone3_answers_enosys),
#if defined(__x86_64__)
		cmocka_unit_test(compat_abi_is_filtered),
#endif
		cmocka_unit_test(fork_still_works),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

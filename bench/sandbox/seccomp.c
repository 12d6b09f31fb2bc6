/* bench/sandbox/seccomp.c: what the sandbox's seccomp filter
 * (src/sandbox/seccomp.c) costs a syscall-heavy loop, against no filter, in
 * the same run (issue 14: goal <= 5%). Each round forks three children in a
 * rotating order: bare, under an empty allow-all libseccomp filter (the
 * floor: what any filter costs, the kernel's seccomp entry path), and under
 * the sandbox's filter; each times N getpid calls (raw syscall, never a libc
 * cache) and N 64-byte reads of /dev/zero. The figure per workload is the
 * median over rounds of ns/call and the ratios of the medians over bare.
 * Usage: seccomp [--quick] [--calls N] [--rounds R]; results and the command
 * go to docs/benchmarks.md ("Sandbox: seccomp"). */
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

struct sample {
	double getpid_ns, read_ns; /* per call */
};

static double time_getpid(long n)
{
	uint64_t t0 = iso_mono_ns();
	for (long i = 0; i < n; i++)
		syscall(SYS_getpid);
	return (double)(iso_mono_ns() - t0) / (double)n;
}

static double time_read(long n, int fd)
{
	char buf[64];
	uint64_t t0 = iso_mono_ns();
	for (long i = 0; i < n; i++)
		if (read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
			return -1;
	return (double)(iso_mono_ns() - t0) / (double)n;
}

enum variant { BARE, EMPTY, ISOSTACK, N_VARIANTS };
static const char *const variant_name[] = {"bare", "empty", "isostack"};

static int load_empty(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	int rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

/* Runs one child under variant v and reads its sample back over a pipe. */
static int run_child(enum variant v, long n, struct sample *out)
{
	int fds[2];
	if (pipe(fds) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(fds[0]);
		struct iso_error err = {0};
		if (v == ISOSTACK && iso_sandbox_seccomp_load(NULL, &err) < 0) {
			fprintf(stderr, "seccomp: %s\n", err.message);
			_exit(1);
		}
		if (v == EMPTY && load_empty() < 0)
			_exit(1);
		int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			_exit(1);
		struct sample s;
		time_getpid(n / 10); /* warm-up */
		s.getpid_ns = time_getpid(n);
		time_read(n / 10, fd);
		s.read_ns = time_read(n, fd);
		_exit(s.read_ns > 0 && write(fds[1], &s, sizeof s) == (ssize_t)sizeof s ? 0 : 1);
	}
	close(fds[1]);
	ssize_t got = read(fds[0], out, sizeof *out);
	close(fds[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	return got == (ssize_t)sizeof *out && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	long calls = 2000000;
	int rounds = 21;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			calls = 200000;
			rounds = 5;
		} else if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
			calls = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: %s [--quick] [--calls N] [--rounds R]\n", argv[0]);
			return 2;
		}
	}
	if (calls < 10 || rounds < 1 || rounds > 1000) {
		fprintf(stderr, "--calls >= 10, --rounds 1..1000\n");
		return 2;
	}
	double *v = calloc((size_t)rounds * N_VARIANTS * 2, sizeof(double));
	if (!v)
		return 1;
	/* v[(w * N_VARIANTS + variant) * rounds + r], w 0 getpid, 1 read */
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < N_VARIANTS; k++) {
			/* rotate the order, so that drift falls on every variant */
			enum variant var = (enum variant)((r + k) % N_VARIANTS);
			struct sample sm;
			if (run_child(var, calls, &sm) < 0) {
				fprintf(stderr, "round %d: the %s child failed\n", r,
				        variant_name[var]);
				free(v);
				return 1;
			}
			v[(0 * N_VARIANTS + var) * rounds + r] = sm.getpid_ns;
			v[(1 * N_VARIANTS + var) * rounds + r] = sm.read_ns;
		}
	}
	static const char *const workload[] = {"getpid", "read /dev/zero 64 B"};
	printf("calls per loop %ld, rounds %d (medians of ns/call; ratios over bare)\n", calls,
	       rounds);
	printf("%-20s %8s %8s %8s %12s %15s\n", "workload", "bare", "empty", "isostack",
	       "empty/bare", "isostack/bare");
	for (int w = 0; w < 2; w++) {
		double m[N_VARIANTS];
		for (int k = 0; k < N_VARIANTS; k++)
			m[k] = median(v + (w * N_VARIANTS + k) * rounds, rounds);
		printf("%-20s %8.1f %8.1f %8.1f %12.3f %15.3f\n", workload[w], m[BARE], m[EMPTY],
		       m[ISOSTACK], m[EMPTY] / m[BARE], m[ISOSTACK] / m[BARE]);
	}
	free(v);
	return 0;
}

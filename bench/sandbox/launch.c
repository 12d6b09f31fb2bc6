/* bench/sandbox/launch.c: what launching a process through the sandbox
 * (iso_sandbox_run: fork, enter the cgroup and namespaces, drop to the job's
 * identity, load the seccomp filter, fork, exec) costs against a bare
 * fork + exec + wait of the same binary, in the same run (issue 14: goal
 * < 20 ms p50 overhead), and what making and removing a sandbox costs
 * (iso_sandbox_create + iso_sandbox_destroy: cgroup, holder, mounts).
 * Bare and sandboxed launches alternate, so that drift falls on both; the
 * sandbox exists before the first launch. Needs root and a cgroup tree at
 * /sys/fs/cgroup (v1 with the devices controller here); exits 77 (skip)
 * otherwise. Usage: launch [--quick] [--launches N] [--cycles M] [--cmd
 * PATH]; results and the command go to docs/benchmarks.md ("Sandbox:
 * launch"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The q-quantile (nearest rank) of n sorted values, in ms. */
static double quantile_ms(const uint64_t *v, int n, double q)
{
	int k = (int)(q * n + 0.999999) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return (double)v[k] / 1e6;
}

static int bare_launch(char *const argv[])
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static void report(const char *what, uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_u64);
	printf("%-28s %8.3f %8.3f %8.3f\n", what, quantile_ms(v, n, 0.5), quantile_ms(v, n, 0.99),
	       (double)v[n - 1] / 1e6);
}

int main(int argc, char **argv)
{
	int launches = 1000, cycles = 50;
	char *cmd = "/bin/true";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			launches = 200;
			cycles = 10;
		} else if (!strcmp(argv[i], "--launches") && i + 1 < argc) {
			launches = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--cycles") && i + 1 < argc) {
			cycles = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--cmd") && i + 1 < argc) {
			cmd = argv[++i];
		} else {
			fprintf(stderr,
			        "usage: %s [--quick] [--launches N] [--cycles M] [--cmd PATH]\n",
			        argv[0]);
			return 2;
		}
	}
	if (launches < 1 || launches > 1000000 || cycles < 1 || cycles > 100000) {
		fprintf(stderr, "--launches 1..1000000, --cycles 1..100000\n");
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: the sandbox needs root\n");
		return 77;
	}
	struct iso_cgroup cg;
	struct iso_error err = {0};
	if (iso_cgroup_open("/sys/fs/cgroup", &cg, &err) < 0) {
		fprintf(stderr, "SKIP: no cgroup tree at /sys/fs/cgroup: %s\n", err.message);
		return 77;
	}
	char name[ISO_NAME_MAX];
	snprintf(name, sizeof(name), "isobench-%d", (int)getpid());
	struct iso_sandbox_spec spec = {.name = name, .new_netns = true};
	struct iso_sandbox sb;
	if (iso_sandbox_create(&cg, &spec, &sb, &err) < 0) {
		fprintf(stderr, "create %s: %s: %s\n", name, err.field, err.message);
		return 1;
	}

	uint64_t *bare = calloc((size_t)launches, sizeof(uint64_t));
	uint64_t *boxed = calloc((size_t)launches, sizeof(uint64_t));
	uint64_t *create = calloc((size_t)cycles, sizeof(uint64_t));
	uint64_t *destroy = calloc((size_t)cycles, sizeof(uint64_t));
	int rc = 1;
	if (!bare || !boxed || !create || !destroy)
		goto out;
	char *args[] = {cmd, NULL};
	struct iso_sandbox_identity nobody = {.set = true, .uid = 65534, .gid = 65534};
	/* one of each to warm the page cache and the filter's code */
	int status = -1;
	if (bare_launch(args) < 0 ||
	    iso_sandbox_run(&cg, &sb, &nobody, NULL, args, &status, &err) < 0 || status != 0) {
		fprintf(stderr, "warm-up launch of %s failed (status %d): %s\n", cmd, status,
		        err.message);
		goto out;
	}
	for (int i = 0; i < launches; i++) {
		for (int k = 0; k < 2; k++) {
			bool sandboxed = (i + k) % 2; /* alternate which goes first */
			uint64_t t0 = iso_mono_ns();
			int r = sandboxed
			            ? iso_sandbox_run(&cg, &sb, &nobody, NULL, args, &status, &err)
			            : bare_launch(args);
			uint64_t dt = iso_mono_ns() - t0;
			if (r < 0 || (sandboxed && status != 0)) {
				fprintf(stderr, "launch %d (%s) failed: %d %s\n", i,
				        sandboxed ? "sandbox" : "bare", r, err.message);
				goto out;
			}
			(sandboxed ? boxed : bare)[i] = dt;
		}
	}
	for (int i = 0; i < cycles; i++) {
		char cname[ISO_NAME_MAX];
		struct iso_sandbox csb;
		snprintf(cname, sizeof(cname), "isobench-%d-c", (int)getpid());
		struct iso_sandbox_spec cspec = {.name = cname, .new_netns = true};
		uint64_t t0 = iso_mono_ns();
		if (iso_sandbox_create(&cg, &cspec, &csb, &err) < 0) {
			fprintf(stderr, "create %s: %s\n", cname, err.message);
			goto out;
		}
		uint64_t t1 = iso_mono_ns();
		if (iso_sandbox_destroy(&cg, &csb, &err) < 0) {
			fprintf(stderr, "destroy %s: %s\n", cname, err.message);
			goto out;
		}
		create[i] = t1 - t0;
		destroy[i] = iso_mono_ns() - t1;
	}

	printf("%d launches of %s each way (alternating), %d create/destroy cycles; ms\n", launches,
	       cmd, cycles);
	printf("%-28s %8s %8s %8s\n", "", "p50", "p99", "max");
	report("bare fork+exec+wait", bare, launches);
	report("iso_sandbox_run (uid 65534)", boxed, launches);
	double d50 = quantile_ms(boxed, launches, 0.5) - quantile_ms(bare, launches, 0.5);
	double d99 = quantile_ms(boxed, launches, 0.99) - quantile_ms(bare, launches, 0.99);
	printf("%-28s %8.3f %8.3f   (goal: p50 < 20 ms: %s)\n", "sandbox - bare", d50, d99,
	       d50 < 20.0 ? "met" : "NOT met");
	report("iso_sandbox_create", create, cycles);
	report("iso_sandbox_destroy", destroy, cycles);
	rc = 0;
out:
	if (iso_sandbox_destroy(&cg, &sb, &err) < 0) {
		fprintf(stderr, "destroy %s: %s\n", name, err.message);
		rc = 1;
	}
	free(bare);
	free(boxed);
	free(create);
	free(destroy);
	return rc;
}

/* test_cgroup.c: the sandbox's cgroup module (src/sandbox/cgroup.c) against
 * fake cgroupfs trees of plain directories, v2 and v1: which files it writes
 * and what they hold (rdma.max included), idempotence, bad names and limits,
 * EBUSY, and no partial state; the v2 device filter's refusal off cgroup2. The real kernel is
 * exercised by test_cgroup_real.c. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

struct tree {
	char root[128];
};

static void put(const char *root, const char *rel, const char *content)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static void mk(const char *root, const char *rel)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(mkdir(path, 0755), 0);
}

/* The file's content, trailing newline stripped; "<absent>" when missing. */
static const char *get(const char *root, const char *rel)
{
	static char buf[4096];
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "r");
	if (!f)
		return "<absent>";
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return buf;
}

static bool present(const char *root, const char *rel)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return stat(path, &st) == 0;
}

static void stamp_old(const char *root, const char *rel)
{
	char path[512];
	struct timespec ts[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static long mtime(const char *root, const char *rel)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(stat(path, &st), 0);
	return (long)st.st_mtim.tv_sec;
}

static int setup_v2(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	snprintf(t->root, sizeof(t->root), "/tmp/iso-cg-v2-XXXXXX");
	assert_non_null(mkdtemp(t->root));
	put(t->root, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	put(t->root, "cgroup.procs", "");
	*state = t;
	return 0;
}

static int setup_v1(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	snprintf(t->root, sizeof(t->root), "/tmp/iso-cg-v1-XXXXXX");
	assert_non_null(mkdtemp(t->root));
	const char *ctrls[] = {"cpuset", "memory", "pids", "devices", "freezer"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(ctrls); i++) {
		char rel[64];
		mk(t->root, ctrls[i]);
		snprintf(rel, sizeof(rel), "%s/cgroup.procs", ctrls[i]);
		put(t->root, rel, "1\n");
	}
	put(t->root, "cpuset/cpuset.cpus", "0-7\n");
	put(t->root, "cpuset/cpuset.mems", "0-1\n");
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tree *t = *state;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
	assert_int_equal(system(cmd), 0);
	free(t);
	return 0;
}

static void test_open_detects(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};

	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	if (present(t->root, "cgroup.controllers")) {
		assert_int_equal(cg.version, ISO_CGROUP_V2);
		assert_int_equal(cg.controllers, ISO_CGROUP_CPUSET | ISO_CGROUP_MEMORY |
		                                     ISO_CGROUP_PIDS | ISO_CGROUP_RDMA);
	} else {
		assert_int_equal(cg.version, ISO_CGROUP_V1);
		assert_int_equal(cg.controllers, ISO_CGROUP_CPUSET | ISO_CGROUP_MEMORY |
		                                     ISO_CGROUP_PIDS | ISO_CGROUP_DEVICES);
	}
	assert_int_equal(iso_cgroup_open("/nonexistent-iso-cg", &cg, &err), -ENOENT);
	assert_string_equal(err.field, "root");
}

static void test_v2_create_files(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};
	struct iso_cgroup_limits lim = {
	    .cpus = "2-3", .mems = "1", .memory_max = 64 << 20, .pids_max = 100};

	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	assert_false(iso_cgroup_exists(&cg, "m1"));
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), 0);
	assert_true(iso_cgroup_exists(&cg, "m1"));
	assert_string_equal(get(t->root, "cgroup.subtree_control"), "+cpuset +memory +pids +rdma");
	assert_string_equal(get(t->root, "m1/cpuset.cpus"), "2-3");
	assert_string_equal(get(t->root, "m1/cpuset.mems"), "1");
	assert_string_equal(get(t->root, "m1/memory.max"), "67108864");
	assert_string_equal(get(t->root, "m1/memory.oom.group"), "1");
	assert_string_equal(get(t->root, "m1/pids.max"), "100");

	/* Level-triggered: the same limits again write nothing. */
	const char *files[] = {"cgroup.subtree_control", "m1/cpuset.cpus",      "m1/cpuset.mems",
	                       "m1/memory.max",          "m1/memory.oom.group", "m1/pids.max"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(files); i++)
		stamp_old(t->root, files[i]);
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), 0);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(files); i++)
		assert_int_equal(mtime(t->root, files[i]), 1000);

	/* New limits replace the old; no limit is "max". */
	struct iso_cgroup_limits lim2 = {.cpus = "2-3", .mems = "1", .pids_max = 0};
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim2, &err), 0);
	assert_string_equal(get(t->root, "m1/memory.max"), "max");
	assert_string_equal(get(t->root, "m1/pids.max"), "max");
	assert_int_equal(mtime(t->root, "m1/cpuset.cpus"), 1000);

	assert_int_equal(iso_cgroup_destroy(&cg, "m1", &err), 0);
	assert_false(iso_cgroup_exists(&cg, "m1"));
	assert_false(present(t->root, "m1"));
}

/* v2's device filter is a BPF program attached to the group's directory
 * (test_cgroup_real covers it on the kernel). A fake tree is no cgroup2
 * mount: the files are written, then the filter is refused by name and the
 * group goes again; no v1 device file is ever written on v2. */
static void test_v2_devices_need_cgroup2(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};
	struct iso_cgroup_device dev = {.type = 'c', .major = 1, .minor = 3, .access = "rw"};
	struct iso_cgroup_limits lim = {
	    .pids_max = 10, .filter_devices = true, .devices = &dev, .n_devices = 1};

	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), -EOPNOTSUPP);
	assert_int_equal(err.code, ISO_E_UNAVAILABLE);
	assert_string_equal(err.field, "devices");
	assert_non_null(strstr(err.message, "is not a cgroup2 directory"));
	assert_false(present(t->root, "m1"));
	assert_false(present(t->root, "devices.allow"));
	assert_false(present(t->root, "devices.deny"));
	/* v2 needs no "devices" controller (there is none): a tree without
	 * one refuses for the same reason, not for a missing controller. */
	put(t->root, "cgroup.controllers", "pids\n");
	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), -EOPNOTSUPP);
	assert_string_equal(err.field, "devices");
	assert_false(present(t->root, "m1"));
}

/* rdma.max: one line per device, as the kernel takes them; the kernel's
 * own read-back form ("... hca_object=2000 ", every device listed) counts
 * as in place; a device dropped from the rules goes back to max. */
static void test_rdma_files(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};
	struct iso_cgroup_rdma rd[] = {
	    {.device = "mlx5_0", .hca_handle = 2, .hca_object = 2000},
	    {.device = "mlx5_1", .hca_handle = -1, .hca_object = 100},
	};
	struct iso_cgroup_limits lim = {.rdma = rd, .n_rdma = 2};
	char file[64];

	if (!present(t->root, "cgroup.controllers")) { /* v1: add an rdma hierarchy */
		mk(t->root, "rdma");
		put(t->root, "rdma/cgroup.procs", "1\n");
	}
	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	assert_true(cg.controllers & ISO_CGROUP_RDMA);
	snprintf(file, sizeof(file), "%s",
	         cg.version == ISO_CGROUP_V2 ? "m1/rdma.max" : "rdma/m1/rdma.max");
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), 0);
	assert_string_equal(get(t->root, file), "mlx5_0 hca_handle=2 hca_object=2000\n"
	                                        "mlx5_1 hca_handle=max hca_object=100");

	/* What the kernel then prints: nothing is written again. */
	put(t->root, file,
	    "mlx5_0 hca_handle=2 hca_object=2000 \nmlx5_1 hca_handle=max hca_object=100 \n"
	    "mlx5_2 hca_handle=max hca_object=max \n");
	stamp_old(t->root, file);
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), 0);
	assert_int_equal(mtime(t->root, file), 1000);

	/* mlx5_0 changes, mlx5_1 is dropped (back to max), mlx5_2 untouched. */
	rd[0].hca_handle = 4;
	lim.n_rdma = 1;
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), 0);
	assert_string_equal(get(t->root, file),
	                    "mlx5_0 hca_handle=2 hca_object=2000 \nmlx5_1 hca_handle=max "
	                    "hca_object=100 \nmlx5_2 hca_handle=max hca_object=max \n"
	                    "mlx5_0 hca_handle=4 hca_object=2000\n"
	                    "mlx5_1 hca_handle=max hca_object=max");
	assert_int_equal(iso_cgroup_destroy(&cg, "m1", &err), 0);
	assert_false(iso_cgroup_exists(&cg, "m1"));
}

static void test_rdma_bad_input(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};
	struct iso_cgroup_rdma bad[][2] = {
	    {{.device = "", .hca_handle = 1, .hca_object = 1}},
	    {{.device = NULL, .hca_handle = 1, .hca_object = 1}},
	    {{.device = "mlx5 0", .hca_handle = 1, .hca_object = 1}},
	    {{.device = "mlx5/0", .hca_handle = 1, .hca_object = 1}},
	    {{.device = "mlx5_0\n", .hca_handle = 1, .hca_object = 1}},
	    {{.device = "m123456789012345678901234567890123456789012345678901234567890123",
	      .hca_handle = 1,
	      .hca_object = 1}},
	    {{.device = "mlx5_0", .hca_handle = -2, .hca_object = 1}},
	    {{.device = "mlx5_0", .hca_handle = 1, .hca_object = 0x80000000LL}},
	};
	const char *fields[] = {"rdma[0]", "rdma[0]", "rdma[0]", "rdma[0]",
	                        "rdma[0]", "rdma[0]", "rdma[0]", "rdma[0]"};

	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		struct iso_cgroup_limits lim = {.rdma = bad[i], .n_rdma = 1};
		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), -EINVAL);
		assert_string_equal(err.field, fields[i]);
	}
	struct iso_cgroup_rdma twice[] = {
	    {.device = "mlx5_0", .hca_handle = 1, .hca_object = 1},
	    {.device = "mlx5_0", .hca_handle = 2, .hca_object = 2},
	};
	struct iso_cgroup_limits lim = {.rdma = twice, .n_rdma = 2};
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), -EINVAL);
	assert_string_equal(err.field, "rdma[1]");
	struct iso_cgroup_limits missing = {.n_rdma = 1};
	assert_int_equal(iso_cgroup_create(&cg, "m1", &missing, &err), -EINVAL);
	assert_string_equal(err.field, "rdma");
	/* The largest values are the kernel's max. */
	struct iso_cgroup_rdma top = {
	    .device = "mlx5_0", .hca_handle = 0x7fffffff, .hca_object = 0};
	struct iso_cgroup_limits ok = {.rdma = &top, .n_rdma = 1};
	assert_int_equal(iso_cgroup_create(&cg, "m1", &ok, &err), 0);
	assert_string_equal(get(t->root, "m1/rdma.max"), "mlx5_0 hca_handle=max hca_object=0");
	assert_int_equal(iso_cgroup_destroy(&cg, "m1", &err), 0);
	assert_false(present(t->root, "m1"));
}

/* Without the rdma controller (this machine's kernel has none) a limit is
 * refused by name, before anything is made. */
static void test_rdma_unavailable(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};
	struct iso_cgroup_rdma rd = {.device = "mlx5_0", .hca_handle = 2, .hca_object = 2000};
	struct iso_cgroup_limits lim = {.pids_max = 5, .rdma = &rd, .n_rdma = 1};

	if (present(t->root, "cgroup.controllers"))
		put(t->root, "cgroup.controllers", "cpuset memory pids\n");
	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	assert_false(cg.controllers & ISO_CGROUP_RDMA);
	assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), -EAGAIN);
	assert_int_equal(err.code, ISO_E_UNAVAILABLE);
	assert_string_equal(err.field, "rdma");
	assert_non_null(strstr(err.message, "rdma controller"));
	assert_false(iso_cgroup_exists(&cg, "m1"));
	assert_false(present(t->root, "cgroup.subtree_control"));
}

static void test_bad_input(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};
	const char *names[] = {
	    "",    ".",    "..",
	    "a/b", "../x", "/abs",
	    "A",   "x\n",  "0123456789012345678901234567890123456789012345678901234567890123"};

	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(names); i++) {
		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_cgroup_create(&cg, names[i], NULL, &err), -EINVAL);
		assert_string_equal(err.field, "name");
		assert_int_equal(iso_cgroup_attach(&cg, names[i], 1, &err), -EINVAL);
		assert_int_equal(iso_cgroup_destroy(&cg, names[i], &err), -EINVAL);
		assert_false(iso_cgroup_exists(&cg, names[i]));
	}
	const char *lists[] = {"", "0-", "3-1", "a", "1,,2", "-1", "1 2", "0-3,"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(lists); i++) {
		struct iso_cgroup_limits lim = {.cpus = lists[i]};
		assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), -EINVAL);
		assert_string_equal(err.field, "cpus");
		struct iso_cgroup_limits lim2 = {.mems = lists[i]};
		assert_int_equal(iso_cgroup_create(&cg, "m1", &lim2, &err), -EINVAL);
		assert_string_equal(err.field, "mems");
	}
	struct iso_cgroup_limits neg = {.memory_max = -1};
	assert_int_equal(iso_cgroup_create(&cg, "m1", &neg, &err), -EINVAL);
	assert_string_equal(err.field, "memory_max");
	struct iso_cgroup_device bad[] = {
	    {.type = 'x', .major = 1, .minor = 3, .access = "r"},
	    {.type = 'c', .major = -2, .minor = 3, .access = "r"},
	    {.type = 'c', .major = 1, .minor = 3, .access = ""},
	    {.type = 'c', .major = 1, .minor = 3, .access = "rx"},
	};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		struct iso_cgroup_limits lim = {
		    .filter_devices = true, .devices = &bad[i], .n_devices = 1};
		assert_int_equal(iso_cgroup_create(&cg, "m1", &lim, &err), -EINVAL);
		assert_string_equal(err.field, "devices[0]");
	}
	assert_false(present(t->root, "m1"));
	assert_int_equal(iso_cgroup_attach(&cg, "m1", 1, &err), -ENOENT);
	assert_int_equal(iso_cgroup_destroy(&cg, "m1", &err), 0); /* already gone */
}

static void test_busy(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};

	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	assert_int_equal(iso_cgroup_create(&cg, "m1", NULL, &err), 0);
	assert_int_equal(iso_cgroup_attach(&cg, "m1", 4242, &err), 0);
	const char *procs =
	    cg.version == ISO_CGROUP_V2 ? "m1/cgroup.procs" : "memory/m1/cgroup.procs";
	assert_string_equal(get(t->root, procs), "4242");
	assert_int_equal(iso_cgroup_destroy(&cg, "m1", &err), -EBUSY);
	assert_int_equal(err.code, ISO_E_CONFLICT);
	assert_true(iso_cgroup_exists(&cg, "m1"));
	if (cg.version == ISO_CGROUP_V1) /* left whole: every hierarchy still has it */
		assert_true(present(t->root, "cpuset/m1") && present(t->root, "pids/m1") &&
		            present(t->root, "devices/m1"));
	/* The caller moved it away (on v1, out of every hierarchy). */
	const char *all[] = {"m1/cgroup.procs", "cpuset/m1/cgroup.procs", "memory/m1/cgroup.procs",
	                     "pids/m1/cgroup.procs", "devices/m1/cgroup.procs"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(all); i++)
		if (present(t->root, all[i]))
			put(t->root, all[i], "");
	assert_int_equal(iso_cgroup_destroy(&cg, "m1", &err), 0);
	assert_false(iso_cgroup_exists(&cg, "m1"));
}

static void test_v1_create_files(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};
	struct iso_cgroup_device devs[] = {
	    {.type = 'c', .major = 1, .minor = 3, .access = "wr"},
	    {.type = 'c', .major = 195, .minor = -1, .access = "rwm"},
	};
	struct iso_cgroup_limits lim = {.memory_max = 100 << 20,
	                                .pids_max = 64,
	                                .filter_devices = true,
	                                .devices = devs,
	                                .n_devices = 2};

	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	assert_int_equal(iso_cgroup_create(&cg, "j1", &lim, &err), 0);
	/* No list given: the parent's cpus and mems, or the cpuset takes no task. */
	assert_string_equal(get(t->root, "cpuset/j1/cpuset.cpus"), "0-7");
	assert_string_equal(get(t->root, "cpuset/j1/cpuset.mems"), "0-1");
	assert_string_equal(get(t->root, "memory/j1/memory.limit_in_bytes"), "104857600");
	assert_false(present(t->root, "memory/j1/memory.oom_control")); /* default kept */
	assert_string_equal(get(t->root, "pids/j1/pids.max"), "64");
	assert_string_equal(get(t->root, "devices/j1/devices.deny"), "a");
	assert_string_equal(get(t->root, "devices/j1/devices.allow"), "c 1:3 rw\nc 195:* rwm");
	assert_false(present(t->root, "freezer/j1"));

	/* The kernel's devices.list holds our rules (in its own order): nothing
	 * is written again, so running processes never see a deny-all moment. */
	put(t->root, "devices/j1/devices.list", "c 195:* rwm\nc 1:3 rw\n");
	put(t->root, "devices/j1/devices.allow", "");
	const char *files[] = {"cpuset/j1/cpuset.cpus", "memory/j1/memory.limit_in_bytes",
	                       "pids/j1/pids.max", "devices/j1/devices.deny",
	                       "devices/j1/devices.allow"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(files); i++)
		stamp_old(t->root, files[i]);
	assert_int_equal(iso_cgroup_create(&cg, "j1", &lim, &err), 0);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(files); i++)
		assert_int_equal(mtime(t->root, files[i]), 1000);

	/* A different list is rewritten from deny-all. */
	lim.n_devices = 1;
	lim.cpus = "4";
	assert_int_equal(iso_cgroup_create(&cg, "j1", &lim, &err), 0);
	assert_string_equal(get(t->root, "devices/j1/devices.allow"), "c 1:3 rw");
	assert_string_equal(get(t->root, "cpuset/j1/cpuset.cpus"), "4");

	assert_int_equal(iso_cgroup_destroy(&cg, "j1", &err), 0);
	const char *ctrls[] = {"cpuset/j1", "memory/j1", "pids/j1", "devices/j1"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(ctrls); i++)
		assert_false(present(t->root, ctrls[i]));
}

static void test_v1_missing_controller(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};
	char path[256];

	snprintf(path, sizeof(path), "%s/pids/cgroup.procs", t->root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	assert_false(cg.controllers & ISO_CGROUP_PIDS);
	struct iso_cgroup_limits lim = {.pids_max = 5};
	assert_int_equal(iso_cgroup_create(&cg, "j1", &lim, &err), -EAGAIN);
	assert_string_equal(err.field, "pids_max");
	assert_false(iso_cgroup_exists(&cg, "j1"));
}

/* A write that fails half-way removes the group it created. */
static void test_no_partial_state(void **state)
{
	struct tree *t = *state;
	struct iso_cgroup cg;
	struct iso_error err = {0};

	assert_int_equal(iso_cgroup_open(t->root, &cg, &err), 0);
	/* No parent cpus to copy: the cpuset step fails after the mkdirs. */
	char path[256];
	snprintf(path, sizeof(path), "%s/cpuset/cpuset.cpus", t->root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(iso_cgroup_create(&cg, "j1", NULL, &err), -ENOENT);
	assert_string_equal(err.field, "cpus");
	assert_false(iso_cgroup_exists(&cg, "j1"));
	assert_false(present(t->root, "memory/j1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_open_detects, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_open_detects, setup_v1, teardown),
	    cmocka_unit_test_setup_teardown(test_v2_create_files, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_v2_devices_need_cgroup2, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_rdma_files, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_rdma_files, setup_v1, teardown),
	    cmocka_unit_test_setup_teardown(test_rdma_bad_input, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_rdma_unavailable, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_rdma_unavailable, setup_v1, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_input, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_input, setup_v1, teardown),
	    cmocka_unit_test_setup_teardown(test_busy, setup_v2, teardown),
	    cmocka_unit_test_setup_teardown(test_busy, setup_v1, teardown),
	    cmocka_unit_test_setup_teardown(test_v1_create_files, setup_v1, teardown),
	    cmocka_unit_test_setup_teardown(test_v1_missing_controller, setup_v1, teardown),
	    cmocka_unit_test_setup_teardown(test_no_partial_state, setup_v1, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_sandboxes.c: the node agent's sandbox parts that need no kernel
 * features (src/agent/cpuset.c, devices.c, socket.c, sandboxes.c; issue
 * 14): the cores a member gets from a fake sysfs tree (NUMA-near its GPU,
 * never a core another member holds, not enough free), the device nodes it
 * may open from fake /dev, /proc and sysfs trees, the socket's request
 * parser and its answers (root only; "not on this node", "released", "not
 * ready yet (why)") over a real unix socket, the records' strict decode.
 * The sandboxes themselves, on the real kernel, are test_sandboxes_real. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/agent/internal.h"

#define A1 "a-0123456789abcdef"
#define A2 "a-00000000000000aa"

static char dir[PATH_MAX];

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX * 2], cmd[PATH_MAX * 3];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/test_sandboxes.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

/* ---- cpu masks ---- */

static void test_cpumask_round_trip(void **state)
{
	static const char *const good[] = {"0", "0-3", "0-3,8", "1,3,5-7,64-127", ""};
	static const char *const bad[] = {"-1",  "3-1",  "0,",     ",0",   "0-",   "a",
	                                  "0 1", "4096", "0-4096", "1,,2", "0\n\n"};
	struct agent_cpumask m;
	char buf[256];

	for (size_t i = 0; i < ISO_ARRAY_SIZE(good); i++) {
		assert_int_equal(agent_cpumask_parse(good[i], &m), 0);
		assert_int_equal(agent_cpumask_format(&m, buf, sizeof(buf)), 0);
		assert_string_equal(buf, good[i]);
	}
	assert_int_equal(agent_cpumask_parse("0-3,8\n", &m), 0);
	assert_int_equal(agent_cpumask_count(&m), 5);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++)
		assert_int_equal(agent_cpumask_parse(bad[i], &m), -EINVAL);
	assert_int_equal(agent_cpumask_parse("0-3,8", &m), 0);
	assert_int_equal(agent_cpumask_format(&m, buf, 4), -ENOSPC);
}

/* ---- cores ---- */

/* Two NUMA nodes of four cores each; the GPU 0000:18:00.0 sits on node 1. */
static void two_nodes(void)
{
	put("sys/devices/system/cpu/online", "0-7\n");
	put("sys/devices/system/node/online", "0-1\n");
	put("sys/devices/system/node/node0/cpulist", "0-3\n");
	put("sys/devices/system/node/node1/cpulist", "4-7\n");
	put("sys/bus/pci/devices/0000:18:00.0/numa_node", "1\n");
	put("sys/bus/pci/devices/0000:3b:00.0/numa_node", "-1\n");
}

static void choose(const char *pci, unsigned n, const char *taken, const char *want_cpus,
                   const char *want_mems)
{
	struct agent_cpumask t;
	struct iso_error e = {0};
	char cpus[128], mems[128];

	assert_int_equal(agent_cpumask_parse(taken, &t), 0);
	assert_int_equal(
	    agent_cpuset_choose(dir, pci, n, &t, cpus, sizeof(cpus), mems, sizeof(mems), &e), 0);
	assert_string_equal(cpus, want_cpus);
	assert_string_equal(mems, want_mems);
}

static void test_cores_near_the_gpu(void **state)
{
	two_nodes();
	/* NVML's spelling of the address, as the GPU driver reports it */
	choose("00000000:18:00.0", 2, "", "4-5", "1");
	choose("0000:18:00.0", 2, "4", "5-6", "1");
	/* the near node is full: the lowest free others */
	choose("00000000:18:00.0", 2, "4-6", "0,7", "0-1");
	/* topology unknown (numa_node -1, no such device, no GPU): lowest free */
	choose("00000000:3B:00.0", 2, "", "0-1", "0");
	choose("00000000:AF:00.0", 2, "0", "1-2", "0");
	choose(NULL, 3, "1", "0,2-3", "0");
}

static void test_cores_never_shared(void **state)
{
	struct agent_cpumask taken = {0}, m;
	struct iso_error e = {0};
	char cpus[128], mems[128];

	two_nodes();
	/* four members of two cores: each gets its own, all eight used */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(agent_cpuset_choose(dir, "00000000:18:00.0", 2, &taken, cpus,
		                                     sizeof(cpus), mems, sizeof(mems), &e),
		                 0);
		assert_int_equal(agent_cpumask_parse(cpus, &m), 0);
		assert_int_equal(agent_cpumask_count(&m), 2);
		for (size_t k = 0; k < ISO_ARRAY_SIZE(m.w); k++) {
			assert_int_equal(m.w[k] & taken.w[k], 0);
			taken.w[k] |= m.w[k];
		}
	}
	assert_int_equal(agent_cpumask_count(&taken), 8);
	/* a fifth: not enough free cores, saying so */
	assert_int_equal(
	    agent_cpuset_choose(dir, NULL, 1, &taken, cpus, sizeof(cpus), mems, sizeof(mems), &e),
	    -ENOSPC);
	assert_string_equal(e.field, "cpus");
	assert_string_equal(e.message, "not enough free cores: 1 wanted, 0 free");
	assert_string_equal(cpus, "");
}

static void test_cores_offline_not_chosen_and_no_nodes(void **state)
{
	struct agent_cpumask taken = {0};
	struct iso_error e = {0};
	char cpus[128], mems[128];

	/* a host without NUMA nodes in sysfs, CPU 1 offline */
	put("sys/devices/system/cpu/online", "0,2-3\n");
	choose(NULL, 2, "", "0,2", "");
	assert_int_equal(
	    agent_cpuset_choose(dir, NULL, 4, &taken, cpus, sizeof(cpus), mems, sizeof(mems), &e),
	    -ENOSPC);
	assert_string_equal(e.message, "not enough free cores: 4 wanted, 3 free");
	/* no sysfs at all: an error, not a guess */
	snprintf(cpus, sizeof(cpus), "x");
	assert_true(agent_cpuset_choose("/nonexistent", NULL, 1, &taken, cpus, sizeof(cpus), mems,
	                                sizeof(mems), &e) < 0);
	assert_string_equal(e.field, "cpus");
}

/* ---- devices ---- */

static bool mknod_at(const char *rel, unsigned maj, unsigned min)
{
	char path[PATH_MAX * 2], cmd[PATH_MAX * 3];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	return mknod(path, S_IFCHR | 0600, makedev(maj, min)) == 0;
}

static void test_device_list_from_fake_trees(void **state)
{
	struct agent_host_roots roots;
	char devroot[PATH_MAX + 8], procroot[PATH_MAX + 8];
	char out[AGENT_DEVICES_MAX][AGENT_DEV_PATH];
	struct agent_gpu_slice gpus[] = {{1, 3, 0}, {2, -1, -1}};
	struct agent_vf_ref vfs[] = {{"mlx5_0", 2}};
	struct iso_error e = {0};
	char want[16][AGENT_DEV_PATH];
	size_t n = 0, nw = 0;

	if (!mknod_at("dev/nvidiactl", 195, 255)) {
		skip(); /* mknod needs root (CI runs as root) */
		return;
	}
	mknod_at("dev/nvidia-uvm", 510, 0);
	/* nvidia-uvm-tools absent on this host: not listed */
	mknod_at("dev/nvidia0", 195, 0);
	mknod_at("dev/nvidia1", 195, 1);
	mknod_at("dev/nvidia2", 195, 2);
	mknod_at("dev/nvidia-caps/nvidia-cap30", 237, 30);
	mknod_at("dev/nvidia-caps/nvidia-cap31", 237, 31);
	mknod_at("dev/nvidia-caps/nvidia-cap40", 237, 40);
	mknod_at("dev/infiniband/uverbs0", 231, 192);
	mknod_at("dev/infiniband/uverbs3", 231, 195);
	mknod_at("dev/infiniband/rdma_cm", 10, 58);
	put("proc/driver/nvidia-caps/mig-minors", "config 1\nmonitor 2\n"
	                                          "gpu0/gi3/access 12\ngpu1/gi3/access 30\n"
	                                          "gpu1/gi3/ci0/access 31\ngpu1/gi4/access 40\n");
	put("sys/class/infiniband/mlx5_0/device/virtfn2/infiniband_verbs/uverbs3/dev", "231:195\n");
	put("sys/class/infiniband/mlx5_0/device/virtfn1/infiniband_verbs/uverbs0/dev", "231:192\n");
	snprintf(devroot, sizeof(devroot), "%s/dev", dir);
	snprintf(procroot, sizeof(procroot), "%s/proc", dir);
	roots = (struct agent_host_roots){devroot, procroot, dir};
	assert_int_equal(agent_sandbox_devices(&roots, gpus, 2, vfs, 1, out, &n, &e), 0);
#define WANT(rel) snprintf(want[nw++], AGENT_DEV_PATH, "%s/%s", devroot, rel)
	WANT("nvidiactl");
	WANT("nvidia-uvm");
	WANT("nvidia1");
	WANT("nvidia-caps/nvidia-cap30");
	WANT("nvidia-caps/nvidia-cap31");
	WANT("nvidia2");
	WANT("infiniband/uverbs3");
	WANT("infiniband/rdma_cm");
	assert_int_equal(n, nw);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(out[i], want[i]);
	/* no GPU, no VF: nothing (not even nvidiactl) */
	assert_int_equal(agent_sandbox_devices(&roots, NULL, 0, NULL, 0, out, &n, &e), 0);
	assert_int_equal(n, 0);
	/* a GPU instance the driver's minors do not list: the GPU only */
	gpus[0] = (struct agent_gpu_slice){0, 7, 0};
	assert_int_equal(agent_sandbox_devices(&roots, gpus, 1, NULL, 0, out, &n, &e), 0);
	assert_int_equal(n, 3);
	snprintf(want[0], AGENT_DEV_PATH, "%s/nvidia0", devroot);
	assert_string_equal(out[2], want[0]);
}

/* ---- the socket ---- */

static void test_request_parser_bad_input(void **state)
{
	static const struct {
		const char *text, *field, *message;
	} bad[] = {
	    {"", "", NULL},
	    {"[]", "", "expected a JSON object"},
	    {"{\"allocation\":\"" A1 "\"}", "member", NULL},
	    {"{\"member\":0}", "allocation", NULL},
	    {"{\"allocation\":\"" A1 "\",\"member\":0,\"x\":1}", "x", NULL},
	    {"{\"allocation\":\"" A1 "\",\"member\":\"0\"}", "member", NULL},
	    {"{\"allocation\":\"" A1 "\",\"member\":-1}", "member", NULL},
	    {"{\"allocation\":\"" A1 "\",\"member\":1024}", "member", NULL},
	    {"{\"allocation\":\"" A1 "\",\"member\":0.5}", "member", NULL},
	    {"{\"allocation\":7,\"member\":0}", "allocation", NULL},
	    {"{\"allocation\":\"a-0123\",\"member\":0}", "allocation", NULL},
	    {"{\"allocation\":\"../../etc\",\"member\":0}", "allocation", NULL},
	    {"{\"allocation\":\"a-0123456789ABCDEF\",\"member\":0}", "allocation", NULL},
	    {"{\"allocation\":\"" A1 "\",\"member\":0,\"member\":1}", "", NULL},
	    {"{\"allocation\":\"" A1 "\",\"member\":0} x", "", NULL},
	};
	char big[AGENT_REQUEST_MAX + 2];
	struct agent_request rq;
	struct iso_error e;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		memset(&e, 0, sizeof(e));
		assert_true(agent_request_parse(bad[i].text, strlen(bad[i].text), &rq, &e) < 0);
		if (strcmp(e.field, bad[i].field) != 0)
			fail_msg("%s: field \"%s\", want \"%s\" (%s)", bad[i].text, e.field,
			         bad[i].field, e.message);
		if (bad[i].message)
			assert_string_equal(e.message, bad[i].message);
		assert_string_equal(rq.allocation, "");
		assert_string_equal(rq.key, "");
	}
	memset(big, ' ', sizeof(big));
	assert_true(agent_request_parse(big, sizeof(big), &rq, &e) < 0);
	assert_int_equal(e.code, ISO_E_TOO_LARGE);
	{
		const char *good = "{\"allocation\":\"" A1 "\",\"member\":3}\n";
		assert_int_equal(agent_request_parse(good, strlen(good), &rq, &e), 0);
	}
	assert_false(rq.by_key);
	assert_string_equal(rq.allocation, A1);
	assert_int_equal(rq.member, 3);
	{
		const char *good = "{\"key\":\"slurm-42\",\"tenant\":\"acme\"}";
		assert_int_equal(agent_request_parse(good, strlen(good), &rq, &e), 0);
	}
	assert_true(rq.by_key);
	assert_string_equal(rq.tenant, "acme");
	assert_string_equal(rq.key, "slurm-42");
}

#define K16 "0123456789abcdef"

/* issue 15: the second shape, {"tenant": T, "key": K}, as strictly. */
static void test_key_request_bad_input(void **state)
{
	static const struct {
		const char *text, *field;
	} bad[] = {
	    {"{\"tenant\":\"acme\"}", "key"},
	    {"{\"key\":\"slurm-1\"}", "tenant"},
	    {"{\"tenant\":\"acme\",\"key\":\"slurm-1\",\"member\":0}", "member"},
	    {"{\"tenant\":\"acme\",\"key\":\"slurm-1\",\"allocation\":\"" A1 "\"}", "allocation"},
	    {"{\"allocation\":\"" A1 "\",\"member\":0,\"key\":\"slurm-1\"}", "allocation"},
	    {"{\"tenant\":7,\"key\":\"slurm-1\"}", "tenant"},
	    {"{\"tenant\":\"Acme!\",\"key\":\"slurm-1\"}", "tenant"},
	    {"{\"tenant\":\"\",\"key\":\"slurm-1\"}", "tenant"},
	    {"{\"tenant\":\"acme\",\"key\":1}", "key"},
	    {"{\"tenant\":\"acme\",\"key\":\"\"}", "key"},
	    {"{\"tenant\":\"acme\",\"key\":\"slurm 1\"}", "key"},
	    {"{\"tenant\":\"acme\",\"key\":\"../x\"}", "key"},
	    {"{\"tenant\":\"acme\",\"key\":\"" K16 K16 K16 K16 K16 K16 K16 K16 "x\"}", "key"},
	    {"{\"tenant\":\"acme\",\"key\":null}", "key"},
	    {"{\"tenant\":\"acme\",\"key\":\"a\",\"key\":\"b\"}", ""},
	};
	struct agent_request rq;
	struct iso_error e;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		memset(&e, 0, sizeof(e));
		assert_true(agent_request_parse(bad[i].text, strlen(bad[i].text), &rq, &e) < 0);
		if (strcmp(e.field, bad[i].field) != 0)
			fail_msg("%s: field \"%s\", want \"%s\" (%s)", bad[i].text, e.field,
			         bad[i].field, e.message);
		assert_false(rq.by_key);
	}
	/* 128 characters is the longest key */
	{
		const char *good =
		    "{\"tenant\":\"acme\",\"key\":\"" K16 K16 K16 K16 K16 K16 K16 K16 "\"}";
		assert_int_equal(agent_request_parse(good, strlen(good), &rq, &e), 0);
		assert_int_equal(strlen(rq.key), 128);
	}
}

static struct agent_table_entry entry(const char *alloc, unsigned member, bool ready,
                                      const char *reason)
{
	struct agent_table_entry e = {.member = member, .ready = ready};

	iso_strlcpy(e.node, "n1", sizeof(e.node));
	iso_strlcpy(e.allocation, alloc, sizeof(e.allocation));
	iso_strlcpy(e.reason, reason, sizeof(e.reason));
	snprintf(e.sb.name, sizeof(e.sb.name), "iso-%s-%u", alloc, member);
	e.sb.holder_pid = 4242;
	e.sb.holder_start = 777;
	iso_strlcpy(e.cpus, "2-3", sizeof(e.cpus));
	return e;
}

/* The table as a node thread leaves it: A1/0 ready, A1/1 waiting; then A1/1
 * released. Lookups through the real socket, as exec makes them. */
static void test_socket_answers(void **state)
{
	struct agent_host_roots roots = {"/dev", "/proc", "/"};
	struct agent_sandboxes s;
	struct agent_socket *sk = NULL;
	struct iso_agent_sandbox_handle h;
	struct iso_error e = {0};
	struct agent_table_entry v[2];
	atomic_bool stop = false;
	struct iso_agent_desired none = {0};
	json_t *st = json_object();
	struct agent_sandbox_tick tick;
	char path[PATH_MAX + 32];
	struct stat sb;

	assert_int_equal(agent_sandboxes_init(&s, dir, false, NULL, &roots, &e), 0);
	iso_strlcpy(s.cg.root, "/sys/fs/cgroup", sizeof(s.cg.root));
	assert_int_equal(agent_socket_start(&s, dir, &stop, &sk, &e), 0);
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	assert_int_equal(stat(path, &sb), 0);
	assert_true(S_ISSOCK(sb.st_mode));
	assert_int_equal(sb.st_mode & 0777, 0600);

	/* nothing published: not on this node */
	assert_true(iso_agent_sandbox_lookup(dir, A1, 0, &h, &e) < 0);
	assert_int_equal(e.code, ISO_E_NOT_FOUND);
	assert_string_equal(e.message, "not on this node");

	v[0] = entry(A1, 0, true, "");
	v[1] = entry(A1, 1, false, "waiting for its GPU instances");
	/* as a node thread's tick leaves the table */
	pthread_mutex_lock(&s.lock);
	s.entries = calloc(2, sizeof(*s.entries));
	memcpy(s.entries, v, sizeof(v));
	s.n = s.cap = 2;
	pthread_mutex_unlock(&s.lock);

	assert_int_equal(iso_agent_sandbox_lookup(dir, A1, 0, &h, &e), 0);
	assert_string_equal(h.sb.name, "iso-" A1 "-0");
	assert_int_equal(h.sb.holder_pid, 4242);
	assert_int_equal(h.sb.holder_start, 777);
	assert_string_equal(h.cgroup_root, "/sys/fs/cgroup");
	assert_string_equal(h.cpus, "2-3");
	assert_false(h.io_uring);

	assert_true(iso_agent_sandbox_lookup(dir, A1, 1, &h, &e) < 0);
	assert_int_equal(e.code, ISO_E_UNAVAILABLE);
	assert_string_equal(e.message, "not ready yet (waiting for its GPU instances)");
	assert_true(iso_agent_sandbox_lookup(dir, A2, 0, &h, &e) < 0);
	assert_string_equal(e.message, "not on this node");

	/* the node's next tick no longer holds them: released */
	iso_strlcpy(none.node, "n1", sizeof(none.node));
	assert_int_equal(agent_sandboxes_reconcile(&s, NULL, "n1", &none, st, &tick, &e), 0);
	assert_true(iso_agent_sandbox_lookup(dir, A1, 0, &h, &e) < 0);
	assert_int_equal(e.code, ISO_E_NOT_FOUND);
	assert_string_equal(e.message, "released");
	assert_true(iso_agent_sandbox_lookup(dir, A1, 1, &h, &e) < 0);
	assert_string_equal(e.message, "released");
	assert_string_equal(json_string_value(json_object_get(st, "sandbox_mode")), "off");
	assert_int_equal(json_array_size(json_object_get(st, "sandboxes")), 0);

	/* a bad request gets a clear answer, not a dropped connection */
	{
		char *a = agent_socket_answer(&s, 0, "{\"member\":0}", 12);
		assert_non_null(strstr(a, "\"error\":\"invalid_argument\""));
		assert_non_null(strstr(a, "allocation"));
		free(a);
		a = agent_socket_answer(&s, 1000, "{\"allocation\":\"" A1 "\",\"member\":0}", 37);
		assert_non_null(strstr(a, "\"error\":\"forbidden\""));
		free(a);
	}

	/* a caller that is not root is refused by the socket (SO_PEERCRED) */
	if (geteuid() == 0) {
		pid_t pid = fork();
		int status;

		assert_true(pid >= 0);
		if (pid == 0) {
			struct iso_error ce = {0};
			/* the socket is 0600: make it reachable so that the
			 * refusal comes from the credentials, not the mode */
			if (chmod(path, 0666) < 0 || chmod(dir, 0755) < 0 || setgid(65534) < 0 ||
			    setuid(65534) < 0)
				_exit(3);
			v[0] = entry(A1, 0, true, "");
			if (iso_agent_sandbox_lookup(dir, A1, 0, &h, &ce) == 0)
				_exit(1);
			_exit(ce.code == ISO_E_FORBIDDEN && strstr(ce.message, "only root") != NULL
			          ? 0
			          : 2);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	atomic_store(&stop, true);
	agent_socket_stop(sk);
	assert_int_equal(stat(path, &sb), -1);
	agent_sandboxes_free(&s);
	json_decref(st);
}

/* issue 15: a member found by (tenant, key), through the real socket, over
 * what the node's ticks publish (sandboxes off here, as on a node run with
 * --sandbox off: ready once its GPU instances and VF are), the sim VF
 * driver's P_Key table, then a real-mode entry with its handle. */
static void test_member_lookup_by_key(void **state)
{
	struct agent_host_roots roots = {"/dev", "/proc", "/"};
	struct agent_sandboxes s;
	struct agent_socket *sk = NULL;
	struct iso_agent_member_info mi;
	struct iso_error e = {0};
	atomic_bool stop = false;
	struct iso_agent_member_want mw = {
	    .allocation = A1, .member = 0, .tenant = "acme", .key = "slurm-42", .cpus = 1};
	struct iso_agent_vf_member vm = {.allocation = A1, .member = 0};
	struct iso_agent_vf_want vw = {.index = 3,
	                               .device = "mlx5_0",
	                               .guid = 0x0002c90300a0b0c1ULL,
	                               .tenant = "acme",
	                               .pkey = 0x8001,
	                               .n_members = 1,
	                               .members = &vm};
	struct iso_agent_desired d = {
	    .node = "n1", .n_members = 1, .members = &mw, .n_vfs = 1, .vfs = &vw};
	struct iso_agent_desired none = {.node = "n1"};
	struct iso_vf_host sim = {.driver = ISO_VF_SIM};
	struct agent_sandbox_tick tick;
	struct iso_vf_tick vt;
	char node_dir[PATH_MAX + 8];
	json_t *st;

	assert_int_equal(agent_sandboxes_init(&s, dir, false, NULL, &roots, &e), 0);
	s.vf = sim;
	s.nodes_expected = 1;
	assert_int_equal(agent_socket_start(&s, dir, &stop, &sk, &e), 0);

	/* before the node's first tick: the agent is starting, not "unknown" */
	assert_true(iso_agent_member_lookup(dir, "acme", "slurm-42", &mi, &e) < 0);
	assert_int_equal(e.code, ISO_E_UNAVAILABLE);
	assert_string_equal(e.message, "not ready yet (the agent is starting)");
	assert_string_equal(mi.reason, e.message);

	/* its instance not ready yet */
	st = json_pack("{s:[{s:s, s:i, s:s, s:b}], s:[{s:i, s:b}]}", "instances", "allocation", A1,
	               "member", 0, "uuid", "MIG-aaa", "ready", 0, "vfs", "index", 3, "ready", 1);
	assert_int_equal(agent_sandboxes_reconcile(&s, NULL, "n1", &d, st, &tick, &e), 0);
	json_decref(st);
	assert_true(iso_agent_member_lookup(dir, "acme", "slurm-42", &mi, &e) < 0);
	assert_int_equal(e.code, ISO_E_UNAVAILABLE);
	assert_string_equal(e.message, "not ready yet (waiting for its GPU instances)");
	assert_false(mi.ready);

	/* ready: two instances (another member's is not its), its VF, no
	 * sandbox on this node */
	st = json_pack("{s:[{s:s, s:i, s:s, s:b}, {s:s, s:i, s:s, s:b}, {s:s, s:i, s:s, s:b}],"
	               " s:[{s:i, s:b}]}",
	               "instances", "allocation", A1, "member", 0, "uuid", "MIG-aaa", "ready", 1,
	               "allocation", A1, "member", 1, "uuid", "MIG-zzz", "ready", 1, "allocation",
	               A1, "member", 0, "uuid", "MIG-bbb", "ready", 1, "vfs", "index", 3, "ready",
	               1);
	assert_int_equal(agent_sandboxes_reconcile(&s, NULL, "n1", &d, st, &tick, &e), 0);
	assert_int_equal(iso_agent_member_lookup(dir, "acme", "slurm-42", &mi, &e), 0);
	assert_string_equal(mi.allocation, A1);
	assert_int_equal(mi.member, 0);
	assert_true(mi.ready);
	assert_string_equal(mi.cuda_visible_devices, "MIG-aaa,MIG-bbb");
	assert_true(mi.has_pkey);
	assert_int_equal(mi.pkey, 0x8001);
	assert_int_equal(mi.pkey_index, -1); /* the VF's table is not set up yet */
	assert_false(mi.sandbox_real);
	assert_false(mi.has_sandbox);

	/* the sim VF driver sets the VF up: its table holds the tenant's
	 * P_Key at index 1, which the answer reads */
	snprintf(node_dir, sizeof(node_dir), "%s/n1", dir);
	assert_int_equal(mkdir(node_dir, 0700), 0);
	assert_int_equal(iso_agent_vf_reconcile(&sim, node_dir, &d, st, &vt, &e), 0);
	assert_int_equal(vt.programmed, 1);
	json_decref(st);
	assert_int_equal(iso_agent_member_lookup(dir, "acme", "slurm-42", &mi, &e), 0);
	assert_int_equal(mi.pkey_index, 1);

	/* another tenant's key, or a key nobody has: not here */
	assert_true(iso_agent_member_lookup(dir, "globex", "slurm-42", &mi, &e) < 0);
	assert_int_equal(e.code, ISO_E_NOT_FOUND);
	assert_string_equal(e.message, "no allocation with key slurm-42 for tenant globex on this "
	                               "node");
	assert_true(iso_agent_member_lookup(dir, "acme", "slurm-43", &mi, &e) < 0);
	assert_int_equal(e.code, ISO_E_NOT_FOUND);
	/* bad arguments never reach the agent */
	assert_true(iso_agent_member_lookup(dir, "Acme!", "slurm-42", &mi, &e) < 0);
	assert_string_equal(e.field, "tenant");
	assert_true(iso_agent_member_lookup(dir, "acme", "slurm 42", &mi, &e) < 0);
	assert_string_equal(e.field, "key");

	/* released: the next tick no longer holds it; the VF's P_Key goes too */
	st = json_object();
	assert_int_equal(agent_sandboxes_reconcile(&s, NULL, "n1", &none, st, &tick, &e), 0);
	assert_true(iso_agent_member_lookup(dir, "acme", "slurm-42", &mi, &e) < 0);
	assert_int_equal(e.code, ISO_E_NOT_FOUND);
	assert_string_equal(e.message, "released");
	{
		int idx = 7;
		assert_int_equal(iso_agent_vf_reconcile(&sim, node_dir, &none, st, &vt, &e), 0);
		assert_int_equal(vt.restored, 1);
		assert_int_equal(
		    iso_agent_vf_pkey_index(&sim, node_dir, "mlx5_0", 3, 0x8001, &idx, &e), 0);
		assert_int_equal(idx, -1);
	}
	json_decref(st);

	/* a real-mode node: the answer carries the sandbox's handle */
	{
		struct agent_table_entry v = entry(A2, 2, true, "");
		iso_strlcpy(v.tenant, "acme", sizeof(v.tenant));
		iso_strlcpy(v.key, "slurm-7", sizeof(v.key));
		iso_strlcpy(v.cuda, "GPU-1", sizeof(v.cuda));
		v.member_ready = true;
		pthread_mutex_lock(&s.lock);
		s.real = true;
		iso_strlcpy(s.cg.root, "/sys/fs/cgroup", sizeof(s.cg.root));
		memcpy(&s.entries[0], &v, sizeof(v));
		s.n = 1;
		pthread_mutex_unlock(&s.lock);
	}
	assert_int_equal(iso_agent_member_lookup(dir, "acme", "slurm-7", &mi, &e), 0);
	assert_true(mi.sandbox_real);
	assert_true(mi.has_sandbox);
	assert_string_equal(mi.sandbox.sb.name, "iso-" A2 "-2");
	assert_int_equal(mi.sandbox.sb.holder_pid, 4242);
	assert_string_equal(mi.sandbox.cgroup_root, "/sys/fs/cgroup");
	assert_false(mi.has_pkey);
	assert_int_equal(mi.pkey_index, -1);
	assert_string_equal(mi.cuda_visible_devices, "GPU-1");

	atomic_store(&stop, true);
	agent_socket_stop(sk);
	agent_sandboxes_free(&s);
}

/* The P_Key index as the mlx5 driver reads it from a fake sysfs tree (the
 * VF's RDMA device, ports/1/pkeys/<i>): full membership first, then a
 * limited one; ibsim and none cannot read it. */
static void test_sim_pkey_table(void **state)
{
	struct iso_vf_host mlx5 = {.driver = ISO_VF_MLX5, .sysfs_root = dir};
	struct iso_vf_host ibsim = {.driver = ISO_VF_IBSIM, .ibsim_net = "/nonexistent"};
	struct iso_error e = {0};
	char cmd[PATH_MAX * 2 + 256];
	int idx = 9;

	put("sys/bus/pci/devices/0000:81:00.2/vendor", "0x15b3\n");
	snprintf(
	    cmd, sizeof(cmd),
	    "mkdir -p '%s/sys/class/infiniband/mlx5_0/device' && "
	    "ln -s '%s/sys/bus/pci/devices/0000:81:00.2' "
	    "'%s/sys/class/infiniband/mlx5_0/device/virtfn1' && "
	    "mkdir -p '%s/sys/class/infiniband/mlx5_3' && "
	    "ln -s '%s/sys/bus/pci/devices/0000:81:00.2' '%s/sys/class/infiniband/mlx5_3/device'",
	    dir, dir, dir, dir, dir, dir);
	assert_int_equal(system(cmd), 0);
	put("sys/class/infiniband/mlx5_3/ports/1/pkeys/0", "0xffff\n");
	put("sys/class/infiniband/mlx5_3/ports/1/pkeys/1", "0x0000\n");
	put("sys/class/infiniband/mlx5_3/ports/1/pkeys/2", "0x0001\n"); /* limited */
	put("sys/class/infiniband/mlx5_3/ports/1/pkeys/3", "garbage\n");
	put("sys/class/infiniband/mlx5_3/ports/1/pkeys/4", "0x8001\n");
	assert_int_equal(iso_agent_vf_pkey_index(&mlx5, dir, "mlx5_0", 1, 0x8001, &idx, &e), 0);
	assert_int_equal(idx, 4);
	put("sys/class/infiniband/mlx5_3/ports/1/pkeys/4", "0x0000\n");
	assert_int_equal(iso_agent_vf_pkey_index(&mlx5, dir, "mlx5_0", 1, 0x8001, &idx, &e), 0);
	assert_int_equal(idx, 2);
	assert_int_equal(iso_agent_vf_pkey_index(&mlx5, dir, "mlx5_0", 1, 0x8002, &idx, &e), 0);
	assert_int_equal(idx, -1);
	/* another VF (no RDMA device seen) */
	assert_int_equal(iso_agent_vf_pkey_index(&mlx5, dir, "mlx5_0", 2, 0x8001, &idx, &e), 0);
	assert_int_equal(idx, -1);
	assert_int_equal(iso_agent_vf_pkey_index(&ibsim, dir, "mlx5_0", 1, 0x8001, &idx, &e), 0);
	assert_int_equal(idx, -1);
	assert_true(iso_agent_vf_pkey_index(&mlx5, dir, "../x", 1, 0x8001, &idx, &e) < 0);
}

/* ---- records ---- */

static void test_record_round_trip_and_bad_input(void **state)
{
	static const char *const bad[] = {
	    "",
	    "{}",
	    "{\"node\":\"n1\",\"allocation\":\"" A1 "\",\"member\":0,\"holder_pid\":5,"
	    "\"holder_start\":6,\"cpus\":\"3-1\",\"mems\":\"\",\"io_uring\":false}",
	    "{\"node\":\"N 1\",\"allocation\":\"" A1 "\",\"member\":0,\"holder_pid\":5,"
	    "\"holder_start\":6,\"cpus\":\"1\",\"mems\":\"\",\"io_uring\":false}",
	    "{\"node\":\"n1\",\"allocation\":\"../x\",\"member\":0,\"holder_pid\":5,"
	    "\"holder_start\":6,\"cpus\":\"1\",\"mems\":\"\",\"io_uring\":false}",
	    "{\"node\":\"n1\",\"allocation\":\"" A1 "\",\"member\":0,\"holder_pid\":-5,"
	    "\"holder_start\":6,\"cpus\":\"1\",\"mems\":\"\",\"io_uring\":false}",
	    "{\"node\":\"n1\",\"allocation\":\"" A1 "\",\"member\":0,\"holder_pid\":5,"
	    "\"holder_start\":6,\"cpus\":\"\",\"mems\":\"\",\"io_uring\":false}",
	    "{\"node\":\"n1\",\"allocation\":\"" A1 "\",\"member\":0,\"holder_pid\":5,"
	    "\"holder_start\":6,\"cpus\":\"1\",\"mems\":\"\",\"io_uring\":false,\"x\":1}",
	};
	struct agent_sandbox_record r = {0}, back;
	struct iso_error e = {0};
	char sdir[PATH_MAX + 16];

	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++)
		assert_true(agent_record_decode(bad[i], strlen(bad[i]), &back, &e) < 0);
	snprintf(sdir, sizeof(sdir), "%s/sandboxes", dir);
	assert_int_equal(mkdir(sdir, 0700), 0);
	iso_strlcpy(r.node, "n1", sizeof(r.node));
	iso_strlcpy(r.allocation, A1, sizeof(r.allocation));
	r.member = 2;
	snprintf(r.sb.name, sizeof(r.sb.name), "iso-%s-2", A1);
	r.sb.holder_pid = 1234;
	r.sb.holder_start = 99999999999ULL;
	iso_strlcpy(r.cpus, "4-5", sizeof(r.cpus));
	iso_strlcpy(r.mems, "1", sizeof(r.mems));
	r.io_uring = true;
	assert_int_equal(agent_record_store(sdir, &r, &e), 0);
	assert_int_equal(agent_record_load(sdir, r.sb.name, &back, &e), 0);
	assert_string_equal(back.node, "n1");
	assert_string_equal(back.allocation, A1);
	assert_int_equal(back.member, 2);
	assert_string_equal(back.sb.name, r.sb.name);
	assert_int_equal(back.sb.holder_pid, 1234);
	assert_true(back.sb.holder_start == 99999999999ULL);
	assert_string_equal(back.cpus, "4-5");
	assert_string_equal(back.mems, "1");
	assert_true(back.io_uring);
	assert_int_equal(agent_record_load(sdir, "iso-" A2 "-0", &back, &e), -ENOENT);
}

/* An agent that starts finds a record: until its node's first tick the
 * member is "not ready yet (the agent is starting)", neither handed out nor
 * unknown; a tick that no longer holds it makes it "released". */
static void test_records_found_at_start(void **state)
{
	struct agent_host_roots roots = {"/dev", "/proc", "/"};
	struct agent_sandbox_record r = {0};
	struct agent_sandboxes s;
	struct agent_table_entry out;
	struct iso_agent_desired none = {0};
	struct agent_sandbox_tick tick;
	struct iso_error e = {0};
	char sdir[PATH_MAX + 16], reason[300];
	json_t *st = json_object();

	snprintf(sdir, sizeof(sdir), "%s/sandboxes", dir);
	assert_int_equal(mkdir(sdir, 0700), 0);
	iso_strlcpy(r.node, "n1", sizeof(r.node));
	iso_strlcpy(r.allocation, A1, sizeof(r.allocation));
	snprintf(r.sb.name, sizeof(r.sb.name), "iso-%s-0", A1);
	r.sb.holder_pid = 1;
	iso_strlcpy(r.cpus, "0", sizeof(r.cpus));
	assert_int_equal(agent_record_store(sdir, &r, &e), 0);
	assert_int_equal(agent_sandboxes_init(&s, dir, false, NULL, &roots, &e), 0);
	assert_int_equal(agent_sandboxes_lookup(&s, A1, 0, &out, reason, sizeof(reason)), -EAGAIN);
	assert_string_equal(reason, "not ready yet (the agent is starting)");
	iso_strlcpy(none.node, "n1", sizeof(none.node));
	assert_int_equal(agent_sandboxes_reconcile(&s, NULL, "n1", &none, st, &tick, &e), 0);
	assert_int_equal(agent_sandboxes_lookup(&s, A1, 0, &out, reason, sizeof(reason)), -ENOENT);
	assert_string_equal(reason, "released");
	agent_sandboxes_free(&s);
	json_decref(st);
}

/* A CNI record read before its ADD stored the create's answer (allocation
 * "") is the desired member of the same key and tenant, member 0 (its
 * random lease is in the key): the tick's pass plugs the pod in instead of
 * taking the tenant's bridge for unexplained. Anything else stays as read:
 * another tenant's member of that key, another member, a joined or a
 * deleting record, a record with no key. */
static void test_attachment_resolved_by_key(void **state)
{
	struct iso_agent_member_want m[3] = {0};
	struct iso_agent_desired d = {.n_members = 3, .members = m};
	struct agent_attachment att[6] = {0};
	const char *k1 = "cni:n1:00112233445566778899aabbccddeeff:0a0b0c0d";
	const char *k2 = "cni:n1:ffeeddccbbaa99887766554433221100:01020304";

	iso_strlcpy(m[0].allocation, A1, sizeof(m[0].allocation));
	iso_strlcpy(m[0].tenant, "acme", sizeof(m[0].tenant));
	iso_strlcpy(m[0].key, k1, sizeof(m[0].key));
	iso_strlcpy(m[1].allocation, A2, sizeof(m[1].allocation));
	iso_strlcpy(m[1].tenant, "other", sizeof(m[1].tenant));
	iso_strlcpy(m[1].key, k2, sizeof(m[1].key));
	m[2] = m[0];
	m[2].member = 1;
	iso_strlcpy(m[2].allocation, "a-00000000000000bb", sizeof(m[2].allocation));
	iso_strlcpy(m[2].key, k2, sizeof(m[2].key));
	iso_strlcpy(m[2].tenant, "acme", sizeof(m[2].tenant));
	for (size_t i = 0; i < ISO_ARRAY_SIZE(att); i++) {
		iso_strlcpy(att[i].tenant, "acme", sizeof(att[i].tenant));
		iso_strlcpy(att[i].key, k1, sizeof(att[i].key));
		att[i].member = 7;
	}
	iso_strlcpy(att[1].key, k2, sizeof(att[1].key)); /* other's member; acme's is 1 */
	att[2].joined = true;
	att[3].deleting = true;
	att[4].key[0] = '\0';
	iso_strlcpy(att[5].allocation, A2, sizeof(att[5].allocation)); /* answered already */
	agent_attachments_resolve(&d, att, ISO_ARRAY_SIZE(att));
	assert_string_equal(att[0].allocation, A1);
	assert_int_equal(att[0].member, 0);
	for (size_t i = 1; i < 5; i++) {
		assert_string_equal(att[i].allocation, "");
		assert_int_equal(att[i].member, 7);
	}
	assert_string_equal(att[5].allocation, A2);
	assert_int_equal(att[5].member, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpumask_round_trip),
	    cmocka_unit_test_setup_teardown(test_cores_near_the_gpu, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cores_never_shared, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cores_offline_not_chosen_and_no_nodes, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_device_list_from_fake_trees, setup, teardown),
	    cmocka_unit_test(test_request_parser_bad_input),
	    cmocka_unit_test(test_key_request_bad_input),
	    cmocka_unit_test_setup_teardown(test_member_lookup_by_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sim_pkey_table, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_socket_answers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_record_round_trip_and_bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_records_found_at_start, setup, teardown),
	    cmocka_unit_test(test_attachment_resolved_by_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

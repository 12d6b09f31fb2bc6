/* test_sandboxes_real.c: the agent's sandbox lifecycle (src/agent/
 * sandboxes.c; issue 14) on the real kernel, driven through the functions
 * each agent tick calls: a desired member gets its sandbox (a live holder,
 * its cgroup, its record), a second tick keeps it (same holder), a member
 * no longer desired loses it (holder gone, cgroup gone, record gone,
 * "released"), an agent restart keeps a live member's sandbox and removes a
 * released one's, a dead holder is made again on the same cores, too few
 * free cores is "not ready" with the reason, and a command run through
 * the socket's handle, like a child that joins through
 * iso_agent_sandbox_join, is in the member's cgroup with the sandbox's
 * hostname. Then the leak test: 1,000 create/release cycles, counting
 * cgroups, mounts, namespaces, network interfaces and processes before and
 * after. Root only (suite sandbox): skips saying why otherwise.
 *
 * The counts are of what this test could leak, so that other work on the
 * machine does not move them: this process is a child subreaper, so every
 * process a sandbox leaves is its descendant; namespaces are those
 * descendants hold; cgroups are named with this test's allocation prefix;
 * mounts and interfaces are those of a mount and a network namespace of
 * this test's own (made at its start, mounts private), where the sandboxes
 * are made from and where anything they leaked would show. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/agent/internal.h"

#define CG_ROOT "/sys/fs/cgroup"
/* This run's allocation ids: "a-7e57", this process's pid in 6 hex digits,
 * then the member's number, so that two runs at once (two build dirs on
 * one host) never name the same sandbox or count each other's groups. */
static char run_prefix[16];
#define NODE   "n-real"
#define CYCLES 1000

static char dir[PATH_MAX];
static struct agent_sandboxes S;
static const char *skip_why;

static void alloc_id(char *buf, size_t size, unsigned i)
{
	snprintf(buf, size, "%s%06x", run_prefix, i);
}

static int setup(void **state)
{
	struct agent_host_roots roots = {"/dev", "/proc", "/"};
	struct iso_error e = {0};

	if (skip_why)
		return 0;
	snprintf(dir, sizeof(dir), "/tmp/test_sandboxes_real.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	if (agent_sandboxes_init(&S, dir, true, CG_ROOT, &roots, &e) < 0) {
		fprintf(stderr, "init: %s\n", e.message);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];
	struct iso_agent_desired none = {0};
	struct agent_sandbox_tick t;
	struct iso_error e = {0};
	json_t *st = json_object();

	if (skip_why)
		return 0;
	/* whatever a failed case left goes */
	iso_strlcpy(none.node, NODE, sizeof(none.node));
	agent_sandboxes_reconcile(&S, NULL, NODE, &none, st, &t, &e);
	json_decref(st);
	agent_sandboxes_free(&S);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

#define SKIP_UNLESS_READY()                                                                        \
	do {                                                                                       \
		if (skip_why) {                                                                    \
			fprintf(stderr, "skipped: %s\n", skip_why);                                \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* A desired document of members (allocation index, cpus), on NODE. */
struct doc {
	struct iso_agent_desired d;
	struct iso_agent_member_want m[8];
};

/* The leak test's overlay members: tenant VNI 40001 with one peer on the
 * underlay the test makes in its own network namespace (a veth ul0 with
 * 192.0.2.1/24; this kernel has no dummy), so the agent's overlay pass builds the bridge, the VXLAN
 * device, the member's veth and the nft guard (src/agent/overlay.c). */
static char overlay_peer[1][16] = {"192.0.2.2"};

static void with_overlay(struct iso_agent_member_want *m)
{
	m->has_overlay = true;
	m->vni = 40001;
	m->node_index = 0;
	m->n_peers = 1;
	m->peers = overlay_peer;
}

static void doc_of(struct doc *doc, const unsigned *allocs, const unsigned *cpus, size_t n)
{
	memset(doc, 0, sizeof(*doc));
	iso_strlcpy(doc->d.node, NODE, sizeof(doc->d.node));
	for (size_t i = 0; i < n; i++) {
		alloc_id(doc->m[i].allocation, sizeof(doc->m[i].allocation), allocs[i]);
		doc->m[i].member = 0;
		iso_strlcpy(doc->m[i].tenant, "acme", sizeof(doc->m[i].tenant));
		doc->m[i].cpus = cpus[i];
		doc->m[i].memory_mib = 256;
	}
	doc->d.members = doc->m;
	doc->d.n_members = n;
}

static json_t *tick(struct doc *doc, struct agent_sandbox_tick *t)
{
	struct iso_error e = {0};
	json_t *st = json_object();

	assert_int_equal(agent_sandboxes_reconcile(&S, NULL, NODE, &doc->d, st, t, &e), 0);
	return st;
}

static json_t *entry_of(json_t *st, unsigned alloc)
{
	char id[32];
	size_t i;
	json_t *it;

	alloc_id(id, sizeof(id), alloc);
	json_array_foreach (json_object_get(st, "sandboxes"), i, it)
		if (strcmp(json_string_value(json_object_get(it, "allocation")), id) == 0)
			return it;
	return NULL;
}

static bool lookup(unsigned alloc, struct agent_table_entry *out, char *reason, size_t size)
{
	char id[32];

	alloc_id(id, sizeof(id), alloc);
	return agent_sandboxes_lookup(&S, id, 0, out, reason, size) == 0;
}

static bool alive(int pid)
{
	char path[64], state = 0, line[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return false;
	if (fgets(line, sizeof(line), f)) {
		char *p = strrchr(line, ')');
		if (p && p[1])
			state = p[2];
	}
	fclose(f);
	return state && state != 'Z' && state != 'X';
}

static bool record_exists(unsigned alloc)
{
	char path[PATH_MAX + 64], id[32];

	alloc_id(id, sizeof(id), alloc);
	snprintf(path, sizeof(path), "%s/sandboxes/iso-%s-0.json", dir, id);
	return access(path, F_OK) == 0;
}

static bool group_exists(unsigned alloc)
{
	char name[64], id[32];

	alloc_id(id, sizeof(id), alloc);
	snprintf(name, sizeof(name), "iso-%s-0", id);
	return iso_cgroup_exists(&S.cg, name);
}

static void test_create_keep_release(void **state)
{
	SKIP_UNLESS_READY();
	struct doc doc;
	struct agent_sandbox_tick t;
	struct agent_table_entry e;
	char reason[300];
	unsigned a[] = {1}, c[] = {1};
	json_t *st, *it;
	int holder;

	doc_of(&doc, a, c, 1);
	st = tick(&doc, &t);
	assert_int_equal(t.created, 1);
	assert_string_equal(json_string_value(json_object_get(st, "sandbox_mode")), "real");
	it = entry_of(st, 1);
	assert_non_null(it);
	assert_true(json_is_true(json_object_get(it, "ready")));
	char name[64], id[32];
	alloc_id(id, sizeof(id), 1);
	snprintf(name, sizeof(name), "iso-%s-0", id);
	assert_string_equal(json_string_value(json_object_get(it, "cgroup")), name);
	assert_true(lookup(1, &e, reason, sizeof(reason)));
	holder = e.sb.holder_pid;
	assert_true(alive(holder));
	assert_true(record_exists(1));
	assert_true(group_exists(1));
	assert_string_equal(json_string_value(json_object_get(it, "cpus")), e.cpus);
	json_decref(st);

	/* level-triggered: the next tick keeps it */
	st = tick(&doc, &t);
	assert_int_equal(t.created, 0);
	assert_true(lookup(1, &e, reason, sizeof(reason)));
	assert_int_equal(e.sb.holder_pid, holder);
	json_decref(st);

	/* released */
	doc_of(&doc, a, c, 0);
	st = tick(&doc, &t);
	assert_int_equal(t.destroyed, 1);
	assert_int_equal(json_array_size(json_object_get(st, "sandboxes")), 0);
	assert_false(lookup(1, &e, reason, sizeof(reason)));
	assert_string_equal(reason, "released");
	assert_false(alive(holder));
	assert_false(record_exists(1));
	assert_false(group_exists(1));
	json_decref(st);
}

static void test_restart_keeps_live_removes_released(void **state)
{
	SKIP_UNLESS_READY();
	struct agent_host_roots roots = {"/dev", "/proc", "/"};
	struct doc doc;
	struct agent_sandbox_tick t;
	struct agent_table_entry e;
	struct iso_error err = {0};
	char reason[300];
	unsigned a[] = {2, 3}, c[] = {1, 1};
	int h2, h3;

	doc_of(&doc, a, c, 2);
	json_decref(tick(&doc, &t));
	assert_int_equal(t.created, 2);
	assert_true(lookup(2, &e, reason, sizeof(reason)));
	h2 = e.sb.holder_pid;
	assert_true(lookup(3, &e, reason, sizeof(reason)));
	h3 = e.sb.holder_pid;

	/* the agent restarts (its memory gone, the records kept); member 3
	 * was released meanwhile */
	agent_sandboxes_free(&S);
	assert_int_equal(agent_sandboxes_init(&S, dir, true, CG_ROOT, &roots, &err), 0);
	doc_of(&doc, a, c, 1);
	json_decref(tick(&doc, &t));
	assert_int_equal(t.created, 0);
	assert_int_equal(t.destroyed, 1);
	assert_true(lookup(2, &e, reason, sizeof(reason)));
	assert_int_equal(e.sb.holder_pid, h2);
	assert_true(alive(h2));
	assert_false(alive(h3));
	assert_false(group_exists(3));
	assert_false(record_exists(3));
	assert_false(lookup(3, &e, reason, sizeof(reason)));
	assert_string_equal(reason, "released");
}

static void test_dead_holder_made_again_on_its_cores(void **state)
{
	SKIP_UNLESS_READY();
	struct doc doc;
	struct agent_sandbox_tick t;
	struct agent_table_entry e;
	char reason[300], cpus[ISO_AGENT_CPUS_MAX];
	unsigned a[] = {4}, c[] = {1};
	int holder;

	doc_of(&doc, a, c, 1);
	json_decref(tick(&doc, &t));
	assert_true(lookup(4, &e, reason, sizeof(reason)));
	holder = e.sb.holder_pid;
	iso_strlcpy(cpus, e.cpus, sizeof(cpus));
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	json_decref(tick(&doc, &t));
	assert_int_equal(t.created, 1);
	assert_true(lookup(4, &e, reason, sizeof(reason)));
	assert_int_not_equal(e.sb.holder_pid, holder);
	assert_true(alive(e.sb.holder_pid));
	assert_string_equal(e.cpus, cpus);
}

static void test_not_enough_cores_is_not_ready(void **state)
{
	SKIP_UNLESS_READY();
	struct doc doc;
	struct agent_sandbox_tick t;
	struct agent_table_entry e;
	char reason[300];
	unsigned a[] = {5}, c[] = {AGENT_CPUS_MAX - 1};
	json_t *st, *it;

	doc_of(&doc, a, c, 1);
	st = tick(&doc, &t);
	it = entry_of(st, 5);
	assert_false(json_is_true(json_object_get(it, "ready")));
	assert_non_null(
	    strstr(json_string_value(json_object_get(it, "reason")), "not enough free cores"));
	assert_false(lookup(5, &e, reason, sizeof(reason)));
	assert_non_null(strstr(reason, "not ready yet (not enough free cores"));
	assert_false(record_exists(5));
	json_decref(st);
}

/* A command run through the socket's handle, as `isostack-agent exec`
 * does: in the member's cgroup, with the sandbox's hostname. */
static void test_run_through_the_socket(void **state)
{
	SKIP_UNLESS_READY();
	struct doc doc;
	struct agent_sandbox_tick t;
	struct agent_socket *sk = NULL;
	struct iso_agent_sandbox_handle h;
	struct iso_sandbox_identity id = {0};
	struct iso_seccomp_policy pol = {0};
	struct iso_error e = {0};
	struct iso_cgroup cg;
	atomic_bool stop = false;
	unsigned a[] = {6}, c[] = {1};
	char out[PATH_MAX + 16], cmd[PATH_MAX + 128], alloc[32], buf[4096];
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	int status = -1;
	FILE *f;
	size_t n;

	doc_of(&doc, a, c, 1);
	json_decref(tick(&doc, &t));
	assert_int_equal(agent_socket_start(&S, dir, &stop, &sk, &e), 0);
	alloc_id(alloc, sizeof(alloc), 6);
	assert_int_equal(iso_agent_sandbox_lookup(dir, alloc, 0, &h, &e), 0);
	assert_int_equal(iso_cgroup_open(h.cgroup_root, &cg, &e), 0);
	/* the sandbox's /tmp is its own: the output goes through stdout */
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(cmd, sizeof(cmd), "hostname; cat /proc/self/cgroup; exit 7");
	fflush(stdout);
	{
		int saved = dup(1), fd;
		f = fopen(out, "w");
		assert_non_null(f);
		fd = fileno(f);
		dup2(fd, 1);
		int r = iso_sandbox_run(&cg, &h.sb, &id, &pol, argv, &status, &e);
		fflush(stdout);
		dup2(saved, 1);
		close(saved);
		fclose(f);
		if (r < 0)
			fail_msg("iso_sandbox_run: %s: %s", e.field, e.message);
	}
	assert_int_equal(status, 7);
	f = fopen(out, "r");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	char want[64];
	snprintf(want, sizeof(want), "iso-%s-0\n", alloc);
	assert_non_null(strstr(buf, want)); /* the hostname */
	snprintf(want, sizeof(want), "/iso-%s-0", alloc);
	assert_non_null(strstr(buf, want)); /* the cgroup */

	/* the plugins' way in: iso_agent_sandbox_join moves a child into the
	 * sandbox (its cgroup, its uts namespace), as uid 1000 */
	{
		struct iso_sandbox_identity as = {.set = true, .uid = 1000, .gid = 1000};
		int fds[2], st;
		pid_t pid;

		assert_int_equal(pipe(fds), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct iso_error je = {0};
			char host[128] = "", line[4096];
			FILE *cgf;
			size_t len = 0;

			close(fds[0]);
			if (iso_agent_sandbox_join(dir, alloc, 0, &as, &je) < 0) {
				dprintf(fds[1], "join: %s\n", je.message);
				_exit(1);
			}
			gethostname(host, sizeof(host) - 1);
			len += (size_t)snprintf(line, sizeof(line), "host=%s uid=%u\n", host,
			                        (unsigned)getuid());
			/* setns puts the children in the sandbox's pid namespace,
			 * where its /proc shows them: a child reads its cgroup */
			pid_t kid = fork();
			if (kid == 0) {
				if ((cgf = fopen("/proc/self/cgroup", "r"))) {
					len += fread(line + len, 1, sizeof(line) - 1 - len, cgf);
					fclose(cgf);
				}
				_exit(write(fds[1], line, len) < 0 ? 2 : 0);
			}
			_exit(kid > 0 && waitpid(kid, &st, 0) == kid && WIFEXITED(st)
			          ? WEXITSTATUS(st)
			          : 3);
		}
		close(fds[1]);
		n = 0;
		for (ssize_t got; (got = read(fds[0], buf + n, sizeof(buf) - 1 - n)) > 0;)
			n += (size_t)got;
		buf[n] = '\0';
		close(fds[0]);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("join: %s", buf);
		snprintf(want, sizeof(want), "host=iso-%s-0 uid=1000\n", alloc);
		assert_non_null(strstr(buf, want));
		snprintf(want, sizeof(want), "/iso-%s-0", alloc);
		assert_non_null(strstr(buf, want));
	}
	atomic_store(&stop, true);
	agent_socket_stop(sk);
}

/* ---- the leak test ---- */

struct counts {
	long cgroups, mounts, namespaces, interfaces, processes, nft;
	int mount_ids[1024]; /* of this process's mount namespace */
	size_t n_mount_ids;
};

/* The mount ids (mountinfo's first field) of this process's namespace. */
static void mount_ids(struct counts *c)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096];

	assert_non_null(f);
	c->n_mount_ids = 0;
	while (fgets(line, sizeof(line), f) && c->n_mount_ids < ISO_ARRAY_SIZE(c->mount_ids))
		c->mount_ids[c->n_mount_ids++] = atoi(line);
	fclose(f);
}

/* Mounts of `after` that `before` did not have: what the sandboxes left. A
 * mount can also go away under the test: another session unlinking the
 * mount point of one that this namespace copied at its start (ip netns
 * del does) detaches the copy here too, so the count alone may drop. */
static long new_mounts(const struct counts *before, const struct counts *after)
{
	long n = 0;

	for (size_t i = 0; i < after->n_mount_ids; i++) {
		bool old = false;
		for (size_t j = 0; j < before->n_mount_ids && !old; j++)
			old = before->mount_ids[j] == after->mount_ids[i];
		n += !old;
	}
	return n;
}

/* nft objects (tables, chains, sets, rules: each has a handle) in the
 * test's network namespace. */
static long count_nft(void)
{
	FILE *p = popen("nft -a list ruleset 2>/dev/null | grep -c '# handle'", "r");
	long n = -1;

	assert_non_null(p);
	if (fscanf(p, "%ld", &n) != 1)
		n = -1;
	pclose(p);
	return n;
}

static bool descendant(pid_t pid, pid_t me)
{
	for (int depth = 0; depth < 64 && pid > 1; depth++) {
		char path[64], line[512];
		FILE *f;
		int ppid = 0;

		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		if (!(f = fopen(path, "r")))
			return false;
		if (fgets(line, sizeof(line), f)) {
			char *p = strrchr(line, ')');
			if (p)
				sscanf(p + 2, "%*c %d", &ppid);
		}
		fclose(f);
		if (ppid == me)
			return true;
		pid = ppid;
	}
	return false;
}

static long count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	long n = 0;
	int ch;

	assert_non_null(f);
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

static long count_dir(const char *path, const char *prefix)
{
	DIR *d = opendir(path);
	struct dirent *de;
	long n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

static void count(struct counts *c)
{
	static const char *const ns[] = {"mnt", "pid", "ipc", "uts", "net", "user", "cgroup"};
	unsigned long inodes[4096];
	size_t n_inodes = 0;
	pid_t me = getpid();
	DIR *d;
	struct dirent *de;
	char path[PATH_MAX], group_prefix[32];

	snprintf(group_prefix, sizeof(group_prefix), "iso-%s", run_prefix);

	memset(c, 0, sizeof(*c));
	/* cgroups of this test's members, in every hierarchy */
	if (S.cg.version == ISO_CGROUP_V2) {
		c->cgroups = count_dir(S.cg.root, group_prefix);
	} else {
		static const char *const ctl[] = {"cpuset", "memory", "pids", "devices", "rdma"};
		for (size_t i = 0; i < ISO_ARRAY_SIZE(ctl); i++) {
			snprintf(path, sizeof(path), "%s/%s", S.cg.root, ctl[i]);
			c->cgroups += count_dir(path, group_prefix);
		}
	}
	c->mounts = count_lines("/proc/self/mountinfo");
	mount_ids(c);
	c->interfaces = count_lines("/proc/self/net/dev") - 2; /* two header lines */
	c->nft = count_nft();
	/* processes below this one (a subreaper: orphans come back to it),
	 * and the distinct namespaces they hold */
	assert_non_null(d = opendir("/proc"));
	while ((de = readdir(d))) {
		pid_t pid = (pid_t)atoi(de->d_name);

		if (pid <= 0 || pid == me || !descendant(pid, me))
			continue;
		c->processes++;
		for (size_t k = 0; k < ISO_ARRAY_SIZE(ns); k++) {
			struct stat st;
			bool seen = false;

			snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, ns[k]);
			if (stat(path, &st) < 0)
				continue;
			for (size_t i = 0; i < n_inodes && !seen; i++)
				seen = inodes[i] == st.st_ino;
			if (!seen && n_inodes < ISO_ARRAY_SIZE(inodes))
				inodes[n_inodes++] = st.st_ino;
		}
	}
	closedir(d);
	c->namespaces = (long)n_inodes;
}

static void test_thousand_cycles_leak_nothing(void **state)
{
	SKIP_UNLESS_READY();
	struct counts before, during, after;
	struct doc doc;
	struct agent_sandbox_tick t;
	unsigned a[1], c[] = {1};
	uint64_t t0 = iso_mono_ns();

	/* every other member is on the Ethernet overlay (the even ones) */
	assert_int_equal(system("ip link add ul0 type veth peer name ul1 && "
	                        "ip addr add 192.0.2.1/24 dev ul0 && ip link set ul1 up && "
	                        "ip link set ul0 up"),
	                 0);
	count(&before);
	/* one tick a cycle: tick i holds member i only, so it releases member
	 * i-1 (before anything is made) and makes member i; tick CYCLES holds
	 * none and releases the last */
	for (unsigned i = 0; i <= CYCLES; i++) {
		a[0] = 1000 + i;
		doc_of(&doc, a, c, i < CYCLES ? 1 : 0);
		if (i % 2 == 0 && i < CYCLES)
			with_overlay(&doc.m[0]);
		json_t *st = tick(&doc, &t);
		if (i < CYCLES && t.created != 1)
			fail_msg("cycle %u: created %u failed %u", i, t.created, t.failed);
		if (i > 0 && t.destroyed != 1)
			fail_msg("cycle %u: destroyed %u failed %u", i - 1, t.destroyed, t.failed);
		if (i < CYCLES && !json_is_true(json_object_get(entry_of(st, a[0]), "ready")))
			fail_msg("cycle %u: member not ready: %s", i,
			         json_string_value(json_object_get(entry_of(st, a[0]), "reason")));
		json_decref(st);
		if (i == 0)
			count(&during); /* the counts see a live sandbox and its overlay */
	}
	/* the tenant's emptied bridge alone lingers (no port, no tunnel, no
	 * guard: agent.md "Overlay"); once its hold is over, the next tick
	 * removes it */
	count(&after);
	assert_int_equal(after.interfaces, before.interfaces + 1);
	assert_int_equal(after.nft, before.nft);
	S.overlay_linger.hold_ns = 0;
	doc_of(&doc, a, c, 0);
	json_decref(tick(&doc, &t));
	S.overlay_linger.hold_ns = (uint64_t)AGENT_OVERLAY_LINGER_MS * 1000000u;
	count(&after);
	fprintf(stderr,
	        "%d cycles in %.1f s; before/with one/after: cgroups %ld/%ld/%ld mounts "
	        "%ld/%ld/%ld namespaces %ld/%ld/%ld interfaces %ld/%ld/%ld processes "
	        "%ld/%ld/%ld nft objects %ld/%ld/%ld\n",
	        CYCLES, (double)(iso_mono_ns() - t0) / 1e9, before.cgroups, during.cgroups,
	        after.cgroups, before.mounts, during.mounts, after.mounts, before.namespaces,
	        during.namespaces, after.namespaces, before.interfaces, during.interfaces,
	        after.interfaces, before.processes, during.processes, after.processes, before.nft,
	        during.nft, after.nft);
	/* the counting sees a sandbox when there is one */
	assert_true(during.cgroups > before.cgroups);
	assert_true(during.processes > before.processes);
	assert_true(during.namespaces > before.namespaces);
	assert_true(during.interfaces >= before.interfaces + 3); /* isobr, isovx, isov */
	assert_true(during.nft > before.nft);                    /* the guard */
	assert_int_equal(after.nft, before.nft);
	assert_int_equal(after.cgroups, before.cgroups);
	assert_int_equal(new_mounts(&before, &after), 0);
	assert_true(after.mounts <= before.mounts);
	assert_int_equal(after.namespaces, before.namespaces);
	assert_int_equal(after.interfaces, before.interfaces);
	assert_int_equal(after.processes, before.processes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_create_keep_release, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restart_keeps_live_removes_released, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_dead_holder_made_again_on_its_cores, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_not_enough_cores_is_not_ready, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_through_the_socket, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_thousand_cycles_leak_nothing, setup, teardown),
	};
	struct iso_cgroup cg;
	struct iso_error e = {0};

	if (geteuid() != 0)
		skip_why = "not root (sandboxes need root)";
	else if (iso_cgroup_open(CG_ROOT, &cg, &e) < 0)
		skip_why = "no cgroup controllers under " CG_ROOT;
	snprintf(run_prefix, sizeof(run_prefix), "a-7e57%06x", (unsigned)getpid() & 0xffffffu);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (!skip_why && (unshare(CLONE_NEWNS | CLONE_NEWNET) < 0 ||
	                  mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0))
		skip_why = "cannot make the test's own mount and network namespaces";
	return cmocka_run_group_tests(tests, NULL, NULL);
}

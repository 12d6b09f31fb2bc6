/* test_opensm_driver.c: the OpenSM driver against a real OpenSM on an ibsim
 * fabric (scripts/ibsim-fabric.sh, tests/e2e/data/fabric4.net: one switch and
 * four HCAs whose port GUIDs are 0x100001, 0x100003, 0x100005, 0x100007).
 * What it proves, each time read back with `smpquery pkeys` (not with our
 * own reader): two tenants' keys land on exactly their ports; a smaller
 * intent removes keys; an SM that is down holds the intent back (applied and
 * confirmed stay put) until OpenSM is back, then it is confirmed; a file
 * OpenSM cannot program (more keys than a port holds: ERR 0512) is an
 * incident, and the previous good file comes back.
 *
 * The test re-executes itself under umad2sim's LD_PRELOAD once the fabric is
 * up, so that the parent can always stop ibsim and OpenSM. Exit 77 (skip)
 * only when ibsim or opensm is not installed. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isostack/fabric.h"
#include "isostack/inventory.h"

#define G1 UINT64_C(0x100001)
#define G2 UINT64_C(0x100003)
#define G3 UINT64_C(0x100005)
#define G4 UINT64_C(0x100007)

static const char *dir;
static const char *script;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* ---- building intents ---- */

static struct iso_partition *part(struct iso_fabric_intent *in, enum iso_partition_kind kind,
                                  const char *name, uint16_t pkey)
{
	struct iso_partition *p;

	in->parts = realloc(in->parts, (size_t)(in->n_parts + 1) * sizeof(*in->parts));
	CHECK(in->parts, "oom");
	p = &in->parts[in->n_parts++];
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->pkey = pkey;
	p->ipoib = true;
	return p;
}

static void member(struct iso_partition *p, uint64_t guid)
{
	p->members = realloc(p->members, (size_t)(p->n_members + 1) * sizeof(*p->members));
	CHECK(p->members, "oom");
	p->members[p->n_members].guid = guid;
	p->members[p->n_members].membership = ISO_MEMBER_FULL;
	p->n_members++;
}

static void intent(struct iso_fabric_intent *in, uint64_t gen)
{
	memset(in, 0, sizeof(*in));
	in->generation = gen;
	part(in, ISO_PART_DEFAULT, "Default", 0x7fff);
}

/* ---- reading back with the diag tools ---- */

struct lidmap {
	uint64_t guid;
	int lid;
};
static struct lidmap lids[4];

static int lid_of(uint64_t guid)
{
	for (int i = 0; i < 4; i++)
		if (lids[i].guid == guid)
			return lids[i].lid;
	CHECK(0, "no LID for 0x%" PRIx64, guid);
	return 0;
}

/* The non-zero entries `smpquery pkeys LID 1` prints, in table order. */
static int smpquery_pkeys(uint64_t guid, unsigned *keys, int max)
{
	char cmd[128], line[512];
	FILE *f;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "smpquery pkeys %d 1 2>/dev/null", lid_of(guid));
	f = popen(cmd, "r");
	CHECK(f, "popen %s", cmd);
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':');
		unsigned v;
		int used;

		if (!p || strstr(line, "capacity"))
			continue;
		for (p++; sscanf(p, " 0x%x%n", &v, &used) == 1; p += used)
			if (v & 0x7fff)
				keys[n < max ? n : max - 1] = v, n++;
	}
	CHECK(pclose(f) == 0, "%s failed", cmd);
	return n;
}

/* The port holds 0x7fff (limited) and exactly `want`, in any order. */
static void expect_keys(uint64_t guid, int n_want, ...)
{
	unsigned have[64], want[8];
	int n = smpquery_pkeys(guid, have, 64), found = 0;
	bool dflt = false;
	va_list ap;

	va_start(ap, n_want);
	for (int i = 0; i < n_want; i++)
		want[i] = va_arg(ap, unsigned);
	va_end(ap);
	for (int i = 0; i < n; i++) {
		bool ok = false;
		if (have[i] == 0x7fff) {
			dflt = true;
			continue;
		}
		for (int j = 0; j < n_want; j++)
			ok |= have[i] == want[j];
		CHECK(ok, "port 0x%" PRIx64 " holds 0x%04x, which the intent does not give it",
		      guid, have[i]);
		found++;
	}
	CHECK(dflt, "port 0x%" PRIx64 " lacks 0x7fff (limited)", guid);
	CHECK(found == n_want, "port 0x%" PRIx64 " holds %d of its %d keys", guid, found, n_want);
}

/* ---- driving the driver ---- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct iso_fabric_status wait_status(struct iso_fabric_driver *d, uint64_t gen,
                                            double timeout_s, bool want_incident)
{
	struct iso_fabric_status st;
	double t0 = now_s();

	for (;;) {
		CHECK(d->ops->poll(d, &st) == 0, "poll");
		if (!want_incident && st.confirmed >= gen)
			break;
		if (want_incident && st.incident)
			break;
		CHECK(now_s() - t0 < timeout_s,
		      "generation %" PRIu64 " not %s after %.1f s (applied %" PRIu64
		      ", confirmed %" PRIu64 ", incident '%s')",
		      gen, want_incident ? "an incident" : "confirmed", timeout_s, st.applied,
		      st.confirmed, st.incident_msg);
		usleep(20000);
	}
	printf("generation %" PRIu64 ": %s after %.3f s\n", gen,
	       want_incident ? "incident" : "confirmed", now_s() - t0);
	return st;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);

	CHECK(f && buf, "read %s", path);
	buf[fread(buf, 1, (1 << 20) - 1, f)] = '\0';
	fclose(f);
	return buf;
}

static int child(void)
{
	char yaml[2048], path[512];
	struct iso_inventory *inv = NULL;
	struct iso_fabric_driver *d = NULL;
	struct iso_fabric_snapshot snap = {0};
	struct iso_fabric_intent in;
	struct iso_fabric_status st;
	struct iso_partition *p;
	struct iso_error e = {0};
	char *before;

	snprintf(yaml, sizeof(yaml),
	         "cluster: e2e\n"
	         "fabric:\n"
	         "  type: infiniband\n"
	         "  sm_nodes: [sm]\n"
	         "  driver: opensm\n"
	         "  partitions_file: %s/partitions.conf\n"
	         "  pid_file: %s/opensm.pid\n"
	         "  log_file: %s/opensm.log\n"
	         "  coalesce_ms: 20\n"
	         "  confirm_timeout_ms: 8000\n"
	         "pools: [{name: p}]\n"
	         "racks: [{name: r, pdus: [u]}]\n"
	         "nodes:\n"
	         "  - {name: n1, rack: r, pdu: u, pool: p, cpus: 1, memory_mib: 1,\n"
	         "     port: {device: ibsim0, port: 1, guid: 0x100001, pkey_capacity: 64}}\n",
	         dir, dir, dir);
	CHECK(iso_inventory_load_string("e2e.yaml", yaml, strlen(yaml), &inv, &e) == 0, "%s",
	      e.message);
	CHECK(iso_fabric_driver_open(inv, dir, &d, &e) == 0, "%s", e.message);
	CHECK(strcmp(d->ops->name, "opensm") == 0, "driver %s", d->ops->name);

	/* The driver's own full read: every end port, with LIDs for smpquery. */
	CHECK(d->ops->snapshot(d, &snap, &e) == 0, "%s", e.message);
	printf("snapshot: %d ports in %" PRId64 " ms\n", snap.n_ports, snap.read_ms);
	CHECK(snap.n_ports == 5, "%d ports (expected 4 HCAs and switch port 0)", snap.n_ports);
	for (int i = 0, k = 0; i < snap.n_ports; i++) {
		if (snap.ports[i].is_switch)
			continue;
		CHECK(k < 4, "too many CA ports");
		lids[k].guid = snap.ports[i].guid;
		lids[k].lid = snap.ports[i].lid;
		CHECK(snap.ports[i].capacity == 64, "capacity %d", snap.ports[i].capacity);
		k++;
	}
	iso_fabric_snapshot_clear(&snap);

	/* 1. two tenants: t_a on G1 and G2, t_b on G3; G4 in no tenant. A burst
	 * of three applies inside the coalesce window: only the last counts. */
	for (uint64_t gen = 1; gen <= 3; gen++) {
		intent(&in, gen);
		p = part(&in, ISO_PART_TENANT, "t_a", 0x0101);
		member(p, G1);
		member(p, G2);
		p = part(&in, ISO_PART_TENANT, "t_b", gen == 3 ? 0x0102 : 0x0109);
		member(p, G3);
		CHECK(d->ops->apply(d, &in, &e) == 0, "%s", e.message);
		iso_fabric_intent_clear(&in);
	}
	st = wait_status(d, 3, 10, false);
	CHECK(!st.incident, "incident: %s", st.incident_msg);
	CHECK(st.applied == 3, "applied %" PRIu64, st.applied);
	expect_keys(G1, 1, 0x8101u);
	expect_keys(G2, 1, 0x8101u);
	expect_keys(G3, 1, 0x8102u);
	expect_keys(G4, 0);

	/* 2. a smaller intent: t_b gone, G2 leaves t_a. */
	intent(&in, 4);
	p = part(&in, ISO_PART_TENANT, "t_a", 0x0101);
	member(p, G1);
	CHECK(d->ops->apply(d, &in, &e) == 0, "%s", e.message);
	iso_fabric_intent_clear(&in);
	wait_status(d, 4, 10, false);
	expect_keys(G1, 1, 0x8101u);
	expect_keys(G2, 0);
	expect_keys(G3, 0);

	/* 3. the SM is down (its pid file points at nothing): the intent waits. */
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd),
		         "kill $(cat %s/opensm.pid) && sleep 0.5 && echo 999999 >%s/opensm.pid",
		         dir, dir);
		CHECK(system(cmd) == 0, "%s", cmd);
	}
	intent(&in, 5);
	p = part(&in, ISO_PART_TENANT, "t_a", 0x0101);
	member(p, G1);
	member(p, G4);
	CHECK(d->ops->apply(d, &in, &e) == 0, "%s", e.message);
	iso_fabric_intent_clear(&in);
	sleep(2);
	CHECK(d->ops->poll(d, &st) == 0, "poll");
	CHECK(st.applied == 4 && st.confirmed == 4,
	      "SM down, yet applied %" PRIu64 " confirmed %" PRIu64, st.applied, st.confirmed);
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "%s opensm %s", script, dir);
		CHECK(system(cmd) == 0, "%s", cmd);
	}
	wait_status(d, 5, 15, false);
	expect_keys(G1, 1, 0x8101u);
	expect_keys(G4, 1, 0x8101u);

	/* 4. more keys on G1 than its 64 slots: OpenSM logs ERR 0512 and the
	 * driver restores the last good file (generation 5's). */
	snprintf(path, sizeof(path), "%s/partitions.conf", dir);
	before = read_file(path);
	intent(&in, 6);
	for (int t = 0; t < 70; t++) {
		char name[16];
		snprintf(name, sizeof(name), "t_%d", t);
		p = part(&in, ISO_PART_TENANT, name, (uint16_t)(0x0200 + t));
		member(p, G1);
	}
	CHECK(d->ops->apply(d, &in, &e) == 0, "%s", e.message);
	iso_fabric_intent_clear(&in);
	st = wait_status(d, 6, 15, true);
	printf("incident: %s\n", st.incident_msg);
	CHECK(st.confirmed == 5, "confirmed %" PRIu64 " after an incident", st.confirmed);
	CHECK(strstr(st.incident_msg, "ERR 0512") || strstr(st.incident_msg, "not confirmed"), "%s",
	      st.incident_msg);
	{
		char *after = read_file(path);
		double t0 = now_s();
		/* the restore happens right after the incident is raised */
		while (strcmp(after, before) != 0 && now_s() - t0 < 5) {
			free(after);
			usleep(50000);
			after = read_file(path);
		}
		if (strstr(st.incident_msg, "ERR 0512"))
			CHECK(strcmp(after, before) == 0, "previous good file not restored:\n%s",
			      after);
		free(after);
	}
	free(before);

	/* 5. a broken file is never written: an intent whose file OpenSM would
	 * refuse (a duplicate P_Key, a partition without a name) is refused by
	 * apply, and the file on disk stays byte for byte what it was. */
	before = read_file(path);
	for (int bad = 0; bad < 2; bad++) {
		intent(&in, 7 + (uint64_t)bad);
		p = part(&in, ISO_PART_TENANT, bad ? "" : "t_x", 0x0101);
		member(p, G1);
		p = part(&in, ISO_PART_TENANT, "t_y", bad ? 0x0102 : 0x0101);
		member(p, G2);
		CHECK(d->ops->apply(d, &in, &e) < 0, "a broken intent (%d) was accepted", bad);
		printf("refused: %s\n", e.message);
		iso_fabric_intent_clear(&in);
	}
	usleep(300000); /* past the coalesce window: nothing may have been written */
	{
		char *after = read_file(path);
		CHECK(strcmp(after, before) == 0, "partitions.conf changed after refused intents");
		free(after);
	}
	free(before);

	d->ops->free(d);
	iso_inventory_free(inv);
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/isostack-e2e-XXXXXX", cmd[1024], envpath[600], line[512];
	int rc, status;
	pid_t pid;
	FILE *f;

	if (argc != 3) {
		fprintf(stderr, "usage: %s ibsim-fabric.sh NETFILE\n", argv[0]);
		return 2;
	}
	script = argv[1];
	if (getenv("ISO_E2E_DIR")) {
		dir = getenv("ISO_E2E_DIR");
		return child();
	}
	dir = mkdtemp(tmpl);
	CHECK(dir, "mkdtemp");
	snprintf(cmd, sizeof(cmd), "%s start %s %s >/dev/null", script, dir, argv[2]);
	rc = system(cmd);
	if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
		rmdir(dir);
		return 77;
	}
	if (rc != 0) {
		fprintf(stderr, "fabric did not start (%d)\n", rc);
		snprintf(cmd, sizeof(cmd), "%s stop %s", script, dir);
		if (system(cmd) != 0)
			fprintf(stderr, "stop failed\n");
		return 1;
	}
	snprintf(envpath, sizeof(envpath), "%s/env", dir);
	f = fopen(envpath, "r");
	CHECK(f, "%s", envpath);
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '=');
		if (!eq || strncmp(line, "export", 6) == 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		*eq = '\0';
		setenv(line, eq + 1, 1);
	}
	fclose(f);
	setenv("ISO_E2E_DIR", dir, 1);
	/* An ASan build must not insist on coming first: umad2sim does. */
	/* umad2sim itself copies past a buffer's end in read() (replace_intrin=0
	 * stops ASan from checking memcpy), and libibnetdisc leaks a little per
	 * discovery (suppressed by library name). */
	/* Appended, so that the options `make test` sets stay in force. */
	snprintf(line, sizeof(line), "%s%sverify_asan_link_order=0:replace_intrin=0",
	         getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "",
	         getenv("ASAN_OPTIONS") ? ":" : "");
	setenv("ASAN_OPTIONS", line, 1);
	snprintf(envpath, sizeof(envpath), "%s/lsan.supp", dir);
	f = fopen(envpath, "w");
	CHECK(f && fputs("leak:libibnetdisc.so\n", f) >= 0 && fclose(f) == 0, "%s", envpath);
	snprintf(line, sizeof(line), "%s%ssuppressions=%s",
	         getenv("LSAN_OPTIONS") ? getenv("LSAN_OPTIONS") : "",
	         getenv("LSAN_OPTIONS") ? ":" : "", envpath);
	setenv("LSAN_OPTIONS", line, 1);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	unsetenv("LD_PRELOAD");
	snprintf(cmd, sizeof(cmd), "%s stop %s", script, dir);
	if (system(cmd) != 0)
		fprintf(stderr, "stop failed\n");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", dir);
		return 0;
	}
	fprintf(stderr, "failed; the fabric's files are kept in %s\n", dir);
	return 1;
}

/* test_vf.c: the node agent's VF GUIDs (src/agent/vf.c) against a fake sysfs
 * tree built here in a temp dir: sriov/<vf>/{node,port,policy} and the PCI
 * driver's bind/unbind are plain files, virtfn<vf> a symlink to the VF's PCI
 * directory. The test plays the kernel through the driver's write hook: a
 * write to `bind` makes the sriov `node` GUID the VF's node_guid (the GUID
 * takes effect only after the rebind), so a rebind that fails leaves the
 * old GUID in force. Cases: program, idempotent tick, restore on release,
 * zero and all-ones refused, rollback when bind fails, the saved original
 * found after a restart, a neighbour untouched, garbled vfs entries refused
 * by the parser, the none, sim and ibsim drivers. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isostack/agent.h"

#define DEV  "mlx5_0"
#define NODE "gpu-a01"
#define G1   0x0002c90300ef0100ULL
#define G2   0x0002c90300ef0101ULL

struct fake {
	char dir[PATH_MAX];      /* the temp dir */
	char root[PATH_MAX];     /* the fake sysfs root */
	char state[PATH_MAX];    /* the agent's state dir */
	char net[PATH_MAX + 16]; /* an ibsim net file */
	struct iso_vf_host h;
	char log[64][PATH_MAX + 64]; /* "path=data" of each write, in order */
	int n_log;
};

static void sh(const char *fmt, ...) _printf_(1, 2);
static void sh(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

static void slurp(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		fail_msg("cannot read %s", path);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fail_msg("cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

/* The fake kernel: a bind of a VF's PCI address (into a bind file that is a
 * plain file) puts its sriov node GUID in force as its node_guid. */
static void on_write(void *arg, const char *path, const char *data)
{
	struct fake *f = arg;
	struct stat st;
	char p[PATH_MAX + 128], g[64];
	unsigned vf;

	if (f->n_log < 64)
		snprintf(f->log[f->n_log++], sizeof(f->log[0]), "%s=%s", path + strlen(f->root),
		         data);
	if (strstr(path, "/drivers/mlx5_core/bind") == NULL || stat(path, &st) < 0 ||
	    !S_ISREG(st.st_mode) || sscanf(data, "0000:03:00.%u", &vf) != 1)
		return;
	vf -= 1;
	snprintf(p, sizeof(p), "%s/sys/class/infiniband/" DEV "/device/sriov/%u/node", f->root, vf);
	slurp(p, g, sizeof(g));
	/* aa:bb:cc:dd:ee:ff:00:11 -> aabb:ccdd:eeff:0011 as node_guid shows it */
	char out[32];
	snprintf(out, sizeof(out), "%.2s%.2s:%.2s%.2s:%.2s%.2s:%.2s%.2s\n", g, g + 3, g + 6, g + 9,
	         g + 12, g + 15, g + 18, g + 21);
	snprintf(p, sizeof(p), "%s/sys/devices/pci/0000:03:00.%u/infiniband/" DEV "v%u/node_guid",
	         f->root, vf + 1, vf);
	spit(p, out);
}

/* VF i is PCI function 0000:03:00.(i+1), original GUID `orig[i]`, netdev
 * ibp3s0v<i>. */
static void add_vf(struct fake *f, unsigned i, const char *orig)
{
	const char *colons = orig;
	char node_guid[32];

	sh("mkdir -p '%s/sys/class/infiniband/" DEV "/device/sriov/%u' "
	   "'%s/sys/devices/pci/0000:03:00.%u/net/ibp3s0v%u' "
	   "'%s/sys/devices/pci/0000:03:00.%u/infiniband/" DEV "v%u'",
	   f->root, i, f->root, i + 1, i, f->root, i + 1, i);
	sh("printf '%s\\n' > '%s/sys/class/infiniband/" DEV "/device/sriov/%u/node'", colons,
	   f->root, i);
	sh("printf '%s\\n' > '%s/sys/class/infiniband/" DEV "/device/sriov/%u/port'", colons,
	   f->root, i);
	sh("printf 'Down\\n' > '%s/sys/class/infiniband/" DEV "/device/sriov/%u/policy'", f->root,
	   i);
	sh("ln -s '%s/sys/devices/pci/0000:03:00.%u' '%s/sys/class/infiniband/" DEV
	   "/device/virtfn%u'",
	   f->root, i + 1, f->root, i);
	snprintf(node_guid, sizeof(node_guid), "%.2s%.2s:%.2s%.2s:%.2s%.2s:%.2s%.2s\n", orig,
	         orig + 3, orig + 6, orig + 9, orig + 12, orig + 15, orig + 18, orig + 21);
	char p[PATH_MAX + 128];
	snprintf(p, sizeof(p), "%s/sys/devices/pci/0000:03:00.%u/infiniband/" DEV "v%u/node_guid",
	         f->root, i + 1, i);
	spit(p, node_guid);
}

static int setup(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_vf.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	sh("mkdir -p '%s/sys/bus/pci/drivers/mlx5_core' '%s'", f->root, f->state);
	sh(": > '%s/sys/bus/pci/drivers/mlx5_core/bind'", f->root);
	sh(": > '%s/sys/bus/pci/drivers/mlx5_core/unbind'", f->root);
	add_vf(f, 0, "00:00:00:00:00:00:00:00");
	add_vf(f, 1, "12:34:56:78:9a:bc:de:f0");
	f->h = (struct iso_vf_host){
	    .driver = ISO_VF_MLX5, .sysfs_root = f->root, .trace = on_write, .trace_arg = f};
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fake *f = *state;

	sh("chmod -R u+w '%s'; rm -rf '%s'", f->dir, f->dir);
	free(f);
	return 0;
}

/* A desired document with VF `index` (or none when index < 0) at `guid`. */
static void desired(struct iso_agent_desired *d, int index, uint64_t guid)
{
	static struct iso_agent_vf_want w;

	memset(d, 0, sizeof(*d));
	iso_strlcpy(d->node, NODE, sizeof(d->node));
	if (index < 0)
		return;
	w = (struct iso_agent_vf_want){.index = (unsigned)index, .guid = guid, .pkey = 0x8101};
	iso_strlcpy(w.device, DEV, sizeof(w.device));
	iso_strlcpy(w.tenant, "acme", sizeof(w.tenant));
	d->n_vfs = 1;
	d->vfs = &w;
}

/* One tick; returns the status's vfs[0] (the caller frees *st). */
static json_t *tick(struct fake *f, const struct iso_agent_desired *d, json_t **st,
                    struct iso_vf_tick *t)
{
	struct iso_error err = {0};

	*st = json_object();
	f->n_log = 0;
	assert_int_equal(iso_agent_vf_reconcile(&f->h, f->state, d, *st, t, &err), 0);
	return json_array_get(json_object_get(*st, "vfs"), 0);
}

static void assert_entry(const json_t *e, unsigned index, bool ready, const char *guid,
                         const char *netdev)
{
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "index")), index);
	assert_int_equal(json_is_true(json_object_get(e, "ready")), ready);
	if (guid)
		assert_string_equal(json_string_value(json_object_get(e, "guid")), guid);
	if (netdev)
		assert_string_equal(json_string_value(json_object_get(e, "netdev")), netdev);
}

static void sriov(struct fake *f, unsigned vf, const char *what, char *buf, size_t size)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/sys/class/infiniband/" DEV "/device/sriov/%u/%s", f->root, vf,
	         what);
	slurp(p, buf, size);
}

static bool saved(struct fake *f, unsigned vf, char *buf, size_t size)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/vf-" DEV "-%u.guid", f->state, vf);
	if (access(p, F_OK) < 0)
		return false;
	slurp(p, buf, size);
	return true;
}

static void test_program_then_idempotent(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	char buf[64];
	json_t *st, *e;

	desired(&d, 0, G1);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 0, true, "0x0002c90300ef0100", "ibp3s0v0");
	assert_int_equal(t.programmed, 1);
	/* node and port the same GUID, policy Follow, then unbind and bind by
	 * the PCI address, in that order */
	assert_int_equal(f->n_log, 5);
	assert_string_equal(f->log[0], "/sys/class/infiniband/mlx5_0/device/sriov/0/node="
	                               "00:02:c9:03:00:ef:01:00\n");
	assert_string_equal(f->log[1], "/sys/class/infiniband/mlx5_0/device/sriov/0/port="
	                               "00:02:c9:03:00:ef:01:00\n");
	assert_string_equal(f->log[2],
	                    "/sys/class/infiniband/mlx5_0/device/sriov/0/policy=Follow\n");
	assert_string_equal(f->log[3], "/sys/bus/pci/drivers/mlx5_core/unbind=0000:03:00.1\n");
	assert_string_equal(f->log[4], "/sys/bus/pci/drivers/mlx5_core/bind=0000:03:00.1\n");
	/* the original was zero: kept as all-ones */
	assert_true(saved(f, 0, buf, sizeof(buf)));
	assert_string_equal(buf, "ff:ff:ff:ff:ff:ff:ff:ff\n");
	json_decref(st);

	/* Level-triggered: the VF reads back the GUID, so nothing is written. */
	e = tick(f, &d, &st, &t);
	assert_entry(e, 0, true, "0x0002c90300ef0100", "ibp3s0v0");
	assert_int_equal(f->n_log, 0);
	assert_int_equal(t.programmed + t.failed + t.restored, 0);
	json_decref(st);
}

static void test_restore_on_release_and_neighbour_untouched(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	char buf[64];
	json_t *st;

	desired(&d, 1, G2);
	assert_entry(tick(f, &d, &st, &t), 1, true, "0x0002c90300ef0101", "ibp3s0v1");
	json_decref(st);
	/* VF 0 was never written */
	for (int i = 0; i < f->n_log; i++)
		assert_null(strstr(f->log[i], "sriov/0/"));
	for (int i = 0; i < f->n_log; i++)
		assert_null(strstr(f->log[i], "0000:03:00.1\n"));
	sriov(f, 0, "node", buf, sizeof(buf));
	assert_string_equal(buf, "00:00:00:00:00:00:00:00\n");
	assert_true(saved(f, 1, buf, sizeof(buf)));
	assert_string_equal(buf, "12:34:56:78:9a:bc:de:f0\n");

	/* Released: the original comes back (rebind included), the saved file
	 * goes, and VF 0 is still untouched. */
	desired(&d, -1, 0);
	tick(f, &d, &st, &t);
	assert_int_equal(t.restored, 1);
	assert_int_equal(json_array_size(json_object_get(st, "vfs")), 0);
	json_decref(st);
	assert_int_equal(f->n_log, 4);
	assert_string_equal(f->log[0], "/sys/class/infiniband/mlx5_0/device/sriov/1/node="
	                               "12:34:56:78:9a:bc:de:f0\n");
	assert_string_equal(f->log[3], "/sys/bus/pci/drivers/mlx5_core/bind=0000:03:00.2\n");
	sriov(f, 1, "node", buf, sizeof(buf));
	assert_string_equal(buf, "12:34:56:78:9a:bc:de:f0\n");
	assert_false(saved(f, 1, buf, sizeof(buf)));
	sriov(f, 0, "node", buf, sizeof(buf));
	assert_string_equal(buf, "00:00:00:00:00:00:00:00\n");
	/* and nothing more to do */
	tick(f, &d, &st, &t);
	assert_int_equal(f->n_log, 0);
	json_decref(st);
}

/* Only the names the agent writes (vf-<device>-<vf>.guid, the VF number in
 * decimal without a sign or leading zeros) are saved originals: another
 * spelling of a VF's number ("01") was taken for one, could never be read
 * back under its own name, and failed every tick with an empty message
 * (found with fuzz_agent_vf). It is left alone now, and the VF untouched. */
static void test_other_names_are_no_saved_original(void **state)
{
	struct fake *f = *state;
	static const char *const names[] = {"vf-" DEV "-01.guid", "vf-" DEV "-+1.guid",
	                                    "vf-" DEV "- 1.guid"};
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	char p[PATH_MAX + 64];
	json_t *st;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(names); i++) {
		snprintf(p, sizeof(p), "%s/%s", f->state, names[i]);
		spit(p, "12:34:56:78:9a:bc:de:f0\n");
	}
	desired(&d, -1, 0);
	tick(f, &d, &st, &t);
	json_decref(st);
	assert_int_equal(t.failed + t.restored, 0);
	assert_int_equal(f->n_log, 0); /* nothing written */
	for (size_t i = 0; i < ISO_ARRAY_SIZE(names); i++) {
		snprintf(p, sizeof(p), "%s/%s", f->state, names[i]);
		assert_int_equal(access(p, F_OK), 0);
	}
}

static void test_zero_and_all_ones_refused(void **state)
{
	struct fake *f = *state;
	static const uint64_t bad[] = {0, UINT64_MAX};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		struct iso_agent_desired d;
		struct iso_vf_tick t;
		char buf[64];
		json_t *st, *e;

		desired(&d, 1, bad[i]);
		e = tick(f, &d, &st, &t);
		assert_entry(e, 1, false, NULL, NULL);
		assert_non_null(
		    strstr(json_string_value(json_object_get(e, "reason")), "is not valid"));
		assert_int_equal(f->n_log, 0);
		assert_false(saved(f, 1, buf, sizeof(buf)));
		json_decref(st);
	}
}

static void test_rollback_when_bind_fails(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	char buf[64], p[PATH_MAX + 64];
	json_t *st, *e;

	snprintf(p, sizeof(p), "%s/sys/bus/pci/drivers/mlx5_core/bind", f->root);
	sh("rm '%s' && mkdir '%s'", p, p); /* writing it fails (EISDIR) */
	desired(&d, 1, G2);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 1, false, "0x123456789abcdef0", NULL);
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "rolled back"));
	assert_int_equal(t.failed, 1);
	/* the GUID written, the bind failed, the original written back */
	sriov(f, 1, "node", buf, sizeof(buf));
	assert_string_equal(buf, "12:34:56:78:9a:bc:de:f0\n");
	sriov(f, 1, "port", buf, sizeof(buf));
	assert_string_equal(buf, "12:34:56:78:9a:bc:de:f0\n");
	assert_true(saved(f, 1, buf, sizeof(buf)));
	assert_string_equal(buf, "12:34:56:78:9a:bc:de:f0\n");
	json_decref(st);

	/* The next tick (bind fixed) programs it; the original kept is still
	 * the host's, never the GUID of the failed attempt. */
	sh("rmdir '%s' && : > '%s'", p, p);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 1, true, "0x0002c90300ef0101", NULL);
	assert_true(saved(f, 1, buf, sizeof(buf)));
	assert_string_equal(buf, "12:34:56:78:9a:bc:de:f0\n");
	json_decref(st);
}

static void test_restart_finds_the_saved_original(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	char buf[64], p[PATH_MAX + 64];
	json_t *st, *e;

	/* A previous run saved VF 1's original and left it at a stale GUID
	 * (ib-sriov-cni#217: a failure after the write). */
	snprintf(p, sizeof(p), "%s/vf-" DEV "-1.guid", f->state);
	spit(p, "12:34:56:78:9a:bc:de:f0\n");
	sriov(f, 1, "node", buf, sizeof(buf));
	snprintf(p, sizeof(p), "%s/sys/class/infiniband/" DEV "/device/sriov/1/node", f->root);
	spit(p, "0a:0a:0a:0a:0a:0a:0a:0a\n");
	snprintf(p, sizeof(p), "%s/sys/devices/pci/0000:03:00.2/infiniband/" DEV "v1/node_guid",
	         f->root);
	spit(p, "0a0a:0a0a:0a0a:0a0a\n");

	/* A new agent (nothing in memory) programs it without taking the
	 * stale GUID for the original... */
	desired(&d, 1, G2);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 1, true, "0x0002c90300ef0101", NULL);
	assert_true(saved(f, 1, buf, sizeof(buf)));
	assert_string_equal(buf, "12:34:56:78:9a:bc:de:f0\n");
	json_decref(st);
	/* ...and gives the true original back at release. */
	desired(&d, -1, 0);
	tick(f, &d, &st, &t);
	json_decref(st);
	assert_int_equal(t.restored, 1);
	sriov(f, 1, "node", buf, sizeof(buf));
	assert_string_equal(buf, "12:34:56:78:9a:bc:de:f0\n");
}

static void test_a_vf_without_pci_function(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	json_t *st, *e;

	desired(&d, 5, G1); /* not created */
	e = tick(f, &d, &st, &t);
	assert_entry(e, 5, false, "", NULL);
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "sriov_numvfs"));
	assert_int_equal(f->n_log, 0);
	json_decref(st);
}

static void test_none_driver_reports_not_ready(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	json_t *st, *e;

	f->h.driver = ISO_VF_NONE;
	desired(&d, 0, G1);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 0, false, "", "");
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "--vf-driver"));
	assert_int_equal(f->n_log, 0);
	json_decref(st);
}

static void test_sim_driver_keeps_its_tree_in_the_state_dir(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	char p[PATH_MAX + 128], buf[64];
	json_t *st;

	f->h.driver = ISO_VF_SIM;
	desired(&d, 3, G1);
	assert_entry(tick(f, &d, &st, &t), 3, true, "0x0002c90300ef0100", "mlx5_0v3");
	json_decref(st);
	snprintf(p, sizeof(p), "%s/vf-sim/sys/class/infiniband/" DEV "/device/sriov/3/node",
	         f->state);
	slurp(p, buf, sizeof(buf));
	assert_string_equal(buf, "00:02:c9:03:00:ef:01:00\n");
	desired(&d, -1, 0);
	tick(f, &d, &st, &t);
	json_decref(st);
	assert_int_equal(t.restored, 1);
	slurp(p, buf, sizeof(buf));
	assert_string_equal(buf, "ff:ff:ff:ff:ff:ff:ff:ff\n");
}

/* ---- RoCE VFs (issue 14): the tenant's VLAN and the spoof check ---- */

static void desired_roce(struct iso_agent_desired *d, unsigned index, uint16_t vlan)
{
	static struct iso_agent_vf_want w;

	memset(d, 0, sizeof(*d));
	iso_strlcpy(d->node, NODE, sizeof(d->node));
	w = (struct iso_agent_vf_want){.index = index, .vlan = vlan};
	iso_strlcpy(w.device, DEV, sizeof(w.device));
	iso_strlcpy(w.tenant, "acme", sizeof(w.tenant));
	d->n_vfs = 1;
	d->vfs = &w;
}

static void sim_sriov(struct fake *f, unsigned vf, const char *what, char *path, size_t size)
{
	snprintf(path, size, "%s/vf-sim/sys/class/infiniband/" DEV "/device/sriov/%u/%s", f->state,
	         vf, what);
}

static void assert_roce(const json_t *e, unsigned index, bool ready, int vlan, bool spoofchk)
{
	assert_entry(e, index, ready, NULL, NULL);
	assert_null(json_object_get(e, "guid"));
	assert_int_equal(json_integer_value(json_object_get(e, "vlan")), vlan);
	assert_int_equal(json_is_true(json_object_get(e, "spoofchk")), spoofchk);
}

static void test_sim_roce_vf_gets_the_vlan_and_spoofchk(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	char p[PATH_MAX + 128], buf[64];
	json_t *st, *e;

	f->h.driver = ISO_VF_SIM;
	desired_roce(&d, 3, 100);
	e = tick(f, &d, &st, &t);
	assert_roce(e, 3, true, 100, true);
	assert_string_equal(json_string_value(json_object_get(e, "netdev")), "mlx5_0v3");
	assert_int_equal(t.programmed, 1);
	json_decref(st);
	sim_sriov(f, 3, "vlan", p, sizeof(p));
	slurp(p, buf, sizeof(buf));
	assert_string_equal(buf, "100\n");
	sim_sriov(f, 3, "spoofchk", p, sizeof(p));
	slurp(p, buf, sizeof(buf));
	assert_string_equal(buf, "on\n");
	/* level-triggered: nothing written while it reads back right */
	assert_roce(tick(f, &d, &st, &t), 3, true, 100, true);
	assert_int_equal(f->n_log, 0);
	assert_int_equal(t.programmed, 0);
	json_decref(st);
	/* another VLAN planted on the VF is put right at the next tick */
	sim_sriov(f, 3, "vlan", p, sizeof(p));
	spit(p, "7\n");
	assert_roce(tick(f, &d, &st, &t), 3, true, 100, true);
	assert_int_equal(t.programmed, 1);
	json_decref(st);
	slurp(p, buf, sizeof(buf));
	assert_string_equal(buf, "100\n");
	/* and the spoof check turned off too */
	sim_sriov(f, 3, "spoofchk", p, sizeof(p));
	spit(p, "off\n");
	assert_roce(tick(f, &d, &st, &t), 3, true, 100, true);
	json_decref(st);
}

/* The fake NIC drops the VF's VLAN when its spoof check is written, so the
 * read-back differs from what was set. */
static void drops_vlan(void *arg, const char *path, const char *data)
{
	struct fake *f = arg;
	char p[PATH_MAX + 128];

	(void)data;
	if (strstr(path, "/sriov/2/spoofchk")) {
		sim_sriov(f, 2, "vlan", p, sizeof(p));
		spit(p, "0\n"); /* after the VLAN write, before the spoof check's */
	}
}

static void test_sim_roce_vf_that_reads_back_otherwise_is_not_ready(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	json_t *st, *e;

	f->h.driver = ISO_VF_SIM;
	f->h.trace = drops_vlan;
	desired_roce(&d, 2, 101);
	e = tick(f, &d, &st, &t);
	assert_roce(e, 2, false, 0, true);
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")),
	                       "reads VLAN 0 spoofchk on after the write, not VLAN 101"));
	assert_int_equal(t.failed, 1);
	json_decref(st);
}

static void test_roce_vf_needs_a_driver_and_a_pf(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	json_t *st, *e;

	/* mlx5 on the fake tree, whose HCA lists no PF network interface */
	desired_roce(&d, 1, 100);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 1, false, NULL, "ibp3s0v1");
	assert_non_null(
	    strstr(json_string_value(json_object_get(e, "reason")), "no PF network interface"));
	assert_int_equal(f->n_log, 0);
	json_decref(st);
	/* a VF that does not exist */
	desired_roce(&d, 9, 100);
	e = tick(f, &d, &st, &t);
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "sriov_numvfs"));
	json_decref(st);
	f->h.driver = ISO_VF_NONE;
	desired_roce(&d, 1, 100);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 1, false, NULL, NULL);
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "--vf-driver"));
	json_decref(st);
	f->h.driver = ISO_VF_IBSIM;
	e = tick(f, &d, &st, &t);
	assert_non_null(
	    strstr(json_string_value(json_object_get(e, "reason")), "ibsim VF driver has no RoCE"));
	json_decref(st);
}

static void test_ibsim_driver_reads_the_net_file(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	json_t *st, *e;

	snprintf(f->net, sizeof(f->net), "%s/net", f->dir);
	spit(f->net, "caguid=0x0002c90300ef00ff\n"
	             "Hca 1 \"H5\" # \"" NODE "-vf0 mlx5_0\"\n"
	             "[1] \"S1\"[5] # lid 0 4xSDR\n\n"
	             "caguid=0x0002c90300ef0100\n"
	             "Hca 1 \"H6\" # \"" NODE "-vf1 mlx5_0\"\n"
	             "[1] \"S1\"[6] # lid 0 4xSDR\n\n");
	f->h.driver = ISO_VF_IBSIM;
	f->h.ibsim_net = f->net;
	desired(&d, 0, G1);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 0, true, "0x0002c90300ef0100", "");
	json_decref(st);
	desired(&d, 1, G1); /* the CA has G2 */
	e = tick(f, &d, &st, &t);
	assert_entry(e, 1, false, "0x0002c90300ef0101", "");
	json_decref(st);
	desired(&d, 7, G1);
	e = tick(f, &d, &st, &t);
	assert_entry(e, 7, false, "", "");
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "gpu-a01-vf7"));
	json_decref(st);
	assert_int_equal(f->n_log, 0);
}

/* A desired GUID of zero or all-ones is refused per VF by every driver, not
 * only by mlx5: on ibsim a CA whose caguid is all-ones reads back as zero
 * (caguid + 1), which was reported ready at GUID zero (found by
 * fuzz_agent_vf, crashes/agent_vf/). */
static void test_ibsim_invalid_guid_refused(void **state)
{
	struct fake *f = *state;
	struct iso_agent_desired d;
	struct iso_vf_tick t;
	json_t *st, *e;

	snprintf(f->net, sizeof(f->net), "%s/net", f->dir);
	spit(f->net, "caguid=0xffffffffffffffff\n"
	             "Hca 1 \"H5\" # \"" NODE "-vf0 mlx5_0\"\n"
	             "caguid=0xfffffffffffffffe\n"
	             "Hca 1 \"H6\" # \"" NODE "-vf1 mlx5_0\"\n");
	f->h.driver = ISO_VF_IBSIM;
	f->h.ibsim_net = f->net;
	desired(&d, 0, 0);
	e = tick(f, &d, &st, &t);
	assert_false(json_is_true(json_object_get(e, "ready")));
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "not valid"));
	json_decref(st);
	desired(&d, 1, UINT64_MAX);
	e = tick(f, &d, &st, &t);
	assert_false(json_is_true(json_object_get(e, "ready")));
	assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "not valid"));
	json_decref(st);
}

/* The net file as `isoctl fabric ibsim-net` renders it for
 * examples/cluster-ib.yaml (ISOCTL, set by meson): each VF of gpu-a01..a07
 * reads back as the GUID the inventory gives it there (the node's
 * vfs.guid_base 0x946dae0300a2NN00 plus the VF's index, 8 VFs a node). */
static void test_ibsim_driver_on_the_rendered_net_file(void **state)
{
	struct fake *f = *state;
	const char *root = getenv("ISO_SOURCE_ROOT"), *isoctl = getenv("ISOCTL");

	if (!isoctl || !root)
		fail_msg("ISOCTL and ISO_SOURCE_ROOT must be set (meson sets them)");
	snprintf(f->net, sizeof(f->net), "%s/ibsim.net", f->dir);
	sh("'%s' fabric ibsim-net --config '%s/examples/cluster-ib.yaml' > '%s'", isoctl, root,
	   f->net);
	f->h.driver = ISO_VF_IBSIM;
	f->h.ibsim_net = f->net;
	for (unsigned n = 1; n <= 7; n++)
		for (unsigned v = 0; v < 8; v++) {
			struct iso_agent_vf_want w = {
			    .index = v, .guid = 0x946dae0300a20000ULL + n * 0x100 + v};
			struct iso_agent_desired d = {.n_vfs = 1, .vfs = &w};
			struct iso_vf_tick t;
			json_t *st;

			snprintf(d.node, sizeof(d.node), "gpu-a%02u", n);
			iso_strlcpy(w.device, DEV, sizeof(w.device));
			assert_entry(tick(f, &d, &st, &t), v, true, NULL, "");
			json_decref(st);
		}
}

/* ---- the desired document's vfs, parsed ---- */

static const char *const good_vf =
    "{\"index\": 2, \"device\": \"mlx5_0\", \"guid\": \"0x0002c90300ef0102\", \"tenant\": "
    "\"acme\", \"pkey\": \"0x8101\", \"members\": [{\"allocation\": \"a-0123456789abcdef\", "
    "\"member\": 0}]}";

static int parse_vfs(const char *vfs, struct iso_agent_desired *d, struct iso_error *err)
{
	char text[2048];
	json_t *doc;
	int r;

	snprintf(text, sizeof(text),
	         "{\"node\": \"" NODE "\", \"generation\": 5, \"term\": 1, \"gpus\": [], "
	         "\"vfs\": %s}",
	         vfs);
	doc = json_loads(text, 0, NULL);
	assert_non_null(doc);
	r = iso_agent_desired_parse(doc, NODE, d, err);
	json_decref(doc);
	return r;
}

static void test_desired_vfs_parsed(void **state)
{
	struct iso_agent_desired d;
	struct iso_error err = {0};
	char text[1024];

	(void)state;
	snprintf(text, sizeof(text), "[%s]", good_vf);
	assert_int_equal(parse_vfs(text, &d, &err), 0);
	assert_int_equal(d.n_vfs, 1);
	assert_int_equal(d.vfs[0].index, 2);
	assert_string_equal(d.vfs[0].device, "mlx5_0");
	assert_true(d.vfs[0].guid == 0x0002c90300ef0102ULL);
	assert_string_equal(d.vfs[0].tenant, "acme");
	assert_int_equal(d.vfs[0].pkey, 0x8101);
	assert_int_equal(d.vfs[0].n_members, 1);
	iso_agent_desired_clear(&d);
}

static void test_garbled_vfs_refused_naming_the_field(void **state)
{
	static const struct {
		const char *from, *to, *field;
	} cases[] = {
	    {"\"index\": 2", "\"index\": 128", "vfs[0].index"},
	    {"\"index\": 2", "\"index\": -1", "vfs[0].index"},
	    {"\"index\": 2", "\"index\": \"2\"", "vfs[0].index"},
	    {"\"device\": \"mlx5_0\"", "\"device\": \"../x\"", "vfs[0].device"},
	    {"\"device\": \"mlx5_0\"", "\"device\": \"mlx5-0\"", "vfs[0].device"},
	    {"\"0x0002c90300ef0102\"", "\"02:c9:03:00:ef:01:02:00\"", "vfs[0].guid"},
	    {"\"0x0002c90300ef0102\"", "\"0x2c90300ef0102\"", "vfs[0].guid"},
	    {"\"0x0002c90300ef0102\"", "\"0x0002c90300ef01zz\"", "vfs[0].guid"},
	    {"\"pkey\": \"0x8101\"", "\"pkey\": \"0x0101\"", "vfs[0].pkey"},
	    {"\"pkey\": \"0x8101\"", "\"pkey\": \"0xffff\"", "vfs[0].pkey"},
	    {"\"pkey\": \"0x8101\"", "\"pkey\": 33025", "vfs[0].pkey"},
	    {"\"tenant\": \"acme\"", "\"tenant\": \"\"", "vfs[0].tenant"},
	    {"\"members\": [", "\"members\": 3, \"x\": [", "vfs[0].x"},
	    {"\"members\": [{", "\"members\": [7, {", "vfs[0].members[0]"},
	    {"\"member\": 0", "\"member\": 1024", "vfs[0].members[0].member"},
	    {"\"member\": 0", "\"member\": 0, \"gpu\": 1", "vfs[0].members[0].gpu"},
	    {"\"index\": 2", "\"index\": 2, \"policy\": \"Up\"", "vfs[0].policy"},
	};
	char text[2048], vf[1024];
	struct iso_agent_desired d;
	struct iso_error err;

	(void)state;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(cases); i++) {
		const char *at = strstr(good_vf, cases[i].from);
		assert_non_null(at);
		snprintf(vf, sizeof(vf), "%.*s%s%s", (int)(at - good_vf), good_vf, cases[i].to,
		         at + strlen(cases[i].from));
		snprintf(text, sizeof(text), "[%s]", vf);
		memset(&err, 0, sizeof(err));
		if (parse_vfs(text, &d, &err) == 0)
			fail_msg("case %zu (%s) was accepted", i, cases[i].to);
		assert_string_equal(err.field, cases[i].field);
		assert_int_equal(d.n_vfs, 0);
		assert_null(d.vfs);
	}
	/* twice the same VF; not an array; not objects */
	snprintf(text, sizeof(text), "[%s, %s]", good_vf, good_vf);
	memset(&err, 0, sizeof(err));
	assert_int_not_equal(parse_vfs(text, &d, &err), 0);
	assert_string_equal(err.field, "vfs[1].index");
	assert_int_not_equal(parse_vfs("{}", &d, &err), 0);
	assert_string_equal(err.field, "vfs");
	assert_int_not_equal(parse_vfs("[1]", &d, &err), 0);
	assert_string_equal(err.field, "vfs[0]");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_program_then_idempotent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restore_on_release_and_neighbour_untouched, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_zero_and_all_ones_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rollback_when_bind_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restart_finds_the_saved_original, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_a_vf_without_pci_function, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_none_driver_reports_not_ready, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sim_driver_keeps_its_tree_in_the_state_dir, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_ibsim_driver_reads_the_net_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ibsim_invalid_guid_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_names_are_no_saved_original, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_ibsim_driver_on_the_rendered_net_file, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_sim_roce_vf_gets_the_vlan_and_spoofchk, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_sim_roce_vf_that_reads_back_otherwise_is_not_ready,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_roce_vf_needs_a_driver_and_a_pf, setup, teardown),
	    cmocka_unit_test(test_desired_vfs_parsed),
	    cmocka_unit_test(test_garbled_vfs_refused_naming_the_field),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_inventory.c: the inventory loader against the shipped examples (facts
 * checked one by one) and against bad inputs, each of which must fail with
 * ISO_E_INVALID, the right field path and the right line, and leave the
 * output pointer untouched. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isostack/inventory.h"
#include "isostack/mig.h"

/* examples/... relative to ISO_SOURCE_ROOT when set (meson), else the cwd. */
static void source_path(char *buf, size_t size, const char *rel)
{
	const char *root = getenv("ISO_SOURCE_ROOT");

	if (root && root[0])
		snprintf(buf, size, "%s/%s", root, rel);
	else
		snprintf(buf, size, "%s", rel);
}

static struct iso_inventory *load_example(const char *rel)
{
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	char path[1024];

	source_path(path, sizeof(path), rel);
	int r = iso_inventory_load_file(path, &inv, &err);
	if (r != 0)
		fail_msg("%s: %s", path, err.message);
	assert_non_null(inv);
	return inv;
}

static int load(const char *yaml, struct iso_inventory **inv, struct iso_error *err)
{
	return iso_inventory_load_string("t.yaml", yaml, strlen(yaml), inv, err);
}

/* The load must fail with ISO_E_INVALID, field == `field`, a message that
 * starts "t.yaml:LINE: field: " (or "t.yaml:LINE: " without a field) and
 * contains `needle`; the output pointer must stay as it was. */
static void expect_fail_at(const char *yaml, int line, const char *field, const char *needle)
{
	struct iso_inventory *sentinel = (struct iso_inventory *)&sentinel;
	struct iso_inventory *inv = sentinel;
	struct iso_error err = {0};
	char prefix[256];

	int r = load(yaml, &inv, &err);
	if (r == 0) {
		iso_inventory_free(inv);
		fail_msg("accepted, expected an error at line %d field '%s':\n%s", line, field,
		         yaml);
	}
	assert_int_equal(r, -EINVAL);
	assert_ptr_equal(inv, sentinel);
	assert_int_equal(err.code, ISO_E_INVALID);
	if (strcmp(err.field, field) != 0)
		fail_msg("field '%s', expected '%s' (message: %s)", err.field, field, err.message);
	if (field[0])
		snprintf(prefix, sizeof(prefix), "t.yaml:%d: %s: ", line, field);
	else
		snprintf(prefix, sizeof(prefix), "t.yaml:%d: ", line);
	if (strncmp(err.message, prefix, strlen(prefix)) != 0)
		fail_msg("message '%s' does not start with '%s'", err.message, prefix);
	if (!strstr(err.message, needle))
		fail_msg("message '%s' does not contain '%s'", err.message, needle);
}

/* Lines 1-9 of most cases; nodes start at line 10. */
#define HEAD                                                                                       \
	"cluster: t\n"                                                                             \
	"fabric:\n"                                                                                \
	"  type: infiniband\n"                                                                     \
	"  sm_nodes: [sm-1]\n"                                                                     \
	"pools:\n"                                                                                 \
	"  - name: p\n"                                                                            \
	"racks:\n"                                                                                 \
	"  - name: r1\n"                                                                           \
	"    pdus: [u1, u2]\n"

/* One node at lines 11-17 (port at 17). */
#define NODE1                                                                                      \
	"  - name: n1\n"                                                                           \
	"    rack: r1\n"                                                                           \
	"    pdu: u1\n"                                                                            \
	"    pool: p\n"                                                                            \
	"    cpus: 4\n"                                                                            \
	"    memory_gib: 16\n"                                                                     \
	"    port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128}\n"

/* ---- the examples ---- */

static void test_example_cluster(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_example("examples/cluster.yaml");
	const struct iso_node *n;
	int gpus = 0, in_pool_mig = 0;

	assert_string_equal(inv->cluster_name, "demo");
	assert_non_null(strstr(inv->path, "examples/cluster.yaml"));
	assert_string_equal(inv->controller.listen, "127.0.0.1:8470");
	assert_string_equal(inv->controller.placement, "isostack");
	assert_false(inv->controller.allow_remote_http);
	assert_string_equal(inv->controller.tls_cert, "");

	assert_int_equal(inv->fabric.type, ISO_FABRIC_INFINIBAND);
	assert_string_equal(inv->fabric.name, "ib0");
	assert_int_equal(inv->fabric.n_sm_nodes, 2);
	assert_string_equal(inv->fabric.sm_nodes[0], "ufm-sm-1");
	assert_string_equal(inv->fabric.sm_nodes[1], "ufm-sm-2");
	assert_int_equal(inv->fabric.pkey_min, 0x0100);
	assert_int_equal(inv->fabric.pkey_max, 0x7ffe);
	assert_int_equal(inv->fabric.n_services, 1);
	assert_string_equal(inv->fabric.services[0].name, "storage");
	assert_int_equal(inv->fabric.services[0].pkey, 0x0010);
	assert_int_equal(inv->fabric.services[0].n_guids, 2);
	assert_true(inv->fabric.services[0].guids[1] == UINT64_C(0x946dae0300f5e002));

	assert_int_equal(inv->n_pools, 2);
	assert_string_equal(inv->pools[0].name, "gpu");
	assert_string_equal(inv->pools[1].name, "mig");
	assert_int_equal(inv->n_racks, 2);
	assert_string_equal(inv->racks[1].name, "rack-b");
	assert_int_equal(inv->racks[1].n_pdus, 2);
	assert_string_equal(inv->racks[1].pdus[1], "pdu-b2");

	assert_int_equal(inv->n_nodes, 16);
	assert_string_equal(inv->nodes[0].name, "gpu-a01");
	assert_string_equal(inv->nodes[15].name, "gpu-b08");
	for (int i = 0; i < inv->n_nodes; i++) {
		const struct iso_node *x = &inv->nodes[i];
		gpus += x->n_gpus;
		in_pool_mig += strcmp(x->pool, "mig") == 0;
		assert_int_equal(x->sched, ISO_NODE_SCHEDULABLE);
		assert_int_equal(x->cpus, 112);
		assert_int_equal(x->memory_mib, 2048LL * 1024);
		assert_true(x->has_port);
		assert_int_equal(x->port.n_vfs, 16);
		for (int g = 0; g < x->n_gpus; g++) {
			assert_int_equal(x->gpus[g].index, g);
			assert_ptr_equal(x->gpus[g].model, iso_gpu_model_find("h100-80gb"));
			assert_true(x->gpus[g].mig_enabled);
		}
	}
	assert_int_equal(gpus, 128);
	assert_int_equal(in_pool_mig, 8);

	n = iso_inventory_find_node(inv, "gpu-b03");
	assert_non_null(n);
	assert_ptr_equal(n, &inv->nodes[10]);
	assert_string_equal(n->rack, "rack-b");
	assert_string_equal(n->pdu, "pdu-b1");
	assert_string_equal(n->pool, "mig");
	assert_string_equal(n->port.device, "mlx5_0");
	assert_int_equal(n->port.port_num, 1);
	assert_int_equal(n->port.pkey_capacity, 128);
	assert_true(n->port.guid == UINT64_C(0x946dae0300a1b013));
	/* VF i = guid_base + i */
	assert_true(n->port.vf_guids[0] == UINT64_C(0x946dae0300a21300));
	assert_true(n->port.vf_guids[15] == UINT64_C(0x946dae0300a2130f));

	n = iso_inventory_find_node(inv, "gpu-a07");
	assert_non_null(n);
	assert_string_equal(n->rack, "rack-a");
	assert_string_equal(n->pdu, "pdu-a2");
	assert_string_equal(n->pool, "gpu");
	assert_true(n->port.guid == UINT64_C(0x946dae0300a1b007));
	assert_null(iso_inventory_find_node(inv, "gpu-c01"));
	assert_null(iso_inventory_find_node(inv, ""));
	for (int i = 0; i < inv->n_nodes; i++)
		assert_ptr_equal(iso_inventory_find_node(inv, inv->nodes[i].name), &inv->nodes[i]);
	iso_inventory_free(inv);
}

static void test_example_ethernet(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_example("examples/cluster-eth.yaml");

	assert_int_equal(inv->fabric.type, ISO_FABRIC_ETHERNET);
	assert_int_equal(inv->fabric.vni_min, 10000);
	assert_int_equal(inv->fabric.vni_max, 16000000);
	assert_int_equal(inv->fabric.n_sm_nodes, 0);
	assert_int_equal(inv->n_nodes, 4);
	assert_string_equal(inv->controller.listen, "127.0.0.1:8470"); /* default */
	for (int i = 0; i < inv->n_nodes; i++) {
		assert_false(inv->nodes[i].has_port);
		assert_int_equal(inv->nodes[i].n_gpus, 8);
		assert_ptr_equal(inv->nodes[i].gpus[0].model, iso_gpu_model_find("a100-80gb"));
	}
	assert_true(inv->nodes[0].gpus[7].mig_enabled);
	assert_false(inv->nodes[3].gpus[7].mig_enabled); /* list form overrides the class */
	assert_string_equal(inv->nodes[0].underlay_ip, "192.0.2.11");
	assert_string_equal(inv->nodes[3].underlay_ip, "192.0.2.14");
	/* Nodes of one class get their own copy of its GPUs. */
	assert_ptr_not_equal(inv->nodes[0].gpus, inv->nodes[1].gpus);
	iso_inventory_free(inv);
}

/* Lines 1-5 of an ethernet cluster; nodes start at line 6. */
#define ETH_HEAD                                                                                   \
	"cluster: t\n"                                                                             \
	"fabric: {type: ethernet}\n"                                                               \
	"pools: [{name: p}]\n"                                                                     \
	"racks: [{name: r1, pdus: [u1]}]\n"                                                        \
	"nodes:\n"
#define ETH_NODE(name, extra)                                                                      \
	"  - {name: " name ", rack: r1, pdu: u1, pool: p, cpus: 4, memory_gib: 16" extra "}\n"

/* fabric.vlan_range (issue 14, RoCE VFs): ethernet only, optional (none:
 * 0, 0), each end a VLAN id 1-4094, min <= max. */
#define ETH_VL(fab)                                                                                \
	"cluster: e\nfabric: {type: ethernet, " fab "}\npools: [{name: p}]\n"                      \
	"racks: [{name: r, pdus: [u]}]\n"                                                          \
	"nodes: [{name: c1, rack: r, pdu: u, pool: p, cpus: 1, memory_mib: 1}]\n"
static void test_vlan_range(void **state)
{
	(void)state;
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};

	assert_int_equal(load(ETH_VL("vlan_range: [100, 3999]"), &inv, &err), 0);
	assert_int_equal(inv->fabric.vlan_min, 100);
	assert_int_equal(inv->fabric.vlan_max, 3999);
	iso_inventory_free(inv);
	inv = NULL;
	assert_int_equal(load(ETH_VL("vni_range: [1, 2]"), &inv, &err), 0);
	assert_int_equal(inv->fabric.vlan_min, 0);
	assert_int_equal(inv->fabric.vlan_max, 0);
	iso_inventory_free(inv);

#define VL(x) "cluster: t\nfabric:\n  type: ethernet\n  vlan_range: " x "\n"
	expect_fail_at(VL("[0, 10]"), 4, "fabric.vlan_range[0]", "must be between 1 and 4094");
	expect_fail_at(VL("[1, 4095]"), 4, "fabric.vlan_range[1]", "must be between 1 and 4094");
	expect_fail_at(VL("[300, 200]"), 4, "fabric.vlan_range", "min 300 is above max 200");
	expect_fail_at(VL("[100]"), 4, "fabric.vlan_range", "needs at least 2 entries, got 1");
	expect_fail_at(VL("[100, 200, 300]"), 4, "fabric.vlan_range", "at most 2");
	expect_fail_at(VL("[100, ten]"), 4, "fabric.vlan_range[1]", "expected an integer");
	expect_fail_at(VL("100"), 4, "fabric.vlan_range", "expected a list");
#undef VL
	expect_fail_at("cluster: t\nfabric:\n  type: infiniband\n  sm_nodes: [sm-1]\n"
	               "  vlan_range: [100, 200]\n",
	               5, "fabric.vlan_range", "only allowed on ethernet fabrics");
#undef ETH_VL

	/* RoCE VFs: port.vfs on ethernet only with vlan_range, GUIDs optional */
#define ETH_VF(fab, vfs)                                                                           \
	"cluster: e\nfabric: {type: ethernet" fab "}\npools: [{name: p}]\n"                        \
	"racks: [{name: r, pdus: [u]}]\nnodes:\n"                                                  \
	"  - {name: c1, rack: r, pdu: u, pool: p, cpus: 1, memory_mib: 1,\n"                       \
	"     port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128, vfs: " vfs "}}\n"
	inv = NULL;
	assert_int_equal(load(ETH_VF(", vlan_range: [100, 101]", "{count: 4}"), &inv, &err), 0);
	assert_int_equal(inv->nodes[0].port.n_vfs, 4);
	assert_true(inv->nodes[0].port.vf_guids[3] == 0);
	iso_inventory_free(inv);
	inv = NULL;
	assert_int_equal(
	    load(ETH_VF(", vlan_range: [100, 101]", "{count: 2, guid_base: 0x20}"), &inv, &err), 0);
	assert_true(inv->nodes[0].port.vf_guids[1] == 0x21);
	iso_inventory_free(inv);
	expect_fail_at(ETH_VF("", "{count: 4}"), 7, "nodes[0].port.vfs", "need fabric.vlan_range");
	expect_fail_at(ETH_VF("", "{count: 2, guid_base: 0x20}"), 7, "nodes[0].port.vfs",
	               "need fabric.vlan_range");
	inv = NULL;
	/* no VFs: no VLANs needed */
	assert_int_equal(load(ETH_VF("", "{count: 0}"), &inv, &err), 0);
	iso_inventory_free(inv);
#undef ETH_VF
}

/* underlay_ip (issue 14): per node, ethernet only, a strict IPv4 address,
 * unique; optional (a node without one carries no overlay members). */
static void test_underlay_ip(void **state)
{
	(void)state;
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	const char *ok = ETH_HEAD ETH_NODE("n1", ", underlay_ip: 192.0.2.11") ETH_NODE("n2", "")
	    ETH_NODE("n3", ", underlay_ip: \"10.0.0.1\"");

	assert_int_equal(load(ok, &inv, &err), 0);
	assert_string_equal(inv->nodes[0].underlay_ip, "192.0.2.11");
	assert_string_equal(inv->nodes[1].underlay_ip, "");
	assert_string_equal(inv->nodes[2].underlay_ip, "10.0.0.1");
	iso_inventory_free(inv);

	expect_fail_at(ETH_HEAD ETH_NODE("n1", ", underlay_ip: 192.0.2.256"), 6,
	               "nodes[0].underlay_ip", "not an IPv4 address");
	expect_fail_at(ETH_HEAD ETH_NODE("n1", ", underlay_ip: 192.0.2.011"), 6,
	               "nodes[0].underlay_ip", "not an IPv4 address");
	expect_fail_at(ETH_HEAD ETH_NODE("n1", ", underlay_ip: 192.0.2"), 6, "nodes[0].underlay_ip",
	               "not an IPv4 address");
	expect_fail_at(ETH_HEAD ETH_NODE("n1", ", underlay_ip: \"192.0.2.1/24\""), 6,
	               "nodes[0].underlay_ip", "not an IPv4 address");
	expect_fail_at(ETH_HEAD ETH_NODE("n1", ", underlay_ip: \"::1\""), 6, "nodes[0].underlay_ip",
	               "not an IPv4 address");
	expect_fail_at(ETH_HEAD ETH_NODE("n1", ", underlay_ip: [1]"), 6, "nodes[0].underlay_ip",
	               "");
	expect_fail_at(ETH_HEAD ETH_NODE("n1", ", underlay_ip: 192.0.2.11") ETH_NODE("n2", "")
	                   ETH_NODE("n3", ", underlay_ip: 192.0.2.11"),
	               8, "nodes[2].underlay_ip", "already the underlay_ip of node 'n1' (line 6)");
	/* not on an InfiniBand fabric */
	expect_fail_at(HEAD "nodes:\n" NODE1 "    underlay_ip: 192.0.2.11\n", 18,
	               "nodes[0].underlay_ip", "only allowed on ethernet fabrics");
	/* per node: a class cannot set it */
	expect_fail_at("cluster: t\nfabric: {type: ethernet}\npools: [{name: p}]\n"
	               "racks: [{name: r1, pdus: [u1]}]\n"
	               "node_classes:\n  c: {pool: p, underlay_ip: 192.0.2.1}\n"
	               "nodes:\n" ETH_NODE("n1", ", class: c"),
	               6, "node_classes.c.underlay_ip", "per node");
}

/* ---- good inputs: defaults, merging, forms ---- */

static void test_minimal_defaults(void **state)
{
	(void)state;
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};

	assert_int_equal(load(HEAD "nodes:\n" NODE1, &inv, &err), 0);
	assert_string_equal(inv->path, "t.yaml");
	assert_string_equal(inv->fabric.name, "fabric");
	assert_int_equal(inv->fabric.pkey_min, 0x0100);
	assert_int_equal(inv->fabric.pkey_max, 0x7ffe);
	assert_int_equal(inv->fabric.n_services, 0);
	assert_string_equal(inv->controller.listen, "127.0.0.1:8470");
	assert_string_equal(inv->controller.placement, "isostack");
	assert_int_equal(inv->nodes[0].n_gpus, 0);
	assert_null(inv->nodes[0].gpus);
	assert_int_equal(inv->nodes[0].memory_mib, 16 * 1024);
	assert_int_equal(inv->nodes[0].port.n_vfs, 0);
	assert_null(inv->nodes[0].port.vf_guids);
	assert_true(inv->nodes[0].port.guid == 0x10);
	iso_inventory_free(inv);
}

static void test_class_merge_and_forms(void **state)
{
	(void)state;
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	const char *yaml =
	    HEAD "controller:\n"
	         "  listen: '[::1]:9000'\n"
	         "  tls: {cert: /etc/isostack/cert.pem, key: /etc/isostack/key.pem}\n"
	         "  allow_remote_http: true\n"
	         "node_classes:\n"
	         "  big:\n"
	         "    pool: p\n"
	         "    cpus: 64\n"
	         "    memory_gib: 512\n"
	         "    gpus: {model: A100-40GB, count: 4}\n"
	         "    port: {device: mlx5_1, port: 2, pkey_capacity: 64, vfs: {count: 3}}\n"
	         "nodes:\n"
	         "  - name: n1\n"
	         "    class: big\n"
	         "    rack: r1\n"
	         "    pdu: u1\n"
	         "    cpus: 32\n"
	         "    memory_mib: 1000\n"
	         "    port: {guid: 0x100, vfs: {guids: [0x201, 0x203, 0x202]}}\n"
	         "  - name: n2\n"
	         "    class: big\n"
	         "    rack: r1\n"
	         "    pdu: u2\n"
	         "    gpus:\n"
	         "      - {index: 5, model: h200-141gb, mig: true}\n"
	         "      - {index: 1, model: a30-24gb}\n"
	         "    port: {guid: 0x101, pkey_capacity: 128, vfs: {count: 0}}\n";

	if (load(yaml, &inv, &err) != 0)
		fail_msg("%s", err.message);
	assert_string_equal(inv->controller.listen, "[::1]:9000");
	assert_string_equal(inv->controller.tls_cert, "/etc/isostack/cert.pem");
	assert_string_equal(inv->controller.tls_key, "/etc/isostack/key.pem");
	assert_true(inv->controller.allow_remote_http);

	const struct iso_node *a = &inv->nodes[0], *b = &inv->nodes[1];
	assert_int_equal(a->cpus, 32);         /* node overrides the class */
	assert_int_equal(a->memory_mib, 1000); /* memory_mib overrides memory_gib */
	assert_string_equal(a->pool, "p");     /* from the class */
	assert_int_equal(a->n_gpus, 4);
	assert_ptr_equal(a->gpus[3].model, iso_gpu_model_find("a100-40gb"));
	assert_false(a->gpus[3].mig_enabled);
	assert_string_equal(a->port.device, "mlx5_1");
	assert_int_equal(a->port.port_num, 2);
	assert_int_equal(a->port.pkey_capacity, 64);
	assert_int_equal(a->port.n_vfs, 3);
	assert_true(a->port.vf_guids[1] == 0x203);

	assert_int_equal(b->cpus, 64);
	assert_int_equal(b->memory_mib, 512 * 1024);
	assert_int_equal(b->n_gpus, 2); /* list form, sorted by index */
	assert_int_equal(b->gpus[0].index, 1);
	assert_ptr_equal(b->gpus[0].model, iso_gpu_model_find("a30-24gb"));
	assert_int_equal(b->gpus[1].index, 5);
	assert_true(b->gpus[1].mig_enabled);
	assert_int_equal(b->port.pkey_capacity, 128);
	assert_int_equal(b->port.n_vfs, 0);
	assert_null(b->port.vf_guids);
	iso_inventory_free(inv);
}

static void test_ethernet_and_omnipath(void **state)
{
	(void)state;
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};

	assert_int_equal(
	    load("cluster: e\n"
	         "fabric: {type: ethernet}\n"
	         "pools: [{name: p, description: 'CPU only'}]\n"
	         "racks: [{name: r, pdus: [u]}]\n"
	         "nodes: [{name: c1, rack: r, pdu: u, pool: p, cpus: 1, memory_mib: 1}]\n",
	         &inv, &err),
	    0);
	assert_int_equal(inv->fabric.vni_min, 4096);
	assert_int_equal(inv->fabric.vni_max, 16777215);
	assert_int_equal(inv->fabric.pkey_min, 0);
	assert_string_equal(inv->pools[0].description, "CPU only");
	assert_false(inv->nodes[0].has_port);
	iso_inventory_free(inv);
	inv = NULL;

	assert_int_equal(
	    load("cluster: o\n"
	         "fabric: {type: omnipath, sm_nodes: [fm-1.example.org], pkey_range: "
	         "[1, 0x7ffe]}\n"
	         "pools: [{name: p}]\n"
	         "racks: [{name: r, pdus: [u]}]\n"
	         "nodes: [{name: c1, rack: r, pdu: u, pool: p, cpus: 1, memory_mib: 1,\n"
	         "         port: {device: hfi1_0, port: 1, guid: 0x1, pkey_capacity: "
	         "16}}]\n",
	         &inv, &err),
	    0);
	assert_int_equal(inv->fabric.type, ISO_FABRIC_OMNIPATH);
	assert_int_equal(inv->fabric.pkey_min, 1);
	assert_string_equal(inv->fabric.sm_nodes[0], "fm-1.example.org");
	iso_inventory_free(inv);
}

/* ---- files ---- */

static void test_missing_file(void **state)
{
	(void)state;
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};

	int r = iso_inventory_load_file("/nonexistent/dir/cluster.yaml", &inv, &err);
	assert_int_equal(r, -ENOENT);
	assert_null(inv);
	assert_int_equal(err.code, ISO_E_NOT_FOUND);
	assert_non_null(strstr(err.message, "/nonexistent/dir/cluster.yaml"));
	assert_non_null(strstr(err.message, "No such file"));

	r = iso_inventory_load_file("/", &inv, &err);
	assert_int_equal(r, -EINVAL);
	assert_non_null(strstr(err.message, "not a regular file"));
}

static void test_file_errors_name_the_file(void **state)
{
	(void)state;
	char path[] = "/tmp/test_inventory_XXXXXX";
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	char want[128];
	int fd = mkstemp(path);
	FILE *f;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(HEAD "nodes:\n" NODE1 "    speed: 400\n", f);
	fclose(f);
	assert_int_equal(iso_inventory_load_file(path, &inv, &err), -EINVAL);
	unlink(path);
	assert_null(inv);
	assert_string_equal(err.field, "nodes[0].speed");
	snprintf(want, sizeof(want), "%s:18: nodes[0].speed: unknown key 'speed'", path);
	assert_non_null(strstr(err.message, want));
}

/* ---- bad inputs ---- */

static void test_syntax_errors(void **state)
{
	(void)state;
	expect_fail_at("cluster: t\nfabric:\n  type: x: y\n", 3, "", "YAML syntax error");
	expect_fail_at("cluster: t\npools:\n\t- name: p\n", 3, "", "YAML syntax error");
	/* libfyaml refuses duplicate keys itself */
	expect_fail_at("cluster: t\ncluster: u\n", 2, "", "duplicate key 'cluster'");
	expect_fail_at(HEAD "nodes:\n" NODE1 "    cpus: 8\n", 18, "", "duplicate key 'cpus'");
	expect_fail_at(HEAD "nodes:\n" NODE1 "---\ncluster: u\n", 19, "", "second YAML document");
	/* Not UTF-8: refused before libfyaml, which spins for ever on the
	 * first one (tests/fuzz/crashes/inventory/). */
	expect_fail_at("%\xff\ncluster: t\n", 1, "", "byte 0xff is not UTF-8");
	expect_fail_at("cluster: t\n# caf\xc3\xa9 \xc3\n", 2, "", "byte 0xc3 is not UTF-8");
	expect_fail_at("cluster: t\xed\xa0\x80\n", 1, "", "byte 0xed is not UTF-8");
}

static void test_document_shape(void **state)
{
	(void)state;
	expect_fail_at("", 1, "", "empty document");
	expect_fail_at("# only a comment\n", 1, "", "empty document");
	expect_fail_at("---\n...\n", 1, "", "empty document");
	expect_fail_at("- a\n- b\n", 1, "", "root must be a mapping");
	expect_fail_at("just a string\n", 1, "", "root must be a mapping");
	expect_fail_at("cluster: t\n", 1, "fabric", "missing required key 'fabric'");
	expect_fail_at(HEAD, 1, "nodes", "missing required key 'nodes'");
	expect_fail_at(HEAD "nodes: []\n", 10, "nodes", "at least 1");
	expect_fail_at(HEAD "nodes:\n" NODE1 "colour: blue\n", 18, "colour",
	               "unknown key 'colour' (allowed: cluster, controller");
	expect_fail_at("cluster: Bad_Name\n", 1, "cluster", "not a valid name");
	expect_fail_at("cluster: &a t\nfabric: *a\n", 2, "fabric", "aliases are not supported");
	expect_fail_at("cluster: !!str t\n", 1, "cluster", "tags are not supported");
}

static void test_unknown_keys(void **state)
{
	(void)state;
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128, "
	                    "speed: 400}\n",
	               17, "nodes[0].port.speed", "unknown key 'speed'");
	expect_fail_at("cluster: t\nfabric:\n  type: infiniband\n  sm: [a]\n", 4, "fabric.sm",
	               "allowed: type, name, sm_nodes, pkey_range");
	expect_fail_at(HEAD "node_classes:\n  c:\n    rack: r1\nnodes:\n" NODE1, 12,
	               "node_classes.c.rack", "per node and cannot be set in a class");
	expect_fail_at(HEAD "node_classes:\n  c:\n    port: {guid: 0x1}\nnodes:\n" NODE1, 12,
	               "node_classes.c.port.guid", "GUIDs are per node");
}

static void test_duplicates(void **state)
{
	(void)state;
	/* node name */
	expect_fail_at(HEAD "nodes:\n" NODE1 "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: mlx5_0, port: 1, guid: 0x11, pkey_capacity: 128}\n",
	               18, "nodes[1].name",
	               "duplicate node name 'n1' (first used by nodes[0].name at line 11)");
	/* GUID of two ports */
	expect_fail_at(
	    HEAD "nodes:\n" NODE1 "  - name: n2\n"
	         "    rack: r1\n"
	         "    pdu: u1\n"
	         "    pool: p\n"
	         "    cpus: 4\n"
	         "    memory_gib: 16\n"
	         "    port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128}\n",
	    24, "nodes[1].port.guid",
	    "duplicate GUID 0x0000000000000010 (first used by nodes[0].port.guid at line "
	    "17)");
	/* pool, rack, pdu (across racks) */
	expect_fail_at("cluster: t\nfabric: {type: ethernet}\npools:\n  - name: p\n  - name: p\n",
	               5, "pools[1].name",
	               "duplicate pool name 'p' (first used by pools[0].name at line 4)");
	expect_fail_at("cluster: t\nfabric: {type: ethernet}\npools: [{name: p}]\n"
	               "racks:\n  - {name: r, pdus: [u]}\n  - {name: r, pdus: [v]}\n",
	               6, "racks[1].name", "duplicate rack name 'r'");
	expect_fail_at("cluster: t\nfabric: {type: ethernet}\npools: [{name: p}]\n"
	               "racks:\n  - {name: r, pdus: [u, v]}\n  - {name: s, pdus: [w, v]}\n",
	               6, "racks[1].pdus[1]",
	               "duplicate PDU name 'v' (first used by racks[0].pdus[1] at line 5)");
	expect_fail_at("cluster: t\nfabric: {type: infiniband, sm_nodes: [a, b, a]}\n", 2,
	               "fabric.sm_nodes[2]", "duplicate subnet manager 'a'");
}

static void test_vf_guids(void **state)
{
	(void)state;
	/* A port GUID inside an earlier node's VF range. */
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: d, port: 1, guid: 0x10, pkey_capacity: 8,\n"
	                    "           vfs: {count: 4, guid_base: 0x20}}\n"
	                    "  - name: n2\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: d, port: 1, guid: 0x22, pkey_capacity: 8}\n",
	               25, "nodes[1].port.guid",
	               "duplicate GUID 0x0000000000000022 (first used by VF 2 of "
	               "nodes[0].port.vfs.guid_base at line 18)");
	/* A VF range running over a later... no: over an earlier port GUID. */
	expect_fail_at(HEAD "nodes:\n" NODE1 "  - name: n2\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: d, port: 1, guid: 0x1, pkey_capacity: 8,\n"
	                    "           vfs: {count: 16, guid_base: 0x8}}\n",
	               25, "nodes[1].port.vfs.guid_base",
	               "duplicate GUID 0x0000000000000010 for VF 8 (first used by "
	               "nodes[0].port.guid at line 17)");
	/* Two explicit VF GUIDs of one node. */
	expect_fail_at(
	    HEAD "nodes:\n"
	         "  - name: n1\n"
	         "    rack: r1\n"
	         "    pdu: u1\n"
	         "    pool: p\n"
	         "    cpus: 4\n"
	         "    memory_gib: 16\n"
	         "    port:\n"
	         "      device: d\n"
	         "      port: 1\n"
	         "      guid: 0x10\n"
	         "      pkey_capacity: 8\n"
	         "      vfs:\n"
	         "        count: 2\n"
	         "        guids:\n"
	         "          - 0x30\n"
	         "          - 0x30\n",
	    26, "nodes[0].port.vfs.guids[1]",
	    "duplicate GUID 0x0000000000000030 (first used by nodes[0].port.vfs.guids[0] at "
	    "line 25)");
	/* A shared-service GUID reused by a port. */
	expect_fail_at("cluster: t\n"
	               "fabric:\n"
	               "  type: infiniband\n"
	               "  sm_nodes: [sm-1]\n"
	               "  shared_services: [{name: storage, pkey: 0x10, guids: [0x10]}]\n"
	               "pools:\n"
	               "  - name: p\n"
	               "racks:\n"
	               "  - name: r1\n"
	               "    pdus: [u1, u2]\n"
	               "nodes:\n" NODE1,
	               18, "nodes[0].port.guid",
	               "first used by fabric.shared_services[0].guids[0] at line 5");
	/* Counts and forms. */
	const char *pre = HEAD "nodes:\n"
	                       "  - name: n1\n"
	                       "    rack: r1\n"
	                       "    pdu: u1\n"
	                       "    pool: p\n"
	                       "    cpus: 4\n"
	                       "    memory_gib: 16\n";
	char buf[2048];
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 0x10, pkey_capacity: 8, vfs: {count: 4}}\n");
	expect_fail_at(buf, 17, "nodes[0].port.vfs", "give guid_base or guids");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 0x10, pkey_capacity: 8,\n"
	         "           vfs: {count: 2, guid_base: 0x20, guids: [0x30, 0x31]}}\n");
	expect_fail_at(buf, 18, "nodes[0].port.vfs.guids", "not both");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 0x10, pkey_capacity: 8,\n"
	         "           vfs: {count: 3, guids: [0x30, 0x31]}}\n");
	expect_fail_at(buf, 18, "nodes[0].port.vfs.guids", "has 2 GUIDs but vfs.count is 3");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 0x10, pkey_capacity: 8,\n"
	         "           vfs: {count: 2, guid_base: 0xffffffffffffffff}}\n");
	expect_fail_at(buf, 18, "nodes[0].port.vfs.guid_base", "runs past 0xffffffffffffffff");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 0x10, pkey_capacity: 8,\n"
	         "           vfs: {count: 0, guid_base: 0x20}}\n");
	expect_fail_at(buf, 18, "nodes[0].port.vfs.guid_base", "vfs.count is 0");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 0x10, pkey_capacity: 8,\n"
	         "           vfs: {count: 128, guid_base: 0x20}}\n");
	expect_fail_at(buf, 18, "nodes[0].port.vfs.count", "must be between 0 and 127, got '128'");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 0x0, pkey_capacity: 8}\n");
	expect_fail_at(buf, 17, "nodes[0].port.guid", "GUID 0 is not a valid GUID");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 1234, pkey_capacity: 8}\n");
	expect_fail_at(buf, 17, "nodes[0].port.guid",
	               "expected a GUID (0x and 1-16 hex digits), got an integer '1234'");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    port: {device: d, port: 1, guid: 0x10000000000000000, pkey_capacity: 8}\n");
	expect_fail_at(buf, 17, "nodes[0].port.guid", "expected a GUID");
}

static void test_gpus(void **state)
{
	(void)state;
	const char *pre =
	    HEAD "nodes:\n"
	         "  - name: n1\n"
	         "    rack: r1\n"
	         "    pdu: u1\n"
	         "    pool: p\n"
	         "    cpus: 4\n"
	         "    memory_gib: 16\n"
	         "    port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128}\n";
	char buf[4096];

	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    gpus:\n"
	         "      - {index: 0, model: h100-80gb}\n"
	         "      - {index: 1, model: h100-80gb}\n"
	         "      - {index: 0, model: h100-80gb}\n");
	expect_fail_at(buf, 21, "nodes[0].gpus[2].index",
	               "duplicate GPU index 0 (first used by nodes[0].gpus[0].index at line 19)");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    gpus: {model: h100, count: 8}\n");
	expect_fail_at(buf, 18, "nodes[0].gpus.model", "unknown GPU model 'h100' (known: ");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    gpus: {model: h100-80gb, count: 65}\n");
	expect_fail_at(buf, 18, "nodes[0].gpus.count", "must be between 1 and 64, got '65'");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    gpus: {model: h100-80gb}\n");
	expect_fail_at(buf, 18, "nodes[0].gpus.count", "missing required key 'count'");
	snprintf(buf, sizeof(buf), "%s%s", pre,
	         "    gpus: {model: h100-80gb, count: 2, mig: yes}\n");
	expect_fail_at(buf, 18, "nodes[0].gpus.mig", "expected true or false, got a string 'yes'");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    gpus: [{index: 64, model: h100-80gb}]\n");
	expect_fail_at(buf, 18, "nodes[0].gpus[0].index", "must be between 0 and 63");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    gpus: 8\n");
	expect_fail_at(buf, 18, "nodes[0].gpus", "expected a list, got an integer '8'");

	/* 65 GPUs in list form */
	size_t o = (size_t)snprintf(buf, sizeof(buf), "%s    gpus: [", pre);
	for (int i = 0; i < 65; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s{index: %d, model: a30-24gb}",
		                      i ? ", " : "", i);
	snprintf(buf + o, sizeof(buf) - o, "]\n");
	expect_fail_at(buf, 18, "nodes[0].gpus", "has 65 entries, at most 64 allowed");

	/* The unknown-model message lists every model of the tables. */
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	snprintf(buf, sizeof(buf), "%s%s", pre, "    gpus: {model: h100, count: 8}\n");
	assert_int_equal(load(buf, &inv, &err), -EINVAL);
	for (int i = 0; iso_gpu_model_at(i); i++)
		assert_non_null(strstr(err.message, iso_gpu_model_at(i)->name));
}

static void test_missing_keys(void **state)
{
	(void)state;
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128}\n",
	               11, "nodes[0].cpus", "missing required key 'cpus'");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n",
	               11, "nodes[0].port", "every node needs a port on an infiniband fabric");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: mlx5_0, port: 1, pkey_capacity: 128}\n",
	               17, "nodes[0].port.guid", "missing required key 'guid'");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - rack: r1\n",
	               11, "nodes[0].name", "missing required key 'name'");
	expect_fail_at("cluster: t\nfabric: {type: infiniband}\n", 2, "fabric.sm_nodes",
	               "missing required key 'sm_nodes'");
	expect_fail_at("cluster: t\nfabric: {name: x}\n", 2, "fabric.type",
	               "missing required key 'type'");
	expect_fail_at("cluster: t\nfabric: {type: ethernet}\npools: [{name: p}]\n"
	               "racks: [{name: r}]\n",
	               4, "racks[0].pdus", "missing required key 'pdus'");
	/* The class does not give pool either. */
	expect_fail_at(HEAD "node_classes:\n  c: {cpus: 1}\nnodes:\n"
	                    "  - name: n1\n"
	                    "    class: c\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128}\n",
	               13, "nodes[0].pool", "not set on the node nor in its class");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n",
	               11, "nodes[0].memory_gib",
	               "missing required key 'memory_gib': or memory_mib");
	/* The class gives a port; the node must still give its GUID. */
	expect_fail_at(HEAD "node_classes:\n"
	                    "  c: {port: {device: d, port: 1, pkey_capacity: 8}}\n"
	                    "nodes:\n"
	                    "  - name: n1\n"
	                    "    class: c\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n",
	               13, "nodes[0].port.guid", "the node's class gives it a port");
	/* vfs without a count anywhere */
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: d, port: 1, guid: 0x10, pkey_capacity: 8,\n"
	                    "           vfs: {guid_base: 0x20}}\n",
	               18, "nodes[0].port.vfs.count", "missing required key 'count'");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: d, guid: 0x10, pkey_capacity: 8}\n",
	               17, "nodes[0].port.port", "missing required key 'port'");
}

static void test_wrong_types_and_ranges(void **state)
{
	(void)state;
	const char *pre =
	    HEAD "nodes:\n"
	         "  - name: n1\n"
	         "    rack: r1\n"
	         "    pdu: u1\n"
	         "    pool: p\n"
	         "    memory_gib: 16\n"
	         "    port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128}\n";
	char buf[2048];

	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: \"4\"\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "expected an integer, got a string '4'");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: four\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "expected an integer, got a string 'four'");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: -4\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "must be between 1 and 65536, got '-4'");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: 0\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "must be between 1 and 65536, got '0'");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: 99999999999999999999999\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "must be between 1 and 65536");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: 4.0\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "expected an integer, got a float '4.0'");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: 010\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "leading zeros are ambiguous");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: 0o10\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "octal is not accepted");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: [4]\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "expected an integer, got a list");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus:\n");
	expect_fail_at(buf, 17, "nodes[0].cpus", "has no value (expected an integer)");
	snprintf(buf, sizeof(buf), "%s%s", pre, "    cpus: 0x10\n"); /* hex is an integer */
	{
		struct iso_inventory *inv = NULL;
		struct iso_error err = {0};
		assert_int_equal(load(buf, &inv, &err), 0);
		assert_int_equal(inv->nodes[0].cpus, 16);
		iso_inventory_free(inv);
	}

	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port:\n"
	                    "      device: mlx5_0\n"
	                    "      port: 1\n"
	                    "      guid: 0x10\n"
	                    "      pkey_capacity: 127.5\n",
	               21, "nodes[0].port.pkey_capacity",
	               "expected an integer, got a float '127.5'");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: mlx5_0, port: 255, guid: 0x10, pkey_capacity: 1}\n",
	               17, "nodes[0].port.port", "must be between 1 and 254, got '255'");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    memory_mib: 16384\n"
	                    "    port: {device: mlx5_0, port: 1, guid: 0x10, pkey_capacity: 128}\n",
	               17, "nodes[0].memory_mib", "give memory_gib or memory_mib, not both");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: N1\n",
	               11, "nodes[0].name", "'N1' is not a valid name");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u1\n"
	                    "    pool: p\n"
	                    "    cpus: 4\n"
	                    "    memory_gib: 16\n"
	                    "    port: {device: 'mlx5 0', port: 1, guid: 0x10, pkey_capacity: 1}\n",
	               17, "nodes[0].port.device", "not an RDMA device name");
	expect_fail_at(HEAD "nodes:\n  name: n1\n", 11, "nodes", "expected a list, got a mapping");
	expect_fail_at(HEAD "nodes:\n  - n1\n", 11, "nodes[0]",
	               "expected a mapping, got a string 'n1'");
	/* 65537 nodes: refused before any node is looked at. */
	size_t big = 65537 * 3 + 64;
	char *yaml = malloc(sizeof(HEAD) + big);
	assert_non_null(yaml);
	size_t o = (size_t)sprintf(yaml, "%snodes: [", HEAD);
	for (int i = 0; i < 65537; i++)
		o += (size_t)sprintf(yaml + o, "%s{}", i ? "," : "");
	sprintf(yaml + o, "]\n");
	expect_fail_at(yaml, 10, "nodes", "has 65537 entries, at most 65536 allowed");
	free(yaml);
}

static void test_fabric_rules(void **state)
{
	(void)state;
#define FAB(x) "cluster: t\nfabric:\n  type: infiniband\n  sm_nodes: [sm-1]\n" x
	expect_fail_at(FAB("  pkey_range: [0x0100, 0x7fff]\n"), 5, "fabric.pkey_range[1]",
	               "0x7fff is the default partition");
	expect_fail_at(FAB("  pkey_range: [0x0100, 0xffff]\n"), 5, "fabric.pkey_range[1]",
	               "0xffff is the default partition");
	expect_fail_at(FAB("  pkey_range: [0x8001, 0x8002]\n"), 5, "fabric.pkey_range[0]",
	               "membership bit");
	expect_fail_at(FAB("  pkey_range: [0, 0x10]\n"), 5, "fabric.pkey_range[0]",
	               "between 0x0001 and 0x7ffe");
	expect_fail_at(FAB("  pkey_range: [0x0200, 0x0100]\n"), 5, "fabric.pkey_range",
	               "min 0x0200 is above max 0x0100");
	expect_fail_at(FAB("  pkey_range: [0x0200]\n"), 5, "fabric.pkey_range",
	               "needs at least 2 entries, got 1");
	expect_fail_at(FAB("  vni_range: [1, 2]\n"), 5, "fabric.vni_range",
	               "only allowed on ethernet and slingshot fabrics");
	expect_fail_at(FAB("  type: ethernet\n"), 5, "", "duplicate key");
	expect_fail_at(FAB("  shared_services:\n"
	                   "    - {name: storage, pkey: 0x0200, guids: [0x1]}\n"),
	               6, "fabric.shared_services[0].pkey",
	               "inside the tenant range 0x0100..0x7ffe");
	expect_fail_at(FAB("  shared_services:\n"
	                   "    - {name: storage, pkey: 0x0010, guids: [0x1]}\n"
	                   "    - {name: login, pkey: 0x0010, guids: [0x2]}\n"),
	               7, "fabric.shared_services[1].pkey",
	               "already used by fabric.shared_services[0]");
	expect_fail_at(FAB("  shared_services:\n"
	                   "    - {name: storage, pkey: 0x0010, guids: [0x1]}\n"
	                   "    - {name: storage, pkey: 0x0011, guids: [0x2]}\n"),
	               7, "fabric.shared_services[1].name",
	               "duplicate shared service name 'storage'");
	expect_fail_at(FAB("  shared_services:\n"
	                   "    - {name: storage, pkey: 0x0010, guids: []}\n"),
	               6, "fabric.shared_services[0].guids", "at least 1");
	expect_fail_at("cluster: t\nfabric:\n  type: ethernet\n  sm_nodes: [a]\n", 4,
	               "fabric.sm_nodes", "only allowed on infiniband and omnipath fabrics");
	expect_fail_at("cluster: t\nfabric:\n  type: ethernet\n  vni_range: [0, 10]\n", 4,
	               "fabric.vni_range[0]", "must be between 1 and 16777215");
	expect_fail_at("cluster: t\nfabric:\n  type: ethernet\n  vni_range: [1, 16777216]\n", 4,
	               "fabric.vni_range[1]", "must be between 1 and 16777215");
	/* issue 17: slingshot's VNIs are 16 bits; no SM, P_Keys or VLANs */
	expect_fail_at("cluster: t\nfabric:\n  type: slingshot\n  vni_range: [1, 65536]\n", 4,
	               "fabric.vni_range[1]", "must be between 1 and 65535");
	expect_fail_at("cluster: t\nfabric:\n  type: slingshot\n  vni_range: [0, 10]\n", 4,
	               "fabric.vni_range[0]", "must be between 1 and 65535");
	expect_fail_at("cluster: t\nfabric:\n  type: slingshot\n  sm_nodes: [a]\n", 4,
	               "fabric.sm_nodes", "only allowed on infiniband and omnipath fabrics");
	expect_fail_at("cluster: t\nfabric:\n  type: slingshot\n  pkey_range: [1, 2]\n", 4,
	               "fabric.pkey_range", "only allowed on infiniband and omnipath fabrics");
	expect_fail_at("cluster: t\nfabric:\n  type: slingshot\n  vlan_range: [1, 2]\n", 4,
	               "fabric.vlan_range", "only allowed on ethernet fabrics");
	{
		struct iso_inventory *inv = NULL;
		struct iso_error err = {0};
		/* a node needs no port on slingshot */
		const char *y =
		    "cluster: s\nfabric: {type: slingshot}\npools: [{name: p}]\n"
		    "racks: [{name: r, pdus: [u]}]\n"
		    "nodes: [{name: c1, rack: r, pdu: u, pool: p, cpus: 1, memory_mib: 1}]\n";
		if (iso_inventory_load_string("t.yaml", y, strlen(y), &inv, &err) != 0)
			fail_msg("%s", err.message);
		assert_int_equal(inv->fabric.type, ISO_FABRIC_SLINGSHOT);
		assert_int_equal(inv->fabric.vni_min, 1024);
		assert_int_equal(inv->fabric.vni_max, 65535);
		iso_inventory_free(inv);
	}
	expect_fail_at("cluster: t\nfabric:\n  type: token-ring\n", 3, "fabric.type",
	               "unknown fabric type 'token-ring'");
	expect_fail_at("cluster: t\nfabric:\n  type: infiniband\n  sm_nodes: [-bad]\n", 4,
	               "fabric.sm_nodes[0]", "not a valid host name");
#undef FAB
}

static void test_references(void **state)
{
	(void)state;
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r9\n"
	                    "    pdu: u1\n",
	               12, "nodes[0].rack", "rack 'r9' is not declared in racks (declared: r1)");
	expect_fail_at("cluster: t\n"
	               "fabric: {type: ethernet}\n"
	               "pools: [{name: p}]\n"
	               "racks:\n"
	               "  - {name: r1, pdus: [u1]}\n"
	               "  - {name: r2, pdus: [u2]}\n"
	               "nodes:\n"
	               "  - name: n1\n"
	               "    rack: r1\n"
	               "    pdu: u2\n",
	               10, "nodes[0].pdu", "pdu 'u2' belongs to rack 'r2', not to rack 'r1'");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    rack: r1\n"
	                    "    pdu: u9\n",
	               13, "nodes[0].pdu", "pdu 'u9' is not a pdu of rack 'r1' (its pdus: u1, u2)");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    class: hgx\n",
	               12, "nodes[0].class",
	               "class 'hgx' is not declared in node_classes (declared: none)");
	expect_fail_at(HEAD "node_classes:\n  a: {cpus: 1}\n  b: {cpus: 2}\nnodes:\n"
	                    "  - name: n1\n"
	                    "    class: c\n",
	               15, "nodes[0].class", "(declared: a, b)");
	expect_fail_at(HEAD "nodes:\n"
	                    "  - name: n1\n"
	                    "    pool: gpu\n",
	               12, "nodes[0].pool", "pool 'gpu' is not declared in pools (declared: p)");
	expect_fail_at(HEAD "node_classes:\n  c:\n    pool: gpu\nnodes:\n" NODE1, 12,
	               "node_classes.c.pool", "pool 'gpu' is not declared");
}

static void test_controller(void **state)
{
	(void)state;
	expect_fail_at("cluster: t\ncontroller:\n  tls: {cert: /c.pem}\n", 3, "controller.tls.key",
	               "missing required key 'key': tls needs both cert and key");
	expect_fail_at("cluster: t\ncontroller:\n  tls: {key: /k.pem}\n", 3, "controller.tls.cert",
	               "missing required key 'cert'");
	expect_fail_at("cluster: t\ncontroller:\n  listen: localhost\n", 3, "controller.listen",
	               "'localhost' is not HOST:PORT");
	expect_fail_at("cluster: t\ncontroller:\n  listen: 'h:70000'\n", 3, "controller.listen",
	               "is not HOST:PORT");
	expect_fail_at("cluster: t\ncontroller:\n  listen: '::1:80'\n", 3, "controller.listen",
	               "is not HOST:PORT");
	expect_fail_at("cluster: t\ncontroller:\n  allow_remote_http: 1\n", 3,
	               "controller.allow_remote_http",
	               "expected true or false, got an integer '1'");
	expect_fail_at("cluster: t\ncontroller:\n  placement: Best\n", 3, "controller.placement",
	               "not a valid name");
	expect_fail_at("cluster: t\ncontroller: []\n", 2, "controller",
	               "expected a mapping, got a list");
}

/* ---- fabric drivers ---- */

#define DRV(fabric_lines)                                                                          \
	"cluster: t\nfabric:\n  type: infiniband\n  sm_nodes: [sm-1]\n" fabric_lines               \
	"pools: [{name: p}]\nracks: [{name: r1, pdus: [u1]}]\nnodes:\n" NODE1

static void test_fabric_driver(void **state)
{
	(void)state;
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};

	/* defaults */
	if (load(DRV(""), &inv, &err) != 0)
		fail_msg("%s", err.message);
	assert_string_equal(inv->fabric.driver, "sim");
	assert_int_equal(inv->fabric.pkey_quarantine_ms, 300000);
	assert_int_equal(inv->fabric.coalesce_ms, 50);
	assert_int_equal(inv->fabric.confirm_timeout_ms, 10000);
	assert_string_equal(inv->fabric.sm.partitions_file, "");
	assert_int_equal(inv->fabric.n_standby, 0);
	iso_inventory_free(inv);
	inv = NULL;

	/* everything the opensm driver takes */
	if (load(DRV("  driver: opensm\n"
	             "  partitions_file: /etc/opensm/partitions.conf\n"
	             "  pid_file: /run/opensm.pid\n"
	             "  log_file: /var/log/opensm.log\n"
	             "  standby_sms:\n"
	             "    - {partitions_file: /mnt/sm2/partitions.conf, pid_file: /mnt/sm2/pid}\n"
	             "    - partitions_file: /mnt/sm3/partitions.conf\n"
	             "      log_file: /mnt/sm3/opensm.log\n"
	             "  pkey_quarantine_s: 0\n"
	             "  coalesce_ms: 0\n"
	             "  confirm_timeout_ms: 2500\n"),
	         &inv, &err) != 0)
		fail_msg("%s", err.message);
	assert_string_equal(inv->fabric.driver, "opensm");
	assert_string_equal(inv->fabric.sm.partitions_file, "/etc/opensm/partitions.conf");
	assert_string_equal(inv->fabric.sm.pid_file, "/run/opensm.pid");
	assert_string_equal(inv->fabric.sm.log_file, "/var/log/opensm.log");
	assert_int_equal(inv->fabric.n_standby, 2);
	assert_string_equal(inv->fabric.standby[0].pid_file, "/mnt/sm2/pid");
	assert_string_equal(inv->fabric.standby[0].log_file, "");
	assert_string_equal(inv->fabric.standby[1].partitions_file, "/mnt/sm3/partitions.conf");
	assert_string_equal(inv->fabric.standby[1].log_file, "/mnt/sm3/opensm.log");
	assert_int_equal(inv->fabric.pkey_quarantine_ms, 0);
	assert_int_equal(inv->fabric.coalesce_ms, 0);
	assert_int_equal(inv->fabric.confirm_timeout_ms, 2500);
	iso_inventory_free(inv);
	inv = NULL;

	/* opafm on omnipath */
	if (load("cluster: o\n"
	         "fabric: {type: omnipath, sm_nodes: [fm-1], driver: opafm, opafm_file: "
	         "/etc/opa-fm/opafm.xml}\n"
	         "pools: [{name: p}]\nracks: [{name: r, pdus: [u]}]\n"
	         "nodes: [{name: c1, rack: r, pdu: u, pool: p, cpus: 1, memory_mib: 1,\n"
	         "         port: {device: hfi1_0, port: 1, guid: 0x1, pkey_capacity: 16}}]\n",
	         &inv, &err) != 0)
		fail_msg("%s", err.message);
	assert_string_equal(inv->fabric.driver, "opafm");
	assert_string_equal(inv->fabric.opafm_file, "/etc/opa-fm/opafm.xml");
	iso_inventory_free(inv);
	inv = NULL;

	/* ethernet keeps the defaults too */
	if (load("cluster: e\nfabric: {type: ethernet, coalesce_ms: 10}\npools: [{name: p}]\n"
	         "racks: [{name: r, pdus: [u]}]\n"
	         "nodes: [{name: c1, rack: r, pdu: u, pool: p, cpus: 1, memory_mib: 1}]\n",
	         &inv, &err) != 0)
		fail_msg("%s", err.message);
	assert_string_equal(inv->fabric.driver, "sim");
	assert_int_equal(inv->fabric.coalesce_ms, 10);
	iso_inventory_free(inv);
}

static void test_fabric_driver_errors(void **state)
{
	(void)state;
	expect_fail_at(DRV("  driver: ufm\n"), 5, "fabric.driver",
	               "unknown driver 'ufm' (expected sim, opensm or opafm)");
	expect_fail_at(DRV("  driver: opafm\n  opafm_file: /x\n"), 5, "fabric.driver",
	               "opafm programs omnipath fabrics, not infiniband");
	expect_fail_at("cluster: e\nfabric:\n  type: ethernet\n  driver: opensm\n", 4,
	               "fabric.driver", "opensm programs infiniband fabrics, not ethernet");
	expect_fail_at(DRV("  driver: opensm\n"), 5, "fabric.partitions_file",
	               "missing required key 'partitions_file'");
	expect_fail_at("cluster: o\nfabric: {type: omnipath, sm_nodes: [fm-1], driver: opafm}\n", 2,
	               "fabric.opafm_file", "missing required key 'opafm_file'");
	expect_fail_at(DRV("  partitions_file: /x\n"), 5, "fabric.partitions_file",
	               "only used by fabric.driver opensm (the driver is sim)");
	expect_fail_at(DRV("  pid_file: /x\n"), 5, "fabric.pid_file",
	               "only used by fabric.driver opensm");
	expect_fail_at(DRV("  log_file: /x\n"), 5, "fabric.log_file",
	               "only used by fabric.driver opensm");
	expect_fail_at(DRV("  opafm_file: /x\n"), 5, "fabric.opafm_file",
	               "only used by fabric.driver opafm (the driver is sim)");
	expect_fail_at(DRV("  driver: opensm\n  partitions_file: ''\n"), 6,
	               "fabric.partitions_file", "must be a file path, not empty");
	expect_fail_at(DRV("  driver: opensm\n  partitions_file: [a]\n"), 6,
	               "fabric.partitions_file", "a string");
	expect_fail_at(DRV("  driver: opensm\n  partitions_file: /p\n  standby_sms: []\n"), 7,
	               "fabric.standby_sms", "at least 1");
	expect_fail_at(DRV("  driver: opensm\n  partitions_file: /p\n  standby_sms:\n"
	                   "    - {pid_file: /q}\n"),
	               8, "fabric.standby_sms[0].partitions_file",
	               "missing required key 'partitions_file'");
	expect_fail_at(DRV("  driver: opensm\n  partitions_file: /p\n  standby_sms:\n"
	                   "    - {partitions_file: /q, pidfile: /r}\n"),
	               8, "fabric.standby_sms[0].pidfile", "unknown key");
	expect_fail_at(DRV("  driver: opensm\n  partitions_file: /p\n  standby_sms:\n"
	                   "    - {partitions_file: /p}\n"),
	               8, "fabric.standby_sms[0]", "is the primary's fabric.partitions_file");
	expect_fail_at(DRV("  driver: opensm\n  partitions_file: /p\n  standby_sms:\n"
	                   "    - {partitions_file: /q}\n    - {partitions_file: /q}\n"),
	               9, "fabric.standby_sms[1]", "already fabric.standby_sms[0]'s");
	expect_fail_at(DRV("  coalesce_ms: 10001\n"), 5, "fabric.coalesce_ms", "10000");
	expect_fail_at(DRV("  coalesce_ms: -1\n"), 5, "fabric.coalesce_ms", "");
	expect_fail_at(DRV("  confirm_timeout_ms: 10\n"), 5, "fabric.confirm_timeout_ms", "100");
	expect_fail_at(DRV("  pkey_quarantine_s: -5\n"), 5, "fabric.pkey_quarantine_s", "");
	expect_fail_at(DRV("  pkey_quarantine_s: soon\n"), 5, "fabric.pkey_quarantine_s", "");
	expect_fail_at(DRV("  driver: opensm\n  driver: sim\n"), 6, "", "duplicate key");
}

/* fabric.partitions_writer agent: the SM host's agent writes partitions.conf */
static void test_fabric_partitions_writer(void **state)
{
	(void)state;
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};

	if (load(DRV("  driver: opensm\n  partitions_writer: agent\n  sm_node: n1\n"), &inv,
	         &err) != 0)
		fail_msg("%s", err.message);
	assert_true(inv->fabric.partitions_by_agent);
	assert_string_equal(inv->fabric.sm_node, "n1");
	assert_string_equal(inv->fabric.sm.partitions_file, "");
	iso_inventory_free(inv);
	inv = NULL;
	/* local is today's behaviour */
	if (load(DRV("  driver: opensm\n  partitions_writer: local\n  partitions_file: /p\n"), &inv,
	         &err) != 0)
		fail_msg("%s", err.message);
	assert_false(inv->fabric.partitions_by_agent);
	assert_string_equal(inv->fabric.sm_node, "");
	iso_inventory_free(inv);

	expect_fail_at(DRV("  driver: opensm\n  partitions_writer: agent\n"), 6, "fabric.sm_node",
	               "missing required key 'sm_node'");
	expect_fail_at(DRV("  driver: opensm\n  partitions_writer: agent\n  sm_node: sm-9\n"), 7,
	               "fabric.sm_node", "no node 'sm-9' in nodes");
	expect_fail_at(DRV("  driver: opensm\n  partitions_writer: agent\n  sm_node: n1\n"
	                   "  partitions_file: /p\n"),
	               8, "fabric.partitions_file", "not with fabric.partitions_writer agent");
	expect_fail_at(DRV("  driver: opensm\n  partitions_writer: agent\n  sm_node: n1\n"
	                   "  log_file: /l\n"),
	               8, "fabric.log_file", "--sm-log");
	expect_fail_at(
	    DRV("  driver: opensm\n  partitions_writer: remote\n  partitions_file: /p\n"), 6,
	    "fabric.partitions_writer", "unknown writer 'remote'");
	expect_fail_at(DRV("  driver: opensm\n  partitions_file: /p\n  sm_node: n1\n"), 7,
	               "fabric.sm_node", "only used with fabric.partitions_writer agent");
	expect_fail_at(DRV("  partitions_writer: agent\n"), 5, "fabric.partitions_writer",
	               "only used by fabric.driver opensm");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_example_cluster),
	    cmocka_unit_test(test_fabric_partitions_writer),
	    cmocka_unit_test(test_example_ethernet),
	    cmocka_unit_test(test_underlay_ip),
	    cmocka_unit_test(test_vlan_range),
	    cmocka_unit_test(test_minimal_defaults),
	    cmocka_unit_test(test_class_merge_and_forms),
	    cmocka_unit_test(test_ethernet_and_omnipath),
	    cmocka_unit_test(test_missing_file),
	    cmocka_unit_test(test_file_errors_name_the_file),
	    cmocka_unit_test(test_syntax_errors),
	    cmocka_unit_test(test_document_shape),
	    cmocka_unit_test(test_unknown_keys),
	    cmocka_unit_test(test_duplicates),
	    cmocka_unit_test(test_vf_guids),
	    cmocka_unit_test(test_gpus),
	    cmocka_unit_test(test_missing_keys),
	    cmocka_unit_test(test_wrong_types_and_ranges),
	    cmocka_unit_test(test_fabric_rules),
	    cmocka_unit_test(test_fabric_driver),
	    cmocka_unit_test(test_fabric_driver_errors),
	    cmocka_unit_test(test_references),
	    cmocka_unit_test(test_controller),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

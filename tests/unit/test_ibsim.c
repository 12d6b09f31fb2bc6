/* test_ibsim.c: the ibsim net file (every inventory GUID exactly once as a
 * CA port, switch port counts, symmetric links, one connected fat tree, VFs
 * on their PF's leaf, GUID collisions refused) read back by an independent
 * little parser here; the ibnetdiscover reader on output recorded under
 * ibsim (tests/unit/data/ibnetdiscover-small*.txt) and on bad input, every
 * error naming its line; and the YAML it writes. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/fabric.h"
#include "isostack/inventory.h"

static void source_path(char *buf, size_t size, const char *rel)
{
	const char *root = getenv("ISO_SOURCE_ROOT");

	if (root && root[0])
		snprintf(buf, size, "%s/%s", root, rel);
	else
		snprintf(buf, size, "%s", rel);
}

static struct iso_inventory *load_file(const char *rel)
{
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	char path[1024];

	source_path(path, sizeof(path), rel);
	if (iso_inventory_load_file(path, &inv, &err) != 0)
		fail_msg("%s: %s", path, err.message);
	return inv;
}

static char *read_file(const char *rel, size_t *len)
{
	char path[1024];
	FILE *f;
	char *buf;
	long n;

	source_path(path, sizeof(path), rel);
	f = fopen(path, "r");
	if (!f)
		fail_msg("%s: cannot open", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* ---- a net file, read back independently of ibsim_net.c ---- */

struct link {
	int node, port; /* -1: not connected */
};
struct nnode {
	bool sw;
	int nports;
	uint64_t guid; /* CA: port GUID; switch: its GUID */
	char desc[80];
	struct link *links; /* [0..nports] */
};
struct net {
	int n_ca, n_sw;
	struct nnode *ca, *sw; /* ca[i] is "H(i+1)", sw[j] is "S(j+1)" */
};

static void net_free(struct net *n)
{
	for (int i = 0; i < n->n_ca; i++)
		free(n->ca[i].links);
	for (int i = 0; i < n->n_sw; i++)
		free(n->sw[i].links);
	free(n->ca);
	free(n->sw);
}

/* Node index over both kinds: CAs first. */
static struct nnode *node_at(struct net *n, int idx)
{
	return idx < n->n_ca ? &n->ca[idx] : &n->sw[idx - n->n_ca];
}

static int node_ref(const struct net *n, const char *id)
{
	int k = atoi(id + 1) - 1;

	if (id[0] == 'H' && k >= 0 && k < n->n_ca)
		return k;
	if (id[0] == 'S' && k >= 0 && k < n->n_sw)
		return n->n_ca + k;
	fail_msg("unknown node id %s", id);
	return -1;
}

static void net_parse(const char *text, struct net *n)
{
	char *copy = strdup(text), *save = NULL, *line;
	int cap = 0;
	uint64_t pending = 0;
	struct nnode *cur = NULL;
	/* links are resolved after every node is known: keep them as text */
	struct {
		int from, port;
		char to[16];
		int to_port;
	} *raw = NULL;
	int n_raw = 0, raw_cap = 0;

	assert_non_null(copy);
	memset(n, 0, sizeof(*n));
	for (const char *p = text; *p; p++)
		cap += *p == '\n';
	n->ca = calloc((size_t)cap + 1, sizeof(*n->ca));
	n->sw = calloc((size_t)cap + 1, sizeof(*n->sw));
	assert_true(n->ca && n->sw);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long g;
		int np, id, port, rport;
		char rid[16];

		if (line[0] == '#')
			continue;
		if (sscanf(line, "caguid=0x%llx", &g) == 1 ||
		    sscanf(line, "switchguid=0x%llx", &g) == 1) {
			pending = g;
			continue;
		}
		if (sscanf(line, "Hca %d \"H%d\"", &np, &id) == 2) {
			assert_int_equal(np, 1);
			assert_int_equal(id, n->n_ca + 1); /* ids dense, in order */
			cur = &n->ca[n->n_ca++];
			cur->guid = pending + 1; /* ibsim: port 1 = node GUID + 1 */
		} else if (sscanf(line, "Switch %d \"S%d\"", &np, &id) == 2) {
			assert_int_equal(id, n->n_sw + 1);
			cur = &n->sw[n->n_sw++];
			cur->sw = true;
			cur->guid = pending;
		} else if (sscanf(line, "[%d] \"%15[^\"]\"[%d]", &port, rid, &rport) == 3) {
			assert_non_null(cur);
			if (n_raw == raw_cap) {
				raw_cap = raw_cap ? raw_cap * 2 : 256;
				raw = realloc(raw, (size_t)raw_cap * sizeof(*raw));
				assert_non_null(raw);
			}
			raw[n_raw].from =
			    cur->sw ? n->n_ca + (int)(cur - n->sw) : (int)(cur - n->ca);
			raw[n_raw].port = port;
			snprintf(raw[n_raw].to, sizeof(raw[n_raw].to), "%s", rid);
			raw[n_raw].to_port = rport;
			n_raw++;
			continue;
		} else {
			fail_msg("unexpected net line: %s", line);
		}
		cur->nports = np;
		const char *d = strstr(line, "# \"");
		assert_non_null(d);
		snprintf(cur->desc, sizeof(cur->desc), "%s", d + 3);
		cur->desc[strcspn(cur->desc, "\"")] = '\0';
		cur->links = malloc((size_t)(np + 1) * sizeof(*cur->links));
		assert_non_null(cur->links);
		for (int k = 0; k <= np; k++)
			cur->links[k] = (struct link){-1, -1};
		pending = 0;
	}
	for (int i = 0; i < n_raw; i++) {
		struct nnode *a = node_at(n, raw[i].from);
		assert_true(raw[i].port >= 1 && raw[i].port <= a->nports);
		assert_int_equal(a->links[raw[i].port].node, -1); /* each port once */
		a->links[raw[i].port] = (struct link){node_ref(n, raw[i].to), raw[i].to_port};
	}
	free(raw);
	free(copy);
}

/* Every link is given from both ends, and everything is one component. */
static void net_check_wiring(struct net *n)
{
	int total = n->n_ca + n->n_sw, head = 0, tail = 0;
	int *queue = malloc((size_t)total * sizeof(int));
	bool *seen = calloc((size_t)total, sizeof(bool));

	assert_true(queue && seen);
	for (int i = 0; i < total; i++) {
		struct nnode *a = node_at(n, i);
		for (int p = 1; p <= a->nports; p++) {
			struct link l = a->links[p];
			if (l.node < 0)
				continue;
			struct nnode *b = node_at(n, l.node);
			assert_true(l.port >= 1 && l.port <= b->nports);
			assert_int_equal(b->links[l.port].node, i);
			assert_int_equal(b->links[l.port].port, p);
			assert_true(a->sw || b->sw); /* CAs hang off switches */
		}
	}
	queue[tail++] = 0;
	seen[0] = true;
	while (head < tail) {
		struct nnode *a = node_at(n, queue[head++]);
		for (int p = 1; p <= a->nports; p++)
			if (a->links[p].node >= 0 && !seen[a->links[p].node]) {
				seen[a->links[p].node] = true;
				queue[tail++] = a->links[p].node;
			}
	}
	assert_int_equal(tail, total);
	free(queue);
	free(seen);
}

/* Sorted port GUIDs the inventory (and the SM) own. */
static uint64_t *inventory_guids(const struct iso_inventory *inv, uint64_t sm, int *n)
{
	int cap = 1, k = 0;
	uint64_t *g;

	for (int i = 0; i < inv->n_nodes; i++)
		cap += 1 + inv->nodes[i].port.n_vfs;
	for (int s = 0; s < inv->fabric.n_services; s++)
		cap += inv->fabric.services[s].n_guids;
	g = malloc((size_t)cap * sizeof(*g));
	assert_non_null(g);
	g[k++] = sm;
	for (int i = 0; i < inv->n_nodes; i++) {
		g[k++] = inv->nodes[i].port.guid;
		for (int v = 0; v < inv->nodes[i].port.n_vfs; v++)
			g[k++] = inv->nodes[i].port.vf_guids[v];
	}
	for (int s = 0; s < inv->fabric.n_services; s++)
		for (int j = 0; j < inv->fabric.services[s].n_guids; j++)
			g[k++] = inv->fabric.services[s].guids[j];
	qsort(g, (size_t)k, sizeof(*g), cmp_u64);
	*n = k;
	return g;
}

/* The whole contract of a rendered file against its inventory. */
static void check_net(const struct iso_inventory *inv, const char *text, int ports, uint64_t sm,
                      const struct iso_ibsim_net_stats *st)
{
	struct net n;
	int n_want;
	uint64_t *want = inventory_guids(inv, sm, &n_want);
	uint64_t *got;

	net_parse(text, &n);
	/* every PF, VF, service GUID and the SM's: exactly once */
	assert_int_equal(n.n_ca, n_want);
	got = malloc((size_t)n.n_ca * sizeof(*got));
	assert_non_null(got);
	for (int i = 0; i < n.n_ca; i++)
		got[i] = n.ca[i].guid;
	qsort(got, (size_t)n.n_ca, sizeof(*got), cmp_u64);
	for (int i = 0; i < n_want; i++)
		if (got[i] != want[i])
			fail_msg("CA GUIDs differ at %d: 0x%" PRIx64 " vs 0x%" PRIx64, i, got[i],
			         want[i]);
	/* the SM's HCA is the first record: ibsim attaches the SM there */
	assert_true(n.ca[0].guid == sm);
	for (int j = 0; j < n.n_sw; j++) {
		assert_int_equal(n.sw[j].nports, ports);
		for (int i = 0; i < n.n_ca;
		     i++) /* switch GUIDs collide with no CA port/node GUID */
			assert_true(n.sw[j].guid != n.ca[i].guid &&
			            n.sw[j].guid != n.ca[i].guid - 1);
	}
	net_check_wiring(&n);
	/* a node's VFs sit on its PF's leaf when they fit in half a switch */
	for (int i = 0; i < inv->n_nodes; i++) {
		const struct iso_port *p = &inv->nodes[i].port;
		int pf = -1;
		if (1 + p->n_vfs > ports - ports / 2)
			continue;
		for (int c = 0; c < n.n_ca; c++)
			if (n.ca[c].guid == p->guid)
				pf = c;
		assert_true(pf >= 0);
		assert_int_equal(strcspn(n.ca[pf].desc, " "), strlen(inv->nodes[i].name));
		assert_memory_equal(n.ca[pf].desc, inv->nodes[i].name, strlen(inv->nodes[i].name));
		for (int v = 0; v < p->n_vfs; v++)
			for (int c = 0; c < n.n_ca; c++)
				if (n.ca[c].guid == p->vf_guids[v]) {
					char want_desc[96];
					snprintf(want_desc, sizeof(want_desc), "%s-vf%d %s",
					         inv->nodes[i].name, v, p->device);
					assert_string_equal(n.ca[c].desc, want_desc);
					assert_int_equal(n.ca[c].links[1].node,
					                 n.ca[pf].links[1].node);
				}
	}
	if (st) {
		assert_int_equal(st->n_cas, n.n_ca);
		assert_int_equal(st->n_leaves + st->n_spines, n.n_sw);
		assert_int_equal(st->n_nodes, n.n_ca + n.n_sw);
		assert_int_equal(st->n_ports, n.n_ca + n.n_sw * (ports + 1));
	}
	free(want);
	free(got);
	net_free(&n);
}

static void test_render_small(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_file("tests/unit/data/ibsim-small.yaml");
	struct iso_ibsim_net_stats st = {0};
	struct iso_error err = {0};
	char *net = NULL;

	/* 8-port switches: four down ports a leaf, so each rack needs two
	 * leaves, and spines */
	struct iso_ibsim_net_opts o = {.switch_ports = 8, .stats = &st};
	assert_int_equal(iso_ibsim_net_render(inv, &o, &net, &err), 0);
	check_net(inv, net, 8, ISO_IBSIM_SM_GUID_DEFAULT, &st);
	assert_int_equal(st.n_cas, 20);
	assert_int_equal(st.n_leaves, 6); /* fabric 1, rack-a 2, rack-b 3 (cpu-b03 alone) */
	assert_true(st.n_spines >= 2);
	free(net);

	/* defaults: 36 ports, one leaf a rack, explicit SM GUID */
	o = (struct iso_ibsim_net_opts){.sm_guid = 0x1234, .stats = &st};
	assert_int_equal(iso_ibsim_net_render(inv, &o, &net, &err), 0);
	check_net(inv, net, 36, 0x1234, &st);
	assert_int_equal(st.n_leaves, 3);
	assert_non_null(strstr(net, "caguid=0x0000000000001233\nHca 1 \"H1\" # \"sm-1 mlx5_0\""));
	free(net);
	iso_inventory_free(inv);
}

static void test_render_example(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_file("examples/cluster.yaml");
	struct iso_ibsim_net_stats st = {0};
	struct iso_error err = {0};
	char *net = NULL;
	struct iso_ibsim_net_opts o = {.stats = &st};

	assert_int_equal(iso_ibsim_net_render(inv, &o, &net, &err), 0);
	check_net(inv, net, 36, ISO_IBSIM_SM_GUID_DEFAULT, &st);
	assert_int_equal(st.n_cas, 1 + 2 + 16 * 17);
	free(net);
	iso_inventory_free(inv);
}

/* Fat trees of many shapes (leaf counts below, at and above a switch's port
 * count; 1136 HCAs make 72 leaves, a multiple of 36, where unrotated uplinks
 * would split the tree in two) stay connected, and the synthetic inventory
 * matches its net file. */
static void test_synthetic(void **state)
{
	(void)state;
	static const struct {
		int hcas, vfs, ports;
	} cases[] = {{1, 0, 36},   {18, 0, 36},   {19, 0, 36},  {1000, 0, 36}, {300, 3, 36},
	             {648, 0, 36}, {650, 0, 36},  {40, 0, 4},   {64, 1, 8},    {37, 2, 6},
	             {100, 0, 5},  {33, 127, 36}, {1136, 0, 36}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct iso_ibsim_net_stats st = {0};
		struct iso_ibsim_net_opts o = {.switch_ports = cases[c].ports, .stats = &st};
		struct iso_inventory *inv = NULL;
		struct iso_error err = {0};
		char *yaml = NULL, *net = NULL, *net2 = NULL;

		assert_int_equal(
		    iso_ibsim_inventory_synthetic(cases[c].hcas, cases[c].vfs, &yaml, &err), 0);
		if (iso_inventory_load_string("syn.yaml", yaml, strlen(yaml), &inv, &err) != 0)
			fail_msg("case %zu: %s", c, err.message);
		assert_int_equal(inv->n_nodes, cases[c].hcas);
		assert_int_equal(iso_ibsim_net_render(inv, &o, &net, &err), 0);
		check_net(inv, net, cases[c].ports, ISO_IBSIM_SM_GUID_DEFAULT, &st);
		assert_int_equal(st.n_cas, 1 + 2 + cases[c].hcas * (1 + cases[c].vfs));
		/* the one-call form gives the same file */
		assert_int_equal(
		    iso_ibsim_net_synthetic(cases[c].hcas, cases[c].vfs, &o, &net2, &err), 0);
		assert_string_equal(net, net2);
		free(yaml);
		free(net);
		free(net2);
		iso_inventory_free(inv);
	}
}

static void expect_render_fail(const char *yaml, const struct iso_ibsim_net_opts *o,
                               const char *field, const char *needle)
{
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	char *net = (char *)"untouched";

	if (iso_inventory_load_string("t.yaml", yaml, strlen(yaml), &inv, &err) != 0)
		fail_msg("%s", err.message);
	assert_int_equal(iso_ibsim_net_render(inv, o, &net, &err), -EINVAL);
	assert_int_equal(err.code, ISO_E_INVALID);
	assert_string_equal(err.field, field);
	if (!strstr(err.message, needle))
		fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
	assert_string_equal(net, "untouched");
	iso_inventory_free(inv);
}

static const char small_head[] = "cluster: c\n"
                                 "fabric: {type: infiniband, sm_nodes: [sm-1]}\n"
                                 "pools: [{name: p}]\n"
                                 "racks: [{name: r, pdus: [u]}]\n"
                                 "nodes:\n";

static const char long_name[] = "n23456789012345678901234567890123456789012345678901234567890123";

static void test_render_refuses(void **state)
{
	(void)state;
	char yaml[2048];
	struct iso_ibsim_net_opts o = {0};

	snprintf(yaml, sizeof(yaml),
	         "%s  - {name: a, pool: p, cpus: 1, memory_gib: 1, rack: r, pdu: u,\n"
	         "     port: {device: mlx5_0, port: 1, pkey_capacity: 64, guid: 0x10,\n"
	         "            vfs: {count: 2, guid_base: 0x11}}}\n",
	         small_head);
	/* the SM's GUID is a VF's */
	o.sm_guid = 0x12;
	expect_render_fail(yaml, &o, "sm_guid", "nodes[0] (a)");
	/* a switch GUID on a CA port GUID, or one below one (its node GUID) */
	o = (struct iso_ibsim_net_opts){.switch_guid_base = 0x10};
	expect_render_fail(yaml, &o, "switch_guid_base", "0x0000000000000010 collides");
	o = (struct iso_ibsim_net_opts){.switch_guid_base = 0xf};
	expect_render_fail(yaml, &o, "switch_guid_base", "0x000000000000000f collides");
	o = (struct iso_ibsim_net_opts){.switch_ports = 3};
	expect_render_fail(yaml, &o, "switch_ports", "4..254");
	o = (struct iso_ibsim_net_opts){.switch_ports = 255};
	expect_render_fail(yaml, &o, "switch_ports", "4..254");
	/* GUID 0x1: ibsim would need node GUID 0 */
	snprintf(yaml, sizeof(yaml),
	         "%s  - {name: a, pool: p, cpus: 1, memory_gib: 1, rack: r, pdu: u,\n"
	         "     port: {device: mlx5_0, port: 1, pkey_capacity: 64, guid: 0x1}}\n",
	         small_head);
	expect_render_fail(yaml, NULL, "", "nodes[0] (a): port GUID 0x1");
	/* a node named like another node's VF stand-in */
	snprintf(yaml, sizeof(yaml),
	         "%s  - {name: a, pool: p, cpus: 1, memory_gib: 1, rack: r, pdu: u,\n"
	         "     port: {device: mlx5_0, port: 1, pkey_capacity: 64, guid: 0x10,\n"
	         "            vfs: {count: 1, guid_base: 0x11}}}\n"
	         "  - {name: a-vf0, pool: p, cpus: 1, memory_gib: 1, rack: r, pdu: u,\n"
	         "     port: {device: mlx5_0, port: 1, pkey_capacity: 64, guid: 0x20}}\n",
	         small_head);
	expect_render_fail(yaml, NULL, "", "\"a-vf0\"");
	/* a 63-character node name: the PF fits without its device, its VF does not */
	snprintf(yaml, sizeof(yaml),
	         "%s  - {name: %s, pool: p, cpus: 1, memory_gib: 1, rack: r, pdu: u,\n"
	         "     port: {device: mlx5_0, port: 1, pkey_capacity: 64, guid: 0x10}}\n",
	         small_head, long_name);
	{
		struct iso_inventory *inv = NULL;
		struct iso_error err = {0};
		char *net = NULL, want[128];
		assert_int_equal(
		    iso_inventory_load_string("t.yaml", yaml, strlen(yaml), &inv, &err), 0);
		assert_int_equal(iso_ibsim_net_render(inv, NULL, &net, &err), 0);
		snprintf(want, sizeof(want), "Hca 1 \"H2\" # \"%s\"\n", long_name);
		assert_non_null(strstr(net, want));
		free(net);
		iso_inventory_free(inv);
	}
	snprintf(yaml, sizeof(yaml),
	         "%s  - {name: %s, pool: p, cpus: 1, memory_gib: 1, rack: r, pdu: u,\n"
	         "     port: {device: mlx5_0, port: 1, pkey_capacity: 64, guid: 0x10,\n"
	         "            vfs: {count: 1, guid_base: 0x11}}}\n",
	         small_head, long_name);
	expect_render_fail(yaml, NULL, "", "longer than ibsim's 63 characters");
	/* Ethernet has no ibsim */
	expect_render_fail("cluster: c\n"
	                   "fabric: {type: ethernet}\n"
	                   "pools: [{name: p}]\n"
	                   "racks: [{name: r, pdus: [u]}]\n"
	                   "nodes:\n"
	                   "  - {name: a, pool: p, cpus: 1, memory_gib: 1, rack: r, pdu: u}\n",
	                   NULL, "fabric.type", "InfiniBand only");
}

static void test_synthetic_refuses(void **state)
{
	(void)state;
	struct iso_error err = {0};
	char *out = NULL;

	assert_int_equal(iso_ibsim_inventory_synthetic(0, 0, &out, &err), -EINVAL);
	assert_string_equal(err.field, "n_hcas");
	assert_int_equal(iso_ibsim_inventory_synthetic(65537, 0, &out, &err), -EINVAL);
	assert_int_equal(iso_ibsim_net_synthetic(2, 128, NULL, &out, &err), -EINVAL);
	assert_string_equal(err.field, "vfs_per_hca");
	assert_null(out);
}

/* ---- ibnetdiscover output ---- */

static void check_discovered(const char *rel, bool lids)
{
	struct iso_inventory *inv = load_file("tests/unit/data/ibsim-small.yaml");
	struct iso_discovered *d = NULL;
	struct iso_error err = {0};
	size_t len;
	char *text = read_file(rel, &len);
	int n_want;
	uint64_t *want = inventory_guids(inv, ISO_IBSIM_SM_GUID_DEFAULT, &n_want);

	if (iso_fabric_discover_parse(rel, text, len, &d, &err) != 0)
		fail_msg("%s", err.message);
	assert_int_equal(d->n_cas, n_want);
	assert_int_equal(d->n_switches, 9);
	for (int w = 0; w < n_want; w++) {
		int found = 0;
		for (int i = 0; i < d->n_cas; i++) {
			assert_int_equal(d->cas[i].n_ports, 1);
			assert_int_equal(d->cas[i].ports[0].port_num, 1);
			/* ibsim: node GUID = port GUID - 1 */
			assert_true(d->cas[i].node_guid == d->cas[i].ports[0].guid - 1);
			assert_true((d->cas[i].ports[0].lid != 0) == lids);
			found += d->cas[i].ports[0].guid == want[w];
		}
		assert_int_equal(found, 1);
	}
	/* one record checked in full */
	bool seen = false;
	for (int i = 0; i < d->n_cas; i++)
		if (strcmp(d->cas[i].desc, "cpu-b03 mlx5_1") == 0) {
			assert_true(d->cas[i].ports[0].guid == 0x946dae0300a1b013ULL);
			seen = true;
		}
	assert_true(seen);

	/* the YAML: a node per inventory node (plus sm-1 and the two storage
	 * ports), VFs folded back as they were given */
	char *yaml = NULL;
	assert_int_equal(iso_fabric_discover_yaml(d, &yaml, &err), 0);
	static const char *const expect[] = {
	    "  - name: gpu-a01\n    port: {device: mlx5_0, port: 1, guid: 0x946dae0300a1b001, vfs: "
	    "{count: 3, guid_base: 0x946dae0300a20100}}\n",
	    "  - name: gpu-a02\n    port: {device: mlx5_0, port: 1, guid: 0x946dae0300a1b002, vfs: "
	    "{count: 3, guids: [0x946dae0300a20201, 0x946dae0300a20203, 0x946dae0300a20202]}}\n",
	    "  - name: cpu-b03\n    port: {device: mlx5_1, port: 1, guid: 0x946dae0300a1b013}\n",
	    "  - name: storage-2\n    port: {device: mlx5_0, port: 1, guid: 0x946dae0300f5e002}\n",
	    "  - name: sm-1\n",
	    "20 channel adapters as 8 nodes,\n# 9 switches skipped",
	};
	for (size_t k = 0; k < sizeof(expect) / sizeof(expect[0]); k++)
		if (!strstr(yaml, expect[k]))
			fail_msg("YAML lacks:\n%s\n---- in:\n%s", expect[k], yaml);
	assert_null(strstr(yaml, "-vf"));
	free(yaml);
	free(want);
	free(text);
	iso_discovered_free(d);
	iso_inventory_free(inv);
}

static void test_discover_recorded(void **state)
{
	(void)state;
	check_discovered("tests/unit/data/ibnetdiscover-small.txt", true);
	check_discovered("tests/unit/data/ibnetdiscover-small-nosm.txt", false);
}

static void expect_parse_fail(const char *text, const char *where_what)
{
	struct iso_discovered *sentinel = (struct iso_discovered *)&sentinel;
	struct iso_discovered *d = sentinel;
	struct iso_error err = {0};

	int r = iso_fabric_discover_parse("t.txt", text, strlen(text), &d, &err);
	if (r == 0)
		fail_msg("accepted:\n%s", text);
	assert_int_equal(r, -EINVAL);
	assert_int_equal(err.code, ISO_E_INVALID);
	if (strncmp(err.message, where_what, strlen(where_what)) != 0)
		fail_msg("message \"%s\" does not start \"%s\"", err.message, where_what);
	assert_ptr_equal(d, sentinel);
}

#define CA1                                                                                        \
	"vendid=0x0\n"                                                                             \
	"caguid=0x946dae0300a1b000\n"                                                              \
	"Ca\t1 \"H-946dae0300a1b000\"\t\t# \"gpu-a01 mlx5_0\"\n"                                   \
	"[1](946dae0300a1b001) \t\"S-0002c90300f00002\"[1]\t\t# lid 2 lmc 0 \"leaf\" lid 5 "       \
	"4xSDR\n"
#define SW1                                                                                        \
	"switchguid=0x2c90300f00002(2c90300f00002)\n"                                              \
	"Switch\t8 \"S-0002c90300f00002\"\t\t# \"leaf rack-a/1\" base port 0 lid 5 lmc 0\n"        \
	"[1]\t\"H-946dae0300a1b000\"[1](946dae0300a1b001) \t\t# \"gpu-a01 mlx5_0\" lid 2 4xSDR\n"

static void test_discover_good_small(void **state)
{
	(void)state;
	struct iso_discovered *d = NULL;
	struct iso_error err = {0};
	const char *text =
	    "#\n# Topology file\n\n" SW1 "\n" CA1 "\n"
	    "Ca\t2 \"H-0000000000000abc\"\t\t# \"Login Node#1 \"x\" mlx5_2\"\n"
	    "[2](abe) \t\"S-0002c90300f00002\"[3]\n"
	    "[1](abd) \t\"S-0002c90300f00002\"[2][ext 4]\n\n"
	    "rtguid=0x77\n"
	    "Rt\t1 \"R-0000000000000077\"\t\t# \"router\"\n"
	    "[1](78) \t\"S-0002c90300f00002\"[4]\t\t# lid 9 lmc 0 \"leaf\" lid 5 4xSDR\n";

	if (iso_fabric_discover_parse("t.txt", text, strlen(text), &d, &err) != 0)
		fail_msg("%s", err.message);
	assert_int_equal(d->n_cas, 2);
	assert_int_equal(d->n_switches, 1);
	assert_int_equal(d->cas[0].ports[0].lid, 2);
	assert_int_equal(d->cas[0].line, 10);
	assert_string_equal(d->cas[1].desc, "Login Node#1 \"x\" mlx5_2");
	assert_int_equal(d->cas[1].n_ports, 2);
	assert_int_equal(d->cas[1].ports[0].port_num, 2);
	assert_true(d->cas[1].ports[1].guid == 0xabd);

	char *yaml = NULL;
	assert_int_equal(iso_fabric_discover_yaml(d, &yaml, &err), 0);
	/* "Login" sanitised; first port as written, the other one noted */
	assert_non_null(strstr(yaml,
	                       "  # also port 1: 0x0000000000000abd\n"
	                       "  - name: login\n"
	                       "    port: {device: mlx5_0, port: 2, guid: 0x0000000000000abe}\n"));
	free(yaml);
	iso_discovered_free(d);
}

/* Names: sanitised, made unique, empty ones from the GUID; VF stand-ins
 * that do not count 0..k-1 stay nodes. */
static void test_discover_names(void **state)
{
	(void)state;
	struct iso_discovered *d = NULL;
	struct iso_error err = {0};
	char *yaml = NULL;
	const char *text =
	    "Ca 1 \"H-0000000000000010\" # \"Node_A mlx5_0\"\n[1](11) \"S-1\"[1]\n\n"
	    "Ca 1 \"H-0000000000000020\" # \"node_a mlx5_1\"\n[1](21) \"S-1\"[2]\n\n"
	    "Ca 1 \"H-0000000000000030\" # \"---\"\n[1](31) \"S-1\"[3]\n\n"
	    "Ca 1 \"H-0000000000000040\" # \"h!x mlx5_0\"\n[1](41) \"S-1\"[4]\n\n"
	    "Ca 1 \"H-0000000000000050\" # \"h-x-vf1 mlx5_0\"\n[1](51) \"S-1\"[5]\n\n"
	    "Ca 1 \"H-0000000000000060\" # \"g mlx5_0\"\n[1](61) \"S-1\"[6]\n\n"
	    "Ca 1 \"H-0000000000000070\" # \"g-vf0 mlx5_0\"\n[1](71) \"S-1\"[7]\n\n"
	    "Ca 1 \"H-0000000000000080\" # \"g-vf1 mlx5_0\"\n[1](90) \"S-1\"[8]\n";

	if (iso_fabric_discover_parse("t.txt", text, strlen(text), &d, &err) != 0)
		fail_msg("%s", err.message);
	assert_int_equal(iso_fabric_discover_yaml(d, &yaml, &err), 0);
	static const char *const expect[] = {
	    "- name: node_a\n    port: {device: mlx5_0, port: 1, guid: 0x0000000000000011}",
	    "- name: node_a-2\n    port: {device: mlx5_1, port: 1, guid: 0x0000000000000021}",
	    "- name: ca-0000000000000030\n",
	    "- name: h-x\n",
	    "- name: h-x-vf1\n", /* h-x has no vf0: not folded */
	    "- name: g\n    port: {device: mlx5_0, port: 1, guid: 0x0000000000000061, vfs: "
	    "{count: 2, guids: [0x0000000000000071, 0x0000000000000090]}}",
	    "8 channel adapters as 6 nodes",
	};
	for (size_t k = 0; k < sizeof(expect) / sizeof(expect[0]); k++)
		if (!strstr(yaml, expect[k]))
			fail_msg("YAML lacks:\n%s\n---- in:\n%s", expect[k], yaml);
	free(yaml);
	iso_discovered_free(d);
}

static void test_discover_bad(void **state)
{
	(void)state;
	expect_parse_fail("", "t.txt:1: empty input");
	expect_parse_fail("#\n# only comments\n\n", "t.txt:3: no channel adapters");
	expect_parse_fail(SW1, "t.txt:3: no channel adapters");
	expect_parse_fail(CA1 "hello world\n", "t.txt:5: unexpected line \"hello world\"");
	expect_parse_fail("garbage\n" CA1, "t.txt:1: unexpected line");
	expect_parse_fail(CA1 "\n\x01\n", "t.txt:6: control character");
	/* truncated records */
	expect_parse_fail(CA1 "\nvendid=0x0\ncaguid=0x10\n",
	                  "t.txt:6: truncated record: key lines");
	expect_parse_fail(CA1 "\nCa 1 \"H-0000000000000010\" # \"x\"\n",
	                  "t.txt:6: truncated record: Ca without port lines");
	expect_parse_fail("Ca 1 \"H-0000000000000010\" # \"x\"\n\n" CA1,
	                  "t.txt:1: truncated record: Ca without port lines");
	expect_parse_fail(CA1 "\nCa 1 \"H-0000000000000010\" # \"x\"\n[1](946dae03",
	                  "t.txt:7: expected (PORT GUID)");
	expect_parse_fail(CA1 "\nCa 1 \"H-0000000000000010\" # \"x\"\n[1](11) \"S-1",
	                  "t.txt:7: expected \"REMOTE\"[PORT]");
	expect_parse_fail(CA1 "\nCa 1 \"H-0000000000000010", "t.txt:6: Ca: expected the quoted");
	expect_parse_fail(CA1 "\nCa 1 \"H-0000000000000010\"\n", "t.txt:6: Ca: expected # \"node");
	/* wrong shapes */
	expect_parse_fail(CA1 "[1](946dae0300a1b001) \"S-1\"[2]\n", "t.txt:5: port 1 given twice");
	expect_parse_fail(CA1 "[2](946dae0300a1b002) \"S-1\"[2]\n", "t.txt:5: bad port number");
	expect_parse_fail("Ca 1 \"H-10\" # \"x\"\n[0](11) \"S-1\"[2]\n", "t.txt:2: port 0 on a");
	expect_parse_fail("Ca 0 \"H-10\" # \"x\"\n", "t.txt:1: Ca: port count");
	expect_parse_fail("Ca 1 \"X-10\" # \"x\"\n", "t.txt:1: Ca: node id \"X-10\"");
	expect_parse_fail("Ca 1 \"H-zz\" # \"x\"\n", "t.txt:1: Ca: node id \"H-zz\" does not");
	expect_parse_fail("Ca 1 \"H-0\" # \"x\"\n", "t.txt:1: Ca: node id \"H-0\" does not");
	expect_parse_fail("caguid=0x11\nCa 1 \"H-10\" # \"x\"\n[1](11) \"S-1\"[1]\n",
	                  "t.txt:2: Ca: node id GUID");
	expect_parse_fail("caguid=0xzz\n", "t.txt:1: caguid: expected a hex number");
	expect_parse_fail("caguid=0xfoo\n", "t.txt:1: caguid: unexpected text after the value");
	expect_parse_fail("caguid=0x11111111111111111\n", "t.txt:1: caguid: expected a hex");
	expect_parse_fail(CA1 "caguid=0x10\n", "t.txt:5: caguid inside a record");
	expect_parse_fail(CA1 "Ca 1 \"H-10\" # \"x\"\n", "t.txt:5: Ca header inside a record");
	expect_parse_fail("[1](11) \"S-1\"[1]\n", "t.txt:1: port line outside");
	expect_parse_fail(CA1 "\n" SW1 "[2]\t\"H-1\"(11)\n", "t.txt:9: expected \"REMOTE\"[PORT]");
	expect_parse_fail(CA1 "\n" SW1 "[2]\t\"H-1\"[1] junk\n", "t.txt:9: unexpected text after");
	/* a NUL byte inside the given length */
	{
		struct iso_discovered *d = NULL;
		struct iso_error err = {0};
		static const char nul[] = "Ca 1 \"H-10\" # \"x\"\n[1](11) \"S-1\"[1]\n\0\n";
		assert_int_equal(iso_fabric_discover_parse("t.txt", nul, sizeof(nul) - 1, &d, &err),
		                 -EINVAL);
		assert_string_equal(err.message, "t.txt:3: NUL byte in the input");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_render_small),        cmocka_unit_test(test_render_example),
	    cmocka_unit_test(test_synthetic),           cmocka_unit_test(test_render_refuses),
	    cmocka_unit_test(test_synthetic_refuses),   cmocka_unit_test(test_discover_recorded),
	    cmocka_unit_test(test_discover_good_small), cmocka_unit_test(test_discover_names),
	    cmocka_unit_test(test_discover_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

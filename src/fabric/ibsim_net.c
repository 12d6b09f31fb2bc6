/* ibsim_net.c: an ibsim net file for an inventory, so that OpenSM, the
 * opensm driver and the verifier meet the inventory's own GUIDs on a
 * simulated fabric (make run-ib, tests/e2e, bench). ibsim numbers GUIDs
 * itself unless told: a `caguid=` line before each CA record sets that CA's
 * node GUID, and ibsim gives its port 1 the node GUID + 1, so every CA is
 * written as a single-port HCA whose node GUID is the wanted port GUID - 1.
 * ibsim has no SR-IOV vports, so each VF is one more CA on its node's leaf:
 * OpenSM then programs a P_Key table per VF GUID, as a vport-aware SM does.
 * The SM's HCA comes first because ibsim attaches the SM to the file's first
 * port. Also the synthetic clusters (inventory and net file with matching
 * GUIDs) that benchmarks bring up. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "isostack/fabric.h"
#include "isostack/inventory.h"

#define DESC_MAX 64 /* ibsim keeps 63 characters of a node description */

struct ca {
	uint64_t guid;       /* port GUID */
	char desc[DESC_MAX]; /* "gpu-a01 mlx5_0", "gpu-a01-vf3 mlx5_0" */
	int unit;            /* CAs of one unit (a node's PF and VFs) share a leaf when they fit */
	int leaf, leaf_port;
	int node, service; /* inventory indexes of the owner, -1 when none (the SM) */
};

struct leaf {
	char group[ISO_NAME_MAX]; /* rack name, or "fabric" for the SM and services */
	int k;                    /* 1-based within the group */
	int used;                 /* down ports taken */
};

struct topo {
	int ports, down, up; /* per switch; leaves use `down` ports for CAs, `up` for spines */
	int n_cas, cap_cas;
	struct ca *cas;
	int n_leaves, cap_leaves;
	struct leaf *leaves;
	int n_spines;
	int *uplink;     /* [leaf * up + u] = spine slot (spine * ports + port - 1) */
	int *spine_slot; /* [spine * ports + port - 1] = leaf * up + u, -1 unused */
	const struct iso_inventory *inv;
};

static void topo_clear(struct topo *t)
{
	free(t->cas);
	free(t->leaves);
	free(t->uplink);
	free(t->spine_slot);
}

static int oom(struct iso_error *err)
{
	return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
}

/* Who owns a CA, for messages: "nodes[3] (gpu-a04)". */
static const char *owner(const struct topo *t, const struct ca *c, char *buf, size_t size)
{
	if (c->node >= 0)
		snprintf(buf, size, "nodes[%d] (%s)", c->node, t->inv->nodes[c->node].name);
	else if (c->service >= 0)
		snprintf(buf, size, "fabric.shared_services[%d] (%s)", c->service,
		         t->inv->fabric.services[c->service].name);
	else
		snprintf(buf, size, "the SM's HCA");
	return buf;
}

/* Appends a CA described "NAME DEVICE" (the device left out when both do
 * not fit ibsim's 63 characters: `isoctl fabric discover` needs only the
 * name); NAME is printf-formatted. 0 or a negative errno. */
static int add_ca(struct topo *t, uint64_t guid, int unit, int node, int service,
                  const char *device, struct iso_error *err, const char *fmt, ...) _printf_(8, 9);

static int add_ca(struct topo *t, uint64_t guid, int unit, int node, int service,
                  const char *device, struct iso_error *err, const char *fmt, ...)
{
	char name[128], who[128];
	va_list ap;
	struct ca *c;
	int n;

	if (t->n_cas == t->cap_cas) {
		int cap = t->cap_cas ? t->cap_cas * 2 : 64;
		struct ca *p = realloc(t->cas, (size_t)cap * sizeof(*p));
		if (!p)
			return oom(err);
		t->cas = p;
		t->cap_cas = cap;
	}
	c = &t->cas[t->n_cas];
	memset(c, 0, sizeof(*c));
	c->guid = guid;
	c->unit = unit;
	c->node = node;
	c->service = service;
	va_start(ap, fmt);
	n = vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(c->desc))
		return iso_error_set(err, ISO_E_INVALID, "",
		                     "%s: simulated CA name \"%.*s...\" is longer than ibsim's %d "
		                     "characters",
		                     owner(t, c, who, sizeof(who)), DESC_MAX - 1, name,
		                     DESC_MAX - 1);
	if (snprintf(c->desc, sizeof(c->desc), "%s %s", name, device) >= (int)sizeof(c->desc))
		iso_strlcpy(c->desc, name, sizeof(c->desc));
	if (guid < 2)
		return iso_error_set(err, ISO_E_INVALID, "",
		                     "%s: port GUID 0x%" PRIx64 " cannot be simulated (ibsim needs "
		                     "the node GUID, one lower, to be non-zero)",
		                     owner(t, c, who, sizeof(who)), guid);
	t->n_cas++;
	return 0;
}

static int new_leaf(struct topo *t, const char *group, struct iso_error *err)
{
	struct leaf *l;

	if (t->n_leaves == t->cap_leaves) {
		int cap = t->cap_leaves ? t->cap_leaves * 2 : 16;
		struct leaf *p = realloc(t->leaves, (size_t)cap * sizeof(*p));
		if (!p)
			return oom(err);
		t->leaves = p;
		t->cap_leaves = cap;
	}
	l = &t->leaves[t->n_leaves];
	memset(l, 0, sizeof(*l));
	iso_strlcpy(l->group, group, sizeof(l->group));
	l->k = (t->n_leaves > 0 && strcmp(t->leaves[t->n_leaves - 1].group, group) == 0)
	           ? t->leaves[t->n_leaves - 1].k + 1
	           : 1;
	t->n_leaves++;
	return 0;
}

/* Places CAs [first, end) of one group on leaves: a unit (a node's PF and
 * VFs) starts a fresh leaf rather than straddle two, unless it is bigger
 * than a leaf. */
static int place_group(struct topo *t, const char *group, int first, int end, struct iso_error *err)
{
	int r, cur = -1;

	for (int i = first; i < end; i++) {
		struct ca *c = &t->cas[i];
		bool unit_start = i == first || t->cas[i - 1].unit != c->unit;
		int unit_size = 0;

		if (unit_start)
			for (int k = i; k < end && t->cas[k].unit == c->unit; k++)
				unit_size++;
		if (cur < 0 || t->leaves[cur].used == t->down ||
		    (unit_start && t->leaves[cur].used + unit_size > t->down &&
		     unit_size <= t->down)) {
			r = new_leaf(t, group, err);
			if (r < 0)
				return r;
			cur = t->n_leaves - 1;
		}
		c->leaf = cur;
		c->leaf_port = ++t->leaves[cur].used;
	}
	return 0;
}

/* Union-find over leaves and spines, to prove the wiring connected. */
static int uf_find(int *parent, int x)
{
	while (parent[x] != x) {
		parent[x] = parent[parent[x]];
		x = parent[x];
	}
	return x;
}

/* Wires leaf uplinks to spine ports: uplink u of leaf l takes spine slot
 * u * L + (l + u * shift) mod L, spines filled in slot order, so that each
 * row of uplinks is rotated against the one before and every leaf group
 * under one spine overlaps the next. Returns whether the result is
 * connected. */
static int wire(struct topo *t, int shift, bool *connected, struct iso_error *err)
{
	int L = t->n_leaves, U = t->up, P = t->ports, S = t->n_spines;
	_cleanup_free_ int *parent = malloc((size_t)(L + S) * sizeof(int));

	if (!parent)
		return oom(err);
	for (int i = 0; i < L + S; i++)
		parent[i] = i;
	for (int i = 0; i < S * P; i++)
		t->spine_slot[i] = -1;
	for (int l = 0; l < L; l++)
		for (int u = 0; u < U; u++) {
			int slot = u * L + (l + u * shift) % L;
			t->uplink[l * U + u] = slot;
			t->spine_slot[slot] = l * U + u;
			int a = uf_find(parent, l), b = uf_find(parent, L + slot / P);
			parent[a] = b;
		}
	*connected = true;
	for (int i = 1; i < L + S; i++)
		if (uf_find(parent, i) != uf_find(parent, 0))
			*connected = false;
	return 0;
}

static int build_spines(struct topo *t, struct iso_error *err)
{
	int L = t->n_leaves, U = t->up, P = t->ports;
	bool ok = false;
	int r;

	if (L < 2) {
		t->n_spines = 0;
		return 0;
	}
	t->n_spines = (L * U + P - 1) / P;
	t->uplink = calloc((size_t)L * (size_t)U, sizeof(int));
	t->spine_slot = malloc((size_t)t->n_spines * (size_t)P * sizeof(int));
	if (!t->uplink || !t->spine_slot)
		return oom(err);
	/* Half a switch is the natural shift; another one fixes the rare leaf
	 * counts where every rotated group lines up with a spine again. */
	for (int d = 0; d < P && !ok; d++) {
		int shift = (P / 2 + d) % L;
		r = wire(t, shift, &ok, err);
		if (r < 0)
			return r;
	}
	if (!ok)
		return iso_error_set(err, ISO_E_INVALID, "switch_ports",
		                     "cannot wire %d leaves of %d-port switches into one connected "
		                     "fat tree",
		                     L, P);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static bool has_guid(const uint64_t *sorted, int n, uint64_t g)
{
	return bsearch(&g, sorted, (size_t)n, sizeof(g), cmp_u64) != NULL;
}

/* ibsim needs unique node GUIDs, OpenSM unique port GUIDs. A CA's node GUID
 * is its port GUID - 1, a switch's node and port-0 GUID the same value: a
 * switch GUID must be neither a CA port GUID nor one below one. */
static int check_guids(const struct topo *t, uint64_t sm_guid, uint64_t sw_base,
                       struct iso_error *err)
{
	int n = t->n_cas, n_sw = t->n_leaves + t->n_spines;
	_cleanup_free_ uint64_t *g = malloc((size_t)n * sizeof(*g));

	if (!g)
		return oom(err);
	for (int i = 0; i < n; i++)
		g[i] = t->cas[i].guid;
	qsort(g, (size_t)n, sizeof(*g), cmp_u64);
	for (int i = 1; i < n; i++)
		if (g[i] == g[i - 1]) {
			char a[128] = "?", b[128] = "?";
			int seen = 0;
			for (int k = 0; k < t->n_cas && seen < 2; k++)
				if (t->cas[k].guid == g[i])
					owner(t, &t->cas[k], seen++ ? b : a, sizeof(a));
			return iso_error_set(err, ISO_E_INVALID, sm_guid == g[i] ? "sm_guid" : "",
			                     "GUID 0x%016" PRIx64 " is used twice: by %s and by %s",
			                     g[i], a, b);
		}
	if (sw_base > UINT64_MAX - (uint64_t)n_sw)
		return iso_error_set(err, ISO_E_INVALID, "switch_guid_base",
		                     "switch GUIDs from 0x%" PRIx64 " pass 0xffffffffffffffff",
		                     sw_base);
	for (int k = 0; k < n_sw; k++) {
		uint64_t s = sw_base + (uint64_t)k;
		if (s == 0 || has_guid(g, n, s) || has_guid(g, n, s + 1))
			return iso_error_set(err, ISO_E_INVALID, "switch_guid_base",
			                     "switch GUID 0x%016" PRIx64
			                     " collides with a CA's port or "
			                     "node GUID; pass another switch GUID base",
			                     s);
	}
	return 0;
}

struct rack_ref {
	int rack, node;
};

static int cmp_rack_ref(const void *a, const void *b)
{
	const struct rack_ref *x = a, *y = b;
	if (x->rack != y->rack)
		return (x->rack > y->rack) - (x->rack < y->rack);
	return (x->node > y->node) - (x->node < y->node);
}

static int cmp_rack_name(const void *a, const void *b, void *ctx)
{
	const struct iso_rack *racks = ctx;
	return strcmp(racks[*(const int *)a].name, racks[*(const int *)b].name);
}

/* Node indexes grouped by rack, racks in inventory order, nodes in file
 * order within a rack: O(n log n), for inventories of 65536 nodes. */
static int nodes_by_rack(const struct iso_inventory *inv, struct rack_ref **out,
                         struct iso_error *err)
{
	_cleanup_free_ int *by_name = malloc((size_t)(inv->n_racks + 1) * sizeof(int));
	_cleanup_free_ struct rack_ref *refs = malloc((size_t)(inv->n_nodes + 1) * sizeof(*refs));

	if (!by_name || !refs)
		return oom(err);
	for (int r = 0; r < inv->n_racks; r++)
		by_name[r] = r;
	qsort_r(by_name, (size_t)inv->n_racks, sizeof(int), cmp_rack_name, inv->racks);
	for (int i = 0; i < inv->n_nodes; i++) {
		int lo = 0, hi = inv->n_racks - 1, found = inv->n_racks;
		while (lo <= hi) {
			int mid = (lo + hi) / 2;
			int c = strcmp(inv->racks[by_name[mid]].name, inv->nodes[i].rack);
			if (c == 0) {
				found = by_name[mid];
				break;
			}
			if (c < 0)
				lo = mid + 1;
			else
				hi = mid - 1;
		}
		refs[i] = (struct rack_ref){.rack = found, .node = i};
	}
	qsort(refs, (size_t)inv->n_nodes, sizeof(*refs), cmp_rack_ref);
	*out = ISO_TAKE(refs);
	return 0;
}

static int collect(struct topo *t, uint64_t sm_guid, struct iso_error *err)
{
	const struct iso_inventory *inv = t->inv;
	const struct iso_fabric_config *fc = &inv->fabric;
	const char *sm_name = fc->n_sm_nodes > 0 ? fc->sm_nodes[0] : "sm";
	_cleanup_free_ struct rack_ref *refs = NULL;
	int unit = 0, first, r;

	/* The fabric's own ports first: the SM's HCA (also the file's first
	 * record) and the shared services. */
	first = t->n_cas;
	r = add_ca(t, sm_guid, unit++, -1, -1, "mlx5_0", err, "%s", sm_name);
	for (int s = 0; s < fc->n_services && r == 0; s++)
		for (int k = 0; k < fc->services[s].n_guids && r == 0; k++)
			r = add_ca(t, fc->services[s].guids[k], unit++, -1, s, "mlx5_0", err,
			           "%s-%d", fc->services[s].name, k + 1);
	if (r == 0)
		r = place_group(t, "fabric", first, t->n_cas, err);
	if (r == 0)
		r = nodes_by_rack(inv, &refs, err);
	if (r < 0)
		return r;
	if (!refs)
		return oom(err);

	/* Then rack by rack, a leaf group each. */
	for (int i = 0; i < inv->n_nodes;) {
		int rack = refs[i].rack;

		first = t->n_cas;
		for (; i < inv->n_nodes && refs[i].rack == rack; i++) {
			const struct iso_node *nd = &inv->nodes[refs[i].node];

			if (!nd->has_port)
				continue;
			r = add_ca(t, nd->port.guid, unit, refs[i].node, -1, nd->port.device, err,
			           "%s", nd->name);
			for (int v = 0; v < nd->port.n_vfs && r == 0; v++)
				r = add_ca(t, nd->port.vf_guids[v], unit, refs[i].node, -1,
				           nd->port.device, err, "%s-vf%d", nd->name, v);
			if (r < 0)
				return r;
			unit++;
		}
		if (t->n_cas > first) {
			r = place_group(t, rack < inv->n_racks ? inv->racks[rack].name : "norack",
			                first, t->n_cas, err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* Two CAs of different owners must not share the first word of their
 * descriptions: `isoctl fabric discover` names nodes by it. */
static size_t first_word(const char *s)
{
	return strcspn(s, " ");
}

static int cmp_word(const void *a, const void *b, void *ctx)
{
	const struct topo *t = ctx;
	const char *x = t->cas[*(const int *)a].desc, *y = t->cas[*(const int *)b].desc;
	size_t lx = first_word(x), ly = first_word(y);
	int c = memcmp(x, y, lx < ly ? lx : ly);
	return c ? c : (lx > ly) - (lx < ly);
}

static int check_names(const struct topo *t, struct iso_error *err)
{
	_cleanup_free_ int *idx = malloc((size_t)t->n_cas * sizeof(*idx));

	if (!idx)
		return oom(err);
	for (int i = 0; i < t->n_cas; i++)
		idx[i] = i;
	qsort_r(idx, (size_t)t->n_cas, sizeof(*idx), cmp_word, (void *)t);
	for (int i = 1; i < t->n_cas; i++) {
		const struct ca *x = &t->cas[idx[i - 1]], *y = &t->cas[idx[i]];
		char a[128], b[128];
		if (cmp_word(&idx[i - 1], &idx[i], (void *)t) == 0)
			return iso_error_set(err, ISO_E_INVALID, "",
			                     "%s and %s would both be named \"%.*s\" on the "
			                     "simulated fabric",
			                     owner(t, x, a, sizeof(a)), owner(t, y, b, sizeof(b)),
			                     (int)first_word(x->desc), x->desc);
	}
	return 0;
}

static void render_ca(FILE *f, const struct topo *t, int i)
{
	const struct ca *c = &t->cas[i];

	fprintf(f, "caguid=0x%016" PRIx64 "\n", c->guid - 1);
	fprintf(f, "Hca 1 \"H%d\" # \"%s\"\n", i + 1, c->desc);
	/* "lid 0 4xSDR" is what ibnetdiscover writes; ibsim warns without it. */
	fprintf(f, "[1] \"S%d\"[%d] # lid 0 4xSDR\n\n", c->leaf + 1, c->leaf_port);
}

static void render_switches(FILE *f, const struct topo *t, uint64_t sw_base)
{
	int U = t->up, P = t->ports;
	int ca = 0;

	for (int l = 0; l < t->n_leaves; l++) {
		fprintf(f, "switchguid=0x%016" PRIx64 "\n", sw_base + (uint64_t)l);
		fprintf(f, "Switch %d \"S%d\" # \"leaf %s/%d\"\n", P, l + 1, t->leaves[l].group,
		        t->leaves[l].k);
		/* CAs are placed leaf by leaf, in order. */
		for (; ca < t->n_cas && t->cas[ca].leaf == l; ca++)
			fprintf(f, "[%d] \"H%d\"[1] # lid 0 4xSDR\n", t->cas[ca].leaf_port, ca + 1);
		for (int u = 0; u < U && t->n_spines > 0; u++) {
			int slot = t->uplink[l * U + u];
			fprintf(f, "[%d] \"S%d\"[%d] # lid 0 4xSDR\n", t->down + u + 1,
			        t->n_leaves + slot / P + 1, slot % P + 1);
		}
		fputc('\n', f);
	}
	for (int s = 0; s < t->n_spines; s++) {
		fprintf(f, "switchguid=0x%016" PRIx64 "\n", sw_base + (uint64_t)(t->n_leaves + s));
		fprintf(f, "Switch %d \"S%d\" # \"spine %d\"\n", P, t->n_leaves + s + 1, s + 1);
		for (int p = 0; p < P; p++) {
			int who = t->spine_slot[s * P + p];
			if (who < 0)
				continue;
			fprintf(f, "[%d] \"S%d\"[%d] # lid 0 4xSDR\n", p + 1, who / U + 1,
			        t->down + who % U + 1);
		}
		fputc('\n', f);
	}
}

int iso_ibsim_net_render(const struct iso_inventory *inv, const struct iso_ibsim_net_opts *o,
                         char **out, struct iso_error *err)
{
	static const struct iso_ibsim_net_opts defaults = {0};
	uint64_t sm_guid, sw_base;
	_cleanup_(topo_clear) struct topo t = {0};
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	if (!o)
		o = &defaults;
	sm_guid = o->sm_guid ? o->sm_guid : ISO_IBSIM_SM_GUID_DEFAULT;
	sw_base = o->switch_guid_base ? o->switch_guid_base : ISO_IBSIM_SWITCH_GUID_DEFAULT;
	t.ports = o->switch_ports ? o->switch_ports : ISO_IBSIM_SWITCH_PORTS;
	if (t.ports < 4 || t.ports > 254)
		return iso_error_set(err, ISO_E_INVALID, "switch_ports",
		                     "switch ports: %d is out of range 4..254", t.ports);
	if (inv->fabric.type != ISO_FABRIC_INFINIBAND)
		return iso_error_set(err, ISO_E_INVALID, "fabric.type",
		                     "%s: fabric.type: ibsim simulates InfiniBand only", inv->path);
	t.up = t.ports / 2;
	t.down = t.ports - t.up;

	t.inv = inv;
	r = collect(&t, sm_guid, err);
	if (r < 0)
		return r;
	r = check_names(&t, err);
	if (r < 0)
		return r;
	r = build_spines(&t, err);
	if (r < 0)
		return r;
	r = check_guids(&t, sm_guid, sw_base, err);
	if (r < 0)
		return r;

	int n_sw = t.n_leaves + t.n_spines;
	if (o->stats)
		*o->stats = (struct iso_ibsim_net_stats){
		    .n_cas = t.n_cas,
		    .n_leaves = t.n_leaves,
		    .n_spines = t.n_spines,
		    .n_nodes = t.n_cas + n_sw,
		    .n_ports = t.n_cas + n_sw * (t.ports + 1),
		};
	f = open_memstream(&text, &len);
	if (!f)
		return oom(err);
	fprintf(f,
	        "# ibsim net file of cluster %s (isoctl fabric ibsim-net): a two-level fat tree\n"
	        "# of %d-port switches whose CA port GUIDs are the inventory's. Every PF, VF and\n"
	        "# service port is a single-port CA; VFs sit next to their PF on its leaf, since\n"
	        "# ibsim has no vports (docs/fabric.md). The first record is the SM's HCA: ibsim\n"
	        "# attaches the SM to the first port of the file.\n"
	        "# Run: IBSIM_SOCKNAME=NAME ibsim -n -s FILE -N %d -S %d -P %d </dev/null &\n"
	        "# isostack-ibsim: cas=%d leaves=%d spines=%d nodes=%d switches=%d ports=%d\n\n",
	        inv->cluster_name, t.ports, t.n_cas + n_sw > 2048 ? t.n_cas + n_sw : 2048,
	        n_sw > 256 ? n_sw : 256,
	        t.n_cas + n_sw * (t.ports + 1) > 13312 ? t.n_cas + n_sw * (t.ports + 1) : 13312,
	        t.n_cas, t.n_leaves, t.n_spines, t.n_cas + n_sw, n_sw,
	        t.n_cas + n_sw * (t.ports + 1));
	for (int i = 0; i < t.n_cas; i++)
		render_ca(f, &t, i);
	render_switches(f, &t, sw_base);
	if (fclose(f) != 0 || !text)
		return oom(err);
	*out = ISO_TAKE(text);
	return 0;
}

/* ---- synthetic clusters ---- */

#define SYN_PF_BASE      0x0002c90400000000ULL /* node i's PF: base + i * 0x100 */
#define SYN_SERVICE_BASE 0x0002c90500000000ULL
#define SYN_RACK_NODES   16

int iso_ibsim_inventory_synthetic(int n_hcas, int vfs_per_hca, char **out, struct iso_error *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int n_racks;
	FILE *f;

	if (n_hcas < 1 || n_hcas > 65536)
		return iso_error_set(err, ISO_E_INVALID, "n_hcas",
		                     "synthetic HCAs: %d is out of range 1..65536", n_hcas);
	if (vfs_per_hca < 0 || vfs_per_hca > 127)
		return iso_error_set(err, ISO_E_INVALID, "vfs_per_hca",
		                     "VFs per HCA: %d is out of range 0..127", vfs_per_hca);
	n_racks = (n_hcas + SYN_RACK_NODES - 1) / SYN_RACK_NODES;
	f = open_memstream(&text, &len);
	if (!f)
		return oom(err);
	fprintf(f,
	        "# Synthetic cluster: %d HCAs with %d VFs each, %d to a rack (isoctl fabric\n"
	        "# ibsim-net --synthetic). PF i has GUID 0x%016llx + i * 0x100, its VFs the\n"
	        "# GUIDs right after it.\n"
	        "cluster: synthetic\n"
	        "fabric:\n"
	        "  type: infiniband\n"
	        "  name: ib0\n"
	        "  sm_nodes: [sm-1]\n"
	        "  pkey_range: [0x0100, 0x7ffe]\n"
	        "  shared_services:\n"
	        "    - {name: storage, pkey: 0x0010, guids: [0x%016llx, 0x%016llx]}\n"
	        "pools:\n"
	        "  - name: gpu\n"
	        "racks:\n",
	        n_hcas, vfs_per_hca, SYN_RACK_NODES, (unsigned long long)SYN_PF_BASE,
	        (unsigned long long)SYN_SERVICE_BASE + 1, (unsigned long long)SYN_SERVICE_BASE + 2);
	for (int r = 1; r <= n_racks; r++)
		fprintf(f, "  - {name: rack-%04d, pdus: [pdu-%04d]}\n", r, r);
	fprintf(f,
	        "node_classes:\n"
	        "  hca:\n"
	        "    pool: gpu\n"
	        "    cpus: 64\n"
	        "    memory_gib: 512\n"
	        "    port: {device: mlx5_0, port: 1, pkey_capacity: 64%s",
	        vfs_per_hca ? ", vfs: {count: " : "}\n");
	if (vfs_per_hca)
		fprintf(f, "%d}}\n", vfs_per_hca);
	fputs("nodes:\n", f);
	for (int i = 1; i <= n_hcas; i++) {
		unsigned long long pf = SYN_PF_BASE + (unsigned long long)i * 0x100;
		int rack = (i - 1) / SYN_RACK_NODES + 1;

		fprintf(f, "  - {name: n%05d, class: hca, rack: rack-%04d, pdu: pdu-%04d, ", i,
		        rack, rack);
		if (vfs_per_hca)
			fprintf(f, "port: {guid: 0x%016llx, vfs: {guid_base: 0x%016llx}}}\n", pf,
			        pf + 1);
		else
			fprintf(f, "port: {guid: 0x%016llx}}\n", pf);
	}
	if (fclose(f) != 0 || !text)
		return oom(err);
	*out = ISO_TAKE(text);
	return 0;
}

int iso_ibsim_net_synthetic(int n_hcas, int vfs_per_hca, const struct iso_ibsim_net_opts *o,
                            char **out, struct iso_error *err)
{
	_cleanup_free_ char *yaml = NULL;
	_cleanup_(iso_inventory_freep) struct iso_inventory *inv = NULL;
	int r;

	r = iso_ibsim_inventory_synthetic(n_hcas, vfs_per_hca, &yaml, err);
	if (r < 0)
		return r;
	if (!yaml)
		return oom(err);
	r = iso_inventory_load_string("synthetic.yaml", yaml, strlen(yaml), &inv, err);
	if (r < 0)
		return r;
	return iso_ibsim_net_render(inv, o, out, err);
}

/* nodes.c: `node_classes` and `nodes`. A class is a template holding the keys
 * many nodes share; a node names its class and overrides any of them, while
 * its identities (name, rack, PDU, port GUID, VF GUIDs) are always its own.
 * Both go through one body parser so a key means the same in either place.
 * Every GUID seen here is recorded for the uniqueness check in guids.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "isostack/mig.h"

#define MAX_CPUS          65536
#define MAX_MEMORY_GIB    1048576LL /* 1 PiB */
#define MAX_MEMORY_MIB    (MAX_MEMORY_GIB * 1024)
#define MAX_PORT_NUM      254
#define MAX_PKEY_CAPACITY 32768

/* What a class gives, or what a node ends up with after its class and its own
 * keys are merged. */
struct node_tmpl {
	char name[ISO_NAME_MAX]; /* class name */
	bool has_pool;
	char pool[ISO_NAME_MAX];
	bool has_cpus;
	int cpus;
	bool has_memory;
	int64_t memory_mib;
	bool has_gpus;
	int n_gpus;
	struct iso_gpu gpus[INV_MAX_GPUS]; /* n_gpus of them, sorted by index */
	bool has_port;
	bool has_device;
	char device[32];
	bool has_port_num;
	int port_num;
	bool has_pkey_capacity;
	int pkey_capacity;
	bool has_vf_count;
	int vf_count;
};

/* Keys of a node, its own identities first; a class accepts those from
 * B_POOL on. Ports likewise: a class accepts those from P_DEVICE on. */
enum {
	B_NAME,
	B_CLASS,
	B_RACK,
	B_PDU,
	B_UNDERLAY,
	B_POOL,
	B_CPUS,
	B_MEM_GIB,
	B_MEM_MIB,
	B_GPUS,
	B_PORT,
	B_ALL
};
static const char *const body_keys[B_ALL] = {
    [B_NAME] = "name",
    [B_CLASS] = "class",
    [B_RACK] = "rack",
    [B_PDU] = "pdu",
    [B_UNDERLAY] = "underlay_ip",
    [B_POOL] = "pool",
    [B_CPUS] = "cpus",
    [B_MEM_GIB] = "memory_gib",
    [B_MEM_MIB] = "memory_mib",
    [B_GPUS] = "gpus",
    [B_PORT] = "port",
};
enum { P_GUID, P_DEVICE, P_PORT, P_PKEY_CAP, P_VFS, P_ALL };
static const char *const port_keys[P_ALL] = {
    [P_GUID] = "guid", [P_DEVICE] = "device", [P_PORT] = "port", [P_PKEY_CAP] = "pkey_capacity",
    [P_VFS] = "vfs",
};
enum { V_COUNT, V_COMMON };
enum { V_GUID_BASE = V_COMMON, V_GUIDS, V_ALL };
static const char *const vfs_keys[V_ALL] = {
    [V_COUNT] = "count", [V_GUID_BASE] = "guid_base", [V_GUIDS] = "guids"};

static const char *class_hint(const char *key)
{
	if (strcmp(key, "name") == 0 || strcmp(key, "rack") == 0 || strcmp(key, "pdu") == 0 ||
	    strcmp(key, "underlay_ip") == 0)
		return "this is per node and cannot be set in a class";
	if (strcmp(key, "class") == 0)
		return "classes do not nest";
	if (strcmp(key, "guid") == 0 || strcmp(key, "guid_base") == 0 || strcmp(key, "guids") == 0)
		return "GUIDs are per node and cannot be set in a class";
	return NULL;
}

static void init_fields(struct inv_field *fs, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fs[i] = (struct inv_field){.key = keys[i]};
}

/* "a, b, c" of an index's names (sorted), shortened with ", ..." to fit. */
static void names_list(const struct inv_names *ix, char *buf, size_t size)
{
	size_t o = 0;

	buf[0] = '\0';
	for (int i = 0; i < ix->n; i++) {
		size_t need = strlen(ix->v[i].name) + (i ? 2 : 0);
		if (o + need + 6 >= size) {
			snprintf(buf + o, size - o, "%s...", i ? ", " : "");
			return;
		}
		o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? ", " : "", ix->v[i].name);
	}
}

/* ---- GPUs ---- */

static int get_model(struct inv_ctx *c, const struct inv_field *f, const char *parent,
                     const struct iso_gpu_model **out)
{
	char path[ISO_ERR_FIELD_MAX], name[64], known[200];
	const struct iso_gpu_model *m;
	size_t o = 0;
	int r;

	inv_path_key(path, parent, f->key);
	r = inv_get_string(c, f->val, path, f->line, name, sizeof(name));
	if (r < 0)
		return r;
	m = iso_gpu_model_find(name);
	if (m) {
		*out = m;
		return 0;
	}
	known[0] = '\0';
	for (int i = 0; (m = iso_gpu_model_at(i)) && o < sizeof(known); i++) {
		int w = snprintf(known + o, sizeof(known) - o, "%s%s", i ? ", " : "", m->name);
		if (w < 0)
			break;
		o += (size_t)w;
	}
	return inv_fail(c, path, inv_line(f->val, f->line), "unknown GPU model '%s' (known: %s)",
	                name, known[0] ? known : "none");
}

static int get_mig(struct inv_ctx *c, const struct inv_field *f, const char *parent,
                   const struct iso_gpu_model *m, bool *out)
{
	int r;

	*out = false;
	if (!f->present)
		return 0;
	r = inv_fget_bool(c, parent, f, out);
	if (r < 0)
		return r;
	if (*out && m->n_profiles == 0) {
		char path[ISO_ERR_FIELD_MAX];
		inv_path_key(path, parent, f->key);
		return inv_fail(c, path, f->line, "GPU model '%s' does not support MIG", m->name);
	}
	return 0;
}

/* Short form {model, count, mig}: GPUs 0..count-1, all alike. */
static int parse_gpus_short(struct inv_ctx *c, struct fy_node *n, const char *path, int line,
                            struct iso_gpu *out, int *count)
{
	enum { G_MODEL, G_COUNT, G_MIG, G_N };
	struct inv_field fs[G_N] = {
	    [G_MODEL] = {.key = "model"}, [G_COUNT] = {.key = "count"}, [G_MIG] = {.key = "mig"}};
	const struct iso_gpu_model *m = NULL;
	int64_t k;
	bool mig;
	int r;

	r = inv_map_match(c, n, path, line, fs, G_N, NULL);
	if (r < 0)
		return r;
	if (!fs[G_MODEL].present)
		return inv_missing(c, path, line, "model", NULL);
	if (!fs[G_COUNT].present)
		return inv_missing(c, path, line, "count", NULL);
	r = get_model(c, &fs[G_MODEL], path, &m);
	if (r < 0)
		return r;
	r = inv_fget_int(c, path, &fs[G_COUNT], 1, INV_MAX_GPUS, &k);
	if (r < 0)
		return r;
	r = get_mig(c, &fs[G_MIG], path, m, &mig);
	if (r < 0)
		return r;
	for (int i = 0; i < (int)k; i++)
		out[i] = (struct iso_gpu){.index = i, .model = m, .mig_enabled = mig};
	*count = (int)k;
	return 0;
}

static int gpu_index_cmp(const void *x, const void *y)
{
	const struct iso_gpu *a = x, *b = y;

	return (a->index > b->index) - (a->index < b->index);
}

/* List form [{index, model, mig}, ...]: unique indexes, sorted on return. */
static int parse_gpus_list(struct inv_ctx *c, struct fy_node *n, const char *path, int line,
                           struct iso_gpu *g, int *count)
{
	int first_item[INV_MAX_GPUS], first_line[INV_MAX_GPUS];
	uint64_t seen = 0;
	struct fy_node *item;
	void *it = NULL;
	int k = 0, r;

	r = inv_get_seq(c, n, path, line, 0, INV_MAX_GPUS, &k);
	if (r < 0)
		return r;
	for (int i = 0; i < k && (item = fy_node_sequence_iterate(n, &it)); i++) {
		enum { G_INDEX, G_MODEL, G_MIG, G_N };
		struct inv_field fs[G_N] = {[G_INDEX] = {.key = "index"},
		                            [G_MODEL] = {.key = "model"},
		                            [G_MIG] = {.key = "mig"}};
		char ipath[ISO_ERR_FIELD_MAX], xpath[ISO_ERR_FIELD_MAX];
		int iline = inv_line(item, line);
		int64_t idx;

		inv_path_index(ipath, path, i);
		r = inv_map_match(c, item, ipath, iline, fs, G_N, NULL);
		if (r < 0)
			return r;
		if (!fs[G_INDEX].present)
			return inv_missing(c, ipath, iline, "index", NULL);
		if (!fs[G_MODEL].present)
			return inv_missing(c, ipath, iline, "model", NULL);
		r = inv_fget_int(c, ipath, &fs[G_INDEX], 0, INV_MAX_GPUS - 1, &idx);
		if (r < 0)
			return r;
		if (seen & (UINT64_C(1) << idx)) {
			inv_path_key(xpath, ipath, "index");
			return inv_fail(c, xpath, fs[G_INDEX].line,
			                "duplicate GPU index %" PRId64
			                " (first used by %s[%d].index at line %d)",
			                idx, path, first_item[idx], first_line[idx]);
		}
		seen |= UINT64_C(1) << idx;
		first_item[idx] = i;
		first_line[idx] = fs[G_INDEX].line;
		g[i].index = (int)idx;
		r = get_model(c, &fs[G_MODEL], ipath, &g[i].model);
		if (r < 0)
			return r;
		r = get_mig(c, &fs[G_MIG], ipath, g[i].model, &g[i].mig_enabled);
		if (r < 0)
			return r;
	}
	if (k > 1)
		qsort(g, (size_t)k, sizeof(*g), gpu_index_cmp);
	*count = k;
	return 0;
}

/* Fills out[0..*count) (room for INV_MAX_GPUS). */
static int parse_gpus(struct inv_ctx *c, const struct inv_field *f, const char *parent,
                      struct iso_gpu *out, int *count)
{
	char path[ISO_ERR_FIELD_MAX];

	inv_path_key(path, parent, f->key);
	if (inv_is_map(f->val))
		return parse_gpus_short(c, f->val, path, f->line, out, count);
	if (inv_is_seq(f->val))
		return parse_gpus_list(c, f->val, path, f->line, out, count);
	/* Let the list accessor name what was given instead. */
	return inv_get_seq(c, f->val, path, f->line, 0, INV_MAX_GPUS, count);
}

/* ---- the body shared by classes and nodes ---- */

/* Per-node identities found while parsing a node's port. */
struct node_ids {
	int port_line; /* 0: the node has no port key of its own */
	int vfs_line;  /* 0: no vfs key of its own */
	struct inv_field guid, guid_base, guids;
};

static bool device_valid(const char *s)
{
	if (!s[0])
		return false;
	for (; *s; s++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
		            *s))
			return false;
	return true;
}

static int parse_vfs(struct inv_ctx *c, const struct inv_field *f, const char *parent,
                     struct node_tmpl *t, struct node_ids *ids)
{
	struct inv_field fs[V_ALL];
	char path[ISO_ERR_FIELD_MAX];
	int r;

	init_fields(fs, vfs_keys, V_ALL);
	inv_path_key(path, parent, f->key);
	r = inv_map_match(c, f->val, path, f->line, fs, ids ? V_ALL : V_COMMON,
	                  ids ? NULL : class_hint);
	if (r < 0)
		return r;
	if (fs[V_COUNT].present) {
		int64_t v;
		r = inv_fget_int(c, path, &fs[V_COUNT], 0, INV_MAX_VFS, &v);
		if (r < 0)
			return r;
		t->has_vf_count = true;
		t->vf_count = (int)v;
	}
	if (ids) {
		ids->vfs_line = f->line;
		ids->guid_base = fs[V_GUID_BASE];
		ids->guids = fs[V_GUIDS];
	}
	return 0;
}

static int parse_port(struct inv_ctx *c, const struct inv_field *f, const char *parent,
                      struct node_tmpl *t, struct node_ids *ids)
{
	struct inv_field fs[P_ALL];
	char path[ISO_ERR_FIELD_MAX];
	int64_t v;
	int r;

	init_fields(fs, port_keys, P_ALL);
	inv_path_key(path, parent, f->key);
	if (ids)
		r = inv_map_match(c, f->val, path, f->line, fs, P_ALL, NULL);
	else
		r = inv_map_match(c, f->val, path, f->line, fs + P_DEVICE, P_ALL - P_DEVICE,
		                  class_hint);
	if (r < 0)
		return r;
	t->has_port = true;
	if (ids) {
		ids->port_line = f->line;
		ids->guid = fs[P_GUID];
	}
	if (fs[P_DEVICE].present) {
		r = inv_fget_string(c, path, &fs[P_DEVICE], t->device, sizeof(t->device));
		if (r < 0)
			return r;
		if (!device_valid(t->device)) {
			char dpath[ISO_ERR_FIELD_MAX];
			inv_path_key(dpath, path, "device");
			return inv_fail(c, dpath, fs[P_DEVICE].line,
			                "'%s' is not an RDMA device name (letters, digits, _ . -)",
			                t->device);
		}
		t->has_device = true;
	}
	if (fs[P_PORT].present) {
		r = inv_fget_int(c, path, &fs[P_PORT], 1, MAX_PORT_NUM, &v);
		if (r < 0)
			return r;
		t->has_port_num = true;
		t->port_num = (int)v;
	}
	if (fs[P_PKEY_CAP].present) {
		r = inv_fget_int(c, path, &fs[P_PKEY_CAP], 1, MAX_PKEY_CAPACITY, &v);
		if (r < 0)
			return r;
		t->has_pkey_capacity = true;
		t->pkey_capacity = (int)v;
	}
	if (fs[P_VFS].present)
		return parse_vfs(c, &fs[P_VFS], path, t, ids);
	return 0;
}

static int check_pool(struct inv_ctx *c, const char *parent, const struct inv_field *f,
                      const char *pool)
{
	char path[ISO_ERR_FIELD_MAX], known[160];

	if (inv_names_find(&c->pools_ix, pool))
		return 0;
	inv_path_key(path, parent, f->key);
	names_list(&c->pools_ix, known, sizeof(known));
	return inv_fail(c, path, inv_line(f->val, f->line),
	                "pool '%s' is not declared in pools (declared: %s)", pool, known);
}

/* Parses the keys a class and a node share, overlaying them on `t`. A new
 * `ids` is NULL for a class. */
static int parse_body(struct inv_ctx *c, struct inv_field *fs, const char *path,
                      struct node_tmpl *t, struct node_ids *ids)
{
	int64_t v;
	int r;

	if (fs[B_POOL].present) {
		r = inv_fget_name(c, path, &fs[B_POOL], t->pool);
		if (r < 0)
			return r;
		r = check_pool(c, path, &fs[B_POOL], t->pool);
		if (r < 0)
			return r;
		t->has_pool = true;
	}
	if (fs[B_CPUS].present) {
		r = inv_fget_int(c, path, &fs[B_CPUS], 1, MAX_CPUS, &v);
		if (r < 0)
			return r;
		t->has_cpus = true;
		t->cpus = (int)v;
	}
	if (fs[B_MEM_GIB].present && fs[B_MEM_MIB].present) {
		char mpath[ISO_ERR_FIELD_MAX];
		int later = fs[B_MEM_GIB].line < fs[B_MEM_MIB].line ? B_MEM_MIB : B_MEM_GIB;
		inv_path_key(mpath, path, fs[later].key);
		return inv_fail(c, mpath, fs[later].line,
		                "give memory_gib or memory_mib, not both");
	}
	if (fs[B_MEM_GIB].present) {
		r = inv_fget_int(c, path, &fs[B_MEM_GIB], 1, MAX_MEMORY_GIB, &v);
		if (r < 0)
			return r;
		t->has_memory = true;
		t->memory_mib = v * 1024;
	}
	if (fs[B_MEM_MIB].present) {
		r = inv_fget_int(c, path, &fs[B_MEM_MIB], 1, MAX_MEMORY_MIB, &v);
		if (r < 0)
			return r;
		t->has_memory = true;
		t->memory_mib = v;
	}
	if (fs[B_GPUS].present) {
		r = parse_gpus(c, &fs[B_GPUS], path, t->gpus, &t->n_gpus);
		if (r < 0)
			return r;
		t->has_gpus = true;
	}
	if (fs[B_PORT].present)
		return parse_port(c, &fs[B_PORT], path, t, ids);
	return 0;
}

/* ---- classes ---- */

static int class_cmp(const void *x, const void *y)
{
	return strcmp(((const struct node_tmpl *)x)->name, ((const struct node_tmpl *)y)->name);
}

void inv_classes_free(struct inv_ctx *c)
{
	free(c->classes);
	c->classes = NULL;
	c->n_classes = 0;
}

int inv_parse_classes(struct inv_ctx *c, const struct inv_field *f)
{
	struct fy_node_pair *p;
	void *it = NULL;
	int n, r;

	if (!f->present)
		return 0;
	r = inv_get_map(c, f->val, "node_classes", f->line);
	if (r < 0)
		return r;
	n = fy_node_mapping_item_count(f->val);
	if (n == 0)
		return 0;
	if (n > INV_MAX_CLASSES)
		return inv_fail(c, "node_classes", f->line, "has %d classes, at most %d allowed", n,
		                INV_MAX_CLASSES);
	c->classes = calloc((size_t)n, sizeof(*c->classes));
	if (!c->classes)
		return inv_oom(c);
	while ((p = fy_node_mapping_iterate(f->val, &it))) {
		struct node_tmpl *t = &c->classes[c->n_classes];
		struct fy_node *key = fy_node_pair_key(p), *val = fy_node_pair_value(p);
		int kline = inv_line(key, f->line);
		struct inv_field fs[B_ALL];
		char path[ISO_ERR_FIELD_MAX];

		c->n_classes++;
		r = inv_get_name(c, key, "node_classes", kline, t->name);
		if (r < 0)
			return r;
		inv_path_key(path, "node_classes", t->name);
		init_fields(fs, body_keys, B_ALL);
		r = inv_map_match(c, val, path, kline, fs + B_POOL, B_ALL - B_POOL, class_hint);
		if (r < 0)
			return r;
		r = parse_body(c, fs, path, t, NULL);
		if (r < 0)
			return r;
	}
	qsort(c->classes, (size_t)c->n_classes, sizeof(*c->classes), class_cmp);
	return 0;
}

static const struct node_tmpl *find_class(const struct inv_ctx *c, const char *name)
{
	struct node_tmpl key = {0};

	if (c->n_classes == 0)
		return NULL;
	iso_strlcpy(key.name, name, sizeof(key.name));
	return bsearch(&key, c->classes, (size_t)c->n_classes, sizeof(*c->classes), class_cmp);
}

/* ---- nodes ---- */

static int check_rack_pdu(struct inv_ctx *c, const char *path, struct inv_field *fs,
                          struct iso_node *node)
{
	const struct iso_inventory *inv = c->inv;
	const struct inv_name_ref *rack, *pdu;
	char fpath[ISO_ERR_FIELD_MAX], known[160];

	rack = inv_names_find(&c->racks_ix, node->rack);
	if (!rack) {
		inv_path_key(fpath, path, "rack");
		names_list(&c->racks_ix, known, sizeof(known));
		return inv_fail(c, fpath, inv_line(fs[B_RACK].val, fs[B_RACK].line),
		                "rack '%s' is not declared in racks (declared: %s)", node->rack,
		                known);
	}
	pdu = inv_names_find(&c->pdus_ix, node->pdu);
	if (pdu && pdu->a == rack->a)
		return 0;
	inv_path_key(fpath, path, "pdu");
	if (pdu)
		return inv_fail(c, fpath, inv_line(fs[B_PDU].val, fs[B_PDU].line),
		                "pdu '%s' belongs to rack '%s', not to rack '%s'", node->pdu,
		                inv->racks[pdu->a].name, node->rack);
	const struct iso_rack *r = &inv->racks[rack->a];
	size_t o = 0;
	known[0] = '\0';
	for (int i = 0; i < r->n_pdus && o + ISO_NAME_MAX + 8 < sizeof(known); i++)
		o += (size_t)snprintf(known + o, sizeof(known) - o, "%s%s", i ? ", " : "",
		                      r->pdus[i]);
	return inv_fail(c, fpath, inv_line(fs[B_PDU].val, fs[B_PDU].line),
	                "pdu '%s' is not a pdu of rack '%s' (its pdus: %s)", node->pdu, node->rack,
	                known);
}

/* Fills node->port from the merged template and the node's own GUIDs. */
static int finish_port(struct inv_ctx *c, int idx, const char *path, int line,
                       const struct node_tmpl *t, const struct node_ids *ids, struct iso_node *node)
{
	struct iso_port *port = &node->port;
	char ppath[ISO_ERR_FIELD_MAX], vpath[ISO_ERR_FIELD_MAX], fpath[ISO_ERR_FIELD_MAX];
	int pline = ids->port_line ? ids->port_line : line;
	int vline = ids->vfs_line ? ids->vfs_line : pline;
	bool from_class = !ids->port_line;
	int r;

	inv_path_key(ppath, path, "port");
	inv_path_key(vpath, ppath, "vfs");
	if (!t->has_device)
		return inv_missing(c, ppath, pline, "device", NULL);
	if (!t->has_port_num)
		return inv_missing(c, ppath, pline, "port", "the HCA port number, 1-based");
	if (!t->has_pkey_capacity)
		return inv_missing(c, ppath, pline, "pkey_capacity",
		                   "the port's P_Key table size (ConnectX: 128)");
	if (!ids->guid.present)
		return inv_missing(c, ppath, pline, "guid",
		                   from_class ? "the node's class gives it a port, and every port "
		                                "needs its own GUID"
		                              : "every port needs its own GUID");
	iso_strlcpy(port->device, t->device, sizeof(port->device));
	port->port_num = t->port_num;
	port->pkey_capacity = t->pkey_capacity;
	r = inv_fget_guid(c, ppath, &ids->guid, &port->guid);
	if (r < 0)
		return r;
	r = inv_guids_add(c, port->guid, port->guid, INV_GK_PORT, idx, 0, ids->guid.line);
	if (r < 0)
		return r;

	if (ids->vfs_line && !t->has_vf_count)
		return inv_missing(c, vpath, vline, "count", NULL);
	port->n_vfs = t->has_vf_count ? t->vf_count : 0;
	if (port->n_vfs == 0) {
		const struct inv_field *extra = ids->guid_base.present ? &ids->guid_base
		                                : ids->guids.present   ? &ids->guids
		                                                       : NULL;
		if (!extra)
			return 0;
		inv_path_key(fpath, vpath, extra->key);
		return inv_fail(c, fpath, extra->line,
		                "vfs.count is 0, so there are no VF GUIDs to give");
	}
	if (ids->guid_base.present && ids->guids.present) {
		inv_path_key(fpath, vpath, "guids");
		return inv_fail(c, fpath, ids->guids.line, "give guid_base or guids, not both");
	}
	/* RoCE VFs on ethernet (docs/fabric.md "RoCE VFs"): their guard is the
	 * tenant's VLAN, so there must be VLANs to give; a VF needs no GUID */
	bool eth = c->inv->fabric.type == ISO_FABRIC_ETHERNET;
	if (eth && c->inv->fabric.vlan_min == 0)
		return inv_fail(c, vpath, vline,
		                "VFs on an ethernet fabric need fabric.vlan_range: a RoCE VF's "
		                "guard is its tenant's VLAN (or give vfs.count 0)");
	if (eth && !ids->guid_base.present && !ids->guids.present) {
		port->vf_guids = calloc((size_t)port->n_vfs, sizeof(*port->vf_guids));
		return port->vf_guids ? 0 : inv_oom(c);
	}
	if (!ids->guid_base.present && !ids->guids.present)
		return inv_fail(c, vpath, vline,
		                "vfs.count is %d, so give guid_base or guids (each VF needs its "
		                "own GUID)",
		                port->n_vfs);
	port->vf_guids = calloc((size_t)port->n_vfs, sizeof(*port->vf_guids));
	if (!port->vf_guids)
		return inv_oom(c);

	if (ids->guid_base.present) {
		uint64_t base;
		r = inv_fget_guid(c, vpath, &ids->guid_base, &base);
		if (r < 0)
			return r;
		if (base > UINT64_MAX - (uint64_t)(port->n_vfs - 1)) {
			inv_path_key(fpath, vpath, "guid_base");
			return inv_fail(c, fpath, ids->guid_base.line,
			                "guid_base 0x%016" PRIx64
			                " + %d VFs runs past 0xffffffffffffffff",
			                base, port->n_vfs);
		}
		for (int i = 0; i < port->n_vfs; i++)
			port->vf_guids[i] = base + (uint64_t)i;
		return inv_guids_add(c, base, base + (uint64_t)(port->n_vfs - 1), INV_GK_VF_BASE,
		                     idx, 0, ids->guid_base.line);
	}

	struct fy_node *g;
	void *it = NULL;
	int k = 0;
	inv_path_key(fpath, vpath, "guids");
	r = inv_get_seq(c, ids->guids.val, fpath, ids->guids.line, 1, INV_MAX_VFS, &k);
	if (r < 0)
		return r;
	if (k != port->n_vfs)
		return inv_fail(c, fpath, ids->guids.line,
		                "has %d GUIDs but vfs.count is %d; give exactly one per VF", k,
		                port->n_vfs);
	for (int i = 0; (g = fy_node_sequence_iterate(ids->guids.val, &it)); i++) {
		char gpath[ISO_ERR_FIELD_MAX];
		int gline = inv_line(g, ids->guids.line);
		inv_path_index(gpath, fpath, i);
		r = inv_get_guid(c, g, gpath, gline, &port->vf_guids[i]);
		if (r < 0)
			return r;
		r = inv_guids_add(c, port->vf_guids[i], port->vf_guids[i], INV_GK_VF, idx, i,
		                  gline);
		if (r < 0)
			return r;
	}
	return 0;
}

/* `underlay_ip`: only on an ethernet fabric, a strict dotted-quad IPv4
 * address (iso_parse_ipv4); its line goes to *line for the uniqueness
 * check of inv_parse_nodes. */
static int parse_underlay(struct inv_ctx *c, const char *path, const struct inv_field *f,
                          struct iso_node *node, int *line)
{
	char kpath[ISO_ERR_FIELD_MAX], text[64];
	uint32_t addr;
	int r;

	inv_path_key(kpath, path, "underlay_ip");
	if (c->inv->fabric.type != ISO_FABRIC_ETHERNET)
		return inv_fail(c, kpath, f->line,
		                "only allowed on ethernet fabrics (fabric.type "
		                "is %s)",
		                iso_fabric_type_name(c->inv->fabric.type));
	r = inv_fget_string(c, path, f, text, sizeof(text));
	if (r < 0)
		return r;
	if (iso_parse_ipv4(text, &addr) < 0)
		return inv_fail(c, kpath, f->line,
		                "'%s' is not an IPv4 address (four decimal octets 0-255 without "
		                "leading zeros, e.g. 192.0.2.11)",
		                text);
	iso_strlcpy(node->underlay_ip, text, sizeof(node->underlay_ip));
	*line = f->line;
	return 0;
}

struct underlay_ref {
	uint32_t addr;
	int idx, line;
};

static int underlay_cmp(const void *x, const void *y)
{
	const struct underlay_ref *a = x, *b = y;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return a->line - b->line;
}

/* No two nodes share an underlay address (their VXLAN peers would be one):
 * sorted, so that 65,536 nodes cost n log n. */
static int check_underlay_unique(struct inv_ctx *c, const int *lines)
{
	const struct iso_inventory *inv = c->inv;
	_cleanup_free_ struct underlay_ref *v = calloc((size_t)inv->n_nodes + 1, sizeof(*v));
	char npath[ISO_ERR_FIELD_MAX], path[ISO_ERR_FIELD_MAX];
	int n = 0;

	if (!v)
		return inv_oom(c);
	for (int i = 0; i < inv->n_nodes; i++)
		if (inv->nodes[i].underlay_ip[0]) {
			(void)iso_parse_ipv4(inv->nodes[i].underlay_ip, &v[n].addr);
			v[n].idx = i;
			v[n++].line = lines[i];
		}
	qsort(v, (size_t)n, sizeof(*v), underlay_cmp);
	for (int i = 1; i < n; i++)
		if (v[i].addr == v[i - 1].addr) {
			inv_path_index(npath, "nodes", v[i].idx);
			inv_path_key(path, npath, "underlay_ip");
			return inv_fail(c, path, v[i].line,
			                "%s is already the underlay_ip of node '%s' (line %d)",
			                inv->nodes[v[i].idx].underlay_ip,
			                inv->nodes[v[i - 1].idx].name, v[i - 1].line);
		}
	return 0;
}

static int parse_node(struct inv_ctx *c, struct fy_node *item, int idx, int parent_line,
                      int *underlay_line)
{
	struct iso_node *node = &c->inv->nodes[idx];
	struct node_tmpl t = {0};
	struct node_ids ids = {0};
	struct inv_field fs[B_ALL];
	char path[ISO_ERR_FIELD_MAX], cname[ISO_NAME_MAX];
	const char *via = "";
	int line = inv_line(item, parent_line);
	int r;

	inv_path_index(path, "nodes", idx);
	init_fields(fs, body_keys, B_ALL);
	r = inv_map_match(c, item, path, line, fs, B_ALL, NULL);
	if (r < 0)
		return r;
	if (!fs[B_NAME].present)
		return inv_missing(c, path, line, "name", NULL);
	r = inv_fget_name(c, path, &fs[B_NAME], node->name);
	if (r < 0)
		return r;
	if (inv_names_add(&c->nodes_ix, node->name, idx, 0, fs[B_NAME].line) < 0)
		return inv_oom(c);

	if (fs[B_CLASS].present) {
		const struct node_tmpl *cls;
		r = inv_fget_name(c, path, &fs[B_CLASS], cname);
		if (r < 0)
			return r;
		cls = find_class(c, cname);
		if (!cls) {
			char cpath[ISO_ERR_FIELD_MAX], known[160] = "";
			size_t o = 0;
			for (int i = 0; i < c->n_classes && o + ISO_NAME_MAX + 8 < sizeof(known);
			     i++)
				o += (size_t)snprintf(known + o, sizeof(known) - o, "%s%s",
				                      i ? ", " : "", c->classes[i].name);
			inv_path_key(cpath, path, "class");
			return inv_fail(c, cpath, inv_line(fs[B_CLASS].val, fs[B_CLASS].line),
			                "class '%s' is not declared in node_classes (declared: %s)",
			                cname, c->n_classes ? known : "none");
		}
		t = *cls;
		via = " nor in its class";
	}
	r = parse_body(c, fs, path, &t, &ids);
	if (r < 0)
		return r;

	if (!fs[B_RACK].present)
		return inv_missing(c, path, line, "rack", NULL);
	if (!fs[B_PDU].present)
		return inv_missing(c, path, line, "pdu", NULL);
	r = inv_fget_name(c, path, &fs[B_RACK], node->rack);
	if (r < 0)
		return r;
	r = inv_fget_name(c, path, &fs[B_PDU], node->pdu);
	if (r < 0)
		return r;
	r = check_rack_pdu(c, path, fs, node);
	if (r < 0)
		return r;
	if (fs[B_UNDERLAY].present) {
		r = parse_underlay(c, path, &fs[B_UNDERLAY], node, underlay_line);
		if (r < 0)
			return r;
	}

	char why[96];
	snprintf(why, sizeof(why), "not set on the node%s", via);
	if (!t.has_pool)
		return inv_missing(c, path, line, "pool", why);
	if (!t.has_cpus)
		return inv_missing(c, path, line, "cpus", why);
	if (!t.has_memory) {
		char why_mem[128];
		snprintf(why_mem, sizeof(why_mem), "or memory_mib; %s", why);
		return inv_missing(c, path, line, "memory_gib", why_mem);
	}
	iso_strlcpy(node->pool, t.pool, sizeof(node->pool));
	node->cpus = t.cpus;
	node->memory_mib = t.memory_mib;
	node->sched = ISO_NODE_SCHEDULABLE;

	if (t.has_gpus && t.n_gpus > 0) {
		node->gpus = calloc((size_t)t.n_gpus, sizeof(*node->gpus));
		if (!node->gpus)
			return inv_oom(c);
		memcpy(node->gpus, t.gpus, (size_t)t.n_gpus * sizeof(*node->gpus));
		node->n_gpus = t.n_gpus;
	}

	if (!t.has_port) {
		if (c->inv->fabric.type == ISO_FABRIC_ETHERNET ||
		    c->inv->fabric.type == ISO_FABRIC_SLINGSHOT)
			return 0;
		char why_port[96];
		snprintf(why_port, sizeof(why_port), "every node needs a port on an %s fabric",
		         iso_fabric_type_name(c->inv->fabric.type));
		return inv_missing(c, path, line, "port", why_port);
	}
	node->has_port = true;
	return finish_port(c, idx, path, line, &t, &ids, node);
}

int inv_parse_nodes(struct inv_ctx *c, const struct inv_field *f)
{
	struct iso_inventory *inv = c->inv;
	struct fy_node *item;
	void *it = NULL;
	_cleanup_free_ int *underlay_lines = NULL;
	int n = 0, r;

	r = inv_get_seq(c, f->val, "nodes", f->line, 1, INV_MAX_NODES, &n);
	if (r < 0)
		return r;
	inv->nodes = calloc((size_t)n, sizeof(*inv->nodes));
	if (!inv->nodes)
		return inv_oom(c);
	inv->n_nodes = n;
	underlay_lines = calloc((size_t)n, sizeof(*underlay_lines));
	if (!underlay_lines)
		return inv_oom(c);
	c->nodes_ix.kind = INV_NK_NODE;
	for (int i = 0; (item = fy_node_sequence_iterate(f->val, &it)); i++) {
		r = parse_node(c, item, i, f->line, &underlay_lines[i]);
		if (r < 0)
			return r;
	}
	r = inv_names_seal(c, &c->nodes_ix, "node name");
	if (r == 0)
		r = check_underlay_unique(c, underlay_lines);
	return r;
}

/* inventory.c: the public face of the inventory loader: read a cluster.yaml
 * (or a string), walk its top-level sections in dependency order, check the
 * cross-references, and hand out a fully validated iso_inventory or nothing
 * at all. Owns the inventory's memory layout (allocation and free) and the
 * by-name node index behind iso_inventory_find_node. */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* The inventory plus what only this module needs: node indexes sorted by
 * name. Every iso_inventory handed out is the first member of one of these. */
struct inv_priv {
	struct iso_inventory pub;
	int *by_name;
};

static struct inv_priv *priv_of(const struct iso_inventory *inv)
{
	return (struct inv_priv *)((char *)inv - offsetof(struct inv_priv, pub));
}

void iso_inventory_free(struct iso_inventory *inv)
{
	struct inv_priv *p;

	if (!inv)
		return;
	p = priv_of(inv);
	for (int i = 0; i < inv->n_nodes; i++)
		iso_node_clear(&inv->nodes[i]);
	free(inv->nodes);
	for (int i = 0; i < inv->n_racks; i++)
		free(inv->racks[i].pdus);
	free(inv->racks);
	free(inv->pools);
	free(inv->fabric.sm_nodes);
	for (int i = 0; i < inv->fabric.n_services; i++)
		free(inv->fabric.services[i].guids);
	free(inv->fabric.services);
	free(inv->fabric.standby);
	free(p->by_name);
	free(p);
}

const struct iso_node *iso_inventory_find_node(const struct iso_inventory *inv, const char *name)
{
	const struct inv_priv *p;
	int lo = 0, hi;

	if (!inv || !name)
		return NULL;
	p = priv_of(inv);
	hi = inv->n_nodes - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		const struct iso_node *n = &inv->nodes[p->by_name[mid]];
		int r = strcmp(name, n->name);
		if (r == 0)
			return n;
		if (r < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

static void ctx_clear(struct inv_ctx *c)
{
	inv_names_free(&c->pools_ix);
	inv_names_free(&c->racks_ix);
	inv_names_free(&c->pdus_ix);
	inv_names_free(&c->nodes_ix);
	inv_classes_free(c);
	free(c->guids);
}

static void document_destroyp(struct fy_document **d)
{
	if (*d)
		fy_document_destroy(*d);
}

/* The top level, in the order the sections depend on each other (not the
 * order they are written in): fabric before nodes (ports required or not),
 * pools and racks before classes and nodes (references). */
static int parse_root(struct inv_ctx *c, struct fy_node *root)
{
	enum { T_CLUSTER, T_CONTROLLER, T_FABRIC, T_POOLS, T_RACKS, T_CLASSES, T_NODES, T_N };
	struct inv_field fs[T_N] = {
	    [T_CLUSTER] = {.key = "cluster"}, [T_CONTROLLER] = {.key = "controller"},
	    [T_FABRIC] = {.key = "fabric"},   [T_POOLS] = {.key = "pools"},
	    [T_RACKS] = {.key = "racks"},     [T_CLASSES] = {.key = "node_classes"},
	    [T_NODES] = {.key = "nodes"},
	};
	int line = inv_line(root, 1);
	int r;

	if (!root ||
	    (!inv_is_map(root) && !inv_is_seq(root) && fy_node_get_scalar_length(root) == 0))
		return inv_fail(c, "", line,
		                "empty document (expected a mapping with cluster, fabric, pools, "
		                "racks and nodes)");
	if (!inv_is_map(root))
		return inv_fail(c, "", line,
		                "the document root must be a mapping (cluster, fabric, pools, "
		                "racks, nodes), got %s",
		                inv_is_seq(root) ? "a list" : "a scalar");
	r = inv_map_match(c, root, "", line, fs, T_N, NULL);
	if (r < 0)
		return r;

	/* Required sections are checked as they come, so that the first error
	 * reported is the first one met. */
	if (!fs[T_CLUSTER].present)
		return inv_missing(c, "", line, "cluster", NULL);
	r = inv_fget_name(c, "", &fs[T_CLUSTER], c->inv->cluster_name);
	if (r < 0)
		return r;
	r = inv_parse_controller(c, &fs[T_CONTROLLER]);
	if (r < 0)
		return r;
	if (!fs[T_FABRIC].present)
		return inv_missing(c, "", line, "fabric", NULL);
	r = inv_parse_fabric(c, &fs[T_FABRIC]);
	if (r < 0)
		return r;
	if (!fs[T_POOLS].present)
		return inv_missing(c, "", line, "pools", NULL);
	r = inv_parse_pools(c, &fs[T_POOLS]);
	if (r < 0)
		return r;
	if (!fs[T_RACKS].present)
		return inv_missing(c, "", line, "racks", NULL);
	r = inv_parse_racks(c, &fs[T_RACKS]);
	if (r < 0)
		return r;
	r = inv_parse_classes(c, &fs[T_CLASSES]);
	if (r < 0)
		return r;
	if (!fs[T_NODES].present)
		return inv_missing(c, "", line, "nodes", NULL);
	r = inv_parse_nodes(c, &fs[T_NODES]);
	if (r < 0)
		return r;
	r = inv_fabric_check_sm_node(c);
	if (r < 0)
		return r;
	return inv_guids_check(c);
}

int iso_inventory_load_string(const char *name, const char *yaml, size_t len,
                              struct iso_inventory **out, struct iso_error *err)
{
	_cleanup_(ctx_clear) struct inv_ctx c = {.name = name ? name : "<string>", .err = err};
	_cleanup_(document_destroyp) struct fy_document *doc = NULL;
	_cleanup_(iso_inventory_freep) struct iso_inventory *inv = NULL;
	struct inv_priv *p;
	int r;

	if (!yaml && len)
		return iso_error_set(err, ISO_E_INVALID, "", "%s: no input", c.name);
	if (len > INV_MAX_FILE)
		return iso_error_set(err, ISO_E_INVALID, "", "%s: larger than %u MiB", c.name,
		                     INV_MAX_FILE >> 20);
	p = calloc(1, sizeof(*p));
	if (!p)
		return inv_oom(&c);
	inv = &p->pub;
	c.inv = inv;
	if (iso_strlcpy(inv->path, c.name, sizeof(inv->path)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "", "inventory path longer than %zu bytes",
		                     sizeof(inv->path) - 1);

	r = inv_yaml_parse(&c, yaml ? yaml : "", len, &doc);
	if (r < 0)
		return r;
	r = parse_root(&c, doc ? fy_document_root(doc) : NULL);
	if (r < 0)
		return r;

	p->by_name = calloc((size_t)c.nodes_ix.n, sizeof(*p->by_name));
	if (!p->by_name)
		return inv_oom(&c);
	for (int i = 0; i < c.nodes_ix.n; i++)
		p->by_name[i] = c.nodes_ix.v[i].a;
	*out = ISO_TAKE(inv);
	return 0;
}

int iso_inventory_load_file(const char *path, struct iso_inventory **out, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t n = 0;

	if (!path || !path[0])
		return iso_error_set(err, ISO_E_INVALID, "", "no inventory path given");
	f = fopen(path, "re");
	if (!f) {
		int e = errno;
		return iso_error_set(err, e == ENOENT ? ISO_E_NOT_FOUND : ISO_E_INVALID, "",
		                     "%s: cannot open inventory: %s", path, strerror(e));
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode))
		return iso_error_set(err, ISO_E_INVALID, "", "%s: not a regular file", path);
	if (st.st_size > (off_t)INV_MAX_FILE)
		return iso_error_set(err, ISO_E_INVALID, "", "%s: larger than %u MiB", path,
		                     INV_MAX_FILE >> 20);
	/* One byte more than the size, to notice a file that grew meanwhile. */
	size_t cap = (size_t)st.st_size + 1;
	buf = malloc(cap);
	if (!buf)
		return iso_error_set(err, ISO_E_INTERNAL, "", "%s: out of memory", path);
	while (n < cap) {
		size_t k = fread(buf + n, 1, cap - n, f);
		if (k == 0) {
			if (ferror(f))
				return iso_error_set(err, ISO_E_INVALID, "", "%s: read error: %s",
				                     path, strerror(errno));
			break;
		}
		n += k;
	}
	if (n == cap)
		return iso_error_set(err, ISO_E_INVALID, "", "%s: changed while being read", path);
	return iso_inventory_load_string(path, buf, n, out, err);
}

/* internal.h: what the inventory loader's files share: the load context, the
 * strict YAML accessors (yaml.c), the name index (names.c) and the section
 * parsers. Private to src/inventory; the public face is isostack/inventory.h. */
#ifndef ISOSTACK_INVENTORY_INTERNAL_H
#define ISOSTACK_INVENTORY_INTERNAL_H

#include <libfyaml.h>

#include "isostack/inventory.h"

/* Limits, documented in docs/inventory.md. */
#define INV_MAX_NODES         65536
#define INV_MAX_GPUS          64
#define INV_MAX_POOLS         4096
#define INV_MAX_RACKS         65536
#define INV_MAX_PDUS_PER_RACK 64
#define INV_MAX_CLASSES       4096
#define INV_MAX_SM_NODES      64
#define INV_MAX_SERVICES      1024
#define INV_MAX_SERVICE_GUIDS 4096
#define INV_MAX_VFS           127
#define INV_MAX_FILE          (64u << 20)

/* A sorted index over names, for lookups and duplicate detection. `kind`
 * says how to spell an entry's path in messages (see inv_names_path). */
enum inv_name_kind {
	INV_NK_POOL,    /* pools[a].name */
	INV_NK_RACK,    /* racks[a].name */
	INV_NK_PDU,     /* racks[a].pdus[b] */
	INV_NK_NODE,    /* nodes[a].name */
	INV_NK_SM,      /* fabric.sm_nodes[a] */
	INV_NK_SERVICE, /* fabric.shared_services[a].name */
};

struct inv_name_ref {
	const char *name; /* borrowed from the inventory being built */
	int a, b;         /* indexes for the path */
	int line;
	int seq; /* document order */
};

struct inv_names {
	enum inv_name_kind kind;
	struct inv_name_ref *v; /* owned */
	int n, cap;
};

/* Where a GUID (or a run of VF GUIDs) was declared, for the uniqueness check. */
enum inv_guid_kind {
	INV_GK_PORT,    /* nodes[a].port.guid */
	INV_GK_VF_BASE, /* nodes[a].port.vfs.guid_base: lo..hi */
	INV_GK_VF,      /* nodes[a].port.vfs.guids[b] */
	INV_GK_SERVICE, /* fabric.shared_services[a].guids[b] */
};

struct inv_guid_site {
	uint64_t lo, hi; /* inclusive */
	enum inv_guid_kind kind;
	int a, b;
	int line;
	int seq; /* document order */
};

struct node_tmpl; /* nodes.c */

/* One load. Owns the scratch state; the inventory itself moves to the caller
 * only when everything validated. */
struct inv_ctx {
	const char *name; /* file name in messages */
	struct iso_error *err;
	struct iso_inventory *inv;
	struct inv_names pools_ix, racks_ix, pdus_ix;
	struct inv_names nodes_ix;
	int n_classes;
	struct node_tmpl *classes; /* owned */
	int n_guids, cap_guids;
	struct inv_guid_site *guids; /* owned */
	int sm_node_line; /* fabric.sm_node's line, checked once the nodes are read */
};

/* ---- errors (yaml.c) ---- */

/* Fills the error as ISO_E_INVALID with field = path and message
 * "NAME:LINE: path: text"; returns -EINVAL. */
int inv_fail(struct inv_ctx *c, const char *path, int line, const char *fmt, ...) _printf_(4, 5);

/* Allocation failure: ISO_E_INTERNAL, returns -ENOMEM. */
int inv_oom(struct inv_ctx *c);

/* path = parent + "." + key, or parent + "[i]"; an empty parent gives key. */
void inv_path_key(char out[ISO_ERR_FIELD_MAX], const char *parent, const char *key);
void inv_path_index(char out[ISO_ERR_FIELD_MAX], const char *parent, int i);

/* ---- parsing (yaml.c) ---- */

/* Parses exactly one YAML document. A syntax error becomes "NAME:LINE: YAML
 * syntax error: ..."; an empty stream yields *doc == NULL and 0. */
int inv_yaml_parse(struct inv_ctx *c, const char *yaml, size_t len, struct fy_document **doc);

/* 1-based line of a node: its own token for scalars, the first key or item
 * for collections, `fallback` when the node has none (empty value). */
int inv_line(struct fy_node *n, int fallback);

/* ---- strict accessors (yaml.c) ----
 * Each takes the node, its dotted path and the line to blame when the node
 * has no position of its own (the line of its key). Aliases, tags and nulls
 * are refused everywhere. */

struct inv_field {
	const char *key;
	struct fy_node *val; /* set by inv_map_match when present */
	int line;            /* line of the key */
	bool present;
};

/* Checks that `map` is a mapping whose every key is one of fields[0..nf) and
 * records the values. `hint` (may be NULL) explains why a key is not allowed
 * here, e.g. "is per node and cannot be set in a class". */
int inv_map_match(struct inv_ctx *c, struct fy_node *map, const char *path, int line,
                  struct inv_field *fields, size_t nf, const char *(*hint)(const char *key));

/* "missing required key 'x'" at parent.x. */
int inv_missing(struct inv_ctx *c, const char *parent, int line, const char *key, const char *why);

int inv_get_string(struct inv_ctx *c, struct fy_node *n, const char *path, int line, char *buf,
                   size_t size);
int inv_get_name(struct inv_ctx *c, struct fy_node *n, const char *path, int line, char *buf);
int inv_get_int(struct inv_ctx *c, struct fy_node *n, const char *path, int line, int64_t min,
                int64_t max, int64_t *out);
int inv_get_bool(struct inv_ctx *c, struct fy_node *n, const char *path, int line, bool *out);
int inv_get_guid(struct inv_ctx *c, struct fy_node *n, const char *path, int line, uint64_t *out);
/* A sequence of min..max items; *count gets the number. */
int inv_get_seq(struct inv_ctx *c, struct fy_node *n, const char *path, int line, int min, int max,
                int *count);
int inv_get_map(struct inv_ctx *c, struct fy_node *n, const char *path, int line);
bool inv_is_map(struct fy_node *n);
bool inv_is_seq(struct fy_node *n);

/* The same on a matched field, building parent.key as the path. */
int inv_fget_string(struct inv_ctx *c, const char *parent, const struct inv_field *f, char *buf,
                    size_t size);
int inv_fget_name(struct inv_ctx *c, const char *parent, const struct inv_field *f, char *buf);
int inv_fget_int(struct inv_ctx *c, const char *parent, const struct inv_field *f, int64_t min,
                 int64_t max, int64_t *out);
int inv_fget_bool(struct inv_ctx *c, const char *parent, const struct inv_field *f, bool *out);
int inv_fget_guid(struct inv_ctx *c, const char *parent, const struct inv_field *f, uint64_t *out);

/* ---- name index (names.c) ---- */
int inv_names_add(struct inv_names *ix, const char *name, int a, int b, int line);
/* Sorts; a duplicate is an error at the later entry naming the first. */
int inv_names_seal(struct inv_ctx *c, struct inv_names *ix, const char *what);
const struct inv_name_ref *inv_names_find(const struct inv_names *ix, const char *name);
void inv_names_path(const struct inv_names *ix, const struct inv_name_ref *r,
                    char out[ISO_ERR_FIELD_MAX]);
void inv_names_free(struct inv_names *ix);

/* ---- sections ---- */
int inv_parse_controller(struct inv_ctx *c, const struct inv_field *f); /* cluster.c */
int inv_parse_fabric(struct inv_ctx *c, const struct inv_field *f);     /* fabric.c */
/* fabric.sm_node names a node of `nodes:` (after inv_parse_nodes). */
int inv_fabric_check_sm_node(struct inv_ctx *c); /* fabric.c */
int inv_parse_pools(struct inv_ctx *c, const struct inv_field *f);      /* cluster.c */
int inv_parse_racks(struct inv_ctx *c, const struct inv_field *f);      /* cluster.c */
int inv_parse_classes(struct inv_ctx *c, const struct inv_field *f);    /* nodes.c */
int inv_parse_nodes(struct inv_ctx *c, const struct inv_field *f);      /* nodes.c */
void inv_classes_free(struct inv_ctx *c);                               /* nodes.c */
/* ---- GUIDs (guids.c) ---- */
int inv_guids_add(struct inv_ctx *c, uint64_t lo, uint64_t hi, enum inv_guid_kind kind, int a,
                  int b, int line);
/* Every GUID (ports, VFs, shared services) unique; an overlap is an error at
 * the later declaration naming the first. */
int inv_guids_check(struct inv_ctx *c);

#endif

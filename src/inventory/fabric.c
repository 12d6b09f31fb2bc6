/* fabric.c: the `fabric` section: which kind of fabric, its subnet managers,
 * the P_Key (or VNI) range tenants draw from, and the shared-service
 * partitions. The P_Key rules follow OpenSM and the Omni-Path FM: 15-bit keys,
 * 0x7fff is the default partition and is never handed out (see
 * docs/reference-fabric.md). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_FABRIC_NAME "fabric"
#define DEFAULT_PKEY_MIN    0x0100
#define DEFAULT_PKEY_MAX    0x7ffe
#define DEFAULT_VNI_MIN     4096u
#define DEFAULT_VNI_MAX     16777215u
#define VNI_MAX             16777215
/* Slingshot VNIs are 16 bits (0 invalid); the default pool is Flux's
 * cray-slingshot vni-pool, 1024-65535 (docs/fabric.md "Slingshot"). */
#define SS_VNI_MIN 1024u
#define SS_VNI_MAX 65535u
#define VLAN_MAX   4094 /* 0 and 4095 are reserved (802.1Q) */

/* RFC 1123 host name: dot-separated labels of letters, digits and '-', no
 * label empty or starting or ending with '-'. */
static bool hostname_valid(const char *s)
{
	size_t label = 0;
	char prev = '.';

	if (!s[0])
		return false;
	for (const char *p = s; *p; p++) {
		char ch = *p;
		if (ch == '.') {
			if (label == 0 || prev == '-')
				return false;
			label = 0;
		} else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		           (ch >= '0' && ch <= '9') || ch == '-') {
			if (label == 0 && ch == '-')
				return false;
			label++;
			if (label > 63)
				return false;
		} else {
			return false;
		}
		prev = ch;
	}
	return label > 0 && prev != '-';
}

/* A tenant or service P_Key: 0x0001..0x7ffe, with a reason for each way of
 * getting it wrong. */
static int get_pkey(struct inv_ctx *c, struct fy_node *n, const char *path, int line, uint16_t *out)
{
	int64_t v;
	int r = inv_get_int(c, n, path, line, -INT64_MAX, INT64_MAX, &v);

	if (r < 0)
		return r;
	line = inv_line(n, line);
	if (v == 0x7fff)
		return inv_fail(c, path, line,
		                "0x7fff is the default partition and is never given out");
	if (v == 0xffff)
		return inv_fail(c, path, line,
		                "0xffff is the default partition (0x7fff, full member) and is "
		                "never given out");
	if (v > 0x7fff && v <= 0xffff)
		return inv_fail(c, path, line,
		                "P_Keys are 15 bits (0x0001..0x7ffe); 0x%04" PRIx64
		                " has the membership bit 0x8000 set",
		                v);
	if (v < 1 || v > 0x7fff)
		return inv_fail(c, path, line,
		                "must be a P_Key between 0x0001 and 0x7ffe, got %" PRId64, v);
	*out = (uint16_t)v;
	return 0;
}

/* [min, max] of two integers: P_Keys, or each 1..limit. */
static int get_range(struct inv_ctx *c, const struct inv_field *f, bool pkey, uint32_t limit,
                     uint32_t *min, uint32_t *max)
{
	char path[ISO_ERR_FIELD_MAX], epath[ISO_ERR_FIELD_MAX];
	struct fy_node *item;
	void *it = NULL;
	uint32_t v[2] = {0, 0};
	int n = 0, r;

	inv_path_key(path, "fabric", f->key);
	r = inv_get_seq(c, f->val, path, f->line, 2, 2, &n);
	if (r < 0)
		return r;
	for (int i = 0; (item = fy_node_sequence_iterate(f->val, &it)); i++) {
		inv_path_index(epath, path, i);
		if (pkey) {
			uint16_t k = 0;
			r = get_pkey(c, item, epath, f->line, &k);
			v[i] = k;
		} else {
			int64_t x = 0;
			r = inv_get_int(c, item, epath, f->line, 1, limit, &x);
			v[i] = (uint32_t)x;
		}
		if (r < 0)
			return r;
	}
	if (v[0] > v[1])
		return inv_fail(c, path, inv_line(f->val, f->line),
		                pkey ? "min 0x%04" PRIx32 " is above max 0x%04" PRIx32
		                     : "min %" PRIu32 " is above max %" PRIu32,
		                v[0], v[1]);
	*min = v[0];
	*max = v[1];
	return 0;
}

static int parse_sm_nodes(struct inv_ctx *c, const struct inv_field *f)
{
	struct iso_fabric_config *fc = &c->inv->fabric;
	_cleanup_(inv_names_free) struct inv_names ix = {.kind = INV_NK_SM};
	struct fy_node *item;
	void *it = NULL;
	int n = 0, r;

	r = inv_get_seq(c, f->val, "fabric.sm_nodes", f->line, 1, INV_MAX_SM_NODES, &n);
	if (r < 0)
		return r;
	fc->sm_nodes = calloc((size_t)n, sizeof(*fc->sm_nodes));
	if (!fc->sm_nodes)
		return inv_oom(c);
	fc->n_sm_nodes = n;
	for (int i = 0; (item = fy_node_sequence_iterate(f->val, &it)); i++) {
		char path[ISO_ERR_FIELD_MAX];
		int line = inv_line(item, f->line);

		inv_path_index(path, "fabric.sm_nodes", i);
		r = inv_get_string(c, item, path, line, fc->sm_nodes[i], sizeof(fc->sm_nodes[i]));
		if (r < 0)
			return r;
		if (!hostname_valid(fc->sm_nodes[i]))
			return inv_fail(c, path, line, "'%s' is not a valid host name",
			                fc->sm_nodes[i]);
		if (inv_names_add(&ix, fc->sm_nodes[i], i, 0, line) < 0)
			return inv_oom(c);
	}
	return inv_names_seal(c, &ix, "subnet manager");
}

static int parse_service(struct inv_ctx *c, struct fy_node *item, int i, int parent_line)
{
	struct iso_fabric_config *fc = &c->inv->fabric;
	struct iso_shared_service *s = &fc->services[i];
	enum { S_NAME, S_PKEY, S_GUIDS, S_N };
	struct inv_field fs[S_N] = {
	    [S_NAME] = {.key = "name"}, [S_PKEY] = {.key = "pkey"}, [S_GUIDS] = {.key = "guids"}};
	char path[ISO_ERR_FIELD_MAX], fpath[ISO_ERR_FIELD_MAX];
	int line = inv_line(item, parent_line);
	struct fy_node *g;
	void *it = NULL;
	int n = 0, r;

	inv_path_index(path, "fabric.shared_services", i);
	r = inv_map_match(c, item, path, line, fs, S_N, NULL);
	if (r < 0)
		return r;
	for (int k = 0; k < S_N; k++)
		if (!fs[k].present)
			return inv_missing(c, path, line, fs[k].key, NULL);
	r = inv_fget_name(c, path, &fs[S_NAME], s->name);
	if (r < 0)
		return r;

	inv_path_key(fpath, path, "pkey");
	r = get_pkey(c, fs[S_PKEY].val, fpath, fs[S_PKEY].line, &s->pkey);
	if (r < 0)
		return r;
	if (s->pkey >= fc->pkey_min && s->pkey <= fc->pkey_max)
		return inv_fail(
		    c, fpath, fs[S_PKEY].line,
		    "0x%04x is inside the tenant range 0x%04x..0x%04x (fabric.pkey_range); "
		    "a service P_Key must lie outside it",
		    s->pkey, fc->pkey_min, fc->pkey_max);
	for (int k = 0; k < i; k++)
		if (fc->services[k].pkey == s->pkey)
			return inv_fail(c, fpath, fs[S_PKEY].line,
			                "P_Key 0x%04x is already used by "
			                "fabric.shared_services[%d] ('%s')",
			                s->pkey, k, fc->services[k].name);

	inv_path_key(fpath, path, "guids");
	r = inv_get_seq(c, fs[S_GUIDS].val, fpath, fs[S_GUIDS].line, 1, INV_MAX_SERVICE_GUIDS, &n);
	if (r < 0)
		return r;
	s->guids = calloc((size_t)n, sizeof(*s->guids));
	if (!s->guids)
		return inv_oom(c);
	s->n_guids = n;
	for (int j = 0; (g = fy_node_sequence_iterate(fs[S_GUIDS].val, &it)); j++) {
		char gpath[ISO_ERR_FIELD_MAX];
		int gline = inv_line(g, fs[S_GUIDS].line);

		inv_path_index(gpath, fpath, j);
		r = inv_get_guid(c, g, gpath, gline, &s->guids[j]);
		if (r < 0)
			return r;
		r = inv_guids_add(c, s->guids[j], s->guids[j], INV_GK_SERVICE, i, j, gline);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_services(struct inv_ctx *c, const struct inv_field *f)
{
	struct iso_fabric_config *fc = &c->inv->fabric;
	_cleanup_(inv_names_free) struct inv_names ix = {.kind = INV_NK_SERVICE};
	struct fy_node *item;
	void *it = NULL;
	int n = 0, r;

	r = inv_get_seq(c, f->val, "fabric.shared_services", f->line, 0, INV_MAX_SERVICES, &n);
	if (r < 0)
		return r;
	if (n == 0)
		return 0;
	fc->services = calloc((size_t)n, sizeof(*fc->services));
	if (!fc->services)
		return inv_oom(c);
	fc->n_services = n;
	for (int i = 0; (item = fy_node_sequence_iterate(f->val, &it)); i++) {
		r = parse_service(c, item, i, f->line);
		if (r < 0)
			return r;
		if (inv_names_add(&ix, fc->services[i].name, i, 0, inv_line(item, f->line)) < 0)
			return inv_oom(c);
	}
	return inv_names_seal(c, &ix, "shared service name");
}

/* A file path: non-empty, no control characters, < 512 bytes. */
static int get_path(struct inv_ctx *c, struct fy_node *n, const char *path, int line, char *buf)
{
	int r = inv_get_string(c, n, path, line, buf, sizeof(((struct iso_sm_files *)0)->pid_file));

	if (r < 0)
		return r;
	if (!buf[0])
		return inv_fail(c, path, inv_line(n, line), "must be a file path, not empty");
	return 0;
}

/* One OpenSM's files: the flat fabric.{partitions,pid,log}_file keys for the
 * primary, or a fabric.standby_sms[i] mapping. */
static int get_sm_files(struct inv_ctx *c, const char *parent, struct inv_field *fs,
                        struct iso_sm_files *sm)
{
	char path[ISO_ERR_FIELD_MAX];
	char *dst[3] = {sm->partitions_file, sm->pid_file, sm->log_file};

	for (int k = 0; k < 3; k++) {
		if (!fs[k].present)
			continue;
		inv_path_key(path, parent, fs[k].key);
		int r = get_path(c, fs[k].val, path, fs[k].line, dst[k]);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_standby(struct inv_ctx *c, const struct inv_field *f)
{
	struct iso_fabric_config *fc = &c->inv->fabric;
	struct fy_node *item;
	void *it = NULL;
	int n = 0, r;

	r = inv_get_seq(c, f->val, "fabric.standby_sms", f->line, 1, INV_MAX_SM_NODES, &n);
	if (r < 0)
		return r;
	fc->standby = calloc((size_t)n, sizeof(*fc->standby));
	if (!fc->standby)
		return inv_oom(c);
	fc->n_standby = n;
	for (int i = 0; (item = fy_node_sequence_iterate(f->val, &it)); i++) {
		struct inv_field fs[3] = {
		    {.key = "partitions_file"}, {.key = "pid_file"}, {.key = "log_file"}};
		char path[ISO_ERR_FIELD_MAX];
		int line = inv_line(item, f->line);

		inv_path_index(path, "fabric.standby_sms", i);
		r = inv_map_match(c, item, path, line, fs, 3, NULL);
		if (r < 0)
			return r;
		if (!fs[0].present)
			return inv_missing(c, path, line, "partitions_file",
			                   "the same partitions.conf is written to every SM");
		r = get_sm_files(c, path, fs, &fc->standby[i]);
		if (r < 0)
			return r;
		if (strcmp(fc->standby[i].partitions_file, fc->sm.partitions_file) == 0)
			return inv_fail(
			    c, path, line,
			    "partitions_file '%s' is the primary's fabric.partitions_file",
			    fc->sm.partitions_file);
		for (int k = 0; k < i; k++)
			if (strcmp(fc->standby[k].partitions_file,
			           fc->standby[i].partitions_file) == 0)
				return inv_fail(c, path, line,
				                "partitions_file '%s' is already "
				                "fabric.standby_sms[%d]'s",
				                fc->standby[i].partitions_file, k);
	}
	return 0;
}

/* The driver that programs the fabric and its knobs (docs/inventory.md). */
enum {
	D_DRIVER,
	D_PARTS,
	D_PID,
	D_LOG,
	D_STANDBY,
	D_WRITER,
	D_SM_NODE,
	D_OPAFM,
	D_QUAR,
	D_COAL,
	D_CONFIRM,
	D_N
};

static int parse_driver(struct inv_ctx *c, struct inv_field *fs)
{
	struct iso_fabric_config *fc = &c->inv->fabric;
	int64_t v;
	int r;

	iso_strlcpy(fc->driver, "sim", sizeof(fc->driver));
	fc->pkey_quarantine_ms = 300 * 1000;
	fc->coalesce_ms = 50;
	fc->confirm_timeout_ms = 10000;
	if (fs[D_DRIVER].present) {
		int line = inv_line(fs[D_DRIVER].val, fs[D_DRIVER].line);
		char name[32];

		r = inv_fget_string(c, "fabric", &fs[D_DRIVER], name, sizeof(name));
		if (r < 0)
			return r;
		if (strcmp(name, "sim") && strcmp(name, "opensm") && strcmp(name, "opafm"))
			return inv_fail(c, "fabric.driver", line,
			                "unknown driver '%s' (expected sim, opensm or opafm)",
			                name);
		if (strcmp(name, "opensm") == 0 && fc->type != ISO_FABRIC_INFINIBAND)
			return inv_fail(c, "fabric.driver", line,
			                "opensm programs infiniband fabrics, not %s",
			                iso_fabric_type_name(fc->type));
		if (strcmp(name, "opafm") == 0 && fc->type != ISO_FABRIC_OMNIPATH)
			return inv_fail(c, "fabric.driver", line,
			                "opafm programs omnipath fabrics, not %s",
			                iso_fabric_type_name(fc->type));
		iso_strlcpy(fc->driver, name, sizeof(fc->driver));
	}
	bool opensm = strcmp(fc->driver, "opensm") == 0;
	bool opafm = strcmp(fc->driver, "opafm") == 0;
	for (int k = D_PARTS; k <= D_SM_NODE; k++)
		if (fs[k].present && !opensm) {
			char path[ISO_ERR_FIELD_MAX];
			inv_path_key(path, "fabric", fs[k].key);
			return inv_fail(c, path, fs[k].line,
			                "only used by fabric.driver opensm (the driver is %s)",
			                fc->driver);
		}
	if (fs[D_OPAFM].present && !opafm)
		return inv_fail(c, "fabric.opafm_file", fs[D_OPAFM].line,
		                "only used by fabric.driver opafm (the driver is %s)", fc->driver);
	if (opensm && fs[D_WRITER].present) {
		int line = inv_line(fs[D_WRITER].val, fs[D_WRITER].line);
		char w[16];

		r = inv_fget_string(c, "fabric", &fs[D_WRITER], w, sizeof(w));
		if (r < 0)
			return r;
		if (strcmp(w, "agent") == 0)
			fc->partitions_by_agent = true;
		else if (strcmp(w, "local") != 0)
			return inv_fail(c, "fabric.partitions_writer", line,
			                "unknown writer '%s' (expected local: isostackd writes "
			                "partitions.conf, or agent: the SM host's agent does)",
			                w);
	}
	if (fc->partitions_by_agent) {
		/* the SM host's files are the agent's flags, not isostackd's */
		for (int k = D_PARTS; k <= D_STANDBY; k++)
			if (fs[k].present) {
				char path[ISO_ERR_FIELD_MAX];
				inv_path_key(path, "fabric", fs[k].key);
				return inv_fail(c, path, fs[k].line,
				                "not with fabric.partitions_writer agent: the SM "
				                "host's agent is given OpenSM's files "
				                "(isostack-agent --sm-partitions, --sm-pid-file, "
				                "--sm-log, --sm-standby)");
			}
		if (!fs[D_SM_NODE].present)
			return inv_missing(c, "fabric", fs[D_WRITER].line, "sm_node",
			                   "fabric.partitions_writer agent: the node whose agent "
			                   "writes OpenSM's partitions.conf");
		r = inv_fget_name(c, "fabric", &fs[D_SM_NODE], fc->sm_node);
		if (r < 0)
			return r;
		c->sm_node_line = inv_line(fs[D_SM_NODE].val, fs[D_SM_NODE].line);
	} else if (fs[D_SM_NODE].present) {
		return inv_fail(c, "fabric.sm_node", fs[D_SM_NODE].line,
		                "only used with fabric.partitions_writer agent");
	}
	if (opensm && !fc->partitions_by_agent) {
		if (!fs[D_PARTS].present)
			return inv_missing(
			    c, "fabric", fs[D_DRIVER].line, "partitions_file",
			    "fabric.driver opensm writes OpenSM's partitions.conf there");
		r = get_sm_files(c, "fabric", &fs[D_PARTS], &fc->sm);
		if (r < 0)
			return r;
		if (fs[D_STANDBY].present) {
			r = parse_standby(c, &fs[D_STANDBY]);
			if (r < 0)
				return r;
		}
	}
	if (opafm) {
		if (!fs[D_OPAFM].present)
			return inv_missing(c, "fabric", fs[D_DRIVER].line, "opafm_file",
			                   "fabric.driver opafm writes opafm.xml there");
		r = get_path(c, fs[D_OPAFM].val, "fabric.opafm_file", fs[D_OPAFM].line,
		             fc->opafm_file);
		if (r < 0)
			return r;
	}
	if (fs[D_QUAR].present) {
		r = inv_fget_int(c, "fabric", &fs[D_QUAR], 0, 30 * 86400, &v);
		if (r < 0)
			return r;
		fc->pkey_quarantine_ms = v * 1000;
	}
	if (fs[D_COAL].present) {
		r = inv_fget_int(c, "fabric", &fs[D_COAL], 0, 10000, &v);
		if (r < 0)
			return r;
		fc->coalesce_ms = (int)v;
	}
	if (fs[D_CONFIRM].present) {
		r = inv_fget_int(c, "fabric", &fs[D_CONFIRM], 100, 600000, &v);
		if (r < 0)
			return r;
		fc->confirm_timeout_ms = (int)v;
	}
	return 0;
}

/* A key that exists but not on this kind of fabric. */
static int not_on(struct inv_ctx *c, const struct inv_field *f, const char *kinds)
{
	char path[ISO_ERR_FIELD_MAX];

	inv_path_key(path, "fabric", f->key);
	return inv_fail(c, path, f->line, "only allowed on %s fabrics", kinds);
}

/* The keys of the fabric mapping, then the driver's (D_*). */
enum { F_TYPE, F_NAME, F_SM, F_PKEY, F_VNI, F_VLAN, F_SVC, F_DRV, F_N = F_DRV + D_N };

/* A fabric isolated by VNIs (ethernet's VXLAN, Slingshot's CXI services):
 * no subnet manager, no P_Keys, no shared services; its VNI range, with
 * this kind's default and limit. */
static int vni_fabric(struct inv_ctx *c, const struct inv_field *fs, uint32_t def_min,
                      uint32_t def_max, uint32_t limit)
{
	struct iso_fabric_config *fc = &c->inv->fabric;
	uint32_t lo = 0, hi = 0;
	int r;

	if (fs[F_SM].present)
		return not_on(c, &fs[F_SM], "infiniband and omnipath");
	if (fs[F_PKEY].present)
		return not_on(c, &fs[F_PKEY], "infiniband and omnipath");
	if (fs[F_SVC].present)
		return not_on(c, &fs[F_SVC], "infiniband and omnipath");
	fc->vni_min = def_min;
	fc->vni_max = def_max;
	if (fs[F_VNI].present) {
		r = get_range(c, &fs[F_VNI], false, limit, &lo, &hi);
		if (r < 0)
			return r;
		fc->vni_min = lo;
		fc->vni_max = hi;
	}
	return 0;
}

int inv_parse_fabric(struct inv_ctx *c, const struct inv_field *f)
{
	struct iso_fabric_config *fc = &c->inv->fabric;
	struct inv_field fs[F_N] = {
	    [F_TYPE] = {.key = "type"},       [F_NAME] = {.key = "name"},
	    [F_SM] = {.key = "sm_nodes"},     [F_PKEY] = {.key = "pkey_range"},
	    [F_VNI] = {.key = "vni_range"},   [F_SVC] = {.key = "shared_services"},
	    [F_VLAN] = {.key = "vlan_range"},
	};
	static const char *const driver_keys[D_N] = {
	    [D_DRIVER] = "driver",
	    [D_PARTS] = "partitions_file",
	    [D_PID] = "pid_file",
	    [D_LOG] = "log_file",
	    [D_STANDBY] = "standby_sms",
	    [D_WRITER] = "partitions_writer",
	    [D_SM_NODE] = "sm_node",
	    [D_OPAFM] = "opafm_file",
	    [D_QUAR] = "pkey_quarantine_s",
	    [D_COAL] = "coalesce_ms",
	    [D_CONFIRM] = "confirm_timeout_ms",
	};
	char type[32];
	uint32_t lo = 0, hi = 0;
	int r;

	for (int i = 0; i < D_N; i++)
		fs[F_DRV + i].key = driver_keys[i];

	r = inv_map_match(c, f->val, "fabric", f->line, fs, F_N, NULL);
	if (r < 0)
		return r;
	if (!fs[F_TYPE].present)
		return inv_missing(c, "fabric", f->line, "type",
		                   "infiniband, ethernet, omnipath or slingshot");
	r = inv_fget_string(c, "fabric", &fs[F_TYPE], type, sizeof(type));
	if (r < 0)
		return r;
	if (strcmp(type, "infiniband") == 0)
		fc->type = ISO_FABRIC_INFINIBAND;
	else if (strcmp(type, "ethernet") == 0)
		fc->type = ISO_FABRIC_ETHERNET;
	else if (strcmp(type, "omnipath") == 0)
		fc->type = ISO_FABRIC_OMNIPATH;
	else if (strcmp(type, "slingshot") == 0)
		fc->type = ISO_FABRIC_SLINGSHOT;
	else
		return inv_fail(c, "fabric.type", inv_line(fs[F_TYPE].val, fs[F_TYPE].line),
		                "unknown fabric type '%s' (expected infiniband, ethernet, "
		                "omnipath or slingshot)",
		                type);

	iso_strlcpy(fc->name, DEFAULT_FABRIC_NAME, sizeof(fc->name));
	if (fs[F_NAME].present) {
		r = inv_fget_name(c, "fabric", &fs[F_NAME], fc->name);
		if (r < 0)
			return r;
	}
	r = parse_driver(c, &fs[F_DRV]);
	if (r < 0)
		return r;

	if (fc->type == ISO_FABRIC_SLINGSHOT) {
		/* the NIC enforces the VNIs (CXI services): no SM, no P_Keys,
		 * no VLANs */
		r = vni_fabric(c, fs, SS_VNI_MIN, SS_VNI_MAX, SS_VNI_MAX);
		if (r == 0 && fs[F_VLAN].present)
			r = not_on(c, &fs[F_VLAN], "ethernet");
		return r;
	}
	if (fc->type == ISO_FABRIC_ETHERNET) {
		r = vni_fabric(c, fs, DEFAULT_VNI_MIN, DEFAULT_VNI_MAX, VNI_MAX);
		if (r < 0)
			return r;
		/* RoCE VFs get their tenant's VLAN only when a range is given
		 * (docs/fabric.md "RoCE VFs"); no default: VLAN ids belong to the
		 * site's switches */
		if (fs[F_VLAN].present) {
			r = get_range(c, &fs[F_VLAN], false, VLAN_MAX, &lo, &hi);
			if (r < 0)
				return r;
			fc->vlan_min = (uint16_t)lo;
			fc->vlan_max = (uint16_t)hi;
		}
		return 0;
	}

	if (fs[F_VNI].present)
		return not_on(c, &fs[F_VNI], "ethernet and slingshot");
	if (fs[F_VLAN].present)
		return not_on(c, &fs[F_VLAN], "ethernet");
	if (!fs[F_SM].present)
		return inv_missing(c, "fabric", f->line, "sm_nodes",
		                   "an infiniband or omnipath fabric names its subnet managers");
	r = parse_sm_nodes(c, &fs[F_SM]);
	if (r < 0)
		return r;
	fc->pkey_min = DEFAULT_PKEY_MIN;
	fc->pkey_max = DEFAULT_PKEY_MAX;
	if (fs[F_PKEY].present) {
		r = get_range(c, &fs[F_PKEY], true, 0, &lo, &hi);
		if (r < 0)
			return r;
		fc->pkey_min = (uint16_t)lo;
		fc->pkey_max = (uint16_t)hi;
	}
	if (fs[F_SVC].present)
		return parse_services(c, &fs[F_SVC]);
	return 0;
}

int inv_fabric_check_sm_node(struct inv_ctx *c)
{
	const struct iso_fabric_config *fc = &c->inv->fabric;

	if (!fc->partitions_by_agent || inv_names_find(&c->nodes_ix, fc->sm_node))
		return 0;
	return inv_fail(c, "fabric.sm_node", c->sm_node_line,
	                "no node '%s' in nodes: the SM host's agent acts for a node of the "
	                "inventory (its node-agent token names it)",
	                fc->sm_node);
}

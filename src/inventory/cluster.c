/* cluster.c: the small sections of the inventory: `controller` (how isostackd
 * serves), `pools` and `racks` (with their PDUs). Names land in the indexes
 * of the load context so that nodes can be checked against them. */
#include <errno.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_LISTEN    "127.0.0.1:8470"
#define DEFAULT_PLACEMENT "isostack"

/* HOST:PORT with a DNS name or IPv4 host, or [IPv6]:PORT; port 1..65535. */
static bool listen_valid(const char *s)
{
	const char *colon = strrchr(s, ':');
	const char *port;
	size_t hlen;
	long v = 0;

	if (!colon || colon == s)
		return false;
	hlen = (size_t)(colon - s);
	port = colon + 1;
	if (!port[0] || strlen(port) > 5 || (port[0] == '0'))
		return false;
	for (const char *p = port; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (*p - '0');
	}
	if (v < 1 || v > 65535)
		return false;
	if (s[0] == '[') {
		if (hlen < 3 || s[hlen - 1] != ']')
			return false;
		for (size_t i = 1; i + 1 < hlen; i++)
			if (!strchr("0123456789abcdefABCDEF:.", s[i]))
				return false;
		return true;
	}
	for (size_t i = 0; i < hlen; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-",
		            s[i]))
			return false;
	return true;
}

int inv_parse_controller(struct inv_ctx *c, const struct inv_field *f)
{
	struct iso_controller_config *cc = &c->inv->controller;
	enum { C_LISTEN, C_TLS, C_REMOTE, C_PLACEMENT, C_N };
	struct inv_field fs[C_N] = {
	    [C_LISTEN] = {.key = "listen"},
	    [C_TLS] = {.key = "tls"},
	    [C_REMOTE] = {.key = "allow_remote_http"},
	    [C_PLACEMENT] = {.key = "placement"},
	};
	int r;

	iso_strlcpy(cc->listen, DEFAULT_LISTEN, sizeof(cc->listen));
	iso_strlcpy(cc->placement, DEFAULT_PLACEMENT, sizeof(cc->placement));
	cc->allow_remote_http = false;
	if (!f->present)
		return 0;
	r = inv_map_match(c, f->val, "controller", f->line, fs, C_N, NULL);
	if (r < 0)
		return r;

	if (fs[C_LISTEN].present) {
		r = inv_fget_string(c, "controller", &fs[C_LISTEN], cc->listen, sizeof(cc->listen));
		if (r < 0)
			return r;
		if (!listen_valid(cc->listen))
			return inv_fail(c, "controller.listen",
			                inv_line(fs[C_LISTEN].val, fs[C_LISTEN].line),
			                "'%s' is not HOST:PORT (e.g. 127.0.0.1:8470 or [::1]:8470)",
			                cc->listen);
	}
	if (fs[C_TLS].present) {
		enum { T_CERT, T_KEY, T_N };
		struct inv_field ts[T_N] = {[T_CERT] = {.key = "cert"}, [T_KEY] = {.key = "key"}};
		r = inv_map_match(c, fs[C_TLS].val, "controller.tls", fs[C_TLS].line, ts, T_N,
		                  NULL);
		if (r < 0)
			return r;
		if (!ts[T_CERT].present)
			return inv_missing(c, "controller.tls", fs[C_TLS].line, "cert",
			                   "tls needs both cert and key");
		if (!ts[T_KEY].present)
			return inv_missing(c, "controller.tls", fs[C_TLS].line, "key",
			                   "tls needs both cert and key");
		r = inv_fget_string(c, "controller.tls", &ts[T_CERT], cc->tls_cert,
		                    sizeof(cc->tls_cert));
		if (r < 0)
			return r;
		r = inv_fget_string(c, "controller.tls", &ts[T_KEY], cc->tls_key,
		                    sizeof(cc->tls_key));
		if (r < 0)
			return r;
		if (!cc->tls_cert[0] || !cc->tls_key[0])
			return inv_fail(
			    c, !cc->tls_cert[0] ? "controller.tls.cert" : "controller.tls.key",
			    fs[C_TLS].line, "must be a file path, got an empty string");
	}
	if (fs[C_REMOTE].present) {
		r = inv_fget_bool(c, "controller", &fs[C_REMOTE], &cc->allow_remote_http);
		if (r < 0)
			return r;
	}
	if (fs[C_PLACEMENT].present) {
		char name[ISO_NAME_MAX];
		r = inv_fget_name(c, "controller", &fs[C_PLACEMENT], name);
		if (r < 0)
			return r;
		if (iso_strlcpy(cc->placement, name, sizeof(cc->placement)) < 0)
			return inv_fail(c, "controller.placement", fs[C_PLACEMENT].line,
			                "too long (at most %zu bytes)", sizeof(cc->placement) - 1);
	}
	return 0;
}

int inv_parse_pools(struct inv_ctx *c, const struct inv_field *f)
{
	struct iso_inventory *inv = c->inv;
	struct fy_node *item;
	void *it = NULL;
	int n = 0, i = 0, r;

	r = inv_get_seq(c, f->val, "pools", f->line, 1, INV_MAX_POOLS, &n);
	if (r < 0)
		return r;
	inv->pools = calloc((size_t)n, sizeof(*inv->pools));
	if (!inv->pools)
		return inv_oom(c);
	inv->n_pools = n;
	c->pools_ix.kind = INV_NK_POOL;
	for (i = 0; (item = fy_node_sequence_iterate(f->val, &it)); i++) {
		enum { P_NAME, P_DESC, P_N };
		struct inv_field fs[P_N] = {
		    [P_NAME] = {.key = "name"}, [P_DESC] = {.key = "description"}};
		struct iso_pool *p = &inv->pools[i];
		char path[ISO_ERR_FIELD_MAX];
		int line = inv_line(item, f->line);

		inv_path_index(path, "pools", i);
		r = inv_map_match(c, item, path, line, fs, P_N, NULL);
		if (r < 0)
			return r;
		if (!fs[P_NAME].present)
			return inv_missing(c, path, line, "name", NULL);
		r = inv_fget_name(c, path, &fs[P_NAME], p->name);
		if (r < 0)
			return r;
		if (fs[P_DESC].present) {
			r = inv_fget_string(c, path, &fs[P_DESC], p->description,
			                    sizeof(p->description));
			if (r < 0)
				return r;
		}
		if (inv_names_add(&c->pools_ix, p->name, i, 0, fs[P_NAME].line) < 0)
			return inv_oom(c);
	}
	return inv_names_seal(c, &c->pools_ix, "pool name");
}

static int parse_rack(struct inv_ctx *c, struct fy_node *item, int i, int parent_line)
{
	enum { R_NAME, R_PDUS, R_N };
	struct inv_field fs[R_N] = {[R_NAME] = {.key = "name"}, [R_PDUS] = {.key = "pdus"}};
	struct iso_rack *rack = &c->inv->racks[i];
	char path[ISO_ERR_FIELD_MAX], ppath[ISO_ERR_FIELD_MAX];
	int line = inv_line(item, parent_line);
	struct fy_node *pdu;
	void *it = NULL;
	int n = 0, r;

	inv_path_index(path, "racks", i);
	r = inv_map_match(c, item, path, line, fs, R_N, NULL);
	if (r < 0)
		return r;
	if (!fs[R_NAME].present)
		return inv_missing(c, path, line, "name", NULL);
	r = inv_fget_name(c, path, &fs[R_NAME], rack->name);
	if (r < 0)
		return r;
	if (inv_names_add(&c->racks_ix, rack->name, i, 0, fs[R_NAME].line) < 0)
		return inv_oom(c);
	if (!fs[R_PDUS].present)
		return inv_missing(c, path, line, "pdus", "every rack lists its PDUs");
	inv_path_key(ppath, path, "pdus");
	r = inv_get_seq(c, fs[R_PDUS].val, ppath, fs[R_PDUS].line, 1, INV_MAX_PDUS_PER_RACK, &n);
	if (r < 0)
		return r;
	rack->pdus = calloc((size_t)n, sizeof(*rack->pdus));
	if (!rack->pdus)
		return inv_oom(c);
	rack->n_pdus = n;
	for (int j = 0; (pdu = fy_node_sequence_iterate(fs[R_PDUS].val, &it)); j++) {
		char epath[ISO_ERR_FIELD_MAX];
		int pline = inv_line(pdu, fs[R_PDUS].line);

		inv_path_index(epath, ppath, j);
		r = inv_get_name(c, pdu, epath, pline, rack->pdus[j]);
		if (r < 0)
			return r;
		if (inv_names_add(&c->pdus_ix, rack->pdus[j], i, j, pline) < 0)
			return inv_oom(c);
	}
	return 0;
}

int inv_parse_racks(struct inv_ctx *c, const struct inv_field *f)
{
	struct iso_inventory *inv = c->inv;
	struct fy_node *item;
	void *it = NULL;
	int n = 0, r;

	r = inv_get_seq(c, f->val, "racks", f->line, 1, INV_MAX_RACKS, &n);
	if (r < 0)
		return r;
	inv->racks = calloc((size_t)n, sizeof(*inv->racks));
	if (!inv->racks)
		return inv_oom(c);
	inv->n_racks = n;
	c->racks_ix.kind = INV_NK_RACK;
	c->pdus_ix.kind = INV_NK_PDU;
	for (int i = 0; (item = fy_node_sequence_iterate(f->val, &it)); i++) {
		r = parse_rack(c, item, i, f->line);
		if (r < 0)
			return r;
	}
	r = inv_names_seal(c, &c->racks_ix, "rack name");
	if (r < 0)
		return r;
	return inv_names_seal(c, &c->pdus_ix, "PDU name");
}

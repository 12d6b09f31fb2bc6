/* overlay_guard.c: the nftables guard of the tenant overlay (issue 14). A
 * VXLAN device accepts any packet to port 4789 that carries its VNI, so a
 * forged device elsewhere on the underlay can inject frames into a tenant's
 * bridge. The guard lets in only the (underlay peer, VNI) pairs the
 * controller says hold the tenant, and counts and drops every other VXLAN
 * packet arriving on the underlay device. libnftables (the nft command
 * language in, JSON out for the read-back), one transaction per change, in
 * the namespace given as a path. Debian 12's nft 1.0.6 has no `vxlan vni`
 * keyword: the VNI is the raw match @th,96,24 (UDP header 64 bits, VXLAN
 * flags 32 bits), which it accepts inside a set's concatenation. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <nftables/libnftables.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"
#include "sandbox/overlay_int.h"

#define TABLE "inet isostack"

static void nftp(struct nft_ctx **c)
{
	if (*c)
		nft_ctx_free(*c);
}

static void jsonp(json_t **j)
{
	if (*j)
		json_decref(*j);
}

/* Runs cmd in netns. With json, *out gets the parsed output. -ENOENT when
 * nft says the table does not exist. */
static int nft_run(const char *netns, const char *cmd, bool json, json_t **out,
                   struct iso_error *err)
{
	int saved;
	int r = ovl_ns_enter(netns, &saved, err);
	if (r < 0)
		return r;
	/* Made, used and freed inside the namespace: its netlink socket
	 * belongs to the namespace the thread is in when it opens it. */
	_cleanup_(nftp) struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!nft) {
		ovl_ns_leave(saved);
		return iso_error_set(err, ISO_E_INTERNAL, "guard", "nft_ctx_new failed");
	}
	if (json)
		nft_ctx_output_set_flags(nft, NFT_CTX_OUTPUT_JSON);
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	int rc = nft_run_cmd_from_buffer(nft, cmd);
	const char *eb = nft_ctx_get_error_buffer(nft);
	if (rc != 0) {
		bool missing = eb && strstr(eb, "No such file or directory");
		iso_error_set(err, missing ? ISO_E_NOT_FOUND : ISO_E_INTERNAL, "guard",
		              "nft: %.400s", eb && *eb ? eb : "failed");
		ovl_ns_leave(saved);
		return missing ? -ENOENT : -EIO;
	}
	if (json && out) {
		json_error_t je;
		*out = json_loads(nft_ctx_get_output_buffer(nft), 0, &je);
		if (!*out) {
			ovl_ns_leave(saved);
			return iso_error_set(err, ISO_E_INTERNAL, "guard", "nft JSON: %s", je.text);
		}
	}
	ovl_ns_leave(saved);
	return 0;
}

void iso_overlay_guard_state_clear(struct iso_overlay_guard_state *st)
{
	if (!st)
		return;
	free(st->allowed);
	memset(st, 0, sizeof(*st));
}

static int cmp_allow(const void *a, const void *b)
{
	const struct iso_overlay_allow *x = a, *y = b;
	uint32_t ix = 0, iy = 0;
	iso_parse_ipv4(x->peer, &ix);
	iso_parse_ipv4(y->peer, &iy);
	if (ix != iy)
		return ix < iy ? -1 : 1;
	return x->vni < y->vni ? -1 : x->vni > y->vni;
}

/* One element of the set: {"concat": [ip, vni]}, possibly wrapped in
 * {"elem": {"val": ...}}. */
static int read_elem(json_t *e, struct iso_overlay_allow *a)
{
	json_t *w = json_object_get(e, "elem");
	if (w)
		e = json_object_get(w, "val");
	json_t *c = json_object_get(e, "concat");
	if (!json_is_array(c) || json_array_size(c) != 2)
		return -EBADMSG;
	const char *ip = json_string_value(json_array_get(c, 0));
	json_t *v = json_array_get(c, 1);
	uint32_t h;
	if (!ip || iso_parse_ipv4(ip, &h) < 0 || !json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 0xffffff)
		return -EBADMSG;
	iso_strlcpy(a->peer, ip, sizeof(a->peer));
	a->vni = (uint32_t)json_integer_value(v);
	return 0;
}

/* The value of the `meta iifname == X` match of a rule, or NULL; sets
 * *accept and *drop for the verdict and *counted for the named counter. */
static const char *rule_shape(json_t *expr, bool *accept, bool *drop, bool *counted, bool *uses_set)
{
	const char *dev = NULL;
	*accept = *drop = *counted = *uses_set = false;
	size_t i;
	json_t *x;
	json_array_foreach (expr, i, x) {
		json_t *m = json_object_get(x, "match");
		if (m) {
			json_t *left = json_object_get(m, "left");
			json_t *meta = json_object_get(left, "meta");
			const char *key = json_string_value(json_object_get(meta, "key"));
			if (key && strcmp(key, "iifname") == 0)
				dev = json_string_value(json_object_get(m, "right"));
			const char *right = json_string_value(json_object_get(m, "right"));
			if (right && strcmp(right, "@allowed") == 0)
				*uses_set = true;
		}
		if (json_object_get(x, "accept"))
			*accept = true;
		if (json_object_get(x, "drop"))
			*drop = true;
		const char *cn = json_string_value(json_object_get(x, "counter"));
		if (cn && strcmp(cn, "drops") == 0)
			*counted = true;
	}
	return dev;
}

int iso_overlay_guard_read(const char *netns, struct iso_overlay_guard_state *out,
                           struct iso_error *err)
{
	memset(out, 0, sizeof(*out));
	_cleanup_(jsonp) json_t *doc = NULL;
	int r = nft_run(netns, "list table " TABLE, true, &doc, err);
	if (r == -ENOENT)
		return 0; /* no guard */
	if (r < 0)
		return r;
	json_t *items = json_object_get(doc, "nftables");
	if (!json_is_array(items))
		return iso_error_set(err, ISO_E_INTERNAL, "guard", "nft JSON without nftables");
	struct iso_overlay_guard_state st = {0};
	bool have_set = false, have_chain = false, rule_ok[2] = {false, false};
	const char *devs[2] = {NULL, NULL};
	size_t n_rules = 0, i;
	json_t *it;
	json_array_foreach (items, i, it) {
		json_t *o;
		if ((o = json_object_get(it, "set"))) {
			const char *name = json_string_value(json_object_get(o, "name"));
			if (!name || strcmp(name, "allowed") != 0)
				continue;
			have_set = true;
			json_t *elems = json_object_get(o, "elem");
			size_t n = json_array_size(elems), j;
			free(st.allowed);
			st.allowed = calloc(n ? n : 1, sizeof(*st.allowed));
			if (!st.allowed)
				return iso_error_set(err, ISO_E_INTERNAL, "guard", "out of memory");
			json_t *e;
			json_array_foreach (elems, j, e) {
				if (read_elem(e, &st.allowed[st.n_allowed]) == 0)
					st.n_allowed++;
			}
		} else if ((o = json_object_get(it, "counter"))) {
			const char *name = json_string_value(json_object_get(o, "name"));
			json_t *p = json_object_get(o, "packets");
			if (name && strcmp(name, "drops") == 0 && json_is_integer(p))
				st.drops = (uint64_t)json_integer_value(p);
		} else if ((o = json_object_get(it, "chain"))) {
			const char *name = json_string_value(json_object_get(o, "name"));
			const char *hook = json_string_value(json_object_get(o, "hook"));
			if (name && strcmp(name, "vxlan_guard") == 0 && hook &&
			    strcmp(hook, "input") == 0)
				have_chain = true;
		} else if ((o = json_object_get(it, "rule"))) {
			const char *chain = json_string_value(json_object_get(o, "chain"));
			if (!chain || strcmp(chain, "vxlan_guard") != 0)
				continue;
			bool accept, drop, counted, uses_set;
			const char *dev = rule_shape(json_object_get(o, "expr"), &accept, &drop,
			                             &counted, &uses_set);
			if (n_rules < 2) {
				devs[n_rules] = dev;
				rule_ok[n_rules] = n_rules == 0 ? accept && uses_set && !drop
				                                : drop && counted && !accept;
			}
			n_rules++;
		}
	}
	st.present = have_set && have_chain && n_rules == 2 && rule_ok[0] && rule_ok[1] &&
	             devs[0] && devs[1] && strcmp(devs[0], devs[1]) == 0;
	if (st.present)
		iso_strlcpy(st.underlay_dev, devs[0], sizeof(st.underlay_dev));
	if (st.n_allowed)
		qsort(st.allowed, st.n_allowed, sizeof(*st.allowed), cmp_allow);
	*out = st;
	return 0;
}

/* The nft buffer for want[0..u) (sorted, unique) on dev, applied. */
static int guard_write(const char *netns, const char *dev, const struct iso_overlay_allow *want,
                       size_t u, struct iso_error *err)
{
	/* One buffer is one transaction: the table and its objects made when
	 * missing (the named counter keeps its count), the chain and the set
	 * flushed and filled again; nft applies all of it or none. */
	size_t cap = 1024 + u * 40;
	char *cmd = malloc(cap);
	if (!cmd)
		return iso_error_set(err, ISO_E_INTERNAL, "allowed", "out of memory");
	int len = snprintf(cmd, cap,
	                   "table " TABLE " {\n"
	                   "  counter drops { }\n"
	                   "  set allowed { typeof ip saddr . @th,96,24; }\n"
	                   "  chain vxlan_guard { type filter hook input priority -100; "
	                   "policy accept; }\n"
	                   "}\n"
	                   "flush chain " TABLE " vxlan_guard\n"
	                   "flush set " TABLE " allowed\n"
	                   "add rule " TABLE " vxlan_guard iifname \"%s\" udp dport %d "
	                   "ip saddr . @th,96,24 @allowed accept\n"
	                   "add rule " TABLE " vxlan_guard iifname \"%s\" udp dport %d "
	                   "counter name drops drop\n",
	                   dev, ISO_OVERLAY_PORT, dev, ISO_OVERLAY_PORT);
	if (u) {
		len += snprintf(cmd + len, cap - (size_t)len, "add element " TABLE " allowed { ");
		for (size_t i = 0; i < u; i++)
			len += snprintf(cmd + len, cap - (size_t)len, "%s%s . %" PRIu32,
			                i ? ", " : "", want[i].peer, want[i].vni);
		len += snprintf(cmd + len, cap - (size_t)len, " }\n");
	}
	int r = (size_t)len >= cap
	            ? iso_error_set(err, ISO_E_INTERNAL, "allowed", "command too long")
	            : nft_run(netns, cmd, false, NULL, err);
	free(cmd);
	return r;
}

/* Applies want[0..u) (sorted, unique) unless the kernel holds exactly it. */
static int guard_apply_sorted(const char *netns, const char *dev,
                              const struct iso_overlay_allow *want, size_t u, struct iso_error *err)
{
	struct iso_overlay_guard_state have;
	int r = iso_overlay_guard_read(netns, &have, err);
	if (r < 0)
		return r;
	bool same = have.present && strcmp(have.underlay_dev, dev) == 0 && have.n_allowed == u;
	for (size_t i = 0; same && i < u; i++)
		same = cmp_allow(&have.allowed[i], &want[i]) == 0;
	iso_overlay_guard_state_clear(&have);
	if (same)
		return 0; /* level-triggered: nothing to write */
	return guard_write(netns, dev, want, u, err);
}

int iso_overlay_guard_apply(const char *netns, const char *underlay_dev,
                            const struct iso_overlay_allow *allow, size_t n, struct iso_error *err)
{
	if (!underlay_dev || !*underlay_dev || strlen(underlay_dev) >= ISO_OVERLAY_IFNAME ||
	    strpbrk(underlay_dev, "\"\\ \n/"))
		return iso_error_set(err, ISO_E_INVALID, "underlay_dev", "not an interface name");
	if (n > 65536)
		return iso_error_set(err, ISO_E_INVALID, "allowed", "more than 65536 pairs");
	for (size_t i = 0; i < n; i++) {
		uint32_t h;
		if (iso_parse_ipv4(allow[i].peer, &h) < 0)
			return iso_error_set(err, ISO_E_INVALID, "allowed.peer",
			                     "allowed[%zu].peer: not an IPv4 address", i);
		if (allow[i].vni == 0 || allow[i].vni > 0xffffff)
			return iso_error_set(err, ISO_E_INVALID, "allowed.vni",
			                     "allowed[%zu].vni: must be 1..16777215", i);
	}
	struct iso_overlay_allow *want = calloc(n ? n : 1, sizeof(*want));
	if (!want)
		return iso_error_set(err, ISO_E_INTERNAL, "allowed", "out of memory");
	if (n)
		memcpy(want, allow, n * sizeof(*want));
	qsort(want, n, sizeof(*want), cmp_allow);
	size_t u = 0; /* unique */
	for (size_t i = 0; i < n; i++)
		if (u == 0 || cmp_allow(&want[u - 1], &want[i]) != 0)
			want[u++] = want[i];
	int r = guard_apply_sorted(netns, underlay_dev, want, u, err);
	free(want);
	return r;
}

int iso_overlay_guard_remove(const char *netns, struct iso_error *err)
{
	/* A listing first: a delete is a transaction, and one the kernel
	 * aborts (no table) costs 8-16 ms where the listing costs 0.1 ms;
	 * the common case, a node with no overlay, has no table. */
	int r = nft_run(netns, "list table " TABLE, false, NULL, err);
	if (r == 0)
		r = nft_run(netns, "delete table " TABLE, false, NULL, err);
	if (r == -ENOENT) {
		if (err)
			memset(err, 0, sizeof(*err));
		return 0;
	}
	return r;
}

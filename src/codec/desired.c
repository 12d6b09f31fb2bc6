/* desired.c: a node's desired state (GET /v1/nodes/{node}/desired,
 * docs/agents.md): the controller encodes it from what live allocations and
 * the fabric hold on the node (src/controller/agents.c), the node agent
 * decodes it (src/agent/daemon.c) before it touches any device. The decoder
 * is strict, since the agent acts on what it accepts: a garbled document is
 * refused whole, naming the field, and never half applied. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/internal.h"

/* ---- encode ---- */

static json_t *owner(const struct iso_agent_want *w)
{
	return json_pack("{s:s, s:i}", "allocation", w->allocation, "member", (int)w->member);
}

static json_t *gpu_encode(const struct iso_agent_desired *d, const struct iso_agent_desired_gpu *g)
{
	json_t *inst = json_array(), *whole = json_null();

	for (size_t i = 0; inst && i < d->n_wants; i++) {
		const struct iso_agent_want *w = &d->wants[i];
		if (w->gpu != g->index)
			continue;
		if (strcmp(w->profile, "whole") == 0) {
			json_decref(whole);
			whole = owner(w);
		} else if (json_array_append_new(
		               inst, json_pack("{s:s, s:i, s:i, s:s, s:i}", "profile", w->profile,
		                               "start", w->start, "width", w->width, "allocation",
		                               w->allocation, "member", (int)w->member)) < 0) {
			json_decref(inst);
			inst = NULL;
		}
	}
	if (!inst || !whole) {
		json_decref(inst);
		json_decref(whole);
		return NULL;
	}
	return json_pack("{s:i, s:b, s:o, s:o}", "index", (int)g->index, "mig", g->mig, "instances",
	                 inst, "whole", whole);
}

static json_t *vf_encode(const struct iso_agent_vf_want *v)
{
	char guid[24], pkey[8];
	json_t *members = json_array();

	for (unsigned i = 0; members && i < v->n_members; i++)
		if (json_array_append_new(members, json_pack("{s:s, s:i}", "allocation",
		                                             v->members[i].allocation, "member",
		                                             (int)v->members[i].member)) < 0) {
			json_decref(members);
			members = NULL;
		}
	if (!members)
		return NULL;
	if (v->vlan) /* RoCE: the tenant's VLAN instead of a GUID and P_Key */
		return json_pack("{s:i, s:s, s:s, s:i, s:o}", "index", (int)v->index, "device",
		                 v->device, "tenant", v->tenant, "vlan", (int)v->vlan, "members",
		                 members);
	snprintf(guid, sizeof(guid), "0x%016" PRIx64, v->guid);
	snprintf(pkey, sizeof(pkey), "0x%04x", (unsigned)v->pkey);
	return json_pack("{s:i, s:s, s:s, s:s, s:s, s:o}", "index", (int)v->index, "device",
	                 v->device, "guid", guid, "tenant", v->tenant, "pkey", pkey, "members",
	                 members);
}

json_t *iso_codec_member_want_encode(const struct iso_agent_member_want *m)
{
	json_t *overlay = json_null(), *peers;

	if (m->has_overlay) {
		if (!(peers = json_array()))
			return NULL;
		for (size_t i = 0; i < m->n_peers; i++)
			if (json_array_append_new(peers, json_string(m->peers[i])) < 0) {
				json_decref(peers);
				return NULL;
			}
		if (!(overlay = json_pack("{s:I, s:i, s:o}", "vni", (json_int_t)m->vni,
		                          "node_index", (int)m->node_index, "peers", peers)))
			return NULL;
	}
	json_t *o =
	    json_pack("{s:s, s:i, s:s, s:i, s:I, s:b, s:o}", "allocation", m->allocation, "member",
	              (int)m->member, "tenant", m->tenant, "cpus", (int)m->cpus, "memory_mib",
	              (json_int_t)m->memory_mib, "io_uring", m->io_uring, "overlay", overlay);
	if (o && m->key[0] && json_object_set_new(o, "key", json_string(m->key)) < 0) {
		json_decref(o);
		return NULL;
	}
	if (o && m->has_cxi) {
		json_t *cxi = json_pack("{s:I}", "vni", (json_int_t)m->cxi_vni);
		if (cxi && m->cxi_ident &&
		    (json_object_set_new(cxi, "uid", json_integer(m->cxi_uid)) < 0 ||
		     json_object_set_new(cxi, "gid", json_integer(m->cxi_gid)) < 0)) {
			json_decref(cxi);
			cxi = NULL;
		}
		if (!cxi || json_object_set_new(o, "cxi", cxi) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

json_t *iso_codec_desired_wrap(const char *node, uint64_t generation, uint64_t term, json_t *gpus,
                               json_t *vfs, json_t *members)
{
	json_t *doc =
	    json_pack("{s:s, s:I, s:I, s:O, s:O}", "node", node, "generation",
	              (json_int_t)generation, "term", (json_int_t)term, "gpus", gpus, "vfs", vfs);

	if (doc && members && json_object_set(doc, "members", members) < 0) {
		json_decref(doc);
		return NULL;
	}
	return doc;
}

json_t *iso_codec_desired_encode(const struct iso_agent_desired *d)
{
	json_t *gpus = json_array(), *vfs = json_array(), *members = json_array(), *doc = NULL;
	bool ok = gpus && vfs && members;

	for (size_t i = 0; ok && i < d->n_gpus; i++)
		ok = json_array_append_new(gpus, gpu_encode(d, &d->gpus[i])) == 0;
	for (size_t i = 0; ok && i < d->n_vfs; i++)
		ok = json_array_append_new(vfs, vf_encode(&d->vfs[i])) == 0;
	for (size_t i = 0; ok && i < d->n_members; i++)
		ok = json_array_append_new(members, iso_codec_member_want_encode(&d->members[i])) ==
		     0;
	if (ok)
		doc = iso_codec_desired_wrap(d->node, d->generation, d->term, gpus, vfs, members);
	json_decref(gpus);
	json_decref(vfs);
	json_decref(members);
	return doc;
}

/* ---- decode ---- */

#define FIELD(...) (snprintf(field, sizeof(field), __VA_ARGS__), field)

static int get_uint(const json_t *o, const char *key, const char *field, uint64_t max,
                    uint64_t *out, struct iso_error *err)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "desired state: %s must be an integer 0..%" PRIu64, field,
		                     max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_str(const json_t *o, const char *key, const char *field, char *dst, size_t size,
                   struct iso_error *err)
{
	const char *s = json_string_value(json_object_get(o, key));

	if (!s || !*s || strlen(s) >= size || !iso_text_valid(s))
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "desired state: %s must be a string of 1..%zu characters",
		                     field, size - 1);
	iso_strlcpy(dst, s, size);
	return 0;
}

/* Refuses keys the protocol does not have: a garbled document is not half
 * applied. */
static int only_keys(const json_t *o, const char *at, const char *const *keys,
                     struct iso_error *err)
{
	const char *k;
	const json_t *v;
	char field[ISO_ERR_FIELD_MAX];

	json_object_foreach ((json_t *)o, k, v) {
		bool known = false;
		for (size_t i = 0; keys[i]; i++)
			known = known || strcmp(k, keys[i]) == 0;
		if (!known)
			return iso_error_set(err, ISO_E_INVALID, *at ? FIELD("%s.%s", at, k) : k,
			                     "desired state: unknown key \"%s\"", k);
	}
	return 0;
}

static int want_append(struct iso_agent_desired *d, const struct iso_agent_want *w)
{
	struct iso_agent_want *v = realloc(d->wants, (d->n_wants + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	d->wants = v;
	d->wants[d->n_wants++] = *w;
	return 0;
}

static int parse_owner(const json_t *o, const char *at, struct iso_agent_want *w,
                       struct iso_error *err)
{
	static const char *const keys[] = {"profile",    "start",  "width",
	                                   "allocation", "member", NULL};
	char field[ISO_ERR_FIELD_MAX];
	uint64_t member = 0;
	int r;

	if ((r = only_keys(o, at, keys, err)) < 0 ||
	    (r = get_str(o, "allocation", FIELD("%s.allocation", at), w->allocation,
	                 sizeof(w->allocation), err)) < 0 ||
	    (r = get_uint(o, "member", FIELD("%s.member", at), 1023, &member, err)) < 0)
		return r;
	w->member = (unsigned)member;
	return 0;
}

static int parse_gpu(const json_t *o, size_t i, struct iso_agent_desired *d, struct iso_error *err)
{
	static const char *const keys[] = {"index", "mig", "instances", "whole", NULL};
	char field[ISO_ERR_FIELD_MAX], at[64];
	const json_t *insts = json_object_get(o, "instances"), *whole = json_object_get(o, "whole");
	const json_t *mig = json_object_get(o, "mig");
	uint64_t index = 0;
	size_t k;
	const json_t *v;
	int r;

	snprintf(at, sizeof(at), "gpus[%zu]", i);
	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, at, "desired state: %s must be an object",
		                     at);
	if ((r = only_keys(o, at, keys, err)) < 0 ||
	    (r = get_uint(o, "index", FIELD("%s.index", at), ISO_AGENT_MAX_GPUS - 1, &index, err)) <
	        0)
		return r;
	for (size_t j = 0; j < d->n_gpus; j++)
		if (d->gpus[j].index == index)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.index", at),
			                     "desired state: GPU %" PRIu64 " listed twice", index);
	if (!json_is_boolean(mig))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.mig", at),
		                     "desired state: %s.mig must be a boolean", at);
	d->gpus[d->n_gpus].index = (unsigned)index;
	d->gpus[d->n_gpus].mig = json_is_true(mig);
	d->n_gpus++;
	if (!json_is_array(insts))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.instances", at),
		                     "desired state: %s.instances must be an array", at);
	json_array_foreach (insts, k, v) {
		struct iso_agent_want w = {.gpu = (unsigned)index};
		char iat[96];
		uint64_t start = 0, width = 0;

		snprintf(iat, sizeof(iat), "%s.instances[%zu]", at, k);
		if (!json_is_object(v))
			return iso_error_set(err, ISO_E_INVALID, iat,
			                     "desired state: %s must be an object", iat);
		if ((r = get_str(v, "profile", FIELD("%s.profile", iat), w.profile,
		                 sizeof(w.profile), err)) < 0 ||
		    (r = get_uint(v, "start", FIELD("%s.start", iat), 7, &start, err)) < 0 ||
		    (r = get_uint(v, "width", FIELD("%s.width", iat), 8, &width, err)) < 0 ||
		    (r = parse_owner(v, iat, &w, err)) < 0)
			return r;
		if (strcmp(w.profile, "whole") == 0 || width == 0)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.profile", iat),
			                     "desired state: not a MIG instance");
		/* as the controller writes it: the drivers find a profile in
		 * any case, but what they report is matched by this spelling */
		if (w.profile[strspn(w.profile, "abcdefghijklmnopqrstuvwxyz0123456789.+")])
			return iso_error_set(
			    err, ISO_E_INVALID, FIELD("%s.profile", iat),
			    "desired state: %s: a MIG profile is lowercase letters, "
			    "digits, '.' and '+'",
			    field);
		w.start = (int)start;
		w.width = (int)width;
		for (size_t j = 0; j < d->n_wants; j++)
			if (d->wants[j].gpu == w.gpu && d->wants[j].start == w.start)
				return iso_error_set(err, ISO_E_INVALID, FIELD("%s.start", iat),
				                     "desired state: two instances start at %d",
				                     w.start);
		if (want_append(d, &w) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	if (!json_is_null(whole)) {
		struct iso_agent_want w = {.gpu = (unsigned)index, .profile = "whole"};
		char wat[80];

		snprintf(wat, sizeof(wat), "%s.whole", at);
		if (!json_is_object(whole))
			return iso_error_set(err, ISO_E_INVALID, wat,
			                     "desired state: %s must be an object or null", wat);
		if ((r = parse_owner(whole, wat, &w, err)) < 0)
			return r;
		if (json_array_size(insts) > 0)
			return iso_error_set(err, ISO_E_INVALID, wat,
			                     "desired state: a GPU held whole has no instances");
		if (want_append(d, &w) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	return 0;
}

/* One entry of "vfs": {"index","device","guid","tenant","pkey","members"},
 * or on RoCE {"index","device","tenant","vlan","members"} (docs/agents.md).
 * The GUID's validity (not zero, not all-ones) is the VF driver's to refuse,
 * per VF, so that one bad entry does not stop the rest. */
static int parse_vf(const json_t *o, size_t i, struct iso_agent_desired *d, struct iso_error *err)
{
	static const char *const keys[] = {"index", "device", "guid",    "tenant",
	                                   "pkey",  "vlan",   "members", NULL};
	static const char *const roce_keys[] = {"index", "device",  "tenant",
	                                        "vlan",  "members", NULL};
	static const char *const member_keys[] = {"allocation", "member", NULL};
	char field[ISO_ERR_FIELD_MAX], at[32], text[24];
	struct iso_agent_vf_want *w = &d->vfs[d->n_vfs];
	const json_t *members = json_object_get(o, "members"), *m;
	uint64_t index = 0, pkey = 0, vlan = 0;
	bool roce = json_is_object(o) && json_object_get(o, "vlan");
	size_t k;
	int r;

	snprintf(at, sizeof(at), "vfs[%zu]", i);
	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, at, "desired state: %s must be an object",
		                     at);
	memset(w, 0, sizeof(*w));
	d->n_vfs++; /* counted now, so that clear frees its members after a refusal */
	if ((r = only_keys(o, at, roce ? roce_keys : keys, err)) < 0 ||
	    (r = get_uint(o, "index", FIELD("%s.index", at), ISO_AGENT_VF_MAX - 1, &index, err)) <
	        0 ||
	    (r = get_str(o, "device", FIELD("%s.device", at), w->device, sizeof(w->device), err)) <
	        0 ||
	    (!roce &&
	     (r = get_str(o, "guid", FIELD("%s.guid", at), text, sizeof(text), err)) < 0) ||
	    (r = get_str(o, "tenant", FIELD("%s.tenant", at), w->tenant, sizeof(w->tenant), err)) <
	        0)
		return r;
	if (!iso_name_valid(w->device) || strchr(w->device, '-'))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.device", at),
		                     "desired state: %s is not a device name", field);
	if (roce) { /* a RoCE VF: its tenant's VLAN, no GUID, no P_Key */
		if ((r = get_uint(o, "vlan", FIELD("%s.vlan", at), ISO_AGENT_VLAN_MAX, &vlan,
		                  err)) < 0)
			return r;
		if (vlan == 0)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.vlan", at),
			                     "desired state: %s must be a VLAN id 1-%u", field,
			                     ISO_AGENT_VLAN_MAX);
		w->vlan = (uint16_t)vlan;
	} else if (iso_parse_guid(text, &w->guid) < 0 || strlen(text) != 18)
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.guid", at),
		                     "desired state: %s must be 0x and 16 hex digits", field);
	if (!roce && (r = get_str(o, "pkey", FIELD("%s.pkey", at), text, sizeof(text), err)) < 0)
		return r;
	if (!roce) {
		char *end;
		errno = 0;
		pkey = strtoull(text, &end, 16);
		if (strncmp(text, "0x", 2) != 0 || strlen(text) != 6 || errno || *end ||
		    !(pkey & 0x8000) || (pkey & 0x7fff) == 0 || (pkey & 0x7fff) == 0x7fff)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.pkey", at),
			                     "desired state: %s must be a full-membership P_Key "
			                     "0x8001..0xfffe",
			                     field);
	}
	w->pkey = (uint16_t)pkey;
	w->index = (unsigned)index;
	if (!json_is_array(members) || json_array_size(members) > 4096)
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.members", at),
		                     "desired state: %s must be an array of at most 4096 members",
		                     field);
	if (json_array_size(members) > 0 &&
	    !(w->members = calloc(json_array_size(members), sizeof(*w->members))))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	json_array_foreach (members, k, m) {
		char mat[64];
		char *alloc = w->members[k].allocation;
		uint64_t member = 0;

		snprintf(mat, sizeof(mat), "%s.members[%zu]", at, k);
		if (!json_is_object(m))
			return iso_error_set(err, ISO_E_INVALID, mat,
			                     "desired state: %s must be an object", mat);
		if ((r = only_keys(m, mat, member_keys, err)) < 0 ||
		    (r = get_str(m, "allocation", FIELD("%s.allocation", mat), alloc,
		                 sizeof(w->members[k].allocation), err)) < 0 ||
		    (r = get_uint(m, "member", FIELD("%s.member", mat), ISO_CODEC_MEMBER_MAX,
		                  &member, err)) < 0)
			return r;
		w->members[k].member = (unsigned)member;
		w->n_members = (unsigned)k + 1;
	}
	for (size_t j = 0; j + 1 < d->n_vfs; j++)
		if (d->vfs[j].index == w->index && strcmp(d->vfs[j].device, w->device) == 0)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.index", at),
			                     "desired state: VF %u of %s listed twice", w->index,
			                     w->device);
	return 0;
}

/* "overlay" of a member: {"vni","node_index","peers"}, or null. */
static int parse_overlay(const json_t *o, const char *at, struct iso_agent_member_want *w,
                         struct iso_error *err)
{
	static const char *const keys[] = {"vni", "node_index", "peers", NULL};
	char field[ISO_ERR_FIELD_MAX];
	const json_t *peers = json_object_get(o, "peers"), *p;
	uint64_t vni = 0, node_index = 0;
	size_t k;
	int r;

	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, at,
		                     "desired state: %s must be an object or null", at);
	if ((r = only_keys(o, at, keys, err)) < 0 ||
	    (r = get_uint(o, "vni", FIELD("%s.vni", at), ISO_VNI_MAX, &vni, err)) < 0 ||
	    (r = get_uint(o, "node_index", FIELD("%s.node_index", at), 65535, &node_index, err)) <
	        0)
		return r;
	if (vni == 0)
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.vni", at),
		                     "desired state: %s must be 1..%u", field, ISO_VNI_MAX);
	if (!json_is_array(peers) || json_array_size(peers) > ISO_AGENT_PEERS_MAX)
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.peers", at),
		                     "desired state: %s must be an array of at most %d addresses",
		                     field, ISO_AGENT_PEERS_MAX);
	w->has_overlay = true;
	w->vni = (uint32_t)vni;
	w->node_index = (unsigned)node_index;
	if (json_array_size(peers) > 0 &&
	    !(w->peers = calloc(json_array_size(peers), sizeof(*w->peers))))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	json_array_foreach (peers, k, p) {
		const char *ip = json_string_value(p);
		uint32_t addr;

		if (!ip || strlen(ip) >= sizeof(w->peers[0]) || iso_parse_ipv4(ip, &addr) < 0)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.peers[%zu]", at, k),
			                     "desired state: %s must be an IPv4 address", field);
		if (k > 0 && strcmp(w->peers[k - 1], ip) >= 0)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.peers[%zu]", at, k),
			                     "desired state: %s: peers are sorted and unique",
			                     field);
		iso_strlcpy(w->peers[k], ip, sizeof(w->peers[k]));
		w->n_peers = k + 1;
	}
	return 0;
}

/* "cxi" of a member: {"vni"[,"uid","gid"]} (a Slingshot fabric). uid and
 * gid come together; 0 (root) and 4294967295 ((uid_t)-1) are refused: a
 * service that admits root admits every root process of every tenant. */
#define CXI_ID_MAX 4294967294u
static int parse_cxi(const json_t *o, const char *at, struct iso_agent_member_want *w,
                     struct iso_error *err)
{
	static const char *const keys[] = {"vni", "uid", "gid", NULL};
	char field[ISO_ERR_FIELD_MAX];
	bool has_uid = json_object_get(o, "uid") && !json_is_null(json_object_get(o, "uid"));
	bool has_gid = json_object_get(o, "gid") && !json_is_null(json_object_get(o, "gid"));
	uint64_t vni = 0, uid = 0, gid = 0;
	int r;

	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, at,
		                     "desired state: %s must be an object or null", at);
	if ((r = only_keys(o, at, keys, err)) < 0 ||
	    (r = get_uint(o, "vni", FIELD("%s.vni", at), ISO_CXI_VNI_MAX, &vni, err)) < 0)
		return r;
	if (vni == 0)
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.vni", at),
		                     "desired state: %s must be 1..%u", field, ISO_CXI_VNI_MAX);
	if (has_uid != has_gid)
		return iso_error_set(err, ISO_E_INVALID,
		                     FIELD("%s.%s", at, has_uid ? "gid" : "uid"),
		                     "desired state: %s: uid and gid come together", field);
	if (has_uid && ((r = get_uint(o, "uid", FIELD("%s.uid", at), CXI_ID_MAX, &uid, err)) < 0 ||
	                (r = get_uint(o, "gid", FIELD("%s.gid", at), CXI_ID_MAX, &gid, err)) < 0))
		return r;
	if (has_uid && (uid == 0 || gid == 0))
		return iso_error_set(
		    err, ISO_E_INVALID, FIELD("%s.%s", at, uid == 0 ? "uid" : "gid"),
		    "desired state: %s must be 1..%u (never root)", field, CXI_ID_MAX);
	w->has_cxi = true;
	w->cxi_vni = (uint32_t)vni;
	w->cxi_ident = has_uid;
	w->cxi_uid = (uint32_t)uid;
	w->cxi_gid = (uint32_t)gid;
	return 0;
}

/* One entry of "members": {"allocation","member","tenant"[,"key"],"cpus",
 * "memory_mib","io_uring","overlay"[,"cxi"]} (docs/agents.md). */
static int parse_member(const json_t *o, size_t i, struct iso_agent_desired *d,
                        struct iso_error *err)
{
	static const char *const keys[] = {"allocation", "member",   "tenant",  "key", "cpus",
	                                   "memory_mib", "io_uring", "overlay", "cxi", NULL};
	char field[ISO_ERR_FIELD_MAX], at[32], oat[48];
	struct iso_agent_member_want *w = &d->members[d->n_members];
	const json_t *io_uring = json_object_get(o, "io_uring"), *overlay;
	uint64_t member = 0, cpus = 0;
	int r;

	snprintf(at, sizeof(at), "members[%zu]", i);
	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, at, "desired state: %s must be an object",
		                     at);
	memset(w, 0, sizeof(*w));
	d->n_members++; /* counted now, so that clear frees its peers after a refusal */
	if ((r = only_keys(o, at, keys, err)) < 0 ||
	    (r = get_str(o, "allocation", FIELD("%s.allocation", at), w->allocation,
	                 sizeof(w->allocation), err)) < 0)
		return r;
	if (!cd_alloc_id_valid(w->allocation))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.allocation", at),
		                     "desired state: %s: not an allocation id (a- and 16 hex "
		                     "digits)",
		                     field);
	if ((r = get_uint(o, "member", FIELD("%s.member", at), ISO_CODEC_MEMBER_MAX, &member,
	                  err)) < 0 ||
	    (r = get_str(o, "tenant", FIELD("%s.tenant", at), w->tenant, sizeof(w->tenant), err)) <
	        0)
		return r;
	if (!iso_name_valid(w->tenant))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.tenant", at),
		                     "desired state: %s is not a tenant name", field);
	/* "key" is optional: absent when the allocation has none */
	if (json_object_get(o, "key")) {
		const char *key = json_string_value(json_object_get(o, "key"));
		if (!key || !iso_idem_key_valid(key))
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.key", at),
			                     "desired state: %s must be 1-128 characters of "
			                     "[A-Za-z0-9._:-]",
			                     field);
		iso_strlcpy(w->key, key, sizeof(w->key));
	}
	if ((r = get_uint(o, "cpus", FIELD("%s.cpus", at), 65536, &cpus, err)) < 0 ||
	    (r = get_uint(o, "memory_mib", FIELD("%s.memory_mib", at), UINT64_C(1) << 40,
	                  &w->memory_mib, err)) < 0)
		return r;
	if (!json_is_boolean(io_uring))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.io_uring", at),
		                     "desired state: %s must be a boolean", field);
	w->member = (unsigned)member;
	w->cpus = (unsigned)cpus;
	w->io_uring = json_is_true(io_uring);
	for (size_t j = 0; j + 1 < d->n_members; j++)
		if (d->members[j].member == w->member &&
		    strcmp(d->members[j].allocation, w->allocation) == 0)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.member", at),
			                     "desired state: member %u of %s listed twice",
			                     w->member, w->allocation);
	/* "overlay" is required (null off an Ethernet fabric): a member that
	 * lost its overlay in transit is refused, not run without one */
	if (!(overlay = json_object_get(o, "overlay")))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.overlay", at),
		                     "desired state: %s is required (null when none)", field);
	snprintf(oat, sizeof(oat), "%s.overlay", at);
	if (!json_is_null(overlay) && (r = parse_overlay(overlay, oat, w, err)) < 0)
		return r;
	/* "cxi" is optional (absent off a Slingshot fabric): a member that
	 * lost it gets no CXI service, so it cannot use the network: closed */
	snprintf(oat, sizeof(oat), "%s.cxi", at);
	if (json_object_get(o, "cxi") && !json_is_null(json_object_get(o, "cxi")) &&
	    (r = parse_cxi(json_object_get(o, "cxi"), oat, w, err)) < 0)
		return r;
	return 0;
}

void iso_codec_desired_clear(struct iso_agent_desired *d)
{
	for (size_t i = 0; d->members && i < d->n_members; i++)
		free(d->members[i].peers);
	free(d->members);
	for (size_t i = 0; d->vfs && i < d->n_vfs; i++)
		free(d->vfs[i].members);
	free(d->vfs);
	free(d->wants);
	memset(d, 0, sizeof(*d));
}

int iso_codec_desired_decode(const json_t *doc, const char *node, struct iso_agent_desired *out,
                             struct iso_error *err)
{
	static const char *const keys[] = {"node", "generation", "term", "gpus",
	                                   "vfs",  "members",    NULL};
	const json_t *gpus = json_object_get(doc, "gpus"), *v;
	const json_t *members = json_object_get(doc, "members");
	size_t i;
	int r;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(doc))
		return iso_error_set(err, ISO_E_INVALID, "", "desired state: not a JSON object");
	if ((r = only_keys(doc, "", keys, err)) < 0 ||
	    (r = get_str(doc, "node", "node", out->node, sizeof(out->node), err)) < 0 ||
	    (r = get_uint(doc, "generation", "generation", INT64_MAX, &out->generation, err)) < 0 ||
	    (r = get_uint(doc, "term", "term", INT64_MAX, &out->term, err)) < 0)
		goto fail;
	if (strcmp(out->node, node) != 0) {
		r = iso_error_set(err, ISO_E_INVALID, "node",
		                  "desired state: for node \"%s\", expected \"%s\"", out->node,
		                  node);
		goto fail;
	}
	if (!json_is_array(gpus) || json_array_size(gpus) > ISO_AGENT_MAX_GPUS) {
		r = iso_error_set(err, ISO_E_INVALID, "gpus",
		                  "desired state: gpus must be an array of at most %d",
		                  ISO_AGENT_MAX_GPUS);
		goto fail;
	}
	if (!json_is_array(json_object_get(doc, "vfs")) ||
	    json_array_size(json_object_get(doc, "vfs")) > ISO_AGENT_VF_MAX) {
		r = iso_error_set(err, ISO_E_INVALID, "vfs",
		                  "desired state: vfs must be an array of at most %d",
		                  ISO_AGENT_VF_MAX);
		goto fail;
	}
	json_array_foreach (gpus, i, v)
		if ((r = parse_gpu(v, i, out, err)) < 0)
			goto fail;
	if (json_array_size(json_object_get(doc, "vfs")) > 0 &&
	    !(out->vfs = calloc(json_array_size(json_object_get(doc, "vfs")), sizeof(*out->vfs)))) {
		r = iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
		goto fail;
	}
	json_array_foreach (json_object_get(doc, "vfs"), i, v)
		if ((r = parse_vf(v, i, out, err)) < 0)
			goto fail;
	/* "members" came with issue 14: absent is none */
	if (members &&
	    (!json_is_array(members) || json_array_size(members) > ISO_AGENT_MEMBERS_MAX)) {
		r = iso_error_set(err, ISO_E_INVALID, "members",
		                  "desired state: members must be an array of at most %d",
		                  ISO_AGENT_MEMBERS_MAX);
		goto fail;
	}
	if (json_array_size(members) > 0 &&
	    !(out->members = calloc(json_array_size(members), sizeof(*out->members)))) {
		r = iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
		goto fail;
	}
	json_array_foreach (members, i, v)
		if ((r = parse_member(v, i, out, err)) < 0)
			goto fail;
	return 0;
fail:
	iso_codec_desired_clear(out);
	return r;
}

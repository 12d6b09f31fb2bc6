/* status.c: the node agent's status report (PUT /v1/nodes/{node}/status,
 * docs/agents.md "Status"): the agent encodes it from what its devices show
 * after a tick (src/agent/reconcile.c, the VFs in src/agent/vf.c), the API
 * decodes it (src/api/handlers_agents.c) before the controller compares it
 * with the inventory. The report is also the agent's heartbeat, so a
 * refusal names the field: an agent that is refused is soon unreachable. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/internal.h"

/* ---- encode ---- */

void iso_codec_reason_copy(char *out, const char *reason)
{
	size_t n = strlen(reason);

	if (n > ISO_AGENT_REASON_MAX - 1)
		n = iso_utf8_prefix(reason, ISO_AGENT_REASON_MAX - 1);
	memcpy(out, reason, n);
	out[n] = '\0';
}

static json_t *gpu_encode(const struct iso_agent_gpu *g)
{
	return json_pack("{s:i, s:s, s:s, s:s}", "index", g->index, "model", g->model, "uuid",
	                 g->uuid, "mig_mode", g->mig ? "enabled" : "disabled");
}

static json_t *instance_encode(const struct iso_agent_instance *in)
{
	return json_pack("{s:i, s:i, s:s, s:s, s:s, s:i, s:b, s:s}", "gpu", in->gpu, "start",
	                 in->start, "profile", in->profile, "uuid", in->uuid, "allocation",
	                 in->allocation, "member", in->member, "ready", in->ready, "reason",
	                 in->reason);
}

static json_t *condition_encode(const struct iso_agent_condition *c)
{
	return json_pack("{s:s, s:i, s:b, s:b}", "type", c->type, "gpu", c->gpu, "want", c->want,
	                 "have", c->have);
}

json_t *iso_codec_status_vf_encode(const struct iso_agent_vf *v)
{
	char hex[24] = "";

	if (v->has_guid)
		snprintf(hex, sizeof(hex), "0x%016" PRIx64, v->guid);
	if (v->has_vlan) /* RoCE: the VLAN and spoof check read back instead of a GUID */
		return json_pack("{s:i, s:s, s:i, s:b, s:b, s:s}", "index", v->index, "netdev",
		                 v->netdev, "vlan", (int)v->vlan, "spoofchk", v->spoofchk, "ready",
		                 v->ready, "reason", v->reason);
	return json_pack("{s:i, s:s, s:s, s:b, s:s}", "index", v->index, "netdev", v->netdev,
	                 "guid", hex, "ready", v->ready, "reason", v->reason);
}

json_t *iso_codec_status_sandbox_encode(const struct iso_agent_sandbox *sb)
{
	return json_pack("{s:s, s:i, s:b, s:s, s:s, s:s}", "allocation", sb->allocation, "member",
	                 sb->member, "ready", sb->ready, "cgroup", sb->cgroup, "cpus", sb->cpus,
	                 "reason", sb->reason);
}

json_t *iso_codec_status_overlay_encode(const struct iso_agent_overlay *ov)
{
	json_t *allowed = json_array(), *tenants = json_array();
	bool ok = allowed && tenants;

	for (int i = 0; ok && i < ov->n_allowed; i++)
		ok = json_array_append_new(allowed,
		                           json_pack("{s:s, s:I}", "peer", ov->allowed[i].peer,
		                                     "vni", (json_int_t)ov->allowed[i].vni)) == 0;
	for (int i = 0; ok && i < ov->n_tenants; i++) {
		const struct iso_agent_overlay_tenant *t = &ov->tenants[i];
		json_t *members = json_array();

		for (int k = 0; members && k < t->n_members; k++) {
			const struct iso_agent_overlay_member *m = &t->members[k];
			if (json_array_append_new(
			        members, json_pack("{s:s, s:i, s:s, s:s}", "allocation",
			                           m->allocation, "member", m->member, "ifname",
			                           m->ifname, "address", m->address)) < 0) {
				json_decref(members);
				members = NULL;
			}
		}
		ok = members && json_array_append_new(
		                    tenants, json_pack("{s:I, s:s, s:s, s:o}", "vni",
		                                       (json_int_t)t->vni, "bridge", t->bridge,
		                                       "vxlan", t->vxlan, "members", members)) == 0;
	}
	if (!ok) {
		json_decref(allowed);
		json_decref(tenants);
		return NULL;
	}
	return json_pack("{s:b, s:I, s:o, s:o}", "guard", ov->guard, "drops", (json_int_t)ov->drops,
	                 "allowed", allowed, "tenants", tenants);
}

json_t *iso_codec_status_cxi_encode(const struct iso_agent_cxi_report *cx)
{
	json_t *services = json_array();
	bool ok = services != NULL;

	for (int i = 0; ok && i < cx->n_services; i++) {
		const struct iso_cxi_service *s = &cx->services[i];
		json_t *vnis = json_array(), *members = json_array();

		ok = vnis && members;
		for (int k = 0; ok && k < s->n_vnis; k++)
			ok = json_array_append_new(vnis, json_integer(s->vnis[k])) == 0;
		for (int k = 0; ok && k < s->n_members; k++)
			ok = json_array_append_new(
			         members,
			         json_pack("{s:s, s:I}", "type",
			                   s->members[k].type == ISO_CXI_MEMBER_UID ? "uid" : "gid",
			                   "id", (json_int_t)s->members[k].id)) == 0;
		if (!ok) {
			json_decref(vnis);
			json_decref(members);
			break;
		}
		ok = json_array_append_new(
		         services, json_pack("{s:I, s:b, s:b, s:b, s:b, s:o, s:o}", "svc_id",
		                             (json_int_t)s->svc_id, "enabled", s->enabled, "system",
		                             s->system, "restricted_members", s->restricted_members,
		                             "restricted_vnis", s->restricted_vnis, "vnis", vnis,
		                             "members", members)) == 0;
	}
	if (!ok) {
		json_decref(services);
		return NULL;
	}
	return json_pack("{s:s, s:o}", "device", cx->device, "services", services);
}

/* Sets obj[key] to the array of what each of the n items encodes to;
 * false when out of memory (the caller frees obj). */
typedef json_t *(*item_encode_fn)(const void *item);

static bool append_all(json_t *obj, const char *key, const void *items, int n, size_t size,
                       item_encode_fn encode)
{
	json_t *arr = json_array();

	if (!arr || json_object_set_new(obj, key, arr) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (json_array_append_new(arr, encode((const char *)items + (size_t)i * size)) < 0)
			return false;
	return true;
}

static json_t *gpu_item(const void *item)
{
	return gpu_encode(item);
}
static json_t *instance_item(const void *item)
{
	return instance_encode(item);
}
static json_t *condition_item(const void *item)
{
	return condition_encode(item);
}
static json_t *vf_item(const void *item)
{
	return iso_codec_status_vf_encode(item);
}
static json_t *sandbox_item(const void *item)
{
	return iso_codec_status_sandbox_encode(item);
}
json_t *iso_codec_status_cxi_member_encode(const struct iso_agent_cxi_member_status *m)
{
	return json_pack("{s:s, s:i, s:I, s:I, s:b, s:s}", "allocation", m->allocation, "member",
	                 m->member, "vni", (json_int_t)m->vni, "svc_id", (json_int_t)m->svc_id,
	                 "ready", m->ready, "reason", m->reason);
}
static json_t *cxi_member_item(const void *item)
{
	return iso_codec_status_cxi_member_encode(item);
}

json_t *iso_codec_status_encode(const struct iso_agent_status *st, bool with_vfs)
{
	json_t *o =
	    json_pack("{s:I, s:s}", "term_seen", (json_int_t)st->term_seen, "version", st->version);

	if (!o || !append_all(o, "gpus", st->gpus, st->n_gpus, sizeof(*st->gpus), gpu_item) ||
	    !append_all(o, "instances", st->instances, st->n_instances, sizeof(*st->instances),
	                instance_item) ||
	    !append_all(o, "conditions", st->conditions, st->n_conditions, sizeof(*st->conditions),
	                condition_item) ||
	    (with_vfs && !append_all(o, "vfs", st->vfs, st->n_vfs, sizeof(*st->vfs), vf_item)) ||
	    json_object_set_new(o, "sandbox_mode", json_string(st->sandbox_real ? "real" : "off")) <
	        0 ||
	    !append_all(o, "sandboxes", st->sandboxes, st->n_sandboxes, sizeof(*st->sandboxes),
	                sandbox_item) ||
	    (st->has_overlay &&
	     json_object_set_new(o, "overlay", iso_codec_status_overlay_encode(&st->overlay)) <
	         0) ||
	    (st->has_cxi &&
	     json_object_set_new(o, "cxi", iso_codec_status_cxi_encode(&st->cxi)) < 0) ||
	    (st->n_cxi_members > 0 &&
	     !append_all(o, "cxi_members", st->cxi_members, st->n_cxi_members,
	                 sizeof(*st->cxi_members), cxi_member_item))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- decode ---- */

/* Decodes one object of an array into its item (decode_all). */
typedef int (*item_decode_fn)(json_t *o, const char *prefix, void *item, struct iso_error *err);
static int decode_all(json_t *arr, const char *key, size_t size, item_decode_fn decode,
                      void **items, int *n, struct iso_error *err);

static int gpu_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_gpu *g = item;
	static const char *const keys[] = {"index", "model", "uuid", "mig_mode", NULL};
	const char *mode = NULL;
	char field[ISO_ERR_FIELD_MAX];
	int64_t index = 0;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    iso_json_get_int(o, "index", prefix, true, 0, ISO_AGENT_MAX_GPUS - 1, &index, err) <
	        0 ||
	    cd_get_ascii(o, "model", prefix, true, 1, 96, g->model, sizeof(g->model), err) < 0 ||
	    cd_get_ascii(o, "uuid", prefix, true, 1, 96, g->uuid, sizeof(g->uuid), err) < 0 ||
	    iso_json_get_string(o, "mig_mode", prefix, true, &mode, err) < 0)
		return -EINVAL;
	g->index = (int)index;
	if (strcmp(mode, "enabled") != 0 && strcmp(mode, "disabled") != 0) {
		iso_json_field(field, sizeof(field), prefix, "mig_mode");
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be enabled or disabled",
		                     field);
	}
	g->mig = strcmp(mode, "enabled") == 0;
	return 0;
}

static int instance_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_instance *in = item;
	static const char *const keys[] = {"gpu",    "start", "profile", "uuid", "allocation",
	                                   "member", "ready", "reason",  NULL};
	int64_t gpu = 0, start = 0, member = 0;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    iso_json_get_int(o, "gpu", prefix, true, 0, ISO_AGENT_MAX_GPUS - 1, &gpu, err) < 0 ||
	    iso_json_get_int(o, "start", prefix, true, 0, 7, &start, err) < 0 ||
	    cd_get_ascii(o, "profile", prefix, true, 1, sizeof(in->profile) - 1, in->profile,
	                 sizeof(in->profile), err) < 0 ||
	    cd_get_ascii(o, "uuid", prefix, false, 0, 96, in->uuid, sizeof(in->uuid), err) < 0 ||
	    cd_get_alloc_id(o, prefix, in->allocation, err) < 0 ||
	    iso_json_get_int(o, "member", prefix, true, 0, ISO_CODEC_MEMBER_MAX, &member, err) < 0)
		return -EINVAL;
	if (iso_json_get_bool(o, "ready", prefix, true, &in->ready, err) < 0 ||
	    cd_get_reason(o, prefix, in->reason, err) < 0)
		return -EINVAL;
	in->gpu = (int)gpu;
	in->start = (int)start;
	in->member = (int)member;
	return 0;
}

/* One VF as read back: index, netdev (a Linux interface name or ""), guid
 * ("0x" and 16 hex digits, or "" when it could not be read), ready
 * (required) and reason; a RoCE VF has vlan (0-4094, 0: none) and spoofchk
 * (both or neither) and no GUID. */
static int vf_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_vf *v = item;
	static const char *const keys[] = {"index",    "netdev", "guid",   "vlan",
	                                   "spoofchk", "ready",  "reason", NULL};
	char field[ISO_ERR_FIELD_MAX], guid[24] = "";
	int64_t index = 0, vlan = 0;

	v->has_vlan = json_object_get(o, "vlan") != NULL;
	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    (v->has_vlan &&
	     (iso_json_get_int(o, "vlan", prefix, true, 0, ISO_AGENT_VLAN_MAX, &vlan, err) < 0 ||
	      iso_json_get_bool(o, "spoofchk", prefix, true, &v->spoofchk, err) < 0)) ||
	    iso_json_get_int(o, "index", prefix, true, 0, ISO_AGENT_MAX_VFS - 1, &index, err) < 0 ||
	    cd_get_ascii(o, "netdev", prefix, false, 0, sizeof(v->netdev) - 1, v->netdev,
	                 sizeof(v->netdev), err) < 0 ||
	    cd_get_ascii(o, "guid", prefix, false, 0, 18, guid, sizeof(guid), err) < 0)
		return -EINVAL;
	for (const char *c = v->netdev; *c; c++)
		if (*c == '/' || *c == ' ' || *c == ':') {
			iso_json_field(field, sizeof(field), prefix, "netdev");
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: not a network interface name", field);
		}
	v->has_guid = guid[0] != '\0';
	if (v->has_guid && (strlen(guid) != 18 || iso_parse_guid(guid, &v->guid) < 0)) {
		iso_json_field(field, sizeof(field), prefix, "guid");
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: must be \"0x\" and 16 hex digits, or empty", field);
	}
	if (iso_json_get_bool(o, "ready", prefix, true, &v->ready, err) < 0 ||
	    cd_get_reason(o, prefix, v->reason, err) < 0)
		return -EINVAL;
	if (!v->has_vlan && json_object_get(o, "spoofchk")) {
		iso_json_field(field, sizeof(field), prefix, "spoofchk");
		return iso_error_set(err, ISO_E_INVALID, field, "%s: only beside vlan (a RoCE VF)",
		                     field);
	}
	if (v->has_vlan && v->has_guid) {
		iso_json_field(field, sizeof(field), prefix, "guid");
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: a RoCE VF (with vlan) reports no GUID", field);
	}
	v->vlan = (uint16_t)vlan;
	if (v->ready && !v->has_guid && !v->has_vlan) {
		iso_json_field(field, sizeof(field), prefix, "guid");
		return iso_error_set(err, ISO_E_INVALID, field, "%s: a ready VF has its GUID",
		                     field);
	}
	v->index = (int)index;
	return 0;
}

/* One condition; the only type today is MigModeMismatch, and want and have
 * then differ. */
static int condition_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_condition *c = item;
	static const char *const keys[] = {"type", "gpu", "want", "have", NULL};
	char field[ISO_ERR_FIELD_MAX];
	int64_t gpu = 0;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    cd_get_ascii(o, "type", prefix, true, 1, sizeof(c->type) - 1, c->type, sizeof(c->type),
	                 err) < 0 ||
	    iso_json_get_int(o, "gpu", prefix, true, 0, ISO_AGENT_MAX_GPUS - 1, &gpu, err) < 0)
		return -EINVAL;
	iso_json_field(field, sizeof(field), prefix, "type");
	if (strcmp(c->type, ISO_AGENT_COND_MIG_MODE) != 0)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: unknown condition \"%s\"",
		                     field, c->type);
	for (int k = 0; k < 2; k++) {
		const char *key = k ? "have" : "want";
		json_t *v = json_object_get(o, key);
		iso_json_field(field, sizeof(field), prefix, key);
		if (!json_is_boolean(v))
			return iso_error_set(err, ISO_E_INVALID, field, "%s: must be a boolean",
			                     field);
		*(k ? &c->have : &c->want) = json_is_true(v);
	}
	if (c->want == c->have) {
		iso_json_field(field, sizeof(field), prefix, "have");
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: a MIG mode mismatch has want and have differ", field);
	}
	c->gpu = (int)gpu;
	return 0;
}

bool iso_codec_cpus_valid(const char *s)
{
	long last = -1;

	if (!*s || strlen(s) > ISO_AGENT_CPUS_MAX - 1)
		return false;
	for (;;) {
		long lo, hi;
		char *end;

		if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
			return false;
		lo = hi = strtol(s, &end, 10);
		s = end;
		if (*s == '-') {
			s++;
			if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
				return false;
			hi = strtol(s, &end, 10);
			s = end;
			if (hi <= lo)
				return false;
		}
		if (lo <= last || hi > 65535)
			return false;
		last = hi;
		if (!*s)
			return true;
		if (*s++ != ',')
			return false;
	}
}

/* One sandbox: allocation, member, ready (required), cgroup (a name,
 * "iso-<allocation>-<member>" by convention), cpus (a cpuset list) and
 * reason. A ready sandbox has its cgroup and cpus. */
static int sandbox_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_sandbox *sb = item;
	static const char *const keys[] = {"allocation", "member", "ready", "cgroup",
	                                   "cpus",       "reason", NULL};
	char field[ISO_ERR_FIELD_MAX];
	int64_t member = 0;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    cd_get_alloc_id(o, prefix, sb->allocation, err) < 0)
		return -EINVAL;
	if (iso_json_get_int(o, "member", prefix, true, 0, ISO_CODEC_MEMBER_MAX, &member, err) <
	        0 ||
	    iso_json_get_bool(o, "ready", prefix, true, &sb->ready, err) < 0 ||
	    cd_get_ascii(o, "cgroup", prefix, false, 0, ISO_NAME_MAX - 1, sb->cgroup,
	                 sizeof(sb->cgroup), err) < 0)
		return -EINVAL;
	if (sb->cgroup[0] && !iso_name_valid(sb->cgroup)) {
		iso_json_field(field, sizeof(field), prefix, "cgroup");
		return iso_error_set(err, ISO_E_INVALID, field, "%s: not a cgroup name", field);
	}
	if (cd_get_ascii(o, "cpus", prefix, false, 0, ISO_AGENT_CPUS_MAX - 1, sb->cpus,
	                 sizeof(sb->cpus), err) < 0)
		return -EINVAL;
	if (sb->cpus[0] && !iso_codec_cpus_valid(sb->cpus)) {
		iso_json_field(field, sizeof(field), prefix, "cpus");
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: not a cpuset list (\"0-3,8\": ascending CPUs and ranges)",
		                     field);
	}
	if (cd_get_reason(o, prefix, sb->reason, err) < 0)
		return -EINVAL;
	if (sb->ready && (!sb->cgroup[0] || !sb->cpus[0])) {
		iso_json_field(field, sizeof(field), prefix, sb->cgroup[0] ? "cpus" : "cgroup");
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: a ready sandbox has its cgroup and cpus", field);
	}
	sb->member = (int)member;
	return 0;
}

/* A network interface name (IFNAMSIZ), non-empty when `required`. */
static int get_ifname(json_t *o, const char *key, const char *prefix, bool required, char *out,
                      struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];

	if (cd_get_ascii(o, key, prefix, required, required ? 1 : 0, ISO_AGENT_IFNAME_MAX - 1, out,
	                 ISO_AGENT_IFNAME_MAX, err) < 0)
		return -EINVAL;
	for (const char *c = out; *c; c++)
		if (*c == '/' || *c == ' ' || *c == ':') {
			iso_json_field(field, sizeof(field), prefix, key);
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: not a network interface name", field);
		}
	return 0;
}

/* An IPv4 address in dotted-quad form; "" allowed when not `required`. */
static int get_ipv4(json_t *o, const char *key, const char *prefix, bool required, char *out,
                    struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	uint32_t a;

	if (cd_get_ascii(o, key, prefix, required, required ? 1 : 0, ISO_IPV4_MAX - 1, out,
	                 ISO_IPV4_MAX, err) < 0)
		return -EINVAL;
	if ((out[0] || required) && iso_parse_ipv4(out, &a) < 0) {
		iso_json_field(field, sizeof(field), prefix, key);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: must be an IPv4 address (\"192.0.2.12\")", field);
	}
	return 0;
}

static int get_vni(json_t *o, const char *prefix, uint32_t *out, struct iso_error *err)
{
	int64_t vni = 0;

	if (iso_json_get_int(o, "vni", prefix, true, 1, ISO_VNI_MAX, &vni, err) < 0)
		return -EINVAL;
	*out = (uint32_t)vni;
	return 0;
}

/* The array `key` of `obj` (at `prefix`), required, at most max objects. */
static int get_objects_at(json_t *obj, const char *key, const char *prefix, size_t max,
                          json_t **out, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX], item[ISO_ERR_FIELD_MAX + 24];
	json_t *v = json_object_get(obj, key), *it;
	size_t i;

	iso_json_field(field, sizeof(field), prefix, key);
	if (!v || json_is_null(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: required", field);
	if (!json_is_array(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be an array", field);
	if (json_array_size(v) > max)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: at most %zu items", field,
		                     max);
	json_array_foreach (v, i, it)
		if (!json_is_object(it)) {
			snprintf(item, sizeof(item), "%s[%zu]", field, i);
			return iso_error_set(err, ISO_E_INVALID, item, "%s: must be an object",
			                     item);
		}
	*out = v;
	return 0;
}

/* One entry of "cxi.services". */
static int cxi_service_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	static const char *const keys[] = {
	    "svc_id",          "enabled", "system",  "restricted_members",
	    "restricted_vnis", "vnis",    "members", NULL};
	struct iso_cxi_service *s = item;
	char field[ISO_ERR_FIELD_MAX];
	json_t *vnis, *members, *v;
	int64_t id = 0;
	size_t i;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    iso_json_get_int(o, "svc_id", prefix, true, 1, INT32_MAX, &id, err) < 0 ||
	    iso_json_get_bool(o, "enabled", prefix, true, &s->enabled, err) < 0 ||
	    iso_json_get_bool(o, "system", prefix, true, &s->system, err) < 0 ||
	    iso_json_get_bool(o, "restricted_members", prefix, true, &s->restricted_members, err) <
	        0 ||
	    iso_json_get_bool(o, "restricted_vnis", prefix, true, &s->restricted_vnis, err) < 0)
		return -EINVAL;
	s->svc_id = (uint32_t)id;
	iso_json_field(field, sizeof(field), prefix, "vnis");
	vnis = json_object_get(o, "vnis");
	if (!json_is_array(vnis) || json_array_size(vnis) > ISO_CXI_MAX_VNIS)
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: must be an array of at most %d VNIs", field,
		                     ISO_CXI_MAX_VNIS);
	json_array_foreach (vnis, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > ISO_CXI_VNI_MAX) {
			snprintf(field + strlen(field), sizeof(field) - strlen(field), "[%zu]", i);
			return iso_error_set(err, ISO_E_INVALID, field, "%s: must be 1..%u", field,
			                     ISO_CXI_VNI_MAX);
		}
		s->vnis[s->n_vnis++] = (uint32_t)json_integer_value(v);
	}
	if (get_objects_at(o, "members", prefix, ISO_CXI_MAX_MEMBERS, &members, err) < 0)
		return -EINVAL;
	json_array_foreach (members, i, v) {
		static const char *const mkeys[] = {"type", "id", NULL};
		char at[ISO_ERR_FIELD_MAX + 24];
		const char *type = NULL;
		struct iso_cxi_member *m = &s->members[s->n_members];
		int64_t mid = 0;

		iso_json_field(field, sizeof(field), prefix, "members");
		snprintf(at, sizeof(at), "%s[%zu]", field, i);
		if (iso_json_check_keys(v, at, mkeys, err) < 0 ||
		    iso_json_get_string(v, "type", at, true, &type, err) < 0 ||
		    iso_json_get_int(v, "id", at, true, 0, UINT32_MAX, &mid, err) < 0)
			return -EINVAL;
		if (strcmp(type, "uid") == 0)
			m->type = ISO_CXI_MEMBER_UID;
		else if (strcmp(type, "gid") == 0)
			m->type = ISO_CXI_MEMBER_GID;
		else {
			char tf[ISO_ERR_FIELD_MAX + 32];
			snprintf(tf, sizeof(tf), "%s.type", at);
			return iso_error_set(err, ISO_E_INVALID, tf, "%s: must be uid or gid", tf);
		}
		m->id = (uint32_t)mid;
		s->n_members++;
	}
	return 0;
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return (a > b) - (a < b);
}

/* "cxi": {"device","services"}, both required; a service is listed once. */
static int cxi_decode(json_t *o, struct iso_agent_cxi_report *cx, struct iso_error *err)
{
	static const char *const keys[] = {"device", "services", NULL};
	json_t *services = NULL;
	int r;

	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, "cxi", "cxi: must be an object");
	if (iso_json_check_keys(o, "cxi", keys, err) < 0 ||
	    cd_get_ascii(o, "device", "cxi", true, 1, sizeof(cx->device) - 1, cx->device,
	                 sizeof(cx->device), err) < 0 ||
	    get_objects_at(o, "services", "cxi", ISO_CXI_MAX_SERVICES, &services, err) < 0)
		return -EINVAL;
	if ((r = decode_all(services, "cxi.services", sizeof(*cx->services), cxi_service_decode,
	                    (void **)&cx->services, &cx->n_services, err)) < 0)
		return r;
	/* ids are unique on a NIC: sort a copy and compare neighbours, so a
	 * report of 1,024 services is not checked pair by pair */
	if (cx->n_services > 1) {
		uint64_t *ix = malloc((size_t)cx->n_services * sizeof(*ix));
		if (!ix)
			return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
		for (int i = 0; i < cx->n_services; i++)
			ix[i] = (uint64_t)cx->services[i].svc_id << 32 | (uint32_t)i;
		qsort(ix, (size_t)cx->n_services, sizeof(*ix), u64_cmp);
		for (int i = 1; i < cx->n_services; i++)
			if (ix[i] >> 32 == ix[i - 1] >> 32) {
				char field[ISO_ERR_FIELD_MAX];
				int at = (int)(uint32_t)ix[i]; /* the later of the two */
				snprintf(field, sizeof(field), "cxi.services[%d].svc_id", at);
				free(ix);
				return iso_error_set(err, ISO_E_INVALID, field,
				                     "%s: service listed twice", field);
			}
		free(ix);
	}
	return 0;
}

/* One entry of "cxi_members": allocation, member, vni (1..65535), svc_id
 * (0: none), ready, reason. A ready member with a service names it; one
 * not ready has none. */
static int cxi_member_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_cxi_member_status *m = item;
	static const char *const keys[] = {"allocation", "member", "vni", "svc_id",
	                                   "ready",      "reason", NULL};
	char field[ISO_ERR_FIELD_MAX];
	int64_t member = 0, vni = 0, svc = 0;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    cd_get_alloc_id(o, prefix, m->allocation, err) < 0)
		return -EINVAL;
	if (iso_json_get_int(o, "member", prefix, true, 0, ISO_CODEC_MEMBER_MAX, &member, err) <
	        0 ||
	    iso_json_get_int(o, "vni", prefix, true, 1, ISO_CXI_VNI_MAX, &vni, err) < 0 ||
	    iso_json_get_int(o, "svc_id", prefix, true, 0, UINT32_MAX, &svc, err) < 0 ||
	    iso_json_get_bool(o, "ready", prefix, true, &m->ready, err) < 0 ||
	    cd_get_reason(o, prefix, m->reason, err) < 0)
		return -EINVAL;
	if (!m->ready && svc != 0) {
		iso_json_field(field, sizeof(field), prefix, "svc_id");
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: a member that is not ready has no service", field);
	}
	m->member = (int)member;
	m->vni = (uint32_t)vni;
	m->svc_id = (uint32_t)svc;
	return 0;
}

static int overlay_member_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_overlay_member *m = item;
	static const char *const keys[] = {"allocation", "member", "ifname", "address", NULL};
	int64_t member = 0;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    cd_get_alloc_id(o, prefix, m->allocation, err) < 0)
		return -EINVAL;
	if (iso_json_get_int(o, "member", prefix, true, 0, ISO_CODEC_MEMBER_MAX, &member, err) <
	        0 ||
	    get_ifname(o, "ifname", prefix, false, m->ifname, err) < 0 ||
	    get_ipv4(o, "address", prefix, false, m->address, err) < 0)
		return -EINVAL;
	m->member = (int)member;
	return 0;
}

static int overlay_tenant_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_overlay_tenant *t = item;
	static const char *const keys[] = {"vni", "bridge", "vxlan", "members", NULL};
	char at[ISO_ERR_FIELD_MAX];
	json_t *members = NULL;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 || get_vni(o, prefix, &t->vni, err) < 0 ||
	    get_ifname(o, "bridge", prefix, true, t->bridge, err) < 0 ||
	    get_ifname(o, "vxlan", prefix, false, t->vxlan, err) < 0 ||
	    get_objects_at(o, "members", prefix, ISO_AGENT_MAX_OVERLAY_MEMBERS, &members, err) < 0)
		return -EINVAL;
	iso_json_field(at, sizeof(at), prefix, "members");
	return decode_all(members, at, sizeof(*t->members), overlay_member_decode,
	                  (void **)&t->members, &t->n_members, err);
}

static int allow_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_overlay_allow *a = item;
	static const char *const keys[] = {"peer", "vni", NULL};

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    get_ipv4(o, "peer", prefix, true, a->peer, err) < 0 ||
	    get_vni(o, prefix, &a->vni, err) < 0)
		return -EINVAL;
	return 0;
}

/* Each (peer, vni) pair of `allowed` once: sorted by index, so that a
 * long list costs n log n, and the later of two equal entries named. */
struct allow_ix {
	const struct iso_agent_overlay_allow *a;
	int i;
};

static int allow_cmp(const void *x, const void *y)
{
	const struct allow_ix *p = x, *q = y;
	int c = strcmp(p->a->peer, q->a->peer);

	if (c == 0)
		c = (p->a->vni > q->a->vni) - (p->a->vni < q->a->vni);
	return c ? c : (p->i > q->i) - (p->i < q->i);
}

static int allowed_unique(const struct iso_agent_overlay *ov, struct iso_error *err)
{
	_cleanup_free_ struct allow_ix *ix = calloc((size_t)ov->n_allowed + 1, sizeof(*ix));
	char field[ISO_ERR_FIELD_MAX];

	if (!ix)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < ov->n_allowed; i++)
		ix[i] = (struct allow_ix){&ov->allowed[i], i};
	qsort(ix, (size_t)ov->n_allowed, sizeof(*ix), allow_cmp);
	for (int i = 1; i < ov->n_allowed; i++)
		if (ix[i].a->vni == ix[i - 1].a->vni &&
		    strcmp(ix[i].a->peer, ix[i - 1].a->peer) == 0) {
			snprintf(field, sizeof(field), "overlay.allowed[%d]", ix[i].i);
			return iso_error_set(err, ISO_E_INVALID, field, "%s: (%s, %u) listed twice",
			                     field, ix[i].a->peer, ix[i].a->vni);
		}
	return 0;
}

/* "overlay": {"guard","drops","allowed","tenants"}, every key required. */
static int overlay_decode(json_t *o, struct iso_agent_overlay *ov, struct iso_error *err)
{
	static const char *const keys[] = {"guard", "drops", "allowed", "tenants", NULL};
	json_t *allowed = NULL, *tenants = NULL;
	char field[ISO_ERR_FIELD_MAX];
	int64_t drops = 0;
	int r;

	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, "overlay", "overlay: must be an object");
	if (iso_json_check_keys(o, "overlay", keys, err) < 0 ||
	    iso_json_get_bool(o, "guard", "overlay", true, &ov->guard, err) < 0 ||
	    iso_json_get_int(o, "drops", "overlay", true, 0, INT64_MAX, &drops, err) < 0 ||
	    get_objects_at(o, "allowed", "overlay", ISO_AGENT_MAX_OVERLAY_ALLOWED, &allowed, err) <
	        0 ||
	    get_objects_at(o, "tenants", "overlay", ISO_AGENT_MAX_OVERLAY_TENANTS, &tenants, err) <
	        0)
		return -EINVAL;
	ov->drops = (uint64_t)drops;
	if ((r = decode_all(tenants, "overlay.tenants", sizeof(*ov->tenants), overlay_tenant_decode,
	                    (void **)&ov->tenants, &ov->n_tenants, err)) < 0 ||
	    (r = decode_all(allowed, "overlay.allowed", sizeof(*ov->allowed), allow_decode,
	                    (void **)&ov->allowed, &ov->n_allowed, err)) < 0)
		return r;
	for (int i = 0; i < ov->n_tenants; i++)
		for (int j = 0; j < i; j++)
			if (ov->tenants[i].vni == ov->tenants[j].vni) {
				snprintf(field, sizeof(field), "overlay.tenants[%d].vni", i);
				return iso_error_set(err, ISO_E_INVALID, field,
				                     "%s: VNI %u listed twice", field,
				                     ov->tenants[i].vni);
			}
	return allowed_unique(ov, err);
}

/* Decodes the array `arr` (checked by cd_get_objects), named `key`, into
 * a calloc'd *items of `size`-byte items, each by `decode`; *n is set once
 * all are. */
static int decode_all(json_t *arr, const char *key, size_t size, item_decode_fn decode,
                      void **items, int *n, struct iso_error *err)
{
	char at[ISO_ERR_FIELD_MAX];
	size_t i;
	json_t *it;

	if (!(*items = calloc(json_array_size(arr) + 1, size)))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	json_array_foreach (arr, i, it) {
		snprintf(at, sizeof(at), "%s[%zu]", key, i);
		/* counted before it is decoded, so that clear frees what a
		 * refused item holds */
		*n = (int)i + 1;
		if (decode(it, at, (char *)*items + i * size, err) < 0)
			return -EINVAL;
	}
	*n = (int)json_array_size(arr);
	return 0;
}

void iso_codec_status_clear(struct iso_agent_status *st)
{
	for (int i = 0; st->overlay.tenants && i < st->overlay.n_tenants; i++)
		free(st->overlay.tenants[i].members);
	free(st->overlay.tenants);
	free(st->overlay.allowed);
	free(st->cxi.services);
	free(st->cxi_members);
	free(st->sandboxes);
	free(st->gpus);
	free(st->instances);
	free(st->vfs);
	free(st->conditions);
	memset(st, 0, sizeof(*st));
}

int iso_codec_status_decode(json_t *body, struct iso_agent_status *out, struct iso_error *err)
{
	static const char *const keys[] = {"term_seen",  "version", "gpus",         "instances",
	                                   "conditions", "vfs",     "sandbox_mode", "sandboxes",
	                                   "overlay",    "cxi",     "cxi_members",  NULL};
	json_t *arr_g = NULL, *arr_i = NULL, *arr_c = NULL, *arr_v = NULL, *arr_s = NULL,
	       *arr_x = NULL;
	const char *mode = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	if (iso_json_check_keys(body, NULL, keys, err) < 0 ||
	    iso_json_get_int(body, "term_seen", NULL, true, 0, INT64_MAX, &out->term_seen, err) <
	        0 ||
	    cd_get_ascii(body, "version", NULL, true, 1, 64, out->version, sizeof(out->version),
	                 err) < 0 ||
	    cd_get_objects(body, "gpus", ISO_AGENT_MAX_GPUS, &arr_g, err) < 0 ||
	    cd_get_objects(body, "instances", ISO_AGENT_MAX_INSTANCES, &arr_i, err) < 0)
		return -EINVAL;
	if ((r = decode_all(arr_g, "gpus", sizeof(*out->gpus), gpu_decode, (void **)&out->gpus,
	                    &out->n_gpus, err)) < 0 ||
	    (r = decode_all(arr_i, "instances", sizeof(*out->instances), instance_decode,
	                    (void **)&out->instances, &out->n_instances, err)) < 0)
		return r;
	/* "conditions" and "vfs" are optional: absent is none. */
	if (json_object_get(body, "conditions") &&
	    ((r = cd_get_objects(body, "conditions", ISO_AGENT_MAX_GPUS, &arr_c, err)) < 0 ||
	     (r = decode_all(arr_c, "conditions", sizeof(*out->conditions), condition_decode,
	                     (void **)&out->conditions, &out->n_conditions, err)) < 0))
		return r;
	if (json_object_get(body, "vfs") &&
	    ((r = cd_get_objects(body, "vfs", ISO_AGENT_MAX_VFS, &arr_v, err)) < 0 ||
	     (r = decode_all(arr_v, "vfs", sizeof(*out->vfs), vf_decode, (void **)&out->vfs,
	                     &out->n_vfs, err)) < 0))
		return r;
	/* issue 14: "sandbox_mode" (absent is "off"), "sandboxes" (absent is
	 * none) and "overlay" (absent on nodes without overlay members) */
	if (iso_json_get_string(body, "sandbox_mode", NULL, false, &mode, err) < 0)
		return -EINVAL;
	if (mode && strcmp(mode, "real") != 0 && strcmp(mode, "off") != 0)
		return iso_error_set(err, ISO_E_INVALID, "sandbox_mode",
		                     "sandbox_mode: must be real or off");
	out->sandbox_real = mode && strcmp(mode, "real") == 0;
	if (json_object_get(body, "sandboxes") &&
	    ((r = cd_get_objects(body, "sandboxes", ISO_AGENT_MAX_SANDBOXES, &arr_s, err)) < 0 ||
	     (r = decode_all(arr_s, "sandboxes", sizeof(*out->sandboxes), sandbox_decode,
	                     (void **)&out->sandboxes, &out->n_sandboxes, err)) < 0))
		return r;
	for (int i = 0; i < out->n_sandboxes; i++)
		for (int j = 0; j < i; j++)
			if (out->sandboxes[i].member == out->sandboxes[j].member &&
			    strcmp(out->sandboxes[i].allocation, out->sandboxes[j].allocation) ==
			        0) {
				char field[ISO_ERR_FIELD_MAX];
				snprintf(field, sizeof(field), "sandboxes[%d].member", i);
				return iso_error_set(
				    err, ISO_E_INVALID, field, "%s: member %d of %s listed twice",
				    field, out->sandboxes[i].member, out->sandboxes[i].allocation);
			}
	if (json_object_get(body, "overlay") && !json_is_null(json_object_get(body, "overlay"))) {
		out->has_overlay = true;
		if ((r = overlay_decode(json_object_get(body, "overlay"), &out->overlay, err)) < 0)
			return r;
	}
	/* "cxi" is absent on nodes without a CXI NIC driver */
	if (json_object_get(body, "cxi") && !json_is_null(json_object_get(body, "cxi"))) {
		out->has_cxi = true;
		if ((r = cxi_decode(json_object_get(body, "cxi"), &out->cxi, err)) < 0)
			return r;
	}
	/* "cxi_members" (absent is none): each (allocation, member) once */
	if (json_object_get(body, "cxi_members") &&
	    ((r = cd_get_objects(body, "cxi_members", ISO_AGENT_MEMBERS_MAX, &arr_x, err)) < 0 ||
	     (r = decode_all(arr_x, "cxi_members", sizeof(*out->cxi_members), cxi_member_decode,
	                     (void **)&out->cxi_members, &out->n_cxi_members, err)) < 0))
		return r;
	for (int i = 0; i < out->n_cxi_members; i++)
		for (int j = 0; j < i; j++)
			if (out->cxi_members[i].member == out->cxi_members[j].member &&
			    strcmp(out->cxi_members[i].allocation,
			           out->cxi_members[j].allocation) == 0) {
				char field[ISO_ERR_FIELD_MAX];
				snprintf(field, sizeof(field), "cxi_members[%d].member", i);
				return iso_error_set(err, ISO_E_INVALID, field,
				                     "%s: member %d of %s listed twice", field,
				                     out->cxi_members[i].member,
				                     out->cxi_members[i].allocation);
			}
	return 0;
}

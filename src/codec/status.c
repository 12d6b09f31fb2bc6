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
	return json_pack("{s:i, s:s, s:s, s:b, s:s}", "index", v->index, "netdev", v->netdev,
	                 "guid", hex, "ready", v->ready, "reason", v->reason);
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

json_t *iso_codec_status_encode(const struct iso_agent_status *st, bool with_vfs)
{
	json_t *o =
	    json_pack("{s:I, s:s}", "term_seen", (json_int_t)st->term_seen, "version", st->version);

	if (!o || !append_all(o, "gpus", st->gpus, st->n_gpus, sizeof(*st->gpus), gpu_item) ||
	    !append_all(o, "instances", st->instances, st->n_instances, sizeof(*st->instances),
	                instance_item) ||
	    !append_all(o, "conditions", st->conditions, st->n_conditions, sizeof(*st->conditions),
	                condition_item) ||
	    (with_vfs && !append_all(o, "vfs", st->vfs, st->n_vfs, sizeof(*st->vfs), vf_item))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- decode ---- */

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
	char field[ISO_ERR_FIELD_MAX];
	int64_t gpu = 0, start = 0, member = 0;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
	    iso_json_get_int(o, "gpu", prefix, true, 0, ISO_AGENT_MAX_GPUS - 1, &gpu, err) < 0 ||
	    iso_json_get_int(o, "start", prefix, true, 0, 7, &start, err) < 0 ||
	    cd_get_ascii(o, "profile", prefix, true, 1, sizeof(in->profile) - 1, in->profile,
	                 sizeof(in->profile), err) < 0 ||
	    cd_get_ascii(o, "uuid", prefix, false, 0, 96, in->uuid, sizeof(in->uuid), err) < 0 ||
	    cd_get_ascii(o, "allocation", prefix, true, 1, ISO_CODEC_ID_MAX - 1, in->allocation,
	                 sizeof(in->allocation), err) < 0 ||
	    iso_json_get_int(o, "member", prefix, true, 0, ISO_CODEC_MEMBER_MAX, &member, err) < 0)
		return -EINVAL;
	if (!cd_alloc_id_valid(in->allocation)) {
		iso_json_field(field, sizeof(field), prefix, "allocation");
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: not an allocation id (a- and 16 hex digits)", field);
	}
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
 * (required) and reason. */
static int vf_decode(json_t *o, const char *prefix, void *item, struct iso_error *err)
{
	struct iso_agent_vf *v = item;
	static const char *const keys[] = {"index", "netdev", "guid", "ready", "reason", NULL};
	char field[ISO_ERR_FIELD_MAX], guid[24] = "";
	int64_t index = 0;

	if (iso_json_check_keys(o, prefix, keys, err) < 0 ||
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
	if (v->ready && !v->has_guid) {
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

/* Decodes the array `arr` (checked by cd_get_objects), named `key`, into
 * a calloc'd *items of `size`-byte items, each by `decode`; *n is set once
 * all are. */
typedef int (*item_decode_fn)(json_t *o, const char *prefix, void *item, struct iso_error *err);

static int decode_all(json_t *arr, const char *key, size_t size, item_decode_fn decode,
                      void **items, int *n, struct iso_error *err)
{
	char at[32];
	size_t i;
	json_t *it;

	if (!(*items = calloc(json_array_size(arr) + 1, size)))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	json_array_foreach (arr, i, it) {
		snprintf(at, sizeof(at), "%s[%zu]", key, i);
		if (decode(it, at, (char *)*items + i * size, err) < 0)
			return -EINVAL;
	}
	*n = (int)json_array_size(arr);
	return 0;
}

void iso_codec_status_clear(struct iso_agent_status *st)
{
	free(st->gpus);
	free(st->instances);
	free(st->vfs);
	free(st->conditions);
	memset(st, 0, sizeof(*st));
}

int iso_codec_status_decode(json_t *body, struct iso_agent_status *out, struct iso_error *err)
{
	static const char *const keys[] = {"term_seen",  "version", "gpus", "instances",
	                                   "conditions", "vfs",     NULL};
	json_t *arr_g = NULL, *arr_i = NULL, *arr_c = NULL, *arr_v = NULL;
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
	return 0;
}

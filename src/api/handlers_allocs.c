/* handlers_allocs.c: /v1/allocations. Decodes requests strictly into an
 * iso_alloc_request; every decision is the controller's. */
#include <sodium.h>
#include <string.h>

#include "api/internal.h"

static const char *const create_keys[] = {
    "tenant",   "name",      "members", "gpus",       "cpus",       "memory_mib", "pool", "project",
    "priority", "isolation", "spread",  "on_preempt", "duration_s", "nodes",      NULL};
static const char *const gpus_keys[] = {"count", "profile", "whole", "model", NULL};
static const char *const resize_keys[] = {"members", NULL};
static const char *const list_keys[] = {"limit", "after",           "tenant",
                                        "state", "idempotency_key", NULL};

static int copy_field(char *dst, size_t size, const char *src, const char *field,
                      struct iso_error *err)
{
	if (src && iso_strlcpy(dst, src, size) < 0)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: too long", field);
	return 0;
}

static int decode_gpus(json_t *gpus, struct iso_shape *s, struct iso_error *err)
{
	const char *profile = NULL, *model = NULL;
	int64_t count = 1;

	if (!json_is_object(gpus))
		return iso_error_set(err, ISO_E_INVALID, "gpus", "gpus: must be an object");
	if (iso_json_check_keys(gpus, "gpus", gpus_keys, err) < 0 ||
	    iso_json_get_int(gpus, "count", "gpus", false, 1, 64, &count, err) < 0 ||
	    iso_json_get_string(gpus, "profile", "gpus", false, &profile, err) < 0 ||
	    iso_json_get_bool(gpus, "whole", "gpus", false, &s->whole, err) < 0 ||
	    iso_json_get_string(gpus, "model", "gpus", false, &model, err) < 0)
		return -1;
	if (s->whole && profile)
		return iso_error_set(err, ISO_E_INVALID, "gpus.profile",
		                     "gpus.profile: give either a MIG profile or whole: true, "
		                     "not both");
	if (!s->whole && !profile)
		return iso_error_set(err, ISO_E_INVALID, "gpus.profile",
		                     "gpus.profile: required unless whole is true");
	s->gpu_count = (int)count;
	if (copy_field(s->profile, sizeof(s->profile), profile, "gpus.profile", err) < 0 ||
	    copy_field(s->gpu_model, sizeof(s->gpu_model), model, "gpus.model", err) < 0)
		return -1;
	return 0;
}

/* The tenancy fields: the controller checks the values, this the types. */
static int decode_policy(json_t *body, struct iso_alloc_request *req, struct iso_error *err)
{
	const char *on_preempt = NULL;
	int64_t priority = 0, duration_s = 0;

	if (iso_json_get_string(body, "project", NULL, false, &req->project, err) < 0 ||
	    iso_json_get_int(body, "priority", NULL, false, -1000, 1000, &priority, err) < 0 ||
	    iso_json_get_string(body, "isolation", NULL, false, &req->isolation, err) < 0 ||
	    iso_json_get_string(body, "spread", NULL, false, &req->spread, err) < 0 ||
	    iso_json_get_string(body, "on_preempt", NULL, false, &on_preempt, err) < 0 ||
	    iso_json_get_int(body, "duration_s", NULL, false, 0, INT64_C(10) * 365 * 86400,
	                     &duration_s, err) < 0)
		return -1;
	if (on_preempt && strcmp(on_preempt, "requeue") != 0 && strcmp(on_preempt, "fail") != 0)
		return iso_error_set(err, ISO_E_INVALID, "on_preempt",
		                     "on_preempt: want requeue or fail");
	req->fail_on_preempt = on_preempt && strcmp(on_preempt, "fail") == 0;
	req->priority = (int)priority;
	req->duration_ms = duration_s * 1000;
	return 0;
}

/* The allocation, each member with what its node's agent last reported
 * (docs/agents.md). */
static json_t *alloc_json(struct api_request *r, const struct iso_allocation *a)
{
	json_t *o = api_alloc_json(a), *nodes = json_object_get(o, "nodes"), *m;
	size_t k;
	int pkey = iso_controller_alloc_pkey(r->ctl, a);
	char hex[8];

	/* the P_Key its members are in: its own with per-allocation partitions */
	snprintf(hex, sizeof(hex), "0x%04x", pkey > 0 ? pkey : 0);
	json_object_set_new(o, "pkey", pkey > 0 ? json_string(hex) : json_null());
	json_array_foreach (nodes, k, m) {
		struct iso_member_device dev[ISO_AGENT_MAX_GPUS]; /* at most 7 per GPU it holds */
		char cvd[ISO_AGENT_MAX_GPUS * ISO_AGENT_TEXT_MAX] = "";
		int ready, n = 0;
		json_t *devices = json_array();

		iso_controller_member_devices(r->ctl, a, (int)k, &ready, dev,
		                              (int)ISO_ARRAY_SIZE(dev), &n);
		for (int d = 0; d < n; d++) {
			json_array_append_new(devices, json_pack("{s:i, s:s}", "gpu", dev[d].gpu,
			                                         "uuid", dev[d].uuid));
			if (strlen(cvd) + strlen(dev[d].uuid) + 2 < sizeof(cvd))
				snprintf(cvd + strlen(cvd), sizeof(cvd) - strlen(cvd), "%s%s",
				         d ? "," : "", dev[d].uuid);
		}
		struct iso_member_vf vf;
		json_t *vfj = json_null();
		/* The VF beside the GPUs, not in `devices`, whose items all have a
		 * uuid (a VF has none). */
		if (iso_controller_member_vf(r->ctl, a, (int)k, &vf)) {
			char guid[24];
			snprintf(guid, sizeof(guid), "0x%016llx", (unsigned long long)vf.guid);
			/* a RoCE VF is named by its tenant's VLAN, not a GUID */
			vfj = vf.vlan
			          ? json_pack("{s:s, s:i, s:s, s:i}", "kind", "vf", "index",
			                      vf.index, "netdev", vf.netdev, "vlan", (int)vf.vlan)
			          : json_pack("{s:s, s:i, s:s, s:s}", "kind", "vf", "index",
			                      vf.index, "netdev", vf.netdev, "guid", guid);
		}
		json_object_set_new(m, "vf", vfj);
		/* issue 14: the sandbox, for cluster roles only (a tenant never
		 * sees the key) */
		if (!iso_role_is_tenant_scoped(r->who.role)) {
			struct iso_member_sandbox sb;
			json_object_set_new(
			    m, "sandbox",
			    iso_controller_member_sandbox(r->ctl, a, (int)k, &sb)
			        ? json_pack("{s:s, s:s}", "cgroup", sb.cgroup, "cpus", sb.cpus)
			        : json_null());
		}
		json_object_update_new(m, json_pack("{s:o, s:o, s:o}", "ready",
		                                    ready < 0 ? json_null() : json_boolean(ready),
		                                    "devices", devices, "cuda_visible_devices",
		                                    n ? json_string(cvd) : json_null()));
	}
	return o;
}

/* The request's Idempotency-Key header (docs/api.md): NULL when absent;
 * given twice, empty, too long or with a character outside
 * [A-Za-z0-9._:-] it is refused before anything is looked up. */
static int idem_key(struct api_request *r, const char **out)
{
	int n = 0;
	const char *k = api_header(r, "Idempotency-Key", &n);

	*out = NULL;
	if (n > 1)
		return iso_error_set(&r->err, ISO_E_INVALID, "Idempotency-Key",
		                     "header Idempotency-Key: given %d times", n);
	if (k && !iso_idem_key_valid(k))
		return iso_error_set(&r->err, ISO_E_INVALID, "Idempotency-Key",
		                     "Idempotency-Key: want 1-128 characters of [A-Za-z0-9._:-]");
	*out = k;
	return 0;
}

/* What a retry must repeat: SHA-256 of the body with its keys sorted,
 * compact, without "tenant" (the key's scope, whether the caller named it or
 * its token did), in hex. */
static int request_hash(struct api_request *r, json_t *body, char hex[65])
{
	_cleanup_(json_decrefp) json_t *copy = json_deep_copy(body);
	unsigned char h[crypto_hash_sha256_BYTES];
	char *text;

	if (!copy)
		return iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "out of memory");
	json_object_del(copy, "tenant");
	text = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!text)
		return iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "out of memory");
	crypto_hash_sha256(h, (const unsigned char *)text, strlen(text));
	free(text);
	sodium_bin2hex(hex, 65, h, sizeof(h));
	return 0;
}

/* "nodes": an array of node names, one per member (the controller checks
 * who may give it and what the names are); null is as absent. */
static int decode_nodes(struct api_request *r, json_t *body, struct iso_alloc_request *req,
                        const char ***names)
{
	json_t *nodes = json_object_get(body, "nodes"), *v;
	char field[ISO_ERR_FIELD_MAX];
	size_t i;

	*names = NULL;
	if (!nodes || json_is_null(nodes))
		return 0;
	if (!json_is_array(nodes))
		return iso_error_set(&r->err, ISO_E_INVALID, "nodes",
		                     "nodes: must be an array of node names");
	if (json_array_size(nodes) > ISO_MAX_MEMBERS)
		return iso_error_set(&r->err, ISO_E_INVALID, "nodes", "nodes: at most %d",
		                     ISO_MAX_MEMBERS);
	*names = calloc(json_array_size(nodes) + 1, sizeof(**names));
	if (!*names)
		return iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "out of memory");
	json_array_foreach (nodes, i, v) {
		snprintf(field, sizeof(field), "nodes[%zu]", i);
		if (!json_is_string(v))
			return iso_error_set(&r->err, ISO_E_INVALID, field, "%s: must be a string",
			                     field);
		(*names)[i] = json_string_value(v);
	}
	req->has_nodes = true;
	req->nodes = *names;
	req->n_nodes = (int)json_array_size(nodes);
	return 0;
}

int api_alloc_create(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	struct iso_alloc_request req = {0};
	_cleanup_free_ const char **names = NULL;
	const char *pool = NULL;
	char hash[65];
	int64_t members = 1, cpus = 0, memory = 0;
	json_t *gpus;
	int created;

	if (api_check_query(r, NULL) < 0 || idem_key(r, &req.idem_key) < 0 ||
	    api_body_object(r, false, &body) < 0 ||
	    iso_json_check_keys(body, NULL, create_keys, &r->err) < 0 ||
	    iso_json_get_string(body, "tenant", NULL, false, &req.tenant, &r->err) < 0 ||
	    iso_json_get_string(body, "name", NULL, false, &req.name, &r->err) < 0 ||
	    iso_json_get_int(body, "members", NULL, false, 1, ISO_MAX_MEMBERS, &members, &r->err) <
	        0 ||
	    iso_json_get_int(body, "cpus", NULL, false, 0, 1 << 20, &cpus, &r->err) < 0 ||
	    iso_json_get_int(body, "memory_mib", NULL, false, 0, INT64_C(1) << 40, &memory,
	                     &r->err) < 0 ||
	    iso_json_get_string(body, "pool", NULL, false, &pool, &r->err) < 0)
		return -1;
	if (decode_policy(body, &req, &r->err) < 0 || decode_nodes(r, body, &req, &names) < 0)
		return -1;
	if (req.idem_key) {
		if (request_hash(r, body, hash) < 0)
			return -1;
		req.idem_hash = hash;
	}
	gpus = json_object_get(body, "gpus");
	if (gpus && !json_is_null(gpus) && decode_gpus(gpus, &req.shape, &r->err) < 0)
		return -1;
	req.members = (int)members;
	req.shape.cpus = (int)cpus;
	req.shape.memory_mib = memory;
	if (copy_field(req.shape.pool, sizeof(req.shape.pool), pool, "pool", &r->err) < 0 ||
	    (created = iso_controller_alloc_create(r->ctl, &r->who, &req, &a, &r->err)) < 0)
		return -1;
	/* 1: a retry with the same key and body, answered with what it made */
	api_reply(r, created == 1 ? MHD_HTTP_OK : MHD_HTTP_CREATED, alloc_json(r, &a));
	return 0;
}

int api_alloc_list(struct api_request *r)
{
	struct iso_alloc_query q = {.state = -1};
	struct iso_allocation *items = NULL;
	const char *state;
	int n = 0;

	if (api_check_query(r, list_keys) < 0 || api_page(r, &q.limit, &q.after) < 0)
		return -1;
	q.tenant = api_query(r, "tenant");
	q.idem_key = api_query(r, "idempotency_key");
	state = api_query(r, "state");
	if (state) {
		enum iso_alloc_state s;
		if (iso_alloc_state_parse(state, &s) < 0)
			return iso_error_set(&r->err, ISO_E_INVALID, "state",
			                     "state: must be pending, placed, provisioning, "
			                     "active, releasing, released or failed");
		q.state = (int)s;
	}
	int limit = q.limit;
	q.limit = limit + 1;
	if (iso_controller_alloc_list(r->ctl, &r->who, &q, &items, &n, &r->err) < 0)
		return -1;
	json_t *arr = json_array();
	for (int i = 0; i < n && i < limit; i++)
		json_array_append_new(arr, alloc_json(r, &items[i]));
	api_reply(r, MHD_HTTP_OK, api_list(arr, n > limit ? items[limit - 1].id : NULL));
	iso_allocations_free(items, n);
	return 0;
}

int api_alloc_get(struct api_request *r)
{
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_alloc_get(r->ctl, &r->who, r->seg[2], &a, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, alloc_json(r, &a));
	return 0;
}

int api_alloc_resize(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	int64_t members = 0;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    iso_json_check_keys(body, NULL, resize_keys, &r->err) < 0 ||
	    iso_json_get_int(body, "members", NULL, true, 1, ISO_MAX_MEMBERS, &members, &r->err) <
	        0 ||
	    iso_controller_alloc_resize(r->ctl, &r->who, r->seg[2], (int)members, &a, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, alloc_json(r, &a));
	return 0;
}

int api_alloc_release(struct api_request *r)
{
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_alloc_release(r->ctl, &r->who, r->seg[2], &a, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, alloc_json(r, &a));
	return 0;
}

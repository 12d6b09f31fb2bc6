/* handlers_agents.c: the node agents' routes (docs/agents.md): a node's
 * desired state, read at once or long-polled (the connection is parked,
 * without a thread, until the controller answers it), and the status an
 * agent reports. Who may act for which node is the controller's business. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static const char *const desired_keys[] = {"after", "wait_s", "heartbeat", NULL};

/* A decimal number 0..max from the query, or -1 with r->err naming it. */
static int64_t query_number(struct api_request *r, const char *key, uint64_t max)
{
	const char *v = api_query(r, key);
	char *end = NULL;

	if (!v)
		return 0;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (!v[0] || v[0] < '0' || v[0] > '9' || errno || *end || n > max) {
		iso_error_set(&r->err, ISO_E_INVALID, key, "%s: must be an integer 0..%llu", key,
		              (unsigned long long)max);
		return -1;
	}
	return (int64_t)n;
}

static void desired_ready(void *arg, json_t *doc)
{
	struct api_request *r = arg;

	if (doc)
		api_unpark(r, MHD_HTTP_OK, doc);
	else
		api_unpark(r, MHD_HTTP_INTERNAL_SERVER_ERROR,
		           json_pack("{s:{s:s, s:s, s:n}, s:s}", "error", "code", "internal",
		                     "message", "out of memory", "field", "request_id",
		                     r->request_id));
}

int api_node_desired(struct api_request *r)
{
	struct iso_desired_wait wait = {.fn = desired_ready, .arg = r};
	json_t *doc = NULL;
	int64_t after, wait_s;

	if (api_check_query(r, desired_keys) < 0)
		return -1;
	after = query_number(r, "after", INT64_MAX);
	wait_s = after < 0 ? -1 : query_number(r, "wait_s", 60);
	if (after < 0 || wait_s < 0)
		return -1;
	if (wait_s > 0 && !api_query(r, "after"))
		return iso_error_set(&r->err, ISO_E_INVALID, "after",
		                     "after: required with wait_s (the generation you hold)");
	int64_t heartbeat = query_number(r, "heartbeat", 1);
	if (heartbeat < 0)
		return -1;
	wait.after = (uint64_t)after;
	wait.wait_s = (int)wait_s;
	wait.heartbeat = heartbeat == 1;
	/* Without a connection to park (api_handle_raw), answer at once. */
	if (!r->conn)
		wait.wait_s = 0;
	if (iso_controller_node_desired(r->ctl, &r->who, r->seg[2], &wait, &doc, &r->err) < 0)
		return -1;
	if (!doc)
		return api_park(r) ? 0 : -1; /* registered; r->conn is set */
	api_reply(r, MHD_HTTP_OK, doc);
	return 0;
}

static const char *const status_keys[] = {"term_seen",  "version", "gpus", "instances",
                                          "conditions", "vfs",     NULL};
static const char *const condition_keys[] = {"type", "gpu", "want", "have", NULL};
static const char *const vf_keys[] = {"index", "netdev", "guid", "ready", "reason", NULL};
static const char *const gpu_keys[] = {"index", "model", "uuid", "mig_mode", NULL};
static const char *const instance_keys[] = {"gpu",    "start", "profile", "uuid", "allocation",
                                            "member", "ready", "reason",  NULL};

/* Printable ASCII, min..max bytes (an agent's version, models and UUIDs). */
static int get_ascii(json_t *obj, const char *key, const char *prefix, bool required, size_t min,
                     size_t max, char *out, size_t size, struct iso_error *err)
{
	const char *s = NULL;
	char field[ISO_ERR_FIELD_MAX];
	size_t n;
	int r = api_get_string(obj, key, prefix, required, &s, err);

	if (r < 0 || !s)
		return r;
	snprintf(field, sizeof(field), "%s.%s", prefix, key);
	n = strlen(s);
	if (n < min || n > max || n >= size)
		return iso_error_set(err, ISO_E_INVALID, prefix[0] ? field : key,
		                     "%s: must be %zu..%zu characters", prefix[0] ? field : key,
		                     min, max);
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return iso_error_set(err, ISO_E_INVALID, prefix[0] ? field : key,
			                     "%s: printable ASCII only", prefix[0] ? field : key);
	memcpy(out, s, n + 1);
	return 0;
}

/* The array `key` of `body`, at most max items, each an object. */
static int get_objects(json_t *body, const char *key, size_t max, json_t **out,
                       struct iso_error *err)
{
	json_t *v = json_object_get(body, key);
	char field[ISO_ERR_FIELD_MAX];
	size_t i;
	json_t *item;

	if (!v || json_is_null(v))
		return iso_error_set(err, ISO_E_INVALID, key, "%s: required", key);
	if (!json_is_array(v))
		return iso_error_set(err, ISO_E_INVALID, key, "%s: must be an array", key);
	if (json_array_size(v) > max)
		return iso_error_set(err, ISO_E_INVALID, key, "%s: at most %zu items", key, max);
	json_array_foreach (v, i, item)
		if (!json_is_object(item)) {
			snprintf(field, sizeof(field), "%s[%zu]", key, i);
			return iso_error_set(err, ISO_E_INVALID, field, "%s: must be an object",
			                     field);
		}
	*out = v;
	return 0;
}

static int parse_gpu(json_t *o, const char *prefix, struct iso_agent_gpu *g, struct iso_error *err)
{
	const char *mode = NULL;
	char field[ISO_ERR_FIELD_MAX];
	int64_t index = 0;

	if (api_check_keys(o, prefix, gpu_keys, err) < 0 ||
	    api_get_int(o, "index", prefix, true, 0, 63, &index, err) < 0 ||
	    get_ascii(o, "model", prefix, true, 1, 96, g->model, sizeof(g->model), err) < 0 ||
	    get_ascii(o, "uuid", prefix, true, 1, 96, g->uuid, sizeof(g->uuid), err) < 0 ||
	    api_get_string(o, "mig_mode", prefix, true, &mode, err) < 0)
		return -EINVAL;
	g->index = (int)index;
	if (strcmp(mode, "enabled") != 0 && strcmp(mode, "disabled") != 0) {
		snprintf(field, sizeof(field), "%s.mig_mode", prefix);
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be enabled or disabled",
		                     field);
	}
	g->mig = strcmp(mode, "enabled") == 0;
	return 0;
}

static bool alloc_id_valid(const char *s)
{
	if (strncmp(s, "a-", 2) != 0 || strlen(s) != 18)
		return false;
	for (int i = 2; i < 18; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static int parse_instance(json_t *o, const char *prefix, struct iso_agent_instance *in,
                          struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	const char *reason = NULL;
	int64_t gpu = 0, start = 0, member = 0;

	if (api_check_keys(o, prefix, instance_keys, err) < 0 ||
	    api_get_int(o, "gpu", prefix, true, 0, 63, &gpu, err) < 0 ||
	    api_get_int(o, "start", prefix, true, 0, 7, &start, err) < 0 ||
	    get_ascii(o, "profile", prefix, true, 1, 31, in->profile, sizeof(in->profile), err) <
	        0 ||
	    get_ascii(o, "uuid", prefix, false, 0, 96, in->uuid, sizeof(in->uuid), err) < 0 ||
	    get_ascii(o, "allocation", prefix, true, 1, ISO_ID_MAX - 1, in->allocation,
	              sizeof(in->allocation), err) < 0 ||
	    api_get_int(o, "member", prefix, true, 0, ISO_MAX_MEMBERS - 1, &member, err) < 0)
		return -EINVAL;
	if (!alloc_id_valid(in->allocation)) {
		snprintf(field, sizeof(field), "%s.allocation", prefix);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: not an allocation id (a- and 16 hex digits)", field);
	}
	snprintf(field, sizeof(field), "%s.ready", prefix);
	json_t *ready = json_object_get(o, "ready");
	if (!ready || json_is_null(ready))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: required", field);
	if (api_get_bool(o, "ready", prefix, &in->ready, err) < 0 ||
	    api_get_string(o, "reason", prefix, false, &reason, err) < 0)
		return -EINVAL;
	if (reason && (strlen(reason) > 256 || !iso_text_valid(reason))) {
		snprintf(field, sizeof(field), "%s.reason", prefix);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: at most 256 bytes of text without control characters",
		                     field);
	}
	iso_strlcpy(in->reason, reason ? reason : "", sizeof(in->reason));
	in->gpu = (int)gpu;
	in->start = (int)start;
	in->member = (int)member;
	return 0;
}

/* One VF as read back: index 0..127, netdev (a Linux interface name or
 * ""), guid ("0x" and 16 hex digits, or "" when it could not be read),
 * ready (required) and reason (docs/agents.md). */
static int parse_vf(json_t *o, const char *prefix, struct iso_agent_vf *v, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX], guid[24] = "";
	const char *reason = NULL;
	int64_t index = 0;
	json_t *ready;

	if (api_check_keys(o, prefix, vf_keys, err) < 0 ||
	    api_get_int(o, "index", prefix, true, 0, ISO_AGENT_MAX_VFS - 1, &index, err) < 0 ||
	    get_ascii(o, "netdev", prefix, false, 0, sizeof(v->netdev) - 1, v->netdev,
	              sizeof(v->netdev), err) < 0 ||
	    get_ascii(o, "guid", prefix, false, 0, 18, guid, sizeof(guid), err) < 0)
		return -EINVAL;
	for (const char *c = v->netdev; *c; c++)
		if (*c == '/' || *c == ' ' || *c == ':') {
			snprintf(field, sizeof(field), "%s.netdev", prefix);
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: not a network interface name", field);
		}
	v->has_guid = guid[0] != '\0';
	if (v->has_guid && (strlen(guid) != 18 || iso_parse_guid(guid, &v->guid) < 0)) {
		snprintf(field, sizeof(field), "%s.guid", prefix);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: must be \"0x\" and 16 hex digits, or empty", field);
	}
	snprintf(field, sizeof(field), "%s.ready", prefix);
	ready = json_object_get(o, "ready");
	if (!ready || json_is_null(ready))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: required", field);
	if (api_get_bool(o, "ready", prefix, &v->ready, err) < 0 ||
	    api_get_string(o, "reason", prefix, false, &reason, err) < 0)
		return -EINVAL;
	if (reason && (strlen(reason) > 256 || !iso_text_valid(reason))) {
		snprintf(field, sizeof(field), "%s.reason", prefix);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: at most 256 bytes of text without control characters",
		                     field);
	}
	if (v->ready && !v->has_guid) {
		snprintf(field, sizeof(field), "%s.guid", prefix);
		return iso_error_set(err, ISO_E_INVALID, field, "%s: a ready VF has its GUID",
		                     field);
	}
	iso_strlcpy(v->reason, reason ? reason : "", sizeof(v->reason));
	v->index = (int)index;
	return 0;
}

/* The optional "vfs" array of a status. */
static int parse_vfs(json_t *body, struct iso_agent_status *st, struct iso_agent_vf **out,
                     struct iso_error *err)
{
	json_t *arr = NULL, *item;
	char prefix[32];
	size_t i;

	if (!json_object_get(body, "vfs"))
		return 0;
	if (get_objects(body, "vfs", ISO_AGENT_MAX_VFS, &arr, err) < 0)
		return -EINVAL;
	if (!(*out = calloc(json_array_size(arr) + 1, sizeof(**out))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	json_array_foreach (arr, i, item) {
		snprintf(prefix, sizeof(prefix), "vfs[%zu]", i);
		if (parse_vf(item, prefix, &(*out)[i], err) < 0)
			return -EINVAL;
	}
	st->vfs = *out;
	st->n_vfs = (int)json_array_size(arr);
	return 0;
}

/* One condition (docs/agents.md, "Conditions"); the only type today is
 * MigModeMismatch, and want and have then differ. */
static int parse_condition(json_t *o, const char *prefix, struct iso_agent_condition *c,
                           struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	int64_t gpu = 0;

	if (api_check_keys(o, prefix, condition_keys, err) < 0 ||
	    get_ascii(o, "type", prefix, true, 1, sizeof(c->type) - 1, c->type, sizeof(c->type),
	              err) < 0 ||
	    api_get_int(o, "gpu", prefix, true, 0, 63, &gpu, err) < 0)
		return -EINVAL;
	snprintf(field, sizeof(field), "%s.type", prefix);
	if (strcmp(c->type, ISO_AGENT_COND_MIG_MODE) != 0)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: unknown condition \"%s\"",
		                     field, c->type);
	for (int k = 0; k < 2; k++) {
		const char *key = k ? "have" : "want";
		json_t *v = json_object_get(o, key);
		snprintf(field, sizeof(field), "%s.%s", prefix, key);
		if (!json_is_boolean(v))
			return iso_error_set(err, ISO_E_INVALID, field, "%s: must be a boolean",
			                     field);
		*(k ? &c->have : &c->want) = json_is_true(v);
	}
	if (c->want == c->have) {
		snprintf(field, sizeof(field), "%s.have", prefix);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: a MIG mode mismatch has want and have differ", field);
	}
	c->gpu = (int)gpu;
	return 0;
}

/* The optional "conditions" array of a status. */
static int parse_conditions(json_t *body, struct iso_agent_status *st,
                            struct iso_agent_condition **out, struct iso_error *err)
{
	json_t *arr = NULL, *item;
	char prefix[32];
	size_t i;

	if (!json_object_get(body, "conditions"))
		return 0;
	if (get_objects(body, "conditions", ISO_AGENT_MAX_GPUS, &arr, err) < 0)
		return -EINVAL;
	if (!(*out = calloc(json_array_size(arr) + 1, sizeof(**out))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	json_array_foreach (arr, i, item) {
		snprintf(prefix, sizeof(prefix), "conditions[%zu]", i);
		if (parse_condition(item, prefix, &(*out)[i], err) < 0)
			return -EINVAL;
	}
	st->conditions = *out;
	st->n_conditions = (int)json_array_size(arr);
	return 0;
}

int api_node_status(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	_cleanup_free_ struct iso_agent_gpu *gpus = NULL;
	_cleanup_free_ struct iso_agent_instance *inst = NULL;
	_cleanup_free_ struct iso_agent_vf *vfs = NULL;
	_cleanup_free_ struct iso_agent_condition *conds = NULL;
	struct iso_agent_status st = {0};
	json_t *arr_g = NULL, *arr_i = NULL, *item;
	char prefix[32];
	size_t i;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    api_check_keys(body, NULL, status_keys, &r->err) < 0 ||
	    api_get_int(body, "term_seen", NULL, true, 0, INT64_MAX, &st.term_seen, &r->err) < 0 ||
	    get_ascii(body, "version", "", true, 1, 64, st.version, sizeof(st.version), &r->err) <
	        0 ||
	    get_objects(body, "gpus", ISO_AGENT_MAX_GPUS, &arr_g, &r->err) < 0 ||
	    get_objects(body, "instances", ISO_AGENT_MAX_INSTANCES, &arr_i, &r->err) < 0)
		return -1;
	gpus = calloc(json_array_size(arr_g) + 1, sizeof(*gpus));
	inst = calloc(json_array_size(arr_i) + 1, sizeof(*inst));
	if (!gpus || !inst)
		return iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "out of memory");
	json_array_foreach (arr_g, i, item) {
		snprintf(prefix, sizeof(prefix), "gpus[%zu]", i);
		if (parse_gpu(item, prefix, &gpus[i], &r->err) < 0)
			return -1;
	}
	json_array_foreach (arr_i, i, item) {
		snprintf(prefix, sizeof(prefix), "instances[%zu]", i);
		if (parse_instance(item, prefix, &inst[i], &r->err) < 0)
			return -1;
	}
	st.gpus = gpus;
	st.n_gpus = (int)json_array_size(arr_g);
	st.instances = inst;
	st.n_instances = (int)json_array_size(arr_i);
	if (parse_conditions(body, &st, &conds, &r->err) < 0)
		return -1;
	if (parse_vfs(body, &st, &vfs, &r->err) < 0)
		return -1;
	if (iso_controller_node_status(r->ctl, &r->who, r->seg[2], &st, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return 0;
}

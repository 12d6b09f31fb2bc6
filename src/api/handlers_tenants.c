/* handlers_tenants.c: /v1/tenants. */
#include "api/internal.h"

static const char *const tenant_create_keys[] = {
    "name",   "description", "org",       "shares", "isolation",
    "tags",   "limits",      "io_uring",  "partition", NULL};
static const char *const tenant_update_keys[] = {"description", "org",      "shares",
                                                 "isolation",   "tags",     "limits",
                                                 "io_uring",    "partition", NULL};
/* "limits": {"max_pending", "max_live", ...}, each optional (the keys and
 * ranges of iso_tenant_limit_def). */
static int get_limits(json_t *body, struct iso_tenant_policy *pol, struct iso_error *err)
{
	json_t *l = json_object_get(body, "limits");
	const char *keys[ISO_TENANT_LIMITS + 1];
	int64_t v;

	if (!l)
		return 0;
	if (!json_is_object(l))
		return iso_error_set(err, ISO_E_INVALID, "limits", "limits: must be an object");
	for (int i = 0; i < ISO_TENANT_LIMITS; i++)
		keys[i] = iso_tenant_limit_def(i)->name;
	keys[ISO_TENANT_LIMITS] = NULL;
	if (iso_json_check_keys(l, "limits", keys, err) < 0)
		return -1;
	for (int i = 0; i < ISO_TENANT_LIMITS; i++) {
		const struct iso_tenant_limit_def *d = iso_tenant_limit_def(i);
		if (!json_object_get(l, d->name))
			continue;
		if (iso_json_get_int(l, d->name, "limits", true, d->min, d->max, &v, err) < 0)
			return -1;
		pol->limit[i].set = true;
		pol->limit[i].value = (int)v;
	}
	return 0;
}

/* "io_uring": a boolean, when given (who may give it: the controller). */
static int get_io_uring(json_t *body, struct iso_tenant_policy *pol, struct iso_error *err)
{
	if (!json_object_get(body, "io_uring"))
		return 0;
	if (iso_json_get_bool(body, "io_uring", NULL, true, &pol->io_uring, err) < 0)
		return -1;
	pol->io_uring_set = true;
	return 0;
}

/* "partition": "per-tenant" or "per-allocation", when given. */
static int get_partition(json_t *body, struct iso_tenant_policy *pol, struct iso_error *err)
{
	const char *mode = NULL;

	if (!json_object_get(body, "partition"))
		return 0;
	if (iso_json_get_string(body, "partition", NULL, true, &mode, err) < 0)
		return -1;
	if (iso_partition_mode_parse(mode, &pol->partition) < 0)
		return iso_error_set(err, ISO_E_INVALID, "partition",
		                     "partition: want per-tenant or per-allocation");
	pol->partition_set = true;
	return 0;
}

/* The tenancy policy fields of a create or update body. */
static int get_policy(json_t *body, struct iso_tenant_policy *pol, struct iso_error *err)
{
	return get_io_uring(body, pol, err) < 0 || get_partition(body, pol, err) < 0 ||
	               iso_json_get_string(body, "org", NULL, false, &pol->org, err) < 0 ||
	               iso_json_get_number(body, "shares", NULL, 1e-6, 1e6, &pol->shares, err) <
	                   0 ||
	               iso_json_get_string(body, "isolation", NULL, false, &pol->isolation, err) <
	                   0 ||
	               iso_json_get_string(body, "tags", NULL, false, &pol->tags, err) < 0 ||
	               get_limits(body, pol, err) < 0
	           ? -1
	           : 0;
}
static const char *const page_keys[] = {"limit", "after", NULL};

int api_tenant_create(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	const char *name = NULL, *description = NULL;
	struct iso_tenant_policy pol = {0};
	struct iso_tenant t;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    iso_json_check_keys(body, NULL, tenant_create_keys, &r->err) < 0 ||
	    iso_json_get_string(body, "name", NULL, true, &name, &r->err) < 0 ||
	    iso_json_get_string(body, "description", NULL, false, &description, &r->err) < 0 ||
	    get_policy(body, &pol, &r->err) < 0 ||
	    iso_controller_tenant_create(r->ctl, &r->who, name, description, &pol, &t, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_CREATED, api_tenant_json(r->ctl, &t));
	return 0;
}

int api_tenant_list(struct api_request *r)
{
	struct iso_tenant *items = NULL;
	const char *after;
	int limit, n = 0;

	if (api_check_query(r, page_keys) < 0 || api_page(r, &limit, &after) < 0 ||
	    iso_controller_tenant_list(r->ctl, &r->who, after, limit + 1, &items, &n, &r->err) < 0)
		return -1;
	json_t *arr = json_array();
	for (int i = 0; i < n && i < limit; i++)
		json_array_append_new(arr, api_tenant_json(r->ctl, &items[i]));
	api_reply(r, MHD_HTTP_OK, api_list(arr, n > limit ? items[limit - 1].name : NULL));
	free(items);
	return 0;
}

int api_tenant_get(struct api_request *r)
{
	struct iso_tenant t;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_tenant_get(r->ctl, &r->who, r->seg[2], &t, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, api_tenant_json(r->ctl, &t));
	return 0;
}

int api_tenant_update(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	const char *description = NULL;
	struct iso_tenant_policy pol = {0};
	struct iso_tenant t;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    iso_json_check_keys(body, NULL, tenant_update_keys, &r->err) < 0 ||
	    iso_json_get_string(body, "description", NULL, false, &description, &r->err) < 0 ||
	    get_policy(body, &pol, &r->err) < 0 ||
	    iso_controller_tenant_update(r->ctl, &r->who, r->seg[2], description, &pol, &t,
	                                 &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, api_tenant_json(r->ctl, &t));
	return 0;
}

int api_tenant_delete(struct api_request *r)
{
	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_tenant_delete(r->ctl, &r->who, r->seg[2], &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return 0;
}

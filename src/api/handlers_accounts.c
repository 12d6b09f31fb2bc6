/* handlers_accounts.c: /v1/orgs, /v1/tenants/{t}/projects, the quota
 * routes of organisations, tenants and projects, /v1/queue and /v1/usage.
 * Decodes strictly; who may see or change which account is the
 * controller's decision (accounts.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static const char *const org_keys[] = {"name", "shares", NULL};
static const char *const quota_keys[] = {"guaranteed", "borrow_limit", "lend_limit", NULL};
static const char *const queue_keys[] = {"limit", "after", NULL};

static json_t *org_json(const struct iso_org *o)
{
	return json_pack("{s:s, s:f, s:o}", "name", o->name, "shares", o->shares, "created",
	                 api_time(o->created_ms));
}

static json_t *project_json(const char *tenant, const struct iso_project *p)
{
	return json_pack("{s:s, s:s, s:f}", "tenant", tenant, "name", p->name, "shares", p->shares);
}

int api_org_create(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	const char *name = NULL;
	double shares = 1.0;
	struct iso_org o;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    iso_json_check_keys(body, NULL, org_keys, &r->err) < 0 ||
	    iso_json_get_string(body, "name", NULL, true, &name, &r->err) < 0 ||
	    iso_json_get_number(body, "shares", NULL, 1e-6, 1e6, &shares, &r->err) < 0 ||
	    iso_controller_org_create(r->ctl, &r->who, name, shares, &o, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_CREATED, org_json(&o));
	return 0;
}

/* Paged like every list: by name, `after` the last name shown. */
int api_org_list(struct api_request *r)
{
	static const char *const keys[] = {"limit", "after", NULL};
	_cleanup_free_ struct iso_org *items = NULL;
	const char *after;
	int n = 0, limit, shown = 0, first = 0;

	if (api_check_query(r, keys) < 0 || api_page(r, &limit, &after) < 0 ||
	    iso_controller_org_list(r->ctl, &r->who, &items, &n, &r->err) < 0)
		return -1;
	while (after && first < n && strcmp(items[first].name, after) <= 0)
		first++;
	json_t *arr = json_array();
	for (int i = first; i < n && shown < limit; i++, shown++)
		json_array_append_new(arr, org_json(&items[i]));
	api_reply(r, MHD_HTTP_OK,
	          api_list(arr, first + shown < n ? items[first + shown - 1].name : NULL));
	return 0;
}

int api_org_delete(struct api_request *r)
{
	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_org_delete(r->ctl, &r->who, r->seg[2], &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return 0;
}

int api_project_create(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	const char *name = NULL;
	double shares = 1.0;
	struct iso_project p;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    iso_json_check_keys(body, NULL, org_keys, &r->err) < 0 ||
	    iso_json_get_string(body, "name", NULL, true, &name, &r->err) < 0 ||
	    iso_json_get_number(body, "shares", NULL, 1e-6, 1e6, &shares, &r->err) < 0 ||
	    iso_controller_project_create(r->ctl, &r->who, r->seg[2], name, shares, &p, &r->err) <
	        0)
		return -1;
	api_reply(r, MHD_HTTP_CREATED, project_json(r->seg[2], &p));
	return 0;
}

int api_project_list(struct api_request *r)
{
	struct iso_project *items = NULL;
	int n = 0;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_project_list(r->ctl, &r->who, r->seg[2], &items, &n, &r->err) < 0)
		return -1;
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, project_json(r->seg[2], &items[i]));
	free(items);
	api_reply(r, MHD_HTTP_OK, api_list(arr, NULL));
	return 0;
}

int api_project_delete(struct api_request *r)
{
	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_project_delete(r->ctl, &r->who, r->seg[2], r->seg[4], &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return 0;
}

/* The account of a quota route: /v1/orgs/O/quota, /v1/tenants/T/quota or
 * /v1/tenants/T/projects/P/quota; level is what the route names. */
static int quota_account(struct api_request *r, char *buf, size_t size, const char **level)
{
	if (strcmp(r->seg[1], "orgs") == 0) {
		*level = "organisation";
		return iso_strlcpy(buf, r->seg[2], size);
	}
	if (r->n_seg == 4) {
		*level = "tenant";
		return iso_strlcpy(buf, r->seg[2], size);
	}
	*level = "project";
	return snprintf(buf, size, "%s/%s", r->seg[2], r->seg[4]) >= (int)size ? -1 : 0;
}

/* The route names the level: an organisation's name under /v1/tenants (or
 * the reverse) is as unknown as a missing one. */
static int quota_level_check(struct api_request *r, json_t *q, const char *level)
{
	const char *got = json_string_value(json_object_get(q, "level"));

	if (got && strcmp(got, level) == 0)
		return 0;
	json_decref(q);
	return iso_error_set(&r->err, ISO_E_NOT_FOUND, NULL, "no such account");
}

int api_quota_get(struct api_request *r)
{
	char account[ISO_NAME_MAX * 2];
	const char *level;
	json_t *q = NULL;

	if (api_check_query(r, NULL) < 0)
		return -1;
	if (quota_account(r, account, sizeof(account), &level) < 0)
		return iso_error_set(&r->err, ISO_E_NOT_FOUND, NULL, "no such account");
	if (iso_controller_quota_get(r->ctl, &r->who, account, &q, &r->err) < 0 ||
	    quota_level_check(r, q, level) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, q);
	return 0;
}

int api_quota_set(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	struct iso_quota_change ch[16];
	char account[ISO_NAME_MAX * 2];
	const char *level, *kind;
	json_t *v, *q = NULL;
	int n = 0;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0)
		return -1;
	if (quota_account(r, account, sizeof(account), &level) < 0)
		return iso_error_set(&r->err, ISO_E_NOT_FOUND, NULL, "no such account");
	json_object_foreach (body, kind, v) {
		struct iso_quota_change *c = &ch[n];

		if (n == (int)ISO_ARRAY_SIZE(ch))
			return iso_error_set(&r->err, ISO_E_INVALID, NULL,
			                     "at most %d resource kinds", (int)ISO_ARRAY_SIZE(ch));
		if (!json_is_object(v))
			return iso_error_set(&r->err, ISO_E_INVALID, kind,
			                     "%.64s: must be an object {guaranteed, borrow_limit, "
			                     "lend_limit}",
			                     kind);
		*c = (struct iso_quota_change){.kind = kind,
		                               .guaranteed = INT64_MAX,
		                               .borrow_limit = INT64_MAX,
		                               .lend_limit = INT64_MAX};
		if (iso_json_check_keys(v, kind, quota_keys, &r->err) < 0 ||
		    iso_json_get_int(v, "guaranteed", kind, false, 0, INT64_MAX - 1, &c->guaranteed,
		                     &r->err) < 0 ||
		    iso_json_get_int(v, "borrow_limit", kind, false, 0, INT64_MAX - 1,
		                     &c->borrow_limit, &r->err) < 0 ||
		    iso_json_get_int(v, "lend_limit", kind, false, 0, INT64_MAX - 1, &c->lend_limit,
		                     &r->err) < 0)
			return -1;
		n++;
	}
	/* Checked before the change so that a route of the wrong level
	 * changes nothing. */
	if (iso_controller_quota_get(r->ctl, &r->who, account, &q, &r->err) < 0 ||
	    quota_level_check(r, q, level) < 0)
		return -1;
	json_decref(q);
	if (iso_controller_quota_set(r->ctl, &r->who, account, ch, n, &q, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, q);
	return 0;
}

/* The queue is ordered anew for every request, so a page's cursor is the
 * last position it showed, not an id: the next page starts after that place
 * in the order as it stands then (an item that moved may show twice or not
 * at all, as between any two calls). */
int api_queue(struct api_request *r)
{
	const char *after;
	json_t *page = NULL;
	int limit, from = 0;

	if (api_check_query(r, queue_keys) < 0 || api_page(r, &limit, &after) < 0)
		return -1;
	if (after) {
		char *end = NULL;
		errno = 0;
		long long v = strtoll(after, &end, 10);
		if (errno || *end || end == after || v < 1 || v > INT32_MAX)
			return iso_error_set(&r->err, ISO_E_INVALID, "after",
			                     "after: must be a queue position (an integer >= 1)");
		from = (int)v;
	}
	if (iso_controller_queue(r->ctl, &r->who, limit, from, &page, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, page);
	return 0;
}

int api_usage(struct api_request *r)
{
	const char *after;
	json_t *page = NULL;
	int limit;

	if (api_check_query(r, queue_keys) < 0 || api_page(r, &limit, &after) < 0 ||
	    iso_controller_usage(r->ctl, &r->who, limit, after, &page, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, page);
	return 0;
}

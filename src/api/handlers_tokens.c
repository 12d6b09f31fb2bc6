/* handlers_tokens.c: /v1/tokens. The secret appears in exactly one response,
 * the one that issues it, and is wiped from memory right after encoding. */
#include <sodium.h>

#include "api/internal.h"

static const char *const token_issue_keys[] = {"role",        "tenant",       "node", "user",
                                               "description", "expires_in_s", NULL};
static const char *const list_keys[] = {"limit", "after", "tenant", NULL};

int api_token_issue(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	struct iso_token_request req = {0};
	const char *role = NULL;
	struct iso_token t;
	char secret[ISO_TOKEN_MAX];

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    iso_json_check_keys(body, NULL, token_issue_keys, &r->err) < 0 ||
	    iso_json_get_string(body, "role", NULL, true, &role, &r->err) < 0 ||
	    iso_json_get_string(body, "tenant", NULL, false, &req.tenant, &r->err) < 0 ||
	    iso_json_get_string(body, "node", NULL, false, &req.node, &r->err) < 0 ||
	    iso_json_get_string(body, "user", NULL, false, &req.user, &r->err) < 0 ||
	    iso_json_get_string(body, "description", NULL, false, &req.description, &r->err) < 0 ||
	    iso_json_get_int(body, "expires_in_s", NULL, false, 0, INT64_MAX / 1000,
	                     &req.expires_in_s, &r->err) < 0)
		return -1;
	if (iso_role_parse(role, &req.role) < 0)
		return iso_error_set(&r->err, ISO_E_INVALID, "role",
		                     "role: must be cluster-admin, auditor, tenant-admin, "
		                     "tenant-user, node-agent or neutron");
	if (iso_controller_token_issue(r->ctl, &r->who, &req, &t, secret, sizeof(secret), &r->err) <
	    0)
		return -1;
	json_t *out = api_token_json(r->ctl, &t);
	json_object_set_new(out, "token", json_string(secret));
	sodium_memzero(secret, sizeof(secret));
	api_reply(r, MHD_HTTP_CREATED, out);
	return 0;
}

int api_token_list(struct api_request *r)
{
	struct iso_token *items = NULL;
	const char *after;
	int limit, n = 0;

	if (api_check_query(r, list_keys) < 0 || api_page(r, &limit, &after) < 0 ||
	    iso_controller_token_list(r->ctl, &r->who, api_query(r, "tenant"), after, limit + 1,
	                              &items, &n, &r->err) < 0)
		return -1;
	json_t *arr = json_array();
	for (int i = 0; i < n && i < limit; i++)
		json_array_append_new(arr, api_token_json(r->ctl, &items[i]));
	api_reply(r, MHD_HTTP_OK, api_list(arr, n > limit ? items[limit - 1].id : NULL));
	sodium_memzero(items, sizeof(*items) * (size_t)n);
	free(items);
	return 0;
}

int api_token_get(struct api_request *r)
{
	struct iso_token t;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_token_get(r->ctl, &r->who, r->seg[2], &t, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, api_token_json(r->ctl, &t));
	return 0;
}

int api_token_revoke(struct api_request *r)
{
	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_token_revoke(r->ctl, &r->who, r->seg[2], &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return 0;
}

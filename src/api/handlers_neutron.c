/* handlers_neutron.c: the REST shape networking-mlnx's mlnx_sdn_assist ML2
 * driver already speaks (docs/openstack.md, read from its client.py and
 * journal.py), so that an OpenStack site points the driver's `url` at
 * isostackd's /neutron and changes no Neutron code; and the cluster-admin's
 * /v1/neutron/projects mapping of Neutron projects to isostack tenants.
 *
 * The driver sends whole Neutron dicts, whose keys grow with every Neutron
 * release: unlike the /v1 API, unknown keys are ignored here, and the keys
 * read are checked strictly, each refusal naming its key. Writes answer 202
 * with the job id as a JSON string (the driver stores the body as the id);
 * a request with nothing for isostack to do (a flat network, a network type
 * other than vlan, an unbound port isostack does not hold) answers 501,
 * which the driver counts as done, and a DELETE of something unknown 404,
 * which it counts as done too. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/internal.h"

/* ---- login ---- */

static const char *const login_fields[] = {"username", "password", NULL};

int api_neutron_login(struct api_request *r)
{
	const char *ct = api_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, NULL);
	char *v[2] = {NULL, NULL};
	struct iso_principal who = {0};
	struct iso_error e = {0};
	int rc;

	if (api_check_query(r, NULL) < 0)
		return -1;
	if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0 ||
	    (ct[33] && ct[33] != ';'))
		return iso_error_set(&r->err, ISO_E_INVALID, "Content-Type",
		                     "Content-Type: want application/x-www-form-urlencoded");
	rc = api_form_parse(r->body ? r->body : "", r->body_len, login_fields, v, &r->err);
	if (rc == 0 && !v[0])
		rc = iso_error_set(&r->err, ISO_E_INVALID, "username", "username: required");
	if (rc == 0 && !v[1])
		rc = iso_error_set(&r->err, ISO_E_INVALID, "password", "password: required");
	/* One answer for every wrong credential: a wrong user, a token of
	 * another role, a revoked one. */
	if (rc == 0 && (iso_controller_authenticate(r->ctl, v[1], &who, &e) < 0 ||
	                who.role != ISO_ROLE_NEUTRON || strcmp(who.user, v[0]) != 0))
		rc = iso_error_set(&r->err, ISO_E_UNAUTHORIZED, NULL,
		                   "wrong username or password (a neutron token and its user)");
	if (rc == 0) {
		r->who = who;
		snprintf(r->set_cookie, sizeof(r->set_cookie),
		         "%s=%s; Path=/neutron; HttpOnly;%s SameSite=Strict", API_NEUTRON_COOKIE,
		         v[1], api_tls(r) ? " Secure;" : "");
		api_reply(
		    r, MHD_HTTP_OK,
		    json_pack("{s:s, s:s}", "user", who.user, "role", iso_role_name(who.role)));
	}
	sodium_memzero(&who, sizeof(who));
	api_form_free(v, 2);
	return rc < 0 ? -1 : 0;
}

/* ---- the wire's values ---- */

/* A Neutron UUID as Neutron writes it: 8-4-4-4-12 lower-case hex. */
static bool uuid_valid(const char *s)
{
	if (!s || strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-'
		         : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return true;
}

static int domain_of(struct api_request *r, const char **out)
{
	const char *d = r->seg[1];

	if (!iso_name_valid(d) || strncmp(d, "job-", 4) == 0 || strcmp(d, "login") == 0)
		return iso_error_set(&r->err, ISO_E_INVALID, "domain",
		                     "domain: want [a-z0-9][a-z0-9._-]{0,62}, not \"job-...\" or "
		                     "\"login\" (ml2_conf.ini [sdn] domain)");
	*out = d;
	return 0;
}

static int id_of(struct api_request *r, json_t *body, const char **out)
{
	const char *id = NULL;

	if (iso_json_get_string(body, "id", NULL, true, &id, &r->err) < 0)
		return -1;
	if (!uuid_valid(id))
		return iso_error_set(&r->err, ISO_E_INVALID, "id",
		                     "id: want a Neutron UUID (8-4-4-4-12 lower-case hex)");
	/* PUT .../<uuid>: the body's id is the path's */
	if (r->n_seg == 4 && strcmp(id, r->seg[3]) != 0)
		return iso_error_set(&r->err, ISO_E_INVALID, "id",
		                     "id: \"%s\" is not the path's %s", id, r->seg[3]);
	*out = id;
	return 0;
}

/* project_id, or tenant_id (older Neutron); both given must agree. */
static int project_of(struct api_request *r, json_t *body, const char **out)
{
	const char *p = NULL, *t = NULL;

	if (iso_json_get_string(body, "project_id", NULL, false, &p, &r->err) < 0 ||
	    iso_json_get_string(body, "tenant_id", NULL, false, &t, &r->err) < 0)
		return -1;
	if (p && t && strcmp(p, t) != 0)
		return iso_error_set(&r->err, ISO_E_INVALID, "project_id",
		                     "project_id: \"%s\" and tenant_id \"%s\" differ", p, t);
	if (!p && !t)
		return iso_error_set(&r->err, ISO_E_INVALID, "project_id",
		                     "project_id: required (or tenant_id)");
	*out = p ? p : t;
	return 0;
}

static int nothing_to_do(struct api_request *r, const char *field, const char *why)
{
	r->err_status = MHD_HTTP_NOT_IMPLEMENTED;
	r->err_code = "not_implemented";
	return iso_error_set(&r->err, ISO_E_INVALID, field, "%s: nothing for isostack to do", why);
}

static void reply_job(struct api_request *r, const char *job)
{
	api_reply(r, MHD_HTTP_ACCEPTED, json_string(job));
}

static int body_of(struct api_request *r, json_t **body)
{
	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, body) < 0)
		return -1;
	return 0;
}

/* ---- networks ---- */

static int network_write(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	struct iso_neutron_network_req req = {0};
	const char *type = NULL;
	char job[ISO_NEUTRON_JOB_MAX];
	int64_t seg = -1;

	if (domain_of(r, &req.domain) < 0 || body_of(r, &body) < 0 ||
	    id_of(r, body, &req.uuid) < 0 || project_of(r, body, &req.project_id) < 0 ||
	    iso_json_get_string(body, "provider:network_type", NULL, false, &type, &r->err) < 0 ||
	    iso_json_get_int(body, "provider:segmentation_id", NULL, false, 1, 0x7ffe, &seg,
	                     &r->err) < 0)
		return -1;
	if (type && strcmp(type, "vlan") != 0 && strcmp(type, "flat") != 0)
		return nothing_to_do(
		    r, "provider:network_type",
		    "provider:network_type: isostack serves vlan networks (a P_Key "
		    "each)");
	if (seg < 0 || (type && strcmp(type, "flat") == 0))
		return nothing_to_do(r, "provider:segmentation_id",
		                     "provider:segmentation_id: none (a flat network)");
	req.pkey = (int)seg;
	if (iso_controller_neutron_network_put(r->ctl, &r->who, &req, job, &r->err) < 0)
		return -1;
	reply_job(r, job);
	return 0;
}

int api_neutron_network_post(struct api_request *r)
{
	return network_write(r);
}

int api_neutron_network_put(struct api_request *r)
{
	return network_write(r);
}

int api_neutron_network_delete(struct api_request *r)
{
	const char *domain;
	char job[ISO_NEUTRON_JOB_MAX];

	/* the body is the network dict; the path names it */
	if (api_check_query(r, NULL) < 0 || domain_of(r, &domain) < 0 ||
	    iso_controller_neutron_network_delete(r->ctl, &r->who, domain, r->seg[3], job,
	                                          &r->err) < 0)
		return -1;
	reply_job(r, job);
	return 0;
}

/* ---- ports ---- */

static int guid_hex(struct api_request *r, const char *s, const char *field, uint64_t *out)
{
	char *end = NULL;

	if (!s || strlen(s) != 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') ||
	    strspn(s + 2, "0123456789abcdefABCDEF") != 16)
		return iso_error_set(&r->err, ISO_E_INVALID, field,
		                     "%s: want \"0x\" and 16 hex digits", field);
	*out = strtoull(s + 2, &end, 16);
	if (*out == 0)
		return iso_error_set(&r->err, ISO_E_INVALID, field, "%s: GUID 0 is no port's",
		                     field);
	return 0;
}

/* The port's GUID: binding:profile.guid, else an InfiniBand client-id in
 * extra_dhcp_opts, else derived from mac_address (docs/openstack.md). */
static int port_guid(struct api_request *r, json_t *body, struct iso_neutron_port_req *req,
                     char field[48])
{
	json_t *profile = json_object_get(body, "binding:profile");
	json_t *opts = json_object_get(body, "extra_dhcp_opts");
	const char *s = NULL;

	if (profile && !json_is_null(profile)) {
		if (!json_is_object(profile))
			return iso_error_set(&r->err, ISO_E_INVALID, "binding:profile",
			                     "binding:profile: must be an object");
		if (iso_json_get_string(profile, "guid", "binding:profile", false, &s, &r->err) < 0)
			return -1;
		if (s) {
			req->guid_field = "binding:profile.guid";
			return guid_hex(r, s, req->guid_field, &req->guid);
		}
	}
	if (opts && !json_is_null(opts)) {
		size_t i;
		json_t *o;

		if (!json_is_array(opts))
			return iso_error_set(&r->err, ISO_E_INVALID, "extra_dhcp_opts",
			                     "extra_dhcp_opts: must be an array");
		json_array_foreach (opts, i, o) {
			const char *name = NULL, *value = NULL;
			char prefix[32];

			snprintf(prefix, sizeof(prefix), "extra_dhcp_opts[%zu]", i);
			if (!json_is_object(o))
				return iso_error_set(&r->err, ISO_E_INVALID, prefix,
				                     "%s: must be an object", prefix);
			if (iso_json_get_string(o, "opt_name", prefix, true, &name, &r->err) < 0)
				return -1;
			if (strcmp(name, "client-id") != 0)
				continue;
			if (iso_json_get_string(o, "opt_value", prefix, true, &value, &r->err) < 0)
				return -1;
			snprintf(field, 48, "%s.opt_value", prefix);
			req->guid_field = field;
			if (iso_guid_from_client_id(value, &req->guid) < 0)
				return iso_error_set(&r->err, ISO_E_INVALID, field,
				                     "%s: want an InfiniBand client-id "
				                     "(ff:00:00:00:00:00:02:00:00:02:c9:00 and the "
				                     "GUID's 8 bytes)",
				                     field);
			return 0;
		}
	}
	if (iso_json_get_string(body, "mac_address", NULL, false, &s, &r->err) < 0)
		return -1;
	if (!s)
		return iso_error_set(&r->err, ISO_E_INVALID, "mac_address",
		                     "mac_address: required to derive the port's GUID (or "
		                     "binding:profile.guid, or an InfiniBand client-id)");
	req->guid_field = "mac_address";
	if (iso_guid_from_mac(s, &req->guid) < 0)
		return iso_error_set(&r->err, ISO_E_INVALID, "mac_address",
		                     "mac_address: want six two-digit hex bytes separated by ':'");
	return 0;
}

static int port_write(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	struct iso_neutron_port_req req = {0};
	char job[ISO_NEUTRON_JOB_MAX], field[48];

	if (domain_of(r, &req.domain) < 0 || body_of(r, &body) < 0 ||
	    id_of(r, body, &req.uuid) < 0 || project_of(r, body, &req.project_id) < 0 ||
	    iso_json_get_string(body, "network_id", NULL, true, &req.network_id, &r->err) < 0 ||
	    iso_json_get_string(body, "binding:host_id", NULL, false, &req.host, &r->err) < 0)
		return -1;
	if (!uuid_valid(req.network_id))
		return iso_error_set(&r->err, ISO_E_INVALID, "network_id",
		                     "network_id: want a Neutron UUID (8-4-4-4-12 lower-case hex)");
	if (!req.host || !req.host[0]) {
		/* no host: the port is unbound (what isostack holds of it goes) */
		int rc = iso_controller_neutron_port_delete(r->ctl, &r->who, req.domain, req.uuid,
		                                            job, &r->err);
		if (rc == -ENOENT)
			return nothing_to_do(r, "binding:host_id",
			                     "binding:host_id: empty (the port is not bound)");
		if (rc < 0)
			return -1;
		reply_job(r, job);
		return 0;
	}
	if (port_guid(r, body, &req, field) < 0 ||
	    iso_controller_neutron_port_put(r->ctl, &r->who, &req, job, &r->err) < 0)
		return -1;
	reply_job(r, job);
	return 0;
}

int api_neutron_port_post(struct api_request *r)
{
	return port_write(r);
}

int api_neutron_port_put(struct api_request *r)
{
	return port_write(r);
}

int api_neutron_port_delete(struct api_request *r)
{
	const char *domain;
	char job[ISO_NEUTRON_JOB_MAX];

	if (api_check_query(r, NULL) < 0 || domain_of(r, &domain) < 0 ||
	    iso_controller_neutron_port_delete(r->ctl, &r->who, domain, r->seg[3], job, &r->err) <
	        0)
		return -1;
	reply_job(r, job);
	return 0;
}

/* ---- jobs and lists ---- */

int api_neutron_job(struct api_request *r)
{
	const char *status = NULL;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_neutron_job(r->ctl, &r->who, r->seg[1], &status, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, json_pack("{s:s, s:s}", "Status", status, "Id", r->seg[1]));
	return 0;
}

static const char *const list_keys[] = {"limit", "after", NULL};

static json_t *object_json(struct api_request *r, const struct iso_neutron_object *o)
{
	char tenant[ISO_NAME_MAX], hex[24];

	iso_controller_tenant_name(r->ctl, o->tenant_id, tenant, sizeof(tenant));
	if (o->kind == ISO_NEUTRON_NETWORK) {
		snprintf(hex, sizeof(hex), "0x%04x", o->pkey);
		return json_pack("{s:s, s:s, s:s, s:i, s:s, s:o}", "id", o->uuid, "project_id",
		                 o->project_id, "tenant", tenant, "provider:segmentation_id",
		                 o->pkey, "pkey", hex, "updated", api_time(o->updated_ms));
	}
	snprintf(hex, sizeof(hex), "0x%016llx", (unsigned long long)o->guid);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "id", o->uuid, "project_id",
	                 o->project_id, "tenant", tenant, "network_id", o->network,
	                 "binding:host_id", o->host, "guid", hex, "updated",
	                 api_time(o->updated_ms));
}

int api_neutron_list(struct api_request *r)
{
	_cleanup_free_ struct iso_neutron_object *items = NULL;
	enum iso_neutron_kind kind =
	    strcmp(r->seg[2], "Network") == 0 ? ISO_NEUTRON_NETWORK : ISO_NEUTRON_PORT;
	const char *domain, *after;
	int limit, n = 0;

	if (api_check_query(r, list_keys) < 0 || api_page(r, &limit, &after) < 0 ||
	    domain_of(r, &domain) < 0 ||
	    iso_controller_neutron_list(r->ctl, &r->who, domain, kind, after, limit + 1, &items, &n,
	                                &r->err) < 0)
		return -1;
	json_t *arr = json_array();
	for (int i = 0; i < n && i < limit; i++)
		json_array_append_new(arr, object_json(r, &items[i]));
	api_reply(r, MHD_HTTP_OK, api_list(arr, n > limit ? items[limit - 1].uuid : NULL));
	return 0;
}

/* ---- /v1/neutron/projects (cluster-admin) ---- */

static json_t *project_json(struct api_request *r, const struct iso_neutron_project *p)
{
	char tenant[ISO_NAME_MAX];

	iso_controller_tenant_name(r->ctl, p->tenant_id, tenant, sizeof(tenant));
	return json_pack("{s:s, s:s, s:o}", "project_id", p->project_id, "tenant", tenant,
	                 "created", api_time(p->created_ms));
}

static const char *const map_keys[] = {"tenant", NULL};

int api_neutron_project_put(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	struct iso_neutron_project out;
	const char *tenant = NULL;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    iso_json_check_keys(body, NULL, map_keys, &r->err) < 0 ||
	    iso_json_get_string(body, "tenant", NULL, true, &tenant, &r->err) < 0 ||
	    iso_controller_neutron_project_map(r->ctl, &r->who, r->seg[3], tenant, &out, &r->err) <
	        0)
		return -1;
	api_reply(r, MHD_HTTP_OK, project_json(r, &out));
	return 0;
}

int api_neutron_project_list(struct api_request *r)
{
	_cleanup_free_ struct iso_neutron_project *items = NULL;
	const char *after;
	int limit, n = 0;

	if (api_check_query(r, list_keys) < 0 || api_page(r, &limit, &after) < 0 ||
	    iso_controller_neutron_project_list(r->ctl, &r->who, after, limit + 1, &items, &n,
	                                        &r->err) < 0)
		return -1;
	json_t *arr = json_array();
	for (int i = 0; i < n && i < limit; i++)
		json_array_append_new(arr, project_json(r, &items[i]));
	api_reply(r, MHD_HTTP_OK, api_list(arr, n > limit ? items[limit - 1].project_id : NULL));
	return 0;
}

int api_neutron_project_delete(struct api_request *r)
{
	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_neutron_project_unmap(r->ctl, &r->who, r->seg[3], &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return 0;
}

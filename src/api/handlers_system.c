/* handlers_system.c: health, version, identity and aggregate capacity. */
#include "api/internal.h"

/* Every daemon answers it, leader or follower (docs/store.md, "High
 * availability"): its role, the term, and the leader's URL. Without a
 * lease (SQLite, or one isostackd) it leads, with the agents' term. */
int api_healthz(struct api_request *r)
{
	struct iso_lease *l = r->api ? api_lease(r->api) : NULL;
	const char *role = "leader", *leader = r->api ? api_url(r->api) : "";
	json_int_t term = r->ctl ? (json_int_t)iso_controller_agent_term(r->ctl) : 0;

	if (api_check_query(r, NULL) < 0)
		return -1;
	if (l) {
		role = r->ctl && iso_lease_role(l) == ISO_LEASE_LEADER ? "leader" : "follower";
		term = (json_int_t)iso_lease_term(l);
		leader = iso_lease_leader_url(l);
	}
	api_reply(r, MHD_HTTP_OK,
	          json_pack("{s:s, s:s, s:I, s:o}", "status", "ok", "role", role, "term", term,
	                    "leader", leader[0] ? json_string(leader) : json_null()));
	return 0;
}

int api_version(struct api_request *r)
{
	const struct iso_inventory *inv = iso_controller_inventory(r->ctl);
	uint64_t commits, syncs;
	bool group;

	if (api_check_query(r, NULL) < 0)
		return -1;
	iso_controller_commit_stats(r->ctl, &group, &commits, &syncs);
	api_reply(r, MHD_HTTP_OK,
	          json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:b, s:I, s:I}}", "version", ISO_VERSION,
	                    "api", "v1", "store", iso_controller_store_name(r->ctl), "placement",
	                    iso_controller_placer_name(r->ctl), "fabric",
	                    iso_fabric_type_name(inv->fabric.type), "commits", "group", group,
	                    "commits", (json_int_t)commits, "syncs", (json_int_t)syncs));
	return 0;
}

int api_whoami(struct api_request *r)
{
	if (api_check_query(r, NULL) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK,
	          json_pack("{s:s, s:s, s:o, s:s}", "token_id", r->who.token_id, "role",
	                    iso_role_name(r->who.role), "tenant",
	                    r->who.tenant[0] ? json_string(r->who.tenant) : json_null(), "user",
	                    r->who.user));
	return 0;
}

int api_capacity(struct api_request *r)
{
	struct iso_capacity cap;

	if (api_check_query(r, NULL) < 0)
		return -1;
	iso_controller_capacity(r->ctl, &r->who, &cap);
	api_reply(r, MHD_HTTP_OK, api_capacity_json(&cap));
	return 0;
}

/* json_out.c: the one JSON form of every model object. Handlers never build
 * these by hand, so a field cannot differ between a list and a get. Nothing
 * secret (token secrets or hashes) has an encoder here. */
#include <string.h>

#include "api/internal.h"

void api_reply(struct api_request *r, int status, json_t *body)
{
	r->status = status;
	json_decref(r->reply);
	r->reply = body;
}

json_t *api_list(json_t *items, const char *next)
{
	return json_pack("{s:o, s:o}", "items", items, "next",
	                 next ? json_string(next) : json_null());
}

json_t *api_time(int64_t ms)
{
	char buf[40];

	if (ms == 0)
		return json_null();
	iso_format_time(ms, buf, sizeof(buf));
	return json_string(buf);
}

static json_t *str_or_null(const char *s)
{
	return s && s[0] ? json_string(s) : json_null();
}

json_t *api_tenant_json(struct iso_controller *ctl, const struct iso_tenant *t)
{
	int pkey = iso_controller_tenant_pkey(ctl, t->id);
	char hex[8];

	struct iso_tenant_limits lim;

	iso_controller_tenant_limits(ctl, t, &lim);
	snprintf(hex, sizeof(hex), "0x%04x", pkey > 0 ? pkey : 0);
	json_t *o = json_pack(
	    "{s:s, s:s, s:o, s:o, s:o, s:o, s:f, s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i}, s:b}",
	    "name", t->name, "description", t->description, "pkey",
	    pkey > 0 ? json_string(hex) : json_null(), "created", api_time(t->created_ms),
	    "updated", api_time(t->updated_ms), "org", str_or_null(t->org), "shares",
	    t->shares > 0 ? t->shares : 1.0, "isolation", t->isolation[0] ? t->isolation : "shared",
	    "tags", t->tags, "limits", "max_pending", lim.max_pending, "max_live", lim.max_live,
	    "max_user_priority", t->max_user_priority, "writes_per_s", lim.writes_per_s,
	    "reads_per_s", lim.reads_per_s, "io_uring", t->io_uring);
	if (o) /* docs/fabric.md, "Per-allocation partitions" */
		json_object_set_new(o, "partition", json_string(iso_partition_mode_name(t->partition)));
	uint32_t vni = iso_controller_tenant_vni(ctl, t->id);

	/* issue 14: the tenant's VXLAN VNI, on an ethernet fabric only */
	if (o && vni && json_object_set_new(o, "vni", json_integer(vni)) < 0) {
		json_decref(o);
		return NULL;
	}
	uint16_t vlan = iso_controller_tenant_vlan(ctl, t->id);

	/* the tenant's RoCE VLAN, with fabric.vlan_range only */
	if (o && vlan && json_object_set_new(o, "vlan", json_integer(vlan)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *api_token_json(struct iso_controller *ctl, const struct iso_token *t)
{
	char tenant[ISO_NAME_MAX];

	iso_controller_tenant_name(ctl, t->tenant_id, tenant, sizeof(tenant));
	json_t *o =
	    json_pack("{s:s, s:s, s:o, s:s, s:s, s:o, s:o, s:o}", "id", t->id, "role",
	              iso_role_name(t->role), "tenant", str_or_null(tenant), "user", t->user,
	              "description", t->description, "created", api_time(t->created_ms), "expires",
	              api_time(t->expires_ms), "revoked", api_time(t->revoked_ms));
	/* Only a node-agent token acts for a node. */
	if (o && t->node[0])
		json_object_set_new(o, "node", json_string(t->node));
	return o;
}

static const char *member_node(const struct iso_allocation *a, int member)
{
	for (int i = 0; i < a->n_members; i++)
		if (a->placed[i].index == member)
			return a->placed[i].node;
	return "";
}

json_t *api_alloc_json(const struct iso_allocation *a)
{
	json_t *nodes = json_array(), *placement = json_array();
	const struct iso_shape *s = &a->shape;
	json_t *gpus;

	for (int i = 0; i < a->n_members; i++)
		json_array_append_new(nodes, json_pack("{s:i, s:s}", "member", a->placed[i].index,
		                                       "node", a->placed[i].node));
	for (int i = 0; i < a->n_slots; i++) {
		const struct iso_slot *sl = &a->slots[i];
		json_array_append_new(placement,
		                      json_pack("{s:i, s:s, s:i, s:b, s:o, s:i, s:i}", "member",
		                                sl->member, "node", member_node(a, sl->member),
		                                "gpu", sl->gpu, "whole", sl->whole, "profile",
		                                str_or_null(sl->profile), "start", sl->start,
		                                "width", sl->width));
	}
	if (s->gpu_count > 0)
		gpus = json_pack("{s:i, s:b, s:o, s:o}", "count", s->gpu_count, "whole", s->whole,
		                 "profile", str_or_null(s->profile), "model",
		                 str_or_null(s->gpu_model));
	else
		gpus = json_null();
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:i, s:I, s:o, s:s, s:o, s:o, s:o, s:o}", "id",
	    a->id, "tenant", a->tenant, "name", a->name, "state", iso_alloc_state_name(a->state),
	    "reason", a->reason, "members", a->members, "gpus", gpus, "cpus", s->cpus, "memory_mib",
	    (json_int_t)s->memory_mib, "pool", str_or_null(s->pool), "owner", a->owner, "created",
	    api_time(a->created_ms), "updated", api_time(a->updated_ms), "nodes", nodes,
	    "placement", placement);
	/* tenancy (docs/tenancy.md) */
	json_object_update_new(
	    o, json_pack("{s:o, s:i, s:o, s:o, s:s, s:o}", "project", str_or_null(a->project),
	                 "priority", a->priority, "isolation", str_or_null(a->isolation), "spread",
	                 str_or_null(a->spread), "on_preempt",
	                 a->fail_on_preempt ? "fail" : "requeue", "duration_s",
	                 a->duration_ms > 0 ? json_integer(a->duration_ms / 1000) : json_null()));
	json_object_set_new(o, "idempotency_key", str_or_null(a->idem_key));
	return o;
}

static const char *node_state_name(enum iso_node_sched sched, const struct iso_node_usage *u)
{
	if (sched == ISO_NODE_DRAINING && u->members == 0)
		return "drained";
	return iso_node_sched_name(sched);
}

/* The node's agent (docs/agents.md), or null when none reported. */
static json_t *node_agent_json(const struct iso_controller *ctl, int i)
{
	struct iso_agent_view v;

	if (!iso_controller_node_agent(ctl, i, &v))
		return json_null();
	return json_pack("{s:b, s:o, s:s, s:I}", "connected", v.connected, "last_seen",
	                 api_time(v.last_seen_ms), "version", v.version, "term_seen",
	                 (json_int_t)v.term_seen);
}

json_t *api_node_json(struct iso_controller *ctl, int i)
{
	const struct iso_inventory *inv = iso_controller_inventory(ctl);
	const struct iso_cluster_state *cs = iso_controller_state(ctl);
	const struct iso_node *n = &inv->nodes[i];
	const struct iso_node_usage *u = &cs->usage[i];
	json_t *port = json_null();
	char guid[24];

	if (n->has_port) {
		snprintf(guid, sizeof(guid), "0x%016llx", (unsigned long long)n->port.guid);
		port = json_pack("{s:s, s:i, s:s, s:i, s:i}", "device", n->port.device, "port",
		                 n->port.port_num, "guid", guid, "pkey_capacity",
		                 n->port.pkey_capacity, "vfs", n->port.n_vfs);
	}
	/* A down node stays "down"; otherwise an agent silent past its lease
	 * shows first (the stored cordon state is unchanged under it). */
	const char *state = cs->sched[i] != ISO_NODE_DOWN && iso_controller_node_unreachable(ctl, i)
	                        ? "unreachable"
	                        : node_state_name(cs->sched[i], u);
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:i, s:I, s:s, s:i, s:o, s:i, s:o, s:o, "
	                 "s:o}",
	                 "name", n->name, "pool", n->pool, "rack", n->rack, "pdu", n->pdu, "cpus",
	                 n->cpus, "memory_mib", (json_int_t)n->memory_mib, "cpus_used",
	                 u->cpus_used, "memory_mib_used", (json_int_t)u->memory_mib_used, "state",
	                 state, "gpus", n->n_gpus, "gpu_model",
	                 n->n_gpus ? json_string(n->gpus[0].model->name) : json_null(), "members",
	                 u->members, "port", port, "agent", node_agent_json(ctl, i), "conditions",
	                 iso_controller_node_conditions(ctl, i));
}

json_t *api_capacity_json(const struct iso_capacity *c)
{
	return json_pack(
	    "{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I}", "nodes", c->nodes,
	    "schedulable_nodes", c->schedulable_nodes, "gpus", c->gpus, "gpus_free", c->gpus_free,
	    "memory_slices", c->memory_slices, "memory_slices_free", c->memory_slices_free,
	    "compute_slices", c->compute_slices, "compute_slices_free", c->compute_slices_free,
	    "cpus", (json_int_t)c->cpus, "cpus_free", (json_int_t)c->cpus_free, "memory_mib",
	    (json_int_t)c->memory_mib, "memory_mib_free", (json_int_t)c->memory_mib_free);
}

/* intent.c: turns tenants, their P_Keys and the (node, tenant) port
 * assignments into the one desired partitioning of the fabric. This is the
 * last place where a mistake is cheap: an intent that would put one port in
 * two tenants' partitions, or more keys on a port than its table holds (the
 * SM would drop keys with ERR 0512), is refused here with the port named,
 * before any driver writes a file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "isostack/fabric.h"

void iso_fabric_intent_clear(struct iso_fabric_intent *in)
{
	if (!in)
		return;
	for (int i = 0; i < in->n_parts; i++)
		free(in->parts[i].members);
	free(in->parts);
	memset(in, 0, sizeof(*in));
}

int iso_fabric_intent_copy(const struct iso_fabric_intent *src, struct iso_fabric_intent *dst)
{
	memset(dst, 0, sizeof(*dst));
	dst->generation = src->generation;
	if (src->n_parts == 0)
		return 0;
	dst->parts = calloc((size_t)src->n_parts, sizeof(*dst->parts));
	if (!dst->parts)
		return -ENOMEM;
	for (int i = 0; i < src->n_parts; i++) {
		const struct iso_partition *p = &src->parts[i];
		struct iso_partition *q = &dst->parts[i];

		*q = *p;
		q->members = NULL;
		dst->n_parts = i + 1;
		if (p->n_members) {
			q->members = malloc((size_t)p->n_members * sizeof(*q->members));
			if (!q->members) {
				q->n_members = 0;
				iso_fabric_intent_clear(dst);
				return -ENOMEM;
			}
			memcpy(q->members, p->members, (size_t)p->n_members * sizeof(*q->members));
		}
	}
	return 0;
}

static void intent_cleanup(struct iso_fabric_intent *in)
{
	iso_fabric_intent_clear(in);
}

/* An assignment with its tenant resolved, sortable by GUID. */
struct slot {
	uint64_t guid;
	int tenant; /* index into tenants[] */
	int assign; /* index into assign[] */
};

static int cmp_slot(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;
	if (x->guid != y->guid)
		return x->guid < y->guid ? -1 : 1;
	if (x->tenant != y->tenant)
		return x->tenant < y->tenant ? -1 : 1;
	return 0;
}

static int cmp_member(const void *a, const void *b)
{
	const struct iso_fabric_member *x = a, *y = b;
	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

static int cmp_part(const void *a, const void *b)
{
	const struct iso_partition *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->pkey < y->pkey ? -1 : x->pkey > y->pkey;
}

static const char *alloc_of(const struct iso_fabric_tenant *t)
{
	return t->alloc ? t->alloc : "";
}

/* The partition of an assignment: its tenant's own, or its allocation's. */
static int find_tenant(const struct iso_fabric_tenant *tenants, int n, int64_t id,
                       const char *alloc)
{
	for (int i = 0; i < n; i++)
		if (tenants[i].tenant_id == id && strcmp(alloc_of(&tenants[i]), alloc) == 0)
			return i;
	return -1;
}

/* The assignment's GUID must be the one the inventory gives that port: the
 * intent is only as good as the GUIDs the SM will match. */
static int check_assignment(const struct iso_inventory *inv, const struct iso_port_assignment *a,
                            int i, struct iso_error *err)
{
	char field[48];

	snprintf(field, sizeof(field), "assignments[%d].node", i);
	if (a->node < 0 || a->node >= inv->n_nodes)
		return iso_error_set(
		    err, ISO_E_INVALID, field,
		    "assignment %d: node index %d is not in the inventory (%d nodes)", i, a->node,
		    inv->n_nodes);
	const struct iso_node *node = &inv->nodes[a->node];
	if (!node->has_port)
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "assignment %d: node %s has no fabric port", i, node->name);
	const struct iso_port *port = &node->port;
	uint64_t want;
	snprintf(field, sizeof(field), "assignments[%d].vf", i);
	if (a->vf == ISO_VF_EXTERNAL) {
		/* a GUID isostack does not hand out: never the PF's or a VF's
		 * of the inventory (the controller refuses the rest, services
		 * and other nodes' GUIDs, before it stages one) */
		bool own = a->guid == 0 || a->guid == port->guid;
		for (int v = 0; v < port->n_vfs && !own; v++)
			own = port->vf_guids[v] == a->guid;
		if (own)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "assignment %d: external GUID 0x%016llx is node %s's "
			                     "own",
			                     i, (unsigned long long)a->guid, node->name);
		return 0;
	}
	if (a->vf == -1) {
		if (port->n_vfs > 0)
			return iso_error_set(
			    err, ISO_E_INVALID, field,
			    "assignment %d: node %s has %d VFs, so its PF 0x%016llx "
			    "stays in Default only; assign a VF",
			    i, node->name, port->n_vfs, (unsigned long long)port->guid);
		want = port->guid;
	} else if (a->vf < 0 || a->vf >= port->n_vfs) {
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "assignment %d: node %s has no VF %d (it has %d)", i,
		                     node->name, a->vf, port->n_vfs);
	} else {
		want = port->vf_guids[a->vf];
	}
	snprintf(field, sizeof(field), "assignments[%d].guid", i);
	if (a->guid != want)
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "assignment %d: GUID 0x%016llx is not %s of node %s in the "
		                     "inventory (0x%016llx)",
		                     i, (unsigned long long)a->guid,
		                     a->vf == -1 ? "the PF" : "that VF", node->name,
		                     (unsigned long long)want);
	return 0;
}

/* The tenant keys must be bases that no one else uses: two tenants on one
 * key, or a tenant on a service's key, would be one partition. */
static int check_tenant_keys(const struct iso_inventory *inv, const struct iso_fabric_tenant *t,
                             const bool *active, int n, struct iso_error *err)
{
	for (int i = 0; i < n; i++) {
		if (!active[i])
			continue;
		if (t[i].pkey == 0 || t[i].pkey >= ISO_PKEY_DEFAULT)
			return iso_error_set(err, ISO_E_INVALID, "tenants.pkey",
			                     "tenant '%s' has P_Key 0x%04x: a tenant key is "
			                     "0x0001-0x7ffe",
			                     t[i].name, t[i].pkey);
		for (int j = 0; j < inv->fabric.n_services; j++)
			if (inv->fabric.services[j].pkey == t[i].pkey)
				return iso_error_set(
				    err, ISO_E_CONFLICT, "tenants.pkey",
				    "tenant '%s' has P_Key 0x%04x, the key of shared "
				    "service '%s'",
				    t[i].name, t[i].pkey, inv->fabric.services[j].name);
		for (int j = 0; j < i; j++)
			if (active[j] && t[j].pkey == t[i].pkey)
				return iso_error_set(err, ISO_E_CONFLICT, "tenants.pkey",
				                     "tenants '%s' and '%s' both have P_Key 0x%04x",
				                     t[j].name, t[i].name, t[i].pkey);
	}
	return 0;
}

/* "<prefix><name>" with '-' and '.' made '_', which every SM's name grammar
 * takes. When that is too long or two names meet after the change, the name
 * gets the key appended with a capital 'P': names are lower case, so such a
 * name meets no plain one, and keys are unique. */
static void part_name(struct iso_partition *p, const char *prefix, const char *name, bool suffixed)
{
	char clean[ISO_NAME_MAX];
	size_t n = 0;

	for (; name && name[n] && n + 1 < sizeof(clean); n++)
		clean[n] = (name[n] == '-' || name[n] == '.') ? '_' : name[n];
	clean[n] = '\0';
	if (!suffixed) {
		snprintf(p->name, sizeof(p->name), "%s%s", prefix, clean);
		return;
	}
	/* prefix + up to 48 characters + "_P" + 4 hex digits fits 64 */
	snprintf(p->name, sizeof(p->name), "%s%.48s_P%04x", prefix, clean, p->pkey);
}

static bool name_fits(const char *prefix, const char *name)
{
	return strlen(prefix) + strlen(name ? name : "") <
	       sizeof(((struct iso_partition *)0)->name);
}

static int cmp_name_idx(const void *a, const void *b, void *ctx)
{
	const struct iso_partition *parts = ctx;
	return strcmp(parts[*(const int *)a].name, parts[*(const int *)b].name);
}

/* Gives every partition with a colliding plain name its suffixed name. */
static int unique_names(struct iso_partition *parts, int n, const char **src, const char **prefix)
{
	_cleanup_free_ int *order = malloc(sizeof(*order) * (size_t)(n ? n : 1));
	if (!order)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, (size_t)n, sizeof(*order), cmp_name_idx, parts);
	for (int i = 0; i < n;) {
		int j = i + 1;
		while (j < n && strcmp(parts[order[i]].name, parts[order[j]].name) == 0)
			j++;
		for (int k = i; j - i > 1 && k < j; k++)
			part_name(&parts[order[k]], prefix[order[k]], src[order[k]], true);
		i = j;
	}
	return 0;
}

/* Sorts and de-duplicates members in place (a full entry wins over a
 * limited one for the same GUID). */
static int sort_members(struct iso_fabric_member *m, int n)
{
	if (n == 0)
		return 0;
	qsort(m, (size_t)n, sizeof(*m), cmp_member);
	int w = 0;
	for (int i = 0; i < n; i++) {
		if (w > 0 && m[w - 1].guid == m[i].guid) {
			if (m[i].membership == ISO_MEMBER_FULL)
				m[w - 1].membership = ISO_MEMBER_FULL;
			m[w - 1].external |= m[i].external;
			continue;
		}
		m[w++] = m[i];
	}
	return w;
}

void iso_port_caps_clear(struct iso_port_caps *c)
{
	free(c->guid);
	free(c->cap);
	memset(c, 0, sizeof(*c));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

int iso_port_caps_from_snapshot(const struct iso_fabric_snapshot *s, struct iso_port_caps *out)
{
	uint64_t *pairs = calloc((size_t)s->n_ports + 1, 2 * sizeof(uint64_t));
	int n = 0;

	memset(out, 0, sizeof(*out));
	if (!pairs)
		return -ENOMEM;
	for (int i = 0; i < s->n_ports; i++)
		if (s->ports[i].capacity > 0) {
			pairs[2 * n] = s->ports[i].guid;
			pairs[2 * n + 1] = (uint64_t)s->ports[i].capacity;
			n++;
		}
	qsort(pairs, (size_t)n, 2 * sizeof(uint64_t), cmp_u64);
	out->guid = calloc((size_t)n + 1, sizeof(*out->guid));
	out->cap = calloc((size_t)n + 1, sizeof(*out->cap));
	if (!out->guid || !out->cap) {
		free(pairs);
		iso_port_caps_clear(out);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		out->guid[i] = pairs[2 * i];
		out->cap[i] = (int)pairs[2 * i + 1];
	}
	out->n = n;
	free(pairs);
	return 0;
}

/* The capacity the fabric reported for `guid`, or 0 when unknown. */
static int read_cap(const struct iso_port_caps *c, uint64_t guid)
{
	int lo = 0, hi = c ? c->n - 1 : -1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (c->guid[mid] == guid)
			return c->cap[mid];
		if (c->guid[mid] < guid)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return 0;
}

/* The node and P_Key capacity of an assigned GUID, from its assignment and
 * what the fabric reported. */
static int check_capacity(const struct iso_inventory *inv, const struct iso_fabric_tenant *tenants,
                          const struct iso_port_assignment *a, int tenant,
                          const struct iso_port_caps *caps, struct iso_error *err)
{
	const struct iso_node *node = &inv->nodes[a->node];
	int keys = iso_fabric_port_table_count(inv, 1); /* Default, every service, its tenant */
	int cap = node->port.pkey_capacity, read = read_cap(caps, a->guid);
	bool from_fabric = read > 0 && read < cap;

	if (from_fabric)
		cap = read;
	if (keys <= cap)
		return 0;
	return iso_error_set(err, ISO_E_NO_CAPACITY, "fabric",
	                     "node %s port 0x%016llx would hold %d P_Keys (Default, %d shared "
	                     "services, tenant '%s') but its capacity is %d%s",
	                     node->name, (unsigned long long)a->guid, keys, inv->fabric.n_services,
	                     tenants[tenant].name, cap,
	                     from_fabric ? " (NodeInfo.PartitionCap read from the fabric; the "
	                                   "inventory says more)"
	                                 : "");
}

static int cmp_int2(const void *a, const void *b)
{
	const int *x = a, *y = b;
	return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

int iso_fabric_port_table_count(const struct iso_inventory *inv, int n_partitions)
{
	return 1 + inv->fabric.n_services + n_partitions; /* Default, services, partitions */
}

/* A node's port (its PF) and its VFs share one P_Key table on ConnectX
 * (128 entries, Default included; docs/reference-fabric.md): count, per
 * port, the distinct partitions its GUIDs join, and refuse an intent that
 * would hold more than the table, naming the node's port. The SM would
 * otherwise drop keys silently (OpenSM ERR 0512). */
static int check_port_tables(const struct iso_inventory *inv,
                             const struct iso_port_assignment *assign, const struct slot *slots,
                             int n, const struct iso_port_caps *caps, struct iso_error *err)
{
	_cleanup_free_ int *pairs = malloc(sizeof(int) * 2 * (size_t)(n > 0 ? n : 1));

	if (!pairs)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		pairs[2 * i] = assign[slots[i].assign].node;
		pairs[2 * i + 1] = slots[i].tenant;
	}
	qsort(pairs, (size_t)n, 2 * sizeof(int), cmp_int2);
	for (int i = 0; i < n;) {
		int node = pairs[2 * i], parts = 0, j = i;
		for (; j < n && pairs[2 * j] == node; j++)
			parts += j == i || pairs[2 * j + 1] != pairs[2 * j - 1];
		i = j;
		const struct iso_node *nd = &inv->nodes[node];
		int keys = iso_fabric_port_table_count(inv, parts);
		int cap = nd->port.pkey_capacity, read = read_cap(caps, nd->port.guid);
		bool from_fabric = read > 0 && read < cap;
		char field[ISO_NAME_MAX + 16];

		if (from_fabric)
			cap = read;
		if (keys <= cap)
			continue;
		snprintf(field, sizeof(field), "nodes.%s.port", nd->name);
		return iso_error_set(
		    err, ISO_E_NO_CAPACITY, field,
		    "node %s port 0x%016llx and its VFs would hold %d P_Keys "
		    "(Default, %d shared services, %d tenant and allocation "
		    "partitions) but its P_Key table holds %d%s",
		    nd->name, (unsigned long long)nd->port.guid, keys, inv->fabric.n_services,
		    parts, cap, from_fabric ? " (NodeInfo.PartitionCap read from the fabric)" : "");
	}
	return 0;
}

int iso_fabric_intent_build(const struct iso_inventory *inv,
                            const struct iso_fabric_tenant *tenants, int n_tenants,
                            const struct iso_port_assignment *assign, int n_assign,
                            struct iso_fabric_intent *out, struct iso_error *err)
{
	return iso_fabric_intent_build_caps(inv, tenants, n_tenants, assign, n_assign, NULL, out,
	                                    err);
}

int iso_fabric_intent_build_caps(const struct iso_inventory *inv,
                                 const struct iso_fabric_tenant *tenants, int n_tenants,
                                 const struct iso_port_assignment *assign, int n_assign,
                                 const struct iso_port_caps *caps, struct iso_fabric_intent *out,
                                 struct iso_error *err)
{
	const struct iso_fabric_config *fc = &inv->fabric;
	_cleanup_(intent_cleanup) struct iso_fabric_intent in = {0};
	_cleanup_free_ struct slot *slots = NULL;
	_cleanup_free_ bool *active = calloc((size_t)(n_tenants > 0 ? n_tenants : 1), sizeof(bool));
	_cleanup_free_ int *count = calloc((size_t)(n_tenants > 0 ? n_tenants : 1), sizeof(int));
	int r;

	if (n_tenants < 0 || n_assign < 0)
		return iso_error_set(err, ISO_E_INVALID, "fabric", "negative tenant or port count");
	slots = malloc(sizeof(*slots) * (size_t)(n_assign > 0 ? n_assign : 1));
	if (!slots || !active || !count)
		return -ENOMEM;

	for (int i = 0; i < n_assign; i++) {
		r = check_assignment(inv, &assign[i], i, err);
		if (r < 0)
			return r;
		int t = find_tenant(tenants, n_tenants, assign[i].tenant_id,
		                    assign[i].own_vf ? "" : assign[i].alloc);
		if (t < 0)
			return iso_error_set(err, ISO_E_INVALID, "fabric",
			                     "assignment %d: tenant id %lld%s%s has no P_Key", i,
			                     (long long)assign[i].tenant_id,
			                     assign[i].alloc[0] ? " allocation " : "",
			                     assign[i].alloc);
		active[t] = true;
		slots[i] = (struct slot){.guid = assign[i].guid, .tenant = t, .assign = i};
	}
	r = check_tenant_keys(inv, tenants, active, n_tenants, err);
	if (r < 0)
		return r;

	/* One GUID, one tenant: neighbours after sorting by GUID tell. */
	qsort(slots, (size_t)n_assign, sizeof(*slots), cmp_slot);
	for (int i = 1; i < n_assign; i++) {
		const struct iso_fabric_tenant *a = &tenants[slots[i - 1].tenant],
		                               *b = &tenants[slots[i].tenant];
		if (slots[i].guid == slots[i - 1].guid && slots[i].tenant != slots[i - 1].tenant &&
		    a->tenant_id == b->tenant_id)
			return iso_error_set(err, ISO_E_CONFLICT, "fabric",
			                     "port GUID 0x%016llx is assigned to two partitions of "
			                     "tenant '%s' ('%s' and '%s'): one port, one partition",
			                     (unsigned long long)slots[i].guid, a->name,
			                     alloc_of(a)[0] ? alloc_of(a) : "the tenant's",
			                     alloc_of(b)[0] ? alloc_of(b) : "the tenant's");
		if (slots[i].guid == slots[i - 1].guid && slots[i].tenant != slots[i - 1].tenant)
			return iso_error_set(err, ISO_E_CONFLICT, "fabric",
			                     "port GUID 0x%016llx is assigned to tenants '%s' and "
			                     "'%s': one port, one tenant",
			                     (unsigned long long)slots[i].guid,
			                     tenants[slots[i - 1].tenant].name,
			                     tenants[slots[i].tenant].name);
	}
	int n_unique = 0;
	for (int i = 0; i < n_assign; i++) {
		if (i > 0 && slots[i].guid == slots[i - 1].guid)
			continue;
		r = check_capacity(inv, tenants, &assign[slots[i].assign], slots[i].tenant, caps,
		                   err);
		if (r < 0)
			return r;
		slots[n_unique++] = slots[i];
		count[slots[i].tenant]++;
	}
	r = check_port_tables(inv, assign, slots, n_unique, caps, err);
	if (r < 0)
		return r;

	int n_active = 0;
	for (int t = 0; t < n_tenants; t++)
		n_active += active[t];
	int n_parts = 1 + fc->n_services + n_active;
	in.parts = calloc((size_t)n_parts, sizeof(*in.parts));
	_cleanup_free_ const char **src = calloc((size_t)n_parts, sizeof(*src));
	_cleanup_free_ const char **prefix = calloc((size_t)n_parts, sizeof(*prefix));
	_cleanup_free_ char(*label)[ISO_NAME_MAX + ISO_ID_MAX + 2] =
	    calloc((size_t)n_parts, sizeof(*label));
	if (!in.parts || !src || !prefix || !label)
		return -ENOMEM;

	/* Default: ALL=limited, SELF=full are implied, so no explicit members. */
	in.parts[0] = (struct iso_partition){
	    .kind = ISO_PART_DEFAULT, .pkey = ISO_PKEY_DEFAULT, .ipoib = true};
	iso_strlcpy(in.parts[0].name, "Default", sizeof(in.parts[0].name));
	src[0] = "Default";
	prefix[0] = "";
	in.n_parts = 1;

	for (int s = 0; s < fc->n_services; s++) {
		const struct iso_shared_service *svc = &fc->services[s];
		struct iso_partition *p = &in.parts[in.n_parts];
		*p = (struct iso_partition){
		    .kind = ISO_PART_SERVICE, .pkey = svc->pkey, .ipoib = true};
		src[in.n_parts] = svc->name;
		prefix[in.n_parts] = "svc_";
		in.n_parts++;
		part_name(p, "svc_", svc->name, !name_fits("svc_", svc->name));
		p->members =
		    calloc((size_t)svc->n_guids + (size_t)n_unique + 1, sizeof(*p->members));
		if (!p->members)
			return -ENOMEM;
		for (int g = 0; g < svc->n_guids; g++)
			p->members[p->n_members++] =
			    (struct iso_fabric_member){svc->guids[g], ISO_MEMBER_FULL, false};
		for (int i = 0; i < n_unique; i++)
			p->members[p->n_members++] = (struct iso_fabric_member){
			    slots[i].guid, ISO_MEMBER_LIMITED,
			    assign[slots[i].assign].vf == ISO_VF_EXTERNAL};
		p->n_members = sort_members(p->members, p->n_members);
	}

	for (int t = 0; t < n_tenants; t++) {
		if (!active[t])
			continue;
		struct iso_partition *p = &in.parts[in.n_parts];
		*p = (struct iso_partition){.kind = ISO_PART_TENANT,
		                            .pkey = tenants[t].pkey,
		                            .tenant_id = tenants[t].tenant_id,
		                            .ipoib = true,
		                            .indx0 = false};
		iso_strlcpy(p->tenant, tenants[t].name ? tenants[t].name : "", sizeof(p->tenant));
		iso_strlcpy(p->alloc, alloc_of(&tenants[t]), sizeof(p->alloc));
		/* an allocation's partition: t_<tenant>_<allocation id> */
		if (p->alloc[0])
			snprintf(label[in.n_parts], sizeof(label[0]), "%s_%s",
			         tenants[t].name ? tenants[t].name : "", p->alloc);
		else
			iso_strlcpy(label[in.n_parts], tenants[t].name ? tenants[t].name : "",
			            sizeof(label[0]));
		src[in.n_parts] = label[in.n_parts];
		prefix[in.n_parts] = "t_";
		part_name(p, "t_", src[in.n_parts], !name_fits("t_", src[in.n_parts]));
		in.n_parts++;
		p->members = calloc((size_t)count[t], sizeof(*p->members));
		if (!p->members)
			return -ENOMEM;
		for (int i = 0; i < n_unique; i++)
			if (slots[i].tenant == t)
				p->members[p->n_members++] = (struct iso_fabric_member){
				    slots[i].guid, ISO_MEMBER_FULL,
				    assign[slots[i].assign].vf == ISO_VF_EXTERNAL};
	}

	r = unique_names(in.parts, in.n_parts, src, prefix);
	if (r < 0)
		return r;
	qsort(in.parts, (size_t)in.n_parts, sizeof(*in.parts), cmp_part);
	*out = in;
	memset(&in, 0, sizeof(in));
	return 0;
}

/* fabric.c: the controller's side of tenant partitions (docs/fabric.md).
 * Each tenant of an InfiniBand or Omni-Path cluster holds one P_Key from the
 * inventory's range; each tenant present on a node holds one VF of the
 * node's port (the PF on a node without VFs). Both are durable, and both
 * change in the same store transaction as the allocation that causes them:
 * a use case stages the new assignment and intent before its commit (a
 * change that would overflow a port's P_Key table or join two tenants is
 * refused there, with nothing written), and hands the intent to the driver
 * after it. An allocation counts as active only once the driver has read the
 * intent back from the fabric; the daemon's tick promotes it then. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "controller/tnum.h"

#define MAX_TENANTS_PER_NODE 256

/* A P_Key held: a tenant's own (alloc ""), or one allocation's of a
 * per-allocation tenant (docs/fabric.md, "Per-allocation partitions"). */
struct ctl_key {
	int64_t tenant_id;
	char tenant[ISO_NAME_MAX];
	uint16_t pkey;
	char alloc[ISO_ID_MAX];
	bool per_alloc; /* the tenant's own key: its allocations get keys of their own */
};

/* An allocation's key in quarantine: it still counts against the tenant
 * that released it until the quarantine ends (its limits.max_live bounds
 * the keys it holds, live and quarantined together). */
struct ctl_qkey {
	int64_t tenant_id;
	uint16_t pkey;
	int64_t released_ms;
};

struct ctl_waiter {
	char id[ISO_ID_MAX];
	uint64_t generation;
};

struct ctl_fabric {
	struct iso_fabric_driver *drv;
	bool partitioned; /* infiniband / omnipath: P_Keys and VFs */
	bool sync;        /* the driver confirms as it applies (sim, opafm) */
	struct iso_pkey_pool pool;
	struct ctl_key *keys;
	int n_keys, cap_keys;
	/* staged with the ports: the keys after the transaction, and the keys
	 * taken from the pool for it (given back at once on an abort) */
	struct ctl_key *staged_keys;
	int n_staged_keys;
	uint16_t *taken;
	int n_taken;
	struct ctl_qkey *qkeys;
	int n_qkeys, cap_qkeys;
	int64_t stage_now; /* when the staged allocation keys were released */
	/* committed and staged port assignments */
	struct iso_port_assignment *ports, *staged;
	int n_ports, n_staged;
	struct iso_fabric_intent intent, staged_intent;
	bool have_staged;
	uint64_t generation; /* of the last intent handed to the driver */
	struct iso_fabric_status status;
	char last_incident[256];
	struct ctl_waiter *waiters; /* allocations waiting for a confirmation */
	int n_waiters, cap_waiters;
	/* P_Key capacities the fabric reported (NodeInfo.PartitionCap), from
	 * the last full read: at start and at every verification. */
	struct iso_port_caps caps;
	/* ethernet with fabric.vlan_range: each tenant's RoCE VLAN (tnum.h) */
	struct ctl_tnums vlans;
};

static const struct ctl_tnum_kind vlan_kind = {
    .meta_prefix = "vlan.tenant.",
    .field = "fabric.vlan_range",
    .noun = "VLAN",
    .limit = CTL_VLAN_MAX,
    .log_event = "fabric_vlans_assigned",
};

static void clear_ports(struct iso_port_assignment **p, int *n)
{
	free(*p);
	*p = NULL;
	*n = 0;
}

void ctl_fabric_close(struct iso_controller *c)
{
	struct ctl_fabric *f = c->fabric;

	ctl_vni_close(c);
	if (!f)
		return;
	ctl_tnums_close(&f->vlans);
	if (f->drv)
		f->drv->ops->free(f->drv);
	iso_pkey_pool_free(&f->pool);
	free(f->keys);
	free(f->staged_keys);
	free(f->taken);
	free(f->qkeys);
	clear_ports(&f->ports, &f->n_ports);
	clear_ports(&f->staged, &f->n_staged);
	iso_fabric_intent_clear(&f->intent);
	iso_fabric_intent_clear(&f->staged_intent);
	iso_port_caps_clear(&f->caps);
	free(f->waiters);
	free(f);
	c->fabric = NULL;
}

/* The key of (tenant, allocation) in keys[0..n): alloc "" is the tenant's own. */
static struct ctl_key *find_key(struct ctl_key *keys, int n, int64_t tenant_id, const char *alloc)
{
	for (int i = 0; i < n; i++)
		if (keys[i].tenant_id == tenant_id && strcmp(keys[i].alloc, alloc) == 0)
			return &keys[i];
	return NULL;
}

static struct ctl_key *key_of(struct ctl_fabric *f, int64_t tenant_id)
{
	return find_key(f->keys, f->n_keys, tenant_id, "");
}

static int key_add(struct ctl_fabric *f, int64_t tenant_id, const char *name, uint16_t pkey)
{
	if (f->n_keys == f->cap_keys) {
		int cap = f->cap_keys ? 2 * f->cap_keys : 16;
		struct ctl_key *k = realloc(f->keys, (size_t)cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		f->keys = k;
		f->cap_keys = cap;
	}
	f->keys[f->n_keys] = (struct ctl_key){.tenant_id = tenant_id, .pkey = pkey};
	iso_strlcpy(f->keys[f->n_keys].tenant, name, sizeof(f->keys[f->n_keys].tenant));
	f->n_keys++;
	return 0;
}

static int qkey_add(struct ctl_fabric *f, int64_t tenant_id, uint16_t pkey, int64_t released_ms)
{
	if (f->n_qkeys == f->cap_qkeys) {
		int cap = f->cap_qkeys ? 2 * f->cap_qkeys : 16;
		struct ctl_qkey *q = realloc(f->qkeys, (size_t)cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		f->qkeys = q;
		f->cap_qkeys = cap;
	}
	f->qkeys[f->n_qkeys++] = (struct ctl_qkey){tenant_id, pkey, released_ms};
	return 0;
}

/* The tenant's allocation keys still in quarantine at `now`; forgets the
 * ones whose quarantine is over. */
static int qkeys_of(struct ctl_fabric *f, int64_t tenant_id, int64_t now)
{
	int n = 0;

	for (int i = 0; i < f->n_qkeys;) {
		if (now - f->qkeys[i].released_ms >= f->pool.quarantine_ms) {
			f->qkeys[i] = f->qkeys[--f->n_qkeys];
			continue;
		}
		n += f->qkeys[i].tenant_id == tenant_id;
		i++;
	}
	return n;
}

static uint64_t port_guid(const struct iso_node *n, int vf)
{
	return vf < 0 ? n->port.guid : n->port.vf_guids[vf];
}

static int load_ports(struct iso_controller *c, const struct iso_fabric_port_row *ports,
                      int n_ports, struct iso_error *err);

/* Loads keys and assignments; tenants without a key (created before the
 * fabric was partitioned) get one. */
static int load(struct iso_controller *c, struct iso_error *err)
{
	struct ctl_fabric *f = c->fabric;
	const struct iso_store_ops *ops = c->store->ops;
	_cleanup_free_ struct iso_fabric_key_row *keys = NULL;
	_cleanup_free_ struct iso_fabric_port_row *ports = NULL;
	int n_keys = 0, n_ports = 0, r;

	r = ops->fabric_key_list(c->store, &keys, &n_keys, err);
	if (r == 0)
		r = ops->fabric_port_list(c->store, &ports, &n_ports, err);
	if (r < 0)
		return r;
	for (int i = 0; i < n_keys; i++) {
		struct iso_tenant t;
		if (keys[i].pkey < f->pool.min || keys[i].pkey > f->pool.max)
			return iso_error_set(
			    err, ISO_E_INVALID, "fabric.pkey_range",
			    "the store holds P_Key 0x%04x outside fabric.pkey_range "
			    "0x%04x-0x%04x: widen the range again",
			    keys[i].pkey, f->pool.min, f->pool.max);
		if (keys[i].tenant_id == 0 || keys[i].released_ms > 0) {
			iso_pkey_pool_mark_quarantined(&f->pool, (uint16_t)keys[i].pkey,
			                               keys[i].released_ms);
			/* an allocation's key: counts against its tenant meanwhile */
			if (keys[i].tenant_id != 0 &&
			    qkey_add(f, keys[i].tenant_id, (uint16_t)keys[i].pkey,
			             keys[i].released_ms) < 0)
				return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			continue;
		}
		r = ops->tenant_get_by_id(c->store, keys[i].tenant_id, &t, err);
		if (r < 0)
			return r;
		if (iso_pkey_pool_mark_used(&f->pool, (uint16_t)keys[i].pkey) < 0 ||
		    key_add(f, t.id, t.name, (uint16_t)keys[i].pkey) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "fabric",
			                     "P_Key 0x%04x cannot be restored", keys[i].pkey);
		struct ctl_key *k = &f->keys[f->n_keys - 1];
		iso_strlcpy(k->alloc, keys[i].alloc_id, sizeof(k->alloc));
		k->per_alloc = !k->alloc[0] && t.partition == ISO_PARTITION_PER_ALLOCATION;
	}
	return load_ports(c, ports, n_ports, err);
}

/* The stored VF assignments still valid in the inventory into f->ports. */
static int load_ports(struct iso_controller *c, const struct iso_fabric_port_row *ports,
                      int n_ports, struct iso_error *err)
{
	struct ctl_fabric *f = c->fabric;

	f->ports = calloc((size_t)n_ports + 1, sizeof(*f->ports));
	if (!f->ports)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < n_ports; i++) {
		int ni = iso_cluster_state_node_index(&c->cs, ports[i].node);
		const struct iso_node *n = ni >= 0 ? &c->inv->nodes[ni] : NULL;
		if (!n || !n->has_port || ports[i].vf >= n->port.n_vfs ||
		    (ports[i].vf < 0 && n->port.n_vfs > 0))
			continue; /* the inventory changed: the next sync drops it */
		f->ports[f->n_ports++] =
		    (struct iso_port_assignment){.node = ni,
		                                 .tenant_id = ports[i].tenant_id,
		                                 .vf = ports[i].vf,
		                                 .guid = port_guid(n, ports[i].vf)};
		iso_strlcpy(f->ports[f->n_ports - 1].alloc, ports[i].alloc_id,
		            sizeof(f->ports[0].alloc));
		/* an allocation's VF of a per-tenant tenant: a pod's attachment */
		const struct ctl_key *tk = key_of(f, ports[i].tenant_id);
		f->ports[f->n_ports - 1].own_vf = ports[i].alloc_id[0] && tk && !tk->per_alloc;
	}
	return 0;
}

/* Keeps the capacities a full read of the fabric reported. */
static void learn_caps(struct ctl_fabric *f, const struct iso_fabric_snapshot *snap)
{
	struct iso_port_caps caps;

	if (iso_port_caps_from_snapshot(snap, &caps) < 0)
		return;
	iso_port_caps_clear(&f->caps);
	f->caps = caps;
}

int ctl_fabric_open(struct iso_controller *c, const char *state_dir, struct iso_error *err)
{
	const struct iso_fabric_config *fc = &c->inv->fabric;
	struct ctl_fabric *f = calloc(1, sizeof(*f));
	int r;

	if (!f)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->fabric = f;
	f->partitioned = fc->type == ISO_FABRIC_INFINIBAND || fc->type == ISO_FABRIC_OMNIPATH;
	r = iso_fabric_driver_open(c->inv, state_dir, &f->drv, err);
	if (r < 0)
		return r;
	if (!f->partitioned) {
		_cleanup_free_ struct iso_fabric_port_row *ports = NULL;
		int n_ports = 0;

		r = ctl_vni_open(c, err);
		if (r < 0 || fc->type != ISO_FABRIC_ETHERNET || !fc->vlan_min)
			return r;
		/* RoCE VFs: the tenants' VLANs and the VFs they hold */
		r = ctl_tnums_open(c, &f->vlans, &vlan_kind, fc->vlan_min, fc->vlan_max, err);
		if (r == 0)
			r = c->store->ops->fabric_port_list(c->store, &ports, &n_ports, err);
		return r < 0 ? r : load_ports(c, ports, n_ports, err);
	}
	r = iso_pkey_pool_init(&f->pool, fc->pkey_min, fc->pkey_max,
	                       fc->pkey_quarantine_ms > 0 ? fc->pkey_quarantine_ms : 0, fc);
	if (r < 0)
		return iso_error_set(err, ISO_E_INVALID, "fabric.pkey_range",
		                     "fabric.pkey_range: cannot build the P_Key pool");
	/* What the HCAs say they hold: an HCA with a smaller P_Key table than
	 * the inventory claims must not be overfilled. A fabric that cannot be
	 * read now (SM host without a port, ibsim not up) is read at the next
	 * verification. */
	if (strcmp(f->drv->ops->name, "sim") != 0) {
		struct iso_fabric_snapshot snap = {0};
		struct iso_error e = {0};
		if (f->drv->ops->snapshot(f->drv, &snap, &e) == 0) {
			learn_caps(f, &snap);
			iso_log(ISO_LOG_INFO, "fabric_capacities", "ports=%d read_ms=%lld",
			        f->caps.n, (long long)snap.read_ms);
		} else {
			iso_log(ISO_LOG_WARN, "fabric_capacities_unread", "error=\"%s\"",
			        e.message);
		}
		iso_fabric_snapshot_clear(&snap);
	}
	return load(c, err);
}

bool ctl_fabric_partitioned(const struct iso_controller *c)
{
	return c->fabric && c->fabric->partitioned;
}

int ctl_fabric_tenant_pkey(const struct iso_controller *c, int64_t tenant_id)
{
	struct ctl_key *k = c->fabric ? key_of(c->fabric, tenant_id) : NULL;

	return k ? k->pkey : -1;
}

int iso_controller_tenant_pkey(const struct iso_controller *c, int64_t tenant_id)
{
	return ctl_fabric_tenant_pkey(c, tenant_id);
}

int iso_controller_alloc_pkey(const struct iso_controller *c, const struct iso_allocation *a)
{
	struct ctl_fabric *f = c->fabric;
	struct ctl_key *k = f ? find_key(f->keys, f->n_keys, a->tenant_id, a->id) : NULL;

	if (k)
		return k->pkey;
	k = f ? key_of(f, a->tenant_id) : NULL;
	/* a per-allocation tenant's allocation without a key of its own (not
	 * placed, or released) is in no partition */
	return k && !k->per_alloc ? k->pkey : -1;
}

bool ctl_fabric_tenant_per_alloc(const struct iso_controller *c, int64_t tenant_id)
{
	struct ctl_key *k = c->fabric ? key_of(c->fabric, tenant_id) : NULL;

	return k && k->per_alloc;
}

void ctl_fabric_tenant_mode_set(struct iso_controller *c, int64_t tenant_id,
                                enum iso_partition_mode mode)
{
	struct ctl_key *k = c->fabric ? key_of(c->fabric, tenant_id) : NULL;

	if (k)
		k->per_alloc = mode == ISO_PARTITION_PER_ALLOCATION;
}

uint16_t ctl_fabric_tenant_vlan(const struct iso_controller *c, int64_t tenant_id)
{
	return c->fabric ? (uint16_t)ctl_tnums_of(&c->fabric->vlans, tenant_id) : 0;
}

int64_t ctl_fabric_vlan_owner(const struct iso_controller *c, uint16_t vlan)
{
	return c->fabric ? ctl_tnums_owner(&c->fabric->vlans, vlan) : 0;
}

uint16_t iso_controller_tenant_vlan(const struct iso_controller *c, int64_t tenant_id)
{
	return ctl_fabric_tenant_vlan(c, tenant_id);
}

/* ---- tenants: inside the tenant's transaction ---- */

int ctl_fabric_tenant_create(struct iso_controller *c, const struct iso_tenant *t,
                             struct iso_error *err)
{
	struct ctl_fabric *f = c->fabric;
	uint16_t pkey;
	int r;

	if (!ctl_fabric_partitioned(c)) {
		r = ctl_vni_tenant_create(c, t, err);
		return r < 0 || !f ? r : ctl_tnums_tenant_create(c, &f->vlans, t, err);
	}
	r = iso_pkey_pool_take(&f->pool, iso_now_ms(), &pkey, err);
	if (r < 0)
		return r;
	r = c->store->ops->fabric_key_put(
	    c->store, &(struct iso_fabric_key_row){.pkey = pkey, .tenant_id = t->id}, err);
	if (r == 0)
		r = key_add(f, t->id, t->name, pkey) < 0
		        ? iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory")
		        : 0;
	if (r == 0)
		f->keys[f->n_keys - 1].per_alloc = t->partition == ISO_PARTITION_PER_ALLOCATION;
	if (r < 0)
		iso_pkey_pool_release(&f->pool, pkey, 0); /* never handed out: free at once */
	return r;
}

/* After a rolled-back tenant creation: forget the key taken for it. */
void ctl_fabric_tenant_create_undo(struct iso_controller *c, int64_t tenant_id)
{
	struct ctl_fabric *f = c->fabric;
	struct ctl_key *k = f ? key_of(f, tenant_id) : NULL;

	ctl_vni_tenant_create_undo(c, tenant_id);
	if (f)
		ctl_tnums_forget(&f->vlans, tenant_id);
	if (!k)
		return;
	iso_pkey_pool_release(&f->pool, k->pkey, 0);
	*k = f->keys[--f->n_keys];
}

int ctl_fabric_tenant_delete(struct iso_controller *c, int64_t tenant_id, int64_t now,
                             struct iso_error *err)
{
	struct ctl_fabric *f = c->fabric;
	struct ctl_key *k = f ? key_of(f, tenant_id) : NULL;
	int r = ctl_vni_tenant_delete(c, tenant_id, err);

	if (r == 0 && f)
		r = ctl_tnums_tenant_delete(c, &f->vlans, tenant_id, err);
	if (!k || r < 0)
		return r;
	return c->store->ops->fabric_key_put(
	    c->store, &(struct iso_fabric_key_row){.pkey = k->pkey, .released_ms = now}, err);
}

void ctl_fabric_tenant_deleted(struct iso_controller *c, int64_t tenant_id, int64_t now)
{
	struct ctl_fabric *f = c->fabric;
	struct ctl_key *k = f ? key_of(f, tenant_id) : NULL;

	ctl_vni_tenant_deleted(c, tenant_id);
	if (f)
		ctl_tnums_forget(&f->vlans, tenant_id);
	if (!k)
		return;
	iso_pkey_pool_release(&f->pool, k->pkey, now);
	*k = f->keys[--f->n_keys];
}

/* ---- allocations: stage inside the transaction, commit after it ---- */

static const struct iso_port_assignment *find_port(const struct iso_port_assignment *p, int n,
                                                   int node, int64_t tenant, const char *alloc)
{
	for (int i = 0; i < n; i++)
		if (p[i].node == node && p[i].tenant_id == tenant && strcmp(p[i].alloc, alloc) == 0)
			return &p[i];
	return NULL;
}

/* The lowest VF of node `ni` that no tenant in `p` holds; -1 for the PF of a
 * node without VFs; -2 when none is free. */
static int free_vf(const struct iso_node *n, int ni, const struct iso_port_assignment *p, int np)
{
	if (n->port.n_vfs == 0) {
		for (int i = 0; i < np; i++)
			if (p[i].node == ni)
				return -2;
		return -1;
	}
	for (int vf = 0; vf < n->port.n_vfs; vf++) {
		bool used = false;
		for (int i = 0; i < np && !used; i++)
			used = p[i].node == ni && p[i].vf == vf;
		if (!used)
			return vf;
	}
	return -2;
}

/* The distinct allocations of `tenant` with members on node ni, from the
 * node agents' view of the cluster state (it follows every take and give at
 * once, inside the transaction): up to `max` ids into out. */
/* The tenant's allocations on node ni into out (each once); which: every
 * one (ALLOCS_ALL), the pods' CNI attachments alone (ALLOCS_ATTACHMENTS),
 * or the others (ALLOCS_OTHERS). */
enum { ALLOCS_ALL, ALLOCS_ATTACHMENTS, ALLOCS_OTHERS };
static int node_allocs_which(const struct iso_controller *c, int ni, int64_t tenant,
                             const char **out, int max, int which)
{
	struct ctl_overlay_view v;
	int n = 0;

	ctl_agents_overlay_view(c, ni, &v);
	for (int i = 0; i < v.n_members; i++) {
		const char *a;
		int m;
		int64_t t;
		bool seen = false;

		ctl_agents_node_member(c, ni, i, &a, &m, &t);
		if (t != tenant)
			continue;
		if (which != ALLOCS_ALL &&
		    ctl_agents_node_member_attachment(c, ni, i) != (which == ALLOCS_ATTACHMENTS))
			continue;
		for (int j = 0; j < n && !seen; j++)
			seen = strcmp(out[j], a) == 0;
		if (!seen && n < max)
			out[n++] = a;
	}
	return n;
}

static int node_allocs(const struct iso_controller *c, int ni, int64_t tenant, const char **out,
                       int max)
{
	return node_allocs_which(c, ni, tenant, out, max, ALLOCS_ALL);
}

static bool alloc_on_node(const struct iso_controller *c, int ni, int64_t tenant, const char *alloc)
{
	struct ctl_overlay_view v;

	ctl_agents_overlay_view(c, ni, &v);
	for (int i = 0; i < v.n_members; i++) {
		const char *a;
		int m;
		int64_t t;

		ctl_agents_node_member(c, ni, i, &a, &m, &t);
		if (t == tenant && strcmp(a, alloc) == 0)
			return true;
	}
	return false;
}

static int no_vf(const struct iso_node *node, const char *alloc, bool own_vf, struct iso_error *err)
{
	char field[ISO_NAME_MAX + 24];

	snprintf(field, sizeof(field), "nodes.%s.port.vfs", node->name);
	if (alloc[0] && own_vf)
		return iso_error_set(err, ISO_E_NO_CAPACITY, field,
		                     "node %s has no free VF for pod attachment %s: each pod holds "
		                     "a VF of its own, and all %d are held",
		                     node->name, alloc, node->port.n_vfs);
	if (alloc[0])
		return iso_error_set(err, ISO_E_NO_CAPACITY, field,
		                     "node %s has no free VF for allocation %s: a per-allocation "
		                     "tenant's allocation holds a VF of its own on every node, and "
		                     "all %d are held",
		                     node->name, alloc, node->port.n_vfs);
	return iso_error_set(err, ISO_E_NO_CAPACITY, field,
	                     "node %s has no free VF for another tenant", node->name);
}

/* Allocation `alloc` of per-allocation tenant `tk` holds a key of its own in
 * the staged keys: taken now unless it has one. The tenant's allocation
 * keys, live and in quarantine after release, never pass its
 * limits.max_live: per-allocation partitions give a tenant no more keys
 * than it may hold allocations. The key is a random free one (not the
 * lowest), so its number tells nothing about which keys others hold. */
static int stage_alloc_key(struct iso_controller *c, const struct ctl_key *tk, const char *alloc,
                           int64_t now, struct iso_error *err)
{
	struct ctl_fabric *f = c->fabric;
	struct iso_tenant t;
	int held = 0, quarantined, max_live, r;
	uint16_t pkey;

	if (find_key(f->staged_keys, f->n_staged_keys, tk->tenant_id, alloc))
		return 0;
	for (int i = 0; i < f->n_staged_keys; i++)
		held += f->staged_keys[i].tenant_id == tk->tenant_id &&
		        f->staged_keys[i].alloc[0] && !ctl_neutron_is_key(f->staged_keys[i].alloc);
	quarantined = qkeys_of(f, tk->tenant_id, now);
	r = c->store->ops->tenant_get_by_id(c->store, tk->tenant_id, &t, err);
	if (r < 0)
		return r;
	max_live = t.max_live > 0 ? t.max_live : c->limits.max_live;
	if (held + quarantined >= max_live)
		return iso_error_set(
		    err, ISO_E_LIMIT, "limits.max_live",
		    "tenant \"%s\" holds %d allocation P_Keys and %d more in "
		    "quarantine after release (limits.max_live %d): each allocation "
		    "of a per-allocation tenant holds a key until %lld ms after its "
		    "release",
		    t.name, held, quarantined, max_live, (long long)f->pool.quarantine_ms);
	r = iso_pkey_pool_take_pick(&f->pool, now, randombytes_random(), &pkey, err);
	if (r < 0)
		return r;
	f->taken[f->n_taken++] = pkey;
	struct ctl_key *k = &f->staged_keys[f->n_staged_keys++];
	*k = (struct ctl_key){.tenant_id = tk->tenant_id, .pkey = pkey};
	iso_strlcpy(k->tenant, tk->tenant, sizeof(k->tenant));
	iso_strlcpy(k->alloc, alloc, sizeof(k->alloc));
	struct iso_fabric_key_row row = {.pkey = pkey, .tenant_id = tk->tenant_id};
	iso_strlcpy(row.alloc_id, alloc, sizeof(row.alloc_id));
	return c->store->ops->fabric_key_put(c->store, &row, err);
}

/* Allocation keys whose allocation holds no port any more go to quarantine
 * (in the store now, in the pool at the commit). */
static int stage_release_keys(struct iso_controller *c, const struct iso_port_assignment *next,
                              int n_next, int64_t now, struct iso_error *err)
{
	struct ctl_fabric *f = c->fabric;

	for (int i = 0; i < f->n_staged_keys;) {
		const struct ctl_key *k = &f->staged_keys[i];
		/* a Neutron network's key is held while the network is, with
		 * ports or none (stage_neutron) */
		bool used = !k->alloc[0] || ctl_neutron_is_key(k->alloc);

		for (int j = 0; j < n_next && !used; j++)
			used = next[j].tenant_id == k->tenant_id &&
			       strcmp(next[j].alloc, k->alloc) == 0;
		if (used) {
			i++;
			continue;
		}
		struct iso_fabric_key_row row = {
		    .pkey = k->pkey, .tenant_id = k->tenant_id, .released_ms = now};
		iso_strlcpy(row.alloc_id, k->alloc, sizeof(row.alloc_id));
		int r = c->store->ops->fabric_key_put(c->store, &row, err);
		if (r < 0)
			return r;
		f->staged_keys[i] = f->staged_keys[--f->n_staged_keys];
	}
	return 0;
}

static int key_quarantine_row(struct iso_controller *c, const struct ctl_key *k, int64_t now,
                              struct iso_error *err)
{
	struct iso_fabric_key_row row = {
	    .pkey = k->pkey, .tenant_id = k->tenant_id, .released_ms = now};

	iso_strlcpy(row.alloc_id, k->alloc, sizeof(row.alloc_id));
	return c->store->ops->fabric_key_put(c->store, &row, err);
}

/* OpenStack Neutron's networks hold exactly the keys they name (a network
 * gone, or moved to another key, leaves its old one to quarantine), and
 * their bound ports are external assignments in their network's partition
 * (docs/openstack.md). Before neutron.c has read its objects (the start),
 * nothing of theirs is touched. */
static int stage_neutron(struct iso_controller *c, struct iso_port_assignment *next, int *n_next,
                         int64_t now, struct iso_error *err)
{
	struct ctl_fabric *f = c->fabric;
	int n = 0, r;
	const struct iso_neutron_object *o = ctl_neutron_objects(c, &n);
	_cleanup_free_ bool *kept = calloc((size_t)n + 1, sizeof(*kept));
	char alloc[ISO_ID_MAX];

	if (!c->neutron)
		return 0;
	if (!kept)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < f->n_staged_keys;) {
		const struct ctl_key *k = &f->staged_keys[i];
		int at = ctl_neutron_is_key(k->alloc) ? ctl_neutron_find(c, k->alloc + 2) : -2;

		if (at == -2 || (at >= 0 && o[at].kind == ISO_NEUTRON_NETWORK &&
		                 o[at].pkey == k->pkey && o[at].tenant_id == k->tenant_id)) {
			if (at >= 0)
				kept[at] = true;
			i++;
			continue;
		}
		r = key_quarantine_row(c, k, now, err);
		if (r < 0)
			return r;
		f->staged_keys[i] = f->staged_keys[--f->n_staged_keys];
	}
	for (int i = 0; i < n; i++) {
		if (o[i].kind != ISO_NEUTRON_NETWORK || kept[i])
			continue;
		/* taken exactly: the network names its key. Refused without
		 * saying who holds it (another tenant, a service, quarantine) */
		if (iso_pkey_pool_take_exact(&f->pool, now, (uint16_t)o[i].pkey) < 0)
			return iso_error_set(err, ISO_E_CONFLICT, "provider:segmentation_id",
			                     "provider:segmentation_id: P_Key 0x%04x is not free",
			                     o[i].pkey);
		f->taken[f->n_taken++] = (uint16_t)o[i].pkey;
		struct ctl_key *k = &f->staged_keys[f->n_staged_keys++];
		*k = (struct ctl_key){.tenant_id = o[i].tenant_id, .pkey = (uint16_t)o[i].pkey};
		iso_controller_tenant_name(c, o[i].tenant_id, k->tenant, sizeof(k->tenant));
		ctl_neutron_key_alloc(o[i].uuid, k->alloc, sizeof(k->alloc));
		struct iso_fabric_key_row row = {.pkey = o[i].pkey, .tenant_id = o[i].tenant_id};
		iso_strlcpy(row.alloc_id, k->alloc, sizeof(row.alloc_id));
		r = c->store->ops->fabric_key_put(c->store, &row, err);
		if (r < 0)
			return r;
	}
	for (int i = 0; i < n; i++) {
		int ni = o[i].kind == ISO_NEUTRON_PORT
		             ? iso_cluster_state_node_index(&c->cs, o[i].host)
		             : -1;
		if (ni < 0 || !c->inv->nodes[ni].has_port)
			continue; /* a network, or a host the inventory lost */
		ctl_neutron_key_alloc(o[i].network, alloc, sizeof(alloc));
		next[*n_next] = (struct iso_port_assignment){.node = ni,
		                                             .tenant_id = o[i].tenant_id,
		                                             .vf = ISO_VF_EXTERNAL,
		                                             .guid = o[i].guid};
		iso_strlcpy(next[*n_next].alloc, alloc, sizeof(next[0].alloc));
		(*n_next)++;
	}
	return 0;
}

int ctl_fabric_stage(struct iso_controller *c, struct iso_error *err)
{
	struct ctl_fabric *f = c->fabric;
	const struct iso_store_ops *ops = c->store->ops;
	_cleanup_free_ struct iso_fabric_tenant *tenants = NULL;
	_cleanup_free_ const char **allocs = NULL;
	struct iso_port_assignment *next;
	int64_t here[MAX_TENANTS_PER_NODE];
	int64_t now = iso_now_ms();
	int n_next = 0, cap, max_members = 1, r;
	/* RoCE VFs on ethernet: VFs as on InfiniBand, each with its tenant's
	 * VLAN, no P_Keys and no partitions to program */
	bool roce = f && !f->partitioned && f->vlans.on;

	if (!ctl_fabric_partitioned(c) && !roce)
		return 0;
	ctl_fabric_abort(c);
	int n_neutron = 0;
	ctl_neutron_objects(c, &n_neutron);
	cap = f->n_ports + 16 + n_neutron;
	for (int ni = 0; ni < c->inv->n_nodes; ni++) {
		struct ctl_overlay_view v;
		ctl_agents_overlay_view(c, ni, &v);
		cap += iso_cluster_state_node_tenants(&c->cs, ni, here, 0) + v.n_members;
		max_members = v.n_members > max_members ? v.n_members : max_members;
	}
	/* malloc, not calloc: only the first n_next (n_staged_keys, n_taken)
	 * entries are ever read, each written whole first, and the arrays have
	 * room for every port of the cluster: clearing them cost more than the
	 * rest of this function (docs/benchmarks.md, "Where a create's time goes") */
	next = malloc((size_t)cap * sizeof(*next));
	if (!next)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	f->staged = next;
	if (!roce) {
		f->staged_keys = malloc((size_t)(f->n_keys + cap) * sizeof(*f->staged_keys));
		f->taken = malloc((size_t)cap * sizeof(*f->taken));
		allocs = calloc((size_t)max_members, sizeof(*allocs));
		if (!f->staged_keys || !f->taken || !allocs)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		if (f->n_keys)
			memcpy(f->staged_keys, f->keys, (size_t)f->n_keys * sizeof(*f->keys));
		f->n_staged_keys = f->n_keys;
	}
	/* Keep what still has members; drop the rest. */
	for (int i = 0; i < f->n_ports; i++) {
		const struct iso_port_assignment *p = &f->ports[i];
		bool live = false;
		if (p->vf == ISO_VF_EXTERNAL)
			continue; /* Neutron's ports: staged again from neutron.c */
		if (p->alloc[0]) {
			live = alloc_on_node(c, p->node, p->tenant_id, p->alloc);
		} else if (!roce) {
			/* the tenant's shared VF: for its members that are not
			 * pods' attachments (those hold VFs of their own) */
			live = node_allocs_which(c, p->node, p->tenant_id, allocs, 1,
			                         ALLOCS_OTHERS) > 0;
		} else {
			int n = iso_cluster_state_node_tenants(&c->cs, p->node, here,
			                                       MAX_TENANTS_PER_NODE);
			for (int t = 0; t < n && t < MAX_TENANTS_PER_NODE && !live; t++)
				live = here[t] == p->tenant_id;
		}
		if (live) {
			next[n_next++] = *p;
			continue;
		}
		r = ops->fabric_port_delete(c->store, c->inv->nodes[p->node].name, p->vf, err);
		if (r < 0)
			return r;
	}
	/* Give a port to every tenant new on a node, or to every allocation of a
	 * per-allocation tenant new there. */
	for (int ni = 0; ni < c->inv->n_nodes; ni++) {
		const struct iso_node *node = &c->inv->nodes[ni];
		int n = iso_cluster_state_node_tenants(&c->cs, ni, here, MAX_TENANTS_PER_NODE);

		if (!node->has_port || (roce && node->port.n_vfs == 0))
			continue;
		for (int t = 0; t < n && t < MAX_TENANTS_PER_NODE; t++) {
			const struct ctl_key *tk = roce ? NULL : key_of(f, here[t]);
			int n_al = 1, n_shared = 1;

			if (tk && tk->per_alloc) {
				n_al = node_allocs(c, ni, here[t], allocs, max_members);
				n_shared = 0;
			} else if (tk) {
				/* a pod's attachment holds a VF of its own, in the
				 * tenant's key; the tenant's other members share one */
				n_shared =
				    node_allocs_which(c, ni, here[t], allocs, 1, ALLOCS_OTHERS) > 0;
				n_al = n_shared + node_allocs_which(
				                      c, ni, here[t], allocs + n_shared,
				                      max_members - n_shared, ALLOCS_ATTACHMENTS);
			}
			for (int a = 0; a < n_al; a++) {
				bool own_vf = tk && !tk->per_alloc && a >= n_shared;
				const char *alloc =
				    tk && (tk->per_alloc || own_vf) ? allocs[a] : "";
				int vf;

				if (find_port(next, n_next, ni, here[t], alloc))
					continue;
				if (alloc[0] && !own_vf) {
					r = stage_alloc_key(c, tk, alloc, now, err);
					if (r < 0)
						return r;
				}
				vf = free_vf(node, ni, next, n_next);
				if (vf < -1)
					return no_vf(node, alloc, own_vf, err);
				if (roce ? !ctl_tnums_of(&f->vlans, here[t]) : !tk)
					return iso_error_set(
					    err, ISO_E_INTERNAL, "fabric", "tenant %lld has no %s",
					    (long long)here[t], roce ? "VLAN" : "P_Key");
				struct iso_fabric_port_row row = {.vf = vf, .tenant_id = here[t]};
				iso_strlcpy(row.node, node->name, sizeof(row.node));
				iso_strlcpy(row.alloc_id, alloc, sizeof(row.alloc_id));
				next[n_next] =
				    (struct iso_port_assignment){.node = ni,
				                                 .tenant_id = here[t],
				                                 .vf = vf,
				                                 .guid = port_guid(node, vf),
				                                 .own_vf = own_vf};
				iso_strlcpy(next[n_next].alloc, alloc, sizeof(next[0].alloc));
				n_next++;
				r = ops->fabric_port_put(c->store, &row, err);
				if (r < 0)
					return r;
			}
		}
	}
	f->n_staged = n_next;
	if (roce) {
		f->have_staged = true;
		return 0;
	}
	r = stage_neutron(c, next, &n_next, now, err);
	if (r < 0)
		return r;
	f->n_staged = n_next;
	r = stage_release_keys(c, next, n_next, now, err);
	if (r < 0)
		return r;
	f->stage_now = now;
	tenants = calloc((size_t)f->n_staged_keys + 1, sizeof(*tenants));
	if (!tenants)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < f->n_staged_keys; i++)
		tenants[i] = (struct iso_fabric_tenant){.tenant_id = f->staged_keys[i].tenant_id,
		                                        .name = f->staged_keys[i].tenant,
		                                        .pkey = f->staged_keys[i].pkey,
		                                        .alloc = f->staged_keys[i].alloc};
	r = iso_fabric_intent_build_caps(c->inv, tenants, f->n_staged_keys, next, n_next, &f->caps,
	                                 &f->staged_intent, err);
	if (r < 0)
		return r;
	f->staged_intent.generation = f->generation + 1;
	f->have_staged = true;
	return 0;
}

void ctl_fabric_abort(struct iso_controller *c)
{
	struct ctl_fabric *f = c->fabric;

	if (!f)
		return;
	clear_ports(&f->staged, &f->n_staged);
	iso_fabric_intent_clear(&f->staged_intent);
	/* keys taken for a transaction that did not commit were never handed
	 * out: free at once */
	for (int i = 0; i < f->n_taken; i++)
		iso_pkey_pool_release(&f->pool, f->taken[i], 0);
	free(f->taken);
	f->taken = NULL;
	f->n_taken = 0;
	free(f->staged_keys);
	f->staged_keys = NULL;
	f->n_staged_keys = 0;
	f->have_staged = false;
}

/* The staged keys become the keys; allocation keys left behind go to
 * quarantine in the pool (the store has them there already). */
static void commit_keys(struct ctl_fabric *f)
{
	int cap = f->n_staged_keys;

	if (!f->staged_keys)
		return;
	for (int i = 0; i < f->n_keys; i++) {
		const struct ctl_key *k = &f->keys[i];
		const struct ctl_key *kept =
		    find_key(f->staged_keys, f->n_staged_keys, k->tenant_id, k->alloc);
		/* a Neutron network moved to another key leaves this one */
		if (!k->alloc[0] || (kept && kept->pkey == k->pkey))
			continue;
		iso_pkey_pool_release(&f->pool, k->pkey, f->stage_now);
		if (qkey_add(f, k->tenant_id, k->pkey, f->stage_now) < 0)
			iso_log(ISO_LOG_ERR, "fabric_qkey_lost", "pkey=0x%04x", k->pkey);
	}
	free(f->keys);
	f->keys = ISO_TAKE(f->staged_keys);
	f->n_keys = f->n_staged_keys;
	/* staged_keys was sized n_keys + the ports' bound: at least this */
	f->cap_keys = cap;
	f->n_staged_keys = 0;
	free(f->taken);
	f->taken = NULL;
	f->n_taken = 0;
}

uint64_t ctl_fabric_commit(struct iso_controller *c)
{
	struct ctl_fabric *f = c->fabric;
	struct iso_error err = {0};

	if (!f || !f->have_staged)
		return f ? f->generation : 0;
	clear_ports(&f->ports, &f->n_ports);
	f->ports = ISO_TAKE(f->staged);
	f->n_ports = f->n_staged;
	f->n_staged = 0;
	if (!f->partitioned) { /* RoCE VFs: nothing for a fabric driver */
		f->have_staged = false;
		return f->generation;
	}
	commit_keys(f);
	iso_fabric_intent_clear(&f->intent);
	f->intent = f->staged_intent;
	memset(&f->staged_intent, 0, sizeof(f->staged_intent));
	f->have_staged = false;
	f->generation = f->intent.generation;
	if (f->drv->ops->apply(f->drv, &f->intent, &err) < 0)
		iso_log(ISO_LOG_ERR, "fabric_apply_failed", "generation=%llu error=\"%s\"",
		        (unsigned long long)f->generation, err.message);
	f->drv->ops->poll(f->drv, &f->status);
	f->sync = f->status.confirmed >= f->generation;
	return f->generation;
}

bool ctl_fabric_confirmed(const struct iso_controller *c, uint64_t generation)
{
	return !c->fabric || !c->fabric->partitioned || c->fabric->status.confirmed >= generation;
}

int ctl_fabric_wait(struct iso_controller *c, const char *id, uint64_t generation)
{
	struct ctl_fabric *f = c->fabric;

	for (int i = 0; i < f->n_waiters; i++)
		if (strcmp(f->waiters[i].id, id) == 0) {
			f->waiters[i].generation = generation;
			return 0;
		}
	if (f->n_waiters == f->cap_waiters) {
		int cap = f->cap_waiters ? 2 * f->cap_waiters : 16;
		struct ctl_waiter *w = realloc(f->waiters, (size_t)cap * sizeof(*w));
		if (!w)
			return -ENOMEM;
		f->waiters = w;
		f->cap_waiters = cap;
	}
	iso_strlcpy(f->waiters[f->n_waiters].id, id, sizeof(f->waiters[0].id));
	f->waiters[f->n_waiters++].generation = generation;
	return 0;
}

bool ctl_fabric_waiting(const struct iso_controller *c, const char *id)
{
	const struct ctl_fabric *f = c->fabric;

	/* A waiter whose generation is confirmed is done, even before the tick
	 * has promoted it (the sim drivers confirm as they apply). */
	for (int i = 0; f && i < f->n_waiters; i++)
		if (strcmp(f->waiters[i].id, id) == 0)
			return f->status.confirmed < f->waiters[i].generation;
	return false;
}

uint64_t ctl_fabric_generation(const struct iso_controller *c)
{
	return c->fabric ? c->fabric->generation : 0;
}

/* Promotes the allocations whose generation the fabric has confirmed, through
 * the provisioning gate (which may still wait for their agents). */
static void promote(struct iso_controller *c)
{
	struct ctl_fabric *f = c->fabric;

	for (int i = 0; i < f->n_waiters;) {
		struct iso_allocation a = {0};
		struct iso_error err = {0};
		int r;

		if (f->status.confirmed < f->waiters[i].generation) {
			i++;
			continue;
		}
		r = c->store->ops->alloc_get(c->store, f->waiters[i].id, &a, &err);
		if (r == 0 && a.state == ISO_ALLOC_PROVISIONING)
			r = ctl_alloc_gate(c, &a, f->waiters[i].generation, &err);
		if (r < 0)
			iso_log(ISO_LOG_ERR, "fabric_promote_failed", "id=%s error=\"%s\"",
			        f->waiters[i].id, err.message);
		iso_allocation_clear(&a);
		f->waiters[i] = f->waiters[--f->n_waiters];
	}
}

void ctl_fabric_tick(struct iso_controller *c)
{
	struct ctl_fabric *f = c->fabric;

	if (!f || !f->partitioned)
		return;
	f->drv->ops->poll(f->drv, &f->status);
	if (f->status.incident && strcmp(f->status.incident_msg, f->last_incident) != 0) {
		iso_strlcpy(f->last_incident, f->status.incident_msg, sizeof(f->last_incident));
		iso_log(ISO_LOG_ERR, "fabric_incident", "driver=%s generation=%llu message=\"%s\"",
		        f->drv->ops->name, (unsigned long long)f->generation,
		        f->status.incident_msg);
		ctl_record(c, NULL,
		           &(struct ctl_event){
		               .action = "fabric.incident",
		               .kind = "fabric",
		               .id = f->drv->ops->name,
		               .details = json_pack("{s:s, s:I}", "message", f->status.incident_msg,
		                                    "generation", (json_int_t)f->generation)},
		           ISO_AUDIT_ERROR, f->status.incident_msg);
	} else if (!f->status.incident) {
		f->last_incident[0] = '\0';
	}
	if (f->n_waiters > 0)
		promote(c);
}

/* ---- read-only views ---- */

json_t *ctl_fabric_status_json(const struct iso_controller *c)
{
	const struct ctl_fabric *f = c->fabric;

	if (!f)
		return json_pack("{s:s}", "driver", "none");
	return json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:b, s:s, s:i, s:i, s:i}", "driver",
	                 f->drv->ops->name, "type", iso_fabric_type_name(c->inv->fabric.type),
	                 "partitioned", f->partitioned, "generation", (json_int_t)f->generation,
	                 "applied", (json_int_t)f->status.applied, "confirmed",
	                 (json_int_t)f->status.confirmed, "incident", f->status.incident,
	                 "incident_message", f->status.incident_msg, "tenants", f->n_keys, "ports",
	                 f->n_ports, "waiting", f->n_waiters);
}

const struct iso_fabric_intent *ctl_fabric_intent(const struct iso_controller *c)
{
	return c->fabric ? &c->fabric->intent : NULL;
}

struct iso_fabric_driver *ctl_fabric_driver(const struct iso_controller *c)
{
	return c->fabric ? c->fabric->drv : NULL;
}

bool ctl_fabric_driver_sync(const struct iso_controller *c)
{
	/* Only OpenSM confirms later, by reading the fabric back; the sim
	 * applies in-process and opafm has no FM here to ask (docs/fabric.md). */
	return !c->fabric || strcmp(c->fabric->drv->ops->name, "opensm") != 0;
}

int ctl_fabric_resync(struct iso_controller *c, struct iso_error *err)
{
	struct iso_alloc_filter filter = {.state = ISO_ALLOC_PROVISIONING};
	struct iso_allocation *waiting = NULL;
	uint64_t generation;
	int n = 0, r;

	if (!ctl_fabric_partitioned(c))
		return 0;
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = ctl_fabric_stage(c, err);
	r = ctl_tx_end(c, r, err);
	if (r < 0) {
		ctl_fabric_abort(c);
		return r;
	}
	generation = ctl_fabric_commit(c);
	r = c->store->ops->alloc_list(c->store, &filter, &waiting, &n, err);
	for (int i = 0; r == 0 && i < n; i++)
		if (ctl_fabric_wait(c, waiting[i].id, generation) < 0)
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	iso_allocations_free(waiting, n);
	return r;
}

/* ---- use cases: status, intent, live verification (cluster-admin, auditor) ---- */

static int require_fabric_reader(const struct iso_principal *p, const char *action,
                                 struct iso_error *err)
{
	return ctl_authorize(p, action, NULL, err);
}

int iso_controller_fabric_status(struct iso_controller *c, const struct iso_principal *p,
                                 json_t **out, struct iso_error *err)
{
	int r = require_fabric_reader(p, "fabric.read", err);

	if (r == 0)
		*out = ctl_fabric_status_json(c);
	return r;
}

int iso_controller_fabric_health(struct iso_controller *c, const struct iso_principal *p,
                                 json_t **out, struct iso_error *err)
{
	const struct ctl_fabric *f = c->fabric;
	struct iso_fabric_health h = {.driver = "none"};
	struct iso_fabric_status st = {0};
	enum ctl_scope scope;
	int r = ctl_authorize(p, "fabric.health", &scope, err);

	*out = NULL;
	if (r < 0)
		return r;
	if (f) {
		/* poll() only copies (and, for the SM host's agent, judges its
		 * last report's age): O(1), and fresh for fabrics the tick does
		 * not poll (ethernet, slingshot) */
		f->drv->ops->poll(f->drv, &st);
		iso_strlcpy(h.driver, f->drv->ops->name, sizeof(h.driver));
		h.sm = st.sm;
	} else {
		iso_sm_health_set(&h.sm, ISO_SM_STATE_NONE, "no fabric driver", iso_now_ms());
	}
	/* a node agent's answer carries nothing of the tenants' */
	if (scope == CTL_SCOPE_ALL && f) {
		h.full = true;
		h.generation = f->generation;
		h.applied = f->status.applied;
		h.confirmed = f->status.confirmed;
		h.incident = f->status.incident;
	}
	*out = iso_codec_fabric_health_encode(&h);
	return *out ? 0 : iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
}

int iso_controller_fabric_intent(struct iso_controller *c, const struct iso_principal *p,
                                 json_t **out, struct iso_error *err)
{
	static const struct iso_fabric_intent none = {0};
	const struct iso_fabric_intent *in = ctl_fabric_intent(c);
	int r = require_fabric_reader(p, "fabric.read", err);

	if (r < 0)
		return r;
	*out = iso_fabric_intent_to_json(in ? in : &none);
	return *out ? 0 : iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
}

/* A verification in three steps, so that the slow middle one (reading every
 * port of the fabric, about 0.6 s for 1,000 HCAs) holds neither the server
 * thread nor the controller lock: begin and end run under the lock. */
struct iso_fabric_verify_job {
	struct iso_fabric_driver *drv;
	struct iso_fabric_intent intent; /* a copy: the live one may move on */
	struct iso_fabric_snapshot snap;
	struct iso_fabric_report report;
	int rc;
	struct iso_error err;
	/* an ethernet fabric: the overlay was judged at begin, from the
	 * agents' reports in memory (overlay.c); run has nothing to read */
	bool ethernet;
};

void iso_fabric_verify_job_free(struct iso_fabric_verify_job *j)
{
	if (!j)
		return;
	iso_fabric_intent_clear(&j->intent);
	iso_fabric_snapshot_clear(&j->snap);
	iso_fabric_report_clear(&j->report);
	free(j);
}

int iso_controller_fabric_verify_begin(struct iso_controller *c, const struct iso_principal *p,
                                       struct iso_fabric_verify_job **out, struct iso_error *err)
{
	struct iso_fabric_verify_job *j;
	int r = require_fabric_reader(p, "fabric.verify", err);

	*out = NULL;
	if (r < 0)
		return r;
	if (c->inv->fabric.type == ISO_FABRIC_ETHERNET ||
	    c->inv->fabric.type == ISO_FABRIC_SLINGSHOT) {
		if (!(j = calloc(1, sizeof(*j))))
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		j->ethernet = true;
		j->drv = ctl_fabric_driver(c);
		j->rc = c->inv->fabric.type == ISO_FABRIC_SLINGSHOT
		            ? ctl_cxi_verify(c, &j->report, &j->err)
		            : ctl_overlay_verify(c, &j->report, &j->err);
		*out = j;
		return 0;
	}
	if (!ctl_fabric_partitioned(c))
		return iso_error_set(err, ISO_E_CONFLICT, NULL,
		                     "this cluster's fabric (%s) has no partitions to verify",
		                     iso_fabric_type_name(c->inv->fabric.type));
	j = calloc(1, sizeof(*j));
	if (!j || iso_fabric_intent_copy(&c->fabric->intent, &j->intent) < 0) {
		free(j);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	j->drv = ctl_fabric_driver(c);
	*out = j;
	return 0;
}

void iso_fabric_verify_job_run(struct iso_fabric_verify_job *j)
{
	if (j->ethernet)
		return;
	j->rc = j->drv->ops->snapshot(j->drv, &j->snap, &j->err);
	if (j->rc == 0)
		j->rc = iso_fabric_verify(&j->intent, &j->snap, &j->report, &j->err);
	if (j->rc == 0)
		j->report.elapsed_ms +=
		    j->snap.read_ms; /* the whole verification, reading included */
}

int iso_controller_fabric_verify_end(struct iso_controller *c, const struct iso_principal *p,
                                     struct iso_fabric_verify_job *j, struct iso_fabric_report *out,
                                     struct iso_error *err)
{
	memset(out, 0, sizeof(*out));
	if (j->rc < 0) {
		if (err)
			*err = j->err;
		return j->rc;
	}
	if (!j->ethernet)
		learn_caps(c->fabric, &j->snap);
	*out = j->report;
	memset(&j->report, 0, sizeof(j->report));
	ctl_record(c, p,
	           &(struct ctl_event){
	               .action = "fabric.verify",
	               .kind = "fabric",
	               .id = j->drv->ops->name,
	               .details = json_pack("{s:b, s:i, s:i, s:i}", "ok", out->ok, "ports_checked",
	                                    out->ports_checked, "violations", out->n_violations,
	                                    "generation", (int)j->intent.generation)},
	           ISO_AUDIT_SUCCESS, NULL);
	return 0;
}

int iso_controller_fabric_verify(struct iso_controller *c, const struct iso_principal *p,
                                 struct iso_fabric_report *out, struct iso_error *err)
{
	struct iso_fabric_verify_job *j = NULL;
	int r = iso_controller_fabric_verify_begin(c, p, &j, err);

	memset(out, 0, sizeof(*out));
	if (r < 0)
		return r;
	iso_fabric_verify_job_run(j);
	r = iso_controller_fabric_verify_end(c, p, j, out, err);
	iso_fabric_verify_job_free(j);
	return r;
}

int ctl_fabric_node_vfs(const struct iso_controller *c, int ni, struct ctl_node_vf *out, int max)
{
	const struct ctl_fabric *f = c->fabric;
	int n = 0;

	for (int i = 0; f && (f->partitioned || f->vlans.on) && i < f->n_ports && n < max; i++) {
		const struct iso_port_assignment *p = &f->ports[i];
		const struct ctl_key *k = NULL;

		if (p->node != ni || p->vf < 0)
			continue;
		/* the port's partition: its allocation's key, or its tenant's */
		for (int j = 0; j < f->n_keys && !k; j++)
			if (f->keys[j].tenant_id == p->tenant_id &&
			    strcmp(f->keys[j].alloc, p->own_vf ? "" : p->alloc) == 0)
				k = &f->keys[j];
		out[n++] =
		    (struct ctl_node_vf){.vf = p->vf,
		                         .guid = p->guid,
		                         .tenant_id = p->tenant_id,
		                         .tenant = k ? k->tenant : "",
		                         .pkey = k ? k->pkey : 0,
		                         .vlan = (uint16_t)ctl_tnums_of(&f->vlans, p->tenant_id)};
		iso_strlcpy(out[n - 1].alloc, p->alloc, sizeof(out[0].alloc));
	}
	return n;
}

/* verify.c: proves from the P_Key tables the fabric really holds (not from
 * what we asked the SM for) that no tenant can reach another. Two ports talk
 * iff they share a P_Key base and at least one of them is full, so the check
 * groups table entries by base and, within a base, asks which tenants are
 * present and which of them hold a full entry: a pairwise scan of ports
 * would not survive a large fabric. Drift against the intent (missing,
 * extra, unreachable ports) is reported alongside, so that a confirmed
 * intent means the fabric matches it exactly. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "isostack/fabric.h"

const char *iso_violation_kind_name(enum iso_violation_kind k)
{
	switch (k) {
	case ISO_VIOL_CROSS_TENANT:
		return "cross_tenant";
	case ISO_VIOL_UNKNOWN_FULL:
		return "unknown_full";
	case ISO_VIOL_MISSING:
		return "missing";
	case ISO_VIOL_EXTRA:
		return "extra";
	case ISO_VIOL_NEAR_CAPACITY:
		return "near_capacity";
	case ISO_VIOL_UNREACHABLE:
		return "unreachable";
	case ISO_VIOL_SHARED_VNI:
		return "shared_vni";
	case ISO_VIOL_NO_GUARD:
		return "no_guard";
	case ISO_VIOL_STRAY_PEER:
		return "stray_peer";
	case ISO_VIOL_CROSS_PARTITION:
		return "cross_partition";
	}
	return "unknown";
}

void iso_fabric_snapshot_clear(struct iso_fabric_snapshot *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n_ports; i++)
		free(s->ports[i].pkeys);
	free(s->ports);
	memset(s, 0, sizeof(*s));
}

void iso_fabric_report_clear(struct iso_fabric_report *r)
{
	if (!r)
		return;
	free(r->violations);
	memset(r, 0, sizeof(*r));
}

/* ---- a small open-addressing map: (64-bit key, 16-bit key) -> int ---- */
struct slotv {
	uint64_t a;
	uint32_t b; /* 0 = empty slot; stored as key + 1 */
	int32_t v;
};
struct vmap {
	size_t mask;
	struct slotv *s;
};

static int vmap_init(struct vmap *m, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n + 1)
		cap <<= 1;
	m->s = calloc(cap, sizeof(*m->s));
	m->mask = cap - 1;
	return m->s ? 0 : -ENOMEM;
}

static void vmap_free(struct vmap *m)
{
	free(m->s);
}

static size_t vmap_hash(uint64_t a, uint32_t b)
{
	uint64_t h = (a ^ ((uint64_t)b << 48) ^ b) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h ^ (h >> 29));
}

/* The slot of (a, b): the one holding it, or the empty one it would take. */
static struct slotv *vmap_slot(const struct vmap *m, uint64_t a, uint16_t b)
{
	size_t i = vmap_hash(a, b) & m->mask;
	while (m->s[i].b != 0 && (m->s[i].a != a || m->s[i].b != (uint32_t)b + 1))
		i = (i + 1) & m->mask;
	return &m->s[i];
}

static int vmap_get(const struct vmap *m, uint64_t a, uint16_t b, int dflt)
{
	const struct slotv *s = vmap_slot(m, a, b);
	return s->b ? s->v : dflt;
}

/* Sets (a, b) to v unless it is there already; returns the value kept. */
static int vmap_put_new(struct vmap *m, uint64_t a, uint16_t b, int v)
{
	struct slotv *s = vmap_slot(m, a, b);
	if (!s->b)
		*s = (struct slotv){.a = a, .b = (uint32_t)b + 1, .v = v};
	return s->v;
}

/* ---- the verifier's working state ---- */
#define OWN_NONE    (-1)
#define OWN_SERVICE (-2)

/* Entry flags in the (port, base) map. */
#define ENT_LIMITED 1
#define ENT_FULL    2
#define ENT_COUNTED 4 /* group_entries' marks */
#define ENT_PLACED  8

struct tenant_seen {
	int stamp; /* the base index it was last seen in */
	int full_port, any_port;
};

struct vctx {
	const struct iso_fabric_intent *in;
	const struct iso_fabric_snapshot *snap;
	struct iso_fabric_report *rep;
	int cap_viol;
	int32_t *part_of;     /* per base: intent partition index or -1 */
	struct vmap owner;    /* (guid, 0) -> tenant partition index or OWN_SERVICE */
	struct vmap intended; /* (guid, base) -> membership */
	struct vmap port_of;  /* (guid, 0) -> snapshot port index */
	struct vmap entries;  /* (port index, base) -> ENT_* flags */
};

static int owner_of(const struct vctx *c, uint64_t guid)
{
	return vmap_get(&c->owner, guid, 0, OWN_NONE);
}

static const char *tenant_name(const struct vctx *c, int owner)
{
	return owner >= 0 ? c->in->parts[owner].tenant : "";
}

static struct iso_violation *add(struct vctx *c, enum iso_violation_kind kind, uint16_t pkey)
{
	struct iso_fabric_report *r = c->rep;
	if (r->n_violations == c->cap_viol) {
		int cap = c->cap_viol ? 2 * c->cap_viol : 16;
		struct iso_violation *v = realloc(r->violations, sizeof(*v) * (size_t)cap);
		if (!v)
			return NULL;
		r->violations = v;
		c->cap_viol = cap;
	}
	struct iso_violation *v = &r->violations[r->n_violations++];
	memset(v, 0, sizeof(*v));
	v->kind = kind;
	v->pkey = pkey & ISO_PKEY_BASE_MASK;
	return v;
}

static void add_port(struct vctx *c, struct iso_violation *v, uint64_t guid)
{
	if (v->n_ports >= 2)
		return;
	v->ports[v->n_ports] = guid;
	iso_strlcpy(v->tenants[v->n_ports], tenant_name(c, owner_of(c, guid)),
	            sizeof(v->tenants[0]));
	v->n_ports++;
}

static const char *part_label(const struct vctx *c, uint16_t base)
{
	int p = c->part_of[base];
	return p >= 0 ? c->in->parts[p].name : "no intended partition";
}

/* Builds the maps from the intent and the snapshot. */
static int index_all(struct vctx *c, struct iso_error *err)
{
	const struct iso_fabric_intent *in = c->in;
	const struct iso_fabric_snapshot *snap = c->snap;
	size_t n_members = 0, n_entries = 0;

	c->part_of = malloc(sizeof(*c->part_of) * (ISO_PKEY_BASE_MASK + 1));
	if (!c->part_of)
		return -ENOMEM;
	for (int b = 0; b <= ISO_PKEY_BASE_MASK; b++)
		c->part_of[b] = -1;
	for (int p = 0; p < in->n_parts; p++) {
		uint16_t base = in->parts[p].pkey & ISO_PKEY_BASE_MASK;
		if (c->part_of[base] >= 0)
			return iso_error_set(err, ISO_E_INVALID, "intent",
			                     "partitions '%s' and '%s' both have P_Key 0x%04x",
			                     in->parts[c->part_of[base]].name, in->parts[p].name,
			                     base);
		c->part_of[base] = p;
		n_members += (size_t)in->parts[p].n_members;
	}
	for (int i = 0; i < snap->n_ports; i++)
		n_entries += (size_t)snap->ports[i].n_pkeys;

	if (vmap_init(&c->owner, n_members) < 0 || vmap_init(&c->intended, n_members) < 0 ||
	    vmap_init(&c->port_of, (size_t)snap->n_ports) < 0 ||
	    vmap_init(&c->entries, n_entries) < 0)
		return -ENOMEM;

	for (int p = 0; p < in->n_parts; p++) {
		const struct iso_partition *part = &in->parts[p];
		for (int m = 0; m < part->n_members; m++) {
			const struct iso_fabric_member *mem = &part->members[m];
			int ms = mem->membership == ISO_MEMBER_FULL ? ISO_MEMBER_FULL
			                                            : ISO_MEMBER_LIMITED;
			/* a repeated member: full wins */
			uint16_t base = part->pkey & ISO_PKEY_BASE_MASK;
			struct slotv *s = vmap_slot(&c->intended, mem->guid, base);
			if (!s->b || ms == ISO_MEMBER_FULL)
				*s = (struct slotv){mem->guid, (uint32_t)base + 1, ms};
			if (ms != ISO_MEMBER_FULL)
				continue;
			if (part->kind == ISO_PART_TENANT)
				vmap_put_new(&c->owner, mem->guid, 0, p);
			else if (part->kind == ISO_PART_SERVICE)
				vmap_put_new(&c->owner, mem->guid, 0, OWN_SERVICE);
		}
	}
	for (int i = 0; i < snap->n_ports; i++) {
		const struct iso_port_table *pt = &snap->ports[i];
		vmap_put_new(&c->port_of, pt->guid, 0, i);
		for (int k = 0; k < pt->n_pkeys; k++) {
			uint16_t raw = pt->pkeys[k];
			if ((raw & ISO_PKEY_BASE_MASK) == 0)
				continue; /* an empty slot */
			struct slotv *s =
			    vmap_slot(&c->entries, (uint64_t)i, raw & ISO_PKEY_BASE_MASK);
			if (!s->b)
				*s = (struct slotv){(uint64_t)i,
				                    (uint32_t)(raw & ISO_PKEY_BASE_MASK) + 1, 0};
			s->v |= (raw & ISO_PKEY_FULL_BIT) ? ENT_FULL : ENT_LIMITED;
		}
	}
	return 0;
}

/* One table entry, with the port it sits on. */
struct entry {
	uint16_t base;
	bool full;
	int port;
};

/* Every distinct (port, base) once, grouped by base in snapshot order
 * (a counting sort: bases are 15 bits). A table may repeat a base (full and
 * limited both); the map's flags merge the repeats. */
static int group_entries(struct vctx *c, struct entry **out, int **start_out)
{
	const struct iso_fabric_snapshot *snap = c->snap;
	_cleanup_free_ int *start = calloc(ISO_PKEY_BASE_MASK + 2, sizeof(*start));
	_cleanup_free_ int *fill = malloc(sizeof(*fill) * (ISO_PKEY_BASE_MASK + 1));
	_cleanup_free_ struct entry *e = NULL;
	if (!start || !fill)
		return -ENOMEM;
	for (int pass = 0; pass < 2; pass++) {
		int mark = pass == 0 ? ENT_COUNTED : ENT_PLACED;
		for (int i = 0; i < snap->n_ports; i++) {
			const struct iso_port_table *pt = &snap->ports[i];
			for (int k = 0; k < pt->n_pkeys; k++) {
				uint16_t base = pt->pkeys[k] & ISO_PKEY_BASE_MASK;
				if (!base)
					continue;
				struct slotv *s = vmap_slot(&c->entries, (uint64_t)i, base);
				if (s->v & mark)
					continue;
				s->v |= mark;
				if (pass == 0)
					start[base + 1]++;
				else
					e[fill[base]++] =
					    (struct entry){base, (s->v & ENT_FULL) != 0, i};
			}
		}
		if (pass > 0)
			break;
		for (int b = 0; b <= ISO_PKEY_BASE_MASK; b++)
			start[b + 1] += start[b];
		memcpy(fill, start, sizeof(*fill) * (ISO_PKEY_BASE_MASK + 1));
		e = malloc(sizeof(*e) * (size_t)(start[ISO_PKEY_BASE_MASK + 1] + 1));
		if (!e)
			return -ENOMEM;
	}
	*out = ISO_TAKE(e);
	*start_out = ISO_TAKE(start);
	return 0;
}

/* Paths between tenants within one base. Every tenant present reaches every
 * full one, so tenants pair with the first tenant that holds a full entry:
 * each exposed tenant is named once per key, each pair at most once, and
 * the count stays linear in the tenants present. */
static int check_base_paths(struct vctx *c, uint16_t base, const struct entry *e, int n,
                            struct tenant_seen *seen, int *order, int stamp)
{
	const struct iso_port_table *ports = c->snap->ports;
	int n_order = 0, f0 = -1, foreign = -1;
	int intended = c->part_of[base];
	bool svc_or_default = base == ISO_PKEY_DEFAULT ||
	                      (intended >= 0 && c->in->parts[intended].kind == ISO_PART_SERVICE);

	for (int j = 0; j < n; j++) {
		int o = owner_of(c, ports[e[j].port].guid);
		if (o < 0)
			continue;
		struct tenant_seen *t = &seen[o];
		if (t->stamp != stamp) {
			*t = (struct tenant_seen){
			    .stamp = stamp, .full_port = -1, .any_port = e[j].port};
			order[n_order++] = o;
		}
		if (e[j].full && t->full_port < 0) {
			t->full_port = e[j].port;
			if (f0 < 0)
				f0 = o;
		}
	}
	if (f0 < 0)
		return 0;
	if (n_order >= 2) {
		const struct tenant_seen *a = &seen[f0];
		for (int k = 0; k < n_order; k++) {
			int o = order[k];
			if (o == f0)
				continue;
			const struct tenant_seen *b = &seen[o];
			int bp = b->full_port >= 0 ? b->full_port : b->any_port;
			const struct iso_partition *pa = &c->in->parts[f0], *pb = &c->in->parts[o];
			/* two partitions of one tenant: two of its allocations (or an
			 * allocation and the tenant's own key) that should not meet */
			bool sibling = pa->tenant_id == pb->tenant_id;
			struct iso_violation *v =
			    add(c, sibling ? ISO_VIOL_CROSS_PARTITION : ISO_VIOL_CROSS_TENANT, base);
			if (!v)
				return -ENOMEM;
			add_port(c, v, ports[a->full_port].guid);
			add_port(c, v, ports[bp].guid);
			if (sibling) {
				snprintf(v->message, sizeof(v->message),
				         "tenant '%s': port 0x%016llx (full, %s) and port 0x%016llx "
				         "(%s, %s) share P_Key 0x%04x (%s): a path between two of "
				         "its partitions",
				         pa->tenant, (unsigned long long)v->ports[0],
				         pa->alloc[0] ? pa->alloc : "the tenant's key",
				         (unsigned long long)v->ports[1],
				         b->full_port >= 0 ? "full" : "limited",
				         pb->alloc[0] ? pb->alloc : "the tenant's key", base,
				         part_label(c, base));
				continue;
			}
			snprintf(v->message, sizeof(v->message),
			         "tenant '%s' port 0x%016llx (full) and tenant '%s' port 0x%016llx "
			         "(%s) share P_Key 0x%04x (%s): a path between tenants",
			         v->tenants[0], (unsigned long long)v->ports[0], v->tenants[1],
			         (unsigned long long)v->ports[1],
			         b->full_port >= 0 ? "full" : "limited", base, part_label(c, base));
		}
		return 0;
	}
	/* One tenant alone, full in the Default key (where every port is) or in
	 * a service key (where every tenant port is): it reaches ports that are
	 * not its own even when no other tenant is in view. */
	if (!svc_or_default)
		return 0;
	for (int j = 0; j < n && foreign < 0; j++)
		if (owner_of(c, ports[e[j].port].guid) != f0)
			foreign = e[j].port;
	struct iso_violation *v = add(c, ISO_VIOL_CROSS_TENANT, base);
	if (!v)
		return -ENOMEM;
	add_port(c, v, ports[seen[f0].full_port].guid);
	if (foreign >= 0)
		add_port(c, v, ports[foreign].guid);
	snprintf(v->message, sizeof(v->message),
	         "tenant '%s' port 0x%016llx is full in P_Key 0x%04x (%s), which %s: it reaches "
	         "ports that are not its tenant's",
	         v->tenants[0], (unsigned long long)v->ports[0], base, part_label(c, base),
	         base == ISO_PKEY_DEFAULT ? "every port holds" : "every tenant port holds");
	return 0;
}

/* Per entry: a full entry the intent does not give (unknown_full), a key
 * the intent does not put on the port (extra). */
static int check_base_entries(struct vctx *c, uint16_t base, const struct entry *e, int n)
{
	const struct iso_port_table *ports = c->snap->ports;
	int intended = c->part_of[base];
	bool keyed = intended >= 0 && c->in->parts[intended].kind != ISO_PART_DEFAULT;

	if (base == ISO_PKEY_DEFAULT)
		return 0; /* everyone is limited there; full tenant ports: paths */
	for (int j = 0; j < n; j++) {
		uint64_t guid = ports[e[j].port].guid;
		int want = vmap_get(&c->intended, guid, base, -1);
		int o = owner_of(c, guid);
		if (e[j].full && want != ISO_MEMBER_FULL && (keyed || o >= 0)) {
			struct iso_violation *v = add(c, ISO_VIOL_UNKNOWN_FULL, base);
			if (!v)
				return -ENOMEM;
			add_port(c, v, guid);
			snprintf(v->message, sizeof(v->message),
			         "port 0x%016llx%s%s%s is full in P_Key 0x%04x (%s) but the intent "
			         "%s",
			         (unsigned long long)guid, o >= 0 ? " of tenant '" : "",
			         o >= 0 ? tenant_name(c, o) : "", o >= 0 ? "'" : "", base,
			         part_label(c, base),
			         want == ISO_MEMBER_LIMITED ? "makes it a limited member"
			                                    : "does not make it a member");
		}
		if (want < 0) {
			struct iso_violation *v = add(c, ISO_VIOL_EXTRA, base);
			if (!v)
				return -ENOMEM;
			add_port(c, v, guid);
			snprintf(v->message, sizeof(v->message),
			         "port 0x%016llx holds P_Key 0x%04x (%s, %s) that the intent does "
			         "not put there",
			         (unsigned long long)guid, base, part_label(c, base),
			         e[j].full ? "full" : "limited");
		}
	}
	return 0;
}

/* Intended members that the fabric lacks, or whose ports are not there. */
static int check_drift(struct vctx *c)
{
	const struct iso_fabric_intent *in = c->in;
	_cleanup_(vmap_free) struct vmap told = {0};
	size_t n_members = 0;

	for (int p = 0; p < in->n_parts; p++)
		n_members += (size_t)in->parts[p].n_members;
	if (vmap_init(&told, n_members) < 0)
		return -ENOMEM;
	for (int p = 0; p < in->n_parts; p++) {
		const struct iso_partition *part = &in->parts[p];
		for (int m = 0; m < part->n_members; m++) {
			const struct iso_fabric_member *mem = &part->members[m];
			int port = vmap_get(&c->port_of, mem->guid, 0, -1);
			if (port < 0) {
				struct slotv *s = vmap_slot(&told, mem->guid, 0);
				if (s->b)
					continue; /* one report per port */
				*s = (struct slotv){mem->guid, 1, 1};
				struct iso_violation *v = add(c, ISO_VIOL_UNREACHABLE, part->pkey);
				if (!v)
					return -ENOMEM;
				add_port(c, v, mem->guid);
				snprintf(
				    v->message, sizeof(v->message),
				    "port 0x%016llx, a member of %s (0x%04x), was not found on "
				    "the fabric",
				    (unsigned long long)mem->guid, part->name, part->pkey);
				continue;
			}
			int have = vmap_get(&c->entries, (uint64_t)port,
			                    part->pkey & ISO_PKEY_BASE_MASK, 0);
			bool want_full = mem->membership == ISO_MEMBER_FULL;
			if (want_full ? (have & ENT_FULL) : have != 0)
				continue;
			struct iso_violation *v = add(c, ISO_VIOL_MISSING, part->pkey);
			if (!v)
				return -ENOMEM;
			add_port(c, v, mem->guid);
			snprintf(
			    v->message, sizeof(v->message),
			    "port 0x%016llx should be a %s member of %s (0x%04x) but its table "
			    "holds %s",
			    (unsigned long long)mem->guid, want_full ? "full" : "limited",
			    part->name, part->pkey,
			    have ? "it as limited only" : "no entry for that key");
		}
	}
	return 0;
}

static int check_capacity(struct vctx *c)
{
	for (int i = 0; i < c->snap->n_ports; i++) {
		const struct iso_port_table *pt = &c->snap->ports[i];
		if (pt->capacity <= 0 || (int64_t)pt->n_pkeys * 10 < (int64_t)pt->capacity * 9)
			continue;
		struct iso_violation *v = add(c, ISO_VIOL_NEAR_CAPACITY, 0);
		if (!v)
			return -ENOMEM;
		add_port(c, v, pt->guid);
		snprintf(v->message, sizeof(v->message),
		         "port 0x%016llx (%s) holds %d of %d P_Keys: the next keys may be "
		         "dropped (OpenSM ERR 0512)",
		         (unsigned long long)pt->guid, pt->node_desc[0] ? pt->node_desc : "?",
		         pt->n_pkeys, pt->capacity);
	}
	return 0;
}

static void vctx_clear(struct vctx *c)
{
	free(c->part_of);
	vmap_free(&c->owner);
	vmap_free(&c->intended);
	vmap_free(&c->port_of);
	vmap_free(&c->entries);
}

int iso_fabric_verify(const struct iso_fabric_intent *intent,
                      const struct iso_fabric_snapshot *snap, struct iso_fabric_report *out,
                      struct iso_error *err)
{
	uint64_t t0 = iso_mono_ns();
	struct iso_fabric_report rep = {0};
	_cleanup_(vctx_clear) struct vctx c = {.in = intent, .snap = snap, .rep = &rep};
	_cleanup_free_ struct entry *e = NULL;
	_cleanup_free_ int *start = NULL;
	_cleanup_free_ struct tenant_seen *seen = NULL;
	_cleanup_free_ int *order = NULL;
	int r;

	r = index_all(&c, err);
	if (r == 0)
		r = group_entries(&c, &e, &start);
	if (r == 0) {
		size_t np = (size_t)(intent->n_parts > 0 ? intent->n_parts : 1);
		seen = calloc(np, sizeof(*seen));
		order = malloc(sizeof(*order) * np);
		r = seen && order ? 0 : -ENOMEM;
	}
	int n_bases = 0;
	for (int b = 1; r == 0 && b <= ISO_PKEY_BASE_MASK; b++) {
		int n = start[b + 1] - start[b];
		if (n == 0)
			continue;
		n_bases++;
		r = check_base_paths(&c, (uint16_t)b, &e[start[b]], n, seen, order, b);
		if (r == 0)
			r = check_base_entries(&c, (uint16_t)b, &e[start[b]], n);
	}
	if (r == 0)
		r = check_drift(&c);
	if (r == 0)
		r = check_capacity(&c);
	if (r < 0) {
		free(rep.violations);
		if (r == -ENOMEM)
			iso_error_set(err, ISO_E_INTERNAL, "",
			              "out of memory verifying the fabric");
		return r;
	}
	for (int p = 0; p < intent->n_parts; p++) {
		uint16_t base = intent->parts[p].pkey & ISO_PKEY_BASE_MASK;
		if (start[base + 1] == start[base])
			n_bases++;
	}
	rep.ok = true;
	for (int i = 0; i < rep.n_violations; i++)
		if (rep.violations[i].kind != ISO_VIOL_NEAR_CAPACITY)
			rep.ok = false;
	rep.ports_checked = snap->n_ports;
	rep.partitions_checked = n_bases;
	rep.elapsed_ms = (int64_t)((iso_mono_ns() - t0) / 1000000);
	*out = rep;
	return 0;
}

json_t *iso_fabric_report_to_json(const struct iso_fabric_report *r)
{
	json_t *root = json_object();
	json_t *list = json_array();
	char buf[24];

	if (!root || !list) {
		json_decref(root);
		json_decref(list);
		return NULL;
	}
	json_object_set_new(root, "ok", json_boolean(r->ok));
	json_object_set_new(root, "ports_checked", json_integer(r->ports_checked));
	json_object_set_new(root, "partitions_checked", json_integer(r->partitions_checked));
	json_object_set_new(root, "elapsed_ms", json_integer(r->elapsed_ms));
	json_object_set_new(root, "violations", list);
	for (int i = 0; i < r->n_violations; i++) {
		const struct iso_violation *v = &r->violations[i];
		json_t *o = json_object(), *ports = json_array(), *tenants = json_array();
		snprintf(buf, sizeof(buf), "0x%04x", v->pkey);
		json_object_set_new(o, "kind", json_string(iso_violation_kind_name(v->kind)));
		json_object_set_new(o, "pkey", json_string(buf));
		for (int k = 0; k < v->n_ports && k < 2; k++) {
			snprintf(buf, sizeof(buf), "0x%016llx", (unsigned long long)v->ports[k]);
			json_array_append_new(ports, json_string(buf));
			json_array_append_new(tenants, json_string(v->tenants[k]));
		}
		/* an overlay finding names nodes, not ports: its tenants come
		 * alone, and its VNI and nodes are keys of their own */
		for (int k = 0; v->n_ports == 0 && k < 2; k++)
			if (v->tenants[k][0])
				json_array_append_new(tenants, json_string(v->tenants[k]));
		if (v->vni)
			json_object_set_new(o, "vni", json_integer(v->vni));
		if (v->n_nodes > 0) {
			json_t *nodes = json_array();
			for (int k = 0; k < v->n_nodes && k < 2; k++)
				json_array_append_new(nodes, json_string(v->nodes[k]));
			json_object_set_new(o, "nodes", nodes);
		}
		json_object_set_new(o, "ports", ports);
		json_object_set_new(o, "tenants", tenants);
		json_object_set_new(o, "message", json_string(v->message));
		json_array_append_new(list, o);
	}
	return root;
}

char *iso_fabric_report_json(const struct iso_fabric_report *r)
{
	json_t *root = iso_fabric_report_to_json(r);
	char *s = root ? json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;

	json_decref(root);
	return s;
}

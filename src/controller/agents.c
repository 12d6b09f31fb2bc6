/* agents.c: the controller's side of the node agents (docs/agents.md): each
 * node's desired state as one document with a generation, the agents that
 * long-poll it, and the controller's fencing term.
 *
 * The document is what live allocations hold on the node, and the cluster
 * state already knows that: its take/give hook (on_member) tells this file
 * which members came and went, so a node's document is rebuilt from its own
 * few entries, never from a scan of the store. Hook calls also come from
 * changes that are undone (a commit that failed, a preemption trial), so a
 * touched node is only marked dirty; at the end of each turn of the daemon's
 * loop (iso_controller_settle) every dirty node's document is rebuilt and compared
 * with the one served: the generation moves exactly when its content changes,
 * and only then are its waiters answered.
 *
 * Generations survive a restart without a store write per change: the served
 * generation is term << 32 | a per-run counter, and the term is bumped in the
 * store at every start, so anything served after a restart is greater than
 * anything served before it.
 *
 * The status an agent reports (its GPUs, its instances and whether each is
 * ready) is its heartbeat too, and is kept in memory only: the agent derives
 * it from the devices at every tick, so after a restart the controller says
 * it knows nothing until the agent reports again. A node whose agent is
 * silent past the lease is unreachable (placed on like a cordoned node,
 * through the cluster state's `unreachable` flags, without writing the
 * cordon state), and after the grace its work is evicted as when a node goes
 * down. Both transitions, and the way back, are audited. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

#define TERM_META        "agent_term"
#define WAITERS_PER_NODE 4
#define DEFAULT_WAITERS  10000
#define MAX_WAIT_S       60
#define DEFAULT_LEASE_S  10
#define DEFAULT_GRACE_S  300
#define LEASE_CHECK_MS   100

struct agent_entry {
	char alloc[ISO_ID_MAX];
	int member;
	/* its allocation's tenant: whose VF on the node the member uses */
	int64_t tenant_id;
	char tenant[ISO_NAME_MAX];
	char key[ISO_IDEM_KEY_MAX]; /* its allocation's Idempotency-Key, "" none */
	int cpus;                   /* what the member was placed with, for its sandbox */
	int64_t memory_mib;         /* (the desired document's "members") */
	bool gated;                 /* the provisioning gate is past for its allocation */
	int n_slots;
	struct iso_slot *slots; /* the member's slots, owned */
};

struct agent_waiter {
	iso_desired_fn fn;
	void *arg;
	int64_t deadline_ms;
};

/* The nodes where a tenant has members: on an ethernet fabric each member's
 * overlay names the other ones' underlay addresses (its peers), so a node
 * that gains or loses the tenant's first or last member changes the
 * documents of the tenant's other nodes, and only theirs. */
struct tenant_nodes {
	int64_t tenant_id;
	int n, cap;
	int *nodes; /* node indexes, unordered */
};

struct agent_node {
	struct agent_entry *e;
	json_t *gpus; /* the gpus array as served */
	struct agent_waiter w[WAITERS_PER_NODE];
	int n_e, cap_e;
	int n_w;
	uint32_t gen; /* this run's counter */

	/* the agent's latest status, in memory only */
	struct iso_agent_instance *inst;
	/* VFs: the node's assignments as served (from the fabric, at each
	 * settle), and the VFs the agent last reported */
	json_t *vfs;
	struct ctl_node_vf *want_vf;
	int n_want_vf;
	struct iso_agent_vf *vf;
	int n_vf;
	/* issue 14: the members as served, and the sandboxes and overlay the
	 * agent last reported (the overlay as read back from its kernel) */
	json_t *members;
	bool sandbox_real;
	struct iso_agent_sandbox *sb;
	int n_sb;
	bool has_overlay;
	struct iso_agent_overlay overlay; /* deep copy, freed by overlay_free */
	/* issue 17: the CXI services the agent read back from its NIC */
	bool has_cxi;
	struct iso_agent_cxi_report cxi; /* services malloc'd */
	/* and each member's service as the agent reported it (the gate) */
	struct iso_agent_cxi_member_status *cxm;
	int n_cxm;
	int64_t last_seen_ms, term_seen;
	/* the lease */
	int64_t unreachable_ms; /* since when; 0: reachable */
	/* its conditions (MIG mode mismatches), as last reported, with when
	 * each appeared; in memory like the rest of the status */
	struct iso_agent_condition *cond;
	int64_t *cond_since_ms;
	int n_cond;
	int n_inst;
	char version[65];
	bool dirty;
	bool seen;    /* reported since the controller started */
	bool evicted; /* the grace ended and its work was evicted */
};

struct ctl_agents {
	int n;
	struct agent_node *nodes;
	int *dirty; /* node indexes, n_dirty of them */
	int n_dirty;
	int64_t term;
	int waiters, max_waiters;
	bool *unreachable; /* per node; the cluster state reads it */
	int64_t lease_ms, grace_ms, opened_ms, checked_ms;
	bool required; /* nodes never seen are held to the lease too */
	bool closing;  /* the API is stopping: nobody waits any more */
	bool overlay;  /* an ethernet fabric: members get their tenant's overlay */
	bool cxi;      /* a slingshot fabric: members get their tenant's VNI ("cxi") */
	struct tenant_nodes *tn;
	int n_tn, cap_tn;
};

static void overlay_free(struct iso_agent_overlay *ov)
{
	for (int i = 0; ov->tenants && i < ov->n_tenants; i++)
		free(ov->tenants[i].members);
	free(ov->tenants);
	free(ov->allowed);
	memset(ov, 0, sizeof(*ov));
}

/* A deep copy of `in` into *out; -ENOMEM leaves *out empty. */
static int overlay_copy(const struct iso_agent_overlay *in, struct iso_agent_overlay *out)
{
	memset(out, 0, sizeof(*out));
	out->guard = in->guard;
	out->drops = in->drops;
	if (in->n_allowed > 0) {
		if (!(out->allowed = calloc((size_t)in->n_allowed, sizeof(*out->allowed))))
			return -ENOMEM;
		memcpy(out->allowed, in->allowed, (size_t)in->n_allowed * sizeof(*out->allowed));
		out->n_allowed = in->n_allowed;
	}
	if (in->n_tenants > 0 &&
	    !(out->tenants = calloc((size_t)in->n_tenants, sizeof(*out->tenants)))) {
		overlay_free(out);
		return -ENOMEM;
	}
	for (int i = 0; i < in->n_tenants; i++) {
		const struct iso_agent_overlay_tenant *t = &in->tenants[i];
		out->tenants[i] = *t;
		out->tenants[i].members = NULL;
		out->tenants[i].n_members = 0;
		out->n_tenants = i + 1;
		if (t->n_members > 0) {
			out->tenants[i].members = calloc((size_t)t->n_members, sizeof(*t->members));
			if (!out->tenants[i].members) {
				overlay_free(out);
				return -ENOMEM;
			}
			memcpy(out->tenants[i].members, t->members,
			       (size_t)t->n_members * sizeof(*t->members));
			out->tenants[i].n_members = t->n_members;
		}
	}
	return 0;
}

static struct tenant_nodes *tenant_nodes_of(struct ctl_agents *ag, int64_t tenant_id, bool make)
{
	for (int i = 0; i < ag->n_tn; i++)
		if (ag->tn[i].tenant_id == tenant_id)
			return &ag->tn[i];
	if (!make)
		return NULL;
	if (ag->n_tn == ag->cap_tn) {
		int cap = ag->cap_tn ? 2 * ag->cap_tn : 16;
		struct tenant_nodes *v = realloc(ag->tn, (size_t)cap * sizeof(*v));
		if (!v)
			return NULL;
		ag->tn = v;
		ag->cap_tn = cap;
	}
	ag->tn[ag->n_tn] = (struct tenant_nodes){.tenant_id = tenant_id};
	return &ag->tn[ag->n_tn++];
}

static void entry_free(struct agent_entry *e)
{
	free(e->slots);
	memset(e, 0, sizeof(*e));
}

static void mark_dirty(struct ctl_agents *ag, int ni)
{
	if (ag->nodes[ni].dirty)
		return;
	ag->nodes[ni].dirty = true;
	ag->dirty[ag->n_dirty++] = ni;
}

static bool node_has_tenant(const struct agent_node *n, int64_t tenant_id)
{
	for (int i = 0; i < n->n_e; i++)
		if (n->e[i].tenant_id == tenant_id)
			return true;
	return false;
}

/* After node ni's entries of `tenant_id` changed: when the tenant came to
 * the node or left it, the tenant's other nodes' peers change. */
static void tenant_presence(struct ctl_agents *ag, int ni, int64_t tenant_id, bool was)
{
	bool is = node_has_tenant(&ag->nodes[ni], tenant_id);
	struct tenant_nodes *t;

	if (!ag->overlay || is == was)
		return;
	if (!(t = tenant_nodes_of(ag, tenant_id, true))) {
		iso_log(ISO_LOG_ERR, "agent_peers_lost", "tenant_id=%lld", (long long)tenant_id);
		return;
	}
	for (int i = 0; i < t->n; i++)
		mark_dirty(ag, t->nodes[i]);
	if (is) {
		if (t->n == t->cap) {
			int cap = t->cap ? 2 * t->cap : 4;
			int *v = realloc(t->nodes, (size_t)cap * sizeof(*v));
			if (!v) {
				iso_log(ISO_LOG_ERR, "agent_peers_lost", "tenant_id=%lld",
				        (long long)tenant_id);
				return;
			}
			t->nodes = v;
			t->cap = cap;
		}
		t->nodes[t->n++] = ni;
		return;
	}
	for (int i = 0; i < t->n; i++)
		if (t->nodes[i] == ni) {
			t->nodes[i] = t->nodes[--t->n];
			break;
		}
	if (t->n == 0) { /* the tenant has no member left: forget it */
		free(t->nodes);
		*t = ag->tn[--ag->n_tn];
	}
}

/* The cluster state's hook: member `k` of `a` came to or left node `ni`. */
static void on_member(void *arg, int ni, const struct iso_allocation *a, int k, bool taken)
{
	struct ctl_agents *ag = arg;
	struct agent_node *n;

	if (!ag || ni < 0 || ni >= ag->n)
		return;
	n = &ag->nodes[ni];
	mark_dirty(ag, ni);
	bool was = ag->overlay && node_has_tenant(n, a->tenant_id);
	if (!taken) {
		for (int i = 0; i < n->n_e; i++)
			if (n->e[i].member == k && strcmp(n->e[i].alloc, a->id) == 0) {
				entry_free(&n->e[i]);
				n->e[i] = n->e[--n->n_e];
				tenant_presence(ag, ni, a->tenant_id, was);
				return;
			}
		return;
	}
	if (n->n_e == n->cap_e) {
		int cap = n->cap_e ? n->cap_e * 2 : 4;
		struct agent_entry *e = realloc(n->e, (size_t)cap * sizeof(*e));
		if (!e) {
			iso_log(ISO_LOG_ERR, "agent_desired_lost", "node=%s alloc=%s member=%d",
			        a->placed[k].node, a->id, k);
			return;
		}
		n->e = e;
		n->cap_e = cap;
	}
	struct agent_entry *e = &n->e[n->n_e];
	memset(e, 0, sizeof(*e));
	iso_strlcpy(e->alloc, a->id, sizeof(e->alloc));
	e->member = k;
	e->tenant_id = a->tenant_id;
	iso_strlcpy(e->tenant, a->tenant, sizeof(e->tenant));
	iso_strlcpy(e->key, a->idem_key, sizeof(e->key));
	e->cpus = a->shape.cpus;
	e->memory_mib = a->shape.memory_mib;
	for (int s = 0; s < a->n_slots; s++)
		e->n_slots += a->slots[s].member == k;
	if (e->n_slots) {
		e->slots = calloc((size_t)e->n_slots, sizeof(*e->slots));
		if (!e->slots) {
			iso_log(ISO_LOG_ERR, "agent_desired_lost", "node=%s alloc=%s member=%d",
			        a->placed[k].node, a->id, k);
			return;
		}
		for (int s = 0, j = 0; s < a->n_slots; s++)
			if (a->slots[s].member == k)
				e->slots[j++] = a->slots[s];
	}
	n->n_e++;
	tenant_presence(ag, ni, a->tenant_id, was);
}

struct slot_ref {
	const struct agent_entry *e;
	const struct iso_slot *s;
};

static int slot_ref_cmp(const void *pa, const void *pb)
{
	const struct slot_ref *a = pa, *b = pb;
	int c;

	if (a->s->gpu != b->s->gpu)
		return a->s->gpu < b->s->gpu ? -1 : 1;
	if (a->s->start != b->s->start)
		return a->s->start < b->s->start ? -1 : 1;
	c = strcmp(a->e->alloc, b->e->alloc);
	if (c)
		return c;
	return a->e->member - b->e->member;
}

/* The node's GPUs and wants into d, in inventory order, instances by
 * start (the codec writes them as the document's "gpus"). */
static int build_gpus(const struct iso_controller *c, int ni, struct iso_agent_desired *d)
{
	const struct iso_node *node = &c->inv->nodes[ni];
	const struct agent_node *n = &c->agents->nodes[ni];
	_cleanup_free_ struct slot_ref *refs = NULL;
	int n_refs = 0;

	for (int i = 0; i < n->n_e; i++)
		n_refs += n->e[i].n_slots;
	refs = calloc((size_t)(n_refs > 0 ? n_refs : 1), sizeof(*refs));
	d->wants = calloc((size_t)(n_refs > 0 ? n_refs : 1), sizeof(*d->wants));
	if (!refs || !d->wants)
		return -ENOMEM;
	n_refs = 0;
	for (int i = 0; i < n->n_e; i++)
		for (int s = 0; s < n->e[i].n_slots; s++)
			refs[n_refs++] = (struct slot_ref){&n->e[i], &n->e[i].slots[s]};
	qsort(refs, (size_t)n_refs, sizeof(*refs), slot_ref_cmp);
	for (int g = 0; g < node->n_gpus && g < ISO_AGENT_MAX_GPUS; g++) {
		d->gpus[g].index = (unsigned)node->gpus[g].index;
		d->gpus[g].mig = node->gpus[g].mig_enabled;
		d->n_gpus++;
	}
	for (int i = 0; i < n_refs; i++) {
		const struct slot_ref *r = &refs[i];
		struct iso_agent_want *w = &d->wants[d->n_wants++];

		w->gpu = (unsigned)r->s->gpu;
		iso_strlcpy(w->profile, r->s->whole ? "whole" : r->s->profile, sizeof(w->profile));
		w->start = r->s->whole ? 0 : r->s->start;
		w->width = r->s->whole ? 0 : r->s->width;
		iso_strlcpy(w->allocation, r->e->alloc, sizeof(w->allocation));
		w->member = (unsigned)r->e->member;
	}
	return 0;
}

static int member_cmp(const void *pa, const void *pb)
{
	const struct agent_entry *a = *(const struct agent_entry *const *)pa;
	const struct agent_entry *b = *(const struct agent_entry *const *)pb;
	int c = strcmp(a->alloc, b->alloc);

	return c ? c : a->member - b->member;
}

static int want_vf_cmp(const void *pa, const void *pb)
{
	const struct ctl_node_vf *a = pa, *b = pb;

	return a->vf - b->vf;
}

/* The node's VFs into d: each VF the fabric assigned on the node (one per
 * tenant present), by index, with the GUID the fabric's partitions name, the
 * tenant's P_Key as the fabric driver programs it (full membership) and the
 * members it serves (the codec writes them as the document's "vfs"). Also
 * keeps the assignments for the gate. */
/* Does entry e's allocation hold a VF of its own among want (a pod's
 * attachment)? Then its tenant's shared VF does not name it. */
static bool own_vf_of(const struct ctl_node_vf *want, int nw, const struct agent_entry *e)
{
	for (int v = 0; v < nw; v++)
		if (want[v].tenant_id == e->tenant_id && strcmp(want[v].alloc, e->alloc) == 0)
			return true;
	return false;
}

static int build_vfs(const struct iso_controller *c, int ni, struct iso_agent_desired *d)
{
	struct agent_node *n = &c->agents->nodes[ni];
	const struct iso_node *node = &c->inv->nodes[ni];
	int max = node->has_port ? node->port.n_vfs : 0;
	struct ctl_node_vf *want = calloc((size_t)(max > 0 ? max : 1), sizeof(*want));
	_cleanup_free_ const struct agent_entry **mine =
	    calloc((size_t)(n->n_e > 0 ? n->n_e : 1), sizeof(*mine));
	int nw;

	d->vfs = calloc((size_t)(max > 0 ? max : 1), sizeof(*d->vfs));
	if (!want || !mine || !d->vfs) {
		free(want);
		return -ENOMEM;
	}
	nw = ctl_fabric_node_vfs(c, ni, want, max);
	qsort(want, (size_t)nw, sizeof(*want), want_vf_cmp);
	for (int v = 0; v < nw; v++) {
		struct iso_agent_vf_want *w = &d->vfs[d->n_vfs++];
		int n_mine = 0;

		for (int i = 0; i < n->n_e; i++)
			if (n->e[i].tenant_id == want[v].tenant_id &&
			    (want[v].alloc[0] ? strcmp(n->e[i].alloc, want[v].alloc) == 0
			                      : !own_vf_of(want, nw, &n->e[i])))
				mine[n_mine++] = &n->e[i];
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, sorted */
		qsort(mine, (size_t)n_mine, sizeof(*mine), member_cmp);
		w->index = (unsigned)want[v].vf;
		iso_strlcpy(w->device, node->port.device, sizeof(w->device));
		iso_strlcpy(w->tenant, want[v].tenant, sizeof(w->tenant));
		if (want[v].vlan) { /* RoCE: the tenant's VLAN, named by its members */
			w->vlan = want[v].vlan;
			if (n_mine > 0)
				iso_strlcpy(w->tenant, mine[0]->tenant, sizeof(w->tenant));
		} else {
			w->guid = want[v].guid;
			w->pkey = (uint16_t)(want[v].pkey | 0x8000);
		}
		if (!w->tenant[0]) { /* no member names it yet: not before one does */
			d->n_vfs--;
			continue;
		}
		if (n_mine > 0 && !(w->members = calloc((size_t)n_mine, sizeof(*w->members)))) {
			free(want);
			return -ENOMEM;
		}
		for (int i = 0; i < n_mine; i++) {
			iso_strlcpy(w->members[i].allocation, mine[i]->alloc,
			            sizeof(w->members[i].allocation));
			w->members[i].member = (unsigned)mine[i]->member;
		}
		w->n_members = (unsigned)n_mine;
	}
	free(n->want_vf);
	n->want_vf = want;
	n->n_want_vf = nw;
	return 0;
}

static int peer_cmp(const void *pa, const void *pb)
{
	return strcmp(pa, pb);
}

/* The underlay addresses of the tenant's other nodes, sorted and unique,
 * into m (a node without an underlay_ip carries no overlay: left out). */
static int build_peers(const struct iso_controller *c, int ni, int64_t tenant_id,
                       struct iso_agent_member_want *m)
{
	const struct tenant_nodes *t = tenant_nodes_of(c->agents, tenant_id, false);
	size_t n = 0;

	if (!t || t->n == 0)
		return 0;
	if (!(m->peers = calloc((size_t)t->n, sizeof(*m->peers))))
		return -ENOMEM;
	for (int i = 0; i < t->n; i++) {
		const char *ip = c->inv->nodes[t->nodes[i]].underlay_ip;
		if (t->nodes[i] != ni && ip[0])
			iso_strlcpy(m->peers[n++], ip, sizeof(m->peers[0]));
	}
	qsort(m->peers, n, sizeof(*m->peers), peer_cmp);
	m->n_peers = 0;
	for (size_t i = 0; i < n; i++) /* unique: the inventory keeps addresses apart */
		if (m->n_peers == 0 || strcmp(m->peers[m->n_peers - 1], m->peers[i]) != 0)
			memmove(m->peers[m->n_peers++], m->peers[i], sizeof(m->peers[0]));
	return 0;
}

/* The node's members into d (the codec writes them as "members"), by
 * allocation and member: what each member's sandbox is made of, and on an
 * ethernet fabric its tenant's overlay. */
static int build_members(const struct iso_controller *c, int ni, struct iso_agent_desired *d)
{
	const struct agent_node *n = &c->agents->nodes[ni];
	_cleanup_free_ const struct agent_entry **mine =
	    calloc((size_t)(n->n_e > 0 ? n->n_e : 1), sizeof(*mine));

	d->members = calloc((size_t)(n->n_e > 0 ? n->n_e : 1), sizeof(*d->members));
	if (!mine || !d->members)
		return -ENOMEM;
	for (int i = 0; i < n->n_e; i++)
		mine[i] = &n->e[i];
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, sorted */
	qsort(mine, (size_t)n->n_e, sizeof(*mine), member_cmp);
	for (int i = 0; i < n->n_e; i++) {
		const struct agent_entry *e = mine[i];
		struct iso_agent_member_want *m = &d->members[d->n_members++];
		uint32_t vni =
		    c->agents->overlay || c->agents->cxi ? ctl_vni_of(c, e->tenant_id) : 0;

		iso_strlcpy(m->allocation, e->alloc, sizeof(m->allocation));
		m->member = (unsigned)e->member;
		iso_strlcpy(m->tenant, e->tenant, sizeof(m->tenant));
		iso_strlcpy(m->key, e->key, sizeof(m->key));
		m->cpus = e->cpus > 0 ? (unsigned)e->cpus : 0;
		m->memory_mib = e->memory_mib > 0 ? (uint64_t)e->memory_mib : 0;
		/* the tenant's switch (uring.c); off: the strict filter */
		m->io_uring = ctl_uring_allowed(c, e->tenant_id);
		/* Slingshot: the tenant's VNI; the uid/gid its CXI service admits
		 * are the attachment path's to give on the node (docs/agents.md
		 * "cxi"): the controller does not know a job's identity */
		if (vni && c->agents->cxi) {
			m->has_cxi = true;
			m->cxi_vni = vni;
		} else if (vni) {
			m->has_overlay = true;
			m->vni = vni;
			m->node_index = (unsigned)ni;
			if (build_peers(c, ni, e->tenant_id, m) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

static uint64_t served_generation(const struct ctl_agents *ag, int ni)
{
	return ((uint64_t)ag->term << 32) | ag->nodes[ni].gen;
}

static json_t *document(const struct iso_controller *c, int ni)
{
	const struct ctl_agents *ag = c->agents;

	return iso_codec_desired_wrap(c->inv->nodes[ni].name, served_generation(ag, ni),
	                              (uint64_t)ag->term, ag->nodes[ni].gpus, ag->nodes[ni].vfs,
	                              ag->nodes[ni].members);
}

static void answer_waiters(struct iso_controller *c, int ni, bool all)
{
	struct agent_node *n = &c->agents->nodes[ni];
	int64_t now = iso_now_ms();

	for (int i = 0; i < n->n_w;) {
		if (!all && n->w[i].deadline_ms > now) {
			i++;
			continue;
		}
		struct agent_waiter w = n->w[i];
		n->w[i] = n->w[--n->n_w];
		c->agents->waiters--;
		w.fn(w.arg, document(c, ni));
	}
}

/* Rebuilds node `ni`'s document; its generation moves when its content did.
 * The comparison is json_equal on the three parts, not their texts: the same
 * answer (objects equal key by key, whatever their order, as the sorted
 * compact text compared before) without printing and sorting the whole
 * document at every settle, which was most of a create's cost on a node
 * with many members (docs/benchmarks.md, "Where a create's time goes"). */
static void settle_node(struct iso_controller *c, int ni)
{
	struct agent_node *n = &c->agents->nodes[ni];
	struct iso_agent_desired d = {0};
	/* The document's shape is the codec's; its generation and term are
	 * set when it is served (document()). */
	json_t *doc =
	    build_gpus(c, ni, &d) == 0 && build_vfs(c, ni, &d) == 0 && build_members(c, ni, &d) == 0
	        ? iso_codec_desired_encode(&d)
	        : NULL;
	json_t *gpus = json_incref(json_object_get(doc, "gpus"));
	json_t *vfs = json_incref(json_object_get(doc, "vfs"));
	json_t *members = json_incref(json_object_get(doc, "members"));

	iso_codec_desired_clear(&d);
	json_decref(doc);
	n->dirty = false;
	if (!gpus || !vfs || !members) {
		/* Keep the old one; the next change tries again. */
		json_decref(gpus);
		json_decref(vfs);
		json_decref(members);
		iso_log(ISO_LOG_ERR, "agent_desired_failed", "node=%s reason=\"out of memory\"",
		        c->inv->nodes[ni].name);
		return;
	}
	if (n->gpus && json_equal(n->gpus, gpus) && json_equal(n->vfs, vfs) &&
	    json_equal(n->members, members)) {
		json_decref(gpus);
		json_decref(vfs);
		json_decref(members);
		return;
	}
	json_decref(n->gpus);
	json_decref(n->vfs);
	json_decref(n->members);
	n->gpus = gpus;
	n->vfs = vfs;
	n->members = members;
	n->gen++;
	answer_waiters(c, ni, true);
}

void ctl_agents_tenant_changed(struct iso_controller *c, int64_t tenant_id)
{
	struct ctl_agents *ag = c->agents;

	for (int i = 0; ag && i < ag->n; i++)
		if (node_has_tenant(&ag->nodes[i], tenant_id))
			mark_dirty(ag, i);
}

void ctl_agents_settle(struct iso_controller *c)
{
	struct ctl_agents *ag = c->agents;

	if (!ag)
		return;
	while (ag->n_dirty > 0)
		settle_node(c, ag->dirty[--ag->n_dirty]);
}

/* The term: one more than the stored one, stored before anything is served.
 * A leader lease's term (docs/store.md, "High availability") is used as it
 * is: it went up at the takeover, and started above the stored one. */
static int bump_term(struct iso_controller *c, int64_t lease_term, struct iso_error *err)
{
	char buf[32] = "", *end = NULL;
	long long t = 0;
	int r = c->store->ops->meta_get(c->store, TERM_META, buf, sizeof(buf), NULL);

	if (r == 0) {
		t = strtoll(buf, &end, 10);
		if (!buf[0] || *end || t < 0 || t >= (1LL << 31))
			return iso_error_set(err, ISO_E_INTERNAL, NULL,
			                     "store: meta %s is \"%s\", not a term", TERM_META,
			                     buf);
	}
	if (lease_term > 0) {
		if (lease_term <= t || lease_term >= (1LL << 31))
			return iso_error_set(
			    err, ISO_E_INTERNAL, NULL,
			    "the lease's term %lld is not above the agents' term %lld",
			    (long long)lease_term, t);
		t = lease_term - 1;
	}
	snprintf(buf, sizeof(buf), "%lld", t + 1);
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = c->store->ops->meta_set(c->store, TERM_META, buf, err);
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	c->agents->term = t + 1;
	iso_log(ISO_LOG_INFO, "agent_term", "term=%lld", t + 1);
	return 0;
}

int ctl_agents_open(struct iso_controller *c, const struct iso_controller_params *params,
                    struct iso_error *err)
{
	struct ctl_agents *ag = calloc(1, sizeof(*ag));
	int n = c->inv->n_nodes;

	if (!ag)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->agents = ag;
	ag->n = n;
	ag->max_waiters =
	    params->agent_max_waiters > 0 ? params->agent_max_waiters : DEFAULT_WAITERS;
	ag->lease_ms =
	    1000LL * (params->agent_lease_s > 0 ? params->agent_lease_s : DEFAULT_LEASE_S);
	ag->grace_ms =
	    1000LL * (params->agent_grace_s > 0 ? params->agent_grace_s : DEFAULT_GRACE_S);
	ag->required = params->agents_required;
	ag->overlay = c->inv->fabric.type == ISO_FABRIC_ETHERNET;
	ag->cxi = c->inv->fabric.type == ISO_FABRIC_SLINGSHOT;
	ag->opened_ms = iso_now_ms();
	ag->nodes = calloc((size_t)(n > 0 ? n : 1), sizeof(*ag->nodes));
	ag->dirty = calloc((size_t)(n > 0 ? n : 1), sizeof(*ag->dirty));
	ag->unreachable = calloc((size_t)(n > 0 ? n : 1), sizeof(*ag->unreachable));
	if (!ag->nodes || !ag->dirty || !ag->unreachable)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->cs.unreachable = ag->unreachable;
	/* Every node gets its first document at the first settle. */
	for (int i = 0; i < n; i++)
		mark_dirty(ag, i);
	c->cs.on_member = on_member;
	c->cs.on_member_arg = ag;
	return bump_term(c, params->agent_term, err);
}

void ctl_agents_close(struct iso_controller *c)
{
	struct ctl_agents *ag = c->agents;

	if (!ag)
		return;
	c->cs.on_member = NULL;
	c->cs.on_member_arg = NULL;
	c->cs.unreachable = NULL;
	for (int i = 0; ag->nodes && i < ag->n; i++) {
		struct agent_node *n = &ag->nodes[i];
		for (int j = 0; j < n->n_e; j++)
			entry_free(&n->e[j]);
		free(n->e);
		json_decref(n->gpus);
		free(n->inst);
		free(n->cond);
		free(n->cond_since_ms);
		json_decref(n->vfs);
		free(n->want_vf);
		free(n->vf);
		json_decref(n->members);
		free(n->sb);
		overlay_free(&n->overlay);
		free(n->cxi.services);
		free(n->cxm);
	}
	for (int i = 0; i < ag->n_tn; i++)
		free(ag->tn[i].nodes);
	free(ag->tn);
	free(ag->nodes);
	free(ag->dirty);
	free(ag->unreachable);
	free(ag);
	c->agents = NULL;
}

/* Audits a node's lease transition (the daemon is the actor). */
static void record_node(struct iso_controller *c, int ni, const char *action, json_t *details)
{
	struct ctl_event ev = {
	    .action = action, .kind = "node", .id = c->inv->nodes[ni].name, .details = details};

	ctl_record(c, NULL, &ev, ISO_AUDIT_SUCCESS, NULL);
}

static void set_unreachable(struct iso_controller *c, int ni, int64_t now, int64_t silent_ms)
{
	struct ctl_agents *ag = c->agents;
	struct agent_node *n = &ag->nodes[ni];

	n->unreachable_ms = now;
	n->evicted = false;
	ag->unreachable[ni] = true;
	c->cs.version++; /* capacity counted again */
	iso_log(ISO_LOG_WARN, "node_unreachable", "node=%s silent_ms=%lld lease_s=%lld",
	        c->inv->nodes[ni].name, (long long)silent_ms, (long long)(ag->lease_ms / 1000));
	record_node(c, ni, "node.unreachable",
	            json_pack("{s:I, s:I, s:b}", "silent_ms", (json_int_t)silent_ms, "lease_s",
	                      (json_int_t)(ag->lease_ms / 1000), "agent_seen", n->seen));
}

static void set_reachable(struct iso_controller *c, int ni)
{
	struct ctl_agents *ag = c->agents;
	struct agent_node *n = &ag->nodes[ni];
	int64_t was = iso_now_ms() - n->unreachable_ms;

	n->unreachable_ms = 0;
	n->evicted = false;
	ag->unreachable[ni] = false;
	c->cs.version++;
	iso_log(ISO_LOG_INFO, "node_reachable", "node=%s unreachable_ms=%lld",
	        c->inv->nodes[ni].name, (long long)was);
	record_node(c, ni, "node.reachable", json_pack("{s:I}", "unreachable_ms", (json_int_t)was));
	ctl_place_pending(c);
}

/* The grace is over: its work goes, exactly as when the node goes down. */
static void evict_lost(struct iso_controller *c, int ni)
{
	struct agent_node *n = &c->agents->nodes[ni];
	const char *name = c->inv->nodes[ni].name;
	char reason[ISO_NAME_MAX + 32];
	struct iso_error err = {0};

	n->evicted = true;
	record_node(c, ni, "node.agent_lost",
	            json_pack("{s:I}", "grace_s", (json_int_t)(c->agents->grace_ms / 1000)));
	snprintf(reason, sizeof(reason), "node %s unreachable", name);
	if (ctl_evict_node(c, name, reason, &err) < 0) {
		/* Tried again at the next check. */
		n->evicted = false;
		iso_log(ISO_LOG_ERR, "node_evict_failed", "node=%s error=\"%s\"", name,
		        err.message);
		return;
	}
	iso_log(ISO_LOG_ERR, "node_agent_lost", "node=%s grace_s=%lld", name,
	        (long long)(c->agents->grace_ms / 1000));
	ctl_place_pending(c);
}

static void check_leases(struct iso_controller *c, int64_t now)
{
	struct ctl_agents *ag = c->agents;

	for (int i = 0; i < ag->n; i++) {
		struct agent_node *n = &ag->nodes[i];

		if (!n->seen && !ag->required)
			continue;
		int64_t silent = now - (n->seen ? n->last_seen_ms : ag->opened_ms);
		if (!n->unreachable_ms && silent > ag->lease_ms)
			set_unreachable(c, i, now, silent);
		else if (n->unreachable_ms && !n->evicted &&
		         now - n->unreachable_ms >= ag->grace_ms)
			evict_lost(c, i);
	}
}

void ctl_agents_tick(struct iso_controller *c)
{
	struct ctl_agents *ag = c->agents;
	int64_t now = iso_now_ms();

	if (!ag)
		return;
	ctl_agents_settle(c);
	for (int i = 0; ag->waiters > 0 && i < ag->n; i++)
		if (ag->nodes[i].n_w)
			answer_waiters(c, i, false);
	if (now - ag->checked_ms >= LEASE_CHECK_MS) {
		ag->checked_ms = now;
		check_leases(c, now);
	}
}

int64_t iso_controller_agent_term(const struct iso_controller *c)
{
	return c->agents ? c->agents->term : 0;
}

/* Node `node` as `p` may act for it under `action`: a node-agent only for
 * its own node (another answers 404 exactly like a missing one). */
static int resolve_agent_node(struct iso_controller *c, const struct iso_principal *p,
                              const char *action, const char *node, int *ni, struct iso_error *err)
{
	enum ctl_scope scope;
	int r = ctl_authorize(p, action, &scope, err);

	if (r < 0)
		return r;
	*ni = iso_cluster_state_node_index(&c->cs, node);
	if (*ni < 0 || (scope == CTL_SCOPE_NODE && strcmp(p->node, node) != 0))
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "node \"%s\" not found", node);
	return 0;
}

int iso_controller_node_desired(struct iso_controller *c, const struct iso_principal *p,
                                const char *node, const struct iso_desired_wait *wait, json_t **out,
                                struct iso_error *err)
{
	struct ctl_agents *ag = c->agents;
	int ni, r;

	*out = NULL;
	r = resolve_agent_node(c, p, "node.desired.read", node, &ni, err);
	if (r < 0)
		return r;
	if (wait && (wait->wait_s < 0 || wait->wait_s > MAX_WAIT_S))
		return iso_error_set(err, ISO_E_INVALID, "wait_s", "wait_s: must be 0..%d",
		                     MAX_WAIT_S);
	struct agent_node *n = &ag->nodes[ni];
	/* The long poll of an agent that has reported is its heartbeat: one
	 * request per period instead of two (bench/agents: two cost 36% of a core
	 * at 10,000 idle agents). Only a principal that may write the node's
	 * status renews it (not an auditor reading), and only once the node's
	 * agent has reported in this controller's run (a restarted controller
	 * moves the term, so the agent's next status differs and is sent). The
	 * agent sends a status whenever it changes, so the one kept is current:
	 * an unreachable node whose agent is back is reachable again with it. */
	if (wait && wait->heartbeat) {
		enum ctl_scope scope;
		struct iso_error ignored = {0};
		if (ctl_authorize(p, "node.status.write", &scope, &ignored) < 0)
			return iso_error_set(
			    err, ISO_E_FORBIDDEN, "heartbeat",
			    "heartbeat: only the node's agent may renew its lease");
		if (n->seen) {
			n->last_seen_ms = iso_now_ms();
			if (n->unreachable_ms)
				set_reachable(c, ni);
		}
	}
	ctl_agents_settle(c);
	if (!wait || !wait->fn || wait->wait_s == 0 || ag->closing ||
	    wait->after != served_generation(ag, ni)) {
		*out = document(c, ni);
		return *out ? 0 : iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	if (n->n_w >= WAITERS_PER_NODE)
		return iso_error_set(err, ISO_E_LIMIT, "wait_s",
		                     "node %s already has %d waiting requests", node,
		                     WAITERS_PER_NODE);
	if (ag->waiters >= ag->max_waiters)
		return iso_error_set(err, ISO_E_LIMIT, "wait_s",
		                     "the controller already has %d waiting requests (see "
		                     "--agent-max-waiters)",
		                     ag->max_waiters);
	n->w[n->n_w++] = (struct agent_waiter){
	    .fn = wait->fn, .arg = wait->arg, .deadline_ms = iso_now_ms() + wait->wait_s * 1000LL};
	ag->waiters++;
	return 0;
}

void iso_controller_agents_release_waiters(struct iso_controller *c)
{
	struct ctl_agents *ag = c->agents;

	ctl_sm_tick(c, true); /* the SM host's agent's long poll too */
	if (ag)
		ag->closing = true; /* a request still coming in is answered at once */
	for (int i = 0; ag && ag->waiters > 0 && i < ag->n; i++)
		answer_waiters(c, i, true);
}

/* The inventory GPU of node `ni` with device index `index`, or NULL. */
static const struct iso_gpu *node_gpu(const struct iso_controller *c, int ni, int index)
{
	const struct iso_node *node = &c->inv->nodes[ni];

	for (int g = 0; g < node->n_gpus; g++)
		if (node->gpus[g].index == index)
			return &node->gpus[g];
	return NULL;
}

/* What only the inventory can check: the GPUs and profiles are this node's. */
static int check_status(const struct iso_controller *c, int ni, const struct iso_agent_status *st,
                        struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];

	for (int i = 0; i < st->n_gpus; i++) {
		snprintf(field, sizeof(field), "gpus[%d].index", i);
		if (!node_gpu(c, ni, st->gpus[i].index))
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: node %s has no GPU %d in the inventory", field,
			                     c->inv->nodes[ni].name, st->gpus[i].index);
		for (int j = 0; j < i; j++)
			if (st->gpus[j].index == st->gpus[i].index)
				return iso_error_set(err, ISO_E_INVALID, field,
				                     "%s: GPU %d is reported twice", field,
				                     st->gpus[i].index);
	}
	for (int i = 0; i < st->n_instances; i++) {
		const struct iso_agent_instance *in = &st->instances[i];
		const struct iso_gpu *gpu = node_gpu(c, ni, in->gpu);

		snprintf(field, sizeof(field), "instances[%d].gpu", i);
		if (!gpu)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: node %s has no GPU %d in the inventory", field,
			                     c->inv->nodes[ni].name, in->gpu);
		snprintf(field, sizeof(field), "instances[%d].profile", i);
		if (strcmp(in->profile, "whole") != 0 &&
		    (!gpu->mig_enabled || !iso_mig_profile_find(gpu->model, in->profile)))
			return iso_error_set(
			    err, ISO_E_INVALID, field,
			    "%s: \"%s\" is not \"whole\" nor a MIG profile of GPU %d "
			    "(%s%s)",
			    field, in->profile, in->gpu, gpu->model->name,
			    gpu->mig_enabled ? "" : ", MIG disabled");
	}
	return 0;
}

static void gate_node(struct iso_controller *c, int ni);

/* Conditions are checked against the inventory: the GPU is the node's, and
 * `want` is the MIG mode the inventory gives it. */
static int check_conditions(const struct iso_controller *c, int ni,
                            const struct iso_agent_status *st, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];

	for (int i = 0; i < st->n_conditions; i++) {
		const struct iso_agent_condition *k = &st->conditions[i];
		const struct iso_gpu *gpu = node_gpu(c, ni, k->gpu);

		snprintf(field, sizeof(field), "conditions[%d].gpu", i);
		if (!gpu)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: node %s has no GPU %d in the inventory", field,
			                     c->inv->nodes[ni].name, k->gpu);
		for (int j = 0; j < i; j++)
			if (st->conditions[j].gpu == k->gpu &&
			    strcmp(st->conditions[j].type, k->type) == 0)
				return iso_error_set(err, ISO_E_INVALID, field,
				                     "%s: GPU %d has this condition twice", field,
				                     k->gpu);
		snprintf(field, sizeof(field), "conditions[%d].want", i);
		if (k->want != gpu->mig_enabled)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: the inventory has MIG %s on GPU %d", field,
			                     gpu->mig_enabled ? "enabled" : "disabled", k->gpu);
	}
	return 0;
}

static int cond_find(const struct iso_agent_condition *v, int n,
                     const struct iso_agent_condition *k)
{
	for (int i = 0; i < n; i++)
		if (v[i].gpu == k->gpu && strcmp(v[i].type, k->type) == 0)
			return i;
	return -1;
}

static void record_condition(struct iso_controller *c, int ni, const char *action,
                             const struct iso_agent_condition *k)
{
	iso_log(strcmp(action, "node.condition_set") == 0 ? ISO_LOG_WARN : ISO_LOG_INFO,
	        "node_condition", "node=%s type=%s gpu=%d want=%s have=%s state=%s",
	        c->inv->nodes[ni].name, k->type, k->gpu, k->want ? "on" : "off",
	        k->have ? "on" : "off",
	        strcmp(action, "node.condition_set") == 0 ? "set" : "cleared");
	record_node(c, ni, action,
	            json_pack("{s:s, s:i, s:b, s:b}", "type", k->type, "gpu", k->gpu, "want",
	                      k->want, "have", k->have));
}

/* Keeps the reported conditions; those that appeared or cleared are
 * audited once, and placement follows them (ctl_agents_avoid). */
static int keep_conditions(struct iso_controller *c, int ni, const struct iso_agent_status *st)
{
	struct agent_node *n = &c->agents->nodes[ni];
	struct iso_agent_condition *cond = NULL;
	int64_t *since = NULL, now = iso_now_ms();
	bool cleared = false;

	if (st->n_conditions == 0 && n->n_cond == 0)
		return 0;
	if (st->n_conditions > 0) {
		cond = calloc((size_t)st->n_conditions, sizeof(*cond));
		since = calloc((size_t)st->n_conditions, sizeof(*since));
		if (!cond || !since) {
			free(cond);
			free(since);
			return -ENOMEM;
		}
		memcpy(cond, st->conditions, (size_t)st->n_conditions * sizeof(*cond));
	}
	for (int i = 0; i < st->n_conditions; i++) {
		int was = cond_find(n->cond, n->n_cond, &cond[i]);
		if (was >= 0 && n->cond[was].have == cond[i].have) {
			since[i] = n->cond_since_ms[was];
			continue;
		}
		since[i] = now;
		record_condition(c, ni, "node.condition_set", &cond[i]);
	}
	for (int i = 0; i < n->n_cond; i++)
		if (cond_find(cond, st->n_conditions, &n->cond[i]) < 0) {
			record_condition(c, ni, "node.condition_cleared", &n->cond[i]);
			cleared = true;
		}
	free(n->cond);
	free(n->cond_since_ms);
	n->cond = cond;
	n->cond_since_ms = since;
	n->n_cond = st->n_conditions;
	c->cs.version++; /* capacity counted again */
	if (cleared)
		ctl_place_pending(c); /* the GPU takes new work again */
	return 0;
}

int ctl_agents_avoid(const struct iso_controller *c, struct iso_gpu_ref *out, int max)
{
	const struct ctl_agents *ag = c->agents;
	int n = 0;

	for (int i = 0; ag && i < ag->n; i++)
		for (int k = 0; k < ag->nodes[i].n_cond && n < max; k++) {
			out[n].node = c->inv->nodes[i].name;
			out[n].gpu = ag->nodes[i].cond[k].gpu;
			n++;
		}
	return n;
}

json_t *iso_controller_node_conditions(const struct iso_controller *c, int ni)
{
	const struct agent_node *n;
	json_t *a = json_array();

	if (!c->agents || ni < 0 || ni >= c->agents->n)
		return a;
	n = &c->agents->nodes[ni];
	for (int i = 0; i < n->n_cond; i++) {
		char since[40];
		iso_format_time(n->cond_since_ms[i], since, sizeof(since));
		json_array_append_new(a, json_pack("{s:s, s:i, s:b, s:b, s:s}", "type",
		                                   n->cond[i].type, "gpu", n->cond[i].gpu, "want",
		                                   n->cond[i].want, "have", n->cond[i].have,
		                                   "since", since));
	}
	return a;
}

/* The VFs reported are the node's (an index below its inventory's VF count),
 * each at most once. */
static int check_vfs(const struct iso_controller *c, int ni, const struct iso_agent_status *st,
                     struct iso_error *err)
{
	const struct iso_node *node = &c->inv->nodes[ni];
	int n_vfs = node->has_port ? node->port.n_vfs : 0;
	char field[ISO_ERR_FIELD_MAX];

	for (int i = 0; i < st->n_vfs; i++) {
		snprintf(field, sizeof(field), "vfs[%d].index", i);
		if (st->vfs[i].index >= n_vfs)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: node %s has %d VFs in the inventory", field,
			                     node->name, n_vfs);
		for (int j = 0; j < i; j++)
			if (st->vfs[j].index == st->vfs[i].index)
				return iso_error_set(err, ISO_E_INVALID, field,
				                     "%s: VF %d is reported twice", field,
				                     st->vfs[i].index);
	}
	return 0;
}

int iso_controller_node_status(struct iso_controller *c, const struct iso_principal *p,
                               const char *node, const struct iso_agent_status *st,
                               struct iso_error *err)
{
	struct ctl_agents *ag = c->agents;
	struct iso_agent_instance *inst = NULL;
	struct iso_agent_vf *vf = NULL;
	struct iso_agent_sandbox *sb = NULL;
	struct iso_agent_overlay ov = {0};
	struct iso_cxi_service *cxs = NULL;
	struct iso_agent_cxi_member_status *cxm = NULL;
	int ni, r;

	r = resolve_agent_node(c, p, "node.status.write", node, &ni, err);
	if (r < 0)
		return r;
	if (st->term_seen > ag->term)
		return iso_error_set(err, ISO_E_CONFLICT, "term_seen",
		                     "term_seen: %lld is above this controller's term %lld: a "
		                     "newer controller exists",
		                     (long long)st->term_seen, (long long)ag->term);
	r = check_status(c, ni, st, err);
	if (r == 0)
		r = check_vfs(c, ni, st, err);
	if (r == 0)
		r = check_conditions(c, ni, st, err);
	if (r < 0)
		return r;
	if (st->n_vfs > 0) {
		vf = calloc((size_t)st->n_vfs, sizeof(*vf));
		if (!vf)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		memcpy(vf, st->vfs, (size_t)st->n_vfs * sizeof(*vf));
	}
	if (st->n_instances > 0) {
		inst = calloc((size_t)st->n_instances, sizeof(*inst));
		if (!inst) {
			free(vf);
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		}
		memcpy(inst, st->instances, (size_t)st->n_instances * sizeof(*inst));
	}
	if ((st->n_sandboxes > 0 && !(sb = calloc((size_t)st->n_sandboxes, sizeof(*sb)))) ||
	    (st->has_overlay && overlay_copy(&st->overlay, &ov) < 0) ||
	    (st->has_cxi && st->cxi.n_services > 0 &&
	     !(cxs = calloc((size_t)st->cxi.n_services, sizeof(*cxs)))) ||
	    (st->n_cxi_members > 0 && !(cxm = calloc((size_t)st->n_cxi_members, sizeof(*cxm))))) {
		free(vf);
		free(inst);
		free(sb);
		free(cxs);
		overlay_free(&ov);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	if (sb)
		memcpy(sb, st->sandboxes, (size_t)st->n_sandboxes * sizeof(*sb));
	struct agent_node *n = &ag->nodes[ni];
	if (!n->seen)
		iso_log(ISO_LOG_INFO, "agent_registered",
		        "request_id=%s by=%s node=%s version=\"%s\" term_seen=%lld", p->request_id,
		        p->token_id, node, st->version, (long long)st->term_seen);
	free(n->inst);
	n->inst = inst;
	n->n_inst = st->n_instances;
	free(n->vf);
	n->vf = vf;
	n->n_vf = st->n_vfs;
	free(n->sb);
	n->sb = sb;
	n->n_sb = st->n_sandboxes;
	n->sandbox_real = st->sandbox_real;
	overlay_free(&n->overlay);
	n->overlay = ov;
	n->has_overlay = st->has_overlay;
	free(n->cxi.services);
	n->has_cxi = st->has_cxi;
	n->cxi = st->cxi;
	n->cxi.services = cxs;
	if (cxs)
		memcpy(cxs, st->cxi.services, (size_t)st->cxi.n_services * sizeof(*cxs));
	free(n->cxm);
	n->cxm = cxm;
	n->n_cxm = st->n_cxi_members;
	if (cxm)
		memcpy(cxm, st->cxi_members, (size_t)st->n_cxi_members * sizeof(*cxm));
	n->seen = true;
	n->last_seen_ms = iso_now_ms();
	n->term_seen = st->term_seen;
	iso_strlcpy(n->version, st->version, sizeof(n->version));
	if (keep_conditions(c, ni, st) < 0)
		iso_log(ISO_LOG_ERR, "node_conditions_lost", "node=%s reason=\"out of memory\"",
		        node);
	if (n->unreachable_ms)
		set_reachable(c, ni);
	if (c->agent_gate)
		gate_node(c, ni);
	return 0;
}

/* Node `n`'s VF of tenant `tenant_id` as its agent reported it: NULL when
 * the tenant has no VF there (a node without VFs) or it is not reported
 * ready with the GUID the fabric names (a RoCE VF: with the tenant's VLAN
 * and the spoof check on). *has_vf says whether one is due. */
static const struct iso_agent_vf *vf_ready(const struct agent_node *n, int64_t tenant_id,
                                           const char *alloc, bool *has_vf)
{
	*has_vf = false;
	/* the allocation's own VF first (a per-allocation tenant's, a pod's
	 * attachment's), else its tenant's shared one */
	for (int pass = 0; pass < 2 * n->n_want_vf; pass++) {
		int v = pass % n->n_want_vf;
		bool own = pass < n->n_want_vf;
		if (n->want_vf[v].tenant_id != tenant_id ||
		    (own ? strcmp(n->want_vf[v].alloc, alloc) != 0 : n->want_vf[v].alloc[0] != 0))
			continue;
		*has_vf = true;
		for (int i = 0; i < n->n_vf; i++) {
			const struct iso_agent_vf *x = &n->vf[i];
			const struct ctl_node_vf *w = &n->want_vf[v];

			if (x->index != w->vf)
				continue;
			if (w->vlan)
				return x->ready && x->has_vlan && x->vlan == w->vlan && x->spoofchk
				           ? x
				           : NULL;
			return x->ready && x->has_guid && x->guid == w->guid ? x : NULL;
		}
		return NULL;
	}
	return NULL;
}

/* Has node `n`'s agent reported every one of `slots` (member `k` of
 * allocation `id`, of tenant `tenant_id`) present and ready, and the
 * tenant's VF there with its GUID? A member without GPUs needs its agent
 * to have reported at all. */
/* Member k of allocation id's sandbox as node n's agent last reported it;
 * NULL when none. */
static const struct iso_agent_sandbox *sandbox_of(const struct agent_node *n, const char *id, int k)
{
	for (int i = 0; i < n->n_sb; i++)
		if (n->sb[i].member == k && strcmp(n->sb[i].allocation, id) == 0)
			return &n->sb[i];
	return NULL;
}

/* On a slingshot fabric: has node n's agent reported member k of
 * allocation id's CXI service ready (made, or none due before its
 * attachment admits an identity)? A node whose agent has no CXI driver
 * reports its members not ready, with the reason. */
static bool cxi_ready(const struct agent_node *n, const char *id, int k)
{
	for (int i = 0; i < n->n_cxm; i++)
		if (n->cxm[i].member == k && strcmp(n->cxm[i].allocation, id) == 0)
			return n->cxm[i].ready;
	return false;
}

static bool slots_ready(const struct agent_node *n, bool cxi, const char *id, int64_t tenant_id,
                        const char *key, int k, const struct iso_slot *slots, int n_slots)
{
	const struct iso_agent_sandbox *sb;
	bool has_vf;

	if (!n->seen)
		return false;
	if (cxi && !cxi_ready(n, id, k))
		return false;
	/* an agent that makes sandboxes: the member runs in one or not at all;
	 * a pod's CNI attachment (issue 17, key "cni:...") runs in the pod,
	 * which its runtime made, and the agent answers the plugin only once
	 * the pod's interface is on the overlay */
	if (n->sandbox_real && strncmp(key, "cni:", 4) != 0 &&
	    (!(sb = sandbox_of(n, id, k)) || !sb->ready))
		return false;
	if (!vf_ready(n, tenant_id, id, &has_vf) && has_vf)
		return false;
	for (int s = 0; s < n_slots; s++) {
		const struct iso_slot *sl = &slots[s];
		bool found = false;

		if (sl->member != k)
			continue;
		for (int i = 0; i < n->n_inst && !found; i++) {
			const struct iso_agent_instance *in = &n->inst[i];
			found = in->ready && in->member == k && in->gpu == sl->gpu &&
			        strcmp(in->allocation, id) == 0 &&
			        (sl->whole ? strcmp(in->profile, "whole") == 0
			                   : strcmp(in->profile, sl->profile) == 0 &&
			                         in->start == sl->start);
		}
		if (!found)
			return false;
	}
	return true;
}

bool ctl_agents_member_ready(const struct iso_controller *c, const struct iso_allocation *a, int k)
{
	int ni;

	if (!c->agents || k < 0 || k >= a->n_members)
		return false;
	ni = iso_cluster_state_node_index(&c->cs, a->placed[k].node);
	if (ni < 0 || ni >= c->agents->n)
		return false;
	return slots_ready(&c->agents->nodes[ni], c->agents->cxi, a->id, a->tenant_id, a->idem_key,
	                   k, a->slots, a->n_slots);
}

/* A report made members of node `ni` ready: their allocations pass the gate
 * now, not at the next pass. Each entry is checked until its allocation is
 * past provisioning, so a heartbeat of a settled node reads no store. */
static void gate_node(struct iso_controller *c, int ni)
{
	struct agent_node *n = &c->agents->nodes[ni];
	char(*ids)[ISO_ID_MAX] = NULL;
	int n_ids = 0;

	for (int i = 0; i < n->n_e; i++) {
		struct agent_entry *e = &n->e[i];

		if (e->gated || !slots_ready(n, c->agents->cxi, e->alloc, e->tenant_id, e->key,
		                             e->member, e->slots, e->n_slots))
			continue;
		e->gated = true;
		/* where an attachment's time goes (bench/cni/ib.py): the agent's
		 * report that made the member ready, before the fabric's part */
		iso_log(ISO_LOG_INFO, "agent_member_ready", "node=%s allocation=%s member=%d",
		        c->inv->nodes[ni].name, e->alloc, e->member);
		if (!ids && !(ids = calloc((size_t)n->n_e, sizeof(*ids))))
			return;
		iso_strlcpy(ids[n_ids++], e->alloc, sizeof(ids[0]));
	}
	/* Copied first: activating an allocation may not touch the entries,
	 * but the list must not depend on it. */
	for (int i = 0; i < n_ids; i++)
		if (ctl_alloc_gate_id(c, ids[i]) == 0)
			for (int j = 0; j < n->n_e; j++)
				if (strcmp(n->e[j].alloc, ids[i]) == 0)
					n->e[j].gated = false; /* still waiting: look again */
	free(ids);
}

bool iso_controller_node_agent(const struct iso_controller *c, int ni, struct iso_agent_view *out)
{
	const struct ctl_agents *ag = c->agents;
	const struct agent_node *n;

	if (!ag || ni < 0 || ni >= ag->n || !ag->nodes[ni].seen)
		return false;
	n = &ag->nodes[ni];
	out->connected = !n->unreachable_ms && iso_now_ms() - n->last_seen_ms <= ag->lease_ms;
	out->last_seen_ms = n->last_seen_ms;
	out->term_seen = n->term_seen;
	iso_strlcpy(out->version, n->version, sizeof(out->version));
	return true;
}

bool iso_controller_node_unreachable(const struct iso_controller *c, int ni)
{
	return c->agents && ni >= 0 && ni < c->agents->n && c->agents->nodes[ni].unreachable_ms;
}

static int instance_cmp(const void *pa, const void *pb)
{
	const struct iso_agent_instance *a = *(const struct iso_agent_instance *const *)pa;
	const struct iso_agent_instance *b = *(const struct iso_agent_instance *const *)pb;

	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	return a->start - b->start;
}

void iso_controller_member_devices(const struct iso_controller *c, const struct iso_allocation *a,
                                   int k, int *ready, struct iso_member_device *out, int max,
                                   int *n_out)
{
	const struct iso_agent_instance *mine[ISO_AGENT_MAX_INSTANCES];
	const struct agent_node *n;
	int ni, n_mine = 0;

	*ready = -1;
	*n_out = 0;
	if (!c->agents || k < 0 || k >= a->n_members)
		return;
	ni = iso_cluster_state_node_index(&c->cs, a->placed[k].node);
	if (ni < 0 || !c->agents->nodes[ni].seen)
		return;
	n = &c->agents->nodes[ni];
	for (int i = 0; i < n->n_inst && n_mine < ISO_AGENT_MAX_INSTANCES; i++)
		if (n->inst[i].member == k && strcmp(n->inst[i].allocation, a->id) == 0)
			mine[n_mine++] = &n->inst[i];
	if (!n_mine)
		return;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, sorted */
	qsort(mine, (size_t)n_mine, sizeof(*mine), instance_cmp);
	*ready = 1;
	for (int i = 0; i < n_mine; i++) {
		if (!mine[i]->ready)
			*ready = 0;
		if (mine[i]->uuid[0] && *n_out < max) {
			out[*n_out].gpu = mine[i]->gpu;
			iso_strlcpy(out[*n_out].uuid, mine[i]->uuid, sizeof(out[*n_out].uuid));
			(*n_out)++;
		}
	}
}

bool iso_controller_member_vf(const struct iso_controller *c, const struct iso_allocation *a, int k,
                              struct iso_member_vf *out)
{
	const struct iso_agent_vf *v;
	bool has_vf;
	int ni;

	if (!c->agents || k < 0 || k >= a->n_members)
		return false;
	ni = iso_cluster_state_node_index(&c->cs, a->placed[k].node);
	if (ni < 0 || ni >= c->agents->n || !c->agents->nodes[ni].seen)
		return false;
	if (!(v = vf_ready(&c->agents->nodes[ni], a->tenant_id, a->id, &has_vf)))
		return false;
	out->index = v->index;
	iso_strlcpy(out->netdev, v->netdev, sizeof(out->netdev));
	out->guid = v->guid;
	out->vlan = v->has_vlan ? v->vlan : 0;
	return true;
}

bool iso_controller_member_sandbox(const struct iso_controller *c, const struct iso_allocation *a,
                                   int k, struct iso_member_sandbox *out)
{
	const struct iso_agent_sandbox *sb;
	int ni;

	if (!c->agents || k < 0 || k >= a->n_members)
		return false;
	ni = iso_cluster_state_node_index(&c->cs, a->placed[k].node);
	if (ni < 0 || ni >= c->agents->n || !c->agents->nodes[ni].seen)
		return false;
	sb = sandbox_of(&c->agents->nodes[ni], a->id, k);
	if (!sb || !sb->cgroup[0])
		return false;
	iso_strlcpy(out->cgroup, sb->cgroup, sizeof(out->cgroup));
	iso_strlcpy(out->cpus, sb->cpus, sizeof(out->cpus));
	return true;
}

void ctl_agents_overlay_view(const struct iso_controller *c, int ni, struct ctl_overlay_view *out)
{
	const struct agent_node *n;

	memset(out, 0, sizeof(*out));
	if (!c->agents || ni < 0 || ni >= c->agents->n)
		return;
	n = &c->agents->nodes[ni];
	out->seen = n->seen;
	out->sandbox_real = n->sandbox_real;
	out->overlay = n->seen && n->has_overlay ? &n->overlay : NULL;
	out->n_members = n->n_e;
	out->want_vf = n->want_vf;
	out->n_want_vf = n->n_want_vf;
	out->vf = n->seen ? n->vf : NULL;
	out->n_vf = n->seen ? n->n_vf : 0;
	out->cxi = n->seen && n->has_cxi ? &n->cxi : NULL;
}

void ctl_agents_node_member(const struct iso_controller *c, int ni, int i, const char **alloc,
                            int *member, int64_t *tenant_id)
{
	const struct agent_entry *e = &c->agents->nodes[ni].e[i];

	*alloc = e->alloc;
	*member = e->member;
	*tenant_id = e->tenant_id;
}

bool ctl_agents_node_member_attachment(const struct iso_controller *c, int ni, int i)
{
	return strncmp(c->agents->nodes[ni].e[i].key, "cni:", 4) == 0;
}

bool ctl_agents_tenant_on_node(const struct iso_controller *c, int64_t tenant_id, int ni)
{
	const struct tenant_nodes *t =
	    c->agents ? tenant_nodes_of(c->agents, tenant_id, false) : NULL;

	for (int i = 0; t && i < t->n; i++)
		if (t->nodes[i] == ni)
			return true;
	return false;
}

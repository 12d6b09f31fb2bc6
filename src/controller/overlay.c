/* overlay.c: the verifier's Ethernet mode (issue 14, docs/fabric.md
 * "Ethernet"). On an InfiniBand fabric the isolation proof reads the P_Key
 * tables the fabric really holds (src/fabric/verify.c); on Ethernet the
 * tenants are apart only as long as every node's kernel keeps them apart, so
 * the proof reads what each node's agent read back from its kernel (netlink
 * and nft; the status report's "overlay", docs/agents.md), never what the
 * controller asked for, and judges it against the controller's truth: which
 * tenant holds which VNI (vni.c) and which member lives on which node
 * (agents.c). No cross-tenant path exists when
 *   - every member is attached only to its own tenant's VNI and bridge, and
 *     no bridge joins two VNIs (else cross_tenant);
 *   - a VNI carries one tenant's members (else shared_vni; extra for a VNI
 *     no tenant holds, or a member that is no live member of that node);
 *   - the VXLAN guard is on wherever a node holds overlay members (no_guard);
 *   - every (peer, vni) pair the guard lets in names another node's
 *     underlay address, and both that node and this one hold a member of
 *     the VNI's tenant (stray_peer).
 * RoCE traffic bypasses netfilter, so on a cluster with RoCE VFs (fabric.c,
 * fabric.vlan_range) each tenant's VF must read back its tenant's VLAN with
 * the spoof check on: another tenant's VLAN is cross_tenant, no VLAN or the
 * spoof check off is no_guard, a VLAN no tenant holds is extra, and an
 * assigned VF the agent does not report is missing.
 * A live member whose agent makes sandboxes but that is attached nowhere is
 * drift (missing), and a node with overlay members whose agent never
 * reported cannot be judged (unreachable). The findings have the P_Key
 * verifier's shape (struct iso_fabric_report), so GET /v1/fabric/verify and
 * `isoctl fabric verify` (exit 8 on a violation) serve both.
 *
 * It runs on the daemon's loop: it reads memory only, each node's report
 * once, with the tenants' node lists and a sorted table of underlay
 * addresses for the lookups. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "controller/tnum.h"

struct ip_ref {
	uint32_t addr;
	int ni;
};

struct unowned {
	uint32_t vni;
	int64_t tenant_id;
	int ni;
};

static int ip_cmp(const void *x, const void *y)
{
	const struct ip_ref *a = x, *b = y;

	return (a->addr > b->addr) - (a->addr < b->addr);
}

/* The node whose underlay_ip is `ip`; -1 when none. */
static int node_of_ip(const struct ip_ref *ips, int n, const char *ip)
{
	struct ip_ref key = {0};
	const struct ip_ref *hit;

	if (iso_parse_ipv4(ip, &key.addr) < 0)
		return -1;
	hit = bsearch(&key, ips, (size_t)n, sizeof(*ips), ip_cmp);
	return hit ? hit->ni : -1;
}

/* The live member (alloc, k) on node ni: its tenant, or 0 when it is none. */
static int64_t live_member(struct iso_controller *c, int ni, int n_members, const char *alloc,
                           int k)
{
	for (int i = 0; i < n_members; i++) {
		const char *a;
		int m;
		int64_t t;

		ctl_agents_node_member(c, ni, i, &a, &m, &t);
		if (m == k && strcmp(a, alloc) == 0)
			return t;
	}
	return 0;
}

static bool attached(const struct iso_agent_overlay *ov, const char *alloc, int k)
{
	for (int i = 0; ov && i < ov->n_tenants; i++)
		for (int j = 0; j < ov->tenants[i].n_members; j++)
			if (ov->tenants[i].members[j].member == k &&
			    strcmp(ov->tenants[i].members[j].allocation, alloc) == 0)
				return true;
	return false;
}

/* One node's tenants: bridges, VNIs and the members on them. */
static void judge_tenants(struct iso_controller *c, struct ctl_findings *f, int ni,
                          const struct ctl_overlay_view *view, struct unowned **un, int *n_un,
                          int *cap_un)
{
	const char *node = c->inv->nodes[ni].name;
	const char *nodes[2] = {node, NULL};
	const struct iso_agent_overlay *ov = view->overlay;

	for (int i = 0; i < ov->n_tenants; i++) {
		const struct iso_agent_overlay_tenant *t = &ov->tenants[i];
		int64_t owner = ctl_vni_owner(c, t->vni);
		char owner_name[ISO_NAME_MAX] = "", bridge[ISO_AGENT_IFNAME_MAX];
		const char *tenants[2] = {NULL, NULL};

		if (owner)
			iso_controller_tenant_name(c, owner, owner_name, sizeof(owner_name));
		tenants[0] = owner ? owner_name : NULL;
		snprintf(bridge, sizeof(bridge), "isobr%u", t->vni);
		if (!owner && t->n_members > 0)
			CTL_FINDING(f, ISO_VIOL_EXTRA, t->vni, nodes, NULL,
			            "node %s: VNI %u carries %d member(s) but no tenant holds it",
			            node, t->vni, t->n_members);
		else if (!owner)
			CTL_FINDING(f, ISO_VIOL_EXTRA, t->vni, nodes, NULL,
			            "node %s: bridge %s carries VNI %u, which no tenant holds",
			            node, t->bridge, t->vni);
		/* The bridge is the L2 domain: a VNI on another VNI's bridge, or one
		 * bridge under two VNIs, joins two tenants. */
		if (strcmp(t->bridge, bridge) != 0)
			CTL_FINDING(f, ISO_VIOL_CROSS_TENANT, t->vni, nodes, tenants,
			            "node %s: VNI %u is on bridge %s, not its own %s", node, t->vni,
			            t->bridge, bridge);
		for (int j = 0; j < i; j++)
			if (strcmp(ov->tenants[j].bridge, t->bridge) == 0)
				CTL_FINDING(f, ISO_VIOL_CROSS_TENANT, t->vni, nodes, tenants,
				            "node %s: bridge %s joins VNIs %u and %u", node,
				            t->bridge, ov->tenants[j].vni, t->vni);
		for (int j = 0; j < t->n_members; j++) {
			const struct iso_agent_overlay_member *m = &t->members[j];
			int64_t holder =
			    live_member(c, ni, view->n_members, m->allocation, m->member);
			char holder_name[ISO_NAME_MAX] = "";

			if (!holder) {
				CTL_FINDING(
				    f, ISO_VIOL_EXTRA, t->vni, nodes, tenants,
				    "node %s: %s member %d is attached to VNI %u but is no live "
				    "member "
				    "of this node",
				    node, m->allocation, m->member, t->vni);
				continue;
			}
			iso_controller_tenant_name(c, holder, holder_name, sizeof(holder_name));
			if (owner && holder != owner) {
				const char *both[2] = {holder_name, owner_name};
				CTL_FINDING(
				    f, ISO_VIOL_CROSS_TENANT, t->vni, nodes, both,
				    "node %s: %s member %d of tenant %s is attached to VNI %u of "
				    "tenant %s",
				    node, m->allocation, m->member, holder_name, t->vni,
				    owner_name);
			}
			if (owner)
				continue;
			/* a VNI nobody holds: one tenant on it is drift, two are a path */
			int k = 0;
			while (k < *n_un && (*un)[k].vni != t->vni)
				k++;
			if (k == *n_un) {
				if (*n_un == *cap_un) {
					int cap = *cap_un ? 2 * *cap_un : 8;
					struct unowned *v = realloc(*un, (size_t)cap * sizeof(*v));
					if (!v) {
						f->oom = true;
						return;
					}
					*un = v;
					*cap_un = cap;
				}
				(*un)[(*n_un)++] = (struct unowned){t->vni, holder, ni};
			} else if ((*un)[k].tenant_id != holder && (*un)[k].tenant_id != 0) {
				char first[ISO_NAME_MAX] = "";
				iso_controller_tenant_name(c, (*un)[k].tenant_id, first,
				                           sizeof(first));
				const char *both[2] = {first, holder_name};
				const char *where[2] = {c->inv->nodes[(*un)[k].ni].name, node};
				CTL_FINDING(
				    f, ISO_VIOL_SHARED_VNI, t->vni, where, both,
				    "VNI %u carries members of tenants %s (node %s) and %s (node "
				    "%s)",
				    t->vni, first, where[0], holder_name, node);
				(*un)[k].tenant_id = 0; /* reported once */
			}
		}
	}
}

/* One node's guard: the (peer, vni) pairs it lets in. */
static void judge_allowed(struct iso_controller *c, struct ctl_findings *f, int ni,
                          const struct iso_agent_overlay *ov, const struct ip_ref *ips, int n_ips)
{
	const char *node = c->inv->nodes[ni].name;

	for (int i = 0; i < ov->n_allowed; i++) {
		const struct iso_agent_overlay_allow *a = &ov->allowed[i];
		int64_t owner = ctl_vni_owner(c, a->vni);
		int peer = node_of_ip(ips, n_ips, a->peer);
		char owner_name[ISO_NAME_MAX] = "";
		const char *tenants[2] = {NULL, NULL};
		const char *nodes[2] = {node, peer >= 0 ? c->inv->nodes[peer].name : NULL};

		if (owner) {
			iso_controller_tenant_name(c, owner, owner_name, sizeof(owner_name));
			tenants[0] = owner_name;
		}
		if (!owner)
			CTL_FINDING(f, ISO_VIOL_STRAY_PEER, a->vni, nodes, NULL,
			            "node %s lets VNI %u in from %s, a VNI no tenant holds", node,
			            a->vni, a->peer);
		else if (peer < 0)
			CTL_FINDING(
			    f, ISO_VIOL_STRAY_PEER, a->vni, nodes, tenants,
			    "node %s lets VNI %u (tenant %s) in from %s, which is no node's "
			    "underlay_ip",
			    node, a->vni, owner_name, a->peer);
		else if (peer == ni)
			CTL_FINDING(f, ISO_VIOL_STRAY_PEER, a->vni, nodes, tenants,
			            "node %s lets VNI %u (tenant %s) in from its own address %s",
			            node, a->vni, owner_name, a->peer);
		else if (!ctl_agents_tenant_on_node(c, owner, peer))
			CTL_FINDING(
			    f, ISO_VIOL_STRAY_PEER, a->vni, nodes, tenants,
			    "node %s lets VNI %u in from %s (node %s), which holds no member of "
			    "tenant "
			    "%s",
			    node, a->vni, a->peer, nodes[1], owner_name);
		else if (!ctl_agents_tenant_on_node(c, owner, ni))
			CTL_FINDING(
			    f, ISO_VIOL_STRAY_PEER, a->vni, nodes, tenants,
			    "node %s lets VNI %u in from %s but holds no member of tenant %s", node,
			    a->vni, a->peer, owner_name);
	}
}

/* One node's RoCE VFs: each assigned VF as its agent read it back. */
static void judge_vfs(struct iso_controller *c, struct ctl_findings *f, int ni,
                      const struct ctl_overlay_view *view)
{
	const char *node = c->inv->nodes[ni].name;
	const char *nodes[2] = {node, NULL};

	for (int w = 0; w < view->n_want_vf; w++) {
		const struct ctl_node_vf *want = &view->want_vf[w];
		const struct iso_agent_vf *got = NULL;
		char name[ISO_NAME_MAX] = "", other[ISO_NAME_MAX] = "";
		const char *tenants[2] = {name, NULL};
		int64_t owner;

		if (!want->vlan)
			continue;
		for (int i = 0; i < view->n_vf && !got; i++)
			if (view->vf[i].index == want->vf)
				got = &view->vf[i];
		iso_controller_tenant_name(c, want->tenant_id, name, sizeof(name));
		if (!got || !got->has_vlan) {
			CTL_FINDING(
			    f, ISO_VIOL_MISSING, 0, nodes, tenants,
			    "node %s: VF %d of tenant %s (VLAN %u) is not reported with its "
			    "VLAN",
			    node, want->vf, name, want->vlan);
			continue;
		}
		if (!got->spoofchk)
			CTL_FINDING(f, ISO_VIOL_NO_GUARD, 0, nodes, tenants,
			            "node %s: VF %d of tenant %s has its spoof check off", node,
			            want->vf, name);
		if (got->vlan == want->vlan)
			continue;
		owner = got->vlan ? ctl_fabric_vlan_owner(c, got->vlan) : 0;
		if (owner) {
			iso_controller_tenant_name(c, owner, other, sizeof(other));
			const char *both[2] = {name, other};
			CTL_FINDING(
			    f, ISO_VIOL_CROSS_TENANT, 0, nodes, both,
			    "node %s: VF %d of tenant %s is on VLAN %u of tenant %s, not its own "
			    "VLAN %u",
			    node, want->vf, name, got->vlan, other, want->vlan);
		} else if (got->vlan == 0) {
			CTL_FINDING(
			    f, ISO_VIOL_NO_GUARD, 0, nodes, tenants,
			    "node %s: VF %d of tenant %s has no VLAN (untagged), not its VLAN %u",
			    node, want->vf, name, want->vlan);
		} else {
			CTL_FINDING(
			    f, ISO_VIOL_EXTRA, 0, nodes, tenants,
			    "node %s: VF %d of tenant %s is on VLAN %u, which no tenant holds, "
			    "not its VLAN %u",
			    node, want->vf, name, got->vlan, want->vlan);
		}
	}
}

int ctl_overlay_verify(struct iso_controller *c, struct iso_fabric_report *out,
                       struct iso_error *err)
{
	const struct iso_inventory *inv = c->inv;
	int64_t t0 = iso_now_ms();
	struct ctl_findings f = {.rep = out};
	_cleanup_free_ struct ip_ref *ips = calloc((size_t)inv->n_nodes + 1, sizeof(*ips));
	_cleanup_free_ struct unowned *un = NULL;
	int n_ips = 0, n_un = 0, cap_un = 0;

	memset(out, 0, sizeof(*out));
	if (!ips)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < inv->n_nodes; i++)
		if (inv->nodes[i].underlay_ip[0] &&
		    iso_parse_ipv4(inv->nodes[i].underlay_ip, &ips[n_ips].addr) == 0)
			ips[n_ips++].ni = i;
	qsort(ips, (size_t)n_ips, sizeof(*ips), ip_cmp);
	for (int ni = 0; ni < inv->n_nodes && !f.oom; ni++) {
		const char *node = inv->nodes[ni].name;
		const char *nodes[2] = {node, NULL};
		struct ctl_overlay_view view;
		bool holds = false;

		ctl_agents_overlay_view(c, ni, &view);
		for (int i = 0; view.overlay && i < view.overlay->n_tenants; i++)
			holds = holds || view.overlay->tenants[i].n_members > 0;
		if (!view.seen) {
			if (view.n_members > 0)
				CTL_FINDING(
				    &f, ISO_VIOL_UNREACHABLE, 0, nodes, NULL,
				    "node %s holds %d member(s) but its agent has not reported its "
				    "overlay",
				    node, view.n_members);
			continue;
		}
		out->ports_checked++;
		if ((holds || view.n_members > 0) && (!view.overlay || !view.overlay->guard))
			CTL_FINDING(&f, ISO_VIOL_NO_GUARD, 0, nodes, NULL,
			            "node %s holds overlay members but %s", node,
			            view.overlay ? "its VXLAN guard is off"
			                         : "reports no overlay (no guard)");
		if (view.overlay) {
			judge_tenants(c, &f, ni, &view, &un, &n_un, &cap_un);
			judge_allowed(c, &f, ni, view.overlay, ips, n_ips);
		}
		judge_vfs(c, &f, ni, &view);
		/* drift: a live member its agent should have attached */
		for (int i = 0; view.sandbox_real && i < view.n_members; i++) {
			const char *alloc;
			int k;
			int64_t tenant;
			char name[ISO_NAME_MAX] = "";
			const char *tenants[2] = {name, NULL};

			ctl_agents_node_member(c, ni, i, &alloc, &k, &tenant);
			if (attached(view.overlay, alloc, k))
				continue;
			iso_controller_tenant_name(c, tenant, name, sizeof(name));
			CTL_FINDING(&f, ISO_VIOL_MISSING, ctl_vni_of(c, tenant), nodes, tenants,
			            "node %s: %s member %d of tenant %s is on no overlay", node,
			            alloc, k, name);
		}
	}
	return ctl_findings_end(c, &f, t0, err);
}

struct iso_violation *ctl_finding_new(struct ctl_findings *f, enum iso_violation_kind kind,
                                      uint32_t vni, const char *const nodes[2],
                                      const char *const tenants[2])
{
	struct iso_fabric_report *r = f->rep;
	struct iso_violation *v;

	if (r->n_violations == f->cap) {
		int cap = f->cap ? 2 * f->cap : 16;
		struct iso_violation *nv = realloc(r->violations, (size_t)cap * sizeof(*nv));
		if (!nv) {
			f->oom = true;
			return NULL;
		}
		r->violations = nv;
		f->cap = cap;
	}
	v = &r->violations[r->n_violations++];
	memset(v, 0, sizeof(*v));
	v->kind = kind;
	v->vni = vni;
	for (int k = 0; k < 2; k++) {
		if (nodes && nodes[k]) {
			iso_strlcpy(v->nodes[k], nodes[k], sizeof(v->nodes[k]));
			v->n_nodes = k + 1;
		}
		if (tenants && tenants[k])
			iso_strlcpy(v->tenants[k], tenants[k], sizeof(v->tenants[k]));
	}
	return v;
}

int ctl_findings_end(struct iso_controller *c, struct ctl_findings *f, int64_t t0,
                     struct iso_error *err)
{
	struct iso_fabric_report *out = f->rep;

	if (f->oom) {
		iso_fabric_report_clear(out);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	out->partitions_checked = ctl_vni_count(c);
	out->ok = true;
	for (int i = 0; i < out->n_violations; i++)
		if (out->violations[i].kind != ISO_VIOL_NEAR_CAPACITY)
			out->ok = false;
	out->elapsed_ms = iso_now_ms() - t0;
	return 0;
}

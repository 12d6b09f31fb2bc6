/* cxi.c: the verifier's Slingshot mode (issue 17, docs/fabric.md
 * "Slingshot"). On Slingshot the NIC of each node is the guard: a process
 * may use a VNI only through a CXI service that lists the VNI and admits the
 * process's uid or gid. So the proof reads what each node's agent read back
 * from its NIC (the status report's "cxi", cxil_get_svc_list), never what
 * the agent was asked, and judges it against the controller's truth: which
 * tenant holds which VNI (vni.c) and which member lives on which node
 * (agents.c). No cross-tenant path exists when, on every node,
 *   - no service lists VNIs of two tenants (else cross_tenant);
 *   - no uid or gid is admitted to VNIs of two tenants by two services: one
 *     process would reach both (else shared_vni);
 *   - every enabled service restricts both its members and its VNIs; the
 *     NIC's default service (id 1) is disabled or restricted (else
 *     no_guard);
 *   - every service lists only VNIs that a tenant holds and that tenant has
 *     a live member on the node (else extra);
 *   - every tenant with a live member on the node has a service for its VNI
 *     there (else missing: its members cannot use the fabric; until the
 *     attachment path gives a member's uid and gid, it reads as missing);
 * and a node with live members whose agent never reported its services
 * cannot be judged (unreachable). System services (is_system_svc) are the
 * operator's and left out.
 *
 * It runs on the daemon's loop: memory only, each node's report once; the
 * identity check sorts each node's (id, tenant) pairs, so a node's cost is
 * O(s log s) in its services, never O(cluster) per service. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

struct ident {
	uint64_t key; /* type << 32 | id */
	int64_t tenant;
	uint32_t vni, svc_id;
};

static int ident_cmp(const void *x, const void *y)
{
	const struct ident *a = x, *b = y;

	if (a->key != b->key)
		return (a->key > b->key) - (a->key < b->key);
	return (a->tenant > b->tenant) - (a->tenant < b->tenant);
}

static int i64_cmp(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
}

static void judge_node(struct iso_controller *c, struct ctl_findings *f, int ni,
                       const struct ctl_overlay_view *view)
{
	const struct iso_agent_cxi_report *cx = view->cxi;
	const char *node = c->inv->nodes[ni].name;
	const char *nodes[2] = {node, NULL};
	char name[ISO_NAME_MAX], other[ISO_NAME_MAX];
	const char *one[2] = {name, NULL}, *both[2] = {name, other};
	_cleanup_free_ struct ident *ids =
	    calloc((size_t)cx->n_services * ISO_CXI_MAX_MEMBERS + 1, sizeof(*ids));
	int n_ids = 0;

	if (!ids) {
		f->oom = true;
		return;
	}
	/* the tenants with live members here, sorted (with repeats) */
	_cleanup_free_ int64_t *ts = calloc((size_t)view->n_members + 1, sizeof(*ts));
	int n_ts = 0;

	if (!ts) {
		f->oom = true;
		return;
	}
	for (int i = 0; i < view->n_members; i++) {
		const char *alloc;
		int k;

		ctl_agents_node_member(c, ni, i, &alloc, &k, &ts[n_ts++]);
	}
	if (n_ts > 0)
		qsort(ts, (size_t)n_ts, sizeof(*ts), i64_cmp);
	for (int s = 0; s < cx->n_services; s++) {
		const struct iso_cxi_service *sv = &cx->services[s];
		int64_t owner = 0;

		if (sv->system || !sv->enabled)
			continue;
		if (!sv->restricted_members || !sv->restricted_vnis) {
			CTL_FINDING(f, ISO_VIOL_NO_GUARD, sv->n_vnis ? sv->vnis[0] : 0, nodes, NULL,
			            "node %s: CXI service %u%s admits %s to %s", node, sv->svc_id,
			            sv->svc_id == 1 ? " (the NIC's default service)" : "",
			            sv->restricted_members ? "its members" : "every process",
			            sv->restricted_vnis ? "its VNIs" : "every VNI");
		}
		for (int k = 0; k < sv->n_vnis; k++) {
			int64_t t = ctl_vni_owner(c, sv->vnis[k]);

			if (!t) {
				if (sv->svc_id != 1 || !sv->restricted_vnis)
					CTL_FINDING(
					    f, ISO_VIOL_EXTRA, sv->vnis[k], nodes, NULL,
					    "node %s: CXI service %u lists VNI %u, which no "
					    "tenant holds",
					    node, sv->svc_id, sv->vnis[k]);
				continue;
			}
			iso_controller_tenant_name(c, t, name, sizeof(name));
			if (owner && owner != t) {
				iso_controller_tenant_name(c, owner, other, sizeof(other));
				CTL_FINDING(
				    f, ISO_VIOL_CROSS_TENANT, sv->vnis[k], nodes, both,
				    "node %s: CXI service %u lists VNIs of tenants %s and %s", node,
				    sv->svc_id, name, other);
				continue;
			}
			owner = t;
			if (n_ts == 0 || !bsearch(&t, ts, (size_t)n_ts, sizeof(*ts), i64_cmp))
				CTL_FINDING(
				    f, ISO_VIOL_EXTRA, sv->vnis[k], nodes, one,
				    "node %s: CXI service %u lists VNI %u of tenant %s, which "
				    "has no live member on the node",
				    node, sv->svc_id, sv->vnis[k], name);
		}
		/* one identity per tenant: remember who this service admits */
		for (int m = 0; owner && sv->restricted_members && m < sv->n_members; m++)
			ids[n_ids++] =
			    (struct ident){(uint64_t)sv->members[m].type << 32 | sv->members[m].id,
			                   owner, sv->vnis[0], sv->svc_id};
	}
	if (n_ids > 0)
		qsort(ids, (size_t)n_ids, sizeof(*ids), ident_cmp);
	for (int i = 1; i < n_ids; i++) {
		if (ids[i].key != ids[i - 1].key || ids[i].tenant == ids[i - 1].tenant)
			continue;
		iso_controller_tenant_name(c, ids[i - 1].tenant, name, sizeof(name));
		iso_controller_tenant_name(c, ids[i].tenant, other, sizeof(other));
		CTL_FINDING(f, ISO_VIOL_SHARED_VNI, ids[i].vni, nodes, both,
		            "node %s: %s %u is admitted to VNI %u of tenant %s (service %u) and to "
		            "VNI %u of tenant %s (service %u): its processes reach both",
		            node, ids[i].key >> 32 == ISO_CXI_MEMBER_UID ? "uid" : "gid",
		            (unsigned)(uint32_t)ids[i].key, ids[i - 1].vni, name, ids[i - 1].svc_id,
		            ids[i].vni, other, ids[i].svc_id);
	}
	/* every tenant here has its service */
	for (int i = 0; i < n_ts; i++) {
		uint32_t vni;
		bool has = false;

		if ((i > 0 && ts[i] == ts[i - 1]) || !(vni = ctl_vni_of(c, ts[i])))
			continue;
		for (int s = 0; s < cx->n_services && !has; s++) {
			const struct iso_cxi_service *sv = &cx->services[s];
			for (int v = 0; sv->enabled && !sv->system && v < sv->n_vnis && !has; v++)
				has = sv->vnis[v] == vni;
		}
		if (has)
			continue;
		iso_controller_tenant_name(c, ts[i], name, sizeof(name));
		CTL_FINDING(f, ISO_VIOL_MISSING, vni, nodes, one,
		            "node %s: tenant %s has live members but no CXI service for its VNI %u",
		            node, name, vni);
	}
}

int ctl_cxi_verify(struct iso_controller *c, struct iso_fabric_report *out, struct iso_error *err)
{
	const struct iso_inventory *inv = c->inv;
	int64_t t0 = iso_now_ms();
	struct ctl_findings f = {.rep = out};

	memset(out, 0, sizeof(*out));
	for (int ni = 0; ni < inv->n_nodes && !f.oom; ni++) {
		const char *nodes[2] = {inv->nodes[ni].name, NULL};
		struct ctl_overlay_view view;

		ctl_agents_overlay_view(c, ni, &view);
		if (!view.cxi) {
			if (view.n_members > 0)
				CTL_FINDING(&f, ISO_VIOL_UNREACHABLE, 0, nodes, NULL,
				            "node %s holds %d member(s) but its agent has not "
				            "reported its CXI services",
				            inv->nodes[ni].name, view.n_members);
			continue;
		}
		out->ports_checked++;
		judge_node(c, &f, ni, &view);
	}
	return ctl_findings_end(c, &f, t0, err);
}

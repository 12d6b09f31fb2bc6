/* exclusive.c: isolation classes (exclusive GPU, node, rack) and spreading
 * across fault domains, as hard rules of the placement search rather than
 * a filter after it (docs/tenancy.md). take/give keep the tenants present
 * on every GPU and rack and the exclusive marks of the allocations taken
 * with an isolation class; every check is O(1) (a mark, or "is anyone but
 * this tenant here"), so the engine's cost per decision is unchanged. */
#include <errno.h>
#include <string.h>

#include "sched/index.h"

int ix_excl_member_take(struct iso_cluster_state *cs, int ni, int64_t tenant, int level)
{
	struct iso_sched_index *ix = cs->index;
	struct ix_node *x = &ix->nodes[ni];
	struct ix_tset *r = &ix->rack_ten[x->rack];

	if (ix_tset_add(r, tenant) < 0)
		return -ENOMEM;
	if (level >= 2) {
		x->ten.excl = true;
		x->ten.excl_owner = tenant;
	}
	if (level >= 3) {
		r->excl = true;
		r->excl_owner = tenant;
	}
	return 0;
}

void ix_excl_member_give(struct iso_cluster_state *cs, int ni, int64_t tenant)
{
	struct iso_sched_index *ix = cs->index;
	struct ix_node *x = &ix->nodes[ni];

	/* The node's own mark went with the tenant's last member there
	 * (ix_tenant_remove, called first). */
	ix_tset_remove(&ix->rack_ten[x->rack], tenant);
}

int ix_excl_slot_take(struct iso_cluster_state *cs, int ni, int pos, int64_t tenant, int level)
{
	struct ix_gpu *g = &cs->index->gpus[cs->index->nodes[ni].gpu_base + pos];

	if (ix_tset_add(&g->ten, tenant) < 0)
		return -ENOMEM;
	if (level >= 1) {
		g->ten.excl = true;
		g->ten.excl_owner = tenant;
	}
	return 0;
}

void ix_excl_slot_give(struct iso_cluster_state *cs, int ni, int pos, int64_t tenant)
{
	ix_tset_remove(&cs->index->gpus[cs->index->nodes[ni].gpu_base + pos].ten, tenant);
}

bool ix_excl_node_allows(const struct iso_sched_index *ix, int ni, int64_t tenant, int level)
{
	const struct ix_node *x = &ix->nodes[ni];
	const struct ix_tset *r = &ix->rack_ten[x->rack];

	if ((x->ten.excl && x->ten.excl_owner != tenant) || (r->excl && r->excl_owner != tenant))
		return false;
	if (level >= 2 && ix_tset_others(&x->ten, tenant))
		return false;
	return level < 3 || !ix_tset_others(r, tenant);
}

bool ix_excl_gpu_allows(const struct iso_sched_index *ix, int gid, int64_t tenant, int level)
{
	const struct ix_tset *g = &ix->gpus[gid].ten;

	if (g->excl && g->excl_owner != tenant)
		return false;
	return level < 1 || !ix_tset_others(g, tenant);
}

/* ---- the request being placed ---- */

void ix_request_member_placed(struct iso_cluster_state *cs, const struct iso_allocation *a, int k)
{
	struct iso_sched_index *ix = cs->index;
	int ni;

	if (!ix || !ix->req_active || ix->req_spread == 0)
		return;
	ni = iso_cluster_state_node_index(cs, a->placed[k].node);
	if (ni < 0)
		return;
	ix->nodes[ni].spread = ix->spread_gen;
	ix->rack_spread[ix->nodes[ni].rack] = ix->spread_gen;
	for (int si = 0; si < a->n_slots; si++) {
		const struct iso_node *node = &cs->inv->nodes[ni];
		if (a->slots[si].member != k)
			continue;
		for (int j = 0; j < node->n_gpus; j++)
			if (node->gpus[j].index == a->slots[si].gpu)
				ix->gpus[ix->nodes[ni].gpu_base + j].spread = ix->spread_gen;
	}
}

void ix_request_begin(struct iso_cluster_state *cs, const struct iso_allocation *a)
{
	struct iso_sched_index *ix = cs->index;
	const struct iso_place_constraints *c = cs->constraints;

	if (!ix)
		return;
	ix->req_active = true;
	ix->req_tenant = a->tenant_id;
	ix->req_excl = c ? c->exclusive : 0;
	ix->req_spread = c ? c->spread : 0;
	if (ix->req_spread == 0)
		return;
	if (++ix->spread_gen == 0) { /* wrapped: clear every stale stamp */
		for (int i = 0; i < ix->n_nodes; i++)
			ix->nodes[i].spread = 0;
		for (int i = 0; i < ix->n_gpus; i++)
			ix->gpus[i].spread = 0;
		for (int i = 0; i < ix->n_racks; i++)
			ix->rack_spread[i] = 0;
		ix->spread_gen = 1;
	}
	/* Members placed before (a resize) count too. */
	for (int k = 0; k < a->n_members; k++)
		ix_request_member_placed(cs, a, k);
}

void ix_request_end(struct iso_cluster_state *cs)
{
	if (cs->index)
		cs->index->req_active = false;
}

bool ix_request_node_ok(const struct iso_sched_index *ix, int ni)
{
	const struct ix_node *x;

	if (!ix->req_active)
		return true;
	x = &ix->nodes[ni];
	if (!ix_excl_node_allows(ix, ni, ix->req_tenant, ix->req_excl))
		return false;
	if (ix->req_spread >= 2 && x->spread == ix->spread_gen)
		return false;
	return ix->req_spread < 3 || ix->rack_spread[x->rack] != ix->spread_gen;
}

bool ix_request_gpu_ok(const struct iso_sched_index *ix, int gid)
{
	if (!ix->req_active)
		return true;
	if (!ix_excl_gpu_allows(ix, gid, ix->req_tenant, ix->req_excl))
		return false;
	return ix->req_spread < 1 || ix->gpus[gid].spread != ix->spread_gen;
}

void ix_excl_free(struct iso_sched_index *ix)
{
	for (int i = 0; ix->gpus && i < ix->n_gpus; i++)
		free(ix->gpus[i].ten.t);
	for (int i = 0; ix->rack_ten && i < ix->n_racks; i++)
		free(ix->rack_ten[i].t);
	free(ix->rack_ten);
	free(ix->rack_spread);
}

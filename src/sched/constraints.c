/* constraints.c: the per-request placement constraints hook (allowed and
 * forbidden nodes, racks and GPUs). A request's lists are resolved once,
 * into generation stamps on the nodes, racks and GPUs of the index, so that
 * every later check is O(1) and nothing is cleared between requests. Every
 * policy asks iso_place_node_allowed() / iso_place_gpu_allowed(). */
#include <errno.h>
#include <stdio.h>

#include "sched/index.h"

bool ix_constraints_active(const struct iso_cluster_state *cs)
{
	const struct iso_place_constraints *c = cs->constraints;

	return c && cs->index && cs->index->c_for == c &&
	       (c->n_nodes > 0 || c->n_avoid_nodes > 0 || c->n_racks > 0 || c->n_avoid_racks > 0 ||
	        c->n_gpus > 0 || c->n_avoid_gpus > 0 || c->n_member_nodes > 0);
}

static int bad_name(struct iso_error *err, const char *list, int i, const char *what,
                    const char *name)
{
	char field[ISO_ERR_FIELD_MAX];

	snprintf(field, sizeof(field), "constraints.%s[%d]", list, i);
	return iso_error_set(err, ISO_E_INVALID, field, "unknown %s '%s'", what,
	                     name ? name : "(null)");
}

/* The global id of a referenced GPU, or a negative errno naming it. */
static int gpu_ref(const struct iso_cluster_state *cs, const struct iso_gpu_ref *ref,
                   const char *list, int i, struct iso_error *err)
{
	const struct iso_sched_index *ix = cs->index;
	char field[ISO_ERR_FIELD_MAX];
	int ni = ix_strmap_find(&ix->node_names, ref->node);

	if (ni < 0) {
		snprintf(field, sizeof(field), "constraints.%s[%d].node", list, i);
		return iso_error_set(err, ISO_E_INVALID, field, "unknown node '%s'",
		                     ref->node ? ref->node : "(null)");
	}
	for (int j = 0; j < cs->inv->nodes[ni].n_gpus; j++)
		if (cs->inv->nodes[ni].gpus[j].index == ref->gpu)
			return ix->nodes[ni].gpu_base + j;
	snprintf(field, sizeof(field), "constraints.%s[%d].gpu", list, i);
	return iso_error_set(err, ISO_E_INVALID, field, "node %s has no GPU %d", ref->node,
	                     ref->gpu);
}

int ix_constraints_resolve(struct iso_cluster_state *cs, struct iso_error *err)
{
	const struct iso_place_constraints *c = cs->constraints;
	struct iso_sched_index *ix = cs->index;
	uint32_t gen;

	if (!ix)
		return 0;
	ix->c_for = NULL;
	if (!c)
		return 0;
	if (c->n_nodes < 0 || c->n_avoid_nodes < 0 || c->n_racks < 0 || c->n_avoid_racks < 0 ||
	    c->n_gpus < 0 || c->n_avoid_gpus < 0 || (c->n_nodes && !c->nodes) ||
	    (c->n_avoid_nodes && !c->avoid_nodes) || (c->n_racks && !c->racks) ||
	    (c->n_avoid_racks && !c->avoid_racks) || (c->n_gpus && !c->gpus) ||
	    (c->n_avoid_gpus && !c->avoid_gpus) || c->n_member_nodes < 0 ||
	    (c->n_member_nodes && !c->member_nodes) || c->exclusive < 0 || c->exclusive > 3 ||
	    c->spread < 0 || c->spread > 3)
		return iso_error_set(err, ISO_E_INVALID, "constraints", "malformed constraints");
	gen = ++ix->c_gen;
	if (gen == 0) { /* wrapped: no stale stamp may equal a new generation */
		for (int i = 0; i < ix->n_nodes; i++)
			ix->nodes[i].c_allow = ix->nodes[i].c_avoid = ix->nodes[i].c_hasgpu = 0;
		for (int i = 0; i < ix->n_gpus; i++)
			ix->gpus[i].c_allow = ix->gpus[i].c_avoid = 0;
		for (int i = 0; i < ix->n_racks; i++)
			ix->rack_allow[i] = ix->rack_avoid[i] = 0;
		gen = ix->c_gen = 1;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		int ni = ix_strmap_find(&ix->node_names, c->nodes[i]);
		if (ni < 0)
			return bad_name(err, "nodes", i, "node", c->nodes[i]);
		ix->nodes[ni].c_allow = gen;
	}
	for (int i = 0; i < c->n_avoid_nodes; i++) {
		int ni = ix_strmap_find(&ix->node_names, c->avoid_nodes[i]);
		if (ni < 0)
			return bad_name(err, "avoid_nodes", i, "node", c->avoid_nodes[i]);
		ix->nodes[ni].c_avoid = gen;
	}
	for (int i = 0; i < c->n_racks; i++) {
		int r = ix_strmap_find(&ix->racks, c->racks[i]);
		if (r < 0)
			return bad_name(err, "racks", i, "rack", c->racks[i]);
		ix->rack_allow[r] = gen;
	}
	for (int i = 0; i < c->n_avoid_racks; i++) {
		int r = ix_strmap_find(&ix->racks, c->avoid_racks[i]);
		if (r < 0)
			return bad_name(err, "avoid_racks", i, "rack", c->avoid_racks[i]);
		ix->rack_avoid[r] = gen;
	}
	for (int i = 0; i < c->n_gpus; i++) {
		int g = gpu_ref(cs, &c->gpus[i], "gpus", i, err);
		if (g < 0)
			return g;
		ix->gpus[g].c_allow = gen;
		ix->nodes[ix->gpus[g].node].c_hasgpu = gen;
	}
	for (int i = 0; i < c->n_avoid_gpus; i++) {
		int g = gpu_ref(cs, &c->avoid_gpus[i], "avoid_gpus", i, err);
		if (g < 0)
			return g;
		ix->gpus[g].c_avoid = gen;
	}
	for (int i = 0; i < c->n_member_nodes; i++)
		if (ix_strmap_find(&ix->node_names, c->member_nodes[i]) < 0)
			return bad_name(err, "member_nodes", i, "node", c->member_nodes[i]);
	ix->c_for = c;
	return 0;
}

void ix_constraints_pin(struct iso_cluster_state *cs, int k)
{
	const struct iso_place_constraints *c = cs->constraints;
	struct iso_sched_index *ix = cs->index;

	if (!ix)
		return;
	ix->c_pin = -1;
	if (k >= 0 && c && ix->c_for == c && k < c->n_member_nodes)
		ix->c_pin = ix_strmap_find(&ix->node_names, c->member_nodes[k]);
}

int iso_sched_member_pin(const struct iso_cluster_state *cs)
{
	return cs->index ? cs->index->c_pin : -1;
}

/* Resolves constraints set on cs outside iso_placer_place_ex() (best effort:
 * a list that does not resolve allows nothing). */
static bool resolved(const struct iso_cluster_state *cs)
{
	struct iso_cluster_state *mut = (struct iso_cluster_state *)cs;

	if (!cs->constraints || !cs->index)
		return false;
	if (cs->index->c_for != cs->constraints && ix_constraints_resolve(mut, NULL) < 0)
		return false;
	return true;
}

bool iso_place_node_allowed(const struct iso_cluster_state *cs, int node)
{
	const struct iso_place_constraints *c = cs->constraints;
	const struct iso_sched_index *ix = cs->index;
	const struct ix_node *x;
	uint32_t gen;

	if (ix && !ix_request_node_ok(ix, node))
		return false;
	if (ix && ix->c_pin >= 0 && node != ix->c_pin)
		return false;
	if (!c)
		return true;
	if (!resolved(cs))
		return false;
	gen = ix->c_gen;
	x = &ix->nodes[node];
	if (c->n_nodes > 0 && x->c_allow != gen)
		return false;
	if (x->c_avoid == gen)
		return false;
	if (c->n_racks > 0 && ix->rack_allow[x->rack] != gen)
		return false;
	if (ix->rack_avoid[x->rack] == gen)
		return false;
	if (c->n_gpus > 0 && x->c_hasgpu != gen)
		return false;
	return true;
}

bool iso_place_gpu_allowed(const struct iso_cluster_state *cs, int node, int pos)
{
	const struct iso_place_constraints *c = cs->constraints;
	const struct ix_gpu *x;

	if (cs->index && !ix_request_gpu_ok(cs->index, cs->index->nodes[node].gpu_base + pos))
		return false;
	if (!c)
		return true;
	if (!iso_place_node_allowed(cs, node))
		return false;
	x = &cs->index->gpus[cs->index->nodes[node].gpu_base + pos];
	if (c->n_gpus > 0 && x->c_allow != cs->index->c_gen)
		return false;
	return x->c_avoid != cs->index->c_gen;
}

bool iso_place_fabric_allows(const struct iso_cluster_state *cs, int node, int64_t tenant)
{
	return !cs->index || ix_fabric_allows(cs->index, node, tenant);
}

int iso_placer_place_ex(const struct iso_placer *p, struct iso_cluster_state *cs,
                        struct iso_allocation *a, int want, const struct iso_place_constraints *c,
                        struct iso_error *err)
{
	const struct iso_place_constraints *saved = cs->constraints;
	int r;

	cs->constraints = c;
	r = ix_constraints_resolve(cs, err);
	if (r == 0)
		r = p->place(p, cs, a, want, err);
	cs->constraints = saved;
	if (cs->index) {
		cs->index->c_for = NULL;
		cs->index->c_pin = -1;
	}
	return r;
}

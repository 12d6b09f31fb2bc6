/* demand.c: what an allocation is charged, at admission and in fair share.
 * The rule (docs/tenancy.md, "What an allocation is charged"): an allocation
 * is charged what it denies to others, not only what it asked for. Shared
 * work costs its shape; an exclusive GPU costs the whole GPU; an exclusive
 * node costs the node with all its cores, memory and GPUs; an exclusive rack
 * costs every node of the rack. Once placed, the charge is read off the
 * placement (the distinct GPUs, nodes and racks it marks); while pending it is
 * the least any placement could cost, so that a hard limit never refuses what
 * could run, and the charge is checked again on the real placement before it
 * is committed. One function computes it, so admission, charging, release,
 * the usage log, the queue and preemption always agree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

/* The inventory's racks and nodes as units of exclusivity: built once. */
struct ctl_costs {
	int n_racks;
	struct iso_resvec *rack;  /* the whole rack: nodes, cores, memory, GPUs */
	int *node_rack;           /* node index -> rack index */
	struct iso_resvec least_node, least_rack; /* the cheapest unit of each kind */
};

static void node_vec(const struct iso_node *n, struct iso_resvec *v)
{
	memset(v, 0, sizeof(*v));
	v->v[ISO_RES_NODES] = 1;
	v->v[ISO_RES_CPUS] = n->cpus;
	v->v[ISO_RES_MEMORY] = n->memory_mib;
	v->v[ISO_RES_GPUS] = n->n_gpus;
}

static void vec_add(struct iso_resvec *a, const struct iso_resvec *b)
{
	for (int k = 0; k < ISO_RES_MAX; k++)
		a->v[k] += b->v[k];
}

/* The smaller of two units, by nodes, then GPUs, then cores, then memory. */
static bool vec_less(const struct iso_resvec *a, const struct iso_resvec *b)
{
	static const int order[] = {ISO_RES_NODES, ISO_RES_GPUS, ISO_RES_CPUS, ISO_RES_MEMORY};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(order); i++)
		if (a->v[order[i]] != b->v[order[i]])
			return a->v[order[i]] < b->v[order[i]];
	return false;
}

void ctl_costs_free(struct iso_controller *c)
{
	if (!c->costs)
		return;
	free(c->costs->rack);
	free(c->costs->node_rack);
	free(c->costs);
	c->costs = NULL;
}

int ctl_costs_open(struct iso_controller *c, struct iso_error *err)
{
	const struct iso_inventory *inv = c->inv;
	struct ctl_costs *k = calloc(1, sizeof(*k));

	if (!k)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->costs = k;
	k->rack = calloc((size_t)inv->n_nodes + 1, sizeof(*k->rack));
	k->node_rack = calloc((size_t)inv->n_nodes + 1, sizeof(*k->node_rack));
	if (!k->rack || !k->node_rack)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	/* Racks by name, in order of first appearance; a node without a rack
	 * is a rack of its own (nothing else shares its fault domain). */
	for (int n = 0; n < inv->n_nodes; n++) {
		const struct iso_node *node = &inv->nodes[n];
		struct iso_resvec v;
		int r = -1;

		for (int m = 0; node->rack[0] && m < n && r < 0; m++)
			if (strcmp(inv->nodes[m].rack, node->rack) == 0)
				r = k->node_rack[m];
		if (r < 0)
			r = k->n_racks++;
		k->node_rack[n] = r;
		node_vec(node, &v);
		vec_add(&k->rack[r], &v);
		if (n == 0 || vec_less(&v, &k->least_node))
			k->least_node = v;
	}
	for (int r = 0; r < k->n_racks; r++)
		if (r == 0 || vec_less(&k->rack[r], &k->least_rack))
			k->least_rack = k->rack[r];
	return 0;
}

/* The model of a MIG request's compute slices: the request's, or the first
 * MIG-enabled model of the inventory that has the profile. */
static const struct iso_gpu_model *shape_model(const struct iso_controller *c,
                                               const struct iso_shape *sh)
{
	for (int n = 0; n < c->inv->n_nodes; n++)
		for (int g = 0; g < c->inv->nodes[n].n_gpus; g++) {
			const struct iso_gpu *gpu = &c->inv->nodes[n].gpus[g];
			if (!gpu->model ||
			    (sh->gpu_model[0] && strcasecmp(sh->gpu_model, gpu->model->name) != 0))
				continue;
			if (sh->whole ||
			    (gpu->mig_enabled && iso_mig_profile_find(gpu->model, sh->profile)))
				return gpu->model;
		}
	return NULL;
}

static int model_kind(const struct iso_tenancy *t, const char *model)
{
	for (int k = ISO_RES_FIRST_MODEL; k < t->n_kinds; k++)
		if (strcasecmp(t->model[k], model) == 0)
			return k;
	return -1;
}

/* What the shape alone asks for, for `members` members. With `gpus_whole`
 * each MIG instance holds its GPU whole: it costs all the model's compute
 * slices (7 on an H100), in the same kind its quota is counted in. */
static void shape_demand(const struct iso_controller *c, const struct iso_shape *sh, int members,
                         bool gpus_whole, struct iso_resvec *out)
{
	memset(out, 0, sizeof(*out));
	out->v[ISO_RES_CPUS] = (int64_t)sh->cpus * members;
	out->v[ISO_RES_MEMORY] = sh->memory_mib * members;
	if (sh->gpu_count <= 0)
		return;
	if (sh->whole) {
		out->v[ISO_RES_GPUS] = (int64_t)sh->gpu_count * members;
		return;
	}
	const struct iso_gpu_model *m = shape_model(c, sh);
	const struct iso_mig_profile *p = m ? iso_mig_profile_find(m, sh->profile) : NULL;
	int k = m ? model_kind(ctl_tenancy_tree(c), m->name) : -1;
	if (p && k >= 0)
		out->v[k] = (int64_t)(gpus_whole ? m->compute_slices : p->compute) * sh->gpu_count *
		            members;
}

/* The model kind of a MIG request, and the slices of one whole GPU of it. */
static int shape_kind(const struct iso_controller *c, const struct iso_shape *sh, int *slices)
{
	const struct iso_gpu_model *m = sh->whole ? NULL : shape_model(c, sh);

	*slices = m ? m->compute_slices : 0;
	return m ? model_kind(ctl_tenancy_tree(c), m->name) : -1;
}

enum iso_isolation ctl_alloc_isolation(const struct iso_allocation *a)
{
	enum iso_isolation iso = ISO_ISOLATION_SHARED;

	if (a->isolation[0] && iso_isolation_parse(a->isolation, &iso) < 0)
		iso = ISO_ISOLATION_SHARED;
	return iso;
}

/* The exclusive units (nodes or racks) of members [0, members) as placed:
 * each distinct one once. */
static void placed_units(const struct iso_controller *c, const struct iso_allocation *a,
                         int members, bool racks, struct iso_resvec *out)
{
	const struct ctl_costs *k = c->costs;
	int seen[64], n_seen = 0;

	memset(out, 0, sizeof(*out));
	for (int m = 0; m < members && m < a->n_members; m++) {
		int ni = iso_cluster_state_node_index(&c->cs, a->placed[m].node);
		int unit;
		bool dup = false;
		struct iso_resvec v;

		if (ni < 0)
			continue;
		unit = racks ? k->node_rack[ni] : ni;
		for (int i = 0; i < n_seen && !dup; i++)
			dup = seen[i] == unit;
		/* Past 64 distinct units a duplicate may be charged twice:
		 * more, never less, than the allocation denies. */
		if (dup)
			continue;
		if (n_seen < (int)ISO_ARRAY_SIZE(seen))
			seen[n_seen++] = unit;
		if (racks) {
			v = k->rack[unit];
		} else {
			node_vec(&c->inv->nodes[ni], &v);
		}
		vec_add(out, &v);
	}
}

static int pair_cmp(const void *x, const void *y)
{
	const int64_t *a = x, *b = y;

	return (*a > *b) - (*a < *b);
}

/* Distinct (node, GPU) pairs of the slots of members [0, members): sorted,
 * so that a large allocation costs n log n, not n squared. */
static int64_t placed_gpus(const struct iso_controller *c, const struct iso_allocation *a,
                           int members)
{
	_cleanup_free_ int64_t *pairs = calloc((size_t)a->n_slots + 1, sizeof(*pairs));
	int64_t n = 0, distinct = 0;

	if (!pairs)
		return (int64_t)a->shape.gpu_count * members; /* what it asked for: never less */
	for (int i = 0; i < a->n_slots; i++) {
		const struct iso_slot *s = &a->slots[i];
		int ni;

		if (s->member >= members || s->member >= a->n_members)
			continue;
		ni = iso_cluster_state_node_index(&c->cs, a->placed[s->member].node);
		pairs[n++] = (int64_t)ni * 65536 + s->gpu;
	}
	qsort(pairs, (size_t)n, sizeof(*pairs), pair_cmp);
	for (int64_t i = 0; i < n; i++)
		distinct += i == 0 || pairs[i] != pairs[i - 1];
	return distinct;
}

void ctl_demand_members(const struct iso_controller *c, const struct iso_allocation *a,
                        int members, struct iso_resvec *out)
{
	enum iso_isolation iso = ctl_alloc_isolation(a);
	bool placed = a->n_members >= members && members > 0;
	const struct ctl_costs *k = c->costs;
	enum iso_spread sp = ISO_SPREAD_NONE;

	if (a->spread[0])
		iso_spread_parse(a->spread, &sp);
	switch (iso) {
	case ISO_ISOLATION_SHARED:
		shape_demand(c, &a->shape, members, false, out);
		return;
	case ISO_ISOLATION_EXCLUSIVE_GPU: {
		int slices, kind;
		shape_demand(c, &a->shape, members, true, out);
		if (!placed || a->shape.gpu_count <= 0)
			return;
		if (a->shape.whole)
			out->v[ISO_RES_GPUS] = placed_gpus(c, a, members);
		else if ((kind = shape_kind(c, &a->shape, &slices)) >= 0)
			out->v[kind] = placed_gpus(c, a, members) * slices;
		return;
	}
	case ISO_ISOLATION_EXCLUSIVE_NODE:
	case ISO_ISOLATION_EXCLUSIVE_RACK:
		break;
	}
	bool racks = iso == ISO_ISOLATION_EXCLUSIVE_RACK;
	if (placed) {
		placed_units(c, a, members, racks, out);
		return;
	}
	/* Pending: at least one unit, one per member when spread over that
	 * level or a finer one, each no cheaper than the cheapest. */
	int units = 1;
	if ((racks && sp == ISO_SPREAD_RACK) ||
	    (!racks && (sp == ISO_SPREAD_NODE || sp == ISO_SPREAD_RACK)))
		units = members;
	memset(out, 0, sizeof(*out));
	for (int u = 0; u < units; u++)
		vec_add(out, racks ? &k->least_rack : &k->least_node);
	/* ...and never less than the shape itself. */
	struct iso_resvec own;
	shape_demand(c, &a->shape, members, true, &own);
	for (int x = 0; x < ISO_RES_FIRST_MODEL; x++)
		if (own.v[x] > out->v[x])
			out->v[x] = own.v[x];
}

void ctl_demand(const struct iso_controller *c, const struct iso_allocation *a,
                struct iso_resvec *out)
{
	ctl_demand_members(c, a, a->members, out);
}

bool ctl_shape_asks_nothing(const struct iso_shape *sh)
{
	return sh->gpu_count <= 0 && sh->cpus <= 0 && sh->memory_mib <= 0;
}

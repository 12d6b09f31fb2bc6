/* cluster_state.c: the in-memory picture of what is in use on every node and
 * GPU. Taking an allocation validates every member and slot against the
 * inventory and the MIG rules and either applies all of it or nothing; giving
 * is its exact inverse. Placement policies search this state; they never
 * change it except through take/give. Take also enforces the fabric's
 * co-tenancy rule (one SR-IOV VF per tenant on a node), and both keep the
 * private index (index.c) current. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sched/index.h"

int iso_cluster_state_init(struct iso_cluster_state *cs, const struct iso_inventory *inv)
{
	struct iso_cluster_state st = {.inv = inv};
	int n = inv->n_nodes;

	memset(cs, 0, sizeof(*cs));
	if (n < 0)
		return -EINVAL;
	if (n > 0) {
		st.usage = calloc((size_t)n, sizeof(*st.usage));
		st.sched = calloc((size_t)n, sizeof(*st.sched));
		if (!st.usage || !st.sched) {
			iso_cluster_state_free(&st);
			return -ENOMEM;
		}
	}
	for (int i = 0; i < n; i++) {
		const struct iso_node *node = &inv->nodes[i];

		st.sched[i] = node->sched;
		if (node->n_gpus < 0) {
			iso_cluster_state_free(&st);
			return -EINVAL;
		}
		if (node->n_gpus == 0)
			continue;
		st.usage[i].gpus = calloc((size_t)node->n_gpus, sizeof(*st.usage[i].gpus));
		if (!st.usage[i].gpus) {
			iso_cluster_state_free(&st);
			return -ENOMEM;
		}
		for (int j = 0; j < node->n_gpus; j++) {
			if (!node->gpus[j].model) {
				iso_cluster_state_free(&st);
				return -EINVAL;
			}
			iso_gpu_occupancy_init(&st.usage[i].gpus[j], node->gpus[j].model);
		}
	}
	if (ix_build(&st) < 0) {
		iso_cluster_state_free(&st);
		return -ENOMEM;
	}
	*cs = st;
	return 0;
}

void iso_cluster_state_free(struct iso_cluster_state *cs)
{
	if (cs->usage)
		for (int i = 0; i < cs->inv->n_nodes; i++)
			free(cs->usage[i].gpus);
	free(cs->usage);
	free(cs->sched);
	free(cs->quarantined);
	ix_free(cs->index);
	memset(cs, 0, sizeof(*cs));
}

int iso_cluster_state_node_index(const struct iso_cluster_state *cs, const char *node)
{
	if (!cs->inv || !node)
		return -1;
	if (cs->index)
		return ix_strmap_find(&cs->index->node_names, node);
	for (int i = 0; i < cs->inv->n_nodes; i++)
		if (strcmp(cs->inv->nodes[i].name, node) == 0)
			return i;
	return -1;
}

/* Position of the GPU with device index `index` in node->gpus, or -1. */
static int gpu_position(const struct iso_node *node, int index)
{
	for (int j = 0; j < node->n_gpus; j++)
		if (node->gpus[j].index == index)
			return j;
	return -1;
}

/* ---- faults: GPUs out of service ---- */

/* The GPU's number in cs->quarantined, or -1 when there is no such GPU. */
static int gpu_id(const struct iso_cluster_state *cs, int node, int pos)
{
	int base = 0;

	if (!cs->inv || node < 0 || node >= cs->inv->n_nodes || pos < 0 ||
	    pos >= cs->inv->nodes[node].n_gpus)
		return -1;
	if (cs->index)
		return cs->index->nodes[node].gpu_base + pos;
	for (int i = 0; i < node; i++)
		base += cs->inv->nodes[i].n_gpus;
	return base + pos;
}

bool iso_cluster_state_gpu_quarantined(const struct iso_cluster_state *cs, int node, int pos)
{
	int id = gpu_id(cs, node, pos);

	return id >= 0 && cs->quarantined && cs->quarantined[id];
}

int iso_cluster_state_gpu_quarantine(struct iso_cluster_state *cs, int node, int pos)
{
	int id = gpu_id(cs, node, pos);

	cs->version++;
	const struct iso_gpu *gpu;
	struct iso_gpu_occupancy *o;

	if (id < 0)
		return -EINVAL;
	if (cs->quarantined && cs->quarantined[id])
		return 0;
	gpu = &cs->inv->nodes[node].gpus[pos];
	o = &cs->usage[node].gpus[pos];
	if (!iso_gpu_occupancy_empty(gpu->model, o))
		return -EBUSY;
	if (!cs->quarantined) {
		int n = 0;
		for (int i = 0; i < cs->inv->n_nodes; i++)
			n += cs->inv->nodes[i].n_gpus;
		cs->quarantined = calloc((size_t)n, sizeof(*cs->quarantined));
		if (!cs->quarantined)
			return -ENOMEM;
	}
	/* Fully used is a state every policy and take already refuse, and the
	 * index files it like a busy whole GPU, so no search changes. */
	o->whole = true;
	o->free_mask = 0;
	o->compute_used = gpu->model->compute_slices;
	cs->quarantined[id] = true;
	ix_gpu_changed(cs, node, pos);
	return 0;
}

void iso_cluster_state_gpu_restore(struct iso_cluster_state *cs, int node, int pos)
{
	int id = gpu_id(cs, node, pos);

	cs->version++;

	if (id < 0 || !cs->quarantined || !cs->quarantined[id])
		return;
	cs->quarantined[id] = false;
	iso_gpu_occupancy_init(&cs->usage[node].gpus[pos], cs->inv->nodes[node].gpus[pos].model);
	ix_gpu_changed(cs, node, pos);
}

/* ---- one member ---- */

/* The exclusive level an allocation is taken with: that of the request
 * being placed (iso_placer_place_ex), so a caller that rebuilds the state
 * sets cs->constraints around take to restore an allocation's marks. */
static int take_level(const struct iso_cluster_state *cs)
{
	return cs->constraints ? cs->constraints->exclusive : 0;
}

static int member_take(struct iso_cluster_state *cs, int ni, const struct iso_allocation *a, int k,
                       struct iso_error *err)
{
	const struct iso_node *node = &cs->inv->nodes[ni];
	struct iso_node_usage *u = &cs->usage[ni];

	if ((int64_t)u->cpus_used + a->shape.cpus > node->cpus)
		return iso_error_set(err, ISO_E_NO_CAPACITY, "cpus",
		                     "member %d: node %s has %d of %d cpus free, %d needed", k,
		                     node->name, node->cpus - u->cpus_used, node->cpus,
		                     a->shape.cpus);
	if (u->memory_mib_used + a->shape.memory_mib > node->memory_mib)
		return iso_error_set(err, ISO_E_NO_CAPACITY, "memory_mib",
		                     "member %d: node %s has %lld of %lld MiB free, %lld needed", k,
		                     node->name, (long long)(node->memory_mib - u->memory_mib_used),
		                     (long long)node->memory_mib, (long long)a->shape.memory_mib);
	if (cs->index) {
		char field[ISO_ERR_FIELD_MAX];

		snprintf(field, sizeof(field), "nodes[%d].node", k);
		if (!ix_excl_node_allows(cs->index, ni, a->tenant_id, take_level(cs)))
			return iso_error_set(err, ISO_E_NO_CAPACITY, field,
			                     "member %d: node %s is held exclusively by another "
			                     "tenant, or this allocation is exclusive and another "
			                     "tenant is there",
			                     k, node->name);
		if (!ix_fabric_allows(cs->index, ni, a->tenant_id)) {
			if (cs->index->nodes[ni].vfs)
				return iso_error_set(
				    err, ISO_E_NO_CAPACITY, field,
				    "member %d: node %s has no free SR-IOV VF for another tenant "
				    "(%d of %d in use; each tenant on a node needs its own)",
				    k, node->name, u->vfs_used, node->port.n_vfs);
			return iso_error_set(err, ISO_E_NO_CAPACITY, field,
			                     "member %d: node %s has no SR-IOV VFs, so its fabric "
			                     "port serves one tenant at a time, and another "
			                     "tenant is there",
			                     k, node->name);
		}
		if (ix_tenant_add(cs, ni, a->tenant_id) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		if (ix_excl_member_take(cs, ni, a->tenant_id, take_level(cs)) < 0) {
			ix_tenant_remove(cs, ni, a->tenant_id);
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		}
	}
	u->cpus_used += a->shape.cpus;
	u->memory_mib_used += a->shape.memory_mib;
	u->members++;
	return 0;
}

static void member_give(struct iso_cluster_state *cs, int ni, const struct iso_allocation *a)
{
	struct iso_node_usage *u = &cs->usage[ni];

	if (u->members <= 0 || u->cpus_used < a->shape.cpus ||
	    u->memory_mib_used < a->shape.memory_mib) {
		iso_log(ISO_LOG_WARN, "sched.give_inconsistent", "alloc=%s node=%s what=member",
		        a->id, cs->inv->nodes[ni].name);
		return;
	}
	u->cpus_used -= a->shape.cpus;
	u->memory_mib_used -= a->shape.memory_mib;
	u->members--;
	if (cs->index) {
		ix_tenant_remove(cs, ni, a->tenant_id);
		ix_excl_member_give(cs, ni, a->tenant_id);
	}
}

/* ---- one slot ---- */

/* Resolves a slot to its GPU's occupancy; fills *model and *pos. */
static int slot_resolve(struct iso_cluster_state *cs, int ni, const struct iso_slot *s, int si,
                        const struct iso_gpu **gpu, struct iso_gpu_occupancy **occ,
                        struct iso_error *err)
{
	const struct iso_node *node = &cs->inv->nodes[ni];
	char field[ISO_ERR_FIELD_MAX];
	int pos = gpu_position(node, s->gpu);

	if (pos < 0) {
		snprintf(field, sizeof(field), "placement[%d].gpu", si);
		iso_error_set(err, ISO_E_INVALID, field, "node %s has no GPU %d", node->name,
		              s->gpu);
		return -EINVAL; /* spelt out: *gpu and *occ are set only on success */
	}
	*gpu = &node->gpus[pos];
	*occ = &cs->usage[ni].gpus[pos];
	return 0;
}

static int slot_take_geometry(struct iso_cluster_state *cs, int ni, const struct iso_slot *s,
                              int si, struct iso_error *err)
{
	const char *node = cs->inv->nodes[ni].name;
	const struct iso_gpu *gpu;
	const struct iso_mig_profile *p;
	struct iso_gpu_occupancy *o;
	struct iso_gpu_occupancy empty;
	char field[ISO_ERR_FIELD_MAX];
	int r;

	r = slot_resolve(cs, ni, s, si, &gpu, &o, err);
	if (r < 0)
		return r;
	if (s->whole) {
		if (s->profile[0] != '\0' || s->start != 0 ||
		    s->width != gpu->model->memory_slices) {
			snprintf(field, sizeof(field), "placement[%d]", si);
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "a whole GPU has no profile, start 0 and width %d",
			                     gpu->model->memory_slices);
		}
		if (!iso_gpu_occupancy_empty(gpu->model, o)) {
			snprintf(field, sizeof(field), "placement[%d].gpu", si);
			return iso_error_set(err, ISO_E_NO_CAPACITY, field,
			                     "GPU %d on node %s is not entirely free", s->gpu,
			                     node);
		}
		o->whole = true;
		o->free_mask = 0;
		o->compute_used = gpu->model->compute_slices;
		ix_gpu_changed(cs, ni, (int)(gpu - cs->inv->nodes[ni].gpus));
		return 0;
	}

	if (!gpu->mig_enabled) {
		snprintf(field, sizeof(field), "placement[%d].gpu", si);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "GPU %d on node %s does not have MIG enabled", s->gpu, node);
	}
	p = iso_mig_profile_find(gpu->model, s->profile);
	if (!p) {
		snprintf(field, sizeof(field), "placement[%d].profile", si);
		return iso_error_set(err, ISO_E_INVALID, field, "%s has no MIG profile '%s'",
		                     gpu->model->name, s->profile);
	}
	if (s->width != p->width) {
		snprintf(field, sizeof(field), "placement[%d].width", si);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s occupies %d memory slices, not %d", p->name, p->width,
		                     s->width);
	}
	/* Geometry that no occupancy could accept is bad input, not lack of room. */
	iso_gpu_occupancy_init(&empty, gpu->model);
	if (!iso_mig_fits_at(gpu->model, &empty, p, s->start)) {
		snprintf(field, sizeof(field), "placement[%d].start", si);
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s cannot start at memory slice %d", p->name, s->start);
	}
	if (!iso_mig_fits_at(gpu->model, o, p, s->start)) {
		snprintf(field, sizeof(field), "placement[%d]", si);
		return iso_error_set(err, ISO_E_NO_CAPACITY, field,
		                     "%s at slice %d does not fit on GPU %d of node %s", p->name,
		                     s->start, s->gpu, node);
	}
	iso_mig_take(gpu->model, o, p, s->start);
	ix_gpu_changed(cs, ni, (int)(gpu - cs->inv->nodes[ni].gpus));
	return 0;
}

/* Exact inverse of a successful slot_take; refuses (and logs) a slot that is
 * not held, so a double give cannot corrupt the counters. */
static bool slot_give_geometry(struct iso_cluster_state *cs, int ni, const struct iso_slot *s,
                               int si, const char *alloc_id)
{
	const struct iso_gpu *gpu;
	const struct iso_mig_profile *p;
	struct iso_gpu_occupancy *o;
	int idx;

	if (slot_resolve(cs, ni, s, si, &gpu, &o, NULL) < 0)
		goto inconsistent;
	if (s->whole) {
		/* A quarantined GPU looks whole but holds nobody's slot. */
		if (!o->whole ||
		    iso_cluster_state_gpu_quarantined(cs, ni, (int)(gpu - cs->inv->nodes[ni].gpus)))
			goto inconsistent;
		iso_gpu_occupancy_init(o, gpu->model);
		ix_gpu_changed(cs, ni, (int)(gpu - cs->inv->nodes[ni].gpus));
		return true;
	}
	p = iso_mig_profile_find(gpu->model, s->profile);
	if (!p || o->whole || s->start < 0 || s->start + p->width > gpu->model->memory_slices)
		goto inconsistent;
	idx = (int)(p - gpu->model->profiles);
	if ((o->free_mask & iso_mig_span(s->start, p->width)) != 0 || o->count[idx] == 0 ||
	    o->compute_used < p->compute || (p->media_engine && !o->media_engine_used))
		goto inconsistent;
	iso_mig_give(gpu->model, o, p, s->start);
	ix_gpu_changed(cs, ni, (int)(gpu - cs->inv->nodes[ni].gpus));
	return true;

inconsistent:
	iso_log(ISO_LOG_WARN, "sched.give_inconsistent", "alloc=%s node=%s slot=%d", alloc_id,
	        cs->inv->nodes[ni].name, si);
	return false;
}

/* A slot: its geometry, and the tenant on that GPU (isolation). */
static int slot_take(struct iso_cluster_state *cs, int ni, const struct iso_allocation *a,
                     const struct iso_slot *s, int si, struct iso_error *err)
{
	int pos = gpu_position(&cs->inv->nodes[ni], s->gpu);
	int r;

	if (cs->index && pos >= 0 &&
	    !ix_excl_gpu_allows(cs->index, cs->index->nodes[ni].gpu_base + pos, a->tenant_id,
	                        take_level(cs))) {
		char field[ISO_ERR_FIELD_MAX];
		snprintf(field, sizeof(field), "placement[%d].gpu", si);
		return iso_error_set(err, ISO_E_NO_CAPACITY, field,
		                     "GPU %d on node %s is held exclusively by another tenant, or "
		                     "this allocation is exclusive and another tenant is there",
		                     s->gpu, cs->inv->nodes[ni].name);
	}
	r = slot_take_geometry(cs, ni, s, si, err);
	if (r < 0 || !cs->index)
		return r;
	if (ix_excl_slot_take(cs, ni, pos, a->tenant_id, take_level(cs)) < 0) {
		slot_give_geometry(cs, ni, s, si, a->id);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	return 0;
}

static void slot_give(struct iso_cluster_state *cs, int ni, const struct iso_allocation *a,
                      const struct iso_slot *s, int si)
{
	if (slot_give_geometry(cs, ni, s, si, a->id) && cs->index)
		ix_excl_slot_give(cs, ni, gpu_position(&cs->inv->nodes[ni], s->gpu), a->tenant_id);
}

/* ---- whole allocations ---- */

/* Node index of every member in [from, n_members), checked; NULL on error. */
static int *resolve_members(struct iso_cluster_state *cs, const struct iso_allocation *a, int from,
                            struct iso_error *err, int *r)
{
	int n = a->n_members - from;
	int *nodes = calloc(n > 0 ? (size_t)n : 1, sizeof(*nodes));
	char field[ISO_ERR_FIELD_MAX];

	if (!nodes) {
		*r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		return NULL;
	}
	for (int k = from; k < a->n_members; k++) {
		if (a->placed[k].index != k) {
			snprintf(field, sizeof(field), "nodes[%d].member", k);
			*r = iso_error_set(err, ISO_E_INVALID, field,
			                   "member %d is listed as index %d; indexes are dense", k,
			                   a->placed[k].index);
			free(nodes);
			return NULL;
		}
		nodes[k - from] = iso_cluster_state_node_index(cs, a->placed[k].node);
		if (nodes[k - from] < 0) {
			snprintf(field, sizeof(field), "nodes[%d].node", k);
			*r = iso_error_set(err, ISO_E_INVALID, field, "unknown node '%s'",
			                   a->placed[k].node);
			free(nodes);
			return NULL;
		}
	}
	return nodes;
}

/* Undoes members [from, members_done) and the slots before slot index
 * slots_done that belong to members >= from. */
static void undo(struct iso_cluster_state *cs, const struct iso_allocation *a, int from,
                 const int *nodes, int members_done, int slots_done)
{
	for (int si = slots_done - 1; si >= 0; si--) {
		const struct iso_slot *s = &a->slots[si];
		if (s->member >= from)
			slot_give(cs, nodes[s->member - from], a, s, si);
	}
	for (int k = members_done - 1; k >= from; k--)
		member_give(cs, nodes[k - from], a);
}

int iso_cluster_state_take_members(struct iso_cluster_state *cs, const struct iso_allocation *a,
                                   int from, struct iso_error *err)
{
	_cleanup_free_ int *nodes = NULL;
	char field[ISO_ERR_FIELD_MAX];
	int k, si, r = 0;

	cs->version++;
	if (from < 0 || a->n_members < 0 || from > a->n_members || a->n_slots < 0 ||
	    (a->n_members > 0 && !a->placed) || (a->n_slots > 0 && !a->slots))
		return iso_error_set(err, ISO_E_INVALID, NULL, "malformed placement");
	if (a->shape.cpus < 0)
		return iso_error_set(err, ISO_E_INVALID, "cpus", "must be >= 0");
	if (a->shape.memory_mib < 0)
		return iso_error_set(err, ISO_E_INVALID, "memory_mib", "must be >= 0");
	if (from == a->n_members) {
		/* No members to take; slots of earlier members are already held. */
		for (si = 0; si < a->n_slots; si++)
			if (a->slots[si].member < 0 || a->slots[si].member >= a->n_members)
				goto bad_member;
		return 0;
	}
	nodes = resolve_members(cs, a, from, err, &r);
	if (!nodes)
		return r;

	for (k = from; k < a->n_members; k++) {
		r = member_take(cs, nodes[k - from], a, k, err);
		if (r < 0) {
			undo(cs, a, from, nodes, k, 0);
			return r;
		}
	}
	for (si = 0; si < a->n_slots; si++) {
		const struct iso_slot *s = &a->slots[si];

		if (s->member < 0 || s->member >= a->n_members) {
			undo(cs, a, from, nodes, a->n_members, si);
			goto bad_member;
		}
		if (s->member < from)
			continue;
		r = slot_take(cs, nodes[s->member - from], a, s, si, err);
		if (r < 0) {
			undo(cs, a, from, nodes, a->n_members, si);
			return r;
		}
	}
	for (k = from; cs->on_member && k < a->n_members; k++)
		cs->on_member(cs->on_member_arg, nodes[k - from], a, k, true);
	return 0;

bad_member:
	snprintf(field, sizeof(field), "placement[%d].member", si);
	return iso_error_set(err, ISO_E_INVALID, field, "no member %d in this allocation",
	                     a->slots[si].member);
}

void iso_cluster_state_give_members(struct iso_cluster_state *cs, const struct iso_allocation *a,
                                    int from)
{
	_cleanup_free_ int *nodes = NULL;
	int r;

	cs->version++;
	if (from < 0 || from >= a->n_members)
		return;
	nodes = resolve_members(cs, a, from, NULL, &r);
	if (!nodes) {
		iso_log(ISO_LOG_WARN, "sched.give_inconsistent", "alloc=%s what=members", a->id);
		return;
	}
	for (int si = a->n_slots - 1; si >= 0; si--) {
		const struct iso_slot *s = &a->slots[si];
		if (s->member >= from && s->member < a->n_members)
			slot_give(cs, nodes[s->member - from], a, s, si);
	}
	for (int k = a->n_members - 1; k >= from; k--)
		member_give(cs, nodes[k - from], a);
	for (int k = from; cs->on_member && k < a->n_members; k++)
		cs->on_member(cs->on_member_arg, nodes[k - from], a, k, false);
}

int iso_cluster_state_take(struct iso_cluster_state *cs, const struct iso_allocation *a,
                           struct iso_error *err)
{
	return iso_cluster_state_take_members(cs, a, 0, err);
}

void iso_cluster_state_give(struct iso_cluster_state *cs, const struct iso_allocation *a)
{
	iso_cluster_state_give_members(cs, a, 0);
}

bool iso_cluster_state_open_to(const struct iso_cluster_state *cs, int node, int gpu_pos,
                               int64_t tenant)
{
	const struct iso_sched_index *ix = cs->index;

	if (!ix || node < 0)
		return true;
	if (!ix_excl_node_allows(ix, node, tenant, 0))
		return false;
	return gpu_pos < 0 || ix_excl_gpu_allows(ix, ix->nodes[node].gpu_base + gpu_pos, tenant, 0);
}

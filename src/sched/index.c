/* index.c: the cluster state's private index (see index.h): names hashed to
 * node indexes, the tenants on every node, and the buckets that let a
 * placement decision look at O(states x pools) lists instead of every GPU.
 * Built once from the inventory; take/give keep it current without
 * allocating (the buckets are intrusive lists), except a node's tenant list,
 * which grows when a new tenant arrives and can fail cleanly there. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sched/index.h"

/* ---- string map ---- */

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 16777619u;
	}
	return h;
}

static int strmap_init(struct ix_strmap *m, int expect)
{
	uint32_t cap = 16;

	while (cap < 0x40000000u && cap < (uint32_t)expect * 2u)
		cap <<= 1;
	m->slot = calloc(cap, sizeof(*m->slot));
	m->mask = cap - 1;
	m->n = 0;
	return m->slot ? 0 : -ENOMEM;
}

int ix_strmap_find(const struct ix_strmap *m, const char *s)
{
	if (!s || !m->slot)
		return -1;
	for (uint32_t h = hash_str(s) & m->mask;; h = (h + 1) & m->mask) {
		if (!m->slot[h].name)
			return -1;
		if (strcmp(m->slot[h].name, s) == 0)
			return m->slot[h].value;
	}
}

/* Adds `s` with `value` unless present; returns the value stored for `s`.
 * The map was sized for every name at init, so it never fills. */
static int32_t strmap_add(struct ix_strmap *m, const char *s, int32_t value)
{
	uint32_t h = hash_str(s) & m->mask;

	for (; m->slot[h].name; h = (h + 1) & m->mask)
		if (strcmp(m->slot[h].name, s) == 0)
			return m->slot[h].value;
	m->slot[h].name = s;
	m->slot[h].value = value;
	m->n++;
	return value;
}

/* ---- intrusive bucket lists ---- */

static void gpu_unlink(struct iso_sched_index *ix, int32_t g)
{
	struct ix_gpu *x = &ix->gpus[g];

	if (x->bucket < 0)
		return;
	if (x->prev >= 0)
		ix->gpus[x->prev].next = x->next;
	else
		ix->gbuckets[x->bucket] = x->next;
	if (x->next >= 0)
		ix->gpus[x->next].prev = x->prev;
	ix->key_gpus[(int64_t)x->model * ix->n_keys + x->bucket % ix->n_keys]--;
	x->bucket = x->next = x->prev = -1;
}

static void gpu_link(struct iso_sched_index *ix, int32_t g, int32_t bucket)
{
	struct ix_gpu *x = &ix->gpus[g];

	ix->key_gpus[(int64_t)x->model * ix->n_keys + bucket % ix->n_keys]++;
	x->bucket = bucket;
	x->prev = -1;
	x->next = ix->gbuckets[bucket];
	if (x->next >= 0)
		ix->gpus[x->next].prev = g;
	ix->gbuckets[bucket] = g;
}

static void node_unlink(struct iso_sched_index *ix, int32_t ni)
{
	struct ix_node *x = &ix->nodes[ni];

	if (x->nbucket < 0)
		return;
	if (x->prev >= 0)
		ix->nodes[x->prev].next = x->next;
	else
		ix->nbuckets[x->nbucket] = x->next;
	if (x->next >= 0)
		ix->nodes[x->next].prev = x->prev;
	x->nbucket = x->next = x->prev = -1;
}

static void node_link(struct iso_sched_index *ix, int32_t ni, int32_t bucket)
{
	struct ix_node *x = &ix->nodes[ni];

	x->nbucket = bucket;
	x->prev = -1;
	x->next = ix->nbuckets[bucket];
	if (x->next >= 0)
		ix->nodes[x->next].prev = ni;
	ix->nbuckets[bucket] = ni;
}

/* ---- bucket keys ---- */

/* The GPU bucket a GPU belongs in, or -1 (taken whole, MIG off, no model). */
static int32_t gpu_bucket_of(const struct iso_cluster_state *cs, int ni, int pos)
{
	const struct iso_sched_index *ix = cs->index;
	const struct iso_gpu *gpu = &cs->inv->nodes[ni].gpus[pos];
	const struct iso_gpu_occupancy *o = &cs->usage[ni].gpus[pos];
	const struct ix_gpu *x = &ix->gpus[ix->nodes[ni].gpu_base + pos];
	int key;

	if (x->model < 0 || !gpu->mig_enabled || o->whole)
		return -1;
	if (x->empty)
		key = IX_KEY_EMPTY(ix->nodes[ni].n_empty);
	else
		key = iso_mig_state_of(o);
	return ix_gbucket_id(ix, ix->nodes[ni].pool, x->model, key);
}

static int32_t node_bucket_of(const struct iso_cluster_state *cs, int ni)
{
	const struct iso_sched_index *ix = cs->index;
	const struct ix_node *x = &ix->nodes[ni];

	return ix_nbucket_id(ix, x->pool,
	                     cs->inv->nodes[ni].n_gpus == 0 ? ix->gmax + 1 : x->n_empty);
}

static void gpu_refile(struct iso_cluster_state *cs, int ni, int pos)
{
	struct iso_sched_index *ix = cs->index;
	int32_t g = ix->nodes[ni].gpu_base + pos;
	int32_t b = gpu_bucket_of(cs, ni, pos);

	if (b == ix->gpus[g].bucket)
		return;
	gpu_unlink(ix, g);
	if (b >= 0)
		gpu_link(ix, g, b);
}

void ix_gpu_changed(struct iso_cluster_state *cs, int ni, int pos)
{
	struct iso_sched_index *ix = cs->index;
	const struct iso_node *node = &cs->inv->nodes[ni];
	struct ix_node *xn;
	struct ix_gpu *x;
	bool empty;

	if (!ix)
		return;
	xn = &ix->nodes[ni];
	x = &ix->gpus[xn->gpu_base + pos];
	empty = iso_gpu_occupancy_empty(node->gpus[pos].model, &cs->usage[ni].gpus[pos]);
	if (empty != x->empty) {
		x->empty = empty;
		xn->n_empty += empty ? 1 : -1;
		ix->pool_empty[xn->pool] += empty ? 1 : -1;
		if (x->model >= 0 && node->gpus[pos].mig_enabled)
			ix->models[x->model].mig_empty += empty ? 1 : -1;
		node_unlink(ix, ni);
		node_link(ix, ni, node_bucket_of(cs, ni));
		/* Empty MIG GPUs are filed by their node's empty count. */
		for (int j = 0; j < node->n_gpus; j++)
			if (j != pos && ix->gpus[xn->gpu_base + j].empty)
				gpu_refile(cs, ni, j);
	}
	gpu_refile(cs, ni, pos);
}

void iso_cluster_state_reindex(struct iso_cluster_state *cs)
{
	struct iso_sched_index *ix = cs->index;

	if (!ix)
		return;
	memset(ix->pool_empty, 0, (size_t)ix->n_pools * sizeof(*ix->pool_empty));
	for (int mi = 0; mi < ix->n_models; mi++)
		ix->models[mi].mig_empty = 0;
	/* Backwards, so that lists (newest first) start in inventory order. */
	for (int ni = ix->n_nodes - 1; ni >= 0; ni--) {
		const struct iso_node *node = &cs->inv->nodes[ni];
		struct ix_node *xn = &ix->nodes[ni];

		xn->n_empty = 0;
		for (int j = 0; j < node->n_gpus; j++) {
			struct ix_gpu *x = &ix->gpus[xn->gpu_base + j];
			x->empty =
			    iso_gpu_occupancy_empty(node->gpus[j].model, &cs->usage[ni].gpus[j]);
			xn->n_empty += x->empty;
			if (x->empty && x->model >= 0 && node->gpus[j].mig_enabled)
				ix->models[x->model].mig_empty++;
		}
		ix->pool_empty[xn->pool] += xn->n_empty;
		node_unlink(ix, ni);
		node_link(ix, ni, node_bucket_of(cs, ni));
		for (int j = node->n_gpus - 1; j >= 0; j--) {
			gpu_unlink(ix, xn->gpu_base + j);
			gpu_refile(cs, ni, j);
		}
	}
}

/* ---- tenants on a node ---- */

int ix_tset_find(const struct ix_tset *s, int64_t tenant)
{
	for (int i = 0; i < s->n; i++)
		if (s->t[i].id == tenant)
			return i;
	return -1;
}

int ix_tset_add(struct ix_tset *s, int64_t tenant)
{
	int i = ix_tset_find(s, tenant);

	if (i >= 0) {
		s->t[i].members++;
		return 0;
	}
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 2;
		struct ix_tenant *t = realloc(s->t, (size_t)cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		s->t = t;
		s->cap = cap;
	}
	s->t[s->n++] = (struct ix_tenant){.id = tenant, .members = 1};
	return 0;
}

void ix_tset_remove(struct ix_tset *s, int64_t tenant)
{
	int i = ix_tset_find(s, tenant);

	if (i < 0 || --s->t[i].members > 0)
		return;
	/* Keep the order of the others: it is part of what is deterministic. */
	memmove(&s->t[i], &s->t[i + 1], (size_t)(s->n - i - 1) * sizeof(s->t[0]));
	s->n--;
	if (s->excl && s->excl_owner == tenant)
		s->excl = false;
}

int iso_cluster_state_node_tenants(const struct iso_cluster_state *cs, int node, int64_t *out,
                                   int max)
{
	const struct ix_node *x;

	if (!cs->index || node < 0 || node >= cs->index->n_nodes)
		return 0;
	x = &cs->index->nodes[node];
	for (int i = 0; i < x->ten.n && i < max; i++)
		out[i] = x->ten.t[i].id;
	return x->ten.n;
}

bool ix_fabric_allows(const struct iso_sched_index *ix, int ni, int64_t tenant)
{
	const struct ix_node *x = &ix->nodes[ni];

	return x->ten.n < x->vf_limit || ix_tset_find(&x->ten, tenant) >= 0;
}

static void usage_tenants(struct iso_cluster_state *cs, int ni)
{
	const struct ix_node *x = &cs->index->nodes[ni];

	cs->usage[ni].tenants = x->ten.n;
	cs->usage[ni].vfs_used = x->vfs ? x->ten.n : 0;
}

int ix_tenant_add(struct iso_cluster_state *cs, int ni, int64_t tenant)
{
	if (ix_tset_add(&cs->index->nodes[ni].ten, tenant) < 0)
		return -ENOMEM;
	usage_tenants(cs, ni);
	return 0;
}

void ix_tenant_remove(struct iso_cluster_state *cs, int ni, int64_t tenant)
{
	ix_tset_remove(&cs->index->nodes[ni].ten, tenant);
	usage_tenants(cs, ni);
}

/* ---- build / free ---- */

void ix_free(struct iso_sched_index *ix)
{
	if (!ix)
		return;
	if (ix->nodes)
		for (int i = 0; i < ix->n_nodes; i++)
			free(ix->nodes[i].ten.t);
	ix_excl_free(ix);
	for (int i = 0; ix->models && i < ix->n_models; i++)
		free(ix->models[i].eng);
	free(ix->node_names.slot);
	free(ix->pools.slot);
	free(ix->racks.slot);
	free(ix->nodes);
	free(ix->gpus);
	free(ix->models);
	free(ix->gbuckets);
	free(ix->nbuckets);
	free(ix->key_gpus);
	free(ix->rack_first);
	free(ix->rack_next);
	free(ix->rack_allow);
	free(ix->rack_avoid);
	free(ix->scratch_nodes);
	free(ix->scratch_occ);
	free(ix->pool_gpus);
	free(ix->pool_empty);
	free(ix->pool_order);
	free(ix);
}

static int model_index(struct iso_sched_index *ix, const struct iso_gpu_model *m, int *cap)
{
	for (int i = 0; i < ix->n_models; i++)
		if (ix->models[i].m == m)
			return i;
	if (ix->n_models == *cap) {
		int ncap = *cap ? 2 * *cap : 8;
		struct ix_model *n = realloc(ix->models, (size_t)ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		ix->models = n;
		*cap = ncap;
	}
	ix->models[ix->n_models] = (struct ix_model){.m = m};
	return ix->n_models++;
}

static int32_t *heads(size_t n)
{
	int32_t *h = malloc((n ? n : 1) * sizeof(*h));

	if (h)
		memset(h, 0xff, (n ? n : 1) * sizeof(*h)); /* -1 */
	return h;
}

int ix_build(struct iso_cluster_state *cs)
{
	const struct iso_inventory *inv = cs->inv;
	struct iso_sched_index *ix = calloc(1, sizeof(*ix));
	int n = inv->n_nodes, models_cap = 0, g = 0;
	int64_t n_gbuckets;

	if (!ix)
		return -ENOMEM;
	ix->c_pin = -1;
	ix->n_nodes = n;
	ix->fabric_limited =
	    inv->fabric.type == ISO_FABRIC_INFINIBAND || inv->fabric.type == ISO_FABRIC_OMNIPATH;
	if (strmap_init(&ix->node_names, n) < 0 || strmap_init(&ix->pools, n) < 0 ||
	    strmap_init(&ix->racks, n) < 0)
		goto oom;
	ix->nodes = calloc(n ? (size_t)n : 1, sizeof(*ix->nodes));
	ix->scratch_nodes = calloc(n ? (size_t)n : 1, sizeof(*ix->scratch_nodes));
	if (!ix->nodes || !ix->scratch_nodes)
		goto oom;
	for (int i = 0; i < n; i++) {
		const struct iso_node *node = &inv->nodes[i];
		struct ix_node *x = &ix->nodes[i];

		strmap_add(&ix->node_names, node->name, i); /* the first of a name wins */
		x->pool = strmap_add(&ix->pools, node->pool, ix->pools.n);
		x->rack = strmap_add(&ix->racks, node->rack, ix->racks.n);
		x->gpu_base = g;
		x->nbucket = x->next = x->prev = -1;
		if (ix->fabric_limited && node->has_port) {
			x->vf_limit = node->port.n_vfs > 0 ? node->port.n_vfs : 1;
			x->vfs = node->port.n_vfs > 0;
		} else {
			x->vf_limit = INT32_MAX;
		}
		if (node->n_gpus > ix->gmax)
			ix->gmax = node->n_gpus;
		if (node->n_gpus > INT32_MAX - g)
			goto oom;
		g += node->n_gpus;
	}
	ix->n_pools = ix->pools.n;
	ix->n_racks = ix->racks.n;
	ix->n_gpus = g;
	ix->gpus = calloc(g ? (size_t)g : 1, sizeof(*ix->gpus));
	if (!ix->gpus)
		goto oom;
	for (int i = 0; i < n; i++) {
		const struct iso_node *node = &inv->nodes[i];
		for (int j = 0; j < node->n_gpus; j++) {
			struct ix_gpu *x = &ix->gpus[ix->nodes[i].gpu_base + j];
			int mi = node->gpus[j].model
			             ? model_index(ix, node->gpus[j].model, &models_cap)
			             : -1;
			if (mi < -1)
				goto oom;
			x->node = i;
			x->pos = (int16_t)j;
			x->model = (int16_t)mi;
			x->bucket = x->next = x->prev = -1;
			if (mi >= 0 && node->gpus[j].mig_enabled)
				ix->models[mi].mig_gpus++;
		}
	}
	ix->n_keys = ISO_MIG_STATES + ix->gmax + 1;
	n_gbuckets = (int64_t)ix->n_pools * ix->n_models * ix->n_keys;
	if (n_gbuckets > INT32_MAX || ix->gmax > INT16_MAX)
		goto oom;
	ix->gbuckets = heads((size_t)n_gbuckets);
	ix->nbuckets = heads((size_t)ix->n_pools * (size_t)(ix->gmax + 2));
	ix->key_gpus = calloc((size_t)(ix->n_models ? ix->n_models : 1) * (size_t)ix->n_keys,
	                      sizeof(*ix->key_gpus));
	ix->rack_first = heads((size_t)ix->n_racks);
	ix->rack_next = heads((size_t)n);
	ix->rack_allow = calloc(ix->n_racks ? (size_t)ix->n_racks : 1, sizeof(uint32_t));
	ix->rack_avoid = calloc(ix->n_racks ? (size_t)ix->n_racks : 1, sizeof(uint32_t));
	ix->rack_ten = calloc(ix->n_racks ? (size_t)ix->n_racks : 1, sizeof(*ix->rack_ten));
	ix->rack_spread = calloc(ix->n_racks ? (size_t)ix->n_racks : 1, sizeof(uint32_t));
	ix->scratch_occ = calloc(ix->gmax ? (size_t)ix->gmax : 1, sizeof(*ix->scratch_occ));
	ix->pool_gpus = calloc(ix->n_pools ? (size_t)ix->n_pools : 1, sizeof(int32_t));
	ix->pool_empty = calloc(ix->n_pools ? (size_t)ix->n_pools : 1, sizeof(int32_t));
	ix->pool_order = calloc(ix->n_pools ? (size_t)ix->n_pools : 1, sizeof(int32_t));
	if (!ix->pool_gpus || !ix->pool_empty || !ix->pool_order)
		goto oom;
	for (int i = 0; i < n; i++)
		ix->pool_gpus[ix->nodes[i].pool] += inv->nodes[i].n_gpus;
	if (!ix->scratch_occ || !ix->gbuckets || !ix->nbuckets || !ix->key_gpus ||
	    !ix->rack_first || !ix->rack_next || !ix->rack_allow || !ix->rack_avoid ||
	    !ix->rack_ten || !ix->rack_spread)
		goto oom;
	/* Rack member lists in inventory order: fill backwards, prepending. */
	for (int i = n - 1; i >= 0; i--) {
		ix->rack_next[i] = ix->rack_first[ix->nodes[i].rack];
		ix->rack_first[ix->nodes[i].rack] = i;
	}
	cs->index = ix;
	iso_cluster_state_reindex(cs);
	for (int i = 0; i < n; i++)
		usage_tenants(cs, i);
	return 0;

oom:
	ix_free(ix);
	return -ENOMEM;
}

/* ---- self-check ---- */

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			return iso_error_set(err, ISO_E_INTERNAL, NULL, __VA_ARGS__);              \
	} while (0)

int iso_cluster_state_check(const struct iso_cluster_state *cs, struct iso_error *err)
{
	const struct iso_sched_index *ix = cs->index;
	int64_t n_gbuckets, linked = 0, filed = 0;

	CHECK(ix, "cluster state has no index");
	n_gbuckets = (int64_t)ix->n_pools * ix->n_models * ix->n_keys;
	for (int ni = 0; ni < ix->n_nodes; ni++) {
		const struct iso_node *node = &cs->inv->nodes[ni];
		const struct iso_node_usage *u = &cs->usage[ni];
		const struct ix_node *xn = &ix->nodes[ni];
		int empty = 0, members = 0;

		CHECK(ix_strmap_find(&ix->node_names, node->name) >= 0, "node %s not hashed",
		      node->name);
		for (int j = 0; j < node->n_gpus; j++) {
			const struct ix_gpu *x = &ix->gpus[xn->gpu_base + j];
			bool e = iso_gpu_occupancy_empty(node->gpus[j].model, &u->gpus[j]);

			CHECK(x->empty == e, "node %s GPU %d: empty flag", node->name, j);
			empty += e;
		}
		CHECK(xn->n_empty == empty, "node %s: %d empty GPUs counted, %d real", node->name,
		      xn->n_empty, empty);
		CHECK(xn->nbucket == node_bucket_of(cs, ni), "node %s in the wrong node bucket",
		      node->name);
		for (int j = 0; j < node->n_gpus; j++) {
			const struct ix_gpu *x = &ix->gpus[xn->gpu_base + j];
			CHECK(x->bucket == gpu_bucket_of(cs, ni, j), "node %s GPU %d in bucket %d",
			      node->name, j, x->bucket);
			filed += x->bucket >= 0;
		}
		for (int t = 0; t < xn->ten.n; t++) {
			CHECK(xn->ten.t[t].members > 0, "node %s: tenant with no members",
			      node->name);
			members += xn->ten.t[t].members;
		}
		CHECK(members == u->members, "node %s: tenants hold %d members, usage %d",
		      node->name, members, u->members);
		CHECK(u->tenants == xn->ten.n && u->vfs_used == (xn->vfs ? xn->ten.n : 0),
		      "node %s: tenants/vfs_used", node->name);
		CHECK(xn->ten.n <= xn->vf_limit, "node %s: %d tenants over the limit %d",
		      node->name, xn->ten.n, xn->vf_limit);
	}
	for (int64_t b = 0; b < n_gbuckets; b++) {
		int32_t prev = -1;
		for (int32_t g = ix->gbuckets[b]; g >= 0; g = ix->gpus[g].next) {
			CHECK(g < ix->n_gpus && ix->gpus[g].bucket == b && ix->gpus[g].prev == prev,
			      "GPU bucket %lld broken", (long long)b);
			CHECK(++linked <= ix->n_gpus, "GPU bucket %lld loops", (long long)b);
			prev = g;
		}
	}
	CHECK(linked == filed, "%lld GPUs linked, %lld filed", (long long)linked, (long long)filed);
	for (int mi = 0; mi < ix->n_models; mi++)
		for (int key = 0; key < ix->n_keys; key++) {
			int n = 0;
			for (int pl = 0; pl < ix->n_pools; pl++)
				for (int32_t g = ix->gbuckets[ix_gbucket_id(ix, pl, mi, key)];
				     g >= 0; g = ix->gpus[g].next)
					n++;
			CHECK(n == ix->key_gpus[(int64_t)mi * ix->n_keys + key],
			      "model %d key %d: %d GPUs counted, %d linked", mi, key,
			      ix->key_gpus[(int64_t)mi * ix->n_keys + key], n);
		}
	for (int pl = 0; pl < ix->n_pools; pl++) {
		int empty = 0;
		for (int ni = 0; ni < ix->n_nodes; ni++)
			if (ix->nodes[ni].pool == pl)
				empty += ix->nodes[ni].n_empty;
		CHECK(empty == ix->pool_empty[pl], "pool %d: %d empty GPUs counted, %d real", pl,
		      ix->pool_empty[pl], empty);
	}
	for (int mi = 0; mi < ix->n_models; mi++) {
		int gpus = 0, empty = 0;
		for (int g = 0; g < ix->n_gpus; g++) {
			const struct ix_gpu *x = &ix->gpus[g];
			if (x->model == mi && cs->inv->nodes[x->node].gpus[x->pos].mig_enabled) {
				gpus++;
				empty += x->empty;
			}
		}
		CHECK(gpus == ix->models[mi].mig_gpus && empty == ix->models[mi].mig_empty,
		      "model %d: %d MIG GPUs and %d empty counted, %d and %d real", mi,
		      ix->models[mi].mig_gpus, ix->models[mi].mig_empty, gpus, empty);
	}
	linked = 0;
	for (int64_t b = 0; b < (int64_t)ix->n_pools * (ix->gmax + 2); b++) {
		int32_t prev = -1;
		for (int32_t ni = ix->nbuckets[b]; ni >= 0; ni = ix->nodes[ni].next) {
			CHECK(ni < ix->n_nodes && ix->nodes[ni].nbucket == b &&
			          ix->nodes[ni].prev == prev,
			      "node bucket %lld broken", (long long)b);
			CHECK(++linked <= ix->n_nodes, "node bucket %lld loops", (long long)b);
			prev = ni;
		}
	}
	CHECK(linked == ix->n_nodes, "%lld of %d nodes in node buckets", (long long)linked,
	      ix->n_nodes);
	return 0;
}

/* shape.c: what one member of an allocation asks for, checked against the
 * inventory before anything is placed: is the request well formed (errors name
 * the API request field), and could it ever fit on the empty cluster (the
 * difference between "pending" and "422 unsatisfiable"). */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "sched/internal.h"

#define SHAPE_GPU_COUNT_MAX 64

static bool inventory_has_model(const struct iso_inventory *inv, const struct iso_gpu_model *m)
{
	for (int i = 0; i < inv->n_nodes; i++)
		for (int j = 0; j < inv->nodes[i].n_gpus; j++)
			if (inv->nodes[i].gpus[j].model == m)
				return true;
	return false;
}

static bool inventory_has_pool(const struct iso_inventory *inv, const char *pool)
{
	for (int i = 0; i < inv->n_pools; i++)
		if (strcmp(inv->pools[i].name, pool) == 0)
			return true;
	for (int i = 0; i < inv->n_nodes; i++)
		if (strcmp(inv->nodes[i].pool, pool) == 0)
			return true;
	return false;
}

/* Does the profile exist on some model present in the inventory (on `only`
 * when it is not NULL)? */
static bool inventory_has_profile(const struct iso_inventory *inv, const char *profile,
                                  const struct iso_gpu_model *only)
{
	for (int i = 0; i < inv->n_nodes; i++)
		for (int j = 0; j < inv->nodes[i].n_gpus; j++) {
			const struct iso_gpu_model *m = inv->nodes[i].gpus[j].model;
			if (m && (!only || m == only) && iso_mig_profile_find(m, profile))
				return true;
		}
	return false;
}

int iso_shape_validate(const struct iso_shape *shape, const struct iso_inventory *inv,
                       struct iso_error *err)
{
	const struct iso_gpu_model *model = NULL;

	if (shape->gpu_count < 0 || shape->gpu_count > SHAPE_GPU_COUNT_MAX)
		return iso_error_set(err, ISO_E_INVALID, "gpus.count", "must be 0-%d, got %d",
		                     SHAPE_GPU_COUNT_MAX, shape->gpu_count);
	if (shape->gpu_count == 0) {
		if (shape->whole || shape->profile[0] != '\0' || shape->gpu_model[0] != '\0')
			return iso_error_set(err, ISO_E_INVALID, "gpus.count",
			                     "must be 1-%d when GPUs are requested",
			                     SHAPE_GPU_COUNT_MAX);
	} else {
		if (shape->whole && shape->profile[0] != '\0')
			return iso_error_set(err, ISO_E_INVALID, "gpus.whole",
			                     "give either gpus.profile or gpus.whole, not both");
		if (!shape->whole && shape->profile[0] == '\0')
			return iso_error_set(err, ISO_E_INVALID, "gpus.profile",
			                     "one of gpus.profile or gpus.whole: true is required");
		if (shape->gpu_model[0] != '\0') {
			model = iso_gpu_model_find(shape->gpu_model);
			if (!model)
				return iso_error_set(err, ISO_E_INVALID, "gpus.model",
				                     "unknown GPU model '%s'", shape->gpu_model);
			if (!inventory_has_model(inv, model))
				return iso_error_set(err, ISO_E_INVALID, "gpus.model",
				                     "no %s GPU in the inventory", model->name);
		}
		if (!shape->whole && !inventory_has_profile(inv, shape->profile, model)) {
			if (model)
				return iso_error_set(err, ISO_E_INVALID, "gpus.profile",
				                     "%s has no MIG profile '%s'", model->name,
				                     shape->profile);
			return iso_error_set(err, ISO_E_INVALID, "gpus.profile",
			                     "no GPU model in the inventory has MIG profile '%s'",
			                     shape->profile);
		}
	}
	if (shape->cpus < 0)
		return iso_error_set(err, ISO_E_INVALID, "cpus", "must be >= 0, got %d",
		                     shape->cpus);
	if (shape->memory_mib < 0)
		return iso_error_set(err, ISO_E_INVALID, "memory_mib", "must be >= 0, got %lld",
		                     (long long)shape->memory_mib);
	if (shape->pool[0] != '\0' && !inventory_has_pool(inv, shape->pool))
		return iso_error_set(err, ISO_E_INVALID, "pool", "unknown pool '%s'", shape->pool);
	return 0;
}

/* How many GPUs (whole) or instances of the shape's profile the node's GPUs
 * hold when empty, counting no further than `limit`. Packing one profile
 * alone greedily reaches each GPU's maximum, so this is exact. */
static int node_gpu_units(const struct iso_node *node, const struct iso_shape *shape, int limit)
{
	int n = 0;

	for (int j = 0; j < node->n_gpus && n < limit; j++) {
		const struct iso_gpu *g = &node->gpus[j];
		const struct iso_mig_profile *p;
		struct iso_gpu_occupancy o;
		int start;

		if (shape->whole) {
			if (iso_sched_gpu_model_ok(g, shape))
				n++;
			continue;
		}
		p = iso_sched_gpu_profile(g, shape);
		if (!p)
			continue;
		iso_gpu_occupancy_init(&o, g->model);
		while (n < limit && (start = iso_mig_first_start(g->model, &o, p)) >= 0) {
			iso_mig_take(g->model, &o, p, start);
			n++;
		}
	}
	return n;
}

/* Members of the shape one empty node holds, no more than `limit`. A member's
 * GPUs may sit on any GPUs of its node, so GPU units divide evenly. */
int iso_shape_node_members(const struct iso_node *node, const struct iso_shape *shape, int limit)
{
	int64_t n = limit;

	if (!iso_sched_node_in_pool(node, shape))
		return 0;
	if (shape->cpus > 0 && node->cpus / shape->cpus < n)
		n = node->cpus / shape->cpus;
	if (shape->memory_mib > 0 && node->memory_mib / shape->memory_mib < n)
		n = node->memory_mib / shape->memory_mib;
	if (shape->gpu_count > 0 && n > 0) {
		int64_t units = node_gpu_units(node, shape, (int)(n * shape->gpu_count));
		if (units / shape->gpu_count < n)
			n = units / shape->gpu_count;
	}
	return (int)n;
}

int iso_shape_max_members(const struct iso_shape *shape, const struct iso_inventory *inv, int limit)
{
	int n = 0;

	for (int i = 0; i < inv->n_nodes && n < limit; i++)
		n += iso_shape_node_members(&inv->nodes[i], shape, limit - n);
	return n;
}

/* ---- requests by size ---- */

#define RESOLVE_MODELS_MAX 32

/* The models of MIG-enabled GPUs that the shape allows (model, pool), in
 * inventory order, without repeats. */
static int eligible_models(const struct iso_shape *s, const struct iso_inventory *inv,
                           const struct iso_gpu_model **out)
{
	int n = 0;

	for (int i = 0; i < inv->n_nodes; i++) {
		if (!iso_sched_node_in_pool(&inv->nodes[i], s))
			continue;
		for (int j = 0; j < inv->nodes[i].n_gpus; j++) {
			const struct iso_gpu *g = &inv->nodes[i].gpus[j];
			bool seen = false;

			if (!g->mig_enabled || !iso_sched_gpu_model_ok(g, s))
				continue;
			for (int k = 0; k < n && !seen; k++)
				seen = out[k] == g->model;
			if (!seen && n < RESOLVE_MODELS_MAX)
				out[n++] = g->model;
		}
	}
	return n;
}

static bool covers(const struct iso_mig_profile *p, double min_gib, int min_compute)
{
	return p->memory_gib >= min_gib && p->compute >= min_compute;
}

/* Is `a` a better answer than `b`? Non-"+me" first, then fewest memory
 * slices, fewest compute slices, least memory. */
static bool better(const struct iso_mig_profile *a, const struct iso_mig_profile *b)
{
	if (a->media_engine != b->media_engine)
		return !a->media_engine;
	if (a->width != b->width)
		return a->width < b->width;
	if (a->compute != b->compute)
		return a->compute < b->compute;
	return a->memory_gib < b->memory_gib;
}

int iso_shape_resolve(const struct iso_shape *in, const struct iso_inventory *inv, double min_gib,
                      int min_compute, struct iso_shape *out, struct iso_error *err)
{
	const struct iso_gpu_model *models[RESOLVE_MODELS_MAX];
	const struct iso_mig_profile *best = NULL;
	double most_gib = 0;
	bool memory_covered = false;
	int n;

	if (!isfinite(min_gib) || min_gib < 0)
		return iso_error_set(err, ISO_E_INVALID, "gpus.memory_gib",
		                     "must be a number >= 0");
	if (min_compute < 0)
		return iso_error_set(err, ISO_E_INVALID, "gpus.compute", "must be >= 0, got %d",
		                     min_compute);
	n = eligible_models(in, inv, models);
	if (n == 0)
		return iso_error_set(err, ISO_E_CAPACITY, "gpus.memory_gib",
		                     "no MIG-enabled GPU in the inventory%s%s%s%s can serve a "
		                     "request by size",
		                     in->gpu_model[0] ? " of model " : "", in->gpu_model,
		                     in->pool[0] ? " in pool " : "", in->pool);
	/* A name qualifies when it covers on every eligible model that has it,
	 * so that the placer may use any of them. */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < models[i]->n_profiles && j < ISO_MIG_MAX_PROFILES; j++) {
			const struct iso_mig_profile *p = &models[i]->profiles[j];
			bool everywhere = true;

			if (p->memory_gib > most_gib)
				most_gib = p->memory_gib;
			memory_covered |= p->memory_gib >= min_gib;
			if (!covers(p, min_gib, min_compute))
				continue;
			for (int k = 0; k < n && everywhere; k++) {
				const struct iso_mig_profile *q =
				    iso_mig_profile_find(models[k], p->name);
				everywhere = !q || covers(q, min_gib, min_compute);
			}
			if (everywhere && (!best || better(p, best)))
				best = p;
		}
	if (!best && !memory_covered)
		return iso_error_set(err, ISO_E_CAPACITY, "gpus.memory_gib",
		                     "no MIG profile of an eligible GPU has %g GiB (the largest "
		                     "has %g); ask for whole GPUs",
		                     min_gib, most_gib);
	if (!best)
		return iso_error_set(err, ISO_E_CAPACITY, "gpus.compute",
		                     "no MIG profile of an eligible GPU has %g GiB with %d compute "
		                     "slices",
		                     min_gib, min_compute);
	if (out != in)
		*out = *in;
	out->whole = false;
	iso_strlcpy(out->profile, best->name, sizeof(out->profile));
	return 0;
}

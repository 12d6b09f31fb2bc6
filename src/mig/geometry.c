/* geometry.c: the occupancy rules of one MIG GPU. Everything that decides
 * whether a profile instance fits at a memory slice lives here (overlap,
 * allowed starts, max count, compute slices, the single media-engine slot),
 * so schedulers and validators never re-derive them. Pure computation. */
#include <string.h>

#include "isostack/mig.h"

/* Index of `p` in m->profiles, or -1 when `p` is not one of m's profiles
 * (compared by address: counts are kept per profile of this model). */
static int profile_index(const struct iso_gpu_model *m, const struct iso_mig_profile *p)
{
	for (int i = 0; i < m->n_profiles && i < ISO_MIG_MAX_PROFILES; i++)
		if (&m->profiles[i] == p)
			return i;
	return -1;
}

void iso_gpu_occupancy_init(struct iso_gpu_occupancy *o, const struct iso_gpu_model *m)
{
	memset(o, 0, sizeof(*o));
	o->free_mask = m ? iso_mig_full_mask(m) : 0;
}

bool iso_gpu_occupancy_empty(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o)
{
	if (!m || o->whole || o->compute_used != 0 || o->media_engine_used ||
	    o->free_mask != iso_mig_full_mask(m))
		return false;
	for (int i = 0; i < ISO_MIG_MAX_PROFILES; i++)
		if (o->count[i])
			return false;
	return true;
}

bool iso_mig_fits_at(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o,
                     const struct iso_mig_profile *p, int start)
{
	int idx;
	uint8_t span;

	if (!m || !p || o->whole)
		return false;
	idx = profile_index(m, p);
	if (idx < 0)
		return false;
	if (start < 0 || start >= m->memory_slices || !((p->starts >> start) & 1u))
		return false;
	if (p->width < 1 || start + p->width > m->memory_slices)
		return false;
	span = iso_mig_span(start, p->width);
	if ((o->free_mask & span) != span)
		return false;
	if (o->count[idx] >= p->max_count)
		return false;
	if (o->compute_used + p->compute > m->compute_slices)
		return false;
	if (p->media_engine && o->media_engine_used)
		return false;
	return true;
}

int iso_mig_first_start(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o,
                        const struct iso_mig_profile *p)
{
	if (!m)
		return -1;
	for (int s = 0; s < m->memory_slices; s++)
		if (iso_mig_fits_at(m, o, p, s))
			return s;
	return -1;
}

void iso_mig_take(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o,
                  const struct iso_mig_profile *p, int start)
{
	int idx = profile_index(m, p);

	if (idx < 0)
		return;
	o->free_mask &= (uint8_t)~iso_mig_span(start, p->width);
	o->compute_used += p->compute;
	o->count[idx]++;
	if (p->media_engine)
		o->media_engine_used = true;
}

void iso_mig_give(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o,
                  const struct iso_mig_profile *p, int start)
{
	int idx = profile_index(m, p);

	if (idx < 0)
		return;
	o->free_mask |= iso_mig_span(start, p->width);
	o->compute_used -= p->compute;
	o->count[idx]--;
	if (p->media_engine)
		o->media_engine_used = false;
}

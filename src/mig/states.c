/* states.c: the state space of one MIG GPU, tabulated. A placement engine
 * that keys GPUs by (free-mask, media-engine slot) needs, per state and
 * profile, where the profile fits, how many more instances fit, and which
 * free slices the profile can never use there (its holes). These depend
 * only on the model's profile table, so they are computed once per model
 * from the same rules as iso_mig_fits_at() and never re-derived. */
#include <string.h>

#include "isostack/mig.h"

/* Could the profile ever hold an instance on this model? */
static bool profile_usable(const struct iso_gpu_model *m, const struct iso_mig_profile *p)
{
	return p->width >= 1 && p->width <= m->memory_slices && p->max_count >= 1 &&
	       p->compute >= 0 && p->compute <= m->compute_slices;
}

/* Starts where `p` fits in `state`, by memory and the media-engine slot. */
static uint8_t fits_of(const struct iso_gpu_model *m, const struct iso_mig_profile *p, int state)
{
	uint8_t fits = 0;

	if (!profile_usable(m, p) || (p->media_engine && (state & ISO_MIG_STATE_ME)))
		return 0;
	for (int s = 0; s + p->width <= m->memory_slices; s++) {
		uint8_t span = iso_mig_span(s, p->width);
		if (((p->starts >> s) & 1u) && (state & span) == span)
			fits |= (uint8_t)(1u << s);
	}
	return fits;
}

/* Instances of `p` that memory alone admits in `state`: lowest start first,
 * which is maximal for intervals of equal width. */
static int units_of(const struct iso_gpu_model *m, const struct iso_mig_profile *p, int state)
{
	int n = 0;

	for (;;) {
		uint8_t f = fits_of(m, p, state);
		if (!f)
			return n;
		state = iso_mig_state_after(state, p, __builtin_ctz(f));
		n++;
	}
}

/* The most compute slices that non-overlapping placements inside the free
 * slices of `state` use (the media-engine slot and max counts aside, so an
 * upper bound): an interval packing, slice by slice from the top. */
static int most_compute(const struct iso_gpu_model *m, int state)
{
	int best[ISO_MIG_MAX_SLICES + 1] = {0};

	for (int i = m->memory_slices - 1; i >= 0; i--) {
		best[i] = best[i + 1];
		for (int j = 0; j < m->n_profiles; j++) {
			const struct iso_mig_profile *p = &m->profiles[j];
			uint8_t span;

			if (!profile_usable(m, p) || !((p->starts >> i) & 1u) ||
			    i + p->width > m->memory_slices)
				continue;
			span = iso_mig_span(i, p->width);
			if ((state & span) == span && p->compute + best[i + p->width] > best[i])
				best[i] = p->compute + best[i + p->width];
		}
	}
	return best[0];
}

static bool is_exact(const struct iso_gpu_model *m)
{
	int empty = iso_mig_state_empty(m);

	if (most_compute(m, empty) > m->compute_slices)
		return false;
	for (int j = 0; j < m->n_profiles; j++) {
		const struct iso_mig_profile *p = &m->profiles[j];
		if (profile_usable(m, p) && !p->media_engine &&
		    p->max_count < units_of(m, p, empty))
			return false;
	}
	return true;
}

void iso_mig_state_table_build(const struct iso_gpu_model *m, struct iso_mig_state_table *t)
{
	uint16_t queue[ISO_MIG_STATES];
	int head = 0, tail = 0;
	int n_profiles =
	    m->n_profiles < ISO_MIG_MAX_PROFILES ? m->n_profiles : ISO_MIG_MAX_PROFILES;

	memset(t, 0, sizeof(*t));
	t->model = m;
	t->exact = is_exact(m);
	for (int k = 0; k < ISO_MIG_STATES; k++) {
		uint8_t free = (uint8_t)(k & iso_mig_full_mask(m));
		int most;

		if ((k & 0xff) != free)
			continue; /* names slices the model does not have */
		for (int j = 0; j < n_profiles; j++) {
			const struct iso_mig_profile *p = &m->profiles[j];
			uint8_t cover = 0, f = fits_of(m, p, k);
			int units = units_of(m, p, k);

			for (int s = 0; s < m->memory_slices; s++)
				if ((f >> s) & 1u)
					cover |= iso_mig_span(s, p->width);
			if (p->media_engine && units > 1)
				units = 1;
			if (units > p->max_count)
				units = p->max_count;
			t->fits[k][j] = f;
			t->units[k][j] = (uint8_t)units;
			t->unusable[k][j] = (uint8_t)__builtin_popcount(free & (uint8_t)~cover);
		}
		most = most_compute(m, k);
		t->potential[k] = (uint8_t)(most < m->compute_slices ? most : m->compute_slices);
	}

	/* Breadth-first from the empty GPU over every fitting placement. */
	queue[tail++] = (uint16_t)iso_mig_state_empty(m);
	t->is_reachable[queue[0]] = true;
	while (head < tail) {
		int k = queue[head++];
		for (int j = 0; j < n_profiles; j++)
			for (int s = 0; s < m->memory_slices; s++) {
				int next;
				if (!((t->fits[k][j] >> s) & 1u))
					continue;
				next = iso_mig_state_after(k, &m->profiles[j], s);
				if (!t->is_reachable[next]) {
					t->is_reachable[next] = true;
					queue[tail++] = (uint16_t)next;
				}
			}
	}
	for (int k = 0; k < ISO_MIG_STATES; k++)
		if (t->is_reachable[k])
			t->reachable[t->n_reachable++] = (uint16_t)k;
}

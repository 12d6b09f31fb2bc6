/* layouts.c: the maximal MIG layouts of a GPU model, enumerated from the
 * geometry rules rather than copied from a table: every set of instances
 * that fits together (iso_mig_fits_at) and to which no further instance of
 * the allowed profiles can be added. A Slurm-style cluster partitions each
 * GPU into one of these; the static policy's oracle chooses among them. On
 * the 8-slice models this gives the 19 layouts of 1g/2g/3g/4g/7g and the 78
 * with the 1g double-memory profile that mig.md counts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/mig.h"
#include "isostack/util.h"

uint32_t iso_mig_profiles_plain(const struct iso_gpu_model *m)
{
	uint32_t mask = 0;

	for (int i = 0; i < m->n_profiles && i < ISO_MIG_MAX_PROFILES; i++)
		if (!m->profiles[i].media_engine)
			mask |= 1u << i;
	return mask;
}

struct enum_ctx {
	const struct iso_gpu_model *m;
	struct iso_mig_instance cand[ISO_MIG_MAX_PROFILES * ISO_MIG_MAX_SLICES];
	int n_cand;
	struct iso_mig_layout cur;
	struct iso_mig_layout *out;
	int n, cap;
	int r;
};

static bool maximal(const struct enum_ctx *c, const struct iso_gpu_occupancy *o)
{
	for (int i = 0; i < c->n_cand; i++)
		if (iso_mig_fits_at(c->m, o, c->cand[i].profile, c->cand[i].start))
			return false;
	return true;
}

static int cmp_inst(const void *a, const void *b)
{
	const struct iso_mig_instance *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

static void emit(struct enum_ctx *c)
{
	struct iso_mig_layout *l;

	if (c->n == c->cap) {
		int nc = c->cap ? c->cap * 2 : 32;
		void *nv = realloc(c->out, (size_t)nc * sizeof(*c->out));
		if (!nv) {
			c->r = -ENOMEM;
			return;
		}
		c->out = nv;
		c->cap = nc;
	}
	l = &c->out[c->n++];
	*l = c->cur;
	qsort(l->inst, (size_t)l->n, sizeof(l->inst[0]), cmp_inst);
}

/* Candidates from index i on are either taken or left; a set is reported
 * once, at the end, when nothing more fits. */
static void walk(struct enum_ctx *c, int i, struct iso_gpu_occupancy *o)
{
	if (c->r < 0)
		return;
	if (i == c->n_cand) {
		if (c->cur.n > 0 && maximal(c, o))
			emit(c);
		return;
	}
	if (c->cur.n < ISO_MIG_MAX_SLICES &&
	    iso_mig_fits_at(c->m, o, c->cand[i].profile, c->cand[i].start)) {
		iso_mig_take(c->m, o, c->cand[i].profile, c->cand[i].start);
		c->cur.inst[c->cur.n++] = c->cand[i];
		walk(c, i + 1, o);
		c->cur.n--;
		iso_mig_give(c->m, o, c->cand[i].profile, c->cand[i].start);
	}
	walk(c, i + 1, o);
}

int iso_mig_layouts_maximal(const struct iso_gpu_model *m, uint32_t profiles,
                            struct iso_mig_layout **out, int *n)
{
	_cleanup_free_ struct enum_ctx *c = calloc(1, sizeof(*c));
	struct iso_gpu_occupancy o;

	*out = NULL;
	*n = 0;
	if (!c)
		return -ENOMEM;
	if (!m)
		return -EINVAL;
	c->m = m;
	for (int j = 0; j < m->n_profiles && j < ISO_MIG_MAX_PROFILES; j++) {
		const struct iso_mig_profile *p = &m->profiles[j];
		if (!((profiles >> j) & 1u))
			continue;
		for (int s = 0; s + p->width <= m->memory_slices; s++)
			if ((p->starts >> s) & 1u)
				c->cand[c->n_cand++] = (struct iso_mig_instance){p, s};
	}
	iso_gpu_occupancy_init(&o, m);
	walk(c, 0, &o);
	if (c->r < 0) {
		free(c->out);
		return c->r;
	}
	*out = c->out;
	*n = c->n;
	return 0;
}

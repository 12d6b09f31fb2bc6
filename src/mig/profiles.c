/* profiles.c: the built-in MIG profile tables, one per GPU model, as data.
 * Every number here comes from docs/reference-mig.md; the geometry of a
 * profile kind (compute, width, starts, max count) is written once below and
 * only names, memory and SM counts vary between models. */
#include <math.h>
#include <strings.h>

#include "isostack/mig.h"
#include "isostack/util.h"

/* Allowed starts as masks of memory slices (bit i: may start at slice i). */
#define STARTS_0_TO_6 0x7f /* {0,1,2,3,4,5,6} */
#define STARTS_EVEN_8 0x55 /* {0,2,4,6} */
#define STARTS_0_2_4  0x15 /* {0,2,4} */
#define STARTS_0_4    0x11 /* {0,4} */
#define STARTS_0      0x01 /* {0} */
#define STARTS_0_TO_3 0x0f /* {0,1,2,3} (A30) */
#define STARTS_0_2    0x05 /* {0,2} (A30) */

#define PROFILE(n, id, c, w, max, st, me, gib, sm)                                                 \
	{                                                                                          \
		.name = (n), .nvml_id = (id), .compute = (c), .width = (w), .max_count = (max),    \
		.starts = (st), .media_engine = (me), .memory_gib = (gib), .sms = (sm)             \
	}

/* The seven profiles of every 8-memory-slice GPU (mig.md, "Profiles, 8-memory-slice GPUs"):
 * nvidia-smi id, compute slices, memory slices, max count, starts. */
#define G1(n, gib, sm)   PROFILE(n, 19, 1, 1, 7, STARTS_0_TO_6, false, gib, sm)
#define G1ME(n, gib, sm) PROFILE(n, 20, 1, 1, 1, STARTS_0_TO_6, true, gib, sm)
#define G1DM(n, gib, sm) PROFILE(n, 15, 1, 2, 4, STARTS_EVEN_8, false, gib, sm)
#define G2(n, gib, sm)   PROFILE(n, 14, 2, 2, 3, STARTS_0_2_4, false, gib, sm)
#define G3(n, gib, sm)   PROFILE(n, 9, 3, 4, 2, STARTS_0_4, false, gib, sm)
#define G4(n, gib, sm)   PROFILE(n, 5, 4, 4, 1, STARTS_0, false, gib, sm)
#define G7(n, gib, sm)   PROFILE(n, 0, 7, 8, 1, STARTS_0, false, gib, sm)

/* Memory per profile: the H100-80 row gives usable GiB; elsewhere the
 * reference gives only the name, so the name's figure is used. SM counts are
 * given for H100 and for the A100 3g.20gb only; 0 means unknown. */
#define MODEL(key, prod, mem_slices, compute_sl, gib, inf, ...)                                    \
	{                                                                                          \
		.name = (key), .product = (prod), .memory_slices = (mem_slices),                   \
		.compute_slices = (compute_sl), .memory_gib = (gib), .inferred = (inf),            \
		.n_profiles = (int)(sizeof((struct iso_mig_profile[]){__VA_ARGS__}) /              \
		                    sizeof(struct iso_mig_profile)),                               \
		.profiles = {                                                                      \
			__VA_ARGS__                                                                \
		}                                                                                  \
	}

/* "inferred" follows the reference's marks: A100-40 and H100-80/94 placements
 * are confirmed [C]; A100-80 "same family [I]", H200 "placements [I]", B200
 * "[I/U] (needs driver >= R570.133.20)". */
/* clang-format off */
static const struct iso_gpu_model models[] = {
	MODEL("a100-40gb", "NVIDIA A100 40GB", 8, 7, 40, false,
	      G1("1g.5gb", 5, 0),
	      G1ME("1g.5gb+me", 5, 0),
	      G1DM("1g.10gb", 10, 0),
	      G2("2g.10gb", 10, 0),
	      G3("3g.20gb", 20, 42),
	      G4("4g.20gb", 20, 0),
	      G7("7g.40gb", 40, 0)),
	MODEL("a100-80gb", "NVIDIA A100 80GB", 8, 7, 80, true,
	      G1("1g.10gb", 10, 0),
	      G1ME("1g.10gb+me", 10, 0),
	      G1DM("1g.20gb", 20, 0),
	      G2("2g.20gb", 20, 0),
	      G3("3g.40gb", 40, 0),
	      G4("4g.40gb", 40, 0),
	      G7("7g.80gb", 80, 0)),
	MODEL("h100-80gb", "NVIDIA H100 80GB HBM3", 8, 7, 80, false,
	      G1("1g.10gb", 9.75, 16),
	      G1ME("1g.10gb+me", 9.75, 16),
	      G1DM("1g.20gb", 19.62, 26),
	      G2("2g.20gb", 19.62, 32),
	      G3("3g.40gb", 39.50, 60),
	      G4("4g.40gb", 39.50, 64),
	      G7("7g.80gb", 79.25, 132)),
	MODEL("h100-94gb", "NVIDIA H100 NVL 94GB", 8, 7, 94, false,
	      G1("1g.12gb", 12, 0),
	      G1ME("1g.12gb+me", 12, 0),
	      G1DM("1g.24gb", 24, 0),
	      G2("2g.24gb", 24, 0),
	      G3("3g.47gb", 47, 0),
	      G4("4g.47gb", 47, 0),
	      G7("7g.94gb", 94, 0)),
	MODEL("h200-141gb", "NVIDIA H200 141GB HBM3e", 8, 7, 141, true,
	      G1("1g.18gb", 18, 0),
	      G1ME("1g.18gb+me", 18, 0),
	      G1DM("1g.35gb", 35, 0),
	      G2("2g.35gb", 35, 0),
	      G3("3g.71gb", 71, 0),
	      G4("4g.71gb", 71, 0),
	      G7("7g.141gb", 141, 0)),
	MODEL("b200-180gb", "NVIDIA B200 180GB HBM3e", 8, 7, 180, true,
	      G1("1g.23gb", 23, 0),
	      G1ME("1g.23gb+me", 23, 0),
	      G1DM("1g.45gb", 45, 0),
	      G2("2g.45gb", 45, 0),
	      G3("3g.90gb", 90, 0),
	      G4("4g.90gb", 90, 0),
	      G7("7g.180gb", 180, 0)),
	/* mig.md, "A30-24GB (4 memory, 4 compute slices)"; the +me ids are [I]. */
	MODEL("a30-24gb", "NVIDIA A30 24GB", 4, 4, 24, false,
	      PROFILE("1g.6gb", 14, 1, 1, 4, STARTS_0_TO_3, false, 6, 0),
	      PROFILE("1g.6gb+me", 21, 1, 1, 1, STARTS_0_TO_3, true, 6, 0),
	      PROFILE("2g.12gb", 5, 2, 2, 2, STARTS_0_2, false, 12, 0),
	      PROFILE("2g.12gb+me", 6, 2, 2, 1, STARTS_0_2, true, 12, 0),
	      PROFILE("4g.24gb", 0, 4, 4, 1, STARTS_0, false, 24, 0)),
};
/* clang-format on */

const struct iso_gpu_model *iso_gpu_model_at(int i)
{
	if (i < 0 || (unsigned)i >= ISO_ARRAY_SIZE(models))
		return NULL;
	return &models[i];
}

const struct iso_gpu_model *iso_gpu_model_find(const char *name)
{
	if (!name)
		return NULL;
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(models); i++)
		if (strcasecmp(models[i].name, name) == 0)
			return &models[i];
	return NULL;
}

const struct iso_mig_profile *iso_mig_profile_find(const struct iso_gpu_model *m, const char *name)
{
	if (!m || !name)
		return NULL;
	for (int i = 0; i < m->n_profiles; i++)
		if (strcasecmp(m->profiles[i].name, name) == 0)
			return &m->profiles[i];
	return NULL;
}

/* Is `a` a smaller cover than `b` (fewest memory slices, then fewest
 * compute slices, then least memory; ties keep table order)? */
static bool smaller(const struct iso_mig_profile *a, const struct iso_mig_profile *b)
{
	if (a->width != b->width)
		return a->width < b->width;
	if (a->compute != b->compute)
		return a->compute < b->compute;
	return a->memory_gib < b->memory_gib;
}

const struct iso_mig_profile *iso_mig_profile_resolve(const struct iso_gpu_model *m, double min_gib,
                                                      int min_compute)
{
	const struct iso_mig_profile *best = NULL, *best_me = NULL;

	if (!m || !isfinite(min_gib) || min_gib < 0 || min_compute < 0)
		return NULL;
	for (int i = 0; i < m->n_profiles && i < ISO_MIG_MAX_PROFILES; i++) {
		const struct iso_mig_profile *p = &m->profiles[i];
		const struct iso_mig_profile **slot = p->media_engine ? &best_me : &best;

		if (p->memory_gib < min_gib || p->compute < min_compute)
			continue;
		if (!*slot || smaller(p, *slot))
			*slot = p;
	}
	return best ? best : best_me;
}

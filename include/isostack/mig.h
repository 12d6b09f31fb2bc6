/* mig.h: NVIDIA MIG geometry as data. A GPU is a mask of free memory slices
 * and a profile is (compute slices, width in memory slices, allowed starts,
 * max count, media-engine flag). Pure computation, no I/O: see
 * ../shared/reference/mig.md for the tables and their sources. */
#ifndef ISOSTACK_MIG_H
#define ISOSTACK_MIG_H

#include <stdbool.h>
#include <stdint.h>

#define ISO_MIG_MAX_SLICES   8
#define ISO_MIG_MAX_PROFILES 8

struct iso_mig_profile {
	const char *name;  /* "3g.40gb", "1g.10gb+me" */
	int nvml_id;       /* nvidia-smi profile id (query at run time on real GPUs) */
	int compute;       /* compute slices */
	int width;         /* memory slices occupied */
	int max_count;     /* max instances of this profile per GPU */
	uint8_t starts;    /* bit i set: may start at memory slice i */
	bool media_engine; /* holds the single "+me" slot */
	double memory_gib; /* usable memory */
	int sms;           /* streaming multiprocessors (0 when unknown) */
};

struct iso_gpu_model {
	const char *name;    /* inventory key: "h100-80gb" */
	const char *product; /* "NVIDIA H100 80GB HBM3" */
	int memory_slices;   /* 8, or 4 on A30 */
	int compute_slices;  /* 7, or 4 on A30 */
	double memory_gib;   /* whole-GPU memory */
	bool inferred;       /* placements inferred, not confirmed (B200) */
	int n_profiles;
	struct iso_mig_profile profiles[ISO_MIG_MAX_PROFILES];
};

/* The built-in models; NULL when unknown. Lookup is case-insensitive. */
const struct iso_gpu_model *iso_gpu_model_find(const char *name);
const struct iso_gpu_model *iso_gpu_model_at(int i); /* NULL past the end */

const struct iso_mig_profile *iso_mig_profile_find(const struct iso_gpu_model *m, const char *name);

/* Mask of memory slices a profile instance at `start` occupies. */
static inline uint8_t iso_mig_span(int start, int width)
{
	return (uint8_t)(((1u << width) - 1u) << start);
}

/* Full-GPU free mask for a model (0xff, or 0x0f on A30). */
static inline uint8_t iso_mig_full_mask(const struct iso_gpu_model *m)
{
	return (uint8_t)((1u << m->memory_slices) - 1u);
}

/* Occupancy of one GPU, enough to decide whether a profile fits. */
struct iso_gpu_occupancy {
	uint8_t free_mask; /* bit i set: memory slice i free */
	int compute_used;  /* compute slices in use */
	bool media_engine_used;
	bool whole;                          /* taken as a whole GPU (MIG not used) */
	uint8_t count[ISO_MIG_MAX_PROFILES]; /* instances per profile index */
};

void iso_gpu_occupancy_init(struct iso_gpu_occupancy *o, const struct iso_gpu_model *m);
/* True when nothing at all is in use: the GPU could be taken whole. */
bool iso_gpu_occupancy_empty(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o);

/* Lowest allowed start where `p` fits under all rules (overlap, max count,
 * compute, +me), or -1. */
int iso_mig_first_start(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o,
                        const struct iso_mig_profile *p);
bool iso_mig_fits_at(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o,
                     const struct iso_mig_profile *p, int start);
/* Apply / undo an instance. The caller has checked it fits. */
void iso_mig_take(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o,
                  const struct iso_mig_profile *p, int start);
void iso_mig_give(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o,
                  const struct iso_mig_profile *p, int start);

#endif

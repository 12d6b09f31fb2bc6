/* mig.h: NVIDIA MIG geometry as data. A GPU is a mask of free memory slices
 * and a profile is (compute slices, width in memory slices, allowed starts,
 * max count, media-engine flag). Pure computation, no I/O: see
 * docs/reference-mig.md for the tables and their sources. */
#ifndef ISOSTACK_MIG_H
#define ISOSTACK_MIG_H

#include <stdbool.h>
#include <stdint.h>
#include "isostack/util.h"

ISO_PUBLIC_BEGIN

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

/* The smallest profile of `m` with at least `min_gib` GiB of usable memory
 * (the table's memory_gib, compared exactly: H100-80's 1g.10gb holds 9.75)
 * and at least `min_compute` compute slices: fewest memory slices, then
 * fewest compute slices, then least memory, then table order. A "+me"
 * profile is chosen only when no other profile covers (with the built-in
 * tables never: each +me profile has the size of a plain one; ask for it by
 * name). NULL when nothing covers or an argument is out of range
 * (min_gib < 0 or not finite, min_compute < 0). */
const struct iso_mig_profile *iso_mig_profile_resolve(const struct iso_gpu_model *m, double min_gib,
                                                      int min_compute);

/* ---- the state space of one GPU (src/mig/states.c) ----
 * Placement engines key a MIG GPU by its free-mask and its media-engine
 * slot: 9 bits, so at most 512 states per model. On every built-in model
 * these decide exactly what fits (compute slices and max counts never bind
 * before memory does: see iso_mig_state_table.exact), so what fits, where,
 * and what remains can be tabulated once per model. */
#define ISO_MIG_STATE_ME 0x100 /* the media-engine slot is held */
#define ISO_MIG_STATES   512

static inline int iso_mig_state_of(const struct iso_gpu_occupancy *o)
{
	return o->free_mask | (o->media_engine_used ? ISO_MIG_STATE_ME : 0);
}

/* The state after taking `p` at `start` in `state` (the caller knows it fits). */
static inline int iso_mig_state_after(int state, const struct iso_mig_profile *p, int start)
{
	return (state & ~iso_mig_span(start, p->width)) | (p->media_engine ? ISO_MIG_STATE_ME : 0);
}

struct iso_mig_state_table {
	const struct iso_gpu_model *model;
	/* True when the state alone decides every fit: no profile's max_count
	 * is below what memory alone allows, and no set of non-overlapping
	 * placements needs more compute slices than the model has. All
	 * built-in models are exact; when false, `fits` and `units` are upper
	 * bounds and callers confirm with iso_mig_fits_at(). */
	bool exact;
	int n_reachable;
	uint16_t reachable[ISO_MIG_STATES]; /* states reachable from the empty GPU, ascending */
	bool is_reachable[ISO_MIG_STATES];
	/* Per state and profile index: bit s set when the profile fits at start s. */
	uint8_t fits[ISO_MIG_STATES][ISO_MIG_MAX_PROFILES];
	/* How many more instances of the profile the state holds. */
	uint8_t units[ISO_MIG_STATES][ISO_MIG_MAX_PROFILES];
	/* Free memory slices that no placement of the profile can cover in this
	 * state: its holes for that profile (slice 7 for every 1g, a lone slice
	 * for a 2g, ...). The fragmentation measure is built on this. */
	uint8_t unusable[ISO_MIG_STATES][ISO_MIG_MAX_PROFILES];
	/* The most compute slices placements in the free slices can still add.
	 * A placement of compute c from state k to k' strands
	 * potential[k] - potential[k'] - c compute slices for good (until a
	 * release): 3g.40gb at slice 0 of an empty H100 strands one, at 4 none. */
	uint8_t potential[ISO_MIG_STATES];
};

/* Fills the table for `m`. Pure computation over at most 512 states. */
void iso_mig_state_table_build(const struct iso_gpu_model *m, struct iso_mig_state_table *t);

/* The state of an empty MIG GPU of `m`. */
static inline int iso_mig_state_empty(const struct iso_gpu_model *m)
{
	return iso_mig_full_mask(m);
}

/* ---- MIG layouts: maximal sets of instances on one GPU (src/mig/layouts.c) ---- */
struct iso_mig_instance {
	const struct iso_mig_profile *profile;
	int start;
};
struct iso_mig_layout {
	int n;
	struct iso_mig_instance inst[ISO_MIG_MAX_SLICES]; /* by start */
};
/* Every layout of `m` built from the profiles whose bit is set in `profiles`
 * (bit i: m->profiles[i]) to which no further instance of those profiles can
 * be added. 19 for 1g/2g/3g/4g/7g on the 8-slice models, 78 with the 1g
 * double-memory profile (mig.md). *out is malloc'd, in a fixed order. */
int iso_mig_layouts_maximal(const struct iso_gpu_model *m, uint32_t profiles,
                            struct iso_mig_layout **out, int *n);
/* Mask of m's profiles without the "+me" ones. */
uint32_t iso_mig_profiles_plain(const struct iso_gpu_model *m);

ISO_PUBLIC_END

#endif

/* internal.h: what the files of the simulator share: a strict CSV reader
 * whose every complaint names the file, the line and the column, and the
 * prepared simulation. Private to src/sim. */
#ifndef ISOSTACK_SIM_INTERNAL_H
#define ISOSTACK_SIM_INTERNAL_H

#include "isostack/sim.h"

/* ---- CSV (csv.c) ----
 * The trace files are plain CSV: comma-separated, no quoting, one header
 * line, "\n" or "\r\n" line ends. Anything else is an error. */
#define SIM_CSV_MAX_COLS 16
#define SIM_CSV_MAX_LINE 4096

struct sim_csv {
	const char *name; /* file name for messages */
	struct iso_error *err;
	const char *p, *end;
	int line;  /* 1-based number of the current line */
	int ncols; /* header columns */
	char buf[SIM_CSV_MAX_LINE + 1];
	char *field[SIM_CSV_MAX_COLS];
	const char *col_name[SIM_CSV_MAX_COLS];
};

/* A column the caller knows: its position lands in *pos (-1: absent). */
struct sim_csv_col {
	const char *name;
	bool required;
	int *pos;
};

/* Reads the header line and maps it onto `cols`; unknown, duplicate and
 * missing required columns are errors. */
int sim_csv_header(struct sim_csv *c, const char *name, const char *text, size_t len,
                   const struct sim_csv_col *cols, int ncols, struct iso_error *err);
/* Next data line into c->field: 1, 0 at the end, or a negative errno. */
int sim_csv_next(struct sim_csv *c);
/* Strict base-10 integer of field `pos` in [min, max]. */
int sim_csv_int(struct sim_csv *c, int pos, int64_t min, int64_t max, int64_t *out);
/* Error about field `pos` (or the line when pos < 0) of the current line. */
int sim_csv_error(struct sim_csv *c, int pos, const char *fmt, ...) _printf_(3, 4);
/* Reads a whole file (at most 256 MiB) into memory; *text is malloc'd. */
int sim_read_file(const char *path, char **text, size_t *len, struct iso_error *err);

/* ---- the prepared simulation (sim.c) ---- */
struct iso_sim {
	const struct iso_sim_trace *trace; /* borrowed */
	struct iso_sim_config cfg;
	struct iso_sim_cluster cluster;
	struct iso_sim_request *req; /* per trace pod */
	int *seq;                    /* saturate: trace indexes in arrival order */
	int n_seq;
	int64_t unfit;                /* drawn but never placeable, not submitted */
	struct iso_sim_demand demand; /* the trace's, for the static oracle */
	struct iso_fgd_mix mix;       /* the trace's, for FGD (types owned) */
	struct iso_shape *mix_shapes; /* mix.types as shapes, for iso_placer_learn */
};

/* A policy ready to run on `s`: the placer and what its state needs. */
struct sim_policy {
	struct iso_placer placer;
	const struct iso_placer *use;
	struct iso_static_layout layout;
	bool has_layout;
	struct iso_fgd *fgd;
	struct iso_slurm_count slurm; /* the slurm-count policies' misses */
	bool has_slurm;
};
int sim_policy_init(struct iso_sim *s, const char *name, struct sim_policy *p,
                    struct iso_error *err);
void sim_policy_clear(struct sim_policy *p);

int sim_run_saturate(struct iso_sim *s, const struct sim_policy *p, struct iso_sim_result *res,
                     struct iso_error *err);
int sim_run_replay(struct iso_sim *s, const struct sim_policy *policy, struct iso_sim_result *res,
                   struct iso_error *err);
/* Misses the policy has counted so far (0 for a policy that chooses node
 * and slice together). */
static inline int64_t sim_policy_misses(const struct sim_policy *p)
{
	return p->has_slurm ? p->slurm.misses : 0;
}

/* Compute and memory slices held in `cs`, counted from the GPUs themselves:
 * the runs check their own bookkeeping against it. */
void sim_held_slices(const struct iso_cluster_state *cs, int64_t *compute, int64_t *memory);

/* One pod as a one-member allocation for the placer. */
void sim_alloc_init(struct iso_allocation *a, const struct iso_sim_request *r, int pod);
/* How many saturate arrivals the bounds look at for `pct` % offered demand:
 * up to and including the one that crosses it (the policy's point of the
 * curve). `bound` names the bound in the errors (ISO_E_INVALID: not saturate
 * mode, pct outside 1..max_demand). */
int sim_arrivals(const struct iso_sim *s, int pct, const char *bound, int *n,
                 struct iso_error *err);
/* A fresh cluster state for a run of `pl`, told the trace's mix when the
 * policy learns demand (the same mix FGD is built with). */
int sim_state_init(const struct iso_sim *s, const struct iso_placer *pl,
                   struct iso_cluster_state *cs, struct iso_error *err);

#endif

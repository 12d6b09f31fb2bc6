/* slurm.h: what `isoctl slurm` (cmd_slurm.c) shares with its two helpers:
 * running Slurm's own commands without a shell (slurm_exec.c) and the
 * strict parsers of their output and of the PrologSlurmctld environment
 * (slurm_parse.c, pure functions so that tests/fuzz can drive them). */
#ifndef ISOCTL_SLURM_H
#define ISOCTL_SLURM_H

#include <stddef.h>
#include <stdint.h>

#include "isostack/util.h"

#define ISOCTL_SLURM_MAX_NODES  1024        /* an allocation's members, at most */
#define ISOCTL_SLURM_MAX_OUTPUT (64u << 20) /* what a Slurm command may print */

/* ---- running a program (slurm_exec.c) ---- */
struct isoctl_proc {
	int status; /* exit status (0-255), or 128 + the signal that ended it */
	char *out;  /* all of stdout, NUL-terminated (may hold NULs itself) */
	size_t out_len;
	char err[512]; /* the start of stderr, control characters replaced */
};
void isoctl_proc_clear(struct isoctl_proc *p);

/* Runs argv (argv[0] looked up on PATH, or /bin:/usr/bin without one) with
 * this environment, stdin /dev/null, no shell; collects stdout (at most
 * ISOCTL_SLURM_MAX_OUTPUT) and the start of stderr; kills it after
 * timeout_ms. Returns 0 when it ran to its end (whatever its status), else
 * a negative errno with *err saying why (cannot start, timed out, output too
 * large). */
int isoctl_proc_run(const char *const *argv, long timeout_ms, struct isoctl_proc *p,
                    struct iso_error *err);

/* ---- parsers (slurm_parse.c); errors name `what` (the variable or command) ---- */

/* A job id: digits only, 1..4294967294 (Slurm's uint32 minus NO_VAL). */
int isoctl_slurm_parse_job_id(const char *what, const char *s, uint32_t *out,
                              struct iso_error *err);

/* SLURM_JOB_CPUS_PER_NODE, "4(x2),2": the largest count and the number of
 * nodes it covers. */
int isoctl_slurm_parse_cpus_per_node(const char *what, const char *s, long *max, size_t *nodes,
                                     struct iso_error *err);

/* A Slurm host list as SLURM_JOB_NODELIST has it ("n[1-3],gpu-a01"): only
 * the characters of node names, brackets, digits, '-' and ','; checked
 * before it is handed to scontrol. */
int isoctl_slurm_check_nodelist(const char *what, const char *s, struct iso_error *err);

/* `scontrol show hostnames LIST`: one node name a line (iso_name_valid),
 * distinct, 1..ISOCTL_SLURM_MAX_NODES. *names is one malloc'd block: free
 * it with free(). */
int isoctl_slurm_parse_hostnames(const char *out, size_t len, char ***names, size_t *n,
                                 struct iso_error *err);

/* What the prolog takes from `scontrol -o -d show job ID`. */
struct isoctl_slurm_job {
	long num_nodes;
	long num_cpus;
	long mem_mib; /* the most memory any node of the job holds (its Mem=); -1: none shown */
};

/* One line `JobId=ID JobName=NAME UserId=...`: the job `id` whose name is
 * `name` (SLURM_JOB_NAME: the name is the user's text and may hold spaces
 * and `KEY=` words, so it is skipped by its length, never searched), then
 * NumNodes=, NumCPUs= and the detail blocks `Nodes=LIST CPU_IDs=... Mem=MiB`
 * up to MinTmpDiskNode=, after which only free text follows (command,
 * comment, paths). */
int isoctl_slurm_parse_job(const char *out, size_t len, uint32_t id, const char *name,
                           struct isoctl_slurm_job *job, struct iso_error *err);

/* `squeue --json`: the ids of the jobs it lists that are not finished
 * (every state but COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL,
 * PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY; unknown states count as
 * not finished). A non-empty "errors" list is a failure: squeue 22.05
 * exits 0 with "jobs":[] and an error when slurmctld is unreachable.
 * job_state is a string (22.05) or a list of strings (23.02 on). *ids is
 * malloc'd, sorted. */
int isoctl_slurm_parse_squeue(const char *out, size_t len, uint32_t **ids, size_t *n,
                              struct iso_error *err);

#endif

/* logic.h: the SPANK plugin's logic that needs no Slurm (issue 15,
 * docs/slurm.md): its plugstack.conf arguments, the --isostack-* options'
 * values, the agent's state dir for this slurmd, the job's tenant and the
 * environment a task gets from its member. Kept apart from plugin.c (the
 * Slurm glue) so that unit tests and a fuzzer run it without slurmstepd. */
#ifndef ISOSTACK_SLURM_LOGIC_H
#define ISOSTACK_SLURM_LOGIC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "isostack/agent.h"
#include "isostack/client.h"

#define ISO_SLURM_WAIT_DEFAULT 30
#define ISO_SLURM_WAIT_MAX     3600
#define ISO_SLURM_GPUS_MAX     64

/* plugstack.conf: `required isostack.so agent_state_dir=DIR [wait=S]
 * [tenant_map=FILE] [allow_no_sandbox=1]`. */
struct iso_slurm_args {
	char agent_state_dir[PATH_MAX]; /* may hold %n (this slurmd's node name) */
	unsigned wait_s;
	char tenant_map[PATH_MAX]; /* "" none */
	bool allow_no_sandbox;     /* test clusters only (docs/slurm.md) */
};
/* Strict: each argument NAME=VALUE known, given once, valid; an error
 * names the argument ("wait: expected 0..3600 seconds"). */
int iso_slurm_args_parse(int ac, char **av, struct iso_slurm_args *out, struct iso_error *err);

/* The --isostack-* values as given (raw until checked). */
struct iso_slurm_opts {
	const char *profile, *gpus, *isolation; /* NULL: not given */
};
/* Checks the values (an error names the option: "--isostack-gpus: ...");
 * profile a MIG profile of a known GPU model, gpus 1..64, isolation
 * shared|exclusive-gpu|exclusive-node|exclusive-rack, not profile and
 * gpus both. */
int iso_slurm_opts_check(const struct iso_slurm_opts *o, struct iso_error *err);

/* DIR with %n replaced by `node` (and %% by %); any other % is refused. */
int iso_slurm_state_dir(const char *tmpl, const char *node, char *out, size_t size,
                        struct iso_error *err);

/* The job's tenant: the map's for `account`, else the account itself;
 * refused when that is no tenant name. */
int iso_slurm_tenant(const char *account, const struct iso_tenant_map *map, char *out, size_t size,
                     struct iso_error *err);

/* What the task gets (spank_setenv). */
#define ISO_SLURM_ENV_MAX 8
struct iso_slurm_env {
	size_t n;
	struct {
		const char *name;
		char value[ISO_AGENT_CUDA_MAX];
	} v[ISO_SLURM_ENV_MAX];
};
/* CUDA_VISIBLE_DEVICES (always: "" hides every GPU from a member without
 * one), UCX_IB_PKEY and OMPI_MCA_btl_openib_pkey (0x8001) with a P_Key,
 * NCCL_IB_PKEY (the index) when the table shows it, ISOSTACK_ALLOCATION. */
void iso_slurm_env_build(const struct iso_agent_member_info *mi, struct iso_slurm_env *out);
/* On a Slingshot node, after the agent admitted the job's identity to the
 * member's CXI service (iso_agent_cxi_admit): SLINGSHOT_VNIS,
 * SLINGSHOT_SVC_IDS and SLINGSHOT_DEVICES, the variables HPE's
 * switch/hpe_slingshot sets and libfabric's cxi provider reads. */
void iso_slurm_env_add_cxi(const struct iso_agent_cxi_grant *g, struct iso_slurm_env *out);

/* Whether the task of a job of `uid` joins a sandbox: 1 yes, 0 no (the
 * node's sandboxes are off and allow_no_sandbox=1), -errno refused with the
 * reason. A job of uid 0 is refused a sandbox: uid 0 owns the host's files
 * (it writes /etc without a capability), and slurmstepd's setgroups for
 * root fails once the join dropped the capabilities. */
int iso_slurm_sandbox_decide(const struct iso_agent_member_info *mi, bool allow_no_sandbox,
                             unsigned uid, struct iso_error *err);

#endif

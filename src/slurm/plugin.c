/* plugin.c: the isostack SPANK plugin (issue 15, docs/slurm.md), loaded by
 * srun/sbatch/salloc and by slurmstepd from plugstack.conf. Why it exists:
 * a Slurm job must run inside the isolation isostack made for it (its MIG
 * slices, its tenant's P_Key, its sandbox), and never without it.
 *
 * - Every context: slurm_spank_init registers --isostack-profile,
 *   --isostack-gpus and --isostack-isolation (spank_option_register, the
 *   only way that works in allocator context).
 * - Allocator and local (sbatch, salloc, srun): init_post_opt checks the
 *   plugin's arguments and the options' values (a bad one fails the
 *   submission, nothing is made) and exports them to the PrologSlurmctld
 *   (`isoctl slurm prolog`) as SPANK_ISOSTACK_* (spank_job_control_setenv).
 * - Remote (slurmstepd), task_init_privileged, as root in each task's
 *   child before it becomes the user: asks the node's agent for the job's
 *   member (tenant from SLURM_JOB_ACCOUNT, key slurm:CLUSTER:JOBID:RESTART), waiting up
 *   to `wait` s while it is not ready, on a Slingshot node has the agent
 *   admit the job's uid/gid to the member's CXI service (issue 17), sets
 *   the task's environment, and
 *   joins the member's sandbox as the job's uid/gid. Any failure returns -1:
 *   the task exits 1 and the job fails; the node is not drained.
 * No other callback is defined: a failing user_init, task_post_fork,
 * job_prolog or job_epilog drains the node.
 *
 * The options' values live in file statics: SPANK's option callbacks get
 * no user data, and each process (srun, slurmstepd) loads its own copy of
 * the plugin. Everything else is logic.c, which is tested without Slurm. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "isostack/agent.h"
#include "isostack/client.h"
#include "logic.h"

/* Only the SPANK symbols are exported; the rest of the plugin and the
 * libraries it links stay hidden (docs/architecture.md, "Libraries"). */
#pragma GCC visibility push(default)
#include <slurm/spank.h>

SPANK_PLUGIN(isostack, 1);

int slurm_spank_init(spank_t sp, int ac, char **av);
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av);
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av);
#pragma GCC visibility pop

#define OPT_PROFILE   1
#define OPT_GPUS      2
#define OPT_ISOLATION 3
#define OPT_VALUE_MAX 64

static char opt_profile[OPT_VALUE_MAX], opt_gpus[OPT_VALUE_MAX], opt_isolation[OPT_VALUE_MAX];
static bool has_profile, has_gpus, has_isolation, opt_too_long;

static int opt_cb(int val, const char *optarg, int remote)
{
	char *dst = val == OPT_PROFILE ? opt_profile : val == OPT_GPUS ? opt_gpus : opt_isolation;

	(void)remote;
	/* checked in init_post_opt, where a refusal fails the submission */
	if (!optarg || iso_strlcpy(dst, optarg, OPT_VALUE_MAX) < 0)
		opt_too_long = true;
	if (val == OPT_PROFILE)
		has_profile = true;
	else if (val == OPT_GPUS)
		has_gpus = true;
	else
		has_isolation = true;
	return 0;
}

static struct spank_option options[] = {
    {"isostack-profile", "PROFILE", "isostack: a MIG slice of this profile per node (e.g. 3g.40gb)",
     1, OPT_PROFILE, opt_cb},
    {"isostack-gpus", "N", "isostack: N whole GPUs per node", 1, OPT_GPUS, opt_cb},
    {"isostack-isolation", "CLASS", "isostack: shared|exclusive-gpu|exclusive-node|exclusive-rack",
     1, OPT_ISOLATION, opt_cb},
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	/* never fails: in the slurmd context a failure would stop slurmd */
	for (size_t i = 0; i < ISO_ARRAY_SIZE(options); i++)
		if (spank_option_register(sp, &options[i]) != ESPANK_SUCCESS)
			slurm_error("isostack: cannot register --%s", options[i].name);
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	struct iso_slurm_opts o = {has_profile ? opt_profile : NULL, has_gpus ? opt_gpus : NULL,
	                           has_isolation ? opt_isolation : NULL};
	struct iso_slurm_args args;
	struct iso_error err = {0};
	spank_context_t ctx = spank_context();

	if (ctx != S_CTX_ALLOCATOR && ctx != S_CTX_LOCAL)
		return 0;
	if (iso_slurm_args_parse(ac, av, &args, &err) < 0) {
		slurm_error("isostack: plugstack.conf: %s", err.message);
		return -1;
	}
	if (opt_too_long) {
		slurm_error("isostack: an --isostack-* value is over %d characters",
		            OPT_VALUE_MAX - 1);
		return -1;
	}
	if (iso_slurm_opts_check(&o, &err) < 0) {
		slurm_error("isostack: %s", err.message);
		return -1;
	}
	/* srun inside an allocation (SLURM_JOB_ID set) starts a step: the
	 * job's SPANK_ISOSTACK_* were set when it was submitted */
	if ((has_profile && spank_job_control_setenv(sp, "ISOSTACK_PROFILE", opt_profile, 1)) ||
	    (has_gpus && spank_job_control_setenv(sp, "ISOSTACK_GPUS", opt_gpus, 1)) ||
	    (has_isolation &&
	     spank_job_control_setenv(sp, "ISOSTACK_ISOLATION", opt_isolation, 1)) ||
	    spank_job_control_setenv(sp, "ISOSTACK", "1", 1)) {
		/* in a step of an existing job there is no job control env */
		if (!getenv("SLURM_JOB_ID")) {
			slurm_error(
			    "isostack: cannot export the --isostack-* options to the prolog");
			return -1;
		}
	}
	return 0;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	slurm_error("isostack: %s", msg);
	return -1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	struct iso_slurm_args args;
	struct iso_error err = {0};
	struct iso_tenant_map map = {0};
	_cleanup_free_ struct iso_agent_member_info *mi = calloc(1, sizeof(*mi));
	_cleanup_free_ struct iso_slurm_env *env = calloc(1, sizeof(*env));
	char node[ISO_NAME_MAX + 1] = "", account[256] = "", tenant[ISO_NAME_MAX],
	                         key[ISO_IDEM_KEY_MAX];
	char cluster[ISO_SLURM_CLUSTER_MAX + 2] = "";
	char dir[PATH_MAX];
	uint32_t jobid = 0, restart = 0;
	uid_t uid = 0;
	gid_t gid = 0;
	double deadline;
	int r;

	if (!spank_remote(sp))
		return 0;
	if (!mi || !env)
		return fail("out of memory");
	if (iso_slurm_args_parse(ac, av, &args, &err) < 0)
		return fail("plugstack.conf: %s", err.message);
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
		return fail("cannot read the job's id, uid and gid");
	/* This slurmd's node name from slurmstepd's own environment, which
	 * slurmd sets. Never the job's: a step launched from inside a batch
	 * job inherits the batch node's SLURMD_NODENAME, and its task on
	 * another node would ask that node's agent for the wrong member. */
	{
		const char *n = getenv("SLURMD_NODENAME");
		if (!n || iso_strlcpy(node, n, sizeof(node)) < 0)
			node[0] = '\0';
	}
	if (iso_slurm_state_dir(args.agent_state_dir, node, dir, sizeof(dir), &err) < 0)
		return fail("job %u: %s", jobid, err.message);
	if (spank_getenv(sp, "SLURM_JOB_ACCOUNT", account, sizeof(account)) != ESPANK_SUCCESS)
		account[0] = '\0';
	if (args.tenant_map[0] && iso_tenant_map_load(args.tenant_map, &map, &err) < 0)
		return fail("job %u: tenant_map: %s", jobid, err.message);
	r = iso_slurm_tenant(account, &map, tenant, sizeof(tenant), &err);
	iso_tenant_map_clear(&map);
	if (r < 0)
		return fail("job %u: %s", jobid, err.message);
	if (spank_get_item(sp, S_SLURM_RESTART_COUNT, &restart) != ESPANK_SUCCESS)
		return fail("job %u: cannot read the job's restart count", jobid);
	if (spank_getenv(sp, "SLURM_CLUSTER_NAME", cluster, sizeof(cluster)) != ESPANK_SUCCESS) {
		const char *c = getenv("SLURM_CLUSTER_NAME");
		if (!c || iso_strlcpy(cluster, c, sizeof(cluster)) < 0)
			cluster[0] = '\0';
	}
	if (iso_slurm_job_key(key, sizeof(key), cluster, jobid, restart, &err) < 0)
		return fail("job %u: %s", jobid, err.message);

	/* the member, waiting while the agent says "not ready yet" (or cannot
	 * be reached: an agent restarting) */
	deadline = now_s() + args.wait_s;
	for (;;) {
		memset(&err, 0, sizeof(err));
		if ((r = iso_agent_member_lookup(dir, tenant, key, mi, &err)) == 0)
			break;
		if (err.code != ISO_E_UNAVAILABLE || now_s() >= deadline)
			return fail("job %u (tenant %s, key %s) on node %s: %s%s", jobid, tenant,
			            key, node[0] ? node : "?", err.message,
			            err.code == ISO_E_UNAVAILABLE ? " (gave up after wait=)" : "");
		usleep(250 * 1000);
	}
	if ((r = iso_slurm_sandbox_decide(mi, args.allow_no_sandbox, (unsigned)uid, &err)) < 0)
		return fail("job %u, member %u of %s: %s", jobid, mi->member, mi->allocation,
		            err.message);
	iso_slurm_env_build(mi, env);
	/* a Slingshot member: its CXI service admits the job's uid and gid
	 * (the controller does not know them); without it the job's processes
	 * could not use its tenant's VNI, so a refusal fails the job */
	if (mi->has_vni) {
		struct iso_agent_cxi_grant g;
		if (iso_agent_cxi_admit(dir, tenant, mi->allocation, mi->member, (uint32_t)uid,
		                        (uint32_t)gid, &g, &err) < 0)
			return fail("job %u, member %u of %s: no CXI service for uid %u gid %u: %s",
			            jobid, mi->member, mi->allocation, (unsigned)uid, (unsigned)gid,
			            err.message);
		iso_slurm_env_add_cxi(&g, env);
	}
	for (size_t i = 0; i < env->n; i++)
		if (spank_setenv(sp, env->v[i].name, env->v[i].value, 1) != ESPANK_SUCCESS)
			return fail("job %u: cannot set %s", jobid, env->v[i].name);
	if (r == 0) {
		slurm_info("isostack: job %u runs WITHOUT a sandbox (allow_no_sandbox=1; the "
		           "node's agent runs with --sandbox off)",
		           jobid);
		return 0;
	}
	{
		struct iso_sandbox_identity id = {.set = true, .uid = uid, .gid = gid};
		if (iso_agent_sandbox_join(dir, mi->allocation, mi->member, &id, &err) < 0)
			return fail("job %u: cannot join the sandbox of member %u of %s: %s", jobid,
			            mi->member, mi->allocation, err.message);
	}
	return 0;
}

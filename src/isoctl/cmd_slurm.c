/* cmd_slurm.c: `isoctl slurm ...`, what Slurm's controller runs for
 * isostack (docs/slurm.md, "Prolog, epilog and orphans"): the
 * PrologSlurmctld that creates a job's allocation pinned to the nodes Slurm
 * chose and waits until it is active, the EpilogSlurmctld that releases it,
 * the reaper of allocations whose job is gone, and the GRES lines a site
 * declares its GPUs with. The prolog and the epilog always exit 0: a failing
 * PrologSlurmctld requeues the job (and a failing epilog helps nobody); the
 * job fails in the SPANK plugin instead, with the reason in its comment. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "isoctl/isoctl.h"
#include "isoctl/slurm.h"
#include "isostack/client.h"

#define NAME_PREFIX        "slurm-"
#define COMMENT_MAX        480   /* bytes of reason in the job's comment */
#define SLURM_CMD_TIMEOUT  30000 /* ms, at most, for one scontrol or squeue */
#define PROLOG_TIMEOUT_DEF 60

enum { OPT_TENANT_MAP, OPT_TIMEOUT, OPT_EVERY, OPT_CLUSTER, NUM_FLAGS };

static const char usage_slurm[] =
    "Usage: isoctl slurm SUBCOMMAND ...\n"
    "\n"
    "Slurm integration (docs/slurm.md), run by Slurm's controller:\n"
    "  prolog [--tenant-map FILE] [--timeout S]  PrologSlurmctld: create the job's\n"
    "                          allocation and wait until it is active; always exit 0\n"
    "  epilog [--tenant-map FILE]  EpilogSlurmctld: release it; always exit 0\n"
    "  reap [--cluster NAME] [--every S]  release allocations whose Slurm job is gone\n"
    "  gres                    the slurm.conf and gres.conf lines of the GPU nodes\n"
    "Run 'isoctl slurm SUBCOMMAND --help' for details, 'isoctl --help' for global flags.\n";

static const char *program(const char *env, const char *dflt)
{
	const char *v = getenv(env);

	return v && v[0] ? v : dflt;
}

static const char *env_value(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? v : NULL;
}

/* Runs a Slurm command and requires exit status 0. */
static int run_slurm(const char *const *argv, long timeout_ms, struct isoctl_proc *p,
                     struct iso_error *err)
{
	int r = isoctl_proc_run(argv, timeout_ms, p, err);

	if (r < 0)
		return r;
	if (p->status != 0) {
		iso_error_set(err, ISO_E_UNAVAILABLE, argv[0], "%s %s failed (exit %d)%s%s",
		              argv[0], argv[1] ? argv[1] : "", p->status, p->err[0] ? ": " : "",
		              p->err);
		isoctl_proc_clear(p);
		return -EIO;
	}
	return 0;
}

/* The tenant of a job: its account (lower case already, Slurm's doing),
 * renamed by the map when it names the account. */
static int job_tenant(const char *map_path, char *out, size_t size, struct iso_error *err)
{
	const char *account = env_value("SLURM_JOB_ACCOUNT");
	_cleanup_(iso_tenant_map_clear) struct iso_tenant_map map = {0};
	const char *tenant;
	int r;

	if (!account)
		return iso_error_set(err, ISO_E_INVALID, "SLURM_JOB_ACCOUNT",
		                     "SLURM_JOB_ACCOUNT is not set");
	tenant = account;
	if (map_path) {
		r = iso_tenant_map_load(map_path, &map, err);
		if (r < 0)
			return r;
		if (iso_tenant_map_lookup(&map, account))
			tenant = iso_tenant_map_lookup(&map, account);
	}
	if (!iso_name_valid(tenant))
		return iso_error_set(
		    err, ISO_E_INVALID, "SLURM_JOB_ACCOUNT",
		    "SLURM_JOB_ACCOUNT: '%.64s' is not a tenant name; map it to one "
		    "with --tenant-map",
		    tenant);
	iso_strlcpy(out, tenant, size);
	return 0;
}

static bool live_state(const char *s)
{
	static const char *const live[] = {"pending", "placed", "provisioning", "active"};

	for (size_t i = 0; s && i < ISO_ARRAY_SIZE(live); i++)
		if (strcmp(s, live[i]) == 0)
			return true;
	return false;
}

/* DELETE /v1/allocations/ID. Returns an exit code. */
static int release(struct isoctl *ctx, const char *id, struct iso_error *why)
{
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = isoctl_path("/v1/allocations/", id, "");

	if (!path)
		return isoctl_oom();
	return isoctl_call_quiet(ctx, "DELETE", path, NULL, NULL, &resp, why);
}

/* The reason, made fit for a job comment: printable, one line, bounded. */
static void clean_reason(const char *in, char *out, size_t size)
{
	size_t n = iso_utf8_prefix(in, strnlen(in, size - 1));

	memcpy(out, in, n);
	out[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			out[i] = ' ';
}

/* Releases every live allocation of `key` (of `tenant`, when given) that
 * the answer lists. The key is checked on each item, not trusted to the
 * filter. `quiet`: print nothing. Returns an exit code. */
static int release_key(struct isoctl *ctx, const char *key, const char *tenant, bool quiet,
                       struct iso_error *why)
{
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = strdup("/v1/allocations");
	size_t i, found = 0;
	json_t *a;
	int r, rc = 0;

	if (!path || isoctl_query_add(&path, "idempotency_key", key) < 0 ||
	    (tenant && isoctl_query_add(&path, "tenant", tenant) < 0))
		return isoctl_oom();
	r = isoctl_call_quiet(ctx, "GET", path, NULL, NULL, &resp, why);
	if (r) {
		if (!quiet)
			fprintf(stderr, "isostack: cannot look up allocation %s: %s\n", key,
			        why->message);
		return r;
	}
	json_array_foreach (json_object_get(resp.body, "items"), i, a) {
		const char *k = json_string_value(json_object_get(a, "idempotency_key"));
		const char *id = json_string_value(json_object_get(a, "id"));
		const char *state = json_string_value(json_object_get(a, "state"));

		if (!k || strcmp(k, key) != 0 || !id)
			continue;
		found++;
		if (!live_state(state))
			continue;
		r = release(ctx, id, why);
		if (r) {
			if (!quiet)
				fprintf(stderr, "isostack: cannot release allocation %s (%s): %s\n",
				        id, key, why->message);
			rc = r;
			continue;
		}
		printf("isostack: released allocation %s (%s)\n", id, key);
	}
	if (!found && !quiet)
		printf("isostack: no allocation with key %s\n", key);
	return rc;
}

/* The job's Idempotency-Key (iso_slurm_job_key) from the environment
 * slurmctld gives PrologSlurmctld and EpilogSlurmctld: SLURM_CLUSTER_NAME,
 * and SLURM_JOB_RESTART_COUNT (0 when absent: the job never ran before). */
static int job_key(uint32_t job, char *key, size_t size, struct iso_error *err)
{
	const char *restart = env_value("SLURM_JOB_RESTART_COUNT");
	uint32_t n = 0;

	if (restart && strcmp(restart, "0") != 0 &&
	    isoctl_slurm_parse_job_id("SLURM_JOB_RESTART_COUNT", restart, &n, err) < 0)
		return -EINVAL;
	return iso_slurm_job_key(key, size, getenv("SLURM_CLUSTER_NAME"), job, n, err);
}

/* ---- prolog ---- */

struct prolog {
	uint32_t job;
	char key[ISO_IDEM_KEY_MAX];
	char tenant[ISO_NAME_MAX];
	const char *nodelist, *name, *profile, *isolation;
	long long gpus; /* 0: none asked */
	long cpus;
	size_t cpu_nodes;
	bool have_cpus;
	char **nodes;
	size_t nnodes;
	long mem_mib;
	uint64_t deadline;
};

/* Milliseconds left before the prolog's deadline, at least 1000. */
static long left_ms(const struct prolog *pr)
{
	uint64_t now = iso_mono_ns();
	long ms = now >= pr->deadline ? 0 : (long)((pr->deadline - now) / 1000000ull);

	return ms < 1000 ? 1000 : ms;
}

/* The job and its request from the PrologSlurmctld environment. */
static int prolog_env(struct prolog *pr, const char *map_path, struct iso_error *err)
{
	const char *gpus = env_value("SPANK_ISOSTACK_GPUS");
	const char *cpus = env_value("SLURM_JOB_CPUS_PER_NODE");
	char *end;
	int r;

	r = isoctl_slurm_parse_job_id("SLURM_JOB_ID", getenv("SLURM_JOB_ID"), &pr->job, err);
	if (r < 0)
		return r;
	r = job_key(pr->job, pr->key, sizeof(pr->key), err);
	if (r < 0)
		return r;
	r = job_tenant(map_path, pr->tenant, sizeof(pr->tenant), err);
	if (r < 0)
		return r;
	pr->nodelist = getenv("SLURM_JOB_NODELIST");
	r = isoctl_slurm_check_nodelist("SLURM_JOB_NODELIST", pr->nodelist, err);
	if (r < 0)
		return r;
	pr->name = getenv("SLURM_JOB_NAME");
	if (!pr->name)
		return iso_error_set(err, ISO_E_INVALID, "SLURM_JOB_NAME",
		                     "SLURM_JOB_NAME is not set");
	/* Empty is unset: the plugin exports what the user gave. */
	pr->profile = env_value("SPANK_ISOSTACK_PROFILE");
	if (pr->profile && !iso_name_valid(pr->profile))
		return iso_error_set(err, ISO_E_INVALID, "SPANK_ISOSTACK_PROFILE",
		                     "SPANK_ISOSTACK_PROFILE: '%.64s' is not a MIG profile name",
		                     pr->profile);
	if (gpus) {
		errno = 0;
		pr->gpus = strtoll(gpus, &end, 10);
		if (!isdigit((unsigned char)gpus[0]) || *end || errno || pr->gpus < 1 ||
		    pr->gpus > 64)
			return iso_error_set(
			    err, ISO_E_INVALID, "SPANK_ISOSTACK_GPUS",
			    "SPANK_ISOSTACK_GPUS: '%.64s' is not a GPU count (1-64)", gpus);
	}
	pr->isolation = env_value("SPANK_ISOSTACK_ISOLATION");
	if (pr->isolation && !iso_name_valid(pr->isolation))
		return iso_error_set(err, ISO_E_INVALID, "SPANK_ISOSTACK_ISOLATION",
		                     "SPANK_ISOSTACK_ISOLATION: '%.64s' is not an isolation class",
		                     pr->isolation);
	if (cpus) {
		r = isoctl_slurm_parse_cpus_per_node("SLURM_JOB_CPUS_PER_NODE", cpus, &pr->cpus,
		                                     &pr->cpu_nodes, err);
		if (r < 0)
			return r;
		pr->have_cpus = true;
	}
	return 0;
}

/* Node names from `scontrol show hostnames`, memory (and CPUs when the
 * environment had none) from `scontrol -o -d show job`. */
static int prolog_slurm(struct prolog *pr, struct iso_error *err)
{
	char id[16];
	const char *scontrol = program("SCONTROL", "scontrol");
	const char *hosts_argv[] = {scontrol, "show", "hostnames", pr->nodelist, NULL};
	const char *job_argv[] = {scontrol, "-o", "-d", "show", "job", id, NULL};
	_cleanup_(isoctl_proc_clear) struct isoctl_proc p = {0};
	struct isoctl_slurm_job job;
	long ms = left_ms(pr);
	int r;

	snprintf(id, sizeof(id), "%u", pr->job);
	r = run_slurm(hosts_argv, ms < SLURM_CMD_TIMEOUT ? ms : SLURM_CMD_TIMEOUT, &p, err);
	if (r < 0)
		return r;
	r = isoctl_slurm_parse_hostnames(p.out, p.out_len, &pr->nodes, &pr->nnodes, err);
	if (r < 0)
		return r;
	if (pr->have_cpus && pr->cpu_nodes != pr->nnodes)
		return iso_error_set(err, ISO_E_INVALID, "SLURM_JOB_CPUS_PER_NODE",
		                     "SLURM_JOB_CPUS_PER_NODE covers %zu nodes, SLURM_JOB_NODELIST "
		                     "%zu",
		                     pr->cpu_nodes, pr->nnodes);
	isoctl_proc_clear(&p);
	ms = left_ms(pr);
	r = run_slurm(job_argv, ms < SLURM_CMD_TIMEOUT ? ms : SLURM_CMD_TIMEOUT, &p, err);
	if (r < 0)
		return r;
	r = isoctl_slurm_parse_job(p.out, p.out_len, pr->job, pr->name, &job, err);
	if (r < 0)
		return r;
	if ((size_t)job.num_nodes != pr->nnodes)
		return iso_error_set(
		    err, ISO_E_INVALID, "scontrol",
		    "scontrol show job %u: NumNodes=%ld, SLURM_JOB_NODELIST has %zu", pr->job,
		    job.num_nodes, pr->nnodes);
	if (!pr->have_cpus) /* the environment had no per-node counts */
		pr->cpus = (job.num_cpus + job.num_nodes - 1) / job.num_nodes;
	pr->mem_mib = job.mem_mib;
	return 0;
}

static int prolog_body(const struct prolog *pr, json_t *body)
{
	json_t *nodes = json_array();
	char name[48];
	int bad = 0;

	snprintf(name, sizeof(name), NAME_PREFIX "%u", pr->job);
	if (!nodes || json_object_set_new(body, "nodes", nodes) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < pr->nnodes; i++)
		bad |= json_array_append_new(nodes, json_string(pr->nodes[i]));
	bad |= json_object_set_new(body, "tenant", json_string(pr->tenant));
	bad |= json_object_set_new(body, "name", json_string(name));
	bad |= json_object_set_new(body, "members", json_integer((json_int_t)pr->nnodes));
	if (pr->cpus > 0)
		bad |= json_object_set_new(body, "cpus", json_integer(pr->cpus));
	if (pr->mem_mib > 0)
		bad |= json_object_set_new(body, "memory_mib", json_integer(pr->mem_mib));
	if (pr->profile || pr->gpus) {
		json_t *g = json_pack("{s:I}", "count", (json_int_t)(pr->gpus ? pr->gpus : 1));

		if (g && pr->profile)
			bad |= json_object_set_new(g, "profile", json_string(pr->profile));
		else if (g)
			bad |= json_object_set_new(g, "whole", json_true());
		bad |= json_object_set_new(body, "gpus", g);
	}
	if (pr->isolation)
		bad |= json_object_set_new(body, "isolation", json_string(pr->isolation));
	return bad ? -ENOMEM : 0;
}

/* Tells Slurm and the log why the job gets no allocation. */
static void prolog_report(uint32_t job, const struct iso_error *why)
{
	char reason[COMMENT_MAX + 1], comment[COMMENT_MAX + 32], id[40];
	const char *scontrol = program("SCONTROL", "scontrol");
	const char *argv[] = {scontrol, "update", id, comment, NULL};
	_cleanup_(isoctl_proc_clear) struct isoctl_proc p = {0};
	struct iso_error err = {0};
	char full[ISO_ERR_MSG_MAX + ISO_ERR_FIELD_MAX + 16];

	if (why->field[0] && !strstr(why->message, why->field))
		snprintf(full, sizeof(full), "%s (field %s)", why->message, why->field);
	else
		snprintf(full, sizeof(full), "%s", why->message);
	clean_reason(full, reason, sizeof(reason));
	fprintf(stderr, "isostack: %s\n", reason);
	if (!job)
		return;
	snprintf(id, sizeof(id), "JobId=%u", job);
	/* One argument, no shell: scontrol takes the rest of it as the value. */
	snprintf(comment, sizeof(comment), "Comment=isostack: %s", reason);
	if (run_slurm(argv, SLURM_CMD_TIMEOUT, &p, &err) < 0)
		fprintf(stderr, "isostack: cannot set the comment of job %u: %s\n", job,
		        err.message);
}

static int prolog_run(struct isoctl *ctx, struct prolog *pr, const char *map_path,
                      struct iso_error *why)
{
	_cleanup_json_ json_t *body = json_object();
	_cleanup_response_ struct iso_response resp = {0};
	char hdr[64];
	const char *headers[] = {hdr, NULL};
	const char *state, *id;
	long ms;
	int r;

	if (!body)
		return iso_error_set(why, ISO_E_INTERNAL, NULL, "out of memory");
	r = prolog_env(pr, map_path, why);
	if (r >= 0)
		r = prolog_slurm(pr, why);
	if (r < 0)
		return r;
	if (prolog_body(pr, body) < 0)
		return iso_error_set(why, ISO_E_INTERNAL, NULL, "out of memory");
	ms = left_ms(pr);
	if (!ctx->timeout_ms || ctx->timeout_ms > ms)
		ctx->timeout_ms = ms;
	snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", pr->key);
	r = isoctl_call_quiet(ctx, "POST", "/v1/allocations", body, headers, &resp, why);
	if (r == ISOCTL_EXIT_UNAVAILABLE) {
		/* It may have been made before the answer was lost. */
		struct iso_error ignored = {0};

		release_key(ctx, pr->key, pr->tenant, true, &ignored);
	}
	if (r)
		return -EIO;
	id = json_string_value(json_object_get(resp.body, "id"));
	state = json_string_value(json_object_get(resp.body, "state"));
	if (!id || !state)
		return iso_error_set(why, ISO_E_INTERNAL, NULL, "the answer has no id or state");
	/* The key's allocation from an earlier run that has ended: a job
	 * requeued after its epilog released it. Its key is spent. */
	if (!live_state(state))
		return iso_error_set(why, ISO_E_CONFLICT, NULL,
		                     "allocation %s of key %s is already %s (the job ran before?)",
		                     id, pr->key, state);
	r = isoctl_alloc_wait(ctx, &resp, (left_ms(pr) + 999) / 1000, why);
	if (r == 0) {
		printf("isostack: job %u: allocation %s active on %s\n", pr->job, id, pr->nodelist);
		return 0;
	}
	/* Leave nothing behind: a job without its allocation fails in the
	 * plugin, and its allocation must not hold the nodes meanwhile. */
	{
		struct iso_error rel = {0};
		char gone[64];

		iso_strlcpy(gone, id, sizeof(gone));
		if (release(ctx, gone, &rel))
			fprintf(stderr, "isostack: cannot release allocation %s: %s\n", gone,
			        rel.message);
	}
	return -EIO;
}

static int slurm_prolog(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl slurm prolog [--tenant-map FILE] [--timeout S]\n"
	    "\n"
	    "PrologSlurmctld (docs/slurm.md): creates the job's allocation (POST\n"
	    "/v1/allocations, Idempotency-Key slurm:CLUSTER:JOBID:RESTART), one member pinned to "
	    "each\n"
	    "node Slurm chose, and waits until it is active. Reads SLURM_JOB_ID,\n"
	    "SLURM_JOB_ACCOUNT (the tenant), SLURM_JOB_NODELIST, SLURM_JOB_NAME,\n"
	    "SLURM_JOB_CPUS_PER_NODE and the plugin's SPANK_ISOSTACK_PROFILE,\n"
	    "SPANK_ISOSTACK_GPUS, SPANK_ISOSTACK_ISOLATION; runs `scontrol show\n"
	    "hostnames` and `scontrol -o -d show job` for the nodes and the memory.\n"
	    "Always exits 0: when it cannot, it releases what it made, prints\n"
	    "'isostack: REASON' on stderr and sets it as the job's comment; the SPANK\n"
	    "plugin then fails the job. Running it again for a job finds the same\n"
	    "allocation.\n"
	    "  --tenant-map FILE  rename accounts: 'ACCOUNT TENANT' per line\n"
	    "  --timeout S        the whole run, seconds (1-3600, default 60)\n"
	    "Environment: SCONTROL (default scontrol), ISOSTACK_URL, ISOSTACK_TOKEN\n"
	    "or ISOSTACK_TOKEN_FILE (a cluster-admin token).\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("tenant-map", required_argument, OPT_TENANT_MAP),
	    ISOCTL_FLAG("timeout", required_argument, OPT_TIMEOUT), ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	const char *flag[NUM_FLAGS] = {0};
	struct prolog pr = {0};
	struct iso_error why = {0};
	long long timeout_s = PROLOG_TIMEOUT_DEF;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 0, 0, NULL) < 0) {
		/* Printed; never requeue, but say on the job why it gets nothing. */
		if (p.exit_code != ISOCTL_EXIT_OK &&
		    isoctl_slurm_parse_job_id("SLURM_JOB_ID", getenv("SLURM_JOB_ID"), &pr.job,
		                              NULL) == 0) {
			iso_error_set(&why, ISO_E_INVALID, NULL,
			              "bad PrologSlurmctld command line (isoctl slurm prolog)");
			prolog_report(pr.job, &why);
		}
		return ISOCTL_EXIT_OK;
	}
	if (flag[OPT_TIMEOUT] &&
	    isoctl_parse_int(ctx, "--timeout", flag[OPT_TIMEOUT], 1, 3600, &timeout_s))
		timeout_s = PROLOG_TIMEOUT_DEF; /* said so; go on with the default */
	pr.deadline = iso_mono_ns() + (uint64_t)timeout_s * 1000000000ull;
	if (prolog_run(ctx, &pr, flag[OPT_TENANT_MAP], &why) < 0)
		prolog_report(pr.job, &why);
	free(pr.nodes);
	return ISOCTL_EXIT_OK;
}

/* ---- epilog ---- */

static int slurm_epilog(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl slurm epilog [--tenant-map FILE]\n"
	    "\n"
	    "EpilogSlurmctld (docs/slurm.md): releases the allocation with key\n"
	    "slurm:CLUSTER:JOBID:RESTART (found with GET /v1/allocations?idempotency_key=,\n"
	    "of the tenant of SLURM_JOB_ACCOUNT when it is set). Always exits 0; none,\n"
	    "or one released already, is fine. What it cannot release, `isoctl slurm\n"
	    "reap` does later.\n"
	    "  --tenant-map FILE  rename accounts: 'ACCOUNT TENANT' per line\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("tenant-map", required_argument, OPT_TENANT_MAP), ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	const char *flag[NUM_FLAGS] = {0};
	char key[ISO_IDEM_KEY_MAX], tenant[ISO_NAME_MAX];
	struct iso_error why = {0};
	uint32_t job;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 0, 0, NULL) < 0)
		return ISOCTL_EXIT_OK;
	if (isoctl_slurm_parse_job_id("SLURM_JOB_ID", getenv("SLURM_JOB_ID"), &job, &why) < 0) {
		fprintf(stderr, "isostack: %s\n", why.message);
		return ISOCTL_EXIT_OK;
	}
	if (job_key(job, key, sizeof(key), &why) < 0) {
		fprintf(stderr, "isostack: %s\n", why.message);
		return ISOCTL_EXIT_OK;
	}
	if (!env_value("SLURM_JOB_ACCOUNT")) {
		release_key(ctx, key, NULL, false, &why);
		return ISOCTL_EXIT_OK;
	}
	if (job_tenant(flag[OPT_TENANT_MAP], tenant, sizeof(tenant), &why) < 0) {
		/* Still release by key alone: better than an orphan until the reaper. */
		fprintf(stderr, "isostack: %s\n", why.message);
		release_key(ctx, key, NULL, false, &why);
		return ISOCTL_EXIT_OK;
	}
	release_key(ctx, key, tenant, false, &why);
	return ISOCTL_EXIT_OK;
}

/* ---- reap ---- */

struct candidate {
	char id[64], key[ISO_IDEM_KEY_MAX], tenant[ISO_NAME_MAX];
	uint32_t job;
};

static int cmp_job(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* One pass: live slurm- allocations first, then squeue, so that a job
 * that starts in between is never taken for gone. Returns an exit code. */
static int reap_once(struct isoctl *ctx, const char *cluster)
{
	const char *squeue = program("SQUEUE", "squeue");
	const char *argv[] = {squeue, "--all", "--json", NULL};
	/* the live states, each listed by the store's live index: never the
	 * released history, which grows with every job ever run */
	static const char *const states[] = {"pending", "placed", "provisioning", "active"};
	_cleanup_(isoctl_proc_clear) struct isoctl_proc p = {0};
	_cleanup_free_ struct candidate *c = NULL;
	_cleanup_free_ uint32_t *live = NULL;
	struct iso_error why = {0};
	size_t i, n = 0, cap = 0, nlive = 0, released = 0;
	int r, rc = 0;

	for (size_t s = 0; s < ISO_ARRAY_SIZE(states); s++) {
		_cleanup_response_ struct iso_response resp = {0};
		_cleanup_free_ char *path = strdup("/v1/allocations");
		const json_t *items;
		json_t *a;

		if (!path || isoctl_query_add(&path, "state", states[s]) < 0)
			return isoctl_oom();
		r = isoctl_list(ctx, path, &resp);
		if (r)
			return r;
		items = json_object_get(resp.body, "items");
		if (n + json_array_size(items) + 1 > cap) {
			size_t want = n + json_array_size(items) + 1;
			struct candidate *grown = realloc(c, want * sizeof(*c));
			if (!grown)
				return isoctl_oom();
			c = grown;
			cap = want;
		}
		json_array_foreach (items, i, a) {
			const char *key = json_string_value(json_object_get(a, "idempotency_key"));
			const char *id = json_string_value(json_object_get(a, "id"));
			const char *tenant = json_string_value(json_object_get(a, "tenant"));
			uint32_t job;

			if (!key || !id ||
			    !live_state(json_string_value(json_object_get(a, "state"))))
				continue;
			if (!iso_slurm_job_key_parse(key, cluster, &job, NULL))
				continue; /* not ours: another cluster's or client's key */
			memset(&c[n], 0, sizeof(c[n]));
			iso_strlcpy(c[n].id, id, sizeof(c[n].id));
			iso_strlcpy(c[n].key, key, sizeof(c[n].key));
			iso_strlcpy(c[n].tenant, tenant ? tenant : "", sizeof(c[n].tenant));
			c[n++].job = job;
		}
	}
	if (n == 0)
		return 0;
	/* Fail safe: no answer from Slurm is not "every job is gone". */
	if (run_slurm(argv, SLURM_CMD_TIMEOUT, &p, &why) < 0 ||
	    isoctl_slurm_parse_squeue(p.out, p.out_len, &live, &nlive, &why) < 0) {
		fprintf(stderr, "isoctl: %s; nothing released\n", why.message);
		return ISOCTL_EXIT_UNAVAILABLE;
	}
	for (i = 0; i < n; i++) {
		if (nlive > 0 && bsearch(&c[i].job, live, nlive, sizeof(*live), cmp_job))
			continue;
		r = release(ctx, c[i].id, &why);
		if (r) {
			fprintf(stderr, "isoctl: cannot release allocation %s (%s): %s\n", c[i].id,
			        c[i].key, why.message);
			rc = r;
			continue;
		}
		released++;
		printf("released %s (%s, tenant %s): job %u is gone from squeue\n", c[i].id,
		       c[i].key, c[i].tenant, c[i].job);
	}
	fflush(stdout);
	return rc;
}

static int slurm_reap(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl slurm reap [--cluster NAME] [--every S]\n"
	    "\n"
	    "Releases every live allocation whose key is slurm:NAME:JOBID:RESTART and whose job\n"
	    "`squeue --all --json` no longer lists (or lists finished), printing each.\n"
	    "When squeue fails, or reports an error (slurmctld unreachable), nothing is\n"
	    "released (exit 7). Needs a cluster-admin token, and squeue must see every\n"
	    "job: run it as root or SlurmUser (PrivateData=jobs hides others' jobs).\n"
	    "  --cluster NAME  the Slurm cluster's ClusterName (default: SLURM_CLUSTER_NAME);\n"
	    "              another cluster's jobs are never touched\n"
	    "  --every S   run a pass every S seconds (1-86400) until stopped; a\n"
	    "              failed pass is printed and the next one runs\n"
	    "Environment: SQUEUE (default squeue).\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("every", required_argument, OPT_EVERY),
	    ISOCTL_FLAG("cluster", required_argument, OPT_CLUSTER), ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	const char *flag[NUM_FLAGS] = {0}, *cluster;
	long long every = 0;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 0, 0, NULL) < 0)
		return p.exit_code;
	if (flag[OPT_EVERY] && isoctl_parse_int(ctx, "--every", flag[OPT_EVERY], 1, 86400, &every))
		return ISOCTL_EXIT_USAGE;
	cluster = flag[OPT_CLUSTER] ? flag[OPT_CLUSTER] : getenv("SLURM_CLUSTER_NAME");
	if (!iso_slurm_cluster_valid(cluster)) {
		fprintf(stderr, "isoctl: --cluster: %s\n",
		        cluster
		            ? "not a Slurm cluster name (1-63 of [A-Za-z0-9._-])"
		            : "required (or SLURM_CLUSTER_NAME): the ClusterName of slurm.conf");
		return ISOCTL_EXIT_USAGE;
	}
	if (!every)
		return reap_once(ctx, cluster);
	for (;;) {
		struct timespec ts = {.tv_sec = (time_t)every};

		reap_once(ctx, cluster);
		fflush(stderr);
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}

/* ---- gres ---- */

static int slurm_gres(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl slurm gres\n"
	    "\n"
	    "Prints what slurm.conf and gres.conf need for Slurm to count isostack's\n"
	    "GPUs (GET /v1/nodes, GET /v1/gpus; cluster-admin or auditor): two count\n"
	    "GRES per GPU node, isogpu (its GPUs) and isomig (the MIG compute slices of\n"
	    "its MIG-enabled GPUs). Slurm counts; isostack places the geometry: a count\n"
	    "can say yes where the geometry says no (docs/slurm.md).\n";
	static const struct option options[] = {ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response nodes = {0};
	_cleanup_response_ struct iso_response gpus = {0};
	const char *flag[1] = {0};
	size_t i, j;
	json_t *nd, *g;
	int r;

	if (isoctl_parse_line(ctx, &p, flag, 0, 0, 0, NULL) < 0)
		return p.exit_code;
	r = isoctl_list(ctx, "/v1/nodes", &nodes);
	if (!r)
		r = isoctl_list(ctx, "/v1/gpus", &gpus);
	if (r)
		return r;
	printf("# slurm.conf: add to the NodeName line of each node (isoctl slurm gres)\n"
	       "GresTypes=isogpu,isomig\n");
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			printf("\n# gres.conf\n");
		json_array_foreach (json_object_get(nodes.body, "items"), i, nd) {
			const char *name = json_string_value(json_object_get(nd, "name"));
			json_int_t whole = 0, slices = 0;

			if (!name || !iso_name_valid(name))
				continue;
			json_array_foreach (json_object_get(gpus.body, "items"), j, g) {
				const char *on = json_string_value(json_object_get(g, "node"));

				/* A faulted GPU counts too: this is configuration, not
				 * today's free capacity. */
				if (!on || strcmp(on, name) != 0)
					continue;
				whole++;
				if (json_is_true(json_object_get(g, "mig_enabled")))
					slices += json_integer_value(
					    json_object_get(g, "compute_slices"));
			}
			if (!whole)
				continue;
			if (pass == 0)
				printf("NodeName=%s Gres=isogpu:%" JSON_INTEGER_FORMAT
				       ",isomig:%" JSON_INTEGER_FORMAT "\n",
				       name, whole, slices);
			else
				printf("NodeName=%s Name=isogpu Count=%" JSON_INTEGER_FORMAT
				       " Flags=CountOnly\n"
				       "NodeName=%s Name=isomig Count=%" JSON_INTEGER_FORMAT
				       " Flags=CountOnly\n",
				       name, whole, name, slices);
		}
	}
	return 0;
}

int isoctl_cmd_slurm(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"prolog", .run = slurm_prolog},
	    {"epilog", .run = slurm_epilog},
	    {"reap", .run = slurm_reap},
	    {"gres", .run = slurm_gres},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_slurm, argc, argv);
}

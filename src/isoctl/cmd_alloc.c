/* cmd_alloc.c: `isoctl alloc ...`: a tenant's allocations (/v1/allocations):
 * create one from flags, list, show with its placement, resize and release. */
#include <limits.h>
#include <string.h>
#include <time.h>

#include "isoctl/isoctl.h"

/* Indexes of the flags' values. */
enum {
	OPT_TENANT,
	OPT_NAME,
	OPT_MEMBERS,
	OPT_PROFILE,
	OPT_WHOLE,
	OPT_COUNT,
	OPT_MODEL,
	OPT_CPUS,
	OPT_MEMORY,
	OPT_POOL,
	OPT_PROJECT,
	OPT_PRIORITY,
	OPT_ISOLATION,
	OPT_SPREAD,
	OPT_ON_PREEMPT,
	OPT_DURATION,
	OPT_WAIT,
	NUM_FLAGS
};

static const char *const id_arg[] = {"ID"};

static const char usage_alloc[] =
    "Usage: isoctl alloc SUBCOMMAND ...\n"
    "\n"
    "Allocations: a tenant's virtual cluster or job, MEMBERS members of one shape,\n"
    "each on one node.\n"
    "  create [--tenant T] [--name N] [--members N]\n"
    "         [--profile P [--count N] | --whole [--count N]] [--model M]\n"
    "         [--cpus C] [--memory-mib M] [--pool P] [--wait S] ...\n"
    "  list [--tenant T] [--state S] [--all-pages]\n"
    "  get ID                  one allocation and its placement\n"
    "  resize ID --members N   grow or shrink an active allocation\n"
    "  release ID              release it; prints the final allocation\n"
    "Run 'isoctl alloc SUBCOMMAND --help' for details, 'isoctl --help' for global flags.\n";

/* "1x3g.40gb,8cpu,64GiB": GPUs per member, CPUs, memory; "-" for nothing. */
static char *fmt_shape(const json_t *a)
{
	const json_t *gpus = json_object_get(a, "gpus");
	json_int_t cpus = json_integer_value(json_object_get(a, "cpus"));
	json_int_t mib = json_integer_value(json_object_get(a, "memory_mib"));
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	const char *sep = "";

	if (!f)
		return NULL;
	if (json_is_object(gpus)) {
		const char *profile = json_string_value(json_object_get(gpus, "profile"));
		const char *model = json_string_value(json_object_get(gpus, "model"));
		bool whole = json_is_true(json_object_get(gpus, "whole"));

		fprintf(f, "%" JSON_INTEGER_FORMAT "x%s",
		        json_integer_value(json_object_get(gpus, "count")),
		        whole || !profile ? "gpu" : profile);
		if (model)
			fprintf(f, "(%s)", model);
		sep = ",";
	}
	if (cpus > 0) {
		fprintf(f, "%s%" JSON_INTEGER_FORMAT "cpu", sep, cpus);
		sep = ",";
	}
	if (mib > 0) {
		if (mib % 1024 == 0)
			fprintf(f, "%s%" JSON_INTEGER_FORMAT "GiB", sep, mib / 1024);
		else
			fprintf(f, "%s%" JSON_INTEGER_FORMAT "MiB", sep, mib);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out; /* "" prints as "-" */
}

/* Distinct nodes of the members, in member order: "gpu-a01,gpu-a02". */
static char *fmt_nodes(const json_t *a)
{
	const json_t *nodes = json_object_get(a, "nodes");
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	bool first = true;
	size_t i, j;
	json_t *n, *m;

	if (!f)
		return NULL;
	json_array_foreach (nodes, i, n) {
		const char *name = json_string_value(json_object_get(n, "node"));
		bool seen = false;

		if (!name)
			continue;
		/* Quadratic, but members are at most 1024. */
		for (j = 0; j < i && !seen; j++) {
			m = json_array_get(nodes, j);
			const char *prev = json_string_value(json_object_get(m, "node"));
			seen = prev && strcmp(prev, name) == 0;
		}
		if (!seen) {
			fprintf(f, "%s%s", first ? "" : ",", name);
			first = false;
		}
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void add_alloc_row(struct isoctl_table *t, const json_t *a)
{
	isoctl_table_add_json(t, json_object_get(a, "id"));
	isoctl_table_add_json(t, json_object_get(a, "tenant"));
	isoctl_table_add_json(t, json_object_get(a, "name"));
	isoctl_table_add_json(t, json_object_get(a, "state"));
	isoctl_table_add_json(t, json_object_get(a, "members"));
	isoctl_table_add_owned(t, fmt_shape(a));
	isoctl_table_add_owned(t, fmt_nodes(a));
}

static int print_allocs(const json_t *body)
{
	static const char *const headers[] = {"ID",      "TENANT", "NAME", "STATE",
	                                      "MEMBERS", "SHAPE",  "NODES"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_alloc_row);
}

static int print_placement(const json_t *a)
{
	static const char *const headers[] = {"MEMBER", "NODE", "GPU", "PROFILE", "START", "WIDTH"};
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const json_t *placement = json_object_get(a, "placement");
	size_t i;
	json_t *s;

	isoctl_table_init(&t, ISO_ARRAY_SIZE(headers), headers);
	json_array_foreach (placement, i, s) {
		bool whole = json_is_true(json_object_get(s, "whole"));

		isoctl_table_add_json(&t, json_object_get(s, "member"));
		isoctl_table_add_json(&t, json_object_get(s, "node"));
		isoctl_table_add_json(&t, json_object_get(s, "gpu"));
		if (whole)
			isoctl_table_add(&t, "whole");
		else
			isoctl_table_add_json(&t, json_object_get(s, "profile"));
		isoctl_table_add_json(&t, json_object_get(s, "start"));
		isoctl_table_add_json(&t, json_object_get(s, "width"));
	}
	/* All members share one shape: without GPUs, show where they run. */
	if (json_array_size(placement) == 0) {
		json_array_foreach (json_object_get(a, "nodes"), i, s) {
			isoctl_table_add_json(&t, json_object_get(s, "member"));
			isoctl_table_add_json(&t, json_object_get(s, "node"));
			for (int k = 0; k < 4; k++)
				isoctl_table_add(&t, NULL);
		}
	}
	return isoctl_table_print(&t);
}

/* States in which the allocation holds nodes and GPUs (docs/api.md): not
 * pending (nothing yet), released or failed (nothing any more). */
static bool holds_resources(const char *state)
{
	static const char *const holding[] = {"placed", "provisioning", "active", "releasing"};

	for (size_t i = 0; state && i < ISO_ARRAY_SIZE(holding); i++)
		if (strcmp(state, holding[i]) == 0)
			return true;
	return false;
}

static int print_alloc(const json_t *a)
{
	static const char *const keys[] = {"id", "tenant", "name", "state", "reason", "members"};
	static const char *const tail[] = {"pool", "owner", "created", "updated"};
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const char *state = json_string_value(json_object_get(a, "state"));
	int r;

	isoctl_table_init(&t, 2, NULL);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(keys); i++) {
		isoctl_table_addf(&t, "%s:", keys[i]);
		isoctl_table_add_json(&t, json_object_get(a, keys[i]));
	}
	isoctl_table_add(&t, "shape:");
	isoctl_table_add_owned(&t, fmt_shape(a));
	for (size_t i = 0; i < ISO_ARRAY_SIZE(tail); i++) {
		isoctl_table_addf(&t, "%s:", tail[i]);
		isoctl_table_add_json(&t, json_object_get(a, tail[i]));
	}
	/* Only an allocation that holds resources has a placement to show; the
	 * API keeps a released one's last placement, which it no longer holds. */
	if (!holds_resources(state)) {
		isoctl_table_add(&t, "placement:");
		isoctl_table_addf(&t, "none (%s)", state ? state : "unknown state");
	}
	r = isoctl_table_print(&t);
	if (r || !holds_resources(state))
		return r;
	fputs("\nPLACEMENT\n", stdout);
	return print_placement(a);
}

/* Checks the flags of `alloc create` and builds the request body. Returns 0
 * or an exit code. */
static int create_body(struct isoctl *ctx, const char *const *flag, json_t *body)
{
	const char *profile = flag[OPT_PROFILE], *model = flag[OPT_MODEL];
	bool whole = flag[OPT_WHOLE] != NULL;
	long long v;
	int r = 0;

	if (profile && whole)
		return isoctl_usage_error(ctx, "--profile and --whole exclude each other");
	if (flag[OPT_COUNT] && !profile && !whole)
		return isoctl_usage_error(ctx, "--count needs --profile P or --whole");
	if (model && !profile && !whole)
		return isoctl_usage_error(ctx, "--model needs --profile P or --whole");
	if (flag[OPT_TENANT])
		r = isoctl_set_string(ctx, body, "tenant", "--tenant", flag[OPT_TENANT]);
	if (!r && flag[OPT_NAME])
		r = isoctl_set_string(ctx, body, "name", "--name", flag[OPT_NAME]);
	/* Ranges are the server's to check (one place); here: integers only. */
	if (!r && flag[OPT_MEMBERS]) {
		if (isoctl_parse_int(ctx, "--members", flag[OPT_MEMBERS], LLONG_MIN, LLONG_MAX, &v))
			return ISOCTL_EXIT_USAGE;
		r = isoctl_set_int(body, "members", v);
	}
	if (!r && (profile || whole)) {
		json_t *gpus = json_object();

		v = 1;
		if (!gpus || json_object_set_new(body, "gpus", gpus) < 0)
			return isoctl_oom();
		if (flag[OPT_COUNT] &&
		    isoctl_parse_int(ctx, "--count", flag[OPT_COUNT], LLONG_MIN, LLONG_MAX, &v))
			return ISOCTL_EXIT_USAGE;
		r = isoctl_set_int(gpus, "count", v);
		if (!r && profile)
			r = isoctl_set_string(ctx, gpus, "profile", "--profile", profile);
		if (!r && whole && json_object_set_new(gpus, "whole", json_true()) < 0)
			r = isoctl_oom();
		if (!r && model)
			r = isoctl_set_string(ctx, gpus, "model", "--model", model);
	}
	if (!r && flag[OPT_CPUS]) {
		if (isoctl_parse_int(ctx, "--cpus", flag[OPT_CPUS], LLONG_MIN, LLONG_MAX, &v))
			return ISOCTL_EXIT_USAGE;
		r = isoctl_set_int(body, "cpus", v);
	}
	if (!r && flag[OPT_MEMORY]) {
		if (isoctl_parse_int(ctx, "--memory-mib", flag[OPT_MEMORY], LLONG_MIN, LLONG_MAX,
		                     &v))
			return ISOCTL_EXIT_USAGE;
		r = isoctl_set_int(body, "memory_mib", v);
	}
	if (!r && flag[OPT_POOL])
		r = isoctl_set_string(ctx, body, "pool", "--pool", flag[OPT_POOL]);
	/* tenancy (docs/tenancy.md) */
	if (!r && flag[OPT_PROJECT])
		r = isoctl_set_string(ctx, body, "project", "--project", flag[OPT_PROJECT]);
	if (!r && flag[OPT_PRIORITY]) {
		if (isoctl_parse_int(ctx, "--priority", flag[OPT_PRIORITY], LLONG_MIN, LLONG_MAX,
		                     &v))
			return ISOCTL_EXIT_USAGE;
		r = isoctl_set_int(body, "priority", v);
	}
	if (!r && flag[OPT_ISOLATION])
		r = isoctl_set_string(ctx, body, "isolation", "--isolation", flag[OPT_ISOLATION]);
	if (!r && flag[OPT_SPREAD])
		r = isoctl_set_string(ctx, body, "spread", "--spread", flag[OPT_SPREAD]);
	if (!r && flag[OPT_ON_PREEMPT])
		r = isoctl_set_string(ctx, body, "on_preempt", "--on-preempt",
		                      flag[OPT_ON_PREEMPT]);
	if (!r && flag[OPT_DURATION]) {
		if (isoctl_parse_int(ctx, "--duration", flag[OPT_DURATION], LLONG_MIN, LLONG_MAX,
		                     &v))
			return ISOCTL_EXIT_USAGE;
		r = isoctl_set_int(body, "duration_s", v);
	}
	return r;
}

/* Ends a wait that failed: "allocation ID is STATE[ after S s][: REASON]"
 * printed, or kept in *why. Returns `code`. */
static int wait_failed(struct iso_error *why, int code, const char *id, const char *state,
                       long long after_s, const char *reason)
{
	char msg[ISO_ERR_MSG_MAX], after[48] = "";
	bool has_reason = reason && reason[0];

	if (after_s > 0)
		snprintf(after, sizeof(after), " after %lld s", after_s);
	snprintf(msg, sizeof(msg), "allocation %s is %s%s%s%s%s", id, after_s > 0 ? "still " : "",
	         state, after, has_reason ? ": " : "", has_reason ? reason : "");
	if (why) {
		iso_error_set(why,
		              code == ISOCTL_EXIT_WAIT_FAILED ? ISO_E_CONFLICT : ISO_E_UNAVAILABLE,
		              NULL, "%s", msg);
	} else {
		fputs("isoctl: ", stderr);
		isoctl_fputs_clean(msg, stderr);
		fputc('\n', stderr);
	}
	return code;
}

#define FAST_POLL_S 10 /* isoctl_alloc_wait: polls at most 250 ms apart this long */

/* --wait: polls the allocation until it is active (0), ends released or
 * failed (9), or `seconds` pass (10). Placement in the sim is immediate;
 * what takes time is a pending allocation waiting for capacity and
 * provisioning waiting for the fabric driver's confirmation. The last
 * answer stays in *resp for printing. Returns an exit code; with `why`
 * nothing is printed and a failure is described there.
 * The first polls are quick (10 ms, doubling to 250 ms) because provisioning
 * is usually done in tens or hundreds of ms (a Slurm job waits for this in
 * its prolog, bench/slurm/start.py); past FAST_POLL_S the delay doubles up
 * to 2 s, for a pending allocation waiting minutes for capacity. */
int isoctl_alloc_wait(struct isoctl *ctx, struct iso_response *resp, long long seconds,
                      struct iso_error *why)
{
	uint64_t start = iso_mono_ns();
	uint64_t deadline = start + (uint64_t)seconds * 1000000000ull;
	long delay_ms = 10, cap_ms;
	_cleanup_free_ char *path = NULL, *id = NULL;
	const char *s = json_string_value(json_object_get(resp->body, "id"));

	if (!s)
		return ISOCTL_EXIT_INTERNAL;
	id = strdup(s); /* resp is replaced below */
	if (!id)
		return isoctl_oom();
	path = isoctl_path("/v1/allocations/", id, "");
	if (!path)
		return isoctl_oom();
	for (;;) {
		const char *state = json_string_value(json_object_get(resp->body, "state"));
		const char *reason = json_string_value(json_object_get(resp->body, "reason"));
		uint64_t now = iso_mono_ns();
		struct timespec ts;
		int r;

		if (!state)
			return ISOCTL_EXIT_INTERNAL;
		if (strcmp(state, "active") == 0)
			return 0;
		if (strcmp(state, "failed") == 0 || strcmp(state, "released") == 0)
			return wait_failed(why, ISOCTL_EXIT_WAIT_FAILED, id, state, 0, reason);
		if (now >= deadline)
			return wait_failed(why, ISOCTL_EXIT_WAIT_TIMEOUT, id, state, seconds,
			                   reason);
		if ((uint64_t)delay_ms * 1000000ull > deadline - now)
			delay_ms = (long)((deadline - now) / 1000000ull) + 1;
		ts.tv_sec = delay_ms / 1000;
		ts.tv_nsec = (delay_ms % 1000) * 1000000L;
		nanosleep(&ts, NULL);
		cap_ms = now - start < FAST_POLL_S * 1000000000ull ? 250 : 2000;
		delay_ms = delay_ms * 2 > cap_ms ? cap_ms : delay_ms * 2;
		iso_response_clear(resp);
		r = isoctl_call_quiet(ctx, "GET", path, NULL, NULL, resp, why);
		if (r)
			return r;
	}
}

static int alloc_create(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl alloc create [--tenant T] [--name N] [--members N]\n"
	    "                           [--profile P [--count N] | --whole [--count N]]\n"
	    "                           [--model M] [--cpus C] [--memory-mib M] [--pool P]\n"
	    "                           [--project P] [--priority N] [--isolation C]\n"
	    "                           [--spread L] [--on-preempt requeue|fail] [--duration S]\n"
	    "                           [--wait S]\n"
	    "\n"
	    "Creates an allocation (POST /v1/allocations) and prints it. It is placed at\n"
	    "once when it fits, stays 'pending' when it fits only an emptier cluster, and\n"
	    "is refused as unsatisfiable (exit 5) when it never could.\n"
	    "  --tenant T        owning tenant (required for cluster-admin; a tenant\n"
	    "                    token defaults to its own)\n"
	    "  --name N          label\n"
	    "  --members N       members, each on one node (1-1024, default 1)\n"
	    "  --profile P       each member gets --count MIG instances of profile P\n"
	    "                    (e.g. 3g.40gb)\n"
	    "  --whole           each member gets --count whole GPUs\n"
	    "  --count N         GPUs or instances per member (1-64, default 1); needs\n"
	    "                    --profile or --whole\n"
	    "  --model M         only GPUs of model M (e.g. h100-80gb)\n"
	    "  --cpus C          CPU cores per member (default 0)\n"
	    "  --memory-mib M    memory per member in MiB (default 0)\n"
	    "  --pool P          only nodes of pool P\n"
	    "  --project P       charge it to the tenant's project P (its quota)\n"
	    "  --priority N      -1000..1000 within the tenant (default 0); higher may\n"
	    "                    preempt the tenant's own lower-priority work\n"
	    "  --isolation C     shared, exclusive-gpu, exclusive-node or exclusive-rack\n"
	    "                    (the stricter of this and the tenant's class applies)\n"
	    "  --spread L        members on distinct gpu, node or rack\n"
	    "  --on-preempt A    requeue (default) or fail when preempted\n"
	    "  --duration S      expected run time in seconds (for backfill)\n"
	    "  --wait S          wait up to S seconds (1-86400) until it is active; exit 9\n"
	    "                    when it ends failed or released instead, 10 when it is\n"
	    "                    still pending or provisioning after S seconds (the\n"
	    "                    allocation stays; its id is in the message)\n"
	    "Without --profile or --whole the members get no GPU (CPU-only).\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("tenant", required_argument, OPT_TENANT),
	    ISOCTL_FLAG("name", required_argument, OPT_NAME),
	    ISOCTL_FLAG("members", required_argument, OPT_MEMBERS),
	    ISOCTL_FLAG("profile", required_argument, OPT_PROFILE),
	    ISOCTL_FLAG("whole", no_argument, OPT_WHOLE),
	    ISOCTL_FLAG("count", required_argument, OPT_COUNT),
	    ISOCTL_FLAG("model", required_argument, OPT_MODEL),
	    ISOCTL_FLAG("cpus", required_argument, OPT_CPUS),
	    ISOCTL_FLAG("memory-mib", required_argument, OPT_MEMORY),
	    ISOCTL_FLAG("pool", required_argument, OPT_POOL),
	    ISOCTL_FLAG("project", required_argument, OPT_PROJECT),
	    ISOCTL_FLAG("priority", required_argument, OPT_PRIORITY),
	    ISOCTL_FLAG("isolation", required_argument, OPT_ISOLATION),
	    ISOCTL_FLAG("spread", required_argument, OPT_SPREAD),
	    ISOCTL_FLAG("on-preempt", required_argument, OPT_ON_PREEMPT),
	    ISOCTL_FLAG("duration", required_argument, OPT_DURATION),
	    ISOCTL_FLAG("wait", required_argument, OPT_WAIT),
	    ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_json_ json_t *body = json_object();
	_cleanup_response_ struct iso_response resp = {0};
	const char *flag[NUM_FLAGS] = {0};
	long long wait_s = 0;
	int r;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 0, 0, NULL) < 0)
		return p.exit_code;
	if (!body)
		return isoctl_oom();
	if (flag[OPT_WAIT] && isoctl_parse_int(ctx, "--wait", flag[OPT_WAIT], 1, 86400, &wait_s))
		return ISOCTL_EXIT_USAGE;
	r = create_body(ctx, flag, body);
	if (!r)
		r = isoctl_call(ctx, "POST", "/v1/allocations", body, &resp);
	if (!r && wait_s)
		r = isoctl_alloc_wait(ctx, &resp, wait_s, NULL);
	return r ? r : isoctl_render(ctx, &resp, print_alloc);
}

static const struct isoctl_simple_cmd alloc_list = {
    .usage = "Usage: isoctl alloc list [--tenant T] [--state S] [--all-pages]\n"
             "\n"
             "Lists allocations, newest last (GET /v1/allocations). Every page is\n"
             "fetched and printed as one list ({\"items\":[...]} with -o json).\n"
             "  --tenant T     only tenant T's\n"
             "  --state S      only those in state S (pending, placed, provisioning,\n"
             "                 active, releasing, released, failed)\n"
             "  --all-pages    accepted for scripts; all pages are always fetched\n",
    .list = true,
    .path = "/v1/allocations",
    .filters = {{"tenant", "tenant"}, {"state", "state"}, {"all-pages", NULL}},
    .print = print_allocs,
};

static const struct isoctl_simple_cmd alloc_get = {
    .usage = "Usage: isoctl alloc get ID\n"
             "\n"
             "Shows one allocation (GET /v1/allocations/ID): its fields, then a\n"
             "PLACEMENT table (MEMBER NODE GPU PROFILE START WIDTH); START and WIDTH are\n"
             "MIG memory slices. Another tenant's allocation answers not found (exit 3).\n",
    .method = "GET",
    .path = "/v1/allocations/",
    .arg = "ID",
    .print = print_alloc,
};

static const struct isoctl_simple_cmd alloc_release = {
    .usage = "Usage: isoctl alloc release ID\n"
             "\n"
             "Releases an allocation (DELETE /v1/allocations/ID) and prints it, now\n"
             "'released'. Releasing a released or failed allocation prints it unchanged.\n",
    .method = "DELETE",
    .path = "/v1/allocations/",
    .arg = "ID",
    .print = print_alloc,
};

static int alloc_resize(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl alloc resize ID --members N\n"
	    "\n"
	    "Grows or shrinks an active allocation to N members (PATCH\n"
	    "/v1/allocations/ID) and prints it. Growth that does not fit now is refused\n"
	    "(insufficient_capacity, exit 5) and nothing changes; shrinking releases the\n"
	    "highest members.\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("members", required_argument, OPT_MEMBERS), ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_json_ json_t *body = json_object();
	_cleanup_free_ char *path = NULL;
	const char *flag[NUM_FLAGS] = {0};
	long long n;
	int r;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 1, 1, id_arg) < 0)
		return p.exit_code;
	if (!flag[OPT_MEMBERS])
		return isoctl_usage_error(ctx, "missing --members");
	if (isoctl_parse_int(ctx, "--members", flag[OPT_MEMBERS], LLONG_MIN, LLONG_MAX, &n))
		return ISOCTL_EXIT_USAGE;
	path = isoctl_path("/v1/allocations/", p.args[0], "");
	if (!path || !body)
		return isoctl_oom();
	r = isoctl_set_int(body, "members", n);
	return r ? r : isoctl_call_render(ctx, "PATCH", path, body, print_alloc);
}

int isoctl_cmd_alloc(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"create", .run = alloc_create},       {"list", .simple = &alloc_list},
	    {"get", .simple = &alloc_get},         {"resize", .run = alloc_resize},
	    {"release", .simple = &alloc_release},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_alloc, argc, argv);
}

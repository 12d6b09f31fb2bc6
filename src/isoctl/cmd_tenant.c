/* cmd_tenant.c: `isoctl tenant ...`: create, list, show, describe and delete
 * tenants (/v1/tenants). */
#include <stdlib.h>
#include <string.h>

#include "isoctl/isoctl.h"
#include "isostack/model.h"

/* indexes of the flags' values */
enum {
	OPT_DESCRIPTION,
	OPT_ORG,
	OPT_SHARES,
	OPT_ISOLATION,
	OPT_TAGS,
	OPT_IO_URING,
	OPT_MAX_PENDING, /* the limits: last, in enum iso_tenant_limit's order */
	OPT_MAX_LIVE,
	OPT_MAX_USER_PRIORITY,
	OPT_WRITES_PER_S,
	OPT_READS_PER_S,
	NUM_FLAGS
};

#define POLICY_FLAGS                                                                               \
	ISOCTL_FLAG("org", required_argument, OPT_ORG),                                            \
	    ISOCTL_FLAG("shares", required_argument, OPT_SHARES),                                  \
	    ISOCTL_FLAG("isolation", required_argument, OPT_ISOLATION),                            \
	    ISOCTL_FLAG("tags", required_argument, OPT_TAGS),                                      \
	    ISOCTL_FLAG("io-uring", required_argument, OPT_IO_URING),                              \
	    ISOCTL_FLAG("max-pending", required_argument, OPT_MAX_PENDING),                        \
	    ISOCTL_FLAG("max-live", required_argument, OPT_MAX_LIVE),                              \
	    ISOCTL_FLAG("max-user-priority", required_argument, OPT_MAX_USER_PRIORITY),            \
	    ISOCTL_FLAG("writes-per-s", required_argument, OPT_WRITES_PER_S),                      \
	    ISOCTL_FLAG("reads-per-s", required_argument, OPT_READS_PER_S)

#define POLICY_HELP                                                                                \
	"  --org O        its organisation (\"\" for none; move only while it holds nothing)\n"    \
	"  --shares S     fair-share weight among its siblings (default 1)\n"                      \
	"  --isolation C  shared, exclusive-gpu, exclusive-node or exclusive-rack\n"               \
	"  --tags T       comma-separated labels of [a-z0-9-] for admission policies\n"            \
	"  --io-uring on|off  io_uring in its members' seccomp filter (default off;\n"             \
	"                 cluster-admin only; docs/sandbox.md \"seccomp\")\n"                      \
	"  --max-pending N, --max-live N  allocations pending / holding resources at\n"            \
	"                 once (0: the daemon's default; docs/tenancy.md \"Limits\")\n"            \
	"  --max-user-priority N  the highest priority its tenant-users may ask for\n"             \
	"                 (-1000..1000; its tenant-admin may set this one alone)\n"                \
	"  --writes-per-s N, --reads-per-s N  its request rates (0: the defaults)\n"

/* The tenancy policy flags into the body. Returns 0 or an exit code. */
static int policy_body(struct isoctl *ctx, const char *const *flag, json_t *body)
{
	int r = 0;

	if (flag[OPT_ORG])
		r = isoctl_set_string(ctx, body, "org", "--org", flag[OPT_ORG]);
	if (!r && flag[OPT_SHARES]) {
		char *end = NULL;
		double v = strtod(flag[OPT_SHARES], &end);
		if (end == flag[OPT_SHARES] || *end)
			return isoctl_usage_error(ctx, "--shares: \"%s\" is not a number",
			                          flag[OPT_SHARES]);
		r = json_object_set_new(body, "shares", json_real(v)) < 0 ? isoctl_oom() : 0;
	}
	if (!r && flag[OPT_ISOLATION])
		r = isoctl_set_string(ctx, body, "isolation", "--isolation", flag[OPT_ISOLATION]);
	if (!r && flag[OPT_TAGS])
		r = isoctl_set_string(ctx, body, "tags", "--tags", flag[OPT_TAGS]);
	if (!r && flag[OPT_IO_URING]) {
		bool on = strcmp(flag[OPT_IO_URING], "on") == 0;
		if (!on && strcmp(flag[OPT_IO_URING], "off") != 0)
			return isoctl_usage_error(ctx, "--io-uring: \"%s\" is not on or off",
			                          flag[OPT_IO_URING]);
		r = json_object_set_new(body, "io_uring", json_boolean(on)) < 0 ? isoctl_oom() : 0;
	}
	for (int i = 0; !r && i < ISO_TENANT_LIMITS; i++) {
		const struct iso_tenant_limit_def *d = iso_tenant_limit_def(i);
		const char *v = flag[OPT_MAX_PENDING + i];
		json_t *limits;
		long long n;
		if (!v)
			continue;
		r = isoctl_parse_int(ctx, d->flag, v, d->min, d->max, &n);
		if (r)
			return r;
		limits = json_object_get(body, "limits");
		if (!limits && json_object_set_new(body, "limits", limits = json_object()) < 0)
			return isoctl_oom();
		r = isoctl_set_int(limits, d->name, n) < 0 ? isoctl_oom() : 0;
	}
	return r;
}

static const char *const name_arg[] = {"NAME"};

static const char usage_tenant[] =
    "Usage: isoctl tenant SUBCOMMAND ...\n"
    "\n"
    "Tenants own allocations and tokens.\n"
    "  create NAME [--description D]   new tenant (cluster-admin)\n"
    "  list                            tenants the token may see\n"
    "  get NAME                        one tenant\n"
    "  update NAME --description D     change its description (cluster-admin)\n"
    "  delete NAME                     delete it and revoke its tokens (cluster-admin);\n"
    "                                  refused (exit 5) while it holds live allocations\n"
    "Run 'isoctl tenant SUBCOMMAND --help' for details, 'isoctl --help' for global flags.\n";

static void add_tenant_row(struct isoctl_table *t, const json_t *tenant)
{
	static const char *const keys[] = {"name", "org",         "shares", "isolation",
	                                   "pkey", "description", "created"};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(keys); i++)
		isoctl_table_add_json(t, json_object_get(tenant, keys[i]));
}

static int print_tenants(const json_t *body)
{
	static const char *const headers[] = {"NAME", "ORG",         "SHARES", "ISOLATION",
	                                      "PKEY", "DESCRIPTION", "CREATED"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_tenant_row);
}

static int tenant_create(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl tenant create NAME [--description D] [--org O]\n"
	    "           [--shares S] [--isolation C] [--tags T] [LIMIT FLAGS]\n"
	    "\n"
	    "Creates a tenant (POST /v1/tenants; cluster-admin). NAME is\n"
	    "[a-z0-9][a-z0-9._-]{0,62}. A duplicate name exits 5.\n" POLICY_HELP;
	static const struct option options[] = {
	    ISOCTL_FLAG("description", required_argument, OPT_DESCRIPTION), POLICY_FLAGS,
	    ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_json_ json_t *body = NULL;
	const char *flag[NUM_FLAGS] = {0};
	int r;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 1, 1, name_arg) < 0)
		return p.exit_code;
	body = json_object();
	if (!body)
		return isoctl_oom();
	r = isoctl_set_string(ctx, body, "name", "NAME", p.args[0]);
	if (!r && flag[OPT_DESCRIPTION])
		r = isoctl_set_string(ctx, body, "description", "--description",
		                      flag[OPT_DESCRIPTION]);
	if (!r)
		r = policy_body(ctx, flag, body);
	return r ? r : isoctl_call_render(ctx, "POST", "/v1/tenants", body, print_tenants);
}

static const struct isoctl_simple_cmd tenant_list = {
    .usage = "Usage: isoctl tenant list\n"
             "\n"
             "Lists tenants (GET /v1/tenants, every page). A tenant token sees\n"
             "only its own tenant.\n",
    .list = true,
    .path = "/v1/tenants",
    .print = print_tenants,
};

static const struct isoctl_simple_cmd tenant_get = {
    .usage = "Usage: isoctl tenant get NAME\n"
             "\n"
             "Shows one tenant (GET /v1/tenants/NAME). Another tenant's name\n"
             "answers not found (exit 3).\n",
    .method = "GET",
    .path = "/v1/tenants/",
    .arg = "NAME",
    .print = print_tenants,
};

static const struct isoctl_simple_cmd tenant_delete = {
    .usage = "Usage: isoctl tenant delete NAME\n"
             "\n"
             "Deletes a tenant and revokes its tokens (DELETE /v1/tenants/NAME;\n"
             "cluster-admin). Refused with conflict (exit 5) while the tenant holds\n"
             "live allocations. Prints 'tenant NAME deleted'; nothing with -o json.\n",
    .method = "DELETE",
    .path = "/v1/tenants/",
    .arg = "NAME",
    .noun = "tenant",
    .past = "deleted",
};

static int tenant_update(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl tenant update NAME [--description D] [--org O]\n"
	    "           [--shares S] [--isolation C] [--tags T] [LIMIT FLAGS]\n"
	    "\n"
	    "Changes a tenant (PATCH /v1/tenants/NAME; cluster-admin).\n" POLICY_HELP;
	static const struct option options[] = {
	    ISOCTL_FLAG("description", required_argument, OPT_DESCRIPTION), POLICY_FLAGS,
	    ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *flag[NUM_FLAGS] = {0};
	int r;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 1, 1, name_arg) < 0)
		return p.exit_code;
	bool any = false;
	for (int i = 0; i < NUM_FLAGS; i++)
		any |= flag[i] != NULL;
	if (!any)
		return isoctl_usage_error(ctx,
		                          "nothing to change: give --description, a policy flag or a "
		                          "limit flag");
	path = isoctl_path("/v1/tenants/", p.args[0], "");
	body = json_object();
	if (!path || !body)
		return isoctl_oom();
	r = flag[OPT_DESCRIPTION] ? isoctl_set_string(ctx, body, "description", "--description",
	                                              flag[OPT_DESCRIPTION])
	                          : 0;
	if (!r)
		r = policy_body(ctx, flag, body);
	return r ? r : isoctl_call_render(ctx, "PATCH", path, body, print_tenants);
}

int isoctl_cmd_tenant(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"create", .run = tenant_create},     {"list", .simple = &tenant_list},
	    {"get", .simple = &tenant_get},       {"update", .run = tenant_update},
	    {"delete", .simple = &tenant_delete},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_tenant, argc, argv);
}

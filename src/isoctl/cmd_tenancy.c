/* cmd_tenancy.c: `isoctl org|project|quota|queue|usage`: the tenancy policy
 * (docs/tenancy.md "The API"): organisations, projects, quotas per account
 * and resource kind, the pending queue and fair-share standing. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "isoctl/isoctl.h"

enum { OPT_SHARES, OPT_TENANT, OPT_ORG, OPT_KIND, OPT_GUAR, OPT_BORROW, OPT_LEND, NUM_FLAGS };

static const char *const name_arg[] = {"NAME"};
static const char *const account_arg[] = {"ACCOUNT"};

static int set_shares(struct isoctl *ctx, json_t *body, const char *s)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end)
		return isoctl_usage_error(ctx, "--shares: \"%s\" is not a number", s);
	return json_object_set_new(body, "shares", json_real(v)) < 0 ? isoctl_oom() : 0;
}

/* ---- organisations ---- */

static void add_org_row(struct isoctl_table *t, const json_t *o)
{
	isoctl_table_add_json(t, json_object_get(o, "name"));
	isoctl_table_add_json(t, json_object_get(o, "shares"));
	isoctl_table_add_json(t, json_object_get(o, "created"));
}

static int print_orgs(const json_t *body)
{
	static const char *const headers[] = {"NAME", "SHARES", "CREATED"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_org_row);
}

static int org_create(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl org create NAME [--shares S]\n"
	    "\n"
	    "Creates an organisation (POST /v1/orgs; cluster-admin), a group of tenants\n"
	    "whose quotas nest in its own. Organisations and tenants share one\n"
	    "namespace. --shares: fair-share weight among organisations (default 1).\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("shares", required_argument, OPT_SHARES), ISOCTL_GLOBAL_OPTIONS};
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
	if (!r && flag[OPT_SHARES])
		r = set_shares(ctx, body, flag[OPT_SHARES]);
	return r ? r : isoctl_call_render(ctx, "POST", "/v1/orgs", body, print_orgs);
}

static const struct isoctl_simple_cmd org_list = {
    .usage = "Usage: isoctl org list\n"
             "\n"
             "Lists organisations (GET /v1/orgs; cluster roles).\n",
    .list = true,
    .path = "/v1/orgs",
    .print = print_orgs,
};

static const struct isoctl_simple_cmd org_delete = {
    .usage = "Usage: isoctl org delete NAME\n"
             "\n"
             "Deletes an organisation and its quotas (DELETE /v1/orgs/NAME;\n"
             "cluster-admin); refused (exit 5) while tenants belong to it.\n",
    .method = "DELETE",
    .path = "/v1/orgs/",
    .arg = "NAME",
    .noun = "organisation",
    .past = "deleted",
};

int isoctl_cmd_org(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl org create|list|delete ...\n"
	    "\n"
	    "Organisations group tenants; quotas nest.\n"
	    "  create NAME [--shares S]   new organisation (cluster-admin)\n"
	    "  list                       organisations (cluster roles)\n"
	    "  delete NAME                delete an empty one\n";
	static const struct isoctl_cmd verbs[] = {
	    {"create", .run = org_create},
	    {"list", .simple = &org_list},
	    {"delete", .simple = &org_delete},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage, argc, argv);
}

/* ---- projects ---- */

static void add_project_row(struct isoctl_table *t, const json_t *o)
{
	isoctl_table_add_json(t, json_object_get(o, "tenant"));
	isoctl_table_add_json(t, json_object_get(o, "name"));
	isoctl_table_add_json(t, json_object_get(o, "shares"));
}

static int print_projects(const json_t *body)
{
	static const char *const headers[] = {"TENANT", "NAME", "SHARES"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_project_row);
}

static int project_run(struct isoctl *ctx, int argc, char **argv, const char *verb)
{
	static const char usage_create[] =
	    "Usage: isoctl project create NAME --tenant T [--shares S]\n"
	    "\n"
	    "Creates a project of tenant T (POST /v1/tenants/T/projects; its\n"
	    "tenant-admin or the cluster-admin). \"T/NAME\" must be shorter than 64\n"
	    "characters. Allocations name it with 'alloc create --project NAME'.\n";
	static const char usage_list[] =
	    "Usage: isoctl project list --tenant T\n"
	    "\n"
	    "Lists tenant T's projects (GET /v1/tenants/T/projects).\n";
	static const char usage_delete[] =
	    "Usage: isoctl project delete NAME --tenant T\n"
	    "\n"
	    "Deletes a project and its quotas (DELETE /v1/tenants/T/projects/NAME);\n"
	    "refused (exit 5) while live allocations are charged to it.\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("tenant", required_argument, OPT_TENANT),
	    ISOCTL_FLAG("shares", required_argument, OPT_SHARES), ISOCTL_GLOBAL_OPTIONS};
	bool list = strcmp(verb, "list") == 0, create = strcmp(verb, "create") == 0;
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options,
	                                       create ? usage_create
	                                       : list ? usage_list
	                                              : usage_delete);
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL, *tpath = NULL;
	const char *flag[NUM_FLAGS] = {0};
	int r = 0;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, list ? 0 : 1, list ? 0 : 1, name_arg) < 0)
		return p.exit_code;
	if (!flag[OPT_TENANT])
		return isoctl_usage_error(ctx, "missing --tenant T");
	if (flag[OPT_SHARES] && !create)
		return isoctl_usage_error(ctx, "--shares is for project create");
	tpath = isoctl_path("/v1/tenants/", flag[OPT_TENANT], "/projects");
	if (!tpath)
		return isoctl_oom();
	if (list)
		return isoctl_call_render(ctx, "GET", tpath, NULL, print_projects);
	if (!create) {
		_cleanup_response_ struct iso_response resp = {0};
		_cleanup_free_ char *prefix =
		    isoctl_path("/v1/tenants/", flag[OPT_TENANT], "/projects/");
		path = prefix ? isoctl_path(prefix, p.args[0], "") : NULL;
		if (!path)
			return isoctl_oom();
		r = isoctl_call(ctx, "DELETE", path, NULL, &resp);
		if (r)
			return r;
		if (ctx->output == ISOCTL_OUT_TABLE) {
			printf("project %s/%s deleted\n", flag[OPT_TENANT], p.args[0]);
			return 0;
		}
		return isoctl_render(ctx, &resp, NULL);
	}
	body = json_object();
	if (!body)
		return isoctl_oom();
	r = isoctl_set_string(ctx, body, "name", "NAME", p.args[0]);
	if (!r && flag[OPT_SHARES])
		r = set_shares(ctx, body, flag[OPT_SHARES]);
	return r ? r : isoctl_call_render(ctx, "POST", tpath, body, print_projects);
}

static int project_create(struct isoctl *ctx, int argc, char **argv)
{
	return project_run(ctx, argc, argv, "create");
}
static int project_list(struct isoctl *ctx, int argc, char **argv)
{
	return project_run(ctx, argc, argv, "list");
}
static int project_delete(struct isoctl *ctx, int argc, char **argv)
{
	return project_run(ctx, argc, argv, "delete");
}

int isoctl_cmd_project(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] = "Usage: isoctl project create|list|delete ... --tenant T\n"
	                            "\n"
	                            "Projects divide a tenant's quota among its teams.\n"
	                            "  create NAME --tenant T [--shares S]\n"
	                            "  list --tenant T\n"
	                            "  delete NAME --tenant T\n";
	static const struct isoctl_cmd verbs[] = {
	    {"create", .run = project_create},
	    {"list", .run = project_list},
	    {"delete", .run = project_delete},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage, argc, argv);
}

/* ---- quotas ---- */

/* ACCOUNT: "TENANT", "TENANT/PROJECT", or an organisation with --org. */
static char *quota_path(const char *account, bool org)
{
	const char *slash = strchr(account, '/');

	if (org)
		return isoctl_path("/v1/orgs/", account, "/quota");
	if (!slash)
		return isoctl_path("/v1/tenants/", account, "/quota");
	_cleanup_free_ char *tenant = strndup(account, (size_t)(slash - account));
	_cleanup_free_ char *prefix =
	    tenant ? isoctl_path("/v1/tenants/", tenant, "/projects/") : NULL;
	return prefix ? isoctl_path(prefix, slash + 1, "/quota") : NULL;
}

static int print_quota(const json_t *q)
{
	static const char *const headers[] = {"KIND", "GUARANTEED", "BORROW_LIMIT", "LEND_LIMIT",
	                                      "USED"};
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const json_t *quotas = json_object_get(q, "quotas"), *used = json_object_get(q, "used");
	const char *kind;
	json_t *v;

	printf("account: %s (%s", json_string_value(json_object_get(q, "account")),
	       json_string_value(json_object_get(q, "level")));
	if (json_is_string(json_object_get(q, "parent")))
		printf(" of %s", json_string_value(json_object_get(q, "parent")));
	printf(")\n");
	isoctl_table_init(&t, ISO_ARRAY_SIZE(headers), headers);
	json_object_foreach ((json_t *)quotas, kind, v) {
		static const char *const keys[] = {"guaranteed", "borrow_limit", "lend_limit"};
		isoctl_table_add(&t, kind);
		for (size_t i = 0; i < ISO_ARRAY_SIZE(keys); i++) {
			json_t *x = json_object_get(v, keys[i]);
			if (json_is_null(x))
				isoctl_table_add(&t, "none");
			else
				isoctl_table_add_json(&t, x);
		}
		isoctl_table_add_json(&t, json_object_get(used, kind));
	}
	return isoctl_table_print(&t);
}

static int quota_get(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl quota get ACCOUNT [--org]\n"
	    "\n"
	    "Shows an account's quota per resource kind and what it uses now.\n"
	    "ACCOUNT is a tenant, TENANT/PROJECT, or an organisation with --org\n"
	    "(GET /v1/tenants/T/quota, /v1/tenants/T/projects/P/quota,\n"
	    "/v1/orgs/O/quota). A tenant token sees its own tenant and projects only.\n";
	static const struct option options[] = {ISOCTL_FLAG("org", no_argument, OPT_ORG),
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	const char *flag[NUM_FLAGS] = {0};
	_cleanup_free_ char *path = NULL;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 1, 1, account_arg) < 0)
		return p.exit_code;
	path = quota_path(p.args[0], flag[OPT_ORG] != NULL);
	if (!path)
		return isoctl_oom();
	return isoctl_call_render(ctx, "GET", path, NULL, print_quota);
}

/* "none" -> null (unlimited), else a non-negative integer. */
static int set_limit(struct isoctl *ctx, json_t *obj, const char *key, const char *flag,
                     const char *s)
{
	long long v;

	if (!s)
		return 0;
	if (strcmp(s, "none") == 0)
		return json_object_set_new(obj, key, json_null()) < 0 ? isoctl_oom() : 0;
	if (isoctl_parse_int(ctx, flag, s, 0, LLONG_MAX, &v))
		return ISOCTL_EXIT_USAGE;
	return isoctl_set_int(obj, key, v);
}

static int quota_set(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl quota set ACCOUNT [--org] --kind K --guaranteed N\n"
	    "                        [--borrow-limit N|none] [--lend-limit N|none]\n"
	    "\n"
	    "Sets one resource kind of an account's quota (PUT .../quota): the\n"
	    "cluster-admin for organisations and tenants, a tenant-admin for its own\n"
	    "projects. K: gpus (whole GPUs), cpus, memory_mib, nodes, or a GPU model\n"
	    "(h100-80gb: MIG compute slices). Limits: 'none' or absent is unlimited.\n"
	    "Guarantees must nest: refused (exit 6) naming quota.ACCOUNT.KIND.\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("org", no_argument, OPT_ORG),
	    ISOCTL_FLAG("kind", required_argument, OPT_KIND),
	    ISOCTL_FLAG("guaranteed", required_argument, OPT_GUAR),
	    ISOCTL_FLAG("borrow-limit", required_argument, OPT_BORROW),
	    ISOCTL_FLAG("lend-limit", required_argument, OPT_LEND),
	    ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	const char *flag[NUM_FLAGS] = {0};
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *body = NULL;
	json_t *q;
	int r;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 1, 1, account_arg) < 0)
		return p.exit_code;
	if (!flag[OPT_KIND] || !flag[OPT_GUAR])
		return isoctl_usage_error(ctx, "missing --kind K or --guaranteed N");
	path = quota_path(p.args[0], flag[OPT_ORG] != NULL);
	body = json_object();
	q = json_object();
	if (!path || !body || !q || json_object_set_new(body, flag[OPT_KIND], q) < 0)
		return isoctl_oom();
	r = set_limit(ctx, q, "guaranteed", "--guaranteed", flag[OPT_GUAR]);
	if (!r)
		r = set_limit(ctx, q, "borrow_limit", "--borrow-limit", flag[OPT_BORROW]);
	if (!r)
		r = set_limit(ctx, q, "lend_limit", "--lend-limit", flag[OPT_LEND]);
	return r ? r : isoctl_call_render(ctx, "PUT", path, body, print_quota);
}

int isoctl_cmd_quota(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] = "Usage: isoctl quota get|set ACCOUNT ...\n"
	                            "\n"
	                            "Quotas: per account and resource kind, a guaranteed part,\n"
	                            "a borrowing limit and a lending limit (docs/tenancy.md).\n"
	                            "  get ACCOUNT [--org]\n"
	                            "  set ACCOUNT [--org] --kind K --guaranteed N\n"
	                            "      [--borrow-limit N|none] [--lend-limit N|none]\n";
	static const struct isoctl_cmd verbs[] = {
	    {"get", .run = quota_get},
	    {"set", .run = quota_set},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage, argc, argv);
}

/* ---- queue and usage ---- */

static void add_queue_row(struct isoctl_table *t, const json_t *o)
{
	isoctl_table_add_json(t, json_object_get(o, "position"));
	isoctl_table_add_json(t, json_object_get(o, "id"));
	isoctl_table_add_json(t, json_object_get(o, "tenant"));
	isoctl_table_add_json(t, json_object_get(o, "project"));
	isoctl_table_add_json(t, json_object_get(o, "priority"));
	isoctl_table_add_json(t, json_object_get(o, "waiting"));
}

static int print_queue(const json_t *body)
{
	static const char *const headers[] = {"POS",     "ID",       "TENANT",
	                                      "PROJECT", "PRIORITY", "WAITING"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_queue_row);
}

const struct isoctl_simple_cmd isoctl_cmd_queue = {
    .usage = "Usage: isoctl queue\n"
             "\n"
             "The pending queue in fair-share order (GET /v1/queue): position, and why\n"
             "each waits. A tenant token sees only its own allocations; -o json adds\n"
             "the ordering reason.\n",
    .method = "GET",
    .path = "/v1/queue",
    .list = true,
    .print = print_queue,
};

/* A ratio to 3 decimals; "-" when the server leaves it out (a tenant token
 * may not see numbers derived from other tenants' state), `null_text` for
 * null. */
static void add_ratio(struct isoctl_table *t, const json_t *v, const char *null_text)
{
	if (json_is_null(v))
		isoctl_table_add(t, null_text);
	else if (json_is_number(v))
		isoctl_table_addf(t, "%.3f", json_number_value(v));
	else
		isoctl_table_add(t, NULL);
}

static void add_usage_row(struct isoctl_table *t, const json_t *o)
{
	isoctl_table_add_json(t, json_object_get(o, "account"));
	isoctl_table_add_json(t, json_object_get(o, "level"));
	isoctl_table_add_json(t, json_object_get(o, "shares"));
	add_ratio(t, json_object_get(o, "share"), "-");
	add_ratio(t, json_object_get(o, "usage_share"), "-");
	add_ratio(t, json_object_get(o, "level_fair_share"), "inf");
	isoctl_table_add_json(t, json_object_get(o, "rank"));
	add_ratio(t, json_object_get(o, "dominant_share"), "-");
}

/* The headers say what each number is; the legend below says how it is
 * computed (docs/cli.md, docs/tenancy.md "Fair Tree"). */
static int print_usage(const json_t *body)
{
	static const char *const headers[] = {
	    "ACCOUNT",           "LEVEL",      "SHARES", "SHARE_OF_SIBLINGS",
	    "USAGE_OF_SIBLINGS", "FAIR_SHARE", "RANK",   "HOLDS_NOW"};
	int r = isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_usage_row);

	if (r)
		return r;
	fputs("\n"
	      "SHARE_OF_SIBLINGS  shares / the shares of the account and its siblings\n"
	      "USAGE_OF_SIBLINGS  decayed dominant usage / the siblings' (half-life 7 days\n"
	      "                   by default)\n"
	      "FAIR_SHARE         SHARE_OF_SIBLINGS / USAGE_OF_SIBLINGS (inf: no usage yet);\n"
	      "                   higher is served first\n"
	      "RANK               order in which pending work of leaf accounts is served\n"
	      "                   (1 first; - for an account with sub-accounts)\n"
	      "HOLDS_NOW          dominant share of the cluster the account holds now\n",
	      stdout);
	return 0;
}

const struct isoctl_simple_cmd isoctl_cmd_usage = {
    .usage = "Usage: isoctl usage\n"
             "\n"
             "Fair-share standing of every account the token may see (GET /v1/usage),\n"
             "one row per account, with a legend below the table:\n"
             "  SHARES             the account's fair-share weight (--shares)\n"
             "  SHARE_OF_SIBLINGS  shares / the shares of the account and its siblings\n"
             "  USAGE_OF_SIBLINGS  its decayed dominant usage / its siblings'\n"
             "  FAIR_SHARE         Fair Tree's level fair share, SHARE_OF_SIBLINGS /\n"
             "                     USAGE_OF_SIBLINGS (inf: no usage); higher goes first\n"
             "  RANK               1-based serving order of a leaf account\n"
             "  HOLDS_NOW          dominant share of the cluster it holds now\n"
             "Figures relative to siblings are shown to cluster roles and for a tenant's\n"
             "projects; a tenant token sees '-' for its tenant's own. Every page is read.\n"
             "-o json adds decayed usage per kind and what it uses now.\n",
    .list = true,
    .path = "/v1/usage",
    .print = print_usage,
};

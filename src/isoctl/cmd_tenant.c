/* cmd_tenant.c: `isoctl tenant ...`: create, list, show, describe and delete
 * tenants (/v1/tenants). */
#include <string.h>

#include "isoctl/isoctl.h"

enum { OPT_DESCRIPTION = ISOCTL_OPT_LOCAL };

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
	isoctl_table_add_json(t, json_object_get(tenant, "name"));
	isoctl_table_add_json(t, json_object_get(tenant, "description"));
	isoctl_table_add_json(t, json_object_get(tenant, "created"));
}

static int print_tenants(const json_t *body)
{
	static const char *const headers[] = {"NAME", "DESCRIPTION", "CREATED"};
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const json_t *items = json_object_get(body, "items");
	size_t i;
	json_t *it;

	isoctl_table_init(&t, ISO_ARRAY_SIZE(headers), headers);
	if (!items && json_is_object(body)) /* one tenant */
		add_tenant_row(&t, body);
	json_array_foreach(items, i, it)
	{
		add_tenant_row(&t, it);
	}
	return isoctl_table_print(&t);
}

static int tenant_create(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] = "Usage: isoctl tenant create NAME [--description D]\n"
	                            "\n"
	                            "Creates a tenant (POST /v1/tenants; cluster-admin). NAME is\n"
	                            "[a-z0-9][a-z0-9._-]{0,62}. A duplicate name exits 5.\n";
	static const struct option options[] = {
	    {"description", required_argument, NULL, OPT_DESCRIPTION}, ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	const char *arg, *desc = NULL;
	json_t *body;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0)
		if (c == OPT_DESCRIPTION)
			desc = arg;
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 1, 1, name_arg);
	if (r)
		return r;
	body = json_object();
	if (!body)
		return isoctl_oom();
	r = isoctl_set_string(ctx, body, "name", "NAME", p.args[0]);
	if (!r && desc)
		r = isoctl_set_string(ctx, body, "description", "--description", desc);
	if (!r)
		r = isoctl_call(ctx, "POST", "/v1/tenants", body, &resp);
	json_decref(body);
	return r ? r : isoctl_render(ctx, &resp, print_tenants);
}

static int tenant_list(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl tenant list\n"
	    "\n"
	    "Lists tenants (GET /v1/tenants, every page). A tenant token sees\n"
	    "only its own tenant.\n";
	static const struct option options[] = {ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	const char *arg;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0)
		;
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 0, 0, NULL);
	if (r)
		return r;
	r = isoctl_list(ctx, "/v1/tenants", &resp);
	return r ? r : isoctl_render(ctx, &resp, print_tenants);
}

/* get and delete: NAME only. */
static int tenant_one(struct isoctl *ctx, int argc, char **argv, const char *usage,
                      const char *method)
{
	static const struct option options[] = {ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = NULL;
	const char *arg;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0)
		;
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 1, 1, name_arg);
	if (r)
		return r;
	path = isoctl_path("/v1/tenants/", p.args[0], "");
	if (!path)
		return isoctl_oom();
	r = isoctl_call(ctx, method, path, NULL, &resp);
	if (r)
		return r;
	if (strcmp(method, "DELETE") == 0) {
		if (ctx->output == ISOCTL_OUT_JSON)
			isoctl_print_json(resp.body); /* 204: no body, nothing printed */
		else
			printf("tenant %s deleted\n", p.args[0]);
		return 0;
	}
	return isoctl_render(ctx, &resp, print_tenants);
}

static int tenant_get(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl tenant get NAME\n"
	    "\n"
	    "Shows one tenant (GET /v1/tenants/NAME). Another tenant's name\n"
	    "answers not found (exit 3).\n";
	return tenant_one(ctx, argc, argv, usage, "GET");
}

static int tenant_delete(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl tenant delete NAME\n"
	    "\n"
	    "Deletes a tenant and revokes its tokens (DELETE /v1/tenants/NAME;\n"
	    "cluster-admin). Refused with conflict (exit 5) while the tenant holds\n"
	    "live allocations. Prints 'tenant NAME deleted'; nothing with -o json.\n";
	return tenant_one(ctx, argc, argv, usage, "DELETE");
}

static int tenant_update(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] = "Usage: isoctl tenant update NAME --description D\n"
	                            "\n"
	                            "Changes a tenant's description (PATCH /v1/tenants/NAME;\n"
	                            "cluster-admin).\n";
	static const struct option options[] = {
	    {"description", required_argument, NULL, OPT_DESCRIPTION}, ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = NULL;
	const char *arg, *desc = NULL;
	json_t *body;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0)
		if (c == OPT_DESCRIPTION)
			desc = arg;
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 1, 1, name_arg);
	if (r)
		return r;
	if (!desc)
		return isoctl_usage_error(ctx, "missing --description");
	path = isoctl_path("/v1/tenants/", p.args[0], "");
	body = json_object();
	if (!path || !body) {
		json_decref(body);
		return isoctl_oom();
	}
	r = isoctl_set_string(ctx, body, "description", "--description", desc);
	if (!r)
		r = isoctl_call(ctx, "PATCH", path, body, &resp);
	json_decref(body);
	return r ? r : isoctl_render(ctx, &resp, print_tenants);
}

int isoctl_cmd_tenant(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"create", tenant_create}, {"list", tenant_list},     {"get", tenant_get},
	    {"update", tenant_update}, {"delete", tenant_delete},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_tenant, argc, argv);
}

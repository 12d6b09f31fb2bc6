/* cmd_token.c: `isoctl token ...`: issue, list, show and revoke API tokens
 * (/v1/tokens). The secret of a new token is printed once, on stdout only. */
#include <limits.h>
#include <string.h>

#include "isoctl/isoctl.h"

enum {
	OPT_ROLE = ISOCTL_OPT_LOCAL,
	OPT_TENANT,
	OPT_USER,
	OPT_DESCRIPTION,
	OPT_EXPIRES_IN,
};

static const char *const id_arg[] = {"ID"};

static const char usage_token[] =
    "Usage: isoctl token SUBCOMMAND ...\n"
    "\n"
    "Bearer tokens for the API. A token is iso_<id>_<secret>; only the id is\n"
    "shown after issue.\n"
    "  issue --role ROLE [--tenant T] [--user U] [--description D] [--expires-in S]\n"
    "  list [--tenant T]      tokens the caller may see\n"
    "  get ID                 one token (never its secret)\n"
    "  revoke ID              revoke it\n"
    "Run 'isoctl token SUBCOMMAND --help' for details, 'isoctl --help' for global flags.\n";

static void add_token_row(struct isoctl_table *t, const json_t *tok)
{
	static const char *const keys[] = {"id",      "role",    "tenant", "user",
	                                   "created", "expires", "revoked"};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(keys); i++)
		isoctl_table_add_json(t, json_object_get(tok, keys[i]));
}

static int print_tokens(const json_t *body)
{
	static const char *const headers[] = {"ID",      "ROLE",    "TENANT", "USER",
	                                      "CREATED", "EXPIRES", "REVOKED"};
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const json_t *items = json_object_get(body, "items");
	size_t i;
	json_t *it;

	isoctl_table_init(&t, ISO_ARRAY_SIZE(headers), headers);
	if (!items && json_is_object(body)) /* one token */
		add_token_row(&t, body);
	json_array_foreach(items, i, it)
	{
		add_token_row(&t, it);
	}
	return isoctl_table_print(&t);
}

static int print_issued(const json_t *body)
{
	static const char *const keys[] = {"id",          "role",    "tenant",  "user",
	                                   "description", "created", "expires", "token"};
	_cleanup_(isoctl_table_clear) struct isoctl_table t;

	isoctl_table_init(&t, 2, NULL);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(keys); i++) {
		isoctl_table_addf(&t, "%s:", keys[i]);
		isoctl_table_add_json(&t, json_object_get(body, keys[i]));
	}
	return isoctl_table_print(&t);
}

static int token_issue(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl token issue --role ROLE [--tenant T] [--user U]\n"
	    "                          [--description D] [--expires-in SECONDS]\n"
	    "\n"
	    "Issues a token (POST /v1/tokens) and prints its id and secret. The secret\n"
	    "is shown this once only.\n"
	    "  --role ROLE          cluster-admin, auditor, tenant-admin or tenant-user\n"
	    "  --tenant T           tenant of a tenant role (a tenant-admin may omit it)\n"
	    "  --user U             who holds the token: a label, owner of its allocations\n"
	    "  --description D      free text\n"
	    "  --expires-in S       lifetime in seconds (default: never expires)\n"
	    "cluster-admin may issue any role; tenant-admin only tenant roles of its tenant.\n";
	static const struct option options[] = {
	    {"role", required_argument, NULL, OPT_ROLE},
	    {"tenant", required_argument, NULL, OPT_TENANT},
	    {"user", required_argument, NULL, OPT_USER},
	    {"description", required_argument, NULL, OPT_DESCRIPTION},
	    {"expires-in", required_argument, NULL, OPT_EXPIRES_IN},
	    ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_json_ json_t *body = json_object();
	const char *arg, *role = NULL, *tenant = NULL, *user = NULL, *desc = NULL;
	const char *expires = NULL;
	long long exp = 0;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0) {
		switch (c) {
		case OPT_ROLE:
			role = arg;
			break;
		case OPT_TENANT:
			tenant = arg;
			break;
		case OPT_USER:
			user = arg;
			break;
		case OPT_DESCRIPTION:
			desc = arg;
			break;
		case OPT_EXPIRES_IN:
			expires = arg;
			break;
		}
	}
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 0, 0, NULL);
	if (r)
		return r;
	if (!role)
		return isoctl_usage_error(ctx, "missing --role");
	/* The server checks the range; here only that it is a number. */
	if (expires && isoctl_parse_int(ctx, "--expires-in", expires, LLONG_MIN, LLONG_MAX, &exp))
		return ISOCTL_EXIT_USAGE;
	if (!body)
		return isoctl_oom();
	r = isoctl_set_string(ctx, body, "role", "--role", role);
	if (!r && tenant)
		r = isoctl_set_string(ctx, body, "tenant", "--tenant", tenant);
	if (!r && user)
		r = isoctl_set_string(ctx, body, "user", "--user", user);
	if (!r && desc)
		r = isoctl_set_string(ctx, body, "description", "--description", desc);
	if (!r && expires)
		r = isoctl_set_int(body, "expires_in_s", exp);
	if (!r)
		r = isoctl_call(ctx, "POST", "/v1/tokens", body, &resp);
	if (!r)
		r = isoctl_render(ctx, &resp, print_issued);
	/* On stderr in every output mode, so scripts reading stdout still see it. */
	if (!r)
		fputs("isoctl: warning: the token secret is shown only once; store it now\n",
		      stderr);
	return r;
}

static int token_list(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl token list [--tenant T]\n"
	    "\n"
	    "Lists tokens (GET /v1/tokens, every page): all for cluster-admin and\n"
	    "auditor, the tenant's for tenant-admin, itself for tenant-user.\n"
	    "  --tenant T   only tokens of tenant T\n";
	static const struct option options[] = {{"tenant", required_argument, NULL, OPT_TENANT},
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = strdup("/v1/tokens");
	const char *arg, *tenant = NULL;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0)
		if (c == OPT_TENANT)
			tenant = arg;
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 0, 0, NULL);
	if (r)
		return r;
	if (!path || (tenant && isoctl_query_add(&path, "tenant", tenant) < 0))
		return isoctl_oom();
	r = isoctl_list(ctx, path, &resp);
	return r ? r : isoctl_render(ctx, &resp, print_tokens);
}

/* get and revoke: ID only. */
static int token_one(struct isoctl *ctx, int argc, char **argv, const char *usage,
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
	r = isoctl_want_args(ctx, &p, 1, 1, id_arg);
	if (r)
		return r;
	path = isoctl_path("/v1/tokens/", p.args[0], "");
	if (!path)
		return isoctl_oom();
	r = isoctl_call(ctx, method, path, NULL, &resp);
	if (r)
		return r;
	if (strcmp(method, "DELETE") == 0) {
		if (ctx->output == ISOCTL_OUT_JSON)
			isoctl_print_json(resp.body); /* 204: no body, nothing printed */
		else
			printf("token %s revoked\n", p.args[0]);
		return 0;
	}
	return isoctl_render(ctx, &resp, print_tokens);
}

static int token_get(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl token get ID\n"
	    "\n"
	    "Shows one token (GET /v1/tokens/ID), never its secret. ID is the\n"
	    "12 hex characters after 'iso_'.\n";
	return token_one(ctx, argc, argv, usage, "GET");
}

static int token_revoke(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl token revoke ID\n"
	    "\n"
	    "Revokes a token (DELETE /v1/tokens/ID); it answers 401 from then on.\n"
	    "A tenant-user may revoke only itself. Prints 'token ID revoked';\n"
	    "nothing with -o json.\n";
	return token_one(ctx, argc, argv, usage, "DELETE");
}

int isoctl_cmd_token(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"issue", token_issue},
	    {"list", token_list},
	    {"get", token_get},
	    {"revoke", token_revoke},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_token, argc, argv);
}

/* cmd_token.c: `isoctl token ...`: issue, list, show and revoke API tokens
 * (/v1/tokens). The secret of a new token is printed once, on stdout only. */
#include <limits.h>

#include "isoctl/isoctl.h"

/* Indexes of the flags' values. */
enum { OPT_ROLE, OPT_TENANT, OPT_USER, OPT_DESCRIPTION, OPT_EXPIRES_IN, OPT_NODE, NUM_FLAGS };

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

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_token_row);
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
	    "Usage: isoctl token issue --role ROLE [--tenant T] [--user U] [--node N]\n"
	    "                          [--description D] [--expires-in SECONDS]\n"
	    "\n"
	    "Issues a token (POST /v1/tokens) and prints its id and secret. The secret\n"
	    "is shown this once only. -o token prints the secret alone, for scripts:\n"
	    "  ALICE=$(isoctl token issue --role tenant-user --tenant acme -o token)\n"
	    "  --role ROLE          cluster-admin, auditor, tenant-admin, tenant-user or\n"
	    "                       node-agent\n"
	    "  --node N             the node of a node-agent token (its agent's credential)\n"
	    "  --tenant T           tenant of a tenant role (a tenant-admin may omit it)\n"
	    "  --user U             who holds the token: a label, owner of its allocations\n"
	    "  --description D      free text\n"
	    "  --expires-in S       lifetime in seconds (default: never expires)\n"
	    "cluster-admin may issue any role; tenant-admin only tenant roles of its tenant.\n";
	static const struct option options[] = {
	    ISOCTL_FLAG("role", required_argument, OPT_ROLE),
	    ISOCTL_FLAG("tenant", required_argument, OPT_TENANT),
	    ISOCTL_FLAG("user", required_argument, OPT_USER),
	    ISOCTL_FLAG("description", required_argument, OPT_DESCRIPTION),
	    ISOCTL_FLAG("expires-in", required_argument, OPT_EXPIRES_IN),
	    ISOCTL_FLAG("node", required_argument, OPT_NODE),
	    ISOCTL_GLOBAL_OPTIONS};
	/* The flags passed on as strings: which flag, body key, name in errors. */
	static const struct {
		int opt;
		const char *key, *what;
	} strings[] = {{OPT_ROLE, "role", "--role"},
	               {OPT_TENANT, "tenant", "--tenant"},
	               {OPT_USER, "user", "--user"},
	               {OPT_DESCRIPTION, "description", "--description"},
	               {OPT_NODE, "node", "--node"}};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_json_ json_t *body = json_object();
	const char *flag[NUM_FLAGS] = {0};
	long long exp = 0;
	int r = 0;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 0, 0, NULL) < 0)
		return p.exit_code;
	if (!flag[OPT_ROLE])
		return isoctl_usage_error(ctx, "missing --role");
	/* The server checks the range; here only that it is a number. */
	if (flag[OPT_EXPIRES_IN] &&
	    isoctl_parse_int(ctx, "--expires-in", flag[OPT_EXPIRES_IN], LLONG_MIN, LLONG_MAX, &exp))
		return ISOCTL_EXIT_USAGE;
	if (!body)
		return isoctl_oom();
	for (size_t i = 0; !r && i < ISO_ARRAY_SIZE(strings); i++)
		if (flag[strings[i].opt])
			r = isoctl_set_string(ctx, body, strings[i].key, strings[i].what,
			                      flag[strings[i].opt]);
	if (!r && flag[OPT_EXPIRES_IN])
		r = isoctl_set_int(body, "expires_in_s", exp);
	ctx->token_output = true; /* -o token prints only the secret */
	if (!r)
		r = isoctl_call_render(ctx, "POST", "/v1/tokens", body, print_issued);
	/* On stderr in every output mode, so scripts reading stdout still see it. */
	if (!r)
		fputs("isoctl: warning: the token secret is shown only once; store it now\n",
		      stderr);
	return r;
}

static const struct isoctl_simple_cmd token_list = {
    .usage = "Usage: isoctl token list [--tenant T]\n"
             "\n"
             "Lists tokens (GET /v1/tokens, every page): all for cluster-admin and\n"
             "auditor, the tenant's for tenant-admin, itself for tenant-user.\n"
             "  --tenant T   only tokens of tenant T\n",
    .list = true,
    .path = "/v1/tokens",
    .filters = {{"tenant", "tenant"}},
    .print = print_tokens,
};

static const struct isoctl_simple_cmd token_get = {
    .usage = "Usage: isoctl token get ID\n"
             "\n"
             "Shows one token (GET /v1/tokens/ID), never its secret. ID is the\n"
             "12 hex characters after 'iso_'.\n",
    .method = "GET",
    .path = "/v1/tokens/",
    .arg = "ID",
    .print = print_tokens,
};

static const struct isoctl_simple_cmd token_revoke = {
    .usage = "Usage: isoctl token revoke ID\n"
             "\n"
             "Revokes a token (DELETE /v1/tokens/ID); it answers 401 from then on.\n"
             "A tenant-user may revoke only itself. Prints 'token ID revoked';\n"
             "nothing with -o json.\n",
    .method = "DELETE",
    .path = "/v1/tokens/",
    .arg = "ID",
    .noun = "token",
    .past = "revoked",
};

int isoctl_cmd_token(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"issue", .run = token_issue},
	    {"list", .simple = &token_list},
	    {"get", .simple = &token_get},
	    {"revoke", .simple = &token_revoke},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_token, argc, argv);
}

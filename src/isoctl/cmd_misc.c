/* cmd_misc.c: the one-word commands that read one object: health, version,
 * whoami and capacity. */
#include <string.h>

#include "isoctl/isoctl.h"

static const struct option no_options[] = {ISOCTL_GLOBAL_OPTIONS};

/* Parses a command that takes no arguments and GETs `path`. */
static int get_simple(struct isoctl *ctx, int argc, char **argv, const char *usage,
                      const char *path, struct iso_response *resp)
{
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, no_options, usage);
	const char *arg;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0)
		; /* no options of their own */
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 0, 0, NULL);
	if (r)
		return r;
	return isoctl_call(ctx, "GET", path, NULL, resp);
}

static int print_health(const json_t *body)
{
	const char *s = json_string_value(json_object_get(body, "status"));

	isoctl_fputs_clean(s ? s : "-", stdout);
	fputc('\n', stdout);
	return 0;
}

int isoctl_cmd_health(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl health\n"
	    "\n"
	    "Asks the server whether it is up (GET /v1/healthz, no token\n"
	    "needed) and prints its status, \"ok\". Exits 7 when the server\n"
	    "cannot be reached.\n";
	_cleanup_response_ struct iso_response resp = {0};
	int r = get_simple(ctx, argc, argv, usage, "/v1/healthz", &resp);

	return r ? r : isoctl_render(ctx, &resp, print_health);
}

static int print_version(const json_t *body)
{
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const char *key;
	json_t *v;

	isoctl_table_init(&t, 2, NULL);
	isoctl_table_add(&t, "client:");
	isoctl_table_add(&t, ISO_VERSION);
	json_object_foreach((json_t *)body, key, v)
	{
		isoctl_table_addf(&t, "%s:", strcmp(key, "version") == 0 ? "server" : key);
		isoctl_table_add_json(&t, v);
	}
	return isoctl_table_print(&t);
}

int isoctl_cmd_version(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl version\n"
	    "\n"
	    "Prints this client's version and the server's (GET /v1/version):\n"
	    "API version, store, placement policy and fabric driver.\n";
	_cleanup_response_ struct iso_response resp = {0};
	int r = get_simple(ctx, argc, argv, usage, "/v1/version", &resp);

	return r ? r : isoctl_render(ctx, &resp, print_version);
}

int isoctl_cmd_whoami(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl whoami\n"
	    "\n"
	    "Prints the token in use as the server sees it (GET /v1/whoami):\n"
	    "token_id, role, tenant and user. Never prints the secret.\n";
	_cleanup_response_ struct iso_response resp = {0};
	int r = get_simple(ctx, argc, argv, usage, "/v1/whoami", &resp);

	return r ? r : isoctl_render(ctx, &resp, isoctl_print_object);
}

int isoctl_cmd_capacity(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl capacity\n"
	    "\n"
	    "Prints the cluster's aggregate capacity and what is free (GET /v1/capacity):\n"
	    "nodes, GPUs, MIG memory and compute slices, CPUs and memory (MiB).\n"
	    "Every role may ask; there is no per-tenant breakdown.\n";
	_cleanup_response_ struct iso_response resp = {0};
	int r = get_simple(ctx, argc, argv, usage, "/v1/capacity", &resp);

	return r ? r : isoctl_render(ctx, &resp, isoctl_print_object);
}

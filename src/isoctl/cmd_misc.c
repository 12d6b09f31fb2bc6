/* cmd_misc.c: the one-word commands that read one object: health, version,
 * whoami and capacity. Each is a table for the simple-command runner. */
#include <string.h>

#include "isoctl/isoctl.h"

static int print_health(const json_t *body)
{
	const char *s = json_string_value(json_object_get(body, "status"));

	isoctl_fputs_clean(s ? s : "-", stdout);
	fputc('\n', stdout);
	return 0;
}

const struct isoctl_simple_cmd isoctl_cmd_health = {
    .usage = "Usage: isoctl health\n"
             "\n"
             "Asks the server whether it is up (GET /v1/healthz, no token\n"
             "needed) and prints its status, \"ok\". Exits 7 when the server\n"
             "cannot be reached.\n",
    .method = "GET",
    .path = "/v1/healthz",
    .print = print_health,
};

static int print_version(const json_t *body)
{
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const char *key;
	json_t *v;

	isoctl_table_init(&t, 2, NULL);
	isoctl_table_add(&t, "client:");
	isoctl_table_add(&t, ISO_VERSION);
	json_object_foreach ((json_t *)body, key, v) {
		isoctl_table_addf(&t, "%s:", strcmp(key, "version") == 0 ? "server" : key);
		isoctl_table_add_json(&t, v);
	}
	return isoctl_table_print(&t);
}

const struct isoctl_simple_cmd isoctl_cmd_version = {
    .usage = "Usage: isoctl version\n"
             "\n"
             "Prints this client's version and the server's (GET /v1/version):\n"
             "API version, store, placement policy and fabric driver.\n",
    .method = "GET",
    .path = "/v1/version",
    .print = print_version,
};

const struct isoctl_simple_cmd isoctl_cmd_whoami = {
    .usage = "Usage: isoctl whoami\n"
             "\n"
             "Prints the token in use as the server sees it (GET /v1/whoami):\n"
             "token_id, role, tenant and user. Never prints the secret.\n",
    .method = "GET",
    .path = "/v1/whoami",
    .print = isoctl_print_object,
};

const struct isoctl_simple_cmd isoctl_cmd_capacity = {
    .usage = "Usage: isoctl capacity\n"
             "\n"
             "Prints the cluster's aggregate capacity and what is free (GET /v1/capacity):\n"
             "nodes, GPUs, MIG memory and compute slices, CPUs and memory (MiB).\n"
             "Every role may ask; there is no per-tenant breakdown.\n",
    .method = "GET",
    .path = "/v1/capacity",
    .print = isoctl_print_object,
};

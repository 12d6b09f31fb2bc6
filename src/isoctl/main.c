/* main.c: isoctl, the command-line client of the isostack REST API. A thin
 * main: initialises libcurl for the process, hands the command line to the
 * dispatcher, and turns a failed write of the output into an error. */
#include <curl/curl.h>
#include <string.h>

#include "isoctl/isoctl.h"

static const char usage[] =
    "Usage: isoctl [GLOBAL FLAGS] COMMAND [ARGS] [FLAGS]\n"
    "\n"
    "Command-line client of the isostack REST API (docs/api.md).\n"
    "\n"
    "Commands:\n"
    "  health                       is the server up (needs no token)\n"
    "  version                      client and server versions\n"
    "  whoami                       the token in use: id, role, tenant, user\n"
    "  capacity                     cluster capacity, used and free\n"
    "  tenant create|list|get|update|delete\n"
    "  token issue|list|get|revoke\n"
    "  node list|get|cordon|uncordon|drain|down|up\n"
    "  gpu list|fault|restore\n"
    "  pool cordon|drain|uncordon   every node of a pool at once\n"
    "  mig layout                   the MIG layout of every GPU; -o mig-parted for mig-parted\n"
    "  org create|list|delete       organisations: groups of tenants\n"
    "  project create|list|delete   a tenant's projects (--tenant T)\n"
    "  quota get|set ACCOUNT        quotas of a tenant, TENANT/PROJECT or --org O\n"
    "  queue                        pending allocations in fair-share order\n"
    "  usage                        fair-share standing of the accounts you see\n"
    "  alloc create|list|get|resize|release\n"
    "  audit events|head|pubkey|export|verify\n"
    "  sim                          offline MIG placement benchmark on trace CSVs (no server)\n"
    "  fabric ibsim-net|discover    offline fabric tools: ibsim net file, ibnetdiscover to YAML\n"
    "  store migrate                offline: copy a SQLite state dir into PostgreSQL\n"
    "  slurm prolog|epilog|reap|gres  Slurm's controller: a job's allocation, orphans,\n"
    "                               GRES lines (docs/slurm.md)\n"
    "  help                         this text\n"
    "Run 'isoctl COMMAND --help' for a command's arguments and flags.\n"
    "\n"
    "Global flags (before or after the command words):\n"
    "  --url URL            server (env ISOSTACK_URL; default " ISO_CLIENT_DEFAULT_URL ")\n"
    "  --token TOKEN        bearer token (env ISOSTACK_TOKEN); visible in process lists,\n"
    "                       prefer --token-file\n"
    "  --token-file FILE    read the token from the first line of FILE\n"
    "                       (env ISOSTACK_TOKEN_FILE)\n"
    "  --cacert FILE        PEM CA bundle that verifies an https server\n"
    "  -o, --output FORMAT  table (default), json (the server's JSON, pretty),\n"
    "                       id (the id or name of each object, one a line) or\n"
    "                       token (token issue: the secret alone)\n"
    "  --timeout SECONDS    limit for each request (default 30)\n"
    "  -h, --help           show help and exit\n"
    "  --version            print isoctl's version and exit (first, before the\n"
    "                       command; 'isoctl version' asks the server too)\n"
    "Flags beat the environment; ISOSTACK_TOKEN beats ISOSTACK_TOKEN_FILE.\n"
    "\n"
    "Exit codes:\n"
    "  0  ok\n"
    "  1  internal or unexpected error\n"
    "  2  usage: bad command line, unreadable token file, bad --url/--cacert\n"
    "  3  not found (HTTP 404)\n"
    "  4  unauthorized or forbidden (HTTP 401, 403)\n"
    "  5  conflict or capacity (HTTP 409, 422)\n"
    "  6  invalid input (HTTP 400, 413)\n"
    "  7  server unreachable, timed out, or server error (HTTP 5xx)\n"
    "  8  verification failed (audit verify)\n"
    "  9  alloc create --wait: the allocation ended failed or released\n"
    "  10 alloc create --wait: not active before the time ran out\n"
    "Server errors are printed on stderr as\n"
    "  isoctl: CODE: MESSAGE (field: FIELD, request id: ID)\n";

static int cmd_help(struct isoctl *ctx, int argc, char **argv)
{
	fputs(usage, stdout);
	return ISOCTL_EXIT_OK;
}

static const struct isoctl_cmd commands[] = {
    {"health", .simple = &isoctl_cmd_health}, {"version", .simple = &isoctl_cmd_version},
    {"whoami", .simple = &isoctl_cmd_whoami}, {"capacity", .simple = &isoctl_cmd_capacity},
    {"tenant", .run = isoctl_cmd_tenant},     {"token", .run = isoctl_cmd_token},
    {"node", .run = isoctl_cmd_node},         {"gpu", .run = isoctl_cmd_gpu},
    {"pool", .run = isoctl_cmd_pool},         {"mig", .run = isoctl_cmd_mig},
    {"org", .run = isoctl_cmd_org},           {"project", .run = isoctl_cmd_project},
    {"quota", .run = isoctl_cmd_quota},       {"queue", .simple = &isoctl_cmd_queue},
    {"usage", .simple = &isoctl_cmd_usage},   {"alloc", .run = isoctl_cmd_alloc},
    {"audit", .run = isoctl_cmd_audit},       {"sim", .run = isoctl_cmd_sim},
    {"fabric", .run = isoctl_cmd_fabric},     {"help", .run = cmd_help},
    {"store", .run = isoctl_cmd_store},       {"slurm", .run = isoctl_cmd_slurm},
};

int main(int argc, char **argv)
{
	struct isoctl ctx = {.output = ISOCTL_OUT_TABLE};
	int r;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fputs("isoctl: cannot initialise libcurl\n", stderr);
		return ISOCTL_EXIT_INTERNAL;
	}
	r = isoctl_dispatch(&ctx, commands, ISO_ARRAY_SIZE(commands), usage, argc, argv);
	isoctl_clear(&ctx);
	curl_global_cleanup();
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fputs("isoctl: cannot write the output\n", stderr);
		return r ? r : ISOCTL_EXIT_INTERNAL;
	}
	return r;
}

/* cmd_fabric.c: `isoctl fabric`: `verify` (the isolation proof, by the
 * controller or read from this host with --live), and offline tools:
 * `ibsim-net` writes an ibsim net file whose GUIDs are an inventory's (or a
 * synthetic cluster's), so that OpenSM and isostackd's opensm driver run
 * without hardware; `discover` turns ibnetdiscover's output into inventory
 * `nodes:` entries. The work is libisostack's (src/fabric/ibsim_net.c,
 * discover.c); this file is the command line. */
#include <errno.h>
#include <string.h>
#include <sys/wait.h>

#include "isoctl/isoctl.h"
#include "isostack/fabric.h"
#include "isostack/inventory.h"

#define INPUT_MAX (256L << 20) /* ibnetdiscover of ~100k ports is ~20 MiB */

static const char usage_fabric[] =
    "Usage: isoctl fabric SUBCOMMAND ...\n"
    "\n"
    "Offline fabric tools (no server needed):\n"
    "  ibsim-net    an ibsim net file (fat tree) whose GUIDs are the inventory's\n"
    "  discover     inventory nodes: entries from ibnetdiscover output\n"
    "Against the server:\n"
    "  verify       prove that no cross-tenant path exists (--live: read the\n"
    "               fabric from this host)\n"
    "Run 'isoctl fabric SUBCOMMAND --help' for details.\n"
    "Exit codes: 0 ok, 1 internal, 2 usage, 3 file not found, 6 invalid input,\n"
    "7 ibnetdiscover failed or fabric unreachable, 8 verify found violations.\n";

static const char usage_ibsim_net[] =
    "Usage: isoctl fabric ibsim-net --config FILE [FLAGS]\n"
    "       isoctl fabric ibsim-net --synthetic N [--vfs K] [--inventory-out FILE] [FLAGS]\n"
    "\n"
    "Prints an ibsim net file: a two-level fat tree whose CA port GUIDs are the\n"
    "inventory's. The SM's HCA comes first (ibsim attaches the SM there); every\n"
    "PF, every VF (ibsim has no vports: one CA per VF, on its node's leaf) and\n"
    "every shared-service port is a single-port CA. The header's last comment\n"
    "line gives the counts for ibsim's -N/-S/-P limits.\n"
    "  --config FILE          the inventory (cluster.yaml; fabric.type infiniband)\n"
    "  --synthetic N          a synthetic cluster of N HCAs (1-65536) instead\n"
    "  --vfs K                VFs per synthetic HCA, 0-127 (default 0)\n"
    "  --inventory-out FILE   write the synthetic cluster's inventory YAML to FILE\n"
    "  --sm-guid GUID         port GUID of the SM's HCA (default 0x0002c90300000001)\n"
    "  --switch-guid GUID     GUID of the first switch (default 0x0002c90300f00001)\n"
    "  --switch-ports N       ports per switch, 4-254 (default 36)\n"
    "Run it with: IBSIM_SOCKNAME=NAME ibsim -n -s FILE </dev/null &\n";

static const char usage_discover[] =
    "Usage: isoctl fabric discover [--file FILE|-]\n"
    "\n"
    "Reads ibnetdiscover's output (default format) and prints inventory YAML:\n"
    "one nodes: entry per channel adapter, named by the first word of its node\n"
    "description, with port: {device, port, guid} of its first port. CAs named\n"
    "NODE-vfI (ibsim's stand-ins for VFs) become NODE's vfs. Switches are\n"
    "skipped. Merge the entries into the inventory and add rack, pdu, pool or\n"
    "class, cpus and memory.\n"
    "  --file FILE   ibnetdiscover's output; - for standard input. Without it,\n"
    "                runs ibnetdiscover (set LD_PRELOAD for ibsim's umad2sim)\n";

static int parse_guid_flag(const struct isoctl *ctx, const char *flag, const char *s, uint64_t *out)
{
	if (iso_parse_guid(s, out) < 0 || *out == 0)
		return isoctl_usage_error(ctx, "%s: '%s' is not a GUID (0x and 1-16 hex digits)",
		                          flag, s);
	return 0;
}

/* ---- ibsim-net ---- */

enum { N_CONFIG, N_SYNTH, N_VFS, N_INV_OUT, N_SM_GUID, N_SW_GUID, N_SW_PORTS, N_COUNT };

static int cmd_ibsim_net(struct isoctl *ctx, int argc, char **argv)
{
	static const struct option options[] = {
	    ISOCTL_FLAG("config", required_argument, N_CONFIG),
	    ISOCTL_FLAG("synthetic", required_argument, N_SYNTH),
	    ISOCTL_FLAG("vfs", required_argument, N_VFS),
	    ISOCTL_FLAG("inventory-out", required_argument, N_INV_OUT),
	    ISOCTL_FLAG("sm-guid", required_argument, N_SM_GUID),
	    ISOCTL_FLAG("switch-guid", required_argument, N_SW_GUID),
	    ISOCTL_FLAG("switch-ports", required_argument, N_SW_PORTS),
	    ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage_ibsim_net);
	const char *v[N_COUNT] = {0};
	struct iso_ibsim_net_opts o = {0};
	_cleanup_(iso_inventory_freep) struct iso_inventory *inv = NULL;
	_cleanup_free_ char *net = NULL, *yaml = NULL;
	struct iso_error e = {0};
	long long n = 0, vfs = 0, num;

	if (isoctl_parse_line(ctx, &p, v, N_COUNT, 0, 0, NULL) < 0)
		return p.exit_code;
	if (!v[N_CONFIG] == !v[N_SYNTH])
		return isoctl_usage_error(ctx, "give exactly one of --config and --synthetic");
	if (v[N_CONFIG] && (v[N_VFS] || v[N_INV_OUT]))
		return isoctl_usage_error(ctx, "--vfs and --inventory-out go with --synthetic");
	if (v[N_SYNTH] && isoctl_parse_int(ctx, "--synthetic", v[N_SYNTH], 1, 65536, &n))
		return ISOCTL_EXIT_USAGE;
	if (v[N_VFS] && isoctl_parse_int(ctx, "--vfs", v[N_VFS], 0, 127, &vfs))
		return ISOCTL_EXIT_USAGE;
	if (v[N_SM_GUID] && parse_guid_flag(ctx, "--sm-guid", v[N_SM_GUID], &o.sm_guid))
		return ISOCTL_EXIT_USAGE;
	if (v[N_SW_GUID] &&
	    parse_guid_flag(ctx, "--switch-guid", v[N_SW_GUID], &o.switch_guid_base))
		return ISOCTL_EXIT_USAGE;
	if (v[N_SW_PORTS]) {
		if (isoctl_parse_int(ctx, "--switch-ports", v[N_SW_PORTS], 4, 254, &num))
			return ISOCTL_EXIT_USAGE;
		o.switch_ports = (int)num;
	}

	if (v[N_CONFIG]) {
		if (iso_inventory_load_file(v[N_CONFIG], &inv, &e) < 0 ||
		    iso_ibsim_net_render(inv, &o, &net, &e) < 0)
			return isoctl_fail_local(&e);
	} else {
		if (iso_ibsim_inventory_synthetic((int)n, (int)vfs, &yaml, &e) < 0 ||
		    iso_inventory_load_string("synthetic.yaml", yaml, strlen(yaml), &inv, &e) < 0 ||
		    iso_ibsim_net_render(inv, &o, &net, &e) < 0)
			return isoctl_fail_local(&e);
		if (v[N_INV_OUT] &&
		    iso_file_write_atomic(v[N_INV_OUT], yaml, strlen(yaml), 0644, false, &e) < 0)
			return isoctl_fail_local(&e);
	}
	fputs(net, stdout);
	return ISOCTL_EXIT_OK;
}

/* ---- discover ---- */

/* The whole of `f`, NUL-terminated; -EFBIG past INPUT_MAX. */
static int read_all(FILE *f, char **out, size_t *len)
{
	_cleanup_free_ char *buf = NULL;
	size_t n = 0, cap = 0;

	for (;;) {
		if (cap - n < 65536) {
			if (cap > (size_t)INPUT_MAX)
				return -EFBIG;
			cap = cap ? cap * 2 : 1 << 20;
			char *p = realloc(buf, cap + 1);
			if (!p)
				return -ENOMEM;
			buf = p;
		}
		size_t k = fread(buf + n, 1, cap - n, f);
		n += k;
		if (k == 0)
			break;
	}
	if (ferror(f))
		return -EIO;
	buf[n] = '\0';
	*len = n;
	*out = ISO_TAKE(buf);
	return 0;
}

static int cmd_discover(struct isoctl *ctx, int argc, char **argv)
{
	enum { D_FILE, D_COUNT };
	static const struct option options[] = {ISOCTL_FLAG("file", required_argument, D_FILE),
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage_discover);
	const char *v[D_COUNT] = {0};
	_cleanup_(iso_discovered_freep) struct iso_discovered *d = NULL;
	_cleanup_free_ char *text = NULL, *yaml = NULL;
	struct iso_error e = {0};
	const char *name;
	size_t len = 0;
	FILE *f;
	int r, status;

	if (isoctl_parse_line(ctx, &p, v, D_COUNT, 0, 0, NULL) < 0)
		return p.exit_code;
	if (v[D_FILE] && strcmp(v[D_FILE], "-") == 0) {
		name = "<stdin>";
		r = read_all(stdin, &text, &len);
	} else if (v[D_FILE]) {
		name = v[D_FILE];
		f = fopen(name, "re");
		if (!f) {
			fprintf(stderr, "isoctl: %s: %s\n", name, strerror(errno));
			return errno == ENOENT ? ISOCTL_EXIT_NOT_FOUND : ISOCTL_EXIT_INVALID;
		}
		r = read_all(f, &text, &len);
		fclose(f);
	} else {
		name = "ibnetdiscover";
		fflush(stdout);
		f = popen("ibnetdiscover", "re");
		if (!f) {
			fprintf(stderr, "isoctl: cannot run ibnetdiscover: %s\n", strerror(errno));
			return ISOCTL_EXIT_UNAVAILABLE;
		}
		r = read_all(f, &text, &len);
		status = pclose(f);
		if (r == 0 && (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
			fprintf(stderr, "isoctl: ibnetdiscover failed (exit status %d)\n",
			        status == -1 || !WIFEXITED(status) ? -1 : WEXITSTATUS(status));
			return ISOCTL_EXIT_UNAVAILABLE;
		}
	}
	if (r == -ENOMEM)
		return isoctl_oom();
	if (r < 0) {
		fprintf(stderr, "isoctl: %s: %s\n", name,
		        r == -EFBIG ? "larger than 256 MiB" : strerror(-r));
		return ISOCTL_EXIT_INVALID;
	}
	if (iso_fabric_discover_parse(name, text, len, &d, &e) < 0 ||
	    iso_fabric_discover_yaml(d, &yaml, &e) < 0)
		return isoctl_fail_local(&e);
	fputs(yaml, stdout);
	return ISOCTL_EXIT_OK;
}

/* ---- verify ---- */

static const char usage_verify[] =
    "Usage: isoctl fabric verify [--live] [--json | -o json]\n"
    "\n"
    "Proves that no two tenants can reach each other: every reachable port's\n"
    "P_Key table is read and judged against the controller's intent (two ports\n"
    "talk iff they share a P_Key base and one of them is a full member).\n"
    "Reports cross-tenant paths, drift between intent and fabric, and tables\n"
    "near capacity. Needs a cluster-admin or auditor token.\n"
    "  (default)  the controller reads the fabric (GET /v1/fabric/verify)\n"
    "  --live     this host reads the fabric itself through libibumad (under\n"
    "             ibsim: LD_PRELOAD=.../libumad2sim.so) and asks the controller\n"
    "             only for its intent (GET /v1/fabric/intent)\n"
    "Exit codes: 0 clean, 8 violations found, 7 fabric or server unreachable,\n"
    "4 not allowed.\n";

static int print_report(const struct isoctl *ctx, json_t *rep)
{
	json_t *v, *viol = json_object_get(rep, "violations");
	size_t i;
	bool ok = json_is_true(json_object_get(rep, "ok"));

	if (ctx->output == ISOCTL_OUT_JSON) {
		isoctl_print_json(rep);
	} else {
		static const char *const headers[] = {"KIND", "PKEY", "PORTS", "TENANTS",
		                                      "MESSAGE"};
		struct isoctl_table t;

		printf("%s: %lld ports, %lld partitions checked in %lld ms, %zu finding%s\n",
		       ok ? "clean" : "VIOLATIONS",
		       (long long)json_integer_value(json_object_get(rep, "ports_checked")),
		       (long long)json_integer_value(json_object_get(rep, "partitions_checked")),
		       (long long)json_integer_value(json_object_get(rep, "elapsed_ms")),
		       json_array_size(viol), json_array_size(viol) == 1 ? "" : "s");
		if (json_array_size(viol) > 0) {
			isoctl_table_init(&t, ISO_ARRAY_SIZE(headers), headers);
			json_array_foreach (viol, i, v) {
				json_t *x;
				size_t k;
				char buf[256] = "";

				isoctl_table_add_json(&t, json_object_get(v, "kind"));
				isoctl_table_add_json(&t, json_object_get(v, "pkey"));
				x = json_object_get(v, "ports");
				for (k = 0; k < json_array_size(x); k++) {
					const char *g = json_string_value(json_array_get(x, k));
					snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
					         "%s%s", k ? "," : "", g ? g : "");
				}
				isoctl_table_add(&t, buf);
				buf[0] = '\0';
				x = json_object_get(v, "tenants");
				for (k = 0; k < json_array_size(x); k++) {
					const char *tn = json_string_value(json_array_get(x, k));
					snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
					         "%s%s", k ? "," : "", tn && *tn ? tn : "-");
				}
				isoctl_table_add(&t, buf);
				isoctl_table_add_json(&t, json_object_get(v, "message"));
			}
			if (isoctl_table_print(&t))
				return ISOCTL_EXIT_INTERNAL;
			isoctl_table_clear(&t);
		}
	}
	return ok ? ISOCTL_EXIT_OK : ISOCTL_EXIT_VERIFY;
}

static int verify_live(struct isoctl *ctx)
{
	_cleanup_response_ struct iso_response resp = {0};
	struct iso_fabric_intent intent = {0};
	struct iso_fabric_snapshot snap = {0};
	struct iso_fabric_report rep = {0};
	struct iso_error e = {0};
	_cleanup_free_ char *intent_text = NULL;
	json_t *j;
	int r, failed = 0;

	r = isoctl_call(ctx, "GET", "/v1/fabric/intent", NULL, &resp);
	if (r)
		return r;
	intent_text = json_dumps(resp.body, JSON_COMPACT);
	if (!intent_text)
		return isoctl_oom();
	if (iso_fabric_intent_parse_json(intent_text, &intent, &e) < 0)
		return isoctl_fail_local(&e);
	r = iso_fabric_read_live(&snap, &failed, &e);
	if (r == 0)
		r = iso_fabric_verify(&intent, &snap, &rep, &e);
	if (r == 0)
		rep.elapsed_ms += snap.read_ms; /* reading the fabric included */
	iso_fabric_intent_clear(&intent);
	iso_fabric_snapshot_clear(&snap);
	if (r < 0)
		return e.code == ISO_E_UNAVAILABLE
		           ? (fprintf(stderr, "isoctl: %s\n", e.message), ISOCTL_EXIT_UNAVAILABLE)
		           : isoctl_fail_local(&e);
	if (failed > 0)
		fprintf(stderr, "isoctl: %d port%s did not answer and were not checked\n", failed,
		        failed == 1 ? "" : "s");
	j = iso_fabric_report_to_json(&rep);
	iso_fabric_report_clear(&rep);
	if (!j)
		return isoctl_oom();
	r = print_report(ctx, j);
	json_decref(j);
	return r;
}

static int cmd_verify(struct isoctl *ctx, int argc, char **argv)
{
	enum { V_LIVE, V_JSON, V_COUNT };
	static const struct option options[] = {ISOCTL_FLAG("live", no_argument, V_LIVE),
	                                        ISOCTL_FLAG("json", no_argument, V_JSON),
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage_verify);
	_cleanup_response_ struct iso_response resp = {0};
	const char *v[V_COUNT] = {0};
	int r;

	if (isoctl_parse_line(ctx, &p, v, V_COUNT, 0, 0, NULL) < 0)
		return p.exit_code;
	if (v[V_JSON])
		ctx->output = ISOCTL_OUT_JSON; /* --json: the same as -o json */
	if (v[V_LIVE])
		return verify_live(ctx);
	r = isoctl_call(ctx, "GET", "/v1/fabric/verify", NULL, &resp);
	if (r)
		return r;
	return print_report(ctx, resp.body);
}

/* ---- the command ---- */

static const struct isoctl_cmd fabric_verbs[] = {
    {"ibsim-net", .run = cmd_ibsim_net},
    {"discover", .run = cmd_discover},
    {"verify", .run = cmd_verify},
};

int isoctl_cmd_fabric(struct isoctl *ctx, int argc, char **argv)
{
	return isoctl_dispatch(ctx, fabric_verbs, ISO_ARRAY_SIZE(fabric_verbs), usage_fabric, argc,
	                       argv);
}

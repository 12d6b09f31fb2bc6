/* cmd_node.c: `isoctl node ...`, `isoctl gpu ...` and `isoctl pool ...`: the
 * operator's view of the hardware (/v1/nodes, /v1/gpus), the
 * cordon/uncordon/drain switches per node or pool, and faults (a GPU's XID,
 * a node down or up). cluster-admin and auditor only; the server enforces it. */
#include <stdio.h>

#include "isoctl/isoctl.h"

static const char usage_node[] =
    "Usage: isoctl node SUBCOMMAND ...\n"
    "\n"
    "Nodes of the cluster (cluster-admin and auditor; changes: cluster-admin).\n"
    "  list [--pool P]     every node, or those of pool P\n"
    "  get NAME            one node, with its fabric port\n"
    "  cordon NAME         no new work; running work stays\n"
    "  uncordon NAME       schedulable again\n"
    "  drain NAME          no new work, and its work is released; 'drained' when empty\n"
    "  down NAME           the node failed: its work is evicted, nothing placed there\n"
    "  up NAME             a down node is back and schedulable\n"
    "Run 'isoctl node SUBCOMMAND --help' for details, 'isoctl --help' for global flags.\n";

static void add_node_row(struct isoctl_table *t, const json_t *n)
{
	_cleanup_free_ char *cpus = isoctl_fmt_used_total(json_object_get(n, "cpus_used"),
	                                                  json_object_get(n, "cpus"), false);
	_cleanup_free_ char *mem = isoctl_fmt_used_total(json_object_get(n, "memory_mib_used"),
	                                                 json_object_get(n, "memory_mib"), true);

	isoctl_table_add_json(t, json_object_get(n, "name"));
	isoctl_table_add_json(t, json_object_get(n, "pool"));
	isoctl_table_add_json(t, json_object_get(n, "rack"));
	isoctl_table_add_json(t, json_object_get(n, "state"));
	isoctl_table_add_json(t, json_object_get(n, "gpus"));
	isoctl_table_add_owned(t, ISO_TAKE(cpus));
	isoctl_table_add_owned(t, ISO_TAKE(mem));
	isoctl_table_add_json(t, json_object_get(n, "members"));
}

static int print_nodes(const json_t *body)
{
	static const char *const headers[] = {
	    "NAME",   "POOL", "RACK", "STATE", "GPUS", "CPUS(used/total)", "MEM_GiB(used/total)",
	    "MEMBERS"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_node_row);
}

static int print_node(const json_t *n)
{
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const json_t *port = json_object_get(n, "port");
	_cleanup_free_ char *cpus = isoctl_fmt_used_total(json_object_get(n, "cpus_used"),
	                                                  json_object_get(n, "cpus"), false);
	_cleanup_free_ char *mem = isoctl_fmt_used_total(json_object_get(n, "memory_mib_used"),
	                                                 json_object_get(n, "memory_mib"), true);
	static const char *const simple[] = {"name",  "pool", "rack",      "pdu",
	                                     "state", "gpus", "gpu_model", "members"};

	isoctl_table_init(&t, 2, NULL);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(simple); i++) {
		isoctl_table_addf(&t, "%s:", simple[i]);
		isoctl_table_add_json(&t, json_object_get(n, simple[i]));
	}
	isoctl_table_add(&t, "cpus (used/total):");
	isoctl_table_add_owned(&t, ISO_TAKE(cpus));
	isoctl_table_add(&t, "memory GiB (used/total):");
	isoctl_table_add_owned(&t, ISO_TAKE(mem));
	isoctl_table_add(&t, "port:");
	if (json_is_object(port)) {
		static const char *const keys[] = {"guid", "pkey_capacity", "vfs"};
		isoctl_table_addf(&t, "%s port %" JSON_INTEGER_FORMAT,
		                  json_string_value(json_object_get(port, "device"))
		                      ? json_string_value(json_object_get(port, "device"))
		                      : "-",
		                  json_integer_value(json_object_get(port, "port")));
		for (size_t i = 0; i < ISO_ARRAY_SIZE(keys); i++) {
			isoctl_table_addf(&t, "port %s:", keys[i]);
			isoctl_table_add_json(&t, json_object_get(port, keys[i]));
		}
	} else {
		isoctl_table_add(&t, "none");
	}
	return isoctl_table_print(&t);
}

static const struct isoctl_simple_cmd node_list = {
    .usage = "Usage: isoctl node list [--pool P]\n"
             "\n"
             "Lists nodes in inventory order (GET /v1/nodes, every page).\n"
             "  --pool P   only nodes of pool P\n",
    .list = true,
    .path = "/v1/nodes",
    .filters = {{"pool", "pool"}},
    .print = print_nodes,
};

static const struct isoctl_simple_cmd node_get = {
    .usage = "Usage: isoctl node get NAME\n"
             "\n"
             "Shows one node (GET /v1/nodes/NAME): pool, rack, PDU, state,\n"
             "GPUs, CPUs and memory used/total, members, fabric port.\n",
    .method = "GET",
    .path = "/v1/nodes/",
    .arg = "NAME",
    .print = print_node,
};

/* cordon, uncordon, drain: the node comes back as one row. */
static const struct isoctl_simple_cmd node_cordon = {
    .usage = "Usage: isoctl node cordon NAME\n"
             "\n"
             "Stops placing new work on the node (POST /v1/nodes/NAME/cordon);\n"
             "running work stays. Prints the node.\n",
    .method = "POST",
    .path = "/v1/nodes/",
    .arg = "NAME",
    .suffix = "/cordon",
    .print = print_nodes,
};

static const struct isoctl_simple_cmd node_uncordon = {
    .usage = "Usage: isoctl node uncordon NAME\n"
             "\n"
             "Makes the node schedulable again (POST /v1/nodes/NAME/uncordon).\n"
             "Prints the node.\n",
    .method = "POST",
    .path = "/v1/nodes/",
    .arg = "NAME",
    .suffix = "/uncordon",
    .print = print_nodes,
};

static const struct isoctl_simple_cmd node_drain = {
    .usage = "Usage: isoctl node drain NAME\n"
             "\n"
             "Stops new work on the node and releases its work (POST /v1/nodes/NAME/drain);\n"
             "its state becomes 'drained' once empty. Prints the node.\n",
    .method = "POST",
    .path = "/v1/nodes/",
    .arg = "NAME",
    .suffix = "/drain",
    .print = print_nodes,
};

/* The node row, then the allocations the call evicted (node down). */
static int print_node_evicted(const json_t *n)
{
	const json_t *evicted = json_object_get(n, "evicted");
	int r = print_nodes(n);

	if (r == 0 && json_array_size(evicted) > 0) {
		printf("evicted: ");
		isoctl_fputs_clean(json_string_value(json_array_get(evicted, 0)), stdout);
		for (size_t i = 1; i < json_array_size(evicted); i++) {
			printf(", ");
			isoctl_fputs_clean(json_string_value(json_array_get(evicted, i)), stdout);
		}
		printf("\n");
	}
	return r;
}

static const struct isoctl_simple_cmd node_down = {
    .usage = "Usage: isoctl node down NAME\n"
             "\n"
             "Reports the node down (POST /v1/nodes/NAME/down; cluster-admin, later the\n"
             "node agents): every allocation with a member there is evicted, requeued or\n"
             "failed by its own policy, and nothing is placed there until 'node up'.\n"
             "Prints the node and the evicted allocations.\n",
    .method = "POST",
    .path = "/v1/nodes/",
    .arg = "NAME",
    .suffix = "/down",
    .print = print_node_evicted,
};

static const struct isoctl_simple_cmd node_up = {
    .usage = "Usage: isoctl node up NAME\n"
             "\n"
             "A down node is back (POST /v1/nodes/NAME/up): schedulable again. A node\n"
             "that is not down (e.g. cordoned) is left as it is. Prints the node.\n",
    .method = "POST",
    .path = "/v1/nodes/",
    .arg = "NAME",
    .suffix = "/up",
    .print = print_nodes,
};

int isoctl_cmd_node(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"list", .simple = &node_list},     {"get", .simple = &node_get},
	    {"cordon", .simple = &node_cordon}, {"uncordon", .simple = &node_uncordon},
	    {"drain", .simple = &node_drain},   {"down", .simple = &node_down},
	    {"up", .simple = &node_up},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_node, argc, argv);
}

/* ---- gpu ---- */

/* "3g.40gb@0(a-6f1c...)", comma-joined; "-" when the GPU is empty. */
static char *fmt_instances(const json_t *instances)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	size_t i;
	json_t *in;

	if (!f)
		return NULL;
	json_array_foreach (instances, i, in) {
		const char *profile = json_string_value(json_object_get(in, "profile"));
		const char *alloc = json_string_value(json_object_get(in, "allocation"));
		bool whole = json_is_true(json_object_get(in, "whole"));

		fprintf(f, "%s%s", i ? "," : "", whole || !profile ? "whole" : profile);
		if (!whole)
			fprintf(f, "@%" JSON_INTEGER_FORMAT,
			        json_integer_value(json_object_get(in, "start")));
		if (alloc)
			fprintf(f, "(%s)", alloc);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void add_gpu_row(struct isoctl_table *t, const json_t *g)
{
	_cleanup_free_ char *inst = fmt_instances(json_object_get(g, "instances"));

	isoctl_table_add_json(t, json_object_get(g, "node"));
	isoctl_table_add_json(t, json_object_get(g, "index"));
	isoctl_table_add_json(t, json_object_get(g, "model"));
	isoctl_table_add(t, json_is_true(json_object_get(g, "mig_enabled")) ? "on" : "off");
	const json_t *fault = json_object_get(g, "fault");

	isoctl_table_add_json(t, json_object_get(g, "free_slices"));
	isoctl_table_add_owned(t, ISO_TAKE(inst)); /* "" shows as "-" */
	if (json_is_object(fault))
		isoctl_table_addf(t, "XID %" JSON_INTEGER_FORMAT,
		                  json_integer_value(json_object_get(fault, "xid")));
	else
		isoctl_table_add(t, NULL);
}

static int print_gpus(const json_t *body)
{
	static const char *const headers[] = {"NODE",        "IDX",       "MODEL", "MIG",
	                                      "FREE_SLICES", "INSTANCES", "FAULT"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_gpu_row);
}

static const struct isoctl_simple_cmd gpu_list = {
    .usage = "Usage: isoctl gpu list [--node N]\n"
             "\n"
             "Lists GPUs (GET /v1/gpus, every page): node, index, model, MIG mode, free\n"
             "memory slices, and the instances on it as PROFILE@START(ALLOCATION)\n"
             "('whole' for a whole GPU), and the fault that took it out of service\n"
             "('XID 79'). cluster-admin and auditor.\n"
             "  --node N   only GPUs of node N\n",
    .list = true,
    .path = "/v1/gpus",
    .filters = {{"node", "node"}},
    .print = print_gpus,
};

/* "/v1/nodes/NODE/gpus/INDEX/fault", INDEX checked as a device index. */
static int fault_path(struct isoctl *ctx, const struct isoctl_parser *p, char **out)
{
	_cleanup_free_ char *node = NULL;
	char index[16];
	long long v;
	int r = isoctl_parse_int(ctx, "INDEX", p->args[1], 0, 65535, &v);

	if (r)
		return r;
	snprintf(index, sizeof(index), "%lld", v);
	node = isoctl_path("/v1/nodes/", p->args[0], "/gpus/");
	*out = node ? isoctl_path(node, index, "/fault") : NULL;
	return *out ? 0 : isoctl_oom();
}

static const char *const gpu_args[] = {"NODE", "INDEX"};

enum { OPT_XID, NUM_FAULT_FLAGS };

static int gpu_fault(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl gpu fault NODE INDEX --xid N\n"
	    "\n"
	    "Reports XID N on GPU INDEX (device index) of NODE (POST\n"
	    "/v1/nodes/NODE/gpus/INDEX/fault; cluster-admin, later the node agents).\n"
	    "XIDs 79 (fallen off the bus), 48 (double-bit ECC), 94/95 (ECC) and 119/120\n"
	    "(GSP) take the whole GPU: its allocations are evicted (requeued, or failed\n"
	    "when they asked to fail on preemption) and it is quarantined until 'gpu\n"
	    "restore'. Other XIDs (13, 31, 43: application errors) are recorded only.\n"
	    "  --xid N   the XID code, 0..1000\n";
	static const struct option options[] = {ISOCTL_FLAG("xid", required_argument, OPT_XID),
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *flag[NUM_FAULT_FLAGS] = {0};
	long long xid;
	int r;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FAULT_FLAGS, 2, 2, gpu_args) < 0)
		return p.exit_code;
	if (!flag[OPT_XID])
		return isoctl_usage_error(ctx, "missing --xid");
	r = isoctl_parse_int(ctx, "--xid", flag[OPT_XID], 0, 1000, &xid);
	if (!r)
		r = fault_path(ctx, &p, &path);
	if (r)
		return r;
	body = json_object();
	if (!body || isoctl_set_int(body, "xid", xid) < 0)
		return isoctl_oom();
	return isoctl_call_render(ctx, "POST", path, body, isoctl_print_object);
}

static int gpu_restore(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl gpu restore NODE INDEX\n"
	    "\n"
	    "Clears the fault of GPU INDEX of NODE and puts it back in service (DELETE\n"
	    "/v1/nodes/NODE/gpus/INDEX/fault; cluster-admin). A GPU without a fault\n"
	    "answers not found (exit 3).\n";
	static const struct option options[] = {ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = NULL;
	int r;

	if (isoctl_parse_line(ctx, &p, NULL, 0, 2, 2, gpu_args) < 0)
		return p.exit_code;
	r = fault_path(ctx, &p, &path);
	if (!r)
		r = isoctl_call(ctx, "DELETE", path, NULL, &resp);
	if (r)
		return r;
	if (ctx->output == ISOCTL_OUT_TABLE) {
		printf("gpu ");
		isoctl_fputs_clean(p.args[0], stdout);
		printf("/%s restored\n", p.args[1]);
	}
	return 0;
}

int isoctl_cmd_gpu(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl gpu SUBCOMMAND ...\n"
	    "\n"
	    "GPUs of the cluster (cluster-admin and auditor; changes: cluster-admin).\n"
	    "  list [--node N]               every GPU, or those of node N\n"
	    "  fault NODE INDEX --xid N      report an XID; 79 and other fatal ones\n"
	    "                                quarantine the GPU and evict its work\n"
	    "  restore NODE INDEX            clear the fault: the GPU is usable again\n"
	    "Run 'isoctl gpu SUBCOMMAND --help' for details, 'isoctl --help' for "
	    "global flags.\n";
	static const struct isoctl_cmd verbs[] = {
	    {"list", .simple = &gpu_list},
	    {"fault", .run = gpu_fault},
	    {"restore", .run = gpu_restore},
	};

	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage, argc, argv);
}

/* ---- pool ---- */

static const struct isoctl_simple_cmd pool_cordon = {
    .usage = "Usage: isoctl pool cordon POOL\n"
             "\n"
             "Cordons every node of POOL (POST /v1/pools/POOL/cordon; cluster-admin):\n"
             "no new work, running work stays. Down nodes are skipped. Prints the nodes\n"
             "changed and those skipped.\n",
    .method = "POST",
    .path = "/v1/pools/",
    .arg = "POOL",
    .suffix = "/cordon",
    .print = isoctl_print_object,
};

static const struct isoctl_simple_cmd pool_drain = {
    .usage = "Usage: isoctl pool drain POOL\n"
             "\n"
             "Drains every node of POOL (POST /v1/pools/POOL/drain; cluster-admin), e.g.\n"
             "before a driver upgrade: no new work; each node is 'drained' once empty.\n"
             "Down nodes are skipped. Prints the nodes changed and those skipped.\n",
    .method = "POST",
    .path = "/v1/pools/",
    .arg = "POOL",
    .suffix = "/drain",
    .print = isoctl_print_object,
};

static const struct isoctl_simple_cmd pool_uncordon = {
    .usage = "Usage: isoctl pool uncordon POOL\n"
             "\n"
             "Makes every node of POOL schedulable again (POST /v1/pools/POOL/uncordon;\n"
             "cluster-admin). Down nodes stay down ('isoctl node up'). Prints the nodes\n"
             "changed and those skipped.\n",
    .method = "POST",
    .path = "/v1/pools/",
    .arg = "POOL",
    .suffix = "/uncordon",
    .print = isoctl_print_object,
};

int isoctl_cmd_pool(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl pool SUBCOMMAND POOL\n"
	    "\n"
	    "Every node of a pool at once (cluster-admin), e.g. to upgrade drivers pool\n"
	    "by pool. One change per node; down nodes are skipped.\n"
	    "  cordon POOL     no new work; running work stays\n"
	    "  drain POOL      no new work; nodes become 'drained' once empty\n"
	    "  uncordon POOL   schedulable again\n"
	    "Run 'isoctl pool SUBCOMMAND --help' for details, 'isoctl --help' for global flags.\n";
	static const struct isoctl_cmd verbs[] = {
	    {"cordon", .simple = &pool_cordon},
	    {"drain", .simple = &pool_drain},
	    {"uncordon", .simple = &pool_uncordon},
	};

	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage, argc, argv);
}

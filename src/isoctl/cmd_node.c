/* cmd_node.c: `isoctl node ...` and `isoctl gpu list`: the operator's view of
 * the hardware (/v1/nodes, /v1/gpus) and the cordon/uncordon/drain switches.
 * cluster-admin and auditor only; the server enforces it. */
#include <string.h>

#include "isoctl/isoctl.h"

enum { OPT_POOL = ISOCTL_OPT_LOCAL, OPT_NODE };

static const char *const name_arg[] = {"NAME"};

static const char usage_node[] =
    "Usage: isoctl node SUBCOMMAND ...\n"
    "\n"
    "Nodes of the cluster (cluster-admin and auditor; changes: cluster-admin).\n"
    "  list [--pool P]     every node, or those of pool P\n"
    "  get NAME            one node, with its fabric port\n"
    "  cordon NAME         no new work; running work stays\n"
    "  uncordon NAME       schedulable again\n"
    "  drain NAME          no new work, and its work is released; 'drained' when empty\n"
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
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	const json_t *items = json_object_get(body, "items");
	size_t i;
	json_t *it;

	isoctl_table_init(&t, ISO_ARRAY_SIZE(headers), headers);
	if (!items && json_is_object(body)) /* one node, after cordon & co */
		add_node_row(&t, body);
	json_array_foreach(items, i, it)
	{
		add_node_row(&t, it);
	}
	return isoctl_table_print(&t);
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

static int node_list(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] = "Usage: isoctl node list [--pool P]\n"
	                            "\n"
	                            "Lists nodes in inventory order (GET /v1/nodes, every page).\n"
	                            "  --pool P   only nodes of pool P\n";
	static const struct option options[] = {{"pool", required_argument, NULL, OPT_POOL},
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = strdup("/v1/nodes");
	const char *arg, *pool = NULL;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0)
		if (c == OPT_POOL)
			pool = arg;
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 0, 0, NULL);
	if (r)
		return r;
	if (!path || (pool && isoctl_query_add(&path, "pool", pool) < 0))
		return isoctl_oom();
	r = isoctl_list(ctx, path, &resp);
	return r ? r : isoctl_render(ctx, &resp, print_nodes);
}

/* get, cordon, uncordon, drain: NAME only. */
static int node_one(struct isoctl *ctx, int argc, char **argv, const char *usage,
                    const char *action)
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
	path = isoctl_path("/v1/nodes/", p.args[0], action);
	if (!path)
		return isoctl_oom();
	r = isoctl_call(ctx, action[0] ? "POST" : "GET", path, NULL, &resp);
	if (r)
		return r;
	return isoctl_render(ctx, &resp, action[0] ? print_nodes : print_node);
}

static int node_get(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] = "Usage: isoctl node get NAME\n"
	                            "\n"
	                            "Shows one node (GET /v1/nodes/NAME): pool, rack, PDU, state,\n"
	                            "GPUs, CPUs and memory used/total, members, fabric port.\n";
	return node_one(ctx, argc, argv, usage, "");
}

static int node_cordon(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl node cordon NAME\n"
	    "\n"
	    "Stops placing new work on the node (POST /v1/nodes/NAME/cordon);\n"
	    "running work stays. Prints the node.\n";
	return node_one(ctx, argc, argv, usage, "/cordon");
}

static int node_uncordon(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl node uncordon NAME\n"
	    "\n"
	    "Makes the node schedulable again (POST /v1/nodes/NAME/uncordon).\n"
	    "Prints the node.\n";
	return node_one(ctx, argc, argv, usage, "/uncordon");
}

static int node_drain(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl node drain NAME\n"
	    "\n"
	    "Stops new work on the node and releases its work (POST /v1/nodes/NAME/drain);\n"
	    "its state becomes 'drained' once empty. Prints the node.\n";
	return node_one(ctx, argc, argv, usage, "/drain");
}

int isoctl_cmd_node(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"list", node_list},         {"get", node_get},     {"cordon", node_cordon},
	    {"uncordon", node_uncordon}, {"drain", node_drain},
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
	json_array_foreach(instances, i, in)
	{
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

static int print_gpus(const json_t *body)
{
	static const char *const headers[] = {"NODE", "IDX",         "MODEL",
	                                      "MIG",  "FREE_SLICES", "INSTANCES"};
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	size_t i;
	json_t *g;

	isoctl_table_init(&t, ISO_ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(body, "items"), i, g)
	{
		_cleanup_free_ char *inst = fmt_instances(json_object_get(g, "instances"));

		isoctl_table_add_json(&t, json_object_get(g, "node"));
		isoctl_table_add_json(&t, json_object_get(g, "index"));
		isoctl_table_add_json(&t, json_object_get(g, "model"));
		isoctl_table_add(&t,
		                 json_is_true(json_object_get(g, "mig_enabled")) ? "on" : "off");
		isoctl_table_add_json(&t, json_object_get(g, "free_slices"));
		isoctl_table_add_owned(&t, ISO_TAKE(inst)); /* "" shows as "-" */
	}
	return isoctl_table_print(&t);
}

static int gpu_list(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl gpu list [--node N]\n"
	    "\n"
	    "Lists GPUs (GET /v1/gpus, every page): node, index, model, MIG mode, free\n"
	    "memory slices, and the instances on it as PROFILE@START(ALLOCATION)\n"
	    "('whole' for a whole GPU). cluster-admin and auditor.\n"
	    "  --node N   only GPUs of node N\n";
	static const struct option options[] = {{"node", required_argument, NULL, OPT_NODE},
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = strdup("/v1/gpus");
	const char *arg, *node = NULL;
	int c, r;

	while ((c = isoctl_next_option(ctx, &p, &arg)) > 0)
		if (c == OPT_NODE)
			node = arg;
	if (c < 0)
		return p.exit_code;
	r = isoctl_want_args(ctx, &p, 0, 0, NULL);
	if (r)
		return r;
	if (!path || (node && isoctl_query_add(&path, "node", node) < 0))
		return isoctl_oom();
	r = isoctl_list(ctx, path, &resp);
	return r ? r : isoctl_render(ctx, &resp, print_gpus);
}

int isoctl_cmd_gpu(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] = "Usage: isoctl gpu SUBCOMMAND ...\n"
	                            "\n"
	                            "GPUs of the cluster (cluster-admin and auditor).\n"
	                            "  list [--node N]   every GPU, or those of node N\n"
	                            "Run 'isoctl gpu list --help' for details, 'isoctl --help' for "
	                            "global flags.\n";
	static const struct isoctl_cmd verbs[] = {{"list", gpu_list}};

	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage, argc, argv);
}

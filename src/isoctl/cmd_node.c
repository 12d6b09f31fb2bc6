/* cmd_node.c: `isoctl node ...` and `isoctl gpu list`: the operator's view of
 * the hardware (/v1/nodes, /v1/gpus) and the cordon/uncordon/drain switches.
 * cluster-admin and auditor only; the server enforces it. */
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

int isoctl_cmd_node(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"list", .simple = &node_list},     {"get", .simple = &node_get},
	    {"cordon", .simple = &node_cordon}, {"uncordon", .simple = &node_uncordon},
	    {"drain", .simple = &node_drain},
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
	isoctl_table_add_json(t, json_object_get(g, "free_slices"));
	isoctl_table_add_owned(t, ISO_TAKE(inst)); /* "" shows as "-" */
}

static int print_gpus(const json_t *body)
{
	static const char *const headers[] = {"NODE", "IDX",         "MODEL",
	                                      "MIG",  "FREE_SLICES", "INSTANCES"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_gpu_row);
}

static const struct isoctl_simple_cmd gpu_list = {
    .usage = "Usage: isoctl gpu list [--node N]\n"
             "\n"
             "Lists GPUs (GET /v1/gpus, every page): node, index, model, MIG mode, free\n"
             "memory slices, and the instances on it as PROFILE@START(ALLOCATION)\n"
             "('whole' for a whole GPU). cluster-admin and auditor.\n"
             "  --node N   only GPUs of node N\n",
    .list = true,
    .path = "/v1/gpus",
    .filters = {{"node", "node"}},
    .print = print_gpus,
};

int isoctl_cmd_gpu(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] = "Usage: isoctl gpu SUBCOMMAND ...\n"
	                            "\n"
	                            "GPUs of the cluster (cluster-admin and auditor).\n"
	                            "  list [--node N]   every GPU, or those of node N\n"
	                            "Run 'isoctl gpu list --help' for details, 'isoctl --help' for "
	                            "global flags.\n";
	static const struct isoctl_cmd verbs[] = {{"list", .simple = &gpu_list}};

	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage, argc, argv);
}

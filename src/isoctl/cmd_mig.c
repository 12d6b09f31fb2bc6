/* cmd_mig.c: `isoctl mig layout`: the current MIG layout of every GPU (from
 * GET /v1/gpus, cluster-admin and auditor), as a slice map per GPU or as a
 * mig-parted configuration (one config per distinct node layout) that the
 * NVIDIA MIG manager can re-apply. Placements are isostack's; mig-parted
 * only records counts and chooses its own placements. */
#include <string.h>

#include "isoctl/isoctl.h"

enum { OPT_NODE, OPT_FORMAT, NUM_FLAGS };
enum format { FMT_TABLE, FMT_JSON, FMT_MIG_PARTED };

static const char usage_mig[] = "Usage: isoctl mig SUBCOMMAND ...\n"
                                "\n"
                                "MIG layouts of the cluster's GPUs (cluster-admin and auditor).\n"
                                "  layout [--node N] [-o mig-parted]   the current layout\n"
                                "Run 'isoctl mig layout --help' for details, 'isoctl --help' for "
                                "global flags.\n";

static const char usage_layout[] =
    "Usage: isoctl mig layout [--node N] [--format table|json|mig-parted]\n"
    "\n"
    "Shows the current MIG layout of every GPU (GET /v1/gpus, every page):\n"
    "node, index, model, MIG mode and a map of its memory slices, one\n"
    "[PROFILE@START] per instance and [free@S-E] per run of free slices;\n"
    "[whole] for a GPU taken whole.\n"
    "  --node N          only GPUs of node N\n"
    "  --format F        table (default), json (the server's GPU list) or\n"
    "                    mig-parted: a mig-parted configuration, one config per\n"
    "                    distinct node layout (`nvidia-mig-parted apply -f FILE\n"
    "                    -c CONFIG`); -o mig-parted after `layout` is the same\n";

/* ---- reading the server's GPU objects ---- */

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

static long long num(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* The instance that starts at memory slice `s`, or NULL. */
static const json_t *instance_at(const json_t *gpu, long long s)
{
	size_t i;
	const json_t *in;

	json_array_foreach (json_object_get(gpu, "instances"), i, in)
		if (!json_is_true(json_object_get(in, "whole")) && num(in, "start") == s)
			return in;
	return NULL;
}

/* Is slice `s` inside some instance? */
static bool slice_used(const json_t *gpu, long long s)
{
	size_t i;
	const json_t *in;

	json_array_foreach (json_object_get(gpu, "instances"), i, in) {
		long long st = num(in, "start"), w = num(in, "width");
		if (json_is_true(json_object_get(in, "whole")) || (s >= st && s < st + w))
			return true;
	}
	return false;
}

static bool gpu_whole(const json_t *gpu)
{
	size_t i;
	const json_t *in;

	if (json_is_true(json_object_get(gpu, "whole_used")))
		return true;
	json_array_foreach (json_object_get(gpu, "instances"), i, in)
		if (json_is_true(json_object_get(in, "whole")))
			return true;
	return false;
}

/* "[3g.40gb@0][free@4-7]"; NULL when out of memory. */
static char *slice_map(const json_t *gpu)
{
	long long slices = num(gpu, "memory_slices");
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		return NULL;
	if (gpu_whole(gpu)) {
		fputs("[whole]", f);
	} else if (!json_is_true(json_object_get(gpu, "mig_enabled"))) {
		fputs("[free]", f);
	} else {
		for (long long s = 0; s < slices && s < 64;) {
			const json_t *in = instance_at(gpu, s);
			long long e = s;

			if (in) {
				fprintf(f, "[%s@%lld]", str(in, "profile"), s);
				s += num(in, "width") > 0 ? num(in, "width") : 1;
				continue;
			}
			if (slice_used(gpu, s)) { /* inside an instance that starts earlier */
				s++;
				continue;
			}
			while (e + 1 < slices && !slice_used(gpu, e + 1) &&
			       !instance_at(gpu, e + 1))
				e++;
			if (e == s)
				fprintf(f, "[free@%lld]", s);
			else
				fprintf(f, "[free@%lld-%lld]", s, e);
			s = e + 1;
		}
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void add_layout_row(struct isoctl_table *t, const json_t *g)
{
	isoctl_table_add_json(t, json_object_get(g, "node"));
	isoctl_table_add_json(t, json_object_get(g, "index"));
	isoctl_table_add_json(t, json_object_get(g, "model"));
	isoctl_table_add(t, json_is_true(json_object_get(g, "mig_enabled")) ? "on" : "off");
	isoctl_table_add_owned(t, slice_map(g));
}

static int print_layout(const json_t *body)
{
	static const char *const headers[] = {"NODE", "IDX", "MODEL", "MIG", "LAYOUT"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_layout_row);
}

/* ---- mig-parted ---- */

/* One GPU's entry: MIG mode and sorted "\"profile\": count" pairs. */
struct device {
	long long index;
	bool mig;
	char devices[512]; /* {"1g.10gb": 2, "3g.40gb": 1} */
};

/* A string from the server, safe inside a YAML double-quoted scalar. */
static void quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fputc('?', f);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void device_of(const json_t *gpu, struct device *d)
{
	const char *names[64] = {0};
	size_t n = 0, i;
	const json_t *in;
	FILE *f = fmemopen(d->devices, sizeof(d->devices), "w");

	d->index = num(gpu, "index");
	/* A GPU taken whole runs with MIG off: a MIG-enabled GPU without
	 * instances shows CUDA no device, and whole-GPU jobs need the P2P and
	 * NVLink that MIG instances do not have. Hopper and later switch
	 * without a reset (mig.md). */
	d->mig = json_is_true(json_object_get(gpu, "mig_enabled")) && !gpu_whole(gpu);
	if (!f) {
		d->devices[0] = '\0';
		return;
	}
	json_array_foreach (json_object_get(gpu, "instances"), i, in)
		if (!json_is_true(json_object_get(in, "whole")) && str(in, "profile")[0] &&
		    n < ISO_ARRAY_SIZE(names))
			names[n++] = str(in, "profile");
	qsort(names, n, sizeof(names[0]), cmp_str);
	fputc('{', f);
	for (i = 0; i < n;) {
		size_t k = i;
		while (k < n && strcmp(names[k], names[i]) == 0)
			k++;
		if (i)
			fputs(", ", f);
		quoted(f, names[i]);
		fprintf(f, ": %zu", k - i);
		i = k;
	}
	fputc('}', f);
	fputc('\0', f);
	fclose(f);
	d->devices[sizeof(d->devices) - 1] = '\0';
}

/* A node's layout, as text: its devices grouped into mig-parted entries. */
static char *node_layout(struct device *dev, size_t n)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	bool *done = calloc(n ? n : 1, sizeof(*done));

	if (!f || !done) {
		if (f)
			fclose(f);
		free(out);
		free(done);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (done[i])
			continue;
		fprintf(f, "    - devices: [");
		for (size_t k = i; k < n; k++) {
			if (done[k] || dev[k].mig != dev[i].mig ||
			    strcmp(dev[k].devices, dev[i].devices) != 0)
				continue;
			fprintf(f, "%s%lld", k == i ? "" : ", ", dev[k].index);
			done[k] = true;
		}
		fprintf(f, "]\n      mig-enabled: %s\n", dev[i].mig ? "true" : "false");
		if (dev[i].mig)
			fprintf(f, "      mig-devices: %s\n", dev[i].devices);
	}
	free(done);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static int cmp_device(const void *a, const void *b)
{
	const struct device *x = a, *y = b;
	return (x->index > y->index) - (x->index < y->index);
}

struct layout {
	char *text;  /* the entries */
	char *nodes; /* "a, b, c" */
};

static int print_mig_parted(const json_t *body)
{
	const json_t *items = json_object_get(body, "items");
	size_t n = json_array_size(items), n_layouts = 0;
	struct layout *layouts = calloc(n ? n : 1, sizeof(*layouts));
	struct device *dev = calloc(n ? n : 1, sizeof(*dev));
	int r = ISOCTL_EXIT_OK;

	if (!layouts || !dev) {
		free(layouts);
		free(dev);
		return isoctl_oom();
	}
	/* Items come grouped by node, in inventory order. */
	for (size_t i = 0; i < n && r == 0;) {
		const char *node = str(json_array_get(items, i), "node");
		size_t k = i, nd = 0;
		char *text;

		for (; k < n && strcmp(str(json_array_get(items, k), "node"), node) == 0; k++)
			device_of(json_array_get(items, k), &dev[nd++]);
		qsort(dev, nd, sizeof(dev[0]), cmp_device);
		text = node_layout(dev, nd);
		if (!text) {
			r = isoctl_oom();
			break;
		}
		size_t l = 0;
		while (l < n_layouts && strcmp(layouts[l].text, text) != 0)
			l++;
		if (l == n_layouts) {
			layouts[n_layouts++].text = text;
		} else {
			free(text);
		}
		char *joined = NULL;
		if (asprintf(&joined, "%s%s%s", layouts[l].nodes ? layouts[l].nodes : "",
		             layouts[l].nodes ? ", " : "", node) < 0) {
			r = isoctl_oom();
			break;
		}
		free(layouts[l].nodes);
		layouts[l].nodes = joined;
		i = k;
	}
	if (r == 0) {
		fputs("# The current MIG layout, from isoctl mig layout -o mig-parted: one config\n"
		      "# per distinct node layout. Apply with\n"
		      "#   nvidia-mig-parted apply -f FILE -c CONFIG\n"
		      "# on the nodes listed above each config (workloads stopped). mig-parted\n"
		      "# records counts, not placements; isostack's placements are in\n"
		      "# `isoctl mig layout`.\n"
		      "version: v1\n"
		      "mig-configs:\n",
		      stdout);
		for (size_t l = 0; l < n_layouts; l++) {
			fputs("  # nodes: ", stdout);
			isoctl_fputs_clean(layouts[l].nodes, stdout);
			printf("\n  isostack-layout-%zu:\n", l + 1);
			fputs(layouts[l].text, stdout);
		}
		if (n_layouts == 0)
			fputs("  {}\n", stdout);
	}
	for (size_t l = 0; l < n_layouts; l++) {
		free(layouts[l].text);
		free(layouts[l].nodes);
	}
	free(layouts);
	free(dev);
	return r;
}

/* ---- the command ---- */

/* Takes -o/--output mig-parted off the line (the global -o knows only table
 * and json); the rest goes to the usual parser. */
static int strip_output_format(int argc, char **argv, char **out, bool *mig_parted)
{
	int n = 0;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			while (i < argc)
				out[n++] = argv[i++];
			break;
		}
		if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc &&
		    strcmp(argv[i + 1], "mig-parted") == 0) {
			*mig_parted = true;
			i++;
			continue;
		}
		if (strcmp(a, "-omig-parted") == 0 || strcmp(a, "--output=mig-parted") == 0) {
			*mig_parted = true;
			continue;
		}
		out[n++] = argv[i];
	}
	out[n] = NULL;
	return n;
}

static int cmd_layout(struct isoctl *ctx, int argc, char **argv)
{
	static const struct option options[] = {
	    ISOCTL_FLAG("node", required_argument, OPT_NODE),
	    ISOCTL_FLAG("format", required_argument, OPT_FORMAT), ISOCTL_GLOBAL_OPTIONS};
	_cleanup_free_ char **args = calloc((size_t)argc + 1, sizeof(*args));
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = strdup("/v1/gpus");
	const char *flag[NUM_FLAGS] = {0};
	bool mig_parted = false;
	enum format fmt;
	int nargs, r;

	if (!args || !path)
		return isoctl_oom();
	nargs = strip_output_format(argc, argv, args, &mig_parted);
	struct isoctl_parser p = ISOCTL_PARSER(nargs, args, options, usage_layout);
	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 0, 0, NULL) < 0)
		return p.exit_code;
	fmt = ctx->output == ISOCTL_OUT_JSON ? FMT_JSON : FMT_TABLE;
	if (flag[OPT_FORMAT]) {
		if (strcmp(flag[OPT_FORMAT], "table") == 0)
			fmt = FMT_TABLE;
		else if (strcmp(flag[OPT_FORMAT], "json") == 0)
			fmt = FMT_JSON;
		else if (strcmp(flag[OPT_FORMAT], "mig-parted") == 0)
			fmt = FMT_MIG_PARTED;
		else
			return isoctl_usage_error(
			    ctx, "--format: unknown format '%s' (table, json, mig-parted)",
			    flag[OPT_FORMAT]);
	}
	if (mig_parted)
		fmt = FMT_MIG_PARTED;
	if (flag[OPT_NODE] && isoctl_query_add(&path, "node", flag[OPT_NODE]) < 0)
		return isoctl_oom();
	r = isoctl_list(ctx, path, &resp);
	if (r)
		return r;
	if (fmt == FMT_JSON) {
		isoctl_print_json(resp.body);
		return 0;
	}
	if (fmt == FMT_MIG_PARTED)
		return print_mig_parted(resp.body);
	return print_layout(resp.body);
}

int isoctl_cmd_mig(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {{"layout", .run = cmd_layout}};

	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_mig, argc, argv);
}

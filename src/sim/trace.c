/* trace.c: the two files of an openb trace, read into plain arrays: the node
 * list (sn,cpu_milli,memory_mib,gpu,model) and a pod list
 * (name,cpu_milli,memory_mib,num_gpu,gpu_milli and, in all but the multigpu
 * files, gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time).
 * Values are checked here, each against the file and line it came from, so
 * that everything downstream may trust them. Schemas: mig.md, "Benchmark
 * data"; the simulator's reading of them: docs/sim.md. */
#include <errno.h>
#include <string.h>

#include "sim/internal.h"

#define SIM_MAX_ROWS    (1 << 22)
#define SIM_MAX_GPUS    64 /* per node and per pod, as for allocations */
#define SIM_MAX_MIB     (INT64_C(1) << 40)
#define SIM_MAX_SECONDS (INT64_C(1) << 40)

/* Appends one zeroed element for the current line to a growing array of
 * `what` (nodes, pods); NULL with *r set when the file has more than
 * SIM_MAX_ROWS of them or memory runs out. */
static void *next_row(struct sim_csv *c, const char *what, void **v, int *n, int *cap, size_t size,
                      int *r)
{
	if (*n == SIM_MAX_ROWS) {
		*r = sim_csv_error(c, -1, "more than %d %s", SIM_MAX_ROWS, what);
		return NULL;
	}
	if (*n == *cap) {
		int nc = *cap ? *cap * 2 : 256;
		void *nv = realloc(*v, (size_t)nc * size);
		if (!nv) {
			*r = iso_error_set(c->err, ISO_E_INTERNAL, NULL, "out of memory");
			return NULL;
		}
		*v = nv;
		*cap = nc;
	}
	memset((char *)*v + (size_t)*n * size, 0, size);
	return (char *)*v + (size_t)(*n)++ * size;
}

/* The columns nodes and pods share: cpu_milli, memory_mib and a GPU count. */
static int parse_resources(struct sim_csv *c, int c_cpu, int c_mem, int c_gpu, int *cpu_milli,
                           int64_t *memory_mib, int *gpus)
{
	int64_t v;
	int r;

	if ((r = sim_csv_int(c, c_cpu, 0, INT32_MAX, &v)) < 0)
		return r;
	*cpu_milli = (int)v;
	if ((r = sim_csv_int(c, c_mem, 0, SIM_MAX_MIB, memory_mib)) < 0)
		return r;
	if ((r = sim_csv_int(c, c_gpu, 0, SIM_MAX_GPUS, &v)) < 0)
		return r;
	*gpus = (int)v;
	return 0;
}

static int cmp_node_name(const void *a, const void *b, void *ctx)
{
	const struct iso_sim_node *v = ctx;
	const struct iso_sim_node *x = &v[*(const int *)a], *y = &v[*(const int *)b];
	int c = strcmp(x->name, y->name);

	return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int check_unique(const char *name, const struct iso_sim_nodes *nodes, struct iso_error *err)
{
	_cleanup_free_ int *by = NULL;

	if (nodes->n < 2)
		return 0;
	by = calloc((size_t)nodes->n, sizeof(*by));
	if (!by)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < nodes->n; i++)
		by[i] = i;
	qsort_r(by, (size_t)nodes->n, sizeof(*by), cmp_node_name, nodes->v);
	for (int i = 1; i < nodes->n; i++) {
		const struct iso_sim_node *x = &nodes->v[by[i]], *prev = &nodes->v[by[i - 1]];

		if (strcmp(x->name, prev->name) == 0)
			return iso_error_set(
			    err, ISO_E_INVALID, "sn",
			    "%s:%d: sn: node '%s' is listed twice (first on line %d)", name,
			    x->line, x->name, prev->line);
	}
	return 0;
}

int iso_sim_nodes_parse(const char *name, const char *text, size_t len, struct iso_sim_nodes *out,
                        struct iso_error *err)
{
	struct iso_sim_nodes nodes = {0};
	int c_sn, c_cpu, c_mem, c_gpu, c_model, cap = 0, r;
	const struct sim_csv_col cols[] = {
	    {"sn", true, &c_sn},   {"cpu_milli", true, &c_cpu}, {"memory_mib", true, &c_mem},
	    {"gpu", true, &c_gpu}, {"model", true, &c_model},
	};
	_cleanup_free_ struct sim_csv *c = calloc(1, sizeof(*c));

	memset(out, 0, sizeof(*out));
	if (!c)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	r = sim_csv_header(c, name, text, len, cols, (int)ISO_ARRAY_SIZE(cols), err);
	if (r < 0)
		return r;
	while ((r = sim_csv_next(c)) > 0) {
		struct iso_sim_node *n =
		    next_row(c, "nodes", (void **)&nodes.v, &nodes.n, &cap, sizeof(*nodes.v), &r);

		if (!n)
			break;
		n->line = c->line;
		if (!iso_name_valid(c->field[c_sn])) {
			r = sim_csv_error(
			    c, c_sn, "'%s' is not a valid node name ([a-z0-9][a-z0-9._-]{0,62})",
			    c->field[c_sn]);
			break;
		}
		iso_strlcpy(n->name, c->field[c_sn], sizeof(n->name));
		r = parse_resources(c, c_cpu, c_mem, c_gpu, &n->cpu_milli, &n->memory_mib,
		                    &n->gpus);
		if (r < 0)
			break;
		/* `model` names the trace's own GPU (G1, V100M32, ...): the
		 * simulator replaces it with a MIG-capable model. */
	}
	if (r == 0)
		r = check_unique(name, &nodes, err);
	if (r < 0) {
		iso_sim_nodes_clear(&nodes);
		return r;
	}
	iso_strlcpy(nodes.path, name, sizeof(nodes.path));
	*out = nodes;
	return 0;
}

void iso_sim_nodes_clear(struct iso_sim_nodes *n)
{
	free(n->v);
	memset(n, 0, sizeof(*n));
}

int iso_sim_nodes_load(const char *path, struct iso_sim_nodes *out, struct iso_error *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r;

	memset(out, 0, sizeof(*out));
	r = sim_read_file(path, &text, &len, err);
	return r < 0 ? r : iso_sim_nodes_parse(path, text, len, out, err);
}

/* ---- pods ---- */

struct pod_cols {
	int name, cpu, mem, num_gpu, milli, spec, qos, phase, created, deleted, scheduled;
};

static int parse_pod(struct sim_csv *c, const struct pod_cols *k, bool times, struct iso_sim_pod *p)
{
	int64_t v;
	int r;

	p->line = c->line;
	if (c->field[k->name][0] == '\0')
		return sim_csv_error(c, k->name, "empty; every pod needs a name");
	if (iso_strlcpy(p->name, c->field[k->name], sizeof(p->name)) < 0)
		return sim_csv_error(c, k->name, "longer than %d bytes", ISO_NAME_MAX - 1);
	r = parse_resources(c, k->cpu, k->mem, k->num_gpu, &p->cpu_milli, &p->memory_mib,
	                    &p->num_gpu);
	if (r < 0)
		return r;
	if ((r = sim_csv_int(c, k->milli, 0, 1000, &v)) < 0)
		return r;
	p->gpu_milli = (int)v;
	if (p->num_gpu == 0 && p->gpu_milli != 0)
		return sim_csv_error(c, k->milli, "%d with num_gpu 0; a pod without GPUs has 0",
		                     p->gpu_milli);
	if (p->num_gpu > 1 && p->gpu_milli != 1000 && p->gpu_milli != 0)
		return sim_csv_error(
		    c, k->milli, "%d with num_gpu %d; a share of a GPU (1..999) needs num_gpu 1",
		    p->gpu_milli, p->num_gpu);
	if (!times)
		return 0;
	if ((r = sim_csv_int(c, k->created, 0, SIM_MAX_SECONDS, &p->creation)) < 0)
		return r;
	if ((r = sim_csv_int(c, k->deleted, 0, SIM_MAX_SECONDS, &p->deletion)) < 0)
		return r;
	if (p->deletion < p->creation)
		return sim_csv_error(c, k->deleted, "%lld is before creation_time %lld",
		                     (long long)p->deletion, (long long)p->creation);
	/* scheduled_time is empty for pods that never ran; unused, but when
	 * given it must be a number. */
	if (k->scheduled >= 0 && c->field[k->scheduled][0] != '\0' &&
	    (r = sim_csv_int(c, k->scheduled, 0, SIM_MAX_SECONDS, &v)) < 0)
		return r;
	return 0;
}

int iso_sim_trace_parse(const char *name, const char *text, size_t len, struct iso_sim_trace *out,
                        struct iso_error *err)
{
	struct iso_sim_trace t = {0};
	struct pod_cols k;
	int cap = 0, r;
	const struct sim_csv_col cols[] = {
	    {"name", true, &k.name},
	    {"cpu_milli", true, &k.cpu},
	    {"memory_mib", true, &k.mem},
	    {"num_gpu", true, &k.num_gpu},
	    {"gpu_milli", true, &k.milli},
	    {"gpu_spec", false, &k.spec},
	    {"qos", false, &k.qos},
	    {"pod_phase", false, &k.phase},
	    {"creation_time", false, &k.created},
	    {"deletion_time", false, &k.deleted},
	    {"scheduled_time", false, &k.scheduled},
	};
	_cleanup_free_ struct sim_csv *c = calloc(1, sizeof(*c));

	memset(out, 0, sizeof(*out));
	if (!c)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	r = sim_csv_header(c, name, text, len, cols, (int)ISO_ARRAY_SIZE(cols), err);
	if (r < 0)
		return r;
	if ((k.created >= 0) != (k.deleted >= 0)) {
		c->line = 1;
		return sim_csv_error(c, -1, "column '%s' without '%s'",
		                     k.created >= 0 ? "creation_time" : "deletion_time",
		                     k.created >= 0 ? "deletion_time" : "creation_time");
	}
	t.has_times = k.created >= 0;
	while ((r = sim_csv_next(c)) > 0) {
		struct iso_sim_pod *p =
		    next_row(c, "pods", (void **)&t.v, &t.n, &cap, sizeof(*t.v), &r);

		if (!p || (r = parse_pod(c, &k, t.has_times, p)) < 0)
			break;
	}
	if (r < 0) {
		iso_sim_trace_clear(&t);
		return r;
	}
	iso_strlcpy(t.path, name, sizeof(t.path));
	*out = t;
	return 0;
}

void iso_sim_trace_clear(struct iso_sim_trace *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

int iso_sim_trace_load(const char *path, struct iso_sim_trace *out, struct iso_error *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r;

	memset(out, 0, sizeof(*out));
	r = sim_read_file(path, &text, &len, err);
	return r < 0 ? r : iso_sim_trace_parse(path, text, len, out, err);
}

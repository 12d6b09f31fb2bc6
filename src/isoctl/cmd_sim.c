/* cmd_sim.c: `isoctl sim`, the offline placement benchmark (docs/sim.md). It
 * needs no server: it reads the Alibaba openb CSVs, runs the library's
 * placement policies on a synthetic MIG cluster (saturate or replay), and
 * optionally solves the exact ILP bound on a small sub-cluster, printing a
 * table or JSON. Everything it measures is computed in libisostack
 * (src/sim); this file is the command line and the rendering. */
#include <math.h>
#include <string.h>

#include "isoctl/isoctl.h"
#include "isostack/sim.h"

/* Declared here rather than in isoctl.h, which other work owns for now. */

static const char usage_sim[] =
    "Usage: isoctl sim --nodes NODES.csv --trace PODS.csv --policy LIST [FLAGS]\n"
    "       isoctl sim --mapping [--gpu-model MODEL]\n"
    "\n"
    "Offline, trace-driven simulation of MIG placement on the Alibaba openb traces\n"
    "(docs/sim.md). Runs the placement library directly; needs no server.\n"
    "  --nodes FILE          node list CSV (sn,cpu_milli,memory_mib,gpu,model)\n"
    "  --trace FILE          pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli,...)\n"
    "  --gpu-model MODEL     MIG-capable model every GPU becomes (default h100-80gb)\n"
    "  --policy LIST         static, first-fit, best-fit, fgd, isostack, slurm-count,\n"
    "                        slurm-count-first: one, several comma-separated, or all\n"
    "                        (those in this build); slurm-count*: Slurm chooses the\n"
    "                        node by a count GRES, isostack the slice on it, and a\n"
    "                        node that cannot hold it is a requeue (REQUEUED columns)\n"
    "  --mode MODE           saturate (default): pods drawn until the offered demand\n"
    "                        reaches --max-demand; replay: the trace's own times\n"
    "  --seed N              seed of the arrivals and the sub-cluster (default 1)\n"
    "  --gpus N              run on a sub-cluster of N GPUs: trace nodes drawn with\n"
    "                        the seed, each kept while the total stays <= N\n"
    "  --max-demand PCT      saturate: offered demand to stop at, % of capacity (130)\n"
    "  --ilp-gpus N          as --gpus N, and solve the exact bound (GLPK) on the\n"
    "                        same arrivals: the gap of each policy to the optimum\n"
    "  --ilp-time-limit S    seconds each ILP may take (default 60): one on the\n"
    "                        arrivals up to 100% offered, one up to --max-demand\n"
    "  --ilp-in-order        with --ilp-gpus: also the in-order bound, the most any\n"
    "                        policy that places every arrival that fits can hold\n"
    "                        (ORDGAP columns; solves on about 16 GPUs or fewer)\n"
    "  --lp-bound            saturate: also an LP upper bound on the optimum, for any\n"
    "                        cluster size (LPGAP columns; docs/sim.md)\n"
    "  --cold                isostack starts knowing nothing of the demand (default:\n"
    "                        it is told the trace's mix, the one FGD is built with)\n"
    "  --placements          saturate: also where each arrival went, per policy and\n"
    "                        in each ILP optimum (a table after the summary; JSON\n"
    "                        \"placements\" arrays)\n"
    "  --no-curve            leave the allocation curve out of the output\n"
    "  --json                JSON output (same as -o json): an object for one policy,\n"
    "                        an array for several\n"
    "  --mapping             print the model's gpu_milli -> MIG profile table and exit\n"
    "Exit codes: 0 ok, 2 usage, 3 a file or policy not found, 6 bad input, 1 internal.\n";

enum {
	F_NODES,
	F_TRACE,
	F_MODEL,
	F_POLICY,
	F_MODE,
	F_SEED,
	F_GPUS,
	F_MAX_DEMAND,
	F_ILP_GPUS,
	F_ILP_TIME,
	F_ILP_IN_ORDER,
	F_LP_BOUND,
	F_COLD,
	F_PLACEMENTS,
	F_NO_CURVE,
	F_JSON,
	F_MAPPING,
	F_COUNT
};

static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static const char *mode_name(enum iso_sim_mode m)
{
	return m == ISO_SIM_REPLAY ? "replay" : "saturate";
}

/* ---- --mapping ---- */

static int print_mapping(const struct isoctl *ctx, const struct iso_gpu_model *m)
{
	static const char *const headers[] = {"GPU_MILLI", "COMPUTE", "MEMORY", "PROFILE"};
	_cleanup_json_ json_t *rows = json_array();
	_cleanup_(isoctl_table_clear) struct isoctl_table t;
	int from = 1;

	isoctl_table_init(&t, 4, headers);
	if (!rows)
		return isoctl_oom();
	for (int milli = 1; milli <= 1000; milli++) {
		const struct iso_mig_profile *p = iso_sim_profile_for_milli(m, milli);
		const struct iso_mig_profile *next =
		    milli < 999 ? iso_sim_profile_for_milli(m, milli + 1) : NULL;

		if (milli == 1000) {
			isoctl_table_add(&t, "1000 (or num_gpu > 1)");
			isoctl_table_addf(&t, "%d", m->compute_slices);
			isoctl_table_addf(&t, "%d", m->memory_slices);
			isoctl_table_add(&t, "whole GPU");
			json_array_append_new(rows, json_pack("{s:i,s:i,s:s?,s:i,s:i}", "from",
			                                      1000, "to", 1000, "profile", NULL,
			                                      "compute", m->compute_slices,
			                                      "memory", m->memory_slices));
			break;
		}
		if (next == p)
			continue;
		isoctl_table_addf(&t, "%d-%d", from, milli);
		isoctl_table_addf(&t, "%d", p ? p->compute : 0);
		isoctl_table_addf(&t, "%d", p ? p->width : 0);
		isoctl_table_add(&t, p ? p->name : "-");
		json_array_append_new(rows,
		                      json_pack("{s:i,s:i,s:s?,s:i,s:i}", "from", from, "to", milli,
		                                "profile", p ? p->name : NULL, "compute",
		                                p ? p->compute : 0, "memory", p ? p->width : 0));
		from = milli + 1;
	}
	if (ctx->output == ISOCTL_OUT_JSON) {
		_cleanup_json_ json_t *j =
		    json_pack("{s:s,s:O}", "gpu_model", m->name, "mapping", rows);
		if (!j)
			return isoctl_oom();
		isoctl_print_json(j);
		return ISOCTL_EXIT_OK;
	}
	printf("gpu_milli -> MIG profile on %s (compute ceil(milli*%d/1000), memory "
	       "ceil(milli*%d/1000) slices, smallest covering profile)\n",
	       m->name, m->compute_slices, m->memory_slices);
	return isoctl_table_print(&t);
}

/* ---- one run ---- */

/* The exact bounds at 100% and at the maximum offered demand: r[kind][i],
 * kind an enum iso_sim_ilp_kind (any subset, in arrival order). */
struct ilp_out {
	bool done;
	bool in_order; /* r[ISO_SIM_ILP_IN_ORDER] solved too */
	bool lp;       /* lpb[] solved (--lp-bound) */
	struct iso_sim_lp_bound lpb[2];
	int gpus;
	double time_limit;
	int pct[2];
	struct iso_sim_ilp_result r[2][2];
	/* --placements: what names the arrivals and nodes (else NULL). */
	const struct iso_sim *sim;
	const struct iso_sim_trace *trace;
};

/* The arrival's request in words: "3g.40gb", "2 whole GPUs", "cpu only". */
static void asks_of(const struct ilp_out *ilp, const struct iso_sim_pod *pod, char *buf,
                    size_t size)
{
	struct iso_sim_request req;
	struct iso_error e = {0};

	if (iso_sim_pod_request(pod, iso_sim_cluster_of(ilp->sim)->model, &req, &e) < 0)
		snprintf(buf, size, "?");
	else if (req.shape.gpu_count == 0)
		snprintf(buf, size, "cpu only");
	else if (req.shape.whole)
		snprintf(buf, size, "%d whole GPU%s", req.shape.gpu_count,
		         req.shape.gpu_count > 1 ? "s" : "");
	else
		snprintf(buf, size, "%s", req.shape.profile);
}

/* "node/gpu@start", "node/0,1" for whole GPUs, "node" for CPU only, "-" left
 * out, "n/a" not in the ILP's model. */
static void place_text(const struct ilp_out *ilp, const struct iso_sim_place *p, char *buf,
                       size_t size)
{
	size_t off;

	if (p->node < 0) {
		snprintf(buf, size, p->node == ISO_SIM_NOT_MODELLED ? "n/a" : "-");
		return;
	}
	off = (size_t)snprintf(buf, size, "%s",
	                       iso_sim_cluster_of(ilp->sim)->inv.nodes[p->node].name);
	for (int g = 0, first = 1; g < 64 && off < size; g++)
		if ((p->gpus >> g) & 1u) {
			off +=
			    (size_t)snprintf(buf + off, size - off, "%s%d", first ? "/" : ",", g);
			first = 0;
		}
	if (p->start >= 0 && off < size)
		snprintf(buf + off, size - off, "@%d", p->start);
}

static json_t *places_json(const struct ilp_out *ilp, const struct iso_sim_place *places, int n)
{
	const struct iso_sim_cluster *c = iso_sim_cluster_of(ilp->sim);
	int n_seq;
	const int *seq = iso_sim_sequence(ilp->sim, &n_seq);
	json_t *a = json_array();

	for (int q = 0; a && q < n && q < n_seq; q++) {
		const struct iso_sim_pod *pod = &ilp->trace->v[seq[q]];
		const struct iso_sim_place *p = &places[q];
		char asks[64];
		json_t *gpus = json_array();

		asks_of(ilp, pod, asks, sizeof(asks));
		for (int g = 0; gpus && g < 64; g++)
			if ((p->gpus >> g) & 1u)
				json_array_append_new(gpus, json_integer(g));
		json_array_append_new(
		    a,
		    json_pack("{s:i,s:s,s:i,s:s,s:o,s:o,s:o,s:b}", "arrival", q, "pod", pod->name,
		              "line", pod->line, "asks", asks, "node",
		              p->node < 0 ? json_null() : json_string(c->inv.nodes[p->node].name),
		              "gpus", gpus ? gpus : json_null(), "start",
		              p->start < 0 ? json_null() : json_integer(p->start), "modelled",
		              p->node != ISO_SIM_NOT_MODELLED));
	}
	return a;
}

/* The policy's allocation at the ILP's point of the curve. */
static int64_t alloc_at(const struct iso_sim_result *res, int pct)
{
	for (int k = 0; k < res->n_curve; k++)
		if (res->curve[k].offered_pct == pct)
			return (int64_t)llround(res->curve[k].alloc_ratio *
			                        (double)res->slices_total);
	return -1;
}

/* 1 - got / bound: the policy's distance below an upper bound (null when
 * there is no bound or no point of the curve). */
static double gap_to(int64_t got, double bound)
{
	return bound > 0 && got >= 0 ? 1.0 - (double)got / bound : NAN;
}

static json_t *ilp_json(const struct iso_sim_result *res, const struct ilp_out *ilp, int kind,
                        int i)
{
	const struct iso_sim_ilp_result *r = &ilp->r[kind][i];
	const int64_t got = alloc_at(res, ilp->pct[i]);
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "offered_pct", json_integer(ilp->pct[i]));
	json_object_set_new(o, "pods", json_integer(r->pods));
	json_object_set_new(o, "optimal", json_boolean(r->optimal));
	json_object_set_new(o, "best", json_real(r->best));
	json_object_set_new(o, "bound", json_real(r->bound));
	json_object_set_new(o, "policy_alloc", json_integer(got));
	/* gap: against the bound (the true gap when optimal, else at most this);
	 * gap_min: against the best placement found. */
	json_object_set_new(o, "gap", jnum(gap_to(got, r->bound)));
	json_object_set_new(o, "gap_min", jnum(gap_to(got, r->best)));
	json_object_set_new(o, "columns", json_integer(r->columns));
	json_object_set_new(o, "rows", json_integer(r->rows));
	json_object_set_new(o, "elapsed_s", json_real(r->elapsed_s));
	if (ilp->sim && r->places)
		json_object_set_new(o, "placements", places_json(ilp, r->places, r->arrivals));
	return o;
}

static double ilp_gap(const struct iso_sim_result *res, const struct ilp_out *ilp, int kind, int i)
{
	/* Unsolved bounds are zero, so their gap is null. */
	return ilp->done ? gap_to(alloc_at(res, ilp->pct[i]), ilp->r[kind][i].bound) : NAN;
}

static double lp_gap(const struct iso_sim_result *res, const struct ilp_out *ilp, int i)
{
	return ilp->lp ? gap_to(alloc_at(res, ilp->pct[i]), ilp->lpb[i].bound) : NAN;
}

static json_t *lp_json(const struct iso_sim_result *res, const struct ilp_out *ilp)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "pod_types", json_integer(ilp->lpb[1].pod_types));
	json_object_set_new(o, "node_classes", json_integer(ilp->lpb[1].node_classes));
	for (int i = 0; i < 2; i++) {
		const struct iso_sim_lp_bound *b = &ilp->lpb[i];

		json_object_set_new(
		    o, i == 0 ? "at_100" : "at_max",
		    json_pack("{s:i,s:i,s:f,s:I,s:o,s:f}", "offered_pct", ilp->pct[i], "pods",
		              b->pods, "bound", b->bound, "policy_alloc",
		              (json_int_t)alloc_at(res, ilp->pct[i]), "gap",
		              jnum(lp_gap(res, ilp, i)), "elapsed_s", b->elapsed_s));
	}
	return o;
}

static json_t *result_json(const struct iso_sim_result *res, const struct iso_sim_config *cfg,
                           const char *const *v, const struct ilp_out *ilp, bool curve)
{
	json_t *j = json_object();
	json_t *pts;

	if (!j)
		return NULL;
	json_object_set_new(j, "policy", json_string(res->policy));
	json_object_set_new(j, "mode", json_string(mode_name(res->mode)));
	json_object_set_new(j, "gpu_model", json_string(cfg->model->name));
	json_object_set_new(j, "seed", json_integer((json_int_t)cfg->seed));
	json_object_set_new(j, "cold", json_boolean(cfg->cold));
	json_object_set_new(j, "nodes_file", json_string(v[F_NODES]));
	json_object_set_new(j, "trace_file", json_string(v[F_TRACE]));
	json_object_set_new(j, "nodes", json_integer(res->nodes));
	json_object_set_new(j, "gpus", json_integer(res->gpus));
	json_object_set_new(j, "slices_total", json_integer(res->slices_total));
	json_object_set_new(j, "mem_slices_total", json_integer(res->mem_slices_total));
	json_object_set_new(j, "pods", json_integer(res->pods));
	json_object_set_new(j, "placed", json_integer(res->placed));
	json_object_set_new(j, "rejected", json_integer(res->rejected));
	json_object_set_new(j, "cpu_only", json_integer(res->cpu_only));
	json_object_set_new(j, "alloc_ratio_at_100", jnum(res->alloc_ratio_at_100));
	json_object_set_new(j, "alloc_ratio_at_130", jnum(res->alloc_ratio_at_130));
	json_object_set_new(j, "mem_alloc_ratio_at_100", jnum(res->mem_alloc_ratio_at_100));
	json_object_set_new(j, "mem_alloc_ratio_at_130", jnum(res->mem_alloc_ratio_at_130));
	if (res->mode == ISO_SIM_SATURATE) {
		json_object_set_new(j, "max_demand_pct", json_integer(cfg->max_demand_pct));
		json_object_set_new(j, "unfit", json_integer(res->unfit));
		json_object_set_new(j, "alloc_compute", json_integer(res->alloc_compute));
		json_object_set_new(j, "alloc_memory", json_integer(res->alloc_memory));
	} else {
		json_object_set_new(j, "utilisation", jnum(res->utilisation));
		json_object_set_new(j, "mem_utilisation", jnum(res->mem_utilisation));
		json_object_set_new(j, "queued", json_integer(res->queued));
		json_object_set_new(j, "mean_wait_s", jnum(res->mean_wait_s));
	}
	json_object_set_new(j, "counts_requeues", json_boolean(res->counts_requeues));
	json_object_set_new(j, "requeued", json_integer(res->requeued));
	json_object_set_new(j, "requeues", json_integer(res->requeues));
	json_object_set_new(j, "requeue_share", jnum(res->requeue_share));
	if (res->mode == ISO_SIM_SATURATE)
		json_object_set_new(j, "requeue_share_at_100", jnum(res->requeue_share_at_100));
	json_object_set_new(j, "elapsed_s", json_real(res->elapsed_s));
	if (ilp->done) {
		json_t *o = json_object();
		json_t *ord = ilp->in_order ? json_object() : NULL;

		json_object_set_new(o, "gpus", json_integer(ilp->gpus));
		json_object_set_new(o, "time_limit_s", json_real(ilp->time_limit));
		json_object_set_new(o, "at_100", ilp_json(res, ilp, ISO_SIM_ILP_ANY_SUBSET, 0));
		json_object_set_new(o, "at_max", ilp_json(res, ilp, ISO_SIM_ILP_ANY_SUBSET, 1));
		if (ord) {
			json_object_set_new(ord, "at_100",
			                    ilp_json(res, ilp, ISO_SIM_ILP_IN_ORDER, 0));
			json_object_set_new(ord, "at_max",
			                    ilp_json(res, ilp, ISO_SIM_ILP_IN_ORDER, 1));
			json_object_set_new(o, "in_order", ord);
		}
		json_object_set_new(j, "ilp", o);
	}
	if (ilp->lp)
		json_object_set_new(j, "lp_bound", lp_json(res, ilp));
	if (ilp->sim && res->places)
		json_object_set_new(j, "placements", places_json(ilp, res->places, (int)res->pods));
	if (curve && res->mode == ISO_SIM_SATURATE) {
		pts = json_array();
		for (int k = 0; k < res->n_curve; k++)
			json_array_append_new(
			    pts,
			    json_pack("{s:i,s:f,s:f}", "offered_pct", res->curve[k].offered_pct,
			              "alloc_ratio", res->curve[k].alloc_ratio, "mem_alloc_ratio",
			              res->curve[k].mem_alloc_ratio));
		json_object_set_new(j, "curve", pts);
	}
	return j;
}

static void add_ratio(struct isoctl_table *t, double v)
{
	if (isfinite(v))
		isoctl_table_addf(t, "%.4f", v);
	else
		isoctl_table_add(t, "-");
}

static int print_table(const struct iso_sim_result *res, int n, const struct ilp_out *ilp)
{
	static const char *const sat_base[] = {"POLICY",    "GPUS",     "PODS",
	                                       "PLACED",    "REJECTED", "ALLOC@100",
	                                       "ALLOC@130", "MEM@100",  "MEM@130"};
	static const char *const gaps[] = {"GAP@100",    "GAP@MAX",   "ORDGAP@100",
	                                   "ORDGAP@MAX", "LPGAP@100", "LPGAP@MAX"};
	const bool shown[3] = {ilp->done, ilp->done && ilp->in_order, ilp->lp};
	const char *sat[ISO_ARRAY_SIZE(sat_base) + ISO_ARRAY_SIZE(gaps) + 4];
	size_t n_sat = 0;
	static const char *const rep_base[] = {"POLICY",      "GPUS",     "PODS",
	                                       "PLACED",      "QUEUED",   "REJECTED",
	                                       "UTILISATION", "MEM_UTIL", "MEAN_WAIT_S"};
	const char *rep[ISO_ARRAY_SIZE(rep_base) + 4];
	size_t n_rep = 0;
	const bool replay = n > 0 && res[0].mode == ISO_SIM_REPLAY;
	bool requeues = false;
	_cleanup_(isoctl_table_clear) struct isoctl_table t;

	/* The requeue columns only when a policy chooses nodes by Slurm's
	 * counts (for the others they are 0 by construction). */
	for (int i = 0; i < n; i++)
		requeues = requeues || res[i].counts_requeues;
	for (size_t k = 0; k < ISO_ARRAY_SIZE(sat_base); k++)
		sat[n_sat++] = sat_base[k];
	for (size_t k = 0; k < ISO_ARRAY_SIZE(gaps); k++)
		if (shown[k / 2])
			sat[n_sat++] = gaps[k];
	for (size_t k = 0; k < ISO_ARRAY_SIZE(rep_base); k++)
		rep[n_rep++] = rep_base[k];
	if (requeues) {
		sat[n_sat++] = "REQUEUED";
		sat[n_sat++] = "REQ_SHARE@100";
		sat[n_sat++] = "REQ_SHARE";
		rep[n_rep++] = "REQUEUED";
		rep[n_rep++] = "REQ_SHARE";
	}
	sat[n_sat++] = "SECONDS";
	rep[n_rep++] = "SECONDS";
	isoctl_table_init(&t, replay ? n_rep : n_sat, replay ? rep : sat);
	for (int i = 0; i < n; i++) {
		const struct iso_sim_result *r = &res[i];

		isoctl_table_add(&t, r->policy);
		isoctl_table_addf(&t, "%d", r->gpus);
		isoctl_table_addf(&t, "%lld", (long long)r->pods);
		isoctl_table_addf(&t, "%lld", (long long)r->placed);
		if (replay) {
			isoctl_table_addf(&t, "%lld", (long long)r->queued);
			isoctl_table_addf(&t, "%lld", (long long)r->rejected);
			add_ratio(&t, r->utilisation);
			add_ratio(&t, r->mem_utilisation);
			isoctl_table_addf(&t, "%.0f", r->mean_wait_s);
		} else {
			isoctl_table_addf(&t, "%lld", (long long)r->rejected);
			add_ratio(&t, r->alloc_ratio_at_100);
			add_ratio(&t, r->alloc_ratio_at_130);
			add_ratio(&t, r->mem_alloc_ratio_at_100);
			add_ratio(&t, r->mem_alloc_ratio_at_130);
			for (int kind = 0; kind < 2; kind++)
				for (int k = 0; k < 2 && shown[kind]; k++)
					add_ratio(&t, ilp_gap(r, ilp, kind, k));
			for (int k = 0; k < 2 && shown[2]; k++)
				add_ratio(&t, lp_gap(r, ilp, k));
		}
		if (requeues) {
			isoctl_table_addf(&t, "%lld", (long long)r->requeued);
			if (!replay)
				add_ratio(&t, r->requeue_share_at_100);
			add_ratio(&t, r->requeue_share);
		}
		isoctl_table_addf(&t, "%.2f", r->elapsed_s);
	}
	for (int kind = 0; ilp->done && kind < (ilp->in_order ? 2 : 1); kind++)
		for (int i = 0; i < 2; i++) {
			const struct iso_sim_ilp_result *b = &ilp->r[kind][i];

			printf("ILP (%s) on %d GPUs at %d%% offered (%d GPU pods): %s %.0f "
			       "compute slices (bound %.0f) in %.1f s\n",
			       kind == ISO_SIM_ILP_IN_ORDER ? "in order" : "any subset", ilp->gpus,
			       ilp->pct[i], b->pods, b->optimal ? "optimum" : "best found", b->best,
			       b->bound, b->elapsed_s);
		}
	for (int i = 0; ilp->lp && i < 2; i++)
		printf("LP bound on %d GPUs at %d%% offered (%d GPU pods, %d types on %d node "
		       "classes): %.0f compute slices in %.1f s\n",
		       n > 0 ? res[0].gpus : 0, ilp->pct[i], ilp->lpb[i].pods,
		       ilp->lpb[i].pod_types, ilp->lpb[i].node_classes, ilp->lpb[i].bound,
		       ilp->lpb[i].elapsed_s);
	return isoctl_table_print(&t);
}

/* --placements in a table: one row per arrival, one column per policy and
 * per ILP optimum ("." where an ILP did not see the arrival). */
static int print_places(const struct iso_sim_result *res, int n, const struct ilp_out *ilp)
{
	static const char *const bound_names[2][2] = {{"ILP@100", "ILP@MAX"},
	                                              {"ORDER@100", "ORDER@MAX"}};
	const char *head[4 + 16 + 4];
	const struct iso_sim_ilp_result *bounds[4];
	size_t n_head = 0;
	int n_bounds = 0, n_rows = 0, n_seq;
	const int *seq = iso_sim_sequence(ilp->sim, &n_seq);
	_cleanup_(isoctl_table_clear) struct isoctl_table t;

	head[n_head++] = "ARRIVAL";
	head[n_head++] = "POD";
	head[n_head++] = "LINE";
	head[n_head++] = "ASKS";
	for (int i = 0; i < n && i < 16; i++) {
		head[n_head++] = res[i].policy;
		if (res[i].pods > n_rows)
			n_rows = (int)res[i].pods;
	}
	for (int kind = 0; ilp->done && kind < (ilp->in_order ? 2 : 1); kind++)
		for (int k = 0; k < 2; k++) {
			head[n_head++] = bound_names[kind][k];
			bounds[n_bounds++] = &ilp->r[kind][k];
		}
	isoctl_table_init(&t, n_head, head);
	for (int q = 0; q < n_rows && q < n_seq; q++) {
		const struct iso_sim_pod *pod = &ilp->trace->v[seq[q]];
		char buf[128];

		isoctl_table_addf(&t, "%d", q);
		isoctl_table_add(&t, pod->name);
		isoctl_table_addf(&t, "%d", pod->line);
		asks_of(ilp, pod, buf, sizeof(buf));
		isoctl_table_add(&t, buf);
		for (int i = 0; i < n && i < 16; i++) {
			place_text(ilp, &res[i].places[q], buf, sizeof(buf));
			isoctl_table_add(&t, buf);
		}
		for (int b = 0; b < n_bounds; b++) {
			if (q < bounds[b]->arrivals && bounds[b]->places)
				place_text(ilp, &bounds[b]->places[q], buf, sizeof(buf));
			else
				snprintf(buf, sizeof(buf), ".");
			isoctl_table_add(&t, buf);
		}
	}
	printf("\n");
	return isoctl_table_print(&t);
}

/* ---- the command ---- */

/* Splits --policy into names; "all" is every policy of this build. */
static int policy_list(const struct isoctl *ctx, const char *arg, const char **names, int *n,
                       char *buf, size_t size)
{
	*n = 0;
	if (strcmp(arg, "all") == 0) {
		for (int i = 0; i < iso_sim_n_policies; i++) {
			if (strcmp(iso_sim_policies[i], "isostack") == 0 &&
			    !iso_placer_find("isostack")) {
				fprintf(stderr,
				        "isoctl: policy isostack not available in this build; "
				        "running the others\n");
				continue;
			}
			names[(*n)++] = iso_sim_policies[i];
		}
		return 0;
	}
	if (iso_strlcpy(buf, arg, size) < 0)
		return isoctl_usage_error(ctx, "--policy: too long");
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int k;

		for (k = 0; k < iso_sim_n_policies && strcmp(iso_sim_policies[k], tok) != 0; k++)
			;
		if (k == iso_sim_n_policies)
			return isoctl_usage_error(
			    ctx,
			    "--policy: unknown policy '%s' (static, first-fit, "
			    "best-fit, fgd, isostack, slurm-count, slurm-count-first, or all)",
			    tok);
		if (*n == iso_sim_n_policies)
			return isoctl_usage_error(ctx, "--policy: too many names");
		names[(*n)++] = tok;
	}
	if (*n == 0)
		return isoctl_usage_error(ctx, "--policy: no policy named");
	return 0;
}

int isoctl_cmd_sim(struct isoctl *ctx, int argc, char **argv)
{
	static const struct option options[] = {
	    ISOCTL_FLAG("nodes", required_argument, F_NODES),
	    ISOCTL_FLAG("trace", required_argument, F_TRACE),
	    ISOCTL_FLAG("gpu-model", required_argument, F_MODEL),
	    ISOCTL_FLAG("policy", required_argument, F_POLICY),
	    ISOCTL_FLAG("mode", required_argument, F_MODE),
	    ISOCTL_FLAG("seed", required_argument, F_SEED),
	    ISOCTL_FLAG("gpus", required_argument, F_GPUS),
	    ISOCTL_FLAG("max-demand", required_argument, F_MAX_DEMAND),
	    ISOCTL_FLAG("ilp-gpus", required_argument, F_ILP_GPUS),
	    ISOCTL_FLAG("ilp-time-limit", required_argument, F_ILP_TIME),
	    ISOCTL_FLAG("ilp-in-order", no_argument, F_ILP_IN_ORDER),
	    ISOCTL_FLAG("lp-bound", no_argument, F_LP_BOUND),
	    ISOCTL_FLAG("cold", no_argument, F_COLD),
	    ISOCTL_FLAG("placements", no_argument, F_PLACEMENTS),
	    ISOCTL_FLAG("no-curve", no_argument, F_NO_CURVE),
	    ISOCTL_FLAG("json", no_argument, F_JSON),
	    ISOCTL_FLAG("mapping", no_argument, F_MAPPING),
	    ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage_sim);
	const char *v[F_COUNT] = {0};
	struct iso_sim_config cfg = {.mode = ISO_SIM_SATURATE, .seed = 1, .max_demand_pct = 130};
	struct iso_sim_nodes nodes = {0};
	struct iso_sim_trace trace = {0};
	_cleanup_(iso_sim_freep) struct iso_sim *sim = NULL;
	_cleanup_free_ struct iso_sim_result *res = NULL;
	struct ilp_out ilp = {.time_limit = 60};
	struct iso_error e = {0};
	const char *names[16];
	char policy_buf[256];
	int n_names = 0, n_res = 0, rc = ISOCTL_EXIT_OK;
	long long num;

	if (isoctl_parse_line(ctx, &p, v, F_COUNT, 0, 0, NULL) < 0)
		return p.exit_code;
	if (v[F_JSON])
		ctx->output = ISOCTL_OUT_JSON;
	cfg.model = iso_gpu_model_find(v[F_MODEL] ? v[F_MODEL] : "h100-80gb");
	if (!cfg.model)
		return isoctl_usage_error(ctx, "--gpu-model: unknown GPU model '%s'", v[F_MODEL]);
	if (cfg.model->n_profiles == 0)
		return isoctl_usage_error(ctx, "--gpu-model: %s has no MIG profiles",
		                          cfg.model->name);
	if (v[F_MAPPING])
		return print_mapping(ctx, cfg.model);
	if (!v[F_NODES])
		return isoctl_usage_error(ctx, "missing --nodes");
	if (!v[F_TRACE])
		return isoctl_usage_error(ctx, "missing --trace");
	if (!v[F_POLICY])
		return isoctl_usage_error(ctx, "missing --policy");
	if (v[F_MODE]) {
		if (strcmp(v[F_MODE], "saturate") == 0)
			cfg.mode = ISO_SIM_SATURATE;
		else if (strcmp(v[F_MODE], "replay") == 0)
			cfg.mode = ISO_SIM_REPLAY;
		else
			return isoctl_usage_error(ctx, "--mode: '%s' is not saturate or replay",
			                          v[F_MODE]);
	}
	if (v[F_SEED]) {
		if (isoctl_parse_int(ctx, "--seed", v[F_SEED], 0, INT64_MAX, &num))
			return ISOCTL_EXIT_USAGE;
		cfg.seed = (uint64_t)num;
	}
	if (v[F_MAX_DEMAND]) {
		if (isoctl_parse_int(ctx, "--max-demand", v[F_MAX_DEMAND], 1, ISO_SIM_CURVE_MAX,
		                     &num))
			return ISOCTL_EXIT_USAGE;
		cfg.max_demand_pct = (int)num;
	}
	if (v[F_GPUS]) {
		if (isoctl_parse_int(ctx, "--gpus", v[F_GPUS], 1, INT32_MAX, &num))
			return ISOCTL_EXIT_USAGE;
		cfg.sub_gpus = (int)num;
	}
	if (v[F_ILP_GPUS]) {
		if (isoctl_parse_int(ctx, "--ilp-gpus", v[F_ILP_GPUS], 1, 64, &num))
			return ISOCTL_EXIT_USAGE;
		if (v[F_GPUS] && num != cfg.sub_gpus)
			return isoctl_usage_error(ctx, "--ilp-gpus and --gpus name different "
			                               "sub-clusters");
		if (cfg.mode != ISO_SIM_SATURATE)
			return isoctl_usage_error(ctx, "--ilp-gpus needs --mode saturate");
		if (!iso_sim_ilp_available())
			return isoctl_usage_error(ctx,
			                          "--ilp-gpus: this build has no ILP (GLPK was "
			                          "missing at configure time)");
		cfg.sub_gpus = ilp.gpus = (int)num;
	}
	if (v[F_ILP_IN_ORDER]) {
		if (!v[F_ILP_GPUS])
			return isoctl_usage_error(ctx, "--ilp-in-order needs --ilp-gpus");
		ilp.in_order = true;
	}
	cfg.cold = v[F_COLD] != NULL;
	if (v[F_PLACEMENTS]) {
		if (cfg.mode != ISO_SIM_SATURATE)
			return isoctl_usage_error(ctx, "--placements needs --mode saturate");
		cfg.record_places = true;
	}
	if (v[F_LP_BOUND]) {
		if (cfg.mode != ISO_SIM_SATURATE)
			return isoctl_usage_error(ctx, "--lp-bound needs --mode saturate");
		if (!iso_sim_ilp_available())
			return isoctl_usage_error(ctx, "--lp-bound: this build has no LP (GLPK was "
			                               "missing at configure time)");
		ilp.lp = true;
	}
	if (v[F_ILP_TIME]) {
		if (isoctl_parse_int(ctx, "--ilp-time-limit", v[F_ILP_TIME], 1, 86400, &num))
			return ISOCTL_EXIT_USAGE;
		ilp.time_limit = (double)num;
	}
	if ((rc = policy_list(ctx, v[F_POLICY], names, &n_names, policy_buf, sizeof(policy_buf))))
		return rc;

	if (iso_sim_nodes_load(v[F_NODES], &nodes, &e) < 0 ||
	    iso_sim_trace_load(v[F_TRACE], &trace, &e) < 0 ||
	    iso_sim_prepare(&nodes, &trace, &cfg, &sim, &e) < 0) {
		rc = isoctl_fail_local(&e);
		goto out;
	}
	if (cfg.record_places) {
		ilp.sim = sim;
		ilp.trace = &trace;
	}
	ilp.pct[0] = cfg.max_demand_pct < 100 ? cfg.max_demand_pct : 100;
	ilp.pct[1] = cfg.max_demand_pct;
	for (int i = 0; ilp.lp && i < 2; i++)
		if (iso_sim_lp_bound(sim, ilp.pct[i], &ilp.lpb[i], &e) < 0) {
			rc = isoctl_fail_local(&e);
			goto out;
		}
	if (ilp.gpus) {
		ilp.gpus = iso_sim_cluster_of(sim)->n_gpus;
		for (int kind = 0; kind < (ilp.in_order ? 2 : 1); kind++)
			for (int i = 0; i < 2; i++)
				if (iso_sim_ilp(sim, ilp.pct[i], (enum iso_sim_ilp_kind)kind,
				                ilp.time_limit, &ilp.r[kind][i], &e) < 0) {
					rc = isoctl_fail_local(&e);
					goto out;
				}
		ilp.done = true;
	}
	res = calloc((size_t)n_names + 1, sizeof(*res));
	if (!res) {
		rc = isoctl_oom();
		goto out;
	}
	for (int i = 0; i < n_names; i++) {
		if (iso_sim_run(sim, names[i], &res[n_res], &e) < 0) {
			rc = isoctl_fail_local(&e);
			goto out;
		}
		n_res++;
	}
	if (ctx->output == ISOCTL_OUT_JSON) {
		_cleanup_json_ json_t *out = n_res == 1 ? NULL : json_array();

		for (int i = 0; i < n_res; i++) {
			json_t *j = result_json(&res[i], &cfg, v, &ilp, !v[F_NO_CURVE]);
			if (!j) {
				rc = isoctl_oom();
				goto out;
			}
			if (n_res == 1)
				out = j;
			else
				json_array_append_new(out, j);
		}
		isoctl_print_json(out);
	} else {
		rc = print_table(res, n_res, &ilp);
		if (rc == ISOCTL_EXIT_OK && ilp.sim)
			rc = print_places(res, n_res, &ilp);
	}
out:
	for (int i = 0; i < n_res; i++)
		iso_sim_result_clear(&res[i]);
	for (int kind = 0; kind < 2; kind++)
		for (int i = 0; i < 2; i++)
			iso_sim_ilp_result_clear(&ilp.r[kind][i]);
	iso_sim_trace_clear(&trace);
	iso_sim_nodes_clear(&nodes);
	return rc;
}

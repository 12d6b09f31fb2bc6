/* placement.c: throughput and latency of placement decisions, isostack
 * against first-fit in the same process, with the whole core engine in the
 * path (iso_placer_place: the policy's choice and the cluster state's take;
 * releases through iso_cluster_state_give). A cluster of N nodes x 8
 * H100-80GB (MIG on), InfiniBand with 16 VFs per node, 4 pools; a request mix
 * from a fixed seed (MIG profiles, whole GPUs of 1-8, CPU-only, 64 tenants
 * of skewed size, some pool and model constraints); releases keep the
 * cluster between 70% and 90% of its memory slices. Reports decisions/s and
 * latency percentiles per policy and size, and, on a fill without releases,
 * the share of the cluster each policy allocates before it saturates (the
 * FGD paper's measure). With --tenancy, the same decisions once more with
 * quotas, fair share and isolation classes in the path (the tenancy issue's
 * throughput goal). Single-threaded. docs/benchmarks.md has numbers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isostack/sched.h"
#include "isostack/tenancy.h"

#define GPUS_PER_NODE 8
#define N_POOLS       4
#define N_TENANTS     64

struct bench {
	struct iso_inventory inv;
	struct iso_node *nodes;
	struct iso_gpu *gpus;
	struct iso_cluster_state cs;
	struct iso_allocation *live;
	int n_live, cap_live;
	int64_t used_slices, total_slices;
	uint64_t rng;
	uint64_t next_id;
	/* --tenancy: quotas, fair share and isolation classes in the path */
	bool tenancy;
	struct iso_tenancy ten;
	int acct[N_TENANTS + 1];
	enum iso_isolation tclass[N_TENANTS + 1];
	int h100_kind;
	int64_t clock_ms;
	int *rank;
};

static uint64_t rnd(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench_init(struct bench *b, int n_nodes, uint64_t seed)
{
	const struct iso_gpu_model *h100 = iso_gpu_model_find("h100-80gb");

	memset(b, 0, sizeof(*b));
	b->rng = seed;
	b->nodes = calloc((size_t)n_nodes, sizeof(*b->nodes));
	b->gpus = calloc((size_t)n_nodes * GPUS_PER_NODE, sizeof(*b->gpus));
	if (!b->nodes || !b->gpus || !h100)
		return -ENOMEM;
	b->inv.fabric.type = ISO_FABRIC_INFINIBAND;
	for (int i = 0; i < n_nodes; i++) {
		struct iso_node *n = &b->nodes[i];

		snprintf(n->name, sizeof(n->name), "gpu-%05d", i);
		snprintf(n->pool, sizeof(n->pool), "pool-%d", i % N_POOLS);
		snprintf(n->rack, sizeof(n->rack), "rack-%03d", i / 32);
		n->cpus = 128;
		n->memory_mib = 2048 * 1024;
		n->n_gpus = GPUS_PER_NODE;
		n->gpus = &b->gpus[(size_t)i * GPUS_PER_NODE];
		n->has_port = true;
		n->port.n_vfs = 16;
		for (int j = 0; j < GPUS_PER_NODE; j++) {
			n->gpus[j].index = j;
			n->gpus[j].model = h100;
			n->gpus[j].mig_enabled = true;
		}
	}
	b->inv.n_nodes = n_nodes;
	b->inv.nodes = b->nodes;
	b->total_slices = (int64_t)n_nodes * GPUS_PER_NODE * 8;
	return iso_cluster_state_init(&b->cs, &b->inv);
}

/* Four organisations (shares 1:1:2:4) of 16 tenants each; every
 * organisation guaranteed a quarter of the cluster, tenants nothing of
 * their own, so every admission walks the cohort's borrowing arithmetic.
 * Tenants 1-4 are exclusive-gpu, 5-6 exclusive-node, the rest shared. */
static int tenancy_init(struct bench *b)
{
	static const double org_shares[4] = {1, 1, 2, 4};
	struct iso_tenancy *t = &b->ten;
	int orgs[4], n = b->inv.n_nodes;

	if (iso_tenancy_init(t, 48LL * 3600 * 1000) < 0)
		return -ENOMEM;
	b->h100_kind = iso_tenancy_kind(t, "h100-80gb", NULL);
	t->capacity.v[b->h100_kind] = (int64_t)n * GPUS_PER_NODE * 7;
	t->capacity.v[ISO_RES_GPUS] = (int64_t)n * GPUS_PER_NODE;
	t->capacity.v[ISO_RES_CPUS] = (int64_t)n * 128;
	t->capacity.v[ISO_RES_MEMORY] = (int64_t)n * 2048 * 1024;
	t->capacity.v[ISO_RES_NODES] = n;
	for (int o = 0; o < 4; o++) {
		char name[16];
		snprintf(name, sizeof(name), "org%d", o);
		orgs[o] = iso_tenancy_add(t, name, ISO_ACCT_ORG, 0, org_shares[o], NULL);
		if (orgs[o] < 0)
			return -ENOMEM;
		for (int k = 0; k < t->n_kinds; k++)
			iso_tenancy_set_quota(t, orgs[o], k,
			                      (struct iso_quota){t->capacity.v[k] / 4,
			                                         ISO_QUOTA_NONE, ISO_QUOTA_NONE},
			                      NULL);
	}
	for (int i = 1; i <= N_TENANTS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", i);
		b->acct[i] = iso_tenancy_add(t, name, ISO_ACCT_TENANT, orgs[i % 4], 1.0, NULL);
		if (b->acct[i] < 0)
			return -ENOMEM;
		b->tclass[i] = i <= 4   ? ISO_ISOLATION_EXCLUSIVE_GPU
		               : i <= 6 ? ISO_ISOLATION_EXCLUSIVE_NODE
		                        : ISO_ISOLATION_SHARED;
	}
	b->rank = calloc((size_t)t->n_accounts, sizeof(*b->rank));
	b->tenancy = true;
	return b->rank ? 0 : -ENOMEM;
}

static void demand(const struct bench *b, const struct iso_allocation *a, int members,
                   struct iso_resvec *v)
{
	const struct iso_gpu_model *h100 = iso_gpu_model_find("h100-80gb");
	const struct iso_mig_profile *p =
	    a->shape.whole ? NULL : iso_mig_profile_find(h100, a->shape.profile);

	memset(v, 0, sizeof(*v));
	v->v[ISO_RES_CPUS] = (int64_t)a->shape.cpus * members;
	v->v[ISO_RES_MEMORY] = a->shape.memory_mib * members;
	if (a->shape.whole)
		v->v[ISO_RES_GPUS] = (int64_t)a->shape.gpu_count * members;
	else if (p)
		v->v[b->h100_kind] = (int64_t)p->compute * a->shape.gpu_count * members;
}

/* One decision with the tenancy policy in the path: fair-share standing
 * brought up to date and ranked (what ordering the queue costs), quota
 * admission, the isolation class and spreading as placement constraints,
 * then the charge. */
static int place_tenancy(struct bench *b, const struct iso_placer *p, struct iso_allocation *a,
                         int members)
{
	struct iso_place_constraints pc;
	struct iso_resvec v;
	int acct = b->acct[a->tenant_id];
	int r;

	b->clock_ms += 10;
	iso_fairshare_accrue(&b->ten, b->clock_ms);
	iso_fairshare_rank(&b->ten, b->rank, NULL);
	demand(b, a, members, &v);
	if (iso_tenancy_admit(&b->ten, acct, &v, NULL) < 0)
		return -ENOSPC;
	memset(&pc, 0, sizeof(pc));
	iso_isolation_constraints(
	    b->tclass[a->tenant_id], ISO_ISOLATION_SHARED,
	    members > 1 && b->next_id % 5 == 0 ? ISO_SPREAD_NODE : ISO_SPREAD_NONE, &pc);
	r = iso_placer_place_ex(p, &b->cs, a, members, &pc, NULL);
	if (r == 0)
		iso_tenancy_charge(&b->ten, acct, &v);
	return r;
}

static int place(struct bench *b, const struct iso_placer *p, struct iso_allocation *a, int members)
{
	if (b->tenancy)
		return place_tenancy(b, p, a, members);
	return iso_placer_place(p, &b->cs, a, members, NULL);
}

static void bench_free(struct bench *b)
{
	if (b->tenancy) {
		iso_tenancy_free(&b->ten);
		free(b->rank);
	}
	for (int i = 0; i < b->n_live; i++)
		iso_allocation_clear(&b->live[i]);
	free(b->live);
	iso_cluster_state_free(&b->cs);
	free(b->nodes);
	free(b->gpus);
}

/* The request mix (shares in per mille). */
static void next_request(struct bench *b, struct iso_allocation *a, int *members)
{
	static const struct {
		int per_mille;
		const char *profile; /* NULL: whole; "": CPU-only */
		int count, cpus;
	} mix[] = {
	    {300, "1g.10gb", 1, 2}, {20, "1g.10gb+me", 1, 2}, {100, "1g.20gb", 1, 2},
	    {150, "2g.20gb", 1, 4}, {130, "3g.40gb", 1, 6},   {60, "4g.40gb", 1, 8},
	    {40, "7g.80gb", 1, 14}, {40, "1g.10gb", 2, 4},    {90, NULL, 1, 16},
	    {30, NULL, 2, 32},      {20, NULL, 8, 96},        {20, "", 0, 8},
	};
	int r = (int)(rnd(&b->rng) % 1000);
	int64_t u;
	unsigned k = 0;

	for (; k + 1 < ISO_ARRAY_SIZE(mix) && r >= mix[k].per_mille; k++)
		r -= mix[k].per_mille;
	memset(a, 0, sizeof(*a));
	snprintf(a->id, sizeof(a->id), "a-%016llx", (unsigned long long)++b->next_id);
	/* Skewed tenants: P(tenant <= k) = sqrt(k / N_TENANTS). */
	u = (int64_t)(rnd(&b->rng) % 1000);
	a->tenant_id = 1 + u * u * N_TENANTS / (1000 * 1000);
	a->shape.gpu_count = mix[k].count;
	a->shape.whole = mix[k].profile == NULL;
	if (mix[k].profile)
		iso_strlcpy(a->shape.profile, mix[k].profile, sizeof(a->shape.profile));
	a->shape.cpus = mix[k].cpus;
	a->shape.memory_mib = (int64_t)mix[k].cpus * 8192;
	if (rnd(&b->rng) % 4 == 0)
		snprintf(a->shape.pool, sizeof(a->shape.pool), "pool-%d",
		         (int)(rnd(&b->rng) % N_POOLS));
	if (rnd(&b->rng) % 10 == 0)
		iso_strlcpy(a->shape.gpu_model, "h100-80gb", sizeof(a->shape.gpu_model));
	*members = rnd(&b->rng) % 10 == 0 ? 2 + (int)(rnd(&b->rng) % 3) : 1;
}

static int64_t slices_of(const struct iso_allocation *a)
{
	int64_t n = 0;

	for (int i = 0; i < a->n_slots; i++)
		n += a->slots[i].width;
	return n;
}

static int keep(struct bench *b, struct iso_allocation *a)
{
	if (b->n_live == b->cap_live) {
		int cap = b->cap_live ? 2 * b->cap_live : 1024;
		struct iso_allocation *n = realloc(b->live, (size_t)cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		b->live = n;
		b->cap_live = cap;
	}
	b->live[b->n_live++] = *a;
	b->used_slices += slices_of(a);
	return 0;
}

static double release_one(struct bench *b)
{
	int i = (int)(rnd(&b->rng) % (uint64_t)b->n_live);
	double t0 = now_s(), dt;

	iso_cluster_state_give(&b->cs, &b->live[i]);
	if (b->tenancy) {
		struct iso_resvec v;
		demand(b, &b->live[i], b->live[i].n_members, &v);
		iso_tenancy_release(&b->ten, b->acct[b->live[i].tenant_id], &v);
	}
	dt = now_s() - t0;
	b->used_slices -= slices_of(&b->live[i]);
	iso_allocation_clear(&b->live[i]);
	b->live[i] = b->live[--b->n_live];
	return dt;
}

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;
	return (a > b) - (a < b);
}

struct result {
	double decisions_per_s, p50_us, p99_us, max_us, release_us, util;
	int decisions, failed;
	int empty_nodes, partial_gpus, stranded_slices; /* at the end */
};

/* Free slices of a GPU that no profile of its model can use in its state. */
static int stranded(const struct iso_gpu *g, const struct iso_gpu_occupancy *o)
{
	uint8_t cover = 0;

	for (int j = 0; j < g->model->n_profiles; j++)
		for (int s = 0; s < g->model->memory_slices; s++)
			if (iso_mig_fits_at(g->model, o, &g->model->profiles[j], s))
				cover |= iso_mig_span(s, g->model->profiles[j].width);
	return __builtin_popcount(o->free_mask & (uint8_t)~cover);
}

static void quality(const struct bench *b, struct result *res)
{
	for (int i = 0; i < b->inv.n_nodes; i++) {
		const struct iso_node *n = &b->nodes[i];
		int empty = 0;

		for (int j = 0; j < n->n_gpus; j++) {
			const struct iso_gpu_occupancy *o = &b->cs.usage[i].gpus[j];
			if (iso_gpu_occupancy_empty(n->gpus[j].model, o)) {
				empty++;
				continue;
			}
			if (!o->whole && o->free_mask)
				res->partial_gpus++;
			res->stranded_slices += stranded(&n->gpus[j], o);
		}
		res->empty_nodes += empty == n->n_gpus;
	}
}

/* One policy on one cluster size: warm to 80% full, then `decisions`
 * timed placement calls in the 70-90% band. */
static int run_steady(const struct iso_placer *p, int n_nodes, int decisions, uint64_t seed,
                      bool tenancy, struct result *res)
{
	struct bench b;
	double *lat = calloc((size_t)decisions, sizeof(*lat)), total = 0, rel = 0;
	int n_rel = 0, d = 0, r;

	memset(res, 0, sizeof(*res));
	if (!lat || bench_init(&b, n_nodes, seed) < 0 || (tenancy && tenancy_init(&b) < 0)) {
		free(lat);
		return -ENOMEM;
	}
	/* Warm-up (untimed): fill to 80%. */
	while (b.used_slices * 10 < b.total_slices * 8) {
		struct iso_allocation a;
		int members;

		next_request(&b, &a, &members);
		if (place(&b, p, &a, members) == 0) {
			if (keep(&b, &a) < 0)
				goto oom;
		} else {
			iso_allocation_clear(&a);
		}
	}
	while (d < decisions) {
		double util = (double)b.used_slices / (double)b.total_slices;

		if (b.n_live > 0 && (util > 0.90 || (util > 0.70 && rnd(&b.rng) % 2 == 0))) {
			rel += release_one(&b);
			n_rel++;
			continue;
		}
		struct iso_allocation a;
		int members;
		double t0;

		next_request(&b, &a, &members);
		t0 = now_s();
		r = place(&b, p, &a, members);
		lat[d] = now_s() - t0;
		total += lat[d++];
		if (r == 0) {
			if (keep(&b, &a) < 0)
				goto oom;
		} else {
			res->failed++;
			iso_allocation_clear(&a);
		}
	}
	res->util = (double)b.used_slices / (double)b.total_slices;
	quality(&b, res);
	qsort(lat, (size_t)d, sizeof(*lat), cmp_double);
	res->decisions = d;
	res->decisions_per_s = d / total;
	res->p50_us = lat[d / 2] * 1e6;
	res->p99_us = lat[(size_t)((double)d * 0.99)] * 1e6;
	res->max_us = lat[d - 1] * 1e6;
	res->release_us = n_rel ? rel / n_rel * 1e6 : 0;
	free(lat);
	bench_free(&b);
	return 0;
oom:
	free(lat);
	bench_free(&b);
	return -ENOMEM;
}

/* FGD's measure: submit the same arrival sequence without releases until
 * 500 requests in a row fail; the share of memory slices allocated. */
static int run_fill(const struct iso_placer *p, int n_nodes, uint64_t seed, double *first_refusal,
                    double *alloc_share, int *placed)
{
	struct bench b;
	int fails = 0;

	*placed = 0;
	*first_refusal = -1;
	if (bench_init(&b, n_nodes, seed) < 0)
		return -ENOMEM;
	while (fails < 500) {
		struct iso_allocation a;
		int members;

		next_request(&b, &a, &members);
		if (place(&b, p, &a, members) == 0) {
			if (keep(&b, &a) < 0) {
				bench_free(&b);
				return -ENOMEM;
			}
			fails = 0;
			(*placed)++;
		} else {
			if (*first_refusal < 0)
				*first_refusal = (double)b.used_slices / (double)b.total_slices;
			iso_allocation_clear(&a);
			fails++;
		}
	}
	*alloc_share = (double)b.used_slices / (double)b.total_slices;
	bench_free(&b);
	return 0;
}

static void print_row(const char *policy, int nodes, const struct result *r)
{
	printf("| %-9s | %6d | %6d | %9.0f | %7.1f | %7.1f | %8.1f | %7.1f | %5.1f%% | %6d |\n",
	       policy, nodes, nodes * GPUS_PER_NODE, r->decisions_per_s, r->p50_us, r->p99_us,
	       r->max_us, r->release_us, r->util * 100, r->failed);
	fflush(stdout);
}

static int usage(void)
{
	fputs("Usage: placement [--nodes N] [--decisions D] [--ff-decisions D] [--seed S] "
	      "[--quick] [--tenancy]\n"
	      "  --nodes N         the large cluster (default 10000 nodes x 8 GPUs)\n"
	      "  --decisions D     timed isostack decisions per size (default 200000)\n"
	      "  --ff-decisions D  timed first-fit decisions per size (default 20000)\n"
	      "  --seed S          request-mix seed (default 42)\n"
	      "  --quick           1,000 nodes, fewer decisions (a smoke run)\n"
	      "  --tenancy         also isostack with quotas, fair share and isolation on\n",
	      stderr);
	return 2;
}

int main(int argc, char **argv)
{
	int big = 10000, dec = 200000, ff_dec = 20000;
	bool with_tenancy = false;
	uint64_t seed = 42;
	struct result en_small, ff_small, en_big, ff_big;
	double share_en, share_ff, first_en, first_ff;
	int placed_en, placed_ff;

	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		long long v = 0;

		if (strcmp(argv[i], "--tenancy") == 0) {
			with_tenancy = true;
			continue;
		}
		if (strcmp(argv[i], "--quick") == 0) {
			big = 1000;
			dec = 20000;
			ff_dec = 5000;
			continue;
		}
		if (i + 1 >= argc)
			return usage();
		v = strtoll(argv[i + 1], &end, 10);
		if (*end || v <= 0 || v > 1000000000)
			return usage();
		if (strcmp(argv[i], "--nodes") == 0)
			big = (int)v;
		else if (strcmp(argv[i], "--decisions") == 0)
			dec = (int)v;
		else if (strcmp(argv[i], "--ff-decisions") == 0)
			ff_dec = (int)v;
		else if (strcmp(argv[i], "--seed") == 0)
			seed = (uint64_t)v;
		else
			return usage();
		i++;
	}
	printf("# bench/placement: seed %llu; steady state 70-90%% full; one core\n\n",
	       (unsigned long long)seed);
	printf("| policy    |  nodes |   GPUs | decisions/s | p50 us | p99 us |  max us | "
	       "release us | util | ENOSPC |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	if (run_steady(&iso_placer_isostack, 1000, dec, seed, false, &en_small) < 0 ||
	    run_steady(&iso_placer_first_fit, 1000, ff_dec, seed, false, &ff_small) < 0)
		return 1;
	print_row("isostack", 1000, &en_small);
	print_row("first-fit", 1000, &ff_small);
	if (big != 1000) {
		if (run_steady(&iso_placer_isostack, big, dec, seed, false, &en_big) < 0 ||
		    run_steady(&iso_placer_first_fit, big, ff_dec, seed, false, &ff_big) < 0)
			return 1;
		print_row("isostack", big, &en_big);
		print_row("first-fit", big, &ff_big);
	} else {
		en_big = en_small;
		ff_big = ff_small;
	}
	printf("\nratio isostack/first-fit decisions/s: %.1fx at 1000 nodes, %.1fx at %d nodes\n",
	       en_small.decisions_per_s / ff_small.decisions_per_s,
	       en_big.decisions_per_s / ff_big.decisions_per_s, big);
	printf("isostack cost growth 1000 -> %d nodes: %.2fx time per decision; first-fit: "
	       "%.2fx\n",
	       big, en_small.decisions_per_s / en_big.decisions_per_s,
	       ff_small.decisions_per_s / ff_big.decisions_per_s);
	printf("goal (>= 20000 decisions/s and p99 < 1000 us at %d nodes): %s\n", big,
	       en_big.decisions_per_s >= 20000 && en_big.p99_us < 1000 ? "met" : "NOT met");
	if (with_tenancy) {
		struct result ten;
		if (run_steady(&iso_placer_isostack, big, dec, seed, true, &ten) < 0)
			return 1;
		printf(
		    "\nwith quotas (4 organisations x 16 tenants, cohort borrowing), fair share "
		    "(decay and Fair Tree ranking every decision) and isolation classes (tenants "
		    "1-4 exclusive-gpu, 5-6 exclusive-node; every fifth multi-member request "
		    "spread by node):\n");
		print_row("+tenancy", big, &ten);
		printf("ratio with/without tenancy decisions/s at %d nodes: %.2f\n", big,
		       ten.decisions_per_s / en_big.decisions_per_s);
		printf("goal (>= 10000 decisions/s at %d nodes with tenancy): %s\n", big,
		       ten.decisions_per_s >= 10000 ? "met" : "NOT met");
	}

	printf("\nat the end of the steady state (1000 nodes): empty nodes / partly used GPUs / "
	       "stranded slices (free, usable by no profile)\n");
	printf("  isostack:  %d / %d / %d\n", en_small.empty_nodes, en_small.partial_gpus,
	       en_small.stranded_slices);
	printf("  first-fit: %d / %d / %d\n", ff_small.empty_nodes, ff_small.partial_gpus,
	       ff_small.stranded_slices);
	if (run_fill(&iso_placer_isostack, 1000, seed, &first_en, &share_en, &placed_en) < 0 ||
	    run_fill(&iso_placer_first_fit, 1000, seed, &first_ff, &share_ff, &placed_ff) < 0)
		return 1;
	printf("\nfill without releases (1000 nodes, same arrivals, until 500 refusals in a "
	       "row): memory slices allocated at the first refusal / at the end\n");
	printf("  isostack:  %.1f%% / %.1f%% (%d requests placed)\n", first_en * 100,
	       share_en * 100, placed_en);
	printf("  first-fit: %.1f%% / %.1f%% (%d requests placed)\n", first_ff * 100,
	       share_ff * 100, placed_ff);
	return 0;
}

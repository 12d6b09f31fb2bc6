/* bench/fabric_verify.c: what the fabric verifier costs as the fabric grows,
 * offline, against the naive pairwise check it replaces, measured in the same
 * process. The fabric is the sim driver's model of a synthetic cluster (every
 * PF, VF and storage port, tables as OpenSM would program them) with every
 * node's VF given to one of T tenants; the verifier and the pairwise check
 * judge the same snapshot. Issue 5 asks for this at 10,000 ports to show how
 * the cost grows, beside the live verify of bench/fabric/run.py.
 * Usage: fabric_verify [--quick] [--naive-max PORTS] [--runs N]; results and
 * the command go to docs/benchmarks.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/fabric.h"
#include "isostack/inventory.h"
#include "isostack/util.h"

/* Ports per size: HCAs x (PF + 1 VF) + 2 storage ports. */
static const int sizes[] = {1000, 10000, 100000};
#define PORTS_PER_TENANT 10

struct fabric {
	struct iso_inventory *inv;
	struct iso_fabric_driver *drv;
	struct iso_fabric_intent intent;
	struct iso_fabric_snapshot snap;
	int n_tenants;
	char (*names)[16];
	struct iso_fabric_tenant *tenants;
	struct iso_port_assignment *assign;
	int n_assign;
};

static void fabric_clear(struct fabric *f)
{
	iso_fabric_snapshot_clear(&f->snap);
	iso_fabric_intent_clear(&f->intent);
	iso_fabric_driver_freep(&f->drv);
	iso_inventory_freep(&f->inv);
	free(f->names);
	free(f->tenants);
	free(f->assign);
	memset(f, 0, sizeof(*f));
}

static void fail(const char *what, const struct iso_error *err)
{
	fprintf(stderr, "bench/fabric_verify: %s: %s (%s)\n", what, err ? err->message : "",
	        err ? err->field : "");
}

/* Builds the cluster of `n_hcas` HCAs with one VF each, its intent and the
 * snapshot of what OpenSM would program from it. */
static int fabric_build(struct fabric *f, int n_hcas, struct iso_error *err)
{
	_cleanup_free_ char *yaml = NULL;
	int r;

	r = iso_ibsim_inventory_synthetic(n_hcas, 1, &yaml, err);
	if (r < 0)
		return r;
	r = iso_inventory_load_string("synthetic", yaml, strlen(yaml), &f->inv, err);
	if (r < 0)
		return r;
	r = iso_fabric_sim_driver_new(f->inv, &f->drv, err);
	if (r < 0)
		return r;
	f->n_tenants = n_hcas / PORTS_PER_TENANT > 0 ? n_hcas / PORTS_PER_TENANT : 1;
	f->names = calloc((size_t)f->n_tenants, sizeof(*f->names));
	f->tenants = calloc((size_t)f->n_tenants, sizeof(*f->tenants));
	f->assign = calloc((size_t)f->inv->n_nodes, sizeof(*f->assign));
	if (!f->names || !f->tenants || !f->assign)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int t = 0; t < f->n_tenants; t++) {
		snprintf(f->names[t], sizeof(f->names[t]), "t%05d", t);
		f->tenants[t] = (struct iso_fabric_tenant){
		    .tenant_id = t + 1, .name = f->names[t], .pkey = (uint16_t)(0x0100 + t)};
	}
	for (int i = 0; i < f->inv->n_nodes; i++) {
		const struct iso_node *n = &f->inv->nodes[i];
		if (!n->has_port || n->port.n_vfs < 1)
			continue;
		int k = f->n_assign++;
		f->assign[k] = (struct iso_port_assignment){.node = i,
		                                            .tenant_id = 1 + k % f->n_tenants,
		                                            .vf = 0,
		                                            .guid = n->port.vf_guids[0]};
	}
	r = iso_fabric_intent_build(f->inv, f->tenants, f->n_tenants, f->assign, f->n_assign,
	                            &f->intent, err);
	if (r < 0)
		return r;
	f->intent.generation = 1;
	r = f->drv->ops->apply(f->drv, &f->intent, err);
	if (r < 0)
		return r;
	return f->drv->ops->snapshot(f->drv, &f->snap, err);
}

struct owner {
	uint64_t guid;
	int tenant;
};

static int owner_cmp(const void *a, const void *b)
{
	const struct owner *x = a, *y = b;
	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

/* The naive check: for every pair of tenant ports of different tenants, any
 * base they share with at least one full entry is a path. Ports are
 * attributed as the verifier does (full in a tenant's partition); services,
 * PFs and the SM belong to nobody and are left to the verifier's other
 * rules. Returns the number of offending (pair, key) matches, or -ENOMEM. */
static long naive_check(const struct iso_fabric_intent *in, const struct iso_fabric_snapshot *s)
{
	size_t n_own = 0;
	for (int p = 0; p < in->n_parts; p++)
		if (in->parts[p].kind == ISO_PART_TENANT)
			n_own += (size_t)in->parts[p].n_members;
	_cleanup_free_ struct owner *own = calloc(n_own ? n_own : 1, sizeof(*own));
	_cleanup_free_ int *tenant = calloc((size_t)s->n_ports + 1, sizeof(*tenant));
	if (!own || !tenant)
		return -ENOMEM;
	size_t k = 0;
	for (int p = 0; p < in->n_parts; p++) {
		const struct iso_partition *part = &in->parts[p];
		if (part->kind != ISO_PART_TENANT)
			continue;
		for (int m = 0; m < part->n_members; m++)
			if (part->members[m].membership == ISO_MEMBER_FULL)
				own[k++] =
				    (struct owner){part->members[m].guid, (int)part->tenant_id};
	}
	qsort(own, k, sizeof(*own), owner_cmp);
	for (int i = 0; i < s->n_ports; i++) {
		struct owner key = {.guid = s->ports[i].guid};
		const struct owner *o = k ? bsearch(&key, own, k, sizeof(*own), owner_cmp) : NULL;
		tenant[i] = o ? o->tenant : -1;
	}
	long found = 0;
	for (int i = 0; i < s->n_ports; i++) {
		const struct iso_port_table *a = &s->ports[i];
		if (tenant[i] < 0)
			continue;
		for (int j = i + 1; j < s->n_ports; j++) {
			const struct iso_port_table *b = &s->ports[j];
			if (tenant[j] < 0 || tenant[j] == tenant[i])
				continue;
			for (int x = 0; x < a->n_pkeys; x++)
				for (int y = 0; y < b->n_pkeys; y++)
					if ((a->pkeys[x] & 0x7fff) == (b->pkeys[y] & 0x7fff) &&
					    ((a->pkeys[x] | b->pkeys[y]) & 0x8000))
						found++;
		}
	}
	return found;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), dbl_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median ms of `runs` verifies; 0 or negative errno. *viol gets the number
 * of violations other than near-capacity warnings. */
static int time_verify(const struct fabric *f, int runs, double *ms, int *viol, bool *ok)
{
	double t[64];
	struct iso_error err = {0};

	for (int r = 0; r < runs; r++) {
		struct iso_fabric_report rep = {0};
		uint64_t t0 = iso_mono_ns();
		int rc = iso_fabric_verify(&f->intent, &f->snap, &rep, &err);
		t[r] = (double)(iso_mono_ns() - t0) / 1e6;
		if (rc < 0) {
			fail("iso_fabric_verify", &err);
			return rc;
		}
		*ok = rep.ok;
		*viol = 0;
		for (int v = 0; v < rep.n_violations; v++)
			*viol += rep.violations[v].kind != ISO_VIOL_NEAR_CAPACITY;
		iso_fabric_report_clear(&rep);
	}
	*ms = median(t, runs);
	return 0;
}

static int time_naive(const struct fabric *f, int runs, double *ms, long *found)
{
	double t[64];

	for (int r = 0; r < runs; r++) {
		uint64_t t0 = iso_mono_ns();
		*found = naive_check(&f->intent, &f->snap);
		t[r] = (double)(iso_mono_ns() - t0) / 1e6;
		if (*found < 0)
			return (int)*found;
	}
	*ms = median(t, runs);
	return 0;
}

/* Proves both checks can fail: tenant 2's key, full, on a port of tenant 1,
 * then a fresh snapshot. Returns 0 when both see it. */
static int check_rogue(struct fabric *f, bool run_naive)
{
	struct iso_error err = {0};
	const struct iso_port_assignment *a = &f->assign[0];
	uint16_t other = f->tenants[1 % f->n_tenants].pkey;
	int r = iso_fabric_sim_inject(f->drv, a->guid, (uint16_t)(0x8000 | other));
	if (r < 0)
		return r;
	iso_fabric_snapshot_clear(&f->snap);
	r = f->drv->ops->snapshot(f->drv, &f->snap, &err);
	if (r < 0)
		return r;
	struct iso_fabric_report rep = {0};
	r = iso_fabric_verify(&f->intent, &f->snap, &rep, &err);
	bool seen = r == 0 && !rep.ok;
	iso_fabric_report_clear(&rep);
	if (!seen) {
		fprintf(stderr, "bench/fabric_verify: the verifier missed the rogue entry\n");
		return -EPROTO;
	}
	if (run_naive && naive_check(&f->intent, &f->snap) <= 0) {
		fprintf(stderr, "bench/fabric_verify: the pairwise check missed the rogue entry\n");
		return -EPROTO;
	}
	/* Back to the clean fabric for nothing else to see. */
	r = f->drv->ops->apply(f->drv, &f->intent, &err);
	if (r < 0)
		return r;
	iso_fabric_snapshot_clear(&f->snap);
	return f->drv->ops->snapshot(f->drv, &f->snap, &err);
}

int main(int argc, char **argv)
{
	int runs = 7, naive_max = 10000, max_size = 100000;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			max_size = 10000;
			naive_max = 1000;
			runs = 3;
		} else if (strcmp(argv[i], "--naive-max") == 0 && i + 1 < argc) {
			naive_max = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
			runs = atoi(argv[++i]);
			if (runs < 1 || runs > 64)
				runs = 7;
		} else {
			fprintf(stderr,
			        "usage: %s [--quick] [--naive-max PORTS] [--runs N (1-64)]\n",
			        argv[0]);
			return 2;
		}
	}
	printf("| ports | tenants | table entries | verify median ms | naive pairwise median ms "
	       "| naive / verify | growth vs previous size (verify / naive) |\n");
	printf("|---|---|---|---|---|---|---|\n");
	double prev_v = 0, prev_n = 0;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		if (sizes[s] > max_size)
			break;
		struct fabric f = {0};
		struct iso_error err = {0};
		int n_hcas = (sizes[s] - 2) / 2;
		if (fabric_build(&f, n_hcas, &err) < 0) {
			fail("building the fabric", &err);
			fabric_clear(&f);
			return 1;
		}
		bool run_naive = f.snap.n_ports <= naive_max;
		if (check_rogue(&f, run_naive) < 0) {
			fprintf(stderr,
			        "bench/fabric_verify: a rogue entry went unseen at %d ports\n",
			        f.snap.n_ports);
			fabric_clear(&f);
			return 1;
		}
		long entries = 0;
		for (int i = 0; i < f.snap.n_ports; i++)
			entries += f.snap.ports[i].n_pkeys;
		double v_ms = 0, n_ms = 0;
		int viol = 0;
		bool ok = false;
		long found = 0;
		if (time_verify(&f, runs, &v_ms, &viol, &ok) < 0 ||
		    (run_naive && time_naive(&f, runs > 3 ? 3 : runs, &n_ms, &found) < 0)) {
			fabric_clear(&f);
			return 1;
		}
		if (!ok || viol || found) {
			fprintf(stderr,
			        "bench/fabric_verify: the clean fabric of %d ports is not clean "
			        "(verify %d violations, naive %ld)\n",
			        f.snap.n_ports, viol, found);
			fabric_clear(&f);
			return 1;
		}
		char naive[32] = "not run", ratio[32] = "-", growth[64];
		if (run_naive) {
			snprintf(naive, sizeof(naive), "%.1f", n_ms);
			snprintf(ratio, sizeof(ratio), "%.0f", n_ms / v_ms);
		}
		if (prev_v > 0 && prev_n > 0 && run_naive)
			snprintf(growth, sizeof(growth), "%.1fx / %.1fx", v_ms / prev_v,
			         n_ms / prev_n);
		else if (prev_v > 0)
			snprintf(growth, sizeof(growth), "%.1fx / -", v_ms / prev_v);
		else
			snprintf(growth, sizeof(growth), "-");
		printf("| %d | %d | %ld | %.2f | %s | %s | %s |\n", f.snap.n_ports, f.n_tenants,
		       entries, v_ms, naive, ratio, growth);
		fflush(stdout);
		prev_v = v_ms;
		prev_n = run_naive ? n_ms : 0;
		fabric_clear(&f);
	}
	return 0;
}

/* test_fairness.c: does the fair-share order deliver the shares it
 * promises? Four tenants with shares 1:1:2:4 submit saturating, bursty
 * demand for MIG slices to a simulated cluster of H100s; every step the
 * pending queue is ordered by src/tenancy/fairshare.c and placed in that
 * order by the isostack engine. Over a long run each tenant's share of
 * slice-hours must come within 2% of its entitled share (Jain's index over
 * the normalised shares >= 0.99), and a tenant that was idle while others
 * used everything must get its share back quickly once it has demand. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "isostack/sched.h"
#include "isostack/tenancy.h"

#define NODES   8
#define GPUS    4
#define TENANTS 4
#define MAXJOBS 4096
#define STEP_MS (5 * 60 * 1000LL)

static const double weights[TENANTS] = {1, 1, 2, 4};
static const char *const profiles[] = {"1g.10gb", "2g.20gb", "3g.40gb"};
static const int slices_of[] = {1, 2, 3};

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int rng_int(uint64_t *s, int n)
{
	return (int)(rng_next(s) % (uint64_t)n);
}

struct job {
	struct iso_allocation a;
	int tenant, members, slices;
	int64_t duration_ms, submit_ms, end_ms;
	struct iso_resvec use;
};

struct sim {
	struct iso_inventory inv;
	struct iso_node nodes[NODES];
	struct iso_gpu gpus[NODES][GPUS];
	struct iso_cluster_state cs;
	struct iso_tenancy t;
	int kind, acct[TENANTS];
	struct job *pending[MAXJOBS], *running[MAXJOBS];
	int n_pending, n_running, next_id;
	double slice_ms[TENANTS]; /* slice-milliseconds used in the window measured */
	uint64_t rng;
	struct iso_pending items[MAXJOBS];
	struct iso_queue_entry order[MAXJOBS];
};

static struct sim *sim_new(uint64_t seed)
{
	struct sim *s = calloc(1, sizeof(*s));
	struct iso_error err = {0};
	int org;

	assert_non_null(s);
	s->rng = seed;
	s->inv.fabric.type = ISO_FABRIC_ETHERNET;
	for (int i = 0; i < NODES; i++) {
		struct iso_node *n = &s->nodes[i];
		snprintf(n->name, sizeof(n->name), "n%02d", i);
		snprintf(n->rack, sizeof(n->rack), "rack-%d", i / 4);
		iso_strlcpy(n->pool, "gpu", sizeof(n->pool));
		n->cpus = 256;
		n->memory_mib = 1 << 22;
		n->n_gpus = GPUS;
		n->gpus = s->gpus[i];
		for (int j = 0; j < GPUS; j++) {
			s->gpus[i][j].index = j;
			s->gpus[i][j].model = iso_gpu_model_find("h100-80gb");
			s->gpus[i][j].mig_enabled = true;
			assert_non_null(s->gpus[i][j].model);
		}
	}
	s->inv.n_nodes = NODES;
	s->inv.nodes = s->nodes;
	assert_int_equal(iso_cluster_state_init(&s->cs, &s->inv), 0);
	assert_int_equal(iso_tenancy_init(&s->t, 48 * 3600 * 1000LL), 0);
	s->kind = iso_tenancy_kind(&s->t, "h100-80gb", &err);
	s->t.capacity.v[s->kind] = NODES * GPUS * 7;
	org = iso_tenancy_add(&s->t, "org", ISO_ACCT_ORG, 0, 1, &err);
	for (int i = 0; i < TENANTS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "tenant-%c", 'a' + i);
		s->acct[i] = iso_tenancy_add(&s->t, name, ISO_ACCT_TENANT, org, weights[i], &err);
		assert_true(s->acct[i] > 0);
	}
	return s;
}

static void sim_free(struct sim *s)
{
	for (int i = 0; i < s->n_running; i++) {
		iso_cluster_state_give(&s->cs, &s->running[i]->a);
		iso_allocation_clear(&s->running[i]->a);
		free(s->running[i]);
	}
	for (int i = 0; i < s->n_pending; i++)
		free(s->pending[i]);
	iso_cluster_state_free(&s->cs);
	iso_tenancy_free(&s->t);
	free(s);
}

/* A burst of jobs: 1 or 2 members of one profile, 30 minutes to 4 hours. */
static void submit_burst(struct sim *s, int tenant, int n, int64_t now)
{
	for (int i = 0; i < n && s->n_pending < MAXJOBS; i++) {
		struct job *j = calloc(1, sizeof(*j));
		int p = rng_int(&s->rng, 3);

		assert_non_null(j);
		j->tenant = tenant;
		j->members = 1 + rng_int(&s->rng, 2);
		j->slices = slices_of[p] * j->members;
		j->duration_ms = (30 + rng_int(&s->rng, 211)) * 60 * 1000LL;
		j->submit_ms = now;
		j->use.v[s->kind] = j->slices;
		snprintf(j->a.id, sizeof(j->a.id), "j-%07d", s->next_id++);
		j->a.tenant_id = tenant + 1;
		j->a.shape.gpu_count = 1;
		j->a.shape.cpus = 1;
		j->a.shape.memory_mib = 1024;
		iso_strlcpy(j->a.shape.profile, profiles[p], sizeof(j->a.shape.profile));
		s->pending[s->n_pending++] = j;
	}
}

/* One step: finish what ended, account usage, order, place in order. */
static void step(struct sim *s, int64_t now, bool measure)
{
	struct iso_error err = {0};
	int fails = 0;

	for (int i = 0; i < s->n_running;) {
		struct job *j = s->running[i];
		if (j->end_ms > now) {
			i++;
			continue;
		}
		iso_cluster_state_give(&s->cs, &j->a);
		iso_tenancy_release(&s->t, s->acct[j->tenant], &j->use);
		iso_allocation_clear(&j->a);
		free(j);
		s->running[i] = s->running[--s->n_running];
	}
	assert_int_equal(iso_fairshare_accrue(&s->t, now), 0);
	for (int i = 0; i < s->n_pending; i++) {
		const struct job *j = s->pending[i];
		memset(&s->items[i], 0, sizeof(s->items[i]));
		iso_strlcpy(s->items[i].id, j->a.id, sizeof(s->items[i].id));
		s->items[i].acct = s->acct[j->tenant];
		s->items[i].submit_ms = j->submit_ms;
		s->items[i].req = j->use;
	}
	assert_int_equal(iso_fairshare_order(&s->t, s->items, s->n_pending, s->order, &err), 0);
	/* Place in fair-share order; stop once the cluster is evidently full. */
	{
		bool taken[MAXJOBS] = {false};
		int n = s->n_pending;

		for (int p = 0; p < n && fails < 6; p++) {
			struct job *j = s->pending[s->order[p].item];
			if (iso_placer_place(&iso_placer_isostack, &s->cs, &j->a, j->members,
			                     &err) != 0) {
				fails++;
				continue;
			}
			j->end_ms = now + j->duration_ms;
			iso_tenancy_charge(&s->t, s->acct[j->tenant], &j->use);
			s->running[s->n_running++] = j;
			taken[s->order[p].item] = true;
		}
		s->n_pending = 0;
		for (int i = 0; i < n; i++)
			if (!taken[i])
				s->pending[s->n_pending++] = s->pending[i];
	}
	if (measure)
		for (int i = 0; i < s->n_running; i++)
			s->slice_ms[s->running[i]->tenant] +=
			    (double)s->running[i]->slices * STEP_MS;
}

static int pending_of(const struct sim *s, int tenant)
{
	int n = 0;

	for (int i = 0; i < s->n_pending; i++)
		n += s->pending[i]->tenant == tenant;
	return n;
}

static int64_t slices_running(const struct sim *s, int tenant)
{
	int64_t n = 0;

	for (int i = 0; i < s->n_running; i++)
		if (s->running[i]->tenant == tenant)
			n += s->running[i]->slices;
	return n;
}

/* Saturating and bursty: a tenant with little pending work submits a
 * burst of random size; now and then a large burst arrives anyway. */
static void demand(struct sim *s, int tenant, int64_t now)
{
	if (pending_of(s, tenant) < 6)
		submit_burst(s, tenant, 4 + rng_int(&s->rng, 20), now);
	else if (pending_of(s, tenant) < 40 && rng_int(&s->rng, 100) == 0)
		submit_burst(s, tenant, 30 + rng_int(&s->rng, 30), now);
}

static void test_convergence(void **state)
{
	struct sim *s = sim_new(0x1234567);
	const int64_t day = 24 * 3600 * 1000LL;
	double total = 0, x[TENANTS], sum = 0, sq = 0, wsum = 0, jain;

	(void)state;
	for (int64_t now = 0; now < 20 * day; now += STEP_MS) {
		for (int i = 0; i < TENANTS; i++)
			demand(s, i, now);
		step(s, now, now >= 2 * day); /* the first two days warm up */
	}
	for (int i = 0; i < TENANTS; i++) {
		total += s->slice_ms[i];
		wsum += weights[i];
	}
	for (int i = 0; i < TENANTS; i++) {
		double share = s->slice_ms[i] / total, entitled = weights[i] / wsum;
		x[i] = share / entitled;
		print_message("tenant %c: share %.4f of slice-hours, entitled %.4f (ratio %.4f)\n",
		              'a' + i, share, entitled, x[i]);
		sum += x[i];
		sq += x[i] * x[i];
	}
	for (int i = 0; i < TENANTS; i++)
		if (fabs(x[i] - 1) > 0.02)
			fail_msg(
			    "tenant %c: share is not within 2%% of its entitled share (ratio %.4f)",
			    'a' + i, x[i]);
	jain = sum * sum / (TENANTS * sq);
	print_message("Jain's index %.5f; cluster busy %.3f\n", jain,
	              total / (18.0 * (double)day * (double)s->t.capacity.v[s->kind]));
	assert_true(jain >= 0.99);
	/* saturating: the cluster was kept nearly full */
	assert_true(total / (18.0 * (double)day * (double)s->t.capacity.v[s->kind]) > 0.85);
	sim_free(s);
}

static void test_starved_recovers(void **state)
{
	struct sim *s = sim_new(0xabcdef);
	const int64_t hour = 3600 * 1000LL, day = 24 * hour;
	const double cap = (double)(NODES * GPUS * 7);
	int64_t now = 0, t_share = -1;

	(void)state;
	/* Tenant d (the largest share) is idle for two days while a, b and c
	 * use the whole cluster. */
	for (; now < 2 * day; now += STEP_MS) {
		for (int i = 0; i < 3; i++)
			demand(s, i, now);
		step(s, now, false);
	}
	assert_int_equal(slices_running(s, 3), 0);
	/* Then d bursts: with no recent usage it ranks first, takes every
	 * slice that frees, and holds its entitled half of the cluster within
	 * the longest job's run time (no preemption here). */
	submit_burst(s, 3, 200, now);
	for (int64_t end = now + day; now < end; now += STEP_MS) {
		for (int i = 0; i < TENANTS; i++)
			demand(s, i, now);
		step(s, now, true);
		if (t_share < 0 && slices_running(s, 3) >= 0.5 * cap * 0.95)
			t_share = now;
	}
	assert_true(t_share >= 0);
	print_message("tenant d reached its share %.1f hours after its burst\n",
	              (double)(t_share - 2 * day) / (double)hour);
	assert_true(t_share - 2 * day <= 4 * hour);
	/* Having been starved, it ranks first until its decayed usage catches
	 * up: over the day after the burst it got more than its share. */
	{
		double total = 0;
		for (int i = 0; i < TENANTS; i++)
			total += s->slice_ms[i];
		print_message("tenant d's share of the day after its burst: %.3f\n",
		              s->slice_ms[3] / total);
		assert_true(s->slice_ms[3] / total > 0.5);
	}
	sim_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_convergence),
	    cmocka_unit_test(test_starved_recovers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

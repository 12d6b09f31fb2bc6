/* test_tenancy.c: the tenancy policy core (src/tenancy): quota and
 * borrowing semantics as tables, Fair Tree ranking and the determinism of
 * the queue, backfill against a brute-force check that the head is never
 * delayed, preemption against a brute-force optimum on small random cases,
 * isolation classes and spreading inside the placement engine with an
 * invariant checker after every step, and the Lua admission sandbox with
 * the shipped examples and hostile scripts. */
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

/* Deterministic pseudo-random numbers for the property tests. */
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

/* ---- quotas ---- */

struct tree {
	struct iso_tenancy t;
	int h100;
	int org1, org2, acme, beta, gamma, delta, p1, p2;
};

static void quota(struct tree *x, int acct, int64_t g, int64_t b, int64_t l)
{
	struct iso_error err = {0};

	if (iso_tenancy_set_quota(
	        &x->t, acct, x->h100,
	        (struct iso_quota){.guaranteed = g, .borrow_limit = b, .lend_limit = l}, &err) != 0)
		fail_msg("set_quota: %s", err.message);
}

/* root (100 slices) > org1 (64, may borrow 20) {acme (32/16/8) {p1, p2}, beta (32/8/-)}
 *                  > org2 (36, borrows nothing, lends 10) {gamma (18/18/-), delta (18/10/4)} */
static void tree_init(struct tree *x)
{
	struct iso_error err = {0};
	struct iso_tenancy *t = &x->t;

	assert_int_equal(iso_tenancy_init(t, 3600 * 1000), 0);
	x->h100 = iso_tenancy_kind(t, "h100-80gb", &err);
	assert_true(x->h100 >= ISO_RES_FIRST_MODEL);
	x->org1 = iso_tenancy_add(t, "org1", ISO_ACCT_ORG, 0, 1, &err);
	x->org2 = iso_tenancy_add(t, "org2", ISO_ACCT_ORG, 0, 1, &err);
	x->acme = iso_tenancy_add(t, "acme", ISO_ACCT_TENANT, x->org1, 1, &err);
	x->beta = iso_tenancy_add(t, "beta", ISO_ACCT_TENANT, x->org1, 1, &err);
	x->gamma = iso_tenancy_add(t, "gamma", ISO_ACCT_TENANT, x->org2, 1, &err);
	x->delta = iso_tenancy_add(t, "delta", ISO_ACCT_TENANT, x->org2, 1, &err);
	x->p1 = iso_tenancy_add(t, "p1", ISO_ACCT_PROJECT, x->acme, 1, &err);
	x->p2 = iso_tenancy_add(t, "p2", ISO_ACCT_PROJECT, x->acme, 1, &err);
	assert_true(x->p2 > 0);
	quota(x, 0, 100, 0, 0);
	quota(x, x->org1, 64, 20, ISO_QUOTA_NONE);
	quota(x, x->org2, 36, 0, 10);
	quota(x, x->acme, 32, 16, 8);
	quota(x, x->beta, 32, 8, ISO_QUOTA_NONE);
	quota(x, x->gamma, 18, 18, ISO_QUOTA_NONE);
	quota(x, x->delta, 18, 10, 4);
	quota(x, x->p1, 16, ISO_QUOTA_NONE, ISO_QUOTA_NONE);
	quota(x, x->p2, 16, 4, ISO_QUOTA_NONE);
}

static void use(struct tree *x, int acct, int64_t n)
{
	struct iso_resvec r = {0};

	r.v[x->h100] = n;
	iso_tenancy_charge(&x->t, acct, &r);
}

static void test_quota_table(void **state)
{
	/* Usage of the leaves before the request (acme's own work counts as
	 * its project p1's), then the request; NULL: admitted. */
	static const struct {
		int p1, p2, beta, gamma, delta;
		const char *who;
		int64_t req;
		const char *refused; /* substring of the message */
		const char *field;
	} rows[] = {
	    /* within guarantee */
	    {0, 0, 0, 0, 0, "acme", 32, NULL, NULL},
	    /* the example: the hard limit, named */
	    {50, 0, 0, 0, 0, "acme", 14,
	     "tenant acme: h100-80gb compute slices: request 14 + in use 50 exceeds guaranteed 32 "
	     "+ "
	     "borrowing limit 16",
	     "quota.acme.h100-80gb"},
	    /* borrowing from an idle sibling */
	    {16, 16, 0, 0, 0, "acme", 8, NULL, NULL},
	    /* beta lends only 2 idle, org1 borrows the rest from org2 (lends 10) */
	    {16, 16, 30, 0, 0, "acme", 8, NULL, NULL},
	    /* ... but org2's lending limit caps it: org1 needs 12, org2 lends 10 */
	    {16, 16, 30, 0, 0, "acme", 14, "organisation org1: h100-80gb compute slices",
	     "quota.org1.h100-80gb"},
	    /* ... and org2 lends only what it does not use: 2 idle under its limit of 10 */
	    {16, 16, 30, 16, 18, "acme", 8, "the rest is not idle to borrow now",
	     "quota.org1.h100-80gb"},
	    /* beta's borrowing limit 8 */
	    {0, 0, 32, 0, 0, "beta", 8, NULL, NULL},
	    {0, 0, 32, 0, 0, "beta", 9,
	     "request 9 + in use 32 exceeds guaranteed 32 + borrowing limit 8",
	     "quota.beta.h100-80gb"},
	    /* acme lends only 2 idle: org1 borrows the other 6 from org2 */
	    {30, 0, 32, 0, 0, "beta", 8, NULL, NULL},
	    /* org2 does not borrow: delta lends gamma at most 4 */
	    {0, 0, 0, 18, 0, "gamma", 4, NULL, NULL},
	    {0, 0, 0, 18, 0, "gamma", 5,
	     "tenant gamma: h100-80gb compute slices: request 5 + in use 18 "
	     "exceeds guaranteed 18, and the rest is not idle to borrow now",
	     "quota.gamma.h100-80gb"},
	    /* a guarantee its owner uses is not lent: org2's total is the limit */
	    {0, 0, 0, 18, 16, "gamma", 2, NULL, NULL},
	    {0, 0, 0, 18, 16, "gamma", 3,
	     "organisation org2: h100-80gb compute slices: request 3 + "
	     "in use 34 exceeds guaranteed 36 + borrowing limit 0",
	     "quota.org2.h100-80gb"},
	    /* gamma borrows from idle delta, up to delta's lending limit */
	    {0, 0, 0, 0, 0, "delta", 18, NULL, NULL},
	    {0, 0, 0, 0, 0, "delta", 28, NULL, NULL},
	    {0, 0, 0, 0, 0, "delta", 29,
	     "tenant delta: h100-80gb compute slices: request 29 + in use 0 "
	     "exceeds guaranteed 18 + borrowing limit 10",
	     NULL},
	    /* gamma's lending limit is unset, delta's is 4: delta may take all of gamma's idle 18
	     */
	    {0, 0, 0, 8, 0, "delta", 28, NULL, NULL},
	    /* ... within org2's own hard limit (it does not borrow) */
	    {0, 0, 0, 9, 0, "delta", 28,
	     "organisation org2: h100-80gb compute slices: request 28 + "
	     "in use 9 exceeds guaranteed 36 + borrowing limit 0",
	     "quota.org2.h100-80gb"},
	    /* a guarantee is always admitted, even when lent out (reclaim preempts) */
	    {0, 0, 0, 22, 0, "delta", 18, NULL, NULL},
	    /* projects: p2's own hard limit, then the tenant's above an unlimited p1 */
	    {0, 0, 0, 0, 0, "p2", 21,
	     "project p2: h100-80gb compute slices: request 21 + in use 0 "
	     "exceeds guaranteed 16 + borrowing limit 4",
	     "quota.p2.h100-80gb"},
	    {0, 0, 0, 0, 0, "p1", 32, NULL, NULL},
	    {0, 10, 0, 0, 0, "p1", 39,
	     "tenant acme: h100-80gb compute slices: request 39 + in use 10 "
	     "exceeds guaranteed 32 + borrowing limit 16",
	     "quota.acme.h100-80gb"},
	    {0, 10, 0, 0, 0, "p1", 38, NULL, NULL},
	};

	(void)state;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(rows); i++) {
		struct tree x;
		struct iso_resvec req = {0};
		struct iso_error err = {0};
		int r;

		tree_init(&x);
		use(&x, x.p1, rows[i].p1);
		use(&x, x.p2, rows[i].p2);
		use(&x, x.beta, rows[i].beta);
		use(&x, x.gamma, rows[i].gamma);
		use(&x, x.delta, rows[i].delta);
		req.v[x.h100] = rows[i].req;
		r = iso_tenancy_admit(&x.t, iso_tenancy_find(&x.t, rows[i].who), &req, &err);
		if (!rows[i].refused && r != 0)
			fail_msg("row %zu: refused: %s", i, err.message);
		if (rows[i].refused) {
			if (r != -ENOSPC)
				fail_msg("row %zu: admitted, expected '%s'", i, rows[i].refused);
			assert_int_equal(err.code, ISO_E_NO_CAPACITY);
			if (!strstr(err.message, rows[i].refused))
				fail_msg("row %zu: '%s' lacks '%s'", i, err.message,
				         rows[i].refused);
			if (rows[i].field)
				assert_string_equal(err.field, rows[i].field);
		}
		iso_tenancy_free(&x.t);
	}
}

static void test_quota_nesting(void **state)
{
	struct tree x;
	struct iso_error err = {0};

	(void)state;
	tree_init(&x);
	/* acme's projects hold 32 of its 32; p1 cannot grow its guarantee */
	assert_int_equal(
	    iso_tenancy_set_quota(&x.t, x.p1, x.h100, (struct iso_quota){17, 0, 0}, &err), -EINVAL);
	assert_string_equal(err.field, "quota.p1.h100-80gb");
	assert_non_null(strstr(err.message, "add up to 33, more than its guaranteed 32"));
	/* acme cannot shrink below its projects' guarantees */
	assert_int_equal(
	    iso_tenancy_set_quota(&x.t, x.acme, x.h100, (struct iso_quota){31, 0, 0}, &err),
	    -EINVAL);
	assert_non_null(strstr(err.message, "less than its children's guarantees, 32"));
	assert_int_equal(
	    iso_tenancy_set_quota(&x.t, x.acme, x.h100, (struct iso_quota){-1, 0, 0}, &err),
	    -EINVAL);
	/* bad tree shapes */
	assert_true(iso_tenancy_add(&x.t, "px", ISO_ACCT_PROJECT, x.org1, 1, &err) < 0);
	assert_string_equal(err.field, "parent");
	assert_true(iso_tenancy_add(&x.t, "acme", ISO_ACCT_TENANT, x.org1, 1, &err) < 0);
	assert_int_equal(err.code, ISO_E_CONFLICT);
	assert_true(iso_tenancy_add(&x.t, "Bad Name", ISO_ACCT_TENANT, x.org1, 1, &err) < 0);
	assert_string_equal(err.field, "name");
	assert_true(iso_tenancy_add(&x.t, "zero", ISO_ACCT_TENANT, x.org1, 0, &err) < 0);
	assert_string_equal(err.field, "shares");
	/* charge and release go up the tree */
	use(&x, x.p1, 5);
	assert_int_equal(x.t.acct[x.acme].used.v[x.h100], 5);
	assert_int_equal(x.t.acct[x.org1].used.v[x.h100], 5);
	assert_int_equal(x.t.acct[0].used.v[x.h100], 5);
	use(&x, x.p1, 30);
	assert_true(iso_tenancy_borrowing(&x.t, x.acme));
	assert_false(iso_tenancy_borrowing(&x.t, x.beta));
	use(&x, x.p1, -35);
	assert_int_equal(x.t.acct[0].used.v[x.h100], 0);
	/* other kinds */
	{
		struct iso_resvec r = {0};
		/* org1 has no cpu guarantee: beta cannot have one either */
		assert_int_equal(iso_tenancy_set_quota(&x.t, x.beta, ISO_RES_CPUS,
		                                       (struct iso_quota){64, 0, 0}, &err),
		                 -EINVAL);
		assert_string_equal(err.field, "quota.beta.cpus");
		assert_int_equal(iso_tenancy_set_quota(&x.t, x.org1, ISO_RES_CPUS,
		                                       (struct iso_quota){128, 0, 0}, &err),
		                 0);
		assert_int_equal(iso_tenancy_set_quota(&x.t, x.beta, ISO_RES_CPUS,
		                                       (struct iso_quota){64, 0, 0}, &err),
		                 0);
		r.v[ISO_RES_CPUS] = 65;
		assert_int_equal(iso_tenancy_admit(&x.t, x.beta, &r, &err), -ENOSPC);
		assert_string_equal(err.field, "quota.beta.cpus");
		assert_non_null(strstr(err.message, "tenant beta: cpus: request 65 + in use 0 "
		                                    "exceeds guaranteed 64 + borrowing limit 0"));
		r.v[ISO_RES_CPUS] = 64;
		assert_int_equal(iso_tenancy_admit(&x.t, x.beta, &r, &err), 0);
		r.v[ISO_RES_CPUS] = -1;
		assert_int_equal(iso_tenancy_admit(&x.t, x.beta, &r, &err), -EINVAL);
	}
	iso_tenancy_free(&x.t);
}

/* ---- fair share ---- */

static void test_decay(void **state)
{
	struct iso_tenancy t;
	struct iso_error err = {0};
	const int64_t h = 1000;
	int a, k;

	(void)state;
	assert_int_equal(iso_tenancy_init(&t, h), 0);
	k = iso_tenancy_kind(&t, "a100-40gb", &err);
	a = iso_tenancy_add(&t, "org", ISO_ACCT_ORG, 0, 1, &err);
	{
		struct iso_resvec r = {0};
		r.v[k] = 1;
		iso_tenancy_charge(&t, a, &r);
		assert_int_equal(iso_fairshare_accrue(&t, h), 0);
		/* integral of 2^(-(h-s)/h) over [0, h] = h / ln 2 / 2 */
		assert_float_equal(t.acct[a].decayed[k], (double)h / M_LN2 / 2, 1e-6);
		iso_tenancy_release(&t, a, &r);
	}
	{
		double before = t.acct[a].decayed[k];
		/* in steps or at once: the same */
		assert_int_equal(iso_fairshare_accrue(&t, h + 300), 0);
		assert_int_equal(iso_fairshare_accrue(&t, 2 * h), 0);
		assert_float_equal(t.acct[a].decayed[k], before / 2, 1e-9);
	}
	assert_int_equal(iso_fairshare_accrue(&t, h), -EINVAL); /* time went back */
	iso_tenancy_free(&t);
}

static void test_dominant_weights(void **state)
{
	struct iso_tenancy t;
	struct iso_error err = {0};
	double u[ISO_RES_MAX] = {0};
	int h, t4;

	(void)state;
	assert_int_equal(iso_tenancy_init(&t, 1000), 0);
	h = iso_tenancy_kind(&t, "h100-80gb", &err);
	t4 = iso_tenancy_kind(&t, "t4", &err);
	assert_int_equal(iso_tenancy_kind(&t, "h100-80gb", &err), h);
	t.model_weight[h] = 4;
	t.model_weight[t4] = 1;
	t.capacity.v[h] = 70;
	t.capacity.v[t4] = 70;
	t.capacity.v[ISO_RES_CPUS] = 100;
	/* 10 H100 slices weigh 40 of the weighted 350 */
	u[h] = 10;
	assert_float_equal(iso_fairshare_dominant(&t, u), 40.0 / 350, 1e-12);
	u[h] = 0;
	u[t4] = 10;
	assert_float_equal(iso_fairshare_dominant(&t, u), 10.0 / 350, 1e-12);
	/* cpus dominate when they are the larger share */
	u[ISO_RES_CPUS] = 50;
	assert_float_equal(iso_fairshare_dominant(&t, u), 0.5, 1e-12);
	iso_tenancy_free(&t);
}

/* A random tree with random decayed usage. */
static void random_tree(struct iso_tenancy *t, uint64_t *rng, int *leaves, int *n_leaves)
{
	struct iso_error err = {0};
	int k;
	char name[32];

	assert_int_equal(iso_tenancy_init(t, 1000), 0);
	k = iso_tenancy_kind(t, "h100-80gb", &err);
	t->capacity.v[k] = 1000;
	t->capacity.v[ISO_RES_CPUS] = 1000;
	*n_leaves = 0;
	for (int o = 0, no = 2 + rng_int(rng, 3); o < no; o++) {
		int org;
		snprintf(name, sizeof(name), "org%d", o);
		org = iso_tenancy_add(t, name, ISO_ACCT_ORG, 0, 1 + rng_int(rng, 4), &err);
		for (int n = 0, nt = 1 + rng_int(rng, 3); n < nt; n++) {
			int ten;
			snprintf(name, sizeof(name), "t%d-%d", o, n);
			ten = iso_tenancy_add(t, name, ISO_ACCT_TENANT, org, 1 + rng_int(rng, 4),
			                      &err);
			for (int p = 0, np = rng_int(rng, 3); p <= np; p++) {
				int pr;
				struct iso_resvec r = {0};
				snprintf(name, sizeof(name), "p%d-%d-%d", o, n, p);
				pr = iso_tenancy_add(t, name, ISO_ACCT_PROJECT, ten,
				                     1 + rng_int(rng, 4), &err);
				assert_true(pr > 0);
				leaves[(*n_leaves)++] = pr;
				r.v[k] = rng_int(rng, 4) ? rng_int(rng, 100) : 0;
				r.v[ISO_RES_CPUS] = rng_int(rng, 100);
				iso_fairshare_add(t, pr, &r, 1000.0);
			}
		}
	}
}

static bool is_ancestor(const struct iso_tenancy *t, int anc, int x)
{
	for (; x >= 0; x = t->acct[x].parent)
		if (x == anc)
			return true;
	return false;
}

static void test_fair_tree_guarantee(void **state)
{
	uint64_t rng = 0x9e3779b97f4a7c15ULL;

	(void)state;
	for (int round = 0; round < 50; round++) {
		struct iso_tenancy t;
		int leaves[64], n_leaves, rank[128];
		double lf[128];

		random_tree(&t, &rng, leaves, &n_leaves);
		assert_int_equal(iso_fairshare_rank(&t, rank, lf), 0);
		/* Every pair of siblings: the one with the higher level fair
		 * share (under its share: LF > 1, over it: LF < 1) ranks above,
		 * and so does everything under it, at every level. */
		for (int a = 1; a < t.n_accounts; a++)
			for (int b = 1; b < t.n_accounts; b++) {
				if (a == b || t.acct[a].parent != t.acct[b].parent ||
				    !(lf[a] > lf[b]))
					continue;
				assert_true(rank[a] < rank[b]);
				for (int i = 0; i < n_leaves; i++)
					for (int j = 0; j < n_leaves; j++)
						if (is_ancestor(&t, a, leaves[i]) &&
						    is_ancestor(&t, b, leaves[j]))
							assert_true(rank[leaves[i]] <
							            rank[leaves[j]]);
			}
		/* LF is S/U: check one sibling group by hand */
		{
			int p = t.acct[leaves[0]].parent;
			double ssum = 0, usum = 0;
			for (int c = t.acct[p].first_child; c >= 0; c = t.acct[c].next_sibling) {
				ssum += t.acct[c].shares;
				usum += iso_fairshare_dominant(&t, t.acct[c].decayed);
			}
			for (int c = t.acct[p].first_child; c >= 0; c = t.acct[c].next_sibling) {
				double u = iso_fairshare_dominant(&t, t.acct[c].decayed) / usum;
				if (u > 0)
					assert_float_equal(lf[c], t.acct[c].shares / ssum / u,
					                   1e-9);
				else
					assert_true(isinf(lf[c]));
			}
		}
		iso_tenancy_free(&t);
	}
}

static void make_pending(const struct iso_tenancy *t, const int *leaves, int n_leaves,
                         uint64_t *rng, struct iso_pending *items, int n)
{
	(void)t;
	for (int i = 0; i < n; i++) {
		memset(&items[i], 0, sizeof(items[i]));
		snprintf(items[i].id, sizeof(items[i].id), "a-%04d", i);
		items[i].acct = leaves[rng_int(rng, n_leaves)];
		items[i].priority = rng_int(rng, 3);
		items[i].submit_ms = rng_int(rng, 5);
	}
}

static void test_order_determinism(void **state)
{
	uint64_t rng = 42;

	(void)state;
	for (int round = 0; round < 20; round++) {
		struct iso_tenancy t1, t2;
		int leaves[64], n_leaves, rank[128];
		uint64_t r1 = rng, r2 = rng;
		struct iso_pending items[40], shuffled[40];
		struct iso_queue_entry o1[40], o2[40];
		struct iso_error err = {0};

		/* The same history built twice gives the same order ... */
		random_tree(&t1, &r1, leaves, &n_leaves);
		random_tree(&t2, &r2, leaves, &n_leaves);
		make_pending(&t1, leaves, n_leaves, &r1, items, 40);
		rng = r1;
		assert_int_equal(iso_fairshare_order(&t1, items, 40, o1, &err), 0);
		/* ... whatever order the items arrive in. */
		memcpy(shuffled, items, sizeof(items));
		for (int i = 39; i > 0; i--) {
			int j = rng_int(&rng, i + 1);
			struct iso_pending tmp = shuffled[i];
			shuffled[i] = shuffled[j];
			shuffled[j] = tmp;
		}
		assert_int_equal(iso_fairshare_order(&t2, shuffled, 40, o2, &err), 0);
		assert_int_equal(iso_fairshare_rank(&t1, rank, NULL), 0);
		for (int p = 0; p < 40; p++) {
			const struct iso_pending *a = &items[o1[p].item];
			assert_string_equal(a->id, shuffled[o2[p].item].id);
			assert_int_equal(o1[p].position, p + 1);
			assert_string_equal(o1[p].reason, o2[p].reason);
			if (p > 0) { /* rank, then priority, then submit time */
				const struct iso_pending *b = &items[o1[p - 1].item];
				assert_true(rank[b->acct] < rank[a->acct] ||
				            (rank[b->acct] == rank[a->acct] &&
				             (b->priority > a->priority ||
				              (b->priority == a->priority &&
				               b->submit_ms <= a->submit_ms))));
			}
		}
		iso_tenancy_free(&t1);
		iso_tenancy_free(&t2);
	}
}

static void test_queue_visibility(void **state)
{
	struct tree x;
	struct iso_pending items[3] = {0};
	struct iso_queue_entry o[3];
	struct iso_error err = {0};
	struct iso_resvec r = {0};
	char buf[512];
	int pos_beta = -1;

	(void)state;
	tree_init(&x);
	x.t.capacity.v[x.h100] = 100;
	r.v[x.h100] = 10;
	iso_fairshare_add(&x.t, x.beta, &r, 1000); /* beta has used, acme not */
	snprintf(items[0].id, sizeof(items[0].id), "a-beta");
	items[0].acct = x.beta;
	snprintf(items[1].id, sizeof(items[1].id), "a-acme");
	items[1].acct = x.p1;
	snprintf(items[2].id, sizeof(items[2].id), "a-gamma");
	items[2].acct = x.gamma;
	assert_int_equal(iso_fairshare_order(&x.t, items, 3, o, &err), 0);
	/* org2 and acme have no usage: they rank first; beta waits */
	assert_string_equal(items[o[2].item].id, "a-beta");
	for (int p = 0; p < 3; p++)
		if (o[p].item == 0)
			pos_beta = p;
	assert_int_equal(
	    iso_fairshare_explain(&x.t, items, o, 3, pos_beta, x.beta, buf, sizeof(buf), &err), 0);
	assert_non_null(strstr(buf, "position 3 of 3"));
	assert_non_null(strstr(buf, "tenant beta"));
	/* never another tenant's name */
	assert_null(strstr(buf, "acme"));
	assert_null(strstr(buf, "gamma"));
	/* another tenant cannot see it; its organisation can */
	assert_int_equal(
	    iso_fairshare_explain(&x.t, items, o, 3, pos_beta, x.acme, buf, sizeof(buf), &err),
	    -ENOENT);
	assert_int_equal(err.code, ISO_E_NOT_FOUND);
	assert_int_equal(
	    iso_fairshare_explain(&x.t, items, o, 3, pos_beta, x.org1, buf, sizeof(buf), &err), 0);
	items[1].acct = 999;
	assert_int_equal(iso_fairshare_order(&x.t, items, 3, o, &err), -EINVAL);
	assert_string_equal(err.field, "pending[1].acct");
	iso_tenancy_free(&x.t);
}

/* ---- backfill ---- */

/* Earliest start of `req` for `dur` given spans, by brute force over
 * integer times (small horizons only). */
struct bspan {
	int64_t s, e, v;
};

static int64_t earliest(const struct bspan *sp, int n, int64_t cap, int64_t now, int64_t req,
                        int64_t dur, int64_t horizon)
{
	for (int64_t t = now; t < horizon; t++) {
		bool ok = true;
		for (int64_t u = t; u < t + dur && ok; u++) {
			int64_t used = 0;
			for (int i = 0; i < n; i++)
				if (sp[i].s <= u && u < sp[i].e)
					used += sp[i].v;
			ok = used + req <= cap;
		}
		if (ok)
			return t;
	}
	return -1;
}

static void test_backfill_basic(void **state)
{
	struct iso_resvec cap = {0};
	struct iso_running run[1] = {0};
	struct iso_pending items[3] = {0};
	struct iso_queue_entry order[3];
	bool start[3];
	int64_t head;
	struct iso_error err = {0};

	(void)state;
	cap.v[ISO_RES_FIRST_MODEL] = 10;
	run[0].use.v[ISO_RES_FIRST_MODEL] = 6;
	run[0].end_ms = 100;
	items[0].req.v[ISO_RES_FIRST_MODEL] = 8; /* blocked until 100 */
	items[0].duration_ms = 50;
	items[1].req.v[ISO_RES_FIRST_MODEL] = 4; /* ends at 80: before the head */
	items[1].duration_ms = 80;
	items[2].req.v[ISO_RES_FIRST_MODEL] = 3; /* would overlap the head's reservation */
	items[2].duration_ms = 200;
	for (int i = 0; i < 3; i++)
		order[i] = (struct iso_queue_entry){.item = i, .position = i + 1};
	assert_int_equal(iso_backfill_plan(&cap, run, 1, items, order, 3, 0, start, &head, &err),
	                 0);
	assert_false(start[0]);
	assert_true(start[1]);
	assert_false(start[2]);
	assert_int_equal(head, 100);
	/* without an estimate a small item never backfills past a reservation */
	items[1].duration_ms = 0;
	assert_int_equal(iso_backfill_plan(&cap, run, 1, items, order, 3, 0, start, &head, &err),
	                 0);
	assert_false(start[1]);
	/* an item that can never fit does not hold up the queue */
	items[0].req.v[ISO_RES_FIRST_MODEL] = 11;
	items[1].duration_ms = 80;
	assert_int_equal(iso_backfill_plan(&cap, run, 1, items, order, 3, 0, start, &head, &err),
	                 0);
	assert_false(start[0]);
	assert_true(start[1]);
	order[0].item = 7;
	assert_int_equal(iso_backfill_plan(&cap, run, 1, items, order, 3, 0, start, &head, &err),
	                 -EINVAL);
}

static void test_backfill_never_delays_head(void **state)
{
	uint64_t rng = 7;

	(void)state;
	for (int round = 0; round < 300; round++) {
		struct iso_resvec cap = {0};
		struct iso_running run[4] = {0};
		struct iso_pending items[6] = {0};
		struct iso_queue_entry order[6];
		struct bspan sp[16];
		bool start[6];
		int64_t head_t, c = 8 + rng_int(&rng, 8);
		int n_run = rng_int(&rng, 5), n = 1 + rng_int(&rng, 6), ns = 0, head = -1;
		struct iso_error err = {0};

		cap.v[ISO_RES_FIRST_MODEL] = c;
		for (int i = 0; i < n_run; i++) {
			run[i].use.v[ISO_RES_FIRST_MODEL] = 1 + rng_int(&rng, (int)c / 2);
			run[i].end_ms = 1 + rng_int(&rng, 30);
		}
		for (int i = 0; i < n; i++) {
			items[i].req.v[ISO_RES_FIRST_MODEL] = 1 + rng_int(&rng, (int)c);
			items[i].duration_ms = 1 + rng_int(&rng, 30);
			order[i] = (struct iso_queue_entry){.item = i, .position = i + 1};
		}
		assert_int_equal(
		    iso_backfill_plan(&cap, run, n_run, items, order, n, 0, start, &head_t, &err),
		    0);
		for (int i = 0; i < n_run; i++)
			sp[ns++] =
			    (struct bspan){0, run[i].end_ms, run[i].use.v[ISO_RES_FIRST_MODEL]};
		/* Items before the head that started, in order, must fit; the
		 * head's reservation is its earliest start with only those. */
		for (int i = 0; i < n; i++) {
			int64_t v = items[i].req.v[ISO_RES_FIRST_MODEL], d = items[i].duration_ms;
			if (head < 0 && start[i]) {
				assert_int_equal(earliest(sp, ns, c, 0, v, d, 200), 0);
				sp[ns++] = (struct bspan){0, d, v};
			} else if (head < 0) {
				head = i;
				assert_int_equal(head_t, earliest(sp, ns, c, 0, v, d, 200));
			}
		}
		if (head < 0)
			continue;
		{
			/* With every backfilled item running too, the head can still
			 * start at its reservation. */
			int64_t v = items[head].req.v[ISO_RES_FIRST_MODEL],
			        d = items[head].duration_ms;
			for (int i = head + 1; i < n; i++)
				if (start[i])
					sp[ns++] =
					    (struct bspan){0, items[i].duration_ms,
					                   items[i].req.v[ISO_RES_FIRST_MODEL]};
			assert_int_equal(earliest(sp, ns, c, head_t, v, d, 200), head_t);
		}
	}
}

/* ---- preemption ---- */

struct pcase {
	struct tree x;
	struct iso_running run[12];
	int n_run;
};

static void pcase_random(struct pcase *c, uint64_t *rng)
{
	const int owners[4] = {c->x.p1, c->x.beta, c->x.gamma, c->x.delta};

	c->n_run = 4 + rng_int(rng, 9);
	for (int i = 0; i < c->n_run; i++) {
		struct iso_running *r = &c->run[i];
		memset(r, 0, sizeof(*r));
		snprintf(r->id, sizeof(r->id), "r-%02d", rng_int(rng, 90)); /* ids may tie */
		snprintf(r->id + strlen(r->id), sizeof(r->id) - strlen(r->id), "-%d", i);
		r->acct = owners[rng_int(rng, 4)];
		r->priority = rng_int(rng, 3);
		r->start_ms = rng_int(rng, 1000);
		r->use.v[c->x.h100] = 1 + rng_int(rng, 12);
		r->use.v[ISO_RES_CPUS] = rng_int(rng, 3) ? rng_int(rng, 16) : 0;
		r->fail_on_preempt = rng_int(rng, 2);
		iso_tenancy_charge(&c->x.t, r->acct, &r->use);
	}
}

/* The reference: every subset, by (size, lost run time, sorted ids). */
static int brute(const struct pcase *c, const bool *elig, const int64_t *need, int64_t now,
                 int *best, int64_t *best_lost)
{
	int best_n = -1;

	for (uint32_t m = 0; m < (1u << c->n_run); m++) {
		int64_t got[ISO_RES_MAX] = {0}, lost = 0;
		int ids[12], n = 0;
		bool ok = true;

		for (int i = 0; i < c->n_run && ok; i++)
			if (m & (1u << i)) {
				ok = elig[i];
				ids[n++] = i;
				lost += now - c->run[i].start_ms;
				for (int k = 0; k < ISO_RES_MAX; k++)
					got[k] += c->run[i].use.v[k];
			}
		for (int k = 0; k < ISO_RES_MAX && ok; k++)
			ok = got[k] >= need[k];
		if (!ok)
			continue;
		/* sort ids by name */
		for (int i = 1; i < n; i++)
			for (int j = i;
			     j > 0 && strcmp(c->run[ids[j - 1]].id, c->run[ids[j]].id) > 0; j--) {
				int tmp = ids[j];
				ids[j] = ids[j - 1];
				ids[j - 1] = tmp;
			}
		if (best_n >= 0) {
			int cmp = n != best_n          ? n - best_n
			          : lost != *best_lost ? (lost < *best_lost ? -1 : 1)
			                               : 0;
			for (int i = 0; cmp == 0 && i < n; i++)
				cmp = strcmp(c->run[ids[i]].id, c->run[best[i]].id);
			if (cmp >= 0)
				continue;
		}
		best_n = n;
		*best_lost = lost;
		memcpy(best, ids, sizeof(int) * (size_t)n);
	}
	return best_n;
}

static void test_preempt_vs_brute_force(void **state)
{
	uint64_t rng = 1234;
	int solved = 0, refused = 0;

	(void)state;
	for (int round = 0; round < 400; round++) {
		struct pcase c;
		struct iso_preempt_params p = {
		    .now_ms = 1000, .min_run_ms = rng_int(&rng, 300), .grace_ms = 30000};
		enum iso_preempt_mode mode =
		    rng_int(&rng, 2) ? ISO_PREEMPT_RECLAIM : ISO_PREEMPT_PRIORITY;
		int acct, prio = rng_int(&rng, 4);
		struct iso_resvec req = {0}, need = {0};
		struct iso_preempt_plan plan;
		struct iso_error err = {0};
		bool elig[12];
		int best[12], bn, r;
		int64_t best_lost = 0;

		tree_init(&c.x);
		pcase_random(&c, &rng);
		acct = mode == ISO_PREEMPT_RECLAIM ? c.x.gamma : c.run[0].acct;
		if (mode == ISO_PREEMPT_RECLAIM) { /* gamma takes back what it lent */
			struct iso_resvec back = {0};
			back.v[c.x.h100] = c.x.t.acct[c.x.gamma].used.v[c.x.h100];
			iso_tenancy_release(&c.x.t, c.x.gamma, &back);
			for (int i = 0; i < c.n_run; i++)
				if (c.run[i].acct == c.x.gamma)
					c.run[i].acct = c.x.delta;
			iso_tenancy_charge(&c.x.t, c.x.delta, &back);
		}
		req.v[c.x.h100] = 1 + rng_int(&rng, 18);
		need.v[c.x.h100] = 1 + rng_int(&rng, 20);
		need.v[ISO_RES_CPUS] = rng_int(&rng, 2) ? rng_int(&rng, 20) : 0;
		for (int i = 0; i < c.n_run; i++)
			elig[i] =
			    iso_preempt_eligible(&c.x.t, mode, acct, prio, c.run, c.n_run, i, &p);
		bn = brute(&c, elig, need.v, p.now_ms, best, &best_lost);
		r = iso_preempt_choose(&c.x.t, mode, acct, prio, &req, &need, c.run, c.n_run, &p,
		                       &plan, &err);
		if (bn < 0) {
			assert_int_equal(r, -ENOSPC);
			refused++;
		} else {
			if (r != 0)
				fail_msg("round %d: refused: %s", round, err.message);
			assert_true(plan.exact);
			assert_int_equal(plan.n, bn);
			assert_int_equal(plan.lost_ms, best_lost);
			for (int i = 0; i < bn; i++) {
				assert_int_equal(plan.v[i].run, best[i]);
				assert_int_equal(plan.v[i].signal_at_ms, 1000);
				assert_int_equal(plan.v[i].kill_at_ms, 31000);
				assert_int_equal(plan.v[i].requeue,
				                 !c.run[best[i]].fail_on_preempt);
			}
			solved++;
		}
		iso_tenancy_free(&c.x.t);
	}
	/* both outcomes were exercised */
	assert_true(solved > 50);
	assert_true(refused > 20);
}

static void test_preempt_rules(void **state)
{
	struct tree x;
	struct iso_running run[4] = {0};
	struct iso_preempt_params p = {.now_ms = 10000, .min_run_ms = 1000, .grace_ms = 500};
	struct iso_resvec req = {0}, need = {0};
	struct iso_preempt_plan plan;
	struct iso_error err = {0};

	(void)state;
	tree_init(&x);
	/* delta (guarantee 18) runs 16 + 8 + 4: the oldest 16 is inside its
	 * guarantee, the 8 and 4 started while it borrowed. */
	const int64_t sizes[4] = {16, 8, 4, 2};
	const int64_t starts[4] = {0, 100, 200, 9500};
	for (int i = 0; i < 4; i++) {
		snprintf(run[i].id, sizeof(run[i].id), "d-%d", i);
		run[i].acct = x.delta;
		run[i].start_ms = starts[i];
		run[i].use.v[x.h100] = sizes[i];
		iso_tenancy_charge(&x.t, x.delta, &run[i].use);
	}
	run[2].fail_on_preempt = true;
	assert_false(iso_preempt_eligible(&x.t, ISO_PREEMPT_RECLAIM, x.gamma, 0, run, 4, 0, &p));
	assert_true(iso_preempt_eligible(&x.t, ISO_PREEMPT_RECLAIM, x.gamma, 0, run, 4, 1, &p));
	assert_false(iso_preempt_eligible(&x.t, ISO_PREEMPT_RECLAIM, x.gamma, 0, run, 4, 3,
	                                  &p)); /* too young */
	assert_false(
	    iso_preempt_eligible(&x.t, ISO_PREEMPT_RECLAIM, x.delta, 0, run, 4, 1, &p)); /* own */
	req.v[x.h100] = 10;
	need.v[x.h100] = 10;
	assert_int_equal(iso_preempt_choose(&x.t, ISO_PREEMPT_RECLAIM, x.gamma, 0, &req, &need, run,
	                                    4, &p, &plan, &err),
	                 0);
	assert_int_equal(plan.n, 2); /* 8 + 4, never the guaranteed 16 */
	assert_int_equal(plan.v[0].run, 1);
	assert_int_equal(plan.v[1].run, 2);
	assert_true(plan.v[0].requeue);
	assert_false(plan.v[1].requeue);
	assert_int_equal(plan.v[1].kill_at_ms, 10500);
	need.v[x.h100] = 13;
	assert_int_equal(iso_preempt_choose(&x.t, ISO_PREEMPT_RECLAIM, x.gamma, 0, &req, &need, run,
	                                    4, &p, &plan, &err),
	                 -ENOSPC);
	assert_non_null(strstr(err.message, "need 13, eligible work holds 12"));
	/* reclaim needs the reclaimer to stay within its guarantee */
	req.v[x.h100] = 19;
	need.v[x.h100] = 4;
	assert_int_equal(iso_preempt_choose(&x.t, ISO_PREEMPT_RECLAIM, x.gamma, 0, &req, &need, run,
	                                    4, &p, &plan, &err),
	                 -ENOSPC);
	assert_non_null(strstr(err.message, "reclaim only takes back lent capacity"));
	/* priority: only lower-priority work of the same tenant */
	run[0].priority = 1;
	assert_true(iso_preempt_eligible(&x.t, ISO_PREEMPT_PRIORITY, x.delta, 2, run, 4, 0, &p));
	assert_false(iso_preempt_eligible(&x.t, ISO_PREEMPT_PRIORITY, x.delta, 1, run, 4, 0, &p));
	assert_false(iso_preempt_eligible(&x.t, ISO_PREEMPT_PRIORITY, x.gamma, 5, run, 4, 0, &p));
	/* nothing needed: no victims */
	memset(&need, 0, sizeof(need));
	assert_int_equal(iso_preempt_choose(&x.t, ISO_PREEMPT_PRIORITY, x.delta, 2, &req, &need,
	                                    run, 4, &p, &plan, &err),
	                 0);
	assert_int_equal(plan.n, 0);
	iso_tenancy_free(&x.t);
}

/* ---- isolation classes and spreading inside the placement engine ---- */

#define SIM_NODES 12
#define SIM_GPUS  2

struct simc {
	struct iso_inventory inv;
	struct iso_node nodes[SIM_NODES];
	struct iso_gpu gpus[SIM_NODES][SIM_GPUS];
	struct iso_cluster_state cs;
};

/* 12 nodes of 2 MIG H100s in 3 racks, on Ethernet (no VF limit, so only
 * isolation keeps tenants apart). */
static struct simc *simc_new(void)
{
	struct simc *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->inv.fabric.type = ISO_FABRIC_ETHERNET;
	for (int i = 0; i < SIM_NODES; i++) {
		struct iso_node *n = &c->nodes[i];
		snprintf(n->name, sizeof(n->name), "n%02d", i);
		snprintf(n->rack, sizeof(n->rack), "rack-%c", 'a' + i / 4);
		iso_strlcpy(n->pool, "gpu", sizeof(n->pool));
		n->cpus = 64;
		n->memory_mib = 1 << 20;
		n->n_gpus = SIM_GPUS;
		n->gpus = c->gpus[i];
		for (int j = 0; j < SIM_GPUS; j++) {
			c->gpus[i][j].index = j;
			c->gpus[i][j].model = iso_gpu_model_find("h100-80gb");
			c->gpus[i][j].mig_enabled = true;
			assert_non_null(c->gpus[i][j].model);
		}
	}
	c->inv.n_nodes = SIM_NODES;
	c->inv.nodes = c->nodes;
	assert_int_equal(iso_cluster_state_init(&c->cs, &c->inv), 0);
	return c;
}

static void simc_free(struct simc *c)
{
	iso_cluster_state_free(&c->cs);
	free(c);
}

struct live {
	struct iso_allocation a;
	int excl, spread;
};

static const char *rack_of(const struct simc *c, const char *node)
{
	for (int i = 0; i < SIM_NODES; i++)
		if (strcmp(c->nodes[i].name, node) == 0)
			return c->nodes[i].rack;
	fail_msg("no node %s", node);
	return NULL;
}

/* No other tenant on an exclusive allocation's GPUs, nodes or racks, and
 * every spread allocation's members on distinct GPUs, nodes or racks. */
static void check_isolation(const struct simc *c, const struct live *l, int n)
{
	for (int i = 0; i < n; i++) {
		const struct iso_allocation *a = &l[i].a;
		for (int m = 0; m < a->n_members; m++)
			for (int m2 = m + 1; m2 < a->n_members; m2++) {
				if (l[i].spread >= 2)
					assert_string_not_equal(a->placed[m].node,
					                        a->placed[m2].node);
				if (l[i].spread >= 3)
					assert_string_not_equal(rack_of(c, a->placed[m].node),
					                        rack_of(c, a->placed[m2].node));
			}
		if (l[i].spread == 1)
			for (int s = 0; s < a->n_slots; s++)
				for (int s2 = 0; s2 < a->n_slots; s2++)
					if (a->slots[s].member != a->slots[s2].member &&
					    strcmp(a->placed[a->slots[s].member].node,
					           a->placed[a->slots[s2].member].node) == 0)
						assert_int_not_equal(a->slots[s].gpu,
						                     a->slots[s2].gpu);
		if (l[i].excl == 0)
			continue;
		for (int j = 0; j < n; j++) {
			const struct iso_allocation *b = &l[j].a;
			if (b->tenant_id == a->tenant_id)
				continue;
			for (int m = 0; m < a->n_members; m++)
				for (int m2 = 0; m2 < b->n_members; m2++) {
					const char *na = a->placed[m].node,
					           *nb = b->placed[m2].node;
					if (l[i].excl >= 3)
						assert_string_not_equal(rack_of(c, na),
						                        rack_of(c, nb));
					if (l[i].excl >= 2)
						assert_string_not_equal(na, nb);
				}
			for (int s = 0; s < a->n_slots; s++)
				for (int s2 = 0; s2 < b->n_slots; s2++)
					if (strcmp(a->placed[a->slots[s].member].node,
					           b->placed[b->slots[s2].member].node) == 0)
						assert_int_not_equal(a->slots[s].gpu,
						                     b->slots[s2].gpu);
		}
	}
}

static void test_isolation_basic(void **state)
{
	struct simc *c = simc_new();
	const char *only[] = {"n00"};
	struct iso_place_constraints ex = {0}, sh = {.nodes = only, .n_nodes = 1};
	struct iso_allocation a = {.tenant_id = 1}, b = {.tenant_id = 2}, a2 = {.tenant_id = 1};
	struct iso_error err = {0};

	(void)state;
	iso_isolation_constraints(ISO_ISOLATION_SHARED, ISO_ISOLATION_EXCLUSIVE_NODE,
	                          ISO_SPREAD_NONE, &ex);
	assert_int_equal(ex.exclusive, 2);
	ex.nodes = only;
	ex.n_nodes = 1;
	a.shape = (struct iso_shape){.gpu_count = 1, .profile = "1g.10gb", .cpus = 1};
	b.shape = a.shape;
	a2.shape = a.shape;
	iso_strlcpy(a.id, "a", sizeof(a.id));
	iso_strlcpy(b.id, "b", sizeof(b.id));
	iso_strlcpy(a2.id, "a2", sizeof(a2.id));
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &a, 1, &ex, &err), 0);
	/* another tenant, shared, cannot join the exclusive node ... */
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &b, 1, &sh, &err),
	                 -ENOSPC);
	assert_int_equal(iso_placer_place_ex(&iso_placer_first_fit, &c->cs, &b, 1, &sh, &err),
	                 -ENOSPC);
	/* ... and a direct take is refused too */
	b.n_members = 1;
	b.placed = calloc(1, sizeof(*b.placed));
	b.slots = calloc(1, sizeof(*b.slots));
	iso_strlcpy(b.placed[0].node, "n00", sizeof(b.placed[0].node));
	b.n_slots = 1;
	b.slots[0] = (struct iso_slot){.gpu = 1, .start = 0, .width = 1};
	iso_strlcpy(b.slots[0].profile, "1g.10gb", sizeof(b.slots[0].profile));
	assert_int_equal(iso_cluster_state_take(&c->cs, &b, &err), -ENOSPC);
	assert_non_null(strstr(err.message, "held exclusively by another tenant"));
	iso_allocation_clear(&b);
	b.tenant_id = 2;
	b.shape = a.shape;
	/* the owner may add shared work there */
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &a2, 1, &sh, &err), 0);
	/* the mark goes when the owner's last member leaves */
	iso_cluster_state_give(&c->cs, &a);
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &b, 1, &sh, &err),
	                 -ENOSPC);
	iso_cluster_state_give(&c->cs, &a2);
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &b, 1, &sh, &err), 0);
	/* exclusive-node cannot go where another tenant is */
	iso_allocation_clear(&a);
	a.tenant_id = 1;
	a.shape = b.shape;
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &a, 1, &ex, &err),
	                 -ENOSPC);
	ex.exclusive = 7;
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &a, 1, &ex, &err),
	                 -EINVAL);
	iso_cluster_state_give(&c->cs, &b);
	iso_allocation_clear(&a);
	iso_allocation_clear(&a2);
	iso_allocation_clear(&b);
	simc_free(c);
}

static void test_isolation_random(void **state)
{
	static const char *const profiles[] = {"1g.10gb", "2g.20gb", "3g.40gb", "whole", NULL};
	struct simc *c = simc_new();
	struct live *l = calloc(64, sizeof(*l));
	int n = 0, placed[4] = {0}, refused = 0, spread_placed = 0;
	uint64_t rng = 99;

	(void)state;
	for (int step = 0; step < 1500; step++) {
		struct iso_error err = {0};

		if (n > 0 && (n == 64 || rng_int(&rng, 2) == 0)) {
			int i = rng_int(&rng, n);
			iso_cluster_state_give(&c->cs, &l[i].a);
			iso_allocation_clear(&l[i].a);
			l[i] = l[--n];
		} else {
			struct live *x = &l[n];
			struct iso_place_constraints pc = {0};
			const char *p = profiles[rng_int(&rng, 5)];
			int64_t tenant = 1 + rng_int(&rng, 4);
			const struct iso_placer *placer =
			    rng_int(&rng, 2) ? &iso_placer_isostack : &iso_placer_first_fit;
			/* tenant 4 is always exclusive-node; the rest mix classes */
			enum iso_isolation tc =
			    tenant == 4 ? ISO_ISOLATION_EXCLUSIVE_NODE : ISO_ISOLATION_SHARED;
			enum iso_isolation rc =
			    (enum iso_isolation)(rng_int(&rng, 3) ? 0 : rng_int(&rng, 4));
			int want = 1 + rng_int(&rng, 3);

			memset(x, 0, sizeof(*x));
			snprintf(x->a.id, sizeof(x->a.id), "a-%d", step);
			x->a.tenant_id = tenant;
			x->a.shape.cpus = 1 + rng_int(&rng, 8);
			x->a.shape.memory_mib = 1024;
			if (p && strcmp(p, "whole") == 0) {
				x->a.shape.whole = true;
				x->a.shape.gpu_count = 1;
			} else if (p) {
				iso_strlcpy(x->a.shape.profile, p, sizeof(x->a.shape.profile));
				x->a.shape.gpu_count = 1;
			}
			iso_isolation_constraints(tc, rc, (enum iso_spread)rng_int(&rng, 4), &pc);
			x->excl = pc.exclusive;
			x->spread = pc.spread;
			if (iso_placer_place_ex(placer, &c->cs, &x->a, want, &pc, &err) == 0) {
				placed[x->excl]++;
				spread_placed += x->spread > 0 && want > 1;
				n++;
			} else {
				assert_int_equal(err.code, ISO_E_NO_CAPACITY);
				iso_allocation_clear(&x->a);
				refused++;
			}
		}
		if (iso_cluster_state_check(&c->cs, &err) != 0)
			fail_msg("step %d: %s", step, err.message);
		check_isolation(c, l, n);
	}
	/* every class was exercised, and some requests had to wait */
	for (int k = 0; k < 4; k++)
		if (placed[k] <= 10)
			fail_msg("class %d placed %d times (%d %d %d %d, refused %d)", k, placed[k],
			         placed[0], placed[1], placed[2], placed[3], refused);
	assert_true(spread_placed > 10);
	assert_true(refused > 10);
	for (int i = 0; i < n; i++) {
		iso_cluster_state_give(&c->cs, &l[i].a);
		iso_allocation_clear(&l[i].a);
	}
	free(l);
	simc_free(c);
}

/* ---- admission policies in Lua ---- */

static char *slurp(const char *rel)
{
	const char *root = getenv("ISO_SOURCE_ROOT");
	char path[1024];
	FILE *f;
	char *buf = calloc(1, 65536);
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", root ? root : "../..", rel);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int eval(const char *name, const char *src, const struct iso_admission_request *req,
                struct iso_error *err)
{
	return iso_admission_lua_eval(name, src, strlen(src), req, NULL, err);
}

static void test_lua_examples(void **state)
{
	char *cap = slurp("examples/policies/cap_request_size.lua");
	char *hipaa = slurp("examples/policies/hipaa_exclusive_node.lua");
	const char *tags[] = {"eu", "hipaa"};
	struct iso_admission_request r = {.tenant = "acme",
	                                  .members = 2,
	                                  .gpus = {.profile = "3g.40gb", .count = 4},
	                                  .cpus = 16,
	                                  .memory_mib = 65536,
	                                  .isolation = ISO_ISOLATION_SHARED};
	struct iso_error err = {0};

	(void)state;
	assert_int_equal(eval("cap_request_size", cap, &r, &err), 0);
	r.members = 5; /* 20 GPUs */
	assert_int_equal(eval("cap_request_size", cap, &r, &err), -EPERM);
	assert_int_equal(err.code, ISO_E_FORBIDDEN);
	assert_string_equal(err.field, "policy.cap_request_size");
	assert_string_equal(err.message, "policy cap_request_size: at most 16 GPUs or MIG "
	                                 "instances per request, asked for 20");
	r.tags = (const char *const[]){"large-jobs"};
	r.n_tags = 1;
	assert_int_equal(eval("cap_request_size", cap, &r, &err), 0);
	r.members = 9;
	assert_int_equal(eval("cap_request_size", cap, &r, &err), -EPERM);
	assert_non_null(strstr(err.message, "at most 8 members per request, asked for 9"));

	r.members = 1;
	r.tags = tags;
	r.n_tags = 2;
	assert_int_equal(eval("hipaa_exclusive_node", hipaa, &r, &err), -EPERM);
	assert_string_equal(err.message,
	                    "policy hipaa_exclusive_node: tenant acme is tagged hipaa: requests "
	                    "need isolation exclusive-node or exclusive-rack, not shared");
	r.isolation = ISO_ISOLATION_EXCLUSIVE_GPU;
	assert_int_equal(eval("hipaa_exclusive_node", hipaa, &r, &err), -EPERM);
	r.isolation = ISO_ISOLATION_EXCLUSIVE_NODE;
	assert_int_equal(eval("hipaa_exclusive_node", hipaa, &r, &err), 0);
	r.isolation = ISO_ISOLATION_SHARED;
	r.n_tags = 1; /* only "eu" */
	assert_int_equal(eval("hipaa_exclusive_node", hipaa, &r, &err), 0);
	free(cap);
	free(hipaa);
}

static void test_lua_hostile(void **state)
{
	static const struct {
		const char *src, *msg;
	} rows[] = {
	    {"return true", NULL},
	    {"return request.gpus.count == 4 and #request.tags == 1 and request.tags[1] == 'x'",
	     NULL},
	    {"local n = 0 for k in pairs(request) do n = n + 1 end return n == 7", NULL},
	    {"return true,", "policy bad: error: bad:1: unexpected symbol near <eof>"},
	    {"local x = 1\nlocal y = nil\nreturn y.z",
	     "policy bad: error: bad:3: attempt to index a nil value (local 'y')"},
	    {"error('no way')", "policy bad: error: bad:1: no way"},
	    {"while true do end", "policy bad: exceeded its instruction budget (1000000)"},
	    {"while true do pcall(function() while true do end end) end",
	     "policy bad: exceeded its instruction budget"},
	    {"pcall(function() while true do end end) return true",
	     "policy bad: exceeded its instruction budget"},
	    {"local s = string.rep('x', 64 * 1024 * 1024) return true",
	     "policy bad: exceeded its memory limit (4194304 bytes)"},
	    {"local t = {} for i = 1, 1e7 do t[i] = {i} end return true", "policy bad: exceeded"},
	    {"local s = 'x' for i = 1, 40 do s = s .. s end return true",
	     "policy bad: exceeded its memory limit"},
	    {"io.open('/etc/passwd')", "bad:1: attempt to index a nil value (global 'io')"},
	    {"os.exit(1)", "bad:1: attempt to index a nil value (global 'os')"},
	    {"return require('io')", "attempt to call a nil value (global 'require')"},
	    {"dofile('/etc/passwd')", "attempt to call a nil value (global 'dofile')"},
	    {"loadfile('/etc/passwd')", "attempt to call a nil value (global 'loadfile')"},
	    {"return debug.getinfo(1)", "attempt to index a nil value (global 'debug')"},
	    {"return package.loaded", "attempt to index a nil value (global 'package')"},
	    {"local f, e = load('\\27Lua') return false, e", "attempt to load a binary chunk"},
	    {"return load('return 1 + 1')() == 2", NULL},
	    {"return string.dump(function() end)", "attempt to call a nil value (field 'dump')"},
	    {"request.cpus = 0 return true", "bad:1: request is read-only"},
	    {"request.gpus.count = 0 return true", "request is read-only"},
	    {"rawset(request, 'cpus', 0) return true",
	     "attempt to call a nil value (global 'rawset')"},
	    {"return getmetatable(request)", "policy bad: denied (no reason given)"},
	    {"return 1", "policy bad: must return true, or false and a reason"},
	    {"return false", "policy bad: denied (no reason given)"},
	    {"return false, 'too big'", "policy bad: too big"},
	    {"print('x') return true", "attempt to call a nil value (global 'print')"},
	};
	const char *tags[] = {"x"};
	struct iso_admission_request r = {.tenant = "acme",
	                                  .tags = tags,
	                                  .n_tags = 1,
	                                  .members = 2,
	                                  .gpus = {.profile = "3g.40gb", .count = 4},
	                                  .cpus = 16,
	                                  .memory_mib = 65536};

	(void)state;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(rows); i++) {
		struct iso_error err = {0};
		int rc = eval("bad", rows[i].src, &r, &err);

		if (!rows[i].msg) {
			if (rc != 0)
				fail_msg("row %zu: denied: %s", i, err.message);
			continue;
		}
		if (rc != -EPERM)
			fail_msg("row %zu: allowed, expected '%s'", i, rows[i].msg);
		assert_int_equal(err.code, ISO_E_FORBIDDEN);
		assert_string_equal(err.field, "policy.bad");
		if (!strstr(err.message, rows[i].msg))
			fail_msg("row %zu: '%s' lacks '%s'", i, err.message, rows[i].msg);
	}
	{
		struct iso_error err = {0};
		struct iso_admission_limits lim = {.instructions = 5000};
		const char *loop = "for i = 1, 100000 do end return true";
		assert_int_equal(
		    iso_admission_lua_eval("small", loop, strlen(loop), &r, &lim, &err), -EPERM);
		assert_non_null(strstr(err.message, "instruction budget (5000)"));
		assert_int_equal(iso_admission_lua_eval("", loop, strlen(loop), &r, NULL, &err),
		                 -EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quota_table),
	    cmocka_unit_test(test_quota_nesting),
	    cmocka_unit_test(test_decay),
	    cmocka_unit_test(test_dominant_weights),
	    cmocka_unit_test(test_fair_tree_guarantee),
	    cmocka_unit_test(test_order_determinism),
	    cmocka_unit_test(test_queue_visibility),
	    cmocka_unit_test(test_backfill_basic),
	    cmocka_unit_test(test_backfill_never_delays_head),
	    cmocka_unit_test(test_preempt_vs_brute_force),
	    cmocka_unit_test(test_preempt_rules),
	    cmocka_unit_test(test_isolation_basic),
	    cmocka_unit_test(test_isolation_random),
	    cmocka_unit_test(test_lua_examples),
	    cmocka_unit_test(test_lua_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

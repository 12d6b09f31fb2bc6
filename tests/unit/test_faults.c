/* test_faults.c: a GPU taken out of service by a fault (quarantine) must be
 * refused by every placement policy and by take, keep the index consistent,
 * survive a stray give, and be used again after restore. A small inventory
 * built in code, so the test does not depend on the YAML loader. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "isostack/sched.h"

/* fa-n01: GPUs 0,1 h100-80gb MIG on; fa-n02: GPUs 0,1 h100-80gb MIG off. */
enum { N01, N02, N_NODES };

struct fixture {
	struct iso_inventory inv;
	struct iso_pool pool;
	struct iso_node nodes[N_NODES];
	struct iso_gpu gpus[N_NODES][2];
	struct iso_cluster_state cs;
};

static void add_node(struct fixture *f, int i, const char *name, bool mig)
{
	struct iso_node *n = &f->nodes[i];

	iso_strlcpy(n->name, name, sizeof(n->name));
	iso_strlcpy(n->pool, "gpu", sizeof(n->pool));
	n->cpus = 64;
	n->memory_mib = 524288;
	n->n_gpus = 2;
	n->gpus = f->gpus[i];
	n->sched = ISO_NODE_SCHEDULABLE;
	for (int j = 0; j < 2; j++) {
		f->gpus[i][j].index = j;
		f->gpus[i][j].model = iso_gpu_model_find("h100-80gb");
		f->gpus[i][j].mig_enabled = mig;
		assert_non_null(f->gpus[i][j].model);
	}
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	iso_strlcpy(f->pool.name, "gpu", sizeof(f->pool.name));
	f->inv.n_pools = 1;
	f->inv.pools = &f->pool;
	add_node(f, N01, "fa-n01", true);
	add_node(f, N02, "fa-n02", false);
	f->inv.n_nodes = N_NODES;
	f->inv.nodes = f->nodes;
	assert_int_equal(iso_cluster_state_init(&f->cs, &f->inv), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	iso_cluster_state_free(&f->cs);
	free(f);
	return 0;
}

static void check_state(const struct fixture *f)
{
	struct iso_error err = {0};

	if (iso_cluster_state_check(&f->cs, &err) < 0)
		fail_msg("cluster state check: %s", err.message);
}

static struct iso_allocation mig_alloc(const char *id, const char *profile)
{
	struct iso_allocation a = {.shape = {.gpu_count = 1, .cpus = 1}};

	iso_strlcpy(a.id, id, sizeof(a.id));
	iso_strlcpy(a.shape.profile, profile, sizeof(a.shape.profile));
	return a;
}

static struct iso_allocation whole_alloc(const char *id)
{
	struct iso_allocation a = {.shape = {.whole = true, .gpu_count = 1, .cpus = 1}};

	iso_strlcpy(a.id, id, sizeof(a.id));
	return a;
}

/* Does any slot of `a` sit on GPU `gpu` of node `node`? */
static bool uses(const struct iso_allocation *a, const char *node, int gpu)
{
	for (int s = 0; s < a->n_slots; s++)
		if (a->slots[s].gpu == gpu && strcmp(a->placed[a->slots[s].member].node, node) == 0)
			return true;
	return false;
}

#define MAX_PLACED 32

/* Places single-member allocations made by `make` until the policy refuses;
 * returns how many it placed, all kept in out[] (taken in cs). */
static int fill(struct fixture *f, const struct iso_placer *p,
                struct iso_allocation (*make)(const char *id, const char *profile),
                const char *profile, struct iso_allocation *out)
{
	int n = 0;

	for (; n < MAX_PLACED; n++) {
		struct iso_error err = {0};
		char id[32];

		snprintf(id, sizeof(id), "a-%d", n);
		out[n] = make(id, profile);
		if (iso_placer_place(p, &f->cs, &out[n], 1, &err) < 0) {
			assert_int_equal(err.code, ISO_E_NO_CAPACITY);
			iso_allocation_clear(&out[n]);
			break;
		}
		check_state(f);
	}
	return n;
}

static void give_all(struct fixture *f, struct iso_allocation *a, int n)
{
	for (int i = 0; i < n; i++) {
		iso_cluster_state_give(&f->cs, &a[i]);
		iso_allocation_clear(&a[i]);
	}
	check_state(f);
}

static struct iso_allocation make_whole(const char *id, const char *profile)
{
	(void)profile;
	return whole_alloc(id);
}

static const struct iso_placer *const policies[] = {
    &iso_placer_first_fit,
    &iso_placer_best_fit,
    &iso_placer_fgd,
    &iso_placer_isostack,
};

/* Every policy: with MIG GPU fa-n01/0 quarantined, 1g.10gb instances go
 * only to fa-n01/1 (seven of them) and whole GPUs only to the other three;
 * after restore both MIG GPUs fill up again (fourteen). */
static void test_every_policy_refuses_quarantined(void **state)
{
	struct fixture *f = *state;

	for (size_t pi = 0; pi < ISO_ARRAY_SIZE(policies); pi++) {
		const struct iso_placer *p = policies[pi];
		struct iso_allocation placed[MAX_PLACED];
		int n;

		assert_int_equal(iso_cluster_state_gpu_quarantine(&f->cs, N01, 0), 0);
		assert_true(iso_cluster_state_gpu_quarantined(&f->cs, N01, 0));
		assert_false(iso_cluster_state_gpu_quarantined(&f->cs, N01, 1));
		check_state(f);

		n = fill(f, p, mig_alloc, "1g.10gb", placed);
		if (n != 7)
			fail_msg("%s placed %d 1g.10gb beside a quarantined GPU, want 7", p->name,
			         n);
		for (int i = 0; i < n; i++)
			if (uses(&placed[i], "fa-n01", 0))
				fail_msg("%s placed %s on the quarantined GPU", p->name,
				         placed[i].id);
		give_all(f, placed, n);

		n = fill(f, p, make_whole, NULL, placed);
		if (n != 3)
			fail_msg("%s placed %d whole GPUs beside a quarantined one, want 3",
			         p->name, n);
		for (int i = 0; i < n; i++)
			assert_false(uses(&placed[i], "fa-n01", 0));
		give_all(f, placed, n);

		/* Quarantine outlives the work that came and went around it. */
		assert_true(iso_cluster_state_gpu_quarantined(&f->cs, N01, 0));
		iso_cluster_state_gpu_restore(&f->cs, N01, 0);
		assert_false(iso_cluster_state_gpu_quarantined(&f->cs, N01, 0));
		check_state(f);

		n = fill(f, p, mig_alloc, "1g.10gb", placed);
		if (n != 14)
			fail_msg("%s placed %d 1g.10gb after restore, want 14", p->name, n);
		bool back = false;
		for (int i = 0; i < n; i++)
			back = back || uses(&placed[i], "fa-n01", 0);
		assert_true(back);
		give_all(f, placed, n);
	}
}

/* Quarantine needs an empty GPU; take refuses a quarantined one and changes
 * nothing; a stray give of a whole slot does not bring it back; both calls
 * are idempotent; bad positions are refused. */
static void test_quarantine_rules(void **state)
{
	struct fixture *f = *state;
	struct iso_allocation a = mig_alloc("a-busy", "3g.40gb");
	struct iso_allocation w = whole_alloc("a-whole");
	struct iso_error err = {0};
	struct iso_gpu_occupancy before;

	assert_int_equal(iso_placer_place(&iso_placer_first_fit, &f->cs, &a, 1, &err), 0);
	assert_true(uses(&a, "fa-n01", 0));
	assert_int_equal(iso_cluster_state_gpu_quarantine(&f->cs, N01, 0), -EBUSY);
	assert_false(iso_cluster_state_gpu_quarantined(&f->cs, N01, 0));
	iso_cluster_state_give(&f->cs, &a);
	assert_int_equal(iso_cluster_state_gpu_quarantine(&f->cs, N01, 0), 0);
	assert_int_equal(iso_cluster_state_gpu_quarantine(&f->cs, N01, 0), 0); /* again */
	check_state(f);

	/* The same slot, taken directly: refused, nothing changed. */
	before = f->cs.usage[N01].gpus[0];
	assert_true(iso_cluster_state_take(&f->cs, &a, &err) < 0);
	assert_int_equal(err.code, ISO_E_NO_CAPACITY);
	assert_int_equal(f->cs.usage[N01].members, 0);
	assert_memory_equal(&before, &f->cs.usage[N01].gpus[0], sizeof(before));

	/* A whole slot on it: take refuses; a give (as if it were held) is
	 * ignored rather than emptying the quarantined GPU. */
	w.n_members = 1;
	w.placed = calloc(1, sizeof(*w.placed));
	w.n_slots = 1;
	w.slots = calloc(1, sizeof(*w.slots));
	assert_non_null(w.placed);
	assert_non_null(w.slots);
	iso_strlcpy(w.placed[0].node, "fa-n01", sizeof(w.placed[0].node));
	w.slots[0] = (struct iso_slot){.member = 0, .gpu = 0, .whole = true, .width = 8};
	assert_true(iso_cluster_state_take(&f->cs, &w, &err) < 0);
	f->cs.usage[N01].members = 1; /* what give expects of a held member */
	f->cs.usage[N01].cpus_used = 1;
	iso_cluster_state_give(&f->cs, &w);
	assert_true(iso_cluster_state_gpu_quarantined(&f->cs, N01, 0));
	assert_true(f->cs.usage[N01].gpus[0].whole);
	assert_int_equal(f->cs.usage[N01].gpus[0].free_mask, 0);

	iso_cluster_state_gpu_restore(&f->cs, N01, 0);
	iso_cluster_state_gpu_restore(&f->cs, N01, 0); /* again: nothing */
	assert_false(f->cs.usage[N01].gpus[0].whole);
	assert_int_equal(f->cs.usage[N01].gpus[0].free_mask, 0xff);
	check_state(f);

	/* A non-MIG GPU is quarantined the same way. */
	assert_int_equal(iso_cluster_state_gpu_quarantine(&f->cs, N02, 1), 0);
	check_state(f);
	iso_cluster_state_gpu_restore(&f->cs, N02, 1);
	check_state(f);

	assert_int_equal(iso_cluster_state_gpu_quarantine(&f->cs, N01, 2), -EINVAL);
	assert_int_equal(iso_cluster_state_gpu_quarantine(&f->cs, N_NODES, 0), -EINVAL);
	assert_int_equal(iso_cluster_state_gpu_quarantine(&f->cs, -1, 0), -EINVAL);
	assert_false(iso_cluster_state_gpu_quarantined(&f->cs, N01, -1));
	iso_cluster_state_gpu_restore(&f->cs, N01, 7); /* no such GPU: nothing */
	iso_allocation_clear(&a);
	iso_allocation_clear(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_every_policy_refuses_quarantined, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_quarantine_rules, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

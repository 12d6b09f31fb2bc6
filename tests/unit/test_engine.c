/* test_engine.c: the isostack placement engine (src/sched/isostack.c and
 * its index, mix and constraints) and the fabric co-tenancy rule that the
 * cluster state enforces for every policy. Clusters are built in code. The
 * property tests hold the engine against a brute-force placer: whenever some
 * node, GPU and start could hold a member, the engine must place it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "isostack/sched.h"

/* ---- clusters built in code ---- */

#define MAXN 16
#define MAXG 8

struct cluster {
	struct iso_inventory inv;
	struct iso_node nodes[MAXN];
	struct iso_gpu gpus[MAXN][MAXG];
	struct iso_cluster_state cs;
	bool ready;
};

struct node_spec {
	const char *name, *pool, *rack;
	int cpus;
	int64_t mib;
	const char *model; /* NULL: no GPUs */
	int n_gpus;
	int mig; /* 1: MIG on every GPU; 0: off; 2: off on GPU 0 only */
	int vfs; /* -1: no fabric port */
};

static struct cluster *cluster_new(enum iso_fabric_type fabric, const struct node_spec *spec, int n)
{
	struct cluster *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	assert_true(n <= MAXN);
	c->inv.fabric.type = fabric;
	for (int i = 0; i < n; i++) {
		const struct node_spec *s = &spec[i];
		struct iso_node *node = &c->nodes[i];

		iso_strlcpy(node->name, s->name, sizeof(node->name));
		iso_strlcpy(node->pool, s->pool ? s->pool : "gpu", sizeof(node->pool));
		iso_strlcpy(node->rack, s->rack ? s->rack : "rack-a", sizeof(node->rack));
		node->cpus = s->cpus ? s->cpus : 64;
		node->memory_mib = s->mib ? s->mib : 1 << 20;
		node->n_gpus = s->model ? s->n_gpus : 0;
		node->gpus = node->n_gpus ? c->gpus[i] : NULL;
		assert_true(node->n_gpus <= MAXG);
		for (int j = 0; j < node->n_gpus; j++) {
			c->gpus[i][j].index = j;
			c->gpus[i][j].model = iso_gpu_model_find(s->model);
			c->gpus[i][j].mig_enabled = s->mig == 1 || (s->mig == 2 && j != 0);
			assert_non_null(c->gpus[i][j].model);
		}
		node->has_port = s->vfs >= 0;
		node->port.n_vfs = s->vfs > 0 ? s->vfs : 0;
	}
	c->inv.n_nodes = n;
	c->inv.nodes = c->nodes;
	assert_int_equal(iso_cluster_state_init(&c->cs, &c->inv), 0);
	c->ready = true;
	return c;
}

static void cluster_free(struct cluster *c)
{
	if (c && c->ready)
		iso_cluster_state_free(&c->cs);
	free(c);
}

static void check_state(const struct cluster *c)
{
	struct iso_error err = {0};

	if (iso_cluster_state_check(&c->cs, &err) != 0)
		fail_msg("index inconsistent: %s", err.message);
}

static struct iso_allocation req(const char *profile, int count, int64_t tenant)
{
	struct iso_allocation a = {.tenant_id = tenant};

	iso_strlcpy(a.id, "a-test", sizeof(a.id));
	a.shape.gpu_count = profile ? count : 0;
	if (profile && strcmp(profile, "whole") == 0)
		a.shape.whole = true;
	else if (profile)
		iso_strlcpy(a.shape.profile, profile, sizeof(a.shape.profile));
	return a;
}

static int place_with(const struct iso_placer *p, struct cluster *c, struct iso_allocation *a,
                      int want)
{
	struct iso_error err = {0};
	int r = iso_placer_place(p, &c->cs, a, want, &err);

	if (r < 0)
		assert_int_equal(err.code, r == -ENOSPC ? ISO_E_NO_CAPACITY : ISO_E_INVALID);
	check_state(c);
	return r;
}

static int place(struct cluster *c, struct iso_allocation *a, int want)
{
	return place_with(&iso_placer_isostack, c, a, want);
}

static void release(struct cluster *c, struct iso_allocation *a)
{
	iso_cluster_state_give(&c->cs, a);
	iso_allocation_clear(a);
	check_state(c);
}

static void expect_slot(const struct iso_allocation *a, int si, const char *node, int gpu,
                        const char *profile, int start)
{
	assert_true(si < a->n_slots);
	assert_string_equal(a->placed[a->slots[si].member].node, node);
	assert_int_equal(a->slots[si].gpu, gpu);
	if (profile) {
		assert_false(a->slots[si].whole);
		assert_string_equal(a->slots[si].profile, profile);
		assert_int_equal(a->slots[si].start, start);
	} else {
		assert_true(a->slots[si].whole);
	}
}

/* Takes `profile` at `start` of GPU `gpu` on `node` directly into the
 * cluster state, as a placement made earlier: the state a test starts from. */
static struct iso_allocation hold(struct cluster *c, const char *node, int gpu, const char *profile,
                                  int start)
{
	struct iso_allocation a = req(profile, 1, 1);
	const struct iso_mig_profile *p =
	    iso_mig_profile_find(iso_gpu_model_find("h100-80gb"), profile);
	struct iso_error err;

	assert_non_null(p);
	a.placed = calloc(1, sizeof(*a.placed));
	a.slots = calloc(1, sizeof(*a.slots));
	assert_non_null(a.placed);
	assert_non_null(a.slots);
	a.n_members = a.n_slots = 1;
	iso_strlcpy(a.placed[0].node, node, sizeof(a.placed[0].node));
	a.slots[0] = (struct iso_slot){.member = 0, .gpu = gpu, .start = start, .width = p->width};
	iso_strlcpy(a.slots[0].profile, profile, sizeof(a.slots[0].profile));
	assert_int_equal(iso_cluster_state_take(&c->cs, &a, &err), 0);
	return a;
}

/* ---- geometry through the engine ---- */

/* 3g then 4g on one GPU: first-fit puts the 3g at 0 and strands the 4g; the
 * engine keeps 4g@0 open by putting the 3g at 4. */
static void test_3g_then_4g(void **state)
{
	(void)state;
	const struct node_spec one[] = {{"n1", .model = "h100-80gb", .n_gpus = 1, .mig = 1}};
	struct cluster *ff = cluster_new(ISO_FABRIC_ETHERNET, one, 1);
	struct cluster *en = cluster_new(ISO_FABRIC_ETHERNET, one, 1);
	struct iso_allocation a = req("3g.40gb", 1, 1), b = req("4g.40gb", 1, 1);
	struct iso_allocation c = req("3g.40gb", 1, 1), d = req("4g.40gb", 1, 1);

	assert_int_equal(place_with(&iso_placer_first_fit, ff, &a, 1), 0);
	expect_slot(&a, 0, "n1", 0, "3g.40gb", 0);
	assert_int_equal(place_with(&iso_placer_first_fit, ff, &b, 1), -ENOSPC);

	assert_int_equal(place(en, &c, 1), 0);
	expect_slot(&c, 0, "n1", 0, "3g.40gb", 4);
	assert_int_equal(place(en, &d, 1), 0);
	expect_slot(&d, 0, "n1", 0, "4g.40gb", 0);
	assert_int_equal(en->cs.usage[0].gpus[0].compute_used, 7);

	release(ff, &a);
	release(en, &c);
	release(en, &d);
	iso_allocation_clear(&b);
	cluster_free(ff);
	cluster_free(en);
}

/* A100-40 names: 4x1g.10gb + 3x1g.5gb sums to the GPU's 7 compute slices
 * but needs 11 memory slices, so it never fits one GPU (a scheduler that
 * counts compute slices would accept it). The engine places exactly what
 * the geometry allows, in either order, and all seven on two GPUs. */
static int place_seq(struct cluster *c, const char *const *seq, int n, struct iso_allocation *out)
{
	int placed = 0;

	for (int i = 0; i < n; i++) {
		out[i] = req(seq[i], 1, 1);
		if (place(c, &out[i], 1) == 0)
			placed++;
	}
	return placed;
}

static void release_all(struct cluster *c, struct iso_allocation *a, int n)
{
	for (int i = 0; i < n; i++) {
		if (a[i].n_members)
			release(c, &a[i]);
		else
			iso_allocation_clear(&a[i]);
	}
}

static void test_1g_mix_a100_40(void **state)
{
	(void)state;
	const struct node_spec one[] = {{"n1", .model = "a100-40gb", .n_gpus = 1, .mig = 1}};
	const struct node_spec two[] = {{"n1", .model = "a100-40gb", .n_gpus = 2, .mig = 1}};
	static const char *const big_first[] = {"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb",
	                                        "1g.5gb",  "1g.5gb",  "1g.5gb"};
	static const char *const small_first[] = {"1g.5gb",  "1g.5gb",  "1g.5gb", "1g.10gb",
	                                          "1g.10gb", "1g.10gb", "1g.10gb"};
	struct iso_allocation a[7];
	struct cluster *c;

	/* Four double-memory instances fill all 8 memory slices. */
	c = cluster_new(ISO_FABRIC_ETHERNET, one, 1);
	assert_int_equal(place_seq(c, big_first, 7, a), 4);
	assert_int_equal(c->cs.usage[0].gpus[0].free_mask, 0);
	assert_int_equal(c->cs.usage[0].gpus[0].compute_used, 4);
	release_all(c, a, 7);
	cluster_free(c);
	/* Three small ones use two double-memory blocks: two big ones fit. */
	c = cluster_new(ISO_FABRIC_ETHERNET, one, 1);
	assert_int_equal(place_seq(c, small_first, 7, a), 5);
	release_all(c, a, 7);
	cluster_free(c);
	/* Two GPUs hold all seven, in either order. */
	c = cluster_new(ISO_FABRIC_ETHERNET, two, 1);
	assert_int_equal(place_seq(c, big_first, 7, a), 7);
	release_all(c, a, 7);
	assert_int_equal(place_seq(c, small_first, 7, a), 7);
	release_all(c, a, 7);
	cluster_free(c);
}

/* With no history (the prior mix: every profile and whole GPUs alike),
 * each profile's first instance on an empty H100 goes where it keeps the
 * most open: 3g at 4 and 2g at 4 keep 4g@0 (and 3g@0); a 1g at 6 keeps
 * 4g@0 and 2g at 0, 2 and 4, so the other six compute slices can still be
 * used (4g + 2g), and gives up only slice 7, which holds no compute of its
 * own (at 4 it would break 2g@4 as well). 1g.20gb at 6 covers slice 7
 * itself. 4g and 7g have one start. */
static void test_empty_gpu_choices(void **state)
{
	(void)state;
	const struct node_spec one[] = {{"n1", .model = "h100-80gb", .n_gpus = 1, .mig = 1}};
	static const struct {
		const char *profile;
		int start;
	} want[] = {{"1g.10gb", 6}, {"1g.10gb+me", 6}, {"1g.20gb", 6}, {"2g.20gb", 4},
	            {"3g.40gb", 4}, {"4g.40gb", 0},    {"7g.80gb", 0}};

	for (unsigned i = 0; i < ISO_ARRAY_SIZE(want); i++) {
		struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, one, 1);
		struct iso_allocation a = req(want[i].profile, 1, 1);

		assert_int_equal(place(c, &a, 1), 0);
		expect_slot(&a, 0, "n1", 0, want[i].profile, want[i].start);
		release(c, &a);
		cluster_free(c);
	}
}

/* Teardown holes: an isolated free slice is a fragment for every profile
 * wider than one slice, so a 1g goes into a hole before it breaks a GPU
 * that is still whole, wherever the two sit in inventory order. */
static void test_teardown_holes(void **state)
{
	(void)state;
	const struct node_spec two[] = {{"n1", .model = "h100-80gb", .n_gpus = 1, .mig = 1},
	                                {"n2", .model = "h100-80gb", .n_gpus = 1, .mig = 1}};
	struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, two, 2);
	struct iso_allocation full[7], x = req("1g.10gb", 1, 1), y = req("1g.10gb", 1, 1);
	struct iso_allocation z = req("2g.20gb", 1, 1);

	/* Fill n2 with seven 1g, then free slices 1 and 4: two holes. */
	for (int i = 0; i < 7; i++)
		full[i] = hold(c, "n2", 0, "1g.10gb", i);
	release(c, &full[1]);
	release(c, &full[4]);
	assert_int_equal(c->cs.usage[1].gpus[0].free_mask, 0x92); /* 1, 4, 7 */

	/* The 1g fills a hole on n2; the empty GPU on n1 stays whole. */
	assert_int_equal(place(c, &x, 1), 0);
	assert_string_equal(x.placed[0].node, "n2");
	assert_true(x.slots[0].start == 1 || x.slots[0].start == 4);
	assert_int_equal(place(c, &y, 1), 0);
	assert_string_equal(y.placed[0].node, "n2");
	assert_int_equal(c->cs.usage[1].gpus[0].free_mask, 0x80);
	assert_true(iso_gpu_occupancy_empty(c->gpus[0][0].model, &c->cs.usage[0].gpus[0]));
	/* No hole holds a 2g: it must go to n1. */
	assert_int_equal(place(c, &z, 1), 0);
	assert_string_equal(z.placed[0].node, "n1");

	release(c, &x);
	release(c, &y);
	release(c, &z);
	for (int i = 0; i < 7; i++)
		if (i != 1 && i != 4)
			release(c, &full[i]);
	cluster_free(c);
}

/* Partially used GPUs are filled before empty ones (the empty GPU keeps its
 * value for whole-GPU and large requests), and whole GPUs go to the node
 * with the fewest empty GPUs, GPUs without MIG first. */
static void test_packing_and_whole(void **state)
{
	(void)state;
	const struct node_spec spec[] = {
	    {"n1", .model = "h100-80gb", .n_gpus = 4, .mig = 1},
	    {"n2", .model = "h100-80gb", .n_gpus = 2, .mig = 2}, /* GPU 0 without MIG */
	    {"cpu1", .pool = "gpu", .cpus = 32},
	};
	struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, spec, 3);
	struct iso_allocation a = req("1g.10gb", 1, 1), b = req("1g.10gb", 1, 1);
	struct iso_allocation w = req("whole", 1, 1), w2 = req("whole", 2, 1);
	struct iso_allocation cpu = req(NULL, 0, 1);

	/* The first 1g breaks a MIG GPU on n2 (the node with the fewest empty
	 * GPUs that has a MIG one), the second joins it. */
	assert_int_equal(place(c, &a, 1), 0);
	expect_slot(&a, 0, "n2", 1, "1g.10gb", a.slots[0].start);
	assert_int_equal(place(c, &b, 1), 0);
	expect_slot(&b, 0, "n2", 1, "1g.10gb", b.slots[0].start);
	/* One whole GPU: n2's GPU 0 (n2 has one empty GPU, n1 four). */
	assert_int_equal(place(c, &w, 1), 0);
	expect_slot(&w, 0, "n2", 0, NULL, 0);
	/* Two whole GPUs on one node: n1. */
	assert_int_equal(place(c, &w2, 1), 0);
	assert_int_equal(w2.n_slots, 2);
	expect_slot(&w2, 0, "n1", 0, NULL, 0);
	expect_slot(&w2, 1, "n1", 1, NULL, 0);
	/* CPU-only work goes to the node without GPUs. */
	cpu.shape.cpus = 8;
	assert_int_equal(place(c, &cpu, 3), 0);
	for (int k = 0; k < 3; k++)
		assert_string_equal(cpu.placed[k].node, "cpu1");
	release(c, &a);
	release(c, &b);
	release(c, &w);
	release(c, &w2);
	release(c, &cpu);
	cluster_free(c);
}

/* A member's instances are separate devices on one node (one process uses
 * one MIG device): three 3g.40gb for one member land on one node, on as
 * many GPUs as needed, never as one bigger instance. */
static void test_member_instances(void **state)
{
	(void)state;
	const struct node_spec spec[] = {{"n1", .model = "h100-80gb", .n_gpus = 1, .mig = 1},
	                                 {"n2", .model = "h100-80gb", .n_gpus = 2, .mig = 1}};
	struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, spec, 2);
	struct iso_allocation a = req("3g.40gb", 3, 1), b = req("3g.40gb", 2, 1);

	assert_int_equal(place(c, &a, 1), 0);
	assert_int_equal(a.n_slots, 3);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(a.placed[0].node, "n2");
		assert_string_equal(a.slots[i].profile, "3g.40gb");
		assert_int_equal(a.slots[i].member, 0);
	}
	/* Two more: only n1 (two 3g) is left; n2 has one 3g. */
	assert_int_equal(place(c, &b, 1), 0);
	assert_string_equal(b.placed[0].node, "n1");
	iso_allocation_clear(&b);
	b = req("3g.40gb", 2, 1);
	assert_int_equal(place(c, &b, 2), -ENOSPC);
	assert_int_equal(b.n_members, 0);
	release(c, &a);
	iso_allocation_clear(&b);
	cluster_free(c);
}

/* ---- the learned mix ---- */

/* GPU n1 has 3g.40gb@4 used (0-3 free: room for a 4g or a 3g); n2 is
 * empty. Where a 2g goes depends on what is in demand: with 4g in demand it
 * keeps n1's four slices and breaks n2; with whole GPUs in demand it keeps
 * n2 whole and uses n1. */
static int where_2g_goes(const char *train)
{
	const struct node_spec spec[] = {{"n1", .model = "h100-80gb", .n_gpus = 1, .mig = 1},
	                                 {"n2", .model = "h100-80gb", .n_gpus = 1, .mig = 1},
	                                 {"n3", .model = "h100-80gb", .n_gpus = 1, .mig = 0}};
	struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, spec, 3);
	struct iso_allocation held, x = req("2g.20gb", 1, 1);
	int node;

	/* Train: many requests of one kind, each placed and released (n3 holds
	 * whole GPUs; MIG ones go wherever the engine puts them). */
	for (int i = 0; i < 400; i++) {
		struct iso_allocation t = req(train, 1, 1);
		assert_int_equal(place(c, &t, 1), 0);
		release(c, &t);
	}
	held = hold(c, "n1", 0, "3g.40gb", 4);

	assert_int_equal(place(c, &x, 1), 0);
	node = iso_cluster_state_node_index(&c->cs, x.placed[0].node);
	release(c, &x);
	release(c, &held);
	cluster_free(c);
	return node;
}

static void test_mix_learning(void **state)
{
	(void)state;
	assert_int_equal(where_2g_goes("4g.40gb"), 1); /* n2: keep n1's 4g slot */
	assert_int_equal(where_2g_goes("whole"), 0);   /* n1: keep n2 whole */
}

/* What a placement strands for good counts, not only what the next
 * arrival could use (mig.md: 3g+3g strands a compute slice). n1 holds a
 * 3g.40gb at 4, n2 is empty; the mix is the prior one. A second 3g at 0 of
 * n1 would fill a used GPU and keep n2 whole, but leave n1 at 6 of 7
 * compute slices for good; the engine puts it at 4 of n2, and two 4g.40gb
 * after it complete both GPUs. */
static void test_strand(void **state)
{
	(void)state;
	const struct node_spec spec[] = {{"n1", .model = "h100-80gb", .n_gpus = 1, .mig = 1},
	                                 {"n2", .model = "h100-80gb", .n_gpus = 1, .mig = 1}};
	struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, spec, 2);
	struct iso_allocation held = hold(c, "n1", 0, "3g.40gb", 4), x = req("3g.40gb", 1, 1),
	                      y = req("4g.40gb", 1, 1), z = req("4g.40gb", 1, 1);

	assert_int_equal(place(c, &x, 1), 0);
	expect_slot(&x, 0, "n2", 0, "3g.40gb", 4);
	assert_int_equal(place(c, &y, 1), 0);
	assert_int_equal(place(c, &z, 1), 0);
	assert_int_equal(c->cs.usage[0].gpus[0].compute_used, 7);
	assert_int_equal(c->cs.usage[1].gpus[0].compute_used, 7);
	release(c, &z);
	release(c, &y);
	release(c, &x);
	release(c, &held);
	cluster_free(c);
}

/* The strand weight grows with the share of GPUs still empty. With
 * gpushare100's mix (Alibaba openb, pods per profile on H100-80GB; 7g the
 * most common, so empty GPUs are worth keeping) a 3g.40gb arrives; n1 holds
 * a 2g.20gb at 4, and six more one-GPU nodes are empty or full. While most
 * GPUs are empty, the 3g goes to slice 4 of an empty one: at 0 of n1 it
 * would leave one of n1's two free compute slices usable. Once almost none
 * are, it takes slice 0 of n1 and leaves the last empty GPU whole. `fill`:
 * 0 leaves them empty; 1 fills six with a 7g.80gb each before the engine
 * first looks; 2 has the engine place those six itself, learning the mix
 * while the cluster is empty, and then decide 32 more 1g.10gb (placed and
 * released), so the weight it uses was updated on the way (eng_refresh). */
static const char *where_3g_goes(int fill, int *start)
{
	static const char *const names[] = {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"};
	static const char *const profiles[] = {"7g.80gb", "4g.40gb", "3g.40gb", "2g.20gb",
	                                       "1g.10gb"};
	static char node[16];
	const double weights[] = {3331, 2070, 958, 632, 73};
	struct node_spec spec[8];
	struct iso_shape mix[ISO_ARRAY_SIZE(profiles)];
	struct iso_allocation held[8], x = req("3g.40gb", 1, 1);
	struct cluster *c;
	int n_held = 0;

	for (int i = 0; i < 8; i++)
		spec[i] = (struct node_spec){names[i], .model = "h100-80gb", .n_gpus = 1, .mig = 1};
	c = cluster_new(ISO_FABRIC_ETHERNET, spec, 8);
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(profiles); i++) {
		mix[i] = (struct iso_shape){.gpu_count = 1};
		iso_strlcpy(mix[i].profile, profiles[i], sizeof(mix[i].profile));
	}
	if (fill == 2)
		assert_int_equal(iso_placer_learn(&iso_placer_isostack, &c->cs, mix, weights,
		                                  (int)ISO_ARRAY_SIZE(profiles)),
		                 0);
	held[n_held++] = hold(c, "n1", 0, "2g.20gb", 4);
	for (int i = 2; fill && i < 8; i++) {
		if (fill == 1) {
			held[n_held++] = hold(c, names[i], 0, "7g.80gb", 0);
			continue;
		}
		held[n_held] = req("7g.80gb", 1, 1);
		assert_int_equal(place(c, &held[n_held++], 1), 0);
	}
	for (int i = 0; fill == 2 && i < 32; i++) {
		struct iso_allocation t = req("1g.10gb", 1, 1);
		assert_int_equal(place(c, &t, 1), 0);
		release(c, &t);
	}
	if (fill != 2)
		assert_int_equal(iso_placer_learn(&iso_placer_isostack, &c->cs, mix, weights,
		                                  (int)ISO_ARRAY_SIZE(profiles)),
		                 0);
	assert_int_equal(place(c, &x, 1), 0);
	iso_strlcpy(node, x.placed[0].node, sizeof(node));
	*start = x.slots[0].start;
	release(c, &x);
	while (n_held > 0)
		release(c, &held[--n_held]);
	cluster_free(c);
	return node;
}

static void test_strand_scarcity(void **state)
{
	int start;

	(void)state;
	assert_string_not_equal(where_3g_goes(0, &start), "n1"); /* 7 of 8 GPUs empty */
	assert_int_equal(start, 4);
	assert_string_equal(where_3g_goes(1, &start), "n1"); /* 1 of 8 */
	assert_int_equal(start, 0);
	assert_string_equal(where_3g_goes(2, &start), "n1"); /* 1 of 8, reached by decisions */
	assert_int_equal(start, 0);
}

/* ---- determinism ---- */

static uint32_t rng_next(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static const struct node_spec mixed[] = {
    {"a1", .model = "h100-80gb", .n_gpus = 2, .mig = 1, .cpus = 16, .vfs = 2, .rack = "r1"},
    {"a2", .model = "h100-80gb", .n_gpus = 2, .mig = 2, .cpus = 16, .vfs = 1, .rack = "r1"},
    {"b1", .model = "a100-80gb", .n_gpus = 2, .mig = 1, .cpus = 16, .vfs = 0, .rack = "r2"},
    {"b2", .model = "a100-40gb", .n_gpus = 1, .mig = 1, .cpus = 8, .vfs = 3, .rack = "r2",
     .pool = "small"},
    {"c1", .cpus = 32, .vfs = 4, .rack = "r3", .pool = "cpu"},
};
static const char *const mixed_profiles[] = {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb",
                                             "3g.40gb", "4g.40gb",    "7g.80gb", "1g.5gb",
                                             "2g.10gb", "3g.20gb",    "whole"};

/* One random request: profile, instances, members, cpus, tenant, pool. */
static struct iso_allocation random_req(uint32_t *x, int *members)
{
	uint32_t kind = rng_next(x) % (ISO_ARRAY_SIZE(mixed_profiles) + 1);
	struct iso_allocation a =
	    kind == ISO_ARRAY_SIZE(mixed_profiles)
	        ? req(NULL, 0, 1)
	        : req(mixed_profiles[kind], 1 + (int)(rng_next(x) % 2), 1 + rng_next(x) % 4);

	a.tenant_id = 1 + rng_next(x) % 4;
	a.shape.cpus = (int)(rng_next(x) % 6);
	a.shape.memory_mib = (int64_t)(rng_next(x) % 4096);
	if (rng_next(x) % 8 == 0)
		iso_strlcpy(a.shape.pool, rng_next(x) % 2 ? "small" : "gpu", sizeof(a.shape.pool));
	if (rng_next(x) % 8 == 0)
		iso_strlcpy(a.shape.gpu_model, "h100-80gb", sizeof(a.shape.gpu_model));
	*members = 1 + (int)(rng_next(x) % 2);
	return a;
}

/* Same inputs, same placements: two clusters driven by one seed agree slot
 * for slot, and so does a rerun. */
static void run_sequence(uint32_t seed, struct iso_slot *log, int *n_log, int max_log)
{
	struct cluster *c = cluster_new(ISO_FABRIC_INFINIBAND, mixed, ISO_ARRAY_SIZE(mixed));
	struct iso_allocation live[32];
	int n_live = 0;
	uint32_t x = seed;

	*n_log = 0;
	for (int step = 0; step < 600; step++) {
		if (rng_next(&x) % 3 != 0 && n_live < (int)ISO_ARRAY_SIZE(live)) {
			int members;
			live[n_live] = random_req(&x, &members);
			if (place(c, &live[n_live], members) == 0) {
				for (int s = 0; s < live[n_live].n_slots && *n_log < max_log; s++) {
					log[*n_log] = live[n_live].slots[s];
					iso_strlcpy(
					    log[*n_log].profile,
					    live[n_live].placed[live[n_live].slots[s].member].node,
					    sizeof(log[0].profile));
					(*n_log)++;
				}
				n_live++;
			} else {
				iso_allocation_clear(&live[n_live]);
			}
		} else if (n_live > 0) {
			int i = (int)(rng_next(&x) % (uint32_t)n_live);
			release(c, &live[i]);
			live[i] = live[--n_live];
		}
	}
	while (n_live > 0)
		release(c, &live[--n_live]);
	cluster_free(c);
}

static void test_determinism(void **state)
{
	(void)state;
	static struct iso_slot a[4096], b[4096];
	int na, nb;

	run_sequence(12345, a, &na, 4096);
	run_sequence(12345, b, &nb, 4096);
	assert_true(na > 100);
	assert_int_equal(na, nb);
	assert_int_equal(memcmp(a, b, (size_t)na * sizeof(a[0])), 0);
	run_sequence(54321, b, &nb, 4096);
	assert_false(na == nb && memcmp(a, b, (size_t)na * sizeof(a[0])) == 0);
}

/* ---- the fabric's co-tenancy rule ---- */

static void test_vf_one_per_tenant(void **state)
{
	(void)state;
	const struct node_spec one[] = {
	    {"n1", .model = "h100-80gb", .n_gpus = 2, .mig = 1, .vfs = 1}};
	struct cluster *c = cluster_new(ISO_FABRIC_INFINIBAND, one, 1);
	struct iso_allocation a = req("1g.10gb", 1, 7), a2 = req("1g.10gb", 1, 7);
	struct iso_allocation b = req("1g.10gb", 1, 8), manual = req("1g.10gb", 1, 8);
	struct iso_error err = {0};

	assert_int_equal(place(c, &a, 2), 0);
	assert_int_equal(c->cs.usage[0].vfs_used, 1);
	assert_int_equal(c->cs.usage[0].tenants, 1);
	/* The same tenant again: no new VF needed. */
	assert_int_equal(place(c, &a2, 1), 0);
	assert_int_equal(c->cs.usage[0].vfs_used, 1);
	/* Another tenant: the node's only VF is taken; every policy refuses. */
	assert_int_equal(place(c, &b, 1), -ENOSPC);
	assert_int_equal(place_with(&iso_placer_first_fit, c, &b, 1), -ENOSPC);
	/* ...and so does take itself, naming the member's node. */
	manual.placed = calloc(1, sizeof(*manual.placed));
	manual.slots = calloc(1, sizeof(*manual.slots));
	assert_non_null(manual.placed);
	assert_non_null(manual.slots);
	manual.n_members = manual.n_slots = 1;
	iso_strlcpy(manual.placed[0].node, "n1", sizeof(manual.placed[0].node));
	manual.slots[0] = (struct iso_slot){.member = 0, .gpu = 1, .start = 6, .width = 1};
	iso_strlcpy(manual.slots[0].profile, "1g.10gb", sizeof(manual.slots[0].profile));
	assert_int_equal(iso_cluster_state_take(&c->cs, &manual, &err), -ENOSPC);
	assert_int_equal(err.code, ISO_E_NO_CAPACITY);
	assert_string_equal(err.field, "nodes[0].node");
	assert_non_null(strstr(err.message, "VF"));
	check_state(c);
	/* Once tenant 7 is gone, tenant 8 fits. */
	release(c, &a);
	assert_int_equal(c->cs.usage[0].vfs_used, 1);
	release(c, &a2);
	assert_int_equal(c->cs.usage[0].vfs_used, 0);
	assert_int_equal(c->cs.usage[0].tenants, 0);
	assert_int_equal(iso_cluster_state_take(&c->cs, &manual, &err), 0);
	assert_int_equal(c->cs.usage[0].vfs_used, 1);
	release(c, &manual);
	iso_allocation_clear(&b);
	cluster_free(c);
}

static void test_vf_limits(void **state)
{
	(void)state;
	const struct node_spec spec[] = {
	    {"v2", .model = "h100-80gb", .n_gpus = 1, .mig = 1, .vfs = 2},
	    {"x0", .model = "h100-80gb", .n_gpus = 1, .mig = 1, .vfs = 0}, /* exclusive */
	};
	enum iso_fabric_type fabrics[] = {ISO_FABRIC_INFINIBAND, ISO_FABRIC_OMNIPATH,
	                                  ISO_FABRIC_ETHERNET};

	for (unsigned f = 0; f < ISO_ARRAY_SIZE(fabrics); f++) {
		struct cluster *c = cluster_new(fabrics[f], spec, 2);
		struct iso_allocation t[7];
		int placed = 0;
		bool limited = fabrics[f] != ISO_FABRIC_ETHERNET;

		/* Seven tenants ask for one 1g each; 14 would fit by geometry. */
		for (int i = 0; i < 7; i++) {
			t[i] = req("1g.10gb", 1, 100 + i);
			if (place(c, &t[i], 1) == 0)
				placed++;
		}
		if (limited) {
			/* Two tenants on v2 (two VFs), one on x0 (exclusive). */
			assert_int_equal(placed, 3);
			assert_int_equal(c->cs.usage[0].vfs_used, 2);
			assert_int_equal(c->cs.usage[0].tenants, 2);
			assert_int_equal(c->cs.usage[1].vfs_used, 0);
			assert_int_equal(c->cs.usage[1].tenants, 1);
		} else {
			assert_int_equal(placed, 7);
			assert_int_equal(c->cs.usage[0].vfs_used + c->cs.usage[1].vfs_used, 0);
			assert_int_equal(c->cs.usage[0].tenants + c->cs.usage[1].tenants, 7);
		}
		for (int i = 0; i < 7; i++) {
			if (t[i].n_members)
				release(c, &t[i]);
			else
				iso_allocation_clear(&t[i]);
		}
		cluster_free(c);
	}
}

/* A fabric-exclusive node serves the tenant already there; a node without
 * a port has no fabric to share. */
static void test_vf_exclusive_and_portless(void **state)
{
	(void)state;
	const struct node_spec spec[] = {
	    {"x0", .model = "h100-80gb", .n_gpus = 1, .mig = 1, .vfs = 0},
	    {"np", .model = "h100-80gb", .n_gpus = 1, .mig = 1, .vfs = -1},
	};
	struct cluster *c = cluster_new(ISO_FABRIC_INFINIBAND, spec, 2);
	struct iso_allocation a = req("3g.40gb", 1, 1), b = req("3g.40gb", 1, 2);
	struct iso_allocation a2 = req("3g.40gb", 1, 1), d = req("3g.40gb", 1, 3);
	struct iso_place_constraints only_x0 = {.nodes = (const char *const[]){"x0"}, .n_nodes = 1};
	struct iso_error err;

	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &a, 1, &only_x0, &err),
	                 0);
	assert_string_equal(a.placed[0].node, "x0");
	/* Tenant 2: x0 is taken by tenant 1, so the port-less node. */
	assert_int_equal(place(c, &b, 1), 0);
	assert_string_equal(b.placed[0].node, "np");
	/* Tenant 1 again fits beside itself on x0. */
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &a2, 1, &only_x0, &err),
	                 0);
	assert_string_equal(a2.placed[0].node, "x0");
	/* Tenant 3 on x0: refused; np is full (two 3g). */
	assert_int_equal(iso_placer_place_ex(&iso_placer_isostack, &c->cs, &d, 1, &only_x0, &err),
	                 -ENOSPC);
	assert_int_equal(c->cs.usage[1].tenants, 1);
	assert_int_equal(c->cs.usage[1].vfs_used, 0);
	release(c, &a);
	release(c, &a2);
	release(c, &b);
	iso_allocation_clear(&d);
	cluster_free(c);
}

/* ---- the constraint hook ---- */

static void test_constraints(void **state)
{
	(void)state;
	const struct node_spec spec[] = {
	    {"n1", .model = "h100-80gb", .n_gpus = 2, .mig = 1, .rack = "r1"},
	    {"n2", .model = "h100-80gb", .n_gpus = 2, .mig = 1, .rack = "r1"},
	    {"n3", .model = "h100-80gb", .n_gpus = 2, .mig = 1, .rack = "r2"},
	    {"n4", .model = "h100-80gb", .n_gpus = 2, .mig = 1, .rack = "r3"},
	};
	const struct iso_placer *const policies[] = {&iso_placer_isostack, &iso_placer_first_fit};

	for (unsigned pi = 0; pi < ISO_ARRAY_SIZE(policies); pi++) {
		const struct iso_placer *p = policies[pi];
		struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, spec, 4);
		struct iso_allocation a = req("7g.80gb", 1, 1);
		struct iso_error err = {0};
		struct iso_place_constraints k = {0};
		const char *const n3[] = {"n3"}, *const n1n2n3[] = {"n1", "n2", "n3"};
		const char *const r1[] = {"r1"}, *const r2r3[] = {"r2", "r3"},
		                  *const bad[] = {"zz"};
		const struct iso_gpu_ref g41[] = {{"n4", 1}}, gbad[] = {{"n4", 9}};

		/* Allowed nodes: only n3 (both GPUs), then nothing. */
		k.nodes = n3;
		k.n_nodes = 1;
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 2, &k, &err), 0);
		for (int i = 0; i < 2; i++)
			assert_string_equal(a.placed[i].node, "n3");
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 3, &k, &err), -ENOSPC);
		assert_null(c->cs.constraints); /* only for the call */
		release(c, &a);

		/* Avoided racks r2, r3 and node n1: only n2. */
		a = req("7g.80gb", 1, 1);
		k = (struct iso_place_constraints){.avoid_racks = r2r3,
		                                   .n_avoid_racks = 2,
		                                   .avoid_nodes = (const char *const[]){"n1"},
		                                   .n_avoid_nodes = 1};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 2, &k, &err), 0);
		assert_string_equal(a.placed[0].node, "n2");
		assert_string_equal(a.placed[1].node, "n2");
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 3, &k, &err), -ENOSPC);
		release(c, &a);

		/* Allowed rack r1 minus avoided GPU n1/0: n1 GPU 1 and n2. */
		a = req("7g.80gb", 1, 1);
		k = (struct iso_place_constraints){.racks = r1,
		                                   .n_racks = 1,
		                                   .avoid_gpus =
		                                       (const struct iso_gpu_ref[]){{"n1", 0}},
		                                   .n_avoid_gpus = 1};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 3, &k, &err), 0);
		for (int i = 0; i < 3; i++) {
			assert_true(strcmp(a.placed[i].node, "n3") != 0);
			assert_true(strcmp(a.placed[i].node, "n4") != 0);
			assert_false(strcmp(a.placed[i].node, "n1") == 0 && a.slots[i].gpu == 0);
		}
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 4, &k, &err), -ENOSPC);
		release(c, &a);

		/* Allowed GPU n4/1 only, among allowed nodes n1-n3: nothing. */
		a = req("7g.80gb", 1, 1);
		k = (struct iso_place_constraints){.gpus = g41, .n_gpus = 1};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 1, &k, &err), 0);
		expect_slot(&a, 0, "n4", 1, "7g.80gb", 0);
		release(c, &a);
		a = req("7g.80gb", 1, 1);
		k.nodes = n1n2n3;
		k.n_nodes = 3;
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 1, &k, &err), -ENOSPC);
		/* A GPU allow-list limits CPU-only members to its nodes too. */
		iso_allocation_clear(&a);
		a = req(NULL, 0, 1);
		k = (struct iso_place_constraints){.gpus = g41, .n_gpus = 1};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 2, &k, &err), 0);
		assert_string_equal(a.placed[1].node, "n4");
		release(c, &a);

		/* Unknown names are bad input, named by field. */
		a = req("7g.80gb", 1, 1);
		k = (struct iso_place_constraints){.nodes = bad, .n_nodes = 1};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 1, &k, &err), -EINVAL);
		assert_string_equal(err.field, "constraints.nodes[0]");
		k = (struct iso_place_constraints){.avoid_racks = bad, .n_avoid_racks = 1};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 1, &k, &err), -EINVAL);
		assert_string_equal(err.field, "constraints.avoid_racks[0]");
		k = (struct iso_place_constraints){.avoid_gpus = gbad, .n_avoid_gpus = 1};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 1, &k, &err), -EINVAL);
		assert_string_equal(err.field, "constraints.avoid_gpus[0].gpu");
		k = (struct iso_place_constraints){.n_racks = 1};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 1, &k, &err), -EINVAL);
		assert_string_equal(err.field, "constraints");
		assert_int_equal(a.n_members, 0);
		/* Without constraints everything is allowed again. */
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 8, NULL, &err), 0);
		assert_true(iso_place_node_allowed(&c->cs, 0));
		release(c, &a);
		cluster_free(c);
	}
}

/* Pinned members (member_nodes, POST /v1/allocations' "nodes"): member k
 * on member_nodes[k] and nowhere else, under every policy, also where
 * another node would score better; a member that does not fit on its node
 * is refused naming the member, the node and the reason, with nothing
 * taken. */
static void test_member_nodes(void **state)
{
	(void)state;
	const struct node_spec spec[] = {
	    {"n1", .model = "h100-80gb", .n_gpus = 1, .mig = 1, .cpus = 16},
	    {"n2", .model = "h100-80gb", .n_gpus = 1, .mig = 1, .cpus = 16},
	    {"n3", .model = "h100-80gb", .n_gpus = 1, .mig = 1, .cpus = 16},
	};
	const struct iso_placer *const policies[] = {&iso_placer_isostack, &iso_placer_first_fit,
	                                             &iso_placer_best_fit, &iso_placer_fgd};

	for (unsigned pi = 0; pi < ISO_ARRAY_SIZE(policies); pi++) {
		const struct iso_placer *p = policies[pi];
		struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, spec, 3);
		const char *const pins[] = {"n3", "n1"}, *const bad[] = {"n3", "zz"};
		struct iso_place_constraints k = {.member_nodes = pins, .n_member_nodes = 2};
		struct iso_allocation a = req("3g.40gb", 1, 1), b = req("4g.40gb", 1, 2);
		struct iso_allocation h = hold(c, "n1", 0, "3g.40gb", 4);
		struct iso_error err = {0};

		/* n3 then n1, in that order, though first-fit would start at n1 */
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &a, 2, &k, &err), 0);
		assert_string_equal(a.placed[0].node, "n3");
		assert_string_equal(a.placed[1].node, "n1");
		check_state(c);
		assert_true(iso_place_node_allowed(&c->cs, 1)); /* the pin ends with the call */
		/* n1 now holds two 3g: a 4g pinned there does not fit (geometry),
		 * though n2 is empty; nothing is taken */
		k.member_nodes = (const char *const[]){"n1"};
		k.n_member_nodes = 1;
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &b, 1, &k, &err), -ENOSPC);
		assert_int_equal(err.code, ISO_E_NO_CAPACITY);
		assert_string_equal(err.field, "nodes[0]");
		assert_string_equal(err.message,
		                    "member 0: no free 4g.40gb placement on n1 (MIG geometry)");
		assert_int_equal(b.n_members, 0);
		check_state(c);
		/* cpus: the member's node has too few free */
		b.shape.cpus = 17;
		k.member_nodes = (const char *const[]){"n2"};
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &b, 1, &k, &err), -ENOSPC);
		assert_string_equal(err.field, "nodes[0]");
		assert_string_equal(err.message,
		                    "member 0: node n2 has 16 of 16 cpus free, the member needs 17 "
		                    "(cpus)");
		b.shape.cpus = 0;
		/* the second member fails: the first is given back */
		k.member_nodes = (const char *const[]){"n2", "n1"};
		k.n_member_nodes = 2;
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &b, 2, &k, &err), -ENOSPC);
		assert_string_equal(err.field, "nodes[1]");
		assert_int_equal(b.n_members, 0);
		assert_int_equal(c->cs.usage[1].members, 0);
		check_state(c);
		/* members past the list are free to go anywhere */
		iso_allocation_clear(&b);
		b = req("1g.10gb", 1, 2);
		k.member_nodes = (const char *const[]){"n2"};
		k.n_member_nodes = 1;
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &b, 2, &k, &err), 0);
		assert_string_equal(b.placed[0].node, "n2");
		release(c, &b);
		/* an unknown name is bad input */
		b = req("4g.40gb", 1, 2);
		k.member_nodes = bad;
		k.n_member_nodes = 2;
		assert_int_equal(iso_placer_place_ex(p, &c->cs, &b, 2, &k, &err), -EINVAL);
		assert_string_equal(err.field, "constraints.member_nodes[1]");
		/* outside a pinned placement every node is allowed again */
		assert_true(iso_place_node_allowed(&c->cs, 1));
		release(c, &a);
		release(c, &h);
		iso_allocation_clear(&b);
		cluster_free(c);
	}
}

/* ---- properties against a brute-force placer ---- */

/* Could node `ni` hold one more member of `a` right now? Exhaustive over
 * every GPU and start. */
static bool bf_gpus(const struct cluster *c, int ni, const struct iso_shape *s,
                    struct iso_gpu_occupancy *occ, int need)
{
	const struct iso_node *node = &c->nodes[ni];

	if (need == 0)
		return true;
	for (int j = 0; j < node->n_gpus; j++) {
		const struct iso_gpu *g = &node->gpus[j];
		const struct iso_mig_profile *p;

		if (!g->mig_enabled ||
		    (s->gpu_model[0] && strcasecmp(s->gpu_model, g->model->name)))
			continue;
		p = iso_mig_profile_find(g->model, s->profile);
		if (!p)
			continue;
		for (int st = 0; st < g->model->memory_slices; st++) {
			bool ok;
			if (!iso_mig_fits_at(g->model, &occ[j], p, st))
				continue;
			iso_mig_take(g->model, &occ[j], p, st);
			ok = bf_gpus(c, ni, s, occ, need - 1);
			iso_mig_give(g->model, &occ[j], p, st);
			if (ok)
				return true;
		}
	}
	return false;
}

/* Tenants with members on node `ni`, from the live allocations alone. */
static int bf_tenants(const struct cluster *c, int ni, const struct iso_allocation *live,
                      int n_live, int64_t tenant, bool *present)
{
	int64_t seen[64];
	int n = 0;

	*present = false;
	for (int i = 0; i < n_live; i++) {
		bool here = false;
		for (int k = 0; k < live[i].n_members; k++)
			here |= strcmp(live[i].placed[k].node, c->nodes[ni].name) == 0;
		if (!here)
			continue;
		*present |= live[i].tenant_id == tenant;
		bool dup = false;
		for (int t = 0; t < n; t++)
			dup |= seen[t] == live[i].tenant_id;
		if (!dup && n < 64)
			seen[n++] = live[i].tenant_id;
	}
	return n;
}

static bool bf_node(const struct cluster *c, int ni, const struct iso_allocation *a,
                    const struct iso_allocation *live, int n_live)
{
	const struct iso_node *node = &c->nodes[ni];
	const struct iso_node_usage *u = &c->cs.usage[ni];
	const struct iso_shape *s = &a->shape;
	struct iso_gpu_occupancy occ[MAXG];
	int free_whole = 0;

	if (c->cs.sched[ni] != ISO_NODE_SCHEDULABLE || (s->pool[0] && strcmp(s->pool, node->pool)))
		return false;
	if (u->cpus_used + s->cpus > node->cpus ||
	    u->memory_mib_used + s->memory_mib > node->memory_mib)
		return false;
	if (c->inv.fabric.type != ISO_FABRIC_ETHERNET && node->has_port) {
		int limit = node->port.n_vfs > 0 ? node->port.n_vfs : 1;
		bool present;
		int tenants = bf_tenants(c, ni, live, n_live, a->tenant_id, &present);
		if (!present && tenants >= limit)
			return false;
	}
	if (s->gpu_count == 0)
		return true;
	if (s->whole) {
		for (int j = 0; j < node->n_gpus; j++)
			if ((!s->gpu_model[0] ||
			     !strcasecmp(s->gpu_model, node->gpus[j].model->name)) &&
			    iso_gpu_occupancy_empty(node->gpus[j].model, &u->gpus[j]))
				free_whole++;
		return free_whole >= s->gpu_count;
	}
	if (node->n_gpus == 0)
		return false;
	memcpy(occ, u->gpus, (size_t)node->n_gpus * sizeof(occ[0]));
	return bf_gpus(c, ni, s, occ, s->gpu_count);
}

static bool bf_feasible(const struct cluster *c, const struct iso_allocation *a,
                        const struct iso_allocation *live, int n_live)
{
	for (int i = 0; i < c->inv.n_nodes; i++)
		if (bf_node(c, i, a, live, n_live))
			return true;
	return false;
}

/* Rebuilding from the live allocations gives the same occupancy: nothing
 * is double-booked or lost. */
static void check_rebuild(struct cluster *c, struct iso_allocation *live, int n_live)
{
	struct iso_cluster_state fresh;
	struct iso_error err;

	assert_int_equal(iso_cluster_state_init(&fresh, &c->inv), 0);
	for (int i = 0; i < n_live; i++)
		if (iso_cluster_state_take(&fresh, &live[i], &err) != 0)
			fail_msg("live allocation %d no longer takes: %s", i, err.message);
	for (int i = 0; i < c->inv.n_nodes; i++) {
		assert_int_equal(fresh.usage[i].cpus_used, c->cs.usage[i].cpus_used);
		assert_int_equal(fresh.usage[i].members, c->cs.usage[i].members);
		assert_int_equal(fresh.usage[i].tenants, c->cs.usage[i].tenants);
		assert_int_equal(fresh.usage[i].vfs_used, c->cs.usage[i].vfs_used);
		for (int j = 0; j < c->nodes[i].n_gpus; j++)
			assert_int_equal(memcmp(&fresh.usage[i].gpus[j], &c->cs.usage[i].gpus[j],
			                        sizeof(fresh.usage[i].gpus[j])),
			                 0);
	}
	iso_cluster_state_free(&fresh);
}

static void property_run(uint32_t seed, enum iso_fabric_type fabric, int *placed, int *refused)
{
	struct cluster *c = cluster_new(fabric, mixed, ISO_ARRAY_SIZE(mixed));
	struct iso_allocation live[48];
	int n_live = 0;
	uint32_t x = seed;

	for (int step = 0; step < 400; step++) {
		uint32_t op = rng_next(&x) % 10;

		if (op < 6 && n_live < (int)ISO_ARRAY_SIZE(live)) {
			int members;
			struct iso_allocation *a = &live[n_live];
			bool feasible;

			*a = random_req(&x, &members);
			members = 1; /* the single-decision problem */
			feasible = bf_feasible(c, a, live, n_live);
			if (place(c, a, members) == 0) {
				assert_true(feasible); /* it placed something real */
				n_live++;
				(*placed)++;
			} else {
				if (feasible)
					fail_msg(
					    "seed %u step %d: engine refused %s x%d (tenant %lld) "
					    "that brute force places",
					    seed, step, a->shape.whole ? "whole" : a->shape.profile,
					    a->shape.gpu_count, (long long)a->tenant_id);
				iso_allocation_clear(a);
				(*refused)++;
			}
		} else if (op < 9 && n_live > 0) {
			int i = (int)(rng_next(&x) % (uint32_t)n_live);
			release(c, &live[i]);
			live[i] = live[--n_live];
		} else {
			int i = (int)(rng_next(&x) % (uint32_t)c->inv.n_nodes);
			c->cs.sched[i] = c->cs.sched[i] == ISO_NODE_SCHEDULABLE
			                     ? ISO_NODE_CORDONED
			                     : ISO_NODE_SCHEDULABLE;
		}
		if (step % 20 == 0)
			check_rebuild(c, live, n_live);
	}
	check_rebuild(c, live, n_live);
	while (n_live > 0)
		release(c, &live[--n_live]);
	for (int i = 0; i < c->inv.n_nodes; i++) {
		assert_int_equal(c->cs.usage[i].members, 0);
		assert_int_equal(c->cs.usage[i].tenants, 0);
	}
	cluster_free(c);
}

static void test_property_vs_brute_force(void **state)
{
	(void)state;
	int placed = 0, refused = 0;

	for (uint32_t seed = 1; seed <= 40; seed++) {
		property_run(seed * 2654435761u, ISO_FABRIC_INFINIBAND, &placed, &refused);
		property_run(seed * 40503u + 7, ISO_FABRIC_ETHERNET, &placed, &refused);
	}
	/* Both outcomes were exercised many times. */
	assert_true(placed > 5000);
	assert_true(refused > 1000);
}

/* Multi-member requests and growth, checked for consistency only (the
 * engine places members one decision at a time). */
static void test_random_multi_member(void **state)
{
	(void)state;
	struct cluster *c = cluster_new(ISO_FABRIC_INFINIBAND, mixed, ISO_ARRAY_SIZE(mixed));
	struct iso_allocation live[48];
	int n_live = 0, grown = 0;
	uint32_t x = 0xdecafbadu;

	for (int step = 0; step < 3000; step++) {
		uint32_t op = rng_next(&x) % 10;

		if (op < 5 && n_live < (int)ISO_ARRAY_SIZE(live)) {
			int members;
			live[n_live] = random_req(&x, &members);
			if (place(c, &live[n_live], members + (int)(rng_next(&x) % 2)) == 0)
				n_live++;
			else
				iso_allocation_clear(&live[n_live]);
		} else if (op < 7 && n_live > 0) {
			struct iso_allocation *a = &live[rng_next(&x) % (uint32_t)n_live];
			int before = a->n_members;
			if (place(c, a, before + 1) == 0)
				grown++;
			else
				assert_int_equal(a->n_members, before);
		} else if (n_live > 0) {
			int i = (int)(rng_next(&x) % (uint32_t)n_live);
			release(c, &live[i]);
			live[i] = live[--n_live];
		}
		if (step % 50 == 0)
			check_rebuild(c, live, n_live);
	}
	assert_true(grown > 50);
	while (n_live > 0)
		release(c, &live[--n_live]);
	cluster_free(c);
}

/* Occupancy written directly (not through take/give) is picked up again by
 * iso_cluster_state_reindex(). */
static void test_reindex(void **state)
{
	(void)state;
	const struct node_spec one[] = {{"n1", .model = "h100-80gb", .n_gpus = 1, .mig = 1}};
	struct cluster *c = cluster_new(ISO_FABRIC_ETHERNET, one, 1);
	struct iso_error err;

	c->cs.usage[0].gpus[0].whole = true;
	c->cs.usage[0].gpus[0].free_mask = 0;
	assert_int_equal(iso_cluster_state_check(&c->cs, &err), -EIO);
	iso_cluster_state_reindex(&c->cs);
	check_state(c);
	iso_gpu_occupancy_init(&c->cs.usage[0].gpus[0], c->gpus[0][0].model);
	iso_cluster_state_reindex(&c->cs);
	check_state(c);
	cluster_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_3g_then_4g),
	    cmocka_unit_test(test_1g_mix_a100_40),
	    cmocka_unit_test(test_empty_gpu_choices),
	    cmocka_unit_test(test_teardown_holes),
	    cmocka_unit_test(test_packing_and_whole),
	    cmocka_unit_test(test_member_instances),
	    cmocka_unit_test(test_mix_learning),
	    cmocka_unit_test(test_strand),
	    cmocka_unit_test(test_strand_scarcity),
	    cmocka_unit_test(test_determinism),
	    cmocka_unit_test(test_vf_one_per_tenant),
	    cmocka_unit_test(test_vf_limits),
	    cmocka_unit_test(test_vf_exclusive_and_portless),
	    cmocka_unit_test(test_constraints),
	    cmocka_unit_test(test_member_nodes),
	    cmocka_unit_test(test_property_vs_brute_force),
	    cmocka_unit_test(test_random_multi_member),
	    cmocka_unit_test(test_reindex),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

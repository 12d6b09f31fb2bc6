/* test_placement.c: the cluster occupancy state (take/give, all or nothing),
 * shape validation and first-fit placement, on a small inventory built in
 * code so that these tests do not depend on the YAML loader. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "isostack/sched.h"

/* ---- fixture ----
 * gpu-a01  pool gpu    16 cpus 128 GiB  GPUs 0,1 h100-80gb, MIG on
 * gpu-a02  pool gpu    16 cpus 128 GiB  GPUs 0,1 h100-80gb, MIG off
 * gpu-b01  pool gpu-b  16 cpus 128 GiB  GPUs 1,0 a100-80gb, MIG on (listed out of index order)
 * cpu-c01  pool cpu    64 cpus 512 GiB  no GPUs */
enum { A01, A02, B01, C01, N_NODES };

struct fixture {
	struct iso_inventory inv;
	struct iso_pool pools[3];
	struct iso_node nodes[N_NODES];
	struct iso_gpu gpus[N_NODES][2];
	struct iso_cluster_state cs;
};

static void add_node(struct fixture *f, int i, const char *name, const char *pool, int cpus,
                     int64_t mib, const char *model, bool mig, const int *indexes, int n_gpus)
{
	struct iso_node *n = &f->nodes[i];

	iso_strlcpy(n->name, name, sizeof(n->name));
	iso_strlcpy(n->pool, pool, sizeof(n->pool));
	n->cpus = cpus;
	n->memory_mib = mib;
	n->n_gpus = n_gpus;
	n->gpus = n_gpus ? f->gpus[i] : NULL;
	n->sched = ISO_NODE_SCHEDULABLE;
	for (int j = 0; j < n_gpus; j++) {
		f->gpus[i][j].index = indexes[j];
		f->gpus[i][j].model = iso_gpu_model_find(model);
		f->gpus[i][j].mig_enabled = mig;
		assert_non_null(f->gpus[i][j].model);
	}
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const int in_order[] = {0, 1}, reversed[] = {1, 0};

	assert_non_null(f);
	iso_strlcpy(f->pools[0].name, "gpu", sizeof(f->pools[0].name));
	iso_strlcpy(f->pools[1].name, "gpu-b", sizeof(f->pools[1].name));
	iso_strlcpy(f->pools[2].name, "cpu", sizeof(f->pools[2].name));
	f->inv.n_pools = 3;
	f->inv.pools = f->pools;
	add_node(f, A01, "gpu-a01", "gpu", 16, 131072, "h100-80gb", true, in_order, 2);
	add_node(f, A02, "gpu-a02", "gpu", 16, 131072, "h100-80gb", false, in_order, 2);
	add_node(f, B01, "gpu-b01", "gpu-b", 16, 131072, "a100-80gb", true, reversed, 2);
	add_node(f, C01, "cpu-c01", "cpu", 64, 524288, NULL, false, NULL, 0);
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

/* ---- helpers ---- */

/* A byte-for-byte copy of the whole occupancy picture. */
struct snapshot {
	struct iso_node_usage usage[N_NODES];
	struct iso_gpu_occupancy gpus[N_NODES][2];
	enum iso_node_sched sched[N_NODES];
};

static void snap(const struct fixture *f, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < N_NODES; i++) {
		memcpy(&s->usage[i], &f->cs.usage[i], sizeof(s->usage[i]));
		s->usage[i].gpus = NULL;
		if (f->nodes[i].n_gpus)
			memcpy(s->gpus[i], f->cs.usage[i].gpus,
			       (size_t)f->nodes[i].n_gpus * sizeof(s->gpus[i][0]));
		s->sched[i] = f->cs.sched[i];
	}
}

static bool same_as(const struct fixture *f, const struct snapshot *s)
{
	struct snapshot now;
	snap(f, &now);
	return memcmp(&now, s, sizeof(now)) == 0;
}

static struct iso_shape mig_shape(const char *profile, int count, int cpus, int64_t mib)
{
	struct iso_shape s = {.gpu_count = count, .cpus = cpus, .memory_mib = mib};
	iso_strlcpy(s.profile, profile, sizeof(s.profile));
	return s;
}

static struct iso_shape whole_shape(int count)
{
	return (struct iso_shape){.whole = true, .gpu_count = count};
}

static struct iso_allocation alloc_of(struct iso_shape shape)
{
	struct iso_allocation a = {.shape = shape};
	iso_strlcpy(a.id, "a-test", sizeof(a.id));
	return a;
}

/* The policy the tests below drive: first-fit, except where a test runs
 * again under the isostack engine. */
static const struct iso_placer *placer_under_test = &iso_placer_first_fit;

static int place(struct fixture *f, struct iso_allocation *a, int want, struct iso_error *err)
{
	return iso_placer_place(placer_under_test, &f->cs, a, want, err);
}

static void expect_slot(const struct iso_allocation *a, int si, int member, const char *node,
                        int gpu, const char *profile, int start, int width)
{
	const struct iso_slot *s = &a->slots[si];

	assert_true(si < a->n_slots);
	assert_int_equal(s->member, member);
	assert_string_equal(a->placed[member].node, node);
	assert_int_equal(a->placed[member].index, member);
	assert_int_equal(s->gpu, gpu);
	assert_int_equal(s->whole, profile == NULL);
	assert_string_equal(s->profile, profile ? profile : "");
	assert_int_equal(s->start, start);
	assert_int_equal(s->width, width);
}

/* Adds a hand-written member/slot to an allocation. */
static void add_member(struct iso_allocation *a, const char *node)
{
	a->placed = realloc(a->placed, (size_t)(a->n_members + 1) * sizeof(*a->placed));
	assert_non_null(a->placed);
	a->placed[a->n_members].index = a->n_members;
	iso_strlcpy(a->placed[a->n_members].node, node, sizeof(a->placed[0].node));
	a->n_members++;
}

static void add_slot(struct iso_allocation *a, int member, int gpu, const char *profile, int start,
                     int width)
{
	struct iso_slot *s;

	a->slots = realloc(a->slots, (size_t)(a->n_slots + 1) * sizeof(*a->slots));
	assert_non_null(a->slots);
	s = &a->slots[a->n_slots++];
	memset(s, 0, sizeof(*s));
	s->member = member;
	s->gpu = gpu;
	s->whole = profile == NULL;
	iso_strlcpy(s->profile, profile ? profile : "", sizeof(s->profile));
	s->start = start;
	s->width = width;
}

/* ---- cluster state ---- */

static void test_state_init(void **state)
{
	struct fixture *f = *state;
	struct iso_inventory bad;
	struct iso_node node;
	struct iso_gpu gpu = {.index = 0, .model = NULL};
	struct iso_cluster_state cs;

	assert_int_equal(iso_cluster_state_node_index(&f->cs, "gpu-b01"), B01);
	assert_int_equal(iso_cluster_state_node_index(&f->cs, "cpu-c01"), C01);
	assert_int_equal(iso_cluster_state_node_index(&f->cs, "gpu-z99"), -1);
	assert_int_equal(iso_cluster_state_node_index(&f->cs, ""), -1);
	for (int i = 0; i < N_NODES; i++) {
		assert_int_equal(f->cs.sched[i], ISO_NODE_SCHEDULABLE);
		assert_int_equal(f->cs.usage[i].cpus_used, 0);
		for (int j = 0; j < f->nodes[i].n_gpus; j++)
			assert_true(
			    iso_gpu_occupancy_empty(f->gpus[i][j].model, &f->cs.usage[i].gpus[j]));
	}

	/* A GPU without a model cannot be tracked. */
	memset(&node, 0, sizeof(node));
	iso_strlcpy(node.name, "n", sizeof(node.name));
	node.n_gpus = 1;
	node.gpus = &gpu;
	bad = (struct iso_inventory){.n_nodes = 1, .nodes = &node};
	assert_int_equal(iso_cluster_state_init(&cs, &bad), -EINVAL);
	assert_null(cs.usage);
	iso_cluster_state_free(&cs); /* safe on a failed init */

	/* The sched state starts from the inventory's. */
	node.n_gpus = 0;
	node.sched = ISO_NODE_DRAINING;
	assert_int_equal(iso_cluster_state_init(&cs, &bad), 0);
	assert_int_equal(cs.sched[0], ISO_NODE_DRAINING);
	iso_cluster_state_free(&cs);
}

static void test_take_give_roundtrip(void **state)
{
	struct fixture *f = *state;
	struct snapshot empty, after_one;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("3g.40gb", 2, 4, 1024));
	_cleanup_(iso_allocation_clearp) struct iso_allocation b = alloc_of(whole_shape(1));
	struct iso_error err;

	snap(f, &empty);
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 0, "3g.40gb", 4, 4);
	add_slot(&a, 0, 1, "3g.40gb", 0, 4);
	add_member(&a, "gpu-b01");
	add_slot(&a, 1, 0, "3g.40gb", 0, 4);
	add_slot(&a, 1, 0, "3g.40gb", 4, 4);
	assert_int_equal(iso_cluster_state_take(&f->cs, &a, &err), 0);
	assert_int_equal(f->cs.usage[A01].cpus_used, 4);
	assert_int_equal(f->cs.usage[A01].memory_mib_used, 1024);
	assert_int_equal(f->cs.usage[A01].members, 1);
	assert_int_equal(f->cs.usage[A01].gpus[0].free_mask, 0x0f);
	assert_int_equal(f->cs.usage[A01].gpus[0].compute_used, 3);
	assert_int_equal(f->cs.usage[A01].gpus[1].free_mask, 0xf0);
	/* gpu-b01's GPU index 0 is its second entry. */
	assert_int_equal(f->cs.usage[B01].gpus[1].free_mask, 0x00);
	assert_int_equal(f->cs.usage[B01].gpus[0].free_mask, 0xff);
	assert_int_equal(f->cs.usage[B01].gpus[1].count[4], 2);
	snap(f, &after_one);

	b.shape.cpus = 2;
	add_member(&b, "gpu-a02");
	add_slot(&b, 0, 1, NULL, 0, 8);
	assert_int_equal(iso_cluster_state_take(&f->cs, &b, &err), 0);
	assert_true(f->cs.usage[A02].gpus[1].whole);
	assert_int_equal(f->cs.usage[A02].gpus[1].free_mask, 0);
	assert_int_equal(f->cs.usage[A02].gpus[1].compute_used, 7);
	assert_int_equal(f->cs.usage[A02].cpus_used, 2);

	iso_cluster_state_give(&f->cs, &b);
	assert_true(same_as(f, &after_one));
	iso_cluster_state_give(&f->cs, &a);
	assert_true(same_as(f, &empty));

	/* Give in the other order too. */
	assert_int_equal(iso_cluster_state_take(&f->cs, &a, &err), 0);
	assert_int_equal(iso_cluster_state_take(&f->cs, &b, &err), 0);
	iso_cluster_state_give(&f->cs, &a);
	iso_cluster_state_give(&f->cs, &b);
	assert_true(same_as(f, &empty));

	/* A second give of what is no longer held changes nothing. */
	iso_cluster_state_give(&f->cs, &a);
	iso_cluster_state_give(&f->cs, &b);
	assert_true(same_as(f, &empty));
}

static void test_take_give_members(void **state)
{
	struct fixture *f = *state;
	struct snapshot empty, two;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("1g.10gb", 1, 1, 10));
	struct iso_error err;

	snap(f, &empty);
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 0, "1g.10gb", 0, 1);
	add_member(&a, "gpu-a01");
	add_slot(&a, 1, 0, "1g.10gb", 1, 1);
	assert_int_equal(iso_cluster_state_take(&f->cs, &a, &err), 0);
	snap(f, &two);

	/* Grow by one member on another node; slots may come in any order. */
	add_member(&a, "gpu-b01");
	add_slot(&a, 2, 1, "1g.10gb", 0, 1);
	assert_int_equal(iso_cluster_state_take_members(&f->cs, &a, 2, &err), 0);
	assert_int_equal(f->cs.usage[A01].members, 2);
	assert_int_equal(f->cs.usage[B01].members, 1);
	assert_int_equal(f->cs.usage[B01].gpus[0].free_mask, 0xfe);
	/* Taking the same members again overlaps. */
	assert_int_equal(iso_cluster_state_take_members(&f->cs, &a, 2, &err), -ENOSPC);

	iso_cluster_state_give_members(&f->cs, &a, 2);
	assert_true(same_as(f, &two));
	/* A member range past the end gives nothing. */
	iso_cluster_state_give_members(&f->cs, &a, 3);
	assert_true(same_as(f, &two));
	assert_int_equal(iso_cluster_state_take_members(&f->cs, &a, 4, &err), -EINVAL);
	assert_int_equal(iso_cluster_state_take_members(&f->cs, &a, -1, &err), -EINVAL);

	a.n_members = 2;
	a.n_slots = 2;
	iso_cluster_state_give(&f->cs, &a);
	assert_true(same_as(f, &empty));
}

/* The on_member hook (the node agents' desired state follows it): one call
 * per member a take or give changed, with its node, none for a take that
 * fails. */
struct member_call {
	int node, member;
	bool taken;
};
struct member_calls {
	struct member_call c[8];
	int n;
};

static void record_member(void *arg, int node, const struct iso_allocation *a, int member,
                          bool taken)
{
	struct member_calls *mc = arg;

	assert_string_equal(a->id, "a-test");
	assert_true(mc->n < 8);
	mc->c[mc->n++] = (struct member_call){node, member, taken};
}

static void expect_calls(struct member_calls *mc, const struct member_call *want, int n)
{
	assert_int_equal(mc->n, n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(mc->c[i].node, want[i].node);
		assert_int_equal(mc->c[i].member, want[i].member);
		assert_int_equal(mc->c[i].taken, want[i].taken);
	}
	mc->n = 0;
}

static void test_on_member_hook(void **state)
{
	struct fixture *f = *state;
	struct member_calls mc = {0};
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("3g.40gb", 1, 1, 10));
	struct iso_error err;

	f->cs.on_member = record_member;
	f->cs.on_member_arg = &mc;
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 0, "3g.40gb", 0, 4);
	add_member(&a, "gpu-a01");
	add_slot(&a, 1, 0, "3g.40gb", 4, 4);
	assert_int_equal(iso_cluster_state_take(&f->cs, &a, &err), 0);
	expect_calls(&mc, (struct member_call[]){{A01, 0, true}, {A01, 1, true}}, 2);
	add_member(&a, "gpu-b01");
	add_slot(&a, 2, 1, "3g.40gb", 0, 4);
	assert_int_equal(iso_cluster_state_take_members(&f->cs, &a, 2, &err), 0);
	expect_calls(&mc, (struct member_call[]){{B01, 2, true}}, 1);
	/* a take that fails half-way (the same slots again) tells nothing */
	assert_int_equal(iso_cluster_state_take_members(&f->cs, &a, 2, &err), -ENOSPC);
	assert_int_equal(iso_cluster_state_take(&f->cs, &a, &err), -ENOSPC);
	assert_int_equal(mc.n, 0);
	iso_cluster_state_give_members(&f->cs, &a, 2);
	expect_calls(&mc, (struct member_call[]){{B01, 2, false}}, 1);
	a.n_members = 2;
	a.n_slots = 2;
	iso_cluster_state_give(&f->cs, &a);
	expect_calls(&mc, (struct member_call[]){{A01, 0, false}, {A01, 1, false}}, 2);
	f->cs.on_member = NULL;
}

/* An unreachable node (its agent silent past the lease) is placed on like a
 * cordoned one by every policy, while its cordon state stays as it is. */
static void test_unreachable_like_cordoned(void **state)
{
	struct fixture *f = *state;
	bool unreachable[N_NODES] = {[A01] = true};
	const char *const policies[] = {"first-fit", "best-fit", "isostack"};

	f->cs.unreachable = unreachable;
	for (size_t p = 0; p < ISO_ARRAY_SIZE(policies); p++) {
		_cleanup_(iso_allocation_clearp) struct iso_allocation a =
		    alloc_of(mig_shape("1g.10gb", 1, 0, 0));
		const struct iso_placer *pl = iso_placer_find(policies[p]);
		struct iso_error err;

		assert_non_null(pl);
		assert_int_equal(iso_placer_place(pl, &f->cs, &a, 1, &err), 0);
		assert_string_equal(a.placed[0].node, "gpu-b01");
		assert_int_equal(f->cs.sched[A01], ISO_NODE_SCHEDULABLE);
		assert_false(iso_cluster_state_node_open(&f->cs, A01));
		assert_true(iso_cluster_state_node_open(&f->cs, B01));
		iso_cluster_state_give(&f->cs, &a);
	}
	f->cs.unreachable = NULL;
	assert_true(iso_cluster_state_node_open(&f->cs, A01));
}

/* Every rejected take leaves the state exactly as it was, including takes
 * that fail after part of the allocation had been applied. */
static void expect_take_fails(struct fixture *f, struct iso_allocation *a, int rc,
                              enum iso_errcode code, const char *field)
{
	struct snapshot before;
	struct iso_error err = {0};

	snap(f, &before);
	assert_int_equal(iso_cluster_state_take(&f->cs, a, &err), rc);
	assert_int_equal(err.code, code);
	assert_string_equal(err.field, field);
	assert_true(err.message[0] != '\0');
	assert_true(same_as(f, &before));
	iso_allocation_clear(a);
}

static void test_take_rejects(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation held =
	    alloc_of(mig_shape("3g.40gb", 1, 8, 65536));
	struct iso_allocation a;
	struct iso_error err;

	add_member(&held, "gpu-a01");
	add_slot(&held, 0, 0, "3g.40gb", 0, 4);
	assert_int_equal(iso_cluster_state_take(&f->cs, &held, &err), 0);

	/* Overlap with what is held (after a first member and slot succeeded). */
	a = alloc_of(mig_shape("1g.10gb", 1, 0, 0));
	add_member(&a, "gpu-b01");
	add_slot(&a, 0, 0, "1g.10gb", 0, 1);
	add_member(&a, "gpu-a01");
	add_slot(&a, 1, 0, "1g.10gb", 3, 1);
	expect_take_fails(f, &a, -ENOSPC, ISO_E_NO_CAPACITY, "placement[1]");

	/* Overlap inside one allocation. */
	a = alloc_of(mig_shape("4g.40gb", 2, 0, 0));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 1, "4g.40gb", 0, 4);
	add_slot(&a, 0, 1, "4g.40gb", 0, 4);
	expect_take_fails(f, &a, -ENOSPC, ISO_E_NO_CAPACITY, "placement[1]");

	/* 4g beside the held 3g@0: only 3g@4 could join it. */
	a = alloc_of(mig_shape("4g.40gb", 1, 0, 0));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 0, "4g.40gb", 0, 4);
	expect_take_fails(f, &a, -ENOSPC, ISO_E_NO_CAPACITY, "placement[0]");

	/* Unknown node. */
	a = alloc_of(mig_shape("1g.10gb", 1, 0, 0));
	add_member(&a, "gpu-a01");
	add_member(&a, "gpu-z99");
	add_slot(&a, 0, 1, "1g.10gb", 0, 1);
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "nodes[1].node");

	/* GPU index the node does not have. */
	a = alloc_of(mig_shape("1g.10gb", 1, 0, 0));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 2, "1g.10gb", 0, 1);
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "placement[0].gpu");

	/* Profile of another model. */
	a = alloc_of(mig_shape("1g.5gb", 1, 0, 0));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 1, "1g.5gb", 0, 1);
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "placement[0].profile");

	/* Start not allowed, width wrong. */
	a = alloc_of(mig_shape("3g.40gb", 1, 0, 0));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 1, "3g.40gb", 2, 4);
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "placement[0].start");
	a = alloc_of(mig_shape("3g.40gb", 1, 0, 0));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 1, "3g.40gb", 0, 3);
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "placement[0].width");

	/* MIG instance on a GPU without MIG; whole GPU that is partly used or
	 * described wrongly. */
	a = alloc_of(mig_shape("1g.10gb", 1, 0, 0));
	add_member(&a, "gpu-a02");
	add_slot(&a, 0, 0, "1g.10gb", 0, 1);
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "placement[0].gpu");
	a = alloc_of(whole_shape(1));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 0, NULL, 0, 8);
	expect_take_fails(f, &a, -ENOSPC, ISO_E_NO_CAPACITY, "placement[0].gpu");
	a = alloc_of(whole_shape(1));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 1, NULL, 0, 4);
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "placement[0]");

	/* cpus and memory over the node's capacity, on the second member. */
	a = alloc_of(mig_shape("", 0, 8, 0));
	add_member(&a, "gpu-a02");
	add_member(&a, "gpu-a01");
	add_member(&a, "gpu-a01");
	expect_take_fails(f, &a, -ENOSPC, ISO_E_NO_CAPACITY, "cpus");
	a = alloc_of(mig_shape("", 0, 0, 65537));
	add_member(&a, "gpu-a02");
	add_member(&a, "gpu-a01");
	expect_take_fails(f, &a, -ENOSPC, ISO_E_NO_CAPACITY, "memory_mib");

	/* Malformed: members not dense, slot of no member, negative cpus. */
	a = alloc_of(mig_shape("1g.10gb", 1, 0, 0));
	add_member(&a, "gpu-a01");
	a.placed[0].index = 1;
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "nodes[0].member");
	a = alloc_of(mig_shape("1g.10gb", 1, 0, 0));
	add_member(&a, "gpu-b01");
	add_slot(&a, 0, 0, "1g.10gb", 0, 1);
	add_slot(&a, 1, 0, "1g.10gb", 1, 1);
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "placement[1].member");
	a = alloc_of(mig_shape("", 0, -1, 0));
	add_member(&a, "gpu-b01");
	expect_take_fails(f, &a, -EINVAL, ISO_E_INVALID, "cpus");

	/* The +me slot and max count are enforced by take as well. */
	a = alloc_of(mig_shape("1g.10gb+me", 2, 0, 0));
	add_member(&a, "gpu-a01");
	add_slot(&a, 0, 1, "1g.10gb+me", 0, 1);
	add_slot(&a, 0, 1, "1g.10gb+me", 1, 1);
	expect_take_fails(f, &a, -ENOSPC, ISO_E_NO_CAPACITY, "placement[1]");

	iso_cluster_state_give(&f->cs, &held);
}

/* ---- first-fit ---- */

static void test_first_fit_mig(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("3g.40gb", 1, 2, 1024));
	struct snapshot empty;
	struct iso_error err;

	snap(f, &empty);
	assert_int_equal(place(f, &a, 4, &err), 0);
	assert_int_equal(a.n_members, 4);
	assert_int_equal(a.n_slots, 4);
	expect_slot(&a, 0, 0, "gpu-a01", 0, "3g.40gb", 0, 4);
	expect_slot(&a, 1, 1, "gpu-a01", 0, "3g.40gb", 4, 4);
	expect_slot(&a, 2, 2, "gpu-a01", 1, "3g.40gb", 0, 4);
	expect_slot(&a, 3, 3, "gpu-a01", 1, "3g.40gb", 4, 4);
	assert_int_equal(f->cs.usage[A01].members, 4);
	assert_int_equal(f->cs.usage[A01].cpus_used, 8);

	/* gpu-a01 is full; gpu-a02 has no MIG; gpu-b01's lowest GPU index is its
	 * second entry. */
	assert_int_equal(place(f, &a, 5, &err), 0);
	expect_slot(&a, 4, 4, "gpu-b01", 0, "3g.40gb", 0, 4);
	assert_int_equal(f->cs.usage[B01].gpus[1].free_mask, 0xf0);

	/* Placing nothing more is a no-op; fewer members is refused. */
	assert_int_equal(place(f, &a, 5, &err), 0);
	assert_int_equal(a.n_members, 5);
	assert_int_equal(place(f, &a, 3, &err), -EINVAL);
	assert_int_equal(a.n_members, 5);

	iso_cluster_state_give(&f->cs, &a);
	assert_true(same_as(f, &empty));
}

/* A member's instances may share a GPU; a member that no longer fits on the
 * first node moves whole to the next. */
static void test_first_fit_multi_instance(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("3g.40gb", 3, 0, 0));
	struct iso_error err;

	assert_int_equal(place(f, &a, 2, &err), 0);
	assert_int_equal(a.n_slots, 6);
	expect_slot(&a, 0, 0, "gpu-a01", 0, "3g.40gb", 0, 4);
	expect_slot(&a, 1, 0, "gpu-a01", 0, "3g.40gb", 4, 4);
	expect_slot(&a, 2, 0, "gpu-a01", 1, "3g.40gb", 0, 4);
	/* One 3g is left on gpu-a01; member 1 needs three. */
	expect_slot(&a, 3, 1, "gpu-b01", 0, "3g.40gb", 0, 4);
	expect_slot(&a, 4, 1, "gpu-b01", 0, "3g.40gb", 4, 4);
	expect_slot(&a, 5, 1, "gpu-b01", 1, "3g.40gb", 0, 4);
	assert_int_equal(f->cs.usage[A01].gpus[1].free_mask, 0xf0);
	iso_cluster_state_give(&f->cs, &a);
}

/* Lowest start per GPU, fragments filled before the next GPU. */
static void test_first_fit_lowest_start(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation big =
	    alloc_of(mig_shape("4g.40gb", 1, 0, 0));
	_cleanup_(iso_allocation_clearp) struct iso_allocation small =
	    alloc_of(mig_shape("2g.20gb", 1, 0, 0));
	_cleanup_(iso_allocation_clearp) struct iso_allocation one =
	    alloc_of(mig_shape("1g.10gb", 1, 0, 0));
	struct iso_error err;

	assert_int_equal(place(f, &big, 1, &err), 0);
	expect_slot(&big, 0, 0, "gpu-a01", 0, "4g.40gb", 0, 4);
	assert_int_equal(place(f, &small, 3, &err), 0);
	expect_slot(&small, 0, 0, "gpu-a01", 0, "2g.20gb", 4, 2);
	/* 2g cannot start at 6; next GPU. */
	expect_slot(&small, 1, 1, "gpu-a01", 1, "2g.20gb", 0, 2);
	expect_slot(&small, 2, 2, "gpu-a01", 1, "2g.20gb", 2, 2);
	assert_int_equal(place(f, &one, 1, &err), 0);
	expect_slot(&one, 0, 0, "gpu-a01", 0, "1g.10gb", 6, 1);
	iso_cluster_state_give(&f->cs, &one);
	iso_cluster_state_give(&f->cs, &small);
	iso_cluster_state_give(&f->cs, &big);
}

static void test_first_fit_whole(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation mig =
	    alloc_of(mig_shape("1g.10gb", 1, 0, 0));
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = alloc_of(whole_shape(2));
	_cleanup_(iso_allocation_clearp) struct iso_allocation b = alloc_of(whole_shape(1));
	_cleanup_(iso_allocation_clearp) struct iso_allocation c = alloc_of(whole_shape(1));
	struct snapshot before;
	struct iso_error err;

	/* One MIG instance on gpu-a01 GPU 0: that GPU is no longer whole-free. */
	assert_int_equal(place(f, &mig, 1, &err), 0);
	expect_slot(&mig, 0, 0, "gpu-a01", 0, "1g.10gb", 0, 1);

	assert_int_equal(place(f, &a, 2, &err), 0);
	expect_slot(&a, 0, 0, "gpu-a02", 0, NULL, 0, 8);
	expect_slot(&a, 1, 0, "gpu-a02", 1, NULL, 0, 8);
	expect_slot(&a, 2, 1, "gpu-b01", 0, NULL, 0, 8);
	expect_slot(&a, 3, 1, "gpu-b01", 1, NULL, 0, 8);
	assert_true(f->cs.usage[B01].gpus[0].whole);

	/* A single whole GPU: gpu-a01's free GPU 1 (MIG mode does not matter). */
	assert_int_equal(place(f, &b, 1, &err), 0);
	expect_slot(&b, 0, 0, "gpu-a01", 1, NULL, 0, 8);
	assert_int_equal(iso_mig_first_start(f->gpus[A01][1].model, &f->cs.usage[A01].gpus[1],
	                                     &f->gpus[A01][1].model->profiles[0]),
	                 -1);

	/* Nothing whole is left. */
	snap(f, &before);
	assert_int_equal(place(f, &c, 1, &err), -ENOSPC);
	assert_int_equal(err.code, ISO_E_NO_CAPACITY);
	assert_non_null(strstr(err.message, "whole GPU"));
	assert_true(same_as(f, &before));
	assert_int_equal(c.n_members, 0);
	assert_null(c.placed);

	iso_cluster_state_give(&f->cs, &b);
	iso_cluster_state_give(&f->cs, &a);
	iso_cluster_state_give(&f->cs, &mig);
}

static void test_first_fit_model(void **state)
{
	struct fixture *f = *state;
	struct iso_shape s = whole_shape(1);
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	_cleanup_(iso_allocation_clearp) struct iso_allocation b = {0};
	struct iso_error err;

	iso_strlcpy(s.gpu_model, "a100-80gb", sizeof(s.gpu_model));
	a = alloc_of(s);
	assert_int_equal(place(f, &a, 1, &err), 0);
	expect_slot(&a, 0, 0, "gpu-b01", 0, NULL, 0, 8);

	/* 1g.10gb exists on both models; the constraint keeps it on H100. */
	s = mig_shape("1g.10gb", 1, 0, 0);
	iso_strlcpy(s.gpu_model, "H100-80GB", sizeof(s.gpu_model));
	b = alloc_of(s);
	f->cs.sched[A01] = ISO_NODE_CORDONED;
	assert_int_equal(place(f, &b, 1, &err), -ENOSPC);
	assert_non_null(strstr(err.message, "1g.10gb"));
	f->cs.sched[A01] = ISO_NODE_SCHEDULABLE;
	assert_int_equal(place(f, &b, 1, &err), 0);
	expect_slot(&b, 0, 0, "gpu-a01", 0, "1g.10gb", 0, 1);
	iso_cluster_state_give(&f->cs, &b);
	iso_cluster_state_give(&f->cs, &a);
}

static void test_first_fit_cordon(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("7g.80gb", 1, 0, 0));
	_cleanup_(iso_allocation_clearp) struct iso_allocation b = alloc_of(mig_shape("", 0, 1, 0));
	struct iso_error err;

	f->cs.sched[A01] = ISO_NODE_CORDONED;
	assert_int_equal(place(f, &a, 1, &err), 0);
	expect_slot(&a, 0, 0, "gpu-b01", 0, "7g.80gb", 0, 8);
	f->cs.sched[B01] = ISO_NODE_DRAINING;
	assert_int_equal(place(f, &a, 2, &err), -ENOSPC);
	assert_int_equal(a.n_members, 1);
	f->cs.sched[A01] = ISO_NODE_SCHEDULABLE;
	assert_int_equal(place(f, &a, 2, &err), 0);
	assert_string_equal(a.placed[1].node, "gpu-a01");

	/* CPU-only members go to the first schedulable node of any kind. */
	f->cs.sched[A01] = ISO_NODE_CORDONED;
	assert_int_equal(place(f, &b, 1, &err), 0);
	assert_string_equal(b.placed[0].node, "gpu-a02");
	assert_int_equal(b.n_slots, 0);
	f->cs.sched[A01] = f->cs.sched[B01] = ISO_NODE_SCHEDULABLE;
	iso_cluster_state_give(&f->cs, &b);
	iso_cluster_state_give(&f->cs, &a);
}

static void test_first_fit_pool(void **state)
{
	struct fixture *f = *state;
	struct iso_shape s = mig_shape("1g.10gb", 1, 0, 0);
	_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
	_cleanup_(iso_allocation_clearp) struct iso_allocation b = {0};
	_cleanup_(iso_allocation_clearp) struct iso_allocation c = {0};
	struct iso_error err;

	iso_strlcpy(s.pool, "gpu-b", sizeof(s.pool));
	a = alloc_of(s);
	assert_int_equal(place(f, &a, 1, &err), 0);
	expect_slot(&a, 0, 0, "gpu-b01", 0, "1g.10gb", 0, 1);

	s = mig_shape("", 0, 4, 0);
	iso_strlcpy(s.pool, "cpu", sizeof(s.pool));
	b = alloc_of(s);
	assert_int_equal(place(f, &b, 2, &err), 0);
	assert_string_equal(b.placed[0].node, "cpu-c01");
	assert_string_equal(b.placed[1].node, "cpu-c01");

	/* GPUs in a pool without any. */
	s = mig_shape("1g.10gb", 1, 0, 0);
	iso_strlcpy(s.pool, "cpu", sizeof(s.pool));
	c = alloc_of(s);
	assert_int_equal(place(f, &c, 1, &err), -ENOSPC);
	assert_non_null(strstr(err.message, "pool cpu"));
	iso_cluster_state_give(&f->cs, &b);
	iso_cluster_state_give(&f->cs, &a);
}

static void test_first_fit_cpu_memory(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("", 0, 10, 0));
	_cleanup_(iso_allocation_clearp) struct iso_allocation b =
	    alloc_of(mig_shape("1g.10gb", 1, 0, 100000));
	struct iso_error err;

	/* 10 of 16 cpus: one member per GPU node, then six on the 64-cpu node. */
	assert_int_equal(place(f, &a, 9, &err), 0);
	assert_string_equal(a.placed[0].node, "gpu-a01");
	assert_string_equal(a.placed[1].node, "gpu-a02");
	assert_string_equal(a.placed[2].node, "gpu-b01");
	for (int k = 3; k < 9; k++)
		assert_string_equal(a.placed[k].node, "cpu-c01");
	assert_int_equal(f->cs.usage[C01].cpus_used, 60);
	assert_int_equal(place(f, &a, 10, &err), -ENOSPC);
	assert_non_null(strstr(err.message, "10 cpus"));
	iso_cluster_state_give(&f->cs, &a);

	/* 100000 of 131072 MiB: one member per MIG node; the third has no room. */
	assert_int_equal(place(f, &b, 2, &err), 0);
	expect_slot(&b, 0, 0, "gpu-a01", 0, "1g.10gb", 0, 1);
	expect_slot(&b, 1, 1, "gpu-b01", 0, "1g.10gb", 0, 1);
	assert_int_equal(place(f, &b, 3, &err), -ENOSPC);
	iso_cluster_state_give(&f->cs, &b);
}

/* A failed placement changes neither the cluster state nor the allocation,
 * also when it fails after placing some members, and also on a resize. */
static void test_first_fit_failure_untouched(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation other =
	    alloc_of(mig_shape("2g.20gb", 1, 0, 0));
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("3g.40gb", 1, 3, 0));
	struct iso_allocation copy;
	struct iso_member *placed_copy;
	struct iso_slot *slots_copy;
	struct snapshot before, empty;
	struct iso_error err;

	snap(f, &empty);
	assert_int_equal(place(f, &other, 1, &err), 0);
	snap(f, &before);

	/* Fresh: 3 x 3g fit on gpu-a01 beside the 2g and 4 on gpu-b01; the
	 * eighth fails after seven were taken. */
	assert_int_equal(place(f, &a, 8, &err), -ENOSPC);
	assert_int_equal(err.code, ISO_E_NO_CAPACITY);
	assert_non_null(strstr(err.message, "member 7 of 8"));
	assert_true(same_as(f, &before));
	assert_int_equal(a.n_members, 0);
	assert_int_equal(a.n_slots, 0);
	assert_null(a.placed);
	assert_null(a.slots);

	/* Resize: two members held, growth to 9 fails, nothing moves. */
	assert_int_equal(place(f, &a, 2, &err), 0);
	snap(f, &before);
	copy = a;
	placed_copy = malloc((size_t)a.n_members * sizeof(*placed_copy));
	slots_copy = malloc((size_t)a.n_slots * sizeof(*slots_copy));
	assert_non_null(placed_copy);
	assert_non_null(slots_copy);
	memcpy(placed_copy, a.placed, (size_t)a.n_members * sizeof(*placed_copy));
	memcpy(slots_copy, a.slots, (size_t)a.n_slots * sizeof(*slots_copy));
	assert_int_equal(place(f, &a, 9, &err), -ENOSPC);
	assert_true(same_as(f, &before));
	assert_int_equal(memcmp(&copy, &a, sizeof(a)), 0); /* same pointers and counts */
	assert_int_equal(memcmp(placed_copy, a.placed, (size_t)a.n_members * sizeof(*placed_copy)),
	                 0);
	assert_int_equal(memcmp(slots_copy, a.slots, (size_t)a.n_slots * sizeof(*slots_copy)), 0);
	free(placed_copy);
	free(slots_copy);

	/* Growth that fits keeps the first members where they were. */
	assert_int_equal(place(f, &a, 4, &err), 0);
	expect_slot(&a, 0, 0, "gpu-a01", 0, "3g.40gb", 4, 4);
	expect_slot(&a, 1, 1, "gpu-a01", 1, "3g.40gb", 0, 4);
	expect_slot(&a, 2, 2, "gpu-a01", 1, "3g.40gb", 4, 4);
	expect_slot(&a, 3, 3, "gpu-b01", 0, "3g.40gb", 0, 4);

	/* Shrink as resize does it: give back the highest members. */
	iso_cluster_state_give_members(&f->cs, &a, 2);
	a.n_members = 2;
	a.n_slots = 2;
	assert_true(same_as(f, &before));
	iso_cluster_state_give(&f->cs, &a);
	iso_cluster_state_give(&f->cs, &other);
	assert_true(same_as(f, &empty));
}

/* The quirk of mig.md at cluster level: with 3g placed first, a 4g no longer
 * fits on that GPU; placed the other way round both share it. */
static void test_first_fit_order_quirk(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation g3 =
	    alloc_of(mig_shape("3g.40gb", 1, 0, 0));
	_cleanup_(iso_allocation_clearp) struct iso_allocation g4 =
	    alloc_of(mig_shape("4g.40gb", 1, 0, 0));

	assert_int_equal(place(f, &g3, 1, NULL), 0);
	assert_int_equal(place(f, &g4, 1, NULL), 0);
	expect_slot(&g3, 0, 0, "gpu-a01", 0, "3g.40gb", 0, 4);
	expect_slot(&g4, 0, 0, "gpu-a01", 1, "4g.40gb", 0, 4); /* needed a second GPU */
	iso_cluster_state_give(&f->cs, &g3);
	iso_cluster_state_give(&f->cs, &g4);
	iso_allocation_clear(&g3);
	iso_allocation_clear(&g4);
	g3 = alloc_of(mig_shape("3g.40gb", 1, 0, 0));
	g4 = alloc_of(mig_shape("4g.40gb", 1, 0, 0));

	assert_int_equal(place(f, &g4, 1, NULL), 0);
	assert_int_equal(place(f, &g3, 1, NULL), 0);
	expect_slot(&g4, 0, 0, "gpu-a01", 0, "4g.40gb", 0, 4);
	expect_slot(&g3, 0, 0, "gpu-a01", 0, "3g.40gb", 4, 4);
	iso_cluster_state_give(&f->cs, &g3);
	iso_cluster_state_give(&f->cs, &g4);
}

/* Random place / grow / shrink / release / cordon steps: after every step the
 * incrementally kept state must equal one rebuilt from scratch by taking
 * every live allocation, and every placement must obey the policy's rules. */
static uint32_t rng_next(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static void check_rebuild(struct fixture *f, struct iso_allocation *live, int n_live)
{
	struct iso_cluster_state incremental = f->cs, fresh;
	struct snapshot want, got;
	struct iso_error err;

	snap(f, &want);
	assert_int_equal(iso_cluster_state_init(&fresh, &f->inv), 0);
	memcpy(fresh.sched, incremental.sched, N_NODES * sizeof(*fresh.sched));
	f->cs = fresh;
	for (int i = 0; i < n_live; i++)
		assert_int_equal(iso_cluster_state_take(&f->cs, &live[i], &err), 0);
	snap(f, &got);
	assert_int_equal(memcmp(&want, &got, sizeof(want)), 0);
	iso_cluster_state_free(&f->cs);
	f->cs = incremental;
}

static void test_random_consistency(void **state)
{
	struct fixture *f = *state;
	static const char *const profiles[] = {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb",
	                                       "3g.40gb", "4g.40gb",    "7g.80gb"};
	struct iso_allocation live[64];
	int n_live = 0, placed = 0, refused = 0;
	uint32_t x = 0x9e3779b9u;
	struct iso_error err;

	for (int step = 0; step < 3000; step++) {
		uint32_t op = rng_next(&x) % 10;

		if (op < 5 && n_live < (int)ISO_ARRAY_SIZE(live)) {
			struct iso_shape sh;
			uint32_t kind = rng_next(&x) % 6;
			int members = 1 + (int)(rng_next(&x) % 3);

			if (kind == 0)
				sh = whole_shape(1 + (int)(rng_next(&x) % 2));
			else if (kind == 1)
				sh = mig_shape("", 0, 0, 0);
			else
				sh = mig_shape(profiles[rng_next(&x) % ISO_ARRAY_SIZE(profiles)],
				               1 + (int)(rng_next(&x) % 3), 0, 0);
			sh.cpus = (int)(rng_next(&x) % 7);
			sh.memory_mib = (int64_t)(rng_next(&x) % 40000);
			live[n_live] = alloc_of(sh);
			if (place(f, &live[n_live], members, &err) == 0) {
				n_live++;
				placed++;
			} else {
				assert_int_equal(err.code, ISO_E_NO_CAPACITY);
				assert_int_equal(live[n_live].n_members, 0);
				iso_allocation_clear(&live[n_live]);
				refused++;
			}
		} else if (op < 7 && n_live > 0) {
			int i = (int)(rng_next(&x) % (uint32_t)n_live);
			iso_cluster_state_give(&f->cs, &live[i]);
			iso_allocation_clear(&live[i]);
			live[i] = live[--n_live];
		} else if (op < 8 && n_live > 0) {
			struct iso_allocation *a = &live[rng_next(&x) % (uint32_t)n_live];
			int before = a->n_members;
			if (place(f, a, before + 1, &err) < 0)
				assert_int_equal(a->n_members, before);
		} else if (op < 9 && n_live > 0) {
			struct iso_allocation *a = &live[rng_next(&x) % (uint32_t)n_live];
			if (a->n_members > 1) {
				int keep = a->n_members - 1, n_slots = 0;
				iso_cluster_state_give_members(&f->cs, a, keep);
				for (int si = 0; si < a->n_slots; si++)
					if (a->slots[si].member < keep)
						a->slots[n_slots++] = a->slots[si];
				a->n_members = keep;
				a->n_slots = n_slots;
			}
		} else {
			int i = (int)(rng_next(&x) % N_NODES);
			f->cs.sched[i] = f->cs.sched[i] == ISO_NODE_SCHEDULABLE
			                     ? ISO_NODE_CORDONED
			                     : ISO_NODE_SCHEDULABLE;
		}
		check_rebuild(f, live, n_live);
		for (int i = 0; i < N_NODES; i++) {
			assert_true(f->cs.usage[i].cpus_used <= f->nodes[i].cpus);
			assert_true(f->cs.usage[i].memory_mib_used <= f->nodes[i].memory_mib);
		}
	}
	/* The run exercised both outcomes. */
	assert_true(placed > 100);
	assert_true(refused > 100);
	while (n_live > 0) {
		iso_cluster_state_give(&f->cs, &live[--n_live]);
		iso_allocation_clear(&live[n_live]);
	}
	for (int i = 0; i < N_NODES; i++) {
		assert_int_equal(f->cs.usage[i].members, 0);
		for (int j = 0; j < f->nodes[i].n_gpus; j++)
			assert_true(
			    iso_gpu_occupancy_empty(f->gpus[i][j].model, &f->cs.usage[i].gpus[j]));
	}
}

/* The same random run under the isostack engine, whose index must stay
 * consistent with usage through every step. */
static void test_random_consistency_isostack(void **state)
{
	struct fixture *f = *state;
	struct iso_error err = {0};

	placer_under_test = &iso_placer_isostack;
	test_random_consistency(state);
	placer_under_test = &iso_placer_first_fit;
	if (iso_cluster_state_check(&f->cs, &err) != 0)
		fail_msg("%s", err.message);
}

static void test_placer_find(void **state)
{
	(void)state;
	char names[256];
	int n = 0;

	assert_ptr_equal(iso_placer_find("first-fit"), &iso_placer_first_fit);
	assert_string_equal(iso_placer_first_fit.name, "first-fit");
	assert_ptr_equal(iso_placer_find("isostack"), &iso_placer_isostack);
	assert_string_equal(iso_placer_isostack.name, "isostack");
	assert_null(iso_placer_find("worst-fit"));
	assert_null(iso_placer_find("Isostack"));
	assert_null(iso_placer_find(""));
	assert_null(iso_placer_find(NULL));

	/* Every name the message lists is registered, isostack first. */
	iso_strlcpy(names, iso_placer_names(), sizeof(names));
	for (char *save = NULL, *w = strtok_r(names, ", ", &save); w;
	     w = strtok_r(NULL, ", ", &save), n++) {
		assert_non_null(iso_placer_find(w));
		assert_string_equal(iso_placer_find(w)->name, w);
		if (n == 0)
			assert_string_equal(w, "isostack");
	}
	assert_true(n >= 2);
	assert_non_null(strstr(iso_placer_names(), "first-fit"));
}

/* ---- shapes ---- */

static void expect_invalid(const struct fixture *f, const struct iso_shape *s, const char *field)
{
	struct iso_error err = {0};
	assert_int_equal(iso_shape_validate(s, &f->inv, &err), -EINVAL);
	assert_int_equal(err.code, ISO_E_INVALID);
	assert_string_equal(err.field, field);
	assert_true(err.message[0] != '\0');
}

static void test_shape_validate(void **state)
{
	struct fixture *f = *state;
	struct iso_shape s;
	struct iso_error err;

	s = mig_shape("3g.40gb", 1, 8, 65536);
	assert_int_equal(iso_shape_validate(&s, &f->inv, &err), 0);
	s = mig_shape("3G.40GB", 64, 0, 0);
	assert_int_equal(iso_shape_validate(&s, &f->inv, NULL), 0);
	s = mig_shape("", 0, 4, 0);
	assert_int_equal(iso_shape_validate(&s, &f->inv, &err), 0);
	s = whole_shape(2);
	iso_strlcpy(s.gpu_model, "a100-80gb", sizeof(s.gpu_model));
	iso_strlcpy(s.pool, "gpu-b", sizeof(s.pool));
	assert_int_equal(iso_shape_validate(&s, &f->inv, &err), 0);

	s = mig_shape("3g.40gb", 65, 0, 0);
	expect_invalid(f, &s, "gpus.count");
	s = mig_shape("3g.40gb", -1, 0, 0);
	expect_invalid(f, &s, "gpus.count");
	s = mig_shape("3g.40gb", 0, 0, 0);
	expect_invalid(f, &s, "gpus.count");
	s = whole_shape(0);
	expect_invalid(f, &s, "gpus.count");
	s = mig_shape("", 0, 0, 0);
	iso_strlcpy(s.gpu_model, "h100-80gb", sizeof(s.gpu_model));
	expect_invalid(f, &s, "gpus.count");

	s = mig_shape("", 1, 0, 0);
	expect_invalid(f, &s, "gpus.profile");
	s = whole_shape(1);
	iso_strlcpy(s.profile, "3g.40gb", sizeof(s.profile));
	expect_invalid(f, &s, "gpus.whole");
	/* Unknown everywhere; known but on no model present (A100-40, A30). */
	s = mig_shape("5g.50gb", 1, 0, 0);
	expect_invalid(f, &s, "gpus.profile");
	s = mig_shape("3g.20gb", 1, 0, 0);
	expect_invalid(f, &s, "gpus.profile");
	s = mig_shape("2g.12gb", 1, 0, 0);
	expect_invalid(f, &s, "gpus.profile");

	s = mig_shape("3g.40gb", 1, 0, 0);
	iso_strlcpy(s.gpu_model, "h100", sizeof(s.gpu_model));
	expect_invalid(f, &s, "gpus.model");
	iso_strlcpy(s.gpu_model, "b200-180gb", sizeof(s.gpu_model)); /* known, not present */
	expect_invalid(f, &s, "gpus.model");
	s = mig_shape("1g.5gb", 1, 0, 0); /* an A100-40 profile, asked of H100 */
	iso_strlcpy(s.gpu_model, "h100-80gb", sizeof(s.gpu_model));
	expect_invalid(f, &s, "gpus.profile");

	s = mig_shape("3g.40gb", 1, -1, 0);
	expect_invalid(f, &s, "cpus");
	s = mig_shape("3g.40gb", 1, 0, -5);
	expect_invalid(f, &s, "memory_mib");
	s = mig_shape("3g.40gb", 1, 0, 0);
	iso_strlcpy(s.pool, "nope", sizeof(s.pool));
	expect_invalid(f, &s, "pool");
}

static bool ever(const struct fixture *f, struct iso_shape s, const char *model, const char *pool)
{
	if (model)
		iso_strlcpy(s.gpu_model, model, sizeof(s.gpu_model));
	if (pool)
		iso_strlcpy(s.pool, pool, sizeof(s.pool));
	return iso_shape_ever_fits(&s, &f->inv);
}

static void test_shape_ever_fits(void **state)
{
	struct fixture *f = *state;
	_cleanup_(iso_allocation_clearp) struct iso_allocation a =
	    alloc_of(mig_shape("7g.80gb", 1, 16, 0));
	struct iso_error err;

	/* Two GPUs per node: 2 x 2 3g, 2 x 7 1g, 2 x 4 1g double memory. */
	assert_true(ever(f, mig_shape("3g.40gb", 4, 0, 0), NULL, NULL));
	assert_false(ever(f, mig_shape("3g.40gb", 5, 0, 0), NULL, NULL));
	assert_true(ever(f, mig_shape("1g.10gb", 14, 0, 0), NULL, NULL));
	assert_false(ever(f, mig_shape("1g.10gb", 15, 0, 0), NULL, NULL));
	assert_true(ever(f, mig_shape("1g.20gb", 8, 0, 0), NULL, NULL));
	assert_false(ever(f, mig_shape("1g.20gb", 9, 0, 0), NULL, NULL));
	assert_true(ever(f, mig_shape("1g.10gb+me", 2, 0, 0), NULL, NULL));
	assert_false(ever(f, mig_shape("1g.10gb+me", 3, 0, 0), NULL, NULL));
	assert_true(ever(f, mig_shape("7g.80gb", 2, 16, 131072), NULL, NULL));
	assert_false(ever(f, mig_shape("7g.80gb", 2, 17, 0), NULL, NULL));
	assert_false(ever(f, mig_shape("7g.80gb", 2, 0, 131073), NULL, NULL));
	assert_true(ever(f, whole_shape(2), NULL, NULL));
	assert_false(ever(f, whole_shape(3), NULL, NULL));
	assert_true(ever(f, whole_shape(2), "a100-80gb", "gpu-b"));
	assert_false(ever(f, whole_shape(1), "a100-80gb", "gpu"));
	assert_true(ever(f, mig_shape("3g.40gb", 4, 0, 0), "a100-80gb", NULL));
	assert_false(ever(f, mig_shape("3g.40gb", 1, 0, 0), "h100-94gb", NULL));
	assert_false(ever(f, mig_shape("3g.20gb", 1, 0, 0), NULL, NULL));
	/* MIG profiles only on MIG-enabled GPUs: the gpu pool's are on gpu-a01. */
	assert_true(ever(f, mig_shape("1g.10gb", 14, 0, 0), NULL, "gpu"));
	assert_false(ever(f, mig_shape("1g.10gb", 1, 0, 0), "h100-80gb", "gpu-b"));
	/* CPU-only shapes. */
	assert_true(ever(f, mig_shape("", 0, 64, 524288), NULL, NULL));
	assert_false(ever(f, mig_shape("", 0, 65, 0), NULL, NULL));
	assert_false(ever(f, mig_shape("", 0, 17, 0), NULL, "gpu"));
	assert_false(ever(f, mig_shape("", 0, 0, 0), NULL, "nope"));

	/* Cordons and usage do not matter. */
	assert_int_equal(place(f, &a, 2, &err), 0);
	for (int i = 0; i < N_NODES; i++)
		f->cs.sched[i] = ISO_NODE_CORDONED;
	f->nodes[A01].sched = ISO_NODE_DRAINING;
	assert_true(ever(f, mig_shape("7g.80gb", 2, 16, 0), NULL, NULL));
	f->nodes[A01].sched = ISO_NODE_SCHEDULABLE;
	for (int i = 0; i < N_NODES; i++)
		f->cs.sched[i] = ISO_NODE_SCHEDULABLE;
	iso_cluster_state_give(&f->cs, &a);
}

/* Requests by size: the smallest covering profile over the eligible models
 * (gpu-a01: H100-80 with MIG; gpu-a02: H100-80 without; gpu-b01: A100-80). */
static void expect_resolved(const struct fixture *f, struct iso_shape in, double gib, int compute,
                            const char *want)
{
	struct iso_shape out;
	struct iso_error err = {0};

	memset(&out, 0x5a, sizeof(out));
	if (iso_shape_resolve(&in, &f->inv, gib, compute, &out, &err) != 0)
		fail_msg("%g GiB %d compute: %s", gib, compute, err.message);
	assert_string_equal(out.profile, want);
	assert_false(out.whole);
	assert_int_equal(out.gpu_count, in.gpu_count);
	assert_int_equal(out.cpus, in.cpus);
	assert_string_equal(out.pool, in.pool);
	assert_string_equal(out.gpu_model, in.gpu_model);
	/* What it resolves to is a valid request. */
	assert_int_equal(iso_shape_validate(&out, &f->inv, &err), 0);
}

static void expect_unresolved(const struct fixture *f, struct iso_shape in, double gib, int compute,
                              enum iso_errcode code, const char *field)
{
	struct iso_shape out, before;
	struct iso_error err = {0};

	memset(&out, 0x5a, sizeof(out));
	before = out;
	assert_true(iso_shape_resolve(&in, &f->inv, gib, compute, &out, &err) < 0);
	assert_int_equal(err.code, code);
	assert_string_equal(err.field, field);
	assert_true(err.message[0] != '\0');
	assert_int_equal(memcmp(&out, &before, sizeof(out)), 0);
}

static void test_shape_resolve(void **state)
{
	struct fixture *f = *state;
	struct iso_shape s = mig_shape("", 2, 4, 1024), t;
	struct iso_error err;

	/* Both models: a name must cover on each model that has it. 1g.10gb
	 * is 10 GiB on A100-80 but 9.75 on H100-80, so 9.9 GiB is 1g.20gb. */
	expect_resolved(f, s, 0, 0, "1g.10gb");
	expect_resolved(f, s, 9.75, 1, "1g.10gb");
	expect_resolved(f, s, 9.9, 0, "1g.20gb");
	expect_resolved(f, s, 15, 1, "1g.20gb");
	expect_resolved(f, s, 15, 2, "2g.20gb");
	expect_resolved(f, s, 30, 0, "3g.40gb");
	/* 3g.40gb and 4g.40gb hold 40 GiB on A100-80 but 39.5 on H100-80. */
	expect_resolved(f, s, 39.6, 0, "7g.80gb");
	expect_resolved(f, s, 0, 7, "7g.80gb");
	/* One model only: by model or by pool. */
	t = s;
	iso_strlcpy(t.gpu_model, "a100-80gb", sizeof(t.gpu_model));
	expect_resolved(f, t, 9.9, 0, "1g.10gb");
	expect_resolved(f, t, 39.6, 0, "3g.40gb");
	t = s;
	iso_strlcpy(t.pool, "gpu-b", sizeof(t.pool));
	expect_resolved(f, t, 9.9, 0, "1g.10gb");
	t = s;
	iso_strlcpy(t.pool, "gpu", sizeof(t.pool)); /* gpu-a02's GPUs have no MIG */
	expect_resolved(f, t, 9.9, 0, "1g.20gb");
	expect_resolved(f, t, 39.6, 0, "7g.80gb");
	/* In place. */
	t = s;
	assert_int_equal(iso_shape_resolve(&t, &f->inv, 30, 3, &t, &err), 0);
	assert_string_equal(t.profile, "3g.40gb");

	/* Bad input and requests no profile can ever meet. */
	expect_unresolved(f, s, -1, 0, ISO_E_INVALID, "gpus.memory_gib");
	expect_unresolved(f, s, NAN, 0, ISO_E_INVALID, "gpus.memory_gib");
	expect_unresolved(f, s, INFINITY, 0, ISO_E_INVALID, "gpus.memory_gib");
	expect_unresolved(f, s, 1, -1, ISO_E_INVALID, "gpus.compute");
	expect_unresolved(f, s, 81, 0, ISO_E_CAPACITY, "gpus.memory_gib");
	expect_unresolved(f, s, 10, 8, ISO_E_CAPACITY, "gpus.compute");
	t = s;
	iso_strlcpy(t.pool, "cpu", sizeof(t.pool));
	expect_unresolved(f, t, 1, 1, ISO_E_CAPACITY, "gpus.memory_gib");
	t = s;
	iso_strlcpy(t.gpu_model, "a30-24gb", sizeof(t.gpu_model));
	expect_unresolved(f, t, 1, 1, ISO_E_CAPACITY, "gpus.memory_gib");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_state_init, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_take_give_roundtrip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_take_give_members, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_take_rejects, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_on_member_hook, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unreachable_like_cordoned, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_mig, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_multi_instance, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_lowest_start, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_whole, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_model, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_cordon, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_pool, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_cpu_memory, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_failure_untouched, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_fit_order_quirk, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random_consistency, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random_consistency_isostack, setup, teardown),
	    cmocka_unit_test(test_placer_find),
	    cmocka_unit_test_setup_teardown(test_shape_validate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shape_ever_fits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shape_resolve, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

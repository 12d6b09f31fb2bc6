/* test_queue.c: the controller's in-memory pending queue (src/controller/
 * queue.c) against the rules it replaced. Two properties: (1) creating a
 * pending allocation and releasing one cost no scan of the queue in the store
 * (the old queue re-read and re-sorted every pending allocation on each, which
 * let one tenant's backlog slow every request); (2) the queue's order is the
 * Fair Tree order that iso_fairshare_order computes from scratch, after any
 * mix of creates, priorities and releases. A controller over a temporary
 * SQLite store and tests/api/data/tenancy.yaml (4 nodes x 2 MIG H100s). */
#include "controller_fixture.h"
#include "isostack/tenancy.h"

/* The store, with alloc_list counted: the scan of the old queue. */
static const struct iso_store_ops *real_ops;
static int alloc_lists;

static int counted_alloc_list(struct iso_store *s, const struct iso_alloc_filter *f,
                              struct iso_allocation **out, int *n, struct iso_error *err)
{
	alloc_lists++;
	return real_ops->alloc_list(s, f, out, n, err);
}

static void count(struct iso_store_ops *ops, const struct iso_store_ops *real)
{
	real_ops = real;
	ops->alloc_list = counted_alloc_list;
}

static int setup(void **state)
{
	struct fixture *fx = fixture_open(count, true);

	*state = fx;
	return 0;
}

static void tenant(struct fixture *fx, const char *name)
{
	struct iso_tenant t;
	struct iso_error err = {0};

	assert_int_equal(
	    iso_controller_tenant_create(fx->ctl, &fx->admin, name, "", NULL, &t, &err), 0);
}

/* One allocation of `gpus` whole GPUs (or a 1g.10gb when 0) for `who`. */
static void create(struct fixture *fx, const char *who, int gpus, int priority, char *id)
{
	struct iso_alloc_request req = {.tenant = who, .members = 1, .priority = priority};
	struct iso_allocation a = {0};
	struct iso_error err = {0};

	req.shape.gpu_count = gpus ? gpus : 1;
	req.shape.whole = gpus > 0;
	if (!gpus)
		iso_strlcpy(req.shape.profile, "1g.10gb", sizeof(req.shape.profile));
	if (iso_controller_alloc_create(fx->ctl, &fx->admin, &req, &a, &err) < 0)
		fail_msg("create for %s: %s", who, err.message);
	if (id)
		iso_strlcpy(id, a.id, ISO_ID_MAX);
	iso_allocation_clear(&a);
}

static void release(struct fixture *fx, const char *id)
{
	struct iso_allocation a = {0};
	struct iso_error err = {0};

	assert_int_equal(iso_controller_alloc_release(fx->ctl, &fx->admin, id, &a, &err), 0);
	iso_allocation_clear(&a);
}

static void test_no_queue_scan_per_request(void **state)
{
	struct fixture *fx = *state;
	char full[8][ISO_ID_MAX], pend[ISO_ID_MAX];

	tenant(fx, "owner");
	tenant(fx, "flood");
	for (int i = 0; i < 8; i++) /* 8 whole GPUs: the cluster is full */
		create(fx, "owner", 1, 0, full[i]);
	alloc_lists = 0;
	for (int i = 0; i < 300; i++)
		create(fx, "flood", 0, 0, i == 150 ? pend : NULL);
	assert_int_equal(ctl_queue_size(fx->ctl), 300);
	release(fx, pend); /* a pending one: nothing frees */
	assert_int_equal(ctl_queue_size(fx->ctl), 299);
	release(fx, full[0]); /* one GPU frees: 7 slices start */
	assert_int_equal(ctl_queue_size(fx->ctl), 292);
	/* 300 creates and 2 releases read no list of allocations at all */
	assert_int_equal(alloc_lists, 0);
}

/* The order from scratch: every pending allocation, iso_fairshare_order. */
static void reference_order(struct fixture *fx, char (*ids)[ISO_ID_MAX], int *n)
{
	struct iso_alloc_filter f = {.state = ISO_ALLOC_PENDING};
	struct iso_allocation *all = NULL;
	struct iso_error err = {0};
	int n_all = 0;

	assert_int_equal(real_ops->alloc_list(fx->store, &f, &all, &n_all, &err), 0);
	struct iso_pending *items = calloc((size_t)n_all + 1, sizeof(*items));
	struct iso_queue_entry *order = calloc((size_t)n_all + 1, sizeof(*order));
	assert_non_null(items);
	assert_non_null(order);
	for (int i = 0; i < n_all; i++) {
		iso_strlcpy(items[i].id, all[i].id, sizeof(items[i].id));
		items[i].acct = ctl_tenancy_account_of(fx->ctl, &all[i]);
		items[i].priority = all[i].priority;
		items[i].submit_ms = all[i].created_ms;
		ctl_demand(fx->ctl, &all[i], &items[i].req);
	}
	ctl_tenancy_accrue(fx->ctl);
	assert_int_equal(iso_fairshare_order(ctl_tenancy_tree(fx->ctl), items, n_all, order, &err),
	                 0);
	for (int i = 0; i < n_all; i++)
		iso_strlcpy(ids[i], items[order[i].item].id, ISO_ID_MAX);
	*n = n_all;
	free(items);
	free(order);
	iso_allocations_free(all, n_all);
}

static void test_order_matches_fair_tree(void **state)
{
	struct fixture *fx = *state;
	static const char *const names[] = {"ta", "tb", "tc", "td"};
	char ids[400][ISO_ID_MAX], want[400][ISO_ID_MAX], keep[ISO_ID_MAX];
	struct ctl_queue_view *view = calloc(400, sizeof(*view));
	int n_want = 0, n = 0;
	bool more = false;
	unsigned seed = 7;

	assert_non_null(view);
	for (int i = 0; i < 4; i++)
		tenant(fx, names[i]);
	/* Usage differs: ta ran the most, so it ranks last. */
	create(fx, "ta", 2, 0, keep);
	create(fx, "tb", 1, 0, NULL);
	for (int i = 0; i < 5; i++)
		create(fx, "tc", 1, 0, NULL);
	usleep(20 * 1000);
	for (int i = 0; i < 300; i++) {
		seed = seed * 1103515245u + 12345u;
		create(fx, names[(seed >> 8) % 4], 1, (int)((seed >> 16) % 5) - 2, ids[i]);
		if (i % 7 == 3) /* a release here and there, pending ones too */
			release(fx, ids[i - 2]);
	}
	/* Ranks are cached for a second; the reference is computed now. */
	usleep(1100 * 1000);
	reference_order(fx, want, &n_want);
	assert_int_equal(ctl_queue_view(fx->ctl, &fx->admin, 400, 0, view, &n, &more), 0);
	assert_false(more);
	assert_int_equal(n, n_want);
	for (int i = 0; i < n; i++) {
		assert_int_equal(view[i].position, i + 1);
		assert_string_equal(view[i].id, want[i]);
	}
	free(view);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_no_queue_scan_per_request, setup, fixture_close),
	    cmocka_unit_test_setup_teardown(test_order_matches_fair_tree, setup, fixture_close),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* controller_fixture.h: a controller over a temporary SQLite store and
 * tests/api/data/tenancy.yaml, for unit tests of controller modules that
 * count what the store is asked (test_queue, test_authcache). The test gives
 * a hook that swaps the store ops it counts into fx->ops (a copy of the real
 * ones); fx->real are the store's own. Include once per test program. */
#ifndef ISOSTACK_TESTS_CONTROLLER_FIXTURE_H
#define ISOSTACK_TESTS_CONTROLLER_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "controller/internal.h"
#include "isostack/inventory.h"
#include "isostack/store.h"

struct fixture {
	char dir[64];
	struct iso_inventory *inv;
	struct iso_store *store;
	struct iso_controller *ctl;
	struct iso_principal admin;
	struct iso_store_ops ops;         /* the counted copy the store uses */
	const struct iso_store_ops *real; /* the store's own */
	struct iso_store *outer;          /* what the controller uses: store, or a wrapper of it */
};

/* Opens the fixture; `count` (may be NULL) replaces the ops it counts in
 * fx->ops before the controller opens (given the real ones to call on); `rates` raises the request
 * rates; `wrap` (may be NULL) puts a store around fx->store for the controller to use (fx->outer,
 * e.g. iso_store_faultsim_open). */
static struct fixture *fixture_open_over(
    void (*count)(struct iso_store_ops *ops, const struct iso_store_ops *real), bool rates,
    int (*wrap)(struct iso_store *inner, struct iso_store **out, struct iso_error *err))
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct iso_error err = {0};
	char path[128];
	const char *root = getenv("ISO_SOURCE_ROOT");
	char inv[512];

	assert_non_null(fx);
	assert_true(sodium_init() >= 0);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/isoctl-test-XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(inv, sizeof(inv), "%s/tests/api/data/tenancy.yaml", root ? root : "../..");
	assert_int_equal(iso_inventory_load_file(inv, &fx->inv, &err), 0);
	snprintf(path, sizeof(path), "%s/state.db", fx->dir);
	assert_int_equal(iso_store_open_sqlite(path, &fx->store, &err), 0);
	fx->real = fx->store->ops;
	fx->ops = *fx->real;
	if (count)
		count(&fx->ops, fx->real);
	fx->store->ops = &fx->ops;
	fx->outer = fx->store;
	if (wrap)
		assert_int_equal(wrap(fx->store, &fx->outer, &err), 0);
	struct iso_controller_params params = {
	    .inv = fx->inv,
	    .store = fx->outer,
	    .placer = iso_placer_find("isostack"),
	    .state_dir = fx->dir,
	};
	if (rates)
		params.tenant_rates =
		    (struct iso_rate_limits){.writes_per_s = 1e6, .reads_per_s = 1e6};
	assert_int_equal(iso_controller_open(&params, &fx->ctl, &err), 0);
	fx->admin.role = ISO_ROLE_CLUSTER_ADMIN;
	iso_strlcpy(fx->admin.owner, "admin", sizeof(fx->admin.owner));
	return fx;
}

static _unused_ struct fixture *
fixture_open(void (*count)(struct iso_store_ops *ops, const struct iso_store_ops *real), bool rates)
{
	return fixture_open_over(count, rates, NULL);
}

static int fixture_close(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];

	iso_controller_shutdown(fx->ctl);
	iso_controller_free(fx->ctl);
	if (fx->outer != fx->store)
		iso_store_close(fx->outer);
	fx->store->ops = fx->real;
	iso_store_close(fx->store);
	iso_inventory_free(fx->inv);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", fx->dir);
	assert_int_equal(system(cmd), 0);
	free(fx);
	return 0;
}

#endif

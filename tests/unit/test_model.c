/* test_model.c: roles and the allocation state machine, checked edge by edge
 * against the table in docs/api.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "isostack/model.h"

static void test_roles(void **state)
{
	static const char *const names[] = {"cluster-admin", "auditor", "tenant-admin",
	                                    "tenant-user"};
	enum iso_role r;
	(void)state;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(names); i++) {
		assert_int_equal(iso_role_parse(names[i], &r), 0);
		assert_string_equal(iso_role_name(r), names[i]);
	}
	assert_int_not_equal(iso_role_parse("admin", &r), 0);
	assert_int_not_equal(iso_role_parse("Cluster-Admin", &r), 0);
	assert_int_not_equal(iso_role_parse("", &r), 0);
	assert_false(iso_role_is_tenant_scoped(ISO_ROLE_CLUSTER_ADMIN));
	assert_false(iso_role_is_tenant_scoped(ISO_ROLE_AUDITOR));
	assert_true(iso_role_is_tenant_scoped(ISO_ROLE_TENANT_ADMIN));
	assert_true(iso_role_is_tenant_scoped(ISO_ROLE_TENANT_USER));
}

static void test_state_names(void **state)
{
	enum iso_alloc_state s;
	(void)state;

	for (int i = ISO_ALLOC_PENDING; i <= ISO_ALLOC_FAILED; i++) {
		assert_int_equal(iso_alloc_state_parse(iso_alloc_state_name(i), &s), 0);
		assert_int_equal((int)s, i);
	}
	assert_int_not_equal(iso_alloc_state_parse("running", &s), 0);
	assert_true(iso_alloc_state_terminal(ISO_ALLOC_RELEASED));
	assert_true(iso_alloc_state_terminal(ISO_ALLOC_FAILED));
	assert_false(iso_alloc_state_terminal(ISO_ALLOC_ACTIVE));
}

/* The whole 7x7 matrix: exactly these edges are legal. */
static void test_transitions(void **state)
{
	enum {
		P = ISO_ALLOC_PENDING,
		PL = ISO_ALLOC_PLACED,
		PR = ISO_ALLOC_PROVISIONING,
		A = ISO_ALLOC_ACTIVE,
		RG = ISO_ALLOC_RELEASING,
		RD = ISO_ALLOC_RELEASED,
		F = ISO_ALLOC_FAILED
	};
	static const int legal[][2] = {
	    {P, PL}, {P, RD}, {PL, PR}, {PL, RG}, {PL, F}, {PR, A}, {PR, RG},
	    {PR, F}, {A, RG}, {A, F},   {RG, RD}, {RG, F}, {RG, P},
	};
	(void)state;

	for (int from = P; from <= F; from++)
		for (int to = P; to <= F; to++) {
			bool want = false;
			for (size_t i = 0; i < ISO_ARRAY_SIZE(legal); i++)
				if (legal[i][0] == from && legal[i][1] == to)
					want = true;
			if (iso_alloc_transition_allowed(from, to) != want)
				fail_msg("%s -> %s: want %s", iso_alloc_state_name(from),
				         iso_alloc_state_name(to), want ? "legal" : "refused");
		}
	assert_false(iso_alloc_transition_allowed((enum iso_alloc_state)42, ISO_ALLOC_ACTIVE));
	assert_false(iso_alloc_transition_allowed(ISO_ALLOC_PENDING, (enum iso_alloc_state)42));
}

static void test_allocation_clear(void **state)
{
	struct iso_allocation a = {0};
	(void)state;

	a.placed = calloc(2, sizeof(*a.placed));
	a.slots = calloc(3, sizeof(*a.slots));
	a.n_members = 2;
	a.n_slots = 3;
	iso_allocation_clear(&a);
	assert_null(a.placed);
	assert_null(a.slots);
	assert_int_equal(a.n_slots, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roles),
	    cmocka_unit_test(test_state_names),
	    cmocka_unit_test(test_transitions),
	    cmocka_unit_test(test_allocation_clear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

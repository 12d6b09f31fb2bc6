/* test_authcache.c: authentication answered from memory (src/controller/
 * authcache.c) must cost no store read when the token is known, and must
 * never answer from a stale entry: a revoked token, a deleted tenant, a
 * wrong secret and an expired token are refused exactly as without the cache.
 * A controller over a temporary SQLite store whose token and tenant reads are
 * counted. */
#include <errno.h>

#include "controller_fixture.h"

static const struct iso_store_ops *real_ops;
static int token_reads, tenant_reads;
static int token_fail, tenant_fail; /* a store that cannot answer (-EIO) */

static int counted_token_get(struct iso_store *s, const char *id, struct iso_token *out,
                             struct iso_error *err)
{
	token_reads++;
	if (token_fail)
		return token_fail;
	return real_ops->token_get(s, id, out, err);
}

static int counted_tenant_get_by_id(struct iso_store *s, int64_t id, struct iso_tenant *out,
                                    struct iso_error *err)
{
	tenant_reads++;
	if (tenant_fail)
		return tenant_fail;
	return real_ops->tenant_get_by_id(s, id, out, err);
}

static void count(struct iso_store_ops *ops, const struct iso_store_ops *real)
{
	real_ops = real;
	ops->token_get = counted_token_get;
	ops->tenant_get_by_id = counted_tenant_get_by_id;
}

static int setup(void **state)
{
	struct fixture *fx = fixture_open(count, false);

	token_fail = tenant_fail = 0;
	*state = fx;
	return 0;
}

/* A tenant-user token of a new tenant `name`; its bearer string in `secret`. */
static void tenant_token(struct fixture *fx, const char *name, int64_t expires_in_s,
                         struct iso_token *tok, char secret[ISO_TOKEN_MAX])
{
	struct iso_tenant t;
	struct iso_error err = {0};
	struct iso_token_request req = {.role = ISO_ROLE_TENANT_USER,
	                                .tenant = name,
	                                .user = "u",
	                                .expires_in_s = expires_in_s};

	assert_int_equal(
	    iso_controller_tenant_create(fx->ctl, &fx->admin, name, "", NULL, &t, &err), 0);
	if (iso_controller_token_issue(fx->ctl, &fx->admin, &req, tok, secret, ISO_TOKEN_MAX,
	                               &err) < 0)
		fail_msg("token issue: %s", err.message);
}

static int authenticate(struct fixture *fx, const char *bearer, struct iso_principal *who)
{
	struct iso_error err = {0};

	memset(who, 0, sizeof(*who));
	return iso_controller_authenticate(fx->ctl, bearer, who, &err);
}

static void test_known_token_costs_no_read(void **state)
{
	struct fixture *fx = *state;
	struct iso_token tok;
	char secret[ISO_TOKEN_MAX];
	struct iso_principal who;

	tenant_token(fx, "acme", 0, &tok, secret);
	token_reads = tenant_reads = 0;
	for (int i = 0; i < 100; i++) {
		assert_int_equal(authenticate(fx, secret, &who), 0);
		assert_string_equal(who.tenant, "acme");
		assert_string_equal(who.token_id, tok.id);
		assert_int_equal(who.role, ISO_ROLE_TENANT_USER);
	}
	/* The first request reads the token and its tenant; the rest do not. */
	assert_int_equal(token_reads, 1);
	assert_int_equal(tenant_reads, 1);
}

static void test_wrong_secret_refused_when_cached(void **state)
{
	struct fixture *fx = *state;
	struct iso_token tok;
	char secret[ISO_TOKEN_MAX], wrong[ISO_TOKEN_MAX];
	struct iso_principal who;
	size_t n;

	tenant_token(fx, "acme", 0, &tok, secret);
	assert_int_equal(authenticate(fx, secret, &who), 0);
	iso_strlcpy(wrong, secret, sizeof(wrong));
	n = strlen(wrong);
	wrong[n - 1] = wrong[n - 1] == 'A' ? 'B' : 'A';
	assert_true(authenticate(fx, wrong, &who) < 0);
	assert_int_equal(authenticate(fx, secret, &who), 0);
}

static void test_revoked_refused_at_once(void **state)
{
	struct fixture *fx = *state;
	struct iso_token tok;
	char secret[ISO_TOKEN_MAX];
	struct iso_principal who;
	struct iso_error err = {0};

	tenant_token(fx, "acme", 0, &tok, secret);
	assert_int_equal(authenticate(fx, secret, &who), 0);
	assert_int_equal(iso_controller_token_revoke(fx->ctl, &fx->admin, tok.id, &err), 0);
	assert_true(authenticate(fx, secret, &who) < 0);
}

static void test_deleted_tenant_refused(void **state)
{
	struct fixture *fx = *state;
	struct iso_token tok;
	char secret[ISO_TOKEN_MAX];
	struct iso_principal who;
	struct iso_error err = {0};

	tenant_token(fx, "acme", 0, &tok, secret);
	assert_int_equal(authenticate(fx, secret, &who), 0);
	assert_int_equal(iso_controller_tenant_delete(fx->ctl, &fx->admin, "acme", &err), 0);
	assert_true(authenticate(fx, secret, &who) < 0);
}

/* The store changed behind the cache's back (no transaction of this
 * controller): the entry stays good only until the next transaction ends,
 * which is when every change the API can make lands. */
static void test_any_transaction_invalidates(void **state)
{
	struct fixture *fx = *state;
	struct iso_token tok, other;
	char secret[ISO_TOKEN_MAX], other_secret[ISO_TOKEN_MAX];
	struct iso_principal who;
	struct iso_error err = {0};

	tenant_token(fx, "acme", 0, &tok, secret);
	assert_int_equal(authenticate(fx, secret, &who), 0);
	assert_int_equal(real_ops->token_revoke(fx->store, tok.id, iso_now_ms(), &err), 0);
	token_reads = 0;
	tenant_token(fx, "globex", 0, &other, other_secret); /* two transactions */
	assert_true(authenticate(fx, secret, &who) < 0);
	assert_int_equal(token_reads, 1);
}

/* A store that cannot read the token or its tenant (PostgreSQL failing over)
 * says nothing about the token: 503 unavailable, not 401 (a client would
 * drop a good token); a token that is not there is still 401. */
static void test_store_failure_is_unavailable(void **state)
{
	struct fixture *fx = *state;
	struct iso_token tok, other;
	char secret[ISO_TOKEN_MAX], other_secret[ISO_TOKEN_MAX];
	struct iso_principal who;
	struct iso_error err = {0};

	tenant_token(fx, "acme", 0, &tok, secret);
	token_fail = -EIO;
	assert_int_equal(iso_controller_authenticate(fx->ctl, secret, &who, &err), -EAGAIN);
	assert_int_equal(err.code, ISO_E_UNAVAILABLE);
	token_fail = 0;
	tenant_fail = -EIO;
	memset(&err, 0, sizeof(err));
	assert_int_equal(iso_controller_authenticate(fx->ctl, secret, &who, &err), -EAGAIN);
	assert_int_equal(err.code, ISO_E_UNAVAILABLE);
	tenant_fail = 0;
	assert_int_equal(authenticate(fx, secret, &who), 0);
	tenant_token(fx, "globex", 0, &other, other_secret); /* the cache is dropped */
	memset(&err, 0, sizeof(err));
	other_secret[strlen(other_secret) - 1] ^= 1; /* a wrong secret: still 401 */
	assert_true(iso_controller_authenticate(fx->ctl, other_secret, &who, &err) < 0);
	assert_int_equal(err.code, ISO_E_UNAUTHORIZED);
}

static void test_expired_refused_when_cached(void **state)
{
	struct fixture *fx = *state;
	struct iso_token tok;
	char secret[ISO_TOKEN_MAX];
	struct iso_principal who;

	tenant_token(fx, "acme", 1, &tok, secret);
	assert_int_equal(authenticate(fx, secret, &who), 0);
	token_reads = 0;
	usleep(1100 * 1000);
	assert_true(authenticate(fx, secret, &who) < 0);
	assert_int_equal(token_reads, 0); /* refused from the cached entry */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_known_token_costs_no_read, setup, fixture_close),
	    cmocka_unit_test_setup_teardown(test_wrong_secret_refused_when_cached, setup,
	                                    fixture_close),
	    cmocka_unit_test_setup_teardown(test_revoked_refused_at_once, setup, fixture_close),
	    cmocka_unit_test_setup_teardown(test_deleted_tenant_refused, setup, fixture_close),
	    cmocka_unit_test_setup_teardown(test_any_transaction_invalidates, setup, fixture_close),
	    cmocka_unit_test_setup_teardown(test_expired_refused_when_cached, setup, fixture_close),
	    cmocka_unit_test_setup_teardown(test_store_failure_is_unavailable, setup,
	                                    fixture_close),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

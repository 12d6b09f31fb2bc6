/* test_client.c: the client library's pure parts: option checks, escaping,
 * and how API error bodies become iso_error. Requests against a real server
 * are covered by tests/api (isoctl against isostackd). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "isostack/client.h"

static void test_escape(void **state)
{
	(void)state;
	struct {
		const char *in, *out;
	} cases[] = {
	    {"acme", "acme"},       {"a-b_c.d~e", "a-b_c.d~e"},
	    {"a/b", "a%2Fb"},       {"a b&c=d?e#f", "a%20b%26c%3Dd%3Fe%23f"},
	    {"\xc3\xa9", "%C3%A9"}, {"", ""},
	};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(cases); i++) {
		char *got = iso_client_escape(cases[i].in);
		assert_non_null(got);
		assert_string_equal(got, cases[i].out);
		free(got);
	}
}

static void test_new_refuses_bad_options(void **state)
{
	struct iso_client *c = NULL;
	struct iso_error err = {0};
	(void)state;

	struct iso_client_options bad_url = {.url = "ftp://example.org"};
	assert_true(iso_client_new(&bad_url, &c, &err) < 0);
	assert_string_equal(err.field, "url");
	assert_null(c);

	struct iso_client_options userinfo = {.url = "http://user:pw@127.0.0.1:8470"};
	assert_true(iso_client_new(&userinfo, &c, &err) < 0);
	assert_string_equal(err.field, "url");

	struct iso_client_options bad_token = {.token = "iso_abc\r\nX-Evil: 1"};
	memset(&err, 0, sizeof(err));
	assert_true(iso_client_new(&bad_token, &c, &err) < 0);
	assert_string_equal(err.field, "token");
	/* The message never repeats the token. */
	assert_null(strstr(err.message, "Evil"));

	struct iso_client_options bad_ca = {.ca_file = "/nonexistent/ca.pem"};
	assert_true(iso_client_new(&bad_ca, &c, &err) < 0);
	assert_string_equal(err.field, "ca_file");

	struct iso_client_options good = {.url = "https://isostack.example:8443/", .token = "t"};
	assert_int_equal(iso_client_new(&good, &c, &err), 0);
	assert_non_null(c);
	assert_non_null(iso_client_url(c));
	iso_client_free(c);
}

/* Several controllers (docs/cli.md): a comma-separated list, each entry a
 * checked URL; the client starts with the first. Following not_leader and
 * unreachable servers is covered against real daemons (tests/api/test_leader.py). */
static void test_url_list(void **state)
{
	struct iso_client *c = NULL;
	struct iso_error err = {0};
	(void)state;

	struct iso_client_options list = {.url = "http://c1:8470/,https://c2:8443,http://c3:1"};
	assert_int_equal(iso_client_new(&list, &c, &err), 0);
	assert_string_equal(iso_client_url(c), "http://c1:8470");
	iso_client_free(c);
	c = NULL;

	static const char *const bad[] = {
	    "http://c1:8470,,http://c3:1", /* an empty entry */
	    "http://c1:8470,",             /* a trailing comma */
	    ",http://c1:8470",
	    "http://c1:8470,ftp://c2", /* one bad entry spoils the list */
	    "http://c1:8470,http://u@c2",
	    "http://a,http://b,http://c,http://d,http://e,http://f,http://g,http://h,http://i",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct iso_client_options o = {.url = bad[i]};
		memset(&err, 0, sizeof(err));
		assert_true(iso_client_new(&o, &c, &err) < 0);
		assert_string_equal(err.field, "url");
		assert_null(c);
	}
	struct iso_client_options eight = {
	    .url = "http://a,http://b,http://c,http://d,http://e,http://f,http://g,http://h"};
	assert_int_equal(iso_client_new(&eight, &c, &err), 0);
	iso_client_free(c);
}

static void test_response_error(void **state)
{
	struct iso_response r = {.status = 404};
	struct iso_error err = {0};
	(void)state;

	r.body = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "not_found", "message",
	                   "tenant \"x\" not found", "field", "tenant");
	assert_int_equal(iso_response_error(&r, &err), -ENOENT);
	assert_int_equal(err.code, ISO_E_NOT_FOUND);
	assert_string_equal(err.field, "tenant");
	assert_string_equal(err.message, "tenant \"x\" not found");
	json_decref(r.body);

	/* 409 can mean conflict or insufficient_capacity: the body decides. */
	r.status = 409;
	r.body = json_pack("{s:{s:s, s:s, s:n}}", "error", "code", "insufficient_capacity",
	                   "message", "no room", "field");
	iso_response_error(&r, &err);
	assert_int_equal(err.code, ISO_E_NO_CAPACITY);
	assert_string_equal(err.field, "");
	json_decref(r.body);

	/* No JSON body: the status decides, and the message says so. */
	r.status = 502;
	r.body = NULL;
	iso_response_error(&r, &err);
	assert_int_equal(err.code, ISO_E_UNAVAILABLE);
	r.status = 413;
	iso_response_error(&r, &err);
	assert_int_equal(err.code, ISO_E_TOO_LARGE);

	r.status = 200;
	assert_int_equal(iso_response_error(&r, &err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escape),
	    cmocka_unit_test(test_new_refuses_bad_options),
	    cmocka_unit_test(test_url_list),
	    cmocka_unit_test(test_response_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

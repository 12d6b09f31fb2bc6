/* test_util.c: the shared helpers: error table, names, GUIDs, strings, time. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "isostack/util.h"

static void test_error_table(void **state)
{
	struct iso_error err = {0};
	(void)state;

	assert_int_equal(iso_error_set(&err, ISO_E_INVALID, "gpus.count", "bad %d", 7), -EINVAL);
	assert_int_equal(err.code, ISO_E_INVALID);
	assert_string_equal(err.field, "gpus.count");
	assert_string_equal(err.message, "bad 7");
	assert_int_equal(iso_error_set(NULL, ISO_E_NOT_FOUND, NULL, "x"), -ENOENT);

	static const struct {
		enum iso_errcode code;
		int http;
		const char *name;
	} want[] = {
	    {ISO_E_INVALID, 400, "invalid_argument"},
	    {ISO_E_UNAUTHORIZED, 401, "unauthorized"},
	    {ISO_E_FORBIDDEN, 403, "forbidden"},
	    {ISO_E_NOT_FOUND, 404, "not_found"},
	    {ISO_E_METHOD, 405, "method_not_allowed"},
	    {ISO_E_CONFLICT, 409, "conflict"},
	    {ISO_E_NO_CAPACITY, 409, "insufficient_capacity"},
	    {ISO_E_TOO_LARGE, 413, "payload_too_large"},
	    {ISO_E_CAPACITY, 422, "unsatisfiable"},
	    {ISO_E_INTERNAL, 500, "internal"},
	    {ISO_E_UNAVAILABLE, 503, "unavailable"},
	};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(want); i++) {
		assert_int_equal(iso_errcode_http_status(want[i].code), want[i].http);
		assert_string_equal(iso_errcode_name(want[i].code), want[i].name);
		assert_true(iso_error_errno(want[i].code) < 0);
		enum iso_errcode back;
		assert_int_equal(iso_errcode_parse(want[i].name, &back), 0);
		assert_int_equal(back, want[i].code);
	}
	enum iso_errcode unused;
	assert_int_not_equal(iso_errcode_parse("teapot", &unused), 0);
	assert_int_not_equal(iso_errcode_parse("ok", &unused), 0);
	/* Out-of-range codes are internal errors, never a crash or a 200. */
	assert_int_equal(iso_errcode_http_status((enum iso_errcode)999), 500);
}

static void test_error_field_truncated(void **state)
{
	struct iso_error err = {0};
	char long_field[300];
	(void)state;

	memset(long_field, 'f', sizeof(long_field) - 1);
	long_field[sizeof(long_field) - 1] = '\0';
	iso_error_set(&err, ISO_E_INVALID, long_field, "m");
	assert_int_equal(strlen(err.field), sizeof(err.field) - 1);
}

static void test_names(void **state)
{
	(void)state;
	assert_true(iso_name_valid("acme"));
	assert_true(iso_name_valid("a"));
	assert_true(iso_name_valid("0day-labs.eu_1"));
	assert_false(iso_name_valid(""));
	assert_false(iso_name_valid("Acme"));
	assert_false(iso_name_valid("-acme"));
	assert_false(iso_name_valid(".acme"));
	assert_false(iso_name_valid("ac me"));
	assert_false(iso_name_valid("acme/x"));
	assert_false(iso_name_valid("ac\xc3\xa9"));
	char n63[64], n64[65];
	memset(n63, 'a', 63);
	n63[63] = '\0';
	memset(n64, 'a', 64);
	n64[64] = '\0';
	assert_true(iso_name_valid(n63));
	assert_false(iso_name_valid(n64));
}

static void test_guids(void **state)
{
	uint64_t g = 0;
	(void)state;

	assert_int_equal(iso_parse_guid("0x0002c90300a1b001", &g), 0);
	assert_true(g == UINT64_C(0x0002c90300a1b001));
	assert_int_equal(iso_parse_guid("0XFFFFFFFFFFFFFFFF", &g), 0);
	assert_true(g == UINT64_MAX);
	assert_int_equal(iso_parse_guid("0x1", &g), 0);
	assert_true(g == 1);
	assert_int_equal(iso_parse_guid("2c90300a1b001", &g), -EINVAL); /* no 0x: ambiguous */
	assert_int_equal(iso_parse_guid("0x", &g), -EINVAL);
	assert_int_equal(iso_parse_guid("0x10000000000000000", &g), -EINVAL); /* 17 digits */
	assert_int_equal(iso_parse_guid("0x12g4", &g), -EINVAL);
	assert_int_equal(iso_parse_guid("0x12 ", &g), -EINVAL);
	assert_int_equal(iso_parse_guid("-0x12", &g), -EINVAL);
}

static void test_strlcpy(void **state)
{
	char buf[4];
	(void)state;

	assert_int_equal(iso_strlcpy(buf, "abc", sizeof(buf)), 0);
	assert_string_equal(buf, "abc");
	assert_int_equal(iso_strlcpy(buf, "abcd", sizeof(buf)), -1);
	assert_string_equal(buf, "abc");
	assert_int_equal(iso_strlcpy(buf, "", sizeof(buf)), 0);
	assert_string_equal(buf, "");
}

static void test_time(void **state)
{
	char buf[40];
	(void)state;

	iso_format_time(0, buf, sizeof(buf));
	assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
	iso_format_time(INT64_C(1795305600123), buf, sizeof(buf));
	assert_string_equal(buf, "2026-11-22T00:00:00.123Z");
	assert_true(iso_now_ms() > INT64_C(1700000000000));
	uint64_t a = iso_mono_ns(), b = iso_mono_ns();
	assert_true(b >= a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_error_table), cmocka_unit_test(test_error_field_truncated),
	    cmocka_unit_test(test_names),       cmocka_unit_test(test_guids),
	    cmocka_unit_test(test_strlcpy),     cmocka_unit_test(test_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

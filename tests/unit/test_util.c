/* test_util.c: the shared helpers: error table, names, GUIDs, strings, time. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

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

static void test_idem_keys(void **state)
{
	char k128[129], k129[130];
	(void)state;

	assert_true(iso_idem_key_valid("slurm-42"));
	assert_true(iso_idem_key_valid("A.b_c:d-0"));
	assert_true(iso_idem_key_valid("x"));
	assert_false(iso_idem_key_valid(""));
	assert_false(iso_idem_key_valid("a b"));
	assert_false(iso_idem_key_valid("a/b"));
	assert_false(iso_idem_key_valid("a\"b"));
	assert_false(iso_idem_key_valid("a\tb"));
	assert_false(iso_idem_key_valid("caf\xc3\xa9"));
	memset(k128, 'K', 128);
	k128[128] = '\0';
	memset(k129, 'K', 129);
	k129[129] = '\0';
	assert_true(iso_idem_key_valid(k128));
	assert_false(iso_idem_key_valid(k129));
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

/* The GUID of a Neutron port (docs/openstack.md): from its MAC as mlx5 and
 * eswitchd derive it, or from its InfiniBand DHCP client-id. */
static void test_guid_from_mac_and_client_id(void **state)
{
	uint64_t g = 0;
	(void)state;

	assert_int_equal(iso_guid_from_mac("fa:16:3e:12:34:56", &g), 0);
	assert_true(g == UINT64_C(0xfa163e0000123456));
	assert_int_equal(iso_guid_from_mac("FA:16:3E:AB:cd:EF", &g), 0);
	assert_true(g == UINT64_C(0xfa163e0000abcdef));
	assert_int_equal(iso_guid_from_mac("fa:16:3e:12:34", &g), -EINVAL);
	assert_int_equal(iso_guid_from_mac("fa:16:3e:12:34:56:", &g), -EINVAL);
	assert_int_equal(iso_guid_from_mac("fa-16-3e-12-34-56", &g), -EINVAL);
	assert_int_equal(iso_guid_from_mac("fa:16:3e:12:34:5g", &g), -EINVAL);
	assert_int_equal(iso_guid_from_mac("fa:16:3e:1:234:56", &g), -EINVAL);
	assert_int_equal(iso_guid_from_mac("", &g), -EINVAL);
	assert_int_equal(iso_guid_from_mac(NULL, &g), -EINVAL);

	/* mech_mlnx.py's client-id for that MAC carries the same GUID */
	assert_int_equal(iso_guid_from_client_id(
	                     "ff:00:00:00:00:00:02:00:00:02:c9:00:fa:16:3e:00:00:12:34:56", &g),
	                 0);
	assert_true(g == UINT64_C(0xfa163e0000123456));
	/* another prefix (not an IB client-id), short, long */
	assert_int_equal(iso_guid_from_client_id(
	                     "01:00:00:00:00:00:02:00:00:02:c9:00:fa:16:3e:00:00:12:34:56", &g),
	                 -EINVAL);
	assert_int_equal(
	    iso_guid_from_client_id("ff:00:00:00:00:00:02:00:00:02:c9:00:fa:16:3e:00:00:12:34", &g),
	    -EINVAL);
	assert_int_equal(iso_guid_from_client_id(
	                     "ff:00:00:00:00:00:02:00:00:02:c9:00:fa:16:3e:00:00:12:34:56:78", &g),
	                 -EINVAL);
	assert_int_equal(iso_guid_from_client_id("fa:16:3e:12:34:56", &g), -EINVAL);
}

/* IPv4 in the one canonical dotted-quad form: what two agents report for
 * one address compares equal as text. */
static void test_ipv4(void **state)
{
	uint32_t a = 0;
	(void)state;

	assert_int_equal(iso_parse_ipv4("192.0.2.12", &a), 0);
	assert_true(a == 0xc000020cu);
	assert_int_equal(iso_parse_ipv4("0.0.0.0", &a), 0);
	assert_true(a == 0);
	assert_int_equal(iso_parse_ipv4("255.255.255.255", &a), 0);
	assert_true(a == 0xffffffffu);
	static const char *const bad[] = {
	    "",         "1.2.3",    "1.2.3.4.5", "256.0.0.1",  "01.2.3.4",  "1.2.3.04",   "1..3.4",
	    "1.2.3.4 ", " 1.2.3.4", "1.2.3.-4",  "1.2.3.1000", "0x1.2.3.4", "1.2.3.4/24", "::1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (iso_parse_ipv4(bad[i], &a) != -EINVAL)
			fail_msg("\"%s\" accepted", bad[i]);
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

/* What iso_log wrote to stderr for one call (stderr pointed at a temp file). */
#define CAPTURE_LOG(buf, ...)                                                                      \
	do {                                                                                       \
		FILE *tmp_ = tmpfile();                                                            \
		int saved_ = dup(2);                                                               \
		assert_non_null(tmp_);                                                             \
		fflush(stderr);                                                                    \
		dup2(fileno(tmp_), 2);                                                             \
		iso_log(__VA_ARGS__);                                                              \
		fflush(stderr);                                                                    \
		dup2(saved_, 2);                                                                   \
		close(saved_);                                                                     \
		rewind(tmp_);                                                                      \
		size_t n_ = fread((buf), 1, sizeof(buf) - 1, tmp_);                                \
		(buf)[n_] = '\0';                                                                  \
		fclose(tmp_);                                                                      \
	} while (0)

/* The part after "TS level=L event=E ". */
static const char *fields_of(const char *line)
{
	const char *p = strstr(line, " event=");
	assert_non_null(p);
	p = strchr(p + 1, ' ');
	assert_non_null(p);
	return p + 1;
}

static void test_escape(void **state)
{
	char out[64];
	(void)state;

	assert_int_equal(iso_escape(out, sizeof(out), "plain é", 8, 0), 0);
	assert_string_equal(out, "plain é");
	assert_int_equal(iso_escape(out, sizeof(out), "a\nb\rc\td\x1b[31m", 12, 0), 0);
	assert_string_equal(out, "a\\nb\\rc\\td\\x1b[31m");
	assert_int_equal(iso_escape(out, sizeof(out), "q\"b\\", 4, 0), 0);
	assert_string_equal(out, "q\"b\\\\");
	assert_int_equal(iso_escape(out, sizeof(out), "q\"b\\", 4, ISO_ESCAPE_QUOTE), 0);
	assert_string_equal(out, "q\\\"b\\\\");
	/* Not UTF-8: a lone continuation, an overlong '/', a surrogate, a cut
	 * sequence; DEL and a C1 control; U+2028 and a bidi override. */
	assert_int_equal(iso_escape(out, sizeof(out), "\x80\xc0\xaf\xed\xa0\x80\xc3", 7, 0), 0);
	assert_string_equal(out, "\\x80\\xc0\\xaf\\xed\\xa0\\x80\\xc3");
	assert_int_equal(
	    iso_escape(out, sizeof(out), "\x7f\xc2\x85|\xe2\x80\xa8|\xe2\x80\xae", 11, 0), 0);
	assert_string_equal(out, "\\x7f\\u0085|\\u2028|\\u202e");
	/* NUL inside the given length is escaped too. */
	assert_int_equal(iso_escape(out, sizeof(out), "a\0b", 3, 0), 0);
	assert_string_equal(out, "a\\x00b");
	/* Cut between whole escapes, never inside one. */
	assert_int_equal(iso_escape(out, 6, "ab\ncd", 5, 0), -1);
	assert_string_equal(out, "ab\\nc");
	assert_int_equal(iso_escape(out, 4, "a\x01", 2, 0), -1);
	assert_string_equal(out, "a");
	assert_int_equal(iso_escape(out, 4, "\xc3\xa9\xc3\xa9", 4, 0), -1);
	assert_string_equal(out, "\xc3\xa9");

	assert_true(iso_text_valid("GPU team, room 4 — bâtiment B \"x\" \\"));
	assert_true(iso_text_valid(""));
	assert_false(iso_text_valid("line\nbreak"));
	assert_false(iso_text_valid("esc\x1b[2J"));
	assert_false(iso_text_valid("bad \xc3"));
	assert_false(iso_text_valid("rlo \xe2\x80\xae"));
	assert_false(iso_text_valid("c1 \xc2\x9b"));
}

static void test_log_escapes_values(void **state)
{
	char buf[4096];
	(void)state;

	/* The forged-line attack: a decoded %0A in a quoted path. */
	CAPTURE_LOG(buf, ISO_LOG_INFO, "http", "path=\"%.200s\" status=%d",
	            "/v1/x\n2026-01-01T00:00:00.000Z level=info event=tenant_deleted tenant=acme",
	            404);
	assert_non_null(strchr(buf, '\n'));
	assert_true(strchr(buf, '\n') == buf + strlen(buf) - 1); /* one line */
	assert_string_equal(fields_of(buf), "path=\"/v1/x\\n2026-01-01T00:00:00.000Z level=info "
	                                    "event=tenant_deleted tenant=acme\" status=404\n");

	/* Quotes and backslashes in a quoted value; CR and ESC. */
	CAPTURE_LOG(buf, ISO_LOG_WARN, "e", "msg=\"%s\" n=%u", "say \"hi\" \\ \r\x1b[2J", 7u);
	assert_string_equal(fields_of(buf), "msg=\"say \\\"hi\\\" \\\\ \\r\\x1b[2J\" n=7\n");

	/* A bare value that would start a field of its own is quoted. */
	CAPTURE_LOG(buf, ISO_LOG_INFO, "e", "tenant=%s by=%s", "acme event=tenant_deleted", "ok");
	assert_string_equal(fields_of(buf), "tenant=\"acme event=tenant_deleted\" by=ok\n");

	/* Non-UTF-8 bytes; precision from an argument; numbers of every width. */
	CAPTURE_LOG(buf, ISO_LOG_INFO, "e",
	            "id=%.*s raw=%s a=%lld b=%llu c=%zu d=%04o e=%016llx f=%.1f g=%c h=%%", 3,
	            "abcdef", "\xff\xfe", -5LL, 18446744073709551615ULL, (size_t)42, 8u, 0xabcULL,
	            2.25, 'x');
	assert_string_equal(fields_of(buf),
	                    "id=abc raw=\\xff\\xfe a=-5 b=18446744073709551615 c=42 "
	                    "d=0010 e=0000000000000abc f=2.2 g=x h=%\n");

	/* NULL prints as (null); the event name is escaped too. */
	const char *volatile none = NULL;
	CAPTURE_LOG(buf, ISO_LOG_INFO, "ev\nx", "v=%s", none);
	assert_non_null(strstr(buf, " event=ev\\nx v=(null)\n"));
}

static void test_log_long_line_is_cut_whole(void **state)
{
	char buf[8192], big[5000];
	(void)state;

	memset(big, '\n', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CAPTURE_LOG(buf, ISO_LOG_INFO, "e", "msg=\"%s\" after=1", big);
	size_t n = strlen(buf);
	assert_true(n <= 2048);
	assert_true(strchr(buf, '\n') == buf + n - 1);
	/* Cut after a whole escape, marked, and the quote closed. */
	assert_memory_equal(buf + n - 7, "\\n...\"\n", 7);
	assert_null(strstr(buf, "after="));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_error_table),
	    cmocka_unit_test(test_error_field_truncated),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_idem_keys),
	    cmocka_unit_test(test_guids),
	    cmocka_unit_test(test_guid_from_mac_and_client_id),
	    cmocka_unit_test(test_ipv4),
	    cmocka_unit_test(test_strlcpy),
	    cmocka_unit_test(test_time),
	    cmocka_unit_test(test_escape),
	    cmocka_unit_test(test_log_escapes_values),
	    cmocka_unit_test(test_log_long_line_is_cut_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_smfile.c: the fence of the SM's partitions.conf (include/isostack/
 * smfile.h). The header a file written by the SM agent carries, read back
 * strictly (every bad header refused naming line 1 and what is wrong); the
 * refusal rule (a lower term, a lower generation of the same term); the
 * check of a document's text; the SM document and report codecs; the log
 * scanner both the opensm driver and the SM agent use; and whether the SM
 * runs: its pid file, the four states, GET /v1/fabric/health's codec. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/codec.h"
#include "isostack/smfile.h"

static void test_header_round_trip(void **state)
{
	struct iso_sm_mark m = {7, (7ULL << 32) | 3}, back;
	char buf[256], text[512];
	struct iso_error err = {0};
	size_t off;
	bool has;
	int n;

	(void)state;
	n = iso_sm_header_format(buf, sizeof(buf), &m);
	assert_true(n > 0);
	assert_string_equal(buf,
	                    "# isostack term 7 generation 30064771075: do not edit; written by "
	                    "isostack-agent\n");
	snprintf(text, sizeof(text), "%sDefault=0x7fff, ipoib : ALL=limited, SELF=full ;\n", buf);
	assert_int_equal(iso_sm_header_parse("p.conf", text, strlen(text), &back, &has, &off, &err),
	                 0);
	assert_true(has);
	assert_int_equal(back.term, 7);
	assert_int_equal(back.generation, m.generation);
	assert_int_equal(off, (size_t)n);
	assert_int_equal(iso_sm_header_format(buf, 10, &m), -ENOSPC);
}

static void test_header_absent(void **state)
{
	static const char *const none[] = {
	    "",
	    "# isostack generation 4: do not edit; written by isostackd\nDefault=0x7fff : ALL ;\n",
	    "Default=0x7fff : ALL ;\n",
	    "# isostack ter 5\n",
	};
	struct iso_sm_mark m = {9, 9};
	struct iso_error err = {0};
	size_t off = 9;
	bool has = true;

	(void)state;
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		assert_int_equal(
		    iso_sm_header_parse("p.conf", none[i], strlen(none[i]), &m, &has, &off, &err),
		    0);
		assert_false(has);
		assert_int_equal(m.term, 0);
		assert_int_equal(off, 0);
	}
}

static void test_header_bad(void **state)
{
	static const struct {
		const char *text, *what;
	} bad[] = {
	    {"# isostack term\n", "decimal term"},
	    {"# isostack term x generation 1: do not edit; written by isostack-agent\n",
	     "decimal term"},
	    {"# isostack term 07 generation 1: do not edit; written by isostack-agent\n",
	     "decimal term"},
	    {"# isostack term -1 generation 1: do not edit; written by isostack-agent\n",
	     "decimal term"},
	    {"# isostack term 2147483648 generation 1: do not edit; written by isostack-agent\n",
	     "decimal term"},
	    {"# isostack term 5 gen 1: do not edit; written by isostack-agent\n", "generation"},
	    {"# isostack term 5 generation 9223372036854775808: do not edit; written by "
	     "isostack-agent\n",
	     "generation"},
	    {"# isostack term 5 generation 1\n", "end of the line"},
	    {"# isostack term 5 generation 1: do not edit; written by isostack-agent \n",
	     "end of the line"},
	    {"# isostack term 5 generation 1: do not edit; written by isostack-agent",
	     "no newline"},
	    {"# isostack term 5  generation 1: do not edit; written by isostack-agent\n",
	     "generation"},
	};
	struct iso_sm_mark m;
	size_t off;
	bool has;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct iso_error err = {0};
		int r = iso_sm_header_parse("/etc/opensm/partitions.conf", bad[i].text,
		                            strlen(bad[i].text), &m, &has, &off, &err);

		assert_int_equal(r, -EINVAL);
		assert_false(has);
		assert_string_equal(err.field, "header");
		assert_non_null(strstr(err.message, "/etc/opensm/partitions.conf:1: header: "));
		if (!strstr(err.message, bad[i].what))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.message, bad[i].what);
	}
}

static void test_accept(void **state)
{
	struct iso_sm_mark high = {5, (5ULL << 32) | 4};
	struct iso_sm_mark lower_term = {4, (4ULL << 32) | 99}, lower_gen = {5, (5ULL << 32) | 3},
	                   same = high, newer_gen = {5, (5ULL << 32) | 5},
	                   newer_term = {6, (6ULL << 32) | 1};
	struct iso_error err = {0};

	(void)state;
	assert_int_equal(iso_sm_accept(&high, &lower_term, &err), -EEXIST);
	assert_int_equal(err.code, ISO_E_CONFLICT);
	assert_string_equal(err.field, "term");
	assert_non_null(strstr(err.message, "term 4 is below term 5"));
	memset(&err, 0, sizeof(err));
	assert_int_equal(iso_sm_accept(&high, &lower_gen, &err), -EEXIST);
	assert_string_equal(err.field, "generation");
	assert_int_equal(iso_sm_accept(&high, &same, NULL), 1);
	assert_int_equal(iso_sm_accept(&high, &newer_gen, NULL), 0);
	assert_int_equal(iso_sm_accept(&high, &newer_term, NULL), 0);
	/* nothing written yet: every document is newer */
	assert_int_equal(iso_sm_accept(&(struct iso_sm_mark){0}, &lower_term, NULL), 0);
	assert_int_equal(iso_sm_mark_max(high, lower_term).term, 5);
	assert_int_equal(iso_sm_mark_max(lower_gen, high).generation, high.generation);
	assert_int_equal(iso_sm_mark_max(high, newer_term).term, 6);
}

static void test_text_check(void **state)
{
	static const struct {
		const char *text, *what;
	} bad[] = {
	    {"", "0 bytes"},
	    {"Default=0x7fff : ALL ;", "does not end in a newline"},
	    {"Default=0x7fff : ALL ;\n# isostack term 9 generation 1\n", "line 2 starts"},
	    {"# isostack term 1 generation 1: do not edit; written by isostack-agent\n",
	     "line 1 starts"},
	    {"a\nb\x01\n", "line 2 holds byte 0x01"},
	    {"a\r\n", "byte 0x0d"},
	    {"caf\xc3\xa9\n", "byte 0xc3"},
	};
	struct iso_error err = {0};

	(void)state;
	assert_int_equal(iso_sm_text_check("text", "# isostack generation 1\nDefault=0x7fff\t:\n",
	                                   strlen("# isostack generation 1\nDefault=0x7fff\t:\n"),
	                                   &err),
	                 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_sm_text_check("text", bad[i].text, strlen(bad[i].text), &err),
		                 -EINVAL);
		assert_string_equal(err.field, "text");
		if (!strstr(err.message, bad[i].what))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.message, bad[i].what);
	}
}

static json_t *load(const char *s)
{
	json_t *j = json_loads(s, 0, NULL);

	assert_non_null(j);
	return j;
}

static void test_document_codec(void **state)
{
	struct iso_sm_document d = {.term = 3,
	                            .generation = (3ULL << 32) | 2,
	                            .text = strdup("Default=0x7fff : ALL ;\n")},
	                       back;
	struct iso_error err = {0};
	json_t *j = iso_codec_sm_document_encode(&d);
	static const struct {
		const char *json, *field;
	} bad[] = {
	    {"{\"term\":3,\"generation\":12884901890}", "text"},
	    {"{\"term\":0,\"generation\":2,\"text\":\"a\\n\"}", "term"},
	    {"{\"term\":3,\"generation\":2,\"text\":\"a\\n\"}", "generation"},
	    {"{\"term\":3,\"generation\":12884901890,\"text\":\"a\"}", "text"},
	    {"{\"term\":3,\"generation\":12884901890,\"text\":7}", "text"},
	    {"{\"term\":3,\"generation\":12884901890,\"text\":\"a\\n\",\"x\":1}", "x"},
	    {"{\"term\":2147483648,\"generation\":12884901890,\"text\":\"a\\n\"}", "term"},
	};

	(void)state;
	assert_int_equal(iso_codec_sm_document_decode(j, &back, &err), 0);
	assert_int_equal(back.term, 3);
	assert_int_equal(back.generation, d.generation);
	assert_string_equal(back.text, d.text);
	json_decref(j);
	iso_codec_sm_document_clear(&back);
	iso_codec_sm_document_clear(&d);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *b = load(bad[i].json);

		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_codec_sm_document_decode(b, &back, &err), -EINVAL);
		assert_null(back.text);
		if (strcmp(err.field, bad[i].field) != 0)
			fail_msg("case %zu: field \"%s\", want \"%s\" (%s)", i, err.field,
			         bad[i].field, err.message);
		json_decref(b);
	}
}

static void test_report_codec(void **state)
{
	struct iso_sm_report r = {.version = "0.9.0",
	                          .term = 4,
	                          .generation = (4ULL << 32) | 1,
	                          .refused = true,
	                          .refused_term = 3,
	                          .refused_generation = (3ULL << 32) | 9,
	                          .refused_reason = "term 3 is below term 4",
	                          .incident = true,
	                          .incident_generation = (4ULL << 32) | 1,
	                          .incident_line = "ERR 0512: table full",
	                          .has_sm_alive = true,
	                          .sm_alive = false},
	                     back;
	struct iso_error err = {0};
	json_t *j = iso_codec_sm_report_encode(&r);
	static const struct {
		const char *json, *field;
	} bad[] = {
	    {"{\"term\":1,\"generation\":1}", "version"},
	    {"{\"version\":\"v\",\"term\":-1,\"generation\":1}", "term"},
	    {"{\"version\":\"v\",\"term\":1,\"generation\":1,\"refused\":{\"term\":1,"
	     "\"generation\":1}}",
	     "refused.reason"},
	    {"{\"version\":\"v\",\"term\":1,\"generation\":1,\"incident\":{\"generation\":0,"
	     "\"line\":\"x\"}}",
	     "incident.generation"},
	    {"{\"version\":\"v\",\"term\":1,\"generation\":1,\"incident\":{\"generation\":1,"
	     "\"line\":\"x\\u0001\"}}",
	     "incident.line"},
	    {"{\"version\":\"v\",\"term\":1,\"generation\":1,\"incident\":[]}", "incident"},
	    /* whether OpenSM runs: a boolean, nothing else */
	    {"{\"version\":\"v\",\"term\":1,\"generation\":1,\"sm_alive\":1}", "sm_alive"},
	    {"{\"version\":\"v\",\"term\":1,\"generation\":1,\"sm_alive\":\"true\"}", "sm_alive"},
	    {"{\"version\":\"v\",\"term\":1,\"generation\":1,\"sm_alive\":{}}", "sm_alive"},
	};

	(void)state;
	assert_int_equal(iso_codec_sm_report_decode(j, &back, &err), 0);
	json_decref(j);
	assert_memory_equal(&back, &r, sizeof(r));
	/* sm_alive true goes as true; an older agent's report has none (and
	 * null is none) */
	r.sm_alive = true;
	j = iso_codec_sm_report_encode(&r);
	assert_true(json_is_true(json_object_get(j, "sm_alive")));
	assert_int_equal(iso_codec_sm_report_decode(j, &back, &err), 0);
	assert_true(back.has_sm_alive && back.sm_alive);
	json_decref(j);
	r.has_sm_alive = false;
	j = iso_codec_sm_report_encode(&r);
	assert_null(json_object_get(j, "sm_alive"));
	json_decref(j);
	for (int i = 0; i < 2; i++) {
		j = load(i ? "{\"version\":\"v\",\"term\":1,\"generation\":1,\"sm_alive\":null}"
		           : "{\"version\":\"v\",\"term\":1,\"generation\":1}");
		assert_int_equal(iso_codec_sm_report_decode(j, &back, &err), 0);
		assert_false(back.has_sm_alive);
		json_decref(j);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *b = load(bad[i].json);

		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_codec_sm_report_decode(b, &back, &err), -EINVAL);
		if (strcmp(err.field, bad[i].field) != 0)
			fail_msg("case %zu: field \"%s\", want \"%s\" (%s)", i, err.field,
			         bad[i].field, err.message);
		json_decref(b);
	}
}

static void test_log_scan(void **state)
{
	char path[] = "/tmp/test-smlog-XXXXXX", line[200];
	struct iso_sm_log w = {0};
	FILE *f;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	iso_strlcpy(w.path, path, sizeof(w.path));
	f = fopen(path, "w");
	fputs("old: ERR 0512: before the mark\n", f);
	fclose(f);
	iso_sm_log_mark(&w);
	assert_false(iso_sm_log_scan(&w, line, sizeof(line)));
	f = fopen(path, "a");
	fputs("fine\nosm_prtn: Partition configuration in error; retrying with default config\n",
	      f);
	fclose(f);
	assert_true(iso_sm_log_scan(&w, line, sizeof(line)));
	assert_string_equal(
	    line, "osm_prtn: Partition configuration in error; retrying with default config");
	assert_false(iso_sm_log_scan(&w, line, sizeof(line)));
	/* truncated (OpenSM restarted): read from the start again */
	f = fopen(path, "w");
	fputs("ERR 0507\n", f);
	fclose(f);
	assert_true(iso_sm_log_scan(&w, line, sizeof(line)));
	assert_string_equal(line, "ERR 0507");
	unlink(path);
	w.path[0] = '\0';
	assert_false(iso_sm_log_scan(&w, line, sizeof(line)));
}

static void test_pid_alive(void **state)
{
	char path[] = "/tmp/test-smpid-XXXXXX";
	int fd = mkstemp(path);
	pid_t child;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(iso_sm_pid_alive(NULL), 0);
	assert_int_equal(iso_sm_pid_alive(""), 0);
	assert_int_equal(iso_sm_pid_alive("/nonexistent/opensm.pid"), 0);
	/* empty, not a number, pid 1 and below, beyond a pid_t */
	static const char *const bad[] = {"", "opensm\n", "1\n", "0\n", "-5\n", "4294967297\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		f = fopen(path, "w");
		fputs(bad[i], f);
		fclose(f);
		if (iso_sm_pid_alive(path) != 0)
			fail_msg("case %zu: \"%s\" read as a live SM", i, bad[i]);
	}
	f = fopen(path, "w");
	fprintf(f, "%ld\n", (long)getpid());
	fclose(f);
	assert_int_equal(iso_sm_pid_alive(path), getpid());
	/* a process that was and is no more */
	child = fork();
	if (child == 0)
		_exit(0);
	assert_true(child > 0);
	waitpid(child, NULL, 0);
	f = fopen(path, "w");
	fprintf(f, "%ld\n", (long)child);
	fclose(f);
	assert_int_equal(iso_sm_pid_alive(path), 0);
	unlink(path);
}

static void test_sm_state(void **state)
{
	static const char *const names[] = {"none", "unknown", "up", "down"};
	struct iso_sm_health h = {0};
	enum iso_sm_state st;

	(void)state;
	for (int i = 0; i < 4; i++) {
		assert_string_equal(iso_sm_state_name((enum iso_sm_state)i), names[i]);
		assert_int_equal(iso_sm_state_parse(names[i], &st), 0);
		assert_int_equal(st, i);
	}
	assert_int_equal(iso_sm_state_parse("UP", &st), -EINVAL);
	assert_int_equal(iso_sm_state_parse(NULL, &st), -EINVAL);
	/* since moves with the state only */
	iso_sm_health_set(&h, ISO_SM_STATE_UP, "", 1000);
	iso_sm_health_set(&h, ISO_SM_STATE_UP, "a standby is down", 2000);
	assert_int_equal(h.since_ms, 1000);
	assert_string_equal(h.reason, "a standby is down");
	iso_sm_health_set(&h, ISO_SM_STATE_DOWN, "gone", 3000);
	assert_int_equal(h.since_ms, 3000);
	assert_int_equal(h.state, ISO_SM_STATE_DOWN);
}

static void assert_health_equal(const struct iso_fabric_health *a,
                                const struct iso_fabric_health *b)
{
	assert_string_equal(a->driver, b->driver);
	assert_int_equal(a->sm.state, b->sm.state);
	assert_string_equal(a->sm.reason, b->sm.reason);
	assert_int_equal(a->sm.since_ms, b->sm.since_ms);
	assert_int_equal(a->full, b->full);
	assert_int_equal(a->generation, b->generation);
	assert_int_equal(a->applied, b->applied);
	assert_int_equal(a->confirmed, b->confirmed);
	assert_int_equal(a->incident, b->incident);
}

static void test_health_codec(void **state)
{
	struct iso_fabric_health h = {.driver = "opensm",
	                              .sm = {ISO_SM_STATE_DOWN, "OpenSM is not running",
	                                     1735787045678},
	                              .full = true,
	                              .generation = 7,
	                              .applied = 6,
	                              .confirmed = 5,
	                              .incident = true},
	                         back;
	struct iso_error err = {0};
	json_t *j = iso_codec_fabric_health_encode(&h);
	static const struct {
		const char *json, *field;
	} bad[] = {
	    {"[]", ""},
	    {"{\"sm\":{\"state\":\"up\",\"reason\":\"\",\"since\":\"2025-01-02T03:04:05.678Z\"}}",
	     "driver"},
	    {"{\"driver\":\"\",\"sm\":{}}", "driver"},
	    {"{\"driver\":\"opensm\"}", "sm"},
	    {"{\"driver\":\"opensm\",\"sm\":\"up\"}", "sm"},
	    {"{\"driver\":\"opensm\",\"sm\":{\"state\":\"UP\",\"reason\":\"\",\"since\":"
	     "\"2025-01-02T03:04:05.678Z\"}}",
	     "sm.state"},
	    {"{\"driver\":\"opensm\",\"sm\":{\"state\":1,\"reason\":\"\",\"since\":"
	     "\"2025-01-02T03:04:05.678Z\"}}",
	     "sm.state"},
	    {"{\"driver\":\"opensm\",\"sm\":{\"state\":\"up\",\"since\":"
	     "\"2025-01-02T03:04:05.678Z\"}}",
	     "sm.reason"},
	    {"{\"driver\":\"opensm\",\"sm\":{\"state\":\"up\",\"reason\":\"a\\u0007\",\"since\":"
	     "\"2025-01-02T03:04:05.678Z\"}}",
	     "sm.reason"},
	    {"{\"driver\":\"opensm\",\"sm\":{\"state\":\"up\",\"reason\":\"\",\"since\":"
	     "\"2025-02-30T03:04:05.678Z\"}}",
	     "sm.since"},
	    {"{\"driver\":\"opensm\",\"sm\":{\"state\":\"up\",\"reason\":\"\",\"since\":"
	     "\"2025-01-02 03:04:05\"}}",
	     "sm.since"},
	    {"{\"driver\":\"opensm\",\"sm\":{\"state\":\"up\",\"reason\":\"\",\"since\":7}}",
	     "sm.since"},
	    {"{\"driver\":\"opensm\",\"sm\":{\"state\":\"up\",\"reason\":\"\",\"since\":"
	     "\"2025-01-02T03:04:05.678Z\",\"pkeys\":[]}}",
	     "sm.pkeys"},
	    {"{\"driver\":\"opensm\",\"tenants\":2,\"sm\":{\"state\":\"up\",\"reason\":\"\","
	     "\"since\":\"2025-01-02T03:04:05.678Z\"}}",
	     "tenants"},
	    /* the full answer: all four or none */
	    {"{\"driver\":\"opensm\",\"generation\":1,\"sm\":{\"state\":\"up\",\"reason\":\"\","
	     "\"since\":\"2025-01-02T03:04:05.678Z\"}}",
	     "applied"},
	    {"{\"driver\":\"opensm\",\"generation\":1,\"applied\":1,\"confirmed\":1,"
	     "\"incident\":0,\"sm\":{\"state\":\"up\",\"reason\":\"\","
	     "\"since\":\"2025-01-02T03:04:05.678Z\"}}",
	     "incident"},
	    {"{\"driver\":\"opensm\",\"generation\":-1,\"applied\":1,\"confirmed\":1,"
	     "\"incident\":false,\"sm\":{\"state\":\"up\",\"reason\":\"\","
	     "\"since\":\"2025-01-02T03:04:05.678Z\"}}",
	     "generation"},
	};

	(void)state;
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "sm"), "since")),
	                    "2025-01-02T03:04:05.678Z");
	assert_int_equal(iso_codec_fabric_health_decode(j, &back, &err), 0);
	json_decref(j);
	assert_health_equal(&back, &h);
	/* a node agent's answer: the small body */
	h.full = false;
	h.generation = h.applied = h.confirmed = 0;
	h.incident = false;
	j = iso_codec_fabric_health_encode(&h);
	assert_int_equal(json_object_size(j), 2);
	assert_int_equal(iso_codec_fabric_health_decode(j, &back, &err), 0);
	json_decref(j);
	assert_health_equal(&back, &h);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *b = json_loads(bad[i].json, JSON_DECODE_ANY, NULL);

		assert_non_null(b);
		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_codec_fabric_health_decode(b, &back, &err), -EINVAL);
		assert_int_equal(back.sm.state, 0);
		assert_string_equal(back.driver, "");
		if (strcmp(err.field, bad[i].field) != 0)
			fail_msg("case %zu: field \"%s\", want \"%s\" (%s)", i, err.field,
			         bad[i].field, err.message);
		if (bad[i].field[0] && !strstr(err.message, bad[i].field))
			fail_msg("case %zu: \"%s\" does not name %s", i, err.message, bad[i].field);
		json_decref(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_header_round_trip), cmocka_unit_test(test_header_absent),
	    cmocka_unit_test(test_header_bad),        cmocka_unit_test(test_accept),
	    cmocka_unit_test(test_text_check),        cmocka_unit_test(test_document_codec),
	    cmocka_unit_test(test_report_codec),      cmocka_unit_test(test_log_scan),
	    cmocka_unit_test(test_pid_alive),         cmocka_unit_test(test_sm_state),
	    cmocka_unit_test(test_health_codec),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_audit.c: the audit module: canonical encoding against golden strings
 * made with Python's json.dumps, RFC 6962 hashing and proofs against the
 * published certificate-transparency / transparency-dev vectors and a direct
 * transcription of the RFC's recursive definitions, signed heads, key files,
 * and offline verification of exports with one test per kind of tampering. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "isostack/audit.h"

typedef uint8_t hash_t[ISO_AUDIT_HASH_LEN];

static void unhex(const char *s, uint8_t *out, size_t n)
{
	size_t got = 0;

	assert_int_equal(sodium_hex2bin(out, n, s, strlen(s), NULL, &got, NULL), 0);
	assert_int_equal(got, n);
}

static void assert_hash_hex(const uint8_t *h, const char *hex)
{
	char buf[2 * ISO_AUDIT_HASH_LEN + 1];

	sodium_bin2hex(buf, sizeof(buf), h, ISO_AUDIT_HASH_LEN);
	assert_string_equal(buf, hex);
}

/* ---- canonical encoding ---- */

static void set(char *dst, size_t size, const char *src)
{
	assert_int_equal(snprintf(dst, size, "%s", src), (int)strlen(src));
}
#define SET(field, value) set((field), sizeof(field), (value))

static void event_minimal(struct iso_audit_event *e)
{
	memset(e, 0, sizeof(*e));
}

static void event_realistic(struct iso_audit_event *e)
{
	memset(e, 0, sizeof(*e));
	SET(e->action, "allocation.place");
	SET(e->actor_role, "tenant-admin");
	SET(e->actor_tenant, "acme");
	SET(e->actor_token, "0123456789ab");
	SET(e->object_id, "a-0000000000000001");
	SET(e->object_kind, "allocation");
	SET(e->object_tenant, "acme");
	SET(e->request_id, "r-00ff");
	SET(e->source, "10.0.0.7:51234");
	e->object_tenant_id = 3; /* not encoded */
	e->seq = 42;
	e->time_ms = 1795000000123;
	e->details = strdup("{\"profile\": \"1g.10gb\", \"gpus\": 2,\n \"nested\": {\"z\": [1, -2, "
	                    "true, false, null], \"a\": \"x\"}, \"empty\": {}, \"list\": []}");
}

static void event_escapes(struct iso_audit_event *e)
{
	memset(e, 0, sizeof(*e));
	SET(e->action, "tenant.create");
	SET(e->actor_role, "cluster-admin");
	SET(e->object_id, "t/1");
	SET(e->object_kind, "tenant");
	SET(e->source, "[::1]:8080");
	SET(e->reason, "q\" b\\ s/ t\t n\n r\r b\b f\f c\x01 u\x1f d\x7f e\xc3\xa9 "
	               "euro\xe2\x82\xac smile\xf0\x9f\x98\x80");
	e->outcome = ISO_AUDIT_DENIED;
	e->seq = 7;
	e->time_ms = -5;
	e->details = strdup("{\"z\": \"nul\\u0000x\", \"\xc3\xa9\": 1, \"A\": \"upper\", \"e\": 2, "
	                    "\"\\uffff\": \"max bmp\", \"\\ud83d\\ude00\": \"astral\", "
	                    "\"\\u007f\": \"del\"}");
}

static void event_extremes(struct iso_audit_event *e)
{
	memset(e, 0, sizeof(*e));
	SET(e->action, "x");
	SET(e->actor_role, "system");
	SET(e->object_kind, "daemon");
	SET(e->reason, "boom");
	e->outcome = ISO_AUDIT_ERROR;
	e->seq = INT64_MAX;
	e->time_ms = INT64_MAX;
	e->details = strdup("{\"zero\":0,\"small\":-9223372036854775808,"
	                    "\"big\":9223372036854775807,\"s\":\"\\u2028\\u2029\"}");
}

/* Made with: json.dumps(obj, sort_keys=True, separators=(",", ":"),
 * ensure_ascii=True) on the same values (Python 3.11). */
static const struct {
	void (*make)(struct iso_audit_event *e);
	const char *want;
} golden[] = {
    {event_minimal,
     "{\"action\":\"\",\"actor\":{\"role\":\"\",\"tenant\":\"\",\"token\":\"\"},\"details\":{},"
     "\"object\":{\"id\":\"\",\"kind\":\"\",\"tenant\":\"\"},\"outcome\":\"success\",\"reason\":"
     "\"\",\"request_id\":\"\",\"seq\":0,\"source\":\"\",\"time\":0}"},
    {event_realistic,
     "{\"action\":\"allocation.place\",\"actor\":{\"role\":\"tenant-admin\",\"tenant\":\"acme\","
     "\"token\":\"0123456789ab\"},\"details\":{\"empty\":{},\"gpus\":2,\"list\":[],\"nested\":{"
     "\"a\":\"x\",\"z\":[1,-2,true,false,null]},\"profile\":\"1g.10gb\"},\"object\":{\"id\":\"a-"
     "0000000000000001\",\"kind\":\"allocation\",\"tenant\":\"acme\"},\"outcome\":\"success\","
     "\"reason\":\"\",\"request_id\":\"r-00ff\",\"seq\":42,\"source\":\"10.0.0.7:51234\","
     "\"time\":1795000000123}"},
    {event_escapes,
     "{\"action\":\"tenant.create\",\"actor\":{\"role\":\"cluster-admin\",\"tenant\":\"\","
     "\"token\":\"\"},\"details\":{\"A\":\"upper\",\"e\":2,\"z\":\"nul\\u0000x\",\"\\u007f\":"
     "\"del\",\"\\u00e9\":1,\"\\uffff\":\"max bmp\",\"\\ud83d\\ude00\":\"astral\"},\"object\":{"
     "\"id\":\"t/1\",\"kind\":\"tenant\",\"tenant\":\"\"},\"outcome\":\"denied\",\"reason\":\"q\\\""
     " b\\\\ s/ t\\t n\\n r\\r b\\b f\\f c\\u0001 u\\u001f d\\u007f e\\u00e9 euro\\u20ac smile\\u"
     "d83d\\ude00\",\"request_id\":\"\",\"seq\":7,\"source\":\"[::1]:8080\",\"time\":-5}"},
    {event_extremes,
     "{\"action\":\"x\",\"actor\":{\"role\":\"system\",\"tenant\":\"\",\"token\":\"\"},\"details\":"
     "{\"big\":9223372036854775807,\"s\":\"\\u2028\\u2029\",\"small\":-9223372036854775808,"
     "\"zero\":0},\"object\":{\"id\":\"\",\"kind\":\"daemon\",\"tenant\":\"\"},\"outcome\":"
     "\"error\",\"reason\":\"boom\",\"request_id\":\"\",\"seq\":9223372036854775807,\"source\":"
     "\"\",\"time\":9223372036854775807}"},
};

static void test_outcome_names(void **state)
{
	(void)state;
	assert_string_equal(iso_audit_outcome_name(ISO_AUDIT_SUCCESS), "success");
	assert_string_equal(iso_audit_outcome_name(ISO_AUDIT_DENIED), "denied");
	assert_string_equal(iso_audit_outcome_name(ISO_AUDIT_ERROR), "error");
	assert_string_equal(iso_audit_outcome_name((enum iso_audit_outcome)9), "invalid");
}

static void test_encode_golden(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
		struct iso_audit_event e, back;
		struct iso_error err = {0};
		char *out = NULL, *again = NULL;
		size_t len = 0, again_len = 0;

		golden[i].make(&e);
		assert_int_equal(iso_audit_event_encode(&e, &out, &len, &err), 0);
		assert_string_equal(out, golden[i].want);
		assert_int_equal(len, strlen(golden[i].want));

		/* Decoding gives the same event back, details in canonical form. */
		assert_int_equal(iso_audit_event_decode(out, len, &back, &err), 0);
		assert_int_equal(back.seq, e.seq);
		assert_int_equal(back.time_ms, e.time_ms);
		assert_int_equal(back.outcome, e.outcome);
		assert_string_equal(back.action, e.action);
		assert_string_equal(back.actor_role, e.actor_role);
		assert_string_equal(back.actor_tenant, e.actor_tenant);
		assert_string_equal(back.actor_token, e.actor_token);
		assert_string_equal(back.object_id, e.object_id);
		assert_string_equal(back.object_kind, e.object_kind);
		assert_string_equal(back.object_tenant, e.object_tenant);
		assert_string_equal(back.reason, e.reason);
		assert_string_equal(back.request_id, e.request_id);
		assert_string_equal(back.source, e.source);
		assert_int_equal(back.object_tenant_id, 0);
		assert_int_equal(iso_audit_event_encode(&back, &again, &again_len, &err), 0);
		assert_string_equal(again, golden[i].want);
		free(again);
		free(out);
		iso_audit_event_clear(&back);
		iso_audit_event_clear(&e);
		assert_null(e.details);
	}
}

static void test_encode_rejects(void **state)
{
	static const struct {
		const char *details;
		const char *field, *msg;
	} bad_details[] = {
	    {"[1,2]", "details", "must be a JSON object"},
	    {"\"x\"", "details", "must be a JSON object"},
	    {"{\"a\":", "details", "not JSON"},
	    {"{\"a\":1,\"a\":2}", "details", "not JSON"},
	    {"{\"a\":1.5}", "details.a", "only integers"},
	    {"{\"a\":{\"b\":[1,2e3]}}", "details.a.b[1]", "only integers"},
	    {"{\"a\":1.0}", "details.a", "only integers"},
	};
	struct iso_audit_event e;
	struct iso_error err = {0};
	char *out = (char *)1;
	size_t len = 7;
	(void)state;

	for (size_t i = 0; i < sizeof(bad_details) / sizeof(bad_details[0]); i++) {
		event_minimal(&e);
		e.details = strdup(bad_details[i].details);
		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_audit_event_encode(&e, &out, &len, &err), -EINVAL);
		assert_null(out);
		assert_int_equal(len, 0);
		if (strcmp(err.field, bad_details[i].field) != 0 ||
		    !strstr(err.message, bad_details[i].msg))
			fail_msg("case %zu: field \"%s\" message \"%s\"", i, err.field,
			         err.message);
		iso_audit_event_clear(&e);
	}

	/* Ill-formed UTF-8 is not refused (no event may be lost to a stray
	 * byte) but written as U+FFFD per maximal subpart, as Python's
	 * bytes.decode("utf-8", "replace") does; expected strings from that. */
	static const struct {
		const char *in, *want;
	} bad_utf8[] = {
	    {"cut \xc3", "\"reason\":\"cut \\ufffd\""},
	    {"overlong \xc0\xaf", "\"reason\":\"overlong \\ufffd\\ufffd\""},
	    {"surrogate \xed\xa0\x80", "\"reason\":\"surrogate \\ufffd\\ufffd\\ufffd\""},
	    {"\xe2\x82"
	     "A",
	     "\"reason\":\"\\ufffdA\""},
	    {"\xf4\x90\x80\x80", "\"reason\":\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
	    {"\xf0\x9f\x98", "\"reason\":\"\\ufffd\""},
	    {"\xe0\x80\xaf", "\"reason\":\"\\ufffd\\ufffd\\ufffd\""},
	    {"ok \xc3\xa9 \xff\xfe", "\"reason\":\"ok \\u00e9 \\ufffd\\ufffd\""},
	    {"\xf0\x9f\x98\x80", "\"reason\":\"\\ud83d\\ude00\""},
	};
	for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++) {
		struct iso_audit_event back;
		event_minimal(&e);
		SET(e.reason, bad_utf8[i].in);
		assert_int_equal(iso_audit_event_encode(&e, &out, &len, &err), 0);
		if (!strstr(out, bad_utf8[i].want))
			fail_msg("case %zu: %s", i, out);
		/* What is recorded is the replaced text, and that round-trips. */
		assert_int_equal(iso_audit_event_decode(out, len, &back, &err), 0);
		char *again = NULL;
		size_t again_len = 0;
		assert_int_equal(iso_audit_event_encode(&back, &again, &again_len, &err), 0);
		assert_string_equal(again, out);
		free(again);
		free(out);
		iso_audit_event_clear(&back);
	}
	SET(e.reason, "");

	e.outcome = (enum iso_audit_outcome)3;
	assert_int_equal(iso_audit_event_encode(&e, &out, &len, &err), -EINVAL);
	assert_string_equal(err.field, "outcome");
	e.outcome = ISO_AUDIT_SUCCESS;
	e.seq = -1;
	assert_int_equal(iso_audit_event_encode(&e, &out, &len, &err), -EINVAL);
	assert_string_equal(err.field, "seq");
	e.seq = 0;
	memset(e.source, 'x', sizeof(e.source)); /* not terminated */
	assert_int_equal(iso_audit_event_encode(&e, &out, &len, &err), -EINVAL);
	assert_string_equal(err.field, "source");
}

/* Replaces the first occurrence of `from` in `s` by `to` (s is the realistic
 * golden string). */
static char *variant(const char *s, const char *from, const char *to)
{
	const char *at = strstr(s, from);
	char *out;

	assert_non_null(at);
	size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
	out = malloc(n);
	assert_non_null(out);
	snprintf(out, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
	return out;
}

static void test_decode_rejects(void **state)
{
	const char *real = golden[1].want, *esc = golden[2].want;
	static const struct {
		int which; /* 1: realistic, 2: escapes */
		const char *from, *to, *msg;
	} cases[] = {
	    {1, "\"action\":", "\"action\": ", "canonical"},
	    {1, "{\"action\"", " {\"action\"", "canonical"},
	    {1, "\"gpus\":2,", "\"gpus\":2 ,", "canonical"},
	    {1, "\"empty\":{},\"gpus\":2,", "\"gpus\":2,\"empty\":{},", "canonical"},
	    {1, "\"role\":\"tenant-admin\",\"tenant\":\"acme\",",
	     "\"tenant\":\"acme\",\"role\":\"tenant-admin\",", "canonical"},
	    {1, "\"1g.10gb\"", "\"1g.10gb\\/\"", "canonical"}, /* "\/" for "/" */
	    {1, "\"seq\":42", "\"seq\":-0", "canonical"},
	    {1, "\"time\":1795000000123", "\"time\":1795000000123.0", "time must be an integer"},
	    {1, "\"time\":1795000000123", "\"time\":1.795e12", "time must be an integer"},
	    {1, "\"gpus\":2", "\"gpus\":2.5", "only integers"},
	    {1, "\"seq\":42", "\"seq\":\"42\"", "seq must be an integer"},
	    {1, "\"seq\":42", "\"seq\":-42", "negative"},
	    {1, "\"outcome\":\"success\"", "\"outcome\":\"maybe\"", "not success, denied or error"},
	    {1, "\"outcome\":\"success\"", "\"outcome\":1", "outcome must be a string"},
	    {1, "\"reason\":\"\",", "", "missing key \"reason\""},
	    {1, "\"time\":1795000000123}", "time\":1795000000123,\"zzz\":1}", "not JSON"},
	    {1, "\"time\":1795000000123}", "\"time\":1795000000123,\"zzz\":1}",
	     "unknown key \"zzz\" in the event"},
	    {1, "\"token\":\"0123456789ab\"}", "\"token\":\"0123456789ab\",\"x\":\"\"}",
	     "unknown key \"x\" in actor"},
	    {1, "\"tenant\":\"acme\"},\"outcome\"", "\"tenant\":\"acme\",\"x\":1},\"outcome\"",
	     "unknown key \"x\" in object"},
	    {1, "\"kind\":\"allocation\",", "", "missing key \"kind\" in object"},
	    {1, "\"action\":\"allocation.place\",\"actor\"",
	     "\"action\":\"allocation.place\",\"action\":\"x\",\"actor\"", "not JSON"},
	    {1, "\"details\":{\"empty\"", "\"details\":[{\"empty\"", "not JSON"},
	    {1, "\"actor\":{", "\"actor\":[{", "not JSON"},
	    {1, "\"request_id\":\"r-00ff\"", "\"request_id\":null", "request_id must be a string"},
	    {1, "\"source\":\"10.0.0.7:51234\"", "\"source\":\"10.0.0.7\\u0000\"",
	     "must not contain U+0000"},
	    {1, "\"time\":1795000000123}", "\"time\":1795000000123}\n", "canonical"},
	    {1, "\"time\":1795000000123}", "\"time\":1795000000123}{}", "not JSON"},
	    {2, "\\u00e9 euro", "\\u00E9 euro", "canonical"},  /* uppercase hex */
	    {2, "\\u00e9 euro", "\xc3\xa9 euro", "canonical"}, /* raw UTF-8 */
	    {2, " t\\t n", " t\\u0009 n", "canonical"},        /* long form of \t */
	    {2, " s/ t", " s\\u002f t", "canonical"},          /* escaped "/" */
	    {2, "\"A\":\"upper\",\"e\":2,", "\"e\":2,\"A\":\"upper\",", "canonical"},
	    {2, "\\ud83d\\ude00\":\"astral\"", "\\ud83d\":\"astral\"", "not JSON"}, /* lone */
	};
	struct iso_audit_event e;
	struct iso_error err;
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *bad = variant(cases[i].which == 1 ? real : esc, cases[i].from, cases[i].to);
		memset(&err, 0, sizeof(err));
		int r = iso_audit_event_decode(bad, strlen(bad), &e, &err);
		if (r != -EINVAL || !strstr(err.message, cases[i].msg))
			fail_msg("case %zu: r=%d message \"%s\", wanted \"%s\"", i, r, err.message,
			         cases[i].msg);
		assert_null(e.details); /* nothing left behind */
		free(bad);
	}
	/* A long field is refused with its name, not truncated. */
	char *longer =
	    variant(real, "\"tenant\":\"acme\",\"token\"",
	            "\"tenant\":\"acmeacmeacmeacmeacmeacmeacmeacmeacmeacmeacmeacmeacmeacmeacme"
	            "acmeacme\",\"token\"");
	assert_int_equal(iso_audit_event_decode(longer, strlen(longer), &e, &err), -EINVAL);
	assert_string_equal(err.field, "actor.tenant");
	assert_non_null(strstr(err.message, "at most 63"));
	free(longer);
	/* Empty input and embedded NUL bytes. */
	assert_int_equal(iso_audit_event_decode("", 0, &e, &err), -EINVAL);
	assert_int_equal(iso_audit_event_decode(real, strlen(real) - 1, &e, &err), -EINVAL);
	char *nul = strdup(real);
	nul[20] = '\0';
	assert_int_equal(iso_audit_event_decode(nul, strlen(real), &e, &err), -EINVAL);
	free(nul);
	/* The golden strings themselves decode. */
	for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
		assert_int_equal(
		    iso_audit_event_decode(golden[i].want, strlen(golden[i].want), &e, &err), 0);
		iso_audit_event_clear(&e);
	}
}

/* ---- RFC 6962 hashing and the tree ---- */

/* certificate-transparency merkle_tree_test.cc / transparency-dev testonly. */
static const struct {
	const char *hex;
} ct_inputs[8] = {{""},
                  {"00"},
                  {"10"},
                  {"2021"},
                  {"3031"},
                  {"40414243"},
                  {"5051525354555657"},
                  {"606162636465666768696a6b6c6d6e6f"}};
static const char *const ct_roots[8] = {
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
};
#define EMPTY_ROOT "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static const struct {
	uint64_t index, size;
	int n;
	const char *proof[3];
} ct_paths[] = {
    {0, 1, 0, {NULL}},
    {0, 2, 1, {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"}},
    {1, 2, 1, {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"}},
    {2, 3, 1, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
    {1,
     5,
     3,
     {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
    {0,
     8,
     3,
     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
    {5,
     8,
     3,
     {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
};

static const struct {
	uint64_t from, to;
	int n;
	const char *proof[3];
} ct_consistency[] = {
    {1, 1, 0, {NULL}},
    {1,
     8,
     3,
     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
    {6,
     8,
     3,
     {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
    {2,
     5,
     2,
     {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
    {6,
     7,
     3,
     {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
};

static void ct_tree(struct iso_merkle **m, hash_t leaves[8])
{
	assert_int_equal(iso_merkle_new(m), 0);
	for (int i = 0; i < 8; i++) {
		uint8_t in[16];
		size_t n = strlen(ct_inputs[i].hex) / 2;
		if (n)
			unhex(ct_inputs[i].hex, in, n);
		iso_audit_leaf_hash(in, n, leaves[i]);
		assert_int_equal(iso_merkle_append(*m, leaves[i]), 0);
	}
}

static void test_hashes(void **state)
{
	hash_t h, l, r;
	(void)state;

	iso_audit_leaf_hash("", 0, h); /* RFC 6962: MTH({d0}) = SHA-256(0x00 || d0) */
	assert_hash_hex(h, ct_roots[0]);
	iso_audit_leaf_hash("\x00", 1, l);
	assert_hash_hex(l, "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7");
	iso_audit_node_hash(h, l, r);
	assert_hash_hex(r, ct_roots[1]);
}

static void test_merkle_vectors(void **state)
{
	struct iso_merkle *m, *inc;
	hash_t leaves[8], root, proof[ISO_AUDIT_MAX_PROOF], want[3];
	int n;
	(void)state;

	ct_tree(&m, leaves);
	assert_int_equal(iso_merkle_size(m), 8);
	assert_int_equal(iso_merkle_root(m, 0, root), 0);
	assert_hash_hex(root, EMPTY_ROOT);
	for (uint64_t s = 1; s <= 8; s++) {
		assert_int_equal(iso_merkle_root(m, s, root), 0);
		assert_hash_hex(root, ct_roots[s - 1]);
	}
	assert_int_equal(iso_merkle_root(m, 9, root), -EINVAL);
	/* Built leaf by leaf, the current root is right at every size. */
	assert_int_equal(iso_merkle_new(&inc), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(iso_merkle_append(inc, leaves[i]), 0);
		assert_int_equal(iso_merkle_root(inc, (uint64_t)i + 1, root), 0);
		assert_hash_hex(root, ct_roots[i]);
		hash_t leaf;
		assert_int_equal(iso_merkle_leaf(inc, (uint64_t)i, leaf), 0);
		assert_memory_equal(leaf, leaves[i], sizeof(leaf));
	}
	iso_merkle_free(inc);

	for (size_t t = 0; t < sizeof(ct_paths) / sizeof(ct_paths[0]); t++) {
		assert_int_equal(
		    iso_merkle_inclusion(m, ct_paths[t].index, ct_paths[t].size, proof, &n), 0);
		assert_int_equal(n, ct_paths[t].n);
		for (int i = 0; i < n; i++) {
			unhex(ct_paths[t].proof[i], want[i], sizeof(want[i]));
			assert_memory_equal(proof[i], want[i], sizeof(hash_t));
		}
		unhex(ct_roots[ct_paths[t].size - 1], root, sizeof(root));
		assert_true(iso_merkle_verify_inclusion(ct_paths[t].index, ct_paths[t].size,
		                                        leaves[ct_paths[t].index],
		                                        (const uint8_t(*)[32])want, n, root));
	}
	for (size_t t = 0; t < sizeof(ct_consistency) / sizeof(ct_consistency[0]); t++) {
		hash_t r1, r2;
		assert_int_equal(iso_merkle_consistency(m, ct_consistency[t].from,
		                                        ct_consistency[t].to, proof, &n),
		                 0);
		assert_int_equal(n, ct_consistency[t].n);
		for (int i = 0; i < n; i++) {
			unhex(ct_consistency[t].proof[i], want[i], sizeof(want[i]));
			assert_memory_equal(proof[i], want[i], sizeof(hash_t));
		}
		unhex(ct_roots[ct_consistency[t].from - 1], r1, sizeof(r1));
		unhex(ct_roots[ct_consistency[t].to - 1], r2, sizeof(r2));
		assert_true(iso_merkle_verify_consistency(ct_consistency[t].from,
		                                          ct_consistency[t].to, r1, r2,
		                                          (const uint8_t(*)[32])want, n));
		if (n > 0) /* swapped roots */
			assert_false(iso_merkle_verify_consistency(ct_consistency[t].from,
			                                           ct_consistency[t].to, r2, r1,
			                                           (const uint8_t(*)[32])want, n));
	}
	iso_merkle_free(m);
}

/* The edge cases transparency-dev's verify_test.go pins down. */
static void test_merkle_verify_edges(void **state)
{
	hash_t a, b, empty, some;
	hash_t one[1];
	(void)state;

	memset(a, 0xaa, sizeof(a));
	memset(b, 0xbb, sizeof(b));
	unhex(EMPTY_ROOT, empty, sizeof(empty));
	memcpy(one[0], empty, sizeof(empty));
	memset(some, 0x5a, sizeof(some));
	/* Inclusion: index >= size, empty tree. */
	assert_false(iso_merkle_verify_inclusion(0, 0, some, NULL, 0, empty));
	assert_false(iso_merkle_verify_inclusion(1, 1, some, NULL, 0, some));
	assert_false(iso_merkle_verify_inclusion(2, 1, some, NULL, 0, some));
	assert_true(iso_merkle_verify_inclusion(0, 1, some, NULL, 0, some)); /* leaf == root */
	assert_false(iso_merkle_verify_inclusion(0, 1, some, NULL, 0, empty));
	assert_false(iso_merkle_verify_inclusion(0, 1, some, (const uint8_t(*)[32])one, 1, some));
	assert_false(iso_merkle_verify_inclusion(0, 2, some, NULL, 0, some));
	assert_false(iso_merkle_verify_inclusion(0, 2, some, NULL, -1, some));
	assert_false(iso_merkle_verify_inclusion(0, 2, some, NULL, ISO_AUDIT_MAX_PROOF + 1, some));
	/* Consistency. */
	assert_false(iso_merkle_verify_consistency(0, 0, a, b, NULL, 0));
	assert_false(iso_merkle_verify_consistency(1, 1, a, b, NULL, 0));
	assert_true(iso_merkle_verify_consistency(0, 0, a, a, NULL, 0));
	assert_true(iso_merkle_verify_consistency(0, 1, a, b, NULL, 0));
	assert_true(iso_merkle_verify_consistency(1, 1, b, b, NULL, 0));
	assert_false(iso_merkle_verify_consistency(1, 0, a, b, NULL, 0));
	assert_false(iso_merkle_verify_consistency(2, 1, a, b, NULL, 0));
	assert_false(iso_merkle_verify_consistency(1, 2, a, b, NULL, 0));
	assert_false(iso_merkle_verify_consistency(0, 0, empty, b, NULL, 0));
	assert_false(iso_merkle_verify_consistency(1, 1, empty, b, NULL, 0));
	assert_false(
	    iso_merkle_verify_consistency(0, 0, empty, empty, (const uint8_t(*)[32])one, 1));
	assert_false(
	    iso_merkle_verify_consistency(0, 1, empty, empty, (const uint8_t(*)[32])one, 1));
	assert_false(
	    iso_merkle_verify_consistency(1, 1, empty, empty, (const uint8_t(*)[32])one, 1));
}

/* RFC 6962 2.1 transcribed as written: the reference the tree is checked
 * against. */
static uint64_t ref_split(uint64_t n)
{
	uint64_t k = 1;
	while (k * 2 < n)
		k *= 2;
	return k;
}

static void ref_mth(hash_t *d, uint64_t n, hash_t out)
{
	if (n == 0) {
		crypto_hash_sha256(out, NULL, 0);
		return;
	}
	if (n == 1) {
		memcpy(out, d[0], sizeof(hash_t));
		return;
	}
	uint64_t k = ref_split(n);
	hash_t l, r;
	ref_mth(d, k, l);
	ref_mth(d + k, n - k, r);
	iso_audit_node_hash(l, r, out);
}

static void ref_path(hash_t *d, uint64_t n, uint64_t m, hash_t *out, int *len)
{
	if (n <= 1)
		return;
	uint64_t k = ref_split(n);
	if (m < k) {
		ref_path(d, k, m, out, len);
		ref_mth(d + k, n - k, out[(*len)++]);
	} else {
		ref_path(d + k, n - k, m - k, out, len);
		ref_mth(d, k, out[(*len)++]);
	}
}

static void ref_subproof(hash_t *d, uint64_t m, uint64_t n, bool b, hash_t *out, int *len)
{
	if (m == n) {
		if (!b)
			ref_mth(d, n, out[(*len)++]);
		return;
	}
	uint64_t k = ref_split(n);
	if (m <= k) {
		ref_subproof(d, m, k, b, out, len);
		ref_mth(d + k, n - k, out[(*len)++]);
	} else {
		ref_subproof(d + k, m - k, n - k, false, out, len);
		ref_mth(d, k, out[(*len)++]);
	}
}

/* Flips one bit at a time (all 256 for small trees, one in each byte for the
 * rest) in every element: each altered proof must fail. */
static void flip_each(hash_t *proof, int n, uint64_t size, bool (*check)(void *, hash_t *, int),
                      void *arg)
{
	for (int i = 0; i < n; i++)
		for (int bit = 0; bit < 256; bit++) {
			if (size > 12 && bit % 8 != (bit / 8) % 8)
				continue;
			proof[i][bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (check(arg, proof, n))
				fail_msg("a proof of size %llu verified with bit %d of element %d "
				         "flipped",
				         (unsigned long long)size, bit, i);
			proof[i][bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
}

struct incl_args {
	uint64_t index, size;
	const uint8_t *leaf, *root;
};
static bool check_incl(void *arg, hash_t *proof, int n)
{
	struct incl_args *a = arg;
	return iso_merkle_verify_inclusion(a->index, a->size, a->leaf, (const uint8_t(*)[32])proof,
	                                   n, a->root);
}
struct cons_args {
	uint64_t from, to;
	const uint8_t *r1, *r2;
};
static bool check_cons(void *arg, hash_t *proof, int n)
{
	struct cons_args *a = arg;
	return iso_merkle_verify_consistency(a->from, a->to, a->r1, a->r2,
	                                     (const uint8_t(*)[32])proof, n);
}

#define REF_MAX 70

static void test_merkle_reference(void **state)
{
	static hash_t d[REF_MAX], roots[REF_MAX + 1];
	hash_t proof[ISO_AUDIT_MAX_PROOF], want[ISO_AUDIT_MAX_PROOF], root;
	struct iso_merkle *m;
	int n, wn;
	(void)state;

	assert_int_equal(iso_merkle_new(&m), 0);
	for (int i = 0; i < REF_MAX; i++) {
		uint8_t byte = (uint8_t)i;
		iso_audit_leaf_hash(&byte, 1, d[i]);
		assert_int_equal(iso_merkle_append(m, d[i]), 0);
	}
	for (uint64_t s = 0; s <= REF_MAX; s++) {
		ref_mth(d, s, roots[s]);
		assert_int_equal(iso_merkle_root(m, s, root), 0);
		assert_memory_equal(root, roots[s], sizeof(root));
	}
	for (uint64_t s = 1; s <= REF_MAX; s++) {
		for (uint64_t i = 0; i < s; i++) {
			wn = 0;
			ref_path(d, s, i, want, &wn);
			assert_int_equal(iso_merkle_inclusion(m, i, s, proof, &n), 0);
			assert_int_equal(n, wn);
			assert_memory_equal(proof, want, (size_t)n * sizeof(hash_t));
			assert_true(iso_merkle_verify_inclusion(
			    i, s, d[i], (const uint8_t(*)[32])proof, n, roots[s]));
			/* Wrong index, size, leaf or root. */
			if (i > 0)
				assert_false(iso_merkle_verify_inclusion(
				    i - 1, s, d[i], (const uint8_t(*)[32])proof, n, roots[s]));
			if (i + 1 < s)
				assert_false(iso_merkle_verify_inclusion(
				    i + 1, s, d[i], (const uint8_t(*)[32])proof, n, roots[s]));
			assert_false(iso_merkle_verify_inclusion(
			    i, s * 2, d[i], (const uint8_t(*)[32])proof, n, roots[s]));
			assert_false(iso_merkle_verify_inclusion(
			    i, s, d[(i + 1) % REF_MAX], (const uint8_t(*)[32])proof, n, roots[s]));
			if (n > 0)
				assert_false(iso_merkle_verify_inclusion(
				    i, s, d[i], (const uint8_t(*)[32])proof, n - 1, roots[s]));
			struct incl_args a = {i, s, d[i], roots[s]};
			flip_each(proof, n, s, check_incl, &a);
		}
		for (uint64_t f = 0; f <= s; f++) {
			wn = 0;
			if (f > 0 && f < s)
				ref_subproof(d, f, s, true, want, &wn);
			assert_int_equal(iso_merkle_consistency(m, f, s, proof, &n), 0);
			assert_int_equal(n, wn);
			assert_memory_equal(proof, want, (size_t)n * sizeof(hash_t));
			assert_true(iso_merkle_verify_consistency(f, s, roots[f], roots[s],
			                                          (const uint8_t(*)[32])proof, n));
			if (n == 0)
				continue;
			assert_false(iso_merkle_verify_consistency(f, s, roots[s], roots[f],
			                                           (const uint8_t(*)[32])proof, n));
			assert_false(iso_merkle_verify_consistency(f - 1, s, roots[f], roots[s],
			                                           (const uint8_t(*)[32])proof, n));
			/* (A larger size of the same shape would verify: the roots
			 * are what a head's signature binds to its size.) */
			assert_false(iso_merkle_verify_consistency(f, s * 2, roots[f], roots[s],
			                                           (const uint8_t(*)[32])proof, n));
			assert_false(iso_merkle_verify_consistency(
			    f, s, roots[f], roots[s], (const uint8_t(*)[32])proof, n - 1));
			struct cons_args a = {f, s, roots[f], roots[s]};
			flip_each(proof, n, s, check_cons, &a);
		}
	}
	/* Out of range requests. */
	assert_int_equal(iso_merkle_inclusion(m, 5, 5, proof, &n), -EINVAL);
	assert_int_equal(iso_merkle_inclusion(m, 0, REF_MAX + 1, proof, &n), -EINVAL);
	assert_int_equal(iso_merkle_consistency(m, 6, 5, proof, &n), -EINVAL);
	assert_int_equal(iso_merkle_consistency(m, 1, REF_MAX + 1, proof, &n), -EINVAL);
	assert_int_equal(iso_merkle_leaf(m, REF_MAX, root), -EINVAL);
	iso_merkle_free(m);
}

static void test_merkle_truncate(void **state)
{
	struct iso_merkle *m, *fresh;
	hash_t leaf, a, b, pa[ISO_AUDIT_MAX_PROOF], pb[ISO_AUDIT_MAX_PROOF];
	int na, nb;
	(void)state;

	assert_int_equal(iso_merkle_new(&m), 0);
	assert_int_equal(iso_merkle_new(&fresh), 0);
	for (uint32_t i = 0; i < 1000; i++) {
		iso_audit_leaf_hash(&i, sizeof(i), leaf);
		assert_int_equal(iso_merkle_append(m, leaf), 0);
		if (i < 637)
			assert_int_equal(iso_merkle_append(fresh, leaf), 0);
	}
	iso_merkle_truncate(m, 2000); /* larger: nothing happens */
	assert_int_equal(iso_merkle_size(m), 1000);
	iso_merkle_truncate(m, 637);
	assert_int_equal(iso_merkle_size(m), 637);
	assert_int_equal(iso_merkle_root(m, 638, a), -EINVAL);
	/* Rolled back, then other leaves appended: the same as never having
	 * had the dropped ones. */
	for (uint32_t i = 5000; i < 5100; i++) {
		iso_audit_leaf_hash(&i, sizeof(i), leaf);
		assert_int_equal(iso_merkle_append(m, leaf), 0);
		assert_int_equal(iso_merkle_append(fresh, leaf), 0);
	}
	for (uint64_t s = 0; s <= 737; s += 7) {
		assert_int_equal(iso_merkle_root(m, s, a), 0);
		assert_int_equal(iso_merkle_root(fresh, s, b), 0);
		assert_memory_equal(a, b, sizeof(a));
		if (s == 0)
			continue;
		assert_int_equal(iso_merkle_inclusion(m, s / 3, s, pa, &na), 0);
		assert_int_equal(iso_merkle_inclusion(fresh, s / 3, s, pb, &nb), 0);
		assert_int_equal(na, nb);
		assert_memory_equal(pa, pb, (size_t)na * sizeof(hash_t));
		assert_int_equal(iso_merkle_consistency(m, s / 2 + 1, 737, pa, &na), 0);
		assert_int_equal(iso_merkle_consistency(fresh, s / 2 + 1, 737, pb, &nb), 0);
		assert_int_equal(na, nb);
		assert_memory_equal(pa, pb, (size_t)na * sizeof(hash_t));
	}
	iso_merkle_truncate(m, 0);
	assert_int_equal(iso_merkle_size(m), 0);
	assert_int_equal(iso_merkle_root(m, 0, a), 0);
	assert_hash_hex(a, EMPTY_ROOT);
	iso_merkle_free(m);
	iso_merkle_free(fresh);
	iso_merkle_free(NULL);
}

/* ---- heads and keys ---- */

static void test_head_sign_verify(void **state)
{
	struct iso_audit_key k, other;
	struct iso_audit_head h = {.size = 1234, .time_ms = 1795000000123}, t;
	char msg[200], hex[65];
	(void)state;

	assert_int_equal(sodium_init() >= 0, 1);
	crypto_sign_keypair(k.pk, k.sk);
	crypto_sign_keypair(other.pk, other.sk);
	memset(h.root, 0xab, sizeof(h.root));
	h.root[31] = 0x01;
	iso_audit_head_sign(&h, &k);
	assert_true(iso_audit_head_verify(&h, k.pk));
	assert_false(iso_audit_head_verify(&h, other.pk));
	/* The signature is over exactly the documented text. */
	sodium_bin2hex(hex, sizeof(hex), h.root, sizeof(h.root));
	snprintf(msg, sizeof(msg), "isostack-audit-head-v1\n1234\n%s\n1795000000123\n", hex);
	assert_int_equal(
	    crypto_sign_verify_detached(h.sig, (const unsigned char *)msg, strlen(msg), k.pk), 0);
	/* Any change breaks it. */
	t = h, t.size++;
	assert_false(iso_audit_head_verify(&t, k.pk));
	t = h, t.time_ms--;
	assert_false(iso_audit_head_verify(&t, k.pk));
	for (int i = 0; i < 32; i++) {
		t = h, t.root[i] ^= 0x40;
		assert_false(iso_audit_head_verify(&t, k.pk));
	}
	t = h, t.sig[17] ^= 1;
	assert_false(iso_audit_head_verify(&t, k.pk));
	/* Negative times are signed as such. */
	t = h, t.time_ms = -1;
	iso_audit_head_sign(&t, &k);
	assert_true(iso_audit_head_verify(&t, k.pk));

	char pub[80];
	iso_audit_pubkey_format(k.pk, pub, sizeof(pub));
	assert_int_equal(strncmp(pub, "ed25519:", 8), 0);
	assert_int_equal(strlen(pub), 8 + 44);
}

struct tmpdir {
	char path[64];
};

static void tmpdir_make(struct tmpdir *t)
{
	snprintf(t->path, sizeof(t->path), "/tmp/test_audit.XXXXXX");
	assert_non_null(mkdtemp(t->path));
}

static void tmpdir_file(const struct tmpdir *t, const char *name, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", t->path, name);
}

static void tmpdir_remove(struct tmpdir *t)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->path);
	assert_int_equal(system(cmd), 0);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static char *read_text(const char *path)
{
	static char buf[512];
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
	return buf;
}

static void test_key_files(void **state)
{
	struct tmpdir t;
	struct iso_audit_key k, again;
	struct iso_error err = {0};
	char key[128], pub[128], line[80];
	struct stat st;
	bool created = false;
	uint8_t pk[ISO_AUDIT_PK_LEN];
	(void)state;

	tmpdir_make(&t);
	tmpdir_file(&t, "audit.key", key, sizeof(key));
	tmpdir_file(&t, "audit.pub", pub, sizeof(pub));
	mode_t old = umask(0); /* the modes must not depend on the umask */
	assert_int_equal(iso_audit_key_load_or_create(t.path, &k, &created, &err), 0);
	umask(old);
	assert_true(created);
	assert_int_equal(stat(key, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, 89); /* 88 base64 characters and a newline */
	assert_int_equal(stat(pub, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	iso_audit_pubkey_format(k.pk, line, sizeof(line) - 1);
	line[strlen(line) + 1] = '\0';
	line[strlen(line)] = '\n';
	assert_string_equal(read_text(pub), line);
	assert_int_equal(iso_audit_pubkey_read(pub, pk, &err), 0);
	assert_memory_equal(pk, k.pk, sizeof(pk));
	/* No temp files left behind. */
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 2", t.path);
	assert_int_equal(system(cmd), 0);

	/* Loaded again, not re-created; the key signs verifiably. */
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), 0);
	assert_false(created);
	assert_memory_equal(&again, &k, sizeof(k));
	struct iso_audit_head h = {.size = 1};
	iso_audit_head_sign(&h, &again);
	assert_true(iso_audit_head_verify(&h, pk));

	/* A missing public key is written again from the secret one. */
	assert_int_equal(unlink(pub), 0);
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), 0);
	assert_false(created);
	assert_string_equal(read_text(pub), line);

	/* A public key that is not the secret key's half is refused. */
	struct iso_audit_key other;
	char other_line[80];
	crypto_sign_keypair(other.pk, other.sk);
	iso_audit_pubkey_format(other.pk, other_line, sizeof(other_line) - 1);
	other_line[strlen(other_line) + 1] = '\0';
	other_line[strlen(other_line)] = '\n';
	write_text(pub, other_line, 0644);
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), -EINVAL);
	assert_non_null(strstr(err.message, "is not the public half"));
	assert_non_null(strstr(err.message, pub));
	write_text(pub, "junk\n", 0644);
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), -EINVAL);
	assert_non_null(strstr(err.message, "line 1"));
	write_text(pub, line, 0644);

	/* Group or other permission bits: refused, naming the file and the fix. */
	static const mode_t loose[] = {0640, 0604, 0660, 0700 | 0020, 0644, 0601};
	for (size_t i = 0; i < sizeof(loose) / sizeof(loose[0]); i++) {
		assert_int_equal(chmod(key, loose[i]), 0);
		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err),
		                 -EPERM);
		assert_non_null(strstr(err.message, key));
		assert_non_null(strstr(err.message, "chmod 600"));
	}
	assert_int_equal(chmod(key, 0400), 0); /* read-only for the owner is fine */
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), 0);
	assert_int_equal(chmod(key, 0600), 0);

	/* A corrupt key: bad base64, wrong length, halves that disagree. */
	char saved[128];
	snprintf(saved, sizeof(saved), "%s", read_text(key));
	write_text(key, "not base64 at all\n", 0600);
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), -EINVAL);
	assert_non_null(strstr(err.message, "line 1"));
	char bad[128];
	snprintf(bad, sizeof(bad), "%s", saved);
	bad[60] = bad[60] == 'A' ? 'B' : 'A'; /* inside the public half */
	write_text(key, bad, 0600);
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), -EINVAL);
	assert_non_null(strstr(err.message, "corrupt"));
	snprintf(bad, sizeof(bad), "%s\n", saved); /* two newlines */
	write_text(key, bad, 0600);
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), -EINVAL);
	write_text(key, saved, 0600);
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), 0);
	assert_memory_equal(&again, &k, sizeof(k));

	/* A symbolic link in place of the key is refused. */
	char elsewhere[128];
	tmpdir_file(&t, "elsewhere", elsewhere, sizeof(elsewhere));
	assert_int_equal(rename(key, elsewhere), 0);
	assert_int_equal(symlink(elsewhere, key), 0);
	assert_int_equal(iso_audit_key_load_or_create(t.path, &again, &created, &err), -EPERM);
	assert_non_null(strstr(err.message, "symbolic link"));
	assert_int_equal(unlink(key), 0);
	assert_int_equal(rename(elsewhere, key), 0);

	/* A missing directory is an error, not a crash. */
	char missing[128];
	tmpdir_file(&t, "nope", missing, sizeof(missing));
	assert_true(iso_audit_key_load_or_create(missing, &again, &created, &err) < 0);
	tmpdir_remove(&t);
}

static void test_pubkey_read_strict(void **state)
{
	struct tmpdir t;
	struct iso_error err = {0};
	struct iso_audit_key k;
	char path[128], good[80], text[200];
	uint8_t pk[ISO_AUDIT_PK_LEN];
	(void)state;

	tmpdir_make(&t);
	tmpdir_file(&t, "k.pub", path, sizeof(path));
	crypto_sign_keypair(k.pk, k.sk);
	iso_audit_pubkey_format(k.pk, good, sizeof(good));

	write_text(path, good, 0644); /* without the newline: accepted */
	assert_int_equal(iso_audit_pubkey_read(path, pk, &err), 0);
	assert_memory_equal(pk, k.pk, sizeof(pk));
	snprintf(text, sizeof(text), "%s\n", good);
	write_text(path, text, 0644);
	assert_int_equal(iso_audit_pubkey_read(path, pk, &err), 0);

	const char *bad[] = {"", "\n", "ed25519:\n", "ed25519:AAAA\n", "ssh-ed25519 AAAA\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_text(path, bad[i], 0644);
		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_audit_pubkey_read(path, pk, &err), -EINVAL);
		assert_non_null(strstr(err.message, path));
		assert_non_null(strstr(err.message, "line 1"));
	}
	static const char *const suffix[] = {"\r\n", " \n", "\n\n", "\nmore\n"};
	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(text, sizeof(text), "%s%s", good, suffix[i]);
		write_text(path, text, 0644);
		assert_int_equal(iso_audit_pubkey_read(path, pk, &err), -EINVAL);
	}
	snprintf(text, sizeof(text), "ED25519:%s\n", good + 8);
	write_text(path, text, 0644);
	assert_int_equal(iso_audit_pubkey_read(path, pk, &err), -EINVAL);
	/* Non-canonical base64: the unused low bits of the last digit set. */
	snprintf(text, sizeof(text), "%s\n", good);
	char *last = text + strlen(good) - 2; /* the digit before '=' */
	static const char alpha[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	*last = alpha[(strchr(alpha, *last) - alpha) ^ 1]; /* sets an unused low bit */
	write_text(path, text, 0644);
	assert_int_equal(iso_audit_pubkey_read(path, pk, &err), -EINVAL);
	/* Not a curve point. */
	uint8_t junk[ISO_AUDIT_PK_LEN];
	memset(junk, 0, sizeof(junk)); /* small order point */
	iso_audit_pubkey_format(junk, text, sizeof(text));
	write_text(path, text, 0644);
	assert_int_equal(iso_audit_pubkey_read(path, pk, &err), -EINVAL);
	/* Too long. */
	memset(text, 'A', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	char huge[600];
	snprintf(huge, sizeof(huge), "%s%s%s", text, text, text);
	write_text(path, huge, 0644);
	assert_int_equal(iso_audit_pubkey_read(path, pk, &err), -EINVAL);
	assert_non_null(strstr(err.message, "too long"));
	/* Missing. */
	tmpdir_file(&t, "absent.pub", path, sizeof(path));
	assert_int_equal(iso_audit_pubkey_read(path, pk, &err), -ENOENT);
	assert_non_null(strstr(err.message, path));
	tmpdir_remove(&t);
}

/* ---- exports and offline verification ---- */

#define LOG_MAX 64

struct log {
	struct iso_audit_key key;
	struct iso_merkle *tree;
	char *ev[LOG_MAX];
	size_t len[LOG_MAX];
	hash_t leaf[LOG_MAX];
	int n;
};

static void make_event(struct iso_audit_event *e, int64_t seq, const char *action)
{
	memset(e, 0, sizeof(*e));
	SET(e->action, action);
	SET(e->actor_role, seq % 3 ? "tenant-admin" : "system");
	SET(e->actor_tenant, seq % 3 ? "acme" : "");
	SET(e->object_kind, "allocation");
	snprintf(e->object_id, sizeof(e->object_id), "a-%016llx", (unsigned long long)seq);
	SET(e->source, "10.1.2.3:4567");
	e->seq = seq;
	e->time_ms = 1795000000000 + seq;
	/* details with a nested "seq" key, to show the verifier takes the
	 * top-level one */
	char d[96];
	snprintf(d, sizeof(d), "{\"gpus\":%lld,\"inner\":{\"a\":1,\"seq\":%lld},\"x\":\"/\\\"\"}",
	         (long long)seq % 8, (long long)seq + 1000);
	e->details = strdup(d);
}

static void log_build(struct log *l, int n)
{
	memset(l, 0, sizeof(*l));
	crypto_sign_keypair(l->key.pk, l->key.sk);
	assert_int_equal(iso_merkle_new(&l->tree), 0);
	for (int i = 0; i < n; i++) {
		struct iso_audit_event e;
		struct iso_error err = {0};
		make_event(&e, i, "allocation.place");
		assert_int_equal(iso_audit_event_encode(&e, &l->ev[i], &l->len[i], &err), 0);
		iso_audit_event_clear(&e);
		iso_audit_leaf_hash(l->ev[i], l->len[i], l->leaf[i]);
		assert_int_equal(iso_merkle_append(l->tree, l->leaf[i]), 0);
	}
	l->n = n;
}

static void log_free(struct log *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->ev[i]);
	iso_merkle_free(l->tree);
}

static struct iso_audit_head log_head(struct log *l, uint64_t size)
{
	struct iso_audit_head h = {.size = size, .time_ms = 1795000100000 + (int64_t)size};
	assert_int_equal(iso_merkle_root(l->tree, size, h.root), 0);
	iso_audit_head_sign(&h, &l->key);
	return h;
}

/* An export as lines, to tamper with. */
struct lines {
	char *l[256];
	int n;
};

static void lines_from(struct lines *ls, char *text)
{
	char *save = NULL;
	ls->n = 0;
	for (char *p = strtok_r(text, "\n", &save); p; p = strtok_r(NULL, "\n", &save))
		ls->l[ls->n++] = strdup(p);
	free(text);
}

static void lines_free(struct lines *ls)
{
	for (int i = 0; i < ls->n; i++)
		free(ls->l[i]);
	ls->n = 0;
}

static void lines_delete(struct lines *ls, int at)
{
	free(ls->l[at]);
	memmove(&ls->l[at], &ls->l[at + 1], (size_t)(ls->n - at - 1) * sizeof(char *));
	ls->n--;
}

static void lines_insert(struct lines *ls, int at, const char *line)
{
	memmove(&ls->l[at + 1], &ls->l[at], (size_t)(ls->n - at) * sizeof(char *));
	ls->l[at] = strdup(line);
	ls->n++;
}

static void lines_replace(struct lines *ls, int at, const char *from, const char *to)
{
	char *old = ls->l[at];
	ls->l[at] = variant(old, from, to);
	free(old);
}

/* Heads of the given sizes first (0-terminated list), then every event. */
static struct lines full_export(struct log *l, const uint64_t *heads)
{
	struct lines ls;
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	assert_non_null(f);
	for (const uint64_t *s = heads; *s; s++) {
		struct iso_audit_head h = log_head(l, *s);
		assert_int_equal(iso_audit_export_head(f, &h), 0);
	}
	for (int i = 0; i < l->n; i++)
		assert_int_equal(iso_audit_export_event(f, i, l->leaf[i], l->ev[i], l->len[i]), 0);
	fclose(f);
	lines_from(&ls, text);
	return ls;
}

static char *one_line(int (*write)(FILE *, void *), void *arg)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	assert_non_null(f);
	assert_int_equal(write(f, arg), 0);
	fclose(f);
	text[strlen(text) - 1] = '\0'; /* the newline */
	return text;
}

struct ev_arg {
	int64_t seq;
	const char *bytes;
	size_t len;
};
static int write_event(FILE *f, void *arg)
{
	struct ev_arg *a = arg;
	hash_t leaf;
	iso_audit_leaf_hash(a->bytes, a->len, leaf);
	return iso_audit_export_event(f, a->seq, leaf, a->bytes, a->len);
}

static int write_head(FILE *f, void *arg)
{
	return iso_audit_export_head(f, arg);
}

static struct iso_audit_verdict verify_lines(const struct lines *ls, const uint8_t *pk,
                                             bool newline)
{
	struct iso_audit_verdict v;
	struct iso_error err = {0};
	FILE *f = tmpfile();

	assert_non_null(f);
	for (int i = 0; i < ls->n; i++)
		fprintf(f, "%s%s", ls->l[i], i + 1 < ls->n || newline ? "\n" : "");
	rewind(f);
	assert_int_equal(iso_audit_verify_stream(f, "x.jsonl", pk, &v, &err), 0);
	fclose(f);
	return v;
}

#define VERIFY(ls, pk) verify_lines((ls), (pk), true)

static void expect_bad(const struct iso_audit_verdict *v, int64_t first_bad, long line,
                       const char *msg)
{
	if (v->ok || v->first_bad != first_bad || (line && v->bad_line != line) ||
	    !strstr(v->message, msg))
		fail_msg("verdict ok=%d first_bad=%lld line=%ld \"%s\"; wanted first_bad=%lld "
		         "line=%ld \"%s\"",
		         v->ok, (long long)v->first_bad, v->bad_line, v->message,
		         (long long)first_bad, line, msg);
}

static void test_export_layout(void **state)
{
	struct iso_audit_head h = {.size = 3, .time_ms = -7};
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	hash_t proof[2];
	(void)state;

	memset(h.root, 0x11, sizeof(h.root));
	memset(h.sig, 0, sizeof(h.sig));
	memset(proof[0], 0xa0, sizeof(hash_t));
	memset(proof[1], 0x0b, sizeof(hash_t));
	assert_int_equal(iso_audit_export_head(f, &h), 0);
	assert_int_equal(iso_audit_export_event(f, 2, proof[0], "{\"a\":1}", 7), 0);
	assert_int_equal(iso_audit_export_inclusion(f, 2, 3, (const uint8_t(*)[32])proof, 2), 0);
	assert_int_equal(iso_audit_export_consistency(f, 1, 3, (const uint8_t(*)[32])proof, 1), 0);
	assert_int_equal(iso_audit_export_consistency(f, 3, 3, NULL, 0), 0);
	/* Refused: what would break the one-line layout or the format. */
	assert_int_equal(iso_audit_export_event(f, -1, proof[0], "{}", 2), -EINVAL);
	assert_int_equal(iso_audit_export_event(f, 1, proof[0], "{\n}", 3), -EINVAL);
	assert_int_equal(iso_audit_export_event(f, 1, proof[0], "[]", 2), -EINVAL);
	assert_int_equal(iso_audit_export_inclusion(f, 3, 3, NULL, 0), -EINVAL);
	assert_int_equal(iso_audit_export_consistency(f, 4, 3, NULL, 0), -EINVAL);
	fclose(f);
	const char *a0 = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0";
	const char *b0 = "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b";
	char zero_sig[89]; /* base64 of 64 zero bytes: 86 'A' and "==" */
	memset(zero_sig, 'A', 86);
	memcpy(zero_sig + 86, "==", 3);
	char want[1200];
	snprintf(want, sizeof(want),
	         "{\"type\":\"head\",\"size\":3,\"root\":\"%s\",\"time\":-7,\"signature\":\"%s\"}\n"
	         "{\"type\":\"event\",\"seq\":2,\"leaf\":\"%s\",\"event\":{\"a\":1}}\n"
	         "{\"type\":\"inclusion\",\"seq\":2,\"size\":3,\"proof\":[\"%s\",\"%s\"]}\n"
	         "{\"type\":\"consistency\",\"from\":1,\"to\":3,\"proof\":[\"%s\"]}\n"
	         "{\"type\":\"consistency\",\"from\":3,\"to\":3,\"proof\":[]}\n",
	         "1111111111111111111111111111111111111111111111111111111111111111", zero_sig, a0,
	         a0, b0, a0);
	assert_string_equal(text, want);
	free(text);
}

static void test_verify_full_ok(void **state)
{
	struct log l;
	static const uint64_t heads[] = {10, 20, 30, 0};
	struct iso_audit_verdict v;
	(void)state;

	log_build(&l, 30);
	struct lines ls = full_export(&l, heads);
	v = VERIFY(&ls, l.key.pk);
	assert_true(v.ok);
	assert_int_equal(v.events, 30);
	assert_int_equal(v.heads, 3);
	assert_int_equal(v.first_bad, -1);
	assert_int_equal(v.bad_line, 0);
	assert_non_null(strstr(v.message, "x.jsonl: ok: full export"));

	/* Heads may come after the events they cover, and consistency proofs
	 * between heads are checked. */
	struct iso_audit_head h5 = log_head(&l, 5);
	char *head5 = one_line(write_head, &h5);
	lines_insert(&ls, ls.n, head5);
	hash_t proof[ISO_AUDIT_MAX_PROOF];
	int n;
	assert_int_equal(iso_merkle_consistency(l.tree, 5, 30, proof, &n), 0);
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	assert_int_equal(iso_audit_export_consistency(f, 5, 30, (const uint8_t(*)[32])proof, n), 0);
	assert_int_equal(iso_merkle_consistency(l.tree, 10, 20, proof, &n), 0);
	assert_int_equal(iso_audit_export_consistency(f, 10, 20, (const uint8_t(*)[32])proof, n),
	                 0);
	assert_int_equal(iso_audit_export_consistency(f, 0, 20, NULL, 0), 0);
	fclose(f);
	struct lines extra;
	lines_from(&extra, text);
	for (int i = 0; i < extra.n; i++)
		lines_insert(&ls, ls.n, extra.l[i]);
	v = VERIFY(&ls, l.key.pk);
	assert_true(v.ok);
	assert_int_equal(v.heads, 4);

	/* A corrupt consistency proof: first_bad cannot be named. */
	int cons = ls.n - 2; /* the 10 -> 20 proof */
	char *c = strstr(ls.l[cons], "proof\":[\"") + 9;
	*c = *c == '0' ? '1' : '0';
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, cons + 1, "consistency proof from size 10 to 20 does not verify");
	*c = *c == '0' ? '1' : '0';
	/* One naming a head that is not there. */
	lines_replace(&ls, cons, "\"from\":10", "\"from\":11");
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, cons + 1, "size 11 has none");

	/* The wrong public key: every head fails. */
	struct iso_audit_key other;
	crypto_sign_keypair(other.pk, other.sk);
	v = VERIFY(&ls, other.pk);
	expect_bad(&v, -1, 1, "which is not in the key set");
	assert_int_equal(v.heads, 0);

	/* A head of size 0 and no events is a valid (empty) full export. */
	lines_free(&ls);
	struct iso_audit_head h0 = log_head(&l, 0);
	char *head0 = one_line(write_head, &h0);
	lines_insert(&ls, 0, head0);
	v = VERIFY(&ls, l.key.pk);
	assert_true(v.ok);
	free(head0);
	free(head5);
	lines_free(&ls);
	lines_free(&extra);
	log_free(&l);
}

static void test_verify_partial_ok_and_bad_proofs(void **state)
{
	struct log l;
	static const int pick[] = {3, 8, 15, 19};
	struct iso_audit_verdict v;
	struct lines ls;
	char *text = NULL;
	size_t size = 0;
	(void)state;

	log_build(&l, 20);
	FILE *f = open_memstream(&text, &size);
	struct iso_audit_head h = log_head(&l, 20), h10 = log_head(&l, 10);
	assert_int_equal(iso_audit_export_head(f, &h10), 0);
	assert_int_equal(iso_audit_export_head(f, &h), 0);
	for (size_t i = 0; i < sizeof(pick) / sizeof(pick[0]); i++) {
		hash_t proof[ISO_AUDIT_MAX_PROOF];
		int n, s = pick[i];
		uint64_t against = s < 10 && i == 0 ? 10 : 20; /* proofs may use any head */
		assert_int_equal(iso_merkle_inclusion(l.tree, (uint64_t)s, against, proof, &n), 0);
		assert_int_equal(iso_audit_export_event(f, s, l.leaf[s], l.ev[s], l.len[s]), 0);
		assert_int_equal(iso_audit_export_inclusion(f, (uint64_t)s, against,
		                                            (const uint8_t(*)[32])proof, n),
		                 0);
	}
	fclose(f);
	lines_from(&ls, text);
	v = VERIFY(&ls, l.key.pk);
	assert_true(v.ok);
	assert_int_equal(v.events, 4);
	assert_int_equal(v.heads, 2);
	assert_non_null(strstr(v.message, "partial export"));

	/* Corrupt the proof of event 8 (lines: 2 heads, then event/proof pairs). */
	int at = 2 + 2 * 1 + 1;
	char *c = strstr(ls.l[at], "proof\":[\"") + 20;
	*c = *c == 'a' ? 'b' : 'a';
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 8, at + 1, "inclusion proof of event 8");
	*c = *c == 'a' ? 'b' : 'a';

	/* A proof against a head that is not in the export. */
	lines_replace(&ls, at, "\"size\":20", "\"size\":19");
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 8, at + 1, "no signed head of that size");
	lines_replace(&ls, at, "\"size\":19", "\"size\":20");

	/* An event without its proof. */
	char *saved = strdup(ls.l[at]);
	lines_delete(&ls, at);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 8, at, "event 8 has no inclusion proof after it");
	/* A proof without its event. */
	lines_insert(&ls, at, saved);
	lines_delete(&ls, at - 1);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 8, at, "does not follow that event's line");
	free(saved);
	lines_free(&ls);

	/* Modified event bytes with the leaf re-computed: the proof catches it. */
	text = NULL;
	f = open_memstream(&text, &size);
	assert_int_equal(iso_audit_export_head(f, &h), 0);
	hash_t proof[ISO_AUDIT_MAX_PROOF];
	int n;
	assert_int_equal(iso_merkle_inclusion(l.tree, 5, 20, proof, &n), 0);
	char *forged = variant(l.ev[5], "allocation.place", "allocation.fake!");
	struct ev_arg a = {5, forged, strlen(forged)};
	assert_int_equal(write_event(f, &a), 0);
	assert_int_equal(iso_audit_export_inclusion(f, 5, 20, (const uint8_t(*)[32])proof, n), 0);
	fclose(f);
	lines_from(&ls, text);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 5, 3, "inclusion proof of event 5 in the signed head of size 20");
	free(forged);
	lines_free(&ls);
	log_free(&l);
}

/* One test per kind of tampering with a full export: 3 heads (10, 20, 30)
 * on lines 1-3, then event k on line 4 + k. */
static const uint64_t three_heads[] = {10, 20, 30, 0};
#define EV_LINE(k) (3 + (k)) /* 0-based index of event k's line */

static void test_tamper_modify_event(void **state)
{
	struct log l;
	(void)state;

	log_build(&l, 30);
	struct lines ls = full_export(&l, three_heads);
	/* One byte of event 17's canonical bytes. */
	lines_replace(&ls, EV_LINE(17), "\"action\":\"allocation.place\"",
	              "\"action\":\"allocation.plack\"");
	struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 17, EV_LINE(17) + 1, "event 17 does not hash to its leaf");
	lines_free(&ls);

	/* A change to the event's own "seq" is a modification too. */
	ls = full_export(&l, three_heads);
	lines_replace(&ls, EV_LINE(4), ",\"seq\":4,\"source\"", ",\"seq\":5,\"source\"");
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 4, EV_LINE(4) + 1, "event 4 does not hash to its leaf");
	lines_free(&ls);
	log_free(&l);
}

static void test_tamper_modify_event_and_leaf(void **state)
{
	struct log l;
	(void)state;

	log_build(&l, 30);
	struct lines ls = full_export(&l, three_heads);
	/* Event 13 altered and its leaf re-computed: no line is inconsistent,
	 * only the signed root at 20 shows it; heads 10 (matched) and 20 bound
	 * where. */
	char *forged = variant(l.ev[13], "allocation.place", "allocation.erase");
	struct ev_arg a = {13, forged, strlen(forged)};
	char *line = one_line(write_event, &a);
	free(ls.l[EV_LINE(13)]);
	ls.l[EV_LINE(13)] = line;
	struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 2, "leaves do not rebuild the signed root at size 20");
	assert_non_null(strstr(v.message, "events 10..19"));
	assert_int_equal(v.events, 20); /* found when event 19 was added */

	/* The same before any head matched: no range. */
	lines_free(&ls);
	ls = full_export(&l, three_heads);
	free(forged);
	forged = variant(l.ev[2], "allocation.place", "allocation.erase");
	a = (struct ev_arg){2, forged, strlen(forged)};
	line = one_line(write_event, &a);
	free(ls.l[EV_LINE(2)]);
	ls.l[EV_LINE(2)] = line;
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 1, "leaves do not rebuild the signed root at size 10");
	assert_null(strstr(v.message, ".."));
	free(forged);
	lines_free(&ls);
	log_free(&l);
}

static void test_tamper_delete(void **state)
{
	struct log l;
	(void)state;

	log_build(&l, 30);
	struct lines ls = full_export(&l, three_heads);
	lines_delete(&ls, EV_LINE(12));
	struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 12, EV_LINE(12) + 1, "event 12 is missing");
	lines_free(&ls);

	/* The very first event. */
	ls = full_export(&l, three_heads);
	lines_delete(&ls, EV_LINE(0));
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 0, EV_LINE(0) + 1, "event 0 is missing");
	lines_free(&ls);
	log_free(&l);
}

static void test_tamper_insert(void **state)
{
	struct log l;
	(void)state;

	log_build(&l, 30);
	/* A copy of event 6 right after it. */
	struct lines ls = full_export(&l, three_heads);
	lines_insert(&ls, EV_LINE(7), ls.l[EV_LINE(6)]);
	struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 6, EV_LINE(7) + 1, "event 6 appears again");
	lines_free(&ls);

	/* A well-formed forged event 6 (own seq, right leaf) before the real
	 * one: the real one is then the duplicate. */
	ls = full_export(&l, three_heads);
	struct iso_audit_event e;
	struct iso_error err = {0};
	char *bytes;
	size_t len;
	make_event(&e, 6, "tenant.delete");
	assert_int_equal(iso_audit_event_encode(&e, &bytes, &len, &err), 0);
	iso_audit_event_clear(&e);
	struct ev_arg a = {6, bytes, len};
	char *line = one_line(write_event, &a);
	lines_insert(&ls, EV_LINE(6), line);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 6, EV_LINE(7) + 1, "event 6 appears again");
	lines_free(&ls);

	/* Appended past the last head: not covered by any signature. */
	static const uint64_t heads[] = {10, 20, 0};
	ls = full_export(&l, heads);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 20, 2 + 20 + 1, "events 20..29 are not covered by any signed head");
	lines_free(&ls);

	/* An event line whose own seq disagrees with the line's. */
	ls = full_export(&l, three_heads);
	char *moved = variant(l.ev[9], ",\"seq\":9,", ",\"seq\":90,");
	a = (struct ev_arg){9, moved, strlen(moved)};
	free(line);
	line = one_line(write_event, &a);
	free(ls.l[EV_LINE(9)]);
	ls.l[EV_LINE(9)] = line;
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 9, EV_LINE(9) + 1, "the event itself says seq 90");
	free(moved);
	free(bytes);
	lines_free(&ls);
	log_free(&l);
}

static void test_tamper_swap(void **state)
{
	struct log l;
	(void)state;

	log_build(&l, 30);
	struct lines ls = full_export(&l, three_heads);
	char *t = ls.l[EV_LINE(21)];
	ls.l[EV_LINE(21)] = ls.l[EV_LINE(22)];
	ls.l[EV_LINE(22)] = t;
	struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 21, EV_LINE(21) + 1, "event 21 is missing: this line holds event 22");
	lines_free(&ls);

	/* Swapped and re-numbered to look in order: leaves then differ from
	 * the bytes' own seq... re-hashed too, only the root shows it. */
	ls = full_export(&l, three_heads);
	char *b21 = variant(l.ev[22], ",\"seq\":22,", ",\"seq\":21,");
	char *b22 = variant(l.ev[21], ",\"seq\":21,", ",\"seq\":22,");
	struct ev_arg a21 = {21, b21, strlen(b21)}, a22 = {22, b22, strlen(b22)};
	free(ls.l[EV_LINE(21)]);
	free(ls.l[EV_LINE(22)]);
	ls.l[EV_LINE(21)] = one_line(write_event, &a21);
	ls.l[EV_LINE(22)] = one_line(write_event, &a22);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 3, "leaves do not rebuild the signed root at size 30");
	assert_non_null(strstr(v.message, "events 20..29"));
	free(b21);
	free(b22);
	lines_free(&ls);
	log_free(&l);
}

static void test_tamper_truncate(void **state)
{
	struct log l;
	(void)state;

	log_build(&l, 30);
	struct lines ls = full_export(&l, three_heads);
	for (int i = 0; i < 4; i++)
		lines_delete(&ls, ls.n - 1);
	struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 26, 3, "ends after 26 events, but the head of size 30");
	assert_non_null(strstr(v.message, "26..29 are missing"));
	assert_int_equal(v.events, 26);
	lines_free(&ls);

	/* Cut in the middle of a line. */
	ls = full_export(&l, three_heads);
	ls.l[ls.n - 1][40] = '\0';
	v = verify_lines(&ls, l.key.pk, false);
	expect_bad(&v, 29, ls.n, "no newline");
	lines_free(&ls);

	/* Every event gone. */
	ls = full_export(&l, three_heads);
	while (ls.n > 3)
		lines_delete(&ls, ls.n - 1);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, 0, 1, "ends after 0 events");
	lines_free(&ls);
	log_free(&l);
}

static void test_tamper_forge_head(void **state)
{
	struct log l;
	(void)state;

	log_build(&l, 30);
	static const struct {
		const char *from, *to;
	} edits[] = {
	    {"\"size\":20", "\"size\":21"},
	    {"\"time\":1795000100020", "\"time\":1795000100021"},
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		struct lines ls = full_export(&l, three_heads);
		lines_replace(&ls, 1, edits[i].from, edits[i].to);
		struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
		expect_bad(&v, -1, 2, "the head of size");
		assert_non_null(strstr(v.message, "bad signature"));
		assert_int_equal(v.heads, 1);
		lines_free(&ls);
	}
	/* A root changed by one hex digit. */
	struct lines ls = full_export(&l, three_heads);
	char *c = strstr(ls.l[1], "\"root\":\"") + 8 + 30;
	*c = *c == 'f' ? 'e' : 'f';
	struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 2, "the head of size 20 has a bad signature");
	lines_free(&ls);

	/* A head signed by another key over the altered log. */
	ls = full_export(&l, three_heads);
	struct iso_audit_key mallory;
	crypto_sign_keypair(mallory.pk, mallory.sk);
	struct iso_audit_head h = log_head(&l, 30);
	iso_audit_head_sign(&h, &mallory);
	char *line = one_line(write_head, &h);
	free(ls.l[2]);
	ls.l[2] = line;
	v = VERIFY(&ls, l.key.pk);
	char mid[17], want[120];
	iso_audit_key_id(mallory.pk, h.key_id);
	iso_audit_key_id_format(h.key_id, mid);
	snprintf(want, sizeof(want), "the head of size 30 is signed by key %s, which is not in",
	         mid);
	expect_bad(&v, -1, 3, want);
	/* The same head claiming the right key id: its signature is then bad. */
	iso_audit_key_id(l.key.pk, h.key_id);
	free(ls.l[2]);
	ls.l[2] = one_line(write_head, &h);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 3, "the head of size 30 has a bad signature for key");
	lines_free(&ls);

	/* Two validly signed heads of one size that disagree: a fork. */
	struct log other;
	log_build(&other, 30);
	other.key = l.key;
	ls = full_export(&l, three_heads);
	free(other.ev[3]);
	other.ev[3] = variant(l.ev[3], "allocation.place", "allocation.forkd");
	other.len[3] = strlen(other.ev[3]);
	iso_merkle_truncate(other.tree, 0);
	for (int i = 0; i < 30; i++) {
		iso_audit_leaf_hash(other.ev[i], other.len[i], other.leaf[i]);
		assert_int_equal(iso_merkle_append(other.tree, other.leaf[i]), 0);
	}
	h = log_head(&other, 20);
	line = one_line(write_head, &h);
	lines_insert(&ls, 3, line);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 4, "two signed heads of size 20 (lines 2 and 4) disagree");
	free(line);
	lines_free(&ls);
	log_free(&other);
	log_free(&l);
}

static void test_malformed_lines(void **state)
{
	struct log l;
	(void)state;

	log_build(&l, 12);
	static const uint64_t heads[] = {12, 0};
	static const struct {
		int at;           /* line index to replace (event k = 1 + k) */
		const char *line; /* NULL: see edit */
		const char *from, *to;
		int64_t first_bad;
		const char *msg;
	} cases[] = {
	    {5, "garbage", NULL, NULL, -1, "not JSON"},
	    {5, "", NULL, NULL, -1, "not JSON"},
	    {5, "[1,2]", NULL, NULL, -1, "string \"type\""},
	    {5, "{\"type\":\"mystery\"}", NULL, NULL, -1, "unknown line type \"mystery\""},
	    {5, "{\"seq\":4,\"type\":\"event\"}", NULL, NULL, -1, "must be written exactly"},
	    {5, NULL, "\"seq\":4,", "\"seq\":04,", 4, "\"seq\" is not a non-negative"},
	    {5, NULL, "\"seq\":4,", "\"seq\":-4,", 4, "\"seq\" is not a non-negative"},
	    {5, NULL, "\"leaf\":\"", "\"leaf\":\"a", 4, "expected exactly"}, /* 65 digits */
	    {5, NULL, "\"leaf\":\"", "\"leaf\": \"", 4, "expected exactly"},
	    {5, NULL, "\"event\":{", "\"event\": {", 4, "expected exactly"},
	    {5, NULL, "}}", "}} ", 4, "expected exactly"},
	    {5, NULL, "}}", "}}\r", 4, "expected exactly"},
	    {5, NULL, "}}", "},\"x\":{}}", 4, "does not hash to its leaf"},
	    {0, NULL, "\"size\":12", "\"size\":-12", -1, "malformed head"},
	    {0, NULL, "\"size\":12", "\"size\":12,\"extra\":1", -1, "malformed head"},
	    {0, NULL, "\"signature\":\"", "\"signature\":\"!", -1, "malformed head"},
	    {0, NULL, "\"root\":\"", "\"root\":\"0", -1, "malformed head"},
	    {0, NULL, "\"time\":", "\"time\":1.5,\"x\":", -1, "malformed head"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lines ls = full_export(&l, heads);
		if (cases[i].line) {
			free(ls.l[cases[i].at]);
			ls.l[cases[i].at] = strdup(cases[i].line);
		} else {
			lines_replace(&ls, cases[i].at, cases[i].from, cases[i].to);
		}
		struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
		if (v.ok || v.first_bad != cases[i].first_bad || v.bad_line != cases[i].at + 1 ||
		    !strstr(v.message, cases[i].msg) || !strstr(v.message, "x.jsonl: line "))
			fail_msg("case %zu: ok=%d first_bad=%lld line=%ld \"%s\"", i, v.ok,
			         (long long)v.first_bad, v.bad_line, v.message);
		lines_free(&ls);
	}
	/* A leaf that is not 64 lowercase hex digits. */
	static const char not_hex[] = {'F', 'G', ' ', '"'};
	for (size_t i = 0; i < sizeof(not_hex); i++) {
		struct lines ls = full_export(&l, heads);
		strstr(ls.l[5], "\"leaf\":\"")[8 + 2 * (int)i] = not_hex[i];
		struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
		expect_bad(&v, 4, 6, "\"leaf\" of event 4 is not 64 lowercase hex digits");
		lines_free(&ls);
	}
	/* No head at all; an empty stream. */
	static const uint64_t none[] = {0};
	struct lines ls = full_export(&l, none);
	struct iso_audit_verdict v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 0, "no signed head");
	lines_free(&ls);
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 0, "empty");
	log_free(&l);
}

/* Exports larger than one read chunk (4 MiB) and a worker pool: the walk
 * must stay in order across chunk boundaries. */
/* ---- key ids and key sets (several signers in one log) ---- */

static void pk_line(const uint8_t pk[ISO_AUDIT_PK_LEN], char *buf, size_t size)
{
	iso_audit_pubkey_format(pk, buf, size);
}

static void keyset_refused(const char *text, const char *want)
{
	struct iso_audit_keyset ks;
	struct iso_error err = {0};

	assert_int_equal(iso_audit_keyset_parse(text, strlen(text), "keys.txt", &ks, &err),
	                 -EINVAL);
	if (!strstr(err.message, want))
		fail_msg("\"%s\" does not hold \"%s\"", err.message, want);
	assert_string_equal(err.field, "keys.txt");
	assert_int_equal(ks.n, 0);
}

static void test_key_id(void **state)
{
	uint8_t pk[ISO_AUDIT_PK_LEN], id[ISO_AUDIT_KEY_ID_LEN], hash[32];
	char text[17];
	(void)state;

	for (int i = 0; i < ISO_AUDIT_PK_LEN; i++)
		pk[i] = (uint8_t)i;
	iso_audit_key_id(pk, id);
	crypto_hash_sha256(hash, pk, sizeof(pk));
	assert_memory_equal(id, hash, ISO_AUDIT_KEY_ID_LEN);
	iso_audit_key_id_format(id, text);
	assert_int_equal(strlen(text), 16);
	/* SHA-256 of the bytes 0..31, its first 8 bytes in hex */
	assert_string_equal(text, "630dcd2966c43366");
	assert_true(iso_audit_key_id_known(id));
	memset(id, 0, sizeof(id));
	assert_false(iso_audit_key_id_known(id));
}

static void test_keyset_parse(void **state)
{
	struct iso_audit_key a, b, c;
	struct iso_audit_keyset ks;
	struct iso_error err = {0};
	char ka[64], kb[64], kc[64], text[1024];
	(void)state;

	crypto_sign_keypair(a.pk, a.sk);
	crypto_sign_keypair(b.pk, b.sk);
	crypto_sign_keypair(c.pk, c.sk);
	pk_line(a.pk, ka, sizeof(ka));
	pk_line(b.pk, kb, sizeof(kb));
	pk_line(c.pk, kc, sizeof(kc));
	snprintf(text, sizeof(text),
	         "# the cluster's audit keys\n\n%s node-a\n%s\tnode_b.2  \n   \n%s", ka, kb, kc);
	assert_int_equal(iso_audit_keyset_parse(text, strlen(text), "keys.txt", &ks, &err), 0);
	assert_int_equal(ks.n, 3);
	assert_string_equal(ks.keys[0].name, "node-a");
	assert_int_equal(ks.keys[0].line, 3);
	assert_string_equal(ks.keys[1].name, "node_b.2");
	assert_string_equal(ks.keys[2].name, "");
	assert_int_equal(ks.keys[2].line, 6);
	assert_memory_equal(ks.keys[1].pk, b.pk, ISO_AUDIT_PK_LEN);
	uint8_t id[ISO_AUDIT_KEY_ID_LEN];
	iso_audit_key_id(b.pk, id);
	assert_memory_equal(ks.keys[1].id, id, sizeof(id));
	assert_ptr_equal(iso_audit_keyset_find(&ks, c.pk), &ks.keys[2]);

	/* Bad inputs: each names the file and the line. */
	keyset_refused("", "keys.txt: holds no key");
	keyset_refused("# only a comment\n\n", "keys.txt: holds no key");
	snprintf(text, sizeof(text), "%s a\n%s b\n", ka, ka);
	keyset_refused(text, "keys.txt: line 2: the key of line 1 again");
	snprintf(text, sizeof(text), "%s a\n\n%s a\n", ka, kb);
	keyset_refused(text, "keys.txt: line 3: the name \"a\" of line 1 again");
	snprintf(text, sizeof(text), "%s\n%s a b\n", ka, kb);
	keyset_refused(text, "keys.txt: line 2: expected \"ed25519:<base64> [NAME]\"");
	snprintf(text, sizeof(text), "%s n@me\n", ka);
	keyset_refused(text, "keys.txt: line 1: a key's name may hold only");
	snprintf(text, sizeof(text), "%s %0100d\n", ka, 7);
	keyset_refused(text, "keys.txt: line 1: the name is longer than 63 bytes");
	snprintf(text, sizeof(text), "%s\r\n", ka);
	keyset_refused(text, "keys.txt: line 1: ends in a carriage return");
	snprintf(text, sizeof(text), "\n %s\n", ka);
	keyset_refused(text, "keys.txt: line 2: starts with a blank");
	/* A refusal after good lines keeps none of them (keyset_refused checks). */
	snprintf(text, sizeof(text), "%s a\n%s b\r\n", ka, kb);
	keyset_refused(text, "keys.txt: line 2: ends in a carriage return");
	snprintf(text, sizeof(text), "%s a\n %s b\n", ka, kb);
	keyset_refused(text, "keys.txt: line 2: starts with a blank");
	keyset_refused("ed25519:AAAA\n", "keys.txt: line 1: expected \"ed25519:<base64 of 32");
	keyset_refused("rsa:AAAA x\n", "keys.txt: line 1: expected \"ed25519:");
	/* 32 bytes of base64 that are not a point on the curve */
	keyset_refused("# x\ned25519:AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
	               "keys.txt: line 2: not a valid Ed25519 public key");
	snprintf(text, sizeof(text), "%s\n", ka);
	text[3] = '\0';
	size_t len = strlen(ka) + 1;
	assert_int_equal(iso_audit_keyset_parse(text, len, "keys.txt", &ks, &err), -EINVAL);
	assert_non_null(strstr(err.message, "keys.txt: line 1: holds a NUL byte"));
	/* More than ISO_AUDIT_KEYSET_MAX keys. */
	char *big = malloc((ISO_AUDIT_KEYSET_MAX + 1) * 64);
	size_t at = 0;
	for (int i = 0; i <= ISO_AUDIT_KEYSET_MAX; i++) {
		struct iso_audit_key k;
		crypto_sign_keypair(k.pk, k.sk);
		pk_line(k.pk, big + at, 64);
		at += strlen(big + at);
		big[at++] = '\n';
	}
	big[at] = '\0';
	keyset_refused(big, "keys.txt: line 65: more than 64 keys");
	big[at - strlen(ka) - 1] = '\0'; /* 64 keys are fine */
	assert_int_equal(iso_audit_keyset_parse(big, strlen(big), "keys.txt", &ks, &err), 0);
	assert_int_equal(ks.n, ISO_AUDIT_KEYSET_MAX);
	free(big);
}

static void test_keyset_read(void **state)
{
	char dir[] = "/tmp/iso-keyset-XXXXXX", path[64], ka[64], text[128];
	struct iso_audit_key a;
	struct iso_audit_keyset ks;
	struct iso_error err = {0};
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/keys", dir);
	assert_int_equal(iso_audit_keyset_read(path, &ks, &err), -ENOENT);
	assert_non_null(strstr(err.message, path));
	crypto_sign_keypair(a.pk, a.sk);
	pk_line(a.pk, ka, sizeof(ka));
	snprintf(text, sizeof(text), "%s a\nbad\n", ka);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	assert_int_equal(iso_audit_keyset_read(path, &ks, &err), -EINVAL);
	char want[128];
	snprintf(want, sizeof(want), "%s: line 2: expected", path);
	assert_non_null(strstr(err.message, want));
	f = fopen(path, "w");
	fprintf(f, "%s a\n", ka);
	fclose(f);
	assert_int_equal(iso_audit_keyset_read(path, &ks, &err), 0);
	assert_int_equal(ks.n, 1);
	unlink(path);
	assert_int_equal(iso_audit_keyset_read(dir, &ks, &err), -EINVAL);
	rmdir(dir);
}

/* Heads of the given sizes, heads[i] signed by keys[i], then every event. */
static struct lines export_signed_by(struct log *l, const uint64_t *heads,
                                     const struct iso_audit_key *const *keys)
{
	struct lines ls;
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	assert_non_null(f);
	for (int i = 0; heads[i]; i++) {
		struct iso_audit_head h = {.size = heads[i], .time_ms = 1795000100000};
		assert_int_equal(iso_merkle_root(l->tree, heads[i], h.root), 0);
		iso_audit_head_sign(&h, keys[i]);
		assert_int_equal(iso_audit_export_head(f, &h), 0);
	}
	for (int i = 0; i < l->n; i++)
		assert_int_equal(iso_audit_export_event(f, i, l->leaf[i], l->ev[i], l->len[i]), 0);
	fclose(f);
	lines_from(&ls, text);
	return ls;
}

static struct iso_audit_verdict verify_keys(const struct lines *ls,
                                            const struct iso_audit_keyset *ks)
{
	struct iso_audit_verdict v;
	struct iso_error err = {0};
	FILE *f = tmpfile();

	assert_non_null(f);
	for (int i = 0; i < ls->n; i++)
		fprintf(f, "%s\n", ls->l[i]);
	rewind(f);
	assert_int_equal(iso_audit_verify_stream_keys(f, "x.jsonl", ks, &v, &err), 0);
	fclose(f);
	return v;
}

static void keyset_of(struct iso_audit_keyset *ks, const struct iso_audit_key *const *keys, int n)
{
	char text[1024];
	size_t at = 0;
	struct iso_error err = {0};

	for (int i = 0; i < n; i++) {
		iso_audit_pubkey_format(keys[i]->pk, text + at, sizeof(text) - at);
		at += strlen(text + at);
		at += (size_t)snprintf(text + at, sizeof(text) - at, " node%d\n", i);
	}
	assert_int_equal(iso_audit_keyset_parse(text, at, "keys", ks, &err), 0);
}

static void test_verify_two_signers(void **state)
{
	struct log l;
	struct iso_audit_key b;
	struct iso_audit_keyset ks;
	static const uint64_t heads[] = {10, 20, 30, 0};
	char idb[17], want[200];
	(void)state;

	log_build(&l, 30);
	crypto_sign_keypair(b.pk, b.sk);
	const struct iso_audit_key *signers[] = {&l.key, &l.key, &b};
	const struct iso_audit_key *both[] = {&l.key, &b};
	struct lines ls = export_signed_by(&l, heads, signers);
	uint8_t id[ISO_AUDIT_KEY_ID_LEN];
	iso_audit_key_id(b.pk, id);
	iso_audit_key_id_format(id, idb);
	snprintf(want, sizeof(want), ",\"key\":\"%s\"}", idb);
	assert_non_null(strstr(ls.l[2], want)); /* the export names each head's signer */

	/* Both keys published: the log of two signers verifies. */
	keyset_of(&ks, both, 2);
	struct iso_audit_verdict v = verify_keys(&ls, &ks);
	assert_true(v.ok);
	assert_int_equal(v.heads, 3);
	assert_int_equal(v.events, 30);

	/* The second signer's key taken out of the set: its head is named. */
	keyset_of(&ks, both, 1);
	v = verify_keys(&ls, &ks);
	snprintf(want, sizeof(want), "the head of size 30 is signed by key %s, which is not in",
	         idb);
	expect_bad(&v, -1, 3, want);

	/* One key alone (--pubkey) is a set of one: the same. */
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 3, want);

	/* A head re-signed by a key nobody published, naming its own id. */
	struct iso_audit_key m;
	crypto_sign_keypair(m.pk, m.sk);
	const struct iso_audit_key *forged[] = {&l.key, &m, &b};
	lines_free(&ls);
	ls = export_signed_by(&l, heads, forged);
	keyset_of(&ks, both, 2);
	v = verify_keys(&ls, &ks);
	expect_bad(&v, -1, 2, "the head of size 20 is signed by key");
	/* ... or claiming a published signer's id: a bad signature for that key. */
	iso_audit_key_id(m.pk, id);
	char idm[17], ida[17];
	iso_audit_key_id_format(id, idm);
	iso_audit_key_id(l.key.pk, id);
	iso_audit_key_id_format(id, ida);
	lines_replace(&ls, 1, idm, ida);
	v = VERIFY(&ls, l.key.pk);
	snprintf(want, sizeof(want), "the head of size 20 has a bad signature for key %s", ida);
	expect_bad(&v, -1, 2, want);
	/* ... or without a key id: no key of the set verifies it. */
	char field[40];
	snprintf(field, sizeof(field), ",\"key\":\"%s\"", ida);
	lines_replace(&ls, 1, field, "");
	v = verify_keys(&ls, &ks);
	expect_bad(&v, -1, 2, "the head of size 20 has a bad signature: it was forged");
	lines_free(&ls);

	/* Heads without a key id (signed before key ids) are read as signed by
	 * the key of the set that verifies them. */
	ls = export_signed_by(&l, heads, signers);
	for (int i = 0; i < 3; i++) {
		char *p = strstr(ls.l[i], ",\"key\":\"");
		assert_non_null(p);
		memmove(p, p + 25, strlen(p + 25) + 1);
	}
	assert_null(strstr(ls.l[2], "key"));
	v = verify_keys(&ls, &ks);
	assert_true(v.ok);
	assert_int_equal(v.heads, 3);
	keyset_of(&ks, both, 1);
	v = verify_keys(&ls, &ks);
	expect_bad(&v, -1, 3, "the head of size 30 has a bad signature");

	/* A malformed key id is a malformed head. */
	lines_free(&ls);
	ls = export_signed_by(&l, heads, signers);
	lines_replace(&ls, 0, ida, "00000000000000000");
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 1, "malformed head");
	lines_replace(&ls, 0, "00000000000000000", "0000000000000000");
	v = VERIFY(&ls, l.key.pk);
	expect_bad(&v, -1, 1, "malformed head");
	lines_free(&ls);
	log_free(&l);
}

static void test_verify_many(void **state)
{
	enum { N = 40000 };
	struct iso_audit_key k;
	struct iso_merkle *m;
	struct iso_error err = {0};
	FILE *f = tmpfile();
	char *bytes;
	size_t len;
	long tamper_at = -1;
	(void)state;

	crypto_sign_keypair(k.pk, k.sk);
	assert_int_equal(iso_merkle_new(&m), 0);
	for (int pass = 0; pass < 2; pass++) {
		rewind(f);
		assert_int_equal(ftruncate(fileno(f), 0), 0);
		iso_merkle_truncate(m, 0);
		for (int i = 0; i < N; i++) {
			struct iso_audit_event e;
			hash_t leaf;
			make_event(&e, i, "node.drain");
			assert_int_equal(iso_audit_event_encode(&e, &bytes, &len, &err), 0);
			iso_audit_event_clear(&e);
			iso_audit_leaf_hash(bytes, len, leaf);
			assert_int_equal(iso_merkle_append(m, leaf), 0);
			if (pass == 1 && i == 33333)
				bytes[20] ^= 1; /* after the leaf was computed */
			assert_int_equal(iso_audit_export_event(f, i, leaf, bytes, len), 0);
			free(bytes);
		}
		struct iso_audit_head h = {.size = N, .time_ms = 1};
		assert_int_equal(iso_merkle_root(m, N, h.root), 0);
		iso_audit_head_sign(&h, &k);
		assert_int_equal(iso_audit_export_head(f, &h), 0);
		fflush(f);
		rewind(f);
		struct iso_audit_verdict v;
		assert_int_equal(iso_audit_verify_stream(f, "big", k.pk, &v, &err), 0);
		if (pass == 0) {
			assert_true(v.ok);
			assert_int_equal(v.events, N);
			assert_int_equal(v.heads, 1);
		} else {
			tamper_at = 33333 + 1;
			expect_bad(&v, 33333, tamper_at, "event 33333 does not hash to its leaf");
		}
	}
	fclose(f);
	iso_merkle_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_outcome_names),
	    cmocka_unit_test(test_encode_golden),
	    cmocka_unit_test(test_encode_rejects),
	    cmocka_unit_test(test_decode_rejects),
	    cmocka_unit_test(test_hashes),
	    cmocka_unit_test(test_merkle_vectors),
	    cmocka_unit_test(test_merkle_verify_edges),
	    cmocka_unit_test(test_merkle_reference),
	    cmocka_unit_test(test_merkle_truncate),
	    cmocka_unit_test(test_head_sign_verify),
	    cmocka_unit_test(test_key_files),
	    cmocka_unit_test(test_pubkey_read_strict),
	    cmocka_unit_test(test_export_layout),
	    cmocka_unit_test(test_verify_full_ok),
	    cmocka_unit_test(test_verify_partial_ok_and_bad_proofs),
	    cmocka_unit_test(test_tamper_modify_event),
	    cmocka_unit_test(test_tamper_modify_event_and_leaf),
	    cmocka_unit_test(test_tamper_delete),
	    cmocka_unit_test(test_tamper_insert),
	    cmocka_unit_test(test_tamper_swap),
	    cmocka_unit_test(test_tamper_truncate),
	    cmocka_unit_test(test_tamper_forge_head),
	    cmocka_unit_test(test_malformed_lines),
	    cmocka_unit_test(test_verify_many),
	    cmocka_unit_test(test_key_id),
	    cmocka_unit_test(test_keyset_parse),
	    cmocka_unit_test(test_keyset_read),
	    cmocka_unit_test(test_verify_two_signers),
	};
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

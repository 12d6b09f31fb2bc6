/* test_partitions.c: OpenSM's partitions.conf without hardware. The renderer's
 * exact canonical text, render -> parse round trips (small, multi-line,
 * 1,000 members), OpenSM's prefix keywords and line rules, and one bad-input
 * case for every error the parser reports, each checked for its line. The
 * OpenSM behaviours mirrored here were measured against OpenSM 3.3.23 on
 * ibsim (docs/fabric.md). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "isostack/fabric.h"
#include "fabric/internal.h"

/* ---- building intents by hand (independent of intent.c's builder) ---- */

static struct iso_partition *add_part(struct iso_fabric_intent *in, enum iso_partition_kind kind,
                                      const char *name, uint16_t pkey, bool ipoib)
{
	struct iso_partition *p;

	in->parts = realloc(in->parts, (size_t)(in->n_parts + 1) * sizeof(*in->parts));
	assert_non_null(in->parts);
	p = &in->parts[in->n_parts++];
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->pkey = pkey;
	p->ipoib = ipoib;
	if (kind == ISO_PART_TENANT)
		snprintf(p->tenant, sizeof(p->tenant), "%s", name + 2);
	return p;
}

static void add_member(struct iso_partition *p, uint64_t guid, enum iso_pkey_membership m)
{
	p->members = realloc(p->members, (size_t)(p->n_members + 1) * sizeof(*p->members));
	assert_non_null(p->members);
	p->members[p->n_members].guid = guid;
	p->members[p->n_members].membership = m;
	p->n_members++;
}

static void small_intent(struct iso_fabric_intent *in)
{
	struct iso_partition *p;

	memset(in, 0, sizeof(*in));
	in->generation = 42;
	add_part(in, ISO_PART_DEFAULT, "Default", 0x7fff, true);
	p = add_part(in, ISO_PART_SERVICE, "svc_storage", 0x0010, true);
	add_member(p, 0x1000, ISO_MEMBER_FULL);
	add_member(p, 0x100001, ISO_MEMBER_LIMITED);
	add_member(p, 0x100003, ISO_MEMBER_LIMITED);
	p = add_part(in, ISO_PART_TENANT, "t_acme", 0x0101, true);
	add_member(p, 0x100001, ISO_MEMBER_FULL);
	p = add_part(in, ISO_PART_TENANT, "t_beta", 0x0102, false);
	p->indx0 = true;
	add_member(p, 0x100003, ISO_MEMBER_FULL);
}

static const char small_text[] =
    "# isostack generation 42: do not edit; written by isostackd\n"
    "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n"
    "svc_storage=0x0010, ipoib : 0x0000000000001000=full, 0x0000000000100001=limited, "
    "0x0000000000100003=limited ;\n"
    "t_acme=0x0101, ipoib : 0x0000000000100001=full ;\n"
    "t_beta=0x0102, indx0 : 0x0000000000100003=full ;\n";

static void test_render_canonical(void **state)
{
	struct iso_fabric_intent in;
	struct iso_error e = {0};
	char *text = NULL;

	(void)state;
	small_intent(&in);
	assert_int_equal(iso_partitions_render(&in, &text, &e), 0);
	assert_string_equal(text, small_text);
	free(text);
	iso_fabric_intent_clear(&in);
}

static void assert_same(const struct iso_fabric_intent *a, const struct iso_partitions_file *f)
{
	const struct iso_fabric_intent *b = &f->parts;

	assert_int_equal(a->n_parts, b->n_parts);
	for (int i = 0; i < a->n_parts; i++) {
		const struct iso_partition *x = &a->parts[i], *y = &b->parts[i];

		assert_string_equal(x->name, y->name);
		assert_int_equal(x->pkey, y->pkey);
		assert_int_equal(x->kind, y->kind);
		assert_int_equal(x->ipoib, y->ipoib);
		assert_int_equal(x->indx0, y->indx0);
		if (x->kind == ISO_PART_TENANT)
			assert_string_equal(x->tenant, y->tenant);
		assert_int_equal(x->n_members, y->n_members);
		for (int m = 0; m < x->n_members; m++) {
			assert_int_equal(x->members[m].guid, y->members[m].guid);
			assert_int_equal(x->members[m].membership, y->members[m].membership);
		}
		if (x->kind == ISO_PART_DEFAULT) {
			assert_int_equal(f->all[i], ISO_MEMBER_LIMITED);
			assert_int_equal(f->self[i], ISO_MEMBER_FULL);
		} else {
			assert_int_equal(f->all[i], -1);
			assert_int_equal(f->self[i], -1);
		}
		assert_int_equal(f->all_cas[i], -1);
	}
}

static void roundtrip(struct iso_fabric_intent *in)
{
	struct iso_partitions_file f;
	struct iso_error e = {0};
	char *text = NULL;

	assert_int_equal(iso_partitions_render(in, &text, &e), 0);
	if (iso_partitions_parse("partitions.conf", text, strlen(text), &f, &e) != 0)
		fail_msg("own output refused: %s\n%s", e.message, text);
	assert_same(in, &f);
	/* Every line fits OpenSM's 4094-byte line buffer. */
	for (char *s = text, *nl; (nl = strchr(s, '\n')); s = nl + 1)
		assert_true(nl - s < 4094);
	iso_partitions_file_clear(&f);
	free(text);
}

static void test_roundtrip_small(void **state)
{
	struct iso_fabric_intent in;

	(void)state;
	small_intent(&in);
	roundtrip(&in);
	iso_fabric_intent_clear(&in);
}

/* 1,000 members: the rule spans many lines, each far below 4094 bytes. */
static void test_roundtrip_large(void **state)
{
	struct iso_fabric_intent in = {.generation = 7};
	struct iso_partition *p;

	(void)state;
	add_part(&in, ISO_PART_DEFAULT, "Default", 0x7fff, true);
	p = add_part(&in, ISO_PART_SERVICE, "svc_big", 0x0020, true);
	for (int i = 0; i < 1000; i++)
		add_member(p, 0x100001 + 2 * (uint64_t)i,
		           i < 3 ? ISO_MEMBER_FULL : ISO_MEMBER_LIMITED);
	for (int t = 0; t < 50; t++) {
		char name[16];
		snprintf(name, sizeof(name), "t_x%d", t);
		p = add_part(&in, ISO_PART_TENANT, name, (uint16_t)(0x0100 + t), true);
		for (int i = 0; i < 20; i++)
			add_member(p, 0x100001 + 2 * (uint64_t)(t * 20 + i), ISO_MEMBER_FULL);
	}
	roundtrip(&in);
	iso_fabric_intent_clear(&in);
}

/* A partition left without members is written as NONE, which OpenSM reads
 * as no port at all, and the parser agrees. */
static void test_render_empty_partition(void **state)
{
	struct iso_fabric_intent in = {0};
	struct iso_partitions_file f;
	struct iso_error e = {0};
	char *text = NULL;

	(void)state;
	add_part(&in, ISO_PART_DEFAULT, "Default", 0x7fff, true);
	add_part(&in, ISO_PART_TENANT, "t_gone", 0x0105, true);
	assert_int_equal(iso_partitions_render(&in, &text, &e), 0);
	assert_non_null(strstr(text, "t_gone=0x0105, ipoib : NONE ;\n"));
	assert_int_equal(iso_partitions_parse("p", text, strlen(text), &f, &e), 0);
	assert_int_equal(f.parts.n_parts, 2);
	assert_int_equal(f.parts.parts[1].n_members, 0);
	iso_partitions_file_clear(&f);
	free(text);
	iso_fabric_intent_clear(&in);
}

static void expect_render_error(struct iso_fabric_intent *in, const char *want)
{
	struct iso_error e = {0};
	char *text = NULL;

	assert_int_equal(iso_partitions_render(in, &text, &e), -EINVAL);
	assert_null(text);
	if (!strstr(e.message, want))
		fail_msg("message '%s' lacks '%s'", e.message, want);
}

static void test_render_refuses(void **state)
{
	struct iso_fabric_intent in = {0};
	struct iso_partition *p;

	(void)state;
	p = add_part(&in, ISO_PART_TENANT, "t_a", 0x0101, true);
	add_member(p, 0x100001, ISO_MEMBER_FULL);
	expect_render_error(&in, "no Default partition");
	add_part(&in, ISO_PART_DEFAULT, "Default", 0x7fff, true);
	in.parts[0].pkey = 0;
	expect_render_error(&in, "P_Key 0x0000");
	in.parts[0].pkey = 0x7fff;
	expect_render_error(&in, "P_Key 0x7fff");
	in.parts[0].pkey = 0x0101;
	snprintf(in.parts[0].name, sizeof(in.parts[0].name), "t a");
	expect_render_error(&in, "name 't a'");
	snprintf(in.parts[0].name, sizeof(in.parts[0].name), "t_a");
	in.parts[0].members[0].guid = 0;
	expect_render_error(&in, "GUID 0");
	in.parts[0].members[0].guid = 0x100001;
	/* What the parser would refuse, the renderer refuses (found by
	 * tests/fuzz/fuzz_opafm.c: an intent whose Default was misnamed). */
	add_member(&in.parts[0], 0x100002, ISO_MEMBER_FULL);
	add_member(&in.parts[0], 0x100001, ISO_MEMBER_LIMITED);
	expect_render_error(&in, "GUID 0x0000000000100001 is listed twice");
	in.parts[0].n_members = 2;
	snprintf(in.parts[1].name, sizeof(in.parts[1].name), "Deuaflt");
	expect_render_error(&in, "named Default");
	snprintf(in.parts[1].name, sizeof(in.parts[1].name), "Default");
	p = add_part(&in, ISO_PART_TENANT, "t_b", 0x0101, true);
	expect_render_error(&in, "P_Key 0x0101 is used twice");
	p->pkey = 0x0102;
	snprintf(p->name, sizeof(p->name), "t_a");
	expect_render_error(&in, "two partitions are named 't_a'");
	snprintf(p->name, sizeof(p->name), "t_b");
	roundtrip(&in);
	iso_fabric_intent_clear(&in);
}

/* ---- parsing what people (and OpenSM's docs) write ---- */

static void parse_ok(const char *text, struct iso_partitions_file *f)
{
	struct iso_error e = {0};

	if (iso_partitions_parse("p.conf", text, strlen(text), f, &e) != 0)
		fail_msg("refused: %s", e.message);
}

static void test_parse_prefixes(void **state)
{
	struct iso_partitions_file f;

	(void)state;
	/* Keywords by prefix, as OpenSM reads them; defmember applies to ports
	 * without a flag; "0x10" as a bare header is the P_Key. */
	parse_ok("Default=0x7fff,ipo: A=lim, S=f ;\n"
	         "t_x=0x8010, defm=f, ind : 0x1, 0x2=l, 0x3=fu ; 0x11 : N ;\n"
	         "storage=0x20, mtu=4, rate=3, sl=1, scope=2, Q_Key=0x1b, TClass=1, FlowLabel=5 :\n"
	         "  # a comment inside a rule\n"
	         "\n"
	         "  AL=full,\n"
	         "  1048577=limited, mgid=ff12:401b::ffff:ffff, rate=3 ;\n",
	         &f);
	assert_int_equal(f.parts.n_parts, 4);
	assert_int_equal(f.parts.parts[0].kind, ISO_PART_DEFAULT);
	assert_true(f.parts.parts[0].ipoib);
	assert_int_equal(f.all[0], ISO_MEMBER_LIMITED);
	assert_int_equal(f.self[0], ISO_MEMBER_FULL);
	/* high bit masked, defmember=full, indx0 by prefix */
	assert_int_equal(f.parts.parts[1].pkey, 0x0010);
	assert_true(f.parts.parts[1].indx0);
	assert_false(f.parts.parts[1].ipoib);
	assert_int_equal(f.parts.parts[1].n_members, 3);
	assert_int_equal(f.parts.parts[1].members[0].membership, ISO_MEMBER_FULL);
	assert_int_equal(f.parts.parts[1].members[1].membership, ISO_MEMBER_LIMITED);
	assert_int_equal(f.parts.parts[1].members[2].membership, ISO_MEMBER_FULL);
	assert_string_equal(f.parts.parts[1].tenant, "x");
	assert_string_equal(f.parts.parts[2].name, "0011");
	assert_int_equal(f.parts.parts[2].n_members, 0);
	assert_int_equal(f.parts.parts[3].pkey, 0x20);
	assert_int_equal(f.all[3], ISO_MEMBER_FULL);
	assert_int_equal(f.parts.parts[3].n_members, 1);
	assert_int_equal(f.parts.parts[3].members[0].guid, 0x100001);
	iso_partitions_file_clear(&f);

	/* members come back sorted by GUID */
	parse_ok("Default=0x7fff : ALL_CAS=full ; t_s=0x30 : 0x9=full, 0x3=full, 0x5=full ;", &f);
	assert_int_equal(f.all_cas[0], ISO_MEMBER_FULL);
	assert_int_equal(f.all[0], -1);
	assert_int_equal(f.parts.parts[1].members[0].guid, 3);
	assert_int_equal(f.parts.parts[1].members[2].guid, 9);
	iso_partitions_file_clear(&f);
}

struct bad_case {
	const char *text;
	const char *want; /* "p.conf:LINE: ..." fragment */
};

static void test_parse_bad(void **state)
{
	static const struct bad_case cases[] = {
	    {"t_a=0x0101 : 0x1=full ;\n", "p.conf:1: no Default=0x7fff"},
	    {"Default=0x7fff : ALL=limited ;\nt_a 0x0101 ALL ;\n",
	     "p.conf:2: no partition definition"},
	    {"Default=0x7fff : ALL=limited ;\nt_a=0x0101 : 0xzz=full ;\n",
	     "p.conf:2: partition 't_a': bad port GUID '0xzz'"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : 0x0=full ;\n",
	     "p.conf:2: partition 't_a': bad port GUID '0x0'"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : 0x10000000000000000 ;\n",
	     "p.conf:2: partition 't_a': bad port GUID"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : -1 ;\n",
	     "p.conf:2: partition 't_a': bad port GUID '-1'"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : 0100 ;\n",
	     "p.conf:2: partition 't_a': bad port GUID '0100'"},
	    {"Default=0x7fff : ALL ;\nt_a : 0x1 ;\n", "p.conf:2: partition 't_a' has no P_Key"},
	    {"Default=0x7fff : ALL ;\nt_a=zz : 0x1 ;\n",
	     "p.conf:2: partition 't_a': bad P_Key 'zz'"},
	    {"Default=0x7fff : ALL ;\nt_a=0x10000 : 0x1 ;\n",
	     "p.conf:2: partition 't_a': bad P_Key"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0 : 0x1 ;\n", "p.conf:2: partition 't_a': P_Key 0 "},
	    {"Default=0x7fff : ALL ;\nt_a=0x8000 : 0x1 ;\n", "p.conf:2: partition 't_a': P_Key 0 "},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : 0x1 ;\nt_b=0x8101 : 0x2 ;\n",
	     "p.conf:3: P_Key 0x0101 is already partition 't_a' (line 2)"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : 0x1 ;\nt_a=0x0102 : 0x2 ;\n",
	     "p.conf:3: partition name 't_a' is already used (line 2)"},
	    {"Default=0x7fff : ALL ;\nother=0x7fff : 0x1 ;\n", "p.conf:2: P_Key 0x7fff belongs to"},
	    {"Default=0x0001 : ALL ;\n", "p.conf:1: the Default partition is 0x7fff"},
	    {"Default=0x7fff, bogus : ALL ;\n",
	     "p.conf:1: partition 'Default': unknown flag 'bogus'"},
	    {"Default=0x7fff, ipoib=1 : ALL ;\n", "p.conf:1: flag 'ipoib' takes no value"},
	    {"Default=0x7fff, defmember=both : ALL ;\n", "p.conf:1: defmember=both"},
	    {"Default=0x7fff, defmember=x : ALL ;\n", "p.conf:1: defmember 'x'"},
	    {"Default=0x7fff, defmember : ALL ;\n", "p.conf:1: flag 'defmember' needs"},
	    {"Default=0x7fff, mtu : ALL ;\n", "p.conf:1: flag 'mtu' needs a value"},
	    {"Default=0x7fff, mtu=9 : ALL ;\n", "p.conf:1: flag 'mtu': '9'"},
	    {"Default=0x7fff, sl=16 : ALL ;\n", "p.conf:1: flag 'sl': '16'"},
	    {"Default=0x7fff, rate=x : ALL ;\n", "p.conf:1: flag 'rate': 'x'"},
	    {"Default=0x7fff, FlowLabel=0x100000 : ALL ;\n", "p.conf:1: flag 'FlowLabel'"},
	    {"Default=0x7fff, =3 : ALL ;\n", "p.conf:1: partition 'Default': empty flag"},
	    {"Default=0x7fff : ALL=sideways ;\n",
	     "p.conf:1: partition 'Default': membership 'sideways'"},
	    {"Default=0x7fff : ALL=both ;\n", "p.conf:1: ALL=both needs allow_both_pkeys"},
	    {"Default=0x7fff : ALL=limited, =full ;\n",
	     "p.conf:1: partition 'Default': '=full' without a port"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : 0x1, 0x2, 0x1 ;\n",
	     "p.conf:2: partition 't_a': GUID 0x0000000000000001 is listed twice"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : mgid=fe80::1 ;\n",
	     "p.conf:2: mgid 'fe80::1' is not a multicast"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : mgid=ff12::1, colour=3 ;\n",
	     "p.conf:2: mgid ff12::1: unknown flag 'colour'"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : 0x1,\n  0x2,\n  ;\n",
	     "p.conf:4: ';' starts a line inside the rule of 't_a' (line 2)"},
	    {"Default=0x7fff : ALL ;\n\nt_a=0x0101 : 0x1,\n  0x2\n",
	     "p.conf:3: the rule of 't_a' is not closed"},
	    {"Default=0x7fff : ALL ;\nt_a=0x0101 : 0x1\r\n;", "p.conf:2: control character 0x0d"},
	    {"Default=0x7fff : ALL ;\nt_\xc3\xa9=0x0101 : 0x1 ;", "p.conf:2: byte 0xc3"},
	    {"Default=0x7fff : ALL ;\nt a=0x0101 : 0x1 ;",
	     "p.conf:2: partition name 't a' contains a blank"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct iso_partitions_file f = {0};
		struct iso_error e = {0};
		int r =
		    iso_partitions_parse("p.conf", cases[i].text, strlen(cases[i].text), &f, &e);

		if (r != -EINVAL)
			fail_msg("case %zu accepted (%d): %s", i, r, cases[i].text);
		assert_int_equal(e.code, ISO_E_INVALID);
		if (!strstr(e.message, cases[i].want))
			fail_msg("case %zu: message '%s' lacks '%s'", i, e.message, cases[i].want);
		assert_null(f.parts.parts);
		assert_null(f.all);
	}
}

static void test_parse_nul_and_long_line(void **state)
{
	static const char nul[] = "Default=0x7fff : ALL ;\n\nt_a=0x0101 : 0x1\0 ;\n";
	struct iso_partitions_file f = {0};
	struct iso_error e = {0};
	char *big;
	size_t n = 0;

	(void)state;
	assert_int_equal(iso_partitions_parse("p.conf", nul, sizeof(nul) - 1, &f, &e), -EINVAL);
	assert_non_null(strstr(e.message, "p.conf:3: NUL byte"));

	/* 200 GUIDs on one line: ~5,000 bytes, which OpenSM would cut in two. */
	big = malloc(8192);
	assert_non_null(big);
	n += (size_t)sprintf(big + n, "Default=0x7fff : ALL ;\nt_a=0x0101 :");
	for (int i = 1; i <= 200; i++)
		n += (size_t)sprintf(big + n, " 0x%016x=full,", i);
	n += (size_t)sprintf(big + n, " 0x%016x=full ;\n", 999);
	assert_int_equal(iso_partitions_parse("p.conf", big, n, &f, &e), -EINVAL);
	if (!strstr(e.message, "p.conf:2: line is") ||
	    !strstr(e.message, "OpenSM reads at most 4094"))
		fail_msg("%s", e.message);
	free(big);
}

/* ---- what the OpenSM driver expects to read back (opensm.c) ---- */

static void test_expected_keys(void **state)
{
	struct iso_fabric_intent in;
	uint16_t keys[8];
	uint16_t raw[] = {0xffff, 0x0010, 0x8101};
	struct iso_port_table t = {.guid = 0x100001, .n_pkeys = 3, .pkeys = raw};

	(void)state;
	small_intent(&in);
	/* 0x100001: limited in the service, full in t_acme; Default left out */
	assert_int_equal(iso_fabric_expected_keys(&in, 0x100001, keys, 8), 2);
	assert_int_equal(keys[0], 0x0010);
	assert_int_equal(keys[1], 0x8101);
	assert_true(iso_fabric_table_matches(&t, keys, 2));
	/* a limited entry where the intent says full is a mismatch */
	raw[2] = 0x0101;
	assert_false(iso_fabric_table_matches(&t, keys, 2));
	raw[2] = 0x8101;
	/* an extra key is a mismatch, and so is a missing one */
	t.n_pkeys = 2;
	assert_false(iso_fabric_table_matches(&t, keys, 2));
	assert_int_equal(iso_fabric_expected_keys(&in, 0x1000, keys, 8), 1);
	assert_int_equal(keys[0], 0x8010);
	assert_int_equal(iso_fabric_expected_keys(&in, 0x100007, keys, 8), 0);
	raw[1] = 0x7fff;
	t.n_pkeys = 2;
	assert_true(iso_fabric_table_matches(&t, keys, 0)); /* 0xffff and 0x7fff only */
	iso_fabric_intent_clear(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_render_canonical), cmocka_unit_test(test_roundtrip_small),
	    cmocka_unit_test(test_roundtrip_large),  cmocka_unit_test(test_render_empty_partition),
	    cmocka_unit_test(test_render_refuses),   cmocka_unit_test(test_parse_prefixes),
	    cmocka_unit_test(test_parse_bad),        cmocka_unit_test(test_parse_nul_and_long_line),
	    cmocka_unit_test(test_expected_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

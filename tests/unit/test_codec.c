/* test_codec.c: the JSON shapes that cross the client/server line
 * (include/isostack/codec.h). Each shape must come back from encode then
 * decode as it went in (the sender's and the receiver's view agree), and
 * every rule of the decoder must refuse its bad input with the field that
 * broke it, one case per rule. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "isostack/codec.h"

#define A1 "a-00000000000000a1"

/* Decodes `text` with `decode`; asserts a refusal naming `field`. */
#define REFUSED(decode, out, text, want_field)                                                     \
	do {                                                                                       \
		json_error_t je_;                                                                  \
		struct iso_error e_ = {0};                                                         \
		json_t *j_ = json_loads((text), 0, &je_);                                          \
		assert_non_null(j_);                                                               \
		int r_ = decode(j_, (out), &e_);                                                   \
		json_decref(j_);                                                                   \
		if (r_ != -EINVAL || strcmp(e_.field, (want_field)) != 0)                          \
			fail_msg("%s: r=%d field \"%s\" (want \"%s\"): %s", (text), r_, e_.field,  \
			         (want_field), e_.message);                                        \
		assert_int_equal(e_.code, ISO_E_INVALID);                                          \
	} while (0)

/* ---- the fault report ---- */

static void test_fault_round_trip(void **state)
{
	(void)state;
	static const struct iso_fault_report in = {
	    .gpu = 3, .xid = 94, .gi = 2, .ci = 0, .allocation = A1, .member = 5, .seq = 1234567};
	struct iso_fault_report out;
	struct iso_error err = {0};
	json_t *j = iso_codec_fault_encode(&in);

	memset(&out, 0, sizeof(out));
	out.gpu = 3; /* the route's, not the body's */

	assert_non_null(j);
	assert_int_equal(iso_codec_fault_decode(j, &out, &err), 0);
	assert_memory_equal(&in, &out, sizeof(in));
	json_decref(j);

	/* An operator's report: the XID alone, and nothing of the agent's. */
	struct iso_fault_report bare = {.gpu = 1, .xid = 79, .gi = -1, .ci = -1, .member = -1};
	struct iso_fault_report back;
	memset(&back, 0x55, sizeof(back));
	back.gpu = 1;
	j = iso_codec_fault_encode(&bare);
	assert_int_equal(json_object_size(j), 1);
	assert_int_equal(json_integer_value(json_object_get(j, "xid")), 79);
	assert_int_equal(iso_codec_fault_decode(j, &back, &err), 0);
	assert_int_equal(back.xid, 79);
	assert_int_equal(back.gi, -1);
	assert_int_equal(back.ci, -1);
	assert_int_equal(back.member, -1);
	assert_int_equal(back.seq, 0);
	assert_string_equal(back.allocation, "");
	json_decref(j);
}

static void test_fault_refusals(void **state)
{
	(void)state;
	struct iso_fault_report f;

	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": 79, \"gpu\": 1}", "gpu");
	REFUSED(iso_codec_fault_decode, &f, "{}", "xid");
	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": \"79\"}", "xid");
	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": 1001}", "xid");
	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": 79, \"gi\": 65536}", "gi");
	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": 79, \"ci\": -1}", "ci");
	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": 79, \"seq\": 0}", "seq");
	REFUSED(iso_codec_fault_decode, &f,
	        "{\"xid\": 79, \"allocation\": \"" A1 "\", \"member\": 1024}", "member");
	REFUSED(iso_codec_fault_decode, &f,
	        "{\"xid\": 79, \"allocation\": \"a-00000000000000A1\", \"member\": 0}",
	        "allocation");
	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": 79, \"allocation\": null, \"member\": 0}",
	        "allocation");
	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": 79, \"allocation\": \"" A1 "\"}", "member");
	REFUSED(iso_codec_fault_decode, &f, "{\"xid\": 79, \"member\": 0}", "allocation");
}

/* ---- the status report ---- */

static void test_status_round_trip(void **state)
{
	(void)state;
	static struct iso_agent_gpu gpus[] = {
	    {.index = 0, .model = "NVIDIA H100 80GB HBM3", .uuid = "GPU-1", .mig = true},
	    {.index = 7, .model = "A30", .uuid = "GPU-2"}};
	static struct iso_agent_instance insts[] = {{.gpu = 0,
	                                             .start = 4,
	                                             .member = 2,
	                                             .profile = "3g.40gb",
	                                             .uuid = "MIG-x",
	                                             .allocation = A1,
	                                             .ready = true},
	                                            {.gpu = 7,
	                                             .start = 0,
	                                             .member = 0,
	                                             .profile = "whole",
	                                             .allocation = A1,
	                                             .reason = "MIG mode is enabled"}};
	static struct iso_agent_vf vfs[] = {
	    {.index = 2,
	     .netdev = "ib0v2",
	     .guid = 0x0002c90300ef0102ULL,
	     .has_guid = true,
	     .ready = true},
	    {.index = 3, .reason = "no VF driver"},
	    /* RoCE: VLAN and spoof check read back */
	    {.index = 4,
	     .netdev = "eth0v4",
	     .has_vlan = true,
	     .vlan = 100,
	     .spoofchk = true,
	     .ready = true},
	    {.index = 5, .has_vlan = true, .vlan = 0, .spoofchk = false, .reason = "reads VLAN 0"}};
	static struct iso_agent_condition conds[] = {
	    {.type = ISO_AGENT_COND_MIG_MODE, .gpu = 7, .want = true, .have = false}};
	struct iso_agent_status in = {.term_seen = 42,
	                              .version = "0.1.0",
	                              .n_gpus = 2,
	                              .gpus = gpus,
	                              .n_instances = 2,
	                              .instances = insts,
	                              .n_vfs = 4,
	                              .vfs = vfs,
	                              .n_conditions = 1,
	                              .conditions = conds};
	struct iso_agent_status out;
	struct iso_error err = {0};
	json_t *j = iso_codec_status_encode(&in, true);

	assert_non_null(j);
	assert_int_equal(iso_codec_status_decode(j, &out, &err), 0);
	assert_int_equal(out.term_seen, 42);
	assert_string_equal(out.version, "0.1.0");
	assert_int_equal(out.n_gpus, 2);
	assert_memory_equal(out.gpus, gpus, sizeof(gpus));
	assert_int_equal(out.n_instances, 2);
	assert_memory_equal(out.instances, insts, sizeof(insts));
	assert_int_equal(out.n_vfs, 4);
	assert_memory_equal(out.vfs, vfs, sizeof(vfs));
	json_t *roce = json_array_get(json_object_get(j, "vfs"), 2);
	assert_null(json_object_get(roce, "guid"));
	assert_true(json_is_true(json_object_get(roce, "spoofchk")));
	assert_null(json_object_get(json_array_get(json_object_get(j, "vfs"), 0), "vlan"));
	assert_int_equal(out.n_conditions, 1);
	assert_memory_equal(out.conditions, conds, sizeof(conds));
	iso_codec_status_clear(&out);
	json_decref(j);

	/* Without the VF pass there is no "vfs" key, and that is none. */
	j = iso_codec_status_encode(&in, false);
	assert_null(json_object_get(j, "vfs"));
	assert_int_equal(iso_codec_status_decode(j, &out, &err), 0);
	assert_int_equal(out.n_vfs, 0);
	assert_null(out.vfs);
	iso_codec_status_clear(&out);
	json_decref(j);
}

/* A long reason is cut to 256 bytes, never inside a UTF-8 character, so
 * the report that carries it is still accepted. */
static void test_reason_cut(void **state)
{
	(void)state;
	char in[400], out[ISO_AGENT_REASON_MAX];

	memset(in, 'x', sizeof(in));
	in[sizeof(in) - 1] = '\0';
	iso_codec_reason_copy(out, in);
	assert_int_equal(strlen(out), 256);
	/* "é" (2 bytes) across the 256th byte: the cut goes before it. */
	in[255] = (char)0xc3;
	in[256] = (char)0xa9;
	iso_codec_reason_copy(out, in);
	assert_int_equal(strlen(out), 255);
	assert_true(iso_text_valid(out));
	iso_codec_reason_copy(out, "short");
	assert_string_equal(out, "short");
}

#define ST(extra)                                                                                  \
	"{\"term_seen\": 1, \"version\": \"0.1.0\", \"gpus\": [], \"instances\": []" extra "}"
#define GPU(body)  "{\"term_seen\": 1, \"version\": \"v\", \"instances\": [], \"gpus\": [" body "]}"
#define INST(body) "{\"term_seen\": 1, \"version\": \"v\", \"gpus\": [], \"instances\": [" body "]}"
#define INST_OK                                                                                    \
	"\"gpu\": 0, \"start\": 0, \"profile\": \"1g.10gb\", \"allocation\": \"" A1                \
	"\", \"member\": 0"
#define VF(body)   ST(", \"vfs\": [" body "]")
#define COND(body) ST(", \"conditions\": [" body "]")

static void test_status_refusals(void **state)
{
	(void)state;
	struct iso_agent_status st;
	struct {
		const char *text, *field;
	} cases[] = {
	    {ST(", \"extra\": 1"), "extra"},
	    {"{\"version\": \"v\", \"gpus\": [], \"instances\": []}", "term_seen"},
	    {ST(", \"term_seen\": -1"), "term_seen"}, /* duplicate keys: the last wins */
	    {"{\"term_seen\": 1, \"version\": \"\", \"gpus\": [], \"instances\": []}", "version"},
	    {"{\"term_seen\": 1, \"version\": \"v\\u0001\", \"gpus\": [], \"instances\": []}",
	     "version"},
	    {"{\"term_seen\": 1, \"version\": \"v\", \"instances\": []}", "gpus"},
	    {"{\"term_seen\": 1, \"version\": \"v\", \"gpus\": {}, \"instances\": []}", "gpus"},
	    {GPU("1"), "gpus[0]"},
	    {GPU("{\"index\": 64, \"model\": \"m\", \"uuid\": \"u\", \"mig_mode\": \"enabled\"}"),
	     "gpus[0].index"},
	    {GPU("{\"index\": 0, \"model\": \"m\", \"uuid\": \"u\", \"mig_mode\": \"on\"}"),
	     "gpus[0].mig_mode"},
	    {GPU("{\"index\": 0, \"model\": \"m\", \"uuid\": \"u\", \"mig_mode\": \"enabled\"},"
	         "{\"index\": 1, \"model\": \"m\", \"mig_mode\": \"enabled\"}"),
	     "gpus[1].uuid"},
	    {INST("{" INST_OK ", \"ready\": true, \"x\": 1}"), "instances[0].x"},
	    {INST("{" INST_OK "}"), "instances[0].ready"},
	    {INST("{" INST_OK ", \"ready\": 1}"), "instances[0].ready"},
	    {INST("{\"gpu\": 0, \"start\": 8, \"profile\": \"1g.10gb\", \"allocation\": \"" A1
	          "\", \"member\": 0, \"ready\": true}"),
	     "instances[0].start"},
	    {INST("{\"gpu\": 0, \"start\": 0, \"profile\": \"1g.10gb\", \"allocation\": \"a-1\", "
	          "\"member\": 0, \"ready\": true}"),
	     "instances[0].allocation"},
	    {INST("{\"gpu\": 0, \"start\": 0, \"profile\": \"1g.10gb\", \"allocation\": \"" A1
	          "\", \"member\": 1024, \"ready\": true}"),
	     "instances[0].member"},
	    {INST("{" INST_OK ", \"ready\": false, \"reason\": \"a\\nb\"}"), "instances[0].reason"},
	    {VF("{\"index\": 128, \"ready\": false}"), "vfs[0].index"},
	    {VF("{\"index\": 1, \"netdev\": \"ib/0\", \"ready\": false}"), "vfs[0].netdev"},
	    {VF("{\"index\": 1, \"guid\": \"0x12\", \"ready\": false}"), "vfs[0].guid"},
	    {VF("{\"index\": 1, \"guid\": \"\", \"ready\": true}"), "vfs[0].guid"},
	    {VF("{\"index\": 1}"), "vfs[0].ready"},
	    /* RoCE VFs: vlan 0-4094 with spoofchk, no GUID beside them */
	    {VF("{\"index\": 1, \"vlan\": 4095, \"spoofchk\": true, \"ready\": false}"),
	     "vfs[0].vlan"},
	    {VF("{\"index\": 1, \"vlan\": -1, \"spoofchk\": true, \"ready\": false}"),
	     "vfs[0].vlan"},
	    {VF("{\"index\": 1, \"vlan\": 100, \"ready\": true}"), "vfs[0].spoofchk"},
	    {VF("{\"index\": 1, \"vlan\": 100, \"spoofchk\": 1, \"ready\": true}"),
	     "vfs[0].spoofchk"},
	    {VF("{\"index\": 1, \"spoofchk\": true, \"ready\": false}"), "vfs[0].spoofchk"},
	    {VF("{\"index\": 1, \"vlan\": 100, \"spoofchk\": true, \"guid\": "
	        "\"0x0002c90300ef0102\", \"ready\": true}"),
	     "vfs[0].guid"},
	    {ST(", \"vfs\": null"), "vfs"},
	    {COND("{\"type\": \"Hot\", \"gpu\": 0, \"want\": true, \"have\": false}"),
	     "conditions[0].type"},
	    {COND("{\"type\": \"MigModeMismatch\", \"gpu\": 0, \"want\": true, \"have\": 0}"),
	     "conditions[0].have"},
	    {COND("{\"type\": \"MigModeMismatch\", \"gpu\": 0, \"want\": true, \"have\": true}"),
	     "conditions[0].have"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		REFUSED(iso_codec_status_decode, &st, cases[i].text, cases[i].field);
		iso_codec_status_clear(&st);
	}
}

/* ---- the desired state ---- */

static int decode_n1(json_t *doc, struct iso_agent_desired *out, struct iso_error *err)
{
	return iso_codec_desired_decode(doc, "n1", out, err);
}

static void test_desired_round_trip(void **state)
{
	(void)state;
	static struct iso_agent_vf_member acme[] = {
	    {.allocation = A1, .member = 0}, {.allocation = "a-00000000000000a2", .member = 3}};
	static struct iso_agent_want wants[] = {
	    {.gpu = 0, .profile = "1g.10gb", .start = 0, .width = 1, .allocation = A1, .member = 0},
	    {.gpu = 0, .profile = "3g.40gb", .start = 4, .width = 4, .allocation = A1, .member = 1},
	    {.gpu = 2, .profile = "whole", .allocation = "a-00000000000000a2", .member = 3}};
	static struct iso_agent_vf_want vfs[] = {
	    {.index = 2,
	     .device = "mlx5_0",
	     .guid = 0x0002c90300ef0102ULL,
	     .tenant = "acme",
	     .pkey = 0x8101,
	     .n_members = 2,
	     .members = acme},
	    {.index = 3, .device = "mlx5_0", .tenant = "beta", .vlan = 4094}};
	struct iso_agent_desired in = {.node = "n1",
	                               .generation = (7ULL << 32) | 3,
	                               .term = 7,
	                               .n_gpus = 3,
	                               .gpus = {{0, true}, {1, true}, {2, false}},
	                               .n_wants = 3,
	                               .wants = wants,
	                               .n_vfs = 2,
	                               .vfs = vfs};
	struct iso_agent_desired out;
	struct iso_error err = {0};
	json_t *j = iso_codec_desired_encode(&in);

	assert_non_null(j);
	/* a RoCE VF carries its tenant's VLAN instead of a GUID and P_Key */
	json_t *roce = json_array_get(json_object_get(j, "vfs"), 1);
	assert_int_equal(json_integer_value(json_object_get(roce, "vlan")), 4094);
	assert_null(json_object_get(roce, "guid"));
	assert_null(json_object_get(roce, "pkey"));
	assert_null(json_object_get(json_array_get(json_object_get(j, "vfs"), 0), "vlan"));
	assert_int_equal(iso_codec_desired_decode(j, "n1", &out, &err), 0);
	assert_string_equal(out.node, "n1");
	assert_true(out.generation == in.generation);
	assert_int_equal(out.term, 7);
	assert_int_equal(out.n_gpus, 3);
	assert_memory_equal(out.gpus, in.gpus, sizeof(in.gpus));
	assert_int_equal(out.n_wants, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(out.wants[i].gpu, wants[i].gpu);
		assert_string_equal(out.wants[i].profile, wants[i].profile);
		assert_int_equal(out.wants[i].start, wants[i].start);
		assert_int_equal(out.wants[i].width, wants[i].width);
		assert_string_equal(out.wants[i].allocation, wants[i].allocation);
		assert_int_equal(out.wants[i].member, wants[i].member);
	}
	assert_int_equal(out.n_vfs, 2);
	assert_int_equal(out.vfs[1].index, 3);
	assert_int_equal(out.vfs[1].vlan, 4094);
	assert_true(out.vfs[1].guid == 0);
	assert_int_equal(out.vfs[1].pkey, 0);
	assert_string_equal(out.vfs[1].tenant, "beta");
	assert_int_equal(out.vfs[1].n_members, 0);
	assert_int_equal(out.vfs[0].vlan, 0);
	assert_int_equal(out.vfs[0].index, 2);
	assert_string_equal(out.vfs[0].device, "mlx5_0");
	assert_true(out.vfs[0].guid == vfs[0].guid);
	assert_string_equal(out.vfs[0].tenant, "acme");
	assert_int_equal(out.vfs[0].pkey, 0x8101);
	assert_int_equal(out.vfs[0].n_members, 2);
	assert_memory_equal(out.vfs[0].members, acme, sizeof(acme));
	/* GPU 1 holds nothing: no instances, whole null. */
	json_t *g1 = json_array_get(json_object_get(j, "gpus"), 1);
	assert_int_equal(json_array_size(json_object_get(g1, "instances")), 0);
	assert_true(json_is_null(json_object_get(g1, "whole")));
	iso_codec_desired_clear(&out);
	json_decref(j);
}

#define DOC(gpus, vfs)                                                                             \
	"{\"node\": \"n1\", \"generation\": 7, \"term\": 1, \"gpus\": [" gpus "], \"vfs\": [" vfs  \
	"]}"
#define GPU0(x) "{\"index\": 0, \"mig\": true, \"instances\": [" x "], \"whole\": null}"
#define DINST(profile, start, width)                                                               \
	"{\"profile\": \"" profile "\", \"start\": " #start ", \"width\": " #width                 \
	", \"allocation\": \"" A1 "\", \"member\": 0}"
#define DVF(index, guid, pkey, members)                                                            \
	"{\"index\": " #index ", \"device\": \"mlx5_0\", \"guid\": \"" guid                        \
	"\", \"tenant\": \"acme\", \"pkey\": \"" pkey "\", \"members\": [" members "]}"
#define G1 "0x0002c90300ef0102"
#define DRVF(vlan, extra)                                                                          \
	"{\"index\": 1, \"device\": \"mlx5_0\", \"tenant\": \"acme\", \"vlan\": " vlan             \
	", \"members\": []" extra "}"

static void test_desired_refusals(void **state)
{
	(void)state;
	struct iso_agent_desired d;
	struct {
		const char *text, *field;
	} cases[] = {
	    {"{\"node\": \"n2\", \"generation\": 7, \"term\": 1, \"gpus\": [], \"vfs\": []}",
	     "node"},
	    {"{\"node\": \"n1\", \"term\": 1, \"gpus\": [], \"vfs\": []}", "generation"},
	    {"{\"node\": \"n1\", \"generation\": 7, \"term\": -1, \"gpus\": [], \"vfs\": []}",
	     "term"},
	    {"{\"node\": \"n1\", \"generation\": 7, \"term\": 1, \"gpus\": [], \"vfs\": [], "
	     "\"x\": 1}",
	     "x"},
	    {"{\"node\": \"n1\", \"generation\": 7, \"term\": 1, \"gpus\": {}, \"vfs\": []}",
	     "gpus"},
	    {"{\"node\": \"n1\", \"generation\": 7, \"term\": 1, \"gpus\": []}", "vfs"},
	    {DOC("7", ""), "gpus[0]"},
	    {DOC("{\"index\": 64, \"mig\": true, \"instances\": [], \"whole\": null}", ""),
	     "gpus[0].index"},
	    {DOC("{\"index\": 0, \"mig\": 1, \"instances\": [], \"whole\": null}", ""),
	     "gpus[0].mig"},
	    {DOC("{\"index\": 0, \"mig\": true, \"whole\": null}", ""), "gpus[0].instances"},
	    {DOC(GPU0("") "," GPU0(""), ""), "gpus[1].index"},
	    {DOC(GPU0(DINST("1g.10gb", 8, 1)), ""), "gpus[0].instances[0].start"},
	    {DOC(GPU0(DINST("1g.10gb", 0, 9)), ""), "gpus[0].instances[0].width"},
	    {DOC(GPU0(DINST("whole", 0, 1)), ""), "gpus[0].instances[0].profile"},
	    {DOC(GPU0(DINST("1G.10gb", 0, 1)), ""), "gpus[0].instances[0].profile"},
	    {DOC(GPU0(DINST("1g.10gb", 0, 1) "," DINST("2g.20gb", 0, 2)), ""),
	     "gpus[0].instances[1].start"},
	    {DOC(GPU0("{\"profile\": \"1g.10gb\", \"start\": 0, \"width\": 1, \"allocation\": \"" A1
	              "\", \"member\": 1024}"),
	         ""),
	     "gpus[0].instances[0].member"},
	    {DOC("{\"index\": 0, \"mig\": true, \"instances\": [" DINST(
	             "1g.10gb", 0, 1) "], \"whole\": {\"allocation\": \"" A1 "\", \"member\": 0}}",
	         ""),
	     "gpus[0].whole"},
	    {DOC("{\"index\": 0, \"mig\": false, \"instances\": [], \"whole\": 3}", ""),
	     "gpus[0].whole"},
	    {DOC("", DVF(128, G1, "0x8101", "")), "vfs[0].index"},
	    {DOC("", DVF(1, "0x12", "0x8101", "")), "vfs[0].guid"},
	    {DOC("", DVF(1, G1, "0x0101", "")), "vfs[0].pkey"},
	    {DOC("", DVF(1, G1, "0x8101", "") "," DVF(1, G1, "0x8102", "")), "vfs[1].index"},
	    {DOC("", DVF(1, G1, "0x8101", "{\"allocation\": \"" A1 "\", \"member\": 0, \"x\": 1}")),
	     "vfs[0].members[0].x"},
	    {DOC("", DVF(1, G1, "0x8101", "{\"allocation\": \"" A1 "\", \"member\": 1024}")),
	     "vfs[0].members[0].member"},
	    /* RoCE VFs: a VLAN 1-4094, and neither GUID nor P_Key beside it */
	    {DOC("", DRVF("0", "")), "vfs[0].vlan"},
	    {DOC("", DRVF("4095", "")), "vfs[0].vlan"},
	    {DOC("", DRVF("\"100\"", "")), "vfs[0].vlan"},
	    {DOC("", DRVF("null", "")), "vfs[0].vlan"},
	    {DOC("", DRVF("100", ", \"guid\": \"" G1 "\"")), "vfs[0].guid"},
	    {DOC("", DRVF("100", ", \"pkey\": \"0x8101\"")), "vfs[0].pkey"},
	    {DOC("", DRVF("100", "") "," DRVF("101", "")), "vfs[1].index"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&d, 0x5a, sizeof(d));
		REFUSED(decode_n1, &d, cases[i].text, cases[i].field);
		/* refused whole: nothing handed out */
		assert_null(d.wants);
		assert_null(d.vfs);
		assert_int_equal(d.n_wants + d.n_vfs, 0);
	}
}

/* ---- issue 14: the desired members, the reported sandboxes and overlay ---- */

static void test_members_round_trip(void **state)
{
	(void)state;
	static char peers[][16] = {"192.0.2.12", "192.0.2.13"};
	static struct iso_agent_member_want members[] = {{.allocation = A1,
	                                                  .member = 0,
	                                                  .tenant = "acme",
	                                                  .key = "slurm-42",
	                                                  .cpus = 4,
	                                                  .memory_mib = 16384,
	                                                  .io_uring = false,
	                                                  .has_overlay = true,
	                                                  .vni = 10001,
	                                                  .node_index = 3,
	                                                  .n_peers = 2,
	                                                  .peers = peers},
	                                                 {.allocation = "a-00000000000000a2",
	                                                  .member = 7,
	                                                  .tenant = "beta",
	                                                  .cpus = 0,
	                                                  .memory_mib = 0,
	                                                  .io_uring = true}};
	struct iso_agent_desired in = {
	    .node = "n1", .generation = 9, .term = 1, .n_members = 2, .members = members};
	struct iso_agent_desired out;
	struct iso_error err = {0};
	json_t *j = iso_codec_desired_encode(&in);

	assert_non_null(j);
	/* the second member's overlay is there, as null */
	json_t *m1 = json_array_get(json_object_get(j, "members"), 1);
	assert_non_null(json_object_get(m1, "overlay"));
	assert_true(json_is_null(json_object_get(m1, "overlay")));
	/* a key only where the allocation has one */
	assert_string_equal(json_string_value(json_object_get(
	                        json_array_get(json_object_get(j, "members"), 0), "key")),
	                    "slurm-42");
	assert_null(json_object_get(m1, "key"));
	assert_int_equal(iso_codec_desired_decode(j, "n1", &out, &err), 0);
	assert_int_equal(out.n_members, 2);
	for (size_t i = 0; i < 2; i++) {
		const struct iso_agent_member_want *a = &members[i], *b = &out.members[i];
		assert_string_equal(b->allocation, a->allocation);
		assert_int_equal(b->member, a->member);
		assert_string_equal(b->tenant, a->tenant);
		assert_string_equal(b->key, a->key);
		assert_int_equal(b->cpus, a->cpus);
		assert_true(b->memory_mib == a->memory_mib);
		assert_int_equal(b->io_uring, a->io_uring);
		assert_int_equal(b->has_overlay, a->has_overlay);
		assert_int_equal(b->vni, a->vni);
		assert_int_equal(b->node_index, a->node_index);
		assert_int_equal(b->n_peers, a->n_peers);
		for (size_t k = 0; k < a->n_peers; k++)
			assert_string_equal(b->peers[k], a->peers[k]);
	}
	iso_codec_desired_clear(&out);
	json_decref(j);

	/* a document from before issue 14 has no "members": none */
	j = json_pack("{s:s, s:i, s:i, s:[], s:[]}", "node", "n1", "generation", 1, "term", 1,
	              "gpus", "vfs");
	assert_int_equal(iso_codec_desired_decode(j, "n1", &out, &err), 0);
	assert_int_equal(out.n_members, 0);
	assert_null(out.members);
	json_decref(j);
}

/* 128 characters: with one more, a key one too long */
#define K16  "KKKKKKKKKKKKKKKK"
#define K128 K16 K16 K16 K16 K16 K16 K16 K16
#define MDOC(members)                                                                              \
	"{\"node\": \"n1\", \"generation\": 7, \"term\": 1, \"gpus\": [], \"vfs\": [], "           \
	"\"members\": [" members "]}"
#define MEMBER(alloc, member, rest)                                                                \
	"{\"allocation\": \"" alloc "\", \"member\": " #member ", \"tenant\": \"acme\", "          \
	"\"cpus\": 4, \"memory_mib\": 1024, \"io_uring\": false" rest "}"
#define M_OK(rest) MEMBER(A1, 0, rest)
#define OVL(vni, index, peers)                                                                     \
	", \"overlay\": {\"vni\": " #vni ", \"node_index\": " #index ", \"peers\": [" peers "]}"

static void test_members_refusals(void **state)
{
	(void)state;
	struct iso_agent_desired d;
	struct {
		const char *text, *field;
	} cases[] = {
	    {"{\"node\": \"n1\", \"generation\": 7, \"term\": 1, \"gpus\": [], \"vfs\": [], "
	     "\"members\": {}}",
	     "members"},
	    {MDOC("3"), "members[0]"},
	    {MDOC(M_OK(", \"overlay\": null, \"x\": 1")), "members[0].x"},
	    {MDOC(M_OK("")), "members[0].overlay"},
	    {MDOC(MEMBER("a-1", 0, ", \"overlay\": null")), "members[0].allocation"},
	    {MDOC(MEMBER(A1, 1024, ", \"overlay\": null")), "members[0].member"},
	    {MDOC(MEMBER(A1, -1, ", \"overlay\": null")), "members[0].member"},
	    {MDOC("{\"allocation\": \"" A1 "\", \"member\": 0, \"tenant\": \"Acme!\", \"cpus\": 4, "
	          "\"memory_mib\": 1, \"io_uring\": false, \"overlay\": null}"),
	     "members[0].tenant"},
	    {MDOC("{\"allocation\": \"" A1 "\", \"member\": 0, \"cpus\": 4, "
	          "\"memory_mib\": 1, \"io_uring\": false, \"overlay\": null}"),
	     "members[0].tenant"},
	    {MDOC("{\"allocation\": \"" A1 "\", \"member\": 0, \"tenant\": \"acme\", \"cpus\": "
	          "\"4\", \"memory_mib\": 1, \"io_uring\": false, \"overlay\": null}"),
	     "members[0].cpus"},
	    {MDOC("{\"allocation\": \"" A1 "\", \"member\": 0, \"tenant\": \"acme\", \"cpus\": "
	          "65537, \"memory_mib\": 1, \"io_uring\": false, \"overlay\": null}"),
	     "members[0].cpus"},
	    {MDOC("{\"allocation\": \"" A1 "\", \"member\": 0, \"tenant\": \"acme\", \"cpus\": "
	          "4, \"memory_mib\": -1, \"io_uring\": false, \"overlay\": null}"),
	     "members[0].memory_mib"},
	    {MDOC("{\"allocation\": \"" A1 "\", \"member\": 0, \"tenant\": \"acme\", \"cpus\": "
	          "4, \"memory_mib\": 1, \"io_uring\": 0, \"overlay\": null}"),
	     "members[0].io_uring"},
	    {MDOC("{\"allocation\": \"" A1 "\", \"member\": 0, \"tenant\": \"acme\", \"cpus\": "
	          "4, \"memory_mib\": 1, \"overlay\": null}"),
	     "members[0].io_uring"},
	    {MDOC(M_OK(", \"overlay\": null") "," M_OK(", \"overlay\": null")),
	     "members[1].member"},
	    {MDOC(M_OK(", \"overlay\": 7")), "members[0].overlay"},
	    /* the allocation's key: a string of the Idempotency-Key's charset */
	    {MDOC(M_OK(", \"key\": \"\", \"overlay\": null")), "members[0].key"},
	    {MDOC(M_OK(", \"key\": 42, \"overlay\": null")), "members[0].key"},
	    {MDOC(M_OK(", \"key\": null, \"overlay\": null")), "members[0].key"},
	    {MDOC(M_OK(", \"key\": \"slurm 42\", \"overlay\": null")), "members[0].key"},
	    {MDOC(M_OK(", \"key\": \"slurm/42\", \"overlay\": null")), "members[0].key"},
	    {MDOC(M_OK(", \"key\": \"K" K128 "\", \"overlay\": null")), "members[0].key"},
	    {MDOC(M_OK(", \"overlay\": {\"vni\": 1, \"node_index\": 0, \"peers\": [], \"x\": 1}")),
	     "members[0].overlay.x"},
	    {MDOC(M_OK(OVL(0, 0, ""))), "members[0].overlay.vni"},
	    {MDOC(M_OK(OVL(16777216, 0, ""))), "members[0].overlay.vni"},
	    {MDOC(M_OK(OVL("10001", 0, ""))), "members[0].overlay.vni"},
	    {MDOC(M_OK(", \"overlay\": {\"node_index\": 0, \"peers\": []}")),
	     "members[0].overlay.vni"},
	    {MDOC(M_OK(OVL(10001, -1, ""))), "members[0].overlay.node_index"},
	    {MDOC(M_OK(OVL(10001, 65536, ""))), "members[0].overlay.node_index"},
	    {MDOC(M_OK(", \"overlay\": {\"vni\": 10001, \"node_index\": 0}")),
	     "members[0].overlay.peers"},
	    {MDOC(M_OK(", \"overlay\": {\"vni\": 10001, \"node_index\": 0, \"peers\": \"x\"}")),
	     "members[0].overlay.peers"},
	    {MDOC(M_OK(OVL(10001, 0, "\"192.0.2.300\""))), "members[0].overlay.peers[0]"},
	    {MDOC(M_OK(OVL(10001, 0, "\"192.0.2.1\", \"192.0.02.2\""))),
	     "members[0].overlay.peers[1]"},
	    {MDOC(M_OK(OVL(10001, 0, "\"192.0.2.1\", 5"))), "members[0].overlay.peers[1]"},
	    {MDOC(M_OK(OVL(10001, 0, "\"192.0.2.2\", \"192.0.2.1\""))),
	     "members[0].overlay.peers[1]"},
	    {MDOC(M_OK(OVL(10001, 0, "\"192.0.2.1\", \"192.0.2.1\""))),
	     "members[0].overlay.peers[1]"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&d, 0x5a, sizeof(d));
		REFUSED(decode_n1, &d, cases[i].text, cases[i].field);
		assert_null(d.members);
		assert_int_equal(d.n_members, 0);
	}
}

static void test_status_sandboxes_round_trip(void **state)
{
	(void)state;
	static struct iso_agent_sandbox sbs[] = {
	    {.allocation = A1, .member = 0, .ready = true, .cgroup = "iso-" A1 "-0", .cpus = "2-3"},
	    {.allocation = A1, .member = 1, .reason = "cpuset: no free cores"}};
	static struct iso_agent_overlay_member om[] = {
	    {.allocation = A1, .member = 0, .ifname = "eth0", .address = "10.0.3.2"},
	    {.allocation = A1, .member = 1}};
	static struct iso_agent_overlay_tenant ot[] = {{.vni = 10001,
	                                                .bridge = "isobr10001",
	                                                .vxlan = "isovx10001",
	                                                .n_members = 2,
	                                                .members = om}};
	static struct iso_agent_overlay_allow oa[] = {{.peer = "192.0.2.12", .vni = 10001},
	                                              {.peer = "192.0.2.13", .vni = 10001}};
	struct iso_agent_status in = {.term_seen = 3,
	                              .version = "0.1.0",
	                              .sandbox_real = true,
	                              .n_sandboxes = 2,
	                              .sandboxes = sbs,
	                              .has_overlay = true,
	                              .overlay = {.guard = true,
	                                          .drops = 12,
	                                          .n_allowed = 2,
	                                          .allowed = oa,
	                                          .n_tenants = 1,
	                                          .tenants = ot}};
	struct iso_agent_status out;
	struct iso_error err = {0};
	json_t *j = iso_codec_status_encode(&in, false);

	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "sandbox_mode")), "real");
	assert_int_equal(iso_codec_status_decode(j, &out, &err), 0);
	assert_true(out.sandbox_real);
	assert_int_equal(out.n_sandboxes, 2);
	assert_memory_equal(out.sandboxes, sbs, sizeof(sbs));
	assert_true(out.has_overlay);
	assert_true(out.overlay.guard);
	assert_true(out.overlay.drops == 12);
	assert_int_equal(out.overlay.n_allowed, 2);
	assert_memory_equal(out.overlay.allowed, oa, sizeof(oa));
	assert_int_equal(out.overlay.n_tenants, 1);
	assert_int_equal(out.overlay.tenants[0].vni, 10001);
	assert_string_equal(out.overlay.tenants[0].bridge, "isobr10001");
	assert_string_equal(out.overlay.tenants[0].vxlan, "isovx10001");
	assert_int_equal(out.overlay.tenants[0].n_members, 2);
	assert_memory_equal(out.overlay.tenants[0].members, om, sizeof(om));
	iso_codec_status_clear(&out);
	json_decref(j);

	/* off, no sandboxes, no overlay: the overlay key is absent */
	struct iso_agent_status bare = {.term_seen = 3, .version = "0.1.0"};
	j = iso_codec_status_encode(&bare, false);
	assert_string_equal(json_string_value(json_object_get(j, "sandbox_mode")), "off");
	assert_null(json_object_get(j, "overlay"));
	assert_int_equal(iso_codec_status_decode(j, &out, &err), 0);
	assert_false(out.sandbox_real);
	assert_false(out.has_overlay);
	assert_int_equal(out.n_sandboxes, 0);
	iso_codec_status_clear(&out);
	json_decref(j);
	/* an agent from before issue 14 sends none of them: off */
	j = json_pack("{s:i, s:s, s:[], s:[]}", "term_seen", 1, "version", "v", "gpus",
	              "instances");
	assert_int_equal(iso_codec_status_decode(j, &out, &err), 0);
	assert_false(out.sandbox_real);
	iso_codec_status_clear(&out);
	json_decref(j);
}

static void test_cpus_valid(void **state)
{
	(void)state;
	static const char *const good[] = {"0", "2-3", "0-3,8", "0,2,4", "10-11,63", "65535"};
	static const char *const bad[] = {"",      "-1",    "3-2",     "1-1",  "1,1", "2,1",
	                                  "0-3,3", "01",    "1,",      ",1",   "1-",  "1 ",
	                                  "a",     "65536", "1-65536", "0-3;4"};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!iso_codec_cpus_valid(good[i]))
			fail_msg("\"%s\" refused", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (iso_codec_cpus_valid(bad[i]))
			fail_msg("\"%s\" accepted", bad[i]);
}

#define SB(body) ST(", \"sandboxes\": [" body "]")
#define SB_OK    "\"allocation\": \"" A1 "\", \"member\": 0"
#define OV(body) ST(", \"overlay\": " body)
#define OV_T(tenants)                                                                              \
	OV("{\"guard\": true, \"drops\": 0, \"allowed\": [], \"tenants\": [" tenants "]}")
#define OV_A(allowed)                                                                              \
	OV("{\"guard\": true, \"drops\": 0, \"tenants\": [], \"allowed\": [" allowed "]}")
#define TEN(vni, members)                                                                          \
	"{\"vni\": " #vni                                                                          \
	", \"bridge\": \"isobr1\", \"vxlan\": \"isovx1\", \"members\": [" members "]}"
#define OM(rest) "{\"allocation\": \"" A1 "\", \"member\": 0" rest "}"

static void test_status_sandbox_overlay_refusals(void **state)
{
	(void)state;
	struct iso_agent_status st;
	struct {
		const char *text, *field;
	} cases[] = {
	    {ST(", \"sandbox_mode\": \"on\""), "sandbox_mode"},
	    {ST(", \"sandbox_mode\": true"), "sandbox_mode"},
	    {ST(", \"sandboxes\": {}"), "sandboxes"},
	    {ST(", \"sandboxes\": [1]"), "sandboxes[0]"},
	    {SB("{" SB_OK ", \"ready\": false, \"x\": 1}"), "sandboxes[0].x"},
	    {SB("{\"member\": 0, \"ready\": false}"), "sandboxes[0].allocation"},
	    {SB("{\"allocation\": \"a-1\", \"member\": 0, \"ready\": false}"),
	     "sandboxes[0].allocation"},
	    {SB("{\"allocation\": \"" A1 "\", \"member\": 1024, \"ready\": false}"),
	     "sandboxes[0].member"},
	    {SB("{\"allocation\": \"" A1 "\", \"ready\": false}"), "sandboxes[0].member"},
	    {SB("{" SB_OK "}"), "sandboxes[0].ready"},
	    {SB("{" SB_OK ", \"ready\": \"yes\"}"), "sandboxes[0].ready"},
	    {SB("{" SB_OK ", \"ready\": false, \"cgroup\": \"../etc\"}"), "sandboxes[0].cgroup"},
	    {SB("{" SB_OK ", \"ready\": false, \"cgroup\": 3}"), "sandboxes[0].cgroup"},
	    {SB("{" SB_OK ", \"ready\": false, \"cpus\": \"3-2\"}"), "sandboxes[0].cpus"},
	    {SB("{" SB_OK ", \"ready\": false, \"reason\": \"a\\u0007\"}"), "sandboxes[0].reason"},
	    {SB("{" SB_OK ", \"ready\": true, \"cpus\": \"2-3\"}"), "sandboxes[0].cgroup"},
	    {SB("{" SB_OK ", \"ready\": true, \"cgroup\": \"iso-x\"}"), "sandboxes[0].cpus"},
	    {SB("{" SB_OK ", \"ready\": false}, {" SB_OK ", \"ready\": false}"),
	     "sandboxes[1].member"},
	    {OV("3"), "overlay"},
	    {OV("{\"guard\": true, \"drops\": 0, \"allowed\": [], \"tenants\": [], \"x\": 1}"),
	     "overlay.x"},
	    {OV("{\"drops\": 0, \"allowed\": [], \"tenants\": []}"), "overlay.guard"},
	    {OV("{\"guard\": 1, \"drops\": 0, \"allowed\": [], \"tenants\": []}"), "overlay.guard"},
	    {OV("{\"guard\": true, \"drops\": -1, \"allowed\": [], \"tenants\": []}"),
	     "overlay.drops"},
	    {OV("{\"guard\": true, \"allowed\": [], \"tenants\": []}"), "overlay.drops"},
	    {OV("{\"guard\": true, \"drops\": 0, \"tenants\": []}"), "overlay.allowed"},
	    {OV("{\"guard\": true, \"drops\": 0, \"allowed\": []}"), "overlay.tenants"},
	    {OV("{\"guard\": true, \"drops\": 0, \"allowed\": [], \"tenants\": {}}"),
	     "overlay.tenants"},
	    {OV_A("7"), "overlay.allowed[0]"},
	    {OV_A("{\"peer\": \"192.0.2.12\", \"vni\": 1, \"x\": 1}"), "overlay.allowed[0].x"},
	    {OV_A("{\"peer\": \"192.0.2.256\", \"vni\": 1}"), "overlay.allowed[0].peer"},
	    {OV_A("{\"peer\": \"\", \"vni\": 1}"), "overlay.allowed[0].peer"},
	    {OV_A("{\"vni\": 1}"), "overlay.allowed[0].peer"},
	    {OV_A("{\"peer\": \"192.0.2.12\", \"vni\": 0}"), "overlay.allowed[0].vni"},
	    {OV_A("{\"peer\": \"192.0.2.12\", \"vni\": 16777216}"), "overlay.allowed[0].vni"},
	    {OV_A("{\"peer\": \"192.0.2.12\"}"), "overlay.allowed[0].vni"},
	    {OV_A("{\"peer\": \"192.0.2.12\", \"vni\": 5}, {\"peer\": \"192.0.2.13\", \"vni\": 5}, "
	          "{\"peer\": \"192.0.2.12\", \"vni\": 5}"),
	     "overlay.allowed[2]"},
	    {OV_T("7"), "overlay.tenants[0]"},
	    {OV_T(TEN(0, "")), "overlay.tenants[0].vni"},
	    {OV_T("{\"bridge\": \"b\", \"members\": []}"), "overlay.tenants[0].vni"},
	    {OV_T("{\"vni\": 1, \"members\": []}"), "overlay.tenants[0].bridge"},
	    {OV_T("{\"vni\": 1, \"bridge\": \"a/b\", \"members\": []}"),
	     "overlay.tenants[0].bridge"},
	    {OV_T("{\"vni\": 1, \"bridge\": \"b\", \"vxlan\": \"0123456789abcdef\", \"members\": "
	          "[]}"),
	     "overlay.tenants[0].vxlan"},
	    {OV_T("{\"vni\": 1, \"bridge\": \"b\"}"), "overlay.tenants[0].members"},
	    {OV_T("{\"vni\": 1, \"bridge\": \"b\", \"members\": [], \"x\": 1}"),
	     "overlay.tenants[0].x"},
	    {OV_T(TEN(1, "") "," TEN(1, "")), "overlay.tenants[1].vni"},
	    {OV_T(TEN(1, "3")), "overlay.tenants[0].members[0]"},
	    {OV_T(TEN(1, OM(", \"x\": 1"))), "overlay.tenants[0].members[0].x"},
	    {OV_T(TEN(1, "{\"allocation\": \"a-x\", \"member\": 0}")),
	     "overlay.tenants[0].members[0].allocation"},
	    {OV_T(TEN(1, "{\"allocation\": \"" A1 "\", \"member\": 1024}")),
	     "overlay.tenants[0].members[0].member"},
	    {OV_T(TEN(1, OM(", \"ifname\": \"eth:0\""))), "overlay.tenants[0].members[0].ifname"},
	    {OV_T(TEN(1, OM(", \"address\": \"10.0.3\""))),
	     "overlay.tenants[0].members[0].address"},
	    {OV_T(TEN(1, OM("") "," OM(", \"address\": \"10.0.3.2/8\""))),
	     "overlay.tenants[0].members[1].address"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		REFUSED(iso_codec_status_decode, &st, cases[i].text, cases[i].field);
		iso_codec_status_clear(&st);
	}
}

/* ---- issue 17: a member's "cxi" and the reported CXI services ---- */

static void test_cxi_round_trip(void **state)
{
	(void)state;
	static struct iso_agent_member_want members[] = {
	    {.allocation = A1, .tenant = "acme", .has_cxi = true, .cxi_vni = 1024},
	    {.allocation = A1,
	     .member = 1,
	     .tenant = "acme",
	     .has_cxi = true,
	     .cxi_vni = 65535,
	     .cxi_ident = true,
	     .cxi_uid = 5001,
	     .cxi_gid = 4294967294u},
	    {.allocation = A1, .member = 2, .tenant = "acme"}};
	struct iso_agent_desired in = {
	    .node = "n1", .generation = 2, .term = 1, .n_members = 3, .members = members};
	struct iso_agent_desired out;
	static struct iso_cxi_service svcs[] = {
	    {.svc_id = 1, .restricted_vnis = true, .n_vnis = 2, .vnis = {1, 10}},
	    {.svc_id = 7,
	     .enabled = true,
	     .restricted_members = true,
	     .restricted_vnis = true,
	     .n_vnis = 1,
	     .vnis = {1024},
	     .n_members = 2,
	     .members = {{ISO_CXI_MEMBER_UID, 5001}, {ISO_CXI_MEMBER_GID, 0}}}};
	struct iso_agent_status st = {.version = "0.1.0",
	                              .has_cxi = true,
	                              .cxi = {.device = "cxi0", .n_services = 2, .services = svcs}};
	struct iso_agent_status sout;
	struct iso_error err = {0};
	json_t *j = iso_codec_desired_encode(&in);

	assert_non_null(j);
	/* "cxi" only where the member has one, uid/gid only with an identity */
	json_t *ms = json_object_get(j, "members");
	assert_null(json_object_get(json_object_get(json_array_get(ms, 0), "cxi"), "uid"));
	assert_null(json_object_get(json_array_get(ms, 2), "cxi"));
	assert_int_equal(iso_codec_desired_decode(j, "n1", &out, &err), 0);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(out.members[i].has_cxi, members[i].has_cxi);
		assert_int_equal(out.members[i].cxi_vni, members[i].cxi_vni);
		assert_int_equal(out.members[i].cxi_ident, members[i].cxi_ident);
		assert_int_equal(out.members[i].cxi_uid, members[i].cxi_uid);
		assert_int_equal(out.members[i].cxi_gid, members[i].cxi_gid);
	}
	iso_codec_desired_clear(&out);
	json_decref(j);

	j = iso_codec_status_encode(&st, false);
	assert_non_null(j);
	assert_int_equal(iso_codec_status_decode(j, &sout, &err), 0);
	assert_true(sout.has_cxi);
	assert_string_equal(sout.cxi.device, "cxi0");
	assert_int_equal(sout.cxi.n_services, 2);
	assert_memory_equal(sout.cxi.services, svcs, sizeof(svcs));
	iso_codec_status_clear(&sout);
	json_decref(j);
	/* a node without CXI reports none */
	st.has_cxi = false;
	j = iso_codec_status_encode(&st, false);
	assert_null(json_object_get(j, "cxi"));
	assert_int_equal(iso_codec_status_decode(j, &sout, &err), 0);
	assert_false(sout.has_cxi);
	iso_codec_status_clear(&sout);
	json_decref(j);
}

#define CX(body) M_OK(", \"overlay\": null, \"cxi\": " body)
#define CS(body) ST(", \"cxi\": {\"device\": \"cxi0\", \"services\": [" body "]}")
#define SVC(rest)                                                                                  \
	"{\"svc_id\": 2, \"enabled\": true, \"system\": false, \"restricted_members\": true, "     \
	"\"restricted_vnis\": true" rest "}"
#define SVC_OK SVC(", \"vnis\": [1024], \"members\": [{\"type\": \"uid\", \"id\": 5001}]")

static void test_cxi_refusals(void **state)
{
	(void)state;
	struct iso_agent_desired d;
	struct iso_agent_status st;
	struct {
		const char *text, *field;
	} desired[] =
	    {
	        {MDOC(CX("7")), "members[0].cxi"},
	        {MDOC(CX("{}")), "members[0].cxi.vni"},
	        {MDOC(CX("{\"vni\": 0}")), "members[0].cxi.vni"},
	        {MDOC(CX("{\"vni\": 65536}")), "members[0].cxi.vni"},
	        {MDOC(CX("{\"vni\": \"1024\"}")), "members[0].cxi.vni"},
	        {MDOC(CX("{\"vni\": 1024, \"x\": 1}")), "members[0].cxi.x"},
	        {MDOC(CX("{\"vni\": 1024, \"uid\": 5001}")), "members[0].cxi.gid"},
	        {MDOC(CX("{\"vni\": 1024, \"gid\": 5001}")), "members[0].cxi.uid"},
	        {MDOC(CX("{\"vni\": 1024, \"uid\": 0, \"gid\": 5001}")), "members[0].cxi.uid"},
	        {MDOC(CX("{\"vni\": 1024, \"uid\": 5001, \"gid\": 0}")), "members[0].cxi.gid"},
	        {MDOC(CX("{\"vni\": 1024, \"uid\": 4294967295, \"gid\": 5001}")),
	         "members[0].cxi.uid"},
	        {MDOC(CX("{\"vni\": 1024, \"uid\": -5, \"gid\": 5001}")), "members[0].cxi.uid"},
	    },
	  status[] = {
	      {ST(", \"cxi\": 3"), "cxi"},
	      {ST(", \"cxi\": {\"services\": []}"), "cxi.device"},
	      {ST(", \"cxi\": {\"device\": \"cxi0\"}"), "cxi.services"},
	      {ST(", \"cxi\": {\"device\": \"cxi0\", \"services\": [], \"x\": 1}"), "cxi.x"},
	      {CS("5"), "cxi.services[0]"},
	      {CS(SVC(", \"vnis\": [], \"members\": [], \"x\": 1")), "cxi.services[0].x"},
	      {CS("{\"enabled\": true}"), "cxi.services[0].svc_id"},
	      {CS(SVC(", \"vnis\": [0], \"members\": []")), "cxi.services[0].vnis[0]"},
	      {CS(SVC(", \"vnis\": [65536], \"members\": []")), "cxi.services[0].vnis[0]"},
	      {CS(SVC(", \"vnis\": [1, 2, 3, 4, 5], \"members\": []")), "cxi.services[0].vnis"},
	      {CS(SVC(", \"vnis\": [1]")), "cxi.services[0].members"},
	      {CS(SVC(", \"vnis\": [1], \"members\": [{\"type\": \"pid\", \"id\": 1}]")),
	       "cxi.services[0].members[0].type"},
	      {CS(SVC(", \"vnis\": [1], \"members\": [{\"type\": \"uid\", \"id\": -1}]")),
	       "cxi.services[0].members[0].id"},
	      {CS(SVC(", \"vnis\": [1], \"members\": [{\"type\": \"uid\", \"id\": 1}, "
	              "{\"type\": \"uid\", \"id\": 2}, {\"type\": \"uid\", \"id\": 3}]")),
	       "cxi.services[0].members"},
	      {CS(SVC_OK "," SVC_OK), "cxi.services[1].svc_id"},
	  };

	for (size_t i = 0; i < sizeof(desired) / sizeof(desired[0]); i++) {
		memset(&d, 0x5a, sizeof(d));
		REFUSED(decode_n1, &d, desired[i].text, desired[i].field);
		assert_null(d.members);
	}
	for (size_t i = 0; i < sizeof(status) / sizeof(status[0]); i++) {
		REFUSED(iso_codec_status_decode, &st, status[i].text, status[i].field);
		iso_codec_status_clear(&st);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fault_round_trip),
	    cmocka_unit_test(test_fault_refusals),
	    cmocka_unit_test(test_status_round_trip),
	    cmocka_unit_test(test_status_refusals),
	    cmocka_unit_test(test_reason_cut),
	    cmocka_unit_test(test_desired_round_trip),
	    cmocka_unit_test(test_desired_refusals),
	    cmocka_unit_test(test_members_round_trip),
	    cmocka_unit_test(test_members_refusals),
	    cmocka_unit_test(test_status_sandboxes_round_trip),
	    cmocka_unit_test(test_cpus_valid),
	    cmocka_unit_test(test_status_sandbox_overlay_refusals),
	    cmocka_unit_test(test_cxi_round_trip),
	    cmocka_unit_test(test_cxi_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

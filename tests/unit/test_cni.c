/* test_cni.c: the CNI plugin's logic without a runtime (src/cni/logic.c,
 * issue 17, docs/cni.md): every bad network config field, environment
 * variable and CNI_ARGS pair refused with the CNI code and a message
 * naming it (table-driven), the namespace -> tenant map (no default), the
 * version list, the error object and ADD's Result. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cni/logic.h"

#define GOOD                                                                                       \
	"\"cniVersion\":\"1.1.0\",\"name\":\"isonet\",\"type\":\"isostack-cni\","                  \
	"\"agentStateDir\":\"/var/lib/isostack-agent\",\"tenants\":{\"team-a\":\"acme\"}"

static int parse(const char *text, struct cni_config *cfg, int *code, struct iso_error *e)
{
	json_t *doc = NULL;
	int r;

	memset(e, 0, sizeof(*e));
	r = cni_config_parse(text, strlen(text), cfg, &doc, code, e);
	json_decref(doc);
	return r;
}

static void test_config_good(void **state)
{
	struct cni_config cfg;
	struct iso_error e;
	int code = 0;
	const char *t = NULL;

	(void)state;
	assert_int_equal(parse("{" GOOD ",\"ipam\":{\"type\":\"host-local\"},\"memoryMiB\":32,"
	                       "\"node\":\"n1\",\"mode\":\"ethernet\"}",
	                       &cfg, &code, &e),
	                 0);
	assert_string_equal(cfg.agent_socket, "/var/lib/isostack-agent/agent.sock");
	assert_true(cfg.has_ipam);
	assert_string_equal(cfg.ipam_type, "host-local");
	assert_int_equal(cfg.memory_mib, 32);
	assert_int_equal(cni_tenant_of(&cfg, "team-a", &t), 0);
	assert_string_equal(t, "acme");
	/* no default tenant: an unmapped namespace is not found */
	assert_int_equal(cni_tenant_of(&cfg, "default", &t), -ENOENT);
	assert_int_equal(parse("{\"cniVersion\":\"0.4.0\",\"name\":\"n\",\"type\":\"x\","
	                       "\"agentSocket\":\"/run/a.sock\",\"tenants\":{\"a\":\"b\"}}",
	                       &cfg, &code, &e),
	                 0);
	assert_string_equal(cfg.agent_socket, "/run/a.sock");
	assert_int_equal(cfg.memory_mib, 64); /* the default */
	/* both fabric modes are built: Slingshot without ipam, InfiniBand with it */
	assert_int_equal(parse("{" GOOD ",\"mode\":\"slingshot\"}", &cfg, &code, &e), 0);
	assert_string_equal(cfg.mode, "slingshot");
	assert_int_equal(parse("{" GOOD
	                       ",\"mode\":\"infiniband\",\"ipam\":{\"type\":\"host-local\"}}",
	                       &cfg, &code, &e),
	                 0);
	assert_string_equal(cfg.mode, "infiniband");
	assert_true(cfg.has_ipam);
}

static void test_config_bad(void **state)
{
	static const struct {
		const char *text;
		int code;
		const char *field, *in_msg;
	} bad[] = {
	    {"not json", 6, "", "not JSON"},
	    {"[1]", 6, "", "not a JSON object"},
	    {"{" GOOD ",\"bogus\":1}", 2, "bogus", "bogus"},
	    {"{\"name\":\"n\",\"type\":\"t\",\"agentSocket\":\"/s\",\"tenants\":{\"a\":\"b\"}}", 7,
	     "cniVersion", "cniVersion"},
	    {"{\"cniVersion\":\"9.9.9\",\"name\":\"n\",\"type\":\"t\",\"agentSocket\":\"/s\","
	     "\"tenants\":{\"a\":\"b\"}}",
	     1, "cniVersion", "9.9.9"},
	    {"{\"cniVersion\":\"1.1.0\",\"type\":\"t\",\"agentSocket\":\"/s\",\"tenants\":{\"a\":"
	     "\"b\"}}",
	     7, "name", "name"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"\",\"type\":\"t\",\"agentSocket\":\"/s\","
	     "\"tenants\":{\"a\":\"b\"}}",
	     7, "name", "name"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"agentSocket\":\"/s\",\"tenants\":{\"a\":"
	     "\"b\"}}",
	     7, "type", "type"},
	    {"{" GOOD ",\"mode\":\"omnipath\"}", 7, "mode", "ethernet, slingshot, infiniband"},
	    {"{" GOOD ",\"mode\":\"slingshot\",\"ipam\":{\"type\":\"host-local\"}}", 7, "ipam",
	     "slingshot"},
	    {"{" GOOD ",\"mode\":\"infiniband\",\"allocation\":\"a-0123456789abcdef\"}", 7,
	     "allocation", "not with mode infiniband"},
	    {"{" GOOD ",\"agentSocket\":\"/x.sock\"}", 7, "agentStateDir", "exactly one"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"tenants\":{\"a\":\"b\"}}",
	     7, "agentSocket", "exactly one"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"agentSocket\":\"rel.sock\","
	     "\"tenants\":{\"a\":\"b\"}}",
	     7, "agentSocket", "absolute"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"agentStateDir\":\"/"
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	     "aa"
	     "aaaaaaaaaaaaaaaaaaaaaaaaa\",\"tenants\":{\"a\":\"b\"}}",
	     7, "agentStateDir", "too long"},
	    {"{" GOOD ",\"node\":\"N 1\"}", 7, "node", "node"},
	    {"{" GOOD ",\"node\":7}", 7, "node", "node"},
	    {"{" GOOD ",\"allocation\":\"a-12\"}", 7, "allocation", "allocation"},
	    {"{" GOOD ",\"cpus\":-1}", 7, "cpus", "cpus"},
	    {"{" GOOD ",\"cpus\":5000}", 7, "cpus", "cpus"},
	    {"{" GOOD ",\"memoryMiB\":\"64\"}", 7, "memoryMiB", "memoryMiB"},
	    {"{" GOOD ",\"memoryMiB\":0}", 7, "memoryMiB", "ask for something"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"agentSocket\":\"/s\"}", 7,
	     "tenants", "tenants"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"agentSocket\":\"/s\","
	     "\"tenants\":{}}",
	     7, "tenants", "at least one"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"agentSocket\":\"/s\","
	     "\"tenants\":{\"Team_A\":\"acme\"}}",
	     7, "tenants.Team_A", "namespace"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"agentSocket\":\"/s\","
	     "\"tenants\":{\"team-a\":\"Not A Tenant\"}}",
	     7, "tenants.team-a", "tenant name"},
	    {"{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"agentSocket\":\"/s\","
	     "\"tenants\":{\"team-a\":3}}",
	     7, "tenants.team-a", "tenant name"},
	    {"{" GOOD ",\"ipam\":[]}", 7, "ipam", "ipam"},
	    {"{" GOOD ",\"ipam\":{\"type\":\"../bin/sh\"}}", 7, "ipam.type", "ipam.type"},
	    {"{" GOOD ",\"ipam\":{\"subnet\":\"10.0.0.0/8\"}}", 7, "ipam.type", "ipam.type"},
	    {"{" GOOD ",\"prevResult\":[]}", 6, "prevResult", "prevResult"},
	    {"{" GOOD ",\"cni.dev/valid-attachments\":{}}", 7, "cni.dev/valid-attachments",
	     "array"},
	    {"{" GOOD ",\"cni.dev/valid-attachments\":[{\"containerID\":\"x\"}]}", 7,
	     "cni.dev/valid-attachments", "[0]"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cni_config cfg;
		struct iso_error e;
		int code = 0;
		int r = parse(bad[i].text, &cfg, &code, &e);
		if (r == 0 || code != bad[i].code || strcmp(e.field, bad[i].field) != 0 ||
		    !strstr(e.message, bad[i].in_msg))
			fail_msg("case %zu (%s): r=%d code=%d field=%s msg=%s", i, bad[i].text, r,
			         code, e.field, e.message);
	}
}

static void test_args(void **state)
{
	static const struct {
		const char *args, *field, *in_msg;
	} bad[] = {
	    {"K8S_POD_NAMESPACE", "CNI_ARGS", "KEY=VALUE"},
	    {"=x", "CNI_ARGS", "KEY=VALUE"},
	    {"K8S_POD_NAMESPACE=a;;K8S_POD_NAME=b", "CNI_ARGS", "empty"},
	    {"K8S_POD_NAMESPACE=Bad_NS", "CNI_ARGS.K8S_POD_NAMESPACE", "Bad_NS"},
	    {"K8S_POD_NAMESPACE=", "CNI_ARGS.K8S_POD_NAMESPACE", "namespace"},
	    {"K8S_POD_NAME=", "CNI_ARGS.K8S_POD_NAME", "K8S_POD_NAME"},
	    {"ISOSTACK_ALLOCATION=zz", "CNI_ARGS.ISOSTACK_ALLOCATION", "allocation id"},
	    {"FOO=bar", "CNI_ARGS", "unknown key FOO"},
	    {"ISOSTACK_UID=0", "CNI_ARGS.ISOSTACK_UID", "root"},
	    {"ISOSTACK_GID=0", "CNI_ARGS.ISOSTACK_GID", "root"},
	    {"ISOSTACK_UID=", "CNI_ARGS.ISOSTACK_UID", "decimal"},
	    {"ISOSTACK_UID=-1", "CNI_ARGS.ISOSTACK_UID", "decimal"},
	    {"ISOSTACK_UID=+5", "CNI_ARGS.ISOSTACK_UID", "decimal"},
	    {"ISOSTACK_UID=5 ", "CNI_ARGS.ISOSTACK_UID", "decimal"},
	    {"ISOSTACK_UID=007", "CNI_ARGS.ISOSTACK_UID", "decimal"},
	    {"ISOSTACK_UID=4294967295", "CNI_ARGS.ISOSTACK_UID", "4294967294"},
	    {"ISOSTACK_GID=99999999999999999999", "CNI_ARGS.ISOSTACK_GID", "4294967294"},
	    {"ISOSTACK_GID=1e3", "CNI_ARGS.ISOSTACK_GID", "decimal"},
	    {"IgnoreUnknown=maybe", "CNI_ARGS.IgnoreUnknown", "IgnoreUnknown"},
	};
	struct cni_args a;
	struct iso_error e = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&e, 0, sizeof(e));
		if (cni_args_parse(bad[i].args, &a, &e) == 0 ||
		    strcmp(e.field, bad[i].field) != 0 || !strstr(e.message, bad[i].in_msg))
			fail_msg("case %zu (%s): field=%s msg=%s", i, bad[i].args, e.field,
			         e.message);
	}
	assert_int_equal(cni_args_parse("FOO=bar;IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;"
	                                "K8S_POD_NAME=web-0;K8S_POD_UID=u;"
	                                "ISOSTACK_ALLOCATION=a-0123456789abcdef",
	                                &a, &e),
	                 0);
	assert_string_equal(a.pod_namespace, "team-a");
	assert_string_equal(a.pod_name, "web-0");
	assert_string_equal(a.allocation, "a-0123456789abcdef");
	assert_int_equal(a.uid, 0);
	assert_int_equal(cni_args_parse("ISOSTACK_UID=5001;ISOSTACK_GID=4294967294", &a, &e), 0);
	assert_int_equal(a.uid, 5001);
	assert_int_equal(a.gid, 4294967294u);
	assert_int_equal(cni_args_parse(NULL, &a, &e), 0);
	assert_string_equal(a.pod_namespace, "");
}

static const char *const *env_now;

static const char *get(const char *name)
{
	size_t n = strlen(name);

	for (const char *const *p = env_now; *p; p++)
		if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
			return *p + n + 1;
	return NULL;
}

static void test_env(void **state)
{
	static const struct {
		const char *env[6], *field, *in_msg;
	} bad[] = {
	    {{NULL}, "CNI_COMMAND", "not set"},
	    {{"CNI_COMMAND=ATTACH"}, "CNI_COMMAND", "ATTACH"},
	    {{"CNI_COMMAND=ADD", "CNI_IFNAME=eth0", "CNI_NETNS=/n"}, "CNI_CONTAINERID", "not set"},
	    {{"CNI_COMMAND=ADD", "CNI_CONTAINERID=-x", "CNI_IFNAME=eth0", "CNI_NETNS=/n"},
	     "CNI_CONTAINERID",
	     "letters"},
	    {{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/n"}, "CNI_IFNAME", "not set"},
	    {{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_IFNAME=a/b", "CNI_NETNS=/n"},
	     "CNI_IFNAME",
	     "interface"},
	    {{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_IFNAME=abcdefghijklmnop",
	      "CNI_NETNS=/n"},
	     "CNI_IFNAME",
	     "interface"},
	    {{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth0"}, "CNI_NETNS", "not set"},
	    {{"CNI_COMMAND=CHECK", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth0", "CNI_NETNS=rel"},
	     "CNI_NETNS",
	     "absolute"},
	    {{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth0", "CNI_NETNS=/n",
	      "CNI_ARGS=X=1"},
	     "CNI_ARGS",
	     "unknown key X"},
	};
	struct cni_env env;
	struct iso_error e;
	int code = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&e, 0, sizeof(e));
		env_now = bad[i].env;
		if (cni_env_parse(get, &env, &code, &e) == 0 || code != CNI_E_ENV ||
		    strcmp(e.field, bad[i].field) != 0 || !strstr(e.message, bad[i].in_msg))
			fail_msg("case %zu: code=%d field=%s msg=%s", i, code, e.field, e.message);
	}
	/* DEL without a netns (it is gone) and VERSION without anything */
	static const char *const del[] = {"CNI_COMMAND=DEL", "CNI_CONTAINERID=c1",
	                                  "CNI_IFNAME=eth0", NULL};
	env_now = del;
	assert_int_equal(cni_env_parse(get, &env, &code, &e), 0);
	assert_int_equal(env.command, CNI_DEL);
	static const char *const ver[] = {"CNI_COMMAND=VERSION", NULL};
	env_now = ver;
	assert_int_equal(cni_env_parse(get, &env, &code, &e), 0);
	assert_int_equal(env.command, CNI_VERSION);
}

static void test_answers(void **state)
{
	(void)state;
	json_t *v = cni_version_result();
	assert_string_equal(json_string_value(json_object_get(v, "cniVersion")), "1.1.0");
	assert_int_equal(json_array_size(json_object_get(v, "supportedVersions")), 5);
	json_decref(v);
	json_t *err = cni_error_json("0.4.0", 11, "try", "d");
	assert_string_equal(json_string_value(json_object_get(err, "cniVersion")), "0.4.0");
	assert_int_equal(json_integer_value(json_object_get(err, "code")), 11);
	json_decref(err);
	err = cni_error_json("bogus", 7, "x", NULL);
	assert_string_equal(json_string_value(json_object_get(err, "cniVersion")), "1.1.0");
	json_decref(err);
	assert_int_equal(cni_code_of(ISO_E_UNAVAILABLE), 11);
	assert_int_equal(cni_code_of(ISO_E_NO_CAPACITY), 11);
	assert_int_equal(cni_code_of(ISO_E_FORBIDDEN), 100);

	json_t *agent = json_pack("{s:s, s:s, s:i}", "mac", "02:00:00:00:00:01", "address",
	                          "10.77.1.10", "prefixlen", 16);
	json_t *ipam =
	    json_pack("{s:[{s:s, s:s}], s:[{s:s}], s:{}}", "ips", "address", "10.77.1.10/16",
	              "gateway", "10.77.0.1", "routes", "dst", "0.0.0.0/0", "dns");
	json_t *res = cni_add_result("1.1.0", "eth0", "/run/netns/p", agent, ipam);
	json_t *ip = json_array_get(json_object_get(res, "ips"), 0);
	assert_string_equal(json_string_value(json_object_get(ip, "address")), "10.77.1.10/16");
	assert_string_equal(json_string_value(json_object_get(ip, "gateway")), "10.77.0.1");
	assert_null(json_object_get(ip, "version"));
	assert_int_equal(json_array_size(json_object_get(res, "routes")), 1);
	json_t *itf = json_array_get(json_object_get(res, "interfaces"), 0);
	assert_string_equal(json_string_value(json_object_get(itf, "sandbox")), "/run/netns/p");
	char a[24];
	assert_int_equal(cni_result_ipv4(res, a), 0);
	assert_string_equal(a, "10.77.1.10/16");
	json_decref(res);
	res = cni_add_result("0.3.1", "eth0", "/run/netns/p", agent, NULL);
	ip = json_array_get(json_object_get(res, "ips"), 0);
	assert_string_equal(json_string_value(json_object_get(ip, "version")), "4");
	json_decref(res);
	json_decref(agent);
	json_decref(ipam);
}

/* What a verb needs of the config (cni_verb_check): STATUS and GC at
 * 1.1.0, CHECK at 0.4.0 or later and always with the ADD's prevResult. */
static void test_verb_needs(void **state)
{
	static const struct {
		enum cni_command cmd;
		const char *version, *extra;
		int code; /* 0: accepted */
		const char *field;
	} cases[] = {
	    {CNI_CHECK, "1.1.0", ",\"prevResult\":{\"ips\":[]}", 0, NULL},
	    {CNI_CHECK, "0.4.0", ",\"prevResult\":{}", 0, NULL},
	    {CNI_CHECK, "1.1.0", "", CNI_E_CONFIG, "prevResult"},
	    {CNI_CHECK, "0.4.0", "", CNI_E_CONFIG, "prevResult"},
	    {CNI_CHECK, "0.3.1", ",\"prevResult\":{}", CNI_E_VERSION, "cniVersion"},
	    {CNI_CHECK, "0.3.0", ",\"prevResult\":{}", CNI_E_VERSION, "cniVersion"},
	    {CNI_STATUS, "1.0.0", "", CNI_E_VERSION, "cniVersion"},
	    {CNI_GC, "0.4.0", "", CNI_E_VERSION, "cniVersion"},
	    {CNI_GC, "1.1.0", "", 0, NULL},
	    {CNI_ADD, "0.3.1", "", 0, NULL},
	    {CNI_DEL, "1.1.0", "", 0, NULL}, /* DEL: prevResult may be omitted */
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[512];
		struct cni_config cfg;
		struct iso_error e;
		json_t *doc = NULL;
		int code = 0;
		snprintf(text, sizeof(text),
		         "{\"cniVersion\":\"%s\",\"name\":\"n\",\"type\":\"x\","
		         "\"agentSocket\":\"/run/a.sock\",\"tenants\":{\"a\":\"b\"}%s}",
		         cases[i].version, cases[i].extra);
		memset(&e, 0, sizeof(e));
		assert_int_equal(cni_config_parse(text, strlen(text), &cfg, &doc, &code, &e), 0);
		int r = cni_verb_check(cases[i].cmd, &cfg, &code, &e);
		if (!cases[i].code) {
			assert_int_equal(r, 0);
		} else {
			assert_int_equal(r, -EINVAL);
			assert_int_equal(code, cases[i].code);
			assert_string_equal(e.field, cases[i].field);
			assert_non_null(strstr(e.message, cases[i].field));
		}
		json_decref(doc);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_good), cmocka_unit_test(test_config_bad),
	    cmocka_unit_test(test_args),        cmocka_unit_test(test_env),
	    cmocka_unit_test(test_answers),     cmocka_unit_test(test_verb_needs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

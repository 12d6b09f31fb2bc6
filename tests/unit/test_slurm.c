/* test_slurm.c: the SPANK plugin's logic without Slurm (src/slurm/logic.c,
 * issue 15, docs/slurm.md) and the account -> tenant map it shares with
 * isoctl (src/client/tenant_map.c): plugstack.conf arguments (unknown,
 * twice, bad values named), the --isostack-* values (each refusal names the
 * option), %n in the agent's state dir, the tenant from the account and the
 * map (bad lines named FILE:LINE), the task's environment and whether it
 * may run without a sandbox. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/slurm/logic.h"
#include "isostack/client.h"

static int parse(struct iso_slurm_args *a, struct iso_error *e, ...)
{
	char *av[16];
	int ac = 0;
	va_list ap;

	va_start(ap, e);
	for (char *s; (s = va_arg(ap, char *)) && ac < 16;)
		av[ac++] = s;
	va_end(ap);
	memset(e, 0, sizeof(*e));
	return iso_slurm_args_parse(ac, av, a, e);
}

static void test_args(void **state)
{
	static const struct {
		const char *args[3], *field, *in_message;
	} bad[] = {
	    {{NULL}, "agent_state_dir", "required"},
	    {{"wait=5"}, "agent_state_dir", "required"},
	    {{"agent_state_dir=relative/%n"}, "agent_state_dir", "absolute"},
	    {{"agent_state_dir=/a", "agent_state_dir=/b"}, "agent_state_dir", "twice"},
	    {{"agent_state_dir=/a", "wait=-1"}, "wait", "0..3600"},
	    {{"agent_state_dir=/a", "wait=3601"}, "wait", "0..3600"},
	    {{"agent_state_dir=/a", "wait=05"}, "wait", "0..3600"},
	    {{"agent_state_dir=/a", "wait="}, "wait", "0..3600"},
	    {{"agent_state_dir=/a", "wait=1", "wait=2"}, "wait", "twice"},
	    {{"agent_state_dir=/a", "tenant_map=map.txt"}, "tenant_map", "absolute"},
	    {{"agent_state_dir=/a", "allow_no_sandbox=yes"}, "allow_no_sandbox", "0 or 1"},
	    {{"agent_state_dir=/a", "timeout=5"}, "args", "unknown plugin argument \"timeout\""},
	    {{"agent_state_dir=/a", "verbose"}, "args", "NAME=VALUE"},
	    {{"=x"}, "args", "NAME=VALUE"},
	};
	struct iso_slurm_args a;
	struct iso_error e;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		char *av[3];
		int ac = 0;
		while (ac < 3 && bad[i].args[ac]) {
			av[ac] = (char *)bad[i].args[ac];
			ac++;
		}
		memset(&e, 0, sizeof(e));
		assert_true(iso_slurm_args_parse(ac, av, &a, &e) < 0);
		if (strcmp(e.field, bad[i].field) != 0 || !strstr(e.message, bad[i].in_message))
			fail_msg("case %zu: field %s message %s", i, e.field, e.message);
	}
	assert_int_equal(parse(&a, &e, "agent_state_dir=/var/lib/isostack-agent/%n", NULL), 0);
	assert_string_equal(a.agent_state_dir, "/var/lib/isostack-agent/%n");
	assert_int_equal(a.wait_s, ISO_SLURM_WAIT_DEFAULT);
	assert_string_equal(a.tenant_map, "");
	assert_false(a.allow_no_sandbox);
	assert_int_equal(parse(&a, &e, "wait=0", "tenant_map=/etc/isostack/tenants",
	                       "allow_no_sandbox=1", "agent_state_dir=/x", NULL),
	                 0);
	assert_int_equal(a.wait_s, 0);
	assert_string_equal(a.tenant_map, "/etc/isostack/tenants");
	assert_true(a.allow_no_sandbox);
}

static void test_options(void **state)
{
	static const struct {
		struct iso_slurm_opts o;
		const char *field;
	} bad[] = {
	    {{"3g.41gb", NULL, NULL}, "--isostack-profile"},
	    {{"", NULL, NULL}, "--isostack-profile"},
	    {{"3G.40GB ", NULL, NULL}, "--isostack-profile"},
	    {{NULL, "0", NULL}, "--isostack-gpus"},
	    {{NULL, "65", NULL}, "--isostack-gpus"},
	    {{NULL, "two", NULL}, "--isostack-gpus"},
	    {{NULL, "-1", NULL}, "--isostack-gpus"},
	    {{NULL, "", NULL}, "--isostack-gpus"},
	    {{"3g.40gb", "1", NULL}, "--isostack-gpus"},
	    {{NULL, NULL, "exclusive"}, "--isostack-isolation"},
	    {{NULL, NULL, ""}, "--isostack-isolation"},
	};
	static const struct iso_slurm_opts good[] = {
	    {NULL, NULL, NULL},           {"3g.40gb", NULL, "shared"},
	    {"1g.10gb", NULL, NULL},      {NULL, "8", "exclusive-node"},
	    {NULL, "1", "exclusive-gpu"}, {NULL, NULL, "exclusive-rack"},
	};
	struct iso_error e;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		memset(&e, 0, sizeof(e));
		assert_true(iso_slurm_opts_check(&bad[i].o, &e) < 0);
		if (strcmp(e.field, bad[i].field) != 0 ||
		    strncmp(e.message, e.field, strlen(e.field)))
			fail_msg("case %zu: field %s message %s", i, e.field, e.message);
	}
	for (size_t i = 0; i < ISO_ARRAY_SIZE(good); i++)
		assert_int_equal(iso_slurm_opts_check(&good[i], &e), 0);
}

static void test_state_dir(void **state)
{
	char out[64];
	struct iso_error e = {0};

	assert_int_equal(iso_slurm_state_dir("/var/lib/a/%n", "n1", out, sizeof(out), &e), 0);
	assert_string_equal(out, "/var/lib/a/n1");
	assert_int_equal(iso_slurm_state_dir("/x/%n/%%/%n", "n2", out, sizeof(out), &e), 0);
	assert_string_equal(out, "/x/n2/%/n2");
	assert_int_equal(iso_slurm_state_dir("/plain", NULL, out, sizeof(out), &e), 0);
	assert_string_equal(out, "/plain");
	assert_true(iso_slurm_state_dir("/x/%n", "", out, sizeof(out), &e) < 0);
	assert_string_equal(e.field, "agent_state_dir");
	assert_true(iso_slurm_state_dir("/x/%n", "../etc", out, sizeof(out), &e) < 0);
	assert_true(iso_slurm_state_dir("/x/%h", "n1", out, sizeof(out), &e) < 0);
	assert_true(iso_slurm_state_dir("/x/%", "n1", out, sizeof(out), &e) < 0);
	assert_true(iso_slurm_state_dir("/a-very-long-directory-name-that-will-not-fit/%n", "n1",
	                                out, 16, &e) < 0);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_tenant_map(void **state)
{
	static const struct {
		const char *text, *in_message;
	} bad[] = {
	    {"acme\n", "map:1: expected `ACCOUNT TENANT`"},
	    {"# c\n\nacme acme extra\n", "map:3: expected `ACCOUNT TENANT`"},
	    {"acct/b acme\n", "map:1: \"acct/b\" is not a Slurm account"},
	    {"acctb Acme!\n", "map:1: \"Acme!\" is not a tenant name"},
	    {"acctb acme\nACCTB globex\n",
	     "map:2: account \"ACCTB\" listed again (first at line 1)"},
	    {"a\0b acme\n", "map:1: a NUL byte"},
	};
	struct iso_tenant_map m;
	struct iso_error e;
	char path[64], tenant[ISO_NAME_MAX];

	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		size_t len = strlen(bad[i].text);
		if (strstr(bad[i].in_message, "NUL"))
			len = 10;
		memset(&e, 0, sizeof(e));
		assert_true(iso_tenant_map_parse(bad[i].text, len, "map", &m, &e) < 0);
		assert_string_equal(e.field, "tenant_map");
		if (!strstr(e.message, bad[i].in_message))
			fail_msg("case %zu: %s", i, e.message);
		assert_int_equal(m.n, 0);
		assert_null(m.entries);
	}
	/* comments, blanks, CRLF, a comment after the pair; Slurm lower-cases
	 * the account, so the map matches it case-insensitively */
	{
		const char *text = "# account tenant\r\n\n  AcctB   globex  # B's people\r\n"
		                   "physics\tacme\n";
		assert_int_equal(iso_tenant_map_parse(text, strlen(text), "map", &m, &e), 0);
		assert_int_equal(m.n, 2);
		assert_string_equal(iso_tenant_map_lookup(&m, "acctb"), "globex");
		assert_string_equal(iso_tenant_map_lookup(&m, "physics"), "acme");
		assert_null(iso_tenant_map_lookup(&m, "chemistry"));
		assert_null(iso_tenant_map_lookup(NULL, "physics"));
		/* the plugin's tenant: mapped, else the account itself */
		assert_int_equal(iso_slurm_tenant("acctb", &m, tenant, sizeof(tenant), &e), 0);
		assert_string_equal(tenant, "globex");
		assert_int_equal(iso_slurm_tenant("chemistry", &m, tenant, sizeof(tenant), &e), 0);
		assert_string_equal(tenant, "chemistry");
		assert_true(iso_slurm_tenant("", &m, tenant, sizeof(tenant), &e) < 0);
		assert_string_equal(e.field, "account");
		assert_true(iso_slurm_tenant("a/b", &m, tenant, sizeof(tenant), &e) < 0);
		assert_non_null(strstr(e.message, "not a tenant name"));
		iso_tenant_map_clear(&m);
	}
	/* from a file: the error names it and the line */
	snprintf(path, sizeof(path), "/tmp/test_slurm.%d.map", (int)getpid());
	write_file(path, "a acme\nb\n");
	assert_true(iso_tenant_map_load(path, &m, &e) < 0);
	{
		char want[96];
		snprintf(want, sizeof(want), "%s:2: expected", path);
		assert_non_null(strstr(e.message, want));
	}
	write_file(path, "a acme\n");
	assert_int_equal(iso_tenant_map_load(path, &m, &e), 0);
	assert_string_equal(iso_tenant_map_lookup(&m, "A"), "acme");
	iso_tenant_map_clear(&m);
	unlink(path);
	assert_true(iso_tenant_map_load(path, &m, &e) < 0);
	assert_non_null(strstr(e.message, "No such file"));
}

/* The job key (src/client/slurm_key.c): what the prolog writes, the plugin
 * looks up and the reaper parses back; the reaper must never take another
 * cluster's key, or anything that is not a key, for one of its jobs. */
static void test_job_key(void **state)
{
	(void)state;
	char key[ISO_IDEM_KEY_MAX];
	struct iso_error err = {0};
	uint32_t job = 0, restart = 9;

	assert_int_equal(iso_slurm_job_key(key, sizeof(key), "isotest", 42, 0, &err), 0);
	assert_string_equal(key, "slurm:isotest:42:0");
	assert_true(iso_idem_key_valid(key));
	assert_true(iso_slurm_job_key_parse(key, "isotest", &job, &restart));
	assert_int_equal(job, 42);
	assert_int_equal(restart, 0);
	assert_int_equal(iso_slurm_job_key(key, sizeof(key), "c-1.b_2", 4294967295u, 7, &err), 0);
	assert_true(iso_slurm_job_key_parse(key, "c-1.b_2", &job, &restart));
	assert_int_equal(job, 4294967295u);
	assert_int_equal(restart, 7);
	/* a 63-character cluster fits the 128 of an Idempotency-Key */
	assert_int_equal(
	    iso_slurm_job_key(key, sizeof(key),
	                      "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
	                      4294967295u, 4294967295u, &err),
	    0);
	assert_true(iso_idem_key_valid(key));

	/* refused, naming the variable */
	const char *bad_clusters[] = {
	    NULL,  "",    "a b",
	    "c:d", "x/y", "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"};
	for (size_t i = 0; i < sizeof(bad_clusters) / sizeof(*bad_clusters); i++) {
		assert_int_equal(iso_slurm_job_key(key, sizeof(key), bad_clusters[i], 1, 0, &err),
		                 -EINVAL);
		assert_string_equal(err.field, "SLURM_CLUSTER_NAME");
	}
	assert_int_equal(iso_slurm_job_key(key, sizeof(key), "c", 0, 0, &err), -EINVAL);
	assert_string_equal(err.field, "SLURM_JOB_ID");

	/* not this cluster's job key */
	const char *not_ours[] = {
	    "slurm:other:42:0",    "slurm:isotest:42",    "slurm:isotest:42:0:1",
	    "slurm:isotest:042:0", "slurm:isotest:0:0",   "slurm:isotest::0",
	    "slurm:isotest:42:",   "slurm:isotest:42:01", "slurm:isotest:4294967296:0",
	    "slurm:isotest:42:-1", "slurm:isotestx:42:0", "slurm-42",
	    "cni:isotest:42:0",    "slurm:isotest:+4:0",  ""};
	for (size_t i = 0; i < sizeof(not_ours) / sizeof(*not_ours); i++)
		assert_false(iso_slurm_job_key_parse(not_ours[i], "isotest", &job, NULL));
}

static void test_env_and_sandbox(void **state)
{
	struct iso_agent_member_info mi = {.allocation = "a-0123456789abcdef",
	                                   .member = 1,
	                                   .ready = true,
	                                   .cuda_visible_devices = "MIG-aaa,MIG-bbb",
	                                   .has_pkey = true,
	                                   .pkey = 0x8001,
	                                   .pkey_index = 1,
	                                   .sandbox_real = true,
	                                   .has_sandbox = true};
	static struct iso_slurm_env env;
	struct iso_error e = {0};

	iso_slurm_env_build(&mi, &env);
	assert_int_equal(env.n, 5);
	assert_string_equal(env.v[0].name, "CUDA_VISIBLE_DEVICES");
	assert_string_equal(env.v[0].value, "MIG-aaa,MIG-bbb");
	assert_string_equal(env.v[1].name, "UCX_IB_PKEY");
	assert_string_equal(env.v[1].value, "0x8001");
	assert_string_equal(env.v[2].name, "OMPI_MCA_btl_openib_pkey");
	assert_string_equal(env.v[2].value, "0x8001");
	assert_string_equal(env.v[3].name, "NCCL_IB_PKEY");
	assert_string_equal(env.v[3].value, "1");
	assert_string_equal(env.v[4].name, "ISOSTACK_ALLOCATION");
	assert_string_equal(env.v[4].value, "a-0123456789abcdef");
	/* index unknown (ibsim): no NCCL_IB_PKEY; no VF: no P_Key at all */
	mi.pkey_index = -1;
	iso_slurm_env_build(&mi, &env);
	assert_int_equal(env.n, 4);
	mi.has_pkey = false;
	mi.cuda_visible_devices[0] = '\0';
	iso_slurm_env_build(&mi, &env);
	assert_int_equal(env.n, 2);
	assert_string_equal(env.v[0].value, ""); /* no GPU: none visible */

	assert_int_equal(iso_slurm_sandbox_decide(&mi, false, 1000, &e), 1);
	/* root's job: never in a sandbox (uid 0 owns the host's files) */
	assert_true(iso_slurm_sandbox_decide(&mi, false, 0, &e) < 0);
	assert_string_equal(e.field, "uid");
	assert_non_null(strstr(e.message, "runs as root (uid 0)"));
	assert_true(iso_slurm_sandbox_decide(&mi, true, 0, &e) < 0);
	mi.has_sandbox = false;
	assert_true(iso_slurm_sandbox_decide(&mi, true, 1000, &e) < 0);
	mi.sandbox_real = false;
	assert_true(iso_slurm_sandbox_decide(&mi, false, 1000, &e) < 0);
	assert_non_null(strstr(e.message, "allow_no_sandbox=1"));
	assert_int_equal(iso_slurm_sandbox_decide(&mi, true, 1000, &e), 0);
	/* no sandbox on the node (a test cluster): root's job runs */
	assert_int_equal(iso_slurm_sandbox_decide(&mi, true, 0, &e), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_args),
	    cmocka_unit_test(test_options),
	    cmocka_unit_test(test_state_dir),
	    cmocka_unit_test(test_tenant_map),
	    cmocka_unit_test(test_env_and_sandbox),
	    cmocka_unit_test(test_job_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

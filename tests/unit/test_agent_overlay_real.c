/* test_agent_overlay_real.c: the node agent's overlay pass
 * (src/agent/overlay.c, iso_agent_overlay_reconcile) on the real kernel,
 * namespaces as hosts (tests/unit/netns_hosts.h): from desired members it
 * builds what they need on each host and the member on h1 reaches the one on
 * h2; the status `overlay` it reports is what the kernel holds (guard,
 * pairs, devices, members with their addresses); a second member gets the
 * next address and the first keeps its own (read back from its eth0, as
 * after a restart); a member without a namespace or a node without an
 * underlay address is not ready and says why; a released member's veth, its
 * tenant and the guard go when nothing explains them, the tenant's bridge
 * alone after a hold when the agent asks for one. Root; skips without. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "isostack/agent.h"
#include "isostack/codec.h"
#include "isostack/sandbox.h"
#include "isostack/util.h"
#include "netns_hosts.h"

#define VNI 30001

static const char *const hosts[] = {"h1", "h2"};
static const char *const ips[] = {"192.0.2.21", "192.0.2.22"};
static char peer_of[2][1][16] = {{"192.0.2.22"}, {"192.0.2.21"}};

static void want(struct iso_agent_member_want *w, const char *alloc, unsigned member, int host)
{
	memset(w, 0, sizeof(*w));
	iso_strlcpy(w->allocation, alloc, sizeof(w->allocation));
	w->member = member;
	iso_strlcpy(w->tenant, "acme", sizeof(w->tenant));
	w->cpus = 1;
	w->has_overlay = true;
	w->vni = VNI;
	w->node_index = (unsigned)host;
	w->n_peers = 1;
	w->peers = peer_of[host];
}

static void env_of(int host, char *path, size_t size, struct iso_agent_overlay_env *env)
{
	nh_path(hosts[host], path, size);
	*env = (struct iso_agent_overlay_env){
	    .host_netns = path, .underlay_ip = ips[host], .underlay_dev = "ul0"};
}

static int setup(void **state)
{
	nh_init("s3a");
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: test_agent_overlay_real needs root (CI runs as root)\n");
		*state = NULL;
		return 0;
	}
	int bad = nh_underlay(hosts, ips, 2);
	const char *ms[] = {"m1", "m2", "m3"};
	for (size_t i = 0; i < 3 && !bad; i++)
		bad = nh_member(ms[i]);
	*state = nh_pfx;
	return bad ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	const char *ns[] = {"m1", "m2", "m3", "h1", "h2", "ul"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(ns); i++)
		nh_del(ns[i]);
	return nh_count() == 0 ? 0 : -1;
}

#define NEED_ROOT(state)                                                                           \
	do {                                                                                       \
		if (!*(state))                                                                     \
			skip();                                                                    \
	} while (0)

/* One pass on host h for members in[0..n). */
static void pass(int h, struct iso_agent_overlay_member_in *in, size_t n,
                 struct iso_agent_overlay *out)
{
	char hp[128];
	struct iso_agent_overlay_env env;
	struct iso_error err = {0};
	env_of(h, hp, sizeof(hp), &env);
	if (iso_agent_overlay_reconcile(&env, in, n, out, &err) < 0)
		fail_msg("reconcile h%d: %s (%s)", h + 1, err.message, err.field);
}

static void test_members_reach_and_report(void **state)
{
	NEED_ROOT(state);
	struct iso_agent_member_want w1, w2;
	want(&w1, "a-00000000000000a1", 0, 0);
	want(&w2, "a-00000000000000a2", 0, 1);
	char p1[128], p2[128];
	nh_path("m1", p1, sizeof(p1));
	nh_path("m2", p2, sizeof(p2));
	struct iso_agent_overlay_member_in in1 = {.want = &w1, .netns = p1};
	struct iso_agent_overlay_member_in in2 = {.want = &w2, .netns = p2};
	struct iso_agent_overlay o1, o2;
	pass(0, &in1, 1, &o1);
	pass(1, &in2, 1, &o2);
	assert_true(in1.ready);
	assert_string_equal(in1.reason, "");
	assert_true(in2.ready);
	assert_true(nh_reaches("m1", "m2", "10.0.1.2"));

	/* What h1 reports is the kernel's. */
	assert_true(o1.guard);
	assert_int_equal(o1.n_allowed, 1);
	assert_string_equal(o1.allowed[0].peer, "192.0.2.22");
	assert_int_equal(o1.allowed[0].vni, VNI);
	assert_int_equal(o1.n_tenants, 1);
	assert_int_equal(o1.tenants[0].vni, VNI);
	assert_string_equal(o1.tenants[0].bridge, "isobr30001");
	assert_string_equal(o1.tenants[0].vxlan, "isovx30001");
	assert_int_equal(o1.tenants[0].n_members, 1);
	assert_string_equal(o1.tenants[0].members[0].allocation, "a-00000000000000a1");
	assert_int_equal(o1.tenants[0].members[0].member, 0);
	assert_string_equal(o1.tenants[0].members[0].ifname, "eth0");
	assert_string_equal(o1.tenants[0].members[0].address, "10.0.0.2");
	iso_agent_overlay_clear(&o1);
	iso_agent_overlay_clear(&o2);

	/* The encoder takes it as it is: the report's shape. */
	struct iso_agent_overlay_member_in again = {.want = &w1, .netns = p1};
	pass(0, &again, 1, &o1);
	json_t *j = iso_codec_status_overlay_encode(&o1);
	assert_non_null(j);
	assert_true(json_is_true(json_object_get(j, "guard")));
	json_decref(j);
	iso_agent_overlay_clear(&o1);
}

static void test_second_member_next_address(void **state)
{
	NEED_ROOT(state);
	struct iso_agent_member_want w[2];
	want(&w[0], "a-00000000000000a1", 0, 0);
	want(&w[1], "a-00000000000000a3", 1, 0);
	char p1[128], p3[128];
	nh_path("m1", p1, sizeof(p1));
	nh_path("m3", p3, sizeof(p3));
	/* the new member first: the old one's address is still its own */
	struct iso_agent_overlay_member_in in[2] = {{.want = &w[1], .netns = p3},
	                                            {.want = &w[0], .netns = p1}};
	struct iso_agent_overlay o;
	pass(0, in, 2, &o);
	assert_true(in[0].ready && in[1].ready);
	assert_int_equal(o.tenants[0].n_members, 2);
	char a1[ISO_IPV4_MAX], a3[ISO_IPV4_MAX];
	assert_int_equal(iso_overlay_member_address(p1, a1, NULL), 0);
	assert_int_equal(iso_overlay_member_address(p3, a3, NULL), 0);
	assert_string_equal(a1, "10.0.0.2");
	assert_string_equal(a3, "10.0.0.3");
	iso_agent_overlay_clear(&o);
	assert_true(nh_reaches("m3", "m2", "10.0.1.2"));
}

static void test_not_ready_says_why(void **state)
{
	NEED_ROOT(state);
	struct iso_agent_member_want w[2];
	want(&w[0], "a-00000000000000a1", 0, 0);
	want(&w[1], "a-00000000000000a3", 1, 0);
	char p1[128], p3[128], hp[128];
	nh_path("m1", p1, sizeof(p1));
	nh_path("m3", p3, sizeof(p3));
	/* m3's sandbox has no namespace (yet): not ready; its veth goes. */
	struct iso_agent_overlay_member_in in[2] = {{.want = &w[0], .netns = p1},
	                                            {.want = &w[1], .netns = NULL}};
	struct iso_agent_overlay o;
	pass(0, in, 2, &o);
	assert_true(in[0].ready);
	assert_false(in[1].ready);
	assert_non_null(strstr(in[1].reason, "network namespace"));
	assert_int_equal(o.tenants[0].n_members, 1);
	iso_agent_overlay_clear(&o);
	/* A node without an underlay address: nothing can be built. */
	struct iso_agent_overlay_env env;
	struct iso_error err = {0};
	env_of(0, hp, sizeof(hp), &env);
	env.underlay_ip = "";
	struct iso_agent_overlay_member_in one = {.want = &w[0], .netns = p1};
	assert_int_equal(iso_agent_overlay_reconcile(&env, &one, 1, &o, &err), 0);
	assert_false(one.ready);
	assert_non_null(strstr(one.reason, "underlay"));
	/* ... and no tunnel stays up without its guard. */
	assert_int_equal(o.n_tenants, 1);
	assert_string_equal(o.tenants[0].vxlan, "");
	assert_false(o.guard);
	iso_agent_overlay_clear(&o);
	/* A tenant whose members are all on this node needs no underlay: its
	 * bridge alone, and the member is ready. */
	w[0].n_peers = 0;
	one = (struct iso_agent_overlay_member_in){.want = &w[0], .netns = p1};
	assert_int_equal(iso_agent_overlay_reconcile(&env, &one, 1, &o, &err), 0);
	assert_true(one.ready);
	assert_string_equal(o.tenants[0].bridge, "isobr30001");
	assert_string_equal(o.tenants[0].vxlan, "");
	assert_int_equal(o.tenants[0].n_members, 1);
	w[0].n_peers = 1;
	iso_agent_overlay_clear(&o);
}

/* A tenant whose last member left, with env.linger: its member's veth, its
 * VXLAN device and the guard go at once, its bridge alone stays (no port,
 * no tunnel: nothing reaches it) until it has been empty for hold_ns; a
 * member back in time finds it and its tunnel and guard are made again. */
static void test_emptied_tenant_bridge_lingers(void **state)
{
	NEED_ROOT(state);
	struct iso_agent_member_want w1;
	want(&w1, "a-00000000000000a1", 0, 0);
	char p1[128], hp[128];
	nh_path("m1", p1, sizeof(p1));
	struct iso_agent_overlay_linger lg = {.hold_ns = UINT64_C(3600) * 1000000000u};
	struct iso_agent_overlay_env env;
	struct iso_agent_overlay o;
	struct iso_error err = {0};
	env_of(0, hp, sizeof(hp), &env);
	env.linger = &lg;
	struct iso_agent_overlay_member_in in = {.want = &w1, .netns = p1};
	assert_int_equal(iso_agent_overlay_reconcile(&env, &in, 1, &o, &err), 0);
	assert_true(in.ready);
	iso_agent_overlay_clear(&o);
	assert_int_equal(lg.n, 0);

	/* m1 released: the bridge alone stays */
	assert_int_equal(iso_agent_overlay_reconcile(&env, NULL, 0, &o, &err), 0);
	iso_agent_overlay_clear(&o);
	assert_int_equal(lg.n, 1);
	assert_int_equal(lg.t[0].vni, VNI);
	assert_int_equal(nh_sh("ip -n %sh1 link show isobr30001 >/dev/null 2>&1", nh_pfx), 0);
	assert_int_not_equal(nh_sh("ip -n %sh1 link show isovx30001 >/dev/null 2>&1", nh_pfx), 0);
	assert_int_equal(nh_sh("test -z \"$(ip -n %sh1 -o link show master isobr30001)\"", nh_pfx),
	                 0);
	assert_int_equal(nh_sh("test \"$(ip -n %sm1 -o link show | grep -c .)\" = 1", nh_pfx), 0);
	assert_int_not_equal(
	    nh_sh("ip netns exec %sh1 nft list table inet isostack >/dev/null 2>&1", nh_pfx), 0);
	/* ... and stays on the next pass within the hold */
	assert_int_equal(iso_agent_overlay_reconcile(&env, NULL, 0, &o, &err), 0);
	iso_agent_overlay_clear(&o);
	assert_int_equal(lg.n, 1);
	assert_int_equal(nh_sh("ip -n %sh1 link show isobr30001 >/dev/null 2>&1", nh_pfx), 0);

	/* m1 back: on the same bridge, its tunnel and guard made again */
	in = (struct iso_agent_overlay_member_in){.want = &w1, .netns = p1};
	assert_int_equal(iso_agent_overlay_reconcile(&env, &in, 1, &o, &err), 0);
	assert_true(in.ready);
	assert_true(o.guard);
	assert_int_equal(o.n_allowed, 1);
	assert_string_equal(o.tenants[0].vxlan, "isovx30001");
	iso_agent_overlay_clear(&o);
	assert_int_equal(lg.n, 0);
	assert_true(nh_reaches("m1", "m2", "10.0.1.2"));

	/* released again, the hold over: the bridge goes */
	assert_int_equal(iso_agent_overlay_reconcile(&env, NULL, 0, &o, &err), 0);
	iso_agent_overlay_clear(&o);
	assert_int_equal(lg.n, 1);
	lg.hold_ns = 0;
	assert_int_equal(iso_agent_overlay_reconcile(&env, NULL, 0, &o, &err), 0);
	iso_agent_overlay_clear(&o);
	assert_int_equal(lg.n, 0);
	assert_int_not_equal(nh_sh("ip -n %sh1 link show isobr30001 >/dev/null 2>&1", nh_pfx), 0);
}

static void test_released_members_leave_nothing(void **state)
{
	NEED_ROOT(state);
	struct iso_agent_overlay o;
	for (int h = 0; h < 2; h++) {
		pass(h, NULL, 0, &o);
		assert_int_equal(o.n_tenants, 0); /* no overlay member: no report */
		assert_false(o.guard);
		assert_int_equal(
		    nh_sh("test \"$(ip -n %s%s -o link show | grep -c .)\" = 2", nh_pfx, hosts[h]),
		    0);
		assert_int_not_equal(
		    nh_sh("ip netns exec %s%s nft list table inet isostack >/dev/null 2>&1", nh_pfx,
		          hosts[h]),
		    0);
	}
	const char *ms[] = {"m1", "m2", "m3"};
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(
		    nh_sh("test \"$(ip -n %s%s -o link show | grep -c .)\" = 1", nh_pfx, ms[i]), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_members_reach_and_report),
	    cmocka_unit_test(test_second_member_next_address),
	    cmocka_unit_test(test_not_ready_says_why),
	    cmocka_unit_test(test_emptied_tenant_bridge_lingers),
	    cmocka_unit_test(test_released_members_leave_nothing),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

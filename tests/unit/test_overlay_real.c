/* test_overlay_real.c: the tenant overlay (src/sandbox/overlay*.c) on the
 * real kernel, with network namespaces as hosts: h1, h2 and h3 on one
 * underlay bridge (namespace ul) through veths, 192.0.2.11-13. Tenant A
 * (VNI 10001) has members on h1 and h2, tenant B (VNI 10002) on h1 and h3;
 * each member is a namespace of its own. A's member on h1 reaches A's on
 * h2 over TCP, B's member on h1 does not reach A's (and A's sees none of
 * its frames); a forged VXLAN device on h3 with A's VNI does inject frames
 * into h1's VXLAN device while the guard is off (the control), and with the
 * guard on nothing arrives and the guard's counter rises by what was sent.
 * Ensure twice changes nothing (ifindexes, nft handles); peers follow the
 * spec; removal leaves no interface and no nft table. Runs as root; skips,
 * saying why, otherwise. Every namespace is this run's (s3-PID-*) and
 * deleted at the end, and counted. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"
#include "netns_hosts.h"

#define pfx nh_pfx

#define VNI_A 10001
#define VNI_B 10002

static const char *const hosts[] = {"h1", "h2", "h3"};
static const char *const ips[] = {"192.0.2.11", "192.0.2.12", "192.0.2.13"};

/* A member: its host (index), tenant, slot and namespace suffix. */
static const struct {
	const char *ns;
	int host;
	uint32_t vni;
} members[] = {
    {"m1a", 0, VNI_A},
    {"m2a", 1, VNI_A},
    {"m1b", 0, VNI_B},
    {"m3b", 2, VNI_B},
};

static void sandbox_name(const char *m, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s", pfx, m);
}

/* The value of `ip -n NS -s -j link show DEV`'s stats64.rx.packets, -1 when absent. */
static long long rx_packets(const char *host, const char *dev)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ip -n %s%s -s -j link show %s 2>/dev/null", pfx, host, dev);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	json_error_t je;
	json_t *doc = json_loadf(p, 0, &je);
	pclose(p);
	long long v = -1;
	json_t *n = json_object_get(
	    json_object_get(json_object_get(json_array_get(doc, 0), "stats64"), "rx"), "packets");
	if (json_is_integer(n))
		v = json_integer_value(n);
	json_decref(doc);
	return v;
}

/* The spec of tenant vni on host h: the other hosts holding a member. */
static void tenant_spec(int h, uint32_t vni, struct iso_overlay_tenant *t, const char **peers)
{
	size_t n = 0;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(members); i++) {
		if (members[i].vni != vni || members[i].host == h)
			continue;
		bool dup = false;
		for (size_t j = 0; j < n; j++)
			dup = dup || strcmp(peers[j], ips[members[i].host]) == 0;
		if (!dup)
			peers[n++] = ips[members[i].host];
	}
	*t = (struct iso_overlay_tenant){
	    .vni = vni, .underlay_dev = "ul0", .local_ip = ips[h], .peers = peers, .n_peers = n};
}

/* What the agent would apply on host h: tenants, members, guard. */
static void ensure_host(int h)
{
	struct iso_error err = {0};
	char hp[128];
	nh_path(hosts[h], hp, sizeof(hp));
	const uint32_t vnis[] = {VNI_A, VNI_B};
	struct iso_overlay_allow allow[8];
	size_t n_allow = 0;
	for (size_t v = 0; v < 2; v++) {
		bool here = false;
		for (size_t i = 0; i < ISO_ARRAY_SIZE(members); i++)
			here = here || (members[i].vni == vnis[v] && members[i].host == h);
		if (!here)
			continue;
		struct iso_overlay_tenant t;
		const char *peers[4];
		tenant_spec(h, vnis[v], &t, peers);
		int r = iso_overlay_tenant_ensure(hp, &t, &err);
		if (r < 0)
			fail_msg("tenant_ensure h%d %u: %s (%s)", h + 1, vnis[v], err.message,
			         err.field);
		for (size_t p = 0; p < t.n_peers; p++) {
			iso_strlcpy(allow[n_allow].peer, peers[p], sizeof(allow[n_allow].peer));
			allow[n_allow++].vni = vnis[v];
		}
	}
	for (size_t i = 0; i < ISO_ARRAY_SIZE(members); i++) {
		if (members[i].host != h)
			continue;
		char name[64], mp[128];
		sandbox_name(members[i].ns, name, sizeof(name));
		nh_path(members[i].ns, mp, sizeof(mp));
		struct iso_overlay_member m = {.name = name,
		                               .vni = members[i].vni,
		                               .member_netns = mp,
		                               .node_index = (unsigned)h,
		                               .slot = 0};
		if (iso_overlay_member_ensure(hp, &m, &err) < 0)
			fail_msg("member_ensure %s: %s (%s)", name, err.message, err.field);
	}
	if (iso_overlay_guard_apply(hp, "ul0", allow, n_allow, &err) < 0)
		fail_msg("guard_apply h%d: %s", h + 1, err.message);
}

static int teardown_all(void **state)
{
	(void)state;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(members); i++)
		nh_del(members[i].ns);
	for (size_t h = 0; h < 3; h++)
		nh_del(hosts[h]);
	nh_del("ul");
	if (nh_count() != 0) {
		fprintf(stderr, "test_overlay_real: namespaces left behind\n");
		return -1;
	}
	return 0;
}

static int setup_all(void **state)
{
	nh_init("s3");
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: test_overlay_real needs root (CI runs as root)\n");
		*state = NULL;
		return 0;
	}
	if (nh_sh("ip -V >/dev/null 2>&1") != 0) {
		fprintf(stderr, "SKIP: test_overlay_real needs iproute2 to build its hosts\n");
		*state = NULL;
		return 0;
	}
	/* The underlay: a bridge in ul, one veth per host; members in
	 * namespaces of their own. */
	int bad = nh_underlay(hosts, ips, 3);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(members) && !bad; i++)
		bad = nh_member(members[i].ns);
	if (bad) {
		teardown_all(state);
		fprintf(stderr, "test_overlay_real: building the hosts failed\n");
		return -1;
	}
	*state = pfx;
	return 0;
}

#define NEED_ROOT(state)                                                                           \
	do {                                                                                       \
		if (!*(state))                                                                     \
			skip();                                                                    \
	} while (0)

static void test_same_tenant_reaches(void **state)
{
	NEED_ROOT(state);
	for (int h = 0; h < 3; h++)
		ensure_host(h);
	/* A: h1's member (10.0.0.2) to h2's (10.0.1.2) and back. */
	assert_true(nh_reaches("m1a", "m2a", "10.0.1.2"));
	assert_true(nh_reaches("m2a", "m1a", "10.0.0.2"));
	/* B: h1's member to h3's (10.0.2.2). */
	assert_true(nh_reaches("m1b", "m3b", "10.0.2.2"));
}

/* eth0's MAC address in member namespace m. */
static void mac_of(const char *m, char out[18])
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
	         "ip -n %s%s -o link show eth0 | sed 's/.*link.ether \\([^ ]*\\).*/\\1/'", pfx, m);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, 18, p));
	pclose(p);
	assert_int_equal(strlen(out), 17);
}

static void test_other_tenant_does_not(void **state)
{
	NEED_ROOT(state);
	/* 10.0.1.2 exists only in A's domain: B's member on h1 cannot reach
	 * it. Had any of its frames (its ARP first) entered A's domain, h2's
	 * bridge for A would have learnt its MAC, and A's member its
	 * neighbour entry. */
	char mac[18];
	mac_of("m1b", mac);
	assert_false(nh_reaches("m1b", "m2a", "10.0.1.2"));
	assert_int_not_equal(nh_sh("bridge -n %sh2 fdb show br isobr10001 | grep -q %s", pfx, mac),
	                     0);
	assert_int_not_equal(nh_sh("ip -n %sm2a neigh show | grep -q %s", pfx, mac), 0);
	/* ... which is what happens to a frame of A's own (the check can fail). */
	mac_of("m1a", mac);
	assert_int_equal(nh_sh("bridge -n %sh2 fdb show br isobr10001 | grep -q %s", pfx, mac), 0);
}

static void test_readback(void **state)
{
	NEED_ROOT(state);
	char hp[128], name[64];
	nh_path("h1", hp, sizeof(hp));
	struct iso_overlay_state st;
	struct iso_error err = {0};
	assert_int_equal(iso_overlay_read(hp, &st, &err), 0);
	assert_int_equal(st.n_tenants, 2);
	const uint32_t vnis[] = {VNI_A, VNI_B};
	const char *peer[] = {"192.0.2.12", "192.0.2.13"};
	const char *mem[] = {"m1a", "m1b"};
	for (size_t i = 0; i < 2; i++) {
		struct iso_overlay_tenant_state *t = &st.tenants[i];
		char br[16], vx[16];
		snprintf(br, sizeof(br), "isobr%u", vnis[i]);
		snprintf(vx, sizeof(vx), "isovx%u", vnis[i]);
		assert_int_equal(t->vni, vnis[i]);
		assert_string_equal(t->bridge, br);
		assert_string_equal(t->vxlan, vx);
		assert_true(t->vxlan_present && t->up);
		assert_false(t->learning);
		assert_int_equal(t->port, 4789);
		assert_string_equal(t->local_ip, "192.0.2.11");
		assert_int_equal(t->n_peers, 1);
		assert_string_equal(t->peers[0], peer[i]);
		assert_int_equal(t->n_members, 1);
		sandbox_name(mem[i], name, sizeof(name));
		assert_string_equal(t->members[0].name, name);
		assert_true(t->members[0].up);
	}
	iso_overlay_state_clear(&st);
	char mp[128], addr[ISO_IPV4_MAX];
	nh_path("m1b", mp, sizeof(mp));
	assert_int_equal(iso_overlay_member_address(mp, addr, &err), 0);
	assert_string_equal(addr, "10.0.0.2");
	struct iso_overlay_guard_state g;
	assert_int_equal(iso_overlay_guard_read(hp, &g, &err), 0);
	assert_true(g.present);
	assert_string_equal(g.underlay_dev, "ul0");
	assert_int_equal(g.n_allowed, 2);
	assert_string_equal(g.allowed[0].peer, "192.0.2.12");
	assert_int_equal(g.allowed[0].vni, VNI_A);
	assert_string_equal(g.allowed[1].peer, "192.0.2.13");
	assert_int_equal(g.allowed[1].vni, VNI_B);
	iso_overlay_guard_state_clear(&g);
}

/* Sends n UDP datagrams from h3 through its forged device to A's member
 * address on h1. */
static void forge_send(int n)
{
	int s = nh_socket_in("h3", SOCK_DGRAM);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
	inet_pton(AF_INET, "10.0.0.2", &a.sin_addr);
	for (int i = 0; i < n; i++)
		assert_int_equal(sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof(a)), 1);
	close(s);
	usleep(300 * 1000); /* let the underlay deliver them (no timing asserted) */
}

static void test_forged_vni_is_dropped(void **state)
{
	NEED_ROOT(state);
	/* h3 holds B, not A: a VXLAN device with A's VNI aimed at h1, with a
	 * static neighbour so every datagram is one VXLAN packet. */
	assert_int_equal(nh_sh("ip -n %sh3 link add forge type vxlan id %d remote 192.0.2.11 local "
	                       "192.0.2.13 dstport 4789 dev ul0 nolearning && "
	                       "ip -n %sh3 addr add 10.0.9.9/8 dev forge && "
	                       "ip -n %sh3 link set forge up && "
	                       "ip -n %sh3 neigh add 10.0.0.2 lladdr 02:00:00:00:00:01 dev forge",
	                       pfx, VNI_A, pfx, pfx, pfx),
	                 0);
	char hp[128];
	nh_path("h1", hp, sizeof(hp));
	struct iso_error err = {0};
	struct iso_overlay_guard_state g;

	/* The control: without the guard the forged frames do arrive. */
	assert_int_equal(iso_overlay_guard_remove(hp, &err), 0);
	long long rx0 = rx_packets("h1", "isovx10001");
	forge_send(5);
	long long rx1 = rx_packets("h1", "isovx10001");
	assert_true(rx1 >= rx0 + 5);

	/* With it, nothing arrives and the counter rises by what was sent. */
	ensure_host(0);
	assert_int_equal(iso_overlay_guard_read(hp, &g, &err), 0);
	assert_true(g.present);
	uint64_t d0 = g.drops;
	iso_overlay_guard_state_clear(&g);
	forge_send(5);
	assert_int_equal(rx_packets("h1", "isovx10001"), rx1);
	assert_int_equal(iso_overlay_guard_read(hp, &g, &err), 0);
	assert_true(g.drops >= d0 + 5);
	iso_overlay_guard_state_clear(&g);
	/* A's own traffic still flows. */
	assert_true(nh_reaches("m2a", "m1a", "10.0.0.2"));
	assert_int_equal(nh_sh("ip -n %sh3 link del forge", pfx), 0);
}

/* `ip -o link` (ifindexes, flags, MTUs, masters, aliases) and the guard's nft
 * objects with their handles, as one string. */
static char *snapshot(const char *host)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
	         "ip -n %s%s -o link show; "
	         "ip netns exec %s%s nft -a list table inet isostack | grep -v packets",
	         pfx, host, pfx, host);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t cap = 1 << 16, len = 0;
	char *buf = calloc(1, cap);
	assert_non_null(buf);
	size_t n;
	while ((n = fread(buf + len, 1, cap - 1 - len, p)) > 0)
		len += n;
	pclose(p);
	return buf;
}

static void test_ensure_twice_changes_nothing(void **state)
{
	NEED_ROOT(state);
	char *a = snapshot("h1");
	ensure_host(0);
	ensure_host(0);
	char *b = snapshot("h1");
	assert_true(strstr(a, "isovx10001") && strstr(a, "vxlan_guard"));
	assert_string_equal(a, b);
	free(a);
	free(b);
}

static void test_peers_follow_the_spec(void **state)
{
	NEED_ROOT(state);
	char hp[128];
	nh_path("h1", hp, sizeof(hp));
	struct iso_error err = {0};
	const char *peers[] = {"192.0.2.13", "192.0.2.12"};
	struct iso_overlay_tenant t = {.vni = VNI_A,
	                               .underlay_dev = "ul0",
	                               .local_ip = "192.0.2.11",
	                               .peers = peers,
	                               .n_peers = 2};
	assert_int_equal(iso_overlay_tenant_ensure(hp, &t, &err), 0);
	struct iso_overlay_state st;
	assert_int_equal(iso_overlay_read(hp, &st, &err), 0);
	assert_int_equal(st.tenants[0].n_peers, 2);
	assert_string_equal(st.tenants[0].peers[0], "192.0.2.12");
	assert_string_equal(st.tenants[0].peers[1], "192.0.2.13");
	iso_overlay_state_clear(&st);
	t.peers = peers + 1;
	t.n_peers = 1;
	assert_int_equal(iso_overlay_tenant_ensure(hp, &t, &err), 0);
	assert_int_equal(iso_overlay_read(hp, &st, &err), 0);
	assert_int_equal(st.tenants[0].n_peers, 1);
	assert_string_equal(st.tenants[0].peers[0], "192.0.2.12");
	iso_overlay_state_clear(&st);
}

static void test_bad_input_and_busy(void **state)
{
	NEED_ROOT(state);
	char hp[128], mp[128];
	nh_path("h1", hp, sizeof(hp));
	nh_path("m1a", mp, sizeof(mp));
	struct iso_error err = {0};
	struct iso_overlay_tenant t = {
	    .vni = VNI_A, .underlay_dev = "nosuch0", .local_ip = "192.0.2.11"};
	assert_int_equal(iso_overlay_tenant_ensure(hp, &t, &err), -ENODEV);
	assert_string_equal(err.field, "underlay_dev");
	struct iso_overlay_member m = {.name = "nobody", .vni = 777, .member_netns = mp};
	assert_int_equal(iso_overlay_member_ensure(hp, &m, &err), -ENOENT);
	assert_string_equal(err.field, "vni");
	/* A's bridge still holds a member. */
	assert_int_equal(iso_overlay_tenant_remove(hp, VNI_A, &err), -EBUSY);
	/* The member's namespace already has its eth0 from another veth. */
	struct iso_overlay_member other = {.name = "intruder", .vni = VNI_A, .member_netns = mp};
	assert_int_equal(iso_overlay_member_ensure(hp, &other, &err), -EEXIST);
	assert_string_equal(err.field, "member_netns");
}

static void test_removal_leaves_nothing(void **state)
{
	NEED_ROOT(state);
	struct iso_error err = {0};
	for (int h = 0; h < 3; h++) {
		char hp[128];
		nh_path(hosts[h], hp, sizeof(hp));
		for (size_t i = 0; i < ISO_ARRAY_SIZE(members); i++) {
			if (members[i].host != h)
				continue;
			char name[64];
			sandbox_name(members[i].ns, name, sizeof(name));
			assert_int_equal(iso_overlay_member_remove(hp, name, &err), 0);
			assert_int_equal(iso_overlay_member_remove(hp, name, &err), 0); /* gone */
		}
		assert_int_equal(iso_overlay_tenant_remove(hp, VNI_A, &err), 0);
		assert_int_equal(iso_overlay_tenant_remove(hp, VNI_B, &err), 0);
		assert_int_equal(iso_overlay_guard_remove(hp, &err), 0);
		assert_int_equal(iso_overlay_guard_remove(hp, &err), 0);
		/* Only lo and the underlay remain; no table. */
		assert_int_equal(
		    nh_sh("test \"$(ip -n %s%s -o link show | grep -c .)\" = 2", pfx, hosts[h]), 0);
		assert_int_not_equal(
		    nh_sh("ip netns exec %s%s nft list table inet isostack >/dev/null 2>&1", pfx,
		          hosts[h]),
		    0);
		struct iso_overlay_state st;
		assert_int_equal(iso_overlay_read(hp, &st, &err), 0);
		assert_int_equal(st.n_tenants, 0);
		iso_overlay_state_clear(&st);
	}
	for (size_t i = 0; i < ISO_ARRAY_SIZE(members); i++)
		assert_int_equal(nh_sh("test \"$(ip -n %s%s -o link show | grep -c .)\" = 1", pfx,
		                       members[i].ns),
		                 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_tenant_reaches),
	    cmocka_unit_test(test_other_tenant_does_not),
	    cmocka_unit_test(test_readback),
	    cmocka_unit_test(test_forged_vni_is_dropped),
	    cmocka_unit_test(test_ensure_twice_changes_nothing),
	    cmocka_unit_test(test_peers_follow_the_spec),
	    cmocka_unit_test(test_bad_input_and_busy),
	    cmocka_unit_test(test_removal_leaves_nothing),
	};
	return cmocka_run_group_tests(tests, setup_all, teardown_all);
}

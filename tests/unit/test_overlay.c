/* test_overlay.c: the overlay's parts that need no root and no SR-IOV NIC:
 * the RoCE VF message (IFLA_VFINFO_LIST with IFLA_VF_VLAN and
 * IFLA_VF_SPOOFCHK) built and parsed, the read-back of a PF without VFs,
 * the address plan and veth names, and bad input refused with the field
 * named before anything touches the kernel. The kernel side runs in
 * test_overlay_real (suite sandbox, root). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"
#include "sandbox/overlay_int.h"

static void test_vf_message_built(void **state)
{
	(void)state;
	struct iso_overlay_vf want = {.vf = 3, .vlan = 100, .qos = 2, .spoofchk = true};
	struct nl_msg *m = NULL;
	assert_int_equal(ovl_vf_msg_build(7, &want, &m), 0);
	struct nlmsghdr *h = nlmsg_hdr(m);
	assert_int_equal(h->nlmsg_type, RTM_SETLINK);
	struct ifinfomsg *ifi = nlmsg_data(h);
	assert_int_equal(ifi->ifi_index, 7);
	struct nlattr *tb[IFLA_MAX + 1];
	assert_int_equal(nlmsg_parse(h, sizeof(*ifi), tb, IFLA_MAX, NULL), 0);
	assert_non_null(tb[IFLA_VFINFO_LIST]);
	struct nlattr *info = nla_data(tb[IFLA_VFINFO_LIST]);
	assert_int_equal(nla_type(info), IFLA_VF_INFO);
	struct nlattr *vt[IFLA_VF_MAX + 1];
	assert_int_equal(nla_parse_nested(vt, IFLA_VF_MAX, info, NULL), 0);
	struct ifla_vf_vlan vlan;
	struct ifla_vf_spoofchk sc;
	assert_int_equal(nla_len(vt[IFLA_VF_VLAN]), sizeof(vlan));
	memcpy(&vlan, nla_data(vt[IFLA_VF_VLAN]), sizeof(vlan));
	assert_int_equal(vlan.vf, 3);
	assert_int_equal(vlan.vlan, 100);
	assert_int_equal(vlan.qos, 2);
	assert_int_equal(nla_len(vt[IFLA_VF_SPOOFCHK]), sizeof(sc));
	memcpy(&sc, nla_data(vt[IFLA_VF_SPOOFCHK]), sizeof(sc));
	assert_int_equal(sc.vf, 3);
	assert_int_equal(sc.setting, 1);
	/* What it sets is what the parser reads back. */
	struct iso_overlay_vf got;
	assert_int_equal(ovl_vf_msg_parse(h, 3, &got), 0);
	assert_int_equal(got.vlan, 100);
	assert_int_equal(got.qos, 2);
	assert_true(got.spoofchk);
	assert_int_equal(ovl_vf_msg_parse(h, 4, &got), -ENOENT);
	nlmsg_free(m);
}

/* An RTM_NEWLINK as a PF answers, with VFs 0 and 5; vlan_len short of the
 * struct makes it malformed. */
static struct nl_msg *pf_reply(int vlan_len, bool with_list)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWLINK, 0);
	struct ifinfomsg ifi = {.ifi_index = 2};
	assert_int_equal(nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO), 0);
	assert_int_equal(nla_put_string(m, IFLA_IFNAME, "pf0"), 0);
	if (!with_list)
		return m;
	struct nlattr *list = nla_nest_start(m, IFLA_VFINFO_LIST);
	const unsigned vfs[] = {0, 5}, vlans[] = {10, 20}, spoof[] = {0, 1};
	for (int i = 0; i < 2; i++) {
		struct nlattr *info = nla_nest_start(m, IFLA_VF_INFO);
		struct ifla_vf_vlan v = {.vf = vfs[i], .vlan = vlans[i], .qos = 0};
		struct ifla_vf_spoofchk s = {.vf = vfs[i], .setting = spoof[i]};
		assert_int_equal(nla_put(m, IFLA_VF_VLAN, vlan_len, &v), 0);
		assert_int_equal(nla_put(m, IFLA_VF_SPOOFCHK, sizeof(s), &s), 0);
		nla_nest_end(m, info);
	}
	nla_nest_end(m, list);
	return m;
}

static void test_vf_reply_parsed(void **state)
{
	(void)state;
	struct iso_overlay_vf got;
	struct nl_msg *m = pf_reply(sizeof(struct ifla_vf_vlan), true);
	assert_int_equal(ovl_vf_msg_parse(nlmsg_hdr(m), 5, &got), 0);
	assert_int_equal(got.vf, 5);
	assert_int_equal(got.vlan, 20);
	assert_true(got.spoofchk);
	assert_int_equal(ovl_vf_msg_parse(nlmsg_hdr(m), 0, &got), 0);
	assert_int_equal(got.vlan, 10);
	assert_false(got.spoofchk);
	assert_int_equal(ovl_vf_msg_parse(nlmsg_hdr(m), 1, &got), -ENOENT);
	nlmsg_free(m);
	m = pf_reply(4, true); /* a VLAN attribute cut short */
	assert_int_equal(ovl_vf_msg_parse(nlmsg_hdr(m), 5, &got), -EBADMSG);
	nlmsg_free(m);
	m = pf_reply(sizeof(struct ifla_vf_vlan), false); /* no VF list: no SR-IOV */
	assert_int_equal(ovl_vf_msg_parse(nlmsg_hdr(m), 0, &got), -ENOENT);
	nlmsg_free(m);
}

static void test_vf_on_a_device_without_vfs(void **state)
{
	(void)state;
	/* lo lists no VF: read answers -ENOENT naming the VF (no root needed). */
	struct iso_overlay_vf got;
	struct iso_error err = {0};
	assert_int_equal(iso_overlay_vf_read(NULL, "lo", 0, &got, &err), -ENOENT);
	assert_string_equal(err.field, "vf");
	struct iso_overlay_vf bad = {.vf = 0, .vlan = 4095};
	assert_int_equal(iso_overlay_vf_set(NULL, "lo", &bad, &err), -EINVAL);
	assert_string_equal(err.field, "vlan");
	bad.vlan = 10;
	bad.qos = 8;
	assert_int_equal(iso_overlay_vf_set(NULL, "lo", &bad, &err), -EINVAL);
	assert_string_equal(err.field, "qos");
	assert_true(iso_overlay_vf_read(NULL, "nosuchpf0", 0, &got, &err) < 0);
	assert_string_equal(err.field, "pf");
}

static void test_address_plan(void **state)
{
	(void)state;
	char ip[ISO_IPV4_MAX];
	struct iso_error err = {0};
	assert_int_equal(iso_overlay_address(3, 0, ip, &err), 0);
	assert_string_equal(ip, "10.0.3.2");
	assert_int_equal(iso_overlay_address(258, 252, ip, &err), 0);
	assert_string_equal(ip, "10.1.2.254");
	assert_int_equal(iso_overlay_address(65535, 0, ip, &err), 0);
	assert_string_equal(ip, "10.255.255.2");
	assert_int_equal(iso_overlay_address(65536, 0, ip, &err), -EINVAL);
	assert_string_equal(err.field, "node_index");
	assert_int_equal(iso_overlay_address(0, 253, ip, &err), -EINVAL);
	assert_string_equal(err.field, "slot");
	char a[ISO_OVERLAY_IFNAME], b[ISO_OVERLAY_IFNAME];
	iso_overlay_veth_name("iso-a-0123456789abcdef-0", a);
	iso_overlay_veth_name("iso-a-0123456789abcdef-1", b);
	assert_int_equal(strlen(a), 12);
	assert_memory_equal(a, "isov", 4);
	assert_string_not_equal(a, b);
	iso_overlay_veth_name("iso-a-0123456789abcdef-0", b);
	assert_string_equal(a, b);
}

static void test_bad_input_named(void **state)
{
	(void)state;
	struct iso_error err = {0};
	const char *peers[] = {"192.0.2.12", "192.0.2.300"};
	struct iso_overlay_tenant t = {.vni = 0, .underlay_dev = "eth0", .local_ip = "192.0.2.11"};
	assert_int_equal(iso_overlay_tenant_ensure(NULL, &t, &err), -EINVAL);
	assert_string_equal(err.field, "vni");
	t.vni = 1u << 24;
	assert_int_equal(iso_overlay_tenant_ensure(NULL, &t, &err), -EINVAL);
	assert_string_equal(err.field, "vni");
	t.vni = 10001;
	t.underlay_dev = "a-name-far-too-long0";
	assert_int_equal(iso_overlay_tenant_ensure(NULL, &t, &err), -EINVAL);
	assert_string_equal(err.field, "underlay_dev");
	t.underlay_dev = "eth0";
	t.local_ip = "192.0.2.011";
	assert_int_equal(iso_overlay_tenant_ensure(NULL, &t, &err), -EINVAL);
	assert_string_equal(err.field, "local_ip");
	t.local_ip = "192.0.2.11";
	t.peers = peers;
	t.n_peers = 2;
	assert_int_equal(iso_overlay_tenant_ensure(NULL, &t, &err), -EINVAL);
	assert_string_equal(err.field, "peers[1]");
	peers[1] = "192.0.2.11";
	assert_int_equal(iso_overlay_tenant_ensure(NULL, &t, &err), -EINVAL);
	assert_string_equal(err.field, "peers[1]"); /* the node itself */

	struct iso_overlay_member m = {.name = "Bad/Name", .vni = 10001, .member_netns = "/x"};
	assert_int_equal(iso_overlay_member_ensure(NULL, &m, &err), -EINVAL);
	assert_string_equal(err.field, "name");
	m.name = "iso-a-1-0";
	m.slot = 300;
	assert_int_equal(iso_overlay_member_ensure(NULL, &m, &err), -EINVAL);
	assert_string_equal(err.field, "slot");
	m.slot = 0;
	m.member_netns = NULL;
	assert_int_equal(iso_overlay_member_ensure(NULL, &m, &err), -EINVAL);
	assert_string_equal(err.field, "member_netns");
	assert_int_equal(iso_overlay_member_remove(NULL, "../x", &err), -EINVAL);
	assert_string_equal(err.field, "name");
	assert_int_equal(iso_overlay_tenant_remove(NULL, 0, &err), -EINVAL);
	assert_string_equal(err.field, "vni");

	struct iso_overlay_allow al[] = {{"192.0.2.12", 10001}, {"192.0.2.x", 10001}};
	assert_int_equal(iso_overlay_guard_apply(NULL, "ul0", al, 2, &err), -EINVAL);
	assert_string_equal(err.field, "allowed.peer");
	al[1] = (struct iso_overlay_allow){"192.0.2.13", 0};
	assert_int_equal(iso_overlay_guard_apply(NULL, "ul0", al, 2, &err), -EINVAL);
	assert_string_equal(err.field, "allowed.vni");
	assert_int_equal(iso_overlay_guard_apply(NULL, "ul0\" accept", al, 1, &err), -EINVAL);
	assert_string_equal(err.field, "underlay_dev");
	/* A namespace that does not exist. */
	assert_int_equal(iso_overlay_tenant_remove("/nonexistent/netns", 10001, &err), -ENOENT);
	assert_string_equal(err.field, "netns");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vf_message_built),
	    cmocka_unit_test(test_vf_reply_parsed),
	    cmocka_unit_test(test_vf_on_a_device_without_vfs),
	    cmocka_unit_test(test_address_plan),
	    cmocka_unit_test(test_bad_input_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

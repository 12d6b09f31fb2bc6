/* overlay_vf.c: the RoCE member's guard (issue 14). RoCE traffic is made and
 * consumed by the NIC's RDMA engine, never by the host's IP stack, so
 * netfilter (the VXLAN guard of overlay_guard.c) cannot see it. What keeps a
 * RoCE tenant in its lane on the host is its SR-IOV VF: a VLAN the NIC tags
 * and filters in hardware, and the spoof check that drops frames whose source
 * MAC is not the VF's. Both are set on the PF by rtnetlink (RTM_SETLINK with
 * IFLA_VFINFO_LIST) and read back from RTM_GETLINK. There is no SR-IOV NIC
 * on the build machine: the message's builder and parser are unit-tested
 * (tests/unit/test_overlay.c) and the real calls answer the kernel's error
 * there. */
#include <errno.h>
#include <net/if.h>
#include <string.h>

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"
#include "sandbox/overlay_int.h"

static int check_vf(const struct iso_overlay_vf *w, struct iso_error *err)
{
	if (!w)
		return iso_error_set(err, ISO_E_INVALID, "vf", "missing");
	if (w->vlan < 1 || w->vlan > 4094)
		return iso_error_set(err, ISO_E_INVALID, "vlan", "must be 1..4094");
	if (w->qos > 7)
		return iso_error_set(err, ISO_E_INVALID, "qos", "must be 0..7");
	return 0;
}

int ovl_vf_msg_build(int ifindex, const struct iso_overlay_vf *want, struct nl_msg **out)
{
	*out = NULL;
	struct nl_msg *m = nlmsg_alloc_simple(RTM_SETLINK, 0);
	if (!m)
		return -ENOMEM;
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = ifindex};
	struct ifla_vf_vlan vlan = {.vf = want->vf, .vlan = want->vlan, .qos = want->qos};
	struct ifla_vf_spoofchk sc = {.vf = want->vf, .setting = want->spoofchk ? 1 : 0};
	struct nlattr *list, *info;
	if (nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    !(list = nla_nest_start(m, IFLA_VFINFO_LIST)) ||
	    !(info = nla_nest_start(m, IFLA_VF_INFO)) ||
	    nla_put(m, IFLA_VF_VLAN, sizeof(vlan), &vlan) < 0 ||
	    nla_put(m, IFLA_VF_SPOOFCHK, sizeof(sc), &sc) < 0) {
		nlmsg_free(m);
		return -ENOMEM;
	}
	nla_nest_end(m, info);
	nla_nest_end(m, list);
	*out = m;
	return 0;
}

int ovl_vf_msg_parse(struct nlmsghdr *h, unsigned vf, struct iso_overlay_vf *out)
{
	if (!nlmsg_valid_hdr(h, sizeof(struct ifinfomsg)))
		return -EBADMSG;
	struct nlattr *tb[IFLA_MAX + 1];
	if (nlmsg_parse(h, sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL) < 0)
		return -EBADMSG;
	if (!tb[IFLA_VFINFO_LIST])
		return -ENOENT;
	struct nlattr *info;
	int rem;
	nla_for_each_nested(info, tb[IFLA_VFINFO_LIST], rem)
	{
		if (nla_type(info) != IFLA_VF_INFO)
			continue;
		struct nlattr *vt[IFLA_VF_MAX + 1];
		if (nla_parse_nested(vt, IFLA_VF_MAX, info, NULL) < 0)
			return -EBADMSG;
		if (!vt[IFLA_VF_VLAN] ||
		    nla_len(vt[IFLA_VF_VLAN]) < (int)sizeof(struct ifla_vf_vlan))
			return -EBADMSG;
		struct ifla_vf_vlan vlan;
		memcpy(&vlan, nla_data(vt[IFLA_VF_VLAN]), sizeof(vlan));
		if (vlan.vf != vf)
			continue;
		memset(out, 0, sizeof(*out));
		out->vf = vf;
		out->vlan = vlan.vlan;
		out->qos = vlan.qos;
		if (vt[IFLA_VF_SPOOFCHK]) {
			if (nla_len(vt[IFLA_VF_SPOOFCHK]) < (int)sizeof(struct ifla_vf_spoofchk))
				return -EBADMSG;
			struct ifla_vf_spoofchk sc;
			memcpy(&sc, nla_data(vt[IFLA_VF_SPOOFCHK]), sizeof(sc));
			/* (u32)-1: the driver does not report it, counted as off */
			out->spoofchk = sc.setting == 1;
		}
		return 0;
	}
	return -ENOENT;
}

static int pf_index(struct nl_sock *sk, const char *netns, const char *pf, struct iso_error *err)
{
	(void)sk;
	if (!pf || !*pf || strlen(pf) >= ISO_OVERLAY_IFNAME)
		return iso_error_set(err, ISO_E_INVALID, "pf", "not an interface name");
	int saved;
	int r = ovl_ns_enter(netns, &saved, err);
	if (r < 0)
		return r;
	unsigned idx = if_nametoindex(pf);
	int e = errno;
	ovl_ns_leave(saved);
	if (!idx) {
		iso_error_set(err, ISO_E_NOT_FOUND, "pf", "no interface %s", pf);
		return -(e ? e : ENODEV);
	}
	return (int)idx;
}

int iso_overlay_vf_set(const char *netns, const char *pf, const struct iso_overlay_vf *want,
                       struct iso_error *err)
{
	int r = check_vf(want, err);
	if (r < 0)
		return r;
	_cleanup_nl_ struct nl_sock *sk = NULL;
	if ((r = ovl_nl_open(netns, &sk, err)) < 0)
		return r;
	int idx = pf_index(sk, netns, pf, err);
	if (idx < 0)
		return idx;
	struct iso_overlay_vf have = {0};
	if (iso_overlay_vf_read(netns, pf, want->vf, &have, NULL) == 0 && have.vlan == want->vlan &&
	    have.qos == want->qos && have.spoofchk == want->spoofchk)
		return 0; /* level-triggered */
	struct nl_msg *m = NULL;
	if (ovl_vf_msg_build(idx, want, &m) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vf", "out of memory");
	r = nl_send_sync(sk, m); /* frees m */
	if (r < 0) {
		int e = ovl_errno(r);
		iso_error_set(err, e == -EOPNOTSUPP ? ISO_E_UNAVAILABLE : ISO_E_INTERNAL, "vf",
		              "set VF %u of %s: %s", want->vf, pf, nl_geterror(r));
		return e;
	}
	if ((r = iso_overlay_vf_read(netns, pf, want->vf, &have, err)) < 0)
		return r;
	if (have.vlan != want->vlan || have.qos != want->qos || have.spoofchk != want->spoofchk) {
		iso_error_set(err, ISO_E_INTERNAL, "vf",
		              "VF %u of %s reads back vlan %u qos %u spoofchk %d", want->vf, pf,
		              have.vlan, have.qos, have.spoofchk);
		return -EIO;
	}
	return 0;
}

struct vf_reply {
	unsigned vf;
	int result; /* 1: not seen yet */
	struct iso_overlay_vf out;
};

static int vf_cb(struct nl_msg *msg, void *arg)
{
	struct vf_reply *rep = arg;
	struct nlmsghdr *h = nlmsg_hdr(msg);
	if (h->nlmsg_type == RTM_NEWLINK && rep->result == 1)
		rep->result = ovl_vf_msg_parse(h, rep->vf, &rep->out);
	return NL_OK;
}

int iso_overlay_vf_read(const char *netns, const char *pf, unsigned vf, struct iso_overlay_vf *out,
                        struct iso_error *err)
{
	_cleanup_nl_ struct nl_sock *sk = NULL;
	int r = ovl_nl_open(netns, &sk, err);
	if (r < 0)
		return r;
	int idx = pf_index(sk, netns, pf, err);
	if (idx < 0)
		return idx;
	struct nl_msg *m = nlmsg_alloc_simple(RTM_GETLINK, 0);
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = idx};
	if (!m || nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(m, IFLA_EXT_MASK, RTEXT_FILTER_VF) < 0) {
		if (m)
			nlmsg_free(m);
		return iso_error_set(err, ISO_E_INTERNAL, "vf", "out of memory");
	}
	r = nl_send_auto(sk, m);
	nlmsg_free(m);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vf", "netlink: %s", nl_geterror(r));
	struct vf_reply rep = {.vf = vf, .result = 1};
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb)
		return iso_error_set(err, ISO_E_INTERNAL, "vf", "out of memory");
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, vf_cb, &rep);
	r = nl_recvmsgs(sk, cb);
	nl_cb_put(cb);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vf", "netlink: %s", nl_geterror(r));
	if (rep.result == 1 || rep.result == -ENOENT) {
		iso_error_set(err, ISO_E_NOT_FOUND, "vf", "%s reports no VF %u", pf, vf);
		return -ENOENT;
	}
	if (rep.result < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vf", "malformed VF list from %s", pf);
	*out = rep.out;
	return 0;
}

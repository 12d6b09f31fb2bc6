/* overlay.c: the tenant overlay of Ethernet fabrics (issue 14), the kernel
 * side the node agent drives. Per tenant per node a bridge isobr<vni> and a
 * VXLAN device isovx<vni> on it (head-end replication: one all-zeros FDB
 * entry per peer node, no learning); per member a veth isov<hash> on the
 * bridge whose peer is eth0 in the member's network namespace. All of it
 * through rtnetlink (libnl-route-3), in the namespace given as a path, so
 * that tests use namespaces as hosts; level-triggered, and the state is
 * read back from the kernel, never from memory (the verifier relies on it).
 * The nft guard is overlay_guard.c, the RoCE VF's VLAN overlay_vf.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <netlink/cache.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet6.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/link/vxlan.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"
#include "sandbox/overlay_int.h"

#define VNI_MAX 0xffffffu

/* ---- namespaces and sockets ---- */

int ovl_ns_enter(const char *path, int *saved, struct iso_error *err)
{
	*saved = -1;
	if (!path)
		return 0;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		iso_error_set(err, e == ENOENT ? ISO_E_NOT_FOUND : ISO_E_INTERNAL, "netns",
		              "open %s: %s", path, strerror(e));
		return -e;
	}
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		int e = errno;
		iso_error_set(err, ISO_E_INTERNAL, "netns", "open own netns: %s", strerror(e));
		return -e;
	}
	if (setns(fd, CLONE_NEWNET) < 0) {
		int e = errno;
		close(self);
		iso_error_set(err, e == EPERM ? ISO_E_FORBIDDEN : ISO_E_INVALID, "netns",
		              "setns %s: %s", path, strerror(e));
		return -e;
	}
	*saved = self;
	return 0;
}

void ovl_ns_leave(int saved)
{
	if (saved < 0)
		return;
	/* Going back into our own namespace cannot fail short of the kernel
	 * losing it; a thread left elsewhere would act on the wrong host. */
	if (setns(saved, CLONE_NEWNET) < 0)
		abort();
	close(saved);
}

int ovl_errno(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case 0:
		return 0;
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_EXIST:
		return -EEXIST;
	case NLE_INVAL:
	case NLE_RANGE:
		return -EINVAL;
	case NLE_PERM:
		return -EPERM;
	case NLE_NODEV:
		return -ENODEV;
	case NLE_OBJ_NOTFOUND:
		return -ENOENT;
	case NLE_BUSY:
		return -EBUSY;
	case NLE_OPNOTSUPP:
		return -EOPNOTSUPP;
	case NLE_AGAIN:
		return -EAGAIN;
	case NLE_NOACCESS:
		return -EACCES;
	case NLE_AF_NOSUPPORT:
		return -EAFNOSUPPORT;
	default:
		return -EIO;
	}
}

void ovl_nl_closep(struct nl_sock **sk)
{
	if (*sk)
		nl_socket_free(*sk);
}

int ovl_nl_open(const char *netns, struct nl_sock **out, struct iso_error *err)
{
	*out = NULL;
	int saved;
	int r = ovl_ns_enter(netns, &saved, err);
	if (r < 0)
		return r;
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk) {
		ovl_ns_leave(saved);
		return iso_error_set(err, ISO_E_INTERNAL, "netns", "out of memory");
	}
	r = nl_connect(sk, NETLINK_ROUTE); /* the socket stays in the namespace */
	ovl_ns_leave(saved);
	if (r < 0) {
		nl_socket_free(sk);
		iso_error_set(err, ISO_E_INTERNAL, "netns", "netlink: %s", nl_geterror(r));
		return ovl_errno(r);
	}
	*out = sk;
	return 0;
}

static void linkp(struct rtnl_link **l)
{
	if (*l)
		rtnl_link_put(*l);
}
#define _cleanup_link_ _cleanup_(linkp)

static void addrp(struct nl_addr **a)
{
	if (*a)
		nl_addr_put(*a);
}
#define _cleanup_addr_ _cleanup_(addrp)

static void cachep(struct nl_cache **c)
{
	if (*c)
		nl_cache_free(*c);
}
#define _cleanup_cache_ _cleanup_(cachep)

static void msgp(struct nl_msg **m)
{
	if (*m)
		nlmsg_free(*m);
}
#define _cleanup_msg_ _cleanup_(msgp)

static int nl_fail(struct iso_error *err, int nlerr, const char *field, const char *what,
                   const char *name)
{
	int e = ovl_errno(nlerr);
	enum iso_errcode c = e == -EEXIST || e == -EBUSY    ? ISO_E_CONFLICT
	                     : e == -ENOENT || e == -ENODEV ? ISO_E_NOT_FOUND
	                     : e == -EPERM || e == -EACCES  ? ISO_E_FORBIDDEN
	                                                    : ISO_E_INTERNAL;
	iso_error_set(err, c, field, "%s %s: %s", what, name, nl_geterror(nlerr));
	return e;
}

/* The link named `name`, or NULL (0) when absent. */
static int get_link(struct nl_sock *sk, const char *name, struct rtnl_link **out,
                    struct iso_error *err)
{
	*out = NULL;
	int r = rtnl_link_get_kernel(sk, 0, name, out);
	if (r == -NLE_OBJ_NOTFOUND || r == -NLE_NODEV) {
		*out = NULL;
		return 0;
	}
	if (r < 0)
		return nl_fail(err, r, "netns", "read link", name);
	return 0;
}

static bool kind_is(struct rtnl_link *l, const char *kind)
{
	const char *t = rtnl_link_get_type(l);
	return t && strcmp(t, kind) == 0;
}

/* Brings an existing link to master/up/alias/mtu (master 0, alias NULL, mtu 0:
 * leave), writing nothing when it already is. */
static int tune_link(struct nl_sock *sk, struct rtnl_link *l, int master, const char *alias,
                     unsigned mtu, struct iso_error *err)
{
	_cleanup_link_ struct rtnl_link *ch = rtnl_link_alloc();
	if (!ch)
		return iso_error_set(err, ISO_E_INTERNAL, "netns", "out of memory");
	bool any = false;
	if (master > 0 && rtnl_link_get_master(l) != master) {
		rtnl_link_set_master(ch, master);
		any = true;
	}
	if (alias) {
		const char *have = rtnl_link_get_ifalias(l);
		if (!have || strcmp(have, alias) != 0) {
			rtnl_link_set_ifalias(ch, alias);
			any = true;
		}
	}
	if (mtu && rtnl_link_get_mtu(l) != mtu) {
		rtnl_link_set_mtu(ch, mtu);
		any = true;
	}
	if (!(rtnl_link_get_flags(l) & IFF_UP)) {
		rtnl_link_set_flags(ch, IFF_UP);
		any = true;
	}
	if (!any)
		return 0;
	int r = rtnl_link_change(sk, l, ch, 0);
	if (r < 0)
		return nl_fail(err, r, "netns", "change link", rtnl_link_get_name(l));
	return 0;
}

static int delete_link(struct nl_sock *sk, const char *name, struct iso_error *err)
{
	_cleanup_link_ struct rtnl_link *l = rtnl_link_alloc();
	if (!l)
		return iso_error_set(err, ISO_E_INTERNAL, "netns", "out of memory");
	rtnl_link_set_name(l, name);
	int r = rtnl_link_delete(sk, l);
	if (r < 0 && r != -NLE_OBJ_NOTFOUND && r != -NLE_NODEV)
		return nl_fail(err, r, "netns", "delete link", name);
	return 0;
}

/* The host's side of the overlay (bridge, VXLAN device, members' veths)
 * carries no address: no IPv6 link-local either, so that a member can
 * neither reach the host through its bridge nor hear the host's neighbour
 * discovery. */
static int no_addresses(struct nl_sock *sk, const char *name, struct iso_error *err)
{
	/* Before the link is first up (the kernel refuses IFLA_AF_SPEC while
	 * creating a link, and makes the link-local address at up). */
	_cleanup_link_ struct rtnl_link *l = NULL, *ch = rtnl_link_alloc();
	int r = get_link(sk, name, &l, err);
	if (r < 0)
		return r;
	if (!l || !ch)
		return iso_error_set(err, ISO_E_INTERNAL, "netns", "%s vanished", name);
	rtnl_link_inet6_set_addr_gen_mode(ch, rtnl_link_inet6_str2addrgenmode("none"));
	if ((r = rtnl_link_change(sk, l, ch, 0)) < 0)
		return nl_fail(err, r, "netns", "addrgenmode none on", name);
	return 0;
}

static void tenant_names(uint32_t vni, char br[ISO_OVERLAY_IFNAME], char vx[ISO_OVERLAY_IFNAME])
{
	snprintf(br, ISO_OVERLAY_IFNAME, "isobr%" PRIu32, vni);
	snprintf(vx, ISO_OVERLAY_IFNAME, "isovx%" PRIu32, vni);
}

/* ---- FDB: one all-zeros entry per peer ---- */

struct fdb_dump {
	int ifindex;
	size_t n;
	uint32_t dst[1024]; /* network order */
	bool overflow;
};

static int fdb_cb(struct nl_msg *msg, void *arg)
{
	struct fdb_dump *d = arg;
	struct nlmsghdr *h = nlmsg_hdr(msg);
	if (h->nlmsg_type != RTM_NEWNEIGH || !nlmsg_valid_hdr(h, sizeof(struct ndmsg)))
		return NL_OK;
	struct ndmsg *ndm = nlmsg_data(h);
	if (ndm->ndm_family != AF_BRIDGE || ndm->ndm_ifindex != d->ifindex)
		return NL_OK;
	struct nlattr *tb[NDA_MAX + 1];
	if (nlmsg_parse(h, sizeof(*ndm), tb, NDA_MAX, NULL) < 0)
		return NL_OK;
	static const unsigned char zero[6];
	if (!tb[NDA_LLADDR] || nla_len(tb[NDA_LLADDR]) != 6 ||
	    memcmp(nla_data(tb[NDA_LLADDR]), zero, 6) != 0)
		return NL_OK;
	if (!tb[NDA_DST] || nla_len(tb[NDA_DST]) != 4)
		return NL_OK;
	if (d->n == ISO_ARRAY_SIZE(d->dst)) {
		d->overflow = true;
		return NL_OK;
	}
	memcpy(&d->dst[d->n++], nla_data(tb[NDA_DST]), 4);
	return NL_OK;
}

static int fdb_read(struct nl_sock *sk, int ifindex, struct fdb_dump *d, struct iso_error *err)
{
	memset(d, 0, sizeof(*d));
	d->ifindex = ifindex;
	_cleanup_msg_ struct nl_msg *m = nlmsg_alloc_simple(RTM_GETNEIGH, NLM_F_DUMP);
	struct ndmsg ndm = {.ndm_family = AF_BRIDGE};
	if (!m || nlmsg_append(m, &ndm, sizeof(ndm), NLMSG_ALIGNTO) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "netns", "out of memory");
	int r = nl_send_auto(sk, m);
	if (r < 0)
		return nl_fail(err, r, "netns", "dump", "fdb");
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb)
		return iso_error_set(err, ISO_E_INTERNAL, "netns", "out of memory");
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, fdb_cb, d);
	r = nl_recvmsgs(sk, cb);
	nl_cb_put(cb);
	if (r < 0)
		return nl_fail(err, r, "netns", "dump", "fdb");
	if (d->overflow)
		return iso_error_set(err, ISO_E_INTERNAL, "peers", "more than %zu FDB entries",
		                     ISO_ARRAY_SIZE(d->dst));
	return 0;
}

static int fdb_change(struct nl_sock *sk, int ifindex, uint32_t dst, bool add,
                      struct iso_error *err)
{
	_cleanup_msg_ struct nl_msg *m = nlmsg_alloc_simple(add ? RTM_NEWNEIGH : RTM_DELNEIGH,
	                                                    add ? NLM_F_CREATE | NLM_F_APPEND : 0);
	struct ndmsg ndm = {
	    .ndm_family = AF_BRIDGE,
	    .ndm_ifindex = ifindex,
	    .ndm_state = NUD_NOARP | NUD_PERMANENT,
	    .ndm_flags = NTF_SELF,
	};
	static const unsigned char zero[6];
	if (!m || nlmsg_append(m, &ndm, sizeof(ndm), NLMSG_ALIGNTO) < 0 ||
	    nla_put(m, NDA_LLADDR, 6, zero) < 0 || nla_put(m, NDA_DST, 4, &dst) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "peers", "out of memory");
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &dst, ip, sizeof(ip));
	int r = nl_send_sync(sk, ISO_TAKE(m)); /* frees the message */
	if (r < 0 && !(add && r == -NLE_EXIST) && !(!add && r == -NLE_OBJ_NOTFOUND))
		return nl_fail(err, r, "peers", add ? "add fdb entry" : "delete fdb entry", ip);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = ntohl(*(const uint32_t *)a), y = ntohl(*(const uint32_t *)b);
	return x < y ? -1 : x > y;
}

static int fdb_sync(struct nl_sock *sk, int ifindex, const uint32_t *want, size_t n_want,
                    struct iso_error *err)
{
	struct fdb_dump dump, *have = &dump; /* 4 KiB */
	int r = fdb_read(sk, ifindex, have, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < have->n; i++) {
		bool keep = false;
		for (size_t j = 0; j < n_want && !keep; j++)
			keep = want[j] == have->dst[i];
		if (!keep && (r = fdb_change(sk, ifindex, have->dst[i], false, err)) < 0)
			return r;
	}
	for (size_t j = 0; j < n_want; j++) {
		bool there = false;
		for (size_t i = 0; i < have->n && !there; i++)
			there = want[j] == have->dst[i];
		for (size_t k = 0; k < j && !there; k++)
			there = want[k] == want[j]; /* a duplicate in the spec */
		if (!there && (r = fdb_change(sk, ifindex, want[j], true, err)) < 0)
			return r;
	}
	return 0;
}

/* ---- tenants ---- */

static int parse_ip(const char *s, const char *field, uint32_t *be, struct iso_error *err)
{
	uint32_t h;
	*be = 0;
	if (!s || iso_parse_ipv4(s, &h) < 0)
		return iso_error_set(err, ISO_E_INVALID, field, "not an IPv4 address: \"%s\"",
		                     s ? s : "(null)");
	*be = htonl(h);
	return 0;
}

static int check_ifname(const char *s, const char *field, struct iso_error *err)
{
	if (!s || !*s || strlen(s) >= ISO_OVERLAY_IFNAME || strchr(s, '/') || strchr(s, ' '))
		return iso_error_set(err, ISO_E_INVALID, field, "not an interface name");
	return 0;
}

/* True when the VXLAN device l is exactly what the spec asks. */
static bool vxlan_matches(struct rtnl_link *l, uint32_t vni, uint32_t local_be, int under)
{
	if (!kind_is(l, "vxlan"))
		return false;
	uint32_t id = 0, port = 0, link = 0;
	_cleanup_addr_ struct nl_addr *loc = NULL;
	if (rtnl_link_vxlan_get_id(l, &id) < 0 || id != vni)
		return false;
	if (rtnl_link_vxlan_get_port(l, &port) < 0 || port != ISO_OVERLAY_PORT)
		return false;
	if (rtnl_link_vxlan_get_learning(l) != 0)
		return false;
	if (rtnl_link_vxlan_get_link(l, &link) < 0 || (int)link != under)
		return false;
	if (rtnl_link_vxlan_get_local(l, &loc) < 0 || !loc || nl_addr_get_len(loc) != 4 ||
	    memcmp(nl_addr_get_binary_addr(loc), &local_be, 4) != 0)
		return false;
	return true;
}

int iso_overlay_tenant_ensure(const char *netns, const struct iso_overlay_tenant *t,
                              struct iso_error *err)
{
	if (!t || t->vni == 0 || t->vni > VNI_MAX)
		return iso_error_set(err, ISO_E_INVALID, "vni", "must be 1..16777215");
	/* A tenant with no peer needs no tunnel: with no underlay given, only
	 * its bridge (a VXLAN device left from before goes). */
	bool local_only = (!t->local_ip || !*t->local_ip) && t->n_peers == 0;
	int r = 0;
	uint32_t local = 0;
	if (!local_only && ((r = check_ifname(t->underlay_dev, "underlay_dev", err)) < 0 ||
	                    (r = parse_ip(t->local_ip, "local_ip", &local, err)) < 0))
		return r;
	if (t->n_peers > 1024)
		return iso_error_set(err, ISO_E_INVALID, "peers", "more than 1024 peers");
	uint32_t peers[1024];
	for (size_t i = 0; i < t->n_peers; i++) {
		char field[32];
		snprintf(field, sizeof(field), "peers[%zu]", i);
		if ((r = parse_ip(t->peers[i], field, &peers[i], err)) < 0)
			return r;
		if (peers[i] == local)
			return iso_error_set(err, ISO_E_INVALID, field, "the node's own address");
	}

	_cleanup_nl_ struct nl_sock *sk = NULL;
	if ((r = ovl_nl_open(netns, &sk, err)) < 0)
		return r;
	_cleanup_link_ struct rtnl_link *under = NULL;
	if (!local_only && (r = get_link(sk, t->underlay_dev, &under, err)) < 0)
		return r;
	if (!local_only && !under) {
		iso_error_set(err, ISO_E_NOT_FOUND, "underlay_dev", "no interface %s",
		              t->underlay_dev);
		return -ENODEV;
	}
	int under_idx = under ? rtnl_link_get_ifindex(under) : 0;

	char brname[ISO_OVERLAY_IFNAME], vxname[ISO_OVERLAY_IFNAME];
	tenant_names(t->vni, brname, vxname);

	_cleanup_link_ struct rtnl_link *br = NULL;
	if ((r = get_link(sk, brname, &br, err)) < 0)
		return r;
	if (br && !kind_is(br, "bridge")) {
		iso_error_set(err, ISO_E_CONFLICT, "vni", "%s exists and is not a bridge", brname);
		return -EEXIST;
	}
	if (!br) {
		_cleanup_link_ struct rtnl_link *nb = rtnl_link_alloc();
		if (!nb)
			return iso_error_set(err, ISO_E_INTERNAL, "vni", "out of memory");
		rtnl_link_set_name(nb, brname);
		if ((r = rtnl_link_set_type(nb, "bridge")) < 0)
			return nl_fail(err, r, "vni", "bridge type for", brname);
		if ((r = rtnl_link_add(sk, nb, NLM_F_CREATE | NLM_F_EXCL)) < 0)
			return nl_fail(err, r, "vni", "create", brname);
		if ((r = no_addresses(sk, brname, err)) < 0)
			return r;
		if ((r = get_link(sk, brname, &br, err)) < 0)
			return r;
		if (!br)
			return iso_error_set(err, ISO_E_INTERNAL, "vni", "%s vanished", brname);
	}
	if ((r = tune_link(sk, br, 0, NULL, 0, err)) < 0)
		return r;
	int br_idx = rtnl_link_get_ifindex(br);
	if (local_only)
		return delete_link(sk, vxname, err);

	_cleanup_link_ struct rtnl_link *vx = NULL;
	if ((r = get_link(sk, vxname, &vx, err)) < 0)
		return r;
	if (vx && !vxlan_matches(vx, t->vni, local, under_idx)) {
		/* VNI, local address, port and device cannot all be changed in
		 * place: a device that differs is made again. */
		if ((r = delete_link(sk, vxname, err)) < 0)
			return r;
		rtnl_link_put(vx);
		vx = NULL;
	}
	if (!vx) {
		_cleanup_link_ struct rtnl_link *nv = rtnl_link_vxlan_alloc();
		_cleanup_addr_ struct nl_addr *la = nl_addr_build(AF_INET, &local, 4);
		if (!nv || !la)
			return iso_error_set(err, ISO_E_INTERNAL, "vni", "out of memory");
		rtnl_link_set_name(nv, vxname);
		if (rtnl_link_vxlan_set_id(nv, t->vni) < 0 ||
		    rtnl_link_vxlan_set_local(nv, la) < 0 ||
		    rtnl_link_vxlan_set_port(nv, ISO_OVERLAY_PORT) < 0 ||
		    rtnl_link_vxlan_set_learning(nv, 0) < 0 ||
		    rtnl_link_vxlan_set_link(nv, (uint32_t)under_idx) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "vni", "vxlan attributes");
		if ((r = rtnl_link_add(sk, nv, NLM_F_CREATE | NLM_F_EXCL)) < 0)
			return nl_fail(err, r, "vni", "create", vxname);
		if ((r = no_addresses(sk, vxname, err)) < 0)
			return r;
		if ((r = get_link(sk, vxname, &vx, err)) < 0)
			return r;
		if (!vx)
			return iso_error_set(err, ISO_E_INTERNAL, "vni", "%s vanished", vxname);
	}
	if ((r = tune_link(sk, vx, br_idx, NULL, 0, err)) < 0)
		return r;
	return fdb_sync(sk, rtnl_link_get_ifindex(vx), peers, t->n_peers, err);
}

/* True when a member's veth (isov..., not isovx...) is a port of ifindex br. */
static bool is_member_port(struct rtnl_link *l, int br)
{
	const char *n = rtnl_link_get_name(l);
	return n && strncmp(n, "isov", 4) == 0 && strncmp(n, "isovx", 5) != 0 &&
	       kind_is(l, "veth") && rtnl_link_get_master(l) == br;
}

int iso_overlay_tenant_remove(const char *netns, uint32_t vni, struct iso_error *err)
{
	if (vni == 0 || vni > VNI_MAX)
		return iso_error_set(err, ISO_E_INVALID, "vni", "must be 1..16777215");
	_cleanup_nl_ struct nl_sock *sk = NULL;
	int r = ovl_nl_open(netns, &sk, err);
	if (r < 0)
		return r;
	char brname[ISO_OVERLAY_IFNAME], vxname[ISO_OVERLAY_IFNAME];
	tenant_names(vni, brname, vxname);
	_cleanup_link_ struct rtnl_link *br = NULL;
	if ((r = get_link(sk, brname, &br, err)) < 0)
		return r;
	if (br) {
		_cleanup_cache_ struct nl_cache *links = NULL;
		if ((r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &links)) < 0)
			return nl_fail(err, r, "netns", "dump", "links");
		int idx = rtnl_link_get_ifindex(br);
		for (struct nl_object *o = nl_cache_get_first(links); o; o = nl_cache_get_next(o))
			if (is_member_port((struct rtnl_link *)o, idx)) {
				iso_error_set(err, ISO_E_CONFLICT, "vni",
				              "member %s is still on %s",
				              rtnl_link_get_name((struct rtnl_link *)o), brname);
				return -EBUSY;
			}
	}
	if ((r = delete_link(sk, vxname, err)) < 0)
		return r;
	return br ? delete_link(sk, brname, err) : 0;
}

/* ---- members ---- */

int iso_overlay_address(unsigned node_index, unsigned slot, char out[ISO_IPV4_MAX],
                        struct iso_error *err)
{
	if (node_index > 65535)
		return iso_error_set(err, ISO_E_INVALID, "node_index", "must be 0..65535");
	if (slot > ISO_OVERLAY_SLOT_MAX)
		return iso_error_set(err, ISO_E_INVALID, "slot", "must be 0..%d",
		                     ISO_OVERLAY_SLOT_MAX);
	snprintf(out, ISO_IPV4_MAX, "10.%u.%u.%u", node_index / 256, node_index % 256, slot + 2);
	return 0;
}

void iso_overlay_veth_name(const char *name, char out[ISO_OVERLAY_IFNAME])
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	snprintf(out, ISO_OVERLAY_IFNAME, "isov%08" PRIx32, h);
}

static void addrobjp(struct rtnl_addr **a)
{
	if (*a)
		rtnl_addr_put(*a);
}

/* The member's interface (eth0, or a CNI attachment's CNI_IFNAME) in its
 * namespace: up, the MTU, exactly one IPv4 address (/plen). */
static int tune_eth0(struct nl_sock *msk, struct rtnl_link *eth0, uint32_t want_be, unsigned plen,
                     unsigned mtu, struct iso_error *err)
{
	int r = tune_link(msk, eth0, 0, NULL, mtu, err);
	if (r < 0)
		return r;
	_cleanup_cache_ struct nl_cache *addrs = NULL;
	if ((r = rtnl_addr_alloc_cache(msk, &addrs)) < 0)
		return nl_fail(err, r, "member_netns", "dump", "addresses");
	int idx = rtnl_link_get_ifindex(eth0);
	bool have = false;
	for (struct nl_object *o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		if (rtnl_addr_get_ifindex(a) != idx || rtnl_addr_get_family(a) != AF_INET)
			continue;
		struct nl_addr *l = rtnl_addr_get_local(a);
		if (l && nl_addr_get_len(l) == 4 && rtnl_addr_get_prefixlen(a) == (int)plen &&
		    memcmp(nl_addr_get_binary_addr(l), &want_be, 4) == 0) {
			have = true;
			continue;
		}
		if ((r = rtnl_addr_delete(msk, a, 0)) < 0)
			return nl_fail(err, r, "member_netns", "delete address on", "eth0");
	}
	if (have)
		return 0;
	_cleanup_(addrobjp) struct rtnl_addr *na = rtnl_addr_alloc();
	_cleanup_addr_ struct nl_addr *la = nl_addr_build(AF_INET, &want_be, 4);
	if (!na || !la)
		return iso_error_set(err, ISO_E_INTERNAL, "member_netns", "out of memory");
	nl_addr_set_prefixlen(la, (int)plen);
	rtnl_addr_set_ifindex(na, idx);
	rtnl_addr_set_family(na, AF_INET);
	if ((r = rtnl_addr_set_local(na, la)) < 0)
		return nl_fail(err, r, "member_netns", "address for", "eth0");
	if ((r = rtnl_addr_add(msk, na, 0)) < 0)
		return nl_fail(err, r, "member_netns", "add address to", "eth0");
	return 0;
}

int iso_overlay_link_move(const char *from, const char *name, const char *to, const char *newname,
                          const char *address, struct iso_error *err)
{
	uint32_t want_be = 0;
	unsigned plen = 0;
	int r;

	if (!name || !*name || strlen(name) >= IFNAMSIZ || !newname || !*newname ||
	    strlen(newname) >= IFNAMSIZ)
		return iso_error_set(err, ISO_E_INVALID, "ifname", "not an interface name");
	if (address && *address) {
		char ip[ISO_IPV4_MAX];
		const char *slash = strchr(address, '/');
		char *end = NULL;
		unsigned long n = slash ? strtoul(slash + 1, &end, 10) : 99;
		if (!slash || (size_t)(slash - address) >= sizeof(ip) || end == slash + 1 || *end ||
		    n < 1 || n > 32)
			return iso_error_set(err, ISO_E_INVALID, "address",
			                     "address: expected A.B.C.D/N");
		memcpy(ip, address, (size_t)(slash - address));
		ip[slash - address] = '\0';
		if ((r = parse_ip(ip, "address", &want_be, err)) < 0)
			return r;
		plen = (unsigned)n;
	}
	_cleanup_nl_ struct nl_sock *sk = NULL;
	if ((r = ovl_nl_open(from, &sk, err)) < 0)
		return r;
	_cleanup_link_ struct rtnl_link *l = NULL;
	if ((r = get_link(sk, name, &l, err)) < 0)
		return r;
	if (!l) {
		iso_error_set(err, ISO_E_NOT_FOUND, "ifname", "no interface %s%s%s", name,
		              from ? " in " : "", from ? from : "");
		return -ENODEV;
	}
	_cleanup_close_ int tfd = open(to ? to : "/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (tfd < 0) {
		int e = errno;
		iso_error_set(err, e == ENOENT ? ISO_E_NOT_FOUND : ISO_E_INTERNAL, "netns",
		              "open %s: %s", to ? to : "the agent's netns", strerror(e));
		return -e;
	}
	/* a rename needs the link down: down, renamed and moved in one change */
	_cleanup_link_ struct rtnl_link *ch = rtnl_link_alloc();
	if (!ch)
		return iso_error_set(err, ISO_E_INTERNAL, "ifname", "out of memory");
	if (rtnl_link_get_flags(l) & IFF_UP) {
		_cleanup_link_ struct rtnl_link *dn = rtnl_link_alloc();
		if (!dn)
			return iso_error_set(err, ISO_E_INTERNAL, "ifname", "out of memory");
		rtnl_link_unset_flags(dn, IFF_UP);
		if ((r = rtnl_link_change(sk, l, dn, 0)) < 0)
			return nl_fail(err, r, "ifname", "set down", name);
	}
	rtnl_link_set_name(ch, newname);
	rtnl_link_set_ns_fd(ch, tfd);
	if ((r = rtnl_link_change(sk, l, ch, 0)) < 0)
		return nl_fail(err, r, "ifname", "move", name);
	_cleanup_nl_ struct nl_sock *tsk = NULL;
	if ((r = ovl_nl_open(to, &tsk, err)) < 0)
		return r;
	_cleanup_link_ struct rtnl_link *m = NULL;
	if ((r = get_link(tsk, newname, &m, err)) < 0)
		return r;
	if (!m) {
		iso_error_set(err, ISO_E_INTERNAL, "ifname", "%s not found after the move",
		              newname);
		return -ENODEV;
	}
	if (plen)
		return tune_eth0(tsk, m, want_be, plen, 0, err);
	return tune_link(tsk, m, 0, NULL, 0, err);
}

int iso_overlay_member_ensure(const char *netns, const struct iso_overlay_member *m,
                              struct iso_error *err)
{
	if (!m || !m->name || !iso_name_valid(m->name))
		return iso_error_set(err, ISO_E_INVALID, "name", "not a sandbox name");
	if (m->vni == 0 || m->vni > VNI_MAX)
		return iso_error_set(err, ISO_E_INVALID, "vni", "must be 1..16777215");
	if (!m->member_netns || !*m->member_netns)
		return iso_error_set(err, ISO_E_INVALID, "member_netns", "missing");
	const char *ifn = m->ifname ? m->ifname : "eth0";
	char ip[ISO_IPV4_MAX];
	unsigned plen = 8;
	uint32_t want_be = 0;
	int r;
	if ((r = check_ifname(ifn, "ifname", err)) < 0)
		return r;
	if (m->address) {
		/* an address of the attachment's IPAM: "A.B.C.D/N" */
		const char *slash = strchr(m->address, '/');
		char *end = NULL;
		unsigned long pl = slash ? strtoul(slash + 1, &end, 10) : 0;
		if (!slash || (size_t)(slash - m->address) >= sizeof(ip) || !slash[1] || *end ||
		    pl < 1 || pl > 32)
			return iso_error_set(err, ISO_E_INVALID, "address",
			                     "address: expected A.B.C.D/N");
		memcpy(ip, m->address, (size_t)(slash - m->address));
		ip[slash - m->address] = '\0';
		plen = (unsigned)pl;
		if ((r = parse_ip(ip, "address", &want_be, err)) < 0)
			return r;
	} else {
		if ((r = iso_overlay_address(m->node_index, m->slot, ip, err)) < 0)
			return r;
		if ((r = parse_ip(ip, "slot", &want_be, err)) < 0)
			return r;
	}

	_cleanup_nl_ struct nl_sock *sk = NULL, *msk = NULL;
	if ((r = ovl_nl_open(netns, &sk, err)) < 0)
		return r;
	if ((r = ovl_nl_open(m->member_netns, &msk, err)) < 0) {
		if (err)
			iso_strlcpy(err->field, "member_netns", sizeof(err->field));
		return r;
	}
	char brname[ISO_OVERLAY_IFNAME], vxname[ISO_OVERLAY_IFNAME], vname[ISO_OVERLAY_IFNAME];
	tenant_names(m->vni, brname, vxname);
	iso_overlay_veth_name(m->name, vname);
	_cleanup_link_ struct rtnl_link *br = NULL, *vx = NULL, *veth = NULL, *eth0 = NULL;
	if ((r = get_link(sk, brname, &br, err)) < 0 || (r = get_link(sk, vxname, &vx, err)) < 0)
		return r;
	if (!br || !kind_is(br, "bridge")) {
		iso_error_set(err, ISO_E_NOT_FOUND, "vni", "no bridge %s: ensure the tenant first",
		              brname);
		return -ENOENT;
	}
	/* The members' MTU is the VXLAN device's (underlay less 50): a bridge
	 * drops a frame too large for the port it leaves by. */
	unsigned mtu = vx ? rtnl_link_get_mtu(vx) : 0;

	if ((r = get_link(sk, vname, &veth, err)) < 0 || (r = get_link(msk, ifn, &eth0, err)) < 0)
		return r;
	if (veth) {
		const char *alias = rtnl_link_get_ifalias(veth);
		if (!kind_is(veth, "veth") || (alias && strcmp(alias, m->name) != 0)) {
			iso_error_set(err, ISO_E_CONFLICT, "name", "%s is held by %s", vname,
			              alias ? alias : "another interface");
			return -EEXIST;
		}
		/* Its peer must be this namespace's eth0 (a sandbox made again
		 * has a new namespace: the old veth is made again too). */
		bool ours = eth0 && rtnl_link_get_link(veth) == rtnl_link_get_ifindex(eth0) &&
		            kind_is(eth0, "veth");
		if (!ours) {
			if ((r = delete_link(sk, vname, err)) < 0)
				return r;
			rtnl_link_put(veth);
			veth = NULL;
			if (eth0) {
				rtnl_link_put(eth0);
				eth0 = NULL;
				if ((r = get_link(msk, ifn, &eth0, err)) < 0)
					return r;
			}
		}
	}
	if (!veth) {
		if (eth0) {
			iso_error_set(err, ISO_E_CONFLICT, "member_netns",
			              "the member's namespace already has an %s", ifn);
			return -EEXIST;
		}
		_cleanup_close_ int mfd = open(m->member_netns, O_RDONLY | O_CLOEXEC);
		if (mfd < 0) {
			int e = errno;
			iso_error_set(err, ISO_E_NOT_FOUND, "member_netns", "open %s: %s",
			              m->member_netns, strerror(e));
			return -e;
		}
		_cleanup_link_ struct rtnl_link *nv = rtnl_link_veth_alloc();
		if (!nv)
			return iso_error_set(err, ISO_E_INTERNAL, "name", "out of memory");
		rtnl_link_set_name(nv, vname);
		struct rtnl_link *peer = rtnl_link_veth_get_peer(nv);
		rtnl_link_set_name(peer, ifn);
		rtnl_link_set_ns_fd(peer, mfd);
		if (mtu) {
			rtnl_link_set_mtu(nv, mtu);
			rtnl_link_set_mtu(peer, mtu);
		}
		rtnl_link_put(peer);
		if ((r = rtnl_link_add(sk, nv, NLM_F_CREATE | NLM_F_EXCL)) < 0)
			return nl_fail(err, r, "name", "create", vname);
		if ((r = no_addresses(sk, vname, err)) < 0)
			return r;
		if ((r = get_link(sk, vname, &veth, err)) < 0 ||
		    (r = get_link(msk, ifn, &eth0, err)) < 0)
			return r;
		if (!veth || !eth0)
			return iso_error_set(err, ISO_E_INTERNAL, "name", "%s vanished", vname);
	}
	if ((r = tune_link(sk, veth, rtnl_link_get_ifindex(br), m->name, mtu, err)) < 0)
		return r;
	return tune_eth0(msk, eth0, want_be, plen, mtu, err);
}

int iso_overlay_member_remove(const char *netns, const char *name, struct iso_error *err)
{
	if (!name || !iso_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, "name", "not a sandbox name");
	_cleanup_nl_ struct nl_sock *sk = NULL;
	int r = ovl_nl_open(netns, &sk, err);
	if (r < 0)
		return r;
	char vname[ISO_OVERLAY_IFNAME];
	iso_overlay_veth_name(name, vname);
	_cleanup_link_ struct rtnl_link *veth = NULL;
	if ((r = get_link(sk, vname, &veth, err)) < 0)
		return r;
	if (!veth)
		return 0;
	const char *alias = rtnl_link_get_ifalias(veth);
	if (alias && strcmp(alias, name) != 0) {
		iso_error_set(err, ISO_E_CONFLICT, "name", "%s belongs to %s", vname, alias);
		return -EEXIST;
	}
	return delete_link(sk, vname, err);
}

int iso_overlay_member_address(const char *member_netns, char out[ISO_IPV4_MAX],
                               struct iso_error *err)
{
	struct iso_overlay_member_link l;
	int r = iso_overlay_member_link_read(member_netns, NULL, &l, err);

	out[0] = '\0';
	if (r == 0)
		iso_strlcpy(out, l.address, ISO_IPV4_MAX);
	return r;
}

int iso_overlay_member_link_read(const char *member_netns, const char *ifname,
                                 struct iso_overlay_member_link *out, struct iso_error *err)
{
	const char *ifn = ifname ? ifname : "eth0";
	memset(out, 0, sizeof(*out));
	_cleanup_nl_ struct nl_sock *msk = NULL;
	int r = ovl_nl_open(member_netns, &msk, err);
	if (r < 0)
		return r;
	_cleanup_link_ struct rtnl_link *eth0 = NULL;
	if ((r = get_link(msk, ifn, &eth0, err)) < 0)
		return r;
	if (!eth0) {
		iso_error_set(err, ISO_E_NOT_FOUND, "member_netns", "no %s", ifn);
		return -ENODEV;
	}
	struct nl_addr *mac = rtnl_link_get_addr(eth0);
	if (mac && nl_addr_get_len(mac) == 6) {
		const unsigned char *b = nl_addr_get_binary_addr(mac);
		snprintf(out->mac, sizeof(out->mac), "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1],
		         b[2], b[3], b[4], b[5]);
	}
	out->up = (rtnl_link_get_flags(eth0) & IFF_UP) != 0;
	_cleanup_cache_ struct nl_cache *addrs = NULL;
	if ((r = rtnl_addr_alloc_cache(msk, &addrs)) < 0)
		return nl_fail(err, r, "member_netns", "dump", "addresses");
	for (struct nl_object *o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		struct nl_addr *l = rtnl_addr_get_local(a);
		if (rtnl_addr_get_ifindex(a) == rtnl_link_get_ifindex(eth0) &&
		    rtnl_addr_get_family(a) == AF_INET && l && nl_addr_get_len(l) == 4) {
			inet_ntop(AF_INET, nl_addr_get_binary_addr(l), out->address, ISO_IPV4_MAX);
			out->prefixlen = (unsigned)rtnl_addr_get_prefixlen(a);
			break;
		}
	}
	return 0;
}

int iso_overlay_underlay_dev(const char *netns, const char *ip, char out[ISO_OVERLAY_IFNAME],
                             struct iso_error *err)
{
	out[0] = '\0';
	uint32_t want_be = 0;
	int r = parse_ip(ip, "underlay_ip", &want_be, err);
	if (r < 0)
		return r;
	_cleanup_nl_ struct nl_sock *sk = NULL;
	if ((r = ovl_nl_open(netns, &sk, err)) < 0)
		return r;
	_cleanup_cache_ struct nl_cache *addrs = NULL, *links = NULL;
	if ((r = rtnl_addr_alloc_cache(sk, &addrs)) < 0 ||
	    (r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &links)) < 0)
		return nl_fail(err, r, "netns", "dump", "addresses");
	for (struct nl_object *o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		struct nl_addr *l = rtnl_addr_get_local(a);
		if (rtnl_addr_get_family(a) != AF_INET || !l || nl_addr_get_len(l) != 4 ||
		    memcmp(nl_addr_get_binary_addr(l), &want_be, 4) != 0)
			continue;
		if (rtnl_link_i2name(links, rtnl_addr_get_ifindex(a), out, ISO_OVERLAY_IFNAME))
			return 0;
	}
	iso_error_set(err, ISO_E_NOT_FOUND, "underlay_ip", "no interface holds %s", ip);
	return -ENODEV;
}

/* ---- read back ---- */

void iso_overlay_state_clear(struct iso_overlay_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_tenants; i++) {
		free(st->tenants[i].peers);
		free(st->tenants[i].members);
	}
	free(st->tenants);
	memset(st, 0, sizeof(*st));
}

static int cmp_tenant(const void *a, const void *b)
{
	const struct iso_overlay_tenant_state *x = a, *y = b;
	return x->vni < y->vni ? -1 : x->vni > y->vni;
}

static int cmp_member(const void *a, const void *b)
{
	return strcmp(((const struct iso_overlay_member_state *)a)->name,
	              ((const struct iso_overlay_member_state *)b)->name);
}

/* Fills t from the bridge at index br and the links of cache. */
static int read_tenant(struct nl_sock *sk, struct nl_cache *links, struct rtnl_link *brl,
                       struct iso_overlay_tenant_state *t, struct iso_error *err)
{
	int br = rtnl_link_get_ifindex(brl);
	iso_strlcpy(t->bridge, rtnl_link_get_name(brl), sizeof(t->bridge));
	t->up = rtnl_link_get_flags(brl) & IFF_UP;
	/* The VNI from the name until a VXLAN device says otherwise. */
	t->vni = (uint32_t)strtoul(t->bridge + 5, NULL, 10);
	size_t cap = 0;
	for (struct nl_object *o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
		struct rtnl_link *l = (struct rtnl_link *)o;
		if (rtnl_link_get_master(l) != br)
			continue;
		if (kind_is(l, "vxlan") && !t->vxlan_present) {
			uint32_t id = 0, port = 0;
			t->vxlan_present = true;
			iso_strlcpy(t->vxlan, rtnl_link_get_name(l), sizeof(t->vxlan));
			if (rtnl_link_vxlan_get_id(l, &id) == 0)
				t->vni = id;
			if (rtnl_link_vxlan_get_port(l, &port) == 0)
				t->port = port;
			t->learning = rtnl_link_vxlan_get_learning(l) > 0;
			t->up = t->up && (rtnl_link_get_flags(l) & IFF_UP);
			_cleanup_addr_ struct nl_addr *loc = NULL;
			if (rtnl_link_vxlan_get_local(l, &loc) == 0 && loc &&
			    nl_addr_get_len(loc) == 4)
				inet_ntop(AF_INET, nl_addr_get_binary_addr(loc), t->local_ip,
				          sizeof(t->local_ip));
			struct fdb_dump dump, *d = &dump; /* 4 KiB */
			int r = fdb_read(sk, rtnl_link_get_ifindex(l), d, err);
			if (r < 0)
				return r;
			qsort(d->dst, d->n, sizeof(d->dst[0]), cmp_u32);
			t->peers = calloc(d->n ? d->n : 1, sizeof(*t->peers));
			if (!t->peers)
				return iso_error_set(err, ISO_E_INTERNAL, "overlay",
				                     "out of memory");
			for (size_t i = 0; i < d->n; i++)
				inet_ntop(AF_INET, &d->dst[i], t->peers[i], ISO_IPV4_MAX);
			t->n_peers = d->n;
		} else if (is_member_port(l, br)) {
			if (t->n_members == cap) {
				cap = cap ? 2 * cap : 8;
				void *p = realloc(t->members, cap * sizeof(*t->members));
				if (!p)
					return iso_error_set(err, ISO_E_INTERNAL, "overlay",
					                     "out of memory");
				t->members = p;
			}
			struct iso_overlay_member_state *ms = &t->members[t->n_members++];
			memset(ms, 0, sizeof(*ms));
			iso_strlcpy(ms->ifname, rtnl_link_get_name(l), sizeof(ms->ifname));
			const char *alias = rtnl_link_get_ifalias(l);
			iso_strlcpy(ms->name, alias ? alias : "", sizeof(ms->name));
			ms->up = rtnl_link_get_flags(l) & IFF_UP;
		}
	}
	if (t->n_members)
		qsort(t->members, t->n_members, sizeof(*t->members), cmp_member);
	return 0;
}

int iso_overlay_read(const char *netns, struct iso_overlay_state *out, struct iso_error *err)
{
	memset(out, 0, sizeof(*out));
	_cleanup_nl_ struct nl_sock *sk = NULL;
	int r = ovl_nl_open(netns, &sk, err);
	if (r < 0)
		return r;
	_cleanup_cache_ struct nl_cache *links = NULL;
	if ((r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &links)) < 0)
		return nl_fail(err, r, "netns", "dump", "links");
	struct iso_overlay_state st = {0};
	size_t cap = 0;
	for (struct nl_object *o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
		struct rtnl_link *l = (struct rtnl_link *)o;
		const char *n = rtnl_link_get_name(l);
		if (!n || strncmp(n, "isobr", 5) != 0 || !kind_is(l, "bridge"))
			continue;
		if (st.n_tenants == cap) {
			cap = cap ? 2 * cap : 8;
			void *p = realloc(st.tenants, cap * sizeof(*st.tenants));
			if (!p) {
				iso_overlay_state_clear(&st);
				return iso_error_set(err, ISO_E_INTERNAL, "overlay",
				                     "out of memory");
			}
			st.tenants = p;
		}
		struct iso_overlay_tenant_state *t = &st.tenants[st.n_tenants++];
		memset(t, 0, sizeof(*t));
		if ((r = read_tenant(sk, links, l, t, err)) < 0) {
			iso_overlay_state_clear(&st);
			return r;
		}
	}
	if (st.n_tenants)
		qsort(st.tenants, st.n_tenants, sizeof(*st.tenants), cmp_tenant);
	*out = st;
	return 0;
}

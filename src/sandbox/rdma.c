/* rdma.c: a member's RDMA device in its own net namespace (issue 14). In the
 * kernel's RDMA netns "exclusive" mode (rdma-system(8): `rdma system set
 * netns exclusive`) an RDMA device belongs to one net namespace and can be
 * used (uverbs opened, verbs run) only from there; in "shared" mode, the
 * default, every namespace sees every device. The node agent reads the mode
 * once at start (RDMA_NLDEV_CMD_SYS_GET, attribute
 * RDMA_NLDEV_SYS_ATTR_NETNS_MODE: 1 shared, 0 exclusive) and, in exclusive
 * mode, moves an InfiniBand member's VF RDMA device into the member's
 * namespace (RDMA_NLDEV_CMD_SET with RDMA_NLDEV_ATTR_DEV_INDEX and
 * RDMA_NLDEV_NET_NS_FD, sent from the namespace the device is in) and back
 * to the host before the sandbox goes. Where a device is is read back by
 * dumping the devices a namespace may use (RDMA_NLDEV_CMD_GET, NLM_F_DUMP:
 * the kernel lists only those), the kernel reporting no namespace per
 * device. All from include/uapi/rdma/rdma_netlink.h and
 * drivers/infiniband/core/nldev.c. The build machine's kernel has no RDMA
 * subsystem (no NETLINK_RDMA): the messages are built and parsed apart from
 * the socket (rdma_int.h) and tested against canned replies
 * (tests/unit/test_rdma.c), and the real calls answer "none" there. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <rdma/rdma_netlink.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"
#include "sandbox/overlay_int.h"
#include "sandbox/rdma_int.h"

#define NLDEV(op) RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)
#define DEVS_MAX  256

const char *iso_rdma_netns_mode_name(enum iso_rdma_netns_mode m)
{
	switch (m) {
	case ISO_RDMA_NETNS_SHARED:
		return "shared";
	case ISO_RDMA_NETNS_EXCLUSIVE:
		return "exclusive";
	default:
		return "none";
	}
}

/* ---- messages ---- */

static int msg_new(int op, int flags, struct nl_msg **out)
{
	*out = nlmsg_alloc_simple(NLDEV(op), flags);
	return *out ? 0 : -ENOMEM;
}

int rdma_msg_sys_get(struct nl_msg **out)
{
	return msg_new(RDMA_NLDEV_CMD_SYS_GET, 0, out);
}

int rdma_msg_dev_dump(struct nl_msg **out)
{
	return msg_new(RDMA_NLDEV_CMD_GET, NLM_F_DUMP, out);
}

int rdma_msg_dev_netns(uint32_t index, uint32_t ns_fd, struct nl_msg **out)
{
	int r = msg_new(RDMA_NLDEV_CMD_SET, 0, out);
	if (r < 0)
		return r;
	if (nla_put_u32(*out, RDMA_NLDEV_ATTR_DEV_INDEX, index) < 0 ||
	    nla_put_u32(*out, RDMA_NLDEV_NET_NS_FD, ns_fd) < 0) {
		nlmsg_free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

static const char *op_name(int op)
{
	return op == RDMA_NLDEV_CMD_SYS_GET ? "RDMA_NLDEV_CMD_SYS_GET" : "RDMA_NLDEV_CMD_GET";
}

/* The attributes of a reply of type NLDEV(op) (the nldev family carries no
 * header of its own: attributes follow the nlmsghdr). */
static int parse_reply(const struct nlmsghdr *h, int op, struct nlattr **tb, struct iso_error *err)
{
	if (!h || h->nlmsg_len < NLMSG_HDRLEN)
		return iso_error_set(err, ISO_E_INTERNAL, "rdma", "short netlink message"),
		       -EBADMSG;
	if (RDMA_NL_GET_CLIENT(h->nlmsg_type) != RDMA_NL_NLDEV ||
	    RDMA_NL_GET_OP(h->nlmsg_type) != op) {
		iso_error_set(err, ISO_E_INTERNAL, "rdma",
		              "reply of type 0x%x (client %u, op %u), not RDMA_NL_NLDEV's %s",
		              h->nlmsg_type, RDMA_NL_GET_CLIENT(h->nlmsg_type),
		              RDMA_NL_GET_OP(h->nlmsg_type), op_name(op));
		return -EBADMSG;
	}
	if (nlmsg_parse((struct nlmsghdr *)h, 0, tb, RDMA_NLDEV_ATTR_MAX - 1, NULL) < 0) {
		iso_error_set(err, ISO_E_INTERNAL, "rdma", "%s reply: malformed attributes",
		              op_name(op));
		return -EBADMSG;
	}
	return 0;
}

/* tb[type] present and at least `len` bytes long. */
static int need_attr(struct nlattr **tb, int type, int len, const char *name, int op,
                     struct iso_error *err)
{
	if (!tb[type]) {
		iso_error_set(err, ISO_E_INTERNAL, "rdma", "%s reply: %s missing", op_name(op),
		              name);
		return -EBADMSG;
	}
	if (nla_len(tb[type]) < len) {
		iso_error_set(err, ISO_E_INTERNAL, "rdma", "%s reply: %s is %d bytes, expected %d",
		              op_name(op), name, nla_len(tb[type]), len);
		return -EBADMSG;
	}
	return 0;
}

int rdma_parse_sys(const struct nlmsghdr *h, enum iso_rdma_netns_mode *out, struct iso_error *err)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	int r;

	if ((r = parse_reply(h, RDMA_NLDEV_CMD_SYS_GET, tb, err)) < 0 ||
	    (r = need_attr(tb, RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 1, "RDMA_NLDEV_SYS_ATTR_NETNS_MODE",
	                   RDMA_NLDEV_CMD_SYS_GET, err)) < 0)
		return r;
	uint8_t v = nla_get_u8(tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]);
	if (v > 1) {
		iso_error_set(err, ISO_E_INTERNAL, "rdma",
		              "RDMA_NLDEV_SYS_ATTR_NETNS_MODE is %u, not 0 (exclusive) or 1 "
		              "(shared)",
		              v);
		return -EBADMSG;
	}
	*out = v ? ISO_RDMA_NETNS_SHARED : ISO_RDMA_NETNS_EXCLUSIVE;
	return 0;
}

int rdma_parse_dev(const struct nlmsghdr *h, uint32_t *index, char name[ISO_RDMA_NAME_MAX],
                   struct iso_error *err)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	int r;

	if ((r = parse_reply(h, RDMA_NLDEV_CMD_GET, tb, err)) < 0 ||
	    (r = need_attr(tb, RDMA_NLDEV_ATTR_DEV_INDEX, 4, "RDMA_NLDEV_ATTR_DEV_INDEX",
	                   RDMA_NLDEV_CMD_GET, err)) < 0 ||
	    (r = need_attr(tb, RDMA_NLDEV_ATTR_DEV_NAME, 2, "RDMA_NLDEV_ATTR_DEV_NAME",
	                   RDMA_NLDEV_CMD_GET, err)) < 0)
		return r;
	const char *s = nla_data(tb[RDMA_NLDEV_ATTR_DEV_NAME]);
	size_t len = strnlen(s, (size_t)nla_len(tb[RDMA_NLDEV_ATTR_DEV_NAME]));
	if (len == 0 || len >= ISO_RDMA_NAME_MAX ||
	    len == (size_t)nla_len(tb[RDMA_NLDEV_ATTR_DEV_NAME])) {
		iso_error_set(err, ISO_E_INTERNAL, "rdma",
		              "RDMA_NLDEV_CMD_GET reply: RDMA_NLDEV_ATTR_DEV_NAME is not a name "
		              "of 1..%d characters ending in NUL",
		              ISO_RDMA_NAME_MAX - 1);
		return -EBADMSG;
	}
	memcpy(name, s, len + 1);
	*index = nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
	return 0;
}

/* ---- the socket ---- */

/* A NETLINK_RDMA socket in the namespace at path (NULL: ours). -EPROTONOSUPPORT
 * when the kernel has no RDMA subsystem. */
static int rdma_open(const char *netns, struct nl_sock **out, struct iso_error *err)
{
	int saved, r, fd;

	*out = NULL;
	if ((r = ovl_ns_enter(netns, &saved, err)) < 0)
		return r;
	/* libnl's error would lose which errno it was */
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	if (fd < 0) {
		int e = errno;
		ovl_ns_leave(saved);
		iso_error_set(err, ISO_E_UNAVAILABLE, "rdma", "no NETLINK_RDMA: %s", strerror(e));
		return -e;
	}
	close(fd);
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk) {
		ovl_ns_leave(saved);
		return iso_error_set(err, ISO_E_INTERNAL, "rdma", "out of memory");
	}
	r = nl_connect(sk, NETLINK_RDMA); /* bound to the namespace for good */
	ovl_ns_leave(saved);
	if (r < 0) {
		nl_socket_free(sk);
		iso_error_set(err, ISO_E_INTERNAL, "rdma", "netlink: %s", nl_geterror(r));
		return ovl_errno(r);
	}
	*out = sk;
	return 0;
}

static bool no_rdma(int e)
{
	return e == -EPROTONOSUPPORT || e == -EAFNOSUPPORT || e == -ENOENT;
}

struct sys_reply {
	int result; /* 1: none yet */
	enum iso_rdma_netns_mode mode;
	struct iso_error err;
};

static int sys_cb(struct nl_msg *msg, void *arg)
{
	struct sys_reply *rep = arg;
	if (rep->result == 1)
		rep->result = rdma_parse_sys(nlmsg_hdr(msg), &rep->mode, &rep->err);
	return NL_OK;
}

/* Sends m (freed) and feeds every valid reply to fn. */
static int ask(struct nl_sock *sk, struct nl_msg *m, nl_recvmsg_msg_cb_t fn, void *arg,
               const char *what, struct iso_error *err)
{
	int r = nl_send_auto(sk, m);
	nlmsg_free(m);
	if (r < 0) {
		iso_error_set(err, ISO_E_INTERNAL, "rdma", "%s: %s", what, nl_geterror(r));
		return ovl_errno(r);
	}
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb)
		return iso_error_set(err, ISO_E_INTERNAL, "rdma", "out of memory");
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, fn, arg);
	r = nl_recvmsgs(sk, cb);
	nl_cb_put(cb);
	if (r < 0) {
		iso_error_set(err, ISO_E_INTERNAL, "rdma", "%s: %s", what, nl_geterror(r));
		return ovl_errno(r);
	}
	return 0;
}

int iso_rdma_netns_mode_read(enum iso_rdma_netns_mode *out, struct iso_error *err)
{
	_cleanup_nl_ struct nl_sock *sk = NULL;
	struct nl_msg *m = NULL;
	struct iso_error e = {0};
	int r;

	*out = ISO_RDMA_NETNS_NONE;
	if ((r = rdma_open(NULL, &sk, &e)) < 0) {
		if (no_rdma(r))
			return 0;
		if (err)
			*err = e;
		return r;
	}
	if (rdma_msg_sys_get(&m) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "rdma", "out of memory");
	struct sys_reply rep = {.result = 1};
	if ((r = ask(sk, m, sys_cb, &rep, "RDMA_NLDEV_CMD_SYS_GET", err)) < 0)
		return r;
	if (rep.result == 1)
		return iso_error_set(err, ISO_E_INTERNAL, "rdma",
		                     "RDMA_NLDEV_CMD_SYS_GET: no reply"),
		       -EBADMSG;
	if (rep.result < 0) {
		if (err)
			*err = rep.err;
		return rep.result;
	}
	*out = rep.mode;
	return 0;
}

struct dev_reply {
	const char *want; /* NULL: collect every name */
	bool found;
	uint32_t index;
	int result;
	struct iso_error err;
	size_t n;
	char names[DEVS_MAX][ISO_RDMA_NAME_MAX];
};

static int dev_cb(struct nl_msg *msg, void *arg)
{
	struct dev_reply *rep = arg;
	char name[ISO_RDMA_NAME_MAX];
	uint32_t idx;
	int r = rdma_parse_dev(nlmsg_hdr(msg), &idx, name, &rep->err);

	if (r < 0) {
		if (rep->result == 0)
			rep->result = r;
		return NL_OK;
	}
	if (!rep->want && rep->n < DEVS_MAX)
		memcpy(rep->names[rep->n++], name, sizeof(name));
	if (rep->want && strcmp(name, rep->want) == 0) {
		rep->found = true;
		rep->index = idx;
	}
	return NL_OK;
}

static int dump(struct nl_sock *sk, struct dev_reply *rep, struct iso_error *err)
{
	struct nl_msg *m = NULL;
	int r;

	if (rdma_msg_dev_dump(&m) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "rdma", "out of memory");
	if ((r = ask(sk, m, dev_cb, rep, "RDMA_NLDEV_CMD_GET", err)) < 0)
		return r;
	if (rep->result < 0 && !rep->found) {
		if (err)
			*err = rep->err;
		return rep->result;
	}
	return 0;
}

static int find_on(struct nl_sock *sk, const char *name, uint32_t *index, struct iso_error *err)
{
	_cleanup_free_ struct dev_reply *rep = calloc(1, sizeof(*rep));
	int r;

	if (!rep)
		return iso_error_set(err, ISO_E_INTERNAL, "rdma", "out of memory");
	rep->want = name;
	if ((r = dump(sk, rep, err)) < 0)
		return r;
	if (rep->found && index)
		*index = rep->index;
	return rep->found ? 1 : 0;
}

static int check_name(const char *name, struct iso_error *err)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n >= ISO_RDMA_NAME_MAX ||
	    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                 "abcdefghijklmnopqrstuvwxyz"
	                 "0123456789_.-") != n)
		return iso_error_set(err, ISO_E_INVALID, "rdma_device",
		                     "not an RDMA device name (1..%d of [A-Za-z0-9_.-])",
		                     ISO_RDMA_NAME_MAX - 1);
	return 0;
}

int iso_rdma_dev_find(const char *netns, const char *name, uint32_t *index, struct iso_error *err)
{
	_cleanup_nl_ struct nl_sock *sk = NULL;
	int r;

	if ((r = check_name(name, err)) < 0 || (r = rdma_open(netns, &sk, err)) < 0)
		return r;
	return find_on(sk, name, index, err);
}

int iso_rdma_dev_move(const char *from, const char *name, const char *to, struct iso_error *err)
{
	_cleanup_nl_ struct nl_sock *src = NULL, *dst = NULL;
	_cleanup_close_ int to_fd = -1;
	uint32_t idx = 0;
	int r;

	if ((r = check_name(name, err)) < 0 || (r = rdma_open(to, &dst, err)) < 0 ||
	    (r = rdma_open(from, &src, err)) < 0)
		return r;
	if ((r = find_on(dst, name, NULL, err)) != 0)
		return r < 0 ? r : 0; /* already there */
	if ((r = find_on(src, name, &idx, err)) < 0)
		return r;
	if (r == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "rdma_device",
		                     "%s is in neither namespace", name),
		       -ENODEV;
	to_fd = open(to ? to : "/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (to_fd < 0) {
		int e = errno;
		iso_error_set(err, ISO_E_INTERNAL, "netns", "open %s: %s", to ? to : "own netns",
		              strerror(e));
		return -e;
	}
	struct nl_msg *m = NULL;
	if (rdma_msg_dev_netns(idx, (uint32_t)to_fd, &m) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "rdma", "out of memory");
	r = nl_send_sync(src, m); /* frees m; the ack or the kernel's errno */
	if (r < 0) {
		int e = ovl_errno(r);
		/* shared mode answers EOPNOTSUPP, a driver without disassociate too */
		iso_error_set(err, e == -EOPNOTSUPP ? ISO_E_UNAVAILABLE : ISO_E_INTERNAL,
		              "rdma_device", "move %s (index %u) to %s: %s", name, idx,
		              to ? to : "own netns", nl_geterror(r));
		return e;
	}
	if ((r = find_on(dst, name, NULL, err)) < 0)
		return r;
	if (r == 0)
		return iso_error_set(err, ISO_E_INTERNAL, "rdma_device",
		                     "%s is not in %s after the move", name, to ? to : "own netns"),
		       -EIO;
	return 0;
}

int iso_rdma_dev_move_all(const char *from, const char *to, unsigned *moved, struct iso_error *err)
{
	_cleanup_nl_ struct nl_sock *src = NULL;
	_cleanup_free_ struct dev_reply *rep = NULL;
	enum iso_rdma_netns_mode mode;
	int r;

	*moved = 0;
	/* in shared mode every namespace sees every device: nothing is "in"
	 * one, and nothing may be moved */
	if ((r = iso_rdma_netns_mode_read(&mode, err)) < 0)
		return r;
	if (mode != ISO_RDMA_NETNS_EXCLUSIVE)
		return 0;
	if (!(rep = calloc(1, sizeof(*rep))))
		return iso_error_set(err, ISO_E_INTERNAL, "rdma", "out of memory");
	if ((r = rdma_open(from, &src, err)) < 0 || (r = dump(src, rep, err)) < 0)
		return r;
	for (size_t i = 0; i < rep->n; i++) {
		if ((r = iso_rdma_dev_move(from, rep->names[i], to, err)) < 0)
			return r;
		(*moved)++;
	}
	return 0;
}

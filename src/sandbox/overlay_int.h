/* overlay_int.h: what the overlay's three files (overlay.c, overlay_guard.c,
 * overlay_vf.c) share and the unit tests reach: acting in another network
 * namespace, libnl's errors as errno, and the VF message's builder and
 * parser (tested without an SR-IOV NIC). Private to src/sandbox. */
#ifndef ISOSTACK_SANDBOX_OVERLAY_INT_H
#define ISOSTACK_SANDBOX_OVERLAY_INT_H

#include <netlink/msg.h>
#include <netlink/netlink.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

/* Moves the calling thread into the namespace at path (NULL: stays) and
 * gives back its own in *saved (-1 when it did not move), for ovl_ns_leave. */
int ovl_ns_enter(const char *path, int *saved, struct iso_error *err);
void ovl_ns_leave(int saved);
/* A NETLINK_ROUTE socket bound to the namespace at path. */
int ovl_nl_open(const char *netns, struct nl_sock **out, struct iso_error *err);
void ovl_nl_closep(struct nl_sock **sk);
#define _cleanup_nl_ _cleanup_(ovl_nl_closep)
/* libnl's NLE_* as a negative errno. */
int ovl_errno(int nlerr);

/* RTM_SETLINK on ifindex with IFLA_VFINFO_LIST { IFLA_VF_INFO { IFLA_VF_VLAN,
 * IFLA_VF_SPOOFCHK } }. */
int ovl_vf_msg_build(int ifindex, const struct iso_overlay_vf *want, struct nl_msg **out);
/* The VF `vf` of an RTM_NEWLINK message; -ENOENT when it lists no such VF,
 * -EBADMSG when the attributes are malformed. */
int ovl_vf_msg_parse(struct nlmsghdr *h, unsigned vf, struct iso_overlay_vf *out);

#endif

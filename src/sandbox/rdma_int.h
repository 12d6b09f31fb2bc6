/* rdma_int.h: the RDMA netlink messages of rdma.c, built and parsed apart
 * from the socket so that tests/unit/test_rdma.c checks them against canned
 * replies (the build machine's kernel has no RDMA subsystem). Private to
 * src/sandbox. */
#ifndef ISOSTACK_SANDBOX_RDMA_INT_H
#define ISOSTACK_SANDBOX_RDMA_INT_H

#include <stdint.h>

#include <netlink/msg.h>
#include <netlink/netlink.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

/* RDMA_NLDEV_CMD_SYS_GET (no attributes). */
int rdma_msg_sys_get(struct nl_msg **out);
/* RDMA_NLDEV_CMD_GET with NLM_F_DUMP: every device the socket's namespace
 * may use. */
int rdma_msg_dev_dump(struct nl_msg **out);
/* RDMA_NLDEV_CMD_SET { RDMA_NLDEV_ATTR_DEV_INDEX, RDMA_NLDEV_NET_NS_FD }. */
int rdma_msg_dev_netns(uint32_t index, uint32_t ns_fd, struct nl_msg **out);

/* The mode of a SYS_GET reply. -EBADMSG with *err naming what is wrong (the
 * message's type, RDMA_NLDEV_SYS_ATTR_NETNS_MODE missing or short). */
int rdma_parse_sys(const struct nlmsghdr *h, enum iso_rdma_netns_mode *out, struct iso_error *err);
/* One device of a GET reply: its index and name. -EBADMSG as above
 * (RDMA_NLDEV_ATTR_DEV_INDEX, RDMA_NLDEV_ATTR_DEV_NAME). */
int rdma_parse_dev(const struct nlmsghdr *h, uint32_t *index, char name[ISO_RDMA_NAME_MAX],
                   struct iso_error *err);

#endif

/* test_rdma.c: a member's RDMA in its sandbox (issue 14) without RDMA
 * hardware: the RDMA netlink messages of src/sandbox/rdma.c built, canned
 * replies parsed (good ones, and bad ones: short attributes, another
 * family, a missing attribute, each refused naming what is wrong), the
 * agent's decision table (netns mode x fabric x VF), the VF's RDMA device
 * found in a fake sysfs tree and the rdma.max line it gets in a fake
 * cgroup tree, the agent's --rdma-hca-* flags, and the real calls on this
 * kernel (no RDMA subsystem here: the mode reads "none"). */
#include <errno.h>
#include <limits.h>
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
#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>

#include "../../src/agent/internal.h"
#include "isostack/sandbox.h"
#include "isostack/util.h"
#include "sandbox/rdma_int.h"

#define NLDEV(op) RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)

/* ---- messages ---- */

static void test_messages_built(void **state)
{
	(void)state;
	struct nl_msg *m = NULL;

	assert_int_equal(rdma_msg_sys_get(&m), 0);
	assert_int_equal(nlmsg_hdr(m)->nlmsg_type, NLDEV(RDMA_NLDEV_CMD_SYS_GET));
	assert_int_equal(nlmsg_hdr(m)->nlmsg_len, NLMSG_HDRLEN); /* no attributes */
	nlmsg_free(m);

	assert_int_equal(rdma_msg_dev_dump(&m), 0);
	assert_int_equal(nlmsg_hdr(m)->nlmsg_type, NLDEV(RDMA_NLDEV_CMD_GET));
	assert_true(nlmsg_hdr(m)->nlmsg_flags & NLM_F_DUMP);
	nlmsg_free(m);

	assert_int_equal(rdma_msg_dev_netns(7, 42, &m), 0);
	struct nlmsghdr *h = nlmsg_hdr(m);
	assert_int_equal(h->nlmsg_type, NLDEV(RDMA_NLDEV_CMD_SET));
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	assert_int_equal(nlmsg_parse(h, 0, tb, RDMA_NLDEV_ATTR_MAX - 1, NULL), 0);
	assert_non_null(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
	assert_int_equal(nla_len(tb[RDMA_NLDEV_ATTR_DEV_INDEX]), 4);
	assert_int_equal(nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]), 7);
	assert_non_null(tb[RDMA_NLDEV_NET_NS_FD]);
	assert_int_equal(nla_get_u32(tb[RDMA_NLDEV_NET_NS_FD]), 42);
	nlmsg_free(m);
}

/* ---- canned replies ---- */

/* A SYS_GET reply as the kernel sends it (nldev_sys_get_doit): mode_len
 * bytes of RDMA_NLDEV_SYS_ATTR_NETNS_MODE, or none when mode_len < 0. */
static struct nl_msg *sys_reply(int type, int mode_len, uint8_t mode)
{
	struct nl_msg *m = nlmsg_alloc_simple(type, 0);
	assert_non_null(m);
	/* what else the kernel sends first: copy-on-fork */
	assert_int_equal(nla_put_u8(m, RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, 1), 0);
	if (mode_len >= 0)
		assert_int_equal(nla_put(m, RDMA_NLDEV_SYS_ATTR_NETNS_MODE, mode_len, &mode), 0);
	return m;
}

static void test_sys_reply(void **state)
{
	(void)state;
	enum iso_rdma_netns_mode mode = ISO_RDMA_NETNS_NONE;
	struct iso_error err = {0};
	struct nl_msg *m;

	m = sys_reply(NLDEV(RDMA_NLDEV_CMD_SYS_GET), 1, 0);
	assert_int_equal(rdma_parse_sys(nlmsg_hdr(m), &mode, &err), 0);
	assert_int_equal(mode, ISO_RDMA_NETNS_EXCLUSIVE);
	nlmsg_free(m);
	m = sys_reply(NLDEV(RDMA_NLDEV_CMD_SYS_GET), 1, 1);
	assert_int_equal(rdma_parse_sys(nlmsg_hdr(m), &mode, &err), 0);
	assert_int_equal(mode, ISO_RDMA_NETNS_SHARED);
	nlmsg_free(m);
	assert_string_equal(iso_rdma_netns_mode_name(ISO_RDMA_NETNS_SHARED), "shared");
	assert_string_equal(iso_rdma_netns_mode_name(ISO_RDMA_NETNS_EXCLUSIVE), "exclusive");
	assert_string_equal(iso_rdma_netns_mode_name(ISO_RDMA_NETNS_NONE), "none");
}

static void test_sys_reply_bad(void **state)
{
	(void)state;
	static const struct {
		int type, len;
		uint8_t mode;
		const char *says;
	} bad[] = {
	    /* the attribute missing */
	    {NLDEV(RDMA_NLDEV_CMD_SYS_GET), -1, 0, "RDMA_NLDEV_SYS_ATTR_NETNS_MODE missing"},
	    /* short: an empty attribute */
	    {NLDEV(RDMA_NLDEV_CMD_SYS_GET), 0, 0,
	     "RDMA_NLDEV_SYS_ATTR_NETNS_MODE is 0 bytes, expected 1"},
	    /* another client's family (RDMA_NL_LS) */
	    {RDMA_NL_GET_TYPE(RDMA_NL_LS, RDMA_NLDEV_CMD_SYS_GET), 1, 1, "not RDMA_NL_NLDEV's"},
	    /* the right family, another command */
	    {NLDEV(RDMA_NLDEV_CMD_GET), 1, 1, "op 1"},
	    /* a value the uapi does not define */
	    {NLDEV(RDMA_NLDEV_CMD_SYS_GET), 1, 2, "is 2, not 0 (exclusive) or 1 (shared)"},
	};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		enum iso_rdma_netns_mode mode = ISO_RDMA_NETNS_SHARED;
		struct iso_error err = {0};
		struct nl_msg *m = sys_reply(bad[i].type, bad[i].len, bad[i].mode);
		assert_int_equal(rdma_parse_sys(nlmsg_hdr(m), &mode, &err), -EBADMSG);
		if (!strstr(err.message, bad[i].says))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err.message,
			         bad[i].says);
		assert_string_equal(err.field, "rdma");
		assert_int_equal(mode, ISO_RDMA_NETNS_SHARED); /* untouched */
		nlmsg_free(m);
	}
	/* shorter than a header */
	struct nlmsghdr tiny = {.nlmsg_len = 4, .nlmsg_type = NLDEV(RDMA_NLDEV_CMD_SYS_GET)};
	enum iso_rdma_netns_mode mode;
	struct iso_error err = {0};
	assert_int_equal(rdma_parse_sys(&tiny, &mode, &err), -EBADMSG);
	assert_non_null(strstr(err.message, "short"));
}

/* One device of a GET dump: idx_len bytes of the index (-1: none), name
 * (NULL: none) put with name_len bytes (-1: with its NUL). */
static struct nl_msg *dev_reply(int type, int idx_len, uint32_t idx, const char *name, int name_len)
{
	struct nl_msg *m = nlmsg_alloc_simple(type, NLM_F_MULTI);
	assert_non_null(m);
	if (idx_len >= 0)
		assert_int_equal(nla_put(m, RDMA_NLDEV_ATTR_DEV_INDEX, idx_len, &idx), 0);
	if (name)
		assert_int_equal(nla_put(m, RDMA_NLDEV_ATTR_DEV_NAME,
		                         name_len < 0 ? (int)strlen(name) + 1 : name_len, name),
		                 0);
	assert_int_equal(nla_put_u64(m, RDMA_NLDEV_ATTR_FW_VERSION, 1), 0); /* ignored */
	return m;
}

static void test_dev_reply(void **state)
{
	(void)state;
	char name[ISO_RDMA_NAME_MAX];
	uint32_t idx = 0;
	struct iso_error err = {0};
	struct nl_msg *m = dev_reply(NLDEV(RDMA_NLDEV_CMD_GET), 4, 5, "mlx5_3", -1);

	assert_int_equal(rdma_parse_dev(nlmsg_hdr(m), &idx, name, &err), 0);
	assert_int_equal(idx, 5);
	assert_string_equal(name, "mlx5_3");
	nlmsg_free(m);

	static const struct {
		int type, idx_len;
		const char *name;
		int name_len;
		const char *says;
	} bad[] = {
	    {NLDEV(RDMA_NLDEV_CMD_GET), -1, "mlx5_3", -1, "RDMA_NLDEV_ATTR_DEV_INDEX missing"},
	    {NLDEV(RDMA_NLDEV_CMD_GET), 2, "mlx5_3", -1,
	     "RDMA_NLDEV_ATTR_DEV_INDEX is 2 bytes, expected 4"},
	    {NLDEV(RDMA_NLDEV_CMD_GET), 4, NULL, 0, "RDMA_NLDEV_ATTR_DEV_NAME missing"},
	    {NLDEV(RDMA_NLDEV_CMD_GET), 4, "m", 1, "RDMA_NLDEV_ATTR_DEV_NAME is 1 bytes"},
	    /* no NUL inside the attribute */
	    {NLDEV(RDMA_NLDEV_CMD_GET), 4, "mlx5_3", 6, "ending in NUL"},
	    {NLDEV(RDMA_NLDEV_CMD_SYS_GET), 4, "mlx5_3", -1, "RDMA_NLDEV_CMD_GET"},
	    {RDMA_NL_GET_TYPE(RDMA_NL_IWCM, RDMA_NLDEV_CMD_GET), 4, "mlx5_3", -1,
	     "not RDMA_NL_NLDEV's"},
	};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		memset(&err, 0, sizeof(err));
		m = dev_reply(bad[i].type, bad[i].idx_len, 5, bad[i].name, bad[i].name_len);
		assert_int_equal(rdma_parse_dev(nlmsg_hdr(m), &idx, name, &err), -EBADMSG);
		if (!strstr(err.message, bad[i].says))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err.message,
			         bad[i].says);
		nlmsg_free(m);
	}
}

/* ---- the decision table ---- */

static void test_plan_table(void **state)
{
	(void)state;
	static const enum iso_rdma_netns_mode modes[] = {ISO_RDMA_NETNS_NONE, ISO_RDMA_NETNS_SHARED,
	                                                 ISO_RDMA_NETNS_EXCLUSIVE};
	/* fabric: 0 InfiniBand (no overlay), 1 Ethernet (overlay) */
	for (size_t mi = 0; mi < 3; mi++)
		for (int eth = 0; eth <= 1; eth++)
			for (int vf = 0; vf <= 1; vf++)
				for (int cgc = 0; cgc <= 1; cgc++) {
					struct agent_rdma_plan p;
					bool excl = modes[mi] == ISO_RDMA_NETNS_EXCLUSIVE;
					agent_rdma_plan(modes[mi], cgc, eth, vf, vf ? "mlx5_3" : "",
					                &p);
					/* netns: every Ethernet member; an IB member with
					 * a VF only in exclusive mode */
					assert_int_equal(p.new_netns, eth || (vf && excl));
					assert_int_equal(p.move, !eth && vf && excl);
					assert_int_equal(p.limit, vf && cgc);
					assert_int_equal(p.no_controller, vf && !cgc);
					assert_null(p.refuse);
				}
	/* exclusive mode, an IB member whose VF shows no RDMA device: refused */
	struct agent_rdma_plan p;
	agent_rdma_plan(ISO_RDMA_NETNS_EXCLUSIVE, true, false, true, "", &p);
	assert_non_null(p.refuse);
	assert_false(p.move);
	assert_false(p.limit);
	/* shared mode: the same member goes on (nothing to move) */
	agent_rdma_plan(ISO_RDMA_NETNS_SHARED, true, false, true, "", &p);
	assert_null(p.refuse);
	assert_false(p.new_netns);
	assert_false(p.limit);
}

/* ---- the fake sysfs VF and its rdma.max line ---- */

static char dir[PATH_MAX];

static void sh(const char *fmt, ...)
{
	char cmd[PATH_MAX * 4];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_rdma.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	sh("rm -rf '%s'", dir);
	return 0;
}

/* A host with PF mlx5_0 (0000:08:00.0) and its VFs 0 and 1 (08:00.1, .2),
 * whose RDMA devices are mlx5_2 and mlx5_3, laid out as sysfs does: the
 * class entries' `device` links point at the PCI functions, the PF's
 * virtfnN links at the VFs'. */
static void fake_sysfs(void)
{
	sh("cd '%s' && mkdir -p sys/devices/pci0000:00/0000:08:00.0 "
	   "sys/devices/pci0000:00/0000:08:00.1 sys/devices/pci0000:00/0000:08:00.2 "
	   "sys/class/infiniband/mlx5_0 sys/class/infiniband/mlx5_2 sys/class/infiniband/mlx5_3 "
	   "cgroup/rdma",
	   dir);
	sh("cd '%s/sys/devices/pci0000:00/0000:08:00.0' && ln -s ../0000:08:00.1 virtfn0 && "
	   "ln -s ../0000:08:00.2 virtfn1",
	   dir);
	sh("cd '%s/sys/class/infiniband' && "
	   "ln -s ../../../devices/pci0000:00/0000:08:00.0 mlx5_0/device && "
	   "ln -s ../../../devices/pci0000:00/0000:08:00.2 mlx5_2/device && "
	   "ln -s ../../../devices/pci0000:00/0000:08:00.1 mlx5_3/device",
	   dir);
	/* a cgroup v1 rdma hierarchy (the kernel's files as plain files) */
	sh("echo 1 > '%s/cgroup/rdma/cgroup.procs'", dir);
}

static void test_vf_rdma_device(void **state)
{
	(void)state;
	struct agent_host_roots roots = {"/dev", "/proc", dir};
	struct agent_vf_ref vf0 = {"mlx5_0", 0}, vf1 = {"mlx5_0", 1}, vf5 = {"mlx5_0", 5},
	                    other = {"mlx5_9", 0}, evil = {"../x", 0};
	char name[ISO_RDMA_NAME_MAX];
	struct iso_error err = {0};

	fake_sysfs();
	assert_int_equal(agent_vf_rdma_device(&roots, &vf0, name, &err), 1);
	assert_string_equal(name, "mlx5_3");
	assert_int_equal(agent_vf_rdma_device(&roots, &vf1, name, &err), 1);
	assert_string_equal(name, "mlx5_2");
	/* no such VF, no such PF: none, not an error */
	assert_int_equal(agent_vf_rdma_device(&roots, &vf5, name, &err), 0);
	assert_string_equal(name, "");
	assert_int_equal(agent_vf_rdma_device(&roots, &other, name, &err), 0);
	/* moved into a member's namespace: the host's class has no entry */
	sh("rm -rf '%s/sys/class/infiniband/mlx5_3'", dir);
	assert_int_equal(agent_vf_rdma_device(&roots, &vf0, name, &err), 0);
	assert_int_equal(agent_vf_rdma_device(&roots, &evil, name, &err), -EINVAL);
	assert_string_equal(err.field, "vfs.device");
}

static char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void test_member_rdma_max(void **state)
{
	(void)state;
	struct agent_host_roots roots = {"/dev", "/proc", dir};
	struct agent_sandboxes s;
	struct iso_error err = {0};
	char cgroot[PATH_MAX + 16], path[PATH_MAX + 64], rdev[ISO_RDMA_NAME_MAX];
	struct agent_vf_ref vf = {"mlx5_0", 0};
	struct agent_rdma_plan plan;
	struct iso_cgroup_rdma lim;

	fake_sysfs();
	snprintf(cgroot, sizeof(cgroot), "%s/cgroup", dir);
	assert_int_equal(agent_sandboxes_init(&s, dir, false, NULL, &roots, &err), 0);
	assert_int_equal(iso_cgroup_open(cgroot, &s.cg, &err), 0);
	assert_true(s.cg.controllers & ISO_CGROUP_RDMA);

	/* the defaults: 16 handles, 8192 objects */
	assert_int_equal(agent_member_rdma(&s, &vf, 1, false, &plan, rdev, &lim, &err), 0);
	assert_true(plan.limit);
	assert_false(plan.new_netns); /* mode none */
	struct iso_cgroup_limits l = {.rdma = &lim, .n_rdma = 1};
	assert_int_equal(iso_cgroup_create(&s.cg, "m1", &l, &err), 0);
	snprintf(path, sizeof(path), "%s/rdma/m1/rdma.max", cgroot);
	assert_string_equal(slurp(path), "mlx5_3 hca_handle=16 hca_object=8192\n");
	assert_int_equal(iso_cgroup_destroy(&s.cg, "m1", &err), 0);

	/* --rdma-hca-handles max --rdma-hca-objects 100 */
	s.rdma_hca_handles = -1;
	s.rdma_hca_objects = 100;
	assert_int_equal(agent_member_rdma(&s, &vf, 1, false, &plan, rdev, &lim, &err), 0);
	assert_int_equal(iso_cgroup_create(&s.cg, "m2", &l, &err), 0);
	snprintf(path, sizeof(path), "%s/rdma/m2/rdma.max", cgroot);
	assert_string_equal(slurp(path), "mlx5_3 hca_handle=max hca_object=100\n");
	assert_int_equal(iso_cgroup_destroy(&s.cg, "m2", &err), 0);

	/* no rdma controller: no limit, not refused, logged once */
	s.cg.controllers &= ~(unsigned)ISO_CGROUP_RDMA;
	assert_false(s.rdma_nocg_logged);
	assert_int_equal(agent_member_rdma(&s, &vf, 1, false, &plan, rdev, &lim, &err), 0);
	assert_false(plan.limit);
	assert_true(plan.no_controller);
	assert_true(s.rdma_nocg_logged);

	/* exclusive mode: an IB member gets a namespace and its device moves */
	s.rdma_mode = ISO_RDMA_NETNS_EXCLUSIVE;
	assert_int_equal(agent_member_rdma(&s, &vf, 1, false, &plan, rdev, &lim, &err), 0);
	assert_true(plan.new_netns);
	assert_true(plan.move);
	assert_string_equal(rdev, "mlx5_3");
	/* ... and a VF without an RDMA device is refused, naming it */
	struct agent_vf_ref vf5 = {"mlx5_0", 5};
	assert_true(agent_member_rdma(&s, &vf5, 1, false, &plan, rdev, &lim, &err) < 0);
	assert_string_equal(err.field, "rdma");
	assert_non_null(strstr(err.message, "VF 5 of mlx5_0"));
	/* no VF: nothing */
	assert_int_equal(agent_member_rdma(&s, NULL, 0, false, &plan, rdev, &lim, &err), 0);
	assert_false(plan.new_netns || plan.move || plan.limit);
	agent_sandboxes_free(&s);
}

/* A live sandbox's device kept in its namespace, tick after tick. */
static void test_keep_in(void **state)
{
	(void)state;
	struct agent_host_roots roots = {"/dev", "/proc", dir};
	struct agent_sandboxes s;
	struct iso_error err = {0};
	struct agent_vf_ref vf = {"mlx5_0", 0};
	struct iso_sandbox sb = {.name = "iso-a-0", .holder_pid = getpid()};

	fake_sysfs();
	assert_int_equal(agent_sandboxes_init(&s, dir, false, NULL, &roots, &err), 0);
	/* not exclusive: nothing to keep (no netlink, no sysfs) */
	assert_int_equal(agent_rdma_keep_in(&s, &vf, 1, false, &sb, &err), 0);
	s.rdma_mode = ISO_RDMA_NETNS_SHARED;
	assert_int_equal(agent_rdma_keep_in(&s, &vf, 1, false, &sb, &err), 0);
	s.rdma_mode = ISO_RDMA_NETNS_EXCLUSIVE;
	/* an Ethernet member or none without a VF: nothing */
	assert_int_equal(agent_rdma_keep_in(&s, &vf, 1, true, &sb, &err), 0);
	assert_int_equal(agent_rdma_keep_in(&s, NULL, 0, false, &sb, &err), 0);
	/* the host lists mlx5_3: it is not in the member's namespace, a move
	 * is tried (which this kernel, without RDMA, cannot do) */
	assert_true(agent_rdma_keep_in(&s, &vf, 1, false, &sb, &err) < 0);
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	if (fd < 0) {
		assert_string_equal(err.field, "rdma");
		assert_non_null(strstr(err.message, "NETLINK_RDMA"));
	} else {
		close(fd);
	}
	/* the host no longer lists it: in a namespace, left alone */
	sh("rm -rf '%s/sys/class/infiniband/mlx5_3'", dir);
	assert_int_equal(agent_rdma_keep_in(&s, &vf, 1, false, &sb, &err), 0);
	agent_sandboxes_free(&s);
}

/* ---- the agent's flags ---- */

static void test_flags(void **state)
{
	(void)state;
	char tok[PATH_MAX + 8];
	snprintf(tok, sizeof(tok), "%s/token", dir);
	sh("echo tok > '%s'", tok);
	struct iso_agent_config cfg;
	char *tb = NULL;
	struct iso_error err = {0};
	char *base[] = {"isostack-agent",
	                "--controller",
	                "http://x",
	                "--token-file",
	                tok,
	                "--node",
	                "n1",
	                "--gpu-driver",
	                "sim",
	                "--state-dir",
	                dir};
	char *argv[16];
	size_t nb = ISO_ARRAY_SIZE(base);

	memcpy(argv, base, sizeof(base));
	argv[nb] = "--rdma-hca-handles";
	argv[nb + 1] = "4";
	argv[nb + 2] = "--rdma-hca-objects";
	argv[nb + 3] = "max";
	assert_int_equal(iso_agent_parse_args((int)nb + 4, argv, &cfg, &tb, &err), 0);
	assert_int_equal(cfg.rdma_hca_handles, 4);
	assert_int_equal(cfg.rdma_hca_objects, -1);
	free(tb);
	iso_agent_config_clear(&cfg);

	/* absent: 0, the agent's defaults */
	assert_int_equal(iso_agent_parse_args((int)nb, argv, &cfg, &tb, &err), 0);
	assert_int_equal(cfg.rdma_hca_handles, 0);
	free(tb);
	iso_agent_config_clear(&cfg);

	static const char *bad[] = {"0", "-1", "2147483648", "x", ""};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		argv[nb] = "--rdma-hca-objects";
		argv[nb + 1] = (char *)bad[i];
		tb = NULL;
		assert_int_equal(iso_agent_parse_args((int)nb + 2, argv, &cfg, &tb, &err), -EINVAL);
		assert_string_equal(err.field, "--rdma-hca-objects");
		free(tb);
		iso_agent_config_clear(&cfg);
	}
}

/* ---- the real calls on this kernel ---- */

static void test_real_kernel(void **state)
{
	(void)state;
	enum iso_rdma_netns_mode mode = ISO_RDMA_NETNS_SHARED;
	struct iso_error err = {0};
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);

	if (fd >= 0) {
		/* a kernel with RDMA: the mode is one of the two */
		close(fd);
		assert_int_equal(iso_rdma_netns_mode_read(&mode, &err), 0);
		assert_true(mode == ISO_RDMA_NETNS_SHARED || mode == ISO_RDMA_NETNS_EXCLUSIVE);
		print_message("RDMA subsystem present: netns mode %s\n",
		              iso_rdma_netns_mode_name(mode));
		return;
	}
	print_message("no NETLINK_RDMA on this kernel: the real calls answer none\n");
	assert_int_equal(iso_rdma_netns_mode_read(&mode, &err), 0);
	assert_int_equal(mode, ISO_RDMA_NETNS_NONE);
	uint32_t idx;
	assert_true(iso_rdma_dev_find(NULL, "mlx5_3", &idx, &err) < 0);
	assert_string_equal(err.field, "rdma");
	assert_non_null(strstr(err.message, "NETLINK_RDMA"));
	assert_true(iso_rdma_dev_move(NULL, "mlx5_3", "/proc/self/ns/net", &err) < 0);
	unsigned moved = 7;
	assert_int_equal(iso_rdma_dev_move_all("/proc/self/ns/net", NULL, &moved, &err), 0);
	assert_int_equal(moved, 0);
	/* a bad name is refused before any socket */
	assert_int_equal(iso_rdma_dev_find(NULL, "../x", &idx, &err), -EINVAL);
	assert_string_equal(err.field, "rdma_device");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_messages_built),
	    cmocka_unit_test(test_sys_reply),
	    cmocka_unit_test(test_sys_reply_bad),
	    cmocka_unit_test(test_dev_reply),
	    cmocka_unit_test(test_plan_table),
	    cmocka_unit_test_setup_teardown(test_vf_rdma_device, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_member_rdma_max, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_keep_in, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
	    cmocka_unit_test(test_real_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

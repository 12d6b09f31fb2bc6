/* test_cxi.c: Slingshot's CXI services. The agent's driver (src/agent/cxi.c)
 * runs over dlopen of the project's fake libcxi.so.1 (tests/fakes/fake_cxi.c,
 * path in env ISOSTACK_FAKE_CXI), with its state in a file so that child
 * processes with other uids see the same NIC. First the fake's rules, as a
 * pod's process meets them (a process cannot use another tenant's VNI; a
 * member can, by uid or by gid); then ensure (idempotent, refusals, read-back
 * that destroys what did not come out as asked), destroy, and the reconcile
 * pass; then the daemon's side (src/agent/cxi_node.c, socket.c): the
 * socket's cxi_admit parsed strictly, answered over a real unix socket
 * (idempotent, each refusal naming its field), the admitted identities
 * kept in their file across a restart, a released member's service gone. The member-rule tests need
 * root (setuid in a child) and skip without it. */
#include <dlfcn.h>
#include <grp.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/agent.h"
#include "agent/cxi_abi.h"
#include "../../src/agent/internal.h"

#define VNI_A 1100u
#define VNI_B 1200u
#define UID_A 5001u
#define UID_B 5002u

struct fx {
	char dir[PATH_MAX], state[PATH_MAX + 16];
	struct iso_agent_cxi *x;
};

static const char *fake_path(void)
{
	const char *p = getenv("ISOSTACK_FAKE_CXI");
	return p ? p : "../../build/tests/fakes/libcxi.so.1";
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct iso_error err = {0};

	snprintf(f->dir, sizeof(f->dir), "/tmp/iso-cxi-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(chmod(f->dir, 0755), 0); /* the NIC is every user's */
	snprintf(f->state, sizeof(f->state), "%s/cxi.json", f->dir);
	setenv("ISOSTACK_FAKE_CXI_STATE", f->state, 1);
	setenv("ISOSTACK_CXI_LIBRARY", fake_path(), 1);
	unsetenv("ISOSTACK_FAKE_CXI_FAIL");
	unsetenv("ISOSTACK_FAKE_CXI_QUIRK");
	if (iso_agent_cxi_open(NULL, 0, &f->x, &err) != 0)
		fail_msg("open: %s", err.message);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[PATH_MAX + 16];

	iso_agent_cxi_close(f->x);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static uint32_t must_ensure(struct fx *f, uint32_t vni, uint32_t uid, uint32_t gid)
{
	struct iso_error err = {0};
	uint32_t id = 0;

	if (iso_agent_cxi_ensure(f->x, vni, uid, gid, &id, &err) != 0)
		fail_msg("ensure %u %u %u: %s", vni, uid, gid, err.message);
	assert_true(id > 1);
	return id;
}

/* The services other than the default one. */
static int others(struct fx *f, struct iso_agent_cxi_report *r)
{
	struct iso_error err = {0};
	int n = 0;

	assert_int_equal(iso_agent_cxi_list(f->x, r, &err), 0);
	for (int i = 0; i < r->n_services; i++)
		n += r->services[i].svc_id != 1;
	return n;
}

static int count_others(struct fx *f)
{
	struct iso_agent_cxi_report r;
	int n = others(f, &r);

	iso_agent_cxi_report_clear(&r);
	return n;
}

/* ---- the fake's rules, as a process meets them ---- */

struct user_fns {
	void *lib;
#define X(name, ret, params) ret(*name) params;
	CXI_FUNCTIONS(X)
	CXI_USER_FUNCTIONS(X)
#undef X
};

static int user_open(struct user_fns *u)
{
	if (!(u->lib = dlopen(fake_path(), RTLD_NOW | RTLD_LOCAL)))
		return -1;
#define X(name, ret, params)                                                                       \
	if (!(*(void **)(&u->name) = dlsym(u->lib, #name)))                                        \
		return -1;
	CXI_FUNCTIONS(X)
	CXI_USER_FUNCTIONS(X)
#undef X
	return 0;
}

/* In a child with uid/gid: use svc_id's LNI on vni. 0 when a CP was made,
 * else 10 + -errno of the call that refused (lni: +0, cp: +100). */
static int as_user(uid_t uid, gid_t gid, unsigned svc_id, unsigned vni)
{
	pid_t pid = fork();
	int status = -1;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct user_fns u;
		struct cxil_dev *dev;
		struct cxil_lni *lni;
		struct cxi_cp *cp;
		int r;

		if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
		    setresuid(uid, uid, uid) != 0 || user_open(&u) != 0 ||
		    u.cxil_open_device(0, &dev) != 0)
			_exit(1);
		if ((r = u.cxil_alloc_lni(dev, &lni, svc_id)) < 0)
			_exit(10 + -r);
		if ((r = u.cxil_alloc_cp(lni, vni, CXI_TC_BEST_EFFORT, CXI_TC_TYPE_DEFAULT, &cp)) <
		    0)
			_exit(110 + -r);
		u.cxil_destroy_cp(cp);
		u.cxil_destroy_lni(lni);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_fake_another_tenants_vni(void **state)
{
	struct fx *f = *state;
	uint32_t a, b;

	if (geteuid() != 0)
		skip();
	a = must_ensure(f, VNI_A, UID_A, UID_A);
	b = must_ensure(f, VNI_B, UID_B, UID_B);
	/* a member uses its own VNI through its own service */
	assert_int_equal(as_user(UID_A, UID_A, a, VNI_A), 0);
	assert_int_equal(as_user(UID_B, UID_B, b, VNI_B), 0);
	/* tenant B's process: not a member of A's service */
	assert_int_equal(as_user(UID_B, UID_B, a, VNI_A), 10 + EPERM);
	/* ... nor can it reach A's VNI through its own service */
	assert_int_equal(as_user(UID_B, UID_B, b, VNI_A), 110 + EPERM);
	/* an identity in no service at all */
	assert_int_equal(as_user(6000, 6000, a, VNI_A), 10 + EPERM);
	/* the gid alone is a member (CXI_SVC_MEMBER_GID) */
	assert_int_equal(as_user(6000, UID_A, a, VNI_A), 0);
	/* the default service is disabled: nobody gets in through it */
	assert_int_equal(as_user(UID_A, UID_A, 1, 1), 10 + EINVAL);
}

static void test_fake_privileged_and_limits(void **state)
{
	struct fx *f = *state;
	struct user_fns u;
	struct cxil_dev *dev;
	struct cxi_svc_desc d = {.restricted_vnis = 1, .num_vld_vnis = 1, .vnis = {7}};
	pid_t pid;
	int status;

	assert_int_equal(user_open(&u), 0);
	assert_int_equal(u.cxil_open_device(0, &dev), 0);
	assert_int_equal(u.cxil_open_device(1, &dev), -ENODEV);
	/* validate_descriptor's rules */
	d.num_vld_vnis = 0;
	assert_int_equal(u.cxil_alloc_svc(dev, &d, NULL), -EINVAL);
	d.num_vld_vnis = 5;
	assert_int_equal(u.cxil_alloc_svc(dev, &d, NULL), -EINVAL);
	d.num_vld_vnis = 1;
	d.vnis[0] = 0;
	assert_int_equal(u.cxil_alloc_svc(dev, &d, NULL), -EINVAL);
	d.vnis[0] = 7;
	d.restricted_members = 1;
	d.members[0].type = (enum cxi_svc_member_type)7;
	assert_int_equal(u.cxil_alloc_svc(dev, &d, NULL), -EINVAL);
	d.members[0].type = CXI_SVC_MEMBER_UID;
	/* ids from 2 up, lowest free first; -ENOSPC past max_services (64) */
	for (int i = 0; i < 63; i++)
		assert_int_equal(u.cxil_alloc_svc(dev, &d, NULL), 2 + i);
	assert_int_equal(u.cxil_alloc_svc(dev, &d, NULL), -ENOSPC);
	assert_int_equal(u.cxil_destroy_svc(dev, 5), 0);
	assert_int_equal(u.cxil_alloc_svc(dev, &d, NULL), 5);
	assert_int_equal(u.cxil_destroy_svc(dev, 1), -EINVAL);
	assert_int_equal(u.cxil_destroy_svc(dev, 999), -EINVAL);
	(void)f;
	if (geteuid() != 0)
		goto out;
	/* only root allocates services */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setresuid(UID_A, UID_A, UID_A) != 0)
			_exit(1);
		_exit(u.cxil_alloc_svc(dev, &d, NULL) == -EPERM ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(WEXITSTATUS(status), 0);
out:
	u.cxil_close_device(dev);
	dlclose(u.lib);
}

/* ---- the driver ---- */

static void test_ensure_idempotent_read_back(void **state)
{
	struct fx *f = *state;
	struct iso_agent_cxi_report r;
	uint32_t a = must_ensure(f, VNI_A, UID_A, UID_A);
	const struct iso_cxi_service *s = NULL;

	assert_int_equal(must_ensure(f, VNI_A, UID_A, UID_A), a);
	assert_int_equal(others(f, &r), 1);
	assert_string_equal(r.device, "cxi0");
	for (int i = 0; i < r.n_services; i++)
		if (r.services[i].svc_id == a)
			s = &r.services[i];
	assert_non_null(s);
	assert_true(s->enabled && s->restricted_members && s->restricted_vnis && !s->system);
	assert_int_equal(s->n_vnis, 1);
	assert_int_equal(s->vnis[0], VNI_A);
	assert_int_equal(s->n_members, 2);
	assert_int_equal(s->members[0].type, ISO_CXI_MEMBER_UID);
	assert_int_equal(s->members[0].id, UID_A);
	assert_int_equal(s->members[1].type, ISO_CXI_MEMBER_GID);
	/* the default service is listed as the NIC holds it: VNIs 1 and 10, off */
	assert_int_equal(r.services[0].svc_id, 1);
	assert_false(r.services[0].enabled);
	assert_false(r.services[0].restricted_members);
	assert_int_equal(r.services[0].n_vnis, 2);
	iso_agent_cxi_report_clear(&r);
	/* another identity on the same VNI (a second pod of the tenant) */
	assert_int_not_equal(must_ensure(f, VNI_A, 5003, 5003), a);
	assert_int_equal(count_others(f), 2);
}

static void test_ensure_refusals(void **state)
{
	struct fx *f = *state;
	struct iso_error err = {0};
	uint32_t id = 7;

	assert_int_equal(iso_agent_cxi_ensure(f->x, VNI_A, 0, UID_A, &id, &err), -EINVAL);
	assert_string_equal(err.field, "uid");
	assert_int_equal(id, 0);
	assert_int_equal(iso_agent_cxi_ensure(f->x, VNI_A, UID_A, 0, &id, &err), -EINVAL);
	assert_string_equal(err.field, "gid");
	assert_int_equal(iso_agent_cxi_ensure(f->x, 0, UID_A, UID_A, &id, &err), -EINVAL);
	assert_string_equal(err.field, "vni");
	assert_int_equal(iso_agent_cxi_ensure(f->x, 65536, UID_A, UID_A, &id, &err), -EINVAL);
	assert_string_equal(err.field, "vni");
	must_ensure(f, VNI_A, UID_A, UID_A);
	/* one identity, one tenant's VNI: the uid, then the gid */
	assert_int_equal(iso_agent_cxi_ensure(f->x, VNI_B, UID_A, UID_B, &id, &err), -EEXIST);
	assert_string_equal(err.field, "uid");
	assert_int_equal(iso_agent_cxi_ensure(f->x, VNI_B, UID_B, UID_A, &id, &err), -EEXIST);
	assert_string_equal(err.field, "gid");
	assert_int_equal(count_others(f), 1);
}

static void test_destroy(void **state)
{
	struct fx *f = *state;
	struct iso_error err = {0};
	uint32_t a = must_ensure(f, VNI_A, UID_A, UID_A);

	assert_int_equal(iso_agent_cxi_destroy(f->x, 1, &err), -EPERM);
	assert_string_equal(err.field, "svc_id");
	assert_int_equal(iso_agent_cxi_destroy(f->x, a, &err), 0);
	assert_int_equal(count_others(f), 0);
	assert_int_equal(iso_agent_cxi_destroy(f->x, a, &err), -ENOENT);
}

static void test_destroy_busy(void **state)
{
	struct fx *f = *state;
	struct iso_error err = {0};
	uint32_t a = must_ensure(f, VNI_A, UID_A, UID_A);
	int go[2], done[2];
	pid_t pid;
	char c = 0;

	if (geteuid() != 0)
		skip();
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct user_fns u;
		struct cxil_dev *dev;
		struct cxil_lni *lni;
		if (setresgid(UID_A, UID_A, UID_A) != 0 || setresuid(UID_A, UID_A, UID_A) != 0 ||
		    user_open(&u) != 0 || u.cxil_open_device(0, &dev) != 0 ||
		    u.cxil_alloc_lni(dev, &lni, a) != 0)
			_exit(1);
		if (write(go[1], "x", 1) != 1 || read(done[0], &c, 1) != 1)
			_exit(2);
		u.cxil_destroy_lni(lni);
		_exit(0);
	}
	close(go[1]);
	close(done[0]);
	assert_int_equal(read(go[0], &c, 1), 1);
	assert_int_equal(iso_agent_cxi_destroy(f->x, a, &err), -EBUSY);
	assert_int_equal(count_others(f), 1);
	assert_int_equal(write(done[1], "x", 1), 1);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(iso_agent_cxi_destroy(f->x, a, &err), 0);
}

static void test_failed_call_leaves_nothing(void **state)
{
	struct fx *f = *state;
	struct iso_error err = {0};
	uint32_t id = 0;

	/* the read-back of the new service fails: it is destroyed again */
	setenv("ISOSTACK_FAKE_CXI_FAIL", "cxil_get_svc=5", 1);
	assert_int_equal(iso_agent_cxi_ensure(f->x, VNI_A, UID_A, UID_A, &id, &err), -EIO);
	assert_non_null(strstr(err.message, "cxil_get_svc"));
	unsetenv("ISOSTACK_FAKE_CXI_FAIL");
	assert_int_equal(count_others(f), 0);
	/* a NIC that drops the member restriction: refused and destroyed */
	setenv("ISOSTACK_FAKE_CXI_QUIRK", "drop_members", 1);
	assert_int_equal(iso_agent_cxi_ensure(f->x, VNI_A, UID_A, UID_A, &id, &err), -EIO);
	assert_non_null(strstr(err.message, "does not read back"));
	unsetenv("ISOSTACK_FAKE_CXI_QUIRK");
	assert_int_equal(count_others(f), 0);
	/* the allocation itself fails: its errno, nothing made */
	setenv("ISOSTACK_FAKE_CXI_FAIL", "cxil_alloc_svc=28", 1);
	assert_int_equal(iso_agent_cxi_ensure(f->x, VNI_A, UID_A, UID_A, &id, &err), -ENOSPC);
	unsetenv("ISOSTACK_FAKE_CXI_FAIL");
	assert_int_equal(count_others(f), 0);
}

static void test_library_without_cxi(void **state)
{
	struct iso_agent_cxi *x = NULL;
	struct iso_error err = {0};

	(void)state;
	assert_int_equal(iso_agent_cxi_open("libc.so.6", 0, &x, &err), -EAGAIN);
	assert_string_equal(err.field, "library");
	assert_non_null(strstr(err.message, "cxil_open_device"));
	assert_int_equal(iso_agent_cxi_open("/nonexistent/libcxi.so.1", 0, &x, &err), -EAGAIN);
	assert_null(x);
	assert_int_equal(iso_agent_cxi_open(NULL, 3, &x, &err), -ENODEV);
	assert_string_equal(err.field, "device");
}

static struct iso_agent_member_want want(const char *alloc, unsigned member, uint32_t vni)
{
	struct iso_agent_member_want w = {.member = member, .has_cxi = vni != 0, .cxi_vni = vni};

	iso_strlcpy(w.allocation, alloc, sizeof(w.allocation));
	return w;
}

static void test_reconcile(void **state)
{
	struct fx *f = *state;
	struct iso_error err = {0};
	struct iso_agent_cxi_report r;
	struct iso_agent_member_want w[6] = {
	    want("a-0000000000000001", 0, VNI_A), /* identity in the document */
	    want("a-0000000000000001", 1, VNI_A), /* identity from the attachment */
	    want("a-0000000000000002", 0, VNI_B), /* no identity yet */
	    want("a-0000000000000003", 0, VNI_B), /* shares uid 5005 with ... */
	    want("a-0000000000000004", 0, VNI_A), /* ... this one, another VNI */
	    want("a-0000000000000005", 0, 0),     /* no cxi: nothing to do */
	};
	struct iso_agent_cxi_member_in in[6] = {{0}};
	uint32_t kept[2];

	w[0].cxi_ident = true;
	w[0].cxi_uid = w[0].cxi_gid = UID_A;
	for (int i = 0; i < 6; i++)
		in[i].want = &w[i];
	in[1].has_ident = true;
	in[1].uid = in[1].gid = 5004;
	in[3].has_ident = in[4].has_ident = true;
	in[3].uid = in[4].uid = 5005;
	in[3].gid = 5006;
	in[4].gid = 5007;
	/* something nobody wants, left on the NIC (a crashed agent, a hand) */
	must_ensure(f, 999, 6000, 6000);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(iso_agent_cxi_reconcile(f->x, in, 6, &r, &err), 0);
		assert_true(in[0].ready && in[1].ready && in[5].ready);
		assert_false(in[2].ready);
		assert_non_null(strstr(in[2].reason, "waiting"));
		assert_false(in[3].ready || in[4].ready);
		assert_non_null(strstr(in[3].reason, "uid 5005"));
		assert_non_null(strstr(in[4].reason, "uid 5005"));
		assert_int_equal(r.n_services, 3);     /* the default one and two */
		for (int i = 1; i < r.n_services; i++) /* the foreign one is gone */
			assert_int_not_equal(r.services[i].vnis[0], 999);
		if (pass == 0) {
			kept[0] = in[0].svc_id;
			kept[1] = in[1].svc_id;
		} else { /* level-triggered: the second pass changes nothing */
			assert_int_equal(in[0].svc_id, kept[0]);
			assert_int_equal(in[1].svc_id, kept[1]);
		}
		iso_agent_cxi_report_clear(&r);
	}
	/* the members leave: their services go, the default one stays */
	assert_int_equal(iso_agent_cxi_reconcile(f->x, in, 0, &r, &err), 0);
	assert_int_equal(r.n_services, 1);
	assert_int_equal(r.services[0].svc_id, 1);
	iso_agent_cxi_report_clear(&r);
}

/* ---- the daemon's side: the socket's cxi_admit (issue 17) ---- */

#define ACME_A "a-00000000000000a1"
#define ACME_B "a-00000000000000a2"
#define GLOBEX "a-00000000000000b1"
#define PLAIN  "a-00000000000000c1"

static void test_admit_request_parse(void **state)
{
	static const struct {
		const char *text, *field;
	} bad[] = {
	    {"{\"op\":\"cxi_grant\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":5001,\"gid\":5001}",
	     "op"},
	    {"{\"op\":1,\"tenant\":\"acme\"}", "op"},
	    {"{\"op\":\"cxi_admit\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":5001,\"gid\":5001}",
	     "tenant"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"a b\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":5001,\"gid\":5001}",
	     "tenant"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"a-12\","
	     "\"member\":0,\"uid\":5001,\"gid\":5001}",
	     "allocation"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	     "\",\"member\":1024,\"uid\":5001,\"gid\":5001}",
	     "member"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":0,\"gid\":5001}",
	     "uid"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":5001,\"gid\":0}",
	     "gid"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":4294967295,\"gid\":5001}",
	     "uid"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":\"5001\",\"gid\":5001}",
	     "uid"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":5001}",
	     "gid"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"uid\":5001,\"gid\":5001,\"vni\":1100}",
	     "vni"},
	    {"{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"key\":\"k\"}", "key"},
	};
	struct agent_request rq;
	const char *good = "{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
	                   "\",\"member\":3,\"uid\":5001,\"gid\":5002}";

	(void)state;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		struct iso_error e = {0};
		assert_true(agent_request_parse(bad[i].text, strlen(bad[i].text), &rq, &e) < 0);
		if (strcmp(e.field, bad[i].field) != 0)
			fail_msg("request %zu: field \"%s\", want \"%s\" (%s)", i, e.field,
			         bad[i].field, e.message);
		assert_false(rq.cxi_admit);
	}
	{
		struct iso_error e = {0};
		assert_int_equal(agent_request_parse(good, strlen(good), &rq, &e), 0);
		assert_true(rq.cxi_admit);
		assert_false(rq.by_key);
		assert_string_equal(rq.tenant, "acme");
		assert_string_equal(rq.allocation, ACME_A);
		assert_int_equal(rq.member, 3);
		assert_int_equal(rq.uid, 5001);
		assert_int_equal(rq.gid, 5002);
	}
}

static struct agent_table_entry tentry(const char *alloc, const char *tenant, uint32_t vni)
{
	struct agent_table_entry e = {.member = 0, .cxi_vni = vni, .member_ready = true};

	iso_strlcpy(e.node, "n1", sizeof(e.node));
	iso_strlcpy(e.allocation, alloc, sizeof(e.allocation));
	iso_strlcpy(e.tenant, tenant, sizeof(e.tenant));
	snprintf(e.key, sizeof(e.key), "k-%s", alloc + 16);
	return e;
}

static void desired_of(struct iso_agent_desired *d, struct iso_agent_member_want *w, size_t n)
{
	memset(d, 0, sizeof(*d));
	iso_strlcpy(d->node, "n1", sizeof(d->node));
	d->members = w;
	d->n_members = n;
}

static const json_t *cxi_member(const json_t *status, const char *alloc)
{
	size_t i;
	json_t *it;

	json_array_foreach (json_object_get(status, "cxi_members"), i, it)
		if (strcmp(json_string_value(json_object_get(it, "allocation")), alloc) == 0)
			return it;
	return NULL;
}

static void test_admit_over_the_socket(void **state)
{
	struct fx *f = *state;
	struct agent_sandboxes s;
	struct agent_host_roots roots = {"/dev", "/proc", "/"};
	struct agent_socket *sk = NULL;
	struct iso_agent_cxi_grant g;
	struct iso_agent_member_info mi;
	struct iso_error e = {0};
	atomic_bool stop = false;
	char node_dir[PATH_MAX + 8], file[PATH_MAX + 40];
	struct agent_cxi_config cc = {.dev_id = 0, .node = "n1", .node_dir = node_dir};
	struct iso_agent_member_want w[4] = {want(ACME_A, 0, VNI_A), want(ACME_B, 0, VNI_A),
	                                     want(GLOBEX, 0, VNI_B), want(PLAIN, 0, 0)};
	struct iso_agent_desired d;
	uint32_t svc;
	json_t *st;
	char *a;

	snprintf(node_dir, sizeof(node_dir), "%s/n1", f->dir);
	snprintf(file, sizeof(file), "%s/" AGENT_CXI_ADMITTED_FILE, node_dir);
	assert_int_equal(mkdir(node_dir, 0700), 0);
	assert_int_equal(agent_sandboxes_init(&s, f->dir, false, NULL, &roots, &e), 0);
	s.nodes_expected = 0; /* as after every node ticked */
	assert_int_equal(agent_cxi_new(&cc, &s.cxi, &e), 0);
	assert_int_equal(agent_socket_start(&s, f->dir, &stop, &sk, &e), 0);
	/* the table as the node's tick publishes it */
	pthread_mutex_lock(&s.lock);
	s.entries = calloc(4, sizeof(*s.entries));
	s.entries[0] = tentry(ACME_A, "acme", VNI_A);
	s.entries[1] = tentry(ACME_B, "acme", VNI_A);
	s.entries[2] = tentry(GLOBEX, "globex", VNI_B);
	s.entries[3] = tentry(PLAIN, "acme", 0);
	s.n = s.cap = 4;
	pthread_mutex_unlock(&s.lock);

	/* the member lookup says whether a member has a VNI */
	assert_int_equal(iso_agent_member_lookup(f->dir, "acme", "k-a1", &mi, &e), 0);
	assert_true(mi.has_vni);
	assert_int_equal(mi.vni, VNI_A);
	assert_int_equal(iso_agent_member_lookup(f->dir, "acme", "k-c1", &mi, &e), 0);
	assert_false(mi.has_vni);

	/* admitted: the service appears; again: the same one */
	assert_int_equal(iso_agent_cxi_admit(f->dir, "acme", ACME_A, 0, UID_A, UID_A, &g, &e), 0);
	assert_int_equal(g.vni, VNI_A);
	assert_true(g.svc_id > 1);
	assert_string_equal(g.device, "cxi0");
	svc = g.svc_id;
	assert_int_equal(iso_agent_cxi_ensure(f->x, VNI_A, UID_A, UID_A, &svc, &e), 0);
	assert_int_equal(svc, g.svc_id); /* the NIC holds exactly that service */
	assert_int_equal(iso_agent_cxi_admit(f->dir, "acme", ACME_A, 0, UID_A, UID_A, &g, &e), 0);
	assert_int_equal(g.svc_id, svc);
	/* another member of the same tenant may share the identity */
	assert_int_equal(iso_agent_cxi_admit(f->dir, "acme", ACME_B, 0, UID_A, UID_A, &g, &e), 0);
	assert_int_equal(g.svc_id, svc);

	/* refusals, each naming its field */
#define REFUSED(call, want_code, fld)                                                              \
	do {                                                                                       \
		memset(&e, 0, sizeof(e));                                                          \
		assert_true((call) < 0);                                                           \
		if (e.code != (want_code) || strncmp(e.message, fld, strlen(fld)) != 0)            \
			fail_msg("%s: code %d, message \"%s\"", #call, e.code, e.message);         \
	} while (0)
	REFUSED(iso_agent_cxi_admit(f->dir, "globex", ACME_A, 0, UID_B, UID_B, &g, &e),
	        ISO_E_FORBIDDEN, "tenant");
	REFUSED(iso_agent_cxi_admit(f->dir, "acme", ACME_A, 0, UID_A + 9, UID_A, &g, &e),
	        ISO_E_CONFLICT, "uid");
	REFUSED(iso_agent_cxi_admit(f->dir, "globex", GLOBEX, 0, UID_A, 7000, &g, &e),
	        ISO_E_CONFLICT, "uid");
	assert_null(strstr(e.message, ACME_A)); /* never whose */
	REFUSED(iso_agent_cxi_admit(f->dir, "globex", GLOBEX, 0, 7000, UID_A, &g, &e),
	        ISO_E_CONFLICT, "gid");
	REFUSED(iso_agent_cxi_admit(f->dir, "acme", PLAIN, 0, UID_B, UID_B, &g, &e), ISO_E_INVALID,
	        "member");
	REFUSED(iso_agent_cxi_admit(f->dir, "acme", "a-00000000000000ff", 0, UID_B, UID_B, &g, &e),
	        ISO_E_NOT_FOUND, "not on this node");
	REFUSED(iso_agent_cxi_admit(f->dir, "acme", ACME_A, 0, 0, UID_A, &g, &e), ISO_E_INVALID,
	        "uid");
	REFUSED(iso_agent_cxi_admit(f->dir, "acme", ACME_A, 0, UID_A, 0, &g, &e), ISO_E_INVALID,
	        "gid");
#undef REFUSED
	/* the socket itself refuses root's identity and non-root callers */
	{
		const char *rq =
		    "{\"op\":\"cxi_admit\",\"tenant\":\"acme\",\"allocation\":\"" ACME_A
		    "\",\"member\":0,\"uid\":0,\"gid\":0}";
		a = agent_socket_answer(&s, 0, rq, strlen(rq));
	}
	assert_non_null(strstr(a, "\"error\":\"invalid_argument\""));
	assert_non_null(strstr(a, "uid"));
	free(a);
	a = agent_socket_answer(&s, 1000, "{\"op\":\"cxi_admit\"}", 18);
	assert_non_null(strstr(a, "\"error\":\"forbidden\""));
	free(a);
	assert_int_equal(iso_agent_cxi_admit(f->dir, "globex", GLOBEX, 0, UID_B, UID_B, &g, &e), 0);
	assert_int_not_equal(g.svc_id, svc);

	/* a tick keeps both services and says each member ready */
	desired_of(&d, w, 4);
	st = json_object();
	agent_cxi_tick(s.cxi, "n1", &d, st);
	assert_int_equal(json_array_size(json_object_get(json_object_get(st, "cxi"), "services")),
	                 3);
	assert_true(json_is_true(json_object_get(cxi_member(st, ACME_A), "ready")));
	assert_int_equal(json_integer_value(json_object_get(cxi_member(st, ACME_A), "svc_id")),
	                 svc);
	assert_null(cxi_member(st, PLAIN)); /* no VNI, no entry */
	json_decref(st);

	/* a restart: the identities come back from the file, the services
	 * are the same ones */
	atomic_store(&stop, true);
	agent_socket_stop(sk);
	agent_cxi_free(s.cxi);
	assert_int_equal(agent_cxi_new(&cc, &s.cxi, &e), 0);
	st = json_object();
	agent_cxi_tick(s.cxi, "n1", &d, st);
	assert_int_equal(json_integer_value(json_object_get(cxi_member(st, ACME_A), "svc_id")),
	                 svc);
	assert_int_equal(json_array_size(json_object_get(json_object_get(st, "cxi"), "services")),
	                 3);
	json_decref(st);

	/* acme's members leave: their identity and service go, globex's stay */
	desired_of(&d, &w[2], 2);
	st = json_object();
	agent_cxi_tick(s.cxi, "n1", &d, st);
	assert_int_equal(json_array_size(json_object_get(json_object_get(st, "cxi"), "services")),
	                 2);
	assert_true(json_is_true(json_object_get(cxi_member(st, GLOBEX), "ready")));
	json_decref(st);
	{
		FILE *fp = fopen(file, "r");
		char buf[4096] = "";
		assert_non_null(fp);
		assert_true(fread(buf, 1, sizeof(buf) - 1, fp) > 0);
		fclose(fp);
		assert_null(strstr(buf, ACME_A));
		assert_non_null(strstr(buf, GLOBEX));
	}
	agent_cxi_free(s.cxi);
	s.cxi = NULL;
	agent_sandboxes_free(&s);
}

static void test_admitted_file_bad_input(void **state)
{
	static const struct {
		const char *text, *field;
	} bad[] = {
	    {"[]", ""},
	    {"{\"admitted\":{}}", "admitted"},
	    {"{\"admitted\":[],\"x\":1}", "x"},
	    {"{\"admitted\":[1]}", "admitted[0]"},
	    {"{\"admitted\":[{\"allocation\":\"a-1\",\"member\":0,\"vni\":1,\"uid\":1,\"gid\":1}]}",
	     "allocation"},
	    {"{\"admitted\":[{\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"vni\":0,\"uid\":1,\"gid\":1}]}",
	     "admitted[0].vni"},
	    {"{\"admitted\":[{\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"vni\":1,\"uid\":0,\"gid\":1}]}",
	     "admitted[0].uid"},
	    {"{\"admitted\":[{\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"vni\":1,\"uid\":1,\"gid\":1},{\"allocation\":\"" ACME_A
	     "\",\"member\":0,\"vni\":1,\"uid\":2,\"gid\":2}]}",
	     "member"},
	};
	struct agent_cxi_admit *v = NULL;
	size_t n = 0;

	(void)state;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		struct iso_error e = {0};
		assert_true(
		    agent_cxi_admitted_decode(bad[i].text, strlen(bad[i].text), &v, &n, &e) < 0);
		assert_null(v);
		if (strcmp(e.field, bad[i].field) != 0)
			fail_msg("file %zu: field \"%s\", want \"%s\" (%s)", i, e.field,
			         bad[i].field, e.message);
	}
}

static void test_a_garbled_file_touches_nothing(void **state)
{
	struct fx *f = *state;
	char node_dir[PATH_MAX + 8], file[PATH_MAX + 40];
	struct agent_cxi_config cc = {.node = "n1", .node_dir = node_dir};
	struct iso_agent_member_want w[1] = {want(ACME_A, 0, VNI_A)};
	struct iso_agent_desired d;
	struct agent_cxi *c = NULL;
	struct iso_error e = {0};
	json_t *st = json_object();
	FILE *fp;

	snprintf(node_dir, sizeof(node_dir), "%s/n1", f->dir);
	snprintf(file, sizeof(file), "%s/" AGENT_CXI_ADMITTED_FILE, node_dir);
	assert_int_equal(mkdir(node_dir, 0700), 0);
	assert_non_null(fp = fopen(file, "w"));
	fputs("{\"admitted\":[{\"allocation\":", fp);
	fclose(fp);
	must_ensure(f, VNI_A, UID_A, UID_A); /* a running member's, say */
	assert_int_equal(agent_cxi_new(&cc, &c, &e), 0);
	desired_of(&d, w, 1);
	agent_cxi_tick(c, "n1", &d, st);
	assert_false(json_is_true(json_object_get(cxi_member(st, ACME_A), "ready")));
	assert_non_null(strstr(json_string_value(json_object_get(cxi_member(st, ACME_A), "reason")),
	                       AGENT_CXI_ADMITTED_FILE));
	assert_null(json_object_get(st, "cxi"));
	{
		struct iso_agent_cxi_report r;
		assert_int_equal(iso_agent_cxi_list(f->x, &r, &e), 0);
		assert_int_equal(r.n_services, 2); /* still there */
		iso_agent_cxi_report_clear(&r);
	}
	json_decref(st);
	agent_cxi_free(c);
}

static void test_no_library_or_none(void **state)
{
	struct fx *f = *state;
	char node_dir[PATH_MAX + 8];
	struct agent_cxi_config missing = {.library = "/nonexistent/libcxi.so.1",
	                                   .always = true,
	                                   .node = "n1",
	                                   .node_dir = node_dir},
	                        none = {.off = true, .node = "n1", .node_dir = node_dir},
	                        several = {.node = NULL};
	const struct agent_cxi_config *cfgs[3] = {&missing, &none, &several};
	const char *why[3] = {"no CXI driver on this node: cannot load /nonexistent",
	                      "--cxi-library none", "one --node per agent"};
	struct iso_agent_member_want w[2] = {want(ACME_A, 0, VNI_A), want(PLAIN, 0, 0)};
	struct iso_agent_desired d;

	snprintf(node_dir, sizeof(node_dir), "%s/n1", f->dir);
	assert_int_equal(mkdir(node_dir, 0700), 0);
	for (int i = 0; i < 3; i++) {
		struct agent_cxi *c = NULL;
		struct iso_error e = {0};
		json_t *st = json_object();
		const json_t *m;

		assert_int_equal(agent_cxi_new(cfgs[i], &c, &e), 0);
		desired_of(&d, w, 2);
		agent_cxi_tick(c, "n1", &d, st);
		assert_non_null(m = cxi_member(st, ACME_A));
		assert_false(json_is_true(json_object_get(m, "ready")));
		if (!strstr(json_string_value(json_object_get(m, "reason")), why[i]))
			fail_msg("%d: %s", i, json_string_value(json_object_get(m, "reason")));
		assert_null(json_object_get(st, "cxi"));
		json_decref(st);
		/* a node without members with a VNI: nothing said (not slingshot) */
		st = json_object();
		desired_of(&d, &w[1], 1);
		agent_cxi_tick(c, "n1", &d, st);
		assert_null(json_object_get(st, "cxi_members"));
		json_decref(st);
		agent_cxi_free(c);
	}
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_fake_another_tenants_vni),
	    T(test_fake_privileged_and_limits),
	    T(test_ensure_idempotent_read_back),
	    T(test_ensure_refusals),
	    T(test_destroy),
	    T(test_destroy_busy),
	    T(test_failed_call_leaves_nothing),
	    T(test_library_without_cxi),
	    T(test_reconcile),
	    cmocka_unit_test(test_admit_request_parse),
	    T(test_admit_over_the_socket),
	    cmocka_unit_test(test_admitted_file_bad_input),
	    T(test_a_garbled_file_touches_nothing),
	    T(test_no_library_or_none),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

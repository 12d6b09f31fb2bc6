/* cxi.c: a Slingshot node's CXI services, the NIC-side half of a tenant's
 * isolation (docs/agent.md "CXI services", docs/fabric.md "Slingshot").
 * Every Slingshot message carries a VNI, and a process may use a VNI only
 * through a CXI service of its node that lists the VNI and admits the
 * process's uid or gid. So each member gets one service: restricted to its
 * tenant's VNI (from the controller, never from the attachment) and to its
 * uid and gid. libcxi is not in Debian: it is loaded with dlopen, with our
 * own declarations of the subset we call (cxi_abi.h), like the NVML driver.
 *
 * A service has no name on the NIC, so its identity is its content: the
 * service that admits exactly (uid, gid) to exactly one VNI. That makes
 * ensure idempotent across agent restarts without a file of ours, and lets
 * the reconcile pass destroy whatever no member explains (svc_ids are
 * reused by the driver, so an id is never taken as identity). */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/agent.h"
#include "agent/cxi_abi.h"

#define CXI_DEFAULT_LIBRARY "libcxi.so.1"

struct cxi_fns {
/* NOLINTNEXTLINE(bugprone-macro-parentheses): a declarator, not an expression */
#define X(name, ret, params) ret(*name) params;
	CXI_FUNCTIONS(X)
#undef X
};

struct iso_agent_cxi {
	void *lib;
	struct cxi_fns f;
	struct cxil_dev *dev;
	unsigned dev_id;
	char path[PATH_MAX];
};

static int cxi_fail(struct iso_error *err, int rc, const char *field, const char *call,
                    const char *what)
{
	enum iso_errcode code = rc == -EPERM    ? ISO_E_FORBIDDEN
	                        : rc == -ENOSPC ? ISO_E_NO_CAPACITY
	                        : rc == -EBUSY  ? ISO_E_CONFLICT
	                        : rc == -EINVAL ? ISO_E_INVALID
	                                        : ISO_E_INTERNAL;

	iso_error_set(err, code, field, "%s%s%s: %s", call, what ? " " : "", what ? what : "",
	              strerror(-rc));
	return rc < 0 ? rc : -EIO;
}

void iso_agent_cxi_close(struct iso_agent_cxi *x)
{
	if (!x)
		return;
	if (x->dev)
		x->f.cxil_close_device(x->dev);
	if (x->lib)
		dlclose(x->lib);
	free(x);
}

int iso_agent_cxi_open(const char *library, unsigned dev_id, struct iso_agent_cxi **out,
                       struct iso_error *err)
{
	const char *lib = library && *library ? library : getenv("ISOSTACK_CXI_LIBRARY");
	struct iso_agent_cxi *x;
	int r;

	*out = NULL;
	if (!lib || !*lib)
		lib = CXI_DEFAULT_LIBRARY;
	if (!(x = calloc(1, sizeof(*x))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	iso_strlcpy(x->path, lib, sizeof(x->path));
	x->dev_id = dev_id;
	if (!(x->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
		iso_error_set(err, ISO_E_UNAVAILABLE, "library", "cannot load %s: %s", lib,
		              dlerror());
		iso_agent_cxi_close(x);
		return -EAGAIN;
	}
#define X(name, ret, params)                                                                       \
	*(void **)(&x->f.name) = dlsym(x->lib, #name);                                             \
	if (!x->f.name) {                                                                          \
		iso_error_set(err, ISO_E_UNAVAILABLE, "library", "%s has no %s", lib, #name);      \
		iso_agent_cxi_close(x);                                                            \
		return -EAGAIN;                                                                    \
	}
	CXI_FUNCTIONS(X)
#undef X
	if ((r = x->f.cxil_open_device(dev_id, &x->dev)) < 0) {
		x->dev = NULL;
		cxi_fail(err, r, "device", "cxil_open_device", NULL);
		iso_agent_cxi_close(x);
		return r;
	}
	*out = x;
	return 0;
}

static void from_desc(const struct cxi_svc_desc *d, struct iso_cxi_service *s)
{
	memset(s, 0, sizeof(*s));
	s->svc_id = d->svc_id;
	s->enabled = d->enable;
	s->system = d->is_system_svc;
	s->restricted_members = d->restricted_members;
	s->restricted_vnis = d->restricted_vnis;
	for (int i = 0; d->restricted_vnis && i < d->num_vld_vnis && i < CXI_SVC_MAX_VNIS; i++)
		s->vnis[s->n_vnis++] = d->vnis[i];
	for (int i = 0; i < CXI_SVC_MAX_MEMBERS; i++)
		if (d->members[i].type == CXI_SVC_MEMBER_UID ||
		    d->members[i].type == CXI_SVC_MEMBER_GID)
			s->members[s->n_members++] = (struct iso_cxi_member){
			    d->members[i].type == CXI_SVC_MEMBER_UID ? ISO_CXI_MEMBER_UID
			                                             : ISO_CXI_MEMBER_GID,
			    d->members[i].svc_member.uid};
}

static int svc_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct iso_cxi_service *)a)->svc_id;
	uint32_t y = ((const struct iso_cxi_service *)b)->svc_id;

	return (x > y) - (x < y);
}

void iso_agent_cxi_report_clear(struct iso_agent_cxi_report *r)
{
	free(r->services);
	memset(r, 0, sizeof(*r));
}

int iso_agent_cxi_list(struct iso_agent_cxi *x, struct iso_agent_cxi_report *out,
                       struct iso_error *err)
{
	struct cxil_svc_list *l = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	snprintf(out->device, sizeof(out->device), "cxi%u", x->dev_id);
	if ((r = x->f.cxil_get_svc_list(x->dev, &l)) < 0)
		return cxi_fail(err, r, "device", "cxil_get_svc_list", NULL);
	if (l->count > ISO_CXI_MAX_SERVICES) {
		x->f.cxil_free_svc_list(l);
		return iso_error_set(err, ISO_E_INTERNAL, "device",
		                     "cxil_get_svc_list: %u services, more than the %d a report "
		                     "holds",
		                     l->count, ISO_CXI_MAX_SERVICES);
	}
	if (!(out->services = calloc(l->count + 1, sizeof(*out->services)))) {
		x->f.cxil_free_svc_list(l);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	for (unsigned i = 0; i < l->count; i++)
		from_desc(&l->descs[i], &out->services[out->n_services++]);
	x->f.cxil_free_svc_list(l);
	if (out->n_services > 0)
		qsort(out->services, (size_t)out->n_services, sizeof(*out->services), svc_cmp);
	return 0;
}

/* Is s exactly the service of (vni, uid, gid)? */
static bool is_ours(const struct iso_cxi_service *s, uint32_t vni, uint32_t uid, uint32_t gid)
{
	return s->enabled && !s->system && s->restricted_members && s->restricted_vnis &&
	       s->n_vnis == 1 && s->vnis[0] == vni && s->n_members == 2 &&
	       s->members[0].type == ISO_CXI_MEMBER_UID && s->members[0].id == uid &&
	       s->members[1].type == ISO_CXI_MEMBER_GID && s->members[1].id == gid;
}

/* Does enabled service s admit uid or gid to a VNI other than `vni` (or to
 * every VNI)? Names which of the two in *which. The default service and an
 * unrestricted one admit everybody and are the verifier's no_guard, not a
 * conflict of identities. */
static bool admits_elsewhere(const struct iso_cxi_service *s, uint32_t vni, uint32_t uid,
                             uint32_t gid, const char **which)
{
	bool other_vni = !s->restricted_vnis || s->n_vnis != 1 || s->vnis[0] != vni;

	if (!s->enabled || !s->restricted_members || !other_vni)
		return false;
	for (int k = 0; k < s->n_members; k++) {
		if (s->members[k].type == ISO_CXI_MEMBER_UID && s->members[k].id == uid) {
			*which = "uid";
			return true;
		}
		if (s->members[k].type == ISO_CXI_MEMBER_GID && s->members[k].id == gid) {
			*which = "gid";
			return true;
		}
	}
	return false;
}

static int check_args(uint32_t vni, uint32_t uid, uint32_t gid, struct iso_error *err)
{
	if (vni == 0 || vni > ISO_CXI_VNI_MAX)
		return iso_error_set(err, ISO_E_INVALID, "vni", "vni: %u is not 1..%u", vni,
		                     ISO_CXI_VNI_MAX);
	if (uid == 0 || uid == UINT32_MAX)
		return iso_error_set(err, ISO_E_INVALID, "uid",
		                     "uid: %u refused (a service that admits root admits every "
		                     "root process of every tenant)",
		                     uid);
	if (gid == 0 || gid == UINT32_MAX)
		return iso_error_set(err, ISO_E_INVALID, "gid", "gid: %u refused (root's group)",
		                     gid);
	return 0;
}

/* Allocates the service and reads it back; destroys it again when the
 * device does not hold what was asked. */
static int make(struct iso_agent_cxi *x, uint32_t vni, uint32_t uid, uint32_t gid, uint32_t *svc_id,
                struct iso_error *err)
{
	struct cxi_svc_desc d, back;
	struct cxi_svc_fail_info fail;
	struct iso_cxi_service s;
	int id, r;

	memset(&d, 0, sizeof(d));
	d.restricted_members = 1;
	d.restricted_vnis = 1;
	d.enable = 1;
	d.num_vld_vnis = 1;
	d.vnis[0] = (uint16_t)vni;
	d.members[0].type = CXI_SVC_MEMBER_UID;
	d.members[0].svc_member.uid = uid;
	d.members[1].type = CXI_SVC_MEMBER_GID;
	d.members[1].svc_member.gid = gid;
	for (int t = CXI_TC_DEDICATED_ACCESS; t <= CXI_TC_BEST_EFFORT; t++)
		d.tcs[t] = true;
	if ((id = x->f.cxil_alloc_svc(x->dev, &d, &fail)) < 0)
		return cxi_fail(err, id, "vni", "cxil_alloc_svc", NULL);
	memset(&back, 0, sizeof(back));
	if ((r = x->f.cxil_get_svc(x->dev, (unsigned)id, &back)) < 0) {
		cxi_fail(err, r, "vni", "cxil_get_svc", "(read-back of the new service)");
		x->f.cxil_destroy_svc(x->dev, (unsigned)id);
		return r;
	}
	from_desc(&back, &s);
	if (back.svc_id != (unsigned)id || !is_ours(&s, vni, uid, gid)) {
		x->f.cxil_destroy_svc(x->dev, (unsigned)id);
		return iso_error_set(err, ISO_E_INTERNAL, "vni",
		                     "cxil_alloc_svc: service %d does not read back as asked "
		                     "(VNI %u, uid %u, gid %u, both restrictions on); destroyed",
		                     id, vni, uid, gid);
	}
	*svc_id = (uint32_t)id;
	return 0;
}

/* ensure against a list already read: 0 when found there, 1 when made. */
static int ensure_in(struct iso_agent_cxi *x, const struct iso_agent_cxi_report *l, uint32_t vni,
                     uint32_t uid, uint32_t gid, uint32_t *svc_id, struct iso_error *err)
{
	const char *which = NULL;
	int r;

	if ((r = check_args(vni, uid, gid, err)) < 0)
		return r;
	for (int i = 0; i < l->n_services; i++)
		if (is_ours(&l->services[i], vni, uid, gid)) {
			*svc_id = l->services[i].svc_id;
			return 0;
		}
	for (int i = 0; i < l->n_services; i++)
		if (admits_elsewhere(&l->services[i], vni, uid, gid, &which))
			return iso_error_set(err, ISO_E_CONFLICT, which,
			                     "%s: %u is already admitted to another VNI by CXI "
			                     "service %u: one identity, one tenant's VNI",
			                     which, strcmp(which, "uid") == 0 ? uid : gid,
			                     l->services[i].svc_id); /* -EEXIST */
	return (r = make(x, vni, uid, gid, svc_id, err)) < 0 ? r : 1;
}

int iso_agent_cxi_ensure(struct iso_agent_cxi *x, uint32_t vni, uint32_t uid, uint32_t gid,
                         uint32_t *svc_id, struct iso_error *err)
{
	struct iso_agent_cxi_report l;
	int r;

	*svc_id = 0;
	if ((r = check_args(vni, uid, gid, err)) < 0)
		return r;
	if ((r = iso_agent_cxi_list(x, &l, err)) < 0)
		return r;
	r = ensure_in(x, &l, vni, uid, gid, svc_id, err);
	iso_agent_cxi_report_clear(&l);
	return r < 0 ? r : 0;
}

int iso_agent_cxi_find(struct iso_agent_cxi *x, uint32_t vni, uint32_t uid, uint32_t gid,
                       uint32_t *svc_id, struct iso_error *err)
{
	struct iso_agent_cxi_report l;
	int r;

	*svc_id = 0;
	if ((r = check_args(vni, uid, gid, err)) < 0)
		return r;
	if ((r = iso_agent_cxi_list(x, &l, err)) < 0)
		return r;
	r = -ENOENT;
	for (int i = 0; i < l.n_services && r < 0; i++)
		if (is_ours(&l.services[i], vni, uid, gid)) {
			*svc_id = l.services[i].svc_id;
			r = 0;
		}
	iso_agent_cxi_report_clear(&l);
	if (r < 0)
		iso_error_set(err, ISO_E_NOT_FOUND, "vni",
		              "no CXI service admits uid %u gid %u to VNI %u", uid, gid, vni);
	return r;
}

int iso_agent_cxi_destroy(struct iso_agent_cxi *x, uint32_t svc_id, struct iso_error *err)
{
	struct iso_agent_cxi_report l;
	const struct iso_cxi_service *s = NULL;
	int r;

	if (svc_id == CXI_DEFAULT_SVC_ID)
		return iso_error_set(err, ISO_E_FORBIDDEN, "svc_id",
		                     "svc_id: 1 is the NIC's default service; it is disabled, "
		                     "never destroyed"); /* -EPERM */
	if ((r = iso_agent_cxi_list(x, &l, err)) < 0)
		return r;
	for (int i = 0; i < l.n_services; i++)
		if (l.services[i].svc_id == svc_id)
			s = &l.services[i];
	if (!s || s->system) {
		r = s ? -EPERM : -ENOENT;
		iso_error_set(err, s ? ISO_E_FORBIDDEN : ISO_E_NOT_FOUND, "svc_id",
		              s ? "svc_id: %u is a system service" : "svc_id: no service %u",
		              svc_id);
		iso_agent_cxi_report_clear(&l);
		return r;
	}
	iso_agent_cxi_report_clear(&l);
	if ((r = x->f.cxil_destroy_svc(x->dev, svc_id)) < 0)
		return cxi_fail(err, r, "svc_id", "cxil_destroy_svc", NULL);
	return 0;
}

/* The identity member i's service admits: the document's, else the
 * attachment's. */
static bool ident_of(const struct iso_agent_cxi_member_in *m, uint32_t *uid, uint32_t *gid)
{
	if (m->want->cxi_ident) {
		*uid = m->want->cxi_uid;
		*gid = m->want->cxi_gid;
		return true;
	}
	*uid = m->uid;
	*gid = m->gid;
	return m->has_ident;
}

int iso_agent_cxi_reconcile(struct iso_agent_cxi *x, struct iso_agent_cxi_member_in *in, size_t n,
                            struct iso_agent_cxi_report *out, struct iso_error *err)
{
	struct iso_agent_cxi_report l;
	_cleanup_free_ bool *active = calloc(n + 1, sizeof(bool));
	uint32_t uid, gid, u2, g2;
	int r;

	memset(out, 0, sizeof(*out));
	if (!active)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	/* Who should hold a service: a member with a VNI and an identity, whose
	 * identity no member of another VNI shares. */
	for (size_t i = 0; i < n; i++) {
		struct iso_agent_cxi_member_in *m = &in[i];
		struct iso_error e = {0};

		m->svc_id = 0;
		m->ready = !m->want->has_cxi;
		m->reason[0] = '\0';
		if (!m->want->has_cxi)
			continue;
		if (!ident_of(m, &uid, &gid)) {
			iso_codec_reason_copy(m->reason,
			                      "waiting for the attachment's uid and gid");
			continue;
		}
		if (check_args(m->want->cxi_vni, uid, gid, &e) < 0) {
			iso_codec_reason_copy(m->reason, e.message);
			continue;
		}
		active[i] = true;
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; active[i] && j < n; j++) {
			if (!active[j] || in[j].want->cxi_vni == in[i].want->cxi_vni)
				continue;
			ident_of(&in[i], &uid, &gid);
			ident_of(&in[j], &u2, &g2);
			if (uid != u2 && gid != g2)
				continue;
			for (size_t k = 0; k < 2; k++) {
				struct iso_agent_cxi_member_in *m = k ? &in[j] : &in[i];
				char why[ISO_AGENT_REASON_MAX];
				snprintf(why, sizeof(why),
				         "%s %u is also a member of VNI %u on this node: refused, "
				         "one identity, one tenant's VNI",
				         uid == u2 ? "uid" : "gid", uid == u2 ? uid : gid,
				         (k ? in[i] : in[j]).want->cxi_vni);
				iso_codec_reason_copy(m->reason, why);
			}
			active[i] = active[j] = false;
		}
	if ((r = iso_agent_cxi_list(x, &l, err)) < 0)
		return r;
	/* Destroy what no active member explains, except the NIC's own. */
	for (int s = 0; s < l.n_services; s++) {
		const struct iso_cxi_service *sv = &l.services[s];
		bool wanted = false;
		struct iso_error e = {0};

		if (sv->svc_id == CXI_DEFAULT_SVC_ID || sv->system)
			continue;
		for (size_t i = 0; !wanted && i < n; i++)
			wanted = active[i] && ident_of(&in[i], &uid, &gid) &&
			         is_ours(sv, in[i].want->cxi_vni, uid, gid);
		if (!wanted && iso_agent_cxi_destroy(x, sv->svc_id, &e) < 0)
			iso_log(ISO_LOG_WARN, "cxi_destroy", "svc_id=%u: %s", sv->svc_id,
			        e.message);
	}
	iso_agent_cxi_report_clear(&l);
	if ((r = iso_agent_cxi_list(x, &l, err)) < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		struct iso_error e = {0};

		if (!active[i])
			continue;
		ident_of(&in[i], &uid, &gid);
		if ((r = ensure_in(x, &l, in[i].want->cxi_vni, uid, gid, &in[i].svc_id, &e)) < 0) {
			iso_codec_reason_copy(in[i].reason, e.message);
			continue;
		}
		in[i].ready = true;
		/* made one: read again, so that a member with the same identity
		 * and VNI finds it instead of making a second */
		if (r == 1) {
			iso_agent_cxi_report_clear(&l);
			if ((r = iso_agent_cxi_list(x, &l, err)) < 0)
				return r;
		}
	}
	iso_agent_cxi_report_clear(&l);
	return iso_agent_cxi_list(x, out, err);
}

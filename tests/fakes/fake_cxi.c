/* fake_cxi.c: a fake libcxi.so.1, for tests only. It exists so that the
 * node agent's CXI driver (src/agent/cxi.c: dlopen, dlsym, the libcxi call
 * sequence) and the proof that a process cannot use another tenant's VNI run
 * without a Slingshot NIC. It implements the subset of src/agent/cxi_abi.h
 * with the rules of HPE's CXI driver (docs/fabric.md "Slingshot" cites the
 * sources):
 *   - cxil_alloc_svc validates the descriptor as the driver's
 *     validate_descriptor does (restricted_vnis needs 1..4 valid VNIs, each
 *     1..65535; member types below CXI_SVC_MEMBER_MAX; limits max >= res),
 *     is privileged (-EPERM unless the caller's effective uid is 0), and
 *     hands out the lowest free svc_id above the default service's 1 (the
 *     driver's resource-group ids are allocated lowest first, so a destroyed
 *     service's id comes back); -ENOSPC past max_services;
 *   - cxil_destroy_svc: -EINVAL for the default service or an unknown id,
 *     -EBUSY while an LNI (of a live process) uses the service;
 *   - cxil_alloc_lni: -EPERM unless the service has no member restriction or
 *     the caller's effective uid (CXI_SVC_MEMBER_UID) or effective gid
 *     (CXI_SVC_MEMBER_GID) is one of its members (cxi_rgroup_valid_user);
 *     -EINVAL for an unknown or disabled service;
 *   - cxil_alloc_cp: -EINVAL for VNI 0 or above 65535, -EPERM when the LNI's
 *     service restricts VNIs and does not list this one (the real driver
 *     answers -ENOENT, "no TX profile for this VNI and user"; the driver
 *     treats both as a refusal);
 *   - the default service (id 1) exists from the start with VNIs 1 and 10,
 *     no member restriction, and disabled (the driver's disable_default_svc
 *     is on by default).
 *
 * Environment (docs/fabric.md, "The fake libcxi"):
 *   ISOSTACK_FAKE_CXI_STATE  JSON file with the services and live LNIs, shared
 *                            by every process (flock on STATE.lock), so the
 *                            agent, a pod's process and a test see one device;
 *                            without it the state lives in this process
 *   ISOSTACK_FAKE_CXI_FAIL   "cxil_function=ERRNO": that call returns -ERRNO
 *   ISOSTACK_FAKE_CXI_QUIRK  "drop_members": cxil_alloc_svc stores the service
 *                            without its member restriction (a device that
 *                            does not do what it was asked: the driver's
 *                            read-back must catch it)
 *   ISOSTACK_FAKE_CXI_MAX_SERVICES  services a new state allows (default 64)
 *   ISOSTACK_FAKE_CXI_DEFAULT_ENABLED  "1": a new state's default service is on
 *
 * Like the real library it keeps process-wide state (handles point into
 * it); it is not part of isostack's library. The state file is a test
 * fixture, read leniently: a file it cannot read is an -EIO, never a crash. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cxi_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* The prototypes from the same tables the driver resolves, so that a
 * signature that drifts from them does not compile. */
#define X(name, ret, params) EXPORT ret name params;
CXI_FUNCTIONS(X)
CXI_USER_FUNCTIONS(X)
#undef X

#define MAX_SVC     1024
#define MAX_LNI     1024
#define DEFAULT_MAX 64
#define VNI_LIMIT   0xffffu

struct cxil_dev {
	unsigned dev_id;
};
struct cxil_lni {
	unsigned id;
	unsigned svc_id;
};
struct cxi_cp {
	unsigned vni;
};

struct fake_lni {
	unsigned id, svc_id;
	long pid;
};

static struct {
	bool loaded; /* an in-process state (no file) was made */
	unsigned max_services;
	int n_svc;
	struct cxi_svc_desc svc[MAX_SVC];
	int n_lni;
	struct fake_lni lni[MAX_LNI];
	unsigned next_lni;
	int lock_fd;
	pthread_mutex_t mutex;
} F = {.lock_fd = -1, .mutex = PTHREAD_MUTEX_INITIALIZER};

static bool injected(const char *fn, int *rc)
{
	const char *spec = getenv("ISOSTACK_FAKE_CXI_FAIL");
	size_t len = strlen(fn);

	if (!spec || strncmp(spec, fn, len) != 0 || spec[len] != '=')
		return false;
	*rc = -atoi(spec + len + 1);
	return true;
}
#define FAILPOINT()                                                                                \
	do {                                                                                       \
		int _rc;                                                                           \
		if (injected(__func__, &_rc))                                                      \
			return _rc;                                                                \
	} while (0)

static const char *state_path(void)
{
	const char *p = getenv("ISOSTACK_FAKE_CXI_STATE");
	return p && *p ? p : NULL;
}

/* A fresh device: the default service only. */
static void fresh(void)
{
	const char *max = getenv("ISOSTACK_FAKE_CXI_MAX_SERVICES");
	const char *on = getenv("ISOSTACK_FAKE_CXI_DEFAULT_ENABLED");
	struct cxi_svc_desc *d = &F.svc[0];

	F.max_services =
	    max && atoi(max) > 0 && atoi(max) <= MAX_SVC ? (unsigned)atoi(max) : DEFAULT_MAX;
	F.n_svc = 1;
	F.n_lni = 0;
	F.next_lni = 1;
	memset(d, 0, sizeof(*d));
	d->svc_id = CXI_DEFAULT_SVC_ID;
	d->restricted_vnis = 1;
	d->num_vld_vnis = 2;
	d->vnis[0] = 1;
	d->vnis[1] = 10;
	d->enable = on && strcmp(on, "1") == 0;
	for (int t = CXI_TC_DEDICATED_ACCESS; t <= CXI_TC_BEST_EFFORT; t++)
		d->tcs[t] = true;
}

static const char *const member_types[] = {"ignore", "uid", "gid"};

static json_t *svc_json(const struct cxi_svc_desc *d)
{
	json_t *vnis = json_array(), *members = json_array();

	for (int i = 0; i < d->num_vld_vnis && i < CXI_SVC_MAX_VNIS; i++)
		json_array_append_new(vnis, json_integer(d->vnis[i]));
	for (int i = 0; i < CXI_SVC_MAX_MEMBERS; i++)
		json_array_append_new(
		    members,
		    json_pack(
		        "{s:s, s:I}", "type",
		        member_types[d->members[i].type < CXI_SVC_MEMBER_MAX ? d->members[i].type
		                                                             : 0],
		        "id", (json_int_t)d->members[i].svc_member.uid));
	return json_pack("{s:i, s:b, s:b, s:b, s:b, s:b, s:o, s:o}", "svc_id", (int)d->svc_id,
	                 "enable", d->enable, "restricted_members", d->restricted_members,
	                 "restricted_vnis", d->restricted_vnis, "restricted_tcs", d->restricted_tcs,
	                 "system", d->is_system_svc, "vnis", vnis, "members", members);
}

static int int_of(json_t *o, const char *k, long lo, long hi, long *out)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return -1;
	*out = (long)json_integer_value(v);
	return 0;
}

static int svc_from_json(json_t *o, struct cxi_svc_desc *d)
{
	json_t *vnis = json_object_get(o, "vnis"), *members = json_object_get(o, "members");
	long v;

	memset(d, 0, sizeof(*d));
	if (int_of(o, "svc_id", 1, INT_MAX, &v) < 0 || !json_is_array(vnis) ||
	    json_array_size(vnis) > CXI_SVC_MAX_VNIS || !json_is_array(members) ||
	    json_array_size(members) != CXI_SVC_MAX_MEMBERS)
		return -1;
	d->svc_id = (unsigned)v;
	d->enable = json_is_true(json_object_get(o, "enable"));
	d->restricted_members = json_is_true(json_object_get(o, "restricted_members"));
	d->restricted_vnis = json_is_true(json_object_get(o, "restricted_vnis"));
	d->restricted_tcs = json_is_true(json_object_get(o, "restricted_tcs"));
	d->is_system_svc = json_is_true(json_object_get(o, "system"));
	for (size_t i = 0; i < json_array_size(vnis); i++) {
		json_t *n = json_array_get(vnis, i);
		if (!json_is_integer(n) || json_integer_value(n) < 1 ||
		    json_integer_value(n) > VNI_LIMIT)
			return -1;
		d->vnis[i] = (uint16_t)json_integer_value(n);
	}
	d->num_vld_vnis = (uint8_t)json_array_size(vnis);
	for (size_t i = 0; i < CXI_SVC_MAX_MEMBERS; i++) {
		json_t *m = json_array_get(members, i);
		const char *t = json_string_value(json_object_get(m, "type"));
		int k;
		for (k = 0; k < CXI_SVC_MEMBER_MAX; k++)
			if (t && strcmp(t, member_types[k]) == 0)
				break;
		if (k == CXI_SVC_MEMBER_MAX || int_of(m, "id", 0, UINT_MAX, &v) < 0)
			return -1;
		d->members[i].type = (enum cxi_svc_member_type)k;
		d->members[i].svc_member.uid = (unsigned)v;
	}
	for (int t = 0; t < CXI_TC_MAX; t++)
		d->tcs[t] = t <= CXI_TC_BEST_EFFORT;
	return 0;
}

static int load_state(void)
{
	const char *path = state_path();
	json_error_t jerr;
	json_t *root, *svcs, *lnis;
	long v;

	if (!path) {
		if (!F.loaded) {
			fresh();
			F.loaded = true;
		}
		return 0;
	}
	fresh();
	if (access(path, F_OK) != 0)
		return 0;
	if (!(root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr))) {
		fprintf(stderr, "fake libcxi: state %s: line %d: %s\n", path, jerr.line, jerr.text);
		return -EIO;
	}
	svcs = json_object_get(root, "services");
	lnis = json_object_get(root, "lnis");
	if (!json_is_array(svcs) || json_array_size(svcs) > MAX_SVC || !json_is_array(lnis) ||
	    json_array_size(lnis) > MAX_LNI || int_of(root, "max_services", 1, MAX_SVC, &v) < 0)
		goto bad;
	F.max_services = (unsigned)v;
	if (int_of(root, "next_lni", 1, INT_MAX, &v) < 0)
		goto bad;
	F.next_lni = (unsigned)v;
	F.n_svc = 0;
	for (size_t i = 0; i < json_array_size(svcs); i++)
		if (svc_from_json(json_array_get(svcs, i), &F.svc[F.n_svc++]) < 0)
			goto bad;
	for (size_t i = 0; i < json_array_size(lnis); i++) {
		json_t *o = json_array_get(lnis, i);
		struct fake_lni *l = &F.lni[F.n_lni];
		long id, svc, pid;
		if (int_of(o, "id", 1, INT_MAX, &id) < 0 ||
		    int_of(o, "svc_id", 1, INT_MAX, &svc) < 0 ||
		    int_of(o, "pid", 1, INT_MAX, &pid) < 0)
			goto bad;
		/* an LNI dies with its process, as the kernel's does with the fd */
		if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
			continue;
		*l = (struct fake_lni){(unsigned)id, (unsigned)svc, pid};
		F.n_lni++;
	}
	json_decref(root);
	return 0;
bad:
	fprintf(stderr,
	        "fake libcxi: state %s: expected {max_services, next_lni, services, lnis}\n", path);
	json_decref(root);
	return -EIO;
}

static int save_state(void)
{
	const char *path = state_path();
	json_t *root, *svcs = json_array(), *lnis = json_array();
	char *text;
	int fd, r;

	if (!path)
		return 0;
	for (int i = 0; i < F.n_svc; i++)
		json_array_append_new(svcs, svc_json(&F.svc[i]));
	for (int i = 0; i < F.n_lni; i++)
		json_array_append_new(lnis, json_pack("{s:i, s:i, s:I}", "id", (int)F.lni[i].id,
		                                      "svc_id", (int)F.lni[i].svc_id, "pid",
		                                      (json_int_t)F.lni[i].pid));
	root = json_pack("{s:i, s:i, s:o, s:o}", "max_services", (int)F.max_services, "next_lni",
	                 (int)F.next_lni, "services", svcs, "lnis", lnis);
	text = json_dumps(root, JSON_INDENT(1));
	json_decref(root);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
	if (fd >= 0)
		(void)fchmod(fd, 0666);
	r = text && fd >= 0 && pwrite(fd, text, strlen(text), 0) == (ssize_t)strlen(text) &&
	            ftruncate(fd, (off_t)strlen(text)) == 0
	        ? 0
	        : -EIO;
	free(text);
	if (fd >= 0)
		close(fd);
	return r;
}

/* Every call runs between begin() and end(): one thread at a time, the file
 * locked and read again. */
static int begin(void)
{
	const char *path = state_path();
	char lock[PATH_MAX];

	pthread_mutex_lock(&F.mutex); /* end() unlocks, whatever begin() returns */
	if (path) {
		snprintf(lock, sizeof(lock), "%s.lock", path);
		/* every user opens /dev/cxi0; so every user opens the fake's files */
		F.lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (F.lock_fd >= 0)
			(void)fchmod(F.lock_fd, 0666);
		if (F.lock_fd < 0 || flock(F.lock_fd, LOCK_EX) != 0)
			return -EIO;
	}
	return load_state();
}

static int end(int rc, bool changed)
{
	if (rc >= 0 && changed) {
		int s = save_state();
		if (s < 0)
			rc = s;
	}
	if (F.lock_fd >= 0) {
		flock(F.lock_fd, LOCK_UN);
		close(F.lock_fd);
		F.lock_fd = -1;
	}
	pthread_mutex_unlock(&F.mutex);
	return rc;
}

#define BEGIN()                                                                                    \
	do {                                                                                       \
		int _b = begin();                                                                  \
		if (_b < 0)                                                                        \
			return end(_b, false);                                                     \
	} while (0)

static struct cxi_svc_desc *svc_find(unsigned id)
{
	for (int i = 0; i < F.n_svc; i++)
		if (F.svc[i].svc_id == id)
			return &F.svc[i];
	return NULL;
}

static bool vni_valid(unsigned vni)
{
	return vni != 0 && vni <= VNI_LIMIT;
}

/* cass_svc.c validate_descriptor, less the device's resource maxima. */
static int validate(const struct cxi_svc_desc *d)
{
	if (d->restricted_vnis) {
		if (d->num_vld_vnis == 0 || d->num_vld_vnis > CXI_SVC_MAX_VNIS)
			return -EINVAL;
		for (int i = 0; i < d->num_vld_vnis; i++)
			if (!vni_valid(d->vnis[i]))
				return -EINVAL;
	}
	if (d->restricted_members)
		for (int i = 0; i < CXI_SVC_MAX_MEMBERS; i++)
			if ((unsigned)d->members[i].type >= CXI_SVC_MEMBER_MAX)
				return -EINVAL;
	if (d->resource_limits)
		for (int i = 0; i < CXI_RSRC_TYPE_MAX; i++)
			if (d->limits.type[i].max < d->limits.type[i].res)
				return -EINVAL;
	return 0;
}

/* cxi_rgroup_valid_user: the caller's effective uid or gid is a member. */
static bool may_use(const struct cxi_svc_desc *d)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (!d->restricted_members)
		return true;
	for (int i = 0; i < CXI_SVC_MAX_MEMBERS; i++) {
		if (d->members[i].type == CXI_SVC_MEMBER_UID && d->members[i].svc_member.uid == uid)
			return true;
		if (d->members[i].type == CXI_SVC_MEMBER_GID && d->members[i].svc_member.gid == gid)
			return true;
	}
	return false;
}

EXPORT int cxil_open_device(uint32_t dev_id, struct cxil_dev **dev)
{
	FAILPOINT();
	if (!dev)
		return -EINVAL;
	if (dev_id != 0) /* one NIC: cxi0 */
		return -ENODEV;
	if (!(*dev = calloc(1, sizeof(**dev))))
		return -ENOMEM;
	(*dev)->dev_id = dev_id;
	return 0;
}

EXPORT void cxil_close_device(struct cxil_dev *dev)
{
	free(dev);
}

EXPORT int cxil_alloc_svc(struct cxil_dev *dev, const struct cxi_svc_desc *desc,
                          struct cxi_svc_fail_info *fail_info)
{
	const char *quirk = getenv("ISOSTACK_FAKE_CXI_QUIRK");
	struct cxi_svc_desc *d;
	unsigned id;
	int r;

	FAILPOINT();
	if (!dev || !desc)
		return -EINVAL;
	if (fail_info)
		memset(fail_info, 0, sizeof(*fail_info));
	if (geteuid() != 0)
		return -EPERM;
	if ((r = validate(desc)) < 0)
		return r;
	BEGIN();
	if ((unsigned)F.n_svc >= F.max_services || F.n_svc >= MAX_SVC)
		return end(-ENOSPC, false);
	for (id = CXI_DEFAULT_SVC_ID + 1; svc_find(id); id++)
		;
	d = &F.svc[F.n_svc++];
	*d = *desc;
	d->svc_id = id;
	d->enable = 1;
	if (!d->restricted_vnis)
		d->num_vld_vnis = 0;
	if (quirk && strcmp(quirk, "drop_members") == 0)
		d->restricted_members = 0;
	return end((int)id, true);
}

EXPORT int cxil_destroy_svc(struct cxil_dev *dev, unsigned int svc_id)
{
	int i;

	FAILPOINT();
	if (!dev)
		return -EINVAL;
	if (geteuid() != 0)
		return -EPERM;
	if (svc_id == CXI_DEFAULT_SVC_ID)
		return -EINVAL;
	BEGIN();
	for (i = 0; i < F.n_svc && F.svc[i].svc_id != svc_id; i++)
		;
	if (i == F.n_svc)
		return end(-EINVAL, false);
	for (int k = 0; k < F.n_lni; k++)
		if (F.lni[k].svc_id == svc_id)
			return end(-EBUSY, false);
	memmove(&F.svc[i], &F.svc[i + 1], (size_t)(F.n_svc - i - 1) * sizeof(F.svc[0]));
	F.n_svc--;
	return end(0, true);
}

EXPORT int cxil_get_svc_list(struct cxil_dev *dev, struct cxil_svc_list **svc_list)
{
	struct cxil_svc_list *l;

	FAILPOINT();
	if (!dev || !svc_list)
		return -EINVAL;
	BEGIN();
	if (!(l = calloc(1, sizeof(*l) + (size_t)F.n_svc * sizeof(l->descs[0]))))
		return end(-ENOMEM, false);
	l->count = (unsigned)F.n_svc;
	memcpy(l->descs, F.svc, (size_t)F.n_svc * sizeof(F.svc[0]));
	*svc_list = l;
	return end(0, false);
}

EXPORT void cxil_free_svc_list(struct cxil_svc_list *svc_list)
{
	free(svc_list);
}

EXPORT int cxil_get_svc(struct cxil_dev *dev, unsigned int svc_id, struct cxi_svc_desc *desc)
{
	const struct cxi_svc_desc *d;

	FAILPOINT();
	if (!dev || !desc)
		return -EINVAL;
	BEGIN();
	if (!(d = svc_find(svc_id)))
		return end(-EINVAL, false);
	*desc = *d;
	return end(0, false);
}

EXPORT int cxil_alloc_lni(struct cxil_dev *dev, struct cxil_lni **lni, unsigned int svc_id)
{
	const struct cxi_svc_desc *d;
	struct cxil_lni *l;

	FAILPOINT();
	if (!dev || !lni)
		return -EINVAL;
	BEGIN();
	if (!(d = svc_find(svc_id)) || !d->enable)
		return end(-EINVAL, false);
	if (!may_use(d))
		return end(-EPERM, false);
	if (F.n_lni >= MAX_LNI || !(l = calloc(1, sizeof(*l))))
		return end(-ENOSPC, false);
	l->id = F.next_lni++;
	l->svc_id = svc_id;
	F.lni[F.n_lni++] = (struct fake_lni){l->id, svc_id, (long)getpid()};
	*lni = l;
	return end(0, true);
}

EXPORT int cxil_destroy_lni(struct cxil_lni *lni)
{
	FAILPOINT();
	if (!lni)
		return -EINVAL;
	BEGIN();
	for (int k = 0; k < F.n_lni; k++)
		if (F.lni[k].id == lni->id) {
			F.lni[k] = F.lni[--F.n_lni];
			break;
		}
	free(lni);
	return end(0, true);
}

EXPORT int cxil_alloc_cp(struct cxil_lni *lni, unsigned int vni, enum cxi_traffic_class tc,
                         enum cxi_traffic_class_type tc_type, struct cxi_cp **cp)
{
	const struct cxi_svc_desc *d;
	bool listed = false;

	FAILPOINT();
	if (!lni || !cp || (unsigned)tc >= CXI_TC_MAX || (unsigned)tc_type >= CXI_TC_TYPE_MAX ||
	    !vni_valid(vni))
		return -EINVAL;
	BEGIN();
	if (!(d = svc_find(lni->svc_id)) || !d->enable)
		return end(-EINVAL, false); /* the service went away under the LNI */
	for (int i = 0; i < d->num_vld_vnis && i < CXI_SVC_MAX_VNIS; i++)
		listed = listed || d->vnis[i] == vni;
	if (d->restricted_vnis && !listed)
		return end(-EPERM, false);
	if (d->restricted_tcs && !d->tcs[tc])
		return end(-EINVAL, false);
	if (!(*cp = calloc(1, sizeof(**cp))))
		return end(-ENOMEM, false);
	(*cp)->vni = vni;
	return end(0, false);
}

EXPORT int cxil_destroy_cp(struct cxi_cp *cp)
{
	FAILPOINT();
	if (!cp)
		return -EINVAL;
	free(cp);
	return 0;
}

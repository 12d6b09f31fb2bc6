/* nvml.c: the `nvml` GPU driver: libnvidia-ml.so.1 loaded with dlopen, every
 * function resolved at open (a missing one is an error naming it), with our
 * own prototypes and layouts (nvml_abi.h). It creates one instance at a time
 * with an explicit placement (nvmlDeviceCreateGpuInstanceWithPlacement) and
 * destroys only the instance it is asked about, unlike mig-parted, which
 * rebuilds the whole GPU. Profile IDs are asked of the device (1g.10gb's ID
 * is 19, its enum 0); MIG UUIDs are read again after every change because
 * NVML reuses MIG device handles. docs/gpu.md has the call sequence. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/gpu.h"
#include "gpu/nvml_abi.h"

#define NV_DEFAULT_LIBRARY "libnvidia-ml.so.1"
#define NV_MAX_GI          16 /* GPU instances per profile we read at once */
#define NV_MAX_CI          8

struct nv_fns {
/* NOLINTNEXTLINE(bugprone-macro-parentheses): a declarator, not an expression */
#define X(name, ret, params) ret(*name) params;
	NVML_FUNCTIONS(X)
#undef X
};

struct nv_gpu {
	nvmlDevice_t dev;
	const struct iso_gpu_model *model;
	/* Per profile of the model (same index): its NVML profile ID, asked
	 * of the device at open; has_id false when the device lacks it. */
	bool has_id[ISO_MIG_MAX_PROFILES];
	unsigned id[ISO_MIG_MAX_PROFILES];
};

struct nv {
	struct iso_gpu base;
	void *lib;
	struct nv_fns f;
	bool initialized;
	nvmlEventSet_t events;
	char path[PATH_MAX];
	unsigned n_gpus;
	struct nv_gpu gpus[ISO_GPU_MAX];
};

static struct nv *nv_of(struct iso_gpu *g)
{
	return (struct nv *)g;
}

/* The errno and error class of an NVML return code. */
static int nv_errno(nvmlReturn_t rc, enum iso_errcode *code)
{
	switch (rc) {
	case NVML_ERROR_INSUFFICIENT_RESOURCES:
		*code = ISO_E_NO_CAPACITY;
		return -ENOSPC;
	case NVML_ERROR_INVALID_ARGUMENT:
		*code = ISO_E_INVALID;
		return -EINVAL;
	case NVML_ERROR_IN_USE:
		*code = ISO_E_CONFLICT;
		return -EBUSY;
	case NVML_ERROR_NOT_FOUND:
		*code = ISO_E_NOT_FOUND;
		return -ENOENT;
	case NVML_ERROR_NOT_SUPPORTED:
		*code = ISO_E_INVALID;
		return -EOPNOTSUPP;
	case NVML_ERROR_NO_PERMISSION:
		*code = ISO_E_FORBIDDEN;
		return -EPERM;
	case NVML_ERROR_TIMEOUT:
		*code = ISO_E_UNAVAILABLE;
		return -ETIMEDOUT;
	case NVML_ERROR_GPU_IS_LOST:
		*code = ISO_E_UNAVAILABLE;
		return -ENODEV;
	default:
		*code = ISO_E_INTERNAL;
		return -EIO;
	}
}

/* Fills err with the call that failed and NVML's own words for rc. */
static int nv_fail(struct nv *n, struct iso_error *err, nvmlReturn_t rc, const char *field,
                   const char *call, unsigned gpu)
{
	enum iso_errcode code;
	int r = nv_errno(rc, &code);
	const char *text = n->f.nvmlErrorString ? n->f.nvmlErrorString(rc) : NULL;

	iso_error_set(err, code, field, "%s (GPU %u): %s (NVML error %d)", call, gpu,
	              text ? text : "unknown error", (int)rc);
	return r;
}

static void nv_close(struct iso_gpu *g)
{
	struct nv *n = nv_of(g);

	if (!n)
		return;
	if (n->events && n->f.nvmlEventSetFree)
		n->f.nvmlEventSetFree(n->events);
	if (n->initialized)
		n->f.nvmlShutdown();
	if (n->lib)
		dlclose(n->lib);
	free(n);
}

static int nv_resolve(struct nv *n, struct iso_error *err)
{
#define X(name, ret, params)                                                                       \
	*(void **)(&n->f.name) = dlsym(n->lib, #name);                                             \
	if (!n->f.name)                                                                            \
		return iso_error_set(err, ISO_E_UNAVAILABLE, "library", "%s has no %s", n->path,   \
		                     #name);
	NVML_FUNCTIONS(X)
#undef X
	return 0;
}

/* The full-size compute instance enum for a GPU instance of `compute` slices. */
static int ci_enum_for(int compute)
{
	switch (compute) {
	case 1:
		return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
	case 2:
		return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
	case 3:
		return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
	case 4:
		return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
	case 6:
		return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
	case 7:
		return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
	case 8:
		return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
	default:
		return -1;
	}
}

static int nv_open_gpu(struct nv *n, unsigned i, struct iso_error *err)
{
	struct nv_gpu *gp = &n->gpus[i];
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
	nvmlReturn_t rc;

	if ((rc = n->f.nvmlDeviceGetHandleByIndex_v2(i, &gp->dev)) != NVML_SUCCESS)
		return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetHandleByIndex_v2", i);
	if ((rc = n->f.nvmlDeviceGetName(gp->dev, name, sizeof(name))) != NVML_SUCCESS)
		return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetName", i);
	gp->model = iso_gpu_model_for_name(name);
	for (int k = 0; gp->model && k < gp->model->n_profiles; k++) {
		int e = iso_gpu_profile_enum(gp->model, &gp->model->profiles[k]);
		nvmlGpuInstanceProfileInfo_t info;

		if (e < 0)
			continue;
		memset(&info, 0, sizeof(info));
		rc = n->f.nvmlDeviceGetGpuInstanceProfileInfo(gp->dev, (unsigned)e, &info);
		if (rc == NVML_SUCCESS) {
			gp->has_id[k] = true;
			gp->id[k] = info.id;
		} else if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_INVALID_ARGUMENT) {
			return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetGpuInstanceProfileInfo", i);
		}
	}
	/* Events before registration are lost, so register now. A GPU that
	 * cannot report XIDs leaves the set usable for the others. */
	rc = n->f.nvmlDeviceRegisterEvents(gp->dev, nvmlEventTypeXidCriticalError, n->events);
	if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED)
		return nv_fail(n, err, rc, "gpu", "nvmlDeviceRegisterEvents", i);
	return 0;
}

static int nv_open(const struct iso_gpu_open_args *args, struct iso_gpu **out,
                   struct iso_error *err)
{
	const char *lib = args && args->library ? args->library : getenv("ISOSTACK_NVML_LIBRARY");
	struct nv *n;
	nvmlReturn_t rc;
	unsigned count = 0;
	int r;

	*out = NULL;
	if (!lib || !*lib)
		lib = NV_DEFAULT_LIBRARY;
	if (!(n = calloc(1, sizeof(*n))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	n->base.ops = &iso_gpu_nvml_ops;
	iso_strlcpy(n->path, lib, sizeof(n->path));
	n->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		const char *why = dlerror();
		r = iso_error_set(err, ISO_E_UNAVAILABLE, "library", "cannot load %s: %s", lib,
		                  why ? why : "unknown error");
		goto fail;
	}
	if ((r = nv_resolve(n, err)) < 0)
		goto fail;
	if ((rc = n->f.nvmlInit_v2()) != NVML_SUCCESS) {
		r = nv_fail(n, err, rc, "library", "nvmlInit_v2", 0);
		goto fail;
	}
	n->initialized = true;
	if ((rc = n->f.nvmlDeviceGetCount_v2(&count)) != NVML_SUCCESS) {
		r = nv_fail(n, err, rc, "library", "nvmlDeviceGetCount_v2", 0);
		goto fail;
	}
	if (count > ISO_GPU_MAX) {
		r = iso_error_set(err, ISO_E_INVALID, "gpu", "%u GPUs, more than the %d we handle",
		                  count, ISO_GPU_MAX);
		goto fail;
	}
	if ((rc = n->f.nvmlEventSetCreate(&n->events)) != NVML_SUCCESS) {
		r = nv_fail(n, err, rc, "library", "nvmlEventSetCreate", 0);
		goto fail;
	}
	n->n_gpus = count;
	for (unsigned i = 0; i < count; i++)
		if ((r = nv_open_gpu(n, i, err)) < 0)
			goto fail;
	*out = &n->base;
	return 0;
fail:
	nv_close(&n->base);
	return r;
}

static int nv_gpu_at(struct nv *n, unsigned gpu, struct nv_gpu **out, bool need_model,
                     struct iso_error *err)
{
	if (gpu >= n->n_gpus)
		return iso_error_set(err, ISO_E_NOT_FOUND, "gpu", "no GPU %u (the node has %u)",
		                     gpu, n->n_gpus),
		       -ENODEV;
	*out = &n->gpus[gpu];
	if (need_model && !(*out)->model)
		return iso_error_set(err, ISO_E_INVALID, "gpu",
		                     "GPU %u: not a MIG model isostack knows", gpu),
		       -EOPNOTSUPP;
	return 0;
}

static int nv_list_gpus(struct iso_gpu *g, struct iso_gpu_info **out, size_t *count,
                        struct iso_error *err)
{
	struct nv *n = nv_of(g);
	_cleanup_free_ struct iso_gpu_info *v = calloc(n->n_gpus + 1, sizeof(*v));
	nvmlReturn_t rc;

	*out = NULL;
	*count = 0;
	if (!v)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (unsigned i = 0; i < n->n_gpus; i++) {
		nvmlDevice_t dev = n->gpus[i].dev;
		nvmlPciInfo_t pci;
		unsigned cur = 0, pending = 0;

		memset(&pci, 0, sizeof(pci));
		v[i].index = i;
		if ((rc = n->f.nvmlDeviceGetName(dev, v[i].name, sizeof(v[i].name))) !=
		    NVML_SUCCESS)
			return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetName", i);
		if ((rc = n->f.nvmlDeviceGetUUID(dev, v[i].uuid, sizeof(v[i].uuid))) !=
		    NVML_SUCCESS)
			return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetUUID", i);
		if ((rc = n->f.nvmlDeviceGetPciInfo_v3(dev, &pci)) != NVML_SUCCESS)
			return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetPciInfo_v3", i);
		pci.busId[sizeof(pci.busId) - 1] = '\0';
		iso_strlcpy(v[i].pci_bus_id, pci.busId, sizeof(v[i].pci_bus_id));
		rc = n->f.nvmlDeviceGetMigMode(dev, &cur, &pending);
		if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED)
			return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetMigMode", i);
		v[i].mig_enabled = rc == NVML_SUCCESS && cur == NVML_DEVICE_MIG_ENABLE;
		v[i].model = n->gpus[i].model;
	}
	*out = ISO_TAKE(v);
	*count = n->n_gpus;
	return 0;
}

/* The MIG device (gi, ci, uuid) at every index of the parent, read fresh. */
struct nv_mig {
	unsigned gi, ci;
	char uuid[ISO_GPU_UUID_MAX];
};

static int nv_mig_devices(struct nv *n, unsigned gpu, struct nv_mig **out, size_t *count,
                          struct iso_error *err)
{
	nvmlDevice_t dev = n->gpus[gpu].dev, mig;
	unsigned max = 0;
	nvmlReturn_t rc;
	struct nv_mig *v;

	*out = NULL;
	*count = 0;
	if ((rc = n->f.nvmlDeviceGetMaxMigDeviceCount(dev, &max)) != NVML_SUCCESS)
		return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetMaxMigDeviceCount", gpu);
	if (max > 64)
		max = 64;
	if (!(v = calloc(max + 1, sizeof(*v))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (unsigned i = 0; i < max; i++) {
		struct nv_mig *m = &v[*count];

		rc = n->f.nvmlDeviceGetMigDeviceHandleByIndex(dev, i, &mig);
		if (rc == NVML_ERROR_NOT_FOUND)
			continue; /* a hole */
		if (rc == NVML_SUCCESS)
			rc = n->f.nvmlDeviceGetGpuInstanceId(mig, &m->gi);
		if (rc == NVML_SUCCESS)
			rc = n->f.nvmlDeviceGetComputeInstanceId(mig, &m->ci);
		if (rc == NVML_SUCCESS)
			rc = n->f.nvmlDeviceGetUUID(mig, m->uuid, sizeof(m->uuid));
		if (rc != NVML_SUCCESS) {
			free(v);
			return nv_fail(n, err, rc, "gpu", "reading MIG device handles", gpu);
		}
		m->uuid[sizeof(m->uuid) - 1] = '\0';
		(*count)++;
	}
	*out = v;
	return 0;
}

/* Calls fn for each GPU instance of every profile of the GPU's model. */
typedef int (*nv_gi_fn)(struct nv *n, unsigned gpu, int profile_idx, nvmlGpuInstance_t gi,
                        const nvmlGpuInstanceInfo_t *info, void *ctx, struct iso_error *err);

static int nv_each_gi(struct nv *n, unsigned gpu, nv_gi_fn fn, void *ctx, struct iso_error *err)
{
	struct nv_gpu *gp = &n->gpus[gpu];
	nvmlReturn_t rc;
	int r;

	for (int k = 0; k < gp->model->n_profiles; k++) {
		nvmlGpuInstance_t gis[NV_MAX_GI];
		unsigned count = 0;

		if (!gp->has_id[k])
			continue;
		rc = n->f.nvmlDeviceGetGpuInstances(gp->dev, gp->id[k], gis, &count);
		if (rc != NVML_SUCCESS)
			return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetGpuInstances", gpu);
		for (unsigned i = 0; i < count && i < NV_MAX_GI; i++) {
			nvmlGpuInstanceInfo_t info;

			memset(&info, 0, sizeof(info));
			if ((rc = n->f.nvmlGpuInstanceGetInfo(gis[i], &info)) != NVML_SUCCESS)
				return nv_fail(n, err, rc, "gpu", "nvmlGpuInstanceGetInfo", gpu);
			if ((r = fn(n, gpu, k, gis[i], &info, ctx, err)) != 0)
				return r;
		}
	}
	return 0;
}

struct nv_list_ctx {
	struct iso_gpu_instance *v;
	size_t n, cap;
	const struct nv_mig *migs;
	size_t n_migs;
};

static int nv_list_one(struct nv *n, unsigned gpu, int k, nvmlGpuInstance_t gi,
                       const nvmlGpuInstanceInfo_t *info, void *ctx_, struct iso_error *err)
{
	struct nv_list_ctx *ctx = ctx_;
	struct iso_gpu_instance *o;

	if (ctx->n == ctx->cap)
		return iso_error_set(err, ISO_E_INTERNAL, "gpu",
		                     "GPU %u reports more than %zu GPU instances", gpu, ctx->cap);
	o = &ctx->v[ctx->n++];
	memset(o, 0, sizeof(*o));
	iso_strlcpy(o->profile, n->gpus[gpu].model->profiles[k].name, sizeof(o->profile));
	o->start = (int)info->placement.start;
	o->size = (int)info->placement.size;
	o->gi_id = (int)info->id;
	o->ci_id = ISO_GPU_ID_NONE;
	for (size_t i = 0; i < ctx->n_migs; i++)
		if (ctx->migs[i].gi == info->id) {
			o->ci_id = (int)ctx->migs[i].ci;
			iso_strlcpy(o->uuid, ctx->migs[i].uuid, sizeof(o->uuid));
			break;
		}
	return 0;
}

static int by_start(const void *a, const void *b)
{
	return ((const struct iso_gpu_instance *)a)->start -
	       ((const struct iso_gpu_instance *)b)->start;
}

static int nv_list_instances(struct iso_gpu *g, unsigned gpu, struct iso_gpu_instance **out,
                             size_t *count, struct iso_error *err)
{
	struct nv *n = nv_of(g);
	struct nv_gpu *gp;
	_cleanup_free_ struct nv_mig *migs = NULL;
	struct nv_list_ctx ctx = {0};
	int r;

	*out = NULL;
	*count = 0;
	if ((r = nv_gpu_at(n, gpu, &gp, true, err)) < 0)
		return r;
	if ((r = nv_mig_devices(n, gpu, &migs, &ctx.n_migs, err)) < 0)
		return r;
	ctx.migs = migs;
	ctx.cap = (size_t)2 * ISO_MIG_MAX_SLICES;
	if (!(ctx.v = calloc(ctx.cap, sizeof(*ctx.v))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	if ((r = nv_each_gi(n, gpu, nv_list_one, &ctx, err)) < 0) {
		free(ctx.v);
		return r;
	}
	qsort(ctx.v, ctx.n, sizeof(*ctx.v), by_start);
	*out = ctx.v;
	*count = ctx.n;
	return 0;
}

#define NV_MAX_PLACEMENTS (ISO_MIG_MAX_SLICES * 2)

/* The device's placements for a profile ID. NVML writes as many as the
 * profile has, so their number is asked first and must fit. */
static int nv_placements(struct nv *n, unsigned gpu, unsigned id,
                         nvmlGpuInstancePlacement_t pl[NV_MAX_PLACEMENTS], unsigned *np,
                         const char *field, struct iso_error *err)
{
	nvmlDevice_t dev = n->gpus[gpu].dev;
	nvmlReturn_t rc = n->f.nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev, id, NULL, np);

	if (rc == NVML_SUCCESS && *np > NV_MAX_PLACEMENTS)
		return iso_error_set(err, ISO_E_INTERNAL, field,
		                     "GPU %u: profile %u has %u placements, more than %d", gpu, id,
		                     *np, NV_MAX_PLACEMENTS);
	if (rc == NVML_SUCCESS)
		rc = n->f.nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev, id, pl, np);
	if (rc != NVML_SUCCESS)
		return nv_fail(n, err, rc, field, "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
		               gpu);
	return 0;
}

static int nv_list_profiles(struct iso_gpu *g, unsigned gpu, struct iso_gpu_profile_info **out,
                            size_t *count, struct iso_error *err)
{
	struct nv *n = nv_of(g);
	struct nv_gpu *gp;
	_cleanup_free_ struct iso_gpu_profile_info *v = NULL;
	nvmlReturn_t rc;
	int r;

	*out = NULL;
	*count = 0;
	if ((r = nv_gpu_at(n, gpu, &gp, false, err)) < 0)
		return r;
	if (!(v = calloc(NVML_GPU_INSTANCE_PROFILE_COUNT, sizeof(*v))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	/* Every enum the device knows, so that a profile missing from
	 * src/mig's table shows up (with an empty name). */
	for (unsigned e = 0; e < NVML_GPU_INSTANCE_PROFILE_COUNT; e++) {
		nvmlGpuInstanceProfileInfo_t info;
		nvmlGpuInstancePlacement_t pl[NV_MAX_PLACEMENTS];
		unsigned np = 0;
		struct iso_gpu_profile_info *o = &v[*count];

		memset(&info, 0, sizeof(info));
		rc = n->f.nvmlDeviceGetGpuInstanceProfileInfo(gp->dev, e, &info);
		if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT)
			continue;
		if (rc != NVML_SUCCESS)
			return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetGpuInstanceProfileInfo",
			               gpu);
		if ((r = nv_placements(n, gpu, info.id, pl, &np, "gpu", err)) < 0)
			return r;
		o->nvml_enum = e;
		o->id = info.id;
		o->compute = (int)info.sliceCount;
		o->max_count = (int)info.instanceCount;
		o->placements_uniform = true;
		for (unsigned i = 0; i < np; i++) {
			if (i == 0)
				o->width = (int)pl[i].size;
			else if ((int)pl[i].size != o->width)
				o->placements_uniform = false;
			if (pl[i].start < 8)
				o->starts |= (uint8_t)(1u << pl[i].start);
			else
				o->placements_uniform = false;
		}
		for (int k = 0; gp->model && k < gp->model->n_profiles; k++)
			if (iso_gpu_profile_enum(gp->model, &gp->model->profiles[k]) == (int)e)
				iso_strlcpy(o->profile, gp->model->profiles[k].name,
				            sizeof(o->profile));
		(*count)++;
	}
	*out = ISO_TAKE(v);
	return 0;
}

/* Fills *out from a fresh listing: the instance at `start`. */
static int nv_read_back(struct nv *n, unsigned gpu, int start, struct iso_gpu_instance *out,
                        struct iso_error *err)
{
	_cleanup_free_ struct iso_gpu_instance *v = NULL;
	size_t count;
	int r = nv_list_instances(&n->base, gpu, &v, &count, err);

	if (r < 0)
		return r;
	for (size_t i = 0; i < count; i++)
		if (v[i].start == start) {
			*out = v[i];
			return 0;
		}
	return iso_error_set(err, ISO_E_INTERNAL, "start",
	                     "GPU %u: the instance created at %d is not listed", gpu, start);
}

static int nv_create(struct iso_gpu *g, unsigned gpu, const char *profile, int start,
                     struct iso_gpu_instance *out, struct iso_error *err)
{
	struct nv *n = nv_of(g);
	struct nv_gpu *gp;
	const struct iso_mig_profile *p;
	nvmlGpuInstancePlacement_t pl[NV_MAX_PLACEMENTS], want;
	nvmlComputeInstanceProfileInfo_t ci_info;
	nvmlGpuInstance_t gi;
	nvmlComputeInstance_t ci;
	unsigned np = 0, cur = 0, pending = 0;
	nvmlReturn_t rc;
	const char *call;
	int k, r, ce;
	bool allowed = false;

	if ((r = nv_gpu_at(n, gpu, &gp, true, err)) < 0)
		return r;
	if (!(p = iso_mig_profile_find(gp->model, profile)))
		return iso_error_set(err, ISO_E_INVALID, "profile", "GPU %u (%s) has no profile %s",
		                     gpu, gp->model->name, profile ? profile : "(null)");
	k = (int)(p - gp->model->profiles);
	if (!gp->has_id[k])
		return iso_error_set(err, ISO_E_INVALID, "profile",
		                     "GPU %u does not offer profile %s", gpu, p->name),
		       -EOPNOTSUPP;
	rc = n->f.nvmlDeviceGetMigMode(gp->dev, &cur, &pending);
	if (rc != NVML_SUCCESS)
		return nv_fail(n, err, rc, "gpu", "nvmlDeviceGetMigMode", gpu);
	if (cur != NVML_DEVICE_MIG_ENABLE)
		return iso_error_set(err, ISO_E_CONFLICT, "gpu", "GPU %u: MIG mode is off", gpu),
		       -EOPNOTSUPP;
	/* The start must be one of the device's own placements for the
	 * profile (on the memory-slice axis: a 3g is 4 wide). */
	if ((r = nv_placements(n, gpu, gp->id[k], pl, &np, "profile", err)) < 0)
		return r;
	for (unsigned i = 0; i < np; i++)
		if ((int)pl[i].start == start) {
			allowed = true;
			want = pl[i];
		}
	if (!allowed)
		return iso_error_set(err, ISO_E_INVALID, "start",
		                     "GPU %u: %s cannot start at memory slice %d", gpu, p->name,
		                     start);
	rc = n->f.nvmlDeviceCreateGpuInstanceWithPlacement(gp->dev, gp->id[k], &want, &gi);
	if (rc != NVML_SUCCESS)
		return nv_fail(n, err, rc, "start", "nvmlDeviceCreateGpuInstanceWithPlacement",
		               gpu);
	/* One compute instance of the GPU instance's full size. */
	ce = ci_enum_for(p->compute);
	memset(&ci_info, 0, sizeof(ci_info));
	call = "nvmlGpuInstanceGetComputeInstanceProfileInfo";
	rc = ce < 0 ? NVML_ERROR_NOT_SUPPORTED
	            : n->f.nvmlGpuInstanceGetComputeInstanceProfileInfo(
	                  gi, (unsigned)ce, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci_info);
	if (rc == NVML_SUCCESS) {
		call = "nvmlGpuInstanceCreateComputeInstance";
		rc = n->f.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id, &ci);
	}
	if (rc != NVML_SUCCESS) {
		r = nv_fail(n, err, rc, "profile", call, gpu);
		/* Leave nothing half made: the GPU instance goes again. */
		if (n->f.nvmlGpuInstanceDestroy(gi) != NVML_SUCCESS)
			iso_log(ISO_LOG_ERR, "gpu_rollback_failed", "gpu=%u start=%d", gpu, start);
		return r;
	}
	return out ? nv_read_back(n, gpu, start, out, err) : 0;
}

struct nv_find_ctx {
	int start;
	nvmlGpuInstance_t gi;
	bool found;
};

static int nv_find_one(struct nv *n, unsigned gpu, int k, nvmlGpuInstance_t gi,
                       const nvmlGpuInstanceInfo_t *info, void *ctx_, struct iso_error *err)
{
	struct nv_find_ctx *ctx = ctx_;

	if ((int)info->placement.start != ctx->start)
		return 0;
	ctx->gi = gi;
	ctx->found = true;
	return 1; /* stop */
}

static int nv_destroy(struct iso_gpu *g, unsigned gpu, int start, struct iso_error *err)
{
	struct nv *n = nv_of(g);
	struct nv_gpu *gp;
	struct nv_find_ctx ctx = {.start = start};
	nvmlReturn_t rc;
	int r;

	if ((r = nv_gpu_at(n, gpu, &gp, true, err)) < 0)
		return r;
	if ((r = nv_each_gi(n, gpu, nv_find_one, &ctx, err)) < 0)
		return r;
	if (!ctx.found)
		return iso_error_set(err, ISO_E_NOT_FOUND, "start",
		                     "GPU %u: no instance starts at memory slice %d", gpu, start);
	/* Its compute instances first, of every compute profile. */
	for (unsigned e = 0; e < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; e++) {
		nvmlComputeInstanceProfileInfo_t info;
		nvmlComputeInstance_t cis[NV_MAX_CI];
		unsigned count = 0;

		memset(&info, 0, sizeof(info));
		rc = n->f.nvmlGpuInstanceGetComputeInstanceProfileInfo(
		    ctx.gi, e, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
		if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT)
			continue;
		if (rc == NVML_SUCCESS)
			rc = n->f.nvmlGpuInstanceGetComputeInstances(ctx.gi, info.id, cis, &count);
		if (rc != NVML_SUCCESS)
			return nv_fail(n, err, rc, "start", "nvmlGpuInstanceGetComputeInstances",
			               gpu);
		for (unsigned i = 0; i < count && i < NV_MAX_CI; i++)
			if ((rc = n->f.nvmlComputeInstanceDestroy(cis[i])) != NVML_SUCCESS)
				return nv_fail(n, err, rc, "start", "nvmlComputeInstanceDestroy",
				               gpu);
	}
	if ((rc = n->f.nvmlGpuInstanceDestroy(ctx.gi)) != NVML_SUCCESS)
		return nv_fail(n, err, rc, "start", "nvmlGpuInstanceDestroy", gpu);
	return 0;
}

static int nv_wait_xid(struct iso_gpu *g, int timeout_ms, struct iso_gpu_xid *out,
                       struct iso_error *err)
{
	struct nv *n = nv_of(g);
	nvmlEventData_t data;
	nvmlReturn_t rc;

	memset(&data, 0, sizeof(data));
	rc = n->f.nvmlEventSetWait_v2(n->events, &data, timeout_ms < 0 ? 0 : (unsigned)timeout_ms);
	if (rc == NVML_ERROR_TIMEOUT)
		return -ETIMEDOUT;
	if (rc != NVML_SUCCESS)
		return nv_fail(n, err, rc, "events", "nvmlEventSetWait_v2", 0);
	memset(out, 0, sizeof(*out));
	out->gpu = UINT_MAX;
	for (unsigned i = 0; i < n->n_gpus; i++)
		if (n->gpus[i].dev == data.device)
			out->gpu = i;
	if (out->gpu == UINT_MAX)
		return iso_error_set(err, ISO_E_INTERNAL, "events",
		                     "an event named a device that is not one of our GPUs");
	out->xid = data.eventData;
	out->gi_id = data.gpuInstanceId == NVML_ID_NONE ? ISO_GPU_ID_NONE : (int)data.gpuInstanceId;
	out->ci_id =
	    data.computeInstanceId == NVML_ID_NONE ? ISO_GPU_ID_NONE : (int)data.computeInstanceId;
	return 0;
}

const struct iso_gpu_driver_ops iso_gpu_nvml_ops = {
    .name = "nvml",
    .open = nv_open,
    .close = nv_close,
    .list_gpus = nv_list_gpus,
    .list_instances = nv_list_instances,
    .list_profiles = nv_list_profiles,
    .create_instance = nv_create,
    .destroy_instance = nv_destroy,
    .wait_xid = nv_wait_xid,
};

/* fake_nvml.c: a fake libnvidia-ml.so.1, for tests only. It exists so that
 * the `nvml` GPU driver's real code path (dlopen, dlsym, the NVML call
 * sequence) runs without a GPU. It implements exactly the NVML subset the
 * driver calls (src/gpu/nvml_abi.h) for a configurable set of GPUs
 * (H100-80GB, A100-40GB, A30), and rejects what a real GPU rejects: overlap
 * and exhausted limits (NVML_ERROR_INSUFFICIENT_RESOURCES), a start outside
 * the profile's placements (NVML_ERROR_INVALID_ARGUMENT), a GPU-instance
 * destroy while a compute instance exists and a compute-instance destroy
 * while it is busy (NVML_ERROR_IN_USE).
 *
 * The MIG geometry below is written as data from docs/reference-mig.md's
 * tables, deliberately NOT taken from src/mig, so that test_gpu can check
 * the two against each other (NVIDIA's go-nvml mock gets the 3g/7g widths
 * wrong; nothing here comes from it).
 *
 * Environment (docs/gpu.md, "The fake NVML"):
 *   ISOSTACK_FAKE_NVML_CONFIG  JSON file with the GPUs; without it 8 x H100-80GB, MIG on
 *   ISOSTACK_FAKE_NVML_STATE   JSON file with the instances and queued XIDs, shared by every
 *                              process (flock), so restarts and other processes see the
 *                              same GPUs; without it the state lives in this process
 *   ISOSTACK_FAKE_NVML_FAIL    "nvmlFunctionName=CODE": that call returns CODE
 * Test hooks (through dlsym): isostack_fake_nvml_inject_xid, isostack_fake_nvml_set_busy.
 *
 * Like the real library it keeps process-wide state (NVML handles are
 * pointers into it); it is not part of isostack's library. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "gpu/nvml_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* The prototypes from the same table the driver resolves, so that a
 * signature that drifts from it does not compile. */
#define X(name, ret, params) EXPORT ret name params;
NVML_FUNCTIONS(X)
#undef X
EXPORT nvmlReturn_t isostack_fake_nvml_inject_xid(unsigned gpu, unsigned long long xid, unsigned gi,
                                                  unsigned ci);
EXPORT nvmlReturn_t isostack_fake_nvml_set_busy(unsigned gpu, unsigned start, int busy);

#define MAX_GPUS    64
#define MAX_GI      32 /* GPU instance ids 1..31 */
#define MAX_CI      8
#define MAX_EVENTS  64
#define MAX_PROFILE 8

/* ---- the geometry, from docs/reference-mig.md ---- */

struct fake_profile {
	unsigned nvml_enum;
	unsigned id;      /* nvidia-smi / NVML profile ID */
	unsigned compute; /* compute slices (sliceCount) */
	unsigned mem;     /* memory slices of a placement */
	unsigned max;     /* instanceCount */
	bool me;          /* holds the media-engine slot */
	unsigned long long memory_mb;
	int n_starts;
	unsigned starts[8];
};

struct fake_model {
	const char *key;  /* in the config file */
	const char *name; /* nvmlDeviceGetName */
	unsigned mem_slices, compute_slices;
	int n_profiles;
	struct fake_profile profiles[MAX_PROFILE];
};

/* "Profiles, 8-memory-slice GPUs": enum, profile ID, compute slices, memory
 * slices, max count, +me, memory (MB), placements {starts}:size. Memory is
 * the H100-80 GiB row in MB; for the other models the profile name's GB. */
/* clang-format off */
#define EIGHT_SLICE_PROFILES(m1, m1dm, m2, m3, m4, m7) \
	{0x0, 19, 1, 1, 7, false, m1,   7, {0, 1, 2, 3, 4, 5, 6}}, \
	{0x7, 20, 1, 1, 1, true,  m1,   7, {0, 1, 2, 3, 4, 5, 6}}, \
	{0x9, 15, 1, 2, 4, false, m1dm, 4, {0, 2, 4, 6}}, \
	{0x1, 14, 2, 2, 3, false, m2,   3, {0, 2, 4}}, \
	{0x2, 9,  3, 4, 2, false, m3,   2, {0, 4}}, \
	{0x3, 5,  4, 4, 1, false, m4,   1, {0}}, \
	{0x4, 0,  7, 8, 1, false, m7,   1, {0}}

static const struct fake_model models[] = {
	{"H100-80GB", "NVIDIA H100 80GB HBM3", 8, 7, 7,
	 {EIGHT_SLICE_PROFILES(9984, 20096, 20096, 40448, 40448, 81152)}},
	{"A100-40GB", "NVIDIA A100-SXM4-40GB", 8, 7, 7,
	 {EIGHT_SLICE_PROFILES(5120, 10240, 10240, 20480, 20480, 40960)}},
	/* "A30-24GB (4 memory, 4 compute slices)": profile, id, compute, mem, max, placements. */
	{"A30", "NVIDIA A30", 4, 4, 5,
	 {{0x0, 14, 1, 1, 4, false, 6144,  4, {0, 1, 2, 3}},
	  {0x7, 21, 1, 1, 1, true,  6144,  4, {0, 1, 2, 3}},
	  {0x1, 5,  2, 2, 2, false, 12288, 2, {0, 2}},
	  {0x8, 6,  2, 2, 1, true,  12288, 2, {0, 2}},
	  {0x3, 0,  4, 4, 1, false, 24576, 1, {0}}}},
};
/* clang-format on */

/* Compute-instance enum -> compute slices (0: not offered). */
static const unsigned ci_slices[NVML_COMPUTE_INSTANCE_PROFILE_COUNT] = {1, 2, 3, 4, 7, 0, 0, 0, 0};

/* ---- handles ---- */

enum { H_GPU = 1, H_MIG = 2 };

struct nvmlDevice_st {
	int kind;
	unsigned gpu;
	unsigned index; /* H_MIG: the MIG device index, looked up at each call */
};
struct nvmlGpuInstance_st {
	unsigned gpu, gi;
};
struct nvmlComputeInstance_st {
	unsigned gpu, gi, ci;
};
struct nvmlEventSet_st {
	bool armed;
	unsigned long long last_seq;
	bool registered[MAX_GPUS];
};

/* ---- state ---- */

struct fake_ci {
	bool used;
	unsigned profile_id, slices;
	bool busy;
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
};
struct fake_gi {
	bool used;
	const struct fake_profile *profile;
	unsigned start;
	struct fake_ci ci[MAX_CI];
};
struct fake_gpu {
	const struct fake_model *model;
	bool mig;
	struct fake_gi gi[MAX_GI];
};
struct fake_event {
	unsigned long long seq, xid;
	unsigned gpu, gi, ci;
};

static struct {
	bool initialized;
	unsigned n_gpus;
	struct fake_gpu gpus[MAX_GPUS];
	unsigned n_events;
	struct fake_event events[MAX_EVENTS];
	unsigned long long next_seq;
	unsigned long long next_uuid;
	/* the config's uuid_base: where a fresh state's UUID numbers start, so
	 * that fakes of several nodes on one host never hand out one UUID
	 * twice (a test can then tell one node's instances from another's) */
	unsigned long long uuid_base;
	char error[512]; /* the detail behind the last NVML_ERROR_UNKNOWN */
	struct nvmlDevice_st gpu_h[MAX_GPUS];
	struct nvmlDevice_st mig_h[MAX_GPUS][MAX_CI];
	struct nvmlGpuInstance_st gi_h[MAX_GPUS][MAX_GI];
	struct nvmlComputeInstance_st ci_h[MAX_GPUS][MAX_GI][MAX_CI];
	int lock_fd;
	pthread_mutex_t mutex;
	/* How many saves the lock file counts (disk_gen, read under the lock)
	 * and which of them F holds (gen, when have_gen). */
	bool have_gen;
	uint64_t gen, disk_gen;
} F = {.lock_fd = -1, .mutex = PTHREAD_MUTEX_INITIALIZER};

static nvmlReturn_t fail_unknown(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static nvmlReturn_t fail_unknown(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(F.error, sizeof(F.error), fmt, ap);
	va_end(ap);
	return NVML_ERROR_UNKNOWN;
}

/* ISOSTACK_FAKE_NVML_FAIL=name=code makes `name` return code. */
static bool injected(const char *fn, nvmlReturn_t *rc)
{
	const char *spec = getenv("ISOSTACK_FAKE_NVML_FAIL");
	size_t len = strlen(fn);

	if (!spec || strncmp(spec, fn, len) != 0 || spec[len] != '=')
		return false;
	*rc = (nvmlReturn_t)atoi(spec + len + 1);
	return true;
}
#define FAILPOINT()                                                                                \
	do {                                                                                       \
		nvmlReturn_t _rc;                                                                  \
		if (injected(__func__, &_rc))                                                      \
			return _rc;                                                                \
	} while (0)

static const struct fake_model *model_find(const char *key)
{
	for (size_t i = 0; key && i < sizeof(models) / sizeof(models[0]); i++)
		if (strcasecmp(models[i].key, key) == 0)
			return &models[i];
	return NULL;
}

static const struct fake_profile *profile_by_id(const struct fake_model *m, unsigned id)
{
	for (int i = 0; i < m->n_profiles; i++)
		if (m->profiles[i].id == id)
			return &m->profiles[i];
	return NULL;
}

static nvmlReturn_t load_config(void)
{
	const char *path = getenv("ISOSTACK_FAKE_NVML_CONFIG");
	json_error_t jerr;
	json_t *root, *gpus;

	memset(F.gpus, 0, sizeof(F.gpus));
	F.uuid_base = 1;
	if (!path || !*path) {
		F.n_gpus = 8;
		for (unsigned i = 0; i < 8; i++) {
			F.gpus[i].model = &models[0];
			F.gpus[i].mig = true;
		}
		return NVML_SUCCESS;
	}
	if (!(root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr)))
		return fail_unknown("fake NVML config %s: line %d: %s", path, jerr.line, jerr.text);
	gpus = json_object_get(root, "gpus");
	if (!json_is_array(gpus) || json_array_size(gpus) == 0 ||
	    json_array_size(gpus) > MAX_GPUS) {
		json_decref(root);
		return fail_unknown("fake NVML config %s: gpus: expected an array of 1..%d GPUs",
		                    path, MAX_GPUS);
	}
	for (size_t i = 0; i < json_array_size(gpus); i++) {
		json_t *g = json_array_get(gpus, i), *mig = json_object_get(g, "mig");
		const struct fake_model *m =
		    model_find(json_string_value(json_object_get(g, "model")));

		if (!m || (mig && !json_is_boolean(mig))) {
			json_decref(root);
			return fail_unknown("fake NVML config %s: gpus[%zu]: expected {\"model\": "
			                    "\"H100-80GB\"|\"A100-40GB\"|\"A30\", \"mig\": bool}",
			                    path, i);
		}
		F.gpus[i].model = m;
		F.gpus[i].mig = !mig || json_is_true(mig);
	}
	F.n_gpus = (unsigned)json_array_size(gpus);
	json_t *base = json_object_get(root, "uuid_base");
	if (base && (!json_is_integer(base) || json_integer_value(base) < 1 ||
	             json_integer_value(base) > (json_int_t)1 << 40)) {
		json_decref(root);
		return fail_unknown("fake NVML config %s: uuid_base: expected an integer 1..2^40",
		                    path);
	}
	if (base)
		F.uuid_base = (unsigned long long)json_integer_value(base);
	json_decref(root);
	return NVML_SUCCESS;
}

static const char *state_path(void)
{
	const char *p = getenv("ISOSTACK_FAKE_NVML_STATE");
	return p && *p ? p : NULL;
}

static void clear_instances(void)
{
	for (unsigned g = 0; g < MAX_GPUS; g++)
		memset(F.gpus[g].gi, 0, sizeof(F.gpus[g].gi));
	F.n_events = 0;
	F.next_seq = 1;
	F.next_uuid = F.uuid_base;
}

#define UINT_FIELD(o, k, max, out)                                                                 \
	(json_is_integer(json_object_get(o, k)) &&                                                 \
	 json_integer_value(json_object_get(o, k)) >= 0 &&                                         \
	 json_integer_value(json_object_get(o, k)) <= (json_int_t)(max) &&                         \
	 ((out) = (unsigned)json_integer_value(json_object_get(o, k)), true))

/* Reads the state file into F (under the lock). A missing file is empty. */
static nvmlReturn_t load_state(void)
{
	const char *path = state_path();
	json_error_t jerr;
	json_t *root, *gpus, *events;

	if (!path)
		return NVML_SUCCESS;
	/* Unchanged since we last read or wrote it (the lock file counts the
	 * saves): nothing to read. */
	if (F.have_gen && F.gen == F.disk_gen)
		return NVML_SUCCESS;
	F.have_gen = false;
	clear_instances();
	if (access(path, F_OK) != 0)
		return NVML_SUCCESS;
	if (!(root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr)))
		return fail_unknown("fake NVML state %s: line %d: %s", path, jerr.line, jerr.text);
	gpus = json_object_get(root, "gpus");
	events = json_object_get(root, "events");
	if (!json_is_array(gpus) || json_array_size(gpus) != F.n_gpus || !json_is_array(events) ||
	    !json_is_integer(json_object_get(root, "next_seq")) ||
	    !json_is_integer(json_object_get(root, "next_uuid"))) {
		json_decref(root);
		return fail_unknown("fake NVML state %s: expected {gpus: [%u entries], events, "
		                    "next_seq, next_uuid}",
		                    path, F.n_gpus);
	}
	F.next_seq = (unsigned long long)json_integer_value(json_object_get(root, "next_seq"));
	F.next_uuid = (unsigned long long)json_integer_value(json_object_get(root, "next_uuid"));
	for (size_t g = 0; g < json_array_size(gpus); g++) {
		json_t *insts = json_object_get(json_array_get(gpus, g), "instances");
		for (size_t i = 0; json_is_array(insts) && i < json_array_size(insts); i++) {
			json_t *o = json_array_get(insts, i), *cis = json_object_get(o, "cis");
			unsigned gi = 0, pid = 0, start = 0;
			const struct fake_profile *p;
			struct fake_gi *G;

			if (!UINT_FIELD(o, "gi", MAX_GI - 1, gi) || gi == 0 ||
			    !UINT_FIELD(o, "profile_id", 1000, pid) ||
			    !UINT_FIELD(o, "start", 7, start) ||
			    !(p = profile_by_id(F.gpus[g].model, pid)) || !json_is_array(cis) ||
			    F.gpus[g].gi[gi].used) {
				json_decref(root);
				return fail_unknown("fake NVML state %s: gpus[%zu].instances[%zu]: "
				                    "expected {gi, profile_id, start, cis}",
				                    path, g, i);
			}
			G = &F.gpus[g].gi[gi];
			G->used = true;
			G->profile = p;
			G->start = start;
			for (size_t c = 0; c < json_array_size(cis) && c < MAX_CI; c++) {
				json_t *co = json_array_get(cis, c);
				unsigned ci = 0;
				const char *uuid = json_string_value(json_object_get(co, "uuid"));
				if (!UINT_FIELD(co, "ci", MAX_CI - 1, ci) || !uuid ||
				    !UINT_FIELD(co, "profile_id", 100, G->ci[ci].profile_id) ||
				    !UINT_FIELD(co, "slices", 8, G->ci[ci].slices)) {
					json_decref(root);
					return fail_unknown(
					    "fake NVML state %s: gpus[%zu].instances[%zu]"
					    ".cis[%zu]: expected {ci, profile_id, "
					    "slices, uuid, busy}",
					    path, g, i, c);
				}
				G->ci[ci].used = true;
				G->ci[ci].busy = json_is_true(json_object_get(co, "busy"));
				snprintf(G->ci[ci].uuid, sizeof(G->ci[ci].uuid), "%s", uuid);
			}
		}
	}
	for (size_t e = 0; e < json_array_size(events) && e < MAX_EVENTS; e++) {
		json_t *o = json_array_get(events, e);
		struct fake_event *ev = &F.events[F.n_events++];
		ev->seq = (unsigned long long)json_integer_value(json_object_get(o, "seq"));
		ev->xid = (unsigned long long)json_integer_value(json_object_get(o, "xid"));
		ev->gpu = (unsigned)json_integer_value(json_object_get(o, "gpu"));
		ev->gi = (unsigned)json_integer_value(json_object_get(o, "gi"));
		ev->ci = (unsigned)json_integer_value(json_object_get(o, "ci"));
	}
	json_decref(root);
	F.have_gen = true;
	F.gen = F.disk_gen;
	return NVML_SUCCESS;
}

static nvmlReturn_t save_state(void)
{
	const char *path = state_path();
	json_t *root, *gpus = json_array(), *events = json_array();
	char *text;
	size_t len;
	int r, fd;

	if (!path)
		return NVML_SUCCESS;
	F.have_gen = false; /* F is ahead of the file until the write is done */
	for (unsigned g = 0; g < F.n_gpus; g++) {
		json_t *insts = json_array();
		for (unsigned gi = 1; gi < MAX_GI; gi++) {
			const struct fake_gi *G = &F.gpus[g].gi[gi];
			json_t *cis = json_array();
			if (!G->used) {
				json_decref(cis);
				continue;
			}
			for (unsigned c = 0; c < MAX_CI; c++)
				if (G->ci[c].used)
					json_array_append_new(
					    cis, json_pack("{s:i, s:i, s:i, s:s, s:b}", "ci", c,
					                   "profile_id", G->ci[c].profile_id,
					                   "slices", G->ci[c].slices, "uuid",
					                   G->ci[c].uuid, "busy", G->ci[c].busy));
			json_array_append_new(insts, json_pack("{s:i, s:i, s:i, s:i, s:o}", "gi",
			                                       gi, "profile_id", G->profile->id,
			                                       "start", G->start, "size",
			                                       G->profile->mem, "cis", cis));
		}
		json_array_append_new(gpus, json_pack("{s:s, s:o}", "model", F.gpus[g].model->key,
		                                      "instances", insts));
	}
	for (unsigned e = 0; e < F.n_events; e++)
		json_array_append_new(
		    events,
		    json_pack("{s:I, s:I, s:i, s:I, s:I}", "seq", (json_int_t)F.events[e].seq,
		              "xid", (json_int_t)F.events[e].xid, "gpu", F.events[e].gpu, "gi",
		              (json_int_t)F.events[e].gi, "ci", (json_int_t)F.events[e].ci));
	root = json_pack("{s:o, s:o, s:I, s:I}", "gpus", gpus, "events", events, "next_seq",
	                 (json_int_t)F.next_seq, "next_uuid", (json_int_t)F.next_uuid);
	/* Overwritten in place, then cut to length: every reader holds the
	 * lock, and a test's state need not survive a crash of the machine
	 * (no truncation to zero or rename, which make ext4 flush each time). */
	text = json_dumps(root, JSON_INDENT(1));
	json_decref(root);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	len = text ? strlen(text) : 0;
	r = text && fd >= 0 && pwrite(fd, text, len, 0) == (ssize_t)len &&
	            ftruncate(fd, (off_t)len) == 0
	        ? 0
	        : -1;
	free(text);
	if (fd >= 0)
		close(fd);
	if (r != 0)
		return fail_unknown("fake NVML state %s: cannot write: %s", path, strerror(errno));
	F.gen = ++F.disk_gen;
	F.have_gen = pwrite(F.lock_fd, &F.gen, sizeof(F.gen), 0) == (ssize_t)sizeof(F.gen);
	return NVML_SUCCESS;
}

/* Every call that reads or changes instances runs between begin() and end():
 * one thread of this process at a time (the agent waits for XIDs in one
 * thread while it changes instances in another), and the state file locked
 * and read again when another process changed it. */
static nvmlReturn_t begin(void)
{
	const char *path = state_path();
	char lock[PATH_MAX];

	pthread_mutex_lock(&F.mutex); /* end() unlocks, whatever begin() returns */
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (path) {
		snprintf(lock, sizeof(lock), "%s.lock", path);
		F.lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (F.lock_fd < 0 || flock(F.lock_fd, LOCK_EX) != 0)
			return fail_unknown("fake NVML state %s: cannot lock: %s", lock,
			                    strerror(errno));
		if (pread(F.lock_fd, &F.disk_gen, sizeof(F.disk_gen), 0) != sizeof(F.disk_gen))
			F.disk_gen = 0;
	}
	return load_state();
}

static nvmlReturn_t end(nvmlReturn_t rc, bool changed)
{
	if (rc == NVML_SUCCESS && changed)
		rc = save_state();
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
		nvmlReturn_t _b = begin();                                                         \
		if (_b != NVML_SUCCESS)                                                            \
			return end(_b, false);                                                     \
	} while (0)

static struct fake_gpu *gpu_of(nvmlDevice_t d)
{
	if (!d || d->kind != H_GPU || d->gpu >= F.n_gpus)
		return NULL;
	return &F.gpus[d->gpu];
}

static struct fake_gi *gi_of(nvmlGpuInstance_t h)
{
	if (!h || h->gpu >= F.n_gpus || h->gi == 0 || h->gi >= MAX_GI ||
	    !F.gpus[h->gpu].gi[h->gi].used)
		return NULL;
	return &F.gpus[h->gpu].gi[h->gi];
}

/* The MIG device at `index` of a GPU: GPU instances by id, then compute
 * instances by id. NVML reuses these handles, so they are looked up now. */
static bool mig_at(unsigned gpu, unsigned index, unsigned *gi_out, unsigned *ci_out)
{
	unsigned n = 0;

	for (unsigned gi = 1; gi < MAX_GI; gi++)
		for (unsigned ci = 0; F.gpus[gpu].gi[gi].used && ci < MAX_CI; ci++)
			if (F.gpus[gpu].gi[gi].ci[ci].used && n++ == index) {
				*gi_out = gi;
				*ci_out = ci;
				return true;
			}
	return false;
}

/* ---- the NVML subset ---- */

EXPORT const char *nvmlErrorString(nvmlReturn_t rc)
{
	switch (rc) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_TIMEOUT:
		return "Timeout";
	case NVML_ERROR_IN_USE:
		return "In use by another client";
	case NVML_ERROR_INSUFFICIENT_RESOURCES:
		return "Insufficient Resources";
	case NVML_ERROR_UNKNOWN:
		return F.error[0] ? F.error : "Unknown Error";
	default:
		return "Unknown Error";
	}
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	nvmlReturn_t rc;

	FAILPOINT();
	F.error[0] = '\0';
	if ((rc = load_config()) != NVML_SUCCESS)
		return rc;
	clear_instances();
	F.have_gen = false;
	for (unsigned g = 0; g < MAX_GPUS; g++) {
		F.gpu_h[g] = (struct nvmlDevice_st){H_GPU, g, 0};
		for (unsigned i = 0; i < MAX_CI; i++)
			F.mig_h[g][i] = (struct nvmlDevice_st){H_MIG, g, i};
		for (unsigned gi = 0; gi < MAX_GI; gi++) {
			F.gi_h[g][gi] = (struct nvmlGpuInstance_st){g, gi};
			for (unsigned ci = 0; ci < MAX_CI; ci++)
				F.ci_h[g][gi][ci] = (struct nvmlComputeInstance_st){g, gi, ci};
		}
	}
	F.initialized = true;
	/* A garbled state file is an error now, not at the first call. */
	BEGIN();
	return end(NVML_SUCCESS, false);
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	F.initialized = false;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = F.n_gpus;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev)
{
	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!dev || index >= F.n_gpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*dev = &F.gpu_h[index];
	return NVML_SUCCESS;
}

static nvmlReturn_t copy_out(char *buf, unsigned len, const char *s)
{
	if (!buf)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(s) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len)
{
	struct fake_gpu *g;

	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!(g = gpu_of(dev)))
		return NVML_ERROR_INVALID_ARGUMENT;
	return copy_out(name, len, g->model->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len)
{
	char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	unsigned gi, ci;

	FAILPOINT();
	if (!dev || (dev->kind != H_GPU && dev->kind != H_MIG) || dev->gpu >= F.n_gpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (dev->kind == H_GPU) {
		snprintf(buf, sizeof(buf), "GPU-fa4e%04x-0000-4000-8000-%012x", dev->gpu,
		         0x150c0000u + dev->gpu);
		return copy_out(uuid, len, buf);
	}
	BEGIN();
	if (!mig_at(dev->gpu, dev->index, &gi, &ci))
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	return end(copy_out(uuid, len, F.gpus[dev->gpu].gi[gi].ci[ci].uuid), false);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!gpu_of(dev) || !pci)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(pci, 0, sizeof(*pci));
	pci->bus = 0x18 + dev->gpu;
	pci->pciDeviceId = 0x233010de;
	snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", pci->bus);
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", pci->bus);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *cur, unsigned int *pending)
{
	struct fake_gpu *g;

	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!(g = gpu_of(dev)) || !cur || !pending)
		return NVML_ERROR_INVALID_ARGUMENT;
	*cur = *pending = g->mig ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t dev, unsigned int profile,
                                                        nvmlGpuInstanceProfileInfo_t *info)
{
	struct fake_gpu *g;

	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!(g = gpu_of(dev)) || !info || profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < g->model->n_profiles; i++) {
		const struct fake_profile *p = &g->model->profiles[i];
		if (p->nvml_enum != profile)
			continue;
		memset(info, 0, sizeof(*info));
		info->id = p->id;
		info->sliceCount = p->compute;
		info->instanceCount = p->max;
		info->multiprocessorCount = 0;
		info->memorySizeMB = p->memory_mb;
		return NVML_SUCCESS;
	}
	return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t dev, unsigned int id,
                                                                  nvmlGpuInstancePlacement_t *pl,
                                                                  unsigned int *count)
{
	struct fake_gpu *g;
	const struct fake_profile *p;

	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!(g = gpu_of(dev)) || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!(p = profile_by_id(g->model, id)))
		return NVML_ERROR_NOT_SUPPORTED;
	if (pl)
		for (int i = 0; i < p->n_starts; i++)
			pl[i] = (nvmlGpuInstancePlacement_t){p->starts[i], p->mem};
	*count = (unsigned)p->n_starts;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t dev, unsigned int id,
                                                             const nvmlGpuInstancePlacement_t *pl,
                                                             nvmlGpuInstance_t *out)
{
	struct fake_gpu *g;
	const struct fake_profile *p;
	unsigned used_mask = 0, want, compute = 0, count = 0, gi_id = 0;
	bool me = false, allowed = false;

	FAILPOINT();
	BEGIN();
	if (!(g = gpu_of(dev)) || !pl || !out)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if (!g->mig)
		return end(NVML_ERROR_NOT_SUPPORTED, false);
	if (!(p = profile_by_id(g->model, id)))
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	for (int i = 0; i < p->n_starts; i++)
		if (p->starts[i] == pl->start && pl->size == p->mem)
			allowed = true;
	if (!allowed)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	for (unsigned gi = 1; gi < MAX_GI; gi++) {
		const struct fake_gi *G = &g->gi[gi];
		if (!G->used) {
			if (!gi_id)
				gi_id = gi;
			continue;
		}
		used_mask |= ((1u << G->profile->mem) - 1u) << G->start;
		compute += G->profile->compute;
		count += G->profile == p;
		me |= G->profile->me;
	}
	want = ((1u << p->mem) - 1u) << pl->start;
	if ((used_mask & want) || count >= p->max ||
	    compute + p->compute > g->model->compute_slices || (p->me && me) || !gi_id)
		return end(NVML_ERROR_INSUFFICIENT_RESOURCES, false);
	memset(&g->gi[gi_id], 0, sizeof(g->gi[gi_id]));
	g->gi[gi_id].used = true;
	g->gi[gi_id].profile = p;
	g->gi[gi_id].start = pl->start;
	*out = &F.gi_h[dev->gpu][gi_id];
	return end(NVML_SUCCESS, true);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t dev, unsigned int id,
                                              nvmlGpuInstance_t *out, unsigned int *count)
{
	struct fake_gpu *g;
	unsigned n = 0;

	FAILPOINT();
	BEGIN();
	if (!(g = gpu_of(dev)) || !out || !count)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if (!profile_by_id(g->model, id))
		return end(NVML_ERROR_NOT_SUPPORTED, false);
	for (unsigned gi = 1; gi < MAX_GI; gi++)
		if (g->gi[gi].used && g->gi[gi].profile->id == id)
			out[n++] = &F.gi_h[dev->gpu][gi];
	*count = n;
	return end(NVML_SUCCESS, false);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t *info)
{
	struct fake_gi *G;

	FAILPOINT();
	BEGIN();
	if (!(G = gi_of(h)) || !info)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	info->device = &F.gpu_h[h->gpu];
	info->id = h->gi;
	info->profileId = G->profile->id;
	info->placement = (nvmlGpuInstancePlacement_t){G->start, G->profile->mem};
	return end(NVML_SUCCESS, false);
}

EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t h)
{
	struct fake_gi *G;

	FAILPOINT();
	BEGIN();
	if (!(G = gi_of(h)))
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	for (unsigned c = 0; c < MAX_CI; c++)
		if (G->ci[c].used)
			return end(NVML_ERROR_IN_USE, false);
	memset(G, 0, sizeof(*G));
	return end(NVML_SUCCESS, true);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t h, unsigned int profile, unsigned int eng,
    nvmlComputeInstanceProfileInfo_t *info)
{
	struct fake_gi *G;

	FAILPOINT();
	BEGIN();
	if (!(G = gi_of(h)) || !info || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
	    eng != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if (!ci_slices[profile] || ci_slices[profile] > G->profile->compute)
		return end(NVML_ERROR_NOT_SUPPORTED, false);
	memset(info, 0, sizeof(*info));
	info->id = profile;
	info->sliceCount = ci_slices[profile];
	info->instanceCount = G->profile->compute / ci_slices[profile];
	return end(NVML_SUCCESS, false);
}

EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t h, unsigned int id,
                                                         nvmlComputeInstance_t *out)
{
	struct fake_gi *G;
	unsigned used = 0, free_ci = MAX_CI;

	FAILPOINT();
	BEGIN();
	if (!(G = gi_of(h)) || !out || id >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT || !ci_slices[id])
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if (ci_slices[id] > G->profile->compute)
		return end(NVML_ERROR_NOT_SUPPORTED, false);
	for (unsigned c = MAX_CI; c-- > 0;)
		if (G->ci[c].used)
			used += G->ci[c].slices;
		else
			free_ci = c;
	if (used + ci_slices[id] > G->profile->compute || free_ci == MAX_CI)
		return end(NVML_ERROR_INSUFFICIENT_RESOURCES, false);
	G->ci[free_ci].used = true;
	G->ci[free_ci].profile_id = id;
	G->ci[free_ci].slices = ci_slices[id];
	G->ci[free_ci].busy = false;
	snprintf(G->ci[free_ci].uuid, sizeof(G->ci[free_ci].uuid),
	         "MIG-%08llx-%04x-4%03x-8000-%012llx", F.next_uuid, h->gpu, h->gi,
	         (unsigned long long)F.next_uuid * 2654435761ull % 0xffffffffffffull);
	F.next_uuid++;
	*out = &F.ci_h[h->gpu][h->gi][free_ci];
	return end(NVML_SUCCESS, true);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t h, unsigned int id,
                                                       nvmlComputeInstance_t *out,
                                                       unsigned int *count)
{
	struct fake_gi *G;
	unsigned n = 0;

	FAILPOINT();
	BEGIN();
	if (!(G = gi_of(h)) || !out || !count || id >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	for (unsigned c = 0; c < MAX_CI; c++)
		if (G->ci[c].used && G->ci[c].profile_id == id)
			out[n++] = &F.ci_h[h->gpu][h->gi][c];
	*count = n;
	return end(NVML_SUCCESS, false);
}

EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t h)
{
	struct fake_gi *G;

	FAILPOINT();
	BEGIN();
	if (!h || h->gpu >= F.n_gpus || h->gi >= MAX_GI || h->ci >= MAX_CI ||
	    !(G = gi_of(&F.gi_h[h->gpu][h->gi])) || !G->ci[h->ci].used)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if (G->ci[h->ci].busy)
		return end(NVML_ERROR_IN_USE, false);
	memset(&G->ci[h->ci], 0, sizeof(G->ci[h->ci]));
	return end(NVML_SUCCESS, true);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count)
{
	struct fake_gpu *g;

	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!(g = gpu_of(dev)) || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = g->model->compute_slices;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
                                                        nvmlDevice_t *mig)
{
	unsigned gi, ci;

	FAILPOINT();
	BEGIN();
	if (!gpu_of(dev) || !mig || index >= MAX_CI)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if (!mig_at(dev->gpu, index, &gi, &ci))
		return end(NVML_ERROR_NOT_FOUND, false);
	*mig = &F.mig_h[dev->gpu][index];
	return end(NVML_SUCCESS, false);
}

static nvmlReturn_t mig_ids(nvmlDevice_t dev, unsigned *gi, unsigned *ci)
{
	if (!dev || dev->kind != H_MIG || dev->gpu >= F.n_gpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	return mig_at(dev->gpu, dev->index, gi, ci) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int *id)
{
	unsigned gi, ci;
	nvmlReturn_t rc;

	FAILPOINT();
	BEGIN();
	if (!id)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if ((rc = mig_ids(dev, &gi, &ci)) == NVML_SUCCESS)
		*id = gi;
	return end(rc, false);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int *id)
{
	unsigned gi, ci;
	nvmlReturn_t rc;

	FAILPOINT();
	BEGIN();
	if (!id)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if ((rc = mig_ids(dev, &gi, &ci)) == NVML_SUCCESS)
		*id = ci;
	return end(rc, false);
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	FAILPOINT();
	if (!F.initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!set)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!(*set = calloc(1, sizeof(**set))))
		return NVML_ERROR_MEMORY;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	FAILPOINT();
	free(set);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                             nvmlEventSet_t set)
{
	FAILPOINT();
	BEGIN();
	if (!gpu_of(dev) || !set)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if (types & ~(unsigned long long)nvmlEventTypeXidCriticalError)
		return end(NVML_ERROR_NOT_SUPPORTED, false);
	/* Events from before the registration are lost, as on a real GPU. */
	if (!set->armed) {
		set->armed = true;
		set->last_seq = F.next_seq - 1;
	}
	set->registered[dev->gpu] = true;
	return end(NVML_SUCCESS, false);
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                        unsigned int timeout_ms)
{
	struct timespec t0, now, nap = {0, 5 * 1000 * 1000};

	FAILPOINT();
	if (!set || !data)
		return NVML_ERROR_INVALID_ARGUMENT;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		BEGIN();
		for (unsigned e = 0; e < F.n_events; e++) {
			const struct fake_event *ev = &F.events[e];
			if (ev->seq <= set->last_seq || ev->gpu >= F.n_gpus ||
			    !set->registered[ev->gpu])
				continue;
			set->last_seq = ev->seq;
			memset(data, 0, sizeof(*data));
			data->device = &F.gpu_h[ev->gpu];
			data->eventType = nvmlEventTypeXidCriticalError;
			data->eventData = ev->xid;
			data->gpuInstanceId = ev->gi;
			data->computeInstanceId = ev->ci;
			return end(NVML_SUCCESS, false);
		}
		end(NVML_SUCCESS, false);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >=
		    (long)timeout_ms)
			return NVML_ERROR_TIMEOUT;
		nanosleep(&nap, NULL);
	}
}

/* ---- test hooks (dlsym) ---- */

/* Queues an XID on GPU `gpu` for every event set registered on it (gi/ci:
 * 0xFFFFFFFF when not attributable). With a state file, any process may
 * inject into another's library. */
EXPORT nvmlReturn_t isostack_fake_nvml_inject_xid(unsigned gpu, unsigned long long xid, unsigned gi,
                                                  unsigned ci)
{
	BEGIN();
	if (gpu >= F.n_gpus)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	if (F.n_events == MAX_EVENTS) {
		memmove(&F.events[0], &F.events[1], (MAX_EVENTS - 1) * sizeof(F.events[0]));
		F.n_events--;
	}
	F.events[F.n_events++] = (struct fake_event){F.next_seq++, xid, gpu, gi, ci};
	return end(NVML_SUCCESS, true);
}

/* Marks the compute instances of the GPU instance at memory slice `start`
 * busy (a process runs there: their destroy gives NVML_ERROR_IN_USE). */
EXPORT nvmlReturn_t isostack_fake_nvml_set_busy(unsigned gpu, unsigned start, int busy)
{
	BEGIN();
	if (gpu >= F.n_gpus)
		return end(NVML_ERROR_INVALID_ARGUMENT, false);
	for (unsigned gi = 1; gi < MAX_GI; gi++) {
		struct fake_gi *G = &F.gpus[gpu].gi[gi];
		if (!G->used || G->start != start)
			continue;
		for (unsigned c = 0; c < MAX_CI; c++)
			if (G->ci[c].used)
				G->ci[c].busy = busy != 0;
		return end(NVML_SUCCESS, true);
	}
	return end(NVML_ERROR_NOT_FOUND, false);
}

/* sim.c: the `sim` GPU driver, a model of what a MIG GPU accepts, for `make
 * run` and most tests. The rules are src/mig's (iso_mig_fits_at: overlap,
 * allowed starts, max count, compute slices, the one +me slot), so the sim
 * refuses exactly what the engine would never place. Its state (the GPUs and
 * their instances with their MIG UUIDs) lives in <state_dir>/gpu-sim.json,
 * rewritten whole after every change, so that a restarted driver finds its
 * instances and their UUIDs again. Each GPU has a MIG mode, kept in the same
 * file, so that a sim host can match a node whose inventory has MIG off: such
 * a GPU refuses instances as NVML does and is handed over whole by its GPU
 * UUID. XIDs and busy instances are test hooks kept in memory. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <sodium.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "isostack/gpu.h"

#define SIM_XID_QUEUE 64

struct sim_inst {
	const struct iso_mig_profile *profile;
	int start;
	int gi_id;
	int ci_id;
	char uuid[ISO_GPU_UUID_MAX];
	bool busy;
};

struct sim_gpu {
	const struct iso_gpu_model *model;
	char uuid[ISO_GPU_UUID_MAX];
	bool mig; /* MIG mode; a GPU with it off holds no instances */
	struct iso_gpu_occupancy occ;
	int n;
	struct sim_inst inst[ISO_MIG_MAX_SLICES]; /* in order of creation */
};

struct sim {
	struct iso_gpu base;
	char path[PATH_MAX];
	int n_gpus;
	struct sim_gpu gpus[ISO_GPU_MAX];
	int xid_head, xid_n;
	struct iso_gpu_xid xids[SIM_XID_QUEUE];
};

static struct sim *sim_of(struct iso_gpu *g)
{
	return (struct sim *)g;
}

static void new_uuid(char *buf, size_t size, const char *prefix)
{
	unsigned char b[16];

	randombytes_buf(b, sizeof(b));
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(buf, size,
	         "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
	         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
	         b[13], b[14], b[15]);
}

/* ---- the state file ---- */

static int save(struct sim *s, struct iso_error *err)
{
	json_t *gpus = json_array();
	json_t *root;
	char *text;
	int r;

	for (int i = 0; i < s->n_gpus; i++) {
		const struct sim_gpu *gp = &s->gpus[i];
		json_t *insts = json_array();

		for (int k = 0; k < gp->n; k++) {
			const struct sim_inst *in = &gp->inst[k];
			json_array_append_new(insts, json_pack("{s:s, s:i, s:i, s:i, s:s}",
			                                       "profile", in->profile->name,
			                                       "start", in->start, "gi", in->gi_id,
			                                       "ci", in->ci_id, "uuid", in->uuid));
		}
		json_array_append_new(gpus, json_pack("{s:s, s:s, s:b, s:o}", "model",
		                                      gp->model->name, "uuid", gp->uuid, "mig",
		                                      gp->mig, "instances", insts));
	}
	root = json_pack("{s:i, s:o}", "version", 1, "gpus", gpus);
	text = root ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
	json_decref(root);
	if (!text)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	r = iso_file_write_atomic(s->path, text, strlen(text), 0600, false, err);
	free(text);
	return r;
}

static int bad(struct iso_error *err, const char *path, const char *field, const char *what)
{
	return iso_error_set(err, ISO_E_INVALID, field, "%s: %s: %s", path, field, what);
}

static int load_instance(struct sim *s, struct sim_gpu *gp, json_t *o, const char *at,
                         struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	const char *name = json_string_value(json_object_get(o, "profile"));
	const char *uuid = json_string_value(json_object_get(o, "uuid"));
	json_t *start = json_object_get(o, "start"), *gi = json_object_get(o, "gi"),
	       *ci = json_object_get(o, "ci");
	const struct iso_mig_profile *p;
	struct sim_inst *in;

#define FIELD(f) (snprintf(field, sizeof(field), "%s.%s", at, f), field)
	if (!json_is_object(o))
		return bad(err, s->path, at, "expected an object");
	if (!(p = iso_mig_profile_find(gp->model, name)))
		return bad(err, s->path, FIELD("profile"), "not a profile of this GPU's model");
	if (!json_is_integer(start) || json_integer_value(start) < 0 ||
	    json_integer_value(start) >= gp->model->memory_slices)
		return bad(err, s->path, FIELD("start"), "expected a memory slice index");
	if (!iso_mig_fits_at(gp->model, &gp->occ, p, (int)json_integer_value(start)))
		return bad(err, s->path, FIELD("start"),
		           "outside the profile's placements or overlapping another instance");
	if (!json_is_integer(gi) || json_integer_value(gi) < 1 || json_integer_value(gi) > 64)
		return bad(err, s->path, FIELD("gi"), "expected a GPU instance id 1..64");
	for (int k = 0; k < gp->n; k++)
		if (gp->inst[k].gi_id == (int)json_integer_value(gi))
			return bad(err, s->path, FIELD("gi"), "duplicate GPU instance id");
	if (!json_is_integer(ci) || json_integer_value(ci) < 0 || json_integer_value(ci) > 64)
		return bad(err, s->path, FIELD("ci"), "expected a compute instance id 0..64");
	if (!uuid || strncmp(uuid, "MIG-", 4) != 0 || strlen(uuid) >= ISO_GPU_UUID_MAX)
		return bad(err, s->path, FIELD("uuid"), "expected \"MIG-...\"");
	/* CUDA_VISIBLE_DEVICES names an instance by it: one per node. */
	for (int i = 0; i <= s->n_gpus; i++)
		for (int k = 0; k < s->gpus[i].n; k++)
			if (strcmp(s->gpus[i].inst[k].uuid, uuid) == 0)
				return bad(err, s->path, FIELD("uuid"), "duplicate MIG UUID");
#undef FIELD
	in = &gp->inst[gp->n++];
	in->profile = p;
	in->start = (int)json_integer_value(start);
	in->gi_id = (int)json_integer_value(gi);
	in->ci_id = (int)json_integer_value(ci);
	iso_strlcpy(in->uuid, uuid, sizeof(in->uuid));
	iso_mig_take(gp->model, &gp->occ, p, in->start);
	return 0;
}

static int load(struct sim *s, struct iso_error *err)
{
	json_error_t jerr;
	json_t *root = json_load_file(s->path, JSON_REJECT_DUPLICATES, &jerr);
	json_t *gpus, *v;
	char field[ISO_ERR_FIELD_MAX];
	int r = 0;

	if (!root)
		return iso_error_set(err, ISO_E_INVALID, "", "%s: line %d: %s", s->path, jerr.line,
		                     jerr.text);
	v = json_object_get(root, "version");
	gpus = json_object_get(root, "gpus");
	if (!json_is_integer(v) || json_integer_value(v) != 1)
		r = bad(err, s->path, "version", "expected 1");
	else if (!json_is_array(gpus) || json_array_size(gpus) == 0 ||
	         json_array_size(gpus) > ISO_GPU_MAX)
		r = bad(err, s->path, "gpus", "expected an array of 1..64 GPUs");
	for (size_t i = 0; r == 0 && i < json_array_size(gpus); i++) {
		json_t *o = json_array_get(gpus, i), *insts = json_object_get(o, "instances");
		json_t *mig = json_object_get(o, "mig");
		struct sim_gpu *gp = &s->gpus[i];
		const char *uuid = json_string_value(json_object_get(o, "uuid"));

		gp->model = iso_gpu_model_find(json_string_value(json_object_get(o, "model")));
		snprintf(field, sizeof(field), "gpus[%zu].model", i);
		if (!gp->model) {
			r = bad(err, s->path, field, "not a known GPU model");
			break;
		}
		snprintf(field, sizeof(field), "gpus[%zu].uuid", i);
		if (!uuid || strncmp(uuid, "GPU-", 4) != 0 || strlen(uuid) >= ISO_GPU_UUID_MAX) {
			r = bad(err, s->path, field, "expected \"GPU-...\"");
			break;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(s->gpus[j].uuid, uuid) == 0)
				r = bad(err, s->path, field, "duplicate GPU UUID");
		if (r < 0)
			break;
		iso_strlcpy(gp->uuid, uuid, sizeof(gp->uuid));
		/* A state written before MIG modes were kept had every GPU on. */
		snprintf(field, sizeof(field), "gpus[%zu].mig", i);
		if (mig && !json_is_boolean(mig)) {
			r = bad(err, s->path, field, "expected true or false");
			break;
		}
		gp->mig = !mig || json_is_true(mig);
		iso_gpu_occupancy_init(&gp->occ, gp->model);
		snprintf(field, sizeof(field), "gpus[%zu].instances", i);
		if (!json_is_array(insts) || json_array_size(insts) > ISO_MIG_MAX_SLICES) {
			r = bad(err, s->path, field, "expected an array of at most 8 instances");
			break;
		}
		if (!gp->mig && json_array_size(insts) > 0) {
			r = bad(err, s->path, field, "a GPU with MIG off holds no instances");
			break;
		}
		for (size_t k = 0; r == 0 && k < json_array_size(insts); k++) {
			char at[ISO_ERR_FIELD_MAX];
			snprintf(at, sizeof(at), "gpus[%zu].instances[%zu]", i, k);
			r = load_instance(s, gp, json_array_get(insts, k), at, err);
		}
		s->n_gpus++;
	}
	json_decref(root);
	return r;
}

/* ---- the driver ---- */

static void sim_close(struct iso_gpu *g)
{
	free(g);
}

static int sim_open(const struct iso_gpu_open_args *args, struct iso_gpu **out,
                    struct iso_error *err)
{
	struct sim *s;
	size_t n_models = args && args->models ? args->n_models : 8;
	int r;

	*out = NULL;
	if (!args || !args->state_dir || !*args->state_dir)
		return iso_error_set(err, ISO_E_INVALID, "state_dir",
		                     "the sim GPU driver needs a state directory");
	if (n_models == 0 || n_models > ISO_GPU_MAX)
		return iso_error_set(err, ISO_E_INVALID, "models", "expected 1..%d GPU models",
		                     ISO_GPU_MAX);
	if (args->mig && args->n_mig != n_models)
		return iso_error_set(err, ISO_E_INVALID, "mig",
		                     "expected a MIG mode for each of the %zu GPUs, got %zu",
		                     n_models, args->n_mig);
	if (!(s = calloc(1, sizeof(*s))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	s->base.ops = &iso_gpu_sim_ops;
	if (snprintf(s->path, sizeof(s->path), "%s/%s", args->state_dir, ISO_GPU_SIM_STATE_FILE) >=
	    (int)sizeof(s->path)) {
		free(s);
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "path too long");
	}
	if (access(s->path, F_OK) == 0) {
		r = load(s, err);
		/* A state on disk must describe the GPUs we were told of. */
		for (size_t i = 0; r == 0 && args->models && i < n_models; i++)
			if ((size_t)s->n_gpus != n_models ||
			    s->gpus[i].model != iso_gpu_model_find(args->models[i]))
				r = iso_error_set(
				    err, ISO_E_INVALID, "models",
				    "%s holds other GPUs than the %zu asked for (GPU %zu)", s->path,
				    n_models, i);
	} else if (errno != ENOENT) {
		r = iso_error_set(err, ISO_E_INTERNAL, "state_dir", "cannot read %s: %s", s->path,
		                  strerror(errno));
	} else {
		r = 0;
		for (size_t i = 0; r == 0 && i < n_models; i++) {
			struct sim_gpu *gp = &s->gpus[i];
			gp->model =
			    iso_gpu_model_find(args->models ? args->models[i] : "h100-80gb");
			if (!gp->model) {
				r = iso_error_set(err, ISO_E_INVALID, "models",
				                  "models[%zu]: not a known GPU model", i);
				break;
			}
			gp->mig = !args->mig || args->mig[i];
			iso_gpu_occupancy_init(&gp->occ, gp->model);
			new_uuid(gp->uuid, sizeof(gp->uuid), "GPU");
			s->n_gpus++;
		}
		if (r == 0)
			r = save(s, err);
	}
	if (r < 0) {
		free(s);
		return r;
	}
	*out = &s->base;
	return 0;
}

static int sim_gpu_at(struct sim *s, unsigned gpu, struct sim_gpu **out, struct iso_error *err)
{
	if (gpu >= (unsigned)s->n_gpus)
		return iso_error_set(err, ISO_E_NOT_FOUND, "gpu", "no GPU %u (the node has %d)",
		                     gpu, s->n_gpus),
		       -ENODEV;
	*out = &s->gpus[gpu];
	return 0;
}

static int sim_list_gpus(struct iso_gpu *g, struct iso_gpu_info **out, size_t *n,
                         struct iso_error *err)
{
	struct sim *s = sim_of(g);
	struct iso_gpu_info *v = calloc((size_t)s->n_gpus, sizeof(*v));

	*out = NULL;
	*n = 0;
	if (!v)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < s->n_gpus; i++) {
		v[i].index = (unsigned)i;
		iso_strlcpy(v[i].name, s->gpus[i].model->product, sizeof(v[i].name));
		iso_strlcpy(v[i].uuid, s->gpus[i].uuid, sizeof(v[i].uuid));
		snprintf(v[i].pci_bus_id, sizeof(v[i].pci_bus_id), "00000000:%02X:00.0", 0x18 + i);
		v[i].mig_enabled = s->gpus[i].mig;
		v[i].model = s->gpus[i].model;
	}
	*out = v;
	*n = (size_t)s->n_gpus;
	return 0;
}

static void fill(const struct sim_inst *in, struct iso_gpu_instance *o)
{
	memset(o, 0, sizeof(*o));
	iso_strlcpy(o->profile, in->profile->name, sizeof(o->profile));
	o->start = in->start;
	o->size = in->profile->width;
	o->gi_id = in->gi_id;
	o->ci_id = in->ci_id;
	iso_strlcpy(o->uuid, in->uuid, sizeof(o->uuid));
}

static int by_start(const void *a, const void *b)
{
	return ((const struct iso_gpu_instance *)a)->start -
	       ((const struct iso_gpu_instance *)b)->start;
}

static int sim_list_instances(struct iso_gpu *g, unsigned gpu, struct iso_gpu_instance **out,
                              size_t *n, struct iso_error *err)
{
	struct sim_gpu *gp;
	struct iso_gpu_instance *v;
	int r = sim_gpu_at(sim_of(g), gpu, &gp, err);

	*out = NULL;
	*n = 0;
	if (r < 0)
		return r;
	if (!(v = calloc((size_t)gp->n + 1, sizeof(*v))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int k = 0; k < gp->n; k++)
		fill(&gp->inst[k], &v[k]);
	qsort(v, (size_t)gp->n, sizeof(*v), by_start);
	*out = v;
	*n = (size_t)gp->n;
	return 0;
}

static int sim_list_profiles(struct iso_gpu *g, unsigned gpu, struct iso_gpu_profile_info **out,
                             size_t *n, struct iso_error *err)
{
	struct sim_gpu *gp;
	struct iso_gpu_profile_info *v;
	int r = sim_gpu_at(sim_of(g), gpu, &gp, err);

	*out = NULL;
	*n = 0;
	if (r < 0)
		return r;
	if (!(v = calloc((size_t)gp->model->n_profiles, sizeof(*v))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < gp->model->n_profiles; i++) {
		const struct iso_mig_profile *p = &gp->model->profiles[i];
		iso_strlcpy(v[i].profile, p->name, sizeof(v[i].profile));
		v[i].nvml_enum = (unsigned)iso_gpu_profile_enum(gp->model, p);
		v[i].id = (unsigned)p->nvml_id;
		v[i].compute = p->compute;
		v[i].max_count = p->max_count;
		v[i].width = p->width;
		v[i].starts = p->starts;
		v[i].placements_uniform = true;
	}
	*out = v;
	*n = (size_t)gp->model->n_profiles;
	return 0;
}

static int find_at(const struct sim_gpu *gp, int start)
{
	for (int k = 0; k < gp->n; k++)
		if (gp->inst[k].start == start)
			return k;
	return -1;
}

static int sim_create(struct iso_gpu *g, unsigned gpu, const char *profile, int start,
                      struct iso_gpu_instance *out, struct iso_error *err)
{
	struct sim *s = sim_of(g);
	struct sim_gpu *gp;
	const struct iso_mig_profile *p;
	struct sim_inst *in;
	int r = sim_gpu_at(s, gpu, &gp, err), gi = 1;

	if (r < 0)
		return r;
	if (!(p = iso_mig_profile_find(gp->model, profile)))
		return iso_error_set(err, ISO_E_INVALID, "profile", "GPU %u (%s) has no profile %s",
		                     gpu, gp->model->name, profile ? profile : "(null)");
	/* As the nvml driver answers (NVML_ERROR_NOT_SUPPORTED from the create
	 * on a real GPU): checked after the profile, before the start. */
	if (!gp->mig)
		return iso_error_set(err, ISO_E_CONFLICT, "gpu", "GPU %u: MIG mode is off", gpu),
		       -EOPNOTSUPP;
	if (start < 0 || start >= gp->model->memory_slices || !((p->starts >> start) & 1u))
		return iso_error_set(err, ISO_E_INVALID, "start",
		                     "GPU %u: %s cannot start at memory slice %d", gpu, p->name,
		                     start);
	if (!iso_mig_fits_at(gp->model, &gp->occ, p, start))
		return iso_error_set(err, ISO_E_NO_CAPACITY, "start",
		                     "GPU %u: %s at %d overlaps an instance or exceeds the GPU's "
		                     "limits",
		                     gpu, p->name, start);
	for (int k = 0; k < gp->n; k++)
		if (gp->inst[k].gi_id == gi)
			gi++, k = -1; /* lowest free id from 1 */
	in = &gp->inst[gp->n++];
	memset(in, 0, sizeof(*in));
	in->profile = p;
	in->start = start;
	in->gi_id = gi;
	in->ci_id = 0;
	new_uuid(in->uuid, sizeof(in->uuid), "MIG");
	iso_mig_take(gp->model, &gp->occ, p, start);
	if ((r = save(s, err)) < 0) {
		iso_mig_give(gp->model, &gp->occ, p, start);
		gp->n--;
		return r;
	}
	if (out)
		fill(in, out);
	return 0;
}

static int sim_destroy(struct iso_gpu *g, unsigned gpu, int start, struct iso_error *err)
{
	struct sim *s = sim_of(g);
	struct sim_gpu *gp;
	struct sim_inst gone;
	int r = sim_gpu_at(s, gpu, &gp, err), k;

	if (r < 0)
		return r;
	if ((k = find_at(gp, start)) < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "start",
		                     "GPU %u: no instance starts at memory slice %d", gpu, start);
	if (gp->inst[k].busy)
		return iso_error_set(err, ISO_E_CONFLICT, "start",
		                     "GPU %u: the instance at %d is in use", gpu, start),
		       -EBUSY;
	gone = gp->inst[k];
	memmove(&gp->inst[k], &gp->inst[k + 1], (size_t)(gp->n - k - 1) * sizeof(gp->inst[0]));
	gp->n--;
	iso_mig_give(gp->model, &gp->occ, gone.profile, gone.start);
	if ((r = save(s, err)) < 0) {
		memmove(&gp->inst[k + 1], &gp->inst[k], (size_t)(gp->n - k) * sizeof(gp->inst[0]));
		gp->inst[k] = gone;
		gp->n++;
		iso_mig_take(gp->model, &gp->occ, gone.profile, gone.start);
	}
	return r;
}

static int sim_wait_xid(struct iso_gpu *g, int timeout_ms, struct iso_gpu_xid *out,
                        struct iso_error *err)
{
	struct sim *s = sim_of(g);

	if (s->xid_n == 0) {
		/* Injection is in-process: nothing can arrive while we sleep, but
		 * the caller's loop keeps its rhythm. */
		if (timeout_ms > 0) {
			struct timespec ts = {timeout_ms / 1000,
			                      (long)(timeout_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		return -ETIMEDOUT;
	}
	*out = s->xids[s->xid_head];
	s->xid_head = (s->xid_head + 1) % SIM_XID_QUEUE;
	s->xid_n--;
	return 0;
}

int iso_gpu_sim_inject_xid(struct iso_gpu *g, unsigned gpu, unsigned long long xid, int gi_id,
                           int ci_id, struct iso_error *err)
{
	struct sim *s;
	struct sim_gpu *gp;
	int r;

	if (!g || g->ops != &iso_gpu_sim_ops)
		return iso_error_set(err, ISO_E_INVALID, "driver", "not a sim GPU driver");
	s = sim_of(g);
	if ((r = sim_gpu_at(s, gpu, &gp, err)) < 0)
		return r;
	if (s->xid_n == SIM_XID_QUEUE)
		return iso_error_set(err, ISO_E_LIMIT, "xid", "%d XIDs already queued",
		                     SIM_XID_QUEUE);
	s->xids[(s->xid_head + s->xid_n++) % SIM_XID_QUEUE] =
	    (struct iso_gpu_xid){.gpu = gpu, .xid = xid, .gi_id = gi_id, .ci_id = ci_id};
	return 0;
}

int iso_gpu_sim_set_busy(struct iso_gpu *g, unsigned gpu, int start, bool busy,
                         struct iso_error *err)
{
	struct sim_gpu *gp;
	int r, k;

	if (!g || g->ops != &iso_gpu_sim_ops)
		return iso_error_set(err, ISO_E_INVALID, "driver", "not a sim GPU driver");
	if ((r = sim_gpu_at(sim_of(g), gpu, &gp, err)) < 0)
		return r;
	if ((k = find_at(gp, start)) < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "start",
		                     "GPU %u: no instance starts at memory slice %d", gpu, start);
	gp->inst[k].busy = busy;
	return 0;
}

int iso_gpu_sim_set_mig(struct iso_gpu *g, unsigned gpu, bool on, struct iso_error *err)
{
	struct sim_gpu *gp;
	bool was;
	int r;

	if (!g || g->ops != &iso_gpu_sim_ops)
		return iso_error_set(err, ISO_E_INVALID, "driver", "not a sim GPU driver");
	if ((r = sim_gpu_at(sim_of(g), gpu, &gp, err)) < 0)
		return r;
	/* nvidia-smi -mig refuses a change while instances exist; the operator
	 * destroys them first. */
	if (gp->n > 0)
		return iso_error_set(err, ISO_E_CONFLICT, "gpu",
		                     "GPU %u: %d MIG instances exist; destroy them first", gpu,
		                     gp->n),
		       -EBUSY;
	was = gp->mig;
	gp->mig = on;
	if ((r = save(sim_of(g), err)) < 0)
		gp->mig = was;
	return r;
}

const struct iso_gpu_driver_ops iso_gpu_sim_ops = {
    .name = "sim",
    .open = sim_open,
    .close = sim_close,
    .list_gpus = sim_list_gpus,
    .list_instances = sim_list_instances,
    .list_profiles = sim_list_profiles,
    .create_instance = sim_create,
    .destroy_instance = sim_destroy,
    .wait_xid = sim_wait_xid,
};

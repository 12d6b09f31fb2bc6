/* gpu.h: GPU drivers behind one small vtable. The node agent makes a
 * placement real through it: it lists a node's GPUs and their MIG instances,
 * creates one instance at the start the engine chose (a GPU instance with
 * that placement plus one compute instance of its full size), destroys one
 * instance by its start, and waits for XID events. Two drivers: `sim`, a
 * model of the same rules over src/mig's tables with its state in a file,
 * and `nvml`, libnvidia-ml.so.1 loaded with dlopen (no build-time NVIDIA
 * dependency). A driver never touches an instance it was not asked about.
 * An opened nvml driver may be called from several threads (wait_xid in one,
 * changes in another); a sim driver is one thread's.
 * Facts and sources: docs/gpu.md and docs/reference-mig.md. */
#ifndef ISOSTACK_GPU_H
#define ISOSTACK_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isostack/mig.h"
#include "isostack/util.h"

ISO_PUBLIC_BEGIN

#define ISO_GPU_NAME_MAX    96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define ISO_GPU_UUID_MAX    96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define ISO_GPU_PCI_MAX     32 /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
#define ISO_GPU_PROFILE_MAX 32
#define ISO_GPU_MAX         64   /* GPUs per node a driver handles */
#define ISO_GPU_ID_NONE     (-1) /* a GI/CI id that is not known */

/* The sim driver's state file, in its state_dir. */
#define ISO_GPU_SIM_STATE_FILE "gpu-sim.json"

/* One physical GPU. `model` is isostack's key for it ("h100-80gb", see
 * iso_gpu_model_find), or NULL when the name is not one we know. */
struct iso_gpu_info {
	unsigned index;
	char name[ISO_GPU_NAME_MAX]; /* as the device reports it */
	char uuid[ISO_GPU_UUID_MAX]; /* "GPU-..." */
	char pci_bus_id[ISO_GPU_PCI_MAX];
	bool mig_enabled;
	const struct iso_gpu_model *model;
};

/* One MIG instance: a GPU instance and (normally) its one compute instance.
 * A GPU instance left without a compute instance (a create cut short) is
 * listed with ci_id ISO_GPU_ID_NONE and an empty uuid, so that it can be
 * destroyed. */
struct iso_gpu_instance {
	char profile[ISO_GPU_PROFILE_MAX]; /* "3g.40gb"; "" when not in src/mig's table */
	int start;                         /* first memory slice (8-wide axis, 4 on A30) */
	int size;                          /* memory slices */
	int gi_id;
	int ci_id;
	char uuid[ISO_GPU_UUID_MAX]; /* "MIG-..." for CUDA_VISIBLE_DEVICES */
};

/* A profile as the device describes it: for checking a GPU's geometry
 * against src/mig's tables. */
struct iso_gpu_profile_info {
	char profile[ISO_GPU_PROFILE_MAX]; /* matched in src/mig's table, or "" */
	unsigned nvml_enum;                /* NVML_GPU_INSTANCE_PROFILE_* */
	unsigned id;                       /* the profile ID the create calls take */
	int compute;                       /* compute slices */
	int max_count;
	int width;               /* memory slices of a placement */
	uint8_t starts;          /* bit i: may start at memory slice i */
	bool placements_uniform; /* every placement had the same size */
};

/* An XID event. gi_id/ci_id are ISO_GPU_ID_NONE when not attributable. */
struct iso_gpu_xid {
	unsigned gpu;
	unsigned long long xid;
	int gi_id;
	int ci_id;
};

struct iso_gpu_open_args {
	/* sim: the directory its state file (gpu-sim.json) lives in; required. */
	const char *state_dir;
	/* nvml: the library to load; NULL: env ISOSTACK_NVML_LIBRARY, else
	 * "libnvidia-ml.so.1" from the loader's path. */
	const char *library;
	/* sim: the models (isostack keys) of a new state's GPUs; NULL: 8 x
	 * h100-80gb. A state already on disk must match. */
	const char *const *models;
	size_t n_models;
	/* sim: the MIG mode of each GPU of a new state (n_mig: one per GPU);
	 * NULL: all on. A state already on disk keeps its own. */
	const bool *mig;
	size_t n_mig;
};

struct iso_gpu; /* one opened driver; its first member is its ops */

struct iso_gpu_driver_ops {
	const char *name;
	int (*open)(const struct iso_gpu_open_args *args, struct iso_gpu **out,
	            struct iso_error *err);
	void (*close)(struct iso_gpu *g);
	/* *out is malloc'd (free it), *n entries. */
	int (*list_gpus)(struct iso_gpu *g, struct iso_gpu_info **out, size_t *n,
	                 struct iso_error *err);
	/* By start. */
	int (*list_instances)(struct iso_gpu *g, unsigned gpu, struct iso_gpu_instance **out,
	                      size_t *n, struct iso_error *err);
	int (*list_profiles)(struct iso_gpu *g, unsigned gpu, struct iso_gpu_profile_info **out,
	                     size_t *n, struct iso_error *err);
	/* -ENOSPC: overlaps an instance (or no room under max count, compute,
	 * +me); -EINVAL: unknown profile or a start outside its placements;
	 * -ENODEV: no such GPU; -EOPNOTSUPP: MIG off. Fills *out (may be NULL). */
	int (*create_instance)(struct iso_gpu *g, unsigned gpu, const char *profile, int start,
	                       struct iso_gpu_instance *out, struct iso_error *err);
	/* The instance starting at `start`: its compute instances, then its GPU
	 * instance. -ENOENT when none starts there; -EBUSY when in use (nothing
	 * destroyed). */
	int (*destroy_instance)(struct iso_gpu *g, unsigned gpu, int start, struct iso_error *err);
	/* 0 and *out on an event; -ETIMEDOUT when none came within timeout_ms. */
	int (*wait_xid)(struct iso_gpu *g, int timeout_ms, struct iso_gpu_xid *out,
	                struct iso_error *err);
};

struct iso_gpu {
	const struct iso_gpu_driver_ops *ops;
};

extern const struct iso_gpu_driver_ops iso_gpu_sim_ops;
extern const struct iso_gpu_driver_ops iso_gpu_nvml_ops;

/* "sim" or "nvml"; NULL when unknown. */
const struct iso_gpu_driver_ops *iso_gpu_driver_find(const char *name);

/* isostack's model for a device name as NVML reports it ("NVIDIA H100 80GB
 * HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA A30"), or NULL. */
const struct iso_gpu_model *iso_gpu_model_for_name(const char *name);

/* The NVML_GPU_INSTANCE_PROFILE_* enum of a profile of src/mig's table
 * (from its compute slices, memory slices and +me flag), or -1. */
int iso_gpu_profile_enum(const struct iso_gpu_model *m, const struct iso_mig_profile *p);

/* The sim driver's test hooks: queue an XID for wait_xid (gi/ci may be
 * ISO_GPU_ID_NONE), and mark the instance at `start` busy (a process runs
 * in it: destroy gives -EBUSY) or idle. */
int iso_gpu_sim_inject_xid(struct iso_gpu *g, unsigned gpu, unsigned long long xid, int gi_id,
                           int ci_id, struct iso_error *err);
int iso_gpu_sim_set_busy(struct iso_gpu *g, unsigned gpu, int start, bool busy,
                         struct iso_error *err);
/* The sim driver's test hook for a MIG mode change (as `nvidia-smi -i N -mig
 * 0|1`), persisted; -EBUSY while the GPU holds instances. */
int iso_gpu_sim_set_mig(struct iso_gpu *g, unsigned gpu, bool on, struct iso_error *err);

ISO_PUBLIC_END

#endif

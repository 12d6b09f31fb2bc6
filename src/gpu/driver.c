/* driver.c: what both GPU drivers share: the registry of drivers by name,
 * and the two mappings between NVML's vocabulary and src/mig's tables (a
 * device name to a model, a profile to its NVML_GPU_INSTANCE_PROFILE_* enum).
 * The profile IDs themselves are always asked of the device at run time. */
#include <string.h>
#include <strings.h>

#include "isostack/gpu.h"
#include "gpu/nvml_abi.h"

const struct iso_gpu_driver_ops *iso_gpu_driver_find(const char *name)
{
	if (!name)
		return NULL;
	if (strcmp(name, iso_gpu_sim_ops.name) == 0)
		return &iso_gpu_sim_ops;
	if (strcmp(name, iso_gpu_nvml_ops.name) == 0)
		return &iso_gpu_nvml_ops;
	return NULL;
}

static bool has(const char *s, const char *word)
{
	return strcasestr(s, word) != NULL;
}

const struct iso_gpu_model *iso_gpu_model_for_name(const char *name)
{
	const char *key = NULL;

	if (!name)
		return NULL;
	/* Names as NVML reports them: "NVIDIA A100-SXM4-40GB", "NVIDIA A100
	 * 80GB PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL", "NVIDIA
	 * H200", "NVIDIA B200", "NVIDIA A30". */
	if (has(name, "A100"))
		key = has(name, "80GB") ? "a100-80gb" : has(name, "40GB") ? "a100-40gb" : NULL;
	else if (has(name, "H100"))
		key = has(name, "NVL") || has(name, "94GB") ? "h100-94gb" : "h100-80gb";
	else if (has(name, "H200"))
		key = "h200-141gb";
	else if (has(name, "B200"))
		key = "b200-180gb";
	else if (has(name, "A30"))
		key = "a30-24gb";
	return key ? iso_gpu_model_find(key) : NULL;
}

int iso_gpu_profile_enum(const struct iso_gpu_model *m, const struct iso_mig_profile *p)
{
	if (!m || !p)
		return -1;
	switch (p->compute) {
	case 1:
		if (p->width == 2 && m->memory_slices == 8)
			return p->media_engine ? -1 : NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2;
		return p->media_engine ? NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1
		                       : NVML_GPU_INSTANCE_PROFILE_1_SLICE;
	case 2:
		return p->media_engine ? NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1
		                       : NVML_GPU_INSTANCE_PROFILE_2_SLICE;
	case 3:
		return p->media_engine ? -1 : NVML_GPU_INSTANCE_PROFILE_3_SLICE;
	case 4:
		return p->media_engine ? -1 : NVML_GPU_INSTANCE_PROFILE_4_SLICE;
	case 7:
		return p->media_engine ? -1 : NVML_GPU_INSTANCE_PROFILE_7_SLICE;
	default:
		return -1;
	}
}

/* nvml_abi.h: the part of NVML's C interface isostack uses, written by us
 * from NVML's header (NVIDIA/go-nvml gen/nvml/nvml.h, API 13): return codes,
 * constants, handle types, structure layouts and the function types we
 * resolve with dlsym. Declaring these few ourselves keeps the build free of
 * any NVIDIA package (docs/gpu.md). The project's fake libnvidia-ml.so.1
 * (tests/fakes/) implements the same functions from this file. */
#ifndef ISOSTACK_GPU_NVML_ABI_H
#define ISOSTACK_GPU_NVML_ABI_H

typedef enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NO_PERMISSION = 4,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_GPU_IS_LOST = 15,
	NVML_ERROR_IN_USE = 19,
	NVML_ERROR_MEMORY = 20,
	NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
	NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

#define NVML_DEVICE_NAME_V2_BUFFER_SIZE       96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE       96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE    32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE  0x1

/* GPU instance profile enums (what nvmlDeviceGetGpuInstanceProfileInfo takes;
 * it answers with the profile ID the create calls take). */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE      0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE      0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE      0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE      0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE      0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE      0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE      0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9
#define NVML_GPU_INSTANCE_PROFILE_COUNT        0x12

#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT   0x9

#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0

#define nvmlEventTypeXidCriticalError 0x0000000000000008LL

typedef struct {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct {
	unsigned int start; /* index of the first occupied memory slice */
	unsigned int size;  /* memory slices occupied */
} nvmlGpuInstancePlacement_t;

typedef struct {
	unsigned int id; /* the profile ID */
	unsigned int isP2pSupported;
	unsigned int sliceCount; /* compute slices */
	unsigned int instanceCount;
	unsigned int multiprocessorCount;
	unsigned int copyEngineCount;
	unsigned int decoderCount;
	unsigned int encoderCount;
	unsigned int jpegCount;
	unsigned int ofaCount;
	unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct {
	nvmlDevice_t device;
	unsigned int id;
	unsigned int profileId;
	nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct {
	unsigned int id;
	unsigned int sliceCount;
	unsigned int instanceCount;
	unsigned int multiprocessorCount;
	unsigned int sharedCopyEngineCount;
	unsigned int sharedDecoderCount;
	unsigned int sharedEncoderCount;
	unsigned int sharedJpegCount;
	unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType;
	unsigned long long eventData; /* the XID (999: unknown) */
	unsigned int gpuInstanceId;   /* 0xFFFFFFFF: not attributable */
	unsigned int computeInstanceId;
} nvmlEventData_t;

#define NVML_ID_NONE 0xFFFFFFFFu

/* The functions we resolve, as X(name, return type, parameters). */
#define NVML_FUNCTIONS(X)                                                                          \
	X(nvmlInit_v2, nvmlReturn_t, (void))                                                       \
	X(nvmlShutdown, nvmlReturn_t, (void))                                                      \
	X(nvmlErrorString, const char *, (nvmlReturn_t))                                           \
	X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *))                                   \
	X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int, nvmlDevice_t *))             \
	X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int))                   \
	X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int))                   \
	X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t, nvmlPciInfo_t *))                  \
	X(nvmlDeviceGetMigMode, nvmlReturn_t, (nvmlDevice_t, unsigned int *, unsigned int *))      \
	X(nvmlDeviceGetGpuInstanceProfileInfo, nvmlReturn_t,                                       \
	  (nvmlDevice_t, unsigned int, nvmlGpuInstanceProfileInfo_t *))                            \
	X(nvmlDeviceGetGpuInstancePossiblePlacements_v2, nvmlReturn_t,                             \
	  (nvmlDevice_t, unsigned int, nvmlGpuInstancePlacement_t *, unsigned int *))              \
	X(nvmlDeviceCreateGpuInstanceWithPlacement, nvmlReturn_t,                                  \
	  (nvmlDevice_t, unsigned int, const nvmlGpuInstancePlacement_t *, nvmlGpuInstance_t *))   \
	X(nvmlDeviceGetGpuInstances, nvmlReturn_t,                                                 \
	  (nvmlDevice_t, unsigned int, nvmlGpuInstance_t *, unsigned int *))                       \
	X(nvmlGpuInstanceGetInfo, nvmlReturn_t, (nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *))      \
	X(nvmlGpuInstanceDestroy, nvmlReturn_t, (nvmlGpuInstance_t))                               \
	X(nvmlGpuInstanceGetComputeInstanceProfileInfo, nvmlReturn_t,                              \
	  (nvmlGpuInstance_t, unsigned int, unsigned int, nvmlComputeInstanceProfileInfo_t *))     \
	X(nvmlGpuInstanceCreateComputeInstance, nvmlReturn_t,                                      \
	  (nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *))                              \
	X(nvmlGpuInstanceGetComputeInstances, nvmlReturn_t,                                        \
	  (nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *, unsigned int *))              \
	X(nvmlComputeInstanceDestroy, nvmlReturn_t, (nvmlComputeInstance_t))                       \
	X(nvmlDeviceGetMaxMigDeviceCount, nvmlReturn_t, (nvmlDevice_t, unsigned int *))            \
	X(nvmlDeviceGetMigDeviceHandleByIndex, nvmlReturn_t,                                       \
	  (nvmlDevice_t, unsigned int, nvmlDevice_t *))                                            \
	X(nvmlDeviceGetGpuInstanceId, nvmlReturn_t, (nvmlDevice_t, unsigned int *))                \
	X(nvmlDeviceGetComputeInstanceId, nvmlReturn_t, (nvmlDevice_t, unsigned int *))            \
	X(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t *))                                    \
	X(nvmlDeviceRegisterEvents, nvmlReturn_t,                                                  \
	  (nvmlDevice_t, unsigned long long, nvmlEventSet_t))                                      \
	X(nvmlEventSetWait_v2, nvmlReturn_t, (nvmlEventSet_t, nvmlEventData_t *, unsigned int))    \
	X(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t))

#endif

/* cxi_abi.h: the part of libcxi's C interface isostack uses, written by us
 * from HPE's headers (docs/fabric.md "Slingshot" cites them):
 * HewlettPackard/shs-libcxi include/libcxi.h (commit 148027d8) for the
 * function prototypes and struct cxil_svc_list, and the CXI driver's uapi
 * include/uapi/misc/cxi.h (HPE shs-cxi-driver, as mirrored at
 * goshacanada/shs-cxi-driver e4b3f100) for struct cxi_svc_desc, its member
 * types and limits. Declaring these few ourselves keeps the build free of any
 * HPE package (libcxi is not in Debian); the node agent loads libcxi.so.1
 * with dlopen (src/agent/cxi.c), and the project's fake libcxi.so.1
 * (tests/fakes/fake_cxi.c) implements the same functions from this file.
 *
 * Layout notes: struct cxi_svc_desc starts with one byte of bit-fields in
 * this order (GCC/Clang allocate them from the low bit on x86-64 and arm64,
 * as the kernel's own build does); __kernel_uid_t and __kernel_gid_t are
 * unsigned int; enums are int. The static asserts below pin the sizes we
 * computed from the uapi so that a drifting edit does not compile. */
#ifndef ISOSTACK_AGENT_CXI_ABI_H
#define ISOSTACK_AGENT_CXI_ABI_H

#include <stdbool.h>
#include <stdint.h>

#define CXI_SVC_MAX_MEMBERS 2
#define CXI_SVC_MAX_VNIS    4
#define CXI_DEFAULT_SVC_ID  1

enum cxi_traffic_class {
	CXI_TC_DEDICATED_ACCESS,
	CXI_TC_LOW_LATENCY,
	CXI_TC_BULK_DATA,
	CXI_TC_BEST_EFFORT,
	CXI_TC_ETH,
	CXI_TC_MAX,
};

enum cxi_traffic_class_type {
	CXI_TC_TYPE_DEFAULT,
	CXI_TC_TYPE_HRP,
	CXI_TC_TYPE_RESTRICTED,
	CXI_TC_TYPE_COLL_LEAF,
	CXI_TC_TYPE_MAX,
};

enum cxi_rsrc_type {
	CXI_RSRC_TYPE_PTE,
	CXI_RSRC_TYPE_TXQ,
	CXI_RSRC_TYPE_TGQ,
	CXI_RSRC_TYPE_EQ,
	CXI_RSRC_TYPE_CT,
	CXI_RSRC_TYPE_LE,
	CXI_RSRC_TYPE_TLE,
	CXI_RSRC_TYPE_AC,
	CXI_RSRC_TYPE_MAX,
};

struct cxi_limits {
	uint16_t max;
	uint16_t res;
};

struct cxi_rsrc_limits {
	struct cxi_limits type[CXI_RSRC_TYPE_MAX]; /* the uapi's union also names them */
};

enum cxi_svc_member_type {
	CXI_SVC_MEMBER_IGNORE,
	CXI_SVC_MEMBER_UID,
	CXI_SVC_MEMBER_GID,
	CXI_SVC_MEMBER_MAX,
};

struct cxi_svc_fail_info {
	uint16_t rsrc_avail[CXI_RSRC_TYPE_MAX];
	bool no_le_pools;
	bool no_tle_pools;
	bool no_cntr_pools;
};

struct cxi_svc_desc {
	uint8_t restricted_members : 1, /* only the members may use it */
	    restricted_vnis : 1,        /* only vnis[0..num_vld_vnis) */
	    restricted_tcs : 1, resource_limits : 1,
	    enable : 1, /* services are enabled on creation */
	    is_system_svc : 1, cntr_pool_id : 2;
	uint8_t num_vld_vnis; /* 1..CXI_SVC_MAX_VNIS when restricted_vnis */
	uint16_t vnis[CXI_SVC_MAX_VNIS];
	bool tcs[CXI_TC_MAX];
	struct {
		union {
			unsigned int uid;
			unsigned int gid;
		} svc_member;
		enum cxi_svc_member_type type;
	} members[CXI_SVC_MAX_MEMBERS];
	struct cxi_rsrc_limits limits;
	unsigned int svc_id;
};

_Static_assert(sizeof(struct cxi_svc_desc) == 68, "struct cxi_svc_desc drifted from the uapi");
_Static_assert(sizeof(struct cxi_svc_fail_info) == 20, "struct cxi_svc_fail_info drifted");

struct cxil_svc_list {
	unsigned int count;
	struct cxi_svc_desc descs[];
};

/* Opaque to isostack: libcxi's handles are pointers to its own structs. */
struct cxil_dev;
struct cxil_lni;
struct cxi_cp;

/* The functions the driver resolves at open (a missing one fails the open,
 * naming it). Each returns 0 (cxil_alloc_svc: the new svc_id > 0) or a
 * negative errno. */
#define CXI_FUNCTIONS(X)                                                                           \
	X(cxil_open_device, int, (uint32_t dev_id, struct cxil_dev * *dev))                        \
	X(cxil_close_device, void, (struct cxil_dev * dev))                                        \
	X(cxil_alloc_svc, int,                                                                     \
	  (struct cxil_dev * dev, const struct cxi_svc_desc *desc,                                 \
	   struct cxi_svc_fail_info *fail_info))                                                   \
	X(cxil_destroy_svc, int, (struct cxil_dev * dev, unsigned int svc_id))                     \
	X(cxil_get_svc_list, int, (struct cxil_dev * dev, struct cxil_svc_list * *svc_list))       \
	X(cxil_free_svc_list, void, (struct cxil_svc_list * svc_list))                             \
	X(cxil_get_svc, int,                                                                       \
	  (struct cxil_dev * dev, unsigned int svc_id, struct cxi_svc_desc *desc))

/* What a process does to use a VNI; the driver does not call these (the
 * tests do, through dlsym, to prove who may use which VNI). */
#define CXI_USER_FUNCTIONS(X)                                                                      \
	X(cxil_alloc_lni, int,                                                                     \
	  (struct cxil_dev * dev, struct cxil_lni * *lni, unsigned int svc_id))                    \
	X(cxil_destroy_lni, int, (struct cxil_lni * lni))                                          \
	X(cxil_alloc_cp, int,                                                                      \
	  (struct cxil_lni * lni, unsigned int vni, enum cxi_traffic_class tc,                     \
	   enum cxi_traffic_class_type tc_type, struct cxi_cp **cp))                               \
	X(cxil_destroy_cp, int, (struct cxi_cp * cp))

#endif

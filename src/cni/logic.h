/* logic.h: the CNI plugin's pure logic (issue 17, docs/cni.md), apart from
 * its main so that tests/unit/test_cni and tests/fuzz/fuzz_cni_config reach
 * it without a runtime: the network config, the environment and CNI_ARGS,
 * the namespace -> tenant map, version negotiation, the Result and the
 * error object. Nothing here does I/O. */
#ifndef ISOSTACK_CNI_LOGIC_H
#define ISOSTACK_CNI_LOGIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isostack/util.h"

/* CNI SPEC.md's well-known error codes, and ours (100 and up). */
enum cni_code {
	CNI_E_VERSION = 1,        /* incompatible CNI version */
	CNI_E_FIELD = 2,          /* unsupported field in the network config */
	CNI_E_UNKNOWN_CTR = 3,    /* container unknown or does not exist */
	CNI_E_ENV = 4,            /* invalid necessary environment variables */
	CNI_E_IO = 5,             /* I/O failure */
	CNI_E_DECODE = 6,         /* failed to decode content */
	CNI_E_CONFIG = 7,         /* invalid network config */
	CNI_E_TRY_LATER = 11,     /* try again later */
	CNI_E_NOT_AVAILABLE = 50, /* STATUS: the plugin cannot serve ADDs now */
	CNI_E_REFUSED = 100,      /* the agent or the controller refused (quota, isolation ...) */
	CNI_E_UNMAPPED = 101,     /* the pod's namespace has no tenant */
	CNI_E_CHECK = 102,        /* CHECK: the attachment is not as the agent holds it */
	CNI_E_IPAM = 103,         /* the IPAM plugin failed */
};

#define CNI_VERSION_LATEST "1.1.0"
#define CNI_TENANTS_MAX    256
#define CNI_NS_MAX         64 /* a Kubernetes namespace: a DNS label, 1-63 */
#define CNI_PATH_MAX       256

enum cni_command { CNI_ADD, CNI_DEL, CNI_CHECK, CNI_STATUS, CNI_GC, CNI_VERSION };

struct cni_tenant_map_entry {
	char ns[CNI_NS_MAX];
	char tenant[ISO_NAME_MAX];
};

/* The network config (one plugin's entry of a conflist, as the runtime
 * hands it over on stdin). */
struct cni_config {
	char cni_version[16];
	char name[129];
	char mode[16];                   /* "ethernet", "slingshot" or "infiniband" */
	char agent_socket[CNI_PATH_MAX]; /* from agentSocket or agentStateDir */
	char node[ISO_NAME_MAX];         /* "" : the agent's only node */
	char allocation[24];             /* join this allocation; "" : one of its own */
	unsigned cpus;                   /* the attachment's member: cpus, memory_mib */
	uint64_t memory_mib;
	size_t n_tenants;
	struct cni_tenant_map_entry tenants[CNI_TENANTS_MAX];
	bool has_ipam;
	char ipam_type[64];
	json_t *prev_result; /* borrowed from the document; NULL when none */
	json_t *valid;       /* GC's cni.dev/valid-attachments, borrowed; NULL none */
};

/* CNI_ARGS: "K=V;K=V". */
struct cni_args {
	char pod_namespace[CNI_NS_MAX];
	char pod_name[254];
	char allocation[24]; /* ISOSTACK_ALLOCATION */
	/* ISOSTACK_UID, ISOSTACK_GID (Slingshot mode: the pod's identity that
	 * its CXI service admits), 1..4294967294; 0: not given */
	uint32_t uid, gid;
	bool ignore_unknown;
};

/* The environment a runtime sets (names in the struct's comments). */
struct cni_env {
	enum cni_command command; /* CNI_COMMAND */
	char container_id[129];   /* CNI_CONTAINERID */
	char netns[CNI_PATH_MAX]; /* CNI_NETNS */
	char ifname[16];          /* CNI_IFNAME */
	char path[4096];          /* CNI_PATH */
	struct cni_args args;     /* CNI_ARGS */
};

/* The strict parse of the config: a field that is unknown, of the wrong
 * type or out of range is refused naming it (err->field, and the CNI code
 * in *code). *doc keeps what cfg borrows (prevResult, the valid list). */
int cni_config_parse(const char *text, size_t len, struct cni_config *cfg, json_t **doc, int *code,
                     struct iso_error *err);
/* CNI_ARGS (may be NULL or ""). */
int cni_args_parse(const char *text, struct cni_args *out, struct iso_error *err);
/* The environment, by the getter `get` (getenv in the main). */
int cni_env_parse(const char *(*get)(const char *), struct cni_env *out, int *code,
                  struct iso_error *err);
/* What a verb needs of the config beyond its parse (the CNI spec): STATUS
 * and GC came with 1.1.0, CHECK with 0.4.0 and always with the ADD's Result
 * as prevResult. Refused naming the field, the CNI code in *code. */
int cni_verb_check(enum cni_command command, const struct cni_config *cfg, int *code,
                   struct iso_error *err);
/* The pod namespace's tenant; -ENOENT when the map does not name it. */
int cni_tenant_of(const struct cni_config *cfg, const char *ns, const char **tenant);
/* Is v one of the versions this plugin speaks? */
bool cni_version_supported(const char *v);
/* VERSION's answer. */
json_t *cni_version_result(void);
/* {"cniVersion","code","msg","details"}. */
json_t *cni_error_json(const char *version, int code, const char *msg, const char *details);
/* The CNI code of an agent refusal with iso code c. */
int cni_code_of(enum iso_errcode c);
/* ADD's Result from the agent's answer (mac, address, prefixlen) and the
 * IPAM's result (routes, dns; NULL when none), for cniVersion `version`. */
json_t *cni_add_result(const char *version, const char *ifname, const char *netns,
                       const json_t *agent, const json_t *ipam);
/* Slingshot mode's ADD Result: the chain's prevResult passed on (its
 * cniVersion set to `version`), or an empty one (no interfaces, no ips):
 * the pod's CXI service is not an interface. */
json_t *cni_passthrough_result(const char *version, const json_t *prev);
/* The first IPv4 address of a Result's ips ("A.B.C.D/N"), or -ENOENT. */
int cni_result_ipv4(const json_t *result, char out[24]);

#endif

/* inventory.h: the cluster inventory (cluster.yaml) parsed and validated into
 * plain model structs. Every error names the file, line and field; unknown
 * keys and duplicates (names, GUIDs, GPU indexes) are errors. Schema:
 * docs/inventory.md. */
#ifndef ISOSTACK_INVENTORY_H
#define ISOSTACK_INVENTORY_H

#include "isostack/model.h"

ISO_PUBLIC_BEGIN

struct iso_pool {
	char name[ISO_NAME_MAX];
	char description[ISO_DESC_MAX];
};

struct iso_rack {
	char name[ISO_NAME_MAX];
	int n_pdus;
	char (*pdus)[ISO_NAME_MAX]; /* owned */
};

/* A partition that service ports (storage, login) join as full members and
 * tenant ports as limited ones: tenants reach the service, never each other. */
struct iso_shared_service {
	char name[ISO_NAME_MAX];
	uint16_t pkey; /* 0x0001..0x7ffe, never 0x7fff */
	int n_guids;
	uint64_t *guids; /* service port GUIDs, owned */
};

/* The files of one OpenSM instance (opensm driver). Paths as written in the
 * inventory: relative ones are relative to isostackd's working directory. */
struct iso_sm_files {
	char partitions_file[512]; /* what OpenSM reads (-P) */
	char pid_file[512];        /* its pid, for SIGHUP ("" = do not signal) */
	char log_file[512];        /* its log (-f), watched for incidents ("" = none) */
};

struct iso_fabric_config {
	enum iso_fabric_type type;
	/* The driver that programs partitions: "sim" (default: the in-process
	 * model), "opensm" (infiniband), "opafm" (omnipath). */
	char driver[16];
	struct iso_sm_files sm;       /* opensm: the primary SM's files */
	int n_standby;                /* opensm: further SMs, the same file on each */
	struct iso_sm_files *standby; /* owned */
	char opafm_file[512];         /* opafm: where opafm.xml is written */
	int64_t pkey_quarantine_ms;   /* a released P_Key waits this long; default 300000 */
	int coalesce_ms;              /* changes within this window share one reload; default 50 */
	int confirm_timeout_ms;       /* read-back must confirm within this; default 10000 */
	/* opensm: who writes partitions.conf. false ("local", the default):
	 * isostackd writes the files above. true ("agent"): the agent of node
	 * sm_node (a node of `nodes:`) writes it on the SM host, fenced by the
	 * leader's term (docs/fabric.md); the files above are its flags then. */
	bool partitions_by_agent;
	char sm_node[ISO_NAME_MAX];
	char name[ISO_NAME_MAX];
	int n_sm_nodes;                 /* infiniband / omnipath */
	char (*sm_nodes)[ISO_NAME_MAX]; /* owned; hostnames of subnet managers */
	uint16_t pkey_min, pkey_max;    /* tenant P_Key range (infiniband/omnipath) */
	uint32_t vni_min, vni_max;      /* tenant VNI range (ethernet) */
	uint16_t vlan_min, vlan_max;    /* tenant RoCE VLAN range (ethernet); 0, 0: none */
	int n_services;
	struct iso_shared_service *services; /* owned */
};

/* Optional `controller:` section: how isostackd serves. Flags override it. */
struct iso_controller_config {
	char listen[128];   /* "127.0.0.1:8470" when absent */
	char tls_cert[512]; /* PEM paths; both or neither */
	char tls_key[512];
	bool allow_remote_http; /* plain HTTP beyond loopback; default false */
	char placement[32];     /* placement policy name; default "first-fit" */
};

struct iso_inventory {
	char path[512];
	char cluster_name[ISO_NAME_MAX];
	struct iso_controller_config controller;
	struct iso_fabric_config fabric;
	int n_pools;
	struct iso_pool *pools;
	int n_racks;
	struct iso_rack *racks;
	int n_nodes;
	struct iso_node *nodes; /* sched = ISO_NODE_SCHEDULABLE on load */
};

/* Loads and validates. On error returns negative errno, fills err and leaves
 * *out untouched: code ISO_E_INVALID (ISO_E_NOT_FOUND when the file does not
 * exist), field the dotted key path ("nodes[3].port.guid"; "" for YAML syntax
 * and file errors), message "FILE:LINE: path.to.key: what is wrong". */
int iso_inventory_load_file(const char *path, struct iso_inventory **out, struct iso_error *err);
/* Same from memory; `name` stands in for the file name in messages. */
int iso_inventory_load_string(const char *name, const char *yaml, size_t len,
                              struct iso_inventory **out, struct iso_error *err);
void iso_inventory_free(struct iso_inventory *inv);
static inline void iso_inventory_freep(struct iso_inventory **p)
{
	if (*p)
		iso_inventory_free(*p);
}

const struct iso_node *iso_inventory_find_node(const struct iso_inventory *inv, const char *name);

ISO_PUBLIC_END

#endif

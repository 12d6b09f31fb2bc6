/* model.c: names and invariants of the plain model: roles, node scheduling
 * states and the allocation state machine. The transition table here is the
 * only place that decides which state changes are legal. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "isostack/model.h"

static const char *const role_names[] = {
    [ISO_ROLE_CLUSTER_ADMIN] = "cluster-admin", [ISO_ROLE_AUDITOR] = "auditor",
    [ISO_ROLE_TENANT_ADMIN] = "tenant-admin",   [ISO_ROLE_TENANT_USER] = "tenant-user",
    [ISO_ROLE_NODE_AGENT] = "node-agent",       [ISO_ROLE_NEUTRON] = "neutron",
};

const char *iso_role_name(enum iso_role role)
{
	return (unsigned)role < ISO_ARRAY_SIZE(role_names) ? role_names[role] : "unknown";
}

int iso_role_parse(const char *s, enum iso_role *out)
{
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(role_names); i++)
		if (strcmp(s, role_names[i]) == 0) {
			*out = (enum iso_role)i;
			return 0;
		}
	return -EINVAL;
}

static const char *const partition_names[] = {
    [ISO_PARTITION_PER_TENANT] = "per-tenant",
    [ISO_PARTITION_PER_ALLOCATION] = "per-allocation",
};

const char *iso_partition_mode_name(enum iso_partition_mode m)
{
	return (unsigned)m < ISO_ARRAY_SIZE(partition_names) ? partition_names[m] : "unknown";
}

int iso_partition_mode_parse(const char *s, enum iso_partition_mode *out)
{
	for (unsigned i = 0; s && i < ISO_ARRAY_SIZE(partition_names); i++)
		if (strcmp(s, partition_names[i]) == 0) {
			*out = (enum iso_partition_mode)i;
			return 0;
		}
	return -EINVAL;
}

bool iso_role_is_tenant_scoped(enum iso_role role)
{
	return role == ISO_ROLE_TENANT_ADMIN || role == ISO_ROLE_TENANT_USER;
}

const char *iso_fabric_type_name(enum iso_fabric_type t)
{
	switch (t) {
	case ISO_FABRIC_INFINIBAND:
		return "infiniband";
	case ISO_FABRIC_ETHERNET:
		return "ethernet";
	case ISO_FABRIC_OMNIPATH:
		return "omnipath";
	case ISO_FABRIC_SLINGSHOT:
		return "slingshot";
	}
	return "unknown";
}

const char *iso_node_sched_name(enum iso_node_sched s)
{
	switch (s) {
	case ISO_NODE_SCHEDULABLE:
		return "schedulable";
	case ISO_NODE_CORDONED:
		return "cordoned";
	case ISO_NODE_DRAINING:
		return "draining";
	case ISO_NODE_DOWN:
		return "down";
	}
	return "unknown";
}

static const char *const state_names[] = {
    [ISO_ALLOC_PENDING] = "pending",
    [ISO_ALLOC_PLACED] = "placed",
    [ISO_ALLOC_PROVISIONING] = "provisioning",
    [ISO_ALLOC_ACTIVE] = "active",
    [ISO_ALLOC_RELEASING] = "releasing",
    [ISO_ALLOC_RELEASED] = "released",
    [ISO_ALLOC_FAILED] = "failed",
};

const char *iso_alloc_state_name(enum iso_alloc_state s)
{
	return (unsigned)s < ISO_ARRAY_SIZE(state_names) ? state_names[s] : "unknown";
}

int iso_alloc_state_parse(const char *s, enum iso_alloc_state *out)
{
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(state_names); i++)
		if (strcmp(s, state_names[i]) == 0) {
			*out = (enum iso_alloc_state)i;
			return 0;
		}
	return -EINVAL;
}

bool iso_alloc_state_terminal(enum iso_alloc_state s)
{
	return s == ISO_ALLOC_RELEASED || s == ISO_ALLOC_FAILED;
}

#define EDGE(a, b) (1u << (ISO_ALLOC_##b)) /* bit set in row a: a -> b is legal */
static const unsigned legal_edges[] = {
    [ISO_ALLOC_PENDING] = EDGE(PENDING, PLACED) | EDGE(PENDING, RELEASED),
    [ISO_ALLOC_PLACED] =
        EDGE(PLACED, PROVISIONING) | EDGE(PLACED, RELEASING) | EDGE(PLACED, FAILED),
    [ISO_ALLOC_PROVISIONING] =
        EDGE(PROVISIONING, ACTIVE) | EDGE(PROVISIONING, RELEASING) | EDGE(PROVISIONING, FAILED),
    [ISO_ALLOC_ACTIVE] = EDGE(ACTIVE, RELEASING) | EDGE(ACTIVE, FAILED),
    /* releasing -> pending: evicted (preemption, a fault) and requeued */
    [ISO_ALLOC_RELEASING] =
        EDGE(RELEASING, RELEASED) | EDGE(RELEASING, FAILED) | EDGE(RELEASING, PENDING),
    [ISO_ALLOC_RELEASED] = 0,
    [ISO_ALLOC_FAILED] = 0,
};
#undef EDGE

bool iso_alloc_transition_allowed(enum iso_alloc_state from, enum iso_alloc_state to)
{
	if ((unsigned)from >= ISO_ARRAY_SIZE(legal_edges) ||
	    (unsigned)to >= ISO_ARRAY_SIZE(state_names))
		return false;
	return (legal_edges[from] >> to) & 1u;
}

void iso_allocation_clear(struct iso_allocation *a)
{
	free(a->placed);
	free(a->slots);
	memset(a, 0, sizeof(*a));
}

void iso_node_clear(struct iso_node *n)
{
	free(n->gpus);
	free(n->port.vf_guids);
	memset(n, 0, sizeof(*n));
}

const struct iso_tenant_limit_def *iso_tenant_limit_def(enum iso_tenant_limit l)
{
	static const struct iso_tenant_limit_def defs[ISO_TENANT_LIMITS] = {
	    [ISO_LIMIT_MAX_PENDING] = {"max_pending", "--max-pending",
	                               offsetof(struct iso_tenant, max_pending), 0, 1000000},
	    [ISO_LIMIT_MAX_LIVE] = {"max_live", "--max-live", offsetof(struct iso_tenant, max_live),
	                            0, 1000000},
	    [ISO_LIMIT_MAX_USER_PRIORITY] = {"max_user_priority", "--max-user-priority",
	                                     offsetof(struct iso_tenant, max_user_priority), -1000,
	                                     1000},
	    [ISO_LIMIT_WRITES_PER_S] = {"writes_per_s", "--writes-per-s",
	                                offsetof(struct iso_tenant, writes_per_s), 0, 1000000},
	    [ISO_LIMIT_READS_PER_S] = {"reads_per_s", "--reads-per-s",
	                               offsetof(struct iso_tenant, reads_per_s), 0, 1000000},
	};

	return &defs[(unsigned)l < ISO_TENANT_LIMITS ? l : 0];
}

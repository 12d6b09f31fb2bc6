/* authz.c: who may do what, as one explicit table of roles x actions.
 *
 * Before this table, "cluster role" meant "not tenant-scoped", so any new
 * role that is not a tenant (the node agents' `node-agent`) would have passed
 * every check written for cluster-admin and auditor. Here every right is a
 * cell: a role or an action that is not in the table is refused, so a new
 * role or a new route can do nothing until someone writes down what it may
 * do. The API checks each request's route action against the table before
 * its handler runs (iso_controller_authorize), and the use cases ask the
 * same table for the scope they filter by (ctl_authorize). docs/api.md,
 * "Roles", is this table in words. */
#include <errno.h>
#include <string.h>

#include "controller/internal.h"

#define A CTL_SCOPE_ALL
#define T CTL_SCOPE_TENANT
#define O CTL_SCOPE_OWN
#define N CTL_SCOPE_NODE
#define L CTL_SCOPE_LOOKUP
#define D CTL_SCOPE_NONE /* denied */

#define N_ROLES (ISO_ROLE_NEUTRON + 1)

struct right {
	const char *action; /* the route's action (server.c), or a narrower part of one */
	enum ctl_scope scope[N_ROLES];
	const char *why; /* appended to a refusal, or NULL */
};

/* Columns in enum iso_role order. The node-agent may read its own node's
 * desired state, write its own node's status and report its own node's GPU
 * faults; and (issue 17, the CNI plugin's pod attachments) create, read and
 * release its own node's attachments: one-member allocations pinned to its
 * node whose Idempotency-Key is "cni:<its node>:..." (allocations.c,
 * `ctl_node_attachment`), nothing else (docs/agents.md, docs/api.md). The
 * neutron role (networking-mlnx's mlnx_sdn_assist driver's credential,
 * docs/openstack.md) may do the neutron.* wire actions of the /neutron
 * routes and nothing else: it never reaches the /v1 API. */
static const struct right rights[] = {
    /* action                          c-adm aud t-adm t-usr agent neutron */
    {"version.read", {A, A, A, A, D, D}, NULL},
    {"whoami", {O, O, O, O, D, D}, NULL},
    {"capacity.read", {A, A, T, T, D, D}, NULL},

    {"tenant.create", {A, D, D, D, D, D}, NULL},
    {"tenant.list", {A, A, T, T, D, D}, NULL},
    {"tenant.read", {A, A, T, T, D, D}, NULL},
    {"tenant.update", {A, D, L, L, D, D}, NULL},
    /* the one field a tenant-admin may set on its own tenant */
    {"tenant.update.max_user_priority", {A, D, T, D, D, D}, NULL},
    /* io_uring in its members' seccomp filter: a kernel attack surface */
    {"tenant.update.io_uring",
     {A, D, D, D, D, D},
     "io_uring opens a large kernel attack surface; only a cluster-admin may allow it"},
    /* one P_Key per allocation: more of the shared pool (docs/fabric.md) */
    {"tenant.update.partition",
     {A, D, D, D, D, D},
     "the partition mode decides how many P_Keys of the shared pool a tenant takes; only a "
     "cluster-admin may set it"},
    {"tenant.delete", {A, D, L, L, D, D}, NULL},

    {"org.create", {A, D, D, D, D, D}, NULL},
    {"org.list", {A, A, D, D, D, D}, "organisations are visible to cluster roles only"},
    {"org.delete", {A, D, D, D, D, D}, NULL},
    {"quota.read", {A, A, T, T, D, D}, NULL},
    {"quota.set", {A, D, L, L, D, D}, NULL},
    /* a project's quotas, which its tenant-admin shares out */
    {"quota.set.project", {A, D, T, D, D, D}, NULL},
    {"project.list", {A, A, T, T, D, D}, NULL},
    {"project.create", {A, D, T, L, D, D}, NULL},
    {"project.delete", {A, D, T, L, D, D}, NULL},
    {"queue.read", {A, A, T, O, D, D}, NULL},
    {"usage.read", {A, A, T, T, D, D}, NULL},

    {"token.issue", {A, D, T, D, D, D}, NULL},
    {"token.list", {A, A, T, O, D, D}, NULL},
    {"token.read", {A, A, T, O, D, D}, NULL},
    {"token.revoke", {A, D, T, O, D, D}, NULL},

#define INFRA                                                                                      \
	"nodes and GPUs are visible to cluster roles only; see /v1/capacity for aggregate "        \
	"capacity"
    {"node.list", {A, A, D, D, D, D}, INFRA},
    {"node.read", {A, A, D, D, D, D}, INFRA},
    {"gpu.list", {A, A, D, D, D, D}, INFRA},
    {"node.cordon", {A, D, D, D, D, D}, NULL},
    {"node.uncordon", {A, D, D, D, D, D}, NULL},
    {"node.drain", {A, D, D, D, D, D}, NULL},
    {"node.down", {A, D, D, D, D, D}, NULL},
    {"node.up", {A, D, D, D, D, D}, NULL},
    /* a node agent reports the XIDs of its own node's GPUs (faults.c) */
    {"gpu.fault", {A, D, D, D, N, D}, NULL},
    {"gpu.restore", {A, D, D, D, D, D}, NULL},
    {"pool.cordon", {A, D, D, D, D, D}, NULL},
    {"pool.drain", {A, D, D, D, D, D}, NULL},
    {"pool.uncordon", {A, D, D, D, D, D}, NULL},
    {"node.desired.read", {A, A, D, D, N, D}, INFRA},
    {"node.status.write", {A, D, D, D, N, D}, INFRA},
#undef INFRA

    /* own: a tenant-user's allocations are those it created, and its
     * priority stays under its tenant's max_user_priority */
    {"allocation.create", {A, D, T, O, N, D}, NULL},
    {"allocation.list", {A, A, T, O, D, D}, NULL},
    {"allocation.read", {A, A, T, O, N, D}, NULL},
    {"allocation.resize", {A, D, T, O, D, D}, "allocations are changed by their tenant"},
    {"allocation.release", {A, D, T, O, N, D}, "allocations are changed by their tenant"},

    {"fabric.read", {A, A, D, D, D, D}, "the fabric is visible to cluster-admin and auditor only"},
    {"fabric.verify",
     {A, A, D, D, D, D},
     "the fabric is visible to cluster-admin and auditor only"},
    /* whether the SM is reachable: every node agent asks for its CNI
     * plugin's STATUS and gets the small answer (no tenant's data) */
    {"fabric.health",
     {A, A, D, D, N, D},
     "the fabric's health is visible to cluster roles and node agents only"},
    /* the SM host's agent (fabric.sm_node) reads the partitions.conf it is
     * to write and reports what it did: a command to the fabric, so only
     * that agent (sm.c narrows N to fabric.sm_node) */
    {"fabric.sm.read",
     {D, D, D, D, N, D},
     "only the agent of the SM host (fabric.sm_node) reads the SM's partitions document"},
    {"fabric.sm.status",
     {D, D, D, D, N, D},
     "only the agent of the SM host (fabric.sm_node) reports the SM's partitions"},

    /* OpenStack Neutron (docs/openstack.md): the /neutron wire routes are
     * the neutron role's alone (neutron.c reaches only the tenants the
     * project mapping names); operators may list what it holds for a
     * resync; the mapping itself is a cluster-admin's */
    {"neutron.network.write", {D, D, D, D, D, A}, "only the neutron role writes Neutron networks"},
    {"neutron.port.write", {D, D, D, D, D, A}, "only the neutron role writes Neutron ports"},
    {"neutron.job.read", {D, D, D, D, D, A}, NULL},
    {"neutron.list", {A, A, D, D, D, A}, NULL},
    {"neutron.project.map", {A, D, D, D, D, D}, NULL},
    {"neutron.project.unmap", {A, D, D, D, D, D}, NULL},
    {"neutron.project.list", {A, A, D, D, D, D}, NULL},

    {"audit.read",
     {A, A, T, D, D, D},
     "the audit log is for cluster-admins, auditors and tenant-admins"},
    {"audit.pubkey", {A, A, A, A, D, D}, NULL},
};

#undef A
#undef T
#undef O
#undef N
#undef L
#undef D

enum ctl_scope ctl_scope_of(const struct iso_principal *p, const char *action)
{
	const struct right *row = NULL;

	if (!p || !action || (unsigned)p->role >= N_ROLES)
		return CTL_SCOPE_NONE;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(rights); i++)
		if (strcmp(rights[i].action, action) == 0) {
			row = &rights[i];
			break;
		}
	/* A node-agent token without its node can act for no node. */
	if (!row || (row->scope[p->role] == CTL_SCOPE_NODE && !p->node[0]))
		return CTL_SCOPE_NONE;
	return row->scope[p->role];
}

static int refuse(const struct iso_principal *p, const char *action, struct iso_error *err)
{
	const char *why = NULL;

	for (size_t i = 0; action && i < ISO_ARRAY_SIZE(rights); i++)
		if (strcmp(rights[i].action, action) == 0)
			why = rights[i].why;
	return iso_error_set(err, ISO_E_FORBIDDEN, NULL, "role %s may not do %s%s%s",
	                     p ? iso_role_name(p->role) : "none", action ? action : "this",
	                     why ? ": " : "", why ? why : "");
}

int ctl_authorize(const struct iso_principal *p, const char *action, enum ctl_scope *scope,
                  struct iso_error *err)
{
	enum ctl_scope s = ctl_scope_of(p, action);

	if (scope)
		*scope = s;
	if (s == CTL_SCOPE_NONE || s == CTL_SCOPE_LOOKUP)
		return refuse(p, action, err);
	return 0;
}

int iso_controller_authorize(const struct iso_principal *p, const char *action,
                             struct iso_error *err)
{
	/* LOOKUP cells go on to the use case, which looks the target up in the
	 * caller's tenant first and then refuses (ctl_authorize). */
	if (ctl_scope_of(p, action) == CTL_SCOPE_NONE)
		return refuse(p, action, err);
	return 0;
}

bool ctl_sees_all_tenants(const struct iso_principal *p)
{
	return ctl_scope_of(p, "tenant.read") == CTL_SCOPE_ALL;
}

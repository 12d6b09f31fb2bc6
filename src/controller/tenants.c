/* tenants.c: tenant use cases. Tenant roles see exactly one tenant, their
 * own; a tenant cannot be deleted while it holds live allocations, and its
 * tokens die with it in the same transaction. */
#include <errno.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

static int check_description(const char *description, struct iso_error *err)
{
	if (description && strlen(description) >= ISO_DESC_MAX)
		return iso_error_set(err, ISO_E_INVALID, "description",
		                     "description: longer than %d bytes", ISO_DESC_MAX - 1);
	/* Stored, audited and printed by isoctl: no control characters. */
	if (description && !iso_text_valid(description))
		return iso_error_set(err, ISO_E_INVALID, "description",
		                     "description: control characters (newlines, escapes) are not "
		                     "allowed");
	return 0;
}

/* Shares go as text: audit details hold integers only. */
static json_t *policy_json(const struct iso_tenant *t)
{
	char shares[32];

	snprintf(shares, sizeof(shares), "%g", t->shares > 0 ? t->shares : 1.0);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:s}", "description", t->description, "org",
	                 t->org, "shares", shares, "isolation",
	                 t->isolation[0] ? t->isolation : "shared", "tags", t->tags, "io_uring",
	                 t->io_uring, "partition", iso_partition_mode_name(t->partition));
}

/* partition: per-allocation needs P_Keys (an InfiniBand or Omni-Path
 * fabric); who may set it is checked by the callers. */
static int check_partition(const struct iso_controller *c, const struct iso_tenant_policy *pol,
                           struct iso_error *err)
{
	if (!pol || !pol->partition_set || pol->partition != ISO_PARTITION_PER_ALLOCATION ||
	    ctl_fabric_partitioned(c))
		return 0;
	return iso_error_set(err, ISO_E_CONFLICT, "partition",
	                     "partition: per-allocation needs P_Keys, and this cluster's fabric "
	                     "(%s) has none",
	                     iso_fabric_type_name(c->inv->fabric.type));
}

int iso_controller_tenant_create(struct iso_controller *c, const struct iso_principal *p,
                                 const char *name, const char *description,
                                 const struct iso_tenant_policy *pol, struct iso_tenant *out,
                                 struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	struct iso_tenant t = {0};
	int r;

	r = ctl_authorize(p, "tenant.create", NULL, err);
	if (r < 0)
		return r;
	if (!name)
		return iso_error_set(err, ISO_E_INVALID, "name", "name: required");
	if (!iso_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, "name",
		                     "name: invalid (want [a-z0-9][a-z0-9._-]{0,62})");
	r = check_description(description, err);
	if (r < 0)
		return r;
	iso_strlcpy(t.name, name, sizeof(t.name));
	iso_strlcpy(t.description, description ? description : "", sizeof(t.description));
	t.shares = 1.0;
	iso_strlcpy(t.isolation, "shared", sizeof(t.isolation));
	r = ctl_tenant_policy_apply(c, pol, &t, err);
	if (r < 0)
		return r;
	if (pol && pol->io_uring_set) /* tenant.create is the cluster-admin's alone */
		t.io_uring = pol->io_uring;
	r = check_partition(c, pol, err);
	if (r < 0)
		return r;
	if (pol && pol->partition_set)
		t.partition = pol->partition;
	if (ctl_org_exists(c, name))
		return iso_error_set(err, ISO_E_CONFLICT, "name",
		                     "name: an organisation is named \"%s\"; organisations and "
		                     "tenants share one namespace",
		                     name);
	/* A tenant deleted and created again keeps its account in the tree:
	 * it may have to change organisation (checked now, done after). */
	if (iso_tenancy_find(ctl_tenancy_tree(c), name) >= 0) {
		r = ctl_tenancy_move_tenant(c, name, t.org, true, err);
		if (r < 0)
			return r;
	}
	t.created_ms = t.updated_ms = iso_now_ms();
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = ops->tenant_insert(c->store, &t, err);
	if (r == 0)
		r = ctl_fabric_tenant_create(c, &t, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "tenant.create",
		                             .kind = "tenant",
		                             .id = t.name,
		                             .tenant = t.name,
		                             .tenant_id = t.id,
		                             .details = policy_json(&t)});
	r = ctl_tx_end(c, r, err);
	if (r < 0) {
		if (t.id > 0)
			ctl_fabric_tenant_create_undo(c, t.id);
		if (r == -EEXIST)
			return iso_error_set(err, ISO_E_CONFLICT, "name",
			                     "tenant \"%s\" already exists", name);
		return r;
	}
	ctl_uring_set(c, t.id, t.io_uring);
	if (ctl_tenancy_tenant_added(c, &t, err) < 0 ||
	    ctl_tenancy_put_account(c, t.name, ISO_ACCT_TENANT, t.org, t.shares, err) < 0 ||
	    ctl_tenancy_move_tenant(c, t.name, t.org, false, err) < 0)
		iso_log(ISO_LOG_ERR, "tenancy_account_failed", "tenant=%s error=\"%s\"", t.name,
		        err ? err->message : "");
	iso_log(ISO_LOG_INFO, "tenant_created", "request_id=%s by=%s tenant=%s", p->request_id,
	        p->token_id, t.name);
	*out = t;
	return 0;
}

int iso_controller_tenant_get(struct iso_controller *c, const struct iso_principal *p,
                              const char *name, struct iso_tenant *out, struct iso_error *err)
{
	int r = ctl_resolve_tenant(c, p, name, "name", out, err);

	if (r < 0 && err)
		err->field[0] = '\0'; /* the name came from the path, not a body field */
	return r;
}

int iso_controller_tenant_list(struct iso_controller *c, const struct iso_principal *p,
                               const char *after, int limit, struct iso_tenant **out, int *n,
                               struct iso_error *err)
{
	enum ctl_scope scope;
	int r = ctl_authorize(p, "tenant.list", &scope, err);

	if (r < 0)
		return r;
	if (scope != CTL_SCOPE_ALL) {
		struct iso_tenant *one = calloc(1, sizeof(*one));
		if (!one)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		*n = 0;
		if ((!after || strcmp(after, p->tenant) < 0) && limit != 0 &&
		    c->store->ops->tenant_get_by_id(c->store, p->tenant_id, one, err) == 0)
			*n = 1;
		*out = one;
		return 0;
	}
	return c->store->ops->tenant_list(c->store, after, limit, out, n, err);
}

int iso_controller_tenant_update(struct iso_controller *c, const struct iso_principal *p,
                                 const char *name, const char *description,
                                 const struct iso_tenant_policy *pol, struct iso_tenant *out,
                                 struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	struct iso_tenant t;
	int r;

	r = iso_controller_tenant_get(c, p, name, &t, err);
	if (r < 0)
		return r;
	/* io_uring is refused by name to anyone but a cluster-admin, whatever
	 * else the request holds (a hostile tenant must not widen its own
	 * seccomp filter). */
	if (pol && pol->io_uring_set) {
		r = ctl_authorize(p, "tenant.update.io_uring", NULL, err);
		if (r < 0) {
			if (err)
				iso_strlcpy(err->field, "io_uring", sizeof(err->field));
			return r;
		}
	}
	/* The partition mode decides how many P_Keys of the shared pool the
	 * tenant takes (one per allocation): the cluster-admin's alone, refused
	 * by name like io_uring. */
	if (pol && pol->partition_set) {
		r = ctl_authorize(p, "tenant.update.partition", NULL, err);
		if (r < 0) {
			if (err)
				iso_strlcpy(err->field, "partition", sizeof(err->field));
			return r;
		}
	}
	/* A tenant-admin may set one thing on its own tenant: the ceiling on
	 * its users' priority. Everything else is the cluster admin's. */
	bool only_ceiling = pol && pol->limit[ISO_LIMIT_MAX_USER_PRIORITY].set && !description &&
	                    !pol->org && pol->shares == 0 && !pol->isolation && !pol->tags &&
	                    !pol->io_uring_set && !pol->partition_set;
	for (int l = 0; only_ceiling && l < ISO_TENANT_LIMITS; l++)
		only_ceiling = l == ISO_LIMIT_MAX_USER_PRIORITY || !pol->limit[l].set;
	enum ctl_scope scope;
	r = ctl_authorize(p, only_ceiling ? "tenant.update.max_user_priority" : "tenant.update",
	                  &scope, err);
	if (r == 0 && scope != CTL_SCOPE_ALL &&
	    !(scope == CTL_SCOPE_TENANT && p->tenant_id == t.id))
		r = iso_error_set(err, ISO_E_FORBIDDEN, NULL, "role %s may not update tenant %s",
		                  iso_role_name(p->role), t.name);
	if (r < 0)
		return r;
	r = check_description(description, err);
	if (r < 0)
		return r;
	if (description)
		iso_strlcpy(t.description, description, sizeof(t.description));
	r = ctl_tenant_policy_apply(c, pol, &t, err);
	if (r < 0)
		return r;
	if (pol && pol->io_uring_set)
		t.io_uring = pol->io_uring;
	r = check_partition(c, pol, err);
	if (r < 0)
		return r;
	bool mode_change = pol && pol->partition_set && pol->partition != t.partition;
	if (mode_change)
		t.partition = pol->partition;
	/* Moving between organisations: only while it holds nothing, and its
	 * guarantees must nest under the new one (checked on the tree, undone). */
	r = ctl_tenancy_move_tenant(c, t.name, t.org, true, err);
	if (r < 0)
		return r;
	t.updated_ms = iso_now_ms();
	r = ctl_tx_begin(c, err);
	/* A new mode only while the tenant holds nothing (counted inside the
	 * transaction, as a delete counts): its allocations' ports and keys are
	 * never half in one mode and half in the other. */
	int live = 0;
	if (r == 0 && mode_change)
		r = ops->alloc_count_live(c->store, t.id, &live, err);
	if (r == 0 && live > 0)
		r = iso_error_set(err, ISO_E_CONFLICT, "partition",
		                  "partition: tenant \"%s\" holds %d live allocation%s; the "
		                  "partition mode changes only while it holds none",
		                  t.name, live, live == 1 ? "" : "s");
	if (r == 0)
		r = ops->tenant_update(c->store, &t, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "tenant.update",
		                             .kind = "tenant",
		                             .id = t.name,
		                             .tenant = t.name,
		                             .tenant_id = t.id,
		                             .details = policy_json(&t)});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	ctl_rates_forget(c, t.id);
	ctl_uring_set(c, t.id, t.io_uring);
	ctl_fabric_tenant_mode_set(c, t.id, t.partition);
	if (ctl_tenancy_put_account(c, t.name, ISO_ACCT_TENANT, t.org, t.shares, err) < 0 ||
	    ctl_tenancy_move_tenant(c, t.name, t.org, false, err) < 0)
		iso_log(ISO_LOG_ERR, "tenancy_update_failed", "tenant=%s error=\"%s\"", t.name,
		        err ? err->message : "");
	*out = t;
	return 0;
}

int iso_controller_tenant_delete(struct iso_controller *c, const struct iso_principal *p,
                                 const char *name, struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	struct iso_tenant t;
	int64_t now = iso_now_ms();
	int live = 0, r;

	r = iso_controller_tenant_get(c, p, name, &t, err);
	if (r < 0)
		return r;
	r = ctl_authorize(p, "tenant.delete", NULL, err);
	if (r < 0)
		return r;
	r = ctl_tx_begin(c, err);
	if (r < 0)
		return r;
	/* Counted inside the transaction so no allocation can slip in between. */
	r = ops->alloc_count_live(c->store, t.id, &live, err);
	if (r == 0 && live > 0)
		r = iso_error_set(err, ISO_E_CONFLICT, NULL,
		                  "tenant \"%s\" holds %d live allocation%s; release them first",
		                  name, live, live == 1 ? "" : "s");
	if (r == 0)
		r = ctl_neutron_tenant_delete(c, t.id, t.name, err);
	if (r == 0)
		r = ops->token_revoke_tenant(c->store, t.id, iso_now_ms(), err);
	if (r == 0)
		r = ops->tenant_delete(c->store, t.id, err);
	if (r == 0) /* a new tenant of this name inherits no guarantee or history */
		r = ops->account_forget(c->store, t.name, err);
	if (r == 0)
		r = ctl_fabric_tenant_delete(c, t.id, now, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "tenant.delete",
		                             .kind = "tenant",
		                             .id = t.name,
		                             .tenant = t.name,
		                             .tenant_id = t.id});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	ctl_fabric_tenant_deleted(c, t.id, now);
	ctl_uring_set(c, t.id, false);
	ctl_tenancy_tenant_deleted(c, &t);
	iso_log(ISO_LOG_INFO, "tenant_deleted", "request_id=%s by=%s tenant=%s", p->request_id,
	        p->token_id, name);
	return 0;
}

/* accounts.c: the use cases around the tenancy policy core (tenancy.c):
 * organisations and projects, quotas per account and kind, tenants' policy
 * fields, the queue and fair-share standing as a caller may see them. Every
 * change is one transaction with its audit event, checked against the
 * account tree first (a dry run) and applied to the tree only after the
 * commit, so the tree never holds what the store does not. A tenant-scoped
 * caller sees its own tenant and projects only: anything else is "no such
 * account", exactly like a missing one. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

#define NO_ACCOUNT "no such account"

static bool tags_valid(const char *tags)
{
	bool empty_label = true;

	for (const char *s = tags; *s; s++) {
		if (*s == ',') {
			if (empty_label)
				return false;
			empty_label = true;
		} else if ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-') {
			empty_label = false;
		} else {
			return false;
		}
	}
	return !tags[0] || !empty_label;
}

static int org_find(struct iso_controller *c, const char *name, struct iso_org *out,
                    struct iso_error *err)
{
	_cleanup_free_ struct iso_org *orgs = NULL;
	int n = 0, r = c->store->ops->org_list(c->store, &orgs, &n, err);

	if (r < 0)
		return r;
	for (int i = 0; i < n; i++)
		if (strcmp(orgs[i].name, name) == 0) {
			if (out)
				*out = orgs[i];
			return 0;
		}
	return -ENOENT;
}

/* Audit details hold integers only (an unambiguous encoding): shares,
 * a real, go as text. */
static json_t *shares_json(double shares)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%g", shares);
	return json_pack("{s:s}", "shares", buf);
}

/* The tree mirrors the store's organisations and projects (deleted ones
 * lose their names): an O(1) lookup instead of listing them all. */
bool ctl_org_exists(struct iso_controller *c, const char *name)
{
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	int x = iso_tenancy_find(t, name);

	return x > 0 && t->acct[x].level == ISO_ACCT_ORG && x != ctl_tenancy_default_org(c);
}

bool ctl_project_exists(struct iso_controller *c, int64_t tenant_id, const char *name)
{
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	char tenant[ISO_NAME_MAX], account[ISO_NAME_MAX * 2 + 2];
	int x;

	iso_controller_tenant_name(c, tenant_id, tenant, sizeof(tenant));
	snprintf(account, sizeof(account), "%s/%s", tenant, name);
	x = iso_tenancy_find(t, account);
	return x > 0 && t->acct[x].level == ISO_ACCT_PROJECT;
}

int ctl_tenant_policy_apply(struct iso_controller *c, const struct iso_tenant_policy *pol,
                            struct iso_tenant *t, struct iso_error *err)
{
	enum iso_isolation iso;

	if (!pol)
		return 0;
	if (pol->org) {
		if (pol->org[0] && (!iso_name_valid(pol->org) || !ctl_org_exists(c, pol->org)))
			return iso_error_set(err, ISO_E_INVALID, "org",
			                     "org: no organisation named \"%.64s\"", pol->org);
		iso_strlcpy(t->org, pol->org, sizeof(t->org));
	}
	if (pol->shares != 0) {
		if (!(pol->shares > 0) || pol->shares > 1e6)
			return iso_error_set(err, ISO_E_INVALID, "shares",
			                     "shares: must be > 0 and at most 1000000");
		t->shares = pol->shares;
	}
	if (pol->isolation) {
		if (iso_isolation_parse(pol->isolation, &iso) < 0)
			return iso_error_set(
			    err, ISO_E_INVALID, "isolation",
			    "isolation: want shared, exclusive-gpu, exclusive-node "
			    "or exclusive-rack");
		iso_strlcpy(t->isolation, iso_isolation_name(iso), sizeof(t->isolation));
	}
	if (pol->tags) {
		if (!tags_valid(pol->tags) || strlen(pol->tags) >= sizeof(t->tags))
			return iso_error_set(err, ISO_E_INVALID, "tags",
			                     "tags: want comma-separated labels of [a-z0-9-], "
			                     "at most %zu bytes",
			                     sizeof(t->tags) - 1);
		iso_strlcpy(t->tags, pol->tags, sizeof(t->tags));
	}
	for (int l = 0; l < ISO_TENANT_LIMITS; l++) {
		const struct iso_tenant_limit_def *d = iso_tenant_limit_def(l);
		int v = pol->limit[l].value;
		char field[ISO_ERR_FIELD_MAX];

		if (!pol->limit[l].set)
			continue;
		snprintf(field, sizeof(field), "limits.%s", d->name);
		if (v < d->min || v > d->max)
			return iso_error_set(err, ISO_E_INVALID, field, "%s: must be %d..%d", field,
			                     d->min, d->max);
		*iso_tenant_limit(t, l) = v;
	}
	return 0;
}

void iso_controller_tenant_limits(const struct iso_controller *c, const struct iso_tenant *t,
                                  struct iso_tenant_limits *out)
{
	out->max_pending = t->max_pending > 0 ? t->max_pending : c->limits.max_pending;
	out->max_live = t->max_live > 0 ? t->max_live : c->limits.max_live;
	ctl_rates_of(c, t, &out->writes_per_s, &out->reads_per_s);
}

/* ---- organisations ---- */

int iso_controller_org_create(struct iso_controller *c, const struct iso_principal *p,
                              const char *name, double shares, struct iso_org *out,
                              struct iso_error *err)
{
	struct iso_tenant t;
	struct iso_org o = {0};
	int r = ctl_authorize(p, "org.create", NULL, err);

	if (r < 0)
		return r;
	if (!name)
		return iso_error_set(err, ISO_E_INVALID, "name", "name: required");
	if (!iso_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, "name",
		                     "name: invalid (want [a-z0-9][a-z0-9._-]{0,62})");
	if (shares == 0)
		shares = 1.0;
	if (!(shares > 0) || shares > 1e6)
		return iso_error_set(err, ISO_E_INVALID, "shares",
		                     "shares: must be > 0 and at most 1000000");
	if (c->store->ops->tenant_get_by_name(c->store, name, &t, NULL) == 0)
		return iso_error_set(err, ISO_E_CONFLICT, "name",
		                     "name: a tenant is named \"%s\"; organisations and tenants "
		                     "share one namespace",
		                     name);
	r = org_find(c, name, NULL, err);
	if (r == 0)
		return iso_error_set(err, ISO_E_CONFLICT, "name",
		                     "organisation \"%s\" already exists", name);
	if (r != -ENOENT)
		return r;
	iso_strlcpy(o.name, name, sizeof(o.name));
	o.shares = shares;
	o.created_ms = iso_now_ms();
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = c->store->ops->org_put(c->store, &o, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "org.create",
		                             .kind = "org",
		                             .id = o.name,
		                             .details = shares_json(o.shares)});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	/* A deleted organisation's account lost its name when it was deleted
	 * (ctl_tenancy_forget_account): this one starts fresh. */
	if (ctl_tenancy_put_account(c, o.name, ISO_ACCT_ORG, NULL, o.shares, err) < 0)
		iso_log(ISO_LOG_ERR, "tenancy_account_failed", "org=%s error=\"%s\"", o.name,
		        err ? err->message : "");
	*out = o;
	return 0;
}

int iso_controller_org_list(struct iso_controller *c, const struct iso_principal *p,
                            struct iso_org **out, int *n, struct iso_error *err)
{
	int r = ctl_authorize(p, "org.list", NULL, err);

	if (r < 0)
		return r;
	return c->store->ops->org_list(c->store, out, n, err);
}

/* Deletes the stored quotas of an account (inside the transaction). */
static int quota_rows_delete(struct iso_controller *c, const char *account, struct iso_error *err)
{
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	int r = 0;

	for (int k = 0; r == 0 && k < t->n_kinds; k++) {
		char kind[ISO_NAME_MAX];
		ctl_tenancy_kind_name(t, k, kind, sizeof(kind));
		r = c->store->ops->quota_delete(c->store, account, kind, err);
	}
	return r;
}

int iso_controller_org_delete(struct iso_controller *c, const struct iso_principal *p,
                              const char *name, struct iso_error *err)
{
	struct iso_tenant *tenants = NULL;
	int n = 0, members = 0, r = ctl_authorize(p, "org.delete", NULL, err);

	if (r < 0)
		return r;
	r = org_find(c, name, NULL, err);
	if (r == -ENOENT)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such organisation");
	if (r < 0)
		return r;
	r = ctl_tx_begin(c, err);
	if (r < 0)
		return r;
	/* Counted inside the transaction so no tenant can join in between. */
	r = c->store->ops->tenant_list(c->store, "", 0, &tenants, &n, err);
	for (int i = 0; r == 0 && i < n; i++)
		members += strcmp(tenants[i].org, name) == 0;
	free(tenants);
	if (r == 0 && members > 0)
		r = iso_error_set(err, ISO_E_CONFLICT, NULL,
		                  "organisation \"%s\" has %d tenant%s; move or delete them first",
		                  name, members, members == 1 ? "" : "s");
	if (r == 0)
		r = quota_rows_delete(c, name, err);
	if (r == 0)
		r = c->store->ops->account_forget(c->store, name, err);
	if (r == 0)
		r = c->store->ops->org_delete(c->store, name, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "org.delete", .kind = "org", .id = name});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	ctl_tenancy_forget_account(c, name);
	return 0;
}

/* ---- projects ---- */

/* The tenant of a project route: visible to the caller (else 404), then
 * `action` must be the caller's (else 403). */
static int project_tenant(struct iso_controller *c, const struct iso_principal *p,
                          const char *tenant, const char *action, struct iso_tenant *out,
                          struct iso_error *err)
{
	int r = ctl_resolve_tenant(c, p, tenant, "tenant", out, err);

	if (r < 0) {
		if (err)
			err->field[0] = '\0'; /* from the path */
		return r;
	}
	r = ctl_authorize(p, action, NULL, err);
	if (r < 0)
		return r;
	return 0;
}

static int project_name_check(const char *tenant, const char *name, char *account, size_t size,
                              struct iso_error *err)
{
	if (!name)
		return iso_error_set(err, ISO_E_INVALID, "name", "name: required");
	if (!iso_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, "name",
		                     "name: invalid (want [a-z0-9][a-z0-9._-]{0,62})");
	if (snprintf(account, size, "%s/%s", tenant, name) >= (int)size)
		return iso_error_set(err, ISO_E_INVALID, "name",
		                     "name: \"%s/%s\" must be shorter than %d characters", tenant,
		                     name, ISO_NAME_MAX);
	return 0;
}

int iso_controller_project_create(struct iso_controller *c, const struct iso_principal *p,
                                  const char *tenant, const char *name, double shares,
                                  struct iso_project *out, struct iso_error *err)
{
	struct iso_project pr = {0};
	struct iso_tenant t;
	char account[ISO_NAME_MAX];
	int r = project_tenant(c, p, tenant, "project.create", &t, err);

	if (r < 0)
		return r;
	r = project_name_check(t.name, name, account, sizeof(account), err);
	if (r < 0)
		return r;
	if (shares == 0)
		shares = 1.0;
	if (!(shares > 0) || shares > 1e6)
		return iso_error_set(err, ISO_E_INVALID, "shares",
		                     "shares: must be > 0 and at most 1000000");
	if (ctl_project_exists(c, t.id, name))
		return iso_error_set(err, ISO_E_CONFLICT, "name", "project \"%s\" already exists",
		                     name);
	/* Each project is an account every scheduling pass walks past: a
	 * tenant-admin may not grow the tree without bound. */
	const struct iso_tenancy *tree = ctl_tenancy_tree(c);
	int x = iso_tenancy_find(tree, t.name), n_projects = 0;
	for (int ch = x > 0 ? tree->acct[x].first_child : -1; ch >= 0;
	     ch = tree->acct[ch].next_sibling)
		n_projects += tree->acct[ch].name[0] != '#';
	if (n_projects >= ISO_MAX_PROJECTS)
		return iso_error_set(err, ISO_E_LIMIT, "limits.max_projects",
		                     "tenant %s has %d projects, the most a tenant may have; delete "
		                     "one first",
		                     t.name, n_projects);
	pr.tenant_id = t.id;
	iso_strlcpy(pr.name, name, sizeof(pr.name));
	pr.shares = shares;
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = c->store->ops->project_put(c->store, &pr, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "project.create",
		                             .kind = "project",
		                             .id = account,
		                             .tenant = t.name,
		                             .tenant_id = t.id,
		                             .details = shares_json(pr.shares)});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	if (ctl_tenancy_put_account(c, account, ISO_ACCT_PROJECT, t.name, pr.shares, err) < 0)
		iso_log(ISO_LOG_ERR, "tenancy_account_failed", "project=%s error=\"%s\"", account,
		        err ? err->message : "");
	*out = pr;
	return 0;
}

int iso_controller_project_list(struct iso_controller *c, const struct iso_principal *p,
                                const char *tenant, struct iso_project **out, int *n,
                                struct iso_error *err)
{
	_cleanup_free_ struct iso_project *all = NULL;
	struct iso_tenant t;
	int count = 0, r = project_tenant(c, p, tenant, "project.list", &t, err);

	if (r < 0)
		return r;
	r = c->store->ops->project_list(c->store, &all, &count, err);
	if (r < 0)
		return r;
	*n = 0;
	for (int i = 0; i < count; i++)
		if (all[i].tenant_id == t.id)
			all[(*n)++] = all[i];
	*out = ISO_TAKE(all);
	return 0;
}

int iso_controller_project_delete(struct iso_controller *c, const struct iso_principal *p,
                                  const char *tenant, const char *name, struct iso_error *err)
{
	struct iso_alloc_filter f = {.live_only = true, .state = -1};
	struct iso_allocation *live = NULL;
	struct iso_tenant t;
	char account[ISO_NAME_MAX];
	int n = 0, using = 0, r = project_tenant(c, p, tenant, "project.delete", &t, err);

	if (r < 0)
		return r;
	if (!iso_name_valid(name) || !ctl_project_exists(c, t.id, name) ||
	    snprintf(account, sizeof(account), "%s/%s", t.name, name) >= (int)sizeof(account))
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such project");
	r = ctl_tx_begin(c, err);
	if (r < 0)
		return r;
	f.tenant_id = t.id;
	r = c->store->ops->alloc_list(c->store, &f, &live, &n, err);
	for (int i = 0; r == 0 && i < n; i++)
		using += strcmp(live[i].project, name) == 0;
	iso_allocations_free(live, n);
	if (r == 0 && using > 0)
		r = iso_error_set(err, ISO_E_CONFLICT, NULL,
		                  "project \"%s\" has %d live allocation%s; release them first",
		                  name, using, using == 1 ? "" : "s");
	if (r == 0)
		r = quota_rows_delete(c, account, err);
	if (r == 0)
		r = c->store->ops->account_forget(c->store, account, err);
	if (r == 0)
		r = c->store->ops->project_delete(c->store, t.id, name, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "project.delete",
		                             .kind = "project",
		                             .id = account,
		                             .tenant = t.name,
		                             .tenant_id = t.id});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	ctl_tenancy_forget_account(c, account);
	return 0;
}

/* ---- quotas ---- */

struct account_ref {
	int acct;                  /* in the tree */
	enum iso_acct_level level; /* ISO_ACCT_ORG, _TENANT or _PROJECT */
	struct iso_tenant tenant;  /* for tenants and projects */
	char name[ISO_NAME_MAX];   /* as in the tree and the store */
};

/* Resolves an account the caller may see; anything else, missing or not
 * visible, is the same 404. */
static int account_resolve(struct iso_controller *c, const struct iso_principal *p,
                           const char *account, struct account_ref *out, struct iso_error *err)
{
	const char *slash = account ? strchr(account, '/') : NULL;
	char tenant[ISO_NAME_MAX];

	memset(out, 0, sizeof(*out));
	if (!account || iso_strlcpy(out->name, account, sizeof(out->name)) < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, NO_ACCOUNT);
	if (slash) {
		size_t n = (size_t)(slash - account);
		if (n >= sizeof(tenant))
			return iso_error_set(err, ISO_E_NOT_FOUND, NULL, NO_ACCOUNT);
		memcpy(tenant, account, n);
		tenant[n] = '\0';
		if (!iso_name_valid(tenant) || !iso_name_valid(slash + 1) ||
		    ctl_resolve_tenant(c, p, tenant, NULL, &out->tenant, NULL) < 0 ||
		    !ctl_project_exists(c, out->tenant.id, slash + 1))
			return iso_error_set(err, ISO_E_NOT_FOUND, NULL, NO_ACCOUNT);
		out->level = ISO_ACCT_PROJECT;
	} else if (iso_name_valid(account) &&
	           ctl_resolve_tenant(c, p, account, NULL, &out->tenant, NULL) == 0) {
		out->level = ISO_ACCT_TENANT;
	} else if (ctl_scope_of(p, "org.list") == CTL_SCOPE_ALL && iso_name_valid(account) &&
	           ctl_org_exists(c, account)) {
		out->level = ISO_ACCT_ORG;
	} else {
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, NO_ACCOUNT);
	}
	out->acct = iso_tenancy_find(ctl_tenancy_tree(c), account);
	if (out->acct < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "account %s is not in the tree",
		                     account);
	return 0;
}

static json_t *limit_json(int64_t v)
{
	return v == ISO_QUOTA_NONE ? json_null() : json_integer(v);
}

static json_t *account_quota_json(struct iso_controller *c, const struct account_ref *ref)
{
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	const struct iso_account *a = &t->acct[ref->acct];
	const struct iso_account *pa = &t->acct[a->parent];
	json_t *quotas = json_object(), *used = json_object();
	bool implicit = a->parent == ctl_tenancy_default_org(c) || a->parent == 0;

	for (int k = 0; k < t->n_kinds; k++) {
		char kind[ISO_NAME_MAX];
		const struct iso_quota *q = &a->q[k];
		ctl_tenancy_kind_name(t, k, kind, sizeof(kind));
		json_object_set_new(quotas, kind,
		                    json_pack("{s:o, s:o, s:o}", "guaranteed",
		                              limit_json(q->guaranteed), "borrow_limit",
		                              limit_json(q->borrow_limit), "lend_limit",
		                              limit_json(q->lend_limit)));
		json_object_set_new(used, kind, json_integer(a->used.v[k]));
	}
	return json_pack("{s:s, s:s, s:o, s:f, s:o, s:o}", "account", a->name, "level",
	                 iso_acct_level_name(a->level), "parent",
	                 implicit ? json_null() : json_string(pa->name), "shares", a->shares,
	                 "quotas", quotas, "used", used);
}

int iso_controller_quota_get(struct iso_controller *c, const struct iso_principal *p,
                             const char *account, json_t **out, struct iso_error *err)
{
	struct account_ref ref;
	int r = account_resolve(c, p, account, &ref, err);

	if (r < 0)
		return r;
	*out = account_quota_json(c, &ref);
	return 0;
}

int iso_controller_quota_set(struct iso_controller *c, const struct iso_principal *p,
                             const char *account, const struct iso_quota_change *ch, int n,
                             json_t **out, struct iso_error *err)
{
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	struct iso_quota q[ISO_RES_MAX];
	int kinds[ISO_RES_MAX];
	struct account_ref ref;
	json_t *details;
	int r = account_resolve(c, p, account, &ref, err);

	if (r < 0)
		return r;
	/* A tenant-admin shares its tenant's quota out among its projects; the
	 * tenants' and organisations' quotas are the cluster-admin's. */
	if (ctl_authorize(p, ref.level == ISO_ACCT_PROJECT ? "quota.set.project" : "quota.set",
	                  NULL, NULL) < 0)
		return iso_error_set(
		    err, ISO_E_FORBIDDEN, NULL, "role %s may not set the quotas of %s %s",
		    iso_role_name(p->role), iso_acct_level_name(ref.level), ref.name);
	if (n < 1 || n > t->n_kinds)
		return iso_error_set(err, ISO_E_INVALID, NULL,
		                     "give at least one resource kind, each once");
	for (int i = 0; i < n; i++) {
		kinds[i] = ctl_tenancy_kind_parse(t, ch[i].kind);
		if (kinds[i] < 0)
			return iso_error_set(err, ISO_E_INVALID, ch[i].kind,
			                     "%.64s: unknown resource kind (want gpus, cpus, "
			                     "memory_mib, nodes or a GPU model of this cluster)",
			                     ch[i].kind);
		for (int j = 0; j < i; j++)
			if (kinds[j] == kinds[i])
				return iso_error_set(err, ISO_E_INVALID, ch[i].kind,
				                     "%s: given twice", ch[i].kind);
		q[i] = (struct iso_quota){ch[i].guaranteed, ch[i].borrow_limit, ch[i].lend_limit};
		if (q[i].guaranteed == ISO_QUOTA_NONE && ref.level != ISO_ACCT_ORG)
			return iso_error_set(err, ISO_E_INVALID, ch[i].kind,
			                     "%s.guaranteed: required", ch[i].kind);
	}
	/* The nesting is checked on the tree as it is, then undone: the tree
	 * changes only once the store has it. */
	r = ctl_tenancy_set_quotas(c, ref.name, kinds, q, n, true, err);
	if (r < 0)
		return r;
	details = json_object();
	r = ctl_tx_begin(c, err);
	for (int i = 0; r == 0 && i < n; i++) {
		struct iso_quota_row row = {.guaranteed = q[i].guaranteed,
		                            .borrow_limit = q[i].borrow_limit,
		                            .lend_limit = q[i].lend_limit};
		iso_strlcpy(row.account, ref.name, sizeof(row.account));
		ctl_tenancy_kind_name(t, kinds[i], row.kind, sizeof(row.kind));
		r = c->store->ops->quota_put(c->store, &row, err);
		json_object_set_new(details, row.kind,
		                    json_pack("{s:o, s:o, s:o}", "guaranteed",
		                              limit_json(q[i].guaranteed), "borrow_limit",
		                              limit_json(q[i].borrow_limit), "lend_limit",
		                              limit_json(q[i].lend_limit)));
	}
	if (r == 0)
		ctl_emit(
		    c, p,
		    &(struct ctl_event){.action = "quota.set",
		                        .kind = "quota",
		                        .id = ref.name,
		                        .tenant = ref.level == ISO_ACCT_ORG ? "" : ref.tenant.name,
		                        .tenant_id = ref.level == ISO_ACCT_ORG ? 0 : ref.tenant.id,
		                        .details = json_incref(details)});
	json_decref(details);
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	r = ctl_tenancy_set_quotas(c, ref.name, kinds, q, n, false, err);
	if (r < 0) /* cannot happen: checked above under the same lock */
		iso_log(ISO_LOG_ERR, "quota_apply_failed", "account=%s error=\"%s\"", ref.name,
		        err ? err->message : "");
	ctl_place_pending(c); /* a larger quota may let waiting work start */
	*out = account_quota_json(c, &ref);
	return 0;
}

/* ---- the queue and fair-share standing ---- */

int iso_controller_queue(struct iso_controller *c, const struct iso_principal *p, int limit,
                         int after, json_t **out, struct iso_error *err)
{
	_cleanup_free_ struct ctl_queue_view *v = calloc((size_t)limit + 1, sizeof(*v));
	json_t *items;
	int n = 0;
	bool more = false;
	char next[24];

	enum ctl_scope scope;

	int ar = ctl_authorize(p, "queue.read", &scope, err);

	if (ar < 0)
		return ar;
	if (!v || ctl_queue_view(c, p, limit, after, v, &n, &more) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	items = json_array();
	for (int i = 0; i < n; i++) {
		_cleanup_(iso_allocation_clearp) struct iso_allocation a = {0};
		if (c->store->ops->alloc_get(c->store, v[i].id, &a, NULL) < 0)
			continue;
		/* Positions and reasons count only what the viewer may see. */
		char reason[ISO_DESC_MAX];
		if (scope == CTL_SCOPE_ALL)
			snprintf(reason, sizeof(reason), "position %d of %d in fair-share order",
			         v[i].position, ctl_queue_size(c));
		else
			snprintf(reason, sizeof(reason),
			         "position %d among the pending allocations you can see; tenants "
			         "take turns by fair share, your own work by priority, then age",
			         v[i].position);
		json_array_append_new(
		    items, json_pack("{s:i, s:s, s:s, s:s, s:i, s:s, s:s}", "position",
		                     v[i].position, "id", a.id, "tenant", a.tenant, "project",
		                     a.project, "priority", a.priority, "reason", reason, "waiting",
		                     a.reason));
	}
	snprintf(next, sizeof(next), "%d", n > 0 ? v[n - 1].position : after);
	*out = json_pack("{s:o, s:o}", "items", items, "next",
	                 more ? json_string(next) : json_null());
	return 0;
}

static json_t *vec_json(const struct iso_tenancy *t, const double *v, double scale)
{
	json_t *o = json_object();

	for (int k = 0; k < t->n_kinds; k++) {
		char kind[ISO_NAME_MAX];
		ctl_tenancy_kind_name(t, k, kind, sizeof(kind));
		json_object_set_new(o, kind, json_real(v[k] / scale));
	}
	return o;
}

/* An account of the tree that still exists: deleted ones keep their
 * history under a name no object can have ("#..."). */
static bool account_live(const struct iso_account *a)
{
	return a->name[0] != '#';
}

/* One account's standing. Fair-share figures relative to its siblings
 * (share, usage_share, level_fair_share, rank) are shown only to cluster
 * roles and for a tenant's own projects: for a tenant itself they would
 * count and follow other tenants. */
static json_t *standing_json(struct iso_controller *c, const struct iso_tenancy *t, int i,
                             const int *rank, const double *sum_shares, const double *sum_dom,
                             bool relative)
{
	const struct iso_account *a = &t->acct[i];
	double used[ISO_RES_MAX], shares = 0, dom, sib_dom = 0;
	bool implicit = a->parent == ctl_tenancy_default_org(c) || a->parent == 0;
	json_t *o;

	for (int k = 0; k < ISO_RES_MAX; k++)
		used[k] = (double)a->used.v[k];
	dom = iso_fairshare_dominant(t, a->decayed);
	o = json_pack("{s:s, s:s, s:o, s:f, s:f, s:o, s:o}", "account", a->name, "level",
	              iso_acct_level_name(a->level), "parent",
	              implicit ? json_null() : json_string(t->acct[a->parent].name), "shares",
	              a->shares, "dominant_share", iso_fairshare_dominant(t, used),
	              "decayed_hours", vec_json(t, a->decayed, 3600.0 * 1000.0), "used",
	              vec_json(t, used, 1.0));
	if (!relative)
		return o;
	/* S and U of the level fair share LF = S / U among its siblings: summed
	 * once per request for the whole tree (cluster views), or here over a
	 * tenant's own projects. */
	if (sum_shares) {
		shares = sum_shares[a->parent];
		sib_dom = sum_dom[a->parent];
	} else {
		for (int s = t->acct[a->parent].first_child; s >= 0; s = t->acct[s].next_sibling) {
			shares += t->acct[s].shares;
			sib_dom += iso_fairshare_dominant(t, t->acct[s].decayed);
		}
	}
	double share = shares > 0 ? a->shares / shares : 0.0, usage = sib_dom > 0 ? dom / sib_dom : 0;
	json_object_set_new(o, "share", json_real(share));
	json_object_set_new(o, "usage_share", json_real(usage));
	json_object_set_new(o, "level_fair_share", usage > 0 ? json_real(share / usage) : json_null());
	json_object_set_new(o, "rank", rank && a->first_child < 0 && rank[i] >= 0
	                                   ? json_integer(rank[i] + 1)
	                                   : json_null());
	return o;
}

int iso_controller_usage(struct iso_controller *c, const struct iso_principal *p, int limit,
                         const char *after, json_t **out, struct iso_error *err)
{
	const struct iso_tenancy *t;
	_cleanup_free_ int *rank = NULL;
	_cleanup_free_ double *sum_shares = NULL, *sum_dom = NULL;
	bool cluster = ctl_sees_all_tenants(p);
	int start = 1, own = -1, n = 0, last = -1;
	json_t *items;

	ctl_tenancy_accrue(c);
	t = ctl_tenancy_tree(c);
	if (after) {
		start = iso_tenancy_find(t, after);
		if (start <= 0)
			return iso_error_set(err, ISO_E_INVALID, "after", "after: unknown cursor");
		start++;
	}
	if (!cluster) {
		/* A tenant's own subtree: its account, then its projects. Nothing
		 * here is O(accounts): the tree's ranks are for cluster roles. */
		own = iso_tenancy_find(t, p->tenant);
		if (own <= 0)
			return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such tenant");
	} else {
		rank = calloc((size_t)t->n_accounts, sizeof(*rank));
		sum_shares = calloc((size_t)t->n_accounts, sizeof(*sum_shares));
		sum_dom = calloc((size_t)t->n_accounts, sizeof(*sum_dom));
		if (!rank || !sum_shares || !sum_dom)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		for (int i = 0; i < t->n_accounts; i++)
			rank[i] = -1;
		if (iso_fairshare_rank(t, rank, NULL) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "fair-share ranking failed");
		for (int i = 1; i < t->n_accounts; i++) {
			sum_shares[t->acct[i].parent] += t->acct[i].shares;
			sum_dom[t->acct[i].parent] += iso_fairshare_dominant(t, t->acct[i].decayed);
		}
	}
	items = json_array();
	bool more = false;
	if (cluster) {
		/* Accounts in tree order; the cursor is the last account shown. */
		for (int i = start; i < t->n_accounts; i++) {
			if (!account_live(&t->acct[i]))
				continue;
			if (n == limit) {
				more = true;
				break;
			}
			json_array_append_new(items,
			                      standing_json(c, t, i, rank, sum_shares, sum_dom, true));
			last = i;
			n++;
		}
	} else {
		for (int x = own; x >= 0;
		     x = x == own ? t->acct[x].first_child : t->acct[x].next_sibling) {
			if (x < start || !account_live(&t->acct[x]))
				continue;
			if (n == limit) {
				more = true;
				break;
			}
			json_array_append_new(items, standing_json(c, t, x, NULL, NULL, NULL, x != own));
			last = x;
			n++;
		}
	}
	*out = json_pack("{s:o, s:o}", "items", items, "next",
	                 more && last > 0 ? json_string(t->acct[last].name) : json_null());
	return 0;
}

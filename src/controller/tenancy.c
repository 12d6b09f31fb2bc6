/* tenancy.c: the controller's account tree (docs/tenancy.md). It keeps the
 * tree of src/tenancy (organisations > tenants > projects, their quotas and
 * what they hold) mirrored from the store and the live allocations, and
 * applies it when a request arrives: Lua admission policies, hard limits,
 * per-tenant limits on pending and live allocations, and quota admission
 * before every placement. What an allocation is charged comes from
 * demand.c; the pending queue is queue.c, preemption preempt.c. Usage that
 * ended is logged in the same transaction as the change that ended it, so
 * fair share is rebuilt exactly after a restart: the same history gives the
 * same order. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

#define DEFAULT_ORG "-" /* tenants outside any organisation; not a valid name */

struct ctl_policy {
	char name[ISO_NAME_MAX];
	char *src;
	size_t len;
};

struct ctl_tenancy {
	struct iso_tenancy t;
	int org_default;
	struct ctl_policy *policies;
	int n_policies;
};

/* ---- accounts ---- */

/* The account name of a tenant's project in the tree: "tenant/project". */
static int project_account(const char *tenant, const char *project, char *buf, size_t size)
{
	return snprintf(buf, size, "%s/%s", tenant, project) >= (int)size ? -ENAMETOOLONG : 0;
}

/* The leaf account an allocation is charged to. */
int ctl_tenancy_account_of(const struct iso_controller *c, const struct iso_allocation *a)
{
	const struct iso_tenancy *t = &c->tenancy->t;
	char name[ISO_NAME_MAX];

	if (a->project[0] && project_account(a->tenant, a->project, name, sizeof(name)) == 0) {
		int i = iso_tenancy_find(t, name);
		if (i >= 0)
			return i;
	}
	return iso_tenancy_find(t, a->tenant);
}

static bool holds(enum iso_alloc_state s)
{
	return s == ISO_ALLOC_PLACED || s == ISO_ALLOC_PROVISIONING || s == ISO_ALLOC_ACTIVE ||
	       s == ISO_ALLOC_RELEASING;
}

/* ---- usage history ---- */

/* Decayed resource-milliseconds of `r` held over [start, end], seen at now:
 * the integral of 2^-(now-t)/H, the same measure iso_fairshare_accrue keeps. */
static double decayed_ms(const struct iso_tenancy *t, int64_t start, int64_t end, int64_t now)
{
	double h = (double)t->half_life_ms;

	if (end <= start)
		return 0;
	return h / M_LN2 * (exp2(-(double)(now - end) / h) - exp2(-(double)(now - start) / h));
}

static void usage_json(const struct iso_tenancy *t, const struct iso_resvec *r, char *buf,
                       size_t size)
{
	json_t *o = json_object();
	char *text;

	for (int k = 0; k < t->n_kinds; k++)
		if (r->v[k]) {
			char label[64];
			ctl_tenancy_kind_name(t, k, label, sizeof(label));
			json_object_set_new(o, label, json_integer(r->v[k]));
		}
	text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	iso_strlcpy(buf, text ? text : "{}", size);
	free(text);
	json_decref(o);
}

static int usage_parse(const struct iso_tenancy *t, const char *text, struct iso_resvec *r)
{
	json_t *o = json_loads(text, 0, NULL), *v;
	const char *key;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(o)) {
		json_decref(o);
		return -EINVAL;
	}
	json_object_foreach (o, key, v) {
		int k = ctl_tenancy_kind_parse(t, key);
		if (k >= 0 && json_is_integer(v))
			r->v[k] = json_integer_value(v);
	}
	json_decref(o);
	return 0;
}

/* ---- lifetime ---- */

void ctl_tenancy_kind_name(const struct iso_tenancy *t, int k, char *buf, size_t size)
{
	static const char *const fixed[] = {"gpus", "cpus", "memory_mib", "nodes"};

	if (k >= 0 && k < ISO_RES_FIRST_MODEL)
		iso_strlcpy(buf, fixed[k], size);
	else if (k < t->n_kinds && k < ISO_RES_MAX)
		iso_strlcpy(buf, t->model[k], size);
	else
		snprintf(buf, size, "kind%d", k);
}

int ctl_tenancy_kind_parse(const struct iso_tenancy *t, const char *name)
{
	char buf[64];

	for (int k = 0; k < t->n_kinds; k++) {
		ctl_tenancy_kind_name(t, k, buf, sizeof(buf));
		if (strcasecmp(buf, name) == 0)
			return k;
	}
	return -1;
}

static int read_policy(const char *path, struct ctl_policy *p, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	const char *base = strrchr(path, '/');
	long n;

	if (!f)
		return iso_error_set(err, ISO_E_INVALID, "admission_policy", "%s: %s", path,
		                     strerror(errno));
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || n > 1024 * 1024 ||
	    fseek(f, 0, SEEK_SET) < 0)
		return iso_error_set(err, ISO_E_INVALID, "admission_policy",
		                     "%s: unreadable or over 1 MiB", path);
	p->src = malloc((size_t)n + 1);
	if (!p->src || fread(p->src, 1, (size_t)n, f) != (size_t)n)
		return iso_error_set(err, ISO_E_INVALID, "admission_policy", "%s: cannot read",
		                     path);
	p->src[n] = '\0';
	p->len = (size_t)n;
	iso_strlcpy(p->name, base ? base + 1 : path, sizeof(p->name));
	return 0;
}

void ctl_tenancy_close(struct iso_controller *c)
{
	struct ctl_tenancy *tn = c->tenancy;

	if (!tn)
		return;
	for (int i = 0; i < tn->n_policies; i++)
		free(tn->policies[i].src);
	free(tn->policies);
	iso_tenancy_free(&tn->t);
	free(tn);
	c->tenancy = NULL;
}

static int add_tenant_account(struct iso_controller *c, const struct iso_tenant *t,
                              struct iso_error *err)
{
	struct ctl_tenancy *tn = c->tenancy;
	int parent = t->org[0] ? iso_tenancy_find(&tn->t, t->org) : tn->org_default;

	if (parent < 0)
		parent = tn->org_default; /* the organisation is gone: keep the tenant usable */
	return iso_tenancy_add(&tn->t, t->name, ISO_ACCT_TENANT, parent,
	                       t->shares > 0 ? t->shares : 1.0, err);
}

/* Builds the tree from the store: organisations, tenants, projects,
 * quotas; then charges what live allocations hold and replays the usage
 * log so that decayed usage is what it was. */
static int load(struct iso_controller *c, struct iso_error *err)
{
	struct ctl_tenancy *tn = c->tenancy;
	const struct iso_store_ops *ops = c->store->ops;
	_cleanup_free_ struct iso_org *orgs = NULL;
	_cleanup_free_ struct iso_project *projects = NULL;
	_cleanup_free_ struct iso_quota_row *quotas = NULL;
	_cleanup_free_ struct iso_usage_row *usage = NULL;
	struct iso_tenant *tenants = NULL;
	struct iso_allocation *live = NULL;
	struct iso_alloc_filter f = {.live_only = true, .state = -1};
	int n_orgs = 0, n_projects = 0, n_quotas = 0, n_usage = 0, n_tenants = 0, n_live = 0, r;
	int64_t now = iso_now_ms();

	r = ops->org_list(c->store, &orgs, &n_orgs, err);
	for (int i = 0; r == 0 && i < n_orgs; i++)
		r = iso_tenancy_add(&tn->t, orgs[i].name, ISO_ACCT_ORG, 0, orgs[i].shares, err);
	if (r >= 0)
		r = ops->tenant_list(c->store, "", 0, &tenants, &n_tenants, err);
	for (int i = 0; r >= 0 && i < n_tenants; i++)
		r = add_tenant_account(c, &tenants[i], err);
	if (r >= 0)
		r = ops->project_list(c->store, &projects, &n_projects, err);
	for (int i = 0; r >= 0 && i < n_projects; i++) {
		char name[ISO_NAME_MAX], tname[ISO_NAME_MAX];
		iso_controller_tenant_name(c, projects[i].tenant_id, tname, sizeof(tname));
		int parent = iso_tenancy_find(&tn->t, tname);
		if (parent < 0 || project_account(tname, projects[i].name, name, sizeof(name)) < 0)
			continue;
		r = iso_tenancy_add(&tn->t, name, ISO_ACCT_PROJECT, parent, projects[i].shares,
		                    err);
	}
	free(tenants);
	if (r >= 0)
		r = ops->quota_list(c->store, &quotas, &n_quotas, err);
	/* Parents before children, so that nesting checks see the parent's. */
	for (int level = ISO_ACCT_ORG; r >= 0 && level <= ISO_ACCT_PROJECT; level++)
		for (int i = 0; r >= 0 && i < n_quotas; i++) {
			int acct = iso_tenancy_find(&tn->t, quotas[i].account);
			int k = ctl_tenancy_kind_parse(&tn->t, quotas[i].kind);
			if (acct < 0 || k < 0 || (int)tn->t.acct[acct].level != level)
				continue;
			r = iso_tenancy_set_quota(&tn->t, acct, k,
			                          (struct iso_quota){quotas[i].guaranteed,
			                                             quotas[i].borrow_limit,
			                                             quotas[i].lend_limit},
			                          err);
		}
	if (r < 0)
		return r;
	/* Decayed usage: the log of work that ended, then what runs now. */
	r = ops->usage_list(c->store, 0, &usage, &n_usage, err);
	for (int i = 0; r == 0 && i < n_usage; i++) {
		struct iso_resvec v;
		int acct = iso_tenancy_find(&tn->t, usage[i].account);
		if (acct < 0 || usage_parse(&tn->t, usage[i].usage, &v) < 0)
			continue;
		iso_fairshare_add(&tn->t, acct, &v,
		                  decayed_ms(&tn->t, usage[i].start_ms, usage[i].end_ms, now));
	}
	if (r == 0)
		r = ops->alloc_list(c->store, &f, &live, &n_live, err);
	for (int i = 0; r == 0 && i < n_live; i++) {
		struct iso_allocation *a = &live[i];
		struct iso_resvec v;
		int acct = ctl_tenancy_account_of(c, a);
		/* Pending work of an account no longer in the tree still waits
		 * (last, under the implicit organisation), as it did before. */
		if (a->state == ISO_ALLOC_PENDING) {
			if (ctl_queue_add(c, a) < 0)
				r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			continue;
		}
		if (acct < 0)
			continue;
		if (!holds(a->state))
			continue;
		ctl_demand(c, a, &v);
		iso_tenancy_charge(&tn->t, acct, &v);
		if (a->state != ISO_ALLOC_RELEASING && ctl_queue_running_set(c, a, true) < 0)
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		if (a->started_ms > 0)
			iso_fairshare_add(&tn->t, acct, &v,
			                  decayed_ms(&tn->t, a->started_ms, now, now));
	}
	iso_allocations_free(live, n_live);
	for (int i = 0; i < tn->t.n_accounts; i++)
		tn->t.acct[i].decayed_at_ms = now;
	return r;
}

int ctl_tenancy_open(struct iso_controller *c, const struct iso_controller_params *params,
                     struct iso_error *err)
{
	struct ctl_tenancy *tn = calloc(1, sizeof(*tn));
	int r;

	if (!tn)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->tenancy = tn;
	if (iso_tenancy_init(&tn->t, params->fair_share_half_life_ms) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	/* A kind per GPU model with MIG, weighted by the memory of one slice
	 * (10 GiB on H100-80GB = 1.0): an H100 slice is not an A30 slice. */
	for (int n = 0; n < c->inv->n_nodes; n++)
		for (int g = 0; g < c->inv->nodes[n].n_gpus; g++) {
			const struct iso_gpu_model *m = c->inv->nodes[n].gpus[g].model;
			int k;
			if (!m)
				continue;
			k = iso_tenancy_kind(&tn->t, m->name, err);
			if (k < 0)
				return k;
			tn->t.model_weight[k] =
			    m->memory_slices ? m->memory_gib / m->memory_slices / 10.0 : 1.0;
			tn->t.capacity.v[k] += m->compute_slices;
			tn->t.capacity.v[ISO_RES_GPUS]++;
		}
	for (int n = 0; n < c->inv->n_nodes; n++) {
		tn->t.capacity.v[ISO_RES_CPUS] += c->inv->nodes[n].cpus;
		tn->t.capacity.v[ISO_RES_MEMORY] += c->inv->nodes[n].memory_mib;
		tn->t.capacity.v[ISO_RES_NODES]++;
	}
	/* The implicit organisation: unlimited, so tenants outside any
	 * organisation are bounded by their own quotas only. */
	r = iso_tenancy_add(&tn->t, DEFAULT_ORG, ISO_ACCT_ORG, 0, 1.0, err);
	if (r < 0)
		return r;
	tn->org_default = r;
	for (int k = 0; k < ISO_RES_MAX; k++)
		tn->t.acct[r].q[k].guaranteed = ISO_QUOTA_NONE;
	for (int i = 0; i < params->n_admission_policies; i++) {
		struct ctl_policy *np = realloc(tn->policies, (size_t)(i + 1) * sizeof(*np));
		if (!np)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		tn->policies = np;
		memset(&np[i], 0, sizeof(np[i]));
		tn->n_policies = i + 1;
		r = read_policy(params->admission_policies[i], &np[i], err);
		if (r < 0)
			return r;
	}
	return load(c, err);
}

/* ---- the use cases' hooks ---- */

int ctl_tenancy_check_request(struct iso_controller *c, const struct iso_tenant *tenant,
                              const struct iso_allocation *a, struct iso_error *err)
{
	struct ctl_tenancy *tn = c->tenancy;
	struct iso_resvec v;
	int acct = ctl_tenancy_account_of(c, a);
	char label[64];

	if (acct < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "project", "no such project");
	/* Admission policies first: a site rule beats a quota message. */
	if (tn->n_policies > 0) {
		char tags[ISO_DESC_MAX];
		const char *tag_list[32];
		int n_tags = 0;
		enum iso_isolation iso = ISO_ISOLATION_SHARED;
		char *save = NULL;

		iso_strlcpy(tags, tenant->tags, sizeof(tags));
		for (char *t = strtok_r(tags, ",", &save); t && n_tags < 32;
		     t = strtok_r(NULL, ",", &save))
			tag_list[n_tags++] = t;
		iso_isolation_parse(a->isolation[0] ? a->isolation : tenant->isolation, &iso);
		struct iso_admission_request req = {
		    .tenant = a->tenant,
		    .tags = tag_list,
		    .n_tags = n_tags,
		    .members = a->members,
		    .gpus = {.profile = a->shape.profile,
		             .count = a->shape.gpu_count,
		             .whole = a->shape.whole},
		    .cpus = a->shape.cpus,
		    .memory_mib = a->shape.memory_mib,
		    .isolation = iso,
		};
		for (int i = 0; i < tn->n_policies; i++) {
			int r = iso_admission_lua_eval(tn->policies[i].name, tn->policies[i].src,
			                               tn->policies[i].len, &req, NULL, err);
			if (r < 0)
				return r;
		}
	}
	/* A request above a hard limit can never run: refused now. While
	 * pending, its charge is the least any placement could cost. */
	ctl_demand(c, a, &v);
	for (int x = acct; x > 0; x = tn->t.acct[x].parent) {
		const struct iso_account *ac = &tn->t.acct[x];
		for (int k = 0; k < tn->t.n_kinds; k++) {
			const struct iso_quota *q = &ac->q[k];
			int64_t hard;
			if (q->guaranteed == ISO_QUOTA_NONE || q->borrow_limit == ISO_QUOTA_NONE)
				continue;
			hard = q->guaranteed + q->borrow_limit;
			if (v.v[k] <= hard)
				continue;
			char field[ISO_ERR_FIELD_MAX];
			ctl_tenancy_kind_name(&tn->t, k, label, sizeof(label));
			snprintf(field, sizeof(field), "quota.%s.%s", ac->name, label);
			return iso_error_set(
			    err, ISO_E_CAPACITY, field,
			    "%s %s: the request needs %lld %s, above its hard limit "
			    "%lld (guaranteed %lld + borrowing limit %lld)",
			    iso_acct_level_name(ac->level), ac->name, (long long)v.v[k], label,
			    (long long)hard, (long long)q->guaranteed, (long long)q->borrow_limit);
		}
	}
	return 0;
}

int ctl_tenancy_admit(struct iso_controller *c, const struct iso_allocation *a,
                      const struct iso_resvec *v, struct iso_error *err)
{
	int acct = ctl_tenancy_account_of(c, a);

	if (acct < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "project", "no such project");
	return iso_tenancy_admit(&c->tenancy->t, acct, v, err);
}

void ctl_tenancy_charge(struct iso_controller *c, const struct iso_allocation *a,
                        const struct iso_resvec *v)
{
	int acct = ctl_tenancy_account_of(c, a);

	if (acct < 0)
		return;
	iso_fairshare_accrue(&c->tenancy->t, iso_now_ms());
	iso_tenancy_charge(&c->tenancy->t, acct, v);
}

void ctl_tenancy_uncharge(struct iso_controller *c, const struct iso_allocation *a,
                          const struct iso_resvec *v)
{
	int acct = ctl_tenancy_account_of(c, a);

	if (acct < 0)
		return;
	iso_fairshare_accrue(&c->tenancy->t, iso_now_ms());
	iso_tenancy_release(&c->tenancy->t, acct, v);
}

int ctl_tenancy_log(struct iso_controller *c, const struct iso_allocation *a,
                    const struct iso_resvec *v, int64_t now, struct iso_error *err)
{
	struct iso_usage_row u = {.start_ms = a->started_ms, .end_ms = now};

	if (a->started_ms <= 0 || now <= a->started_ms)
		return 0;
	if (a->project[0])
		project_account(a->tenant, a->project, u.account, sizeof(u.account));
	else
		iso_strlcpy(u.account, a->tenant, sizeof(u.account));
	usage_json(&c->tenancy->t, v, u.usage, sizeof(u.usage));
	return c->store->ops->usage_append(c->store, &u, err);
}

/* The placement constraints of an allocation: its isolation class (the
 * stricter of the tenant's and its own) and its spreading. */
int ctl_tenancy_constraints(struct iso_controller *c, const struct iso_allocation *a,
                            struct iso_place_constraints *pc, struct iso_error *err)
{
	struct iso_tenant t;
	enum iso_isolation ti = ISO_ISOLATION_SHARED, ri = ISO_ISOLATION_SHARED;
	enum iso_spread sp = ISO_SPREAD_NONE;
	int r = c->store->ops->tenant_get_by_id(c->store, a->tenant_id, &t, err);

	memset(pc, 0, sizeof(*pc));
	if (r < 0)
		return r;
	if (t.isolation[0])
		iso_isolation_parse(t.isolation, &ti);
	if (a->isolation[0] && iso_isolation_parse(a->isolation, &ri) < 0)
		return iso_error_set(err, ISO_E_INVALID, "isolation", "isolation: unknown class");
	if (a->spread[0] && iso_spread_parse(a->spread, &sp) < 0)
		return iso_error_set(err, ISO_E_INVALID, "spread", "spread: unknown level");
	iso_isolation_constraints(ti, ri, sp, pc);
	return 0;
}

int ctl_tenancy_check_limits(struct iso_controller *c, const struct iso_tenant *t,
                             struct iso_error *err)
{
	int acct = iso_tenancy_find(&c->tenancy->t, t->name), pending, live;
	int max_pending = t->max_pending > 0 ? t->max_pending : c->limits.max_pending;
	int max_live = t->max_live > 0 ? t->max_live : c->limits.max_live;

	ctl_queue_tenant_counts(c, acct, &pending, &live, NULL);
	/* A new allocation may start pending or live: both must have room. */
	if (pending >= max_pending)
		return iso_error_set(err, ISO_E_LIMIT, "limits.max_pending",
		                     "tenant %s has %d pending allocations, its limit "
		                     "(limits.max_pending %d); release some or wait",
		                     t->name, pending, max_pending);
	if (live >= max_live)
		return iso_error_set(err, ISO_E_LIMIT, "limits.max_live",
		                     "tenant %s holds %d live allocations, its limit "
		                     "(limits.max_live %d); release some first",
		                     t->name, live, max_live);
	return 0;
}

/* ---- accounts as the API changes them ---- */

void ctl_tenancy_tenant_deleted(struct iso_controller *c, const struct iso_tenant *t)
{
	struct iso_tenancy *tree = &c->tenancy->t;
	int x = iso_tenancy_find(tree, t->name), i = 0;

	if (x <= 0)
		return;
	/* "#<id>" is no valid name: a new tenant of the same name gets an
	 * account of its own, with no guarantees and no history. The old one
	 * stays in the tree so that its organisation's usage still counts. */
	char name[ISO_NAME_MAX];
	snprintf(name, sizeof(name), "#%lld", (long long)t->id);
	iso_tenancy_rename(tree, x, name);
	for (int ch = tree->acct[x].first_child; ch >= 0; ch = tree->acct[ch].next_sibling) {
		snprintf(name, sizeof(name), "#%lld/%d", (long long)t->id, i++);
		iso_tenancy_rename(tree, ch, name);
	}
	for (int k = 0; k < ISO_RES_MAX; k++) {
		tree->acct[x].q[k] = (struct iso_quota){0, ISO_QUOTA_NONE, ISO_QUOTA_NONE};
		for (int ch = tree->acct[x].first_child; ch >= 0; ch = tree->acct[ch].next_sibling)
			tree->acct[ch].q[k] = (struct iso_quota){0, ISO_QUOTA_NONE, ISO_QUOTA_NONE};
	}
}

int ctl_tenancy_tenant_added(struct iso_controller *c, const struct iso_tenant *t,
                             struct iso_error *err)
{
	int r;

	if (iso_tenancy_find(&c->tenancy->t, t->name) >= 0)
		return 0;
	r = add_tenant_account(c, t, err);
	return r < 0 ? r : 0;
}

const struct iso_tenancy *ctl_tenancy_tree(const struct iso_controller *c)
{
	return &c->tenancy->t;
}

/* ---- account changes for accounts.c and tenants.c: called after the
 * commit that made them durable, or as a dry run (applied, checked, undone)
 * inside the transaction so that a refused change is never written ---- */

int ctl_tenancy_put_account(struct iso_controller *c, const char *name, int level,
                            const char *parent, double shares, struct iso_error *err)
{
	struct ctl_tenancy *tn = c->tenancy;
	int i = iso_tenancy_find(&tn->t, name), p;

	if (i >= 0) {
		if (shares > 0)
			tn->t.acct[i].shares = shares;
		return i;
	}
	if (level == ISO_ACCT_ORG)
		p = 0;
	else if (level == ISO_ACCT_TENANT && (!parent || !parent[0]))
		p = tn->org_default;
	else
		p = iso_tenancy_find(&tn->t, parent);
	if (p < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "parent", "no account %s", parent);
	return iso_tenancy_add(&tn->t, name, (enum iso_acct_level)level, p,
	                       shares > 0 ? shares : 1.0, err);
}

int ctl_tenancy_set_quotas(struct iso_controller *c, const char *account, const int *kinds,
                           const struct iso_quota *q, int n, bool dry_run, struct iso_error *err)
{
	struct iso_tenancy *t = &c->tenancy->t;
	struct iso_quota old[ISO_RES_MAX];
	int acct = iso_tenancy_find(t, account), done = 0, r = 0;

	if (acct < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such account");
	for (; done < n && done < ISO_RES_MAX; done++) {
		old[done] = t->acct[acct].q[kinds[done]];
		r = iso_tenancy_set_quota(t, acct, kinds[done], q[done], err);
		if (r < 0)
			break;
	}
	if (r < 0 || dry_run)
		while (done-- > 0)
			t->acct[acct].q[kinds[done]] = old[done];
	return r;
}

void ctl_tenancy_forget_account(struct iso_controller *c, const char *account)
{
	struct iso_tenancy *t = &c->tenancy->t;
	int acct = iso_tenancy_find(t, account);

	if (acct <= 0)
		return;
	/* Direct: an empty account's unset quota nests by definition. */
	for (int k = 0; k < ISO_RES_MAX; k++)
		t->acct[acct].q[k] = (struct iso_quota){0, ISO_QUOTA_NONE, ISO_QUOTA_NONE};
	/* "#<index>" is no valid name: an account created later under the
	 * same name starts fresh; this one keeps counting in its parent. */
	char name[ISO_NAME_MAX];
	snprintf(name, sizeof(name), "#%d", acct);
	iso_tenancy_rename(t, acct, name);
}

/* Takes x out of its parent's children; returns the sibling before it (-1
 * when it was first), so that it can go back where it was. */
static int unlink_child(struct iso_tenancy *t, int x)
{
	struct iso_account *pa = &t->acct[t->acct[x].parent];
	int prev = -1;

	for (int ch = pa->first_child; ch >= 0 && ch != x; ch = t->acct[ch].next_sibling)
		prev = ch;
	if (prev < 0)
		pa->first_child = t->acct[x].next_sibling;
	else
		t->acct[prev].next_sibling = t->acct[x].next_sibling;
	t->acct[x].next_sibling = -1;
	return prev;
}

/* Puts x under p after `prev` (-2: last, -1: first). */
static void link_child(struct iso_tenancy *t, int x, int p, int prev)
{
	struct iso_account *pa = &t->acct[p];

	t->acct[x].parent = p;
	if (prev == -2) {
		prev = -1;
		for (int ch = pa->first_child; ch >= 0; ch = t->acct[ch].next_sibling)
			prev = ch;
	}
	if (prev < 0) {
		t->acct[x].next_sibling = pa->first_child;
		pa->first_child = x;
	} else {
		t->acct[x].next_sibling = t->acct[prev].next_sibling;
		t->acct[prev].next_sibling = x;
	}
}

/* Re-parents a tenant that holds nothing (its decayed usage stays counted in
 * the organisation it leaves until it decays). Its guarantees must nest under
 * the new organisation (ISO_E_INVALID "quota.TENANT.KIND"). */
int ctl_tenancy_move_tenant(struct iso_controller *c, const char *tenant, const char *org,
                            bool dry_run, struct iso_error *err)
{
	struct ctl_tenancy *tn = c->tenancy;
	struct iso_tenancy *t = &tn->t;
	int x = iso_tenancy_find(t, tenant),
	    np = org && org[0] ? iso_tenancy_find(t, org) : tn->org_default;
	int op, prev, r = 0;

	if (x < 0 || np < 0 || t->acct[np].level != ISO_ACCT_ORG)
		return iso_error_set(err, ISO_E_NOT_FOUND, "org", "org: no such organisation");
	op = t->acct[x].parent;
	if (op == np)
		return 0;
	for (int k = 0; k < ISO_RES_MAX; k++)
		if (t->acct[x].used.v[k] != 0)
			return iso_error_set(err, ISO_E_CONFLICT, "org",
			                     "org: tenant %s holds resources; release them before "
			                     "moving it to another organisation",
			                     tenant);
	prev = unlink_child(t, x);
	link_child(t, x, np, -2);
	for (int k = 0; r == 0 && k < t->n_kinds; k++)
		r = iso_tenancy_set_quota(t, x, k, t->acct[x].q[k], err);
	if (r < 0 || dry_run) {
		unlink_child(t, x);
		link_child(t, x, op, prev);
	}
	return r;
}

void ctl_tenancy_accrue(struct iso_controller *c)
{
	iso_fairshare_accrue(&c->tenancy->t, iso_now_ms());
}

int ctl_tenancy_default_org(const struct iso_controller *c)
{
	return c->tenancy->org_default;
}


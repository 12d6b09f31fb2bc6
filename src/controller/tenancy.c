/* tenancy.c: the controller's side of sharing the silicon fairly
 * (docs/tenancy.md). It keeps the account tree of src/tenancy (organisations
 * > tenants > projects, their quotas and what they hold) mirrored from the
 * store and the live allocations, and applies it: Lua admission policies
 * and hard limits when a request arrives, quota admission before every
 * placement, the pending queue in fair-share order with backfill, and
 * preemption to reclaim lent capacity (a signal, a grace period, then the
 * eviction). Usage that ended is logged in the same transaction as the
 * change that ended it, so fair share is rebuilt exactly after a restart:
 * the same history gives the same order. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

static int find_kind(const struct iso_tenancy *t, const char *model);

#define DEFAULT_ORG "-" /* tenants outside any organisation; not a valid name */

struct ctl_policy {
	char name[ISO_NAME_MAX];
	char *src;
	size_t len;
};

struct ctl_victim {
	char id[ISO_ID_MAX];
	char by[ISO_ID_MAX];
	int64_t kill_at_ms;
	bool requeue;
};

struct ctl_tenancy {
	struct iso_tenancy t;
	int org_default;
	struct ctl_policy *policies;
	int n_policies;
	int64_t min_run_ms, grace_ms;
	struct ctl_victim *victims; /* signalled, to be evicted at kill_at_ms */
	int n_victims, cap_victims;
};

/* ---- accounts ---- */

/* The account name of a tenant's project in the tree: "tenant/project". */
static int project_account(const char *tenant, const char *project, char *buf, size_t size)
{
	return snprintf(buf, size, "%s/%s", tenant, project) >= (int)size ? -ENAMETOOLONG : 0;
}

/* The leaf account an allocation is charged to. */
static int account_of(const struct iso_controller *c, const struct iso_allocation *a)
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

/* The kind of a MIG profile's compute slices: the model of the request, or
 * the first MIG-enabled model of the inventory that has the profile. */
static const struct iso_gpu_model *shape_model(const struct iso_controller *c,
                                               const struct iso_shape *sh)
{
	for (int n = 0; n < c->inv->n_nodes; n++)
		for (int g = 0; g < c->inv->nodes[n].n_gpus; g++) {
			const struct iso_gpu *gpu = &c->inv->nodes[n].gpus[g];
			if (!gpu->model ||
			    (sh->gpu_model[0] && strcasecmp(sh->gpu_model, gpu->model->name) != 0))
				continue;
			if (sh->whole ||
			    (gpu->mig_enabled && iso_mig_profile_find(gpu->model, sh->profile)))
				return gpu->model;
		}
	return NULL;
}

/* What `members` members of the allocation's shape take, as a vector. */
static void demand(const struct iso_controller *c, const struct iso_allocation *a, int members,
                   struct iso_resvec *out)
{
	const struct iso_shape *sh = &a->shape;
	const struct iso_gpu_model *m = shape_model(c, sh);

	memset(out, 0, sizeof(*out));
	out->v[ISO_RES_CPUS] = (int64_t)sh->cpus * members;
	out->v[ISO_RES_MEMORY] = sh->memory_mib * members;
	if (strcmp(a->isolation, "exclusive-node") == 0)
		out->v[ISO_RES_NODES] = members;
	if (sh->gpu_count > 0 && sh->whole) {
		out->v[ISO_RES_GPUS] = (int64_t)sh->gpu_count * members;
	} else if (sh->gpu_count > 0 && m) {
		const struct iso_mig_profile *p = iso_mig_profile_find(m, sh->profile);
		int k = find_kind(&c->tenancy->t, m->name);
		if (p && k >= 0)
			out->v[k] = (int64_t)p->compute * sh->gpu_count * members;
	}
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

static int find_kind(const struct iso_tenancy *t, const char *model)
{
	for (int k = ISO_RES_FIRST_MODEL; k < t->n_kinds; k++)
		if (strcasecmp(t->model[k], model) == 0)
			return k;
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
	free(tn->victims);
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
		int acct = account_of(c, a);
		if (acct < 0 || !holds(a->state))
			continue;
		demand(c, a, a->members, &v);
		iso_tenancy_charge(&tn->t, acct, &v);
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
	tn->min_run_ms = params->preempt_min_run_ms;
	tn->grace_ms = params->preempt_grace_ms;
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
	int acct = account_of(c, a);
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
	/* A request above a hard limit can never run: refused now. */
	demand(c, a, a->members, &v);
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

int ctl_tenancy_admit(struct iso_controller *c, const struct iso_allocation *a, int members,
                      struct iso_error *err)
{
	struct iso_resvec v;
	int acct = account_of(c, a);

	if (acct < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "project", "no such project");
	demand(c, a, members, &v);
	return iso_tenancy_admit(&c->tenancy->t, acct, &v, err);
}

void ctl_tenancy_charge(struct iso_controller *c, const struct iso_allocation *a, int members)
{
	struct iso_resvec v;
	int acct = account_of(c, a);

	if (acct < 0)
		return;
	iso_fairshare_accrue(&c->tenancy->t, iso_now_ms());
	demand(c, a, members, &v);
	iso_tenancy_charge(&c->tenancy->t, acct, &v);
}

int ctl_tenancy_log(struct iso_controller *c, const struct iso_allocation *a, int members,
                    int64_t now, struct iso_error *err)
{
	struct iso_usage_row u = {.start_ms = a->started_ms, .end_ms = now};
	struct iso_resvec v;

	if (a->started_ms <= 0 || now <= a->started_ms)
		return 0;
	demand(c, a, members, &v);
	if (a->project[0])
		project_account(a->tenant, a->project, u.account, sizeof(u.account));
	else
		iso_strlcpy(u.account, a->tenant, sizeof(u.account));
	usage_json(&c->tenancy->t, &v, u.usage, sizeof(u.usage));
	return c->store->ops->usage_append(c->store, &u, err);
}

void ctl_tenancy_uncharge(struct iso_controller *c, const struct iso_allocation *a, int members)
{
	struct iso_resvec v;
	int acct = account_of(c, a);

	if (acct < 0)
		return;
	iso_fairshare_accrue(&c->tenancy->t, iso_now_ms());
	demand(c, a, members, &v);
	iso_tenancy_release(&c->tenancy->t, acct, &v);
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

/* ---- the queue ---- */

struct queue {
	struct iso_allocation *pending;
	int n;
	struct iso_pending *items;
	struct iso_queue_entry *order;
};

static void queue_free(struct queue *q)
{
	iso_allocations_free(q->pending, q->n);
	free(q->items);
	free(q->order);
	memset(q, 0, sizeof(*q));
}

/* Pending allocations in fair-share order. */
static int queue_build(struct iso_controller *c, struct queue *q, struct iso_error *err)
{
	struct iso_alloc_filter f = {.state = ISO_ALLOC_PENDING};
	int r;

	memset(q, 0, sizeof(*q));
	iso_fairshare_accrue(&c->tenancy->t, iso_now_ms());
	r = c->store->ops->alloc_list(c->store, &f, &q->pending, &q->n, err);
	if (r < 0)
		return r;
	q->items = calloc((size_t)q->n + 1, sizeof(*q->items));
	q->order = calloc((size_t)q->n + 1, sizeof(*q->order));
	if (!q->items || !q->order)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < q->n; i++) {
		const struct iso_allocation *a = &q->pending[i];
		struct iso_pending *it = &q->items[i];

		iso_strlcpy(it->id, a->id, sizeof(it->id));
		it->acct = account_of(c, a);
		if (it->acct < 0)
			it->acct = c->tenancy->org_default; /* ordered last among the unknown */
		it->priority = a->priority;
		it->submit_ms = a->created_ms;
		it->duration_ms = a->duration_ms;
		demand(c, a, a->members, &it->req);
	}
	return iso_fairshare_order(&c->tenancy->t, q->items, q->n, q->order, err);
}

/* The running work as the backfill and preemption planners see it. */
static int running(struct iso_controller *c, struct iso_allocation **live, int *n_live,
                   struct iso_running **out, struct iso_error *err)
{
	struct iso_alloc_filter f = {.live_only = true, .state = -1};
	struct iso_running *run;
	int n = 0, r = c->store->ops->alloc_list(c->store, &f, live, n_live, err);

	*out = NULL;
	if (r < 0)
		return r;
	run = calloc((size_t)*n_live + 1, sizeof(*run));
	if (!run)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < *n_live; i++) {
		const struct iso_allocation *a = &(*live)[i];
		struct iso_running *x = &run[n];

		if (!holds(a->state) || a->state == ISO_ALLOC_RELEASING)
			continue;
		iso_strlcpy(x->id, a->id, sizeof(x->id));
		x->acct = account_of(c, a);
		x->priority = a->priority;
		x->start_ms = a->started_ms > 0 ? a->started_ms : a->updated_ms;
		x->end_ms = a->duration_ms > 0 ? x->start_ms + a->duration_ms : INT64_MAX;
		x->fail_on_preempt = a->fail_on_preempt;
		demand(c, a, a->members, &x->use);
		if (x->acct >= 0)
			n++;
	}
	*out = run;
	return n;
}

/* Places what the queue lets start now: fair-share order; when the head is
 * blocked, later items start only if the backfill plan says they do not
 * delay it. Each placement is one transaction (ctl_alloc_place_pending). */
void ctl_tenancy_place_pending(struct iso_controller *c)
{
	struct queue q;
	struct iso_error err = {0};
	struct iso_allocation *live = NULL;
	struct iso_running *run = NULL;
	bool *start = NULL;
	int64_t head_start = -1;
	int n_live = 0, n_run;

	if (queue_build(c, &q, &err) < 0) {
		iso_log(ISO_LOG_ERR, "queue_failed", "error=\"%s\"", err.message);
		queue_free(&q);
		return;
	}
	if (q.n == 0) {
		queue_free(&q);
		return;
	}
	n_run = running(c, &live, &n_live, &run, &err);
	start = calloc((size_t)q.n, sizeof(*start));
	if (n_run < 0 || !start ||
	    iso_backfill_plan(&c->tenancy->t.capacity, run, n_run, q.items, q.order, q.n,
	                      iso_now_ms(), start, &head_start, &err) < 0) {
		/* Without a plan: strict order, every item tried. */
		for (int i = 0; start && i < q.n; i++)
			start[i] = true;
	}
	for (int i = 0; i < q.n; i++) {
		int idx = q.order[i].item;
		struct iso_allocation *a = &q.pending[idx];
		bool blocked_head = false;

		if (!start || !start[idx]) {
			/* A head the plan cannot start now may still reclaim what
			 * its tenant lent (the planner counts borrowed work as
			 * running on). */
			if (i == 0 && start)
				ctl_tenancy_preempt_for(c, a, run, n_run);
			continue;
		}
		if (ctl_alloc_place_pending(c, a, &blocked_head) == 0)
			continue;
		/* A head that cannot start may reclaim what its tenant lent. */
		if (i == 0 && blocked_head)
			ctl_tenancy_preempt_for(c, a, run, n_run);
	}
	free(start);
	free(run);
	iso_allocations_free(live, n_live);
	queue_free(&q);
}

int ctl_tenancy_queue_json(struct iso_controller *c, const struct iso_principal *p, json_t **out,
                           struct iso_error *err)
{
	struct queue q;
	json_t *items = json_array();
	int r = queue_build(c, &q, err);

	for (int i = 0; r == 0 && i < q.n; i++) {
		const struct iso_queue_entry *e = &q.order[i];
		const struct iso_allocation *a = &q.pending[e->item];
		char reason[ISO_DESC_MAX];
		int viewer;

		if (!ctl_is_cluster_role(p) && a->tenant_id != p->tenant_id)
			continue;
		if (p->role == ISO_ROLE_TENANT_USER && strcmp(a->owner, p->owner) != 0)
			continue;
		viewer = ctl_is_cluster_role(p) ? 0 : iso_tenancy_find(&c->tenancy->t, a->tenant);
		if (iso_fairshare_explain(&c->tenancy->t, q.items, q.order, q.n, i, viewer, reason,
		                          sizeof(reason), NULL) < 0)
			iso_strlcpy(reason, e->reason, sizeof(reason));
		json_array_append_new(items,
		                      json_pack("{s:i, s:s, s:s, s:s, s:i, s:s, s:s}", "position",
		                                e->position, "id", a->id, "tenant", a->tenant,
		                                "project", a->project, "priority", a->priority,
		                                "reason", reason, "waiting", a->reason));
	}
	queue_free(&q);
	if (r < 0) {
		json_decref(items);
		return r;
	}
	*out = json_pack("{s:o}", "items", items);
	return 0;
}

/* ---- preemption ---- */

static bool already_victim(const struct ctl_tenancy *tn, const char *id)
{
	for (int i = 0; i < tn->n_victims; i++)
		if (strcmp(tn->victims[i].id, id) == 0)
			return true;
	return false;
}

/* Would `a` fit once the plan's victims are gone? The planner counts
 * capacity over the whole cluster; this asks the placement engine, on the
 * real geometry, with the victims given back for the trial and taken again
 * after it, so that nobody is preempted for nothing. */
static bool plan_helps(struct iso_controller *c, const struct iso_allocation *a,
                       const struct iso_running *run, const struct iso_preempt_plan *plan)
{
	struct iso_allocation victims[64];
	struct iso_allocation trial = *a;
	struct iso_place_constraints pc;
	int n = 0;
	bool fits = false;

	trial.placed = NULL;
	trial.slots = NULL;
	trial.n_members = trial.n_slots = 0;
	for (int v = 0; v < plan->n && n < (int)ISO_ARRAY_SIZE(victims); v++) {
		memset(&victims[n], 0, sizeof(victims[n]));
		if (c->store->ops->alloc_get(c->store, run[plan->v[v].run].id, &victims[n], NULL) <
		    0)
			continue;
		iso_cluster_state_give(&c->cs, &victims[n]);
		n++;
	}
	if (ctl_tenancy_constraints(c, a, &pc, NULL) == 0 &&
	    iso_placer_place_ex(c->placer, &c->cs, &trial, trial.members, &pc, NULL) == 0) {
		fits = true;
		iso_cluster_state_give(&c->cs, &trial);
	}
	iso_allocation_clear(&trial);
	for (int v = 0; v < n; v++) {
		if (ctl_take(c, &victims[v], 0, NULL) < 0)
			iso_log(ISO_LOG_ERR, "preempt_trial_undo_failed", "id=%s", victims[v].id);
		iso_allocation_clear(&victims[v]);
	}
	return fits;
}

void ctl_tenancy_preempt_for(struct iso_controller *c, const struct iso_allocation *a,
                             const struct iso_running *run, int n_run)
{
	struct ctl_tenancy *tn = c->tenancy;
	struct iso_preempt_params pp = {
	    .now_ms = iso_now_ms(), .min_run_ms = tn->min_run_ms, .grace_ms = tn->grace_ms};
	struct iso_preempt_plan plan;
	struct iso_resvec req;
	struct iso_error err = {0};
	int acct = account_of(c, a);
	enum iso_preempt_mode modes[] = {ISO_PREEMPT_RECLAIM, ISO_PREEMPT_PRIORITY};

	if (acct < 0 || n_run <= 0)
		return;
	demand(c, a, a->members, &req);
	for (size_t m = 0; m < ISO_ARRAY_SIZE(modes); m++) {
		if (iso_preempt_choose(&tn->t, modes[m], acct, a->priority, &req, &req, run, n_run,
		                       &pp, &plan, &err) < 0 ||
		    plan.n == 0)
			continue;
		if (!plan_helps(c, a, run, &plan)) {
			iso_log(ISO_LOG_INFO, "preempt_skipped",
			        "for=%s mode=%s victims=%d reason=\"it would still not fit\"",
			        a->id, modes[m] == ISO_PREEMPT_RECLAIM ? "reclaim" : "priority",
			        plan.n);
			continue;
		}
		for (int v = 0; v < plan.n; v++) {
			const struct iso_running *x = &run[plan.v[v].run];
			struct ctl_victim *nv;

			if (already_victim(tn, x->id))
				continue;
			if (tn->n_victims == tn->cap_victims) {
				int cap = tn->cap_victims ? 2 * tn->cap_victims : 8;
				nv = realloc(tn->victims, (size_t)cap * sizeof(*nv));
				if (!nv)
					return;
				tn->victims = nv;
				tn->cap_victims = cap;
			}
			nv = &tn->victims[tn->n_victims++];
			memset(nv, 0, sizeof(*nv));
			iso_strlcpy(nv->id, x->id, sizeof(nv->id));
			iso_strlcpy(nv->by, a->id, sizeof(nv->by));
			nv->kill_at_ms = plan.v[v].kill_at_ms;
			nv->requeue = plan.v[v].requeue;
			ctl_alloc_signal_preempt(c, x->id, a->id,
			                         modes[m] == ISO_PREEMPT_RECLAIM ? "reclaim"
			                                                         : "priority",
			                         nv->kill_at_ms);
		}
		return;
	}
}

void ctl_tenancy_tick(struct iso_controller *c)
{
	struct ctl_tenancy *tn = c->tenancy;
	int64_t now = iso_now_ms();
	bool evicted = false;

	if (!tn)
		return;
	for (int i = 0; i < tn->n_victims;) {
		struct ctl_victim v = tn->victims[i];
		struct iso_error err = {0};

		if (v.kill_at_ms > now) {
			i++;
			continue;
		}
		tn->victims[i] = tn->victims[--tn->n_victims];
		if (ctl_alloc_evict_id(c, v.id, v.requeue, "allocation.preempt", v.by, &err) < 0)
			iso_log(ISO_LOG_ERR, "preempt_failed", "id=%s error=\"%s\"", v.id,
			        err.message);
		else
			evicted = true;
	}
	if (evicted)
		ctl_place_pending(c);
}

/* ---- accounts as the API changes them ---- */

int ctl_tenancy_tenant_added(struct iso_controller *c, const struct iso_tenant *t,
                             struct iso_error *err)
{
	int r;

	/* A tenant deleted and created again keeps its account (and its past
	 * usage: fair share has a memory). */
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

void ctl_tenancy_clear_quotas(struct iso_controller *c, const char *account)
{
	struct iso_tenancy *t = &c->tenancy->t;
	int acct = iso_tenancy_find(t, account);

	/* Direct: an empty account's unset quota nests by definition. */
	for (int k = 0; acct > 0 && k < ISO_RES_MAX; k++)
		t->acct[acct].q[k] = (struct iso_quota){0, ISO_QUOTA_NONE, ISO_QUOTA_NONE};
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

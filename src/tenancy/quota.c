/* quota.c: the account tree (organisation > tenant > project) and its
 * quotas, Kueue-style: per kind a guaranteed part, a borrowing limit and a
 * lending limit; siblings under one parent form a cohort that lends its
 * idle guarantees. Admission is a pure function of the tree, so a request
 * above any hard limit is refused with a message naming that limit, and the
 * limits nest because every ancestor is checked the same way. */
#include <errno.h>
#include <string.h>

#include "tenancy/internal.h"

const char *iso_acct_level_name(enum iso_acct_level l)
{
	switch (l) {
	case ISO_ACCT_ROOT:
		return "root";
	case ISO_ACCT_ORG:
		return "organisation";
	case ISO_ACCT_TENANT:
		return "tenant";
	case ISO_ACCT_PROJECT:
		return "project";
	}
	return "?";
}

static void quota_unset(struct iso_account *a)
{
	for (int k = 0; k < ISO_RES_MAX; k++)
		a->q[k] = (struct iso_quota){
		    .guaranteed = 0, .borrow_limit = ISO_QUOTA_NONE, .lend_limit = ISO_QUOTA_NONE};
}

static int index_rebuild(struct iso_tenancy *t, int n);

int iso_tenancy_init(struct iso_tenancy *t, int64_t half_life_ms)
{
	memset(t, 0, sizeof(*t));
	t->n_kinds = ISO_RES_FIRST_MODEL;
	for (int k = 0; k < ISO_RES_MAX; k++)
		t->model_weight[k] = 1.0;
	t->model_weight[ISO_RES_GPUS] = 7.0; /* a whole GPU is worth 7 compute slices */
	t->half_life_ms = half_life_ms > 0 ? half_life_ms : 7LL * 24 * 3600 * 1000;
	t->acct = calloc(8, sizeof(*t->acct));
	if (!t->acct)
		return -ENOMEM;
	t->cap_accounts = 8;
	t->n_accounts = 1;
	iso_strlcpy(t->acct[0].name, "root", sizeof(t->acct[0].name));
	t->acct[0].level = ISO_ACCT_ROOT;
	t->acct[0].parent = t->acct[0].first_child = t->acct[0].next_sibling = -1;
	t->acct[0].shares = 1.0;
	quota_unset(&t->acct[0]);
	for (int k = 0; k < ISO_RES_MAX; k++)
		t->acct[0].q[k].guaranteed = ISO_QUOTA_NONE;
	return index_rebuild(t, 1);
}

void iso_tenancy_free(struct iso_tenancy *t)
{
	free(t->by_name);
	free(t->acct);
	memset(t, 0, sizeof(*t));
}

int iso_tenancy_kind(struct iso_tenancy *t, const char *model, struct iso_error *err)
{
	if (!model || !model[0] || strlen(model) >= ISO_RES_MODEL_MAX)
		return iso_error_set(err, ISO_E_INVALID, "model", "invalid GPU model name");
	for (int k = ISO_RES_FIRST_MODEL; k < t->n_kinds; k++)
		if (strcmp(t->model[k], model) == 0)
			return k;
	if (t->n_kinds == ISO_RES_MAX)
		return iso_error_set(err, ISO_E_INVALID, "model",
		                     "too many GPU models (at most %d)",
		                     ISO_RES_MAX - ISO_RES_FIRST_MODEL);
	iso_strlcpy(t->model[t->n_kinds], model, sizeof(t->model[0]));
	t->model_weight[t->n_kinds] = 1.0;
	return t->n_kinds++;
}

void iso_tenancy_kind_label(const struct iso_tenancy *t, int kind, char *buf, size_t size)
{
	static const char *const fixed[] = {"whole GPUs", "cpus", "memory MiB", "nodes"};

	if (kind >= 0 && kind < ISO_RES_FIRST_MODEL)
		snprintf(buf, size, "%s", fixed[kind]);
	else if (kind < t->n_kinds)
		snprintf(buf, size, "%s compute slices", t->model[kind]);
	else
		snprintf(buf, size, "kind %d", kind);
}

/* The short form used in error fields: "h100-80gb", "cpus". */
static void kind_field(const struct iso_tenancy *t, int kind, char *buf, size_t size)
{
	static const char *const fixed[] = {"gpus", "cpus", "memory_mib", "nodes"};

	if (kind >= 0 && kind < ISO_RES_FIRST_MODEL)
		snprintf(buf, size, "%s", fixed[kind]);
	else if (kind < t->n_kinds && kind < ISO_RES_MAX)
		snprintf(buf, size, "%s", t->model[kind]);
	else
		snprintf(buf, size, "kind%d", kind);
}

/* FNV-1a: names are short and chosen by admins, not adversarial keys. */
static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static void index_put(int *slots, int cap, const struct iso_tenancy *t, int acct)
{
	for (uint32_t i = name_hash(t->acct[acct].name) & (uint32_t)(cap - 1);;
	     i = (i + 1) & (uint32_t)(cap - 1))
		if (slots[i] == 0) {
			slots[i] = acct + 1;
			return;
		}
}

/* Rebuilds the name index at a size for n accounts; on failure the index is
 * dropped and lookups scan (slower, still right). */
static int index_rebuild(struct iso_tenancy *t, int n)
{
	int cap = 64;

	while (cap < 2 * n)
		cap *= 2;
	int *slots = calloc((size_t)cap, sizeof(*slots));
	free(t->by_name);
	t->by_name = slots;
	t->by_name_cap = slots ? cap : 0;
	if (!slots)
		return -ENOMEM;
	for (int i = 0; i < t->n_accounts; i++)
		index_put(slots, cap, t, i);
	return 0;
}

int iso_tenancy_find(const struct iso_tenancy *t, const char *name)
{
	if (!t->by_name) {
		for (int i = 0; i < t->n_accounts; i++)
			if (strcmp(t->acct[i].name, name) == 0)
				return i;
		return -1;
	}
	for (uint32_t i = name_hash(name) & (uint32_t)(t->by_name_cap - 1);;
	     i = (i + 1) & (uint32_t)(t->by_name_cap - 1)) {
		int a = t->by_name[i] - 1;
		if (a < 0)
			return -1;
		if (strcmp(t->acct[a].name, name) == 0)
			return a;
	}
}

int iso_tenancy_rename(struct iso_tenancy *t, int acct, const char *name)
{
	if (acct < 0 || acct >= t->n_accounts)
		return -EINVAL;
	iso_strlcpy(t->acct[acct].name, name, sizeof(t->acct[acct].name));
	return index_rebuild(t, t->n_accounts); /* open addressing: no cheap delete */
}

/* Account names: object names, and the controller's own forms ("-" for
 * the implicit organisation, "tenant/project" for projects). */
static bool account_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n >= ISO_NAME_MAX)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-' || *p == '/'))
			return false;
	return true;
}

int iso_tenancy_add(struct iso_tenancy *t, const char *name, enum iso_acct_level level, int parent,
                    double shares, struct iso_error *err)
{
	struct iso_account *a;
	int i;

	if (!name || !account_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, "name", "invalid account name '%s'",
		                     name ? name : "(null)");
	if (parent < 0 || parent >= t->n_accounts || level <= ISO_ACCT_ROOT ||
	    level > ISO_ACCT_PROJECT || t->acct[parent].level != level - 1)
		return iso_error_set(err, ISO_E_INVALID, "parent", "a %s must sit below a %s",
		                     iso_acct_level_name(level),
		                     level > ISO_ACCT_ROOT ? iso_acct_level_name(level - 1) : "?");
	if (!(shares > 0) || shares > 1e9)
		return iso_error_set(err, ISO_E_INVALID, "shares", "shares of %s must be positive",
		                     name);
	if (iso_tenancy_find(t, name) >= 0)
		return iso_error_set(err, ISO_E_CONFLICT, "name", "account %s exists", name);
	if (t->n_accounts == t->cap_accounts) {
		int cap = 2 * t->cap_accounts;
		struct iso_account *n = realloc(t->acct, (size_t)cap * sizeof(*n));
		if (!n)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		t->acct = n;
		t->cap_accounts = cap;
	}
	i = t->n_accounts++;
	a = &t->acct[i];
	memset(a, 0, sizeof(*a));
	iso_strlcpy(a->name, name, sizeof(a->name));
	a->level = level;
	a->parent = parent;
	a->first_child = a->next_sibling = -1;
	a->shares = shares;
	quota_unset(a);
	if (2 * t->n_accounts > t->by_name_cap)
		index_rebuild(t, t->n_accounts);
	else
		index_put(t->by_name, t->by_name_cap, t, i);
	/* Append, so that children keep insertion order. */
	if (t->acct[parent].first_child < 0) {
		t->acct[parent].first_child = i;
	} else {
		int c = t->acct[parent].first_child;
		while (t->acct[c].next_sibling >= 0)
			c = t->acct[c].next_sibling;
		t->acct[c].next_sibling = i;
	}
	return i;
}

int tn_tenant_of(const struct iso_tenancy *t, int acct)
{
	int best = acct;

	for (int x = acct; x > 0; x = t->acct[x].parent) {
		if (t->acct[x].level == ISO_ACCT_TENANT)
			return x;
		best = x;
	}
	return best;
}

static int64_t children_guaranteed(const struct iso_tenancy *t, int p, int kind, int except)
{
	int64_t s = 0;

	for (int c = t->acct[p].first_child; c >= 0; c = t->acct[c].next_sibling)
		if (c != except)
			s = tn_add_sat(s, t->acct[c].q[kind].guaranteed);
	return s;
}

int iso_tenancy_set_quota(struct iso_tenancy *t, int acct, int kind, struct iso_quota q,
                          struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX], kf[ISO_RES_MODEL_MAX], label[64];
	const struct iso_account *a;
	int p;

	if (acct < 0 || acct >= t->n_accounts)
		return iso_error_set(err, ISO_E_INVALID, "account", "no account %d", acct);
	if (kind < 0 || kind >= t->n_kinds)
		return iso_error_set(err, ISO_E_INVALID, "kind", "no resource kind %d", kind);
	a = &t->acct[acct];
	p = a->parent;
	kind_field(t, kind, kf, sizeof(kf));
	iso_tenancy_kind_label(t, kind, label, sizeof(label));
	snprintf(field, sizeof(field), "quota.%s.%s", a->name, kf);
	if (q.guaranteed < 0 || q.borrow_limit < 0 || q.lend_limit < 0)
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s %s: limits must not be negative",
		                     iso_acct_level_name(a->level), a->name);
	if (p >= 0 && t->acct[p].q[kind].guaranteed != ISO_QUOTA_NONE) {
		int64_t pg = t->acct[p].q[kind].guaranteed;
		int64_t sum = tn_add_sat(children_guaranteed(t, p, kind, acct), q.guaranteed);

		if (sum > pg)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s %s: %s: guarantees of the %ss under %s %s would "
			                     "add up to %lld, more than its guaranteed %lld",
			                     iso_acct_level_name(a->level), a->name, label,
			                     iso_acct_level_name(a->level),
			                     iso_acct_level_name(t->acct[p].level), t->acct[p].name,
			                     (long long)sum, (long long)pg);
	}
	if (q.guaranteed != ISO_QUOTA_NONE && children_guaranteed(t, acct, kind, -1) > q.guaranteed)
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s %s: %s: guaranteed %lld is less than its children's "
		                     "guarantees, %lld",
		                     iso_acct_level_name(a->level), a->name, label,
		                     (long long)q.guaranteed,
		                     (long long)children_guaranteed(t, acct, kind, -1));
	t->acct[acct].q[kind] = q;
	return 0;
}

/* What the cohort under `p` can lend to `x` now: siblings' unused
 * guarantees up to their lending limits, the parent's unassigned
 * guarantee and what the parent may borrow above it, less what the other
 * siblings already borrow. */
static int64_t cohort_available(const struct iso_tenancy *t, int x, int kind, int64_t *lendable,
                                int64_t *borrowed)
{
	const struct iso_account *pa = &t->acct[t->acct[x].parent];
	int64_t lend = 0, borrow = 0, unassigned, upward;

	for (int c = pa->first_child; c >= 0; c = t->acct[c].next_sibling) {
		const struct iso_quota *q = &t->acct[c].q[kind];
		int64_t u = t->acct[c].used.v[kind];

		if (c == x)
			continue;
		lend = tn_add_sat(lend, tn_min(q->lend_limit, tn_max0(q->guaranteed - u)));
		borrow += tn_max0(u - q->guaranteed);
	}
	if (pa->q[kind].guaranteed == ISO_QUOTA_NONE)
		unassigned = ISO_QUOTA_NONE;
	else
		unassigned = tn_max0(pa->q[kind].guaranteed -
		                     children_guaranteed(t, t->acct[x].parent, kind, -1));
	/* The parent's own borrowing is checked at the parent's level. */
	upward = pa->level == ISO_ACCT_ROOT ? 0 : pa->q[kind].borrow_limit;
	*lendable = lend;
	*borrowed = borrow;
	return tn_add_sat(tn_add_sat(lend, unassigned), upward);
}

/* The hard limit of account x for one kind. */
static int hard_limit(const struct iso_tenancy *t, int x, int kind, int64_t r,
                      struct iso_error *err)
{
	const struct iso_account *a = &t->acct[x];
	const struct iso_quota *q = &a->q[kind];
	int64_t used = a->used.v[kind];
	char field[ISO_ERR_FIELD_MAX], kf[ISO_RES_MODEL_MAX], label[64];

	if (q->guaranteed == ISO_QUOTA_NONE || q->borrow_limit == ISO_QUOTA_NONE ||
	    used + r <= tn_add_sat(q->guaranteed, q->borrow_limit))
		return 0;
	kind_field(t, kind, kf, sizeof(kf));
	iso_tenancy_kind_label(t, kind, label, sizeof(label));
	snprintf(field, sizeof(field), "quota.%s.%s", a->name, kf);
	return iso_error_set(err, ISO_E_NO_CAPACITY, field,
	                     "%s %s: %s: request %lld + in use %lld exceeds guaranteed %lld + "
	                     "borrowing limit %lld",
	                     iso_acct_level_name(a->level), a->name, label, (long long)r,
	                     (long long)used, (long long)q->guaranteed, (long long)q->borrow_limit);
}

/* Is what x would borrow idle in its cohort? */
static int cohort_check(const struct iso_tenancy *t, int x, int kind, int64_t r,
                        struct iso_error *err)
{
	const struct iso_account *a = &t->acct[x];
	const struct iso_quota *q = &a->q[kind];
	int64_t used = a->used.v[kind], after = used + r, lendable, borrowed, avail;
	char field[ISO_ERR_FIELD_MAX], kf[ISO_RES_MODEL_MAX], label[64];

	/* Only new borrowing must be idle: what x already borrows was admitted. */
	if (tn_max0(after - q->guaranteed) <= tn_max0(used - q->guaranteed))
		return 0;
	avail = cohort_available(t, x, kind, &lendable, &borrowed);
	if (avail == ISO_QUOTA_NONE || tn_max0(after - q->guaranteed) + borrowed <= avail)
		return 0;
	kind_field(t, kind, kf, sizeof(kf));
	iso_tenancy_kind_label(t, kind, label, sizeof(label));
	snprintf(field, sizeof(field), "quota.%s.%s", a->name, kf);
	/* A project's cohort is its own tenant's projects: the figures are the
	 * tenant's own. A tenant's or an organisation's cohort is other
	 * tenants: what they leave idle or borrow is theirs to know, and this
	 * message reaches the tenant (as its allocation's reason). */
	if (a->level < ISO_ACCT_PROJECT)
		return iso_error_set(err, ISO_E_NO_CAPACITY, field,
		                     "%s %s: %s: request %lld + in use %lld exceeds guaranteed %lld, "
		                     "and the rest is not idle to borrow now",
		                     iso_acct_level_name(a->level), a->name, label, (long long)r,
		                     (long long)used, (long long)q->guaranteed);
	return iso_error_set(err, ISO_E_NO_CAPACITY, field,
	                     "%s %s: %s: request %lld + in use %lld exceeds guaranteed %lld and "
	                     "its cohort has only %lld idle to lend (%lld already borrowed)",
	                     iso_acct_level_name(a->level), a->name, label, (long long)r,
	                     (long long)used, (long long)q->guaranteed,
	                     (long long)tn_max0(avail - borrowed), (long long)borrowed);
}

int iso_tenancy_admit(const struct iso_tenancy *t, int acct, const struct iso_resvec *req,
                      struct iso_error *err)
{
	int (*const pass[2])(const struct iso_tenancy *, int, int, int64_t,
	                     struct iso_error *) = {hard_limit, cohort_check};

	if (acct <= 0 || acct >= t->n_accounts)
		return iso_error_set(err, ISO_E_INVALID, "account", "no account %d", acct);
	for (int k = 0; k < ISO_RES_MAX; k++)
		if (req->v[k] < 0 || (req->v[k] > 0 && k >= t->n_kinds))
			return iso_error_set(err, ISO_E_INVALID, "request",
			                     "invalid amount of resource kind %d", k);
	/* Hard limits first, at every level, then borrowing; bottom up, so
	 * the most specific limit is the one named. Once the request fits in
	 * an account's guarantee, the levels above need no check for that
	 * kind: guarantees nest, so what the ancestors lack there is lent to
	 * others and comes back by reclaim. */
	for (int p = 0; p < 2; p++)
		for (int k = 0; k < t->n_kinds; k++) {
			if (req->v[k] == 0)
				continue;
			for (int x = acct; x > 0; x = t->acct[x].parent) {
				const struct iso_account *a = &t->acct[x];
				int r = pass[p](t, x, k, req->v[k], err);

				if (r < 0)
					return r;
				if (a->q[k].guaranteed == ISO_QUOTA_NONE ||
				    a->used.v[k] + req->v[k] <= a->q[k].guaranteed)
					break;
			}
		}
	return 0;
}

void iso_tenancy_charge(struct iso_tenancy *t, int acct, const struct iso_resvec *r)
{
	for (int x = acct; x >= 0; x = t->acct[x].parent)
		for (int k = 0; k < ISO_RES_MAX; k++)
			t->acct[x].used.v[k] += r->v[k];
}

void iso_tenancy_release(struct iso_tenancy *t, int acct, const struct iso_resvec *r)
{
	for (int x = acct; x >= 0; x = t->acct[x].parent)
		for (int k = 0; k < ISO_RES_MAX; k++)
			t->acct[x].used.v[k] -= r->v[k];
}

bool iso_tenancy_borrowing(const struct iso_tenancy *t, int acct)
{
	const struct iso_account *a = &t->acct[acct];

	for (int k = 0; k < t->n_kinds; k++)
		if (a->q[k].guaranteed != ISO_QUOTA_NONE && a->used.v[k] > a->q[k].guaranteed)
			return true;
	return false;
}

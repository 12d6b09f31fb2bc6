/* queue.c: the pending queue and the running set, kept in memory and changed
 * one allocation at a time, so that nothing a tenant does costs the
 * controller thread O(queue) (docs/tenancy.md, "The queue"). Each leaf
 * account keeps its pending items sorted (priority, then submit time, then
 * id) and its running items; the fair-share order is the accounts in Fair
 * Tree rank order, each with its own items, so reading the first K items
 * costs O(accounts + K). Ranks move only as decayed usage moves, so they are
 * recomputed at most once a second, or when the tree grows. An item carries
 * its account and its charge (ctl_demand), computed once when it enters.
 *
 * The queue only decides: ctl_queue_plan says which items to try now (in
 * order, at most CTL_PLAN_MAX of them, with EASY backfill over a bounded
 * reservation profile) and which one is the blocked head; allocations.c
 * places them and tenancy's preemption acts for the head. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

#define PROFILE_SPANS   128  /* distinct end times the backfill profile keeps exactly */
#define RANK_REFRESH_MS 1000 /* how stale the cached Fair Tree ranks may be */

struct qitem {
	char id[ISO_ID_MAX];
	int64_t tenant_id;
	char owner[ISO_NAME_MAX + 8];
	int priority;
	int64_t submit_ms, duration_ms;
	struct iso_resvec req;
};

struct qlist {
	struct qitem *v;
	int n, cap;
};

struct rlist {
	struct iso_running *v;
	int n, cap;
	int n_exclusive; /* of them, with an exclusive isolation class */
};

struct ctl_queue {
	int n_acct;             /* accounts the per-account arrays cover */
	struct qlist *pending;  /* [account], sorted by qitem_cmp */
	struct rlist *running;  /* [account], unordered */
	int n_pending, n_running;
	int *rank;              /* [account]: Fair Tree rank, -1 for inner accounts */
	int *by_rank;           /* leaf accounts, best first */
	int n_by_rank;
	int64_t ranked_ms;
	int ranked_accounts;
};

/* ---- lifetime ---- */

static int ensure_accounts(struct ctl_queue *q, int n)
{
	if (n <= q->n_acct)
		return 0;
	int cap = n > 2 * q->n_acct ? n : 2 * q->n_acct;
	struct qlist *p = realloc(q->pending, (size_t)cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	q->pending = p;
	struct rlist *r = realloc(q->running, (size_t)cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	q->running = r;
	memset(&q->pending[q->n_acct], 0, (size_t)(cap - q->n_acct) * sizeof(*p));
	memset(&q->running[q->n_acct], 0, (size_t)(cap - q->n_acct) * sizeof(*r));
	q->n_acct = cap;
	return 0;
}

int ctl_queue_open(struct iso_controller *c, struct iso_error *err)
{
	c->pending = calloc(1, sizeof(*c->pending));
	if (!c->pending)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	return 0;
}

void ctl_queue_close(struct iso_controller *c)
{
	struct ctl_queue *q = c->pending;

	if (!q)
		return;
	for (int i = 0; i < q->n_acct; i++) {
		free(q->pending[i].v);
		free(q->running[i].v);
	}
	free(q->pending);
	free(q->running);
	free(q->rank);
	free(q->by_rank);
	free(q);
	c->pending = NULL;
}

/* ---- pending items ---- */

static int qitem_cmp(const struct qitem *a, const struct qitem *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->submit_ms != b->submit_ms)
		return a->submit_ms < b->submit_ms ? -1 : 1;
	return strcmp(a->id, b->id);
}

/* The item's index in its (sorted) list, or where it would go. */
static int qlist_search(const struct qlist *l, const struct qitem *key, bool *found)
{
	int lo = 0, hi = l->n;

	*found = false;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2, cmp = qitem_cmp(&l->v[mid], key);
		if (cmp == 0) {
			*found = true;
			return mid;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void qitem_of(const struct iso_controller *c, const struct iso_allocation *a,
                     struct qitem *it)
{
	memset(it, 0, sizeof(*it));
	iso_strlcpy(it->id, a->id, sizeof(it->id));
	it->tenant_id = a->tenant_id;
	iso_strlcpy(it->owner, a->owner, sizeof(it->owner));
	it->priority = a->priority;
	it->submit_ms = a->created_ms;
	it->duration_ms = a->duration_ms;
	ctl_demand(c, a, &it->req);
}

static int leaf_of(struct iso_controller *c, const struct iso_allocation *a)
{
	int acct = ctl_tenancy_account_of(c, a);

	return acct > 0 ? acct : ctl_tenancy_default_org(c);
}

int ctl_queue_add(struct iso_controller *c, const struct iso_allocation *a)
{
	struct ctl_queue *q = c->pending;
	int acct = leaf_of(c, a), at;
	struct qitem it;
	struct qlist *l;
	bool found;

	if (ensure_accounts(q, acct + 1) < 0)
		return -ENOMEM;
	qitem_of(c, a, &it);
	l = &q->pending[acct];
	at = qlist_search(l, &it, &found);
	if (found)
		return 0;
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 4;
		struct qitem *v = realloc(l->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	memmove(&l->v[at + 1], &l->v[at], (size_t)(l->n - at) * sizeof(*l->v));
	l->v[at] = it;
	l->n++;
	q->n_pending++;
	return 0;
}

void ctl_queue_remove(struct iso_controller *c, const struct iso_allocation *a)
{
	struct ctl_queue *q = c->pending;
	int acct = leaf_of(c, a), at;
	struct qitem key;
	struct qlist *l;
	bool found;

	if (acct >= q->n_acct)
		return;
	memset(&key, 0, sizeof(key));
	iso_strlcpy(key.id, a->id, sizeof(key.id));
	key.priority = a->priority;
	key.submit_ms = a->created_ms;
	l = &q->pending[acct];
	at = qlist_search(l, &key, &found);
	if (!found)
		return;
	memmove(&l->v[at], &l->v[at + 1], (size_t)(l->n - at - 1) * sizeof(*l->v));
	l->n--;
	q->n_pending--;
}

/* ---- running items ---- */

static int rlist_find(const struct rlist *l, const char *id)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->v[i].id, id) == 0)
			return i;
	return -1;
}

int ctl_queue_running_set(struct iso_controller *c, const struct iso_allocation *a, bool holds)
{
	struct ctl_queue *q = c->pending;
	int acct = leaf_of(c, a), at;
	struct rlist *l;

	if (ensure_accounts(q, acct + 1) < 0)
		return -ENOMEM;
	l = &q->running[acct];
	at = rlist_find(l, a->id);
	bool exclusive = ctl_alloc_isolation(a) != ISO_ISOLATION_SHARED;

	if (!holds) {
		if (at >= 0) {
			l->v[at] = l->v[--l->n];
			q->n_running--;
			l->n_exclusive -= exclusive;
		}
		return 0;
	}
	if (at < 0) {
		if (l->n == l->cap) {
			int cap = l->cap ? 2 * l->cap : 4;
			struct iso_running *v = realloc(l->v, (size_t)cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			l->v = v;
			l->cap = cap;
		}
		at = l->n++;
		q->n_running++;
		l->n_exclusive += exclusive;
	}
	struct iso_running *x = &l->v[at];
	memset(x, 0, sizeof(*x));
	iso_strlcpy(x->id, a->id, sizeof(x->id));
	x->acct = acct;
	x->priority = a->priority;
	x->start_ms = a->started_ms > 0 ? a->started_ms : a->updated_ms;
	x->end_ms = a->duration_ms > 0 ? x->start_ms + a->duration_ms : INT64_MAX;
	x->fail_on_preempt = a->fail_on_preempt;
	ctl_demand(c, a, &x->use);
	return 0;
}

/* ---- counts, for the per-tenant limits ---- */

void ctl_queue_tenant_counts(const struct iso_controller *c, int tenant_acct, int *pending,
                             int *live, int *exclusive)
{
	const struct ctl_queue *q = c->pending;
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	int n_excl = 0;

	*pending = *live = 0;
	if (tenant_acct > 0) {
		/* The tenant's own account and its projects: at most 256. */
		for (int x = tenant_acct; x >= 0;) {
			if (x < q->n_acct) {
				*pending += q->pending[x].n;
				*live += q->running[x].n;
				n_excl += q->running[x].n_exclusive;
			}
			x = x == tenant_acct ? t->acct[x].first_child : t->acct[x].next_sibling;
		}
	}
	if (exclusive)
		*exclusive = n_excl;
}

int ctl_queue_size(const struct iso_controller *c)
{
	return c->pending->n_pending;
}

/* ---- order ---- */

static int refresh_ranks(struct iso_controller *c, bool force)
{
	struct ctl_queue *q = c->pending;
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	int64_t now = iso_now_ms();
	int n = t->n_accounts;

	if (!force && q->rank && q->ranked_accounts == n && now - q->ranked_ms < RANK_REFRESH_MS &&
	    now >= q->ranked_ms)
		return 0;
	int *rank = realloc(q->rank, (size_t)n * sizeof(*rank));
	if (!rank)
		return -ENOMEM;
	q->rank = rank;
	int *by = realloc(q->by_rank, (size_t)n * sizeof(*by));
	if (!by)
		return -ENOMEM;
	q->by_rank = by;
	ctl_tenancy_accrue(c);
	for (int i = 0; i < n; i++)
		rank[i] = -1;
	if (iso_fairshare_rank(t, rank, NULL) < 0)
		return -ENOMEM;
	/* Ranks are a preorder numbering: invert them for the leaves. */
	for (int i = 0; i < n; i++)
		by[i] = -1;
	for (int i = 1; i < n; i++)
		if (rank[i] >= 0 && rank[i] < n && t->acct[i].first_child < 0)
			by[rank[i]] = i;
	q->n_by_rank = 0;
	for (int i = 0; i < n; i++)
		if (by[i] >= 0)
			by[q->n_by_rank++] = by[i];
	/* A leaf without a rank (the implicit organisation with no tenants)
	 * goes last. */
	int dflt = ctl_tenancy_default_org(c);
	if (t->acct[dflt].first_child >= 0 || rank[dflt] < 0)
		by[q->n_by_rank++] = dflt;
	q->ranked_ms = now;
	q->ranked_accounts = n;
	return 0;
}

/* Walks the pending items in fair-share order: (*ai, *ii) is the cursor,
 * (0, 0) to start; returns the next item or NULL at the end. */
static const struct qitem *next_item(const struct ctl_queue *q, int *ai, int *ii, int *acct)
{
	while (*ai < q->n_by_rank) {
		int a = q->by_rank[*ai];
		if (a < q->n_acct && *ii < q->pending[a].n) {
			*acct = a;
			return &q->pending[a].v[(*ii)++];
		}
		(*ai)++;
		*ii = 0;
	}
	return NULL;
}

static int end_cmp(const void *x, const void *y)
{
	const struct iso_running *a = x, *b = y;

	return (a->end_ms > b->end_ms) - (a->end_ms < b->end_ms);
}

/* The running work as a bounded reservation profile: the PROFILE_SPANS
 * earliest-ending items as they are, everything after them merged into one
 * item that never ends. Merging can only make the profile fuller, so a
 * backfilled item still never delays the head; it may wait a little longer
 * than an exact profile would let it. */
static struct iso_running *profile_of(const struct ctl_queue *q, int *n_out)
{
	struct iso_running *all = calloc((size_t)q->n_running + 1, sizeof(*all));
	int n = 0;

	if (!all)
		return NULL;
	for (int a = 0; a < q->n_acct; a++)
		for (int i = 0; i < q->running[a].n && n < q->n_running; i++)
			all[n++] = q->running[a].v[i];
	if (n > PROFILE_SPANS) {
		struct iso_running *rest = &all[PROFILE_SPANS];
		qsort(all, (size_t)n, sizeof(*all), end_cmp);
		for (int i = PROFILE_SPANS + 1; i < n; i++)
			for (int k = 0; k < ISO_RES_MAX; k++)
				rest->use.v[k] += all[i].use.v[k];
		rest->end_ms = INT64_MAX;
		n = PROFILE_SPANS + 1;
	}
	*n_out = n;
	return all;
}

int ctl_queue_plan(struct iso_controller *c, struct ctl_queue_plan *plan)
{
	struct ctl_queue *q = c->pending;
	struct iso_pending items[CTL_PLAN_MAX];
	struct iso_queue_entry order[CTL_PLAN_MAX];
	bool start[CTL_PLAN_MAX];
	int64_t head_start = -1;
	int ai = 0, ii = 0, acct = 0, n = 0, n_prof = 0;
	const struct qitem *it;
	struct iso_error err = {0};

	memset(plan, 0, sizeof(*plan));
	if (q->n_pending == 0)
		return 0;
	if (refresh_ranks(c, false) < 0)
		return -ENOMEM;
	while (n < CTL_PLAN_MAX && (it = next_item(q, &ai, &ii, &acct))) {
		struct iso_pending *p = &items[n];
		memset(p, 0, sizeof(*p));
		iso_strlcpy(p->id, it->id, sizeof(p->id));
		p->acct = acct;
		p->priority = it->priority;
		p->submit_ms = it->submit_ms;
		p->duration_ms = it->duration_ms;
		p->req = it->req;
		order[n] = (struct iso_queue_entry){.item = n, .position = n + 1};
		n++;
	}
	/* More wait only if the walk stopped at the depth with an item left. */
	plan->more = n == CTL_PLAN_MAX && next_item(q, &ai, &ii, &acct) != NULL;
	_cleanup_free_ struct iso_running *prof = profile_of(q, &n_prof);
	if (!prof || iso_backfill_plan(&ctl_tenancy_tree(c)->capacity, prof, n_prof, items, order,
	                               n, iso_now_ms(), start, &head_start, &err) < 0)
		for (int i = 0; i < n; i++)
			start[i] = true; /* without a plan: strict order, every item tried */
	for (int i = 0; i < n; i++) {
		iso_strlcpy(plan->item[i].id, items[i].id, sizeof(plan->item[i].id));
		plan->item[i].start = start[i];
	}
	plan->n = n;
	return 0;
}

bool ctl_queue_is_head(struct iso_controller *c, const struct iso_allocation *a)
{
	struct ctl_queue *q = c->pending;
	int ai = 0, ii = 0, acct = 0;
	const struct qitem *it;

	if (refresh_ranks(c, false) < 0)
		return false;
	it = next_item(q, &ai, &ii, &acct);
	return it && strcmp(it->id, a->id) == 0;
}

/* All running work, for preemption: O(live), only for the blocked head. */
struct iso_running *ctl_queue_running(struct iso_controller *c, int *n)
{
	struct ctl_queue *q = c->pending;
	struct iso_running *all = calloc((size_t)q->n_running + 1, sizeof(*all));

	*n = 0;
	if (!all)
		return NULL;
	for (int a = 0; a < q->n_acct; a++)
		for (int i = 0; i < q->running[a].n && *n < q->n_running; i++)
			all[(*n)++] = q->running[a].v[i];
	return all;
}

/* ---- the view ---- */

int ctl_queue_view(struct iso_controller *c, const struct iso_principal *p, int limit,
                   int after, struct ctl_queue_view *out, int *n, bool *more)
{
	struct ctl_queue *q = c->pending;
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	int ai = 0, ii = 0, acct = 0, pos = 0, own_tenant = -1;
	const struct qitem *it;
	enum ctl_scope scope = ctl_scope_of(p, "queue.read");
	bool cluster = scope == CTL_SCOPE_ALL;

	*n = 0;
	*more = false;
	if (refresh_ranks(c, false) < 0)
		return -ENOMEM;
	if (!cluster && scope != CTL_SCOPE_TENANT && scope != CTL_SCOPE_OWN)
		return 0;
	if (!cluster) {
		own_tenant = iso_tenancy_find(t, p->tenant);
		if (own_tenant <= 0)
			return 0;
	}
	/* A tenant's view walks only its own accounts (in the order they rank)
	 * and numbers only its own items: it learns nothing of the others. */
	while ((it = next_item(q, &ai, &ii, &acct))) {
		if (!cluster) {
			int x = acct;
			while (x > 0 && x != own_tenant)
				x = t->acct[x].parent;
			if (x != own_tenant) {
				ai++;
				ii = 0;
				continue;
			}
			if (it->tenant_id != p->tenant_id)
				continue;
			if (scope == CTL_SCOPE_OWN && strcmp(it->owner, p->owner) != 0)
				continue;
		}
		pos++;
		if (pos <= after)
			continue;
		if (*n == limit) {
			*more = true;
			break;
		}
		out[*n].position = pos;
		out[*n].acct = acct;
		iso_strlcpy(out[*n].id, it->id, sizeof(out[*n].id));
		(*n)++;
	}
	return 0;
}

/* preempt.c: which running work gives way, and how. Only two reasons are
 * legitimate: a lender reclaiming capacity it lent (victims are work that
 * other tenants run above their guarantees), or a tenant's own priorities.
 * The victim set is the minimal one (fewest victims, then least run time
 * lost, then smallest ids) found by an exact branch-and-bound search, so
 * the same state always loses the same work and never more than needed.
 * The result is data: when to signal, when to kill, requeue or fail. */
#include <errno.h>
#include <string.h>

#include "tenancy/internal.h"

#define MAX_CANDIDATES 64
#define DEFAULT_BUDGET 2000000

/* Is running item i borrowed work: does it push its tenant above its
 * guarantee when the tenant's work is counted oldest first? */
static bool borrowed_work(const struct iso_tenancy *t, const struct iso_running *run, int n_run,
                          int i)
{
	int ten = tn_tenant_of(t, run[i].acct);
	const struct iso_account *a = &t->acct[ten];
	int64_t cum[ISO_RES_MAX] = {0};

	for (int j = 0; j < n_run; j++) {
		if (tn_tenant_of(t, run[j].acct) != ten)
			continue;
		if (run[j].start_ms < run[i].start_ms ||
		    (run[j].start_ms == run[i].start_ms && strcmp(run[j].id, run[i].id) <= 0))
			for (int k = 0; k < t->n_kinds; k++)
				cum[k] += run[j].use.v[k];
	}
	for (int k = 0; k < t->n_kinds; k++)
		if (run[i].use.v[k] > 0 && a->q[k].guaranteed != ISO_QUOTA_NONE &&
		    cum[k] > a->q[k].guaranteed)
			return true;
	return false;
}

bool iso_preempt_eligible(const struct iso_tenancy *t, enum iso_preempt_mode mode, int acct,
                          int priority, const struct iso_running *run, int n_run, int i,
                          const struct iso_preempt_params *p)
{
	int mine = tn_tenant_of(t, acct), theirs;

	if (run[i].acct <= 0 || run[i].acct >= t->n_accounts)
		return false;
	if (p->now_ms - run[i].start_ms < p->min_run_ms)
		return false;
	theirs = tn_tenant_of(t, run[i].acct);
	if (mode == ISO_PREEMPT_PRIORITY)
		return theirs == mine && run[i].priority < priority;
	return theirs != mine && borrowed_work(t, run, n_run, i);
}

struct search {
	const struct iso_running *run;
	const int *cand; /* sorted by id */
	int n, k_kinds, want;
	const int64_t *need;
	int64_t (*suffix)[ISO_RES_MAX]; /* sum of use from position j on */
	int64_t *min_lost_suffix;
	int64_t now;
	int pick[MAX_CANDIDATES], best[MAX_CANDIDATES];
	int64_t best_lost;
	bool found;
	int64_t nodes, budget;
};

static bool covers(const struct search *s, const int64_t *got)
{
	for (int k = 0; k < s->k_kinds; k++)
		if (got[k] < s->need[k])
			return false;
	return true;
}

/* Chooses s->want victims from positions >= from. */
static void dfs(struct search *s, int from, int depth, int64_t *got, int64_t lost)
{
	int left = s->want - depth;

	if (++s->nodes > s->budget)
		return;
	if (left == 0) {
		if (covers(s, got) && (!s->found || lost < s->best_lost)) {
			s->found = true;
			s->best_lost = lost;
			memcpy(s->best, s->pick, sizeof(int) * (size_t)s->want);
		}
		return;
	}
	for (int j = from; j <= s->n - left; j++) {
		const struct iso_running *r = &s->run[s->cand[j]];
		int64_t l = s->now - r->start_ms;
		bool reach = true;

		/* Even everything from j on cannot cover, or cannot beat the best. */
		for (int k = 0; k < s->k_kinds && reach; k++)
			reach = got[k] + s->suffix[j][k] >= s->need[k];
		if (!reach)
			return;
		if (s->found &&
		    lost + l + (int64_t)(left - 1) * s->min_lost_suffix[j] >= s->best_lost)
			continue;
		for (int k = 0; k < s->k_kinds; k++)
			got[k] += r->use.v[k];
		s->pick[depth] = s->cand[j];
		dfs(s, j + 1, depth + 1, got, lost + l);
		for (int k = 0; k < s->k_kinds; k++)
			got[k] -= r->use.v[k];
		if (s->nodes > s->budget)
			return;
	}
}

static int id_cmp(const void *pa, const void *pb, void *pr)
{
	const struct iso_running *run = pr;

	return strcmp(run[*(const int *)pa].id, run[*(const int *)pb].id);
}

/* Largest first by dominant need covered: the fallback when the budget runs out. */
static int greedy(const struct search *s, int *out)
{
	int64_t got[ISO_RES_MAX] = {0};
	bool used[MAX_CANDIDATES] = {false};
	int n = 0;

	while (!covers(s, got)) {
		int best = -1;
		int64_t best_gain = 0;

		for (int j = 0; j < s->n; j++) {
			int64_t gain = 0;
			if (used[j])
				continue;
			for (int k = 0; k < s->k_kinds; k++)
				gain += tn_min(s->run[s->cand[j]].use.v[k],
				               tn_max0(s->need[k] - got[k]));
			if (gain > best_gain) {
				best_gain = gain;
				best = j;
			}
		}
		if (best < 0)
			return -1;
		used[best] = true;
		out[n++] = s->cand[best];
		for (int k = 0; k < s->k_kinds; k++)
			got[k] += s->run[s->cand[best]].use.v[k];
	}
	return n;
}

static int no_cover(const struct iso_tenancy *t, const int64_t *need, const int64_t *have,
                    struct iso_error *err)
{
	char label[64];

	for (int k = 0; k < t->n_kinds; k++)
		if (have[k] < need[k]) {
			iso_tenancy_kind_label(t, k, label, sizeof(label));
			return iso_error_set(err, ISO_E_NO_CAPACITY, "preemption",
			                     "no eligible running work frees enough %s: need %lld, "
			                     "eligible work holds %lld",
			                     label, (long long)need[k], (long long)have[k]);
		}
	return iso_error_set(err, ISO_E_NO_CAPACITY, "preemption", "no eligible victim set");
}

int iso_preempt_choose(const struct iso_tenancy *t, enum iso_preempt_mode mode, int acct,
                       int priority, const struct iso_resvec *req, const struct iso_resvec *need,
                       const struct iso_running *run, int n_run, const struct iso_preempt_params *p,
                       struct iso_preempt_plan *plan, struct iso_error *err)
{
	int cand[MAX_CANDIDATES], n = 0, chosen[MAX_CANDIDATES], n_chosen = -1;
	int64_t suffix[MAX_CANDIDATES + 1][ISO_RES_MAX], min_lost[MAX_CANDIDATES + 1];
	int64_t have[ISO_RES_MAX] = {0}, got[ISO_RES_MAX] = {0}, need_v[ISO_RES_MAX] = {0};
	struct search s = {0};

	memset(plan, 0, sizeof(*plan));
	plan->exact = true;
	if (acct <= 0 || acct >= t->n_accounts)
		return iso_error_set(err, ISO_E_INVALID, "account", "no account %d", acct);
	for (int k = 0; k < t->n_kinds; k++)
		need_v[k] = tn_max0(need->v[k]);
	if (mode == ISO_PREEMPT_RECLAIM) {
		const struct iso_account *a = &t->acct[tn_tenant_of(t, acct)];
		char label[64];

		for (int k = 0; k < t->n_kinds; k++)
			if (req->v[k] > 0 && a->q[k].guaranteed != ISO_QUOTA_NONE &&
			    a->used.v[k] + req->v[k] > a->q[k].guaranteed) {
				iso_tenancy_kind_label(t, k, label, sizeof(label));
				return iso_error_set(err, ISO_E_NO_CAPACITY, "preemption",
				                     "%s %s: %s: request %lld + in use %lld "
				                     "exceeds guaranteed %lld: "
				                     "reclaim only takes back lent capacity",
				                     iso_acct_level_name(a->level), a->name, label,
				                     (long long)req->v[k], (long long)a->used.v[k],
				                     (long long)a->q[k].guaranteed);
			}
	}
	for (int i = 0; i < n_run; i++)
		if (iso_preempt_eligible(t, mode, acct, priority, run, n_run, i, p)) {
			if (n == MAX_CANDIDATES) {
				plan->exact = false; /* the rest are not considered */
				break;
			}
			cand[n++] = i;
		}
	qsort_r(cand, (size_t)n, sizeof(int), id_cmp, (void *)run);
	for (int j = 0; j < n; j++)
		for (int k = 0; k < t->n_kinds; k++)
			have[k] += run[cand[j]].use.v[k];
	for (int k = 0; k < t->n_kinds; k++)
		if (have[k] < need_v[k])
			return no_cover(t, need_v, have, err);

	memset(suffix[n], 0, sizeof(suffix[n]));
	min_lost[n] = INT64_MAX;
	for (int j = n - 1; j >= 0; j--) {
		int64_t l = p->now_ms - run[cand[j]].start_ms;
		for (int k = 0; k < ISO_RES_MAX; k++)
			suffix[j][k] = suffix[j + 1][k] + run[cand[j]].use.v[k];
		min_lost[j] = l < min_lost[j + 1] ? l : min_lost[j + 1];
	}
	s = (struct search){.run = run,
	                    .cand = cand,
	                    .n = n,
	                    .k_kinds = t->n_kinds,
	                    .need = need_v,
	                    .suffix = suffix,
	                    .min_lost_suffix = min_lost,
	                    .now = p->now_ms,
	                    .budget = p->max_nodes > 0 ? p->max_nodes : DEFAULT_BUDGET};
	if (covers(&s, got)) {
		n_chosen = 0;
	} else {
		for (int want = 1; want <= n && n_chosen < 0 && s.nodes <= s.budget; want++) {
			s.want = want;
			s.found = false;
			dfs(&s, 0, 0, got, 0);
			if (s.found && s.nodes <= s.budget) {
				n_chosen = want;
				memcpy(chosen, s.best, sizeof(int) * (size_t)want);
			}
		}
		if (n_chosen < 0) {
			plan->exact = false;
			n_chosen = greedy(&s, chosen);
			if (n_chosen < 0)
				return no_cover(t, need_v, have, err);
			qsort_r(chosen, (size_t)n_chosen, sizeof(int), id_cmp, (void *)run);
		}
	}
	plan->n = n_chosen;
	for (int j = 0; j < n_chosen; j++) {
		const struct iso_running *r = &run[chosen[j]];
		plan->v[j] = (struct iso_victim){.run = chosen[j],
		                                 .signal_at_ms = p->now_ms,
		                                 .kill_at_ms = p->now_ms + p->grace_ms,
		                                 .requeue = !r->fail_on_preempt};
		plan->lost_ms += p->now_ms - r->start_ms;
	}
	return 0;
}

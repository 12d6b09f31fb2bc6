/* preempt.c: taking capacity back for the blocked head of the queue
 * (docs/tenancy.md, "Preemption"). src/tenancy chooses the minimal victim
 * set (reclaim of lent capacity, or a tenant's own lower-priority work);
 * this file checks on the real geometry that the set would let the head
 * fit, signals the victims, and evicts them when their grace period ends
 * (ctl_preempt_tick). A victim's reason names the mode, never the
 * preemptor: that may be another tenant's, or a colleague's, allocation;
 * the audit log keeps who preempted whom for the operators. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/tenancy.h"

struct ctl_victim {
	char id[ISO_ID_MAX];
	char by[ISO_ID_MAX];
	int64_t kill_at_ms;
	bool requeue;
	bool reclaim; /* else priority */
};

struct ctl_preempt {
	int64_t min_run_ms, grace_ms;
	struct ctl_victim *victims; /* signalled, to be evicted at kill_at_ms */
	int n_victims, cap_victims;
};

int ctl_preempt_open(struct iso_controller *c, const struct iso_controller_params *params,
                     struct iso_error *err)
{
	c->preempt = calloc(1, sizeof(*c->preempt));
	if (!c->preempt)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->preempt->min_run_ms = params->preempt_min_run_ms;
	c->preempt->grace_ms = params->preempt_grace_ms;
	return 0;
}

void ctl_preempt_close(struct iso_controller *c)
{
	if (!c->preempt)
		return;
	free(c->preempt->victims);
	free(c->preempt);
	c->preempt = NULL;
}

static bool already_victim(const struct ctl_preempt *tn, const char *id)
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

void ctl_preempt_for(struct iso_controller *c, const struct iso_allocation *a)
{
	struct ctl_preempt *tn = c->preempt;
	int n_run = 0;
	_cleanup_free_ struct iso_running *run = ctl_queue_running(c, &n_run);
	struct iso_preempt_params pp = {
	    .now_ms = iso_now_ms(), .min_run_ms = tn->min_run_ms, .grace_ms = tn->grace_ms};
	struct iso_preempt_plan plan;
	struct iso_resvec req;
	struct iso_error err = {0};
	int acct = ctl_tenancy_account_of(c, a);
	enum iso_preempt_mode modes[] = {ISO_PREEMPT_RECLAIM, ISO_PREEMPT_PRIORITY};

	if (!run || acct < 0 || n_run <= 0)
		return;
	ctl_demand(c, a, &req);
	for (size_t m = 0; m < ISO_ARRAY_SIZE(modes); m++) {
		if (iso_preempt_choose(ctl_tenancy_tree(c), modes[m], acct, a->priority, &req, &req, run, n_run,
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
			nv->reclaim = modes[m] == ISO_PREEMPT_RECLAIM;
			ctl_alloc_signal_preempt(c, x->id, a->id,
			                         modes[m] == ISO_PREEMPT_RECLAIM ? "reclaim"
			                                                         : "priority",
			                         nv->kill_at_ms);
		}
		return;
	}
}

void ctl_preempt_tick(struct iso_controller *c)
{
	struct ctl_preempt *tn = c->preempt;
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
		if (ctl_alloc_evict_id(c, v.id, v.requeue, "allocation.preempt",
		                       v.reclaim ? "preempted (reclaim): its tenant was borrowing "
		                                   "capacity that another tenant's guarantee needs"
		                                 : "preempted (priority): higher-priority work of "
		                                   "its tenant needs the capacity",
		                       v.by, &err) < 0)
			iso_log(ISO_LOG_ERR, "preempt_failed", "id=%s error=\"%s\"", v.id,
			        err.message);
		else
			evicted = true;
	}
	if (evicted)
		ctl_place_pending(c);
}


/* replay.c: the trace in its own time. Every pod arrives at its
 * creation_time and leaves at its deletion_time. A pod that does not fit on
 * arrival waits in a FIFO queue, and the queue is retried in arrival order
 * whenever a departure frees capacity (a later pod may start before an
 * earlier one that still does not fit, as in the daemon); a pod still waiting
 * at its deletion_time is rejected. A pod placed late still leaves at its
 * deletion_time: the trace's times are wall-clock facts, not durations.
 * Events at the same second: departures first, then arrivals in trace
 * order, then departures of pods that arrived that same second (zero-length
 * pods). Reported: utilisation = the time-weighted share of compute (and
 * memory) slices allocated between the first arrival and the last
 * departure. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "sim/internal.h"

enum ev_kind { EV_DEPART = 0, EV_ARRIVE = 1, EV_DEPART_SAME = 2 };
enum pod_state { POD_FUTURE, POD_RUNNING, POD_QUEUED, POD_DONE };

struct event {
	int64_t t;
	int kind;
	int pod;
};

static int cmp_event(const void *a, const void *b)
{
	const struct event *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind - y->kind;
	return (x->pod > y->pod) - (x->pod < y->pod);
}

/* A request that failed during one pass over the queue: any later one of the
 * same GPU shape asking for at least as much CPU and memory fails too, since
 * the pass only ever takes capacity away (policies place whenever they find
 * room). Skipping those keeps a long queue cheap to retry. */
struct failed {
	const struct iso_sim_request *r;
};

struct replay {
	struct iso_sim *s;
	const struct sim_policy *p;
	const struct iso_placer *pl;
	bool *missed; /* per pod: Slurm's counts sent it where it did not fit */
	struct iso_sim_result *res;
	struct iso_error *err;
	struct iso_cluster_state cs;
	enum pod_state *state;
	struct iso_allocation **live; /* per pod, while running */
	int *queue, qn;
	struct failed *failed;
	int nf;
	int64_t alloc_c, alloc_m;
	double wait_sum;
};

static bool same_gpus(const struct iso_sim_request *a, const struct iso_sim_request *b)
{
	return a->shape.whole == b->shape.whole && a->shape.gpu_count == b->shape.gpu_count &&
	       a->profile == b->profile;
}

static bool known_to_fail(const struct replay *rp, const struct iso_sim_request *r)
{
	for (int k = 0; k < rp->nf; k++) {
		const struct iso_sim_request *f = rp->failed[k].r;
		if (same_gpus(f, r) && r->shape.cpus >= f->shape.cpus &&
		    r->shape.memory_mib >= f->shape.memory_mib)
			return true;
	}
	return false;
}

/* 1: placed, 0: no room, < 0: error. */
static int try_place(struct replay *rp, int pod)
{
	const struct iso_sim_request *req = &rp->s->req[pod];
	struct iso_allocation *a = calloc(1, sizeof(*a));
	struct iso_error e = {0};
	int r;

	if (!a)
		return iso_error_set(rp->err, ISO_E_INTERNAL, NULL, "out of memory");
	const int64_t misses = sim_policy_misses(rp->p);

	sim_alloc_init(a, req, pod);
	r = iso_placer_place(rp->pl, &rp->cs, a, 1, &e);
	if (sim_policy_misses(rp->p) > misses) {
		rp->res->requeues += sim_policy_misses(rp->p) - misses;
		if (!rp->missed[pod])
			rp->res->requeued++;
		rp->missed[pod] = true;
	}
	if (r < 0) {
		iso_allocation_clear(a);
		free(a);
		if (r == -ENOSPC)
			return 0;
		return iso_error_set(rp->err, e.code, e.field, "policy %s, pod %s (line %d): %s",
		                     rp->pl->name, rp->s->trace->v[pod].name,
		                     rp->s->trace->v[pod].line, e.message);
	}
	rp->live[pod] = a;
	rp->state[pod] = POD_RUNNING;
	rp->alloc_c += req->compute;
	rp->alloc_m += req->memory;
	rp->res->placed++;
	return 1;
}

static int retry_queue(struct replay *rp, int64_t now)
{
	int kept = 0, r;

	rp->nf = 0;
	for (int k = 0; k < rp->qn; k++) {
		const int pod = rp->queue[k];
		const struct iso_sim_request *req = &rp->s->req[pod];

		if (rp->state[pod] != POD_QUEUED)
			continue; /* rejected at its deletion_time */
		if (!known_to_fail(rp, req)) {
			r = try_place(rp, pod);
			if (r < 0)
				return r;
			if (r == 1) {
				rp->wait_sum += (double)(now - rp->s->trace->v[pod].creation);
				continue;
			}
			rp->failed[rp->nf++].r = req;
		}
		rp->queue[kept++] = pod;
	}
	rp->qn = kept;
	return 0;
}

static int handle(struct replay *rp, const struct event *ev)
{
	const int pod = ev->pod;
	int r;

	if (ev->kind == EV_ARRIVE) {
		r = try_place(rp, pod);
		if (r < 0)
			return r;
		if (r == 0) {
			rp->state[pod] = POD_QUEUED;
			rp->queue[rp->qn++] = pod;
			rp->res->queued++;
		}
		return 0;
	}
	if (rp->state[pod] == POD_QUEUED) {
		rp->state[pod] = POD_DONE;
		rp->res->rejected++;
		return 0;
	}
	if (rp->state[pod] != POD_RUNNING)
		return iso_error_set(rp->err, ISO_E_INTERNAL, NULL,
		                     "pod %d leaves before it arrives", pod);
	iso_cluster_state_give(&rp->cs, rp->live[pod]);
	iso_allocation_clear(rp->live[pod]);
	free(rp->live[pod]);
	rp->live[pod] = NULL;
	rp->state[pod] = POD_DONE;
	rp->alloc_c -= rp->s->req[pod].compute;
	rp->alloc_m -= rp->s->req[pod].memory;
	return rp->qn ? retry_queue(rp, ev->t) : 0;
}

int sim_run_replay(struct iso_sim *s, const struct sim_policy *policy, struct iso_sim_result *res,
                   struct iso_error *err)
{
	const int n = s->trace->n;
	const struct iso_placer *pl = policy->use;
	struct replay rp = {.s = s, .p = policy, .pl = pl, .res = res, .err = err};
	_cleanup_free_ struct event *ev = calloc((size_t)n * 2, sizeof(*ev));
	double area_c = 0, area_m = 0;
	int64_t t0, t_prev, held_c, held_m;
	int r = 0;

	/* The saturate measures do not apply. */
	res->alloc_ratio_at_100 = res->alloc_ratio_at_130 = NAN;
	res->mem_alloc_ratio_at_100 = res->mem_alloc_ratio_at_130 = NAN;
	res->requeue_share_at_100 = NAN;
	rp.state = calloc((size_t)n, sizeof(*rp.state));
	rp.missed = calloc((size_t)n, sizeof(*rp.missed));
	rp.live = calloc((size_t)n, sizeof(*rp.live)); /* NOLINT(bugprone-sizeof-expression) */
	rp.queue = calloc((size_t)n, sizeof(*rp.queue));
	rp.failed = calloc((size_t)n, sizeof(*rp.failed));
	if (!ev || !rp.state || !rp.missed || !rp.live || !rp.queue || !rp.failed) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	r = iso_cluster_state_init(&rp.cs, &s->cluster.inv);
	if (r < 0) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "cluster state: %s", strerror(-r));
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const struct iso_sim_pod *p = &s->trace->v[i];
		ev[(size_t)2 * i] = (struct event){p->creation, EV_ARRIVE, i};
		ev[(size_t)2 * i + 1] = (struct event){
		    p->deletion, p->deletion == p->creation ? EV_DEPART_SAME : EV_DEPART, i};
	}
	qsort(ev, (size_t)n * 2, sizeof(*ev), cmp_event);
	t0 = t_prev = ev[0].t;
	for (int k = 0; k < 2 * n; k++) {
		area_c += (double)rp.alloc_c * (double)(ev[k].t - t_prev);
		area_m += (double)rp.alloc_m * (double)(ev[k].t - t_prev);
		t_prev = ev[k].t;
		if (ev[k].kind == EV_ARRIVE) {
			res->pods++;
			if (s->req[ev[k].pod].shape.gpu_count == 0)
				res->cpu_only++;
		}
		r = handle(&rp, &ev[k]);
		if (r < 0)
			goto out_state;
	}
	sim_held_slices(&rp.cs, &held_c, &held_m);
	for (int i = 0; i < n; i++)
		if (rp.state[i] != POD_DONE)
			held_c += s->req[i].compute + 1; /* still running or waiting: a bug */
	if (held_c != 0 || held_m != 0 || rp.alloc_c != 0) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL,
		                  "policy %s: after the last departure the cluster is not empty "
		                  "(%lld compute, %lld memory slices held or waiting)",
		                  pl->name, (long long)held_c, (long long)held_m);
		goto out_state;
	}
	if (t_prev > t0) {
		res->utilisation = area_c / ((double)res->slices_total * (double)(t_prev - t0));
		res->mem_utilisation =
		    area_m / ((double)res->mem_slices_total * (double)(t_prev - t0));
	}
	if (res->placed > res->pods - res->queued)
		res->mean_wait_s = rp.wait_sum / (double)(res->placed - (res->pods - res->queued));

out_state:
	for (int i = 0; i < n; i++)
		if (rp.live[i]) {
			iso_allocation_clear(rp.live[i]);
			free(rp.live[i]);
		}
	iso_cluster_state_free(&rp.cs);
out:
	free(rp.state);
	free(rp.missed);
	free(rp.live);
	free(rp.queue);
	free(rp.failed);
	return r;
}

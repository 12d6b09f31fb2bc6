/* backfill.c: EASY backfill over the fair-share order. Running work and
 * expected end times give a reservation profile of free capacity; the
 * first item that cannot start now gets a reservation at the earliest time
 * the profile holds it for its whole duration, and a later, smaller item
 * may start now only if it fits beside that reservation for its whole
 * duration, so it can never delay the blocked head. Capacity is counted
 * per resource kind over the cluster (not per node): the placer may still
 * refuse an item that the profile admits, which then simply waits. */
#include <errno.h>
#include <string.h>

#include "tenancy/internal.h"

#define FOREVER (INT64_MAX / 4) /* duration of work with no estimate */

struct span {
	int64_t start, end;
	const struct iso_resvec *use;
};

struct profile {
	struct span *s;
	int n;
	const struct iso_resvec *cap;
};

static bool fits_at(const struct profile *p, int64_t t, const struct iso_resvec *req)
{
	for (int k = 0; k < ISO_RES_MAX; k++) {
		int64_t used = 0;

		if (req->v[k] == 0)
			continue;
		for (int i = 0; i < p->n; i++)
			if (p->s[i].start <= t && t < p->s[i].end)
				used += p->s[i].use->v[k];
		if (used + req->v[k] > p->cap->v[k])
			return false;
	}
	return true;
}

/* Free capacity only changes where a span starts or ends. */
static bool fits_over(const struct profile *p, int64_t a, int64_t b, const struct iso_resvec *req)
{
	if (!fits_at(p, a, req))
		return false;
	for (int i = 0; i < p->n; i++) {
		if (p->s[i].start > a && p->s[i].start < b && !fits_at(p, p->s[i].start, req))
			return false;
		if (p->s[i].end > a && p->s[i].end < b && !fits_at(p, p->s[i].end, req))
			return false;
	}
	return true;
}

static bool ever_fits(const struct iso_resvec *cap, const struct iso_resvec *req)
{
	for (int k = 0; k < ISO_RES_MAX; k++)
		if (req->v[k] > cap->v[k] || req->v[k] < 0)
			return false;
	return true;
}

/* a + b, saturating: "forever" is INT64_MAX for callers and FOREVER here. */
static int64_t add_sat(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

int iso_backfill_plan(const struct iso_resvec *capacity, const struct iso_running *run, int n_run,
                      const struct iso_pending *items, const struct iso_queue_entry *order, int n,
                      int64_t now_ms, bool *start, int64_t *head_start_ms, struct iso_error *err)
{
	_cleanup_free_ struct span *spans = calloc((size_t)(n_run + n + 1), sizeof(*spans));
	struct profile p = {.s = spans, .cap = capacity};
	int head = -1;

	*head_start_ms = -1;
	if (!spans)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < n; i++)
		start[i] = false;
	for (int i = 0; i < n_run; i++) /* overdue work still holds its resources now */
		spans[p.n++] =
		    (struct span){.start = now_ms,
		                  .end = run[i].end_ms > now_ms ? run[i].end_ms : now_ms + 1,
		                  .use = &run[i].use};
	for (int q = 0; q < n; q++) {
		int it = order[q].item;
		const struct iso_pending *x;
		int64_t dur;

		if (it < 0 || it >= n)
			return iso_error_set(err, ISO_E_INVALID, "order", "bad queue entry %d", q);
		x = &items[it];
		dur = x->duration_ms > 0 ? x->duration_ms : FOREVER;
		if (!ever_fits(capacity, &x->req))
			continue; /* can never run: must not hold up the queue */
		if (fits_over(&p, now_ms, add_sat(now_ms, dur), &x->req)) {
			start[it] = true;
			spans[p.n++] = (struct span){now_ms, add_sat(now_ms, dur), &x->req};
			continue;
		}
		if (head >= 0)
			continue;
		/* The head: its earliest start is now or when some span ends. */
		int64_t best = -1;
		for (int i = 0; i < p.n; i++) {
			int64_t t = spans[i].end;
			if (t > now_ms && t < INT64_MAX && (best < 0 || t < best) &&
			    fits_over(&p, t, add_sat(t, dur), &x->req))
				best = t;
		}
		if (best < 0)
			continue;
		head = it;
		*head_start_ms = best;
		spans[p.n++] = (struct span){best, add_sat(best, dur), &x->req};
	}
	return 0;
}

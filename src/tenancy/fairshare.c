/* fairshare.c: the order of the pending queue. Usage decays with a
 * half-life and is measured by its dominant share across resource kinds
 * (GPU slices weighted per model, so an H100 slice is not a T4 slice);
 * siblings are ranked by Slurm's Fair Tree level fair share and the tree is
 * walked depth first, which guarantees that when an account ranks above a
 * sibling, everything under it ranks above everything under the sibling.
 * Everything is a function of the timestamps and the tree, so the same
 * history always gives the same order. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "tenancy/internal.h"

int iso_fairshare_accrue(struct iso_tenancy *t, int64_t now_ms)
{
	const double h = (double)t->half_life_ms;

	for (int i = 0; i < t->n_accounts; i++) {
		struct iso_account *a = &t->acct[i];
		int64_t dt = now_ms - a->decayed_at_ms;
		double d, gain;

		if (dt < 0)
			return -EINVAL;
		if (dt == 0)
			continue;
		d = exp2(-(double)dt / h);
		gain = h / M_LN2 * (1.0 - d); /* integral of the decay over dt */
		for (int k = 0; k < t->n_kinds; k++)
			a->decayed[k] = a->decayed[k] * d + (double)a->used.v[k] * gain;
		a->decayed_at_ms = now_ms;
	}
	return 0;
}

void iso_fairshare_add(struct iso_tenancy *t, int acct, const struct iso_resvec *r, double ms)
{
	for (int x = acct; x >= 0; x = t->acct[x].parent)
		for (int k = 0; k < t->n_kinds; k++)
			t->acct[x].decayed[k] += (double)r->v[k] * ms;
}

double iso_fairshare_dominant(const struct iso_tenancy *t, const double *u)
{
	double gpu = 0, gcap = 0, best = 0;

	/* A whole GPU's value is model_weight[ISO_RES_GPUS] slices of weight 1. */
	gpu += t->model_weight[ISO_RES_GPUS] * u[ISO_RES_GPUS];
	gcap += t->model_weight[ISO_RES_GPUS] * (double)t->capacity.v[ISO_RES_GPUS];
	for (int k = ISO_RES_FIRST_MODEL; k < t->n_kinds; k++) {
		gpu += t->model_weight[k] * u[k];
		gcap += t->model_weight[k] * (double)t->capacity.v[k];
	}
	if (gcap > 0)
		best = gpu / gcap;
	for (int k = ISO_RES_CPUS; k <= ISO_RES_NODES; k++)
		if (t->capacity.v[k] > 0 && u[k] / (double)t->capacity.v[k] > best)
			best = u[k] / (double)t->capacity.v[k];
	return best;
}

struct sib {
	int acct;
	double lf;
};

static int sib_cmp(const void *pa, const void *pb, void *pt)
{
	const struct sib *a = pa, *b = pb;
	const struct iso_tenancy *t = pt;

	if (a->lf != b->lf)
		return a->lf > b->lf ? -1 : 1;
	if (t->acct[a->acct].shares != t->acct[b->acct].shares)
		return t->acct[a->acct].shares > t->acct[b->acct].shares ? -1 : 1;
	return strcmp(t->acct[a->acct].name, t->acct[b->acct].name);
}

/* Depth first, preorder: a parent's rank precedes its children's, and a
 * subtree's ranks are contiguous. */
static int walk(const struct iso_tenancy *t, int p, int *rank, double *lf, int next)
{
	struct sib *s;
	int n = 0, i = 0;
	double sum_sh = 0, sum_u = 0;

	for (int c = t->acct[p].first_child; c >= 0; c = t->acct[c].next_sibling)
		n++;
	if (n == 0)
		return next;
	s = calloc((size_t)n, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (int c = t->acct[p].first_child; c >= 0; c = t->acct[c].next_sibling) {
		s[i].acct = c;
		s[i].lf = iso_fairshare_dominant(t, t->acct[c].decayed);
		sum_sh += t->acct[c].shares;
		sum_u += s[i].lf;
		i++;
	}
	for (i = 0; i < n; i++) {
		double sh = t->acct[s[i].acct].shares / sum_sh;
		double u = sum_u > 0 ? s[i].lf / sum_u : 0;
		s[i].lf = u > 0 ? sh / u : INFINITY;
	}
	qsort_r(s, (size_t)n, sizeof(*s), sib_cmp, (void *)t);
	for (i = 0; i < n && next >= 0; i++) {
		rank[s[i].acct] = next++;
		if (lf)
			lf[s[i].acct] = s[i].lf;
		next = walk(t, s[i].acct, rank, lf, next);
	}
	free(s);
	return next;
}

int iso_fairshare_rank(const struct iso_tenancy *t, int *rank, double *lf)
{
	int r;

	rank[0] = -1;
	if (lf)
		lf[0] = INFINITY;
	r = walk(t, 0, rank, lf, 0);
	return r < 0 ? r : 0;
}

struct ord {
	const struct iso_pending *items;
	const int *rank;
};

static int item_cmp(const void *pa, const void *pb, void *pctx)
{
	const struct ord *o = pctx;
	const struct iso_pending *a = &o->items[*(const int *)pa], *b = &o->items[*(const int *)pb];

	if (o->rank[a->acct] != o->rank[b->acct])
		return o->rank[a->acct] < o->rank[b->acct] ? -1 : 1;
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->submit_ms != b->submit_ms)
		return a->submit_ms < b->submit_ms ? -1 : 1;
	return strcmp(a->id, b->id);
}

int iso_fairshare_order(const struct iso_tenancy *t, const struct iso_pending *items, int n,
                        struct iso_queue_entry *out, struct iso_error *err)
{
	_cleanup_free_ int *rank = calloc((size_t)t->n_accounts, sizeof(int));
	_cleanup_free_ double *lf = calloc((size_t)t->n_accounts, sizeof(double));
	_cleanup_free_ int *idx = calloc(n > 0 ? (size_t)n : 1, sizeof(int));
	struct ord o = {.items = items};

	if (!rank || !lf || !idx)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < n; i++) {
		if (items[i].acct <= 0 || items[i].acct >= t->n_accounts) {
			char field[ISO_ERR_FIELD_MAX];
			snprintf(field, sizeof(field), "pending[%d].acct", i);
			return iso_error_set(err, ISO_E_INVALID, field, "item %s has no account",
			                     items[i].id);
		}
		idx[i] = i;
	}
	if (iso_fairshare_rank(t, rank, lf) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	o.rank = rank;
	qsort_r(idx, (size_t)n, sizeof(int), item_cmp, &o);
	/* rank is free now: reuse it to count each tenant's entries so far */
	memset(rank, 0, (size_t)t->n_accounts * sizeof(int));
	for (int p = 0; p < n; p++) {
		const struct iso_pending *it = &items[idx[p]];
		int owner = tn_tenant_of(t, it->acct), others = p - rank[owner]++;
		out[p] = (struct iso_queue_entry){.item = idx[p],
		                                  .position = p + 1,
		                                  .ahead_other_accounts = others,
		                                  .level_fs = lf[owner]};
		if (p == 0)
			snprintf(out[p].reason, sizeof(out[p].reason),
			         "position 1 of %d: next to start once capacity is free", n);
		else if (others == 0)
			snprintf(
			    out[p].reason, sizeof(out[p].reason),
			    "position %d of %d: behind %d of your own allocations (priority, then "
			    "submit time)",
			    p + 1, n, p);
		else
			snprintf(
			    out[p].reason, sizeof(out[p].reason),
			    "position %d of %d: %d allocations of other accounts rank ahead by "
			    "fair share; %s %s has level fair share %.3g (shares over decayed "
			    "usage among its siblings; higher ranks first)",
			    p + 1, n, others, iso_acct_level_name(t->acct[owner].level),
			    t->acct[owner].name, lf[owner]);
	}
	return 0;
}

int iso_fairshare_explain(const struct iso_tenancy *t, const struct iso_pending *items,
                          const struct iso_queue_entry *out, int n, int pos, int viewer, char *buf,
                          size_t size, struct iso_error *err)
{
	bool mine = false;

	if (pos < 0 || pos >= n)
		return iso_error_set(err, ISO_E_NOT_FOUND, "position", "no queue entry %d", pos);
	for (int x = items[out[pos].item].acct; x > 0; x = t->acct[x].parent)
		mine |= x == viewer;
	if (!mine) /* another tenant's entry does not exist for this viewer */
		return iso_error_set(err, ISO_E_NOT_FOUND, "position", "no queue entry %d", pos);
	snprintf(buf, size, "%s: %s", items[out[pos].item].id, out[pos].reason);
	return 0;
}

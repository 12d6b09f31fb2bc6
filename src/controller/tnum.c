/* tnum.c: a per-tenant number from an inventory range (tnum.h). Tenants'
 * VXLAN VNIs (vni.c) and RoCE VLANs (fabric.c) follow one set of rules, so
 * they share one pool: the first free number from where the last one was
 * taken (wrapping, so a freed number comes back last), taken in the
 * tenant's creating transaction, freed by its deleting one, unique.
 *
 * Each tenant's number is kept as a store meta row (kind->meta_prefix and the tenant id, the
 * empty value once freed): the store's typed tables are being reworked for
 * a second backend by another package, and a meta row rides the same
 * transaction on both. Uniqueness is checked when the rows are read back at
 * start and kept in memory by the pool. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "controller/tnum.h"

#define LIST_PAGE 500

static int find_tenant(const struct ctl_tnums *p, int64_t tenant_id)
{
	for (int i = 0; p->on && i < p->n; i++)
		if (p->v[i].tenant_id == tenant_id)
			return i;
	return -1;
}

uint32_t ctl_tnums_of(const struct ctl_tnums *p, int64_t tenant_id)
{
	int i = find_tenant(p, tenant_id);

	return i >= 0 ? p->v[i].num : 0;
}

int64_t ctl_tnums_owner(const struct ctl_tnums *p, uint32_t num)
{
	int lo = 0, hi = p->on ? p->n - 1 : -1;

	while (lo <= hi) { /* the pool is sorted by number */
		int mid = lo + (hi - lo) / 2;
		if (p->v[mid].num == num)
			return p->v[mid].tenant_id;
		if (p->v[mid].num < num)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return 0;
}

int ctl_tnums_count(const struct ctl_tnums *p)
{
	return p->on ? p->n : 0;
}

/* Inserts (tenant, num) in number order; -EEXIST when the number is held. */
static int pool_add(struct ctl_tnums *p, int64_t tenant_id, uint32_t num)
{
	int at = 0;

	while (at < p->n && p->v[at].num < num)
		at++;
	if (at < p->n && p->v[at].num == num)
		return -EEXIST;
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 16;
		struct ctl_tnum *v = realloc(p->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	memmove(&p->v[at + 1], &p->v[at], (size_t)(p->n - at) * sizeof(*p->v));
	p->v[at] = (struct ctl_tnum){.tenant_id = tenant_id, .num = num};
	p->n++;
	return 0;
}

void ctl_tnums_forget(struct ctl_tnums *p, int64_t tenant_id)
{
	int i = find_tenant(p, tenant_id);

	if (i < 0)
		return;
	memmove(&p->v[i], &p->v[i + 1], (size_t)(p->n - i - 1) * sizeof(*p->v));
	p->n--;
}

/* The first free number of [from, max], else of [min, from): a rotating
 * search, so that the number a deleted tenant held is handed out last
 * (the pool is sorted). */
static int pool_free_num(const struct ctl_tnums *p, uint32_t from, uint32_t *out,
                         struct iso_error *err)
{
	uint32_t want = from >= p->min && from <= p->max ? from : p->min;
	int i = 0;

	while (i < p->n && p->v[i].num < want)
		i++;
	for (int laps = 0; laps < 2; laps++) {
		for (; i < p->n && p->v[i].num == want && want <= p->max; i++)
			want++;
		if (want <= p->max && (i == p->n || p->v[i].num != want)) {
			*out = want;
			return 0;
		}
		want = p->min; /* wrap */
		i = 0;
	}
	return iso_error_set(err, ISO_E_NO_CAPACITY, p->kind->field,
	                     "no free %s in %s [%u, %u]: all %u are held by "
	                     "tenants (delete a tenant or widen the range)",
	                     p->kind->noun, p->kind->field, p->min, p->max, p->max - p->min + 1);
}

/* Takes a free number from p->next on and moves p->next past it; the
 * caller stores both (take_store). */
static int take(struct ctl_tnums *p, uint32_t *num, struct iso_error *err)
{
	int r = pool_free_num(p, p->next, num, err);

	if (r == 0)
		p->next = *num < p->max ? *num + 1 : p->min;
	return r;
}

static int meta_put(struct iso_controller *c, const struct ctl_tnums *p, int64_t tenant_id,
                    uint32_t num, struct iso_error *err)
{
	char key[48], val[16] = "";

	snprintf(key, sizeof(key), "%s%lld", p->kind->meta_prefix, (long long)tenant_id);
	if (num)
		snprintf(val, sizeof(val), "%u", num);
	return c->store->ops->meta_set(c->store, key, val, err);
}

static int next_put(struct iso_controller *c, const struct ctl_tnums *p, struct iso_error *err)
{
	char key[48], val[16];

	snprintf(key, sizeof(key), "%snext", p->kind->meta_prefix);
	snprintf(val, sizeof(val), "%u", p->next);
	return c->store->ops->meta_set(c->store, key, val, err);
}

/* The stored p->next; 0 when none was stored (a store from before it). */
static int next_read(struct iso_controller *c, const struct ctl_tnums *p, uint32_t *out,
                     struct iso_error *err)
{
	char key[48], val[32] = "", *end = NULL;
	struct iso_error e = {0};
	unsigned long v;
	int r;

	*out = 0;
	snprintf(key, sizeof(key), "%snext", p->kind->meta_prefix);
	r = c->store->ops->meta_get(c->store, key, val, sizeof(val), &e);
	if (r < 0 && e.code == ISO_E_NOT_FOUND)
		return 0;
	if (r < 0) {
		if (err)
			*err = e;
		return r;
	}
	v = strtoul(val, &end, 10);
	if (!val[0] || *end || v == 0 || v > p->kind->limit)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: meta %s is \"%s\", not a %s", key, val, p->kind->noun);
	*out = (uint32_t)v;
	return 0;
}

/* The tenant's stored number: 0 when none (never given, or freed). */
static int meta_read(struct iso_controller *c, const struct ctl_tnums *p, int64_t tenant_id,
                     uint32_t *out, struct iso_error *err)
{
	char key[48], val[32] = "", *end = NULL;
	struct iso_error e = {0};
	unsigned long v;
	int r;

	*out = 0;
	snprintf(key, sizeof(key), "%s%lld", p->kind->meta_prefix, (long long)tenant_id);
	r = c->store->ops->meta_get(c->store, key, val, sizeof(val), &e);
	if (r < 0 && e.code == ISO_E_NOT_FOUND)
		return 0;
	if (r < 0) {
		if (err)
			*err = e;
		return r;
	}
	if (!val[0])
		return 0;
	v = strtoul(val, &end, 10);
	if (*end || v == 0 || v > p->kind->limit)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: meta %s is \"%s\", not a %s", key, val, p->kind->noun);
	*out = (uint32_t)v;
	return 0;
}

/* Reads every tenant's number back; tenants without one get one, in one
 * transaction. */
static int load(struct iso_controller *c, struct ctl_tnums *p, struct iso_error *err)
{
	int n_missing = 0, r = 0;
	char after[ISO_NAME_MAX] = "";

	/* first the numbers the store holds, so that the free ones are known */
	for (;;) {
		_cleanup_free_ struct iso_tenant *page = NULL;
		int n = 0;

		r = c->store->ops->tenant_list(c->store, after[0] ? after : NULL, LIST_PAGE, &page,
		                               &n, err);
		if (r < 0)
			return r;
		for (int i = 0; i < n; i++) {
			uint32_t num = 0;
			r = meta_read(c, p, page[i].id, &num, err);
			if (r < 0)
				return r;
			if (num && (num < p->min || num > p->max))
				return iso_error_set(err, ISO_E_INVALID, p->kind->field,
				                     "the store gives tenant \"%s\" %s %u, outside "
				                     "%s [%u, %u]: widen the range again",
				                     page[i].name, p->kind->noun, num,
				                     p->kind->field, p->min, p->max);
			if (num) {
				r = pool_add(p, page[i].id, num);
				if (r == -EEXIST)
					return iso_error_set(err, ISO_E_INTERNAL, p->kind->field,
					                     "store: %s %u is held by two tenants "
					                     "(one is \"%s\")",
					                     p->kind->noun, num, page[i].name);
				if (r < 0)
					return iso_error_set(err, ISO_E_INTERNAL, NULL,
					                     "out of memory");
				continue;
			}
			n_missing++;
		}
		if (n < LIST_PAGE)
			break;
		iso_strlcpy(after, page[n - 1].name, sizeof(after));
	}
	/* where the search starts: as stored, else one past the highest held
	 * (a store from before the rotation), else min */
	if ((r = next_read(c, p, &p->next, err)) < 0)
		return r;
	if (!p->next && p->n)
		p->next = p->v[p->n - 1].num < p->max ? p->v[p->n - 1].num + 1 : p->min;
	if (p->next < p->min || p->next > p->max)
		p->next = p->min;
	if (n_missing == 0)
		return 0;
	/* then one each for the tenants without one, in one transaction; a
	 * failure stops the start, so nothing in memory needs undoing */
	r = ctl_tx_begin(c, err);
	after[0] = '\0';
	while (r == 0) {
		_cleanup_free_ struct iso_tenant *page = NULL;
		int n = 0;

		r = c->store->ops->tenant_list(c->store, after[0] ? after : NULL, LIST_PAGE, &page,
		                               &n, err);
		for (int i = 0; r == 0 && i < n; i++) {
			uint32_t num = 0;
			if (find_tenant(p, page[i].id) >= 0)
				continue;
			r = take(p, &num, err);
			if (r == 0)
				r = meta_put(c, p, page[i].id, num, err);
			if (r == 0)
				r = next_put(c, p, err);
			if (r == 0 && pool_add(p, page[i].id, num) < 0)
				r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		}
		if (r < 0 || n < LIST_PAGE)
			break;
		iso_strlcpy(after, page[n - 1].name, sizeof(after));
	}
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	iso_log(ISO_LOG_INFO, p->kind->log_event, "tenants=%d", n_missing);
	return 0;
}

int ctl_tnums_open(struct iso_controller *c, struct ctl_tnums *p, const struct ctl_tnum_kind *k,
                   uint32_t min, uint32_t max, struct iso_error *err)
{
	if (min == 0 || min > max || max > k->limit)
		return iso_error_set(err, ISO_E_INVALID, k->field, "%s [%u, %u] is not within 1-%u",
		                     k->field, min, max, k->limit);
	*p = (struct ctl_tnums){.kind = k, .on = true, .min = min, .max = max};
	return load(c, p, err);
}

void ctl_tnums_close(struct ctl_tnums *p)
{
	free(p->v);
	*p = (struct ctl_tnums){0};
}

int ctl_tnums_tenant_create(struct iso_controller *c, struct ctl_tnums *p,
                            const struct iso_tenant *t, struct iso_error *err)
{
	uint32_t num = 0;
	int r;

	if (!p->on)
		return 0;
	/* p->next moves even when the transaction rolls back: a number
	 * skipped costs nothing */
	r = take(p, &num, err);
	if (r == 0)
		r = meta_put(c, p, t->id, num, err);
	if (r == 0)
		r = next_put(c, p, err);
	if (r == 0 && pool_add(p, t->id, num) < 0)
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	return r;
}

int ctl_tnums_tenant_delete(struct iso_controller *c, struct ctl_tnums *p, int64_t tenant_id,
                            struct iso_error *err)
{
	if (find_tenant(p, tenant_id) < 0)
		return 0;
	return meta_put(c, p, tenant_id, 0, err);
}

/* pkey_pool.c: hands out tenant P_Keys. A key that has just been released may
 * still sit in some port's table (a stale table, a standby SM with an old
 * file), so it waits in quarantine before another tenant gets it: reusing it
 * at once would put the new tenant in a partition with the old one's ports.
 * Keys that can never be a tenant's (0x0000, 0x7fff, shared services) are
 * reserved so that no caller has to remember to skip them. */
#include <errno.h>
#include <string.h>

#include "isostack/fabric.h"

int iso_pkey_pool_init(struct iso_pkey_pool *p, uint16_t min, uint16_t max, int64_t quarantine_ms,
                       const struct iso_fabric_config *fc)
{
	/* Keys above 0x7fff carry the membership bit: they are not bases. */
	if (min > max || max > ISO_PKEY_BASE_MASK || quarantine_ms < 0)
		return -EINVAL;
	size_t n = (size_t)max - min + 1;
	_cleanup_free_ uint8_t *state = calloc(n, sizeof(*state));
	_cleanup_free_ int64_t *released = calloc(n, sizeof(*released));
	if (!state || !released)
		return -ENOMEM;

	int n_free = (int)n;
	for (uint32_t k = min; k <= max; k++) {
		bool reserved = k == 0 || k == ISO_PKEY_DEFAULT;
		for (int i = 0; fc && !reserved && i < fc->n_services; i++)
			reserved = (fc->services[i].pkey & ISO_PKEY_BASE_MASK) == k;
		if (reserved) {
			state[k - min] = ISO_PKEY_RESERVED;
			n_free--;
		}
	}
	*p = (struct iso_pkey_pool){
	    .min = min,
	    .max = max,
	    .quarantine_ms = quarantine_ms,
	    .state = ISO_TAKE(state),
	    .released_ms = ISO_TAKE(released),
	    .n_free = n_free,
	};
	return 0;
}

void iso_pkey_pool_free(struct iso_pkey_pool *p)
{
	if (!p)
		return;
	free(p->state);
	free(p->released_ms);
	memset(p, 0, sizeof(*p));
}

static bool in_range(const struct iso_pkey_pool *p, uint16_t pkey)
{
	return p->state && pkey >= p->min && pkey <= p->max;
}

int iso_pkey_pool_mark_used(struct iso_pkey_pool *p, uint16_t pkey)
{
	if (!in_range(p, pkey))
		return -ERANGE;
	if (p->state[pkey - p->min] != ISO_PKEY_FREE)
		return -EEXIST;
	p->state[pkey - p->min] = ISO_PKEY_USED;
	p->n_free--;
	return 0;
}

int iso_pkey_pool_mark_quarantined(struct iso_pkey_pool *p, uint16_t pkey, int64_t released_ms)
{
	if (!in_range(p, pkey))
		return -ERANGE;
	uint8_t *s = &p->state[pkey - p->min];
	if (*s == ISO_PKEY_RESERVED)
		return -EEXIST;
	if (*s == ISO_PKEY_FREE)
		p->n_free--;
	*s = ISO_PKEY_QUARANTINED;
	p->released_ms[pkey - p->min] = released_ms;
	return 0;
}

static bool quarantine_over(const struct iso_pkey_pool *p, size_t i, int64_t now_ms)
{
	return now_ms - p->released_ms[i] >= p->quarantine_ms;
}

static bool takeable(const struct iso_pkey_pool *p, size_t i, int64_t now_ms)
{
	return p->state[i] == ISO_PKEY_FREE ||
	       (p->state[i] == ISO_PKEY_QUARANTINED && quarantine_over(p, i, now_ms));
}

/* The one place a pool runs dry: the refusal names the range and, when keys
 * wait in quarantine, when the next one is free. */
int iso_pkey_pool_take_pick(struct iso_pkey_pool *p, int64_t now_ms, uint32_t pick,
                            uint16_t *out, struct iso_error *err)
{
	size_t n = p->state ? (size_t)p->max - p->min + 1 : 0, can = 0;
	int quarantined = 0;
	int64_t next_ms = INT64_MAX;

	for (size_t i = 0; i < n; i++) {
		if (takeable(p, i, now_ms)) {
			can++;
		} else if (p->state[i] == ISO_PKEY_QUARANTINED) {
			quarantined++;
			int64_t at = p->released_ms[i] + p->quarantine_ms;
			next_ms = at < next_ms ? at : next_ms;
		}
	}
	for (size_t i = 0, want = can ? pick % can : 0; can && i < n; i++) {
		if (!takeable(p, i, now_ms) || want-- > 0)
			continue;
		if (p->state[i] == ISO_PKEY_FREE)
			p->n_free--; /* a quarantined key: n_free never counted it */
		p->state[i] = ISO_PKEY_USED;
		*out = (uint16_t)(p->min + i);
		return 0;
	}
	if (quarantined > 0)
		return iso_error_set(err, ISO_E_NO_CAPACITY, "fabric.pkey_range",
		                     "no free P_Key in fabric.pkey_range [0x%04x, 0x%04x]: %d in "
		                     "quarantine after release (%lld ms), the next one is free in "
		                     "%lld ms",
		                     p->min, p->max, quarantined, (long long)p->quarantine_ms,
		                     (long long)(next_ms - now_ms));
	return iso_error_set(err, ISO_E_NO_CAPACITY, "fabric.pkey_range",
	                     "no free P_Key in fabric.pkey_range [0x%04x, 0x%04x]: all in use, 0 "
	                     "quarantined; widen the range",
	                     p->min, p->max);
}

int iso_pkey_pool_take_exact(struct iso_pkey_pool *p, int64_t now_ms, uint16_t pkey)
{
	size_t i = (size_t)pkey - p->min;

	if (!in_range(p, pkey))
		return -ERANGE;
	if (!takeable(p, i, now_ms))
		return -EEXIST;
	if (p->state[i] == ISO_PKEY_FREE)
		p->n_free--;
	p->state[i] = ISO_PKEY_USED;
	return 0;
}

int iso_pkey_pool_take(struct iso_pkey_pool *p, int64_t now_ms, uint16_t *out,
                       struct iso_error *err)
{
	return iso_pkey_pool_take_pick(p, now_ms, 0, out, err);
}

void iso_pkey_pool_release(struct iso_pkey_pool *p, uint16_t pkey, int64_t now_ms)
{
	if (!in_range(p, pkey) || p->state[pkey - p->min] != ISO_PKEY_USED)
		return;
	p->state[pkey - p->min] = ISO_PKEY_QUARANTINED;
	p->released_ms[pkey - p->min] = now_ms;
}

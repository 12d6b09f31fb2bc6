/* ratelimit.c: how fast one tenant may ask (docs/tenancy.md, "Request
 * rates"). Every change is an fsync'd transaction on the one controller
 * thread, so a tenant that writes as fast as it can slows every other
 * tenant's requests, whatever its quota and limits say about what it holds
 * (bench/abuse measured 3-11x on another tenant's p99 at ~250 writes/s).
 * Each tenant gets two token buckets, one for changes and one for reads,
 * refilled continuously; a request past its bucket is 429 before its body is
 * read, with the seconds until a token is back. Like Slurm's per-user RPC
 * rate limit (slurm.conf(5), SlurmctldParameters=rl_enable), but per tenant:
 * a tenant's users share one budget, so adding users or tokens buys nothing.
 * Cluster roles are not limited. The table is an open-addressing hash on the
 * tenant id: O(1) per request, grown as tenants appear. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

struct bucket {
	int64_t tenant_id; /* 0: an empty slot */
	double write_rate, read_rate; /* the tenant's, read once (ctl_rates_forget) */
	double writes, reads; /* tokens left */
	int64_t at_ns;        /* when they were counted */
	int64_t refused;      /* since the last log line */
	int64_t logged_ns;
};

struct ctl_rates {
	struct bucket *slot;
	int cap, n;
	struct iso_rate_limits lim;
};

#define LOG_EVERY_NS (10LL * 1000 * 1000 * 1000)

int ctl_rates_open(struct iso_controller *c, const struct iso_rate_limits *lim,
                   struct iso_error *err)
{
	struct ctl_rates *r = calloc(1, sizeof(*r));

	if (!r)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->rates = r;
	r->lim = *lim;
	if (r->lim.writes_per_s <= 0)
		r->lim.writes_per_s = ISO_DEFAULT_WRITES_PER_S;
	if (r->lim.reads_per_s <= 0)
		r->lim.reads_per_s = ISO_DEFAULT_READS_PER_S;
	r->cap = 64;
	r->slot = calloc((size_t)r->cap, sizeof(*r->slot));
	if (!r->slot)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	return 0;
}

void ctl_rates_close(struct iso_controller *c)
{
	if (!c->rates)
		return;
	free(c->rates->slot);
	free(c->rates);
	c->rates = NULL;
}

static uint64_t mix(int64_t id)
{
	uint64_t x = (uint64_t)id;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static struct bucket *find(struct ctl_rates *r, int64_t tenant_id)
{
	for (int i = (int)(mix(tenant_id) & (uint64_t)(r->cap - 1));; i = (i + 1) & (r->cap - 1))
		if (r->slot[i].tenant_id == tenant_id || r->slot[i].tenant_id == 0)
			return &r->slot[i];
}

static int grow(struct ctl_rates *r)
{
	struct bucket *old = r->slot;
	int old_cap = r->cap;

	r->slot = calloc((size_t)old_cap * 2, sizeof(*r->slot));
	if (!r->slot) {
		r->slot = old;
		return -ENOMEM;
	}
	r->cap = old_cap * 2;
	for (int i = 0; i < old_cap; i++)
		if (old[i].tenant_id)
			*find(r, old[i].tenant_id) = old[i];
	free(old);
	return 0;
}

void ctl_rates_of(const struct iso_controller *c, const struct iso_tenant *t, int *writes,
                  int *reads)
{
	*writes = t->writes_per_s > 0 ? t->writes_per_s : (int)c->rates->lim.writes_per_s;
	*reads = t->reads_per_s > 0 ? t->reads_per_s : (int)c->rates->lim.reads_per_s;
}

void ctl_rates_forget(struct iso_controller *c, int64_t tenant_id)
{
	struct bucket *b = find(c->rates, tenant_id);

	if (b->tenant_id)
		b->write_rate = b->read_rate = 0; /* read again at the next request */
}

int iso_controller_rate_admit(struct iso_controller *c, const struct iso_principal *p, bool write,
                              int *retry_after_s, struct iso_error *err)
{
	struct ctl_rates *r = c->rates;
	int64_t now = iso_mono_ns();
	struct bucket *b;

	*retry_after_s = 0;
	/* Buckets are per tenant: a principal of no tenant (cluster-admin,
	 * auditor, node-agent) is not limited here. */
	if (p->tenant_id <= 0)
		return 0;
	if (2 * (r->n + 1) > r->cap && grow(r) < 0)
		return 0; /* out of memory: do not refuse for our own failure */
	b = find(r, p->tenant_id);
	if (!b->tenant_id) {
		b->tenant_id = p->tenant_id;
		b->at_ns = now;
		b->writes = b->reads = -1; /* a full burst to start, below */
		r->n++;
	}
	if (b->write_rate <= 0) {
		/* Once per tenant (and after its limits change): one indexed read. */
		struct iso_tenant t = {0};
		int w, rd;
		if (c->store->ops->tenant_get_by_id(c->store, p->tenant_id, &t, NULL) < 0)
			memset(&t, 0, sizeof(t));
		ctl_rates_of(c, &t, &w, &rd);
		b->write_rate = w;
		b->read_rate = rd;
	}
	/* Refill: the burst is two seconds' worth. */
	double dt = (double)(now - b->at_ns) / 1e9;
	b->writes = b->writes < 0 ? 2.0 * b->write_rate
	                          : fmin(2.0 * b->write_rate, b->writes + dt * b->write_rate);
	b->reads = b->reads < 0 ? 2.0 * b->read_rate
	                        : fmin(2.0 * b->read_rate, b->reads + dt * b->read_rate);
	b->at_ns = now;
	double rate = write ? b->write_rate : b->read_rate;
	double *tokens = write ? &b->writes : &b->reads;
	if (*tokens >= 1.0) {
		*tokens -= 1.0;
		return 0;
	}
	*retry_after_s = (int)ceil((1.0 - *tokens) / rate);
	if (*retry_after_s < 1)
		*retry_after_s = 1;
	b->refused++;
	if (now - b->logged_ns >= LOG_EVERY_NS) {
		iso_log(ISO_LOG_WARN, "tenant_rate_limited",
		        "tenant=%s kind=%s limit_per_s=%.0f refused=%lld", p->tenant,
		        write ? "writes" : "reads", rate, (long long)b->refused);
		b->refused = 0;
		b->logged_ns = now;
	}
	return iso_error_set(err, ISO_E_LIMIT, write ? "limits.writes_per_s" : "limits.reads_per_s",
	                     "tenant %s sends %s faster than %.0f a second (its share of the "
	                     "controller); retry in %d s",
	                     p->tenant, write ? "changes" : "reads", rate, *retry_after_s);
}

/* authcache.c: the tokens that authenticated lately, kept in memory so that
 * a request costs one hash of its secret and no store read. Every request of
 * a tenant over its rate is authenticated before its 429 (the rate is the
 * tenant's, so the token must be known first); bench/abuse measured 3,100
 * such refusals a second costing another tenant's healthz 2.1x at p99, most
 * of it two SQLite reads each (the token, then its tenant's name).
 *
 * Correctness rests on one rule: an entry is good only while no transaction
 * has ended since it was read (ctl_tx_end bumps c->auth_epoch on commit and
 * rollback alike). Revocation, a tenant's deletion or rename, a new token:
 * each is a transaction, so none is ever answered from a stale entry. The
 * expiry is checked at each use. The secret itself is never kept: only the
 * stored hash, which the request's secret must match as it does against the
 * store.
 *
 * A direct-mapped table of fixed size: O(1) per request, no growth, and a
 * token that loses its slot to another is simply read again. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

#define AUTH_CACHE_SLOTS 1024

struct auth_entry {
	uint64_t epoch; /* 0: empty */
	struct iso_token token;
	char tenant[ISO_NAME_MAX]; /* the tenant's name, for tenant-scoped roles */
};

struct ctl_auth_cache {
	struct auth_entry slot[AUTH_CACHE_SLOTS];
	uint8_t key[crypto_shorthash_KEYBYTES]; /* a slot is not chosen by the caller */
};

int ctl_auth_cache_open(struct iso_controller *c, struct iso_error *err)
{
	c->auth_cache = calloc(1, sizeof(*c->auth_cache));
	if (!c->auth_cache)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	crypto_shorthash_keygen(c->auth_cache->key);
	c->auth_epoch = 1;
	return 0;
}

void ctl_auth_cache_close(struct iso_controller *c)
{
	if (c->auth_cache)
		sodium_memzero(c->auth_cache, sizeof(*c->auth_cache));
	free(c->auth_cache);
	c->auth_cache = NULL;
}

static struct auth_entry *slot_of(struct ctl_auth_cache *ac, const char *id)
{
	uint8_t h[crypto_shorthash_BYTES];
	uint64_t v;

	crypto_shorthash(h, (const unsigned char *)id, strlen(id), ac->key);
	memcpy(&v, h, sizeof(v));
	return &ac->slot[v % AUTH_CACHE_SLOTS];
}

bool ctl_auth_cache_get(struct iso_controller *c, const char *id, struct iso_token *token,
                        char *tenant, size_t tenant_size)
{
	struct auth_entry *e = slot_of(c->auth_cache, id);

	if (e->epoch != c->auth_epoch || strcmp(e->token.id, id) != 0)
		return false;
	*token = e->token;
	iso_strlcpy(tenant, e->tenant, tenant_size);
	return true;
}

void ctl_auth_cache_put(struct iso_controller *c, const struct iso_token *token, const char *tenant)
{
	struct auth_entry *e = slot_of(c->auth_cache, token->id);

	e->epoch = c->auth_epoch;
	e->token = *token;
	iso_strlcpy(e->tenant, tenant, sizeof(e->tenant));
}

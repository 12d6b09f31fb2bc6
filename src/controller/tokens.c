/* tokens.c: bearer tokens. A token is "iso_<id>_<secret>"; only a BLAKE2b
 * hash of the secret is stored and it is compared in constant time. The
 * secret exists in memory only while it is being handed to its holder, and
 * the bootstrap admin token goes to a 0600 file, never to the log. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "controller/internal.h"

#define TOKEN_PREFIX "iso_"
#define SECRET_BYTES 32

static void hash_secret(const char *secret, uint8_t out[ISO_TOKEN_HASH_LEN])
{
	crypto_generichash(out, ISO_TOKEN_HASH_LEN, (const unsigned char *)secret, strlen(secret),
	                   NULL, 0);
}

int ctl_token_new(struct iso_token *t, char *secret, size_t size, struct iso_error *err)
{
	unsigned char id_raw[ISO_TOKEN_ID_LEN / 2];
	unsigned char sec_raw[SECRET_BYTES];
	char sec_b64[sodium_base64_ENCODED_LEN(SECRET_BYTES,
	                                       sodium_base64_VARIANT_URLSAFE_NO_PADDING)];

	if (size < ISO_TOKEN_MAX)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "token buffer too small");
	randombytes_buf(id_raw, sizeof(id_raw));
	randombytes_buf(sec_raw, sizeof(sec_raw));
	sodium_bin2hex(t->id, sizeof(t->id), id_raw, sizeof(id_raw));
	sodium_bin2base64(sec_b64, sizeof(sec_b64), sec_raw, sizeof(sec_raw),
	                  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	hash_secret(sec_b64, t->hash);
	snprintf(secret, size, TOKEN_PREFIX "%s_%s", t->id, sec_b64);
	sodium_memzero(sec_raw, sizeof(sec_raw));
	sodium_memzero(sec_b64, sizeof(sec_b64));
	t->created_ms = iso_now_ms();
	return 0;
}

/* Splits "iso_<12 hex>_<43 base64url>" strictly; anything else is not a token. */
static bool parse_bearer(const char *bearer, char id[ISO_TOKEN_ID_LEN + 1], const char **secret)
{
	const size_t plen = strlen(TOKEN_PREFIX);

	if (strlen(bearer) != plen + ISO_TOKEN_ID_LEN + 1 + ISO_TOKEN_SECRET_LEN)
		return false;
	if (strncmp(bearer, TOKEN_PREFIX, plen) != 0 || bearer[plen + ISO_TOKEN_ID_LEN] != '_')
		return false;
	for (size_t i = 0; i < ISO_TOKEN_ID_LEN; i++) {
		char ch = bearer[plen + i];
		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
			return false;
	}
	memcpy(id, bearer + plen, ISO_TOKEN_ID_LEN);
	id[ISO_TOKEN_ID_LEN] = '\0';
	*secret = bearer + plen + ISO_TOKEN_ID_LEN + 1;
	return true;
}

static void owner_of(const struct iso_token *t, char *buf, size_t size)
{
	if (t->user[0])
		snprintf(buf, size, "%s", t->user);
	else
		snprintf(buf, size, "token:%s", t->id);
}

int iso_controller_authenticate(struct iso_controller *c, const char *bearer,
                                struct iso_principal *out, struct iso_error *err)
{
	static const uint8_t zero_hash[ISO_TOKEN_HASH_LEN];
	struct iso_token t = {0};
	char id[ISO_TOKEN_ID_LEN + 1];
	char tenant[ISO_NAME_MAX] = "";
	const char *secret = NULL;
	uint8_t h[ISO_TOKEN_HASH_LEN];
	bool cached, found, ok;

	/* One message for every failure, so a caller cannot tell a wrong id
	 * from a wrong secret, a revoked token or an expired one. */
	if (!bearer || !parse_bearer(bearer, id, &secret))
		return iso_error_set(err, ISO_E_UNAUTHORIZED, NULL, "missing or invalid token");
	cached = ctl_auth_cache_get(c, id, &t, tenant, sizeof(tenant));
	found = cached;
	if (!cached) {
		/* A store that cannot answer (e.g. PostgreSQL failing over) says
		 * nothing about the token: 503, not 401, or a client would drop
		 * a good token (docs/store.md, "PostgreSQL failover"). */
		int r = c->store->ops->token_get(c->store, id, &t, NULL);
		if (r == -ENOTCONN) /* another timeline: stop (ctl_tx_begin) */
			c->sync_failed = true;
		if (r < 0 && r != -ENOENT)
			return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
			                     "store: cannot read the token now; try again");
		found = r == 0;
	}
	hash_secret(secret, h);
	ok = sodium_memcmp(h, found ? t.hash : zero_hash, ISO_TOKEN_HASH_LEN) == 0;
	sodium_memzero(h, sizeof(h));
	if (!found || !ok || t.revoked_ms != 0 ||
	    (t.expires_ms != 0 && t.expires_ms <= iso_now_ms()))
		return iso_error_set(err, ISO_E_UNAUTHORIZED, NULL, "missing or invalid token");
	if (!cached && iso_role_is_tenant_scoped(t.role)) {
		struct iso_tenant tn;
		int r = c->store->ops->tenant_get_by_id(c->store, t.tenant_id, &tn, NULL);
		if (r < 0 && r != -ENOENT)
			return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
			                     "store: cannot read the token now; try again");
		if (r < 0)
			return iso_error_set(err, ISO_E_UNAUTHORIZED, NULL,
			                     "missing or invalid token");
		iso_strlcpy(tenant, tn.name, sizeof(tenant));
	}
	/* Only a token whose secret matched is kept: a guess costs a read. */
	if (!cached)
		ctl_auth_cache_put(c, &t, tenant);

	/* Everything but the caller's request id and source address is set here. */
	iso_strlcpy(out->token_id, t.id, sizeof(out->token_id));
	iso_strlcpy(out->tenant, tenant, sizeof(out->tenant));
	out->role = t.role;
	out->tenant_id = t.tenant_id;
	iso_strlcpy(out->user, t.user, sizeof(out->user));
	iso_strlcpy(out->node, t.node, sizeof(out->node));
	owner_of(&t, out->owner, sizeof(out->owner));
	return 0;
}

void iso_controller_tenant_name(struct iso_controller *c, int64_t tenant_id, char *buf, size_t size)
{
	struct iso_tenant tn;

	buf[0] = '\0';
	if (tenant_id > 0 && c->store->ops->tenant_get_by_id(c->store, tenant_id, &tn, NULL) == 0)
		snprintf(buf, size, "%s", tn.name);
}

/* The bootstrap token goes to DIR/name, 0600, whole or not at all, through
 * the one atomic writer: its temp file has an unguessable name and is
 * created with O_EXCL|O_NOFOLLOW, so nobody can have it opened for them in
 * advance or pointed elsewhere by a link (a fixed "name.tmp.<pid>" could). */
static int write_secret_file(const char *dir, const char *name, const char *content,
                             struct iso_error *err)
{
	char path[1024], text[ISO_TOKEN_MAX + 2];
	int r;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return iso_error_set(err, ISO_E_INVALID, "state-dir", "state dir path too long");
	snprintf(text, sizeof(text), "%s\n", content);
	r = iso_file_write_atomic(path, text, strlen(text), 0600, false, err);
	sodium_memzero(text, sizeof(text));
	return r;
}

int iso_controller_bootstrap_admin(struct iso_controller *c, const char *state_dir, bool force,
                                   bool *created, struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	struct iso_token t = {.role = ISO_ROLE_CLUSTER_ADMIN};
	char known[ISO_TOKEN_ID_LEN + 8];
	char secret[ISO_TOKEN_MAX];
	int r;

	*created = false;
	r = ops->meta_get(c->store, "bootstrap_token", known, sizeof(known), err);
	if (r == 0 && !force)
		return 0;
	if (r < 0 && r != -ENOENT)
		return r;

	iso_strlcpy(t.user, "bootstrap-admin", sizeof(t.user));
	iso_strlcpy(t.description, "written to admin.token at first start", sizeof(t.description));
	r = ctl_token_new(&t, secret, sizeof(secret), err);
	if (r < 0)
		return r;
	/* File first: a crash before the commit leaves a file whose token the
	 * store does not know, and the next start simply writes a new one. */
	r = write_secret_file(state_dir, "admin.token", secret, err);
	sodium_memzero(secret, sizeof(secret));
	if (r < 0)
		return r;
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = ops->token_insert(c->store, &t, err);
	if (r == 0)
		r = ops->meta_set(c->store, "bootstrap_token", t.id, err);
	if (r == 0)
		ctl_emit(c, NULL,
		         &(struct ctl_event){.action = "token.issue",
		                             .kind = "token",
		                             .id = t.id,
		                             .details = json_pack("{s:s, s:s, s:b}", "role",
		                                                  iso_role_name(t.role), "user",
		                                                  t.user, "bootstrap", 1)});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	*created = true;
	iso_log(ISO_LOG_INFO, "bootstrap_token_written", "token_id=%s path=%s/admin.token", t.id,
	        state_dir);
	return 0;
}

/* ---- use cases ---- */

/* Is token `t` within `scope` of principal `p`? */
static bool token_in_scope(enum ctl_scope scope, const struct iso_principal *p,
                           const struct iso_token *t)
{
	switch (scope) {
	case CTL_SCOPE_ALL:
		return true;
	case CTL_SCOPE_TENANT:
		return p->tenant_id > 0 && t->tenant_id == p->tenant_id;
	case CTL_SCOPE_OWN:
		return strcmp(t->id, p->token_id) == 0;
	default:
		return false;
	}
}

static bool token_visible(const struct iso_principal *p, const struct iso_token *t)
{
	return token_in_scope(ctl_scope_of(p, "token.read"), p, t);
}

/* A node-agent token's node: given, well-formed and in the inventory. */
static int token_node(struct iso_controller *c, const struct iso_token_request *req,
                      struct iso_token *t, struct iso_error *err)
{
	if (req->role != ISO_ROLE_NODE_AGENT) {
		if (req->node)
			return iso_error_set(err, ISO_E_INVALID, "node",
			                     "node: only a node-agent token names a node, not a %s "
			                     "token",
			                     iso_role_name(req->role));
		return 0;
	}
	if (!req->node)
		return iso_error_set(
		    err, ISO_E_INVALID, "node",
		    "node: required for a node-agent token (the node it acts for)");
	if (!iso_name_valid(req->node))
		return iso_error_set(err, ISO_E_INVALID, "node",
		                     "node: invalid name (want [a-z0-9][a-z0-9._-]{0,62})");
	if (iso_cluster_state_node_index(&c->cs, req->node) < 0)
		return iso_error_set(err, ISO_E_INVALID, "node",
		                     "node: no node \"%s\" in the inventory", req->node);
	iso_strlcpy(t->node, req->node, sizeof(t->node));
	return 0;
}

int iso_controller_token_issue(struct iso_controller *c, const struct iso_principal *p,
                               const struct iso_token_request *req, struct iso_token *out,
                               char *secret, size_t secret_size, struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	struct iso_token t = {.role = req->role};
	struct iso_tenant tn;
	int r;

	enum ctl_scope scope;

	r = ctl_authorize(p, "token.issue", &scope, err);
	if (r < 0)
		return r;
	if (iso_role_is_tenant_scoped(req->role)) {
		r = ctl_resolve_tenant(c, p, req->tenant, "tenant", &tn, err);
		if (r < 0)
			return r;
		t.tenant_id = tn.id;
	} else {
		if (scope != CTL_SCOPE_ALL)
			return iso_error_set(err, ISO_E_FORBIDDEN, "role",
			                     "role: a tenant-admin may issue only tenant-admin "
			                     "or tenant-user tokens");
		if (req->tenant)
			return iso_error_set(err, ISO_E_INVALID, "tenant",
			                     "tenant: a %s token belongs to no tenant",
			                     iso_role_name(req->role));
	}
	r = token_node(c, req, &t, err);
	if (r < 0)
		return r;
	/* the driver logs in with it as its username (docs/openstack.md) */
	if (req->role == ISO_ROLE_NEUTRON && (!req->user || !req->user[0]))
		return iso_error_set(err, ISO_E_INVALID, "user",
		                     "user: required for a neutron token (ml2_conf.ini [sdn] "
		                     "username)");
	if (req->user && req->user[0] && !iso_name_valid(req->user))
		return iso_error_set(err, ISO_E_INVALID, "user",
		                     "user: invalid name (want [a-z0-9][a-z0-9._-]{0,62})");
	if (req->expires_in_s < 0 || req->expires_in_s > 10LL * 365 * 24 * 3600)
		return iso_error_set(err, ISO_E_INVALID, "expires_in_s",
		                     "expires_in_s: must be 0 (never) to 315360000 (ten years)");
	iso_strlcpy(t.user, req->user ? req->user : "", sizeof(t.user));
	/* Stored, listed and shown by isoctl: no control characters in it. */
	if (req->description && !iso_text_valid(req->description))
		return iso_error_set(err, ISO_E_INVALID, "description",
		                     "description: control characters (newlines, escapes) are not "
		                     "allowed");
	if (req->description &&
	    iso_strlcpy(t.description, req->description, sizeof(t.description)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "description",
		                     "description: longer than %d bytes", ISO_DESC_MAX - 1);
	/* Every live token is a credential to watch and a row to keep: a
	 * tenant-admin may not mint them without bound. */
	if (t.tenant_id > 0) {
		int live = 0;
		r = ops->token_count_live(c->store, t.tenant_id, iso_now_ms(), &live, err);
		if (r < 0)
			return r;
		if (live >= ISO_MAX_TENANT_TOKENS)
			return iso_error_set(
			    err, ISO_E_LIMIT, "limits.max_tokens",
			    "tenant %s has %d live tokens, the most a tenant may have; "
			    "revoke some first",
			    tn.name, live);
	}
	r = ctl_token_new(&t, secret, secret_size, err);
	if (r < 0)
		return r;
	if (req->expires_in_s)
		t.expires_ms = t.created_ms + req->expires_in_s * 1000;
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = ops->token_insert(c->store, &t, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "token.issue",
		                             .kind = "token",
		                             .id = t.id,
		                             .tenant = t.tenant_id ? tn.name : NULL,
		                             .tenant_id = t.tenant_id,
		                             .details = json_pack("{s:s, s:s, s:I}", "role",
		                                                  iso_role_name(t.role), "user",
		                                                  t.user, "expires_ms",
		                                                  (json_int_t)t.expires_ms)});
	r = ctl_tx_end(c, r, err);
	if (r < 0) {
		sodium_memzero(secret, secret_size);
		return r;
	}
	iso_log(ISO_LOG_INFO, "token_issued", "request_id=%s by=%s token_id=%s role=%s",
	        p->request_id, p->token_id, t.id, iso_role_name(t.role));
	*out = t;
	return 0;
}

int iso_controller_token_get(struct iso_controller *c, const struct iso_principal *p,
                             const char *id, struct iso_token *out, struct iso_error *err)
{
	int r = c->store->ops->token_get(c->store, id, out, err);

	if (r == -ENOENT || (r == 0 && !token_visible(p, out)))
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such token");
	return r;
}

int iso_controller_token_list(struct iso_controller *c, const struct iso_principal *p,
                              const char *tenant, const char *after, int limit,
                              struct iso_token **out, int *n, struct iso_error *err)
{
	int64_t tenant_id = -1;
	enum ctl_scope scope;
	struct iso_tenant tn;
	int r = ctl_authorize(p, "token.list", &scope, err);

	if (r < 0)
		return r;
	if (tenant) {
		r = ctl_resolve_tenant(c, p, tenant, "tenant", &tn, err);
		if (r < 0)
			return r;
		tenant_id = tn.id;
	} else if (scope != CTL_SCOPE_ALL) {
		tenant_id = p->tenant_id;
	}
	if (scope == CTL_SCOPE_OWN) {
		/* A tenant-user sees one token: its own. */
		struct iso_token *one = calloc(1, sizeof(*one));
		if (!one)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		*n = 0;
		if ((!after || strcmp(after, p->token_id) < 0) && limit != 0 &&
		    c->store->ops->token_get(c->store, p->token_id, one, err) == 0)
			*n = 1;
		*out = one;
		return 0;
	}
	return c->store->ops->token_list(c->store, tenant_id, after, limit, out, n, err);
}

int iso_controller_token_revoke(struct iso_controller *c, const struct iso_principal *p,
                                const char *id, struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	struct iso_token t;
	int r;

	r = iso_controller_token_get(c, p, id, &t, err);
	if (r < 0)
		return r;
	enum ctl_scope scope;
	r = ctl_authorize(p, "token.revoke", &scope, err);
	if (r == 0 && !token_in_scope(scope, p, &t))
		r = iso_error_set(err, ISO_E_FORBIDDEN, NULL, "role %s may not revoke token %s",
		                  iso_role_name(p->role), t.id);
	if (r < 0)
		return r;
	char tenant[ISO_NAME_MAX];
	iso_controller_tenant_name(c, t.tenant_id, tenant, sizeof(tenant));
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = ops->token_revoke(c->store, id, iso_now_ms(), err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "token.revoke",
		                             .kind = "token",
		                             .id = t.id,
		                             .tenant = tenant,
		                             .tenant_id = t.tenant_id});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	iso_log(ISO_LOG_INFO, "token_revoked", "request_id=%s by=%s token_id=%s", p->request_id,
	        p->token_id, id);
	return 0;
}

/* audit.c: the controller's side of the audit log. Use cases queue events;
 * the transaction that makes their change durable also appends the events and,
 * at most once a second, a signed tree head. At start the whole stored log is
 * checked against its signed heads before anything else runs, and reads of
 * the log are themselves recorded. Tenant-admins see only events about their
 * tenant's objects; proofs reveal hashes, never another tenant's ids.
 *
 * Failures without a valid token cost an attacker nothing, so they are not
 * one event each: they are counted per (source, outcome, action) and
 * interval, and written as one event with the count, the first and last time
 * and a few sample ids (PCI DSS 10.2: every attempt accounted for, without
 * letting a client grow the log at will). Every client-chosen text that goes
 * into an event is bounded and escaped here (iso_escape). */
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <string.h>

#include "controller/internal.h"

#define HEAD_INTERVAL_MS 1000
#define BREAK_META       "audit_break_accepted_ms"

/* Unauthenticated failures: one event per bucket per interval, at most
 * FAIL_MAX_BUCKETS buckets plus one overflow bucket per outcome. */
#define FAIL_INTERVAL_MS 10000
#define FAIL_MAX_BUCKETS 64
#define FAIL_SAMPLE      4  /* request ids and object ids kept per bucket */
#define FAIL_ID_BYTES    64 /* of a client-chosen id, before escaping */

struct fail_bucket {
	char source[64]; /* "*": the overflow bucket of its outcome */
	char action[48];
	char kind[24];
	enum iso_audit_outcome outcome;
	char reason[128];
	int64_t count, first_ms, last_ms;
	char request_ids[FAIL_SAMPLE][80];
	char object_ids[FAIL_SAMPLE][80];
	int n_request_ids, n_object_ids;
};

struct ctl_audit_failures {
	int64_t since_ms; /* when the first failure of this interval was counted */
	int n;
	struct fail_bucket b[FAIL_MAX_BUCKETS + 2];
};

/* Client-chosen text (a path segment, a request id, a message quoting a
 * body) as it may be stored: at most `max` bytes of it, escaped. */
static void clean_copy(char *dst, size_t size, const char *src, size_t max)
{
	iso_escape(dst, size, src ? src : "", strnlen(src ? src : "", max), 0);
}

void ctl_audit_drop_queue(struct iso_controller *c)
{
	for (int i = 0; i < c->n_queue; i++)
		iso_audit_event_clear(&c->queue[i]);
	c->n_queue = 0;
}

static void fill_actor(struct iso_audit_event *e, const struct iso_principal *p)
{
	if (!p) {
		iso_strlcpy(e->actor_role, "system", sizeof(e->actor_role));
		return;
	}
	iso_strlcpy(e->source, p->source, sizeof(e->source));
	clean_copy(e->request_id, sizeof(e->request_id), p->request_id, sizeof(e->request_id));
	if (!p->token_id[0]) {
		iso_strlcpy(e->actor_role, "anonymous", sizeof(e->actor_role));
		return;
	}
	iso_strlcpy(e->actor_token, p->token_id, sizeof(e->actor_token));
	iso_strlcpy(e->actor_role, iso_role_name(p->role), sizeof(e->actor_role));
	iso_strlcpy(e->actor_tenant, p->tenant, sizeof(e->actor_tenant));
}

static void build_event(struct iso_audit_event *e, const struct iso_principal *p,
                        const struct ctl_event *ev, enum iso_audit_outcome outcome,
                        const char *reason)
{
	memset(e, 0, sizeof(*e));
	fill_actor(e, p);
	iso_strlcpy(e->action, ev->action, sizeof(e->action));
	iso_strlcpy(e->object_kind, ev->kind, sizeof(e->object_kind));
	/* The id may be a path segment as a client sent it. */
	clean_copy(e->object_id, sizeof(e->object_id), ev->id, FAIL_ID_BYTES);
	iso_strlcpy(e->object_tenant, ev->tenant ? ev->tenant : "", sizeof(e->object_tenant));
	e->object_tenant_id = ev->tenant && ev->tenant[0] ? ev->tenant_id : 0;
	e->outcome = outcome;
	clean_copy(e->reason, sizeof(e->reason), reason, sizeof(e->reason));
	if (ev->details) {
		e->details = json_dumps(ev->details, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(ev->details);
	}
}

/* A free slot at the end of the queue, or NULL (and the flush then fails for
 * lack of the event: no silent gap). */
static struct iso_audit_event *queue_slot(struct iso_controller *c, const char *action)
{
	if (c->cap_queue < 0)
		return NULL;
	if (c->n_queue == c->cap_queue) {
		int cap = c->cap_queue ? c->cap_queue * 2 : 8;
		struct iso_audit_event *q = realloc(c->queue, (size_t)cap * sizeof(*q));
		if (!q) {
			iso_log(ISO_LOG_ERR, "audit_queue_oom", "action=%s", action);
			c->cap_queue = -1;
			return NULL;
		}
		c->queue = q;
		c->cap_queue = cap;
	}
	return &c->queue[c->n_queue++];
}

void ctl_emit(struct iso_controller *c, const struct iso_principal *p, const struct ctl_event *ev)
{
	struct iso_audit_event *e = queue_slot(c, ev->action);

	if (!e) {
		json_decref(ev->details);
		return;
	}
	build_event(e, p, ev, ISO_AUDIT_SUCCESS, NULL);
}

/* Appends one event to the store and the tree, inside the open transaction. */
static int append_event(struct iso_controller *c, struct iso_audit_event *e, struct iso_error *err)
{
	_cleanup_free_ char *body = NULL;
	struct iso_audit_record rec = {0};
	size_t len = 0;
	int r;

	e->seq = (int64_t)iso_merkle_size(c->tree);
	e->time_ms = iso_now_ms();
	r = iso_audit_event_encode(e, &body, &len, err);
	if (r < 0)
		return r;
	rec.seq = e->seq;
	rec.tenant_id = e->object_tenant_id;
	rec.body = body;
	rec.len = len;
	iso_audit_leaf_hash(body, len, rec.leaf);
	r = c->store->ops->audit_append(c->store, &rec, err);
	if (r < 0)
		return r;
	if (iso_merkle_append(c->tree, rec.leaf) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: out of memory");
	return 0;
}

static int sign_head(struct iso_controller *c, struct iso_error *err)
{
	struct iso_audit_head h = {.size = iso_merkle_size(c->tree), .time_ms = iso_now_ms()};
	int r = iso_merkle_root(c->tree, h.size, h.root);

	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: cannot compute the root");
	iso_audit_head_sign(&h, &c->key);
	r = c->store->ops->audit_head_put(c->store, &h, err);
	if (r < 0)
		return r;
	c->head = h;
	c->have_head = true;
	return 0;
}

int ctl_audit_flush(struct iso_controller *c, bool force, struct iso_error *err)
{
	int r;

	if (c->cap_queue < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: out of memory");
	for (int i = 0; i < c->n_queue; i++) {
		r = append_event(c, &c->queue[i], err);
		if (r < 0)
			return r;
	}
	/* Written: a second flush in the same transaction must not repeat them. */
	ctl_audit_drop_queue(c);
	bool grown = !c->have_head || c->head.size < iso_merkle_size(c->tree);
	if (grown && (force || !c->have_head || iso_now_ms() - c->head.time_ms >= HEAD_INTERVAL_MS))
		return sign_head(c, err);
	return 0;
}

void ctl_audit_undo(struct iso_controller *c, uint64_t size, const struct iso_audit_head *head,
                    bool have_head)
{
	iso_merkle_truncate(c->tree, size);
	c->head = *head;
	c->have_head = have_head;
	if (c->cap_queue < 0)
		c->cap_queue = 0;
}

int ctl_audit_sign_now(struct iso_controller *c, struct iso_error *err)
{
	/* The flush runs before ctl_tx_end, which remembers the tree and head
	 * only as it finds them: a failed commit must take the tree and head
	 * back to what they were before this flush. */
	uint64_t size = iso_merkle_size(c->tree);
	struct iso_audit_head head = c->head;
	bool have_head = c->have_head;
	int r = ctl_tx_begin(c, err);

	if (r == 0)
		r = ctl_audit_flush(c, true, err);
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		ctl_audit_undo(c, size, &head, have_head);
	return r;
}

void ctl_record(struct iso_controller *c, const struct iso_principal *p, const struct ctl_event *ev,
                enum iso_audit_outcome outcome, const char *reason)
{
	struct iso_error err = {0};
	int r = ctl_tx_begin(c, &err);

	if (r == 0) {
		/* Queued by hand: ctl_emit records successes only. */
		ctl_emit(c, p, ev);
		if (c->n_queue > 0) {
			struct iso_audit_event *e = &c->queue[c->n_queue - 1];
			e->outcome = outcome;
			iso_strlcpy(e->reason, reason ? reason : "", sizeof(e->reason));
		}
	} else {
		json_decref(ev->details);
	}
	r = ctl_tx_end(c, r, &err);
	if (r < 0)
		iso_log(ISO_LOG_ERR, "audit_record_failed", "action=%s error=\"%s\"", ev->action,
		        err.message);
}

/* ---- the start-up check ---- */

struct check {
	struct iso_controller *c;
	int64_t checked_from_ms; /* heads signed earlier were judged when a break was accepted */
	int64_t expect;          /* next seq */
	int64_t first_bad;       /* -1 when none */
	char problem[ISO_ERR_MSG_MAX];
};

static void problem(struct check *k, int64_t seq, const char *fmt, ...) _printf_(3, 4);
static void problem(struct check *k, int64_t seq, const char *fmt, ...)
{
	va_list ap;

	if (k->problem[0])
		return; /* the first one is what the operator needs */
	k->first_bad = seq;
	va_start(ap, fmt);
	vsnprintf(k->problem, sizeof(k->problem), fmt, ap);
	va_end(ap);
}

static int check_event(void *arg, const struct iso_audit_record *rec)
{
	struct check *k = arg;
	struct iso_audit_event e = {0};
	uint8_t leaf[ISO_AUDIT_HASH_LEN];

	if (rec->seq != k->expect)
		problem(k, k->expect, "event %lld is missing (the next stored event is %lld)",
		        (long long)k->expect, (long long)rec->seq);
	/* A missing event keeps its place as a hole (the hash of nothing), so
	 * that leaf index and seq stay one and the same after a break. */
	while (k->expect < rec->seq) {
		uint8_t hole[ISO_AUDIT_HASH_LEN];
		iso_audit_leaf_hash("", 0, hole);
		if (iso_merkle_append(k->c->tree, hole) < 0)
			return -ENOMEM;
		k->expect++;
	}
	iso_audit_leaf_hash(rec->body, rec->len, leaf);
	if (memcmp(leaf, rec->leaf, sizeof(leaf)) != 0)
		problem(k, rec->seq, "event %lld does not match its stored leaf hash (modified)",
		        (long long)rec->seq);
	if (iso_audit_event_decode(rec->body, rec->len, &e, NULL) < 0)
		problem(k, rec->seq, "event %lld is not a canonical event (modified)",
		        (long long)rec->seq);
	else if (e.seq != rec->seq)
		problem(k, rec->seq, "event stored as %lld says it is %lld (moved or swapped)",
		        (long long)rec->seq, (long long)e.seq);
	iso_audit_event_clear(&e);
	/* The tree is built from what the bytes hash to: heads then show
	 * whether those bytes are the ones that were signed. */
	if (iso_merkle_append(k->c->tree, leaf) < 0)
		return -ENOMEM;
	k->expect = rec->seq + 1;
	return 0;
}

static int check_head(void *arg, const struct iso_audit_head *h)
{
	struct check *k = arg;
	uint64_t size = iso_merkle_size(k->c->tree);
	uint8_t root[ISO_AUDIT_HASH_LEN];
	char when[40];

	if (h->time_ms < k->checked_from_ms)
		return 0; /* evidence of an accepted break: kept, exported, not re-judged */
	iso_format_time(h->time_ms, when, sizeof(when));
	if (!iso_audit_keyset_signer(&k->c->keys, h)) {
		char id[2 * ISO_AUDIT_KEY_ID_LEN + 1];
		bool in_set = false;
		for (size_t i = 0; i < k->c->keys.n; i++)
			in_set |=
			    memcmp(k->c->keys.keys[i].id, h->key_id, ISO_AUDIT_KEY_ID_LEN) == 0;
		iso_audit_key_id_format(h->key_id, id);
		if (iso_audit_key_id_known(h->key_id) && !in_set)
			problem(k, -1,
			        "the head of size %llu signed at %s is signed by key %s, which is "
			        "not in the audit key set (%s)",
			        (unsigned long long)h->size, when, id,
			        k->c->keys_file[0] ? k->c->keys_file
			                           : "this daemon's own key only");
		else
			problem(k, -1,
			        "the head of size %llu signed at %s has a bad signature "
			        "(forged or altered, or signed by a key not in the audit key set)",
			        (unsigned long long)h->size, when);
		return 0;
	}
	if (h->size > size) {
		problem(k, (int64_t)size,
		        "the log was truncated: the head signed at %s covers %llu events, %llu are "
		        "stored",
		        when, (unsigned long long)h->size, (unsigned long long)size);
		return 0;
	}
	if (iso_merkle_root(k->c->tree, h->size, root) == 0 &&
	    memcmp(root, h->root, sizeof(root)) != 0)
		problem(k, -1, "the first %llu events do not match the head signed at %s",
		        (unsigned long long)h->size, when);
	k->c->head = *h;
	k->c->have_head = true;
	return 0;
}

int ctl_audit_open(struct iso_controller *c, const char *state_dir, const char *keys_file,
                   bool accept_break, struct iso_error *err)
{
	struct check k = {.c = c, .first_bad = -1};
	bool created = false;
	int r;

	r = iso_audit_key_load_or_create(state_dir, &c->key, &created, err);
	if (r < 0)
		return r;
	r = iso_audit_keyset_load(state_dir, keys_file, c->key.pk, &c->keys, c->keys_file,
	                          sizeof(c->keys_file), err);
	if (r < 0)
		return r;
	if (c->keys_file[0])
		iso_log(ISO_LOG_INFO, "audit_keys", "file=%s keys=%zu", c->keys_file, c->keys.n);
	r = iso_merkle_new(&c->tree);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: out of memory");
	char since[24];
	if (c->store->ops->meta_get(c->store, BREAK_META, since, sizeof(since), NULL) == 0)
		k.checked_from_ms = strtoll(since, NULL, 10);
	r = c->store->ops->audit_scan(c->store, -1, 0, 0, check_event, &k, err);
	if (r == 0)
		r = c->store->ops->audit_head_scan(c->store, check_head, &k, err);
	if (r < 0)
		return r == -ENOMEM
		           ? iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: out of memory")
		           : r;
	if (created && iso_merkle_size(c->tree) > 0)
		problem(&k, -1,
		        "the signing key was missing and a new one was made, so no head "
		        "can be checked");
	if (!k.problem[0]) {
		iso_log(ISO_LOG_INFO, "audit_checked", "events=%llu head_size=%llu",
		        (unsigned long long)iso_merkle_size(c->tree),
		        (unsigned long long)(c->have_head ? c->head.size : 0));
		return 0;
	}
	if (!accept_break)
		return iso_error_set(
		    err, ISO_E_CONFLICT, "audit",
		    "audit log check failed: %s. Inspect: isoctl audit export "
		    "--state-dir DIR --out F; isoctl audit verify %s%s F. To run anyway, "
		    "recording the break in the log for good: --audit-accept-break",
		    k.problem, c->keys_file[0] ? "--keys " : "--pubkey DIR/audit.pub",
		    c->keys_file);
	iso_log(ISO_LOG_ERR, "audit_break_accepted", "problem=\"%s\"", k.problem);
	/* The break is signed over from here on: a head over the log as it now
	 * is, in the same transaction as the event saying so and the marker that
	 * later starts judge only heads signed from now on. Earlier heads stay
	 * in the store and in every export as the evidence. */
	int64_t now = iso_now_ms();
	char marker[24];
	snprintf(marker, sizeof(marker), "%lld", (long long)now);
	struct ctl_event ev = {
	    .action = "audit.break_accepted",
	    .kind = "audit",
	    .details =
	        json_pack("{s:s, s:I}", "problem", k.problem, "first_bad", (json_int_t)k.first_bad),
	};
	c->have_head = false;
	r = ctl_tx_begin(c, err);
	if (r == 0) {
		ctl_emit(c, NULL, &ev);
		if (c->n_queue > 0) {
			struct iso_audit_event *e = &c->queue[c->n_queue - 1];
			e->outcome = ISO_AUDIT_ERROR;
			iso_strlcpy(e->reason, k.problem, sizeof(e->reason));
		}
		r = c->store->ops->meta_set(c->store, BREAK_META, marker, err);
	} else {
		json_decref(ev.details);
	}
	if (r == 0)
		r = ctl_audit_flush(c, true, err);
	return ctl_tx_end(c, r, err);
}

void ctl_audit_close(struct iso_controller *c)
{
	free(c->failures);
	c->failures = NULL;
	ctl_audit_drop_queue(c);
	free(c->queue);
	c->queue = NULL;
	iso_merkle_free(c->tree);
	c->tree = NULL;
	sodium_memzero(&c->key, sizeof(c->key));
}

/* ---- reads ---- */

static int require_reader(const struct iso_principal *p, struct iso_error *err)
{
	return ctl_authorize(p, "audit.read", NULL, err);
}

/* Does `p` read the whole log (else only its tenant's events)? */
static bool reads_all(const struct iso_principal *p)
{
	return ctl_scope_of(p, "audit.read") == CTL_SCOPE_ALL;
}

/* A reader who can see unauthenticated failures (they belong to no tenant)
 * sees them counted up to now: their interval ends early. */
static void flush_for_reader(struct iso_controller *c, const struct iso_principal *p)
{
	if (reads_all(p))
		ctl_audit_failures_flush(c, true);
}

static void record_read(struct iso_controller *c, const struct iso_principal *p, const char *what,
                        int64_t tenant_id, const char *tenant)
{
	struct ctl_event ev = {.action = "audit.read",
	                       .kind = "audit",
	                       .id = what,
	                       .tenant = tenant,
	                       .tenant_id = tenant_id};
	ctl_record(c, p, &ev, ISO_AUDIT_SUCCESS, NULL);
}

/* ---- unauthenticated failures, counted ---- */

static bool same_key(const struct fail_bucket *b, const char *source, const char *action,
                     enum iso_audit_outcome outcome)
{
	return b->outcome == outcome && strcmp(b->source, source) == 0 &&
	       strcmp(b->action, action) == 0;
}

static struct fail_bucket *fail_bucket(struct ctl_audit_failures *f, const char *source,
                                       const char *action, const char *kind,
                                       enum iso_audit_outcome outcome, const char *reason)
{
	struct fail_bucket *b;

	for (int i = 0; i < f->n; i++)
		if (same_key(&f->b[i], source, action, outcome))
			return &f->b[i];
	/* Full: the rest of this interval's sources share one bucket per
	 * outcome, whose source, action and kind are "*". */
	if (f->n >= FAIL_MAX_BUCKETS) {
		for (int i = FAIL_MAX_BUCKETS; i < f->n; i++)
			if (f->b[i].outcome == outcome)
				return &f->b[i];
		source = action = kind = "*";
	}
	b = &f->b[f->n++];
	memset(b, 0, sizeof(*b));
	iso_strlcpy(b->source, source, sizeof(b->source));
	iso_strlcpy(b->action, action, sizeof(b->action));
	iso_strlcpy(b->kind, kind, sizeof(b->kind));
	b->outcome = outcome;
	clean_copy(b->reason, sizeof(b->reason), reason, sizeof(b->reason));
	return b;
}

static void sample(char (*ids)[80], int *n, const char *id, bool distinct)
{
	char clean[80];

	if (*n >= FAIL_SAMPLE || !id || !id[0])
		return;
	clean_copy(clean, sizeof(clean), id, FAIL_ID_BYTES);
	for (int i = 0; distinct && i < *n; i++)
		if (strcmp(ids[i], clean) == 0)
			return;
	iso_strlcpy(ids[(*n)++], clean, sizeof(ids[0]));
}

static void count_failure(struct iso_controller *c, const struct iso_principal *p,
                          const char *action, const char *kind, const char *id,
                          enum iso_audit_outcome outcome, const char *reason)
{
	struct ctl_audit_failures *f = c->failures;
	int64_t now = iso_now_ms();

	if (!f) {
		f = c->failures = calloc(1, sizeof(*f));
		if (!f) {
			iso_log(ISO_LOG_ERR, "audit_failure_lost", "action=%s source=%s", action,
			        p ? p->source : "");
			return;
		}
	}
	if (f->n == 0)
		f->since_ms = now;
	struct fail_bucket *b =
	    fail_bucket(f, p && p->source[0] ? p->source : "-", action, kind, outcome, reason);
	if (b->count++ == 0)
		b->first_ms = now;
	b->last_ms = now;
	sample(b->request_ids, &b->n_request_ids, p ? p->request_id : NULL, false);
	sample(b->object_ids, &b->n_object_ids, id, true);
}

static json_t *id_array(const char (*ids)[80], int n)
{
	json_t *a = json_array();

	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(ids[i]));
	return a;
}

void ctl_audit_failures_flush(struct iso_controller *c, bool force)
{
	struct ctl_audit_failures *f = c->failures;
	struct iso_error err = {0};
	int64_t total = 0;
	int r;

	if (!f || f->n == 0 || (!force && iso_now_ms() - f->since_ms < FAIL_INTERVAL_MS))
		return;
	r = ctl_tx_begin(c, &err);
	for (int i = 0; r == 0 && i < f->n; i++) {
		const struct fail_bucket *b = &f->b[i];
		struct iso_audit_event *e = queue_slot(c, b->action);
		if (!e)
			break; /* the flush below fails: the transaction rolls back */
		memset(e, 0, sizeof(*e));
		iso_strlcpy(e->actor_role, "anonymous", sizeof(e->actor_role));
		iso_strlcpy(e->source, b->source, sizeof(e->source));
		iso_strlcpy(e->action, b->action, sizeof(e->action));
		iso_strlcpy(e->object_kind, b->kind, sizeof(e->object_kind));
		e->outcome = b->outcome;
		iso_strlcpy(e->reason, b->reason, sizeof(e->reason));
		json_t *d =
		    json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:b}", "count", (json_int_t)b->count,
		              "first", (json_int_t)b->first_ms, "last", (json_int_t)b->last_ms,
		              "interval_ms", (json_int_t)FAIL_INTERVAL_MS, "request_ids",
		              id_array(b->request_ids, b->n_request_ids), "object_ids",
		              id_array(b->object_ids, b->n_object_ids), "overflow",
		              strcmp(b->source, "*") == 0);
		e->details = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(d);
		if (!e->details)
			r = iso_error_set(&err, ISO_E_INTERNAL, NULL, "audit: out of memory");
		total += b->count;
	}
	r = ctl_tx_end(c, r, &err);
	if (r < 0)
		iso_log(ISO_LOG_ERR, "audit_failures_lost", "buckets=%d failures=%lld error=\"%s\"",
		        f->n, (long long)total, err.message);
	else /* the daemon's log gets the summary, not a line per attempt */
		iso_log(ISO_LOG_WARN, "auth_failures_counted", "buckets=%d failures=%lld", f->n,
		        (long long)total);
	f->n = 0;
}

void iso_controller_audit_failure(struct iso_controller *c, const struct iso_principal *p,
                                  const char *action, const char *kind, const char *id,
                                  enum iso_audit_outcome outcome, const char *reason)
{
	/* The object's tenant is left out: a refused attempt on another tenant's
	 * object must not tell that tenant who tried. */
	struct ctl_event ev = {.action = action, .kind = kind, .id = id};

	/* Without a valid token: counted (above). With one, each failure is an
	 * event of its own: the token is attributable and revocable, and its
	 * holder's successful requests cost the log as much. */
	if (!p || !p->token_id[0]) {
		count_failure(c, p, action, kind, id, outcome, reason);
		return;
	}
	ctl_record(c, p, &ev, outcome, reason);
}

int iso_controller_audit_head(struct iso_controller *c, const struct iso_principal *p,
                              struct iso_audit_head *out, struct iso_error *err)
{
	int r = require_reader(p, err);

	if (r < 0)
		return r;
	flush_for_reader(c, p);
	record_read(c, p, "head", p->tenant_id, p->tenant);
	if (!c->have_head || c->head.size < iso_merkle_size(c->tree)) {
		r = ctl_audit_sign_now(c, err);
		if (r < 0)
			return r;
	}
	*out = c->head;
	return 0;
}

struct page {
	struct iso_controller *c;
	uint64_t proof_size;
	iso_audit_item_fn fn;
	void *arg;
	int64_t last;
	int count;
};

static int page_item(void *arg, const struct iso_audit_record *rec)
{
	struct page *pg = arg;
	struct iso_audit_item it = {.seq = rec->seq, .body = rec->body, .len = rec->len};

	memcpy(it.leaf, rec->leaf, sizeof(it.leaf));
	if (pg->proof_size > (uint64_t)rec->seq) {
		it.proof_size = pg->proof_size;
		if (iso_merkle_inclusion(pg->c->tree, (uint64_t)rec->seq, pg->proof_size, it.proof,
		                         &it.n_proof) < 0)
			return -EIO;
	}
	pg->last = rec->seq;
	pg->count++;
	return pg->fn(pg->arg, &it);
}

int iso_controller_audit_events(struct iso_controller *c, const struct iso_principal *p,
                                const char *tenant, int64_t after, int limit, uint64_t proof_size,
                                iso_audit_item_fn fn, void *arg, int64_t *next,
                                struct iso_error *err)
{
	struct page pg = {.c = c, .proof_size = proof_size, .fn = fn, .arg = arg, .last = -1};
	int64_t tenant_id = 0;
	struct iso_tenant tn;
	int r;

	r = require_reader(p, err);
	if (r < 0)
		return r;
	flush_for_reader(c, p);
	if (tenant || !reads_all(p)) {
		r = ctl_resolve_tenant(c, p, tenant, "tenant", &tn, err);
		if (r < 0)
			return r;
		tenant_id = tn.id;
	}
	if (proof_size > 0 && (!c->have_head || proof_size > c->head.size))
		return iso_error_set(
		    err, ISO_E_INVALID, "size",
		    "size: proofs are against a signed head; the latest covers %llu "
		    "events (GET /v1/audit/head signs a newer one)",
		    (unsigned long long)(c->have_head ? c->head.size : 0));
	r = c->store->ops->audit_scan(c->store, after, tenant_id, limit, page_item, &pg, err);
	if (r < 0)
		return r == -EIO ? iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: proof failed")
		                 : r;
	*next = pg.count >= limit && limit > 0 ? pg.last : -1;
	record_read(c, p, "events", tenant_id, tenant_id ? tn.name : NULL);
	return 0;
}

struct one {
	struct iso_audit_record rec;
	char *body;
	bool found;
};

static int take_one(void *arg, const struct iso_audit_record *rec)
{
	struct one *o = arg;

	o->rec = *rec;
	o->body = NULL;
	o->found = true;
	return 1;
}

int iso_controller_audit_inclusion(struct iso_controller *c, const struct iso_principal *p,
                                   uint64_t seq, uint64_t size, struct iso_audit_item *out,
                                   struct iso_error *err)
{
	struct one o = {0};
	int r = require_reader(p, err);

	if (r < 0)
		return r;
	if (seq >= size || size > iso_merkle_size(c->tree))
		return iso_error_set(err, ISO_E_INVALID, "seq",
		                     "seq must be below size, and size at most %llu",
		                     (unsigned long long)iso_merkle_size(c->tree));
	r = c->store->ops->audit_scan(c->store, (int64_t)seq - 1, reads_all(p) ? 0 : p->tenant_id,
	                              1, take_one, &o, err);
	if (r < 0)
		return r;
	/* Another tenant's event is as absent as a missing one. */
	if (!o.found || o.rec.seq != (int64_t)seq)
		return iso_error_set(err, ISO_E_NOT_FOUND, "seq", "no such event");
	memset(out, 0, sizeof(*out));
	out->seq = (int64_t)seq;
	memcpy(out->leaf, o.rec.leaf, sizeof(out->leaf));
	out->proof_size = size;
	if (iso_merkle_inclusion(c->tree, seq, size, out->proof, &out->n_proof) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: proof failed");
	record_read(c, p, "inclusion", p->tenant_id, p->tenant);
	return 0;
}

int iso_controller_audit_consistency(struct iso_controller *c, const struct iso_principal *p,
                                     uint64_t from, uint64_t to,
                                     uint8_t proof[][ISO_AUDIT_HASH_LEN], int *n,
                                     struct iso_error *err)
{
	int r = require_reader(p, err);

	if (r < 0)
		return r;
	if (from == 0 || from > to || to > iso_merkle_size(c->tree))
		return iso_error_set(err, ISO_E_INVALID, "from", "need 0 < from <= to <= %llu",
		                     (unsigned long long)iso_merkle_size(c->tree));
	if (iso_merkle_consistency(c->tree, from, to, proof, n) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: proof failed");
	record_read(c, p, "consistency", p->tenant_id, p->tenant);
	return 0;
}

const uint8_t *iso_controller_audit_pubkey(const struct iso_controller *c)
{
	return c->key.pk;
}

/* verify.c: offline verification of an export (docs/audit.md, "What verify
 * checks"). It needs only the export and the public key, so an auditor can
 * run it anywhere. Lines are read in big chunks; verify_lines.c checks event
 * lines on every core, and this file then walks each chunk in order: event
 * seq order, the tree rebuilt from the leaves, every head's signature and
 * root, inclusion and consistency proofs. The first problem stops the walk
 * and is reported with its line and, where one can be named, its seq. */
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "audit/internal.h"

#define CHUNK_BYTES (4u << 20)
/* The first chunk: most exports verified are small (a tenant's, a test's),
 * so chunks start at this and double while the stream fills them. */
#define CHUNK_FIRST (64u << 10)
#define MAX_LINE    ((size_t)64 << 20)

struct chunk {
	char *buf;
	size_t cap, len, tail; /* tail: start of the unfinished last line */
	struct vline *lines;
	struct vres *res;
	size_t n, cap_lines;
	long first_line;
	bool eof;          /* the stream ended in this chunk */
	bool unterminated; /* its last line has no newline */
	bool overlong;     /* its first line is longer than MAX_LINE: stop there */
};

struct head_rec {
	uint64_t size;
	uint8_t root[ISO_AUDIT_HASH_LEN];
	long line;
};

struct held_event {
	int64_t seq;
	uint8_t leaf[ISO_AUDIT_HASH_LEN];
	long line;
};

enum mode { MODE_UNKNOWN, MODE_FULL, MODE_PARTIAL };

struct verifier {
	const char *name;
	const struct iso_audit_keyset *ks;
	struct iso_audit_verdict *v;
	bool failed;
	enum mode mode;
	size_t chunk_bytes; /* the next chunk's size: CHUNK_FIRST .. CHUNK_BYTES */
	/* full: the tree of the leaves so far and the line of each event */
	struct iso_merkle *tree;
	long *ev_line;
	size_t cap_ev_line;
	/* verified heads, sorted by size; heads[0..checked) were compared with
	 * the rebuilt tree (full mode) */
	struct head_rec *heads;
	size_t n_heads, cap_heads, checked;
	uint64_t matched; /* largest head size whose root the leaves rebuilt */
	/* the first event is held until the next line says full or partial */
	bool have_first;
	struct held_event first;
	/* partial: the event waiting for its inclusion proof */
	bool awaiting;
	struct held_event last;
	int64_t last_seq;
};

static void fail(struct verifier *vr, long line, int64_t seq, const char *fmt, ...) _printf_(4, 5);
static void fail(struct verifier *vr, long line, int64_t seq, const char *fmt, ...)
{
	char what[ISO_ERR_MSG_MAX];
	va_list ap;

	if (vr->failed)
		return;
	vr->failed = true;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	vr->v->ok = false;
	vr->v->first_bad = seq;
	vr->v->bad_line = line;
	if (line > 0)
		snprintf(vr->v->message, sizeof(vr->v->message), "%s: line %ld: %s", vr->name, line,
		         what);
	else
		snprintf(vr->v->message, sizeof(vr->v->message), "%s: %s", vr->name, what);
}

/* ---- heads ---- */

static struct head_rec *find_head(struct verifier *vr, uint64_t size)
{
	size_t lo = 0, hi = vr->n_heads;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (vr->heads[mid].size < size)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < vr->n_heads && vr->heads[lo].size == size ? &vr->heads[lo] : NULL;
}

static void check_root(struct verifier *vr, const struct head_rec *h)
{
	uint8_t root[ISO_AUDIT_HASH_LEN];

	if (iso_merkle_root(vr->tree, h->size, root) < 0 ||
	    memcmp(root, h->root, sizeof(root)) != 0) {
		if (vr->matched > 0)
			fail(vr, h->line, -1,
			     "leaves do not rebuild the signed root at size %llu: an event was "
			     "altered and its leaf re-computed, or events were replaced; the first "
			     "%llu events do match a signed head, so the change lies in events "
			     "%llu..%llu",
			     (unsigned long long)h->size, (unsigned long long)vr->matched,
			     (unsigned long long)vr->matched, (unsigned long long)h->size - 1);
		else
			fail(vr, h->line, -1,
			     "leaves do not rebuild the signed root at size %llu: an event was "
			     "altered and its leaf re-computed, or events were replaced",
			     (unsigned long long)h->size);
		return;
	}
	if (h->size > vr->matched)
		vr->matched = h->size;
}

/* Compares every head the rebuilt tree has reached with its root. */
static void drain_heads(struct verifier *vr)
{
	uint64_t count = iso_merkle_size(vr->tree);

	while (!vr->failed && vr->checked < vr->n_heads && vr->heads[vr->checked].size <= count)
		check_root(vr, &vr->heads[vr->checked++]);
}

/* ---- JSON lines other than events ---- */

static bool only_keys(const json_t *o, const char *const *keys)
{
	size_t want = 0;

	for (const char *const *w = keys; *w; w++, want++)
		if (!json_object_get(o, *w))
			return false;
	return json_object_size(o) == want;
}

static bool get_u64(const json_t *o, const char *key, uint64_t *out)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static bool get_hash(const json_t *v, uint8_t out[ISO_AUDIT_HASH_LEN])
{
	return json_is_string(v) &&
	       audit_unhex(json_string_value(v), json_string_length(v), out, ISO_AUDIT_HASH_LEN);
}

static bool get_proof(const json_t *o, uint8_t proof[][ISO_AUDIT_HASH_LEN], int *n)
{
	const json_t *a = json_object_get(o, "proof");

	if (!json_is_array(a) || json_array_size(a) > ISO_AUDIT_MAX_PROOF)
		return false;
	for (size_t i = 0; i < json_array_size(a); i++)
		if (!get_hash(json_array_get(a, i), proof[i]))
			return false;
	*n = (int)json_array_size(a);
	return true;
}

static int on_head(struct verifier *vr, const json_t *o, long line)
{
	static const char *const keys[] = {"type", "size", "root", "time", "signature", NULL};
	static const char *const keyed[] = {"type",      "size", "root", "time",
	                                    "signature", "key",  NULL};
	struct iso_audit_head h = {0};
	const json_t *t = json_object_get(o, "time"), *sig = json_object_get(o, "signature");
	const json_t *kid = json_object_get(o, "key");
	size_t got = 0;
	const char *end = NULL;

	if ((!only_keys(o, keys) && !only_keys(o, keyed)) || !get_u64(o, "size", &h.size) ||
	    (kid && (!json_is_string(kid) ||
	             !audit_unhex(json_string_value(kid), json_string_length(kid), h.key_id,
	                          sizeof(h.key_id)) ||
	             !iso_audit_key_id_known(h.key_id))) ||
	    !get_hash(json_object_get(o, "root"), h.root) || !json_is_integer(t) ||
	    !json_is_string(sig) ||
	    sodium_base642bin(h.sig, sizeof(h.sig), json_string_value(sig), json_string_length(sig),
	                      NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    got != sizeof(h.sig) || end != json_string_value(sig) + json_string_length(sig)) {
		fail(vr, line, -1,
		     "malformed head: expected {\"type\":\"head\",\"size\":N,\"root\":\"<64 hex>\","
		     "\"time\":MS,\"signature\":\"<base64 of 64 bytes>\"} and optionally "
		     "\"key\":\"<16 hex>\"");
		return 0;
	}
	h.time_ms = (int64_t)json_integer_value(t);
	if (!iso_audit_keyset_signer(vr->ks, &h)) {
		char id[2 * ISO_AUDIT_KEY_ID_LEN + 1];
		bool in_set = false;
		iso_audit_key_id_format(h.key_id, id);
		for (size_t i = 0; i < vr->ks->n; i++)
			in_set |= memcmp(vr->ks->keys[i].id, h.key_id, sizeof(h.key_id)) == 0;
		if (kid && !in_set)
			fail(vr, line, -1,
			     "the head of size %llu is signed by key %s, which is not in the key "
			     "set",
			     (unsigned long long)h.size, id);
		else if (kid)
			fail(vr, line, -1,
			     "the head of size %llu has a bad signature for key %s: it was forged "
			     "or altered, or signed with another key",
			     (unsigned long long)h.size, id);
		else
			fail(vr, line, -1,
			     "the head of size %llu has a bad signature: it was forged or altered, "
			     "or signed with a key not in the key set",
			     (unsigned long long)h.size);
		return 0;
	}
	vr->v->heads++;
	struct head_rec *same = find_head(vr, h.size);
	if (same) {
		if (memcmp(same->root, h.root, sizeof(h.root)) != 0)
			fail(vr, line, -1,
			     "two signed heads of size %llu (lines %ld and %ld) disagree on the "
			     "root: the log was rewritten after the first was signed",
			     (unsigned long long)h.size, same->line, line);
		return 0;
	}
	if (vr->n_heads == vr->cap_heads) {
		size_t cap = vr->cap_heads ? vr->cap_heads * 2 : 16;
		struct head_rec *nh = realloc(vr->heads, cap * sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		vr->heads = nh;
		vr->cap_heads = cap;
	}
	/* Keep them sorted by size; heads usually come in ascending order. */
	size_t at = vr->n_heads;
	while (at > 0 && vr->heads[at - 1].size > h.size)
		at--;
	memmove(&vr->heads[at + 1], &vr->heads[at], (vr->n_heads - at) * sizeof(*vr->heads));
	vr->heads[at] = (struct head_rec){.size = h.size, .line = line};
	memcpy(vr->heads[at].root, h.root, sizeof(h.root));
	vr->n_heads++;
	if (vr->mode == MODE_FULL && h.size <= iso_merkle_size(vr->tree)) {
		/* A head after the events it covers: check it now. heads[0..checked)
		 * are exactly those within the tree, and it joins them. */
		vr->checked++;
		check_root(vr, &vr->heads[at]);
	}
	return 0;
}

static void on_inclusion(struct verifier *vr, const json_t *o, long line)
{
	static const char *const keys[] = {"type", "seq", "size", "proof", NULL};
	uint8_t proof[ISO_AUDIT_MAX_PROOF][ISO_AUDIT_HASH_LEN], leaf[ISO_AUDIT_HASH_LEN];
	uint64_t seq, size;
	int n = 0;

	if (!only_keys(o, keys) || !get_u64(o, "seq", &seq) || !get_u64(o, "size", &size) ||
	    !get_proof(o, proof, &n)) {
		fail(vr, line, -1,
		     "malformed inclusion proof: expected {\"type\":\"inclusion\",\"seq\":S,"
		     "\"size\":N,\"proof\":[\"<64 hex>\",...]} with at most %d hashes",
		     ISO_AUDIT_MAX_PROOF);
		return;
	}
	if (vr->mode == MODE_PARTIAL) {
		if (!vr->awaiting || (uint64_t)vr->last.seq != seq) {
			fail(vr, line, (int64_t)seq,
			     "the inclusion proof of event %llu does not follow that event's line",
			     (unsigned long long)seq);
			return;
		}
		memcpy(leaf, vr->last.leaf, sizeof(leaf));
		vr->awaiting = false;
	} else if (vr->mode == MODE_FULL && seq < iso_merkle_size(vr->tree)) {
		iso_merkle_leaf(vr->tree, seq, leaf);
	} else {
		fail(vr, line, (int64_t)seq,
		     "the inclusion proof of event %llu comes before that event's line",
		     (unsigned long long)seq);
		return;
	}
	const struct head_rec *h = find_head(vr, size);
	if (!h) {
		fail(vr, line, (int64_t)seq,
		     "the inclusion proof of event %llu is against size %llu, but no signed head "
		     "of that size comes before it",
		     (unsigned long long)seq, (unsigned long long)size);
		return;
	}
	if (!iso_merkle_verify_inclusion(seq, size, leaf,
	                                 (const uint8_t(*)[ISO_AUDIT_HASH_LEN])proof, n, h->root))
		fail(vr, line, (int64_t)seq,
		     "the inclusion proof of event %llu in the signed head of size %llu does not "
		     "verify: the event or its proof was altered",
		     (unsigned long long)seq, (unsigned long long)size);
}

static void on_consistency(struct verifier *vr, const json_t *o, long line)
{
	static const char *const keys[] = {"type", "from", "to", "proof", NULL};
	uint8_t proof[ISO_AUDIT_MAX_PROOF][ISO_AUDIT_HASH_LEN], empty[ISO_AUDIT_HASH_LEN];
	const uint8_t *from_root = empty;
	uint64_t from, to;
	int n = 0;

	if (!only_keys(o, keys) || !get_u64(o, "from", &from) || !get_u64(o, "to", &to) ||
	    !get_proof(o, proof, &n)) {
		fail(vr, line, -1,
		     "malformed consistency proof: expected {\"type\":\"consistency\",\"from\":A,"
		     "\"to\":B,\"proof\":[\"<64 hex>\",...]} with at most %d hashes",
		     ISO_AUDIT_MAX_PROOF);
		return;
	}
	crypto_hash_sha256(empty, NULL, 0);
	const struct head_rec *a = from ? find_head(vr, from) : NULL, *b = find_head(vr, to);
	if ((from && !a) || !b) {
		fail(vr, line, -1,
		     "the consistency proof from size %llu to %llu needs signed heads of both "
		     "sizes before it; size %llu has none",
		     (unsigned long long)from, (unsigned long long)to,
		     (unsigned long long)(b ? from : to));
		return;
	}
	if (a)
		from_root = a->root;
	if (!iso_merkle_verify_consistency(from, to, from_root, b->root,
	                                   (const uint8_t(*)[ISO_AUDIT_HASH_LEN])proof, n))
		fail(vr, line, -1,
		     "the consistency proof from size %llu to %llu does not verify: the log was "
		     "rewritten between those heads, or the proof was altered",
		     (unsigned long long)from, (unsigned long long)to);
}

/* ---- events ---- */

static int full_event(struct verifier *vr, const struct held_event *e)
{
	uint64_t expect = iso_merkle_size(vr->tree);

	if ((uint64_t)e->seq > expect) {
		fail(vr, e->line, (int64_t)expect,
		     "event %llu is missing: this line holds event %lld where event %llu belongs "
		     "(deleted or reordered)",
		     (unsigned long long)expect, (long long)e->seq, (unsigned long long)expect);
		return 0;
	}
	if ((uint64_t)e->seq < expect) {
		fail(vr, e->line, e->seq,
		     "event %lld appears again after event %llu (inserted, duplicated or "
		     "reordered)",
		     (long long)e->seq, (unsigned long long)expect - 1);
		return 0;
	}
	if (expect == vr->cap_ev_line) {
		size_t cap = vr->cap_ev_line ? vr->cap_ev_line * 2 : 4096;
		long *nl = realloc(vr->ev_line, cap * sizeof(*nl));
		if (!nl)
			return -ENOMEM;
		vr->ev_line = nl;
		vr->cap_ev_line = cap;
	}
	if (iso_merkle_append(vr->tree, e->leaf) < 0)
		return -ENOMEM;
	vr->ev_line[expect] = e->line;
	vr->v->events++;
	if (vr->checked < vr->n_heads && vr->heads[vr->checked].size <= expect + 1)
		drain_heads(vr);
	return 0;
}

static void partial_event(struct verifier *vr, const struct held_event *e)
{
	if (vr->awaiting) {
		fail(vr, vr->last.line, vr->last.seq,
		     "event %lld has no inclusion proof after it (in a partial export every "
		     "event line is followed by its proof)",
		     (long long)vr->last.seq);
		return;
	}
	if (e->seq <= vr->last_seq) {
		fail(vr, e->line, e->seq,
		     "event %lld comes after event %lld (inserted, duplicated or reordered)",
		     (long long)e->seq, (long long)vr->last_seq);
		return;
	}
	vr->last = *e;
	vr->last_seq = e->seq;
	vr->awaiting = true;
	vr->v->events++;
}

static int decide(struct verifier *vr, enum mode mode)
{
	vr->mode = mode;
	if (!vr->have_first) {
		if (mode == MODE_FULL)
			drain_heads(vr);
		return 0;
	}
	vr->have_first = false;
	if (mode == MODE_PARTIAL) {
		partial_event(vr, &vr->first);
		return 0;
	}
	drain_heads(vr);
	return vr->failed ? 0 : full_event(vr, &vr->first);
}

static int on_event(struct verifier *vr, const struct vres *r, long line)
{
	struct held_event e = {.seq = r->seq, .line = line};

	switch ((enum vline_status)r->status) {
	case VS_OK:
		break;
	case VS_BAD_SEQ:
		fail(vr, line, vr->mode == MODE_FULL ? (int64_t)iso_merkle_size(vr->tree) : -1,
		     "malformed event line: \"seq\" is not a non-negative integer in canonical "
		     "form");
		return 0;
	case VS_BAD_LEAF:
		fail(vr, line, r->seq,
		     "malformed event line: \"leaf\" of event %lld is not 64 lowercase hex digits",
		     (long long)r->seq);
		return 0;
	case VS_BAD_LAYOUT:
		fail(vr, line, r->seq,
		     "malformed event line for event %lld: expected exactly {\"type\":\"event\","
		     "\"seq\":S,\"leaf\":\"<64 hex>\",\"event\":{...}} and a newline",
		     (long long)r->seq);
		return 0;
	case VS_LEAF_MISMATCH:
		fail(vr, line, r->seq,
		     "event %lld does not hash to its leaf: its bytes were modified",
		     (long long)r->seq);
		return 0;
	case VS_NO_INNER_SEQ:
		fail(vr, line, r->seq,
		     "event %lld has no readable top-level \"seq\": not a canonical event",
		     (long long)r->seq);
		return 0;
	case VS_INNER_SEQ:
		fail(vr, line, r->seq,
		     "the line says event %lld but the event itself says seq %lld (moved or "
		     "altered)",
		     (long long)r->seq, (long long)r->inner_seq);
		return 0;
	}
	memcpy(e.leaf, r->leaf, sizeof(e.leaf));
	switch (vr->mode) {
	case MODE_UNKNOWN:
		vr->have_first = true;
		vr->first = e;
		return 0;
	case MODE_FULL:
		return full_event(vr, &e);
	case MODE_PARTIAL:
		partial_event(vr, &e);
		return 0;
	}
	return 0;
}

static int on_other(struct verifier *vr, const struct vline *l, long line)
{
	json_error_t jerr;
	json_t *o = json_loadb(l->p, l->len, JSON_REJECT_DUPLICATES, &jerr);
	const char *type;
	int r = 0;

	if (!o) {
		fail(vr, line, -1, "malformed line: not JSON (%s at column %d)", jerr.text,
		     jerr.column);
		return 0;
	}
	type = json_string_value(json_object_get(o, "type"));
	if (!json_is_object(o) || !type) {
		fail(vr, line, -1, "malformed line: not an object with a string \"type\"");
		goto out;
	}
	if (vr->mode == MODE_UNKNOWN && vr->have_first) {
		/* The line after the first event says what kind of export this is:
		 * that event's inclusion proof makes it partial. */
		bool proof_of_first =
		    strcmp(type, "inclusion") == 0 && json_is_integer(json_object_get(o, "seq")) &&
		    json_integer_value(json_object_get(o, "seq")) == vr->first.seq;
		r = decide(vr, proof_of_first ? MODE_PARTIAL : MODE_FULL);
		if (r < 0 || vr->failed)
			goto out;
	}
	if (strcmp(type, "head") == 0)
		r = on_head(vr, o, line);
	else if (strcmp(type, "inclusion") == 0)
		on_inclusion(vr, o, line);
	else if (strcmp(type, "consistency") == 0)
		on_consistency(vr, o, line);
	else if (strcmp(type, "event") == 0)
		fail(vr, line, -1,
		     "malformed event line: event lines must be written exactly as "
		     "{\"type\":\"event\",\"seq\":S,\"leaf\":\"<64 hex>\",\"event\":{...}}");
	else
		fail(vr, line, -1, "unknown line type \"%.32s\"", type);
out:
	json_decref(o);
	return r;
}

static int on_line(struct verifier *vr, const struct vline *l, const struct vres *res, long line)
{
	int r;

	if (res->kind == VL_EVENT) {
		if (vr->mode == MODE_UNKNOWN && vr->have_first) {
			r = decide(vr, MODE_FULL);
			if (r < 0 || vr->failed)
				return r;
		}
		return on_event(vr, res, line);
	}
	return on_other(vr, l, line);
}

/* ---- the stream ---- */

static void chunk_free(struct chunk *c)
{
	free(c->buf);
	free(c->lines);
	free(c->res);
}

/* Reads the next chunk: `prev`'s unfinished last line, then as much as fits,
 * until it holds at least one whole line or the stream ends. */
static int chunk_fill(struct verifier *vr, FILE *f, struct chunk *c, const struct chunk *prev,
                      long first_line, struct iso_error *err)
{
	size_t carry = prev ? prev->len - prev->tail : 0;

	c->len = c->n = c->tail = 0;
	c->eof = c->unterminated = c->overlong = false;
	c->first_line = first_line;
	if (c->cap < carry + vr->chunk_bytes / 2) {
		size_t cap = carry + vr->chunk_bytes;
		char *b = realloc(c->buf, cap);
		if (!b)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s: out of memory",
			                     vr->name);
		c->buf = b;
		c->cap = cap;
	}
	if (carry)
		memcpy(c->buf, prev->buf + prev->tail, carry);
	c->len = carry;
	for (;;) {
		size_t got = fread(c->buf + c->len, 1, c->cap - c->len, f);
		c->len += got;
		if (c->len < c->cap) { /* a short read: end of stream or error */
			if (ferror(f))
				return iso_error_set(err, ISO_E_INTERNAL, NULL,
				                     "%s: read error at line %ld", vr->name,
				                     first_line);
			c->eof = true;
			break;
		}
		if (vr->chunk_bytes < CHUNK_BYTES)
			vr->chunk_bytes *= 2; /* a long stream: read it in bigger chunks */
		/* The carried part is an unfinished line: no newline in it. */
		if (memchr(c->buf + carry, '\n', c->len - carry))
			break;
		if (c->cap >= MAX_LINE) {
			/* Reported when the walk gets here, after what comes before. */
			c->overlong = c->eof = true;
			return 0;
		}
		char *b = realloc(c->buf, c->cap * 2);
		if (!b)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s: out of memory",
			                     vr->name);
		c->buf = b;
		c->cap *= 2;
	}
	/* Split into lines. */
	size_t pos = 0;
	for (;;) {
		const char *nl = memchr(c->buf + pos, '\n', c->len - pos);
		size_t end = nl ? (size_t)(nl - c->buf) : c->len;
		if (!nl && (!c->eof || pos == c->len))
			break;
		if (c->n == c->cap_lines) {
			size_t cap = c->cap_lines ? c->cap_lines * 2 : 256;
			struct vline *nlines = realloc(c->lines, cap * sizeof(*nlines));
			if (!nlines)
				return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s: out of memory",
				                     vr->name);
			c->lines = nlines;
			struct vres *nres = realloc(c->res, cap * sizeof(*nres));
			if (!nres)
				return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s: out of memory",
				                     vr->name);
			c->res = nres;
			c->cap_lines = cap;
		}
		c->lines[c->n++] = (struct vline){.p = c->buf + pos, .len = end - pos};
		if (!nl) {
			c->unterminated = true;
			pos = c->len;
			break;
		}
		pos = end + 1;
	}
	c->tail = pos;
	return 0;
}

/* The in-order walk over a chunk whose lines the pool has checked. */
static int chunk_walk(struct verifier *vr, const struct chunk *c)
{
	for (size_t i = 0; i < c->n && !vr->failed; i++) {
		long line = c->first_line + (long)i;
		if (c->unterminated && i + 1 == c->n) {
			int64_t seq = c->res[i].kind == VL_EVENT && c->res[i].seq >= 0
			                  ? c->res[i].seq
			              : vr->mode == MODE_FULL ? (int64_t)iso_merkle_size(vr->tree)
			                                      : -1;
			fail(vr, line, seq,
			     "the last line has no newline: the export was cut short");
			return 0;
		}
		int r = on_line(vr, &c->lines[i], &c->res[i], line);
		if (r < 0)
			return r;
	}
	if (c->overlong)
		fail(vr, c->first_line, -1, "the line is longer than %zu MiB: not an export",
		     MAX_LINE >> 20);
	return 0;
}

static void finish(struct verifier *vr, long lines)
{
	uint64_t count;

	if (vr->mode == MODE_UNKNOWN && decide(vr, MODE_FULL) < 0)
		return; /* out of memory: the caller reports it */
	if (vr->failed)
		return;
	if (vr->mode == MODE_PARTIAL) {
		if (vr->awaiting) {
			fail(
			    vr, vr->last.line, vr->last.seq,
			    "event %lld has no inclusion proof after it (in a partial export every "
			    "event line is followed by its proof)",
			    (long long)vr->last.seq);
			return;
		}
	}
	if (vr->n_heads == 0) {
		fail(vr, 0, -1,
		     lines ? "the export holds no signed head, so nothing in it can be checked"
		           : "the export is empty");
		return;
	}
	if (vr->mode == MODE_PARTIAL) {
		snprintf(vr->v->message, sizeof(vr->v->message),
		         "%s: ok: partial export: %llu events, each proven included in a signed "
		         "head (%llu signed heads)",
		         vr->name, (unsigned long long)vr->v->events,
		         (unsigned long long)vr->v->heads);
		vr->v->ok = true;
		return;
	}
	count = iso_merkle_size(vr->tree);
	if (vr->checked < vr->n_heads) {
		const struct head_rec *h = &vr->heads[vr->checked];
		fail(vr, h->line, (int64_t)count,
		     "the export ends after %llu events, but the head of size %llu covers more: "
		     "events %llu..%llu are missing (truncated)",
		     (unsigned long long)count, (unsigned long long)h->size,
		     (unsigned long long)count,
		     (unsigned long long)vr->heads[vr->n_heads - 1].size - 1);
		return;
	}
	uint64_t top = vr->heads[vr->n_heads - 1].size;
	if (count > top) {
		fail(vr, vr->ev_line[top], (int64_t)top,
		     "events %llu..%llu are not covered by any signed head (the largest is of size "
		     "%llu): they cannot be checked",
		     (unsigned long long)top, (unsigned long long)count - 1,
		     (unsigned long long)top);
		return;
	}
	vr->v->ok = true;
	snprintf(vr->v->message, sizeof(vr->v->message),
	         "%s: ok: full export: events 0..%lld rebuild the signed root at size %llu "
	         "(%llu signed heads)",
	         vr->name, (long long)count - 1, (unsigned long long)count,
	         (unsigned long long)vr->v->heads);
}

int iso_audit_verify_stream(FILE *f, const char *name, const uint8_t pk[ISO_AUDIT_PK_LEN],
                            struct iso_audit_verdict *v, struct iso_error *err)
{
	_cleanup_free_ struct iso_audit_keyset *ks = malloc(sizeof(*ks));

	if (!ks) {
		memset(v, 0, sizeof(*v));
		v->first_bad = -1;
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s: out of memory",
		                     name ? name : "export");
	}
	iso_audit_keyset_one(ks, pk);
	return iso_audit_verify_stream_keys(f, name, ks, v, err);
}

int iso_audit_verify_stream_keys(FILE *f, const char *name, const struct iso_audit_keyset *ks,
                                 struct iso_audit_verdict *v, struct iso_error *err)
{
	struct verifier vr = {.name = name ? name : "export",
	                      .ks = ks,
	                      .v = v,
	                      .last_seq = -1,
	                      .chunk_bytes = CHUNK_FIRST};
	/* Three chunks in turn: one walked in order, one being checked by the
	 * pool, one being read. */
	struct chunk ch[3] = {{0}}, *prev = NULL, *cur = &ch[0], *next = NULL;
	struct vpool *pool = NULL;
	long next_line = 1;
	int r;

	memset(v, 0, sizeof(*v));
	v->first_bad = -1;
	if (!audit_sodium_ready())
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: libsodium cannot start");
	if (iso_merkle_new(&vr.tree) < 0 || vpool_new(&pool) < 0) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "%s: out of memory", vr.name);
		goto out;
	}
	r = chunk_fill(&vr, f, cur, NULL, next_line, err);
	if (r < 0)
		goto out;
	next_line += (long)cur->n;
	vpool_start(pool, cur->lines, cur->res, cur->n);
	for (;;) {
		/* While the pool checks `cur`: read the next chunk, then walk the
		 * previous one in order, then help with `cur`. */
		next = NULL;
		if (!cur->eof) {
			next = &ch[0] == cur || &ch[0] == prev
			           ? (&ch[1] == cur || &ch[1] == prev ? &ch[2] : &ch[1])
			           : &ch[0];
			r = chunk_fill(&vr, f, next, cur, next_line, err);
			if (r == 0)
				next_line += (long)next->n;
		}
		if (r == 0 && prev)
			r = chunk_walk(&vr, prev);
		vpool_finish(pool);
		if (r < 0 || vr.failed)
			goto out;
		if (!next) {
			r = chunk_walk(&vr, cur);
			if (r < 0)
				goto out;
			break;
		}
		vpool_start(pool, next->lines, next->res, next->n);
		prev = cur;
		cur = next;
	}
	finish(&vr, next_line - 1);
out:
	if (r == -ENOMEM)
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "%s: out of memory", vr.name);
	vpool_free(pool);
	for (int i = 0; i < 3; i++)
		chunk_free(&ch[i]);
	iso_merkle_free(vr.tree);
	free(vr.ev_line);
	free(vr.heads);
	return r < 0 ? r : 0;
}

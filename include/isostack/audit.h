/* audit.h: the tamper-evident audit log. Events have one canonical byte
 * encoding; leaves and nodes hash as in RFC 6962 (leaf = SHA-256(0x00||event),
 * node = SHA-256(0x01||L||R)); an append-only in-memory Merkle tree answers
 * roots, inclusion and consistency proofs; tree heads are signed with Ed25519
 * (libsodium). Storage of events and heads is the store's (same transaction
 * as the change they record); this module is pure computation plus key files.
 * Facts: docs/reference-tenancy.md (Audit). Format: docs/audit.md. */
#ifndef ISOSTACK_AUDIT_H
#define ISOSTACK_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "isostack/model.h"
#include "isostack/util.h"

ISO_PUBLIC_BEGIN

#define ISO_AUDIT_HASH_LEN  32
#define ISO_AUDIT_SIG_LEN   64
#define ISO_AUDIT_PK_LEN    32
#define ISO_AUDIT_SK_LEN    64
#define ISO_AUDIT_MAX_PROOF 64 /* hashes in any proof of a tree of < 2^63 leaves */
/* A key id: the first 8 bytes of SHA-256 of the 32-byte Ed25519 public key,
 * shown as 16 lowercase hex digits (docs/audit.md, "Key ids and key sets"). */
#define ISO_AUDIT_KEY_ID_LEN  8
#define ISO_AUDIT_KEYSET_MAX  64 /* keys in one published key set */
#define ISO_AUDIT_KEYNAME_MAX 64 /* a key's name in a key set, NUL included */

enum iso_audit_outcome { ISO_AUDIT_SUCCESS, ISO_AUDIT_DENIED, ISO_AUDIT_ERROR };
const char *iso_audit_outcome_name(enum iso_audit_outcome o);

struct iso_audit_event {
	int64_t seq;     /* position in the log, 0-based: the leaf index */
	int64_t time_ms; /* wall clock when recorded */
	/* who: a token, or "system" (role) for the daemon's own actions, or
	 * "anonymous" for requests without a valid token */
	char actor_token[ISO_TOKEN_ID_LEN + 1];
	char actor_role[24];
	char actor_tenant[ISO_NAME_MAX];
	char source[64];      /* client address, "" for the system */
	char request_id[72];  /* "" for the system */
	char action[48];      /* "tenant.create", "allocation.place", "auth.login", "audit.read" */
	char object_kind[24]; /* "tenant", "token", "allocation", "node", "audit", "daemon" */
	char object_id[ISO_ID_MAX + ISO_NAME_MAX];
	char object_tenant[ISO_NAME_MAX]; /* owning tenant, "" when none */
	int64_t object_tenant_id;         /* its id, for scoping lists (names can be reused
	                                   * after a delete); NOT part of the encoding */
	enum iso_audit_outcome outcome;
	char reason[ISO_ERR_MSG_MAX]; /* why denied/failed, "" on success */
	char *details;                /* a JSON object as text (any key order), owned; NULL = {} */
};

void iso_audit_event_clear(struct iso_audit_event *e); /* frees details */

/* Canonical encoding: compact JSON, keys sorted at every level, ASCII only
 * (\uXXXX escapes), integers in decimal; the exact rules are in
 * docs/audit.md so that other verifiers can reproduce it. *out is malloc'd. */
int iso_audit_event_encode(const struct iso_audit_event *e, char **out, size_t *len,
                           struct iso_error *err);
/* Strict: refuses anything that is not exactly canonical (so one event has one
 * byte string), unknown or missing keys, wrong types. */
int iso_audit_event_decode(const char *bytes, size_t len, struct iso_audit_event *e,
                           struct iso_error *err);

/* RFC 6962 hashing. */
void iso_audit_leaf_hash(const void *bytes, size_t len, uint8_t out[ISO_AUDIT_HASH_LEN]);
void iso_audit_node_hash(const uint8_t left[ISO_AUDIT_HASH_LEN],
                         const uint8_t right[ISO_AUDIT_HASH_LEN], uint8_t out[ISO_AUDIT_HASH_LEN]);

/* Append-only Merkle tree over leaf hashes, all in memory (about 64 bytes a
 * leaf). Proof and root queries cost O(log n) whatever the size. */
struct iso_merkle;
int iso_merkle_new(struct iso_merkle **out);
void iso_merkle_free(struct iso_merkle *m);
static inline void iso_merkle_freep(struct iso_merkle **m)
{
	if (*m)
		iso_merkle_free(*m);
}
int iso_merkle_append(struct iso_merkle *m, const uint8_t leaf[ISO_AUDIT_HASH_LEN]);
/* Drops leaves >= size (undo of appends whose transaction rolled back). */
void iso_merkle_truncate(struct iso_merkle *m, uint64_t size);
uint64_t iso_merkle_size(const struct iso_merkle *m);
int iso_merkle_leaf(const struct iso_merkle *m, uint64_t index, uint8_t out[ISO_AUDIT_HASH_LEN]);
/* MTH of the first `size` leaves (size <= iso_merkle_size; size 0 = SHA-256("")). */
int iso_merkle_root(const struct iso_merkle *m, uint64_t size, uint8_t out[ISO_AUDIT_HASH_LEN]);
/* RFC 6962 2.1.1 PATH(index, D[0:size]) and 2.1.2 PROOF(from, D[0:to]); *n hashes. */
int iso_merkle_inclusion(const struct iso_merkle *m, uint64_t index, uint64_t size,
                         uint8_t proof[][ISO_AUDIT_HASH_LEN], int *n);
int iso_merkle_consistency(const struct iso_merkle *m, uint64_t from, uint64_t to,
                           uint8_t proof[][ISO_AUDIT_HASH_LEN], int *n);
/* Verification needs no tree (RFC 9162 2.1.3.2 and 2.1.4.2 algorithms). */
bool iso_merkle_verify_inclusion(uint64_t index, uint64_t size,
                                 const uint8_t leaf[ISO_AUDIT_HASH_LEN],
                                 const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n,
                                 const uint8_t root[ISO_AUDIT_HASH_LEN]);
bool iso_merkle_verify_consistency(uint64_t from, uint64_t to,
                                   const uint8_t from_root[ISO_AUDIT_HASH_LEN],
                                   const uint8_t to_root[ISO_AUDIT_HASH_LEN],
                                   const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n);

/* Signed tree head. The signed message is the fixed text
 * "isostack-audit-head-v1\n<size>\n<root hex>\n<time_ms>\n". */
struct iso_audit_head {
	uint64_t size;
	uint8_t root[ISO_AUDIT_HASH_LEN];
	int64_t time_ms;
	uint8_t sig[ISO_AUDIT_SIG_LEN];
	/* The signer's key id (iso_audit_key_id); all zero when not recorded
	 * (heads signed before key ids): then the key that verifies it is its
	 * signer. Not part of the signed text. */
	uint8_t key_id[ISO_AUDIT_KEY_ID_LEN];
};

struct iso_audit_key {
	uint8_t pk[ISO_AUDIT_PK_LEN];
	uint8_t sk[ISO_AUDIT_SK_LEN];
};

/* DIR/audit.key (secret, 0600) and DIR/audit.pub (public, text): loads them,
 * creating both on first use. Refuses a key file readable by others. */
int iso_audit_key_load_or_create(const char *dir, struct iso_audit_key *k, bool *created,
                                 struct iso_error *err);
/* Reads a public key file written by the above ("ed25519:<base64>\n"). */
int iso_audit_pubkey_read(const char *path, uint8_t pk[ISO_AUDIT_PK_LEN], struct iso_error *err);
void iso_audit_pubkey_format(const uint8_t pk[ISO_AUDIT_PK_LEN], char *buf, size_t size);
void iso_audit_head_sign(struct iso_audit_head *h, const struct iso_audit_key *k);
bool iso_audit_head_verify(const struct iso_audit_head *h, const uint8_t pk[ISO_AUDIT_PK_LEN]);

/* The key id of a public key, and its 16-hex-digit text (buf: 17 bytes). */
void iso_audit_key_id(const uint8_t pk[ISO_AUDIT_PK_LEN], uint8_t id[ISO_AUDIT_KEY_ID_LEN]);
void iso_audit_key_id_format(const uint8_t id[ISO_AUDIT_KEY_ID_LEN], char buf[17]);
bool iso_audit_key_id_known(const uint8_t id[ISO_AUDIT_KEY_ID_LEN]); /* not all zero */

/* A published key set: the public keys whose heads are valid, one a line,
 *   ed25519:<base64 of 32 bytes> [NAME]
 * with blank lines and lines starting with '#' ignored (docs/audit.md). */
struct iso_audit_keyset_entry {
	uint8_t pk[ISO_AUDIT_PK_LEN];
	uint8_t id[ISO_AUDIT_KEY_ID_LEN];
	char name[ISO_AUDIT_KEYNAME_MAX]; /* "" when the line names none */
	long line;                        /* its line in the file, 0 when added */
};
struct iso_audit_keyset {
	size_t n;
	struct iso_audit_keyset_entry keys[ISO_AUDIT_KEYSET_MAX];
};
/* Parses a key set text of `len` bytes; `name` (the file) labels errors
 * ("NAME: line L: ..."). Refuses a bad line, a key or a name twice, a key id
 * shared by two keys, more than ISO_AUDIT_KEYSET_MAX keys, and a set with no
 * key at all. */
int iso_audit_keyset_parse(const char *text, size_t len, const char *name,
                           struct iso_audit_keyset *ks, struct iso_error *err);
int iso_audit_keyset_read(const char *path, struct iso_audit_keyset *ks, struct iso_error *err);
/* The daemon's key set: keys_file (--audit-keys) when given, else
 * STATE_DIR/audit-keys when it exists, else own_pk alone. Refuses (field
 * "audit_keys", naming --audit-keys) a file that cannot be read or parsed,
 * and a set without own_pk: heads it signed would be accepted by no one.
 * `used` receives the file read ("" for own key alone). */
int iso_audit_keyset_load(const char *state_dir, const char *keys_file,
                          const uint8_t own_pk[ISO_AUDIT_PK_LEN], struct iso_audit_keyset *ks,
                          char *used, size_t used_size, struct iso_error *err);
/* A set of one key (what `--pubkey` means). */
void iso_audit_keyset_one(struct iso_audit_keyset *ks, const uint8_t pk[ISO_AUDIT_PK_LEN]);
const struct iso_audit_keyset_entry *iso_audit_keyset_find(const struct iso_audit_keyset *ks,
                                                           const uint8_t pk[ISO_AUDIT_PK_LEN]);
/* The key of the set that signed h: the one its key id names (NULL when that
 * key is not in the set or does not verify h), or, for a head without a key
 * id, the first key that verifies it. */
const struct iso_audit_keyset_entry *iso_audit_keyset_signer(const struct iso_audit_keyset *ks,
                                                             const struct iso_audit_head *h);

/* ---- export and offline verification (docs/audit.md) ----
 * An export is JSON lines:
 *   {"type":"head","size":N,"root":"<hex>","time":MS,"signature":"<base64>"}    (one or more)
 *   {"type":"event","seq":S,"leaf":"<hex>","event":<canonical event bytes>}   (ascending seq)
 *   {"type":"inclusion","seq":S,"size":N,"proof":["<hex>",...]}              (partial exports)
 *   {"type":"consistency","from":A,"to":B,"proof":["<hex>",...]}             (between heads)
 * A full export holds every event 0..size-1 of its last head; a partial one
 * (a tenant's) holds some events, each with an inclusion proof. */
int iso_audit_export_head(FILE *f, const struct iso_audit_head *h);
int iso_audit_export_event(FILE *f, int64_t seq, const uint8_t leaf[ISO_AUDIT_HASH_LEN],
                           const char *canonical, size_t len);
int iso_audit_export_inclusion(FILE *f, uint64_t seq, uint64_t size,
                               const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n);
int iso_audit_export_consistency(FILE *f, uint64_t from, uint64_t to,
                                 const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n);

struct iso_audit_verdict {
	bool ok;
	uint64_t events;   /* event lines checked */
	uint64_t heads;    /* heads whose signature verified */
	int64_t first_bad; /* first bad sequence number, -1 when none can be named */
	long bad_line;     /* line of the export where it went wrong, 0 when none */
	char message[ISO_ERR_MSG_MAX];
};
/* Verifies one export stream with the public key: every head's signature;
 * events in order with no gap, duplicate or reorder (each event's own seq
 * equals its line's); every event's bytes hash to its leaf; the leaves of a
 * full export rebuild each head's root; each partial-export event's inclusion
 * proof; each consistency proof. Names the first bad seq. `name` labels
 * messages. Returns 0 when the stream could be read (verdict says ok or not). */
int iso_audit_verify_stream(FILE *f, const char *name, const uint8_t pk[ISO_AUDIT_PK_LEN],
                            struct iso_audit_verdict *v, struct iso_error *err);
/* The same against a key set: a head is valid only when signed by a key of
 * the set (the one its "key" names, or any for a head without one). */
int iso_audit_verify_stream_keys(FILE *f, const char *name, const struct iso_audit_keyset *ks,
                                 struct iso_audit_verdict *v, struct iso_error *err);

ISO_PUBLIC_END

#endif

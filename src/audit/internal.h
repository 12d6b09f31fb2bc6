/* internal.h: what the audit module's files share and nobody else needs: the
 * canonical-JSON byte buffer and writer, strict lowercase hex, and the parts
 * of the offline verifier that are split over two files. */
#ifndef ISOSTACK_AUDIT_INTERNAL_H
#define ISOSTACK_AUDIT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "isostack/audit.h"

/* ---- canon.c: canonical JSON (docs/audit.md "Canonical encoding") ---- */

/* A growable byte buffer; `oom` sticks once an allocation failed so callers
 * check once at the end. */
struct canon_buf {
	char *p;
	size_t len, cap;
	bool oom;
};

void canon_put(struct canon_buf *b, const char *s, size_t n);
static inline void canon_puts(struct canon_buf *b, const char *s)
{
	canon_put(b, s, strlen(s));
}
/* Appends s as a JSON string literal; ill-formed UTF-8 becomes U+FFFD. */
void canon_string(struct canon_buf *b, const char *s, size_t n);
void canon_int(struct canon_buf *b, long long v);
/* Appends v with keys sorted at every level; refuses reals. `path` names v in
 * messages ("details") and is extended in place for nested values. */
int canon_value(struct canon_buf *b, const json_t *v, char *path, size_t path_size,
                struct iso_error *err);

/* ---- hex.c ---- */
void audit_hex(const uint8_t *bin, size_t n, char *out); /* out: 2n+1 bytes */
/* Exactly 2n lowercase hex digits. */
bool audit_unhex(const char *s, size_t len, uint8_t *out, size_t n);

/* ---- keys.c ---- */
/* "ed25519:<canonical base64 of 32 bytes>" exactly `len` bytes, no newline:
 * 0, -EINVAL (not that text) or -EDOM (not a valid Ed25519 point). */
int audit_pubkey_parse(const char *s, size_t len, uint8_t pk[ISO_AUDIT_PK_LEN]);

/* ---- head.c ---- */
/* sodium_init() once (idempotent, thread-safe); false if libsodium cannot run. */
bool audit_sodium_ready(void);
#define AUDIT_HEAD_MSG_MAX 160
size_t audit_head_message(const struct iso_audit_head *h, char buf[AUDIT_HEAD_MSG_MAX]);

/* ---- verify_lines.c: the hot path of iso_audit_verify_stream ---- */

/* What a worker learnt about one line of an export. */
enum vline_kind {
	VL_OTHER, /* not in the fixed event layout: parsed in order with jansson */
	VL_EVENT, /* a well-formed event line; see status */
};
enum vline_status {
	VS_OK,
	VS_BAD_SEQ,       /* the line's "seq" is not a canonical non-negative integer */
	VS_BAD_LEAF,      /* "leaf" is not 64 lowercase hex digits */
	VS_BAD_LAYOUT,    /* the fixed layout is broken after "seq" */
	VS_LEAF_MISMATCH, /* the event bytes do not hash to "leaf" */
	VS_NO_INNER_SEQ,  /* the event has no readable top-level "seq" */
	VS_INNER_SEQ,     /* the event's own "seq" differs from the line's */
};

struct vline {
	const char *p; /* the line without its newline */
	size_t len;
};

struct vres {
	uint8_t kind, status;
	int64_t seq;                      /* the line's seq (-1 when unreadable) */
	int64_t inner_seq;                /* the event's own seq */
	uint8_t leaf[ISO_AUDIT_HASH_LEN]; /* SHA-256(0x00 || event bytes) */
};

/* Classifies and hashes one line (thread-safe: touches only *r). */
void vline_check(const struct vline *l, struct vres *r);

/* A pool that runs vline_check over a batch of lines on every core. */
struct vpool;
int vpool_new(struct vpool **out);
void vpool_free(struct vpool *p);
/* Hands a batch to the workers and returns at once. */
void vpool_start(struct vpool *p, const struct vline *lines, struct vres *res, size_t n);
/* Helps with the batch until it is done; then every result is written. */
void vpool_finish(struct vpool *p);

#endif

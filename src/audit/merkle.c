/* merkle.c: RFC 6962 hashing and the in-memory Merkle tree the controller
 * appends every event's leaf to. Every complete subtree hash is kept, per
 * level (level 0 = leaves, level k = subtrees of 2^k leaves), so a root at
 * any past size and any inclusion or consistency proof cost O(log n) hash
 * lookups and at most O(log n) hashes, never a rehash of a big subtree. About
 * 64 bytes a leaf: 10 million leaves take some 640 MB. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "audit/internal.h"

#define MAX_LEVELS 64

typedef uint8_t hash_t[ISO_AUDIT_HASH_LEN];

struct level {
	hash_t *h;
	uint64_t n, cap;
};

struct iso_merkle {
	uint64_t size; /* leaves */
	struct level lv[MAX_LEVELS];
};

void iso_audit_leaf_hash(const void *bytes, size_t len, uint8_t out[ISO_AUDIT_HASH_LEN])
{
	static const uint8_t prefix = 0x00;
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, &prefix, 1);
	crypto_hash_sha256_update(&st, bytes, len);
	crypto_hash_sha256_final(&st, out);
}

void iso_audit_node_hash(const uint8_t left[ISO_AUDIT_HASH_LEN],
                         const uint8_t right[ISO_AUDIT_HASH_LEN], uint8_t out[ISO_AUDIT_HASH_LEN])
{
	uint8_t buf[1 + 2 * ISO_AUDIT_HASH_LEN];

	buf[0] = 0x01;
	memcpy(buf + 1, left, ISO_AUDIT_HASH_LEN);
	memcpy(buf + 1 + ISO_AUDIT_HASH_LEN, right, ISO_AUDIT_HASH_LEN);
	crypto_hash_sha256(out, buf, sizeof(buf));
}

int iso_merkle_new(struct iso_merkle **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void iso_merkle_free(struct iso_merkle *m)
{
	if (!m)
		return;
	for (int k = 0; k < MAX_LEVELS; k++)
		free(m->lv[k].h);
	free(m);
}

uint64_t iso_merkle_size(const struct iso_merkle *m)
{
	return m->size;
}

static int reserve(struct level *l)
{
	if (l->n < l->cap)
		return 0;
	/* 1.5x growth keeps the slack of a 10-million-leaf tree well under
	 * 1 GB of address space; big blocks are mmap'd, so the kernel moves
	 * them on realloc without copying. */
	uint64_t cap = l->cap < 1024 ? 1024 : l->cap + l->cap / 2;
	if (cap > SIZE_MAX / sizeof(hash_t))
		return -ENOMEM;
	hash_t *h = realloc(l->h, (size_t)cap * sizeof(hash_t));
	if (!h)
		return -ENOMEM;
	l->h = h;
	l->cap = cap;
	return 0;
}

int iso_merkle_append(struct iso_merkle *m, const uint8_t leaf[ISO_AUDIT_HASH_LEN])
{
	uint64_t next = m->size + 1;
	int top = __builtin_ctzll(next); /* levels 0..top each gain one hash */
	int r;

	if (next == 0 || top >= MAX_LEVELS)
		return -EOVERFLOW;
	/* Make room everywhere first, so a failure leaves the tree as it was. */
	for (int k = 0; k <= top; k++)
		if ((r = reserve(&m->lv[k])) < 0)
			return r;
	memcpy(m->lv[0].h[m->lv[0].n++], leaf, ISO_AUDIT_HASH_LEN);
	for (int k = 1; k <= top; k++) {
		struct level *below = &m->lv[k - 1];
		iso_audit_node_hash(below->h[below->n - 2], below->h[below->n - 1],
		                    m->lv[k].h[m->lv[k].n]);
		m->lv[k].n++;
	}
	m->size = next;
	return 0;
}

void iso_merkle_truncate(struct iso_merkle *m, uint64_t size)
{
	if (size >= m->size)
		return;
	/* Level k holds the complete subtrees of 2^k leaves: floor(size / 2^k). */
	for (int k = 0; k < MAX_LEVELS; k++)
		m->lv[k].n = size >> k;
	m->size = size;
}

int iso_merkle_leaf(const struct iso_merkle *m, uint64_t index, uint8_t out[ISO_AUDIT_HASH_LEN])
{
	if (index >= m->size)
		return -EINVAL;
	memcpy(out, m->lv[0].h[index], ISO_AUDIT_HASH_LEN);
	return 0;
}

/* MTH(D[start:start+len]) for a range the RFC 6962 recursion produces: start
 * is a multiple of the largest power of two <= len. The range splits into
 * complete stored subtrees, largest first, folded from the right. */
static void range_hash(const struct iso_merkle *m, uint64_t start, uint64_t len, hash_t out)
{
	hash_t parts[MAX_LEVELS];
	int n = 0;
	uint64_t pos = start;

	for (int k = MAX_LEVELS - 1; k >= 0; k--) {
		if (!((len >> k) & 1))
			continue;
		memcpy(parts[n++], m->lv[k].h[pos >> k], sizeof(hash_t));
		pos += (uint64_t)1 << k;
	}
	memcpy(out, parts[n - 1], sizeof(hash_t));
	for (int i = n - 2; i >= 0; i--)
		iso_audit_node_hash(parts[i], out, out);
}

int iso_merkle_root(const struct iso_merkle *m, uint64_t size, uint8_t out[ISO_AUDIT_HASH_LEN])
{
	if (size > m->size)
		return -EINVAL;
	if (size == 0) {
		crypto_hash_sha256(out, NULL, 0);
		return 0;
	}
	range_hash(m, 0, size, out);
	return 0;
}

/* The largest power of two strictly below n (n >= 2). */
static uint64_t split_point(uint64_t n)
{
	return (uint64_t)1 << (63 - __builtin_clzll(n - 1));
}

/* The recursions of RFC 6962 2.1.1 and 2.1.2 append the outermost hash last;
 * walking top-down collects them in reverse. */
static void reverse(hash_t *h, int n)
{
	hash_t t;

	for (int i = 0, j = n - 1; i < j; i++, j--) {
		memcpy(t, h[i], sizeof(t));
		memcpy(h[i], h[j], sizeof(t));
		memcpy(h[j], t, sizeof(t));
	}
}

int iso_merkle_inclusion(const struct iso_merkle *m, uint64_t index, uint64_t size,
                         uint8_t proof[][ISO_AUDIT_HASH_LEN], int *n)
{
	uint64_t a = 0, b = size;
	int k = 0;

	*n = 0;
	if (size > m->size || index >= size)
		return -EINVAL;
	while (b - a > 1) {
		uint64_t s = split_point(b - a);
		if (index < a + s) { /* PATH(m, D[a:a+s]) : MTH(D[a+s:b]) */
			range_hash(m, a + s, b - a - s, proof[k++]);
			b = a + s;
		} else { /* PATH(m-s, D[a+s:b]) : MTH(D[a:a+s]) */
			range_hash(m, a, s, proof[k++]);
			a += s;
		}
	}
	reverse(proof, k);
	*n = k;
	return 0;
}

int iso_merkle_consistency(const struct iso_merkle *m, uint64_t from, uint64_t to,
                           uint8_t proof[][ISO_AUDIT_HASH_LEN], int *n)
{
	uint64_t a = 0, b = to, mm = from;
	bool whole = true; /* SUBPROOF's b: the old root is the one asked about */
	int k = 0;

	*n = 0;
	if (to > m->size || from > to)
		return -EINVAL;
	if (from == 0 || from == to)
		return 0;
	for (;;) {
		if (mm == b - a) {
			if (!whole)
				range_hash(m, a, b - a, proof[k++]);
			break;
		}
		uint64_t s = split_point(b - a);
		if (mm <= s) {
			range_hash(m, a + s, b - a - s, proof[k++]);
			b = a + s;
		} else {
			range_hash(m, a, s, proof[k++]);
			a += s;
			mm -= s;
			whole = false;
		}
	}
	reverse(proof, k);
	*n = k;
	return 0;
}

/* ---- verification: RFC 9162 2.1.3.2 and 2.1.4.2, no tree needed ---- */

bool iso_merkle_verify_inclusion(uint64_t index, uint64_t size,
                                 const uint8_t leaf[ISO_AUDIT_HASH_LEN],
                                 const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n,
                                 const uint8_t root[ISO_AUDIT_HASH_LEN])
{
	hash_t r;
	uint64_t fn = index, sn;

	if (index >= size || n < 0 || n > ISO_AUDIT_MAX_PROOF || (n > 0 && !proof))
		return false;
	sn = size - 1;
	memcpy(r, leaf, sizeof(r));
	for (int i = 0; i < n; i++) {
		if (sn == 0)
			return false;
		if ((fn & 1) || fn == sn) {
			iso_audit_node_hash(proof[i], r, r);
			if (!(fn & 1))
				while (fn != 0 && !(fn & 1)) {
					fn >>= 1;
					sn >>= 1;
				}
		} else {
			iso_audit_node_hash(r, proof[i], r);
		}
		fn >>= 1;
		sn >>= 1;
	}
	return sn == 0 && sodium_memcmp(r, root, sizeof(r)) == 0;
}

bool iso_merkle_verify_consistency(uint64_t from, uint64_t to,
                                   const uint8_t from_root[ISO_AUDIT_HASH_LEN],
                                   const uint8_t to_root[ISO_AUDIT_HASH_LEN],
                                   const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n)
{
	hash_t fr, sr;
	uint64_t fn, sn;
	int i = 0;

	if (from > to || n < 0 || n > ISO_AUDIT_MAX_PROOF || (n > 0 && !proof))
		return false;
	if (from == to)
		return n == 0 && sodium_memcmp(from_root, to_root, sizeof(hash_t)) == 0;
	if (from == 0) /* the empty tree is a prefix of every tree */
		return n == 0;
	if (n == 0)
		return false;
	/* When `from` is a power of two its root is a node of the new tree and
	 * the proof starts above it: first_hash is prepended. */
	const uint8_t *first = proof[0];
	if ((from & (from - 1)) == 0)
		first = from_root;
	else
		i = 1;
	fn = from - 1;
	sn = to - 1;
	while (fn & 1) {
		fn >>= 1;
		sn >>= 1;
	}
	memcpy(fr, first, sizeof(fr));
	memcpy(sr, first, sizeof(sr));
	for (; i < n; i++) {
		const uint8_t *c = proof[i];
		if (sn == 0)
			return false;
		if ((fn & 1) || fn == sn) {
			iso_audit_node_hash(c, fr, fr);
			iso_audit_node_hash(c, sr, sr);
			if (!(fn & 1))
				while (fn != 0 && !(fn & 1)) {
					fn >>= 1;
					sn >>= 1;
				}
		} else {
			iso_audit_node_hash(sr, c, sr);
		}
		fn >>= 1;
		sn >>= 1;
	}
	return sn == 0 && sodium_memcmp(fr, from_root, sizeof(hash_t)) == 0 &&
	       sodium_memcmp(sr, to_root, sizeof(hash_t)) == 0;
}

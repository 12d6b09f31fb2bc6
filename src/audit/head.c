/* head.c: signed tree heads. What is signed is a fixed short text, not a
 * binary structure, so that anyone can re-create it with printf and check a
 * head with any Ed25519 tool:
 *   "isostack-audit-head-v1\n<size>\n<root, 64 lowercase hex>\n<time_ms>\n" */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "audit/internal.h"

size_t audit_head_message(const struct iso_audit_head *h, char buf[AUDIT_HEAD_MSG_MAX])
{
	char root[2 * ISO_AUDIT_HASH_LEN + 1];
	int n;

	audit_hex(h->root, sizeof(h->root), root);
	n = snprintf(buf, AUDIT_HEAD_MSG_MAX, "isostack-audit-head-v1\n%llu\n%s\n%lld\n",
	             (unsigned long long)h->size, root, (long long)h->time_ms);
	return (size_t)n; /* at most 23 + 21 + 65 + 21 < AUDIT_HEAD_MSG_MAX */
}

void iso_audit_head_sign(struct iso_audit_head *h, const struct iso_audit_key *k)
{
	char msg[AUDIT_HEAD_MSG_MAX];
	size_t len = audit_head_message(h, msg);

	audit_sodium_ready(); /* signing needs no more than libsodium's tables */
	crypto_sign_detached(h->sig, NULL, (const unsigned char *)msg, len, k->sk);
	iso_audit_key_id(k->pk, h->key_id);
}

void iso_audit_key_id(const uint8_t pk[ISO_AUDIT_PK_LEN], uint8_t id[ISO_AUDIT_KEY_ID_LEN])
{
	uint8_t hash[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(hash, pk, ISO_AUDIT_PK_LEN);
	memcpy(id, hash, ISO_AUDIT_KEY_ID_LEN);
}

void iso_audit_key_id_format(const uint8_t id[ISO_AUDIT_KEY_ID_LEN], char buf[17])
{
	audit_hex(id, ISO_AUDIT_KEY_ID_LEN, buf);
}

bool iso_audit_key_id_known(const uint8_t id[ISO_AUDIT_KEY_ID_LEN])
{
	for (size_t i = 0; i < ISO_AUDIT_KEY_ID_LEN; i++)
		if (id[i])
			return true;
	return false;
}

bool iso_audit_head_verify(const struct iso_audit_head *h, const uint8_t pk[ISO_AUDIT_PK_LEN])
{
	char msg[AUDIT_HEAD_MSG_MAX];
	size_t len = audit_head_message(h, msg);

	if (!audit_sodium_ready())
		return false;
	return crypto_sign_verify_detached(h->sig, (const unsigned char *)msg, len, pk) == 0;
}

void iso_audit_pubkey_format(const uint8_t pk[ISO_AUDIT_PK_LEN], char *buf, size_t size)
{
	char b64[sodium_base64_ENCODED_LEN(ISO_AUDIT_PK_LEN, sodium_base64_VARIANT_ORIGINAL)];

	sodium_bin2base64(b64, sizeof(b64), pk, ISO_AUDIT_PK_LEN, sodium_base64_VARIANT_ORIGINAL);
	snprintf(buf, size, "ed25519:%s", b64);
}

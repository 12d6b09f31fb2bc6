/* export.c: the writers of the export format (JSON lines, docs/audit.md).
 * Each line has one fixed layout: event lines in particular are laid out so
 * that iso_audit_verify_stream can take the canonical event bytes out of a
 * line without parsing JSON, which is what makes verifying millions fast. */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "audit/internal.h"

static int done(FILE *f)
{
	return ferror(f) ? -EIO : 0;
}

int iso_audit_export_head(FILE *f, const struct iso_audit_head *h)
{
	char root[2 * ISO_AUDIT_HASH_LEN + 1];
	char sig[sodium_base64_ENCODED_LEN(ISO_AUDIT_SIG_LEN, sodium_base64_VARIANT_ORIGINAL)];

	if (h->size > INT64_MAX)
		return -EINVAL;
	audit_hex(h->root, sizeof(h->root), root);
	sodium_bin2base64(sig, sizeof(sig), h->sig, sizeof(h->sig), sodium_base64_VARIANT_ORIGINAL);
	if (fprintf(f,
	            "{\"type\":\"head\",\"size\":%llu,\"root\":\"%s\",\"time\":%lld,"
	            "\"signature\":\"%s\"",
	            (unsigned long long)h->size, root, (long long)h->time_ms, sig) < 0)
		return -EIO;
	/* The signer's key id, when the head records one (docs/audit.md). */
	if (iso_audit_key_id_known(h->key_id)) {
		char id[2 * ISO_AUDIT_KEY_ID_LEN + 1];
		iso_audit_key_id_format(h->key_id, id);
		if (fprintf(f, ",\"key\":\"%s\"", id) < 0)
			return -EIO;
	}
	if (fputs("}\n", f) == EOF)
		return -EIO;
	return done(f);
}

int iso_audit_export_event(FILE *f, int64_t seq, const uint8_t leaf[ISO_AUDIT_HASH_LEN],
                           const char *canonical, size_t len)
{
	char hex[2 * ISO_AUDIT_HASH_LEN + 1];

	/* Canonical bytes are one line of JSON by construction (control
	 * characters are escaped); anything else would break the layout. */
	if (seq < 0 || len < 2 || canonical[0] != '{' || canonical[len - 1] != '}' ||
	    memchr(canonical, '\n', len))
		return -EINVAL;
	audit_hex(leaf, ISO_AUDIT_HASH_LEN, hex);
	if (fprintf(f, "{\"type\":\"event\",\"seq\":%lld,\"leaf\":\"%s\",\"event\":",
	            (long long)seq, hex) < 0 ||
	    fwrite(canonical, 1, len, f) != len || fputs("}\n", f) == EOF)
		return -EIO;
	return done(f);
}

static int put_proof(FILE *f, const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n)
{
	char hex[2 * ISO_AUDIT_HASH_LEN + 1];

	if (fputs("\"proof\":[", f) == EOF)
		return -EIO;
	for (int i = 0; i < n; i++) {
		audit_hex(proof[i], ISO_AUDIT_HASH_LEN, hex);
		if (fprintf(f, "%s\"%s\"", i ? "," : "", hex) < 0)
			return -EIO;
	}
	if (fputs("]}\n", f) == EOF)
		return -EIO;
	return done(f);
}

int iso_audit_export_inclusion(FILE *f, uint64_t seq, uint64_t size,
                               const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n)
{
	if (n < 0 || n > ISO_AUDIT_MAX_PROOF || seq >= size || size > INT64_MAX)
		return -EINVAL;
	if (fprintf(f, "{\"type\":\"inclusion\",\"seq\":%llu,\"size\":%llu,",
	            (unsigned long long)seq, (unsigned long long)size) < 0)
		return -EIO;
	return put_proof(f, proof, n);
}

int iso_audit_export_consistency(FILE *f, uint64_t from, uint64_t to,
                                 const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n)
{
	if (n < 0 || n > ISO_AUDIT_MAX_PROOF || from > to || to > INT64_MAX)
		return -EINVAL;
	if (fprintf(f, "{\"type\":\"consistency\",\"from\":%llu,\"to\":%llu,",
	            (unsigned long long)from, (unsigned long long)to) < 0)
		return -EIO;
	return put_proof(f, proof, n);
}

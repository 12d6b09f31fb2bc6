/* fuzz_audit_keyset.c: a published audit key set (`isostackd --audit-keys`,
 * `isoctl audit verify --keys`) through iso_audit_keyset_parse. The set
 * decides which heads are trusted, so what it accepts must be exactly what
 * the file says: 1..ISO_AUDIT_KEYSET_MAX distinct valid keys with distinct
 * ids and valid, distinct names, each at a line the file has; written back
 * one key a line it parses to the same set. A refusal names the file. */
#include <sodium.h>
#include <string.h>

#include "fuzz.h"
#include "isostack/audit.h"

static bool name_ok(const char *n)
{
	size_t len = strlen(n);

	if (len >= ISO_AUDIT_KEYNAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
		            n[i]))
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iso_audit_keyset ks, again;
	static char text[ISO_AUDIT_KEYSET_MAX * (ISO_AUDIT_KEYNAME_MAX + 64)];
	struct iso_error err = {0};
	long lines = 1;
	size_t at = 0;
	int r = iso_audit_keyset_parse((const char *)data, size, "fuzz.keys", &ks, &err);

	fuzz_check_refusal(r, &err, "iso_audit_keyset_parse");
	if (r < 0) {
		FUZZ_ASSERT(strncmp(err.message, "fuzz.keys", 9) == 0,
		            "a refusal not naming the file: %s", err.message);
		FUZZ_ASSERT(ks.n == 0, "a refused set keeps %zu keys", ks.n);
		return 0;
	}
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	FUZZ_ASSERT(ks.n >= 1 && ks.n <= ISO_AUDIT_KEYSET_MAX, "%zu keys", ks.n);
	for (size_t i = 0; i < ks.n; i++) {
		const struct iso_audit_keyset_entry *e = &ks.keys[i];
		uint8_t id[ISO_AUDIT_KEY_ID_LEN];
		FUZZ_ASSERT(crypto_core_ed25519_is_valid_point(e->pk), "key %zu is not a point", i);
		iso_audit_key_id(e->pk, id);
		FUZZ_ASSERT(memcmp(id, e->id, sizeof(id)) == 0, "key %zu: a wrong id", i);
		FUZZ_ASSERT(name_ok(e->name), "key %zu: a bad name \"%s\"", i, e->name);
		FUZZ_ASSERT(e->line >= 1 && e->line <= lines, "key %zu at line %ld of %ld", i,
		            e->line, lines);
		FUZZ_ASSERT(i == 0 || e->line > ks.keys[i - 1].line, "keys out of line order");
		for (size_t j = 0; j < i; j++) {
			FUZZ_ASSERT(memcmp(ks.keys[j].pk, e->pk, ISO_AUDIT_PK_LEN) != 0,
			            "a key twice");
			FUZZ_ASSERT(memcmp(ks.keys[j].id, e->id, ISO_AUDIT_KEY_ID_LEN) != 0,
			            "an id twice");
			FUZZ_ASSERT(!e->name[0] || strcmp(ks.keys[j].name, e->name) != 0,
			            "a name twice");
		}
		FUZZ_ASSERT(iso_audit_keyset_find(&ks, e->pk) == e, "key %zu not found", i);
		iso_audit_pubkey_format(e->pk, text + at, sizeof(text) - at);
		at += strlen(text + at);
		at += (size_t)snprintf(text + at, sizeof(text) - at, "%s%s\n",
		                       e->name[0] ? " " : "", e->name);
	}
	r = iso_audit_keyset_parse(text, at, "again", &again, &err);
	FUZZ_ASSERT(r == 0, "the set written back is refused: %s", err.message);
	FUZZ_ASSERT(again.n == ks.n, "%zu keys written back, %zu read", ks.n, again.n);
	for (size_t i = 0; i < ks.n; i++)
		FUZZ_ASSERT(memcmp(again.keys[i].pk, ks.keys[i].pk, ISO_AUDIT_PK_LEN) == 0 &&
		                strcmp(again.keys[i].name, ks.keys[i].name) == 0,
		            "key %zu differs when written back", i);
	return 0;
}

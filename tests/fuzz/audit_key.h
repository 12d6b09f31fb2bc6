/* audit_key.h: the one signing key of the audit harness and of mkseed_audit,
 * which writes its seed exports: derived from a fixed seed so that the
 * committed seeds verify and the fuzzer can reach past the signature checks. */
#ifndef ISOSTACK_TESTS_FUZZ_AUDIT_KEY_H
#define ISOSTACK_TESTS_FUZZ_AUDIT_KEY_H

#include <sodium.h>
#include <string.h>

#include "isostack/audit.h"

static inline int fuzz_audit_key(struct iso_audit_key *k)
{
	unsigned char seed[crypto_sign_SEEDBYTES];

	memset(seed, 0x5a, sizeof(seed));
	if (sodium_init() < 0)
		return -1;
	return crypto_sign_seed_keypair(k->pk, k->sk, seed);
}

#endif

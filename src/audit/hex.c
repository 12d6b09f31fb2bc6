/* hex.c: the small libsodium plumbing the audit files share. Hashes travel
 * as lowercase hex in heads, exports and signed text; reading accepts only
 * that one spelling, so a hash has one text form. */
#include <sodium.h>

#include "audit/internal.h"

void audit_hex(const uint8_t *bin, size_t n, char *out)
{
	sodium_bin2hex(out, 2 * n + 1, bin, n);
}

static int hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

bool audit_unhex(const char *s, size_t len, uint8_t *out, size_t n)
{
	if (len != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		int hi = hex_digit((unsigned char)s[2 * i]),
		    lo = hex_digit((unsigned char)s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

bool audit_sodium_ready(void)
{
	return sodium_init() >= 0;
}

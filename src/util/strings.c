/* strings.c: bounded copies and the strict parsers for names and GUIDs that
 * inventory, API and CLI share, so every entry point accepts the same set. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "isostack/util.h"

int iso_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size == 0)
		return -1;
	if (n >= size) {
		memcpy(dst, src, size - 1);
		dst[size - 1] = '\0';
		return -1;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

bool iso_idem_key_valid(const char *key)
{
	size_t n = strlen(key);

	if (n == 0 || n >= ISO_IDEM_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = key[i];
		/* ranges, not isalnum(): the locale must not widen the set */
		if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') &&
		    c != '.' && c != '_' && c != ':' && c != '-')
			return false;
	}
	return true;
}

bool iso_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= ISO_NAME_MAX)
		return false;
	if (!islower((unsigned char)name[0]) && !isdigit((unsigned char)name[0]))
		return false;
	for (size_t i = 1; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!islower(c) && !isdigit(c) && c != '-' && c != '_' && c != '.')
			return false;
	}
	return true;
}

int iso_parse_guid(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	size_t n;

	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return -EINVAL;
	s += 2;
	n = strlen(s);
	if (n == 0 || n > 16)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		int d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -EINVAL;
		v = (v << 4) | (uint64_t)d;
	}
	*out = v;
	return 0;
}

/* n bytes written "xx:xx:...:xx" (hex, either case) into out; -EINVAL for
 * anything else, so a MAC and a client-id are read by one strict rule. */
static int parse_hex_bytes(const char *s, uint8_t *out, size_t n)
{
	if (!s || strlen(s) != 3 * n - 1)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int v = 0;
		for (size_t k = 0; k < 2; k++) {
			int c = (unsigned char)s[3 * i + k];
			if (c >= '0' && c <= '9')
				v = v * 16 + c - '0';
			else if (c >= 'a' && c <= 'f')
				v = v * 16 + c - 'a' + 10;
			else if (c >= 'A' && c <= 'F')
				v = v * 16 + c - 'A' + 10;
			else
				return -EINVAL;
		}
		if (i + 1 < n && s[3 * i + 2] != ':')
			return -EINVAL;
		out[i] = (uint8_t)v;
	}
	return 0;
}

int iso_guid_from_mac(const char *mac, uint64_t *out)
{
	uint8_t b[6];

	if (parse_hex_bytes(mac, b, sizeof(b)) < 0)
		return -EINVAL;
	*out = (uint64_t)b[0] << 56 | (uint64_t)b[1] << 48 | (uint64_t)b[2] << 40 |
	       (uint64_t)b[3] << 16 | (uint64_t)b[4] << 8 | (uint64_t)b[5];
	return 0;
}

int iso_guid_from_client_id(const char *client_id, uint64_t *out)
{
	static const uint8_t prefix[12] = {0xff, 0, 0, 0, 0, 0, 0x02, 0, 0, 0x02, 0xc9, 0};
	uint8_t b[20];
	uint64_t g = 0;

	if (parse_hex_bytes(client_id, b, sizeof(b)) < 0 || memcmp(b, prefix, sizeof(prefix)) != 0)
		return -EINVAL;
	for (size_t i = sizeof(prefix); i < sizeof(b); i++)
		g = g << 8 | b[i];
	*out = g;
	return 0;
}

int iso_parse_ipv4(const char *s, uint32_t *out)
{
	uint32_t v = 0;

	for (int octet = 0; octet < 4; octet++) {
		unsigned n = 0;
		int digits = 0;

		if (octet > 0 && *s++ != '.')
			return -EINVAL;
		while (*s >= '0' && *s <= '9' && digits < 4) {
			if (digits == 1 && n == 0)
				return -EINVAL; /* a leading zero */
			n = n * 10 + (unsigned)(*s++ - '0');
			digits++;
		}
		if (digits == 0 || n > 255)
			return -EINVAL;
		v = (v << 8) | n;
	}
	if (*s)
		return -EINVAL;
	*out = v;
	return 0;
}

/* escape.c: text that came from outside (a URL path, an X-Request-Id, a JSON
 * string, an error message quoting either) made safe to print on one line
 * and to store. The daemon's log and the audit log both go through here, so
 * that a newline, an escape sequence or a stray byte can never forge a line,
 * recolour a terminal or smuggle arbitrary bytes into a stored event. */
#include <string.h>

#include "isostack/util.h"

/* Decodes one well-formed UTF-8 character (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). Returns its length, or 0 when the
 * byte at s does not start one. */
static size_t utf8_next(const unsigned char *s, size_t len, uint32_t *cp)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		*cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		*cp = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		*cp = c & 0x07;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if (i > 1 && (s[i] < 0x80 || s[i] > 0xbf))
			return 0;
		*cp = (*cp << 6) | (s[i] & 0x3f);
	}
	return n;
}

/* Characters that move the cursor, change a terminal's state or reorder
 * what is shown: C0 and C1 controls, DEL, line and paragraph separators and
 * the bidirectional overrides (a reversed line reads as another one). */
static bool cp_unsafe(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
	       cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

int iso_escape(char *dst, size_t size, const char *src, size_t len, unsigned flags)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0, o = 0;

	if (size == 0)
		return -1;
	while (i < len) {
		char piece[12];
		size_t plen, used;
		uint32_t cp = 0;

		used = utf8_next(s + i, len - i, &cp);
		if (used == 0) {
			plen = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", s[i]);
			used = 1;
		} else if (cp == '\n') {
			plen = (size_t)snprintf(piece, sizeof(piece), "\\n");
		} else if (cp == '\r') {
			plen = (size_t)snprintf(piece, sizeof(piece), "\\r");
		} else if (cp == '\t') {
			plen = (size_t)snprintf(piece, sizeof(piece), "\\t");
		} else if (cp < 0x80 && cp_unsafe(cp)) {
			plen = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", (unsigned)cp);
		} else if (cp_unsafe(cp)) {
			plen = (size_t)snprintf(piece, sizeof(piece), "\\u%04x", (unsigned)cp);
		} else if (cp == '\\' || (cp == '"' && (flags & ISO_ESCAPE_QUOTE))) {
			piece[0] = '\\';
			piece[1] = (char)cp;
			plen = 2;
		} else {
			memcpy(piece, s + i, used);
			plen = used;
		}
		/* Whole characters and whole escapes only: a cut never leaves half
		 * of either behind. */
		if (o + plen >= size) {
			dst[o] = '\0';
			return -1;
		}
		memcpy(dst + o, piece, plen);
		o += plen;
		i += used;
	}
	dst[o] = '\0';
	return 0;
}

size_t iso_utf8_prefix(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		uint32_t cp;
		size_t used = utf8_next(u + i, len - i, &cp);
		if (used == 0)
			break;
		i += used;
	}
	return i;
}

bool iso_text_valid(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strlen(s);

	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t used = utf8_next(u + i, len - i, &cp);
		if (used == 0 || cp_unsafe(cp))
			return false;
		i += used;
	}
	return true;
}

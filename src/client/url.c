/* url.c: what the client accepts as base URL and request path, and the one
 * percent-encoder for path segments and query values, so that names, ids and
 * cursors from users or servers can never change the shape of a request. */
#include <string.h>
#include <strings.h>

#include "client/client_internal.h"
#include "isostack/client.h"

static bool printable_no_space(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch <= 0x20 || ch >= 0x7f)
			return false;
	}
	return true;
}

int iso_client_base_url(const char *url, char **out, struct iso_error *err)
{
	const char *rest, *host_end;
	size_t n = strlen(url);
	char *copy;

	*out = NULL;
	if (strncasecmp(url, "http://", 7) == 0)
		rest = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		rest = url + 8;
	else
		return iso_error_set(err, ISO_E_INVALID, "url",
		                     "URL '%s' must start with http:// or https://", url);
	if (!printable_no_space(url, n))
		return iso_error_set(err, ISO_E_INVALID, "url",
		                     "URL holds a space, control or non-ASCII character");
	host_end = rest + strcspn(rest, "/");
	if (host_end == rest)
		return iso_error_set(err, ISO_E_INVALID, "url", "URL '%s' has no host", url);
	/* Credentials in a URL end up in error messages and process lists;
	 * the token is the only credential. Checked before the URL is echoed. */
	if (memchr(rest, '@', (size_t)(host_end - rest)))
		return iso_error_set(err, ISO_E_INVALID, "url",
		                     "URL must not carry credentials (user@host); use a token");
	if (strpbrk(url, "?#"))
		return iso_error_set(err, ISO_E_INVALID, "url",
		                     "URL '%s' must not have a query or fragment", url);
	while (n > 0 && url[n - 1] == '/')
		n--;
	copy = strndup(url, n);
	if (!copy)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	*out = copy;
	return 0;
}

int iso_client_check_path(const char *path, struct iso_error *err)
{
	size_t n = strlen(path);

	if (n == 0 || path[0] != '/')
		return iso_error_set(err, ISO_E_INVALID, "path",
		                     "request path must start with '/'");
	if (!printable_no_space(path, n) || strchr(path, '#'))
		return iso_error_set(err, ISO_E_INVALID, "path",
		                     "request path holds a character that must be escaped");
	return 0;
}

char *iso_client_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1);
	char *p = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return out;
}

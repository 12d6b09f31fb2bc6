/* response.c: what a caller does with an answer: free it, and turn a non-2xx
 * one into the same struct iso_error the library uses everywhere, from the
 * API's error body or, when a proxy answered, from the HTTP status alone. */
#include <errno.h>
#include <string.h>

#include "isostack/client.h"

void iso_response_clear(struct iso_response *r)
{
	json_decref(r->body);
	memset(r, 0, sizeof(*r));
}

static enum iso_errcode code_from_status(long status)
{
	/* First match wins: 409 reads as conflict, its most general meaning. */
	for (int c = ISO_E_INVALID; c <= ISO_E_UNAVAILABLE; c++)
		if (iso_errcode_http_status((enum iso_errcode)c) == status)
			return (enum iso_errcode)c;
	if (status == 502 || status == 504)
		return ISO_E_UNAVAILABLE; /* a gateway could not reach the server */
	return ISO_E_INTERNAL;
}

int iso_response_error(const struct iso_response *r, struct iso_error *err)
{
	json_t *e = r->body ? json_object_get(r->body, "error") : NULL;
	const char *code_s = json_string_value(json_object_get(e, "code"));
	const char *message = json_string_value(json_object_get(e, "message"));
	const char *field = json_string_value(json_object_get(e, "field"));
	enum iso_errcode code;

	if (iso_response_ok(r))
		return 0;
	if (!code_s || iso_errcode_parse(code_s, &code) < 0)
		code = code_from_status(r->status);
	if (message)
		return iso_error_set(err, code, field, "%s", message);
	return iso_error_set(err, code, field, "server answered HTTP %ld without an error message",
	                     r->status);
}

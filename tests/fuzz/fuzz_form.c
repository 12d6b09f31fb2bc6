/* fuzz_form.c: the application/x-www-form-urlencoded body of POST
 * /neutron/login as api_form_parse reads it (docs/openstack.md; the
 * mlnx_sdn_assist driver's username and password). What it accepts must be
 * the pairs the input carried: every value found is its name's only one, has
 * no control byte, and encoding the values again (%-escaping everything but
 * unreserved characters) parses back to the same values. */
#include <string.h>

#include "api/internal.h"
#include "fuzz.h"

static const char *const fields[] = {"username", "password", NULL};

static size_t encode(const char *name, const char *v, char *out, size_t at)
{
	static const char hex[] = "0123456789ABCDEF";

	at += (size_t)sprintf(out + at, "%s%s=", at ? "&" : "", name);
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~') {
			out[at++] = (char)*p;
		} else {
			out[at++] = '%';
			out[at++] = hex[*p >> 4];
			out[at++] = hex[*p & 15];
		}
	}
	out[at] = '\0';
	return at;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *v[2] = {NULL, NULL}, *again[2] = {NULL, NULL};
	struct iso_error err = {0};
	int r = api_form_parse((const char *)data, size, fields, v, &err);

	fuzz_check_refusal(r, &err, "api_form_parse");
	if (r == 0) {
		_cleanup_free_ char *text = malloc(3 * size + 64);
		size_t at = 0;

		FUZZ_ASSERT(text, "out of memory");
		for (int i = 0; i < 2; i++) {
			if (!v[i])
				continue;
			for (const char *p = v[i]; *p; p++)
				FUZZ_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f,
				            "a control byte accepted in %s", fields[i]);
			at = encode(fields[i], v[i], text, at);
		}
		struct iso_error e2 = {0};
		FUZZ_ASSERT(api_form_parse(text, at, fields, again, &e2) == 0,
		            "own encoding refused: %s (%s)", e2.message, text);
		for (int i = 0; i < 2; i++)
			FUZZ_ASSERT((!v[i] && !again[i]) ||
			                (v[i] && again[i] && !strcmp(v[i], again[i])),
			            "%s differs after encoding again", fields[i]);
	}
	api_form_free(v, 2);
	api_form_free(again, 2);
	return 0;
}

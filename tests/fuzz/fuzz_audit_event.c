/* fuzz_audit_event.c: one exported event's canonical bytes through the strict
 * decoder (iso_audit_event_decode), which refuses anything not exactly
 * canonical so that an event has one byte string. So what it accepts must
 * encode back to the very same bytes; a difference means two byte strings
 * for one event, which would let an export be altered without changing what
 * a verifier decodes. */
#include <string.h>

#include "fuzz.h"
#include "isostack/audit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iso_audit_event e = {0};
	struct iso_error err = {0};
	_cleanup_free_ char *again = NULL;
	size_t len = 0;
	int r = iso_audit_event_decode((const char *)data, size, &e, &err);

	fuzz_check_refusal(r, &err, "iso_audit_event_decode");
	if (r < 0)
		return 0;
	r = iso_audit_event_encode(&e, &again, &len, &err);
	FUZZ_ASSERT(r == 0, "a decoded event does not encode: %s", err.message);
	FUZZ_ASSERT(len == size && memcmp(again, data, size) == 0,
	            "decode-encode changed the bytes:\n%.*s\n%.*s", (int)size, (const char *)data,
	            (int)len, again);
	iso_audit_event_clear(&e);
	return 0;
}

/* fuzz_audit.c: `isoctl audit verify` on an export (JSON lines, docs/audit.md)
 * through iso_audit_verify_stream: the event-line fast path of
 * verify_lines.c, head and proof lines through jansson, and the in-order
 * checks. The key is fixed (audit_key.h), so seeds from mkseed_audit verify
 * and mutations reach the Merkle and proof code. Whatever the verdict, it
 * must be explained: a failure names a message. */
#include <string.h>

#include "audit_key.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iso_audit_key key; /* fixed for the whole run */
	struct iso_audit_verdict v;
	struct iso_error err = {0};
	_cleanup_fclose_ FILE *f = NULL;
	int r;

	if (key.pk[0] == 0 && key.pk[1] == 0 && fuzz_audit_key(&key) < 0)
		abort();
	/* fmemopen refuses a zero size on older glibc: give it one byte of "" */
	f = size ? fmemopen((void *)data, size, "r") : fmemopen((void *)"", 1, "r");
	if (!f)
		return 0;
	if (size == 0)
		(void)fgetc(f);
	r = iso_audit_verify_stream(f, "fuzz.jsonl", key.pk, &v, &err);
	fuzz_check_refusal(r, &err, "iso_audit_verify_stream");
	if (r == 0)
		FUZZ_ASSERT(v.message[0] != '\0', "a verdict without a message");
	if (r == 0 && !v.ok)
		FUZZ_ASSERT(v.first_bad >= -1, "first_bad %lld", (long long)v.first_bad);
	return 0;
}

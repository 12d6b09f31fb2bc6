/* fuzz_partitions.c: OpenSM's partitions.conf grammar as iso_partitions_parse
 * reads it (the opensm driver reads back what it wrote; `isoctl fabric`
 * checks operators' files). What it accepts and our renderer can write back
 * must parse again to the same partitions: the renderer and the parser agree
 * on the grammar. */
#include <string.h>

#include "fuzz.h"
#include "isostack/fabric.h"
#include "parts_same.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iso_partitions_file f = {0}, again = {0};
	struct iso_error err = {0};
	_cleanup_free_ char *text = NULL;
	int r = iso_partitions_parse("fuzz.conf", (const char *)data, size, &f, &err);

	fuzz_check_refusal(r, &err, "iso_partitions_parse");
	if (r < 0)
		return 0;
	/* The parser leaves kinds to the caller; the renderer wants Default's. */
	for (int i = 0; i < f.parts.n_parts; i++)
		if (f.parts.parts[i].pkey == ISO_PKEY_DEFAULT)
			f.parts.parts[i].kind = ISO_PART_DEFAULT;
	r = iso_partitions_render(&f.parts, &text, &err);
	fuzz_check_refusal(r, &err, "iso_partitions_render");
	if (r == 0) {
		r = iso_partitions_parse("rendered.conf", text, strlen(text), &again, &err);
		FUZZ_ASSERT(r == 0, "own rendering refused: %s\n%s", err.message, text);
		same_parts(&f.parts, &again.parts);
		iso_partitions_file_clear(&again);
	}
	iso_partitions_file_clear(&f);
	return 0;
}

/* fuzz_sm_document.c: what the SM host's agent reads before it writes
 * OpenSM's partitions.conf (docs/fabric.md, "partitions.conf through the SM
 * host's agent"): the header line of the file already there
 * (iso_sm_header_parse, on the raw input) and the document the controller
 * serves (iso_codec_sm_document_decode, on the input as JSON). A refusal
 * must name what is wrong and hand out nothing; an accepted header must
 * format back to exactly the line read; an accepted document's text must
 * pass the text check, carry no header of its own, and its mark must
 * survive a header written and read back over it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "isostack/codec.h"
#include "isostack/smfile.h"

static void header(const uint8_t *data, size_t size)
{
	struct iso_sm_mark m;
	struct iso_error err = {0};
	char line[256];
	size_t off = 0;
	bool has = false;
	int r = iso_sm_header_parse("in.conf", (const char *)data, size, &m, &has, &off, &err);

	fuzz_check_refusal(r, &err, "iso_sm_header_parse");
	if (r < 0) {
		FUZZ_ASSERT(!has && m.term == 0 && m.generation == 0 && off == 0,
		            "a refused header handed out a mark");
		return;
	}
	if (!has) {
		FUZZ_ASSERT(off == 0 && m.term == 0, "no header, but offset %zu", off);
		return;
	}
	FUZZ_ASSERT(m.term <= ISO_SM_TERM_MAX && m.generation <= ISO_SM_GEN_MAX,
	            "mark %llu/%llu out of range", (unsigned long long)m.term,
	            (unsigned long long)m.generation);
	int n = iso_sm_header_format(line, sizeof(line), &m);
	FUZZ_ASSERT(n > 0 && (size_t)n == off && memcmp(line, data, off) == 0,
	            "header does not format back to the line read");
}

static void document(const uint8_t *data, size_t size)
{
	json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	struct iso_sm_document d;
	struct iso_error err = {0};
	char *file;
	int r;

	if (!doc)
		return;
	r = iso_codec_sm_document_decode(doc, &d, &err);
	json_decref(doc);
	fuzz_check_refusal(r, &err, "iso_codec_sm_document_decode");
	if (r < 0) {
		FUZZ_ASSERT(!d.text && d.term == 0, "a refused document left text behind");
		return;
	}
	size_t len = strlen(d.text);
	FUZZ_ASSERT(iso_sm_text_check("text", d.text, len, NULL) == 0,
	            "accepted text fails the text check");
	FUZZ_ASSERT(d.generation >> 32 == d.term, "generation not of its term");
	/* the file the agent writes: header, then the text */
	file = malloc(len + 256);
	FUZZ_ASSERT(file != NULL, "out of memory");
	struct iso_sm_mark m = {d.term, d.generation}, back;
	int n = iso_sm_header_format(file, 256, &m);
	bool has = false;
	size_t off = 0;
	FUZZ_ASSERT(n > 0, "header format failed");
	memcpy(file + n, d.text, len + 1);
	FUZZ_ASSERT(
	    iso_sm_header_parse("out.conf", file, (size_t)n + len, &back, &has, &off, &err) == 0 &&
	        has && back.term == m.term && back.generation == m.generation && off == (size_t)n,
	    "the written header does not read back");
	free(file);
	iso_codec_sm_document_clear(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	header(data, size);
	document(data, size);
	return 0;
}

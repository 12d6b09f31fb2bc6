/* fuzz_fabric_health.c: what the node agent reads for the CNI plugin's
 * STATUS in InfiniBand mode: GET /v1/fabric/health's answer
 * (iso_codec_fabric_health_decode, docs/cni.md). A refusal must name what is
 * wrong and hand out nothing; an accepted answer has one of the four states,
 * a reason of text, and encodes back to an answer that decodes to the same. */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "isostack/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL), *again;
	struct iso_fabric_health h, back;
	struct iso_error err = {0};
	int r;

	if (!doc)
		return 0;
	r = iso_codec_fabric_health_decode(doc, &h, &err);
	json_decref(doc);
	fuzz_check_refusal(r, &err, "iso_codec_fabric_health_decode");
	if (r < 0) {
		FUZZ_ASSERT(h.driver[0] == '\0' && h.sm.state == ISO_SM_STATE_NONE && !h.full,
		            "a refused answer handed out a state");
		return 0;
	}
	FUZZ_ASSERT(h.sm.state <= ISO_SM_STATE_DOWN, "state %d", (int)h.sm.state);
	FUZZ_ASSERT(h.driver[0] && iso_text_valid(h.sm.reason), "driver or reason not text");
	again = iso_codec_fabric_health_encode(&h);
	FUZZ_ASSERT(again != NULL, "an accepted answer does not encode");
	r = iso_codec_fabric_health_decode(again, &back, &err);
	json_decref(again);
	FUZZ_ASSERT(r == 0, "encoded back, refused: %s", err.message);
	FUZZ_ASSERT(strcmp(back.driver, h.driver) == 0 && back.sm.state == h.sm.state &&
	                strcmp(back.sm.reason, h.sm.reason) == 0 &&
	                back.sm.since_ms == h.sm.since_ms && back.full == h.full &&
	                back.generation == h.generation && back.applied == h.applied &&
	                back.confirmed == h.confirmed && back.incident == h.incident,
	            "encoded back, decodes to another answer");
	return 0;
}

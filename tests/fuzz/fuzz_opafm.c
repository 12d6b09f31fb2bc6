/* fuzz_opafm.c: the fabric intent as JSON (iso_fabric_intent_parse_json, the
 * strict reader of GET /v1/fabric/intent's shape) and what the drivers write
 * from it: opafm.xml for the Omni-Path FM and partitions.conf for OpenSM.
 * isostack never parses opafm.xml (no FM runs beside it, see
 * opafm_driver.c); what can go wrong there is the renderer on an intent it
 * did not build, so that is what this fuzzes. An intent the partitions
 * renderer accepts must parse back to the same partitions. */
#include <string.h>

#include "fuzz.h"
#include "isostack/fabric.h"
#include "parts_same.h"

static int cmp_member(const void *a, const void *b)
{
	const struct iso_fabric_member *x = a, *y = b;

	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iso_fabric_intent in = {0};
	struct iso_partitions_file back = {0};
	struct iso_error err = {0};
	_cleanup_free_ char *json = malloc(size + 1);
	_cleanup_free_ char *xml = NULL, *conf = NULL;
	int r;

	if (!json)
		return 0;
	memcpy(json, data, size);
	json[size] = '\0';
	r = iso_fabric_intent_parse_json(json, &in, &err);
	fuzz_check_refusal(r, &err, "iso_fabric_intent_parse_json");
	if (r < 0)
		return 0;
	r = iso_opafm_render(&in, &xml, &err);
	fuzz_check_refusal(r, &err, "iso_opafm_render");
	if (r == 0)
		FUZZ_ASSERT(strstr(xml, "</Config>"), "opafm.xml is not closed:\n%s", xml);
	/* Member order means nothing in either file (the verifier does not
	 * rely on it either) and the parser sorts: compare sorted. */
	for (int i = 0; i < in.n_parts; i++)
		if (in.parts[i].n_members > 1)
			qsort(in.parts[i].members, (size_t)in.parts[i].n_members,
			      sizeof(*in.parts[i].members), cmp_member);
	err = (struct iso_error){0};
	r = iso_partitions_render(&in, &conf, &err);
	fuzz_check_refusal(r, &err, "iso_partitions_render");
	if (r == 0) {
		r = iso_partitions_parse("rendered.conf", conf, strlen(conf), &back, &err);
		FUZZ_ASSERT(r == 0, "own rendering refused: %s\n%s", err.message, conf);
		same_parts(&in, &back.parts);
		iso_partitions_file_clear(&back);
	}
	iso_fabric_intent_clear(&in);
	return 0;
}

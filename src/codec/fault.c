/* fault.c: the GPU fault report's body (POST /v1/nodes/{node}/gpus/{gpu}/
 * fault, docs/api.md): the node agent encodes it from its outbox
 * (src/agent/faults.c), the API decodes it (src/api/handlers_faults.c). An
 * operator's report is {"xid"} alone; an agent adds the GPU/compute instance
 * the XID names, its owner, and its seq. */
#include <errno.h>
#include <string.h>

#include "codec/internal.h"

json_t *iso_codec_fault_encode(const struct iso_fault_report *f)
{
	json_t *o = json_pack("{s:i}", "xid", f->xid);

	if (!o)
		return NULL;
	if (f->seq && json_object_set_new(o, "seq", json_integer((json_int_t)f->seq)) < 0)
		goto fail;
	if (f->gi >= 0 && json_object_set_new(o, "gi", json_integer(f->gi)) < 0)
		goto fail;
	if (f->ci >= 0 && json_object_set_new(o, "ci", json_integer(f->ci)) < 0)
		goto fail;
	if (f->allocation[0] &&
	    (json_object_set_new(o, "allocation", json_string(f->allocation)) < 0 ||
	     json_object_set_new(o, "member", json_integer(f->member)) < 0))
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

int iso_codec_fault_decode(json_t *body, struct iso_fault_report *out, struct iso_error *err)
{
	static const char *const keys[] = {"xid", "gi", "ci", "allocation", "member", "seq", NULL};
	int64_t xid = 0, gi = -1, ci = -1, member = -1, seq = 0;
	const json_t *alloc = json_object_get(body, "allocation");
	const char *a = json_string_value(alloc);

	if (iso_json_check_keys(body, NULL, keys, err) < 0 ||
	    iso_json_get_int(body, "xid", NULL, true, 0, ISO_XID_MAX, &xid, err) < 0 ||
	    iso_json_get_int(body, "gi", NULL, false, 0, 65535, &gi, err) < 0 ||
	    iso_json_get_int(body, "ci", NULL, false, 0, 65535, &ci, err) < 0 ||
	    iso_json_get_int(body, "member", NULL, false, 0, ISO_CODEC_MEMBER_MAX, &member, err) <
	        0 ||
	    iso_json_get_int(body, "seq", NULL, false, 1, INT64_MAX, &seq, err) < 0)
		return -EINVAL;
	/* An explicit null is not an allocation either. */
	if (alloc && (!a || json_string_length(alloc) != strlen(a) || !cd_alloc_id_valid(a)))
		return iso_error_set(err, ISO_E_INVALID, "allocation",
		                     "allocation: not an allocation id (a- and 16 hex digits)");
	if (!alloc != (member < 0))
		return iso_error_set(err, ISO_E_INVALID, alloc ? "member" : "allocation",
		                     "allocation and member come together");
	out->xid = (int)xid;
	out->gi = (int)gi;
	out->ci = (int)ci;
	out->member = (int)member;
	out->seq = (uint64_t)seq;
	iso_strlcpy(out->allocation, alloc ? a : "", sizeof(out->allocation));
	return 0;
}

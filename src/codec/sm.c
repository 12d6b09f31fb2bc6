/* sm.c: the two JSON shapes between the controller and the SM host's agent
 * (include/isostack/codec.h): the partitions document the agent long-polls
 * and the report it sends back (with whether OpenSM's process runs). The controller encodes the
 * document and decodes the report; the agent the other way round. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/internal.h"
#include "isostack/smfile.h"

json_t *iso_codec_sm_document_encode(const struct iso_sm_document *d)
{
	return json_pack("{s:I, s:I, s:s}", "term", (json_int_t)d->term, "generation",
	                 (json_int_t)d->generation, "text", d->text ? d->text : "");
}

void iso_codec_sm_document_clear(struct iso_sm_document *d)
{
	free(d->text);
	memset(d, 0, sizeof(*d));
}

int iso_codec_sm_document_decode(json_t *body, struct iso_sm_document *out, struct iso_error *err)
{
	static const char *const keys[] = {"term", "generation", "text", NULL};
	int64_t term = 0, gen = 0;
	json_t *text;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(body))
		return iso_error_set(err, ISO_E_INVALID, "", "the SM document is not an object");
	if (iso_json_check_keys(body, NULL, keys, err) < 0 ||
	    iso_json_get_int(body, "term", NULL, true, 1, (int64_t)ISO_SM_TERM_MAX, &term, err) <
	        0 ||
	    iso_json_get_int(body, "generation", NULL, true, 1, INT64_MAX, &gen, err) < 0)
		return -EINVAL;
	text = json_object_get(body, "text");
	if (!json_is_string(text))
		return iso_error_set(err, ISO_E_INVALID, "text",
		                     text ? "text: must be a string" : "text: required");
	if ((uint64_t)gen >> 32 != (uint64_t)term)
		return iso_error_set(err, ISO_E_INVALID, "generation",
		                     "generation: %lld is not of term %lld (term << 32 | n)",
		                     (long long)gen, (long long)term);
	if (iso_sm_text_check("text", json_string_value(text), json_string_length(text), err) < 0)
		return -EINVAL;
	if (!(out->text = strdup(json_string_value(text))))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	out->term = (uint64_t)term;
	out->generation = (uint64_t)gen;
	return 0;
}

json_t *iso_codec_sm_report_encode(const struct iso_sm_report *r)
{
	json_t *o = json_pack("{s:s, s:I, s:I}", "version", r->version, "term", (json_int_t)r->term,
	                      "generation", (json_int_t)r->generation);

	if (o && r->refused &&
	    json_object_set_new(o, "refused",
	                        json_pack("{s:I, s:I, s:s}", "term", (json_int_t)r->refused_term,
	                                  "generation", (json_int_t)r->refused_generation, "reason",
	                                  r->refused_reason)) < 0)
		goto fail;
	if (o && r->has_sm_alive &&
	    json_object_set_new(o, "sm_alive", json_boolean(r->sm_alive)) < 0)
		goto fail;
	if (o && r->incident &&
	    json_object_set_new(o, "incident",
	                        json_pack("{s:I, s:s}", "generation",
	                                  (json_int_t)r->incident_generation, "line",
	                                  r->incident_line)) < 0)
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

/* A string of at most size-1 bytes of text without control characters. */
static int get_text(json_t *obj, const char *key, const char *prefix, char *out, size_t size,
                    struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	const char *s = NULL;

	if (iso_json_get_string(obj, key, prefix, true, &s, err) < 0)
		return -EINVAL;
	iso_json_field(field, sizeof(field), prefix, key);
	if (strlen(s) > size - 1 || !iso_text_valid(s))
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: at most %zu bytes of text without control characters",
		                     field, size - 1);
	iso_strlcpy(out, s, size);
	return 0;
}

int iso_codec_sm_report_decode(json_t *body, struct iso_sm_report *out, struct iso_error *err)
{
	static const char *const keys[] = {"version",  "term",     "generation", "refused",
	                                   "incident", "sm_alive", NULL};
	static const char *const refused_keys[] = {"term", "generation", "reason", NULL};
	static const char *const incident_keys[] = {"generation", "line", NULL};
	int64_t term = 0, gen = 0, v;
	json_t *o;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(body))
		return iso_error_set(err, ISO_E_INVALID, "", "the SM report is not an object");
	if (iso_json_check_keys(body, NULL, keys, err) < 0 ||
	    cd_get_ascii(body, "version", NULL, true, 1, 64, out->version, sizeof(out->version),
	                 err) < 0 ||
	    iso_json_get_int(body, "term", NULL, true, 0, (int64_t)ISO_SM_TERM_MAX, &term, err) <
	        0 ||
	    iso_json_get_int(body, "generation", NULL, true, 0, INT64_MAX, &gen, err) < 0)
		return -EINVAL;
	out->term = (uint64_t)term;
	out->generation = (uint64_t)gen;
	/* optional: an older agent does not send it */
	if (json_object_get(body, "sm_alive") && !json_is_null(json_object_get(body, "sm_alive"))) {
		if (iso_json_get_bool(body, "sm_alive", NULL, true, &out->sm_alive, err) < 0)
			return -EINVAL;
		out->has_sm_alive = true;
	}
	if ((o = json_object_get(body, "refused"))) {
		if (!json_is_object(o))
			return iso_error_set(err, ISO_E_INVALID, "refused",
			                     "refused: must be an object");
		if (iso_json_check_keys(o, "refused", refused_keys, err) < 0 ||
		    iso_json_get_int(o, "term", "refused", true, 0, (int64_t)ISO_SM_TERM_MAX, &v,
		                     err) < 0)
			return -EINVAL;
		out->refused_term = (uint64_t)v;
		if (iso_json_get_int(o, "generation", "refused", true, 0, INT64_MAX, &v, err) < 0 ||
		    get_text(o, "reason", "refused", out->refused_reason,
		             sizeof(out->refused_reason), err) < 0)
			return -EINVAL;
		out->refused_generation = (uint64_t)v;
		out->refused = true;
	}
	if ((o = json_object_get(body, "incident"))) {
		if (!json_is_object(o))
			return iso_error_set(err, ISO_E_INVALID, "incident",
			                     "incident: must be an object");
		if (iso_json_check_keys(o, "incident", incident_keys, err) < 0 ||
		    iso_json_get_int(o, "generation", "incident", true, 1, INT64_MAX, &v, err) <
		        0 ||
		    get_text(o, "line", "incident", out->incident_line, sizeof(out->incident_line),
		             err) < 0)
			return -EINVAL;
		out->incident_generation = (uint64_t)v;
		out->incident = true;
	}
	return 0;
}

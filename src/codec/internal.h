/* internal.h: the codec's strict readers of one JSON value, shared by the
 * decoders of every shape so that each refusal reads the same way ("gpus[1]
 * .index: must be 0..63"). The readers of one typed value (iso_json_*,
 * codec.h) are the API's request readers too, so a request body and an
 * agent's document refuse alike: an explicit null is an absent key. */
#ifndef ISOSTACK_CODEC_INTERNAL_H
#define ISOSTACK_CODEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isostack/codec.h"

/* Printable ASCII of min..max bytes copied into out[size]. */
int cd_get_ascii(json_t *obj, const char *key, const char *prefix, bool required, size_t min,
                 size_t max, char *out, size_t size, struct iso_error *err);
/* At most 256 bytes of text without control characters, copied into
 * out[ISO_AGENT_REASON_MAX] ("" when absent). */
int cd_get_reason(json_t *obj, const char *prefix, char *out, struct iso_error *err);
/* The array `key` of `body`, required, at most max items, each an object. */
int cd_get_objects(json_t *body, const char *key, size_t max, json_t **out, struct iso_error *err);
/* "a-" and 16 lowercase hex digits. */
bool cd_alloc_id_valid(const char *s);
/* The required allocation id "allocation" of obj into out[ISO_CODEC_ID_MAX],
 * refused unless cd_alloc_id_valid (field prefix.allocation). */
int cd_get_alloc_id(json_t *obj, const char *prefix, char *out, struct iso_error *err);

#endif

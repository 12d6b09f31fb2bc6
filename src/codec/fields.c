/* fields.c: the strict readers of one JSON value (codec.h, internal.h). One
 * place for the wording of every refusal, so that the API's request bodies,
 * the fault report, the status and the desired state refuse alike. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "codec/internal.h"
#include "isostack/model.h"

_Static_assert(ISO_CODEC_ID_MAX == ISO_ID_MAX, "codec.h: ISO_CODEC_ID_MAX is model.h's ISO_ID_MAX");

void iso_json_field(char *buf, size_t size, const char *prefix, const char *key)
{
	if (prefix && prefix[0])
		snprintf(buf, size, "%s.%s", prefix, key);
	else
		snprintf(buf, size, "%s", key);
}

int iso_json_load_object(const char *text, size_t len, size_t max, enum iso_errcode too_large,
                         const char *what, json_t **out, struct iso_error *err)
{
	json_error_t je;
	json_t *doc;

	*out = NULL;
	if (len > max)
		return iso_error_set(err, too_large, "", "%s%sover %zu bytes", what ? what : "",
		                     what ? " " : "", max);
	if (!(doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je)))
		return iso_error_set(err, ISO_E_INVALID, "", "not JSON: %s", je.text);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INVALID, "", "expected a JSON object");
	}
	*out = doc;
	return 0;
}

int iso_json_check_keys(json_t *obj, const char *prefix, const char *const *allowed,
                        struct iso_error *err)
{
	const char *key;
	json_t *value;

	json_object_foreach (obj, key, value) {
		bool known = false;
		(void)value;
		for (const char *const *a = allowed; *a; a++)
			if (strcmp(key, *a) == 0)
				known = true;
		if (!known) {
			char field[ISO_ERR_FIELD_MAX];
			iso_json_field(field, sizeof(field), prefix, key);
			return iso_error_set(err, ISO_E_INVALID, field, "%s: unknown field", field);
		}
	}
	return 0;
}

static json_t *lookup(json_t *obj, const char *key, const char *prefix, bool required, char *field,
                      size_t size, int *r, struct iso_error *err)
{
	json_t *v = json_object_get(obj, key);

	iso_json_field(field, size, prefix, key);
	*r = 0;
	if (!v || json_is_null(v)) {
		if (required)
			*r = iso_error_set(err, ISO_E_INVALID, field, "%s: required", field);
		return NULL;
	}
	return v;
}

int iso_json_get_string(json_t *obj, const char *key, const char *prefix, bool required,
                        const char **out, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	int r;
	json_t *v = lookup(obj, key, prefix, required, field, sizeof(field), &r, err);

	if (!v)
		return r;
	if (!json_is_string(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be a string", field);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must not contain NUL", field);
	*out = json_string_value(v);
	return 0;
}

int iso_json_get_int(json_t *obj, const char *key, const char *prefix, bool required, int64_t min,
                     int64_t max, int64_t *out, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	int r;
	json_t *v = lookup(obj, key, prefix, required, field, sizeof(field), &r, err);
	json_int_t x;

	if (!v)
		return r;
	if (!json_is_integer(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be an integer", field);
	x = json_integer_value(v);
	if (x < min || x > max)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be %lld..%lld", field,
		                     (long long)min, (long long)max);
	*out = x;
	return 0;
}

int iso_json_get_bool(json_t *obj, const char *key, const char *prefix, bool required, bool *out,
                      struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	int r;
	json_t *v = lookup(obj, key, prefix, required, field, sizeof(field), &r, err);

	if (!v)
		return r;
	if (!json_is_boolean(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be true or false", field);
	*out = json_is_true(v);
	return 0;
}

int iso_json_get_number(json_t *obj, const char *key, const char *prefix, double min, double max,
                        double *out, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	int r;
	json_t *v = lookup(obj, key, prefix, false, field, sizeof(field), &r, err);

	if (!v)
		return r;
	if (!json_is_number(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be a number", field);
	double x = json_number_value(v);
	if (!(x >= min && x <= max))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be %g..%g", field, min,
		                     max);
	*out = x;
	return 0;
}

int cd_get_ascii(json_t *obj, const char *key, const char *prefix, bool required, size_t min,
                 size_t max, char *out, size_t size, struct iso_error *err)
{
	const char *s = NULL;
	char field[ISO_ERR_FIELD_MAX];
	size_t n;
	int r = iso_json_get_string(obj, key, prefix, required, &s, err);

	if (r < 0 || !s)
		return r;
	iso_json_field(field, sizeof(field), prefix, key);
	n = strlen(s);
	if (n < min || n > max || n >= size)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be %zu..%zu characters",
		                     field, min, max);
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return iso_error_set(err, ISO_E_INVALID, field, "%s: printable ASCII only",
			                     field);
	memcpy(out, s, n + 1);
	return 0;
}

int cd_get_reason(json_t *obj, const char *prefix, char *out, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	const char *reason = NULL;

	if (iso_json_get_string(obj, "reason", prefix, false, &reason, err) < 0)
		return -EINVAL;
	if (reason && (strlen(reason) > ISO_AGENT_REASON_MAX - 1 || !iso_text_valid(reason))) {
		iso_json_field(field, sizeof(field), prefix, "reason");
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: at most %d bytes of text without control characters",
		                     field, ISO_AGENT_REASON_MAX - 1);
	}
	iso_strlcpy(out, reason ? reason : "", ISO_AGENT_REASON_MAX);
	return 0;
}

int cd_get_objects(json_t *body, const char *key, size_t max, json_t **out, struct iso_error *err)
{
	json_t *v = json_object_get(body, key);
	char field[ISO_ERR_FIELD_MAX];
	size_t i;
	json_t *item;

	if (!v || json_is_null(v))
		return iso_error_set(err, ISO_E_INVALID, key, "%s: required", key);
	if (!json_is_array(v))
		return iso_error_set(err, ISO_E_INVALID, key, "%s: must be an array", key);
	if (json_array_size(v) > max)
		return iso_error_set(err, ISO_E_INVALID, key, "%s: at most %zu items", key, max);
	json_array_foreach (v, i, item)
		if (!json_is_object(item)) {
			snprintf(field, sizeof(field), "%s[%zu]", key, i);
			return iso_error_set(err, ISO_E_INVALID, field, "%s: must be an object",
			                     field);
		}
	*out = v;
	return 0;
}

bool cd_alloc_id_valid(const char *s)
{
	if (strncmp(s, "a-", 2) != 0 || strlen(s) != 18)
		return false;
	for (int i = 2; i < 18; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int cd_get_alloc_id(json_t *obj, const char *prefix, char *out, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];

	if (cd_get_ascii(obj, "allocation", prefix, true, 1, ISO_CODEC_ID_MAX - 1, out,
	                 ISO_CODEC_ID_MAX, err) < 0)
		return -EINVAL;
	if (cd_alloc_id_valid(out))
		return 0;
	iso_json_field(field, sizeof(field), prefix, "allocation");
	return iso_error_set(err, ISO_E_INVALID, field,
	                     "%s: not an allocation id (a- and 16 hex digits)", field);
}

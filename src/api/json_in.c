/* json_in.c: strict request parsing. A body must be one JSON object with no
 * duplicate and no unknown keys, and every value of the declared type and
 * range; every refusal names the field. Query strings get the same care. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "api/internal.h"

static void field_path(char *buf, size_t size, const char *prefix, const char *key)
{
	if (prefix && prefix[0])
		snprintf(buf, size, "%s.%s", prefix, key);
	else
		snprintf(buf, size, "%s", key);
}

int api_body_object(struct api_request *r, bool allow_empty, json_t **out)
{
	json_error_t jerr;
	json_t *root;

	if (r->body_len == 0) {
		if (!allow_empty)
			return iso_error_set(&r->err, ISO_E_INVALID, NULL,
			                     "request body: a JSON object is required");
		*out = json_object();
		return 0;
	}
	root = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return iso_error_set(&r->err, ISO_E_INVALID, NULL,
		                     "request body: invalid JSON at line %d column %d: %s",
		                     jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return iso_error_set(&r->err, ISO_E_INVALID, NULL,
		                     "request body: must be a JSON object");
	}
	*out = root;
	return 0;
}

int api_check_keys(json_t *obj, const char *prefix, const char *const *allowed,
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
			field_path(field, sizeof(field), prefix, key);
			return iso_error_set(err, ISO_E_INVALID, field, "%s: unknown field", field);
		}
	}
	return 0;
}

static json_t *lookup(json_t *obj, const char *key, const char *prefix, bool required, char *field,
                      size_t size, int *r, struct iso_error *err)
{
	json_t *v = json_object_get(obj, key);

	field_path(field, size, prefix, key);
	*r = 0;
	/* An explicit null means "not given", the same as an absent key. */
	if (!v || json_is_null(v)) {
		if (required)
			*r = iso_error_set(err, ISO_E_INVALID, field, "%s: required", field);
		return NULL;
	}
	return v;
}

int api_get_string(json_t *obj, const char *key, const char *prefix, bool required,
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

int api_get_int(json_t *obj, const char *key, const char *prefix, bool required, int64_t min,
                int64_t max, int64_t *out, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	int r;
	json_t *v = lookup(obj, key, prefix, required, field, sizeof(field), &r, err);

	if (!v)
		return r;
	if (!json_is_integer(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be an integer", field);
	json_int_t x = json_integer_value(v);
	if (x < min || x > max)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be %lld..%lld", field,
		                     (long long)min, (long long)max);
	*out = x;
	return 0;
}

int api_get_bool(json_t *obj, const char *key, const char *prefix, bool *out, struct iso_error *err)
{
	char field[ISO_ERR_FIELD_MAX];
	int r;
	json_t *v = lookup(obj, key, prefix, false, field, sizeof(field), &r, err);

	if (!v)
		return r;
	if (!json_is_boolean(v))
		return iso_error_set(err, ISO_E_INVALID, field, "%s: must be true or false", field);
	*out = json_is_true(v);
	return 0;
}

int api_get_number(json_t *obj, const char *key, const char *prefix, double min, double max,
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

int api_check_query(struct api_request *r, const char *const *allowed)
{
	for (int i = 0; i < r->n_query; i++) {
		const char *key = r->query[i].name;
		bool known = false;
		for (const char *const *a = allowed; a && *a && !known; a++)
			known = strcmp(key, *a) == 0;
		if (!known) {
			char field[ISO_ERR_FIELD_MAX];
			snprintf(field, sizeof(field), "%.80s", key);
			return iso_error_set(&r->err, ISO_E_INVALID, field,
			                     "query parameter \"%s\": unknown", field);
		}
	}
	return 0;
}

const char *api_query(struct api_request *r, const char *key)
{
	for (int i = 0; i < r->n_query; i++)
		if (strcmp(r->query[i].name, key) == 0)
			return r->query[i].value;
	return NULL;
}

int api_page(struct api_request *r, int *limit, const char **after)
{
	const char *l = api_query(r, "limit");
	const char *a = api_query(r, "after");

	*limit = API_DEFAULT_LIMIT;
	if (l) {
		char *end = NULL;
		errno = 0;
		long v = strtol(l, &end, 10);
		if (errno || !end || *end || end == l || v < 1 || v > API_MAX_LIMIT)
			return iso_error_set(&r->err, ISO_E_INVALID, "limit",
			                     "limit: must be an integer 1..%d", API_MAX_LIMIT);
		*limit = (int)v;
	}
	*after = NULL;
	if (a) {
		if (!a[0] || strlen(a) >= ISO_ID_MAX + ISO_NAME_MAX)
			return iso_error_set(&r->err, ISO_E_INVALID, "after",
			                     "after: invalid cursor");
		*after = a;
	}
	return 0;
}

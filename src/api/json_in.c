/* json_in.c: strict request parsing. A body must be one JSON object with no
 * duplicate and no unknown keys, and every value of the declared type and
 * range; every refusal names the field. Query strings get the same care. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "api/internal.h"

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

/* pages.c: walks a paginated list endpoint ({"items","next"}) with `after`
 * cursors and hands back one combined {"items":[...]}, so no caller writes its
 * own cursor loop. */
#include <string.h>

#include "isostack/client.h"

/* Hard stop for a server that never ends a list: 1e6 pages of >= 1 item. */
#define MAX_PAGES 1000000

static int page_path(const char *path, const char *cursor, char **out)
{
	_cleanup_free_ char *esc = NULL;

	*out = NULL;
	if (!cursor)
		return (*out = strdup(path)) ? 0 : -1;
	esc = iso_client_escape(cursor);
	if (!esc)
		return -1;
	if (asprintf(out, "%s%cafter=%s", path, strchr(path, '?') ? '&' : '?', esc) < 0) {
		*out = NULL;
		return -1;
	}
	return 0;
}

int iso_client_list_all(struct iso_client *c, const char *path, struct iso_response *out,
                        struct iso_error *err)
{
	json_t *all = json_array();
	_cleanup_free_ char *cursor = NULL;
	struct iso_response page = {0};
	int r = 0;

	memset(out, 0, sizeof(*out));
	if (!all)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int n = 0;; n++) {
		_cleanup_free_ char *p = NULL;
		json_t *items, *next;

		if (n == MAX_PAGES) {
			r = iso_error_set(err, ISO_E_INTERNAL, NULL,
			                  "GET %s%s: list did not end after %d pages",
			                  iso_client_url(c), path, MAX_PAGES);
			break;
		}
		if (page_path(path, cursor, &p) < 0) {
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			break;
		}
		r = iso_client_request(c, "GET", p, NULL, &page, err);
		if (r < 0)
			break;
		if (!iso_response_ok(&page)) {
			*out = page; /* the failing page, as it came */
			json_decref(all);
			return 0;
		}
		items = json_object_get(page.body, "items");
		next = json_object_get(page.body, "next");
		if (!json_is_array(items) ||
		    (next && !json_is_null(next) && !json_is_string(next))) {
			r = iso_error_set(
			    err, ISO_E_INTERNAL, NULL,
			    "GET %s%s: answer is not a list ({\"items\":[...],\"next\"})",
			    iso_client_url(c), p);
			break;
		}
		if (json_array_extend(all, items) < 0) {
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			break;
		}
		if (!json_is_string(next)) {
			out->status = page.status;
			memcpy(out->request_id, page.request_id, sizeof(out->request_id));
			out->body = json_pack("{s:o}", "items", all);
			iso_response_clear(&page);
			if (!out->body)
				return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			return 0;
		}
		if (cursor && strcmp(cursor, json_string_value(next)) == 0) {
			r = iso_error_set(err, ISO_E_INTERNAL, NULL,
			                  "GET %s%s: server repeated cursor; list would not end",
			                  iso_client_url(c), path);
			break;
		}
		free(cursor);
		cursor = strdup(json_string_value(next));
		iso_response_clear(&page);
		if (!cursor) {
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			break;
		}
	}
	iso_response_clear(&page);
	json_decref(all);
	return r;
}

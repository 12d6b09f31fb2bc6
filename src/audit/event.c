/* event.c: an audit event and its one canonical byte string. The encoder is
 * what the controller stores and hashes; the decoder is strict (it re-encodes
 * and compares) so that a stored or exported event has exactly one accepted
 * spelling, and anything else is reported as modified. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "audit/internal.h"

static const char *const outcome_names[] = {
    [ISO_AUDIT_SUCCESS] = "success",
    [ISO_AUDIT_DENIED] = "denied",
    [ISO_AUDIT_ERROR] = "error",
};

const char *iso_audit_outcome_name(enum iso_audit_outcome o)
{
	if ((unsigned)o < ISO_ARRAY_SIZE(outcome_names))
		return outcome_names[o];
	return "invalid";
}

void iso_audit_event_clear(struct iso_audit_event *e)
{
	free(e->details);
	e->details = NULL;
}

/* The event's text fields, by their path in the encoding. */
struct text_field {
	const char *path;
	size_t off, size;
};
#define TF(path, member)                                                                           \
	{                                                                                          \
		path, offsetof(struct iso_audit_event, member),                                    \
		    sizeof(((struct iso_audit_event *)0)->member)                                  \
	}
static const struct text_field text_fields[] = {
    TF("action", action),
    TF("actor.role", actor_role),
    TF("actor.tenant", actor_tenant),
    TF("actor.token", actor_token),
    TF("object.id", object_id),
    TF("object.kind", object_kind),
    TF("object.tenant", object_tenant),
    TF("reason", reason),
    TF("request_id", request_id),
    TF("source", source),
};
#undef TF

static const char *text_of(const struct iso_audit_event *e, const struct text_field *f)
{
	return (const char *)e + f->off;
}

static const struct text_field *text_field(const char *path)
{
	for (size_t i = 0; i < ISO_ARRAY_SIZE(text_fields); i++)
		if (strcmp(text_fields[i].path, path) == 0)
			return &text_fields[i];
	return NULL;
}

static int check_fields(const struct iso_audit_event *e, struct iso_error *err)
{
	if ((unsigned)e->outcome >= ISO_ARRAY_SIZE(outcome_names))
		return iso_error_set(err, ISO_E_INVALID, "outcome",
		                     "audit event: outcome %d is not success, denied or error",
		                     (int)e->outcome);
	if (e->seq < 0)
		return iso_error_set(err, ISO_E_INVALID, "seq", "audit event: seq %lld is negative",
		                     (long long)e->seq);
	/* Text is taken as UTF-8; ill-formed bytes (a name cut short, a path
	 * as sent) are written as U+FFFD rather than refused, so that no event
	 * is lost to them (docs/audit.md). Only an unterminated field is an
	 * error: its length is unknown. */
	for (size_t i = 0; i < ISO_ARRAY_SIZE(text_fields); i++) {
		const struct text_field *f = &text_fields[i];
		if (!memchr(text_of(e, f), '\0', f->size))
			return iso_error_set(err, ISO_E_INVALID, f->path,
			                     "audit event: %s is not terminated", f->path);
	}
	return 0;
}

static void put_text(struct canon_buf *b, const char *key, const char *s)
{
	canon_puts(b, key);
	canon_string(b, s, strlen(s));
}

/* Writes the canonical bytes of e with `details` already parsed. */
static int encode(const struct iso_audit_event *e, const json_t *details, struct canon_buf *b,
                  struct iso_error *err)
{
	char path[ISO_ERR_FIELD_MAX] = "details";
	int r;

	/* Keys in sorted order: action actor details object outcome reason
	 * request_id seq source time (inner objects sorted the same way). */
	put_text(b, "{\"action\":", e->action);
	put_text(b, ",\"actor\":{\"role\":", e->actor_role);
	put_text(b, ",\"tenant\":", e->actor_tenant);
	put_text(b, ",\"token\":", e->actor_token);
	canon_puts(b, "},\"details\":");
	if (details) {
		r = canon_value(b, details, path, sizeof(path), err);
		if (r < 0)
			return r;
	} else {
		canon_puts(b, "{}");
	}
	put_text(b, ",\"object\":{\"id\":", e->object_id);
	put_text(b, ",\"kind\":", e->object_kind);
	put_text(b, ",\"tenant\":", e->object_tenant);
	canon_puts(b, "},\"outcome\":");
	canon_string(b, outcome_names[e->outcome], strlen(outcome_names[e->outcome]));
	put_text(b, ",\"reason\":", e->reason);
	put_text(b, ",\"request_id\":", e->request_id);
	canon_puts(b, ",\"seq\":");
	canon_int(b, (long long)e->seq);
	put_text(b, ",\"source\":", e->source);
	canon_puts(b, ",\"time\":");
	canon_int(b, (long long)e->time_ms);
	canon_puts(b, "}");
	if (b->oom)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit event: out of memory");
	return 0;
}

static int parse_details(const char *text, json_t **out, struct iso_error *err)
{
	json_error_t jerr;
	json_t *d;

	*out = NULL;
	if (!text)
		return 0;
	d = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
	if (!d)
		return iso_error_set(err, ISO_E_INVALID, "details",
		                     "audit event: details are not JSON: %s (at byte %d)",
		                     jerr.text, jerr.position);
	if (!json_is_object(d)) {
		json_decref(d);
		return iso_error_set(err, ISO_E_INVALID, "details",
		                     "audit event: details must be a JSON object");
	}
	*out = d;
	return 0;
}

int iso_audit_event_encode(const struct iso_audit_event *e, char **out, size_t *len,
                           struct iso_error *err)
{
	struct canon_buf b = {0};
	json_t *details = NULL;
	int r;

	*out = NULL;
	*len = 0;
	r = check_fields(e, err);
	if (r < 0)
		return r;
	r = parse_details(e->details, &details, err);
	if (r < 0)
		return r;
	r = encode(e, details, &b, err);
	json_decref(details);
	if (r < 0) {
		free(b.p);
		return r;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

/* ---- decoding ---- */

static int decode_fail(struct iso_audit_event *e, json_t *root, int r)
{
	json_decref(root);
	iso_audit_event_clear(e);
	return r;
}

/* Exactly the keys in `want` (a NULL-terminated list), no others. */
static int check_keys(const json_t *obj, const char *where, const char *const *want,
                      struct iso_error *err)
{
	const char *key;
	json_t *v;

	json_object_foreach ((json_t *)obj, key, v) {
		bool known = false;
		for (const char *const *w = want; *w; w++)
			known = known || strcmp(*w, key) == 0;
		if (!known)
			return iso_error_set(err, ISO_E_INVALID, where,
			                     "audit event: unknown key \"%.64s\" in %s", key,
			                     where);
	}
	for (const char *const *w = want; *w; w++)
		if (!json_object_get(obj, *w))
			return iso_error_set(err, ISO_E_INVALID, where,
			                     "audit event: missing key \"%s\" in %s", *w, where);
	return 0;
}

static int get_text(const json_t *obj, const char *key, const char *path, struct iso_audit_event *e,
                    struct iso_error *err)
{
	const struct text_field *f = text_field(path);
	const json_t *v = json_object_get(obj, key);
	char *dst = (char *)e + f->off;
	size_t n;

	if (!json_is_string(v))
		return iso_error_set(err, ISO_E_INVALID, path, "audit event: %s must be a string",
		                     path);
	n = json_string_length(v);
	if (memchr(json_string_value(v), '\0', n))
		return iso_error_set(err, ISO_E_INVALID, path,
		                     "audit event: %s must not contain U+0000", path);
	if (n >= f->size)
		return iso_error_set(err, ISO_E_INVALID, path,
		                     "audit event: %s is %zu bytes long, at most %zu are allowed",
		                     path, n, f->size - 1);
	memcpy(dst, json_string_value(v), n + 1);
	return 0;
}

static int get_int(const json_t *obj, const char *key, int64_t *out, struct iso_error *err)
{
	const json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v))
		return iso_error_set(err, ISO_E_INVALID, key, "audit event: %s must be an integer",
		                     key);
	*out = (int64_t)json_integer_value(v);
	return 0;
}

static int decode_object(const json_t *root, struct iso_audit_event *e, struct iso_error *err)
{
	static const char *const top_keys[] = {"action",  "actor",  "details",    "object",
	                                       "outcome", "reason", "request_id", "seq",
	                                       "source",  "time",   NULL};
	static const char *const actor_keys[] = {"role", "tenant", "token", NULL};
	static const char *const object_keys[] = {"id", "kind", "tenant", NULL};
	const json_t *actor, *object, *details, *outcome;
	char path[ISO_ERR_FIELD_MAX] = "details";
	struct canon_buf b = {0};
	int r;

	if (!json_is_object(root))
		return iso_error_set(err, ISO_E_INVALID, NULL, "audit event: not a JSON object");
	if ((r = check_keys(root, "the event", top_keys, err)) < 0)
		return r;
	actor = json_object_get(root, "actor");
	object = json_object_get(root, "object");
	if (!json_is_object(actor))
		return iso_error_set(err, ISO_E_INVALID, "actor",
		                     "audit event: actor must be an object");
	if (!json_is_object(object))
		return iso_error_set(err, ISO_E_INVALID, "object",
		                     "audit event: object must be an object");
	if ((r = check_keys(actor, "actor", actor_keys, err)) < 0 ||
	    (r = check_keys(object, "object", object_keys, err)) < 0)
		return r;
	if ((r = get_text(root, "action", "action", e, err)) < 0 ||
	    (r = get_text(actor, "role", "actor.role", e, err)) < 0 ||
	    (r = get_text(actor, "tenant", "actor.tenant", e, err)) < 0 ||
	    (r = get_text(actor, "token", "actor.token", e, err)) < 0 ||
	    (r = get_text(object, "id", "object.id", e, err)) < 0 ||
	    (r = get_text(object, "kind", "object.kind", e, err)) < 0 ||
	    (r = get_text(object, "tenant", "object.tenant", e, err)) < 0 ||
	    (r = get_text(root, "reason", "reason", e, err)) < 0 ||
	    (r = get_text(root, "request_id", "request_id", e, err)) < 0 ||
	    (r = get_text(root, "source", "source", e, err)) < 0 ||
	    (r = get_int(root, "seq", &e->seq, err)) < 0 ||
	    (r = get_int(root, "time", &e->time_ms, err)) < 0)
		return r;
	if (e->seq < 0)
		return iso_error_set(err, ISO_E_INVALID, "seq", "audit event: seq %lld is negative",
		                     (long long)e->seq);
	outcome = json_object_get(root, "outcome");
	if (!json_is_string(outcome))
		return iso_error_set(err, ISO_E_INVALID, "outcome",
		                     "audit event: outcome must be a string");
	e->outcome = (enum iso_audit_outcome)ISO_ARRAY_SIZE(outcome_names);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(outcome_names); i++)
		if (strcmp(json_string_value(outcome), outcome_names[i]) == 0)
			e->outcome = (enum iso_audit_outcome)i;
	if ((unsigned)e->outcome >= ISO_ARRAY_SIZE(outcome_names))
		return iso_error_set(
		    err, ISO_E_INVALID, "outcome",
		    "audit event: outcome \"%.32s\" is not success, denied or error",
		    json_string_value(outcome));
	details = json_object_get(root, "details");
	if (!json_is_object(details))
		return iso_error_set(err, ISO_E_INVALID, "details",
		                     "audit event: details must be an object");
	r = canon_value(&b, details, path, sizeof(path), err);
	if (r == 0 && b.oom)
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "audit event: out of memory");
	if (r < 0) {
		free(b.p);
		return r;
	}
	e->details = b.p;
	return 0;
}

int iso_audit_event_decode(const char *bytes, size_t len, struct iso_audit_event *e,
                           struct iso_error *err)
{
	json_error_t jerr;
	json_t *root;
	char *again = NULL;
	size_t again_len = 0;
	int r;

	memset(e, 0, sizeof(*e));
	root = json_loadb(bytes, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!root)
		return iso_error_set(err, ISO_E_INVALID, NULL,
		                     "audit event: not JSON: %s (at byte %d)", jerr.text,
		                     jerr.position);
	r = decode_object(root, e, err);
	if (r < 0)
		return decode_fail(e, root, r);
	json_decref(root);
	/* One event, one byte string: anything the encoder would not have
	 * written (spacing, key order, escapes, "-0") is refused. */
	r = iso_audit_event_encode(e, &again, &again_len, err);
	if (r < 0)
		return decode_fail(e, NULL, r);
	if (again_len != len || memcmp(again, bytes, len) != 0) {
		size_t at = 0;
		while (at < len && at < again_len && again[at] == bytes[at])
			at++;
		free(again);
		return decode_fail(e, NULL,
		                   iso_error_set(err, ISO_E_INVALID, NULL,
		                                 "audit event: not in canonical form (first "
		                                 "difference at byte %zu; see docs/audit.md)",
		                                 at));
	}
	free(again);
	return 0;
}

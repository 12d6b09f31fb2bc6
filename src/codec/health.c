/* health.c: GET /v1/fabric/health's answer (include/isostack/codec.h):
 * whether the fabric driver's subnet manager is reachable. The controller
 * encodes it; the node agent decodes it for the CNI plugin's STATUS, which
 * answers 50 when the SM is down (docs/cni.md). A node agent gets the small
 * body only: nothing in it comes from a tenant. */
#define _DEFAULT_SOURCE /* timegm */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "codec/internal.h"

#define SINCE_LEN 24 /* "2025-01-02T03:04:05.678Z" */

json_t *iso_codec_fabric_health_encode(const struct iso_fabric_health *h)
{
	char since[32];
	json_t *o;

	iso_format_time(h->sm.since_ms, since, sizeof(since));
	o = json_pack("{s:s, s:{s:s, s:s, s:s}}", "driver", h->driver, "sm", "state",
	              iso_sm_state_name(h->sm.state), "reason", h->sm.reason, "since", since);
	if (o && h->full &&
	    (json_object_set_new(o, "generation", json_integer((json_int_t)h->generation)) < 0 ||
	     json_object_set_new(o, "applied", json_integer((json_int_t)h->applied)) < 0 ||
	     json_object_set_new(o, "confirmed", json_integer((json_int_t)h->confirmed)) < 0 ||
	     json_object_set_new(o, "incident", json_boolean(h->incident)) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Exactly iso_format_time's shape, read back to wall-clock ms. */
static int get_since(json_t *sm, int64_t *out, struct iso_error *err)
{
	const char *s = NULL;
	struct tm tm = {0};
	int ms = 0, n = 0;
	char back[32];
	time_t t;

	if (iso_json_get_string(sm, "since", "sm", true, &s, err) < 0)
		return -EINVAL;
	if (strlen(s) != SINCE_LEN ||
	    sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	           &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &n) != 7 ||
	    n != SINCE_LEN || tm.tm_year < 1970)
		goto bad;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	if ((t = timegm(&tm)) == (time_t)-1)
		goto bad;
	*out = (int64_t)t * 1000 + ms;
	/* 02-30 and 25:00 normalise to another day: not what was written */
	iso_format_time(*out, back, sizeof(back));
	if (strcmp(back, s) != 0)
		goto bad;
	return 0;
bad:
	*out = 0;
	return iso_error_set(err, ISO_E_INVALID, "sm.since",
	                     "sm.since: expected an RFC 3339 UTC time YYYY-MM-DDTHH:MM:SS.mmmZ");
}

int iso_codec_fabric_health_decode(json_t *body, struct iso_fabric_health *out,
                                   struct iso_error *err)
{
	static const char *const keys[] = {"driver",    "sm",       "generation", "applied",
	                                   "confirmed", "incident", NULL};
	static const char *const sm_keys[] = {"state", "reason", "since", NULL};
	static const char *const full_keys[] = {"generation", "applied", "confirmed", "incident"};
	const char *state = NULL, *reason = NULL;
	int64_t v[3] = {0};
	size_t n_full = 0;
	json_t *sm;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(body))
		return iso_error_set(err, ISO_E_INVALID, "", "the fabric health is not an object");
	if (iso_json_check_keys(body, NULL, keys, err) < 0 ||
	    cd_get_ascii(body, "driver", NULL, true, 1, sizeof(out->driver) - 1, out->driver,
	                 sizeof(out->driver), err) < 0)
		goto fail;
	sm = json_object_get(body, "sm");
	if (!json_is_object(sm)) {
		iso_error_set(err, ISO_E_INVALID, "sm",
		              sm ? "sm: must be an object" : "sm: required");
		goto fail;
	}
	if (iso_json_check_keys(sm, "sm", sm_keys, err) < 0 ||
	    iso_json_get_string(sm, "state", "sm", true, &state, err) < 0)
		goto fail;
	if (iso_sm_state_parse(state, &out->sm.state) < 0) {
		iso_error_set(err, ISO_E_INVALID, "sm.state",
		              "sm.state: expected none, unknown, up or down");
		goto fail;
	}
	if (iso_json_get_string(sm, "reason", "sm", true, &reason, err) < 0)
		goto fail;
	if (strlen(reason) >= sizeof(out->sm.reason) || !iso_text_valid(reason)) {
		iso_error_set(err, ISO_E_INVALID, "sm.reason",
		              "sm.reason: at most %zu bytes of text without control characters",
		              sizeof(out->sm.reason) - 1);
		goto fail;
	}
	iso_strlcpy(out->sm.reason, reason, sizeof(out->sm.reason));
	if (get_since(sm, &out->sm.since_ms, err) < 0)
		goto fail;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(full_keys); i++)
		n_full += json_object_get(body, full_keys[i]) != NULL;
	if (n_full == 0)
		return 0;
	/* a cluster role's answer: all four, or it is not one */
	for (size_t i = 0; i < 3; i++)
		if (iso_json_get_int(body, full_keys[i], NULL, true, 0, INT64_MAX, &v[i], err) < 0)
			goto fail;
	if (iso_json_get_bool(body, "incident", NULL, true, &out->incident, err) < 0)
		goto fail;
	out->generation = (uint64_t)v[0];
	out->applied = (uint64_t)v[1];
	out->confirmed = (uint64_t)v[2];
	out->full = true;
	return 0;
fail:
	memset(out, 0, sizeof(*out));
	return -EINVAL;
}

/* intent_json.c: the intent as JSON, both ways. The controller serves it
 * (GET /v1/fabric/intent) and `isoctl fabric verify --live` reads it back to
 * judge the fabric it reads itself, so the two must agree exactly; the
 * reader is strict because it feeds a security verdict. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/fabric.h"

static const char *const kind_names[] = {"default", "service", "tenant"};

json_t *iso_fabric_intent_to_json(const struct iso_fabric_intent *in)
{
	json_t *parts = json_array();

	for (int i = 0; i < in->n_parts; i++) {
		const struct iso_partition *p = &in->parts[i];
		json_t *members = json_array();
		char pkey[8];

		for (int m = 0; m < p->n_members; m++) {
			char guid[24];
			snprintf(guid, sizeof(guid), "0x%016llx",
			         (unsigned long long)p->members[m].guid);
			json_array_append_new(members,
			                      json_pack("{s:s, s:s}", "guid", guid, "membership",
			                                p->members[m].membership == ISO_MEMBER_FULL
			                                    ? "full"
			                                    : "limited"));
		}
		snprintf(pkey, sizeof(pkey), "0x%04x", p->pkey);
		json_t *pj =
		    json_pack("{s:s, s:s, s:s, s:s, s:I, s:b, s:b, s:o}", "name", p->name, "kind",
		              kind_names[p->kind], "pkey", pkey, "tenant", p->tenant, "tenant_id",
		              (json_int_t)p->tenant_id, "ipoib", p->ipoib, "indx0", p->indx0,
		              "members", members);
		/* an allocation's own partition (per-allocation tenants) */
		if (pj && p->alloc[0])
			json_object_set_new(pj, "allocation", json_string(p->alloc));
		json_array_append_new(parts, pj);
	}
	return json_pack("{s:I, s:o}", "generation", (json_int_t)in->generation, "partitions",
	                 parts);
}

char *iso_fabric_intent_json(const struct iso_fabric_intent *in)
{
	json_t *root = iso_fabric_intent_to_json(in);
	char *text = root ? json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(root);
	return text;
}

static int bad(struct iso_error *err, const char *field, const char *what)
{
	return iso_error_set(err, ISO_E_INVALID, field, "fabric intent: %s: %s", field, what);
}

static int parse_hex(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;

	if (!s || strncmp(s, "0x", 2) != 0 || !s[2])
		return -EINVAL;
	errno = 0;
	*out = strtoull(s + 2, &end, 16);
	return errno || *end || *out > max ? -EINVAL : 0;
}

int iso_fabric_intent_parse_json(const char *text, struct iso_fabric_intent *out,
                                 struct iso_error *err)
{
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	json_t *parts, *gen;
	struct iso_fabric_intent in = {0};
	char field[64];
	int r = 0;

	memset(out, 0, sizeof(*out));
	if (!root)
		return iso_error_set(err, ISO_E_INVALID, "", "fabric intent: line %d: %s",
		                     jerr.line, jerr.text);
	gen = json_object_get(root, "generation");
	parts = json_object_get(root, "partitions");
	if (!json_is_integer(gen) || json_integer_value(gen) < 0)
		r = bad(err, "generation", "expected a non-negative integer");
	else if (!json_is_array(parts))
		r = bad(err, "partitions", "expected an array");
	if (r == 0) {
		in.generation = (uint64_t)json_integer_value(gen);
		in.parts = calloc(json_array_size(parts) + 1, sizeof(*in.parts));
		if (!in.parts)
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	for (size_t i = 0; r == 0 && i < json_array_size(parts); i++) {
		json_t *p = json_array_get(parts, i), *members;
		struct iso_partition *q = &in.parts[in.n_parts];
		const char *kind, *name, *pkey, *tenant;
		unsigned long long v;
		int k = -1;

		snprintf(field, sizeof(field), "partitions[%zu]", i);
		kind = json_string_value(json_object_get(p, "kind"));
		name = json_string_value(json_object_get(p, "name"));
		pkey = json_string_value(json_object_get(p, "pkey"));
		tenant = json_string_value(json_object_get(p, "tenant"));
		members = json_object_get(p, "members");
		for (int j = 0; kind && j < (int)ISO_ARRAY_SIZE(kind_names); j++)
			if (strcmp(kind, kind_names[j]) == 0)
				k = j;
		if (k < 0 || !name || !tenant || !json_is_array(members) ||
		    parse_hex(pkey, 0x7fff, &v) < 0 || strlen(name) >= sizeof(q->name) ||
		    strlen(tenant) >= sizeof(q->tenant)) {
			r = bad(err, field,
			        "expected {kind, name, pkey: \"0xNNNN\", tenant, members}");
			break;
		}
		in.n_parts++;
		q->kind = (enum iso_partition_kind)k;
		q->pkey = (uint16_t)v;
		iso_strlcpy(q->name, name, sizeof(q->name));
		iso_strlcpy(q->tenant, tenant, sizeof(q->tenant));
		const char *alloc = json_string_value(json_object_get(p, "allocation"));
		if (json_object_get(p, "allocation") && (!alloc || strlen(alloc) >= sizeof(q->alloc))) {
			snprintf(field, sizeof(field), "partitions[%zu].allocation", i);
			r = bad(err, field, "expected an allocation id");
			break;
		}
		iso_strlcpy(q->alloc, alloc ? alloc : "", sizeof(q->alloc));
		q->tenant_id = json_integer_value(json_object_get(p, "tenant_id"));
		q->ipoib = json_is_true(json_object_get(p, "ipoib"));
		q->indx0 = json_is_true(json_object_get(p, "indx0"));
		q->members = calloc(json_array_size(members) + 1, sizeof(*q->members));
		if (!q->members) {
			r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
			break;
		}
		for (size_t m = 0; m < json_array_size(members); m++) {
			json_t *mj = json_array_get(members, m);
			const char *g = json_string_value(json_object_get(mj, "guid"));
			const char *ms = json_string_value(json_object_get(mj, "membership"));
			unsigned long long guid;

			snprintf(field, sizeof(field), "partitions[%zu].members[%zu]", i, m);
			if (parse_hex(g, UINT64_MAX, &guid) < 0 || !ms ||
			    (strcmp(ms, "full") != 0 && strcmp(ms, "limited") != 0)) {
				r = bad(err, field,
				        "expected {guid: \"0x...\", membership: full|limited}");
				break;
			}
			q->members[q->n_members++] = (struct iso_fabric_member){
			    .guid = guid,
			    .membership =
			        strcmp(ms, "full") == 0 ? ISO_MEMBER_FULL : ISO_MEMBER_LIMITED};
		}
	}
	json_decref(root);
	if (r < 0) {
		iso_fabric_intent_clear(&in);
		return r;
	}
	*out = in;
	return 0;
}

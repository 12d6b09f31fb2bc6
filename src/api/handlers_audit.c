/* handlers_audit.c: /v1/audit. Events are handed out with their canonical
 * bytes (what the leaf hashes) next to the parsed form, so that a client can
 * verify without re-encoding; hashes are hex, signatures base64. */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "api/internal.h"

static const char *const events_keys[] = {"tenant", "after", "limit", "size", NULL};
static const char *const inclusion_keys[] = {"seq", "size", NULL};
static const char *const consistency_keys[] = {"from", "to", NULL};

static json_t *hex_json(const uint8_t *bin, size_t len)
{
	char buf[2 * 64 + 1];

	sodium_bin2hex(buf, sizeof(buf), bin, len);
	return json_string(buf);
}

static json_t *proof_json(const uint8_t proof[][ISO_AUDIT_HASH_LEN], int n)
{
	json_t *arr = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(arr, hex_json(proof[i], ISO_AUDIT_HASH_LEN));
	return arr;
}

static int query_u64(struct api_request *r, const char *key, bool required, uint64_t *out)
{
	const char *v = api_query(r, key);
	char *end = NULL;

	if (!v) {
		if (required)
			return iso_error_set(&r->err, ISO_E_INVALID, key, "%s: required", key);
		return 0;
	}
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno || !v[0] || *end || v[0] == '-' || x > (unsigned long long)INT64_MAX)
		return iso_error_set(&r->err, ISO_E_INVALID, key,
		                     "%s: must be a non-negative integer", key);
	*out = x;
	return 0;
}

struct events_out {
	json_t *items;
};

static int add_item(void *arg, const struct iso_audit_item *it)
{
	struct events_out *o = arg;
	json_t *parsed = json_loadb(it->body, it->len, 0, NULL);
	json_t *item = json_pack("{s:I, s:o, s:s%, s:o}", "seq", (json_int_t)it->seq, "leaf",
	                         hex_json(it->leaf, ISO_AUDIT_HASH_LEN), "canonical", it->body,
	                         it->len, "event", parsed ? parsed : json_null());

	if (!item)
		return -ENOMEM;
	if (it->proof_size > 0)
		json_object_set_new(item, "inclusion",
		                    json_pack("{s:I, s:o}", "size", (json_int_t)it->proof_size,
		                              "proof", proof_json(it->proof, it->n_proof)));
	json_array_append_new(o->items, item);
	return 0;
}

int api_audit_events(struct api_request *r)
{
	struct events_out o = {.items = json_array()};
	uint64_t after = 0, size = 0;
	bool have_after = api_query(r, "after") != NULL;
	const char *unused;
	int limit;
	int64_t next = -1;
	char next_s[24];

	if (api_check_query(r, events_keys) < 0 || api_page(r, &limit, &unused) < 0 ||
	    query_u64(r, "after", false, &after) < 0 || query_u64(r, "size", false, &size) < 0 ||
	    iso_controller_audit_events(r->ctl, &r->who, api_query(r, "tenant"),
	                                have_after ? (int64_t)after : -1, limit, size, add_item, &o,
	                                &next, &r->err) < 0) {
		json_decref(o.items);
		return -1;
	}
	snprintf(next_s, sizeof(next_s), "%lld", (long long)next);
	api_reply(r, MHD_HTTP_OK, api_list(o.items, next >= 0 ? next_s : NULL));
	return 0;
}

int api_audit_head(struct api_request *r)
{
	struct iso_audit_head h;
	char sig[sodium_base64_ENCODED_LEN(ISO_AUDIT_SIG_LEN, sodium_base64_VARIANT_ORIGINAL)];

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_audit_head(r->ctl, &r->who, &h, &r->err) < 0)
		return -1;
	sodium_bin2base64(sig, sizeof(sig), h.sig, sizeof(h.sig), sodium_base64_VARIANT_ORIGINAL);
	/* The signer's key id (docs/audit.md), null for a head stored without. */
	char key_id[2 * ISO_AUDIT_KEY_ID_LEN + 1];
	iso_audit_key_id_format(h.key_id, key_id);
	api_reply(r, MHD_HTTP_OK,
	          json_pack("{s:I, s:o, s:I, s:o, s:s, s:o}", "size", (json_int_t)h.size, "root",
	                    hex_json(h.root, sizeof(h.root)), "time_ms", (json_int_t)h.time_ms,
	                    "time", api_time(h.time_ms), "signature", sig, "key_id",
	                    iso_audit_key_id_known(h.key_id) ? json_string(key_id)
	                                                     : json_null()));
	return 0;
}

int api_audit_pubkey(struct api_request *r)
{
	char key[128];

	if (api_check_query(r, NULL) < 0)
		return -1;
	iso_audit_pubkey_format(iso_controller_audit_pubkey(r->ctl), key, sizeof(key));
	key[strcspn(key, "\n")] = '\0';
	api_reply(r, MHD_HTTP_OK, json_pack("{s:s, s:s}", "algorithm", "ed25519", "key", key));
	return 0;
}

int api_audit_inclusion(struct api_request *r)
{
	struct iso_audit_item it;
	uint64_t seq = 0, size = 0;

	if (api_check_query(r, inclusion_keys) < 0 || query_u64(r, "seq", true, &seq) < 0 ||
	    query_u64(r, "size", true, &size) < 0 ||
	    iso_controller_audit_inclusion(r->ctl, &r->who, seq, size, &it, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK,
	          json_pack("{s:I, s:I, s:o, s:o}", "seq", (json_int_t)seq, "size",
	                    (json_int_t)size, "leaf", hex_json(it.leaf, sizeof(it.leaf)), "proof",
	                    proof_json(it.proof, it.n_proof)));
	return 0;
}

int api_audit_consistency(struct api_request *r)
{
	uint8_t proof[ISO_AUDIT_MAX_PROOF][ISO_AUDIT_HASH_LEN];
	uint64_t from = 0, to = 0;
	int n = 0;

	if (api_check_query(r, consistency_keys) < 0 || query_u64(r, "from", true, &from) < 0 ||
	    query_u64(r, "to", true, &to) < 0 ||
	    iso_controller_audit_consistency(r->ctl, &r->who, from, to, proof, &n, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK,
	          json_pack("{s:I, s:I, s:o}", "from", (json_int_t)from, "to", (json_int_t)to,
	                    "proof", proof_json(proof, n)));
	return 0;
}

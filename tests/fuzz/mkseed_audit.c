/* mkseed_audit.c: writes the audit harness's seed exports, signed with the
 * harness's fixed key (audit_key.h), and one canonical event per file for
 * fuzz_audit_event. Real exports are signed with a daemon's own key, so
 * without these seeds the fuzzer would rarely get past the first head's
 * signature. Run once when the export format changes:
 *   build/tests/fuzz/mkseed_audit tests/fuzz/corpus
 * (docs/fuzzing.md). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "audit_key.h"

#define N_EVENTS 6

static const char *const actions[N_EVENTS] = {"tenant.create",      "token.create",
                                              "allocation.place",   "auth.login",
                                              "allocation.release", "audit.read"};

static int event(int i, char **bytes, size_t *len)
{
	struct iso_audit_event e = {.seq = i, .time_ms = 1700000000000 + i * 1000};
	struct iso_error err = {0};

	snprintf(e.actor_role, sizeof(e.actor_role), "%s", i % 2 ? "tenant-admin" : "system");
	snprintf(e.actor_tenant, sizeof(e.actor_tenant), "%s", i % 2 ? "acme" : "");
	snprintf(e.source, sizeof(e.source), "%s", i % 2 ? "127.0.0.1" : "");
	snprintf(e.action, sizeof(e.action), "%s", actions[i]);
	snprintf(e.object_kind, sizeof(e.object_kind), "%s", "tenant");
	snprintf(e.object_id, sizeof(e.object_id), "t-%d", i);
	e.outcome = i == 3 ? ISO_AUDIT_DENIED : ISO_AUDIT_SUCCESS;
	if (i == 3)
		snprintf(e.reason, sizeof(e.reason), "%s", "bad token \"x\"\n");
	e.details = i == 2 ? strdup("{\"gpus\":[0,1],\"name\":\"caf\\u00e9\"}") : NULL;
	int r = iso_audit_event_encode(&e, bytes, len, &err);
	iso_audit_event_clear(&e);
	if (r < 0)
		fprintf(stderr, "mkseed_audit: %s\n", err.message);
	return r;
}

static FILE *open_out(const char *dir, const char *sub, const char *name)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
	return fopen(path, "we");
}

static struct iso_audit_head head(struct iso_merkle *m, uint64_t size,
                                  const struct iso_audit_key *k)
{
	struct iso_audit_head h = {.size = size, .time_ms = 1700000000000 + (int64_t)size};

	iso_merkle_root(m, size, h.root);
	iso_audit_head_sign(&h, k);
	return h;
}

int main(int argc, char **argv)
{
	struct iso_audit_key key;
	_cleanup_(iso_merkle_freep) struct iso_merkle *m = NULL;
	char *ev[N_EVENTS] = {0};
	size_t len[N_EVENTS];
	uint8_t leaf[N_EVENTS][ISO_AUDIT_HASH_LEN], proof[ISO_AUDIT_MAX_PROOF][ISO_AUDIT_HASH_LEN];
	int n, rc = 1;

	if (argc != 2 || fuzz_audit_key(&key) < 0 || iso_merkle_new(&m) < 0) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < N_EVENTS; i++) {
		if (event(i, &ev[i], &len[i]) < 0)
			goto out;
		iso_audit_leaf_hash(ev[i], len[i], leaf[i]);
		iso_merkle_append(m, leaf[i]);
	}
	struct iso_audit_head h3 = head(m, 3, &key), h6 = head(m, N_EVENTS, &key);

	/* A full export: two heads, a consistency proof between them, every event. */
	FILE *f = open_out(argv[1], "audit", "full.jsonl");
	if (!f)
		goto out;
	iso_audit_export_head(f, &h3);
	iso_audit_export_head(f, &h6);
	iso_merkle_consistency(m, 3, N_EVENTS, proof, &n);
	iso_audit_export_consistency(f, 3, N_EVENTS, (const uint8_t(*)[ISO_AUDIT_HASH_LEN])proof,
	                             n);
	for (int i = 0; i < N_EVENTS; i++)
		iso_audit_export_event(f, i, leaf[i], ev[i], len[i]);
	fclose(f);

	/* A partial export (a tenant's): the odd events, each with its proof. */
	f = open_out(argv[1], "audit", "partial.jsonl");
	if (!f)
		goto out;
	iso_audit_export_head(f, &h6);
	for (int i = 1; i < N_EVENTS; i += 2) {
		iso_audit_export_event(f, i, leaf[i], ev[i], len[i]);
		iso_merkle_inclusion(m, (uint64_t)i, N_EVENTS, proof, &n);
		iso_audit_export_inclusion(f, (uint64_t)i, N_EVENTS,
		                           (const uint8_t(*)[ISO_AUDIT_HASH_LEN])proof, n);
	}
	fclose(f);

	/* Single events for the decoder: a system one and one with details
	 * (the others add no coverage, by -merge=1). */
	for (int i = 0; i <= 2; i += 2) {
		char name[32];
		snprintf(name, sizeof(name), "event%d.json", i);
		f = open_out(argv[1], "audit_event", name);
		if (!f)
			goto out;
		fwrite(ev[i], 1, len[i], f);
		fclose(f);
	}
	rc = 0;
out:
	for (int i = 0; i < N_EVENTS; i++)
		free(ev[i]);
	return rc;
}

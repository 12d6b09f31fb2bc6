/* sqlite_audit.c: the audit log's rows. Events are appended in the caller's
 * transaction (the one of the change they record) and read back in seq order
 * through a callback, so a million-event check never holds them all at
 * once. Nothing here judges the bytes: integrity is the audit module's job,
 * and a corrupt row is handed over as it is for it to catch. */
#include <errno.h>
#include <string.h>

#include "store/sqlite_int.h"

int iso_sqlite_audit_append(struct iso_store *is, const struct iso_audit_record *rec,
                            struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_AUDIT_APPEND];

	if (rec->len > INT32_MAX)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: audit event too large");
	if (iso_sqlite_bind_i64(st, 1, rec->seq) || iso_sqlite_bind_i64(st, 2, rec->tenant_id) ||
	    sqlite3_bind_blob(st, 3, rec->body, (int)rec->len, SQLITE_STATIC) ||
	    sqlite3_bind_blob(st, 4, rec->leaf, ISO_AUDIT_HASH_LEN, SQLITE_STATIC))
		return iso_sqlite_fail(s->db, "audit append", err);
	if (sqlite3_step(st) != SQLITE_DONE) {
		char key[24];
		snprintf(key, sizeof(key), "%lld", (long long)rec->seq);
		return iso_sqlite_insert_fail(s->db, "audit append", "audit event", key, err);
	}
	return 0;
}

int iso_sqlite_audit_count(struct iso_store *is, int64_t *n, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_AUDIT_COUNT];

	if (sqlite3_step(st) != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "audit count", err);
	*n = sqlite3_column_int64(st, 0);
	return 0;
}

int iso_sqlite_audit_scan(struct iso_store *is, int64_t after, int64_t tenant_id, int limit,
                          iso_audit_record_fn fn, void *arg, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st =
	    s->st[tenant_id > 0 ? ST_AUDIT_SCAN_TENANT : ST_AUDIT_SCAN];
	int rc;

	if (iso_sqlite_bind_i64(st, 1, after) ||
	    iso_sqlite_bind_i64(st, 2, limit > 0 ? limit : -1) ||
	    (tenant_id > 0 && iso_sqlite_bind_i64(st, 3, tenant_id)))
		return iso_sqlite_fail(s->db, "audit scan", err);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_audit_record rec = {
		    .seq = sqlite3_column_int64(st, 0),
		    .tenant_id = sqlite3_column_int64(st, 1),
		};
		const void *body = sqlite3_column_blob(st, 2);
		int len = sqlite3_column_bytes(st, 2);
		const void *leaf = sqlite3_column_blob(st, 3);
		int leaf_len = sqlite3_column_bytes(st, 3);

		rec.body = body ? body : "";
		rec.len = (size_t)len;
		/* A leaf of the wrong size is handed over zeroed: it cannot match. */
		if (leaf && leaf_len == ISO_AUDIT_HASH_LEN)
			memcpy(rec.leaf, leaf, ISO_AUDIT_HASH_LEN);
		int r = fn(arg, &rec);
		if (r < 0)
			return r;
		if (r > 0)
			return 0;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "audit scan", err);
	return 0;
}

int iso_sqlite_audit_head_put(struct iso_store *is, const struct iso_audit_head *h,
                              struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_AUDIT_HEAD_PUT];

	if (iso_sqlite_bind_i64(st, 1, (int64_t)h->size) ||
	    sqlite3_bind_blob(st, 2, h->root, ISO_AUDIT_HASH_LEN, SQLITE_STATIC) ||
	    iso_sqlite_bind_i64(st, 3, h->time_ms) ||
	    sqlite3_bind_blob(st, 4, h->sig, ISO_AUDIT_SIG_LEN, SQLITE_STATIC) ||
	    (iso_audit_key_id_known(h->key_id)
	         ? sqlite3_bind_blob(st, 5, h->key_id, ISO_AUDIT_KEY_ID_LEN, SQLITE_STATIC)
	         : sqlite3_bind_null(st, 5)))
		return iso_sqlite_fail(s->db, "audit head", err);
	return iso_sqlite_exec_stmt(s->db, st, "audit head", err);
}

static void read_head(sqlite3_stmt *st, struct iso_audit_head *h)
{
	const void *root = sqlite3_column_blob(st, 1);
	const void *sig = sqlite3_column_blob(st, 3);
	const void *key_id = sqlite3_column_blob(st, 4);

	memset(h, 0, sizeof(*h));
	h->size = (uint64_t)sqlite3_column_int64(st, 0);
	h->time_ms = sqlite3_column_int64(st, 2);
	/* Wrong-sized blobs stay zero, and the signature check then fails. */
	if (root && sqlite3_column_bytes(st, 1) == ISO_AUDIT_HASH_LEN)
		memcpy(h->root, root, ISO_AUDIT_HASH_LEN);
	if (sig && sqlite3_column_bytes(st, 3) == ISO_AUDIT_SIG_LEN)
		memcpy(h->sig, sig, ISO_AUDIT_SIG_LEN);
	/* NULL (a head from before key ids) or a wrong size: no key id. */
	if (key_id && sqlite3_column_bytes(st, 4) == ISO_AUDIT_KEY_ID_LEN)
		memcpy(h->key_id, key_id, ISO_AUDIT_KEY_ID_LEN);
}

int iso_sqlite_audit_head_latest(struct iso_store *is, struct iso_audit_head *out,
                                 struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_AUDIT_HEAD_LATEST];
	int rc = sqlite3_step(st);

	if (rc == SQLITE_DONE)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no signed audit head yet");
	if (rc != SQLITE_ROW)
		return iso_sqlite_fail(s->db, "audit head", err);
	read_head(st, out);
	return 0;
}

int iso_sqlite_audit_head_scan(struct iso_store *is, iso_audit_head_fn fn, void *arg,
                               struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_AUDIT_HEAD_SCAN];
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_audit_head h;
		read_head(st, &h);
		int r = fn(arg, &h);
		if (r < 0)
			return r;
		if (r > 0)
			return 0;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "audit heads", err);
	return 0;
}

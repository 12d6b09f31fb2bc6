/* pg_audit.c: the audit log's rows in PostgreSQL. Events are appended in the
 * caller's transaction (the one of the change they record) and read back in
 * seq order through a callback, a page of rows at a time, so a
 * million-event check never holds them all at once. As in sqlite_audit.c
 * nothing here judges the bytes: a corrupt row is handed over as it is for
 * the audit module to catch. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "store/pg_int.h"

#define SCAN_PAGE 1000

int iso_pg_audit_append(struct iso_store *is, const struct iso_audit_record *rec,
                        struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	char key[24];
	int r;

	if (rec->len > INT32_MAX)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: audit event too large");
	snprintf(key, sizeof(key), "%" PRId64, rec->seq);
	iso_pg_p_i64(&p, rec->seq);
	iso_pg_p_i64(&p, rec->tenant_id);
	iso_pg_p_bytea(&p, rec->body, rec->len);
	iso_pg_p_bytea(&p, rec->leaf, ISO_AUDIT_HASH_LEN);
	r = iso_pg_query(s,
	                 "INSERT INTO audit_events(seq, tenant_id, body, leaf)"
	                 " VALUES ($1::bigint, $2::bigint, $3::bytea, $4::bytea)"
	                 " ON CONFLICT (seq) DO NOTHING",
	                 &p, "audit append", "audit event", key, &res, err);
	if (r == 0 && iso_pg_changes(res) == 0)
		return iso_error_set(err, ISO_E_CONFLICT, NULL, "audit event \"%s\" already exists",
		                     key);
	return r;
}

int iso_pg_audit_count(struct iso_store *is, int64_t *n, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_row row;
	int r = iso_pg_query(s, "SELECT coalesce(max(seq) + 1, 0) FROM audit_events", NULL,
	                     "audit count", NULL, NULL, &res, err);

	if (r < 0)
		return r;
	iso_pg_row_init(&row, res, 0);
	*n = iso_pg_rd_i64(&row);
	return iso_pg_row_check(&row, "audit_events", "count", err);
}

int iso_pg_audit_scan(struct iso_store *is, int64_t after, int64_t tenant_id, int limit,
                      iso_audit_record_fn fn, void *arg, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	int64_t left = limit > 0 ? limit : INT64_MAX;

	while (left > 0) {
		_cleanup_pgres_ PGresult *res = NULL;
		struct pg_params p = {0};
		int64_t page = left < SCAN_PAGE ? left : SCAN_PAGE;
		int rows, r;

		iso_pg_p_i64(&p, after);
		iso_pg_p_i64(&p, page);
		iso_pg_p_i64(&p, tenant_id > 0 ? tenant_id : 0);
		r = iso_pg_query(
		    s,
		    "SELECT seq, tenant_id, body, leaf FROM audit_events"
		    " WHERE seq > $1::bigint AND ($3::bigint = 0 OR tenant_id = $3::bigint)"
		    " ORDER BY seq LIMIT $2::bigint",
		    &p, "audit scan", NULL, NULL, &res, err);
		if (r < 0)
			return r;
		rows = PQntuples(res);
		for (int i = 0; i < rows; i++) {
			struct iso_audit_record rec = {0};
			size_t body_len = 0, leaf_len = 0;
			unsigned char *body = iso_pg_bytea(res, i, 2, &body_len);
			unsigned char *leaf = iso_pg_bytea(res, i, 3, &leaf_len);
			struct pg_row row;

			iso_pg_row_init(&row, res, i);
			rec.seq = iso_pg_rd_i64(&row);
			rec.tenant_id = iso_pg_rd_i64(&row);
			rec.body = body ? (const char *)body : "";
			rec.len = body ? body_len : 0;
			/* A leaf of the wrong size is handed over zeroed: it cannot match. */
			if (leaf && leaf_len == ISO_AUDIT_HASH_LEN)
				memcpy(rec.leaf, leaf, ISO_AUDIT_HASH_LEN);
			r = fn(arg, &rec);
			PQfreemem(body);
			PQfreemem(leaf);
			after = rec.seq;
			if (r < 0)
				return r;
			if (r > 0)
				return 0;
		}
		if (rows < page)
			break;
		left -= rows;
	}
	return 0;
}

int iso_pg_audit_head_put(struct iso_store *is, const struct iso_audit_head *h,
                          struct iso_error *err)
{
	struct pg_params p = {0};

	iso_pg_p_i64(&p, (int64_t)h->size);
	iso_pg_p_bytea(&p, h->root, ISO_AUDIT_HASH_LEN);
	iso_pg_p_i64(&p, h->time_ms);
	iso_pg_p_bytea(&p, h->sig, ISO_AUDIT_SIG_LEN);
	if (iso_audit_key_id_known(h->key_id))
		iso_pg_p_bytea(&p, h->key_id, ISO_AUDIT_KEY_ID_LEN);
	else
		iso_pg_p_null(&p);
	return iso_pg_exec(pg_store_of(is),
	                   "INSERT INTO audit_heads(size, root, time_ms, sig, key_id)"
	                   " VALUES ($1::bigint, $2::bytea, $3::bigint, $4::bytea, $5::bytea)",
	                   &p, "audit head", err);
}

/* Wrong-sized blobs stay zero, and the signature check then fails. */
static void read_head(const PGresult *res, int i, struct iso_audit_head *h)
{
	size_t root_len = 0, sig_len = 0;
	unsigned char *root = iso_pg_bytea(res, i, 1, &root_len);
	unsigned char *sig = iso_pg_bytea(res, i, 3, &sig_len);
	size_t id_len = 0;
	unsigned char *key_id = iso_pg_bytea(res, i, 4, &id_len);
	struct pg_row row;

	memset(h, 0, sizeof(*h));
	iso_pg_row_init(&row, res, i);
	h->size = (uint64_t)iso_pg_rd_i64(&row);
	row.col++;
	h->time_ms = iso_pg_rd_i64(&row);
	if (root && root_len == ISO_AUDIT_HASH_LEN)
		memcpy(h->root, root, ISO_AUDIT_HASH_LEN);
	if (sig && sig_len == ISO_AUDIT_SIG_LEN)
		memcpy(h->sig, sig, ISO_AUDIT_SIG_LEN);
	/* NULL (a head from before key ids) or a wrong size: no key id. */
	if (key_id && id_len == ISO_AUDIT_KEY_ID_LEN)
		memcpy(h->key_id, key_id, ISO_AUDIT_KEY_ID_LEN);
	PQfreemem(root);
	PQfreemem(sig);
	PQfreemem(key_id);
}

int iso_pg_audit_head_latest(struct iso_store *is, struct iso_audit_head *out,
                             struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = NULL;
	int r = iso_pg_query(pg_store_of(is),
	                     "SELECT size, root, time_ms, sig, key_id FROM audit_heads"
	                     " ORDER BY id DESC LIMIT 1",
	                     NULL, "audit head", NULL, NULL, &res, err);

	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no signed audit head yet");
	read_head(res, 0, out);
	return 0;
}

int iso_pg_audit_head_scan(struct iso_store *is, iso_audit_head_fn fn, void *arg,
                           struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = NULL;
	int r = iso_pg_query(pg_store_of(is),
	                     "SELECT size, root, time_ms, sig, key_id FROM audit_heads"
	                     " ORDER BY id",
	                     NULL, "audit heads", NULL, NULL, &res, err);

	if (r < 0)
		return r;
	for (int i = 0; i < PQntuples(res); i++) {
		struct iso_audit_head h;

		read_head(res, i, &h);
		r = fn(arg, &h);
		if (r < 0)
			return r;
		if (r > 0)
			return 0;
	}
	return 0;
}

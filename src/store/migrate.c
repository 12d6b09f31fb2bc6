/* migrate.c: moves a site's whole state from SQLite to PostgreSQL
 * (`isoctl store migrate`, issue 16; docs/store.md, "Moving a site to
 * PostgreSQL"). Every table is copied row by row with its ids as they are
 * (tenant ids and head ids are history: never renumbered), in one
 * PostgreSQL transaction that first checks the target is empty and last
 * compares every table's row count with the source; after the commit the
 * audit log is read back from PostgreSQL and checked: every leaf is the hash
 * of its event, the tree's root at the newest head's size is that head's
 * root, the head is the source's, and (given the public key) its signature
 * verifies. The copy is generic over the columns PostgreSQL's schema lists,
 * so a column added to both backends is carried without a change here; a
 * column SQLite lacks fails the copy naming table and column. */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "isostack/audit.h"
#include "store/pg_int.h"

/* Parents before children (foreign keys: allocations before members and
 * slots, tenants before projects). schema_version is each backend's own. */
static const char *const tables[ISO_STORE_MIGRATE_TABLES] = {
    "meta",        "tenants",      "tokens",      "node_state",  "allocations",  "alloc_members",
    "alloc_slots", "audit_events", "audit_heads", "fabric_keys", "fabric_ports", "orgs",
    "projects",    "quotas",       "usage_log",   "gpu_faults", "neutron_projects",
    "neutron_objects",
};

/* Tables whose id PostgreSQL hands out (GENERATED ALWAYS AS IDENTITY): its
 * sequence continues after SQLite's high-water mark. */
static const char *const identity_tables[] = {"tenants", "audit_heads", "usage_log"};

#define MIG_COLS 40

static void pgres_clear(PGresult **r)
{
	PQclear(*r);
}
#define _cleanup_res_ _cleanup_(pgres_clear)

static void stmt_finalize(sqlite3_stmt **st)
{
	sqlite3_finalize(*st);
}
#define _cleanup_stmt_ _cleanup_(stmt_finalize)

static void db_close(sqlite3 **db)
{
	sqlite3_close(*db);
}

static int pg_failed(PGconn *c, const PGresult *res, const char *what, struct iso_error *err)
{
	const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char msg[300];
	size_t n;

	iso_strlcpy(msg, m ? m : PQerrorMessage(c), sizeof(msg));
	n = strlen(msg);
	while (n > 0 && msg[n - 1] == '\n')
		msg[--n] = '\0';
	return iso_error_set(err, ISO_E_INTERNAL, "to", "store migrate: %s: %s", what, msg);
}

static int pg_run(PGconn *c, const char *sql, const char *what, struct iso_error *err)
{
	_cleanup_res_ PGresult *res = PQexec(c, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		return pg_failed(c, res, what, err);
	return 0;
}

/* One value: text, NULL, a double written back exactly, or bytea (binary). */
struct mig_row {
	const char *val[MIG_COLS];
	int len[MIG_COLS], fmt[MIG_COLS];
	char num[MIG_COLS][40];
};

static int64_t sqlite_count(sqlite3 *db, const char *table, struct iso_error *err)
{
	char sql[128];
	_cleanup_stmt_ sqlite3_stmt *st = NULL;

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%s\"", table);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return iso_error_set(err, ISO_E_INTERNAL, "from", "store migrate: counting %s: %s",
		                     table, sqlite3_errmsg(db));
	return sqlite3_column_int64(st, 0);
}

static int64_t pg_count(PGconn *c, const char *table, struct iso_error *err)
{
	char sql[128];
	_cleanup_res_ PGresult *res = NULL;

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%s\"", table);
	res = PQexec(c, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return pg_failed(c, res, table, err);
	return strtoll(PQgetvalue(res, 0, 0), NULL, 10);
}

static int copy_table(sqlite3 *db, PGconn *c, const char *table, int64_t *rows,
                      struct iso_error *err)
{
	static const char cols_sql[] =
	    "SELECT column_name, data_type FROM information_schema.columns"
	    " WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position";
	_cleanup_res_ PGresult *cols = PQexecParams(c, cols_sql, 1, NULL, &table, NULL, NULL, 0);
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	_cleanup_res_ PGresult *prep = NULL;
	char sel[2048], ins[4096];
	size_t ns, ni;
	bool is_bytea[MIG_COLS], is_double[MIG_COLS];
	int n, rc;

	if (PQresultStatus(cols) != PGRES_TUPLES_OK)
		return pg_failed(c, cols, "reading the target's columns", err);
	n = PQntuples(cols);
	if (n == 0 || n > MIG_COLS)
		return iso_error_set(err, ISO_E_INTERNAL, "to",
		                     "store migrate: the target has %d columns in table %s", n,
		                     table);
	ns = (size_t)snprintf(sel, sizeof(sel), "SELECT ");
	ni = (size_t)snprintf(ins, sizeof(ins), "INSERT INTO \"%s\" (", table);
	for (int i = 0; i < n; i++) {
		const char *name = PQgetvalue(cols, i, 0);
		const char *type = PQgetvalue(cols, i, 1);
		is_bytea[i] = strcmp(type, "bytea") == 0;
		is_double[i] = strcmp(type, "double precision") == 0;
		ns += (size_t)snprintf(sel + ns, sizeof(sel) - ns, "%s\"%s\"", i ? ", " : "", name);
		ni += (size_t)snprintf(ins + ni, sizeof(ins) - ni, "%s\"%s\"", i ? ", " : "", name);
		if (ns >= sizeof(sel) || ni >= sizeof(ins))
			return iso_error_set(err, ISO_E_INTERNAL, "to",
			                     "store migrate: table %s: too many columns", table);
	}
	ns += (size_t)snprintf(sel + ns, sizeof(sel) - ns, " FROM \"%s\"", table);
	ni += (size_t)snprintf(ins + ni, sizeof(ins) - ni, ") OVERRIDING SYSTEM VALUE VALUES (");
	for (int i = 0; i < n; i++)
		ni += (size_t)snprintf(ins + ni, sizeof(ins) - ni, "%s$%d", i ? ", " : "", i + 1);
	ni += (size_t)snprintf(ins + ni, sizeof(ins) - ni, ")");
	if (ns >= sizeof(sel) || ni >= sizeof(ins))
		return iso_error_set(err, ISO_E_INTERNAL, "to",
		                     "store migrate: table %s: too many columns", table);
	if (sqlite3_prepare_v2(db, sel, -1, &st, NULL) != SQLITE_OK)
		return iso_error_set(err, ISO_E_INTERNAL, "from",
		                     "store migrate: reading table %s from SQLite: %s (the two "
		                     "schemas differ: migrate with the isoctl of the daemon's "
		                     "version)",
		                     table, sqlite3_errmsg(db));
	prep = PQprepare(c, "", ins, n, NULL);
	if (PQresultStatus(prep) != PGRES_COMMAND_OK)
		return pg_failed(c, prep, table, err);
	*rows = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct mig_row r;
		_cleanup_res_ PGresult *res = NULL;

		for (int i = 0; i < n; i++) {
			r.len[i] = 0;
			r.fmt[i] = 0;
			if (sqlite3_column_type(st, i) == SQLITE_NULL) {
				r.val[i] = NULL;
			} else if (is_bytea[i]) {
				r.len[i] = sqlite3_column_bytes(st, i);
				r.val[i] = sqlite3_column_blob(st, i);
				r.fmt[i] = 1;
				if (!r.val[i])
					r.val[i] = ""; /* an empty blob */
			} else if (is_double[i]) {
				snprintf(r.num[i], sizeof(r.num[i]), "%.17g",
				         sqlite3_column_double(st, i));
				r.val[i] = r.num[i];
			} else {
				r.val[i] = (const char *)sqlite3_column_text(st, i);
			}
		}
		res = PQexecPrepared(c, "", n, r.val, r.len, r.fmt, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			char what[96];
			snprintf(what, sizeof(what), "copying row %" PRId64 " of %s", *rows + 1,
			         table);
			return pg_failed(c, res, what, err);
		}
		(*rows)++;
	}
	if (rc != SQLITE_DONE)
		return iso_error_set(err, ISO_E_INTERNAL, "from",
		                     "store migrate: reading table %s from SQLite: %s", table,
		                     sqlite3_errmsg(db));
	return 0;
}

/* The identity sequence continues after SQLite's high-water mark
 * (sqlite_sequence for AUTOINCREMENT tables, else the highest id): a tenant
 * id is never handed out twice, also across the move. */
static int continue_sequence(sqlite3 *db, PGconn *c, const char *table, struct iso_error *err)
{
	char sql[256];
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	_cleanup_res_ PGresult *res = NULL;
	char val[32];
	const char *params[2] = {table, val};
	int64_t hw;

	snprintf(sql, sizeof(sql),
	         "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '%s'), 0),"
	         " coalesce((SELECT max(id) FROM \"%s\"), 0))",
	         table, table);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return iso_error_set(err, ISO_E_INTERNAL, "from",
		                     "store migrate: the high-water mark of %s: %s", table,
		                     sqlite3_errmsg(db));
	hw = sqlite3_column_int64(st, 0);
	if (hw <= 0)
		return 0;
	snprintf(val, sizeof(val), "%" PRId64, hw);
	res = PQexecParams(c, "SELECT setval(pg_get_serial_sequence($1, 'id'), $2::bigint)", 2,
	                   NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		return pg_failed(c, res, "continuing the id sequence", err);
	return 0;
}

/* ---- the audit log, read back from the target ---- */

struct audit_check {
	struct iso_merkle *m;
	int64_t next;
	int64_t bad_seq;
	const char *why;
};

static int check_event(void *arg, const struct iso_audit_record *rec)
{
	struct audit_check *a = arg;
	uint8_t leaf[ISO_AUDIT_HASH_LEN];

	if (rec->seq != a->next) {
		a->bad_seq = rec->seq;
		a->why = "a gap in the sequence";
		return 1;
	}
	iso_audit_leaf_hash(rec->body, rec->len, leaf);
	if (memcmp(leaf, rec->leaf, sizeof(leaf)) != 0) {
		a->bad_seq = rec->seq;
		a->why = "its leaf hash is not the hash of its bytes";
		return 1;
	}
	if (iso_merkle_append(a->m, leaf) < 0)
		return -ENOMEM;
	a->next++;
	return 0;
}

static int verify_audit(struct iso_store *src, struct iso_store *dst, const uint8_t *pubkey,
                        struct iso_store_migrate_report *rep, struct iso_error *err)
{
	struct audit_check a = {.bad_seq = -1};
	struct iso_audit_head h_src, h_dst;
	uint8_t root[ISO_AUDIT_HASH_LEN];
	int r, rs, rd;

	r = iso_merkle_new(&a.m);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store migrate: out of memory");
	r = dst->ops->audit_scan(dst, -1, 0, 0, check_event, &a, err);
	if (r < 0)
		goto out;
	if (a.why) {
		r = iso_error_set(err, ISO_E_INTERNAL, "to",
		                  "store migrate: the audit log in PostgreSQL does not verify: "
		                  "event %" PRId64 ": %s",
		                  a.bad_seq, a.why);
		goto out;
	}
	rep->audit_events = a.next;
	rs = src->ops->audit_head_latest(src, &h_src, err);
	rd = dst->ops->audit_head_latest(dst, &h_dst, err);
	if (rs == -ENOENT && rd == -ENOENT) {
		r = 0; /* nothing signed yet on either side */
		goto out;
	}
	if (rs < 0 || rd < 0) {
		r = iso_error_set(err, ISO_E_INTERNAL, "to",
		                  "store migrate: the newest signed head is %s in SQLite and %s in "
		                  "PostgreSQL",
		                  rs < 0 ? "missing" : "there", rd < 0 ? "missing" : "there");
		goto out;
	}
	if (h_src.size != h_dst.size || memcmp(h_src.root, h_dst.root, sizeof(root)) != 0 ||
	    h_src.time_ms != h_dst.time_ms ||
	    memcmp(h_src.sig, h_dst.sig, sizeof(h_src.sig)) != 0) {
		r = iso_error_set(err, ISO_E_INTERNAL, "to",
		                  "store migrate: the newest signed head differs between SQLite "
		                  "and PostgreSQL");
		goto out;
	}
	if (h_dst.size > (uint64_t)a.next || iso_merkle_root(a.m, h_dst.size, root) < 0 ||
	    memcmp(root, h_dst.root, sizeof(root)) != 0) {
		r = iso_error_set(err, ISO_E_INTERNAL, "to",
		                  "store migrate: the audit log in PostgreSQL does not verify: the "
		                  "tree of its first %" PRIu64 " events is not the signed head's",
		                  h_dst.size);
		goto out;
	}
	if (pubkey && !iso_audit_head_verify(&h_dst, pubkey)) {
		r = iso_error_set(err, ISO_E_INTERNAL, "to",
		                  "store migrate: the newest head's signature does not verify with "
		                  "the audit public key");
		goto out;
	}
	rep->head = true;
	rep->head_size = h_dst.size;
	memcpy(rep->head_root, h_dst.root, sizeof(rep->head_root));
	rep->head_signature_checked = pubkey != NULL;
	r = 0;
out:
	iso_merkle_free(a.m);
	return r < 0 ? r : 0;
}

/* Every table of the source must be one this file copies: a table added to
 * the schema and not to tables[] would otherwise be left behind silently. */
static int check_source_tables(sqlite3 *db, struct iso_error *err)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(
	        db,
	        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN "
	        "('schema_version', 'sqlite_sequence') AND name NOT LIKE 'sqlite\\_%' "
	        "ESCAPE '\\' ORDER BY name",
	        -1, &st, NULL) != SQLITE_OK)
		return iso_error_set(err, ISO_E_INTERNAL, "from",
		                     "store migrate: listing tables: %s", sqlite3_errmsg(db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		bool known = false;

		for (int i = 0; i < ISO_STORE_MIGRATE_TABLES && !known; i++)
			known = name && strcmp(name, tables[i]) == 0;
		if (!known)
			return iso_error_set(
			    err, ISO_E_INTERNAL, "from",
			    "store migrate: SQLite table %s is not one this isoctl "
			    "copies; nothing was copied",
			    name ? name : "?");
	}
	if (rc != SQLITE_DONE)
		return iso_error_set(err, ISO_E_INTERNAL, "from",
		                     "store migrate: listing tables: %s", sqlite3_errmsg(db));
	return 0;
}

int iso_store_migrate_to_postgres(const char *sqlite_path, const char *conninfo,
                                  const uint8_t *pubkey, struct iso_store_migrate_report *rep,
                                  struct iso_error *err)
{
	_cleanup_(iso_store_closep) struct iso_store *src = NULL;
	_cleanup_(iso_store_closep) struct iso_store *dst = NULL;
	_cleanup_(db_close) sqlite3 *db = NULL;
	PGconn *c;
	int r;

	memset(rep, 0, sizeof(*rep));
	/* Opening brings the source to this binary's schema, as a start would;
	 * then a plain read-only connection reads it in one snapshot. */
	r = iso_store_open_sqlite(sqlite_path, &src, err);
	if (r < 0) {
		if (err)
			iso_strlcpy(err->field, "from", sizeof(err->field));
		return r;
	}
	if (sqlite3_open_v2(sqlite_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		return iso_error_set(err, ISO_E_INTERNAL, "from", "store migrate: %s: %s",
		                     sqlite_path, db ? sqlite3_errmsg(db) : "out of memory");
	r = check_source_tables(db, err);
	if (r < 0)
		return r;
	r = iso_store_open_postgres(conninfo, &dst, err);
	if (r < 0) {
		if (err)
			iso_strlcpy(err->field, "to", sizeof(err->field));
		return r;
	}
	c = pg_store_of(dst)->conn;
	r = pg_run(c, "BEGIN", "begin", err);
	if (r < 0)
		return r;
	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		r = iso_error_set(err, ISO_E_INTERNAL, "from", "store migrate: %s",
		                  sqlite3_errmsg(db));
		goto rollback;
	}
	/* the writers' lock of the PostgreSQL store (pg.c's begin) */
	r = pg_run(c, "SELECT pg_advisory_xact_lock(7261535432105367602)", "locking", err);
	if (r < 0)
		goto rollback;
	for (int i = 0; i < ISO_STORE_MIGRATE_TABLES; i++) {
		int64_t n = pg_count(c, tables[i], err);
		if (n < 0) {
			r = (int)n;
			goto rollback;
		}
		if (n > 0) {
			r = iso_error_set(
			    err, ISO_E_CONFLICT, "to",
			    "store migrate: the target is not empty (table %s has %" PRId64
			    " rows); migrate into an empty database",
			    tables[i], n);
			goto rollback;
		}
	}
	for (int i = 0; i < ISO_STORE_MIGRATE_TABLES; i++) {
		int64_t want, got;

		rep->table[i] = tables[i];
		r = copy_table(db, c, tables[i], &rep->rows[i], err);
		if (r < 0)
			goto rollback;
		want = sqlite_count(db, tables[i], err);
		got = pg_count(c, tables[i], err);
		if (want < 0 || got < 0) {
			r = want < 0 ? (int)want : (int)got;
			goto rollback;
		}
		if (want != got || got != rep->rows[i]) {
			r = iso_error_set(err, ISO_E_INTERNAL, "to",
			                  "store migrate: table %s: %" PRId64
			                  " rows in SQLite, %" PRId64 " in PostgreSQL",
			                  tables[i], want, got);
			goto rollback;
		}
	}
	rep->n_tables = ISO_STORE_MIGRATE_TABLES;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(identity_tables); i++) {
		r = continue_sequence(db, c, identity_tables[i], err);
		if (r < 0)
			goto rollback;
	}
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	{
		_cleanup_res_ PGresult *res = PQexec(c, "COMMIT");
		if (PQresultStatus(res) != PGRES_COMMAND_OK ||
		    strcmp(PQcmdStatus(res), "COMMIT") != 0)
			return pg_failed(c, res, "commit", err);
	}
	return verify_audit(src, dst, pubkey, rep, err);
rollback:
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	PQclear(PQexec(c, "ROLLBACK"));
	return r;
}

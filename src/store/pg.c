/* pg.c: the PostgreSQL store (issue 16): one libpq connection owned by the
 * store and used by the daemon's one loop thread, statements prepared once
 * per connection, the vtable's begin/commit/rollback as SQL transactions,
 * synchronous_commit=on checked at connect, and the ops table. The row
 * operations live in pg_access.c, pg_tenancy.c, pg_alloc.c and pg_audit.c;
 * the schema in pg_schema.c. See docs/store.md, "PostgreSQL". */
#include <errno.h>
#include <string.h>

#include "store/pg_int.h"

/* Server messages end in a newline; the store's messages do not. */
static void trim(char *s)
{
	size_t n = strlen(s);

	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
}

int iso_pg_fail(struct pg_store *s, const char *op, struct iso_error *err)
{
	char msg[400];

	iso_strlcpy(msg, s->conn ? PQerrorMessage(s->conn) : "no connection", sizeof(msg));
	trim(msg);
	return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: %s: %s", op,
	                     msg[0] ? msg : "unknown error");
}

/* Maps a failed result: 23505 becomes a conflict when the caller named what
 * clashed, anything else ISO_E_INTERNAL with the server's message. */
static int result_fail(struct pg_store *s, const PGresult *res, const char *op, const char *what,
                       const char *key, struct iso_error *err)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

	if (state && what && strcmp(state, "23505") == 0)
		return iso_error_set(err, ISO_E_CONFLICT, NULL, "%s \"%s\" already exists", what,
		                     key ? key : "");
	if (primary)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: %s: %s (SQLSTATE %s)", op,
		                     primary, state ? state : "?");
	return iso_pg_fail(s, op, err);
}

/* Group commit's session setting: synchronous_commit off (a commit returns
 * once it is in the WAL buffers, before the flush) or back on, read back. */
static int group_setting(struct pg_store *s, bool on, struct iso_error *err)
{
	_cleanup_pgres_ PGresult *set =
	    PQexec(s->conn, on ? "SET synchronous_commit = off" : "SET synchronous_commit = on");
	_cleanup_pgres_ PGresult *res = NULL;
	const char *want = on ? "off" : "on";

	if (PQresultStatus(set) != PGRES_COMMAND_OK)
		return result_fail(s, set, "group commit", NULL, NULL, err);
	res = PQexec(s->conn, "SHOW synchronous_commit");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return result_fail(s, res, "reading synchronous_commit", NULL, NULL, err);
	if (strcmp(PQgetvalue(res, 0, 0), want) != 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: group commit: synchronous_commit=%s did not take "
		                     "(got \"%s\")",
		                     want, PQgetvalue(res, 0, 0));
	return 0;
}

/* Settings every session of the store runs with. synchronous_commit=on is
 * read back: a server or role configured otherwise (off, local) would
 * acknowledge commits that a crash or a failover can lose, so it is refused. */
static int diverged_error(struct iso_error *err)
{
	iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
	              "store: PostgreSQL failed over to another timeline; commits acknowledged "
	              "before may be missing there, so the daemon stops and its restart reads "
	              "what the new primary has");
	return -ENOTCONN;
}

/* Which history this session writes: the cluster's system identifier and
 * the WAL timeline of the primary (the first 8 hex digits of the current WAL
 * file's name). A promoted standby has the same system identifier and a new
 * timeline. The first session's is kept; a later session (a reconnect) on
 * another one has diverged: an asynchronous standby may lack commits this
 * process acknowledged and holds in memory, and going on would write a hole
 * into the audit log (docs/store.md, "PostgreSQL failover"). */
static int check_origin(struct pg_store *s, struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = PQexec(
	    s->conn, "SELECT system_identifier::text || '/' || CASE WHEN pg_is_in_recovery() "
	             "THEN 'standby' ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END "
	             "FROM pg_control_system()");
	const char *got;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return result_fail(s, res, "reading the server's timeline", NULL, NULL, err);
	got = PQgetvalue(res, 0, 0);
	if (!s->origin[0]) {
		iso_strlcpy(s->origin, got, sizeof(s->origin));
		return 0;
	}
	if (strcmp(s->origin, got) == 0)
		return 0;
	iso_log(ISO_LOG_ERR, "store_timeline_changed", "was=%s now=%s", s->origin, got);
	s->diverged = true;
	return diverged_error(err);
}

static int session_setup(struct pg_store *s, struct iso_error *err)
{
	static const char *const setup[] = {
	    "SET synchronous_commit = on",
	    "SET client_min_messages = warning",
	    "SET default_transaction_isolation = 'read committed'",
	};
	_cleanup_pgres_ PGresult *res = NULL;
	const char *got;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(setup); i++) {
		PGresult *r = PQexec(s->conn, setup[i]);
		bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;

		if (!ok) {
			int rc = result_fail(s, r, "session setup", NULL, NULL, err);
			PQclear(r);
			return rc;
		}
		PQclear(r);
	}
	res = PQexec(s->conn, "SHOW synchronous_commit");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return result_fail(s, res, "reading synchronous_commit", NULL, NULL, err);
	got = PQgetvalue(res, 0, 0);
	if (strcmp(got, "on") != 0 && strcmp(got, "remote_apply") != 0 &&
	    strcmp(got, "remote_write") != 0)
		return iso_error_set(
		    err, ISO_E_INTERNAL, NULL,
		    "store: postgres: synchronous_commit=on did not take (got \"%s\")", got);
	if (s->idle_tx_timeout_ms > 0) { /* the leader lease's bound (pg_lease.c) */
		char sql[96];
		snprintf(sql, sizeof(sql), "SET idle_in_transaction_session_timeout = %lld",
		         (long long)s->idle_tx_timeout_ms);
		PQclear(PQexec(s->conn, sql));
	}
	s->n_prepared = 0;
	int rc = check_origin(s, err);
	if (rc < 0)
		return rc;
	return s->group ? group_setting(s, true, err) : 0;
}

/* A connection that dropped while no transaction was open is made again
 * before the next statement: after a PostgreSQL failover a multi-host
 * conninfo with target_session_attrs=read-write finds the new primary.
 * Inside a transaction the failure stands: the transaction is gone. */
static int ensure_connected(struct pg_store *s, struct iso_error *err)
{
	if (s->diverged)
		return diverged_error(err);
	if (PQstatus(s->conn) == CONNECTION_OK)
		return 0;
	if (s->in_tx)
		return iso_pg_fail(s, "connection lost inside a transaction", err);
	iso_log(ISO_LOG_WARN, "store_reconnect", "msg=\"connection to PostgreSQL lost\"");
	/* Commits made with synchronous_commit=off and not yet flushed by a sync
	 * may have died with the server; a flush on the new session cannot
	 * bring them back, so the next sync fails instead of vouching for them. */
	if (s->group && s->unsynced)
		s->sync_lost = true;
	PQreset(s->conn);
	if (PQstatus(s->conn) != CONNECTION_OK)
		return iso_pg_fail(s, "reconnecting", err);
	return session_setup(s, err);
}

int iso_store_postgres_rebase(struct iso_store *is, struct iso_error *err)
{
	struct pg_store *s;

	if (!is || strcmp(is->ops->name, "postgres") != 0)
		return 0;
	s = pg_store_of(is);
	if (s->in_tx)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: rebase: a transaction is open");
	s->origin[0] = '\0';
	s->diverged = false;
	/* A session that still answers gives the timeline now; one that met a
	 * dead server is made again, and its setup takes it (origin empty). */
	if (PQstatus(s->conn) == CONNECTION_OK && check_origin(s, NULL) == 0)
		return 0;
	s->origin[0] = '\0';
	return ensure_connected(s, err);
}

/* The name of the statement prepared for `sql`, preparing it on first use. */
static int prepared_name(struct pg_store *s, const char *sql, char *name, size_t size,
                         const char *op, struct iso_error *err)
{
	int slot = -1;

	for (int i = 0; i < s->n_prepared; i++)
		if (s->prepared[i] == sql) {
			slot = i;
			break;
		}
	if (slot >= 0) {
		snprintf(name, size, "iso_%d", slot);
		return 0;
	}
	if (s->n_prepared >= PG_STMT_MAX) /* a programming error: more SQL than slots */
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: %s: more than %d distinct statements", op,
		                     PG_STMT_MAX);
	slot = s->n_prepared;
	snprintf(name, size, "iso_%d", slot);
	_cleanup_pgres_ PGresult *res = PQprepare(s->conn, name, sql, 0, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		return result_fail(s, res, op, NULL, NULL, err);
	s->prepared[slot] = sql;
	s->n_prepared++;
	return 0;
}

int iso_pg_query(struct pg_store *s, const char *sql, struct pg_params *p, const char *op,
                 const char *what, const char *key, PGresult **out, struct iso_error *err)
{
	char name[16];
	PGresult *res;
	ExecStatusType st;
	int r;

	*out = NULL;
	if (p && p->bad)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: %s: a parameter does not fit (too many or too long)",
		                     op);
	r = ensure_connected(s, err);
	if (r < 0)
		return r;
	r = prepared_name(s, sql, name, sizeof(name), op, err);
	if (r < 0)
		return r;
	if (s->group && !s->in_tx)
		s->unsynced = true; /* an autocommit statement may write */
	res = PQexecPrepared(s->conn, name, p ? p->n : 0, p ? p->val : NULL, p ? p->len : NULL,
	                     p ? p->fmt : NULL, 0);
	st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		r = result_fail(s, res, op, what, key, err);
		PQclear(res);
		return r;
	}
	*out = res;
	return 0;
}

int iso_pg_exec(struct pg_store *s, const char *sql, struct pg_params *p, const char *op,
                struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = NULL;

	return iso_pg_query(s, sql, p, op, NULL, NULL, &res, err);
}

int64_t iso_pg_changes(const PGresult *res)
{
	const char *t = PQcmdTuples((PGresult *)res);

	return t && *t ? strtoll(t, NULL, 10) : 0;
}

/* Runs a parameterless utility statement (transaction control). */
static int simple(struct pg_store *s, const char *sql, const char *op, struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = PQexec(s->conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		return result_fail(s, res, op, NULL, NULL, err);
	return 0;
}

/* ---- transactions ---- */

/* The fence (docs/store.md, "High availability"), as Temporal checks its
 * shard's range_id: with a leader lease, the first statement of every write
 * transaction checks, in that transaction, that this process still holds
 * the lease with its term. FOR SHARE keeps a takeover's update of the row
 * waiting until the transaction ends, so a term cannot move under a
 * transaction that passed the check. A moved term (or no lease held) fails
 * the transaction and deposes the lease: the daemon steps down. */
static int pg_fence(struct pg_store *s, struct iso_error *err)
{
	static const char sql[] = "SELECT 1 FROM leader WHERE id = 1 AND holder = $1 AND term = $2"
	                          " AND expires_at > clock_timestamp() FOR SHARE";
	struct iso_lease *l = s->lease;
	_cleanup_pgres_ PGresult *res = NULL;
	struct pg_params p = {0};
	int r;

	if (!l)
		return 0;
	if (l->role != ISO_LEASE_LEADER)
		return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
		                     "not the leader: this isostackd does not hold the lease");
	P_STR(&p, l->holder);
	iso_pg_p_i64(&p, l->term);
	r = iso_pg_query(s, sql, &p, "fence", NULL, NULL, &res, err);
	if (r < 0)
		return r;
	if (PQntuples(res) != 1) {
		l->fence_lost = true;
		iso_lease_depose(l, "a write found the term moved");
		return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
		                     "not the leader: term %lld is no longer this isostackd's; "
		                     "stepping down",
		                     (long long)l->term);
	}
	return 0;
}

int iso_pg_set_idle_timeout(struct pg_store *s, int64_t ms, struct iso_error *err)
{
	char sql[96];

	s->idle_tx_timeout_ms = ms;
	snprintf(sql, sizeof(sql), "SET idle_in_transaction_session_timeout = %lld", (long long)ms);
	return simple(s, sql, "idle_in_transaction_session_timeout", err);
}

static int pg_begin(struct iso_store *is, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	int r;

	if (s->in_tx || PQtransactionStatus(s->conn) == PQTRANS_INTRANS ||
	    PQtransactionStatus(s->conn) == PQTRANS_INERROR) {
		iso_error_set(err, ISO_E_INTERNAL, NULL,
		              "store: begin: a transaction is already open (nested begin)");
		return -EBUSY;
	}
	/* Writers are serialised as SQLite's BEGIN IMMEDIATE serialises them:
	 * a transaction-scoped advisory lock (pooler-safe, freed at commit or
	 * rollback, also when the session dies), in the same round trip. */
	r = ensure_connected(s, err);
	if (r == 0)
		r = simple(s, "BEGIN; SELECT pg_advisory_xact_lock(7261535432105367602)", "begin",
		           err);
	if (r == 0)
		r = pg_fence(s, err);
	if (r < 0) {
		if (PQtransactionStatus(s->conn) != PQTRANS_IDLE)
			PQclear(PQexec(s->conn, "ROLLBACK"));
		return r;
	}
	s->in_tx = true;
	return 0;
}

static void pg_rollback(struct iso_store *is)
{
	struct pg_store *s = pg_store_of(is);
	PGTransactionStatusType ts = PQtransactionStatus(s->conn);

	s->in_tx = false;
	if (ts != PQTRANS_INTRANS && ts != PQTRANS_INERROR)
		return; /* nothing open (or the connection is gone, and the server rolled back) */
	PGresult *res = PQexec(s->conn, "ROLLBACK");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		iso_log(ISO_LOG_ERR, "store_rollback_failed", "error=\"%s\"",
		        PQerrorMessage(s->conn));
	PQclear(res);
}

/* A failed commit rolls back, so that an error always means nothing
 * changed. A transaction in which a statement failed is refused here: the
 * server would answer COMMIT with ROLLBACK. (A commit whose answer is lost
 * with the connection is the one case where the outcome is unknown; it is
 * reported as an error, as a lost SQLite fsync would be.) */
static int pg_commit(struct iso_store *is, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	PGresult *res;
	int r = 0;

	if (!s->in_tx)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: commit: no transaction is open");
	if (PQtransactionStatus(s->conn) == PQTRANS_INERROR) {
		pg_rollback(is);
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: commit: a statement of the transaction failed; "
		                     "rolled back");
	}
	if (PQstatus(s->conn) != CONNECTION_OK) { /* lost before COMMIT: not committed */
		pg_rollback(is);
		return iso_pg_fail(s, "commit: connection lost inside the transaction", err);
	}
	if (s->group)
		s->unsynced = true; /* also when the answer is lost: it may have committed */
	res = PQexec(s->conn, "COMMIT");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		r = result_fail(s, res, "commit", NULL, NULL, err);
	else if (strcmp(PQcmdStatus(res), "COMMIT") != 0)
		r = iso_error_set(err, ISO_E_INTERNAL, NULL,
		                  "store: commit: the server rolled the transaction back (%s)",
		                  PQcmdStatus(res));
	PQclear(res);
	/* An error that came with the connection lost may have hidden a
	 * commit made on the server (and on its synchronous standby): the
	 * outcome is unknown, which the caller must not treat as a rollback. */
	if (r < 0 && PQstatus(s->conn) != CONNECTION_OK)
		r = -ENOTCONN;
	if (r < 0)
		pg_rollback(is);
	s->in_tx = false;
	return r;
}

int iso_pg_atomic_begin(struct pg_store *s, const char *op, struct iso_error *err)
{
	int r = ensure_connected(s, err);

	if (r < 0)
		return r;
	if (s->in_tx)
		return simple(s, "SAVEPOINT iso_write", op, err);
	r = simple(s, "BEGIN", op, err);
	if (r == 0)
		r = pg_fence(s, err); /* a write of its own is fenced too */
	if (r < 0 && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
		PQclear(PQexec(s->conn, "ROLLBACK"));
	return r;
}

int iso_pg_atomic_end(struct pg_store *s, const char *op, struct iso_error *err)
{
	PGresult *res;
	int r = 0;

	if (s->group && !s->in_tx)
		s->unsynced = true;
	res = PQexec(s->conn, s->in_tx ? "RELEASE iso_write" : "COMMIT");

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		r = result_fail(s, res, op, NULL, NULL, err);
	else if (!s->in_tx && strcmp(PQcmdStatus(res), "COMMIT") != 0)
		r = iso_error_set(err, ISO_E_INTERNAL, NULL,
		                  "store: %s: the server rolled the write back (%s)", op,
		                  PQcmdStatus(res));
	PQclear(res);
	if (r < 0)
		iso_pg_atomic_abort(s);
	return r;
}

void iso_pg_atomic_abort(struct pg_store *s)
{
	PGTransactionStatusType ts = PQtransactionStatus(s->conn);

	if (ts != PQTRANS_INTRANS && ts != PQTRANS_INERROR)
		return;
	if (s->in_tx) {
		/* Back to the state before the op; the caller's transaction goes on,
		 * as it does after a failed statement in SQLite. */
		PQclear(PQexec(s->conn, "ROLLBACK TO iso_write"));
		PQclear(PQexec(s->conn, "RELEASE iso_write"));
	} else {
		PQclear(PQexec(s->conn, "ROLLBACK"));
	}
}

/* ---- group commit (docs/store.md, "Group commit") ----
 *
 * With group commit on, the session runs synchronous_commit=off: COMMIT
 * returns once the commit record is in the WAL buffers, and the WAL writer
 * flushes it later. sync then runs one tiny transaction with
 * synchronous_commit=on. PostgreSQL's documentation, "Asynchronous Commit"
 * (https://www.postgresql.org/docs/15/wal-async-commit.html): a synchronous
 * commit waits for "the transaction's WAL records to be flushed to permanent
 * storage" before it returns, the commit mode "depends on the value of
 * synchronous_commit when transaction commit begins" (so SET LOCAL inside
 * the transaction decides it), and after a crash the WAL is replayed "up to
 * the last record that was flushed", in commit order: "it is not possible
 * for A's effects to be lost while B's effects are preserved". The WAL is
 * one sequence, so flushing up to the sync transaction's commit record
 * flushes every commit before it. (With a synchronous standby, that commit
 * also waits for the standby to have the WAL up to it: same reasoning.)
 *
 * The sync transaction must write WAL of its own: PostgreSQL flushes at
 * commit only a transaction that has an xid *and* wrote WAL before its
 * commit record; one that only took an xid (pg_current_xact_id()) "can end
 * up not writing any WAL, even if it has an xid" and then commits
 * asynchronously whatever synchronous_commit says (RecordTransactionCommit in
 * src/backend/access/transam/xact.c, PostgreSQL 15). A first version did
 * exactly that, and test_group_commit.py's crash of the server under load
 * lost an answered create. So the sync transaction upserts one meta row
 * (key "group_commit.sync"): a heap write, WAL, an xid, a flushed commit. */

static int pg_set_group_commit(struct iso_store *is, bool on, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	int r;

	if (s->in_tx)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: group commit: a transaction is open");
	r = ensure_connected(s, err);
	if (r < 0)
		return r;
	r = group_setting(s, on, err);
	if (r < 0)
		return r;
	s->group = on;
	return 0;
}

static int pg_sync(struct iso_store *is, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	PGresult *res;
	int r = 0;

	if (s->in_tx)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: sync: a transaction is open");
	if (s->sync_lost)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: sync: the PostgreSQL session ended before commits "
		                     "made without a flush were flushed; they may be lost");
	if (!s->unsynced)
		return 0;
	r = ensure_connected(s, err);
	if (r < 0)
		return r;
	if (s->sync_lost) /* the reconnect above found the session gone */
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: sync: the PostgreSQL session ended before commits "
		                     "made without a flush were flushed; they may be lost");
	res = PQexec(s->conn, "BEGIN; SET LOCAL synchronous_commit = on; "
	                      "INSERT INTO meta (key, value) VALUES ('group_commit.sync', '')"
	                      " ON CONFLICT (key) DO UPDATE SET value = excluded.value; COMMIT");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		r = result_fail(s, res, "sync", NULL, NULL, err);
	else if (strcmp(PQcmdStatus(res), "COMMIT") != 0)
		r = iso_error_set(err, ISO_E_INTERNAL, NULL,
		                  "store: sync: the server rolled the flush back (%s)",
		                  PQcmdStatus(res));
	PQclear(res);
	if (r < 0) {
		PGTransactionStatusType ts = PQtransactionStatus(s->conn);
		if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR)
			PQclear(PQexec(s->conn, "ROLLBACK"));
		/* Whether the WAL reached the disk is unknown: no later sync may
		 * report success for it (docs/store.md, "A failed flush"). */
		s->sync_lost = true;
		return r;
	}
	s->unsynced = false;
	return 0;
}

/* ---- open and close ---- */

static void pg_close(struct iso_store *is)
{
	struct pg_store *s = pg_store_of(is);

	if (s->in_tx)
		iso_log(ISO_LOG_WARN, "store_close_in_tx", "msg=\"open transaction rolled back\"");
	PQfinish(s->conn);
	free(s);
}

/* Notices (a schema object that already exists, ...) are not the daemon's
 * output: libpq's default prints them on stderr. */
static void quiet_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

static const struct iso_store_ops pg_ops = {
    .name = "postgres",
    .close = pg_close,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .meta_get = iso_pg_meta_get,
    .meta_set = iso_pg_meta_set,
    .tenant_insert = iso_pg_tenant_insert,
    .tenant_update = iso_pg_tenant_update,
    .tenant_delete = iso_pg_tenant_delete,
    .tenant_get_by_name = iso_pg_tenant_get_by_name,
    .tenant_get_by_id = iso_pg_tenant_get_by_id,
    .tenant_list = iso_pg_tenant_list,
    .token_insert = iso_pg_token_insert,
    .token_get = iso_pg_token_get,
    .token_list = iso_pg_token_list,
    .token_revoke = iso_pg_token_revoke,
    .token_revoke_tenant = iso_pg_token_revoke_tenant,
    .node_state_set = iso_pg_node_state_set,
    .node_state_list = iso_pg_node_state_list,
    .fabric_key_put = iso_pg_fabric_key_put,
    .fabric_key_delete = iso_pg_fabric_key_delete,
    .fabric_key_list = iso_pg_fabric_key_list,
    .fabric_port_put = iso_pg_fabric_port_put,
    .fabric_port_delete = iso_pg_fabric_port_delete,
    .fabric_port_list = iso_pg_fabric_port_list,
    .neutron_project_put = iso_pg_neutron_project_put,
    .neutron_project_delete = iso_pg_neutron_project_delete,
    .neutron_project_list = iso_pg_neutron_project_list,
    .neutron_object_put = iso_pg_neutron_object_put,
    .neutron_object_delete = iso_pg_neutron_object_delete,
    .neutron_object_list = iso_pg_neutron_object_list,
    .org_put = iso_pg_org_put,
    .org_delete = iso_pg_org_delete,
    .org_list = iso_pg_org_list,
    .project_put = iso_pg_project_put,
    .project_delete = iso_pg_project_delete,
    .project_list = iso_pg_project_list,
    .quota_put = iso_pg_quota_put,
    .token_count_live = iso_pg_token_count_live,
    .account_forget = iso_pg_account_forget,
    .quota_delete = iso_pg_quota_delete,
    .quota_list = iso_pg_quota_list,
    .usage_append = iso_pg_usage_append,
    .usage_list = iso_pg_usage_list,
    .gpu_fault_put = iso_pg_gpu_fault_put,
    .gpu_fault_delete = iso_pg_gpu_fault_delete,
    .gpu_fault_list = iso_pg_gpu_fault_list,
    .alloc_insert = iso_pg_alloc_insert,
    .alloc_update = iso_pg_alloc_update,
    .alloc_get = iso_pg_alloc_get,
    .alloc_list = iso_pg_alloc_list,
    .alloc_count_live = iso_pg_alloc_count_live,
    .alloc_recent = iso_pg_alloc_recent,
    .alloc_get_by_key = iso_pg_alloc_get_by_key,
    .audit_append = iso_pg_audit_append,
    .audit_count = iso_pg_audit_count,
    .audit_scan = iso_pg_audit_scan,
    .audit_head_put = iso_pg_audit_head_put,
    .audit_head_latest = iso_pg_audit_head_latest,
    .audit_head_scan = iso_pg_audit_head_scan,
    .set_group_commit = pg_set_group_commit,
    .sync = pg_sync,
};

int iso_store_open_postgres(const char *conninfo, struct iso_store **out, struct iso_error *err)
{
	/* Defaults come before the caller's conninfo (expanded from dbname), so
	 * that anything it says wins: a bounded connect, and a name in
	 * pg_stat_activity. */
	const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
	const char *vals[] = {"10", "isostackd", conninfo, NULL};
	struct pg_store *s;
	char *msg = NULL;
	PQconninfoOption *opts;
	int r;

	*out = NULL;
	if (!conninfo || !*conninfo)
		return iso_error_set(err, ISO_E_INVALID, "store", "PostgreSQL conninfo is empty");
	opts = PQconninfoParse(conninfo, &msg);
	if (!opts) {
		char m[300];
		iso_strlcpy(m, msg ? msg : "out of memory", sizeof(m));
		trim(m);
		PQfreemem(msg);
		return iso_error_set(err, ISO_E_INVALID, "store",
		                     "not a valid PostgreSQL conninfo: %s", m);
	}
	PQconninfoFree(opts);
	s = calloc(1, sizeof(*s));
	if (!s)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
	s->base.ops = &pg_ops;
	s->conn = PQconnectdbParams(keys, vals, 1);
	if (!s->conn) {
		free(s);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
	}
	PQsetNoticeProcessor(s->conn, quiet_notice, NULL);
	if (PQstatus(s->conn) != CONNECTION_OK) {
		char m[400];
		iso_strlcpy(m, PQerrorMessage(s->conn), sizeof(m));
		trim(m);
		r = iso_error_set(err, ISO_E_UNAVAILABLE, "store",
		                  "cannot connect to PostgreSQL: %s", m);
		goto fail;
	}
	r = session_setup(s, err);
	if (r == 0)
		r = iso_pg_migrate(s, err);
	if (r < 0)
		goto fail;
	*out = &s->base;
	return 0;
fail:
	pg_close(&s->base);
	return r;
}

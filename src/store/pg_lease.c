/* pg_lease.c: one leader among several isostackd on one PostgreSQL (issue 16,
 * "One leader, fenced"). Leadership is a lease row, not a session advisory
 * lock: after pg_terminate_backend another session gets an advisory lock at
 * once while the old holder still believes it leads, and the lock carries no
 * fencing token (docs/store.md, "High availability"; skypilot-org/skypilot
 * #10347, whose lease elector this follows). The row's expiry is computed on the database clock by
 * short autocommit statements on a connection of its own, and its term goes
 * up at every takeover, also when the same holder takes it again after it
 * expired. The store's write transactions check that term in the same
 * transaction (pg.c, pg_fence), so a deposed leader's writes roll back. */
#include <errno.h>
#include <string.h>
#include <sodium.h>

#include "store/pg_int.h"

/* One row (id 1). The first term continues the agents' term a single
 * isostackd kept in meta before (isoctl store migrate, or a site that ran
 * without the lease), so that agents never see the term go down. */
static const char SQL_TABLE[] = "SELECT pg_advisory_xact_lock(7261535432105367603);"
                                "CREATE TABLE IF NOT EXISTS leader ("
                                "  id INTEGER PRIMARY KEY CHECK (id = 1),"
                                "  holder TEXT COLLATE \"C\" NOT NULL,"
                                "  url TEXT COLLATE \"C\" NOT NULL,"
                                "  term BIGINT NOT NULL CHECK (term > 0),"
                                "  expires_at TIMESTAMPTZ NOT NULL)";

/* Acquire or renew, on the database clock (clock_timestamp(), not now(),
 * which is the transaction's start). The term stays only when the same
 * holder renews a lease that has not expired; a takeover, or the same holder
 * coming back after expiry, bumps it. No row: someone else holds it. */
static const char SQL_ACQUIRE[] =
    "INSERT INTO leader AS l (id, holder, url, term, expires_at)"
    " VALUES (1, $1, $2,"
    "  1 + COALESCE((SELECT value::bigint FROM meta"
    "                WHERE key = 'agent_term' AND value ~ '^[0-9]{1,15}$'), 0),"
    "  clock_timestamp() + $3::bigint * interval '1 millisecond')"
    " ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, url = EXCLUDED.url,"
    "  expires_at = EXCLUDED.expires_at,"
    "  term = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp()"
    "         THEN l.term ELSE l.term + 1 END"
    " WHERE l.holder = EXCLUDED.holder OR l.expires_at <= clock_timestamp()"
    " RETURNING term";

static const char SQL_READ[] =
    "SELECT url, term, expires_at > clock_timestamp() FROM leader WHERE id = 1";

/* The graceful handoff: the lease ends now and keeps its term, so that
 * whoever takes it next bumps the term; followers LISTEN on the channel and
 * are told at the commit (resign plus notify, as River does), so one takes
 * it at its next tick instead of its next look. */
static const char SQL_RELEASE[] = "WITH r AS (UPDATE leader SET expires_at = clock_timestamp()"
                                  "  WHERE id = 1 AND holder = $1 AND term = $2 RETURNING 1)"
                                  " SELECT pg_notify('isostack_leader', 'released') FROM r";

static int lease_fail(struct iso_lease *l, const PGresult *res, const char *op,
                      struct iso_error *err)
{
	const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char buf[300];

	iso_strlcpy(buf, m ? m : PQerrorMessage(l->conn), sizeof(buf));
	for (size_t n = strlen(buf); n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ');)
		buf[--n] = '\0';
	return iso_error_set(err, ISO_E_INTERNAL, NULL, "leader lease: %s: %s", op, buf);
}

/* A parameterised statement on the lease's own connection (autocommit);
 * a dropped connection is made again first. */
static int lease_query(struct iso_lease *l, const char *sql, int n, const char *const *vals,
                       const char *op, PGresult **out, struct iso_error *err)
{
	PGresult *res;
	ExecStatusType st;

	*out = NULL;
	if (PQstatus(l->conn) != CONNECTION_OK) {
		PQreset(l->conn);
		if (PQstatus(l->conn) != CONNECTION_OK)
			return lease_fail(l, NULL, "reconnecting", err);
		PQclear(PQexec(l->conn, l->session_sql));
	}
	res = PQexecParams(l->conn, sql, n, NULL, vals, NULL, NULL, 0);
	st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		int r = lease_fail(l, res, op, err);
		PQclear(res);
		return r;
	}
	*out = res;
	return 0;
}

/* Reads who leads, for followers' answers (healthz, not_leader). */
static void read_leader(struct iso_lease *l)
{
	const char *none[1] = {NULL};
	_cleanup_pgres_ PGresult *res = NULL;
	struct iso_error err = {0};

	if (lease_query(l, SQL_READ, 0, none, "read", &res, &err) < 0) {
		iso_log(ISO_LOG_WARN, "lease_read_failed", "error=\"%s\"", err.message);
		return;
	}
	if (PQntuples(res) != 1) {
		l->leader_url[0] = '\0';
		l->leader_term = 0;
		return;
	}
	iso_strlcpy(l->leader_url, PQgetvalue(res, 0, 0), sizeof(l->leader_url));
	l->leader_term = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	if (strcmp(PQgetvalue(res, 0, 2), "t") != 0)
		l->leader_url[0] = '\0'; /* expired: nobody leads right now */
}

/* One attempt to take or keep the lease. Returns 1 with *term when held, 0
 * when someone else holds it, < 0 on an error (no answer from the server). */
static int try_acquire(struct iso_lease *l, int64_t *term, struct iso_error *err)
{
	char ms[24];
	const char *vals[3] = {l->holder, l->url, ms};
	_cleanup_pgres_ PGresult *res = NULL;
	int r;

	snprintf(ms, sizeof(ms), "%lld", (long long)l->lease_ms);
	r = lease_query(l, SQL_ACQUIRE, 3, vals, "acquire", &res, err);
	if (r < 0)
		return r;
	if (PQntuples(res) != 1)
		return 0;
	*term = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	return 1;
}

static void become_leader(struct iso_lease *l, int64_t term, uint64_t now)
{
	l->role = ISO_LEASE_LEADER;
	l->term = term;
	l->renewed_ns = now;
	iso_strlcpy(l->leader_url, l->url, sizeof(l->leader_url));
	l->leader_term = term;
	iso_log(ISO_LOG_INFO, "leader_elected", "term=%lld holder=%s url=%s", (long long)term,
	        l->holder, l->url);
}

/* Did a leader announce its release (NOTIFY isostack_leader) since the last
 * look? Reads what already arrived on the socket; never waits. */
static bool released(struct iso_lease *l)
{
	PGnotify *n;
	bool any = false;

	if (PQstatus(l->conn) != CONNECTION_OK || !PQconsumeInput(l->conn))
		return false;
	while ((n = PQnotifies(l->conn)) != NULL) {
		any = true;
		PQfreemem(n);
	}
	return any;
}

void iso_lease_depose(struct iso_lease *l, const char *why)
{
	if (l->role != ISO_LEASE_LEADER)
		return;
	l->role = ISO_LEASE_DEPOSED;
	l->leader_url[0] = '\0'; /* who leads now is not known here */
	l->leader_term = l->term;
	iso_log(ISO_LOG_WARN, "leader_deposed", "term=%lld why=\"%s\"", (long long)l->term, why);
}

int iso_lease_open(struct iso_store *store, const char *conninfo,
                   const struct iso_lease_config *cfg, struct iso_lease **out,
                   struct iso_error *err)
{
	const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
	const char *vals[] = {"5", "isostackd-lease", conninfo, NULL};
	unsigned char rnd[12];
	struct iso_lease *l;
	PGresult *res;
	int r;

	*out = NULL;
	if (!store || strcmp(store->ops->name, "postgres") != 0)
		return iso_error_set(err, ISO_E_INVALID, "store",
		                     "the leader lease needs the PostgreSQL store");
	if (cfg->lease_ms < 100 || cfg->renew_ms <= 0 || cfg->renew_ms * 2 > cfg->lease_ms)
		return iso_error_set(err, ISO_E_INVALID, "renew-ms",
		                     "renew-ms must be above 0 and at most half of lease-ms "
		                     "(lease %lld ms, renew %lld ms)",
		                     (long long)cfg->lease_ms, (long long)cfg->renew_ms);
	if (!cfg->url || !*cfg->url || strlen(cfg->url) >= sizeof(l->url))
		return iso_error_set(err, ISO_E_INVALID, "advertise-url",
		                     "advertise-url: empty or longer than %zu bytes",
		                     sizeof(l->url) - 1);
	l = calloc(1, sizeof(*l));
	if (!l)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	l->lease_ms = cfg->lease_ms;
	l->renew_ms = cfg->renew_ms;
	iso_strlcpy(l->url, cfg->url, sizeof(l->url));
	/* A new holder at every start: a restarted daemon is a takeover. */
	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(l->holder, sizeof(l->holder), rnd, sizeof(rnd));
	/* Every statement is bounded, so a stuck server or a row lock held by a
	 * frozen leader's transaction cannot hold this loop past a renew. */
	snprintf(l->session_sql, sizeof(l->session_sql),
	         "SET statement_timeout = %lld; SET lock_timeout = %lld;"
	         " SET synchronous_commit = on; LISTEN isostack_leader",
	         (long long)cfg->renew_ms, (long long)cfg->renew_ms);
	l->conn = PQconnectdbParams(keys, vals, 1);
	if (!l->conn || PQstatus(l->conn) != CONNECTION_OK) {
		r = iso_error_set(err, ISO_E_UNAVAILABLE, "store",
		                  "leader lease: cannot connect to PostgreSQL: %s",
		                  l->conn ? PQerrorMessage(l->conn) : "out of memory");
		iso_lease_close(l);
		return r;
	}
	res = PQexec(l->conn, l->session_sql);
	PQclear(res);
	res = PQexec(l->conn, "BEGIN");
	PQclear(res);
	res = PQexec(l->conn, SQL_TABLE);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		r = lease_fail(l, res, "creating the table", err);
		PQclear(res);
		iso_lease_close(l);
		return r;
	}
	PQclear(res);
	res = PQexec(l->conn, "COMMIT");
	PQclear(res);
	/* A frozen leader's open transaction holds the row (FOR SHARE) and
	 * would keep a takeover waiting: the server ends such a session after
	 * one lease, and the frozen leader finds its transaction gone. */
	pg_store_of(store)->lease = l;
	l->store = pg_store_of(store);
	r = iso_pg_set_idle_timeout(l->store, cfg->lease_ms, err);
	if (r < 0) {
		pg_store_of(store)->lease = NULL;
		iso_lease_close(l);
		return r;
	}
	*out = l;
	return 0;
}

void iso_lease_close(struct iso_lease *l)
{
	if (!l)
		return;
	if (l->store && l->store->lease == l)
		l->store->lease = NULL;
	if (l->conn)
		PQfinish(l->conn);
	free(l);
}

int iso_lease_tick(struct iso_lease *l)
{
	uint64_t now = iso_mono_ns();
	struct iso_error err = {0};
	int64_t term = 0;
	int r;

	if (l->role == ISO_LEASE_DEPOSED)
		return l->role;
	if (l->role == ISO_LEASE_LEADER && l->fence_lost) {
		iso_lease_depose(l, "a write found the term moved");
		return l->role;
	}
	/* Drained in every role (a leader's list would only grow); acted on
	 * by a follower: the leader resigned, look now. */
	if (released(l) && l->role == ISO_LEASE_FOLLOWER)
		l->next_ns = 0;
	if (l->next_ns && now < l->next_ns)
		return l->role;
	l->next_ns = now + (uint64_t)l->renew_ms * 1000000u;
	if (l->role == ISO_LEASE_FOLLOWER) {
		/* A follower only reads while someone leads: the upsert locks the
		 * row even when its WHERE refuses it, and would make the leader's
		 * fenced transactions wait. */
		read_leader(l);
		if (l->leader_url[0])
			return l->role;
	}
	r = try_acquire(l, &term, &err);
	if (l->role == ISO_LEASE_LEADER) {
		if (r == 1 && term == l->term) {
			l->renewed_ns = now;
		} else if (r == 1) {
			/* Ours again, but after it expired: someone may have led in
			 * between, so what this process holds in memory is stale. */
			iso_lease_depose(l, "the lease expired before it was renewed");
		} else if (r == 0) {
			iso_lease_depose(l, "another isostackd holds the lease");
		} else if (now - l->renewed_ns + (uint64_t)l->renew_ms * 1000000u >=
		           (uint64_t)l->lease_ms * 1000000u) {
			/* Transient errors are retried while the lease lasts; one
			 * renew before its end the leader stops acting (fail closed). */
			iso_log(ISO_LOG_ERR, "lease_renew_failed", "error=\"%s\"", err.message);
			iso_lease_depose(l, "the lease could not be renewed in time");
		} else {
			iso_log(ISO_LOG_WARN, "lease_renew_failed", "error=\"%s\"", err.message);
		}
		return l->role;
	}
	if (r == 1)
		become_leader(l, term, now);
	else if (r < 0)
		iso_log(ISO_LOG_WARN, "lease_acquire_failed", "error=\"%s\"", err.message);
	return l->role;
}

void iso_lease_release(struct iso_lease *l)
{
	char term[24];
	const char *vals[2] = {l->holder, term};
	_cleanup_pgres_ PGresult *res = NULL;
	struct iso_error err = {0};

	if (l->role != ISO_LEASE_LEADER)
		return;
	snprintf(term, sizeof(term), "%lld", (long long)l->term);
	if (lease_query(l, SQL_RELEASE, 2, vals, "release", &res, &err) < 0)
		iso_log(ISO_LOG_WARN, "lease_release_failed", "error=\"%s\"", err.message);
	else
		iso_log(ISO_LOG_INFO, "leader_released", "term=%lld", (long long)l->term);
	l->role = ISO_LEASE_FOLLOWER;
}

enum iso_lease_role iso_lease_role(const struct iso_lease *l)
{
	return l->role;
}

bool iso_lease_holds(const struct iso_lease *l)
{
	return l->role == ISO_LEASE_LEADER &&
	       iso_mono_ns() - l->renewed_ns < (uint64_t)l->lease_ms * 1000000u;
}

int64_t iso_lease_term(const struct iso_lease *l)
{
	return l->role == ISO_LEASE_LEADER ? l->term : l->leader_term;
}

const char *iso_lease_leader_url(const struct iso_lease *l)
{
	return l->leader_url;
}

/* pg_schema.c: the PostgreSQL schema as an ordered list of migrations, and
 * the code that brings a database up to date, under the same rules as
 * sqlite_schema.c: a released migration is never edited, a change is a new
 * entry at the end, version N means migrations[0..N-1] were applied, each in
 * its own transaction with its schema_version row, and a database newer
 * than this binary is refused. Migration 1 is the SQLite schema as it stands
 * at its 6th version (the PostgreSQL backend started there). Differences
 * that keep the two backends' semantics the same: every text column sorts
 * and compares bytewise (COLLATE "C", as SQLite's BINARY), ids come from
 * identity columns that never hand a deleted id out again (AUTOINCREMENT),
 * hashes and audit bodies are bytea. Several isostackd may open one
 * database at once: each migration runs under a transaction-scoped advisory
 * lock and reads the version again under it. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "store/pg_int.h"

#define T "TEXT COLLATE \"C\""

static const char *const migrations[] = {
    /* 1: the whole schema of SQLite version 6. */
    "CREATE TABLE meta ("
    "  key " T " PRIMARY KEY,"
    "  value " T " NOT NULL);"

    "CREATE TABLE tenants ("
    "  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  name " T " NOT NULL UNIQUE,"
    "  description " T " NOT NULL DEFAULT '',"
    "  created_ms BIGINT NOT NULL,"
    "  updated_ms BIGINT NOT NULL,"
    "  org " T " NOT NULL DEFAULT '',"
    "  shares DOUBLE PRECISION NOT NULL DEFAULT 1,"
    "  isolation " T " NOT NULL DEFAULT 'shared',"
    "  tags " T " NOT NULL DEFAULT '',"
    "  max_pending BIGINT NOT NULL DEFAULT 0,"
    "  max_live BIGINT NOT NULL DEFAULT 0,"
    "  max_user_priority BIGINT NOT NULL DEFAULT 0,"
    "  writes_per_s BIGINT NOT NULL DEFAULT 0,"
    "  reads_per_s BIGINT NOT NULL DEFAULT 0);"

    /* As in SQLite: no foreign key on tenant_id (a deleted tenant's tokens
     * are kept, revoked); NULL tenant_id is a cluster-wide token. */
    "CREATE TABLE tokens ("
    "  id " T " PRIMARY KEY,"
    "  tenant_id BIGINT,"
    "  role " T " NOT NULL,"
    "  \"user\" " T " NOT NULL DEFAULT '',"
    "  description " T " NOT NULL DEFAULT '',"
    "  hash BYTEA NOT NULL,"
    "  created_ms BIGINT NOT NULL,"
    "  expires_ms BIGINT,"
    "  revoked_ms BIGINT,"
    "  node " T " NOT NULL DEFAULT '');"
    "CREATE INDEX tokens_tenant ON tokens(tenant_id, id);"

    "CREATE TABLE node_state ("
    "  name " T " PRIMARY KEY,"
    "  sched " T " NOT NULL);"

    "CREATE TABLE allocations ("
    "  id " T " PRIMARY KEY,"
    "  tenant_id BIGINT NOT NULL,"
    "  tenant " T " NOT NULL,"
    "  name " T " NOT NULL DEFAULT '',"
    "  state " T " NOT NULL,"
    "  reason " T " NOT NULL DEFAULT '',"
    "  members BIGINT NOT NULL,"
    "  whole BIGINT NOT NULL,"
    "  gpu_count BIGINT NOT NULL,"
    "  profile " T " NOT NULL DEFAULT '',"
    "  gpu_model " T " NOT NULL DEFAULT '',"
    "  cpus BIGINT NOT NULL,"
    "  memory_mib BIGINT NOT NULL,"
    "  pool " T " NOT NULL DEFAULT '',"
    "  owner " T " NOT NULL,"
    "  created_ms BIGINT NOT NULL,"
    "  updated_ms BIGINT NOT NULL,"
    "  project " T " NOT NULL DEFAULT '',"
    "  priority BIGINT NOT NULL DEFAULT 0,"
    "  isolation " T " NOT NULL DEFAULT '',"
    "  spread " T " NOT NULL DEFAULT '',"
    "  fail_on_preempt BIGINT NOT NULL DEFAULT 0,"
    "  duration_ms BIGINT NOT NULL DEFAULT 0,"
    "  started_ms BIGINT NOT NULL DEFAULT 0);"
    "CREATE INDEX allocations_created ON allocations(created_ms, id);"
    "CREATE INDEX allocations_tenant ON allocations(tenant_id, created_ms, id);"
    "CREATE INDEX allocations_live ON allocations(created_ms, id)"
    "  WHERE state NOT IN ('released', 'failed');"
    "CREATE INDEX allocations_live_tenant ON allocations(tenant_id, created_ms, id)"
    "  WHERE state NOT IN ('released', 'failed');"

    "CREATE TABLE alloc_members ("
    "  alloc_id " T " NOT NULL REFERENCES allocations(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL,"
    "  node " T " NOT NULL,"
    "  PRIMARY KEY (alloc_id, idx));"
    "CREATE TABLE alloc_slots ("
    "  alloc_id " T " NOT NULL REFERENCES allocations(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL,"
    "  member BIGINT NOT NULL,"
    "  gpu BIGINT NOT NULL,"
    "  whole BIGINT NOT NULL,"
    "  profile " T " NOT NULL DEFAULT '',"
    "  start BIGINT NOT NULL,"
    "  width BIGINT NOT NULL,"
    "  PRIMARY KEY (alloc_id, idx));"

    "CREATE TABLE audit_events ("
    "  seq BIGINT PRIMARY KEY,"
    "  tenant_id BIGINT NOT NULL DEFAULT 0,"
    "  body BYTEA NOT NULL,"
    "  leaf BYTEA NOT NULL);"
    "CREATE INDEX audit_events_tenant ON audit_events(tenant_id, seq);"
    "CREATE TABLE audit_heads ("
    "  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  size BIGINT NOT NULL,"
    "  root BYTEA NOT NULL,"
    "  time_ms BIGINT NOT NULL,"
    "  sig BYTEA NOT NULL);"

    "CREATE TABLE fabric_keys ("
    "  pkey INTEGER PRIMARY KEY CHECK (pkey BETWEEN 1 AND 32766),"
    "  tenant_id BIGINT NOT NULL DEFAULT 0,"
    "  released_ms BIGINT NOT NULL DEFAULT 0);"
    "CREATE TABLE fabric_ports ("
    "  node " T " NOT NULL,"
    "  vf INTEGER NOT NULL CHECK (vf >= -1),"
    "  tenant_id BIGINT NOT NULL,"
    "  PRIMARY KEY (node, vf));"

    "CREATE TABLE orgs ("
    "  name " T " PRIMARY KEY,"
    "  shares DOUBLE PRECISION NOT NULL DEFAULT 1,"
    "  created_ms BIGINT NOT NULL);"
    "CREATE TABLE projects ("
    "  tenant_id BIGINT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,"
    "  name " T " NOT NULL,"
    "  shares DOUBLE PRECISION NOT NULL DEFAULT 1,"
    "  PRIMARY KEY (tenant_id, name));"
    "CREATE TABLE quotas ("
    "  account " T " NOT NULL,"
    "  kind " T " NOT NULL,"
    "  guaranteed BIGINT NOT NULL,"
    "  borrow_limit BIGINT,"
    "  lend_limit BIGINT,"
    "  PRIMARY KEY (account, kind));"
    "CREATE TABLE usage_log ("
    "  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  account " T " NOT NULL,"
    "  usage " T " NOT NULL,"
    "  start_ms BIGINT NOT NULL,"
    "  end_ms BIGINT NOT NULL);"
    "CREATE INDEX usage_log_end ON usage_log(end_ms, id);"
    "CREATE TABLE gpu_faults ("
    "  node " T " NOT NULL,"
    "  gpu INTEGER NOT NULL,"
    "  xid INTEGER NOT NULL,"
    "  at_ms BIGINT NOT NULL,"
    "  PRIMARY KEY (node, gpu));",
    /* 2: the tenant's io_uring switch (0/1, as SQLite's; docs/sandbox.md);
     * existing tenants keep io_uring denied. */
    /* (in parentheses: one string of two literals, which clang's
     * -Wstring-concatenation would take for a missing comma) */
    ("ALTER TABLE tenants ADD COLUMN io_uring BIGINT NOT NULL DEFAULT 0"
     "  CHECK (io_uring IN (0, 1));"),
    /* 3: each head's signer's key id (8 bytes; docs/audit.md "Key ids and key
     * sets"); NULL for heads signed before, as SQLite's version 8. */
    "ALTER TABLE audit_heads ADD COLUMN key_id BYTEA;",
    /* 4: the create's Idempotency-Key and the SHA-256 of its request, NULL
     * when none, unique per tenant; as SQLite's version 9. */
    ("ALTER TABLE allocations ADD COLUMN idempotency_key " T ";"
     "ALTER TABLE allocations ADD COLUMN idempotency_hash " T ";"
     "CREATE UNIQUE INDEX allocations_idempotency ON allocations(idempotency_key, tenant_id)"
     "  WHERE idempotency_key IS NOT NULL;"),
    /* 5: per-allocation partitions, as SQLite's version 10 (docs/fabric.md). */
    ("ALTER TABLE tenants ADD COLUMN partition_mode BIGINT NOT NULL DEFAULT 0"
     "  CHECK (partition_mode IN (0, 1));"
     "ALTER TABLE fabric_keys ADD COLUMN alloc_id " T " NOT NULL DEFAULT '';"
     "ALTER TABLE fabric_ports ADD COLUMN alloc_id " T " NOT NULL DEFAULT '';"),
    /* 6: OpenStack Neutron, as SQLite's version 11 (docs/openstack.md). */
    ("CREATE TABLE neutron_projects ("
     "  project_id " T " PRIMARY KEY,"
     "  tenant_id BIGINT NOT NULL,"
     "  created_ms BIGINT NOT NULL);"
     "CREATE TABLE neutron_objects ("
     "  uuid " T " PRIMARY KEY,"
     "  kind BIGINT NOT NULL CHECK (kind IN (0, 1)),"
     "  domain " T " NOT NULL,"
     "  project_id " T " NOT NULL,"
     "  tenant_id BIGINT NOT NULL,"
     "  pkey BIGINT NOT NULL DEFAULT 0,"
     "  network " T " NOT NULL DEFAULT '',"
     "  host " T " NOT NULL DEFAULT '',"
     "  guid BIGINT NOT NULL DEFAULT 0,"
     "  updated_ms BIGINT NOT NULL);"),
};

/* Serialises migrations between processes opening one database. */
#define MIGRATION_LOCK "SELECT pg_advisory_xact_lock(7261535432105367601)"

int iso_pg_schema_version_known(void)
{
	return (int)ISO_ARRAY_SIZE(migrations);
}

static int run(struct pg_store *s, const char *sql, const char *op, struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res = PQexec(s->conn, sql);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
		if (primary)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: %s: %s", op,
			                     primary);
		return iso_pg_fail(s, op, err);
	}
	return 0;
}

static int read_version(struct pg_store *s, int64_t *version, struct iso_error *err)
{
	_cleanup_pgres_ PGresult *res =
	    PQexec(s->conn, "SELECT coalesce(max(version), 0) FROM schema_version");
	struct pg_row row;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return iso_pg_fail(s, "reading schema_version", err);
	iso_pg_row_init(&row, res, 0);
	*version = iso_pg_rd_i64(&row);
	return iso_pg_row_check(&row, "schema_version", "max", err);
}

static int check_not_newer(int64_t version, struct iso_error *err)
{
	int known = iso_pg_schema_version_known();

	if (version > known)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "PostgreSQL store schema version %" PRId64
		                     " is newer than this isostackd (knows %d); upgrade isostackd",
		                     version, known);
	if (version < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "PostgreSQL store schema version %" PRId64 " is invalid",
		                     version);
	return 0;
}

/* Applies what is missing up to `target` in one transaction under the lock.
 * Returns 1 when it applied migration `target`, 0 when it was there. */
static int apply_one(struct pg_store *s, int target, struct iso_error *err)
{
	int64_t version = 0;
	char op[64], record[128];
	int r;

	r = run(s, "BEGIN", "starting a migration", err);
	if (r < 0)
		return r;
	r = run(s, MIGRATION_LOCK, "taking the migration lock", err);
	if (r == 0)
		r = run(s,
		        "CREATE TABLE IF NOT EXISTS schema_version ("
		        "  version INTEGER PRIMARY KEY,"
		        "  applied_ms BIGINT NOT NULL)",
		        "creating schema_version", err);
	if (r == 0)
		r = read_version(s, &version, err);
	if (r == 0)
		r = check_not_newer(version, err);
	bool applied = r == 0 && version < target;
	if (applied) {
		snprintf(op, sizeof(op), "migration to schema version %d", target);
		r = run(s, migrations[target - 1], op, err);
		snprintf(record, sizeof(record),
		         "INSERT INTO schema_version(version, applied_ms) VALUES (%d, %" PRId64 ")",
		         target, iso_now_ms());
		if (r == 0)
			r = run(s, record, "recording schema version", err);
	}
	if (r == 0)
		r = run(s, "COMMIT", "committing a migration", err);
	if (r < 0)
		PQclear(PQexec(s->conn, "ROLLBACK"));
	return r < 0 ? r : applied;
}

int iso_pg_migrate(struct pg_store *s, struct iso_error *err)
{
	for (int target = 1; target <= iso_pg_schema_version_known(); target++) {
		int r = apply_one(s, target, err);
		if (r < 0)
			return r;
		if (r == 1)
			iso_log(ISO_LOG_INFO, "store_migrated", "backend=postgres version=%d",
			        target);
	}
	/* A database migrated by a newer binary is refused even when nothing
	 * was missing here. */
	int r = run(s, "BEGIN", "reading the schema version", err);
	int64_t version = 0;
	if (r == 0)
		r = read_version(s, &version, err);
	PQclear(PQexec(s->conn, "COMMIT"));
	return r < 0 ? r : check_not_newer(version, err);
}

/* sqlite_schema.c: the SQLite schema as an ordered list of migrations, and
 * the code that brings a database up to date. The rule: a migration, once
 * released, is never edited; a change is a new entry appended at the end.
 * Version N means migrations[0..N-1] have been applied, each in its own
 * transaction together with its schema_version row, so a crash leaves the
 * database at some whole version. A database newer than this binary is
 * refused rather than guessed at. Enum columns hold the names from model.c
 * (iso_role_name, iso_alloc_state_name, iso_node_sched_name); those names are
 * part of the on-disk format. */
#include <errno.h>
#include <string.h>

#include "store/sqlite_int.h"

static const char *const migrations[] = {
    /* 1: the initial schema. */
    "CREATE TABLE schema_version ("
    "  version INTEGER PRIMARY KEY,"
    "  applied_ms INTEGER NOT NULL);"

    "CREATE TABLE meta ("
    "  key TEXT PRIMARY KEY,"
    "  value TEXT NOT NULL);"

    /* AUTOINCREMENT: a deleted tenant's id is never handed out again, so
     * history that keeps the id (tokens, allocations) can never be mistaken
     * for a later tenant of the same name. */
    "CREATE TABLE tenants ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  name TEXT NOT NULL UNIQUE,"
    "  description TEXT NOT NULL DEFAULT '',"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL);"

    /* No foreign key on tenant_id on purpose: a deleted tenant's tokens are
     * revoked (token_revoke_tenant) and kept, still naming the tenant they
     * belonged to. NULL: a cluster-wide token. expires_ms/revoked_ms NULL:
     * never / live. */
    "CREATE TABLE tokens ("
    "  id TEXT PRIMARY KEY,"
    "  tenant_id INTEGER,"
    "  role TEXT NOT NULL,"
    "  user TEXT NOT NULL DEFAULT '',"
    "  description TEXT NOT NULL DEFAULT '',"
    "  hash BLOB NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  expires_ms INTEGER,"
    "  revoked_ms INTEGER);"
    "CREATE INDEX tokens_tenant ON tokens(tenant_id, id);"

    "CREATE TABLE node_state ("
    "  name TEXT PRIMARY KEY,"
    "  sched TEXT NOT NULL);"

    /* No foreign key to tenants either: terminal allocations outlive their
     * tenant as history (a tenant with live ones cannot be deleted). */
    "CREATE TABLE allocations ("
    "  id TEXT PRIMARY KEY,"
    "  tenant_id INTEGER NOT NULL,"
    "  tenant TEXT NOT NULL,"
    "  name TEXT NOT NULL DEFAULT '',"
    "  state TEXT NOT NULL,"
    "  reason TEXT NOT NULL DEFAULT '',"
    "  members INTEGER NOT NULL,"
    "  whole INTEGER NOT NULL,"
    "  gpu_count INTEGER NOT NULL,"
    "  profile TEXT NOT NULL DEFAULT '',"
    "  gpu_model TEXT NOT NULL DEFAULT '',"
    "  cpus INTEGER NOT NULL,"
    "  memory_mib INTEGER NOT NULL,"
    "  pool TEXT NOT NULL DEFAULT '',"
    "  owner TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL);"
    "CREATE INDEX allocations_created ON allocations(created_ms, id);"
    "CREATE INDEX allocations_tenant ON allocations(tenant_id, created_ms, id);"
    /* Partial indexes over live (non-terminal) allocations: the scheduler's
     * view and per-tenant quota counts stay cheap however long the history.
     * Queries must repeat this WHERE text exactly for SQLite to use them. */
    "CREATE INDEX allocations_live ON allocations(created_ms, id)"
    "  WHERE state NOT IN ('released', 'failed');"
    "CREATE INDEX allocations_live_tenant ON allocations(tenant_id, created_ms, id)"
    "  WHERE state NOT IN ('released', 'failed');"

    "CREATE TABLE alloc_members ("
    "  alloc_id TEXT NOT NULL REFERENCES allocations(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL,"
    "  node TEXT NOT NULL,"
    "  PRIMARY KEY (alloc_id, idx)) WITHOUT ROWID;"

    /* idx keeps the caller's slot order. */
    "CREATE TABLE alloc_slots ("
    "  alloc_id TEXT NOT NULL REFERENCES allocations(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL,"
    "  member INTEGER NOT NULL,"
    "  gpu INTEGER NOT NULL,"
    "  whole INTEGER NOT NULL,"
    "  profile TEXT NOT NULL DEFAULT '',"
    "  start INTEGER NOT NULL,"
    "  width INTEGER NOT NULL,"
    "  PRIMARY KEY (alloc_id, idx)) WITHOUT ROWID;",

    /* 2: the audit log. body is the event's canonical encoding and leaf its
     * RFC 6962 leaf hash; tenant_id only scopes listings (it is not hashed).
     * Heads are the signed tree heads. */
    "CREATE TABLE audit_events ("
    "  seq INTEGER PRIMARY KEY,"
    "  tenant_id INTEGER NOT NULL DEFAULT 0,"
    "  body BLOB NOT NULL,"
    "  leaf BLOB NOT NULL);"
    "CREATE INDEX audit_events_tenant ON audit_events(tenant_id, seq);"
    /* Heads are kept in signing order; sizes may repeat after an accepted
     * break (docs/audit.md), and no head is ever overwritten. */
    "CREATE TABLE audit_heads ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  size INTEGER NOT NULL,"
    "  root BLOB NOT NULL,"
    "  time_ms INTEGER NOT NULL,"
    "  sig BLOB NOT NULL);",

    /* 3: the fabric. Tenants' P_Keys and keys in quarantine (tenant_id 0),
     * and which tenant holds which VF (vf -1: the PF) of a node. */
    "CREATE TABLE fabric_keys ("
    "  pkey INTEGER PRIMARY KEY CHECK (pkey BETWEEN 1 AND 32766),"
    "  tenant_id INTEGER NOT NULL DEFAULT 0,"
    "  released_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE fabric_ports ("
    "  node TEXT NOT NULL,"
    "  vf INTEGER NOT NULL CHECK (vf >= -1),"
    "  tenant_id INTEGER NOT NULL,"
    "  PRIMARY KEY (node, vf)) WITHOUT ROWID;",

    /* 4: tenancy. Organisations and projects around tenants, quotas per
     * account and resource kind, the policy fields of tenants and
     * allocations, the usage of work that ended (fair share is recomputed
     * from it at start), and GPUs taken out of service by a fault. */
    "CREATE TABLE orgs ("
    "  name TEXT PRIMARY KEY,"
    "  shares REAL NOT NULL DEFAULT 1,"
    "  created_ms INTEGER NOT NULL);"
    "CREATE TABLE projects ("
    "  tenant_id INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  shares REAL NOT NULL DEFAULT 1,"
    "  PRIMARY KEY (tenant_id, name)) WITHOUT ROWID;"
    "ALTER TABLE tenants ADD COLUMN org TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE tenants ADD COLUMN shares REAL NOT NULL DEFAULT 1;"
    "ALTER TABLE tenants ADD COLUMN isolation TEXT NOT NULL DEFAULT 'shared';"
    "ALTER TABLE tenants ADD COLUMN tags TEXT NOT NULL DEFAULT '';"
    "CREATE TABLE quotas ("
    "  account TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  guaranteed INTEGER NOT NULL,"
    "  borrow_limit INTEGER,"
    "  lend_limit INTEGER,"
    "  PRIMARY KEY (account, kind)) WITHOUT ROWID;"
    "ALTER TABLE allocations ADD COLUMN project TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE allocations ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE allocations ADD COLUMN isolation TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE allocations ADD COLUMN spread TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE allocations ADD COLUMN fail_on_preempt INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE allocations ADD COLUMN duration_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE allocations ADD COLUMN started_ms INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE usage_log ("
    "  id INTEGER PRIMARY KEY,"
    "  account TEXT NOT NULL,"
    "  usage TEXT NOT NULL,"
    "  start_ms INTEGER NOT NULL,"
    "  end_ms INTEGER NOT NULL);"
    "CREATE TABLE gpu_faults ("
    "  node TEXT NOT NULL,"
    "  gpu INTEGER NOT NULL,"
    "  xid INTEGER NOT NULL,"
    "  at_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (node, gpu)) WITHOUT ROWID;",
    /* 2: per-tenant limits and request rates (0 = the daemon's default)
     * and the ceiling on the priority its tenant-users may ask for. */
    "ALTER TABLE tenants ADD COLUMN max_pending INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tenants ADD COLUMN max_live INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tenants ADD COLUMN max_user_priority INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tenants ADD COLUMN writes_per_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tenants ADD COLUMN reads_per_s INTEGER NOT NULL DEFAULT 0;",
    /* 3: a node-agent token names the node it acts for ('' for other roles). */
    "ALTER TABLE tokens ADD COLUMN node TEXT NOT NULL DEFAULT '';",
    /* 7: the tenant's io_uring switch for its members' seccomp filter
     * (docs/sandbox.md); existing tenants keep io_uring denied. */
    "ALTER TABLE tenants ADD COLUMN io_uring INTEGER NOT NULL DEFAULT 0;",
    /* 8: each head's signer's key id (8 bytes; docs/audit.md "Key ids and key
     * sets"); NULL for heads signed before, read as signed by the key of the
     * set that verifies them. */
    "ALTER TABLE audit_heads ADD COLUMN key_id BLOB;",
    /* 9: the create's Idempotency-Key and the SHA-256 of its request
     * (docs/api.md), NULL when none; unique per tenant. Key first, so that
     * one index serves a lookup by (tenant, key) and a cluster role's list
     * filtered by key alone. */
    ("ALTER TABLE allocations ADD COLUMN idempotency_key TEXT;"
     "ALTER TABLE allocations ADD COLUMN idempotency_hash TEXT;"
     "CREATE UNIQUE INDEX allocations_idempotency ON allocations(idempotency_key, tenant_id)"
     "  WHERE idempotency_key IS NOT NULL;"),
    /* 10: per-allocation partitions (docs/fabric.md): the tenant's mode
     * (0 per-tenant, 1 per-allocation; existing tenants keep one P_Key),
     * and the allocation that holds a P_Key or a VF ('' = the tenant). */
    ("ALTER TABLE tenants ADD COLUMN partition_mode INTEGER NOT NULL DEFAULT 0"
     "  CHECK (partition_mode IN (0, 1));"
     "ALTER TABLE fabric_keys ADD COLUMN alloc_id TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE fabric_ports ADD COLUMN alloc_id TEXT NOT NULL DEFAULT '';"),
    /* 11: OpenStack Neutron (docs/openstack.md): which isostack tenant owns
     * a Neutron project's networks, and the networks (kind 0, a P_Key) and
     * bound ports (kind 1, a GUID on a node) mlnx_sdn_assist sent. */
    ("CREATE TABLE neutron_projects ("
     "  project_id TEXT PRIMARY KEY,"
     "  tenant_id INTEGER NOT NULL,"
     "  created_ms INTEGER NOT NULL) WITHOUT ROWID;"
     "CREATE TABLE neutron_objects ("
     "  uuid TEXT PRIMARY KEY,"
     "  kind INTEGER NOT NULL CHECK (kind IN (0, 1)),"
     "  domain TEXT NOT NULL,"
     "  project_id TEXT NOT NULL,"
     "  tenant_id INTEGER NOT NULL,"
     "  pkey INTEGER NOT NULL DEFAULT 0,"
     "  network TEXT NOT NULL DEFAULT '',"
     "  host TEXT NOT NULL DEFAULT '',"
     "  guid INTEGER NOT NULL DEFAULT 0,"
     "  updated_ms INTEGER NOT NULL) WITHOUT ROWID;"),
};

int iso_sqlite_schema_version_known(void)
{
	return (int)ISO_ARRAY_SIZE(migrations);
}

static int exec(sqlite3 *db, const char *sql, const char *op, struct iso_error *err)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		iso_error_set(err, ISO_E_INTERNAL, NULL, "store: %s: %s", op,
		              msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

/* The applied version: 0 for a database without the schema_version table. */
static int read_version(sqlite3 *db, int64_t *version, struct iso_error *err)
{
	static const char has_table[] =
	    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'";
	static const char max_version[] = "SELECT coalesce(max(version), 0) FROM schema_version";
	sqlite3_stmt *st = NULL;
	int rc;

	*version = 0;
	rc = sqlite3_prepare_v2(db, has_table, -1, &st, NULL);
	if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 0) {
		sqlite3_finalize(st);
		return 0;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db, max_version, -1, &st, NULL);
	if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW ||
	    sqlite3_column_type(st, 0) != SQLITE_INTEGER) {
		int r = iso_sqlite_fail(db, "reading schema_version", err);
		sqlite3_finalize(st);
		return r;
	}
	*version = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return 0;
}

static int check_not_newer(int64_t version, const char *path, struct iso_error *err)
{
	int known = iso_sqlite_schema_version_known();

	if (version > known)
		return iso_error_set(
		    err, ISO_E_INTERNAL, NULL,
		    "%s schema version %lld is newer than this isostackd (knows %d); "
		    "upgrade isostackd",
		    path, (long long)version, known);
	if (version < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s schema version %lld is invalid",
		                     path, (long long)version);
	return 0;
}

static int record_version(sqlite3 *db, int version, struct iso_error *err)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	    db, "INSERT INTO schema_version(version, applied_ms) VALUES (?1, ?2)", -1, &st, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(st, 1, version);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, iso_now_ms());
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
	if (rc != SQLITE_OK) {
		int r = iso_sqlite_fail(db, "recording schema version", err);
		sqlite3_finalize(st);
		return r;
	}
	sqlite3_finalize(st);
	return 0;
}

/* Applies migration `target` (1-based) in its own transaction, unless another
 * process got there first: the version is read again under the write lock.
 * Returns 1 when it applied it, 0 when it was already there. */
static int apply_one(sqlite3 *db, const char *path, int target, struct iso_error *err)
{
	int64_t version;
	int r;
	char op[64];

	r = exec(db, "BEGIN IMMEDIATE", "starting a migration", err);
	if (r < 0)
		return r;
	r = read_version(db, &version, err);
	if (r == 0)
		r = check_not_newer(version, path, err);
	bool applied = r == 0 && version < target;
	if (applied) {
		snprintf(op, sizeof(op), "migration to schema version %d", target);
		r = exec(db, migrations[target - 1], op, err);
		if (r == 0)
			r = record_version(db, target, err);
	}
	if (r == 0)
		r = exec(db, "COMMIT", "committing a migration", err);
	if (r < 0 && !sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return r < 0 ? r : applied;
}

int iso_sqlite_migrate(sqlite3 *db, const char *path, struct iso_error *err)
{
	int64_t version;
	int r = read_version(db, &version, err);

	if (r < 0)
		return r;
	r = check_not_newer(version, path, err);
	if (r < 0)
		return r;
	for (int target = (int)version + 1; target <= iso_sqlite_schema_version_known(); target++) {
		r = apply_one(db, path, target, err);
		if (r < 0)
			return r;
		if (r == 1)
			iso_log(ISO_LOG_INFO, "store_migrated", "path=%s version=%d", path, target);
	}
	return 0;
}

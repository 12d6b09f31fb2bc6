/* sqlite.c: the embedded SQLite store: opening (a private 0600 file, WAL,
 * synchronous=FULL, foreign keys, quick_check, migrations), the cache of
 * prepared statements, transactions and the ops vtable. The row operations
 * live in sqlite_access.c and sqlite_alloc.c; see docs/store.md. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/sqlite_int.h"

#define TENANT_COLS                                                                        \
	"id, name, description, created_ms, updated_ms, org, shares, isolation, tags, "        \
	"max_pending, max_live, max_user_priority, writes_per_s, reads_per_s, io_uring, "        \
	"partition_mode"
#define TOKEN_COLS                                                                                 \
	"id, tenant_id, role, user, description, hash, created_ms, expires_ms, revoked_ms, node"
#define ALLOC_COLS                                                                                 \
	"id, tenant_id, tenant, name, state, reason, members, whole, gpu_count, profile, "         \
	"gpu_model, cpus, memory_mib, pool, owner, created_ms, updated_ms, project, priority, "    \
	"isolation, spread, fail_on_preempt, duration_ms, started_ms, idempotency_key, "           \
	"idempotency_hash"
#define LIVE "state NOT IN ('released', 'failed')" /* as in the partial indexes */
/* ?1, ?2: cursor (created_ms, id); ?3 owner or NULL; ?4 state or NULL;
 * ?5 tenant_id; ?6 limit (-1: none). */
#define ALLOC_LIST(extra)                                                                          \
	"SELECT " ALLOC_COLS " FROM allocations WHERE (created_ms, id) > (?1, ?2)"                 \
	" AND (?3 IS NULL OR owner = ?3) AND (?4 IS NULL OR state = ?4)" extra                     \
	" ORDER BY created_ms, id LIMIT ?6"

static const char *const stmt_sql[ST__COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_SAVEPOINT] = "SAVEPOINT iso_write",
    [ST_RELEASE] = "RELEASE iso_write",
    [ST_ROLLBACK_TO] = "ROLLBACK TO iso_write",
    [ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
    [ST_META_SET] = "INSERT INTO meta(key, value) VALUES (?1, ?2)"
                    " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    [ST_TENANT_INSERT] = "INSERT INTO tenants(name, description, created_ms, updated_ms, org,"
                         " shares, isolation, tags, max_pending, max_live, max_user_priority,"
                         " writes_per_s, reads_per_s, io_uring, partition_mode)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
                         " ?15)",
    [ST_TENANT_UPDATE] = "UPDATE tenants SET name = ?2, description = ?3, updated_ms = ?4,"
                         " org = ?5, shares = ?6, isolation = ?7, tags = ?8, max_pending = ?9,"
                         " max_live = ?10, max_user_priority = ?11, writes_per_s = ?12,"
                         " reads_per_s = ?13, io_uring = ?14, partition_mode = ?15 WHERE id = ?1",
    [ST_TENANT_DELETE] = "DELETE FROM tenants WHERE id = ?1",
    [ST_TENANT_BY_NAME] = "SELECT " TENANT_COLS " FROM tenants WHERE name = ?1",
    [ST_TENANT_BY_ID] = "SELECT " TENANT_COLS " FROM tenants WHERE id = ?1",
    [ST_TENANT_LIST] = "SELECT " TENANT_COLS " FROM tenants WHERE name > ?1"
                       " ORDER BY name LIMIT ?2",
    [ST_TENANT_EXISTS] = "SELECT 1 FROM tenants WHERE id = ?1",
    [ST_TOKEN_INSERT] = "INSERT INTO tokens(" TOKEN_COLS ")"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_TOKEN_GET] = "SELECT " TOKEN_COLS " FROM tokens WHERE id = ?1",
    [ST_TOKEN_LIST_ALL] = "SELECT " TOKEN_COLS " FROM tokens WHERE id > ?1"
                          " ORDER BY id LIMIT ?2",
    [ST_TOKEN_LIST_TENANT] = "SELECT " TOKEN_COLS " FROM tokens"
                             " WHERE tenant_id IS ?3 AND id > ?1 ORDER BY id LIMIT ?2",
    [ST_TOKEN_REVOKE] = "UPDATE tokens SET revoked_ms = coalesce(revoked_ms, ?2) WHERE id = ?1",
    [ST_TOKEN_REVOKE_TENANT] = "UPDATE tokens SET revoked_ms = ?2"
                               " WHERE tenant_id = ?1 AND revoked_ms IS NULL",
    [ST_TOKEN_COUNT_LIVE] = "SELECT count(*) FROM tokens WHERE tenant_id = ?1"
                            " AND revoked_ms IS NULL AND (expires_ms IS NULL OR expires_ms > ?2)",
    [ST_NODE_SET] = "INSERT INTO node_state(name, sched) VALUES (?1, ?2)"
                    " ON CONFLICT(name) DO UPDATE SET sched = excluded.sched",
    [ST_NODE_LIST] = "SELECT name, sched FROM node_state ORDER BY name",
    [ST_FKEY_PUT] = "INSERT INTO fabric_keys(pkey, tenant_id, released_ms, alloc_id)"
                    " VALUES (?1, ?2, ?3, ?4)"
                    " ON CONFLICT(pkey) DO UPDATE SET tenant_id = excluded.tenant_id,"
                    " released_ms = excluded.released_ms, alloc_id = excluded.alloc_id",
    [ST_FKEY_DELETE] = "DELETE FROM fabric_keys WHERE pkey = ?1",
    [ST_FKEY_LIST] = "SELECT pkey, tenant_id, released_ms, alloc_id FROM fabric_keys"
                     " ORDER BY pkey",
    [ST_FPORT_PUT] = "INSERT INTO fabric_ports(node, vf, tenant_id, alloc_id)"
                     " VALUES (?1, ?2, ?3, ?4)"
                     " ON CONFLICT(node, vf) DO UPDATE SET tenant_id = excluded.tenant_id,"
                     " alloc_id = excluded.alloc_id",
    [ST_FPORT_DELETE] = "DELETE FROM fabric_ports WHERE node = ?1 AND vf = ?2",
    [ST_FPORT_LIST] = "SELECT node, vf, tenant_id, alloc_id FROM fabric_ports"
                      " ORDER BY node, vf",
    [ST_NPROJ_PUT] = "INSERT INTO neutron_projects(project_id, tenant_id, created_ms)"
                     " VALUES (?1, ?2, ?3) ON CONFLICT(project_id) DO UPDATE SET"
                     " tenant_id = excluded.tenant_id, created_ms = excluded.created_ms",
    [ST_NPROJ_DELETE] = "DELETE FROM neutron_projects WHERE project_id = ?1",
    [ST_NPROJ_LIST] = "SELECT project_id, tenant_id, created_ms FROM neutron_projects"
                      " ORDER BY project_id",
    [ST_NOBJ_PUT] = "INSERT INTO neutron_objects(uuid, kind, domain, project_id, tenant_id,"
                    " pkey, network, host, guid, updated_ms)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                    " ON CONFLICT(uuid) DO UPDATE SET kind = excluded.kind,"
                    " domain = excluded.domain, project_id = excluded.project_id,"
                    " tenant_id = excluded.tenant_id, pkey = excluded.pkey,"
                    " network = excluded.network, host = excluded.host, guid = excluded.guid,"
                    " updated_ms = excluded.updated_ms",
    [ST_NOBJ_DELETE] = "DELETE FROM neutron_objects WHERE uuid = ?1",
    [ST_NOBJ_LIST] = "SELECT uuid, kind, domain, project_id, tenant_id, pkey, network, host,"
                     " guid, updated_ms FROM neutron_objects ORDER BY uuid",
    [ST_ALLOC_INSERT] = "INSERT INTO allocations(" ALLOC_COLS ") VALUES (?1, ?2, ?3, ?4, ?5,"
                        " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,"
                        " ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
    [ST_ALLOC_UPDATE] = "UPDATE allocations SET tenant_id = ?2, tenant = ?3, name = ?4,"
                        " state = ?5, reason = ?6, members = ?7, whole = ?8, gpu_count = ?9,"
                        " profile = ?10, gpu_model = ?11, cpus = ?12, memory_mib = ?13,"
                        " pool = ?14, owner = ?15, created_ms = ?16, updated_ms = ?17,"
                        " project = ?18, priority = ?19, isolation = ?20, spread = ?21,"
                        " fail_on_preempt = ?22, duration_ms = ?23, started_ms = ?24"
                        " WHERE id = ?1",
    [ST_ALLOC_GET] = "SELECT " ALLOC_COLS " FROM allocations WHERE id = ?1",
    [ST_ALLOC_CURSOR] = "SELECT created_ms FROM allocations WHERE id = ?1"
                        " AND (?2 = 0 OR tenant_id = ?2) AND (?3 IS NULL OR owner = ?3)",
    [ST_ALLOC_LIST] = ALLOC_LIST(""),
    [ST_ALLOC_LIST_TENANT] = ALLOC_LIST(" AND tenant_id = ?5"),
    [ST_ALLOC_LIST_LIVE] = ALLOC_LIST(" AND " LIVE),
    [ST_ALLOC_LIST_LIVE_TENANT] = ALLOC_LIST(" AND tenant_id = ?5 AND " LIVE),
    [ST_ALLOC_COUNT_LIVE] = "SELECT count(*) FROM allocations WHERE tenant_id = ?1 AND " LIVE,
    [ST_ALLOC_COUNT_LIVE_ALL] = "SELECT count(*) FROM allocations WHERE " LIVE,
    [ST_ALLOC_RECENT] = "SELECT " ALLOC_COLS " FROM allocations ORDER BY created_ms DESC, id DESC"
                        " LIMIT ?1",
    /* Both by the unique index allocations_idempotency (key, tenant_id). */
    [ST_ALLOC_BY_KEY] = "SELECT " ALLOC_COLS " FROM allocations"
                        " WHERE idempotency_key = ?1 AND tenant_id = ?2",
    [ST_ALLOC_LIST_KEY] = ALLOC_LIST(" AND idempotency_key = ?7 AND (?5 = 0 OR tenant_id = ?5)"
                                     " AND (?8 = 0 OR " LIVE ")"),
    [ST_MEMBER_INSERT] = "INSERT INTO alloc_members(alloc_id, idx, node) VALUES (?1, ?2, ?3)",
    [ST_MEMBER_DELETE] = "DELETE FROM alloc_members WHERE alloc_id = ?1",
    [ST_MEMBER_LIST] = "SELECT idx, node FROM alloc_members WHERE alloc_id = ?1 ORDER BY idx",
    [ST_SLOT_INSERT] = "INSERT INTO alloc_slots(alloc_id, idx, member, gpu, whole, profile,"
                       " start, width) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [ST_SLOT_DELETE] = "DELETE FROM alloc_slots WHERE alloc_id = ?1",
    [ST_SLOT_LIST] = "SELECT member, gpu, whole, profile, start, width FROM alloc_slots"
                     " WHERE alloc_id = ?1 ORDER BY idx",
    [ST_AUDIT_APPEND] =
        "INSERT INTO audit_events(seq, tenant_id, body, leaf) VALUES (?1, ?2, ?3, ?4)",
    [ST_AUDIT_COUNT] = "SELECT coalesce(max(seq) + 1, 0) FROM audit_events",
    [ST_AUDIT_SCAN] = "SELECT seq, tenant_id, body, leaf FROM audit_events WHERE seq > ?1"
                      " ORDER BY seq LIMIT ?2",
    [ST_AUDIT_SCAN_TENANT] = "SELECT seq, tenant_id, body, leaf FROM audit_events"
                             " WHERE tenant_id = ?3 AND seq > ?1 ORDER BY seq LIMIT ?2",
    [ST_AUDIT_HEAD_PUT] = "INSERT INTO audit_heads(size, root, time_ms, sig, key_id)"
                          " VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_AUDIT_HEAD_LATEST] = "SELECT size, root, time_ms, sig, key_id FROM audit_heads"
                             " ORDER BY id DESC LIMIT 1",
    [ST_AUDIT_HEAD_SCAN] = "SELECT size, root, time_ms, sig, key_id FROM audit_heads"
                           " ORDER BY id",
};

/* ---- transactions ---- */

static int step_done(struct sqlite_store *s, enum sqlite_stmt_id id)
{
	_cleanup_stmt_ sqlite3_stmt *st = s->st[id];

	return sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
}

static int sqlite_begin(struct iso_store *is, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);

	if (s->in_tx || !sqlite3_get_autocommit(s->db)) {
		iso_error_set(err, ISO_E_INTERNAL, NULL,
		              "store: begin: a transaction is already open (nested begin)");
		return -EBUSY;
	}
	if (step_done(s, ST_BEGIN) < 0)
		return iso_sqlite_fail(s->db, "begin", err);
	s->in_tx = true;
	return 0;
}

static void sqlite_rollback(struct iso_store *is)
{
	struct sqlite_store *s = sqlite_store_of(is);

	s->in_tx = false;
	if (sqlite3_get_autocommit(s->db))
		return; /* nothing open (or SQLite already rolled it back) */
	if (step_done(s, ST_ROLLBACK) < 0)
		iso_log(ISO_LOG_ERR, "store_rollback_failed", "error=\"%s\"",
		        sqlite3_errmsg(s->db));
}

/* A failed commit rolls back, so that an error always means nothing changed. */
static int sqlite_commit(struct iso_store *is, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	int r;

	if (!s->in_tx)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: commit: no transaction is open");
	if (step_done(s, ST_COMMIT) == 0) {
		s->in_tx = false;
		return 0;
	}
	r = iso_sqlite_fail(s->db, "commit", err);
	sqlite_rollback(is);
	return r;
}

int iso_sqlite_savepoint(struct sqlite_store *s, struct iso_error *err)
{
	if (step_done(s, ST_SAVEPOINT) < 0)
		return iso_sqlite_fail(s->db, "savepoint", err);
	return 0;
}

int iso_sqlite_release(struct sqlite_store *s, struct iso_error *err)
{
	if (step_done(s, ST_RELEASE) < 0) {
		int r = iso_sqlite_fail(s->db, "release savepoint", err);
		iso_sqlite_rollback_to(s);
		return r;
	}
	return 0;
}

void iso_sqlite_rollback_to(struct sqlite_store *s)
{
	/* Errors ignored on purpose: when SQLite has already rolled the whole
	 * transaction back the savepoint is gone, which is the goal anyway. */
	step_done(s, ST_ROLLBACK_TO);
	step_done(s, ST_RELEASE);
	if (!s->in_tx && !sqlite3_get_autocommit(s->db))
		step_done(s, ST_ROLLBACK);
}

/* ---- open and close ---- */

static void sqlite_close(struct iso_store *is)
{
	struct sqlite_store *s = sqlite_store_of(is);

	if (s->in_tx)
		iso_log(ISO_LOG_WARN, "store_close_in_tx", "msg=\"open transaction rolled back\"");
	for (int i = 0; i < ST__COUNT; i++)
		sqlite3_finalize(s->st[i]);
	if (sqlite3_close(s->db) != SQLITE_OK)
		iso_log(ISO_LOG_ERR, "store_close_failed", "error=\"%s\"", sqlite3_errmsg(s->db));
	free(s);
}

/* Makes a new directory entry durable: SQLite syncs the directory for the
 * WAL it creates, not for a database file created here. */
static int sync_parent_dir(const char *path, struct iso_error *err)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int fd, r;

	if (!slash)
		iso_strlcpy(dir, ".", sizeof(dir));
	else if (slash == path)
		iso_strlcpy(dir, "/", sizeof(dir));
	else if ((size_t)(slash - path) < sizeof(dir))
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		return iso_error_set(err, ISO_E_INVALID, "path", "store path is too long");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "store: syncing directory %s: %s", dir,
		                  strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	close(fd);
	return 0;
}

/* Creates the database file 0600 when missing (whatever the umask), and
 * takes group and other bits off an existing one and its WAL side files: the
 * store holds token hashes. */
static int make_private(const char *path, struct iso_error *err)
{
	static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd >= 0) {
		int r = fchmod(fd, 0600);
		int e = errno;
		close(fd);
		if (r < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: chmod %s: %s", path,
			                     strerror(e));
		return sync_parent_dir(path, err);
	}
	if (errno != EEXIST)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: creating %s: %s", path,
		                     strerror(errno));
	for (size_t i = 0; i < ISO_ARRAY_SIZE(suffixes); i++) {
		char file[4096];
		struct stat sb;

		if (snprintf(file, sizeof(file), "%s%s", path, suffixes[i]) >= (int)sizeof(file))
			return iso_error_set(err, ISO_E_INVALID, "path", "store path is too long");
		if (stat(file, &sb) < 0 || !(sb.st_mode & 077))
			continue;
		if (chmod(file, sb.st_mode & 0700) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL,
			                     "store: %s is open to group or others (mode %04o) and "
			                     "cannot be restricted: %s",
			                     file, (unsigned)(sb.st_mode & 07777), strerror(errno));
		iso_log(ISO_LOG_WARN, "store_mode_restricted", "file=%s old_mode=%04o", file,
		        (unsigned)(sb.st_mode & 07777));
	}
	return 0;
}

/* Runs a pragma and copies the first column of its first row. */
static int pragma(sqlite3 *db, const char *sql, char *out, size_t size)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			const unsigned char *t = sqlite3_column_text(st, 0);
			iso_strlcpy(out, t ? (const char *)t : "", size);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_DONE) {
			iso_strlcpy(out, "", size);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(st);
	return rc;
}

/* Sets a pragma and checks that it took: a build or file system that cannot
 * give WAL, full sync or foreign keys is refused, not run with less. */
static int pragma_expect(sqlite3 *db, const char *path, const char *set, const char *get,
                         const char *want, struct iso_error *err)
{
	char got[64];

	if (pragma(db, set, got, sizeof(got)) != SQLITE_OK ||
	    pragma(db, get, got, sizeof(got)) != SQLITE_OK)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: opening %s: %s: %s", path,
		                     set, sqlite3_errmsg(db));
	if (strcmp(got, want) != 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: opening %s: %s did not take (got \"%s\")", path, set,
		                     got);
	return 0;
}

static int configure(sqlite3 *db, const char *path, struct iso_error *err)
{
	char result[128];
	int r;

	sqlite3_busy_timeout(db, 5000);
	/* Schema objects cannot call functions with side effects. */
	if (pragma(db, "PRAGMA trusted_schema = OFF", result, sizeof(result)) != SQLITE_OK)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: opening %s: %s", path,
		                     sqlite3_errmsg(db));
	r = pragma_expect(db, path, "PRAGMA journal_mode = WAL", "PRAGMA journal_mode", "wal", err);
	if (r == 0)
		r = pragma_expect(db, path, "PRAGMA synchronous = FULL", "PRAGMA synchronous", "2",
		                  err);
	if (r == 0)
		r = pragma_expect(db, path, "PRAGMA foreign_keys = ON", "PRAGMA foreign_keys", "1",
		                  err);
	if (r < 0)
		return r;
	if (pragma(db, "PRAGMA quick_check", result, sizeof(result)) != SQLITE_OK)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: quick_check of %s: %s",
		                     path, sqlite3_errmsg(db));
	if (strcmp(result, "ok") != 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: %s failed PRAGMA quick_check (%s); the database is "
		                     "damaged: restore it from a backup",
		                     path, result);
	return 0;
}

static int prepare_all(struct sqlite_store *s, struct iso_error *err)
{
	for (int i = 0; i < ST__COUNT; i++)
		if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i],
		                       NULL) != SQLITE_OK)
			return iso_error_set(err, ISO_E_INTERNAL, NULL,
			                     "store: preparing statement %d: %s", i,
			                     sqlite3_errmsg(s->db));
	return 0;
}

/* Group commit: WAL with synchronous=NORMAL appends a commit's frames to the
 * WAL without syncing it (a checkpoint still syncs the WAL first and the
 * database after); sync then flushes the WAL file through SQLite's own VFS,
 * which is what synchronous=FULL does at every commit. One flush covers
 * every commit before it, so a batch of commits costs one fsync. */
static int sqlite_set_group_commit(struct iso_store *is, bool on, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);

	if (s->in_tx)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: group commit: a transaction is open");
	return pragma_expect(s->db, "the store",
	                     on ? "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL",
	                     "PRAGMA synchronous", on ? "1" : "2", err);
}

static int sqlite_sync(struct iso_store *is, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	sqlite3_file *wal = NULL;
	int rc;

	rc = sqlite3_file_control(s->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
	if (rc != SQLITE_OK)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: sync: no WAL file: %s",
		                     sqlite3_errstr(rc));
	if (!wal || !wal->pMethods)
		return 0; /* no WAL open: nothing was written through it */
	rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
	if (rc != SQLITE_OK)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: sync of the WAL: %s",
		                     sqlite3_errstr(rc));
	return 0;
}

static const struct iso_store_ops sqlite_ops = {
    .name = "sqlite",
    .close = sqlite_close,
    .begin = sqlite_begin,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .meta_get = iso_sqlite_meta_get,
    .meta_set = iso_sqlite_meta_set,
    .tenant_insert = iso_sqlite_tenant_insert,
    .tenant_update = iso_sqlite_tenant_update,
    .tenant_delete = iso_sqlite_tenant_delete,
    .tenant_get_by_name = iso_sqlite_tenant_get_by_name,
    .tenant_get_by_id = iso_sqlite_tenant_get_by_id,
    .tenant_list = iso_sqlite_tenant_list,
    .token_insert = iso_sqlite_token_insert,
    .token_get = iso_sqlite_token_get,
    .token_list = iso_sqlite_token_list,
    .token_revoke = iso_sqlite_token_revoke,
    .token_revoke_tenant = iso_sqlite_token_revoke_tenant,
    .node_state_set = iso_sqlite_node_state_set,
    .node_state_list = iso_sqlite_node_state_list,
    .fabric_key_put = iso_sqlite_fabric_key_put,
    .fabric_key_delete = iso_sqlite_fabric_key_delete,
    .fabric_key_list = iso_sqlite_fabric_key_list,
    .fabric_port_put = iso_sqlite_fabric_port_put,
    .fabric_port_delete = iso_sqlite_fabric_port_delete,
    .fabric_port_list = iso_sqlite_fabric_port_list,
    .neutron_project_put = iso_sqlite_neutron_project_put,
    .neutron_project_delete = iso_sqlite_neutron_project_delete,
    .neutron_project_list = iso_sqlite_neutron_project_list,
    .neutron_object_put = iso_sqlite_neutron_object_put,
    .neutron_object_delete = iso_sqlite_neutron_object_delete,
    .neutron_object_list = iso_sqlite_neutron_object_list,
    .org_put = iso_sqlite_org_put,
    .org_delete = iso_sqlite_org_delete,
    .org_list = iso_sqlite_org_list,
    .project_put = iso_sqlite_project_put,
    .project_delete = iso_sqlite_project_delete,
    .project_list = iso_sqlite_project_list,
    .quota_put = iso_sqlite_quota_put,
    .quota_delete = iso_sqlite_quota_delete,
    .account_forget = iso_sqlite_account_forget,
    .token_count_live = iso_sqlite_token_count_live,
    .quota_list = iso_sqlite_quota_list,
    .usage_append = iso_sqlite_usage_append,
    .usage_list = iso_sqlite_usage_list,
    .gpu_fault_put = iso_sqlite_gpu_fault_put,
    .gpu_fault_delete = iso_sqlite_gpu_fault_delete,
    .gpu_fault_list = iso_sqlite_gpu_fault_list,
    .alloc_insert = iso_sqlite_alloc_insert,
    .alloc_update = iso_sqlite_alloc_update,
    .alloc_get = iso_sqlite_alloc_get,
    .alloc_list = iso_sqlite_alloc_list,
    .alloc_count_live = iso_sqlite_alloc_count_live,
    .alloc_recent = iso_sqlite_alloc_recent,
    .alloc_get_by_key = iso_sqlite_alloc_get_by_key,
    .audit_append = iso_sqlite_audit_append,
    .audit_count = iso_sqlite_audit_count,
    .audit_scan = iso_sqlite_audit_scan,
    .audit_head_put = iso_sqlite_audit_head_put,
    .audit_head_latest = iso_sqlite_audit_head_latest,
    .audit_head_scan = iso_sqlite_audit_head_scan,
    .set_group_commit = sqlite_set_group_commit,
    .sync = sqlite_sync,
};

int iso_store_open_sqlite(const char *path, struct iso_store **out, struct iso_error *err)
{
	struct sqlite_store *s;
	int rc, r;

	*out = NULL;
	if (!path || !*path)
		return iso_error_set(err, ISO_E_INVALID, "path", "store path is empty");
	r = make_private(path, err);
	if (r < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
	s->base.ops = &sqlite_ops;
	rc = sqlite3_open_v2(
	    path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "store: opening %s: %s", path,
		                  s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		goto fail;
	}
	r = configure(s->db, path, err);
	if (r == 0)
		r = iso_sqlite_migrate(s->db, path, err);
	if (r == 0)
		r = prepare_all(s, err);
	if (r < 0)
		goto fail;
	*out = &s->base;
	return 0;
fail:
	sqlite_close(&s->base);
	return r;
}

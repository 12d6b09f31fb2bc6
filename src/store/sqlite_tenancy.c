/* sqlite_tenancy.c: the durable state of tenancy policy: organisations and
 * projects around tenants, quotas per account and resource kind, the usage
 * of work that ended (so that fair share is rebuilt exactly at start: the
 * same history gives the same order), and GPUs out of service after a
 * fault. These are small, rarely written tables, so each call prepares its
 * statement rather than joining the cached statement table. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sqlite_int.h"

static void finalizep(sqlite3_stmt **st)
{
	sqlite3_finalize(*st);
}
#define _cleanup_finalize_ _cleanup_(finalizep)

static int prepare(struct sqlite_store *s, const char *sql, sqlite3_stmt **st, const char *op,
                   struct iso_error *err)
{
	if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
		return iso_sqlite_fail(s->db, op, err);
	return 0;
}

/* Runs a write whose parameters `bind` sets. */
#define WRITE(is, sql, op, binds)                                                                  \
	do {                                                                                       \
		struct sqlite_store *s_ = sqlite_store_of(is);                                     \
		_cleanup_finalize_ sqlite3_stmt *st = NULL;                                        \
		int r_ = prepare(s_, sql, &st, op, err);                                           \
		if (r_ < 0)                                                                        \
			return r_;                                                                 \
		if (binds)                                                                         \
			return iso_sqlite_fail(s_->db, op, err);                                   \
		if (sqlite3_step(st) != SQLITE_DONE)                                               \
			return iso_sqlite_fail(s_->db, op, err);                                   \
		return 0;                                                                          \
	} while (0)

static int bind_limit(sqlite3_stmt *st, int idx, int64_t v)
{
	return v == INT64_MAX ? sqlite3_bind_null(st, idx) : sqlite3_bind_int64(st, idx, v);
}

static int64_t rd_limit(struct iso_sqlite_row *row)
{
	if (sqlite3_column_type(row->st, row->col) == SQLITE_NULL) {
		row->col++;
		return INT64_MAX;
	}
	return iso_sqlite_rd_i64(row);
}

/* Reads every row of `sql` (after binding `bind_i64` to ?1 when >= 0) into
 * a growing array through `read_row`. */
static int list_rows(struct iso_store *is, const char *sql, int64_t bind_i64, size_t elem,
                     int (*read_row)(struct iso_sqlite_row *row, void *item), const char *table,
                     void **out, int *n, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_finalize_ sqlite3_stmt *st = NULL;
	_cleanup_free_ char *items = NULL;
	int count = 0, cap = 0, rc, r;

	*out = NULL;
	*n = 0;
	r = prepare(s, sql, &st, table, err);
	if (r < 0)
		return r;
	if (bind_i64 >= 0 && sqlite3_bind_int64(st, 1, bind_i64))
		return iso_sqlite_fail(s->db, table, err);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_sqlite_row row;
		void *item;

		if (iso_sqlite_grow((void **)&items, &cap, count, elem) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		item = items + (size_t)count * elem;
		memset(item, 0, elem);
		iso_sqlite_row_init(&row, st);
		read_row(&row, item);
		r = iso_sqlite_row_check(&row, table, "row", err);
		if (r < 0)
			return r;
		count++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, table, err);
	*out = ISO_TAKE(items);
	*n = count;
	return 0;
}

/* ---- organisations ---- */

int iso_sqlite_org_put(struct iso_store *is, const struct iso_org *o, struct iso_error *err)
{
	WRITE(is,
	      "INSERT INTO orgs(name, shares, created_ms) VALUES (?1, ?2, ?3)"
	      " ON CONFLICT(name) DO UPDATE SET shares = excluded.shares",
	      "organisation put",
	      BIND_FIELD(st, 1, o->name) || sqlite3_bind_double(st, 2, o->shares) ||
	          sqlite3_bind_int64(st, 3, o->created_ms));
}

int iso_sqlite_org_delete(struct iso_store *is, const char *name, struct iso_error *err)
{
	WRITE(is, "DELETE FROM orgs WHERE name = ?1", "organisation delete", BIND_STR(st, 1, name));
}

static int read_org(struct iso_sqlite_row *row, void *item)
{
	struct iso_org *o = item;

	RD_FIELD(row, o->name);
	o->shares = iso_sqlite_rd_double(row);
	o->created_ms = iso_sqlite_rd_i64(row);
	return 0;
}

int iso_sqlite_org_list(struct iso_store *is, struct iso_org **out, int *n, struct iso_error *err)
{
	return list_rows(is, "SELECT name, shares, created_ms FROM orgs ORDER BY name", -1,
	                 sizeof(**out), read_org, "orgs", (void **)out, n, err);
}

/* ---- projects ---- */

int iso_sqlite_project_put(struct iso_store *is, const struct iso_project *p, struct iso_error *err)
{
	WRITE(is,
	      "INSERT INTO projects(tenant_id, name, shares) VALUES (?1, ?2, ?3)"
	      " ON CONFLICT(tenant_id, name) DO UPDATE SET shares = excluded.shares",
	      "project put",
	      sqlite3_bind_int64(st, 1, p->tenant_id) || BIND_FIELD(st, 2, p->name) ||
	          sqlite3_bind_double(st, 3, p->shares));
}

int iso_sqlite_project_delete(struct iso_store *is, int64_t tenant_id, const char *name,
                              struct iso_error *err)
{
	WRITE(is, "DELETE FROM projects WHERE tenant_id = ?1 AND name = ?2", "project delete",
	      sqlite3_bind_int64(st, 1, tenant_id) || BIND_STR(st, 2, name));
}

static int read_project(struct iso_sqlite_row *row, void *item)
{
	struct iso_project *p = item;

	p->tenant_id = iso_sqlite_rd_i64(row);
	RD_FIELD(row, p->name);
	p->shares = iso_sqlite_rd_double(row);
	return 0;
}

int iso_sqlite_project_list(struct iso_store *is, struct iso_project **out, int *n,
                            struct iso_error *err)
{
	return list_rows(is,
	                 "SELECT tenant_id, name, shares FROM projects ORDER BY tenant_id, name",
	                 -1, sizeof(**out), read_project, "projects", (void **)out, n, err);
}

/* ---- quotas ---- */

int iso_sqlite_quota_put(struct iso_store *is, const struct iso_quota_row *q, struct iso_error *err)
{
	WRITE(is,
	      "INSERT INTO quotas(account, kind, guaranteed, borrow_limit, lend_limit)"
	      " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(account, kind) DO UPDATE SET"
	      " guaranteed = excluded.guaranteed, borrow_limit = excluded.borrow_limit,"
	      " lend_limit = excluded.lend_limit",
	      "quota put",
	      BIND_FIELD(st, 1, q->account) || BIND_FIELD(st, 2, q->kind) ||
	          sqlite3_bind_int64(st, 3, q->guaranteed) || bind_limit(st, 4, q->borrow_limit) ||
	          bind_limit(st, 5, q->lend_limit));
}

int iso_sqlite_quota_delete(struct iso_store *is, const char *account, const char *kind,
                            struct iso_error *err)
{
	WRITE(is, "DELETE FROM quotas WHERE account = ?1 AND (?2 IS NULL OR kind = ?2)",
	      "quota delete",
	      BIND_STR(st, 1, account) ||
	          (kind ? BIND_STR(st, 2, kind) : sqlite3_bind_null(st, 2)));
}

/* A deleted tenant's quotas and usage history, its projects' included, go
 * with it: a new tenant of the same name starts with neither. */
static int forget_quotas(struct iso_store *is, const char *tenant, struct iso_error *err)
{
	WRITE(is,
	      "DELETE FROM quotas WHERE account = ?1 OR "
	      "substr(account, 1, length(?1) + 1) = ?1 || '/'",
	      "account forget (quotas)", BIND_STR(st, 1, tenant));
}

static int forget_usage(struct iso_store *is, const char *tenant, struct iso_error *err)
{
	WRITE(is,
	      "DELETE FROM usage_log WHERE account = ?1 OR "
	      "substr(account, 1, length(?1) + 1) = ?1 || '/'",
	      "account forget (usage)", BIND_STR(st, 1, tenant));
}

int iso_sqlite_account_forget(struct iso_store *is, const char *tenant, struct iso_error *err)
{
	int r = forget_quotas(is, tenant, err);

	return r < 0 ? r : forget_usage(is, tenant, err);
}

static int read_quota(struct iso_sqlite_row *row, void *item)
{
	struct iso_quota_row *q = item;

	RD_FIELD(row, q->account);
	RD_FIELD(row, q->kind);
	q->guaranteed = iso_sqlite_rd_i64(row);
	q->borrow_limit = rd_limit(row);
	q->lend_limit = rd_limit(row);
	return 0;
}

int iso_sqlite_quota_list(struct iso_store *is, struct iso_quota_row **out, int *n,
                          struct iso_error *err)
{
	return list_rows(is,
	                 "SELECT account, kind, guaranteed, borrow_limit, lend_limit FROM quotas"
	                 " ORDER BY account, kind",
	                 -1, sizeof(**out), read_quota, "quotas", (void **)out, n, err);
}

/* ---- usage log ---- */

int iso_sqlite_usage_append(struct iso_store *is, const struct iso_usage_row *u,
                            struct iso_error *err)
{
	WRITE(is, "INSERT INTO usage_log(account, usage, start_ms, end_ms) VALUES (?1, ?2, ?3, ?4)",
	      "usage append",
	      BIND_FIELD(st, 1, u->account) || BIND_FIELD(st, 2, u->usage) ||
	          sqlite3_bind_int64(st, 3, u->start_ms) || sqlite3_bind_int64(st, 4, u->end_ms));
}

static int read_usage(struct iso_sqlite_row *row, void *item)
{
	struct iso_usage_row *u = item;

	RD_FIELD(row, u->account);
	RD_FIELD(row, u->usage);
	u->start_ms = iso_sqlite_rd_i64(row);
	u->end_ms = iso_sqlite_rd_i64(row);
	return 0;
}

int iso_sqlite_usage_list(struct iso_store *is, int64_t since_ms, struct iso_usage_row **out,
                          int *n, struct iso_error *err)
{
	return list_rows(is,
	                 "SELECT account, usage, start_ms, end_ms FROM usage_log"
	                 " WHERE end_ms >= ?1 ORDER BY end_ms, id",
	                 since_ms, sizeof(**out), read_usage, "usage_log", (void **)out, n, err);
}

/* ---- GPU faults ---- */

int iso_sqlite_gpu_fault_put(struct iso_store *is, const struct iso_gpu_fault *f,
                             struct iso_error *err)
{
	WRITE(is,
	      "INSERT INTO gpu_faults(node, gpu, xid, at_ms) VALUES (?1, ?2, ?3, ?4)"
	      " ON CONFLICT(node, gpu) DO UPDATE SET xid = excluded.xid, at_ms = excluded.at_ms",
	      "gpu fault put",
	      BIND_FIELD(st, 1, f->node) || sqlite3_bind_int(st, 2, f->gpu) ||
	          sqlite3_bind_int(st, 3, f->xid) || sqlite3_bind_int64(st, 4, f->at_ms));
}

int iso_sqlite_gpu_fault_delete(struct iso_store *is, const char *node, int gpu,
                                struct iso_error *err)
{
	WRITE(is, "DELETE FROM gpu_faults WHERE node = ?1 AND gpu = ?2", "gpu fault delete",
	      BIND_STR(st, 1, node) || sqlite3_bind_int(st, 2, gpu));
}

static int read_fault(struct iso_sqlite_row *row, void *item)
{
	struct iso_gpu_fault *f = item;

	RD_FIELD(row, f->node);
	f->gpu = iso_sqlite_rd_int(row, 0, 1 << 16);
	f->xid = iso_sqlite_rd_int(row, 0, 1 << 20);
	f->at_ms = iso_sqlite_rd_i64(row);
	return 0;
}

int iso_sqlite_gpu_fault_list(struct iso_store *is, struct iso_gpu_fault **out, int *n,
                              struct iso_error *err)
{
	return list_rows(is, "SELECT node, gpu, xid, at_ms FROM gpu_faults ORDER BY node, gpu", -1,
	                 sizeof(**out), read_fault, "gpu_faults", (void **)out, n, err);
}

/* pg_tenancy.c: the PostgreSQL rows of the fabric (tenants' P_Keys, keys in
 * quarantine, VFs per tenant) and of tenancy policy (organisations,
 * projects, quotas, the usage log, GPUs out of service), with the answers of
 * sqlite_fabric.c and sqlite_tenancy.c. Puts are upserts; deletes of a
 * missing row are not errors; lists return every row in key order. A put
 * that a constraint refuses (a P_Key out of range, a project of a missing
 * tenant) runs in a savepoint, so the caller's transaction survives it as it
 * does in SQLite. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "store/pg_int.h"

/* One write in a savepoint (or its own transaction outside one). */
static int guarded(struct pg_store *s, const char *sql, struct pg_params *p, const char *op,
                   struct iso_error *err)
{
	int r = iso_pg_atomic_begin(s, op, err);

	if (r < 0)
		return r;
	r = iso_pg_exec(s, sql, p, op, err);
	if (r < 0) {
		iso_pg_atomic_abort(s);
		return r;
	}
	return iso_pg_atomic_end(s, op, err);
}

static void p_limit(struct pg_params *p, int64_t v)
{
	if (v == INT64_MAX)
		iso_pg_p_null(p);
	else
		iso_pg_p_i64(p, v);
}

/* ---- fabric ---- */

int iso_pg_fabric_key_put(struct iso_store *is, const struct iso_fabric_key_row *k,
                          struct iso_error *err)
{
	struct pg_params p = {0};

	iso_pg_p_i64(&p, k->pkey);
	iso_pg_p_i64(&p, k->tenant_id);
	iso_pg_p_i64(&p, k->released_ms);
	P_FIELD(&p, k->alloc_id);
	return guarded(pg_store_of(is),
	               "INSERT INTO fabric_keys(pkey, tenant_id, released_ms, alloc_id)"
	               " VALUES ($1::integer, $2::bigint, $3::bigint, $4::text)"
	               " ON CONFLICT (pkey) DO UPDATE SET tenant_id = excluded.tenant_id,"
	               " released_ms = excluded.released_ms, alloc_id = excluded.alloc_id",
	               &p, "fabric key put", err);
}

int iso_pg_fabric_key_delete(struct iso_store *is, int pkey, struct iso_error *err)
{
	struct pg_params p = {0};

	iso_pg_p_i64(&p, pkey);
	return iso_pg_exec(pg_store_of(is), "DELETE FROM fabric_keys WHERE pkey = $1::integer", &p,
	                   "fabric key delete", err);
}

static void read_key(struct pg_row *row, void *item)
{
	struct iso_fabric_key_row *k = item;

	k->pkey = iso_pg_rd_int(row, 1, 0x7ffe);
	k->tenant_id = iso_pg_rd_i64(row);
	k->released_ms = iso_pg_rd_i64(row);
	PRD_FIELD(row, k->alloc_id);
}

int iso_pg_fabric_key_list(struct iso_store *is, struct iso_fabric_key_row **out, int *n,
                           struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is),
	                   "SELECT pkey, tenant_id, released_ms, alloc_id FROM fabric_keys"
	                   " ORDER BY pkey",
	                   NULL, sizeof(**out), read_key, "fabric_keys", (void **)out, n, err);
}

int iso_pg_fabric_port_put(struct iso_store *is, const struct iso_fabric_port_row *pr,
                           struct iso_error *err)
{
	struct pg_params p = {0};

	P_FIELD(&p, pr->node);
	iso_pg_p_i64(&p, pr->vf);
	iso_pg_p_i64(&p, pr->tenant_id);
	P_FIELD(&p, pr->alloc_id);
	return guarded(pg_store_of(is),
	               "INSERT INTO fabric_ports(node, vf, tenant_id, alloc_id)"
	               " VALUES ($1::text, $2::integer, $3::bigint, $4::text)"
	               " ON CONFLICT (node, vf) DO UPDATE SET tenant_id = excluded.tenant_id,"
	               " alloc_id = excluded.alloc_id",
	               &p, "fabric port put", err);
}

int iso_pg_fabric_port_delete(struct iso_store *is, const char *node, int vf, struct iso_error *err)
{
	struct pg_params p = {0};

	P_STR(&p, node);
	iso_pg_p_i64(&p, vf);
	return iso_pg_exec(pg_store_of(is),
	                   "DELETE FROM fabric_ports WHERE node = $1::text AND vf = $2::integer",
	                   &p, "fabric port delete", err);
}

static void read_port(struct pg_row *row, void *item)
{
	struct iso_fabric_port_row *pr = item;

	PRD_FIELD(row, pr->node);
	pr->vf = iso_pg_rd_int(row, -1, 1 << 20);
	pr->tenant_id = iso_pg_rd_i64(row);
	PRD_FIELD(row, pr->alloc_id);
}

int iso_pg_fabric_port_list(struct iso_store *is, struct iso_fabric_port_row **out, int *n,
                            struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is),
	                   "SELECT node, vf, tenant_id, alloc_id FROM fabric_ports ORDER BY node, vf",
	                   NULL,
	                   sizeof(**out), read_port, "fabric_ports", (void **)out, n, err);
}

/* ---- organisations ---- */

int iso_pg_org_put(struct iso_store *is, const struct iso_org *o, struct iso_error *err)
{
	struct pg_params p = {0};

	P_FIELD(&p, o->name);
	iso_pg_p_double(&p, o->shares);
	iso_pg_p_i64(&p, o->created_ms);
	return iso_pg_exec(pg_store_of(is),
	                   "INSERT INTO orgs(name, shares, created_ms)"
	                   " VALUES ($1::text, $2::float8, $3::bigint)"
	                   " ON CONFLICT (name) DO UPDATE SET shares = excluded.shares",
	                   &p, "organisation put", err);
}

int iso_pg_org_delete(struct iso_store *is, const char *name, struct iso_error *err)
{
	struct pg_params p = {0};

	P_STR(&p, name);
	return iso_pg_exec(pg_store_of(is), "DELETE FROM orgs WHERE name = $1::text", &p,
	                   "organisation delete", err);
}

static void read_org(struct pg_row *row, void *item)
{
	struct iso_org *o = item;

	PRD_FIELD(row, o->name);
	o->shares = iso_pg_rd_double(row);
	o->created_ms = iso_pg_rd_i64(row);
}

int iso_pg_org_list(struct iso_store *is, struct iso_org **out, int *n, struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is),
	                   "SELECT name, shares, created_ms FROM orgs ORDER BY name", NULL,
	                   sizeof(**out), read_org, "orgs", (void **)out, n, err);
}

/* ---- projects ---- */

int iso_pg_project_put(struct iso_store *is, const struct iso_project *pj, struct iso_error *err)
{
	struct pg_params p = {0};

	iso_pg_p_i64(&p, pj->tenant_id);
	P_FIELD(&p, pj->name);
	iso_pg_p_double(&p, pj->shares);
	return guarded(pg_store_of(is),
	               "INSERT INTO projects(tenant_id, name, shares)"
	               " VALUES ($1::bigint, $2::text, $3::float8)"
	               " ON CONFLICT (tenant_id, name) DO UPDATE SET shares = excluded.shares",
	               &p, "project put", err);
}

int iso_pg_project_delete(struct iso_store *is, int64_t tenant_id, const char *name,
                          struct iso_error *err)
{
	struct pg_params p = {0};

	iso_pg_p_i64(&p, tenant_id);
	P_STR(&p, name);
	return iso_pg_exec(pg_store_of(is),
	                   "DELETE FROM projects WHERE tenant_id = $1::bigint AND name = $2::text",
	                   &p, "project delete", err);
}

static void read_project(struct pg_row *row, void *item)
{
	struct iso_project *pj = item;

	pj->tenant_id = iso_pg_rd_i64(row);
	PRD_FIELD(row, pj->name);
	pj->shares = iso_pg_rd_double(row);
}

int iso_pg_project_list(struct iso_store *is, struct iso_project **out, int *n,
                        struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is),
	                   "SELECT tenant_id, name, shares FROM projects ORDER BY tenant_id, name",
	                   NULL, sizeof(**out), read_project, "projects", (void **)out, n, err);
}

/* ---- quotas ---- */

int iso_pg_quota_put(struct iso_store *is, const struct iso_quota_row *q, struct iso_error *err)
{
	struct pg_params p = {0};

	P_FIELD(&p, q->account);
	P_FIELD(&p, q->kind);
	iso_pg_p_i64(&p, q->guaranteed);
	p_limit(&p, q->borrow_limit);
	p_limit(&p, q->lend_limit);
	return iso_pg_exec(
	    pg_store_of(is),
	    "INSERT INTO quotas(account, kind, guaranteed, borrow_limit, lend_limit)"
	    " VALUES ($1::text, $2::text, $3::bigint, $4::bigint, $5::bigint)"
	    " ON CONFLICT (account, kind) DO UPDATE SET"
	    " guaranteed = excluded.guaranteed, borrow_limit = excluded.borrow_limit,"
	    " lend_limit = excluded.lend_limit",
	    &p, "quota put", err);
}

int iso_pg_quota_delete(struct iso_store *is, const char *account, const char *kind,
                        struct iso_error *err)
{
	struct pg_params p = {0};

	P_STR(&p, account);
	if (kind)
		P_STR(&p, kind);
	else
		iso_pg_p_null(&p);
	return iso_pg_exec(pg_store_of(is),
	                   "DELETE FROM quotas WHERE account = $1::text"
	                   " AND ($2::text IS NULL OR kind = $2::text)",
	                   &p, "quota delete", err);
}

/* A deleted tenant's quotas and usage history, its projects' included, go
 * with it, both or neither. */
int iso_pg_account_forget(struct iso_store *is, const char *tenant, struct iso_error *err)
{
	struct pg_store *s = pg_store_of(is);
	struct pg_params p = {0};
	int r;

	P_STR(&p, tenant);
	r = iso_pg_atomic_begin(s, "account forget", err);
	if (r < 0)
		return r;
	r = iso_pg_exec(s,
	                "DELETE FROM quotas WHERE account = $1::text OR"
	                " substr(account, 1, length($1::text) + 1) = $1::text || '/'",
	                &p, "account forget (quotas)", err);
	if (r == 0)
		r = iso_pg_exec(s,
		                "DELETE FROM usage_log WHERE account = $1::text OR"
		                " substr(account, 1, length($1::text) + 1) = $1::text || '/'",
		                &p, "account forget (usage)", err);
	if (r < 0) {
		iso_pg_atomic_abort(s);
		return r;
	}
	return iso_pg_atomic_end(s, "account forget", err);
}

static void read_quota(struct pg_row *row, void *item)
{
	struct iso_quota_row *q = item;

	PRD_FIELD(row, q->account);
	PRD_FIELD(row, q->kind);
	q->guaranteed = iso_pg_rd_i64(row);
	q->borrow_limit = iso_pg_rd_limit(row);
	q->lend_limit = iso_pg_rd_limit(row);
}

int iso_pg_quota_list(struct iso_store *is, struct iso_quota_row **out, int *n,
                      struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is),
	                   "SELECT account, kind, guaranteed, borrow_limit, lend_limit FROM quotas"
	                   " ORDER BY account, kind",
	                   NULL, sizeof(**out), read_quota, "quotas", (void **)out, n, err);
}

/* ---- usage log ---- */

int iso_pg_usage_append(struct iso_store *is, const struct iso_usage_row *u, struct iso_error *err)
{
	struct pg_params p = {0};

	P_FIELD(&p, u->account);
	P_FIELD(&p, u->usage);
	iso_pg_p_i64(&p, u->start_ms);
	iso_pg_p_i64(&p, u->end_ms);
	return iso_pg_exec(pg_store_of(is),
	                   "INSERT INTO usage_log(account, usage, start_ms, end_ms)"
	                   " VALUES ($1::text, $2::text, $3::bigint, $4::bigint)",
	                   &p, "usage append", err);
}

static void read_usage(struct pg_row *row, void *item)
{
	struct iso_usage_row *u = item;

	PRD_FIELD(row, u->account);
	PRD_FIELD(row, u->usage);
	u->start_ms = iso_pg_rd_i64(row);
	u->end_ms = iso_pg_rd_i64(row);
}

int iso_pg_usage_list(struct iso_store *is, int64_t since_ms, struct iso_usage_row **out, int *n,
                      struct iso_error *err)
{
	struct pg_params p = {0};

	iso_pg_p_i64(&p, since_ms);
	return iso_pg_list(pg_store_of(is),
	                   "SELECT account, usage, start_ms, end_ms FROM usage_log"
	                   " WHERE end_ms >= $1::bigint ORDER BY end_ms, id",
	                   &p, sizeof(**out), read_usage, "usage_log", (void **)out, n, err);
}

/* ---- GPU faults ---- */

int iso_pg_gpu_fault_put(struct iso_store *is, const struct iso_gpu_fault *f, struct iso_error *err)
{
	struct pg_params p = {0};

	P_FIELD(&p, f->node);
	iso_pg_p_i64(&p, f->gpu);
	iso_pg_p_i64(&p, f->xid);
	iso_pg_p_i64(&p, f->at_ms);
	return iso_pg_exec(pg_store_of(is),
	                   "INSERT INTO gpu_faults(node, gpu, xid, at_ms)"
	                   " VALUES ($1::text, $2::integer, $3::integer, $4::bigint)"
	                   " ON CONFLICT (node, gpu) DO UPDATE SET xid = excluded.xid,"
	                   " at_ms = excluded.at_ms",
	                   &p, "gpu fault put", err);
}

int iso_pg_gpu_fault_delete(struct iso_store *is, const char *node, int gpu, struct iso_error *err)
{
	struct pg_params p = {0};

	P_STR(&p, node);
	iso_pg_p_i64(&p, gpu);
	return iso_pg_exec(pg_store_of(is),
	                   "DELETE FROM gpu_faults WHERE node = $1::text AND gpu = $2::integer", &p,
	                   "gpu fault delete", err);
}

static void read_fault(struct pg_row *row, void *item)
{
	struct iso_gpu_fault *f = item;

	PRD_FIELD(row, f->node);
	f->gpu = iso_pg_rd_int(row, 0, 1 << 16);
	f->xid = iso_pg_rd_int(row, 0, 1 << 20);
	f->at_ms = iso_pg_rd_i64(row);
}

int iso_pg_gpu_fault_list(struct iso_store *is, struct iso_gpu_fault **out, int *n,
                          struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is),
	                   "SELECT node, gpu, xid, at_ms FROM gpu_faults ORDER BY node, gpu", NULL,
	                   sizeof(**out), read_fault, "gpu_faults", (void **)out, n, err);
}

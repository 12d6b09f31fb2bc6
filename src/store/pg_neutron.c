/* pg_neutron.c: OpenStack Neutron's rows in PostgreSQL (docs/openstack.md),
 * with the answers of sqlite_neutron.c: puts are upserts, deletes of a
 * missing row are not errors, lists return every row in key order. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "store/pg_int.h"

int iso_pg_neutron_project_put(struct iso_store *is, const struct iso_neutron_project *np,
                               struct iso_error *err)
{
	struct pg_params p = {0};

	P_FIELD(&p, np->project_id);
	iso_pg_p_i64(&p, np->tenant_id);
	iso_pg_p_i64(&p, np->created_ms);
	return iso_pg_exec(pg_store_of(is),
	                   "INSERT INTO neutron_projects(project_id, tenant_id, created_ms)"
	                   " VALUES ($1::text, $2::bigint, $3::bigint)"
	                   " ON CONFLICT (project_id) DO UPDATE SET tenant_id = excluded.tenant_id,"
	                   " created_ms = excluded.created_ms",
	                   &p, "neutron project put", err);
}

int iso_pg_neutron_project_delete(struct iso_store *is, const char *project_id,
                                  struct iso_error *err)
{
	struct pg_params p = {0};

	P_STR(&p, project_id);
	return iso_pg_exec(pg_store_of(is),
	                   "DELETE FROM neutron_projects WHERE project_id = $1::text", &p,
	                   "neutron project delete", err);
}

static void read_project(struct pg_row *row, void *item)
{
	struct iso_neutron_project *np = item;

	PRD_FIELD(row, np->project_id);
	np->tenant_id = iso_pg_rd_i64(row);
	np->created_ms = iso_pg_rd_i64(row);
}

int iso_pg_neutron_project_list(struct iso_store *is, struct iso_neutron_project **out, int *n,
                                struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is),
	                   "SELECT project_id, tenant_id, created_ms FROM neutron_projects"
	                   " ORDER BY project_id",
	                   NULL, sizeof(**out), read_project, "neutron_projects", (void **)out, n,
	                   err);
}

int iso_pg_neutron_object_put(struct iso_store *is, const struct iso_neutron_object *o,
                              struct iso_error *err)
{
	struct pg_params p = {0};

	P_FIELD(&p, o->uuid);
	iso_pg_p_i64(&p, (int64_t)o->kind);
	P_FIELD(&p, o->domain);
	P_FIELD(&p, o->project_id);
	iso_pg_p_i64(&p, o->tenant_id);
	iso_pg_p_i64(&p, o->pkey);
	P_FIELD(&p, o->network);
	P_FIELD(&p, o->host);
	iso_pg_p_i64(&p, (int64_t)o->guid); /* the GUID's 64 bits as BIGINT */
	iso_pg_p_i64(&p, o->updated_ms);
	return iso_pg_exec(pg_store_of(is),
	                   "INSERT INTO neutron_objects(uuid, kind, domain, project_id, tenant_id,"
	                   " pkey, network, host, guid, updated_ms)"
	                   " VALUES ($1::text, $2::bigint, $3::text, $4::text, $5::bigint,"
	                   " $6::bigint, $7::text, $8::text, $9::bigint, $10::bigint)"
	                   " ON CONFLICT (uuid) DO UPDATE SET kind = excluded.kind,"
	                   " domain = excluded.domain, project_id = excluded.project_id,"
	                   " tenant_id = excluded.tenant_id, pkey = excluded.pkey,"
	                   " network = excluded.network, host = excluded.host,"
	                   " guid = excluded.guid, updated_ms = excluded.updated_ms",
	                   &p, "neutron object put", err);
}

int iso_pg_neutron_object_delete(struct iso_store *is, const char *uuid, struct iso_error *err)
{
	struct pg_params p = {0};

	P_STR(&p, uuid);
	return iso_pg_exec(pg_store_of(is), "DELETE FROM neutron_objects WHERE uuid = $1::text", &p,
	                   "neutron object delete", err);
}

static void read_object(struct pg_row *row, void *item)
{
	struct iso_neutron_object *o = item;

	PRD_FIELD(row, o->uuid);
	o->kind = (enum iso_neutron_kind)iso_pg_rd_int(row, 0, 1);
	PRD_FIELD(row, o->domain);
	PRD_FIELD(row, o->project_id);
	o->tenant_id = iso_pg_rd_i64(row);
	o->pkey = iso_pg_rd_int(row, 0, 0x7ffe);
	PRD_FIELD(row, o->network);
	PRD_FIELD(row, o->host);
	o->guid = (uint64_t)iso_pg_rd_i64(row);
	o->updated_ms = iso_pg_rd_i64(row);
}

int iso_pg_neutron_object_list(struct iso_store *is, struct iso_neutron_object **out, int *n,
                               struct iso_error *err)
{
	return iso_pg_list(pg_store_of(is),
	                   "SELECT uuid, kind, domain, project_id, tenant_id, pkey, network, host,"
	                   " guid, updated_ms FROM neutron_objects ORDER BY uuid",
	                   NULL, sizeof(**out), read_object, "neutron_objects", (void **)out, n,
	                   err);
}

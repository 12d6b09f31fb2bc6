/* sqlite_neutron.c: OpenStack Neutron's rows (docs/openstack.md): which
 * isostack tenant owns a Neutron project, and the networks and bound ports
 * networking-mlnx's mlnx_sdn_assist driver sent. They are read back at start
 * so that a restarted controller holds the same partitions and members, and
 * the driver's replays of its journal find them. */
#include <errno.h>
#include <string.h>

#include "sqlite_int.h"

int iso_sqlite_neutron_project_put(struct iso_store *is, const struct iso_neutron_project *p,
                                   struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_NPROJ_PUT];

	if (BIND_FIELD(st, 1, p->project_id) || sqlite3_bind_int64(st, 2, p->tenant_id) ||
	    sqlite3_bind_int64(st, 3, p->created_ms))
		return iso_sqlite_fail(s->db, "neutron project put", err);
	return iso_sqlite_exec_stmt(s->db, st, "neutron project put", err);
}

int iso_sqlite_neutron_project_delete(struct iso_store *is, const char *project_id,
                                      struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_NPROJ_DELETE];

	if (BIND_STR(st, 1, project_id))
		return iso_sqlite_fail(s->db, "neutron project delete", err);
	return iso_sqlite_exec_stmt(s->db, st, "neutron project delete", err);
}

int iso_sqlite_neutron_project_list(struct iso_store *is, struct iso_neutron_project **out, int *n,
                                    struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_NPROJ_LIST];
	_cleanup_free_ struct iso_neutron_project *items = NULL;
	int count = 0, cap = 0, rc, r;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_sqlite_row row;
		struct iso_neutron_project *p;

		if (iso_sqlite_grow((void **)&items, &cap, count, sizeof(*items)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		p = &items[count];
		memset(p, 0, sizeof(*p));
		iso_sqlite_row_init(&row, st);
		RD_FIELD(&row, p->project_id);
		p->tenant_id = iso_sqlite_rd_i64(&row);
		p->created_ms = iso_sqlite_rd_i64(&row);
		r = iso_sqlite_row_check(&row, "neutron_projects", p->project_id, err);
		if (r < 0)
			return r;
		count++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "neutron project list", err);
	*out = ISO_TAKE(items);
	*n = count;
	return 0;
}

int iso_sqlite_neutron_object_put(struct iso_store *is, const struct iso_neutron_object *o,
                                  struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_NOBJ_PUT];

	/* the GUID's 64 bits as SQLite's signed integer, read back the same */
	if (BIND_FIELD(st, 1, o->uuid) || sqlite3_bind_int(st, 2, (int)o->kind) ||
	    BIND_FIELD(st, 3, o->domain) || BIND_FIELD(st, 4, o->project_id) ||
	    sqlite3_bind_int64(st, 5, o->tenant_id) || sqlite3_bind_int(st, 6, o->pkey) ||
	    BIND_FIELD(st, 7, o->network) || BIND_FIELD(st, 8, o->host) ||
	    sqlite3_bind_int64(st, 9, (int64_t)o->guid) ||
	    sqlite3_bind_int64(st, 10, o->updated_ms))
		return iso_sqlite_fail(s->db, "neutron object put", err);
	return iso_sqlite_exec_stmt(s->db, st, "neutron object put", err);
}

int iso_sqlite_neutron_object_delete(struct iso_store *is, const char *uuid, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_NOBJ_DELETE];

	if (BIND_STR(st, 1, uuid))
		return iso_sqlite_fail(s->db, "neutron object delete", err);
	return iso_sqlite_exec_stmt(s->db, st, "neutron object delete", err);
}

int iso_sqlite_neutron_object_list(struct iso_store *is, struct iso_neutron_object **out, int *n,
                                   struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_NOBJ_LIST];
	_cleanup_free_ struct iso_neutron_object *items = NULL;
	int count = 0, cap = 0, rc, r;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_sqlite_row row;
		struct iso_neutron_object *o;

		if (iso_sqlite_grow((void **)&items, &cap, count, sizeof(*items)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		o = &items[count];
		memset(o, 0, sizeof(*o));
		iso_sqlite_row_init(&row, st);
		RD_FIELD(&row, o->uuid);
		o->kind = (enum iso_neutron_kind)iso_sqlite_rd_int(&row, 0, 1);
		RD_FIELD(&row, o->domain);
		RD_FIELD(&row, o->project_id);
		o->tenant_id = iso_sqlite_rd_i64(&row);
		o->pkey = iso_sqlite_rd_int(&row, 0, 0x7ffe);
		RD_FIELD(&row, o->network);
		RD_FIELD(&row, o->host);
		o->guid = (uint64_t)iso_sqlite_rd_i64(&row);
		o->updated_ms = iso_sqlite_rd_i64(&row);
		r = iso_sqlite_row_check(&row, "neutron_objects", o->uuid, err);
		if (r < 0)
			return r;
		count++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "neutron object list", err);
	*out = ISO_TAKE(items);
	*n = count;
	return 0;
}

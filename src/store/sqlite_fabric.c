/* sqlite_fabric.c: the fabric's durable state: which P_Key each tenant holds
 * and which keys sit in quarantine, and which VF (or PF) of a node each
 * tenant uses. Both must survive a restart exactly: a key handed out twice,
 * or a VF moved to another tenant while the old one's job still runs on it,
 * would join two tenants' partitions (docs/fabric.md). */
#include <errno.h>
#include <string.h>

#include "sqlite_int.h"

int iso_sqlite_fabric_key_put(struct iso_store *is, const struct iso_fabric_key_row *k,
                              struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_FKEY_PUT];

	if (sqlite3_bind_int(st, 1, k->pkey) || sqlite3_bind_int64(st, 2, k->tenant_id) ||
	    sqlite3_bind_int64(st, 3, k->released_ms) || BIND_FIELD(st, 4, k->alloc_id))
		return iso_sqlite_fail(s->db, "fabric key put", err);
	return iso_sqlite_exec_stmt(s->db, st, "fabric key put", err);
}

int iso_sqlite_fabric_key_delete(struct iso_store *is, int pkey, struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_FKEY_DELETE];

	if (sqlite3_bind_int(st, 1, pkey))
		return iso_sqlite_fail(s->db, "fabric key delete", err);
	return iso_sqlite_exec_stmt(s->db, st, "fabric key delete", err);
}

int iso_sqlite_fabric_key_list(struct iso_store *is, struct iso_fabric_key_row **out, int *n,
                               struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_FKEY_LIST];
	_cleanup_free_ struct iso_fabric_key_row *items = NULL;
	int count = 0, cap = 0, rc, r;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_sqlite_row row;
		struct iso_fabric_key_row *k;

		if (iso_sqlite_grow((void **)&items, &cap, count, sizeof(*items)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		k = &items[count];
		memset(k, 0, sizeof(*k));
		iso_sqlite_row_init(&row, st);
		k->pkey = iso_sqlite_rd_int(&row, 1, 0x7ffe);
		k->tenant_id = iso_sqlite_rd_i64(&row);
		k->released_ms = iso_sqlite_rd_i64(&row);
		RD_FIELD(&row, k->alloc_id);
		r = iso_sqlite_row_check(&row, "fabric_keys", "key", err);
		if (r < 0)
			return r;
		count++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "fabric key list", err);
	*out = ISO_TAKE(items);
	*n = count;
	return 0;
}

int iso_sqlite_fabric_port_put(struct iso_store *is, const struct iso_fabric_port_row *p,
                               struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_FPORT_PUT];

	if (BIND_FIELD(st, 1, p->node) || sqlite3_bind_int(st, 2, p->vf) ||
	    sqlite3_bind_int64(st, 3, p->tenant_id) || BIND_FIELD(st, 4, p->alloc_id))
		return iso_sqlite_fail(s->db, "fabric port put", err);
	return iso_sqlite_exec_stmt(s->db, st, "fabric port put", err);
}

int iso_sqlite_fabric_port_delete(struct iso_store *is, const char *node, int vf,
                                  struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_FPORT_DELETE];

	if (BIND_STR(st, 1, node) || sqlite3_bind_int(st, 2, vf))
		return iso_sqlite_fail(s->db, "fabric port delete", err);
	return iso_sqlite_exec_stmt(s->db, st, "fabric port delete", err);
}

int iso_sqlite_fabric_port_list(struct iso_store *is, struct iso_fabric_port_row **out, int *n,
                                struct iso_error *err)
{
	struct sqlite_store *s = sqlite_store_of(is);
	_cleanup_stmt_ sqlite3_stmt *st = s->st[ST_FPORT_LIST];
	_cleanup_free_ struct iso_fabric_port_row *items = NULL;
	int count = 0, cap = 0, rc, r;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct iso_sqlite_row row;
		struct iso_fabric_port_row *p;

		if (iso_sqlite_grow((void **)&items, &cap, count, sizeof(*items)) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: out of memory");
		p = &items[count];
		memset(p, 0, sizeof(*p));
		iso_sqlite_row_init(&row, st);
		RD_FIELD(&row, p->node);
		p->vf = iso_sqlite_rd_int(&row, -1, 1 << 20);
		p->tenant_id = iso_sqlite_rd_i64(&row);
		RD_FIELD(&row, p->alloc_id);
		r = iso_sqlite_row_check(&row, "fabric_ports", p->node, err);
		if (r < 0)
			return r;
		count++;
	}
	if (rc != SQLITE_DONE)
		return iso_sqlite_fail(s->db, "fabric port list", err);
	*out = ISO_TAKE(items);
	*n = count;
	return 0;
}

/* test_store.c: the SQLite store against a real database file in a private
 * temp directory: schema and migrations, file mode, every op of the vtable
 * with its error classes, transactions, corruption reporting, and a kill -9
 * durability check (every commit the store acknowledged is there after). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isostack/store.h"
#include "store/sqlite_int.h" /* iso_sqlite_schema_version_known() */

struct fx {
	char dir[64];
	char path[128];
	struct iso_store *s;
	struct iso_error err;
};

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(p);
}

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	strcpy(f->dir, "/tmp/iso-store-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
	assert_int_equal(iso_store_open_sqlite(f->path, &f->s, &f->err), 0);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	iso_store_close(f->s);
	nftw(f->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void fx_reopen(struct fx *f)
{
	iso_store_close(f->s);
	f->s = NULL;
	assert_int_equal(iso_store_open_sqlite(f->path, &f->s, &f->err), 0);
}

/* ---- a second, plain SQLite connection to look behind the store's back ---- */

static sqlite3 *raw_open(const char *path)
{
	sqlite3 *db = NULL;

	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	return db;
}

static void raw_exec(const char *path, const char *sql)
{
	sqlite3 *db = raw_open(path);
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

static void raw_text(const char *path, const char *sql, char *out, size_t size)
{
	sqlite3 *db = raw_open(path);
	sqlite3_stmt *st = NULL;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(out, size, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static int64_t raw_int(const char *path, const char *sql)
{
	char buf[32];

	raw_text(path, sql, buf, sizeof(buf));
	return strtoll(buf, NULL, 10);
}

/* ---- builders ---- */

static struct iso_tenant tenant(const char *name)
{
	struct iso_tenant t = {0};

	snprintf(t.name, sizeof(t.name), "%s", name);
	snprintf(t.description, sizeof(t.description), "the %s tenant", name);
	t.created_ms = 1000;
	t.updated_ms = 1000;
	return t;
}

static struct iso_token token(const char *id, int64_t tenant_id, enum iso_role role)
{
	struct iso_token t = {0};

	snprintf(t.id, sizeof(t.id), "%s", id);
	t.tenant_id = tenant_id;
	t.role = role;
	snprintf(t.user, sizeof(t.user), "user-%s", id);
	snprintf(t.description, sizeof(t.description), "token %s", id);
	for (int i = 0; i < ISO_TOKEN_HASH_LEN; i++)
		t.hash[i] = (uint8_t)(i * 7 + id[0]);
	t.created_ms = 2000;
	t.expires_ms = 0;
	return t;
}

/* An allocation of `members` members with `per` MIG slots each, all placed. */
static void make_alloc(struct iso_allocation *a, const char *id, int64_t tenant_id,
                       const char *tenant_name, const char *owner, enum iso_alloc_state st,
                       int64_t created_ms, int members, int per)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->id, sizeof(a->id), "%s", id);
	a->tenant_id = tenant_id;
	snprintf(a->tenant, sizeof(a->tenant), "%s", tenant_name);
	snprintf(a->name, sizeof(a->name), "job-%s", id);
	a->state = st;
	snprintf(a->reason, sizeof(a->reason), "%s", st == ISO_ALLOC_FAILED ? "driver error" : "");
	a->members = members;
	a->shape.whole = false;
	a->shape.gpu_count = per;
	snprintf(a->shape.profile, sizeof(a->shape.profile), "3g.40gb");
	snprintf(a->shape.gpu_model, sizeof(a->shape.gpu_model), "h100-80gb");
	a->shape.cpus = 8;
	a->shape.memory_mib = 65536;
	snprintf(a->shape.pool, sizeof(a->shape.pool), "gpu");
	snprintf(a->owner, sizeof(a->owner), "%s", owner);
	a->created_ms = created_ms;
	a->updated_ms = created_ms + 5;
	a->n_members = members;
	a->placed = calloc((size_t)members, sizeof(*a->placed));
	a->n_slots = members * per;
	a->slots = calloc((size_t)(members * per) + 1, sizeof(*a->slots));
	assert_non_null(a->placed);
	assert_non_null(a->slots);
	for (int m = 0; m < members; m++) {
		a->placed[m].index = m;
		snprintf(a->placed[m].node, sizeof(a->placed[m].node), "gpu-a%02d", m);
		for (int k = 0; k < per; k++) {
			struct iso_slot *sl = &a->slots[m * per + k];
			sl->member = m;
			sl->gpu = k;
			sl->whole = false;
			snprintf(sl->profile, sizeof(sl->profile), "3g.40gb");
			sl->start = 4 * (k % 2);
			sl->width = 4;
		}
	}
}

static void assert_alloc_equal(const struct iso_allocation *a, const struct iso_allocation *b)
{
	assert_string_equal(a->id, b->id);
	assert_int_equal(a->tenant_id, b->tenant_id);
	assert_string_equal(a->tenant, b->tenant);
	assert_string_equal(a->name, b->name);
	assert_int_equal(a->state, b->state);
	assert_string_equal(a->reason, b->reason);
	assert_int_equal(a->members, b->members);
	assert_int_equal(a->shape.whole, b->shape.whole);
	assert_int_equal(a->shape.gpu_count, b->shape.gpu_count);
	assert_string_equal(a->shape.profile, b->shape.profile);
	assert_string_equal(a->shape.gpu_model, b->shape.gpu_model);
	assert_int_equal(a->shape.cpus, b->shape.cpus);
	assert_int_equal(a->shape.memory_mib, b->shape.memory_mib);
	assert_string_equal(a->shape.pool, b->shape.pool);
	assert_string_equal(a->owner, b->owner);
	assert_int_equal(a->created_ms, b->created_ms);
	assert_int_equal(a->updated_ms, b->updated_ms);
	assert_int_equal(a->n_members, b->n_members);
	for (int i = 0; i < a->n_members; i++) {
		assert_int_equal(a->placed[i].index, b->placed[i].index);
		assert_string_equal(a->placed[i].node, b->placed[i].node);
	}
	assert_int_equal(a->n_slots, b->n_slots);
	for (int i = 0; i < a->n_slots; i++) {
		assert_int_equal(a->slots[i].member, b->slots[i].member);
		assert_int_equal(a->slots[i].gpu, b->slots[i].gpu);
		assert_int_equal(a->slots[i].whole, b->slots[i].whole);
		assert_string_equal(a->slots[i].profile, b->slots[i].profile);
		assert_int_equal(a->slots[i].start, b->slots[i].start);
		assert_int_equal(a->slots[i].width, b->slots[i].width);
	}
}

static void insert_alloc(struct fx *f, const char *id, int64_t tenant_id, const char *tname,
                         const char *owner, enum iso_alloc_state st, int64_t created_ms)
{
	struct iso_allocation a;

	make_alloc(&a, id, tenant_id, tname, owner, st, created_ms, 1, 1);
	assert_int_equal(f->s->ops->alloc_insert(f->s, &a, &f->err), 0);
	iso_allocation_clear(&a);
}

/* ---- open, schema, file ---- */

static void test_open_schema_wal_mode(void **state)
{
	struct fx *f = *state;
	char mode[16];
	struct stat sb;
	struct iso_tenant t = tenant("acme");

	assert_string_equal(f->s->ops->name, "sqlite");
	assert_int_equal(raw_int(f->path, "SELECT max(version) FROM schema_version"),
	                 iso_sqlite_schema_version_known());
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM schema_version"),
	                 iso_sqlite_schema_version_known());
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_schema WHERE type = "
	                                  "'table' AND name IN ('meta', 'tenants', 'tokens', "
	                                  "'node_state', 'allocations', 'alloc_members', "
	                                  "'alloc_slots')"),
	                 7);
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_schema WHERE type = "
	                                  "'index' AND name LIKE 'allocations_%'"),
	                 5);
	raw_text(f->path, "PRAGMA journal_mode", mode, sizeof(mode));
	assert_string_equal(mode, "wal");

	/* the file and, once written, its WAL side files are private */
	assert_int_equal(f->s->ops->tenant_insert(f->s, &t, &f->err), 0);
	assert_int_equal(stat(f->path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	char side[160];
	snprintf(side, sizeof(side), "%s-wal", f->path);
	assert_int_equal(stat(side, &sb), 0);
	assert_int_equal(sb.st_mode & 077, 0);
	snprintf(side, sizeof(side), "%s-shm", f->path);
	assert_int_equal(stat(side, &sb), 0);
	assert_int_equal(sb.st_mode & 077, 0);
}

static void test_open_mode_ignores_umask(void **state)
{
	struct fx *f = *state;
	char path[160];
	struct iso_store *s = NULL;
	struct stat sb;
	mode_t old = umask(0);

	snprintf(path, sizeof(path), "%s/other.db", f->dir);
	assert_int_equal(iso_store_open_sqlite(path, &s, &f->err), 0);
	umask(old);
	iso_store_close(s);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
}

static void test_open_tightens_loose_file(void **state)
{
	struct fx *f = *state;
	struct iso_store *s = NULL;
	struct stat sb;

	iso_store_close(f->s);
	f->s = NULL;
	assert_int_equal(chmod(f->path, 0644), 0);
	assert_int_equal(iso_store_open_sqlite(f->path, &s, &f->err), 0);
	f->s = s;
	assert_int_equal(stat(f->path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
}

static void test_reopen_idempotent(void **state)
{
	struct fx *f = *state;
	struct iso_tenant t = tenant("acme"), got;

	assert_int_equal(f->s->ops->tenant_insert(f->s, &t, &f->err), 0);
	fx_reopen(f);
	fx_reopen(f);
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM schema_version"),
	                 iso_sqlite_schema_version_known());
	assert_int_equal(f->s->ops->tenant_get_by_name(f->s, "acme", &got, &f->err), 0);
	assert_int_equal(got.id, t.id);
}

static void test_newer_schema_refused(void **state)
{
	struct fx *f = *state;
	struct iso_store *s = (struct iso_store *)0x1;
	struct iso_error err = {0};
	char sql[128], want[200];
	int known = iso_sqlite_schema_version_known();

	iso_store_close(f->s);
	f->s = NULL;
	snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%d, 1)", known + 1);
	raw_exec(f->path, sql);
	assert_int_equal(iso_store_open_sqlite(f->path, &s, &err), -EIO);
	assert_null(s);
	assert_int_equal(err.code, ISO_E_INTERNAL);
	snprintf(want, sizeof(want),
	         "state.db schema version %d is newer than this isostackd (knows %d); upgrade "
	         "isostackd",
	         known + 1, known);
	assert_non_null(strstr(err.message, want));
}

static void test_not_a_database(void **state)
{
	struct fx *f = *state;
	char path[160];
	struct iso_store *s = NULL;
	struct iso_error err = {0};
	FILE *fp;

	snprintf(path, sizeof(path), "%s/junk.db", f->dir);
	fp = fopen(path, "w");
	assert_non_null(fp);
	for (int i = 0; i < 512; i++)
		fputs("this is not sqlite ", fp);
	fclose(fp);
	assert_int_equal(iso_store_open_sqlite(path, &s, &err), -EIO);
	assert_null(s);
	assert_int_equal(err.code, ISO_E_INTERNAL);
	assert_non_null(strstr(err.message, path));
	assert_non_null(strstr(err.message, "not a database"));

	assert_int_equal(iso_store_open_sqlite("", &s, &err), -EINVAL);
	assert_string_equal(err.field, "path");
	snprintf(path, sizeof(path), "%s/no/such/dir/state.db", f->dir);
	assert_true(iso_store_open_sqlite(path, &s, &err) < 0);
	assert_null(s);
	assert_non_null(strstr(err.message, path));
}

/* ---- tenants ---- */

static void test_tenant_crud(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant a = tenant("acme"), b = tenant("beta"), c = tenant("corp"), got;
	struct iso_tenant *list = NULL;
	int n = -1;

	assert_int_equal(o->tenant_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->tenant_insert(f->s, &b, &f->err), 0);
	assert_true(a.id > 0);
	assert_true(b.id > a.id);

	struct iso_tenant dup = tenant("acme");
	assert_int_equal(o->tenant_insert(f->s, &dup, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);
	assert_string_equal(f->err.message, "tenant \"acme\" already exists");

	assert_int_equal(o->tenant_get_by_name(f->s, "beta", &got, &f->err), 0);
	assert_int_equal(got.id, b.id);
	assert_string_equal(got.description, "the beta tenant");
	assert_int_equal(got.created_ms, 1000);
	assert_int_equal(o->tenant_get_by_id(f->s, a.id, &got, &f->err), 0);
	assert_string_equal(got.name, "acme");

	snprintf(a.description, sizeof(a.description), "changed");
	a.updated_ms = 5000;
	assert_int_equal(o->tenant_update(f->s, &a, &f->err), 0);
	assert_int_equal(o->tenant_get_by_id(f->s, a.id, &got, &f->err), 0);
	assert_string_equal(got.description, "changed");
	assert_int_equal(got.updated_ms, 5000);
	assert_int_equal(got.created_ms, 1000);

	/* renaming onto another tenant's name is a conflict */
	struct iso_tenant clash = a;
	snprintf(clash.name, sizeof(clash.name), "beta");
	assert_int_equal(o->tenant_update(f->s, &clash, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);

	/* missing rows */
	assert_int_equal(o->tenant_get_by_name(f->s, "nope", &got, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);
	assert_non_null(strstr(f->err.message, "nope"));
	assert_int_equal(o->tenant_get_by_id(f->s, 999, &got, &f->err), -ENOENT);
	struct iso_tenant ghost = tenant("ghost");
	ghost.id = 999;
	assert_int_equal(o->tenant_update(f->s, &ghost, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);
	assert_int_equal(o->tenant_delete(f->s, 999, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);

	/* ids are never reused, not even the last one and not after reopen */
	assert_int_equal(o->tenant_delete(f->s, b.id, &f->err), 0);
	assert_int_equal(o->tenant_get_by_id(f->s, b.id, &got, &f->err), -ENOENT);
	fx_reopen(f);
	o = f->s->ops;
	assert_int_equal(o->tenant_insert(f->s, &c, &f->err), 0);
	assert_true(c.id > b.id);
	struct iso_tenant b2 = tenant("beta");
	assert_int_equal(o->tenant_insert(f->s, &b2, &f->err), 0);
	assert_true(b2.id > c.id);

	/* list: by name */
	assert_int_equal(o->tenant_list(f->s, NULL, 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(list[0].name, "acme");
	assert_string_equal(list[1].name, "beta");
	assert_string_equal(list[2].name, "corp");
	assert_int_equal(list[1].id, b2.id);
	free(list);
}

static void test_tenant_list_pages(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant *list = NULL;
	char after[ISO_NAME_MAX] = "";
	int n, seen = 0, pages = 0;

	for (int i = 9; i >= 0; i--) {
		char name[16];
		snprintf(name, sizeof(name), "t%02d", i);
		struct iso_tenant t = tenant(name);
		assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	}
	do {
		assert_int_equal(o->tenant_list(f->s, seen ? after : NULL, 3, &list, &n, &f->err),
		                 0);
		for (int i = 0; i < n; i++) {
			char want[16];
			snprintf(want, sizeof(want), "t%02d", seen + i);
			assert_string_equal(list[i].name, want);
		}
		if (n > 0)
			snprintf(after, sizeof(after), "%s", list[n - 1].name);
		seen += n;
		pages++;
		free(list);
	} while (n == 3);
	assert_int_equal(seen, 10);
	assert_int_equal(pages, 4);
	assert_int_equal(o->tenant_list(f->s, "zzz", 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 0);
	free(list);
}

/* ---- tokens ---- */

static void test_tokens(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant acme = tenant("acme"), beta = tenant("beta");
	struct iso_token got, *list = NULL;
	int n;

	assert_int_equal(o->tenant_insert(f->s, &acme, &f->err), 0);
	assert_int_equal(o->tenant_insert(f->s, &beta, &f->err), 0);

	struct iso_token admin = token("000000000001", 0, ISO_ROLE_CLUSTER_ADMIN);
	struct iso_token t1 = token("00000000000a", acme.id, ISO_ROLE_TENANT_ADMIN);
	struct iso_token t2 = token("00000000000b", acme.id, ISO_ROLE_TENANT_USER);
	struct iso_token t3 = token("00000000000c", beta.id, ISO_ROLE_TENANT_USER);
	t2.expires_ms = 99999;
	assert_int_equal(o->token_insert(f->s, &t3, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &t2, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &t1, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &admin, &f->err), 0);

	assert_int_equal(o->token_insert(f->s, &t1, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);
	assert_string_equal(f->err.message, "token \"00000000000a\" already exists");

	struct iso_token orphan = token("00000000000d", 12345, ISO_ROLE_TENANT_USER);
	assert_int_equal(o->token_insert(f->s, &orphan, &f->err), -ENOENT);
	assert_string_equal(f->err.field, "tenant");

	assert_int_equal(o->token_get(f->s, "00000000000b", &got, &f->err), 0);
	assert_string_equal(got.id, "00000000000b");
	assert_int_equal(got.tenant_id, acme.id);
	assert_int_equal(got.role, ISO_ROLE_TENANT_USER);
	assert_string_equal(got.user, "user-00000000000b");
	assert_string_equal(got.description, "token 00000000000b");
	assert_memory_equal(got.hash, t2.hash, ISO_TOKEN_HASH_LEN);
	assert_int_equal(got.created_ms, 2000);
	assert_int_equal(got.expires_ms, 99999);
	assert_int_equal(got.revoked_ms, 0);
	assert_int_equal(o->token_get(f->s, "000000000001", &got, &f->err), 0);
	assert_int_equal(got.tenant_id, 0);
	assert_int_equal(got.role, ISO_ROLE_CLUSTER_ADMIN);
	assert_int_equal(got.expires_ms, 0);

	assert_int_equal(o->token_get(f->s, "ffffffffffff", &got, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);

	/* lists by id: all, one tenant, cluster-wide, paged */
	assert_int_equal(o->token_list(f->s, -1, NULL, 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 4);
	assert_string_equal(list[0].id, "000000000001");
	assert_string_equal(list[3].id, "00000000000c");
	free(list);
	assert_int_equal(o->token_list(f->s, acme.id, NULL, 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].id, "00000000000a");
	assert_string_equal(list[1].id, "00000000000b");
	free(list);
	assert_int_equal(o->token_list(f->s, 0, NULL, 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].id, "000000000001");
	free(list);
	assert_int_equal(o->token_list(f->s, -1, "00000000000a", 1, &list, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].id, "00000000000b");
	free(list);

	/* revoke keeps the first time; missing -> not found */
	assert_int_equal(o->token_revoke(f->s, "00000000000a", 7000, &f->err), 0);
	assert_int_equal(o->token_revoke(f->s, "00000000000a", 8000, &f->err), 0);
	assert_int_equal(o->token_get(f->s, "00000000000a", &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 7000);
	assert_int_equal(o->token_revoke(f->s, "ffffffffffff", 7000, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);

	/* revoke a tenant's tokens, then delete the tenant: history stays */
	assert_int_equal(o->token_revoke_tenant(f->s, acme.id, 9000, &f->err), 0);
	assert_int_equal(o->tenant_delete(f->s, acme.id, &f->err), 0);
	assert_int_equal(o->token_get(f->s, "00000000000a", &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 7000);
	assert_int_equal(got.tenant_id, acme.id);
	assert_int_equal(o->token_get(f->s, "00000000000b", &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 9000);
	assert_int_equal(o->token_get(f->s, "00000000000c", &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 0);
	assert_int_equal(o->token_get(f->s, "000000000001", &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 0);
	assert_int_equal(o->token_revoke_tenant(f->s, 0, 9000, &f->err), -EINVAL);
}

/* ---- allocations ---- */

static void test_alloc_roundtrip(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_allocation a, got, pending;

	make_alloc(&a, "a-0000000000000001", 7, "acme", "alice", ISO_ALLOC_ACTIVE, 100, 3, 2);
	a.slots[1].whole = true;
	a.slots[1].profile[0] = '\0';
	a.slots[1].start = 0;
	a.slots[1].width = 8;
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, a.id, &got, &f->err), 0);
	assert_alloc_equal(&a, &got);
	iso_allocation_clear(&got);

	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);
	assert_string_equal(f->err.message, "allocation \"a-0000000000000001\" already exists");

	/* pending: nothing placed */
	make_alloc(&pending, "a-0000000000000002", 7, "acme", "bob", ISO_ALLOC_PENDING, 101, 2, 1);
	pending.n_members = 0;
	pending.n_slots = 0;
	assert_int_equal(o->alloc_insert(f->s, &pending, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, pending.id, &got, &f->err), 0);
	assert_alloc_equal(&pending, &got);
	assert_null(got.placed);
	assert_null(got.slots);
	iso_allocation_clear(&got);

	assert_int_equal(o->alloc_get(f->s, "a-ffffffffffffffff", &got, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);

	/* a slot naming a member that is not placed is refused, nothing stored */
	struct iso_allocation bad;
	make_alloc(&bad, "a-0000000000000003", 7, "acme", "bob", ISO_ALLOC_ACTIVE, 102, 1, 1);
	bad.slots[0].member = 1;
	assert_int_equal(o->alloc_insert(f->s, &bad, &f->err), -EIO);
	assert_int_equal(o->alloc_get(f->s, bad.id, &got, &f->err), -ENOENT);
	iso_allocation_clear(&bad);
	iso_allocation_clear(&pending);
	iso_allocation_clear(&a);
}

static void test_alloc_update(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_allocation a, b, got;

	make_alloc(&a, "a-0000000000000001", 7, "acme", "alice", ISO_ALLOC_ACTIVE, 100, 3, 2);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);

	/* shrink to 1 member with 1 whole GPU, new state and times */
	make_alloc(&b, a.id, 7, "acme", "alice", ISO_ALLOC_RELEASING, 100, 1, 1);
	b.members = 1;
	b.updated_ms = 777;
	b.slots[0].whole = true;
	b.slots[0].gpu = 5;
	b.slots[0].width = 8;
	snprintf(b.reason, sizeof(b.reason), "shrunk");
	assert_int_equal(o->alloc_update(f->s, &b, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, a.id, &got, &f->err), 0);
	assert_alloc_equal(&b, &got);
	iso_allocation_clear(&got);
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM alloc_slots"), 1);
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM alloc_members"), 1);

	/* grow again */
	assert_int_equal(o->alloc_update(f->s, &a, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, a.id, &got, &f->err), 0);
	assert_alloc_equal(&a, &got);
	iso_allocation_clear(&got);

	snprintf(b.id, sizeof(b.id), "a-ffffffffffffffff");
	assert_int_equal(o->alloc_update(f->s, &b, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);
	assert_int_equal(o->alloc_get(f->s, b.id, &got, &f->err), -ENOENT);
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM alloc_slots"), 6);
	iso_allocation_clear(&a);
	iso_allocation_clear(&b);
}

/* A failure in the middle of a multi-table write leaves nothing behind, both
 * in autocommit mode and inside a transaction that then goes on. */
static void test_alloc_write_atomic(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_allocation a, got;
	struct iso_tenant t = tenant("acme");

	raw_exec(f->path, "CREATE TRIGGER no_gpu_666 BEFORE INSERT ON alloc_slots"
	                  " WHEN NEW.gpu = 666 BEGIN SELECT RAISE(ABORT, 'gpu 666 refused'); END");
	fx_reopen(f);
	o = f->s->ops;

	make_alloc(&a, "a-0000000000000001", 7, "acme", "alice", ISO_ALLOC_ACTIVE, 100, 2, 2);
	a.slots[3].gpu = 666;
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), -EIO);
	assert_int_equal(f->err.code, ISO_E_INTERNAL);
	assert_non_null(strstr(f->err.message, "gpu 666 refused"));
	assert_int_equal(o->alloc_get(f->s, a.id, &got, &f->err), -ENOENT);
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM alloc_members"), 0);

	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), -EIO);
	a.slots[3].gpu = 3;
	snprintf(a.id, sizeof(a.id), "a-0000000000000002");
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->commit(f->s, &f->err), 0);
	assert_int_equal(o->tenant_get_by_name(f->s, "acme", &t, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, "a-0000000000000001", &got, &f->err), -ENOENT);
	assert_int_equal(o->alloc_get(f->s, "a-0000000000000002", &got, &f->err), 0);
	assert_alloc_equal(&a, &got);
	iso_allocation_clear(&got);
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM alloc_members"), 2);
	iso_allocation_clear(&a);

	/* same for update: the old row and children survive a failed update */
	struct iso_allocation b;
	make_alloc(&b, "a-0000000000000002", 7, "acme", "alice", ISO_ALLOC_FAILED, 100, 1, 1);
	b.slots[0].gpu = 666;
	assert_int_equal(o->alloc_update(f->s, &b, &f->err), -EIO);
	assert_int_equal(o->alloc_get(f->s, b.id, &got, &f->err), 0);
	assert_int_equal(got.state, ISO_ALLOC_ACTIVE);
	assert_int_equal(got.n_slots, 4);
	iso_allocation_clear(&got);
	iso_allocation_clear(&b);
}

static const char *ids_of(struct iso_allocation *a, int n, char *buf, size_t size)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && off < size; i++)
		off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? "," : "",
		                        a[i].id + strlen(a[i].id) - 2);
	return buf;
}

static void list_ids(struct fx *f, const struct iso_alloc_filter *flt, const char *want)
{
	struct iso_allocation *list = NULL;
	int n = -1;
	char buf[256];

	assert_int_equal(f->s->ops->alloc_list(f->s, flt, &list, &n, &f->err), 0);
	assert_string_equal(ids_of(list, n, buf, sizeof(buf)), want);
	iso_allocations_free(list, n);
}

static void seed_allocs(struct fx *f)
{
	/* ids end in two digits; created times interleave tenants and owners, two
	 * share a created_ms so that the id breaks the tie */
	insert_alloc(f, "a-x05", 1, "acme", "alice", ISO_ALLOC_ACTIVE, 50);
	insert_alloc(f, "a-x01", 1, "acme", "alice", ISO_ALLOC_ACTIVE, 10);
	insert_alloc(f, "a-x02", 2, "beta", "bob", ISO_ALLOC_PENDING, 20);
	insert_alloc(f, "a-x04", 1, "acme", "carol", ISO_ALLOC_RELEASED, 30);
	insert_alloc(f, "a-x03", 1, "acme", "alice", ISO_ALLOC_FAILED, 30);
	insert_alloc(f, "a-x06", 2, "beta", "bob", ISO_ALLOC_RELEASING, 60);
	insert_alloc(f, "a-x07", 1, "acme", "carol", ISO_ALLOC_PENDING, 70);
}

static void test_alloc_list_filters(void **state)
{
	struct fx *f = *state;
	struct iso_alloc_filter flt = {.state = -1};

	seed_allocs(f);
	list_ids(f, &flt, "01,02,03,04,05,06,07");
	flt.tenant_id = 1;
	list_ids(f, &flt, "01,03,04,05,07");
	flt.owner = "alice";
	list_ids(f, &flt, "01,03,05");
	flt.live_only = true;
	list_ids(f, &flt, "01,05");
	flt = (struct iso_alloc_filter){.state = -1, .live_only = true};
	list_ids(f, &flt, "01,02,05,06,07");
	flt.tenant_id = 2;
	list_ids(f, &flt, "02,06");
	flt = (struct iso_alloc_filter){.state = ISO_ALLOC_PENDING};
	list_ids(f, &flt, "02,07");
	flt.tenant_id = 1;
	list_ids(f, &flt, "07");
	flt = (struct iso_alloc_filter){.state = ISO_ALLOC_RELEASED};
	list_ids(f, &flt, "04");
	flt.live_only = true; /* live and released: nothing */
	list_ids(f, &flt, "");
	flt = (struct iso_alloc_filter){.state = ISO_ALLOC_FAILED, .owner = "alice"};
	list_ids(f, &flt, "03");
	flt = (struct iso_alloc_filter){.state = -1, .tenant_id = 99};
	list_ids(f, &flt, "");
	flt = (struct iso_alloc_filter){.state = -1, .owner = "nobody"};
	list_ids(f, &flt, "");

	/* list rows carry their members and slots */
	struct iso_allocation *list = NULL;
	int n;
	flt = (struct iso_alloc_filter){.state = -1, .limit = 1};
	assert_int_equal(f->s->ops->alloc_list(f->s, &flt, &list, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(list[0].n_members, 1);
	assert_string_equal(list[0].placed[0].node, "gpu-a00");
	assert_int_equal(list[0].n_slots, 1);
	assert_string_equal(list[0].slots[0].profile, "3g.40gb");
	iso_allocations_free(list, n);

	flt = (struct iso_alloc_filter){.state = 42};
	assert_int_equal(f->s->ops->alloc_list(f->s, &flt, &list, &n, &f->err), -EINVAL);
	assert_string_equal(f->err.field, "state");
}

static void test_alloc_list_pages(void **state)
{
	struct fx *f = *state;
	struct iso_alloc_filter flt = {.state = -1, .limit = 3};
	struct iso_allocation *list = NULL;
	char got[256] = "", buf[128], after[ISO_ID_MAX];
	int n, pages = 0;

	seed_allocs(f);
	do {
		assert_int_equal(f->s->ops->alloc_list(f->s, &flt, &list, &n, &f->err), 0);
		if (n > 0) {
			snprintf(after, sizeof(after), "%s", list[n - 1].id);
			flt.after = after;
			strcat(got, pages ? "|" : "");
			strcat(got, ids_of(list, n, buf, sizeof(buf)));
		}
		pages++;
		iso_allocations_free(list, n);
	} while (n == flt.limit);
	assert_string_equal(got, "01,02,03|04,05,06|07");
	assert_int_equal(pages, 3);

	/* a cursor on the tie (03 and 04 share created_ms) continues with 04 */
	flt = (struct iso_alloc_filter){.state = -1, .after = "a-x03", .limit = 2};
	list_ids(f, &flt, "04,05");
	/* filtered pages */
	flt = (struct iso_alloc_filter){.state = -1, .tenant_id = 1, .after = "a-x03"};
	list_ids(f, &flt, "04,05,07");
	flt = (struct iso_alloc_filter){.state = -1, .live_only = true, .after = "a-x03"};
	list_ids(f, &flt, "05,06,07");
	/* the cursor may be a row that is no longer live */
	flt = (struct iso_alloc_filter){.state = -1, .live_only = true, .after = "a-x04"};
	list_ids(f, &flt, "05,06,07");

	/* unknown cursors, and cursors another tenant or owner could not see */
	const char *bad[] = {"a-nope", "a-x02"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		flt = (struct iso_alloc_filter){.state = -1, .tenant_id = 1, .after = bad[i]};
		assert_int_equal(f->s->ops->alloc_list(f->s, &flt, &list, &n, &f->err), -EINVAL);
		assert_int_equal(f->err.code, ISO_E_INVALID);
		assert_string_equal(f->err.field, "after");
		assert_null(list);
		assert_int_equal(n, 0);
	}
	flt = (struct iso_alloc_filter){.state = -1, .owner = "alice", .after = "a-x04"};
	assert_int_equal(f->s->ops->alloc_list(f->s, &flt, &list, &n, &f->err), -EINVAL);
	assert_string_equal(f->err.field, "after");
}

static void test_alloc_count_live(void **state)
{
	struct fx *f = *state;
	int n = -1;

	assert_int_equal(f->s->ops->alloc_count_live(f->s, 1, &n, &f->err), 0);
	assert_int_equal(n, 0);
	seed_allocs(f);
	assert_int_equal(f->s->ops->alloc_count_live(f->s, 1, &n, &f->err), 0);
	assert_int_equal(n, 3); /* 01, 05, 07 */
	assert_int_equal(f->s->ops->alloc_count_live(f->s, 2, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(f->s->ops->alloc_count_live(f->s, 0, &n, &f->err), 0);
	assert_int_equal(n, 5);
	assert_int_equal(f->s->ops->alloc_count_live(f->s, 3, &n, &f->err), 0);
	assert_int_equal(n, 0);

	struct iso_allocation a;
	assert_int_equal(f->s->ops->alloc_get(f->s, "a-x07", &a, &f->err), 0);
	a.state = ISO_ALLOC_RELEASED;
	assert_int_equal(f->s->ops->alloc_update(f->s, &a, &f->err), 0);
	iso_allocation_clear(&a);
	assert_int_equal(f->s->ops->alloc_count_live(f->s, 1, &n, &f->err), 0);
	assert_int_equal(n, 2);
}

/* The newest first, in any state, ties broken by id as in the list. */
static void test_alloc_recent(void **state)
{
	struct fx *f = *state;
	struct iso_allocation *list = NULL;
	char buf[128];
	int n = -1;

	assert_int_equal(f->s->ops->alloc_recent(f->s, 3, &list, &n, &f->err), 0);
	assert_int_equal(n, 0);
	seed_allocs(f);
	assert_int_equal(f->s->ops->alloc_recent(f->s, 3, &list, &n, &f->err), 0);
	assert_string_equal(ids_of(list, n, buf, sizeof(buf)), "07,06,05");
	iso_allocations_free(list, n);
	assert_int_equal(f->s->ops->alloc_recent(f->s, 100, &list, &n, &f->err), 0);
	assert_string_equal(ids_of(list, n, buf, sizeof(buf)), "07,06,05,04,03,02,01");
	assert_int_equal(list[3].state, ISO_ALLOC_RELEASED);
	assert_int_equal(list[4].state, ISO_ALLOC_FAILED);
	assert_int_equal(list[0].members, 1); /* the request is read, where it ran is not */
	assert_null(list[0].placed);
	assert_null(list[0].slots);
	iso_allocations_free(list, n);
	assert_int_equal(f->s->ops->alloc_recent(f->s, 0, &list, &n, &f->err), -EINVAL);
	assert_string_equal(f->err.field, "limit");
	assert_null(list);
	assert_int_equal(n, 0);
}

/* ---- transactions ---- */

static void test_rollback_discards(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant t = tenant("acme"), got;
	struct iso_allocation a;

	o->rollback(f->s); /* safe with nothing open */
	assert_int_equal(o->commit(f->s, &f->err), -EIO);
	assert_int_equal(f->err.code, ISO_E_INTERNAL);

	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_int_equal(o->begin(f->s, &f->err), -EBUSY);
	assert_int_equal(f->err.code, ISO_E_INTERNAL);
	assert_non_null(strstr(f->err.message, "already open"));
	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	make_alloc(&a, "a-0000000000000001", t.id, "acme", "alice", ISO_ALLOC_ACTIVE, 1, 2, 2);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->meta_set(f->s, "k", "v", &f->err), 0);
	o->rollback(f->s);
	o->rollback(f->s);

	assert_int_equal(o->tenant_get_by_name(f->s, "acme", &got, &f->err), -ENOENT);
	struct iso_allocation ga;
	assert_int_equal(o->alloc_get(f->s, a.id, &ga, &f->err), -ENOENT);
	char v[8];
	assert_int_equal(o->meta_get(f->s, "k", v, sizeof(v), &f->err), -ENOENT);
	fx_reopen(f);
	assert_int_equal(f->s->ops->tenant_get_by_name(f->s, "acme", &got, &f->err), -ENOENT);
	assert_int_equal(raw_int(f->path, "SELECT count(*) FROM alloc_members"), 0);

	/* the store is usable for the next transaction */
	o = f->s->ops;
	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->commit(f->s, &f->err), 0);
	iso_allocation_clear(&a);
}

static void test_commit_survives_reopen(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant t = tenant("acme"), got;
	struct iso_token tok;
	struct iso_allocation a, ga;

	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	tok = token("0123456789ab", t.id, ISO_ROLE_TENANT_ADMIN);
	assert_int_equal(o->token_insert(f->s, &tok, &f->err), 0);
	make_alloc(&a, "a-0000000000000001", t.id, "acme", "alice", ISO_ALLOC_ACTIVE, 1, 2, 2);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->commit(f->s, &f->err), 0);

	fx_reopen(f);
	o = f->s->ops;
	assert_int_equal(o->tenant_get_by_name(f->s, "acme", &got, &f->err), 0);
	assert_int_equal(got.id, t.id);
	assert_int_equal(o->token_get(f->s, "0123456789ab", &tok, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, a.id, &ga, &f->err), 0);
	assert_alloc_equal(&a, &ga);
	iso_allocation_clear(&ga);
	iso_allocation_clear(&a);
}

/* Group commit (docs/store.md): `on` switches the connection to
 * synchronous=NORMAL, so commits wait for `sync`; `off` is FULL again; the
 * switch is refused inside a transaction; sync flushes whatever was
 * committed, and is harmless with nothing to flush. */
static int64_t synchronous_of(struct iso_store *s)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	assert_int_equal(
	    sqlite3_prepare_v2(sqlite_store_of(s)->db, "PRAGMA synchronous", -1, &st, NULL),
	    SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void test_group_commit_sync(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant t = tenant("acme"), got;

	assert_non_null(o->set_group_commit);
	assert_non_null(o->sync);
	assert_int_equal(synchronous_of(f->s), 2);
	assert_int_equal(o->sync(f->s, &f->err), 0); /* nothing to flush */
	assert_int_equal(o->set_group_commit(f->s, true, &f->err), 0);
	assert_int_equal(synchronous_of(f->s), 1);
	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	assert_int_equal(o->set_group_commit(f->s, false, &f->err), -EIO);
	assert_string_equal(f->err.message, "store: group commit: a transaction is open");
	assert_int_equal(o->commit(f->s, &f->err), 0);
	assert_int_equal(o->sync(f->s, &f->err), 0);
	assert_int_equal(o->sync(f->s, &f->err), 0);
	assert_int_equal(o->set_group_commit(f->s, false, &f->err), 0);
	assert_int_equal(synchronous_of(f->s), 2);
	fx_reopen(f);
	assert_int_equal(f->s->ops->tenant_get_by_name(f->s, "acme", &got, &f->err), 0);
	assert_int_equal(got.id, t.id);
}

/* ---- node state, meta ---- */

static void test_node_state(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_node_state *list = NULL;
	int n = -1;

	assert_int_equal(o->node_state_list(f->s, &list, &n, &f->err), 0);
	assert_int_equal(n, 0);
	free(list);
	struct iso_node_state b = {"gpu-b01", ISO_NODE_CORDONED};
	struct iso_node_state a = {"gpu-a01", ISO_NODE_DRAINING};
	assert_int_equal(o->node_state_set(f->s, &b, &f->err), 0);
	assert_int_equal(o->node_state_set(f->s, &a, &f->err), 0);
	a.sched = ISO_NODE_SCHEDULABLE;
	assert_int_equal(o->node_state_set(f->s, &a, &f->err), 0);
	assert_int_equal(o->node_state_list(f->s, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].name, "gpu-a01");
	assert_int_equal(list[0].sched, ISO_NODE_SCHEDULABLE);
	assert_string_equal(list[1].name, "gpu-b01");
	assert_int_equal(list[1].sched, ISO_NODE_CORDONED);
	free(list);

	struct iso_node_state bad = {"gpu-c01", (enum iso_node_sched)17};
	assert_int_equal(o->node_state_set(f->s, &bad, &f->err), -EINVAL);
}

static void test_meta(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	char buf[16];

	assert_int_equal(o->meta_get(f->s, "cluster", buf, sizeof(buf), &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);
	assert_int_equal(o->meta_set(f->s, "cluster", "lab-1", &f->err), 0);
	assert_int_equal(o->meta_get(f->s, "cluster", buf, sizeof(buf), &f->err), 0);
	assert_string_equal(buf, "lab-1");
	assert_int_equal(o->meta_set(f->s, "cluster", "lab-2", &f->err), 0);
	assert_int_equal(o->meta_get(f->s, "cluster", buf, sizeof(buf), &f->err), 0);
	assert_string_equal(buf, "lab-2");
	assert_int_equal(o->meta_set(f->s, "long", "0123456789abcdef", &f->err), 0);
	assert_int_equal(o->meta_get(f->s, "long", buf, sizeof(buf), &f->err), -EIO);
	assert_int_equal(f->err.code, ISO_E_INTERNAL);
	assert_int_equal(o->meta_set(f->s, "fits", "0123456789abcde", &f->err), 0);
	assert_int_equal(o->meta_get(f->s, "fits", buf, sizeof(buf), &f->err), 0);
	assert_string_equal(buf, "0123456789abcde");
}

/* ---- corruption is reported, not guessed ---- */

static void test_corrupt_rows(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant t = tenant("acme");
	struct iso_token tok = token("0123456789ab", 0, ISO_ROLE_AUDITOR), gt, *tl = NULL;
	struct iso_allocation ga, *al = NULL;
	struct iso_node_state ns = {"gpu-a01", ISO_NODE_CORDONED}, *nl = NULL;
	struct iso_alloc_filter flt = {.state = -1};
	int n = -1;

	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &tok, &f->err), 0);
	assert_int_equal(o->node_state_set(f->s, &ns, &f->err), 0);
	insert_alloc(f, "a-x01", t.id, "acme", "alice", ISO_ALLOC_ACTIVE, 10);
	insert_alloc(f, "a-x02", t.id, "acme", "alice", ISO_ALLOC_ACTIVE, 20);

	raw_exec(f->path,
	         "UPDATE tokens SET role = 'superuser';"
	         "UPDATE allocations SET state = 'zombie' WHERE id = 'a-x02';"
	         "UPDATE node_state SET sched = 'asleep';"
	         "UPDATE tenants SET description = replace(hex(zeroblob(2000)), '0', 'x')");

	assert_int_equal(o->token_get(f->s, tok.id, &gt, &f->err), -EIO);
	assert_int_equal(f->err.code, ISO_E_INTERNAL);
	assert_non_null(strstr(f->err.message, "tokens"));
	assert_non_null(strstr(f->err.message, "0123456789ab"));
	assert_non_null(strstr(f->err.message, "role"));
	assert_int_equal(o->token_list(f->s, -1, NULL, 0, &tl, &n, &f->err), -EIO);
	assert_null(tl);

	assert_int_equal(o->alloc_get(f->s, "a-x01", &ga, &f->err), 0);
	iso_allocation_clear(&ga);
	assert_int_equal(o->alloc_get(f->s, "a-x02", &ga, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "allocations"));
	assert_non_null(strstr(f->err.message, "a-x02"));
	assert_non_null(strstr(f->err.message, "state"));
	assert_null(ga.placed);
	assert_int_equal(o->alloc_list(f->s, &flt, &al, &n, &f->err), -EIO);
	assert_null(al);
	assert_int_equal(n, 0);

	assert_int_equal(o->node_state_list(f->s, &nl, &n, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "node_state"));
	assert_non_null(strstr(f->err.message, "sched"));

	assert_int_equal(o->tenant_get_by_name(f->s, "acme", &t, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "tenants"));
	assert_non_null(strstr(f->err.message, "description"));

	/* a slot pointing past the placed members */
	raw_exec(f->path, "UPDATE alloc_slots SET member = 3 WHERE alloc_id = 'a-x01'");
	assert_int_equal(o->alloc_get(f->s, "a-x01", &ga, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "alloc_slots"));
}

/* ---- durability: kill -9 after acknowledged commits ---- */

#define DUR_ROUNDS 4
#define DUR_MAX    100000

static void child_commit_loop(const char *path, int fd, int round)
{
	struct iso_store *s = NULL;
	struct iso_error err;

	if (iso_store_open_sqlite(path, &s, &err) < 0)
		_exit(2);
	for (int i = 0; i < DUR_MAX; i++) {
		struct iso_tenant t = {0};
		snprintf(t.name, sizeof(t.name), "r%d-%06d", round, i);
		t.created_ms = t.updated_ms = i;
		if (s->ops->begin(s, &err) < 0 || s->ops->tenant_insert(s, &t, &err) < 0 ||
		    s->ops->commit(s, &err) < 0)
			_exit(3);
		if (write(fd, &t.id, sizeof(t.id)) != (ssize_t)sizeof(t.id))
			_exit(4);
	}
	_exit(0);
}

static void test_durability_kill9(void **state)
{
	struct fx *f = *state;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	const char *env = getenv("ISO_TEST_SEED");
	int total = 0;

	if (env)
		seed = (unsigned)strtoul(env, NULL, 10);
	print_message("durability seed %u (ISO_TEST_SEED to repeat)\n", seed);
	srand(seed);
	iso_store_close(f->s);
	f->s = NULL;

	for (int round = 0; round < DUR_ROUNDS; round++) {
		int pfd[2], status, target = 1 + rand() % 150, got = 0, cap = 256, n;
		int64_t *ids = malloc((size_t)cap * sizeof(*ids)), id;
		struct iso_tenant *list = NULL;
		pid_t pid;

		assert_non_null(ids);
		assert_int_equal(pipe(pfd), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(pfd[0]);
			child_commit_loop(f->path, pfd[1], round);
		}
		close(pfd[1]);
		/* wait for `target` acknowledged commits, then kill at a random
		 * moment of the next ones */
		while (got < target && read(pfd[0], &id, sizeof(id)) == (ssize_t)sizeof(id))
			ids[got++] = id;
		assert_int_equal(got, target);
		usleep((useconds_t)(rand() % 3000));
		assert_int_equal(kill(pid, SIGKILL), 0);
		while (read(pfd[0], &id, sizeof(id)) == (ssize_t)sizeof(id)) {
			if (got == cap) {
				cap *= 2;
				ids = realloc(ids, (size_t)cap * sizeof(*ids));
				assert_non_null(ids);
			}
			ids[got++] = id;
		}
		close(pfd[0]);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

		char ok[16];
		raw_text(f->path, "PRAGMA quick_check", ok, sizeof(ok));
		assert_string_equal(ok, "ok");
		assert_int_equal(iso_store_open_sqlite(f->path, &f->s, &f->err), 0);
		for (int i = 0; i < got; i++) {
			struct iso_tenant t;
			char want[32];
			assert_int_equal(f->s->ops->tenant_get_by_id(f->s, ids[i], &t, &f->err), 0);
			snprintf(want, sizeof(want), "r%d-%06d", round, i);
			assert_string_equal(t.name, want);
		}
		/* at most the one commit that was not yet reported is extra */
		char after[16];
		snprintf(after, sizeof(after), "r%d-", round);
		assert_int_equal(f->s->ops->tenant_list(f->s, after, 0, &list, &n, &f->err), 0);
		int mine = 0;
		for (int i = 0; i < n; i++)
			mine += strncmp(list[i].name, after, strlen(after)) == 0;
		assert_true(mine >= got && mine <= got + 1);
		free(list);
		iso_store_close(f->s);
		f->s = NULL;
		total += got;
		free(ids);
	}
	print_message("durability: %d acknowledged commits over %d kills, all present\n", total,
	              DUR_ROUNDS);
	assert_int_equal(iso_store_open_sqlite(f->path, &f->s, &f->err), 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_open_schema_wal_mode),
	    T(test_open_mode_ignores_umask),
	    T(test_open_tightens_loose_file),
	    T(test_reopen_idempotent),
	    T(test_newer_schema_refused),
	    T(test_not_a_database),
	    T(test_tenant_crud),
	    T(test_tenant_list_pages),
	    T(test_tokens),
	    T(test_alloc_roundtrip),
	    T(test_alloc_update),
	    T(test_alloc_write_atomic),
	    T(test_alloc_list_filters),
	    T(test_alloc_list_pages),
	    T(test_alloc_count_live),
	    T(test_alloc_recent),
	    T(test_rollback_discards),
	    T(test_commit_survives_reopen),
	    T(test_group_commit_sync),
	    T(test_node_state),
	    T(test_meta),
	    T(test_corrupt_rows),
	    T(test_durability_kill9),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}

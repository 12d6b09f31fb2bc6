/* test_store_contract.c: the store contract (include/isostack/store.h) as
 * one suite that every backend must pass: each op of the vtable, its error
 * classes (missing -ENOENT, clash -EEXIST, bad input -EINVAL, else -EIO),
 * orders and paging, transactions (commit, rollback, nested begin, a failed
 * op inside a transaction leaving it usable) and reopening. It runs against
 * SQLite always, and against PostgreSQL when ISOSTACK_TEST_PG holds a libpq
 * conninfo (the `test_store_contract_pg` meson test starts a throwaway
 * cluster with scripts/pg-test-cluster.sh and sets it); each PostgreSQL test
 * starts from an empty schema. Without the variable it says that the
 * PostgreSQL half was skipped. Backend-specific checks (file modes, WAL,
 * corruption of SQLite files) stay in test_store.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "isostack/store.h"

enum backend { B_SQLITE, B_POSTGRES };

struct fx {
	enum backend b;
	char dir[64];
	char path[128];
	const char *conninfo;
	struct iso_store *s;
	struct iso_error err;
};

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(p);
}

static void pg_raw(const char *conninfo, const char *sql)
{
	PGconn *c = PQconnectdb(conninfo);
	PGresult *res;

	if (PQstatus(c) != CONNECTION_OK)
		fail_msg("connecting to %s: %s", conninfo, PQerrorMessage(c));
	res = PQexec(c, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		fail_msg("%s: %s", sql, PQerrorMessage(c));
	PQclear(res);
	PQfinish(c);
}

static void fx_open(struct fx *f)
{
	struct iso_error err = {0};
	int r = f->b == B_SQLITE ? iso_store_open_sqlite(f->path, &f->s, &err)
	                         : iso_store_open_postgres(f->conninfo, &f->s, &err);

	if (r < 0)
		fail_msg("open: %s", err.message);
}

static void fx_reopen(struct fx *f)
{
	iso_store_close(f->s);
	f->s = NULL;
	fx_open(f);
}

static int fx_setup(void **state)
{
	enum backend b = *(enum backend *)*state;
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->b = b;
	if (b == B_SQLITE) {
		strcpy(f->dir, "/tmp/iso-contract-XXXXXX");
		assert_non_null(mkdtemp(f->dir));
		snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
	} else {
		f->conninfo = getenv("ISOSTACK_TEST_PG");
		pg_raw(f->conninfo, "SET client_min_messages = warning;"
		                    " DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public");
	}
	fx_open(f);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	iso_store_close(f->s);
	if (f->b == B_SQLITE)
		nftw(f->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
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

static int64_t add_tenant(struct fx *f, const char *name)
{
	struct iso_tenant t = tenant(name);

	assert_int_equal(f->s->ops->tenant_insert(f->s, &t, &f->err), 0);
	assert_true(t.id > 0);
	return t.id;
}

static struct iso_token token(const char *id, int64_t tenant_id, enum iso_role role)
{
	struct iso_token t = {0};

	snprintf(t.id, sizeof(t.id), "%s", id);
	t.tenant_id = tenant_id;
	t.role = role;
	snprintf(t.user, sizeof(t.user), "user-%s", id);
	snprintf(t.description, sizeof(t.description), "token %s", id);
	for (size_t i = 0; i < sizeof(t.hash); i++)
		t.hash[i] = (uint8_t)(i * 7 + (unsigned char)id[0]);
	t.hash[3] = 0; /* a NUL inside the hash */
	t.created_ms = 5000;
	return t;
}

/* An allocation with `members` members and one slot each (a MIG slice on
 * odd members). Free with iso_allocation_clear. */
static struct iso_allocation alloc(const char *id, int64_t tenant_id, const char *tenant_name,
                                   int64_t created_ms, enum iso_alloc_state st, int members)
{
	struct iso_allocation a = {0};

	snprintf(a.id, sizeof(a.id), "%s", id);
	a.tenant_id = tenant_id;
	snprintf(a.tenant, sizeof(a.tenant), "%s", tenant_name);
	snprintf(a.name, sizeof(a.name), "job-%s", id);
	a.state = st;
	snprintf(a.reason, sizeof(a.reason), "%s", st == ISO_ALLOC_FAILED ? "node died" : "");
	a.members = members;
	a.shape.whole = true;
	a.shape.gpu_count = 1;
	snprintf(a.shape.gpu_model, sizeof(a.shape.gpu_model), "h100-80gb");
	a.shape.cpus = 8;
	a.shape.memory_mib = 65536;
	snprintf(a.shape.pool, sizeof(a.shape.pool), "main");
	snprintf(a.owner, sizeof(a.owner), "alice");
	a.created_ms = created_ms;
	a.updated_ms = created_ms + 1;
	snprintf(a.project, sizeof(a.project), "proj");
	a.priority = -3;
	snprintf(a.isolation, sizeof(a.isolation), "exclusive-gpu");
	snprintf(a.spread, sizeof(a.spread), "node");
	a.fail_on_preempt = true;
	a.duration_ms = 3600000;
	a.started_ms = created_ms + 2;
	if (st != ISO_ALLOC_PENDING && members > 0) {
		a.n_members = members;
		a.placed = calloc((size_t)members, sizeof(*a.placed));
		a.n_slots = members;
		a.slots = calloc((size_t)members, sizeof(*a.slots));
		assert_non_null(a.placed);
		assert_non_null(a.slots);
		for (int i = 0; i < members; i++) {
			a.placed[i].index = i;
			snprintf(a.placed[i].node, sizeof(a.placed[i].node), "node-%02d", i);
			a.slots[i].member = i;
			a.slots[i].gpu = i % 8;
			a.slots[i].whole = i % 2 == 0;
			if (!a.slots[i].whole) {
				snprintf(a.slots[i].profile, sizeof(a.slots[i].profile), "3g.40gb");
				a.slots[i].start = 4;
				a.slots[i].width = 4;
			} else {
				a.slots[i].width = 8;
			}
		}
	}
	return a;
}

static void assert_alloc_equal(const struct iso_allocation *a, const struct iso_allocation *b,
                               bool children)
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
	assert_string_equal(a->project, b->project);
	assert_int_equal(a->priority, b->priority);
	assert_string_equal(a->isolation, b->isolation);
	assert_string_equal(a->spread, b->spread);
	assert_int_equal(a->fail_on_preempt, b->fail_on_preempt);
	assert_int_equal(a->duration_ms, b->duration_ms);
	assert_int_equal(a->started_ms, b->started_ms);
	assert_string_equal(a->idem_key, b->idem_key);
	assert_string_equal(a->idem_hash, b->idem_hash);
	if (!children)
		return;
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

/* ---- meta ---- */

static void test_meta(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	char buf[64], tiny[4];

	assert_int_equal(o->meta_get(f->s, "cluster", buf, sizeof(buf), &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);
	assert_int_equal(o->meta_set(f->s, "cluster", "alpha", &f->err), 0);
	assert_int_equal(o->meta_get(f->s, "cluster", buf, sizeof(buf), &f->err), 0);
	assert_string_equal(buf, "alpha");
	assert_int_equal(o->meta_set(f->s, "cluster", "", &f->err), 0); /* overwrite, empty */
	assert_int_equal(o->meta_get(f->s, "cluster", buf, sizeof(buf), &f->err), 0);
	assert_string_equal(buf, "");
	assert_int_equal(o->meta_set(f->s, "long", "0123456789", &f->err), 0);
	assert_int_equal(o->meta_get(f->s, "long", tiny, sizeof(tiny), &f->err), -EIO);
	assert_int_equal(f->err.code, ISO_E_INTERNAL);
}

/* ---- tenants ---- */

static void test_tenants(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant t = tenant("acme"), dup = tenant("acme"), got, other;
	int64_t id;

	t.shares = 2.5;
	snprintf(t.org, sizeof(t.org), "physics");
	snprintf(t.isolation, sizeof(t.isolation), "exclusive-node");
	snprintf(t.tags, sizeof(t.tags), "hipaa,gpu");
	t.max_pending = 7;
	t.max_live = 9;
	t.max_user_priority = 3;
	t.writes_per_s = 11;
	t.reads_per_s = 13;
	t.io_uring = true;
	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	id = t.id;
	assert_true(id > 0);
	assert_int_equal(o->tenant_insert(f->s, &dup, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);
	assert_non_null(strstr(f->err.message, "acme"));

	assert_int_equal(o->tenant_get_by_name(f->s, "acme", &got, &f->err), 0);
	assert_int_equal(got.id, id);
	assert_string_equal(got.description, "the acme tenant");
	assert_string_equal(got.org, "physics");
	assert_true(got.shares == 2.5);
	assert_string_equal(got.isolation, "exclusive-node");
	assert_string_equal(got.tags, "hipaa,gpu");
	assert_int_equal(got.max_pending, 7);
	assert_int_equal(got.max_live, 9);
	assert_int_equal(got.max_user_priority, 3);
	assert_int_equal(got.writes_per_s, 11);
	assert_int_equal(got.reads_per_s, 13);
	assert_true(got.io_uring);
	assert_int_equal(got.created_ms, 1000);
	assert_int_equal(o->tenant_get_by_id(f->s, id, &got, &f->err), 0);
	assert_string_equal(got.name, "acme");
	assert_int_equal(o->tenant_get_by_name(f->s, "nope", &got, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);
	assert_int_equal(o->tenant_get_by_id(f->s, id + 100, &got, &f->err), -ENOENT);

	/* defaults of a zeroed policy */
	other = tenant("zed");
	assert_int_equal(o->tenant_insert(f->s, &other, &f->err), 0);
	assert_int_equal(o->tenant_get_by_id(f->s, other.id, &got, &f->err), 0);
	assert_true(got.shares == 1.0);
	assert_string_equal(got.isolation, "shared");
	assert_false(got.io_uring);

	/* update: every column; a rename onto another's name clashes */
	t.updated_ms = 2000;
	snprintf(t.name, sizeof(t.name), "acme2");
	snprintf(t.description, sizeof(t.description), "renamed");
	t.max_live = 99;
	t.io_uring = false;
	assert_int_equal(o->tenant_update(f->s, &t, &f->err), 0);
	assert_int_equal(o->tenant_get_by_id(f->s, id, &got, &f->err), 0);
	assert_false(got.io_uring);
	assert_string_equal(got.name, "acme2");
	assert_string_equal(got.description, "renamed");
	assert_int_equal(got.updated_ms, 2000);
	assert_int_equal(got.created_ms, 1000);
	assert_int_equal(got.max_live, 99);
	snprintf(t.name, sizeof(t.name), "zed");
	assert_int_equal(o->tenant_update(f->s, &t, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);
	t.id = id + 100;
	assert_int_equal(o->tenant_update(f->s, &t, &f->err), -ENOENT);

	/* delete; a deleted id is never handed out again */
	assert_int_equal(o->tenant_delete(f->s, other.id, &f->err), 0);
	assert_int_equal(o->tenant_delete(f->s, other.id, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);
	assert_true(add_tenant(f, "zed") > other.id);
}

static void test_tenant_list(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	/* bytewise order: upper case before lower case, '-' before digits */
	const char *names[] = {"beta", "Alpha", "a-1", "a1", "zulu"};
	const char *sorted[] = {"Alpha", "a-1", "a1", "beta", "zulu"};
	struct iso_tenant *list = NULL;
	int n = -1;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(names); i++)
		add_tenant(f, names[i]);
	assert_int_equal(o->tenant_list(f->s, NULL, 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 5);
	for (int i = 0; i < n; i++)
		assert_string_equal(list[i].name, sorted[i]);
	free(list);
	assert_int_equal(o->tenant_list(f->s, "a-1", 2, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].name, "a1");
	assert_string_equal(list[1].name, "beta");
	free(list);
	/* a cursor that no longer exists still pages */
	assert_int_equal(o->tenant_list(f->s, "b", 10, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].name, "beta");
	free(list);
	assert_int_equal(o->tenant_list(f->s, "zzz", 10, &list, &n, &f->err), 0);
	assert_int_equal(n, 0);
	free(list);
}

/* ---- tokens ---- */

static void test_tokens(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	int64_t acme = add_tenant(f, "acme"), beta = add_tenant(f, "beta");
	struct iso_token a = token("aaaaaaaaaaa1", acme, ISO_ROLE_TENANT_ADMIN);
	struct iso_token b = token("bbbbbbbbbbb2", acme, ISO_ROLE_TENANT_USER);
	struct iso_token c = token("ccccccccccc3", 0, ISO_ROLE_CLUSTER_ADMIN);
	struct iso_token d = token("ddddddddddd4", beta, ISO_ROLE_TENANT_USER);
	struct iso_token e = token("eeeeeeeeeee5", 0, ISO_ROLE_NODE_AGENT);
	struct iso_token got, *list = NULL;
	int n = -1;

	b.expires_ms = 9000;
	snprintf(e.node, sizeof(e.node), "node-07");
	assert_int_equal(o->token_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &b, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &c, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &d, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &e, &f->err), 0);
	assert_int_equal(o->token_insert(f->s, &a, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);
	{
		struct iso_token bad =
		    token("fffffffffff6", acme + beta + 100, ISO_ROLE_TENANT_USER);
		assert_int_equal(o->token_insert(f->s, &bad, &f->err), -ENOENT);
		assert_string_equal(f->err.field, "tenant");
		bad.tenant_id = -1;
		assert_int_equal(o->token_insert(f->s, &bad, &f->err), -EINVAL);
		bad.tenant_id = acme;
		bad.role = (enum iso_role)99;
		assert_int_equal(o->token_insert(f->s, &bad, &f->err), -EINVAL);
		assert_string_equal(f->err.field, "role");
	}

	assert_int_equal(o->token_get(f->s, b.id, &got, &f->err), 0);
	assert_int_equal(got.tenant_id, acme);
	assert_int_equal(got.role, ISO_ROLE_TENANT_USER);
	assert_string_equal(got.user, "user-bbbbbbbbbbb2");
	assert_string_equal(got.description, "token bbbbbbbbbbb2");
	assert_memory_equal(got.hash, b.hash, sizeof(b.hash));
	assert_int_equal(got.created_ms, 5000);
	assert_int_equal(got.expires_ms, 9000);
	assert_int_equal(got.revoked_ms, 0);
	assert_int_equal(o->token_get(f->s, e.id, &got, &f->err), 0);
	assert_int_equal(got.tenant_id, 0);
	assert_string_equal(got.node, "node-07");
	assert_int_equal(o->token_get(f->s, "000000000000", &got, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);

	/* lists: every token, one tenant's, the cluster-wide ones (0), pages */
	assert_int_equal(o->token_list(f->s, -1, NULL, 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 5);
	assert_string_equal(list[0].id, a.id);
	assert_string_equal(list[4].id, e.id);
	free(list);
	assert_int_equal(o->token_list(f->s, acme, NULL, 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	free(list);
	assert_int_equal(o->token_list(f->s, 0, NULL, 0, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].id, c.id);
	assert_string_equal(list[1].id, e.id);
	free(list);
	assert_int_equal(o->token_list(f->s, -1, b.id, 2, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].id, c.id);
	assert_string_equal(list[1].id, d.id);
	free(list);

	/* live counts, revocation (the first time stays), revoke a tenant's */
	assert_int_equal(o->token_count_live(f->s, acme, 8000, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(o->token_count_live(f->s, acme, 9000, &n, &f->err), 0);
	assert_int_equal(n, 1); /* b expired at 9000 */
	assert_int_equal(o->token_revoke(f->s, a.id, 7000, &f->err), 0);
	assert_int_equal(o->token_revoke(f->s, a.id, 7500, &f->err), 0);
	assert_int_equal(o->token_get(f->s, a.id, &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 7000);
	assert_int_equal(o->token_revoke(f->s, "000000000000", 7000, &f->err), -ENOENT);
	assert_int_equal(o->token_revoke(f->s, a.id, 0, &f->err), -EINVAL);
	assert_int_equal(o->token_count_live(f->s, acme, 8000, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(o->token_revoke_tenant(f->s, acme, 8000, &f->err), 0);
	assert_int_equal(o->token_get(f->s, a.id, &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 7000);
	assert_int_equal(o->token_get(f->s, b.id, &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 8000);
	assert_int_equal(o->token_get(f->s, d.id, &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 0);
	assert_int_equal(o->token_get(f->s, c.id, &got, &f->err), 0);
	assert_int_equal(got.revoked_ms, 0);
	assert_int_equal(o->token_revoke_tenant(f->s, 0, 8000, &f->err), -EINVAL);
	assert_int_equal(o->token_revoke_tenant(f->s, acme, 0, &f->err), -EINVAL);
	assert_int_equal(o->token_count_live(f->s, acme, 8000, &n, &f->err), 0);
	assert_int_equal(n, 0);
}

/* ---- node state, fabric ---- */

static void test_node_state(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_node_state a = {.name = "node-b", .sched = ISO_NODE_CORDONED};
	struct iso_node_state b = {.name = "node-a", .sched = ISO_NODE_DRAINING};
	struct iso_node_state *list = NULL;
	int n = -1;

	assert_int_equal(o->node_state_list(f->s, &list, &n, &f->err), 0);
	assert_int_equal(n, 0);
	free(list);
	assert_int_equal(o->node_state_set(f->s, &a, &f->err), 0);
	assert_int_equal(o->node_state_set(f->s, &b, &f->err), 0);
	a.sched = ISO_NODE_DOWN;
	assert_int_equal(o->node_state_set(f->s, &a, &f->err), 0); /* upsert */
	assert_int_equal(o->node_state_list(f->s, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].name, "node-a");
	assert_int_equal(list[0].sched, ISO_NODE_DRAINING);
	assert_string_equal(list[1].name, "node-b");
	assert_int_equal(list[1].sched, ISO_NODE_DOWN);
	free(list);
	a.sched = (enum iso_node_sched)42;
	assert_int_equal(o->node_state_set(f->s, &a, &f->err), -EINVAL);
}

static void test_fabric(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_fabric_key_row k1 = {.pkey = 0x20, .tenant_id = 3};
	struct iso_fabric_key_row k2 = {.pkey = 0x10, .tenant_id = 4};
	struct iso_fabric_key_row bad = {.pkey = 0x7fff, .tenant_id = 4};
	struct iso_fabric_port_row p1 = {.node = "n2", .vf = 3, .tenant_id = 3};
	struct iso_fabric_port_row p2 = {.node = "n1", .vf = -1, .tenant_id = 4};
	struct iso_fabric_port_row p3 = {.node = "n2", .vf = 0, .tenant_id = 4};
	struct iso_fabric_key_row *keys = NULL;
	struct iso_fabric_port_row *ports = NULL;
	int n = -1;

	assert_int_equal(o->fabric_key_put(f->s, &k1, &f->err), 0);
	assert_int_equal(o->fabric_key_put(f->s, &k2, &f->err), 0);
	k1.tenant_id = 0; /* to quarantine */
	k1.released_ms = 77;
	assert_int_equal(o->fabric_key_put(f->s, &k1, &f->err), 0);
	assert_int_equal(o->fabric_key_put(f->s, &bad, &f->err), -EIO); /* out of range */
	assert_int_equal(f->err.code, ISO_E_INTERNAL);
	assert_int_equal(o->fabric_key_list(f->s, &keys, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(keys[0].pkey, 0x10);
	assert_int_equal(keys[0].tenant_id, 4);
	assert_int_equal(keys[1].pkey, 0x20);
	assert_int_equal(keys[1].tenant_id, 0);
	assert_int_equal(keys[1].released_ms, 77);
	free(keys);
	assert_int_equal(o->fabric_key_delete(f->s, 0x10, &f->err), 0);
	assert_int_equal(o->fabric_key_delete(f->s, 0x10, &f->err), 0); /* missing: fine */
	assert_int_equal(o->fabric_key_list(f->s, &keys, &n, &f->err), 0);
	assert_int_equal(n, 1);
	free(keys);

	assert_int_equal(o->fabric_port_put(f->s, &p1, &f->err), 0);
	assert_int_equal(o->fabric_port_put(f->s, &p2, &f->err), 0);
	assert_int_equal(o->fabric_port_put(f->s, &p3, &f->err), 0);
	p1.tenant_id = 9;
	assert_int_equal(o->fabric_port_put(f->s, &p1, &f->err), 0);
	assert_int_equal(o->fabric_port_list(f->s, &ports, &n, &f->err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(ports[0].node, "n1");
	assert_int_equal(ports[0].vf, -1);
	assert_string_equal(ports[1].node, "n2");
	assert_int_equal(ports[1].vf, 0);
	assert_int_equal(ports[2].vf, 3);
	assert_int_equal(ports[2].tenant_id, 9);
	free(ports);
	assert_int_equal(o->fabric_port_delete(f->s, "n2", 3, &f->err), 0);
	assert_int_equal(o->fabric_port_delete(f->s, "n2", 3, &f->err), 0);
	assert_int_equal(o->fabric_port_list(f->s, &ports, &n, &f->err), 0);
	assert_int_equal(n, 2);
	free(ports);
	p1.vf = -2;
	assert_int_equal(o->fabric_port_put(f->s, &p1, &f->err), -EIO);
}

/* ---- tenancy ---- */

static void test_orgs_projects(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_org o1 = {.name = "physics", .shares = 2, .created_ms = 10};
	struct iso_org o2 = {.name = "bio", .shares = 0.5, .created_ms = 20};
	int64_t acme = add_tenant(f, "acme"), beta = add_tenant(f, "beta");
	struct iso_project p1 = {.tenant_id = beta, .name = "x", .shares = 1};
	struct iso_project p2 = {.tenant_id = acme, .name = "y", .shares = 3};
	struct iso_project p3 = {.tenant_id = acme, .name = "a", .shares = 1.25};
	struct iso_project orphan = {.tenant_id = acme + beta + 100, .name = "z", .shares = 1};
	struct iso_org *orgs = NULL;
	struct iso_project *projects = NULL;
	int n = -1;

	assert_int_equal(o->org_put(f->s, &o1, &f->err), 0);
	assert_int_equal(o->org_put(f->s, &o2, &f->err), 0);
	o1.shares = 4;
	o1.created_ms = 99; /* an upsert keeps the creation time */
	assert_int_equal(o->org_put(f->s, &o1, &f->err), 0);
	assert_int_equal(o->org_list(f->s, &orgs, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(orgs[0].name, "bio");
	assert_true(orgs[0].shares == 0.5);
	assert_string_equal(orgs[1].name, "physics");
	assert_true(orgs[1].shares == 4);
	assert_int_equal(orgs[1].created_ms, 10);
	free(orgs);
	assert_int_equal(o->org_delete(f->s, "bio", &f->err), 0);
	assert_int_equal(o->org_delete(f->s, "bio", &f->err), 0);
	assert_int_equal(o->org_list(f->s, &orgs, &n, &f->err), 0);
	assert_int_equal(n, 1);
	free(orgs);

	assert_int_equal(o->project_put(f->s, &p1, &f->err), 0);
	assert_int_equal(o->project_put(f->s, &p2, &f->err), 0);
	assert_int_equal(o->project_put(f->s, &p3, &f->err), 0);
	p2.shares = 5;
	assert_int_equal(o->project_put(f->s, &p2, &f->err), 0);
	assert_int_equal(o->project_put(f->s, &orphan, &f->err), -EIO); /* no such tenant */
	assert_int_equal(o->project_list(f->s, &projects, &n, &f->err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(projects[0].tenant_id, acme);
	assert_string_equal(projects[0].name, "a");
	assert_true(projects[0].shares == 1.25);
	assert_string_equal(projects[1].name, "y");
	assert_true(projects[1].shares == 5);
	assert_int_equal(projects[2].tenant_id, beta);
	free(projects);
	assert_int_equal(o->project_delete(f->s, acme, "a", &f->err), 0);
	assert_int_equal(o->project_delete(f->s, acme, "a", &f->err), 0);
	/* a tenant's projects go with it */
	assert_int_equal(o->tenant_delete(f->s, beta, &f->err), 0);
	assert_int_equal(o->project_list(f->s, &projects, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(projects[0].name, "y");
	free(projects);
}

static struct iso_quota_row quota(const char *account, const char *kind, int64_t g, int64_t b,
                                  int64_t l)
{
	struct iso_quota_row q = {.guaranteed = g, .borrow_limit = b, .lend_limit = l};

	snprintf(q.account, sizeof(q.account), "%s", account);
	snprintf(q.kind, sizeof(q.kind), "%s", kind);
	return q;
}

static struct iso_usage_row usage(const char *account, int64_t start, int64_t end)
{
	struct iso_usage_row u = {.start_ms = start, .end_ms = end};

	snprintf(u.account, sizeof(u.account), "%s", account);
	snprintf(u.usage, sizeof(u.usage), "{\"gpus\": %" PRId64 "}", end - start);
	return u;
}

static void test_quotas_usage(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_quota_row qs[] = {
	    quota("tenant:acme", "gpus", 8, INT64_MAX, 2),
	    quota("tenant:acme", "cpus", 64, 10, INT64_MAX),
	    quota("tenant:acme/p1", "gpus", 2, 0, 0),
	    quota("tenant:acmex", "gpus", 1, 1, 1),
	};
	struct iso_usage_row us[] = {
	    usage("tenant:acme", 100, 300), usage("tenant:acme/p1", 50, 200),
	    usage("tenant:acmex", 10, 250),
	    usage("tenant:acme", 0, 200), /* same end: insertion order */
	};
	struct iso_quota_row *ql = NULL;
	struct iso_usage_row *ul = NULL;
	int n = -1;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(qs); i++)
		assert_int_equal(o->quota_put(f->s, &qs[i], &f->err), 0);
	qs[0].guaranteed = 9;
	assert_int_equal(o->quota_put(f->s, &qs[0], &f->err), 0);
	assert_int_equal(o->quota_list(f->s, &ql, &n, &f->err), 0);
	assert_int_equal(n, 4);
	assert_string_equal(ql[0].account, "tenant:acme");
	assert_string_equal(ql[0].kind, "cpus");
	assert_int_equal(ql[0].lend_limit, INT64_MAX);
	assert_int_equal(ql[0].borrow_limit, 10);
	assert_string_equal(ql[1].kind, "gpus");
	assert_int_equal(ql[1].guaranteed, 9);
	assert_int_equal(ql[1].borrow_limit, INT64_MAX);
	assert_int_equal(ql[1].lend_limit, 2);
	assert_string_equal(ql[2].account, "tenant:acme/p1");
	assert_string_equal(ql[3].account, "tenant:acmex");
	free(ql);
	assert_int_equal(o->quota_delete(f->s, "tenant:acme", "cpus", &f->err), 0);
	assert_int_equal(o->quota_delete(f->s, "tenant:acme", "cpus", &f->err), 0);
	assert_int_equal(o->quota_list(f->s, &ql, &n, &f->err), 0);
	assert_int_equal(n, 3);
	free(ql);
	assert_int_equal(o->quota_delete(f->s, "tenant:acmex", NULL, &f->err), 0); /* all kinds */
	assert_int_equal(o->quota_list(f->s, &ql, &n, &f->err), 0);
	assert_int_equal(n, 2);
	free(ql);
	assert_int_equal(o->quota_put(f->s, &qs[3], &f->err), 0);

	for (size_t i = 0; i < ISO_ARRAY_SIZE(us); i++)
		assert_int_equal(o->usage_append(f->s, &us[i], &f->err), 0);
	assert_int_equal(o->usage_list(f->s, 0, &ul, &n, &f->err), 0);
	assert_int_equal(n, 4);
	assert_string_equal(ul[0].account, "tenant:acme/p1"); /* end 200, appended first */
	assert_int_equal(ul[1].start_ms, 0);                  /* end 200, appended later */
	assert_int_equal(ul[2].end_ms, 250);
	assert_int_equal(ul[3].end_ms, 300);
	assert_string_equal(ul[3].usage, "{\"gpus\": 200}");
	free(ul);
	assert_int_equal(o->usage_list(f->s, 250, &ul, &n, &f->err), 0);
	assert_int_equal(n, 2);
	free(ul);

	/* forgetting a tenant takes its projects' rows, not a longer name's */
	assert_int_equal(o->account_forget(f->s, "tenant:acme", &f->err), 0);
	assert_int_equal(o->quota_list(f->s, &ql, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(ql[0].account, "tenant:acmex");
	free(ql);
	assert_int_equal(o->usage_list(f->s, 0, &ul, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(ul[0].account, "tenant:acmex");
	free(ul);
}

static void test_gpu_faults(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_gpu_fault a = {.node = "n2", .gpu = 1, .xid = 79, .at_ms = 10};
	struct iso_gpu_fault b = {.node = "n1", .gpu = 7, .xid = 48, .at_ms = 20};
	struct iso_gpu_fault *list = NULL;
	int n = -1;

	assert_int_equal(o->gpu_fault_put(f->s, &a, &f->err), 0);
	assert_int_equal(o->gpu_fault_put(f->s, &b, &f->err), 0);
	a.xid = 94;
	a.at_ms = 30;
	assert_int_equal(o->gpu_fault_put(f->s, &a, &f->err), 0);
	assert_int_equal(o->gpu_fault_list(f->s, &list, &n, &f->err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].node, "n1");
	assert_int_equal(list[0].gpu, 7);
	assert_int_equal(list[1].xid, 94);
	assert_int_equal(list[1].at_ms, 30);
	free(list);
	assert_int_equal(o->gpu_fault_delete(f->s, "n2", 1, &f->err), 0);
	assert_int_equal(o->gpu_fault_delete(f->s, "n2", 1, &f->err), 0);
	assert_int_equal(o->gpu_fault_list(f->s, &list, &n, &f->err), 0);
	assert_int_equal(n, 1);
	free(list);
}

/* ---- allocations ---- */

static void test_alloc_roundtrip(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_allocation a = alloc("a-1", 5, "acme", 100, ISO_ALLOC_ACTIVE, 3);
	struct iso_allocation p = alloc("a-2", 5, "acme", 101, ISO_ALLOC_PENDING, 2);
	struct iso_allocation got = {0};

	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->alloc_insert(f->s, &p, &f->err), 0);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), 0);
	assert_alloc_equal(&a, &got, true);
	iso_allocation_clear(&got);
	assert_int_equal(o->alloc_get(f->s, "a-2", &got, &f->err), 0);
	assert_alloc_equal(&p, &got, true);
	assert_int_equal(got.n_members, 0);
	iso_allocation_clear(&got);
	assert_int_equal(o->alloc_get(f->s, "a-9", &got, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);

	/* update replaces every column and the children */
	iso_allocation_clear(&p);
	p = alloc("a-2", 5, "acme", 101, ISO_ALLOC_PLACED, 2);
	p.updated_ms = 555;
	snprintf(p.reason, sizeof(p.reason), "placed at last");
	assert_int_equal(o->alloc_update(f->s, &p, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, "a-2", &got, &f->err), 0);
	assert_alloc_equal(&p, &got, true);
	iso_allocation_clear(&got);
	iso_allocation_clear(&a);
	a = alloc("a-1", 5, "acme", 100, ISO_ALLOC_RELEASED, 1); /* fewer children */
	assert_int_equal(o->alloc_update(f->s, &a, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), 0);
	assert_alloc_equal(&a, &got, true);
	iso_allocation_clear(&got);
	iso_allocation_clear(&a);
	a = alloc("a-7", 5, "acme", 100, ISO_ALLOC_ACTIVE, 1);
	assert_int_equal(o->alloc_update(f->s, &a, &f->err), -ENOENT);
	assert_int_equal(o->alloc_get(f->s, "a-7", &got, &f->err), -ENOENT);
	iso_allocation_clear(&a);

	/* a slot naming a member that is not there is a caller bug: refused */
	a = alloc("a-8", 5, "acme", 100, ISO_ALLOC_ACTIVE, 2);
	a.slots[1].member = 5;
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), -EIO);
	assert_int_equal(o->alloc_get(f->s, "a-8", &got, &f->err), -ENOENT);
	iso_allocation_clear(&a);
	iso_allocation_clear(&p);
}

static void ids_are(struct iso_allocation *list, int n, const char *const *want, int nwant)
{
	assert_int_equal(n, nwant);
	for (int i = 0; i < n; i++)
		assert_string_equal(list[i].id, want[i]);
	iso_allocations_free(list, n);
}

static void test_alloc_list(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	/* (created_ms, id) order; equal times order by id */
	struct iso_allocation as[] = {
	    alloc("a-3", 1, "acme", 100, ISO_ALLOC_ACTIVE, 1),
	    alloc("a-1", 1, "acme", 200, ISO_ALLOC_RELEASED, 1),
	    alloc("a-2", 2, "beta", 100, ISO_ALLOC_PENDING, 1),
	    alloc("a-4", 1, "acme", 300, ISO_ALLOC_FAILED, 0),
	    alloc("a-5", 2, "beta", 400, ISO_ALLOC_PLACED, 2),
	};
	struct iso_alloc_filter all = {.state = -1};
	struct iso_allocation *list = NULL;
	int n = -1;

	snprintf(as[2].owner, sizeof(as[2].owner), "bob");
	for (size_t i = 0; i < ISO_ARRAY_SIZE(as); i++)
		assert_int_equal(o->alloc_insert(f->s, &as[i], &f->err), 0);

	assert_int_equal(o->alloc_list(f->s, &all, &list, &n, &f->err), 0);
	assert_int_equal(list[4].n_members, 2); /* children come with lists */
	assert_int_equal(list[4].n_slots, 2);
	ids_are(list, n, (const char *const[]){"a-2", "a-3", "a-1", "a-4", "a-5"}, 5);
	{
		struct iso_alloc_filter fl = {.state = -1, .tenant_id = 1};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-3", "a-1", "a-4"}, 3);
	}
	{
		struct iso_alloc_filter fl = {.state = -1, .live_only = true};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-2", "a-3", "a-5"}, 3);
	}
	{
		struct iso_alloc_filter fl = {.state = -1, .live_only = true, .tenant_id = 2};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-2", "a-5"}, 2);
	}
	{
		struct iso_alloc_filter fl = {.state = ISO_ALLOC_RELEASED};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-1"}, 1);
	}
	{
		struct iso_alloc_filter fl = {.state = ISO_ALLOC_PLACED, .tenant_id = 2};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-5"}, 1);
	}
	{
		struct iso_alloc_filter fl = {.state = -1, .owner = "bob"};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-2"}, 1);
	}
	/* pages: limit and a cursor; the cursor must be one the filter lists */
	{
		struct iso_alloc_filter fl = {.state = -1, .limit = 2};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-2", "a-3"}, 2);
		fl.after = "a-3";
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-1", "a-4"}, 2);
		fl.after = "a-5";
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, NULL, 0);
		fl.after = "a-9";
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), -EINVAL);
		assert_string_equal(f->err.field, "after");
		fl.after = "a-2"; /* beta's */
		fl.tenant_id = 1;
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), -EINVAL);
		fl.tenant_id = 0;
		fl.owner = "bob";
		fl.after = "a-3"; /* alice's */
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), -EINVAL);
	}
	{
		struct iso_alloc_filter fl = {.state = 42};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), -EINVAL);
		fl.state = -1;
		fl.tenant_id = -1;
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), -EINVAL);
	}

	/* live counts */
	assert_int_equal(o->alloc_count_live(f->s, 0, &n, &f->err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(o->alloc_count_live(f->s, 1, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(o->alloc_count_live(f->s, 3, &n, &f->err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(o->alloc_count_live(f->s, -1, &n, &f->err), -EINVAL);

	/* recent: newest first, without children */
	assert_int_equal(o->alloc_recent(f->s, 3, &list, &n, &f->err), 0);
	assert_int_equal(list[0].n_members, 0);
	assert_null(list[0].placed);
	assert_alloc_equal(&as[4], &list[0], false);
	ids_are(list, n, (const char *const[]){"a-5", "a-4", "a-1"}, 3);
	assert_int_equal(o->alloc_recent(f->s, 100, &list, &n, &f->err), 0);
	ids_are(list, n, (const char *const[]){"a-5", "a-4", "a-1", "a-3", "a-2"}, 5);
	assert_int_equal(o->alloc_recent(f->s, 0, &list, &n, &f->err), -EINVAL);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(as); i++)
		iso_allocation_clear(&as[i]);
}

/* The plan of `sql` (one row of text per step, joined), to see which index
 * serves it. PostgreSQL is told to avoid sequential scans, so that a tiny
 * table does not hide an index the query cannot use. */
static void plan_of(struct fx *f, const char *sql, char *out, size_t size)
{
	char q[1024];

	out[0] = '\0';
	if (f->b == B_SQLITE) {
		sqlite3 *db = NULL;
		sqlite3_stmt *st = NULL;
		snprintf(q, sizeof(q), "EXPLAIN QUERY PLAN %s", sql);
		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
		while (sqlite3_step(st) == SQLITE_ROW)
			snprintf(out + strlen(out), size - strlen(out), "%s\n",
			         (const char *)sqlite3_column_text(st, 3));
		sqlite3_finalize(st);
		sqlite3_close(db);
		return;
	}
	PGconn *c = PQconnectdb(f->conninfo);
	PGresult *res;
	snprintf(q, sizeof(q), "SET enable_seqscan = off; EXPLAIN %s", sql);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	res = PQexec(c, q);
	assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(res); i++)
		snprintf(out + strlen(out), size - strlen(out), "%s\n", PQgetvalue(res, i, 0));
	PQclear(res);
	PQfinish(c);
}

/* Idempotency keys (docs/api.md): written by the insert with the request's
 * hash, unique per (tenant, key) and only per tenant, never changed by an
 * update, found by alloc_get_by_key and the list filter through their
 * index, and read back after a reopen. */
static void test_alloc_idem_key(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_allocation a = alloc("a-1", 1, "acme", 100, ISO_ALLOC_ACTIVE, 2);
	struct iso_allocation b = alloc("a-2", 2, "beta", 101, ISO_ALLOC_PENDING, 1);
	struct iso_allocation c = alloc("a-3", 1, "acme", 102, ISO_ALLOC_ACTIVE, 1);
	struct iso_allocation d = alloc("a-4", 1, "acme", 103, ISO_ALLOC_ACTIVE, 1);
	struct iso_allocation e = alloc("a-5", 1, "acme", 104, ISO_ALLOC_ACTIVE, 1);
	struct iso_allocation got = {0}, *list = NULL;
	char plan[2048];
	int n = -1;

	snprintf(a.idem_key, sizeof(a.idem_key), "slurm-42");
	memset(a.idem_hash, 'a', 64);
	snprintf(b.idem_key, sizeof(b.idem_key), "slurm-42"); /* another tenant: its own */
	memset(b.idem_hash, 'b', 64);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->alloc_insert(f->s, &b, &f->err), 0);
	/* the same key in the same tenant clashes, and nothing of it stays */
	snprintf(c.idem_key, sizeof(c.idem_key), "slurm-42");
	assert_int_equal(o->alloc_insert(f->s, &c, &f->err), -EEXIST);
	assert_int_equal(f->err.code, ISO_E_CONFLICT);
	assert_int_equal(o->alloc_get(f->s, "a-3", &got, &f->err), -ENOENT);
	/* allocations without a key never clash */
	c.idem_key[0] = '\0';
	assert_int_equal(o->alloc_insert(f->s, &c, &f->err), 0);
	assert_int_equal(o->alloc_insert(f->s, &d, &f->err), 0);
	/* a 128-character key is stored whole */
	memset(e.idem_key, 'K', 128);
	e.idem_key[128] = '\0';
	memset(e.idem_hash, 'e', 64);
	assert_int_equal(o->alloc_insert(f->s, &e, &f->err), 0);

	assert_int_equal(o->alloc_get_by_key(f->s, 1, "slurm-42", &got, &f->err), 0);
	assert_alloc_equal(&a, &got, true);
	iso_allocation_clear(&got);
	assert_int_equal(o->alloc_get_by_key(f->s, 2, "slurm-42", &got, &f->err), 0);
	assert_alloc_equal(&b, &got, true);
	iso_allocation_clear(&got);
	assert_int_equal(o->alloc_get_by_key(f->s, 1, e.idem_key, &got, &f->err), 0);
	assert_string_equal(got.id, "a-5");
	iso_allocation_clear(&got);
	assert_int_equal(o->alloc_get_by_key(f->s, 3, "slurm-42", &got, &f->err), -ENOENT);
	assert_int_equal(f->err.code, ISO_E_NOT_FOUND);
	assert_int_equal(o->alloc_get_by_key(f->s, 1, "slurm-43", &got, &f->err), -ENOENT);
	assert_int_equal(o->alloc_get_by_key(f->s, 1, "", &got, &f->err), -ENOENT);

	/* an update keeps the key whatever the struct says */
	struct iso_allocation upd = alloc("a-1", 1, "acme", 100, ISO_ALLOC_RELEASED, 1);
	assert_int_equal(o->alloc_update(f->s, &upd, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), 0);
	assert_string_equal(got.idem_key, "slurm-42");
	assert_string_equal(got.idem_hash, a.idem_hash);
	assert_int_equal(got.state, ISO_ALLOC_RELEASED);
	iso_allocation_clear(&got);
	iso_allocation_clear(&upd);

	/* the list filter: every tenant's, one tenant's, with state and live */
	{
		struct iso_alloc_filter fl = {.state = -1, .idem_key = "slurm-42"};
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-1", "a-2"}, 2);
		fl.tenant_id = 2;
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		assert_int_equal(n, 1);
		assert_string_equal(list[0].idem_key, "slurm-42");
		ids_are(list, n, (const char *const[]){"a-2"}, 1);
		fl.tenant_id = 1;
		fl.live_only = true; /* a-1 is released now */
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, NULL, 0);
		fl.live_only = false;
		fl.state = ISO_ALLOC_RELEASED;
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-1"}, 1);
		fl.state = -1;
		fl.owner = "bob";
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, NULL, 0);
		fl.owner = NULL;
		fl.tenant_id = 0;
		fl.after = "a-1";
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, (const char *const[]){"a-2"}, 1);
		fl.after = NULL;
		fl.idem_key = "nope";
		assert_int_equal(o->alloc_list(f->s, &fl, &list, &n, &f->err), 0);
		ids_are(list, n, NULL, 0);
	}

	/* by the index, not a scan of the history */
	plan_of(f,
	        "SELECT id FROM allocations WHERE idempotency_key = 'slurm-42' AND tenant_id = 1",
	        plan, sizeof(plan));
	assert_non_null(strstr(plan, "allocations_idempotency"));
	plan_of(f, "SELECT id FROM allocations WHERE idempotency_key = 'slurm-42'", plan,
	        sizeof(plan));
	assert_non_null(strstr(plan, "allocations_idempotency"));

	/* read back after a reopen */
	fx_reopen(f);
	o = f->s->ops;
	assert_int_equal(o->alloc_get_by_key(f->s, 2, "slurm-42", &got, &f->err), 0);
	assert_alloc_equal(&b, &got, true);
	iso_allocation_clear(&got);
	iso_allocation_clear(&a);
	iso_allocation_clear(&b);
	iso_allocation_clear(&c);
	iso_allocation_clear(&d);
	iso_allocation_clear(&e);
}

/* A store from before idempotency keys: its allocations come back without
 * one, and the migration's unique index then holds. */
static void test_idem_key_migrated(void **state)
{
	struct fx *f = *state;
	struct iso_allocation a = alloc("a-1", 1, "acme", 100, ISO_ALLOC_ACTIVE, 1), got = {0};
	struct iso_allocation b = alloc("a-2", 1, "acme", 101, ISO_ALLOC_ACTIVE, 1);
	/* the idempotency keys came one migration before the partition mode:
	 * undo both */
	static const char undo[] = "DROP TABLE neutron_objects; DROP TABLE neutron_projects;"
	                           " ALTER TABLE tenants DROP COLUMN partition_mode;"
	                           " ALTER TABLE fabric_keys DROP COLUMN alloc_id;"
	                           " ALTER TABLE fabric_ports DROP COLUMN alloc_id;"
	                           " DROP INDEX allocations_idempotency;"
	                           " ALTER TABLE allocations DROP COLUMN idempotency_key;"
	                           " ALTER TABLE allocations DROP COLUMN idempotency_hash;"
	                           " DELETE FROM schema_version WHERE version >="
	                           " (SELECT max(version) FROM schema_version) - 2";

	snprintf(a.idem_key, sizeof(a.idem_key), "k1");
	snprintf(a.idem_hash, sizeof(a.idem_hash), "h1");
	assert_int_equal(f->s->ops->alloc_insert(f->s, &a, &f->err), 0);
	iso_store_close(f->s);
	f->s = NULL;
	if (f->b == B_SQLITE) {
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_exec(db, undo, NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
	} else {
		pg_raw(f->conninfo, undo);
	}
	fx_open(f);
	assert_int_equal(f->s->ops->alloc_get(f->s, "a-1", &got, &f->err), 0);
	assert_string_equal(got.idem_key, "");
	assert_string_equal(got.idem_hash, "");
	iso_allocation_clear(&got);
	snprintf(b.idem_key, sizeof(b.idem_key), "k1");
	assert_int_equal(f->s->ops->alloc_insert(f->s, &b, &f->err), 0);
	assert_int_equal(f->s->ops->alloc_get_by_key(f->s, 1, "k1", &got, &f->err), 0);
	assert_string_equal(got.id, "a-2");
	iso_allocation_clear(&got);
	iso_allocation_clear(&a);
	iso_allocation_clear(&b);
}

/* ---- audit log ---- */

struct scan {
	int n;
	int64_t seqs[8];
	int stop_at; /* return 1 at this count, -1: never */
	int fail_at; /* return -ECANCELED at this count, -1: never */
	size_t last_len;
	char last_body[64];
	uint8_t last_leaf[ISO_AUDIT_HASH_LEN];
};

static int on_event(void *arg, const struct iso_audit_record *rec)
{
	struct scan *sc = arg;

	if (sc->n < 8)
		sc->seqs[sc->n] = rec->seq;
	sc->n++;
	sc->last_len = rec->len;
	memcpy(sc->last_body, rec->body, rec->len < 64 ? rec->len : 64);
	memcpy(sc->last_leaf, rec->leaf, ISO_AUDIT_HASH_LEN);
	if (sc->n == sc->fail_at)
		return -ECANCELED;
	return sc->n == sc->stop_at ? 1 : 0;
}

static struct iso_audit_record record(int64_t seq, int64_t tenant_id, const char *body, size_t len)
{
	struct iso_audit_record r = {.seq = seq, .tenant_id = tenant_id, .body = body, .len = len};

	for (int i = 0; i < ISO_AUDIT_HASH_LEN; i++)
		r.leaf[i] = (uint8_t)(seq + i);
	return r;
}

static int on_head(void *arg, const struct iso_audit_head *h)
{
	struct scan *sc = arg;

	if (sc->n < 8)
		sc->seqs[sc->n] = (int64_t)h->size;
	sc->n++;
	return sc->n == sc->stop_at ? 1 : 0;
}

static void test_audit(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	static const char bin[] = {'{', 0, '\x01', '\xff', '}'}; /* bytes, NUL included */
	struct iso_audit_record r0 = record(0, 0, "{\"a\":0}", 7);
	struct iso_audit_record r1 = record(1, 7, bin, sizeof(bin));
	struct iso_audit_record r2 = record(2, 8, "{}", 2);
	struct iso_audit_record r3 = record(3, 7, "{\"b\":3}", 7);
	struct iso_audit_head h = {.size = 2, .time_ms = 50}, got;
	struct scan sc = {.stop_at = -1, .fail_at = -1};
	int64_t count = -1;

	assert_int_equal(o->audit_count(f->s, &count, &f->err), 0);
	assert_int_equal(count, 0);
	assert_int_equal(o->audit_head_latest(f->s, &got, &f->err), -ENOENT);
	assert_int_equal(o->audit_append(f->s, &r0, &f->err), 0);
	assert_int_equal(o->audit_append(f->s, &r1, &f->err), 0);
	assert_int_equal(o->audit_append(f->s, &r2, &f->err), 0);
	assert_int_equal(o->audit_append(f->s, &r3, &f->err), 0);
	assert_int_equal(o->audit_append(f->s, &r1, &f->err), -EEXIST);
	assert_int_equal(o->audit_count(f->s, &count, &f->err), 0);
	assert_int_equal(count, 4);

	assert_int_equal(o->audit_scan(f->s, -1, 0, 0, on_event, &sc, &f->err), 0);
	assert_int_equal(sc.n, 4);
	assert_int_equal(sc.seqs[0], 0);
	assert_int_equal(sc.seqs[3], 3);
	memset(&sc, 0, sizeof(sc));
	sc.stop_at = sc.fail_at = -1;
	assert_int_equal(o->audit_scan(f->s, 0, 7, 0, on_event, &sc, &f->err), 0);
	assert_int_equal(sc.n, 2);
	assert_int_equal(sc.seqs[0], 1);
	assert_int_equal(sc.seqs[1], 3);
	memset(&sc, 0, sizeof(sc));
	sc.stop_at = sc.fail_at = -1;
	assert_int_equal(o->audit_scan(f->s, 0, 7, 1, on_event, &sc, &f->err), 0);
	assert_int_equal(sc.n, 1);
	assert_int_equal(sc.last_len, sizeof(bin));
	assert_memory_equal(sc.last_body, bin, sizeof(bin));
	assert_memory_equal(sc.last_leaf, r1.leaf, ISO_AUDIT_HASH_LEN);
	memset(&sc, 0, sizeof(sc));
	sc.stop_at = 2;
	sc.fail_at = -1;
	assert_int_equal(o->audit_scan(f->s, -1, 0, 0, on_event, &sc, &f->err), 0);
	assert_int_equal(sc.n, 2);
	memset(&sc, 0, sizeof(sc));
	sc.stop_at = -1;
	sc.fail_at = 3;
	assert_int_equal(o->audit_scan(f->s, -1, 0, 0, on_event, &sc, &f->err), -ECANCELED);
	assert_int_equal(sc.n, 3);

	/* heads: in signing order, sizes may repeat, latest is the last put */
	for (int i = 0; i < ISO_AUDIT_HASH_LEN; i++)
		h.root[i] = (uint8_t)(0xa0 + i);
	for (int i = 0; i < ISO_AUDIT_SIG_LEN; i++)
		h.sig[i] = (uint8_t)i;
	assert_int_equal(o->audit_head_put(f->s, &h, &f->err), 0);
	h.size = 4;
	h.time_ms = 60;
	assert_int_equal(o->audit_head_put(f->s, &h, &f->err), 0);
	h.size = 2;
	h.time_ms = 70;
	assert_int_equal(o->audit_head_put(f->s, &h, &f->err), 0);
	assert_int_equal(o->audit_head_latest(f->s, &got, &f->err), 0);
	assert_int_equal(got.size, 2);
	assert_int_equal(got.time_ms, 70);
	assert_memory_equal(got.root, h.root, ISO_AUDIT_HASH_LEN);
	assert_memory_equal(got.sig, h.sig, ISO_AUDIT_SIG_LEN);
	memset(&sc, 0, sizeof(sc));
	sc.stop_at = -1;
	assert_int_equal(o->audit_head_scan(f->s, on_head, &sc, &f->err), 0);
	assert_int_equal(sc.n, 3);
	assert_int_equal(sc.seqs[0], 2);
	assert_int_equal(sc.seqs[1], 4);
	assert_int_equal(sc.seqs[2], 2);
	memset(&sc, 0, sizeof(sc));
	sc.stop_at = 1;
	assert_int_equal(o->audit_head_scan(f->s, on_head, &sc, &f->err), 0);
	assert_int_equal(sc.n, 1);
}

static int count_event(void *arg, const struct iso_audit_record *rec)
{
	int64_t *next = arg;

	if (rec->seq != *next)
		return -EPROTO;
	(*next)++;
	return 0;
}

/* More events than a backend reads in one page, in order, none twice. */
static void test_audit_long_scan(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	int64_t next = 0;

	assert_int_equal(o->begin(f->s, &f->err), 0);
	for (int64_t i = 0; i < 2500; i++) {
		struct iso_audit_record r = record(i, i % 3, "{}", 2);
		assert_int_equal(o->audit_append(f->s, &r, &f->err), 0);
	}
	assert_int_equal(o->commit(f->s, &f->err), 0);
	assert_int_equal(o->audit_scan(f->s, -1, 0, 0, count_event, &next, &f->err), 0);
	assert_int_equal(next, 2500);
	next = 1000;
	assert_int_equal(o->audit_scan(f->s, 999, 0, 1200, count_event, &next, &f->err), 0);
	assert_int_equal(next, 2200);
}

/* ---- transactions and reopening ---- */

static void test_transactions(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant t = tenant("kept"), u = tenant("dropped"), got;
	char buf[16];

	/* commit keeps, rollback drops */
	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_int_equal(o->begin(f->s, &f->err), -EBUSY);
	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	assert_int_equal(o->meta_set(f->s, "k", "v", &f->err), 0);
	assert_int_equal(o->commit(f->s, &f->err), 0);
	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_int_equal(o->tenant_insert(f->s, &u, &f->err), 0);
	assert_int_equal(o->meta_set(f->s, "k", "w", &f->err), 0);
	o->rollback(f->s);
	assert_int_equal(o->tenant_get_by_name(f->s, "dropped", &got, &f->err), -ENOENT);
	assert_int_equal(o->meta_get(f->s, "k", buf, sizeof(buf), &f->err), 0);
	assert_string_equal(buf, "v");
	assert_int_equal(o->commit(f->s, &f->err), -EIO); /* none open */
	o->rollback(f->s);                                /* none open: harmless */

	/* a failed op inside a transaction undoes only itself: the rest commits */
	assert_int_equal(o->begin(f->s, &f->err), 0);
	u = tenant("second");
	assert_int_equal(o->tenant_insert(f->s, &u, &f->err), 0);
	struct iso_tenant dup = tenant("kept");
	assert_int_equal(o->tenant_insert(f->s, &dup, &f->err), -EEXIST);
	struct iso_project orphan = {.tenant_id = 9999, .name = "p", .shares = 1};
	assert_int_equal(o->project_put(f->s, &orphan, &f->err), -EIO);
	struct iso_fabric_key_row bad = {.pkey = 0};
	assert_int_equal(o->fabric_key_put(f->s, &bad, &f->err), -EIO);
	struct iso_allocation a = alloc("a-1", u.id, "second", 1, ISO_ALLOC_ACTIVE, 2);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), -EEXIST);
	struct iso_audit_record r = record(0, 0, "{}", 2);
	assert_int_equal(o->audit_append(f->s, &r, &f->err), 0);
	assert_int_equal(o->audit_append(f->s, &r, &f->err), -EEXIST);
	t.id = 99999;
	assert_int_equal(o->tenant_update(f->s, &t, &f->err), -ENOENT);
	assert_int_equal(o->meta_set(f->s, "after", "failures", &f->err), 0);
	assert_int_equal(o->commit(f->s, &f->err), 0);
	assert_int_equal(o->tenant_get_by_name(f->s, "second", &got, &f->err), 0);
	assert_int_equal(o->meta_get(f->s, "after", buf, sizeof(buf), &f->err), 0);
	struct iso_allocation ga = {0};
	assert_int_equal(o->alloc_get(f->s, "a-1", &ga, &f->err), 0);
	assert_int_equal(ga.n_slots, 2);
	iso_allocation_clear(&ga);
	iso_allocation_clear(&a);

	/* everything committed is there after a reopen, nothing rolled back is */
	fx_reopen(f);
	o = f->s->ops;
	assert_int_equal(o->tenant_get_by_name(f->s, "kept", &got, &f->err), 0);
	assert_int_equal(o->tenant_get_by_name(f->s, "second", &got, &f->err), 0);
	assert_int_equal(o->tenant_get_by_name(f->s, "dropped", &got, &f->err), -ENOENT);
	assert_int_equal(o->meta_get(f->s, "k", buf, sizeof(buf), &f->err), 0);
	assert_string_equal(buf, "v");
	int64_t count = 0;
	assert_int_equal(o->audit_count(f->s, &count, &f->err), 0);
	assert_int_equal(count, 1);
}

/* A rolled-back alloc write leaves none of its rows; reads in the same
 * transaction see the transaction's own writes. */
static void test_alloc_in_transaction(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_allocation a = alloc("a-1", 1, "acme", 10, ISO_ALLOC_ACTIVE, 3), got = {0};
	int n = -1;

	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), 0);
	assert_int_equal(got.n_slots, 3);
	iso_allocation_clear(&got);
	assert_int_equal(o->alloc_count_live(f->s, 1, &n, &f->err), 0);
	assert_int_equal(n, 1);
	o->rollback(f->s);
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), -ENOENT);
	assert_int_equal(o->alloc_count_live(f->s, 0, &n, &f->err), 0);
	assert_int_equal(n, 0);
	/* again outside a transaction: the insert is atomic on its own */
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), 0);
	assert_alloc_equal(&a, &got, true);
	iso_allocation_clear(&got);
	iso_allocation_clear(&a);
}

static void test_reopen_migrated(void **state)
{
	struct fx *f = *state;
	int64_t id = add_tenant(f, "acme");
	struct iso_tenant got;

	/* opening an up-to-date store twice changes nothing and loses nothing */
	fx_reopen(f);
	fx_reopen(f);
	assert_int_equal(f->s->ops->tenant_get_by_name(f->s, "acme", &got, &f->err), 0);
	assert_int_equal(got.id, id);
	assert_true(add_tenant(f, "beta") > id);
}

/* A database from before the tenants' io_uring switch (docs/sandbox.md):
 * the migration adds the column with false for every existing tenant, even
 * one whose io_uring was true before the column was dropped here. The switch
 * came before the heads' key ids and the allocations' idempotency keys:
 * undone by dropping their columns and the four highest schema_version
 * rows. */
static void test_io_uring_migrated(void **state)
{
	struct fx *f = *state;
	struct iso_tenant t = tenant("old"), got;
	/* io_uring came before the heads' key_id, the allocations' idempotency
	 * keys and the partition mode: undo all four. */
	static const char undo[] = "DROP TABLE neutron_objects; DROP TABLE neutron_projects;"
	                           " ALTER TABLE tenants DROP COLUMN partition_mode;"
	                           " ALTER TABLE fabric_keys DROP COLUMN alloc_id;"
	                           " ALTER TABLE fabric_ports DROP COLUMN alloc_id;"
	                           " DROP INDEX allocations_idempotency;"
	                           " ALTER TABLE allocations DROP COLUMN idempotency_key;"
	                           " ALTER TABLE allocations DROP COLUMN idempotency_hash;"
	                           " ALTER TABLE tenants DROP COLUMN io_uring;"
	                           " ALTER TABLE audit_heads DROP COLUMN key_id;"
	                           " DELETE FROM schema_version WHERE version >="
	                           " (SELECT max(version) FROM schema_version) - 4";

	t.io_uring = true;
	assert_int_equal(f->s->ops->tenant_insert(f->s, &t, &f->err), 0);
	iso_store_close(f->s);
	f->s = NULL;
	if (f->b == B_SQLITE) {
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_exec(db, undo, NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
	} else {
		pg_raw(f->conninfo, undo);
	}
	fx_open(f);
	assert_int_equal(f->s->ops->tenant_get_by_name(f->s, "old", &got, &f->err), 0);
	assert_false(got.io_uring);
	assert_string_equal(got.description, "the old tenant");
	got.io_uring = true;
	assert_int_equal(f->s->ops->tenant_update(f->s, &got, &f->err), 0);
	fx_reopen(f);
	assert_int_equal(f->s->ops->tenant_get_by_name(f->s, "old", &got, &f->err), 0);
	assert_true(got.io_uring);
}

/* Per-allocation partitions: the tenant's mode, and the allocation that
 * holds a P_Key or a VF, round trip; a store from before the migration reads
 * its tenants as per-tenant and its keys and ports as the tenant's own. */
static void test_partition_mode(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant t = tenant("jobs"), got;
	struct iso_fabric_key_row k = {.pkey = 0x30, .tenant_id = 5, .alloc_id = "a-0000000000000007"};
	struct iso_fabric_port_row p = {.node = "n1", .vf = 2, .tenant_id = 5,
	                                .alloc_id = "a-0000000000000007"};
	struct iso_fabric_key_row *keys = NULL;
	struct iso_fabric_port_row *ports = NULL;
	int n = -1;

	t.partition = ISO_PARTITION_PER_ALLOCATION;
	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), 0);
	assert_int_equal(o->fabric_key_put(f->s, &k, &f->err), 0);
	assert_int_equal(o->fabric_port_put(f->s, &p, &f->err), 0);
	fx_reopen(f);
	o = f->s->ops;
	assert_int_equal(o->tenant_get_by_name(f->s, "jobs", &got, &f->err), 0);
	assert_int_equal(got.partition, ISO_PARTITION_PER_ALLOCATION);
	got.partition = ISO_PARTITION_PER_TENANT;
	assert_int_equal(o->tenant_update(f->s, &got, &f->err), 0);
	assert_int_equal(o->tenant_get_by_name(f->s, "jobs", &got, &f->err), 0);
	assert_int_equal(got.partition, ISO_PARTITION_PER_TENANT);
	assert_int_equal(o->fabric_key_list(f->s, &keys, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(keys[0].alloc_id, "a-0000000000000007");
	free(keys);
	/* released into quarantine: the row keeps where it came from */
	k.released_ms = 99;
	assert_int_equal(o->fabric_key_put(f->s, &k, &f->err), 0);
	assert_int_equal(o->fabric_port_list(f->s, &ports, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(ports[0].alloc_id, "a-0000000000000007");
	free(ports);
}

static void test_partition_mode_migrated(void **state)
{
	struct fx *f = *state;
	struct iso_tenant t = tenant("old"), got;
	struct iso_fabric_key_row k = {.pkey = 0x31, .tenant_id = 1};
	struct iso_fabric_port_row p = {.node = "n1", .vf = 0, .tenant_id = 1};
	struct iso_fabric_key_row *keys = NULL;
	struct iso_fabric_port_row *ports = NULL;
	int n = -1;
	static const char undo[] = "DROP TABLE neutron_objects; DROP TABLE neutron_projects;"
	                           " ALTER TABLE tenants DROP COLUMN partition_mode;"
	                           " ALTER TABLE fabric_keys DROP COLUMN alloc_id;"
	                           " ALTER TABLE fabric_ports DROP COLUMN alloc_id;"
	                           " DELETE FROM schema_version WHERE version >="
	                           " (SELECT max(version) FROM schema_version) - 1";

	assert_int_equal(f->s->ops->tenant_insert(f->s, &t, &f->err), 0);
	assert_int_equal(f->s->ops->fabric_key_put(f->s, &k, &f->err), 0);
	assert_int_equal(f->s->ops->fabric_port_put(f->s, &p, &f->err), 0);
	iso_store_close(f->s);
	f->s = NULL;
	if (f->b == B_SQLITE) {
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_exec(db, undo, NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
	} else {
		pg_raw(f->conninfo, undo);
	}
	fx_open(f);
	assert_int_equal(f->s->ops->tenant_get_by_name(f->s, "old", &got, &f->err), 0);
	assert_int_equal(got.partition, ISO_PARTITION_PER_TENANT);
	assert_int_equal(f->s->ops->fabric_key_list(f->s, &keys, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(keys[0].alloc_id, "");
	free(keys);
	assert_int_equal(f->s->ops->fabric_port_list(f->s, &ports, &n, &f->err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(ports[0].alloc_id, "");
	free(ports);
}

/* A head's signer's key id: stored when the head has one, none (all zero)
 * when it has not. */
static void test_audit_head_key_id(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_audit_head h = {.size = 1, .time_ms = 5}, got;
	static const uint8_t zero[ISO_AUDIT_KEY_ID_LEN] = {0};

	memset(h.sig, 7, sizeof(h.sig));
	assert_int_equal(o->audit_head_put(f->s, &h, &f->err), 0);
	assert_int_equal(o->audit_head_latest(f->s, &got, &f->err), 0);
	assert_memory_equal(got.key_id, zero, sizeof(zero));
	for (int i = 0; i < ISO_AUDIT_KEY_ID_LEN; i++)
		h.key_id[i] = (uint8_t)(0xf0 + i);
	h.size = 2;
	assert_int_equal(o->audit_head_put(f->s, &h, &f->err), 0);
	fx_reopen(f);
	o = f->s->ops;
	assert_int_equal(o->audit_head_latest(f->s, &got, &f->err), 0);
	assert_int_equal(got.size, 2);
	assert_memory_equal(got.key_id, h.key_id, ISO_AUDIT_KEY_ID_LEN);
	assert_memory_equal(got.sig, h.sig, ISO_AUDIT_SIG_LEN);
}

/* A store from before key ids: its heads come back with none (read as
 * signed by the key that verifies them), and new heads keep theirs. */
static void test_audit_key_id_migrated(void **state)
{
	struct fx *f = *state;
	struct iso_audit_head h = {.size = 3, .time_ms = 9}, got;
	static const uint8_t zero[ISO_AUDIT_KEY_ID_LEN] = {0};
	/* key ids came before the idempotency keys and the partition mode:
	 * undo all three */
	static const char undo[] = "DROP TABLE neutron_objects; DROP TABLE neutron_projects;"
	                           " ALTER TABLE tenants DROP COLUMN partition_mode;"
	                           " ALTER TABLE fabric_keys DROP COLUMN alloc_id;"
	                           " ALTER TABLE fabric_ports DROP COLUMN alloc_id;"
	                           " DROP INDEX allocations_idempotency;"
	                           " ALTER TABLE allocations DROP COLUMN idempotency_key;"
	                           " ALTER TABLE allocations DROP COLUMN idempotency_hash;"
	                           " ALTER TABLE audit_heads DROP COLUMN key_id;"
	                           " DELETE FROM schema_version WHERE version >="
	                           " (SELECT max(version) FROM schema_version) - 3";

	memset(h.root, 0x33, sizeof(h.root));
	memset(h.sig, 0x44, sizeof(h.sig));
	memset(h.key_id, 0x55, sizeof(h.key_id));
	assert_int_equal(f->s->ops->audit_head_put(f->s, &h, &f->err), 0);
	iso_store_close(f->s);
	f->s = NULL;
	if (f->b == B_SQLITE) {
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_exec(db, undo, NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
	} else {
		pg_raw(f->conninfo, undo);
	}
	fx_open(f);
	assert_int_equal(f->s->ops->audit_head_latest(f->s, &got, &f->err), 0);
	assert_int_equal(got.size, 3);
	assert_memory_equal(got.root, h.root, ISO_AUDIT_HASH_LEN);
	assert_memory_equal(got.sig, h.sig, ISO_AUDIT_SIG_LEN);
	assert_memory_equal(got.key_id, zero, sizeof(zero));
	h.size = 4;
	assert_int_equal(f->s->ops->audit_head_put(f->s, &h, &f->err), 0);
	fx_reopen(f);
	assert_int_equal(f->s->ops->audit_head_latest(f->s, &got, &f->err), 0);
	assert_int_equal(got.size, 4);
	assert_memory_equal(got.key_id, h.key_id, ISO_AUDIT_KEY_ID_LEN);
}

/* A database a newer isostackd migrated is refused, not guessed at. */
static void test_newer_schema_refused(void **state)
{
	struct fx *f = *state;
	struct iso_store *s = NULL;
	struct iso_error err = {0};

	iso_store_close(f->s);
	f->s = NULL;
	if (f->b == B_SQLITE) {
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_exec(db,
		                              "INSERT INTO schema_version(version, applied_ms)"
		                              " VALUES (999, 0)",
		                              NULL, NULL, NULL),
		                 SQLITE_OK);
		sqlite3_close(db);
		assert_int_equal(iso_store_open_sqlite(f->path, &s, &err), -EIO);
	} else {
		pg_raw(f->conninfo,
		       "INSERT INTO schema_version(version, applied_ms) VALUES (999, 0)");
		assert_int_equal(iso_store_open_postgres(f->conninfo, &s, &err), -EIO);
	}
	assert_null(s);
	assert_non_null(strstr(err.message, "newer than this isostackd"));
}

/* After the server ended the store's session (a restart, a failover, an
 * administrator), the op that meets it fails and the next one runs on a new
 * connection; inside a transaction the transaction is lost, and says so. */
static void test_pg_reconnect(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant got, t = tenant("also-lost");
	static const char kill_store[] = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	                                 " WHERE application_name = 'isostackd'";

	if (f->b != B_POSTGRES)
		skip();
	add_tenant(f, "before");
	pg_raw(f->conninfo, kill_store);
	assert_int_equal(o->tenant_get_by_name(f->s, "before", &got, &f->err), -EIO);
	assert_int_equal(o->tenant_get_by_name(f->s, "before", &got, &f->err), 0);
	add_tenant(f, "after");

	assert_int_equal(o->begin(f->s, &f->err), 0);
	add_tenant(f, "lost");
	pg_raw(f->conninfo, kill_store);
	assert_int_equal(o->tenant_insert(f->s, &t, &f->err), -EIO);
	assert_int_equal(o->commit(f->s, &f->err), -EIO);
	o->rollback(f->s);
	assert_int_equal(o->tenant_get_by_name(f->s, "lost", &got, &f->err), -ENOENT);
	assert_int_equal(o->tenant_get_by_name(f->s, "after", &got, &f->err), 0);
	assert_int_equal(o->begin(f->s, &f->err), 0);
	add_tenant(f, "kept");
	assert_int_equal(o->commit(f->s, &f->err), 0);
	assert_int_equal(o->tenant_get_by_name(f->s, "kept", &got, &f->err), 0);
}

/* --store: what isostackd accepts, and errors that name the flag and never
 * echo the conninfo (it may hold a password). No server needed. */
static void test_store_selection(void **state)
{
	struct fx *f = *state;
	struct iso_store *s = NULL;
	struct iso_error err = {0};

	if (f->b != B_SQLITE)
		skip();
	assert_true(iso_store_spec_is_postgres("postgres://u@h/db"));
	assert_true(iso_store_spec_is_postgres("postgresql://h/db"));
	assert_true(iso_store_spec_is_postgres("host=/tmp dbname=x"));
	assert_false(iso_store_spec_is_postgres("sqlite"));
	assert_false(iso_store_spec_is_postgres("mysql:foo"));
	assert_false(iso_store_spec_is_postgres(NULL));

	/* sqlite (and the default) is STATE_DIR/state.db */
	assert_int_equal(iso_store_open("sqlite", f->dir, &s, &err), 0);
	assert_string_equal(s->ops->name, "sqlite");
	iso_store_close(s);
	s = NULL;
	assert_int_equal(iso_store_open(NULL, f->dir, &s, &err), 0);
	iso_store_close(s);
	s = NULL;

	assert_int_equal(iso_store_open("mysql://h/db", f->dir, &s, &err), -EINVAL);
	assert_string_equal(err.field, "store");
	assert_non_null(strstr(err.message, "--store"));
	assert_int_equal(iso_store_open("host='unterminated password=sekrit", f->dir, &s, &err),
	                 -EINVAL);
	assert_non_null(strstr(err.message, "--store postgres"));
	assert_non_null(strstr(err.message, "not a valid PostgreSQL conninfo"));
	assert_null(strstr(err.message, "sekrit"));
	assert_int_equal(iso_store_open("host=/nonexistent/socket/dir dbname=x password=sekrit "
	                                "connect_timeout=2",
	                                f->dir, &s, &err),
	                 -EAGAIN);
	assert_int_equal(err.code, ISO_E_UNAVAILABLE);
	assert_string_equal(err.field, "store");
	assert_non_null(strstr(err.message, "--store postgres: cannot connect to PostgreSQL"));
	assert_null(strstr(err.message, "sekrit"));
	assert_null(s);
}

/* Group commit's two ops (store.h), where a backend has them: switched only
 * outside a transaction; with it on, commits are seen at once and sync makes
 * them durable; off again restores per-commit durability. A backend whose
 * every commit is durable on its own leaves both NULL. */
static void test_group_commit_ops(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant got;

	if (f->b == B_POSTGRES) { /* both backends have group commit */
		assert_non_null(o->set_group_commit);
		assert_non_null(o->sync);
	}
	if (!o->set_group_commit || !o->sync) {
		assert_null(o->set_group_commit); /* both or neither */
		assert_null(o->sync);
		skip();
	}
	assert_int_equal(o->begin(f->s, &f->err), 0);
	assert_true(o->set_group_commit(f->s, true, &f->err) < 0);
	o->rollback(f->s);
	assert_int_equal(o->set_group_commit(f->s, true, &f->err), 0);
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "gc-%d", i);
		assert_int_equal(o->begin(f->s, &f->err), 0);
		add_tenant(f, name);
		assert_int_equal(o->commit(f->s, &f->err), 0);
		assert_int_equal(o->tenant_get_by_name(f->s, name, &got, &f->err), 0);
	}
	assert_int_equal(o->sync(f->s, &f->err), 0);
	assert_int_equal(o->sync(f->s, &f->err), 0); /* nothing new: still fine */
	assert_int_equal(o->set_group_commit(f->s, false, &f->err), 0);
	fx_reopen(f);
	assert_int_equal(f->s->ops->tenant_get_by_name(f->s, "gc-2", &got, &f->err), 0);
}

/* PostgreSQL's group commit (pg.c): commits made with synchronous_commit=off
 * that no sync flushed yet may die with the server. When the session ends
 * before the sync, the next sync fails (the flush on a new session cannot
 * vouch for them) and keeps failing; a session that ends with everything
 * flushed costs nothing. After a reconnect the new session runs group commit
 * too (what it commits needs a sync). */
static void test_pg_group_commit_session_lost(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_tenant got;
	static const char kill_store[] = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	                                 " WHERE application_name = 'isostackd'";

	if (f->b != B_POSTGRES)
		skip();
	assert_non_null(o->set_group_commit);
	assert_non_null(o->sync);
	assert_int_equal(o->set_group_commit(f->s, true, &f->err), 0);
	assert_int_equal(o->begin(f->s, &f->err), 0);
	add_tenant(f, "flushed");
	assert_int_equal(o->commit(f->s, &f->err), 0);
	assert_int_equal(o->sync(f->s, &f->err), 0);
	/* everything flushed: a lost session is harmless */
	pg_raw(f->conninfo, kill_store);
	assert_int_equal(o->tenant_get_by_name(f->s, "flushed", &got, &f->err), -EIO);
	assert_int_equal(o->begin(f->s, &f->err), 0);
	add_tenant(f, "unflushed");
	assert_int_equal(o->commit(f->s, &f->err), 0);
	assert_int_equal(o->sync(f->s, &f->err), 0);
	/* a commit not yet flushed, then the session ends */
	assert_int_equal(o->begin(f->s, &f->err), 0);
	add_tenant(f, "maybe-lost");
	assert_int_equal(o->commit(f->s, &f->err), 0);
	pg_raw(f->conninfo, kill_store);
	assert_int_equal(o->tenant_get_by_name(f->s, "flushed", &got, &f->err), -EIO);
	assert_int_equal(o->tenant_get_by_name(f->s, "flushed", &got, &f->err), 0);
	assert_int_equal(o->sync(f->s, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "may be lost"));
	assert_int_equal(o->sync(f->s, &f->err), -EIO); /* and it stays failed */
}

/* PostgreSQL rows that do not fit their model field are reported as corrupt
 * (table, id, column), never cut or guessed, as SQLite's are (test_store.c,
 * test_corrupt_rows). */
static void test_pg_corrupt_rows(void **state)
{
	struct fx *f = *state;
	const struct iso_store_ops *o = f->s->ops;
	struct iso_allocation a, got = {0};
	struct iso_alloc_filter all = {.state = -1};
	struct iso_allocation *list = NULL;
	struct iso_tenant t, *tl = NULL;
	int n = -1;

	if (f->b != B_POSTGRES)
		skip();
	a = alloc("a-1", 1, "acme", 10, ISO_ALLOC_ACTIVE, 2);
	add_tenant(f, "acme");
	assert_int_equal(o->alloc_insert(f->s, &a, &f->err), 0);
	iso_allocation_clear(&a);

	pg_raw(f->conninfo, "UPDATE alloc_members SET idx = 5 WHERE idx = 1");
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "corrupt row in alloc_members (id a-1)"));
	assert_null(got.placed);
	assert_int_equal(o->alloc_list(f->s, &all, &list, &n, &f->err), -EIO);
	assert_null(list);
	pg_raw(f->conninfo, "UPDATE alloc_members SET idx = 1 WHERE idx = 5");
	pg_raw(f->conninfo, "UPDATE alloc_slots SET member = 7 WHERE idx = 0");
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "column member"));
	pg_raw(f->conninfo, "UPDATE alloc_slots SET member = 0 WHERE idx = 0");
	pg_raw(f->conninfo, "UPDATE allocations SET state = 'bogus'");
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "column state"));
	pg_raw(f->conninfo, "UPDATE allocations SET state = 'active'");
	assert_int_equal(o->alloc_get(f->s, "a-1", &got, &f->err), 0);
	iso_allocation_clear(&got);

	pg_raw(f->conninfo, "UPDATE tenants SET name = repeat('x', 300)");
	assert_int_equal(o->tenant_list(f->s, NULL, 0, &tl, &n, &f->err), -EIO);
	assert_null(tl);
	assert_non_null(strstr(f->err.message, "column name"));
	pg_raw(f->conninfo, "UPDATE tenants SET name = 'acme', shares = 'NaN'");
	assert_int_equal(o->tenant_get_by_name(f->s, "acme", &t, &f->err), -EIO);
	assert_non_null(strstr(f->err.message, "column shares"));
}

#define TESTS(b)                                                                                   \
	cmocka_unit_test_prestate_setup_teardown(test_meta, fx_setup, fx_teardown, b),             \
	    cmocka_unit_test_prestate_setup_teardown(test_tenants, fx_setup, fx_teardown, b),      \
	    cmocka_unit_test_prestate_setup_teardown(test_tenant_list, fx_setup, fx_teardown, b),  \
	    cmocka_unit_test_prestate_setup_teardown(test_tokens, fx_setup, fx_teardown, b),       \
	    cmocka_unit_test_prestate_setup_teardown(test_node_state, fx_setup, fx_teardown, b),   \
	    cmocka_unit_test_prestate_setup_teardown(test_fabric, fx_setup, fx_teardown, b),       \
	    cmocka_unit_test_prestate_setup_teardown(test_orgs_projects, fx_setup, fx_teardown,    \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_quotas_usage, fx_setup, fx_teardown, b), \
	    cmocka_unit_test_prestate_setup_teardown(test_gpu_faults, fx_setup, fx_teardown, b),   \
	    cmocka_unit_test_prestate_setup_teardown(test_alloc_roundtrip, fx_setup, fx_teardown,  \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_alloc_list, fx_setup, fx_teardown, b),   \
	    cmocka_unit_test_prestate_setup_teardown(test_alloc_idem_key, fx_setup, fx_teardown,   \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_idem_key_migrated, fx_setup,             \
	                                             fx_teardown, b),                              \
	    cmocka_unit_test_prestate_setup_teardown(test_audit, fx_setup, fx_teardown, b),        \
	    cmocka_unit_test_prestate_setup_teardown(test_audit_long_scan, fx_setup, fx_teardown,  \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_transactions, fx_setup, fx_teardown, b), \
	    cmocka_unit_test_prestate_setup_teardown(test_alloc_in_transaction, fx_setup,          \
	                                             fx_teardown, b),                              \
	    cmocka_unit_test_prestate_setup_teardown(test_reopen_migrated, fx_setup, fx_teardown,  \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_io_uring_migrated, fx_setup,             \
	                                             fx_teardown, b),                              \
	    cmocka_unit_test_prestate_setup_teardown(test_newer_schema_refused, fx_setup,          \
	                                             fx_teardown, b),                              \
	    cmocka_unit_test_prestate_setup_teardown(test_audit_head_key_id, fx_setup,             \
	                                             fx_teardown, b),                              \
	    cmocka_unit_test_prestate_setup_teardown(test_audit_key_id_migrated, fx_setup,         \
	                                             fx_teardown, b),                              \
	    cmocka_unit_test_prestate_setup_teardown(test_partition_mode, fx_setup, fx_teardown,   \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_partition_mode_migrated, fx_setup,       \
	                                             fx_teardown, b),                              \
	    cmocka_unit_test_prestate_setup_teardown(test_pg_reconnect, fx_setup, fx_teardown, b), \
	    cmocka_unit_test_prestate_setup_teardown(test_store_selection, fx_setup, fx_teardown,  \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_group_commit_ops, fx_setup, fx_teardown, \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_pg_corrupt_rows, fx_setup, fx_teardown,  \
	                                             b),                                           \
	    cmocka_unit_test_prestate_setup_teardown(test_pg_group_commit_session_lost, fx_setup,  \
	                                             fx_teardown, b)

int main(void)
{
	enum backend sqlite = B_SQLITE, postgres = B_POSTGRES;
	const struct CMUnitTest sqlite_tests[] = {TESTS(&sqlite)};
	const struct CMUnitTest pg_tests[] = {TESTS(&postgres)};
	const char *pg = getenv("ISOSTACK_TEST_PG");
	int failed =
	    cmocka_run_group_tests_name("store contract: sqlite", sqlite_tests, NULL, NULL);

	if (!pg || !*pg) {
		printf("store contract: postgres: SKIPPED (ISOSTACK_TEST_PG is not set; the "
		       "test_store_contract_pg test sets it)\n");
		return failed;
	}
	return failed +
	       cmocka_run_group_tests_name("store contract: postgres", pg_tests, NULL, NULL);
}

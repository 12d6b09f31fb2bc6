/* test_controller_faults.c: every mutating use case of the controller run
 * under a store that fails its Nth op (src/store/faultsim.c), for N = 1, 2,
 * ... until N passes the ops the use case makes, in the spirit of SQLite's
 * do_faultsim_test. The controller promises "store first, memory second"
 * (docs/architecture.md): a use case either completes or leaves nothing
 * changed. Each round checks, on a fresh controller over a temporary SQLite
 * store and tests/api/data/tenancy.yaml:
 *   - a use case of one transaction that fails leaves the store's rows, the
 *     in-memory state (cluster occupancy, cordons, quarantines, queue,
 *     tenancy tree, fabric intent, the agents' documents) and the audit
 *     log's tree and head exactly as they were;
 *   - whatever happened, memory is what a controller rebuilt from the store
 *     would hold, no audit event waits queued, and the tree and head are
 *     the stored ones;
 *   - run again without faults, the use case succeeds.
 * Faults are injected transient (only op N fails) and persistent (every op
 * from N on fails), in begin, commit and writes, and separately in reads. */
#include "controller_fixture.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>

#include "isostack/tenancy.h"

/* ---- what is compared ---- */

struct buf {
	char *text;
	size_t len;
	FILE *f;
};

static void buf_open(struct buf *b)
{
	memset(b, 0, sizeof(*b));
	b->f = open_memstream(&b->text, &b->len);
	assert_non_null(b->f);
}

static char *buf_close(struct buf *b)
{
	assert_int_equal(fclose(b->f), 0);
	return b->text;
}

static int line_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Every row of every table, tables by name, rows sorted. */
static char *store_dump(struct fixture *fx)
{
	char path[128];
	sqlite3 *db = NULL;
	sqlite3_stmt *tables = NULL;
	struct buf b;

	snprintf(path, sizeof(path), "%s/state.db", fx->dir);
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db,
	                                    "SELECT name FROM sqlite_master WHERE type = 'table' "
	                                    "ORDER BY name",
	                                    -1, &tables, NULL),
	                 SQLITE_OK);
	buf_open(&b);
	while (sqlite3_step(tables) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(tables, 0);
		char sql[256], **rows = NULL;
		sqlite3_stmt *st = NULL;
		int n = 0, cap = 0;

		snprintf(sql, sizeof(sql), "SELECT * FROM \"%s\"", name);
		assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
		while (sqlite3_step(st) == SQLITE_ROW) {
			struct buf row;
			buf_open(&row);
			for (int i = 0; i < sqlite3_column_count(st); i++) {
				const unsigned char *v = sqlite3_column_text(st, i);
				fprintf(row.f, "%s|", v ? (const char *)v : "NULL");
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				rows = realloc(rows, (size_t)cap * sizeof(*rows));
				assert_non_null(rows);
			}
			rows[n++] = buf_close(&row);
		}
		sqlite3_finalize(st);
		if (n > 0)
			qsort(rows, (size_t)n, sizeof(*rows), line_cmp);
		fprintf(b.f, "[%s]\n", name);
		for (int i = 0; i < n; i++) {
			fprintf(b.f, "%s\n", rows[i]);
			free(rows[i]);
		}
		free(rows);
	}
	sqlite3_finalize(tables);
	sqlite3_close(db);
	return buf_close(&b);
}

/* The in-memory state a use case may change, audit log aside: occupancy,
 * cordons and quarantines per node and GPU, the pending queue, the running
 * set, the tenancy tree's accounts, quotas and charges, the fabric intent
 * (its generation aside) and every node agent's desired GPUs and VFs. */
static char *memory_print(struct iso_controller *c, const struct iso_principal *admin)
{
	const struct iso_inventory *inv = c->inv;
	struct buf b;

	iso_controller_settle(c);
	buf_open(&b);
	for (int i = 0; i < inv->n_nodes; i++) {
		const struct iso_node_usage *u = &c->cs.usage[i];
		json_t *doc = NULL;
		struct iso_error err = {0};

		fprintf(b.f, "node %s sched=%d cpus=%d mem=%lld members=%d tenants=%d vfs=%d\n",
		        inv->nodes[i].name, (int)c->cs.sched[i], u->cpus_used,
		        (long long)u->memory_mib_used, u->members, u->tenants, u->vfs_used);
		for (int g = 0; g < inv->nodes[i].n_gpus; g++) {
			const struct iso_gpu_occupancy *o = &u->gpus[g];
			fprintf(b.f,
			        " gpu %d free=%02x compute=%d media=%d whole=%d q=%d counts=", g,
			        o->free_mask, o->compute_used, o->media_engine_used, o->whole,
			        iso_cluster_state_gpu_quarantined(&c->cs, i, g));
			for (int k = 0; k < ISO_MIG_MAX_PROFILES; k++)
				fprintf(b.f, "%d,", o->count[k]);
			fputc('\n', b.f);
		}
		assert_int_equal(
		    iso_controller_node_desired(c, admin, inv->nodes[i].name, NULL, &doc, &err), 0);
		char *gpus =
		    json_dumps(json_object_get(doc, "gpus"), JSON_COMPACT | JSON_SORT_KEYS);
		char *vfs = json_dumps(json_object_get(doc, "vfs"), JSON_COMPACT | JSON_SORT_KEYS);
		fprintf(b.f, " desired gpus=%s vfs=%s\n", gpus ? gpus : "-", vfs ? vfs : "-");
		free(gpus);
		free(vfs);
		json_decref(doc);
	}

	/* The queue and the running set, as sets (ties in order may differ
	 * after a rebuild). */
	struct ctl_queue_view view[256];
	bool more = false;
	int n = 0;
	assert_int_equal(ctl_queue_view(c, admin, 256, 0, view, &n, &more), 0);
	char **lines = calloc((size_t)n + 1, sizeof(*lines));
	assert_non_null(lines);
	for (int i = 0; i < n; i++)
		assert_true(asprintf(&lines[i], "pending %s", view[i].id) > 0);
	qsort(lines, (size_t)n, sizeof(*lines), line_cmp);
	for (int i = 0; i < n; i++) {
		fprintf(b.f, "%s\n", lines[i]);
		free(lines[i]);
	}
	free(lines);
	struct iso_running *run = ctl_queue_running(c, &n);
	lines = calloc((size_t)n + 1, sizeof(*lines));
	assert_non_null(lines);
	for (int i = 0; i < n; i++) {
		assert_true(asprintf(&lines[i], "running %s prio=%d fail=%d use=%lld,%lld,%lld",
		                     run[i].id, run[i].priority, run[i].fail_on_preempt,
		                     (long long)run[i].use.v[0], (long long)run[i].use.v[1],
		                     (long long)run[i].use.v[2]) > 0);
	}
	free(run);
	qsort(lines, (size_t)n, sizeof(*lines), line_cmp);
	for (int i = 0; i < n; i++) {
		fprintf(b.f, "%s\n", lines[i]);
		free(lines[i]);
	}
	free(lines);

	/* Accounts by name: indexes may differ after a rebuild. A deleted
	 * tenant's account stays as a tombstone ("#N") while its usage decays;
	 * a rebuild has none, by design. */
	const struct iso_tenancy *t = ctl_tenancy_tree(c);
	lines = calloc((size_t)t->n_accounts + 1, sizeof(*lines));
	assert_non_null(lines);
	for (int i = 0; i < t->n_accounts; i++) {
		const struct iso_account *a = &t->acct[i];
		struct buf l;
		buf_open(&l);
		if (a->name[0] == '#') {
			lines[i] = buf_close(&l);
			continue;
		}
		fprintf(l.f, "acct %s level=%d parent=%s shares=%g", a->name, (int)a->level,
		        a->parent >= 0 ? t->acct[a->parent].name : "-", a->shares);
		for (int k = 0; k < t->n_kinds; k++)
			fprintf(l.f, " [%lld %lld %lld used %lld]", (long long)a->q[k].guaranteed,
			        (long long)a->q[k].borrow_limit, (long long)a->q[k].lend_limit,
			        (long long)a->used.v[k]);
		lines[i] = buf_close(&l);
	}
	qsort(lines, (size_t)t->n_accounts, sizeof(*lines), line_cmp);
	for (int i = 0; i < t->n_accounts; i++) {
		if (lines[i][0])
			fprintf(b.f, "%s\n", lines[i]);
		free(lines[i]);
	}
	free(lines);

	/* The fabric: each tenant's P_Key, the counts of keys, ports and
	 * allocations waiting for a confirmation, and the intent. */
	for (int64_t id = 1; id <= 32; id++)
		if (ctl_fabric_tenant_pkey(c, id) >= 0)
			fprintf(b.f, "pkey tenant=%lld 0x%04x\n", (long long)id,
			        ctl_fabric_tenant_pkey(c, id));
	json_t *fabric = ctl_fabric_status_json(c);
	fprintf(b.f, "fabric tenants=%lld ports=%lld waiting=%lld incident=%d\n",
	        (long long)json_integer_value(json_object_get(fabric, "tenants")),
	        (long long)json_integer_value(json_object_get(fabric, "ports")),
	        (long long)json_integer_value(json_object_get(fabric, "waiting")),
	        json_is_true(json_object_get(fabric, "incident")));
	json_decref(fabric);
	json_t *intent = iso_fabric_intent_to_json(ctl_fabric_intent(c));
	json_object_del(intent, "generation");
	char *text = json_dumps(intent, JSON_COMPACT | JSON_SORT_KEYS);
	fprintf(b.f, "intent %s\n", text ? text : "-");
	free(text);
	json_decref(intent);
	return buf_close(&b);
}

/* The audit log as memory holds it. */
static char *audit_print(struct iso_controller *c)
{
	struct buf b;

	buf_open(&b);
	fprintf(b.f, "tree=%llu have_head=%d head=%llu@%lld queued=%d\n",
	        (unsigned long long)iso_merkle_size(c->tree), c->have_head,
	        (unsigned long long)c->head.size, (long long)c->head.time_ms, c->n_queue);
	return buf_close(&b);
}

/* Memory as a controller opened over a copy of the store rebuilds it. */
static char *rebuilt_print(struct fixture *fx)
{
	char dir[64], cmd[256], path[128], sql[160];
	struct iso_store *store = NULL;
	struct iso_controller *ctl = NULL;
	struct iso_error err = {0};
	sqlite3 *db = NULL;

	snprintf(dir, sizeof(dir), "/tmp/isoctl-rebuild-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "cp -a %s/. %s/ && rm -f %s/state.db*", fx->dir, dir, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/state.db", fx->dir);
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	snprintf(sql, sizeof(sql), "VACUUM INTO '%s/state.db'", dir);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	snprintf(path, sizeof(path), "%s/state.db", dir);
	assert_int_equal(iso_store_open_sqlite(path, &store, &err), 0);
	struct iso_controller_params params = {
	    .inv = fx->inv,
	    .store = store,
	    .placer = iso_placer_find("isostack"),
	    .state_dir = dir,
	    .no_agents = true,
	};
	if (iso_controller_open(&params, &ctl, &err) < 0)
		fail_msg("a controller over the store as left does not open: %s", err.message);
	char *text = memory_print(ctl, &fx->admin);
	iso_controller_free(ctl);
	iso_store_close(store);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	return text;
}

static void expect_same(const char *what, const char *name, int64_t n, const char *fault,
                        const char *before, const char *after)
{
	if (strcmp(before, after) == 0)
		return;
	fprintf(stderr, "--- %s before\n%s--- %s after\n%s", what, before, what, after);
	fail_msg("%s: a failure at op %lld (%s) changed the %s", name, (long long)n, fault, what);
}

/* The audit tree and head are the stored ones, nothing waits queued. */
static void expect_audit_consistent(struct fixture *fx, const char *name, int64_t n,
                                    const char *fault)
{
	struct iso_controller *c = fx->ctl;
	struct iso_audit_head head;
	struct iso_error err = {0};
	int64_t count = 0;

	if (c->n_queue != 0)
		fail_msg("%s: after a failure at op %lld (%s), %d audit events wait queued", name,
		         (long long)n, fault, c->n_queue);
	assert_int_equal(fx->store->ops->audit_count(fx->store, &count, &err), 0);
	if ((uint64_t)count != iso_merkle_size(c->tree))
		fail_msg("%s: after a failure at op %lld (%s), the tree holds %llu events, the "
		         "store %lld",
		         name, (long long)n, fault, (unsigned long long)iso_merkle_size(c->tree),
		         (long long)count);
	if (fx->store->ops->audit_head_latest(fx->store, &head, &err) == 0 &&
	    memcmp(&head, &c->head, sizeof(head)) != 0)
		fail_msg(
		    "%s: after a failure at op %lld (%s), the head in memory (size %llu) is not "
		    "the stored one (size %llu)",
		    name, (long long)n, fault, (unsigned long long)c->head.size,
		    (unsigned long long)head.size);
}

/* ...and memory is what the store says. */
static void expect_consistent(struct fixture *fx, const char *name, int64_t n, const char *fault)
{
	struct iso_controller *c = fx->ctl;

	expect_audit_consistent(fx, name, n, fault);
	char *live = memory_print(c, &fx->admin);
	char *rebuilt = rebuilt_print(fx);
	if (strcmp(live, rebuilt) != 0) {
		fprintf(stderr, "--- memory\n%s--- rebuilt from the store\n%s", live, rebuilt);
		fail_msg("%s: after a failure at op %lld (%s), memory is not what the store says",
		         name, (long long)n, fault);
	}
	free(live);
	free(rebuilt);
}

/* ---- the use cases ---- */

struct ctx {
	char id[4][ISO_ID_MAX]; /* allocations the preparation made */
	char token[ISO_TOKEN_ID_LEN + 1];
};

struct fault_case {
	const char *name;
	bool one_tx; /* one transaction: a failure must leave nothing changed */
	void (*prepare)(struct fixture *fx, struct ctx *x);
	int (*run)(struct fixture *fx, struct ctx *x, struct iso_error *err);
};

static void tenant(struct fixture *fx, const char *name)
{
	struct iso_tenant t;
	struct iso_error err = {0};

	if (iso_controller_tenant_create(fx->ctl, &fx->admin, name, "", NULL, &t, &err) < 0)
		fail_msg("tenant %s: %s", name, err.message);
}

static int create(struct fixture *fx, const char *who, int gpus, int priority, bool fail_on_preempt,
                  char *id, struct iso_error *err)
{
	struct iso_alloc_request req = {
	    .tenant = who, .members = 1, .priority = priority, .fail_on_preempt = fail_on_preempt};
	struct iso_allocation a = {0};

	req.shape.gpu_count = 1;
	req.shape.whole = gpus > 0;
	if (!gpus)
		iso_strlcpy(req.shape.profile, "1g.10gb", sizeof(req.shape.profile));
	int r = iso_controller_alloc_create(fx->ctl, &fx->admin, &req, &a, err);
	if (r == 0 && id)
		iso_strlcpy(id, a.id, ISO_ID_MAX);
	iso_allocation_clear(&a);
	return r;
}

static void must_create(struct fixture *fx, const char *who, int gpus, int priority,
                        bool fail_on_preempt, char *id)
{
	struct iso_error err = {0};

	if (create(fx, who, gpus, priority, fail_on_preempt, id, &err) < 0)
		fail_msg("create for %s: %s", who, err.message);
}

static void prep_nothing(struct fixture *fx, struct ctx *x)
{
	(void)fx;
	(void)x;
}

static void prep_tenant(struct fixture *fx, struct ctx *x)
{
	(void)x;
	tenant(fx, "t1");
}

/* t1 holds one whole GPU. */
static void prep_one(struct fixture *fx, struct ctx *x)
{
	tenant(fx, "t1");
	must_create(fx, "t1", 1, 0, false, x->id[0]);
}

/* t1 holds all 8 GPUs, one of them (id[0], on tq-n01) failing on
 * preemption; t2 waits for one. */
static void prep_full(struct fixture *fx, struct ctx *x)
{
	tenant(fx, "t1");
	tenant(fx, "t2");
	for (int i = 0; i < 8; i++)
		must_create(fx, "t1", 1, 0, i == 0, i == 0 ? x->id[0] : NULL);
	must_create(fx, "t2", 1, 0, false, x->id[1]);
}

static int run_tenant_create(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_tenant t;

	(void)x;
	return iso_controller_tenant_create(fx->ctl, &fx->admin, "t9", "", NULL, &t, err);
}

static int run_tenant_update(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_tenant_policy pol = {.shares = 3};
	struct iso_tenant t;

	(void)x;
	return iso_controller_tenant_update(fx->ctl, &fx->admin, "t1", "d", &pol, &t, err);
}

static void prep_tenant_token(struct fixture *fx, struct ctx *x)
{
	struct iso_token_request req = {.role = ISO_ROLE_TENANT_ADMIN, .tenant = "t1"};
	struct iso_token tok;
	struct iso_error err = {0};
	char secret[ISO_TOKEN_MAX];

	tenant(fx, "t1");
	assert_int_equal(iso_controller_token_issue(fx->ctl, &fx->admin, &req, &tok, secret,
	                                            sizeof(secret), &err),
	                 0);
	iso_strlcpy(x->token, tok.id, sizeof(x->token));
}

static int run_tenant_delete(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	(void)x;
	return iso_controller_tenant_delete(fx->ctl, &fx->admin, "t1", err);
}

static int run_token_issue(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_token_request req = {.role = ISO_ROLE_TENANT_USER, .tenant = "t1", .user = "u"};
	struct iso_token tok;
	char secret[ISO_TOKEN_MAX];

	(void)x;
	return iso_controller_token_issue(fx->ctl, &fx->admin, &req, &tok, secret, sizeof(secret),
	                                  err);
}

static int run_token_revoke(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	return iso_controller_token_revoke(fx->ctl, &fx->admin, x->token, err);
}

static int run_drain(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	(void)x;
	return iso_controller_node_set_sched(fx->ctl, &fx->admin, "tq-n01", ISO_NODE_DRAINING, err);
}

/* Every node cordoned, t1 waiting for a GPU. */
static void prep_cordoned(struct fixture *fx, struct ctx *x)
{
	struct iso_error err = {0};

	tenant(fx, "t1");
	for (int i = 0; i < fx->inv->n_nodes; i++)
		assert_int_equal(iso_controller_node_set_sched(fx->ctl, &fx->admin,
		                                               fx->inv->nodes[i].name,
		                                               ISO_NODE_CORDONED, &err),
		                 0);
	must_create(fx, "t1", 1, 0, false, x->id[0]);
}

static int run_uncordon(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	(void)x;
	return iso_controller_node_set_sched(fx->ctl, &fx->admin, "tq-n02", ISO_NODE_SCHEDULABLE,
	                                     err);
}

static int run_alloc_create(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	return create(fx, "t1", 1, 0, false, x->id[3], err);
}

static int run_alloc_create_pending(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	return create(fx, "t2", 0, 0, false, x->id[3], err);
}

/* A create with an Idempotency-Key (docs/api.md): its lookup by the key is
 * a read, its row with the key one write of the transaction; a failed try
 * stores no key, so the retry creates (0), and a retry of one that
 * committed answers it (1). pins: member 0 on tq-n02. */
static int create_keyed(struct fixture *fx, const char *key, bool pinned, char *id,
                        struct iso_error *err)
{
	static const char hash[] =
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	static const char *const pins[] = {"tq-n02"};
	struct iso_alloc_request req = {.tenant = "t1",
	                                .members = 1,
	                                .idem_key = key,
	                                .idem_hash = hash,
	                                .has_nodes = pinned,
	                                .nodes = pinned ? pins : NULL,
	                                .n_nodes = pinned};
	struct iso_allocation a = {0};

	req.shape.gpu_count = 1;
	req.shape.whole = true;
	int r = iso_controller_alloc_create(fx->ctl, &fx->admin, &req, &a, err);
	if (r >= 0 && id)
		iso_strlcpy(id, a.id, ISO_ID_MAX);
	if (r >= 0 &&
	    (strcmp(a.idem_key, key) != 0 || (pinned && strcmp(a.placed[0].node, "tq-n02"))))
		fail_msg("keyed create: key %s node %s", a.idem_key,
		         a.n_members ? a.placed[0].node : "-");
	iso_allocation_clear(&a);
	return r;
}

static int run_alloc_create_key(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	return create_keyed(fx, "slurm-1", false, x->id[3], err) < 0 ? -1 : 0;
}

static int run_alloc_create_pinned(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	return create_keyed(fx, "slurm-2", true, x->id[3], err) < 0 ? -1 : 0;
}

/* t1 holds one whole GPU created with key slurm-1. */
static void prep_keyed(struct fixture *fx, struct ctx *x)
{
	struct iso_error err = {0};

	tenant(fx, "t1");
	if (create_keyed(fx, "slurm-1", false, x->id[0], &err) != 0)
		fail_msg("keyed create: %s", err.message);
}

static int run_alloc_create_key_retry(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	char id[ISO_ID_MAX] = "";
	int r = create_keyed(fx, "slurm-1", false, id, err);

	if (r >= 0 && (r != 1 || strcmp(id, x->id[0]) != 0))
		fail_msg("retry: %d, %s for %s", r, id, x->id[0]);
	return r < 0 ? r : 0;
}

static int run_release(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_allocation a = {0};
	int r = iso_controller_alloc_release(fx->ctl, &fx->admin, x->id[0], &a, err);

	iso_allocation_clear(&a);
	return r;
}

static int run_release_pending(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_allocation a = {0};
	int r = iso_controller_alloc_release(fx->ctl, &fx->admin, x->id[1], &a, err);

	iso_allocation_clear(&a);
	return r;
}

static int resize(struct fixture *fx, struct ctx *x, int members, struct iso_error *err)
{
	struct iso_allocation a = {0};
	int r = iso_controller_alloc_resize(fx->ctl, &fx->admin, x->id[0], members, &a, err);

	iso_allocation_clear(&a);
	return r;
}

static int run_grow(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	return resize(fx, x, 2, err);
}

static void prep_two(struct fixture *fx, struct ctx *x)
{
	struct iso_error err = {0};

	prep_one(fx, x);
	assert_int_equal(resize(fx, x, 2, &err), 0);
}

static int run_shrink(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	return resize(fx, x, 1, err);
}

/* t1 fills the cluster at priority 0; its priority 10 request preempts. */
static void prep_low(struct fixture *fx, struct ctx *x)
{
	tenant(fx, "t1");
	for (int i = 0; i < 8; i++)
		must_create(fx, "t1", 1, 0, false, i == 0 ? x->id[0] : NULL);
}

static int run_preempt(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	return create(fx, "t1", 1, 10, false, x->id[3], err);
}

static int gpu_fault(struct fixture *fx, const char *node, int gpu, int xid, struct iso_error *err)
{
	json_t *out = NULL;
	int r = iso_controller_gpu_fault(fx->ctl, &fx->admin, node, gpu, xid, &out, err);

	json_decref(out);
	return r;
}

/* XID 79 on every GPU that holds t1's first allocation (it fails on
 * preemption) and the others: the GPU is quarantined, its work evicted. */
static int run_gpu_fault(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	(void)x;
	return gpu_fault(fx, "tq-n01", 0, 79, err);
}

static void prep_faulted(struct fixture *fx, struct ctx *x)
{
	struct iso_error err = {0};

	prep_full(fx, x);
	assert_int_equal(gpu_fault(fx, "tq-n01", 0, 79, &err), 0);
}

static int run_gpu_restore(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	(void)x;
	return iso_controller_gpu_restore(fx->ctl, &fx->admin, "tq-n01", 0, err);
}

static int run_node_down(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	json_t *evicted = NULL;
	int r = iso_controller_node_down(fx->ctl, &fx->admin, "tq-n01", &evicted, err);

	(void)x;
	json_decref(evicted);
	return r;
}

static void prep_down(struct fixture *fx, struct ctx *x)
{
	struct iso_error err = {0};

	prep_full(fx, x);
	assert_int_equal(run_node_down(fx, x, &err), 0);
}

static int run_node_up(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	(void)x;
	return iso_controller_node_up(fx->ctl, &fx->admin, "tq-n01", err);
}

static int run_pool_drain(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	json_t *out = NULL;
	int r =
	    iso_controller_pool_set_sched(fx->ctl, &fx->admin, "gpu", ISO_NODE_CORDONED, &out, err);

	(void)x;
	json_decref(out);
	return r;
}

static int run_org_create(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_org o;

	(void)x;
	return iso_controller_org_create(fx->ctl, &fx->admin, "o1", 2, &o, err);
}

static void prep_org(struct fixture *fx, struct ctx *x)
{
	struct iso_error err = {0};

	assert_int_equal(run_org_create(fx, x, &err), 0);
}

static int run_org_delete(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	(void)x;
	return iso_controller_org_delete(fx->ctl, &fx->admin, "o1", err);
}

static int run_project_create(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_project pr;

	(void)x;
	return iso_controller_project_create(fx->ctl, &fx->admin, "t1", "p1", 1, &pr, err);
}

static void prep_project(struct fixture *fx, struct ctx *x)
{
	struct iso_error err = {0};

	tenant(fx, "t1");
	assert_int_equal(run_project_create(fx, x, &err), 0);
}

static int run_project_delete(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	(void)x;
	return iso_controller_project_delete(fx->ctl, &fx->admin, "t1", "p1", err);
}

static int run_quota_set(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_quota_change ch[2] = {
	    {.kind = "gpus", .guaranteed = 2, .borrow_limit = 4, .lend_limit = INT64_MAX},
	    {.kind = "cpus", .guaranteed = 8, .borrow_limit = INT64_MAX, .lend_limit = 0},
	};
	json_t *out = NULL;
	int r = iso_controller_quota_set(fx->ctl, &fx->admin, "t1", ch, 2, &out, err);

	(void)x;
	json_decref(out);
	return r;
}

/* t1 existed and was deleted: its account stays as a tombstone. */
static void prep_deleted(struct fixture *fx, struct ctx *x)
{
	struct iso_error err = {0};

	prep_tenant(fx, x);
	assert_int_equal(iso_controller_tenant_delete(fx->ctl, &fx->admin, "t1", &err), 0);
}

static int run_tenant_recreate(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_tenant t;

	(void)x;
	return iso_controller_tenant_create(fx->ctl, &fx->admin, "t1", "", NULL, &t, err);
}

static void prep_org_tenant(struct fixture *fx, struct ctx *x)
{
	prep_org(fx, x);
	tenant(fx, "t1");
}

static int run_tenant_move(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_tenant_policy pol = {.org = "o1"};
	struct iso_tenant t;

	(void)x;
	return iso_controller_tenant_update(fx->ctl, &fx->admin, "t1", NULL, &pol, &t, err);
}

static int run_bootstrap(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	bool created = false;

	(void)x;
	return iso_controller_bootstrap_admin(fx->ctl, fx->dir, false, &created, err);
}

/* A node agent's report, numbered: its sequence number is stored with the
 * fault in one transaction. */
static int run_gpu_fault_seq(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_fault_report f = {
	    .gpu = 0, .xid = 79, .gi = -1, .ci = -1, .member = -1, .seq = 1};
	json_t *out = NULL;
	int r = iso_controller_gpu_fault_report(fx->ctl, &fx->admin, "tq-n01", &f, &out, err);

	(void)x;
	json_decref(out);
	return r;
}

static int run_alloc_create_project(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_alloc_request req = {.tenant = "t1", .members = 2, .project = "p1"};
	struct iso_allocation a = {0};

	(void)x;
	req.shape.gpu_count = 1;
	iso_strlcpy(req.shape.profile, "3g.40gb", sizeof(req.shape.profile));
	int r = iso_controller_alloc_create(fx->ctl, &fx->admin, &req, &a, err);
	iso_allocation_clear(&a);
	return r;
}

/* Events since the last head: reading the head signs a new one. */
static int run_audit_head(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_principal auditor = {.role = ISO_ROLE_AUDITOR};
	struct iso_audit_head h;

	(void)x;
	iso_strlcpy(auditor.token_id, "auditor", sizeof(auditor.token_id));
	return iso_controller_audit_head(fx->ctl, &auditor, &h, err);
}

/* A refused attempt by an authenticated caller: one event in a
 * transaction of its own (a failure to record it is logged, not returned). */
static int run_audit_failure(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_principal p = fx->admin;

	(void)x;
	(void)err;
	iso_strlcpy(p.token_id, "t-refused", sizeof(p.token_id));
	iso_controller_audit_failure(fx->ctl, &p, "tenant.delete", "tenant", "t1", ISO_AUDIT_DENIED,
	                             "refused for the test");
	return 0;
}

/* A tenant's own limits and request rates. */
static int run_tenant_limits(struct fixture *fx, struct ctx *x, struct iso_error *err)
{
	struct iso_tenant_policy pol = {0};
	struct iso_tenant t;

	(void)x;
	pol.limit[ISO_LIMIT_MAX_PENDING].set = true;
	pol.limit[ISO_LIMIT_MAX_PENDING].value = 5;
	pol.limit[ISO_LIMIT_WRITES_PER_S].set = true;
	pol.limit[ISO_LIMIT_WRITES_PER_S].value = 7;
	return iso_controller_tenant_update(fx->ctl, &fx->admin, "t1", NULL, &pol, &t, err);
}

static const struct fault_case cases[] = {
    {"tenant.create", true, prep_nothing, run_tenant_create},
    {"tenant.update", true, prep_tenant, run_tenant_update},
    {"tenant.delete", true, prep_tenant_token, run_tenant_delete},
    {"token.create", true, prep_tenant, run_token_issue},
    {"token.revoke", true, prep_tenant_token, run_token_revoke},
    {"node.drain", true, prep_one, run_drain},
    {"node.uncordon", false, prep_cordoned, run_uncordon},
    {"allocation.create", true, prep_tenant, run_alloc_create},
    {"allocation.create.pending", true, prep_full, run_alloc_create_pending},
    {"allocation.create.key", true, prep_tenant, run_alloc_create_key},
    {"allocation.create.key.retry", true, prep_keyed, run_alloc_create_key_retry},
    {"allocation.create.pinned", true, prep_tenant, run_alloc_create_pinned},
    {"allocation.release", true, prep_one, run_release},
    {"allocation.release.pending", true, prep_full, run_release_pending},
    {"allocation.release.frees", false, prep_full, run_release},
    {"allocation.grow", true, prep_one, run_grow},
    {"allocation.shrink", true, prep_two, run_shrink},
    {"allocation.preempt", false, prep_low, run_preempt},
    {"gpu.fault", false, prep_full, run_gpu_fault},
    {"gpu.restore", false, prep_faulted, run_gpu_restore},
    {"node.down", false, prep_full, run_node_down},
    {"node.up", true, prep_down, run_node_up},
    {"pool.cordon", false, prep_one, run_pool_drain},
    {"org.create", true, prep_nothing, run_org_create},
    {"org.delete", true, prep_org, run_org_delete},
    {"project.create", true, prep_tenant, run_project_create},
    {"project.delete", true, prep_project, run_project_delete},
    {"quota.set", true, prep_tenant, run_quota_set},
    {"tenant.recreate", true, prep_deleted, run_tenant_recreate},
    {"tenant.move", true, prep_org_tenant, run_tenant_move},
    {"token.bootstrap", true, prep_nothing, run_bootstrap},
    {"gpu.fault.seq", false, prep_full, run_gpu_fault_seq},
    {"allocation.create.project", true, prep_project, run_alloc_create_project},
    {"audit.head", false, prep_tenant, run_audit_head},
    {"audit.failure", true, prep_tenant, run_audit_failure},
    {"tenant.limits", true, prep_tenant, run_tenant_limits},
};

/* ---- the loop ---- */

struct mode {
	const char *name;
	unsigned kinds;
	bool persistent;
};

static const struct mode modes[] = {
    {"transient write", ISO_FAULTSIM_BEGIN | ISO_FAULTSIM_COMMIT | ISO_FAULTSIM_WRITE, false},
    {"persistent write", ISO_FAULTSIM_BEGIN | ISO_FAULTSIM_COMMIT | ISO_FAULTSIM_WRITE, true},
    {"transient read", ISO_FAULTSIM_READ, false},
};

/* For N = 1, 2, ...: a fresh controller, the preparation, op N failing,
 * the checks, the use case again without faults. Returns how many ops the
 * use case made. */
static int64_t faultsim_case(const struct fault_case *k, const struct mode *m)
{
	for (int64_t n = 1;; n++) {
		struct fixture *fx = fixture_open_over(NULL, true, iso_store_faultsim_open);
		/* --no-agents: allocations go active, as resizing needs. */
		fx->ctl->agent_gate = false;
		struct iso_error err = {0};
		struct ctx x = {0};
		char fault[96];

		k->prepare(fx, &x);
		char *store_before = store_dump(fx);
		char *mem_before = memory_print(fx->ctl, &fx->admin);
		char *audit_before = audit_print(fx->ctl);

		iso_store_faultsim_arm(fx->outer, m->kinds, n, EIO, m->persistent);
		int r = k->run(fx, &x, &err);
		int64_t injected = iso_store_faultsim_injected(fx->outer);
		snprintf(fault, sizeof(fault), "%s in %s", m->name,
		         iso_store_faultsim_last(fx->outer));
		iso_store_faultsim_arm(fx->outer, 0, 0, 0, false);
		/* A queue pass cut short (by its depth, or by a store failure
		 * after a change committed) goes on at the next tick, within a
		 * second: what a rebuilt controller does at once. */
		if (fx->ctl->queue_more)
			ctl_place_pending(fx->ctl);

		if (injected == 0 && r < 0)
			fail_msg("%s without a fault: %s", k->name, err.message);
		if (r < 0 && k->one_tx) {
			char *store_after = store_dump(fx);
			char *mem_after = memory_print(fx->ctl, &fx->admin);
			char *audit_after = audit_print(fx->ctl);
			expect_same("store", k->name, n, fault, store_before, store_after);
			expect_same("memory", k->name, n, fault, mem_before, mem_after);
			expect_same("audit log", k->name, n, fault, audit_before, audit_after);
			free(store_after);
			free(mem_after);
			free(audit_after);
		}
		/* A use case of several transactions that fails half-way (a
		 * node down whose evictions failed) is finished by the retry, or
		 * by a restart: memory matches the store once it is. */
		if (r == 0 || k->one_tx)
			expect_consistent(fx, k->name, n, fault);
		else
			expect_audit_consistent(fx, k->name, n, fault);
		if (r < 0) {
			struct iso_error again = {0};
			if (k->run(fx, &x, &again) < 0)
				fail_msg("%s: after a failure at op %lld (%s), the retry fails: %s",
				         k->name, (long long)n, fault, again.message);
			expect_consistent(fx, k->name, n, "the retry");
		}
		free(store_before);
		free(mem_before);
		free(audit_before);
		void *state = fx;
		fixture_close(&state);
		if (injected == 0)
			return n - 1;
	}
}

/* The wrapper itself: it counts only the armed kinds, fails exactly the
 * nth (and, persistent, every later one) with the errno asked for, passes
 * everything else through, and rollback is never refused. */
static void test_faultsim_store(void **state)
{
	struct fixture *fx = fixture_open_over(NULL, false, iso_store_faultsim_open);
	struct iso_store *s = fx->outer;
	struct iso_tenant t = {0};
	struct iso_error err = {0};
	int64_t n = 0;

	(void)state;
	assert_string_equal(s->ops->name, "faultsim");
	iso_store_faultsim_arm(s, ISO_FAULTSIM_WRITE, 2, ENOSPC, false);
	assert_int_equal(s->ops->begin(s, &err), 0); /* not counted */
	iso_strlcpy(t.name, "w1", sizeof(t.name));
	assert_int_equal(s->ops->tenant_insert(s, &t, &err), 0);
	iso_strlcpy(t.name, "w2", sizeof(t.name));
	memset(&err, 0, sizeof(err));
	assert_int_equal(s->ops->tenant_insert(s, &t, &err), -ENOSPC);
	assert_int_equal(err.code, ISO_E_INTERNAL);
	assert_non_null(strstr(err.message, "tenant_insert"));
	assert_string_equal(iso_store_faultsim_last(s), "tenant_insert");
	iso_strlcpy(t.name, "w3", sizeof(t.name));
	assert_int_equal(s->ops->tenant_insert(s, &t, &err), 0); /* transient */
	assert_int_equal(s->ops->audit_count(s, &n, &err), 0);   /* a read: not counted */
	assert_int_equal(iso_store_faultsim_ops(s), 3);
	assert_int_equal(iso_store_faultsim_injected(s), 1);
	s->ops->rollback(s);
	assert_int_equal(s->ops->tenant_get_by_name(s, "w1", &t, &err), -ENOENT);

	iso_store_faultsim_arm(s, ISO_FAULTSIM_BEGIN | ISO_FAULTSIM_COMMIT, 2, EEXIST, true);
	assert_int_equal(s->ops->begin(s, &err), 0);
	assert_int_equal(s->ops->commit(s, &err), -EEXIST);
	assert_int_equal(err.code, ISO_E_CONFLICT);
	s->ops->rollback(s);
	assert_int_equal(s->ops->begin(s, &err), -EEXIST); /* persistent */
	assert_int_equal(iso_store_faultsim_injected(s), 2);
	/* Group commit is forwarded: a sync counts as a commit. */
	assert_non_null(s->ops->sync);
	iso_store_faultsim_arm(s, ISO_FAULTSIM_COMMIT, 1, EIO, false);
	assert_int_equal(s->ops->sync(s, &err), -EIO);
	assert_int_equal(s->ops->sync(s, &err), 0);
	iso_store_faultsim_arm(s, ISO_FAULTSIM_ALL, 0, 0, false); /* counting only */
	assert_int_equal(s->ops->begin(s, &err), 0);
	s->ops->rollback(s);
	assert_int_equal(iso_store_faultsim_ops(s), 1);
	assert_int_equal(iso_store_faultsim_injected(s), 0);
	void *fxs = fx;
	fixture_close(&fxs);
}

/* A commit whose outcome is unknown (-ENOTCONN: PostgreSQL failed over under
 * COMMIT, src/store/pg.c) may have committed: memory and the audit tree may
 * lag the store. The request fails, nothing more is committed (503), and the
 * next sync fails, which stops the daemon as after a failed flush
 * (docs/store.md, "PostgreSQL failover"). A plain failed commit (-EIO, rolled
 * back) changes nothing of that. */
static void test_commit_outcome_unknown_stops_commits(void **state)
{
	struct fixture *fx = fixture_open_over(NULL, false, iso_store_faultsim_open);
	struct iso_tenant t;
	struct iso_error err = {0};

	(void)state;
	iso_store_faultsim_arm(fx->outer, ISO_FAULTSIM_COMMIT, 1, EIO, false);
	assert_true(iso_controller_tenant_create(fx->ctl, &fx->admin, "t1", "", NULL, &t, &err) <
	            0);
	assert_int_equal(iso_controller_sync(fx->ctl, &err), 0);
	memset(&err, 0, sizeof(err));
	assert_int_equal(
	    iso_controller_tenant_create(fx->ctl, &fx->admin, "t2", "", NULL, &t, &err), 0);

	iso_store_faultsim_arm(fx->outer, ISO_FAULTSIM_COMMIT, 1, ENOTCONN, false);
	assert_true(iso_controller_tenant_create(fx->ctl, &fx->admin, "t3", "", NULL, &t, &err) <
	            0);
	memset(&err, 0, sizeof(err));
	assert_int_equal(
	    iso_controller_tenant_create(fx->ctl, &fx->admin, "t4", "", NULL, &t, &err), -EAGAIN);
	assert_int_equal(err.code, ISO_E_UNAVAILABLE);
	assert_true(iso_controller_sync(fx->ctl, &err) < 0);
	void *fxs = fx;
	fixture_close(&fxs);
}

static void test_use_cases(void **state)
{
	const char *only = getenv("FAULTSIM_CASE");

	(void)state;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(cases); i++) {
		if (only && strcmp(only, cases[i].name) != 0)
			continue;
		for (size_t j = 0; j < ISO_ARRAY_SIZE(modes); j++) {
			int64_t ops = faultsim_case(&cases[i], &modes[j]);
			fprintf(stderr, "# %-28s %-17s %lld ops\n", cases[i].name, modes[j].name,
			        (long long)ops);
			/* Every use case writes: a loop that injected nothing tested nothing.
			 * A keyed retry must not: not even a transaction. */
			bool no_writes = cases[i].run == run_alloc_create_key_retry;
			if (modes[j].kinds & ISO_FAULTSIM_COMMIT)
				assert_true(no_writes ? ops == 0 : ops >= 2);
			else if (no_writes)
				assert_true(ops >= 1); /* its lookup by the key */
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_faultsim_store),
	    cmocka_unit_test(test_commit_outcome_unknown_stops_commits),
	    cmocka_unit_test(test_use_cases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

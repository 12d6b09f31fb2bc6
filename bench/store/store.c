/* bench/store/store.c: what one durable mutation costs in each store backend,
 * measured through the vtable as the controller uses it: a transaction of
 * one allocation insert (one member, one slot) plus one audit event, then
 * commit; and one alloc_get outside a transaction. SQLite (WAL,
 * synchronous=FULL) in a temp directory is the baseline run in the same
 * process; PostgreSQL runs when --pg CONNINFO is given (bench/store/run.sh
 * starts a throwaway cluster), on an emptied schema. Prints per backend the
 * rate, p50 and p99, and the PostgreSQL/SQLite ratios (docs/benchmarks.md,
 * "Store backends"). */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "isostack/store.h"

struct result {
	double tx_per_s, tx_p50_us, tx_p99_us;
	double get_per_s, get_p50_us, get_p99_us;
	double list_ms; /* every allocation with its children, pages of 100 */
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[(int)((n - 1) * p)];
}

static int run(struct iso_store *s, int n, struct result *out)
{
	const struct iso_store_ops *o = s->ops;
	double *lat = calloc((size_t)n, sizeof(double));
	struct iso_member m = {.index = 0, .node = "node-01"};
	struct iso_slot sl = {.member = 0, .gpu = 1, .whole = true, .width = 8};
	struct iso_error err = {0};
	double t0, total;

	if (!lat)
		return -ENOMEM;
	t0 = now_us();
	for (int i = 0; i < n; i++) {
		struct iso_allocation a = {.tenant_id = 1, .state = ISO_ALLOC_ACTIVE, .members = 1};
		char body[96];
		struct iso_audit_record rec = {.seq = i, .tenant_id = 1};
		double t = now_us();

		snprintf(a.id, sizeof(a.id), "a-%016x", i);
		snprintf(a.tenant, sizeof(a.tenant), "acme");
		snprintf(a.owner, sizeof(a.owner), "alice");
		a.shape.whole = true;
		a.shape.gpu_count = 1;
		a.shape.cpus = 8;
		a.shape.memory_mib = 65536;
		a.created_ms = a.updated_ms = 1000 + i;
		a.n_members = a.n_slots = 1;
		a.placed = &m;
		a.slots = &sl;
		rec.len = (size_t)snprintf(body, sizeof(body),
		                           "{\"op\":\"alloc.create\",\"id\":\"%s\"}", a.id);
		rec.body = body;
		if (o->begin(s, &err) < 0 || o->alloc_insert(s, &a, &err) < 0 ||
		    o->audit_append(s, &rec, &err) < 0 || o->commit(s, &err) < 0) {
			fprintf(stderr, "store bench: %s\n", err.message);
			free(lat);
			return -EIO;
		}
		lat[i] = now_us() - t;
	}
	total = now_us() - t0;
	out->tx_per_s = n / (total / 1e6);
	out->tx_p50_us = pct(lat, n, 0.50);
	out->tx_p99_us = pct(lat, n, 0.99);
	t0 = now_us();
	for (int i = 0; i < n; i++) {
		struct iso_allocation got;
		char id[ISO_ID_MAX];
		double t = now_us();

		snprintf(id, sizeof(id), "a-%016x", i);
		if (o->alloc_get(s, id, &got, &err) < 0) {
			fprintf(stderr, "store bench: %s\n", err.message);
			free(lat);
			return -EIO;
		}
		iso_allocation_clear(&got);
		lat[i] = now_us() - t;
	}
	total = now_us() - t0;
	out->get_per_s = n / (total / 1e6);
	out->get_p50_us = pct(lat, n, 0.50);
	out->get_p99_us = pct(lat, n, 0.99);
	free(lat);

	/* What a restart reads: every allocation with its placement, paged. */
	char after[ISO_ID_MAX] = "";
	int listed = 0;
	t0 = now_us();
	for (;;) {
		struct iso_alloc_filter f = {
		    .state = -1, .limit = 100, .after = after[0] ? after : NULL};
		struct iso_allocation *page = NULL;
		int got = 0;

		if (o->alloc_list(s, &f, &page, &got, &err) < 0) {
			fprintf(stderr, "store bench: %s\n", err.message);
			return -EIO;
		}
		listed += got;
		if (got > 0)
			snprintf(after, sizeof(after), "%s", page[got - 1].id);
		iso_allocations_free(page, got);
		if (got < 100)
			break;
	}
	out->list_ms = (now_us() - t0) / 1e3;
	if (listed != n) {
		fprintf(stderr, "store bench: listed %d of %d\n", listed, n);
		return -EIO;
	}
	return 0;
}

static void print(const char *name, const struct result *r)
{
	printf("%-9s commit: %8.0f tx/s  p50 %7.0f us  p99 %7.0f us   alloc_get: %8.0f /s  p50 "
	       "%5.0f us  p99 %5.0f us   list all: %7.1f ms\n",
	       name, r->tx_per_s, r->tx_p50_us, r->tx_p99_us, r->get_per_s, r->get_p50_us,
	       r->get_p99_us, r->list_ms);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(p);
}

int main(int argc, char **argv)
{
	const char *pg = NULL;
	int n = 2000;
	char dir[] = "/tmp/iso-store-bench-XXXXXX", path[64];
	struct iso_store *s = NULL;
	struct iso_error err = {0};
	struct result lite = {0}, post = {0};

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--pg") == 0 && i + 1 < argc)
			pg = argv[++i];
		else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (strcmp(argv[i], "--quick") == 0)
			n = 300;
		else {
			fprintf(stderr, "usage: %s [--pg CONNINFO] [--n N] [--quick]\n", argv[0]);
			return 2;
		}
	}
	if (n < 10) {
		fprintf(stderr, "store bench: --n must be >= 10\n");
		return 2;
	}
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/state.db", dir);
	if (iso_store_open_sqlite(path, &s, &err) < 0 || run(s, n, &lite) < 0) {
		fprintf(stderr, "store bench: sqlite: %s\n", err.message);
		return 1;
	}
	iso_store_close(s);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	printf("store bench: %d transactions (1 allocation + 1 audit event each), then %d "
	       "alloc_get, then alloc_list of all in pages of 100\n",
	       n, n);
	print("sqlite", &lite);
	if (!pg) {
		printf(
		    "postgres  SKIPPED (no --pg CONNINFO; bench/store/run.sh starts a cluster)\n");
		return 0;
	}
	PGconn *c = PQconnectdb(pg);
	PQclear(PQexec(c, "SET client_min_messages = warning; DROP SCHEMA IF EXISTS public CASCADE;"
	                  " CREATE SCHEMA public"));
	PQfinish(c);
	s = NULL;
	if (iso_store_open_postgres(pg, &s, &err) < 0 || run(s, n, &post) < 0) {
		fprintf(stderr, "store bench: postgres: %s\n", err.message);
		return 1;
	}
	iso_store_close(s);
	print("postgres", &post);
	printf("postgres/sqlite: commit rate %.2fx, commit p99 %.2fx, alloc_get rate %.2fx, list "
	       "all %.2fx the time\n",
	       post.tx_per_s / lite.tx_per_s, post.tx_p99_us / lite.tx_p99_us,
	       post.get_per_s / lite.get_per_s, post.list_ms / lite.list_ms);
	return 0;
}

/* bench/audit.c: what the tamper-evident audit log costs, against the plain
 * hash chain it replaces (h_i = SHA-256(h_{i-1} || event)), measured in the
 * same run: (a) durable append throughput into SQLite (WAL,
 * synchronous=FULL, one fsync'd transaction per batch), (b) inclusion proofs
 * at 10 million leaves against a chain's O(n) proof of one event, (c) offline
 * verification of a 1,000,000-event export against re-walking a chain.
 * Usage: audit [--quick] [--dir DIR] [--only append|proofs|verify]; results
 * and the command go to docs/benchmarks.md. */
#include <errno.h>
#include <sched.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "isostack/audit.h"
#include "isostack/util.h"

typedef uint8_t hash_t[ISO_AUDIT_HASH_LEN];

struct params {
	int append_events, batch, rounds;
	uint64_t tree_leaves;
	int proofs, chain_n, chain_proofs;
	int verify_events;
	const char *dir;
	const char *only; /* "append", "proofs" or "verify"; NULL: all */
};

static void die(const char *what)
{
	fprintf(stderr, "bench/audit: %s\n", what);
	exit(1);
}

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void hex16(char *out, uint64_t v)
{
	static const char hexd[] = "0123456789abcdef";

	for (int i = 15; i >= 0; i--, v >>= 4)
		out[i] = hexd[v & 15];
	out[16] = '\0';
}

/* A realistic event, about what an allocation placed by a tenant-admin
 * records (~450 bytes encoded). Filling the struct is the caller's cost in
 * the daemon, so it is kept cheap here: both paths below pay it. */
static char *event_bytes(int64_t seq, size_t *len)
{
	static const char *const actions[] = {"allocation.place", "allocation.release",
	                                      "tenant.update", "auth.login", "audit.read"};
	static const char *const tenants[] = {"acme", "globex", "initech", "umbrella", "hooli"};
	struct iso_audit_event e = {.seq = seq, .time_ms = 1795000000000 + seq};
	struct iso_error err = {0};
	char details[160], *out = NULL;

	iso_strlcpy(e.action, actions[seq % 5], sizeof(e.action));
	iso_strlcpy(e.actor_role, "tenant-admin", sizeof(e.actor_role));
	iso_strlcpy(e.actor_tenant, tenants[seq % 5], sizeof(e.actor_tenant));
	hex16(e.request_id, (uint64_t)seq * 0x9e3779b97f4a7c15ull);
	memcpy(e.actor_token, e.request_id + 4, 12);
	memcpy(e.request_id, "r-", 2);
	iso_strlcpy(e.source, "10.20.30.40:51234", sizeof(e.source));
	iso_strlcpy(e.object_kind, "allocation", sizeof(e.object_kind));
	iso_strlcpy(e.object_id, "a-", sizeof(e.object_id));
	hex16(e.object_id + 2, (uint64_t)seq);
	iso_strlcpy(e.object_tenant, e.actor_tenant, sizeof(e.object_tenant));
	snprintf(details, sizeof(details),
	         "{\"profile\":\"1g.10gb\",\"gpus\":%d,\"members\":2,\"node\":\"gpu-%03d\","
	         "\"placement\":[[0,\"gpu-%03d\",%d]],\"state\":\"active\"}",
	         (int)(seq % 8) + 1, (int)(seq % 128), (int)(seq % 128), (int)(seq % 7));
	e.details = details; /* borrowed: not cleared */
	if (iso_audit_event_encode(&e, &out, len, &err) < 0)
		die(err.message);
	return out;
}

static void chain_step(hash_t h, const char *bytes, size_t len)
{
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, h, ISO_AUDIT_HASH_LEN);
	crypto_hash_sha256_update(&st, (const unsigned char *)bytes, len);
	crypto_hash_sha256_final(&st, h);
}

/* ---- (a) durable appends ---- */

static sqlite3 *open_db(const char *path)
{
	sqlite3 *db;
	char *msg = NULL;

	unlink(path);
	if (sqlite3_open(path, &db) != SQLITE_OK)
		die("cannot open the SQLite database");
	if (sqlite3_exec(db,
	                 "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
	                 "CREATE TABLE audit(seq INTEGER PRIMARY KEY, body BLOB NOT NULL,"
	                 " hash BLOB NOT NULL);",
	                 NULL, NULL, &msg) != SQLITE_OK)
		die(msg);
	return db;
}

static void close_db(sqlite3 *db, const char *path)
{
	char side[600];

	sqlite3_close(db);
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
}

/* Events/s for one run; merkle: leaf + tree + a signed head each second,
 * else the hash chain. Both encode every event and commit every batch. */
static double append_run(const struct params *p, bool merkle, const struct iso_audit_key *k)
{
	char path[512];
	sqlite3 *db;
	sqlite3_stmt *st;
	struct iso_merkle *m = NULL;
	hash_t h = {0};
	uint64_t t0, last_head;
	int heads = 0;

	snprintf(path, sizeof(path), "%s/bench-audit-%s.db", p->dir, merkle ? "merkle" : "chain");
	db = open_db(path);
	if (sqlite3_prepare_v2(db, "INSERT INTO audit(seq, body, hash) VALUES (?, ?, ?)", -1, &st,
	                       NULL) != SQLITE_OK)
		die(sqlite3_errmsg(db));
	if (merkle && iso_merkle_new(&m) < 0)
		die("out of memory");
	t0 = last_head = iso_mono_ns();
	for (int i = 0; i < p->append_events; i++) {
		size_t len;
		char *bytes;

		if (i % p->batch == 0 && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
			die(sqlite3_errmsg(db));
		bytes = event_bytes(i, &len);
		if (merkle) {
			iso_audit_leaf_hash(bytes, len, h);
			if (iso_merkle_append(m, h) < 0)
				die("out of memory");
		} else {
			chain_step(h, bytes, len);
		}
		sqlite3_bind_int64(st, 1, i);
		sqlite3_bind_blob(st, 2, bytes, (int)len, SQLITE_TRANSIENT);
		sqlite3_bind_blob(st, 3, h, sizeof(h), SQLITE_TRANSIENT);
		if (sqlite3_step(st) != SQLITE_DONE)
			die(sqlite3_errmsg(db));
		sqlite3_reset(st);
		free(bytes);
		if ((i + 1) % p->batch == 0 || i + 1 == p->append_events) {
			if (merkle && iso_mono_ns() - last_head >= 1000000000ull) {
				struct iso_audit_head hd = {.size = iso_merkle_size(m),
				                            .time_ms = i};
				iso_merkle_root(m, hd.size, hd.root);
				iso_audit_head_sign(&hd, k);
				last_head = iso_mono_ns();
				heads++;
			}
			if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
				die(sqlite3_errmsg(db));
		}
	}
	double s = secs(iso_mono_ns() - t0);
	(void)heads;
	sqlite3_finalize(st);
	close_db(db, path);
	iso_merkle_free(m);
	return p->append_events / s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static double pct(double *v, int n, double q)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	int i = (int)(q * (n - 1) + 0.5);
	return v[i];
}

static void bench_append(const struct params *p, const struct iso_audit_key *k)
{
	double chain[8], merkle[8];

	printf("\n(a) durable appends: %d events per run, one fsync'd transaction per %d "
	       "events,\n    SQLite WAL synchronous=FULL in %s; median of %d alternating runs\n",
	       p->append_events, p->batch, p->dir, p->rounds);
	for (int r = 0; r < p->rounds; r++) {
		chain[r] = append_run(p, false, k);
		merkle[r] = append_run(p, true, k);
	}
	double c = median(chain, p->rounds), m = median(merkle, p->rounds);
	printf("| append path | events/s | ratio to chain |\n|---|---|---|\n");
	printf("| baseline: hash chain (encode + chain hash + insert) | %.0f | 1 |\n", c);
	printf("| Merkle log (encode + leaf + tree + insert + head/s) | %.0f | %.2f |\n", m, m / c);
	printf("goal >= 50,000 events/s: %s\n", m >= 50000 ? "met" : "NOT met");
}

/* ---- (b) inclusion proofs ---- */

static void bench_proofs(const struct params *p)
{
	struct iso_merkle *m;
	hash_t leaf, root, proof[ISO_AUDIT_MAX_PROOF];
	uint64_t seed = 42, t0;
	double *gen = malloc((size_t)p->proofs * sizeof(double));
	double *both = malloc((size_t)p->proofs * sizeof(double));
	int n;

	if (!gen || !both || iso_merkle_new(&m) < 0)
		die("out of memory");
	printf("\n(b) inclusion proofs: %llu leaves, %d random proofs\n",
	       (unsigned long long)p->tree_leaves, p->proofs);
	t0 = iso_mono_ns();
	for (uint64_t i = 0; i < p->tree_leaves; i++) {
		for (int w = 0; w < 4; w++) {
			uint64_t x = splitmix(&seed);
			memcpy(leaf + (size_t)8 * w, &x, 8);
		}
		if (iso_merkle_append(m, leaf) < 0)
			die("out of memory building the tree");
	}
	double build = secs(iso_mono_ns() - t0);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("tree built in %.1f s (%.0f appends/s); peak RSS so far %.0f MB\n", build,
	       p->tree_leaves / build, ru.ru_maxrss / 1024.0);
	iso_merkle_root(m, p->tree_leaves, root);
	for (int i = 0; i < p->proofs; i++) {
		uint64_t idx = splitmix(&seed) % p->tree_leaves;
		uint64_t a = iso_mono_ns();
		if (iso_merkle_inclusion(m, idx, p->tree_leaves, proof, &n) < 0)
			die("inclusion failed");
		uint64_t b = iso_mono_ns();
		iso_merkle_leaf(m, idx, leaf);
		if (!iso_merkle_verify_inclusion(idx, p->tree_leaves, leaf,
		                                 (const uint8_t(*)[ISO_AUDIT_HASH_LEN])proof, n,
		                                 root))
			die("a proof did not verify");
		uint64_t c = iso_mono_ns();
		gen[i] = (double)(b - a) / 1e3;
		both[i] = (double)(c - a) / 1e3;
	}
	double gen_med = median(gen, p->proofs), gen_p99 = pct(gen, p->proofs, 0.99);
	double both_med = median(both, p->proofs), both_p99 = pct(both, p->proofs, 0.99);
	iso_merkle_free(m);

	/* The chain at a smaller n: proving event i to someone holding h_n
	 * means handing over events i+1..n-1 and having them re-hashed. */
	int cn = p->chain_n;
	char **ev = malloc((size_t)cn * sizeof(char *));
	size_t *len = malloc((size_t)cn * sizeof(size_t));
	hash_t *hs = malloc((size_t)cn * sizeof(hash_t)), head = {0};
	struct iso_merkle *small;
	double *chain = malloc((size_t)p->chain_proofs * sizeof(double));
	double *mk = malloc((size_t)p->proofs * sizeof(double));
	if (!ev || !len || !hs || !chain || !mk || iso_merkle_new(&small) < 0)
		die("out of memory");
	for (int i = 0; i < cn; i++) {
		ev[i] = event_bytes(i, &len[i]);
		chain_step(head, ev[i], len[i]);
		memcpy(hs[i], head, sizeof(head));
		iso_audit_leaf_hash(ev[i], len[i], leaf);
		iso_merkle_append(small, leaf);
	}
	for (int t = 0; t < p->chain_proofs; t++) {
		int i = (int)(splitmix(&seed) % (uint64_t)cn);
		uint64_t a = iso_mono_ns();
		/* generate: gather the later events */
		size_t total = 0;
		for (int j = i + 1; j < cn; j++)
			total += len[j];
		char *buf = malloc(total + 1);
		size_t off = 0;
		for (int j = i + 1; j < cn; j++) {
			memcpy(buf + off, ev[j], len[j]);
			off += len[j];
		}
		/* verify: re-walk from h_i to h_n */
		hash_t h;
		memcpy(h, hs[i], sizeof(h));
		off = 0;
		for (int j = i + 1; j < cn; j++) {
			chain_step(h, buf + off, len[j]);
			off += len[j];
		}
		if (memcmp(h, head, sizeof(h)) != 0)
			die("chain proof failed");
		free(buf);
		chain[t] = (double)(iso_mono_ns() - a) / 1e3;
	}
	iso_merkle_root(small, (uint64_t)cn, root);
	for (int t = 0; t < p->proofs; t++) {
		uint64_t idx = splitmix(&seed) % (uint64_t)cn;
		uint64_t a = iso_mono_ns();
		iso_merkle_inclusion(small, idx, (uint64_t)cn, proof, &n);
		iso_merkle_leaf(small, idx, leaf);
		if (!iso_merkle_verify_inclusion(idx, (uint64_t)cn, leaf,
		                                 (const uint8_t(*)[ISO_AUDIT_HASH_LEN])proof, n,
		                                 root))
			die("a proof did not verify");
		mk[t] = (double)(iso_mono_ns() - a) / 1e3;
	}
	double ch_med = median(chain, p->chain_proofs), ch_p99 = pct(chain, p->chain_proofs, 0.99);
	double mk_med = median(mk, p->proofs), mk_p99 = pct(mk, p->proofs, 0.99);
	printf("| proof of one event | median us | p99 us | ratio (median) to chain |\n"
	       "|---|---|---|---|\n");
	printf("| baseline: hash chain, n = %d (gather + re-hash later events) | %.0f | %.0f | 1 "
	       "|\n",
	       cn, ch_med, ch_p99);
	printf("| Merkle, n = %d: generate + verify | %.2f | %.2f | %.6f |\n", cn, mk_med, mk_p99,
	       mk_med / ch_med);
	printf("| Merkle, n = %llu: generate | %.2f | %.2f | %.6f |\n",
	       (unsigned long long)p->tree_leaves, gen_med, gen_p99, gen_med / ch_med);
	printf("| Merkle, n = %llu: generate + verify | %.2f | %.2f | %.6f |\n",
	       (unsigned long long)p->tree_leaves, both_med, both_p99, both_med / ch_med);
	printf("goal < 100 us per proof at %llu leaves: %s\n", (unsigned long long)p->tree_leaves,
	       gen_p99 < 100   ? "met (p99)"
	       : gen_med < 100 ? "met (median)"
	                       : "NOT met");
	for (int i = 0; i < cn; i++)
		free(ev[i]);
	free(ev);
	free(len);
	free(hs);
	free(chain);
	free(mk);
	free(gen);
	free(both);
	iso_merkle_free(small);
}

/* ---- (c) offline verification ---- */

/* Re-walks the chain over the event bytes of the export's event lines (same
 * fixed layout), one thread: each step needs the one before. */
static double chain_verify(const char *path, const hash_t want)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	hash_t h = {0};
	uint64_t t0 = iso_mono_ns();
	static const char key[] = "\"event\":";

	if (!f)
		die("cannot open the export");
	while ((n = getline(&line, &cap, f)) > 0) {
		if (strncmp(line, "{\"type\":\"event\"", 15) != 0)
			continue;
		char *ev = strstr(line, key);
		if (!ev)
			die("bad event line");
		ev += sizeof(key) - 1;
		chain_step(h, ev, (size_t)(line + n - 2 - ev)); /* up to the closing '}' */
	}
	double s = secs(iso_mono_ns() - t0);
	free(line);
	fclose(f);
	if (memcmp(h, want, sizeof(h)) != 0)
		die("the chain did not verify");
	return s;
}

static double merkle_verify(const char *path, const uint8_t *pk, bool one_core)
{
	struct iso_audit_verdict v;
	struct iso_error err = {0};
	cpu_set_t all, one;
	FILE *f = fopen(path, "r");

	if (!f)
		die("cannot open the export");
	if (one_core) {
		sched_getaffinity(0, sizeof(all), &all);
		CPU_ZERO(&one);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &all)) {
				CPU_SET(c, &one);
				break;
			}
		sched_setaffinity(0, sizeof(one), &one);
	}
	uint64_t t0 = iso_mono_ns();
	if (iso_audit_verify_stream(f, path, pk, &v, &err) < 0)
		die(err.message);
	double s = secs(iso_mono_ns() - t0);
	if (one_core)
		sched_setaffinity(0, sizeof(all), &all);
	fclose(f);
	if (!v.ok)
		die(v.message);
	return s;
}

static void bench_verify(const struct params *p, const struct iso_audit_key *k)
{
	char path[512];
	struct iso_merkle *m;
	hash_t chain = {0}, leaf;
	int n = p->verify_events;
	uint64_t t0 = iso_mono_ns();

	snprintf(path, sizeof(path), "%s/bench-audit-export.jsonl", p->dir);
	FILE *f = fopen(path, "w");
	if (!f || iso_merkle_new(&m) < 0)
		die("cannot create the export");
	/* Leaves first, then heads every 100,000 events and at the end, written
	 * before the events as an exporter does. */
	char **ev = malloc((size_t)n * sizeof(char *));
	size_t *len = malloc((size_t)n * sizeof(size_t));
	if (!ev || !len)
		die("out of memory");
	for (int i = 0; i < n; i++) {
		ev[i] = event_bytes(i, &len[i]);
		iso_audit_leaf_hash(ev[i], len[i], leaf);
		iso_merkle_append(m, leaf);
		chain_step(chain, ev[i], len[i]);
	}
	for (int s = 100000; s <= n; s += 100000) {
		struct iso_audit_head h = {.size = (uint64_t)s, .time_ms = s};
		iso_merkle_root(m, h.size, h.root);
		iso_audit_head_sign(&h, k);
		iso_audit_export_head(f, &h);
	}
	if (n % 100000) {
		struct iso_audit_head h = {.size = (uint64_t)n, .time_ms = n};
		iso_merkle_root(m, h.size, h.root);
		iso_audit_head_sign(&h, k);
		iso_audit_export_head(f, &h);
	}
	for (int i = 0; i < n; i++) {
		iso_merkle_leaf(m, (uint64_t)i, leaf);
		if (iso_audit_export_event(f, i, leaf, ev[i], len[i]) < 0)
			die("cannot write the export");
		free(ev[i]);
	}
	free(ev);
	free(len);
	iso_merkle_free(m);
	if (fclose(f) != 0)
		die("cannot write the export");
	long size = 0;
	FILE *g = fopen(path, "r");
	if (g) {
		fseek(g, 0, SEEK_END);
		size = ftell(g);
		fclose(g);
	}
	printf("\n(c) offline verification: %d events, %.0f MB export written in %.1f s\n", n,
	       size / 1e6, secs(iso_mono_ns() - t0));
	double c[8], mk[8], one[8];
	for (int r = 0; r < p->rounds; r++) {
		c[r] = chain_verify(path, chain);
		mk[r] = merkle_verify(path, k->pk, false);
		one[r] = merkle_verify(path, k->pk, true);
	}
	double cm = median(c, p->rounds), mm = median(mk, p->rounds), om = median(one, p->rounds);
	printf("| verifier | seconds | events/s | ratio to chain |\n|---|---|---|---|\n");
	printf("| baseline: hash chain re-walk (one core: each step needs the last) | %.2f | %.0f "
	       "| 1 |\n",
	       cm, n / cm);
	printf("| iso_audit_verify_stream, one core | %.2f | %.0f | %.2f |\n", om, n / om, om / cm);
	printf("| iso_audit_verify_stream, all cores | %.2f | %.0f | %.2f |\n", mm, n / mm,
	       mm / cm);
	printf("goal < 2 s for 1,000,000 events: %s\n", n < 1000000 ? "n/a (--quick)"
	                                                : mm < 2.0  ? "met"
	                                                            : "NOT met");
	unlink(path);
}

int main(int argc, char **argv)
{
	struct params p = {.append_events = 200000,
	                   .batch = 1000,
	                   .rounds = 3,
	                   .tree_leaves = 10000000,
	                   .proofs = 10000,
	                   .chain_n = 100000,
	                   .chain_proofs = 40,
	                   .verify_events = 1000000,
	                   .dir = "."};
	struct iso_audit_key k;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			p.append_events = 20000;
			p.tree_leaves = 1000000;
			p.proofs = 2000;
			p.chain_n = 10000;
			p.chain_proofs = 20;
			p.verify_events = 100000;
			p.rounds = 1;
		} else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
			p.dir = argv[++i];
		} else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
			p.only = argv[++i];
		} else {
			fprintf(stderr,
			        "usage: %s [--quick] [--dir DIR] [--only append|proofs|verify]\n"
			        "  DIR (default .) holds the SQLite databases and the "
			        "export; use a real disk, not tmpfs\n",
			        argv[0]);
			return 2;
		}
	}
	if (sodium_init() < 0)
		die("libsodium cannot start");
	crypto_sign_keypair(k.pk, k.sk);
	printf("isostack audit log benchmark%s (%ld CPUs online)\n",
	       p.append_events < 200000 ? " --quick" : "", sysconf(_SC_NPROCESSORS_ONLN));
	size_t sample = 0;
	free(event_bytes(12345, &sample));
	printf("events like: %zu bytes canonical (a tenant-admin placing an allocation)\n", sample);
	uint64_t t0 = iso_mono_ns();
	if (!p.only || strcmp(p.only, "append") == 0)
		bench_append(&p, &k);
	if (!p.only || strcmp(p.only, "proofs") == 0)
		bench_proofs(&p);
	if (!p.only || strcmp(p.only, "verify") == 0)
		bench_verify(&p, &k);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("\ntotal %.0f s, peak RSS %.0f MB\n", secs(iso_mono_ns() - t0),
	       ru.ru_maxrss / 1024.0);
	return 0;
}

/* verify_lines.c: the hot path of offline verification. Nearly every line of
 * an export is an event line written by iso_audit_export_event in one fixed
 * layout, so instead of parsing JSON this takes the canonical event bytes
 * straight out of the line, hashes them and reads the few numbers it needs.
 * Lines are independent, so a small pool checks them on every core while the
 * caller does the in-order work (seq order, tree, heads) on the batch before.
 * On this project's 2-core machine that is what keeps a million events under
 * two seconds with libsodium's portable SHA-256 (docs/benchmarks.md). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/internal.h"

static const char EV_PREFIX[] = "{\"type\":\"event\",\"seq\":";
static const char EV_LEAF[] = ",\"leaf\":\"";
static const char EV_EVENT[] = "\",\"event\":";
static const char EV_INNER_SEQ[] = ",\"seq\":";
#define LIT(s)  (sizeof(s) - 1)
#define HEX_LEN ((size_t)2 * ISO_AUDIT_HASH_LEN)

/* A non-negative integer in canonical decimal ("0" or no leading zero),
 * at most INT64_MAX. Advances *p past it. */
static bool parse_seq(const char **p, const char *end, int64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s >= end || *s < '0' || *s > '9' ||
	    (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9'))
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (v > (uint64_t)(INT64_MAX - (*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*out = (int64_t)v;
	return true;
}

void vline_check(const struct vline *l, struct vres *r)
{
	static const char hexd[] = "0123456789abcdef";
	static const uint8_t zero = 0x00;
	const char *p = l->p, *end = l->p + l->len, *given;
	uint8_t unused[ISO_AUDIT_HASH_LEN];
	char hex[HEX_LEN];
	crypto_hash_sha256_state st;

	r->kind = VL_OTHER;
	r->status = VS_OK;
	r->seq = -1;
	r->inner_seq = -1;
	if (l->len < LIT(EV_PREFIX) || memcmp(p, EV_PREFIX, LIT(EV_PREFIX)) != 0)
		return;
	r->kind = VL_EVENT;
	p += LIT(EV_PREFIX);
	if (!parse_seq(&p, end, &r->seq)) {
		r->seq = -1;
		r->status = VS_BAD_SEQ;
		return;
	}
	if ((size_t)(end - p) < LIT(EV_LEAF) + HEX_LEN + LIT(EV_EVENT) + 3 ||
	    memcmp(p, EV_LEAF, LIT(EV_LEAF)) != 0) {
		r->status = VS_BAD_LAYOUT;
		return;
	}
	p += LIT(EV_LEAF);
	given = p;
	p += HEX_LEN;
	if (memcmp(p, EV_EVENT, LIT(EV_EVENT)) != 0) {
		r->status = VS_BAD_LAYOUT;
		return;
	}
	p += LIT(EV_EVENT);
	/* The event is everything up to the '}' that closes the line. */
	const char *ev = p;
	size_t len = (size_t)(end - 1 - p);
	if (end[-1] != '}' || len < 2 || ev[0] != '{' || ev[len - 1] != '}') {
		r->status = VS_BAD_LAYOUT;
		return;
	}
	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, &zero, 1);
	crypto_hash_sha256_update(&st, (const unsigned char *)ev, len);
	crypto_hash_sha256_final(&st, r->leaf);
	/* Compared as text: cheaper than decoding the line's hex, and equal
	 * text is also proof that it is lowercase hex. */
	for (size_t i = 0; i < ISO_AUDIT_HASH_LEN; i++) {
		hex[2 * i] = hexd[r->leaf[i] >> 4];
		hex[2 * i + 1] = hexd[r->leaf[i] & 15];
	}
	if (memcmp(hex, given, sizeof(hex)) != 0) {
		r->status = audit_unhex(given, sizeof(hex), unused, sizeof(unused))
		                ? VS_LEAF_MISMATCH
		                : VS_BAD_LEAF;
		return;
	}
	/* The event's own top-level "seq" is the LAST occurrence of ,"seq": in
	 * its canonical bytes. Keys are sorted, so after "seq" come only
	 * "source" (a string) and "time" (an integer); a string in canonical
	 * form never holds an unescaped '"' (it is written \"), so the text
	 * ,"seq": cannot occur inside "source", and an integer holds none. Any
	 * earlier occurrence is a key inside "details" or text before it. */
	size_t at = len >= LIT(EV_INNER_SEQ) ? len - LIT(EV_INNER_SEQ) + 1 : 0;
	bool found = false;
	while (!found && at-- > 0)
		found = ev[at] == ',' && memcmp(ev + at, EV_INNER_SEQ, LIT(EV_INNER_SEQ)) == 0;
	p = ev + (found ? at + LIT(EV_INNER_SEQ) : 0);
	if (!found || !parse_seq(&p, ev + len, &r->inner_seq) || *p != ',') {
		r->inner_seq = -1;
		r->status = VS_NO_INNER_SEQ;
		return;
	}
	if (r->inner_seq != r->seq)
		r->status = VS_INNER_SEQ;
}

/* ---- the pool ---- */

#define VPOOL_MAX 7          /* workers besides the caller */
#define GRAIN     32         /* lines taken at a time */
#define SPIN_NS   2000000ull /* spin this long before sleeping */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Batches come every few milliseconds. A worker that sleeps between them
 * hands its CPU back, and on a virtual machine getting it back can take
 * longer than the batch: so both sides spin briefly (on atomics, yielding
 * now and then) before they block on the condition variables, which are
 * only the slow path. */
struct vpool {
	pthread_mutex_t mu;
	pthread_cond_t work, idle;
	pthread_t th[VPOOL_MAX];
	int nth;
	_Atomic uint64_t gen; /* batch number, bumped by vpool_start */
	_Atomic int finished; /* workers done with batch `gen` */
	_Atomic bool quit;
	const struct vline *lines; /* published before gen, read after it */
	struct vres *res;
	size_t n;
	atomic_size_t next;
};

static void run_batch(struct vpool *p, const struct vline *lines, struct vres *res, size_t n)
{
	for (;;) {
		size_t i = atomic_fetch_add(&p->next, GRAIN);
		if (i >= n)
			return;
		size_t e = i + GRAIN < n ? i + GRAIN : n;
		for (; i < e; i++)
			vline_check(&lines[i], &res[i]);
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Spins until done(p, arg) or SPIN_NS passed; true when done. */
static bool spin_until(struct vpool *p, bool (*done)(struct vpool *, uint64_t), uint64_t arg)
{
	uint64_t start = 0;

	for (unsigned i = 1;; i++) {
		if (done(p, arg))
			return true;
		cpu_relax();
		if ((i & 255) == 0) {
			/* On a busy machine, let whoever we wait for have the CPU. */
			sched_yield();
			uint64_t now = mono_ns();
			if (!start)
				start = now;
			else if (now - start > SPIN_NS)
				return false;
		}
	}
}

static bool new_batch(struct vpool *p, uint64_t seen)
{
	return atomic_load(&p->quit) || atomic_load(&p->gen) != seen;
}

static bool all_finished(struct vpool *p, uint64_t unused)
{
	(void)unused;
	return atomic_load(&p->finished) == p->nth;
}

static void *worker(void *arg)
{
	struct vpool *p = arg;
	uint64_t seen = 0;

	for (;;) {
		if (!spin_until(p, new_batch, seen)) {
			pthread_mutex_lock(&p->mu);
			while (!new_batch(p, seen))
				pthread_cond_wait(&p->work, &p->mu);
			pthread_mutex_unlock(&p->mu);
		}
		if (atomic_load(&p->quit))
			return NULL;
		seen = atomic_load(&p->gen);
		run_batch(p, p->lines, p->res, p->n);
		atomic_fetch_add(&p->finished, 1);
		pthread_mutex_lock(&p->mu);
		pthread_cond_signal(&p->idle);
		pthread_mutex_unlock(&p->mu);
	}
}

static int cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int vpool_new(struct vpool **out)
{
	struct vpool *p = calloc(1, sizeof(*p));
	int want;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->idle, NULL);
	atomic_init(&p->next, 0);
	atomic_init(&p->gen, 0);
	atomic_init(&p->finished, 0);
	atomic_init(&p->quit, false);
	want = cpus() - 1;
	if (want > VPOOL_MAX)
		want = VPOOL_MAX;
	/* Fewer workers than asked for only costs speed. */
	for (int i = 0; i < want; i++) {
		if (pthread_create(&p->th[p->nth], NULL, worker, p) != 0)
			break;
		p->nth++;
	}
	*out = p;
	return 0;
}

void vpool_free(struct vpool *p)
{
	if (!p)
		return;
	atomic_store(&p->quit, true);
	pthread_mutex_lock(&p->mu);
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

void vpool_start(struct vpool *p, const struct vline *lines, struct vres *res, size_t n)
{
	/* Workers are all idle here (vpool_finish waited for them). */
	p->lines = lines;
	p->res = res;
	p->n = n;
	atomic_store(&p->next, 0);
	atomic_store(&p->finished, 0);
	atomic_fetch_add(&p->gen, 1); /* seq_cst: the fields above are visible first */
	pthread_mutex_lock(&p->mu);
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
}

void vpool_finish(struct vpool *p)
{
	run_batch(p, p->lines, p->res, p->n);
	if (spin_until(p, all_finished, 0))
		return;
	pthread_mutex_lock(&p->mu);
	while (!all_finished(p, 0))
		pthread_cond_wait(&p->idle, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

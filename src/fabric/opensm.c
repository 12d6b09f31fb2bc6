/* opensm.c: the OpenSM driver. OpenSM has no API for partitions, only a file
 * it rereads on SIGHUP, and it fails dangerously: a file it cannot parse
 * flattens the fabric, a port whose table is too small silently loses keys
 * (ERR 0507/0512). So every change goes the long way round: render, validate
 * with our own mirror of OpenSM's parser, write atomically to every SM,
 * SIGHUP, watch OpenSM's log for the incidents it reports, and count the
 * intent confirmed only when the P_Key tables read back (SMP) match it.
 * A worker thread owns all of that I/O so that apply() and poll() never
 * block the controller; intents arriving within coalesce_ms become one
 * write. Facts: docs/reference-fabric.md; design: docs/fabric.md. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "isostack/smfile.h"

#define POLL_MS          50
#define SM_DOWN_RETRY_MS 1000
#define SM_CHECK_MS      1000 /* how often the worker looks at the SMs' processes */
#define MAX_SMS          65

struct sm_watch {
	struct iso_sm_files files;
	struct iso_sm_log log; /* its log_file, scanned for incidents (src/smfile/log.c) */
};

/* One intent and its rendered text, as it travels through the mailbox. */
struct work {
	struct iso_fabric_intent in;
	char *text;
};

struct osm_driver {
	struct iso_fabric_driver base;
	int n_sms; /* [0] is the primary */
	struct sm_watch sms[MAX_SMS];
	int coalesce_ms, confirm_timeout_ms;

	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu */
	bool stop;
	bool has_pending;
	struct work pending;
	uint64_t ready_ns; /* monotonic: when the pending intent may be written */
	struct iso_fabric_status status;

	/* worker's own */
	struct iso_smp *smp;
	char *good_text;               /* the last file OpenSM accepted */
	struct iso_fabric_intent last; /* the last intent written */
	bool have_last;
	uint64_t *dirty; /* GUIDs changed since the last confirmation */
	int n_dirty, cap_dirty;

	pthread_mutex_t snap_mu; /* serialises every use of smp (worker and snapshot) */
	uint64_t sm_next_ns;     /* worker's own: when the SMs' processes are looked at next */

	/* fabric.partitions_writer agent: the SM host's agent writes the file
	 * (docs/fabric.md, "partitions.conf through the SM host's agent") */
	bool by_agent;
	/* under mu */
	char *pub_text;     /* the newest file, for the agent */
	uint64_t pub_gen;   /* its intent generation */
	uint64_t agent_gen; /* the highest generation the agent wrote and signalled */
	uint64_t agent_incident_gen;
	char agent_incident[200];
	uint64_t created_ns; /* monotonic: the bound for a first report counts from here */
	uint64_t report_ns;  /* monotonic: the agent's last report (0: none yet) */
	int report_alive;    /* what it said of OpenSM's process: 1, 0, -1 not said */
};

static uint64_t ms_ns(int64_t ms)
{
	return (uint64_t)ms * 1000000u;
}

/* ---- intents ---- */

static void work_clear(struct work *w)
{
	iso_fabric_intent_clear(&w->in);
	free(w->text);
	w->text = NULL;
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int iso_fabric_expected_keys(const struct iso_fabric_intent *in, uint64_t guid, uint16_t *keys,
                             int max)
{
	int n = 0;

	for (int i = 0; i < in->n_parts; i++) {
		const struct iso_partition *p = &in->parts[i];
		int lo = 0, hi = p->n_members - 1;

		if (p->kind == ISO_PART_DEFAULT)
			continue;
		/* members are sorted by GUID */
		while (lo <= hi) {
			int mid = (lo + hi) / 2;
			uint64_t g = p->members[mid].guid;

			if (g == guid) {
				if (n < max)
					keys[n] =
					    (uint16_t)(p->pkey | (p->members[mid].membership ==
					                                  ISO_MEMBER_FULL
					                              ? ISO_PKEY_FULL_BIT
					                              : 0));
				n++;
				break;
			}
			if (g < guid)
				lo = mid + 1;
			else
				hi = mid - 1;
		}
	}
	if (n > 1 && n <= max)
		qsort(keys, (size_t)n, sizeof(*keys), cmp_u16);
	return n;
}

bool iso_fabric_table_matches(const struct iso_port_table *t, const uint16_t *keys, int n)
{
	uint16_t have[4096];
	int k = 0;

	for (int i = 0; i < t->n_pkeys; i++) {
		if ((t->pkeys[i] & ISO_PKEY_BASE_MASK) == ISO_PKEY_DEFAULT)
			continue;
		if (k == (int)ISO_ARRAY_SIZE(have))
			return false;
		have[k++] = t->pkeys[i];
	}
	if (k != n)
		return false;
	qsort(have, (size_t)k, sizeof(*have), cmp_u16);
	return memcmp(have, keys, (size_t)n * sizeof(*keys)) == 0;
}

/* Adds to `dirty` every GUID whose keys differ between `a` (may be NULL) and
 * `b`: those are the ports whose tables must be read back. */
static int mark_dirty(struct osm_driver *d, const struct iso_fabric_intent *a,
                      const struct iso_fabric_intent *b)
{
	const struct iso_fabric_intent *sides[2] = {a, b};
	uint16_t ka[256], kb[256];

	for (int s = 0; s < 2; s++) {
		if (!sides[s])
			continue;
		for (int i = 0; i < sides[s]->n_parts; i++) {
			const struct iso_partition *p = &sides[s]->parts[i];

			for (int m = 0; m < p->n_members; m++) {
				uint64_t g = p->members[m].guid;
				int na = a ? iso_fabric_expected_keys(a, g, ka, 256) : -1;
				int nb = iso_fabric_expected_keys(b, g, kb, 256);

				if (na == nb && na <= 256 &&
				    memcmp(ka, kb, (size_t)na * sizeof(*ka)) == 0)
					continue;
				if (d->n_dirty == d->cap_dirty) {
					int cap = d->cap_dirty ? d->cap_dirty * 2 : 64;
					uint64_t *nd = realloc(d->dirty, (size_t)cap * sizeof(*nd));
					if (!nd)
						return -ENOMEM;
					d->dirty = nd;
					d->cap_dirty = cap;
				}
				d->dirty[d->n_dirty++] = g;
			}
		}
	}
	/* unique */
	if (d->n_dirty > 1) {
		int k = 1;
		qsort(d->dirty, (size_t)d->n_dirty, sizeof(*d->dirty), cmp_u64);
		for (int i = 1; i < d->n_dirty; i++)
			if (d->dirty[i] != d->dirty[k - 1])
				d->dirty[k++] = d->dirty[i];
		d->n_dirty = k;
	}
	return 0;
}

/* ---- status ---- */

static void set_incident(struct osm_driver *d, const char *fmt, ...) _printf_(2, 3);
static void set_incident(struct osm_driver *d, const char *fmt, ...)
{
	char msg[sizeof(d->status.incident_msg)];
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
		msg[0] = '\0';
	va_end(ap);
	pthread_mutex_lock(&d->mu);
	d->status.incident = true;
	iso_strlcpy(d->status.incident_msg, msg, sizeof(d->status.incident_msg));
	pthread_mutex_unlock(&d->mu);
	iso_log(ISO_LOG_ERR, "fabric.opensm_incident", "msg=\"%s\"", msg);
}

static bool stop_or_newer(struct osm_driver *d)
{
	bool r;

	pthread_mutex_lock(&d->mu);
	r = d->stop || d->has_pending;
	pthread_mutex_unlock(&d->mu);
	return r;
}

/* ---- is the SM reachable ---- */

/* The local writer: whether the configured SMs' processes run, looked at
 * by the worker at most once a second (a pid file and kill 0 each), so
 * that poll() only copies the answer. UP while any SM runs: a standby that
 * took over from a dead primary serves the fabric, so the reason says which
 * is down rather than the state. */
static void sm_check(struct osm_driver *d)
{
	uint64_t now = iso_mono_ns();
	int n_files = 0, n_up = 0, standby_down = 0;
	bool primary = d->n_sms > 0 && d->sms[0].files.pid_file[0], primary_up = false;
	enum iso_sm_state st = ISO_SM_STATE_UP;
	char why[ISO_SM_REASON_MAX] = "";

	if (d->by_agent || now < d->sm_next_ns)
		return;
	d->sm_next_ns = now + ms_ns(SM_CHECK_MS);
	for (int i = 0; i < d->n_sms; i++) {
		bool up;

		if (!d->sms[i].files.pid_file[0])
			continue;
		n_files++;
		up = iso_sm_pid_alive(d->sms[i].files.pid_file) != 0;
		n_up += up;
		if (i == 0)
			primary_up = up;
		else
			standby_down += !up;
	}
	if (n_files == 0) {
		st = ISO_SM_STATE_UNKNOWN;
		snprintf(why, sizeof(why), "no SM pid_file is configured (fabric.pid_file)");
	} else if (n_up == 0) {
		st = ISO_SM_STATE_DOWN;
		snprintf(why, sizeof(why), "%s",
		         n_files == 1 ? "OpenSM is not running (fabric.pid_file names no process)"
		                      : "no configured SM is running (fabric.pid_file and "
		                        "fabric.standby_sms name no process)");
	} else if (primary && !primary_up) {
		snprintf(why, sizeof(why),
		         "the primary SM is not running (fabric.pid_file); %d standby SM%s run%s",
		         n_up, n_up == 1 ? "" : "s", n_up == 1 ? "s" : "");
	} else if (standby_down) {
		snprintf(why, sizeof(why), "%d standby SM%s of fabric.standby_sms not running",
		         standby_down, standby_down == 1 ? "" : "s");
	}
	pthread_mutex_lock(&d->mu);
	if (d->status.sm.since_ms && d->status.sm.state != st)
		iso_log(st == ISO_SM_STATE_UP ? ISO_LOG_INFO : ISO_LOG_WARN,
		        "fabric.opensm_sm_state", "state=%s reason=\"%s\"", iso_sm_state_name(st),
		        why);
	iso_sm_health_set(&d->status.sm, st, why, iso_now_ms());
	pthread_mutex_unlock(&d->mu);
}

/* The agent writer, under mu, on poll(): the SM host's agent's last word,
 * or its silence past 3 x ISO_SM_REPORT_S. O(1). */
static void sm_judge_reports(struct osm_driver *d)
{
	const uint64_t bound = ms_ns(3 * ISO_SM_REPORT_S * 1000);
	uint64_t now = iso_mono_ns(), last = d->report_ns ? d->report_ns : d->created_ns;
	enum iso_sm_state st;
	char why[ISO_SM_REASON_MAX] = "";

	if (d->report_ns && d->report_alive < 0) {
		/* an older agent says nothing, and reports only on a change */
		st = ISO_SM_STATE_UNKNOWN;
		snprintf(why, sizeof(why),
		         "the SM host's agent does not report whether OpenSM runs (an older "
		         "agent)");
	} else if (now - last >= bound) {
		st = ISO_SM_STATE_DOWN;
		snprintf(why, sizeof(why), "the SM host's agent has not reported for %d s",
		         3 * ISO_SM_REPORT_S);
	} else if (!d->report_ns) {
		st = ISO_SM_STATE_UNKNOWN;
		snprintf(why, sizeof(why), "no report from the SM host's agent yet");
	} else if (d->report_alive) {
		st = ISO_SM_STATE_UP;
	} else {
		st = ISO_SM_STATE_DOWN;
		snprintf(why, sizeof(why),
		         "OpenSM is not running on the SM host (the agent's --sm-pid-file names no "
		         "process)");
	}
	if (d->status.sm.since_ms && d->status.sm.state != st)
		iso_log(st == ISO_SM_STATE_UP ? ISO_LOG_INFO : ISO_LOG_WARN,
		        "fabric.opensm_sm_state", "state=%s reason=\"%s\"", iso_sm_state_name(st),
		        why);
	iso_sm_health_set(&d->status.sm, st, why, iso_now_ms());
}

/* Sleeps up to `ms`, waking early for stop or a newer intent. */
static void nap(struct osm_driver *d, int ms)
{
	struct timespec ts;

	sm_check(d);

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&d->mu);
	while (!d->stop && !d->has_pending)
		if (pthread_cond_timedwait(&d->cv, &d->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&d->mu);
}

/* ---- the SM's files ---- */

static int write_all_sms(struct osm_driver *d, const char *text, struct iso_error *err)
{
	for (int i = 0; i < d->n_sms; i++) {
		int r = iso_file_write_atomic(d->sms[i].files.partitions_file, text, strlen(text),
		                              0644, false, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Signals every SM that has a pid file. Only the primary being down holds
 * the intent back; a standby reads the same file when it takes over. */
static bool hup_all(struct osm_driver *d)
{
	for (int i = 0; i < d->n_sms; i++) {
		pid_t pid;

		if (!d->sms[i].files.pid_file[0])
			continue;
		pid = iso_sm_pid_alive(d->sms[i].files.pid_file);
		if (!pid || kill(pid, SIGHUP) < 0) {
			if (i == 0)
				return false;
			iso_log(ISO_LOG_WARN, "fabric.opensm_standby_down", "pid_file=%s",
			        d->sms[i].files.pid_file);
		}
	}
	return true;
}

/* ---- one intent, start to finish ---- */

enum { DONE, RETRY };

static void restore_good(struct osm_driver *d)
{
	struct iso_error e = {0};

	if (!d->good_text) {
		iso_log(ISO_LOG_ERR, "fabric.opensm_restore", "msg=\"no earlier good file\"");
		return;
	}
	if (write_all_sms(d, d->good_text, &e) < 0) {
		iso_log(ISO_LOG_ERR, "fabric.opensm_restore", "msg=\"%s\"", e.message);
		return;
	}
	hup_all(d);
}

static void describe_port(const struct iso_port_table *t, const uint16_t *keys, int n, char *buf,
                          size_t size)
{
	size_t off = (size_t)snprintf(buf, size, "port 0x%016" PRIx64 " ('%s') holds [", t->guid,
	                              t->node_desc);

	for (int i = 0; i < t->n_pkeys && off < size; i++)
		off +=
		    (size_t)snprintf(buf + off, size - off, "%s0x%04x", i ? " " : "", t->pkeys[i]);
	if (off < size)
		off += (size_t)snprintf(buf + off, size - off, "], expected [");
	for (int i = 0; i < n && off < size; i++)
		off += (size_t)snprintf(buf + off, size - off, "%s0x%04x", i ? " " : "", keys[i]);
	if (off < size)
		snprintf(buf + off, size - off, "] besides 0x7fff");
}

/* Waits until the SM host's agent reports `gen` (or a later one) written
 * and signalled; false when the driver stops or a newer intent comes. */
static bool agent_wrote(struct osm_driver *d, uint64_t gen)
{
	bool logged = false;

	for (;;) {
		uint64_t got;

		pthread_mutex_lock(&d->mu);
		got = d->agent_gen;
		pthread_mutex_unlock(&d->mu);
		if (got >= gen) {
			iso_log(ISO_LOG_INFO, "fabric.opensm_agent_applied", "generation=%" PRIu64,
			        gen);
			return true;
		}
		if (stop_or_newer(d))
			return false;
		if (!logged)
			iso_log(ISO_LOG_INFO, "fabric.opensm_agent_wait", "generation=%" PRIu64,
			        gen);
		logged = true;
		nap(d, POLL_MS);
	}
}

/* What the SM host's agent found in OpenSM's log after generation `gen`'s
 * file (it has put the previous file back already). */
static bool agent_incident(struct osm_driver *d, uint64_t gen, char *line, size_t size)
{
	bool hit;

	pthread_mutex_lock(&d->mu);
	hit = d->by_agent && d->agent_incident_gen == gen && d->agent_incident[0];
	if (hit)
		iso_strlcpy(line, d->agent_incident, size);
	pthread_mutex_unlock(&d->mu);
	return hit;
}

static int confirm(struct osm_driver *d, struct work *w)
{
	uint64_t deadline = iso_mono_ns() + ms_ns(d->confirm_timeout_ms);
	char why[200] = "no read yet", line[200];

	for (;;) {
		struct iso_fabric_snapshot snap = {0};
		struct iso_error e = {0};
		bool all = true;
		int found = 0, r_read;

		for (int i = 0; i < d->n_sms; i++) {
			if (iso_sm_log_scan(&d->sms[i].log, line, sizeof(line))) {
				set_incident(d, "generation %" PRIu64 ": OpenSM reports: %s",
				             w->in.generation, line);
				restore_good(d);
				return DONE;
			}
		}
		if (agent_incident(d, w->in.generation, line, sizeof(line))) {
			set_incident(d,
			             "generation %" PRIu64 ": OpenSM reports (SM host's agent): %s",
			             w->in.generation, line);
			return DONE;
		}
		pthread_mutex_lock(&d->snap_mu);
		r_read = iso_smp_read_guids(d->smp, d->dirty, d->n_dirty, &snap, &e);
		pthread_mutex_unlock(&d->snap_mu);
		if (r_read < 0) {
			all = false;
			iso_strlcpy(why, e.message, sizeof(why));
		} else {
			for (int i = 0; i < snap.n_ports && all; i++) {
				uint16_t keys[256];
				int n =
				    iso_fabric_expected_keys(&w->in, snap.ports[i].guid, keys, 256);

				found++;
				if (n > 256 || !iso_fabric_table_matches(&snap.ports[i], keys, n)) {
					all = false;
					describe_port(&snap.ports[i], keys, n, why, sizeof(why));
				}
			}
			if (all && found < d->n_dirty) {
				all = false;
				snprintf(why, sizeof(why),
				         "%d of %d changed ports not found on the fabric",
				         d->n_dirty - found, d->n_dirty);
			}
		}
		iso_fabric_snapshot_clear(&snap);
		/* OpenSM logs a refused file before it programs the tables: a
		 * flattened table read above has its log line by now. */
		for (int i = 0; all && i < d->n_sms; i++) {
			if (iso_sm_log_scan(&d->sms[i].log, line, sizeof(line))) {
				set_incident(d, "generation %" PRIu64 ": OpenSM reports: %s",
				             w->in.generation, line);
				restore_good(d);
				return DONE;
			}
		}
		if (all && agent_incident(d, w->in.generation, line, sizeof(line))) {
			set_incident(d,
			             "generation %" PRIu64 ": OpenSM reports (SM host's agent): %s",
			             w->in.generation, line);
			return DONE;
		}
		if (all) {
			pthread_mutex_lock(&d->mu);
			d->status.confirmed = w->in.generation;
			d->status.incident = false;
			d->status.incident_msg[0] = '\0';
			pthread_mutex_unlock(&d->mu);
			free(d->good_text);
			d->good_text = ISO_TAKE(w->text);
			d->n_dirty = 0;
			iso_log(ISO_LOG_INFO, "fabric.opensm_confirmed",
			        "generation=%" PRIu64 " ports=%d", w->in.generation, found);
			return DONE;
		}
		if (stop_or_newer(d))
			return DONE; /* superseded: the newer intent is confirmed instead */
		if (iso_mono_ns() >= deadline) {
			set_incident(d, "generation %" PRIu64 " not confirmed after %d ms: %s",
			             w->in.generation, d->confirm_timeout_ms, why);
			return DONE;
		}
		nap(d, POLL_MS);
	}
}

static int process(struct osm_driver *d, struct work *w)
{
	struct iso_error e = {0};

	if (mark_dirty(d, d->have_last ? &d->last : NULL, &w->in) < 0) {
		set_incident(d, "out of memory");
		return DONE;
	}
	if (d->by_agent) {
		/* apply() published it; the SM host's agent writes and signals */
		if (!agent_wrote(d, w->in.generation))
			return DONE; /* stopping, or superseded by a newer intent */
	} else {
		if (write_all_sms(d, w->text, &e) < 0) {
			iso_log(ISO_LOG_WARN, "fabric.opensm_write", "msg=\"%s\"", e.message);
			return RETRY;
		}
		for (int i = 0; i < d->n_sms; i++)
			iso_sm_log_mark(&d->sms[i].log);
		if (!hup_all(d)) {
			iso_log(ISO_LOG_WARN, "fabric.opensm_down",
			        "pid_file=%s generation=%" PRIu64, d->sms[0].files.pid_file,
			        w->in.generation);
			return RETRY;
		}
		iso_log(ISO_LOG_INFO, "fabric.opensm_written",
		        "generation=%" PRIu64 " sms=%d changed_ports=%d", w->in.generation,
		        d->n_sms, d->n_dirty);
	}
	iso_fabric_intent_clear(&d->last);
	if (iso_fabric_intent_copy(&w->in, &d->last) < 0) {
		d->have_last = false;
		set_incident(d, "out of memory");
		return DONE;
	}
	d->have_last = true;
	pthread_mutex_lock(&d->mu);
	d->status.applied = w->in.generation;
	pthread_mutex_unlock(&d->mu);
	return confirm(d, w);
}

static void *worker(void *arg)
{
	struct osm_driver *d = arg;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		struct work w;

		while (!d->stop && !(d->has_pending && iso_mono_ns() >= d->ready_ns)) {
			/* the pending intent's time, or the next look at the SMs */
			uint64_t until = d->by_agent ? 0 : d->sm_next_ns;

			if (d->has_pending && (!until || d->ready_ns < until))
				until = d->ready_ns;
			if (until) {
				struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u),
				                      .tv_nsec = (long)(until % 1000000000u)};
				pthread_cond_timedwait(&d->cv, &d->mu, &ts);
			} else {
				pthread_cond_wait(&d->cv, &d->mu);
			}
			if (!d->by_agent && iso_mono_ns() >= d->sm_next_ns) {
				pthread_mutex_unlock(&d->mu);
				sm_check(d);
				pthread_mutex_lock(&d->mu);
			}
		}
		if (d->stop)
			break;
		w = d->pending;
		memset(&d->pending, 0, sizeof(d->pending));
		d->has_pending = false;
		pthread_mutex_unlock(&d->mu);

		int r = process(d, &w);

		pthread_mutex_lock(&d->mu);
		if (r == RETRY && !d->has_pending) {
			/* the SM is down: the same intent again in a second */
			d->pending = w;
			d->has_pending = true;
			d->ready_ns = iso_mono_ns() + ms_ns(SM_DOWN_RETRY_MS);
		} else {
			work_clear(&w);
		}
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* ---- ops ---- */

static int osm_apply(struct iso_fabric_driver *base, const struct iso_fabric_intent *in,
                     struct iso_error *err)
{
	struct osm_driver *d = (struct osm_driver *)base;
	struct iso_partitions_file check;
	struct work w = {0};
	int r;

	/* Validated here, so that a broken intent is the caller's error now,
	 * and a file OpenSM would refuse is never written. */
	r = iso_partitions_render(in, &w.text, err);
	if (r < 0)
		return r;
	r = iso_partitions_parse("partitions.conf (rendered)", w.text, strlen(w.text), &check, err);
	if (r < 0) {
		free(w.text);
		return r;
	}
	iso_partitions_file_clear(&check);
	if (iso_fabric_intent_copy(in, &w.in) < 0) {
		free(w.text);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	char *pub = d->by_agent ? strdup(w.text) : NULL;
	if (d->by_agent && !pub) {
		work_clear(&w);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	pthread_mutex_lock(&d->mu);
	if (d->by_agent) {
		/* the agent's long poll sees it at the controller's next tick */
		free(d->pub_text);
		d->pub_text = pub;
		d->pub_gen = in->generation;
	}
	if (d->has_pending) {
		work_clear(&d->pending); /* a burst: the newest intent wins, the window stays */
	} else {
		d->ready_ns = iso_mono_ns() + ms_ns(d->coalesce_ms);
	}
	d->pending = w;
	d->has_pending = true;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

static int osm_poll(struct iso_fabric_driver *base, struct iso_fabric_status *st)
{
	struct osm_driver *d = (struct osm_driver *)base;

	pthread_mutex_lock(&d->mu);
	if (d->by_agent)
		sm_judge_reports(d);
	*st = d->status;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

static int osm_snapshot(struct iso_fabric_driver *base, struct iso_fabric_snapshot *out,
                        struct iso_error *err)
{
	struct osm_driver *d = (struct osm_driver *)base;
	int r;

	/* One reader, one MAD port, one thread at a time: umad2sim crashes when
	 * two threads hold ports, and real HCAs need no more. */
	pthread_mutex_lock(&d->snap_mu);
	r = iso_smp_discover(d->smp, out, NULL, err);
	pthread_mutex_unlock(&d->snap_mu);
	return r;
}

static int osm_sm_document(struct iso_fabric_driver *base, uint64_t *generation, char **text)
{
	struct osm_driver *d = (struct osm_driver *)base;
	int r = -ENOENT;

	*text = NULL;
	pthread_mutex_lock(&d->mu);
	if (d->pub_text) {
		*text = strdup(d->pub_text);
		*generation = d->pub_gen;
		r = *text ? 0 : -ENOMEM;
	}
	pthread_mutex_unlock(&d->mu);
	return r;
}

static void osm_sm_applied(struct iso_fabric_driver *base, uint64_t generation,
                           const char *incident, uint64_t incident_generation)
{
	struct osm_driver *d = (struct osm_driver *)base;

	pthread_mutex_lock(&d->mu);
	if (generation > d->agent_gen)
		d->agent_gen = generation;
	if (incident && incident_generation >= d->agent_incident_gen) {
		d->agent_incident_gen = incident_generation;
		iso_strlcpy(d->agent_incident, incident, sizeof(d->agent_incident));
	}
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static void osm_sm_reported(struct iso_fabric_driver *base, int alive)
{
	struct osm_driver *d = (struct osm_driver *)base;

	pthread_mutex_lock(&d->mu);
	d->report_ns = iso_mono_ns();
	d->report_alive = alive < 0 ? -1 : alive > 0;
	pthread_mutex_unlock(&d->mu);
}

static void osm_free(struct iso_fabric_driver *base)
{
	struct osm_driver *d = (struct osm_driver *)base;

	if (d->started) {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thread, NULL);
	}
	work_clear(&d->pending);
	iso_fabric_intent_clear(&d->last);
	free(d->good_text);
	free(d->pub_text);
	free(d->dirty);
	if (d->smp)
		iso_smp_free(d->smp);
	pthread_mutex_destroy(&d->mu);
	pthread_mutex_destroy(&d->snap_mu);
	pthread_cond_destroy(&d->cv);
	free(d);
}

static const struct iso_fabric_driver_ops osm_ops = {
    .name = "opensm",
    .apply = osm_apply,
    .poll = osm_poll,
    .snapshot = osm_snapshot,
    .free = osm_free,
};

/* fabric.partitions_writer agent: the same driver, the files on the SM host */
static const struct iso_fabric_driver_ops osm_agent_ops = {
    .name = "opensm",
    .apply = osm_apply,
    .poll = osm_poll,
    .snapshot = osm_snapshot,
    .free = osm_free,
    .sm_document = osm_sm_document,
    .sm_applied = osm_sm_applied,
    .sm_reported = osm_sm_reported,
};

/* The file already in place, if it is one we would write: what to restore
 * when OpenSM refuses our first file. */
static char *read_good_file(const char *path)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	_cleanup_free_ char *buf = NULL;
	struct iso_partitions_file pf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(1 << 20);
	if (!buf)
		return NULL;
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	if (iso_partitions_parse(path, buf, n, &pf, NULL) < 0)
		return NULL;
	iso_partitions_file_clear(&pf);
	return ISO_TAKE(buf);
}

int iso_fabric_opensm_driver_new(const struct iso_inventory *inv, struct iso_fabric_driver **out,
                                 struct iso_error *err)
{
	const struct iso_fabric_config *fc = &inv->fabric;
	struct osm_driver *d;
	pthread_condattr_t ca;
	int r;

	if (fc->type != ISO_FABRIC_INFINIBAND)
		return iso_error_set(err, ISO_E_INVALID, "fabric.driver",
		                     "the opensm driver needs fabric.type infiniband, not %s",
		                     iso_fabric_type_name(fc->type));
	if (!fc->partitions_by_agent && !fc->sm.partitions_file[0])
		return iso_error_set(err, ISO_E_INVALID, "fabric.partitions_file",
		                     "the opensm driver needs fabric.partitions_file");
	if (fc->n_standby + 1 > MAX_SMS)
		return iso_error_set(err, ISO_E_INVALID, "fabric.standby_sms",
		                     "at most %d standby SMs", MAX_SMS - 1);
	d = calloc(1, sizeof(*d));
	if (!d)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	d->base.ops = fc->partitions_by_agent ? &osm_agent_ops : &osm_ops;
	d->by_agent = fc->partitions_by_agent;
	d->sms[0].files = fc->sm;
	for (int i = 0; i < fc->n_standby; i++)
		d->sms[i + 1].files = fc->standby[i];
	/* with the agent writing, isostackd touches no SM file at all */
	d->n_sms = d->by_agent ? 0 : fc->n_standby + 1;
	for (int i = 0; i < d->n_sms; i++)
		iso_strlcpy(d->sms[i].log.path, d->sms[i].files.log_file,
		            sizeof(d->sms[i].log.path));
	d->coalesce_ms = fc->coalesce_ms;
	d->confirm_timeout_ms = fc->confirm_timeout_ms > 0 ? fc->confirm_timeout_ms : 10000;
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->snap_mu, NULL);
	/* ready_ns is monotonic: the worker's timed waits must be too. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cv, &ca);
	pthread_condattr_destroy(&ca);
	d->good_text = d->by_agent ? NULL : read_good_file(fc->sm.partitions_file);
	d->created_ns = iso_mono_ns();
	if (d->by_agent)
		sm_judge_reports(d); /* no thread yet: mu is not needed */
	else
		sm_check(d); /* the first look now, so poll() has an answer at once */

	r = iso_smp_open(NULL, &d->smp, err);
	if (r == 0 && pthread_create(&d->thread, NULL, worker, d) != 0)
		r = iso_error_set(err, ISO_E_INTERNAL, "", "cannot start the opensm worker");
	if (r < 0) {
		osm_free(&d->base);
		return r;
	}
	d->started = true;
	*out = &d->base;
	return 0;
}

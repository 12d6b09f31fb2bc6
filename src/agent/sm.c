/* sm.c: the agent of the SM host (docs/agent.md "The SM host", docs/fabric.md
 * "partitions.conf through the SM host's agent"). With
 * fabric.partitions_writer agent isostackd writes no partitions.conf: this
 * loop long-polls the document the leader publishes and writes it here, with
 * a header naming the document's term and generation. The fence is here: a
 * document whose term is below the highest this agent ever wrote (a stale
 * leader's, one that was paused past its lease), or of that term and a lower
 * generation, is refused and the file is not touched. The highest mark is
 * kept in the state dir and also read back from the file's own header, so a
 * restart, or a lost state dir, cannot be made to go back. Then OpenSM gets
 * SIGHUP, its log is scanned for the lines that say it refused or degraded
 * the file (the previous file is put back and signalled, as the controller's
 * driver does with a local SM), and what happened is reported with PUT
 * /v1/fabric/sm/status: the controller's driver then reads the fabric back
 * to confirm, as before. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "isostack/agent.h"
#include "isostack/client.h"
#include "isostack/smfile.h"

#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 10000
#define SCAN_MS        30000 /* how long after a SIGHUP the log is watched */

struct sm_loop {
	const struct iso_agent_config *cfg;
	struct iso_client *client;
	char mark_path[4096];
	struct iso_sm_mark high; /* the highest written: refused below */
	char *good; /* the file before the last one written (restored on an incident) */
	struct iso_sm_log log;
	struct iso_sm_report rep;
	bool hup_due;
	struct iso_sm_mark want; /* the mark whose file waits for its SIGHUP */
	bool scanning;
	int64_t scan_until_ms;
	uint64_t scan_gen;
	int64_t sent_ms; /* when the last report went (wall clock) */
};

static void nap_ms(const struct iso_agent_config *cfg, long ms)
{
	while (ms > 0 && !atomic_load(cfg->stop)) {
		long step = ms < 100 ? ms : 100;
		struct timespec ts = {0, step * 1000000L};

		nanosleep(&ts, NULL);
		ms -= step;
	}
}

/* The whole file at `path` (NUL-terminated) or NULL when it does not exist;
 * -errno otherwise. */
static int slurp(const char *path, char **out, size_t *len, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	_cleanup_free_ char *buf = NULL;
	size_t n;

	*out = NULL;
	*len = 0;
	if (!f)
		return errno == ENOENT ? 0
		                       : iso_error_set(err, ISO_E_INVALID, "--sm-partitions",
		                                       "%s: %s", path, strerror(errno));
	if (!(buf = malloc(ISO_SM_TEXT_MAX + 4096 + 1)))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	n = fread(buf, 1, ISO_SM_TEXT_MAX + 4096, f);
	buf[n] = '\0';
	*len = n;
	*out = ISO_TAKE(buf);
	return 0;
}

/* STATE_DIR/sm-mark: "term T generation G\n"; absent is {0, 0}. */
static int mark_load(const char *path, struct iso_sm_mark *m, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	unsigned long long t, g;
	char tail;

	*m = (struct iso_sm_mark){0};
	if (!f)
		return errno == ENOENT ? 0
		                       : iso_error_set(err, ISO_E_INVALID, "--state-dir", "%s: %s",
		                                       path, strerror(errno));
	if (fscanf(f, "term %llu generation %llu%c", &t, &g, &tail) != 3 || tail != '\n' ||
	    t > ISO_SM_TERM_MAX || g > ISO_SM_GEN_MAX)
		return iso_error_set(err, ISO_E_INVALID, "--state-dir",
		                     "%s:1: expected \"term T generation G\"", path);
	*m = (struct iso_sm_mark){t, g};
	return 0;
}

static int mark_store(const char *path, const struct iso_sm_mark *m, struct iso_error *err)
{
	char buf[96];
	int n = snprintf(buf, sizeof(buf), "term %" PRIu64 " generation %" PRIu64 "\n", m->term,
	                 m->generation);

	return iso_file_write_atomic(path, buf, (size_t)n, 0600, false, err);
}

static bool hup(const struct iso_agent_config *cfg)
{
	pid_t pid = iso_sm_pid_alive(cfg->sm.pid_file);

	return pid && kill(pid, SIGHUP) == 0;
}

static int write_all(const struct iso_agent_config *cfg, const char *text, size_t len,
                     struct iso_error *err)
{
	int r = iso_file_write_atomic(cfg->sm.partitions, text, len, 0644, false, err);

	for (size_t i = 0; r == 0 && i < cfg->sm.n_standby; i++)
		r = iso_file_write_atomic(cfg->sm.standby[i], text, len, 0644, false, err);
	return r;
}

/* Writes the document: header + text, into every file. */
static int write_doc(struct sm_loop *s, const struct iso_sm_document *d, struct iso_error *err)
{
	struct iso_sm_mark m = {d->term, d->generation};
	size_t len = strlen(d->text);
	_cleanup_free_ char *file = malloc(len + 160);
	_cleanup_free_ char *old = NULL;
	size_t old_len;
	int n, r;

	if (!file)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	n = iso_sm_header_format(file, 160, &m);
	if (n < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "header too long");
	memcpy(file + n, d->text, len + 1);
	/* the file being replaced is what goes back if OpenSM refuses this one */
	if ((r = slurp(s->cfg->sm.partitions, &old, &old_len, err)) < 0)
		return r;
	if ((r = write_all(s->cfg, file, (size_t)n + len, err)) < 0)
		return r;
	/* the header is in the file; the state file keeps it if the file goes */
	if ((r = mark_store(s->mark_path, &m, err)) < 0)
		return r;
	s->high = m;
	if (old) {
		free(s->good);
		s->good = ISO_TAKE(old);
	}
	return 0;
}

/* The report, when it changed or ISO_SM_REPORT_S after the last one: the
 * controller counts the SM down when it hears nothing for 3 x that. Whether
 * OpenSM runs is looked at here, each turn (its pid file and kill 0). */
static void put_status(struct sm_loop *s, json_t **sent)
{
	_cleanup_response_ struct iso_response resp = {0};
	struct iso_error e = {0};
	json_t *body;
	int64_t now = iso_now_ms();
	bool alive = iso_sm_pid_alive(s->cfg->sm.pid_file) != 0;

	if (alive != s->rep.sm_alive || !s->rep.has_sm_alive)
		iso_log(alive ? ISO_LOG_INFO : ISO_LOG_WARN, "agent.sm_process",
		        "pid_file=%s alive=%s", s->cfg->sm.pid_file ? s->cfg->sm.pid_file : "",
		        alive ? "true" : "false");
	s->rep.has_sm_alive = true;
	s->rep.sm_alive = alive;
	if (!(body = iso_codec_sm_report_encode(&s->rep)))
		return;
	if (*sent && json_equal(*sent, body) && now - s->sent_ms < ISO_SM_REPORT_S * 1000LL &&
	    now >= s->sent_ms) {
		json_decref(body);
		return;
	}
	if (iso_client_request(s->client, "PUT", "/v1/fabric/sm/status", body, &resp, &e) < 0 ||
	    iso_response_error(&resp, &e) < 0) {
		iso_log(ISO_LOG_WARN, "agent.sm_status_failed", "status=%ld field=%s msg=\"%s\"",
		        resp.status, e.field, e.message);
		json_decref(body);
		json_decref(*sent);
		*sent = NULL;
		return;
	}
	json_decref(*sent);
	*sent = body;
	s->sent_ms = now;
}

static void refuse(struct sm_loop *s, uint64_t term, uint64_t gen, const char *why)
{
	iso_log(ISO_LOG_WARN, "agent.sm_refused",
	        "term=%" PRIu64 " generation=%" PRIu64 " written_term=%" PRIu64
	        " written_generation=%" PRIu64 " msg=\"%s\"",
	        term, gen, s->high.term, s->high.generation, why);
	s->rep.refused = true;
	s->rep.refused_term = term;
	s->rep.refused_generation = gen;
	iso_strlcpy(s->rep.refused_reason, why, sizeof(s->rep.refused_reason));
}

/* One document: refused, or written (unless already) and due a SIGHUP. */
static void take(struct sm_loop *s, const struct iso_sm_document *d)
{
	struct iso_sm_mark m = {d->term, d->generation};
	struct iso_error e = {0};
	int r = iso_sm_accept(&s->high, &m, &e);

	if (r < 0) {
		refuse(s, d->term, d->generation, e.message);
		return;
	}
	s->rep.refused = false;
	if (r == 0) {
		if (write_doc(s, d, &e) < 0) {
			iso_log(ISO_LOG_ERR, "agent.sm_write_failed",
			        "generation=%" PRIu64 " msg=\"%s\"", d->generation, e.message);
			return;
		}
		iso_log(ISO_LOG_INFO, "agent.sm_written",
		        "term=%" PRIu64 " generation=%" PRIu64 " file=%s", d->term, d->generation,
		        s->cfg->sm.partitions);
	}
	/* written now, or by an earlier run: signalled once in this run */
	if (r == 0 || s->rep.term != m.term || s->rep.generation != m.generation) {
		s->hup_due = true;
		s->want = m;
	}
}

static void signal_and_scan(struct sm_loop *s)
{
	char line[200];

	if (s->hup_due) {
		iso_sm_log_mark(&s->log);
		if (!hup(s->cfg)) {
			iso_log(ISO_LOG_WARN, "agent.sm_down", "pid_file=%s generation=%" PRIu64,
			        s->cfg->sm.pid_file, s->want.generation);
			return; /* again at the next turn */
		}
		s->hup_due = false;
		s->rep.term = s->want.term;
		s->rep.generation = s->want.generation;
		s->scanning = s->log.path[0] != '\0';
		s->scan_until_ms = iso_now_ms() + SCAN_MS;
		s->scan_gen = s->want.generation;
		iso_log(ISO_LOG_INFO, "agent.sm_signalled", "term=%" PRIu64 " generation=%" PRIu64,
		        s->want.term, s->want.generation);
	}
	if (!s->scanning)
		return;
	if (iso_sm_log_scan(&s->log, line, sizeof(line))) {
		struct iso_error e = {0};

		for (char *p = line; *p; p++)
			if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
				*p = ' ';
		iso_log(ISO_LOG_ERR, "agent.sm_incident", "generation=%" PRIu64 " line=\"%s\"",
		        s->scan_gen, line);
		s->rep.incident = true;
		s->rep.incident_generation = s->scan_gen;
		iso_strlcpy(s->rep.incident_line, line, sizeof(s->rep.incident_line));
		s->scanning = false;
		/* the file before it goes back, as the driver does with a local SM */
		if (s->good && write_all(s->cfg, s->good, strlen(s->good), &e) == 0 && hup(s->cfg))
			iso_log(ISO_LOG_INFO, "agent.sm_restored", "generation=%" PRIu64,
			        s->scan_gen);
		else
			iso_log(ISO_LOG_ERR, "agent.sm_restore_failed", "msg=\"%s\"",
			        s->good ? e.message : "no earlier file");
		return;
	}
	if (iso_now_ms() >= s->scan_until_ms)
		s->scanning = false;
}

/* The highest mark: the state file's and the partitions file's header. A
 * header that is not one (a first line "# isostack term" that does not
 * parse) stops the start: the agent cannot tell what it would overwrite. */
static int sm_open(struct sm_loop *s, struct iso_error *err)
{
	const struct iso_agent_config *cfg = s->cfg;
	struct iso_client_options co = {.url = cfg->controller,
	                                .token = cfg->token,
	                                .timeout_ms = (cfg->heartbeat_s + 10) * 1000L,
	                                .user_agent = "isostack-agent/" ISO_VERSION};
	struct iso_sm_mark state, file;
	_cleanup_free_ char *text = NULL;
	size_t len, off;
	bool has;
	int r;

	if (mkdir(cfg->state_dir, 0700) < 0 && errno != EEXIST)
		return iso_error_set(err, ISO_E_INVALID, "--state-dir", "--state-dir %s: %s",
		                     cfg->state_dir, strerror(errno));
	if (snprintf(s->mark_path, sizeof(s->mark_path), "%s/" ISO_AGENT_SM_MARK_FILE,
	             cfg->state_dir) >= (int)sizeof(s->mark_path))
		return iso_error_set(err, ISO_E_INVALID, "--state-dir",
		                     "--state-dir: path too long");
	if ((r = mark_load(s->mark_path, &state, err)) < 0)
		return r;
	if ((r = slurp(cfg->sm.partitions, &text, &len, err)) < 0)
		return r;
	if (text &&
	    (r = iso_sm_header_parse(cfg->sm.partitions, text, len, &file, &has, &off, err)) < 0)
		return r;
	if (!text)
		file = (struct iso_sm_mark){0};
	s->high = iso_sm_mark_max(state, file);
	s->good = ISO_TAKE(text);
	if (cfg->sm.log_file)
		iso_strlcpy(s->log.path, cfg->sm.log_file, sizeof(s->log.path));
	iso_strlcpy(s->rep.version, ISO_VERSION, sizeof(s->rep.version));
	iso_log(ISO_LOG_INFO, "agent.sm_start",
	        "file=%s term=%" PRIu64 " generation=%" PRIu64 " state_term=%" PRIu64
	        " file_term=%" PRIu64,
	        cfg->sm.partitions, s->high.term, s->high.generation, state.term, file.term);
	return iso_client_new(&co, &s->client, err);
}

int iso_agent_sm_run(const struct iso_agent_config *cfg, struct iso_error *err)
{
	struct sm_loop s = {.cfg = cfg};
	json_t *sent = NULL;
	uint64_t held = 0;
	long backoff = BACKOFF_MIN_MS;
	int r = sm_open(&s, err);

	while (r == 0 && !atomic_load(cfg->stop)) {
		_cleanup_response_ struct iso_response resp = {0};
		struct iso_sm_document d;
		struct iso_error e = {0};
		char path[128];
		bool busy = s.hup_due || s.scanning;

		/* the long poll ends in time for the next report to go */
		int wait_s = busy ? 1 : cfg->heartbeat_s;

		if (wait_s > ISO_SM_REPORT_S)
			wait_s = ISO_SM_REPORT_S;
		snprintf(path, sizeof(path), "/v1/fabric/sm/partitions?after=%" PRIu64 "&wait_s=%d",
		         held, wait_s);
		if (iso_client_request(s.client, "GET", path, NULL, &resp, &e) < 0 ||
		    iso_response_error(&resp, &e) < 0) {
			if (atomic_load(cfg->stop))
				break;
			iso_log(ISO_LOG_WARN, "agent.sm_poll_failed",
			        "status=%ld field=%s msg=\"%s\"", resp.status, e.field, e.message);
			json_decref(sent); /* the report goes again once it is back */
			sent = NULL;
			signal_and_scan(&s); /* the SM still gets what was written */
			/* no document (503 before the first) is no reason to be silent:
			 * whether OpenSM runs still goes (fails as well when the
			 * controller is away) */
			if (resp.status > 0)
				put_status(&s, &sent);
			nap_ms(cfg, backoff);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		backoff = BACKOFF_MIN_MS;
		if (iso_codec_sm_document_decode(resp.body, &d, &e) < 0) {
			int64_t t = json_integer_value(json_object_get(resp.body, "term"));
			int64_t g = json_integer_value(json_object_get(resp.body, "generation"));
			char why[300];

			snprintf(why, sizeof(why), "bad document: %s: %s", e.field, e.message);
			refuse(&s, t > 0 ? (uint64_t)t : 0, g > 0 ? (uint64_t)g : 0, why);
			held = g > 0 ? (uint64_t)g : held;
			put_status(&s, &sent);
			nap_ms(cfg, (long)cfg->heartbeat_s * 1000);
			continue;
		} else {
			held = d.generation;
			take(&s, &d);
			iso_codec_sm_document_clear(&d);
		}
		signal_and_scan(&s);
		put_status(&s, &sent);
	}
	json_decref(sent);
	free(s.good);
	iso_client_free(s.client);
	return r;
}

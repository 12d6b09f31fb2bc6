/* faults.c: the node agent's GPU faults. An XID is read from the GPU driver
 * once (the event is consumed), so it is written to an outbox file in the
 * node's state dir before anything else is done with it, and stays there
 * until the controller has answered the report: a controller that is down
 * or unreachable, or an agent killed between the read and the report, loses
 * nothing. Each fault gets a number (seq) that only grows per node; the
 * controller applies a seq at most once (src/controller/faults.c), so a
 * report whose answer was lost is simply sent again. The outbox also keeps
 * the highest seq handed out, and a new seq is never below the wall clock in
 * milliseconds, so even an agent whose state dir was wiped keeps numbering
 * above what the controller has seen. docs/agent.md, "Faults". */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/agent.h"
#include "isostack/client.h"
#include "isostack/codec.h"

static int outbox_path(const char *dir, char *buf, size_t size, struct iso_error *err)
{
	if (snprintf(buf, size, "%s/%s", dir, ISO_AGENT_FAULTS_FILE) >= (int)size)
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	return 0;
}

void iso_agent_outbox_clear(struct iso_agent_outbox *o)
{
	free(o->faults);
	memset(o, 0, sizeof(*o));
}

static int get_int(const json_t *o, const char *key, json_int_t min, json_int_t max,
                   json_int_t *out)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return -EINVAL;
	*out = json_integer_value(v);
	return 0;
}

static int parse_fault(const json_t *o, struct iso_agent_fault *f)
{
	json_int_t seq, gpu, xid, gi, ci, member;
	const json_t *alloc = json_object_get(o, "allocation");

	if (!json_is_object(o) || json_object_size(o) != 7 ||
	    get_int(o, "seq", 1, INT64_MAX, &seq) < 0 ||
	    get_int(o, "gpu", 0, ISO_GPU_MAX - 1, &gpu) < 0 ||
	    get_int(o, "xid", 0, INT64_MAX, &xid) < 0 || get_int(o, "gi", -1, 65535, &gi) < 0 ||
	    get_int(o, "ci", -1, 65535, &ci) < 0 || get_int(o, "member", -1, 1023, &member) < 0 ||
	    !json_is_string(alloc) || json_string_length(alloc) >= sizeof(f->allocation))
		return -EINVAL;
	f->seq = (uint64_t)seq;
	f->gpu = (unsigned)gpu;
	f->xid = (unsigned long long)xid;
	f->gi = (int)gi;
	f->ci = (int)ci;
	f->member = (int)member;
	iso_strlcpy(f->allocation, json_string_value(alloc), sizeof(f->allocation));
	return 0;
}

int iso_agent_outbox_load(const char *dir, struct iso_agent_outbox *out, struct iso_error *err)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *root, *faults, *v;
	json_int_t last = 0;
	size_t i;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = outbox_path(dir, path, sizeof(path), err)) < 0)
		return r;
	if (!(root = json_load_file(path, JSON_REJECT_DUPLICATES, &je))) {
		FILE *f = fopen(path, "r");
		if (!f && errno == ENOENT)
			return 0;
		if (f)
			fclose(f);
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "%s: line %d: %s", path,
		                     je.line, je.text);
	}
	faults = json_object_get(root, "faults");
	if (!json_is_object(root) || json_object_size(root) != 2 ||
	    get_int(root, "last_seq", 0, INT64_MAX, &last) < 0 || !json_is_array(faults) ||
	    json_array_size(faults) > ISO_AGENT_FAULTS_MAX) {
		json_decref(root);
		return iso_error_set(err, ISO_E_INVALID, "state_dir",
		                     "%s: expected {\"last_seq\": N, \"faults\": [at most %d]}",
		                     path, ISO_AGENT_FAULTS_MAX);
	}
	out->last_seq = (uint64_t)last;
	out->faults = calloc(json_array_size(faults) + 1, sizeof(*out->faults));
	if (!out->faults) {
		json_decref(root);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	json_array_foreach (faults, i, v) {
		if (parse_fault(v, &out->faults[i]) < 0 || out->faults[i].seq > out->last_seq ||
		    (i > 0 && out->faults[i].seq <= out->faults[i - 1].seq)) {
			json_decref(root);
			iso_agent_outbox_clear(out);
			return iso_error_set(err, ISO_E_INVALID, "state_dir",
			                     "%s: faults[%zu] is not a fault in seq order", path,
			                     i);
		}
		out->n++;
	}
	json_decref(root);
	return 0;
}

json_t *iso_agent_fault_json(const struct iso_agent_fault *f)
{
	/* The body's shape is the codec's; an XID beyond int, which no GPU
	 * reports, is sent as INT_MAX, still above ISO_XID_MAX, so the
	 * controller refuses it as before. */
	struct iso_fault_report r = {
	    .gpu = (int)f->gpu,
	    .xid = f->xid > INT_MAX ? INT_MAX : (int)f->xid,
	    .gi = f->gi,
	    .ci = f->ci,
	    .member = f->member,
	    .seq = f->seq,
	};

	iso_strlcpy(r.allocation, f->allocation, sizeof(r.allocation));
	return iso_codec_fault_encode(&r);
}

static int outbox_store(const char *dir, const struct iso_agent_outbox *o, struct iso_error *err)
{
	char path[PATH_MAX];
	json_t *faults = json_array(), *root;
	char *text;
	int r;

	if ((r = outbox_path(dir, path, sizeof(path), err)) < 0) {
		json_decref(faults);
		return r;
	}
	for (size_t i = 0; i < o->n; i++) {
		const struct iso_agent_fault *f = &o->faults[i];
		json_array_append_new(faults,
		                      json_pack("{s:I, s:i, s:I, s:i, s:i, s:s, s:i}", "seq",
		                                (json_int_t)f->seq, "gpu", (int)f->gpu, "xid",
		                                (json_int_t)f->xid, "gi", f->gi, "ci", f->ci,
		                                "allocation", f->allocation, "member", f->member));
	}
	root = json_pack("{s:I, s:o}", "last_seq", (json_int_t)o->last_seq, "faults", faults);
	text = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	if (!text)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	r = iso_file_write_atomic(path, text, strlen(text), 0600, false, err);
	free(text);
	return r;
}

int iso_agent_fault_record(const char *dir, struct iso_agent_fault *f, struct iso_error *err)
{
	struct iso_agent_outbox o;
	struct iso_agent_fault *v;
	uint64_t now = (uint64_t)iso_now_ms();
	int r;

	if ((r = iso_agent_outbox_load(dir, &o, err)) < 0)
		return r;
	if (o.n >= ISO_AGENT_FAULTS_MAX) {
		iso_agent_outbox_clear(&o);
		return iso_error_set(err, ISO_E_LIMIT, "state_dir",
		                     "%d faults already wait for the controller",
		                     ISO_AGENT_FAULTS_MAX);
	}
	if (o.last_seq >= INT64_MAX) {
		/* A seq above it would be written as a negative number, which
		 * the loader refuses: every later fault would be lost. */
		iso_agent_outbox_clear(&o);
		return iso_error_set(err, ISO_E_LIMIT, "state_dir",
		                     "%s: last_seq is %" PRId64 ", no seq is left above it",
		                     ISO_AGENT_FAULTS_FILE, INT64_MAX);
	}
	if (!(v = realloc(o.faults, (o.n + 1) * sizeof(*v)))) {
		iso_agent_outbox_clear(&o);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	o.faults = v;
	f->seq = o.last_seq + 1 > now ? o.last_seq + 1 : now;
	o.last_seq = f->seq;
	o.faults[o.n++] = *f;
	r = outbox_store(dir, &o, err);
	iso_agent_outbox_clear(&o);
	return r;
}

int iso_agent_fault_ack(const char *dir, uint64_t seq, struct iso_error *err)
{
	struct iso_agent_outbox o;
	size_t k = 0;
	int r;

	if ((r = iso_agent_outbox_load(dir, &o, err)) < 0)
		return r;
	for (size_t i = 0; i < o.n; i++)
		if (o.faults[i].seq != seq)
			o.faults[k++] = o.faults[i];
	if (k != o.n) {
		o.n = k;
		r = outbox_store(dir, &o, err);
	}
	iso_agent_outbox_clear(&o);
	return r;
}

/* The owner of what the XID names: the instance whose GPU instance id it
 * carries, or for an XID of no instance a GPU held whole; the desired
 * document says which allocation and member hold it. */
static void attribute(struct iso_gpu *g, const struct iso_agent_desired *d,
                      struct iso_agent_fault *f)
{
	_cleanup_free_ struct iso_gpu_instance *v = NULL;
	const struct iso_gpu_instance *in = NULL;
	struct iso_error e = {0};
	size_t n = 0;

	f->allocation[0] = '\0';
	f->member = -1;
	if (!d)
		return;
	if (f->gi >= 0 && g->ops->list_instances(g, f->gpu, &v, &n, &e) == 0)
		for (size_t i = 0; i < n && !in; i++)
			if (v[i].gi_id == f->gi)
				in = &v[i];
	for (size_t w = 0; w < d->n_wants; w++) {
		const struct iso_agent_want *want = &d->wants[w];
		bool whole = strcmp(want->profile, "whole") == 0;

		if (want->gpu != f->gpu)
			continue;
		/* A GPU held whole in MIG mode is the one instance at 0. */
		if ((in &&
		     ((whole && in->start == 0) ||
		      (want->start == in->start && strcmp(want->profile, in->profile) == 0))) ||
		    (!in && f->gi < 0 && whole)) {
			iso_strlcpy(f->allocation, want->allocation, sizeof(f->allocation));
			f->member = (int)want->member;
			return;
		}
	}
}

int iso_agent_xids_drain(struct iso_gpu *g, const char *dir, const struct iso_agent_desired *d,
                         unsigned *recorded, struct iso_error *err)
{
	*recorded = 0;
	for (int i = 0; i < ISO_AGENT_XIDS_PER_TICK; i++) {
		struct iso_agent_fault f = {0};
		struct iso_gpu_xid x;
		struct iso_error e = {0};
		int r = g->ops->wait_xid(g, 0, &x, &e);

		if (r == -ETIMEDOUT)
			return 0;
		if (r < 0)
			return iso_error_set(err, e.code, e.field, "%s", e.message);
		f.gpu = x.gpu;
		f.xid = x.xid;
		f.gi = x.gi_id;
		f.ci = x.ci_id;
		attribute(g, d, &f);
		if (iso_agent_fault_record(dir, &f, &e) < 0) {
			/* The driver gave it once: say so loudly. */
			iso_log(ISO_LOG_ERR, "agent.xid_lost",
			        "node=%s gpu=%u xid=%llu gi=%d ci=%d msg=\"%s\"", d ? d->node : "-",
			        f.gpu, f.xid, f.gi, f.ci, e.message);
			return iso_error_set(err, e.code, e.field, "%s", e.message);
		}
		(*recorded)++;
		iso_log(ISO_LOG_ERR, "agent.xid",
		        "node=%s gpu=%u xid=%llu gi=%d ci=%d allocation=%s member=%d seq=%" PRIu64,
		        d ? d->node : "-", f.gpu, f.xid, f.gi, f.ci,
		        f.allocation[0] ? f.allocation : "-", f.member, f.seq);
	}
	return 0;
}

int iso_agent_faults_flush(struct iso_client *client, const char *node, const char *dir,
                           unsigned *sent, struct iso_error *err)
{
	struct iso_agent_outbox o;
	_cleanup_free_ char *esc = iso_client_escape(node);
	int r;

	*sent = 0;
	if (!esc)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if ((r = iso_agent_outbox_load(dir, &o, err)) < 0)
		return r;
	/* In order: the controller keeps the highest seq it applied. */
	for (size_t i = 0; i < o.n && r == 0; i++) {
		const struct iso_agent_fault *f = &o.faults[i];
		_cleanup_response_ struct iso_response resp = {0};
		struct iso_error e = {0};
		json_t *body = iso_agent_fault_json(f);
		char path[256];

		if (!body) {
			r = iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
			break;
		}
		snprintf(path, sizeof(path), "/v1/nodes/%s/gpus/%u/fault", esc, f->gpu);
		r = iso_client_request(client, "POST", path, body, &resp, &e);
		json_decref(body);
		if (r == 0 && (r = iso_response_error(&resp, &e)) < 0 &&
		    (e.code == ISO_E_INVALID || e.code == ISO_E_NOT_FOUND)) {
			/* Refused for good (a GPU the inventory lacks): sending it
			 * again would block every fault behind it. */
			iso_log(ISO_LOG_ERR, "agent.fault_refused",
			        "node=%s gpu=%u xid=%llu seq=%" PRIu64 " status=%ld field=%s "
			        "msg=\"%s\"",
			        node, f->gpu, f->xid, f->seq, resp.status, e.field, e.message);
		} else if (r < 0) {
			iso_log(ISO_LOG_WARN, "agent.fault_failed",
			        "node=%s gpu=%u xid=%llu seq=%" PRIu64 " status=%ld msg=\"%s\"",
			        node, f->gpu, f->xid, f->seq, resp.status, e.message);
			r = iso_error_set(err, e.code, e.field, "%s", e.message);
			break;
		} else {
			const char *effect =
			    json_string_value(json_object_get(resp.body, "effect"));
			iso_log(ISO_LOG_INFO, "agent.fault_reported",
			        "node=%s gpu=%u xid=%llu seq=%" PRIu64 " effect=%s", node, f->gpu,
			        f->xid, f->seq, effect ? effect : "-");
			(*sent)++;
		}
		if ((r = iso_agent_fault_ack(dir, f->seq, err)) < 0)
			break;
	}
	iso_agent_outbox_clear(&o);
	return r;
}

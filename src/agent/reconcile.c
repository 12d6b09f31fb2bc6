/* reconcile.c: one tick of the node agent, without HTTP. The agent is
 * level-triggered (like kubelet's relist, unlike a wait for an edge): every
 * tick reads the instances the GPU driver reports, destroys those the
 * desired document does not hold, creates those it holds and are missing, at
 * the start the controller chose, and never touches an instance that is
 * desired and present. Nothing it needs lives only in memory: the actual
 * state comes from the driver, and the one thing remembered, the highest
 * fencing term seen, is a file in the state dir. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/agent.h"
#include "isostack/codec.h"

/* ---- the desired document: the codec's shape ---- */

_Static_assert(ISO_CODEC_PROFILE_MAX == ISO_GPU_PROFILE_MAX,
               "codec.h: a profile's name is as long as the GPU drivers'");
_Static_assert(ISO_AGENT_MAX_GPUS == ISO_GPU_MAX, "codec.h: as many GPUs as a driver handles");

int iso_agent_desired_parse(const json_t *doc, const char *node, struct iso_agent_desired *out,
                            struct iso_error *err)
{
	return iso_codec_desired_decode(doc, node, out, err);
}

void iso_agent_desired_clear(struct iso_agent_desired *d)
{
	iso_codec_desired_clear(d);
}

/* ---- the term ---- */

int iso_agent_term_load(const char *dir, uint64_t *out, struct iso_error *err)
{
	char path[PATH_MAX], buf[32] = "", *end;
	_cleanup_fclose_ FILE *f = NULL;
	size_t n;
	unsigned long long v;

	*out = 0;
	if (snprintf(path, sizeof(path), "%s/%s", dir, ISO_AGENT_TERM_FILE) >= (int)sizeof(path))
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	if (!(f = fopen(path, "r"))) {
		if (errno == ENOENT)
			return 0;
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "cannot read %s: %s", path,
		                     strerror(errno));
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (n == 0 || buf[0] < '0' || buf[0] > '9' || errno || strcmp(end, "\n") != 0 ||
	    v > INT64_MAX)
		return iso_error_set(err, ISO_E_INVALID, "state_dir",
		                     "%s: expected one decimal term and a newline", path);
	*out = v;
	return 0;
}

int iso_agent_term_store(const char *dir, uint64_t term, struct iso_error *err)
{
	char path[PATH_MAX], buf[32];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", term);

	if (snprintf(path, sizeof(path), "%s/%s", dir, ISO_AGENT_TERM_FILE) >= (int)sizeof(path))
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	return iso_file_write_atomic(path, buf, (size_t)n, 0600, false, err);
}

/* ---- reconcile ---- */

/* The MIG profile a want is made of on the device: its own, or for a GPU
 * held whole in MIG mode the instance that spans it; NULL for a GPU held
 * whole with MIG off (nothing to create). */
static const char *made_as(const struct iso_agent_want *w)
{
	if (w->as_profile[0])
		return w->as_profile;
	return strcmp(w->profile, "whole") == 0 ? NULL : w->profile;
}

static const struct iso_agent_want *wanted(const struct iso_agent_desired *d, unsigned gpu,
                                           const struct iso_gpu_instance *in)
{
	for (size_t i = 0; i < d->n_wants; i++) {
		const char *p = made_as(&d->wants[i]);
		if (d->wants[i].gpu == gpu && d->wants[i].start == in->start && p &&
		    strcmp(p, in->profile) == 0)
			return &d->wants[i];
	}
	return NULL;
}

/* A GPU held whole while its MIG mode is on cannot be handed over as a
 * device (CUDA sees only MIG devices then): it is made the one instance that
 * spans all of it, and the tenant gets that instance's MIG UUID. Its MIG
 * mode is never changed behind the operator's back. */
static void whole_as_instance(struct iso_gpu *g, struct iso_agent_want *wants, size_t n_wants)
{
	_cleanup_free_ struct iso_gpu_info *gv = NULL;
	struct iso_error e = {0};
	size_t ng = 0;

	if (g->ops->list_gpus(g, &gv, &ng, &e) < 0)
		return;
	for (size_t w = 0; w < n_wants; w++) {
		const struct iso_gpu_info *gi = NULL;
		if (strcmp(wants[w].profile, "whole") != 0)
			continue;
		for (size_t i = 0; i < ng && !gi; i++)
			if (gv[i].index == wants[w].gpu)
				gi = &gv[i];
		if (!gi || !gi->mig_enabled || !gi->model)
			continue;
		for (int p = 0; p < gi->model->n_profiles; p++) {
			const struct iso_mig_profile *pr = &gi->model->profiles[p];
			if (pr->compute == gi->model->compute_slices &&
			    pr->width == gi->model->memory_slices && !pr->media_engine) {
				iso_strlcpy(wants[w].as_profile, pr->name,
				            sizeof(wants[w].as_profile));
				wants[w].start = 0;
				break;
			}
		}
	}
}

static bool gpu_desired(const struct iso_agent_desired *d, unsigned index)
{
	for (size_t i = 0; i < d->n_gpus; i++)
		if (d->gpus[i].index == index)
			return true;
	return false;
}

static const struct iso_gpu_info *gpu_found(const struct iso_gpu_info *v, size_t n, unsigned index)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].index == index)
			return &v[i];
	return NULL;
}

/* Destroys every instance of a desired GPU that no want holds. */
static void destroy_unwanted(struct iso_gpu *g, const struct iso_agent_desired *d, unsigned gpu,
                             struct iso_agent_tick *tick)
{
	_cleanup_free_ struct iso_gpu_instance *v = NULL;
	struct iso_error e = {0};
	size_t n = 0;

	if (g->ops->list_instances(g, gpu, &v, &n, &e) < 0) {
		iso_log(ISO_LOG_WARN, "agent.list_failed", "node=%s gpu=%u msg=\"%s\"", d->node,
		        gpu, e.message);
		tick->failed++;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int r;

		if (v[i].uuid[0] && wanted(d, gpu, &v[i]))
			continue;
		r = g->ops->destroy_instance(g, gpu, v[i].start, &e);
		if (r == -EBUSY) {
			tick->busy++;
			iso_log(ISO_LOG_INFO, "agent.destroy_busy",
			        "node=%s gpu=%u start=%d profile=%s", d->node, gpu, v[i].start,
			        v[i].profile);
		} else if (r < 0) {
			tick->failed++;
			iso_log(ISO_LOG_WARN, "agent.destroy_failed",
			        "node=%s gpu=%u start=%d msg=\"%s\"", d->node, gpu, v[i].start,
			        e.message);
		} else {
			tick->destroyed++;
			iso_log(ISO_LOG_INFO, "agent.destroyed",
			        "node=%s gpu=%u start=%d profile=%s", d->node, gpu, v[i].start,
			        v[i].profile);
		}
	}
}

/* Why a want is not there after this tick, by index of d->wants. */
struct reasons {
	char (*text)[256];
};

static void create_missing(struct iso_gpu *g, const struct iso_agent_desired *d, unsigned gpu,
                           struct reasons *why, struct iso_agent_tick *tick)
{
	_cleanup_free_ struct iso_gpu_instance *v = NULL;
	struct iso_error e = {0};
	size_t n = 0;

	if (g->ops->list_instances(g, gpu, &v, &n, &e) < 0)
		return; /* counted by destroy_unwanted */
	for (size_t w = 0; w < d->n_wants; w++) {
		const struct iso_agent_want *want = &d->wants[w];
		bool present = false;
		int r;

		const char *made = made_as(want);

		if (want->gpu != gpu || !made)
			continue;
		for (size_t i = 0; i < n; i++)
			present = present || (v[i].start == want->start &&
			                       strcmp(v[i].profile, made) == 0 && v[i].uuid[0]);
		if (present)
			continue;
		memset(&e, 0, sizeof(e));
		r = g->ops->create_instance(g, gpu, made, want->start, NULL, &e);
		if (r < 0) {
			tick->failed++;
			snprintf(why->text[w], sizeof(why->text[w]), "create failed: %s",
			         e.message);
			iso_log(ISO_LOG_WARN, "agent.create_failed",
			        "node=%s gpu=%u start=%d profile=%s msg=\"%s\"", d->node, gpu,
			        want->start, want->profile, e.message);
		} else {
			tick->created++;
			iso_log(ISO_LOG_INFO, "agent.created",
			        "node=%s gpu=%u start=%d profile=%s allocation=%s member=%u",
			        d->node, gpu, want->start, want->profile, want->allocation,
			        want->member);
		}
	}
}

/* One status entry: a want with what the driver shows for it. */
static void status_instance(struct iso_agent_instance *in, const struct iso_agent_want *w,
                            const char *uuid, bool ready, const char *reason)
{
	in->gpu = (int)w->gpu;
	in->start = w->start;
	in->member = (int)w->member;
	iso_strlcpy(in->profile, w->profile, sizeof(in->profile));
	iso_strlcpy(in->uuid, uuid, sizeof(in->uuid));
	iso_strlcpy(in->allocation, w->allocation, sizeof(in->allocation));
	in->ready = ready;
	iso_codec_reason_copy(in->reason, reason);
}

/* A GPU whose MIG mode, read back from the device at this tick, is not the
 * one the inventory gives it is a node condition (docs/agents.md,
 * "Conditions"): reported, never changed by the agent. */
static void mig_conditions(const struct iso_agent_desired *d, const struct iso_gpu_info *gv,
                           size_t ng, struct iso_agent_status *st)
{
	for (size_t i = 0; i < d->n_gpus; i++) {
		const struct iso_gpu_info *gi = gpu_found(gv, ng, d->gpus[i].index);
		if (gi && gi->mig_enabled != d->gpus[i].mig) {
			struct iso_agent_condition *c = &st->conditions[st->n_conditions++];
			iso_strlcpy(c->type, ISO_AGENT_COND_MIG_MODE, sizeof(c->type));
			c->gpu = (int)gi->index;
			c->want = d->gpus[i].mig;
			c->have = gi->mig_enabled;
		}
	}
}

/* The status document from the driver's state after the changes: each want
 * with what the driver shows for it, written by the codec
 * (iso_codec_status_encode). */
static int build_status(struct iso_gpu *g, const struct iso_agent_desired *d, uint64_t term_seen,
                        const struct reasons *why, json_t **status, struct iso_error *err)
{
	_cleanup_free_ struct iso_gpu_info *gv = NULL;
	struct iso_agent_status st = {.term_seen = (int64_t)term_seen};
	struct iso_agent_gpu *gpus;
	struct iso_agent_instance *insts;
	size_t ng = 0;
	int r;

	if ((r = g->ops->list_gpus(g, &gv, &ng, err)) < 0)
		return r;
	/* freed by iso_codec_status_clear, whichever were allocated */
	st.gpus = gpus = calloc(ng + 1, sizeof(*gpus));
	st.instances = insts = calloc(d->n_wants + 1, sizeof(*insts));
	st.conditions = calloc(d->n_gpus + 1, sizeof(*st.conditions));
	if (!gpus || !insts || !st.conditions) {
		iso_codec_status_clear(&st);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	iso_strlcpy(st.version, ISO_VERSION, sizeof(st.version));
	for (size_t i = 0; i < ng; i++)
		if (gpu_desired(d, gv[i].index)) {
			struct iso_agent_gpu *o = &gpus[st.n_gpus++];
			o->index = (int)gv[i].index;
			iso_strlcpy(o->model, gv[i].name[0] ? gv[i].name : "unknown",
			            sizeof(o->model));
			iso_strlcpy(o->uuid, gv[i].uuid[0] ? gv[i].uuid : "unknown",
			            sizeof(o->uuid));
			o->mig = gv[i].mig_enabled;
		}
	mig_conditions(d, gv, ng, &st);
	for (size_t w = 0; w < d->n_wants; w++) {
		const struct iso_agent_want *want = &d->wants[w];
		const struct iso_gpu_info *gi = gpu_found(gv, ng, want->gpu);
		struct iso_agent_instance *in = &insts[st.n_instances++];
		_cleanup_free_ struct iso_gpu_instance *v = NULL;
		const struct iso_gpu_instance *found = NULL;
		struct iso_error e = {0};
		size_t n = 0;

		if (!gi) {
			status_instance(in, want, "", false, "GPU not found");
			continue;
		}
		const char *made = made_as(want);
		if (!made) {
			status_instance(in, want, gi->uuid, !gi->mig_enabled,
			                gi->mig_enabled ? "MIG mode is enabled" : "");
			continue;
		}
		if (g->ops->list_instances(g, want->gpu, &v, &n, &e) < 0) {
			status_instance(in, want, "", false, e.message);
			continue;
		}
		for (size_t i = 0; i < n; i++)
			if (v[i].start == want->start && strcmp(v[i].profile, made) == 0)
				found = &v[i];
		if (found && found->uuid[0])
			status_instance(in, want, found->uuid, true, "");
		else
			status_instance(in, want, "", false,
			                why->text[w][0] ? why->text[w] : "not created yet");
	}
	*status = iso_codec_status_encode(&st, false);
	iso_codec_status_clear(&st);
	if (!*status)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	return 0;
}

int iso_agent_reconcile(struct iso_gpu *g, const char *state_dir,
                        const struct iso_agent_desired *given, json_t **status,
                        struct iso_agent_tick *tick, struct iso_error *err)
{
	struct iso_agent_desired made = *given; /* with whole GPUs in MIG mode as instances */
	const struct iso_agent_desired *d = &made;
	_cleanup_free_ struct iso_agent_want *wants =
	    calloc(given->n_wants ? given->n_wants : 1, sizeof(*wants));
	struct reasons why = {calloc(d->n_wants ? d->n_wants : 1, sizeof(*why.text))};

	if (wants) {
		if (given->n_wants > 0)
			memcpy(wants, given->wants, given->n_wants * sizeof(*wants));
		whole_as_instance(g, wants, given->n_wants);
		made.wants = wants;
	}
	uint64_t seen;
	int r, refused = 0;

	memset(tick, 0, sizeof(*tick));
	*status = NULL;
	if (!why.text)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if ((r = iso_agent_term_load(state_dir, &seen, err)) < 0)
		goto out;
	if (d->term < seen) {
		/* Fencing: a controller older than one already obeyed. Touch
		 * nothing; report the actual state with the higher term (the
		 * controller answers 409 to it). */
		refused = iso_error_set(err, ISO_E_CONFLICT, "term",
		                        "desired state of term %" PRIu64 " refused: term %" PRIu64
		                        " was already seen",
		                        d->term, seen);
		iso_log(ISO_LOG_WARN, "agent.term_refused",
		        "node=%s term=%" PRIu64 " seen=%" PRIu64, d->node, d->term, seen);
	} else {
		if (d->term > seen) {
			if ((r = iso_agent_term_store(state_dir, d->term, err)) < 0)
				goto out;
			seen = d->term;
		}
		for (size_t i = 0; i < d->n_gpus; i++)
			destroy_unwanted(g, d, d->gpus[i].index, tick);
		for (size_t i = 0; i < d->n_gpus; i++)
			create_missing(g, d, d->gpus[i].index, &why, tick);
	}
	tick->term_seen = seen;
	if (refused) {
		struct iso_agent_desired none = *d;
		struct iso_error e2 = {0};

		/* The actual state, none of it claimed for the refused document. */
		none.n_wants = 0;
		r = build_status(g, &none, seen, &why, status, &e2);
		r = r < 0 ? r : refused;
	} else {
		r = build_status(g, d, seen, &why, status, err);
	}
out:
	free(why.text);
	return r;
}

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

/* ---- the desired document ---- */

#define FIELD(...) (snprintf(field, sizeof(field), __VA_ARGS__), field)

static int get_uint(const json_t *o, const char *key, const char *field, uint64_t max,
                    uint64_t *out, struct iso_error *err)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "desired state: %s must be an integer 0..%" PRIu64, field,
		                     max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_str(const json_t *o, const char *key, const char *field, char *dst, size_t size,
                   struct iso_error *err)
{
	const char *s = json_string_value(json_object_get(o, key));

	if (!s || !*s || strlen(s) >= size || !iso_text_valid(s))
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "desired state: %s must be a string of 1..%zu characters",
		                     field, size - 1);
	iso_strlcpy(dst, s, size);
	return 0;
}

/* Refuses keys the protocol does not have: a garbled document is not half
 * applied. */
static int only_keys(const json_t *o, const char *at, const char *const *keys,
                     struct iso_error *err)
{
	const char *k;
	const json_t *v;
	char field[ISO_ERR_FIELD_MAX];

	json_object_foreach ((json_t *)o, k, v) {
		bool known = false;
		for (size_t i = 0; keys[i]; i++)
			known = known || strcmp(k, keys[i]) == 0;
		if (!known)
			return iso_error_set(err, ISO_E_INVALID, *at ? FIELD("%s.%s", at, k) : k,
			                     "desired state: unknown key \"%s\"", k);
	}
	return 0;
}

static int want_append(struct iso_agent_desired *d, const struct iso_agent_want *w)
{
	struct iso_agent_want *v = realloc(d->wants, (d->n_wants + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	d->wants = v;
	d->wants[d->n_wants++] = *w;
	return 0;
}

static int parse_owner(const json_t *o, const char *at, struct iso_agent_want *w,
                       struct iso_error *err)
{
	static const char *const keys[] = {"profile",    "start",  "width",
	                                   "allocation", "member", NULL};
	char field[ISO_ERR_FIELD_MAX];
	uint64_t member = 0;
	int r;

	if ((r = only_keys(o, at, keys, err)) < 0 ||
	    (r = get_str(o, "allocation", FIELD("%s.allocation", at), w->allocation,
	                 sizeof(w->allocation), err)) < 0 ||
	    (r = get_uint(o, "member", FIELD("%s.member", at), 1023, &member, err)) < 0)
		return r;
	w->member = (unsigned)member;
	return 0;
}

static int parse_gpu(const json_t *o, size_t i, struct iso_agent_desired *d, struct iso_error *err)
{
	static const char *const keys[] = {"index", "mig", "instances", "whole", NULL};
	char field[ISO_ERR_FIELD_MAX], at[64];
	const json_t *insts = json_object_get(o, "instances"), *whole = json_object_get(o, "whole");
	const json_t *mig = json_object_get(o, "mig");
	uint64_t index = 0;
	size_t k;
	const json_t *v;
	int r;

	snprintf(at, sizeof(at), "gpus[%zu]", i);
	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, at, "desired state: %s must be an object",
		                     at);
	if ((r = only_keys(o, at, keys, err)) < 0 ||
	    (r = get_uint(o, "index", FIELD("%s.index", at), ISO_GPU_MAX - 1, &index, err)) < 0)
		return r;
	for (size_t j = 0; j < d->n_gpus; j++)
		if (d->gpus[j].index == index)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.index", at),
			                     "desired state: GPU %" PRIu64 " listed twice", index);
	if (!json_is_boolean(mig))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.mig", at),
		                     "desired state: %s.mig must be a boolean", at);
	d->gpus[d->n_gpus].index = (unsigned)index;
	d->gpus[d->n_gpus].mig = json_is_true(mig);
	d->n_gpus++;
	if (!json_is_array(insts))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.instances", at),
		                     "desired state: %s.instances must be an array", at);
	json_array_foreach (insts, k, v) {
		struct iso_agent_want w = {.gpu = (unsigned)index};
		char iat[96];
		uint64_t start = 0, width = 0;

		snprintf(iat, sizeof(iat), "%s.instances[%zu]", at, k);
		if (!json_is_object(v))
			return iso_error_set(err, ISO_E_INVALID, iat,
			                     "desired state: %s must be an object", iat);
		if ((r = get_str(v, "profile", FIELD("%s.profile", iat), w.profile,
		                 sizeof(w.profile), err)) < 0 ||
		    (r = get_uint(v, "start", FIELD("%s.start", iat), 7, &start, err)) < 0 ||
		    (r = get_uint(v, "width", FIELD("%s.width", iat), 8, &width, err)) < 0 ||
		    (r = parse_owner(v, iat, &w, err)) < 0)
			return r;
		if (strcmp(w.profile, "whole") == 0 || width == 0)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.profile", iat),
			                     "desired state: not a MIG instance");
		/* as the controller writes it: the drivers find a profile in
		 * any case, but what they report is matched by this spelling */
		if (w.profile[strspn(w.profile, "abcdefghijklmnopqrstuvwxyz0123456789.+")])
			return iso_error_set(
			    err, ISO_E_INVALID, FIELD("%s.profile", iat),
			    "desired state: %s: a MIG profile is lowercase letters, "
			    "digits, '.' and '+'",
			    field);
		w.start = (int)start;
		w.width = (int)width;
		for (size_t j = 0; j < d->n_wants; j++)
			if (d->wants[j].gpu == w.gpu && d->wants[j].start == w.start)
				return iso_error_set(err, ISO_E_INVALID, FIELD("%s.start", iat),
				                     "desired state: two instances start at %d",
				                     w.start);
		if (want_append(d, &w) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	if (!json_is_null(whole)) {
		struct iso_agent_want w = {.gpu = (unsigned)index, .profile = "whole"};
		char wat[80];

		snprintf(wat, sizeof(wat), "%s.whole", at);
		if (!json_is_object(whole))
			return iso_error_set(err, ISO_E_INVALID, wat,
			                     "desired state: %s must be an object or null", wat);
		if ((r = parse_owner(whole, wat, &w, err)) < 0)
			return r;
		if (json_array_size(insts) > 0)
			return iso_error_set(err, ISO_E_INVALID, wat,
			                     "desired state: a GPU held whole has no instances");
		if (want_append(d, &w) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	return 0;
}

/* One entry of "vfs": {"index","device","guid","tenant","pkey","members"}
 * (docs/agents.md). The GUID's validity (not zero, not all-ones) is the VF
 * driver's to refuse, per VF, so that one bad entry does not stop the rest. */
static int parse_vf(const json_t *o, size_t i, struct iso_agent_desired *d, struct iso_error *err)
{
	static const char *const keys[] = {"index", "device",  "guid", "tenant",
	                                   "pkey",  "members", NULL};
	static const char *const member_keys[] = {"allocation", "member", NULL};
	char field[ISO_ERR_FIELD_MAX], at[32], text[24];
	struct iso_agent_vf_want *w = &d->vfs[d->n_vfs];
	const json_t *members = json_object_get(o, "members"), *m;
	uint64_t index = 0, pkey = 0;
	size_t k;
	int r;

	snprintf(at, sizeof(at), "vfs[%zu]", i);
	if (!json_is_object(o))
		return iso_error_set(err, ISO_E_INVALID, at, "desired state: %s must be an object",
		                     at);
	memset(w, 0, sizeof(*w));
	if ((r = only_keys(o, at, keys, err)) < 0 ||
	    (r = get_uint(o, "index", FIELD("%s.index", at), ISO_AGENT_VF_MAX - 1, &index, err)) <
	        0 ||
	    (r = get_str(o, "device", FIELD("%s.device", at), w->device, sizeof(w->device), err)) <
	        0 ||
	    (r = get_str(o, "guid", FIELD("%s.guid", at), text, sizeof(text), err)) < 0 ||
	    (r = get_str(o, "tenant", FIELD("%s.tenant", at), w->tenant, sizeof(w->tenant), err)) <
	        0)
		return r;
	if (!iso_name_valid(w->device) || strchr(w->device, '-'))
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.device", at),
		                     "desired state: %s is not a device name", field);
	if (iso_parse_guid(text, &w->guid) < 0 || strlen(text) != 18)
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.guid", at),
		                     "desired state: %s must be 0x and 16 hex digits", field);
	if ((r = get_str(o, "pkey", FIELD("%s.pkey", at), text, sizeof(text), err)) < 0)
		return r;
	{
		char *end;
		errno = 0;
		pkey = strtoull(text, &end, 16);
		if (strncmp(text, "0x", 2) != 0 || strlen(text) != 6 || errno || *end ||
		    !(pkey & 0x8000) || (pkey & 0x7fff) == 0 || (pkey & 0x7fff) == 0x7fff)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.pkey", at),
			                     "desired state: %s must be a full-membership P_Key "
			                     "0x8001..0xfffe",
			                     field);
	}
	w->pkey = (uint16_t)pkey;
	w->index = (unsigned)index;
	if (!json_is_array(members) || json_array_size(members) > 4096)
		return iso_error_set(err, ISO_E_INVALID, FIELD("%s.members", at),
		                     "desired state: %s must be an array of at most 4096 members",
		                     field);
	json_array_foreach (members, k, m) {
		char mat[64];
		char alloc[ISO_AGENT_ALLOC_MAX];
		uint64_t member = 0;

		snprintf(mat, sizeof(mat), "%s.members[%zu]", at, k);
		if (!json_is_object(m))
			return iso_error_set(err, ISO_E_INVALID, mat,
			                     "desired state: %s must be an object", mat);
		if ((r = only_keys(m, mat, member_keys, err)) < 0 ||
		    (r = get_str(m, "allocation", FIELD("%s.allocation", mat), alloc, sizeof(alloc),
		                 err)) < 0 ||
		    (r = get_uint(m, "member", FIELD("%s.member", mat), 1023, &member, err)) < 0)
			return r;
	}
	w->n_members = (unsigned)json_array_size(members);
	for (size_t j = 0; j < d->n_vfs; j++)
		if (d->vfs[j].index == w->index && strcmp(d->vfs[j].device, w->device) == 0)
			return iso_error_set(err, ISO_E_INVALID, FIELD("%s.index", at),
			                     "desired state: VF %u of %s listed twice", w->index,
			                     w->device);
	d->n_vfs++;
	return 0;
}

void iso_agent_desired_clear(struct iso_agent_desired *d)
{
	free(d->vfs);
	free(d->wants);
	memset(d, 0, sizeof(*d));
}

int iso_agent_desired_parse(const json_t *doc, const char *node, struct iso_agent_desired *out,
                            struct iso_error *err)
{
	static const char *const keys[] = {"node", "generation", "term", "gpus", "vfs", NULL};
	const json_t *gpus = json_object_get(doc, "gpus"), *v;
	size_t i;
	int r;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(doc))
		return iso_error_set(err, ISO_E_INVALID, "", "desired state: not a JSON object");
	if ((r = only_keys(doc, "", keys, err)) < 0 ||
	    (r = get_str(doc, "node", "node", out->node, sizeof(out->node), err)) < 0 ||
	    (r = get_uint(doc, "generation", "generation", INT64_MAX, &out->generation, err)) < 0 ||
	    (r = get_uint(doc, "term", "term", INT64_MAX, &out->term, err)) < 0)
		goto fail;
	if (strcmp(out->node, node) != 0) {
		r = iso_error_set(err, ISO_E_INVALID, "node",
		                  "desired state: for node \"%s\", expected \"%s\"", out->node,
		                  node);
		goto fail;
	}
	if (!json_is_array(gpus) || json_array_size(gpus) > ISO_GPU_MAX) {
		r = iso_error_set(err, ISO_E_INVALID, "gpus",
		                  "desired state: gpus must be an array of at most %d",
		                  ISO_GPU_MAX);
		goto fail;
	}
	if (!json_is_array(json_object_get(doc, "vfs")) ||
	    json_array_size(json_object_get(doc, "vfs")) > ISO_AGENT_VF_MAX) {
		r = iso_error_set(err, ISO_E_INVALID, "vfs",
		                  "desired state: vfs must be an array of at most %d",
		                  ISO_AGENT_VF_MAX);
		goto fail;
	}
	json_array_foreach (gpus, i, v)
		if ((r = parse_gpu(v, i, out, err)) < 0)
			goto fail;
	if (json_array_size(json_object_get(doc, "vfs")) > 0 &&
	    !(out->vfs = calloc(json_array_size(json_object_get(doc, "vfs")), sizeof(*out->vfs)))) {
		r = iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
		goto fail;
	}
	json_array_foreach (json_object_get(doc, "vfs"), i, v)
		if ((r = parse_vf(v, i, out, err)) < 0)
			goto fail;
	return 0;
fail:
	iso_agent_desired_clear(out);
	return r;
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
	_cleanup_free_ struct iso_agent_gpu *gpus = NULL;
	_cleanup_free_ struct iso_agent_instance *insts = NULL;
	_cleanup_free_ struct iso_agent_condition *conds = NULL;
	struct iso_agent_status st = {.term_seen = (int64_t)term_seen};
	size_t ng = 0;
	int r;

	if ((r = g->ops->list_gpus(g, &gv, &ng, err)) < 0)
		return r;
	gpus = calloc(ng + 1, sizeof(*gpus));
	insts = calloc(d->n_wants + 1, sizeof(*insts));
	conds = calloc(d->n_gpus + 1, sizeof(*conds));
	if (!gpus || !insts || !conds)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	iso_strlcpy(st.version, ISO_VERSION, sizeof(st.version));
	st.gpus = gpus;
	st.instances = insts;
	st.conditions = conds;
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
	if (!(*status = iso_codec_status_encode(&st, false)))
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

/* cxi_node.c: a Slingshot node's CXI services in the running agent
 * (docs/agent.md "CXI services"). cxi.c is the driver (libcxi by dlopen,
 * ensure, destroy, the level-triggered pass); this file is what the daemon
 * needs around it: the driver opened when the node's desired document first
 * carries a member with a VNI (or at once with --cxi-library PATH), the pass
 * run every tick with the identities the attachment path admitted, the
 * read-back and each member's readiness put in the status report, and the
 * socket's cxi_admit, by which a root caller (the Slurm plugin, the CNI
 * plugin) gives a member's uid and gid and gets its service.
 *
 * The controller never sends an identity (it does not know a job's or a
 * pod's), so the admitted identities are the one thing the pass needs that
 * the NIC does not hold: they are kept in NODE_DIR/cxi-admitted.json, written
 * before a cxi_admit is answered, so that a restarted agent explains the
 * services of running members again (and finds them by content, same
 * svc_id, rather than remaking them). An entry goes when its member leaves
 * the document. One lock serialises the tick and the socket's admit: both
 * read the NIC, decide and write it. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct agent_cxi {
	pthread_mutex_t lock;
	struct agent_cxi_config cfg;
	char off[160]; /* why this agent has no CXI driver; "" when it may */
	char node[ISO_NAME_MAX];
	char path[PATH_MAX];     /* NODE_DIR/cxi-admitted.json */
	struct iso_agent_cxi *x; /* NULL until opened */
	char open_error[ISO_AGENT_REASON_MAX];
	bool loaded;
	char load_error[ISO_AGENT_REASON_MAX]; /* a garbled file: nothing is touched */
	size_t n;
	struct agent_cxi_admit *v;        /* ISO_AGENT_MEMBERS_MAX of room */
	struct iso_agent_cxi_report last; /* the previous read-back, for the log */
};

/* ---- the admitted identities' file ---- */

int agent_cxi_admitted_decode(const char *text, size_t len, struct agent_cxi_admit **out, size_t *n,
                              struct iso_error *err)
{
	static const char *const top[] = {"admitted", NULL};
	static const char *const keys[] = {"allocation", "member", "vni", "uid", "gid", NULL};
	json_t *doc, *arr, *it;
	struct agent_cxi_admit *v = NULL;
	size_t i;
	int r = -EINVAL;

	*out = NULL;
	*n = 0;
	if ((r = iso_json_load_object(text, len, AGENT_CXI_FILE_MAX, ISO_E_INVALID, NULL, &doc,
	                              err)) < 0)
		return r;
	r = -EINVAL;
	if (iso_json_check_keys(doc, NULL, top, err) < 0)
		goto out;
	arr = json_object_get(doc, "admitted");
	if (!json_is_array(arr) || json_array_size(arr) > ISO_AGENT_MEMBERS_MAX) {
		iso_error_set(err, ISO_E_INVALID, "admitted", "admitted: an array of at most %d",
		              ISO_AGENT_MEMBERS_MAX);
		goto out;
	}
	if (!(v = calloc(json_array_size(arr) + 1, sizeof(*v)))) {
		r = iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
		goto out;
	}
	json_array_foreach (arr, i, it) {
		char prefix[32];
		const char *a = NULL;
		int64_t m = 0, vni = 0, uid = 0, gid = 0;
		struct agent_cxi_admit *e = &v[i];

		snprintf(prefix, sizeof(prefix), "admitted[%zu]", i);
		if (!json_is_object(it)) {
			iso_error_set(err, ISO_E_INVALID, prefix, "%s: must be an object", prefix);
			goto out;
		}
		if (iso_json_check_keys(it, prefix, keys, err) < 0 ||
		    iso_json_get_string(it, "allocation", prefix, true, &a, err) < 0 ||
		    iso_json_get_int(it, "member", prefix, true, 0, ISO_CODEC_MEMBER_MAX, &m, err) <
		        0 ||
		    iso_json_get_int(it, "vni", prefix, true, 1, ISO_CXI_VNI_MAX, &vni, err) < 0 ||
		    iso_json_get_int(it, "uid", prefix, true, 1, (int64_t)UINT32_MAX - 1, &uid,
		                     err) < 0 ||
		    iso_json_get_int(it, "gid", prefix, true, 1, (int64_t)UINT32_MAX - 1, &gid,
		                     err) < 0)
			goto out;
		if (!agent_alloc_id_valid(a)) {
			iso_error_set(err, ISO_E_INVALID, "allocation",
			              "%s.allocation: not an allocation id", prefix);
			goto out;
		}
		iso_strlcpy(e->allocation, a, sizeof(e->allocation));
		e->member = (unsigned)m;
		e->vni = (uint32_t)vni;
		e->uid = (uint32_t)uid;
		e->gid = (uint32_t)gid;
		for (size_t j = 0; j < i; j++)
			if (v[j].member == e->member &&
			    strcmp(v[j].allocation, e->allocation) == 0) {
				iso_error_set(err, ISO_E_INVALID, "member",
				              "%s.member: member %u of %s listed twice", prefix,
				              e->member, e->allocation);
				goto out;
			}
	}
	*n = json_array_size(arr);
	*out = ISO_TAKE(v);
	r = 0;
out:
	free(v);
	json_decref(doc);
	return r;
}

static int admitted_load(struct agent_cxi *c, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(c->path, "re");
	_cleanup_free_ char *buf = malloc(AGENT_CXI_FILE_MAX + 1);
	struct agent_cxi_admit *v = NULL;
	size_t len, n = 0;
	int r;

	if (!buf)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if (!f) {
		if (errno != ENOENT)
			return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s", c->path,
			                     strerror(errno));
		c->n = 0;
		return 0;
	}
	len = fread(buf, 1, AGENT_CXI_FILE_MAX + 1, f);
	if ((r = agent_cxi_admitted_decode(buf, len, &v, &n, err)) < 0) {
		char msg[ISO_ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err ? err->message : "");
		return iso_error_set(err, ISO_E_INVALID, err ? err->field : "", "%s: %s", c->path,
		                     msg);
	}
	if (n > 0)
		memcpy(c->v, v, n * sizeof(*v));
	c->n = n;
	free(v);
	return 0;
}

static int admitted_store(const struct agent_cxi *c, struct iso_error *err)
{
	json_t *arr = json_array(), *o = NULL;
	char *text = NULL;
	int r;

	for (size_t i = 0; arr && i < c->n; i++)
		if (json_array_append_new(
		        arr, json_pack("{s:s, s:i, s:I, s:I, s:I}", "allocation",
		                       c->v[i].allocation, "member", (int)c->v[i].member, "vni",
		                       (json_int_t)c->v[i].vni, "uid", (json_int_t)c->v[i].uid,
		                       "gid", (json_int_t)c->v[i].gid)) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	if (arr)
		o = json_pack("{s:o}", "admitted", arr);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	r = iso_file_write_atomic(c->path, text, strlen(text), 0600, false, err);
	free(text);
	return r;
}

/* ---- the state ---- */

int agent_cxi_new(const struct agent_cxi_config *cfg, struct agent_cxi **out, struct iso_error *err)
{
	struct agent_cxi *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c || !(c->v = calloc(ISO_AGENT_MEMBERS_MAX, sizeof(*c->v)))) {
		free(c);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	pthread_mutex_init(&c->lock, NULL);
	c->cfg = *cfg;
	if (cfg->off)
		snprintf(c->off, sizeof(c->off),
		         "this node's agent runs with --cxi-library none: no CXI service can "
		         "be made");
	else if (!cfg->node || !cfg->node_dir)
		snprintf(c->off, sizeof(c->off),
		         "CXI services need one --node per agent (one host, one NIC)");
	else {
		iso_strlcpy(c->node, cfg->node, sizeof(c->node));
		if (snprintf(c->path, sizeof(c->path), "%s/%s", cfg->node_dir,
		             AGENT_CXI_ADMITTED_FILE) >= (int)sizeof(c->path)) {
			agent_cxi_free(c);
			return iso_error_set(err, ISO_E_INVALID, "--state-dir",
			                     "--state-dir: path too long");
		}
	}
	c->cfg.library = NULL; /* points into argv; copied below when given */
	c->cfg.node = c->cfg.node_dir = NULL;
	if (cfg->library && !(c->cfg.library = strdup(cfg->library))) {
		agent_cxi_free(c);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	*out = c;
	return 0;
}

void agent_cxi_free(struct agent_cxi *c)
{
	if (!c)
		return;
	iso_agent_cxi_close(c->x);
	iso_agent_cxi_report_clear(&c->last);
	free((char *)c->cfg.library);
	free(c->v);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* With the lock: the admitted file read once; the driver opened. 0, or
 * -errno with the reason members and callers get. */
static int ready_locked(struct agent_cxi *c, char *why, size_t size)
{
	struct iso_error e = {0};
	int r;

	if (c->off[0]) {
		snprintf(why, size, "%s", c->off);
		return -ENODEV;
	}
	if (!c->loaded) {
		if (admitted_load(c, &e) < 0) {
			/* never guess: a pass without the identities would destroy
			 * the services of running members */
			if (strcmp(c->load_error, e.message) != 0)
				iso_log(ISO_LOG_ERR, "agent.cxi_state_bad", "node=%s msg=\"%s\"",
				        c->node, e.message);
			iso_codec_reason_copy(c->load_error, e.message);
			snprintf(why, size, "%s", e.message);
			return -EINVAL;
		}
		c->loaded = true;
		c->load_error[0] = '\0';
	}
	if (c->x)
		return 0;
	if ((r = iso_agent_cxi_open(c->cfg.library, c->cfg.dev_id, &c->x, &e)) < 0) {
		char msg[ISO_AGENT_REASON_MAX];
		snprintf(msg, sizeof(msg), "no CXI driver on this node: %s", e.message);
		if (strcmp(c->open_error, msg) != 0)
			iso_log(ISO_LOG_ERR, "agent.cxi_unavailable", "node=%s field=%s msg=\"%s\"",
			        c->node, e.field, e.message);
		iso_codec_reason_copy(c->open_error, msg);
		snprintf(why, size, "%s", msg);
		return r;
	}
	if (c->open_error[0])
		c->open_error[0] = '\0';
	iso_log(ISO_LOG_INFO, "agent.cxi_open", "node=%s device=cxi%u", c->node, c->cfg.dev_id);
	return 0;
}

static const struct agent_cxi_admit *admitted_of(const struct agent_cxi *c, const char *alloc,
                                                 unsigned member)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].member == member && strcmp(c->v[i].allocation, alloc) == 0)
			return &c->v[i];
	return NULL;
}

static const struct iso_agent_member_want *desired_member(const struct iso_agent_desired *d,
                                                          const char *alloc, unsigned member)
{
	for (size_t i = 0; i < d->n_members; i++)
		if (d->members[i].member == member && strcmp(d->members[i].allocation, alloc) == 0)
			return &d->members[i];
	return NULL;
}

/* Admitted identities of members that left the document go (their
 * services are then destroyed by the pass); the VNIs are the document's. */
static void prune_locked(struct agent_cxi *c, const struct iso_agent_desired *d)
{
	size_t keep = 0;
	bool changed = false;

	for (size_t i = 0; i < c->n; i++) {
		const struct iso_agent_member_want *m =
		    desired_member(d, c->v[i].allocation, c->v[i].member);
		if (!m || !m->has_cxi) {
			iso_log(ISO_LOG_INFO, "agent.cxi_released",
			        "node=%s allocation=%s member=%u uid=%u gid=%u", c->node,
			        c->v[i].allocation, c->v[i].member, c->v[i].uid, c->v[i].gid);
			changed = true;
			continue;
		}
		if (m->cxi_vni != c->v[i].vni)
			changed = true;
		c->v[i].vni = m->cxi_vni;
		c->v[keep++] = c->v[i];
	}
	c->n = keep;
	if (changed) {
		struct iso_error e = {0};
		if (admitted_store(c, &e) < 0)
			iso_log(ISO_LOG_ERR, "agent.cxi_state_failed", "node=%s msg=\"%s\"",
			        c->node, e.message);
	}
}

/* What changed on the NIC since the last read-back, for the log. */
static void log_changes(struct agent_cxi *c, const struct iso_agent_cxi_report *now)
{
	for (int pass = 0; pass < 2; pass++) {
		const struct iso_agent_cxi_report *a = pass ? now : &c->last,
		                                  *b = pass ? &c->last : now;
		for (int i = 0; i < a->n_services; i++) {
			bool there = false;
			for (int j = 0; j < b->n_services && !there; j++)
				there = b->services[j].svc_id == a->services[i].svc_id &&
				        b->services[j].n_vnis == a->services[i].n_vnis &&
				        (a->services[i].n_vnis == 0 ||
				         b->services[j].vnis[0] == a->services[i].vnis[0]);
			if (!there)
				iso_log(ISO_LOG_INFO,
				        pass ? "agent.cxi_service" : "agent.cxi_removed",
				        "node=%s svc_id=%u vni=%u", c->node, a->services[i].svc_id,
				        a->services[i].n_vnis ? a->services[i].vnis[0] : 0);
		}
	}
}

static void members_status(const struct iso_agent_desired *d,
                           const struct iso_agent_cxi_member_in *in, const bool *waiting,
                           const char *why, json_t *status)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < d->n_members; i++) {
		const struct iso_agent_member_want *m = &d->members[i];
		struct iso_agent_cxi_member_status st = {.member = (int)m->member,
		                                         .vni = m->cxi_vni};

		if (!m->has_cxi)
			continue;
		iso_strlcpy(st.allocation, m->allocation, sizeof(st.allocation));
		if (why) {
			iso_codec_reason_copy(st.reason, why);
		} else {
			/* no identity yet: nothing due; the gate lets the
			 * attachment come (it starts after activation) */
			st.ready = in[i].ready || waiting[i];
			st.svc_id = in[i].ready ? in[i].svc_id : 0;
			iso_codec_reason_copy(st.reason, in[i].ready ? "" : in[i].reason);
		}
		json_array_append_new(arr, iso_codec_status_cxi_member_encode(&st));
	}
	if (arr)
		json_object_set_new(status, "cxi_members", arr);
}

void agent_cxi_tick(struct agent_cxi *c, const char *node, const struct iso_agent_desired *d,
                    json_t *status)
{
	_cleanup_free_ struct iso_agent_cxi_member_in *in = calloc(d->n_members + 1, sizeof(*in));
	_cleanup_free_ bool *waiting = calloc(d->n_members + 1, sizeof(bool));
	struct iso_agent_cxi_report rep = {0};
	struct iso_error e = {0};
	char why[ISO_AGENT_REASON_MAX];
	bool any = false;

	for (size_t i = 0; i < d->n_members; i++)
		any |= d->members[i].has_cxi;
	if (!in || !waiting) {
		if (any)
			members_status(d, NULL, NULL, "out of memory", status);
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (!any && !c->cfg.always && !c->x) {
		pthread_mutex_unlock(&c->lock);
		return; /* not a Slingshot node, as far as this agent knows */
	}
	if (ready_locked(c, why, sizeof(why)) < 0) {
		pthread_mutex_unlock(&c->lock);
		if (any)
			members_status(d, NULL, NULL, why, status);
		return;
	}
	prune_locked(c, d);
	for (size_t i = 0; i < d->n_members; i++) {
		const struct agent_cxi_admit *a =
		    admitted_of(c, d->members[i].allocation, d->members[i].member);
		in[i].want = &d->members[i];
		if (a) {
			in[i].has_ident = true;
			in[i].uid = a->uid;
			in[i].gid = a->gid;
		}
		waiting[i] = d->members[i].has_cxi && !a && !d->members[i].cxi_ident;
	}
	if (iso_agent_cxi_reconcile(c->x, in, d->n_members, &rep, &e) < 0) {
		/* the device could not be read: opened again next tick */
		snprintf(why, sizeof(why), "CXI device cxi%u: %s", c->cfg.dev_id, e.message);
		iso_log(ISO_LOG_ERR, "agent.cxi_failed", "node=%s field=%s msg=\"%s\"", node,
		        e.field, e.message);
		iso_agent_cxi_close(c->x);
		c->x = NULL;
		iso_agent_cxi_report_clear(&rep);
		pthread_mutex_unlock(&c->lock);
		if (any)
			members_status(d, NULL, NULL, why, status);
		return;
	}
	log_changes(c, &rep);
	json_object_set_new(status, "cxi", iso_codec_status_cxi_encode(&rep));
	iso_agent_cxi_report_clear(&c->last);
	c->last = rep;
	pthread_mutex_unlock(&c->lock);
	if (any)
		members_status(d, in, waiting, NULL, status);
}

/* ---- the socket's cxi_admit ---- */

char *agent_cxi_admit_answer(struct agent_cxi *c, const struct agent_table_entry *e,
                             const char *tenant, uint32_t uid, uint32_t gid)
{
	char why[ISO_AGENT_REASON_MAX + 64];
	const struct agent_cxi_admit *had;
	struct iso_error err = {0};
	uint32_t svc = 0;
	json_t *o;
	char *text;

	if (strcmp(e->tenant, tenant) != 0)
		return agent_answer_error(ISO_E_FORBIDDEN,
		                          "tenant: refused: this member is not that tenant's");
	if (!e->cxi_vni)
		return agent_answer_error(ISO_E_INVALID,
		                          "member: has no VNI (no \"cxi\" in this node's desired "
		                          "document: not a Slingshot member)");
	pthread_mutex_lock(&c->lock);
	if (ready_locked(c, why, sizeof(why)) < 0) {
		pthread_mutex_unlock(&c->lock);
		return agent_answer_error(ISO_E_UNAVAILABLE, why);
	}
	had = admitted_of(c, e->allocation, e->member);
	if (had && (had->uid != uid || had->gid != gid)) {
		snprintf(
		    why, sizeof(why),
		    "%s: member %u of %s already admits uid %u gid %u: one identity per member",
		    had->uid != uid ? "uid" : "gid", e->member, e->allocation, had->uid, had->gid);
		pthread_mutex_unlock(&c->lock);
		return agent_answer_error(ISO_E_CONFLICT, why);
	}
	/* one identity, one tenant's VNI: admitted to a member of another
	 * VNI on this node, it would reach both (the verifier's shared_vni) */
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].vni == e->cxi_vni || (c->v[i].uid != uid && c->v[i].gid != gid))
			continue;
		snprintf(why, sizeof(why),
		         "%s: %u is already admitted to another tenant's VNI on this node: one "
		         "identity, one tenant's VNI",
		         c->v[i].uid == uid ? "uid" : "gid", c->v[i].uid == uid ? uid : gid);
		pthread_mutex_unlock(&c->lock);
		return agent_answer_error(ISO_E_CONFLICT, why);
	}
	if (iso_agent_cxi_ensure(c->x, e->cxi_vni, uid, gid, &svc, &err) < 0) {
		snprintf(why, sizeof(why), "%s%s%s", err.field, err.field[0] ? ": " : "",
		         err.message);
		pthread_mutex_unlock(&c->lock);
		return agent_answer_error(err.code, why);
	}
	if (!had) {
		struct agent_cxi_admit *a = &c->v[c->n];
		if (c->n == ISO_AGENT_MEMBERS_MAX) {
			pthread_mutex_unlock(&c->lock);
			return agent_answer_error(ISO_E_NO_CAPACITY, "member: too many admitted");
		}
		iso_strlcpy(a->allocation, e->allocation, sizeof(a->allocation));
		a->member = e->member;
		a->vni = e->cxi_vni;
		a->uid = uid;
		a->gid = gid;
		c->n++;
		if (admitted_store(c, &err) < 0) {
			/* not kept: the next tick removes the service again */
			c->n--;
			snprintf(why, sizeof(why), "state_dir: %s", err.message);
			pthread_mutex_unlock(&c->lock);
			return agent_answer_error(ISO_E_INTERNAL, why);
		}
		iso_log(ISO_LOG_INFO, "agent.cxi_admitted",
		        "node=%s allocation=%s member=%u vni=%u uid=%u gid=%u svc_id=%u", c->node,
		        e->allocation, e->member, e->cxi_vni, uid, gid, svc);
	}
	o = json_pack("{s:s, s:i, s:I, s:I, s:I, s:I}", "allocation", e->allocation, "member",
	              (int)e->member, "vni", (json_int_t)e->cxi_vni, "uid", (json_int_t)uid, "gid",
	              (json_int_t)gid, "svc_id", (json_int_t)svc);
	pthread_mutex_unlock(&c->lock);
	if (o) {
		char dev[16];
		snprintf(dev, sizeof(dev), "cxi%u", c->cfg.dev_id);
		json_object_set_new(o, "device", json_string(dev));
	}
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}

/* ---- a pod attachment's CHECK (cni.c) ---- */

int agent_cxi_check(struct agent_cxi *c, const char *allocation, unsigned member, uint32_t vni,
                    uint32_t uid, uint32_t gid, uint32_t *svc_id, char *why, size_t size)
{
	const struct agent_cxi_admit *had;
	struct iso_error err = {0};
	int r;

	*svc_id = 0;
	pthread_mutex_lock(&c->lock);
	if ((r = ready_locked(c, why, size)) < 0) {
		pthread_mutex_unlock(&c->lock);
		return r;
	}
	had = admitted_of(c, allocation, member);
	if (!had || had->uid != uid || had->gid != gid || had->vni != vni) {
		snprintf(why, size, "member %u of %s does not admit uid %u gid %u to VNI %u",
		         member, allocation, uid, gid, vni);
		pthread_mutex_unlock(&c->lock);
		return -ENOENT;
	}
	if ((r = iso_agent_cxi_find(c->x, vni, uid, gid, svc_id, &err)) < 0)
		snprintf(why, size, "%s", err.message);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* sandboxes.c: each member's sandbox, made and removed by the agent (issue
 * 14, docs/agent.md "Sandboxes"). Level-triggered like the MIG reconcile:
 * every tick, for every member of the desired document whose GPU instances
 * (and VF) are ready, the member's sandbox must exist (its record in
 * STATE_DIR/sandboxes/<name>.json names the holder process, which
 * iso_sandbox_check finds alive or not; a missing one is made), and every
 * record of this node whose member is no longer desired is destroyed and
 * removed. The record is written before the sandbox is made (holding the
 * cores it chose) and again with the holder, so a crash at any point
 * leaves a record that the next tick finishes or removes: an agent that
 * restarts keeps the sandboxes of live members (same holder) and removes
 * those of released ones. The table the socket answers from (socket.c) is
 * filled here after each tick. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define RECORD_MAX 4096

/* ---- records ---- */

int agent_record_decode(const char *text, size_t len, struct agent_sandbox_record *out,
                        struct iso_error *err)
{
	static const char *const keys[] = {"node",       "allocation",   "member",
	                                   "holder_pid", "holder_start", "cpus",
	                                   "mems",       "io_uring",     NULL};
	json_t *doc;
	const char *node = NULL, *alloc = NULL, *cpus = NULL, *mems = NULL;
	int64_t member = 0, pid = 0, start = 0;
	bool uring = false;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = iso_json_load_object(text, len, RECORD_MAX, ISO_E_INVALID, NULL, &doc, err)) < 0)
		return r;
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "node", NULL, true, &node, err)) < 0 ||
	    (r = iso_json_get_string(doc, "allocation", NULL, true, &alloc, err)) < 0 ||
	    (r = iso_json_get_int(doc, "member", NULL, true, 0, ISO_CODEC_MEMBER_MAX, &member,
	                          err)) < 0 ||
	    (r = iso_json_get_int(doc, "holder_pid", NULL, true, 0, INT_MAX, &pid, err)) < 0 ||
	    (r = iso_json_get_int(doc, "holder_start", NULL, true, 0, INT64_MAX, &start, err)) <
	        0 ||
	    (r = iso_json_get_string(doc, "cpus", NULL, true, &cpus, err)) < 0 ||
	    (r = iso_json_get_string(doc, "mems", NULL, true, &mems, err)) < 0 ||
	    (r = iso_json_get_bool(doc, "io_uring", NULL, true, &uring, err)) < 0)
		goto out;
	r = -EINVAL;
	if (!iso_name_valid(node)) {
		iso_error_set(err, ISO_E_INVALID, "node", "node: not a node name");
		goto out;
	}
	if (iso_strlcpy(out->allocation, alloc, sizeof(out->allocation)) < 0 ||
	    snprintf(out->sb.name, sizeof(out->sb.name), AGENT_SANDBOX_NAME_FMT, alloc,
	             (unsigned)member) >= (int)sizeof(out->sb.name) ||
	    !iso_name_valid(out->sb.name) || strncmp(alloc, "a-", 2) != 0) {
		iso_error_set(err, ISO_E_INVALID, "allocation", "allocation: not an allocation id");
		goto out;
	}
	if (!iso_codec_cpus_valid(cpus) || !*cpus) {
		iso_error_set(err, ISO_E_INVALID, "cpus", "cpus: not a cpuset list");
		goto out;
	}
	if (*mems && !iso_codec_cpus_valid(mems)) {
		iso_error_set(err, ISO_E_INVALID, "mems", "mems: not a node list");
		goto out;
	}
	iso_strlcpy(out->node, node, sizeof(out->node));
	iso_strlcpy(out->cpus, cpus, sizeof(out->cpus));
	iso_strlcpy(out->mems, mems, sizeof(out->mems));
	out->member = (unsigned)member;
	out->sb.holder_pid = (int)pid;
	out->sb.holder_start = (unsigned long long)start;
	out->io_uring = uring;
	r = 0;
out:
	json_decref(doc);
	if (r < 0)
		memset(out, 0, sizeof(*out));
	return r;
}

static int record_path(const char *dir, const char *name, char *buf, size_t size,
                       struct iso_error *err)
{
	if (snprintf(buf, size, "%s/%s.json", dir, name) >= (int)size)
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	return 0;
}

int agent_record_load(const char *dir, const char *name, struct agent_sandbox_record *out,
                      struct iso_error *err)
{
	char path[PATH_MAX], buf[RECORD_MAX + 1];
	_cleanup_fclose_ FILE *f = NULL;
	size_t n;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = record_path(dir, name, path, sizeof(path), err)) < 0)
		return r;
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? -ENOENT
		                       : iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s",
		                                       path, strerror(errno));
	n = fread(buf, 1, sizeof(buf), f);
	if (agent_record_decode(buf, n, out, err) < 0) {
		char msg[ISO_ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err ? err->message : "");
		return iso_error_set(err, ISO_E_INVALID, err ? err->field : "", "%s: %s", path,
		                     msg);
	}
	if (strcmp(out->sb.name, name) != 0)
		return iso_error_set(err, ISO_E_INVALID, "allocation",
		                     "%s: names another member (%s)", path, out->sb.name);
	return 0;
}

int agent_record_store(const char *dir, const struct agent_sandbox_record *rec,
                       struct iso_error *err)
{
	char path[PATH_MAX];
	json_t *o;
	char *text;
	int r;

	if ((r = record_path(dir, rec->sb.name, path, sizeof(path), err)) < 0)
		return r;
	o = json_pack("{s:s, s:s, s:i, s:i, s:I, s:s, s:s, s:b}", "node", rec->node, "allocation",
	              rec->allocation, "member", (int)rec->member, "holder_pid", rec->sb.holder_pid,
	              "holder_start", (json_int_t)rec->sb.holder_start, "cpus", rec->cpus, "mems",
	              rec->mems, "io_uring", rec->io_uring);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	r = iso_file_write_atomic(path, text, strlen(text), 0600, false, err);
	free(text);
	return r;
}

static int record_remove(const char *dir, const char *name, struct iso_error *err)
{
	char path[PATH_MAX];
	int r;

	if ((r = record_path(dir, name, path, sizeof(path), err)) < 0)
		return r;
	if (unlink(path) < 0 && errno != ENOENT)
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s", path,
		                     strerror(errno));
	return 0;
}

/* Every record in dir (malloc'd); a file that is not a record is logged and
 * left alone (it holds no cores and names no sandbox we could find). */
static int records_list(const char *dir, struct agent_sandbox_record **out, size_t *n,
                        struct iso_error *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct agent_sandbox_record *v = NULL;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s", dir,
		                     strerror(errno));
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char name[ISO_NAME_MAX];
		struct iso_error e = {0};

		if (len <= 5 || len - 5 >= sizeof(name) ||
		    strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		memcpy(name, de->d_name, len - 5);
		name[len - 5] = '\0';
		if (*n == cap) {
			struct agent_sandbox_record *nv;
			cap = cap ? cap * 2 : 16;
			if (!(nv = realloc(v, cap * sizeof(*v)))) {
				free(v);
				closedir(d);
				return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
			}
			v = nv;
		}
		if (agent_record_load(dir, name, &v[*n], &e) < 0) {
			iso_log(ISO_LOG_ERR, "agent.sandbox_record_bad", "field=%s msg=\"%s\"",
			        e.field, e.message);
			continue;
		}
		(*n)++;
	}
	closedir(d);
	*out = v;
	return 0;
}

/* ---- the table ---- */

static int preload(struct agent_sandboxes *s, struct iso_error *err);

int agent_sandboxes_init(struct agent_sandboxes *s, const char *state_dir, bool real,
                         const char *cgroup_root, const struct agent_host_roots *roots,
                         struct iso_error *err)
{
	int r;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->work, NULL);
	s->overlay_linger.hold_ns = (uint64_t)AGENT_OVERLAY_LINGER_MS * 1000000u;
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->ticked_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	pthread_mutex_init(&s->cni_http_lock, NULL);
	pthread_cond_init(&s->cni_http_cond, NULL);
	s->real = real;
	s->roots = *roots;
	s->rdma_hca_handles = AGENT_RDMA_HCA_HANDLES;
	s->cni_sm_wait_ms = AGENT_CNI_SM_WAIT_S * 1000;
	s->rdma_hca_objects = AGENT_RDMA_HCA_OBJECTS;
	if (!(s->tombs = calloc(AGENT_TOMBSTONES, sizeof(*s->tombs))) ||
	    !(s->ticked = calloc(ISO_AGENT_NODES_MAX, sizeof(*s->ticked))))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	iso_strlcpy(s->state_root, state_dir, sizeof(s->state_root));
	if (snprintf(s->dir, sizeof(s->dir), "%s/%s", state_dir, AGENT_SANDBOX_DIR) >=
	    (int)sizeof(s->dir))
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	if (mkdir(s->dir, 0700) < 0 && errno != EEXIST)
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "%s: %s", s->dir,
		                     strerror(errno));
	if (real && (r = iso_cgroup_open(cgroup_root, &s->cg, err)) < 0)
		return r;
	return preload(s, err);
}

void agent_sandboxes_free(struct agent_sandboxes *s)
{
	agent_cni_drain(s);
	agent_views_free(s);
	pthread_cond_destroy(&s->ticked_cond);
	pthread_cond_destroy(&s->cni_http_cond);
	pthread_mutex_destroy(&s->cni_http_lock);
	free(s->entries);
	free(s->tombs);
	free(s->ticked);
	s->entries = NULL;
	s->tombs = NULL;
	s->ticked = NULL;
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->work);
}

/* tenant and key "" when only the record is known (a destroy): the
 * table's entry, published after, fills them in. */
static void tombstone_locked(struct agent_sandboxes *s, const char *alloc, unsigned member,
                             const char *tenant, const char *key)
{
	struct agent_tombstone *t;

	for (size_t i = 0; i < s->n_tombs; i++)
		if (s->tombs[i].member == member && strcmp(s->tombs[i].allocation, alloc) == 0) {
			if (!s->tombs[i].tenant[0] && tenant[0]) {
				iso_strlcpy(s->tombs[i].tenant, tenant, sizeof(s->tombs[i].tenant));
				iso_strlcpy(s->tombs[i].key, key, sizeof(s->tombs[i].key));
			}
			return;
		}
	t = &s->tombs[s->tomb_next];
	iso_strlcpy(t->allocation, alloc, sizeof(t->allocation));
	t->member = member;
	iso_strlcpy(t->tenant, tenant, sizeof(t->tenant));
	iso_strlcpy(t->key, key, sizeof(t->key));
	s->tomb_next = (s->tomb_next + 1) % AGENT_TOMBSTONES;
	if (s->n_tombs < AGENT_TOMBSTONES)
		s->n_tombs++;
}

/* Replaces node's entries with v[0..n); a member that was there and is not
 * any more is remembered as released. */
static int publish(struct agent_sandboxes *s, const char *node, const struct agent_table_entry *v,
                   size_t n)
{
	size_t keep = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		const struct agent_table_entry *e = &s->entries[i];
		bool still = false;

		if (strcmp(e->node, node) != 0) {
			s->entries[keep++] = *e;
			continue;
		}
		for (size_t j = 0; j < n && !still; j++)
			still =
			    v[j].member == e->member && strcmp(v[j].allocation, e->allocation) == 0;
		if (!still)
			tombstone_locked(s, e->allocation, e->member, e->tenant, e->key);
	}
	/* this node has published: keys not found from now on are unknown */
	{
		bool seen = false;
		for (size_t i = 0; i < s->n_ticked && !seen; i++)
			seen = strcmp(s->ticked[i], node) == 0;
		if (!seen && s->n_ticked < s->nodes_expected && s->ticked)
			iso_strlcpy(s->ticked[s->n_ticked++], node, sizeof(s->ticked[0]));
	}
	s->n = keep;
	if (s->n + n > s->cap) {
		size_t cap = s->n + n + 16;
		struct agent_table_entry *ne = realloc(s->entries, cap * sizeof(*ne));
		if (!ne) {
			pthread_mutex_unlock(&s->lock);
			return -ENOMEM;
		}
		s->entries = ne;
		s->cap = cap;
	}
	if (n)
		memcpy(s->entries + s->n, v, n * sizeof(*v));
	s->n += n;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* The records found at start, as "not ready yet (the agent is starting)"
 * until their node's first tick says whether the member is still desired
 * (its sandbox is not handed out before that, nor called unknown). */
static int preload(struct agent_sandboxes *s, struct iso_error *err)
{
	_cleanup_free_ struct agent_sandbox_record *recs = NULL;
	_cleanup_free_ struct agent_table_entry *v = NULL;
	size_t n = 0;
	int r;

	if ((r = records_list(s->dir, &recs, &n, err)) < 0)
		return r;
	if (n == 0)
		return 0;
	if (!(v = calloc(n, sizeof(*v))))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		iso_strlcpy(v[i].node, recs[i].node, sizeof(v[i].node));
		iso_strlcpy(v[i].allocation, recs[i].allocation, sizeof(v[i].allocation));
		v[i].member = recs[i].member;
		iso_strlcpy(v[i].reason, "the agent is starting", sizeof(v[i].reason));
	}
	pthread_mutex_lock(&s->lock);
	s->entries = ISO_TAKE(v);
	s->n = s->cap = n;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int agent_sandboxes_lookup(struct agent_sandboxes *s, const char *allocation, unsigned member,
                           struct agent_table_entry *out, char *reason, size_t size)
{
	int r = -ENOENT;

	snprintf(reason, size, "not on this node");
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		const struct agent_table_entry *e = &s->entries[i];
		if (e->member != member || strcmp(e->allocation, allocation) != 0)
			continue;
		if (e->ready) {
			*out = *e;
			r = 0;
		} else {
			snprintf(reason, size, "not ready yet (%s)", e->reason);
			r = -EAGAIN;
		}
		goto out;
	}
	for (size_t i = 0; i < s->n_tombs; i++)
		if (s->tombs[i].member == member &&
		    strcmp(s->tombs[i].allocation, allocation) == 0) {
			snprintf(reason, size, "released");
			break;
		}
out:
	pthread_mutex_unlock(&s->lock);
	if (r == 0)
		reason[0] = '\0';
	return r;
}

int agent_sandboxes_member(struct agent_sandboxes *s, const char *allocation, unsigned member,
                           struct agent_table_entry *out, char *reason, size_t size)
{
	int r = -ENOENT;

	snprintf(reason, size, "not on this node");
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n && r < 0; i++)
		if (s->entries[i].member == member &&
		    strcmp(s->entries[i].allocation, allocation) == 0) {
			*out = s->entries[i];
			r = 0;
		}
	for (size_t i = 0; r < 0 && i < s->n_tombs; i++)
		if (s->tombs[i].member == member &&
		    strcmp(s->tombs[i].allocation, allocation) == 0) {
			snprintf(reason, size, "released");
			break;
		}
	pthread_mutex_unlock(&s->lock);
	if (r == 0)
		reason[0] = '\0';
	return r;
}

int agent_sandboxes_lookup_key(struct agent_sandboxes *s, const char *tenant, const char *key,
                               struct agent_table_entry *out, char *reason, size_t size)
{
	const struct agent_table_entry *best = NULL;
	int r = -ENOENT;

	snprintf(reason, size, "no allocation with key %s for tenant %s on this node", key, tenant);
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		const struct agent_table_entry *e = &s->entries[i];
		if (e->key[0] && strcmp(e->key, key) == 0 && strcmp(e->tenant, tenant) == 0 &&
		    (!best || e->member < best->member))
			best = e;
	}
	if (best && best->member_ready) {
		*out = *best;
		r = 0;
	} else if (best) {
		snprintf(reason, size, "not ready yet (%s)", best->member_reason);
		r = -EAGAIN;
	} else if (s->n_ticked < s->nodes_expected) {
		snprintf(reason, size, "not ready yet (the agent is starting)");
		r = -EAGAIN;
	} else {
		for (size_t i = 0; i < s->n_tombs; i++)
			if (s->tombs[i].key[0] && strcmp(s->tombs[i].key, key) == 0 &&
			    strcmp(s->tombs[i].tenant, tenant) == 0) {
				snprintf(reason, size, "released");
				break;
			}
	}
	pthread_mutex_unlock(&s->lock);
	if (r == 0)
		reason[0] = '\0';
	return r;
}

/* ---- the tick ---- */

static bool same_member(const char *a1, unsigned m1, const char *a2, unsigned m2)
{
	return m1 == m2 && strcmp(a1, a2) == 0;
}

static bool desired(const struct iso_agent_desired *d, const char *alloc, unsigned member)
{
	for (size_t i = 0; i < d->n_members; i++)
		if (same_member(d->members[i].allocation, d->members[i].member, alloc, member))
			return true;
	return false;
}

/* Are the member's GPU instances and VF ready in this tick's status? ""
 * when they are, else why not. */
static const char *gate(const struct iso_agent_desired *d, const json_t *status,
                        const struct iso_agent_member_want *m)
{
	json_t *insts = json_object_get(status, "instances"), *vfs = json_object_get(status, "vfs");
	size_t i;
	json_t *it;

	json_array_foreach (insts, i, it) {
		const char *a = json_string_value(json_object_get(it, "allocation"));
		json_int_t mem = json_integer_value(json_object_get(it, "member"));
		if (a && same_member(a, (unsigned)mem, m->allocation, m->member) &&
		    !json_is_true(json_object_get(it, "ready")))
			return "waiting for its GPU instances";
	}
	for (size_t v = 0; v < d->n_vfs; v++) {
		const struct iso_agent_vf_want *w = &d->vfs[v];
		bool mine = false, ready = false;

		for (unsigned k = 0; k < w->n_members && !mine; k++)
			mine = same_member(w->members[k].allocation, w->members[k].member,
			                   m->allocation, m->member);
		if (!mine)
			continue;
		json_array_foreach (vfs, i, it)
			if (json_integer_value(json_object_get(it, "index")) ==
			    (json_int_t)w->index)
				ready = json_is_true(json_object_get(it, "ready"));
		if (!ready)
			return "waiting for its VF";
	}
	return "";
}

/* The member's MIG instances (for its capability nodes) and the PCI
 * address of its first GPU (for its cores' NUMA node). */
static size_t member_slices(struct iso_gpu *g, const struct iso_agent_desired *d,
                            const struct iso_agent_member_want *m, struct agent_gpu_slice *out,
                            size_t max, char *pci, size_t pci_size)
{
	_cleanup_free_ struct iso_gpu_info *gv = NULL;
	struct iso_error e = {0};
	size_t ng = 0, n = 0;

	pci[0] = '\0';
	if (g)
		g->ops->list_gpus(g, &gv, &ng, &e);
	for (size_t w = 0; w < d->n_wants && n < max; w++) {
		const struct iso_agent_want *want = &d->wants[w];
		_cleanup_free_ struct iso_gpu_instance *v = NULL;
		size_t ni = 0;
		bool whole = strcmp(want->profile, "whole") == 0;

		if (!same_member(want->allocation, want->member, m->allocation, m->member))
			continue;
		out[n] = (struct agent_gpu_slice){want->gpu, -1, -1};
		if (g && g->ops->list_instances(g, want->gpu, &v, &ni, &e) == 0)
			for (size_t i = 0; i < ni; i++)
				if (v[i].start == want->start &&
				    (whole || strcmp(v[i].profile, want->profile) == 0)) {
					out[n].gi = v[i].gi_id;
					out[n].ci = v[i].ci_id;
				}
		if (!pci[0])
			for (size_t i = 0; i < ng; i++)
				if (gv[i].index == want->gpu)
					iso_strlcpy(pci, gv[i].pci_bus_id, pci_size);
		n++;
	}
	return n;
}

static size_t member_vfs(const struct iso_agent_desired *d, const struct iso_agent_member_want *m,
                         struct agent_vf_ref *out, size_t max)
{
	size_t n = 0;

	for (size_t v = 0; v < d->n_vfs && n < max; v++)
		for (unsigned k = 0; k < d->vfs[v].n_members; k++)
			if (same_member(d->vfs[v].members[k].allocation,
			                d->vfs[v].members[k].member, m->allocation, m->member)) {
				out[n++] = (struct agent_vf_ref){d->vfs[v].device, d->vfs[v].index};
				break;
			}
	return n;
}

/* The decision table of docs/agent.md "Sandboxes" (RDMA). */
void agent_rdma_plan(enum iso_rdma_netns_mode mode, bool rdma_controller, bool has_overlay,
                     bool has_vf, const char *rdma_device, struct agent_rdma_plan *out)
{
	bool ib = has_vf && !has_overlay, dev = rdma_device && *rdma_device;

	memset(out, 0, sizeof(*out));
	out->new_netns = has_overlay || (ib && mode == ISO_RDMA_NETNS_EXCLUSIVE);
	out->move = ib && mode == ISO_RDMA_NETNS_EXCLUSIVE && dev;
	out->limit = has_vf && dev && rdma_controller;
	out->no_controller = has_vf && dev && !rdma_controller;
	/* exclusive mode: a device left on the host is one the member's
	 * namespace cannot use, a sandbox without its RDMA */
	if (ib && mode == ISO_RDMA_NETNS_EXCLUSIVE && !dev)
		out->refuse = "its VF has no RDMA device on the host to move into its namespace";
}

int agent_member_rdma(struct agent_sandboxes *s, const struct agent_vf_ref *vfs, size_t nv,
                      bool has_overlay, struct agent_rdma_plan *plan, char rdev[ISO_RDMA_NAME_MAX],
                      struct iso_cgroup_rdma *lim, struct iso_error *err)
{
	int r;

	rdev[0] = '\0';
	/* its VF's RDMA device (a member uses one VF per node) */
	if (nv > 0 && (r = agent_vf_rdma_device(&s->roots, &vfs[0], rdev, err)) < 0)
		return r;
	agent_rdma_plan(s->rdma_mode, s->cg.controllers & ISO_CGROUP_RDMA, has_overlay, nv > 0,
	                rdev, plan);
	if (plan->refuse)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "rdma", "%s (VF %u of %s)",
		                     plan->refuse, vfs[0].index, vfs[0].device);
	if (plan->no_controller && !s->rdma_nocg_logged) {
		s->rdma_nocg_logged = true;
		iso_log(ISO_LOG_WARN, "agent.rdma_no_controller",
		        "cgroup_root=%s msg=\"no rdma cgroup controller: members' rdma.max is not "
		        "set (logged once)\"",
		        s->cg.root);
	}
	*lim = (struct iso_cgroup_rdma){rdev, s->rdma_hca_handles, s->rdma_hca_objects};
	return 0;
}

/* In exclusive mode, what the sandbox's namespace holds goes back to the
 * host before the sandbox goes, so that the VF serves the next member (the
 * kernel would also move it back when the namespace dies, later, when its
 * last reference goes). A failure is logged: the destroy goes on. */
static void rdma_give_back(struct agent_sandboxes *s, const char *node,
                           const struct iso_sandbox *sb)
{
	struct iso_error e = {0};
	char ns[64];
	unsigned moved = 0;

	if (s->rdma_mode != ISO_RDMA_NETNS_EXCLUSIVE || sb->holder_pid <= 0 ||
	    iso_sandbox_check(sb, &e) < 0)
		return;
	snprintf(ns, sizeof(ns), "/proc/%d/ns/net", sb->holder_pid);
	if (iso_rdma_dev_move_all(ns, NULL, &moved, &e) < 0)
		iso_log(ISO_LOG_WARN, "agent.rdma_give_back_failed",
		        "node=%s sandbox=%s field=%s msg=\"%s\"", node, sb->name, e.field,
		        e.message);
	else if (moved)
		iso_log(ISO_LOG_INFO, "agent.rdma_given_back", "node=%s sandbox=%s devices=%u",
		        node, sb->name, moved);
}

int agent_rdma_keep_in(struct agent_sandboxes *s, const struct agent_vf_ref *vfs, size_t nv,
                       bool has_overlay, const struct iso_sandbox *sb, struct iso_error *err)
{
	char rdev[ISO_RDMA_NAME_MAX], nsp[64];
	int r;

	if (s->rdma_mode != ISO_RDMA_NETNS_EXCLUSIVE || nv == 0 || has_overlay)
		return 0;
	/* in exclusive mode the host's sysfs lists only the devices the host
	 * holds: not seen there, it is in a namespace (the member's) */
	if ((r = agent_vf_rdma_device(&s->roots, &vfs[0], rdev, err)) <= 0)
		return r;
	snprintf(nsp, sizeof(nsp), "/proc/%d/ns/net", sb->holder_pid);
	return iso_rdma_dev_move(NULL, rdev, nsp, err);
}

/* Makes rec's sandbox (rec->cpus chosen) and writes the record with its
 * holder. */
static int make(struct agent_sandboxes *s, struct iso_gpu *g, const struct iso_agent_desired *d,
                const struct iso_agent_member_want *m, struct agent_sandbox_record *rec,
                struct iso_error *err)
{
	struct agent_gpu_slice slices[ISO_AGENT_MAX_GPUS];
	struct agent_vf_ref vfs[8];
	char devs[AGENT_DEVICES_MAX][AGENT_DEV_PATH], pci[ISO_GPU_PCI_MAX];
	const char *paths[AGENT_DEVICES_MAX];
	size_t ns, nv, nd;
	struct iso_sandbox sb;
	int r;

	char rdev[ISO_RDMA_NAME_MAX] = "";
	struct agent_rdma_plan plan;

	ns = member_slices(g, d, m, slices, ISO_ARRAY_SIZE(slices), pci, sizeof(pci));
	nv = member_vfs(d, m, vfs, ISO_ARRAY_SIZE(vfs));
	if ((r = agent_sandbox_devices(&s->roots, slices, ns, vfs, nv, devs, &nd, err)) < 0)
		return r;
	struct iso_cgroup_rdma rlim;
	if ((r = agent_member_rdma(s, vfs, nv, m->has_overlay, &plan, rdev, &rlim, err)) < 0)
		return r;
	for (size_t i = 0; i < nd; i++)
		paths[i] = devs[i];
	struct iso_sandbox_spec spec = {
	    .name = rec->sb.name,
	    .limits = {.cpus = rec->cpus,
	               .mems = rec->mems[0] ? rec->mems : NULL,
	               .memory_max = (int64_t)(m->memory_mib * 1024 * 1024),
	               .pids_max = AGENT_SANDBOX_PIDS,
	               .filter_devices = true,
	               .rdma = plan.limit ? &rlim : NULL,
	               .n_rdma = plan.limit ? 1 : 0},
	    .device_paths = paths,
	    .n_device_paths = nd,
	    .new_netns = plan.new_netns,
	};
	if ((r = iso_sandbox_create(&s->cg, &spec, &sb, err)) < 0)
		return r;
	if (plan.move) {
		char nsp[64];
		snprintf(nsp, sizeof(nsp), "/proc/%d/ns/net", sb.holder_pid);
		if ((r = iso_rdma_dev_move(NULL, rdev, nsp, err)) < 0) {
			struct iso_error e2 = {0};
			iso_sandbox_destroy(&s->cg, &sb, &e2);
			return r;
		}
	}
	rec->sb = sb;
	if ((r = agent_record_store(s->dir, rec, err)) < 0) {
		struct iso_error e2 = {0};
		/* not findable after a restart: undo it */
		iso_sandbox_destroy(&s->cg, &sb, &e2);
		return r;
	}
	return 0;
}

static void entry_status(json_t *arr, const struct agent_table_entry *e)
{
	struct iso_agent_sandbox o = {.member = (int)e->member, .ready = e->ready};

	iso_strlcpy(o.allocation, e->allocation, sizeof(o.allocation));
	if (e->ready) {
		iso_strlcpy(o.cgroup, e->sb.name, sizeof(o.cgroup));
		iso_strlcpy(o.cpus, e->cpus, sizeof(o.cpus));
	}
	iso_codec_reason_copy(o.reason, e->reason);
	json_array_append_new(arr, iso_codec_status_sandbox_encode(&o));
}

/* Destroys the sandboxes of this node's records whose member is gone. */
static void remove_released(struct agent_sandboxes *s, const char *node,
                            const struct iso_agent_desired *d, struct agent_sandbox_record *recs,
                            size_t *n, struct agent_sandbox_tick *tick)
{
	size_t keep = 0;

	for (size_t i = 0; i < *n; i++) {
		struct agent_sandbox_record *rec = &recs[i];
		struct iso_error e = {0};

		if (strcmp(rec->node, node) != 0 || desired(d, rec->allocation, rec->member)) {
			recs[keep++] = *rec;
			continue;
		}
		rdma_give_back(s, node, &rec->sb);
		if (iso_sandbox_destroy(&s->cg, &rec->sb, &e) < 0 ||
		    record_remove(s->dir, rec->sb.name, &e) < 0) {
			tick->failed++;
			iso_log(ISO_LOG_WARN, "agent.sandbox_destroy_failed",
			        "node=%s sandbox=%s field=%s msg=\"%s\"", node, rec->sb.name,
			        e.field, e.message);
			recs[keep++] = *rec; /* again next tick; its cores stay taken */
			continue;
		}
		tick->destroyed++;
		iso_log(ISO_LOG_INFO, "agent.sandbox_destroyed", "node=%s sandbox=%s holder=%d",
		        node, rec->sb.name, rec->sb.holder_pid);
		pthread_mutex_lock(&s->lock);
		tombstone_locked(s, rec->allocation, rec->member, "", "");
		pthread_mutex_unlock(&s->lock);
	}
	*n = keep;
}

/* The entry's fields for the (tenant, key) lookup: tenant, key, the
 * UUIDs of its instances in this tick's status (in the status's order),
 * its InfiniBand VF and the tenant's P_Key. UUIDs that would not fit make
 * it not ready rather than cut the list. */
static void member_lookup_fields(const struct iso_agent_desired *d, const json_t *status,
                                 const struct iso_agent_member_want *m, struct agent_table_entry *e)
{
	json_t *insts = json_object_get(status, "instances"), *it;
	size_t i, len = 0;

	iso_strlcpy(e->tenant, m->tenant, sizeof(e->tenant));
	iso_strlcpy(e->key, m->key, sizeof(e->key));
	e->cxi_vni = m->has_cxi ? m->cxi_vni : 0;
	json_array_foreach (insts, i, it) {
		const char *a = json_string_value(json_object_get(it, "allocation"));
		const char *u = json_string_value(json_object_get(it, "uuid"));
		json_int_t mem = json_integer_value(json_object_get(it, "member"));
		int n;

		if (!a || !u || !*u || !same_member(a, (unsigned)mem, m->allocation, m->member))
			continue;
		n = snprintf(e->cuda + len, sizeof(e->cuda) - len, "%s%s", len ? "," : "", u);
		if (n < 0 || (size_t)n >= sizeof(e->cuda) - len) {
			e->cuda[len] = '\0';
			break;
		}
		len += (size_t)n;
	}
	for (size_t v = 0; v < d->n_vfs && !e->has_vf; v++) {
		const struct iso_agent_vf_want *w = &d->vfs[v];
		if (w->vlan) /* RoCE: no P_Key */
			continue;
		for (unsigned k = 0; k < w->n_members && !e->has_vf; k++)
			if (same_member(w->members[k].allocation, w->members[k].member,
			                m->allocation, m->member)) {
				e->has_vf = true;
				iso_strlcpy(e->vf_device, w->device, sizeof(e->vf_device));
				e->vf_index = w->index;
				e->pkey = w->pkey;
			}
	}
}

/* One member: its entry, its sandbox made when due. */
static void one_member(struct agent_sandboxes *s, struct iso_gpu *g, const char *node,
                       const struct iso_agent_desired *d, const json_t *status,
                       const struct iso_agent_member_want *m, struct agent_sandbox_record *recs,
                       size_t n_recs, struct agent_cpumask *taken, struct agent_table_entry *e,
                       struct agent_sandbox_tick *tick)
{
	struct agent_sandbox_record fresh = {0}, *rec = NULL;
	struct iso_error err = {0};
	const char *why;
	char pci[ISO_GPU_PCI_MAX];
	struct agent_gpu_slice sl[1];

	memset(e, 0, sizeof(*e));
	iso_strlcpy(e->node, node, sizeof(e->node));
	iso_strlcpy(e->allocation, m->allocation, sizeof(e->allocation));
	e->member = m->member;
	e->io_uring = m->io_uring;
	member_lookup_fields(d, status, m, e);
	if (!s->real) {
		iso_strlcpy(e->reason, "sandboxes are off on this node", sizeof(e->reason));
		/* no sandbox to wait for: ready for a plugin once its GPU
		 * instances and VF are */
		why = gate(d, status, m);
		e->member_ready = !*why;
		iso_strlcpy(e->member_reason, why, sizeof(e->member_reason));
		return;
	}
	for (size_t i = 0; i < n_recs && !rec; i++)
		if (same_member(recs[i].allocation, recs[i].member, m->allocation, m->member))
			rec = &recs[i];
	if (rec && strcmp(rec->node, node) != 0) {
		snprintf(e->reason, sizeof(e->reason), "its sandbox is node %s's", rec->node);
		return;
	}
	if (rec && rec->sb.holder_pid > 0 && iso_sandbox_check(&rec->sb, &err) == 0) {
		struct agent_vf_ref vfs[8];
		size_t nv = member_vfs(d, m, vfs, ISO_ARRAY_SIZE(vfs));
		if (agent_rdma_keep_in(s, vfs, nv, m->has_overlay, &rec->sb, &err) < 0) {
			char msg[ISO_AGENT_REASON_MAX];
			tick->failed++;
			snprintf(msg, sizeof(msg), "rdma: %s", err.message);
			iso_codec_reason_copy(e->reason, msg);
			return;
		}
		goto ready;
	}
	why = gate(d, status, m);
	if (*why) {
		iso_strlcpy(e->reason, why, sizeof(e->reason));
		return;
	}
	if (!rec) {
		rec = &fresh;
		iso_strlcpy(rec->node, node, sizeof(rec->node));
		iso_strlcpy(rec->allocation, m->allocation, sizeof(rec->allocation));
		rec->member = m->member;
		rec->io_uring = m->io_uring;
		snprintf(rec->sb.name, sizeof(rec->sb.name), AGENT_SANDBOX_NAME_FMT, m->allocation,
		         m->member);
		member_slices(g, d, m, sl, 1, pci, sizeof(pci));
		if (agent_cpuset_choose(s->roots.sysfs_root, pci[0] ? pci : NULL,
		                        m->cpus ? m->cpus : 1, taken, rec->cpus, sizeof(rec->cpus),
		                        rec->mems, sizeof(rec->mems), &err) < 0) {
			iso_codec_reason_copy(e->reason, err.message);
			return;
		}
		/* the cores are this member's from now on, also after a crash */
		if (agent_record_store(s->dir, rec, &err) < 0) {
			tick->failed++;
			iso_codec_reason_copy(e->reason, err.message);
			return;
		}
		struct agent_cpumask mine;
		if (agent_cpumask_parse(rec->cpus, &mine) == 0)
			for (size_t i = 0; i < ISO_ARRAY_SIZE(mine.w); i++)
				taken->w[i] |= mine.w[i];
	} else if (rec->sb.holder_pid > 0) {
		/* its holder died (or the host rebooted): what is left goes, a
		 * new one is made on the same cores */
		struct iso_error e2 = {0};
		iso_log(ISO_LOG_WARN, "agent.sandbox_lost", "node=%s sandbox=%s holder=%d", node,
		        rec->sb.name, rec->sb.holder_pid);
		if (iso_sandbox_destroy(&s->cg, &rec->sb, &e2) < 0) {
			tick->failed++;
			snprintf(e->reason, sizeof(e->reason), "cannot remove what is left: %.200s",
			         e2.message);
			return;
		}
	}
	if (make(s, g, d, m, rec, &err) < 0) {
		char msg[ISO_AGENT_REASON_MAX];
		tick->failed++;
		snprintf(msg, sizeof(msg), "sandbox: %s%s%s", err.field, err.field[0] ? ": " : "",
		         err.message);
		iso_codec_reason_copy(e->reason, msg);
		iso_log(ISO_LOG_WARN, "agent.sandbox_failed", "node=%s sandbox=%s msg=\"%s\"", node,
		        rec->sb.name, msg);
		return;
	}
	tick->created++;
	iso_log(ISO_LOG_INFO, "agent.sandbox_created", "node=%s sandbox=%s holder=%d cpus=%s", node,
	        rec->sb.name, rec->sb.holder_pid, rec->cpus);
ready:
	e->ready = true;
	e->sb = rec->sb;
	iso_strlcpy(e->cpus, rec->cpus, sizeof(e->cpus));
}

int agent_sandboxes_reconcile(struct agent_sandboxes *s, struct iso_gpu *g, const char *node,
                              const struct iso_agent_desired *d, json_t *status,
                              struct agent_sandbox_tick *tick, struct iso_error *err)
{
	_cleanup_free_ struct agent_sandbox_record *recs = NULL;
	_cleanup_free_ struct agent_attachment *att = NULL;
	_cleanup_free_ struct agent_attach_result *att_res = NULL;
	size_t n_att = 0;
	_cleanup_free_ struct agent_table_entry *entries =
	    calloc(d->n_members ? d->n_members : 1, sizeof(*entries));
	struct agent_cpumask taken = {0};
	json_t *arr = json_array();
	size_t n_recs = 0;
	int r = 0;

	memset(tick, 0, sizeof(*tick));
	if (!entries || !arr) {
		json_decref(arr);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	pthread_mutex_lock(&s->work);
	if (s->real) {
		if ((r = records_list(s->dir, &recs, &n_recs, err)) < 0)
			goto out;
		remove_released(s, node, d, recs, &n_recs, tick);
		for (size_t i = 0; i < n_recs; i++) {
			struct agent_cpumask m;
			if (agent_cpumask_parse(recs[i].cpus, &m) == 0)
				for (size_t k = 0; k < ISO_ARRAY_SIZE(m.w); k++)
					taken.w[k] |= m.w[k];
		}
	}
	for (size_t i = 0; i < d->n_members; i++) {
		const struct iso_agent_member_want *m = &d->members[i];
		if (agent_cni_key_is_attachment(m->key)) {
			/* a pod's attachment (cni.c): the pod is the runtime's
			 * sandbox; the overlay pass below plugs its netns in */
			memset(&entries[i], 0, sizeof(entries[i]));
			iso_strlcpy(entries[i].node, node, sizeof(entries[i].node));
			iso_strlcpy(entries[i].allocation, m->allocation,
			            sizeof(entries[i].allocation));
			entries[i].member = m->member;
			member_lookup_fields(d, status, m, &entries[i]);
			iso_strlcpy(entries[i].reason, "waiting for the pod's attachment",
			            sizeof(entries[i].reason));
			continue;
		}
		one_member(s, g, node, d, status, m, recs, n_recs, &taken, &entries[i], tick);
	}
	{
		struct iso_error ae = {0};
		if (agent_attachments_list(s->state_root, node, &att, &n_att, &ae) < 0)
			iso_log(ISO_LOG_WARN, "agent.cni_records_failed", "node=%s msg=\"%s\"",
			        node, ae.message);
		/* each attachment's outcome: an ADD waiting for this pass answers
		 * from it (cni.c) instead of running a second one */
		agent_attachments_resolve(d, att, n_att);
		if (n_att)
			att_res = calloc(n_att, sizeof(*att_res));
		/* (off mode, the last attachment gone: on until the pass found the
		 * node clean, so that what it left, a lingering bridge, goes) */
		if (s->real || n_att || (s->overlay_touched && !s->overlay_clean)) {
			s->overlay_touched = true;
			agent_overlay_tick(node, d, entries, att, n_att, att_res, NULL, status,
			                   &s->overlay_clean, &s->overlay_linger);
		}
	}
	/* real mode: a plugin starts a member once its sandbox is there */
	for (size_t i = 0; s->real && i < d->n_members; i++) {
		entries[i].member_ready = entries[i].ready;
		iso_strlcpy(entries[i].member_reason, entries[i].reason,
		            sizeof(entries[i].member_reason));
	}
	/* (a pod attachment's member has no sandbox to report) */
	for (size_t i = 0; s->real && i < d->n_members; i++)
		if (!agent_cni_key_is_attachment(d->members[i].key))
			entry_status(arr, &entries[i]);
	if (publish(s, node, entries, d->n_members) < 0)
		r = iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	agent_view_store(s, node, d, att, att_res, att_res ? n_att : 0);
out:
	pthread_mutex_unlock(&s->work);
	json_object_set_new(status, "sandbox_mode", json_string(s->real ? "real" : "off"));
	json_object_set_new(status, "sandboxes", arr);
	return r;
}

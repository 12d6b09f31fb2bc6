/* cni.c: pod attachments for the CNI plugin (issue 17, docs/cni.md,
 * docs/agent.md "CNI attachments"). The plugin holds no state; the agent
 * does. A pod's attachment is one record, STATE_DIR/cni/<hash>.json, keyed
 * by (node, container id, ifname), written before anything else is done so
 * that a crash anywhere leaves something DEL or GC find. It becomes a member
 * of its tenant: either an allocation of its own, created at the controller
 * with the Idempotency-Key "cni:<node>:<hash>:<lease>" (one member pinned to this
 * node: retries and agent restarts make one), or a member of an existing
 * allocation of the tenant on this node (a join). The pod's interface is
 * made by the agent's overlay pass (overlay.c), from the desired document's
 * member and the record's netns, ifname and address; the tick runs the same
 * pass, so attachments are level-triggered like members' sandboxes. The
 * server side of the socket's CNI shape is here (one thread per request, so
 * a request waiting for the controller does not hold up a Slurm task's
 * lookup); the plugin's half is cni_client.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "internal.h"
#include "isostack/client.h"

#define CNI_WAIT_MS      10000 /* for the node's desired state to hold the member */
#define CNI_THREADS_MAX  256   /* requests served at once; more: try again later */
#define CNI_RECORD_MAX   8192
#define CNI_IO_TIMEOUT_S 30

/* ---- names and checks ---- */

bool agent_cni_key_is_attachment(const char *key)
{
	return key && strncmp(key, "cni:", 4) == 0;
}

/* CNI's container id: letters, digits, '_', '.', '-', starting with a
 * letter or digit (SPEC.md, "Parameters"). */
static bool container_id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= AGENT_CNI_ID_MAX)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	      (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

bool agent_cni_ifname_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= 16 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

/* 32 hex digits of BLAKE2b over (node, container id, ifname). */
static void attachment_hash(const char *node, const char *cid, const char *ifname, char out[33])
{
	unsigned char h[16];
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, sizeof(h));
	crypto_generichash_update(&st, (const unsigned char *)node, strlen(node) + 1);
	crypto_generichash_update(&st, (const unsigned char *)cid, strlen(cid) + 1);
	crypto_generichash_update(&st, (const unsigned char *)ifname, strlen(ifname) + 1);
	crypto_generichash_final(&st, h, sizeof(h));
	sodium_bin2hex(out, 33, h, sizeof(h));
}

void agent_attachment_name(const struct agent_attachment *a, char out[ISO_NAME_MAX])
{
	/* a created attachment is its allocation's member 0 (the status and
	 * the verifier see it as that member); a joined one has a name of its
	 * own beside the member it joined */
	if (!a->joined && a->allocation[0])
		snprintf(out, ISO_NAME_MAX, AGENT_SANDBOX_NAME_FMT, a->allocation, a->member);
	else
		snprintf(out, ISO_NAME_MAX, "cni-%s", a->hash);
}

/* ---- records ---- */

static int cni_dir(const char *state_root, char *buf, size_t size)
{
	return snprintf(buf, size, "%s/%s", state_root, AGENT_CNI_DIR) >= (int)size ? -ENAMETOOLONG
	                                                                            : 0;
}

int agent_attachment_decode(const char *text, size_t len, struct agent_attachment *out,
                            struct iso_error *err)
{
	static const char *const keys[] = {
	    "node",      "container_id", "ifname",   "netns",  "network", "tenant", "key",
	    "hash",      "allocation",   "member",   "joined", "address", "cpus",   "memory_mib",
	    "name",      "deleting",     "mode",     "uid",    "gid",     "ib",     "vf_index",
	    "vf_device", "vf_netdev",    "rdma_dev", NULL};
	struct {
		const char *k;
		char *dst;
		size_t size;
		bool required;
	} strs[] = {
	    {"node", out->node, sizeof(out->node), true},
	    {"container_id", out->container_id, sizeof(out->container_id), true},
	    {"ifname", out->ifname, sizeof(out->ifname), true},
	    {"netns", out->netns, sizeof(out->netns), true},
	    {"network", out->network, sizeof(out->network), true},
	    {"tenant", out->tenant, sizeof(out->tenant), true},
	    {"key", out->key, sizeof(out->key), true},
	    {"hash", out->hash, sizeof(out->hash), true},
	    {"allocation", out->allocation, sizeof(out->allocation), true},
	    {"address", out->address, sizeof(out->address), true},
	    {"name", out->alloc_name, sizeof(out->alloc_name), true},
	    {"vf_device", out->vf_device, sizeof(out->vf_device), false},
	    {"vf_netdev", out->vf_netdev, sizeof(out->vf_netdev), false},
	    {"rdma_dev", out->rdma_dev, sizeof(out->rdma_dev), false},
	};
	json_t *doc;
	int64_t member = 0, cpus = 0, mem = 0, vf = -1;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = iso_json_load_object(text, len, CNI_RECORD_MAX, ISO_E_INVALID, NULL, &doc, err)) <
	    0)
		return r;
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0)
		goto out;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(strs); i++) {
		const char *v = NULL;
		if ((r = iso_json_get_string(doc, strs[i].k, NULL, strs[i].required, &v, err)) < 0)
			goto out;
		if (iso_strlcpy(strs[i].dst, v, strs[i].size) < 0) {
			r = iso_error_set(err, ISO_E_INVALID, strs[i].k, "%s: too long", strs[i].k);
			goto out;
		}
	}
	if ((r = iso_json_get_int(doc, "member", NULL, true, 0, ISO_CODEC_MEMBER_MAX, &member,
	                          err)) < 0 ||
	    (r = iso_json_get_bool(doc, "joined", NULL, true, &out->joined, err)) < 0 ||
	    (r = iso_json_get_bool(doc, "deleting", NULL, false, &out->deleting, err)) < 0 ||
	    (r = iso_json_get_bool(doc, "ib", NULL, false, &out->ib, err)) < 0 ||
	    (r = iso_json_get_int(doc, "vf_index", NULL, false, -1, 1023, &vf, err)) < 0 ||
	    (r = iso_json_get_int(doc, "cpus", NULL, true, 0, 1024, &cpus, err)) < 0 ||
	    (r = iso_json_get_int(doc, "memory_mib", NULL, true, 0, INT64_C(1) << 40, &mem, err)) <
	        0)
		goto out;
	{
		const char *mode = NULL;
		int64_t uid = 0, gid = 0;
		if ((r = iso_json_get_string(doc, "mode", NULL, false, &mode, err)) < 0)
			goto out;
		if (mode && strcmp(mode, "slingshot") != 0 && strcmp(mode, "ethernet") != 0) {
			r = iso_error_set(err, ISO_E_INVALID, "mode",
			                  "mode: expected ethernet or slingshot");
			goto out;
		}
		out->cxi = mode && strcmp(mode, "slingshot") == 0;
		if ((r = iso_json_get_int(doc, "uid", NULL, out->cxi, 1, UINT32_MAX - 1, &uid,
		                          err)) < 0 ||
		    (r = iso_json_get_int(doc, "gid", NULL, out->cxi, 1, UINT32_MAX - 1, &gid,
		                          err)) < 0)
			goto out;
		out->uid = (uint32_t)uid;
		out->gid = (uint32_t)gid;
	}
	if (out->cxi && out->ib) {
		r = iso_error_set(err, ISO_E_INVALID, "ib", "ib: not with mode slingshot");
		goto out;
	}
	out->member = (unsigned)member;
	out->vf_index = json_object_get(doc, "vf_index") ? (int)vf : -1;
	out->cpus = (unsigned)cpus;
	out->memory_mib = (uint64_t)mem;
	r = -EINVAL;
	if (!iso_name_valid(out->node))
		iso_error_set(err, ISO_E_INVALID, "node", "node: not a node name");
	else if (!container_id_valid(out->container_id))
		iso_error_set(err, ISO_E_INVALID, "container_id",
		              "container_id: not a container id");
	else if (!agent_cni_ifname_valid(out->ifname))
		iso_error_set(err, ISO_E_INVALID, "ifname", "ifname: not an interface name");
	else if (out->netns[0] != '/')
		iso_error_set(err, ISO_E_INVALID, "netns", "netns: not an absolute path");
	else if (!iso_name_valid(out->tenant))
		iso_error_set(err, ISO_E_INVALID, "tenant", "tenant: not a tenant name");
	else if (!iso_idem_key_valid(out->key) || !agent_cni_key_is_attachment(out->key))
		iso_error_set(err, ISO_E_INVALID, "key", "key: not an attachment's key");
	else if (strlen(out->hash) != 32)
		iso_error_set(err, ISO_E_INVALID, "hash", "hash: not 32 hex digits");
	else if (out->allocation[0] && strncmp(out->allocation, "a-", 2) != 0)
		iso_error_set(err, ISO_E_INVALID, "allocation", "allocation: not an allocation id");
	else if (out->vf_netdev[0] && !agent_cni_ifname_valid(out->vf_netdev))
		iso_error_set(err, ISO_E_INVALID, "vf_netdev", "vf_netdev: not an interface name");
	else
		r = 0;
out:
	json_decref(doc);
	return r;
}

static json_t *attachment_encode(const struct agent_attachment *a)
{
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:b, s:s, s:i, s:I, "
	    "s:s, s:b, s:b, s:i, s:s, s:s, s:s}",
	    "node", a->node, "container_id", a->container_id, "ifname", a->ifname, "netns",
	    a->netns, "network", a->network, "tenant", a->tenant, "key", a->key, "hash", a->hash,
	    "allocation", a->allocation, "member", (int)a->member, "joined", a->joined, "address",
	    a->address, "cpus", (int)a->cpus, "memory_mib", (json_int_t)a->memory_mib, "name",
	    a->alloc_name, "deleting", a->deleting, "ib", a->ib, "vf_index", a->vf_index,
	    "vf_device", a->vf_device, "vf_netdev", a->vf_netdev, "rdma_dev", a->rdma_dev);

	if (o && a->cxi &&
	    (json_object_set_new(o, "mode", json_string("slingshot")) < 0 ||
	     json_object_set_new(o, "uid", json_integer(a->uid)) < 0 ||
	     json_object_set_new(o, "gid", json_integer(a->gid)) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int record_path(const char *state_root, const char *hash, char *buf, size_t size)
{
	return snprintf(buf, size, "%s/%s/%s.json", state_root, AGENT_CNI_DIR, hash) >= (int)size
	           ? -ENAMETOOLONG
	           : 0;
}

static int attachment_store(const char *state_root, const struct agent_attachment *a,
                            struct iso_error *err)
{
	char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX + 8];
	_cleanup_free_ char *text = NULL;
	json_t *o = attachment_encode(a);
	int fd;

	if (o)
		text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (!text)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if (cni_dir(state_root, dir, sizeof(dir)) < 0 ||
	    record_path(state_root, a->hash, path, sizeof(path)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s", dir,
		                     strerror(errno));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s", tmp,
		                     strerror(errno));
	size_t n = strlen(text);
	bool ok = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
	close(fd);
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s", path,
		                     strerror(errno));
	}
	return 0;
}

static int attachment_remove(const char *state_root, const char *hash, struct iso_error *err)
{
	char path[PATH_MAX];

	if (record_path(state_root, hash, path, sizeof(path)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	if (unlink(path) < 0 && errno != ENOENT)
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s", path,
		                     strerror(errno));
	return 0;
}

static int attachment_load_file(const char *path, struct agent_attachment *out,
                                struct iso_error *err)
{
	char buf[CNI_RECORD_MAX + 1];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	if (n < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "%s: %s", path, strerror(errno));
	return agent_attachment_decode(buf, (size_t)n, out, err);
}

int agent_attachments_list(const char *state_root, const char *node, struct agent_attachment **out,
                           size_t *n, struct iso_error *err)
{
	char dir[PATH_MAX];
	DIR *d;
	struct dirent *de;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (cni_dir(state_root, dir, sizeof(dir)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0
		                       : iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s",
		                                       dir, strerror(errno));
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		struct agent_attachment a;
		struct iso_error e = {0};
		size_t len = strlen(de->d_name);

		if (len != 32 + 5 || strcmp(de->d_name + 32, ".json") != 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		if (attachment_load_file(path, &a, &e) < 0) {
			iso_log(ISO_LOG_WARN, "agent.cni_record_bad", "path=%s field=%s msg=\"%s\"",
			        path, e.field, e.message);
			continue;
		}
		if (node && strcmp(a.node, node) != 0)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			void *q = realloc(*out, cap * sizeof(**out));
			if (!q) {
				closedir(d);
				free(*out);
				*out = NULL;
				*n = 0;
				return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
			}
			*out = q;
		}
		(*out)[(*n)++] = a;
	}
	closedir(d);
	return 0;
}

/* ---- the node's last desired members (the tick keeps them) ---- */

static void want_clear(struct iso_agent_member_want *w)
{
	free(w->peers);
	w->peers = NULL;
	w->n_peers = 0;
}

static int want_copy(struct iso_agent_member_want *dst, const struct iso_agent_member_want *src)
{
	*dst = *src;
	dst->peers = NULL;
	if (src->n_peers) {
		if (!(dst->peers = malloc(src->n_peers * sizeof(*src->peers))))
			return -ENOMEM;
		memcpy(dst->peers, src->peers, src->n_peers * sizeof(*src->peers));
	}
	return 0;
}

static void view_clear(struct agent_node_view *v)
{
	for (size_t i = 0; i < v->n; i++)
		want_clear(&v->members[i]);
	free(v->members);
	v->members = NULL;
	v->n = 0;
	free(v->plugged);
	v->plugged = NULL;
	v->n_plugged = 0;
	free(v->vfs);
	v->vfs = NULL;
	v->n_vfs = 0;
}

void agent_views_free(struct agent_sandboxes *s)
{
	for (size_t i = 0; i < s->n_views; i++)
		view_clear(&s->views[i]);
	free(s->views);
	s->views = NULL;
	s->n_views = 0;
}

void agent_view_store(struct agent_sandboxes *s, const char *node,
                      const struct iso_agent_desired *d, const struct agent_attachment *att,
                      const struct agent_attach_result *res, size_t n_att)
{
	struct agent_node_view nv = {0}, *v = NULL;

	iso_strlcpy(nv.node, node, sizeof(nv.node));
	if (d->n_members && !(nv.members = calloc(d->n_members, sizeof(*nv.members))))
		return;
	for (size_t i = 0; i < d->n_members; i++, nv.n++)
		if (want_copy(&nv.members[i], &d->members[i]) < 0) {
			view_clear(&nv);
			return;
		}
	size_t n_rows = 0;
	for (size_t i = 0; i < d->n_vfs; i++)
		n_rows += d->vfs[i].n_members;
	if (n_rows && !(nv.vfs = calloc(n_rows, sizeof(*nv.vfs)))) {
		view_clear(&nv);
		return;
	}
	for (size_t i = 0; i < d->n_vfs; i++)
		for (unsigned k = 0; k < d->vfs[i].n_members; k++) {
			struct agent_view_vf *r = &nv.vfs[nv.n_vfs++];
			iso_strlcpy(r->allocation, d->vfs[i].members[k].allocation,
			            sizeof(r->allocation));
			r->member = d->vfs[i].members[k].member;
			r->index = d->vfs[i].index;
			iso_strlcpy(r->device, d->vfs[i].device, sizeof(r->device));
			r->guid = d->vfs[i].guid;
			r->pkey = d->vfs[i].pkey;
		}
	/* (out of memory: none plugged, the ADDs run their own pass; an
	 * InfiniBand or Slingshot pod is never on the overlay) */
	if (n_att && res && (nv.plugged = calloc(n_att, sizeof(*nv.plugged))))
		for (size_t a = 0; a < n_att; a++) {
			struct agent_plugged *p = &nv.plugged[nv.n_plugged];
			if (!res[a].ready || att[a].deleting || att[a].cxi || att[a].ib ||
			    !att[a].allocation[0])
				continue;
			iso_strlcpy(p->hash, att[a].hash, sizeof(p->hash));
			iso_strlcpy(p->allocation, att[a].allocation, sizeof(p->allocation));
			iso_strlcpy(p->netns, att[a].netns, sizeof(p->netns));
			iso_strlcpy(p->address, att[a].address, sizeof(p->address));
			nv.n_plugged++;
		}
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_views && !v; i++)
		if (strcmp(s->views[i].node, node) == 0)
			v = &s->views[i];
	if (!v) {
		void *q = realloc(s->views, (s->n_views + 1) * sizeof(*s->views));
		if (q) {
			s->views = q;
			v = &s->views[s->n_views++];
			memset(v, 0, sizeof(*v));
		}
	}
	if (v) {
		uint64_t gen = v->generation;
		view_clear(v);
		*v = nv;
		v->generation = gen + 1;
		nv.members = NULL;
		nv.n = 0;
		nv.plugged = NULL;
		nv.n_plugged = 0;
		nv.vfs = NULL;
		nv.n_vfs = 0;
	}
	pthread_cond_broadcast(&s->ticked_cond);
	pthread_mutex_unlock(&s->lock);
	view_clear(&nv);
}

/* A copy of node's view (caller clears it); -ENOENT before its first tick. */
static int view_get_locked(struct agent_sandboxes *s, const char *node, struct agent_node_view *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < s->n_views; i++) {
		const struct agent_node_view *v = &s->views[i];
		if (strcmp(v->node, node) != 0)
			continue;
		iso_strlcpy(out->node, node, sizeof(out->node));
		out->generation = v->generation;
		if (v->n && !(out->members = calloc(v->n, sizeof(*out->members))))
			return -ENOMEM;
		for (size_t k = 0; k < v->n; k++, out->n++)
			if (want_copy(&out->members[k], &v->members[k]) < 0) {
				view_clear(out);
				return -ENOMEM;
			}
		if (v->n_vfs) {
			if (!(out->vfs = malloc(v->n_vfs * sizeof(*v->vfs)))) {
				view_clear(out);
				return -ENOMEM;
			}
			memcpy(out->vfs, v->vfs, v->n_vfs * sizeof(*v->vfs));
			out->n_vfs = v->n_vfs;
		}
		return 0;
	}
	return -ENOENT;
}

static const struct iso_agent_member_want *view_member(const struct agent_node_view *v,
                                                       const char *alloc, int member)
{
	const struct iso_agent_member_want *best = NULL;

	for (size_t i = 0; i < v->n; i++) {
		const struct iso_agent_member_want *w = &v->members[i];
		if (strcmp(w->allocation, alloc) != 0)
			continue;
		if (member >= 0 && w->member == (unsigned)member)
			return w;
		if (member < 0 && (!best || w->member < best->member))
			best = w;
	}
	return best;
}

/* Did node's last tick leave attachment a on its overlay, as a is now
 * (same allocation, netns and address)? That pass is the node-wide,
 * level-triggered one: an ADD that finds its pod there needs no pass of
 * its own. */
static bool view_plugged(struct agent_sandboxes *s, const char *node,
                         const struct agent_attachment *a)
{
	bool yes = false;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_views && !yes; i++) {
		const struct agent_node_view *v = &s->views[i];
		if (strcmp(v->node, node) != 0)
			continue;
		for (size_t k = 0; k < v->n_plugged && !yes; k++)
			yes = strcmp(v->plugged[k].hash, a->hash) == 0 &&
			      strcmp(v->plugged[k].allocation, a->allocation) == 0 &&
			      strcmp(v->plugged[k].netns, a->netns) == 0 &&
			      strcmp(v->plugged[k].address, a->address) == 0;
	}
	pthread_mutex_unlock(&s->lock);
	return yes;
}

/* ---- the overlay pass with attachments (the tick's and a request's) ---- */

void agent_attachments_resolve(const struct iso_agent_desired *d, struct agent_attachment *att,
                               size_t n_att)
{
	for (size_t a = 0; a < n_att; a++) {
		struct agent_attachment *t = &att[a];
		if (t->allocation[0] || t->joined || t->deleting || !t->key[0])
			continue;
		/* the create's own member (one member, 0), of the record's
		 * tenant: the key holds the record's random lease, so no other
		 * request made it */
		for (size_t i = 0; i < d->n_members; i++) {
			const struct iso_agent_member_want *w = &d->members[i];
			if (w->member == 0 && strcmp(w->key, t->key) == 0 &&
			    strcmp(w->tenant, t->tenant) == 0) {
				iso_strlcpy(t->allocation, w->allocation, sizeof(t->allocation));
				t->member = 0;
				break;
			}
		}
	}
}

void agent_attachment_inputs(const struct iso_agent_desired *d, const struct agent_attachment *att,
                             size_t n_att, struct iso_agent_overlay_member_in *in,
                             char (*names)[ISO_NAME_MAX], size_t *n_in)
{
	size_t k = *n_in;

	for (size_t a = 0; a < n_att; a++) {
		const struct agent_attachment *t = &att[a];
		const struct iso_agent_member_want *w = NULL;

		if (!t->allocation[0] || t->deleting || t->cxi || t->ib)
			continue; /* (a Slingshot pod has no interface of ours, an
			           * InfiniBand pod its own VF) */
		for (size_t i = 0; i < d->n_members && !w; i++)
			if (d->members[i].member == t->member &&
			    strcmp(d->members[i].allocation, t->allocation) == 0 &&
			    strcmp(d->members[i].tenant, t->tenant) == 0)
				w = &d->members[i];
		if (!w)
			continue; /* released, or not yet in the document */
		if (!t->joined) {
			/* the member's own input (agent_overlay_tick made it
			 * first, without a namespace) becomes the pod's */
			for (size_t i = 0; i < k; i++)
				if (in[i].want == w && !in[i].name) {
					in[i].netns = t->netns;
					in[i].ifname = t->ifname;
					in[i].address = t->address[0] ? t->address : NULL;
					break;
				}
			continue;
		}
		agent_attachment_name(t, names[a]);
		memset(&in[k], 0, sizeof(in[k]));
		in[k].want = w;
		in[k].netns = t->netns;
		in[k].name = names[a];
		in[k].ifname = t->ifname;
		in[k].address = t->address[0] ? t->address : NULL;
		k++;
	}
	*n_in = k;
}

/* Runs the node's overlay pass now (under s->work) from its last desired
 * document: the table's members' namespaces and every attachment. Sets
 * *ready and *why for the attachment `hash` (NULL: none). */
static int overlay_now(struct agent_sandboxes *s, const char *node, const char *hash, bool *ready,
                       char *why, size_t why_size, struct iso_error *err)
{
	struct agent_node_view v;
	_cleanup_free_ struct agent_table_entry *entries = NULL;
	_cleanup_free_ struct agent_attachment *att = NULL;
	size_t n_att = 0;
	int r;

	*ready = false;
	pthread_mutex_lock(&s->work);
	pthread_mutex_lock(&s->lock);
	r = view_get_locked(s, node, &v);
	if (r == 0 && v.n && !(entries = calloc(v.n, sizeof(*entries)))) {
		view_clear(&v); /* the copy view_get_locked made */
		r = -ENOMEM;
	}
	for (size_t i = 0; r == 0 && i < v.n; i++)
		for (size_t k = 0; k < s->n; k++)
			if (strcmp(s->entries[k].node, node) == 0 &&
			    s->entries[k].member == v.members[i].member &&
			    strcmp(s->entries[k].allocation, v.members[i].allocation) == 0) {
				entries[i] = s->entries[k];
				break;
			}
	pthread_mutex_unlock(&s->lock);
	if (r < 0) {
		pthread_mutex_unlock(&s->work);
		return iso_error_set(err, r == -ENOENT ? ISO_E_UNAVAILABLE : ISO_E_INTERNAL, "",
		                     r == -ENOENT ? "the agent has no desired state for node %s yet"
		                                  : "out of memory",
		                     node);
	}
	if ((r = agent_attachments_list(s->state_root, node, &att, &n_att, err)) < 0) {
		pthread_mutex_unlock(&s->work);
		view_clear(&v);
		return r;
	}
	struct iso_agent_desired d = {.n_members = v.n, .members = v.members};
	iso_strlcpy(d.node, node, sizeof(d.node));
	agent_attachments_resolve(&d, att, n_att);
	struct agent_attach_result *res = n_att ? calloc(n_att, sizeof(*res)) : NULL;
	json_t *status = json_object();
	char only[ISO_NAME_MAX] = "";
	for (size_t a = 0; a < n_att && hash; a++)
		if (strcmp(att[a].hash, hash) == 0)
			agent_attachment_name(&att[a], only);
	/* this attachment alone (its tenant, its veth, the guard): the tick
	 * makes the rest level again */
	agent_overlay_tick(node, &d, entries, att, n_att, res, only[0] ? only : NULL, status,
	                   &s->overlay_clean, &s->overlay_linger);
	for (size_t a = 0; a < n_att && hash; a++)
		if (strcmp(att[a].hash, hash) == 0) {
			*ready = res[a].ready;
			iso_strlcpy(why,
			            res[a].reason[0] ? res[a].reason : "not on the overlay yet",
			            why_size);
		}
	json_decref(status);
	free(res);
	pthread_mutex_unlock(&s->work);
	view_clear(&v);
	return 0;
}

/* ---- the requests ---- */

struct cni_req {
	char verb[8];
	char node[ISO_NAME_MAX];
	char container_id[AGENT_CNI_ID_MAX];
	char ifname[16];
	char netns[AGENT_CNI_NETNS_MAX];
	char network[AGENT_CNI_NETWORK_MAX];
	char tenant[ISO_NAME_MAX];
	char allocation[ISO_AGENT_ALLOC_MAX];
	char address[24];
	unsigned cpus;
	uint64_t memory_mib;
	bool cxi;          /* "mode": "slingshot" (ADD, STATUS) */
	uint32_t uid, gid; /* and the pod's identity, 1..4294967294 (ADD) */
	bool ib;           /* "mode": "infiniband" (ADD, STATUS) */
	json_t *valid;     /* GC: [{"container_id","ifname"}] (borrowed from the doc) */
};

static json_t *answer_err(enum iso_errcode code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static json_t *answer_err(enum iso_errcode code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s, s:s}", "error", iso_errcode_name(code), "message", msg);
}

static bool node_served(const struct agent_sandboxes *s, const char *node)
{
	for (size_t i = 0; i < s->n_nodes; i++)
		if (strcmp(s->nodes[i], node) == 0)
			return true;
	return false;
}

static int req_string(json_t *doc, const char *k, bool required, char *dst, size_t size,
                      struct iso_error *err)
{
	const char *v = NULL;
	int r = iso_json_get_string(doc, k, NULL, required, &v, err);

	if (r < 0)
		return r;
	if (v && iso_strlcpy(dst, v, size) < 0)
		return iso_error_set(err, ISO_E_INVALID, k, "%s: longer than %zu bytes", k,
		                     size - 1);
	return 0;
}

/* Strict parse of a CNI request; *doc keeps what rq->valid borrows. */
static int agent_cni_request_parse(const char *text, size_t len, const char *const *nodes,
                                   size_t n_nodes, struct cni_req *rq, json_t **doc_out,
                                   struct iso_error *err)
{
	static const char *const keys[] = {
	    "cni",     "node", "container_id", "ifname", "netns", "network", "tenant", "allocation",
	    "address", "cpus", "memory_mib",   "valid",  "mode",  "uid",     "gid",    NULL};
	json_t *doc;
	int64_t cpus = 0, mem = 0;
	int r;

	memset(rq, 0, sizeof(*rq));
	*doc_out = NULL;
	if ((r = iso_json_load_object(text, len, AGENT_CNI_REQUEST_MAX, ISO_E_TOO_LARGE, "request",
	                              &doc, err)) < 0)
		return r;
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = req_string(doc, "cni", true, rq->verb, sizeof(rq->verb), err)) < 0 ||
	    (r = req_string(doc, "node", false, rq->node, sizeof(rq->node), err)) < 0)
		goto fail;
	bool add = strcmp(rq->verb, "ADD") == 0, del = strcmp(rq->verb, "DEL") == 0,
	     check = strcmp(rq->verb, "CHECK") == 0, gc = strcmp(rq->verb, "GC") == 0,
	     status = strcmp(rq->verb, "STATUS") == 0;
	if (!add && !del && !check && !gc && !status) {
		r = iso_error_set(err, ISO_E_INVALID, "cni",
		                  "cni: expected ADD, DEL, CHECK, GC or STATUS");
		goto fail;
	}
	if (!rq->node[0]) {
		if (n_nodes != 1) {
			r = iso_error_set(err, ISO_E_INVALID, "node",
			                  "node: required (this agent serves %zu nodes)", n_nodes);
			goto fail;
		}
		iso_strlcpy(rq->node, nodes[0], sizeof(rq->node));
	}
	if (!iso_name_valid(rq->node)) {
		r = iso_error_set(err, ISO_E_INVALID, "node", "node: not a node name");
		goto fail;
	}
	if (add || del || check) {
		if ((r = req_string(doc, "container_id", true, rq->container_id,
		                    sizeof(rq->container_id), err)) < 0 ||
		    (r = req_string(doc, "ifname", true, rq->ifname, sizeof(rq->ifname), err)) <
		        0 ||
		    (r = req_string(doc, "netns", add || check, rq->netns, sizeof(rq->netns),
		                    err)) < 0)
			goto fail;
		if (!container_id_valid(rq->container_id)) {
			r = iso_error_set(
			    err, ISO_E_INVALID, "container_id",
			    "container_id: expected letters, digits, '_', '.' and '-', "
			    "starting with a letter or digit, under %d characters",
			    AGENT_CNI_ID_MAX);
			goto fail;
		}
		if (!agent_cni_ifname_valid(rq->ifname)) {
			r = iso_error_set(err, ISO_E_INVALID, "ifname",
			                  "ifname: not an interface name (1-15 characters, no '/', "
			                  "':' or spaces)");
			goto fail;
		}
		if (rq->netns[0] && rq->netns[0] != '/') {
			r = iso_error_set(err, ISO_E_INVALID, "netns",
			                  "netns: not an absolute path");
			goto fail;
		}
	}
	if (add || status) {
		char mode[16] = "";
		if ((r = req_string(doc, "mode", false, mode, sizeof(mode), err)) < 0)
			goto fail;
		if (mode[0] && strcmp(mode, "ethernet") != 0 && strcmp(mode, "slingshot") != 0 &&
		    strcmp(mode, "infiniband") != 0) {
			r = iso_error_set(err, ISO_E_INVALID, "mode",
			                  "mode: expected ethernet, slingshot or infiniband");
			goto fail;
		}
		rq->cxi = strcmp(mode, "slingshot") == 0;
		rq->ib = strcmp(mode, "infiniband") == 0;
	} else if (json_object_get(doc, "mode")) {
		r = iso_error_set(err, ISO_E_INVALID, "mode", "mode: only with ADD and STATUS");
		goto fail;
	}
	if (add || gc) {
		if ((r = req_string(doc, "network", true, rq->network, sizeof(rq->network), err)) <
		    0)
			goto fail;
		if (!rq->network[0]) {
			r = iso_error_set(err, ISO_E_INVALID, "network", "network: empty");
			goto fail;
		}
	}
	if (add) {
		if ((r = req_string(doc, "tenant", true, rq->tenant, sizeof(rq->tenant), err)) <
		        0 ||
		    (r = req_string(doc, "allocation", false, rq->allocation,
		                    sizeof(rq->allocation), err)) < 0 ||
		    (r = req_string(doc, "address", false, rq->address, sizeof(rq->address), err)) <
		        0 ||
		    (r = iso_json_get_int(doc, "cpus", NULL, false, 0, 1024, &cpus, err)) < 0 ||
		    (r = iso_json_get_int(doc, "memory_mib", NULL, false, 0, INT64_C(1) << 30, &mem,
		                          err)) < 0)
			goto fail;
		if (!iso_name_valid(rq->tenant)) {
			r = iso_error_set(err, ISO_E_INVALID, "tenant",
			                  "tenant: not a tenant name");
			goto fail;
		}
		if (rq->allocation[0] &&
		    (strlen(rq->allocation) != 18 || strncmp(rq->allocation, "a-", 2) != 0)) {
			r = iso_error_set(err, ISO_E_INVALID, "allocation",
			                  "allocation: expected an allocation id (a- and 16 hex "
			                  "digits)");
			goto fail;
		}
		rq->cpus = (unsigned)cpus;
		rq->memory_mib = (uint64_t)mem;
		int64_t uid = 0, gid = 0;
		/* (mode: parsed above) root's 0 (and -1) never: a service that admits root admits
		 * every root process of every tenant */
		if ((r = iso_json_get_int(doc, "uid", NULL, rq->cxi, 1, UINT32_MAX - 1, &uid,
		                          err)) < 0 ||
		    (r = iso_json_get_int(doc, "gid", NULL, rq->cxi, 1, UINT32_MAX - 1, &gid,
		                          err)) < 0)
			goto fail;
		if (!rq->cxi && (uid || gid)) {
			r = iso_error_set(err, ISO_E_INVALID, uid ? "uid" : "gid",
			                  "%s: only with mode slingshot", uid ? "uid" : "gid");
			goto fail;
		}
		rq->uid = (uint32_t)uid;
		rq->gid = (uint32_t)gid;
	}
	if (gc) {
		json_t *v = json_object_get(doc, "valid"), *it;
		size_t i;
		if (!json_is_array(v)) {
			r = iso_error_set(err, ISO_E_INVALID, "valid", "valid: expected an array");
			goto fail;
		}
		json_array_foreach (v, i, it) {
			const char *c = json_string_value(json_object_get(it, "container_id"));
			const char *f = json_string_value(json_object_get(it, "ifname"));
			if (!json_is_object(it) || json_object_size(it) != 2 || !c || !f) {
				r = iso_error_set(
				    err, ISO_E_INVALID, "valid",
				    "valid[%zu]: expected {\"container_id\",\"ifname\"}", i);
				goto fail;
			}
		}
		rq->valid = v;
	}
	*doc_out = doc;
	return 0;
fail:
	json_decref(doc);
	return r;
}

static int controller_open(const struct agent_sandboxes *s, long timeout_ms,
                           struct iso_client **out, struct iso_error *err)
{
	struct iso_client_options co = {.url = s->controller,
	                                .token = s->token,
	                                .timeout_ms = timeout_ms,
	                                .user_agent = "isostack-agent-cni/" ISO_VERSION};

	if (!s->controller)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "", "the agent has no controller");
	return iso_client_new(&co, out, err);
}

static void http_enter(struct agent_sandboxes *s)
{
	pthread_mutex_lock(&s->cni_http_lock);
	while (s->cni_http >= AGENT_CNI_HTTP_MAX)
		pthread_cond_wait(&s->cni_http_cond, &s->cni_http_lock);
	s->cni_http++;
	pthread_mutex_unlock(&s->cni_http_lock);
}

static void http_leave(struct agent_sandboxes *s)
{
	pthread_mutex_lock(&s->cni_http_lock);
	s->cni_http--;
	pthread_cond_signal(&s->cni_http_cond);
	pthread_mutex_unlock(&s->cni_http_lock);
}

/* The attachment's allocation: created with its key (a retry answers the
 * same one). 0 with a->allocation set, or -errno with the controller's
 * words; ISO_E_UNAVAILABLE when it could not be asked. */
static int create_allocation(struct iso_client *cl, struct agent_attachment *a,
                             struct iso_error *err)
{
	_cleanup_response_ struct iso_response resp = {0};
	char hdr[ISO_IDEM_KEY_MAX + 32];
	const char *headers[] = {hdr, NULL};
	json_t *body = json_pack("{s:s, s:s, s:i, s:[s]}", "tenant", a->tenant, "name",
	                         a->alloc_name, "members", 1, "nodes", a->node);
	int r;

	if (!body)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if (a->cpus)
		json_object_set_new(body, "cpus", json_integer(a->cpus));
	if (a->memory_mib)
		json_object_set_new(body, "memory_mib", json_integer((json_int_t)a->memory_mib));
	snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", a->key);
	r = iso_client_request_headers(cl, "POST", "/v1/allocations", body, headers, &resp, err);
	json_decref(body);
	if (r < 0)
		return r;
	if ((r = iso_response_error(&resp, err)) < 0)
		return r;
	const char *id = json_string_value(json_object_get(resp.body, "id"));
	const char *state = json_string_value(json_object_get(resp.body, "state"));
	if (!id || iso_strlcpy(a->allocation, id, sizeof(a->allocation)) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "the controller's answer has no id");
	if (state && (strcmp(state, "released") == 0 || strcmp(state, "failed") == 0))
		return iso_error_set(err, ISO_E_CONFLICT, "",
		                     "allocation %s of key %s is already %s (DEL it first)", id,
		                     a->key, state);
	return 0;
}

static int release_allocation(struct iso_client *cl, const char *id, struct iso_error *err)
{
	_cleanup_response_ struct iso_response resp = {0};
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/v1/allocations/%s", id);
	if ((r = iso_client_request(cl, "DELETE", path, NULL, &resp, err)) < 0)
		return r;
	if (resp.status == 404)
		return 0; /* gone already */
	return iso_response_error(&resp, err);
}

/* Waits until node's view holds (alloc, member); member -1: any member. */
static int wait_member(struct agent_sandboxes *s, const char *node, const char *alloc, int member,
                       const char *tenant, struct iso_agent_member_want *out, int wait_ms)
{
	struct timespec dl;
	int r = -ETIMEDOUT;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += wait_ms / 1000;
	dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct agent_node_view v;
		if (view_get_locked(s, node, &v) == 0) {
			const struct iso_agent_member_want *w = view_member(&v, alloc, member);
			if (w && strcmp(w->tenant, tenant) == 0) {
				*out = *w;
				out->peers = NULL; /* (the copy's; cleared with it) */
				out->n_peers = 0;
				r = 0;
			} else if (w) {
				r = -ENOENT; /* another tenant's: said like a missing one */
			}
			view_clear(&v);
			if (r != -ETIMEDOUT)
				break;
		}
		if (pthread_cond_timedwait(&s->ticked_cond, &s->lock, &dl) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

static json_t *attached_answer(const struct agent_attachment *a)
{
	struct iso_overlay_member_link lk;
	struct iso_error e = {0};

	if (iso_overlay_member_link_read(a->netns, a->ifname, &lk, &e) < 0)
		return answer_err(ISO_E_UNAVAILABLE, "the pod's %s: %s", a->ifname, e.message);
	return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:i, s:b}", "allocation", a->allocation,
	                 "member", (int)a->member, "tenant", a->tenant, "ifname", a->ifname, "mac",
	                 lk.mac, "address", lk.address, "prefixlen", (int)lk.prefixlen, "joined",
	                 a->joined);
}

/* Slingshot: the pod's uid and gid admitted to its member's CXI service by
 * the socket's own cxi_admit (cxi_node.c: the same checks, the same kept
 * identity, the same service), then the grant as the answer. */
static json_t *cxi_admit_now(struct agent_sandboxes *s, const struct agent_attachment *a)
{
	_cleanup_free_ struct agent_table_entry *e = calloc(1, sizeof(*e));
	char reason[ISO_AGENT_REASON_MAX + 64];
	json_error_t je;
	json_t *o;
	char *text;

	if (!e)
		return answer_err(ISO_E_INTERNAL, "out of memory");
	if (!s->cxi)
		return answer_err(ISO_E_UNAVAILABLE, "this agent has no CXI driver");
	if (agent_sandboxes_member(s, a->allocation, a->member, e, reason, sizeof(reason)) < 0)
		return answer_err(ISO_E_UNAVAILABLE, "allocation %s member %u: %s", a->allocation,
		                  a->member, reason);
	if (!(text = agent_cxi_admit_answer(s->cxi, e, a->tenant, a->uid, a->gid)))
		return answer_err(ISO_E_INTERNAL, "out of memory");
	o = json_loads(text, 0, &je);
	free(text);
	if (!json_is_object(o)) {
		json_decref(o);
		return answer_err(ISO_E_INTERNAL, "the CXI admit's answer is not an object");
	}
	if (!json_object_get(o, "error")) {
		json_object_set_new(o, "tenant", json_string(a->tenant));
		json_object_set_new(o, "joined", json_boolean(a->joined));
	}
	return o;
}

static int del_one(struct agent_sandboxes *s, struct iso_client **cl, struct agent_attachment *a,
                   struct iso_error *err);

/* The allocation's state at the controller: "active" once the subnet
 * manager read the tenant's P_Key back from the VF (the fabric driver's
 * confirmation, docs/fabric.md "Active only when read back"). */
static int allocation_state(struct agent_sandboxes *s, const char *id, char *state, size_t size,
                            char *reason, size_t rsize, struct iso_error *err)
{
	_cleanup_client_ struct iso_client *cl = NULL;
	_cleanup_response_ struct iso_response resp = {0};
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/v1/allocations/%s", id);
	http_enter(s);
	if ((r = controller_open(s, 2000, &cl, err)) == 0 &&
	    (r = iso_client_request(cl, "GET", path, NULL, &resp, err)) == 0)
		r = iso_response_error(&resp, err);
	http_leave(s);
	if (r < 0)
		return r;
	const char *st = json_string_value(json_object_get(resp.body, "state"));
	const char *why = json_string_value(json_object_get(resp.body, "reason"));
	iso_strlcpy(state, st ? st : "", size);
	iso_strlcpy(reason, why ? why : "", rsize);
	return 0;
}

/* InfiniBand mode, after the allocation was created and its member is in
 * the node's desired state: wait for the subnet manager's confirmation,
 * then move the allocation's own VF (netdev, and its RDMA device in RDMA
 * netns exclusive mode) into the pod. Any failure releases the attachment
 * (the record first says what was moved); its VF then leaves the desired
 * document and the agent's VF pass writes the saved original GUID back
 * (docs/agent.md "VFs", step 1: ib-sriov-cni#217). */
static json_t *ib_attach(struct agent_sandboxes *s, struct agent_attachment *a)
{
	char state[32] = "", reason[256] = "", msg[768] = "";
	struct iso_error e = {0};
	enum iso_errcode code = ISO_E_UNAVAILABLE;
	struct timespec t0, now;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		r = allocation_state(s, a->allocation, state, sizeof(state), reason, sizeof(reason),
		                     &e);
		if (r == 0 && strcmp(state, "active") == 0)
			break;
		if (r == 0 && strcmp(state, "provisioning") != 0 && strcmp(state, "placed") != 0 &&
		    strcmp(state, "pending") != 0) {
			snprintf(msg, sizeof(msg), "allocation %s is %s (%s)", a->allocation, state,
			         reason);
			goto fail;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= s->cni_sm_wait_ms) {
			snprintf(
			    msg, sizeof(msg),
			    "the subnet manager did not confirm tenant %s's P_Key on the pod's "
			    "VF within %d s (allocation %s: %s%s%s)",
			    a->tenant, s->cni_sm_wait_ms / 1000, a->allocation,
			    r < 0 ? "the controller: " : state, r < 0 ? e.message : "",
			    r == 0 && reason[0] ? reason : "");
			goto fail;
		}
		struct timespec ts = {0, 50000000L};
		nanosleep(&ts, NULL);
	}
	/* the allocation's own VF, named by the document for its member */
	struct agent_node_view v;
	const struct agent_view_vf *vf = NULL;
	struct agent_view_vf mine;
	pthread_mutex_lock(&s->lock);
	r = view_get_locked(s, a->node, &v);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; r == 0 && i < v.n_vfs && !vf; i++)
		if (strcmp(v.vfs[i].allocation, a->allocation) == 0 && v.vfs[i].member == a->member)
			vf = &v.vfs[i];
	if (vf)
		mine = *vf;
	if (r == 0)
		view_clear(&v);
	if (!vf) {
		code = ISO_E_INTERNAL;
		snprintf(msg, sizeof(msg),
		         "allocation %s has no VF on node %s (not an InfiniBand "
		         "fabric?)",
		         a->allocation, a->node);
		goto fail;
	}
	a->vf_index = (int)mine.index;
	iso_strlcpy(a->vf_device, mine.device, sizeof(a->vf_device));
	if (iso_agent_vf_netdev(&s->vf, mine.device, mine.index, a->vf_netdev, &e) < 0) {
		code = e.code;
		snprintf(msg, sizeof(msg), "%s", e.message);
		goto fail;
	}
	/* said before it is done: a crash between the move and the store
	 * leaves a record DEL and GC move back */
	if ((r = attachment_store(s->state_root, a, &e)) < 0) {
		code = e.code;
		snprintf(msg, sizeof(msg), "%s", e.message);
		goto fail;
	}
	pthread_mutex_lock(&s->work);
	r = iso_overlay_link_move(NULL, a->vf_netdev, a->netns, a->ifname, a->address, &e);
	if (r == 0 && s->rdma_mode == ISO_RDMA_NETNS_EXCLUSIVE) {
		struct agent_host_roots roots = {"/dev", "/proc",
		                                 s->vf.sysfs_root ? s->vf.sysfs_root : "/"};
		struct agent_vf_ref ref = {a->vf_device, (unsigned)a->vf_index};
		char rdev[ISO_RDMA_NAME_MAX];
		if (agent_vf_rdma_device(&roots, &ref, rdev, &e) > 0) {
			iso_strlcpy(a->rdma_dev, rdev, sizeof(a->rdma_dev));
			if ((r = attachment_store(s->state_root, a, &e)) == 0)
				r = iso_rdma_dev_move(NULL, rdev, a->netns, &e);
		}
	}
	pthread_mutex_unlock(&s->work);
	if (r < 0) {
		code = e.code == ISO_E_NOT_FOUND ? ISO_E_UNAVAILABLE : e.code;
		snprintf(msg, sizeof(msg), "moving VF %d of %s (%s) into the pod: %s", a->vf_index,
		         a->vf_device, a->vf_netdev, e.message);
		goto fail;
	}
	iso_log(ISO_LOG_INFO, "agent.cni_attached",
	        "node=%s container=%s ifname=%s tenant=%s allocation=%s vf=%d netdev=%s "
	        "guid=0x%016" PRIx64 " pkey=0x%04x rdma=%s",
	        a->node, a->container_id, a->ifname, a->tenant, a->allocation, a->vf_index,
	        a->vf_netdev, mine.guid, mine.pkey, a->rdma_dev[0] ? a->rdma_dev : "-");
	json_t *out = attached_answer(a);
	char g[24], pk[8];
	snprintf(g, sizeof(g), "0x%016" PRIx64, mine.guid);
	snprintf(pk, sizeof(pk), "0x%04x", mine.pkey & 0x7fff);
	if (out && json_object_get(out, "allocation")) {
		json_object_set_new(out, "guid", json_string(g));
		json_object_set_new(out, "pkey", json_string(pk));
		json_object_set_new(out, "vf", json_integer(a->vf_index));
	}
	return out;
fail : {
	/* rolled back: the netdev back, the allocation released, the record
	 * gone; the VF pass gives the VF its original GUID back */
	_cleanup_client_ struct iso_client *cl = NULL;
	struct iso_error de = {0};
	if (del_one(s, &cl, a, &de) < 0)
		iso_log(ISO_LOG_WARN, "agent.cni_rollback_failed",
		        "node=%s container=%s allocation=%s msg=\"%s\" (DEL or GC frees it)",
		        a->node, a->container_id, a->allocation, de.message);
	iso_log(ISO_LOG_WARN, "agent.cni_ib_failed",
	        "node=%s container=%s allocation=%s msg=\"%s\"", a->node, a->container_id,
	        a->allocation, msg);
	return answer_err(code, "%s", msg);
}
}

static json_t *do_add(struct agent_sandboxes *s, const struct cni_req *rq)
{
	struct agent_attachment a = {0}, old;
	struct iso_error e = {0};
	char path[PATH_MAX], why[ISO_AGENT_REASON_MAX] = "";
	bool ready = false;
	int r;
	/* where an ADD's time goes (ISOSTACK_DEBUG=1: agent.cni_add_steps) */
	uint64_t t0 = iso_mono_ns(), t_rec, t_create = t0, t_wait = t0, t_plug;

	iso_strlcpy(a.node, rq->node, sizeof(a.node));
	iso_strlcpy(a.container_id, rq->container_id, sizeof(a.container_id));
	iso_strlcpy(a.ifname, rq->ifname, sizeof(a.ifname));
	iso_strlcpy(a.netns, rq->netns, sizeof(a.netns));
	iso_strlcpy(a.network, rq->network, sizeof(a.network));
	iso_strlcpy(a.tenant, rq->tenant, sizeof(a.tenant));
	iso_strlcpy(a.address, rq->address, sizeof(a.address));
	a.cpus = rq->cpus;
	a.memory_mib = rq->memory_mib;
	a.cxi = rq->cxi;
	a.uid = rq->uid;
	a.gid = rq->gid;
	a.ib = rq->ib;
	a.vf_index = -1;
	if (rq->ib && rq->allocation[0])
		return answer_err(
		    ISO_E_INVALID,
		    "allocation: a pod on InfiniBand holds a VF of its own allocation; "
		    "it cannot join allocation %s",
		    rq->allocation);
	attachment_hash(a.node, a.container_id, a.ifname, a.hash);
	{
		/* a lease of its own: a retry or an agent restart finds the key in
		 * the record (one allocation); an ADD after DEL is a new lease and
		 * a new allocation, not the released one */
		unsigned char nonce[4];
		char hex[9];
		randombytes_buf(nonce, sizeof(nonce));
		sodium_bin2hex(hex, sizeof(hex), nonce, sizeof(nonce));
		snprintf(a.key, sizeof(a.key), "cni:%s:%s:%s", a.node, a.hash, hex);
	}
	snprintf(a.alloc_name, sizeof(a.alloc_name), "cni-%.16s", a.hash);
	if (access(a.netns, F_OK) < 0)
		return answer_err(ISO_E_NOT_FOUND, "netns: %s: %s", a.netns, strerror(errno));
	record_path(s->state_root, a.hash, path, sizeof(path));
	bool held = attachment_load_file(path, &old, &e) == 0;
	if (held && old.deleting) {
		/* a DEL (or a failed ADD's rollback: the controller unreachable)
		 * cut short: finished here, as the DEL the runtime would send
		 * first, so that the retry the 11 promised can succeed; then a new
		 * lease. Still unreachable: 11 again, the record kept. */
		_cleanup_client_ struct iso_client *cl = NULL;
		if (del_one(s, &cl, &old, &e) < 0)
			return answer_err(e.code,
			                  "container %s's %s: the release of its last attachment "
			                  "(allocation %s) is not done: %s",
			                  a.container_id, a.ifname,
			                  old.allocation[0] ? old.allocation : "-", e.message);
		held = false;
	}
	if (held) {
		/* the runtime's retry: the same pod, same lease */
		if (strcmp(old.netns, a.netns) != 0 || strcmp(old.tenant, a.tenant) != 0 ||
		    strcmp(old.network, a.network) != 0 || old.cxi != a.cxi || old.uid != a.uid ||
		    old.gid != a.gid || old.ib != a.ib)
			return answer_err(ISO_E_CONFLICT,
			                  "container %s's %s is attached already (netns %s, tenant "
			                  "%s): DEL it first",
			                  a.container_id, a.ifname, old.netns, old.tenant);
		if (rq->allocation[0] && strcmp(rq->allocation, old.allocation) != 0 && old.joined)
			return answer_err(ISO_E_CONFLICT,
			                  "container %s's %s joined allocation %s already: DEL it "
			                  "first",
			                  a.container_id, a.ifname, old.allocation);
		a = old;
		iso_strlcpy(a.address, rq->address, sizeof(a.address));
	}
	if (rq->allocation[0] && !a.allocation[0]) {
		/* a join: the allocation must be the tenant's, with a member on this node */
		struct iso_agent_member_want w;
		r = wait_member(s, a.node, rq->allocation, -1, a.tenant, &w, 0);
		if (r < 0)
			return answer_err(ISO_E_NOT_FOUND,
			                  "allocation %s has no member of tenant %s on node %s",
			                  rq->allocation, a.tenant, a.node);
		iso_strlcpy(a.allocation, rq->allocation, sizeof(a.allocation));
		a.member = w.member;
		a.joined = true;
	}
	/* the record first: whatever happens next, DEL and GC find it */
	if ((r = attachment_store(s->state_root, &a, &e)) < 0)
		return answer_err(e.code, "%s", e.message);
	t_rec = iso_mono_ns();
	if (!a.joined) {
		struct iso_client *cl = NULL;
		/* one connection for the create alone: an idle one held through
		 * the wait counts against isostackd's 64 per client address */
		http_enter(s);
		if ((r = controller_open(s, 10000, &cl, &e)) == 0)
			r = create_allocation(cl, &a, &e);
		iso_client_free(cl);
		http_leave(s);
		if (r < 0) {
			if (e.code != ISO_E_UNAVAILABLE && e.code != ISO_E_INTERNAL)
				attachment_remove(s->state_root, a.hash,
				                  NULL); /* refused: nothing made */
			return answer_err(e.code, "%s%s%s", e.field[0] ? e.field : "",
			                  e.field[0] ? ": " : "", e.message);
		}
		t_create = iso_mono_ns();
		if ((r = attachment_store(s->state_root, &a, &e)) < 0)
			return answer_err(e.code, "%s", e.message);
		struct iso_agent_member_want w;
		r = wait_member(s, a.node, a.allocation, 0, a.tenant, &w, CNI_WAIT_MS);
		t_wait = iso_mono_ns();
		if (r < 0)
			return answer_err(
			    ISO_E_UNAVAILABLE,
			    "allocation %s: not in node %s's desired state after %d s",
			    a.allocation, a.node, CNI_WAIT_MS / 1000);
		if (a.ib)
			return ib_attach(s, &a);
		if (a.cxi && !w.has_cxi)
			return answer_err(ISO_E_INVALID,
			                  "mode: allocation %s has no VNI on node %s (not a "
			                  "Slingshot fabric?)",
			                  a.allocation, a.node);
		if (!a.cxi && !w.has_overlay)
			return answer_err(ISO_E_INVALID,
			                  "allocation %s: no overlay on node %s (not an Ethernet "
			                  "fabric?)",
			                  a.allocation, a.node);
	}
	if (a.cxi) {
		json_t *o = cxi_admit_now(s, &a);
		if (!json_object_get(o, "error"))
			iso_log(ISO_LOG_INFO, "agent.cni_attached",
			        "node=%s container=%s ifname=%s tenant=%s allocation=%s joined=%d "
			        "uid=%u gid=%u",
			        a.node, a.container_id, a.ifname, a.tenant, a.allocation, a.joined,
			        a.uid, a.gid);
		return o;
	}
	/* the tick that brought the member ran the node's overlay pass with
	 * this record: when that pass plugged the pod in, answer from it;
	 * else (a join, a record newer than the pass, a failure) a pass for
	 * this attachment alone */
	bool from_tick = view_plugged(s, a.node, &a);
	if (from_tick)
		ready = true;
	else if ((r = overlay_now(s, a.node, a.hash, &ready, why, sizeof(why), &e)) < 0)
		return answer_err(e.code, "%s", e.message);
	t_plug = iso_mono_ns();
	if (!ready)
		return answer_err(ISO_E_UNAVAILABLE, "not on the tenant's overlay yet (%s)", why);
	iso_log(ISO_LOG_INFO, "agent.cni_attached",
	        "node=%s container=%s ifname=%s tenant=%s allocation=%s joined=%d", a.node,
	        a.container_id, a.ifname, a.tenant, a.allocation, a.joined);
	json_t *ans = attached_answer(&a);
	uint64_t t_end = iso_mono_ns();
	iso_log(ISO_LOG_DEBUG, "agent.cni_add_steps",
	        "container=%s record_ms=%.2f create_ms=%.2f wait_ms=%.2f plug_ms=%.2f "
	        "answer_ms=%.2f total_ms=%.2f plugged_by=%s",
	        a.container_id, (double)(t_rec - t0) / 1e6, (double)(t_create - t_rec) / 1e6,
	        (double)(t_wait - t_create) / 1e6, (double)(t_plug - t_wait) / 1e6,
	        (double)(t_end - t_plug) / 1e6, (double)(t_end - t0) / 1e6,
	        from_tick ? "tick" : "request");
	return ans;
}

/* Has the controller served this agent node's desired state since it
 * started? Only to the node's own token (GET /v1/nodes/N/desired is 403 to
 * another node's), so this is the proof that the token is the node's. */
static bool node_viewed(struct agent_sandboxes *s, const char *node)
{
	bool seen = false;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_views && !seen; i++)
		seen = strcmp(s->views[i].node, node) == 0;
	pthread_mutex_unlock(&s->lock);
	return seen;
}

/* DEL of one record: its allocation released (when it made one), the
 * record removed, the overlay pass run (its veth goes). Not before the
 * controller served the node's desired state to this agent: with another
 * node's token the release is a 404, which reads as "released already",
 * and the record would go while the allocation (its VF, its GUID in the
 * tenant's P_Key) lived on with nothing left to free it; the pod's
 * interface would be taken first. */
static int del_one(struct agent_sandboxes *s, struct iso_client **cl, struct agent_attachment *a,
                   struct iso_error *err)
{
	char name[ISO_NAME_MAX];
	struct iso_error e2 = {0};
	int r;
	/* where a DEL's time goes (ISOSTACK_DEBUG=1: agent.cni_del_steps) */
	uint64_t t0 = iso_mono_ns(), t_rec, t_link, t_rel;

	if (!node_viewed(s, a->node))
		return iso_error_set(err, ISO_E_UNAVAILABLE, "",
		                     "node %s's desired state has not come from the controller "
		                     "yet (is the agent's token node %s's?): the attachment is "
		                     "kept",
		                     a->node, a->node);
	/* off the overlay first (the tick leaves a deleting record alone), so
	 * the pod is cut before its member is released; a crash from here on
	 * leaves the record for the next DEL or GC */
	if (!a->deleting) {
		a->deleting = true;
		if ((r = attachment_store(s->state_root, a, err)) < 0)
			return r;
	}
	agent_attachment_name(a, name);
	t_rec = iso_mono_ns();
	pthread_mutex_lock(&s->work);
	uint64_t t_lock = iso_mono_ns();
	if (a->ib && a->vf_netdev[0]) {
		/* the VF back to the host under its own name. A netns gone gave
		 * it back already (the kernel returns a physical device to the
		 * host's namespace): nothing is renamed by a name then, which
		 * could be the host's own interface; mlx5's rebind at the GUID's
		 * restore names it afresh. No ifname in the pod: never moved. */
		r = 0;
		if (access(a->netns, F_OK) == 0) {
			if (a->rdma_dev[0] &&
			    iso_rdma_dev_move(a->netns, a->rdma_dev, NULL, &e2) < 0)
				iso_log(ISO_LOG_WARN, "agent.cni_rdma_back_failed",
				        "node=%s dev=%s msg=\"%s\"", a->node, a->rdma_dev,
				        e2.message);
			r = iso_overlay_link_move(a->netns, a->ifname, NULL, a->vf_netdev, NULL,
			                          &e2);
		}
		if (r < 0 && r != -ENODEV) {
			pthread_mutex_unlock(&s->work);
			return iso_error_set(err, e2.code, "",
			                     "the pod's %s back to the host as %s: %s", a->ifname,
			                     a->vf_netdev, e2.message);
		}
	} else if (!a->cxi && iso_overlay_member_remove(NULL, name, &e2) < 0) {
		/* (Slingshot: no interface; the member's release below ends its
		 * service: the tick's CXI pass drops the identity and destroys it) */
		iso_log(ISO_LOG_WARN, "agent.cni_overlay_failed", "node=%s msg=\"%s\"", a->node,
		        e2.message);
	}
	pthread_mutex_unlock(&s->work);
	t_link = iso_mono_ns();
	if (!a->joined) {
		if (!*cl && (r = controller_open(s, 10000, cl, err)) < 0)
			return r;
		/* cut short between the record and the create's answer: the
		 * create again (same key, same body) answers what it made */
		http_enter(s);
		r = 0;
		if (!a->allocation[0] && create_allocation(*cl, a, err) < 0 &&
		    err->code == ISO_E_UNAVAILABLE)
			r = -EAGAIN;
		if (r == 0 && a->allocation[0])
			r = release_allocation(*cl, a->allocation, err);
		http_leave(s);
		if (r < 0)
			return r;
	}
	t_rel = iso_mono_ns();
	if ((r = attachment_remove(s->state_root, a->hash, err)) < 0)
		return r;
	iso_log(ISO_LOG_INFO, "agent.cni_detached",
	        "node=%s container=%s ifname=%s tenant=%s allocation=%s", a->node, a->container_id,
	        a->ifname, a->tenant, a->allocation);
	uint64_t t_end = iso_mono_ns();
	iso_log(ISO_LOG_DEBUG, "agent.cni_del_steps",
	        "container=%s record_ms=%.2f lock_ms=%.2f link_ms=%.2f release_ms=%.2f "
	        "remove_ms=%.2f total_ms=%.2f",
	        a->container_id, (double)(t_rec - t0) / 1e6, (double)(t_lock - t_rec) / 1e6,
	        (double)(t_link - t_lock) / 1e6, (double)(t_rel - t_link) / 1e6,
	        (double)(t_end - t_rel) / 1e6, (double)(t_end - t0) / 1e6);
	return 0;
}

static json_t *do_del(struct agent_sandboxes *s, const struct cni_req *rq)
{
	struct agent_attachment a;
	_cleanup_client_ struct iso_client *cl = NULL;
	struct iso_error e = {0};
	char hash[33], path[PATH_MAX];

	attachment_hash(rq->node, rq->container_id, rq->ifname, hash);
	record_path(s->state_root, hash, path, sizeof(path));
	if (attachment_load_file(path, &a, &e) < 0)
		return json_pack("{s:b}", "deleted", false); /* nothing: DEL is idempotent */
	if (del_one(s, &cl, &a, &e) < 0)
		return answer_err(e.code, "%s", e.message);
	return json_pack("{s:b, s:s}", "deleted", true, "allocation", a.allocation);
}

/* CHECK of an InfiniBand attachment, changing nothing: the pod's VF netdev
 * in its netns as ifname, up, with the record's address (if any), and the
 * node's desired document still naming that VF for the member. */
static json_t *ib_check(struct agent_sandboxes *s, const struct agent_attachment *a,
                        const struct cni_req *rq)
{
	struct iso_overlay_member_link lk;
	struct iso_error e = {0};
	struct agent_node_view v;
	bool mine = false;
	int r;

	if (a->vf_index < 0 || !a->vf_netdev[0])
		return answer_err(ISO_E_NOT_FOUND,
		                  "container %s: its VF was never moved into the pod",
		                  rq->container_id);
	if (iso_overlay_member_link_read(a->netns, a->ifname, &lk, &e) < 0)
		return answer_err(ISO_E_NOT_FOUND, "container %s: the pod has no %s (%s)",
		                  rq->container_id, a->ifname, e.message);
	if (!lk.up)
		return answer_err(ISO_E_CONFLICT, "container %s: the pod's %s is down",
		                  rq->container_id, a->ifname);
	if (a->address[0]) {
		char have[40];
		snprintf(have, sizeof(have), "%s/%u", lk.address, lk.prefixlen);
		if (strcmp(have, a->address) != 0)
			return answer_err(
			    ISO_E_CONFLICT, "container %s: the pod's %s has %s, not %s",
			    rq->container_id, a->ifname, lk.address[0] ? have : "none", a->address);
	}
	pthread_mutex_lock(&s->lock);
	r = view_get_locked(s, a->node, &v);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; r == 0 && i < v.n_vfs && !mine; i++)
		mine = strcmp(v.vfs[i].allocation, a->allocation) == 0 &&
		       v.vfs[i].member == a->member && v.vfs[i].index == (unsigned)a->vf_index &&
		       strcmp(v.vfs[i].device, a->vf_device) == 0;
	if (r == 0)
		view_clear(&v);
	if (!mine)
		return answer_err(ISO_E_NOT_FOUND,
		                  "container %s: VF %d of %s is not its member's in node %s's "
		                  "desired state",
		                  rq->container_id, a->vf_index, a->vf_device, a->node);
	/* (address and prefixlen: the plugin holds them against prevResult) */
	return json_pack("{s:s, s:i, s:s, s:s, s:i, s:s, s:i, s:b}", "allocation", a->allocation,
	                 "member", (int)a->member, "tenant", a->tenant, "ifname", a->ifname, "vf",
	                 a->vf_index, "address", lk.address, "prefixlen", (int)lk.prefixlen,
	                 "joined", a->joined);
}

static json_t *do_check(struct agent_sandboxes *s, const struct cni_req *rq)
{
	struct agent_attachment a;
	struct iso_error e = {0};
	struct iso_agent_member_want w;
	char hash[33], path[PATH_MAX];

	attachment_hash(rq->node, rq->container_id, rq->ifname, hash);
	record_path(s->state_root, hash, path, sizeof(path));
	if (attachment_load_file(path, &a, &e) < 0)
		return answer_err(ISO_E_NOT_FOUND, "container %s's %s is not attached on node %s",
		                  rq->container_id, rq->ifname, rq->node);
	if (strcmp(a.netns, rq->netns) != 0)
		return answer_err(ISO_E_CONFLICT,
		                  "container %s's %s is attached in netns %s, not %s",
		                  rq->container_id, rq->ifname, a.netns, rq->netns);
	if (!a.allocation[0] ||
	    wait_member(s, a.node, a.allocation, (int)a.member, a.tenant, &w, 0) < 0)
		return answer_err(
		    ISO_E_NOT_FOUND, "container %s's %s: its allocation %s is not live on node %s",
		    rq->container_id, rq->ifname, a.allocation[0] ? a.allocation : "-", a.node);
	if (a.cxi) {
		/* the NIC read back now: the member's service with the tenant's
		 * VNI admitting exactly the pod's uid and gid */
		char why[ISO_AGENT_REASON_MAX + 64];
		uint32_t svc = 0;
		if (!w.has_cxi)
			return answer_err(ISO_E_NOT_FOUND, "container %s: its member has no VNI",
			                  rq->container_id);
		if (!s->cxi)
			return answer_err(ISO_E_UNAVAILABLE, "this agent has no CXI driver");
		if (agent_cxi_check(s->cxi, a.allocation, a.member, w.cxi_vni, a.uid, a.gid, &svc,
		                    why, sizeof(why)) < 0)
			return answer_err(ISO_E_NOT_FOUND, "container %s: %s", rq->container_id,
			                  why);
		return json_pack("{s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:b}", "allocation",
		                 a.allocation, "member", (int)a.member, "tenant", a.tenant, "vni",
		                 (json_int_t)w.cxi_vni, "uid", (json_int_t)a.uid, "gid",
		                 (json_int_t)a.gid, "svc_id", (json_int_t)svc, "joined", a.joined);
	}
	if (a.ib)
		return ib_check(s, &a, rq);
	/* what the kernel holds now, read back, changing nothing: the pod's
	 * interface with its address, its veth on the tenant's bridge */
	struct iso_overlay_member_link lk;
	if (iso_overlay_member_link_read(a.netns, a.ifname, &lk, &e) < 0)
		return answer_err(ISO_E_NOT_FOUND, "container %s: the pod has no %s (%s)",
		                  rq->container_id, a.ifname, e.message);
	if (!lk.up || !lk.address[0])
		return answer_err(ISO_E_CONFLICT, "container %s: the pod's %s is %s",
		                  rq->container_id, a.ifname,
		                  !lk.up ? "down" : "without an address");
	if (a.address[0]) {
		char have[40];
		snprintf(have, sizeof(have), "%s/%u", lk.address, lk.prefixlen);
		if (strcmp(have, a.address) != 0)
			return answer_err(ISO_E_CONFLICT,
			                  "container %s: the pod's %s has %s, not %s",
			                  rq->container_id, a.ifname, have, a.address);
	}
	struct iso_overlay_state st;
	char name[ISO_NAME_MAX];
	bool on = false;
	if (iso_overlay_read(NULL, &st, &e) < 0)
		return answer_err(e.code, "reading the overlay: %s", e.message);
	agent_attachment_name(&a, name);
	for (size_t t = 0; t < st.n_tenants && !on; t++)
		for (size_t k = 0; st.tenants[t].vni == w.vni && k < st.tenants[t].n_members && !on;
		     k++)
			on = strcmp(st.tenants[t].members[k].name, name) == 0;
	iso_overlay_state_clear(&st);
	if (!on)
		return answer_err(ISO_E_NOT_FOUND,
		                  "container %s: its veth is not on tenant %s's bridge (VNI %u)",
		                  rq->container_id, a.tenant, w.vni);
	return attached_answer(&a);
}

static bool in_valid(json_t *valid, const struct agent_attachment *a)
{
	json_t *it;
	size_t i;

	json_array_foreach (valid, i, it)
		if (strcmp(json_string_value(json_object_get(it, "container_id")),
		           a->container_id) == 0 &&
		    strcmp(json_string_value(json_object_get(it, "ifname")), a->ifname) == 0)
			return true;
	return false;
}

static json_t *do_gc(struct agent_sandboxes *s, const struct cni_req *rq)
{
	_cleanup_free_ struct agent_attachment *att = NULL;
	_cleanup_client_ struct iso_client *cl = NULL;
	struct iso_error e = {0};
	size_t n = 0;
	unsigned freed = 0, kept = 0, failed = 0;
	char first_err[512] = "";

	if (agent_attachments_list(s->state_root, rq->node, &att, &n, &e) < 0)
		return answer_err(e.code, "%s", e.message);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(att[i].network, rq->network) != 0 || in_valid(rq->valid, &att[i])) {
			kept++;
			continue;
		}
		struct iso_error de = {0};
		if (del_one(s, &cl, &att[i], &de) < 0) {
			failed++;
			if (!first_err[0])
				snprintf(first_err, sizeof(first_err), "%s", de.message);
		} else {
			freed++;
		}
	}
	if (failed)
		return answer_err(ISO_E_UNAVAILABLE, "%u attachments not freed: %s", failed,
		                  first_err);
	return json_pack("{s:i, s:i}", "freed", freed, "kept", kept);
}

static json_t *do_status(struct agent_sandboxes *s, const struct cni_req *rq)
{
	_cleanup_client_ struct iso_client *cl = NULL;
	_cleanup_response_ struct iso_response resp = {0};
	struct iso_error e = {0};
	struct agent_node_view v;
	int r;

	pthread_mutex_lock(&s->lock);
	r = view_get_locked(s, rq->node, &v);
	pthread_mutex_unlock(&s->lock);
	if (r < 0)
		return answer_err(ISO_E_UNAVAILABLE, "node %s: the agent has no desired state yet",
		                  rq->node);
	view_clear(&v);
	http_enter(s);
	if ((r = controller_open(s, 2000, &cl, &e)) == 0 &&
	    (r = iso_client_request(cl, "GET", "/v1/healthz", NULL, &resp, &e)) == 0)
		r = iso_response_error(&resp, &e);
	/* InfiniBand: the subnet manager too (GET /v1/fabric/health, which
	 * any node agent may read); Ethernet and Slingshot have none to ask */
	if (r == 0 && rq->ib) {
		iso_response_clear(&resp);
		if ((r = iso_client_request(cl, "GET", "/v1/fabric/health", NULL, &resp, &e)) ==
		        0 &&
		    (r = iso_response_error(&resp, &e)) < 0)
			r = -EPROTO; /* it answered: not "unreachable" */
	}
	http_leave(s);
	if (r == -EPROTO)
		return answer_err(ISO_E_UNAVAILABLE,
		                  "the controller's GET /v1/fabric/health failed: %s", e.message);
	if (r < 0)
		return answer_err(ISO_E_UNAVAILABLE, "the controller is unreachable: %s",
		                  e.message);
	if (rq->ib) {
		struct iso_fabric_health h;

		if (iso_codec_fabric_health_decode(resp.body, &h, &e) < 0)
			return answer_err(ISO_E_UNAVAILABLE,
			                  "the controller's fabric health: %s%s%s", e.field,
			                  e.field[0] ? ": " : "", e.message);
		if (h.sm.state == ISO_SM_STATE_DOWN)
			return answer_err(ISO_E_UNAVAILABLE,
			                  "the subnet manager is unreachable: %s", h.sm.reason);
	}
	return json_pack("{s:b}", "ready", true);
}

json_t *agent_cni_answer(struct agent_sandboxes *s, const char *text, size_t len)
{
	struct cni_req rq;
	struct iso_error e = {0};
	json_t *doc = NULL, *out;

	if (agent_cni_request_parse(text, len, s->nodes, s->n_nodes, &rq, &doc, &e) < 0)
		return answer_err(e.code, "%s%s%s", e.field, e.field[0] ? ": " : "", e.message);
	if (!node_served(s, rq.node))
		out =
		    answer_err(ISO_E_NOT_FOUND, "node: this agent does not serve node %s", rq.node);
	else if (strcmp(rq.verb, "ADD") == 0)
		out = do_add(s, &rq);
	else if (strcmp(rq.verb, "DEL") == 0)
		out = do_del(s, &rq);
	else if (strcmp(rq.verb, "CHECK") == 0)
		out = do_check(s, &rq);
	else if (strcmp(rq.verb, "GC") == 0)
		out = do_gc(s, &rq);
	else
		out = do_status(s, &rq);
	json_decref(doc);
	return out;
}

/* ---- the server's thread per request ---- */

struct cni_job {
	struct agent_sandboxes *s;
	int fd;
	char *text;
	size_t len;
};

static void send_all(int fd, const char *p, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
}

static void *cni_thread(void *arg)
{
	struct cni_job *j = arg;
	json_t *o = agent_cni_answer(j->s, j->text, j->len);
	char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (t)
		send_all(j->fd, t, strlen(t));
	free(t);
	json_decref(o);
	close(j->fd);
	atomic_fetch_sub(&j->s->cni_busy, 1);
	free(j->text);
	free(j);
	return NULL;
}

int agent_cni_serve(struct agent_sandboxes *s, int fd, const char *text, size_t len)
{
	struct cni_job *j;
	pthread_t t;
	pthread_attr_t at;
	struct timeval tv = {CNI_IO_TIMEOUT_S, 0};

	if (atomic_fetch_add(&s->cni_busy, 1) >= CNI_THREADS_MAX) {
		atomic_fetch_sub(&s->cni_busy, 1);
		return -EBUSY;
	}
	if (!(j = calloc(1, sizeof(*j))) || !(j->text = malloc(len ? len : 1))) {
		free(j);
		atomic_fetch_sub(&s->cni_busy, 1);
		return -ENOMEM;
	}
	memcpy(j->text, text, len);
	j->len = len;
	j->s = s;
	j->fd = fd;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, cni_thread, j) != 0) {
		pthread_attr_destroy(&at);
		free(j->text);
		free(j);
		atomic_fetch_sub(&s->cni_busy, 1);
		return -EAGAIN;
	}
	pthread_attr_destroy(&at);
	return 0;
}

void agent_cni_drain(struct agent_sandboxes *s)
{
	/* the threads use s: wait for them (each is bounded by its timeouts) */
	for (int i = 0; i < 600 && atomic_load(&s->cni_busy) > 0; i++) {
		struct timespec ts = {0, 100000000L};
		nanosleep(&ts, NULL);
	}
}

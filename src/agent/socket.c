/* socket.c: the agent's unix socket (issue 14, docs/agent.md "Sandboxes"),
 * how `isostack-agent exec` and the Slurm/CNI plugins find a member's
 * sandbox. STATE_DIR/agent.sock, mode 0600; the kernel tells who connects
 * (SO_PEERCRED) and anyone but root is refused, since the handle is the way
 * into a tenant's processes. One request per connection, a small strict JSON
 * object, {"allocation": A, "member": M}; the answer is the sandbox's
 * handle (holder pid and start time, cgroup name and root, the member's
 * io_uring switch) or why not: "not on this node", "released", "not ready
 * yet (reason)". The client half (iso_agent_sandbox_lookup, _join) is here
 * too, so that both ends of the protocol sit in one file. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

#define IO_TIMEOUT_S 2

/* ---- the request ---- */

bool agent_alloc_id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n != 18 || s[0] != 'a' || s[1] != '-')
		return false;
	for (size_t i = 2; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The cxi_admit request's fields, each checked (the error names it). */
static int cxi_admit_fields(json_t *doc, const char *const *keys, const char **op, const char **t,
                            const char **a, int64_t *m, int64_t *uid, int64_t *gid,
                            struct iso_error *err)
{
	int r;

	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "op", NULL, true, op, err)) < 0)
		return r;
	if (strcmp(*op, "cxi_admit") != 0)
		return iso_error_set(err, ISO_E_INVALID, "op", "op: not cxi_admit");
	if ((r = iso_json_get_string(doc, "tenant", NULL, true, t, err)) < 0 ||
	    (r = iso_json_get_string(doc, "allocation", NULL, true, a, err)) < 0 ||
	    (r = iso_json_get_int(doc, "member", NULL, true, 0, ISO_CODEC_MEMBER_MAX, m, err)) < 0)
		return r;
	if (!iso_name_valid(*t))
		return iso_error_set(err, ISO_E_INVALID, "tenant", "not a tenant name");
	if (!agent_alloc_id_valid(*a))
		return iso_error_set(err, ISO_E_INVALID, "allocation",
		                     "expected an allocation id (a- and 16 hex digits)");
	/* never root (uid or gid 0): a service that admits root admits every
	 * root process of every tenant; 4294967295 is "no id" */
	if ((r = iso_json_get_int(doc, "uid", NULL, true, 1, (int64_t)UINT32_MAX - 1, uid, err)) <
	        0 ||
	    (r = iso_json_get_int(doc, "gid", NULL, true, 1, (int64_t)UINT32_MAX - 1, gid, err)) <
	        0)
		return r;
	return 0;
}

int agent_request_parse(const char *text, size_t len, struct agent_request *out,
                        struct iso_error *err)
{
	static const char *const keys[] = {"allocation", "member", NULL};
	static const char *const key_keys[] = {"tenant", "key", NULL};
	json_t *doc;
	const char *a = NULL, *t = NULL, *k = NULL;
	int64_t m = 0;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = iso_json_load_object(text, len, AGENT_REQUEST_MAX, ISO_E_TOO_LARGE, "request",
	                              &doc, err)) < 0)
		return r;
	if (json_object_get(doc, "op")) {
		/* issue 17: {"op":"cxi_admit","tenant","allocation","member","uid","gid"} */
		static const char *const admit_keys[] = {"op",  "tenant", "allocation", "member",
		                                         "uid", "gid",    NULL};
		const char *op = NULL;
		int64_t uid = 0, gid = 0;

		r = cxi_admit_fields(doc, admit_keys, &op, &t, &a, &m, &uid, &gid, err);
		if (r == 0) {
			out->cxi_admit = true;
			iso_strlcpy(out->tenant, t, sizeof(out->tenant));
			iso_strlcpy(out->allocation, a, sizeof(out->allocation));
			out->member = (unsigned)m;
			out->uid = (uint32_t)uid;
			out->gid = (uint32_t)gid;
		}
		json_decref(doc);
		return r;
	}
	if (json_object_get(doc, "tenant") || json_object_get(doc, "key")) {
		/* issue 15: {"tenant": T, "key": K} */
		r = 0;
		if ((r = iso_json_check_keys(doc, NULL, key_keys, err)) < 0 ||
		    (r = iso_json_get_string(doc, "tenant", NULL, true, &t, err)) < 0 ||
		    (r = iso_json_get_string(doc, "key", NULL, true, &k, err)) < 0)
			;
		else if (!iso_name_valid(t))
			r = iso_error_set(err, ISO_E_INVALID, "tenant", "not a tenant name");
		else if (!iso_idem_key_valid(k))
			r = iso_error_set(err, ISO_E_INVALID, "key",
			                  "expected 1-128 characters of [A-Za-z0-9._:-]");
		if (r == 0) {
			out->by_key = true;
			iso_strlcpy(out->tenant, t, sizeof(out->tenant));
			iso_strlcpy(out->key, k, sizeof(out->key));
		}
		json_decref(doc);
		return r;
	}
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "allocation", NULL, true, &a, err)) < 0 ||
	    (r = iso_json_get_int(doc, "member", NULL, true, 0, ISO_CODEC_MEMBER_MAX, &m, err)) <
	        0) {
		json_decref(doc);
		return r;
	}
	if (!agent_alloc_id_valid(a)) {
		json_decref(doc);
		return iso_error_set(
		    err, ISO_E_INVALID, "allocation",
		    "allocation: expected an allocation id (a- and 16 hex digits)");
	}
	iso_strlcpy(out->allocation, a, sizeof(out->allocation));
	out->member = (unsigned)m;
	json_decref(doc);
	return 0;
}

char *agent_answer_error(enum iso_errcode code, const char *message)
{
	json_t *o = json_pack("{s:s, s:s}", "error", iso_errcode_name(code), "message", message);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

static json_t *handle_json(const struct agent_sandboxes *s, const struct agent_table_entry *e)
{
	return json_pack("{s:s, s:i, s:I, s:s, s:s, s:b}", "name", e->sb.name, "holder_pid",
	                 e->sb.holder_pid, "holder_start", (json_int_t)e->sb.holder_start,
	                 "cgroup_root", s->cg.root, "cpus", e->cpus, "io_uring", e->io_uring);
}

/* The (tenant, key) answer: the member, its devices and P_Key, and its
 * sandbox's handle (null fields with the node's sandboxes off). The P_Key
 * index is read now, from the VF's table as the host shows it. */
static json_t *member_json(const struct agent_sandboxes *s, const struct agent_table_entry *e)
{
	json_t *o = s->real
	                ? handle_json(s, e)
	                : json_pack("{s:n, s:n, s:n, s:n, s:n, s:b}", "name", "holder_pid",
	                            "holder_start", "cgroup_root", "cpus", "io_uring", e->io_uring);
	char pkey[8], node_dir[sizeof(s->state_root) + ISO_NAME_MAX + 2];
	int index = -1;

	if (!o)
		return NULL;
	if (e->has_vf && e->pkey) {
		struct iso_error err = {0};
		snprintf(node_dir, sizeof(node_dir), "%s/%s", s->state_root, e->node);
		if (iso_agent_vf_pkey_index(&s->vf, node_dir, e->vf_device, e->vf_index, e->pkey,
		                            &index, &err) < 0)
			index = -1;
		snprintf(pkey, sizeof(pkey), "0x%04x", e->pkey);
	}
	if (json_object_set_new(o, "allocation", json_string(e->allocation)) < 0 ||
	    json_object_set_new(o, "member", json_integer(e->member)) < 0 ||
	    json_object_set_new(o, "ready", json_true()) < 0 ||
	    json_object_set_new(o, "cuda_visible_devices", json_string(e->cuda)) < 0 ||
	    json_object_set_new(o, "pkey", e->has_vf && e->pkey ? json_string(pkey) : json_null()) <
	        0 ||
	    json_object_set_new(o, "pkey_index", index >= 0 ? json_integer(index) : json_null()) <
	        0 ||
	    json_object_set_new(o, "sandbox_mode", json_string(s->real ? "real" : "off")) < 0 ||
	    json_object_set_new(o, "vni", e->cxi_vni ? json_integer(e->cxi_vni) : json_null()) <
	        0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

char *agent_socket_answer(struct agent_sandboxes *s, unsigned uid, const char *req, size_t len)
{
	char reason[ISO_AGENT_REASON_MAX + ISO_IDEM_KEY_MAX + ISO_NAME_MAX + 64] = "";
	_cleanup_free_ struct agent_table_entry *e = calloc(1, sizeof(*e));
	struct agent_request rq;
	struct iso_error err = {0};
	json_t *o;
	char *text;
	int r;

	if (!e)
		return NULL;
	if (uid != 0)
		return agent_answer_error(ISO_E_FORBIDDEN,
		                          "refused: only root may ask the agent (join a sandbox, "
		                          "admit an identity)");
	if (agent_request_parse(req, len, &rq, &err) < 0) {
		char msg[ISO_ERR_MSG_MAX + ISO_ERR_FIELD_MAX + 8];
		snprintf(msg, sizeof(msg), "%s%s%s", err.field, err.field[0] ? ": " : "",
		         err.message);
		return agent_answer_error(err.code, msg);
	}
	if (rq.cxi_admit) {
		if (!s->cxi)
			return agent_answer_error(ISO_E_UNAVAILABLE,
			                          "this agent has no CXI driver");
		if (agent_sandboxes_member(s, rq.allocation, rq.member, e, reason, sizeof(reason)) <
		    0)
			return agent_answer_error(ISO_E_NOT_FOUND, reason);
		return agent_cxi_admit_answer(s->cxi, e, rq.tenant, rq.uid, rq.gid);
	}
	if (rq.by_key)
		r = agent_sandboxes_lookup_key(s, rq.tenant, rq.key, e, reason, sizeof(reason));
	else
		r = agent_sandboxes_lookup(s, rq.allocation, rq.member, e, reason, sizeof(reason));
	if (r < 0)
		return agent_answer_error(r == -EAGAIN ? ISO_E_UNAVAILABLE : ISO_E_NOT_FOUND,
		                          reason);
	o = rq.by_key ? member_json(s, e) : handle_json(s, e);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}

/* ---- the server ---- */

struct agent_socket {
	struct agent_sandboxes *s;
	atomic_bool *stop;
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	pthread_t thread;
};

/* {"cni": ...} at the top level of an object (parsed strictly later). */
static bool is_cni_request(const char *buf, size_t len)
{
	json_error_t je;
	json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	bool yes = json_is_object(doc) && json_object_get(doc, "cni");

	json_decref(doc);
	return yes;
}

static void serve_one(struct agent_socket *sk, int fd, bool *handed)
{
	struct timeval tv = {IO_TIMEOUT_S, 0};
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	_cleanup_free_ char *buf = malloc(AGENT_CNI_REQUEST_MAX + 1);
	const size_t size = AGENT_CNI_REQUEST_MAX + 1;
	size_t len = 0;
	_cleanup_free_ char *answer = NULL;

	if (!buf)
		return;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		return;
	/* read also a stranger's request (bounded, unparsed): closing with
	 * unread bytes would reset the connection before the refusal arrives */
	for (;;) {
		ssize_t n = read(fd, buf + len, size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == size)
			break; /* over the limit: refused below */
	}
	/* issue 17: a CNI request ({"cni": VERB, ...}, up to 64 KiB for GC's
	 * list) is served on a thread of its own, which answers and closes;
	 * the other shapes stay at AGENT_REQUEST_MAX */
	if (cred.uid == 0 && len && is_cni_request(buf, len)) {
		int r = agent_cni_serve(sk->s, fd, buf, len);
		if (r == 0) {
			*handed = true;
			return;
		}
		answer = agent_answer_error(ISO_E_UNAVAILABLE,
		                            "the agent is busy (too many CNI requests)");
	} else
		answer = agent_socket_answer(sk->s, cred.uid, buf, len);
	if (cred.uid != 0)
		iso_log(ISO_LOG_WARN, "agent.socket_refused", "uid=%u pid=%d", cred.uid, cred.pid);
	if (answer) {
		size_t off = 0, total = strlen(answer);
		while (off < total) {
			ssize_t n = send(fd, answer + off, total - off, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			off += (size_t)n;
		}
	}
}

static void *socket_main(void *arg)
{
	struct agent_socket *sk = arg;

	while (!atomic_load(sk->stop)) {
		struct pollfd p = {sk->fd, POLLIN, 0};
		int c;

		if (poll(&p, 1, 200) <= 0)
			continue;
		c = accept4(sk->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		bool handed = false;
		serve_one(sk, c, &handed);
		if (!handed)
			close(c);
	}
	return NULL;
}

static int socket_path(const char *state_dir, char *buf, size_t size, struct iso_error *err)
{
	if (snprintf(buf, size, "%s/%s", state_dir, AGENT_SOCKET_NAME) >= (int)size)
		return iso_error_set(err, ISO_E_INVALID, "state_dir",
		                     "%s/%s: too long for a unix socket (%zu bytes)", state_dir,
		                     AGENT_SOCKET_NAME, size - 1);
	return 0;
}

int agent_socket_start(struct agent_sandboxes *s, const char *state_dir, atomic_bool *stop,
                       struct agent_socket **out, struct iso_error *err)
{
	_cleanup_free_ struct agent_socket *sk = calloc(1, sizeof(*sk));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int r;

	*out = NULL;
	if (!sk)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	sk->s = s;
	sk->stop = stop;
	if ((r = socket_path(state_dir, sk->path, sizeof(sk->path), err)) < 0)
		return r;
	/* a socket left by an earlier run goes; anything else there stays */
	if (lstat(sk->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return iso_error_set(err, ISO_E_INVALID, "state_dir",
			                     "%s exists and is not a socket", sk->path);
		unlink(sk->path);
	}
	iso_strlcpy(sa.sun_path, sk->path, sizeof(sa.sun_path));
	if ((sk->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "socket: %s",
		                     strerror(errno));
	/* chmod before listen: until then nobody can connect */
	if (bind(sk->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(sk->path, 0600) < 0 ||
	    listen(sk->fd, 64) < 0) {
		r = errno;
		close(sk->fd);
		unlink(sk->path);
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "%s: %s", sk->path,
		                     strerror(r));
	}
	if (pthread_create(&sk->thread, NULL, socket_main, sk) != 0) {
		close(sk->fd);
		unlink(sk->path);
		return iso_error_set(err, ISO_E_INTERNAL, "", "cannot start the socket's thread");
	}
	iso_log(ISO_LOG_INFO, "agent.socket", "path=%s", sk->path);
	*out = ISO_TAKE(sk);
	return 0;
}

void agent_socket_stop(struct agent_socket *sk)
{
	if (!sk)
		return;
	pthread_join(sk->thread, NULL);
	close(sk->fd);
	unlink(sk->path);
	free(sk);
}

/* ---- the client ---- */

/* An {"error","message"} answer as -errno with the agent's words. */
static int answer_refusal(json_t *doc, struct iso_error *err)
{
	static const char *const ekeys[] = {"error", "message", NULL};
	const char *code = NULL, *msg = NULL;
	enum iso_errcode c = ISO_E_INTERNAL;
	int r;

	if ((r = iso_json_check_keys(doc, NULL, ekeys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "error", NULL, true, &code, err)) < 0 ||
	    (r = iso_json_get_string(doc, "message", NULL, true, &msg, err)) < 0)
		return r;
	iso_errcode_parse(code, &c);
	return iso_error_set(err, c == ISO_OK ? ISO_E_INTERNAL : c, "", "%s", msg);
}

/* The handle's fields of an answer (`keys` the answer's whole key set). */
static int handle_parse(json_t *doc, const char *const *keys, struct iso_agent_sandbox_handle *h,
                        struct iso_error *err)
{
	const char *name = NULL, *root = NULL, *cpus = NULL;
	int64_t pid = 0, start = 0;
	bool uring = false;
	int r;

	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "name", NULL, true, &name, err)) < 0 ||
	    (r = iso_json_get_int(doc, "holder_pid", NULL, true, 1, INT_MAX, &pid, err)) < 0 ||
	    (r = iso_json_get_int(doc, "holder_start", NULL, true, 0, INT64_MAX, &start, err)) <
	        0 ||
	    (r = iso_json_get_string(doc, "cgroup_root", NULL, true, &root, err)) < 0 ||
	    (r = iso_json_get_string(doc, "cpus", NULL, true, &cpus, err)) < 0 ||
	    (r = iso_json_get_bool(doc, "io_uring", NULL, true, &uring, err)) < 0)
		return r;
	memset(h, 0, sizeof(*h));
	if (!iso_name_valid(name) || iso_strlcpy(h->sb.name, name, sizeof(h->sb.name)) < 0 ||
	    iso_strlcpy(h->cgroup_root, root, sizeof(h->cgroup_root)) < 0 ||
	    iso_strlcpy(h->cpus, cpus, sizeof(h->cpus)) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "",
		                     "the agent's answer holds a bad name");
	h->sb.holder_pid = (int)pid;
	h->sb.holder_start = (unsigned long long)start;
	h->io_uring = uring;
	return 0;
}

static const char *const handle_keys[] = {
    "name", "holder_pid", "holder_start", "cgroup_root", "cpus", "io_uring", NULL};

static int answer_parse(const char *text, size_t len, struct iso_agent_sandbox_handle *h,
                        struct iso_error *err)
{
	json_error_t je;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	int r;

	if (!doc || !json_is_object(doc)) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INTERNAL, "",
		                     "the agent's answer is not a JSON "
		                     "object");
	}
	r = json_object_get(doc, "error") ? answer_refusal(doc, err)
	                                  : handle_parse(doc, handle_keys, h, err);
	json_decref(doc);
	return r;
}

/* One request, one answer (at most AGENT_ANSWER_MAX bytes, into buf). */
static int ask(const char *state_dir, const char *req, size_t n, char *buf, size_t size,
               size_t *got_len, struct iso_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {(time_t)IO_TIMEOUT_S * 5, 0};
	_cleanup_close_ int fd = -1;
	size_t len = 0, off = 0;
	int r;

	if ((r = socket_path(state_dir, sa.sun_path, sizeof(sa.sun_path), err)) < 0)
		return r;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "state_dir",
		                     "cannot reach the agent at %s: %s", sa.sun_path,
		                     strerror(errno));
	while (off < n) {
		ssize_t w = send(fd, req + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return iso_error_set(err, ISO_E_UNAVAILABLE, "", "writing to the agent: %s",
			                     strerror(errno));
		off += (size_t)w;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t got = read(fd, buf + len, size - 1 - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return iso_error_set(err, ISO_E_UNAVAILABLE, "", "reading the agent: %s",
			                     strerror(errno));
		if (got == 0)
			break;
		len += (size_t)got;
		if (len == size - 1)
			return iso_error_set(err, ISO_E_INTERNAL, "",
			                     "the agent's answer is over %zu bytes", size - 2);
	}
	buf[len] = '\0';
	*got_len = len;
	return 0;
}

int iso_agent_sandbox_lookup(const char *state_dir, const char *allocation, unsigned member,
                             struct iso_agent_sandbox_handle *h, struct iso_error *err)
{
	char req[160], buf[AGENT_ANSWER_MAX + 1];
	size_t len = 0;
	int n, r;

	memset(h, 0, sizeof(*h));
	if (!agent_alloc_id_valid(allocation))
		return iso_error_set(
		    err, ISO_E_INVALID, "allocation",
		    "allocation: expected an allocation id (a- and 16 hex digits)");
	if (member > ISO_CODEC_MEMBER_MAX)
		return iso_error_set(err, ISO_E_INVALID, "member", "member: 0..%d",
		                     ISO_CODEC_MEMBER_MAX);
	n = snprintf(req, sizeof(req), "{\"allocation\":\"%s\",\"member\":%u}", allocation, member);
	if ((r = ask(state_dir, req, (size_t)n, buf, sizeof(buf), &len, err)) < 0)
		return r;
	return answer_parse(buf, len, h, err);
}

/* The (tenant, key) answer, strictly. */
static int member_parse(const char *text, size_t len, struct iso_agent_member_info *info,
                        struct iso_error *err)
{
	static const char *const keys[] = {
	    "allocation",   "member",      "ready", "cuda_visible_devices",
	    "pkey",         "pkey_index",  "name",  "holder_pid",
	    "holder_start", "cgroup_root", "cpus",  "io_uring",
	    "sandbox_mode", "vni",         NULL};
	json_error_t je;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	const char *alloc = NULL, *cuda = NULL, *pkey = NULL, *mode = NULL;
	int64_t member = 0, index = -1, vni = 0;
	bool ready = false;
	int r;

	if (!doc || !json_is_object(doc)) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INTERNAL, "",
		                     "the agent's answer is not a JSON object");
	}
	if (json_object_get(doc, "error")) {
		r = answer_refusal(doc, err);
		json_decref(doc);
		return r;
	}
	/* "vni": the member's tenant VNI on a Slingshot node, null or absent
	 * (an agent from before issue 17) when none */
	if (!json_is_null(json_object_get(doc, "vni")) &&
	    (r = iso_json_get_int(doc, "vni", NULL, false, 1, ISO_CXI_VNI_MAX, &vni, err)) < 0)
		goto out;
	info->has_vni = vni > 0;
	info->vni = (uint32_t)vni;
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "allocation", NULL, true, &alloc, err)) < 0 ||
	    (r = iso_json_get_int(doc, "member", NULL, true, 0, ISO_CODEC_MEMBER_MAX, &member,
	                          err)) < 0 ||
	    (r = iso_json_get_bool(doc, "ready", NULL, true, &ready, err)) < 0 ||
	    (r = iso_json_get_string(doc, "cuda_visible_devices", NULL, true, &cuda, err)) < 0 ||
	    (r = iso_json_get_string(doc, "pkey", NULL, false, &pkey, err)) < 0 ||
	    (r = iso_json_get_int(doc, "pkey_index", NULL, false, 0, 65535, &index, err)) < 0 ||
	    (r = iso_json_get_string(doc, "sandbox_mode", NULL, true, &mode, err)) < 0)
		goto out;
	r = -EINVAL;
	if (!agent_alloc_id_valid(alloc)) {
		iso_error_set(err, ISO_E_INTERNAL, "allocation",
		              "the agent's answer: allocation: not an allocation id");
		goto out;
	}
	if (strcmp(mode, "real") != 0 && strcmp(mode, "off") != 0) {
		iso_error_set(err, ISO_E_INTERNAL, "sandbox_mode",
		              "the agent's answer: sandbox_mode: not real or off");
		goto out;
	}
	if (!ready) {
		iso_error_set(err, ISO_E_INTERNAL, "ready",
		              "the agent's answer: ready false without a reason");
		goto out;
	}
	iso_strlcpy(info->allocation, alloc, sizeof(info->allocation));
	info->member = (unsigned)member;
	info->ready = true;
	if (iso_strlcpy(info->cuda_visible_devices, cuda, sizeof(info->cuda_visible_devices)) < 0) {
		iso_error_set(err, ISO_E_INTERNAL, "cuda_visible_devices",
		              "the agent's answer: cuda_visible_devices: too long");
		goto out;
	}
	if (pkey) {
		char *end = NULL;
		unsigned long v;
		errno = 0;
		v = strtoul(pkey, &end, 16);
		if (strncmp(pkey, "0x", 2) != 0 || strlen(pkey) != 6 || errno || *end || v == 0 ||
		    v > 0xffff) {
			iso_error_set(err, ISO_E_INTERNAL, "pkey",
			              "the agent's answer: pkey: not 0x and 4 hex digits");
			goto out;
		}
		info->has_pkey = true;
		info->pkey = (uint16_t)v;
	}
	info->pkey_index = (int)index;
	info->sandbox_real = strcmp(mode, "real") == 0;
	if (info->sandbox_real) {
		if ((r = handle_parse(doc, keys, &info->sandbox, err)) < 0)
			goto out;
		info->has_sandbox = true;
	} else {
		bool uring = false;
		static const char *const nulls[] = {"name", "holder_pid", "holder_start",
		                                    "cgroup_root", "cpus"};
		for (size_t i = 0; i < ISO_ARRAY_SIZE(nulls); i++)
			if (!json_is_null(json_object_get(doc, nulls[i]))) {
				iso_error_set(
				    err, ISO_E_INTERNAL, nulls[i],
				    "the agent's answer: %s: a sandbox with sandboxes off",
				    nulls[i]);
				goto out;
			}
		if ((r = iso_json_get_bool(doc, "io_uring", NULL, true, &uring, err)) < 0)
			goto out;
		info->sandbox.io_uring = uring;
	}
	r = 0;
out:
	json_decref(doc);
	return r;
}

int iso_agent_member_lookup(const char *state_dir, const char *tenant, const char *key,
                            struct iso_agent_member_info *info, struct iso_error *err)
{
	char req[ISO_NAME_MAX + ISO_IDEM_KEY_MAX + 64];
	_cleanup_free_ char *buf = malloc(AGENT_ANSWER_MAX + 1);
	size_t len = 0;
	int n, r;

	memset(info, 0, sizeof(*info));
	info->pkey_index = -1;
	if (!buf)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if (!tenant || !iso_name_valid(tenant))
		return iso_error_set(err, ISO_E_INVALID, "tenant",
		                     "tenant: not a tenant name (\"%s\")", tenant ? tenant : "");
	if (!key || !iso_idem_key_valid(key))
		return iso_error_set(err, ISO_E_INVALID, "key",
		                     "key: expected 1-128 characters of [A-Za-z0-9._:-]");
	/* both are of characters JSON needs no escape for */
	n = snprintf(req, sizeof(req), "{\"tenant\":\"%s\",\"key\":\"%s\"}", tenant, key);
	if ((r = ask(state_dir, req, (size_t)n, buf, AGENT_ANSWER_MAX + 1, &len, err)) < 0)
		return r;
	if ((r = member_parse(buf, len, info, err)) < 0) {
		/* nothing half-filled; "not ready yet (why)" kept as the reason */
		memset(info, 0, sizeof(*info));
		info->pkey_index = -1;
		if (err && err->code == ISO_E_UNAVAILABLE)
			iso_strlcpy(info->reason, err->message, sizeof(info->reason));
	}
	return r;
}

/* The cxi_admit answer, strictly. */
static int grant_parse(const char *text, size_t len, struct iso_agent_cxi_grant *g,
                       struct iso_error *err)
{
	static const char *const keys[] = {"allocation", "member", "vni",    "uid",
	                                   "gid",        "svc_id", "device", NULL};
	json_error_t je;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	const char *alloc = NULL, *dev = NULL;
	int64_t member = 0, vni = 0, uid = 0, gid = 0, svc = 0;
	int r;

	if (!doc || !json_is_object(doc)) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INTERNAL, "",
		                     "the agent's answer is not a JSON object");
	}
	if (json_object_get(doc, "error")) {
		r = answer_refusal(doc, err);
		json_decref(doc);
		return r;
	}
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "allocation", NULL, true, &alloc, err)) < 0 ||
	    (r = iso_json_get_int(doc, "member", NULL, true, 0, ISO_CODEC_MEMBER_MAX, &member,
	                          err)) < 0 ||
	    (r = iso_json_get_int(doc, "vni", NULL, true, 1, ISO_CXI_VNI_MAX, &vni, err)) < 0 ||
	    (r = iso_json_get_int(doc, "uid", NULL, true, 1, (int64_t)UINT32_MAX - 1, &uid, err)) <
	        0 ||
	    (r = iso_json_get_int(doc, "gid", NULL, true, 1, (int64_t)UINT32_MAX - 1, &gid, err)) <
	        0 ||
	    (r = iso_json_get_int(doc, "svc_id", NULL, true, 2, UINT32_MAX, &svc, err)) < 0 ||
	    (r = iso_json_get_string(doc, "device", NULL, true, &dev, err)) < 0)
		goto out;
	r = -EINVAL;
	if (!agent_alloc_id_valid(alloc) || strncmp(dev, "cxi", 3) != 0 ||
	    iso_strlcpy(g->device, dev, sizeof(g->device)) < 0) {
		iso_error_set(err, ISO_E_INTERNAL,
		              !agent_alloc_id_valid(alloc) ? "allocation" : "device",
		              "the agent's answer: %s: not what was asked",
		              !agent_alloc_id_valid(alloc) ? "allocation" : "device");
		goto out;
	}
	g->vni = (uint32_t)vni;
	g->svc_id = (uint32_t)svc;
	r = 0;
out:
	json_decref(doc);
	return r;
}

int iso_agent_cxi_admit(const char *state_dir, const char *tenant, const char *allocation,
                        unsigned member, uint32_t uid, uint32_t gid, struct iso_agent_cxi_grant *g,
                        struct iso_error *err)
{
	char req[ISO_NAME_MAX + 192], buf[1024];
	size_t len = 0;
	int n, r;

	memset(g, 0, sizeof(*g));
	if (!tenant || !iso_name_valid(tenant))
		return iso_error_set(err, ISO_E_INVALID, "tenant", "tenant: not a tenant name");
	if (!allocation || !agent_alloc_id_valid(allocation))
		return iso_error_set(
		    err, ISO_E_INVALID, "allocation",
		    "allocation: expected an allocation id (a- and 16 hex digits)");
	if (member > ISO_CODEC_MEMBER_MAX)
		return iso_error_set(err, ISO_E_INVALID, "member", "member: 0..%d",
		                     ISO_CODEC_MEMBER_MAX);
	if (uid == 0 || uid == UINT32_MAX || gid == 0 || gid == UINT32_MAX)
		return iso_error_set(err, ISO_E_INVALID,
		                     uid == 0 || uid == UINT32_MAX ? "uid" : "gid",
		                     "%s: %u refused (a CXI service never admits root)",
		                     uid == 0 || uid == UINT32_MAX ? "uid" : "gid",
		                     uid == 0 || uid == UINT32_MAX ? uid : gid);
	/* tenant and allocation are of characters JSON needs no escape for */
	n = snprintf(req, sizeof(req),
	             "{\"op\":\"cxi_admit\",\"tenant\":\"%s\",\"allocation\":\"%s\","
	             "\"member\":%u,\"uid\":%u,\"gid\":%u}",
	             tenant, allocation, member, uid, gid);
	if ((r = ask(state_dir, req, (size_t)n, buf, sizeof(buf), &len, err)) < 0)
		return r;
	if ((r = grant_parse(buf, len, g, err)) < 0)
		memset(g, 0, sizeof(*g));
	return r;
}

int iso_agent_sandbox_join(const char *state_dir, const char *allocation, unsigned member,
                           const struct iso_sandbox_identity *id, struct iso_error *err)
{
	struct iso_agent_sandbox_handle h = {0};
	struct iso_seccomp_policy pol = {0};
	struct iso_cgroup cg;
	int r;

	if ((r = iso_agent_sandbox_lookup(state_dir, allocation, member, &h, err)) < 0 ||
	    (r = iso_cgroup_open(h.cgroup_root, &cg, err)) < 0)
		return r;
	pol.allow_io_uring = h.io_uring;
	return iso_sandbox_enter(&cg, &h.sb, id, &pol, err);
}

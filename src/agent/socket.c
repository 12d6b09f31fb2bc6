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

static bool alloc_id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n != 18 || s[0] != 'a' || s[1] != '-')
		return false;
	for (size_t i = 2; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int agent_request_parse(const char *text, size_t len, char *allocation, size_t alloc_size,
                        unsigned *member, struct iso_error *err)
{
	static const char *const keys[] = {"allocation", "member", NULL};
	json_error_t je;
	json_t *doc;
	const char *a = NULL;
	int64_t m = 0;
	int r;

	if (len > AGENT_REQUEST_MAX)
		return iso_error_set(err, ISO_E_TOO_LARGE, "", "request over %d bytes",
		                     AGENT_REQUEST_MAX);
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!doc)
		return iso_error_set(err, ISO_E_INVALID, "", "not JSON: %s", je.text);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INVALID, "", "expected a JSON object");
	}
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "allocation", NULL, true, &a, err)) < 0 ||
	    (r = iso_json_get_int(doc, "member", NULL, true, 0, ISO_CODEC_MEMBER_MAX, &m, err)) <
	        0) {
		json_decref(doc);
		return r;
	}
	if (!alloc_id_valid(a) || strlen(a) >= alloc_size) {
		json_decref(doc);
		return iso_error_set(
		    err, ISO_E_INVALID, "allocation",
		    "allocation: expected an allocation id (a- and 16 hex digits)");
	}
	iso_strlcpy(allocation, a, alloc_size);
	*member = (unsigned)m;
	json_decref(doc);
	return 0;
}

static char *answer_error(enum iso_errcode code, const char *message)
{
	json_t *o = json_pack("{s:s, s:s}", "error", iso_errcode_name(code), "message", message);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

char *agent_socket_answer(struct agent_sandboxes *s, unsigned uid, const char *req, size_t len)
{
	char alloc[ISO_AGENT_ALLOC_MAX] = "", reason[ISO_AGENT_REASON_MAX + 32] = "";
	struct agent_table_entry e = {0};
	struct iso_error err = {0};
	unsigned member;
	json_t *o;
	char *text;
	int r;

	if (uid != 0)
		return answer_error(ISO_E_FORBIDDEN, "refused: only root may join a sandbox");
	if (agent_request_parse(req, len, alloc, sizeof(alloc), &member, &err) < 0) {
		char msg[ISO_ERR_MSG_MAX + ISO_ERR_FIELD_MAX + 8];
		snprintf(msg, sizeof(msg), "%s%s%s", err.field, err.field[0] ? ": " : "",
		         err.message);
		return answer_error(err.code, msg);
	}
	r = agent_sandboxes_lookup(s, alloc, member, &e, reason, sizeof(reason));
	if (r < 0)
		return answer_error(r == -EAGAIN ? ISO_E_UNAVAILABLE : ISO_E_NOT_FOUND, reason);
	o = json_pack("{s:s, s:i, s:I, s:s, s:s, s:b}", "name", e.sb.name, "holder_pid",
	              e.sb.holder_pid, "holder_start", (json_int_t)e.sb.holder_start, "cgroup_root",
	              s->cg.root, "cpus", e.cpus, "io_uring", e.io_uring);
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

static void serve_one(struct agent_socket *sk, int fd)
{
	struct timeval tv = {IO_TIMEOUT_S, 0};
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	char buf[AGENT_REQUEST_MAX + 1];
	size_t len = 0;
	_cleanup_free_ char *answer = NULL;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		return;
	/* read also a stranger's request (bounded, unparsed): closing with
	 * unread bytes would reset the connection before the refusal arrives */
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf))
			break; /* over the limit: refused below */
	}
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
		serve_one(sk, c);
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

static int answer_parse(const char *text, size_t len, struct iso_agent_sandbox_handle *h,
                        struct iso_error *err)
{
	static const char *const keys[] = {
	    "name", "holder_pid", "holder_start", "cgroup_root", "cpus", "io_uring", NULL};
	static const char *const ekeys[] = {"error", "message", NULL};
	json_error_t je;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	const char *name = NULL, *root = NULL, *cpus = NULL, *code = NULL, *msg = NULL;
	int64_t pid = 0, start = 0;
	bool uring = false;
	int r;

	if (!doc || !json_is_object(doc)) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INTERNAL, "",
		                     "the agent's answer is not a JSON "
		                     "object");
	}
	if (json_object_get(doc, "error")) {
		enum iso_errcode c = ISO_E_INTERNAL;
		if ((r = iso_json_check_keys(doc, NULL, ekeys, err)) < 0 ||
		    (r = iso_json_get_string(doc, "error", NULL, true, &code, err)) < 0 ||
		    (r = iso_json_get_string(doc, "message", NULL, true, &msg, err)) < 0) {
			json_decref(doc);
			return r;
		}
		iso_errcode_parse(code, &c);
		r = iso_error_set(err, c == ISO_OK ? ISO_E_INTERNAL : c, "", "%s", msg);
		json_decref(doc);
		return r;
	}
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0 ||
	    (r = iso_json_get_string(doc, "name", NULL, true, &name, err)) < 0 ||
	    (r = iso_json_get_int(doc, "holder_pid", NULL, true, 1, INT_MAX, &pid, err)) < 0 ||
	    (r = iso_json_get_int(doc, "holder_start", NULL, true, 0, INT64_MAX, &start, err)) <
	        0 ||
	    (r = iso_json_get_string(doc, "cgroup_root", NULL, true, &root, err)) < 0 ||
	    (r = iso_json_get_string(doc, "cpus", NULL, true, &cpus, err)) < 0 ||
	    (r = iso_json_get_bool(doc, "io_uring", NULL, true, &uring, err)) < 0) {
		json_decref(doc);
		return r;
	}
	memset(h, 0, sizeof(*h));
	if (!iso_name_valid(name) || iso_strlcpy(h->sb.name, name, sizeof(h->sb.name)) < 0 ||
	    iso_strlcpy(h->cgroup_root, root, sizeof(h->cgroup_root)) < 0 ||
	    iso_strlcpy(h->cpus, cpus, sizeof(h->cpus)) < 0) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INTERNAL, "",
		                     "the agent's answer holds a bad name");
	}
	h->sb.holder_pid = (int)pid;
	h->sb.holder_start = (unsigned long long)start;
	h->io_uring = uring;
	json_decref(doc);
	return 0;
}

int iso_agent_sandbox_lookup(const char *state_dir, const char *allocation, unsigned member,
                             struct iso_agent_sandbox_handle *h, struct iso_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {(time_t)IO_TIMEOUT_S * 5, 0};
	_cleanup_close_ int fd = -1;
	char req[160], buf[AGENT_ANSWER_MAX + 1];
	size_t len = 0, off = 0;
	int n, r;

	memset(h, 0, sizeof(*h));
	if ((r = socket_path(state_dir, sa.sun_path, sizeof(sa.sun_path), err)) < 0)
		return r;
	if (!alloc_id_valid(allocation))
		return iso_error_set(
		    err, ISO_E_INVALID, "allocation",
		    "allocation: expected an allocation id (a- and 16 hex digits)");
	if (member > ISO_CODEC_MEMBER_MAX)
		return iso_error_set(err, ISO_E_INVALID, "member", "member: 0..%d",
		                     ISO_CODEC_MEMBER_MAX);
	n = snprintf(req, sizeof(req), "{\"allocation\":\"%s\",\"member\":%u}", allocation, member);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "state_dir",
		                     "cannot reach the agent at %s: %s", sa.sun_path,
		                     strerror(errno));
	while (off < (size_t)n) {
		ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return iso_error_set(err, ISO_E_UNAVAILABLE, "", "writing to the agent: %s",
			                     strerror(errno));
		off += (size_t)w;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t got = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return iso_error_set(err, ISO_E_UNAVAILABLE, "", "reading the agent: %s",
			                     strerror(errno));
		if (got == 0)
			break;
		len += (size_t)got;
		if (len == sizeof(buf) - 1)
			return iso_error_set(err, ISO_E_INTERNAL, "",
			                     "the agent's answer is over %d bytes",
			                     AGENT_ANSWER_MAX);
	}
	return answer_parse(buf, len, h, err);
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

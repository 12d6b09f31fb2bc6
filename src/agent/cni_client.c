/* cni_client.c: the CNI plugin's half of the agent socket's CNI shape
 * (issue 17; the agent's half is cni.c, docs/agent.md "CNI attachments").
 * A file of its own so that build/cni/isostack-cni links only this and
 * jansson: the plugin starts for every pod, and linking the agent's side
 * would load libcurl, libnl and libnftables into every start. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "isostack/agent.h"

#define CNI_ANSWER_TIMEOUT_S 35 /* the agent's own limits (10 s waits, 10 s HTTP) and more */

int iso_agent_cni_request(const char *socket_path, const json_t *req, json_t **answer,
                          struct iso_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {CNI_ANSWER_TIMEOUT_S, 0};
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL, *buf = NULL;
	size_t len = 0, off = 0, n, cap = 65536;
	json_error_t je;

	*answer = NULL;
	if (!socket_path || iso_strlcpy(sa.sun_path, socket_path, sizeof(sa.sun_path)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "agentSocket",
		                     "agentSocket: too long for a unix socket");
	if (!(text = json_dumps(req, JSON_COMPACT)) || !(buf = malloc(cap + 1)))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	n = strlen(text);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "agentSocket",
		                     "cannot reach the agent at %s: %s", socket_path,
		                     strerror(errno));
	while (off < n) {
		ssize_t w = send(fd, text + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return iso_error_set(err, ISO_E_UNAVAILABLE, "agentSocket",
			                     "writing to the agent: %s", strerror(errno));
		off += (size_t)w;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t got = read(fd, buf + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return iso_error_set(err, ISO_E_UNAVAILABLE, "agentSocket",
			                     "reading the agent's answer: %s", strerror(errno));
		if (got == 0)
			break;
		len += (size_t)got;
		if (len == cap)
			return iso_error_set(err, ISO_E_INTERNAL, "",
			                     "the agent's answer is too long");
	}
	if (len == 0)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "agentSocket",
		                     "the agent closed the connection without an answer");
	json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INTERNAL, "",
		                     "the agent's answer is not a JSON object");
	}
	const char *code = json_string_value(json_object_get(doc, "error"));
	if (code) {
		const char *msg = json_string_value(json_object_get(doc, "message"));
		enum iso_errcode c = ISO_E_INTERNAL;
		iso_errcode_parse(code, &c);
		iso_error_set(err, c == ISO_OK ? ISO_E_INTERNAL : c, "", "%s", msg ? msg : code);
		json_decref(doc);
		return -EIO;
	}
	*answer = doc;
	return 0;
}

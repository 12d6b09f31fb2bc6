/* conn_limits.c: connection policy, so that slow or numerous clients cannot
 * take the API away from everyone else. libmicrohttpd's own timeout restarts
 * on every byte, so 1,000 connections trickling a byte a second held every
 * slot. Here:
 *  - a per-address limit, checked when a connection is accepted;
 *  - a deadline for the request head, counted from the accept (or from the
 *    end of the previous request on a kept-alive connection) and enforced
 *    however slowly bytes trickle in: the daemon's loop sweeps them on every
 *    tick (api_limits_sweep) and shuts such sockets down;
 *  - a reserve: connections still waiting for their head may hold at most
 *    max - reserve slots; a new connection beyond that pushes out the one
 *    that has waited longest, so a client that sends its head at once (a
 *    health check, an authenticated call) still gets in;
 *  - one log line per limit and 10 s, with the count of the ones not logged.
 * Everything here runs on the daemon's one loop thread (src/api/loop.c), as
 * libmicrohttpd's callbacks do: libmicrohttpd closes a socket only after its
 * CLOSED notification, so the sweep never shuts down a descriptor that was
 * reused. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "api/conn_limits.h"

#define LOG_EVERY_NS (10ull * 1000 * 1000 * 1000)

struct api_conn {
	struct api_conn *prev, *next;   /* every connection */
	struct api_conn *wprev, *wnext; /* waiting for a head, oldest first */
	struct sockaddr_storage addr;
	int fd;
	bool waiting;
	uint64_t since_ns; /* waiting since */
};

enum limit_kind { LIMIT_ADDRESS, LIMIT_HEADER_TIMEOUT, LIMIT_RESERVE, LIMIT_KINDS };

struct api_limits {
	struct api_limits_config cfg;
	struct api_conn *all;
	struct api_conn *whead, *wtail;
	unsigned n_conns, n_waiting;
	struct {
		uint64_t last_ns;
		unsigned suppressed;
	} log[LIMIT_KINDS];
};

static bool same_address(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
	if (b->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
		              &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
		              sizeof(struct in6_addr)) == 0;
	return true; /* other families (unix sockets) count as one address */
}

static void format_address(const struct sockaddr *sa, char *buf, size_t size)
{
	buf[0] = '\0';
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
		          (socklen_t)size);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
		          buf, (socklen_t)size);
	if (!buf[0])
		iso_strlcpy(buf, "-", size);
}

/* One line per limit and LOG_EVERY_NS. */
static void log_limit(struct api_limits *l, enum limit_kind kind, const struct sockaddr *sa)
{
	static const char *const events[] = {"http_conn_limit_address", "http_header_timeout",
	                                     "http_conn_reserve"};
	static const char *const what[] = {
	    "connections from one address at the limit; new ones refused",
	    "request head not complete within the deadline; connection closed",
	    "connections waiting for a head filled all but the reserve; the oldest closed"};
	uint64_t now = iso_mono_ns();
	char addr[INET6_ADDRSTRLEN];

	if (l->log[kind].last_ns && now - l->log[kind].last_ns < LOG_EVERY_NS) {
		l->log[kind].suppressed++;
		return;
	}
	format_address(sa, addr, sizeof(addr));
	iso_log(ISO_LOG_WARN, events[kind],
	        "source=%s limit=%u connections=%u waiting=%u not_logged=%u message=\"%s\"", addr,
	        kind == LIMIT_ADDRESS          ? l->cfg.per_address
	        : kind == LIMIT_HEADER_TIMEOUT ? l->cfg.header_timeout_ms
	                                       : l->cfg.max_connections - l->cfg.reserve,
	        l->n_conns, l->n_waiting, l->log[kind].suppressed, what[kind]);
	l->log[kind].last_ns = now;
	l->log[kind].suppressed = 0;
}

static void wait_unlink(struct api_limits *l, struct api_conn *c)
{
	if (!c->waiting)
		return;
	if (c->wprev)
		c->wprev->wnext = c->wnext;
	else
		l->whead = c->wnext;
	if (c->wnext)
		c->wnext->wprev = c->wprev;
	else
		l->wtail = c->wprev;
	c->wprev = c->wnext = NULL;
	c->waiting = false;
	l->n_waiting--;
}

static void wait_append(struct api_limits *l, struct api_conn *c)
{
	wait_unlink(l, c);
	c->since_ns = iso_mono_ns();
	c->wprev = l->wtail;
	if (l->wtail)
		l->wtail->wnext = c;
	else
		l->whead = c;
	l->wtail = c;
	c->waiting = true;
	l->n_waiting++;
}

/* Closes a connection outside libmicrohttpd's callbacks: it reads the end of
 * the stream and cleans up (and notifies CLOSED) on its own. */
static void cut(struct api_limits *l, struct api_conn *c, enum limit_kind why)
{
	wait_unlink(l, c);
	log_limit(l, why, (const struct sockaddr *)&c->addr);
	shutdown(c->fd, SHUT_RDWR);
}

void api_limits_sweep(struct api_limits *l)
{
	uint64_t deadline_ns = (uint64_t)l->cfg.header_timeout_ms * 1000000ull;
	uint64_t now = iso_mono_ns();

	while (l->whead && now - l->whead->since_ns >= deadline_ns)
		cut(l, l->whead, LIMIT_HEADER_TIMEOUT);
}

int api_limits_new(const struct api_limits_config *cfg, struct api_limits **out,
                   struct iso_error *err)
{
	struct api_limits *l;

	if (cfg->max_connections < 2 || cfg->reserve >= cfg->max_connections ||
	    cfg->per_address < 1 || cfg->header_timeout_ms < 1)
		return iso_error_set(err, ISO_E_INVALID, "connections",
		                     "connection limits: need max >= 2, reserve < max, "
		                     "per-address >= 1 and a header timeout > 0");
	l = calloc(1, sizeof(*l));
	if (!l)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	l->cfg = *cfg;
	*out = l;
	return 0;
}

void api_limits_free(struct api_limits *l)
{
	if (!l)
		return;
	while (l->all) {
		struct api_conn *c = l->all;
		l->all = c->next;
		free(c);
	}
	free(l);
}

enum MHD_Result api_limits_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct api_limits *l = cls;
	unsigned same = 0;
	enum MHD_Result ok;
	(void)addrlen;

	for (struct api_conn *c = l->all; c; c = c->next)
		same += same_address(&c->addr, addr);
	ok = same < l->cfg.per_address ? MHD_YES : MHD_NO;
	if (!ok)
		log_limit(l, LIMIT_ADDRESS, addr);
	return ok;
}

void api_limits_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
	struct api_limits *l = cls;
	struct api_conn *c = *socket_context;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd =
		    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ad =
		    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		c = calloc(1, sizeof(*c));
		if (!c)
			return; /* not tracked: only its address slot goes uncounted */
		c->fd = fd ? fd->connect_fd : -1;
		if (ad && ad->client_addr)
			memcpy(&c->addr, ad->client_addr,
			       ad->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
			                                              : sizeof(struct sockaddr_in));
		c->next = l->all;
		if (l->all)
			l->all->prev = c;
		l->all = c;
		l->n_conns++;
		wait_append(l, c);
		/* Past the waiting share: the longest waiter makes room (never this one). */
		while (l->n_waiting > l->cfg.max_connections - l->cfg.reserve && l->whead != c)
			cut(l, l->whead, LIMIT_RESERVE);
		*socket_context = c;
		return;
	}
	if (!c)
		return;
	wait_unlink(l, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		l->all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	l->n_conns--;
	free(c);
	*socket_context = NULL;
}

static struct api_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void api_limits_head_done(struct api_limits *l, struct MHD_Connection *conn)
{
	struct api_conn *c = conn_of(conn);

	if (!c)
		return;
	wait_unlink(l, c);
}

void api_limits_request_done(struct api_limits *l, struct MHD_Connection *conn)
{
	struct api_conn *c = conn_of(conn);

	if (!c)
		return;
	wait_append(l, c); /* kept alive: the next head has its own deadline */
}

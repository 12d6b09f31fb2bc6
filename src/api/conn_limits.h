/* conn_limits.h: connection policy for the API server (conn_limits.c): a
 * per-address limit, a deadline for the request head, and a reserve of slots
 * that clients still waiting for their head cannot take. */
#ifndef ISOSTACK_API_CONN_LIMITS_H
#define ISOSTACK_API_CONN_LIMITS_H

#include <microhttpd.h>

#include "isostack/util.h"

struct api_limits_config {
	unsigned max_connections;   /* libmicrohttpd's connection limit */
	unsigned per_address;       /* open connections from one client address */
	unsigned reserve;           /* slots that connections waiting for a head cannot hold */
	unsigned header_timeout_ms; /* from accept (or the previous reply) to a complete head */
};

struct api_limits;

int api_limits_new(const struct api_limits_config *cfg, struct api_limits **out,
                   struct iso_error *err);
void api_limits_free(struct api_limits *l);

/* libmicrohttpd callbacks: MHD_OPTION_APPLY_ACCEPT_POLICY (first argument)
 * and MHD_OPTION_NOTIFY_CONNECTION, both with the api_limits as cls. */
enum MHD_Result api_limits_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void api_limits_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
/* The connection's head is complete / its request is answered (kept alive). */
void api_limits_head_done(struct api_limits *l, struct MHD_Connection *conn);
void api_limits_request_done(struct api_limits *l, struct MHD_Connection *conn);
/* Closes the connections whose head is past its deadline (on every tick). */
void api_limits_sweep(struct api_limits *l);

#endif

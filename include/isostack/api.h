/* api.h: the REST API server (libmicrohttpd + jansson), versioned under /v1.
 * One internal thread serves every request and is the only thread that
 * touches the controller, as Redis does with its single-threaded core.
 * Contract: docs/api.md and docs/openapi.yaml. */
#ifndef ISOSTACK_API_H
#define ISOSTACK_API_H

#include "isostack/controller.h"

#define ISO_API_MAX_BODY (64 * 1024)

struct iso_api_config {
	const char *listen;   /* "HOST:PORT" or "[V6]:PORT"; port 0 picks a free one */
	const char *tls_cert; /* PEM file paths; both or neither */
	const char *tls_key;
	bool allow_remote_http; /* plain HTTP on a non-loopback address */
	/* connection policy (docs/api.md, "Slow clients"); 0 takes the default */
	unsigned max_connections;         /* default 1000 */
	unsigned per_address_connections; /* default 64 */
	unsigned connection_reserve;      /* default max / 8 */
	unsigned header_timeout_ms;       /* default 10000 */
};

struct iso_api;

int iso_api_start(const struct iso_api_config *cfg, struct iso_controller *ctl,
                  struct iso_api **out, struct iso_error *err);
void iso_api_stop(struct iso_api *api);
/* The daemon's one event loop (src/api/loop.c, docs/architecture.md): serves
 * the API, ticks the controller every 50 ms and finishes deferred work, all
 * on the calling thread, until SIGINT or SIGTERM, which the caller must have
 * blocked in every thread (before iso_controller_open and iso_api_start).
 * Then it stops accepting, answers what waits (held refusals, long polls, a
 * deferred request) and returns the signal's number; -errno with err set
 * when the loop itself fails. */
int iso_api_run(struct iso_api *api, struct iso_error *err);
int iso_api_port(const struct iso_api *api);
bool iso_api_tls(const struct iso_api *api);

#endif

/* api.h: the REST API server (libmicrohttpd + jansson), versioned under /v1.
 * One internal thread serves every request and is the only thread that
 * touches the controller, as Redis does with its single-threaded core.
 * Contract: docs/api.md and docs/openapi.yaml. */
#ifndef ISOSTACK_API_H
#define ISOSTACK_API_H

#include "isostack/controller.h"
#include "isostack/store.h"

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
	/* this daemon's URL as clients reach it (GET /v1/healthz "leader");
	 * NULL: http(s)://LISTEN */
	const char *advertise_url;
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
/* Several isostackd on one PostgreSQL (docs/store.md, "High availability"):
 * with a lease set, the loop renews or seeks it every tick. A follower runs
 * without a controller (ctl NULL): it answers GET /v1/healthz and refuses
 * everything else with 503 not_leader naming the leader. iso_api_run then
 * also returns ISO_API_ELECTED when this process takes the lease (the caller
 * opens the controller and attaches it, then runs the loop again), and
 * ISO_API_DEPOSED, after the stop's drain, when a leader lost it (the caller
 * drops its state and starts again as a follower). */
#define ISO_API_ELECTED 1000
#define ISO_API_DEPOSED 1001
void iso_api_set_lease(struct iso_api *api, struct iso_lease *lease);
void iso_api_attach(struct iso_api *api, struct iso_controller *ctl);
int iso_api_port(const struct iso_api *api);
bool iso_api_tls(const struct iso_api *api);

#endif

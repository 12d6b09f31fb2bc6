/* internal.h: one HTTP request as the handlers see it, and the helpers they
 * share for strict JSON input and for encoding model objects. */
#ifndef ISOSTACK_API_INTERNAL_H
#define ISOSTACK_API_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>

#include "isostack/api.h"
#include "isostack/codec.h"

#define API_MAX_SEGS      8
#define API_DEFAULT_LIMIT 100
#define API_MAX_LIMIT     1000

/* Request-head limits, enforced with JSON errors before libmicrohttpd's own
 * (larger) ones are reached (docs/api.md, "Protocol limits"). */
#define API_MAX_TARGET       8192        /* request target (path and query), bytes: 414 */
#define API_MAX_QUERY_PARAMS 32          /* query parameters: 400 */
#define API_MAX_HEADERS      64          /* header lines: 431 */
#define API_MAX_HEADER_BYTES (16 * 1024) /* names and values together: 431 */

struct api_kv {
	char *name;
	char *value; /* "" for a bare key */
};

struct api_request;
/* Work a handler defers off the loop thread, and its end on it (api_defer). */
typedef void (*api_deferred_fn)(struct api_request *r, void *arg);

struct api_request {
	struct iso_controller *ctl;
	struct iso_api *api;         /* NULL for api_handle_raw */
	struct MHD_Connection *conn; /* NULL for api_handle_raw; server.c's glue only */
	char method[16];
	char *target; /* the request target as received: path and query, undecoded */
	bool target_too_long;
	char path[512];          /* decoded path; "" when it is too long (matches no route) */
	char *seg[API_MAX_SEGS]; /* into path_copy */
	int n_seg;
	char path_copy[512];
	char request_id[72];
	char allow[64];    /* methods of the path, for a 405 */
	int retry_after_s; /* for a 429: when to try again (Retry-After) */
	struct iso_principal who;

	/* collected once (from MHD or from the raw call), read by everything after */
	struct api_kv *query;
	int n_query;
	struct api_kv *headers;
	int n_headers;
	size_t header_bytes;
	bool too_many_headers;

	char *body;
	size_t body_len;
	bool body_too_large;

	/* set by the head: the route found, and whether the reply is already decided */
	const void *route;
	bool head_done;
	uint64_t t0_ns, us;         /* the handler's start and time, for the log */
	api_deferred_fn defer_fn;   /* set by api_defer: the work, on the worker */
	api_deferred_fn defer_done; /* ...and its end, back on the loop thread */
	void *defer_arg;
	/* group commit: a reply decided while a commit was not yet durable
	 * waits, suspended, in this list for the loop's flush (api_sync) */
	struct api_request *sync_next;
	bool deferred_done;
	bool parked;           /* suspended until the controller answers (api_park) */
	int64_t hold_until_ns; /* a held 429 (server.c, hold_refusal) goes out then */
	bool held_done;        /* ...and it has been resumed to go */
	bool sync_done;        /* resumed by the group commit's flush (sync_next) */

	/* reply: a handler sets status and reply (owned) or fails with err */
	int status;
	json_t *reply;
	struct iso_error err;
	/* a protocol error whose status has no iso_errcode (414, 431) */
	int err_status;
	const char *err_code;
	char leader[256];                    /* a follower's not_leader: X-Isostack-Leader */
	char set_cookie[ISO_TOKEN_MAX + 96]; /* a Set-Cookie header (POST /neutron/login) */
};

/* A handler returns 0 with r->status/r->reply set, or a negative errno with r->err set. */
typedef int (*api_handler)(struct api_request *r);

/* ---- input ---- */
/* Parses the body as a JSON object. An empty body is `{}` when allow_empty. */
int api_body_object(struct api_request *r, bool allow_empty, json_t **out);
/* Refusing unknown keys and reading typed values: iso_json_* (isostack/codec.h),
 * shared with the codec of the agents' documents. */
/* ---- the request (request.c) ---- */
struct api_request *api_request_new(struct iso_controller *ctl, const char *method,
                                    const char *target);
void api_request_free(struct api_request *r);
/* Collects one header line (in order; repeats kept). -ENOMEM on failure. */
int api_request_add_header(struct api_request *r, const char *name, const char *value);
/* The first value of a header (case-insensitive name), or NULL; *count gets
 * how many lines carried it when count is not NULL. */
const char *api_header(const struct api_request *r, const char *name, int *count);
/* Decodes the target into path and query, and refuses what is ambiguous or
 * over the limits (control characters, repeated keys, two Authorization
 * headers, Content-Length with Transfer-Encoding...). 0 or -errno with r->err. */
int api_request_parse_path(struct api_request *r);
int api_request_check_headers(struct api_request *r);
int api_request_parse_query(struct api_request *r);
/* An application/x-www-form-urlencoded body (POST /neutron/login): pairs
 * name=value joined by '&', %-escapes and '+' decoded, no control byte or
 * NUL, each name one of `allowed` (NULL-terminated) and given once, at most
 * API_MAX_FORM bytes. values[i] gets allowed[i]'s value (malloc'd) or NULL.
 * 0, or -errno with err naming the field; free with api_form_free (which
 * wipes them: one is a password). */
#define API_MAX_FORM 1024
int api_form_parse(const char *body, size_t len, const char *const *allowed, char **values,
                   struct iso_error *err);
void api_form_free(char **values, size_t n);
/* The value of cookie `name` in the Cookie header lines into buf: 1 when
 * found, 0 when not, -errno (err, field Cookie) when given twice or longer
 * than size - 1. */
int api_cookie(const struct api_request *r, const char *name, char *buf, size_t size,
               struct iso_error *err);
/* Appends body bytes, keeping at most ISO_API_MAX_BODY (then body_too_large). */
int api_request_append_body(struct api_request *r, const char *data, size_t len);
/* A copy of the target safe for one log line (control bytes and quotes escaped). */
void api_request_log_target(const struct api_request *r, char *buf, size_t size);

/* A handler whose work may block (reading the fabric) must not run it on
 * the daemon's loop thread: it defers it and returns 0 without a reply.
 * work(r, arg) then runs once on the worker thread and may touch nothing of
 * the controller's; done(r, arg) runs after it on the loop thread, records
 * the result with the controller, sets r's reply or r->err, and frees arg.
 * One deferred request at a time: while one runs, api_defer refuses with 503
 * (-EAGAIN, r->err set) and the handler frees arg itself. api_handle_raw
 * runs both on the calling thread after the handler. */
int api_defer(struct api_request *r, api_deferred_fn work, api_deferred_fn done, void *arg);
/* A handler whose answer comes later from the controller itself (a long
 * poll) parks the request instead: it returns 0 without a reply, and
 * api_unpark(r, status, body), called later on the loop thread, answers
 * it. Only for requests with a connection (r->conn); false when it cannot
 * park (then answer now). */
bool api_park(struct api_request *r);
void api_unpark(struct api_request *r, int status, json_t *body);

/* ---- what the daemon's loop (loop.c) drives in server.c ---- */
struct MHD_Daemon *api_mhd(struct iso_api *api);
struct iso_controller *api_controller(struct iso_api *api);
/* The leader lease (NULL: none) and this daemon's advertised URL. */
struct iso_lease *api_lease(struct iso_api *api);
/* Whether a reply may carry the controller's state: a controller is open and,
 * with a leader lease, the lease is live by this process's clock
 * (iso_lease_holds). A follower, and a leader that was frozen past its lease
 * and has not yet found out, answer 503 not_leader instead: new requests
 * (request_head) and parked long polls alike (docs/store.md, "Pause"). */
bool api_serving(const struct iso_api *api, const struct iso_controller *ctl);
/* r's reply: 503 not_leader, naming the leader when known (body "leader",
 * header X-Isostack-Leader). */
void api_not_leader_reply(struct api_request *r);
const char *api_url(const struct iso_api *api);
/* The worker's eventfd, and what to do when it is readable: finish the
 * deferred request it posted back and resume its connection. */
int api_worker_fd(const struct iso_api *api);
void api_worker_collect(struct iso_api *api);
/* Every tick: sends the held 429s that are due, closes connections whose
 * request head is late (conn_limits.c). */
void api_tick(struct iso_api *api);
/* Group commit, once a turn before libmicrohttpd's pass: makes every
 * commit so far durable with one flush and resumes the replies that waited
 * for it; when the flush fails each of them becomes a 500 and the error is
 * returned (the daemon then stops: docs/store.md, "Group commit"). */
int api_sync(struct iso_api *api, struct iso_error *err);
/* Is a reply waiting for a flush, or a commit not yet flushed? Then the loop
 * does not sleep before its next api_sync. */
bool api_sync_pending(const struct iso_api *api);
/* The stop: accept no more, answer held refusals and parked long polls. */
void api_close_begin(struct iso_api *api);
/* No request in flight and no deferred job. */
bool api_idle(const struct iso_api *api);

/* ---- the fuzz entry point (server.c) ---- */
struct api_raw_header {
	const char *name;
	const char *value;
};
/* Runs one request through exactly the parse/route/auth/handler/reply path a
 * libmicrohttpd request takes, without a socket. *status gets the HTTP status
 * and *reply the JSON text (malloc'd; NULL for 204). Returns 0, or -ENOMEM. */
int api_handle_raw(struct iso_controller *ctl, const char *method, const char *target,
                   const struct api_raw_header *headers, size_t n_headers, const char *body,
                   size_t body_len, int *status, char **reply);

/* Query parameters: refuses any not in `allowed`, parses limit/after. */
int api_check_query(struct api_request *r, const char *const *allowed);
const char *api_query(struct api_request *r, const char *key);
int api_page(struct api_request *r, int *limit, const char **after);

/* ---- output ---- */
void api_reply(struct api_request *r, int status, json_t *body);
/* {"items": [...], "next": cursor|null}; steals items. */
json_t *api_list(json_t *items, const char *next);
json_t *api_time(int64_t ms); /* RFC 3339 string, or null for 0 */
json_t *api_tenant_json(struct iso_controller *ctl, const struct iso_tenant *t);
json_t *api_token_json(struct iso_controller *ctl, const struct iso_token *t);
json_t *api_alloc_json(const struct iso_allocation *a);
json_t *api_node_json(struct iso_controller *ctl, int node_index);
json_t *api_capacity_json(const struct iso_capacity *cap);

/* ---- handlers, one file per resource ---- */
int api_healthz(struct api_request *r);
int api_version(struct api_request *r);
int api_whoami(struct api_request *r);
int api_capacity(struct api_request *r);
int api_fabric_status(struct api_request *r);
int api_fabric_intent(struct api_request *r);
int api_fabric_health(struct api_request *r);
int api_fabric_verify(struct api_request *r);
int api_tenant_create(struct api_request *r);
int api_tenant_list(struct api_request *r);
int api_tenant_get(struct api_request *r);
int api_tenant_update(struct api_request *r);
int api_tenant_delete(struct api_request *r);
int api_token_issue(struct api_request *r);
int api_token_list(struct api_request *r);
int api_token_get(struct api_request *r);
int api_token_revoke(struct api_request *r);
int api_node_list(struct api_request *r);
int api_node_get(struct api_request *r);
int api_node_cordon(struct api_request *r);
int api_node_uncordon(struct api_request *r);
int api_node_drain(struct api_request *r);
int api_gpu_list(struct api_request *r);
int api_gpu_fault(struct api_request *r);
int api_gpu_restore(struct api_request *r);
int api_node_down(struct api_request *r);
int api_node_up(struct api_request *r);
int api_node_desired(struct api_request *r);
int api_node_status(struct api_request *r);
int api_sm_partitions(struct api_request *r);
int api_sm_status(struct api_request *r);
int api_pool_cordon(struct api_request *r);
int api_pool_drain(struct api_request *r);
int api_pool_uncordon(struct api_request *r);
int api_alloc_create(struct api_request *r);
int api_alloc_list(struct api_request *r);
int api_alloc_get(struct api_request *r);
int api_alloc_resize(struct api_request *r);
int api_alloc_release(struct api_request *r);
int api_audit_events(struct api_request *r);
int api_audit_head(struct api_request *r);
int api_audit_pubkey(struct api_request *r);
int api_audit_inclusion(struct api_request *r);
int api_audit_consistency(struct api_request *r);
int api_org_create(struct api_request *r);
int api_org_list(struct api_request *r);
int api_org_delete(struct api_request *r);
int api_project_create(struct api_request *r);
int api_project_list(struct api_request *r);
int api_project_delete(struct api_request *r);
int api_quota_get(struct api_request *r);
int api_quota_set(struct api_request *r);
int api_queue(struct api_request *r);
int api_usage(struct api_request *r);
/* handlers_neutron.c: networking-mlnx's mlnx_sdn_assist wire (docs/openstack.md) */
#define API_NEUTRON_COOKIE "isostack_neutron"
int api_neutron_login(struct api_request *r);
int api_neutron_network_post(struct api_request *r);
int api_neutron_network_put(struct api_request *r);
int api_neutron_network_delete(struct api_request *r);
int api_neutron_port_post(struct api_request *r);
int api_neutron_port_put(struct api_request *r);
int api_neutron_port_delete(struct api_request *r);
int api_neutron_list(struct api_request *r);
int api_neutron_job(struct api_request *r);
int api_neutron_project_put(struct api_request *r);
int api_neutron_project_list(struct api_request *r);
int api_neutron_project_delete(struct api_request *r);
bool api_tls(const struct api_request *r);

#endif

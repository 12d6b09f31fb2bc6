/* server.c: the HTTP side of the API. It accepts connections with
 * libmicrohttpd, driven by the daemon's one event loop (loop.c) in
 * external-poll mode, bounds request bodies, echoes or
 * makes request ids, routes, authenticates, and turns a handler's result or
 * iso_error into exactly one JSON response. Handlers never see HTTP details.
 *
 * One path serves both libmicrohttpd and api_handle_raw (the fuzz entry
 * point): the glue collects the target and header lines into an api_request
 * (request.c), then request_head() decides everything the head can decide
 * (errors, route, authentication) and request_finish() runs the handler once
 * the body is in. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <sodium.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/conn_limits.h"
#include "api/internal.h"

struct iso_api {
	struct MHD_Daemon *mhd;
	struct iso_controller *ctl; /* NULL while a follower (lease) */
	struct iso_lease *lease;    /* NULL: the only isostackd on its store */
	char url[256];              /* advertised URL */
	bool tls;
	int port;
	char *tls_cert_pem;
	char *tls_key_pem;
	struct api_limits *limits;
	/* The one deferred request (api_defer): the loop hands it to the worker
	 * thread, which runs its work and posts it back on done_fd (an eventfd);
	 * the loop then finishes it (api_worker_collect). job_mu guards only
	 * that hand-over; everything else here is the loop thread's. */
	bool defer_busy;
	int done_fd;
	pthread_t worker;
	bool worker_started;
	pthread_mutex_t job_mu;
	pthread_cond_t job_cv;
	struct api_request *job; /* with the worker, or done and not yet collected */
	bool job_done, worker_stop;
	/* requests begun and not completed, and whether the daemon is stopping */
	unsigned n_inflight;
	bool closing;
	/* rate refusals held back before their 429 (hold_refusal) */
	struct api_request **held;
	int n_held;
	/* replies waiting for the turn's sync (hold_for_sync), in order */
	struct api_request *sync_head, *sync_tail;
};

#define API_MAX_DRAIN (4u << 20)
/* A request over its tenant's rate waits this long for its 429, and at most
 * this many wait at once (past it, the 429 goes at once). */
#define API_HOLD_NS  (1000LL * 1000 * 1000)
#define API_HOLD_MAX 4096
/* libmicrohttpd's per-connection memory: the head (at most API_MAX_TARGET +
 * API_MAX_HEADER_BYTES, plus its records) with room to spare, so its own 414
 * and 431 come only far beyond ours. Not more: libmicrohttpd zeroes the whole
 * pool between two requests of a connection, so every page of it is touched
 * and resident (bench/agents: 256 KiB gave 260 KiB per idle agent and memset
 * was 18% of the controller's time with 10,000 of them). */
#define API_CONN_POOL (64u << 10)

/* ROUTE_COOKIE: as ROUTE_AUTH, and the token may come in the cookie that
 * POST /neutron/login set (mlnx_sdn_assist sends its session's cookies). */
enum route_auth { ROUTE_AUTH, ROUTE_OPEN, ROUTE_COOKIE };

struct route {
	const char *method;
	const char *pattern; /* segments; "*" matches one segment */
	api_handler handler;
	enum route_auth auth;
	const char *action; /* audit action of an attempt that fails */
	const char *kind;   /* audit object kind; its id is the path's third segment */
};

static const struct route routes[] = {
    {"GET", "v1/healthz", api_healthz, ROUTE_OPEN, "healthz", "daemon"},
    {"GET", "v1/version", api_version, ROUTE_AUTH, "version.read", "daemon"},
    {"GET", "v1/whoami", api_whoami, ROUTE_AUTH, "whoami", "token"},
    {"GET", "v1/capacity", api_capacity, ROUTE_AUTH, "capacity.read", "capacity"},
    {"POST", "v1/tenants", api_tenant_create, ROUTE_AUTH, "tenant.create", "tenant"},
    {"GET", "v1/tenants", api_tenant_list, ROUTE_AUTH, "tenant.list", "tenant"},
    {"GET", "v1/tenants/*", api_tenant_get, ROUTE_AUTH, "tenant.read", "tenant"},
    {"PATCH", "v1/tenants/*", api_tenant_update, ROUTE_AUTH, "tenant.update", "tenant"},
    {"DELETE", "v1/tenants/*", api_tenant_delete, ROUTE_AUTH, "tenant.delete", "tenant"},
    {"POST", "v1/orgs", api_org_create, ROUTE_AUTH, "org.create", "org"},
    {"GET", "v1/orgs", api_org_list, ROUTE_AUTH, "org.list", "org"},
    {"DELETE", "v1/orgs/*", api_org_delete, ROUTE_AUTH, "org.delete", "org"},
    {"GET", "v1/orgs/*/quota", api_quota_get, ROUTE_AUTH, "quota.read", "quota"},
    {"PUT", "v1/orgs/*/quota", api_quota_set, ROUTE_AUTH, "quota.set", "quota"},
    {"POST", "v1/tenants/*/projects", api_project_create, ROUTE_AUTH, "project.create", "project"},
    {"GET", "v1/tenants/*/projects", api_project_list, ROUTE_AUTH, "project.list", "project"},
    {"DELETE", "v1/tenants/*/projects/*", api_project_delete, ROUTE_AUTH, "project.delete",
     "project"},
    {"GET", "v1/tenants/*/quota", api_quota_get, ROUTE_AUTH, "quota.read", "quota"},
    {"PUT", "v1/tenants/*/quota", api_quota_set, ROUTE_AUTH, "quota.set", "quota"},
    {"GET", "v1/tenants/*/projects/*/quota", api_quota_get, ROUTE_AUTH, "quota.read", "quota"},
    {"PUT", "v1/tenants/*/projects/*/quota", api_quota_set, ROUTE_AUTH, "quota.set", "quota"},
    {"GET", "v1/queue", api_queue, ROUTE_AUTH, "queue.read", "queue"},
    {"GET", "v1/usage", api_usage, ROUTE_AUTH, "usage.read", "usage"},
    {"POST", "v1/tokens", api_token_issue, ROUTE_AUTH, "token.issue", "token"},
    {"GET", "v1/tokens", api_token_list, ROUTE_AUTH, "token.list", "token"},
    {"GET", "v1/tokens/*", api_token_get, ROUTE_AUTH, "token.read", "token"},
    {"DELETE", "v1/tokens/*", api_token_revoke, ROUTE_AUTH, "token.revoke", "token"},
    {"GET", "v1/nodes", api_node_list, ROUTE_AUTH, "node.list", "node"},
    {"GET", "v1/nodes/*", api_node_get, ROUTE_AUTH, "node.read", "node"},
    {"POST", "v1/nodes/*/cordon", api_node_cordon, ROUTE_AUTH, "node.cordon", "node"},
    {"POST", "v1/nodes/*/uncordon", api_node_uncordon, ROUTE_AUTH, "node.uncordon", "node"},
    {"POST", "v1/nodes/*/drain", api_node_drain, ROUTE_AUTH, "node.drain", "node"},
    {"GET", "v1/gpus", api_gpu_list, ROUTE_AUTH, "gpu.list", "gpu"},
    {"POST", "v1/nodes/*/gpus/*/fault", api_gpu_fault, ROUTE_AUTH, "gpu.fault", "node"},
    {"DELETE", "v1/nodes/*/gpus/*/fault", api_gpu_restore, ROUTE_AUTH, "gpu.restore", "node"},
    {"POST", "v1/nodes/*/down", api_node_down, ROUTE_AUTH, "node.down", "node"},
    {"POST", "v1/nodes/*/up", api_node_up, ROUTE_AUTH, "node.up", "node"},
    {"GET", "v1/nodes/*/desired", api_node_desired, ROUTE_AUTH, "node.desired.read", "node"},
    {"PUT", "v1/nodes/*/status", api_node_status, ROUTE_AUTH, "node.status.write", "node"},
    {"POST", "v1/pools/*/cordon", api_pool_cordon, ROUTE_AUTH, "pool.cordon", "pool"},
    {"POST", "v1/pools/*/drain", api_pool_drain, ROUTE_AUTH, "pool.drain", "pool"},
    {"POST", "v1/pools/*/uncordon", api_pool_uncordon, ROUTE_AUTH, "pool.uncordon", "pool"},
    {"POST", "v1/allocations", api_alloc_create, ROUTE_AUTH, "allocation.create", "allocation"},
    {"GET", "v1/allocations", api_alloc_list, ROUTE_AUTH, "allocation.list", "allocation"},
    {"GET", "v1/allocations/*", api_alloc_get, ROUTE_AUTH, "allocation.read", "allocation"},
    {"PATCH", "v1/allocations/*", api_alloc_resize, ROUTE_AUTH, "allocation.resize", "allocation"},
    {"DELETE", "v1/allocations/*", api_alloc_release, ROUTE_AUTH, "allocation.release",
     "allocation"},
    {"GET", "v1/fabric", api_fabric_status, ROUTE_AUTH, "fabric.read", "fabric"},
    {"GET", "v1/fabric/intent", api_fabric_intent, ROUTE_AUTH, "fabric.read", "fabric"},
    {"GET", "v1/fabric/health", api_fabric_health, ROUTE_AUTH, "fabric.health", "fabric"},
    {"GET", "v1/fabric/verify", api_fabric_verify, ROUTE_AUTH, "fabric.verify", "fabric"},
    {"GET", "v1/fabric/sm/partitions", api_sm_partitions, ROUTE_AUTH, "fabric.sm.read", "fabric"},
    {"PUT", "v1/fabric/sm/status", api_sm_status, ROUTE_AUTH, "fabric.sm.status", "fabric"},
    {"GET", "v1/audit/events", api_audit_events, ROUTE_AUTH, "audit.read", "audit"},
    {"GET", "v1/audit/head", api_audit_head, ROUTE_AUTH, "audit.read", "audit"},
    {"GET", "v1/audit/pubkey", api_audit_pubkey, ROUTE_AUTH, "audit.pubkey", "audit"},
    {"GET", "v1/audit/proof/inclusion", api_audit_inclusion, ROUTE_AUTH, "audit.read", "audit"},
    {"GET", "v1/audit/proof/consistency", api_audit_consistency, ROUTE_AUTH, "audit.read", "audit"},
    {"PUT", "v1/neutron/projects/*", api_neutron_project_put, ROUTE_AUTH, "neutron.project.map",
     "neutron_project"},
    {"GET", "v1/neutron/projects", api_neutron_project_list, ROUTE_AUTH, "neutron.project.list",
     "neutron_project"},
    {"DELETE", "v1/neutron/projects/*", api_neutron_project_delete, ROUTE_AUTH,
     "neutron.project.unmap", "neutron_project"},
    /* networking-mlnx's mlnx_sdn_assist wire (docs/openstack.md): <url> is
     * /neutron, then the driver's domain */
    {"POST", "neutron/login", api_neutron_login, ROUTE_OPEN, "neutron.login", "token"},
    {"POST", "neutron/*/Network", api_neutron_network_post, ROUTE_COOKIE, "neutron.network.write",
     "neutron_network"},
    {"GET", "neutron/*/Network", api_neutron_list, ROUTE_COOKIE, "neutron.list", "neutron_network"},
    {"PUT", "neutron/*/Network/*", api_neutron_network_put, ROUTE_COOKIE, "neutron.network.write",
     "neutron_network"},
    {"DELETE", "neutron/*/Network/*", api_neutron_network_delete, ROUTE_COOKIE,
     "neutron.network.write", "neutron_network"},
    {"POST", "neutron/*/Port", api_neutron_port_post, ROUTE_COOKIE, "neutron.port.write",
     "neutron_port"},
    {"GET", "neutron/*/Port", api_neutron_list, ROUTE_COOKIE, "neutron.list", "neutron_port"},
    {"PUT", "neutron/*/Port/*", api_neutron_port_put, ROUTE_COOKIE, "neutron.port.write",
     "neutron_port"},
    {"DELETE", "neutron/*/Port/*", api_neutron_port_delete, ROUTE_COOKIE, "neutron.port.write",
     "neutron_port"},
    /* the driver polls <url>/<job id>: job-<16 hex> */
    {"GET", "neutron/*", api_neutron_job, ROUTE_COOKIE, "neutron.job.read", "neutron_job"},
};

static bool pattern_matches(const char *pattern, struct api_request *r)
{
	char buf[128];
	char *save = NULL;
	int i = 0;

	iso_strlcpy(buf, pattern, sizeof(buf));
	for (char *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save), i++) {
		if (i >= r->n_seg)
			return false;
		if (strcmp(tok, "*") != 0 && strcmp(tok, r->seg[i]) != 0)
			return false;
	}
	return i == r->n_seg;
}

/* Splits the path; empty segments (//, trailing /) make it match nothing:
 * every such path gets the same 404, with or without a query. */
static void split_path(struct api_request *r)
{
	char *p;

	iso_strlcpy(r->path_copy, r->path, sizeof(r->path_copy));
	r->n_seg = 0;
	p = r->path_copy;
	if (*p != '/')
		return;
	p++;
	while (r->n_seg < API_MAX_SEGS) {
		char *slash = strchr(p, '/');
		r->seg[r->n_seg++] = p;
		if (slash)
			*slash = '\0';
		if (!*p) {
			r->n_seg = 0; /* an empty segment, which "*" would match: nothing */
			return;
		}
		if (!slash)
			return;
		p = slash + 1;
	}
	r->n_seg = API_MAX_SEGS + 1; /* too deep: matches nothing */
}

static bool request_id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static void make_request_id(struct api_request *r)
{
	const char *given = api_header(r, "X-Request-Id", NULL);
	unsigned char raw[8];

	if (given && request_id_valid(given)) {
		iso_strlcpy(r->request_id, given, sizeof(r->request_id));
		return;
	}
	randombytes_buf(raw, sizeof(raw));
	memcpy(r->request_id, "r-", 2);
	sodium_bin2hex(r->request_id + 2, sizeof(r->request_id) - 2, raw, sizeof(raw));
}

static const char *bearer_of(struct api_request *r)
{
	const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION, NULL);
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	h += 7;
	while (*h == ' ')
		h++;
	return h;
}

/* A ROUTE_COOKIE route's token may come in the login's cookie when no
 * Authorization header is given (mlnx_sdn_assist sends only the cookie). */
static int token_of(struct api_request *r, const struct route *route, char *cookie, size_t size)
{
	cookie[0] = '\0';
	if (route->auth != ROUTE_COOKIE || bearer_of(r))
		return 0;
	return api_cookie(r, API_NEUTRON_COOKIE, cookie, size, &r->err) < 0 ? -EINVAL : 0;
}

bool api_tls(const struct api_request *r)
{
	return r->api && r->api->tls;
}

static void client_address(struct MHD_Connection *conn, char *buf, size_t size)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	buf[0] = '\0';
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
		          (socklen_t)size);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
		          buf, (socklen_t)size);
}

static void error_reply(struct api_request *r)
{
	const struct iso_error *e = &r->err;
	enum iso_errcode code = e->code == ISO_OK ? ISO_E_INTERNAL : e->code;
	const char *name = r->err_code ? r->err_code : iso_errcode_name(code);

	api_reply(r, r->err_status ? r->err_status : iso_errcode_http_status(code),
	          json_pack("{s:{s:s, s:s, s:o}, s:s}", "error", "code", name, "message",
	                    e->message[0] ? e->message : name, "field",
	                    e->field[0] ? json_string(e->field) : json_null(), "request_id",
	                    r->request_id));
}

/* Refused and failed changes, and every refused authentication or
 * authorisation (reads included), go to the audit log (PCI DSS 10.2): an
 * event each when the caller holds a valid token, counted per source and
 * interval when not (iso_controller_audit_failure, docs/audit.md). */
static void record_failure(struct api_request *r, const struct route *route)
{
	bool refused = r->err.code == ISO_E_UNAUTHORIZED || r->err.code == ISO_E_FORBIDDEN;

	if (strcmp(r->method, "GET") == 0 && !refused)
		return;
	/* A rate refusal is counted by the limiter (one log line per tenant per
	 * 10 s): a durable event each would be the very load it refuses. */
	if (r->retry_after_s > 0 || !r->ctl)
		return;
	iso_controller_audit_failure(r->ctl, &r->who, route->action, route->kind,
	                             r->n_seg > 2 ? r->seg[2] : "",
	                             refused ? ISO_AUDIT_DENIED : ISO_AUDIT_ERROR, r->err.message);
}

/* The route of r's path and method, or NULL with r->err set (404, 405). */
static const struct route *route_find(struct api_request *r)
{
	const struct route *path_match = NULL, *match = NULL;
	char allow[64] = "";

	split_path(r);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(routes); i++) {
		if (!pattern_matches(routes[i].pattern, r))
			continue;
		path_match = &routes[i];
		if (strcmp(routes[i].method, r->method) == 0)
			match = &routes[i];
		else if (strlen(allow) + 8 < sizeof(allow))
			snprintf(allow + strlen(allow), sizeof(allow) - strlen(allow), "%s%s",
			         allow[0] ? ", " : "", routes[i].method);
	}
	if (!path_match) {
		iso_error_set(&r->err, ISO_E_NOT_FOUND, NULL, "no such path");
		return NULL;
	}
	if (!match) {
		iso_error_set(&r->err, ISO_E_METHOD, NULL, "%s is not allowed here; allowed: %s",
		              r->method, allow);
		iso_strlcpy(r->allow, allow, sizeof(r->allow));
		return NULL;
	}
	return match;
}

bool api_serving(const struct iso_api *api, const struct iso_controller *ctl)
{
	return ctl && (!api || !api->lease || iso_lease_holds(api->lease));
}

void api_not_leader_reply(struct api_request *r)
{
	const char *leader = r->api && r->api->lease ? iso_lease_leader_url(r->api->lease) : "";

	r->err_status = MHD_HTTP_SERVICE_UNAVAILABLE;
	r->err_code = "not_leader";
	if (r->ctl)
		iso_error_set(&r->err, ISO_E_UNAVAILABLE, NULL,
		              "this isostackd no longer holds the leader lease; the leader is %s",
		              leader[0] ? leader : "not known here yet");
	else
		iso_error_set(&r->err, ISO_E_UNAVAILABLE, NULL,
		              leader[0] ? "this isostackd is a follower; the leader is %s"
		                        : "this isostackd is a follower; no leader is known yet%s",
		              leader);
	error_reply(r);
	json_object_set_new(r->reply, "leader", leader[0] ? json_string(leader) : json_null());
	iso_strlcpy(r->leader, leader, sizeof(r->leader));
}

/* Everything the head decides, before any body byte is read: protocol
 * errors, the route, the query, a body announced beyond what is worth
 * draining, and authentication (so an anonymous upload is refused without
 * being read). Returns true when the reply is decided (r->status/r->reply).
 * Like every callback of libmicrohttpd, this runs on the daemon's one loop
 * thread, which alone touches the controller (loop.c). */
static bool request_head(struct api_request *r)
{
	const struct route *match = NULL;
	char cookie[ISO_TOKEN_MAX + 1] = "";
	const char *cl;

	r->head_done = true;
	make_request_id(r);
	iso_strlcpy(r->who.request_id, r->request_id, sizeof(r->who.request_id));
	if (api_request_parse_path(r) < 0 || api_request_check_headers(r) < 0)
		goto fail;
	match = route_find(r);
	if (!match || api_request_parse_query(r) < 0)
		goto fail;
	r->route = match;
	if (!api_serving(r->api, r->ctl) && match->handler != api_healthz) {
		api_not_leader_reply(r);
		return true;
	}
	/* A body over the limit is read and discarded so that the client, still
	 * sending, gets its 413 rather than a reset; one announced beyond what is
	 * worth draining is refused before it is read. */
	cl = api_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH, NULL);
	if (cl && strtoull(cl, NULL, 10) > API_MAX_DRAIN)
		iso_error_set(&r->err, ISO_E_TOO_LARGE, NULL, "request body over %d bytes",
		              ISO_API_MAX_BODY);
	else if (match->auth != ROUTE_OPEN && token_of(r, match, cookie, sizeof(cookie)) < 0)
		;
	else if (match->auth != ROUTE_OPEN &&
	         iso_controller_authenticate(r->ctl, bearer_of(r) ? bearer_of(r) : cookie, &r->who,
	                                     &r->err) < 0)
		;
	else if (match->auth != ROUTE_OPEN &&
	         iso_controller_rate_admit(r->ctl, &r->who, strcmp(r->method, "GET") != 0,
	                                   &r->retry_after_s, &r->err) < 0)
		;
	/* Deny by default: the route's action must be in the role x action
	 * table for the caller's role (src/controller/authz.c). */
	else if (match->auth != ROUTE_OPEN &&
	         iso_controller_authorize(&r->who, match->action, &r->err) < 0)
		;
	else {
		sodium_memzero(cookie, sizeof(cookie));
		return false;
	}
	sodium_memzero(cookie, sizeof(cookie));
	error_reply(r);
	record_failure(r, match);
	return true;
fail:
	error_reply(r);
	return true;
}

/* The body is in: run the handler (unless the body was too large). */
static void request_finish(struct api_request *r)
{
	const struct route *match = r->route;

	if (r->body_too_large)
		iso_error_set(&r->err, ISO_E_TOO_LARGE, NULL, "request body over %d bytes",
		              ISO_API_MAX_BODY);
	else if (match->handler(r) == 0 && (r->reply || r->defer_fn || r->parked))
		return;
	if (r->err.code == ISO_OK)
		iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "internal error");
	error_reply(r);
	record_failure(r, match);
}

int api_defer(struct api_request *r, api_deferred_fn work, api_deferred_fn done, void *arg)
{
	if (r->api) {
		if (r->api->defer_busy)
			return iso_error_set(&r->err, ISO_E_UNAVAILABLE, NULL,
			                     "another %s is running; try again when it finishes",
			                     r->path);
		r->api->defer_busy = true;
	}
	r->defer_fn = work;
	r->defer_done = done;
	r->defer_arg = arg;
	return 0;
}

bool api_park(struct api_request *r)
{
	if (!r->conn)
		return false;
	/* Inside libmicrohttpd's callback, on the loop thread: whoever answers
	 * it runs on that thread too, so the resume cannot come early. */
	MHD_suspend_connection(r->conn);
	r->parked = true;
	return true;
}

void api_unpark(struct api_request *r, int status, json_t *body)
{
	api_reply(r, status, body);
	r->deferred_done = true;
	MHD_resume_connection(r->conn);
}

/* Finishes r once its deferred work has run (on the loop thread): the done
 * step records the result, and a failure becomes its error reply, as in
 * request_finish. */
static void finish_deferred(struct api_request *r)
{
	r->defer_done(r, r->defer_arg);
	r->defer_arg = NULL;
	if (!r->reply) {
		if (r->err.code == ISO_OK)
			iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "internal error");
		error_reply(r);
		record_failure(r, r->route);
	}
	r->deferred_done = true;
}

/* The JSON text of r's reply (malloc'd), or NULL for a 204 or on failure. */
static char *reply_text(struct api_request *r)
{
	if (r->status == MHD_HTTP_NO_CONTENT || !r->reply)
		return NULL;
	/* a JSON string is a reply too: mlnx_sdn_assist takes the body of its
	 * writes' replies as the job id (docs/openstack.md) */
	return json_dumps(r->reply, JSON_COMPACT | JSON_ENCODE_ANY);
}

int api_handle_raw(struct iso_controller *ctl, const char *method, const char *target,
                   const struct api_raw_header *headers, size_t n_headers, const char *body,
                   size_t body_len, int *status, char **reply)
{
	struct api_request *r = api_request_new(ctl, method, target);
	int ret = 0;

	*status = 0;
	*reply = NULL;
	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < n_headers && ret == 0; i++)
		ret = api_request_add_header(r, headers[i].name, headers[i].value);
	if (ret == 0 && !request_head(r)) {
		ret = api_request_append_body(r, body, body_len);
		if (ret == 0)
			request_finish(r);
		if (ret == 0 && r->defer_fn) {
			r->defer_fn(r, r->defer_arg);
			finish_deferred(r);
		}
	}
	iso_controller_settle(ctl);
	struct iso_error serr = {0};
	if (ret == 0 && iso_controller_sync(ctl, &serr) < 0)
		ret = -EIO; /* no loop here: the one caller's commit is flushed now */
	if (ret == 0) {
		*status = r->status;
		*reply = reply_text(r);
		if (!*reply && r->status != MHD_HTTP_NO_CONTENT)
			ret = -ENOMEM;
	}
	api_request_free(r);
	return ret;
}

static enum MHD_Result send_reply(struct api_request *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *text = NULL;

	if (r->status == MHD_HTTP_NO_CONTENT) {
		resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	} else {
		text = reply_text(r);
		if (!text)
			return MHD_NO;
		size_t len = strlen(text);
		text[len] = '\0';
		resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			free(text);
			return MHD_NO;
		}
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	}
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "X-Request-Id", r->request_id);
	if (r->leader[0])
		MHD_add_response_header(resp, "X-Isostack-Leader", r->leader);
	if (r->allow[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	if (r->set_cookie[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, r->set_cookie);
	if (r->retry_after_s > 0) {
		char secs[16];
		snprintf(secs, sizeof(secs), "%d", r->retry_after_s);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, secs);
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* libmicrohttpd calls this with the raw request target once the request
 * line is in, before it parses the query into its connection pool (where
 * 500 parameters exhaust the pool and, in 0.9.75, hang the connection). The
 * request starts here: its api_request keeps the whole target, and the query
 * is cut off in libmicrohttpd's copy so that it stores no parameter; request.c
 * parses the query with our own limits. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct iso_api *api = cls;
	struct api_request *r = api_request_new(api->ctl, "", uri);
	char *q = uri ? strchr(uri, '?') : NULL;

	(void)conn;
	if (r)
		api->n_inflight++;
	if (q)
		q[1] = '\0'; /* the read buffer's own bytes (const only in the API) */
	return r;
}

struct collect {
	struct api_request *r;
	int ret;
};

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
	struct collect *c = cls;
	(void)kind;
	c->ret = api_request_add_header(c->r, key, value);
	return c->ret == 0 ? MHD_YES : MHD_NO;
}

/* The worker thread: runs each deferred request's work (which may block,
 * and touches nothing of the controller's), then posts it back to the loop
 * on done_fd. It runs a job handed over before a stop, then exits. */
static void *worker_main(void *arg)
{
	struct iso_api *api = arg;
	const uint64_t one = 1;

	pthread_mutex_lock(&api->job_mu);
	for (;;) {
		while (!api->worker_stop && (!api->job || api->job_done))
			pthread_cond_wait(&api->job_cv, &api->job_mu);
		if (!api->job || api->job_done)
			break;
		struct api_request *r = api->job;
		pthread_mutex_unlock(&api->job_mu);
		r->defer_fn(r, r->defer_arg);
		pthread_mutex_lock(&api->job_mu);
		api->job_done = true;
		if (write(api->done_fd, &one, sizeof(one)) < 0)
			iso_log(ISO_LOG_ERR, "deferred_post_failed", "error=\"%s\"",
			        strerror(errno));
	}
	pthread_mutex_unlock(&api->job_mu);
	return NULL;
}

static void hand_to_worker(struct iso_api *api, struct api_request *r)
{
	pthread_mutex_lock(&api->job_mu);
	api->job = r;
	api->job_done = false;
	pthread_cond_signal(&api->job_cv);
	pthread_mutex_unlock(&api->job_mu);
}

/* The job the worker finished, if any: finished and its connection resumed. */
static void collect(struct iso_api *api)
{
	struct api_request *r = NULL;

	pthread_mutex_lock(&api->job_mu);
	if (api->job && api->job_done) {
		r = api->job;
		api->job = NULL;
		api->job_done = false;
	}
	pthread_mutex_unlock(&api->job_mu);
	if (!r)
		return;
	api->defer_busy = false;
	finish_deferred(r);
	MHD_resume_connection(r->conn);
}

void api_worker_collect(struct iso_api *api)
{
	uint64_t n;

	if (read(api->done_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		iso_log(ISO_LOG_ERR, "deferred_read_failed", "error=\"%s\"", strerror(errno));
	collect(api);
}

int api_worker_fd(const struct iso_api *api)
{
	return api->done_fd;
}

/* A client that keeps sending after its 429s would otherwise have each
 * refusal parsed, authenticated and answered on the one server thread as
 * fast as it can ask: bench/abuse's pending churn drew 3,100 a second from
 * four connections, and another tenant's p99 doubled. Its 429 is therefore
 * held for a second (the least Retry-After) with the connection suspended,
 * which costs nothing while it waits: a connection asks at most once a
 * second past its rate, and the per-address connection limit bounds the
 * rest. A client that honours Retry-After loses nothing. */
static bool hold_refusal(struct iso_api *api, struct api_request *r)
{
	if (r->retry_after_s <= 0 || !r->conn || api->closing || api->n_held >= API_HOLD_MAX)
		return false;
	r->hold_until_ns = iso_mono_ns() + API_HOLD_NS;
	MHD_suspend_connection(r->conn);
	api->held[api->n_held++] = r;
	return true;
}

/* Resumes the held refusals whose time has come (all of them: `all`). Their
 * order is their arrival, so the due ones are a prefix. */
static void release_held(struct iso_api *api, bool all)
{
	int64_t now = iso_mono_ns();
	int done = 0;

	while (done < api->n_held && (all || api->held[done]->hold_until_ns <= now)) {
		api->held[done]->held_done = true;
		MHD_resume_connection(api->held[done]->conn);
		done++;
	}
	memmove(api->held, api->held + done, (size_t)(api->n_held - done) * sizeof(*api->held));
	api->n_held -= done;
}

/* Group commit: a reply decided while a commit is not yet durable (its own,
 * or any other the reply may reflect) is not sent: its connection sleeps
 * until the loop's sync at the start of the next turn, which comes without
 * waiting for an event: one flush for every request of this turn
 * (api_sync). A reply decided with nothing unsynced goes at once, so reads
 * on a quiet daemon wait for nothing. The batch is what one pass of
 * libmicrohttpd handled, bounded by the connection limit (one request in
 * flight per connection); nothing waits for more to come. */
static bool hold_for_sync(struct iso_api *api, struct api_request *r)
{
	if (r->sync_done || !r->conn || !api->ctl || !iso_controller_unsynced(api->ctl))
		return false;
	MHD_suspend_connection(r->conn);
	if (api->sync_tail)
		api->sync_tail->sync_next = r;
	else
		api->sync_head = r;
	api->sync_tail = r;
	return true;
}

bool api_sync_pending(const struct iso_api *api)
{
	return api->sync_head || (api->ctl && iso_controller_unsynced(api->ctl));
}

int api_sync(struct iso_api *api, struct iso_error *err)
{
	struct api_request *w = api->sync_head, *next;
	int r = api->ctl ? iso_controller_sync(api->ctl, err) : 0;

	api->sync_head = api->sync_tail = NULL;
	for (; w; w = next) {
		next = w->sync_next;
		w->sync_next = NULL;
		if (r < 0) {
			/* Committed where this process reads, but perhaps not on
			 * disk: not a success, and the daemon stops. */
			w->err_status = 0;
			w->err_code = NULL;
			w->retry_after_s = 0;
			iso_error_set(&w->err, ISO_E_INTERNAL, NULL,
			              "the store could not make the change durable (%s); the "
			              "daemon stops, and its state after a restart is what the "
			              "disk kept",
			              err && err->message[0] ? err->message : "sync failed");
			error_reply(w);
		}
		w->sync_done = true;
		MHD_resume_connection(w->conn);
	}
	return r;
}

void api_tick(struct iso_api *api)
{
	release_held(api, false);
	api_limits_sweep(api->limits);
}

/* The daemon stops: no new connection is accepted, and every request
 * waiting on the loop (held refusals, parked long polls) is answered now;
 * a deferred one is answered when its worker posts it back. */
void api_close_begin(struct iso_api *api)
{
	MHD_socket s;

	api->closing = true;
	s = MHD_quiesce_daemon(api->mhd);
	if (s != MHD_INVALID_SOCKET)
		close(s);
	release_held(api, true);
	if (api->ctl)
		iso_controller_agents_release_waiters(api->ctl);
}

bool api_idle(const struct iso_api *api)
{
	return api->n_inflight == 0 && !api->defer_busy;
}

struct MHD_Daemon *api_mhd(struct iso_api *api)
{
	return api->mhd;
}

struct iso_controller *api_controller(struct iso_api *api)
{
	return api->ctl;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
	struct iso_api *api = cls;
	struct api_request *r = *con_cls;
	(void)url; /* libmicrohttpd's decoding of it; request.c decodes our own copy */
	(void)version;

	if (!r)
		return MHD_NO; /* on_uri failed (out of memory) */
	if (!r->head_done) {
		api_limits_head_done(api->limits, conn);
		r->conn = conn;
		r->api = api;
		iso_strlcpy(r->method, method, sizeof(r->method));
		client_address(conn, r->who.source, sizeof(r->who.source));
		struct collect c = {.r = r};
		MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, &c);
		if (c.ret < 0)
			return MHD_NO;
		if (request_head(r)) {
			if (hold_refusal(api, r))
				return MHD_YES; /* release_held resumes it */
			goto log;
		}
		return MHD_YES;
	}
	if (r->sync_done) {
		*upload_size = 0; /* resumed after the sync: its reply is decided */
		if (r->t0_ns)
			r->us = (iso_mono_ns() - r->t0_ns) / 1000;
		goto log;
	}
	if (r->held_done) {
		*upload_size = 0; /* the body of a refused request is not read */
		goto log;
	}
	if (*upload_size > 0) {
		if (api_request_append_body(r, upload, *upload_size) < 0)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->deferred_done)
		goto reply; /* resumed: the worker has set the reply */
	r->t0_ns = iso_mono_ns();
	request_finish(r);
	if (r->parked)
		return MHD_YES; /* api_unpark resumes it with its reply */
	if (r->defer_fn) {
		/* Off the loop: the connection sleeps until the worker posts the
		 * job back and the loop resumes it (api_worker_collect). */
		MHD_suspend_connection(conn);
		hand_to_worker(api, r);
		return MHD_YES;
	}
reply:
	r->us = (iso_mono_ns() - r->t0_ns) / 1000;
log:
	if (hold_for_sync(api, r))
		return MHD_YES; /* api_sync resumes it once its commit is durable */
	/* Changes and failures are worth a line each; successful reads only on
	 * demand. Failed authentication and rate refusals are counted and logged
	 * as summaries (auth_failures_counted, tenant_rate_limited): a line each
	 * would let any client fill the disk. */
	char target[256];
	bool counted = r->status == MHD_HTTP_UNAUTHORIZED || r->retry_after_s > 0;
	enum iso_log_level level = r->status >= 500                                 ? ISO_LOG_ERR
	                           : counted                                        ? ISO_LOG_DEBUG
	                           : strcmp(method, "GET") != 0 || r->status >= 400 ? ISO_LOG_INFO
	                                                                            : ISO_LOG_DEBUG;
	api_request_log_target(r, target, sizeof(target));
	iso_log(level, "http",
	        "request_id=%s source=%s method=%s path=\"%s\" status=%d token_id=%s us=%llu",
	        r->request_id, r->who.source[0] ? r->who.source : "-", method, target, r->status,
	        r->who.token_id[0] ? r->who.token_id : "-", (unsigned long long)r->us);
	return send_reply(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct iso_api *api = cls;
	(void)toe;
	api_limits_request_done(api->limits, conn);
	if (*con_cls)
		api->n_inflight--;
	api_request_free(*con_cls);
	*con_cls = NULL;
}

/* libmicrohttpd's format and arguments: checked as printf's, so that clang's
 * -Wformat-nonliteral (the fuzz build) accepts the vsnprintf below. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) _printf_(2, 0);
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	iso_log(ISO_LOG_WARN, "http_server", "message=\"%s\"", buf);
}

/* Splits "host:port" / "[v6]:port" and resolves it to one socket address. */
static int resolve_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len,
                          struct iso_error *err)
{
	char host[256];
	const char *port;
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char *end = NULL;

	if (listen[0] == '[') {
		const char *close = strchr(listen, ']');
		if (!close || close[1] != ':' || (size_t)(close - listen - 1) >= sizeof(host))
			goto bad;
		memcpy(host, listen + 1, (size_t)(close - listen - 1));
		host[close - listen - 1] = '\0';
		port = close + 2;
	} else {
		const char *colon = strrchr(listen, ':');
		if (!colon || (size_t)(colon - listen) >= sizeof(host) ||
		    strchr(listen, ':') != colon)
			goto bad;
		memcpy(host, listen, (size_t)(colon - listen));
		host[colon - listen] = '\0';
		port = colon + 1;
	}
	long p = strtol(port, &end, 10);
	if (!port[0] || *end || p < 0 || p > 65535 || !host[0])
		goto bad;
	int gr = getaddrinfo(host, port, &hints, &res);
	if (gr != 0)
		return iso_error_set(err, ISO_E_INVALID, "listen",
		                     "listen: cannot resolve \"%s\": %s", host, gai_strerror(gr));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
bad:
	return iso_error_set(err, ISO_E_INVALID, "listen",
	                     "listen: \"%s\" is not HOST:PORT or [V6]:PORT", listen);
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return false;
}

static int read_pem(const char *path, const char *field, char **out, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: cannot open %s: %s", field,
		                     path, strerror(errno));
	buf = calloc(1, (size_t)1024 * 1024 + 1);
	if (!buf)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	n = fread(buf, 1, (size_t)1024 * 1024, f);
	if (n == 0 || !feof(f)) {
		free(buf);
		return iso_error_set(err, ISO_E_INVALID, field, "%s: %s is empty or over 1 MiB",
		                     field, path);
	}
	*out = buf;
	return 0;
}

static void api_free(struct iso_api *api)
{
	if (!api)
		return;
	if (api->worker_started) {
		/* It finishes a job it holds (whose request libmicrohttpd frees
		 * only at the stop below), then exits. */
		pthread_mutex_lock(&api->job_mu);
		api->worker_stop = true;
		pthread_cond_signal(&api->job_cv);
		pthread_mutex_unlock(&api->job_mu);
		pthread_join(api->worker, NULL);
		collect(api);
	}
	if (api->mhd) {
		/* Held refusals, parked long polls and replies waiting for a
		 * sync are answered (resumed) before the stop. */
		struct iso_error serr = {0};
		if (api->sync_head && api_sync(api, &serr) < 0)
			iso_log(ISO_LOG_ERR, "store_sync_failed", "error=\"%s\"", serr.message);
		release_held(api, true);
		if (api->ctl)
			iso_controller_agents_release_waiters(api->ctl);
		MHD_stop_daemon(api->mhd);
	}
	if (api->done_fd >= 0)
		close(api->done_fd);
	pthread_mutex_destroy(&api->job_mu);
	pthread_cond_destroy(&api->job_cv);
	free(api->held);
	api_limits_free(api->limits);
	if (api->tls_key_pem)
		sodium_memzero(api->tls_key_pem, strlen(api->tls_key_pem));
	free(api->tls_key_pem);
	free(api->tls_cert_pem);
	free(api);
}
static void api_freep(struct iso_api **p)
{
	api_free(*p);
}

int iso_api_start(const struct iso_api_config *cfg, struct iso_controller *ctl,
                  struct iso_api **out, struct iso_error *err)
{
	_cleanup_(api_freep) struct iso_api *api = NULL;
	struct sockaddr_storage ss = {0};
	socklen_t sslen = 0;
	/* External polling with epoll: the daemon's loop (loop.c) waits on
	 * libmicrohttpd's epoll descriptor among its own, so the number of
	 * connections is not bounded by select's FD_SETSIZE. */
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
	int r;

	if (!!cfg->tls_cert != !!cfg->tls_key)
		return iso_error_set(err, ISO_E_INVALID, "tls",
		                     "tls: give both a certificate and a key, or neither");
	r = resolve_listen(cfg->listen, &ss, &sslen, err);
	if (r < 0)
		return r;
	if (!cfg->tls_cert && !is_loopback(&ss) && !cfg->allow_remote_http)
		return iso_error_set(err, ISO_E_INVALID, "listen",
		                     "listen: refusing plain HTTP on non-loopback address %s; "
		                     "configure TLS (controller.tls) or pass --allow-remote-http",
		                     cfg->listen);
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	api = calloc(1, sizeof(*api));
	if (!api)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	api->ctl = ctl;
	pthread_mutex_init(&api->job_mu, NULL);
	if (cfg->advertise_url)
		iso_strlcpy(api->url, cfg->advertise_url, sizeof(api->url));
	else
		snprintf(api->url, sizeof(api->url), "%s://%s", cfg->tls_cert ? "https" : "http",
		         cfg->listen);
	pthread_cond_init(&api->job_cv, NULL);
	api->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (api->done_fd < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "eventfd: %s", strerror(errno));
	/* The worker inherits the caller's signal mask: the daemon blocks
	 * SIGINT and SIGTERM first, so only its signalfd takes them. */
	if (pthread_create(&api->worker, NULL, worker_main, api) != 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "cannot start the worker thread");
	api->worker_started = true;
	pthread_setname_np(api->worker, "iso-worker");
	api->held = calloc(API_HOLD_MAX, sizeof(*api->held));
	if (!api->held)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	struct api_limits_config lc = {
	    .max_connections = cfg->max_connections ? cfg->max_connections : 1000,
	    .per_address = cfg->per_address_connections ? cfg->per_address_connections : 64,
	    .header_timeout_ms = cfg->header_timeout_ms ? cfg->header_timeout_ms : 10000,
	};
	lc.reserve = cfg->connection_reserve ? cfg->connection_reserve : lc.max_connections / 8;
	r = api_limits_new(&lc, &api->limits, err);
	if (r < 0)
		return r;
	if (cfg->tls_cert) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
			return iso_error_set(err, ISO_E_INVALID, "tls",
			                     "tls: this libmicrohttpd was built without TLS");
		r = read_pem(cfg->tls_cert, "tls.cert", &api->tls_cert_pem, err);
		if (r == 0)
			r = read_pem(cfg->tls_key, "tls.key", &api->tls_key_pem, err);
		if (r < 0)
			return r;
		flags |= MHD_USE_TLS;
		api->tls = true;
	}
	/* The logger goes first so that MHD never prints on its own. The pool is
	 * sized so that our own limits on the head (request.c) are reached before
	 * libmicrohttpd's, whose errors are HTML (docs/api.md). */
	api->mhd = MHD_start_daemon(
	    flags, 0, api_limits_accept, api->limits, on_request, api, MHD_OPTION_EXTERNAL_LOGGER,
	    on_mhd_log, api, MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_URI_LOG_CALLBACK, on_uri, api,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, api, MHD_OPTION_NOTIFY_CONNECTION,
	    api_limits_notify, api->limits, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)API_CONN_POOL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
	    MHD_OPTION_CONNECTION_LIMIT, lc.max_connections,
	    api->tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, api->tls_cert_pem,
	    MHD_OPTION_HTTPS_MEM_KEY, api->tls_key_pem, MHD_OPTION_END);
	if (!api->mhd)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "listen",
		                     "listen: cannot serve on %s (address in use, or not local?)",
		                     cfg->listen);
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(api->mhd, MHD_DAEMON_INFO_BIND_PORT);
	api->port = info ? info->port : 0;
	*out = ISO_TAKE(api);
	return 0;
}

void iso_api_set_lease(struct iso_api *api, struct iso_lease *lease)
{
	api->lease = lease;
}

void iso_api_attach(struct iso_api *api, struct iso_controller *ctl)
{
	api->ctl = ctl;
}

struct iso_lease *api_lease(struct iso_api *api)
{
	return api->lease;
}

const char *api_url(const struct iso_api *api)
{
	return api->url;
}

void iso_api_stop(struct iso_api *api)
{
	api_free(api);
}
int iso_api_port(const struct iso_api *api)
{
	return api->port;
}
bool iso_api_tls(const struct iso_api *api)
{
	return api->tls;
}

/* client.h: the HTTP client of the isostack REST API (docs/api.md), shared by
 * isoctl, node agents and plugins. One struct iso_client holds the base URL,
 * the bearer token and one reusable libcurl easy handle; one call performs one
 * request and hands back status, parsed JSON body and request id. The library
 * never prints and never logs the token.
 *
 * libcurl must be initialised by the program, not by this library: call
 * curl_global_init(CURL_GLOBAL_DEFAULT) once in main() before the first
 * iso_client_new() and curl_global_cleanup() at exit.
 *
 * A client is not thread-safe: use one per thread. */
#ifndef ISOSTACK_CLIENT_H
#define ISOSTACK_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "isostack/util.h"

ISO_PUBLIC_BEGIN

#define ISO_CLIENT_DEFAULT_URL        "http://127.0.0.1:8470"
#define ISO_CLIENT_DEFAULT_TIMEOUT_MS 30000L
#define ISO_CLIENT_MAX_RESPONSE       ((size_t)16 * 1024 * 1024) /* default response body limit */
#define ISO_CLIENT_REQUEST_ID_MAX     65                         /* 64 chars + NUL, as in the API */
#define ISO_CLIENT_MAX_URLS           8 /* in a comma-separated list of controllers */

struct iso_client;

struct iso_client_options {
	const char *url;        /* base URL "http[s]://host[:port][/prefix]", or several
	                         * separated by commas (controllers on one store: the
	                         * client finds the leader and sticks to it); NULL: default */
	const char *token;      /* bearer token; NULL or "" sends no Authorization header */
	const char *ca_file;    /* PEM bundle that verifies the server; NULL: system store */
	long timeout_ms;        /* limit for a whole request; 0: ISO_CLIENT_DEFAULT_TIMEOUT_MS */
	size_t max_response;    /* response body limit in bytes; 0: ISO_CLIENT_MAX_RESPONSE */
	const char *user_agent; /* NULL: "isostack-client/VERSION" */
};

/* One answer of the server. Owned by the caller; free with iso_response_clear(). */
struct iso_response {
	long status;  /* HTTP status: 200, 201, 204, 404, ... */
	json_t *body; /* parsed JSON body; NULL when the body is empty (204) or, for
	               * non-2xx answers only, not JSON */
	/* X-Request-Id of the response; the id this client sent when the server
	 * did not echo one. */
	char request_id[ISO_CLIENT_REQUEST_ID_MAX];
};

/* Creates a client. Copies every string in *opts. Fails with ISO_E_INVALID
 * (field "url", "token" or "ca_file") on a bad option: the URL must be http or
 * https and carry no credentials, the token only printable non-space ASCII,
 * the CA file readable. The error message never contains the token. */
int iso_client_new(const struct iso_client_options *opts, struct iso_client **out,
                   struct iso_error *err);
void iso_client_free(struct iso_client *c);
static inline void iso_client_freep(struct iso_client **c)
{
	if (*c)
		iso_client_free(*c);
}
#define _cleanup_client_ _cleanup_(iso_client_freep)

/* The base URL the client talks to now (of a list: the one it stuck to), without
 * trailing '/'. */
const char *iso_client_url(const struct iso_client *c);

/* Performs one request: `method` ("GET", "POST", "PUT", "PATCH", "DELETE"),
 * `path` starting with '/' and carrying its query already escaped (see
 * iso_client_escape), optional JSON `body`. Sends Authorization: Bearer,
 * Content-Type and Accept application/json and a fresh X-Request-Id.
 *
 * Returns 0 whenever the server answered, whatever the status: look at
 * out->status (iso_response_error() turns a non-2xx answer into an error).
 * Returns a negative errno and fills *err when no usable answer came:
 *   ISO_E_UNAVAILABLE  cannot connect, TLS failure, timeout, connection lost
 *                      (the message names the URL);
 *   ISO_E_TOO_LARGE    the response body exceeds the limit;
 *   ISO_E_INVALID      bad method or path (field "method"/"path"), bad URL;
 *   ISO_E_INTERNAL     a 2xx body that is not JSON, out of memory.
 * On failure *out is left cleared. */
int iso_client_request(struct iso_client *c, const char *method, const char *path,
                       const json_t *body, struct iso_response *out, struct iso_error *err);

/* iso_client_request with extra request headers: `headers` is NULL or a
 * NULL-terminated list of "Name: value" lines (e.g. "Idempotency-Key:
 * slurm-42"), each printable ASCII, at most 1024 bytes, and none of the
 * headers the client sets itself (Authorization, Content-Type, Accept,
 * Expect, X-Request-Id); else ISO_E_INVALID, field "headers", nothing sent.
 * A request retried on another controller of the URL list carries them too. */
int iso_client_request_headers(struct iso_client *c, const char *method, const char *path,
                               const json_t *body, const char *const *headers,
                               struct iso_response *out, struct iso_error *err);

/* GETs a list endpoint (`{"items":[...],"next":...}`) and follows `next`
 * cursors with `after=` until the last page. On success out->body is
 * {"items":[every item]} and out->status that of the last page. A non-2xx page
 * stops the walk and is handed back as it came (returns 0, check status). */
int iso_client_list_all(struct iso_client *c, const char *path, struct iso_response *out,
                        struct iso_error *err);

/* Frees the body and zeroes the response. */
void iso_response_clear(struct iso_response *r);
static inline void iso_response_clearp(struct iso_response *r)
{
	iso_response_clear(r);
}
#define _cleanup_response_ _cleanup_(iso_response_clearp)

static inline bool iso_response_ok(const struct iso_response *r)
{
	return r->status >= 200 && r->status < 300;
}

/* For a 2xx answer returns 0. Otherwise fills *err from the API error body
 * (`{"error":{"code","message","field"}}`; code and message from the HTTP
 * status when the body has none) and returns the class's negative errno.
 * Codes this build does not know map by HTTP status. */
int iso_response_error(const struct iso_response *r, struct iso_error *err);

/* Percent-encodes `s` for use as one path segment or one query value: every
 * byte except RFC 3986 unreserved characters becomes %XX. Returns a malloc'd
 * string, NULL when out of memory. */
char *iso_client_escape(const char *s);

/* ---- the Slurm account -> tenant map (src/client/tenant_map.c; issue
 * 15, docs/slurm.md) ---- */

/* A job's tenant is its Slurm account (SLURM_JOB_ACCOUNT, which Slurm
 * lower-cases), renamed by an optional file shared by the SPANK plugin
 * (`tenant_map=FILE`) and `isoctl slurm` (`--tenant-map FILE`): one
 * `ACCOUNT TENANT` a line, blanks and `#` comments (whole lines or after
 * the pair) ignored. An account is 1-63 characters of [A-Za-z0-9._-],
 * compared case-insensitively and listed once; a tenant is a tenant name. */
#define ISO_TENANT_MAP_MAX_BYTES (1024 * 1024)
#define ISO_TENANT_MAP_MAX_LINES 65536

struct iso_tenant_map_entry {
	char account[ISO_NAME_MAX]; /* lower-cased */
	char tenant[ISO_NAME_MAX];
	unsigned line;
};
struct iso_tenant_map {
	size_t n;
	struct iso_tenant_map_entry *entries; /* malloc'd */
};

/* Reads and parses `path` into *out (cleared first, and left clear after a
 * failure). -errno with *err: field "tenant_map", message "FILE:LINE: why"
 * (or "FILE: why" when it cannot be read). */
int iso_tenant_map_load(const char *path, struct iso_tenant_map *out, struct iso_error *err);
/* The same over text already read; `name` stands for the file in errors. */
int iso_tenant_map_parse(const char *text, size_t len, const char *name, struct iso_tenant_map *out,
                         struct iso_error *err);
/* The tenant of `account`: its map entry's, or NULL when the map (which
 * may be NULL) does not list it (the caller then uses the account itself,
 * when that is a tenant name). */
const char *iso_tenant_map_lookup(const struct iso_tenant_map *map, const char *account);
void iso_tenant_map_clear(struct iso_tenant_map *map);

/* A Slurm job's allocation is found by its Idempotency-Key,
 * "slurm:CLUSTER:JOBID:RESTART" (src/client/slurm_key.c, docs/slurm.md): the
 * cluster because job ids are unique only per slurmctld, the restart count
 * because a requeued job keeps its id. */
#define ISO_SLURM_CLUSTER_MAX 63
bool iso_slurm_cluster_valid(const char *cluster);
/* Writes the key; -EINVAL naming SLURM_CLUSTER_NAME or SLURM_JOB_ID. */
int iso_slurm_job_key(char *buf, size_t size, const char *cluster, uint32_t job, uint32_t restart,
                      struct iso_error *err);
/* True when `key` is a job key of `cluster`, with its job id (and restart
 * count when `restart` is not NULL); false for anything else. */
bool iso_slurm_job_key_parse(const char *key, const char *cluster, uint32_t *job,
                             uint32_t *restart);

ISO_PUBLIC_END

#endif

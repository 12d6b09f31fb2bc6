/* handlers_agents.c: the node agents' routes (docs/agents.md): a node's
 * desired state, read at once or long-polled (the connection is parked,
 * without a thread, until the controller answers it), and the status an
 * agent reports. Who may act for which node is the controller's business. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static const char *const desired_keys[] = {"after", "wait_s", "heartbeat", NULL};

/* A decimal number 0..max from the query, or -1 with r->err naming it. */
static int64_t query_number(struct api_request *r, const char *key, uint64_t max)
{
	const char *v = api_query(r, key);
	char *end = NULL;

	if (!v)
		return 0;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (!v[0] || v[0] < '0' || v[0] > '9' || errno || *end || n > max) {
		iso_error_set(&r->err, ISO_E_INVALID, key, "%s: must be an integer 0..%llu", key,
		              (unsigned long long)max);
		return -1;
	}
	return (int64_t)n;
}

/* A long poll's ?after=G&wait_s=S into `wait` (wait_s 0 without a
 * connection to park: api_handle_raw answers at once); -1 with r->err. */
static int long_poll_query(struct api_request *r, struct iso_desired_wait *wait)
{
	int64_t after = query_number(r, "after", INT64_MAX);
	int64_t wait_s = after < 0 ? -1 : query_number(r, "wait_s", 60);

	if (after < 0 || wait_s < 0)
		return -1;
	if (wait_s > 0 && !api_query(r, "after"))
		return iso_error_set(&r->err, ISO_E_INVALID, "after",
		                     "after: required with wait_s (the generation you hold)");
	wait->after = (uint64_t)after;
	wait->wait_s = r->conn ? (int)wait_s : 0;
	return 0;
}

/* A parked long poll's answer (a node's desired state, the SM's file). Only
 * a leader whose lease is live sends a document: one frozen past its lease
 * answers its waiters, when it runs again, with 503 not_leader (they ask the
 * next URL), never with the document of its stale term. */
static void desired_ready(void *arg, json_t *doc)
{
	struct api_request *r = arg;

	if (!api_serving(r->api, r->ctl)) {
		json_decref(doc);
		api_not_leader_reply(r);
		r->deferred_done = true;
		MHD_resume_connection(r->conn);
	} else if (doc)
		api_unpark(r, MHD_HTTP_OK, doc);
	else
		api_unpark(r, MHD_HTTP_INTERNAL_SERVER_ERROR,
		           json_pack("{s:{s:s, s:s, s:n}, s:s}", "error", "code", "internal",
		                     "message", "out of memory", "field", "request_id",
		                     r->request_id));
}

int api_node_desired(struct api_request *r)
{
	struct iso_desired_wait wait = {.fn = desired_ready, .arg = r};
	json_t *doc = NULL;

	if (api_check_query(r, desired_keys) < 0 || long_poll_query(r, &wait) < 0)
		return -1;
	int64_t heartbeat = query_number(r, "heartbeat", 1);
	if (heartbeat < 0)
		return -1;
	wait.heartbeat = heartbeat == 1;
	if (iso_controller_node_desired(r->ctl, &r->who, r->seg[2], &wait, &doc, &r->err) < 0)
		return -1;
	if (!doc)
		return api_park(r) ? 0 : -1; /* registered; r->conn is set */
	api_reply(r, MHD_HTTP_OK, doc);
	return 0;
}

/* PUT /v1/nodes/{node}/status: the report's shape is the codec's
 * (iso_codec_status_decode); what it may say of this node is the
 * controller's. */
int api_node_status(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	struct iso_agent_status st = {0};
	int ret;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0)
		return -1;
	if (iso_codec_status_decode(body, &st, &r->err) < 0 ||
	    iso_controller_node_status(r->ctl, &r->who, r->seg[2], &st, &r->err) < 0)
		ret = -1;
	else
		ret = 0;
	iso_codec_status_clear(&st);
	if (ret == 0)
		api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return ret;
}

/* GET /v1/fabric/sm/partitions?after=G&wait_s=S: the partitions.conf the
 * SM host's agent is to write (docs/fabric.md, "partitions.conf through the
 * SM host's agent"), long-polled like a node's desired state. */
int api_sm_partitions(struct api_request *r)
{
	static const char *const keys[] = {"after", "wait_s", NULL};
	struct iso_desired_wait wait = {.fn = desired_ready, .arg = r};
	json_t *doc = NULL;

	if (api_check_query(r, keys) < 0 || long_poll_query(r, &wait) < 0)
		return -1;
	if (iso_controller_sm_partitions(r->ctl, &r->who, &wait, &doc, &r->err) < 0)
		return -1;
	if (!doc)
		return api_park(r) ? 0 : -1;
	api_reply(r, MHD_HTTP_OK, doc);
	return 0;
}

/* PUT /v1/fabric/sm/status: what the SM host's agent wrote or refused. */
int api_sm_status(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	struct iso_sm_report rep;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0)
		return -1;
	if (iso_codec_sm_report_decode(body, &rep, &r->err) < 0 ||
	    iso_controller_sm_status(r->ctl, &r->who, &rep, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return 0;
}

/* handlers_faults.c: the fault and maintenance endpoints: GPU faults (XID
 * codes) and their restore, nodes going down and up, cordon/drain/uncordon
 * of a whole pool. Node agents report their GPUs' XIDs through the same
 * fault endpoint; the decisions are the controller's
 * (src/controller/faults.c). */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

_Static_assert(ISO_CODEC_MEMBER_MAX == ISO_MAX_MEMBERS - 1,
               "codec.h: a member index is below ISO_MAX_MEMBERS");

static const char *const no_keys[] = {NULL};

/* The GPU segment of /v1/nodes/N/gpus/I/fault: a device index. Anything
 * that is not one names no GPU, so it is a 404 like an index out of range. */
static int gpu_segment(struct api_request *r, int *gpu)
{
	const char *s = r->seg[4];
	char *end = NULL;
	long v;

	if (s[0] < '0' || s[0] > '9')
		goto bad;
	v = strtol(s, &end, 10);
	if (*end || v > 65535 || (s[0] == '0' && s[1]))
		goto bad;
	*gpu = (int)v;
	return 0;
bad:
	/* Like the controller's answer, without repeating the segment. */
	return iso_error_set(&r->err, ISO_E_NOT_FOUND, NULL, "no such GPU on node %s", r->seg[2]);
}

/* POST /v1/nodes/{node}/gpus/{index}/fault {"xid": N, ["gi", "ci",
 * "allocation", "member", "seq"]} */
int api_gpu_fault(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	struct iso_fault_report f = {0};
	json_t *out = NULL;
	int gpu = 0;

	/* The body's shape is the codec's (iso_codec_fault_decode). */
	if (api_check_query(r, NULL) < 0 || api_body_object(r, false, &body) < 0 ||
	    iso_codec_fault_decode(body, &f, &r->err) < 0 || gpu_segment(r, &gpu) < 0)
		return -1;
	f.gpu = gpu;
	if (iso_controller_gpu_fault_report(r->ctl, &r->who, r->seg[2], &f, &out, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, out);
	return 0;
}

/* DELETE /v1/nodes/{node}/gpus/{index}/fault */
int api_gpu_restore(struct api_request *r)
{
	int gpu = 0;

	if (api_check_query(r, NULL) < 0 || gpu_segment(r, &gpu) < 0 ||
	    iso_controller_gpu_restore(r->ctl, &r->who, r->seg[2], gpu, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_NO_CONTENT, json_null());
	return 0;
}

static int empty_body(struct api_request *r)
{
	_cleanup_(json_decrefp) json_t *body = NULL;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, true, &body) < 0 ||
	    iso_json_check_keys(body, NULL, no_keys, &r->err) < 0)
		return -1;
	return 0;
}

static int node_reply(struct api_request *r, json_t *evicted)
{
	int i = iso_cluster_state_node_index(iso_controller_state(r->ctl), r->seg[2]);
	json_t *node;

	if (i < 0) {
		json_decref(evicted);
		return iso_error_set(&r->err, ISO_E_NOT_FOUND, NULL, "node \"%s\" not found",
		                     r->seg[2]);
	}
	node = api_node_json(r->ctl, i);
	if (evicted)
		json_object_set_new(node, "evicted", evicted);
	api_reply(r, MHD_HTTP_OK, node);
	return 0;
}

/* POST /v1/nodes/{node}/down -> the node, plus "evicted": [ids] */
int api_node_down(struct api_request *r)
{
	json_t *evicted = NULL;

	if (empty_body(r) < 0 ||
	    iso_controller_node_down(r->ctl, &r->who, r->seg[2], &evicted, &r->err) < 0)
		return -1;
	return node_reply(r, evicted);
}

/* POST /v1/nodes/{node}/up -> the node */
int api_node_up(struct api_request *r)
{
	if (empty_body(r) < 0 || iso_controller_node_up(r->ctl, &r->who, r->seg[2], &r->err) < 0)
		return -1;
	return node_reply(r, NULL);
}

static int pool_set(struct api_request *r, enum iso_node_sched sched)
{
	json_t *out = NULL;

	if (empty_body(r) < 0 ||
	    iso_controller_pool_set_sched(r->ctl, &r->who, r->seg[2], sched, &out, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, out);
	return 0;
}

int api_pool_cordon(struct api_request *r)
{
	return pool_set(r, ISO_NODE_CORDONED);
}
int api_pool_drain(struct api_request *r)
{
	return pool_set(r, ISO_NODE_DRAINING);
}
int api_pool_uncordon(struct api_request *r)
{
	return pool_set(r, ISO_NODE_SCHEDULABLE);
}

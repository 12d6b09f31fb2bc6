/* handlers_nodes.c: /v1/nodes and /v1/gpus, for cluster-wide roles. The
 * hardware comes from the inventory; usage and cordon state from the
 * controller's cluster state. */
#include <string.h>

#include "api/internal.h"

static const char *const node_list_keys[] = {"pool", "limit", "after", NULL};
static const char *const gpu_list_keys[] = {"node", "limit", "after", NULL};

/* Nodes page in inventory order; the cursor is the last node's name, or
 * "NODE/INDEX" for GPUs. Returns the first position after the cursor. */
static int page_start(struct api_request *r, const char *after, int *node, int *gpu)
{
	const struct iso_cluster_state *cs = iso_controller_state(r->ctl);
	char name[ISO_NAME_MAX];
	const char *slash;

	*node = 0;
	if (gpu)
		*gpu = 0;
	if (!after)
		return 0;
	slash = gpu ? strchr(after, '/') : NULL;
	snprintf(name, sizeof(name), "%.*s", slash ? (int)(slash - after) : (int)strlen(after),
	         after);
	*node = iso_cluster_state_node_index(cs, name);
	if (*node < 0 || (gpu && !slash))
		return iso_error_set(&r->err, ISO_E_INVALID, "after", "after: unknown cursor");
	if (!slash) {
		*node += 1;
		return 0;
	}
	char *end = NULL;
	long g = strtol(slash + 1, &end, 10);
	if (!slash[1] || *end || g < 0 || g >= cs->inv->nodes[*node].n_gpus)
		return iso_error_set(&r->err, ISO_E_INVALID, "after", "after: unknown cursor");
	*gpu = (int)g + 1;
	return 0;
}

int api_node_list(struct api_request *r)
{
	const struct iso_inventory *inv = iso_controller_inventory(r->ctl);
	const char *pool = api_query(r, "pool");
	const char *after, *next = NULL;
	int limit, first, last = -1, n = 0;

	if (api_check_query(r, node_list_keys) < 0 ||
	    iso_controller_check_infra_read(&r->who, &r->err) < 0 ||
	    api_page(r, &limit, &after) < 0 || page_start(r, after, &first, NULL) < 0)
		return -1;
	json_t *arr = json_array();
	for (int i = first; i < inv->n_nodes; i++) {
		if (pool && strcmp(pool, inv->nodes[i].pool) != 0)
			continue;
		if (n == limit) {
			next = inv->nodes[last].name;
			break;
		}
		json_array_append_new(arr, api_node_json(r->ctl, i));
		last = i;
		n++;
	}
	api_reply(r, MHD_HTTP_OK, api_list(arr, next));
	return 0;
}

static int node_index(struct api_request *r)
{
	int i = iso_cluster_state_node_index(iso_controller_state(r->ctl), r->seg[2]);

	if (i < 0)
		iso_error_set(&r->err, ISO_E_NOT_FOUND, NULL, "node \"%s\" not found", r->seg[2]);
	return i;
}

int api_node_get(struct api_request *r)
{
	int i;

	if (api_check_query(r, NULL) < 0 || iso_controller_check_infra_read(&r->who, &r->err) < 0)
		return -1;
	i = node_index(r);
	if (i < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, api_node_json(r->ctl, i));
	return 0;
}

static int set_sched(struct api_request *r, enum iso_node_sched sched)
{
	_cleanup_(json_decrefp) json_t *body = NULL;
	static const char *const no_keys[] = {NULL};
	int i;

	if (api_check_query(r, NULL) < 0 || api_body_object(r, true, &body) < 0 ||
	    iso_json_check_keys(body, NULL, no_keys, &r->err) < 0 ||
	    iso_controller_node_set_sched(r->ctl, &r->who, r->seg[2], sched, &r->err) < 0)
		return -1;
	i = node_index(r);
	if (i < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, api_node_json(r->ctl, i));
	return 0;
}

int api_node_cordon(struct api_request *r)
{
	return set_sched(r, ISO_NODE_CORDONED);
}
int api_node_uncordon(struct api_request *r)
{
	return set_sched(r, ISO_NODE_SCHEDULABLE);
}
int api_node_drain(struct api_request *r)
{
	return set_sched(r, ISO_NODE_DRAINING);
}

static json_t *gpu_json(const struct iso_node *n, int g, const struct iso_gpu_occupancy *o,
                        const struct iso_allocation *live, int n_live,
                        const struct iso_gpu_fault *faults, int n_faults)
{
	json_t *fault = json_null();
	const struct iso_gpu *gpu = &n->gpus[g];
	json_t *instances = json_array();
	char mask[16];
	int k = 0;

	for (int b = gpu->model->memory_slices - 1; b >= 0; b--)
		mask[k++] = (o->free_mask >> b) & 1 ? '1' : '0';
	mask[k] = '\0';
	/* A faulted GPU is out of service: nothing free, no instances, and not
	 * "whole_used" (quarantine only borrows that occupancy). */
	for (int i = 0; i < n_faults; i++)
		if (faults[i].gpu == gpu->index && strcmp(faults[i].node, n->name) == 0)
			fault = json_pack("{s:i, s:o}", "xid", faults[i].xid, "at",
			                  api_time(faults[i].at_ms));
	for (int i = 0; i < n_live; i++) {
		const struct iso_allocation *a = &live[i];
		for (int s = 0; s < a->n_slots; s++) {
			const struct iso_slot *sl = &a->slots[s];
			if (sl->gpu != gpu->index || sl->member >= a->n_members)
				continue;
			/* slots hold member indexes; members are dense by index */
			if (strcmp(a->placed[sl->member].node, n->name) != 0)
				continue;
			json_array_append_new(
			    instances,
			    json_pack("{s:s, s:o, s:i, s:i, s:b}", "allocation", a->id, "profile",
			              sl->profile[0] ? json_string(sl->profile) : json_null(),
			              "start", sl->start, "width", sl->width, "whole", sl->whole));
		}
	}
	return json_pack("{s:s, s:i, s:s, s:b, s:b, s:i, s:i, s:i, s:i, s:s+, s:o, s:o}", "node",
	                 n->name, "index", gpu->index, "model", gpu->model->name, "mig_enabled",
	                 gpu->mig_enabled, "whole_used", o->whole && json_is_null(fault),
	                 "free_slices", __builtin_popcount(o->free_mask), "memory_slices",
	                 gpu->model->memory_slices, "compute_used", o->compute_used,
	                 "compute_slices", gpu->model->compute_slices, "free_mask", "0b", mask,
	                 "instances", instances, "fault", fault);
}

int api_gpu_list(struct api_request *r)
{
	const struct iso_inventory *inv = iso_controller_inventory(r->ctl);
	const struct iso_cluster_state *cs = iso_controller_state(r->ctl);
	const char *node = api_query(r, "node");
	struct iso_allocation *live = NULL;
	_cleanup_free_ struct iso_gpu_fault *faults = NULL;
	const char *after;
	char next[ISO_NAME_MAX + 16] = "";
	int n_faults = 0, n_live = 0, limit, first_node, first_gpu, n = 0, last_node = -1,
	    last_gpu = -1;

	if (api_check_query(r, gpu_list_keys) < 0 || api_page(r, &limit, &after) < 0 ||
	    page_start(r, after, &first_node, &first_gpu) < 0 ||
	    iso_controller_live_allocations(r->ctl, &r->who, &live, &n_live, &r->err) < 0)
		return -1;
	if (iso_controller_gpu_fault_list(r->ctl, &r->who, &faults, &n_faults, &r->err) < 0) {
		iso_allocations_free(live, n_live);
		return -1;
	}
	if (node && iso_cluster_state_node_index(cs, node) < 0) {
		iso_allocations_free(live, n_live);
		return iso_error_set(&r->err, ISO_E_NOT_FOUND, "node", "node \"%s\" not found",
		                     node);
	}
	json_t *arr = json_array();
	for (int i = first_node; i < inv->n_nodes && !next[0]; i++) {
		const struct iso_node *nd = &inv->nodes[i];
		if (node && strcmp(node, nd->name) != 0)
			continue;
		for (int g = i == first_node ? first_gpu : 0; g < nd->n_gpus; g++) {
			if (n == limit) {
				snprintf(next, sizeof(next), "%s/%d", inv->nodes[last_node].name,
				         last_gpu);
				break;
			}
			json_array_append_new(arr, gpu_json(nd, g, &cs->usage[i].gpus[g], live,
			                                    n_live, faults, n_faults));
			last_node = i;
			last_gpu = g;
			n++;
		}
	}
	iso_allocations_free(live, n_live);
	api_reply(r, MHD_HTTP_OK, api_list(arr, next[0] ? next : NULL));
	return 0;
}

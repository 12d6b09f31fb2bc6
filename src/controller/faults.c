/* faults.c: hardware leaving service and coming back: a GPU fault (an XID
 * code), a node going down or up, and cordoning or draining a whole pool so
 * drivers can be upgraded pool by pool. It lives apart from nodes.c because
 * a fault is not a switch an operator flips: it takes work away. Every
 * allocation on the failed hardware is evicted (ctl_alloc_evict: capacity,
 * fabric membership and quota go back; it is requeued or failed by its own
 * policy), and a faulted GPU is quarantined so that no policy places there
 * again until it is restored. The fault is written first and the evictions
 * follow, each in its own transaction; at start (ctl_faults_reapply) the same
 * convergence runs again, so a crash in between leaves nothing on hardware
 * that is out of service. docs/tenancy.md "Faults and maintenance". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

/* XIDs after which the GPU cannot be trusted with any work until someone
 * looks at it (NVIDIA's XID catalogue): 79 fallen off the bus (every
 * instance on the GPU is gone, docs/reference-mig.md), 48 double-bit ECC,
 * 95 uncontained ECC, 119/120 GSP errors. Every MIG instance on the GPU
 * goes with it. Others leave the GPU in service: 13, 31, 43, 45, 68, 109
 * are faults of one application (the ones the health check of NVIDIA's
 * k8s-device-plugin ignores), and 94, a *contained* ECC error, ends only
 * the application that hit it: "Unaffected applications
 * will continue to run and additional workloads can be launched on this GPU
 * without requiring a GPU reset" (NVIDIA, A100 GPU Memory Error Management,
 * "Response to Uncorrectable Contained ECC Errors"; with MIG on, its log
 * line names the GPU instance). */
bool iso_xid_takes_gpu(int xid)
{
	switch (xid) {
	case 48:
	case 79:
	case 95:
	case 119:
	case 120:
		return true;
	}
	return false;
}

/* The node and the GPU's position in it, checked as the caller may see
 * them: infrastructure is for cluster roles, then `action` must be allowed.
 * A node agent (scope node) sees its own node only: another answers 404
 * exactly like a missing one, as its desired state does. */
static int resolve_gpu(struct iso_controller *c, const struct iso_principal *p, const char *action,
                       const char *node, int gpu, int *ni, int *pos, struct iso_error *err)
{
	bool agent = ctl_scope_of(p, action) == CTL_SCOPE_NODE;
	int r = agent ? 0 : iso_controller_check_infra_read(p, err);

	*ni = *pos = -1;
	if (r < 0)
		return r;
	*ni = iso_cluster_state_node_index(&c->cs, node);
	if (*ni < 0 || (agent && strcmp(p->node, node) != 0))
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "node \"%s\" not found", node);
	*pos = -1;
	for (int j = 0; j < c->inv->nodes[*ni].n_gpus; j++)
		if (c->inv->nodes[*ni].gpus[j].index == gpu)
			*pos = j;
	if (*pos < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "node %s has no GPU %d", node,
		                     gpu);
	return ctl_authorize(p, action, NULL, err);
}

/* Does `a` hold anything on node `node` (gpu < 0) or on GPU `gpu` of it? */
static bool holds_there(const struct iso_allocation *a, const char *node, int gpu)
{
	if (a->state == ISO_ALLOC_PENDING || iso_alloc_state_terminal(a->state))
		return false;
	if (gpu < 0) {
		for (int k = 0; k < a->n_members; k++)
			if (strcmp(a->placed[k].node, node) == 0)
				return true;
		return false;
	}
	for (int s = 0; s < a->n_slots; s++) {
		int m = a->slots[s].member;
		if (a->slots[s].gpu == gpu && m >= 0 && m < a->n_members &&
		    strcmp(a->placed[m].node, node) == 0)
			return true;
	}
	return false;
}

/* Evicts every live allocation holding something there, each requeued or
 * failed by its own policy; their ids go to `evicted` (may be NULL). */
static int evict_holders(struct iso_controller *c, const char *node, int gpu, const char *reason,
                         json_t *evicted, struct iso_error *err)
{
	struct iso_alloc_filter f = {.live_only = true, .state = -1};
	struct iso_allocation *live = NULL;
	int n = 0, r;

	r = c->store->ops->alloc_list(c->store, &f, &live, &n, err);
	for (int i = 0; i < n && r == 0; i++) {
		if (!holds_there(&live[i], node, gpu))
			continue;
		r = ctl_alloc_evict(c, &live[i], !live[i].fail_on_preempt, "allocation.fault",
		                    reason, NULL, err);
		if (r == 0 && evicted)
			json_array_append_new(evicted, json_string(live[i].id));
	}
	iso_allocations_free(live, n);
	return r;
}

int ctl_evict_node(struct iso_controller *c, const char *node, const char *reason,
                   struct iso_error *err)
{
	return evict_holders(c, node, -1, reason, NULL, err);
}

/* Evicts what is left on the GPU and takes it out of service in memory. */
static int quarantine(struct iso_controller *c, int ni, int pos, int xid, json_t *evicted,
                      struct iso_error *err)
{
	const struct iso_node *node = &c->inv->nodes[ni];
	char reason[128];
	int r;

	snprintf(reason, sizeof(reason), "GPU %s/%d XID %d", node->name, node->gpus[pos].index,
	         xid);
	r = evict_holders(c, node->name, node->gpus[pos].index, reason, evicted, err);
	if (r < 0)
		return r;
	r = iso_cluster_state_gpu_quarantine(&c->cs, ni, pos);
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "GPU %s/%d could not be quarantined: %s", node->name,
		                     node->gpus[pos].index, strerror(-r));
	return 0;
}

static json_t *fault_answer(const char *node, const struct iso_fault_report *f, bool quarantined,
                            const char *effect, json_t *evicted)
{
	json_t *o = json_pack("{s:s, s:i, s:i, s:b, s:s, s:o}", "node", node, "gpu", f->gpu, "xid",
	                      f->xid, "quarantined", quarantined, "effect", effect, "evicted",
	                      evicted ? evicted : json_array());

	if (o && f->seq)
		json_object_set_new(o, "seq", json_integer((json_int_t)f->seq));
	return o;
}

/* The audit details of a fault: the XID, its effect, and what the agent
 * said it hit. */
static json_t *fault_details(const struct iso_fault_report *f, const char *effect)
{
	json_t *d = json_pack("{s:i, s:s}", "xid", f->xid, "effect", effect);

	if (!d)
		return NULL;
	if (f->gi >= 0)
		json_object_set_new(d, "gi", json_integer(f->gi));
	if (f->ci >= 0)
		json_object_set_new(d, "ci", json_integer(f->ci));
	if (f->allocation[0]) {
		json_object_set_new(d, "allocation", json_string(f->allocation));
		json_object_set_new(d, "member", json_integer(f->member));
	}
	if (f->seq)
		json_object_set_new(d, "seq", json_integer((json_int_t)f->seq));
	return d;
}

/* The highest fault seq applied for a node, kept in the store's meta
 * table ("fault_seq:NODE"), so that a fault re-sent after a lost answer or
 * a restart of either side is applied once. */
#define FAULT_SEQ_META "fault_seq:"

static int fault_seq_get(struct iso_controller *c, const char *node, uint64_t *out,
                         struct iso_error *err)
{
	char key[ISO_NAME_MAX + 16], buf[32] = "", *end = NULL;
	struct iso_error e = {0};
	int r;

	*out = 0;
	snprintf(key, sizeof(key), FAULT_SEQ_META "%s", node);
	r = c->store->ops->meta_get(c->store, key, buf, sizeof(buf), &e);
	if (r == -ENOENT || (r < 0 && e.code == ISO_E_NOT_FOUND))
		return 0;
	if (r < 0) {
		if (err)
			*err = e;
		return r;
	}
	errno = 0;
	*out = strtoull(buf, &end, 10);
	if (errno || !buf[0] || *end)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "store: meta %s is \"%s\"", key,
		                     buf);
	return 0;
}

static int fault_seq_set(struct iso_controller *c, const char *node, uint64_t seq,
                         struct iso_error *err)
{
	char key[ISO_NAME_MAX + 16], buf[32];

	snprintf(key, sizeof(key), FAULT_SEQ_META "%s", node);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)seq);
	return c->store->ops->meta_set(c->store, key, buf, err);
}

/* Is a fault of GPU `gpu` of `node` stored? */
static int fault_stored(struct iso_controller *c, const char *node, int gpu, bool *stored,
                        struct iso_error *err)
{
	struct iso_gpu_fault *faults = NULL;
	int n = 0, r = c->store->ops->gpu_fault_list(c->store, &faults, &n, err);

	*stored = false;
	for (int i = 0; r == 0 && i < n; i++)
		*stored = *stored || (faults[i].gpu == gpu && strcmp(faults[i].node, node) == 0);
	free(faults);
	return r;
}

int iso_controller_gpu_fault(struct iso_controller *c, const struct iso_principal *p,
                             const char *node, int gpu, int xid, json_t **out,
                             struct iso_error *err)
{
	struct iso_fault_report f = {.gpu = gpu, .xid = xid, .gi = -1, .ci = -1, .member = -1};

	return iso_controller_gpu_fault_report(c, p, node, &f, out, err);
}

int iso_controller_gpu_fault_report(struct iso_controller *c, const struct iso_principal *p,
                                    const char *node, const struct iso_fault_report *fr,
                                    json_t **out, struct iso_error *err)
{
	struct iso_gpu_fault f = {.gpu = fr->gpu, .xid = fr->xid, .at_ms = iso_now_ms()};
	int gpu = fr->gpu, xid = fr->xid;
	bool takes = iso_xid_takes_gpu(xid), already;
	char id[ISO_NAME_MAX + 16];
	uint64_t applied = 0;
	int ni, pos, r;

	r = resolve_gpu(c, p, "gpu.fault", node, gpu, &ni, &pos, err);
	if (r < 0)
		return r;
	if (xid < 0 || xid > ISO_XID_MAX)
		return iso_error_set(err, ISO_E_INVALID, "xid", "xid: must be 0..%d", ISO_XID_MAX);
	if (fr->seq && (r = fault_seq_get(c, node, &applied, err)) < 0)
		return r;
	already = iso_cluster_state_gpu_quarantined(&c->cs, ni, pos);
	if (fr->seq && fr->seq <= applied) {
		/* Sent again (its answer was lost): applied once already. If
		 * its quarantine stopped half-way (the fault is stored, the GPU
		 * still in service here), it is finished now, as a restart
		 * would; a fault restored since is not stored, and stays so. */
		json_t *evicted = NULL;
		bool stored = false;
		if (takes && !already) {
			r = fault_stored(c, node, gpu, &stored, err);
			if (r < 0)
				return r;
		}
		if (stored) {
			evicted = json_array();
			r = quarantine(c, ni, pos, xid, evicted, err);
			if (r < 0) {
				json_decref(evicted);
				return r;
			}
			already = true;
			ctl_place_pending(c);
		}
		iso_log(ISO_LOG_INFO, "gpu_fault_duplicate",
		        "request_id=%s by=%s node=%s gpu=%d xid=%d seq=%llu applied=%llu "
		        "finished=%s",
		        p->request_id, p->token_id, node, gpu, xid, (unsigned long long)fr->seq,
		        (unsigned long long)applied, stored ? "yes" : "no");
		*out = fault_answer(node, fr, already, "duplicate", evicted);
		return 0;
	}
	if (already && !fr->seq) {
		/* Already out of service: a repeated report changes nothing. */
		*out = fault_answer(node, fr, true, "already_quarantined", NULL);
		return 0;
	}
	snprintf(id, sizeof(id), "%s/%d", node, gpu);
	iso_strlcpy(f.node, node, sizeof(f.node));
	r = ctl_tx_begin(c, err);
	if (r == 0 && fr->seq)
		r = fault_seq_set(c, node, fr->seq, err);
	if (r == 0 && takes && !already)
		r = c->store->ops->gpu_fault_put(c->store, &f, err);
	if (r == 0 && !already)
		ctl_emit(c, p,
		         &(struct ctl_event){
		             .action = "gpu.fault",
		             .kind = "gpu",
		             .id = id,
		             .details = fault_details(fr, takes ? "quarantine" : "recorded")});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	if (already) {
		*out = fault_answer(node, fr, true, "already_quarantined", NULL);
		return 0;
	}
	iso_log(takes ? ISO_LOG_ERR : ISO_LOG_WARN, "gpu_fault",
	        "request_id=%s by=%s node=%s gpu=%d xid=%d gi=%d ci=%d allocation=%s member=%d "
	        "seq=%llu takes_gpu=%s",
	        p->request_id, p->token_id, node, gpu, xid, fr->gi, fr->ci,
	        fr->allocation[0] ? fr->allocation : "-", fr->member, (unsigned long long)fr->seq,
	        takes ? "yes" : "no");
	if (!takes) {
		*out = fault_answer(node, fr, false, "recorded", NULL);
		return 0;
	}
	json_t *evicted = json_array();
	/* The fault is durable now: if this stops half-way, the next report or
	 * the next start finishes it. */
	r = quarantine(c, ni, pos, xid, evicted, err);
	if (r < 0) {
		json_decref(evicted);
		return r;
	}
	ctl_place_pending(c); /* the requeued work may fit elsewhere */
	*out = fault_answer(node, fr, true, "quarantined", evicted);
	return 0;
}

int iso_controller_gpu_restore(struct iso_controller *c, const struct iso_principal *p,
                               const char *node, int gpu, struct iso_error *err)
{
	bool stored = false;
	char id[ISO_NAME_MAX + 16];
	int ni, pos, r;

	r = resolve_gpu(c, p, "gpu.restore", node, gpu, &ni, &pos, err);
	if (r < 0)
		return r;
	r = fault_stored(c, node, gpu, &stored, err);
	if (r < 0)
		return r;
	if (!stored && !iso_cluster_state_gpu_quarantined(&c->cs, ni, pos))
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "GPU %s/%d has no fault recorded",
		                     node, gpu);
	snprintf(id, sizeof(id), "%s/%d", node, gpu);
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = c->store->ops->gpu_fault_delete(c->store, node, gpu, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "gpu.restore", .kind = "gpu", .id = id});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	iso_cluster_state_gpu_restore(&c->cs, ni, pos);
	iso_log(ISO_LOG_INFO, "gpu_restore", "request_id=%s by=%s node=%s gpu=%d", p->request_id,
	        p->token_id, node, gpu);
	ctl_place_pending(c);
	return 0;
}

int iso_controller_gpu_fault_list(struct iso_controller *c, const struct iso_principal *p,
                                  struct iso_gpu_fault **out, int *n, struct iso_error *err)
{
	int r = iso_controller_check_infra_read(p, err);

	if (r < 0)
		return r;
	return c->store->ops->gpu_fault_list(c->store, out, n, err);
}

/* Writes node `ni`'s new state and its event in one transaction, then
 * keeps it in memory. */
static int node_state_write(struct iso_controller *c, const struct iso_principal *p, int ni,
                            enum iso_node_sched sched, const char *action, struct iso_error *err)
{
	const char *name = c->inv->nodes[ni].name;
	struct iso_node_state ns = {.sched = sched};
	int r;

	iso_strlcpy(ns.name, name, sizeof(ns.name));
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = c->store->ops->node_state_set(c->store, &ns, err);
	if (r == 0)
		ctl_emit(
		    c, p,
		    &(struct ctl_event){.action = action,
		                        .kind = "node",
		                        .id = name,
		                        .details = json_pack("{s:s, s:s}", "from",
		                                             iso_node_sched_name(c->cs.sched[ni]),
		                                             "to", iso_node_sched_name(sched))});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	iso_log(sched == ISO_NODE_DOWN ? ISO_LOG_ERR : ISO_LOG_INFO, "node_state",
	        "request_id=%s by=%s node=%s from=%s to=%s", p->request_id, p->token_id, name,
	        iso_node_sched_name(c->cs.sched[ni]), iso_node_sched_name(sched));
	c->cs.sched[ni] = sched;
	c->cs.version++;
	return 0;
}

static int resolve_node(struct iso_controller *c, const struct iso_principal *p, const char *action,
                        const char *node, int *ni, struct iso_error *err)
{
	int r = iso_controller_check_infra_read(p, err);

	if (r < 0)
		return r;
	*ni = iso_cluster_state_node_index(&c->cs, node);
	if (*ni < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "node \"%s\" not found", node);
	return ctl_authorize(p, action, NULL, err);
}

int iso_controller_node_down(struct iso_controller *c, const struct iso_principal *p,
                             const char *node, json_t **evicted, struct iso_error *err)
{
	char reason[ISO_NAME_MAX + 16];
	int ni, r;

	r = resolve_node(c, p, "node.down", node, &ni, err);
	if (r < 0)
		return r;
	/* Down first, durably and in memory, so nothing is placed there while
	 * its work leaves; a repeated report only finishes the evictions. */
	if (c->cs.sched[ni] != ISO_NODE_DOWN) {
		r = node_state_write(c, p, ni, ISO_NODE_DOWN, "node.down", err);
		if (r < 0)
			return r;
	}
	snprintf(reason, sizeof(reason), "node %s down", node);
	*evicted = json_array();
	r = evict_holders(c, node, -1, reason, *evicted, err);
	if (r < 0) {
		json_decref(*evicted);
		*evicted = NULL;
		return r;
	}
	ctl_place_pending(c);
	return 0;
}

int iso_controller_node_up(struct iso_controller *c, const struct iso_principal *p,
                           const char *node, struct iso_error *err)
{
	int ni, r;

	r = resolve_node(c, p, "node.up", node, &ni, err);
	if (r < 0)
		return r;
	/* Only a down node comes up: "up" never undoes an operator's cordon. */
	if (c->cs.sched[ni] != ISO_NODE_DOWN)
		return 0;
	r = node_state_write(c, p, ni, ISO_NODE_SCHEDULABLE, "node.up", err);
	if (r == 0)
		ctl_place_pending(c);
	return r;
}

int iso_controller_pool_set_sched(struct iso_controller *c, const struct iso_principal *p,
                                  const char *pool, enum iso_node_sched sched, json_t **out,
                                  struct iso_error *err)
{
	const struct iso_inventory *inv = c->inv;
	bool known = false;
	int r = iso_controller_check_infra_read(p, err);

	if (r < 0)
		return r;
	for (int i = 0; i < inv->n_pools && !known; i++)
		known = strcmp(inv->pools[i].name, pool) == 0;
	for (int i = 0; i < inv->n_nodes && !known; i++)
		known = strcmp(inv->nodes[i].pool, pool) == 0;
	if (!known)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "pool \"%s\" not found", pool);
	if (sched == ISO_NODE_DOWN)
		return iso_error_set(err, ISO_E_INVALID, NULL, "a pool is not reported down");
	static const char *const actions[] = {[ISO_NODE_SCHEDULABLE] = "pool.uncordon",
	                                      [ISO_NODE_CORDONED] = "pool.cordon",
	                                      [ISO_NODE_DRAINING] = "pool.drain"};
	r = ctl_authorize(p, (unsigned)sched < ISO_ARRAY_SIZE(actions) ? actions[sched] : NULL,
	                  NULL, err);
	if (r < 0)
		return r;
	json_t *nodes = json_array(), *skipped = json_array();
	/* One transaction per node: a pool is a batch of node changes, and a
	 * failure stops it with the earlier nodes changed (running it again is
	 * harmless). Down nodes stay down: a pool-wide uncordon after a driver
	 * upgrade must not bring back a node whose hardware failed. */
	for (int i = 0; i < inv->n_nodes && r == 0; i++) {
		if (strcmp(inv->nodes[i].pool, pool) != 0)
			continue;
		if (c->cs.sched[i] == ISO_NODE_DOWN) {
			json_array_append_new(skipped, json_string(inv->nodes[i].name));
			continue;
		}
		r = iso_controller_node_set_sched(c, p, inv->nodes[i].name, sched, err);
		if (r == 0)
			json_array_append_new(nodes, json_string(inv->nodes[i].name));
	}
	if (r < 0) {
		json_decref(nodes);
		json_decref(skipped);
		return r;
	}
	*out = json_pack("{s:s, s:s, s:o, s:o}", "pool", pool, "state", iso_node_sched_name(sched),
	                 "nodes", nodes, "skipped", skipped);
	return 0;
}

int ctl_faults_reapply(struct iso_controller *c, struct iso_error *err)
{
	struct iso_gpu_fault *faults = NULL;
	int n = 0, r;

	r = c->store->ops->gpu_fault_list(c->store, &faults, &n, err);
	if (r < 0)
		return r;
	for (int i = 0; i < n && r == 0; i++) {
		int ni = iso_cluster_state_node_index(&c->cs, faults[i].node), pos = -1;

		for (int j = 0; ni >= 0 && j < c->inv->nodes[ni].n_gpus; j++)
			if (c->inv->nodes[ni].gpus[j].index == faults[i].gpu)
				pos = j;
		if (pos < 0) {
			/* The row stays: the GPU may come back in the inventory. */
			iso_log(ISO_LOG_WARN, "gpu_fault_unknown_gpu", "node=%s gpu=%d xid=%d",
			        faults[i].node, faults[i].gpu, faults[i].xid);
			continue;
		}
		r = quarantine(c, ni, pos, faults[i].xid, NULL, err);
	}
	free(faults);
	for (int i = 0; i < c->inv->n_nodes && r == 0; i++) {
		char reason[ISO_NAME_MAX + 16];

		if (c->cs.sched[i] != ISO_NODE_DOWN)
			continue;
		snprintf(reason, sizeof(reason), "node %s down", c->inv->nodes[i].name);
		r = evict_holders(c, c->inv->nodes[i].name, -1, reason, NULL, err);
	}
	return r;
}

/* agents.c: the controller's side of the node agents (docs/agents.md): each
 * node's desired state as one document with a generation, the agents that
 * long-poll it, and the controller's fencing term.
 *
 * The document is what live allocations hold on the node, and the cluster
 * state already knows that: its take/give hook (on_member) tells this file
 * which members came and went, so a node's document is rebuilt from its own
 * few entries, never from a scan of the store. Hook calls also come from
 * changes that are undone (a commit that failed, a preemption trial), so a
 * touched node is only marked dirty; when the controller lock is released
 * (iso_controller_unlock) every dirty node's document is rebuilt and compared
 * with the one served: the generation moves exactly when the text changes,
 * and only then are its waiters answered.
 *
 * Generations survive a restart without a store write per change: the served
 * generation is term << 32 | a per-run counter, and the term is bumped in the
 * store at every start, so anything served after a restart is greater than
 * anything served before it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

#define TERM_META        "agent_term"
#define WAITERS_PER_NODE 4
#define DEFAULT_WAITERS  10000
#define MAX_WAIT_S       60

struct agent_entry {
	char alloc[ISO_ID_MAX];
	int member;
	int n_slots;
	struct iso_slot *slots; /* the member's slots, owned */
};

struct agent_waiter {
	iso_desired_fn fn;
	void *arg;
	int64_t deadline_ms;
};

struct agent_node {
	struct agent_entry *e;
	int n_e, cap_e;
	uint32_t gen; /* this run's counter */
	char *text;   /* the gpus array as served, for the comparison */
	json_t *gpus; /* the same, as JSON */
	bool dirty;
	struct agent_waiter w[WAITERS_PER_NODE];
	int n_w;
};

struct ctl_agents {
	int n;
	struct agent_node *nodes;
	int *dirty; /* node indexes, n_dirty of them */
	int n_dirty;
	int64_t term;
	int waiters, max_waiters;
};

static void entry_free(struct agent_entry *e)
{
	free(e->slots);
	memset(e, 0, sizeof(*e));
}

static void mark_dirty(struct ctl_agents *ag, int ni)
{
	if (ag->nodes[ni].dirty)
		return;
	ag->nodes[ni].dirty = true;
	ag->dirty[ag->n_dirty++] = ni;
}

/* The cluster state's hook: member `k` of `a` came to or left node `ni`. */
static void on_member(void *arg, int ni, const struct iso_allocation *a, int k, bool taken)
{
	struct ctl_agents *ag = arg;
	struct agent_node *n;

	if (!ag || ni < 0 || ni >= ag->n)
		return;
	n = &ag->nodes[ni];
	mark_dirty(ag, ni);
	if (!taken) {
		for (int i = 0; i < n->n_e; i++)
			if (n->e[i].member == k && strcmp(n->e[i].alloc, a->id) == 0) {
				entry_free(&n->e[i]);
				n->e[i] = n->e[--n->n_e];
				return;
			}
		return;
	}
	if (n->n_e == n->cap_e) {
		int cap = n->cap_e ? n->cap_e * 2 : 4;
		struct agent_entry *e = realloc(n->e, (size_t)cap * sizeof(*e));
		if (!e) {
			iso_log(ISO_LOG_ERR, "agent_desired_lost", "node=%s alloc=%s member=%d",
			        a->placed[k].node, a->id, k);
			return;
		}
		n->e = e;
		n->cap_e = cap;
	}
	struct agent_entry *e = &n->e[n->n_e];
	memset(e, 0, sizeof(*e));
	iso_strlcpy(e->alloc, a->id, sizeof(e->alloc));
	e->member = k;
	for (int s = 0; s < a->n_slots; s++)
		e->n_slots += a->slots[s].member == k;
	if (e->n_slots) {
		e->slots = calloc((size_t)e->n_slots, sizeof(*e->slots));
		if (!e->slots) {
			iso_log(ISO_LOG_ERR, "agent_desired_lost", "node=%s alloc=%s member=%d",
			        a->placed[k].node, a->id, k);
			return;
		}
		for (int s = 0, j = 0; s < a->n_slots; s++)
			if (a->slots[s].member == k)
				e->slots[j++] = a->slots[s];
	}
	n->n_e++;
}

struct slot_ref {
	const struct agent_entry *e;
	const struct iso_slot *s;
};

static int slot_ref_cmp(const void *pa, const void *pb)
{
	const struct slot_ref *a = pa, *b = pb;
	int c;

	if (a->s->gpu != b->s->gpu)
		return a->s->gpu < b->s->gpu ? -1 : 1;
	if (a->s->start != b->s->start)
		return a->s->start < b->s->start ? -1 : 1;
	c = strcmp(a->e->alloc, b->e->alloc);
	if (c)
		return c;
	return a->e->member - b->e->member;
}

/* The node's "gpus" array, in inventory order, instances by start. */
static json_t *build_gpus(const struct iso_controller *c, int ni)
{
	const struct iso_node *node = &c->inv->nodes[ni];
	const struct agent_node *n = &c->agents->nodes[ni];
	_cleanup_free_ struct slot_ref *refs = NULL;
	json_t *gpus = json_array();
	int n_refs = 0, at = 0;

	for (int i = 0; i < n->n_e; i++)
		n_refs += n->e[i].n_slots;
	if (n_refs) {
		refs = calloc((size_t)n_refs, sizeof(*refs));
		if (!refs) {
			json_decref(gpus);
			return NULL;
		}
		n_refs = 0;
		for (int i = 0; i < n->n_e; i++)
			for (int s = 0; s < n->e[i].n_slots; s++)
				refs[n_refs++] = (struct slot_ref){&n->e[i], &n->e[i].slots[s]};
		qsort(refs, (size_t)n_refs, sizeof(*refs), slot_ref_cmp);
	}
	for (int g = 0; g < node->n_gpus; g++) {
		const struct iso_gpu *gpu = &node->gpus[g];
		json_t *inst = json_array(), *whole = json_null();

		while (at < n_refs && refs[at].s->gpu < gpu->index)
			at++;
		for (; at < n_refs && refs[at].s->gpu == gpu->index; at++) {
			const struct slot_ref *r = &refs[at];
			if (r->s->whole) {
				json_decref(whole);
				whole = json_pack("{s:s, s:i}", "allocation", r->e->alloc, "member",
				                  r->e->member);
			} else {
				json_array_append_new(
				    inst,
				    json_pack("{s:s, s:i, s:i, s:s, s:i}", "profile", r->s->profile,
				              "start", r->s->start, "width", r->s->width,
				              "allocation", r->e->alloc, "member", r->e->member));
			}
		}
		json_array_append_new(gpus, json_pack("{s:i, s:b, s:o, s:o}", "index", gpu->index,
		                                      "mig", gpu->mig_enabled, "instances", inst,
		                                      "whole", whole));
	}
	return gpus;
}

static uint64_t served_generation(const struct ctl_agents *ag, int ni)
{
	return ((uint64_t)ag->term << 32) | ag->nodes[ni].gen;
}

static json_t *document(const struct iso_controller *c, int ni)
{
	const struct ctl_agents *ag = c->agents;

	return json_pack("{s:s, s:I, s:I, s:O, s:[]}", "node", c->inv->nodes[ni].name, "generation",
	                 (json_int_t)served_generation(ag, ni), "term", (json_int_t)ag->term,
	                 "gpus", ag->nodes[ni].gpus, "vfs");
}

static void answer_waiters(struct iso_controller *c, int ni, bool all)
{
	struct agent_node *n = &c->agents->nodes[ni];
	int64_t now = iso_now_ms();

	for (int i = 0; i < n->n_w;) {
		if (!all && n->w[i].deadline_ms > now) {
			i++;
			continue;
		}
		struct agent_waiter w = n->w[i];
		n->w[i] = n->w[--n->n_w];
		c->agents->waiters--;
		w.fn(w.arg, document(c, ni));
	}
}

/* Rebuilds node `ni`'s document; its generation moves when the text did. */
static void settle_node(struct iso_controller *c, int ni)
{
	struct agent_node *n = &c->agents->nodes[ni];
	json_t *gpus = build_gpus(c, ni);
	char *text = gpus ? json_dumps(gpus, JSON_COMPACT) : NULL;

	n->dirty = false;
	if (!text) {
		/* Keep the old one; the next change tries again. */
		json_decref(gpus);
		iso_log(ISO_LOG_ERR, "agent_desired_failed", "node=%s reason=\"out of memory\"",
		        c->inv->nodes[ni].name);
		return;
	}
	if (n->text && strcmp(n->text, text) == 0) {
		free(text);
		json_decref(gpus);
		return;
	}
	free(n->text);
	json_decref(n->gpus);
	n->text = text;
	n->gpus = gpus;
	n->gen++;
	answer_waiters(c, ni, true);
}

void ctl_agents_settle(struct iso_controller *c)
{
	struct ctl_agents *ag = c->agents;

	if (!ag)
		return;
	while (ag->n_dirty > 0)
		settle_node(c, ag->dirty[--ag->n_dirty]);
}

/* The term: one more than the stored one, stored before anything is served. */
static int bump_term(struct iso_controller *c, struct iso_error *err)
{
	char buf[32] = "", *end = NULL;
	long long t = 0;
	int r = c->store->ops->meta_get(c->store, TERM_META, buf, sizeof(buf), NULL);

	if (r == 0) {
		t = strtoll(buf, &end, 10);
		if (!buf[0] || *end || t < 0 || t >= (1LL << 31))
			return iso_error_set(err, ISO_E_INTERNAL, NULL,
			                     "store: meta %s is \"%s\", not a term", TERM_META,
			                     buf);
	}
	snprintf(buf, sizeof(buf), "%lld", t + 1);
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = c->store->ops->meta_set(c->store, TERM_META, buf, err);
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	c->agents->term = t + 1;
	iso_log(ISO_LOG_INFO, "agent_term", "term=%lld", t + 1);
	return 0;
}

int ctl_agents_open(struct iso_controller *c, const struct iso_controller_params *params,
                    struct iso_error *err)
{
	struct ctl_agents *ag = calloc(1, sizeof(*ag));
	int n = c->inv->n_nodes;

	if (!ag)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->agents = ag;
	ag->n = n;
	ag->max_waiters =
	    params->agent_max_waiters > 0 ? params->agent_max_waiters : DEFAULT_WAITERS;
	ag->nodes = calloc((size_t)(n > 0 ? n : 1), sizeof(*ag->nodes));
	ag->dirty = calloc((size_t)(n > 0 ? n : 1), sizeof(*ag->dirty));
	if (!ag->nodes || !ag->dirty)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	/* Every node gets its first document at the first settle. */
	for (int i = 0; i < n; i++)
		mark_dirty(ag, i);
	c->cs.on_member = on_member;
	c->cs.on_member_arg = ag;
	return bump_term(c, err);
}

void ctl_agents_close(struct iso_controller *c)
{
	struct ctl_agents *ag = c->agents;

	if (!ag)
		return;
	c->cs.on_member = NULL;
	c->cs.on_member_arg = NULL;
	for (int i = 0; ag->nodes && i < ag->n; i++) {
		struct agent_node *n = &ag->nodes[i];
		for (int j = 0; j < n->n_e; j++)
			entry_free(&n->e[j]);
		free(n->e);
		free(n->text);
		json_decref(n->gpus);
	}
	free(ag->nodes);
	free(ag->dirty);
	free(ag);
	c->agents = NULL;
}

void ctl_agents_tick(struct iso_controller *c)
{
	struct ctl_agents *ag = c->agents;

	if (!ag)
		return;
	ctl_agents_settle(c);
	for (int i = 0; ag->waiters > 0 && i < ag->n; i++)
		if (ag->nodes[i].n_w)
			answer_waiters(c, i, false);
}

int64_t iso_controller_agent_term(const struct iso_controller *c)
{
	return c->agents ? c->agents->term : 0;
}

/* Node `node` as `p` may act for it under `action`: a node-agent only for
 * its own node (another answers 404 exactly like a missing one). */
static int resolve_agent_node(struct iso_controller *c, const struct iso_principal *p,
                              const char *action, const char *node, int *ni, struct iso_error *err)
{
	enum ctl_scope scope;
	int r = ctl_authorize(p, action, &scope, err);

	if (r < 0)
		return r;
	*ni = iso_cluster_state_node_index(&c->cs, node);
	if (*ni < 0 || (scope == CTL_SCOPE_NODE && strcmp(p->node, node) != 0))
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "node \"%s\" not found", node);
	return 0;
}

int iso_controller_node_desired(struct iso_controller *c, const struct iso_principal *p,
                                const char *node, const struct iso_desired_wait *wait, json_t **out,
                                struct iso_error *err)
{
	struct ctl_agents *ag = c->agents;
	int ni, r;

	*out = NULL;
	r = resolve_agent_node(c, p, "node.desired.read", node, &ni, err);
	if (r < 0)
		return r;
	if (wait && (wait->wait_s < 0 || wait->wait_s > MAX_WAIT_S))
		return iso_error_set(err, ISO_E_INVALID, "wait_s", "wait_s: must be 0..%d",
		                     MAX_WAIT_S);
	ctl_agents_settle(c);
	struct agent_node *n = &ag->nodes[ni];
	if (!wait || !wait->fn || wait->wait_s == 0 || wait->after != served_generation(ag, ni)) {
		*out = document(c, ni);
		return *out ? 0 : iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	}
	if (n->n_w >= WAITERS_PER_NODE)
		return iso_error_set(err, ISO_E_LIMIT, "wait_s",
		                     "node %s already has %d waiting requests", node,
		                     WAITERS_PER_NODE);
	if (ag->waiters >= ag->max_waiters)
		return iso_error_set(err, ISO_E_LIMIT, "wait_s",
		                     "the controller already has %d waiting requests (see "
		                     "--agent-max-waiters)",
		                     ag->max_waiters);
	n->w[n->n_w++] = (struct agent_waiter){
	    .fn = wait->fn, .arg = wait->arg, .deadline_ms = iso_now_ms() + wait->wait_s * 1000LL};
	ag->waiters++;
	return 0;
}

void iso_controller_agents_release_waiters(struct iso_controller *c)
{
	struct ctl_agents *ag = c->agents;

	for (int i = 0; ag && ag->waiters > 0 && i < ag->n; i++)
		answer_waiters(c, i, true);
}

/* sm.c: the controller's side of the SM host's agent (docs/fabric.md,
 * "partitions.conf through the SM host's agent"). With
 * fabric.partitions_writer agent the opensm driver writes no file: it
 * publishes the rendered, parse-checked partitions.conf, and the agent of
 * fabric.sm_node long-polls it here with the leader's term, the same term
 * the node agents get. A stale leader's document therefore carries a lower
 * term than the one the agent already wrote, and the agent refuses it: no
 * command from a stale leader reaches the SM. The agent reports what it
 * wrote; under this controller's term that advances the driver's applied
 * generation, and the driver confirms by reading the fabric back as before.
 *
 * The long poll is the node agents' (docs/agents.md): the served generation
 * is term << 32 | the intent's generation, a request whose `after` is that
 * generation waits (parked, no thread) until it moves or wait_s passes,
 * checked on the controller's tick. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"
#include "isostack/codec.h"

#define SM_WAITERS 4
#define MAX_WAIT_S 60

struct sm_waiter {
	iso_desired_fn fn;
	void *arg;
	uint64_t after;
	int64_t deadline_ms;
};

struct ctl_sm {
	struct sm_waiter w[SM_WAITERS];
	int n_w;
	uint64_t reported; /* the last generation the agent reported, for the log */
	bool closing;      /* the API is stopping: nobody waits any more */
};

static struct iso_fabric_driver *sm_driver(const struct iso_controller *c)
{
	struct iso_fabric_driver *d = ctl_fabric_driver(c);

	return d && d->ops->sm_document ? d : NULL;
}

/* Only the agent of fabric.sm_node: the table says node-agent (scope
 * NODE), this says which node. */
static int authorize(struct iso_controller *c, const struct iso_principal *p, const char *action,
                     struct iso_error *err)
{
	enum ctl_scope scope;
	int r = ctl_authorize(p, action, &scope, err);

	if (r < 0)
		return r;
	if (!c->inv->fabric.partitions_by_agent || strcmp(p->node, c->inv->fabric.sm_node) != 0)
		return iso_error_set(err, ISO_E_FORBIDDEN, NULL,
		                     "only the agent of the SM host (fabric.sm_node) may %s the "
		                     "SM's partitions; this token acts for node %s",
		                     strcmp(action, "fabric.sm.read") == 0 ? "read" : "report",
		                     p->node);
	if (!sm_driver(c))
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL,
		                     "no SM document: the fabric driver is not opensm with "
		                     "fabric.partitions_writer agent");
	return 0;
}

/* The document now, or NULL (*gen 0) before the driver has one. */
static json_t *document(struct iso_controller *c, uint64_t *gen)
{
	struct iso_fabric_driver *d = sm_driver(c);
	uint64_t term = (uint64_t)iso_controller_agent_term(c), g = 0;
	_cleanup_free_ char *text = NULL;
	struct iso_sm_document doc;

	*gen = 0;
	if (!d || term == 0 || d->ops->sm_document(d, &g, &text) < 0)
		return NULL;
	doc = (struct iso_sm_document){
	    .term = term, .generation = term << 32 | (g & 0xffffffffu), .text = text};
	*gen = doc.generation;
	return iso_codec_sm_document_encode(&doc);
}

int iso_controller_sm_partitions(struct iso_controller *c, const struct iso_principal *p,
                                 const struct iso_desired_wait *wait, json_t **out,
                                 struct iso_error *err)
{
	uint64_t gen;
	int r;

	*out = NULL;
	if ((r = authorize(c, p, "fabric.sm.read", err)) < 0)
		return r;
	if (wait && (wait->wait_s < 0 || wait->wait_s > MAX_WAIT_S))
		return iso_error_set(err, ISO_E_INVALID, "wait_s", "wait_s: must be 0..%d",
		                     MAX_WAIT_S);
	if (!c->sm && !(c->sm = calloc(1, sizeof(*c->sm))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	*out = document(c, &gen);
	if (*out &&
	    (!wait || !wait->fn || wait->wait_s == 0 || wait->after != gen || c->sm->closing))
		return 0;
	if (!*out && (!wait || !wait->fn || wait->wait_s == 0 || c->sm->closing))
		return iso_error_set(err, ISO_E_UNAVAILABLE, NULL,
		                     "the fabric driver has published no partitions.conf yet");
	json_decref(*out);
	*out = NULL;
	if (c->sm->n_w >= SM_WAITERS)
		return iso_error_set(err, ISO_E_LIMIT, "wait_s",
		                     "the SM document already has %d waiting requests", SM_WAITERS);
	c->sm->w[c->sm->n_w++] = (struct sm_waiter){
	    .fn = wait->fn,
	    .arg = wait->arg,
	    .after = wait->after,
	    .deadline_ms = iso_now_ms() + wait->wait_s * 1000LL,
	};
	return 0;
}

void ctl_sm_tick(struct iso_controller *c, bool all)
{
	struct ctl_sm *sm = c->sm;
	int64_t now = iso_now_ms();
	uint64_t gen = 0;
	json_t *doc;

	if (!sm)
		return;
	sm->closing |= all;
	if (sm->n_w == 0)
		return;
	doc = document(c, &gen);
	for (int i = 0; i < sm->n_w;) {
		struct sm_waiter w = sm->w[i];

		/* no document yet and time to answer: the agent asks again */
		if (!all && (!doc || gen == w.after) && w.deadline_ms > now) {
			i++;
			continue;
		}
		sm->w[i] = sm->w[--sm->n_w];
		w.fn(w.arg, doc ? json_incref(doc) : NULL);
	}
	json_decref(doc);
}

int iso_controller_sm_status(struct iso_controller *c, const struct iso_principal *p,
                             const struct iso_sm_report *rep, struct iso_error *err)
{
	uint64_t term = (uint64_t)iso_controller_agent_term(c);
	struct iso_fabric_driver *d;
	int r;

	if ((r = authorize(c, p, "fabric.sm.status", err)) < 0)
		return r;
	if (rep->term > term)
		return iso_error_set(err, ISO_E_CONFLICT, "term",
		                     "term: the SM's file holds term %" PRIu64
		                     ", above this controller's %" PRIu64 ": a newer leader exists",
		                     rep->term, term);
	/* whether OpenSM runs, in every report of whatever term: the SM's
	 * reachability (GET /v1/fabric/health) is not a command */
	if ((d = sm_driver(c)) && d->ops->sm_reported)
		d->ops->sm_reported(d, rep->has_sm_alive ? rep->sm_alive : -1);
	if (rep->refused)
		iso_log(ISO_LOG_WARN, "fabric_sm_refused",
		        "term=%" PRIu64 " generation=%" PRIu64 " reason=\"%s\"", rep->refused_term,
		        rep->refused_generation, rep->refused_reason);
	if (rep->term < term)
		return 0; /* nothing of this term written yet */
	d = sm_driver(c);
	if (!c->sm && !(c->sm = calloc(1, sizeof(*c->sm))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	if (rep->generation != c->sm->reported)
		iso_log(ISO_LOG_INFO, "fabric_sm_applied",
		        "term=%" PRIu64 " generation=%" PRIu64 " intent_generation=%" PRIu64, term,
		        rep->generation, rep->generation & 0xffffffffu);
	c->sm->reported = rep->generation;
	d->ops->sm_applied(
	    d, rep->generation & 0xffffffffu,
	    rep->incident && rep->incident_generation >> 32 == term ? rep->incident_line : NULL,
	    rep->incident_generation & 0xffffffffu);
	return 0;
}

void ctl_sm_close(struct iso_controller *c)
{
	/* parked requests were answered when the API stopped
	 * (iso_controller_agents_release_waiters) */
	free(c->sm);
	c->sm = NULL;
}

/* internal.h: the controller's own state, shared by its use-case files only. */
#ifndef ISOSTACK_CONTROLLER_INTERNAL_H
#define ISOSTACK_CONTROLLER_INTERNAL_H

#include "isostack/controller.h"

#include <jansson.h>

struct iso_controller {
	const struct iso_inventory *inv; /* borrowed */
	struct iso_store *store;         /* borrowed */
	const struct iso_placer *placer;
	struct iso_cluster_state cs; /* what live allocations hold, mirrors the store */

	/* audit log: the tree mirrors the stored events, the head is the latest
	 * signed one; events of the open transaction wait in `queue` */
	struct iso_merkle *tree;
	struct iso_audit_key key;
	struct iso_audit_head head;
	bool have_head;
	struct iso_audit_event *queue;
	int n_queue, cap_queue;
};

/* An audit event as a use case describes it; the actor comes from the
 * principal (NULL: the daemon itself). */
struct ctl_event {
	const char *action; /* "tenant.create" */
	const char *kind;   /* "tenant" */
	const char *id;
	const char *tenant; /* the object's tenant, NULL/"" when none */
	int64_t tenant_id;
	json_t *details; /* stolen; NULL = {} */
};

/* Queues an event of the current (or the next begun) transaction; ctl_tx_end
 * writes it with the change, or drops it when the change rolls back. */
void ctl_emit(struct iso_controller *c, const struct iso_principal *p, const struct ctl_event *ev);
/* Records events in a transaction of their own (the daemon's start and stop,
 * audit reads, refused attempts). */
void ctl_record(struct iso_controller *c, const struct iso_principal *p, const struct ctl_event *ev,
                enum iso_audit_outcome outcome, const char *reason);

/* ---- audit.c ---- */
int ctl_audit_open(struct iso_controller *c, const char *state_dir, bool accept_break,
                   struct iso_error *err);
void ctl_audit_close(struct iso_controller *c);
/* Inside the open transaction: writes the queued events, and a new signed
 * head when the last is a second old or `force`. */
int ctl_audit_flush(struct iso_controller *c, bool force, struct iso_error *err);
/* After a rollback: forget what the flush appended in memory. */
void ctl_audit_undo(struct iso_controller *c, uint64_t size, const struct iso_audit_head *head,
                    bool have_head);
void ctl_audit_drop_queue(struct iso_controller *c);
/* Signs a head over everything now, in a transaction of its own. */
int ctl_audit_sign_now(struct iso_controller *c, struct iso_error *err);

/* The one store transaction of a use case: begin, then the writes, then
 * end, which commits when r == 0 and otherwise rolls back (also when the
 * commit itself fails). Returns the final result. Every state change goes
 * through this pair, so it is the one place a change's companions (the audit
 * event) will join the same transaction. */
int ctl_tx_begin(struct iso_controller *c, struct iso_error *err);
int ctl_tx_end(struct iso_controller *c, int r, struct iso_error *err);

/* Authorisation helpers shared by the use cases. */
bool ctl_is_cluster_role(const struct iso_principal *p);
int ctl_require_admin(const struct iso_principal *p, struct iso_error *err);
/* Resolves a tenant name as the caller may see it: another tenant's name is
 * ISO_E_NOT_FOUND exactly like a missing one. NULL name = the caller's own
 * (cluster roles must name one). */
int ctl_resolve_tenant(struct iso_controller *c, const struct iso_principal *p, const char *name,
                       const char *field, struct iso_tenant *out, struct iso_error *err);

/* Places pending allocations that now fit, oldest first, one transaction
 * each. Called after anything frees capacity, and at start. */
void ctl_place_pending(struct iso_controller *c);

/* Token generation, shared by bootstrap and issuance. */
int ctl_token_new(struct iso_token *t, char *secret, size_t size, struct iso_error *err);

#endif

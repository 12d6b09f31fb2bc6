/* internal.h: the controller's own state, shared by its use-case files only. */
#ifndef ISOSTACK_CONTROLLER_INTERNAL_H
#define ISOSTACK_CONTROLLER_INTERNAL_H

#include "isostack/controller.h"

struct iso_controller {
	const struct iso_inventory *inv; /* borrowed */
	struct iso_store *store;         /* borrowed */
	const struct iso_placer *placer;
	struct iso_cluster_state cs; /* what live allocations hold, mirrors the store */
};

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

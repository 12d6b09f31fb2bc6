/* tnum.h: a per-tenant number from an inventory range. A tenant's VXLAN VNI
 * (vni.c) and its RoCE VLAN (fabric.c) are both handed out this way: one per
 * tenant, taken in the transaction that creates the tenant, freed by the one
 * that deletes it, never held by two tenants, kept as store meta rows. */
#ifndef ISOSTACK_CONTROLLER_TNUM_H
#define ISOSTACK_CONTROLLER_TNUM_H

#include <stdbool.h>
#include <stdint.h>

struct iso_controller;
struct iso_error;
struct iso_tenant;

/* What a pool hands out, for its meta keys, errors and log. */
struct ctl_tnum_kind {
	const char *meta_prefix; /* "vni.tenant.": the tenant id follows */
	const char *field;       /* the inventory range, named in errors: "fabric.vni_range" */
	const char *noun;        /* "VNI" */
	uint32_t limit;          /* the largest valid number */
	const char *log_event;   /* logged when tenants got theirs at start */
};

struct ctl_tnum {
	int64_t tenant_id;
	uint32_t num;
};

/* Off (no range) until opened; every call on a pool that is off does
 * nothing and finds nothing. */
struct ctl_tnums {
	const struct ctl_tnum_kind *kind;
	bool on;
	uint32_t min, max;
	struct ctl_tnum *v; /* sorted by num */
	int n, cap;
	/* Where the next search for a free number starts: one past the last
	 * number handed out, wrapping to min. A freed number is given again
	 * only after the rest of the range was, so a node that missed the
	 * release (an agent offline with the old tenant's VXLAN or VLAN still
	 * set) does not meet a new tenant on it. Kept as the meta row
	 * kind->meta_prefix + "next" in each creating transaction. */
	uint32_t next;
};

/* Checks [min, max] within 1..kind->limit, reads every tenant's number back
 * (refusing one outside the range or held twice) and gives one to each
 * tenant without, in one transaction. */
int ctl_tnums_open(struct iso_controller *c, struct ctl_tnums *p, const struct ctl_tnum_kind *k,
                   uint32_t min, uint32_t max, struct iso_error *err);
void ctl_tnums_close(struct ctl_tnums *p);
uint32_t ctl_tnums_of(const struct ctl_tnums *p, int64_t tenant_id); /* 0: none */
int64_t ctl_tnums_owner(const struct ctl_tnums *p, uint32_t num);    /* 0: none */
int ctl_tnums_count(const struct ctl_tnums *p);                      /* tenants with one */
/* Inside the tenant's creating transaction: the first free number from
 * p->next on (wrapping), stored with the new p->next;
 * ISO_E_NO_CAPACITY naming kind->field when the range is full. */
int ctl_tnums_tenant_create(struct iso_controller *c, struct ctl_tnums *p,
                            const struct iso_tenant *t, struct iso_error *err);
/* Inside the deleting transaction: the tenant's number freed in the store. */
int ctl_tnums_tenant_delete(struct iso_controller *c, struct ctl_tnums *p, int64_t tenant_id,
                            struct iso_error *err);
/* After a rolled-back creation or a committed deletion: forgotten in memory. */
void ctl_tnums_forget(struct ctl_tnums *p, int64_t tenant_id);

/* ---- fabric.c: the tenants' RoCE VLANs on an ethernet fabric with
 * fabric.vlan_range (docs/fabric.md "Ethernet", "RoCE VFs") ---- */
#define CTL_VLAN_MAX 4094u
uint16_t ctl_fabric_tenant_vlan(const struct iso_controller *c, int64_t tenant_id); /* 0: none */
int64_t ctl_fabric_vlan_owner(const struct iso_controller *c, uint16_t vlan);       /* 0: none */

#endif

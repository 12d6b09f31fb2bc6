/* vni.c: each tenant's VXLAN VNI on an Ethernet fabric (issue 14,
 * docs/fabric.md "Ethernet"). A VNI is a tenant's L2 domain on the
 * overlay, so it is handed out like a P_Key (src/controller/fabric.c): one
 * per tenant from the inventory's fabric.vni_range, taken in the same store
 * transaction that creates the tenant, freed by the one that deletes it,
 * never held by two tenants. Tenants that existed before the fabric was
 * Ethernet get theirs at start. The pool is tnum.c's, shared with the
 * tenants' RoCE VLANs; each VNI is the store meta row "vni.tenant.<id>".
 * On a Slingshot fabric (issue 17) the same pool gives each tenant the
 * 16-bit VNI its members' CXI services list. */
#include <stdlib.h>

#include "controller/internal.h"
#include "controller/tnum.h"

struct ctl_vnis {
	struct ctl_tnums p;
};

static const struct ctl_tnum_kind vni_kind = {
    .meta_prefix = "vni.tenant.",
    .field = "fabric.vni_range",
    .noun = "VNI",
    .limit = ISO_VNI_MAX,
    .log_event = "fabric_vnis_assigned",
};

/* On a Slingshot fabric the same pool hands out 16-bit VNIs: the number a
 * tenant's CXI services list (docs/fabric.md "Slingshot"). One pool, one
 * meta row per tenant, whichever the fabric. */
static const struct ctl_tnum_kind slingshot_kind = {
    .meta_prefix = "vni.tenant.",
    .field = "fabric.vni_range",
    .noun = "VNI",
    .limit = ISO_CXI_VNI_MAX,
    .log_event = "fabric_vnis_assigned",
};

static bool pooled(const struct iso_controller *c)
{
	return c->vnis != NULL;
}

uint32_t ctl_vni_of(const struct iso_controller *c, int64_t tenant_id)
{
	return pooled(c) ? ctl_tnums_of(&c->vnis->p, tenant_id) : 0;
}

int64_t ctl_vni_owner(const struct iso_controller *c, uint32_t vni)
{
	return pooled(c) ? ctl_tnums_owner(&c->vnis->p, vni) : 0;
}

int ctl_vni_count(const struct iso_controller *c)
{
	return pooled(c) ? ctl_tnums_count(&c->vnis->p) : 0;
}

uint32_t iso_controller_tenant_vni(const struct iso_controller *c, int64_t tenant_id)
{
	return ctl_vni_of(c, tenant_id);
}

int ctl_vni_open(struct iso_controller *c, struct iso_error *err)
{
	const struct iso_fabric_config *fc = &c->inv->fabric;

	if (fc->type != ISO_FABRIC_ETHERNET && fc->type != ISO_FABRIC_SLINGSHOT)
		return 0;
	if (!(c->vnis = calloc(1, sizeof(*c->vnis))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	return ctl_tnums_open(c, &c->vnis->p,
	                      fc->type == ISO_FABRIC_SLINGSHOT ? &slingshot_kind : &vni_kind,
	                      fc->vni_min, fc->vni_max, err);
}

void ctl_vni_close(struct iso_controller *c)
{
	if (!c->vnis)
		return;
	ctl_tnums_close(&c->vnis->p);
	free(c->vnis);
	c->vnis = NULL;
}

int ctl_vni_tenant_create(struct iso_controller *c, const struct iso_tenant *t,
                          struct iso_error *err)
{
	return pooled(c) ? ctl_tnums_tenant_create(c, &c->vnis->p, t, err) : 0;
}

void ctl_vni_tenant_create_undo(struct iso_controller *c, int64_t tenant_id)
{
	if (pooled(c))
		ctl_tnums_forget(&c->vnis->p, tenant_id);
}

int ctl_vni_tenant_delete(struct iso_controller *c, int64_t tenant_id, struct iso_error *err)
{
	return pooled(c) ? ctl_tnums_tenant_delete(c, &c->vnis->p, tenant_id, err) : 0;
}

void ctl_vni_tenant_deleted(struct iso_controller *c, int64_t tenant_id)
{
	if (pooled(c))
		ctl_tnums_forget(&c->vnis->p, tenant_id);
}

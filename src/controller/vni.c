/* vni.c: each tenant's VXLAN VNI on an Ethernet fabric (issue 14,
 * docs/fabric.md "Ethernet"). A VNI is a tenant's L2 domain on the
 * overlay, so it is handed out like a P_Key (src/controller/fabric.c): one
 * per tenant from the inventory's fabric.vni_range, taken in the same store
 * transaction that creates the tenant, freed by the one that deletes it,
 * never held by two tenants. Tenants that existed before the fabric was
 * Ethernet get theirs at start.
 *
 * Each tenant's VNI is kept as the store's meta key "vni.tenant.<id>" (the
 * empty value once freed): the store's typed tables are being reworked for
 * a second backend by another package, and a meta row rides the same
 * transaction on both. Uniqueness is checked when the keys are read back at
 * start and kept in memory by the pool below. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

#define VNI_META_FMT "vni.tenant.%lld"
#define LIST_PAGE    500

struct ctl_vni {
	int64_t tenant_id;
	uint32_t vni;
};

struct ctl_vnis {
	uint32_t min, max;
	struct ctl_vni *v; /* sorted by vni */
	int n, cap;
};

static bool ethernet(const struct iso_controller *c)
{
	return c->vnis != NULL;
}

static int find_tenant(const struct ctl_vnis *p, int64_t tenant_id)
{
	for (int i = 0; i < p->n; i++)
		if (p->v[i].tenant_id == tenant_id)
			return i;
	return -1;
}

uint32_t ctl_vni_of(const struct iso_controller *c, int64_t tenant_id)
{
	int i = ethernet(c) ? find_tenant(c->vnis, tenant_id) : -1;

	return i >= 0 ? c->vnis->v[i].vni : 0;
}

int64_t ctl_vni_owner(const struct iso_controller *c, uint32_t vni)
{
	int lo = 0, hi = ethernet(c) ? c->vnis->n - 1 : -1;

	while (lo <= hi) { /* the pool is sorted by VNI */
		int mid = lo + (hi - lo) / 2;
		if (c->vnis->v[mid].vni == vni)
			return c->vnis->v[mid].tenant_id;
		if (c->vnis->v[mid].vni < vni)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return 0;
}

int ctl_vni_count(const struct iso_controller *c)
{
	return ethernet(c) ? c->vnis->n : 0;
}

uint32_t iso_controller_tenant_vni(const struct iso_controller *c, int64_t tenant_id)
{
	return ctl_vni_of(c, tenant_id);
}

/* Inserts (tenant, vni) in vni order; -EEXIST when the VNI is held. */
static int pool_add(struct ctl_vnis *p, int64_t tenant_id, uint32_t vni)
{
	int at = 0;

	while (at < p->n && p->v[at].vni < vni)
		at++;
	if (at < p->n && p->v[at].vni == vni)
		return -EEXIST;
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 16;
		struct ctl_vni *v = realloc(p->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	memmove(&p->v[at + 1], &p->v[at], (size_t)(p->n - at) * sizeof(*p->v));
	p->v[at] = (struct ctl_vni){.tenant_id = tenant_id, .vni = vni};
	p->n++;
	return 0;
}

static void pool_remove(struct ctl_vnis *p, int64_t tenant_id)
{
	int i = find_tenant(p, tenant_id);

	if (i < 0)
		return;
	memmove(&p->v[i], &p->v[i + 1], (size_t)(p->n - i - 1) * sizeof(*p->v));
	p->n--;
}

/* The lowest free VNI of the range (the pool is sorted). */
static int pool_free_vni(const struct ctl_vnis *p, uint32_t *out, struct iso_error *err)
{
	uint32_t want = p->min;

	for (int i = 0; i < p->n && want <= p->max; i++) {
		if (p->v[i].vni > want)
			break;
		if (p->v[i].vni == want)
			want++;
	}
	if (want > p->max || want < p->min)
		return iso_error_set(err, ISO_E_NO_CAPACITY, "fabric.vni_range",
		                     "no free VNI in fabric.vni_range [%u, %u]: all %u are held by "
		                     "tenants (delete a tenant or widen the range)",
		                     p->min, p->max, p->max - p->min + 1);
	*out = want;
	return 0;
}

static int meta_put(struct iso_controller *c, int64_t tenant_id, uint32_t vni,
                    struct iso_error *err)
{
	char key[48], val[16] = "";

	snprintf(key, sizeof(key), VNI_META_FMT, (long long)tenant_id);
	if (vni)
		snprintf(val, sizeof(val), "%u", vni);
	return c->store->ops->meta_set(c->store, key, val, err);
}

/* The tenant's stored VNI: 0 when none (never given, or freed). */
static int meta_read(struct iso_controller *c, int64_t tenant_id, uint32_t *out,
                     struct iso_error *err)
{
	char key[48], val[32] = "", *end = NULL;
	struct iso_error e = {0};
	unsigned long v;
	int r;

	*out = 0;
	snprintf(key, sizeof(key), VNI_META_FMT, (long long)tenant_id);
	r = c->store->ops->meta_get(c->store, key, val, sizeof(val), &e);
	if (r < 0 && e.code == ISO_E_NOT_FOUND)
		return 0;
	if (r < 0) {
		if (err)
			*err = e;
		return r;
	}
	if (!val[0])
		return 0;
	v = strtoul(val, &end, 10);
	if (*end || v == 0 || v > ISO_VNI_MAX)
		return iso_error_set(err, ISO_E_INTERNAL, NULL,
		                     "store: meta %s is \"%s\", not a VNI", key, val);
	*out = (uint32_t)v;
	return 0;
}

/* Reads every tenant's VNI back; tenants without one get one, in one
 * transaction. */
static int load(struct iso_controller *c, struct iso_error *err)
{
	struct ctl_vnis *p = c->vnis;
	int n_missing = 0, r = 0;
	char after[ISO_NAME_MAX] = "";

	/* first the VNIs the store holds, so that the free ones are known */
	for (;;) {
		_cleanup_free_ struct iso_tenant *page = NULL;
		int n = 0;

		r = c->store->ops->tenant_list(c->store, after[0] ? after : NULL, LIST_PAGE, &page,
		                               &n, err);
		if (r < 0)
			return r;
		for (int i = 0; i < n; i++) {
			uint32_t vni = 0;
			r = meta_read(c, page[i].id, &vni, err);
			if (r < 0)
				return r;
			if (vni && (vni < p->min || vni > p->max))
				return iso_error_set(
				    err, ISO_E_INVALID, "fabric.vni_range",
				    "the store gives tenant \"%s\" VNI %u, outside "
				    "fabric.vni_range [%u, %u]: widen the range again",
				    page[i].name, vni, p->min, p->max);
			if (vni) {
				r = pool_add(p, page[i].id, vni);
				if (r == -EEXIST)
					return iso_error_set(err, ISO_E_INTERNAL,
					                     "fabric.vni_range",
					                     "store: VNI %u is held by two tenants "
					                     "(one is \"%s\")",
					                     vni, page[i].name);
				if (r < 0)
					return iso_error_set(err, ISO_E_INTERNAL, NULL,
					                     "out of memory");
				continue;
			}
			n_missing++;
		}
		if (n < LIST_PAGE)
			break;
		iso_strlcpy(after, page[n - 1].name, sizeof(after));
	}
	if (n_missing == 0)
		return 0;
	/* then one each for the tenants without one, in one transaction; a
	 * failure stops the start, so nothing in memory needs undoing */
	r = ctl_tx_begin(c, err);
	after[0] = '\0';
	while (r == 0) {
		_cleanup_free_ struct iso_tenant *page = NULL;
		int n = 0;

		r = c->store->ops->tenant_list(c->store, after[0] ? after : NULL, LIST_PAGE, &page,
		                               &n, err);
		for (int i = 0; r == 0 && i < n; i++) {
			uint32_t vni = 0;
			if (find_tenant(p, page[i].id) >= 0)
				continue;
			r = pool_free_vni(p, &vni, err);
			if (r == 0)
				r = meta_put(c, page[i].id, vni, err);
			if (r == 0 && pool_add(p, page[i].id, vni) < 0)
				r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		}
		if (r < 0 || n < LIST_PAGE)
			break;
		iso_strlcpy(after, page[n - 1].name, sizeof(after));
	}
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	iso_log(ISO_LOG_INFO, "fabric_vnis_assigned", "tenants=%d", n_missing);
	return 0;
}

int ctl_vni_open(struct iso_controller *c, struct iso_error *err)
{
	const struct iso_fabric_config *fc = &c->inv->fabric;

	if (fc->type != ISO_FABRIC_ETHERNET)
		return 0;
	if (fc->vni_min == 0 || fc->vni_min > fc->vni_max || fc->vni_max > ISO_VNI_MAX)
		return iso_error_set(err, ISO_E_INVALID, "fabric.vni_range",
		                     "fabric.vni_range [%u, %u] is not within 1-%u", fc->vni_min,
		                     fc->vni_max, ISO_VNI_MAX);
	if (!(c->vnis = calloc(1, sizeof(*c->vnis))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->vnis->min = fc->vni_min;
	c->vnis->max = fc->vni_max;
	return load(c, err);
}

void ctl_vni_close(struct iso_controller *c)
{
	if (!c->vnis)
		return;
	free(c->vnis->v);
	free(c->vnis);
	c->vnis = NULL;
}

int ctl_vni_tenant_create(struct iso_controller *c, const struct iso_tenant *t,
                          struct iso_error *err)
{
	uint32_t vni = 0;
	int r;

	if (!ethernet(c))
		return 0;
	r = pool_free_vni(c->vnis, &vni, err);
	if (r == 0)
		r = meta_put(c, t->id, vni, err);
	if (r == 0 && pool_add(c->vnis, t->id, vni) < 0)
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	return r;
}

void ctl_vni_tenant_create_undo(struct iso_controller *c, int64_t tenant_id)
{
	if (ethernet(c))
		pool_remove(c->vnis, tenant_id);
}

int ctl_vni_tenant_delete(struct iso_controller *c, int64_t tenant_id, struct iso_error *err)
{
	if (!ethernet(c) || find_tenant(c->vnis, tenant_id) < 0)
		return 0;
	return meta_put(c, tenant_id, 0, err);
}

void ctl_vni_tenant_deleted(struct iso_controller *c, int64_t tenant_id)
{
	if (ethernet(c))
		pool_remove(c->vnis, tenant_id);
}

/* internal.h: helpers shared by the files of src/tenancy: saturating
 * arithmetic on limits that may be unlimited, and the tree walk. */
#ifndef ISOSTACK_TENANCY_INTERNAL_H
#define ISOSTACK_TENANCY_INTERNAL_H

#include "isostack/tenancy.h"

static inline int64_t tn_add_sat(int64_t a, int64_t b)
{
	if (a == ISO_QUOTA_NONE || b == ISO_QUOTA_NONE || a > INT64_MAX - b)
		return ISO_QUOTA_NONE;
	return a + b;
}

static inline int64_t tn_max0(int64_t a)
{
	return a > 0 ? a : 0;
}

static inline int64_t tn_min(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Index of the tenant-level ancestor of `acct` (itself when a tenant), or
 * the nearest account below the root when there is no tenant level. */
int tn_tenant_of(const struct iso_tenancy *t, int acct);

#endif

/* isolation.c: isolation classes and fault-domain spreading, turned into
 * the placement engine's constraints. The checks themselves live in the
 * engine's node and GPU checks (src/sched/constraints.c, index.c), so an
 * exclusive request is placed where it may go rather than filtered after
 * the fact; this file only names the classes and picks the stricter of a
 * tenant's and a request's. */
#include <errno.h>
#include <string.h>

#include "isostack/tenancy.h"

static const char *const isolation_names[] = {"shared", "exclusive-gpu", "exclusive-node",
                                              "exclusive-rack"};
static const char *const spread_names[] = {"none", "gpu", "node", "rack"};

const char *iso_isolation_name(enum iso_isolation i)
{
	return (unsigned)i < ISO_ARRAY_SIZE(isolation_names) ? isolation_names[i] : "?";
}

int iso_isolation_parse(const char *s, enum iso_isolation *out)
{
	for (size_t i = 0; s && i < ISO_ARRAY_SIZE(isolation_names); i++)
		if (strcmp(s, isolation_names[i]) == 0) {
			*out = (enum iso_isolation)i;
			return 0;
		}
	return -EINVAL;
}

const char *iso_spread_name(enum iso_spread s)
{
	return (unsigned)s < ISO_ARRAY_SIZE(spread_names) ? spread_names[s] : "?";
}

int iso_spread_parse(const char *s, enum iso_spread *out)
{
	for (size_t i = 0; s && i < ISO_ARRAY_SIZE(spread_names); i++)
		if (strcmp(s, spread_names[i]) == 0) {
			*out = (enum iso_spread)i;
			return 0;
		}
	return -EINVAL;
}

void iso_isolation_constraints(enum iso_isolation tenant_class, enum iso_isolation request_class,
                               enum iso_spread spread, struct iso_place_constraints *c)
{
	c->exclusive = (int)(tenant_class > request_class ? tenant_class : request_class);
	c->spread = (int)spread;
}

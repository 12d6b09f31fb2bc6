/* tenant_map_shim.h: SHIM, to be dropped when branch h-agent's tenant-map
 * parser lands: the declarations `isoctl slurm` calls, written against
 * issue 15's interface (iso_tenant_map_load / iso_tenant_map_lookup; one
 * `account tenant` pair a line, `#` comments, a bad line is an error naming
 * FILE:LINE). Dropping it: delete this file and tenant_map_shim.c, their
 * line in src/isoctl/meson.build, and include the real header in
 * cmd_slurm.c. */
#ifndef ISOCTL_TENANT_MAP_SHIM_H
#define ISOCTL_TENANT_MAP_SHIM_H

#include "isostack/util.h"

struct iso_tenant_map;

/* Reads FILE; 0 with *out set, or a negative errno with *err naming
 * FILE:LINE. */
int iso_tenant_map_load(const char *path, struct iso_tenant_map **out, struct iso_error *err);
/* The tenant `account` maps to; NULL when the file does not name it. */
const char *iso_tenant_map_lookup(const struct iso_tenant_map *m, const char *account);
void iso_tenant_map_free(struct iso_tenant_map *m);

#endif

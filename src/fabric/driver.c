/* driver.c: picks the fabric driver the inventory names. The only place that
 * knows which drivers exist and which fabric each one can program, so that a
 * mismatch (an OpenSM driver on an Omni-Path fabric) is refused at start with
 * the field to fix, rather than discovered as a fabric nobody programs. */
#include <string.h>

#include "isostack/fabric.h"

struct driver_kind {
	const char *name;
	/* the fabric types it programs, as a bit per enum iso_fabric_type */
	unsigned types;
	int (*open)(const struct iso_inventory *inv, struct iso_fabric_driver **out,
	            struct iso_error *err);
};

#define T(x) (1u << (x))

static const struct driver_kind kinds[] = {
    {"sim",
     T(ISO_FABRIC_INFINIBAND) | T(ISO_FABRIC_OMNIPATH) | T(ISO_FABRIC_ETHERNET) |
         T(ISO_FABRIC_SLINGSHOT),
     iso_fabric_sim_driver_new},
    {"opensm", T(ISO_FABRIC_INFINIBAND), iso_fabric_opensm_driver_new},
    {"opafm", T(ISO_FABRIC_OMNIPATH), iso_fabric_opafm_driver_new},
};

int iso_fabric_driver_open(const struct iso_inventory *inv, const char *state_dir,
                           struct iso_fabric_driver **out, struct iso_error *err)
{
	const char *name = inv->fabric.driver[0] ? inv->fabric.driver : "sim";
	enum iso_fabric_type type = inv->fabric.type;

	(void)state_dir; /* no driver keeps files of its own yet */
	for (size_t i = 0; i < ISO_ARRAY_SIZE(kinds); i++) {
		if (strcmp(kinds[i].name, name) != 0)
			continue;
		if (!(kinds[i].types & T(type)))
			return iso_error_set(err, ISO_E_INVALID, "fabric.driver",
			                     "fabric.driver '%s' cannot program an %s fabric (%s)",
			                     name, iso_fabric_type_name(type),
			                     type == ISO_FABRIC_INFINIBAND ? "use opensm or sim"
			                     : type == ISO_FABRIC_OMNIPATH ? "use opafm or sim"
			                                                   : "only sim for now");
		return kinds[i].open(inv, out, err);
	}
	return iso_error_set(err, ISO_E_INVALID, "fabric.driver",
	                     "unknown fabric.driver '%s' (expected sim, opensm or opafm)", name);
}

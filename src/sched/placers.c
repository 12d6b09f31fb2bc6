/* placers.c: the registry of placement policies the daemon can be started
 * with. One line per policy; each policy lives in its own file. The first
 * entry is the recommended default (isostack). */
#include <string.h>

#include "isostack/sched.h"

static const struct iso_placer *const placers[] = {
    &iso_placer_isostack,
    &iso_placer_first_fit,
    &iso_placer_best_fit,
    &iso_placer_fgd,
    &iso_placer_slurm_count,
};

const struct iso_placer *iso_placer_find(const char *name)
{
	if (!name)
		return NULL;
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(placers); i++)
		if (strcmp(placers[i]->name, name) == 0)
			return placers[i];
	return NULL;
}

/* Kept in the table's order; test_placement checks it against the table. */
const char *iso_placer_names(void)
{
	return "isostack, first-fit, best-fit, fgd, slurm-count";
}

/* placers.c: the registry of placement policies the daemon can be started
 * with. One line per policy; each policy lives in its own file. */
#include <string.h>

#include "isostack/sched.h"

static const struct iso_placer *const placers[] = {
	&iso_placer_first_fit,
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

const char *iso_placer_names(void)
{
	return "first-fit";
}

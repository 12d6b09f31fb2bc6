/* parts_same.h: the round-trip check that the partitions.conf and the
 * intent harnesses share: a rendering parsed back holds the same partitions. */
#ifndef ISOSTACK_TESTS_FUZZ_PARTS_SAME_H
#define ISOSTACK_TESTS_FUZZ_PARTS_SAME_H

#include <string.h>

#include "fuzz.h"
#include "isostack/fabric.h"

static inline void same_parts(const struct iso_fabric_intent *a, const struct iso_fabric_intent *b)
{
	FUZZ_ASSERT(a->n_parts == b->n_parts, "%d partitions became %d", a->n_parts, b->n_parts);
	for (int i = 0; i < a->n_parts; i++) {
		const struct iso_partition *x = &a->parts[i], *y = &b->parts[i];

		FUZZ_ASSERT(strcmp(x->name, y->name) == 0, "partition %d '%s' became '%s'", i,
		            x->name, y->name);
		FUZZ_ASSERT(x->pkey == y->pkey && x->ipoib == y->ipoib && x->indx0 == y->indx0,
		            "partition '%s': key or flags changed", x->name);
		FUZZ_ASSERT(x->n_members == y->n_members, "partition '%s': %d members became %d",
		            x->name, x->n_members, y->n_members);
		for (int m = 0; m < x->n_members; m++)
			FUZZ_ASSERT(x->members[m].guid == y->members[m].guid &&
			                x->members[m].membership == y->members[m].membership,
			            "partition '%s': member %d changed", x->name, m);
	}
}

#endif

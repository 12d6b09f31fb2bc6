/* store.c: the part of the store contract that belongs to no backend: freeing
 * what the list functions hand out. Every backend (SQLite now, PostgreSQL
 * later) returns allocations in this shape. */
#include "isostack/store.h"

void iso_allocations_free(struct iso_allocation *a, int n)
{
	if (!a)
		return;
	for (int i = 0; i < n; i++)
		iso_allocation_clear(&a[i]);
	free(a);
}

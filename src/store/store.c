/* store.c: the part of the store contract that belongs to no backend: picking
 * the backend from isostackd's --store (the embedded SQLite file in the state
 * directory, or a PostgreSQL conninfo), and freeing what the list functions
 * hand out, which every backend returns in the same shape. */
#include <errno.h>
#include <string.h>

#include "isostack/store.h"

void iso_allocations_free(struct iso_allocation *a, int n)
{
	if (!a)
		return;
	for (int i = 0; i < n; i++)
		iso_allocation_clear(&a[i]);
	free(a);
}

bool iso_store_spec_is_postgres(const char *spec)
{
	return spec && (strncmp(spec, "postgres://", 11) == 0 ||
	                strncmp(spec, "postgresql://", 13) == 0 || strchr(spec, '=') != NULL);
}

int iso_store_open(const char *spec, const char *state_dir, struct iso_store **out,
                   struct iso_error *err)
{
	struct iso_error e = {0};
	char path[4096];
	int r;

	*out = NULL;
	if (!spec || strcmp(spec, "sqlite") == 0) {
		if (snprintf(path, sizeof(path), "%s/state.db", state_dir) >= (int)sizeof(path))
			return iso_error_set(err, ISO_E_INVALID, "state-dir",
			                     "state directory path "
			                     "is too long");
		return iso_store_open_sqlite(path, out, err);
	}
	if (!iso_store_spec_is_postgres(spec))
		return iso_error_set(err, ISO_E_INVALID, "store",
		                     "--store: expected \"sqlite\", \"postgres://...\" or a libpq "
		                     "conninfo (\"host=... dbname=...\")");
	/* The conninfo may hold a password: it is never echoed. */
	r = iso_store_open_postgres(spec, out, &e);
	if (r < 0)
		return iso_error_set(err, e.code, "store", "--store postgres: %s", e.message);
	return 0;
}

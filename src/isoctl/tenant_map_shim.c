/* tenant_map_shim.c: SHIM, to be dropped when branch h-agent's tenant-map
 * parser lands (see tenant_map_shim.h). A minimal reading of the issue 15
 * format so that `isoctl slurm --tenant-map` works and is tested now. */
#include <errno.h>
#include <string.h>

#include "isoctl/tenant_map_shim.h"

struct iso_tenant_map {
	size_t n;
	char **account, **tenant;
};

void iso_tenant_map_free(struct iso_tenant_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->account[i]);
		free(m->tenant[i]);
	}
	free(m->account);
	free(m->tenant);
	free(m);
}

static int add(struct iso_tenant_map *m, const char *a, const char *t)
{
	char **pa = realloc(m->account, (m->n + 1) * sizeof(*pa));
	char **pt;

	if (!pa)
		return -ENOMEM;
	m->account = pa;
	pt = realloc(m->tenant, (m->n + 1) * sizeof(*pt));
	if (!pt)
		return -ENOMEM;
	m->tenant = pt;
	m->account[m->n] = strdup(a);
	m->tenant[m->n] = strdup(t);
	m->n++;
	return m->account[m->n - 1] && m->tenant[m->n - 1] ? 0 : -ENOMEM;
}

int iso_tenant_map_load(const char *path, struct iso_tenant_map **out, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	_cleanup_free_ char *line = NULL;
	struct iso_tenant_map *m;
	size_t cap = 0;
	unsigned lineno = 0;

	*out = NULL;
	if (!f)
		return iso_error_set(err, ISO_E_INVALID, "tenant_map", "%s: %s", path,
		                     strerror(errno));
	m = calloc(1, sizeof(*m));
	if (!m)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	while (getline(&line, &cap, f) >= 0) {
		char a[128], t[128], extra[2];
		char *hash = strchr(line, '#');
		int n;

		lineno++;
		if (hash)
			*hash = '\0';
		n = sscanf(line, "%127s %127s %1s", a, t, extra);
		if (n == EOF || n == 0)
			continue;
		if (n != 2 || !iso_name_valid(t) || iso_tenant_map_lookup(m, a)) {
			iso_tenant_map_free(m);
			return iso_error_set(
			    err, ISO_E_INVALID, "tenant_map",
			    "%s:%u: expected 'ACCOUNT TENANT' (a tenant name, each "
			    "account once)",
			    path, lineno);
		}
		if (add(m, a, t) < 0) {
			iso_tenant_map_free(m);
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		}
	}
	*out = m;
	return 0;
}

const char *iso_tenant_map_lookup(const struct iso_tenant_map *m, const char *account)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (strcmp(m->account[i], account) == 0)
			return m->tenant[i];
	return NULL;
}

/* tenant_map.c: which isostack tenant a Slurm account is (issue 15,
 * docs/slurm.md). Why a file of its own: the SPANK plugin (inside
 * slurmstepd) and `isoctl slurm prolog` (PrologSlurmctld) must map a job's
 * account to the same tenant, or the plugin would look for a member under
 * another tenant than the prolog made it for; one parser, used by both,
 * keeps them in step. Strict: a bad line is refused naming FILE:LINE, not
 * skipped, since a skipped line silently puts a job under the wrong
 * tenant (and the plugin then fails it). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "isostack/client.h"

static bool account_valid(const char *s, size_t n)
{
	if (n < 1 || n >= ISO_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

void iso_tenant_map_clear(struct iso_tenant_map *map)
{
	if (!map)
		return;
	free(map->entries);
	map->entries = NULL;
	map->n = 0;
}

/* The next whitespace-separated word of [*p, end) (a '#' ends the line's
 * words); NULL at the end. */
static const char *word(const char **p, const char *end, size_t *n)
{
	const char *s = *p, *w;

	while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
		s++;
	if (s == end || *s == '#') {
		*p = end;
		return NULL;
	}
	w = s;
	while (s < end && *s != ' ' && *s != '\t' && *s != '\r' && *s != '#')
		s++;
	*n = (size_t)(s - w);
	*p = s;
	return w;
}

int iso_tenant_map_parse(const char *text, size_t len, const char *name, struct iso_tenant_map *out,
                         struct iso_error *err)
{
	const char *p = text, *end = text + len;
	size_t cap = 0;
	unsigned line = 0;

	memset(out, 0, sizeof(*out));
	if (len > ISO_TENANT_MAP_MAX_BYTES)
		return iso_error_set(err, ISO_E_INVALID, "tenant_map", "%s: over %d bytes", name,
		                     ISO_TENANT_MAP_MAX_BYTES);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *a, *t, *x;
		size_t an = 0, tn = 0, xn = 0;
		struct iso_tenant_map_entry *e;

		if (!eol)
			eol = end;
		line++;
		if (memchr(p, '\0', (size_t)(eol - p))) {
			iso_tenant_map_clear(out);
			return iso_error_set(err, ISO_E_INVALID, "tenant_map", "%s:%u: a NUL byte",
			                     name, line);
		}
		a = word(&p, eol, &an);
		t = a ? word(&p, eol, &tn) : NULL;
		x = t ? word(&p, eol, &xn) : NULL;
		p = eol + 1;
		if (!a)
			continue; /* blank or a comment */
		if (!t || x) {
			iso_tenant_map_clear(out);
			return iso_error_set(err, ISO_E_INVALID, "tenant_map",
			                     "%s:%u: expected `ACCOUNT TENANT`", name, line);
		}
		if (!account_valid(a, an)) {
			iso_tenant_map_clear(out);
			return iso_error_set(err, ISO_E_INVALID, "tenant_map",
			                     "%s:%u: \"%.*s\" is not a Slurm account (1-63 "
			                     "characters of [A-Za-z0-9._-])",
			                     name, line, (int)(an > 64 ? 64 : an), a);
		}
		if (out->n == cap) {
			struct iso_tenant_map_entry *ne;
			if (out->n >= ISO_TENANT_MAP_MAX_LINES) {
				iso_tenant_map_clear(out);
				return iso_error_set(err, ISO_E_INVALID, "tenant_map",
				                     "%s:%u: over %d accounts", name, line,
				                     ISO_TENANT_MAP_MAX_LINES);
			}
			cap = cap ? cap * 2 : 16;
			if (!(ne = realloc(out->entries, cap * sizeof(*ne)))) {
				iso_tenant_map_clear(out);
				return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
			}
			out->entries = ne;
		}
		e = &out->entries[out->n];
		memset(e, 0, sizeof(*e));
		for (size_t i = 0; i < an; i++)
			e->account[i] = (char)tolower((unsigned char)a[i]);
		if (tn >= sizeof(e->tenant) ||
		    (memcpy(e->tenant, t, tn), e->tenant[tn] = '\0', !iso_name_valid(e->tenant))) {
			iso_tenant_map_clear(out);
			return iso_error_set(err, ISO_E_INVALID, "tenant_map",
			                     "%s:%u: \"%.*s\" is not a tenant name", name, line,
			                     (int)(tn > 64 ? 64 : tn), t);
		}
		for (size_t i = 0; i < out->n; i++)
			if (strcmp(out->entries[i].account, e->account) == 0) {
				unsigned first = out->entries[i].line;
				iso_tenant_map_clear(out);
				return iso_error_set(
				    err, ISO_E_INVALID, "tenant_map",
				    "%s:%u: account \"%.*s\" listed again (first at "
				    "line %u)",
				    name, line, (int)an, a, first);
			}
		e->line = line;
		out->n++;
	}
	return 0;
}

int iso_tenant_map_load(const char *path, struct iso_tenant_map *out, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ char *buf = NULL;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!path || !*path)
		return iso_error_set(err, ISO_E_INVALID, "tenant_map", "no tenant map file given");
	if (!(f = fopen(path, "re")))
		return iso_error_set(err, ISO_E_INVALID, "tenant_map", "%s: %s", path,
		                     strerror(errno));
	if (!(buf = malloc(ISO_TENANT_MAP_MAX_BYTES + 1)))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	n = fread(buf, 1, ISO_TENANT_MAP_MAX_BYTES + 1, f);
	if (ferror(f))
		return iso_error_set(err, ISO_E_INVALID, "tenant_map", "%s: read error", path);
	return iso_tenant_map_parse(buf, n, path, out, err);
}

const char *iso_tenant_map_lookup(const struct iso_tenant_map *map, const char *account)
{
	for (size_t i = 0; map && account && i < map->n; i++)
		if (strcasecmp(map->entries[i].account, account) == 0)
			return map->entries[i].tenant;
	return NULL;
}

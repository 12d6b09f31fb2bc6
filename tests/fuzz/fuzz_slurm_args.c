/* fuzz_slurm_args.c: what the SPANK plugin reads from the site (issue 15,
 * docs/slurm.md): its plugstack.conf arguments (src/slurm/logic.c,
 * iso_slurm_args_parse) and the account -> tenant map it shares with
 * isoctl (src/client/tenant_map.c, iso_tenant_map_parse). Byte 0 even: the
 * rest, split at NUL bytes, is the argument vector; odd: the rest is a map
 * file. Properties: a refusal says why; accepted arguments have an absolute
 * agent_state_dir and wait 0..3600; an accepted map has valid, distinct,
 * lower-cased accounts and tenant names, each found by lookup (in upper
 * case too), and written back one `account tenant` a line it parses to the
 * same map. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/slurm/logic.h"
#include "fuzz.h"

static void args(const char *data, size_t size)
{
	char *copy = malloc(size + 1), *av[32];
	struct iso_slurm_args a;
	struct iso_error err = {0};
	int ac = 0, r;

	FUZZ_ASSERT(copy != NULL, "oom");
	memcpy(copy, data, size);
	copy[size] = '\0';
	for (size_t i = 0; i <= size && ac < 32;) {
		av[ac++] = copy + i;
		i += strlen(copy + i) + 1;
	}
	r = iso_slurm_args_parse(ac, av, &a, &err);
	fuzz_check_refusal(r, &err, "iso_slurm_args_parse");
	if (r == 0)
		FUZZ_ASSERT(a.agent_state_dir[0] == '/' && a.wait_s <= ISO_SLURM_WAIT_MAX &&
		                (!a.tenant_map[0] || a.tenant_map[0] == '/'),
		            "dir %s wait %u", a.agent_state_dir, a.wait_s);
	free(copy);
}

static void map(const char *data, size_t size)
{
	struct iso_tenant_map m, again;
	struct iso_error err = {0};
	char *text;
	size_t len = 0;
	int r = iso_tenant_map_parse(data, size, "map", &m, &err);

	fuzz_check_refusal(r, &err, "iso_tenant_map_parse");
	if (r < 0) {
		FUZZ_ASSERT(m.n == 0 && !m.entries, "a refused map keeps entries");
		FUZZ_ASSERT(strncmp(err.message, "map:", 4) == 0, "no FILE:LINE: %s", err.message);
		return;
	}
	text = malloc(m.n * 2 * ISO_NAME_MAX + 1);
	FUZZ_ASSERT(text != NULL, "oom");
	for (size_t i = 0; i < m.n; i++) {
		char upper[ISO_NAME_MAX];
		const struct iso_tenant_map_entry *e = &m.entries[i];
		for (size_t k = 0; k <= strlen(e->account); k++)
			upper[k] = (char)toupper((unsigned char)e->account[k]);
		FUZZ_ASSERT(e->account[0] && iso_name_valid(e->tenant), "entry %zu", i);
		for (const char *p = e->account; *p; p++)
			FUZZ_ASSERT(!isupper((unsigned char)*p), "account %s", e->account);
		FUZZ_ASSERT(strcmp(iso_tenant_map_lookup(&m, e->account), e->tenant) == 0 &&
		                strcmp(iso_tenant_map_lookup(&m, upper), e->tenant) == 0,
		            "lookup %s", e->account);
		len += (size_t)sprintf(text + len, "%s %s\n", e->account, e->tenant);
	}
	r = iso_tenant_map_parse(text, len, "again", &again, &err);
	FUZZ_ASSERT(r == 0 && again.n == m.n, "written back: %s", err.message);
	for (size_t i = 0; i < m.n; i++)
		FUZZ_ASSERT(strcmp(again.entries[i].account, m.entries[i].account) == 0 &&
		                strcmp(again.entries[i].tenant, m.entries[i].tenant) == 0,
		            "entry %zu differs", i);
	iso_tenant_map_clear(&again);
	iso_tenant_map_clear(&m);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] % 2 == 0)
		args((const char *)data + 1, size - 1);
	else
		map((const char *)data + 1, size - 1);
	return 0;
}

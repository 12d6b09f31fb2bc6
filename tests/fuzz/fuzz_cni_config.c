/* fuzz_cni_config.c: what the CNI plugin reads from a runtime (issue 17,
 * docs/cni.md): the network config on stdin (src/cni/logic.c,
 * cni_config_parse) and CNI_ARGS (cni_args_parse). Byte 0 even: the rest is
 * a config; odd: the rest, up to a NUL, is CNI_ARGS. Properties: a refusal
 * says why and carries a CNI code; an accepted config has an absolute agent
 * socket under 108 bytes, a supported cniVersion, at least one namespace
 * whose tenant is a tenant name and found by lookup, and a member that asks
 * for something; accepted args have a valid (or no) namespace. */
#include <stdlib.h>
#include <string.h>

#include "../../src/cni/logic.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iso_error err = {0};

	if (size < 1)
		return 0;
	if ((data[0] & 1) == 0) {
		struct cni_config *cfg = malloc(sizeof(*cfg));
		json_t *doc = NULL;
		int code = 0;
		FUZZ_ASSERT(cfg != NULL, "oom");
		int r = cni_config_parse((const char *)data + 1, size - 1, cfg, &doc, &code, &err);
		fuzz_check_refusal(r, &err, "cni_config_parse");
		if (r < 0)
			FUZZ_ASSERT(code >= 1 && code <= 7, "code %d", code);
		if (r == 0) {
			FUZZ_ASSERT(cfg->agent_socket[0] == '/' && strlen(cfg->agent_socket) < 108,
			            "socket %s", cfg->agent_socket);
			FUZZ_ASSERT(cni_version_supported(cfg->cni_version), "version %s",
			            cfg->cni_version);
			FUZZ_ASSERT(cfg->n_tenants >= 1, "no tenants");
			FUZZ_ASSERT(cfg->cpus || cfg->memory_mib, "asks for nothing");
			for (size_t i = 0; i < cfg->n_tenants; i++) {
				const char *t = NULL;
				FUZZ_ASSERT(iso_name_valid(cfg->tenants[i].tenant), "tenant %s",
				            cfg->tenants[i].tenant);
				FUZZ_ASSERT(cni_tenant_of(cfg, cfg->tenants[i].ns, &t) == 0 && t,
				            "lookup %s", cfg->tenants[i].ns);
			}
		}
		json_decref(doc);
		free(cfg);
		return 0;
	}
	char *text = malloc(size);
	struct cni_args a;
	FUZZ_ASSERT(text != NULL, "oom");
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	int r = cni_args_parse(text, &a, &err);
	fuzz_check_refusal(r, &err, "cni_args_parse");
	if (r == 0)
		FUZZ_ASSERT(!a.pod_namespace[0] || strlen(a.pod_namespace) < CNI_NS_MAX, "ns %s",
		            a.pod_namespace);
	free(text);
	return 0;
}

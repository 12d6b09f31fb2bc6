/* fuzz_discover.c: ibnetdiscover output as `isoctl fabric discover` reads it
 * (iso_fabric_discover_parse), and the inventory YAML it writes from what it
 * accepted. The YAML is meant to be merged into cluster.yaml, so it must be
 * YAML that libfyaml reads back. */
#include <string.h>

#include "fuzz.h"
#include "isostack/fabric.h"
#include "isostack/inventory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_(iso_discovered_freep) struct iso_discovered *d = NULL;
	_cleanup_free_ char *yaml = NULL;
	struct iso_error err = {0};
	int r = iso_fabric_discover_parse("fuzz.net", (const char *)data, size, &d, &err);

	fuzz_check_refusal(r, &err, "iso_fabric_discover_parse");
	if (r < 0)
		return 0;
	FUZZ_ASSERT(d && d->n_cas > 0, "accepted with no CA");
	r = iso_fabric_discover_yaml(d, &yaml, &err);
	fuzz_check_refusal(r, &err, "iso_fabric_discover_yaml");
	return 0;
}

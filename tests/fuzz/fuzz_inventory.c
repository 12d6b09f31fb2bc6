/* fuzz_inventory.c: cluster.yaml as the daemon reads it at every start:
 * libfyaml (0.7.12 in Debian, which has had fuzzer-found overflows) and then
 * our schema walk over its document. A refusal must name what is wrong; an
 * accepted inventory must have a node index that finds every node by name. */
#include <string.h>

#include "fuzz.h"
#include "isostack/inventory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_(iso_inventory_freep) struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	int r = iso_inventory_load_string("fuzz.yaml", (const char *)data, size, &inv, &err);

	fuzz_check_refusal(r, &err, "iso_inventory_load_string");
	if (r < 0) {
		FUZZ_ASSERT(!inv, "a refused inventory was handed out");
		return 0;
	}
	FUZZ_ASSERT(inv, "accepted without an inventory");
	for (int i = 0; i < inv->n_nodes; i++)
		FUZZ_ASSERT(iso_inventory_find_node(inv, inv->nodes[i].name) == &inv->nodes[i],
		            "node %d '%s' is not found by name", i, inv->nodes[i].name);
	return 0;
}

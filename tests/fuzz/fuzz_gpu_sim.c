/* fuzz_gpu_sim.c: the sim GPU driver's state file (<state_dir>/gpu-sim.json)
 * as its open reads it after a restart: jansson, then our walk that replays
 * every instance through src/mig's rules. A refusal must name what is wrong;
 * an accepted state must list, on every GPU, instances inside their
 * profile's placements that do not overlap, with distinct GPU instance ids
 * and MIG UUIDs. The input goes to a file in a directory made once. */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "isostack/gpu.h"

static char dir[] = "/tmp/fuzz_gpu_sim.XXXXXX";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool made;
	char path[sizeof(dir) + 32];
	struct iso_gpu_open_args args = {.state_dir = dir};
	struct iso_gpu *g = NULL;
	struct iso_gpu_info *gpus = NULL;
	struct iso_error err = {0};
	size_t n_gpus = 0;
	FILE *f;
	int r;

	if (!made && !mkdtemp(dir))
		abort();
	made = true;
	snprintf(path, sizeof(path), "%s/gpu-sim.json", dir);
	f = fopen(path, "we");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	r = iso_gpu_sim_ops.open(&args, &g, &err);
	fuzz_check_refusal(r, &err, "iso_gpu_sim_ops.open");
	unlink(path);
	if (r < 0) {
		FUZZ_ASSERT(!g, "a refused state was handed out");
		return 0;
	}
	FUZZ_ASSERT(g->ops->list_gpus(g, &gpus, &n_gpus, NULL) == 0, "list_gpus failed");
	for (size_t i = 0; i < n_gpus; i++) {
		struct iso_gpu_instance *v = NULL;
		size_t n = 0;
		uint8_t used = 0;

		FUZZ_ASSERT(gpus[i].model, "GPU %zu has no model", i);
		FUZZ_ASSERT(g->ops->list_instances(g, (unsigned)i, &v, &n, NULL) == 0,
		            "list_instances failed");
		for (size_t k = 0; k < n; k++) {
			const struct iso_mig_profile *p =
			    iso_mig_profile_find(gpus[i].model, v[k].profile);
			uint8_t span;

			FUZZ_ASSERT(p && ((p->starts >> v[k].start) & 1u),
			            "GPU %zu: %s at %d is no placement", i, v[k].profile,
			            v[k].start);
			span = iso_mig_span(v[k].start, p->width);
			FUZZ_ASSERT(!(used & span), "GPU %zu: %s at %d overlaps", i, v[k].profile,
			            v[k].start);
			used |= span;
			for (size_t j = 0; j < k; j++)
				FUZZ_ASSERT(
				    v[j].gi_id != v[k].gi_id && strcmp(v[j].uuid, v[k].uuid),
				    "GPU %zu: instances %zu and %zu share an id or UUID", i, j, k);
		}
		free(v);
	}
	free(gpus);
	g->ops->close(g);
	return 0;
}

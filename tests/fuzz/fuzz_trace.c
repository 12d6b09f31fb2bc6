/* fuzz_trace.c: the Alibaba openb trace CSVs that `isoctl sim` and bench/
 * read: the node list (iso_sim_nodes_parse) and the pod list
 * (iso_sim_trace_parse). Both readers get every input; each file starts with
 * its header, so an input is meaningful to at most one of them. */
#include "fuzz.h"
#include "isostack/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iso_sim_nodes nodes;
	struct iso_sim_trace trace;
	struct iso_error err = {0};
	int r;

	r = iso_sim_nodes_parse("nodes.csv", (const char *)data, size, &nodes, &err);
	fuzz_check_refusal(r, &err, "iso_sim_nodes_parse");
	if (r == 0)
		iso_sim_nodes_clear(&nodes);
	err = (struct iso_error){0};
	r = iso_sim_trace_parse("pods.csv", (const char *)data, size, &trace, &err);
	fuzz_check_refusal(r, &err, "iso_sim_trace_parse");
	if (r == 0) {
		FUZZ_ASSERT(trace.n > 0 || trace.v == NULL, "empty trace with rows allocated");
		for (int i = 0; i < trace.n; i++)
			FUZZ_ASSERT(!trace.has_times || trace.v[i].deletion >= trace.v[i].creation,
			            "pod %d deleted before it was created", i);
		iso_sim_trace_clear(&trace);
	}
	return 0;
}

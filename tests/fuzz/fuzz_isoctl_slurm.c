/* fuzz_isoctl_slurm.c: the parsers of `isoctl slurm` (src/isoctl/slurm_parse.c)
 * over what Slurm hands the prolog and the reaper. The first byte picks one:
 *   0 a job id (SLURM_JOB_ID), 1 SLURM_JOB_CPUS_PER_NODE, 2 a host list
 *   (SLURM_JOB_NODELIST), 3 `scontrol show hostnames` output, 4 a line of
 *   `scontrol -o -d show job 42` for the job named "train job", 5 `squeue
 *   --json` output, 6 a job key (iso_slurm_job_key_parse, as the reaper reads
 *   the allocations' keys); the rest is the input.
 * Properties: a refusal says why; accepted node names are valid and
 * distinct and within the limit, CPU counts positive, job fields in range,
 * squeue's ids sorted and non-zero, a parsed job key written back the same. */
#include <string.h>

#include "fuzz.h"
#include "isoctl/slurm.h"
#include "isostack/client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iso_error err = {0};
	char *s;
	int r;

	if (size < 1)
		return 0;
	s = malloc(size); /* the input, NUL-terminated, for the env parsers */
	if (!s)
		abort();
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 7) {
	case 0: {
		uint32_t id = 0;

		r = isoctl_slurm_parse_job_id("SLURM_JOB_ID", s, &id, &err);
		FUZZ_ASSERT(r < 0 || id > 0, "job id 0 accepted");
		break;
	}
	case 1: {
		long max = 0;
		size_t nodes = 0;

		r = isoctl_slurm_parse_cpus_per_node("SLURM_JOB_CPUS_PER_NODE", s, &max, &nodes,
		                                     &err);
		FUZZ_ASSERT(r < 0 || (max > 0 && nodes >= 1 && nodes <= ISOCTL_SLURM_MAX_NODES),
		            "max %ld nodes %zu", max, nodes);
		break;
	}
	case 2:
		r = isoctl_slurm_check_nodelist("SLURM_JOB_NODELIST", s, &err);
		FUZZ_ASSERT(r < 0 || (s[0] && !strpbrk(s, " ;|&$`'\"\\\n")), "accepted '%s'", s);
		break;
	case 3: {
		char **names = NULL;
		size_t n = 0;

		r = isoctl_slurm_parse_hostnames((const char *)data + 1, size - 1, &names, &n,
		                                 &err);
		FUZZ_ASSERT(r < 0 || (n >= 1 && n <= ISOCTL_SLURM_MAX_NODES), "n %zu", n);
		for (size_t i = 0; r == 0 && i < n; i++) {
			FUZZ_ASSERT(iso_name_valid(names[i]), "name '%s'", names[i]);
			for (size_t j = 0; j < i; j++)
				FUZZ_ASSERT(strcmp(names[i], names[j]) != 0, "twice '%s'",
				            names[i]);
		}
		free(names);
		break;
	}
	case 4: {
		struct isoctl_slurm_job job;

		r = isoctl_slurm_parse_job((const char *)data + 1, size - 1, 42, "train job", &job,
		                           &err);
		FUZZ_ASSERT(r < 0 ||
		                (job.num_nodes >= 1 && job.num_nodes <= ISOCTL_SLURM_MAX_NODES &&
		                 job.num_cpus >= 0 && job.mem_mib >= -1),
		            "nodes %ld cpus %ld mem %ld", job.num_nodes, job.num_cpus, job.mem_mib);
		break;
	}
	case 6: {
		uint32_t job = 0, restart = 0;
		char again[ISO_IDEM_KEY_MAX];

		r = 0;
		if (iso_slurm_job_key_parse(s, "isotest", &job, &restart)) {
			FUZZ_ASSERT(job > 0, "job 0 in '%s'", s);
			FUZZ_ASSERT(iso_slurm_job_key(again, sizeof(again), "isotest", job, restart,
			                              &err) == 0 &&
			                strcmp(again, s) == 0,
			            "'%s' parsed, written back as '%s'", s, again);
		}
		break;
	}
	case 5: {
		uint32_t *ids = NULL;
		size_t n = 0;

		r = isoctl_slurm_parse_squeue((const char *)data + 1, size - 1, &ids, &n, &err);
		for (size_t i = 0; r == 0 && i < n; i++)
			FUZZ_ASSERT(ids[i] > 0 && (i == 0 || ids[i - 1] <= ids[i]), "ids[%zu]", i);
		free(ids);
		break;
	}
	}
	fuzz_check_refusal(r, &err, "isoctl slurm parser");
	free(s);
	return 0;
}

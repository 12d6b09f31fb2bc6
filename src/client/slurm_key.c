/* slurm_key.c: the Idempotency-Key of a Slurm job's allocation, written by
 * `isoctl slurm prolog`, looked up by the SPANK plugin on every node and
 * parsed back by `isoctl slurm reap`; one place, so the three never drift.
 *
 * "slurm:CLUSTER:JOBID:RESTART". Why each part: a job id is unique only
 * within one slurmctld, so two clusters on one isostack would otherwise
 * share keys and one's reaper would release the other's jobs; and a
 * requeued job keeps its id, so without the restart count its second run
 * would get the first run's (released) allocation back. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/client.h"

bool iso_slurm_cluster_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 1 || n > ISO_SLURM_CLUSTER_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

int iso_slurm_job_key(char *buf, size_t size, const char *cluster, uint32_t job, uint32_t restart,
                      struct iso_error *err)
{
	if (!iso_slurm_cluster_valid(cluster))
		return iso_error_set(err, ISO_E_INVALID, "SLURM_CLUSTER_NAME",
		                     "SLURM_CLUSTER_NAME: '%.64s' is not a cluster name (1-%d of "
		                     "[A-Za-z0-9._-])",
		                     cluster ? cluster : "", ISO_SLURM_CLUSTER_MAX);
	if (job == 0)
		return iso_error_set(err, ISO_E_INVALID, "SLURM_JOB_ID",
		                     "SLURM_JOB_ID: 0 is no job");
	if ((size_t)snprintf(buf, size, "slurm:%s:%" PRIu32 ":%" PRIu32, cluster, job, restart) >=
	    size)
		return iso_error_set(err, ISO_E_INVALID, "SLURM_CLUSTER_NAME",
		                     "SLURM_CLUSTER_NAME: too long for a key");
	return 0;
}

/* A decimal uint32 without sign, leading zero or trailing bytes, up to `end`. */
static bool parse_u32(const char *s, const char *end, uint32_t *out)
{
	uint64_t v = 0;

	if (s == end || (*s == '0' && end - s > 1))
		return false;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return false;
	}
	*out = (uint32_t)v;
	return true;
}

bool iso_slurm_job_key_parse(const char *key, const char *cluster, uint32_t *job, uint32_t *restart)
{
	size_t cl = strlen(cluster);
	const char *p, *colon;
	uint32_t j, r;

	if (strncmp(key, "slurm:", 6) != 0 || strncmp(key + 6, cluster, cl) != 0 ||
	    key[6 + cl] != ':')
		return false;
	p = key + 6 + cl + 1;
	colon = strchr(p, ':');
	if (!colon || !parse_u32(p, colon, &j) || j == 0 ||
	    !parse_u32(colon + 1, colon + 1 + strlen(colon + 1), &r))
		return false;
	*job = j;
	if (restart)
		*restart = r;
	return true;
}

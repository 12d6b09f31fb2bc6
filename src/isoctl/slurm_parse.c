/* slurm_parse.c: strict readers of what Slurm hands `isoctl slurm`: the
 * PrologSlurmctld environment (job id, CPUs per node, node list) and the
 * output of `scontrol show hostnames`, `scontrol -o -d show job` and
 * `squeue --json`. Every refusal names what it read, so that a prolog's
 * message points at the variable or command at fault. No I/O here. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <string.h>

#include "isoctl/slurm.h"

/* Digits only, no sign, no spaces; [min, max]. */
static int parse_ulong(const char *s, size_t len, unsigned long long max, unsigned long long *out)
{
	unsigned long long v = 0;

	if (len == 0 || len > 20)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		if (v > (max - (unsigned)(s[i] - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*out = v;
	return 0;
}

int isoctl_slurm_parse_job_id(const char *what, const char *s, uint32_t *out, struct iso_error *err)
{
	unsigned long long v;

	if (!s || !s[0])
		return iso_error_set(err, ISO_E_INVALID, what, "%s is not set", what);
	if (parse_ulong(s, strlen(s), 4294967294ull, &v) < 0 || v == 0)
		return iso_error_set(err, ISO_E_INVALID, what,
		                     "%s: '%.64s' is not a job id (digits, 1-4294967294)", what, s);
	*out = (uint32_t)v;
	return 0;
}

int isoctl_slurm_parse_cpus_per_node(const char *what, const char *s, long *max, size_t *nodes,
                                     struct iso_error *err)
{
	const char *p = s;
	unsigned long long most = 0, count = 0;

	if (!s || !s[0])
		return iso_error_set(err, ISO_E_INVALID, what, "%s is not set", what);
	for (;;) {
		size_t n = strspn(p, "0123456789");
		unsigned long long cpus, times = 1;

		if (parse_ulong(p, n, 1000000, &cpus) < 0 || cpus == 0)
			goto bad;
		p += n;
		if (p[0] == '(') {
			if (p[1] != 'x')
				goto bad;
			p += 2;
			n = strspn(p, "0123456789");
			if (parse_ulong(p, n, ISOCTL_SLURM_MAX_NODES, &times) < 0 || times == 0 ||
			    p[n] != ')')
				goto bad;
			p += n + 1;
		}
		count += times;
		if (count > ISOCTL_SLURM_MAX_NODES)
			return iso_error_set(err, ISO_E_INVALID, what, "%s: more than %d nodes",
			                     what, ISOCTL_SLURM_MAX_NODES);
		if (cpus > most)
			most = cpus;
		if (!p[0])
			break;
		if (p[0] != ',')
			goto bad;
		p++;
	}
	*max = (long)most;
	*nodes = (size_t)count;
	return 0;
bad:
	return iso_error_set(err, ISO_E_INVALID, what,
	                     "%s: '%.64s' is not a list of CPU counts (\"4(x2),2\") at byte %zu",
	                     what, s, (size_t)(p - s) + 1);
}

int isoctl_slurm_check_nodelist(const char *what, const char *s, struct iso_error *err)
{
	static const char allowed[] = "abcdefghijklmnopqrstuvwxyz"
	                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,[]";
	size_t n;

	if (!s || !s[0])
		return iso_error_set(err, ISO_E_INVALID, what, "%s is not set", what);
	n = strspn(s, allowed);
	if (s[n] || s[0] == '-' || strlen(s) > 65536)
		return iso_error_set(err, ISO_E_INVALID, what,
		                     "%s: '%.64s' is not a Slurm host list (byte %zu)", what, s,
		                     n + 1);
	return 0;
}

int isoctl_slurm_parse_hostnames(const char *out, size_t len, char ***names, size_t *n,
                                 struct iso_error *err)
{
	size_t lines = 0, i, k = 0;
	char **v;
	char *text;

	*names = NULL;
	*n = 0;
	if (memchr(out, '\0', len))
		return iso_error_set(err, ISO_E_INVALID, "scontrol",
		                     "scontrol show hostnames: the output holds a NUL byte");
	for (i = 0; i < len; i++)
		lines += out[i] == '\n';
	if (len && out[len - 1] != '\n')
		lines++;
	if (lines == 0)
		return iso_error_set(err, ISO_E_INVALID, "scontrol",
		                     "scontrol show hostnames printed no node");
	if (lines > ISOCTL_SLURM_MAX_NODES)
		return iso_error_set(err, ISO_E_INVALID, "scontrol",
		                     "scontrol show hostnames: more than %d nodes",
		                     ISOCTL_SLURM_MAX_NODES);
	/* One block: the pointers, then the text. */
	v = malloc(lines * sizeof(*v) + len + 1);
	if (!v)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	text = (char *)(v + lines);
	memcpy(text, out, len);
	text[len] = '\0';
	for (char *line = text; *line; k++) {
		char *end = strchr(line, '\n');

		if (end)
			*end = '\0';
		if (!iso_name_valid(line)) {
			iso_error_set(
			    err, ISO_E_INVALID, "scontrol",
			    "scontrol show hostnames, line %zu: '%.64s' is not a node name "
			    "(lower case letters, digits, '-', '_', '.')",
			    k + 1, line);
			goto fail;
		}
		for (size_t j = 0; j < k; j++)
			if (strcmp(v[j], line) == 0) {
				iso_error_set(err, ISO_E_INVALID, "scontrol",
				              "scontrol show hostnames, line %zu: node %s twice",
				              k + 1, line);
				goto fail;
			}
		v[k] = line;
		line = end ? end + 1 : line + strlen(line);
	}
	*names = v;
	*n = k;
	return 0;
fail:
	free(v);
	return -EINVAL;
}

/* The value of token "KEY=VALUE" when it has that key, else NULL. */
static const char *value_of(const char *tok, size_t len, const char *key, size_t *vlen)
{
	size_t k = strlen(key);

	if (len <= k || strncmp(tok, key, k) != 0 || tok[k] != '=')
		return NULL;
	*vlen = len - k - 1;
	return tok + k + 1;
}

static int job_bad(struct iso_error *err, uint32_t id, const char *fmt, const char *detail)
{
	return iso_error_set(err, ISO_E_INVALID, "scontrol", "scontrol show job %u: %s%.64s", id,
	                     fmt, detail ? detail : "");
}

int isoctl_slurm_parse_job(const char *out, size_t len, uint32_t id, const char *name,
                           struct isoctl_slurm_job *job, struct iso_error *err)
{
	char head[64];
	const char *p, *end;
	size_t hl, nl = strlen(name);
	bool detail = false, done = false;
	unsigned long long v;

	job->num_nodes = job->num_cpus = job->mem_mib = -1;
	if (memchr(out, '\0', len))
		return job_bad(err, id, "the output holds a NUL byte", NULL);
	while (len && (out[len - 1] == '\n' || out[len - 1] == ' '))
		len--;
	if (memchr(out, '\n', len))
		return job_bad(err, id, "more than one line (a heterogeneous job?)", NULL);
	hl = (size_t)snprintf(head, sizeof(head), "JobId=%u JobName=", id);
	if (len < hl || memcmp(out, head, hl) != 0)
		return job_bad(err, id, "the line does not start with ", head);
	if (len < hl + nl + 8 || memcmp(out + hl, name, nl) != 0 ||
	    memcmp(out + hl + nl, " UserId=", 8) != 0)
		return job_bad(err, id, "JobName= is not SLURM_JOB_NAME followed by UserId=", NULL);
	p = out + hl + nl + 1;
	end = out + len;
	while (p < end && !done) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		size_t tl = sp ? (size_t)(sp - p) : (size_t)(end - p);
		const char *val;
		size_t vl;

		if ((val = value_of(p, tl, "NumNodes", &vl))) {
			if (parse_ulong(val, vl, ISOCTL_SLURM_MAX_NODES, &v) < 0 || v == 0)
				return job_bad(err, id, "bad NumNodes=", val);
			job->num_nodes = (long)v;
		} else if ((val = value_of(p, tl, "NumCPUs", &vl))) {
			if (parse_ulong(val, vl, 100000000, &v) < 0)
				return job_bad(err, id, "bad NumCPUs=", val);
			job->num_cpus = (long)v;
		} else if ((val = value_of(p, tl, "Nodes", &vl))) {
			detail = true; /* Mem= follows, after CPU_IDs= */
		} else if (detail && (val = value_of(p, tl, "Mem", &vl))) {
			if (parse_ulong(val, vl, (unsigned long long)INT64_MAX / 2, &v) < 0)
				return job_bad(err, id, "bad Mem= (MiB) in a Nodes= block: ", val);
			if ((long long)v > job->mem_mib)
				job->mem_mib = (long)v;
			detail = false;
		} else if (value_of(p, tl, "MinTmpDiskNode", &vl)) {
			done = true; /* free text (Command=, Comment=, paths) follows */
		}
		p += tl;
		while (p < end && *p == ' ')
			p++;
	}
	if (!done)
		return job_bad(err, id, "no MinTmpDiskNode= (not `scontrol -o -d show job`?)",
		               NULL);
	if (job->num_nodes < 0)
		return job_bad(err, id, "no NumNodes=", NULL);
	if (job->num_cpus < 0)
		return job_bad(err, id, "no NumCPUs=", NULL);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool state_finished(const char *s)
{
	static const char *const finished[] = {"COMPLETED", "CANCELLED", "FAILED",
	                                       "TIMEOUT",   "NODE_FAIL", "PREEMPTED",
	                                       "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(finished); i++)
		if (strcmp(s, finished[i]) == 0)
			return true;
	return false;
}

/* Finished when every state it lists is (23.02 adds flags such as
 * COMPLETING beside the base state); a job without a readable state is an
 * error, never "finished". */
static int job_finished(const json_t *state, bool *finished)
{
	size_t i;
	json_t *s;

	if (json_is_string(state)) {
		*finished = state_finished(json_string_value(state));
		return 0;
	}
	if (!json_is_array(state) || json_array_size(state) == 0)
		return -EINVAL;
	*finished = true;
	json_array_foreach (state, i, s) {
		if (!json_is_string(s))
			return -EINVAL;
		if (!state_finished(json_string_value(s)))
			*finished = false;
	}
	return 0;
}

int isoctl_slurm_parse_squeue(const char *out, size_t len, uint32_t **ids, size_t *n,
                              struct iso_error *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(out, len, JSON_REJECT_DUPLICATES, &jerr);
	json_t *errors, *jobs, *j;
	uint32_t *v = NULL;
	size_t i, k = 0;
	int r = 0;

	*ids = NULL;
	*n = 0;
	if (!root)
		return iso_error_set(err, ISO_E_INVALID, "squeue",
		                     "squeue --json: not JSON: %s at line %d", jerr.text,
		                     jerr.line);
	errors = json_object_get(root, "errors");
	jobs = json_object_get(root, "jobs");
	if (!json_is_object(root) || !json_is_array(errors) || !json_is_array(jobs)) {
		r = iso_error_set(err, ISO_E_INVALID, "squeue",
		                  "squeue --json: expected an object with lists \"errors\" and "
		                  "\"jobs\"");
		goto out;
	}
	if (json_array_size(errors) > 0) {
		const json_t *e = json_array_get(errors, 0);
		const char *d = json_string_value(json_object_get(e, "description"));
		const char *what = json_string_value(json_object_get(e, "error"));

		r = iso_error_set(err, ISO_E_UNAVAILABLE, "squeue",
		                  "squeue --json reports: %.200s%s%.200s", d ? d : "an error",
		                  what ? ": " : "", what ? what : "");
		goto out;
	}
	v = malloc((json_array_size(jobs) + 1) * sizeof(*v));
	if (!v) {
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	json_array_foreach (jobs, i, j) {
		json_t *id = json_object_get(j, "job_id");
		json_int_t x = json_integer_value(id);
		bool finished;

		if (!json_is_integer(id) || x <= 0 || x > 4294967294LL) {
			r = iso_error_set(err, ISO_E_INVALID, "squeue",
			                  "squeue --json: jobs[%zu].job_id is not a job id", i);
			goto out;
		}
		if (job_finished(json_object_get(j, "job_state"), &finished) < 0) {
			r = iso_error_set(
			    err, ISO_E_INVALID, "squeue",
			    "squeue --json: jobs[%zu].job_state is not a state or a list "
			    "of states",
			    i);
			goto out;
		}
		if (!finished)
			v[k++] = (uint32_t)x;
	}
	qsort(v, k, sizeof(*v), cmp_u32);
	*ids = v;
	*n = k;
	v = NULL;
out:
	free(v);
	json_decref(root);
	return r;
}

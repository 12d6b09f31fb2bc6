/* health.c: whether the subnet manager can be reached, as the opensm driver
 * (a local SM's pid file) and the SM host's agent (its OpenSM's pid file)
 * both judge it (include/isostack/smfile.h, docs/fabric.md "Is the SM
 * reachable"). One reader of an SM's pid file, where there were two copies
 * (src/fabric/opensm.c and src/agent/sm.c), and the four states STATUS of
 * the CNI plugin reads through GET /v1/fabric/health. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "isostack/smfile.h"

pid_t iso_sm_pid_alive(const char *path)
{
	_cleanup_fclose_ FILE *f = path && path[0] ? fopen(path, "re") : NULL;
	long pid = 0;

	if (!f || fscanf(f, "%ld", &pid) != 1 || pid <= 1 || pid > INT32_MAX)
		return 0;
	/* EPERM: the process exists, it is only not ours to signal */
	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return 0;
	return (pid_t)pid;
}

static const char *const names[] = {
    [ISO_SM_STATE_NONE] = "none",
    [ISO_SM_STATE_UNKNOWN] = "unknown",
    [ISO_SM_STATE_UP] = "up",
    [ISO_SM_STATE_DOWN] = "down",
};

const char *iso_sm_state_name(enum iso_sm_state s)
{
	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

int iso_sm_state_parse(const char *name, enum iso_sm_state *out)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (name && strcmp(name, names[i]) == 0) {
			*out = (enum iso_sm_state)i;
			return 0;
		}
	return -EINVAL;
}

void iso_sm_health_set(struct iso_sm_health *h, enum iso_sm_state s, const char *reason,
                       int64_t now_ms)
{
	if (h->since_ms == 0 || h->state != s)
		h->since_ms = now_ms;
	h->state = s;
	iso_strlcpy(h->reason, reason ? reason : "", sizeof(h->reason));
}

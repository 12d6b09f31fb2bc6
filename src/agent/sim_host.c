/* sim_host.c: a sim agent's GPUs come from the node's inventory. The sim
 * driver cannot know on its own what host it stands for; without this, every
 * sim node had 8 x H100-80GB with MIG on, and a node whose inventory has MIG
 * off reported MigModeMismatch for each GPU and lost all its work. So a new
 * sim state is made from the node's first desired document (as many GPUs as
 * it lists, each with the document's MIG mode), while a state already on
 * disk is opened as it is: a sim host, like a real one, never changes
 * silently, and a later difference is the condition reconcile reports. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "isostack/agent.h"

/* The desired document carries no GPU model (docs/agents.md): every GPU of
 * a new sim host is this one. */
#define SIM_HOST_MODEL "h100-80gb"

int iso_agent_sim_open(const char *dir, const struct iso_agent_desired *d, struct iso_gpu **out,
                       struct iso_error *err)
{
	struct iso_gpu_open_args a = {.state_dir = dir};
	const char *models[ISO_GPU_MAX];
	bool mig[ISO_GPU_MAX];
	char path[PATH_MAX];
	size_t n = 0;

	*out = NULL;
	if (!dir ||
	    snprintf(path, sizeof(path), "%s/%s", dir, ISO_GPU_SIM_STATE_FILE) >= (int)sizeof(path))
		return iso_error_set(err, ISO_E_INVALID, "state_dir", "state dir path too long");
	if (access(path, F_OK) == 0)
		return iso_gpu_sim_ops.open(&a, out, err); /* as it is on disk */
	if (errno != ENOENT)
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "cannot read %s: %s", path,
		                     strerror(errno));
	if (!d)
		return 0; /* made when the first document comes */
	for (size_t i = 0; i < d->n_gpus; i++)
		if (d->gpus[i].index + 1 > n)
			n = d->gpus[i].index + 1;
	if (n == 0 || n > ISO_GPU_MAX)
		return iso_gpu_sim_ops.open(&a, out, err); /* no GPUs listed: the default */
	for (size_t i = 0; i < n; i++) {
		models[i] = SIM_HOST_MODEL;
		mig[i] = true; /* an index the document skips: as before */
	}
	for (size_t i = 0; i < d->n_gpus; i++)
		mig[d->gpus[i].index] = d->gpus[i].mig;
	a.models = models;
	a.n_models = n;
	a.mig = mig;
	a.n_mig = n;
	return iso_gpu_sim_ops.open(&a, out, err);
}

/* mapping.c: how a pod of the trace becomes an allocation on a MIG GPU. The
 * trace's GPUs are not MIG-capable and its pods ask for a share of a GPU in
 * thousandths (gpu_milli); on MIG a share must be one profile. The rule:
 * the share needs ceil(milli * C / 1000) of the model's C compute slices and
 * ceil(milli * M / 1000) of its M memory slices, and gets the smallest
 * profile that covers both (iso_mig_profile_resolve: fewest memory slices,
 * then fewest compute slices). The resulting table for h100-80gb is in
 * docs/sim.md; `isoctl sim --mapping` prints it for any model. */
#include <math.h>
#include <string.h>

#include "sim/internal.h"

const struct iso_mig_profile *iso_sim_profile_for_milli(const struct iso_gpu_model *m, int milli)
{
	const struct iso_mig_profile *p;
	double min_gib = INFINITY;
	int compute, width;

	if (!m || milli < 1 || milli > 1000)
		return NULL;
	compute = (milli * m->compute_slices + 999) / 1000;
	width = (milli * m->memory_slices + 999) / 1000;
	/* iso_mig_profile_resolve asks for memory in GiB: the least that any
	 * plain profile spanning `width` memory slices or more holds. */
	for (int i = 0; i < m->n_profiles; i++)
		if (!m->profiles[i].media_engine && m->profiles[i].width >= width &&
		    m->profiles[i].memory_gib < min_gib)
			min_gib = m->profiles[i].memory_gib;
	if (!isfinite(min_gib))
		return NULL;
	p = iso_mig_profile_resolve(m, min_gib, compute);
	if (!p || p->width < width || p->compute < compute)
		return NULL;
	return p;
}

int iso_sim_pod_request(const struct iso_sim_pod *pod, const struct iso_gpu_model *m,
                        struct iso_sim_request *out, struct iso_error *err)
{
	memset(out, 0, sizeof(*out));
	out->shape.cpus = pod->cpu_milli;
	out->shape.memory_mib = pod->memory_mib;
	if (pod->num_gpu == 0)
		return 0;
	if (pod->num_gpu > 1 || pod->gpu_milli == 1000 || pod->gpu_milli == 0) {
		out->shape.whole = true;
		out->shape.gpu_count = pod->num_gpu;
		out->compute = pod->num_gpu * m->compute_slices;
		out->memory = pod->num_gpu * m->memory_slices;
		return 0;
	}
	out->profile = iso_sim_profile_for_milli(m, pod->gpu_milli);
	if (!out->profile)
		return iso_error_set(err, ISO_E_INVALID, "gpu_milli",
		                     "pod %s (line %d): no MIG profile of %s covers gpu_milli %d",
		                     pod->name, pod->line, m->name, pod->gpu_milli);
	out->shape.gpu_count = 1;
	iso_strlcpy(out->shape.profile, out->profile->name, sizeof(out->shape.profile));
	out->compute = out->profile->compute;
	out->memory = out->profile->width;
	return 0;
}

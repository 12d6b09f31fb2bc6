/* fuzz_agent_desired.c: the node agent's desired-state document (GET
 * /v1/nodes/{node}/desired, docs/agents.md), the one input the controller
 * sends the agent. It is decoded as the client decodes a reply (jansson,
 * JSON_DECODE_ANY), then parsed by iso_agent_desired_parse for node
 * "gpu-a01". A refusal must name what is wrong and hand out nothing; an
 * accepted document must keep its promises (its node, GPU indices listed
 * once, no two instances at one start of a GPU, a GPU held whole holds
 * nothing else, VFs listed once with a full-membership P_Key). Then the
 * agent acts on it: one reconcile over the sim GPU driver (8 x H100, empty
 * at first, state in the harness's directory), which must succeed, create
 * only instances the document holds (every one it reports as created), and
 * a VF pass with no VF driver that reports each desired VF not ready. */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "isostack/agent.h"
#include "isostack/gpu.h"

#define NODE "gpu-a01"

static void check_accepted(const struct iso_agent_desired *d)
{
	FUZZ_ASSERT(strcmp(d->node, NODE) == 0, "accepted for node \"%s\"", d->node);
	FUZZ_ASSERT(d->n_gpus <= ISO_GPU_MAX, "%zu GPUs", d->n_gpus);
	for (size_t i = 0; i < d->n_gpus; i++)
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(d->gpus[i].index != d->gpus[j].index, "GPU %u listed twice",
			            d->gpus[i].index);
	for (size_t i = 0; i < d->n_wants; i++) {
		const struct iso_agent_want *w = &d->wants[i];
		bool whole = strcmp(w->profile, "whole") == 0, listed = false;

		for (size_t j = 0; j < d->n_gpus; j++)
			listed = listed || d->gpus[j].index == w->gpu;
		FUZZ_ASSERT(listed, "instance %zu on GPU %u, which is not listed", i, w->gpu);
		FUZZ_ASSERT(w->profile[0] && w->allocation[0] && w->member <= 1023,
		            "instance %zu lacks its profile or owner", i);
		FUZZ_ASSERT(whole ||
		                (w->start >= 0 && w->start <= 7 && w->width >= 1 && w->width <= 8),
		            "instance %zu at %d width %d", i, w->start, w->width);
		for (size_t j = 0; j < i; j++) {
			const struct iso_agent_want *o = &d->wants[j];
			bool owhole = strcmp(o->profile, "whole") == 0;

			FUZZ_ASSERT(o->gpu != w->gpu || (!whole && !owhole && o->start != w->start),
			            "GPU %u: instances %zu and %zu clash", w->gpu, j, i);
		}
	}
	for (size_t i = 0; i < d->n_vfs; i++) {
		const struct iso_agent_vf_want *v = &d->vfs[i];

		FUZZ_ASSERT(v->index < ISO_AGENT_VF_MAX && iso_name_valid(v->device) &&
		                v->tenant[0] && (v->pkey & 0x8000) && (v->pkey & 0x7fff) != 0 &&
		                (v->pkey & 0x7fff) != 0x7fff,
		            "VF %zu: index %u device \"%s\" pkey 0x%04x", i, v->index, v->device,
		            v->pkey);
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(v->index != d->vfs[j].index ||
			                strcmp(v->device, d->vfs[j].device),
			            "VF %u of %s listed twice", v->index, v->device);
	}
	/* issue 14's members: each once, a tenant name, an overlay with a VNI
	 * of 24 bits and its peers IPv4, sorted and unique */
	for (size_t i = 0; i < d->n_members; i++) {
		const struct iso_agent_member_want *m = &d->members[i];
		uint32_t ip;

		FUZZ_ASSERT(m->member <= 1023 && iso_name_valid(m->tenant) && m->allocation[0],
		            "member %zu: %s/%u of \"%s\"", i, m->allocation, m->member, m->tenant);
		FUZZ_ASSERT(!m->has_overlay || (m->vni >= 1 && m->vni <= ISO_VNI_MAX),
		            "member %zu: VNI %u", i, m->vni);
		FUZZ_ASSERT(m->has_overlay || m->n_peers == 0, "member %zu: peers, no overlay", i);
		for (size_t k = 0; k < m->n_peers; k++)
			FUZZ_ASSERT(iso_parse_ipv4(m->peers[k], &ip) == 0 &&
			                (k == 0 || strcmp(m->peers[k - 1], m->peers[k]) < 0),
			            "member %zu: peer %zu \"%s\"", i, k, m->peers[k]);
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(m->member != d->members[j].member ||
			                strcmp(m->allocation, d->members[j].allocation),
			            "member %u of %s listed twice", m->member, m->allocation);
	}
}

/* Is `in`, found on GPU `gpu` after one reconcile from nothing, one the
 * document holds? (A GPU held whole in MIG mode is made the one instance
 * at 0 that spans it.) */
static bool held(const struct iso_agent_desired *d, unsigned gpu, const struct iso_gpu_instance *in)
{
	for (size_t i = 0; i < d->n_wants; i++) {
		const struct iso_agent_want *w = &d->wants[i];

		if (w->gpu == gpu &&
		    ((strcmp(w->profile, "whole") == 0 && in->start == 0) ||
		     (w->start == in->start && strcmp(w->profile, in->profile) == 0)))
			return true;
	}
	return false;
}

static void act_on(const struct iso_agent_desired *d, const char *dir)
{
	char path[160];
	struct iso_gpu_open_args args = {.state_dir = dir};
	struct iso_gpu *g = NULL;
	struct iso_error err = {0};
	struct iso_agent_tick tick = {0};
	struct iso_vf_host none = {.driver = ISO_VF_NONE};
	struct iso_vf_tick vtick = {0};
	json_t *status = NULL;
	size_t found = 0;
	int r;

	/* every input starts from an empty host and no term seen */
	snprintf(path, sizeof(path), "%s/gpu-sim.json", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/" ISO_AGENT_TERM_FILE, dir);
	unlink(path);
	FUZZ_ASSERT(iso_gpu_sim_ops.open(&args, &g, &err) == 0, "sim open: %s", err.message);
	r = iso_agent_reconcile(g, dir, d, &status, &tick, &err);
	FUZZ_ASSERT(r == 0, "reconcile of an accepted document failed: %s", err.message);
	FUZZ_ASSERT(json_is_object(status) && json_is_array(json_object_get(status, "instances")),
	            "reconcile gave no status document");
	FUZZ_ASSERT(tick.destroyed == 0 && tick.term_seen == d->term,
	            "destroyed %u on an empty host, term %llu", tick.destroyed,
	            (unsigned long long)tick.term_seen);
	for (unsigned gpu = 0; gpu < 8; gpu++) {
		_cleanup_free_ struct iso_gpu_instance *v = NULL;
		size_t n = 0;

		FUZZ_ASSERT(g->ops->list_instances(g, gpu, &v, &n, &err) == 0, "list_instances: %s",
		            err.message);
		for (size_t k = 0; k < n; k++)
			FUZZ_ASSERT(held(d, gpu, &v[k]), "GPU %u: %s at %d was not desired", gpu,
			            v[k].profile, v[k].start);
		found += n;
	}
	FUZZ_ASSERT(found == tick.created, "%zu instances found, %u created", found, tick.created);
	r = iso_agent_vf_reconcile(&none, dir, d, status, &vtick, &err);
	FUZZ_ASSERT(r == 0 && json_array_size(json_object_get(status, "vfs")) == d->n_vfs,
	            "VF status: %d, %zu entries for %zu VFs", r,
	            json_array_size(json_object_get(status, "vfs")), d->n_vfs);
	json_decref(status);
	g->ops->close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_tmpdir("agent_desired");
	json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	struct iso_agent_desired d;
	struct iso_error err = {0};
	int r;

	if (!doc)
		return 0;
	r = iso_agent_desired_parse(doc, NODE, &d, &err);
	json_decref(doc);
	fuzz_check_refusal(r, &err, "iso_agent_desired_parse");
	if (r < 0) {
		FUZZ_ASSERT(!d.wants && !d.vfs && !d.members && d.n_wants == 0 && d.n_vfs == 0 &&
		                d.n_members == 0,
		            "a refused document left wants, VFs or members behind");
		return 0;
	}
	check_accepted(&d);
	act_on(&d, dir);
	iso_agent_desired_clear(&d);
	return 0;
}

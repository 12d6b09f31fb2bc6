/* logic.c: the SPANK plugin's pure logic (see logic.h; docs/slurm.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/mig.h"
#include "logic.h"

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9' || (s[0] == '0' && s[1]))
		return -EINVAL;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return errno || *end || *out > max ? -EINVAL : 0;
}

int iso_slurm_args_parse(int ac, char **av, struct iso_slurm_args *out, struct iso_error *err)
{
	bool seen_dir = false, seen_wait = false, seen_map = false, seen_allow = false;

	memset(out, 0, sizeof(*out));
	out->wait_s = ISO_SLURM_WAIT_DEFAULT;
	for (int i = 0; i < ac; i++) {
		const char *a = av[i], *eq = a ? strchr(a, '=') : NULL, *v;
		size_t kn;
		unsigned long n;

		if (!a || !eq || eq == a)
			return iso_error_set(err, ISO_E_INVALID, "args",
			                     "plugin argument \"%.64s\": expected NAME=VALUE",
			                     a ? a : "");
		kn = (size_t)(eq - a);
		v = eq + 1;
#define IS(name) (kn == strlen(name) && strncmp(a, name, kn) == 0)
#define ONCE(flag, name)                                                                           \
	do {                                                                                       \
		if (flag)                                                                          \
			return iso_error_set(err, ISO_E_INVALID, name, "%s: given twice", name);   \
		flag = true;                                                                       \
	} while (0)
		if (IS("agent_state_dir")) {
			ONCE(seen_dir, "agent_state_dir");
			if (v[0] != '/' ||
			    iso_strlcpy(out->agent_state_dir, v, sizeof(out->agent_state_dir)) < 0)
				return iso_error_set(err, ISO_E_INVALID, "agent_state_dir",
				                     "agent_state_dir: expected an absolute path");
		} else if (IS("wait")) {
			ONCE(seen_wait, "wait");
			if (parse_uint(v, ISO_SLURM_WAIT_MAX, &n) < 0)
				return iso_error_set(err, ISO_E_INVALID, "wait",
				                     "wait: expected 0..%d seconds, got \"%.32s\"",
				                     ISO_SLURM_WAIT_MAX, v);
			out->wait_s = (unsigned)n;
		} else if (IS("tenant_map")) {
			ONCE(seen_map, "tenant_map");
			if (v[0] != '/' ||
			    iso_strlcpy(out->tenant_map, v, sizeof(out->tenant_map)) < 0)
				return iso_error_set(err, ISO_E_INVALID, "tenant_map",
				                     "tenant_map: expected an absolute path");
		} else if (IS("allow_no_sandbox")) {
			ONCE(seen_allow, "allow_no_sandbox");
			if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
				return iso_error_set(err, ISO_E_INVALID, "allow_no_sandbox",
				                     "allow_no_sandbox: expected 0 or 1");
			out->allow_no_sandbox = v[0] == '1';
		} else {
			return iso_error_set(err, ISO_E_INVALID, "args",
			                     "unknown plugin argument \"%.*s\" (known: "
			                     "agent_state_dir, wait, tenant_map, allow_no_sandbox)",
			                     (int)(kn > 64 ? 64 : kn), a);
		}
#undef IS
#undef ONCE
	}
	if (!seen_dir)
		return iso_error_set(err, ISO_E_INVALID, "agent_state_dir",
		                     "agent_state_dir: required (agent_state_dir=/var/lib/"
		                     "isostack-agent/%%n)");
	return 0;
}

static bool profile_known(const char *p)
{
	const struct iso_gpu_model *m;

	for (int i = 0; (m = iso_gpu_model_at(i)); i++)
		if (iso_mig_profile_find(m, p))
			return true;
	return false;
}

int iso_slurm_opts_check(const struct iso_slurm_opts *o, struct iso_error *err)
{
	static const char *const isolations[] = {"shared", "exclusive-gpu", "exclusive-node",
	                                         "exclusive-rack"};
	unsigned long n;

	if (o->profile && (strlen(o->profile) >= 32 || !profile_known(o->profile)))
		return iso_error_set(
		    err, ISO_E_INVALID, "--isostack-profile",
		    "--isostack-profile: \"%.32s\" is no MIG profile (e.g. 1g.10gb, "
		    "3g.40gb)",
		    o->profile);
	if (o->gpus && parse_uint(o->gpus, ISO_SLURM_GPUS_MAX, &n) < 0)
		return iso_error_set(err, ISO_E_INVALID, "--isostack-gpus",
		                     "--isostack-gpus: expected 1..%d whole GPUs, got \"%.32s\"",
		                     ISO_SLURM_GPUS_MAX, o->gpus);
	if (o->gpus && n == 0)
		return iso_error_set(err, ISO_E_INVALID, "--isostack-gpus",
		                     "--isostack-gpus: expected 1..%d whole GPUs, got \"0\"",
		                     ISO_SLURM_GPUS_MAX);
	if (o->profile && o->gpus)
		return iso_error_set(err, ISO_E_INVALID, "--isostack-gpus",
		                     "--isostack-gpus: give --isostack-profile (a MIG slice) or "
		                     "--isostack-gpus (whole GPUs), not both");
	if (o->isolation) {
		bool ok = false;
		for (size_t i = 0; i < ISO_ARRAY_SIZE(isolations) && !ok; i++)
			ok = strcmp(o->isolation, isolations[i]) == 0;
		if (!ok)
			return iso_error_set(err, ISO_E_INVALID, "--isostack-isolation",
			                     "--isostack-isolation: \"%.32s\" is not shared, "
			                     "exclusive-gpu, exclusive-node or exclusive-rack",
			                     o->isolation);
	}
	return 0;
}

int iso_slurm_state_dir(const char *tmpl, const char *node, char *out, size_t size,
                        struct iso_error *err)
{
	size_t len = 0;

	for (const char *p = tmpl; *p; p++) {
		const char *add = p;
		size_t n = 1;

		if (*p == '%') {
			if (p[1] == 'n') {
				if (!node || !iso_name_valid(node))
					return iso_error_set(
					    err, ISO_E_INVALID, "agent_state_dir",
					    "agent_state_dir: %%n: this node's name "
					    "(SLURMD_NODENAME) is unknown or not a "
					    "node name");
				add = node;
				n = strlen(node);
			} else if (p[1] != '%') {
				return iso_error_set(
				    err, ISO_E_INVALID, "agent_state_dir",
				    "agent_state_dir: only %%n and %%%% may follow %%");
			}
			p++;
		}
		if (len + n >= size)
			return iso_error_set(err, ISO_E_INVALID, "agent_state_dir",
			                     "agent_state_dir: too long");
		memcpy(out + len, add, n);
		len += n;
	}
	out[len] = '\0';
	return 0;
}

int iso_slurm_tenant(const char *account, const struct iso_tenant_map *map, char *out, size_t size,
                     struct iso_error *err)
{
	const char *t;

	if (!account || !*account)
		return iso_error_set(err, ISO_E_INVALID, "account",
		                     "the job has no account (SLURM_JOB_ACCOUNT)");
	t = iso_tenant_map_lookup(map, account);
	if (!t && !iso_name_valid(account))
		return iso_error_set(err, ISO_E_INVALID, "account",
		                     "account \"%.64s\" is not a tenant name; map it to one in the "
		                     "tenant map",
		                     account);
	if (iso_strlcpy(out, t ? t : account, size) < 0)
		return iso_error_set(err, ISO_E_INVALID, "account", "tenant name too long");
	return 0;
}

void iso_slurm_env_build(const struct iso_agent_member_info *mi, struct iso_slurm_env *out)
{
	memset(out, 0, sizeof(*out));
#define ADD(var, ...)                                                                              \
	do {                                                                                       \
		out->v[out->n].name = var;                                                         \
		snprintf(out->v[out->n].value, sizeof(out->v[0].value), __VA_ARGS__);              \
		out->n++;                                                                          \
	} while (0)
	ADD("CUDA_VISIBLE_DEVICES", "%s", mi->cuda_visible_devices);
	if (mi->has_pkey) {
		ADD("UCX_IB_PKEY", "0x%04x", mi->pkey);
		ADD("OMPI_MCA_btl_openib_pkey", "0x%04x", mi->pkey);
	}
	if (mi->has_pkey && mi->pkey_index >= 0)
		ADD("NCCL_IB_PKEY", "%d", mi->pkey_index);
	ADD("ISOSTACK_ALLOCATION", "%s", mi->allocation);
#undef ADD
}

void iso_slurm_env_add_cxi(const struct iso_agent_cxi_grant *g, struct iso_slurm_env *out)
{
	static const char *const names[] = {"SLINGSHOT_VNIS", "SLINGSHOT_SVC_IDS",
	                                    "SLINGSHOT_DEVICES"};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(names) && out->n < ISO_SLURM_ENV_MAX; i++) {
		out->v[out->n].name = names[i];
		if (i == 0)
			snprintf(out->v[out->n].value, sizeof(out->v[0].value), "%u", g->vni);
		else if (i == 1)
			snprintf(out->v[out->n].value, sizeof(out->v[0].value), "%u", g->svc_id);
		else
			snprintf(out->v[out->n].value, sizeof(out->v[0].value), "%s", g->device);
		out->n++;
	}
}

int iso_slurm_sandbox_decide(const struct iso_agent_member_info *mi, bool allow_no_sandbox,
                             unsigned uid, struct iso_error *err)
{
	if (mi->has_sandbox && uid == 0)
		return iso_error_set(err, ISO_E_FORBIDDEN, "uid",
		                     "the job runs as root (uid 0), which no sandbox takes: uid 0 "
		                     "owns the host's files even without capabilities (and "
		                     "slurmstepd cannot set root's groups after the join); submit "
		                     "it as a user");
	if (mi->has_sandbox)
		return 1;
	if (mi->sandbox_real)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "sandbox",
		                     "member %u of %s has no sandbox on this node", mi->member,
		                     mi->allocation);
	if (allow_no_sandbox)
		return 0;
	return iso_error_set(err, ISO_E_FORBIDDEN, "sandbox",
	                     "this node's agent runs with its sandboxes off (--sandbox off): the "
	                     "job is not run unisolated (the plugin argument allow_no_sandbox=1 "
	                     "allows it, on test clusters only)");
}

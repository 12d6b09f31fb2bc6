/* logic.c: the CNI plugin's parsing and answers (issue 17, docs/cni.md).
 * Strict like every input of isostack: a runtime hands us the network
 * config on stdin and the pod's identity in the environment; a field we do
 * not know, a value of the wrong type or out of range, a pod namespace the
 * config does not map to a tenant, is refused with a CNI error object whose
 * msg names the field. Never a default tenant: an unmapped namespace is a
 * pod isostack does not isolate, so it is not attached at all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/codec.h"
#include "logic.h"

static const char *const versions[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", NULL};

bool cni_version_supported(const char *v)
{
	for (size_t i = 0; v && versions[i]; i++)
		if (strcmp(v, versions[i]) == 0)
			return true;
	return false;
}

json_t *cni_version_result(void)
{
	json_t *a = json_array();

	for (size_t i = 0; versions[i]; i++)
		json_array_append_new(a, json_string(versions[i]));
	return json_pack("{s:s, s:o}", "cniVersion", CNI_VERSION_LATEST, "supportedVersions", a);
}

json_t *cni_error_json(const char *version, int code, const char *msg, const char *details)
{
	return json_pack("{s:s, s:i, s:s, s:s}", "cniVersion",
	                 version && cni_version_supported(version) ? version : CNI_VERSION_LATEST,
	                 "code", code, "msg", msg ? msg : "", "details", details ? details : "");
}

int cni_code_of(enum iso_errcode c)
{
	switch (c) {
	case ISO_E_UNAVAILABLE:
	case ISO_E_NO_CAPACITY: /* the quota or the node frees: a retry can succeed */
	case ISO_E_LIMIT:
		return CNI_E_TRY_LATER;
	case ISO_E_INTERNAL:
		return CNI_E_IO;
	default:
		return CNI_E_REFUSED;
	}
}

static bool ns_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n >= CNI_NS_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] == '-' && i && i + 1 < n)))
			return false;
	return true;
}

static int fail(int *code, int c, struct iso_error *err, const char *field, const char *msg)
{
	*code = c;
	return iso_error_set(err, ISO_E_INVALID, field, "%s", msg);
}

int cni_config_parse(const char *text, size_t len, struct cni_config *cfg, json_t **doc_out,
                     int *code, struct iso_error *err)
{
	/* the standard keys (SPEC.md "Network configuration", and what a
	 * runtime inserts), then ours */
	static const char *const keys[] = {"cniVersion",
	                                   "cniVersions",
	                                   "name",
	                                   "type",
	                                   "args",
	                                   "ipMasq",
	                                   "ipam",
	                                   "dns",
	                                   "capabilities",
	                                   "runtimeConfig",
	                                   "prevResult",
	                                   "cni.dev/valid-attachments",
	                                   "cni.dev/attachments",
	                                   "mode",
	                                   "agentSocket",
	                                   "agentStateDir",
	                                   "node",
	                                   "tenants",
	                                   "allocation",
	                                   "cpus",
	                                   "memoryMiB",
	                                   NULL};
	json_error_t je;
	json_t *doc;
	const char *v = NULL, *name = NULL, *type = NULL, *mode = NULL, *sock = NULL, *dir = NULL,
	           *node = NULL, *alloc = NULL;
	int64_t cpus = 0, mem = 64;
	char msg[512];
	int r;

	memset(cfg, 0, sizeof(*cfg));
	*doc_out = NULL;
	*code = CNI_E_CONFIG;
	if (len > 1024 * 1024)
		return fail(code, CNI_E_DECODE, err, "", "the network config is over 1 MiB");
	if (!(doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je))) {
		snprintf(msg, sizeof(msg), "the network config is not JSON: %s (line %d)", je.text,
		         je.line);
		return fail(code, CNI_E_DECODE, err, "", msg);
	}
	if (!json_is_object(doc)) {
		json_decref(doc);
		return fail(code, CNI_E_DECODE, err, "", "the network config is not a JSON object");
	}
	if ((r = iso_json_check_keys(doc, NULL, keys, err)) < 0) {
		*code = CNI_E_FIELD;
		goto out;
	}
	if ((r = iso_json_get_string(doc, "cniVersion", NULL, true, &v, err)) < 0 ||
	    (r = iso_json_get_string(doc, "name", NULL, true, &name, err)) < 0 ||
	    (r = iso_json_get_string(doc, "type", NULL, true, &type, err)) < 0 ||
	    (r = iso_json_get_string(doc, "mode", NULL, false, &mode, err)) < 0 ||
	    (r = iso_json_get_string(doc, "agentSocket", NULL, false, &sock, err)) < 0 ||
	    (r = iso_json_get_string(doc, "agentStateDir", NULL, false, &dir, err)) < 0 ||
	    (r = iso_json_get_string(doc, "node", NULL, false, &node, err)) < 0 ||
	    (r = iso_json_get_string(doc, "allocation", NULL, false, &alloc, err)) < 0 ||
	    (r = iso_json_get_int(doc, "cpus", NULL, false, 0, 1024, &cpus, err)) < 0 ||
	    (r = iso_json_get_int(doc, "memoryMiB", NULL, false, 0, INT64_C(1) << 30, &mem, err)) <
	        0)
		goto out;
	r = -EINVAL;
	if (!cni_version_supported(v)) {
		snprintf(
		    msg, sizeof(msg),
		    "cniVersion: \"%.32s\" is not one this plugin speaks (0.3.0, 0.3.1, 0.4.0, "
		    "1.0.0, 1.1.0)",
		    v);
		fail(code, CNI_E_VERSION, err, "cniVersion", msg);
		goto out;
	}
	iso_strlcpy(cfg->cni_version, v, sizeof(cfg->cni_version));
	if (!*name || iso_strlcpy(cfg->name, name, sizeof(cfg->name)) < 0) {
		fail(code, CNI_E_CONFIG, err, "name", "name: expected 1-128 characters");
		goto out;
	}
	(void)type; /* the runtime's choice of binary; any spelling */
	if (mode && strcmp(mode, "ethernet") != 0 && strcmp(mode, "slingshot") != 0 &&
	    strcmp(mode, "infiniband") != 0) {
		snprintf(msg, sizeof(msg),
		         "mode: \"%.32s\" is not built into this plugin (ethernet, slingshot, "
		         "infiniband)",
		         mode);
		fail(code, CNI_E_CONFIG, err, "mode", msg);
		goto out;
	}
	iso_strlcpy(cfg->mode, mode ? mode : "ethernet", sizeof(cfg->mode));
	if ((sock && dir) || (!sock && !dir)) {
		fail(code, CNI_E_CONFIG, err, sock ? "agentStateDir" : "agentSocket",
		     "agentSocket or agentStateDir: give exactly one (the node agent's socket, or "
		     "its --state-dir holding agent.sock)");
		goto out;
	}
	if ((sock && sock[0] != '/') || (dir && dir[0] != '/')) {
		fail(code, CNI_E_CONFIG, err, sock ? "agentSocket" : "agentStateDir",
		     sock ? "agentSocket: expected an absolute path"
		          : "agentStateDir: expected an absolute path");
		goto out;
	}
	if (snprintf(cfg->agent_socket, sizeof(cfg->agent_socket), "%s%s", sock ? sock : dir,
	             sock ? "" : "/agent.sock") >= 108) {
		fail(code, CNI_E_CONFIG, err, sock ? "agentSocket" : "agentStateDir",
		     "the agent's socket path is too long for a unix socket (107 bytes)");
		goto out;
	}
	if (node && !iso_name_valid(node)) {
		fail(code, CNI_E_CONFIG, err, "node", "node: not a node name");
		goto out;
	}
	if (node)
		iso_strlcpy(cfg->node, node, sizeof(cfg->node));
	if (alloc && (strlen(alloc) != 18 || strncmp(alloc, "a-", 2) != 0)) {
		fail(code, CNI_E_CONFIG, err, "allocation",
		     "allocation: expected an allocation id (a- and 16 hex digits)");
		goto out;
	}
	if (alloc && strcmp(cfg->mode, "infiniband") == 0) {
		fail(code, CNI_E_CONFIG, err, "allocation",
		     "allocation: not with mode infiniband (a pod holds a VF of its own "
		     "allocation)");
		goto out;
	}
	if (alloc)
		iso_strlcpy(cfg->allocation, alloc, sizeof(cfg->allocation));
	cfg->cpus = (unsigned)cpus;
	cfg->memory_mib = (uint64_t)mem;
	if (!cpus && !mem) {
		fail(code, CNI_E_CONFIG, err, "memoryMiB",
		     "memoryMiB and cpus: an attachment's member must ask for something (both 0)");
		goto out;
	}
	json_t *tm = json_object_get(doc, "tenants");
	if (!json_is_object(tm) || json_object_size(tm) == 0) {
		fail(code, CNI_E_CONFIG, err, "tenants",
		     "tenants: expected an object of pod namespace -> isostack tenant (at least "
		     "one)");
		goto out;
	}
	if (json_object_size(tm) > CNI_TENANTS_MAX) {
		fail(code, CNI_E_CONFIG, err, "tenants", "tenants: more than 256 namespaces");
		goto out;
	}
	const char *k;
	json_t *tv;
	json_object_foreach (tm, k, tv) {
		struct cni_tenant_map_entry *e = &cfg->tenants[cfg->n_tenants];
		char field[96];
		snprintf(field, sizeof(field), "tenants.%.64s", k);
		if (!ns_valid(k)) {
			snprintf(msg, sizeof(msg), "%s: not a Kubernetes namespace name", field);
			fail(code, CNI_E_CONFIG, err, field, msg);
			goto out;
		}
		if (!json_is_string(tv) || !iso_name_valid(json_string_value(tv))) {
			snprintf(msg, sizeof(msg), "%s: expected a tenant name", field);
			fail(code, CNI_E_CONFIG, err, field, msg);
			goto out;
		}
		iso_strlcpy(e->ns, k, sizeof(e->ns));
		iso_strlcpy(e->tenant, json_string_value(tv), sizeof(e->tenant));
		cfg->n_tenants++;
	}
	json_t *ipam = json_object_get(doc, "ipam");
	if (ipam && !json_is_object(ipam)) {
		fail(code, CNI_E_CONFIG, err, "ipam", "ipam: expected an object");
		goto out;
	}
	if (ipam && json_object_size(ipam)) {
		const char *it = json_string_value(json_object_get(ipam, "type"));
		if (!it || !*it || strchr(it, '/') || strcmp(it, ".") == 0 ||
		    strcmp(it, "..") == 0 ||
		    iso_strlcpy(cfg->ipam_type, it, sizeof(cfg->ipam_type)) < 0) {
			fail(code, CNI_E_CONFIG, err, "ipam.type",
			     "ipam.type: expected a plugin's name (found on CNI_PATH)");
			goto out;
		}
		cfg->has_ipam = true;
	}
	if (cfg->has_ipam && strcmp(cfg->mode, "slingshot") == 0) {
		fail(code, CNI_E_CONFIG, err, "ipam",
		     "ipam: not with mode slingshot (it makes no interface: chain it after the "
		     "pod's network plugin, whose Result it passes on)");
		goto out;
	}
	json_t *prev = json_object_get(doc, "prevResult");
	if (prev && !json_is_object(prev)) {
		fail(code, CNI_E_DECODE, err, "prevResult", "prevResult: expected a Result object");
		goto out;
	}
	cfg->prev_result = prev;
	json_t *valid = json_object_get(doc, "cni.dev/valid-attachments");
	if (valid) {
		json_t *it;
		size_t i;
		if (!json_is_array(valid)) {
			fail(code, CNI_E_CONFIG, err, "cni.dev/valid-attachments",
			     "cni.dev/valid-attachments: expected an array");
			goto out;
		}
		json_array_foreach (valid, i, it) {
			const char *c = json_string_value(json_object_get(it, "containerID"));
			const char *f = json_string_value(json_object_get(it, "ifname"));
			if (!json_is_object(it) || !c || !f) {
				snprintf(
				    msg, sizeof(msg),
				    "cni.dev/valid-attachments[%zu]: expected {\"containerID\", "
				    "\"ifname\"}",
				    i);
				fail(code, CNI_E_CONFIG, err, "cni.dev/valid-attachments", msg);
				goto out;
			}
		}
		cfg->valid = valid;
	}
	*doc_out = doc;
	return 0;
out:
	json_decref(doc);
	return r < 0 ? r : -EINVAL;
}

int cni_args_parse(const char *text, struct cni_args *out, struct iso_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!text || !*text)
		return 0;
	if (strlen(text) > 4096)
		return iso_error_set(err, ISO_E_INVALID, "CNI_ARGS", "CNI_ARGS: over 4096 bytes");
	/* two passes: IgnoreUnknown may come after the unknown key */
	for (int pass = 0; pass < 2; pass++) {
		const char *p = text;
		while (*p) {
			const char *end = strchr(p, ';'), *eq;
			size_t n = end ? (size_t)(end - p) : strlen(p);
			char kv[4097], *k, *v;
			memcpy(kv, p, n);
			kv[n] = '\0';
			p += n + (end ? 1 : 0);
			if (!n)
				return iso_error_set(err, ISO_E_INVALID, "CNI_ARGS",
				                     "CNI_ARGS: an empty KEY=VALUE pair");
			if (!(eq = strchr(kv, '=')) || eq == kv)
				return iso_error_set(err, ISO_E_INVALID, "CNI_ARGS",
				                     "CNI_ARGS: \"%.64s\" is not KEY=VALUE", kv);
			k = kv;
			kv[eq - kv] = '\0';
			v = kv + (eq - k) + 1;
			if (pass == 0) {
				if (strcmp(k, "IgnoreUnknown") == 0) {
					if (strcmp(v, "1") != 0 && strcmp(v, "true") != 0 &&
					    strcmp(v, "0") != 0 && strcmp(v, "false") != 0)
						return iso_error_set(
						    err, ISO_E_INVALID, "CNI_ARGS.IgnoreUnknown",
						    "CNI_ARGS: IgnoreUnknown: expected "
						    "1, true, 0 or false");
					out->ignore_unknown = *v == '1' || *v == 't';
				}
				continue;
			}
			if (strcmp(k, "IgnoreUnknown") == 0)
				continue;
			if (strcmp(k, "K8S_POD_NAMESPACE") == 0) {
				if (!ns_valid(v))
					return iso_error_set(
					    err, ISO_E_INVALID, "CNI_ARGS.K8S_POD_NAMESPACE",
					    "CNI_ARGS: K8S_POD_NAMESPACE: \"%.64s\" is "
					    "not a namespace name",
					    v);
				iso_strlcpy(out->pod_namespace, v, sizeof(out->pod_namespace));
			} else if (strcmp(k, "K8S_POD_NAME") == 0) {
				if (!*v || iso_strlcpy(out->pod_name, v, sizeof(out->pod_name)) < 0)
					return iso_error_set(
					    err, ISO_E_INVALID, "CNI_ARGS.K8S_POD_NAME",
					    "CNI_ARGS: K8S_POD_NAME: 1-253 characters");
			} else if (strcmp(k, "ISOSTACK_ALLOCATION") == 0) {
				if (strlen(v) != 18 || strncmp(v, "a-", 2) != 0)
					return iso_error_set(
					    err, ISO_E_INVALID, "CNI_ARGS.ISOSTACK_ALLOCATION",
					    "CNI_ARGS: ISOSTACK_ALLOCATION: expected an "
					    "allocation id (a- and 16 hex digits)");
				iso_strlcpy(out->allocation, v, sizeof(out->allocation));
			} else if (strcmp(k, "ISOSTACK_UID") == 0 ||
			           strcmp(k, "ISOSTACK_GID") == 0) {
				bool is_uid = strcmp(k, "ISOSTACK_UID") == 0;
				unsigned long long x = 0;
				const char *q = v;
				/* decimal digits only, no sign, no blanks, no leading 0 */
				for (; *q >= '0' && *q <= '9' && x <= UINT32_MAX; q++)
					x = x * 10 + (unsigned)(*q - '0');
				if (!*v || *q || (v[0] == '0' && v[1]) || x > UINT32_MAX - 1)
					return iso_error_set(
					    err, ISO_E_INVALID,
					    is_uid ? "CNI_ARGS.ISOSTACK_UID"
					           : "CNI_ARGS.ISOSTACK_GID",
					    "CNI_ARGS: %s: expected a decimal %s, 1..4294967294", k,
					    is_uid ? "uid" : "gid");
				if (x == 0)
					return iso_error_set(
					    err, ISO_E_INVALID,
					    is_uid ? "CNI_ARGS.ISOSTACK_UID"
					           : "CNI_ARGS.ISOSTACK_GID",
					    "CNI_ARGS: %s: 0 (root) is refused: a CXI service that "
					    "admits root admits every root process of every tenant",
					    k);
				if (is_uid)
					out->uid = (uint32_t)x;
				else
					out->gid = (uint32_t)x;
			} else if (strcmp(k, "K8S_POD_INFRA_CONTAINER_ID") == 0 ||
			           strcmp(k, "K8S_POD_UID") == 0 || out->ignore_unknown) {
				continue;
			} else {
				return iso_error_set(
				    err, ISO_E_INVALID, "CNI_ARGS",
				    "CNI_ARGS: unknown key %.64s (IgnoreUnknown=1 lets "
				    "it pass)",
				    k);
			}
		}
	}
	return 0;
}

int cni_env_parse(const char *(*get)(const char *), struct cni_env *out, int *code,
                  struct iso_error *err)
{
	static const struct {
		const char *name;
		enum cni_command c;
	} cmds[] = {{"ADD", CNI_ADD},       {"DEL", CNI_DEL}, {"CHECK", CNI_CHECK},
	            {"STATUS", CNI_STATUS}, {"GC", CNI_GC},   {"VERSION", CNI_VERSION}};
	const char *c = get("CNI_COMMAND"), *v;
	bool found = false;

	memset(out, 0, sizeof(*out));
	*code = CNI_E_ENV;
	if (!c || !*c)
		return iso_error_set(err, ISO_E_INVALID, "CNI_COMMAND", "CNI_COMMAND: not set");
	for (size_t i = 0; i < ISO_ARRAY_SIZE(cmds) && !found; i++)
		if (strcmp(c, cmds[i].name) == 0) {
			out->command = cmds[i].c;
			found = true;
		}
	if (!found)
		return iso_error_set(err, ISO_E_INVALID, "CNI_COMMAND",
		                     "CNI_COMMAND: \"%.32s\" is not ADD, DEL, CHECK, STATUS, GC or "
		                     "VERSION",
		                     c);
	if (out->command == CNI_VERSION || out->command == CNI_STATUS || out->command == CNI_GC)
		goto path;
	v = get("CNI_CONTAINERID");
	if (!v || !*v || iso_strlcpy(out->container_id, v, sizeof(out->container_id)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "CNI_CONTAINERID", "CNI_CONTAINERID: %s",
		                     v && *v ? "over 128 characters" : "not set");
	for (const char *p = v; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || (p > v && (*p == '_' || *p == '.' || *p == '-'))))
			return iso_error_set(err, ISO_E_INVALID, "CNI_CONTAINERID",
			                     "CNI_CONTAINERID: letters, digits, '_', '.' and '-', "
			                     "starting with a letter or digit");
	v = get("CNI_IFNAME");
	if (!v || !*v || strlen(v) > 15 || strchr(v, '/') || strchr(v, ':') || strchr(v, ' ') ||
	    strcmp(v, ".") == 0 || strcmp(v, "..") == 0)
		return iso_error_set(err, ISO_E_INVALID, "CNI_IFNAME", "CNI_IFNAME: %s",
		                     v && *v ? "not an interface name (1-15 "
		                               "characters, no '/', ':' or spaces)"
		                             : "not set");
	iso_strlcpy(out->ifname, v, sizeof(out->ifname));
	v = get("CNI_NETNS");
	if ((out->command == CNI_ADD || out->command == CNI_CHECK) && (!v || !*v))
		return iso_error_set(err, ISO_E_INVALID, "CNI_NETNS", "CNI_NETNS: not set");
	if (v && *v && (v[0] != '/' || iso_strlcpy(out->netns, v, sizeof(out->netns)) < 0))
		return iso_error_set(err, ISO_E_INVALID, "CNI_NETNS",
		                     "CNI_NETNS: expected an absolute path under %d bytes",
		                     CNI_PATH_MAX);
	if (cni_args_parse(get("CNI_ARGS"), &out->args, err) < 0)
		return -EINVAL;
path:
	v = get("CNI_PATH");
	if (v && iso_strlcpy(out->path, v, sizeof(out->path)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "CNI_PATH", "CNI_PATH: over 4095 bytes");
	*code = 0;
	return 0;
}

int cni_verb_check(enum cni_command command, const struct cni_config *cfg, int *code,
                   struct iso_error *err)
{
	if ((command == CNI_STATUS || command == CNI_GC) && strcmp(cfg->cni_version, "1.1.0") != 0)
		return fail(code, CNI_E_VERSION, err, "cniVersion",
		            "cniVersion: STATUS and GC need 1.1.0");
	if (command != CNI_CHECK)
		return 0;
	if (strncmp(cfg->cni_version, "0.3.", 4) == 0)
		return fail(code, CNI_E_VERSION, err, "cniVersion",
		            "cniVersion: CHECK needs 0.4.0 or later (it came with 0.4.0)");
	/* SPEC.md, CHECK: the runtime must include the Result of the
	 * immediately preceding ADD; without it there is nothing to hold the
	 * pod against, and a CHECK that passes then would say nothing */
	if (!cfg->prev_result)
		return fail(code, CNI_E_CONFIG, err, "prevResult",
		            "prevResult: CHECK needs the Result of the pod's ADD (the runtime "
		            "must send it)");
	return 0;
}

int cni_tenant_of(const struct cni_config *cfg, const char *ns, const char **tenant)
{
	for (size_t i = 0; i < cfg->n_tenants; i++)
		if (strcmp(cfg->tenants[i].ns, ns) == 0) {
			*tenant = cfg->tenants[i].tenant;
			return 0;
		}
	return -ENOENT;
}

static bool before_1_0(const char *version)
{
	return strncmp(version, "0.", 2) == 0;
}

json_t *cni_add_result(const char *version, const char *ifname, const char *netns,
                       const json_t *agent, const json_t *ipam)
{
	const char *mac = json_string_value(json_object_get(agent, "mac"));
	const char *addr = json_string_value(json_object_get(agent, "address"));
	json_int_t plen = json_integer_value(json_object_get(agent, "prefixlen"));
	char cidr[40];
	json_t *ip, *res;

	snprintf(cidr, sizeof(cidr), "%s/%d", addr ? addr : "", (int)plen);
	ip = json_pack("{s:s, s:i}", "address", cidr, "interface", 0);
	if (before_1_0(version))
		json_object_set_new(ip, "version", json_string("4"));
	/* the IPAM's gateway of the same address, when it gave one */
	json_t *ips = json_object_get(ipam, "ips"), *it;
	size_t i;
	json_array_foreach (ips, i, it) {
		const char *a = json_string_value(json_object_get(it, "address"));
		json_t *gw = json_object_get(it, "gateway");
		if (a && strcmp(a, cidr) == 0 && json_is_string(gw))
			json_object_set(ip, "gateway", gw);
	}
	res = json_pack("{s:s, s:[{s:s, s:s, s:s}], s:[o]}", "cniVersion", version, "interfaces",
	                "name", ifname, "mac", mac ? mac : "", "sandbox", netns, "ips", ip);
	json_t *routes = json_object_get(ipam, "routes");
	if (json_is_array(routes))
		json_object_set(res, "routes", routes);
	json_t *dns = json_object_get(ipam, "dns");
	if (json_is_object(dns))
		json_object_set(res, "dns", dns);
	return res;
}

json_t *cni_passthrough_result(const char *version, const json_t *prev)
{
	json_t *res = prev ? json_deep_copy(prev) : json_pack("{s:[], s:[]}", "interfaces", "ips");

	if (res)
		json_object_set_new(res, "cniVersion", json_string(version));
	return res;
}

int cni_result_ipv4(const json_t *result, char out[24])
{
	json_t *ips = json_object_get(result, "ips"), *it;
	size_t i;

	json_array_foreach (ips, i, it) {
		const char *a = json_string_value(json_object_get(it, "address"));
		unsigned x[4], plen;
		char tail;
		if (a &&
		    sscanf(a, "%u.%u.%u.%u/%u%c", &x[0], &x[1], &x[2], &x[3], &plen, &tail) == 5 &&
		    x[0] < 256 && x[1] < 256 && x[2] < 256 && x[3] < 256 && plen >= 1 &&
		    plen <= 32) {
			snprintf(out, 24, "%u.%u.%u.%u/%u", x[0], x[1], x[2], x[3], plen);
			return 0;
		}
	}
	return -ENOENT;
}

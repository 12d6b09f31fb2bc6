/* main.c: isostack-cni, the CNI plugin (issue 17, docs/cni.md). A thin
 * main over isostack-client, like the Slurm plugin: it reads what the
 * runtime gives (the environment, the network config on stdin), runs the
 * IPAM plugin the config names (host-local), and asks the node agent's
 * socket for the rest; it keeps no state of its own. The answer is a CNI
 * Result on stdout (ADD, VERSION) or a CNI error object with exit 1. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/agent.h"
#include "isostack/util.h"
#include "logic.h"

#define STDIN_MAX (1024 * 1024)

static const char *env_get(const char *name)
{
	return getenv(name);
}

static int emit(json_t *o)
{
	char *t = o ? json_dumps(o, JSON_INDENT(2)) : NULL;

	if (t) {
		fputs(t, stdout);
		fputc('\n', stdout);
	}
	free(t);
	json_decref(o);
	return fflush(stdout) == 0 ? 0 : -EIO;
}

static int error_out(const char *version, int code, const char *msg, const char *details)
{
	emit(cni_error_json(version, code, msg, details));
	return 1;
}

static int read_all(FILE *f, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1);

	if (!b)
		return -ENOMEM;
	for (;;) {
		size_t got = fread(b + n, 1, cap - n, f);
		n += got;
		if (n == cap) {
			if (cap >= STDIN_MAX) {
				free(b);
				return -EFBIG;
			}
			char *q = realloc(b, cap * 2 + 1);
			if (!q) {
				free(b);
				return -ENOMEM;
			}
			b = q;
			cap *= 2;
			continue;
		}
		if (got == 0)
			break;
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

/* Runs the IPAM plugin `type` (found on CNI_PATH) with our environment and
 * CNI_COMMAND=cmd, the config on its stdin. 0 with its Result (NULL when it
 * printed nothing: DEL, CHECK); -errno with its error's msg in *err. */
static int ipam_exec(const char *cni_path, const char *type, const char *cmd, const char *conf,
                     size_t conf_len, json_t **result, struct iso_error *err)
{
	char bin[4096] = "";
	int in[2], out[2];
	pid_t pid;

	*result = NULL;
	for (const char *p = cni_path; p && *p;) {
		const char *c = strchr(p, ':');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		if (n && n + strlen(type) + 2 < sizeof(bin)) {
			snprintf(bin, sizeof(bin), "%.*s/%s", (int)n, p, type);
			if (access(bin, X_OK) == 0)
				break;
		}
		bin[0] = '\0';
		p += n + (c ? 1 : 0);
	}
	if (!bin[0])
		return iso_error_set(err, ISO_E_NOT_FOUND, "ipam.type",
		                     "ipam.type: no plugin %s on CNI_PATH (%s)", type,
		                     cni_path && *cni_path ? cni_path : "not set");
	if (pipe2(in, O_CLOEXEC) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "pipe: %s", strerror(errno));
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		return iso_error_set(err, ISO_E_INTERNAL, "", "pipe: %s", strerror(errno));
	}
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		setenv("CNI_COMMAND", cmd, 1);
		execl(bin, type, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	if (pid < 0) {
		close(in[1]);
		close(out[0]);
		return iso_error_set(err, ISO_E_INTERNAL, "", "fork: %s", strerror(errno));
	}
	signal(SIGPIPE, SIG_IGN);
	for (size_t off = 0; off < conf_len;) {
		ssize_t w = write(in[1], conf + off, conf_len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	close(in[1]);
	FILE *f = fdopen(out[0], "r");
	char *text = NULL;
	size_t len = 0;
	int rr = f ? read_all(f, &text, &len) : -errno;
	if (f)
		fclose(f);
	else
		close(out[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (rr < 0) {
		free(text);
		return iso_error_set(err, ISO_E_INTERNAL, "ipam", "reading %s: %s", type,
		                     strerror(-rr));
	}
	json_error_t je;
	json_t *doc = len ? json_loadb(text, len, 0, &je) : NULL;
	free(text);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		const char *msg = json_string_value(json_object_get(doc, "msg"));
		bool version = json_integer_value(json_object_get(doc, "code")) == CNI_E_VERSION;
		iso_error_set(err, ISO_E_UNAVAILABLE, "ipam", "ipam %s %s failed: %s", type, cmd,
		              msg ? msg : "no error message");
		json_decref(doc);
		return version ? -EPROTO : -EIO;
	}
	if (len && !json_is_object(doc)) {
		json_decref(doc);
		return iso_error_set(err, ISO_E_INTERNAL, "ipam", "ipam %s %s: not a JSON Result",
		                     type, cmd);
	}
	*result = doc;
	return 0;
}

/* The delegate speaks its own versions (Debian 12's host-local: up to
 * 1.0.0): it is asked VERSION first, and given the config with the highest
 * version both speak that is not above ours. *out is the config to hand it
 * (malloc'd). */
static int ipam_conf(const char *cni_path, const char *type, const char *version, const char *conf,
                     size_t conf_len, char **out, size_t *out_len, struct iso_error *err)
{
	static const char *const order[] = {"1.1.0", "1.0.0", "0.4.0", "0.3.1", "0.3.0"};
	json_t *vr = NULL, *doc;
	json_error_t je;
	const char *pick = NULL;
	int r;

	if (!cni_path) {
		/* the first try (no exec): 1.1.0 added verbs, not Result fields, so
		 * a 1.1.0 config goes to the delegate as 1.0.0, which every plugin
		 * of the last years speaks (Debian 12's host-local: 0.1.0..1.0.0) */
		pick = strcmp(version, "1.1.0") == 0 ? "1.0.0" : version;
		goto rewrite;
	}
	if ((r = ipam_exec(cni_path, type, "VERSION", "{}", 2, &vr, err)) < 0)
		return r;
	json_t *sup = json_object_get(vr, "supportedVersions"), *it;
	bool seen_ours = false;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(order) && !pick; i++) {
		size_t k;
		seen_ours = seen_ours || strcmp(order[i], version) == 0;
		if (!seen_ours)
			continue;
		json_array_foreach (sup, k, it) {
			if (json_is_string(it) && strcmp(json_string_value(it), order[i]) == 0)
				pick = order[i];
		}
	}
	json_decref(vr);
	if (!pick)
		return iso_error_set(err, ISO_E_INVALID, "ipam.type",
		                     "ipam.type: %s speaks no CNI version up to %s", type, version);
rewrite:
	if (!(doc = json_loadb(conf, conf_len, 0, &je)))
		return iso_error_set(err, ISO_E_INVALID, "", "the network config is not JSON");
	json_object_set_new(doc, "cniVersion", json_string(pick));
	*out = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (!*out)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	*out_len = strlen(*out);
	return 0;
}

/* The delegate's config: first as ipam_conf guessed it, again after a
 * VERSION exchange when the delegate refused that version. */
struct ipam_in {
	char *conf; /* what the delegate gets (malloc'd) */
	size_t len;
	const char *orig; /* the runtime's config */
	size_t orig_len;
};

static int ipam_run(const struct cni_env *env, const struct cni_config *cfg, const char *cmd,
                    struct ipam_in *ip, json_t **result, struct iso_error *err)
{
	int r = ipam_exec(env->path, cfg->ipam_type, cmd, ip->conf, ip->len, result, err);

	if (r != -EPROTO)
		return r;
	char *again = NULL;
	size_t len = 0;
	if ((r = ipam_conf(env->path, cfg->ipam_type, cfg->cni_version, ip->orig, ip->orig_len,
	                   &again, &len, err)) < 0)
		return r;
	free(ip->conf);
	ip->conf = again;
	ip->len = len;
	return ipam_exec(env->path, cfg->ipam_type, cmd, ip->conf, ip->len, result, err);
}

static json_t *agent_req(const char *verb, const struct cni_config *cfg)
{
	json_t *o = json_pack("{s:s}", "cni", verb);

	if (o && cfg->node[0])
		json_object_set_new(o, "node", json_string(cfg->node));
	return o;
}

static int do_add(const struct cni_config *cfg, const struct cni_env *env, struct ipam_in *ip)
{
	const char *v = cfg->cni_version, *tenant = NULL;
	struct iso_error e = {0};
	json_t *ipam = NULL, *answer = NULL;
	char addr[24] = "", msg[1024];
	int r;

	if (!env->args.pod_namespace[0])
		return error_out(
		    v, CNI_E_ENV,
		    "CNI_ARGS: K8S_POD_NAMESPACE: not set (the pod's namespace names its "
		    "isostack tenant)",
		    "");
	if (cni_tenant_of(cfg, env->args.pod_namespace, &tenant) < 0) {
		snprintf(msg, sizeof(msg),
		         "K8S_POD_NAMESPACE: namespace %s has no isostack tenant in the network "
		         "config's tenants (refused, never attached to a default)",
		         env->args.pod_namespace);
		return error_out(v, CNI_E_UNMAPPED, msg, "");
	}
	bool cxi = strcmp(cfg->mode, "slingshot") == 0;
	if (cxi && (!env->args.uid || !env->args.gid))
		return error_out(v, CNI_E_ENV,
		                 !env->args.uid
		                     ? "CNI_ARGS: ISOSTACK_UID: not set (mode slingshot: the pod's "
		                       "uid, which its CXI service admits)"
		                     : "CNI_ARGS: ISOSTACK_GID: not set (mode slingshot: the pod's "
		                       "gid, which its CXI service admits)",
		                 "");
	if (cfg->has_ipam) {
		if ((r = ipam_run(env, cfg, "ADD", ip, &ipam, &e)) < 0)
			return error_out(v, CNI_E_IPAM, e.message, "");
		if (cni_result_ipv4(ipam, addr) < 0) {
			json_decref(ipam);
			ipam_run(env, cfg, "DEL", ip, &answer, &e);
			json_decref(answer);
			return error_out(v, CNI_E_IPAM, "ipam: its Result has no IPv4 address", "");
		}
	} else if (cfg->prev_result) {
		cni_result_ipv4(cfg->prev_result, addr); /* chained: the earlier IPAM's */
	}
	json_t *req = agent_req("ADD", cfg);
	if (strcmp(cfg->mode, "ethernet") != 0)
		json_object_set_new(req, "mode", json_string(cfg->mode));
	json_object_set_new(req, "container_id", json_string(env->container_id));
	json_object_set_new(req, "ifname", json_string(env->ifname));
	json_object_set_new(req, "netns", json_string(env->netns));
	json_object_set_new(req, "network", json_string(cfg->name));
	json_object_set_new(req, "tenant", json_string(tenant));
	if (env->args.allocation[0] || cfg->allocation[0])
		json_object_set_new(
		    req, "allocation",
		    json_string(env->args.allocation[0] ? env->args.allocation : cfg->allocation));
	if (addr[0] && !cxi)
		json_object_set_new(req, "address", json_string(addr));
	if (cxi) {
		json_object_set_new(req, "uid", json_integer(env->args.uid));
		json_object_set_new(req, "gid", json_integer(env->args.gid));
	}
	json_object_set_new(req, "cpus", json_integer(cfg->cpus));
	json_object_set_new(req, "memory_mib", json_integer((json_int_t)cfg->memory_mib));
	r = iso_agent_cni_request(cfg->agent_socket, req, &answer, &e);
	json_decref(req);
	if (r < 0) {
		int code = cni_code_of(e.code);
		/* the runtime calls DEL after a failed ADD; the address goes back now */
		if (cfg->has_ipam) {
			json_t *x = NULL;
			struct iso_error e2 = {0};
			ipam_run(env, cfg, "DEL", ip, &x, &e2);
			json_decref(x);
		}
		json_decref(ipam);
		snprintf(msg, sizeof(msg), "isostack: pod %s/%s (tenant %s): %s",
		         env->args.pod_namespace, env->args.pod_name[0] ? env->args.pod_name : "-",
		         tenant, e.message);
		return error_out(v, code, msg, "");
	}
	json_t *res = cxi ? cni_passthrough_result(v, cfg->prev_result)
	                  : cni_add_result(v, env->ifname, env->netns, answer,
	                                   ipam ? ipam : cfg->prev_result);
	json_decref(answer);
	json_decref(ipam);
	return emit(res) < 0 ? 1 : 0;
}

static int do_simple(const char *verb, const struct cni_config *cfg, const struct cni_env *env,
                     struct ipam_in *ip)
{
	const char *v = cfg->cni_version;
	struct iso_error e = {0};
	json_t *answer = NULL, *x = NULL;
	json_t *req = agent_req(verb, cfg);
	int r;

	json_object_set_new(req, "container_id", json_string(env->container_id));
	json_object_set_new(req, "ifname", json_string(env->ifname));
	if (env->netns[0])
		json_object_set_new(req, "netns", json_string(env->netns));
	r = iso_agent_cni_request(cfg->agent_socket, req, &answer, &e);
	json_decref(req);
	if (r < 0)
		return error_out(v,
		                 strcmp(verb, "CHECK") == 0 && e.code != ISO_E_UNAVAILABLE
		                     ? CNI_E_CHECK
		                     : cni_code_of(e.code),
		                 e.message, "");
	if (strcmp(verb, "CHECK") == 0 && cfg->prev_result && strcmp(cfg->mode, "slingshot") != 0) {
		/* the Result the runtime kept must still be what the pod has */
		char want[24], have[40];
		if (cni_result_ipv4(cfg->prev_result, want) == 0) {
			snprintf(have, sizeof(have), "%s/%d",
			         json_string_value(json_object_get(answer, "address")),
			         (int)json_integer_value(json_object_get(answer, "prefixlen")));
			if (strcmp(want, have) != 0) {
				char msg[256];
				snprintf(msg, sizeof(msg),
				         "CHECK: prevResult says %s, the pod's %s has %s", want,
				         env->ifname, have);
				json_decref(answer);
				return error_out(v, CNI_E_CHECK, msg, "");
			}
		}
	}
	json_decref(answer);
	if (cfg->has_ipam) {
		/* DEL: the address back; CHECK: host-local still holds it */
		if (ipam_run(env, cfg, verb, ip, &x, &e) < 0)
			return error_out(v, CNI_E_IPAM, e.message, "");
		json_decref(x);
	}
	return 0;
}

static int do_gc(const struct cni_config *cfg)
{
	const char *v = cfg->cni_version;
	struct iso_error e = {0};
	json_t *answer = NULL, *valid = json_array(), *it;
	json_t *req = agent_req("GC", cfg);
	size_t i;
	int r;

	json_array_foreach (cfg->valid, i, it) {
		json_array_append_new(valid, json_pack("{s:O, s:O}", "container_id",
		                                       json_object_get(it, "containerID"), "ifname",
		                                       json_object_get(it, "ifname")));
	}
	json_object_set_new(req, "network", json_string(cfg->name));
	json_object_set_new(req, "valid", valid);
	r = iso_agent_cni_request(cfg->agent_socket, req, &answer, &e);
	json_decref(req);
	json_decref(answer);
	if (r < 0)
		return error_out(v, cni_code_of(e.code), e.message, "");
	return 0;
}

static int do_status(const struct cni_config *cfg)
{
	struct iso_error e = {0};
	json_t *answer = NULL, *req = agent_req("STATUS", cfg);
	if (req && strcmp(cfg->mode, "ethernet") != 0)
		json_object_set_new(req, "mode", json_string(cfg->mode));
	int r = iso_agent_cni_request(cfg->agent_socket, req, &answer, &e);

	json_decref(req);
	json_decref(answer);
	if (r < 0) {
		char msg[sizeof(e.message) + 16];

		snprintf(msg, sizeof(msg), "isostack: %s", e.message);
		return error_out(cfg->cni_version, CNI_E_NOT_AVAILABLE, msg, "");
	}
	return 0;
}

int main(void)
{
	struct cni_env env;
	struct cni_config cfg;
	struct iso_error e = {0};
	json_t *doc = NULL;
	char *conf = NULL;
	size_t len = 0;
	int code = 0, rc;

	if (cni_env_parse(env_get, &env, &code, &e) < 0)
		return error_out(NULL, code, e.message, "");
	if (env.command == CNI_VERSION)
		return emit(cni_version_result()) < 0 ? 1 : 0;
	if (read_all(stdin, &conf, &len) < 0)
		return error_out(NULL, CNI_E_IO, "stdin: cannot read the network config", "");
	if (cni_config_parse(conf, len, &cfg, &doc, &code, &e) < 0) {
		free(conf);
		return error_out(NULL, code, e.message, "");
	}
	if (cni_verb_check(env.command, &cfg, &code, &e) < 0) {
		rc = error_out(cfg.cni_version, code, e.message, "");
		goto out;
	}
	struct ipam_in ip = {.orig = conf, .orig_len = len};
	if (cfg.has_ipam && env.command != CNI_GC && env.command != CNI_STATUS &&
	    ipam_conf(NULL, cfg.ipam_type, cfg.cni_version, conf, len, &ip.conf, &ip.len, &e) < 0) {
		rc = error_out(cfg.cni_version, CNI_E_IPAM, e.message, "");
		goto out;
	}
	switch (env.command) {
	case CNI_ADD:
		rc = do_add(&cfg, &env, &ip);
		break;
	case CNI_DEL:
		rc = do_simple("DEL", &cfg, &env, &ip);
		break;
	case CNI_CHECK:
		rc = do_simple("CHECK", &cfg, &env, &ip);
		break;
	case CNI_GC:
		rc = do_gc(&cfg);
		break;
	default:
		rc = do_status(&cfg);
		break;
	}
	free(ip.conf);
out:
	json_decref(doc);
	free(conf);
	return rc;
}

/* fuzz_agent_config.c: the node agent's --config file (iso_agent_parse_args,
 * docs/agent.md: "keyword value" lines, the keywords being the long flags'
 * names), read once at start from a file an operator wrote. The first byte
 * picks flags given beside --config on the command line (none, --node,
 * --vf-driver ibsim, --heartbeat-s), which override the file's; the rest is
 * the file. --token-file is always given on the command line, pointing at
 * the harness's own token, so that nothing but that file is read whatever
 * the config names. A refusal must name what is wrong. An accepted
 * configuration must be complete and consistent (controller, 1..256
 * distinct valid nodes, a GPU driver, a state dir, a heartbeat of 1..25,
 * --ibsim-net exactly with --vf-driver ibsim, a cgroup root, a sandbox mode,
 * the token read), and written back as a config file it must parse to the
 * same configuration. */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "fuzz.h"
#include "isostack/agent.h"
#include "isostack/gpu.h"

#define TOKEN "isk_fuzz-agent-token"

static void spit(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "we");

	if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
}

/* argv for the selector: --config FILE --token-file TOK, then extras. */
static int make_argv(char **argv, char *conf, char *tok, uint8_t sel)
{
	static char *extra[][2] = {
	    {NULL, NULL},
	    {"--node", "cli-node"},
	    {"--vf-driver", "ibsim"},
	    {"--heartbeat-s", "7"},
	};
	int n = 0;

	argv[n++] = "isostack-agent";
	argv[n++] = "--config";
	argv[n++] = conf;
	argv[n++] = "--token-file";
	argv[n++] = tok;
	if (extra[sel % 4][0]) {
		argv[n++] = extra[sel % 4][0];
		argv[n++] = extra[sel % 4][1];
	}
	argv[n] = NULL;
	return n;
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static void check_accepted(const struct iso_agent_config *c)
{
	FUZZ_ASSERT(c->controller && c->driver && c->state_dir && c->state_dir[0] && c->token &&
	                strcmp(c->token, TOKEN) == 0,
	            "accepted without controller, driver, state dir or token");
	FUZZ_ASSERT(c->n_nodes >= 1 && c->n_nodes <= ISO_AGENT_NODES_MAX, "%zu nodes", c->n_nodes);
	for (size_t i = 0; i < c->n_nodes; i++) {
		FUZZ_ASSERT(iso_name_valid(c->nodes[i]), "node \"%s\"", c->nodes[i]);
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(c->nodes[i], c->nodes[j]), "node %s twice", c->nodes[i]);
	}
	FUZZ_ASSERT(c->n_nodes == 1 || c->driver == &iso_gpu_sim_ops,
	            "%zu nodes with the %s driver", c->n_nodes, c->driver->name);
	FUZZ_ASSERT(c->heartbeat_s >= 1 && c->heartbeat_s <= 25, "heartbeat %d", c->heartbeat_s);
	FUZZ_ASSERT((c->vf.driver == ISO_VF_IBSIM) == (c->vf.ibsim_net != NULL),
	            "vf driver %s with ibsim net %s", iso_vf_driver_name(c->vf.driver),
	            c->vf.ibsim_net ? c->vf.ibsim_net : "(none)");
	FUZZ_ASSERT(c->vf.sysfs_root && c->vf.sysfs_root[0], "no sysfs root");
	FUZZ_ASSERT(c->cgroup_root && c->cgroup_root[0], "no cgroup root");
	FUZZ_ASSERT(c->sandbox == ISO_AGENT_SANDBOX_AUTO || c->sandbox == ISO_AGENT_SANDBOX_REAL ||
	                c->sandbox == ISO_AGENT_SANDBOX_OFF,
	            "sandbox mode %d", (int)c->sandbox);
}

/* The configuration as a file of its own. */
static size_t render(const struct iso_agent_config *c, char *buf, size_t size)
{
	size_t n = 0;

#define PUT(...) (n += (size_t)snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__))
	PUT("# rendered\ncontroller %s\ngpu-driver %s\nstate-dir %s\nheartbeat-s %d\n",
	    c->controller, c->driver->name, c->state_dir, c->heartbeat_s);
	PUT("vf-driver %s\nsysfs-root %s\n", iso_vf_driver_name(c->vf.driver), c->vf.sysfs_root);
	if (c->vf.ibsim_net)
		PUT("ibsim-net %s\n", c->vf.ibsim_net);
	PUT("cgroup-root %s\n", c->cgroup_root);
	if (c->sandbox != ISO_AGENT_SANDBOX_AUTO)
		PUT("sandbox %s\n", c->sandbox == ISO_AGENT_SANDBOX_REAL ? "real" : "off");
	for (size_t i = 0; i < c->n_nodes; i++)
		PUT("node %s\n", c->nodes[i]);
#undef PUT
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_tmpdir("agent_config");
	char conf[160], tok[160], *argv[8];
	struct iso_agent_config cfg, again;
	struct iso_error err = {0};
	char *token = NULL, *token2 = NULL;
	_cleanup_free_ char *text = NULL;
	size_t cap = 96 * 1024, n;
	uint8_t sel;
	int argc, r;

	if (size < 1)
		return 0;
	sel = data[0];
	snprintf(conf, sizeof(conf), "%s/agent.conf", dir);
	snprintf(tok, sizeof(tok), "%s/token", dir);
	spit(tok, TOKEN "\n", strlen(TOKEN) + 1);
	spit(conf, data + 1, size - 1);
	argc = make_argv(argv, conf, tok, sel);
	r = iso_agent_parse_args(argc, argv, &cfg, &token, &err);
	fuzz_check_refusal(r, &err, "iso_agent_parse_args");
	FUZZ_ASSERT(r == 0 || r == -EINVAL, "iso_agent_parse_args returned %d", r);
	if (r < 0) {
		iso_agent_config_clear(&cfg);
		free(token);
		return 0;
	}
	check_accepted(&cfg);
	/* written back, it reads the same */
	if (!(text = malloc(cap)))
		abort();
	n = render(&cfg, text, cap);
	FUZZ_ASSERT(n < cap, "rendered %zu bytes", n);
	spit(conf, text, n);
	argc = make_argv(argv, conf, tok, sel);
	r = iso_agent_parse_args(argc, argv, &again, &token2, &err);
	FUZZ_ASSERT(r == 0, "the rendered configuration is refused: %s\n%s", err.message, text);
	FUZZ_ASSERT(same_str(cfg.controller, again.controller) && cfg.driver == again.driver &&
	                same_str(cfg.state_dir, again.state_dir) &&
	                cfg.heartbeat_s == again.heartbeat_s && cfg.vf.driver == again.vf.driver &&
	                same_str(cfg.vf.sysfs_root, again.vf.sysfs_root) &&
	                same_str(cfg.vf.ibsim_net, again.vf.ibsim_net) &&
	                same_str(cfg.cgroup_root, again.cgroup_root) &&
	                cfg.sandbox == again.sandbox && cfg.n_nodes == again.n_nodes,
	            "the rendered configuration reads otherwise:\n%s", text);
	for (size_t i = 0; i < cfg.n_nodes; i++)
		FUZZ_ASSERT(strcmp(cfg.nodes[i], again.nodes[i]) == 0, "node %zu: %s, then %s", i,
		            cfg.nodes[i], again.nodes[i]);
	iso_agent_config_clear(&again);
	iso_agent_config_clear(&cfg);
	free(token);
	free(token2);
	return 0;
}

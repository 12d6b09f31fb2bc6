/* daemon.c: the node agent's loop and its command line, as library code so
 * that src/isostack-agent/main.c stays a thin main. Per node, one thread and
 * one connection: long-poll the node's desired state (after = the generation
 * held, wait_s = the heartbeat period, at most 25 s), reconcile, PUT the
 * status. Every answer, changed or not, is a tick: the node is reconciled
 * again from the devices and the status doubles as the heartbeat, so it is
 * sent at least once per heartbeat period. When the controller cannot be
 * reached the loop backs off (0.5 s doubling to 10 s) and retries. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "isostack/agent.h"
#include "isostack/client.h"
#include "internal.h"

#define LONG_POLL_MAX_S 25
#define BACKOFF_MIN_MS  500
#define BACKOFF_MAX_MS  10000
#define TOKEN_MAX       512

const char iso_agent_usage[] =
    "usage: isostack-agent --controller URL --token-file FILE --node NAME [--node NAME ...]\n"
    "                      --gpu-driver sim|nvml --state-dir DIR [--heartbeat-s N]\n"
    "                      [--vf-driver mlx5|ibsim|sim|none] [--sysfs-root DIR]\n"
    "                      [--ibsim-net FILE] [--sandbox real|off]\n"
    "                      [--cgroup-root DIR] [--rdma-hca-handles N]\n"
    "                      [--rdma-hca-objects N] [--cxi-library PATH|none]\n"
    "                      [--cxi-device cxiN] [--config FILE]\n"
    "       isostack-agent --controller URL --token-file FILE --node SM_NODE\n"
    "                      --state-dir DIR --sm-partitions FILE --sm-pid-file FILE\n"
    "                      [--sm-log FILE] [--sm-standby FILE ...]\n"
    "       isostack-agent exec --state-dir DIR --allocation A --member M\n"
    "                      [--uid U --gid G] -- CMD...\n"
    "  --controller URL   isostackd's base URL (http[s]://host:port); several\n"
    "                     separated by commas: the one that leads is found\n"
    "  --token-file FILE  a node-agent token of the node (or cluster-admin, for sim hosts)\n"
    "  --node NAME        a node to serve (repeat for several; sim driver only)\n"
    "  --gpu-driver NAME  sim or nvml\n"
    "  --state-dir DIR    the agent's state: DIR/<node>/ per node (term; sim GPUs)\n"
    "  --heartbeat-s N    status at least every N seconds, 1..25 (default 3)\n"
    "  --vf-driver NAME   how VFs get their GUIDs: mlx5 (sysfs), ibsim (read the net\n"
    "                     file), sim (plain files in the state dir; the default with\n"
    "                     --gpu-driver sim), none (the default otherwise: no VFs)\n"
    "  --sysfs-root DIR   where sysfs is found (default /; tests use a fake tree)\n"
    "  --ibsim-net FILE   the ibsim net file (required with --vf-driver ibsim)\n"
    "  --sandbox MODE     real: a sandbox per member (cgroups, namespaces, seccomp);\n"
    "                     off: none. Default: real as root with one --node and the\n"
    "                     cgroup root found, else off (the log says why)\n"
    "  --cgroup-root DIR  where the cgroup controllers are (default /sys/fs/cgroup)\n"
    "  --rdma-hca-handles N  rdma.max hca_handle of a member's VF RDMA device,\n"
    "                     1..2147483647 or max (default 16)\n"
    "  --rdma-hca-objects N  rdma.max hca_object (QPs, CQs, MRs, ...), 1..2147483647\n"
    "                     or max (default 8192)\n"
    "  --cxi-library PATH|none  libcxi for a Slingshot node's CXI services; default\n"
    "                     libcxi.so.1 (or $ISOSTACK_CXI_LIBRARY), loaded when the\n"
    "                     desired document lists a member with a VNI; none: no\n"
    "                     CXI driver (such members are not ready)\n"
    "  --cxi-device cxiN  the NIC (default cxi0)\n"
    "  --cni-sm-wait-s N  how long an InfiniBand pod's CNI ADD waits for the subnet\n"
    "                     manager to confirm its P_Key, 1..300 (default 10)\n"
    "  --sm-partitions FILE  serve the subnet manager instead (fabric.partitions_writer\n"
    "                     agent): write OpenSM's partitions.conf there, fenced by the\n"
    "                     leader's term; --node is fabric.sm_node, no --gpu-driver\n"
    "  --sm-pid-file FILE OpenSM's pid file, for SIGHUP (required with --sm-partitions)\n"
    "  --sm-log FILE      OpenSM's log (-f), scanned for refused or degraded files\n"
    "  --sm-standby FILE  a standby SM's partitions.conf, written the same (repeat, at\n"
    "                     most 8)\n"
    "  --config FILE      \"keyword value\" lines, keywords the long flags' names; the\n"
    "                     command line overrides them (--node replaces the file's)\n"
    "  --help             this text\n"
    "See docs/agent.md.\n";

enum { O_CONTROLLER = 256, O_TOKEN_FILE, O_NODE, O_DRIVER, O_STATE_DIR, O_HEARTBEAT, O_HELP };
enum { O_VF_DRIVER = 300, O_SYSFS_ROOT, O_IBSIM_NET, O_CONFIG };
enum { O_SANDBOX = 400, O_CGROUP_ROOT, O_RDMA_HANDLES, O_RDMA_OBJECTS };
enum { O_SM_PARTITIONS = 500, O_SM_PID, O_SM_LOG, O_SM_STANDBY };
enum { O_CXI_LIBRARY = 600, O_CXI_DEVICE };
enum { O_CNI_SM_WAIT = 700 };

static const struct option longopts[] = {
    {"controller", required_argument, NULL, O_CONTROLLER},
    {"token-file", required_argument, NULL, O_TOKEN_FILE},
    {"node", required_argument, NULL, O_NODE},
    {"gpu-driver", required_argument, NULL, O_DRIVER},
    {"state-dir", required_argument, NULL, O_STATE_DIR},
    {"heartbeat-s", required_argument, NULL, O_HEARTBEAT},
    {"help", no_argument, NULL, O_HELP},
    {"vf-driver", required_argument, NULL, O_VF_DRIVER},
    {"sysfs-root", required_argument, NULL, O_SYSFS_ROOT},
    {"ibsim-net", required_argument, NULL, O_IBSIM_NET},
    {"config", required_argument, NULL, O_CONFIG},
    {"sandbox", required_argument, NULL, O_SANDBOX},
    {"cgroup-root", required_argument, NULL, O_CGROUP_ROOT},
    {"rdma-hca-handles", required_argument, NULL, O_RDMA_HANDLES},
    {"rdma-hca-objects", required_argument, NULL, O_RDMA_OBJECTS},
    {"sm-partitions", required_argument, NULL, O_SM_PARTITIONS},
    {"sm-pid-file", required_argument, NULL, O_SM_PID},
    {"sm-log", required_argument, NULL, O_SM_LOG},
    {"sm-standby", required_argument, NULL, O_SM_STANDBY},
    {"cxi-library", required_argument, NULL, O_CXI_LIBRARY},
    {"cxi-device", required_argument, NULL, O_CXI_DEVICE},
    {"cni-sm-wait-s", required_argument, NULL, O_CNI_SM_WAIT},
    {NULL, 0, NULL, 0},
};

/* getopt_long takes any unique prefix; a prefix that works today would mean
 * another flag tomorrow, so flags are spelled out. */
static int spelled_out(char **argv, int idx, struct iso_error *err)
{
	const char *name = longopts[idx].name, *text = argv[optind - 1];
	size_t len;

	if (strncmp(text, "--", 2) != 0 || (optarg && optarg == text))
		text = argv[optind - 2];
	len = strcspn(text + 2, "=");
	if (len == strlen(name) && strncmp(text + 2, name, len) == 0)
		return 0;
	return iso_error_set(err, ISO_E_INVALID, name, "option '%.*s' is abbreviated: write '--%s'",
	                     (int)(len + 2), text, name);
}

static int read_token(const char *path, char **out, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "r");
	char buf[TOKEN_MAX + 2];
	size_t n;

	if (!f)
		return iso_error_set(err, ISO_E_INVALID, "--token-file", "--token-file %s: %s",
		                     path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	if (n == 0 || n > TOKEN_MAX || strlen(buf) != n)
		return iso_error_set(err, ISO_E_INVALID, "--token-file",
		                     "--token-file %s: expected one token of 1..%d characters",
		                     path, TOKEN_MAX);
	for (size_t i = 0; i < n; i++)
		if (buf[i] <= ' ' || buf[i] > '~')
			return iso_error_set(err, ISO_E_INVALID, "--token-file",
			                     "--token-file %s: the token holds a character that is "
			                     "not printable ASCII",
			                     path);
	if (!(*out = strdup(buf)))
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	return 0;
}

struct parse_state {
	struct iso_agent_config *cfg;
	const char *token_file;
	bool vf_given;
	bool in_file;    /* applying --config's lines */
	bool file_nodes; /* cfg->nodes came from the file */
};

/* One option, from the command line or a --config line: 0, 1 for --help, or
 * -EINVAL naming the flag. */
static int apply_option(struct parse_state *ps, int ch, const char *val, struct iso_error *err)
{
	char *end;
	long v;

	switch (ch) {
	case O_CONTROLLER:
		ps->cfg->controller = val;
		break;
	case O_TOKEN_FILE:
		ps->token_file = val;
		break;
	case O_NODE:
		if (ps->file_nodes && !ps->in_file) {
			/* --node on the command line replaces the file's nodes */
			ps->cfg->n_nodes = 0;
			ps->file_nodes = false;
		}
		ps->file_nodes |= ps->in_file;
		if (!iso_name_valid(val))
			return iso_error_set(err, ISO_E_INVALID, "--node",
			                     "--node: \"%s\" is not a node name", val);
		for (size_t i = 0; i < ps->cfg->n_nodes; i++)
			if (strcmp(ps->cfg->nodes[i], val) == 0)
				return iso_error_set(err, ISO_E_INVALID, "--node",
				                     "--node %s given twice", val);
		if (ps->cfg->n_nodes == ISO_AGENT_NODES_MAX)
			return iso_error_set(err, ISO_E_INVALID, "--node",
			                     "--node: at most %d nodes", ISO_AGENT_NODES_MAX);
		ps->cfg->nodes[ps->cfg->n_nodes++] = val;
		break;
	case O_DRIVER:
		if (!(ps->cfg->driver = iso_gpu_driver_find(val)))
			return iso_error_set(err, ISO_E_INVALID, "--gpu-driver",
			                     "--gpu-driver: \"%s\" is not sim or nvml", val);
		break;
	case O_STATE_DIR:
		if (!*val)
			return iso_error_set(err, ISO_E_INVALID, "--state-dir",
			                     "--state-dir: empty path");
		ps->cfg->state_dir = val;
		break;
	case O_HEARTBEAT:
		errno = 0;
		v = strtol(val, &end, 10);
		if (errno || end == val || *end || v < 1 || v > LONG_POLL_MAX_S)
			return iso_error_set(err, ISO_E_INVALID, "--heartbeat-s",
			                     "--heartbeat-s: expected an integer 1..%d, got "
			                     "\"%s\"",
			                     LONG_POLL_MAX_S, val);
		ps->cfg->heartbeat_s = (int)v;
		break;
	case O_CNI_SM_WAIT:
		errno = 0;
		v = strtol(val, &end, 10);
		if (errno || end == val || *end || v < 1 || v > AGENT_CNI_SM_WAIT_MAX)
			return iso_error_set(err, ISO_E_INVALID, "--cni-sm-wait-s",
			                     "--cni-sm-wait-s: expected an integer 1..%d, got "
			                     "\"%s\"",
			                     AGENT_CNI_SM_WAIT_MAX, val);
		ps->cfg->cni_sm_wait_s = (int)v;
		break;
	case O_HELP:
		return 1;
	case O_VF_DRIVER:
		ps->vf_given = true;
		if (iso_vf_driver_parse(val, &ps->cfg->vf.driver) < 0)
			return iso_error_set(err, ISO_E_INVALID, "--vf-driver",
			                     "--vf-driver: \"%s\" is not mlx5, ibsim, sim or none",
			                     val);
		break;
	case O_SYSFS_ROOT:
		if (!*val)
			return iso_error_set(err, ISO_E_INVALID, "--sysfs-root",
			                     "--sysfs-root: empty path");
		ps->cfg->vf.sysfs_root = val;
		break;
	case O_IBSIM_NET:
		if (!*val)
			return iso_error_set(err, ISO_E_INVALID, "--ibsim-net",
			                     "--ibsim-net: empty path");
		ps->cfg->vf.ibsim_net = val;
		break;
	case O_SANDBOX:
		if (strcmp(val, "real") == 0)
			ps->cfg->sandbox = ISO_AGENT_SANDBOX_REAL;
		else if (strcmp(val, "off") == 0)
			ps->cfg->sandbox = ISO_AGENT_SANDBOX_OFF;
		else
			return iso_error_set(err, ISO_E_INVALID, "--sandbox",
			                     "--sandbox: \"%s\" is not real or off", val);
		break;
	case O_CGROUP_ROOT:
		if (!*val)
			return iso_error_set(err, ISO_E_INVALID, "--cgroup-root",
			                     "--cgroup-root: empty path");
		ps->cfg->cgroup_root = val;
		break;
	case O_RDMA_HANDLES:
	case O_RDMA_OBJECTS: {
		const char *flag =
		    ch == O_RDMA_HANDLES ? "--rdma-hca-handles" : "--rdma-hca-objects";
		int64_t *dst =
		    ch == O_RDMA_HANDLES ? &ps->cfg->rdma_hca_handles : &ps->cfg->rdma_hca_objects;
		if (strcmp(val, "max") == 0) {
			*dst = -1;
			break;
		}
		errno = 0;
		v = strtol(val, &end, 10);
		if (errno || end == val || *end || v < 1 || v > ISO_CGROUP_RDMA_LIMIT_MAX)
			return iso_error_set(err, ISO_E_INVALID, flag,
			                     "%s: expected an integer 1..%d or max, got \"%s\"",
			                     flag, ISO_CGROUP_RDMA_LIMIT_MAX, val);
		*dst = v;
		break;
	}
	case O_SM_PARTITIONS:
	case O_SM_PID:
	case O_SM_LOG: {
		const char *flag = ch == O_SM_PARTITIONS ? "--sm-partitions"
		                   : ch == O_SM_PID      ? "--sm-pid-file"
		                                         : "--sm-log";
		if (!*val)
			return iso_error_set(err, ISO_E_INVALID, flag, "%s: empty path", flag);
		*(ch == O_SM_PARTITIONS ? &ps->cfg->sm.partitions
		  : ch == O_SM_PID      ? &ps->cfg->sm.pid_file
		                        : &ps->cfg->sm.log_file) = val;
		break;
	}
	case O_SM_STANDBY:
		if (!*val)
			return iso_error_set(err, ISO_E_INVALID, "--sm-standby",
			                     "--sm-standby: empty path");
		if (ps->cfg->sm.n_standby == ISO_AGENT_SM_STANDBY_MAX)
			return iso_error_set(err, ISO_E_INVALID, "--sm-standby",
			                     "--sm-standby: at most %d standby SMs",
			                     ISO_AGENT_SM_STANDBY_MAX);
		ps->cfg->sm.standby[ps->cfg->sm.n_standby++] = val;
		break;
	case O_CXI_LIBRARY:
		if (!*val)
			return iso_error_set(err, ISO_E_INVALID, "--cxi-library",
			                     "--cxi-library: empty path (none: no CXI driver)");
		ps->cfg->cxi_library = val;
		break;
	case O_CXI_DEVICE: {
		/* cxiN, N decimal without a sign or leading zero */
		const char *d = val + 3;
		if (strncmp(val, "cxi", 3) != 0 || !*d || (d[0] == '0' && d[1]) ||
		    strspn(d, "0123456789") != strlen(d) || strlen(d) > 3 || atoi(d) > 255)
			return iso_error_set(err, ISO_E_INVALID, "--cxi-device",
			                     "--cxi-device: \"%s\" is not cxi0..cxi255", val);
		ps->cfg->cxi_device = (unsigned)atoi(d);
		ps->cfg->cxi_device_given = true;
		break;
	}
	default:
		return iso_error_set(err, ISO_E_INVALID, "", "unknown option");
	}
	return 0;
}

/* --sm-*: the SM host's agent serves OpenSM's files and nothing else. */
static int check_sm(const struct iso_agent_config *cfg, bool vf_given, struct iso_error *err)
{
	const struct iso_agent_sm *sm = &cfg->sm;

	if (!sm->partitions) {
		if (sm->pid_file || sm->log_file || sm->n_standby)
			return iso_error_set(err, ISO_E_INVALID,
			                     sm->pid_file   ? "--sm-pid-file"
			                     : sm->log_file ? "--sm-log"
			                                    : "--sm-standby",
			                     "%s needs --sm-partitions",
			                     sm->pid_file   ? "--sm-pid-file"
			                     : sm->log_file ? "--sm-log"
			                                    : "--sm-standby");
		return 0;
	}
	if (!sm->pid_file)
		return iso_error_set(err, ISO_E_INVALID, "--sm-pid-file",
		                     "--sm-pid-file is required with --sm-partitions (OpenSM "
		                     "rereads the file on SIGHUP)");
	if (cfg->n_nodes != 1)
		return iso_error_set(err, ISO_E_INVALID, "--node",
		                     "--node: one node with --sm-partitions (fabric.sm_node)");
	if (cfg->cxi_library || cfg->cxi_device_given)
		return iso_error_set(err, ISO_E_INVALID,
		                     cfg->cxi_library ? "--cxi-library" : "--cxi-device",
		                     "%s: not with --sm-partitions (this agent serves the SM only)",
		                     cfg->cxi_library ? "--cxi-library" : "--cxi-device");
	if (cfg->driver || vf_given || cfg->sandbox != ISO_AGENT_SANDBOX_AUTO)
		return iso_error_set(err, ISO_E_INVALID,
		                     cfg->driver ? "--gpu-driver"
		                     : vf_given  ? "--vf-driver"
		                                 : "--sandbox",
		                     "%s: not with --sm-partitions (this agent serves the SM "
		                     "only; run another for the node's GPUs)",
		                     cfg->driver ? "--gpu-driver"
		                     : vf_given  ? "--vf-driver"
		                                 : "--sandbox");
	for (size_t i = 0; i < sm->n_standby; i++)
		if (strcmp(sm->standby[i], sm->partitions) == 0)
			return iso_error_set(err, ISO_E_INVALID, "--sm-standby",
			                     "--sm-standby %s is --sm-partitions", sm->standby[i]);
	return 0;
}

/* The --config file: one "keyword value" a line, the keywords being the long
 * flags' names, '#' starting a comment line (docs/agent.md). Its lines go
 * through apply_option before the command line's, so a flag overrides the
 * file. Values point into cfg->config_text, which the caller frees. */
#define CONFIG_MAX (64 * 1024)

static int config_fail(const char *path, int line, const char *field, struct iso_error *err,
                       const char *msg)
{
	return iso_error_set(err, ISO_E_INVALID, field, "%s:%d: %s", path, line, msg);
}

static int apply_config(struct parse_state *ps, const char *path, struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char *text, *line, *next;
	size_t n;
	int lineno = 0;

	struct stat st;

	if (!f)
		return iso_error_set(err, ISO_E_INVALID, "--config", "--config %s: %s", path,
		                     strerror(errno));
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode))
		return iso_error_set(err, ISO_E_INVALID, "--config",
		                     "--config %s: not a regular file", path);
	text = calloc(1, CONFIG_MAX + 1);
	if (!text)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	ps->cfg->config_text = text;
	n = fread(text, 1, CONFIG_MAX + 1, f);
	if (n > CONFIG_MAX)
		return iso_error_set(err, ISO_E_INVALID, "--config", "--config %s: over %d bytes",
		                     path, CONFIG_MAX);
	if (strlen(text) != n)
		return iso_error_set(err, ISO_E_INVALID, "--config",
		                     "--config %s: holds a NUL byte", path);
	ps->in_file = true;
	for (line = text; line; line = next) {
		char *key, *val, *p;
		const struct option *o;
		char msg[ISO_ERR_MSG_MAX];
		int r;

		lineno++;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		for (p = line; *p; p++)
			if ((unsigned char)*p < 0x20 && *p != '\t' && *p != '\r')
				return config_fail(path, lineno, "--config", err,
				                   "a control character (printable text only)");
		key = line + strspn(line, " \t");
		key[strcspn(key, "\r")] = '\0';
		if (!*key || *key == '#')
			continue;
		val = key + strcspn(key, " \t");
		if (*val)
			*val++ = '\0';
		val += strspn(val, " \t");
		for (p = val + strlen(val); p > val && (p[-1] == ' ' || p[-1] == '\t'); p--)
			p[-1] = '\0';
		for (o = longopts; o->name; o++)
			if (strcmp(o->name, key) == 0)
				break;
		if (!o->name || o->val == O_HELP || o->val == O_CONFIG) {
			snprintf(msg, sizeof(msg),
			         "unknown keyword '%.64s' (one of the long flags' "
			         "names, without --)",
			         key);
			return config_fail(path, lineno, key, err, msg);
		}
		if (!*val) {
			snprintf(msg, sizeof(msg), "%s needs a value", key);
			return config_fail(path, lineno, key, err, msg);
		}
		r = apply_option(ps, o->val, val, err);
		if (r < 0) {
			iso_strlcpy(msg, err->message, sizeof(msg));
			return config_fail(path, lineno, key, err, msg);
		}
	}
	ps->in_file = false;
	return 0;
}

void iso_agent_config_clear(struct iso_agent_config *cfg)
{
	free(cfg->config_text);
	cfg->config_text = NULL;
}

/* --config's value, looked for before the other flags are applied (its
 * lines come first whatever its place on the command line). */
static const char *config_path(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			return argv[i + 1];
		if (strncmp(argv[i], "--config=", 9) == 0)
			return argv[i] + 9;
	}
	return NULL;
}

int iso_agent_parse_args(int argc, char **argv, struct iso_agent_config *cfg, char **token_buf,
                         struct iso_error *err)
{
	struct parse_state ps = {.cfg = cfg};
	const char *config;
	int ch, idx, r;

	memset(cfg, 0, sizeof(*cfg));
	*token_buf = NULL;
	cfg->heartbeat_s = 3;
	config = config_path(argc, argv);
	if (config && (r = apply_config(&ps, config, err)) < 0)
		return r;
	opterr = 0;
	optind = 1;
	while (idx = -1, (ch = getopt_long(argc, argv, ":", longopts, &idx)) != -1) {
		if (ch != '?' && ch != ':' && idx >= 0 && (r = spelled_out(argv, idx, err)) < 0)
			return r;
		if (ch == ':')
			return iso_error_set(err, ISO_E_INVALID, argv[optind - 1],
			                     "option '%s' needs a value", argv[optind - 1]);
		if (ch == '?')
			return iso_error_set(err, ISO_E_INVALID, argv[optind - 1],
			                     "unknown option '%s'", argv[optind - 1]);
		if (ch == O_CONFIG)
			continue; /* applied first */
		r = apply_option(&ps, ch, optarg, err);
		if (r != 0)
			return r;
	}
	if (optind < argc)
		return iso_error_set(err, ISO_E_INVALID, argv[optind], "unexpected argument '%s'",
		                     argv[optind]);
	if (!cfg->controller)
		return iso_error_set(err, ISO_E_INVALID, "--controller",
		                     "--controller is required");
	if (!ps.token_file)
		return iso_error_set(err, ISO_E_INVALID, "--token-file",
		                     "--token-file is required");
	if (cfg->n_nodes == 0)
		return iso_error_set(err, ISO_E_INVALID, "--node", "--node is required");
	if ((r = check_sm(cfg, ps.vf_given, err)) < 0)
		return r;
	if (!cfg->driver && !cfg->sm.partitions)
		return iso_error_set(err, ISO_E_INVALID, "--gpu-driver",
		                     "--gpu-driver is required");
	if (!cfg->state_dir)
		return iso_error_set(err, ISO_E_INVALID, "--state-dir", "--state-dir is required");
	if (cfg->n_nodes > 1 && cfg->driver != &iso_gpu_sim_ops)
		return iso_error_set(err, ISO_E_INVALID, "--node",
		                     "--node: several nodes need --gpu-driver sim (one host is one "
		                     "node)");
	if (cfg->vf.driver == ISO_VF_IBSIM && !cfg->vf.ibsim_net)
		return iso_error_set(err, ISO_E_INVALID, "--ibsim-net",
		                     "--ibsim-net is required with --vf-driver ibsim");
	if (cfg->vf.driver != ISO_VF_IBSIM && cfg->vf.ibsim_net)
		return iso_error_set(err, ISO_E_INVALID, "--ibsim-net",
		                     "--ibsim-net needs --vf-driver ibsim");
	if (cfg->n_nodes > 1 &&
	    ((cfg->cxi_library && strcmp(cfg->cxi_library, "none") != 0) || cfg->cxi_device_given))
		return iso_error_set(
		    err, ISO_E_INVALID, cfg->cxi_device_given ? "--cxi-device" : "--cxi-library",
		    "%s: CXI services need one --node per agent (one host, one NIC)",
		    cfg->cxi_device_given ? "--cxi-device" : "--cxi-library");
	if (cfg->vf.driver == ISO_VF_MLX5 && cfg->n_nodes > 1)
		return iso_error_set(err, ISO_E_INVALID, "--vf-driver",
		                     "--vf-driver mlx5: one host is one node");
	if (!cfg->vf.sysfs_root)
		cfg->vf.sysfs_root = "/";
	if (!cfg->cgroup_root)
		cfg->cgroup_root = "/sys/fs/cgroup";
	cfg->dev_root = "/dev";
	cfg->proc_root = "/proc";
	if (!ps.vf_given && cfg->driver && cfg->driver == &iso_gpu_sim_ops)
		cfg->vf.driver = ISO_VF_SIM; /* a sim host has sim VFs */
	if (read_token(ps.token_file, token_buf, err) < 0)
		return -EINVAL;
	cfg->token = *token_buf;
	return 0;
}

/* ---- one node ---- */

struct node_loop {
	const struct iso_agent_config *cfg;
	const char *node;
	char dir[PATH_MAX];
	struct iso_gpu *gpu;
	struct iso_client *client;
	struct agent_sandboxes *sandboxes;
	pthread_t thread;
	bool started;
};

static void sleep_ms(const struct iso_agent_config *cfg, long ms)
{
	while (ms > 0 && !atomic_load(cfg->stop)) {
		long step = ms < 100 ? ms : 100;
		struct timespec ts = {0, step * 1000000L};

		nanosleep(&ts, NULL);
		ms -= step;
	}
}

/* One call on this node's resource, /v1/nodes/NODE/<what>: 0 with the
 * answer's body in *body (when asked for) on a 2xx, else -errno, logged as
 * `event`. */
static int node_call(struct node_loop *n, const char *method, const char *what, json_t *send,
                     const char *event, json_t **body)
{
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *esc = iso_client_escape(n->node);
	struct iso_error e = {0};
	char path[256];
	int r;

	if (!esc)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/v1/nodes/%s/%s", esc, what);
	if ((r = iso_client_request(n->client, method, path, send, &resp, &e)) < 0 ||
	    (r = iso_response_error(&resp, &e)) < 0) {
		iso_log(ISO_LOG_WARN, event, "node=%s status=%ld field=%s msg=\"%s\"", n->node,
		        resp.status, e.field, e.message);
		return r;
	}
	if (body)
		*body = json_incref(resp.body);
	return 0;
}

/* One long poll. 0 and *doc when answered 200; -errno otherwise, logged.
 * With `heartbeat`, the request renews the node's lease (docs/agents.md). */
static int poll_desired(struct node_loop *n, uint64_t after, bool heartbeat, json_t **doc)
{
	char what[96];

	snprintf(what, sizeof(what), "desired?after=%" PRIu64 "&wait_s=%d%s", after,
	         n->cfg->heartbeat_s, heartbeat ? "&heartbeat=1" : "");
	return node_call(n, "GET", what, NULL, "agent.poll_failed", doc);
}

static int put_status(struct node_loop *n, json_t *status)
{
	return node_call(n, "PUT", "status", status, "agent.status_failed", NULL);
}

/* XIDs into the outbox first (durably), then, when the controller answers,
 * the outbox to it (src/agent/faults.c). `d`: the desired state that says
 * who owns each instance (the last one when the controller is away). */
static void faults_tick(struct node_loop *n, const struct iso_agent_desired *d, bool send)
{
	struct iso_error e = {0};
	unsigned got = 0, sent = 0;

	if (n->gpu && iso_agent_xids_drain(n->gpu, n->dir, d, &got, &e) < 0)
		iso_log(ISO_LOG_ERR, "agent.xid_failed", "node=%s field=%s msg=\"%s\"", n->node,
		        e.field, e.message);
	if (send && iso_agent_faults_flush(n->client, n->node, n->dir, &sent, &e) < 0 &&
	    e.code != ISO_E_UNAVAILABLE)
		iso_log(ISO_LOG_ERR, "agent.fault_failed", "node=%s field=%s msg=\"%s\"", n->node,
		        e.field, e.message);
}

static void *node_main(void *arg)
{
	struct node_loop *n = arg;
	struct iso_agent_desired last = {0}; /* the owners of the XIDs' instances */
	uint64_t generation = 0;
	long backoff = BACKOFF_MIN_MS;
	bool reached = false;
	/* The status last answered 204 since the controller was reached: an
	 * unchanged status is not sent again, the long poll being the heartbeat
	 * (one request per period). Lost with the process, it only costs a PUT. */
	json_t *sent = NULL;

	iso_log(ISO_LOG_INFO, "agent.node_start", "node=%s driver=%s vf_driver=%s dir=%s", n->node,
	        n->cfg->driver->name, iso_vf_driver_name(n->cfg->vf.driver), n->dir);
	while (!atomic_load(n->cfg->stop)) {
		struct iso_agent_desired d;
		struct iso_agent_tick tick;
		struct iso_error e = {0};
		json_t *doc = NULL, *status = NULL;
		int r = poll_desired(n, generation, sent != NULL, &doc);
		uint64_t t_doc = iso_mono_ns(), t_gpu = t_doc, t_vf = t_doc, t_sb = t_doc;

		if (r < 0) {
			if (atomic_load(n->cfg->stop))
				break;
			reached = false;
			json_decref(sent); /* a status goes again once it is back */
			sent = NULL;
			faults_tick(n, &last, false); /* kept until the controller is back */
			sleep_ms(n->cfg, backoff);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		if (!reached)
			iso_log(ISO_LOG_INFO, "agent.connected", "node=%s controller=%s", n->node,
			        n->cfg->controller);
		reached = true;
		backoff = BACKOFF_MIN_MS;
		r = iso_agent_desired_parse(doc, n->node, &d, &e);
		json_decref(doc);
		if (r < 0) {
			iso_log(ISO_LOG_ERR, "agent.desired_refused", "node=%s field=%s msg=\"%s\"",
			        n->node, e.field, e.message);
			sleep_ms(n->cfg, (long)n->cfg->heartbeat_s * 1000);
			continue;
		}
		/* A new sim host is made from this first document (node_open). */
		if (!n->gpu && (r = iso_agent_sim_open(n->dir, &d, &n->gpu, &e)) < 0) {
			iso_log(ISO_LOG_ERR, "agent.gpu_open_failed", "node=%s field=%s msg=\"%s\"",
			        n->node, e.field, e.message);
			iso_agent_desired_clear(&d);
			sleep_ms(n->cfg, (long)n->cfg->heartbeat_s * 1000);
			continue;
		}
		if (d.generation != generation)
			iso_log(ISO_LOG_INFO, "agent.desired",
			        "node=%s generation=%" PRIu64 " term=%" PRIu64 " instances=%zu",
			        n->node, d.generation, d.term, d.n_wants);
		r = iso_agent_reconcile(n->gpu, n->dir, &d, &status, &tick, &e);
		t_gpu = iso_mono_ns();
		if (r < 0)
			iso_log(ISO_LOG_ERR, "agent.reconcile_failed",
			        "node=%s field=%s msg=\"%s\"", n->node, e.field, e.message);
		else
			generation = d.generation;
		if (r == 0 && status) {
			struct iso_vf_tick vt;

			/* VF GUIDs only under a term obeyed (a refused one touches nothing). */
			if (iso_agent_vf_reconcile(&n->cfg->vf, n->dir, &d, status, &vt, &e) < 0)
				iso_log(ISO_LOG_ERR, "agent.reconcile_failed",
				        "node=%s field=%s msg=\"%s\"", n->node, e.field, e.message);
			else if (vt.programmed || vt.restored || vt.failed)
				iso_log(ISO_LOG_INFO, "agent.vf_reconciled",
				        "node=%s generation=%" PRIu64 " programmed=%u restored=%u "
				        "failed=%u",
				        n->node, d.generation, vt.programmed, vt.restored,
				        vt.failed);
			t_vf = iso_mono_ns();
			/* then the members' sandboxes, gated on the instances and VFs */
			struct agent_sandbox_tick st;
			if (agent_sandboxes_reconcile(n->sandboxes, n->gpu, n->node, &d, status,
			                              &st, &e) < 0)
				iso_log(ISO_LOG_ERR, "agent.reconcile_failed",
				        "node=%s field=%s msg=\"%s\"", n->node, e.field, e.message);
			else if (st.created || st.destroyed || st.failed)
				iso_log(ISO_LOG_INFO, "agent.sandboxes_reconciled",
				        "node=%s generation=%" PRIu64 " created=%u destroyed=%u "
				        "failed=%u",
				        n->node, d.generation, st.created, st.destroyed, st.failed);
			t_sb = iso_mono_ns();
			/* the NIC's CXI services (a Slingshot node) */
			if (n->sandboxes->cxi)
				agent_cxi_tick(n->sandboxes->cxi, n->node, &d, status);
		}
		/* where a tick's time goes, from the poll's answer (ISOSTACK_DEBUG=1) */
		iso_log(ISO_LOG_DEBUG, "agent.tick_steps",
		        "node=%s generation=%" PRIu64 " gpu_ms=%.2f vf_ms=%.2f sandboxes_ms=%.2f",
		        n->node, d.generation, (double)(t_gpu - t_doc) / 1e6,
		        (double)(t_vf - t_gpu) / 1e6, (double)(t_sb - t_vf) / 1e6);
		if (tick.created || tick.destroyed || tick.failed || tick.busy)
			iso_log(ISO_LOG_INFO, "agent.reconciled",
			        "node=%s generation=%" PRIu64 " created=%u destroyed=%u busy=%u "
			        "failed=%u",
			        n->node, d.generation, tick.created, tick.destroyed, tick.busy,
			        tick.failed);
		/* A retry is due for an IN_USE or a failure: come back after a
		 * heartbeat even if the document does not move. */
		if (status && !(sent && json_equal(sent, status))) {
			json_decref(sent);
			sent = put_status(n, status) == 0 ? json_incref(status) : NULL;
		}
		json_decref(status);
		faults_tick(n, &d, true);
		iso_agent_desired_clear(&last);
		last = d;
		if (r < 0)
			sleep_ms(n->cfg, (long)n->cfg->heartbeat_s * 1000);
	}
	iso_agent_desired_clear(&last);
	json_decref(sent);
	iso_log(ISO_LOG_INFO, "agent.node_stop", "node=%s", n->node);
	return NULL;
}

static int node_open(struct node_loop *n, struct iso_error *err)
{
	struct iso_client_options co = {.url = n->cfg->controller,
	                                .token = n->cfg->token,
	                                .timeout_ms = (n->cfg->heartbeat_s + 10) * 1000L,
	                                .user_agent = "isostack-agent/" ISO_VERSION};
	struct iso_gpu_open_args ga = {.state_dir = n->dir};
	int r;

	if (snprintf(n->dir, sizeof(n->dir), "%s/%s", n->cfg->state_dir, n->node) >=
	    (int)sizeof(n->dir))
		return iso_error_set(err, ISO_E_INVALID, "--state-dir",
		                     "--state-dir: path too long");
	if (mkdir(n->cfg->state_dir, 0700) < 0 && errno != EEXIST)
		return iso_error_set(err, ISO_E_INVALID, "--state-dir", "--state-dir %s: %s",
		                     n->cfg->state_dir, strerror(errno));
	if (mkdir(n->dir, 0700) < 0 && errno != EEXIST)
		return iso_error_set(err, ISO_E_INVALID, "--state-dir", "--state-dir: %s: %s",
		                     n->dir, strerror(errno));
	if ((r = iso_client_new(&co, &n->client, err)) < 0)
		return r;
	/* A sim host stands for the node's inventory, which only the desired
	 * document tells: a sim state on disk is opened now (a garbled one stops
	 * the start), a new one is made by node_main from the first document,
	 * before anything reads the driver. */
	if (n->cfg->driver == &iso_gpu_sim_ops)
		return iso_agent_sim_open(n->dir, NULL, &n->gpu, err);
	return n->cfg->driver->open(&ga, &n->gpu, err);
}

/* --sandbox: real or off, and why off (docs/agent.md "Sandboxes"). */
static bool sandbox_real(const struct iso_agent_config *cfg, char *why, size_t size)
{
	struct iso_cgroup cg;
	struct iso_error e = {0};

	if (cfg->sandbox == ISO_AGENT_SANDBOX_REAL)
		return true;
	if (cfg->sandbox == ISO_AGENT_SANDBOX_OFF) {
		snprintf(why, size, "--sandbox off");
		return false;
	}
	if (geteuid() != 0) {
		snprintf(why, size, "not root");
		return false;
	}
	if (cfg->n_nodes > 1) {
		/* a sim host standing for several nodes: their members would all
		 * take their cores from this one host */
		snprintf(why, size, "serving %zu nodes from one host", cfg->n_nodes);
		return false;
	}
	if (iso_cgroup_open(cfg->cgroup_root, &cg, &e) < 0) {
		snprintf(why, size, "cgroup root %s: %s", cfg->cgroup_root, e.message);
		return false;
	}
	return true;
}

static int sandboxes_start(const struct iso_agent_config *cfg, struct agent_sandboxes *sb,
                           struct agent_socket **sock, struct iso_error *err)
{
	struct agent_host_roots roots = {cfg->dev_root ? cfg->dev_root : "/dev",
	                                 cfg->proc_root ? cfg->proc_root : "/proc",
	                                 cfg->vf.sysfs_root ? cfg->vf.sysfs_root : "/"};
	char why[256] = "";
	bool real = sandbox_real(cfg, why, sizeof(why));
	int r;

	if (mkdir(cfg->state_dir, 0700) < 0 && errno != EEXIST)
		return iso_error_set(err, ISO_E_INVALID, "--state-dir", "--state-dir %s: %s",
		                     cfg->state_dir, strerror(errno));
	if ((r = agent_sandboxes_init(sb, cfg->state_dir, real, cfg->cgroup_root, &roots, err)) < 0)
		return r;
	sb->vf = cfg->vf; /* the P_Key index a (tenant, key) answer reads */
	/* the CNI requests create attachments at the controller (cni.c) */
	sb->controller = cfg->controller;
	sb->token = cfg->token;
	sb->nodes = cfg->nodes;
	sb->n_nodes = cfg->n_nodes;
	sb->nodes_expected = cfg->n_nodes;
	if (cfg->rdma_hca_handles)
		sb->rdma_hca_handles = cfg->rdma_hca_handles;
	if (cfg->cni_sm_wait_s)
		sb->cni_sm_wait_ms = cfg->cni_sm_wait_s * 1000;
	if (cfg->rdma_hca_objects)
		sb->rdma_hca_objects = cfg->rdma_hca_objects;
	if (real) {
		struct iso_error e = {0};
		if (iso_rdma_netns_mode_read(&sb->rdma_mode, &e) < 0)
			iso_log(ISO_LOG_WARN, "agent.rdma_mode_failed", "field=%s msg=\"%s\"",
			        e.field, e.message);
		iso_log(ISO_LOG_INFO, "agent.rdma",
		        "netns_mode=%s hca_handle=%" PRId64 " hca_object=%" PRId64,
		        iso_rdma_netns_mode_name(sb->rdma_mode), sb->rdma_hca_handles,
		        sb->rdma_hca_objects);
	}
	if (real)
		iso_log(ISO_LOG_INFO, "agent.sandbox_mode", "mode=real cgroup_root=%s version=%d",
		        sb->cg.root, (int)sb->cg.version);
	else
		iso_log(ISO_LOG_INFO, "agent.sandbox_mode", "mode=off reason=\"%s\"", why);
	{
		char node_dir[PATH_MAX];
		bool off = cfg->cxi_library && strcmp(cfg->cxi_library, "none") == 0;
		struct agent_cxi_config cc = {
		    .library = off ? NULL : cfg->cxi_library,
		    .off = off,
		    .always = cfg->cxi_library && !off,
		    .dev_id = cfg->cxi_device,
		    .node = cfg->n_nodes == 1 ? cfg->nodes[0] : NULL,
		    .node_dir = cfg->n_nodes == 1 ? node_dir : NULL,
		};
		if (snprintf(node_dir, sizeof(node_dir), "%s/%s", cfg->state_dir, cfg->nodes[0]) >=
		    (int)sizeof(node_dir))
			return iso_error_set(err, ISO_E_INVALID, "--state-dir",
			                     "--state-dir: path too long");
		if (cfg->n_nodes == 1 && mkdir(node_dir, 0700) < 0 && errno != EEXIST)
			return iso_error_set(err, ISO_E_INVALID, "--state-dir",
			                     "--state-dir: %s: %s", node_dir, strerror(errno));
		if ((r = agent_cxi_new(&cc, &sb->cxi, err)) < 0)
			return r;
	}
	return agent_socket_start(sb, cfg->state_dir, cfg->stop, sock, err);
}

int iso_agent_run(const struct iso_agent_config *cfg, struct iso_error *err)
{
	struct node_loop *loops = calloc(cfg->n_nodes, sizeof(*loops));
	struct agent_sandboxes *sb = calloc(1, sizeof(*sb));
	struct agent_socket *sock = NULL;
	int r = 0;

	if (cfg->sm.partitions) {
		free(loops);
		free(sb);
		return iso_agent_sm_run(cfg, err);
	}
	if (!loops || !sb) {
		free(loops);
		free(sb);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	r = sandboxes_start(cfg, sb, &sock, err);
	for (size_t i = 0; i < cfg->n_nodes && r == 0; i++) {
		loops[i].cfg = cfg;
		loops[i].node = cfg->nodes[i];
		loops[i].sandboxes = sb;
		if ((r = node_open(&loops[i], err)) < 0)
			break;
		if (pthread_create(&loops[i].thread, NULL, node_main, &loops[i]) != 0)
			r = iso_error_set(err, ISO_E_INTERNAL, "", "cannot start a thread");
		else
			loops[i].started = true;
	}
	if (r < 0)
		atomic_store(cfg->stop, true);
	for (size_t i = 0; i < cfg->n_nodes; i++) {
		if (loops[i].started)
			pthread_join(loops[i].thread, NULL);
		if (loops[i].gpu)
			loops[i].gpu->ops->close(loops[i].gpu);
		iso_client_free(loops[i].client);
	}
	agent_socket_stop(sock);
	agent_cxi_free(sb->cxi);
	agent_sandboxes_free(sb);
	free(sb);
	free(loops);
	return r;
}

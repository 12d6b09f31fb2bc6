/* isostackd: the controller daemon. A thin main: it reads flags and the
 * inventory, takes the state directory's lock, opens the store, the
 * controller and the API server, then runs the one event loop
 * (iso_api_run, src/api/loop.c) on this thread until a signal. All logic
 * lives in libisostack; this file only wires it together and owns the main
 * context. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sodium.h>
#include <unistd.h>

#include "isostack/api.h"
#include "isostack/audit.h"
#include "isostack/controller.h"
#include "isostack/inventory.h"
#include "isostack/store.h"

struct options {
	const char *config;
	const char *state_dir;
	const char *store; /* --store: NULL or "sqlite", or a PostgreSQL conninfo */
	const char *listen;
	const char *tls_cert;
	const char *tls_key;
	const char *placement;
	bool allow_remote_http;
	bool new_admin_token;
	bool check_config;
	bool accept_audit_break;
	const char *audit_keys; /* --audit-keys: the published key set */
	/* tenancy (docs/tenancy.md) */
	const char *admission_policies[16];
	int n_admission_policies;
	int64_t half_life_ms, preempt_grace_ms, preempt_min_run_ms;
	unsigned tenant_max_pending, tenant_max_live; /* 0: the default */
	unsigned tenant_writes_per_s, tenant_reads_per_s;
	/* connection policy (docs/api.md, "Slow clients"); 0: the default */
	unsigned max_conns, per_address_conns, conn_reserve;
	int64_t header_timeout_ms;
	/* node agents (docs/agents.md); 0: the default */
	unsigned agent_lease_s, agent_grace_s, agent_max_waiters, provisioning_timeout_s;
	bool agents_required, no_agents;
	bool no_group_commit; /* --group-commit off */
	/* several isostackd on one PostgreSQL (docs/store.md, "High availability") */
	const char *advertise_url;
	unsigned lease_ms, renew_ms; /* 0: the defaults */
};

static void usage(FILE *out)
{
	fprintf(out, "usage: isostackd --config FILE [--state-dir DIR] [--listen HOST:PORT]\n"
	             "                 [--tls-cert PEM --tls-key PEM] [--allow-remote-http]\n"
	             "                 [--placement POLICY] [--new-admin-token] [--check-config]\n"
	             "                 [--audit-accept-break] [--audit-keys FILE]\n"
	             "                 [--admission-policy FILE]...\n"
	             "                 [--fair-share-half-life HOURS] [--preempt-grace SECONDS]\n"
	             "                 [--preempt-min-run SECONDS] [--max-connections N]\n"
	             "                 [--max-connections-per-address N] [--connection-reserve N]\n"
	             "                 [--header-timeout SECONDS]\n"
	             "                 [--tenant-max-pending N] [--tenant-max-live N]\n"
	             "                 [--tenant-writes-per-s N] [--tenant-reads-per-s N]\n"
	             "                 [--agent-lease-s N] [--agent-grace-s N] [--agents-required]\n"
	             "                 [--agent-max-waiters N] [--no-agents]\n"
	             "                 [--provisioning-timeout-s N] [--group-commit on|off]\n"
	             "                 [--store sqlite|CONNINFO] [--advertise-url URL]\n"
	             "                 [--lease-ms N] [--renew-ms N]\n"
	             "\n"
	             "  --config FILE        cluster inventory (YAML, see docs/inventory.md)\n"
	             "  --state-dir DIR      store, lock and admin.token (default ./var)\n"
	             "  --store STORE        sqlite (default: DIR/state.db) or a PostgreSQL\n"
	             "                       conninfo: postgres://... or \"host=... dbname=...\"\n"
	             "                       (docs/store.md)\n"
	             "  --advertise-url URL  how clients reach this daemon, named by followers\n"
	             "                       (default http(s)://LISTEN)\n"
	             "  --lease-ms N         PostgreSQL: the leader's lease (default 5000)\n"
	             "  --renew-ms N         PostgreSQL: renew or seek it this often (default\n"
	             "                       1000; at most half the lease)\n"
	             "  --listen HOST:PORT   overrides controller.listen (default 127.0.0.1:8470)\n"
	             "  --tls-cert/--tls-key serve HTTPS (overrides controller.tls)\n"
	             "  --allow-remote-http  allow plain HTTP on a non-loopback address\n"
	             "  --placement POLICY   placement policy (default isostack; also first-fit)\n"
	             "  --new-admin-token    write a fresh cluster-admin token to DIR/admin.token\n"
	             "  --audit-accept-break start although the audit log fails its check,\n"
	             "                       recording the break in the log (docs/audit.md)\n"
	             "  --audit-keys FILE    the published audit key set: heads are valid only\n"
	             "                       when signed by one of its keys, this daemon's own\n"
	             "                       among them (default DIR/audit-keys if present,\n"
	             "                       else only DIR/audit.pub; docs/audit.md)\n"
	             "  --admission-policy FILE  a Lua admission policy run on every request\n"
	             "                       (repeatable, run in order; docs/tenancy.md)\n"
	             "  --fair-share-half-life HOURS  decay of past usage (default 168)\n"
	             "  --preempt-grace SECONDS  signal, then evict this much later (default 0)\n"
	             "  --preempt-min-run SECONDS never preempt younger work (default 0)\n"
	             "  --max-connections N  open connections in all (default 1000)\n"
	             "  --max-connections-per-address N  from one client address (default 64)\n"
	             "  --connection-reserve N  slots that clients still sending their request\n"
	             "                       head cannot take (default max/8)\n"
	             "  --header-timeout SECONDS  time to send the request head (default 10)\n"
	             "  --tenant-max-pending N  pending allocations per tenant (default 1000)\n"
	             "  --tenant-max-live N  live allocations per tenant (default 2000); a\n"
	             "                       tenant's own limits (PATCH /v1/tenants) win\n"
	             "  --tenant-writes-per-s N  changes per tenant a second (default 20, burst 2 s)\n"
	             "  --tenant-reads-per-s N  reads per tenant a second (default 200, burst 2 s)\n"
	             "  --agent-lease-s N    an agent silent this long: node unreachable (default 10)\n"
	             "  --agent-grace-s N    unreachable this long: its work evicted (default 300)\n"
	             "  --agents-required    the lease holds for nodes whose agent never reported\n"
	             "  --agent-max-waiters N long polls of desired state at once (default 10000)\n"
	             "  --no-agents          active once the fabric confirms: no wait for node agents\n"
	             "  --provisioning-timeout-s N  not active by then: failed (default 300)\n"
	             "  --group-commit on|off  concurrent changes share one flush (default on;\n"
	             "                       docs/store.md)\n"
	             "  --check-config       validate the inventory and exit\n"
	             "  --version, --help\n");
}

/* A whole number in [min, max]. */
static int parse_count(const char *s, const char *flag, unsigned min, unsigned max, unsigned *out)
{
	char *end = NULL;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
		fprintf(stderr, "isostackd: %s: \"%s\" is not a whole number %u..%u\n", flag, s,
		        min, max);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* A non-negative number of `unit` seconds (at least `min`), in ms. */
static int parse_duration(const char *s, const char *flag, double unit, double min, int64_t *ms)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min) || v * unit > 10.0 * 365 * 86400) {
		fprintf(stderr, "isostackd: %s: \"%s\" is not a number >= %g (at most 10 years)\n",
		        flag, s, min);
		return -1;
	}
	*ms = (int64_t)(v * unit * 1000.0 + 0.5);
	return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	enum {
		O_TLS_CERT = 256,
		O_TLS_KEY,
		O_ALLOW,
		O_PLACEMENT,
		O_NEW_TOKEN,
		O_CHECK,
		O_VERSION,
		O_AUDIT_BREAK,
		O_AUDIT_KEYS,
		O_POLICY,
		O_HALF_LIFE,
		O_GRACE,
		O_MIN_RUN,
		O_MAX_CONNS,
		O_PER_ADDRESS,
		O_RESERVE,
		O_HEADER_TIMEOUT,
		O_TENANT_PENDING,
		O_TENANT_LIVE,
		O_TENANT_WRITES,
		O_TENANT_READS,
		O_AGENT_LEASE,
		O_AGENT_GRACE,
		O_AGENTS_REQUIRED,
		O_AGENT_WAITERS,
		O_NO_AGENTS,
		O_PROVISION_TIMEOUT,
		O_GROUP_COMMIT,
		O_STORE,
		O_ADVERTISE,
		O_LEASE_MS,
		O_RENEW_MS,
	};
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"state-dir", required_argument, NULL, 's'},
	    {"store", required_argument, NULL, O_STORE},
	    {"advertise-url", required_argument, NULL, O_ADVERTISE},
	    {"lease-ms", required_argument, NULL, O_LEASE_MS},
	    {"renew-ms", required_argument, NULL, O_RENEW_MS},
	    {"listen", required_argument, NULL, 'l'},
	    {"tls-cert", required_argument, NULL, O_TLS_CERT},
	    {"tls-key", required_argument, NULL, O_TLS_KEY},
	    {"allow-remote-http", no_argument, NULL, O_ALLOW},
	    {"placement", required_argument, NULL, O_PLACEMENT},
	    {"new-admin-token", no_argument, NULL, O_NEW_TOKEN},
	    {"audit-accept-break", no_argument, NULL, O_AUDIT_BREAK},
	    {"audit-keys", required_argument, NULL, O_AUDIT_KEYS},
	    {"admission-policy", required_argument, NULL, O_POLICY},
	    {"fair-share-half-life", required_argument, NULL, O_HALF_LIFE},
	    {"preempt-grace", required_argument, NULL, O_GRACE},
	    {"preempt-min-run", required_argument, NULL, O_MIN_RUN},
	    {"max-connections", required_argument, NULL, O_MAX_CONNS},
	    {"max-connections-per-address", required_argument, NULL, O_PER_ADDRESS},
	    {"connection-reserve", required_argument, NULL, O_RESERVE},
	    {"header-timeout", required_argument, NULL, O_HEADER_TIMEOUT},
	    {"tenant-max-pending", required_argument, NULL, O_TENANT_PENDING},
	    {"tenant-max-live", required_argument, NULL, O_TENANT_LIVE},
	    {"tenant-writes-per-s", required_argument, NULL, O_TENANT_WRITES},
	    {"tenant-reads-per-s", required_argument, NULL, O_TENANT_READS},
	    {"agent-lease-s", required_argument, NULL, O_AGENT_LEASE},
	    {"agent-grace-s", required_argument, NULL, O_AGENT_GRACE},
	    {"agents-required", no_argument, NULL, O_AGENTS_REQUIRED},
	    {"agent-max-waiters", required_argument, NULL, O_AGENT_WAITERS},
	    {"no-agents", no_argument, NULL, O_NO_AGENTS},
	    {"provisioning-timeout-s", required_argument, NULL, O_PROVISION_TIMEOUT},
	    {"group-commit", required_argument, NULL, O_GROUP_COMMIT},
	    {"check-config", no_argument, NULL, O_CHECK},
	    {"version", no_argument, NULL, O_VERSION},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int ch;

	o->state_dir = "var";
	while ((ch = getopt_long(argc, argv, "c:s:l:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->config = optarg;
			break;
		case 's':
			o->state_dir = optarg;
			break;
		case 'l':
			o->listen = optarg;
			break;
		case O_STORE:
			if (strcmp(optarg, "sqlite") != 0 && !iso_store_spec_is_postgres(optarg)) {
				fprintf(stderr,
				        "isostackd: --store: \"%s\" is neither \"sqlite\" nor a "
				        "PostgreSQL conninfo (postgres://... or \"host=... "
				        "dbname=...\")\n",
				        optarg);
				return -1;
			}
			o->store = optarg;
			break;
		case O_ADVERTISE:
			if (strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0) {
				fprintf(stderr, "isostackd: --advertise-url: \"%s\" is not an http:// "
				                "or https:// URL\n",
				        optarg);
				return -1;
			}
			o->advertise_url = optarg;
			break;
		case O_LEASE_MS:
			if (parse_count(optarg, "--lease-ms", 200, 600000, &o->lease_ms) < 0)
				return -1;
			break;
		case O_RENEW_MS:
			if (parse_count(optarg, "--renew-ms", 50, 300000, &o->renew_ms) < 0)
				return -1;
			break;
		case O_TLS_CERT:
			o->tls_cert = optarg;
			break;
		case O_TLS_KEY:
			o->tls_key = optarg;
			break;
		case O_ALLOW:
			o->allow_remote_http = true;
			break;
		case O_PLACEMENT:
			o->placement = optarg;
			break;
		case O_AUDIT_BREAK:
			o->accept_audit_break = true;
			break;
		case O_AUDIT_KEYS:
			if (!optarg[0]) {
				fprintf(stderr, "isostackd: --audit-keys: empty file name\n");
				return -1;
			}
			o->audit_keys = optarg;
			break;
		case O_POLICY:
			if (o->n_admission_policies == (int)ISO_ARRAY_SIZE(o->admission_policies)) {
				fprintf(stderr, "isostackd: at most %d --admission-policy files\n",
				        (int)ISO_ARRAY_SIZE(o->admission_policies));
				return -1;
			}
			o->admission_policies[o->n_admission_policies++] = optarg;
			break;
		case O_HALF_LIFE:
			if (parse_duration(optarg, "--fair-share-half-life", 3600.0, 1e-3,
			                   &o->half_life_ms) < 0)
				return -1;
			break;
		case O_GRACE:
			if (parse_duration(optarg, "--preempt-grace", 1.0, 0,
			                   &o->preempt_grace_ms) < 0)
				return -1;
			break;
		case O_MIN_RUN:
			if (parse_duration(optarg, "--preempt-min-run", 1.0, 0,
			                   &o->preempt_min_run_ms) < 0)
				return -1;
			break;
		case O_MAX_CONNS:
			if (parse_count(optarg, "--max-connections", 2, 100000, &o->max_conns) < 0)
				return -1;
			break;
		case O_PER_ADDRESS:
			if (parse_count(optarg, "--max-connections-per-address", 1, 100000,
			                &o->per_address_conns) < 0)
				return -1;
			break;
		case O_RESERVE:
			if (parse_count(optarg, "--connection-reserve", 1, 100000,
			                &o->conn_reserve) < 0)
				return -1;
			break;
		case O_HEADER_TIMEOUT:
			if (parse_duration(optarg, "--header-timeout", 1.0, 0.05,
			                   &o->header_timeout_ms) < 0 ||
			    o->header_timeout_ms > 3600 * 1000) {
				fprintf(stderr,
				        "isostackd: --header-timeout: at most 3600 seconds\n");
				return -1;
			}
			break;
		case O_TENANT_PENDING:
			if (parse_count(optarg, "--tenant-max-pending", 1, 1000000,
			                &o->tenant_max_pending) < 0)
				return -1;
			break;
		case O_TENANT_LIVE:
			if (parse_count(optarg, "--tenant-max-live", 1, 1000000, &o->tenant_max_live) <
			    0)
				return -1;
			break;
		case O_TENANT_WRITES:
			if (parse_count(optarg, "--tenant-writes-per-s", 1, 1000000,
			                &o->tenant_writes_per_s) < 0)
				return -1;
			break;
		case O_TENANT_READS:
			if (parse_count(optarg, "--tenant-reads-per-s", 1, 1000000,
			                &o->tenant_reads_per_s) < 0)
				return -1;
			break;
		case O_AGENT_LEASE:
			if (parse_count(optarg, "--agent-lease-s", 1, 86400, &o->agent_lease_s) < 0)
				return -1;
			break;
		case O_AGENT_GRACE:
			if (parse_count(optarg, "--agent-grace-s", 1, 864000, &o->agent_grace_s) < 0)
				return -1;
			break;
		case O_AGENTS_REQUIRED:
			o->agents_required = true;
			break;
		case O_NO_AGENTS:
			o->no_agents = true;
			break;
		case O_GROUP_COMMIT:
			if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
				fprintf(stderr, "isostackd: --group-commit: \"%s\" is neither on nor off\n",
				        optarg);
				return -1;
			}
			o->no_group_commit = strcmp(optarg, "off") == 0;
			break;
		case O_PROVISION_TIMEOUT:
			if (parse_count(optarg, "--provisioning-timeout-s", 1, 864000,
			                &o->provisioning_timeout_s) < 0)
				return -1;
			break;
		case O_AGENT_WAITERS:
			if (parse_count(optarg, "--agent-max-waiters", 1, 1000000,
			                &o->agent_max_waiters) < 0)
				return -1;
			break;
		case O_NEW_TOKEN:
			o->new_admin_token = true;
			break;
		case O_CHECK:
			o->check_config = true;
			break;
		case O_VERSION:
			printf("isostackd %s\n", ISO_VERSION);
			return 1;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "isostackd: unexpected argument \"%s\"\n", argv[optind]);
		return -1;
	}
	if ((o->lease_ms ? o->lease_ms : 5000) < 2 * (o->renew_ms ? o->renew_ms : 1000)) {
		fprintf(stderr, "isostackd: --renew-ms must be at most half of --lease-ms\n");
		return -1;
	}
	if (!o->config) {
		fprintf(stderr, "isostackd: --config FILE is required\n");
		usage(stderr);
		return -1;
	}
	return 0;
}

/* One entry of the state dir: the daemon's own regular file (or dir), not
 * a link, and nobody else may write it; the bootstrap token nobody else may
 * even read (audit.key is held to that by iso_audit_key_load_or_create).
 * A planted state.db with its own admin token, or a link through which a
 * secret would be written elsewhere, is refused rather than used. */
static int check_state_entry(int dfd, const char *dir, const char *name, struct iso_error *err)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT
		           ? 0
		           : iso_error_set(err, ISO_E_INVALID, "state-dir",
		                           "cannot check %s/%s: %s", dir, name, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return iso_error_set(
		    err, ISO_E_INVALID, "state-dir",
		    "%s/%s is a symbolic link; the state dir holds only isostackd's "
		    "own files: remove it",
		    dir, name);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return iso_error_set(err, ISO_E_INVALID, "state-dir",
		                     "%s/%s is not a regular file: remove it", dir, name);
	if (st.st_uid != geteuid())
		return iso_error_set(err, ISO_E_INVALID, "state-dir",
		                     "%s/%s is owned by uid %u, not by uid %u that isostackd runs "
		                     "as: remove it, or chown it if it is really the daemon's",
		                     dir, name, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 022)
		return iso_error_set(err, ISO_E_INVALID, "state-dir",
		                     "%s/%s is writable by group or others (mode %04o): chmod go-w "
		                     "%s/%s",
		                     dir, name, (unsigned)(st.st_mode & 07777), dir, name);
	if (strcmp(name, "admin.token") == 0 && (st.st_mode & 077))
		return iso_error_set(err, ISO_E_INVALID, "state-dir",
		                     "%s/%s is readable by group or others (mode %04o): chmod 600 "
		                     "%s/%s",
		                     dir, name, (unsigned)(st.st_mode & 07777), dir, name);
	return 0;
}

/* Every entry of the state dir, so that files added later (drivers' own)
 * are held to the same rule without a list to keep up to date. */
static int check_state_entries(const char *dir, struct iso_error *err)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (dfd < 0 || !(d = fdopendir(dfd))) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		return iso_error_set(err, ISO_E_INVALID, "state-dir", "cannot read %s: %s", dir,
		                     strerror(e));
	}
	while (r == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		r = check_state_entry(dirfd(d), dir, de->d_name, err);
	}
	closedir(d);
	return r;
}

/* The lock file: created exclusively, never through a link, and only ever
 * one of our own (the store and the audit key sit beside it). */
static int open_lock(const char *dir, int *lock_fd, struct iso_error *err)
{
	char path[1024];
	struct stat st;
	int fd;

	if (snprintf(path, sizeof(path), "%s/isostackd.lock", dir) >= (int)sizeof(path))
		return iso_error_set(err, ISO_E_INVALID, "state-dir", "state dir path too long");
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST)
		fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return iso_error_set(err, ISO_E_INVALID, "state-dir", "cannot open %s: %s%s", path,
		                     strerror(errno),
		                     errno == ELOOP ? " (a symbolic link: remove it)" : "");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		close(fd);
		return iso_error_set(err, ISO_E_INVALID, "state-dir",
		                     "%s is not a regular file of uid %u writable only by it: "
		                     "remove it",
		                     path, (unsigned)geteuid());
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return iso_error_set(err, ISO_E_CONFLICT, "state-dir",
		                     "another isostackd is already using %s", dir);
	}
	*lock_fd = fd;
	return 0;
}

/* The state dir holds the store and secrets: the daemon's user's alone, and
 * one daemon. A dir others can write, or files in it that are not the
 * daemon's, are refused with the path and the fix (docs/audit.md). */
static int prepare_state_dir(const char *dir, int *lock_fd, struct iso_error *err)
{
	struct stat st;
	int r;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return iso_error_set(err, ISO_E_INVALID, "state-dir", "cannot create %s: %s", dir,
		                     strerror(errno));
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return iso_error_set(err, ISO_E_INVALID, "state-dir", "%s is not a directory", dir);
	if (st.st_uid != geteuid())
		return iso_error_set(
		    err, ISO_E_INVALID, "state-dir",
		    "state dir %s is owned by uid %u, not by uid %u that isostackd "
		    "runs as: chown it, or use a dir of the daemon's user",
		    dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 022)
		return iso_error_set(
		    err, ISO_E_INVALID, "state-dir",
		    "state dir %s is writable by group or others (mode %04o), so "
		    "anyone could plant a store or read the admin token: chmod 700 "
		    "%s",
		    dir, (unsigned)(st.st_mode & 07777), dir);
	if (st.st_mode & 077)
		iso_log(ISO_LOG_WARN, "state_dir_permissions",
		        "path=%s mode=%04o hint=\"chmod 700 it: it holds the admin token\"", dir,
		        (unsigned)(st.st_mode & 07777));
	r = check_state_entries(dir, err);
	if (r < 0)
		return r;
	return open_lock(dir, lock_fd, err);
}

/* Every daemon, leader or follower, has its audit key (made on first use, so
 * that its audit.pub can be published before it ever leads) and checks it
 * against the published key set now: a node whose key is not in the set
 * would be refused when elected, so it is refused at its start instead. The
 * controller checks again when it opens (start or takeover). */
static int check_audit_keys(const struct options *o, struct iso_error *err)
{
	struct iso_audit_key key;
	bool created = false;
	int r = iso_audit_key_load_or_create(o->state_dir, &key, &created, err);

	if (r < 0)
		return r;
	struct iso_audit_keyset *ks = malloc(sizeof(*ks));
	if (!ks)
		r = iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	else
		r = iso_audit_keyset_load(o->state_dir, o->audit_keys, key.pk, ks, NULL, 0, err);
	free(ks);
	sodium_memzero(&key, sizeof(key));
	return r;
}

static int fail(const struct iso_error *err)
{
	fprintf(stderr, "isostackd: %s\n", err->message);
	return 1;
}

int main(int argc, char **argv)
{
	_cleanup_(iso_inventory_freep) struct iso_inventory *inv = NULL;
	_cleanup_(iso_store_closep) struct iso_store *store = NULL;
	_cleanup_(iso_controller_freep) struct iso_controller *ctl = NULL;
	struct iso_api *api = NULL;
	struct iso_lease *lease = NULL;
	struct options o = {0};
	struct iso_error err = {0};
	const struct iso_placer *placer;
	char db_path[1024];
	int lock_fd = -1, r, sig = 0;
	bool created = false;
	sigset_t sigs;

	/* SIGINT and SIGTERM are taken by the loop's signalfd only: blocked
	 * before any thread starts (the fabric driver's worker in
	 * iso_controller_open, the API's worker), so every thread inherits the
	 * mask and none can be killed by them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	r = parse_options(argc, argv, &o);
	if (r != 0)
		return r > 0 ? 0 : 2;
	umask(077);
	if (sodium_init() < 0) {
		fprintf(stderr, "isostackd: libsodium failed to initialise\n");
		return 1;
	}
	if (iso_inventory_load_file(o.config, &inv, &err) < 0) {
		fprintf(stderr, "isostackd: %s\n", err.message);
		return 2;
	}
	if (o.check_config) {
		printf("%s: ok (%d nodes)\n", o.config, inv->n_nodes);
		return 0;
	}
	const struct iso_controller_config *cc = &inv->controller;
	struct iso_api_config api_cfg = {
	    .listen = o.listen ? o.listen : (cc->listen[0] ? cc->listen : "127.0.0.1:8470"),
	    .tls_cert = o.tls_cert ? o.tls_cert : (cc->tls_cert[0] ? cc->tls_cert : NULL),
	    .tls_key = o.tls_key ? o.tls_key : (cc->tls_key[0] ? cc->tls_key : NULL),
	    .allow_remote_http = o.allow_remote_http || cc->allow_remote_http,
	    .max_connections = o.max_conns,
	    .per_address_connections = o.per_address_conns,
	    .connection_reserve = o.conn_reserve,
	    .header_timeout_ms = (unsigned)o.header_timeout_ms,
	};
	const char *policy =
	    o.placement ? o.placement : (cc->placement[0] ? cc->placement : "isostack");
	placer = iso_placer_find(policy);
	if (!placer) {
		fprintf(stderr, "isostackd: unknown placement policy \"%s\" (known: %s)\n", policy,
		        iso_placer_names());
		return 2;
	}

	if (prepare_state_dir(o.state_dir, &lock_fd, &err) < 0)
		return fail(&err);
	if (check_audit_keys(&o, &err) < 0)
		return fail(&err);
	if (iso_store_spec_is_postgres(o.store))
		iso_strlcpy(db_path, "postgres", sizeof(db_path)); /* never the conninfo */
	else
		snprintf(db_path, sizeof(db_path), "%s/state.db", o.state_dir);
	if (iso_store_open(o.store, o.state_dir, &store, &err) < 0)
		return fail(&err);
	struct iso_controller_params params = {
	    .inv = inv,
	    .store = store,
	    .placer = placer,
	    .state_dir = o.state_dir,
	    .accept_audit_break = o.accept_audit_break,
	    .audit_keys = o.audit_keys,
	    .fair_share_half_life_ms = o.half_life_ms,
	    .preempt_grace_ms = o.preempt_grace_ms,
	    .preempt_min_run_ms = o.preempt_min_run_ms,
	    .tenant_limits = {.max_pending = (int)o.tenant_max_pending,
	                      .max_live = (int)o.tenant_max_live},
	    .tenant_rates = {.writes_per_s = o.tenant_writes_per_s,
	                     .reads_per_s = o.tenant_reads_per_s},
	    .admission_policies = o.admission_policies,
	    .n_admission_policies = o.n_admission_policies,
	    .agent_max_waiters = (int)o.agent_max_waiters,
	    .agent_lease_s = (int)o.agent_lease_s,
	    .agent_grace_s = (int)o.agent_grace_s,
	    .agents_required = o.agents_required,
	    .no_agents = o.no_agents,
	    .provisioning_timeout_s = (int)o.provisioning_timeout_s,
	    .group_commit = !o.no_group_commit,
	};
	/* Several isostackd on one PostgreSQL (docs/store.md, "High
	 * availability"): only the holder of the lease opens a controller;
	 * the others follow until the lease is free. */
	char url[300];
	if (o.advertise_url)
		iso_strlcpy(url, o.advertise_url, sizeof(url));
	else
		snprintf(url, sizeof(url), "%s://%s", api_cfg.tls_cert ? "https" : "http",
		         api_cfg.listen);
	api_cfg.advertise_url = url;
	if (iso_store_spec_is_postgres(o.store)) {
		struct iso_lease_config lc = {
		    .url = url,
		    .lease_ms = o.lease_ms ? o.lease_ms : 5000,
		    .renew_ms = o.renew_ms ? o.renew_ms : 1000,
		};
		if (iso_lease_open(store, o.store, &lc, &lease, &err) < 0)
			return fail(&err);
		iso_lease_tick(lease); /* leads at once when nobody does */
	}
	if (!lease || iso_lease_role(lease) == ISO_LEASE_LEADER) {
		params.agent_term = lease ? iso_lease_term(lease) : 0;
		if (iso_controller_open(&params, &ctl, &err) < 0 ||
		    iso_controller_bootstrap_admin(ctl, o.state_dir, o.new_admin_token, &created,
		                                   &err) < 0) {
			if (lease) { /* handed back, so that another node can lead */
				iso_log(ISO_LOG_ERR, "leader_start_failed", "error=\"%s\"",
				        err.message);
				iso_lease_release(lease);
				iso_lease_close(lease);
			}
			return fail(&err);
		}
	}

	if (iso_api_start(&api_cfg, ctl, &api, &err) < 0) {
		if (ctl)
			iso_controller_shutdown(ctl);
		return fail(&err);
	}
	iso_api_set_lease(api, lease);
	iso_log(ISO_LOG_INFO, "daemon_start",
	        "version=%s cluster=%s nodes=%d store=%s placement=%s listen=%s port=%d tls=%s "
	        "role=%s",
	        ISO_VERSION, inv->cluster_name, inv->n_nodes, db_path, placer->name, api_cfg.listen,
	        iso_api_port(api), iso_api_tls(api) ? "yes" : "no", ctl ? "leader" : "follower");
	printf("isostackd %s serving %s://%s/v1 (port %d)\n", ISO_VERSION,
	       iso_api_tls(api) ? "https" : "http", api_cfg.listen, iso_api_port(api));
	printf("admin token: %s/admin.token%s\n", o.state_dir, created ? " (new)" : "");
	fflush(stdout);

	/* Requests, the controller's tick every 50 ms and deferred work, on
	 * this thread, until SIGINT or SIGTERM (or, with a lease, until this
	 * follower is elected: it then rebuilds its state from the store as a
	 * start does, and serves). */
	for (;;) {
		sig = iso_api_run(api, &err);
		if (sig != ISO_API_ELECTED)
			break;
		params.agent_term = iso_lease_term(lease);
		/* The state is read again now: so is the server's timeline (a
		 * follower elected after a PostgreSQL failover goes on). */
		if (iso_store_postgres_rebase(store, &err) < 0 ||
		    iso_controller_open(&params, &ctl, &err) < 0 ||
		    iso_controller_bootstrap_admin(ctl, o.state_dir, o.new_admin_token, &created,
		                                   &err) < 0) {
			/* As at a start, a controller that cannot open stops the
			 * daemon (exit 1), but the lease is handed back first so
			 * that another node can lead at once. */
			iso_log(ISO_LOG_ERR, "leader_start_failed", "error=\"%s\"", err.message);
			iso_controller_free(ctl);
			ctl = NULL;
			iso_lease_release(lease);
			sig = -EIO;
			break;
		}
		iso_api_attach(api, ctl);
		iso_log(ISO_LOG_INFO, "leader_serving", "term=%lld",
		        (long long)iso_lease_term(lease));
	}
	if (sig < 0)
		iso_log(ISO_LOG_ERR, "daemon_loop_failed", "error=\"%s\"", err.message);
	else if (sig == ISO_API_DEPOSED)
		iso_log(ISO_LOG_WARN, "daemon_step_down",
		        "msg=\"the lease was lost: state dropped, starting again as a follower\"");
	else
		iso_log(ISO_LOG_INFO, "daemon_stop", "signal=%d", sig);
	iso_api_stop(api);
	if (ctl)
		iso_controller_shutdown(ctl); /* with the lease still held: its last writes */
	iso_controller_free(ctl);
	ctl = NULL;
	if (lease && sig != ISO_API_DEPOSED)
		iso_lease_release(lease); /* graceful handoff: a follower takes it at once */
	iso_lease_close(lease);
	iso_store_close(store);
	store = NULL;
	close(lock_fd);
	if (sig == ISO_API_DEPOSED) {
		/* Nothing of the deposed leader's memory survives: the same
		 * binary starts again with the same flags, as a follower. */
		execv("/proc/self/exe", argv);
		fprintf(stderr, "isostackd: cannot start again after stepping down: %s\n",
		        strerror(errno));
		return 1;
	}
	return sig < 0 ? 1 : 0;
}

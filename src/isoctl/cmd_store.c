/* cmd_store.c: `isoctl store migrate --from sqlite:DIR --to CONNINFO`, the
 * offline move of a site's state from the embedded SQLite store to
 * PostgreSQL (issue 16; docs/cli.md, docs/store.md "Moving a site to
 * PostgreSQL"). The copy and its checks are the store's
 * (iso_store_migrate_to_postgres); this file parses the line, keeps a daemon
 * away by taking the state dir's lock the way isostackd takes it, and prints
 * the summary. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isoctl.h"
#include "isostack/audit.h"
#include "isostack/store.h"

static const char usage_store[] = "Usage: isoctl store migrate --from sqlite:DIR --to CONNINFO\n"
                                  "Offline tools for the daemon's store (no server).\n";

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

static int exit_for(const struct iso_error *err)
{
	switch (err->code) {
	case ISO_E_CONFLICT:
		return ISOCTL_EXIT_CONFLICT;
	case ISO_E_INVALID:
		return ISOCTL_EXIT_USAGE;
	case ISO_E_UNAVAILABLE:
		return ISOCTL_EXIT_UNAVAILABLE;
	default:
		return ISOCTL_EXIT_INTERNAL;
	}
}

static int store_migrate(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl store migrate --from sqlite:DIR --to CONNINFO [--pubkey FILE]\n"
	    "\n"
	    "Copies the whole state of the isostackd whose state directory is DIR\n"
	    "(DIR/state.db: tenants, tokens, nodes, allocations with members and slots,\n"
	    "fabric, tenancy, meta, the audit log with its signed heads) into the empty\n"
	    "PostgreSQL database CONNINFO (a postgres:// URI or keyword conninfo), in\n"
	    "one transaction; then compares every table's row count and verifies the\n"
	    "audit log read back from PostgreSQL against the newest signed head.\n"
	    "Refused while an isostackd runs on DIR (its lock) and when the target\n"
	    "holds any row. Afterwards start isostackd --state-dir DIR --store CONNINFO\n"
	    "(the state dir keeps the audit key and the admin token).\n"
	    "  --from sqlite:DIR  the daemon's state directory\n"
	    "  --to CONNINFO      the target database (never printed)\n"
	    "  --pubkey FILE      check the head's signature with this key (default:\n"
	    "                     DIR/audit.pub when it exists)\n";
	enum { OPT_FROM, OPT_TO, OPT_PUBKEY, NUM_FLAGS };
	static const struct option options[] = {
	    ISOCTL_FLAG("from", required_argument, OPT_FROM),
	    ISOCTL_FLAG("to", required_argument, OPT_TO),
	    ISOCTL_FLAG("pubkey", required_argument, OPT_PUBKEY), ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	const char *flag[NUM_FLAGS] = {0};
	struct iso_store_migrate_report rep;
	struct iso_error err = {0};
	_cleanup_(close_fd) int lock = -1;
	uint8_t pk[ISO_AUDIT_PK_LEN];
	const uint8_t *pkp = NULL;
	char db[4096], lockpath[4096], pubpath[4096];
	const char *dir;
	struct stat sb;
	int r;

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 0, 0, NULL) < 0)
		return p.exit_code;
	if (!flag[OPT_FROM])
		return isoctl_usage_error(ctx, "missing --from sqlite:DIR");
	if (strncmp(flag[OPT_FROM], "sqlite:", 7) != 0)
		return isoctl_usage_error(ctx, "--from: \"%s\" is not sqlite:DIR", flag[OPT_FROM]);
	dir = flag[OPT_FROM] + 7;
	if (!*dir)
		return isoctl_usage_error(ctx, "--from: empty directory name");
	if (!flag[OPT_TO])
		return isoctl_usage_error(ctx, "missing --to CONNINFO");
	if (!iso_store_spec_is_postgres(flag[OPT_TO]))
		return isoctl_usage_error(ctx, "--to: not a PostgreSQL conninfo (postgres://... or "
		                               "keywords such as \"host=... dbname=...\")");
	if (flag[OPT_PUBKEY] && !flag[OPT_PUBKEY][0])
		return isoctl_usage_error(ctx, "--pubkey: empty file name");
	if ((size_t)snprintf(db, sizeof(db), "%s/state.db", dir) >= sizeof(db) ||
	    (size_t)snprintf(lockpath, sizeof(lockpath), "%s/isostackd.lock", dir) >=
	        sizeof(lockpath) ||
	    (size_t)snprintf(pubpath, sizeof(pubpath), "%s/audit.pub", dir) >= sizeof(pubpath))
		return isoctl_usage_error(ctx, "--from: directory name too long");
	errno = 0;
	if (stat(db, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		fprintf(stderr, "isoctl: --from: no store at %s: %s\n", db,
		        errno ? strerror(errno) : "not a regular file");
		return ISOCTL_EXIT_USAGE;
	}
	/* isostackd holds an exclusive flock on this file while it runs
	 * (src/isostackd/main.c, open_lock); holding it here keeps one from
	 * starting on DIR during the copy. */
	lock = open(lockpath, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (lock < 0 && errno != ENOENT) {
		fprintf(stderr, "isoctl: --from: cannot open %s: %s\n", lockpath, strerror(errno));
		return ISOCTL_EXIT_INTERNAL;
	}
	if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0) {
		fprintf(stderr,
		        "isoctl: --from: an isostackd is running on %s (%s is locked); stop it "
		        "first\n",
		        dir, lockpath);
		return ISOCTL_EXIT_CONFLICT;
	}
	if (flag[OPT_PUBKEY] || access(pubpath, F_OK) == 0) {
		const char *path = flag[OPT_PUBKEY] ? flag[OPT_PUBKEY] : pubpath;
		if (iso_audit_pubkey_read(path, pk, &err) < 0) {
			fprintf(stderr, "isoctl: --pubkey: %s\n", err.message);
			return ISOCTL_EXIT_USAGE;
		}
		pkp = pk;
	}
	r = iso_store_migrate_to_postgres(db, flag[OPT_TO], pkp, &rep, &err);
	if (r < 0) {
		fprintf(stderr, "isoctl: --%s: %s\n", err.field[0] ? err.field : "to", err.message);
		return exit_for(&err);
	}
	printf("migrated %s to PostgreSQL\n", db);
	printf("%-14s %10s\n", "TABLE", "ROWS");
	for (int i = 0; i < rep.n_tables; i++)
		printf("%-14s %10lld\n", rep.table[i], (long long)rep.rows[i]);
	if (rep.head) {
		char hex[2 * ISO_AUDIT_HASH_LEN + 1];
		for (int i = 0; i < ISO_AUDIT_HASH_LEN; i++)
			snprintf(hex + (size_t)2 * (size_t)i, 3, "%02x", rep.head_root[i]);
		printf("audit log: %lld events verified; head size %llu root %s (%s)\n",
		       (long long)rep.audit_events, (unsigned long long)rep.head_size, hex,
		       rep.head_signature_checked ? "signature verified" : "signature not checked");
	} else {
		printf("audit log: %lld events verified; no signed head yet\n",
		       (long long)rep.audit_events);
	}
	return ISOCTL_EXIT_OK;
}

int isoctl_cmd_store(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"migrate", .run = store_migrate},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_store, argc, argv);
}

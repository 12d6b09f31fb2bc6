/* cmd_audit.c: `isoctl audit ...`: the tamper-evident audit log (/v1/audit,
 * docs/audit.md). It reads events, the signed head and the public key through
 * the API; exports the log as JSON lines, online through the API or offline
 * straight from a state dir's store (for when the daemon refuses to start);
 * and verifies exports with nothing but the public key, so that an auditor
 * need not trust the server that produced them. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isoctl/isoctl.h"
#include "isostack/audit.h"
#include "isostack/store.h"

#define EXPORT_PAGE "1000" /* events per request: the API's largest page */

static const char usage_audit[] =
    "Usage: isoctl audit SUBCOMMAND ...\n"
    "\n"
    "The tamper-evident audit log (cluster-admin and auditor: every event;\n"
    "tenant-admin: events about its tenant's objects; tenant-user: none).\n"
    "  events [--tenant T]                     the events, oldest first\n"
    "  head                                    the latest signed tree head\n"
    "  pubkey [--out FILE]                     the key that signs heads\n"
    "  export --out FILE [--tenant T]          the log as JSON lines, through the API\n"
    "  export --state-dir DIR --out FILE       the stored log, offline (no daemon)\n"
    "  verify --pubkey KEYFILE FILE...         check exports offline; exit 8 if bad\n"
    "  verify --keys KEYSET FILE...            the same against a published key set\n"
    "Run 'isoctl audit SUBCOMMAND --help' for details, 'isoctl --help' for global flags.\n";

/* ---- small helpers ---- */

static const json_t *jpath(const json_t *obj, const char *a, const char *b)
{
	const json_t *v = json_object_get(obj, a);

	return b ? json_object_get(v, b) : v;
}

static const char *jstr(const json_t *obj, const char *a, const char *b)
{
	const char *s = json_string_value(jpath(obj, a, b));

	return s ? s : "";
}

static int bad_answer(const char *what)
{
	fprintf(stderr, "isoctl: internal: unexpected answer from the server: %s\n", what);
	return ISOCTL_EXIT_INTERNAL;
}

/* Exactly `len` bytes from lowercase or uppercase hex. */
static bool hex_exact(const char *hex, uint8_t *out, size_t len)
{
	size_t n = 0;

	return hex && strlen(hex) == 2 * len &&
	       sodium_hex2bin(out, len, hex, 2 * len, NULL, &n, NULL) == 0 && n == len;
}

static bool base64_exact(const char *b64, uint8_t *out, size_t len)
{
	size_t n = 0;

	return b64 &&
	       sodium_base642bin(out, len, b64, strlen(b64), NULL, &n, NULL,
	                         sodium_base64_VARIANT_ORIGINAL) == 0 &&
	       n == len;
}

/* ---- output files: written beside the target, then renamed over it ---- */

struct outfile {
	const char *path;
	char *tmp;
	FILE *f;
};

static int outfile_open(struct outfile *o, const char *path, mode_t mode)
{
	int fd;

	o->path = path;
	o->f = NULL;
	if (asprintf(&o->tmp, "%s.tmp", path) < 0) {
		o->tmp = NULL;
		return isoctl_oom();
	}
	fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0) {
		fprintf(stderr, "isoctl: cannot create %s: %s\n", o->tmp, strerror(errno));
		free(o->tmp);
		o->tmp = NULL;
		return ISOCTL_EXIT_INTERNAL;
	}
	o->f = fdopen(fd, "w");
	if (!o->f) {
		close(fd);
		unlink(o->tmp);
		free(o->tmp);
		o->tmp = NULL;
		return isoctl_oom();
	}
	return 0;
}

/* Throws the temporary file away (any error path). */
static void outfile_abort(struct outfile *o)
{
	if (o->f)
		fclose(o->f);
	o->f = NULL;
	if (o->tmp) {
		unlink(o->tmp);
		free(o->tmp);
		o->tmp = NULL;
	}
}

/* Flushes to disk and renames into place; returns 0 or an exit code. */
static int outfile_commit(struct outfile *o)
{
	int e = 0;

	if (fflush(o->f) != 0 || ferror(o->f) || fsync(fileno(o->f)) < 0)
		e = errno ? errno : EIO;
	if (fclose(o->f) != 0 && !e)
		e = errno ? errno : EIO;
	o->f = NULL;
	if (!e && rename(o->tmp, o->path) < 0)
		e = errno;
	if (e) {
		fprintf(stderr, "isoctl: cannot write %s: %s\n", o->path, strerror(e));
		outfile_abort(o);
		return ISOCTL_EXIT_INTERNAL;
	}
	free(o->tmp);
	o->tmp = NULL;
	return 0;
}

static int write_failed(struct outfile *o)
{
	fprintf(stderr, "isoctl: cannot write %s: %s\n", o->tmp, strerror(errno ? errno : EIO));
	outfile_abort(o);
	return ISOCTL_EXIT_INTERNAL;
}

/* ---- events ---- */

/* "5f2c9a0b1d3e(cluster-admin)", or the role alone for "system" and
 * "anonymous". */
static char *fmt_actor(const json_t *ev)
{
	const char *token = jstr(ev, "actor", "token"), *role = jstr(ev, "actor", "role");
	char *s;

	if (!token[0])
		return strdup(role);
	return asprintf(&s, "%s(%s)", token, role) < 0 ? NULL : s;
}

/* "allocation/a-6f1c0e9a2b7d4c55 [acme]": kind, id, owning tenant. */
static char *fmt_object(const json_t *ev)
{
	const char *kind = jstr(ev, "object", "kind"), *id = jstr(ev, "object", "id");
	const char *tenant = jstr(ev, "object", "tenant");
	char *s;

	return asprintf(&s, "%s%s%s%s%s%s", kind, id[0] ? "/" : "", id, tenant[0] ? " [" : "",
	                tenant, tenant[0] ? "]" : "") < 0
	           ? NULL
	           : s;
}

/* "denied: role tenant-user may not do this". */
static char *fmt_outcome(const json_t *ev)
{
	const char *outcome = jstr(ev, "outcome", NULL), *reason = jstr(ev, "reason", NULL);
	char *s;

	return asprintf(&s, "%s%s%s", outcome, reason[0] ? ": " : "", reason) < 0 ? NULL : s;
}

static void add_event_row(struct isoctl_table *t, const json_t *item)
{
	const json_t *ev = json_object_get(item, "event");
	const json_t *ms = json_object_get(ev, "time"); /* ms since the epoch */
	char when[40] = "-";

	if (json_is_integer(ms))
		iso_format_time(json_integer_value(ms), when, sizeof(when));
	isoctl_table_add_json(t, json_object_get(item, "seq"));
	isoctl_table_add(t, when);
	isoctl_table_add_owned(t, fmt_actor(ev));
	isoctl_table_add_json(t, json_object_get(ev, "action"));
	isoctl_table_add_owned(t, fmt_object(ev));
	isoctl_table_add_owned(t, fmt_outcome(ev));
}

static int print_events(const json_t *body)
{
	static const char *const headers[] = {"SEQ",    "TIME",   "ACTOR",
	                                      "ACTION", "OBJECT", "OUTCOME"};

	return isoctl_print_rows(body, headers, ISO_ARRAY_SIZE(headers), add_event_row);
}

static const struct isoctl_simple_cmd audit_events = {
    .usage = "Usage: isoctl audit events [--tenant T]\n"
             "\n"
             "Lists audit events, oldest first (GET /v1/audit/events, every page).\n"
             "cluster-admin and auditor see every event, a tenant-admin the events\n"
             "about its tenant's objects. Reading the log is itself recorded.\n"
             "  --tenant T   only events about tenant T's objects\n"
             "Table: SEQ TIME ACTOR ACTION OBJECT OUTCOME; ACTOR is TOKEN(ROLE) or\n"
             "system/anonymous, OBJECT is KIND/ID [TENANT], OUTCOME carries the reason\n"
             "of a denied or failed attempt. -o json prints every item with its\n"
             "canonical bytes, leaf hash and parsed event.\n",
    .list = true,
    .path = "/v1/audit/events",
    .filters = {{"tenant", "tenant"}},
    .print = print_events,
};

static const struct isoctl_simple_cmd audit_head = {
    .usage = "Usage: isoctl audit head\n"
             "\n"
             "Prints the latest signed tree head (GET /v1/audit/head): size (events\n"
             "covered), Merkle root, time, Ed25519 signature and the signer's key id\n"
             "(key_id). The server signs a fresh head first when events came since\n"
             "the last one.\n",
    .method = "GET",
    .path = "/v1/audit/head",
    .print = isoctl_print_object,
};

/* ---- pubkey ---- */

static int audit_pubkey(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl audit pubkey [--out FILE]\n"
	    "\n"
	    "Fetches the public key that signs the audit log's heads (GET /v1/audit/pubkey)\n"
	    "and prints it in the format of the daemon's STATE_DIR/audit.pub\n"
	    "(\"ed25519:BASE64\"), the file `isoctl audit verify --pubkey` reads.\n"
	    "  --out FILE   write it to FILE instead (replaced atomically)\n"
	    "A key fetched from the server proves only what that server says: for\n"
	    "evidence, compare it with audit.pub taken from the state dir.\n";
	static const struct option options[] = {ISOCTL_FLAG("out", required_argument, 0),
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_response_ struct iso_response resp = {0};
	const char *out = NULL;
	const char *alg, *key;
	uint8_t pk[ISO_AUDIT_PK_LEN];
	char fmt[128], text[130];
	struct outfile o = {0};
	int r;

	if (isoctl_parse_line(ctx, &p, &out, 1, 0, 0, NULL) < 0)
		return p.exit_code;
	if (out && !out[0])
		return isoctl_usage_error(ctx, "--out: empty file name");
	r = isoctl_call(ctx, "GET", "/v1/audit/pubkey", NULL, &resp);
	if (r)
		return r;
	alg = jstr(resp.body, "algorithm", NULL);
	key = jstr(resp.body, "key", NULL);
	if (strcmp(alg, "ed25519") != 0 || strncmp(key, "ed25519:", 8) != 0 ||
	    !base64_exact(key + 8, pk, sizeof(pk)))
		return bad_answer("the public key is not \"ed25519:<base64 of 32 bytes>\"");
	iso_audit_pubkey_format(pk, fmt, sizeof(fmt));
	snprintf(text, sizeof(text), "%s\n", fmt); /* as in the file */
	if (!out) {
		if (ctx->output == ISOCTL_OUT_JSON)
			isoctl_print_json(resp.body);
		else
			fputs(text, stdout);
		return 0;
	}
	r = outfile_open(&o, out, 0644);
	if (r)
		return r;
	if (fputs(text, o.f) < 0)
		return write_failed(&o);
	return outfile_commit(&o);
}

/* ---- export ---- */

struct export_stats {
	uint64_t heads, events, proofs;
	uint64_t left_out; /* offline: stored events that cannot be written as they are */
	int64_t last_seq;
};

static int head_from_json(const json_t *b, struct iso_audit_head *h)
{
	const json_t *size = json_object_get(b, "size"), *ms = json_object_get(b, "time_ms");

	memset(h, 0, sizeof(*h));
	if (!json_is_integer(size) || json_integer_value(size) < 0 || !json_is_integer(ms) ||
	    !hex_exact(jstr(b, "root", NULL), h->root, sizeof(h->root)) ||
	    !base64_exact(jstr(b, "signature", NULL), h->sig, sizeof(h->sig)))
		return -1;
	h->size = (uint64_t)json_integer_value(size);
	h->time_ms = json_integer_value(ms);
	/* The signer's key id, written into the export's head line; a server
	 * from before key ids (or a head stored without one) sends none. */
	const json_t *kid = json_object_get(b, "key_id");
	if (kid && !json_is_null(kid) &&
	    (!hex_exact(json_string_value(kid), h->key_id, sizeof(h->key_id)) ||
	     !iso_audit_key_id_known(h->key_id)))
		return -1;
	return 0;
}

/* One event item of /v1/audit/events (and its proof for a partial export)
 * as export lines. */
static int export_item(struct outfile *o, const json_t *it, bool partial, uint64_t size,
                       struct export_stats *st)
{
	const json_t *seq = json_object_get(it, "seq"), *canon = json_object_get(it, "canonical");
	const json_t *inc = json_object_get(it, "inclusion");
	const json_t *proof = json_object_get(inc, "proof");
	uint8_t leaf[ISO_AUDIT_HASH_LEN];
	uint8_t hashes[ISO_AUDIT_MAX_PROOF][ISO_AUDIT_HASH_LEN];
	size_t i;
	json_t *h;

	if (!json_is_integer(seq) || json_integer_value(seq) < 0 || !json_is_string(canon) ||
	    !hex_exact(jstr(it, "leaf", NULL), leaf, sizeof(leaf)))
		return bad_answer("an event item without seq, leaf or canonical bytes");
	if (iso_audit_export_event(o->f, json_integer_value(seq), leaf, json_string_value(canon),
	                           json_string_length(canon)) < 0)
		return write_failed(o);
	st->events++;
	st->last_seq = json_integer_value(seq);
	if (!partial)
		return 0;
	if (!json_is_array(proof) || json_array_size(proof) > ISO_AUDIT_MAX_PROOF ||
	    json_integer_value(json_object_get(inc, "size")) != (json_int_t)size)
		return bad_answer("an event without its inclusion proof against the head");
	json_array_foreach (proof, i, h) {
		if (!hex_exact(json_string_value(h), hashes[i], ISO_AUDIT_HASH_LEN))
			return bad_answer("a proof hash that is not 64 hex digits");
	}
	if (iso_audit_export_inclusion(o->f, (uint64_t)st->last_seq, size, hashes,
	                               (int)json_array_size(proof)) < 0)
		return write_failed(o);
	st->proofs++;
	return 0;
}

/* Pages through /v1/audit/events up to the head's size. A full export asks
 * for every event, a partial one (a tenant's) for each with its proof. */
static int export_events(struct isoctl *ctx, struct outfile *o, const char *tenant, bool partial,
                         uint64_t size, struct export_stats *st)
{
	char after[32] = ""; /* the cursor: a seq */
	char size_s[24];

	snprintf(size_s, sizeof(size_s), "%llu", (unsigned long long)size);
	for (;;) {
		_cleanup_response_ struct iso_response resp = {0};
		_cleanup_free_ char *path = strdup("/v1/audit/events");
		const json_t *items, *next, *it;
		size_t i;
		int r;

		if (!path || isoctl_query_add(&path, "limit", EXPORT_PAGE) < 0 ||
		    (tenant && isoctl_query_add(&path, "tenant", tenant) < 0) ||
		    (partial && isoctl_query_add(&path, "size", size_s) < 0) ||
		    (after[0] && isoctl_query_add(&path, "after", after) < 0)) {
			outfile_abort(o);
			return isoctl_oom();
		}
		r = isoctl_call(ctx, "GET", path, NULL, &resp);
		if (r) {
			outfile_abort(o);
			return r;
		}
		items = json_object_get(resp.body, "items");
		next = json_object_get(resp.body, "next");
		if (!json_is_array(items) ||
		    (next && !json_is_null(next) && !json_is_string(next))) {
			outfile_abort(o);
			return bad_answer("not a list ({\"items\":[...],\"next\"})");
		}
		json_array_foreach (items, i, it) {
			const json_t *seq = json_object_get(it, "seq");
			/* Later events (this export's own reads among them) are
			 * not covered by the head. */
			if (json_is_integer(seq) && json_integer_value(seq) >= (json_int_t)size)
				return 0;
			r = export_item(o, it, partial, size, st);
			if (r) {
				outfile_abort(o);
				return r;
			}
		}
		if (!json_is_string(next))
			return 0;
		if (strcmp(after, json_string_value(next)) == 0 ||
		    iso_strlcpy(after, json_string_value(next), sizeof(after)) < 0 || !after[0]) {
			outfile_abort(o);
			return bad_answer("a cursor that is empty, too long or repeated");
		}
	}
}

static int print_export_summary(const struct isoctl *ctx, const char *file,
                                const struct export_stats *st, const char *kind)
{
	if (ctx->output == ISOCTL_OUT_JSON) {
		_cleanup_json_ json_t *j = json_pack(
		    "{s:s, s:s, s:I, s:I, s:I, s:I}", "file", file, "export", kind, "heads",
		    (json_int_t)st->heads, "events", (json_int_t)st->events, "proofs",
		    (json_int_t)st->proofs, "left_out", (json_int_t)st->left_out);
		if (!j)
			return isoctl_oom();
		isoctl_print_json(j);
		return 0;
	}
	printf("%s: %s export: %llu events, %llu heads", file, kind, (unsigned long long)st->events,
	       (unsigned long long)st->heads);
	if (st->proofs)
		printf(", %llu inclusion proofs", (unsigned long long)st->proofs);
	if (st->left_out)
		printf(", %llu stored events left out (see the warnings)",
		       (unsigned long long)st->left_out);
	putchar('\n');
	return 0;
}

static int export_online(struct isoctl *ctx, const char *out, const char *tenant)
{
	_cleanup_response_ struct iso_response who = {0};
	_cleanup_response_ struct iso_response head = {0};
	struct export_stats st = {.last_seq = -1};
	struct iso_audit_head h;
	struct outfile o = {0};
	const char *role;
	bool partial;
	int r;

	/* A tenant token can only ever get its tenant's events: a partial export. */
	r = isoctl_call(ctx, "GET", "/v1/whoami", NULL, &who);
	if (r)
		return r;
	role = jstr(who.body, "role", NULL);
	partial = tenant || strncmp(role, "tenant-", 7) == 0;
	r = isoctl_call(ctx, "GET", "/v1/audit/head", NULL, &head);
	if (r)
		return r;
	if (head_from_json(head.body, &h) < 0)
		return bad_answer("a head without size, root, time_ms or signature");
	r = outfile_open(&o, out, 0600);
	if (r)
		return r;
	if (iso_audit_export_head(o.f, &h) < 0)
		return write_failed(&o);
	st.heads = 1;
	r = export_events(ctx, &o, tenant, partial, h.size, &st);
	if (r)
		return r;
	/* Not judged here (verify does): a short answer is still what the
	 * server said, but the operator hears about it. */
	if (!partial && (st.events != h.size || st.last_seq != (int64_t)h.size - 1))
		fprintf(stderr,
		        "isoctl: warning: the server sent %llu events; its head covers %llu. "
		        "`isoctl audit verify` will say what is wrong.\n",
		        (unsigned long long)st.events, (unsigned long long)h.size);
	r = outfile_commit(&o);
	return r ? r : print_export_summary(ctx, out, &st, partial ? "partial" : "full");
}

struct offline {
	struct outfile *o;
	struct export_stats *st;
	bool write_failed; /* tells a failed write from a failed read of the store */
};

static int offline_head(void *arg, const struct iso_audit_head *h)
{
	struct offline *x = arg;

	if (iso_audit_export_head(x->o->f, h) < 0) {
		x->write_failed = true;
		return -EIO;
	}
	x->st->heads++;
	return 0;
}

static int offline_event(void *arg, const struct iso_audit_record *rec)
{
	struct offline *x = arg;

	int r = iso_audit_export_event(x->o->f, rec->seq, rec->leaf, rec->body, rec->len);

	if (r == -EINVAL) {
		/* Stored bytes that cannot sit on one export line (not an object,
		 * a raw newline) were altered: left out, verify then names the gap. */
		fprintf(stderr,
		        "isoctl: warning: event %lld: the stored bytes are not one JSON object on "
		        "one line; left out of the export\n",
		        (long long)rec->seq);
		x->st->left_out++;
		return 0;
	}
	if (r < 0) {
		x->write_failed = true;
		return -EIO;
	}
	x->st->events++;
	return 0;
}

/* Straight from the store, the bytes as they are stored: every head, then
 * every event. Nothing is judged or repaired here; verify does the judging. */
static int export_offline(struct isoctl *ctx, const char *dir, const char *out)
{
	_cleanup_(iso_store_closep) struct iso_store *s = NULL;
	_cleanup_free_ char *db = NULL;
	struct export_stats st = {.last_seq = -1};
	struct iso_error err = {0};
	struct outfile o = {0};
	struct offline x = {.o = &o, .st = &st};
	struct stat sb;
	int r;

	if (asprintf(&db, "%s/state.db", dir) < 0) {
		db = NULL;
		return isoctl_oom();
	}
	/* Opening creates a missing store: refuse first, rather than export an
	 * empty log from a mistyped directory. */
	errno = 0;
	if (stat(db, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		fprintf(stderr, "isoctl: --state-dir: no store at %s: %s\n", db,
		        errno ? strerror(errno) : "not a regular file");
		return ISOCTL_EXIT_USAGE;
	}
	if (iso_store_open_sqlite(db, &s, &err) < 0) {
		fprintf(stderr, "isoctl: %s\n", err.message);
		return ISOCTL_EXIT_INTERNAL;
	}
	r = outfile_open(&o, out, 0600);
	if (r)
		return r;
	r = s->ops->audit_head_scan(s, offline_head, &x, &err);
	if (r == 0)
		r = s->ops->audit_scan(s, -1, 0, 0, offline_event, &x, &err);
	if (x.write_failed)
		return write_failed(&o);
	if (r < 0) {
		fprintf(stderr, "isoctl: reading the audit log of %s: %s\n", db, err.message);
		outfile_abort(&o);
		return ISOCTL_EXIT_INTERNAL;
	}
	r = outfile_commit(&o);
	return r ? r : print_export_summary(ctx, out, &st, "offline");
}

static int audit_export(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl audit export --out FILE [--tenant T]\n"
	    "       isoctl audit export --state-dir DIR --out FILE\n"
	    "\n"
	    "Writes the audit log to FILE as JSON lines (docs/audit.md), for\n"
	    "`isoctl audit verify`. FILE is written beside itself and renamed into\n"
	    "place, mode 0600.\n"
	    "\n"
	    "Online (through the API): fetches the signed head (GET /v1/audit/head),\n"
	    "then every event it covers (GET /v1/audit/events).\n"
	    "  - cluster-admin or auditor without --tenant: a full export, the head and\n"
	    "    every event 0..size-1;\n"
	    "  - a tenant-admin token, or --tenant T: a partial export, the tenant's\n"
	    "    events, each with its inclusion proof against the head.\n"
	    "Events recorded after the head (the export's own reads) are left out.\n"
	    "  --tenant T      only events about tenant T's objects\n"
	    "\n"
	    "Offline: --state-dir DIR reads DIR/state.db directly (no daemon, no\n"
	    "token; works when the daemon refuses to start over a broken log) and\n"
	    "writes every stored head and event exactly as stored (an event whose bytes\n"
	    "cannot be one export line is left out, with a warning naming it).\n"
	    "  --state-dir DIR the daemon's state directory\n"
	    "  --out FILE      where to write the export (required)\n";
	enum { OPT_OUT, OPT_TENANT, OPT_STATE_DIR, NUM_FLAGS };
	static const struct option options[] = {
	    ISOCTL_FLAG("out", required_argument, OPT_OUT),
	    ISOCTL_FLAG("tenant", required_argument, OPT_TENANT),
	    ISOCTL_FLAG("state-dir", required_argument, OPT_STATE_DIR), ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	const char *flag[NUM_FLAGS] = {0};

	if (isoctl_parse_line(ctx, &p, flag, NUM_FLAGS, 0, 0, NULL) < 0)
		return p.exit_code;
	if (!flag[OPT_OUT])
		return isoctl_usage_error(ctx, "missing --out FILE");
	if (!flag[OPT_OUT][0])
		return isoctl_usage_error(ctx, "--out: empty file name");
	if (flag[OPT_TENANT] && !flag[OPT_TENANT][0])
		return isoctl_usage_error(ctx, "--tenant: empty tenant name");
	if (flag[OPT_STATE_DIR]) {
		if (!flag[OPT_STATE_DIR][0])
			return isoctl_usage_error(ctx, "--state-dir: empty directory name");
		if (flag[OPT_TENANT])
			return isoctl_usage_error(ctx,
			                          "--tenant and --state-dir exclude each other "
			                          "(an offline export holds the whole log)");
		return export_offline(ctx, flag[OPT_STATE_DIR], flag[OPT_OUT]);
	}
	return export_online(ctx, flag[OPT_OUT], flag[OPT_TENANT]);
}

/* ---- verify ---- */

static int verify_one(const char *path, const struct iso_audit_keyset *ks, json_t *results,
                      bool json_mode)
{
	struct iso_audit_verdict v = {0};
	struct iso_error err = {0};
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	int r;

	if (!f) {
		v.first_bad = -1;
		snprintf(v.message, sizeof(v.message), "cannot open: %s", strerror(errno));
	} else {
		r = iso_audit_verify_stream_keys(f, path, ks, &v, &err);
		if (r < 0) {
			memset(&v, 0, sizeof(v));
			v.first_bad = -1;
			snprintf(v.message, sizeof(v.message), "cannot read: %s",
			         err.message[0] ? err.message : strerror(-r));
		}
	}
	/* The verdict's message starts with "NAME: " and "line L: ", which the
	 * line printed here already says. */
	const char *msg = v.message;
	size_t plen = strlen(path);
	char linep[32];
	if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
		msg += plen + 2;
	snprintf(linep, sizeof(linep), "line %ld: ", v.bad_line);
	if (strncmp(msg, linep, strlen(linep)) == 0)
		msg += strlen(linep);
	if (json_mode) {
		json_t *j = json_pack(
		    "{s:s, s:b, s:I, s:I, s:o, s:o, s:s}", "file", path, "ok", v.ok, "events",
		    (json_int_t)v.events, "heads", (json_int_t)v.heads, "first_bad",
		    !v.ok && v.first_bad >= 0 ? json_integer(v.first_bad) : json_null(), "line",
		    !v.ok && v.bad_line > 0 ? json_integer(v.bad_line) : json_null(), "message",
		    v.ok ? "" : msg);
		if (!j || json_array_append_new(results, j) < 0)
			return -1;
	} else if (v.ok) {
		isoctl_fputs_clean(path, stdout);
		printf(": ok (%llu events, %llu heads)\n", (unsigned long long)v.events,
		       (unsigned long long)v.heads);
	} else {
		isoctl_fputs_clean(path, stdout);
		fputs(": FAILED", stdout);
		if (v.first_bad >= 0)
			printf(" at seq %lld", (long long)v.first_bad);
		if (v.bad_line > 0)
			printf(" (line %ld)", v.bad_line);
		fputs(": ", stdout);
		isoctl_fputs_clean(msg, stdout);
		fputc('\n', stdout);
	}
	return v.ok ? 1 : 0;
}

static int audit_verify(struct isoctl *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "Usage: isoctl audit verify --pubkey KEYFILE FILE...\n"
	    "       isoctl audit verify --keys KEYSET FILE...\n"
	    "\n"
	    "Verifies audit exports offline (no server, no token) with the public key\n"
	    "or the cluster's published key set alone: every head's Ed25519 signature\n"
	    "by a key of the set (the one its \"key\" id names); events in order with no gap,\n"
	    "duplicate or reorder; every event's bytes against its leaf hash; the\n"
	    "leaves of a full export against each head's root; each inclusion and\n"
	    "consistency proof. Prints one line per file:\n"
	    "  FILE: ok (N events, M heads)\n"
	    "  FILE: FAILED at seq S (line L): MESSAGE\n"
	    "('at seq' and 'line' are left out when no single one is at fault).\n"
	    "  --pubkey KEYFILE  the daemon's STATE_DIR/audit.pub (\"ed25519:BASE64\"),\n"
	    "                    or one written by `isoctl audit pubkey --out`\n"
	    "  --keys KEYSET     the published key set of several isostackd: one\n"
	    "                    \"ed25519:BASE64 [NAME]\" line per key (docs/audit.md)\n"
	    "Exit 0 when every file is ok, 8 when any is not (or cannot be read),\n"
	    "2 when the key file cannot be read.\n";
	static const struct option options[] = {ISOCTL_FLAG("pubkey", required_argument, 0),
	                                        ISOCTL_FLAG("keys", required_argument, 1),
	                                        ISOCTL_GLOBAL_OPTIONS};
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, usage);
	_cleanup_json_ json_t *results = json_array();
	struct iso_audit_keyset keyset, *ks = &keyset; /* about 7 KiB */
	const char *flag[2] = {NULL, NULL};            /* --pubkey, --keys */
	const char *const names[] = {"FILE"};
	uint8_t pk[ISO_AUDIT_PK_LEN];
	struct iso_error err = {0};
	bool all_ok = true;

	if (isoctl_parse_line(ctx, &p, flag, 2, 1, ISOCTL_MAX_ARGS, names) < 0)
		return p.exit_code;
	if (!flag[0] && !flag[1])
		return isoctl_usage_error(ctx, "missing --pubkey KEYFILE or --keys KEYSET");
	if (flag[0] && flag[1])
		return isoctl_usage_error(ctx, "--pubkey and --keys exclude each other");
	if (!results)
		return isoctl_oom();
	if (flag[0]) {
		if (iso_audit_pubkey_read(flag[0], pk, &err) < 0) {
			fprintf(stderr, "isoctl: --pubkey %s: %s\n", flag[0], err.message);
			return ISOCTL_EXIT_USAGE;
		}
		iso_audit_keyset_one(ks, pk);
	} else if (iso_audit_keyset_read(flag[1], ks, &err) < 0) {
		fprintf(stderr, "isoctl: --keys: %s\n", err.message);
		return ISOCTL_EXIT_USAGE;
	}
	for (int i = 0; i < p.nargs; i++) {
		int r = verify_one(p.args[i], ks, results, ctx->output == ISOCTL_OUT_JSON);
		if (r < 0)
			return isoctl_oom();
		all_ok = all_ok && r == 1;
	}
	if (ctx->output == ISOCTL_OUT_JSON)
		isoctl_print_json(results);
	return all_ok ? ISOCTL_EXIT_OK : ISOCTL_EXIT_VERIFY;
}

int isoctl_cmd_audit(struct isoctl *ctx, int argc, char **argv)
{
	static const struct isoctl_cmd verbs[] = {
	    {"events", .simple = &audit_events}, {"head", .simple = &audit_head},
	    {"pubkey", .run = audit_pubkey},     {"export", .run = audit_export},
	    {"verify", .run = audit_verify},
	};
	return isoctl_dispatch(ctx, verbs, ISO_ARRAY_SIZE(verbs), usage_audit, argc, argv);
}

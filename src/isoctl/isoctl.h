/* isoctl.h: what the files of the isoctl CLI share: the invocation context
 * (server, token, output mode), the exit codes, option parsing that accepts
 * global flags anywhere, request helpers that print errors, and rendering. */
#ifndef ISOCTL_H
#define ISOCTL_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>

#include "isostack/client.h"
#include "isostack/util.h"

/* Exit codes: the contract with scripts (docs/cli.md, `isoctl --help`). */
enum isoctl_exit {
	ISOCTL_EXIT_OK = 0,
	ISOCTL_EXIT_INTERNAL = 1,      /* internal or unexpected */
	ISOCTL_EXIT_USAGE = 2,         /* bad command line */
	ISOCTL_EXIT_NOT_FOUND = 3,     /* 404 */
	ISOCTL_EXIT_AUTH = 4,          /* 401, 403 */
	ISOCTL_EXIT_CONFLICT = 5,      /* 409, 422 */
	ISOCTL_EXIT_INVALID = 6,       /* 400, 413 */
	ISOCTL_EXIT_UNAVAILABLE = 7,   /* unreachable, timeout, 5xx */
	ISOCTL_EXIT_VERIFY = 8,        /* audit verify: an export failed its check */
	ISOCTL_EXIT_WAIT_FAILED = 9,   /* --wait: it ended failed or released */
	ISOCTL_EXIT_WAIT_TIMEOUT = 10, /* --wait: not active in time */
};

/* -o: table, json, id (the id, or name, of each object: one a line) and
 * token (only the secret of `token issue`). */
enum isoctl_output { ISOCTL_OUT_TABLE, ISOCTL_OUT_JSON, ISOCTL_OUT_ID, ISOCTL_OUT_TOKEN };

struct isoctl {
	/* From global flags; NULL when not given (environment, then defaults). */
	const char *url;
	const char *token;
	const char *token_file;
	const char *ca_file;
	long timeout_ms;
	enum isoctl_output output;
	char cmd[64];              /* command words so far, for hints: "tenant create" */
	bool have_token;           /* a token was sent: 401 hints differ */
	bool token_output;         /* the command has a secret for -o token */
	struct iso_client *client; /* created on the first request */
};

void isoctl_clear(struct isoctl *ctx);

static inline void isoctl_json_decrefp(json_t **j)
{
	json_decref(*j);
}
#define _cleanup_json_ _cleanup_(isoctl_json_decrefp)

/* ---- commands ---- */
struct isoctl_simple_cmd;

/* One word of a command table: either a function of its own or, for the
 * commands that only map the line onto one request, a table (simple.c). */
struct isoctl_cmd {
	const char *name;
	int (*run)(struct isoctl *ctx, int argc, char **argv); /* argv[0]: the word itself */
	const struct isoctl_simple_cmd *simple;                /* used when run is NULL */
};

/* Parses global flags up to the next word, which picks one of cmds; prints
 * `usage` for -h/--help. Returns an exit code. */
int isoctl_dispatch(struct isoctl *ctx, const struct isoctl_cmd *cmds, size_t n, const char *usage,
                    int argc, char **argv);

extern const struct isoctl_simple_cmd isoctl_cmd_health;
extern const struct isoctl_simple_cmd isoctl_cmd_queue, isoctl_cmd_usage; /* cmd_tenancy.c */
extern const struct isoctl_simple_cmd isoctl_cmd_version;
extern const struct isoctl_simple_cmd isoctl_cmd_whoami;
extern const struct isoctl_simple_cmd isoctl_cmd_capacity;
int isoctl_cmd_tenant(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_token(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_node(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_gpu(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_pool(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_alloc(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_sim(struct isoctl *ctx, int argc, char **argv); /* offline */
int isoctl_cmd_mig(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_audit(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_fabric(struct isoctl *ctx, int argc, char **argv); /* offline */
int isoctl_cmd_store(struct isoctl *ctx, int argc, char **argv);  /* offline */
int isoctl_cmd_org(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_project(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_quota(struct isoctl *ctx, int argc, char **argv);
int isoctl_cmd_slurm(struct isoctl *ctx, int argc, char **argv); /* cmd_slurm.c */

/* Polls allocation resp->body until it is active (0), ends released or
 * failed (9) or `seconds` pass (10); the last answer stays in *resp. With
 * `why` nothing is printed and a failure is described there (cmd_alloc.c). */
int isoctl_alloc_wait(struct isoctl *ctx, struct iso_response *resp, long long seconds,
                      struct iso_error *why);

/* ---- option parsing ---- */
enum {
	ISOCTL_OPT_URL = 1000,
	ISOCTL_OPT_TOKEN,
	ISOCTL_OPT_TOKEN_FILE,
	ISOCTL_OPT_CACERT,
	ISOCTL_OPT_TIMEOUT,
	ISOCTL_OPT_VERSION,      /* top level only */
	ISOCTL_OPT_LOCAL = 2000, /* first code free for a command's own flags */
};

/* Every command's option table ends with these, so global flags work
 * anywhere on the line. */
#define ISOCTL_GLOBAL_OPTIONS                                                                      \
	{"url", required_argument, NULL, ISOCTL_OPT_URL},                                          \
	    {"token", required_argument, NULL, ISOCTL_OPT_TOKEN},                                  \
	    {"token-file", required_argument, NULL, ISOCTL_OPT_TOKEN_FILE},                        \
	    {"cacert", required_argument, NULL, ISOCTL_OPT_CACERT},                                \
	    {"timeout", required_argument, NULL, ISOCTL_OPT_TIMEOUT},                              \
	    {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},            \
	{                                                                                          \
		NULL, 0, NULL, 0                                                                   \
	}

#define ISOCTL_MAX_ARGS 8

struct isoctl_parser {
	int argc;
	char **argv;
	const struct option *options;      /* ends with ISOCTL_GLOBAL_OPTIONS */
	const char *usage;                 /* printed for -h/--help */
	const char *args[ISOCTL_MAX_ARGS]; /* positional arguments, in order */
	int nargs;
	int exit_code; /* set when isoctl_next_option() returns -1 */
	bool started;
};

#define ISOCTL_PARSER(argc_, argv_, options_, usage_)                                              \
	{                                                                                          \
		.argc = (argc_), .argv = (argv_), .options = (options_), .usage = (usage_)         \
	}

/* Next command-specific option: returns its code (>= ISOCTL_OPT_LOCAL) with
 * *arg set, 0 at the end, -1 when parsing must stop with p->exit_code (help
 * printed: 0; bad line: 2, message printed). Handles global flags itself and
 * collects positional arguments in p->args. */
int isoctl_next_option(struct isoctl *ctx, struct isoctl_parser *p, const char **arg);

/* Checks that there are min..max positional arguments; `names` ("NAME")
 * names the first missing one. Returns 0 or the usage exit code. */
int isoctl_want_args(struct isoctl *ctx, const struct isoctl_parser *p, int min, int max,
                     const char *const *names);

/* A command's own flag whose value lands in values[index] of
 * isoctl_parse_line(). */
#define ISOCTL_FLAG(name, has_arg, index)                                                          \
	{                                                                                          \
		(name), (has_arg), NULL, ISOCTL_OPT_LOCAL + (index)                                \
	}

/* Parses a leaf command's whole line: the value of each ISOCTL_FLAG goes to
 * values[index] ("" for a flag without value; the last one given wins,
 * values not given stay as they were), then checks for min..max positional
 * arguments (see isoctl_want_args). Returns 0 to go on, or -1 to stop with
 * p->exit_code (0 after --help). */
int isoctl_parse_line(struct isoctl *ctx, struct isoctl_parser *p, const char **values,
                      size_t nvalues, int min, int max, const char *const *names);

/* Prints "isoctl: MESSAGE" and a hint to the command's --help; returns 2. */
int isoctl_usage_error(const struct isoctl *ctx, const char *fmt, ...) _printf_(2, 3);

/* Strict integer from a flag value: whole string, base 10, in [min, max]. */
int isoctl_parse_int(const struct isoctl *ctx, const char *flag, const char *s, long long min,
                     long long max, long long *out);

/* ---- requests ---- */
/* Perform one request; on transport failure or a non-2xx answer print the
 * error and return its exit code, else return 0 with *resp filled. */
int isoctl_call(struct isoctl *ctx, const char *method, const char *path, const json_t *body,
                struct iso_response *resp);
/* isoctl_call with extra headers ("Name: value", NULL-terminated; NULL:
 * none) that prints nothing: a failure is described in *why (the server's
 * message and field, or the transport's) and its exit code returned. For
 * commands that report errors their own way (`slurm prolog`). */
int isoctl_call_quiet(struct isoctl *ctx, const char *method, const char *path, const json_t *body,
                      const char *const *headers, struct iso_response *resp, struct iso_error *why);
/* Same for a list: every page, combined into {"items":[...]}. */
int isoctl_list(struct isoctl *ctx, const char *path, struct iso_response *resp);

/* "/v1/tenants/" + escaped segment + suffix; NULL when out of memory. */
char *isoctl_path(const char *prefix, const char *segment, const char *suffix);
/* Appends "?key=value" or "&key=value" (value escaped) to *path; -1 on OOM. */
int isoctl_query_add(char **path, const char *key, const char *value);

/* obj[key] = value. A value that is not UTF-8 is a usage error naming
 * `what` (the flag or argument). Returns 0 or an exit code. */
int isoctl_set_string(const struct isoctl *ctx, json_t *obj, const char *key, const char *what,
                      const char *value);
int isoctl_set_int(json_t *obj, const char *key, long long value);

/* For offline commands (no server): the exit code of a library error
 * (invalid input 6, not found 3, anything else 1), and printing it. */
int isoctl_exit_of_error(const struct iso_error *e);
int isoctl_fail_local(const struct iso_error *e);

/* Prints "isoctl: out of memory" and returns the internal exit code. */
int isoctl_oom(void);

/* ---- output ---- */
/* The server's JSON, 2-space indent, newline; nothing for NULL (no body). */
void isoctl_print_json(const json_t *j);

/* Writes text from the server with control characters replaced by '?', so
 * that it can never drive the terminal. */
void isoctl_fputs_clean(const char *s, FILE *f);

/* A table of text cells with aligned columns; cells are copied and stripped
 * of control characters. */
struct isoctl_table {
	size_t ncols;
	const char *const *headers; /* NULL: no header line (key/value blocks) */
	char **cells;
	size_t ncells;
	size_t cap;
	bool oom;
};
void isoctl_table_init(struct isoctl_table *t, size_t ncols, const char *const *headers);
void isoctl_table_add(struct isoctl_table *t, const char *text); /* next cell; "-" for NULL/"" */
void isoctl_table_add_owned(struct isoctl_table *t, char *text); /* takes it; NULL: OOM */
void isoctl_table_addf(struct isoctl_table *t, const char *fmt, ...) _printf_(2, 3);
void isoctl_table_add_json(struct isoctl_table *t, const json_t *v); /* "-" for null/"" */
/* Prints to stdout; returns 0 or the internal exit code when out of memory. */
int isoctl_table_print(struct isoctl_table *t);
void isoctl_table_clear(struct isoctl_table *t);

/* A key/value block of every member of a JSON object ("key:  value"). */
int isoctl_print_object(const json_t *obj);

/* A table with a header line and one row per element of body["items"] (a
 * list), or one row for a body that is a single object (get, cordon, ...). */
int isoctl_print_rows(const json_t *body, const char *const *headers, size_t ncols,
                      void (*add_row)(struct isoctl_table *t, const json_t *item));

/* Shared cell formats. */
char *isoctl_fmt_gib(const json_t *mib);                                        /* "64" or "1.5" */
char *isoctl_fmt_used_total(const json_t *used, const json_t *total, bool gib); /* "8/64" */

/* Prints the answer: its JSON in json mode, its ids in id mode, the secret
 * in token mode, else through `table` applied to the body. Returns an exit
 * code. */
int isoctl_render(const struct isoctl *ctx, const struct iso_response *resp,
                  int (*table)(const json_t *body));

/* isoctl_call, then isoctl_render of its answer. Returns an exit code. */
int isoctl_call_render(struct isoctl *ctx, const char *method, const char *path, const json_t *body,
                       int (*table)(const json_t *body));

/* ---- simple commands (simple.c) ---- */
#define ISOCTL_MAX_FILTERS 4

/* A filter flag of a list: --FLAG VALUE asks the server for ?KEY=VALUE. */
struct isoctl_filter {
	const char *flag; /* without "--"; NULL ends the list */
	const char *key;  /* NULL: a switch without value, accepted and ignored */
};

/* A command that maps its line onto one request and prints the answer:
 * no flags but the filters of a list, and at most one argument, which
 * becomes a path segment. */
struct isoctl_simple_cmd {
	const char *usage;  /* printed for -h/--help */
	const char *path;   /* "/v1/nodes"; with `arg`, the prefix: "/v1/nodes/" */
	const char *arg;    /* the one argument, "NAME" or "ID"; NULL: none */
	const char *suffix; /* after the argument: "/cordon"; NULL: none */
	bool list;          /* GET every page; else one call of `method` */
	const char *method;
	struct isoctl_filter filters[ISOCTL_MAX_FILTERS];
	int (*print)(const json_t *body); /* table mode */
	/* For a call answered 204 No Content: table mode prints "NOUN ARG PAST"
	 * ("tenant acme deleted") instead of the body. NULL: print the body. */
	const char *noun, *past;
};

/* Runs `cmd` for the line argc/argv (argv[0]: the command word). Returns an
 * exit code. */
int isoctl_run_simple(struct isoctl *ctx, const struct isoctl_simple_cmd *cmd, int argc,
                      char **argv);

#endif

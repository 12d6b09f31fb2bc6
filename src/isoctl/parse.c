/* parse.c: the command line of isoctl. Global flags may stand before, between
 * or after the command words: every level parses them with getopt_long, the
 * words pick the next level, and each leaf command's option table carries
 * the global flags too. Usage errors print one line and a hint, exit 2. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "isoctl/isoctl.h"

int isoctl_usage_error(const struct isoctl *ctx, const char *fmt, ...)
{
	va_list ap;

	fputs("isoctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'isoctl%s%s --help'.\n", ctx->cmd[0] ? " " : "", ctx->cmd);
	return ISOCTL_EXIT_USAGE;
}

int isoctl_parse_int(const struct isoctl *ctx, const char *flag, const char *s, long long min,
                     long long max, long long *out)
{
	char *end = NULL;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (s[0] == '\0' || *end != '\0' || s[0] == ' ' || s[0] == '+')
		return isoctl_usage_error(ctx, "%s: '%s' is not an integer", flag, s);
	if (errno == ERANGE || v < min || v > max)
		return isoctl_usage_error(ctx, "%s: %s is out of range %lld..%lld", flag, s, min,
		                          max);
	*out = v;
	return 0;
}

static int parse_timeout(struct isoctl *ctx, const char *s)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (s[0] == '\0' || *end != '\0' || errno == ERANGE || !isfinite(v) || v <= 0 || v > 86400)
		return isoctl_usage_error(ctx,
		                          "--timeout: '%s' is not a number of seconds in "
		                          "(0, 86400]",
		                          s);
	ctx->timeout_ms = (long)ceil(v * 1000.0);
	return 0;
}

/* The option that getopt just refused, as the user wrote it. */
static const char *bad_option(char **argv, char shortopt[3])
{
	/* A short option is reported in optopt; a long one (also one missing
	 * its value, whose code lands in optopt) only in argv. */
	if (optopt > 0 && optopt < 128 && strncmp(argv[optind - 1], "--", 2) != 0) {
		shortopt[0] = '-';
		shortopt[1] = (char)optopt;
		shortopt[2] = '\0';
		return shortopt;
	}
	return argv[optind - 1];
}

/* getopt_long accepts any unique prefix of a long option ("--member" for
 * "--members"). A prefix that works today becomes ambiguous, or means
 * another flag, when a flag is added, so scripts must spell flags out:
 * returns 0 when the long option just parsed (options[idx]) was written in
 * full, else prints a usage error and returns its exit code. */
static int check_exact(const struct isoctl *ctx, char **argv, const struct option *options, int idx)
{
	const char *name = options[idx].name, *text = argv[optind - 1];
	size_t len;

	/* With its value in the next word, the option is the word before it. */
	if (strncmp(text, "--", 2) != 0 ||
	    (optarg && optarg == text && options[idx].has_arg != no_argument))
		text = argv[optind - 2];
	len = strcspn(text + 2, "=");
	if (len == strlen(name) && strncmp(text + 2, name, len) == 0)
		return 0;
	return isoctl_usage_error(ctx, "option '%.*s' is abbreviated: write '--%s'", (int)(len + 2),
	                          text, name);
}

/* getopt_long, refusing abbreviated long options: returns what getopt_long
 * does, or -2 with *exit_code set after an abbreviation. */
static int next_opt(const struct isoctl *ctx, int argc, char **argv, const char *shortopts,
                    const struct option *options, int *exit_code)
{
	int idx = -1;
	int c = getopt_long(argc, argv, shortopts, options, &idx);

	if (c != -1 && idx >= 0) {
		*exit_code = check_exact(ctx, argv, options, idx);
		if (*exit_code)
			return -2;
	}
	return c;
}

/* Handles one global flag or getopt complaint. Returns -1 to go on, else the
 * exit code to stop with. */
static int global_option(struct isoctl *ctx, int c, char **argv, const char *usage)
{
	char opt[3];

	switch (c) {
	case ISOCTL_OPT_URL:
		ctx->url = optarg;
		return -1;
	case ISOCTL_OPT_TOKEN:
		ctx->token = optarg;
		return -1;
	case ISOCTL_OPT_TOKEN_FILE:
		ctx->token_file = optarg;
		return -1;
	case ISOCTL_OPT_CACERT:
		ctx->ca_file = optarg;
		return -1;
	case ISOCTL_OPT_TIMEOUT:
		return parse_timeout(ctx, optarg) ? ISOCTL_EXIT_USAGE : -1;
	case 'o':
		if (strcmp(optarg, "table") == 0)
			ctx->output = ISOCTL_OUT_TABLE;
		else if (strcmp(optarg, "json") == 0)
			ctx->output = ISOCTL_OUT_JSON;
		else if (strcmp(optarg, "id") == 0)
			ctx->output = ISOCTL_OUT_ID;
		else if (strcmp(optarg, "token") == 0)
			ctx->output = ISOCTL_OUT_TOKEN;
		else
			return isoctl_usage_error(
			    ctx, "-o: unknown output format '%s' (table, json, id, token)", optarg);
		return -1;
	case ISOCTL_OPT_VERSION:
		printf("isoctl %s\n", ISO_VERSION);
		return ISOCTL_EXIT_OK;
	case 'h':
		fputs(usage, stdout);
		return ISOCTL_EXIT_OK;
	case ':':
		return isoctl_usage_error(ctx, "option '%s' needs a value", bad_option(argv, opt));
	default:
		return isoctl_usage_error(ctx, "unknown option '%s'", bad_option(argv, opt));
	}
}

static void append_word(struct isoctl *ctx, const char *word)
{
	size_t n = strlen(ctx->cmd);

	snprintf(ctx->cmd + n, sizeof(ctx->cmd) - n, "%s%s", n ? " " : "", word);
}

int isoctl_dispatch(struct isoctl *ctx, const struct isoctl_cmd *cmds, size_t n, const char *usage,
                    int argc, char **argv)
{
	/* --version only before the first word: `isoctl --version`. */
	static const struct option top_options[] = {
	    {"version", no_argument, NULL, ISOCTL_OPT_VERSION}, ISOCTL_GLOBAL_OPTIONS};
	const struct option *options = ctx->cmd[0] ? top_options + 1 : top_options;
	const char *word;
	int c, r = 0;

	optind = 0; /* full re-initialisation of glibc's getopt */
	opterr = 0;
	/* '+': stop at the first word, which belongs to the next level. */
	while ((c = next_opt(ctx, argc, argv, "+:ho:", options, &r)) != -1) {
		if (c == -2)
			return r;
		r = global_option(ctx, c, argv, usage);
		if (r >= 0)
			return r;
	}
	if (optind >= argc) {
		char words[256] = "";
		for (size_t i = 0; i < n; i++) {
			size_t len = strlen(words);
			snprintf(words + len, sizeof(words) - len, "%s%s", i ? ", " : "",
			         cmds[i].name);
		}
		return isoctl_usage_error(ctx, "missing %s (one of: %s)",
		                          ctx->cmd[0] ? "subcommand" : "command", words);
	}
	word = argv[optind];
	for (size_t i = 0; i < n; i++) {
		if (strcmp(word, cmds[i].name) == 0) {
			append_word(ctx, word);
			if (!cmds[i].run)
				return isoctl_run_simple(ctx, cmds[i].simple, argc - optind,
				                         argv + optind);
			return cmds[i].run(ctx, argc - optind, argv + optind);
		}
	}
	return isoctl_usage_error(ctx, "unknown %s '%s'", ctx->cmd[0] ? "subcommand" : "command",
	                          word);
}

static int add_arg(struct isoctl *ctx, struct isoctl_parser *p, const char *a)
{
	if (p->nargs == ISOCTL_MAX_ARGS) {
		p->exit_code = isoctl_usage_error(ctx, "too many arguments");
		return -1;
	}
	p->args[p->nargs++] = a;
	return 0;
}

int isoctl_next_option(struct isoctl *ctx, struct isoctl_parser *p, const char **arg)
{
	int c, r;

	if (!p->started) {
		optind = 0;
		opterr = 0;
		p->started = true;
	}
	*arg = NULL;
	for (;;) {
		/* '-': words come back as code 1 in order, whatever POSIXLY_CORRECT says. */
		c = next_opt(ctx, p->argc, p->argv, "-:ho:", p->options, &p->exit_code);
		if (c == -2)
			return -1;
		if (c == -1) {
			while (optind < p->argc) /* what follows "--" */
				if (add_arg(ctx, p, p->argv[optind++]) < 0)
					return -1;
			return 0;
		}
		if (c == 1) {
			if (add_arg(ctx, p, optarg) < 0)
				return -1;
			continue;
		}
		if (c >= ISOCTL_OPT_LOCAL) {
			*arg = optarg;
			return c;
		}
		r = global_option(ctx, c, p->argv, p->usage);
		if (r >= 0) {
			p->exit_code = r;
			return -1;
		}
	}
}

int isoctl_want_args(struct isoctl *ctx, const struct isoctl_parser *p, int min, int max,
                     const char *const *names)
{
	if (p->nargs < min)
		return isoctl_usage_error(ctx, "missing %s", names[p->nargs]);
	if (p->nargs > max)
		return isoctl_usage_error(ctx, "unexpected argument '%s'", p->args[max]);
	return 0;
}

int isoctl_parse_line(struct isoctl *ctx, struct isoctl_parser *p, const char **values,
                      size_t nvalues, int min, int max, const char *const *names)
{
	const char *arg;
	int c;

	while ((c = isoctl_next_option(ctx, p, &arg)) > 0)
		if ((size_t)(c - ISOCTL_OPT_LOCAL) < nvalues)
			values[c - ISOCTL_OPT_LOCAL] = arg ? arg : "";
	if (c < 0)
		return -1;
	p->exit_code = isoctl_want_args(ctx, p, min, max, names);
	return p->exit_code ? -1 : 0;
}

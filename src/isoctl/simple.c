/* simple.c: the one runner behind every isoctl command that only maps its
 * line onto one request: lists with filter flags (`node list --pool P`), one
 * object by NAME or ID (`tenant get`, `node cordon`), and the one-word reads
 * (`health`). Each such command is a struct isoctl_simple_cmd in its
 * resource's file; commands with logic of their own stay functions there. */
#include <string.h>

#include "isoctl/isoctl.h"

static const struct option global_options[] = {ISOCTL_GLOBAL_OPTIONS};

/* The command's filter flags, then the global ones (with the end marker). */
static void build_options(const struct isoctl_simple_cmd *cmd, struct option *options)
{
	size_t n = 0;

	for (; n < ISOCTL_MAX_FILTERS && cmd->filters[n].flag; n++) {
		const struct isoctl_filter *f = &cmd->filters[n];

		options[n] = (struct option)ISOCTL_FLAG(
		    f->flag, f->key ? required_argument : no_argument, (int)n);
	}
	memcpy(options + n, global_options, sizeof(global_options));
}

/* The request path: the argument escaped into it, the filters given as a
 * query. NULL when out of memory. */
static char *build_path(const struct isoctl_simple_cmd *cmd, const struct isoctl_parser *p,
                        const char *const *values)
{
	char *path = cmd->arg ? isoctl_path(cmd->path, p->args[0], cmd->suffix ? cmd->suffix : "")
	                      : strdup(cmd->path);

	for (size_t i = 0; path && i < ISOCTL_MAX_FILTERS && cmd->filters[i].flag; i++) {
		if (!cmd->filters[i].key || !values[i])
			continue;
		if (isoctl_query_add(&path, cmd->filters[i].key, values[i]) < 0) {
			free(path);
			return NULL;
		}
	}
	return path;
}

int isoctl_run_simple(struct isoctl *ctx, const struct isoctl_simple_cmd *cmd, int argc,
                      char **argv)
{
	struct option options[ISOCTL_MAX_FILTERS + ISO_ARRAY_SIZE(global_options)];
	struct isoctl_parser p = ISOCTL_PARSER(argc, argv, options, cmd->usage);
	_cleanup_response_ struct iso_response resp = {0};
	_cleanup_free_ char *path = NULL;
	const char *values[ISOCTL_MAX_FILTERS] = {0};
	int nargs = cmd->arg ? 1 : 0;
	int r;

	build_options(cmd, options);
	if (isoctl_parse_line(ctx, &p, values, ISO_ARRAY_SIZE(values), nargs, nargs, &cmd->arg) < 0)
		return p.exit_code;
	path = build_path(cmd, &p, values);
	if (!path)
		return isoctl_oom();
	if (cmd->list)
		r = isoctl_list(ctx, path, &resp);
	else
		r = isoctl_call(ctx, cmd->method, path, NULL, &resp);
	if (r)
		return r;
	if (cmd->noun && ctx->output == ISOCTL_OUT_TABLE) {
		printf("%s %s %s\n", cmd->noun, p.args[0], cmd->past);
		return 0;
	}
	return isoctl_render(ctx, &resp, cmd->print);
}

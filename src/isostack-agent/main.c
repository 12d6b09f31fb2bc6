/* main.c: isostack-agent, the node agent (docs/agent.md). A thin main: the
 * flags, the loop and reconcile are library code in src/agent/. This file
 * owns the process: signals (SIGTERM and SIGINT stop it cleanly) and curl's
 * global set-up, and hands `isostack-agent exec` to its own main
 * (src/agent/exec.c). */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/agent.h"

struct run {
	struct iso_agent_config cfg;
	struct iso_error err;
	int rc;
};

static void *runner(void *arg)
{
	struct run *r = arg;

	r->rc = iso_agent_run(&r->cfg, &r->err);
	/* Wakes the main thread when the loop ends by itself. */
	kill(getpid(), SIGTERM);
	return NULL;
}

int main(int argc, char **argv)
{
	atomic_bool stop = false;
	struct run run = {0};
	_cleanup_free_ char *token = NULL;
	sigset_t set;
	pthread_t t;
	int sig, r;

	/* `isostack-agent exec ...`: a one-shot client of a running agent */
	if (argc > 1 && strcmp(argv[1], "exec") == 0)
		return iso_agent_exec_main(argc - 1, argv + 1);
	r = iso_agent_parse_args(argc, argv, &run.cfg, &token, &run.err);
	if (r == 1) {
		fputs(iso_agent_usage, stdout);
		iso_agent_config_clear(&run.cfg);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "isostack-agent: %s\n%s", run.err.message, iso_agent_usage);
		iso_agent_config_clear(&run.cfg);
		return 2;
	}
	run.cfg.stop = &stop;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		fprintf(stderr, "isostack-agent: cannot initialise libcurl\n");
		iso_agent_config_clear(&run.cfg);
		return 1;
	}
	iso_log(ISO_LOG_INFO, "agent.start", "version=%s controller=%s nodes=%zu", ISO_VERSION,
	        run.cfg.controller, run.cfg.n_nodes);
	if (pthread_create(&t, NULL, runner, &run) != 0) {
		fprintf(stderr, "isostack-agent: cannot start\n");
		iso_agent_config_clear(&run.cfg);
		return 1;
	}
	sigwait(&set, &sig);
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	curl_global_cleanup();
	iso_agent_config_clear(&run.cfg);
	if (run.rc < 0) {
		iso_log(ISO_LOG_ERR, "agent.failed", "field=%s msg=\"%s\"", run.err.field,
		        run.err.message);
		return 1;
	}
	iso_log(ISO_LOG_INFO, "agent.stop", "signal=%d", sig);
	return 0;
}

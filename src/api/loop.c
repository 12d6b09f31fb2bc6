/* loop.c: isostackd's one event loop, in the spirit of Redis's serverCron.
 * One thread waits in epoll_wait on four descriptors: libmicrohttpd's own
 * epoll set (external-poll mode), a signalfd for SIGINT and SIGTERM, a
 * timerfd that fires every 50 ms for the controller's tick, and the eventfd
 * on which the worker thread posts a deferred request back (server.c,
 * api_defer). Every request handler, every tick, every long-poll answer and
 * every held refusal runs here, one after the other, so the controller needs
 * no lock; nothing that blocks may run here (docs/architecture.md). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "api/internal.h"

#define LOOP_TICK_NS  (50L * 1000 * 1000)
#define LOOP_DRAIN_NS (10LL * 1000 * 1000 * 1000) /* the most a stop waits for answers */

enum { EV_MHD = 1, EV_SIGNAL, EV_TICK, EV_WORKER };

struct loop {
	struct iso_api *api;
	int ep, sfd, tfd;
	int sig;    /* the stopping signal, once one came */
	int role;   /* ISO_API_ELECTED or ISO_API_DEPOSED once the lease says so */
	int failed; /* -errno of a failed sync: the loop stops */
	struct iso_error sync_err;
};

static int watch(int ep, int fd, uint32_t tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = tag};

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* How long epoll_wait may sleep: until libmicrohttpd's next timeout (0 when
 * it has data already read and not yet processed), at most cap_ms (-1: no
 * cap; the timerfd wakes it anyway). */
static int wait_ms(struct MHD_Daemon *mhd, int cap_ms)
{
	MHD_UNSIGNED_LONG_LONG t;

	if (MHD_get_timeout(mhd, &t) != MHD_YES)
		return cap_ms;
	if (t > INT_MAX)
		t = INT_MAX;
	return cap_ms >= 0 && (int)t > cap_ms ? cap_ms : (int)t;
}

/* One turn: wait, then the tick when the timerfd fired (before
 * libmicrohttpd's work, however much of it there is, so that a stream of
 * requests cannot push the tick back), a deferred request the worker posted,
 * one bounded pass of libmicrohttpd (its handlers), and the settle step. */
static int turn(struct loop *l, int cap_ms)
{
	struct epoll_event evs[8];
	struct iso_controller *ctl = api_controller(l->api);
	struct MHD_Daemon *mhd = api_mhd(l->api);
	bool tick = false, worker = false;
	/* Replies that wait for a flush (group commit) do not wait for an event. */
	int n = epoll_wait(l->ep, evs, (int)ISO_ARRAY_SIZE(evs),
	                   api_sync_pending(l->api) ? 0 : wait_ms(mhd, cap_ms));

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		struct signalfd_siginfo si;
		uint64_t count;

		switch (evs[i].data.u32) {
		case EV_SIGNAL:
			while (read(l->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				if (!l->sig)
					l->sig = (int)si.ssi_signo;
			break;
		case EV_TICK:
			tick = read(l->tfd, &count, sizeof(count)) == (ssize_t)sizeof(count);
			break;
		case EV_WORKER:
			worker = true;
			break;
		default: /* EV_MHD: MHD_run below, every turn */
			break;
		}
	}
	if (tick) {
		/* The lease first (docs/store.md, "High availability"): a leader
		 * that lost it, or whose lease ran out by its own clock while a
		 * renew failed, does not tick the controller again. */
		struct iso_lease *lease = api_lease(l->api);
		if (lease && iso_lease_tick(lease) == ISO_LEASE_LEADER && !ctl && !l->role)
			l->role = ISO_API_ELECTED;
		if (ctl && (!lease || iso_lease_holds(lease)))
			iso_controller_tick(ctl);
		api_tick(l->api);
	}
	if (worker)
		api_worker_collect(l->api);
	/* Group commit: one flush for every commit since the last one (the
	 * previous turn's requests, this turn's tick), then the replies that
	 * waited for it are resumed, and MHD_run below sends them while it
	 * reads the next batch. */
	struct iso_error err = {0};
	int r = api_sync(l->api, &err);
	if (r < 0 && !l->failed) {
		l->failed = r;
		l->sync_err = err;
		iso_log(ISO_LOG_ERR, "store_sync_failed", "error=\"%s\"", err.message);
	}
	MHD_run(mhd);
	if (ctl)
		iso_controller_settle(ctl);
	/* A write that found the term moved deposes the lease at once. */
	if (ctl && api_lease(l->api) && iso_lease_role(api_lease(l->api)) == ISO_LEASE_DEPOSED &&
	    !l->role)
		l->role = ISO_API_DEPOSED;
	return 0;
}

static void loop_close(struct loop *l)
{
	if (l->ep >= 0)
		close(l->ep);
	if (l->sfd >= 0)
		close(l->sfd);
	if (l->tfd >= 0)
		close(l->tfd);
}

int iso_api_run(struct iso_api *api, struct iso_error *err)
{
	struct loop l = {.api = api, .ep = -1, .sfd = -1, .tfd = -1};
	struct itimerspec its = {.it_interval = {.tv_nsec = LOOP_TICK_NS},
	                         .it_value = {.tv_nsec = LOOP_TICK_NS}};
	const union MHD_DaemonInfo *info =
	    MHD_get_daemon_info(api_mhd(api), MHD_DAEMON_INFO_EPOLL_FD);
	sigset_t sigs;
	int64_t until;
	int r;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	l.ep = epoll_create1(EPOLL_CLOEXEC);
	l.sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	l.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	r = l.ep < 0 || l.sfd < 0 || l.tfd < 0 ? -errno : 0;
	if (r == 0 && timerfd_settime(l.tfd, 0, &its, NULL) < 0)
		r = -errno;
	if (r == 0 && !info)
		r = -EINVAL;
	if (r == 0)
		r = watch(l.ep, info->epoll_fd, EV_MHD);
	if (r == 0)
		r = watch(l.ep, l.sfd, EV_SIGNAL);
	if (r == 0)
		r = watch(l.ep, l.tfd, EV_TICK);
	if (r == 0)
		r = watch(l.ep, api_worker_fd(api), EV_WORKER);
	while (r == 0 && !l.sig && !l.failed && !l.role)
		r = turn(&l, -1);
	if (r == 0 && l.role == ISO_API_ELECTED && !l.sig && !l.failed) {
		/* A follower has nothing in flight that needs its state: the
		 * caller attaches a controller and runs the loop again. */
		loop_close(&l);
		return ISO_API_ELECTED;
	}
	if (r < 0) {
		loop_close(&l);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "event loop: %s", strerror(-r));
	}
	/* Stopping: what waits is answered and sent before the caller stops
	 * libmicrohttpd, within a bound (a client that keeps asking on a kept-
	 * alive connection does not hold the stop up for longer). */
	api_close_begin(api);
	until = (int64_t)iso_mono_ns() + LOOP_DRAIN_NS;
	while (r == 0 && !api_idle(api) && (int64_t)iso_mono_ns() < until)
		r = turn(&l, 50);
	loop_close(&l);
	if (r == 0 && l.failed) {
		if (err)
			*err = l.sync_err;
		return l.failed;
	}
	return l.role == ISO_API_DEPOSED && !l.sig ? ISO_API_DEPOSED : l.sig;
}

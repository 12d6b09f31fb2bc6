/* bench/sandbox/overlay.c: what the tenant overlay and its nft guard cost
 * TCP between two members on two hosts (issue 14: the guard <= 1% of RTT).
 * Hosts are network namespaces h1 and h2 on one underlay bridge (veths, as
 * in tests/unit/test_overlay_real.c); members m1 and m2 are namespaces of
 * their own on the tenant's overlay (src/sandbox/overlay.c). Each round runs
 * three variants in a rotating order:
 *   bare     h1 -> h2 over the underlay veths and bridge, no overlay, no guard;
 *   overlay  m1 -> m2 over VXLAN, no guard (nft table removed on both);
 *   empty    m1 -> m2 over VXLAN with only an empty nft base chain at the
 *            guard's hook and priority on both hosts: the floor, what any
 *            input chain costs there;
 *   guarded  m1 -> m2 over VXLAN with the guard on both hosts.
 * Each variant times N ping-pongs of a 64-byte message over one TCP
 * connection (TCP_NODELAY; p50 and p99 of the round trips), then sends in
 * bulk for S seconds (128 KiB writes; Gbit/s of what the receiver read).
 * The figures are the medians over rounds, and the ratios of the medians.
 * Needs root; answers 77 (skipped) otherwise.
 * Usage: overlay [--quick] [--rounds R] [--pings N] [--seconds S]; results
 * and the command go to docs/benchmarks.md ("Sandbox: tenant overlay"). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/sandbox.h"
#include "isostack/util.h"

#define VNI  20001
#define MSG  64
#define BULK (128 * 1024)

static char pfx[32];

static int sh(const char *fmt, ...) _printf_(1, 2);
static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void ns_path(const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "/run/netns/%s%s", pfx, name);
}

static int socket_in(const char *name)
{
	char path[128];
	ns_path(name, path, sizeof(path));
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		perror("setns");
		exit(1);
	}
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	close(fd);
	close(self);
	return s;
}

static int full(int fd, char *buf, size_t n, bool wr)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = wr ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

struct server {
	int listener;
	bool echo; /* else sink: read until EOF */
	uint64_t bytes;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	int c = accept(s->listener, NULL, NULL);
	if (c < 0)
		return NULL;
	int one = 1;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	static __thread char buf[BULK];
	if (s->echo) {
		while (full(c, buf, MSG, false) == 0 && full(c, buf, MSG, true) == 0)
			;
	} else {
		ssize_t k;
		while ((k = read(c, buf, sizeof(buf))) > 0)
			s->bytes += (uint64_t)k;
	}
	close(c);
	return NULL;
}

/* A connection from namespace `from` to a fresh server in `to` at ip. */
static int connect_pair(const char *from, const char *to, const char *ip, struct server *srv,
                        pthread_t *th, bool echo)
{
	static int port = 6000;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port++)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	srv->listener = socket_in(to);
	srv->echo = echo;
	srv->bytes = 0;
	int one = 1;
	setsockopt(srv->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(srv->listener, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(srv->listener, 1) < 0) {
		perror("bind/listen");
		exit(1);
	}
	pthread_create(th, NULL, serve, srv);
	int c = socket_in(from);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return c;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct sample {
	double p50_us, p99_us, gbps;
};

static struct sample measure(const char *from, const char *to, const char *ip, long pings,
                             double seconds)
{
	struct sample s = {0};
	struct server srv;
	pthread_t th;
	int c = connect_pair(from, to, ip, &srv, &th, true);
	char msg[MSG] = {0};
	uint64_t *rtt = calloc((size_t)pings, sizeof(*rtt));
	for (long i = -200; i < pings; i++) { /* 200 to warm up */
		uint64_t t0 = iso_mono_ns();
		if (full(c, msg, MSG, true) < 0 || full(c, msg, MSG, false) < 0) {
			fprintf(stderr, "ping-pong failed\n");
			exit(1);
		}
		if (i >= 0)
			rtt[i] = iso_mono_ns() - t0;
	}
	close(c);
	pthread_join(th, NULL);
	close(srv.listener);
	qsort(rtt, (size_t)pings, sizeof(*rtt), cmp_u64);
	s.p50_us = (double)rtt[pings / 2] / 1e3;
	s.p99_us = (double)rtt[(pings * 99) / 100] / 1e3;
	free(rtt);

	c = connect_pair(from, to, ip, &srv, &th, false);
	static char buf[BULK];
	uint64_t t0 = iso_mono_ns(), end = t0 + (uint64_t)(seconds * 1e9);
	while (iso_mono_ns() < end)
		if (full(c, buf, sizeof(buf), true) < 0) {
			fprintf(stderr, "bulk send failed\n");
			exit(1);
		}
	shutdown(c, SHUT_WR);
	pthread_join(th, NULL); /* the receiver has read everything */
	uint64_t t1 = iso_mono_ns();
	close(c);
	close(srv.listener);
	s.gbps = (double)srv.bytes * 8 / (double)(t1 - t0);
	return s;
}

static void teardown(void)
{
	const char *ns[] = {"m1", "m2", "h1", "h2", "ul"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(ns); i++)
		sh("ip netns del %s%s 2>/dev/null", pfx, ns[i]);
}

static void die(const char *what, const struct iso_error *err)
{
	fprintf(stderr, "overlay bench: %s: %s (%s)\n", what, err->message, err->field);
	teardown();
	exit(1);
}

static void guard(bool on)
{
	const char *h[] = {"h1", "h2"}, *peer[] = {"192.0.2.2", "192.0.2.1"};
	for (int i = 0; i < 2; i++) {
		char hp[128];
		ns_path(h[i], hp, sizeof(hp));
		struct iso_error err = {0};
		struct iso_overlay_allow a = {.vni = VNI};
		iso_strlcpy(a.peer, peer[i], sizeof(a.peer));
		if ((on ? iso_overlay_guard_apply(hp, "ul0", &a, 1, &err)
		        : iso_overlay_guard_remove(hp, &err)) < 0)
			die("guard", &err);
		struct iso_overlay_guard_state g;
		if (iso_overlay_guard_read(hp, &g, &err) < 0 || g.present != on)
			die("guard read back", &err);
		iso_overlay_guard_state_clear(&g);
	}
}

/* The guards' drop counters on both hosts, summed. */
static uint64_t guard_drops(void)
{
	uint64_t sum = 0;
	const char *h[] = {"h1", "h2"};
	for (int i = 0; i < 2; i++) {
		char hp[128];
		ns_path(h[i], hp, sizeof(hp));
		struct iso_error err = {0};
		struct iso_overlay_guard_state g;
		if (iso_overlay_guard_read(hp, &g, &err) < 0)
			die("guard read", &err);
		sum += g.drops;
		iso_overlay_guard_state_clear(&g);
	}
	return sum;
}

static void setup(void)
{
	int bad = sh("ip netns add %sul && ip -n %sul link add ulbr type bridge && "
	             "ip -n %sul link set ulbr up",
	             pfx, pfx, pfx);
	const char *h[] = {"h1", "h2"}, *ip[] = {"192.0.2.1", "192.0.2.2"};
	for (int i = 0; i < 2 && !bad; i++)
		bad = sh("ip netns add %s%s && ip -n %sul link add u%d type veth peer name ul0 "
		         "netns %s%s && ip -n %sul link set u%d master ulbr up && "
		         "ip -n %s%s addr add %s/24 dev ul0 && ip -n %s%s link set ul0 up && "
		         "ip -n %s%s link set lo up && ip netns add %sm%d && "
		         "ip -n %sm%d link set lo up",
		         pfx, h[i], pfx, i, pfx, h[i], pfx, i, pfx, h[i], ip[i], pfx, h[i], pfx,
		         h[i], pfx, i + 1, pfx, i + 1);
	if (bad) {
		teardown();
		fprintf(stderr, "overlay bench: building the hosts failed\n");
		exit(1);
	}
	for (int i = 0; i < 2; i++) {
		char hp[128], mp[128], mname[32], name[64];
		ns_path(h[i], hp, sizeof(hp));
		snprintf(mname, sizeof(mname), "m%d", i + 1);
		ns_path(mname, mp, sizeof(mp));
		snprintf(name, sizeof(name), "%s%s", pfx, mname);
		const char *peers[] = {ip[1 - i]};
		struct iso_overlay_tenant t = {.vni = VNI,
		                               .underlay_dev = "ul0",
		                               .local_ip = ip[i],
		                               .peers = peers,
		                               .n_peers = 1};
		struct iso_overlay_member m = {
		    .name = name, .vni = VNI, .member_netns = mp, .node_index = (unsigned)i};
		struct iso_error err = {0};
		if (iso_overlay_tenant_ensure(hp, &t, &err) < 0 ||
		    iso_overlay_member_ensure(hp, &m, &err) < 0)
			die("ensure", &err);
	}
}

enum variant { BARE, OVERLAY, EMPTY, GUARDED, N_VARIANTS };
static const char *const vname[] = {"bare", "overlay", "empty-chain", "guarded"};

/* The floor: a table with one empty base chain at the guard's hook and
 * priority on both hosts (what any nft chain there costs), or none. */
static const char *floor_rules = ""; /* --floor-rules: rules for that chain (experiments) */
static bool floor_netdev;            /* --floor-netdev: the chain at ul0's netdev ingress */

static void empty_chain(bool on)
{
	const char *h[] = {"h1", "h2"};
	const char *fam = floor_netdev ? "netdev" : "inet";
	const char *hook = floor_netdev ? "ingress device ul0" : "input";
	for (int i = 0; i < 2; i++)
		if ((on ? sh("ip netns exec %s%s nft 'add table %s isobench; add chain %s isobench "
		             "c { "
		             "type filter hook %s priority -100; policy accept; %s }'",
		             pfx, h[i], fam, fam, hook, floor_rules)
		        : sh("ip netns exec %s%s nft delete table %s isobench 2>/dev/null; true",
		             pfx, h[i], fam)) != 0) {
			fprintf(stderr, "overlay bench: empty chain\n");
			teardown();
			exit(1);
		}
}

int main(int argc, char **argv)
{
	int rounds = 9;
	long pings = 20000;
	double seconds = 3;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			rounds = 3;
			pings = 2000;
			seconds = 0.5;
		} else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--pings") == 0 && i + 1 < argc) {
			pings = atol(argv[++i]);
		} else if (strcmp(argv[i], "--floor-rules") == 0 && i + 1 < argc) {
			floor_rules = argv[++i];
		} else if (strcmp(argv[i], "--floor-netdev") == 0) {
			floor_netdev = true;
		} else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else {
			fprintf(
			    stderr,
			    "usage: overlay [--quick] [--rounds R] [--pings N] [--seconds S]\n");
			return 2;
		}
	}
	if (rounds < 1 || pings < 100 || seconds <= 0) {
		fprintf(stderr, "overlay bench: rounds >= 1, pings >= 100, seconds > 0\n");
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: the overlay bench needs root (network namespaces)\n");
		return 77;
	}
	snprintf(pfx, sizeof(pfx), "s3b-%d-", (int)getpid());
	setup();
	double p50[N_VARIANTS][64], p99[N_VARIANTS][64], gbps[N_VARIANTS][64];
	if (rounds > 64)
		rounds = 64;
	uint64_t drops = 0; /* over the guarded runs: the guard must let them through */
	printf("round variant p50_us p99_us gbit_s\n");
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < N_VARIANTS; k++) {
			enum variant v = (enum variant)((r + k) % N_VARIANTS);
			struct sample s;
			if (v == BARE) {
				guard(false); /* bare: no overlay, no guard */
				s = measure("h1", "h2", "192.0.2.2", pings, seconds);
			} else {
				guard(v == GUARDED);
				if (v == EMPTY)
					empty_chain(true);
				s = measure("m1", "m2", "10.0.1.2", pings, seconds);
				if (v == GUARDED)
					drops += guard_drops();
				if (v == EMPTY)
					empty_chain(false);
			}
			p50[v][r] = s.p50_us;
			p99[v][r] = s.p99_us;
			gbps[v][r] = s.gbps;
			printf("%d %s %.2f %.2f %.2f\n", r, vname[v], s.p50_us, s.p99_us, s.gbps);
			fflush(stdout);
		}
	}
	teardown();

	double m50[N_VARIANTS], m99[N_VARIANTS], mg[N_VARIANTS];
	for (int v = 0; v < N_VARIANTS; v++) {
		qsort(p50[v], (size_t)rounds, sizeof(double), cmp_d);
		qsort(p99[v], (size_t)rounds, sizeof(double), cmp_d);
		qsort(gbps[v], (size_t)rounds, sizeof(double), cmp_d);
		m50[v] = p50[v][rounds / 2];
		m99[v] = p99[v][rounds / 2];
		mg[v] = gbps[v][rounds / 2];
	}
	printf("\nmedians over %d rounds (%ld ping-pongs of %d B, %.1f s bulk each)\n", rounds,
	       pings, MSG, seconds);
	printf("| variant | RTT p50 | RTT p99 | throughput |\n|---|---|---|---|\n");
	for (int v = 0; v < N_VARIANTS; v++)
		printf("| %s | %.2f us | %.2f us | %.2f Gbit/s |\n", vname[v], m50[v], m99[v],
		       mg[v]);
	printf("guarded/overlay: p50 %.4f, p99 %.4f, throughput %.4f\n",
	       m50[GUARDED] / m50[OVERLAY], m99[GUARDED] / m99[OVERLAY], mg[GUARDED] / mg[OVERLAY]);
	printf("empty-chain/overlay: p50 %.4f, p99 %.4f, throughput %.4f\n",
	       m50[EMPTY] / m50[OVERLAY], m99[EMPTY] / m99[OVERLAY], mg[EMPTY] / mg[OVERLAY]);
	printf("guarded/empty-chain: p50 %.4f\n", m50[GUARDED] / m50[EMPTY]);
	printf("overlay/bare: p50 %.4f, p99 %.4f, throughput %.4f\n", m50[OVERLAY] / m50[BARE],
	       m99[OVERLAY] / m99[BARE], mg[OVERLAY] / mg[BARE]);
	printf("guard drops during the guarded runs: %llu\n", (unsigned long long)drops);
	return 0;
}

/* netns_hosts.h: network namespaces as hosts for the overlay's real tests
 * (test_overlay_real, test_agent_overlay_real), one copy of the harness:
 * shell commands, namespace paths under this run's prefix, sockets made in
 * a namespace, a TCP reachability probe, and the underlay (a bridge in
 * namespace `ul`, each host on it through a veth `ul0` with its address). */
#ifndef ISOSTACK_TESTS_NETNS_HOSTS_H
#define ISOSTACK_TESTS_NETNS_HOSTS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/util.h"

static char nh_pfx[32]; /* this run's prefix: "<tag>-PID-" */

static inline void nh_init(const char *tag)
{
	snprintf(nh_pfx, sizeof(nh_pfx), "%s-%d-", tag, (int)getpid());
}

static int nh_sh(const char *fmt, ...) _printf_(1, 2);
static int nh_sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static inline void nh_path(const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "/run/netns/%s%s", nh_pfx, name);
}

/* This run's namespaces. */
static inline int nh_count(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "ip netns list | grep -c '^%s'", nh_pfx);
	FILE *p = popen(cmd, "r");
	int n = -1;
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

/* A socket made in namespace `name` (it stays there); -1 on failure. */
static inline int nh_socket_in(const char *name, int type)
{
	char path[128];
	nh_path(name, path, sizeof(path));
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int s = -1;
	if (self >= 0 && fd >= 0 && setns(fd, CLONE_NEWNET) == 0) {
		s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
		if (setns(self, CLONE_NEWNET) < 0)
			abort();
	}
	if (fd >= 0)
		close(fd);
	if (self >= 0)
		close(self);
	return s;
}

/* True when a TCP connect from namespace `from` to a listener in `to` at
 * ip:5001 completes within 3 s. */
static inline bool nh_reaches(const char *from, const char *to, const char *ip)
{
	int l = nh_socket_in(to, SOCK_STREAM);
	int c = nh_socket_in(from, SOCK_STREAM | SOCK_NONBLOCK);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(5001)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	int one = 1;
	bool ok = false;
	if (l < 0 || c < 0)
		goto out;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
		goto out;
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) == 0) {
		ok = true;
	} else if (errno == EINPROGRESS) {
		struct pollfd pf = {.fd = c, .events = POLLOUT};
		int e = 0;
		socklen_t el = sizeof(e);
		ok = poll(&pf, 1, 3000) == 1 && getsockopt(c, SOL_SOCKET, SO_ERROR, &e, &el) == 0 &&
		     e == 0;
	}
out:
	if (c >= 0)
		close(c);
	if (l >= 0)
		close(l);
	return ok;
}

/* The underlay: namespace ul with bridge ulbr; hosts[i] a namespace on it
 * through veth ul0 holding ips[i]/24. 0, or non-zero when a command failed. */
static inline int nh_underlay(const char *const *hosts, const char *const *ips, size_t n)
{
	int bad = nh_sh("ip netns add %sul && ip -n %sul link add ulbr type bridge && "
	                "ip -n %sul link set ulbr up",
	                nh_pfx, nh_pfx, nh_pfx);
	for (size_t h = 0; h < n && !bad; h++)
		bad = nh_sh("ip netns add %s%s && ip -n %sul link add u%zu type veth peer name ul0 "
		            "netns %s%s && ip -n %sul link set u%zu master ulbr up && "
		            "ip -n %s%s addr add %s/24 dev ul0 && ip -n %s%s link set ul0 up && "
		            "ip -n %s%s link set lo up",
		            nh_pfx, hosts[h], nh_pfx, h, nh_pfx, hosts[h], nh_pfx, h, nh_pfx,
		            hosts[h], ips[h], nh_pfx, hosts[h], nh_pfx, hosts[h]);
	return bad;
}

/* A member's namespace: IPv6 off (no stray neighbour discovery), lo up. */
static inline int nh_member(const char *name)
{
	return nh_sh("ip netns add %s%s && ip netns exec %s%s sh -c 'echo 1 > "
	             "/proc/sys/net/ipv6/conf/default/disable_ipv6; echo 1 > "
	             "/proc/sys/net/ipv6/conf/all/disable_ipv6' && ip -n %s%s link set lo up",
	             nh_pfx, name, nh_pfx, name, nh_pfx, name);
}

static inline void nh_del(const char *name)
{
	nh_sh("ip netns del %s%s 2>/dev/null", nh_pfx, name);
}

#endif

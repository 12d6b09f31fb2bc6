/* cpuset.c: which cores a member's sandbox gets (issue 14). Placement
 * counts cores; the agent picks which ones. Each member gets cores of its
 * own, never shared with another member (so never between tenants), taken
 * from the NUMA node of its first GPU when the host tells the topology
 * (sysfs numa_node of the GPU's PCI function), else the lowest free. The
 * choice is kept in the member's sandbox record (sandboxes.c), so that a
 * restart keeps the same cores. sysfs is read under a root so that tests
 * use a fake tree. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int agent_cpumask_parse(const char *list, struct agent_cpumask *m)
{
	const char *p = list;

	memset(m, 0, sizeof(*m));
	if (*p == '\n' && p[1] == '\0')
		return 0;
	while (*p && *p != '\n') {
		char *end;
		unsigned long a, b;

		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		a = strtoul(p, &end, 10);
		b = a;
		if (errno || a >= AGENT_CPUS_MAX)
			return -EINVAL;
		p = end;
		if (*p == '-') {
			p++;
			if (*p < '0' || *p > '9')
				return -EINVAL;
			b = strtoul(p, &end, 10);
			if (errno || b >= AGENT_CPUS_MAX || b < a)
				return -EINVAL;
			p = end;
		}
		for (unsigned long c = a; c <= b; c++)
			agent_cpumask_set(m, (unsigned)c);
		if (*p == ',') {
			p++;
			if (*p < '0' || *p > '9')
				return -EINVAL;
		} else if (*p && *p != '\n') {
			return -EINVAL;
		}
	}
	if (*p == '\n' && p[1] != '\0')
		return -EINVAL;
	return 0;
}

int agent_cpumask_format(const struct agent_cpumask *m, char *buf, size_t size)
{
	size_t len = 0;

	if (size == 0)
		return -ENOSPC;
	buf[0] = '\0';
	for (unsigned c = 0; c < AGENT_CPUS_MAX; c++) {
		unsigned e = c;
		int w;

		if (!agent_cpumask_has(m, c))
			continue;
		while (e + 1 < AGENT_CPUS_MAX && agent_cpumask_has(m, e + 1))
			e++;
		w = e == c ? snprintf(buf + len, size - len, "%s%u", len ? "," : "", c)
		           : snprintf(buf + len, size - len, "%s%u-%u", len ? "," : "", c, e);
		if (w < 0 || (size_t)w >= size - len) {
			buf[0] = '\0';
			return -ENOSPC;
		}
		len += (size_t)w;
		c = e;
	}
	return 0;
}

unsigned agent_cpumask_count(const struct agent_cpumask *m)
{
	unsigned n = 0;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(m->w); i++)
		n += (unsigned)__builtin_popcountll(m->w[i]);
	return n;
}

/* A small sysfs file's first line; -errno when it cannot be read. */
static int read_line(const char *path, char *buf, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");

	buf[0] = '\0';
	if (!f)
		return errno ? -errno : -EIO;
	if (!fgets(buf, (int)size, f))
		return -EIO;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static int read_mask(const char *root, const char *rel, struct agent_cpumask *m)
{
	char path[PATH_MAX], buf[16384];
	int r;

	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if ((r = read_line(path, buf, sizeof(buf))) < 0)
		return r;
	return agent_cpumask_parse(buf, m);
}

/* The NUMA node of a PCI function, -1 when unknown. NVML spells the
 * address "00000000:18:00.0", sysfs "0000:18:00.0" in lower case. */
static int gpu_numa_node(const char *root, const char *pci)
{
	char addr[32], path[PATH_MAX], buf[32], *end;
	size_t len;
	long v;

	if (!pci || !*pci)
		return -1;
	len = strlen(pci);
	if (len < 12 || len - 12 >= sizeof(addr))
		return -1;
	/* the last 12 characters: dddd:bb:dd.f */
	for (size_t i = 0; i <= 12; i++) {
		char c = pci[len - 12 + i];
		addr[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
	}
	for (const char *p = addr; *p; p++)
		if (!strchr("0123456789abcdef:.", *p))
			return -1;
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/numa_node", root, addr);
	if (read_line(path, buf, sizeof(buf)) < 0)
		return -1;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || *end || v < 0 || v > 4095)
		return -1;
	return (int)v;
}

static int node_mask(const char *root, int node, struct agent_cpumask *m)
{
	char rel[96];

	snprintf(rel, sizeof(rel), "sys/devices/system/node/node%d/cpulist", node);
	return read_mask(root, rel, m);
}

int agent_cpuset_choose(const char *sysfs_root, const char *pci_bus_id, unsigned n,
                        const struct agent_cpumask *taken, char *cpus, size_t cpus_size, char *mems,
                        size_t mems_size, struct iso_error *err)
{
	const char *root = sysfs_root && *sysfs_root ? sysfs_root : "/";
	struct agent_cpumask online, near = {0}, chosen = {0}, nodes = {0};
	unsigned got = 0, free_n = 0;
	int node, r;

	cpus[0] = mems[0] = '\0';
	if (n == 0)
		return iso_error_set(err, ISO_E_INVALID, "cpus",
		                     "a sandbox needs at least one core");
	if ((r = read_mask(root, "sys/devices/system/cpu/online", &online)) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "cpus",
		                     "cannot read %s/sys/devices/system/cpu/online: %s", root,
		                     strerror(-r));
	node = gpu_numa_node(root, pci_bus_id);
	if (node >= 0 && node_mask(root, node, &near) < 0)
		memset(&near, 0, sizeof(near));
	for (unsigned c = 0; c < AGENT_CPUS_MAX; c++)
		free_n += agent_cpumask_has(&online, c) && !agent_cpumask_has(taken, c);
	if (free_n < n)
		return iso_error_set(err, ISO_E_NO_CAPACITY, "cpus",
		                     "not enough free cores: %u wanted, %u free", n, free_n);
	/* near the GPU first, then the lowest free */
	for (int pass = 0; pass < 2 && got < n; pass++)
		for (unsigned c = 0; c < AGENT_CPUS_MAX && got < n; c++)
			if (agent_cpumask_has(&online, c) && !agent_cpumask_has(taken, c) &&
			    !agent_cpumask_has(&chosen, c) &&
			    (pass == 1 || agent_cpumask_has(&near, c))) {
				agent_cpumask_set(&chosen, c);
				got++;
			}
	if (agent_cpumask_format(&chosen, cpus, cpus_size) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "cpus", "the cpuset list is too long");
	/* the memory nodes of the chosen cores (none when the host lists no
	 * nodes: the group keeps its parent's) */
	struct agent_cpumask have;
	if (read_mask(root, "sys/devices/system/node/online", &have) == 0)
		for (unsigned k = 0; k < AGENT_CPUS_MAX; k++) {
			struct agent_cpumask m;
			bool hit = false;

			if (!agent_cpumask_has(&have, k) || node_mask(root, (int)k, &m) < 0)
				continue;
			for (size_t i = 0; i < ISO_ARRAY_SIZE(m.w) && !hit; i++)
				hit = (m.w[i] & chosen.w[i]) != 0;
			if (hit)
				agent_cpumask_set(&nodes, k);
		}
	if (agent_cpumask_format(&nodes, mems, mems_size) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "mems", "the mems list is too long");
	return 0;
}

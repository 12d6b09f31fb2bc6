/* cgroup.c: the sandbox's cgroups, v1 and v2 behind one interface, so that
 * the agent (and later the Slurm and CNI plugins) set a member's cpuset,
 * memory, pids, rdma and device limits the same way on this machine (v1
 * controllers) and on production hosts (pure v2; the device filter there is
 * a BPF program, cgroup_bpf.c). Level-triggered: create
 * brings a group to its limits whether it existed or not and writes only the
 * values that differ; destroy removes an empty group and kills nothing.
 * The root is a parameter: unit tests point it at a fake tree of plain
 * directories, where a missing interface file is created by the write. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <dirent.h>
#include <linux/magic.h>

#include "cgroup_bpf.h"
#include "isostack/sandbox.h"
#include "isostack/util.h"

#define CG_VALUE_MAX 4096

static const struct {
	unsigned bit;
	const char *name;
} v1_ctrls[] = {
    {ISO_CGROUP_CPUSET, "cpuset"},   {ISO_CGROUP_MEMORY, "memory"}, {ISO_CGROUP_PIDS, "pids"},
    {ISO_CGROUP_DEVICES, "devices"}, {ISO_CGROUP_RDMA, "rdma"},
};

static bool is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The group's directory: ROOT/NAME on v2, ROOT/CTRL/NAME on v1 (ctrl NULL:
 * the controller's own root, ROOT/CTRL). */
static int group_dir(const struct iso_cgroup *cg, const char *ctrl, const char *name, char *buf,
                     size_t size)
{
	int n;
	if (cg->version == ISO_CGROUP_V2)
		n = snprintf(buf, size, "%s%s%s", cg->root, name ? "/" : "", name ? name : "");
	else
		n = snprintf(buf, size, "%s/%s%s%s", cg->root, ctrl, name ? "/" : "",
		             name ? name : "");
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Reads a small interface file whole, trailing newline stripped. */
static int read_value(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	for (;;) {
		if (len + 1 >= size)
			return -EFBIG;
		ssize_t r = read(fd, buf + len, size - 1 - len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		len--;
	buf[len] = '\0';
	return 0;
}

/* One write(2) per value: cgroupfs answers a rejected value on the write. On
 * a fake tree the file is created. */
static int write_value_flags(const char *dir, const char *file, const char *value, int flags,
                             const char *field, struct iso_error *err)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return iso_error_set(err, ISO_E_INVALID, field, "path too long: %s/%s", dir, file);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
	if (fd < 0) {
		int e = errno;
		iso_error_set(err, ISO_E_INTERNAL, field, "open %s: %s", path, strerror(e));
		return -e;
	}
	size_t len = strlen(value);
	ssize_t w = write(fd, value, len);
	if (w < 0 || (size_t)w != len) {
		int e = w < 0 ? errno : EIO;
		iso_error_set(err, ISO_E_INTERNAL, field, "write \"%s\" to %s: %s", value, path,
		              strerror(e));
		return -e;
	}
	return 0;
}

static int write_value(const char *dir, const char *file, const char *value, const char *field,
                       struct iso_error *err)
{
	return write_value_flags(dir, file, value, O_TRUNC, field, err);
}

/* Writes value unless the file already holds it (level-triggered: a second
 * create with the same limits changes nothing). */
static int set_value(const char *dir, const char *file, const char *value, const char *field,
                     struct iso_error *err)
{
	char cur[CG_VALUE_MAX];
	if (read_value(dir, file, cur, sizeof(cur)) == 0 && strcmp(cur, value) == 0)
		return 0;
	return write_value(dir, file, value, field, err);
}

int iso_cgroup_open(const char *root, struct iso_cgroup *cg, struct iso_error *err)
{
	char path[PATH_MAX];

	memset(cg, 0, sizeof(*cg));
	if (!root || root[0] == '\0' || iso_strlcpy(cg->root, root, sizeof(cg->root)) < 0)
		return iso_error_set(err, ISO_E_INVALID, "root", "cgroup root missing or too long");
	size_t n = strlen(cg->root);
	while (n > 1 && cg->root[n - 1] == '/')
		cg->root[--n] = '\0';

	snprintf(path, sizeof(path), "%s/cgroup.controllers", cg->root);
	if (is_file(path)) {
		char list[CG_VALUE_MAX];
		int r = read_value(cg->root, "cgroup.controllers", list, sizeof(list));
		if (r < 0) {
			iso_error_set(err, ISO_E_INTERNAL, "root", "read %s: %s", path,
			              strerror(-r));
			return r;
		}
		cg->version = ISO_CGROUP_V2;
		char *save = NULL;
		for (char *tok = strtok_r(list, " \n", &save); tok;
		     tok = strtok_r(NULL, " \n", &save))
			for (size_t i = 0; i < ISO_ARRAY_SIZE(v1_ctrls); i++)
				if (strcmp(tok, v1_ctrls[i].name) == 0)
					cg->controllers |= v1_ctrls[i].bit;
		return 0;
	}
	for (size_t i = 0; i < ISO_ARRAY_SIZE(v1_ctrls); i++) {
		snprintf(path, sizeof(path), "%s/%s/cgroup.procs", cg->root, v1_ctrls[i].name);
		if (is_file(path))
			cg->controllers |= v1_ctrls[i].bit;
	}
	if (cg->controllers == 0) {
		iso_error_set(
		    err, ISO_E_UNAVAILABLE, "root",
		    "%s holds neither cgroup.controllers (v2) nor a cpuset, memory, pids or "
		    "devices hierarchy (v1)",
		    cg->root);
		return -ENOENT;
	}
	cg->version = ISO_CGROUP_V1;
	return 0;
}

/* "0-3,8": numbers and ranges, low <= high. */
static bool cpulist_valid(const char *s)
{
	const char *p = s;
	if (*p == '\0')
		return false;
	for (;;) {
		if (!isdigit((unsigned char)*p))
			return false;
		char *end;
		errno = 0;
		unsigned long lo = strtoul(p, &end, 10);
		if (errno || lo > 1000000)
			return false;
		p = end;
		if (*p == '-') {
			p++;
			if (!isdigit((unsigned char)*p))
				return false;
			unsigned long hi = strtoul(p, &end, 10);
			if (errno || hi > 1000000 || hi < lo)
				return false;
			p = end;
		}
		if (*p == '\0')
			return true;
		if (*p++ != ',')
			return false;
	}
}

static int check_limits(const struct iso_cgroup *cg, const struct iso_cgroup_limits *lim,
                        struct iso_error *err)
{
	if (lim->cpus && !cpulist_valid(lim->cpus))
		return iso_error_set(err, ISO_E_INVALID, "cpus", "not a cpu list: \"%s\"",
		                     lim->cpus);
	if (lim->mems && !cpulist_valid(lim->mems))
		return iso_error_set(err, ISO_E_INVALID, "mems", "not a node list: \"%s\"",
		                     lim->mems);
	if (lim->memory_max < 0)
		return iso_error_set(err, ISO_E_INVALID, "memory_max", "negative");
	if (lim->pids_max < 0)
		return iso_error_set(err, ISO_E_INVALID, "pids_max", "negative");
	if (lim->n_devices > 0 && !lim->devices)
		return iso_error_set(err, ISO_E_INVALID, "devices", "device list missing");
	for (size_t i = 0; i < lim->n_devices; i++) {
		const struct iso_cgroup_device *d = &lim->devices[i];
		char field[32];
		snprintf(field, sizeof(field), "devices[%zu]", i);
		if (d->type != 'a' && d->type != 'b' && d->type != 'c')
			return iso_error_set(err, ISO_E_INVALID, field, "type must be a, b or c");
		if (d->major < -1 || d->minor < -1 || d->major > 0xfffff || d->minor > 0xfffff)
			return iso_error_set(err, ISO_E_INVALID, field, "bad major/minor");
		size_t n = strnlen(d->access, sizeof(d->access));
		if (n == 0 || n == sizeof(d->access) || strspn(d->access, "rwm") != n)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "access must be a non-empty subset of rwm");
	}
	if (lim->n_rdma > 0 && !lim->rdma)
		return iso_error_set(err, ISO_E_INVALID, "rdma", "rdma list missing");
	for (size_t i = 0; i < lim->n_rdma; i++) {
		const struct iso_cgroup_rdma *d = &lim->rdma[i];
		char field[32];
		snprintf(field, sizeof(field), "rdma[%zu]", i);
		size_t n = d->device ? strnlen(d->device, 64) : 0;
		if (n == 0 || n == 64 ||
		    strspn(d->device, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                      "0123456789_.-") != n)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "device must be 1 to 63 of [A-Za-z0-9_.-]");
		if (d->hca_handle < -1 || d->hca_handle > ISO_CGROUP_RDMA_LIMIT_MAX ||
		    d->hca_object < -1 || d->hca_object > ISO_CGROUP_RDMA_LIMIT_MAX)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "hca_handle and hca_object must be -1 (max) to %d",
			                     ISO_CGROUP_RDMA_LIMIT_MAX);
		for (size_t j = 0; j < i; j++)
			if (strcmp(lim->rdma[j].device, d->device) == 0)
				return iso_error_set(err, ISO_E_INVALID, field,
				                     "device %s listed twice", d->device);
	}
	struct {
		bool want;
		unsigned bit;
		const char *field;
	} need[] = {
	    {lim->cpus || lim->mems || cg->version == ISO_CGROUP_V1, ISO_CGROUP_CPUSET, "cpus"},
	    {lim->memory_max > 0, ISO_CGROUP_MEMORY, "memory_max"},
	    {lim->pids_max > 0, ISO_CGROUP_PIDS, "pids_max"},
	    /* v2 needs no controller for devices: the BPF filter attaches to any group. */
	    {lim->filter_devices && cg->version == ISO_CGROUP_V1, ISO_CGROUP_DEVICES, "devices"},
	    {lim->n_rdma > 0, ISO_CGROUP_RDMA, "rdma"},
	};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(need); i++)
		if (need[i].want && !(cg->controllers & need[i].bit) &&
		    !(cg->version == ISO_CGROUP_V1 && need[i].bit == ISO_CGROUP_CPUSET &&
		      !lim->cpus && !lim->mems))
			return iso_error_set(err, ISO_E_UNAVAILABLE, need[i].field,
			                     "the %s controller is not available under %s",
			                     v1_ctrls[__builtin_ctz(need[i].bit)].name, cg->root);
	return 0;
}

/* "c 1:3 rwm", the form v1's devices.list prints, access in rwm order. */
static void device_rule(const struct iso_cgroup_device *d, char *buf, size_t size)
{
	char maj[24] = "*", min[24] = "*", acc[4];
	size_t n = 0;
	if (d->major >= 0)
		snprintf(maj, sizeof(maj), "%ld", d->major);
	if (d->minor >= 0)
		snprintf(min, sizeof(min), "%ld", d->minor);
	for (const char *c = "rwm"; *c; c++)
		if (memchr(d->access, *c, strnlen(d->access, sizeof(d->access))))
			acc[n++] = *c;
	acc[n] = '\0';
	snprintf(buf, size, "%c %s:%s %s", d->type, maj, min, acc);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether devices.list already holds exactly the wanted rules (as a set).
 * Lists longer than a sandbox needs are simply rewritten. */
#define CG_DEVICES_COMPARED 64
static bool devices_match(const char *dir, const struct iso_cgroup_limits *lim)
{
	char list[CG_VALUE_MAX], rules[CG_DEVICES_COMPARED][32];
	char *want[CG_DEVICES_COMPARED] = {0}, *have[CG_DEVICES_COMPARED] = {0};
	size_t n = lim->n_devices;

	if (n > CG_DEVICES_COMPARED || read_value(dir, "devices.list", list, sizeof(list)) < 0)
		return false;
	size_t nw = 0;
	for (size_t i = 0; i < n; i++) {
		device_rule(&lim->devices[i], rules[i], sizeof(rules[i]));
		bool dup = false;
		for (size_t j = 0; j < nw; j++)
			dup = dup || strcmp(want[j], rules[i]) == 0;
		if (!dup)
			want[nw++] = rules[i];
	}
	size_t nh = 0;
	char *save = NULL;
	for (char *l = strtok_r(list, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (nh == nw)
			return false;
		have[nh++] = l;
	}
	if (nh != nw)
		return false;
	qsort(want, nw, sizeof(char *), cmp_str);
	qsort(have, nh, sizeof(char *), cmp_str);
	for (size_t i = 0; i < nw; i++)
		if (strcmp(want[i], have[i]) != 0)
			return false;
	return true;
}

static int set_devices_v1(const char *dir, const struct iso_cgroup_limits *lim,
                          struct iso_error *err)
{
	if (devices_match(dir, lim))
		return 0;
	int r = write_value(dir, "devices.deny", "a", "devices", err);
	for (size_t i = 0; r == 0 && i < lim->n_devices; i++) {
		char rule[32], line[40], field[32];
		device_rule(&lim->devices[i], rule, sizeof(rule));
		snprintf(line, sizeof(line), "%s\n", rule);
		snprintf(field, sizeof(field), "devices[%zu]", i);
		/* Appended: cgroupfs takes one rule per write either way, and a
		 * fake tree keeps every rule written. */
		r = write_value_flags(dir, "devices.allow", line, O_APPEND, field, err);
	}
	return r;
}

/* v1 reads the limit back in whole pages (no limit: the largest page
 * multiple), so the value in place is compared as the kernel keeps it. */
static int set_memory_v1(const char *dir, int64_t max, struct iso_error *err)
{
	char cur[64], val[32];
	long ps = sysconf(_SC_PAGESIZE);
	int64_t want = max > 0 ? max / ps * ps : INT64_MAX / ps * ps;

	if (read_value(dir, "memory.limit_in_bytes", cur, sizeof(cur)) == 0) {
		char *end;
		errno = 0;
		long long have = strtoll(cur, &end, 10);
		if (errno == 0 && *end == '\0' && (have == want || (max == 0 && have == -1)))
			return 0;
	}
	if (max > 0)
		snprintf(val, sizeof(val), "%" PRId64, max);
	else
		snprintf(val, sizeof(val), "-1");
	return write_value(dir, "memory.limit_in_bytes", val, "memory_max", err);
}

/* One rdma.max line as the kernel prints it ("mlx5_0 hca_handle=2
 * hca_object=max "), or as written: *dev, *handle and *object point into
 * line. False when it is not one. */
static bool rdma_line(char *line, char **dev, char **handle, char **object)
{
	char *save = NULL;
	*dev = strtok_r(line, " ", &save);
	*handle = *object = NULL;
	for (char *t = strtok_r(NULL, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (strncmp(t, "hca_handle=", 11) == 0)
			*handle = t + 11;
		else if (strncmp(t, "hca_object=", 11) == 0)
			*object = t + 11;
	}
	return *dev && *handle && *object;
}

static void rdma_value(int64_t v, char *buf, size_t size)
{
	if (v < 0 || v == ISO_CGROUP_RDMA_LIMIT_MAX)
		snprintf(buf, size, "max");
	else
		snprintf(buf, size, "%" PRId64, v);
}

/* Whether rdma.max's text `cur` holds dev at exactly these values (the last
 * line for dev counts). */
static bool rdma_has(const char *cur, const char *dev, const char *handle, const char *object)
{
	char copy[CG_VALUE_MAX], *save = NULL, *d, *h, *o;
	bool match = false;

	iso_strlcpy(copy, cur, sizeof(copy));
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (rdma_line(l, &d, &h, &o) && strcmp(d, dev) == 0)
			match = strcmp(h, handle) == 0 && strcmp(o, object) == 0;
	return match;
}

/* rdma.max: one write per device that differs (the kernel takes one device
 * a write); a device the kernel lists with a limit but the rules do not
 * name is set back to max. */
static int set_rdma(const char *dir, const struct iso_cgroup_limits *lim, struct iso_error *err)
{
	char cur[CG_VALUE_MAX] = "", line[128], h[16], o[16], field[32];
	int r;

	if (read_value(dir, "rdma.max", cur, sizeof(cur)) < 0)
		cur[0] = '\0';
	for (size_t i = 0; i < lim->n_rdma; i++) {
		const struct iso_cgroup_rdma *d = &lim->rdma[i];
		rdma_value(d->hca_handle, h, sizeof(h));
		rdma_value(d->hca_object, o, sizeof(o));
		if (rdma_has(cur, d->device, h, o))
			continue;
		snprintf(line, sizeof(line), "%s hca_handle=%s hca_object=%s\n", d->device, h, o);
		snprintf(field, sizeof(field), "rdma[%zu]", i);
		if ((r = write_value_flags(dir, "rdma.max", line, O_APPEND, field, err)) < 0)
			return r;
	}
	char copy[CG_VALUE_MAX], *save = NULL, *dev, *hh, *oo;
	iso_strlcpy(copy, cur, sizeof(copy));
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (!rdma_line(l, &dev, &hh, &oo) || rdma_has(cur, dev, "max", "max"))
			continue;
		bool listed = false;
		for (size_t i = 0; i < lim->n_rdma; i++)
			listed = listed || strcmp(lim->rdma[i].device, dev) == 0;
		if (listed)
			continue;
		snprintf(line, sizeof(line), "%s hca_handle=max hca_object=max\n", dev);
		if ((r = write_value_flags(dir, "rdma.max", line, O_APPEND, "rdma", err)) < 0)
			return r;
	}
	return 0;
}

static int apply_v1(const struct iso_cgroup *cg, const char *name,
                    const struct iso_cgroup_limits *lim, struct iso_error *err)
{
	char dir[PATH_MAX], parent[PATH_MAX], val[CG_VALUE_MAX];
	int r;

	if (cg->controllers & ISO_CGROUP_CPUSET) {
		/* A new v1 cpuset starts empty and takes no process: copy the
		 * parent's cpus and mems where no list is given. */
		group_dir(cg, "cpuset", name, dir, sizeof(dir));
		group_dir(cg, "cpuset", NULL, parent, sizeof(parent));
		const char *files[] = {"cpuset.cpus", "cpuset.mems"};
		const char *want[] = {lim->cpus, lim->mems};
		const char *fields[] = {"cpus", "mems"};
		for (size_t i = 0; i < 2; i++) {
			const char *v = want[i];
			if (!v) {
				r = read_value(parent, files[i], val, sizeof(val));
				if (r < 0) {
					iso_error_set(err, ISO_E_INTERNAL, fields[i],
					              "read %s/%s: %s", parent, files[i],
					              strerror(-r));
					return r;
				}
				v = val;
			}
			if ((r = set_value(dir, files[i], v, fields[i], err)) < 0)
				return r;
		}
	}
	if (cg->controllers & ISO_CGROUP_MEMORY) {
		/* memory.oom_control keeps its default (the OOM killer on), so a
		 * group over its limit loses a process of its own. */
		group_dir(cg, "memory", name, dir, sizeof(dir));
		if ((r = set_memory_v1(dir, lim->memory_max, err)) < 0)
			return r;
	}
	if (cg->controllers & ISO_CGROUP_PIDS) {
		group_dir(cg, "pids", name, dir, sizeof(dir));
		if (lim->pids_max > 0)
			snprintf(val, sizeof(val), "%" PRId64, lim->pids_max);
		else
			snprintf(val, sizeof(val), "max");
		if ((r = set_value(dir, "pids.max", val, "pids_max", err)) < 0)
			return r;
	}
	if (cg->controllers & ISO_CGROUP_RDMA) {
		group_dir(cg, "rdma", name, dir, sizeof(dir));
		if ((r = set_rdma(dir, lim, err)) < 0)
			return r;
	}
	if (lim->filter_devices) {
		group_dir(cg, "devices", name, dir, sizeof(dir));
		if ((r = set_devices_v1(dir, lim, err)) < 0)
			return r;
	}
	return 0;
}

static int apply_v2(const struct iso_cgroup *cg, const char *name,
                    const struct iso_cgroup_limits *lim, struct iso_error *err)
{
	char dir[PATH_MAX], val[64];
	int r;

	group_dir(cg, NULL, name, dir, sizeof(dir));
	if (lim->cpus && (r = set_value(dir, "cpuset.cpus", lim->cpus, "cpus", err)) < 0)
		return r;
	if (lim->mems && (r = set_value(dir, "cpuset.mems", lim->mems, "mems", err)) < 0)
		return r;
	if (cg->controllers & ISO_CGROUP_MEMORY) {
		if (lim->memory_max > 0)
			snprintf(val, sizeof(val), "%" PRId64, lim->memory_max);
		else
			snprintf(val, sizeof(val), "max");
		if ((r = set_value(dir, "memory.max", val, "memory_max", err)) < 0)
			return r;
		/* An OOM kills the whole group, never a neighbour. */
		if ((r = set_value(dir, "memory.oom.group", "1", "memory_max", err)) < 0)
			return r;
	}
	if (cg->controllers & ISO_CGROUP_PIDS) {
		if (lim->pids_max > 0)
			snprintf(val, sizeof(val), "%" PRId64, lim->pids_max);
		else
			snprintf(val, sizeof(val), "max");
		if ((r = set_value(dir, "pids.max", val, "pids_max", err)) < 0)
			return r;
	}
	if ((cg->controllers & ISO_CGROUP_RDMA) && (r = set_rdma(dir, lim, err)) < 0)
		return r;
	/* Last, so that a failed file write never loads a program. */
	if (lim->filter_devices &&
	    (r = cg_bpf_devices_apply(dir, lim->devices, lim->n_devices, err)) < 0)
		return r;
	return 0;
}

/* v2: the controllers we set must be enabled in the parent's
 * cgroup.subtree_control before the child's files appear. */
static int enable_v2(const struct iso_cgroup *cg, struct iso_error *err)
{
	char want[64] = "", cur[CG_VALUE_MAX] = "";
	const unsigned bits[] = {ISO_CGROUP_CPUSET, ISO_CGROUP_MEMORY, ISO_CGROUP_PIDS,
	                         ISO_CGROUP_RDMA};
	bool missing = false;

	read_value(cg->root, "cgroup.subtree_control", cur, sizeof(cur));
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bits); i++) {
		if (!(cg->controllers & bits[i]))
			continue;
		const char *n = v1_ctrls[__builtin_ctz(bits[i])].name;
		size_t len = strlen(want);
		snprintf(want + len, sizeof(want) - len, "%s+%s", len ? " " : "", n);
		bool found = false;
		char copy[CG_VALUE_MAX], *save = NULL;
		memcpy(copy, cur, sizeof(copy));
		for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
			found =
			    found || strcmp(t, n) == 0 || (t[0] == '+' && strcmp(t + 1, n) == 0);
		missing = missing || !found;
	}
	if (!missing || want[0] == '\0')
		return 0;
	return write_value(cg->root, "cgroup.subtree_control", want, "root", err);
}

static int remove_group(const struct iso_cgroup *cg, const char *name, struct iso_error *err);

int iso_cgroup_create(const struct iso_cgroup *cg, const char *name,
                      const struct iso_cgroup_limits *lim, struct iso_error *err)
{
	static const struct iso_cgroup_limits none = {0};
	char dir[PATH_MAX];
	bool created = false;
	int r;

	if (!name || !iso_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, "name",
		                     "cgroup name must match [a-z0-9][a-z0-9._-]{0,62}");
	if (!lim)
		lim = &none;
	if ((r = check_limits(cg, lim, err)) < 0)
		return r;
	if (cg->version == ISO_CGROUP_V2 && (r = enable_v2(cg, err)) < 0)
		return r;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(v1_ctrls); i++) {
		if (cg->version == ISO_CGROUP_V1 && !(cg->controllers & v1_ctrls[i].bit))
			continue;
		if (group_dir(cg, v1_ctrls[i].name, name, dir, sizeof(dir)) < 0)
			return iso_error_set(err, ISO_E_INVALID, "name", "path too long");
		if (mkdir(dir, 0755) == 0) {
			created = true;
		} else if (errno != EEXIST) {
			int e = errno;
			iso_error_set(err, ISO_E_INTERNAL, "name", "mkdir %s: %s", dir,
			              strerror(e));
			r = -e;
			break;
		}
		if (cg->version == ISO_CGROUP_V2)
			break;
	}
	if (r == 0)
		r = cg->version == ISO_CGROUP_V1 ? apply_v1(cg, name, lim, err)
		                                 : apply_v2(cg, name, lim, err);
	if (r < 0 && created)
		remove_group(cg, name, NULL); /* no partial state; the first error stands */
	return r;
}

int iso_cgroup_attach(const struct iso_cgroup *cg, const char *name, int pid, struct iso_error *err)
{
	char dir[PATH_MAX], val[32];
	int r;

	if (!name || !iso_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, "name", "bad cgroup name");
	if (pid <= 0)
		return iso_error_set(err, ISO_E_INVALID, "pid", "bad pid %d", pid);
	if (!iso_cgroup_exists(cg, name))
		return iso_error_set(err, ISO_E_NOT_FOUND, "name", "no cgroup %s", name);
	snprintf(val, sizeof(val), "%d", pid);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(v1_ctrls); i++) {
		if (cg->version == ISO_CGROUP_V1 && !(cg->controllers & v1_ctrls[i].bit))
			continue;
		group_dir(cg, v1_ctrls[i].name, name, dir, sizeof(dir));
		if ((r = write_value(dir, "cgroup.procs", val, "pid", err)) < 0)
			return r;
		if (cg->version == ISO_CGROUP_V2)
			break;
	}
	return 0;
}

bool iso_cgroup_exists(const struct iso_cgroup *cg, const char *name)
{
	char dir[PATH_MAX];

	if (!name || !iso_name_valid(name))
		return false;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(v1_ctrls); i++) {
		if (cg->version == ISO_CGROUP_V1 && !(cg->controllers & v1_ctrls[i].bit))
			continue;
		if (group_dir(cg, v1_ctrls[i].name, name, dir, sizeof(dir)) == 0 && is_dir(dir))
			return true;
		if (cg->version == ISO_CGROUP_V2)
			break;
	}
	return false;
}

/* rmdir of a cgroup; a fake tree (a plain directory, not cgroupfs) holds the
 * files our writes created, which go first. */
static int rmdir_group(const char *dir)
{
	if (rmdir(dir) == 0 || errno == ENOENT)
		return 0;
	int e = errno;
	struct statfs fs;
	if (e != ENOTEMPTY || statfs(dir, &fs) < 0 || fs.f_type == CGROUP_SUPER_MAGIC ||
	    fs.f_type == CGROUP2_SUPER_MAGIC)
		return -e;
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_type == DT_REG)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
	return rmdir(dir) == 0 ? 0 : -errno;
}

static int remove_group(const struct iso_cgroup *cg, const char *name, struct iso_error *err)
{
	char dir[PATH_MAX], procs[CG_VALUE_MAX] = "";

	/* Check every hierarchy first, so that a busy group is left whole. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < ISO_ARRAY_SIZE(v1_ctrls); i++) {
			if (cg->version == ISO_CGROUP_V1 && !(cg->controllers & v1_ctrls[i].bit))
				continue;
			group_dir(cg, v1_ctrls[i].name, name, dir, sizeof(dir));
			if (pass == 0) {
				if (read_value(dir, "cgroup.procs", procs, sizeof(procs)) == 0 &&
				    procs[0] != '\0') {
					iso_error_set(err, ISO_E_CONFLICT, "name",
					              "cgroup %s still holds processes", name);
					return -EBUSY;
				}
			} else {
				int r = rmdir_group(dir);
				if (r < 0) {
					iso_error_set(err,
					              r == -EBUSY ? ISO_E_CONFLICT : ISO_E_INTERNAL,
					              "name", "rmdir %s: %s", dir, strerror(-r));
					return r;
				}
			}
			if (cg->version == ISO_CGROUP_V2)
				break;
		}
	}
	return 0;
}

int iso_cgroup_destroy(const struct iso_cgroup *cg, const char *name, struct iso_error *err)
{
	if (!name || !iso_name_valid(name))
		return iso_error_set(err, ISO_E_INVALID, "name", "bad cgroup name");
	return remove_group(cg, name, err);
}

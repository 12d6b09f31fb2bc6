/* cgroup_bpf.c: the member's device list on cgroup v2. v2 has no
 * devices.allow: a group's device accesses are decided by the
 * BPF_PROG_TYPE_CGROUP_DEVICE programs attached to it and its ancestors
 * (with BPF_F_ALLOW_MULTI every one of them must allow). So this file builds
 * an allow-list program from the rules, in plain instructions as systemd's
 * bpf-devices.c and runc's devicefilter do (no clang BPF target needed),
 * loads it with libbpf and attaches it to the group's directory.
 * Level-triggered: a filter with the same instructions already attached is
 * kept; a new one is attached before the old one is detached, so a running
 * job never sees an allow-all nor a deny-all moment. The program goes with
 * the group when it is removed. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/magic.h>

#include "cgroup_bpf.h"

/* Programs of ours a group can hold at once (one, and briefly two). */
#define CG_BPF_ATTACHED_MAX 64
#define CG_BPF_LOG_SIZE     ((size_t)64 * 1024)

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	return (struct bpf_insn){
	    .code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}

static uint32_t access_bits(const char *access)
{
	uint32_t bits = 0;
	for (size_t i = 0; i < sizeof(((struct iso_cgroup_device *)0)->access) && access[i]; i++)
		bits |= access[i] == 'r'   ? BPF_DEVCG_ACC_READ
		        : access[i] == 'w' ? BPF_DEVCG_ACC_WRITE
		        : access[i] == 'm' ? BPF_DEVCG_ACC_MKNOD
		                           : 0;
	return bits;
}

/* The program: r2 = device type, r3 = requested access, r4 = major, r5 =
 * minor (struct bpf_cgroup_dev_ctx); then per rule a block of checks, each
 * jumping past the block on a mismatch, ending in "return 1"; after the last
 * block "return 0". Returns the number of instructions written to out (room
 * for 6 + 9 * n + 2). */
static size_t build(const struct iso_cgroup_device *devs, size_t n, struct bpf_insn *out)
{
	const uint32_t all = BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE | BPF_DEVCG_ACC_MKNOD;
	size_t k = 0;

	out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0);
	out[k++] = insn(BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 0xffff);
	out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 0, 0);
	out[k++] = insn(BPF_ALU64 | BPF_RSH | BPF_K, 3, 0, 0, 16);
	out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, 4, 1, 4, 0);
	out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, 5, 1, 8, 0);
	for (size_t i = 0; i < n; i++) {
		const struct iso_cgroup_device *d = &devs[i];
		uint32_t acc = access_bits(d->access);
		/* Jumps to patch with the block's end once its length is known. */
		size_t jumps[4], nj = 0;

		if (d->type != 'a') {
			jumps[nj++] = k;
			out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, 2, 0, 0,
			                d->type == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK);
		}
		if (acc != all) { /* any requested bit outside the rule's: no match */
			out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, 1, 3, 0, 0);
			out[k++] =
			    insn(BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, (int32_t)(all & ~acc));
			jumps[nj++] = k;
			out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, 1, 0, 0, 0);
		}
		if (d->major >= 0) {
			jumps[nj++] = k;
			out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, 4, 0, 0, (int32_t)d->major);
		}
		if (d->minor >= 0) {
			jumps[nj++] = k;
			out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, 5, 0, 0, (int32_t)d->minor);
		}
		out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1);
		out[k++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
		for (size_t j = 0; j < nj; j++)
			out[jumps[j]].off = (int16_t)(k - jumps[j] - 1);
	}
	out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0);
	out[k++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	return k;
}

/* Loads the rules' program; on a refusal loads it again with the
 * verifier's log, whose end goes into the message. Returns the program's fd
 * or -errno. */
static int load_insns(const struct bpf_insn *insns, size_t cnt, struct iso_error *err)
{
	int fd =
	    bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, CG_BPF_PROG_NAME, "GPL", insns, cnt, NULL);
	if (fd >= 0)
		return fd;
	int e = errno;
	_cleanup_free_ char *log = calloc(1, CG_BPF_LOG_SIZE);
	if (log) {
		struct bpf_prog_load_opts opts = {.sz = sizeof(opts),
		                                  .log_buf = log,
		                                  .log_size = CG_BPF_LOG_SIZE,
		                                  .log_level = 1};
		int again = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, CG_BPF_PROG_NAME, "GPL",
		                          insns, cnt, &opts);
		if (again >= 0) /* accepted this time after all */
			return again;
	}
	size_t len = log ? strlen(log) : 0;
	const char *tail = len > 300 ? log + len - 300 : (log ? log : "");
	iso_error_set(err, ISO_E_INTERNAL, "devices", "load the device filter: %s%s%s", strerror(e),
	              tail[0] ? "; verifier: " : "", tail);
	return -e;
}

static int load(const struct iso_cgroup_device *devs, size_t n, struct iso_error *err)
{
	struct bpf_insn *insns = calloc(6 + 9 * n + 2, sizeof(*insns));
	if (!insns)
		return iso_error_set(err, ISO_E_INTERNAL, "devices", "out of memory");
	int fd = load_insns(insns, build(devs, n, insns), err);
	free(insns);
	return fd;
}

static int prog_info(int fd, struct bpf_prog_info *info)
{
	uint32_t len = sizeof(*info);
	memset(info, 0, sizeof(*info));
	return bpf_obj_get_info_by_fd(fd, info, &len) < 0 ? -errno : 0;
}

/* The fds of our programs (by name) attached directly to the group, and
 * which of them, if any, has `tag`. Returns how many, or -errno. */
static int attached(int cgfd, const uint8_t tag[BPF_TAG_SIZE], int *fds, int *same,
                    struct iso_error *err)
{
	uint32_t ids[CG_BPF_ATTACHED_MAX], cnt = CG_BPF_ATTACHED_MAX, flags = 0;
	int n = 0;

	*same = -1;
	int q = bpf_prog_query(cgfd, BPF_CGROUP_DEVICE, 0, &flags, ids, &cnt);
	if (q < 0) { /* libbpf 1.x: -errno */
		iso_error_set(err, ISO_E_INTERNAL, "devices",
		              "query the group's device filters: %s", strerror(-q));
		return q;
	}
	for (uint32_t i = 0; i < cnt; i++) {
		struct bpf_prog_info info;
		int fd = bpf_prog_get_fd_by_id(ids[i]);
		if (fd < 0)
			continue; /* gone meanwhile */
		if (prog_info(fd, &info) < 0 || strcmp(info.name, CG_BPF_PROG_NAME) != 0) {
			close(fd);
			continue;
		}
		if (*same < 0 && memcmp(info.tag, tag, BPF_TAG_SIZE) == 0)
			*same = n;
		fds[n++] = fd;
	}
	return n;
}

int cg_bpf_devices_apply(const char *dir, const struct iso_cgroup_device *devs, size_t n,
                         struct iso_error *err)
{
	struct statfs fs;
	int fds[CG_BPF_ATTACHED_MAX], nfds = 0, same = -1, r = 0;

	if (statfs(dir, &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC) {
		iso_error_set(
		    err, ISO_E_UNAVAILABLE, "devices",
		    "%s is not a cgroup2 directory: the v2 device filter is a BPF program "
		    "attached there",
		    dir);
		return -EOPNOTSUPP;
	}
	_cleanup_close_ int prog = load(devs, n, err);
	if (prog < 0)
		return prog;
	struct bpf_prog_info info;
	if ((r = prog_info(prog, &info)) < 0) {
		iso_error_set(err, ISO_E_INTERNAL, "devices", "read the filter's tag: %s",
		              strerror(-r));
		return r;
	}
	_cleanup_close_ int cgfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cgfd < 0) {
		int e = errno;
		iso_error_set(err, ISO_E_INTERNAL, "devices", "open %s: %s", dir, strerror(e));
		return -e;
	}
	if ((nfds = attached(cgfd, info.tag, fds, &same, err)) < 0)
		return nfds;
	/* New rules: the new filter goes on first, so that the group is never
	 * without one; while both are on, only what both allow passes. */
	if (same < 0 && bpf_prog_attach(prog, cgfd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) < 0) {
		int e = errno;
		iso_error_set(err, ISO_E_INTERNAL, "devices", "attach the device filter to %s: %s",
		              dir, strerror(e));
		r = -e;
	}
	/* Then every other filter of ours goes (also a leftover of a create
	 * that stopped between the two steps). */
	for (int i = 0; i < nfds; i++) {
		if (r == 0 && i != same && bpf_prog_detach2(fds[i], cgfd, BPF_CGROUP_DEVICE) < 0) {
			int e = errno;
			iso_error_set(err, ISO_E_INTERNAL, "devices",
			              "detach the old device filter from %s: %s", dir, strerror(e));
			r = -e;
		}
		close(fds[i]);
	}
	return r;
}

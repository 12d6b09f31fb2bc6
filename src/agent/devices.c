/* devices.c: the device nodes a member's sandbox may open (issue 14,
 * docs/agent.md "Sandboxes"). The NVIDIA control nodes, the parent GPU of
 * each of its MIG instances and that instance's two capability nodes (the
 * GI and CI "access" caps whose minors the driver lists in
 * /proc/driver/nvidia-caps/mig-minors), its VF's verbs node and rdma_cm.
 * Only nodes that exist on this host are listed, so a host without GPUs or
 * HCAs gets a sandbox with the usual null/zero/tty only. The VF's RDMA
 * device's name (for rdma.max and the move into the member's namespace) is
 * found here too, from the same sysfs tree. The roots are
 * parameters so that tests use fake trees. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

struct dev_list {
	char (*v)[AGENT_DEV_PATH];
	size_t n;
};

/* Adds DEV_ROOT/rel when it exists and is not listed yet. */
static int add(struct dev_list *l, const char *dev_root, const char *rel, struct iso_error *err)
{
	char path[AGENT_DEV_PATH];
	struct stat st;

	if (snprintf(path, sizeof(path), "%s/%s", dev_root, rel) >= (int)sizeof(path))
		return iso_error_set(err, ISO_E_INVALID, "dev_root", "device path too long: %s/%s",
		                     dev_root, rel);
	if (stat(path, &st) < 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
		return 0;
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], path) == 0)
			return 0;
	if (l->n == AGENT_DEVICES_MAX)
		return iso_error_set(err, ISO_E_INVALID, "devices", "over %d device nodes",
		                     AGENT_DEVICES_MAX);
	iso_strlcpy(l->v[l->n++], path, sizeof(l->v[0]));
	return 0;
}

/* The minor of `key` ("gpu0/gi3/access") in mig-minors; -1 when absent. */
static long mig_minor(const char *proc_root, const char *key)
{
	char path[PATH_MAX], line[256];
	_cleanup_fclose_ FILE *f = NULL;
	size_t klen = strlen(key);

	snprintf(path, sizeof(path), "%s/driver/nvidia-caps/mig-minors", proc_root);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *end;
		long v;

		if (strncmp(line, key, klen) != 0 || line[klen] != ' ')
			continue;
		errno = 0;
		v = strtol(line + klen + 1, &end, 10);
		if (errno || end == line + klen + 1 || (*end && *end != '\n') || v < 0 ||
		    v > 1048575)
			return -1;
		return v;
	}
	return -1;
}

static int add_cap(struct dev_list *l, const struct agent_host_roots *h, const char *key,
                   struct iso_error *err)
{
	long minor = mig_minor(h->proc_root, key);
	char rel[64];

	if (minor < 0)
		return 0;
	snprintf(rel, sizeof(rel), "nvidia-caps/nvidia-cap%ld", minor);
	return add(l, h->dev_root, rel, err);
}

/* The VF's verbs nodes: SYSFS/sys/class/infiniband/<pf>/device/virtfn<i>/
 * infiniband_verbs/uverbsN, as /dev/infiniband/uverbsN. */
static int add_vf(struct dev_list *l, const struct agent_host_roots *h,
                  const struct agent_vf_ref *vf, struct iso_error *err)
{
	char path[PATH_MAX], rel[300];
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (strchr(vf->device, '/') || vf->device[0] == '.')
		return iso_error_set(err, ISO_E_INVALID, "vfs.device", "bad HCA name \"%s\"",
		                     vf->device);
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/device/virtfn%u/infiniband_verbs",
	         h->sysfs_root, vf->device, vf->index);
	if (!(d = opendir(path)))
		return 0;
	while (r == 0 && (de = readdir(d)))
		if (strncmp(de->d_name, "uverbs", 6) == 0 && de->d_name[6] >= '0' &&
		    de->d_name[6] <= '9' &&
		    strspn(de->d_name + 6, "0123456789") == strlen(de->d_name + 6)) {
			snprintf(rel, sizeof(rel), "infiniband/%s", de->d_name);
			r = add(l, h->dev_root, rel, err);
		}
	closedir(d);
	return r;
}

int agent_vf_rdma_device(const struct agent_host_roots *h, const struct agent_vf_ref *vf,
                         char name[ISO_RDMA_NAME_MAX], struct iso_error *err)
{
	char path[PATH_MAX], vfpath[PATH_MAX], devpath[PATH_MAX], class[PATH_MAX];
	DIR *d = NULL;
	struct dirent *de;
	int found = 0;

	name[0] = '\0';
	if (strchr(vf->device, '/') || vf->device[0] == '.')
		return iso_error_set(err, ISO_E_INVALID, "vfs.device", "bad HCA name \"%s\"",
		                     vf->device);
	snprintf(class, sizeof(class), "%s/sys/class/infiniband", h->sysfs_root);
	snprintf(path, sizeof(path), "%s/%s/device/virtfn%u", class, vf->device, vf->index);
	if (!realpath(path, vfpath) || !(d = opendir(class)))
		return 0;
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= ISO_RDMA_NAME_MAX)
			continue;
		snprintf(path, sizeof(path), "%s/%s/device", class, de->d_name);
		if (realpath(path, devpath) && strcmp(devpath, vfpath) == 0) {
			iso_strlcpy(name, de->d_name, ISO_RDMA_NAME_MAX);
			found = 1;
		}
	}
	closedir(d);
	return found;
}

int agent_sandbox_devices(const struct agent_host_roots *h, const struct agent_gpu_slice *gpus,
                          size_t n_gpus, const struct agent_vf_ref *vfs, size_t n_vfs,
                          char (*out)[AGENT_DEV_PATH], size_t *n_out, struct iso_error *err)
{
	struct dev_list l = {out, 0};
	char rel[64], key[64];
	int r = 0;

	*n_out = 0;
	if (n_gpus > 0) {
		static const char *const ctl[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"};
		for (size_t i = 0; i < ISO_ARRAY_SIZE(ctl) && r == 0; i++)
			r = add(&l, h->dev_root, ctl[i], err);
	}
	for (size_t i = 0; i < n_gpus && r == 0; i++) {
		const struct agent_gpu_slice *s = &gpus[i];

		snprintf(rel, sizeof(rel), "nvidia%u", s->gpu);
		r = add(&l, h->dev_root, rel, err);
		if (r == 0 && s->gi >= 0) {
			snprintf(key, sizeof(key), "gpu%u/gi%d/access", s->gpu, s->gi);
			r = add_cap(&l, h, key, err);
		}
		if (r == 0 && s->gi >= 0 && s->ci >= 0) {
			snprintf(key, sizeof(key), "gpu%u/gi%d/ci%d/access", s->gpu, s->gi, s->ci);
			r = add_cap(&l, h, key, err);
		}
	}
	for (size_t i = 0; i < n_vfs && r == 0; i++)
		if ((r = add_vf(&l, h, &vfs[i], err)) == 0)
			r = add(&l, h->dev_root, "infiniband/rdma_cm", err);
	if (r < 0)
		return r;
	*n_out = l.n;
	return 0;
}

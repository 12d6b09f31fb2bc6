/* vf.c: the host side of the fabric (issue 13, docs/agent.md "VFs"). Each
 * tenant present on a node holds one SR-IOV VF of the node's HCA, and the
 * fabric's partitions name that VF by its GUID; this file gives the VF that
 * GUID on the host before the member counts as ready, and gives the original
 * back when the tenant leaves.
 *
 * mlx5 (sysfs): write sriov/<vf>/{node,port,policy}, then unbind and bind
 * the VF by its PCI address (never by netdev name: the name changes at
 * rebind, ib-sriov-cni#51), then read the GUID back. Level-triggered like
 * the MIG reconcile: every tick reads each VF's GUID from the device and
 * writes only a VF that differs. The only state is the VF's original GUID,
 * saved in the state dir before the first write and never re-taken while it
 * is there, so a failure after the write (rolled back at once) cannot make
 * a retry snapshot our own GUID as the host's (ib-sriov-cni#217).
 *
 * ibsim: the VFs are CAs of the simulated fabric, whose GUIDs the net file
 * gives (isoctl fabric ibsim-net); the driver only reads and reports them.
 *
 * RoCE VFs (an Ethernet cluster with fabric.vlan_range; docs/fabric.md "RoCE
 * VFs"): netfilter never sees RoCE traffic, so the VF's guard is its
 * tenant's VLAN with the spoof check on, set on the PF's netdev (the one in
 * the HCA's sysfs device dir) by rtnetlink (src/sandbox/overlay_vf.c) and
 * read back every tick; the sim driver keeps both as files of its tree. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isostack/agent.h"
#include "isostack/codec.h"
#include "isostack/sandbox.h"
#include "internal.h"

#define SAVED_PREFIX "vf-"
#define SAVED_SUFFIX ".guid"
#define ALL_ONES     UINT64_MAX

int iso_vf_driver_parse(const char *name, enum iso_vf_driver *out)
{
	if (strcmp(name, "none") == 0)
		*out = ISO_VF_NONE;
	else if (strcmp(name, "mlx5") == 0)
		*out = ISO_VF_MLX5;
	else if (strcmp(name, "ibsim") == 0)
		*out = ISO_VF_IBSIM;
	else if (strcmp(name, "sim") == 0)
		*out = ISO_VF_SIM;
	else
		return -EINVAL;
	return 0;
}

const char *iso_vf_driver_name(enum iso_vf_driver d)
{
	return d == ISO_VF_MLX5    ? "mlx5"
	       : d == ISO_VF_IBSIM ? "ibsim"
	       : d == ISO_VF_SIM   ? "sim"
	                           : "none";
}

/* ---- GUID text ---- */

/* "aa:bb:cc:dd:ee:ff:00:11" (sriov files), "aabb:ccdd:eeff:0011" (the
 * node_guid attribute) or 16 bare hex digits; a trailing newline is fine. */
static int guid_parse_text(const char *s, uint64_t *out)
{
	uint64_t g = 0;
	int digits = 0;

	for (; *s && *s != '\n'; s++) {
		int v;
		if (*s == ':')
			continue;
		if (*s >= '0' && *s <= '9')
			v = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			v = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			v = *s - 'A' + 10;
		else
			return -EINVAL;
		if (++digits > 16)
			return -EINVAL;
		g = g << 4 | (uint64_t)v;
	}
	if (digits != 16 || (*s == '\n' && s[1]))
		return -EINVAL;
	*out = g;
	return 0;
}

static void guid_colons(uint64_t g, char *buf, size_t size)
{
	snprintf(buf, size, "%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x", (unsigned)(g >> 56) & 0xff,
	         (unsigned)(g >> 48) & 0xff, (unsigned)(g >> 40) & 0xff, (unsigned)(g >> 32) & 0xff,
	         (unsigned)(g >> 24) & 0xff, (unsigned)(g >> 16) & 0xff, (unsigned)(g >> 8) & 0xff,
	         (unsigned)g & 0xff);
}

static void guid_hex(uint64_t g, char *buf, size_t size)
{
	snprintf(buf, size, "0x%016" PRIx64, g);
}

/* ---- files ---- */

/* A sysfs attribute is written like `echo data > path`: no file is created
 * (a missing attribute is an error, as on a real host). */
static int put(const struct iso_vf_host *h, const char *path, const char *data,
               struct iso_error *err)
{
	size_t len = strlen(data);
	ssize_t n;
	int fd;

	if (h->trace)
		h->trace(h->trace_arg, path, data);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs", "write %s: %s", path,
		                     strerror(errno));
	n = write(fd, data, len);
	if (n != (ssize_t)len) {
		int e = n < 0 ? errno : EIO;
		close(fd);
		return iso_error_set(err, ISO_E_INTERNAL, "vfs", "write %s: %s", path, strerror(e));
	}
	if (close(fd) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs", "write %s: %s", path,
		                     strerror(errno));
	return 0;
}

static int get(const char *path, char *buf, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	return ferror(f) ? -EIO : 0;
}

/* <root>/sys/class/infiniband/<dev>/device, without a doubled slash. */
static void device_dir(const struct iso_vf_host *h, const char *dev, char *buf, size_t size)
{
	const char *root = h->sysfs_root && *h->sysfs_root ? h->sysfs_root : "/";
	size_t n = strlen(root);

	while (n > 0 && root[n - 1] == '/')
		n--;
	snprintf(buf, size, "%.*s/sys/class/infiniband/%s/device", (int)n, root, dev);
}

static void pci_driver_file(const struct iso_vf_host *h, const char *what, char *buf, size_t size)
{
	const char *root = h->sysfs_root && *h->sysfs_root ? h->sysfs_root : "/";
	size_t n = strlen(root);

	while (n > 0 && root[n - 1] == '/')
		n--;
	snprintf(buf, size, "%.*s/sys/bus/pci/drivers/mlx5_core/%s", (int)n, root, what);
}

/* ---- one VF on mlx5 ---- */

struct vf {
	const struct iso_vf_host *h;
	const char *dev;
	unsigned index;
	char dir[PATH_MAX]; /* .../device */
	char bdf[64];       /* its PCI address, from virtfn<index> */
	char netdev[64];    /* "" when none */
	uint64_t guid;      /* read back */
	bool have_guid;
};

static int vf_open(struct vf *v, const struct iso_vf_host *h, const char *dev, unsigned index,
                   struct iso_error *err)
{
	char link[PATH_MAX + 32], target[PATH_MAX];
	ssize_t n;
	const char *base;

	memset(v, 0, sizeof(*v));
	v->h = h;
	v->dev = dev;
	v->index = index;
	device_dir(h, dev, v->dir, sizeof(v->dir));
	snprintf(link, sizeof(link), "%s/virtfn%u", v->dir, index);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return iso_error_set(err, ISO_E_INVALID, "vfs",
		                     "VF %u of %s: no PCI function (%s: %s); are the VFs created "
		                     "(sriov_numvfs)?",
		                     index, dev, link, strerror(errno));
	target[n] = '\0';
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (!*base || strlen(base) >= sizeof(v->bdf))
		return iso_error_set(err, ISO_E_INVALID, "vfs", "VF %u of %s: %s is no PCI address",
		                     index, dev, link);
	iso_strlcpy(v->bdf, base, sizeof(v->bdf));
	return 0;
}

/* The GUID the VF has now: its own node_guid when its RDMA device is there
 * (the value in force), else the sriov `node` file. */
static int vf_read(struct vf *v, struct iso_error *err)
{
	char path[PATH_MAX + 300], buf[64] = "";
	DIR *d;
	struct dirent *de;
	int r = -ENOENT;

	v->have_guid = false;
	v->netdev[0] = '\0';
	snprintf(path, sizeof(path), "%s/virtfn%u/infiniband", v->dir, v->index);
	if ((d = opendir(path))) {
		while (r < 0 && (de = readdir(d)))
			if (de->d_name[0] != '.') {
				snprintf(path, sizeof(path), "%s/virtfn%u/infiniband/%s/node_guid",
				         v->dir, v->index, de->d_name);
				r = get(path, buf, sizeof(buf));
			}
		closedir(d);
	}
	if (r < 0) {
		snprintf(path, sizeof(path), "%s/sriov/%u/node", v->dir, v->index);
		r = get(path, buf, sizeof(buf));
	}
	if (r < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs",
		                     "VF %u of %s: cannot read its GUID (%s: %s)", v->index, v->dev,
		                     path, strerror(-r));
	if (guid_parse_text(buf, &v->guid) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs", "VF %u of %s: %s holds no GUID",
		                     v->index, v->dev, path);
	v->have_guid = true;
	snprintf(path, sizeof(path), "%s/virtfn%u/net", v->dir, v->index);
	if ((d = opendir(path))) {
		while ((de = readdir(d)))
			if (de->d_name[0] != '.') {
				iso_strlcpy(v->netdev, de->d_name, sizeof(v->netdev));
				break;
			}
		closedir(d);
	}
	return 0;
}

/* Writes node and port GUID (the same, as ib-sriov-cni does) and, when
 * asked, the policy; then unbinds and binds the VF by its PCI address, after
 * which the GUID is in force. */
static int vf_write(struct vf *v, uint64_t guid, bool policy, struct iso_error *err)
{
	char path[PATH_MAX + 64], text[32];
	int r;

	guid_colons(guid, text, sizeof(text));
	snprintf(text + strlen(text), sizeof(text) - strlen(text), "\n");
	snprintf(path, sizeof(path), "%s/sriov/%u/node", v->dir, v->index);
	if ((r = put(v->h, path, text, err)) < 0)
		return r;
	snprintf(path, sizeof(path), "%s/sriov/%u/port", v->dir, v->index);
	if ((r = put(v->h, path, text, err)) < 0)
		return r;
	if (policy) {
		snprintf(path, sizeof(path), "%s/sriov/%u/policy", v->dir, v->index);
		if ((r = put(v->h, path, "Follow\n", err)) < 0)
			return r;
	}
	snprintf(text, sizeof(text), "%s\n", v->bdf);
	pci_driver_file(v->h, "unbind", path, sizeof(path));
	if ((r = put(v->h, path, text, err)) < 0 && r != -ENODEV)
		return r;
	pci_driver_file(v->h, "bind", path, sizeof(path));
	return put(v->h, path, text, err);
}

static void sim_pkey_set(const char *root, const char *dev, unsigned index, uint16_t pkey);

/* ---- saved originals: state_dir/vf-<dev>-<index>.guid ---- */

static void saved_path(const char *state_dir, const char *dev, unsigned index, char *buf,
                       size_t size)
{
	snprintf(buf, size, "%s/" SAVED_PREFIX "%s-%u" SAVED_SUFFIX, state_dir, dev, index);
}

static int saved_load(const char *state_dir, const char *dev, unsigned index, uint64_t *out,
                      struct iso_error *err)
{
	char path[PATH_MAX + 64], buf[64] = "";
	int r;

	saved_path(state_dir, dev, index, path, sizeof(path));
	if ((r = get(path, buf, sizeof(buf))) < 0) {
		if (r == -ENOENT)
			return r;
		return iso_error_set(err, ISO_E_INTERNAL, "state_dir", "cannot read %s: %s", path,
		                     strerror(-r));
	}
	if (guid_parse_text(buf, out) < 0)
		return iso_error_set(
		    err, ISO_E_INVALID, "state_dir",
		    "%s: expected one GUID (aa:bb:cc:dd:ee:ff:00:11) and a newline", path);
	return 0;
}

static int saved_store(const char *state_dir, const char *dev, unsigned index, uint64_t guid,
                       struct iso_error *err)
{
	char path[PATH_MAX + 64], text[32];

	saved_path(state_dir, dev, index, path, sizeof(path));
	guid_colons(guid, text, sizeof(text));
	snprintf(text + strlen(text), sizeof(text) - strlen(text), "\n");
	return iso_file_write_atomic(path, text, strlen(text), 0600, false, err);
}

/* ---- reconcile ---- */

/* One entry of the status's "vfs", written by the codec. */
static json_t *vf_status(unsigned index, const char *netdev, const uint64_t *guid, bool ready,
                         const char *reason)
{
	struct iso_agent_vf v = {.index = (int)index, .ready = ready};

	if (guid) {
		v.guid = *guid;
		v.has_guid = true;
	}
	iso_strlcpy(v.netdev, netdev ? netdev : "", sizeof(v.netdev));
	iso_codec_reason_copy(v.reason, reason ? reason : "");
	return iso_codec_status_vf_encode(&v);
}

static bool vf_desired(const struct iso_agent_desired *d, const char *dev, unsigned index)
{
	for (size_t i = 0; i < d->n_vfs; i++)
		if (d->vfs[i].index == index && strcmp(d->vfs[i].device, dev) == 0)
			return true;
	return false;
}

/* Puts the saved GUID back after a failure that followed a write. */
static void rollback(struct vf *v, const char *node, uint64_t saved, const char *why)
{
	struct iso_error e = {0};
	char text[32];

	guid_colons(saved, text, sizeof(text));
	if (vf_write(v, saved, false, &e) < 0)
		iso_log(ISO_LOG_ERR, "agent.vf_rollback_failed",
		        "node=%s device=%s vf=%u guid=%s cause=\"%s\" msg=\"%s\"", node, v->dev,
		        v->index, text, why, e.message);
	else
		iso_log(ISO_LOG_WARN, "agent.vf_rolled_back",
		        "node=%s device=%s vf=%u guid=%s cause=\"%s\"", node, v->dev, v->index,
		        text, why);
}

/* Zero and all-ones are never a VF's GUID, whatever the driver: the entry
 * of a desired VF that names one. */
static bool guid_usable(uint64_t g)
{
	return g != 0 && g != ALL_ONES;
}

static json_t *guid_refused(const struct iso_agent_vf_want *w)
{
	char want[24], reason[96];

	guid_hex(w->guid, want, sizeof(want));
	snprintf(reason, sizeof(reason), "refused: GUID %s is not valid (zero or all-ones)", want);
	return vf_status(w->index, "", NULL, false, reason);
}

/* One desired VF on mlx5: its status entry. */
static json_t *mlx5_vf(const struct iso_vf_host *h, const char *state_dir, const char *node,
                       const struct iso_agent_vf_want *w, struct iso_vf_tick *tick)
{
	struct iso_error e = {0};
	struct vf v;
	uint64_t saved = 0;
	char reason[300], want[24];
	int r;

	if (!guid_usable(w->guid))
		return guid_refused(w);
	guid_hex(w->guid, want, sizeof(want));
	if (vf_open(&v, h, w->device, w->index, &e) < 0 || vf_read(&v, &e) < 0) {
		tick->failed++;
		return vf_status(w->index, v.netdev, NULL, false, e.message);
	}
	if (v.guid == w->guid)
		return vf_status(w->index, v.netdev, &v.guid, true, "");
	/* The original GUID is taken once, before our first write, and kept
	 * until it is given back: a retry never takes our own GUID for it. */
	r = saved_load(state_dir, w->device, w->index, &saved, &e);
	if (r == -ENOENT) {
		saved = v.guid ? v.guid : ALL_ONES; /* as ib-sriov-cni: zero is kept as ones */
		r = saved_store(state_dir, w->device, w->index, saved, &e);
	}
	if (r < 0) {
		tick->failed++;
		return vf_status(w->index, v.netdev, &v.guid, false, e.message);
	}
	r = vf_write(&v, w->guid, true, &e);
	if (r == 0 && (r = vf_read(&v, &e)) == 0 && v.guid != w->guid) {
		char got[24];
		guid_hex(v.guid, got, sizeof(got));
		r = iso_error_set(&e, ISO_E_INTERNAL, "vfs",
		                  "VF %u of %s reads GUID %s after the rebind, not %s", w->index,
		                  w->device, got, want);
	}
	if (r < 0) {
		tick->failed++;
		snprintf(reason, sizeof(reason), "%s (rolled back)", e.message);
		iso_log(ISO_LOG_WARN, "agent.vf_failed",
		        "node=%s device=%s vf=%u guid=%s msg=\"%s\"", node, w->device, w->index,
		        want, e.message);
		rollback(&v, node, saved, e.message);
		memset(&e, 0, sizeof(e));
		if (vf_read(&v, &e) < 0)
			return vf_status(w->index, "", NULL, false, reason);
		return vf_status(w->index, v.netdev, &v.guid, false, reason);
	}
	tick->programmed++;
	iso_log(ISO_LOG_INFO, "agent.vf_programmed",
	        "node=%s device=%s vf=%u pci=%s guid=%s tenant=%s netdev=%s", node, w->device,
	        w->index, v.bdf, want, w->tenant, v.netdev);
	return vf_status(w->index, v.netdev, &v.guid, true, "");
}

/* Gives every VF the document no longer holds its saved GUID back; the
 * saved file goes once the VF reads it back. */
static void mlx5_restore(const struct iso_vf_host *h, const char *state_dir,
                         const struct iso_agent_desired *d, bool sim, struct iso_vf_tick *tick)
{
	DIR *dir = opendir(state_dir);
	struct dirent *de;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		char dev[32], path[PATH_MAX + 64], text[32];
		const char *name = de->d_name, *dash;
		size_t len = strlen(name), dl;
		struct iso_error e = {0};
		uint64_t saved = 0;
		unsigned long index;
		char *end;
		struct vf v;

		if (strncmp(name, SAVED_PREFIX, strlen(SAVED_PREFIX)) != 0 ||
		    len <= strlen(SAVED_PREFIX) + strlen(SAVED_SUFFIX) ||
		    strcmp(name + len - strlen(SAVED_SUFFIX), SAVED_SUFFIX) != 0)
			continue;
		dash = strrchr(name, '-');
		dl = (size_t)(dash - name) - strlen(SAVED_PREFIX);
		if (dash <= name + strlen(SAVED_PREFIX) || dl >= sizeof(dev))
			continue;
		memcpy(dev, name + strlen(SAVED_PREFIX), dl);
		dev[dl] = '\0';
		errno = 0;
		index = strtoul(dash + 1, &end, 10);
		if (errno || end == dash + 1 || strcmp(end, SAVED_SUFFIX) != 0 ||
		    index >= ISO_AGENT_VF_MAX || vf_desired(d, dev, (unsigned)index))
			continue;
		/* only the name saved_path writes ("01" or "+1" would be read
		 * back under another name) */
		saved_path(state_dir, dev, (unsigned)index, path, sizeof(path));
		if (strcmp(strrchr(path, '/') + 1, name) != 0)
			continue;
		if (saved_load(state_dir, dev, (unsigned)index, &saved, &e) < 0 ||
		    vf_open(&v, h, dev, (unsigned)index, &e) < 0 || vf_read(&v, &e) < 0 ||
		    (v.guid != saved &&
		     (vf_write(&v, saved, false, &e) < 0 || vf_read(&v, &e) < 0))) {
			tick->failed++;
			iso_log(ISO_LOG_WARN, "agent.vf_restore_failed",
			        "node=%s device=%s vf=%lu msg=\"%s\"", d->node, dev, index,
			        e.message);
			continue;
		}
		guid_colons(saved, text, sizeof(text));
		if (v.guid != saved) {
			tick->failed++;
			iso_log(ISO_LOG_WARN, "agent.vf_restore_failed",
			        "node=%s device=%s vf=%lu msg=\"reads another GUID than %s after "
			        "the rebind\"",
			        d->node, dev, index, text);
			continue;
		}
		saved_path(state_dir, dev, (unsigned)index, path, sizeof(path));
		unlink(path);
		if (sim) /* the tenant left: its P_Key leaves the VF's table */
			sim_pkey_set(h->sysfs_root, dev, (unsigned)index, 0);
		tick->restored++;
		iso_log(ISO_LOG_INFO, "agent.vf_restored", "node=%s device=%s vf=%lu guid=%s",
		        d->node, dev, index, text);
	}
	closedir(dir);
}

/* The GUID of `node`-vf<index> in an ibsim net file: the `caguid=` line
 * before its Hca record sets the CA's node GUID, and its port's GUID is
 * one more (src/fabric/ibsim_net.c). */
static int ibsim_guid(const char *net, const char *node, unsigned index, uint64_t *out,
                      struct iso_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(net, "re");
	char line[512], want[ISO_NAME_MAX + 32];
	uint64_t caguid = 0;
	bool have = false;

	if (!f)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs",
		                     "cannot read the ibsim net file %s: %s", net, strerror(errno));
	snprintf(want, sizeof(want), "# \"%s-vf%u ", node, index);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "caguid=", 7) == 0) {
			line[7 + strcspn(line + 7, " \n")] = '\0';
			have = iso_parse_guid(line + 7, &caguid) == 0;
			continue;
		}
		if (strncmp(line, "Hca", 3) == 0 && strstr(line, want)) {
			if (!have)
				break;
			*out = caguid + 1;
			return 0;
		}
	}
	return iso_error_set(err, ISO_E_INTERNAL, "vfs",
	                     "%s-vf%u is no CA of the ibsim net file %s", node, index, net);
}

/* ---- sim: a host's sysfs as plain files ---- */

static int sim_mkdir(const char *path)
{
	return mkdir(path, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

static int sim_mkdirs(char *path)
{
	int r = 0;

	for (char *p = path + 1; *p && r == 0; p++)
		if (*p == '/') {
			*p = '\0';
			r = sim_mkdir(path);
			*p = '/';
		}
	return r ? r : sim_mkdir(path);
}

static int sim_file(const char *path, const char *text)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	size_t len = strlen(text);

	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	return write(fd, text, len) == (ssize_t)len ? 0 : -EIO;
}

/* The VF's own RDMA device, <dev>vf<index>, whose `device` is the VF's PCI
 * function (as mlx5_ib names a VF's device on a host), and its P_Key table
 * ports/1/pkeys/0..SIM_PKEYS-1: the default P_Key 0xffff at 0, the rest
 * empty (0x0000). What the subnet manager adds for the tenant is modelled
 * by sim_pkey_set. */
#define SIM_PKEYS 16

static int sim_vf_rdma(const char *root, const char *dev, unsigned index, const char *pci)
{
	char path[PATH_MAX];
	int r;

	snprintf(path, sizeof(path), "%s/sys/class/infiniband/%svf%u/ports/1/pkeys", root, dev,
	         index);
	if ((r = sim_mkdirs(path)) < 0)
		return r;
	for (unsigned i = 0; i < SIM_PKEYS; i++) {
		snprintf(path, sizeof(path), "%s/sys/class/infiniband/%svf%u/ports/1/pkeys/%u",
		         root, dev, index, i);
		if ((r = sim_file(path, i == 0 ? "0xffff\n" : "0x0000\n")) < 0)
			return r;
	}
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/%svf%u/device", root, dev, index);
	if (symlink(pci, path) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* The subnet manager's part, modelled: once the VF is set up its tenant's
 * P_Key is at index 1 of its table; pkey 0 (released) empties it. Not a
 * driver write (a real agent never writes a P_Key table), so not traced. */
static void sim_pkey_set(const char *root, const char *dev, unsigned index, uint16_t pkey)
{
	char path[PATH_MAX], text[16], have[16] = "";
	_cleanup_close_ int fd = -1;

	snprintf(path, sizeof(path), "%s/sys/class/infiniband/%svf%u/ports/1/pkeys/1", root, dev,
	         index);
	snprintf(text, sizeof(text), "0x%04x\n", pkey);
	if (get(path, have, sizeof(have)) == 0 && strcmp(have, text) == 0)
		return;
	if ((fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)) < 0 ||
	    write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		iso_log(ISO_LOG_WARN, "agent.vf_sim_failed", "path=%s msg=\"%s\"", path,
		        strerror(errno));
}

/* What a VF looks like when `sriov_numvfs` made it: GUID zero, policy
 * Down, a PCI function with a netdev; created once, then only the driver's
 * own writes change it. */
static int sim_vf(const char *root, const char *dev, unsigned index)
{
	char path[PATH_MAX], link[PATH_MAX + 32], bdf[32];
	static const char *const files[][2] = {
	    {"node", "00:00:00:00:00:00:00:00\n"},
	    {"port", "00:00:00:00:00:00:00:00\n"},
	    {"policy", "Down\n"},
	    {"vlan", "0\n"}, /* RoCE: what rtnetlink sets on a real PF */
	    {"spoofchk", "off\n"},
	};
	int r;

	snprintf(bdf, sizeof(bdf), "0000:81:%02x.%u", 1 + index / 8, index % 8);
	snprintf(path, sizeof(path), "%s/sys/bus/pci/drivers/mlx5_core", root);
	if ((r = sim_mkdirs(path)) < 0)
		return r;
	snprintf(path, sizeof(path), "%s/sys/bus/pci/drivers/mlx5_core/bind", root);
	if ((r = sim_file(path, "")) < 0)
		return r;
	snprintf(path, sizeof(path), "%s/sys/bus/pci/drivers/mlx5_core/unbind", root);
	if ((r = sim_file(path, "")) < 0)
		return r;
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/net/%sv%u", root, bdf, dev, index);
	if ((r = sim_mkdirs(path)) < 0)
		return r;
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/device/sriov/%u", root, dev,
	         index);
	if ((r = sim_mkdirs(path)) < 0)
		return r;
	for (size_t i = 0; i < ISO_ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/device/sriov/%u/%s", root,
		         dev, index, files[i][0]);
		if ((r = sim_file(path, files[i][1])) < 0)
			return r;
	}
	/* the PF's netdev, where a real host sets a RoCE VF's VLAN */
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/device/net/%.8spf", root, dev,
	         dev);
	if ((r = sim_mkdirs(path)) < 0)
		return r;
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", root, bdf);
	snprintf(link, sizeof(link), "%s/sys/class/infiniband/%s/device/virtfn%u", root, dev,
	         index);
	if (symlink(path, link) < 0 && errno != EEXIST)
		return -errno;
	return sim_vf_rdma(root, dev, index, path);
}

/* ---- RoCE VFs: the tenant's VLAN and the spoof check ---- */

/* The first entry of `dir` that is not a dot entry into out ("" when none). */
static void first_entry(const char *dir, char *out, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	out[0] = '\0';
	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			iso_strlcpy(out, de->d_name, size);
			break;
		}
	closedir(d);
}

/* The sim's model of the PF's VF settings: sriov/<vf>/vlan (decimal) and
 * spoofchk (on/off), strict. */
static int sim_roce_read(const struct vf *v, struct iso_overlay_vf *out, struct iso_error *err)
{
	char path[PATH_MAX + 64], buf[32] = "", *end = NULL;
	unsigned long vlan;
	int r;

	*out = (struct iso_overlay_vf){.vf = v->index};
	snprintf(path, sizeof(path), "%s/sriov/%u/vlan", v->dir, v->index);
	if ((r = get(path, buf, sizeof(buf))) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs", "VF %u of %s: read %s: %s",
		                     v->index, v->dev, path, strerror(-r));
	errno = 0;
	vlan = strtoul(buf, &end, 10);
	if (errno || end == buf || strcmp(end, "\n") != 0 || vlan > ISO_AGENT_VLAN_MAX)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs", "VF %u of %s: %s holds no VLAN",
		                     v->index, v->dev, path);
	out->vlan = (unsigned)vlan;
	snprintf(path, sizeof(path), "%s/sriov/%u/spoofchk", v->dir, v->index);
	if ((r = get(path, buf, sizeof(buf))) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs", "VF %u of %s: read %s: %s",
		                     v->index, v->dev, path, strerror(-r));
	if (strcmp(buf, "on\n") != 0 && strcmp(buf, "off\n") != 0)
		return iso_error_set(err, ISO_E_INTERNAL, "vfs", "VF %u of %s: %s is not on or off",
		                     v->index, v->dev, path);
	out->spoofchk = strcmp(buf, "on\n") == 0;
	return 0;
}

static int sim_roce_set(const struct vf *v, const struct iso_overlay_vf *want,
                        struct iso_error *err)
{
	char path[PATH_MAX + 64], text[16];
	int r;

	snprintf(path, sizeof(path), "%s/sriov/%u/vlan", v->dir, v->index);
	snprintf(text, sizeof(text), "%u\n", want->vlan);
	if ((r = put(v->h, path, text, err)) < 0)
		return r;
	snprintf(path, sizeof(path), "%s/sriov/%u/spoofchk", v->dir, v->index);
	return put(v->h, path, want->spoofchk ? "on\n" : "off\n", err);
}

static json_t *roce_status(unsigned index, const char *netdev, const struct iso_overlay_vf *have,
                           bool ready, const char *reason)
{
	struct iso_agent_vf v = {.index = (int)index, .ready = ready, .has_vlan = have != NULL};

	if (have) {
		v.vlan = (uint16_t)have->vlan;
		v.spoofchk = have->spoofchk;
	}
	iso_strlcpy(v.netdev, netdev ? netdev : "", sizeof(v.netdev));
	iso_codec_reason_copy(v.reason, reason ? reason : "");
	return iso_codec_status_vf_encode(&v);
}

/* One desired RoCE VF (`sim`: the sim driver's files, else rtnetlink on the
 * PF): its status entry, ready when the VF reads back the tenant's VLAN with
 * the spoof check on. */
static json_t *roce_vf(const struct iso_vf_host *h, bool sim, const char *node,
                       const struct iso_agent_vf_want *w, struct iso_vf_tick *tick)
{
	const struct iso_overlay_vf want = {
	    .vf = w->index, .vlan = w->vlan, .qos = 0, .spoofchk = true};
	struct iso_overlay_vf have = {0};
	struct iso_error e = {0};
	char path[PATH_MAX + 64], pf[64], netdev[64], reason[300];
	struct vf v;
	int r;

	if (vf_open(&v, h, w->device, w->index, &e) < 0) {
		tick->failed++;
		return roce_status(w->index, "", NULL, false, e.message);
	}
	snprintf(path, sizeof(path), "%s/virtfn%u/net", v.dir, v.index);
	first_entry(path, netdev, sizeof(netdev));
	if (strlen(netdev) >= IFNAMSIZ)
		netdev[0] = '\0';
	snprintf(path, sizeof(path), "%s/net", v.dir);
	first_entry(path, pf, sizeof(pf));
	if (!pf[0] || strlen(pf) >= IFNAMSIZ) {
		tick->failed++;
		snprintf(reason, sizeof(reason), "%s has no PF network interface (%s)", w->device,
		         path);
		return roce_status(w->index, netdev, NULL, false, reason);
	}
	r = sim ? sim_roce_read(&v, &have, &e) : iso_overlay_vf_read(NULL, pf, w->index, &have, &e);
	if (r == 0 && have.vlan == want.vlan && have.spoofchk)
		return roce_status(w->index, netdev, &have, true, "");
	memset(&e, 0, sizeof(e));
	r = sim ? sim_roce_set(&v, &want, &e) : iso_overlay_vf_set(NULL, pf, &want, &e);
	if (r == 0)
		r = sim ? sim_roce_read(&v, &have, &e)
		        : iso_overlay_vf_read(NULL, pf, w->index, &have, &e);
	if (r == 0 && (have.vlan != want.vlan || !have.spoofchk))
		r = iso_error_set(&e, ISO_E_INTERNAL, "vfs",
		                  "VF %u of %s (PF %s) reads VLAN %u spoofchk %s after the write, "
		                  "not VLAN %u spoofchk on",
		                  w->index, w->device, pf, have.vlan, have.spoofchk ? "on" : "off",
		                  want.vlan);
	if (r < 0) {
		tick->failed++;
		iso_log(ISO_LOG_WARN, "agent.vf_vlan_failed",
		        "node=%s device=%s vf=%u pf=%s vlan=%u msg=\"%s\"", node, w->device,
		        w->index, pf, want.vlan, e.message);
		iso_strlcpy(reason, e.message, sizeof(reason));
		/* what the VF holds now, when it can be read */
		memset(&e, 0, sizeof(e));
		r = sim ? sim_roce_read(&v, &have, &e)
		        : iso_overlay_vf_read(NULL, pf, w->index, &have, &e);
		return roce_status(w->index, netdev, r == 0 ? &have : NULL, false, reason);
	}
	tick->programmed++;
	iso_log(ISO_LOG_INFO, "agent.vf_vlan_set",
	        "node=%s device=%s vf=%u pf=%s vlan=%u spoofchk=on tenant=%s netdev=%s", node,
	        w->device, w->index, pf, want.vlan, w->tenant, netdev);
	return roce_status(w->index, netdev, &have, true, "");
}

int iso_agent_vf_reconcile(const struct iso_vf_host *given, const char *state_dir,
                           const struct iso_agent_desired *d, json_t *status,
                           struct iso_vf_tick *tick, struct iso_error *err)
{
	json_t *vfs = json_array();
	struct iso_vf_host sim = *given;
	const struct iso_vf_host *h = given;
	char root[PATH_MAX];

	memset(tick, 0, sizeof(*tick));
	if (!vfs || json_object_set_new(status, "vfs", vfs) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if (given->driver == ISO_VF_SIM) {
		snprintf(root, sizeof(root), "%s/vf-sim", state_dir);
		for (size_t i = 0; i < d->n_vfs; i++) {
			int r = sim_vf(root, d->vfs[i].device, d->vfs[i].index);
			if (r < 0)
				iso_log(ISO_LOG_WARN, "agent.vf_sim_failed",
				        "node=%s vf=%u msg=\"%s\"", d->node, d->vfs[i].index,
				        strerror(-r));
		}
		sim.driver = ISO_VF_MLX5;
		sim.sysfs_root = root;
		h = &sim;
	}
	if (h->driver == ISO_VF_MLX5)
		mlx5_restore(h, state_dir, d, given->driver == ISO_VF_SIM, tick);
	for (size_t i = 0; i < d->n_vfs; i++) {
		const struct iso_agent_vf_want *w = &d->vfs[i];
		struct iso_error e = {0};
		uint64_t g = 0;
		json_t *entry;

		if (w->vlan) { /* a RoCE VF: its tenant's VLAN, no GUID */
			entry =
			    h->driver == ISO_VF_MLX5
			        ? roce_vf(h, given->driver == ISO_VF_SIM, d->node, w, tick)
			        : roce_status(w->index, "", NULL, false,
			                      h->driver == ISO_VF_IBSIM
			                          ? "the ibsim VF driver has no RoCE VFs"
			                          : "this host has no VF driver (isostack-agent "
			                            "--vf-driver none)");
			if (!entry || json_array_append_new(vfs, entry) < 0)
				return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
			continue;
		}
		switch (h->driver) {
		case ISO_VF_MLX5:
			entry = mlx5_vf(h, state_dir, d->node, w, tick);
			break;
		case ISO_VF_IBSIM:
			/* a CA's caguid + 1 may wrap to zero */
			if (!guid_usable(w->guid)) {
				entry = guid_refused(w);
			} else if (ibsim_guid(h->ibsim_net, d->node, w->index, &g, &e) < 0) {
				entry = vf_status(w->index, "", NULL, false, e.message);
			} else {
				char want[24], reason[96] = "";
				guid_hex(w->guid, want, sizeof(want));
				if (g != w->guid)
					snprintf(reason, sizeof(reason),
					         "the ibsim CA has another GUID than %s", want);
				entry = vf_status(w->index, "", &g, g == w->guid, reason);
			}
			break;
		default:
			entry = vf_status(w->index, "", NULL, false,
			                  "this host has no VF driver (isostack-agent --vf-driver "
			                  "none)");
		}
		/* sim: the VF set up, the subnet manager's P_Key for its tenant */
		if (entry && given->driver == ISO_VF_SIM && w->pkey &&
		    json_is_true(json_object_get(entry, "ready")))
			sim_pkey_set(root, w->device, w->index, w->pkey);
		if (!entry || json_array_append_new(vfs, entry) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	return 0;
}

int iso_agent_vf_netdev(const struct iso_vf_host *h, const char *device, unsigned index,
                        char out[16], struct iso_error *err)
{
	struct vf v;
	int r;

	out[0] = '\0';
	if (!device || !*device || strchr(device, '/') || device[0] == '.')
		return iso_error_set(err, ISO_E_INVALID, "device", "bad HCA name");
	if (h->driver == ISO_VF_SIM || h->driver == ISO_VF_IBSIM) {
		if (snprintf(out, 16, "%sv%u", device, index) >= 16)
			return iso_error_set(err, ISO_E_INVALID, "device",
			                     "%sv%u: longer than an interface name", device, index);
		return 0;
	}
	if (h->driver != ISO_VF_MLX5)
		return iso_error_set(
		    err, ISO_E_UNAVAILABLE, "vfs",
		    "this host has no VF driver (isostack-agent --vf-driver none)");
	if ((r = vf_open(&v, h, device, index, err)) < 0 || (r = vf_read(&v, err)) < 0)
		return r;
	if (!v.netdev[0] || strlen(v.netdev) >= 16)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "vfs", "VF %u of %s has no netdev",
		                     index, device);
	iso_strlcpy(out, v.netdev, 16);
	return 0;
}

/* ---- the P_Key table (issue 15: NCCL_IB_PKEY is an index in it) ---- */

int iso_agent_vf_pkey_index(const struct iso_vf_host *h, const char *node_dir, const char *device,
                            unsigned index, uint16_t pkey, int *out, struct iso_error *err)
{
	char root[PATH_MAX], rdev[ISO_RDMA_NAME_MAX], path[PATH_MAX + 128], buf[32];
	struct agent_host_roots roots = {"/dev", "/proc", root};
	struct agent_vf_ref vf = {device, index};
	int limited = -1;

	*out = -1;
	if (!device || !*device || strchr(device, '/') || device[0] == '.')
		return iso_error_set(err, ISO_E_INVALID, "device", "bad HCA name");
	if (h->driver == ISO_VF_SIM)
		snprintf(root, sizeof(root), "%s/vf-sim", node_dir);
	else if (h->driver == ISO_VF_MLX5)
		iso_strlcpy(root, h->sysfs_root && *h->sysfs_root ? h->sysfs_root : "/",
		            sizeof(root));
	else
		return 0; /* ibsim: the SM's table is in the simulator; none: no VF */
	if (agent_vf_rdma_device(&roots, &vf, rdev, err) <= 0)
		return 0;
	for (unsigned i = 0; i < 65536; i++) {
		unsigned long v;
		char *end = NULL;

		snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/ports/1/pkeys/%u", root,
		         rdev, i);
		if (get(path, buf, sizeof(buf)) < 0)
			break;
		errno = 0;
		v = strtoul(buf, &end, 16);
		if (errno || end == buf || (*end && strcmp(end, "\n") != 0) || v > 0xffff)
			continue;
		if ((v & 0x7fff) == 0 || (v & 0x7fff) != (pkey & 0x7fffu))
			continue;
		if (v & 0x8000) {
			*out = (int)i;
			return 0;
		}
		if (limited < 0)
			limited = (int)i;
	}
	*out = limited;
	return 0;
}

/* fuzz_agent_vf.c: what the node agent's VF driver (src/agent/vf.c, docs/agent.md
 * "VFs") reads from files: the ibsim net file (--vf-driver ibsim), and on
 * mlx5 the GUID a VF's sriov `node` file holds, the saved originals
 * (STATE_DIR/NODE/vf-<device>-<vf>.guid, contents and names) that the
 * restore pass reads back after a restart. Both are read by one call,
 * iso_agent_vf_reconcile, so one harness feeds both, and a selector byte
 * picks the driver; the next 8 bytes are the GUID the desired document
 * gives VF 0 of mlx5_0 (big-endian), so the fuzzer also picks GUIDs.
 *   ibsim: the rest is the net file; the document holds VFs 0, 1 and 2.
 *   mlx5: the rest is split at NUL bytes into the sriov/0/node file of the
 *     sim driver's tree (STATE_DIR/vf-sim), the saved original of VF 0, and
 *     the name and contents of one more file in the state dir.
 * The call must succeed with one status entry per desired VF; an entry
 * ready must carry the desired GUID, never zero or all-ones (which no VF
 * may be left at), and on mlx5 the node file must hold it; one not ready
 * must say why. Everything is written under the harness's directory. */
#include <dirent.h>
#include <inttypes.h>
#include <string.h>

#include "fuzz.h"
#include "isostack/agent.h"

#define NODE "gpu-a01"
#define DEV  "mlx5_0"

static void spit(const char *path, const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "we");

	if (!f)
		abort();
	if (fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
}

/* Saved originals left by the previous input go. */
static void clear_saved(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[512];

	if (!d)
		abort();
	while ((de = readdir(d)))
		if (strcmp(de->d_name, "vf-sim") != 0 && strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
	closedir(d);
}

static void check_status(const struct iso_agent_desired *d, json_t *status, const char *node_file)
{
	json_t *vfs = json_object_get(status, "vfs");

	FUZZ_ASSERT(json_array_size(vfs) == d->n_vfs, "%zu entries for %zu VFs",
	            json_array_size(vfs), d->n_vfs);
	for (size_t i = 0; i < d->n_vfs; i++) {
		json_t *e = json_array_get(vfs, i);
		const char *guid = json_string_value(json_object_get(e, "guid"));
		const char *reason = json_string_value(json_object_get(e, "reason"));
		char want[24];

		snprintf(want, sizeof(want), "0x%016" PRIx64, d->vfs[i].guid);
		FUZZ_ASSERT(guid && reason, "vfs[%zu] lacks guid or reason", i);
		if (!json_is_true(json_object_get(e, "ready"))) {
			FUZZ_ASSERT(reason[0], "vfs[%zu] not ready without a reason", i);
			continue;
		}
		FUZZ_ASSERT(strcmp(guid, want) == 0, "vfs[%zu] ready with %s, desired %s", i, guid,
		            want);
		FUZZ_ASSERT(d->vfs[i].guid != 0 && d->vfs[i].guid != UINT64_MAX,
		            "vfs[%zu] ready at GUID %s", i, guid);
		if (node_file && i == 0) {
			/* what the VF holds now: its hex digits, colons aside */
			char text[64] = "";
			uint64_t g = 0;
			int digits = 0;
			FILE *f = fopen(node_file, "re");

			FUZZ_ASSERT(f, "%s is gone", node_file);
			if (!fgets(text, sizeof(text), f))
				text[0] = '\0';
			fclose(f);
			for (const char *p = text; *p && *p != '\n'; p++)
				if (*p != ':' && digits++ < 16)
					g = g << 4 | (uint64_t)(*p <= '9' ? *p - '0'
					                                  : (*p | 0x20) - 'a' + 10);
			FUZZ_ASSERT(digits == 16 && g == d->vfs[i].guid,
			            "ready, but the node file holds \"%s\"", text);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_tmpdir("agent_vf");
	struct iso_agent_vf_want vfs[3] = {
	    {.index = 0, .device = DEV, .tenant = "acme", .pkey = 0x8001, .n_members = 1},
	    {.index = 1, .device = DEV, .tenant = "beta", .pkey = 0x8002, .n_members = 1},
	    {.index = 2, .device = DEV, .tenant = "gamma", .pkey = 0x8003, .n_members = 1},
	};
	struct iso_agent_desired d = {.node = NODE, .vfs = vfs};
	struct iso_vf_host h = {0};
	struct iso_vf_tick tick;
	struct iso_error err = {0};
	char path[512], node_file[512] = "";
	json_t *status = json_object();
	uint64_t guid = 0;
	int r;

	if (size < 9 || !status) {
		json_decref(status);
		return 0;
	}
	for (int i = 1; i <= 8; i++)
		guid = guid << 8 | data[i];
	data += 9;
	size -= 9;
	if (!(data[-9] & 1)) {
		snprintf(path, sizeof(path), "%s/ibsim.net", dir);
		spit(path, data, size);
		for (size_t i = 0; i < 3; i++)
			vfs[i].guid = guid + i;
		d.n_vfs = 3;
		h.driver = ISO_VF_IBSIM;
		h.ibsim_net = path;
	} else {
		const uint8_t *part[4] = {0};
		size_t len[4] = {0}, n = 0;

		for (size_t at = 0; n < 4;) {
			const uint8_t *nul = memchr(data + at, '\0', size - at);
			size_t end = nul ? (size_t)(nul - data) : size;

			part[n] = data + at;
			len[n++] = end - at;
			if (!nul)
				break;
			at = end + 1;
		}
		clear_saved(dir);
		/* VFs 0 and 1 as sriov_numvfs made them: the first pass builds
		 * the sim tree and, their GUIDs being invalid, touches nothing */
		vfs[0].guid = vfs[1].guid = 0;
		d.n_vfs = 2;
		h.driver = ISO_VF_SIM;
		r = iso_agent_vf_reconcile(&h, dir, &d, status, &tick, &err);
		FUZZ_ASSERT(r == 0, "building the sim tree: %s", err.message);
		snprintf(node_file, sizeof(node_file),
		         "%s/vf-sim/sys/class/infiniband/" DEV "/device/sriov/0/node", dir);
		spit(node_file, part[0], len[0]);
		snprintf(path, sizeof(path),
		         "%s/vf-sim/sys/class/infiniband/" DEV "/device/sriov/1/node", dir);
		spit(path, (const uint8_t *)"00:00:00:00:00:00:00:01\n", 24);
		if (part[1]) {
			snprintf(path, sizeof(path), "%s/vf-" DEV "-0.guid", dir);
			spit(path, part[1], len[1]);
		}
		if (part[2] && len[2] > 0 && len[2] < 200 && !memchr(part[2], '/', len[2]) &&
		    !(len[2] <= 2 && part[2][0] == '.' && part[2][len[2] - 1] == '.') &&
		    !(len[2] == 6 && memcmp(part[2], "vf-sim", 6) == 0)) {
			FILE *f;

			snprintf(path, sizeof(path), "%s/%.*s", dir, (int)len[2],
			         (const char *)part[2]);
			if ((f = fopen(path, "we"))) {
				if (part[3])
					fwrite(part[3], 1, len[3], f);
				fclose(f);
			}
		}
		vfs[0].guid = guid;
		d.n_vfs = 1;
	}
	r = iso_agent_vf_reconcile(&h, dir, &d, status, &tick, &err);
	FUZZ_ASSERT(r == 0, "iso_agent_vf_reconcile: %s", err.message);
	check_status(&d, status, node_file[0] ? node_file : NULL);
	json_decref(status);
	return 0;
}

/* test_gpu.c: the GPU drivers. One table of cases runs twice: against the
 * sim driver, and against the nvml driver dlopen-ing the project's fake
 * libnvidia-ml.so.1 (tests/fakes, path in env ISOSTACK_FAKE_NVML), so the
 * real NVML code path is what is tested. The fake's geometry is data from
 * docs/reference-mig.md, written apart from src/mig, so the placement cases
 * (every profile at every start, alone and next to every other placement)
 * check the two against each other. The sim's MIG mode per GPU: off
 * refuses instances, kept in its state file, changed only without
 * instances. Then bad input: garbled state and config files, a library
 * without NVML, NVML calls that fail. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fake_nvml_env.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/gpu.h"

/* The node under test: GPU 0 H100-80GB, 1 A100-40GB, 2 A30. */
static const char *const sim_models[] = {"h100-80gb", "a100-40gb", "a30-24gb"};
static const char *const fake_config = "{\"gpus\": [{\"model\": \"H100-80GB\"}, "
                                       "{\"model\": \"A100-40GB\"}, {\"model\": \"A30\"}]}\n";

struct bk {
	bool nvml;
	char dir[PATH_MAX];
	char path[PATH_MAX]; /* a scratch file path */
	struct iso_gpu *g;
};

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int bk_open_err(struct bk *b, struct iso_error *err)
{
	struct iso_gpu_open_args a = {.state_dir = b->dir};

	if (!b->nvml) {
		a.models = sim_models;
		a.n_models = ISO_ARRAY_SIZE(sim_models);
	}
	return (b->nvml ? &iso_gpu_nvml_ops : &iso_gpu_sim_ops)->open(&a, &b->g, err);
}

static void bk_open(struct bk *b)
{
	struct iso_error err = {0};
	int r = bk_open_err(b, &err);

	if (r != 0)
		fail_msg("open: %d %s", r, err.message);
}

static void bk_close(struct bk *b)
{
	if (b->g)
		b->g->ops->close(b->g);
	b->g = NULL;
}

static int setup(void **state, bool nvml)
{
	struct bk *b = calloc(1, sizeof(*b));

	b->nvml = nvml;
	snprintf(b->dir, sizeof(b->dir), "/tmp/test_gpu.XXXXXX");
	assert_non_null(mkdtemp(b->dir));
	if (nvml)
		fake_nvml_env(b->dir, fake_config);
	bk_open(b);
	*state = b;
	return 0;
}

static int setup_sim(void **state)
{
	return setup(state, false);
}
static int setup_nvml(void **state)
{
	return setup(state, true);
}

static int teardown(void **state)
{
	struct bk *b = *state;
	char cmd[PATH_MAX + 16];

	bk_close(b);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", b->dir);
	assert_int_equal(system(cmd), 0);
	unsetenv("ISOSTACK_FAKE_NVML_FAIL");
	free(b);
	return 0;
}

/* The fake's own test hooks, reached in the copy the driver loaded. */
static void *fake_sym(const char *name)
{
	void *h = dlopen(getenv("ISOSTACK_FAKE_NVML"), RTLD_NOW | RTLD_NOLOAD);
	void *f;

	assert_non_null(h);
	f = dlsym(h, name);
	assert_non_null(f);
	dlclose(h);
	return f;
}

static void inject_xid(struct bk *b, unsigned gpu, unsigned long long xid, int gi, int ci)
{
	if (b->nvml) {
		int (*fn)(unsigned, unsigned long long, unsigned, unsigned) =
		    (int (*)(unsigned, unsigned long long, unsigned, unsigned))fake_sym(
		        "isostack_fake_nvml_inject_xid");
		assert_int_equal(fn(gpu, xid, gi < 0 ? 0xFFFFFFFFu : (unsigned)gi,
		                    ci < 0 ? 0xFFFFFFFFu : (unsigned)ci),
		                 0);
	} else {
		assert_int_equal(iso_gpu_sim_inject_xid(b->g, gpu, xid, gi, ci, NULL), 0);
	}
}

static void set_busy(struct bk *b, unsigned gpu, int start, bool busy)
{
	if (b->nvml) {
		int (*fn)(unsigned, unsigned, int) =
		    (int (*)(unsigned, unsigned, int))fake_sym("isostack_fake_nvml_set_busy");
		assert_int_equal(fn(gpu, (unsigned)start, busy), 0);
	} else {
		assert_int_equal(iso_gpu_sim_set_busy(b->g, gpu, start, busy, NULL), 0);
	}
}

static int create(struct bk *b, unsigned gpu, const char *profile, int start,
                  struct iso_gpu_instance *out)
{
	struct iso_error err = {0};
	return b->g->ops->create_instance(b->g, gpu, profile, start, out, &err);
}

static void must_create(struct bk *b, unsigned gpu, const char *profile, int start)
{
	struct iso_error err = {0};
	int r = b->g->ops->create_instance(b->g, gpu, profile, start, NULL, &err);
	if (r != 0)
		fail_msg("create %s@%d on GPU %u: %d %s", profile, start, gpu, r, err.message);
}

static int destroy(struct bk *b, unsigned gpu, int start)
{
	struct iso_error err = {0};
	return b->g->ops->destroy_instance(b->g, gpu, start, &err);
}

static size_t list(struct bk *b, unsigned gpu, struct iso_gpu_instance **out)
{
	struct iso_error err = {0};
	size_t n = 0;
	int r = b->g->ops->list_instances(b->g, gpu, out, &n, &err);
	if (r != 0)
		fail_msg("list GPU %u: %d %s", gpu, r, err.message);
	return n;
}

static void assert_same_instance(const struct iso_gpu_instance *a, const struct iso_gpu_instance *b)
{
	assert_string_equal(a->profile, b->profile);
	assert_int_equal(a->start, b->start);
	assert_int_equal(a->size, b->size);
	assert_int_equal(a->gi_id, b->gi_id);
	assert_int_equal(a->ci_id, b->ci_id);
	assert_string_equal(a->uuid, b->uuid);
}

/* ---- the table of cases, run against both drivers ---- */

static void test_list_gpus(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_info *v = NULL;
	size_t n = 0;
	const char *want[] = {"h100-80gb", "a100-40gb", "a30-24gb"};

	assert_int_equal(b->g->ops->list_gpus(b->g, &v, &n, NULL), 0);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(v[i].index, i);
		assert_non_null(v[i].model);
		assert_string_equal(v[i].model->name, want[i]);
		assert_true(v[i].mig_enabled);
		assert_memory_equal(v[i].uuid, "GPU-", 4);
		assert_true(strlen(v[i].pci_bus_id) > 0);
		for (size_t k = 0; k < i; k++)
			assert_string_not_equal(v[i].uuid, v[k].uuid);
	}
	free(v);
}

static void test_create_list_destroy(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance out, *v = NULL;

	assert_int_equal(create(b, 0, "3g.40gb", 4, &out), 0);
	assert_string_equal(out.profile, "3g.40gb");
	assert_int_equal(out.start, 4);
	assert_int_equal(out.size, 4); /* memory slices: a 3g spans 4 */
	assert_true(out.gi_id >= 0);
	assert_true(out.ci_id >= 0);
	assert_memory_equal(out.uuid, "MIG-", 4);
	assert_int_equal(list(b, 0, &v), 1);
	assert_same_instance(&v[0], &out);
	free(v);
	assert_int_equal(list(b, 1, &v), 0); /* the other GPUs hold nothing */
	free(v);
	assert_int_equal(destroy(b, 0, 4), 0);
	assert_int_equal(list(b, 0, &v), 0);
	free(v);
	assert_int_equal(destroy(b, 0, 4), -ENOENT);
	/* 7g is 8 memory slices wide, A30's 4g is 4. */
	assert_int_equal(create(b, 1, "7g.40gb", 0, &out), 0);
	assert_int_equal(out.size, 8);
	assert_int_equal(create(b, 2, "4g.24gb", 0, &out), 0);
	assert_int_equal(out.size, 4);
}

static void test_overlap_refused(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance *v = NULL;
	struct iso_error err = {0};

	must_create(b, 0, "3g.40gb", 4);
	assert_int_equal(create(b, 0, "1g.10gb", 5, NULL), -ENOSPC);
	assert_int_equal(create(b, 0, "1g.20gb", 6, NULL), -ENOSPC);
	assert_int_equal(create(b, 0, "7g.80gb", 0, NULL), -ENOSPC);
	assert_int_equal(b->g->ops->create_instance(b->g, 0, "3g.40gb", 4, NULL, &err), -ENOSPC);
	assert_string_equal(err.field, "start");
	must_create(b, 0, "4g.40gb", 0);
	assert_int_equal(list(b, 0, &v), 2);
	free(v);
	/* A30: 2g.12gb at 2 blocks a 1g.6gb at 3. */
	must_create(b, 2, "2g.12gb", 2);
	assert_int_equal(create(b, 2, "1g.6gb", 3, NULL), -ENOSPC);
	must_create(b, 2, "1g.6gb", 1);
}

static void test_bad_start_refused(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance *v = NULL;
	struct iso_error err = {0};

	assert_int_equal(b->g->ops->create_instance(b->g, 0, "3g.40gb", 2, NULL, &err), -EINVAL);
	assert_string_equal(err.field, "start");
	assert_int_equal(create(b, 0, "3g.40gb", 3, NULL), -EINVAL); /* a compute-slice width */
	assert_int_equal(create(b, 0, "1g.10gb", 7, NULL), -EINVAL);
	assert_int_equal(create(b, 0, "4g.40gb", 4, NULL), -EINVAL);
	assert_int_equal(create(b, 0, "2g.20gb", 6, NULL), -EINVAL);
	assert_int_equal(create(b, 0, "1g.10gb", -1, NULL), -EINVAL);
	assert_int_equal(create(b, 2, "2g.12gb", 1, NULL), -EINVAL);
	assert_int_equal(create(b, 2, "1g.6gb", 4, NULL), -EINVAL);
	memset(&err, 0, sizeof(err));
	assert_int_equal(b->g->ops->create_instance(b->g, 0, "5g.50gb", 0, NULL, &err), -EINVAL);
	assert_string_equal(err.field, "profile");
	assert_int_equal(create(b, 0, "4g.24gb", 0, NULL), -EINVAL); /* an A30 profile */
	assert_int_equal(create(b, 9, "1g.10gb", 0, NULL), -ENODEV);
	assert_int_equal(destroy(b, 9, 0), -ENODEV);
	for (unsigned g = 0; g < 3; g++) {
		assert_int_equal(list(b, g, &v), 0);
		free(v);
	}
}

static void test_neighbour_never_touched(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance *before = NULL, *after = NULL;
	size_t n;

	must_create(b, 0, "1g.10gb", 0);
	must_create(b, 0, "1g.10gb", 1);
	must_create(b, 0, "2g.20gb", 2);
	must_create(b, 0, "3g.40gb", 4);
	assert_int_equal(n = list(b, 0, &before), 4);
	/* Destroy the one in the middle: the three others are exactly as they were. */
	assert_int_equal(destroy(b, 0, 2), 0);
	assert_int_equal(list(b, 0, &after), 3);
	assert_same_instance(&after[0], &before[0]);
	assert_same_instance(&after[1], &before[1]);
	assert_same_instance(&after[2], &before[3]);
	free(after);
	/* Create in the hole: still untouched. */
	must_create(b, 0, "1g.10gb", 3);
	must_create(b, 0, "1g.10gb", 2);
	assert_int_equal(list(b, 0, &after), 5);
	assert_same_instance(&after[0], &before[0]);
	assert_same_instance(&after[1], &before[1]);
	assert_same_instance(&after[4], &before[3]);
	assert_string_not_equal(after[2].uuid, before[2].uuid);
	free(after);
	/* A refused create and a missing destroy change nothing either. */
	assert_int_equal(create(b, 0, "1g.10gb", 4, NULL), -ENOSPC);
	assert_int_equal(destroy(b, 0, 6), -ENOENT);
	assert_int_equal(list(b, 0, &after), 5);
	assert_same_instance(&after[4], &before[3]);
	free(after);
	free(before);
}

static void test_restart_finds_instances(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance *before[3] = {0}, *after = NULL;
	size_t n[3];

	must_create(b, 0, "3g.40gb", 4);
	must_create(b, 0, "1g.10gb", 0);
	must_create(b, 1, "2g.10gb", 2);
	must_create(b, 2, "1g.6gb+me", 3);
	for (unsigned g = 0; g < 3; g++)
		n[g] = list(b, g, &before[g]);
	bk_close(b);
	bk_open(b);
	for (unsigned g = 0; g < 3; g++) {
		assert_int_equal(list(b, g, &after), n[g]);
		for (size_t i = 0; i < n[g]; i++)
			assert_same_instance(&after[i], &before[g][i]);
		free(after);
	}
	/* The rules hold across the restart: the found instances still occupy. */
	assert_int_equal(create(b, 0, "4g.40gb", 4, NULL), -EINVAL);
	assert_int_equal(create(b, 0, "3g.40gb", 4, NULL), -ENOSPC);
	assert_int_equal(create(b, 2, "2g.12gb+me", 0, NULL), -ENOSPC); /* one +me per GPU */
	assert_int_equal(destroy(b, 0, 4), 0);
	must_create(b, 0, "3g.40gb", 4);
	for (unsigned g = 0; g < 3; g++)
		free(before[g]);
}

static void test_mig_uuids_stable_and_distinct(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance *v = NULL, *w = NULL;
	size_t n;

	for (int s = 0; s < 7; s++)
		must_create(b, 0, "1g.10gb", s);
	assert_int_equal(n = list(b, 0, &v), 7);
	for (size_t i = 0; i < n; i++) {
		assert_memory_equal(v[i].uuid, "MIG-", 4);
		for (size_t k = 0; k < i; k++) {
			assert_string_not_equal(v[i].uuid, v[k].uuid);
			assert_int_not_equal(v[i].gi_id, v[k].gi_id);
		}
	}
	/* Destroying the first moves every MIG device handle index (NVML
	 * reuses them): the others keep their UUIDs. */
	assert_int_equal(destroy(b, 0, 0), 0);
	bk_close(b);
	bk_open(b);
	assert_int_equal(list(b, 0, &w), 6);
	for (size_t i = 0; i < 6; i++)
		assert_same_instance(&w[i], &v[i + 1]);
	free(w);
	/* A new instance in the same place gets a new UUID. */
	must_create(b, 0, "1g.10gb", 0);
	assert_int_equal(list(b, 0, &w), 7);
	for (size_t i = 0; i < n; i++)
		assert_string_not_equal(w[0].uuid, v[i].uuid);
	free(w);
	free(v);
}

static void test_in_use(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance *v = NULL;
	struct iso_error err = {0};

	must_create(b, 0, "2g.20gb", 0);
	must_create(b, 0, "2g.20gb", 2);
	set_busy(b, 0, 0, true);
	assert_int_equal(b->g->ops->destroy_instance(b->g, 0, 0, &err), -EBUSY);
	assert_non_null(strstr(err.message, b->nvml ? "In use" : "in use"));
	assert_int_equal(list(b, 0, &v), 2); /* nothing destroyed, not even its CI */
	assert_int_not_equal(v[0].ci_id, ISO_GPU_ID_NONE);
	free(v);
	assert_int_equal(destroy(b, 0, 2), 0); /* the idle neighbour goes */
	set_busy(b, 0, 0, false);
	assert_int_equal(destroy(b, 0, 0), 0);
	assert_int_equal(list(b, 0, &v), 0);
	free(v);
}

static void test_xid_seen_by_wait(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_xid x;
	struct iso_gpu_instance out;

	assert_int_equal(b->g->ops->wait_xid(b->g, 10, &x, NULL), -ETIMEDOUT);
	assert_int_equal(create(b, 1, "3g.20gb", 0, &out), 0);
	inject_xid(b, 1, 43, out.gi_id, out.ci_id);
	inject_xid(b, 2, 79, ISO_GPU_ID_NONE, ISO_GPU_ID_NONE);
	assert_int_equal(b->g->ops->wait_xid(b->g, 1000, &x, NULL), 0);
	assert_int_equal(x.gpu, 1);
	assert_int_equal(x.xid, 43);
	assert_int_equal(x.gi_id, out.gi_id);
	assert_int_equal(x.ci_id, out.ci_id);
	assert_int_equal(b->g->ops->wait_xid(b->g, 1000, &x, NULL), 0);
	assert_int_equal(x.gpu, 2);
	assert_int_equal(x.xid, 79);
	assert_int_equal(x.gi_id, ISO_GPU_ID_NONE);
	assert_int_equal(x.ci_id, ISO_GPU_ID_NONE);
	assert_int_equal(b->g->ops->wait_xid(b->g, 10, &x, NULL), -ETIMEDOUT);
}

/* Runs fn in a child process with a driver of its own; its exit status. */
static int in_child(struct bk *b, void (*fn)(struct bk *child))
{
	pid_t pid = fork();
	int status = -1;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct bk child = *b;
		child.g = NULL;
		if (bk_open_err(&child, NULL) != 0)
			_exit(2);
		fn(&child);
		bk_close(&child);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void child_creates(struct bk *c)
{
	if (c->g->ops->create_instance(c->g, 1, "2g.10gb", 4, NULL, NULL) != 0)
		_exit(3);
}

static void child_sees_none(struct bk *c)
{
	struct iso_gpu_instance *v = NULL;
	size_t n = 99;

	if (c->g->ops->list_instances(c->g, 1, &v, &n, NULL) != 0 || n != 0)
		_exit(4);
	free(v);
}

static void child_injects(struct bk *c)
{
	(void)c;
	inject_xid(c, 0, 48, ISO_GPU_ID_NONE, ISO_GPU_ID_NONE);
}

/* nvml over the fake: the GPUs are the same for every process, as on a
 * host (the fake's state file), and an XID injected by another process
 * reaches a waiting driver (what an end-to-end test does). */
static void test_processes_share_gpus(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance *v = NULL;
	struct iso_gpu_xid x;

	must_create(b, 1, "1g.5gb", 0);
	assert_int_equal(in_child(b, child_creates), 0);
	assert_int_equal(list(b, 1, &v), 2);
	assert_string_equal(v[1].profile, "2g.10gb");
	assert_int_equal(v[1].start, 4);
	free(v);
	/* The other process's instance is an instance like any: it blocks. */
	assert_int_equal(create(b, 1, "3g.20gb", 4, NULL), -ENOSPC);
	assert_int_equal(destroy(b, 1, 4), 0);
	assert_int_equal(destroy(b, 1, 0), 0);
	assert_int_equal(in_child(b, child_sees_none), 0);
	assert_int_equal(in_child(b, child_injects), 0);
	assert_int_equal(b->g->ops->wait_xid(b->g, 1000, &x, NULL), 0);
	assert_int_equal(x.gpu, 0);
	assert_int_equal(x.xid, 48);
}

struct waiter {
	struct iso_gpu *g;
	int r;
	struct iso_gpu_xid x;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->r = w->g->ops->wait_xid(w->g, 20000, &w->x, NULL);
	return NULL;
}

/* nvml over the fake: one thread waits for XIDs (as the agent will) while
 * another creates and destroys instances; neither disturbs the other. */
static void test_wait_beside_changes(void **state)
{
	struct bk *b = *state;
	struct waiter w = {.g = b->g};
	struct iso_gpu_instance *v = NULL;
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
	for (int i = 0; i < 100; i++) {
		must_create(b, 0, "3g.40gb", 4);
		must_create(b, 0, "1g.10gb", i % 4);
		assert_int_equal(list(b, 0, &v), 2);
		free(v);
		assert_int_equal(destroy(b, 0, i % 4), 0);
		assert_int_equal(destroy(b, 0, 4), 0);
	}
	inject_xid(b, 2, 31, ISO_GPU_ID_NONE, ISO_GPU_ID_NONE);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.r, 0);
	assert_int_equal(w.x.gpu, 2);
	assert_int_equal(w.x.xid, 31);
}

/* The device's own description of every profile equals src/mig's table:
 * profile ID, compute slices, max count, placements on the memory axis. */
static void test_geometry_equals_mig_tables(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_info *gpus = NULL;
	size_t n_gpus = 0;

	assert_int_equal(b->g->ops->list_gpus(b->g, &gpus, &n_gpus, NULL), 0);
	for (unsigned g = 0; g < n_gpus; g++) {
		const struct iso_gpu_model *m = gpus[g].model;
		struct iso_gpu_profile_info *v = NULL;
		size_t n = 0;

		assert_int_equal(b->g->ops->list_profiles(b->g, g, &v, &n, NULL), 0);
		assert_int_equal(n, m->n_profiles); /* no profile src/mig lacks */
		for (int k = 0; k < m->n_profiles; k++) {
			const struct iso_mig_profile *p = &m->profiles[k];
			const struct iso_gpu_profile_info *o = NULL;

			for (size_t i = 0; i < n; i++)
				if (strcmp(v[i].profile, p->name) == 0)
					o = &v[i];
			if (!o)
				fail_msg("GPU %u (%s): no profile %s", g, m->name, p->name);
			assert_int_equal(o->nvml_enum, iso_gpu_profile_enum(m, p));
			assert_int_equal(o->id, p->nvml_id);
			assert_int_equal(o->compute, p->compute);
			assert_int_equal(o->max_count, p->max_count);
			assert_int_equal(o->width, p->width);
			assert_int_equal(o->starts, p->starts);
			assert_true(o->placements_uniform);
		}
		free(v);
	}
	free(gpus);
}

/* Every profile at every start on an empty GPU, then next to every
 * placement of every profile: the driver accepts exactly what src/mig's
 * rules accept (-EINVAL for a start outside the placements, -ENOSPC for
 * the rest), and leaves the GPU as it found it. */
static void test_every_placement_pair(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_info *gpus = NULL;
	size_t n_gpus = 0;

	assert_int_equal(b->g->ops->list_gpus(b->g, &gpus, &n_gpus, NULL), 0);
	for (unsigned g = 0; g < n_gpus; g++) {
		const struct iso_gpu_model *m = gpus[g].model;
		/* The sim applies src/mig's rules itself and fsyncs every change:
		 * alone on an empty GPU is enough for it. */
		int k1_end = b->nvml ? m->n_profiles : 0;

		for (int k1 = -1; k1 < k1_end; k1++) {
			for (int s1 = 0; s1 < (k1 < 0 ? 1 : m->memory_slices); s1++) {
				struct iso_gpu_occupancy o;
				const struct iso_mig_profile *p1 = k1 < 0 ? NULL : &m->profiles[k1];

				iso_gpu_occupancy_init(&o, m);
				if (p1 && !((p1->starts >> s1) & 1u))
					continue;
				if (p1) {
					must_create(b, g, p1->name, s1);
					iso_mig_take(m, &o, p1, s1);
				}
				for (int k2 = 0; k2 < m->n_profiles; k2++) {
					const struct iso_mig_profile *p2 = &m->profiles[k2];
					for (int s2 = 0; s2 < m->memory_slices; s2++) {
						bool fits = iso_mig_fits_at(m, &o, p2, s2);
						bool placed = (p2->starts >> s2) & 1u;
						int r = create(b, g, p2->name, s2, NULL);
						int want = fits ? 0 : placed ? -ENOSPC : -EINVAL;

						if (r != want)
							fail_msg("GPU %u: %s@%d next to %s@%d: %d, "
							         "src/mig says %d",
							         g, p2->name, s2,
							         p1 ? p1->name : "nothing", s1, r,
							         want);
						if (r == 0)
							assert_int_equal(destroy(b, g, s2), 0);
					}
				}
				if (p1)
					assert_int_equal(destroy(b, g, s1), 0);
			}
		}
	}
	free(gpus);
}

/* ---- bad input ---- */

static void test_sim_state_garbled(void **state)
{
	struct bk *b = *state;
	struct iso_error err = {0};
	char path[PATH_MAX + 32];

	bk_close(b);
	snprintf(path, sizeof(path), "%s/gpu-sim.json", b->dir);
	write_file(path, "{\"version\": 1,\n \"gpus\": [\n  {\"model\": \"h100-80gb\",,}\n]}\n");
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_null(b->g);
	assert_non_null(strstr(err.message, path));
	assert_non_null(strstr(err.message, "line 3"));
	/* Well-formed but wrong: a 3g at slice 2 is no placement. */
	write_file(path, "{\"version\": 1, \"gpus\": [\n"
	                 " {\"model\": \"h100-80gb\", \"uuid\": \"GPU-1\", \"instances\": []},\n"
	                 " {\"model\": \"a100-40gb\", \"uuid\": \"GPU-2\", \"instances\": [\n"
	                 "  {\"profile\": \"3g.20gb\", \"start\": 2, \"gi\": 1, \"ci\": 0, "
	                 "\"uuid\": \"MIG-1\"}]},\n"
	                 " {\"model\": \"a30-24gb\", \"uuid\": \"GPU-3\", \"instances\": []}]}\n");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "gpus[1].instances[0].start");
	assert_non_null(strstr(err.message, path));
	/* Two instances overlapping. */
	write_file(path, "{\"version\": 1, \"gpus\": [\n"
	                 " {\"model\": \"h100-80gb\", \"uuid\": \"GPU-1\", \"instances\": [\n"
	                 "  {\"profile\": \"3g.40gb\", \"start\": 4, \"gi\": 1, \"ci\": 0, "
	                 "\"uuid\": \"MIG-1\"},\n"
	                 "  {\"profile\": \"1g.10gb\", \"start\": 6, \"gi\": 2, \"ci\": 0, "
	                 "\"uuid\": \"MIG-2\"}]},\n"
	                 " {\"model\": \"a100-40gb\", \"uuid\": \"GPU-2\", \"instances\": []},\n"
	                 " {\"model\": \"a30-24gb\", \"uuid\": \"GPU-3\", \"instances\": []}]}\n");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "gpus[0].instances[1].start");
	/* One MIG UUID for two instances (found by fuzz_gpu_sim), on one GPU
	 * or on two, and one GPU UUID for two GPUs. */
	write_file(path, "{\"version\": 1, \"gpus\": [\n"
	                 " {\"model\": \"h100-80gb\", \"uuid\": \"GPU-1\", \"instances\": [\n"
	                 "  {\"profile\": \"1g.10gb\", \"start\": 0, \"gi\": 1, \"ci\": 0, "
	                 "\"uuid\": \"MIG-1\"}]},\n"
	                 " {\"model\": \"a100-40gb\", \"uuid\": \"GPU-2\", \"instances\": []},\n"
	                 " {\"model\": \"a30-24gb\", \"uuid\": \"GPU-3\", \"instances\": [\n"
	                 "  {\"profile\": \"1g.6gb\", \"start\": 3, \"gi\": 1, \"ci\": 0, "
	                 "\"uuid\": \"MIG-1\"}]}]}\n");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "gpus[2].instances[0].uuid");
	write_file(path, "{\"version\": 1, \"gpus\": [\n"
	                 " {\"model\": \"h100-80gb\", \"uuid\": \"GPU-1\", \"instances\": [\n"
	                 "  {\"profile\": \"1g.10gb\", \"start\": 0, \"gi\": 1, \"ci\": 0, "
	                 "\"uuid\": \"MIG-1\"},\n"
	                 "  {\"profile\": \"1g.10gb\", \"start\": 1, \"gi\": 2, \"ci\": 0, "
	                 "\"uuid\": \"MIG-1\"}]},\n"
	                 " {\"model\": \"a100-40gb\", \"uuid\": \"GPU-2\", \"instances\": []},\n"
	                 " {\"model\": \"a30-24gb\", \"uuid\": \"GPU-3\", \"instances\": []}]}\n");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "gpus[0].instances[1].uuid");
	write_file(path, "{\"version\": 1, \"gpus\": [\n"
	                 " {\"model\": \"h100-80gb\", \"uuid\": \"GPU-1\", \"instances\": []},\n"
	                 " {\"model\": \"a100-40gb\", \"uuid\": \"GPU-1\", \"instances\": []},\n"
	                 " {\"model\": \"a30-24gb\", \"uuid\": \"GPU-3\", \"instances\": []}]}\n");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "gpus[1].uuid");
	/* An unknown model, and GPUs other than the node's. */
	write_file(path, "{\"version\": 1, \"gpus\": [{\"model\": \"v100\", \"uuid\": \"GPU-1\", "
	                 "\"instances\": []}]}");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "gpus[0].model");
	write_file(path, "{\"version\": 1, \"gpus\": [{\"model\": \"h100-80gb\", \"uuid\": "
	                 "\"GPU-1\", \"instances\": []}]}");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "models");
}

/* MIG mode per GPU (docs/gpu.md, "sim"): a new state takes it from open's
 * `mig`; a GPU with it off is listed off, holds no instances and refuses a
 * create as the nvml driver does (-EOPNOTSUPP naming the GPU, after the
 * profile check); the mode is kept in the state file. */
static void test_sim_mig_off(void **state)
{
	struct bk *b = *state;
	static const bool mig[] = {true, false, true};
	struct iso_gpu_open_args a = {.state_dir = b->dir,
	                              .models = sim_models,
	                              .n_models = ISO_ARRAY_SIZE(sim_models),
	                              .mig = mig,
	                              .n_mig = 2};
	struct iso_gpu_instance *in = NULL;
	struct iso_gpu_info *v = NULL;
	struct iso_error err = {0};
	char path[PATH_MAX + 32], uuid[ISO_GPU_UUID_MAX];
	size_t n = 0;

	bk_close(b);
	snprintf(path, sizeof(path), "%s/gpu-sim.json", b->dir);
	unlink(path);
	/* one MIG mode per GPU, or none */
	assert_int_equal(iso_gpu_sim_ops.open(&a, &b->g, &err), -EINVAL);
	assert_string_equal(err.field, "mig");
	assert_null(b->g);
	a.n_mig = ISO_ARRAY_SIZE(mig);
	assert_int_equal(iso_gpu_sim_ops.open(&a, &b->g, &err), 0);
	assert_int_equal(b->g->ops->list_gpus(b->g, &v, &n, NULL), 0);
	assert_int_equal(n, 3);
	assert_true(v[0].mig_enabled);
	assert_false(v[1].mig_enabled);
	assert_true(v[2].mig_enabled);
	assert_true(strncmp(v[1].uuid, "GPU-", 4) == 0);
	iso_strlcpy(uuid, v[1].uuid, sizeof(uuid));
	free(v);
	memset(&err, 0, sizeof(err));
	assert_int_equal(b->g->ops->create_instance(b->g, 1, "1g.5gb", 0, NULL, &err), -EOPNOTSUPP);
	assert_string_equal(err.field, "gpu");
	assert_int_equal(create(b, 1, "7g.40gb", 0, NULL), -EOPNOTSUPP);
	assert_int_equal(create(b, 1, "no.such", 0, NULL), -EINVAL);
	assert_int_equal(list(b, 1, &in), 0);
	free(in);
	must_create(b, 0, "1g.10gb", 0);
	must_create(b, 2, "1g.6gb", 0);
	/* Kept: opened again (with no MIG modes given), GPU 1 is still off
	 * and the same GPU. */
	bk_close(b);
	bk_open(b);
	assert_int_equal(b->g->ops->list_gpus(b->g, &v, &n, NULL), 0);
	assert_true(v[0].mig_enabled);
	assert_false(v[1].mig_enabled);
	assert_string_equal(v[1].uuid, uuid);
	free(v);
	assert_int_equal(create(b, 1, "1g.5gb", 0, NULL), -EOPNOTSUPP);
	assert_int_equal(list(b, 0, &in), 1);
	free(in);
}

/* A state file written before MIG modes were kept (no "mig") loads with
 * every GPU on; a "mig" that is not a boolean, or instances on a GPU with
 * MIG off, are refused naming the field. */
static void test_sim_state_mig_mode(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_info *v = NULL;
	struct iso_error err = {0};
	char path[PATH_MAX + 32];
	size_t n = 0;

	bk_close(b);
	snprintf(path, sizeof(path), "%s/gpu-sim.json", b->dir);
	write_file(path, "{\"version\": 1, \"gpus\": [\n"
	                 " {\"model\": \"h100-80gb\", \"uuid\": \"GPU-1\", \"instances\": [\n"
	                 "  {\"profile\": \"3g.40gb\", \"start\": 4, \"gi\": 1, \"ci\": 0, "
	                 "\"uuid\": \"MIG-1\"}]},\n"
	                 " {\"model\": \"a100-40gb\", \"uuid\": \"GPU-2\", \"instances\": []},\n"
	                 " {\"model\": \"a30-24gb\", \"uuid\": \"GPU-3\", \"instances\": []}]}\n");
	bk_open(b);
	assert_int_equal(b->g->ops->list_gpus(b->g, &v, &n, NULL), 0);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		assert_true(v[i].mig_enabled);
	free(v);
	must_create(b, 1, "1g.5gb", 0);
	bk_close(b);
	write_file(path, "{\"version\": 1, \"gpus\": [\n"
	                 " {\"model\": \"h100-80gb\", \"uuid\": \"GPU-1\", \"mig\": \"off\", "
	                 "\"instances\": []},\n"
	                 " {\"model\": \"a100-40gb\", \"uuid\": \"GPU-2\", \"instances\": []},\n"
	                 " {\"model\": \"a30-24gb\", \"uuid\": \"GPU-3\", \"instances\": []}]}\n");
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "gpus[0].mig");
	assert_non_null(strstr(err.message, path));
	write_file(path, "{\"version\": 1, \"gpus\": [\n"
	                 " {\"model\": \"h100-80gb\", \"uuid\": \"GPU-1\", \"mig\": false, "
	                 "\"instances\": [\n"
	                 "  {\"profile\": \"3g.40gb\", \"start\": 4, \"gi\": 1, \"ci\": 0, "
	                 "\"uuid\": \"MIG-1\"}]},\n"
	                 " {\"model\": \"a100-40gb\", \"uuid\": \"GPU-2\", \"instances\": []},\n"
	                 " {\"model\": \"a30-24gb\", \"uuid\": \"GPU-3\", \"instances\": []}]}\n");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EINVAL);
	assert_string_equal(err.field, "gpus[0].instances");
	assert_null(b->g);
}

/* iso_gpu_sim_set_mig: refused while the GPU holds instances (as
 * `nvidia-smi -mig` is), nothing changed; else the mode changes, is kept in
 * the state file, and creates follow it. */
static void test_sim_set_mig(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_info *v = NULL;
	struct iso_error err = {0};
	size_t n = 0;

	must_create(b, 0, "3g.40gb", 4);
	assert_int_equal(iso_gpu_sim_set_mig(b->g, 0, false, &err), -EBUSY);
	assert_string_equal(err.field, "gpu");
	assert_int_equal(b->g->ops->list_gpus(b->g, &v, &n, NULL), 0);
	assert_true(v[0].mig_enabled);
	free(v);
	assert_int_equal(destroy(b, 0, 4), 0);
	assert_int_equal(iso_gpu_sim_set_mig(b->g, 0, false, NULL), 0);
	assert_int_equal(iso_gpu_sim_set_mig(b->g, 9, false, NULL), -ENODEV);
	assert_int_equal(create(b, 0, "3g.40gb", 4, NULL), -EOPNOTSUPP);
	bk_close(b);
	bk_open(b);
	assert_int_equal(b->g->ops->list_gpus(b->g, &v, &n, NULL), 0);
	assert_false(v[0].mig_enabled);
	assert_true(v[1].mig_enabled);
	free(v);
	assert_int_equal(create(b, 0, "3g.40gb", 4, NULL), -EOPNOTSUPP);
	assert_int_equal(iso_gpu_sim_set_mig(b->g, 0, true, NULL), 0);
	must_create(b, 0, "3g.40gb", 4);
}

static void test_sim_needs_state_dir(void **state)
{
	struct iso_gpu_open_args a = {0};
	struct iso_gpu *g = NULL;
	struct iso_error err = {0};

	(void)state;
	assert_int_equal(iso_gpu_sim_ops.open(&a, &g, &err), -EINVAL);
	assert_string_equal(err.field, "state_dir");
	a.state_dir = "/nonexistent/isostack-test";
	assert_true(iso_gpu_sim_ops.open(&a, &g, &err) < 0);
	assert_null(g);
}

static void test_fake_config_garbled(void **state)
{
	struct bk *b = *state;
	struct iso_error err = {0};
	const char *cfg = getenv("ISOSTACK_FAKE_NVML_CONFIG");

	bk_close(b);
	write_file(cfg, "{\"gpus\": [\n {\"model\": \"H100-80GB\"}\n {\"model\": \"A30\"}]}\n");
	assert_int_equal(bk_open_err(b, &err), -EIO);
	assert_string_equal(err.field, "library");
	assert_non_null(strstr(err.message, "nvmlInit_v2"));
	assert_non_null(strstr(err.message, cfg));
	assert_non_null(strstr(err.message, "line 3"));
	write_file(cfg, "{\"gpus\": [{\"model\": \"H100-80GB\"}, {\"model\": \"V100\"}]}\n");
	memset(&err, 0, sizeof(err));
	assert_int_equal(bk_open_err(b, &err), -EIO);
	assert_non_null(strstr(err.message, "gpus[1]"));
}

static void test_fake_state_garbled(void **state)
{
	struct bk *b = *state;
	struct iso_error err = {0};
	const char *st = getenv("ISOSTACK_FAKE_NVML_STATE");

	bk_close(b);
	write_file(st, "{\"gpus\": [\n");
	assert_int_equal(bk_open_err(b, &err), -EIO);
	assert_non_null(strstr(err.message, st));
	assert_non_null(strstr(err.message, "line 2"));
}

static void test_library_without_nvml(void **state)
{
	struct bk *b = *state;
	struct iso_error err = {0};
	struct iso_gpu_open_args a = {.library = "libjansson.so.4"};
	struct iso_gpu *g = NULL;

	(void)b;
	assert_int_equal(iso_gpu_nvml_ops.open(&a, &g, &err), -EAGAIN);
	assert_null(g);
	assert_string_equal(err.field, "library");
	assert_non_null(strstr(err.message, "has no nvmlInit_v2"));
	a.library = "/nonexistent/libnvidia-ml.so.1";
	memset(&err, 0, sizeof(err));
	assert_int_equal(iso_gpu_nvml_ops.open(&a, &g, &err), -EAGAIN);
	assert_non_null(strstr(err.message, "cannot load /nonexistent/libnvidia-ml.so.1"));
}

static void test_nvml_errors_reported(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_instance *v = NULL;
	struct iso_error err = {0};

	setenv("ISOSTACK_FAKE_NVML_FAIL", "nvmlDeviceCreateGpuInstanceWithPlacement=999", 1);
	assert_int_equal(b->g->ops->create_instance(b->g, 0, "1g.10gb", 0, NULL, &err), -EIO);
	assert_non_null(strstr(err.message, "nvmlDeviceCreateGpuInstanceWithPlacement"));
	/* The compute instance fails: the GPU instance made for it goes again. */
	setenv("ISOSTACK_FAKE_NVML_FAIL", "nvmlGpuInstanceCreateComputeInstance=23", 1);
	memset(&err, 0, sizeof(err));
	assert_int_equal(b->g->ops->create_instance(b->g, 0, "1g.10gb", 0, NULL, &err), -ENOSPC);
	assert_non_null(strstr(err.message, "Insufficient Resources"));
	unsetenv("ISOSTACK_FAKE_NVML_FAIL");
	assert_int_equal(list(b, 0, &v), 0);
	free(v);
	must_create(b, 0, "1g.10gb", 0);
	setenv("ISOSTACK_FAKE_NVML_FAIL", "nvmlDeviceGetMigDeviceHandleByIndex=999", 1);
	assert_true(b->g->ops->list_instances(b->g, 0, &v, &(size_t){0}, &err) < 0);
	assert_null(v);
	unsetenv("ISOSTACK_FAKE_NVML_FAIL");
}

static void test_mig_off_refused(void **state)
{
	struct bk *b = *state;
	struct iso_gpu_info *v = NULL;
	size_t n = 0;

	bk_close(b);
	write_file(
	    getenv("ISOSTACK_FAKE_NVML_CONFIG"),
	    "{\"gpus\": [{\"model\": \"H100-80GB\", \"mig\": false}, {\"model\": \"A30\"}]}");
	unlink(getenv("ISOSTACK_FAKE_NVML_STATE"));
	bk_open(b);
	assert_int_equal(b->g->ops->list_gpus(b->g, &v, &n, NULL), 0);
	assert_int_equal(n, 2);
	assert_false(v[0].mig_enabled);
	assert_true(v[1].mig_enabled);
	free(v);
	assert_int_equal(create(b, 0, "1g.10gb", 0, NULL), -EOPNOTSUPP);
	must_create(b, 1, "1g.6gb", 0);
}

static void test_names_and_enums(void **state)
{
	const struct iso_gpu_model *h100 = iso_gpu_model_find("h100-80gb");
	const struct iso_gpu_model *a30 = iso_gpu_model_find("a30-24gb");

	(void)state;
	assert_ptr_equal(iso_gpu_model_for_name("NVIDIA H100 80GB HBM3"), h100);
	assert_string_equal(iso_gpu_model_for_name("NVIDIA A100-SXM4-40GB")->name, "a100-40gb");
	assert_string_equal(iso_gpu_model_for_name("NVIDIA A100 80GB PCIe")->name, "a100-80gb");
	assert_string_equal(iso_gpu_model_for_name("NVIDIA H100 NVL")->name, "h100-94gb");
	assert_ptr_equal(iso_gpu_model_for_name("NVIDIA A30"), a30);
	assert_null(iso_gpu_model_for_name("Tesla V100-SXM2-16GB"));
	/* The enum is not the ID: 1g.10gb is enum 0, ID 19. */
	assert_int_equal(iso_gpu_profile_enum(h100, iso_mig_profile_find(h100, "1g.10gb")), 0);
	assert_int_equal(iso_gpu_profile_enum(h100, iso_mig_profile_find(h100, "1g.20gb")), 9);
	assert_int_equal(iso_gpu_profile_enum(h100, iso_mig_profile_find(h100, "7g.80gb")), 4);
	assert_int_equal(iso_gpu_profile_enum(a30, iso_mig_profile_find(a30, "2g.12gb+me")), 8);
	/* Every built-in model: the sim's device name maps back to it, and
	 * each of its profiles has an enum of its own. */
	for (int i = 0; iso_gpu_model_at(i); i++) {
		const struct iso_gpu_model *m = iso_gpu_model_at(i);
		assert_ptr_equal(iso_gpu_model_for_name(m->product), m);
		for (int k = 0; k < m->n_profiles; k++) {
			int e = iso_gpu_profile_enum(m, &m->profiles[k]);
			assert_true(e >= 0);
			for (int j = 0; j < k; j++)
				assert_int_not_equal(e, iso_gpu_profile_enum(m, &m->profiles[j]));
		}
	}
	assert_ptr_equal(iso_gpu_driver_find("nvml"), &iso_gpu_nvml_ops);
	assert_null(iso_gpu_driver_find("cuda"));
}

#define BOTH(t)                                                                                    \
	cmocka_unit_test_setup_teardown(t, setup_sim, teardown),                                   \
	    cmocka_unit_test_setup_teardown(t, setup_nvml, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    BOTH(test_list_gpus),
	    BOTH(test_create_list_destroy),
	    BOTH(test_overlap_refused),
	    BOTH(test_bad_start_refused),
	    BOTH(test_neighbour_never_touched),
	    BOTH(test_restart_finds_instances),
	    BOTH(test_mig_uuids_stable_and_distinct),
	    BOTH(test_in_use),
	    BOTH(test_xid_seen_by_wait),
	    BOTH(test_geometry_equals_mig_tables),
	    BOTH(test_every_placement_pair),
	    cmocka_unit_test_setup_teardown(test_sim_state_garbled, setup_sim, teardown),
	    cmocka_unit_test_setup_teardown(test_sim_mig_off, setup_sim, teardown),
	    cmocka_unit_test_setup_teardown(test_sim_state_mig_mode, setup_sim, teardown),
	    cmocka_unit_test_setup_teardown(test_sim_set_mig, setup_sim, teardown),
	    cmocka_unit_test(test_sim_needs_state_dir),
	    cmocka_unit_test_setup_teardown(test_fake_config_garbled, setup_nvml, teardown),
	    cmocka_unit_test_setup_teardown(test_fake_state_garbled, setup_nvml, teardown),
	    cmocka_unit_test_setup_teardown(test_library_without_nvml, setup_nvml, teardown),
	    cmocka_unit_test_setup_teardown(test_nvml_errors_reported, setup_nvml, teardown),
	    cmocka_unit_test_setup_teardown(test_mig_off_refused, setup_nvml, teardown),
	    cmocka_unit_test_setup_teardown(test_processes_share_gpus, setup_nvml, teardown),
	    cmocka_unit_test_setup_teardown(test_wait_beside_changes, setup_nvml, teardown),
	    cmocka_unit_test(test_names_and_enums),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

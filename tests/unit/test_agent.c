/* test_agent.c: the node agent's reconcile (src/agent/reconcile.c), run
 * against the sim GPU driver and against the nvml driver dlopen-ing the
 * project's fake libnvidia-ml.so.1 (env ISOSTACK_FAKE_NVML, as test_gpu):
 * create, destroy, a restart with instances present, orphans destroyed, a
 * neighbour untouched while another is created or destroyed, IN_USE retried
 * on the next tick, a lower term refused (and remembered across a restart),
 * and garbled desired documents refused naming the field; XIDs read from
 * the driver into the outbox with the allocation and member that own the
 * instance they name, kept there until acknowledged and numbered above
 * every earlier one; a MIG mode that differs from the desired document's
 * reported as a condition; a sim host made from the node's document. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fake_nvml_env.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/agent.h"

static const char *const sim_models[] = {"h100-80gb", "a100-40gb", "a30-24gb"};
/* GPU 1 has MIG off on the fake (the sim has it on everywhere). */
static const char *const fake_config = "{\"gpus\": [{\"model\": \"H100-80GB\"}, "
                                       "{\"model\": \"A100-40GB\", \"mig\": false}, "
                                       "{\"model\": \"A30\"}]}\n";

struct bk {
	bool nvml;
	char dir[PATH_MAX];
	struct iso_gpu *g;
};

static void bk_open(struct bk *b)
{
	struct iso_gpu_open_args a = {.state_dir = b->dir};
	struct iso_error err = {0};

	if (!b->nvml) {
		a.models = sim_models;
		a.n_models = ISO_ARRAY_SIZE(sim_models);
	}
	if ((b->nvml ? &iso_gpu_nvml_ops : &iso_gpu_sim_ops)->open(&a, &b->g, &err) != 0)
		fail_msg("open: %s", err.message);
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
	snprintf(b->dir, sizeof(b->dir), "/tmp/test_agent.XXXXXX");
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
	free(b);
	return 0;
}

static void set_busy(struct bk *b, unsigned gpu, int start, bool busy)
{
	if (b->nvml) {
		void *h = dlopen(getenv("ISOSTACK_FAKE_NVML"), RTLD_NOW | RTLD_NOLOAD);
		int (*f)(unsigned, unsigned, int);

		assert_non_null(h);
		*(void **)&f = dlsym(h, "isostack_fake_nvml_set_busy");
		assert_non_null(f);
		assert_int_equal(f(gpu, (unsigned)start, busy), 0);
		dlclose(h);
	} else {
		assert_int_equal(iso_gpu_sim_set_busy(b->g, gpu, start, busy, NULL), 0);
	}
}

/* A desired document for node "n1": GPU 0 (H100) holds `insts` (a JSON
 * array's inside), GPU 1 nothing. */
static json_t *doc(unsigned long long term, const char *insts)
{
	char text[4096];
	json_error_t je;
	json_t *j;

	snprintf(text, sizeof(text),
	         "{\"node\": \"n1\", \"generation\": 7, \"term\": %llu, \"vfs\": [], \"gpus\": ["
	         "{\"index\": 0, \"mig\": true, \"instances\": [%s], \"whole\": null},"
	         "{\"index\": 1, \"mig\": true, \"instances\": [], \"whole\": null}]}",
	         term, insts);
	j = json_loads(text, 0, &je);
	if (!j)
		fail_msg("bad test document: %s", je.text);
	return j;
}

#define INST(profile, start, width, alloc, member)                                                 \
	"{\"profile\": \"" profile "\", \"start\": " #start ", \"width\": " #width                 \
	", \"allocation\": \"" alloc "\", \"member\": " #member "}"
#define A1 "a-00000000000000a1"
#define A2 "a-00000000000000a2"

/* Reconciles to `insts` at `term`; returns the status (caller frees). */
static json_t *tick_r(struct bk *b, unsigned long long term, const char *insts,
                      struct iso_agent_tick *t, int want_r)
{
	struct iso_agent_desired d;
	struct iso_error err = {0};
	json_t *j = doc(term, insts), *status = NULL;
	int r;

	r = iso_agent_desired_parse(j, "n1", &d, &err);
	json_decref(j);
	if (r != 0)
		fail_msg("parse: %s (%s)", err.message, err.field);
	r = iso_agent_reconcile(b->g, b->dir, &d, &status, t, &err);
	iso_agent_desired_clear(&d);
	if (r != want_r)
		fail_msg("reconcile: %d, wanted %d: %s", r, want_r, err.message);
	if (r != 0)
		assert_string_equal(err.field, "term");
	assert_non_null(status);
	return status;
}

static json_t *tick(struct bk *b, const char *insts, struct iso_agent_tick *t)
{
	return tick_r(b, 1, insts, t, 0);
}

/* The driver's instances on GPU 0 as "start:profile" words. */
static void actual(struct bk *b, char *out, size_t size)
{
	struct iso_gpu_instance *v = NULL;
	size_t n = 0, len = 0;

	assert_int_equal(b->g->ops->list_instances(b->g, 0, &v, &n, NULL), 0);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(out + len, size - len, "%s%d:%s", i ? " " : "", v[i].start,
		                        v[i].profile);
	free(v);
}

static const char *uuid_at(json_t *status, int start)
{
	size_t i;
	json_t *in;

	json_array_foreach (json_object_get(status, "instances"), i, in)
		if (json_integer_value(json_object_get(in, "start")) == start)
			return json_string_value(json_object_get(in, "uuid"));
	return NULL;
}

static void test_create_and_destroy(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	char act[256];
	json_t *st = tick(b, INST("3g.40gb", 4, 4, A1, 0), &t), *in, *g0;

	assert_int_equal(t.created, 1);
	assert_int_equal(t.destroyed, 0);
	actual(b, act, sizeof(act));
	assert_string_equal(act, "4:3g.40gb");
	/* The status of docs/agents.md: the desired GPUs, and the instance. */
	assert_int_equal(json_integer_value(json_object_get(st, "term_seen")), 1);
	assert_int_equal(json_array_size(json_object_get(st, "gpus")), 2);
	g0 = json_array_get(json_object_get(st, "gpus"), 0);
	assert_string_equal(json_string_value(json_object_get(g0, "mig_mode")), "enabled");
	assert_true(strncmp(json_string_value(json_object_get(g0, "uuid")), "GPU-", 4) == 0);
	assert_int_equal(json_array_size(json_object_get(st, "instances")), 1);
	in = json_array_get(json_object_get(st, "instances"), 0);
	assert_true(json_is_true(json_object_get(in, "ready")));
	assert_true(strncmp(json_string_value(json_object_get(in, "uuid")), "MIG-", 4) == 0);
	assert_string_equal(json_string_value(json_object_get(in, "allocation")), A1);
	assert_string_equal(json_string_value(json_object_get(in, "profile")), "3g.40gb");
	json_decref(st);

	st = tick(b, "", &t);
	assert_int_equal(t.created, 0);
	assert_int_equal(t.destroyed, 1);
	actual(b, act, sizeof(act));
	assert_string_equal(act, "");
	assert_int_equal(json_array_size(json_object_get(st, "instances")), 0);
	json_decref(st);
}

/* A restarted agent finds its instances and touches none of them. */
static void test_restart_keeps_instances(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	char uuid[ISO_GPU_UUID_MAX];
	json_t *st = tick(b, INST("3g.40gb", 4, 4, A1, 0) "," INST("1g.10gb", 0, 1, A2, 1), &t);

	assert_int_equal(t.created, 2);
	iso_strlcpy(uuid, uuid_at(st, 4), sizeof(uuid));
	json_decref(st);
	bk_close(b);
	bk_open(b);
	st = tick(b, INST("3g.40gb", 4, 4, A1, 0) "," INST("1g.10gb", 0, 1, A2, 1), &t);
	assert_int_equal(t.created, 0);
	assert_int_equal(t.destroyed, 0);
	assert_string_equal(uuid_at(st, 4), uuid);
	json_decref(st);
}

/* An instance no allocation holds (left by a crash, made by hand) goes. */
static void test_orphan_destroyed(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	char act[256];
	json_t *st;

	assert_int_equal(b->g->ops->create_instance(b->g, 0, "2g.20gb", 2, NULL, NULL), 0);
	st = tick(b, INST("1g.10gb", 0, 1, A1, 0), &t);
	assert_int_equal(t.destroyed, 1);
	assert_int_equal(t.created, 1);
	actual(b, act, sizeof(act));
	assert_string_equal(act, "0:1g.10gb");
	json_decref(st);
}

/* Creating or destroying one instance leaves its neighbour as it was (same
 * MIG UUID: not destroyed and rebuilt). */
static void test_neighbour_untouched(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	char ua[ISO_GPU_UUID_MAX], ub[ISO_GPU_UUID_MAX];
	json_t *st = tick(b, INST("1g.10gb", 0, 1, A1, 0), &t);

	iso_strlcpy(ua, uuid_at(st, 0), sizeof(ua));
	json_decref(st);
	st = tick(b, INST("1g.10gb", 0, 1, A1, 0) "," INST("3g.40gb", 4, 4, A2, 0), &t);
	assert_int_equal(t.created, 1);
	assert_int_equal(t.destroyed, 0);
	assert_string_equal(uuid_at(st, 0), ua);
	iso_strlcpy(ub, uuid_at(st, 4), sizeof(ub));
	json_decref(st);
	st = tick(b, INST("3g.40gb", 4, 4, A2, 0), &t);
	assert_int_equal(t.destroyed, 1);
	assert_int_equal(t.created, 0);
	assert_string_equal(uuid_at(st, 4), ub);
	assert_null(uuid_at(st, 0));
	json_decref(st);
}

/* A busy instance (a process runs in it) is not destroyed; a desired
 * instance it overlaps is reported not ready with the reason; the next tick
 * after it is idle destroys it and creates the desired one. */
static void test_in_use_retried(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	char act[256];
	json_t *st, *in;

	json_decref(tick(b, INST("1g.10gb", 0, 1, A1, 0), &t));
	set_busy(b, 0, 0, true);
	st = tick(b, INST("3g.40gb", 0, 4, A2, 0), &t);
	assert_int_equal(t.busy, 1);
	assert_int_equal(t.destroyed, 0);
	assert_int_equal(t.failed, 1);
	actual(b, act, sizeof(act));
	assert_string_equal(act, "0:1g.10gb");
	assert_int_equal(json_array_size(json_object_get(st, "instances")), 1);
	in = json_array_get(json_object_get(st, "instances"), 0);
	assert_true(json_is_false(json_object_get(in, "ready")));
	assert_string_equal(json_string_value(json_object_get(in, "uuid")), "");
	assert_non_null(strstr(json_string_value(json_object_get(in, "reason")), "create failed"));
	json_decref(st);
	set_busy(b, 0, 0, false);
	st = tick(b, INST("3g.40gb", 0, 4, A2, 0), &t);
	assert_int_equal(t.destroyed, 1);
	assert_int_equal(t.created, 1);
	actual(b, act, sizeof(act));
	assert_string_equal(act, "0:3g.40gb");
	assert_true(json_is_true(
	    json_object_get(json_array_get(json_object_get(st, "instances"), 0), "ready")));
	json_decref(st);
}

/* A want the host cannot make (a profile the GPU does not have, a GPU the
 * host does not have) is reported not ready with why; the rest goes on. */
static void test_unmakeable_reported(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	char act[256];
	json_t *st = tick(b, INST("9g.99gb", 0, 1, A1, 0) "," INST("3g.40gb", 4, 4, A2, 0), &t),
	       *in;

	assert_int_equal(t.failed, 1);
	assert_int_equal(t.created, 1);
	actual(b, act, sizeof(act));
	assert_string_equal(act, "4:3g.40gb");
	in = json_array_get(json_object_get(st, "instances"), 0);
	assert_string_equal(json_string_value(json_object_get(in, "profile")), "9g.99gb");
	assert_true(json_is_false(json_object_get(in, "ready")));
	assert_non_null(strstr(json_string_value(json_object_get(in, "reason")), "create failed"));
	json_decref(st);
}

/* A GPU held whole is reported with the GPU's UUID, ready only with MIG
 * off (the fake's GPU 1; the sim has MIG on everywhere). */
static void test_whole_gpu_reported(void **state)
{
	struct bk *b = *state;
	struct iso_agent_desired d;
	struct iso_agent_tick t;
	json_t *j = json_loads("{\"node\": \"n1\", \"generation\": 3, \"term\": 1, \"vfs\": [], "
	                       "\"gpus\": [{\"index\": 1, \"mig\": false, \"instances\": [], "
	                       "\"whole\": {\"allocation\": \"" A1 "\", \"member\": 2}}]}",
	                       0, NULL),
	       *st = NULL, *in;

	assert_non_null(j);
	assert_int_equal(iso_agent_desired_parse(j, "n1", &d, NULL), 0);
	json_decref(j);
	assert_int_equal(iso_agent_reconcile(b->g, b->dir, &d, &st, &t, NULL), 0);
	in = json_array_get(json_object_get(st, "instances"), 0);
	assert_string_equal(json_string_value(json_object_get(in, "profile")), "whole");
	assert_int_equal(json_integer_value(json_object_get(in, "member")), 2);
	assert_true(json_is_true(json_object_get(in, "ready")));
	if (b->nvml) {
		/* the fake's GPU 1 has MIG off: handed over as the device */
		assert_int_equal(t.created + t.destroyed, 0);
		assert_true(strncmp(json_string_value(json_object_get(in, "uuid")), "GPU-", 4) ==
		            0);
	} else {
		/* the sim's GPUs are in MIG mode: the GPU becomes the one
		 * instance that spans it, and the tenant gets its MIG UUID */
		assert_int_equal(t.created, 1);
		assert_true(strncmp(json_string_value(json_object_get(in, "uuid")), "MIG-", 4) ==
		            0);
		json_decref(st);
		st = NULL;
		/* made once: the next tick leaves it alone */
		assert_int_equal(iso_agent_reconcile(b->g, b->dir, &d, &st, &t, NULL), 0);
		assert_int_equal(t.created + t.destroyed, 0);
	}
	iso_agent_desired_clear(&d);
	json_decref(st);
}

/* A GPU instance left without its compute instance (a create cut short)
 * is destroyed and made again, though its start and profile are desired. */
static void test_half_made_instance_rebuilt(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	char path[PATH_MAX];
	json_t *st;
	FILE *f;

	bk_close(b);
	snprintf(path, sizeof(path), "%s", getenv("ISOSTACK_FAKE_NVML_STATE"));
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"gpus\": [{\"model\": \"H100-80GB\", \"instances\": [{\"gi\": 1, "
	      "\"profile_id\": 9, \"start\": 4, \"size\": 4, \"cis\": []}]}, "
	      "{\"model\": \"A100-40GB\", \"instances\": []}, {\"model\": \"A30\", "
	      "\"instances\": []}], \"events\": [], \"next_seq\": 1, \"next_uuid\": 1}\n",
	      f);
	fclose(f);
	bk_open(b);
	st = tick(b, INST("3g.40gb", 4, 4, A1, 0), &t);
	assert_int_equal(t.destroyed, 1);
	assert_int_equal(t.created, 1);
	assert_true(strncmp(uuid_at(st, 4), "MIG-", 4) == 0);
	json_decref(st);
}

/* A document of a lower term than one already seen changes nothing, also
 * after a restart of the agent (the term is in the state dir). */
static void test_lower_term_refused(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	uint64_t seen = 0;
	char act[256];
	json_t *st;

	json_decref(tick_r(b, 5, INST("1g.10gb", 0, 1, A1, 0), &t, 0));
	bk_close(b);
	bk_open(b);
	st = tick_r(b, 4, "", &t, iso_error_errno(ISO_E_CONFLICT));
	assert_int_equal(t.destroyed, 0);
	assert_int_equal(t.term_seen, 5);
	assert_int_equal(json_integer_value(json_object_get(st, "term_seen")), 5);
	actual(b, act, sizeof(act));
	assert_string_equal(act, "0:1g.10gb");
	json_decref(st);
	assert_int_equal(iso_agent_term_load(b->dir, &seen, NULL), 0);
	assert_int_equal(seen, 5);
	/* The same term or a higher one is obeyed. */
	json_decref(tick_r(b, 6, "", &t, 0));
	assert_int_equal(t.destroyed, 1);
}

static void expect_refused(const char *text, const char *field)
{
	struct iso_agent_desired d;
	struct iso_error err = {0};
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);

	if (!j)
		fail_msg("bad test document: %s", je.text);
	assert_int_equal(iso_agent_desired_parse(j, "n1", &d, &err), -EINVAL);
	if (strcmp(err.field, field) != 0)
		fail_msg("%s: field \"%s\", wanted \"%s\" (%s)", text, err.field, field,
		         err.message);
	assert_non_null(strstr(err.message, "desired state"));
	json_decref(j);
}

#define GPU0(x) "{\"index\": 0, \"mig\": true, \"instances\": [" x "], \"whole\": null}"
#define DOC(gpus)                                                                                  \
	"{\"node\": \"n1\", \"generation\": 7, \"term\": 1, \"vfs\": [], \"gpus\": [" gpus "]}"

static void test_garbled_desired_refused(void **state)
{
	(void)state;
	expect_refused("[]", "");
	expect_refused("{\"node\": \"n2\", \"generation\": 7, \"term\": 1, \"vfs\": [], "
	               "\"gpus\": []}",
	               "node");
	expect_refused("{\"node\": \"n1\", \"term\": 1, \"vfs\": [], \"gpus\": []}", "generation");
	expect_refused("{\"node\": \"n1\", \"generation\": 7, \"term\": -1, \"vfs\": [], "
	               "\"gpus\": []}",
	               "term");
	expect_refused("{\"node\": \"n1\", \"generation\": 7, \"term\": 1, \"vfs\": [], "
	               "\"gpus\": [], \"extra\": 1}",
	               "extra");
	expect_refused(DOC("7"), "gpus[0]");
	expect_refused(DOC("{\"index\": 0, \"mig\": 1, \"instances\": [], \"whole\": null}"),
	               "gpus[0].mig");
	expect_refused(DOC(GPU0(INST("1g.10gb", 0, 1, A1, 0)) "," GPU0("")), "gpus[1].index");
	expect_refused(DOC(GPU0("{\"profile\": \"1g.10gb\", \"start\": \"x\", \"width\": 1, "
	                        "\"allocation\": \"" A1 "\", \"member\": 0}")),
	               "gpus[0].instances[0].start");
	expect_refused(DOC(GPU0(INST("1g.10gb", 0, 1, A1, 0) "," INST("1g.10gb", 0, 1, A2, 0))),
	               "gpus[0].instances[1].start");
	expect_refused(DOC(GPU0(INST("1g.10gb", 0, 1, A1, 2000))), "gpus[0].instances[0].member");
	expect_refused(DOC("{\"index\": 0, \"mig\": false, \"instances\": [], \"whole\": 3}"),
	               "gpus[0].whole");
}

/* A MIG profile is spelled as the controller writes it (lowercase): the
 * drivers look profiles up ignoring case, but reconcile matches what they
 * report against the document's spelling, so "2g.20Gb" was created as
 * 2g.20gb, then taken for an orphan and destroyed, and made again, every
 * tick (found by fuzz_agent_desired, crashes/agent_desired/). */
static void test_desired_profile_case_refused(void **state)
{
	(void)state;
	expect_refused(DOC(GPU0(INST("2g.20Gb", 2, 2, A1, 0))), "gpus[0].instances[0].profile");
	expect_refused(DOC(GPU0(INST("1g.10gb", 0, 1, A1, 0) "," INST("Whole", 1, 1, A1, 1))),
	               "gpus[0].instances[1].profile");
}

/* A garbled term file is refused, not read as 0 (which would undo the
 * fence). */
static void test_term_file_garbled(void **state)
{
	struct bk *b = *state;
	struct iso_error err = {0};
	char path[PATH_MAX + 16];
	uint64_t seen;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", b->dir, ISO_AGENT_TERM_FILE);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("5x\n", f);
	fclose(f);
	assert_int_equal(iso_agent_term_load(b->dir, &seen, &err), -EINVAL);
	assert_string_equal(err.field, "state_dir");
}

static void inject_xid(struct bk *b, unsigned gpu, unsigned long long xid, int gi, int ci)
{
	if (b->nvml) {
		void *h = dlopen(getenv("ISOSTACK_FAKE_NVML"), RTLD_NOW | RTLD_NOLOAD);
		int (*f)(unsigned, unsigned long long, unsigned, unsigned);

		assert_non_null(h);
		*(void **)&f = dlsym(h, "isostack_fake_nvml_inject_xid");
		assert_non_null(f);
		assert_int_equal(f(gpu, xid, gi < 0 ? 0xFFFFFFFFu : (unsigned)gi,
		                   ci < 0 ? 0xFFFFFFFFu : (unsigned)ci),
		                 0);
		dlclose(h);
	} else {
		assert_int_equal(iso_gpu_sim_inject_xid(b->g, gpu, xid, gi, ci, NULL), 0);
	}
}

static void parse_doc(const char *insts, struct iso_agent_desired *d)
{
	struct iso_error err = {0};
	json_t *j = doc(1, insts);

	assert_int_equal(iso_agent_desired_parse(j, "n1", d, &err), 0);
	json_decref(j);
}

static void test_xids_recorded_with_their_owner(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;
	struct iso_agent_desired d;
	struct iso_agent_outbox o;
	struct iso_gpu_instance *v = NULL;
	struct iso_error err = {0};
	const char *insts = INST("3g.40gb", 0, 4, A1, 0) "," INST("3g.40gb", 4, 4, A2, 1);
	int64_t before = iso_now_ms();
	unsigned n = 9;
	size_t ni = 0;
	int gi = -1;

	json_decref(tick(b, insts, &t));
	assert_int_equal(b->g->ops->list_instances(b->g, 0, &v, &ni, NULL), 0);
	for (size_t i = 0; i < ni; i++)
		if (v[i].start == 4)
			gi = v[i].gi_id;
	free(v);
	assert_true(gi >= 0);
	inject_xid(b, 0, 94, gi, 0);
	inject_xid(b, 0, 79, ISO_GPU_ID_NONE, ISO_GPU_ID_NONE);
	parse_doc(insts, &d);
	assert_int_equal(iso_agent_xids_drain(b->g, b->dir, &d, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(iso_agent_outbox_load(b->dir, &o, &err), 0);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.faults[0].xid, 94);
	assert_int_equal(o.faults[0].gi, gi);
	assert_int_equal(o.faults[0].ci, 0);
	assert_string_equal(o.faults[0].allocation, A2);
	assert_int_equal(o.faults[0].member, 1);
	assert_int_equal(o.faults[1].xid, 79);
	assert_int_equal(o.faults[1].gi, -1);
	assert_string_equal(o.faults[1].allocation, "");
	assert_int_equal(o.faults[1].member, -1);
	/* numbered in order, never below the wall clock */
	assert_true(o.faults[0].seq >= (uint64_t)before);
	assert_true(o.faults[1].seq > o.faults[0].seq);
	assert_int_equal(o.last_seq, o.faults[1].seq);
	json_t *body = iso_agent_fault_json(&o.faults[0]);
	assert_int_equal(json_integer_value(json_object_get(body, "gi")), gi);
	assert_string_equal(json_string_value(json_object_get(body, "allocation")), A2);
	json_decref(body);
	body = iso_agent_fault_json(&o.faults[1]);
	assert_null(json_object_get(body, "gi"));
	assert_null(json_object_get(body, "allocation"));
	assert_int_equal(json_integer_value(json_object_get(body, "seq")),
	                 (json_int_t)o.faults[1].seq);
	json_decref(body);
	/* Nothing more to read; acknowledged ones leave, the rest stays (also
	 * for a restarted agent: it is a file), and seqs keep growing. */
	assert_int_equal(iso_agent_xids_drain(b->g, b->dir, &d, &n, &err), 0);
	assert_int_equal(n, 0);
	uint64_t last = o.last_seq, second = o.faults[1].seq;
	assert_int_equal(iso_agent_fault_ack(b->dir, o.faults[0].seq, &err), 0);
	iso_agent_outbox_clear(&o);
	bk_close(b);
	bk_open(b);
	assert_int_equal(iso_agent_outbox_load(b->dir, &o, &err), 0);
	assert_int_equal(o.n, 1);
	assert_int_equal(o.faults[0].seq, second);
	iso_agent_outbox_clear(&o);
	inject_xid(b, 1, 13, ISO_GPU_ID_NONE, ISO_GPU_ID_NONE);
	assert_int_equal(iso_agent_xids_drain(b->g, b->dir, NULL, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(iso_agent_outbox_load(b->dir, &o, &err), 0);
	assert_int_equal(o.n, 2);
	assert_true(o.faults[1].seq > last);
	assert_int_equal(o.faults[1].gpu, 1);
	iso_agent_outbox_clear(&o);
	iso_agent_desired_clear(&d);
}

static void test_outbox_garbled_refused(void **state)
{
	struct bk *b = *state;
	struct iso_agent_outbox o;
	struct iso_error err = {0};
	static const char *const bad[] = {
	    "{\"last_seq\": 1, \"faults\": [}",
	    "{\"last_seq\": -1, \"faults\": []}",
	    "{\"last_seq\": 1, \"faults\": [], \"x\": 1}",
	    "{\"last_seq\": 1, \"faults\": [{\"seq\": 2, \"gpu\": 0, \"xid\": 79, \"gi\": -1, "
	    "\"ci\": -1, \"allocation\": \"\", \"member\": -1}]}",
	    "{\"last_seq\": 9, \"faults\": [{\"seq\": 2, \"gpu\": 0, \"xid\": \"79\", \"gi\": -1, "
	    "\"ci\": -1, \"allocation\": \"\", \"member\": -1}]}",
	};
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%s", b->dir, ISO_AGENT_FAULTS_FILE);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(bad); i++) {
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(bad[i], f);
		fclose(f);
		memset(&err, 0, sizeof(err));
		assert_int_equal(iso_agent_outbox_load(b->dir, &o, &err), -EINVAL);
		assert_string_equal(err.field, "state_dir");
		assert_int_equal(o.n, 0);
	}
}

/* An outbox whose last_seq is the largest a seq may be (a damaged file; the
 * controller takes seqs up to INT64_MAX) leaves no seq for the next fault:
 * recording one is refused, and the file stays as it was, readable, rather
 * than being written with a seq its reader refuses (found by
 * fuzz_agent_outbox's property check, crashes/agent_outbox/). */
static void test_outbox_seq_exhausted(void **state)
{
	struct bk *b = *state;
	struct iso_agent_outbox o;
	struct iso_agent_fault f = {.gpu = 0, .xid = 79, .gi = -1, .ci = -1, .member = -1};
	struct iso_error err = {0};
	char path[PATH_MAX + 32];
	FILE *file;

	snprintf(path, sizeof(path), "%s/%s", b->dir, ISO_AGENT_FAULTS_FILE);
	file = fopen(path, "w");
	assert_non_null(file);
	fputs("{\"last_seq\": 9223372036854775807, \"faults\": [{\"seq\": 9223372036854775807, "
	      "\"gpu\": 0, \"xid\": 79, \"gi\": -1, \"ci\": -1, \"allocation\": \"\", "
	      "\"member\": -1}]}",
	      file);
	fclose(file);
	assert_int_equal(iso_agent_fault_record(b->dir, &f, &err), -EUSERS);
	assert_string_equal(err.field, "state_dir");
	assert_int_equal(iso_agent_outbox_load(b->dir, &o, &err), 0);
	assert_int_equal(o.n, 1);
	assert_int_equal(o.last_seq, INT64_MAX);
	iso_agent_outbox_clear(&o);
}

/* The desired document says MIG on for GPU 1: the fake's A100 has it off
 * (a condition, its mode untouched), the sim's GPUs all have it on. */
static void test_mig_mode_condition(void **state)
{
	struct bk *b = *state;
	struct iso_agent_tick t;

	for (int round = 0; round < 2; round++) {
		json_t *st = tick(b, "", &t), *conds = json_object_get(st, "conditions");
		char *text = json_dumps(conds, JSON_COMPACT | JSON_SORT_KEYS);

		assert_string_equal(text, b->nvml ? "[{\"gpu\":1,\"have\":false,\"type\":"
		                                    "\"MigModeMismatch\",\"want\":true}]"
		                                  : "[]");
		free(text);
		json_decref(st);
	}
	struct iso_gpu_info *gv = NULL;
	size_t n = 0;
	assert_int_equal(b->g->ops->list_gpus(b->g, &gv, &n, NULL), 0);
	assert_true(n >= 2);
	assert_int_equal(gv[1].mig_enabled, !b->nvml);
	free(gv);
}

/* A sim host made from the node's first desired document
 * (src/agent/sim_host.c): as many GPUs as it lists, with its MIG modes, so
 * GPUs the inventory has with MIG off are no condition and a whole one is
 * handed over as the GPU itself; a MIG mode changed afterwards is the
 * condition; a state on disk is never remade from a later document. */
static void test_sim_host_from_document(void **state)
{
	char dir[PATH_MAX], cmd[PATH_MAX + 16], *text;
	struct iso_gpu *g = NULL;
	struct iso_gpu_info *gv = NULL;
	struct iso_agent_desired d, other;
	struct iso_agent_tick t;
	struct iso_error err = {0};
	json_t *j, *st = NULL, *in;
	size_t n = 0;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_agent.XXXXXX");
	assert_non_null(mkdtemp(dir));
	j = json_loads("{\"node\": \"n1\", \"generation\": 2, \"term\": 1, \"vfs\": [], "
	               "\"gpus\": [{\"index\": 0, \"mig\": false, \"instances\": [], "
	               "\"whole\": {\"allocation\": \"" A1 "\", \"member\": 0}},"
	               "{\"index\": 1, \"mig\": false, \"instances\": [], \"whole\": null},"
	               "{\"index\": 2, \"mig\": true, \"whole\": null, \"instances\": [" INST(
	                   "1g.10gb", 0, 1, A2, 0) "]}]}",
	               0, NULL);
	assert_non_null(j);
	assert_int_equal(iso_agent_desired_parse(j, "n1", &d, NULL), 0);
	json_decref(j);
	/* No state yet and no document: nothing opened (made at the first). */
	assert_int_equal(iso_agent_sim_open(dir, NULL, &g, &err), 0);
	assert_null(g);
	assert_int_equal(iso_agent_sim_open(dir, &d, &g, &err), 0);
	assert_non_null(g);
	assert_int_equal(g->ops->list_gpus(g, &gv, &n, NULL), 0);
	assert_int_equal(n, 3);
	assert_false(gv[0].mig_enabled);
	assert_false(gv[1].mig_enabled);
	assert_true(gv[2].mig_enabled);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(gv[i].model->name, "h100-80gb");

	assert_int_equal(iso_agent_reconcile(g, dir, &d, &st, &t, NULL), 0);
	assert_int_equal(t.created, 1);
	text = json_dumps(json_object_get(st, "conditions"), JSON_COMPACT);
	assert_string_equal(text, "[]");
	free(text);
	in = json_array_get(json_object_get(st, "instances"), 0);
	assert_string_equal(json_string_value(json_object_get(in, "profile")), "whole");
	assert_true(json_is_true(json_object_get(in, "ready")));
	assert_string_equal(json_string_value(json_object_get(in, "uuid")), gv[0].uuid);
	in = json_array_get(json_object_get(st, "instances"), 1);
	assert_true(json_is_true(json_object_get(in, "ready")));
	assert_true(strncmp(json_string_value(json_object_get(in, "uuid")), "MIG-", 4) == 0);
	json_decref(st);

	/* The operator turns MIG on for GPU 1: a condition, not undone. */
	assert_int_equal(iso_gpu_sim_set_mig(g, 1, true, NULL), 0);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(iso_agent_reconcile(g, dir, &d, &st, &t, NULL), 0);
		text = json_dumps(json_object_get(st, "conditions"), JSON_COMPACT | JSON_SORT_KEYS);
		assert_string_equal(text, "[{\"gpu\":1,\"have\":true,\"type\":"
		                          "\"MigModeMismatch\",\"want\":false}]");
		free(text);
		json_decref(st);
	}
	g->ops->close(g);
	g = NULL;

	/* Opened again with another document (4 GPUs, MIG on): the state on
	 * disk is the host, unchanged, so the condition stays. */
	j = json_loads("{\"node\": \"n1\", \"generation\": 3, \"term\": 1, \"vfs\": [], "
	               "\"gpus\": [{\"index\": 3, \"mig\": true, \"instances\": [], "
	               "\"whole\": null}]}",
	               0, NULL);
	assert_int_equal(iso_agent_desired_parse(j, "n1", &other, NULL), 0);
	json_decref(j);
	assert_int_equal(iso_agent_sim_open(dir, &other, &g, &err), 0);
	iso_agent_desired_clear(&other);
	free(gv);
	assert_int_equal(g->ops->list_gpus(g, &gv, &n, NULL), 0);
	assert_int_equal(n, 3);
	assert_false(gv[0].mig_enabled);
	assert_true(gv[1].mig_enabled);
	free(gv);
	g->ops->close(g);
	g = NULL;
	assert_int_equal(iso_agent_sim_open(dir, NULL, &g, &err), 0);
	assert_non_null(g);
	assert_int_equal(iso_agent_reconcile(g, dir, &d, &st, &t, NULL), 0);
	assert_int_equal(t.created + t.destroyed, 0);
	assert_int_equal(json_array_size(json_object_get(st, "conditions")), 1);
	json_decref(st);
	g->ops->close(g);
	iso_agent_desired_clear(&d);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

#define BOTH(t)                                                                                    \
	cmocka_unit_test_setup_teardown(t, setup_sim, teardown),                                   \
	    cmocka_unit_test_setup_teardown(t, setup_nvml, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    BOTH(test_create_and_destroy),
	    BOTH(test_restart_keeps_instances),
	    BOTH(test_orphan_destroyed),
	    BOTH(test_neighbour_untouched),
	    BOTH(test_in_use_retried),
	    BOTH(test_lower_term_refused),
	    BOTH(test_whole_gpu_reported),
	    BOTH(test_unmakeable_reported),
	    cmocka_unit_test_setup_teardown(test_half_made_instance_rebuilt, setup_nvml, teardown),
	    cmocka_unit_test(test_garbled_desired_refused),
	    cmocka_unit_test(test_desired_profile_case_refused),
	    cmocka_unit_test_setup_teardown(test_term_file_garbled, setup_sim, teardown),
	    BOTH(test_xids_recorded_with_their_owner),
	    cmocka_unit_test_setup_teardown(test_outbox_garbled_refused, setup_sim, teardown),
	    cmocka_unit_test_setup_teardown(test_outbox_seq_exhausted, setup_sim, teardown),
	    BOTH(test_mig_mode_condition),
	    cmocka_unit_test(test_sim_host_from_document),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

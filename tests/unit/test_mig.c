/* test_mig.c: the built-in MIG tables checked against docs/reference-mig.md
 * (written out again here, independently of src/mig/profiles.c), and every
 * quirk of MIG geometry the reference lists, exercised through the occupancy
 * rules, and the maximal layouts enumerated from them (src/mig/layouts.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "isostack/mig.h"
#include "isostack/util.h"

/* ---- the reference, as data ---- */

#define NO_START -1

struct ref_kind {
	int nvml_id;
	int compute;
	int width;
	int max_count;
	int starts[8]; /* terminated by NO_START */
	bool media_engine;
};

/* mig.md, "Profiles, 8-memory-slice GPUs": ids 19, 20, 15, 14, 9, 5, 0. */
static const struct ref_kind kinds8[7] = {
    {19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6, NO_START}, false},
    {20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6, NO_START}, true},
    {15, 1, 2, 4, {0, 2, 4, 6, NO_START}, false},
    {14, 2, 2, 3, {0, 2, 4, NO_START}, false},
    {9, 3, 4, 2, {0, 4, NO_START}, false},
    {5, 4, 4, 1, {0, NO_START}, false},
    {0, 7, 8, 1, {0, NO_START}, false},
};

struct ref_model {
	const char *name;
	double memory_gib;
	bool inferred;
	const char *profiles[7];
};

/* mig.md, the per-GPU name table; "inferred" follows its [C]/[I] marks. */
static const struct ref_model models8[] = {
    {"a100-40gb",
     40,
     false,
     {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
    {"a100-80gb",
     80,
     true,
     {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
    {"h100-80gb",
     80,
     false,
     {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
    {"h100-94gb",
     94,
     false,
     {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}},
    {"h200-141gb",
     141,
     true,
     {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
    {"b200-180gb",
     180,
     true,
     {"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}},
};

/* mig.md, "GiB (H100-80)" and "SMs (H100)" rows. */
static const double h100_80_gib[7] = {9.75, 9.75, 19.62, 19.62, 39.50, 39.50, 79.25};
static const int h100_sms[7] = {16, 16, 26, 32, 60, 64, 132};

/* mig.md, "A30-24GB". */
static const struct {
	const char *name;
	struct ref_kind k;
} a30[5] = {
    {"1g.6gb", {14, 1, 1, 4, {0, 1, 2, 3, NO_START}, false}},
    {"1g.6gb+me", {21, 1, 1, 1, {0, 1, 2, 3, NO_START}, true}},
    {"2g.12gb", {5, 2, 2, 2, {0, 2, NO_START}, false}},
    {"2g.12gb+me", {6, 2, 2, 1, {0, 2, NO_START}, true}},
    {"4g.24gb", {0, 4, 4, 1, {0, NO_START}, false}},
};

static uint8_t mask_of(const int *starts)
{
	uint8_t m = 0;
	for (int i = 0; i < 8 && starts[i] != NO_START; i++)
		m |= (uint8_t)(1u << starts[i]);
	return m;
}

/* The GiB figure in a profile name: "3g.40gb" -> 40. */
static double gib_of_name(const char *name)
{
	int g, gib;
	assert_int_equal(sscanf(name, "%dg.%dgb", &g, &gib), 2);
	return gib;
}

static void check_kind(const struct iso_mig_profile *p, const struct ref_kind *k)
{
	assert_int_equal(p->nvml_id, k->nvml_id);
	assert_int_equal(p->compute, k->compute);
	assert_int_equal(p->width, k->width);
	assert_int_equal(p->max_count, k->max_count);
	assert_int_equal(p->starts, mask_of(k->starts));
	assert_int_equal(p->media_engine, k->media_engine);
	assert_int_equal(p->media_engine, strstr(p->name, "+me") != NULL);
}

static const struct iso_gpu_model *model(const char *name)
{
	const struct iso_gpu_model *m = iso_gpu_model_find(name);
	assert_non_null(m);
	return m;
}

static const struct iso_mig_profile *prof(const struct iso_gpu_model *m, const char *name)
{
	const struct iso_mig_profile *p = iso_mig_profile_find(m, name);
	assert_non_null(p);
	return p;
}

/* Takes `name` at its lowest fitting start and returns the start (-1: none). */
static int take_first(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o, const char *name)
{
	const struct iso_mig_profile *p = prof(m, name);
	int s = iso_mig_first_start(m, o, p);
	if (s >= 0)
		iso_mig_take(m, o, p, s);
	return s;
}

static void take_at(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o, const char *name,
                    int start)
{
	const struct iso_mig_profile *p = prof(m, name);
	assert_true(iso_mig_fits_at(m, o, p, start));
	iso_mig_take(m, o, p, start);
}

static bool nothing_fits(const struct iso_gpu_model *m, const struct iso_gpu_occupancy *o)
{
	for (int i = 0; i < m->n_profiles; i++)
		if (iso_mig_first_start(m, o, &m->profiles[i]) >= 0)
			return false;
	return true;
}

/* Exhaustive search: can all of `names` be placed together on `o`, trying
 * every start of every instance? */
static bool solve(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o, const char **names,
                  int n)
{
	const struct iso_mig_profile *p;
	if (n == 0)
		return true;
	p = prof(m, names[0]);
	for (int s = 0; s < m->memory_slices; s++) {
		bool ok;
		if (!iso_mig_fits_at(m, o, p, s))
			continue;
		iso_mig_take(m, o, p, s);
		ok = solve(m, o, names + 1, n - 1);
		iso_mig_give(m, o, p, s);
		if (ok)
			return true;
	}
	return false;
}

static bool placeable(const struct iso_gpu_model *m, const char **names, int n)
{
	struct iso_gpu_occupancy o;
	iso_gpu_occupancy_init(&o, m);
	return solve(m, &o, names, n);
}

static bool occ_equal(const struct iso_gpu_occupancy *a, const struct iso_gpu_occupancy *b)
{
	return a->free_mask == b->free_mask && a->compute_used == b->compute_used &&
	       a->media_engine_used == b->media_engine_used && a->whole == b->whole &&
	       memcmp(a->count, b->count, sizeof(a->count)) == 0;
}

/* ---- tables ---- */

static void test_model_lookup(void **state)
{
	(void)state;
	const char *expect[] = {"a100-40gb",  "a100-80gb",  "h100-80gb", "h100-94gb",
	                        "h200-141gb", "b200-180gb", "a30-24gb"};
	int n = 0;

	while (iso_gpu_model_at(n))
		n++;
	assert_int_equal(n, (int)ISO_ARRAY_SIZE(expect));
	for (int i = 0; i < n; i++)
		assert_ptr_equal(iso_gpu_model_find(expect[i]), iso_gpu_model_at(i));
	assert_null(iso_gpu_model_at(-1));
	assert_ptr_equal(iso_gpu_model_find("H100-80GB"), iso_gpu_model_find("h100-80gb"));
	assert_ptr_equal(iso_gpu_model_find("A30-24gb"), iso_gpu_model_find("a30-24gb"));
	assert_null(iso_gpu_model_find("h100"));
	assert_null(iso_gpu_model_find("h100-80gb "));
	assert_null(iso_gpu_model_find(""));
	assert_null(iso_gpu_model_find(NULL));

	assert_ptr_equal(iso_mig_profile_find(model("h100-80gb"), "3G.40GB"),
	                 iso_mig_profile_find(model("h100-80gb"), "3g.40gb"));
	assert_null(iso_mig_profile_find(model("h100-80gb"), "3g.20gb"));
	assert_null(iso_mig_profile_find(model("h100-80gb"), "3g.40"));
	assert_null(iso_mig_profile_find(model("h100-80gb"), ""));
	assert_null(iso_mig_profile_find(NULL, "3g.40gb"));
	assert_null(iso_mig_profile_find(model("h100-80gb"), NULL));
}

static void test_tables_8_slices(void **state)
{
	(void)state;
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(models8); i++) {
		const struct ref_model *r = &models8[i];
		const struct iso_gpu_model *m = model(r->name);

		assert_string_equal(m->name, r->name);
		assert_non_null(m->product);
		assert_int_equal(m->memory_slices, 8);
		assert_int_equal(m->compute_slices, 7);
		assert_int_equal(iso_mig_full_mask(m), 0xff);
		assert_true(m->memory_gib == r->memory_gib);
		assert_int_equal(m->inferred, r->inferred);
		assert_int_equal(m->n_profiles, 7);
		for (int j = 0; j < 7; j++) {
			const struct iso_mig_profile *p = &m->profiles[j];
			assert_string_equal(p->name, r->profiles[j]);
			assert_ptr_equal(iso_mig_profile_find(m, r->profiles[j]), p);
			check_kind(p, &kinds8[j]);
			if (strcmp(m->name, "h100-80gb") == 0) {
				assert_true(p->memory_gib == h100_80_gib[j]);
				assert_int_equal(p->sms, h100_sms[j]);
			} else {
				assert_true(p->memory_gib == gib_of_name(p->name));
				/* The only other SM count the reference gives. */
				assert_int_equal(p->sms, strcmp(p->name, "3g.20gb") == 0 ? 42 : 0);
			}
		}
	}
}

static void test_table_a30(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("a30-24gb");

	assert_int_equal(m->memory_slices, 4);
	assert_int_equal(m->compute_slices, 4);
	assert_int_equal(iso_mig_full_mask(m), 0x0f);
	assert_true(m->memory_gib == 24);
	assert_int_equal(m->n_profiles, 5);
	for (int j = 0; j < 5; j++) {
		assert_string_equal(m->profiles[j].name, a30[j].name);
		check_kind(&m->profiles[j], &a30[j].k);
		assert_true(m->profiles[j].memory_gib == gib_of_name(a30[j].name));
	}
}

/* Every table is self-consistent: starts inside the GPU, and max_count is
 * exactly what lowest-start packing of that profile alone reaches. */
static void test_tables_consistent(void **state)
{
	(void)state;
	for (int i = 0; iso_gpu_model_at(i); i++) {
		const struct iso_gpu_model *m = iso_gpu_model_at(i);
		for (int j = 0; j < m->n_profiles; j++) {
			const struct iso_mig_profile *p = &m->profiles[j];
			struct iso_gpu_occupancy o;
			int n = 0;

			assert_true(p->starts != 0);
			for (int s = 0; s < 8; s++)
				if ((p->starts >> s) & 1)
					assert_true(s + p->width <= m->memory_slices);
			iso_gpu_occupancy_init(&o, m);
			while (take_first(m, &o, p->name) >= 0)
				n++;
			assert_int_equal(n, p->max_count);
		}
	}
}

/* ---- quirks (mig.md, "Quirks the engine must encode") ---- */

/* Seven 1g use memory slices 0-6; after them nothing else fits. */
static void test_seven_1g(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("h100-80gb");
	struct iso_gpu_occupancy o;

	iso_gpu_occupancy_init(&o, m);
	for (int i = 0; i < 7; i++)
		assert_int_equal(take_first(m, &o, "1g.10gb"), i);
	assert_int_equal(o.free_mask, 0x80);
	assert_int_equal(o.compute_used, 7);
	assert_true(nothing_fits(m, &o));
}

/* Slice 7 is usable only by 1g double memory at 6, 3g at 4 or 7g. */
static void test_slice7(void **state)
{
	(void)state;
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(models8); i++) {
		const struct iso_gpu_model *m = model(models8[i].name);
		struct iso_gpu_occupancy o;
		int found = 0;

		iso_gpu_occupancy_init(&o, m);
		for (int j = 0; j < m->n_profiles; j++)
			for (int s = 0; s < 8; s++) {
				const struct iso_mig_profile *p = &m->profiles[j];
				if (!iso_mig_fits_at(m, &o, p, s) ||
				    !(iso_mig_span(s, p->width) & 0x80))
					continue;
				found++;
				assert_true((j == 2 && s == 6) || (j == 4 && s == 4) ||
				            (j == 6 && s == 0));
			}
		assert_int_equal(found, 3);
		/* 1g double memory at 6 covers slices 6 and 7. */
		take_at(m, &o, models8[i].profiles[2], 6);
		assert_int_equal(o.free_mask, 0x3f);
	}
}

/* 4g only at 0, 3g only at 0 or 4, 2g at 0, 2, 4; 7g only at 0. */
static void test_allowed_starts(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("h100-80gb");
	struct iso_gpu_occupancy o;
	const struct {
		const char *name;
		uint8_t ok;
	} cases[] = {{"4g.40gb", 0x01}, {"3g.40gb", 0x11}, {"2g.20gb", 0x15},
	             {"7g.80gb", 0x01}, {"1g.20gb", 0x55}, {"1g.10gb", 0x7f}};

	iso_gpu_occupancy_init(&o, m);
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(cases); i++)
		for (int s = -1; s <= 9; s++) {
			bool expect = s >= 0 && s < 8 && ((cases[i].ok >> s) & 1);
			assert_int_equal(iso_mig_fits_at(m, &o, prof(m, cases[i].name), s), expect);
		}
	assert_false(iso_mig_fits_at(m, &o, prof(m, "1g.10gb"), 100));
	assert_false(iso_mig_fits_at(m, &o, NULL, 0));
	/* A profile of another model is not one of this model's profiles. */
	assert_false(iso_mig_fits_at(m, &o, prof(model("a100-80gb"), "1g.10gb"), 0));
}

/* 3g takes 4 memory slices but 3 compute: 3g+3g = 8/8 memory, 6/7 compute. */
static void test_3g_plus_3g(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("h100-80gb");
	struct iso_gpu_occupancy o;

	iso_gpu_occupancy_init(&o, m);
	assert_int_equal(take_first(m, &o, "3g.40gb"), 0);
	assert_int_equal(take_first(m, &o, "3g.40gb"), 4);
	assert_int_equal(o.free_mask, 0);
	assert_int_equal(o.compute_used, 6);
	/* One compute slice is stranded: even a 1g finds no memory. */
	assert_true(nothing_fits(m, &o));

	/* Any layout with 3g@0 strands one compute slice. */
	iso_gpu_occupancy_init(&o, m);
	take_at(m, &o, "3g.40gb", 0);
	assert_int_equal(take_first(m, &o, "2g.20gb"), 4);
	assert_int_equal(take_first(m, &o, "1g.10gb"), 6);
	assert_int_equal(o.compute_used, 6);
	assert_true(nothing_fits(m, &o));
}

/* 4g+3g only as 4g@0 + 3g@4; first-fit placing 3g first fails. */
static void test_4g_plus_3g(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("h100-80gb");
	struct iso_gpu_occupancy o;
	const char *both[] = {"3g.40gb", "4g.40gb"};

	iso_gpu_occupancy_init(&o, m);
	assert_int_equal(take_first(m, &o, "4g.40gb"), 0);
	assert_int_equal(take_first(m, &o, "3g.40gb"), 4);
	assert_int_equal(o.compute_used, 7);
	assert_int_equal(o.free_mask, 0);

	iso_gpu_occupancy_init(&o, m);
	assert_int_equal(take_first(m, &o, "3g.40gb"), 0); /* lands at 0 */
	assert_int_equal(take_first(m, &o, "4g.40gb"), -1);

	/* With an explicit placement the pair exists, in exactly one layout. */
	assert_true(placeable(m, both, 2));
	iso_gpu_occupancy_init(&o, m);
	take_at(m, &o, "3g.40gb", 4);
	assert_int_equal(iso_mig_first_start(m, &o, prof(m, "4g.40gb")), 0);
}

/* 4 x 1g double memory + 3 x 1g sums to 7 compute but cannot be placed
 * (A100-40 names: 4x1g.10gb + 3x1g.5gb), in any order or layout. */
static void test_1g_double_mix_unplaceable(void **state)
{
	(void)state;
	const char *h100[] = {"1g.20gb", "1g.20gb", "1g.20gb", "1g.20gb",
	                      "1g.10gb", "1g.10gb", "1g.10gb"};
	const char *a100[] = {"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb",
	                      "1g.5gb",  "1g.5gb",  "1g.5gb"};
	const struct iso_gpu_model *m = model("h100-80gb");
	int compute = 0;

	for (int i = 0; i < 7; i++)
		compute += prof(m, h100[i])->compute;
	assert_int_equal(compute, 7);
	assert_false(placeable(m, h100, 7));
	assert_false(placeable(model("a100-40gb"), a100, 7));
	/* Three of each does not fit either (1g never starts at 7)... */
	assert_false(placeable(m, h100 + 1, 6));
	/* ...while the search does find the layouts that exist. */
	assert_true(placeable(m, h100, 4));     /* 1g.20gb at 0, 2, 4, 6 */
	assert_true(placeable(m, h100 + 2, 5)); /* 2 double at 4, 6 + 3 x 1g at 0-2 */
	assert_true(placeable(m, h100 + 1, 5)); /* 3 double at 2, 4, 6 + 2 x 1g at 0-1 */
}

/* The driver's choice depends on creation order (-cgi 19,19,14,9 vs
 * 9,19,14,19); the set itself is placeable, and lowest-start first-fit is
 * order-dependent too, so placements must be explicit. */
static void test_creation_order(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("a100-40gb");
	const char *ids_a[] = {"1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"}; /* 19,19,14,9 */
	const char *ids_b[] = {"3g.20gb", "1g.5gb", "2g.10gb", "1g.5gb"}; /* 9,19,14,19 */
	struct iso_gpu_occupancy o;
	int fails = 0;

	assert_true(placeable(m, ids_a, 4));
	assert_true(placeable(m, ids_b, 4));
	iso_gpu_occupancy_init(&o, m);
	for (int i = 0; i < 4; i++)
		assert_true(take_first(m, &o, ids_a[i]) >= 0);
	iso_gpu_occupancy_init(&o, m);
	for (int i = 0; i < 4; i++)
		fails += take_first(m, &o, ids_b[i]) < 0;
	assert_int_equal(fails, 1);
}

/* Only one "+me" instance per GPU. */
static void test_one_media_engine(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("h100-80gb");
	const struct iso_gpu_model *a = model("a30-24gb");
	struct iso_gpu_occupancy o;

	iso_gpu_occupancy_init(&o, m);
	assert_int_equal(take_first(m, &o, "1g.10gb+me"), 0);
	assert_true(o.media_engine_used);
	for (int s = 0; s < 8; s++)
		assert_false(iso_mig_fits_at(m, &o, prof(m, "1g.10gb+me"), s));
	assert_int_equal(take_first(m, &o, "1g.10gb"), 1);
	iso_mig_give(m, &o, prof(m, "1g.10gb+me"), 0);
	assert_false(o.media_engine_used);
	assert_int_equal(iso_mig_first_start(m, &o, prof(m, "1g.10gb+me")), 0);

	/* A30: the two +me profiles share the one slot. */
	iso_gpu_occupancy_init(&o, a);
	assert_int_equal(take_first(a, &o, "2g.12gb+me"), 0);
	assert_int_equal(take_first(a, &o, "1g.6gb+me"), -1);
	assert_int_equal(take_first(a, &o, "2g.12gb+me"), -1);
	assert_int_equal(take_first(a, &o, "1g.6gb"), 2);
}

/* max_count is a rule of its own, not only a consequence of space: a model
 * whose 1g allows two instances refuses a third on an empty GPU. */
static void test_max_count(void **state)
{
	(void)state;
	struct iso_gpu_model m = *model("h100-80gb");
	struct iso_gpu_occupancy o;

	m.profiles[0].max_count = 2;
	iso_gpu_occupancy_init(&o, &m);
	assert_int_equal(take_first(&m, &o, "1g.10gb"), 0);
	assert_int_equal(take_first(&m, &o, "1g.10gb"), 1);
	assert_int_equal(o.count[0], 2);
	assert_int_equal(iso_mig_first_start(&m, &o, &m.profiles[0]), -1);
	assert_int_equal(take_first(&m, &o, "1g.20gb"), 2); /* others unaffected */

	/* And the real 2g limit of 3: three at 0, 2, 4, no fourth. */
	const struct iso_gpu_model *h = model("h100-80gb");
	iso_gpu_occupancy_init(&o, h);
	for (int i = 0; i < 3; i++)
		assert_int_equal(take_first(h, &o, "2g.20gb"), 2 * i);
	assert_int_equal(o.count[3], 3);
	assert_int_equal(take_first(h, &o, "2g.20gb"), -1);
	assert_int_equal(take_first(h, &o, "1g.10gb"), 6);
}

/* Compute slices are a rule of their own: 7g leaves no compute, and on a
 * model with fewer compute slices memory alone does not decide. */
static void test_compute_limit(void **state)
{
	(void)state;
	struct iso_gpu_model m = *model("h100-80gb");
	struct iso_gpu_occupancy o;

	m.compute_slices = 5;
	iso_gpu_occupancy_init(&o, &m);
	take_at(&m, &o, "4g.40gb", 0);
	assert_int_equal(take_first(&m, &o, "1g.10gb"), 4);
	assert_int_equal(o.compute_used, 5);
	assert_int_equal(iso_mig_first_start(&m, &o, prof(&m, "1g.10gb")), -1);
}

/* Teardown out of order leaves holes: two free 1g slots that a 2g cannot use. */
static void test_teardown_holes(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("h100-80gb");
	const struct iso_mig_profile *g1 = prof(m, "1g.10gb");
	struct iso_gpu_occupancy o;

	iso_gpu_occupancy_init(&o, m);
	for (int i = 0; i < 7; i++)
		iso_mig_take(m, &o, g1, i);
	iso_mig_give(m, &o, g1, 1);
	iso_mig_give(m, &o, g1, 4);
	assert_int_equal(o.compute_used, 5);
	assert_int_equal(iso_mig_first_start(m, &o, prof(m, "2g.20gb")), -1);
	assert_int_equal(iso_mig_first_start(m, &o, prof(m, "1g.20gb")), -1);
	assert_int_equal(iso_mig_first_start(m, &o, g1), 1);
	/* Freeing the neighbour of a hole opens a 2g slot again. */
	iso_mig_give(m, &o, g1, 5);
	assert_int_equal(iso_mig_first_start(m, &o, prof(m, "2g.20gb")), 4);
}

/* "19 maximal layouts exist with 1g/2g/3g/4g/7g (78 with the 1g
 * double-memory profile)": count the sets of placements that admit nothing
 * more, over the allowed profiles. */
static int count_maximal(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o,
                         unsigned allowed, int last)
{
	int n = 0;
	bool any = false;

	for (int key = 0; key < 8 * 16; key++) {
		int s = key / 16, j = key % 16;
		if (j >= m->n_profiles || !((allowed >> j) & 1))
			continue;
		if (!iso_mig_fits_at(m, o, &m->profiles[j], s))
			continue;
		any = true;
		if (key <= last)
			continue;
		iso_mig_take(m, o, &m->profiles[j], s);
		n += count_maximal(m, o, allowed, key);
		iso_mig_give(m, o, &m->profiles[j], s);
	}
	return any ? n : 1;
}

static void test_maximal_layouts(void **state)
{
	(void)state;
	/* profile indexes: 0 1g, 1 1g+me, 2 1g double, 3 2g, 4 3g, 5 4g, 6 7g */
	const unsigned plain = 1u << 0 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6;
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(models8); i++) {
		const struct iso_gpu_model *m = model(models8[i].name);
		struct iso_gpu_occupancy o;

		iso_gpu_occupancy_init(&o, m);
		assert_int_equal(count_maximal(m, &o, plain, -1), 19);
		assert_int_equal(count_maximal(m, &o, plain | 1u << 2, -1), 78);
		assert_true(iso_gpu_occupancy_empty(m, &o));
	}
}

static void check_layouts(const struct iso_gpu_model *m, uint32_t mask, int want)
{
	struct iso_mig_layout *l = NULL;
	int n = 0;

	assert_int_equal(iso_mig_layouts_maximal(m, mask, &l, &n), 0);
	assert_int_equal(n, want);
	for (int i = 0; i < n; i++) {
		struct iso_gpu_occupancy o;

		iso_gpu_occupancy_init(&o, m);
		for (int k = 0; k < l[i].n; k++) {
			assert_true(
			    iso_mig_fits_at(m, &o, l[i].inst[k].profile, l[i].inst[k].start));
			iso_mig_take(m, &o, l[i].inst[k].profile, l[i].inst[k].start);
			if (k)
				assert_true(l[i].inst[k - 1].start < l[i].inst[k].start);
		}
		/* Maximal: nothing of the allowed profiles fits any more. */
		for (int p = 0; p < m->n_profiles; p++)
			if ((mask >> p) & 1u)
				assert_int_equal(iso_mig_first_start(m, &o, &m->profiles[p]), -1);
		for (int j = 0; j < i; j++)
			assert_false(l[j].n == l[i].n &&
			             memcmp(l[j].inst, l[i].inst,
			                    (size_t)l[i].n * sizeof(l[i].inst[0])) == 0);
	}
	free(l);
}

/* iso_mig_layouts_maximal (src/mig/layouts.c) lists exactly the sets that
 * count_maximal counts, each once, in start order, each really maximal. */
static void test_layouts_enumerated(void **state)
{
	(void)state;
	for (unsigned i = 0; i < ISO_ARRAY_SIZE(models8); i++) {
		const struct iso_gpu_model *m = model(models8[i].name);
		uint32_t plain = iso_mig_profiles_plain(m);
		const struct iso_mig_profile *dm = &m->profiles[2], *me = &m->profiles[1];
		struct iso_gpu_occupancy o;

		assert_false(dm->media_engine);
		assert_true(me->media_engine);
		assert_int_equal(plain & (1u << 1), 0); /* no "+me" profile */
		iso_gpu_occupancy_init(&o, m);
		check_layouts(m, plain & ~(1u << 2), 19); /* 1g/2g/3g/4g/7g */
		check_layouts(m, plain, 78);              /* and the 1g double-memory one */
		assert_int_equal(count_maximal(m, &o, plain, -1), 78);
	}
	check_layouts(model("a30-24gb"), iso_mig_profiles_plain(model("a30-24gb")), 5);
}

/* Every sequence of up to four takes, each undone in reverse, returns to
 * the state before it; and every state reached is consistent. */
static int walk(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o, int depth)
{
	int n = 1;
	if (depth == 0)
		return n;
	for (int j = 0; j < m->n_profiles; j++)
		for (int s = 0; s < m->memory_slices; s++) {
			const struct iso_mig_profile *p = &m->profiles[j];
			struct iso_gpu_occupancy before = *o;
			int used = 0, mask_used = 0;

			if (!iso_mig_fits_at(m, o, p, s))
				continue;
			iso_mig_take(m, o, p, s);
			assert_false(iso_mig_fits_at(m, o, p, s));
			assert_false(iso_gpu_occupancy_empty(m, o));
			for (int k = 0; k < m->n_profiles; k++) {
				used += o->count[k] * m->profiles[k].compute;
				mask_used += o->count[k] * m->profiles[k].width;
			}
			assert_int_equal(used, o->compute_used);
			assert_int_equal(mask_used,
			                 m->memory_slices - __builtin_popcount(o->free_mask));
			n += walk(m, o, depth - 1);
			iso_mig_give(m, o, p, s);
			assert_true(occ_equal(o, &before));
		}
	return n;
}

static void test_take_give_roundtrip(void **state)
{
	(void)state;
	for (int i = 0; iso_gpu_model_at(i); i++) {
		const struct iso_gpu_model *m = iso_gpu_model_at(i);
		struct iso_gpu_occupancy o, init;

		iso_gpu_occupancy_init(&o, m);
		iso_gpu_occupancy_init(&init, m);
		assert_true(iso_gpu_occupancy_empty(m, &o));
		assert_true(walk(m, &o, 4) > 100);
		assert_true(occ_equal(&o, &init));
		assert_int_equal(memcmp(&o, &init, sizeof(o)), 0);
	}
}

/* A GPU taken whole holds no MIG instance, and an occupied one is not empty. */
static void test_whole_and_empty(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("h100-80gb");
	struct iso_gpu_occupancy o;

	iso_gpu_occupancy_init(&o, m);
	assert_int_equal(o.free_mask, 0xff);
	o.whole = true;
	assert_false(iso_gpu_occupancy_empty(m, &o));
	for (int j = 0; j < m->n_profiles; j++)
		assert_int_equal(iso_mig_first_start(m, &o, &m->profiles[j]), -1);
	iso_gpu_occupancy_init(&o, m);
	o.media_engine_used = true;
	assert_false(iso_gpu_occupancy_empty(m, &o));
	assert_false(iso_gpu_occupancy_empty(NULL, &o));
	iso_gpu_occupancy_init(&o, NULL);
	assert_int_equal(o.free_mask, 0);
}

/* A30: 4 memory and 4 compute slices. */
static void test_a30_geometry(void **state)
{
	(void)state;
	const struct iso_gpu_model *m = model("a30-24gb");
	struct iso_gpu_occupancy o;

	iso_gpu_occupancy_init(&o, m);
	for (int i = 0; i < 4; i++)
		assert_int_equal(take_first(m, &o, "1g.6gb"), i);
	assert_int_equal(o.free_mask, 0);
	assert_int_equal(o.compute_used, 4);
	assert_true(nothing_fits(m, &o));

	iso_gpu_occupancy_init(&o, m);
	assert_int_equal(take_first(m, &o, "2g.12gb"), 0);
	assert_int_equal(take_first(m, &o, "2g.12gb"), 2);
	assert_int_equal(take_first(m, &o, "2g.12gb"), -1);

	iso_gpu_occupancy_init(&o, m);
	assert_false(iso_mig_fits_at(m, &o, prof(m, "2g.12gb"), 1));
	assert_false(iso_mig_fits_at(m, &o, prof(m, "2g.12gb"), 3));
	assert_false(iso_mig_fits_at(m, &o, prof(m, "1g.6gb"), 4));
	for (int s = 1; s < 4; s++)
		assert_false(iso_mig_fits_at(m, &o, prof(m, "4g.24gb"), s));
	take_at(m, &o, "1g.6gb", 3);
	assert_int_equal(iso_mig_first_start(m, &o, prof(m, "4g.24gb")), -1);
	assert_int_equal(take_first(m, &o, "2g.12gb"), 0);
	assert_int_equal(take_first(m, &o, "1g.6gb+me"), 2);
	assert_true(nothing_fits(m, &o));
}

/* ---- the state space (src/mig/states.c) ---- */

/* The most compute slices that the rules let placements at slice `from`
 * or above add: at each slice, leave it or start an instance there. */
static int most_compute(const struct iso_gpu_model *m, struct iso_gpu_occupancy *o, int from)
{
	int best;

	if (from >= m->memory_slices)
		return 0;
	best = most_compute(m, o, from + 1);
	for (int j = 0; j < m->n_profiles; j++) {
		const struct iso_mig_profile *p = &m->profiles[j];
		int v;

		if (!iso_mig_fits_at(m, o, p, from))
			continue;
		iso_mig_take(m, o, p, from);
		v = p->compute + most_compute(m, o, from + p->width);
		iso_mig_give(m, o, p, from);
		if (v > best)
			best = v;
	}
	return best;
}

/* Walks every set of placements that the rules admit (each set once, in
 * ascending (start, profile) order) and checks each state's row of the
 * table against the occupancy rules themselves. */
static void check_states(const struct iso_gpu_model *m, const struct iso_mig_state_table *t,
                         struct iso_gpu_occupancy *o, bool *seen, int last)
{
	int k = iso_mig_state_of(o);

	if (!seen[k]) /* the potential by brute force, once per state */
		assert_int_equal(t->potential[k], most_compute(m, o, 0));
	seen[k] = true;
	assert_true(t->is_reachable[k]);
	for (int j = 0; j < m->n_profiles; j++) {
		const struct iso_mig_profile *p = &m->profiles[j];
		struct iso_gpu_occupancy c = *o;
		uint8_t cover = 0;
		int units = 0, start;

		for (int s = 0; s < 8; s++) {
			bool fits = iso_mig_fits_at(m, o, p, s);
			assert_int_equal((t->fits[k][j] >> s) & 1, fits);
			if (fits)
				cover |= iso_mig_span(s, p->width);
		}
		while ((start = iso_mig_first_start(m, &c, p)) >= 0) {
			iso_mig_take(m, &c, p, start);
			units++;
		}
		assert_int_equal(t->units[k][j], units);
		assert_int_equal(t->unusable[k][j], __builtin_popcount(o->free_mask & ~cover));
	}
	for (int key = last + 1; key < 8 * ISO_MIG_MAX_PROFILES; key++) {
		int s = key / ISO_MIG_MAX_PROFILES, j = key % ISO_MIG_MAX_PROFILES;
		const struct iso_mig_profile *p = &m->profiles[j];

		if (j >= m->n_profiles || !iso_mig_fits_at(m, o, p, s))
			continue;
		assert_int_equal(iso_mig_state_after(k, p, s),
		                 (k & ~iso_mig_span(s, p->width)) |
		                     (p->media_engine ? ISO_MIG_STATE_ME : 0));
		/* A placement never adds more than it takes from the potential:
		 * what it strands is never negative. */
		assert_true(t->potential[k] - t->potential[iso_mig_state_after(k, p, s)] >=
		            p->compute);
		iso_mig_take(m, o, p, s);
		check_states(m, t, o, seen, key);
		iso_mig_give(m, o, p, s);
	}
}

static void test_state_tables(void **state)
{
	(void)state;
	static struct iso_mig_state_table t;

	for (int i = 0; iso_gpu_model_at(i); i++) {
		const struct iso_gpu_model *m = iso_gpu_model_at(i);
		struct iso_gpu_occupancy o;
		bool seen[ISO_MIG_STATES] = {false};
		int n_seen = 0, prev = -1;

		iso_mig_state_table_build(m, &t);
		assert_ptr_equal(t.model, m);
		/* Compute slices and max counts never bind before memory does on a
		 * real model, so the 9-bit state decides every fit. */
		assert_true(t.exact);
		iso_gpu_occupancy_init(&o, m);
		assert_int_equal(iso_mig_state_of(&o), iso_mig_state_empty(m));
		check_states(m, &t, &o, seen, -1);
		for (int k = 0; k < ISO_MIG_STATES; k++)
			n_seen += seen[k];
		/* The table's reachable states are exactly those the rules reach. */
		assert_int_equal(t.n_reachable, n_seen);
		for (int r = 0; r < t.n_reachable; r++) {
			assert_true(seen[t.reachable[r]]);
			assert_true(t.reachable[r] > prev);
			prev = t.reachable[r];
		}
		/* 192 free-masks (382 with the media-engine bit) on 8-slice models,
		 * 16 (31) on A30. */
		assert_int_equal(t.n_reachable, m->memory_slices == 8 ? 382 : 31);
	}
}

/* Holes, by number: 1g at 0..6 with 1 and 4 given back leaves 1, 4 and 7
 * free; slice 7 is a hole for everything, 1 and 4 for everything wider
 * than one slice. Slice 7 alone holds nothing; with 6 it holds the
 * double-memory 1g (at 6) and the 1g. */
static void test_state_holes(void **state)
{
	(void)state;
	static struct iso_mig_state_table t;
	const struct iso_gpu_model *m = model("h100-80gb");
	/* profile indexes: 0 1g, 1 1g+me, 2 1g double, 3 2g, 4 3g, 5 4g, 6 7g */
	const int holes[7] = {1, 1, 3, 3, 3, 3, 3};

	iso_mig_state_table_build(m, &t);
	/* Potential: slice 7 holds no compute of its own; 4-7 hold a 3g. */
	assert_int_equal(t.potential[0xff], 7);
	assert_int_equal(t.potential[0x80], 0);
	assert_int_equal(t.potential[0xc0], 1);
	assert_int_equal(t.potential[0xf0], 3);
	assert_int_equal(t.potential[0x0f], 4);
	assert_int_equal(t.potential[0xcf], 5);
	/* What a 3g.40gb strands: at 0 of an empty GPU one slice, at 4 none;
	 * at 0 beside a 2g.20gb at 4 one (5 - 1 - 3); and a 1g.10gb at 6
	 * beside a 4g and a 2g none, though it leaves slice 7 free for good. */
	assert_int_equal(t.potential[0xff] - t.potential[0xf0] - 3, 1);
	assert_int_equal(t.potential[0xff] - t.potential[0x0f] - 3, 0);
	assert_int_equal(t.potential[0xcf] - t.potential[0xc0] - 3, 1);
	assert_int_equal(t.potential[0xc0] - t.potential[0x80] - 1, 0);
	for (int j = 0; j < 7; j++) {
		assert_int_equal(t.unusable[0x92][j], holes[j]);
		assert_int_equal(t.unusable[0x80][j], 1);
		assert_int_equal(t.fits[0x80][j], 0);
		assert_int_equal(t.units[0x80][j], 0);
	}
	assert_int_equal(t.fits[0xc0][0], 0x40);
	assert_int_equal(t.fits[0xc0][2], 0x40);
	for (int j = 3; j < 7; j++)
		assert_int_equal(t.fits[0xc0][j], 0);
	/* The +me bit: one media engine per GPU. */
	assert_int_equal(t.fits[0xc0 | ISO_MIG_STATE_ME][1], 0);
	assert_int_equal(t.fits[0xc0 | ISO_MIG_STATE_ME][0], 0x40);
	/* Units: seven 1g, four double, three 2g, two 3g, one 4g/7g, one +me. */
	const int units[7] = {7, 1, 4, 3, 2, 1, 1};
	for (int j = 0; j < 7; j++)
		assert_int_equal(t.units[0xff][j], units[j]);
	/* A state with a bit of a slice the model does not have is not reachable. */
	iso_mig_state_table_build(model("a30-24gb"), &t);
	assert_false(t.is_reachable[0x1f]);
	assert_true(t.is_reachable[0x0f]);
}

/* A model whose max count or compute slices bind before memory is not
 * exact: the table is then an upper bound that callers confirm. */
static void test_state_table_inexact(void **state)
{
	(void)state;
	static struct iso_mig_state_table t;
	struct iso_gpu_model m = *model("h100-80gb");
	struct iso_gpu_occupancy o;

	m.profiles[0].max_count = 2;
	iso_mig_state_table_build(&m, &t);
	assert_false(t.exact);
	assert_int_equal(t.units[0xff][0], 2);
	iso_gpu_occupancy_init(&o, &m);
	take_at(&m, &o, "1g.10gb", 0);
	take_at(&m, &o, "1g.10gb", 1);
	assert_int_not_equal(t.fits[iso_mig_state_of(&o)][0], 0); /* memory alone says yes */
	assert_int_equal(iso_mig_first_start(&m, &o, &m.profiles[0]), -1); /* the rules say no */

	m = *model("h100-80gb");
	m.compute_slices = 5;
	iso_mig_state_table_build(&m, &t);
	assert_false(t.exact);
}

/* ---- choosing a profile by size ---- */

static void expect_resolve(const char *model_name, double gib, int compute, const char *want)
{
	const struct iso_mig_profile *p = iso_mig_profile_resolve(model(model_name), gib, compute);

	if (!want) {
		if (p)
			fail_msg("%s %g GiB %d compute: got %s, want none", model_name, gib,
			         compute, p->name);
		return;
	}
	if (!p)
		fail_msg("%s %g GiB %d compute: got none, want %s", model_name, gib, compute, want);
	assert_string_equal(p->name, want);
}

static void test_profile_resolve(void **state)
{
	(void)state;
	/* Usable memory, compared exactly: H100-80's 1g.10gb holds 9.75 GiB. */
	expect_resolve("h100-80gb", 0, 0, "1g.10gb");
	expect_resolve("h100-80gb", 9.75, 1, "1g.10gb");
	expect_resolve("h100-80gb", 10, 0, "1g.20gb");
	expect_resolve("h100-80gb", 19.62, 1, "1g.20gb");
	expect_resolve("h100-80gb", 19.62, 2, "2g.20gb");
	expect_resolve("h100-80gb", 20, 0, "3g.40gb");
	expect_resolve("h100-80gb", 0, 3, "3g.40gb");
	expect_resolve("h100-80gb", 39.5, 4, "4g.40gb");
	expect_resolve("h100-80gb", 39.6, 0, "7g.80gb");
	expect_resolve("h100-80gb", 0, 5, "7g.80gb");
	expect_resolve("h100-80gb", 79.26, 0, NULL);
	expect_resolve("h100-80gb", 0, 8, NULL);
	/* The other 8-slice models use their names' figures. */
	expect_resolve("a100-40gb", 5, 0, "1g.5gb");
	expect_resolve("a100-40gb", 6, 0, "1g.10gb");
	expect_resolve("a100-40gb", 10, 2, "2g.10gb");
	expect_resolve("a100-40gb", 10, 3, "3g.20gb");
	expect_resolve("a100-40gb", 20, 4, "4g.20gb");
	expect_resolve("a100-40gb", 21, 0, "7g.40gb");
	expect_resolve("a100-40gb", 41, 0, NULL);
	expect_resolve("a100-80gb", 10, 0, "1g.10gb");
	expect_resolve("h100-94gb", 13, 0, "1g.24gb");
	expect_resolve("h200-141gb", 18, 1, "1g.18gb");
	expect_resolve("h200-141gb", 36, 0, "3g.71gb");
	expect_resolve("b200-180gb", 90, 3, "3g.90gb");
	expect_resolve("b200-180gb", 91, 0, "7g.180gb");
	/* A30: 4 slices; 2g at 7 GiB, 4g for 3 compute slices. */
	expect_resolve("a30-24gb", 6, 1, "1g.6gb");
	expect_resolve("a30-24gb", 7, 0, "2g.12gb");
	expect_resolve("a30-24gb", 0, 3, "4g.24gb");
	expect_resolve("a30-24gb", 25, 0, NULL);
	/* Bad arguments. */
	assert_null(iso_mig_profile_resolve(model("h100-80gb"), -1, 0));
	assert_null(iso_mig_profile_resolve(model("h100-80gb"), 0, -1));
	assert_null(iso_mig_profile_resolve(model("h100-80gb"), NAN, 0));
	assert_null(iso_mig_profile_resolve(model("h100-80gb"), INFINITY, 0));
	assert_null(iso_mig_profile_resolve(NULL, 1, 1));
}

/* Never a "+me" profile while another covers, even a larger one; a "+me"
 * profile only when nothing else does. */
static void test_profile_resolve_media_engine(void **state)
{
	(void)state;
	struct iso_gpu_model m = *model("h100-80gb");

	m.profiles[0].memory_gib = 1; /* the plain 1g no longer covers 5 GiB */
	assert_string_equal(iso_mig_profile_resolve(&m, 5, 1)->name, "1g.20gb");
	m.n_profiles = 2; /* only 1g (1 GiB) and 1g+me (9.75 GiB) */
	assert_string_equal(iso_mig_profile_resolve(&m, 5, 1)->name, "1g.10gb+me");
	assert_string_equal(iso_mig_profile_resolve(&m, 1, 1)->name, "1g.10gb");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model_lookup),
	    cmocka_unit_test(test_tables_8_slices),
	    cmocka_unit_test(test_table_a30),
	    cmocka_unit_test(test_tables_consistent),
	    cmocka_unit_test(test_seven_1g),
	    cmocka_unit_test(test_slice7),
	    cmocka_unit_test(test_allowed_starts),
	    cmocka_unit_test(test_3g_plus_3g),
	    cmocka_unit_test(test_4g_plus_3g),
	    cmocka_unit_test(test_1g_double_mix_unplaceable),
	    cmocka_unit_test(test_creation_order),
	    cmocka_unit_test(test_one_media_engine),
	    cmocka_unit_test(test_max_count),
	    cmocka_unit_test(test_compute_limit),
	    cmocka_unit_test(test_teardown_holes),
	    cmocka_unit_test(test_maximal_layouts),
	    cmocka_unit_test(test_layouts_enumerated),
	    cmocka_unit_test(test_take_give_roundtrip),
	    cmocka_unit_test(test_whole_and_empty),
	    cmocka_unit_test(test_a30_geometry),
	    cmocka_unit_test(test_state_tables),
	    cmocka_unit_test(test_state_holes),
	    cmocka_unit_test(test_state_table_inexact),
	    cmocka_unit_test(test_profile_resolve),
	    cmocka_unit_test(test_profile_resolve_media_engine),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

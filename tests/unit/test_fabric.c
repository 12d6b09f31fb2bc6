/* test_fabric.c: the pure-logic half of the fabric module: the P_Key pool,
 * the intent builder, the verifier (against the sim driver's model of what
 * OpenSM programs, and against hand-edited snapshots), the opafm.xml
 * renderer checked by opa-fm's own config_check, and the two small drivers.
 * Inventories come from YAML strings through the real loader. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isostack/fabric.h"

#define CONFIG_CHECK "/usr/lib/opa-fm/bin/config_check"

/* ---- fixtures ---- */

/* Three nodes: n1 and n2 with 4 VFs each (GUIDs 0x100.. and 0x200..), x1
 * fabric-exclusive (PF 0x30); one shared service (0xa0, 0xa1 on 0x0010). */
#define YAML_HEAD                                                                                  \
	"cluster: t\n"                                                                             \
	"fabric:\n"                                                                                \
	"  type: infiniband\n"                                                                     \
	"  sm_nodes: [sm-1]\n"                                                                     \
	"  pkey_range: [0x0100, 0x01ff]\n"                                                         \
	"  shared_services:\n"                                                                     \
	"    - {name: storage, pkey: 0x0010, guids: [0xa0, 0xa1]}\n"                               \
	"pools:\n"                                                                                 \
	"  - name: p\n"                                                                            \
	"racks:\n"                                                                                 \
	"  - name: r1\n"                                                                           \
	"    pdus: [u1]\n"                                                                         \
	"nodes:\n"

#define NODE(name, cap, guid, vfs)                                                                 \
	"  - {name: " name ", rack: r1, pdu: u1, pool: p, cpus: 4, memory_gib: 16,\n"              \
	"     port: {device: mlx5_0, port: 1, guid: " guid ", pkey_capacity: " cap vfs "}}\n"

#define SMALL_INV(cap)                                                                             \
	YAML_HEAD NODE("n1", cap, "0x10", ", vfs: {count: 4, guid_base: 0x100}")                   \
	    NODE("n2", cap, "0x20", ", vfs: {count: 4, guid_base: 0x200}")                         \
	        NODE("x1", cap, "0x30", "")

static struct iso_inventory *load_inv(const char *yaml)
{
	struct iso_inventory *inv = NULL;
	struct iso_error err = {0};
	if (iso_inventory_load_string("t.yaml", yaml, strlen(yaml), &inv, &err) != 0)
		fail_msg("inventory: %s", err.message);
	return inv;
}

static const struct iso_fabric_tenant two_tenants[] = {
    {.tenant_id = 2, .name = "beta-co.x", .pkey = 0x0102},
    {.tenant_id = 1, .name = "acme", .pkey = 0x0101},
};

/* acme: n1 VF0, n1 VF1, n2 VF0; beta: n1 VF2, n2 VF3. */
static const struct iso_port_assignment two_assign[] = {
    {.node = 0, .tenant_id = 1, .vf = 0, .guid = 0x100},
    {.node = 0, .tenant_id = 1, .vf = 1, .guid = 0x101},
    {.node = 1, .tenant_id = 1, .vf = 0, .guid = 0x200},
    {.node = 0, .tenant_id = 2, .vf = 2, .guid = 0x102},
    {.node = 1, .tenant_id = 2, .vf = 3, .guid = 0x203},
    {.node = 0, .tenant_id = 1, .vf = 0, .guid = 0x100}, /* a repeat: harmless */
};

static void build_two(const struct iso_inventory *inv, struct iso_fabric_intent *in)
{
	struct iso_error err = {0};
	int r = iso_fabric_intent_build(inv, two_tenants, 2, two_assign,
	                                (int)ISO_ARRAY_SIZE(two_assign), in, &err);
	if (r != 0)
		fail_msg("intent: %s", err.message);
	in->generation = 7;
}

static const struct iso_partition *find_part(const struct iso_fabric_intent *in, uint16_t pkey)
{
	for (int i = 0; i < in->n_parts; i++)
		if (in->parts[i].pkey == pkey)
			return &in->parts[i];
	return NULL;
}

static int member_of(const struct iso_partition *p, uint64_t guid)
{
	for (int i = 0; i < p->n_members; i++)
		if (p->members[i].guid == guid)
			return (int)p->members[i].membership;
	return -1;
}

/* ---- P_Key pool ---- */

static void test_pool_range_edges(void **state)
{
	(void)state;
	struct iso_pkey_pool p;
	struct iso_error err = {0};
	uint16_t k;

	assert_int_equal(iso_pkey_pool_init(&p, 0x0100, 0x0102, 1000, NULL), 0);
	assert_int_equal(p.n_free, 3);
	for (uint16_t want = 0x0100; want <= 0x0102; want++) {
		assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), 0);
		assert_int_equal(k, want);
	}
	assert_int_equal(p.n_free, 0);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), -ENOSPC);
	assert_int_equal(err.code, ISO_E_NO_CAPACITY);
	assert_string_equal(err.field, "fabric.pkey_range");
	assert_non_null(strstr(err.message, "[0x0100, 0x0102]"));
	assert_non_null(strstr(err.message, "0 quarantined"));
	iso_pkey_pool_free(&p);

	/* a one-key range */
	assert_int_equal(iso_pkey_pool_init(&p, 0x7ffe, 0x7ffe, 0, NULL), 0);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), 0);
	assert_int_equal(k, 0x7ffe);
	iso_pkey_pool_free(&p);

	/* not bases, or upside down */
	assert_int_equal(iso_pkey_pool_init(&p, 0x0100, 0x8000, 0, NULL), -EINVAL);
	assert_int_equal(iso_pkey_pool_init(&p, 0x0200, 0x0100, 0, NULL), -EINVAL);
	assert_int_equal(iso_pkey_pool_init(&p, 0x0100, 0x0200, -1, NULL), -EINVAL);
}

static void test_pool_reserved(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("8"));
	struct iso_pkey_pool p;
	struct iso_error err = {0};
	uint16_t k;

	/* 0x0000 and 0x7fff are never handed out */
	assert_int_equal(iso_pkey_pool_init(&p, 0x0000, 0x0001, 0, NULL), 0);
	assert_int_equal(p.n_free, 1);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), 0);
	assert_int_equal(k, 0x0001);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), -ENOSPC);
	assert_int_equal(iso_pkey_pool_mark_used(&p, 0x0000), -EEXIST);
	iso_pkey_pool_free(&p);

	assert_int_equal(iso_pkey_pool_init(&p, 0x7ffe, 0x7fff, 0, NULL), 0);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), 0);
	assert_int_equal(k, 0x7ffe);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), -ENOSPC);
	assert_int_equal(iso_pkey_pool_mark_quarantined(&p, 0x7fff, 0), -EEXIST);
	iso_pkey_pool_free(&p);

	/* a service's key (storage: 0x0010) is skipped */
	assert_int_equal(iso_pkey_pool_init(&p, 0x000f, 0x0011, 0, &inv->fabric), 0);
	assert_int_equal(p.n_free, 2);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), 0);
	assert_int_equal(k, 0x000f);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), 0);
	assert_int_equal(k, 0x0011);
	assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), -ENOSPC);
	iso_pkey_pool_free(&p);
	iso_inventory_free(inv);
}

static void test_pool_quarantine(void **state)
{
	(void)state;
	struct iso_pkey_pool p;
	struct iso_error err = {0};
	uint16_t k;

	assert_int_equal(iso_pkey_pool_init(&p, 0x0100, 0x0102, 1000, NULL), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(iso_pkey_pool_take(&p, 0, &k, &err), 0);
	iso_pkey_pool_release(&p, 0x0101, 5000);
	iso_pkey_pool_release(&p, 0x0101, 5500); /* a second release changes nothing */
	assert_int_equal(iso_pkey_pool_take(&p, 5999, &k, &err), -ENOSPC);
	assert_non_null(strstr(err.message, "1 in quarantine"));
	assert_non_null(strstr(err.message, "free in 1 ms"));
	assert_int_equal(iso_pkey_pool_take(&p, 6000, &k, &err), 0);
	assert_int_equal(k, 0x0101);

	/* lowest first once quarantines are over; a fresh key before an old one */
	iso_pkey_pool_release(&p, 0x0102, 10000);
	iso_pkey_pool_release(&p, 0x0100, 10500);
	assert_int_equal(iso_pkey_pool_take(&p, 11000, &k, &err), 0);
	assert_int_equal(k, 0x0102);
	assert_int_equal(iso_pkey_pool_take(&p, 11000, &k, &err), -ENOSPC);
	assert_int_equal(iso_pkey_pool_take(&p, 11500, &k, &err), 0);
	assert_int_equal(k, 0x0100);
	iso_pkey_pool_free(&p);
}

static void test_pool_restore(void **state)
{
	(void)state;
	struct iso_pkey_pool p;
	struct iso_error err = {0};
	uint16_t k;

	assert_int_equal(iso_pkey_pool_init(&p, 0x0100, 0x0103, 100, NULL), 0);
	assert_int_equal(iso_pkey_pool_mark_used(&p, 0x0100), 0);
	assert_int_equal(iso_pkey_pool_mark_used(&p, 0x0100), -EEXIST);
	assert_int_equal(iso_pkey_pool_mark_used(&p, 0x0104), -ERANGE);
	assert_int_equal(iso_pkey_pool_mark_quarantined(&p, 0x0101, 50), 0);
	assert_int_equal(iso_pkey_pool_mark_used(&p, 0x0101), -EEXIST);
	assert_int_equal(iso_pkey_pool_mark_quarantined(&p, 0x00ff, 50), -ERANGE);
	assert_int_equal(p.n_free, 2);
	assert_int_equal(iso_pkey_pool_take(&p, 149, &k, &err), 0);
	assert_int_equal(k, 0x0102);
	assert_int_equal(iso_pkey_pool_take(&p, 150, &k, &err), 0);
	assert_int_equal(k, 0x0101);
	assert_int_equal(p.n_free, 1);
	iso_pkey_pool_free(&p);
	iso_pkey_pool_free(&p); /* twice is harmless */
}

/* ---- intent ---- */

static void test_intent_shape(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("8"));
	struct iso_fabric_intent in = {0};
	const struct iso_fabric_tenant tenants[] = {
	    two_tenants[0], two_tenants[1], {.tenant_id = 3, .name = "idle", .pkey = 0x0103}};

	struct iso_error err = {0};
	assert_int_equal(iso_fabric_intent_build(inv, tenants, 3, two_assign,
	                                         (int)ISO_ARRAY_SIZE(two_assign), &in, &err),
	                 0);
	/* Default, the service, then tenants by key; idle has no ports: no partition */
	assert_int_equal(in.n_parts, 4);
	assert_int_equal(in.parts[0].kind, ISO_PART_DEFAULT);
	assert_string_equal(in.parts[0].name, "Default");
	assert_int_equal(in.parts[0].pkey, 0x7fff);
	assert_true(in.parts[0].ipoib);
	assert_int_equal(in.parts[0].n_members, 0);

	const struct iso_partition *svc = &in.parts[1];
	assert_int_equal(svc->kind, ISO_PART_SERVICE);
	assert_string_equal(svc->name, "svc_storage");
	assert_int_equal(svc->pkey, 0x0010);
	const uint64_t svc_guids[] = {0xa0, 0xa1, 0x100, 0x101, 0x102, 0x200, 0x203};
	assert_int_equal(svc->n_members, 7);
	for (int i = 0; i < 7; i++) {
		assert_true(svc->members[i].guid == svc_guids[i]);
		assert_int_equal(svc->members[i].membership,
		                 i < 2 ? ISO_MEMBER_FULL : ISO_MEMBER_LIMITED);
	}

	const struct iso_partition *a = &in.parts[2], *b = &in.parts[3];
	assert_int_equal(a->kind, ISO_PART_TENANT);
	assert_string_equal(a->name, "t_acme");
	assert_string_equal(a->tenant, "acme");
	assert_int_equal(a->tenant_id, 1);
	assert_int_equal(a->pkey, 0x0101);
	assert_true(a->ipoib);
	assert_false(a->indx0);
	assert_int_equal(a->n_members, 3); /* the repeat is merged */
	assert_true(a->members[0].guid == 0x100 && a->members[1].guid == 0x101 &&
	            a->members[2].guid == 0x200);
	for (int i = 0; i < a->n_members; i++)
		assert_int_equal(a->members[i].membership, ISO_MEMBER_FULL);
	assert_string_equal(b->name, "t_beta_co_x");
	assert_int_equal(b->pkey, 0x0102);
	assert_int_equal(b->n_members, 2);
	assert_true(b->members[0].guid == 0x102 && b->members[1].guid == 0x203);
	iso_fabric_intent_clear(&in);
	assert_int_equal(in.n_parts, 0);
	iso_fabric_intent_clear(&in);
	iso_inventory_free(inv);
}

static void test_intent_names_collide(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("8"));
	struct iso_fabric_intent in = {0};
	struct iso_error err = {0};
	static const char long_name[] =
	    "a23456789012345678901234567890123456789012345678901234567890123"; /* 63 */
	const struct iso_fabric_tenant tenants[] = {
	    {.tenant_id = 1, .name = "a-b", .pkey = 0x0110},
	    {.tenant_id = 2, .name = "a.b", .pkey = 0x0111},
	    {.tenant_id = 3, .name = "a_b", .pkey = 0x0112},
	    {.tenant_id = 4, .name = long_name, .pkey = 0x0113},
	    {.tenant_id = 5, .name = "solo", .pkey = 0x0114},
	};
	const struct iso_port_assignment as[] = {
	    {.node = 0, .tenant_id = 1, .vf = 0, .guid = 0x100},
	    {.node = 0, .tenant_id = 2, .vf = 1, .guid = 0x101},
	    {.node = 0, .tenant_id = 3, .vf = 2, .guid = 0x102},
	    {.node = 0, .tenant_id = 4, .vf = 3, .guid = 0x103},
	    {.node = 1, .tenant_id = 5, .vf = 0, .guid = 0x200},
	};
	assert_int_equal(iso_fabric_intent_build(inv, tenants, 5, as, 5, &in, &err), 0);
	/* three names meet after '-' and '.' become '_': all three carry their key */
	assert_string_equal(find_part(&in, 0x0110)->name, "t_a_b_P0110");
	assert_string_equal(find_part(&in, 0x0111)->name, "t_a_b_P0111");
	assert_string_equal(find_part(&in, 0x0112)->name, "t_a_b_P0112");
	/* too long for 63 characters with the prefix: cut, with the key */
	char want[64];
	snprintf(want, sizeof(want), "t_%.48s_P0113", long_name);
	assert_string_equal(find_part(&in, 0x0113)->name, want);
	assert_string_equal(find_part(&in, 0x0113)->tenant, long_name);
	assert_string_equal(find_part(&in, 0x0114)->name, "t_solo");
	iso_fabric_intent_clear(&in);
	iso_inventory_free(inv);
}

static void expect_refused(const struct iso_inventory *inv, const struct iso_fabric_tenant *t,
                           int nt, const struct iso_port_assignment *as, int na, int code,
                           const char *field, const char *const *needles)
{
	struct iso_fabric_intent in = {.n_parts = -42};
	struct iso_error err = {0};
	int r = iso_fabric_intent_build(inv, t, nt, as, na, &in, &err);
	if (r == 0)
		fail_msg("accepted, expected %s", iso_errcode_name((enum iso_errcode)code));
	assert_int_equal(r, iso_error_errno((enum iso_errcode)code));
	assert_int_equal(err.code, code);
	assert_int_equal(in.n_parts, -42); /* untouched */
	if (strcmp(err.field, field) != 0)
		fail_msg("field '%s', expected '%s' (%s)", err.field, field, err.message);
	for (; *needles; needles++)
		if (!strstr(err.message, *needles))
			fail_msg("message '%s' lacks '%s'", err.message, *needles);
}

static void test_intent_conflict(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("8"));
	const struct iso_port_assignment as[] = {
	    {.node = 0, .tenant_id = 1, .vf = 0, .guid = 0x100},
	    {.node = 0, .tenant_id = 1, .vf = 1, .guid = 0x101},
	    {.node = 0, .tenant_id = 2, .vf = 1, .guid = 0x101},
	};
	expect_refused(inv, two_tenants, 2, as, 3, ISO_E_CONFLICT, "fabric",
	               (const char *const[]){"0x0000000000000101", "acme", "beta-co.x", NULL});

	/* two tenants on one key, a tenant on a service's key */
	const struct iso_fabric_tenant same[] = {{.tenant_id = 1, .name = "acme", .pkey = 0x0105},
	                                         {.tenant_id = 2, .name = "beta", .pkey = 0x0105}};
	const struct iso_port_assignment as2[] = {
	    {.node = 0, .tenant_id = 1, .vf = 0, .guid = 0x100},
	    {.node = 0, .tenant_id = 2, .vf = 1, .guid = 0x101},
	};
	expect_refused(inv, same, 2, as2, 2, ISO_E_CONFLICT, "tenants.pkey",
	               (const char *const[]){"acme", "beta", "0x0105", NULL});
	const struct iso_fabric_tenant svc[] = {{.tenant_id = 1, .name = "acme", .pkey = 0x0010}};
	expect_refused(inv, svc, 1, as2, 1, ISO_E_CONFLICT, "tenants.pkey",
	               (const char *const[]){"storage", "0x0010", NULL});
	const struct iso_fabric_tenant dflt[] = {{.tenant_id = 1, .name = "acme", .pkey = 0x7fff}};
	expect_refused(inv, dflt, 1, as2, 1, ISO_E_INVALID, "tenants.pkey",
	               (const char *const[]){"0x7fff", NULL});
	iso_inventory_free(inv);
}

static void test_intent_capacity(void **state)
{
	(void)state;
	/* Default + storage + the tenant = 3 keys on a 2-entry table */
	struct iso_inventory *inv = load_inv(SMALL_INV("2"));
	const struct iso_port_assignment as[] = {
	    {.node = 1, .tenant_id = 1, .vf = 2, .guid = 0x202},
	};
	expect_refused(inv, two_tenants, 2, as, 1, ISO_E_NO_CAPACITY, "fabric",
	               (const char *const[]){"node n2", "0x0000000000000202", "3 P_Keys",
	                                     "capacity is 2", NULL});
	iso_inventory_free(inv);

	/* exactly full is fine */
	inv = load_inv(SMALL_INV("3"));
	struct iso_fabric_intent in = {0};
	struct iso_error err = {0};
	assert_int_equal(iso_fabric_intent_build(inv, two_tenants, 2, as, 1, &in, &err), 0);
	iso_fabric_intent_clear(&in);
	iso_inventory_free(inv);
}

static void test_intent_pf_rules(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("8"));
	struct iso_fabric_intent in = {0};
	struct iso_error err = {0};

	/* a fabric-exclusive node: its PF is the tenant's port */
	const struct iso_port_assignment pf[] = {
	    {.node = 2, .tenant_id = 1, .vf = -1, .guid = 0x30}};
	assert_int_equal(iso_fabric_intent_build(inv, two_tenants, 2, pf, 1, &in, &err), 0);
	assert_int_equal(member_of(find_part(&in, 0x0101), 0x30), ISO_MEMBER_FULL);
	assert_int_equal(member_of(find_part(&in, 0x0010), 0x30), ISO_MEMBER_LIMITED);
	iso_fabric_intent_clear(&in);

	/* the PF of a node with VFs stays in Default only */
	const struct iso_port_assignment pf2[] = {
	    {.node = 0, .tenant_id = 1, .vf = -1, .guid = 0x10}};
	expect_refused(inv, two_tenants, 2, pf2, 1, ISO_E_INVALID, "assignments[0].vf",
	               (const char *const[]){"node n1", "Default only", NULL});
	/* a VF index the node does not have */
	const struct iso_port_assignment vf[] = {
	    {.node = 0, .tenant_id = 1, .vf = 4, .guid = 0x104}};
	expect_refused(inv, two_tenants, 2, vf, 1, ISO_E_INVALID, "assignments[0].vf",
	               (const char *const[]){"no VF 4", NULL});
	/* a GUID that is not that VF's */
	const struct iso_port_assignment g[] = {
	    {.node = 0, .tenant_id = 1, .vf = 0, .guid = 0x100},
	    {.node = 0, .tenant_id = 1, .vf = 1, .guid = 0x999}};
	expect_refused(inv, two_tenants, 2, g, 2, ISO_E_INVALID, "assignments[1].guid",
	               (const char *const[]){"0x0000000000000999", "0x0000000000000101", NULL});
	/* a VF on a node without VFs; a node that is not there; a tenant without a key */
	const struct iso_port_assignment x[] = {{.node = 2, .tenant_id = 1, .vf = 0, .guid = 0x30}};
	expect_refused(inv, two_tenants, 2, x, 1, ISO_E_INVALID, "assignments[0].vf",
	               (const char *const[]){"node x1", NULL});
	const struct iso_port_assignment n[] = {{.node = 3, .tenant_id = 1, .vf = 0, .guid = 0x30}};
	expect_refused(inv, two_tenants, 2, n, 1, ISO_E_INVALID, "assignments[0].node",
	               (const char *const[]){"node index 3", NULL});
	const struct iso_port_assignment t[] = {
	    {.node = 0, .tenant_id = 9, .vf = 0, .guid = 0x100}};
	expect_refused(inv, two_tenants, 2, t, 1, ISO_E_INVALID, "fabric",
	               (const char *const[]){"tenant id 9", NULL});
	iso_inventory_free(inv);
}

/* ---- verifier, on the sim driver's tables ---- */

struct world {
	struct iso_inventory *inv;
	struct iso_fabric_intent in;
	struct iso_fabric_driver *d;
	struct iso_fabric_snapshot snap;
	struct iso_fabric_report rep;
};

static void world_open(struct world *w, const char *yaml)
{
	struct iso_error err = {0};
	memset(w, 0, sizeof(*w));
	w->inv = load_inv(yaml);
	build_two(w->inv, &w->in);
	if (iso_fabric_sim_driver_new(w->inv, &w->d, &err) != 0)
		fail_msg("sim: %s", err.message);
	if (w->d->ops->apply(w->d, &w->in, &err) != 0)
		fail_msg("apply: %s", err.message);
}

static void world_snapshot(struct world *w)
{
	struct iso_error err = {0};
	iso_fabric_snapshot_clear(&w->snap);
	if (w->d->ops->snapshot(w->d, &w->snap, &err) != 0)
		fail_msg("snapshot: %s", err.message);
}

static void world_verify(struct world *w)
{
	struct iso_error err = {0};
	iso_fabric_report_clear(&w->rep);
	if (iso_fabric_verify(&w->in, &w->snap, &w->rep, &err) != 0)
		fail_msg("verify: %s", err.message);
}

static void world_close(struct world *w)
{
	iso_fabric_report_clear(&w->rep);
	iso_fabric_snapshot_clear(&w->snap);
	iso_fabric_driver_freep(&w->d);
	iso_fabric_intent_clear(&w->in);
	iso_inventory_free(w->inv);
}

static int count_kind(const struct iso_fabric_report *r, enum iso_violation_kind k)
{
	int n = 0;
	for (int i = 0; i < r->n_violations; i++)
		n += r->violations[i].kind == k;
	return n;
}

static const struct iso_violation *find_viol(const struct iso_fabric_report *r,
                                             enum iso_violation_kind k, uint16_t pkey)
{
	for (int i = 0; i < r->n_violations; i++)
		if (r->violations[i].kind == k && r->violations[i].pkey == pkey)
			return &r->violations[i];
	return NULL;
}

static struct iso_port_table *snap_port(struct iso_fabric_snapshot *s, uint64_t guid)
{
	for (int i = 0; i < s->n_ports; i++)
		if (s->ports[i].guid == guid)
			return &s->ports[i];
	fail_msg("port 0x%llx not in the snapshot", (unsigned long long)guid);
	return NULL;
}

static void dump(const struct iso_fabric_report *r)
{
	for (int i = 0; i < r->n_violations; i++)
		print_message("  %s: %s\n", iso_violation_kind_name(r->violations[i].kind),
		              r->violations[i].message);
}

static void test_verify_clean(void **state)
{
	(void)state;
	struct world w;
	struct iso_fabric_status st;

	world_open(&w, SMALL_INV("8"));
	assert_int_equal(w.d->ops->poll(w.d, &st), 0);
	assert_true(st.applied == 7 && st.confirmed == 7);
	assert_false(st.incident);
	world_snapshot(&w);
	/* 3 PFs + 8 VFs + 2 service ports, in GUID order */
	assert_int_equal(w.snap.n_ports, 13);
	for (int i = 1; i < w.snap.n_ports; i++)
		assert_true(w.snap.ports[i - 1].guid < w.snap.ports[i].guid);
	assert_int_equal(snap_port(&w.snap, 0x100)->capacity, 8);
	assert_int_equal(snap_port(&w.snap, 0xa0)->capacity, 128);
	/* acme's VF: Default limited, storage limited, acme full */
	struct iso_port_table *t = snap_port(&w.snap, 0x100);
	assert_int_equal(t->n_pkeys, 3);
	assert_int_equal(t->pkeys[0], 0x7fff);
	assert_int_equal(t->pkeys[1], 0x0010);
	assert_int_equal(t->pkeys[2], 0x8101);
	assert_int_equal(snap_port(&w.snap, 0xa0)->pkeys[1], 0x8010);
	assert_int_equal(snap_port(&w.snap, 0x10)->n_pkeys, 1); /* a PF: Default only */

	world_verify(&w);
	if (!w.rep.ok || w.rep.n_violations) {
		dump(&w.rep);
		fail_msg("a clean fabric is not ok");
	}
	assert_int_equal(w.rep.ports_checked, 13);
	assert_int_equal(w.rep.partitions_checked, 4);

	char *js = iso_fabric_report_json(&w.rep);
	assert_non_null(js);
	json_error_t je;
	json_t *o = json_loads(js, 0, &je);
	assert_non_null(o);
	assert_true(json_is_true(json_object_get(o, "ok")));
	assert_int_equal(json_integer_value(json_object_get(o, "ports_checked")), 13);
	assert_int_equal(json_integer_value(json_object_get(o, "partitions_checked")), 4);
	assert_true(json_is_integer(json_object_get(o, "elapsed_ms")));
	assert_int_equal(json_array_size(json_object_get(o, "violations")), 0);
	assert_true(
	    strncmp(js, "{\"ok\":true,\"ports_checked\":13,\"partitions_checked\":4,", 52) == 0);
	json_decref(o);
	free(js);
	world_close(&w);
}

/* The attack the verifier exists for: beta's key, full, on acme's VF. */
static void test_verify_rogue_cross_tenant(void **state)
{
	(void)state;
	struct world w;

	world_open(&w, SMALL_INV("8"));
	assert_int_equal(iso_fabric_sim_inject(w.d, 0x101, 0x8102), 0);
	world_snapshot(&w);
	world_verify(&w);
	assert_false(w.rep.ok);
	const struct iso_violation *v = find_viol(&w.rep, ISO_VIOL_CROSS_TENANT, 0x0102);
	if (!v) {
		dump(&w.rep);
		fail_msg("no cross_tenant on 0x0102");
	}
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_CROSS_TENANT), 1);
	assert_int_equal(v->n_ports, 2);
	/* ports in GUID order: acme's rogue full entry (0x101) is the first full one */
	assert_true(v->ports[0] == 0x101 && v->ports[1] == 0x102);
	assert_string_equal(v->tenants[0], "acme");
	assert_string_equal(v->tenants[1], "beta-co.x");
	assert_non_null(strstr(v->message, "acme"));
	assert_non_null(strstr(v->message, "beta-co.x"));
	assert_non_null(strstr(v->message, "0x0000000000000101"));
	/* the entry itself is named too */
	const struct iso_violation *u = find_viol(&w.rep, ISO_VIOL_UNKNOWN_FULL, 0x0102);
	assert_non_null(u);
	assert_true(u->ports[0] == 0x101);
	assert_non_null(find_viol(&w.rep, ISO_VIOL_EXTRA, 0x0102));

	char *js = iso_fabric_report_json(&w.rep);
	assert_non_null(strstr(js, "\"ok\":false"));
	assert_non_null(
	    strstr(js, "{\"kind\":\"cross_tenant\",\"pkey\":\"0x0102\",\"ports\":[\"0x"));
	assert_non_null(strstr(js, "\"tenants\":[\""));
	free(js);

	/* the next apply rewrites the tables: the rogue entry is gone */
	struct iso_error err = {0};
	assert_int_equal(w.d->ops->apply(w.d, &w.in, &err), 0);
	world_snapshot(&w);
	world_verify(&w);
	assert_true(w.rep.ok);
	world_close(&w);
}

static void test_verify_limited_in_other_key(void **state)
{
	(void)state;
	struct world w;

	/* beta's VF limited in acme's key: acme's full ports reach it */
	world_open(&w, SMALL_INV("8"));
	assert_int_equal(iso_fabric_sim_inject(w.d, 0x203, 0x0101), 0);
	world_snapshot(&w);
	world_verify(&w);
	const struct iso_violation *v = find_viol(&w.rep, ISO_VIOL_CROSS_TENANT, 0x0101);
	assert_non_null(v);
	assert_string_equal(v->tenants[0], "acme");
	assert_true(v->ports[1] == 0x203);
	assert_string_equal(v->tenants[1], "beta-co.x");
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_UNKNOWN_FULL), 0);
	world_close(&w);
}

static void test_verify_service_and_default(void **state)
{
	(void)state;
	struct world w;

	/* acme's VF full in the storage key: it reaches beta's limited ports */
	world_open(&w, SMALL_INV("8"));
	assert_int_equal(iso_fabric_sim_inject(w.d, 0x200, 0x8010), 0);
	world_snapshot(&w);
	world_verify(&w);
	const struct iso_violation *v = find_viol(&w.rep, ISO_VIOL_CROSS_TENANT, 0x0010);
	if (!v) {
		dump(&w.rep);
		fail_msg("no cross_tenant on the service key");
	}
	assert_true(v->ports[0] == 0x200);
	assert_string_equal(v->tenants[0], "acme");
	assert_string_equal(v->tenants[1], "beta-co.x");
	assert_false(w.rep.ok);

	/* acme's port full in 0x7fff, where every port is */
	struct iso_error err = {0};
	assert_int_equal(w.d->ops->apply(w.d, &w.in, &err), 0);
	world_snapshot(&w);
	snap_port(&w.snap, 0x101)->pkeys[0] = 0xffff;
	world_verify(&w);
	v = find_viol(&w.rep, ISO_VIOL_CROSS_TENANT, 0x7fff);
	assert_non_null(v);
	assert_true(v->ports[0] == 0x101);
	assert_string_equal(v->tenants[0], "acme");
	assert_string_equal(v->tenants[1], "beta-co.x");
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_CROSS_TENANT), 1);

	/* a switch port 0, the SM's port or a free VF full in 0x7fff is fine */
	snap_port(&w.snap, 0x101)->pkeys[0] = 0x7fff;
	snap_port(&w.snap, 0x10)->pkeys[0] = 0xffff; /* a PF nobody is assigned */
	snap_port(&w.snap, 0x10)->is_switch = true;
	snap_port(&w.snap, 0x103)->pkeys[0] = 0xffff;
	world_verify(&w);
	if (!w.rep.ok) {
		dump(&w.rep);
		fail_msg("non-tenant ports full in 0x7fff flagged");
	}

	/* only one tenant on the fabric, full in 0x7fff: still a violation */
	world_close(&w);
	memset(&w, 0, sizeof(w));
	w.inv = load_inv(SMALL_INV("8"));
	const struct iso_port_assignment one[] = {
	    {.node = 0, .tenant_id = 1, .vf = 0, .guid = 0x100}};
	assert_int_equal(iso_fabric_intent_build(w.inv, two_tenants, 2, one, 1, &w.in, &err), 0);
	assert_int_equal(iso_fabric_sim_driver_new(w.inv, &w.d, &err), 0);
	assert_int_equal(w.d->ops->apply(w.d, &w.in, &err), 0);
	world_snapshot(&w);
	world_verify(&w);
	assert_true(w.rep.ok);
	snap_port(&w.snap, 0x100)->pkeys[0] = 0xffff;
	world_verify(&w);
	v = find_viol(&w.rep, ISO_VIOL_CROSS_TENANT, 0x7fff);
	assert_non_null(v);
	assert_string_equal(v->tenants[0], "acme");
	assert_string_equal(v->tenants[1], "");
	assert_int_equal(v->n_ports, 2);
	world_close(&w);
}

static void test_verify_drift(void **state)
{
	(void)state;
	struct world w;

	world_open(&w, SMALL_INV("8"));
	/* a free VF carries beta's key, limited: extra, not a tenant path */
	assert_int_equal(iso_fabric_sim_inject(w.d, 0x201, 0x0102), 0);
	/* a free VF full in a key nobody has: extra only */
	assert_int_equal(iso_fabric_sim_inject(w.d, 0x202, 0x8177), 0);
	world_snapshot(&w);
	/* acme's 0x200 lost its key; 0x102 (beta) vanished from the fabric */
	struct iso_port_table *t = snap_port(&w.snap, 0x200);
	assert_int_equal(t->pkeys[2], 0x8101);
	t->pkeys[2] = 0x0101; /* full became limited */
	t = snap_port(&w.snap, 0x203);
	t->n_pkeys = 2; /* drops 0x8102 */
	int k = 0;
	for (int i = 0; i < w.snap.n_ports; i++)
		if (w.snap.ports[i].guid != 0x102)
			w.snap.ports[k++] = w.snap.ports[i];
		else
			free(w.snap.ports[i].pkeys);
	w.snap.n_ports = k;
	world_verify(&w);
	assert_false(w.rep.ok);
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_CROSS_TENANT), 0);
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_EXTRA), 2);
	const struct iso_violation *v = find_viol(&w.rep, ISO_VIOL_EXTRA, 0x0102);
	assert_true(v && v->ports[0] == 0x201);
	v = find_viol(&w.rep, ISO_VIOL_EXTRA, 0x0177);
	assert_true(v && v->ports[0] == 0x202);
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_MISSING), 2);
	v = find_viol(&w.rep, ISO_VIOL_MISSING, 0x0101);
	assert_true(v && v->ports[0] == 0x200);
	assert_string_equal(v->tenants[0], "acme");
	assert_non_null(strstr(v->message, "limited only"));
	v = find_viol(&w.rep, ISO_VIOL_MISSING, 0x0102);
	assert_true(v && v->ports[0] == 0x203);
	/* 0x102 is in two intended partitions, reported once */
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_UNREACHABLE), 1);
	v = find_viol(&w.rep, ISO_VIOL_UNREACHABLE, 0x0010);
	assert_true(v && v->ports[0] == 0x102);
	assert_string_equal(v->tenants[0], "beta-co.x");
	assert_int_equal(w.rep.ports_checked, 12);
	/* 0x7fff, 0x0010, 0x0101, 0x0102, 0x0177 */
	assert_int_equal(w.rep.partitions_checked, 5);
	world_close(&w);
}

static void test_verify_near_capacity(void **state)
{
	(void)state;
	struct world w;

	/* 3 keys on a 3-entry table: at 100%; PFs hold 1 of 3. The intent
	 * itself needs 4 (n1's PF and VFs share one table: Default, the
	 * service, acme, beta), so the fabric is made to report 3 per port. */
	world_open(&w, SMALL_INV("4"));
	world_snapshot(&w);
	for (int i = 0; i < w.snap.n_ports; i++)
		if (w.snap.ports[i].capacity == 4)
			w.snap.ports[i].capacity = 3;
	world_verify(&w);
	assert_true(w.rep.ok); /* a warning only */
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_NEAR_CAPACITY), 5);
	assert_int_equal(w.rep.n_violations, 5);
	assert_non_null(strstr(w.rep.violations[0].message, "3 of 3"));
	char *js = iso_fabric_report_json(&w.rep);
	assert_non_null(strstr(js, "\"ok\":true"));
	assert_non_null(strstr(js, "near_capacity"));
	free(js);
	world_close(&w);

	/* 3 of 4 is 75%: nothing */
	world_open(&w, SMALL_INV("4"));
	world_snapshot(&w);
	world_verify(&w);
	assert_int_equal(w.rep.n_violations, 0);
	world_close(&w);
}

static void test_verify_bad_intent(void **state)
{
	(void)state;
	struct iso_partition parts[2] = {
	    {.kind = ISO_PART_TENANT, .name = "t_a", .pkey = 0x0101},
	    {.kind = ISO_PART_TENANT, .name = "t_b", .pkey = 0x0101},
	};
	struct iso_fabric_intent in = {.n_parts = 2, .parts = parts};
	struct iso_fabric_snapshot snap = {0};
	struct iso_fabric_report rep = {.n_violations = -1};
	struct iso_error err = {0};
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), -EINVAL);
	assert_string_equal(err.field, "intent");
	assert_non_null(strstr(err.message, "t_a"));
	assert_int_equal(rep.n_violations, -1);
}

/* Per-allocation partitions on one ConnectX-size port: the PF and its 127
 * VFs share one 128-entry P_Key table (docs/reference-fabric.md), so with
 * Default and one shared service 126 allocation partitions fit and the
 * 127th is refused naming the node's port. On the sim fabric the fitting
 * intent verifies clean, each VF in its own allocation's key only; a VF put
 * into a sibling allocation's key is a cross_partition finding. */
static void test_port_table_128(void **state)
{
	(void)state;
	enum { VFS = 127 };
	char yaml[1024];
	snprintf(yaml, sizeof(yaml),
	         "%s  - {name: n0, rack: r1, pdu: u1, pool: p, cpus: 4, memory_gib: 16, "
	         "port: {device: mlx5_0, port: 1, guid: 0x100000, pkey_capacity: 128, "
	         "vfs: {count: %d, guid_base: 0x200000}}}\n",
	         YAML_HEAD, VFS);
	struct iso_inventory *inv = load_inv(yaml);
	struct iso_fabric_tenant t[VFS];
	char ids[VFS][ISO_ID_MAX];
	struct iso_port_assignment as[VFS];
	struct iso_fabric_intent in = {0};
	struct iso_error err = {0};

	assert_int_equal(iso_fabric_port_table_count(inv, 126), 128);
	for (int i = 0; i < VFS; i++) {
		snprintf(ids[i], sizeof(ids[i]), "a-%016x", i + 1);
		t[i] = (struct iso_fabric_tenant){.tenant_id = 1,
		                                  .name = "acme",
		                                  .pkey = (uint16_t)(0x0100 + i),
		                                  .alloc = ids[i]};
		as[i] = (struct iso_port_assignment){
		    .node = 0, .tenant_id = 1, .vf = i, .guid = inv->nodes[0].port.vf_guids[i]};
		iso_strlcpy(as[i].alloc, ids[i], sizeof(as[i].alloc));
	}
	assert_int_equal(iso_fabric_intent_build(inv, t, VFS, as, VFS, &in, &err), -ENOSPC);
	assert_int_equal(err.code, ISO_E_NO_CAPACITY);
	assert_string_equal(err.field, "nodes.n0.port");
	assert_non_null(strstr(err.message, "would hold 129 P_Keys"));
	assert_non_null(strstr(err.message, "holds 128"));

	err = (struct iso_error){0};
	assert_int_equal(iso_fabric_intent_build(inv, t, VFS - 1, as, VFS - 1, &in, &err), 0);
	assert_int_equal(in.n_parts, 2 + VFS - 1);
	const struct iso_partition *p = find_part(&in, 0x0100);
	assert_non_null(p);
	assert_string_equal(p->alloc, ids[0]);
	assert_string_equal(p->tenant, "acme");
	assert_string_equal(p->name, "t_acme_a_0000000000000001");
	assert_int_equal(p->n_members, 1);
	assert_int_equal(p->members[0].guid, inv->nodes[0].port.vf_guids[0]);
	char *js = iso_fabric_intent_json(&in);
	assert_non_null(strstr(js, "\"allocation\":\"a-0000000000000001\""));
	struct iso_fabric_intent back = {0};
	assert_int_equal(iso_fabric_intent_parse_json(js, &back, &err), 0);
	assert_string_equal(find_part(&back, 0x0100)->alloc, ids[0]);
	iso_fabric_intent_clear(&back);
	free(js);

	struct iso_fabric_driver *d = NULL;
	struct iso_fabric_snapshot snap = {0};
	struct iso_fabric_report rep = {0};
	assert_int_equal(iso_fabric_sim_driver_new(inv, &d, &err), 0);
	assert_int_equal(d->ops->apply(d, &in, &err), 0);
	assert_int_equal(d->ops->snapshot(d, &snap, &err), 0);
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), 0);
	assert_true(rep.ok);
	iso_fabric_report_clear(&rep);
	iso_fabric_snapshot_clear(&snap);
	/* VF 0 (allocation 1) full in allocation 2's key */
	assert_int_equal(iso_fabric_sim_inject(d, inv->nodes[0].port.vf_guids[0], 0x8101), 0);
	assert_int_equal(d->ops->snapshot(d, &snap, &err), 0);
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), 0);
	assert_false(rep.ok);
	assert_int_equal(count_kind(&rep, ISO_VIOL_CROSS_TENANT), 0);
	const struct iso_violation *v = find_viol(&rep, ISO_VIOL_CROSS_PARTITION, 0x0101);
	assert_non_null(v);
	assert_int_equal(v->pkey, 0x0101);
	assert_string_equal(iso_violation_kind_name(v->kind), "cross_partition");
	assert_non_null(strstr(v->message, "a-0000000000000001"));
	assert_non_null(strstr(v->message, "a-0000000000000002"));
	assert_string_equal(v->tenants[0], "acme");
	assert_string_equal(v->tenants[1], "acme");
	iso_fabric_report_clear(&rep);
	iso_fabric_snapshot_clear(&snap);
	d->ops->free(d);

	/* one VF in two allocations of one tenant: one port, one partition */
	as[1].guid = as[0].guid;
	as[1].vf = 0;
	assert_int_equal(iso_fabric_intent_build(inv, t, 2, as, 2, &back, &err), -EEXIST);
	assert_int_equal(err.code, ISO_E_CONFLICT);
	assert_non_null(strstr(err.message, "one port, one partition"));
	iso_fabric_intent_clear(&in);
	iso_inventory_free(inv);
}

/* take_pick: the n-th takeable key in key order, over free and
 * quarantine-over keys alike; the same refusal as take when none is left. */
static void test_pool_take_pick(void **state)
{
	(void)state;
	struct iso_pkey_pool p;
	struct iso_error err = {0};
	uint16_t k;

	assert_int_equal(iso_pkey_pool_init(&p, 0x100, 0x103, 1000, NULL), 0);
	assert_int_equal(iso_pkey_pool_take_pick(&p, 0, 2, &k, &err), 0);
	assert_int_equal(k, 0x102);
	assert_int_equal(iso_pkey_pool_take_pick(&p, 0, 5, &k, &err), 0); /* 5 mod 3 */
	assert_int_equal(k, 0x103);
	iso_pkey_pool_release(&p, 0x102, 10);
	assert_int_equal(iso_pkey_pool_take_pick(&p, 20, 1, &k, &err), 0); /* 0x100, 0x101 */
	assert_int_equal(k, 0x101);
	assert_int_equal(iso_pkey_pool_take_pick(&p, 20, 7, &k, &err), 0);
	assert_int_equal(k, 0x100);
	assert_int_equal(iso_pkey_pool_take_pick(&p, 20, 0, &k, &err), -ENOSPC);
	assert_string_equal(err.field, "fabric.pkey_range");
	assert_non_null(strstr(err.message, "quarantine"));
	assert_int_equal(iso_pkey_pool_take_pick(&p, 1010, 3, &k, &err), 0);
	assert_int_equal(k, 0x102);
	iso_pkey_pool_free(&p);
}

/* 10,000 tenant VFs in 1,000 tenants, each with Default, the service key
 * and its tenant key, end to end; then one rogue entry among them. */
static void test_verify_scale(void **state)
{
	(void)state;
	enum { NODES = 100, VFS = 100, TENANTS = 1000 };
	size_t cap = 64 + (size_t)NODES * 256;
	char *yaml = malloc(cap + 1024);
	int n = snprintf(yaml, cap, "%s", YAML_HEAD);
	for (int i = 0; i < NODES; i++)
		n +=
		    snprintf(yaml + n, cap - (size_t)n,
		             "  - {name: n%d, rack: r1, pdu: u1, pool: p, cpus: 4, memory_gib: 16, "
		             "port: {device: mlx5_0, port: 1, guid: 0x%x, pkey_capacity: 128, "
		             "vfs: {count: %d, guid_base: 0x%x}}}\n",
		             i, 0x100000 + i, VFS, 0x1000000 + i * 0x1000);
	struct iso_inventory *inv = load_inv(yaml);
	free(yaml);

	struct iso_fabric_tenant *t = calloc(TENANTS, sizeof(*t));
	char(*names)[16] = calloc(TENANTS, sizeof(*names));
	struct iso_port_assignment *as = calloc(NODES * VFS, sizeof(*as));
	for (int i = 0; i < TENANTS; i++) {
		snprintf(names[i], sizeof(names[i]), "t%d", i);
		t[i] = (struct iso_fabric_tenant){
		    .tenant_id = i + 1, .name = names[i], .pkey = (uint16_t)(0x0100 + i)};
	}
	for (int i = 0; i < NODES * VFS; i++)
		as[i] = (struct iso_port_assignment){
		    .node = i / VFS,
		    .tenant_id = i % TENANTS + 1,
		    .vf = i % VFS,
		    .guid = inv->nodes[i / VFS].port.vf_guids[i % VFS]};
	struct iso_fabric_intent in = {0};
	struct iso_fabric_driver *d = NULL;
	struct iso_fabric_snapshot snap = {0};
	struct iso_fabric_report rep = {0};
	struct iso_error err = {0};
	uint64_t t0 = iso_mono_ns();
	assert_int_equal(iso_fabric_intent_build(inv, t, TENANTS, as, NODES * VFS, &in, &err), 0);
	assert_int_equal(in.n_parts, 2 + TENANTS);
	assert_int_equal(iso_fabric_sim_driver_new(inv, &d, &err), 0);
	assert_int_equal(d->ops->apply(d, &in, &err), 0);
	assert_int_equal(d->ops->snapshot(d, &snap, &err), 0);
	assert_int_equal(snap.n_ports, NODES * (VFS + 1) + 2);
	uint64_t t1 = iso_mono_ns();
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), 0);
	uint64_t t2 = iso_mono_ns();
	assert_true(rep.ok);
	assert_int_equal(rep.n_violations, 0);
	assert_int_equal(rep.partitions_checked, 2 + TENANTS);
	print_message(
	    "  scale: %d ports, %d partitions: build+apply+snapshot %.1f ms, verify %.1f ms "
	    "(report %lld ms)\n",
	    snap.n_ports, in.n_parts, (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
	    (long long)rep.elapsed_ms);
	iso_fabric_report_clear(&rep);
	iso_fabric_snapshot_clear(&snap);

	/* tenant t5's key, full, on t6's VF: exactly one cross-tenant pair */
	assert_int_equal(iso_fabric_sim_inject(d, as[6].guid, (uint16_t)(0x8000 | (0x0100 + 5))),
	                 0);
	assert_int_equal(d->ops->snapshot(d, &snap, &err), 0);
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), 0);
	assert_false(rep.ok);
	assert_int_equal(count_kind(&rep, ISO_VIOL_CROSS_TENANT), 1);
	const struct iso_violation *v = find_viol(&rep, ISO_VIOL_CROSS_TENANT, 0x0105);
	assert_non_null(v);
	assert_true((strcmp(v->tenants[0], "t5") == 0 && strcmp(v->tenants[1], "t6") == 0) ||
	            (strcmp(v->tenants[0], "t6") == 0 && strcmp(v->tenants[1], "t5") == 0));

	iso_fabric_report_clear(&rep);
	iso_fabric_snapshot_clear(&snap);
	iso_fabric_driver_freep(&d);
	iso_fabric_intent_clear(&in);
	free(as);
	free(names);
	free(t);
	iso_inventory_free(inv);
}

/* Flattened fabric (OpenSM fell back to `ALL=full` on 0x7fff): every tenant
 * is exposed, each named once, without a pair per two tenants. */
static void test_verify_flattened(void **state)
{
	(void)state;
	struct world w;
	world_open(&w, SMALL_INV("8"));
	world_snapshot(&w);
	for (int i = 0; i < w.snap.n_ports; i++) {
		w.snap.ports[i].pkeys[0] = 0xffff;
		w.snap.ports[i].n_pkeys = 1;
	}
	world_verify(&w);
	/* two tenants: one pair */
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_CROSS_TENANT), 1);
	/* 7 service members (2 full, 5 limited) and 5 tenant members lost their keys */
	assert_int_equal(count_kind(&w.rep, ISO_VIOL_MISSING), 12);
	assert_false(w.rep.ok);
	world_close(&w);
}

/* ---- sim driver ---- */

static void test_sim_capacity_incident(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("3"));
	struct iso_fabric_driver *d = NULL;
	struct iso_error err = {0};
	struct iso_fabric_status st;

	/* the builder refuses this; a driver must still model what the SM does */
	struct iso_fabric_member m = {0x100, ISO_MEMBER_FULL, false};
	struct iso_partition parts[] = {
	    {.kind = ISO_PART_DEFAULT, .name = "Default", .pkey = 0x7fff},
	    {.kind = ISO_PART_TENANT, .name = "t_a", .pkey = 0x0101, .n_members = 1, .members = &m},
	    {.kind = ISO_PART_TENANT, .name = "t_b", .pkey = 0x0102, .n_members = 1, .members = &m},
	    {.kind = ISO_PART_TENANT, .name = "t_c", .pkey = 0x0103, .n_members = 1, .members = &m},
	};
	struct iso_fabric_intent in = {.generation = 3, .n_parts = 4, .parts = parts};
	assert_int_equal(iso_fabric_sim_driver_new(inv, &d, &err), 0);
	assert_int_equal(d->ops->apply(d, &in, &err), 0);
	assert_int_equal(d->ops->poll(d, &st), 0);
	assert_true(st.incident);
	assert_true(st.applied == 3 && st.confirmed == 3);
	assert_non_null(strstr(st.incident_msg, "ERR 0512"));
	assert_non_null(strstr(st.incident_msg, "0x0000000000000100"));
	assert_non_null(strstr(st.incident_msg, "0x0103"));

	struct iso_fabric_snapshot snap = {0};
	struct iso_fabric_report rep = {0};
	assert_int_equal(d->ops->snapshot(d, &snap, &err), 0);
	struct iso_port_table *t = snap_port(&snap, 0x100);
	assert_int_equal(t->n_pkeys, 3);
	assert_int_equal(t->pkeys[2], 0x8102);
	/* a full table takes no rogue entry either */
	assert_int_equal(iso_fabric_sim_inject(d, 0x100, 0x8105), -ENOSPC);
	assert_int_equal(iso_fabric_sim_inject(d, 0x999, 0x8105), -ENOENT);
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), 0);
	const struct iso_violation *v = find_viol(&rep, ISO_VIOL_MISSING, 0x0103);
	assert_true(v && v->ports[0] == 0x100);
	assert_non_null(find_viol(&rep, ISO_VIOL_NEAR_CAPACITY, 0));
	iso_fabric_report_clear(&rep);
	iso_fabric_snapshot_clear(&snap);

	/* a later intent that fits clears the incident */
	in.n_parts = 2;
	in.generation = 4;
	assert_int_equal(d->ops->apply(d, &in, &err), 0);
	assert_int_equal(d->ops->poll(d, &st), 0);
	assert_false(st.incident);
	assert_true(st.confirmed == 4);
	iso_fabric_driver_freep(&d);
	iso_inventory_free(inv);
}

/* An OpenStack port (an external assignment, docs/openstack.md): its GUID is
 * a VF's that Neutron's agent wrote, on the fabric though not in the
 * inventory. The sim has that port from the intent on; the verifier holds
 * it against the intent like any port, and sees it put into another
 * tenant's key. A GUID the intent does not mark external stays unknown to
 * the fabric (OpenSM skips it): unreachable. */
static void test_sim_external_port(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("8"));
	struct iso_fabric_intent in = {0};
	struct iso_fabric_driver *d = NULL;
	struct iso_fabric_snapshot snap = {0};
	struct iso_fabric_report rep = {0};
	struct iso_error err = {0};
	const uint64_t ext = 0xfa163e0000123456ull, ext2 = 0xfa163e0000000077ull;
	struct iso_port_assignment assign[ISO_ARRAY_SIZE(two_assign) + 2];

	memcpy(assign, two_assign, sizeof(two_assign));
	assign[ISO_ARRAY_SIZE(two_assign)] = (struct iso_port_assignment){
	    .node = 0, .tenant_id = 1, .vf = ISO_VF_EXTERNAL, .guid = ext};
	assign[ISO_ARRAY_SIZE(two_assign) + 1] = (struct iso_port_assignment){
	    .node = 1, .tenant_id = 2, .vf = ISO_VF_EXTERNAL, .guid = ext2};
	assert_int_equal(iso_fabric_intent_build(inv, two_tenants, 2, assign,
	                                         (int)ISO_ARRAY_SIZE(assign), &in, &err),
	                 0);
	const struct iso_partition *acme = find_part(&in, 0x0101);
	for (int i = 0; i < acme->n_members; i++)
		assert_int_equal(acme->members[i].external, acme->members[i].guid == ext);
	assert_int_equal(iso_fabric_sim_driver_new(inv, &d, &err), 0);
	assert_int_equal(d->ops->apply(d, &in, &err), 0);
	assert_int_equal(d->ops->apply(d, &in, &err), 0); /* again: no second port */
	assert_int_equal(d->ops->snapshot(d, &snap, &err), 0);
	assert_int_equal(snap.n_ports, 13 + 2);
	struct iso_port_table *pt = snap_port(&snap, ext);
	assert_int_equal(pt->n_pkeys, 3); /* Default, storage (limited), acme (full) */
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), 0);
	if (!rep.ok) {
		dump(&rep);
		fail_msg("an external port as the intent says: ok");
	}
	/* hostile: the port's GUID put into beta's key, full */
	assert_int_equal(iso_fabric_sim_inject(d, ext, 0x8102), 0);
	iso_fabric_snapshot_clear(&snap);
	iso_fabric_report_clear(&rep);
	assert_int_equal(d->ops->snapshot(d, &snap, &err), 0);
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), 0);
	assert_false(rep.ok);
	const struct iso_violation *v = find_viol(&rep, ISO_VIOL_CROSS_TENANT, 0x0102);
	assert_non_null(v);
	assert_true(v->ports[0] == ext || v->ports[1] == ext);
	assert_non_null(strstr(v->message, "acme"));
	assert_non_null(strstr(v->message, "beta-co.x"));
	/* a member GUID not marked external: OpenSM skips it, unreachable */
	iso_fabric_report_clear(&rep);
	iso_fabric_snapshot_clear(&snap);
	iso_fabric_intent_clear(&in);
	assign[ISO_ARRAY_SIZE(two_assign) + 1].guid = 0xfa163e00000000aaull;
	assert_int_equal(iso_fabric_intent_build(inv, two_tenants, 2, assign,
	                                         (int)ISO_ARRAY_SIZE(assign), &in, &err),
	                 0);
	for (int p = 0; p < in.n_parts; p++)
		for (int m = 0; m < in.parts[p].n_members; m++)
			if (in.parts[p].members[m].guid == 0xfa163e00000000aaull)
				in.parts[p].members[m].external = false;
	assert_int_equal(d->ops->apply(d, &in, &err), 0);
	assert_int_equal(d->ops->snapshot(d, &snap, &err), 0);
	assert_int_equal(snap.n_ports, 13 + 2); /* kept: ext, ext2 (Default only) */
	assert_int_equal(snap_port(&snap, ext2)->n_pkeys, 1);
	assert_int_equal(iso_fabric_verify(&in, &snap, &rep, &err), 0);
	assert_false(rep.ok);
	v = find_viol(&rep, ISO_VIOL_UNREACHABLE, 0x0010);
	if (!v)
		v = find_viol(&rep, ISO_VIOL_UNREACHABLE, 0x0102);
	assert_non_null(v);
	assert_true(v->ports[0] == 0xfa163e00000000aaull);
	iso_fabric_report_clear(&rep);
	iso_fabric_snapshot_clear(&snap);
	iso_fabric_driver_freep(&d);
	iso_fabric_intent_clear(&in);
	iso_inventory_free(inv);
}

static void test_sim_inject_wrong_driver(void **state)
{
	(void)state;
	struct iso_fabric_driver_ops ops = {.name = "other"};
	struct iso_fabric_driver other = {.ops = &ops};
	assert_int_equal(iso_fabric_sim_inject(&other, 0x100, 0x8101), -EINVAL);
	assert_int_equal(iso_fabric_sim_inject(NULL, 0x100, 0x8101), -EINVAL);
}

/* ---- Omni-Path ---- */

/* Runs config_check -s on `xml`; its exit status, or -1 when not installed. */
static int config_check(const char *xml)
{
	if (access(CONFIG_CHECK, X_OK) != 0)
		return -1;
	char path[] = "/tmp/isostack-opafm-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t len = strlen(xml);
	assert_int_equal(write(fd, xml, len), (ssize_t)len);
	close(fd);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), CONFIG_CHECK " -s -c %s >/dev/null 2>&1", path);
	int st = system(cmd);
	unlink(path);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void expect_valid(const char *xml)
{
	int rc = config_check(xml);
	if (rc == -1)
		skip();
	if (rc != 0)
		fail_msg("config_check -s: exit %d on:\n%s", rc, xml);
}

static void test_opafm_render(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("8"));
	struct iso_fabric_intent in = {0};
	struct iso_error err = {0};
	char *xml = NULL;

	/* an empty intent: Default only */
	struct iso_partition dflt = {.kind = ISO_PART_DEFAULT, .name = "Default", .pkey = 0x7fff};
	struct iso_fabric_intent empty = {.n_parts = 1, .parts = &dflt};
	assert_int_equal(iso_opafm_render(&empty, &xml, &err), 0);
	assert_non_null(strstr(xml, "<PKey>0x7fff</PKey>"));
	assert_null(strstr(xml, "<Member>All</Member>"));
	expect_valid(xml);
	free(xml);

	/* 2 tenants + 1 service */
	build_two(inv, &in);
	assert_int_equal(iso_opafm_render(&in, &xml, &err), 0);
	assert_non_null(strstr(xml, "intent generation 7"));
	assert_non_null(strstr(xml, "<Name>t_acme</Name>\n"
	                            "      <PortGUID>0x0000000000000100</PortGUID>\n"
	                            "      <PortGUID>0x0000000000000101</PortGUID>\n"
	                            "      <PortGUID>0x0000000000000200</PortGUID>\n"
	                            "    </DeviceGroup>"));
	assert_non_null(strstr(xml, "<Name>svc_storage</Name>\n"
	                            "      <PortGUID>0x00000000000000a0</PortGUID>\n"
	                            "      <PortGUID>0x00000000000000a1</PortGUID>\n"
	                            "    </DeviceGroup>"));
	assert_non_null(strstr(xml, "<PKey>0x0010</PKey>\n"
	                            "      <Security>1</Security>\n"
	                            "      <Member>svc_storage</Member>\n"
	                            "      <LimitedMember>t_acme</LimitedMember>\n"
	                            "      <LimitedMember>t_beta_co_x</LimitedMember>\n"));
	assert_non_null(strstr(xml, "<PKey>0x0102</PKey>\n"
	                            "      <Security>1</Security>\n"
	                            "      <Member>t_beta_co_x</Member>\n"
	                            "      <Application>AllOthers</Application>"));
	expect_valid(xml);

	/* the check can fail: a VF naming a group that does not exist */
	char *bad = strdup(xml);
	char *at = strstr(bad, "<Member>t_acme</Member>");
	assert_non_null(at);
	memcpy(at + strlen("<Member>"), "t_zzzz", 6);
	int rc = config_check(bad);
	if (rc >= 0)
		assert_int_not_equal(rc, 0);
	free(bad);
	free(xml);
	iso_fabric_intent_clear(&in);
	iso_inventory_free(inv);
}

static void test_opafm_render_50(void **state)
{
	(void)state;
	enum { N = 50 };
	struct iso_partition parts[N + 2];
	struct iso_fabric_member mem[N][2];
	parts[0] =
	    (struct iso_partition){.kind = ISO_PART_DEFAULT, .name = "Default", .pkey = 0x7fff};
	struct iso_fabric_member svc = {0xabc, ISO_MEMBER_FULL, false};
	parts[1] = (struct iso_partition){.kind = ISO_PART_SERVICE,
	                                  .name = "svc_login",
	                                  .pkey = 0x0020,
	                                  .n_members = 1,
	                                  .members = &svc};
	for (int i = 0; i < N; i++) {
		mem[i][0] =
		    (struct iso_fabric_member){0x1000 + 2 * (uint64_t)i, ISO_MEMBER_FULL, false};
		mem[i][1] =
		    (struct iso_fabric_member){0x1001 + 2 * (uint64_t)i, ISO_MEMBER_FULL, false};
		parts[i + 2] = (struct iso_partition){.kind = ISO_PART_TENANT,
		                                      .pkey = (uint16_t)(0x0200 + i),
		                                      .n_members = 2,
		                                      .members = mem[i]};
		snprintf(parts[i + 2].name, sizeof(parts[i + 2].name), "t_tenant_%02d", i);
	}
	struct iso_fabric_intent in = {.n_parts = N + 2, .parts = parts};
	struct iso_error err = {0};
	char *xml = NULL;
	assert_int_equal(iso_opafm_render(&in, &xml, &err), 0);
	int vfs = 0;
	for (const char *p = xml; (p = strstr(p, "<VirtualFabric>")); p++)
		vfs++;
	assert_int_equal(vfs, N + 2); /* Admin, the service, 50 tenants */
	expect_valid(xml);
	free(xml);

	/* refusals config_check would not make */
	parts[3].pkey = parts[2].pkey;
	xml = NULL;
	assert_int_equal(iso_opafm_render(&in, &xml, &err), -EINVAL);
	assert_null(xml);
	assert_non_null(strstr(err.message, "repeats P_Key 0x0200"));
	assert_non_null(strstr(err.message, "t_tenant_01"));
	parts[3].pkey = 0x0201;
	iso_strlcpy(parts[4].name, "t_<x>", sizeof(parts[4].name));
	assert_int_equal(iso_opafm_render(&in, &xml, &err), -EINVAL);
	assert_non_null(strstr(err.message, "t_<x>"));
	iso_strlcpy(parts[4].name, "t_tenant_00", sizeof(parts[4].name));
	assert_int_equal(iso_opafm_render(&in, &xml, &err), -EINVAL);
	assert_non_null(strstr(err.message, "two partitions are named 't_tenant_00'"));
	iso_strlcpy(parts[4].name, "Admin", sizeof(parts[4].name));
	assert_int_equal(iso_opafm_render(&in, &xml, &err), -EINVAL);
	iso_strlcpy(parts[4].name, "t_tenant_02", sizeof(parts[4].name));
	parts[5].pkey = 0x7fff;
	assert_int_equal(iso_opafm_render(&in, &xml, &err), -EINVAL);
	assert_non_null(strstr(err.message, "0x0001-0x7ffe"));
	parts[5].pkey = 0x0203;
	assert_int_equal(iso_opafm_render(&in, &xml, &err), 0);
	free(xml);
}

static void test_opafm_driver(void **state)
{
	(void)state;
	struct iso_inventory *inv = load_inv(SMALL_INV("8"));
	struct iso_fabric_intent in = {0};
	struct iso_fabric_driver *d = NULL;
	struct iso_error err = {0};
	struct iso_fabric_status st;
	char dir[] = "/tmp/isostack-opafmd-XXXXXX";

	assert_int_equal(iso_fabric_opafm_driver_new(inv, &d, &err), -EINVAL);
	assert_string_equal(err.field, "fabric.opafm_file");
	assert_non_null(mkdtemp(dir));
	snprintf(inv->fabric.opafm_file, sizeof(inv->fabric.opafm_file), "%s/opafm.xml", dir);
	assert_int_equal(iso_fabric_opafm_driver_new(inv, &d, &err), 0);
	assert_string_equal(d->ops->name, "opafm");
	build_two(inv, &in);
	assert_int_equal(d->ops->apply(d, &in, &err), 0);
	assert_int_equal(d->ops->poll(d, &st), 0);
	assert_true(st.applied == 7 && st.confirmed == 7);

	char *want = NULL;
	assert_int_equal(iso_opafm_render(&in, &want, &err), 0);
	FILE *f = fopen(inv->fabric.opafm_file, "r");
	assert_non_null(f);
	char *got = calloc(1, strlen(want) + 2);
	size_t n = fread(got, 1, strlen(want) + 1, f);
	fclose(f);
	assert_int_equal(n, strlen(want));
	assert_string_equal(got, want);
	struct stat sb;
	assert_int_equal(stat(inv->fabric.opafm_file, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0644);

	/* an intent opafm cannot carry is refused and changes nothing */
	in.parts[2].pkey = in.parts[3].pkey;
	in.generation = 8;
	assert_int_equal(d->ops->apply(d, &in, &err), -EINVAL);
	assert_int_equal(d->ops->poll(d, &st), 0);
	assert_true(st.confirmed == 7);

	struct iso_fabric_snapshot snap = {0};
	assert_int_equal(d->ops->snapshot(d, &snap, &err), -EOPNOTSUPP);
	assert_int_equal(err.code, ISO_E_UNAVAILABLE);
	assert_int_equal(snap.n_ports, 0);

	unlink(inv->fabric.opafm_file);
	rmdir(dir);
	free(got);
	free(want);
	iso_fabric_driver_freep(&d);
	iso_fabric_intent_clear(&in);
	iso_inventory_free(inv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pool_range_edges),
	    cmocka_unit_test(test_pool_reserved),
	    cmocka_unit_test(test_pool_quarantine),
	    cmocka_unit_test(test_pool_restore),
	    cmocka_unit_test(test_intent_shape),
	    cmocka_unit_test(test_intent_names_collide),
	    cmocka_unit_test(test_intent_conflict),
	    cmocka_unit_test(test_intent_capacity),
	    cmocka_unit_test(test_intent_pf_rules),
	    cmocka_unit_test(test_verify_clean),
	    cmocka_unit_test(test_verify_rogue_cross_tenant),
	    cmocka_unit_test(test_verify_limited_in_other_key),
	    cmocka_unit_test(test_verify_service_and_default),
	    cmocka_unit_test(test_verify_drift),
	    cmocka_unit_test(test_verify_near_capacity),
	    cmocka_unit_test(test_port_table_128),
	    cmocka_unit_test(test_pool_take_pick),
	    cmocka_unit_test(test_verify_bad_intent),
	    cmocka_unit_test(test_verify_flattened),
	    cmocka_unit_test(test_verify_scale),
	    cmocka_unit_test(test_sim_capacity_incident),
	    cmocka_unit_test(test_sim_inject_wrong_driver),
	    cmocka_unit_test(test_sim_external_port),
	    cmocka_unit_test(test_opafm_render),
	    cmocka_unit_test(test_opafm_render_50),
	    cmocka_unit_test(test_opafm_driver),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

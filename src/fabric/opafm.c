/* opafm.c: the Omni-Path form of an intent, an opafm.xml for the fabric
 * manager. One DeviceGroup per tenant and service (their port GUIDs), one
 * VirtualFabric each with Security on (limited members cannot talk to each
 * other), and the Admin VF on 0x7fff that the FM requires, where every port
 * is limited and only management ports are full. There is deliberately no
 * catch-all VF with `All` as a full member (the shipped sample's "Default"
 * on 0x0001): that VF alone would join every tenant. The output is checked
 * by the tests with opa-fm's own `config_check -s`; the facts are in
 * docs/reference-fabric.md. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "isostack/fabric.h"

/* XML-safe by construction: the intent's names are sanitised, and a name
 * that is not is refused rather than escaped, so the FM sees what the
 * controller logs. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_'))
			return false;
	}
	/* the fixed names this file defines itself */
	static const char *const builtin[] = {
	    "All", "AllMgmtAllowed", "AllSWE0s", "Admin", "SA", "PA", "PM", "AllOthers"};
	for (size_t i = 0; i < ISO_ARRAY_SIZE(builtin); i++)
		if (strcmp(s, builtin[i]) == 0)
			return false;
	return true;
}

static int cmp_name_idx(const void *a, const void *b, void *ctx)
{
	const struct iso_partition *parts = ctx;
	return strcmp(parts[*(const int *)a].name, parts[*(const int *)b].name);
}

/* config_check accepts two VFs on one PKey and refuses only keys outside
 * 0x0001-0x7fff; isolation needs more, so it is checked here. */
static int check_intent(const struct iso_fabric_intent *in, struct iso_error *err)
{
	_cleanup_free_ uint8_t *seen = calloc(ISO_PKEY_BASE_MASK + 1, 1);
	_cleanup_free_ int *order = malloc(sizeof(int) * (size_t)(in->n_parts + 1));
	if (!seen || !order)
		return -ENOMEM;
	int n = 0;
	for (int i = 0; i < in->n_parts; i++) {
		const struct iso_partition *p = &in->parts[i];
		if (p->kind == ISO_PART_DEFAULT) {
			if (p->pkey != ISO_PKEY_DEFAULT)
				return iso_error_set(err, ISO_E_INVALID, "intent",
				                     "the Default partition has P_Key 0x%04x, not "
				                     "0x7fff",
				                     p->pkey);
			continue;
		}
		if (!name_ok(p->name))
			return iso_error_set(err, ISO_E_INVALID, "intent",
			                     "partition name '%s' (0x%04x) is not a valid opafm "
			                     "name (1-63 of A-Z a-z 0-9 _, not a built-in one)",
			                     p->name, p->pkey);
		if (p->pkey == 0 || p->pkey >= ISO_PKEY_DEFAULT)
			return iso_error_set(err, ISO_E_INVALID, "intent",
			                     "partition '%s' has P_Key 0x%04x: a vFabric key is "
			                     "0x0001-0x7ffe",
			                     p->name, p->pkey);
		if (seen[p->pkey])
			return iso_error_set(err, ISO_E_INVALID, "intent",
			                     "partition '%s' repeats P_Key 0x%04x: two vFabrics on "
			                     "one key are one partition",
			                     p->name, p->pkey);
		seen[p->pkey] = 1;
		for (int m = 0; p->kind == ISO_PART_TENANT && m < p->n_members; m++)
			if (p->members[m].membership != ISO_MEMBER_FULL)
				return iso_error_set(
				    err, ISO_E_INVALID, "intent",
				    "tenant partition '%s' has a limited member "
				    "0x%016llx; opafm rendering takes full members "
				    "only",
				    p->name, (unsigned long long)p->members[m].guid);
		order[n++] = i;
	}
	qsort_r(order, (size_t)n, sizeof(*order), cmp_name_idx, (void *)in->parts);
	for (int i = 1; i < n; i++)
		if (strcmp(in->parts[order[i]].name, in->parts[order[i - 1]].name) == 0)
			return iso_error_set(err, ISO_E_INVALID, "intent",
			                     "two partitions are named '%s'",
			                     in->parts[order[i]].name);
	return 0;
}

static const char head[] =
    "<Config>\n"
    "<Common>\n"
    "  <Applications>\n"
    "    <Application><Name>SA</Name><Select>SA</Select></Application>\n"
    "    <Application><Name>PA</Name><ServiceID>0x1100d03c34845555</ServiceID></Application>\n"
    "    <Application><Name>PM</Name><Select>PM</Select></Application>\n"
    "    <Application>\n"
    "      <Name>AllOthers</Name>\n"
    "      <Select>UnmatchedServiceID</Select>\n"
    "      <Select>UnmatchedMGID</Select>\n"
    "    </Application>\n"
    "  </Applications>\n"
    "  <DeviceGroups>\n"
    "    <DeviceGroup><Name>All</Name><Select>All</Select></DeviceGroup>\n"
    "    <DeviceGroup><Name>AllMgmtAllowed</Name><Select>AllMgmtAllowed</Select></DeviceGroup>\n"
    "    <DeviceGroup><Name>AllSWE0s</Name><Select>SWE0</Select></DeviceGroup>\n";

/* The FM requires an Admin VF on 0x7fff holding SA, PA and PM with `All` or
 * `AllMgmtAllowed` as a member: management ports full, everyone else
 * limited, so no two end ports talk through it. */
static const char admin_vf[] = "    <VirtualFabric>\n"
                               "      <Name>Admin</Name>\n"
                               "      <Enable>1</Enable>\n"
                               "      <PKey>0x7fff</PKey>\n"
                               "      <Security>1</Security>\n"
                               "      <Member>AllMgmtAllowed</Member>\n"
                               "      <Member>AllSWE0s</Member>\n"
                               "      <LimitedMember>All</LimitedMember>\n"
                               "      <Application>SA</Application>\n"
                               "      <Application>PA</Application>\n"
                               "      <Application>PM</Application>\n"
                               "    </VirtualFabric>\n";

static const char tail[] = "  </VirtualFabrics>\n"
                           "  <Shared/>\n"
                           "  <Sm/>\n"
                           "  <Fe/>\n"
                           "  <Pm/>\n"
                           "</Common>\n"
                           "<Fm>\n"
                           "  <Shared>\n"
                           "    <Start>1</Start>\n"
                           "    <Name>fm0</Name>\n"
                           "  </Shared>\n"
                           "  <Sm/>\n"
                           "  <Fe/>\n"
                           "  <Pm/>\n"
                           "</Fm>\n"
                           "</Config>\n";

static void render_group(FILE *f, const struct iso_partition *p)
{
	fprintf(f, "    <DeviceGroup>\n      <Name>%s</Name>\n", p->name);
	for (int m = 0; m < p->n_members; m++)
		if (p->members[m].membership == ISO_MEMBER_FULL)
			fprintf(f, "      <PortGUID>0x%016llx</PortGUID>\n",
			        (unsigned long long)p->members[m].guid);
	fprintf(f, "    </DeviceGroup>\n");
}

static void render_vf(FILE *f, const struct iso_fabric_intent *in, const struct iso_partition *p)
{
	fprintf(f,
	        "    <VirtualFabric>\n"
	        "      <Name>%s</Name>\n"
	        "      <Enable>1</Enable>\n"
	        "      <PKey>0x%04x</PKey>\n"
	        "      <Security>1</Security>\n"
	        "      <Member>%s</Member>\n",
	        p->name, p->pkey, p->name);
	/* a service: every tenant's group limited, as the intent puts every
	 * assigned tenant port in it as a limited member */
	for (int i = 0; p->kind == ISO_PART_SERVICE && i < in->n_parts; i++)
		if (in->parts[i].kind == ISO_PART_TENANT)
			fprintf(f, "      <LimitedMember>%s</LimitedMember>\n", in->parts[i].name);
	fprintf(f, "      <Application>AllOthers</Application>\n    </VirtualFabric>\n");
}

int iso_opafm_render(const struct iso_fabric_intent *in, char **out, struct iso_error *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = check_intent(in, err);
	if (r < 0)
		return r;

	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return iso_error_set(err, ISO_E_INTERNAL, "", "opafm.xml: %s", strerror(errno));
	fprintf(f,
	        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
	        "<!-- written by isostack from intent generation %llu: edits are overwritten -->\n"
	        "%s",
	        (unsigned long long)in->generation, head);
	for (int i = 0; i < in->n_parts; i++)
		if (in->parts[i].kind != ISO_PART_DEFAULT)
			render_group(f, &in->parts[i]);
	fprintf(f, "  </DeviceGroups>\n  <VirtualFabrics>\n%s", admin_vf);
	for (int i = 0; i < in->n_parts; i++)
		if (in->parts[i].kind != ISO_PART_DEFAULT)
			render_vf(f, in, &in->parts[i]);
	fprintf(f, "%s", tail);
	bool failed = ferror(f) != 0;
	if (fclose(f) != 0 || failed)
		return iso_error_set(err, ISO_E_INTERNAL, "", "opafm.xml: cannot build the text");
	*out = ISO_TAKE(buf);
	return 0;
}

/* test_authz.c: the role x action table (src/controller/authz.c) denies by
 * default. An action or a role missing from the table is refused, for
 * cluster-admin too; every authenticated route's action (read from
 * src/api/server.c, so a new route is checked without editing this file) is
 * in the table; the node-agent role may do only its own node's agent routes,
 * at node scope (docs/agents.md); and a few cells
 * of the four older roles, including the "looked up, then refused" ones that
 * keep another tenant's objects answering 404. The full matrix is checked
 * over HTTP by tests/api/test_rbac.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/internal.h"

static struct iso_principal who(enum iso_role role)
{
	struct iso_principal p = {.role = role};

	if (role == ISO_ROLE_TENANT_ADMIN || role == ISO_ROLE_TENANT_USER) {
		p.tenant_id = 7;
		strcpy(p.tenant, "acme");
	}
	if (role == ISO_ROLE_NODE_AGENT)
		strcpy(p.node, "gpu-a01");
	return p;
}

static const enum iso_role roles[] = {ISO_ROLE_CLUSTER_ADMIN, ISO_ROLE_AUDITOR,
                                      ISO_ROLE_TENANT_ADMIN,  ISO_ROLE_TENANT_USER,
                                      ISO_ROLE_NODE_AGENT,    ISO_ROLE_NEUTRON};

static void test_unknown_action_is_refused(void **state)
{
	(void)state;
	static const char *const unknown[] = {"allocation.destroy_everything", "", "tenant",
	                                      "tenant.create.", "TENANT.CREATE"};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(roles); i++)
		for (size_t j = 0; j < ISO_ARRAY_SIZE(unknown); j++) {
			struct iso_principal p = who(roles[i]);
			struct iso_error err = {0};
			enum ctl_scope scope = CTL_SCOPE_ALL;

			assert_true(ctl_authorize(&p, unknown[j], &scope, &err) < 0);
			assert_int_equal(err.code, ISO_E_FORBIDDEN);
			assert_int_equal(scope, CTL_SCOPE_NONE);
			assert_int_equal(ctl_scope_of(&p, unknown[j]), CTL_SCOPE_NONE);
			err = (struct iso_error){0};
			assert_true(iso_controller_authorize(&p, unknown[j], &err) < 0);
			assert_int_equal(err.code, ISO_E_FORBIDDEN);
		}
	struct iso_principal p = who(ISO_ROLE_CLUSTER_ADMIN);
	struct iso_error err = {0};
	assert_true(ctl_authorize(&p, NULL, NULL, &err) < 0);
	assert_true(ctl_authorize(&p, "allocation.destroy_everything", NULL, &err) < 0);
	assert_non_null(strstr(err.message, "allocation.destroy_everything"));
	assert_non_null(strstr(err.message, "cluster-admin"));
}

static void test_unknown_role_is_refused(void **state)
{
	(void)state;
	static const char *const actions[] = {"tenant.read", "whoami", "version.read",
	                                      "allocation.list", "audit.pubkey"};

	for (size_t j = 0; j < ISO_ARRAY_SIZE(actions); j++) {
		struct iso_principal p = who(ISO_ROLE_CLUSTER_ADMIN);
		struct iso_error err = {0};

		assert_int_equal(ctl_authorize(&p, actions[j], NULL, &err), 0);
		p.role = (enum iso_role)(ISO_ROLE_NEUTRON + 1);
		assert_true(ctl_authorize(&p, actions[j], NULL, &err) < 0);
		assert_int_equal(err.code, ISO_E_FORBIDDEN);
		assert_true(iso_controller_authorize(&p, actions[j], &err) < 0);
		p.role = (enum iso_role) - 1;
		assert_true(ctl_authorize(&p, actions[j], NULL, &err) < 0);
		assert_false(ctl_sees_all_tenants(&p));
	}
}

/* The authenticated routes' actions, as written in server.c's table. */
static int route_actions(char actions[][48], int max)
{
	char path[1024];
	const char *root = getenv("ISO_SOURCE_ROOT");
	int n = 0;

	snprintf(path, sizeof(path), "%s/src/api/server.c", root ? root : "../..");
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		const char *s = strstr(line, "ROUTE_AUTH, \"");
		if (!s)
			continue;
		s += strlen("ROUTE_AUTH, \"");
		const char *e = strchr(s, '"');
		assert_non_null(e);
		assert_true(n < max && e - s < 48);
		memcpy(actions[n], s, (size_t)(e - s));
		actions[n][e - s] = '\0';
		n++;
	}
	fclose(f);
	return n;
}

/* The SM host's agent's routes: a command to the fabric, for that agent
 * only, not even the cluster-admin (docs/fabric.md, "partitions.conf through
 * the SM host's agent"; which node is checked in src/controller/sm.c). */
static bool sm_action(const char *action)
{
	return strcmp(action, "fabric.sm.read") == 0 || strcmp(action, "fabric.sm.status") == 0;
}

/* The node-agent's only rights. */
static bool agent_action(const char *action)
{
	/* its own node's pod attachments (issue 17, docs/cni.md): which
	 * allocations those are is checked in allocations.c, with the node;
	 * and whether the SM is reachable, for its CNI plugin's STATUS */
	return strcmp(action, "node.desired.read") == 0 ||
	       strcmp(action, "node.status.write") == 0 || strcmp(action, "gpu.fault") == 0 ||
	       strcmp(action, "allocation.create") == 0 || strcmp(action, "allocation.read") == 0 ||
	       strcmp(action, "allocation.release") == 0 || strcmp(action, "fabric.health") == 0 ||
	       sm_action(action);
}

/* The neutron role (docs/openstack.md) may do no route of the API: its
 * credential is given to another system, so it must not reach tenants,
 * tokens, nodes, the fabric or even whoami. */
static void test_neutron_reaches_no_route(void **state)
{
	(void)state;
	char actions[128][48];
	int n = route_actions(actions, 128);
	struct iso_principal p = who(ISO_ROLE_NEUTRON);

	assert_true(n >= 40);
	assert_string_equal(iso_role_name(ISO_ROLE_NEUTRON), "neutron");
	for (int i = 0; i < n; i++) {
		struct iso_error err = {0};

		assert_int_equal(ctl_scope_of(&p, actions[i]), CTL_SCOPE_NONE);
		assert_true(iso_controller_authorize(&p, actions[i], &err) < 0);
		assert_int_equal(err.code, ISO_E_FORBIDDEN);
		assert_non_null(strstr(err.message, "role neutron may not do"));
	}
	assert_false(ctl_sees_all_tenants(&p));
}

static void test_every_route_is_in_the_table(void **state)
{
	(void)state;
	char actions[128][48];
	int n = route_actions(actions, 128);

	assert_true(n >= 40); /* the parse found the route table */
	for (int i = 0; i < n; i++) {
		struct iso_principal admin = who(ISO_ROLE_CLUSTER_ADMIN);
		struct iso_principal agent = who(ISO_ROLE_NODE_AGENT);
		struct iso_error err = {0};
		enum ctl_scope scope;

		/* in the table: the cluster-admin may do it (whoami: its own token;
		 * everything else over the whole cluster), but the SM agent's routes */
		if (sm_action(actions[i])) {
			for (size_t k = 0; k + 2 < ISO_ARRAY_SIZE(roles); k++) {
				struct iso_principal p = who(roles[k]);
				assert_int_equal(ctl_scope_of(&p, actions[i]), CTL_SCOPE_NONE);
				assert_true(iso_controller_authorize(&p, actions[i], &err) < 0);
				assert_int_equal(err.code, ISO_E_FORBIDDEN);
			}
		} else {
			assert_int_equal(ctl_authorize(&admin, actions[i], &scope, &err), 0);
			assert_int_equal(scope, strcmp(actions[i], "whoami") == 0 ? CTL_SCOPE_OWN
			                                                          : CTL_SCOPE_ALL);
		}
		/* the node-agent may act for its node on its own routes; every
		 * other route stops it at the door, as does a token without a node */
		if (agent_action(actions[i])) {
			assert_int_equal(ctl_scope_of(&agent, actions[i]), CTL_SCOPE_NODE);
			assert_int_equal(iso_controller_authorize(&agent, actions[i], &err), 0);
			agent.node[0] = '\0';
			assert_int_equal(ctl_scope_of(&agent, actions[i]), CTL_SCOPE_NONE);
			continue;
		}
		assert_int_equal(ctl_scope_of(&agent, actions[i]), CTL_SCOPE_NONE);
		assert_true(iso_controller_authorize(&agent, actions[i], &err) < 0);
		assert_int_equal(err.code, ISO_E_FORBIDDEN);
	}
	struct iso_principal agent = who(ISO_ROLE_NODE_AGENT);
	assert_false(ctl_sees_all_tenants(&agent));
}

static void test_cells_of_the_older_roles(void **state)
{
	(void)state;
	struct iso_principal aud = who(ISO_ROLE_AUDITOR), tadm = who(ISO_ROLE_TENANT_ADMIN),
	                     tusr = who(ISO_ROLE_TENANT_USER), admin = who(ISO_ROLE_CLUSTER_ADMIN);
	struct iso_error err = {0};

	assert_true(ctl_sees_all_tenants(&admin));
	assert_true(ctl_sees_all_tenants(&aud));
	assert_false(ctl_sees_all_tenants(&tadm));
	assert_int_equal(ctl_scope_of(&aud, "allocation.read"), CTL_SCOPE_ALL);
	assert_int_equal(ctl_scope_of(&aud, "allocation.release"), CTL_SCOPE_NONE);
	assert_int_equal(ctl_scope_of(&tadm, "allocation.release"), CTL_SCOPE_TENANT);
	assert_int_equal(ctl_scope_of(&tusr, "allocation.release"), CTL_SCOPE_OWN);
	assert_int_equal(ctl_scope_of(&tusr, "token.read"), CTL_SCOPE_OWN);
	assert_int_equal(ctl_scope_of(&tusr, "audit.read"), CTL_SCOPE_NONE);
	assert_int_equal(ctl_scope_of(&tusr, "audit.pubkey"), CTL_SCOPE_ALL);
	assert_int_equal(ctl_scope_of(&tadm, "node.list"), CTL_SCOPE_NONE);
	/* looked up first (404 outside the tenant), then refused: past the
	 * door, never allowed by ctl_authorize */
	assert_int_equal(ctl_scope_of(&tusr, "tenant.update"), CTL_SCOPE_LOOKUP);
	assert_int_equal(iso_controller_authorize(&tusr, "tenant.update", &err), 0);
	assert_true(ctl_authorize(&tusr, "tenant.update", NULL, &err) < 0);
	assert_int_equal(err.code, ISO_E_FORBIDDEN);
	assert_int_equal(iso_controller_authorize(&tadm, "quota.set", &err), 0);
	assert_true(ctl_authorize(&tadm, "quota.set", NULL, &err) < 0);
	assert_int_equal(ctl_authorize(&tadm, "quota.set.project", NULL, &err), 0);
	/* the auditor's refusals are at the door */
	assert_true(iso_controller_authorize(&aud, "tenant.update", &err) < 0);
	assert_true(iso_controller_authorize(&aud, "token.revoke", &err) < 0);
	/* a node-agent token without its node is no different */
	struct iso_principal bare = who(ISO_ROLE_NODE_AGENT);
	bare.node[0] = '\0';
	assert_true(iso_controller_authorize(&bare, "whoami", &err) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unknown_action_is_refused),
	    cmocka_unit_test(test_unknown_role_is_refused),
	    cmocka_unit_test(test_every_route_is_in_the_table),
	    cmocka_unit_test(test_neutron_reaches_no_route),
	    cmocka_unit_test(test_cells_of_the_older_roles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

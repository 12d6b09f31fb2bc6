#!/usr/bin/env python3
"""test_io_uring.py: the tenant's io_uring switch (issue 14; docs/api.md
"Tenants", docs/sandbox.md "seccomp") against a real isostackd. io_uring is a
kernel attack surface, so only a cluster-admin may allow it: on create or
PATCH, false by default, refused 403 naming the field to the tenant's own
admin and users, a bad type is a 400 naming it. It is shown in the tenant
object, audited with the tenant.update event, kept across a restart, and
carried into the desired document's members of that tenant only; a change
moves the documents of the tenant's nodes, not the others'.

Run: python3 tests/api/test_io_uring.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import create_alloc, create_tenant, issue_token  # noqa: E402

# tests/api/data/agents.yaml: ag-n01 = 2 x h100-80gb with MIG (pool "mig"),
# ag-n02 = 2 x whole h100-80gb (pool "whole").
AGENTS, MIG_NODE, WHOLE_NODE = "agents.yaml", "ag-n01", "ag-n02"


class IoUringCase(harness.FreshDaemonCase):
    config = AGENTS

    def uring_of(self, node):
        return {(m["tenant"], m["member"]): m["io_uring"] for m in self.desired(node)["members"]}


class TestTenantField(IoUringCase):
    def test_default_false_create_and_patch_by_cluster_admin(self):
        t = create_tenant(self, self.admin)
        self.assertIs(t["io_uring"], False)
        r = self.admin.post("/v1/tenants", {"name": harness.uniq("u"), "io_uring": True})
        self.assertStatus(r, 201)
        self.assertIs(r.body["io_uring"], True)
        on = r.body["name"]
        self.assertIs(self.admin.get("/v1/tenants/" + on).body["io_uring"], True)
        r = self.admin.patch("/v1/tenants/" + t["name"], {"io_uring": True})
        self.assertStatus(r, 200)
        self.assertIs(r.body["io_uring"], True)
        # a PATCH that does not name it leaves it alone
        r = self.admin.patch("/v1/tenants/" + t["name"], {"description": "x"})
        self.assertStatus(r, 200)
        self.assertIs(r.body["io_uring"], True)
        r = self.admin.patch("/v1/tenants/" + on, {"io_uring": False})
        self.assertIs(r.body["io_uring"], False)
        # stored: a restart reads it back
        self.d.restart()
        self.assertIs(self.admin.get("/v1/tenants/" + t["name"]).body["io_uring"], True)
        self.assertIs(self.admin.get("/v1/tenants/" + on).body["io_uring"], False)

    def test_tenant_roles_are_refused_naming_the_field(self):
        t = create_tenant(self, self.admin)["name"]
        _, tadm = issue_token(self, self.admin, "tenant-admin", tenant=t)
        _, tusr = issue_token(self, self.admin, "tenant-user", tenant=t)
        for secret in (tadm, tusr):
            c = self.d.client(secret)
            for body in ({"io_uring": True}, {"io_uring": False},
                         {"io_uring": True, "limits": {"max_user_priority": 5}}):
                r = c.patch("/v1/tenants/" + t, body)
                self.assertError(r, 403, "forbidden", "io_uring", repr(body))
                self.assertIn("io_uring", r.body["error"]["message"])
            # reading it is allowed: it is the tenant's own filter
            self.assertIs(c.get("/v1/tenants/" + t).body["io_uring"], False)
        self.assertIs(self.admin.get("/v1/tenants/" + t).body["io_uring"], False)
        # the tenant-admin's one field still works on its own
        r = self.d.client(tadm).patch("/v1/tenants/" + t, {"limits": {"max_user_priority": 5}})
        self.assertStatus(r, 200)
        self.assertIs(r.body["io_uring"], False)
        # an auditor may not change tenants at all
        _, aud = issue_token(self, self.admin, "auditor")
        self.assertError(self.d.client(aud).patch("/v1/tenants/" + t, {"io_uring": True}),
                         403, "forbidden")
        self.assertIs(self.admin.get("/v1/tenants/" + t).body["io_uring"], False)

    def test_bad_types_name_the_field(self):
        t = create_tenant(self, self.admin)["name"]
        for bad in ("true", 1, 0, None, [], {}):
            r = self.admin.patch("/v1/tenants/" + t, {"io_uring": bad})
            self.assertError(r, 400, "invalid_argument", "io_uring", repr(bad))
            r = self.admin.post("/v1/tenants", {"name": harness.uniq("b"), "io_uring": bad})
            self.assertError(r, 400, "invalid_argument", "io_uring", repr(bad))
        self.assertIs(self.admin.get("/v1/tenants/" + t).body["io_uring"], False)

    def test_audited(self):
        t = create_tenant(self, self.admin)["name"]
        self.assertStatus(self.admin.patch("/v1/tenants/" + t, {"io_uring": True}), 200)
        self.assertStatus(self.admin.patch("/v1/tenants/" + t, {"io_uring": False}), 200)
        items = self.admin.list_all("/v1/audit/events")
        got = [it["event"]["details"]["io_uring"] for it in items
               if it["event"]["action"] == "tenant.update" and it["event"]["object"]["id"] == t]
        self.assertEqual(got, [True, False])
        made = [it["event"]["details"]["io_uring"] for it in items
                if it["event"]["action"] == "tenant.create" and it["event"]["object"]["id"] == t]
        self.assertEqual(made, [False])


class TestCli(IoUringCase):
    def cli(self, *argv, token=None, status=0):
        e = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
        e.update(ISOSTACK_URL=self.d.url(), ISOSTACK_TOKEN=token or self.d.admin_token)
        p = subprocess.run([harness.Binaries.isoctl] + list(argv), env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=harness.T(60))
        self.assertEqual(p.returncode, status, "isoctl %s: %s%s" % (" ".join(argv), p.stdout, p.stderr))
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, p.stderr)
        return p

    def test_isoctl_io_uring_flag(self):
        if not harness.Binaries.isoctl:
            self.skipTest("no isoctl")
        t = json.loads(self.cli("-o", "json", "tenant", "create", harness.uniq("c"),
                                "--io-uring", "on").stdout)
        self.assertIs(t["io_uring"], True)
        t = json.loads(self.cli("-o", "json", "tenant", "update", t["name"],
                                "--io-uring", "off").stdout)
        self.assertIs(t["io_uring"], False)
        for bad in ("yes", "true", "ON", ""):
            p = self.cli("tenant", "update", t["name"], "--io-uring", bad, status=2)
            self.assertIn("--io-uring", p.stderr)
        _, tadm = issue_token(self, self.admin, "tenant-admin", tenant=t["name"])
        p = self.cli("tenant", "update", t["name"], "--io-uring", "on", token=tadm, status=4)
        self.assertIn("io_uring", p.stderr)
        self.assertIs(self.admin.get("/v1/tenants/" + t["name"]).body["io_uring"], False)


class TestDesired(IoUringCase):
    def test_members_of_the_tenant_only_and_only_its_nodes_move(self):
        on = create_tenant(self, self.admin)["name"]
        off = create_tenant(self, self.admin)["name"]
        mig = {"members": 1, "cpus": 2, "memory_mib": 1024, "pool": "mig",
               "gpus": {"count": 1, "profile": "3g.40gb"}}
        create_alloc(self, self.admin, dict(mig, tenant=on))
        create_alloc(self, self.admin, dict(mig, tenant=off))
        create_alloc(self, self.admin, {"tenant": off, "members": 1, "pool": "whole",
                                        "gpus": {"whole": True, "count": 1}})
        self.assertEqual(self.uring_of(MIG_NODE), {(on, 0): False, (off, 0): False})
        g_mig, g_whole = (self.desired(MIG_NODE)["generation"],
                          self.desired(WHOLE_NODE)["generation"])

        self.assertStatus(self.admin.patch("/v1/tenants/" + on, {"io_uring": True}), 200)
        self.assertEqual(self.uring_of(MIG_NODE), {(on, 0): True, (off, 0): False})
        self.assertEqual(self.uring_of(WHOLE_NODE), {(off, 0): False})
        self.assertNotEqual(self.desired(MIG_NODE)["generation"], g_mig)
        self.assertEqual(self.desired(WHOLE_NODE)["generation"], g_whole)

        # the other tenant's switch moves only the nodes it is on
        g_mig = self.desired(MIG_NODE)["generation"]
        self.assertStatus(self.admin.patch("/v1/tenants/" + off, {"io_uring": True}), 200)
        self.assertEqual(self.uring_of(WHOLE_NODE), {(off, 0): True})
        self.assertNotEqual(self.desired(WHOLE_NODE)["generation"], g_whole)
        self.assertEqual(self.uring_of(MIG_NODE), {(on, 0): True, (off, 0): True})

        # a restart builds the documents from the stored switch
        self.d.restart()
        self.assertEqual(self.uring_of(MIG_NODE), {(on, 0): True, (off, 0): True})
        self.assertStatus(self.admin.patch("/v1/tenants/" + on, {"io_uring": False}), 200)
        self.assertEqual(self.uring_of(MIG_NODE), {(on, 0): False, (off, 0): True})

        # a refused change moves nothing
        g_mig = self.desired(MIG_NODE)["generation"]
        _, tadm = issue_token(self, self.admin, "tenant-admin", tenant=on)
        self.assertError(self.d.client(tadm).patch("/v1/tenants/" + on, {"io_uring": True}),
                         403, "forbidden", "io_uring")
        self.assertEqual(self.desired(MIG_NODE)["generation"], g_mig)
        self.assertEqual(self.uring_of(MIG_NODE), {(on, 0): False, (off, 0): True})

    def test_new_tenant_created_with_it_on(self):
        r = self.admin.post("/v1/tenants", {"name": harness.uniq("n"), "io_uring": True})
        self.assertStatus(r, 201)
        t = r.body["name"]
        create_alloc(self, self.admin, {"tenant": t, "members": 1, "pool": "whole",
                                        "gpus": {"whole": True, "count": 1}})
        self.assertEqual(self.uring_of(WHOLE_NODE), {(t, 0): True})


if __name__ == "__main__":
    harness.main(__doc__)

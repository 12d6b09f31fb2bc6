#!/usr/bin/env python3
"""test_cni_authz.py: what a node-agent token may do with allocations (issue 17,
the CNI plugin's pod attachments; docs/api.md "Roles", docs/cni.md). It may
create one-member allocations pinned to its own node with the key
"cni:<its node>:...", read and release those, and nothing else: another
node, no pin, two members, GPUs, another key, another tenant's or another
node's allocation, the list. Quotas apply to its attachments as to any
member. Run: python3 tests/api/test_cni_authz.py PATH/TO/isostackd PATH/TO/isoctl
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import SharedDaemonCase, create_tenant  # noqa: E402

N1, N2 = "eg-n01", "eg-n02"
KEY = "Idempotency-Key"


class TestNodeAgentAttachments(SharedDaemonCase):
    config = "agents-eth.yaml"

    @classmethod
    def set_up_world(cls):
        def tok(node):
            r = cls.admin.post("/v1/tokens", {"role": "node-agent", "node": node})
            assert r.status == 201, r
            return cls.admin.with_token(r.body["token"])
        cls.a1, cls.a2 = tok(N1), tok(N2)

    def attach(self, client, tenant, key, nodes=(N1,), **extra):
        body = dict({"tenant": tenant, "members": 1, "memory_mib": 64}, **extra)
        if nodes is not None:
            body["nodes"] = list(nodes)
        return client.post("/v1/allocations", body, headers={KEY: key})

    def test_own_node_attachment_create_read_release(self):
        t = create_tenant(self, self.admin)["name"]
        r = self.attach(self.a1, t, "cni:%s:c1" % N1)
        self.assertStatus(r, 201, "attachment")
        a = r.body
        self.assertEqual(a["nodes"][0]["node"], N1)
        self.assertEqual(a["idempotency_key"], "cni:%s:c1" % N1)
        # a retry answers the same allocation
        r = self.attach(self.a1, t, "cni:%s:c1" % N1)
        self.assertStatus(r, 200, "retry")
        self.assertEqual(r.body["id"], a["id"])
        self.assertStatus(self.a1.get("/v1/allocations/" + a["id"]), 200, "read own")
        # the other node's agent sees nothing of it
        r = self.a2.get("/v1/allocations/" + a["id"])
        self.assertStatus(r, 404, "another node's attachment")
        self.assertStatus(self.a2.delete("/v1/allocations/" + a["id"]), 404)
        r = self.a1.delete("/v1/allocations/" + a["id"])
        self.assertStatus(r, 200, "release own")
        self.assertEqual(r.body["state"], "released")

    def test_hostile_creates_refused_naming_the_field(self):
        t = create_tenant(self, self.admin)["name"]
        cases = [
            ("another node", dict(key="cni:%s:x" % N2, nodes=(N2,)), "nodes"),
            ("pinned elsewhere", dict(key="cni:%s:x" % N1, nodes=(N2,)), "nodes"),
            ("unpinned", dict(key="cni:%s:x" % N1, nodes=None), "nodes"),
            ("two members", dict(key="cni:%s:x" % N1, nodes=(N1, N2), members=2), "nodes"),
            ("not an attachment key", dict(key="slurm:c:1:0"), "Idempotency-Key"),
            ("another node's key", dict(key="cni:%s:x" % N2), "Idempotency-Key"),
            ("a key prefix of the node", dict(key="cni:%s" % N1), "Idempotency-Key"),
            ("gpus", dict(key="cni:%s:g" % N1, gpus={"count": 1, "whole": True}), "gpus"),
        ]
        for what, kw, field in cases:
            with self.subTest(what):
                key = kw.pop("key")
                nodes = kw.pop("nodes", (N1,))
                r = self.attach(self.a1, t, key, nodes=nodes, **kw)
                self.assertStatus(r, 403, what)
                self.assertEqual(r.body["error"]["field"], field, "%s: %r" % (what, r))
        # without an Idempotency-Key at all
        r = self.a1.post("/v1/allocations", {"tenant": t, "memory_mib": 64, "nodes": [N1]})
        self.assertStatus(r, 403, "no key")
        self.assertEqual(r.body["error"]["field"], "Idempotency-Key")
        # nothing was made
        self.assertEqual(self.admin.list_all("/v1/allocations?tenant=" + t), [])

    def test_never_sees_other_allocations(self):
        t = create_tenant(self, self.admin)["name"]
        other = self.admin.post("/v1/allocations", {"tenant": t, "memory_mib": 64,
                                                    "nodes": [N1]}).body
        self.assertStatus(self.a1.get("/v1/allocations/" + other["id"]), 404, "a plain one")
        self.assertStatus(self.a1.delete("/v1/allocations/" + other["id"]), 404)
        self.assertStatus(self.a1.get("/v1/allocations"), 403, "the list")
        self.assertStatus(self.a1.get("/v1/allocations?tenant=" + t), 403, "the list")
        self.assertStatus(self.a1.get("/v1/tenants/" + t), 403, "the tenant")
        # a tenant that does not exist: 404, like any
        r = self.attach(self.a1, "no-such-tenant-x", "cni:%s:n" % N1)
        self.assertStatus(r, 404)
        self.assertEqual(r.body["error"]["field"], "tenant")
        # resize is never an agent's
        att = self.attach(self.a1, t, "cni:%s:rs" % N1).body
        self.assertStatus(self.a1.patch("/v1/allocations/" + att["id"], {"members": 2}), 403)

    def test_quota_applies(self):
        t = create_tenant(self, self.admin)["name"]
        r = self.admin.request("PUT", "/v1/tenants/%s/quota" % t,
                               {"memory_mib": {"guaranteed": 100, "borrow_limit": 0}})
        self.assertStatus(r, 200, "quota")
        self.assertStatus(self.attach(self.a1, t, "cni:%s:q1" % N1), 201)
        r = self.attach(self.a1, t, "cni:%s:q2" % N1)
        self.assertStatus(r, 409, "over quota")
        self.assertTrue(r.body["error"]["field"].startswith("quota."), r)


if __name__ == "__main__":
    harness.main(__doc__)

#!/usr/bin/env python3
"""test_idempotency.py: POST /v1/allocations' Idempotency-Key header and its
`nodes` field (issue 15; docs/api.md "Allocations") against a real isostackd.

The key: 1-128 characters of [A-Za-z0-9._:-] (anything else, or the header
twice, is a 400 naming it, and nothing is made); scoped by the tenant (two
tenants using one key each get their own allocation, and neither learns of
the other's); a retry with the same body answers 200 with the allocation as
it is now, a different body 409; a refused create stores nothing, so the
retry is a new attempt; the key is stored, so a retry after a restart
answers the same allocation; GET ?idempotency_key= finds it.

`nodes`: cluster roles only (a tenant role: 403, whatever the names), one
distinct inventory node per member, member i on nodes[i]; a pinned create
that does not fit now is refused (409, naming the node and why, or the quota
it would have waited for), never pending, and stores nothing.

Run: python3 tests/api/test_idempotency.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check_allocation, create_tenant, issue_token, uniq  # noqa: E402
import test_protocol  # noqa: E402  (its raw socket helpers)

KEY = "Idempotency-Key"
# small.yaml: sm-n01..03 = 8 x h100-80gb (MIG), 64 cpus each, pool gpu; sm-c01 CPU-only.
N1, N2, N3, C1 = "sm-n01", "sm-n02", "sm-n03", "sm-c01"


def body_for(tenant, **kw):
    b = {"tenant": tenant, "name": "job", "members": 1, "gpus": {"count": 1, "profile": "1g.10gb"}}
    b.update(kw)
    return b


class KeyCase(harness.SharedDaemonCase):
    def tearDown(self):
        # release what the test holds: on this InfiniBand cluster without VFs a
        # node serves one tenant at a time, so the next test finds them free
        for a in self.admin.list_all("/v1/allocations"):
            if a["state"] not in ("released", "failed"):
                self.admin.delete("/v1/allocations/" + a["id"])
    def post(self, client, body, key=None, **kw):
        headers = {KEY: key} if key is not None else None
        return client.post("/v1/allocations", body, headers=headers, **kw)

    def tenant_with_admin(self):
        t = create_tenant(self, self.admin)["name"]
        _, tok = issue_token(self, self.admin, "tenant-admin", tenant=t, user="boss")
        return t, self.d.client(tok)

    def ids_of(self, client, query):
        r = client.get("/v1/allocations?" + query)
        self.assertStatus(r, 200)
        return [a["id"] for a in r.body["items"]]


class TestKey(KeyCase):
    def test_first_creates_retry_answers_it_as_it_is_now(self):
        t, tc = self.tenant_with_admin()
        r = self.post(tc, body_for(t), key="slurm-1")
        self.assertStatus(r, 201)
        check_allocation(self, r.body)
        a = r.body
        self.assertEqual(a["idempotency_key"], "slurm-1")
        self.assertEqual(a["state"], "active")
        # the same body: 200 with the same allocation, nothing new
        r = self.post(tc, body_for(t), key="slurm-1")
        self.assertStatus(r, 200)
        self.assertEqual(r.body["id"], a["id"])
        self.assertEqual(r.body["placement"], a["placement"])
        self.assertEqual(self.ids_of(tc, "tenant=" + t), [a["id"]])
        # whatever its state now: released, the retry still answers it
        self.assertStatus(tc.delete("/v1/allocations/" + a["id"]), 200)
        r = self.post(tc, body_for(t), key="slurm-1")
        self.assertStatus(r, 200)
        self.assertEqual((r.body["id"], r.body["state"]), (a["id"], "released"))
        # shown on reads, and without a key it is null
        self.assertEqual(tc.get("/v1/allocations/" + a["id"]).body["idempotency_key"], "slurm-1")
        r = self.post(tc, body_for(t))
        self.assertStatus(r, 201)
        self.assertIsNone(r.body["idempotency_key"])

    def test_same_body_compared_canonically(self):
        t, tc = self.tenant_with_admin()
        b = body_for(t, cpus=2)
        r = self.post(tc, b, key="k.order")
        self.assertStatus(r, 201)
        # keys in another order, other spacing, and the tenant named by the token
        reordered = dict(reversed(list(b.items())))
        raw = json.dumps(reordered, indent=3)
        r2 = harness.http_request(self.d.port, "POST", "/v1/allocations", raw=raw,
                                  token=tc.token, headers={KEY: "k.order"})
        self.assertStatus(r2, 200)
        self.assertEqual(r2.body["id"], r.body["id"])
        r3 = self.post(tc, {k: v for k, v in b.items() if k != "tenant"}, key="k.order")
        self.assertStatus(r3, 200)
        self.assertEqual(r3.body["id"], r.body["id"])

    def test_different_body_is_a_conflict_and_stores_nothing(self):
        t, tc = self.tenant_with_admin()
        a = self.post(tc, body_for(t), key="slurm-2").body
        for other in (body_for(t, cpus=1), body_for(t, members=2), body_for(t, name="other")):
            r = self.post(tc, other, key="slurm-2")
            self.assertError(r, 409, "conflict", KEY)
            self.assertIn(a["id"], r.body["error"]["message"])
        self.assertEqual(self.ids_of(tc, "tenant=" + t), [a["id"]])

    def test_refused_create_stores_nothing_so_the_retry_is_new(self):
        t, tc = self.tenant_with_admin()
        # 422: more members than the cluster could ever hold of this shape
        r = self.post(tc, body_for(t, members=1000, gpus={"count": 8, "whole": True}),
                      key="try-1")
        self.assertError(r, 422, "unsatisfiable", "members")
        # 400: a bad field
        r = self.post(tc, body_for(t, priority="high"), key="try-1")
        self.assertError(r, 400, "invalid_argument", "priority")
        self.assertEqual(self.ids_of(tc, "idempotency_key=try-1"), [])
        r = self.post(tc, body_for(t), key="try-1")
        self.assertStatus(r, 201)
        self.assertEqual(self.ids_of(tc, "idempotency_key=try-1"), [r.body["id"]])

    def test_bad_header_values_are_refused_before_anything(self):
        t, tc = self.tenant_with_admin()
        before = self.ids_of(tc, "tenant=" + t)
        for bad in ("", " ", "a b", "a/b", "a\\b", 'a"b', "a,b", "k" * 129, "caf\xe9"):
            r = self.post(tc, body_for(t), key=bad)
            self.assertError(r, 400, "invalid_argument", KEY, msg=repr(bad))
        self.assertEqual(self.ids_of(tc, "tenant=" + t), before)
        # 128 characters is the longest key
        r = self.post(tc, body_for(t), key="K" * 128)
        self.assertStatus(r, 201)
        self.assertEqual(r.body["idempotency_key"], "K" * 128)
        # the header twice, even with one value: ambiguous, refused
        payload = json.dumps(body_for(t)).encode()
        raw = test_protocol.req("POST", "/v1/allocations", headers=[
            ("Authorization", "Bearer " + tc.token), ("Content-Type", "application/json"),
            ("Content-Length", str(len(payload))), (KEY, "twice"), (KEY, "twice")],
            body=payload)
        r = test_protocol.raw_request(self.d.port, raw)
        self.assertEqual(r.status, 400, repr(r))
        self.assertEqual(r.body["error"]["field"], KEY, repr(r))
        self.assertEqual(len(self.ids_of(tc, "tenant=" + t)), 1)  # the 128-character one
        self.assertEqual(self.ids_of(tc, "idempotency_key=twice"), [])

    def test_list_filter(self):
        t, tc = self.tenant_with_admin()
        u, uc = self.tenant_with_admin()
        a = self.post(tc, body_for(t), key="shared-key").body
        b = self.post(uc, body_for(u), key="shared-key").body
        self.post(tc, body_for(t), key="other-key")
        self.assertEqual(self.ids_of(tc, "idempotency_key=shared-key"), [a["id"]])
        self.assertEqual(self.ids_of(uc, "idempotency_key=shared-key"), [b["id"]])
        self.assertEqual(self.ids_of(tc, "idempotency_key=nope"), [])
        # a cluster role sees each tenant's, or one tenant's
        self.assertEqual(sorted(self.ids_of(self.admin, "idempotency_key=shared-key")),
                         sorted([a["id"], b["id"]]))
        self.assertEqual(self.ids_of(self.admin, "idempotency_key=shared-key&tenant=" + u),
                         [b["id"]])
        self.assertEqual(self.ids_of(self.admin, "idempotency_key=shared-key&state=released"), [])
        for bad in ("", "a%20b", "k" * 129):
            r = tc.get("/v1/allocations?idempotency_key=" + bad)
            self.assertError(r, 400, "invalid_argument", "idempotency_key", msg=bad)

    def test_desired_document_members_carry_the_key(self):
        t, tc = self.tenant_with_admin()
        a = self.post(tc, body_for(t, members=2, spread="node"), key="slurm-77").body
        seen = 0
        for m in a["placement"]:
            doc = self.admin.get("/v1/nodes/%s/desired" % m["node"]).body
            mine = [x for x in doc["members"] if x["allocation"] == a["id"]]
            self.assertEqual([x["key"] for x in mine], ["slurm-77"], repr(doc))
            seen += 1
        self.assertEqual(seen, 2)
        # and absent for an allocation without one
        b = self.post(tc, body_for(t)).body
        doc = self.admin.get("/v1/nodes/%s/desired" % b["placement"][0]["node"]).body
        mine = [x for x in doc["members"] if x["allocation"] == b["id"]]
        self.assertEqual(len(mine), 1)
        self.assertNotIn("key", mine[0])


class TestHostileTenants(KeyCase):
    def test_another_tenants_key_is_its_own_and_leaks_nothing(self):
        a_t, a_c = self.tenant_with_admin()
        b_t, b_c = self.tenant_with_admin()
        a = self.post(a_c, body_for(a_t), key="slurm-9").body
        # B reuses A's key with another body: its own allocation, no 409
        r = self.post(b_c, body_for(b_t, cpus=3), key="slurm-9")
        self.assertStatus(r, 201)
        b = r.body
        self.assertNotEqual(b["id"], a["id"])
        self.assertEqual(b["tenant"], b_t)
        # and with A's exact body (less the tenant): still its own
        r = self.post(b_c, {k: v for k, v in body_for(a_t).items() if k != "tenant"},
                      key="slurm-10")
        self.assertStatus(r, 201)
        # B's filter never shows A's; naming A is as unknown as a missing tenant
        self.assertEqual(self.ids_of(b_c, "idempotency_key=slurm-9"), [b["id"]])
        r = b_c.get("/v1/allocations?idempotency_key=slurm-9&tenant=" + a_t)
        self.assertError(r, 404, "not_found", "tenant")
        r2 = b_c.get("/v1/allocations?idempotency_key=slurm-9&tenant=" + uniq("none"))
        self.assertEqual((r.status, r.body["error"]["message"]),
                         (r2.status, r2.body["error"]["message"]))
        # B's 409 for its own key names only B's allocation
        r = self.post(b_c, body_for(b_t, cpus=4), key="slurm-9")
        self.assertError(r, 409, "conflict", KEY)
        msg = r.body["error"]["message"]
        self.assertIn(b["id"], msg)
        self.assertNotIn(a["id"], msg)
        self.assertNotIn(a_t, msg)
        # A is untouched
        self.assertEqual(self.ids_of(a_c, "idempotency_key=slurm-9"), [a["id"]])
        self.assertStatus(self.post(a_c, body_for(a_t), key="slurm-9"), 200)

    def test_a_colleagues_key_is_a_conflict_without_the_allocation(self):
        t = create_tenant(self, self.admin)["name"]
        _, u1 = issue_token(self, self.admin, "tenant-user", tenant=t, user="u1")
        _, u2 = issue_token(self, self.admin, "tenant-user", tenant=t, user="u2")
        c1, c2 = self.d.client(u1), self.d.client(u2)
        a = self.post(c1, body_for(t), key="mine").body
        r = self.post(c2, body_for(t), key="mine")
        self.assertError(r, 409, "conflict", KEY)
        self.assertNotIn(a["id"], r.body["error"]["message"])
        self.assertEqual(self.ids_of(c2, "idempotency_key=mine"), [])

    def test_a_tenant_cannot_pin_nodes(self):
        t, tc = self.tenant_with_admin()
        _, ut = issue_token(self, self.admin, "tenant-user", tenant=t, user="u")
        for client in (tc, self.d.client(ut)):
            # the same answer for real and made-up names: nothing learnt
            for nodes in ([N1], ["no-such-node"], [N1, N1], []):
                r = self.post(client, body_for(t, nodes=nodes))
                self.assertError(r, 403, "forbidden", "nodes", msg=repr(nodes))
                self.assertNotIn(N1, r.body["error"]["message"])
        self.assertEqual(self.ids_of(tc, "tenant=" + t), [])


class TestNodes(KeyCase):
    def test_bad_nodes_are_named(self):
        t = create_tenant(self, self.admin)["name"]
        cases = [
            ({"nodes": N1}, "nodes"),
            ({"nodes": [N1], "members": 2}, "nodes"),
            ({"nodes": [N1, N2, N3], "members": 2}, "nodes"),
            ({"nodes": [N1, "nope"], "members": 2}, "nodes[1]"),
            ({"nodes": [N1, N1], "members": 2}, "nodes[1]"),
            ({"nodes": [7]}, "nodes[0]"),
        ]
        for extra, field in cases:
            r = self.post(self.admin, body_for(t, **extra), key="bad-nodes")
            self.assertError(r, 400, "invalid_argument", field, msg=repr(extra))
        # a node that could never hold a member of this shape, even empty
        r = self.post(self.admin, body_for(t, nodes=[C1]))
        self.assertError(r, 422, "unsatisfiable", "nodes[0]")
        self.assertIn(C1, r.body["error"]["message"])
        self.assertEqual(self.ids_of(self.admin, "tenant=" + t), [])

    def test_member_i_on_nodes_i(self):
        t = create_tenant(self, self.admin)["name"]
        r = self.post(self.admin, body_for(t, members=3, nodes=[N3, N1, N2]), key="pin-1")
        self.assertStatus(r, 201)
        a = r.body
        self.assertEqual(a["state"], "active")
        self.assertEqual([(m["member"], m["node"]) for m in a["placement"]],
                         [(0, N3), (1, N1), (2, N2)])
        self.assertEqual(a["on_preempt"], "fail")  # pinned work never waits in the queue
        # a retry with the key answers it
        r = self.post(self.admin, body_for(t, members=3, nodes=[N3, N1, N2]), key="pin-1")
        self.assertStatus(r, 200)
        self.assertEqual(r.body["id"], a["id"])
        # the pins are part of the request a retry must repeat
        r = self.post(self.admin, body_for(t, members=3, nodes=[N1, N2, N3]), key="pin-1")
        self.assertError(r, 409, "conflict", KEY)

    def test_pinned_never_waits_and_says_why(self):
        t = create_tenant(self, self.admin)["name"]
        before = self.ids_of(self.admin, "tenant=" + t)
        # cpus: N2 keeps 4 of its 64 free
        big = self.post(self.admin, body_for(t, cpus=60, gpus=None, nodes=[N2])).body
        r = self.post(self.admin, body_for(t, cpus=8, gpus=None, nodes=[N2]), key="pin-cpu")
        self.assertError(r, 409, "insufficient_capacity", "nodes[0]")
        self.assertEqual(r.body["error"]["message"],
                         "member 0: node %s has 4 of 64 cpus free, the member needs 8 (cpus)"
                         % N2)
        # MIG geometry: N3's eight GPUs taken whole, a 3g has no place there
        self.post(self.admin, body_for(t, gpus={"count": 8, "whole": True}, nodes=[N3]))
        r = self.post(self.admin, body_for(t, members=2, gpus={"count": 1, "profile": "3g.40gb"},
                                           nodes=[N1, N3]), key="pin-mig")
        self.assertError(r, 409, "insufficient_capacity", "nodes[1]")
        self.assertEqual(r.body["error"]["message"],
                         "member 1: no free 3g.40gb placement on %s (MIG geometry)" % N3)
        # nothing stored, not even pending; N1 holds nothing of it
        ids = self.ids_of(self.admin, "tenant=" + t)
        self.assertEqual(len(ids), len(before) + 2)
        self.assertEqual(self.ids_of(self.admin, "idempotency_key=pin-mig"), [])
        self.assertEqual(self.ids_of(self.admin, "idempotency_key=pin-cpu"), [])
        self.assertEqual(self.ids_of(self.admin, "state=pending&tenant=" + t), [])
        n1 = self.admin.get("/v1/nodes/" + N1).body
        self.assertEqual(n1["members"], 0, repr(n1))
        self.assertStatus(self.admin.delete("/v1/allocations/" + big["id"]), 200)

    def test_pinned_over_quota_is_refused_with_the_quota(self):
        t = create_tenant(self, self.admin)["name"]
        r = self.admin.request("PUT", "/v1/tenants/%s/quota" % t,
                               {"gpus": {"guaranteed": 1, "borrow_limit": 0}})
        self.assertStatus(r, 200)
        self.post(self.admin, body_for(t, gpus={"count": 1, "whole": True}, nodes=[N1]))
        r = self.post(self.admin, body_for(t, gpus={"count": 1, "whole": True}, nodes=[N2]),
                      key="pin-quota")
        self.assertEqual(r.status, 409, repr(r))
        self.assertEqual(r.body["error"]["field"], "quota.%s.gpus" % t, repr(r))
        self.assertEqual(self.ids_of(self.admin, "idempotency_key=pin-quota"), [])
        self.assertEqual(self.ids_of(self.admin, "state=pending&tenant=" + t), [])


class TestRestart(harness.FreshDaemonCase):
    def test_key_is_read_back_after_a_restart(self):
        t = create_tenant(self, self.admin)["name"]
        b = body_for(t)
        r = self.admin.post("/v1/allocations", b, headers={KEY: "slurm-100"})
        self.assertStatus(r, 201)
        a = r.body
        self.d.restart()
        r = self.admin.post("/v1/allocations", b, headers={KEY: "slurm-100"})
        self.assertStatus(r, 200)
        self.assertEqual(r.body["id"], a["id"])
        self.assertEqual(r.body["idempotency_key"], "slurm-100")
        r = self.admin.post("/v1/allocations", body_for(t, cpus=1), headers={KEY: "slurm-100"})
        self.assertError(r, 409, "conflict", KEY)
        r = self.admin.get("/v1/allocations?idempotency_key=slurm-100")
        self.assertEqual([x["id"] for x in r.body["items"]], [a["id"]])
        self.assertEqual(len(self.admin.get("/v1/allocations").body["items"]), 1)


if __name__ == "__main__":
    harness.main(__doc__)

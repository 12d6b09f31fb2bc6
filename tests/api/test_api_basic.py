#!/usr/bin/env python3
"""test_api_basic.py: the REST API of a real isostackd against docs/api.md, one
behaviour per test: health, authentication, version/whoami, tenants, tokens,
allocations (MIG, whole, members, resize, pending, unsatisfiable), pagination,
request ids, nodes and cordoning, the GPU view, capacity, and restarts.

Run: python3 tests/api/test_api_basic.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (T, check_allocation, check_error_shape,  # noqa: E402
                     check_gpu_view, create_alloc, create_tenant, issue_token, slots_of,
                     token_id, uniq)

# tests/api/data/small.yaml: three 8 x h100-80gb MIG nodes in pool "gpu", in
# this inventory order, then one CPU-only node in pool "cpu".
SMALL = "small.yaml"
SMALL_GPU_NODES = ["sm-n01", "sm-n02", "sm-n03"]
SMALL_CPU_NODES = ["sm-c01"]
SMALL_NODES = SMALL_GPU_NODES + SMALL_CPU_NODES
SMALL_NODE_CPUS = {"sm-n01": 64, "sm-n02": 64, "sm-n03": 64, "sm-c01": 32}
SMALL_NODE_MEM = {"sm-n01": 524288, "sm-n02": 524288, "sm-n03": 524288, "sm-c01": 131072}
SMALL_FABRIC = "infiniband"
# tests/api/data/tiny.yaml: one node with one h100-80gb.
TINY = "tiny.yaml"
TINY_NODE = "tn-n01"

MIG_3G = {"count": 1, "profile": "3g.40gb"}


class DaemonCase(harness.SharedDaemonCase):
    """One daemon for the class; tests use fresh names so they do not meet."""

    config = SMALL


class FreshDaemonCase(harness.FreshDaemonCase):
    """A new daemon (empty state) for every test: placement is deterministic."""

    config = SMALL

    def tenant_with_user(self, user="alice"):
        t = create_tenant(self, self.admin)["name"]
        _, secret = issue_token(self, self.admin, "tenant-user", tenant=t, user=user)
        return t, self.d.client(secret)

    def gpus(self, node=None):
        r = self.admin.get("/v1/gpus" + ("?node=" + node if node else ""))
        self.assertStatus(r, 200)
        return r.body["items"]

    def all_allocs(self):
        return self.admin.list_all("/v1/allocations")

    def check_consistent(self):
        check_gpu_view(self, self.gpus(), self.all_allocs())


# ---------------------------------------------------------------- health, auth


class TestHealthAuth(DaemonCase):
    def test_healthz_needs_no_auth(self):
        r = self.d.request("GET", "/v1/healthz")
        self.assertStatus(r, 200)
        # The only isostackd on its store (SQLite) leads, at the agents' term.
        self.assertEqual(r.body, {"status": "ok", "role": "leader", "term": r.body.get("term"),
                                  "leader": "http://127.0.0.1:%d" % self.d.port})
        self.assertIsInstance(r.body["term"], int)
        self.assertGreaterEqual(r.body["term"], 1)
        self.assertTrue((r.header("Content-Type") or "").startswith("application/json"))

    def _unauthorized_variants(self):
        admin_id = token_id(self.d.admin_token)
        t = create_tenant(self, self.admin)["name"]
        revoked, revoked_secret = issue_token(self, self.admin, "tenant-user", tenant=t, user="rv")
        self.assertStatus(self.admin.delete("/v1/tokens/" + revoked["id"]), 204)
        return [
            ("no header", None, None),
            ("empty bearer", None, {"Authorization": "Bearer "}),
            ("not bearer", None, {"Authorization": "Basic dXNlcjpwYXNz"}),
            ("malformed", "garbage", None),
            ("malformed prefix", "iso_zz_short", None),
            ("unknown id", "iso_0123456789ab_" + "A" * 43, None),
            ("wrong secret", "iso_%s_%s" % (admin_id, "B" * 43), None),
            ("admin token with a char more", self.d.admin_token + "x", None),
            ("revoked", revoked_secret, None),
        ]

    def test_unauthorized_same_answer_for_every_bad_token(self):
        msgs = set()
        for path, method in (("/v1/version", "GET"), ("/v1/tenants", "POST"),
                             ("/v1/allocations", "GET"), ("/v1/tenants/nosuch", "DELETE")):
            for what, tok, hdrs in self._unauthorized_variants():
                body = {"name": uniq("unauth")} if method == "POST" else None
                r = self.d.request(method, path, body=body, token=tok,
                                         headers=hdrs)
                err = self.assertError(r, 401, "unauthorized", None, msg="%s %s (%s)" % (method, path, what))
                msgs.add(err["message"])
                if body:
                    g = self.admin.get("/v1/tenants/" + body["name"])
                    self.assertStatus(g, 404, "a 401 POST created its tenant")
        self.assertEqual(len(msgs), 1, "401 messages differ between bad tokens: %r" % msgs)

    def test_expired_token_is_unauthorized(self):
        t = create_tenant(self, self.admin)["name"]
        obj, secret = issue_token(self, self.admin, "tenant-user", tenant=t, user="ex",
                                  expires_in_s=1)
        self.assertIsNotNone(obj["expires"])
        self.assertTime(obj["expires"], "expires")
        self.assertStatus(self.d.client(secret).get("/v1/whoami"), 200)
        time.sleep(2.2)
        r = self.d.client(secret).get("/v1/whoami")
        bad = self.d.request("GET", "/v1/whoami", token="garbage")
        self.assertError(r, 401, "unauthorized", None)
        self.assertEqual(r.body["error"]["message"], bad.body["error"]["message"])


class TestIdentity(DaemonCase):
    def test_version(self):
        r = self.admin.get("/v1/version")
        self.assertStatus(r, 200)
        self.assertEqual(set(r.body.keys()), harness.VERSION_KEYS, repr(r))
        self.assertEqual(r.body["version"], "0.1.0")
        self.assertEqual(r.body["api"], "v1")
        self.assertEqual(r.body["store"], "sqlite")
        self.assertEqual(r.body["placement"], "first-fit")
        self.assertEqual(r.body["fabric"], SMALL_FABRIC)
        c = r.body["commits"]  # group commit is on by default (docs/store.md)
        self.assertEqual(set(c), {"group", "commits", "syncs"}, repr(r))
        self.assertIs(c["group"], True)
        self.assertGreater(c["commits"], 0)  # at least the start's own
        self.assertLessEqual(c["syncs"], c["commits"])

    def test_whoami_admin(self):
        r = self.admin.get("/v1/whoami")
        self.assertStatus(r, 200)
        self.assertEqual(set(r.body.keys()), harness.WHOAMI_KEYS, repr(r))
        self.assertEqual(r.body["token_id"], token_id(self.d.admin_token))
        self.assertEqual(r.body["role"], "cluster-admin")
        self.assertIsNone(r.body["tenant"])
        self.assertIsInstance(r.body["user"], str)

    def test_whoami_tenant_token(self):
        t = create_tenant(self, self.admin)["name"]
        obj, secret = issue_token(self, self.admin, "tenant-admin", tenant=t, user="carol")
        r = self.d.client(secret).get("/v1/whoami")
        self.assertStatus(r, 200)
        self.assertEqual(r.body, {"token_id": obj["id"], "role": "tenant-admin", "tenant": t,
                                  "user": "carol"})


# ---------------------------------------------------------------- tenants


class TestTenants(DaemonCase):
    def test_create_get_list_update_delete(self):
        name = uniq("crud")
        r = self.admin.post("/v1/tenants", {"name": name, "description": "first"})
        self.assertStatus(r, 201)
        self.assertEqual(set(r.body.keys()), harness.TENANT_KEYS, repr(r))
        self.assertEqual(r.body["name"], name)
        self.assertEqual(r.body["description"], "first")
        self.assertTime(r.body["created"])
        self.assertTime(r.body["updated"])
        created = r.body

        g = self.admin.get("/v1/tenants/" + name)
        self.assertStatus(g, 200)
        self.assertEqual(g.body, created)

        names = [t["name"] for t in self.admin.list_all("/v1/tenants")]
        self.assertIn(name, names)
        self.assertEqual(names, sorted(names), "tenants not ordered by name")

        time.sleep(0.01)
        p = self.admin.patch("/v1/tenants/" + name, {"description": "second"})
        self.assertStatus(p, 200)
        self.assertEqual(p.body["description"], "second")
        self.assertEqual(p.body["name"], name)
        self.assertEqual(p.body["created"], created["created"])
        self.assertGreater(p.body["updated"], created["updated"], "updated did not move")
        self.assertEqual(self.admin.get("/v1/tenants/" + name).body, p.body)

        dl = self.admin.delete("/v1/tenants/" + name)
        self.assertStatus(dl, 204)
        self.assertEqual(dl.raw, b"")
        self.assertError(self.admin.get("/v1/tenants/" + name), 404, "not_found")
        self.assertNotIn(name, [t["name"] for t in self.admin.list_all("/v1/tenants")])
        self.assertError(self.admin.delete("/v1/tenants/" + name), 404, "not_found")
        self.assertError(self.admin.patch("/v1/tenants/" + name, {"description": "x"}), 404,
                         "not_found")

    def test_description_defaults_to_empty(self):
        r = self.admin.post("/v1/tenants", {"name": uniq("nodesc")})
        self.assertStatus(r, 201)
        self.assertEqual(r.body["description"], "")

    def test_duplicate_is_conflict(self):
        name = uniq("dup")
        create_tenant(self, self.admin, name, "one")
        r = self.admin.post("/v1/tenants", {"name": name, "description": "two"})
        self.assertError(r, 409, "conflict")
        self.assertEqual(self.admin.get("/v1/tenants/" + name).body["description"], "one")

    def test_delete_with_live_allocation_conflicts_and_revokes_tokens_after(self):
        name = create_tenant(self, self.admin)["name"]
        _, secret = issue_token(self, self.admin, "tenant-user", tenant=name, user="u1")
        a = create_alloc(self, self.admin, {"tenant": name, "gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertEqual(a["state"], "active")
        r = self.admin.delete("/v1/tenants/" + name)
        self.assertError(r, 409, "conflict")
        self.assertStatus(self.admin.get("/v1/tenants/" + name), 200)
        self.assertStatus(self.d.client(secret).get("/v1/whoami"), 200,
                          "a refused tenant delete revoked its tokens")
        rel = self.admin.delete("/v1/allocations/" + a["id"])
        self.assertStatus(rel, 200)
        self.assertEqual(rel.body["state"], "released")
        self.assertStatus(self.admin.delete("/v1/tenants/" + name), 204)
        self.assertError(self.d.client(secret).get("/v1/whoami"), 401, "unauthorized")


# ---------------------------------------------------------------- tokens


class TestTokens(DaemonCase):
    def test_secret_shown_once_and_works(self):
        t = create_tenant(self, self.admin)["name"]
        r = self.admin.post("/v1/tokens", {"role": "tenant-user", "tenant": t, "user": "dave",
                                           "description": "laptop"})
        self.assertStatus(r, 201)
        self.assertEqual(set(r.body.keys()), harness.TOKEN_KEYS | {"token"}, repr(r))
        secret = r.body["token"]
        m = harness.TOKEN_RE.match(secret)
        self.assertIsNotNone(m, "token %r has the wrong form" % secret)
        self.assertEqual(m.group(1), r.body["id"])
        self.assertEqual(r.body["role"], "tenant-user")
        self.assertEqual(r.body["tenant"], t)
        self.assertEqual(r.body["user"], "dave")
        self.assertEqual(r.body["description"], "laptop")
        self.assertTime(r.body["created"])
        self.assertIsNone(r.body["expires"])
        self.assertIsNone(r.body["revoked"])
        sec_part = secret.split("_", 2)[2]

        g = self.admin.get("/v1/tokens/" + r.body["id"])
        self.assertStatus(g, 200)
        self.assertEqual(set(g.body.keys()), harness.TOKEN_KEYS, repr(g))
        expect = dict(r.body)
        del expect["token"]
        self.assertEqual(g.body, expect)
        lst = self.admin.get("/v1/tokens?tenant=" + t)
        self.assertStatus(lst, 200)
        for resp in (g, lst):
            self.assertNotIn(sec_part, resp.text, "secret shown again")
            low = resp.text.lower()
            self.assertNotIn('"token"', low)
            self.assertNotIn("hash", low)
            self.assertNotIn("secret", low)
        self.assertEqual([x["id"] for x in lst.body["items"]], [r.body["id"]])

        me = self.d.client(secret).get("/v1/whoami")
        self.assertStatus(me, 200)
        self.assertEqual(me.body["token_id"], r.body["id"])

    def test_cluster_roles_take_no_tenant(self):
        obj, secret = issue_token(self, self.admin, "auditor", user="audrey")
        self.assertIsNone(obj["tenant"])
        self.assertEqual(self.d.client(secret).get("/v1/whoami").body["role"], "auditor")
        t = create_tenant(self, self.admin)["name"]
        r = self.admin.post("/v1/tokens", {"role": "auditor", "tenant": t})
        self.assertError(r, 400, "invalid_argument", "tenant")
        r = self.admin.post("/v1/tokens", {"role": "tenant-user"})
        self.assertError(r, 400, "invalid_argument", "tenant")
        r = self.admin.post("/v1/tokens", {"role": "tenant-user", "tenant": uniq("nosuch")})
        self.assertError(r, 404, "not_found", "tenant")

    def test_revoke(self):
        t = create_tenant(self, self.admin)["name"]
        obj, secret = issue_token(self, self.admin, "tenant-user", tenant=t, user="erin")
        c = self.d.client(secret)
        self.assertStatus(c.get("/v1/whoami"), 200)
        r = self.admin.delete("/v1/tokens/" + obj["id"])
        self.assertStatus(r, 204)
        self.assertEqual(r.raw, b"")
        self.assertError(c.get("/v1/whoami"), 401, "unauthorized")
        g = self.admin.get("/v1/tokens/" + obj["id"])
        self.assertStatus(g, 200)
        self.assertTime(g.body["revoked"], "revoked")
        self.assertError(self.admin.get("/v1/tokens/0123456789ab"), 404, "not_found")

    def test_tenant_user_revokes_itself(self):
        t = create_tenant(self, self.admin)["name"]
        obj, secret = issue_token(self, self.admin, "tenant-user", tenant=t, user="fay")
        c = self.d.client(secret)
        self.assertStatus(c.delete("/v1/tokens/" + obj["id"]), 204)
        self.assertError(c.get("/v1/whoami"), 401, "unauthorized")

    def test_owner_is_user_or_token_id(self):
        t = create_tenant(self, self.admin)["name"]
        _, s1 = issue_token(self, self.admin, "tenant-user", tenant=t, user="gina")
        o2, s2 = issue_token(self, self.admin, "tenant-user", tenant=t)
        a1 = create_alloc(self, self.d.client(s1), {"gpus": {"count": 1, "profile": "1g.10gb"}})
        a2 = create_alloc(self, self.d.client(s2), {"gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertEqual(a1["owner"], "gina")
        self.assertEqual(a1["tenant"], t)
        self.assertEqual(a2["owner"], "token:" + o2["id"])
        for a in (a1, a2):
            self.assertStatus(self.admin.delete("/v1/allocations/" + a["id"]), 200)


# ---------------------------------------------------------------- allocations


class TestAllocations(FreshDaemonCase):
    def test_mig_3g(self):
        t, c = self.tenant_with_user("alice")
        r = c.post("/v1/allocations", {"name": "train-1", "gpus": MIG_3G, "cpus": 8,
                                       "memory_mib": 65536})
        self.assertStatus(r, 201)
        a = r.body
        check_allocation(self, a)
        self.assertEqual(a["state"], "active")
        self.assertRegex(a["id"], r"^a-[0-9a-f]{16}$")
        self.assertEqual(a["tenant"], t)
        self.assertEqual(a["name"], "train-1")
        self.assertEqual(a["reason"], "")
        self.assertEqual(a["members"], 1)
        self.assertEqual(a["gpus"], {"count": 1, "whole": False, "profile": "3g.40gb", "model": None})
        self.assertEqual((a["cpus"], a["memory_mib"], a["pool"], a["owner"]), (8, 65536, None, "alice"))
        self.assertEqual(a["nodes"], [{"member": 0, "node": "sm-n01", **harness.NO_AGENT_REPORT}])
        self.assertEqual(len(a["placement"]), 1)
        p = a["placement"][0]
        self.assertEqual(p["profile"], "3g.40gb")
        self.assertIn(p["start"], (0, 4))
        self.assertEqual(p["width"], 4)
        self.assertFalse(p["whole"])
        # first-fit on an empty cluster: first node, GPU 0, lowest start
        self.assertEqual(p, {"member": 0, "node": "sm-n01", "gpu": 0, "whole": False,
                             "profile": "3g.40gb", "start": 0, "width": 4})
        g = self.admin.get("/v1/allocations/" + a["id"])
        self.assertStatus(g, 200)
        self.assertEqual([m["sandbox"] for m in g.body["nodes"]], [None])  # no agent reported one
        self.assertEqual(harness.tenant_view(g.body), a)
        # the second 3g takes the other half of the same GPU
        b = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertEqual(slots_of(b), [("sm-n01", 0, 4, 4)])
        # a third cannot share GPU 0: 3g fits only at 0 or 4
        b3 = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertEqual(slots_of(b3), [("sm-n01", 1, 0, 4)])
        self.check_consistent()

    def test_whole_two_gpus_on_one_node(self):
        t, c = self.tenant_with_user()
        create_alloc(self, c, {"gpus": MIG_3G})  # GPU 0 of sm-n01 is no longer whole-free
        a = create_alloc(self, c, {"gpus": {"count": 2, "whole": True}})
        self.assertEqual(a["state"], "active")
        self.assertEqual(a["gpus"], {"count": 2, "whole": True, "profile": None, "model": None})
        self.assertEqual(len(a["placement"]), 2)
        nodes = {p["node"] for p in a["placement"]}
        self.assertEqual(len(nodes), 1, "whole GPUs of one member on two nodes")
        self.assertEqual(slots_of(a), [("sm-n01", 1, 0, 8), ("sm-n01", 2, 0, 8)])
        for p in a["placement"]:
            self.assertTrue(p["whole"])
        self.check_consistent()

    def test_members_three(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"members": 3, "gpus": {"count": 1, "profile": "4g.40gb"},
                                   "cpus": 4, "memory_mib": 1024})
        self.assertEqual(a["state"], "active")
        self.assertEqual(a["members"], 3)
        self.assertEqual([m["member"] for m in a["nodes"]], [0, 1, 2])
        self.assertEqual(sorted(p["member"] for p in a["placement"]), [0, 1, 2])
        # 4g fits only at 0: one per GPU
        self.assertEqual(slots_of(a), [("sm-n01", 0, 0, 4), ("sm-n01", 1, 0, 4), ("sm-n01", 2, 0, 4)])
        self.check_consistent()

    def test_members_spread_over_nodes(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"members": 2, "gpus": {"count": 8, "whole": True}})
        self.assertEqual(a["state"], "active")
        self.assertEqual([m["node"] for m in a["nodes"]], ["sm-n01", "sm-n02"])
        for m in (0, 1):
            gpus = sorted(p["gpu"] for p in a["placement"] if p["member"] == m)
            self.assertEqual(gpus, list(range(8)))
        self.check_consistent()

    def test_cpu_only(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"cpus": 16, "memory_mib": 4096, "pool": "cpu"})
        self.assertEqual(a["state"], "active")
        self.assertEqual(a["nodes"], [{"member": 0, "node": "sm-c01", **harness.NO_AGENT_REPORT}])
        self.assertEqual(a["placement"], [])
        self.assertEqual(a["pool"], "cpu")
        n = self.admin.get("/v1/nodes/sm-c01")
        self.assertStatus(n, 200)
        self.assertEqual((n.body["cpus_used"], n.body["memory_mib_used"], n.body["members"]),
                         (16, 4096, 1))

    def test_list_get_release(self):
        t, c = self.tenant_with_user()
        ids = [create_alloc(self, c, {"gpus": {"count": 1, "profile": "1g.10gb"}, "name": "j%d" % i})["id"]
               for i in range(3)]
        lst = c.get("/v1/allocations")
        self.assertStatus(lst, 200)
        self.assertEqual(set(lst.body.keys()), {"items", "next"})
        self.assertIsNone(lst.body["next"])
        self.assertEqual([a["id"] for a in lst.body["items"]], ids, "list not in creation order")
        for a in lst.body["items"]:
            check_allocation(self, a)
        one = c.get("/v1/allocations/" + ids[1])
        self.assertStatus(one, 200)
        self.assertEqual(one.body, lst.body["items"][1])

        rel = c.delete("/v1/allocations/" + ids[1])
        self.assertStatus(rel, 200)
        check_allocation(self, rel.body)
        self.assertEqual(rel.body["id"], ids[1])
        self.assertEqual(rel.body["state"], "released")
        g = c.get("/v1/allocations/" + ids[1])
        self.assertEqual(g.body["state"], "released")
        again = c.delete("/v1/allocations/" + ids[1])
        self.assertStatus(again, 200)
        self.assertEqual(again.body, g.body, "re-release changed the allocation")
        act = c.get("/v1/allocations?state=active")
        self.assertStatus(act, 200)
        self.assertEqual([a["id"] for a in act.body["items"]], [ids[0], ids[2]])
        reld = c.get("/v1/allocations?state=released")
        self.assertEqual([a["id"] for a in reld.body["items"]], [ids[1]])
        self.assertError(c.get("/v1/allocations/a-0000000000000000"), 404, "not_found")
        self.assertError(c.delete("/v1/allocations/a-0000000000000000"), 404, "not_found")
        self.check_consistent()
        # the released slice is free again: the next 1g takes it
        n = create_alloc(self, c, {"gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertEqual(slots_of(n), [("sm-n01", 0, 1, 1)])

    def test_resize_up_and_down(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": MIG_3G, "cpus": 2})
        m0 = a["placement"][0]
        r = c.patch("/v1/allocations/" + a["id"], {"members": 3})
        self.assertStatus(r, 200)
        check_allocation(self, r.body)
        self.assertEqual(r.body["members"], 3)
        self.assertEqual(r.body["state"], "active")
        self.assertEqual(len(r.body["nodes"]), 3)
        self.assertIn(m0, r.body["placement"], "resize moved member 0")
        self.assertEqual(slots_of(r.body), [("sm-n01", 0, 0, 4), ("sm-n01", 0, 4, 4), ("sm-n01", 1, 0, 4)])
        self.check_consistent()
        s = c.patch("/v1/allocations/" + a["id"], {"members": 1})
        self.assertStatus(s, 200)
        check_allocation(self, s.body)
        self.assertEqual(s.body["members"], 1)
        self.assertEqual(s.body["placement"], [m0], "shrink did not keep the lowest member")
        self.assertEqual(harness.tenant_view(self.admin.get("/v1/allocations/" + a["id"]).body), s.body)
        self.check_consistent()
        self.assertEqual(self.admin.get("/v1/nodes/sm-n01").body["cpus_used"], 2)

    def test_resize_cpu_only(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"cpus": 4, "memory_mib": 100, "pool": "cpu"})
        for n in (3, 3, 1, 2, 1):
            r = c.patch("/v1/allocations/" + a["id"], {"members": n})
            self.assertStatus(r, 200)
            check_allocation(self, r.body)
            self.assertEqual((r.body["members"], r.body["placement"]), (n, []))
            self.assertEqual(self.admin.get("/v1/nodes/sm-c01").body["cpus_used"], 4 * n)
        self.check_consistent()

    def test_resize_that_does_not_fit_changes_nothing(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": {"count": 8, "whole": True}})
        before = self.admin.get("/v1/allocations/" + a["id"]).body
        cap = self.admin.get("/v1/capacity").body
        r = c.patch("/v1/allocations/" + a["id"], {"members": 4})  # only 3 GPU nodes
        self.assertError(r, 409, "insufficient_capacity")
        self.assertEqual(self.admin.get("/v1/allocations/" + a["id"]).body, before)
        self.assertEqual(self.admin.get("/v1/capacity").body, cap)
        ok = c.patch("/v1/allocations/" + a["id"], {"members": 3})
        self.assertStatus(ok, 200)
        self.assertEqual([m["node"] for m in ok.body["nodes"]], SMALL_GPU_NODES)
        self.check_consistent()

    def test_resize_released_conflicts(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertStatus(c.delete("/v1/allocations/" + a["id"]), 200)
        self.assertError(c.patch("/v1/allocations/" + a["id"], {"members": 2}), 409, "conflict")

    def test_unsatisfiable(self):
        t, c = self.tenant_with_user()
        cases = [
            {"gpus": {"count": 9, "whole": True}},  # 8-GPU nodes
            {"gpus": {"count": 3, "profile": "3g.40gb"}, "members": 1, "pool": "cpu"},
            {"cpus": 65},  # biggest node has 64
            {"memory_mib": 524289},
            {"gpus": {"count": 17, "profile": "3g.40gb"}},  # two 3g per GPU: 16 per node
            {"gpus": {"count": 57, "profile": "1g.10gb"}},  # seven 1g per GPU: 56 per node
            {"gpus": {"count": 9, "profile": "1g.10gb+me"}},  # one +me per GPU
        ]
        before = self.admin.get("/v1/capacity").body
        for body in cases:
            r = c.post("/v1/allocations", body)
            self.assertError(r, 422, "unsatisfiable", msg=repr(body))
        self.assertEqual(c.get("/v1/allocations").body["items"], [], "a 422 left an allocation")
        self.assertEqual(self.admin.get("/v1/capacity").body, before)

    def test_unknown_pool_refused(self):
        t, c = self.tenant_with_user()
        r = c.post("/v1/allocations", {"gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "no-such-pool"})
        self.assertIn(r.status, (400, 422), repr(r))
        if r.status == 400:
            self.assertError(r, 400, "invalid_argument", "pool")
        else:
            self.assertError(r, 422, "unsatisfiable")
        self.assertEqual(c.get("/v1/allocations").body["items"], [])

    def test_unsatisfiable_counts_all_members(self):
        # One member fits an empty node, but 4 members of 8 whole GPUs can never
        # fit 3 GPU nodes: docs/api.md says 422, not a pending that waits forever.
        t, c = self.tenant_with_user()
        r = c.post("/v1/allocations", {"members": 4, "gpus": {"count": 8, "whole": True}})
        self.assertError(r, 422, "unsatisfiable")

    def test_cordoned_nodes_get_no_placements(self):
        t, c = self.tenant_with_user()
        r = self.admin.post("/v1/nodes/sm-n01/cordon")
        self.assertStatus(r, 200)
        self.assertEqual(r.body["name"], "sm-n01")
        self.assertEqual(r.body["state"], "cordoned")
        self.assertEqual(self.admin.get("/v1/nodes/sm-n01").body["state"], "cordoned")
        self.assertEqual(self.admin.get("/v1/capacity").body["schedulable_nodes"], 3)
        a = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertEqual(slots_of(a), [("sm-n02", 0, 0, 4)])
        b = create_alloc(self, c, {"members": 2, "gpus": {"count": 8, "whole": True}})
        self.assertEqual(b["state"], "pending", "only sm-n03 is whole-free and schedulable")
        self.assertStatus(c.delete("/v1/allocations/" + b["id"]), 200)
        u = self.admin.post("/v1/nodes/sm-n01/uncordon")
        self.assertStatus(u, 200)
        self.assertEqual(u.body["state"], "schedulable")
        self.assertEqual(self.admin.get("/v1/capacity").body["schedulable_nodes"], 4)
        a2 = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertEqual(slots_of(a2), [("sm-n01", 0, 0, 4)])
        self.assertError(self.admin.post("/v1/nodes/no-such-node/cordon"), 404, "not_found")

    def test_drain(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertEqual(a["nodes"][0]["node"], "sm-n01")
        e = self.admin.post("/v1/nodes/sm-n03/drain")
        self.assertStatus(e, 200)
        self.assertEqual(e.body["state"], "drained", "an empty node drains at once")
        d = self.admin.post("/v1/nodes/sm-n01/drain")
        self.assertStatus(d, 200)
        self.assertIn(d.body["state"], ("draining", "drained"))
        still = self.admin.get("/v1/allocations/" + a["id"]).body
        if d.body["state"] == "draining":
            self.assertEqual(still["state"], "active")
        else:
            self.assertIn(still["state"], harness.TERMINAL_STATES,
                          "node drained while an allocation holds it")
        b = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertEqual(slots_of(b), [("sm-n02", 0, 0, 4)], "new work on a draining node")
        self.assertStatus(c.delete("/v1/allocations/" + a["id"]), 200)
        deadline = time.monotonic() + T(5)
        while True:
            st = self.admin.get("/v1/nodes/sm-n01").body
            if st["state"] == "drained" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(st["state"], "drained", "empty draining node never became drained")
        self.assertEqual(st["members"], 0)
        self.assertEqual(self.admin.post("/v1/nodes/sm-n01/uncordon").body["state"], "schedulable")
        self.assertEqual(self.admin.post("/v1/nodes/sm-n03/uncordon").body["state"], "schedulable")
        c2 = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertEqual(slots_of(c2), [("sm-n01", 0, 0, 4)])


class TestPending(FreshDaemonCase):
    config = TINY

    def test_pending_until_capacity_frees(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": {"count": 1, "whole": True}})
        self.assertEqual(a["state"], "active")
        self.assertEqual(slots_of(a), [(TINY_NODE, 0, 0, 8)])
        b = create_alloc(self, c, {"gpus": MIG_3G, "name": "second"})
        self.assertEqual(b["state"], "pending")
        self.assertEqual((b["nodes"], b["placement"]), ([], []))
        w = create_alloc(self, c, {"gpus": {"count": 1, "whole": True}, "name": "third"})
        self.assertEqual(w["state"], "pending")
        self.assertError(c.patch("/v1/allocations/" + b["id"], {"members": 2}), 409, "conflict")
        pend = c.get("/v1/allocations?state=pending")
        self.assertEqual([x["id"] for x in pend.body["items"]], [b["id"], w["id"]])

        self.assertStatus(c.delete("/v1/allocations/" + a["id"]), 200)
        bb = self._wait_state(c, b["id"], "active")
        self.assertEqual(slots_of(bb), [(TINY_NODE, 0, 0, 4)])
        self.assertEqual(c.get("/v1/allocations/" + w["id"]).body["state"], "pending",
                         "a whole GPU was placed over a MIG instance")
        self.check_consistent()

        self.assertStatus(c.delete("/v1/allocations/" + b["id"]), 200)
        ww = self._wait_state(c, w["id"], "active")
        self.assertEqual(slots_of(ww), [(TINY_NODE, 0, 0, 8)])
        self.check_consistent()

    def test_release_pending_goes_straight_to_released(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": {"count": 1, "whole": True}})
        p = create_alloc(self, c, {"gpus": {"count": 1, "whole": True}})
        self.assertEqual(p["state"], "pending")
        r = c.delete("/v1/allocations/" + p["id"])
        self.assertStatus(r, 200)
        self.assertEqual(r.body["state"], "released")
        self.assertStatus(c.delete("/v1/allocations/" + a["id"]), 200)
        time.sleep(0.2)
        self.assertEqual(c.get("/v1/allocations/" + p["id"]).body["state"], "released",
                         "a released pending allocation was placed")
        self.check_consistent()

    def test_tenant_with_only_pending_allocation_cannot_be_deleted(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": {"count": 1, "whole": True}})
        t2, c2 = self.tenant_with_user("other")
        p = create_alloc(self, c2, {"gpus": {"count": 1, "whole": True}})
        self.assertEqual(p["state"], "pending")
        self.assertError(self.admin.delete("/v1/tenants/" + t2), 409, "conflict")
        self.assertStatus(self.admin.delete("/v1/allocations/" + p["id"]), 200)
        self.assertStatus(self.admin.delete("/v1/tenants/" + t2), 204)
        self.assertStatus(self.admin.delete("/v1/allocations/" + a["id"]), 200)

    def test_resize_insufficient_capacity(self):
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": MIG_3G})
        r = c.patch("/v1/allocations/" + a["id"], {"members": 3})
        self.assertError(r, 409, "insufficient_capacity")
        self.assertEqual(c.get("/v1/allocations/" + a["id"]).body["members"], 1)
        ok = c.patch("/v1/allocations/" + a["id"], {"members": 2})
        self.assertStatus(ok, 200)
        self.assertEqual(slots_of(ok.body), [(TINY_NODE, 0, 0, 4), (TINY_NODE, 0, 4, 4)])

    def test_list_is_creation_order(self):
        # Ids are random, so (created, id) is creation order only because
        # creation times strictly increase (ctl_created_ms): at a thousand
        # creates a second, two in the same millisecond are common.
        t, c = self.tenant_with_user()
        ids = [create_alloc(self, c, {"gpus": {"count": 1, "whole": True}})["id"] for _ in range(30)]
        listed = [x for x in self.all_allocs() if x["id"] in ids]
        self.assertEqual([x["id"] for x in listed], ids)
        created = [x["created"] for x in listed]
        self.assertEqual(len(set(created)), len(created), "creation times repeat")
        self.assertEqual(created, sorted(created))
        pend = c.get("/v1/allocations?state=pending&limit=7")
        self.assertEqual([x["id"] for x in pend.body["items"]],
                         [i for i in ids if i in {x["id"] for x in listed if x["state"] == "pending"}][:7])

    def _wait_state(self, c, aid, state):
        deadline = time.monotonic() + T(5)
        while True:
            g = c.get("/v1/allocations/" + aid)
            self.assertStatus(g, 200)
            if g.body["state"] == state:
                check_allocation(self, g.body)
                return g.body
            if time.monotonic() > deadline:
                self.fail("allocation %s stayed %s, want %s" % (aid, g.body["state"], state))
            time.sleep(0.05)


# ---------------------------------------------------------------- lists, ids


class TestPaginationAndIds(DaemonCase):
    def _check_pages(self, client, path, want_ids, key, limit=2):
        seen = []
        after = None
        pages = 0
        while True:
            q = "%s%slimit=%d" % (path, "&" if "?" in path else "?", limit)
            if after is not None:
                q += "&after=" + harness._quote(after)
            r = client.get(q)
            self.assertStatus(r, 200)
            self.assertEqual(set(r.body.keys()), {"items", "next"})
            self.assertLessEqual(len(r.body["items"]), limit)
            seen.extend(x[key] for x in r.body["items"])
            pages += 1
            after = r.body["next"]
            if after is None:
                break
            self.assertIsInstance(after, str)
            self.assertLess(pages, 1000)
        self.assertEqual(len(seen), len(set(seen)), "duplicates across pages: %r" % seen)
        for w in want_ids:
            self.assertIn(w, seen, "missing from paged list")
        full = client.get(path)
        self.assertEqual([x[key] for x in full.body["items"]], seen, "pages differ from one list")
        return seen

    def test_tenant_pages(self):
        names = sorted(uniq("page") for _ in range(7))
        for n in names:
            create_tenant(self, self.admin, n)
        seen = self._check_pages(self.admin, "/v1/tenants", names, "name")
        self.assertEqual(seen, sorted(seen))

    def test_allocation_pages(self):
        t = create_tenant(self, self.admin)["name"]
        ids = [create_alloc(self, self.admin, {"tenant": t, "pool": "cpu", "cpus": 1})["id"]
               for _ in range(5)]
        seen = self._check_pages(self.admin, "/v1/allocations?tenant=" + t, ids, "id")
        self.assertEqual(seen, ids, "allocations not in creation order")
        for i in ids:
            self.assertStatus(self.admin.delete("/v1/allocations/" + i), 200)

    def test_token_pages(self):
        t = create_tenant(self, self.admin)["name"]
        ids = [issue_token(self, self.admin, "tenant-user", tenant=t, user="p%d" % i)[0]["id"]
               for i in range(5)]
        seen = self._check_pages(self.admin, "/v1/tokens?tenant=" + t, ids, "id")
        self.assertEqual(sorted(seen), sorted(ids))
        self.assertEqual(seen, sorted(seen), "tokens not ordered by id")

    def test_node_pages(self):
        self._check_pages(self.admin, "/v1/nodes", SMALL_NODES, "name", limit=3)

    def test_limit_default_and_max(self):
        for q in ("limit=1", "limit=1000"):
            r = self.admin.get("/v1/tenants?" + q)
            self.assertStatus(r, 200, q)

    def test_request_id_echoed(self):
        r = self.admin.get("/v1/version", headers={"X-Request-Id": "test.req-42_A"})
        self.assertStatus(r, 200)
        self.assertEqual(r.header("X-Request-Id"), "test.req-42_A")
        e = self.admin.get("/v1/tenants/" + uniq("absent"), headers={"X-Request-Id": "err-id-7"})
        self.assertError(e, 404, "not_found")
        self.assertEqual(e.header("X-Request-Id"), "err-id-7")
        self.assertEqual(e.body["request_id"], "err-id-7")
        u = self.d.request("GET", "/v1/version", headers={"X-Request-Id": "u-1"})
        self.assertError(u, 401, "unauthorized")
        self.assertEqual(u.body["request_id"], "u-1")

    def test_request_id_generated(self):
        a = self.admin.get("/v1/tenants/" + uniq("absent"))
        b = self.admin.get("/v1/tenants/" + uniq("absent"))
        check_error_shape(self, a)
        check_error_shape(self, b)
        self.assertNotEqual(a.body["request_id"], b.body["request_id"])
        ok = self.admin.get("/v1/version")
        self.assertRegex(ok.header("X-Request-Id") or "", harness.REQUEST_ID_RE)

    def test_bad_request_id_not_echoed(self):
        for bad in ("x" * 65, "has space", "semi;colon", ""):
            r = self.admin.get("/v1/version", headers={"X-Request-Id": bad})
            self.assertIn(r.status, (200, 400), repr(r))
            rid = r.header("X-Request-Id") or ""
            self.assertRegex(rid, harness.REQUEST_ID_RE, "bad request id %r answered with %r" % (bad, rid))
            self.assertNotEqual(rid, bad)


# ---------------------------------------------------------------- nodes, gpus, capacity


class TestInfrastructure(FreshDaemonCase):
    def test_nodes(self):
        nodes = self.admin.list_all("/v1/nodes")
        self.assertEqual([n["name"] for n in nodes], SMALL_NODES, "nodes not in inventory order")
        for n in nodes:
            self.assertEqual(set(n.keys()), harness.NODE_KEYS, repr(n))
            self.assertEqual(n["state"], "schedulable")
            self.assertEqual(n["cpus"], SMALL_NODE_CPUS[n["name"]])
            self.assertEqual(n["memory_mib"], SMALL_NODE_MEM[n["name"]])
            self.assertEqual((n["cpus_used"], n["memory_mib_used"], n["members"]), (0, 0, 0))
            if n["name"] in SMALL_GPU_NODES:
                self.assertEqual((n["pool"], n["gpus"], n["gpu_model"]), ("gpu", 8, "h100-80gb"))
            else:
                self.assertEqual((n["pool"], n["gpus"]), ("cpu", 0))
            if n["port"] is not None:
                self.assertEqual(set(n["port"].keys()), harness.PORT_KEYS, repr(n))
                self.assertRegex(n["port"]["guid"], r"^0x[0-9a-f]{16}$")
            one = self.admin.get("/v1/nodes/" + n["name"])
            self.assertStatus(one, 200)
            self.assertEqual(one.body, n)
        gpu_pool = self.admin.list_all("/v1/nodes?pool=gpu")
        self.assertEqual([n["name"] for n in gpu_pool], SMALL_GPU_NODES)
        self.assertError(self.admin.get("/v1/nodes/no-such-node"), 404, "not_found")

    def test_gpus_show_mig_instances(self):
        gpus = self.gpus()
        self.assertEqual(len(gpus), 24)
        self.assertEqual(sorted((g["node"], g["index"]) for g in gpus),
                         sorted((n, i) for n in SMALL_GPU_NODES for i in range(8)))
        for g in gpus:
            self.assertEqual((g["model"], g["mig_enabled"], g["memory_slices"], g["compute_slices"]),
                             ("h100-80gb", True, 8, 7))
            self.assertEqual((g["free_slices"], g["compute_used"], g["free_mask"], g["instances"],
                              g["whole_used"]), (8, 0, "0b11111111", [], False))
        t, c = self.tenant_with_user()
        a = create_alloc(self, c, {"gpus": MIG_3G})
        b = create_alloc(self, c, {"gpus": {"count": 1, "profile": "2g.20gb"}})
        w = create_alloc(self, c, {"gpus": {"count": 1, "whole": True}})
        g0 = [g for g in self.gpus("sm-n01") if g["index"] == 0][0]
        self.assertEqual(g0["node"], "sm-n01")
        self.assertEqual(sorted(g0["instances"], key=lambda i: i["start"]), [
            {"allocation": a["id"], "profile": "3g.40gb", "start": 0, "width": 4, "whole": False},
            {"allocation": b["id"], "profile": "2g.20gb", "start": 4, "width": 2, "whole": False},
        ])
        self.assertEqual((g0["free_slices"], g0["compute_used"], g0["free_mask"], g0["whole_used"]),
                         (2, 5, "0b11000000", False))
        g1 = [g for g in self.gpus("sm-n01") if g["index"] == 1][0]
        self.assertEqual(g1["instances"], [{"allocation": w["id"], "profile": None, "start": 0,
                                            "width": 8, "whole": True}])
        self.assertEqual((g1["free_slices"], g1["whole_used"], g1["free_mask"]), (0, True, "0b00000000"))
        self.assertEqual(len(self.gpus("sm-n02")), 8)
        self.assertTrue(all(g["node"] == "sm-n02" for g in self.gpus("sm-n02")))
        self.check_consistent()
        self.assertStatus(c.delete("/v1/allocations/" + a["id"]), 200)
        g0 = [g for g in self.gpus("sm-n01") if g["index"] == 0][0]
        self.assertEqual([i["allocation"] for i in g0["instances"]], [b["id"]])
        self.assertEqual(g0["free_mask"], "0b11001111")
        self.check_consistent()

    def test_capacity_follows_allocations(self):
        r = self.admin.get("/v1/capacity")
        self.assertStatus(r, 200)
        c0 = r.body
        self.assertEqual(set(c0.keys()), harness.CAPACITY_KEYS)
        cpus = sum(SMALL_NODE_CPUS.values())
        mem = sum(SMALL_NODE_MEM.values())
        self.assertEqual(c0, {"nodes": 4, "schedulable_nodes": 4, "gpus": 24, "gpus_free": 24,
                              "memory_slices": 192, "memory_slices_free": 192,
                              "compute_slices": 168, "compute_slices_free": 168,
                              "cpus": cpus, "cpus_free": cpus, "memory_mib": mem,
                              "memory_mib_free": mem})
        t, c = self.tenant_with_user()
        self.assertEqual(c.get("/v1/capacity").body, c0, "tenant sees another capacity")
        a = create_alloc(self, c, {"gpus": MIG_3G, "cpus": 8, "memory_mib": 1000, "members": 2})
        w = create_alloc(self, c, {"gpus": {"count": 2, "whole": True}, "cpus": 1, "memory_mib": 24})
        c1 = self.admin.get("/v1/capacity").body
        self.assertEqual(c1["memory_slices_free"], 192 - 8 - 16)
        self.assertEqual(c1["compute_slices_free"], 168 - 6 - 14)
        self.assertEqual(c1["gpus_free"], 24 - 1 - 2)
        self.assertEqual(c1["cpus_free"], cpus - 16 - 1)
        self.assertEqual(c1["memory_mib_free"], mem - 2000 - 24)
        for k in ("nodes", "schedulable_nodes", "gpus", "memory_slices", "compute_slices", "cpus",
                  "memory_mib"):
            self.assertEqual(c1[k], c0[k], k)
        for x in (a, w):
            self.assertStatus(c.delete("/v1/allocations/" + x["id"]), 200)
        self.assertEqual(self.admin.get("/v1/capacity").body, c0, "release did not give back")


# ---------------------------------------------------------------- restart


class TestRestart(FreshDaemonCase):
    def test_state_survives_restart(self):
        t = create_tenant(self, self.admin, description="keeps")["name"]
        gone = create_tenant(self, self.admin)["name"]
        self.assertStatus(self.admin.delete("/v1/tenants/" + gone), 204)
        tok, secret = issue_token(self, self.admin, "tenant-user", tenant=t, user="henry")
        rv, rv_secret = issue_token(self, self.admin, "tenant-user", tenant=t, user="ivy")
        self.assertStatus(self.admin.delete("/v1/tokens/" + rv["id"]), 204)
        c = self.d.client(secret)
        a = create_alloc(self, c, {"gpus": MIG_3G, "cpus": 4, "memory_mib": 512})
        w = create_alloc(self, c, {"gpus": {"count": 1, "whole": True}})
        r = create_alloc(self, c, {"gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertStatus(c.delete("/v1/allocations/" + r["id"]), 200)
        self.assertStatus(self.admin.post("/v1/nodes/sm-n03/cordon"), 200)
        before = {x["id"]: x for x in self.all_allocs()}
        tenants_before = self.admin.list_all("/v1/tenants")
        tokens_before = self.admin.list_all("/v1/tokens")
        cap_before = self.admin.get("/v1/capacity").body
        path = os.path.join(self.d.state_dir, "admin.token")
        with open(path) as f:
            admin_file = f.read()
        old_admin = self.d.admin_token

        self.d.restart()

        with open(path) as f:
            self.assertEqual(f.read(), admin_file, "admin.token rewritten on restart")
        self.assertEqual(self.d.admin_token, old_admin)
        self.assertStatus(self.admin.get("/v1/whoami"), 200)
        self.assertEqual(self.admin.list_all("/v1/tenants"), tenants_before)
        self.assertEqual(self.admin.list_all("/v1/tokens"), tokens_before)
        self.assertError(self.admin.get("/v1/tenants/" + gone), 404, "not_found")
        self.assertEqual(self.admin.get("/v1/tenants/" + t).body["description"], "keeps")
        self.assertEqual(c.get("/v1/whoami").body["user"], "henry")
        self.assertError(self.d.client(rv_secret).get("/v1/whoami"), 401, "unauthorized")
        after = {x["id"]: x for x in self.all_allocs()}
        self.assertEqual(after, before)
        self.assertEqual(after[a["id"]]["state"], "active")
        self.assertEqual(after[r["id"]]["state"], "released")
        self.assertEqual(self.admin.get("/v1/nodes/sm-n03").body["state"], "cordoned")
        self.assertEqual(self.admin.get("/v1/capacity").body, cap_before)
        self.assertEqual(self.admin.get("/v1/nodes/sm-n01").body["cpus_used"], 4)
        self.check_consistent()
        # the restored allocations still hold their GPUs
        a2 = create_alloc(self, c, {"gpus": MIG_3G})
        self.assertEqual(slots_of(a2), [("sm-n01", 0, 4, 4)])
        w2 = create_alloc(self, c, {"gpus": {"count": 1, "whole": True}})
        self.assertEqual(slots_of(w2), [("sm-n01", 2, 0, 8)])
        self.assertNotEqual(slots_of(w2), slots_of(w))
        self.check_consistent()
        # and a second restart changes nothing either
        snap = {x["id"]: x for x in self.all_allocs()}
        self.d.restart()
        self.assertEqual({x["id"]: x for x in self.all_allocs()}, snap)


class TestEnginePrimedOnRestart(FreshDaemonCase):
    """After a restart the isostack engine is told the newest allocations,
    whatever became of them (iso_placer_learn), so the first requests after
    it do not stand for all demand (docs/placement.md). small.yaml pins
    first-fit, which learns nothing; rbac.yaml runs the default engine."""

    config = "rbac.yaml"

    def test_primed_from_recent_allocations(self):
        t, c = self.tenant_with_user()
        create_alloc(self, c, {"gpus": {"count": 1, "whole": True}, "members": 2, "cpus": 8})
        create_alloc(self, c, {"gpus": MIG_3G, "cpus": 4, "memory_mib": 512})
        gone = create_alloc(self, c, {"gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertStatus(c.delete("/v1/allocations/" + gone["id"]), 200)
        self.assertNotIn("engine_primed", self.d.stderr_text(-1), "nothing ran at the first start")

        self.d.restart()

        log = self.d.stderr_text(-1)
        self.assertIn("engine_primed", log)
        self.assertIn("policy=isostack allocations=3", log,
                      "the released one was demand too, as before the restart")
        self.assertNotIn("engine_learn_failed", log)
        create_alloc(self, c, {"gpus": MIG_3G})
        self.check_consistent()


if __name__ == "__main__":
    harness.main()

#!/usr/bin/env python3
"""test_tenancy.py: the tenancy policy through the API, on a real isostackd
(docs/tenancy.md, "The API"): organisations, projects and quotas; the quota
table's semantics (guarantee, borrowing from an idle sibling, the lending
limit, a hard limit refused at admission naming the limit, an over-quota
request waiting with its reason); the queue in deterministic fair-share order
and what each tenant may see of it; isolation classes and spreading; a Lua
admission policy; preemption by reclaim with its grace period and audit trail.

tests/api/data/tenancy.yaml: 4 nodes x 2 MIG H100s = 56 compute slices of
kind "h100-80gb"; a 1g.10gb instance is 1 slice, a 7g.80gb one 7.

Run: python3 tests/api/test_tenancy.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T  # noqa: E402

CONFIG = "tenancy.yaml"
KIND = "h100-80gb"
SLICE = {"count": 1, "profile": "1g.10gb"}
FULL_GPU = {"count": 1, "profile": "7g.80gb"}
POLICY = os.path.join(harness.SOURCE_ROOT, "examples", "policies", "hipaa_exclusive_node.lua")


def quota(g, borrow=None, lend=None):
    q = {"guaranteed": g}
    if borrow is not None:
        q["borrow_limit"] = borrow
    if lend is not None:
        q["lend_limit"] = lend
    return {KIND: q}


class TenancyCase(ApiTestCase):
    """One fresh daemon per test: quotas and usage do not leak between them."""

    extra_args = ()

    def setUp(self):
        self.d = Daemon(CONFIG, extra_args=self.extra_args)
        self.d.start()
        self.admin = self.d.client()

    def tearDown(self):
        try:
            self.d.stop()
        finally:
            self.d.cleanup()

    def tenant(self, name, **policy):
        body = {"name": name}
        body.update(policy)
        r = self.admin.post("/v1/tenants", body)
        self.assertStatus(r, 201)
        for k, v in policy.items():
            self.assertEqual(r.body[k], v, repr(r))
        return r.body

    def token(self, tenant, role="tenant-admin"):
        return harness.issue_token(self, self.admin, role, tenant=tenant, user=tenant + "-u")[1]

    def alloc(self, client, members, gpus=SLICE, status=201, **extra):
        body = {"members": members, "gpus": gpus}
        body.update(extra)
        r = client.post("/v1/allocations", body)
        self.assertStatus(r, status, "create %s" % json.dumps(body))
        if status == 201:
            harness.check_allocation(self, r.body)
        return r.body

    def state(self, aid):
        return self.admin.get("/v1/allocations/" + aid).body

    def wait_state(self, aid, want, timeout=10):
        deadline = time.monotonic() + T(timeout)
        while time.monotonic() < deadline:
            a = self.state(aid)
            if a["state"] == want:
                return a
            time.sleep(0.05)
        self.fail("allocation %s never became %s: %r" % (aid, want, self.state(aid)))

    def set_quota(self, path, body, status=200):
        r = self.admin.request("PUT", path, body)
        self.assertStatus(r, status, "PUT %s %s" % (path, json.dumps(body)))
        return r


class TestQuotas(TenancyCase):
    def test_accounts_crud_and_namespace(self):
        r = self.admin.post("/v1/orgs", {"name": "acme", "shares": 2})
        self.assertStatus(r, 201)
        self.assertEqual((r.body["name"], r.body["shares"]), ("acme", 2))
        self.assertError(self.admin.post("/v1/orgs", {"name": "acme"}), 409, "conflict")
        self.tenant("ta", org="acme", shares=3, isolation="shared", tags="gpu-heavy,hipaa")
        # one namespace for organisations and tenants
        self.assertError(self.admin.post("/v1/orgs", {"name": "ta"}), 409, "conflict", "name")
        self.assertError(self.admin.post("/v1/tenants", {"name": "acme"}), 409, "conflict", "name")
        # strict bodies, errors naming the field
        for body, field in (({"name": "x", "shares": 0}, "shares"),
                            ({"name": "x", "shares": "1"}, "shares"),
                            ({"name": "x", "isolation": "exclusive-gpus"}, "isolation"),
                            ({"name": "x", "tags": "Hipaa"}, "tags"),
                            ({"name": "x", "tags": "a,,b"}, "tags"),
                            ({"name": "x", "org": "nosuch"}, "org"),
                            ({"name": "x", "colour": "red"}, "colour")):
            with self.subTest(body=body):
                self.assertError(self.admin.post("/v1/tenants", body), 400, "invalid_argument", field)
        self.assertEqual([o["name"] for o in self.admin.get("/v1/orgs").body["items"]], ["acme"])
        # projects: "tenant/project" must stay under 64 characters
        r = self.admin.post("/v1/tenants/ta/projects", {"name": "train"})
        self.assertStatus(r, 201)
        self.assertError(self.admin.post("/v1/tenants/ta/projects", {"name": "train"}), 409, "conflict")
        self.assertError(self.admin.post("/v1/tenants/ta/projects", {"name": "p" * 62}), 400,
                         "invalid_argument", "name")
        self.assertEqual([p["name"] for p in self.admin.get("/v1/tenants/ta/projects").body["items"]],
                         ["train"])
        # an organisation with tenants cannot go
        self.assertError(self.admin.delete("/v1/orgs/acme"), 409, "conflict")
        # allocations name an existing project only
        tok = self.token("ta")
        c = self.d.client(tok)
        self.assertError(c.post("/v1/allocations", {"gpus": SLICE, "project": "nosuch"}), 400,
                         "invalid_argument", "project")
        a = self.alloc(c, 1, project="train", priority=5, on_preempt="fail", duration_s=600,
                       spread="node")
        self.assertEqual((a["project"], a["priority"], a["on_preempt"], a["duration_s"], a["spread"]),
                         ("train", 5, "fail", 600, "node"))
        for body, field in (({"on_preempt": "later"}, "on_preempt"), ({"priority": 5000}, "priority"),
                            ({"duration_s": -1}, "duration_s"), ({"spread": "pdu"}, "spread"),
                            ({"isolation": "private"}, "isolation"), ({"priority": "high"}, "priority")):
            with self.subTest(body=body):
                b = dict(body, gpus=SLICE)
                self.assertError(c.post("/v1/allocations", b), 400, "invalid_argument", field)
        # a project in use cannot go; once released it can
        self.assertError(self.admin.delete("/v1/tenants/ta/projects/train"), 409, "conflict")
        self.assertStatus(c.delete("/v1/allocations/" + a["id"]), 200)
        self.assertStatus(self.admin.delete("/v1/tenants/ta/projects/train"), 204)
        self.assertError(self.admin.get("/v1/tenants/ta/projects/train/quota"), 404, "not_found")
        # move the tenant out of its organisation (it holds nothing), then delete the org
        r = self.admin.patch("/v1/tenants/ta", {"org": ""})
        self.assertStatus(r, 200)
        self.assertIsNone(r.body["org"])
        self.assertStatus(self.admin.delete("/v1/orgs/acme"), 204)
        self.assertEqual(self.admin.get("/v1/orgs").body["items"], [])
        # audited, with the change
        actions = [it["event"]["action"] for it in self.admin.list_all("/v1/audit/events")]
        for want in ("org.create", "project.create", "project.delete", "org.delete", "tenant.update"):
            self.assertIn(want, actions)

    def test_quota_table(self):
        self.assertStatus(self.admin.post("/v1/orgs", {"name": "acme"}), 201)
        # the organisation: 14 slices guaranteed, borrows nothing from outside
        r = self.set_quota("/v1/orgs/acme/quota", quota(14, borrow=0))
        self.assertEqual(r.body["quotas"][KIND], {"guaranteed": 14, "borrow_limit": 0, "lend_limit": None})
        self.assertEqual(r.body["level"], "organisation")
        self.tenant("ta", org="acme")
        self.tenant("tb", org="acme")
        self.set_quota("/v1/tenants/ta/quota", quota(7, borrow=7, lend=3))
        self.set_quota("/v1/tenants/tb/quota", quota(7, borrow=5))
        # nesting: 7 + 8 > 14
        r = self.set_quota("/v1/tenants/tb/quota", quota(8), status=400)
        self.assertError(r, 400, "invalid_argument", "quota.tb.%s" % KIND)
        self.assertIn("14", r.body["error"]["message"])
        self.assertEqual(self.admin.get("/v1/tenants/tb/quota").body["quotas"][KIND]["guaranteed"], 7,
                         "a refused quota changed the quota")
        # bad bodies
        for body, field in (({"gpuz": {"guaranteed": 1}}, "gpuz"), ({KIND: 3}, KIND),
                            ({KIND: {"guaranteed": -1}}, KIND + ".guaranteed"),
                            ({KIND: {"guaranteed": 1, "burst": 2}}, KIND + ".burst"),
                            ({KIND: {"borrow_limit": 2}}, KIND)):
            with self.subTest(body=body):
                r = self.set_quota("/v1/tenants/tb/quota", body, status=400)
                self.assertEqual(r.body["error"]["field"].split(".")[0], field.split(".")[0], repr(r))
        # an organisation's name is no tenant, and the reverse
        self.assertError(self.admin.get("/v1/tenants/acme/quota"), 404, "not_found")
        self.assertError(self.admin.get("/v1/orgs/ta/quota"), 404, "not_found")

        ta, tb = self.d.client(self.token("ta")), self.d.client(self.token("tb"))
        # hard limit: 13 > 7 guaranteed + 5 borrowing limit, refused at admission
        r = tb.post("/v1/allocations", {"members": 13, "gpus": SLICE})
        self.assertError(r, 422, "unsatisfiable", "quota.tb.%s" % KIND)
        self.assertIn("hard limit 12", r.body["error"]["message"])
        # the guarantee
        b7 = self.alloc(tb, 7)
        self.assertEqual(b7["state"], "active")
        # borrowing 4 > ta's lending limit 3: waits, saying why
        b4 = self.alloc(tb, 4)
        self.assertEqual(b4["state"], "pending")
        self.assertTrue(b4["reason"].startswith("waiting for quota: "), b4["reason"])
        # ... without the sibling tenant's idle or borrowed figures (issue 12 s.4)
        self.assertIn("not idle to borrow now", b4["reason"])
        self.assertNotIn("idle to lend", b4["reason"])
        # borrowing 3 from the idle sibling: fine
        b3 = self.alloc(tb, 3)
        self.assertEqual(b3["state"], "active", repr(b3))
        # the tenant sees its own queue entry and why it waits
        q = tb.get("/v1/queue")
        self.assertStatus(q, 200)
        self.assertEqual([i["id"] for i in q.body["items"]], [b4["id"]])
        self.assertTrue(q.body["items"][0]["waiting"].startswith("waiting for quota: "), q.body)
        self.assertEqual(q.body["items"][0]["position"], 1)
        # ta's guarantee is admitted although tb borrows (reclaim takes it back)
        a7 = self.alloc(ta, 7)
        self.assertEqual(a7["state"], "active")
        # usage shows each tenant's own holdings
        u = {x["account"]: x for x in self.admin.get("/v1/usage").body["items"]}
        self.assertEqual(u["tb"]["used"][KIND], 10)
        self.assertEqual(u["ta"]["used"][KIND], 7)
        self.assertEqual(u["acme"]["used"][KIND], 17)
        qg = self.admin.get("/v1/tenants/tb/quota").body
        self.assertEqual(qg["used"][KIND], 10)
        self.assertEqual(qg["parent"], "acme")
        # release the borrowed 3: b4 still needs to borrow 4 > 3 -> waits
        self.assertStatus(tb.delete("/v1/allocations/" + b3["id"]), 200)
        self.assertEqual(self.state(b4["id"])["state"], "pending")
        # release the 7: b4 fits the guarantee now and starts
        self.assertStatus(tb.delete("/v1/allocations/" + b7["id"]), 200)
        self.wait_state(b4["id"], "active")
        # a tenant-admin sets its own projects' quotas, within the tenant's
        self.assertStatus(tb.post("/v1/tenants/tb/projects", {"name": "p1"}), 201)
        r = tb.request("PUT", "/v1/tenants/tb/projects/p1/quota", quota(4))
        self.assertStatus(r, 200)
        self.assertEqual(r.body["account"], "tb/p1")
        r = tb.request("PUT", "/v1/tenants/tb/projects/p1/quota", quota(8))
        self.assertError(r, 400, "invalid_argument", "quota.tb/p1.%s" % KIND)
        self.assertError(tb.request("PUT", "/v1/tenants/tb/quota", quota(1)), 403, "forbidden")
        self.assertError(tb.get("/v1/tenants/ta/quota"), 404, "not_found")
        self.assertError(tb.get("/v1/orgs/acme/quota"), 404, "not_found")
        # every quota change is audited
        evs = [it["event"] for it in self.admin.list_all("/v1/audit/events")
               if it["event"]["action"] == "quota.set"]
        self.assertEqual(sorted(e["object"]["id"] for e in evs if e["outcome"] == "success"),
                         ["acme", "ta", "tb", "tb/p1"])

    def test_quotas_survive_restart(self):
        self.assertStatus(self.admin.post("/v1/orgs", {"name": "acme"}), 201)
        self.set_quota("/v1/orgs/acme/quota", quota(14, borrow=0))
        self.tenant("ta", org="acme", shares=2)
        self.set_quota("/v1/tenants/ta/quota", quota(7, borrow=1, lend=3))
        before = self.admin.get("/v1/tenants/ta/quota").body
        self.d.restart()
        self.admin = self.d.client()
        self.assertEqual(self.admin.get("/v1/tenants/ta/quota").body, before)
        # and the limit still holds
        tok = self.token("ta")
        r = self.d.client(tok).post("/v1/allocations", {"members": 9, "gpus": SLICE})
        self.assertError(r, 422, "unsatisfiable", "quota.ta.%s" % KIND)


class TestQueue(TenancyCase):
    def fill(self, client):
        """The whole cluster: 8 GPUs of 7 slices."""
        a = self.alloc(client, 8, gpus=FULL_GPU)
        self.assertEqual(a["state"], "active", repr(a))
        return a

    def test_fair_share_order_and_visibility(self):
        names = {"heavy": "hv-tenant-qx", "light": "lt-tenant-zy"}
        for n in names.values():
            self.tenant(n)
        tok = {k: self.token(v) for k, v in names.items()}
        cl = {k: self.d.client(t) for k, t in tok.items()}
        self.fill(cl["heavy"])
        time.sleep(0.3)  # heavy accrues decayed usage; light has none
        # (a higher priority than the running work would preempt it)
        h2 = self.alloc(cl["heavy"], 1, priority=-5)
        h1 = self.alloc(cl["heavy"], 1, name="hv-job-secret")
        l1 = self.alloc(cl["light"], 1, name="lt-job-secret")
        for a in (h1, h2, l1):
            self.assertEqual(a["state"], "pending")
            self.assertTrue(a["reason"].startswith("waiting for capacity"), a["reason"])
        q1 = self.admin.get("/v1/queue").body["items"]
        # light (less decayed usage) first although it came last; then
        # heavy's by priority before submit time
        self.assertEqual([i["id"] for i in q1], [l1["id"], h1["id"], h2["id"]])
        self.assertEqual([i["position"] for i in q1], [1, 2, 3])
        # deterministic: asked again, the same answer
        for _ in range(3):
            self.assertEqual([i["id"] for i in self.admin.get("/v1/queue").body["items"]],
                             [i["id"] for i in q1])
        # paged like every list; the cursor is the last position shown
        p1 = self.admin.get("/v1/queue?limit=2")
        self.assertStatus(p1, 200)
        self.assertEqual([i["id"] for i in p1.body["items"]], [l1["id"], h1["id"]])
        self.assertEqual(p1.body["next"], "2")
        p2 = self.admin.get("/v1/queue?limit=2&after=" + p1.body["next"])
        self.assertEqual([i["id"] for i in p2.body["items"]], [h2["id"]])
        self.assertIsNone(p2.body["next"])
        self.assertIsNone(self.admin.get("/v1/queue").body["next"])
        for bad in ("after=0", "after=x", "after=2x", "after=-1", "limit=0", "limit=1001", "sort=id"):
            with self.subTest(query=bad):
                r = self.admin.get("/v1/queue?" + bad)
                self.assertStatus(r, 400)
                self.assertEqual(r.body["error"]["field"], bad.split("=")[0])
        # fair-share standing: light ranks above heavy
        u = {x["account"]: x for x in self.admin.get("/v1/usage").body["items"]}
        self.assertLess(u[names["light"]]["rank"], u[names["heavy"]]["rank"])
        self.assertIsNone(u[names["light"]]["level_fair_share"])  # infinite: no usage
        self.assertGreater(u[names["heavy"]]["decayed_hours"][KIND], 0)
        # each tenant sees its own entries only, with position and reason
        secrets = {"heavy": {names["heavy"], h1["id"], h2["id"], "hv-job-secret", "hv-tenant"},
                   "light": {names["light"], l1["id"], "lt-job-secret", "lt-tenant"}}
        for me, other in (("heavy", "light"), ("light", "heavy")):
            for path in ("/v1/queue", "/v1/usage", "/v1/tenants/%s/quota" % names[me],
                         "/v1/allocations"):
                r = cl[me].get(path)
                self.assertStatus(r, 200, path)
                for s in secrets[other]:
                    self.assertNotIn(s, r.text, "%s sees %r of %s at %s" % (me, s, other, path))
            items = cl[me].get("/v1/queue").body["items"]
            self.assertTrue(all(i["tenant"] == names[me] for i in items), items)
            self.assertEqual({i["id"] for i in items},
                             {h1["id"], h2["id"]} if me == "heavy" else {l1["id"]})
            # positions count only the tenant's own pending work (issue 12 section 4)
            self.assertEqual([i["position"] for i in items], list(range(1, len(items) + 1)))
            for i in items:
                self.assertIn("position %d among" % i["position"], i["reason"])
                self.assertNotIn(" of 3", i["reason"])
            usage = cl[me].get("/v1/usage").body["items"]
            self.assertEqual([x["account"] for x in usage], [names[me]])
            # another tenant's quota answers like a missing one
            h = {"X-Request-Id": "same-as-missing"}
            r1 = cl[me].get("/v1/tenants/%s/quota" % names[other], headers=h)
            r2 = cl[me].get("/v1/tenants/nosuch-tenant-qq/quota", headers=h)
            self.assertEqual((r1.status, r1.raw), (r2.status, r2.raw))
        light_item = cl["light"].get("/v1/queue").body["items"][0]
        self.assertEqual(light_item["position"], 1)
        # the heavy tenant's first item is position 1 too: it learns nothing
        # of the light tenant's work ranked ahead of it (issue 12 section 4)
        heavy_items = cl["heavy"].get("/v1/queue").body["items"]
        self.assertEqual(heavy_items[0]["position"], 1)
        self.assertNotIn("other accounts", heavy_items[0]["reason"])
        # the operators still see the whole order
        self.assertEqual([i["position"] for i in self.admin.get("/v1/queue").body["items"]],
                         [1, 2, 3])


class TestIsolation(TenancyCase):
    def nodes_of(self, a):
        return {m["node"] for m in self.state(a["id"])["nodes"]}

    def gpus_of(self, a):
        return {(p["node"], p["gpu"]) for p in self.state(a["id"])["placement"]}

    def test_exclusive_node_and_gpu_and_spread(self):
        self.tenant("iso-x", isolation="exclusive-node")
        self.tenant("iso-y")
        self.tenant("iso-z")
        x, y, z = (self.d.client(self.token(n)) for n in ("iso-x", "iso-y", "iso-z"))
        ax = self.alloc(x, 1)  # the tenant's class applies
        self.assertEqual(ax["state"], "active")
        xnode = self.nodes_of(ax)
        self.assertEqual(len(xnode), 1)
        # exclusive-gpu by request
        ay = self.alloc(y, 1, isolation="exclusive-gpu")
        self.assertEqual(ay["isolation"], "exclusive-gpu")
        ygpu = self.gpus_of(ay)
        # z fills what is left with single slices: never on x's node, never on y's GPU
        zs = []
        while True:
            a = self.alloc(z, 1)
            if a["state"] != "active":
                break
            zs.append(a)
        self.assertGreater(len(zs), 10)
        for a in zs:
            self.assertFalse(self.nodes_of(a) & xnode, "tenant z on exclusive node %s" % xnode)
            self.assertFalse(self.gpus_of(a) & ygpu, "tenant z on exclusive GPU %s" % ygpu)
        # x may still add its own work to its node
        ax2 = self.alloc(x, 1)
        self.assertEqual(ax2["state"], "active")
        for a in zs:
            self.assertStatus(z.delete("/v1/allocations/" + a["id"]), 200)
        # spread=node: members on distinct nodes
        sp = self.alloc(z, 3, spread="node")
        self.assertEqual(sp["state"], "active", repr(sp))
        nodes = [m["node"] for m in self.state(sp["id"])["nodes"]]
        self.assertEqual(len(nodes), len(set(nodes)), nodes)
        self.assertFalse(set(nodes) & xnode)
        # 4 members spread over nodes: only 3 nodes are not x's -> cannot start now
        sp4 = self.alloc(z, 4, spread="node")
        self.assertEqual(sp4["state"], "pending")


    def test_exclusive_survives_restart(self):
        # The exclusive marks are rebuilt with the allocations after a restart:
        # another tenant's work still never lands on that node or GPU.
        self.tenant("rx")
        self.tenant("ry")
        self.tenant("rz")
        x, y = (self.d.client(self.token(n)) for n in ("rx", "ry"))
        ax = self.alloc(x, 1, isolation="exclusive-node")
        ay = self.alloc(y, 1, isolation="exclusive-gpu")
        xnode, ygpu = self.nodes_of(ax), self.gpus_of(ay)
        self.d.restart()
        self.admin = self.d.client()
        z = self.d.client(self.token("rz"))
        placed = 0
        while True:
            a = self.alloc(z, 1)
            if a["state"] != "active":
                break
            placed += 1
            self.assertFalse(self.nodes_of(a) & xnode, "after a restart: on exclusive node")
            self.assertFalse(self.gpus_of(a) & ygpu, "after a restart: on exclusive GPU")
        self.assertGreater(placed, 10)


class TestAdmissionPolicy(TenancyCase):
    extra_args = ("--admission-policy", POLICY)

    def test_hipaa_needs_exclusive_node(self):
        self.tenant("med", tags="hipaa")
        self.tenant("lab")
        med, lab = self.d.client(self.token("med")), self.d.client(self.token("lab"))
        r = med.post("/v1/allocations", {"gpus": SLICE})
        self.assertError(r, 403, "forbidden", "policy.hipaa_exclusive_node.lua")
        self.assertIn("is tagged hipaa", r.body["error"]["message"])
        a = self.alloc(med, 1, isolation="exclusive-node")
        self.assertEqual(a["state"], "active")
        self.alloc(lab, 1)  # untagged: shared is fine
        # the tenant's own class satisfies the policy too
        self.assertStatus(self.admin.patch("/v1/tenants/med", {"isolation": "exclusive-node"}), 200)
        self.alloc(med, 1)
        refused = [it["event"] for it in self.admin.list_all("/v1/audit/events")
                   if it["event"]["action"] == "allocation.create" and it["event"]["outcome"] != "success"]
        self.assertTrue(refused, "the refused request is not in the audit log")


class TestPreemption(TenancyCase):
    extra_args = ("--preempt-grace", "1")

    def test_reclaim(self):
        self.tenant("lender")
        self.tenant("borrower")
        self.set_quota("/v1/tenants/lender/quota", quota(14))
        self.set_quota("/v1/tenants/borrower/quota", quota(0))
        lender = self.d.client(self.token("lender"))
        borrower = self.d.client(self.token("borrower"))
        b = self.alloc(borrower, 8, gpus=FULL_GPU)  # all 56 slices, all borrowed
        self.assertEqual(b["state"], "active")
        t0 = time.monotonic()
        a = self.alloc(lender, 2, gpus=FULL_GPU)  # within its guarantee of 14
        self.assertEqual(a["state"], "pending")
        # the borrower is signalled, and told why
        sig = self.state(b["id"])
        self.assertEqual(sig["state"], "active")
        self.assertTrue(sig["reason"].startswith("preempted (reclaim)"), sig["reason"])
        # evicted after the grace period, requeued; the lender's starts
        self.wait_state(a["id"], "active")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9, "evicted before the grace period")
        bb = self.state(b["id"])
        self.assertEqual(bb["state"], "pending")
        self.assertTrue(bb["reason"].startswith("requeued") or bb["reason"].startswith("waiting"),
                        bb["reason"])
        # the borrower cannot take it back: it is above its guarantee
        time.sleep(0.3)
        self.assertEqual(self.state(a["id"])["state"], "active")
        # audited with the reason
        evs = [it["event"] for it in self.admin.list_all("/v1/audit/events")
               if it["event"]["object"]["id"] == b["id"]]
        signal = [e for e in evs if e["action"] == "allocation.preempt_signal"]
        evict = [e for e in evs if e["action"] == "allocation.preempt"]
        self.assertEqual(len(signal), 1, evs)
        self.assertEqual(signal[0]["details"]["mode"], "reclaim")
        self.assertEqual(signal[0]["details"]["for"], a["id"])
        self.assertEqual(len(evict), 1, evs)
        # the preemptor is in the operators' audit log, not in the victim's reason
        self.assertEqual(evict[0]["details"]["by"], a["id"])
        self.assertNotIn(a["id"], evict[0]["details"]["reason"])
        self.assertEqual(evict[0]["details"]["to"], "pending")

    def test_no_preemption_that_would_not_help(self):
        # The lender asks, within its guarantee, for 4 members on 4 distinct
        # nodes of a 4-node cluster with one node cordoned: evicting the
        # borrower frees enough slices in aggregate, but the request still
        # would not fit, so nobody is preempted for it.
        self.tenant("lender")
        self.tenant("borrower")
        self.set_quota("/v1/tenants/lender/quota", quota(14))
        self.set_quota("/v1/tenants/borrower/quota", quota(0))
        lender = self.d.client(self.token("lender"))
        borrower = self.d.client(self.token("borrower"))
        b = self.alloc(borrower, 8, gpus=FULL_GPU)
        self.assertEqual(b["state"], "active")
        # 5 distinct nodes of 4 can never be had: refused, not pending forever
        r = lender.post("/v1/allocations", {"members": 5, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "spread": "node"})
        self.assertStatus(r, 422)
        self.assertEqual(r.body["error"]["field"], "spread")
        node = self.admin.get("/v1/nodes").body["items"][0]["name"]
        self.assertStatus(self.admin.post("/v1/nodes/%s/cordon" % node, {}), 200)
        a = self.alloc(lender, 4, spread="node")
        self.assertEqual(a["state"], "pending")
        time.sleep(1.5)  # past the grace period of 1 s
        bb = self.state(b["id"])
        self.assertEqual(bb["state"], "active", bb)
        self.assertFalse(bb["reason"].startswith("preempted"), bb["reason"])
        self.assertEqual(self.state(a["id"])["state"], "pending")
        # once that request is withdrawn, one that fits does preempt
        self.assertStatus(lender.delete("/v1/allocations/" + a["id"]), 200)
        self.assertStatus(self.admin.post("/v1/nodes/%s/uncordon" % node, {}), 200)
        a2 = self.alloc(lender, 1, gpus=FULL_GPU)
        self.wait_state(a2["id"], "active")

    def test_on_preempt_fail(self):
        self.tenant("lender")
        self.tenant("borrower")
        self.set_quota("/v1/tenants/lender/quota", quota(14))
        lender = self.d.client(self.token("lender"))
        borrower = self.d.client(self.token("borrower"))
        b = self.alloc(borrower, 8, gpus=FULL_GPU, on_preempt="fail")
        a = self.alloc(lender, 1, gpus=FULL_GPU)
        self.wait_state(a["id"], "active")
        self.assertEqual(self.state(b["id"])["state"], "failed")


class TestCli(TenancyCase):
    def cli(self, *argv, token=None, status=0):
        e = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
        e.update(ISOSTACK_URL=self.d.url(), ISOSTACK_TOKEN=token or self.d.admin_token)
        p = subprocess.run([harness.Binaries.isoctl] + list(argv), env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=T(60))
        self.assertEqual(p.returncode, status, "isoctl %s: %s%s" % (" ".join(argv), p.stdout, p.stderr))
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, p.stderr)
        return p

    def test_cli(self):
        if not harness.Binaries.isoctl:
            self.skipTest("no isoctl")
        self.cli("org", "create", "acme", "--shares", "2")
        self.assertIn("acme", self.cli("org", "list").stdout)
        self.cli("tenant", "create", "ta", "--org", "acme", "--isolation", "exclusive-gpu",
                 "--tags", "hipaa")
        t = json.loads(self.cli("-o", "json", "tenant", "get", "ta").stdout)
        self.assertEqual((t["org"], t["isolation"], t["tags"]), ("acme", "exclusive-gpu", "hipaa"))
        self.cli("tenant", "update", "ta", "--shares", "3")
        self.assertEqual(self.admin.get("/v1/tenants/ta").body["shares"], 3)
        self.cli("quota", "set", "acme", "--org", "--kind", KIND, "--guaranteed", "14",
                 "--borrow-limit", "0")
        self.cli("quota", "set", "ta", "--kind", KIND, "--guaranteed", "7", "--borrow-limit", "0",
                 "--lend-limit", "none")
        p = self.cli("quota", "set", "ta", "--kind", KIND, "--guaranteed", "15", status=6)
        self.assertIn("quota.ta.%s" % KIND, p.stderr)
        self.cli("project", "create", "train", "--tenant", "ta")
        self.assertIn("train", self.cli("project", "list", "--tenant", "ta").stdout)
        self.cli("quota", "set", "ta/train", "--kind", KIND, "--guaranteed", "3")
        self.cli("project", "create", "eval", "--tenant", "ta")
        self.cli("quota", "set", "ta/eval", "--kind", KIND, "--guaranteed", "4", "--lend-limit", "0")
        q = json.loads(self.cli("-o", "json", "quota", "get", "ta/train").stdout)
        self.assertEqual(q["quotas"][KIND]["guaranteed"], 3)
        out = self.cli("quota", "get", "ta").stdout
        self.assertRegex(out, r"%s\s+7\s+0\s+none\s+0" % KIND)
        a = json.loads(self.cli("-o", "json", "alloc", "create", "--tenant", "ta", "--project", "train",
                                "--profile", "1g.10gb", "--members", "1", "--priority", "3",
                                "--on-preempt", "fail", "--duration", "60").stdout)
        self.assertEqual((a["project"], a["priority"], a["on_preempt"], a["duration_s"]),
                         ("train", 3, "fail", 60))
        # an exclusive GPU costs all 7 slices (issue 12): 7 > the project's 3,
        # and its cohort lends nothing
        self.assertEqual(a["state"], "pending", a["reason"])
        self.assertIn("waiting for quota", a["reason"])
        self.assertIn(a["id"], self.cli("queue").stdout)
        self.assertIn("ta/train", self.cli("usage").stdout)
        self.cli("alloc", "release", a["id"])
        self.cli("project", "delete", "train", "--tenant", "ta")
        self.cli("org", "delete", "acme", status=5)  # ta still belongs to it
        for cmd in (("org", "--help"), ("project", "create", "--help"), ("quota", "set", "--help"),
                    ("queue", "--help"), ("usage", "--help")):
            self.assertIn("Usage:", self.cli(*cmd).stdout)


if __name__ == "__main__":
    harness.main()

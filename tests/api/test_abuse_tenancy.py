#!/usr/bin/env python3
"""test_abuse_tenancy.py: a hostile tenant against the tenancy rules (issue 12,
sections 1, 2, 4 and 5; docs/tenancy.md "What an allocation is charged",
"Limits"). Each case is a way a tenant could take more than its quota charges,
pile up work that costs everyone, learn about other tenants from numbers, or
keep rights and history it should not have; each failed on the code before
the fix.

tests/api/data/tenancy.yaml: 4 nodes (32 cores, 2 MIG H100s each) in two racks
of two nodes; kind "h100-80gb" counts compute slices.

Run: python3 tests/api/test_abuse_tenancy.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_tenancy  # noqa: E402
from test_tenancy import FULL_GPU, KIND, SLICE, TenancyCase, quota  # noqa: E402


def cpu_quota(g, borrow):
    return {"cpus": {"guaranteed": g, "borrow_limit": borrow}}


class TestCharges(TenancyCase):
    """Admission charges what placement denies to others."""

    def test_exclusive_rack_is_a_policy_and_costs_the_rack(self):
        self.tenant("mallory")
        m = self.d.client(self.token("mallory", role="tenant-user"))
        body = {"members": 2, "cpus": 1, "isolation": "exclusive-rack", "spread": "rack"}
        # a shared tenant may not ask for whole racks at all
        self.assertError(m.post("/v1/allocations", body), 403, "forbidden", "isolation")
        # a rack-class tenant with a 2-core hard limit: spread over both racks of 64 cores
        self.tenant("rackco", isolation="exclusive-rack")
        self.set_quota("/v1/tenants/rackco/quota", cpu_quota(2, 0))
        rc = self.d.client(self.token("rackco", role="tenant-user"))
        r = rc.post("/v1/allocations", body)
        self.assertError(r, 422, "unsatisfiable", "quota.rackco.cpus")
        self.assertIn("128 cpus", r.body["error"]["message"])  # two racks of 64
        # within quota it runs, and is charged both racks
        self.set_quota("/v1/tenants/rackco/quota", cpu_quota(128, 0))
        a = self.alloc(rc, 2, gpus=None, cpus=1, isolation="exclusive-rack", spread="rack")
        self.assertEqual(a["state"], "active")
        usage = self.admin.get("/v1/usage").body["items"]
        used = {u["account"]: u["used"] for u in usage}["rackco"]
        self.assertEqual((used["cpus"], used["nodes"], used["gpus"]), (128, 4, 8))
        # nothing is left for others, and their capacity says so
        self.tenant("victim")
        v = self.d.client(self.token("victim"))
        cap = v.get("/v1/capacity").body
        self.assertEqual(cap["gpus_free"], 0, cap)
        self.assertEqual(cap["cpus_free"], 0, cap)
        # the holder itself still sees its racks as free to it
        self.assertGreater(rc.get("/v1/capacity").body["gpus_free"], 0)
        # releasing gives the charge back exactly
        self.assertStatus(rc.delete("/v1/allocations/" + a["id"]), 200)
        used = {u["account"]: u["used"] for u in self.admin.get("/v1/usage").body["items"]}["rackco"]
        self.assertEqual((used["cpus"], used["nodes"], used["gpus"]), (0, 0, 0))
        self.assertEqual(v.get("/v1/capacity").body["gpus_free"], 8)

    def test_exclusive_gpu_costs_the_whole_gpu(self):
        self.tenant("eg", isolation="exclusive-gpu")
        self.set_quota("/v1/tenants/eg/quota", quota(7, borrow=0))
        c = self.d.client(self.token("eg"))
        # two 1g slices on exclusive GPUs hold two GPUs: 14 slices > 7
        r = c.post("/v1/allocations", {"members": 2, "gpus": SLICE, "spread": "gpu"})
        self.assertError(r, 422, "unsatisfiable", "quota.eg.%s" % KIND)
        a = self.alloc(c, 1)
        self.assertEqual(a["state"], "active")
        used = {u["account"]: u["used"] for u in self.admin.get("/v1/usage").body["items"]}["eg"]
        self.assertEqual(used[KIND], 7)
        # and a second one waits for quota: the first holds all 7
        b = self.alloc(c, 1)
        self.assertEqual(b["state"], "pending")
        self.assertIn("waiting for quota", b["reason"])

    def test_exclusive_node_costs_the_node(self):
        self.tenant("en", isolation="exclusive-node")
        c = self.d.client(self.token("en"))
        a = self.alloc(c, 1, gpus=SLICE, cpus=1)
        self.assertEqual(a["state"], "active")
        used = {u["account"]: u["used"] for u in self.admin.get("/v1/usage").body["items"]}["en"]
        self.assertEqual((used["nodes"], used["cpus"], used["gpus"]), (1, 32, 2))

    def test_capacity_follows_every_change(self):
        # a tenant's capacity is counted once per change of the cluster, not
        # per request: every kind of change must show at once
        self.tenant("watch")
        w = self.d.client(self.token("watch"))
        free = lambda: w.get("/v1/capacity").body["gpus_free"]  # noqa: E731
        self.assertEqual(free(), 8)
        a = self.alloc(w, 1, gpus=FULL_GPU)
        self.assertEqual(free(), 7)
        node = self.admin.get("/v1/nodes").body["items"][3]["name"]
        self.assertStatus(self.admin.post("/v1/nodes/%s/cordon" % node, {}), 200)
        self.assertEqual(free(), 5)
        self.assertStatus(self.admin.post("/v1/nodes/%s/uncordon" % node, {}), 200)
        self.assertEqual(free(), 7)
        self.assertStatus(self.admin.post("/v1/nodes/%s/gpus/0/fault" % node, {"xid": 79}), 200)
        self.assertEqual(free(), 6)
        self.assertStatus(w.delete("/v1/allocations/" + a["id"]), 200)
        self.assertEqual(free(), 7)

    def test_a_request_must_ask_for_something(self):
        self.tenant("t")
        c = self.d.client(self.token("t"))
        for body in ({"members": 1024}, {"members": 1}, {"members": 3, "cpus": 0},
                     {"members": 1, "memory_mib": 0}):
            with self.subTest(body=body):
                self.assertError(c.post("/v1/allocations", body), 400, "invalid_argument", "gpus")
        self.assertEqual(c.get("/v1/allocations").body["items"], [])


class TestLimits(TenancyCase):
    """What one tenant may pile up, and who may raise priority."""

    def fill(self):
        self.tenant("owner")
        o = self.d.client(self.token("owner"))
        self.assertEqual(self.alloc(o, 8, gpus=FULL_GPU)["state"], "active")

    def test_pending_limit_is_429_naming_it(self):
        self.fill()
        self.tenant("flood")
        r = self.admin.request("PATCH", "/v1/tenants/flood", {"limits": {"max_pending": 3}})
        self.assertStatus(r, 200)
        self.assertEqual(r.body["limits"]["max_pending"], 3)
        f = self.d.client(self.token("flood"))
        for _ in range(3):
            self.assertEqual(self.alloc(f, 1)["state"], "pending")
        r = f.post("/v1/allocations", {"members": 1, "gpus": SLICE})
        self.assertError(r, 429, "limit_exceeded", "limits.max_pending")
        # another tenant is not limited by the flood
        self.tenant("calm")
        calm = self.d.client(self.token("calm"))
        self.assertEqual(self.alloc(calm, 1)["state"], "pending")
        # only a cluster admin sets limits
        r = f.request("PATCH", "/v1/tenants/flood", {"limits": {"max_pending": 100}})
        self.assertError(r, 403, "forbidden")
        for bad in ({"max_pending": -1}, {"max_live": "x"}, {"max_pending": 1, "other": 2}, []):
            with self.subTest(limits=bad):
                r = self.admin.request("PATCH", "/v1/tenants/flood", {"limits": bad})
                self.assertStatus(r, 400)
                self.assertTrue(r.body["error"]["field"].startswith("limits"), r.body)

    def test_projects_and_tokens_are_bounded(self):
        self.tenant("grower")
        for i in range(256):
            self.assertStatus(self.admin.post("/v1/tenants/grower/projects", {"name": "p%d" % i}),
                              201)
        r = self.admin.post("/v1/tenants/grower/projects", {"name": "one-more"})
        self.assertError(r, 429, "limit_exceeded", "limits.max_projects")
        # a deleted one makes room
        self.assertStatus(self.admin.delete("/v1/tenants/grower/projects/p0"), 204)
        self.assertStatus(self.admin.post("/v1/tenants/grower/projects", {"name": "one-more"}), 201)
        for i in range(999):
            r = self.admin.post("/v1/tokens", {"role": "tenant-user", "tenant": "grower"})
            self.assertStatus(r, 201)
        last = self.admin.post("/v1/tokens", {"role": "tenant-user", "tenant": "grower"})
        self.assertStatus(last, 201)
        r = self.admin.post("/v1/tokens", {"role": "tenant-user", "tenant": "grower"})
        self.assertError(r, 429, "limit_exceeded", "limits.max_tokens")
        # a revoked one makes room
        self.assertStatus(self.admin.delete("/v1/tokens/" + last.body["id"]), 204)
        self.assertStatus(self.admin.post("/v1/tokens", {"role": "tenant-user", "tenant": "grower"}),
                          201)

    def test_default_limit_from_the_daemon(self):
        self.d.stop()
        self.d.cleanup()
        self.d = harness.Daemon("tenancy.yaml", extra_args=("--tenant-max-pending", "2"))
        self.d.start()
        self.admin = self.d.client()
        self.fill()
        self.tenant("flood")
        f = self.d.client(self.token("flood"))
        self.alloc(f, 1)
        self.alloc(f, 1)
        self.assertError(f.post("/v1/allocations", {"members": 1, "gpus": SLICE}), 429,
                         "limit_exceeded", "limits.max_pending")
        self.assertEqual(self.admin.get("/v1/tenants/flood").body["limits"]["max_pending"], 2)

    def test_priority_ceiling(self):
        self.tenant("team")
        user = self.d.client(self.token("team", role="tenant-user"))
        tadmin = self.d.client(self.token("team"))
        r = user.post("/v1/allocations", {"members": 1, "gpus": SLICE, "priority": 1000})
        self.assertError(r, 403, "forbidden", "priority")
        self.alloc(user, 1, priority=0)
        self.alloc(tadmin, 1, priority=1000)  # the tenant-admin is not bound by it
        # the tenant-admin raises its users' ceiling, and only that
        r = tadmin.request("PATCH", "/v1/tenants/team", {"limits": {"max_user_priority": 10}})
        self.assertStatus(r, 200)
        self.assertEqual(r.body["limits"]["max_user_priority"], 10)
        self.alloc(user, 1, priority=10)
        self.assertError(user.post("/v1/allocations", {"members": 1, "gpus": SLICE,
                                                       "priority": 11}), 403, "forbidden", "priority")
        r = tadmin.request("PATCH", "/v1/tenants/team", {"limits": {"max_pending": 5000}})
        self.assertError(r, 403, "forbidden")
        r = user.request("PATCH", "/v1/tenants/team", {"limits": {"max_user_priority": 1000}})
        self.assertError(r, 403, "forbidden")


class TestRates(TenancyCase):
    """How fast one tenant may ask: every change is an fsync on the one
    controller thread, so a tenant's rate is everyone's latency."""

    extra_args = ("--tenant-writes-per-s", "1", "--tenant-reads-per-s", "2")

    def audit_size(self):
        return self.admin.get("/v1/audit/head").body["size"]

    def test_writes_and_reads_are_bucketed_per_tenant(self):
        self.tenant("fast")
        self.tenant("other")
        f = self.d.client(self.token("fast", role="tenant-user"))
        f2 = self.d.client(self.token("fast", role="tenant-user"))  # a second token: same bucket
        o = self.d.client(self.token("other", role="tenant-user"))
        body = {"members": 1, "gpus": SLICE}
        # a burst of two seconds' worth, then 429 with Retry-After
        self.assertStatus(f.post("/v1/allocations", body), 201)
        self.assertStatus(f2.post("/v1/allocations", body), 201)
        size = self.audit_size()
        # both at once: a refusal is held back a second (the bucket refills
        # meanwhile), so one after the other the second would be admitted
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda c: c.post("/v1/allocations", body), (f, f2)))
        for r in answers:
            self.assertError(r, 429, "limit_exceeded", "limits.writes_per_s")
            self.assertGreaterEqual(int(r.header("Retry-After")), 1)
        # refusals are counted, not written one by one (the head read itself is
        # an audited read: one event)
        self.assertEqual(self.audit_size(), size + 1)
        # another tenant and the operators are not held back by it
        self.assertStatus(o.post("/v1/allocations", body), 201)
        self.assertStatus(self.admin.post("/v1/allocations", dict(body, tenant="fast")), 201)
        # reads have their own bucket
        for _ in range(4):
            f.get("/v1/allocations")
        r = f.get("/v1/allocations")
        self.assertError(r, 429, "limit_exceeded", "limits.reads_per_s")
        self.assertStatus(o.get("/v1/allocations"), 200)
        self.assertIn("tenant_rate_limited", self.d.stderr_text())

    def test_refusals_are_held_back(self):
        """A client that keeps asking past its rate gets each 429 a second
        late on its connection, so it cannot make the server thread answer
        thousands of refusals a second; others are not held."""
        import http.client
        import threading
        import time
        self.tenant("hammer")
        self.tenant("calm")
        token = self.token("hammer", role="tenant-user")
        calm = self.d.client(self.token("calm", role="tenant-user"))
        conn = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=10)
        hdrs = {"Authorization": "Bearer " + token}
        statuses = []
        other = {}

        def ask_calm():
            other["status"] = calm.get("/v1/allocations").status
            other["at"] = time.monotonic()

        start = time.monotonic()
        while time.monotonic() - start < 1.5:
            conn.request("GET", "/v1/allocations", headers=hdrs)
            r = conn.getresponse()
            r.read()
            statuses.append(r.status)
            if r.status == 429 and "status" not in other:
                t = threading.Thread(target=ask_calm)
                t.start()
        t.join()
        refused = statuses.count(429)
        # the burst (4 reads) is answered; then one refusal a second at most
        seen = "%d answers: %d refused" % (len(statuses), refused)
        self.assertGreaterEqual(refused, 1, seen)
        self.assertLessEqual(refused, 3, seen)
        self.assertEqual(other["status"], 200)
        # a refused change with a body is held too, and answered 429
        body = json.dumps({"members": 1, "gpus": SLICE})
        for _ in range(4):  # the write burst is 2
            conn.request("POST", "/v1/allocations", body=body,
                         headers=dict(hdrs, **{"Content-Type": "application/json"}))
            r = conn.getresponse()
            text = r.read()
            if r.status == 429:
                break
        self.assertEqual(r.status, 429)
        self.assertIn(b"limits.writes_per_s", text)
        conn.close()


class TestLimitFlags(TenancyCase):
    cli = test_tenancy.TestCli.cli

    def test_isoctl_sets_limits(self):
        if not harness.Binaries.isoctl:
            self.skipTest("no isoctl")
        out = self.cli("-o", "json", "tenant", "create", "lim", "--max-pending", "5",
                       "--writes-per-s", "10").stdout
        self.assertEqual(json.loads(out)["limits"]["max_pending"], 5)
        self.assertEqual(json.loads(out)["limits"]["writes_per_s"], 10)
        # the tenant-admin sets its users' ceiling, and nothing else
        ta = self.token("lim")
        out = self.cli("-o", "json", "tenant", "update", "lim", "--max-user-priority", "3",
                       token=ta).stdout
        self.assertEqual(json.loads(out)["limits"]["max_user_priority"], 3)
        self.cli("tenant", "update", "lim", "--max-live", "9", token=ta, status=4)
        for bad in (("--max-live", "x"), ("--max-user-priority", "5000"), ("--reads-per-s", "-1")):
            p = self.cli("tenant", "update", "lim", *bad, status=2)
            self.assertIn(bad[0], p.stderr)


class TestNumbers(TenancyCase):
    """A tenant's views hold only numbers of its own state."""

    def test_usage_hides_siblings_and_is_paged(self):
        for i in range(5):
            self.tenant("sib%d" % i)
        c = self.d.client(self.token("sib0", role="tenant-user"))
        items = c.get("/v1/usage").body["items"]
        self.assertEqual([i["account"] for i in items], ["sib0"])
        for key in ("share", "usage_share", "level_fair_share", "rank"):
            self.assertNotIn(key, items[0])
        # another tenant's usage moves, this tenant's view does not
        before = c.get("/v1/usage").raw
        other = self.d.client(self.token("sib1"))
        self.alloc(other, 1, gpus=FULL_GPU)
        self.assertEqual(before.replace(b" ", b""), c.get("/v1/usage").raw.replace(b" ", b""))
        # operators page through every account
        seen, after = [], None
        while True:
            r = self.admin.get("/v1/usage?limit=2" + ("&after=" + after if after else ""))
            self.assertStatus(r, 200)
            self.assertLessEqual(len(r.body["items"]), 2)
            seen += [i["account"] for i in r.body["items"]]
            after = r.body["next"]
            if not after:
                break
        self.assertEqual(sorted(s for s in seen if s.startswith("sib")),
                         ["sib%d" % i for i in range(5)])
        self.assertStatus(self.admin.get("/v1/usage?after=nosuch"), 400)
        self.assertStatus(self.admin.get("/v1/usage?limit=0"), 400)


class TestOrgPages(TenancyCase):
    def test_org_list_is_paged(self):
        names = ["org%02d" % i for i in range(5)]
        for n in names:
            self.assertStatus(self.admin.post("/v1/orgs", {"name": n}), 201)
        seen, after = [], None
        while True:
            r = self.admin.get("/v1/orgs?limit=2" + ("&after=" + after if after else ""))
            self.assertStatus(r, 200)
            self.assertLessEqual(len(r.body["items"]), 2)
            seen += [o["name"] for o in r.body["items"]]
            after = r.body["next"]
            if not after:
                break
        self.assertEqual(seen, names)
        for bad in ("limit=0", "limit=x", "sort=name"):
            self.assertStatus(self.admin.get("/v1/orgs?" + bad), 400)


class TestDeletedTenant(TenancyCase):
    def test_same_name_starts_fresh(self):
        self.tenant("reborn")
        self.set_quota("/v1/tenants/reborn/quota", quota(14))
        c = self.d.client(self.token("reborn"))
        a = self.alloc(c, 1, gpus=FULL_GPU)
        self.assertStatus(c.delete("/v1/allocations/" + a["id"]), 200)
        self.assertStatus(self.admin.delete("/v1/tenants/reborn"), 204)
        for restart in (False, True):
            with self.subTest(restart=restart):
                if restart:
                    self.d.restart()
                    self.admin = self.d.client()
                else:
                    self.tenant("reborn")
                q = self.admin.get("/v1/tenants/reborn/quota").body
                self.assertEqual(q["quotas"][KIND]["guaranteed"], 0, q)
                u = {x["account"]: x for x in self.admin.get("/v1/usage").body["items"]}
                self.assertEqual(sum(u["reborn"]["decayed_hours"].values()), 0, u["reborn"])


if __name__ == "__main__":
    harness.main()

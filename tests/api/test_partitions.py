#!/usr/bin/env python3
"""test_partitions.py: per-allocation partitions (issue 15; docs/fabric.md
"Per-allocation partitions", docs/api.md "Tenants") against a real isostackd
on the sim fabric. A tenant with `partition: per-allocation` gets a P_Key and
a VF per node for each allocation, taken in the allocation's transaction and
back to the pool's quarantine at its release; the intent holds one partition
per allocation with exactly its members' VFs; a per-tenant tenant is as
before. Only a cluster-admin sets the mode, and not while the tenant holds
allocations. A node's P_Key table (PF and VFs together) and its VFs are
counted and a placement beyond them is a 409 naming the node; the tenant's
keys, live and in quarantine, stay within its limits.max_live, and the keys
it gets are random free ones, not the lowest (which would tell it how many
keys others hold).

Run: python3 tests/api/test_partitions.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import create_alloc, create_tenant, issue_token  # noqa: E402

N1, N2 = "pa-n01", "pa-n02"


def job(tenant, pool="small"):
    return {"tenant": tenant, "cpus": 1, "memory_mib": 1024, "pool": pool}


class Case(harness.FreshDaemonCase):
    config = "partitions.yaml"

    def per_alloc_tenant(self, **extra):
        body = {"name": harness.uniq("pa"), "partition": "per-allocation"}
        body.update(extra)
        r = self.admin.post("/v1/tenants", body)
        self.assertStatus(r, 201)
        self.assertEqual(r.body["partition"], "per-allocation")
        return r.body

    def intent(self):
        r = self.admin.get("/v1/fabric/intent")
        self.assertStatus(r, 200)
        return r.body["partitions"]

    def alloc_parts(self):
        return {p["allocation"]: p for p in self.intent() if p.get("allocation")}

    def vfs(self, node):
        return self.desired(node)["vfs"]


class TestPerAllocation(Case):
    def test_two_allocations_two_keys_each_member_in_its_own(self):
        t = self.per_alloc_tenant()
        a = create_alloc(self, self.admin, job(t["name"]))
        b = create_alloc(self, self.admin, job(t["name"]))
        self.assertEqual((a["nodes"][0]["node"], b["nodes"][0]["node"]), (N1, N1))
        self.assertIsNotNone(a["pkey"])
        self.assertNotEqual(a["pkey"], b["pkey"])
        self.assertNotIn(t["pkey"], (a["pkey"], b["pkey"]))
        # one VF each on the node, in its allocation's key only
        vfs = {v["members"][0]["allocation"]: v for v in self.vfs(N1)}
        self.assertEqual(set(vfs), {a["id"], b["id"]})
        for x in (a, b):
            self.assertEqual([m["allocation"] for m in vfs[x["id"]]["members"]], [x["id"]])
            self.assertEqual(int(vfs[x["id"]]["pkey"], 16), int(x["pkey"], 16) | 0x8000)
        parts = self.alloc_parts()
        self.assertEqual(set(parts), {a["id"], b["id"]})
        for x in (a, b):
            p = parts[x["id"]]
            self.assertEqual(p["pkey"], x["pkey"])
            self.assertEqual(p["tenant"], t["name"])
            self.assertEqual([m["guid"] for m in p["members"]], [vfs[x["id"]]["guid"]])
            self.assertEqual({m["membership"] for m in p["members"]}, {"full"})
        # the tenant's own key carries no port
        self.assertNotIn(t["pkey"], [p["pkey"] for p in self.intent()])
        r = self.admin.get("/v1/fabric/verify")
        self.assertStatus(r, 200)
        self.assertTrue(r.body["ok"], r.body)
        # a restart reads keys and VFs back from the store
        self.d.restart()
        self.admin = self.d.client()
        for x in (a, b):
            self.assertEqual(self.admin.get("/v1/allocations/" + x["id"]).body["pkey"], x["pkey"])
        self.assertEqual({k: p["pkey"] for k, p in self.alloc_parts().items()},
                         {a["id"]: a["pkey"], b["id"]: b["pkey"]})
        # release: the partition and the VF go at once
        self.assertStatus(self.admin.delete("/v1/allocations/" + a["id"]), 200)
        self.assertEqual(set(self.alloc_parts()), {b["id"]})
        self.assertEqual([v["members"][0]["allocation"] for v in self.vfs(N1)], [b["id"]])
        self.assertIsNone(self.admin.get("/v1/allocations/" + a["id"]).body["pkey"])

    def test_per_tenant_unchanged(self):
        t = create_tenant(self, self.admin)
        self.assertEqual(t["partition"], "per-tenant")
        a = create_alloc(self, self.admin, job(t["name"]))
        b = create_alloc(self, self.admin, job(t["name"]))
        self.assertEqual((a["pkey"], b["pkey"]), (t["pkey"], t["pkey"]))
        (vf,) = self.vfs(N1)
        self.assertEqual({m["allocation"] for m in vf["members"]}, {a["id"], b["id"]})
        self.assertEqual(self.alloc_parts(), {})
        (p,) = [p for p in self.intent() if p["kind"] == "tenant"]
        self.assertEqual(p["pkey"], t["pkey"])
        self.assertNotIn("allocation", p)

    def test_port_table_limit_is_refused_naming_the_node(self):
        # pa-n01: 4 entries = Default + 3 partitions
        t = self.per_alloc_tenant()
        ids = [create_alloc(self, self.admin, job(t["name"]))["id"] for _ in range(3)]
        before = self.intent()
        r = self.admin.post("/v1/allocations", job(t["name"]))
        self.assertError(r, 409, "insufficient_capacity", "nodes.pa-n01.port")
        self.assertIn("would hold 5 P_Keys", r.body["error"]["message"])
        self.assertEqual(self.intent(), before)  # nothing written
        self.assertEqual(len(self.admin.list_all("/v1/allocations?tenant=" + t["name"])), 3)
        # a per-tenant tenant on the same table: its one key fits no more either
        u = create_tenant(self, self.admin)
        self.assertError(self.admin.post("/v1/allocations", job(u["name"])), 409,
                         "insufficient_capacity", "nodes.pa-n01.port")
        self.assertStatus(self.admin.delete("/v1/allocations/" + ids[0]), 200)
        create_alloc(self, self.admin, job(u["name"]))

    def test_no_vf_left_is_refused_naming_the_vfs(self):
        t = self.per_alloc_tenant()
        create_alloc(self, self.admin, job(t["name"], "few"))
        create_alloc(self, self.admin, job(t["name"], "few"))
        r = self.admin.post("/v1/allocations", job(t["name"], "few"))
        self.assertError(r, 409, "insufficient_capacity", "nodes.pa-n02.port.vfs")
        self.assertIn("VF", r.body["error"]["message"])

    def test_mode_rules(self):
        t = create_tenant(self, self.admin)["name"]
        _, tadm = issue_token(self, self.admin, "tenant-admin", tenant=t)
        r = self.d.client(tadm).patch("/v1/tenants/" + t, {"partition": "per-allocation"})
        self.assertError(r, 403, "forbidden", "partition")
        self.assertError(self.admin.patch("/v1/tenants/" + t, {"partition": "per-job"}),
                         400, "invalid_argument", "partition")
        self.assertError(self.admin.patch("/v1/tenants/" + t, {"partition": 1}),
                         400, "invalid_argument", "partition")
        a = create_alloc(self, self.admin, job(t))
        r = self.admin.patch("/v1/tenants/" + t, {"partition": "per-allocation"})
        self.assertError(r, 409, "conflict", "partition")
        self.assertEqual(self.admin.get("/v1/tenants/" + t).body["partition"], "per-tenant")
        # naming the mode it has is no change
        self.assertStatus(self.admin.patch("/v1/tenants/" + t, {"partition": "per-tenant"}), 200)
        self.assertStatus(self.admin.delete("/v1/allocations/" + a["id"]), 200)
        r = self.admin.patch("/v1/tenants/" + t, {"partition": "per-allocation"})
        self.assertStatus(r, 200)
        self.assertEqual(r.body["partition"], "per-allocation")
        b = create_alloc(self, self.admin, job(t))
        self.assertNotEqual(b["pkey"], r.body["pkey"])
        self.d.restart()
        self.admin = self.d.client()
        self.assertEqual(self.admin.get("/v1/tenants/" + t).body["partition"], "per-allocation")
        c = create_alloc(self, self.admin, job(t))
        self.assertNotIn(c["pkey"], (b["pkey"], r.body["pkey"]))


class TestHostileTenant(Case):
    def test_keys_live_and_quarantined_stay_within_max_live(self):
        t = self.per_alloc_tenant(limits={"max_live": 2})["name"]
        _, usr = issue_token(self, self.admin, "tenant-user", tenant=t)
        c = self.d.client(usr)
        a = create_alloc(self, c, job(t))
        create_alloc(self, c, job(t))
        self.assertError(c.post("/v1/allocations", job(t)), 429, "limit_exceeded",
                         "limits.max_live")
        self.assertStatus(c.delete("/v1/allocations/" + a["id"]), 200)
        # one live, one key in quarantine: no third key yet
        r = c.post("/v1/allocations", job(t))
        self.assertError(r, 429, "limit_exceeded", "limits.max_live")
        self.assertIn("quarantine", r.body["error"]["message"])
        self.wait_until("the released key's quarantine to end",
                        lambda: c.post("/v1/allocations", job(t)).status == 201,
                        timeout=harness.T(10))
        self.assertEqual(len(self.alloc_parts()), 2)

    def test_key_numbers_are_not_the_lowest_free(self):
        # per-tenant keys are the lowest free: the tenants hold 0x0100-0x0102
        others = [create_tenant(self, self.admin) for _ in range(2)]
        t = self.per_alloc_tenant()
        held = sorted(int(x["pkey"], 16) for x in others + [t])
        self.assertEqual(held, [0x100, 0x101, 0x102])
        _, usr = issue_token(self, self.admin, "tenant-user", tenant=t["name"])
        c = self.d.client(usr)
        got = [int(create_alloc(self, c, job(t["name"]))["pkey"], 16) for _ in range(3)]
        self.assertEqual(len(set(got)), 3)
        self.assertTrue(all(0x100 <= k <= 0xfff and k not in held for k in got))
        # lowest-first would give 0x0103, 0x0104, 0x0105 and so count the
        # keys others hold; 3 random draws of 3,837 free keys hit that with
        # probability ~1e-11
        self.assertNotEqual(sorted(got), [0x103, 0x104, 0x105])
        # and it sees no partition but through its own allocations
        self.assertError(c.get("/v1/fabric/intent"), 403, "forbidden")


class TestPoolRunsDry(Case):
    config = "partitions-tiny.yaml"

    def test_exhaustion_one_refusal_then_the_key_after_quarantine(self):
        t = self.per_alloc_tenant()  # 0x0100
        a = create_alloc(self, self.admin, job(t["name"]))
        create_alloc(self, self.admin, job(t["name"]))
        r = self.admin.post("/v1/allocations", job(t["name"]))
        self.assertError(r, 409, "insufficient_capacity", "fabric.pkey_range")
        self.assertIn("all in use", r.body["error"]["message"])
        self.assertStatus(self.admin.delete("/v1/allocations/" + a["id"]), 200)
        r = self.admin.post("/v1/allocations", job(t["name"]))
        self.assertError(r, 409, "insufficient_capacity", "fabric.pkey_range")
        self.assertIn("quarantine", r.body["error"]["message"])
        time.sleep(2.2)
        d = create_alloc(self, self.admin, job(t["name"]))
        self.assertEqual(d["pkey"], a["pkey"])  # the only key free again


if __name__ == "__main__":
    harness.main(__doc__)

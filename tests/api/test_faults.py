#!/usr/bin/env python3
"""test_faults.py: faults and maintenance against a real isostackd
(docs/tenancy.md "Faults and maintenance", docs/api.md): XID 79 end to end
(the GPU's allocations requeued or failed by their policy, the GPU
quarantined and shown so, nothing placed there until it is restored, the
audit trail), XIDs that take nothing, repeated reports, bad input and roles,
a node going down and up (fabric membership withdrawn), cordon/drain of a
whole pool, the quarantine across a restart, and the isoctl commands.

Run: python3 tests/api/test_faults.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (ApiTestCase, Daemon, T, check_allocation, check_gpu_view,  # noqa: E402
                     create_alloc, create_tenant, issue_token)

# tests/api/data/faults.yaml: pool "a" = fa-n01, fa-n02; pool "b" = fb-n01;
# each 2 x h100-80gb MIG, in this inventory order, first-fit placement.
FAULTS = "faults.yaml"
POOL_A = ["fa-n01", "fa-n02"]
POOL_B = ["fb-n01"]
# Each node's port GUID and its four VF GUIDs (what fabric membership names).
NODE_GUIDS = {
    "fa-n01": {0x0002c90300cc0001} | {0x0002c90300dd0100 + k for k in range(4)},
    "fa-n02": {0x0002c90300cc0002} | {0x0002c90300dd0200 + k for k in range(4)},
    "fb-n01": {0x0002c90300cc0003} | {0x0002c90300dd0300 + k for k in range(4)},
}
MIG_3G = {"count": 1, "profile": "3g.40gb"}
FAULT_KEYS = {"node", "gpu", "xid", "quarantined", "effect", "evicted"}


def on_gpu(a, node, gpu):
    return any(p["node"] == node and p["gpu"] == gpu for p in a["placement"])


def on_node(a, node):
    return any(m["node"] == node for m in a["nodes"])


class FaultCase(ApiTestCase):
    """A fresh daemon per test, so first-fit positions are known."""

    def setUp(self):
        self.d = Daemon(FAULTS)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()

    def tearDown(self):
        try:
            self.d.stop()
        finally:
            self.d.cleanup()

    def tenant_client(self, role="tenant-admin"):
        t = create_tenant(self, self.admin)["name"]
        _, secret = issue_token(self, self.admin, role, tenant=t, user="u-" + t)
        return t, self.admin.with_token(secret)

    def alloc(self, client, **extra):
        body = {"gpus": MIG_3G, "cpus": 1}
        body.update(extra)
        return create_alloc(self, client, body)

    def get(self, aid):
        r = self.admin.get("/v1/allocations/" + aid)
        self.assertStatus(r, 200)
        check_allocation(self, r.body)
        return r.body

    def gpu(self, node, index):
        gs = self.admin.list_all("/v1/gpus?node=" + node)
        return [g for g in gs if g["index"] == index][0]

    def check_gpus(self):
        check_gpu_view(self, self.admin.list_all("/v1/gpus"), self.admin.list_all("/v1/allocations"))

    def fault(self, node, gpu, xid, client=None):
        return (client or self.admin).post("/v1/nodes/%s/gpus/%s/fault" % (node, gpu), {"xid": xid})

    def events(self, action=None):
        evs = [i["event"] for i in self.admin.list_all("/v1/audit/events", limit=1000)]
        return [e for e in evs if action is None or e["action"] == action]

    def fail_policy_supported(self, client):
        """Creates an allocation that fails rather than requeue when taken
        away, if the API has the field yet; (allocation or None)."""
        r = client.post("/v1/allocations", {"gpus": MIG_3G, "cpus": 1, "on_preempt": "fail"})
        if r.status == 400 and r.body["error"]["field"] == "on_preempt":
            return None
        self.assertStatus(r, 201)
        return r.body

    def tenant_guids(self, tenant):
        """GUIDs in the tenant's partition of the fabric intent."""
        r = self.admin.get("/v1/fabric/intent")
        self.assertStatus(r, 200)
        out = set()
        for part in r.body["partitions"]:
            if part.get("tenant") == tenant:
                out |= {int(m["guid"], 16) for m in part["members"]}
        return out


class TestXid79(FaultCase):
    def test_xid79_end_to_end(self):
        ta, ca = self.tenant_client()
        tb, cb = self.tenant_client()
        a = self.alloc(ca)  # default policy: requeue
        b = self.fail_policy_supported(cb)
        fail_supported = b is not None
        if not fail_supported:
            b = self.alloc(cb)
        self.assertEqual((a["placement"][0]["node"], a["placement"][0]["gpu"], a["placement"][0]["start"]),
                         ("fa-n01", 0, 0))
        self.assertEqual((b["placement"][0]["node"], b["placement"][0]["gpu"], b["placement"][0]["start"]),
                         ("fa-n01", 0, 4), "two tenants share GPU fa-n01/0")
        self.assertTrue(NODE_GUIDS["fa-n01"] & self.tenant_guids(tb), "tenant b not on fa-n01's port")

        r = self.fault("fa-n01", 0, 79)
        self.assertStatus(r, 200)
        self.assertEqual(set(r.body), FAULT_KEYS, repr(r))
        self.assertEqual((r.body["node"], r.body["gpu"], r.body["xid"], r.body["quarantined"],
                          r.body["effect"]), ("fa-n01", 0, 79, True, "quarantined"))
        self.assertEqual(sorted(r.body["evicted"]), sorted([a["id"], b["id"]]))

        # The requeued one went back to the queue and was placed again, not there.
        a2 = self.get(a["id"])
        self.assertIn(a2["state"], harness.HOLDING_STATES + ("pending",), repr(a2))
        self.assertFalse(on_gpu(a2, "fa-n01", 0), "requeued onto the faulted GPU: %r" % a2)
        self.assertEqual(a2["placement"][0]["node"], "fa-n01", "first-fit: the next GPU, fa-n01/1")
        self.assertEqual(a2["placement"][0]["gpu"], 1)
        b2 = self.get(b["id"])
        if fail_supported:
            self.assertEqual(b2["state"], "failed", repr(b2))
            self.assertIn("XID 79", b2["reason"])
            self.assertIn("fa-n01/0", b2["reason"])
            # A failed allocation keeps its last placement as history; it holds
            # nothing (the GPU view below shows no instance of it).
            self.assertFalse(NODE_GUIDS["fa-n01"] & self.tenant_guids(tb),
                             "failed tenant keeps its fabric membership on fa-n01")
        else:
            sys.stderr.write("note: the API has no on_preempt yet; only requeue was tested\n")
            self.assertFalse(on_gpu(b2, "fa-n01", 0), repr(b2))

        g = self.gpu("fa-n01", 0)
        self.assertEqual(g["fault"]["xid"], 79)
        self.assertTime(g["fault"]["at"], "fault.at")
        self.assertEqual((g["instances"], g["free_slices"], g["free_mask"], g["whole_used"]),
                         ([], 0, "0b00000000", False))
        self.assertIsNone(self.gpu("fa-n01", 1)["fault"])
        self.check_gpus()

        # New work never lands there: fill the rest of the cluster.
        placed, pending = [], []
        for _ in range(12):
            x = self.alloc(ca)
            (pending if x["state"] == "pending" else placed).append(x)
            self.assertFalse(on_gpu(x, "fa-n01", 0), "placed on the faulted GPU: %r" % x)
        # 6 GPUs x two 3g.40gb, less the faulted GPU, less what a and b hold.
        held = 1 + (0 if fail_supported else 1)
        self.assertEqual(len(placed), 10 - held)
        self.assertTrue(pending)
        cap = self.admin.get("/v1/capacity").body
        self.assertEqual(cap["memory_slices_free"], 0, repr(cap))
        self.check_gpus()

        # A repeated report changes nothing.
        before = len(self.events("gpu.fault"))
        r = self.fault("fa-n01", 0, 79)
        self.assertStatus(r, 200)
        self.assertEqual((r.body["quarantined"], r.body["effect"], r.body["evicted"]),
                         (True, "already_quarantined", []))
        self.assertEqual(len(self.events("gpu.fault")), before)

        # Restore: the oldest pending allocation takes the GPU at once.
        r = self.admin.delete("/v1/nodes/fa-n01/gpus/0/fault")
        self.assertStatus(r, 204)
        self.assertIsNone(self.gpu("fa-n01", 0)["fault"])
        first = self.get(pending[0]["id"])
        self.assertEqual([(p["node"], p["gpu"], p["start"]) for p in first["placement"]],
                         [("fa-n01", 0, 0)], repr(first))
        self.check_gpus()
        self.assertError(self.admin.delete("/v1/nodes/fa-n01/gpus/0/fault"), 404, "not_found")

        # The audit trail: the fault, each eviction with its reason, the restore.
        f = [e for e in self.events("gpu.fault") if e["object"]["id"] == "fa-n01/0"]
        self.assertEqual(len(f), 1)
        self.assertEqual((f[0]["object"]["kind"], f[0]["details"]["xid"], f[0]["outcome"]),
                         ("gpu", 79, "success"))
        ev = {e["object"]["id"]: e for e in self.events("allocation.fault")}
        self.assertEqual(set(ev), {a["id"], b["id"]})
        self.assertEqual(ev[a["id"]]["details"]["to"], "pending")
        self.assertEqual(ev[b["id"]]["details"]["to"], "failed" if fail_supported else "pending")
        self.assertEqual(ev[a["id"]]["details"]["reason"], "GPU fa-n01/0 XID 79")
        self.assertEqual(ev[a["id"]]["object"]["tenant"], ta)
        self.assertEqual(len([e for e in self.events("gpu.restore")
                              if e["object"]["id"] == "fa-n01/0"]), 1)

    def test_other_xids_take_nothing(self):
        _, ca = self.tenant_client()
        a = self.alloc(ca)
        # 94 is a contained ECC error: only the application that hit it ends
        # (NVIDIA, A100 GPU Memory Error Management; faults.c).
        for xid in (13, 31, 43, 94):
            r = self.fault("fa-n01", 0, xid)
            self.assertStatus(r, 200)
            self.assertEqual((r.body["quarantined"], r.body["effect"], r.body["evicted"]),
                             (False, "recorded", []))
        self.assertEqual(self.get(a["id"])["state"], "active")
        self.assertIsNone(self.gpu("fa-n01", 0)["fault"])
        b = self.alloc(ca)
        self.assertTrue(on_gpu(b, "fa-n01", 0), "an application XID took the GPU: %r" % b)
        recorded = [e["details"] for e in self.events("gpu.fault")]
        self.assertEqual([(d["xid"], d["effect"]) for d in recorded],
                         [(13, "recorded"), (31, "recorded"), (43, "recorded"), (94, "recorded")])
        # Restoring a GPU that has no fault: nothing to restore.
        self.assertError(self.admin.delete("/v1/nodes/fa-n01/gpus/0/fault"), 404, "not_found")

    def test_every_gpu_taking_xid(self):
        for gpu, xid in ((0, 48), (1, 79)):
            r = self.fault("fa-n02", gpu, xid)
            self.assertStatus(r, 200)
            self.assertTrue(r.body["quarantined"], repr(r))
        for xid in (95, 119, 120):
            r = self.fault("fb-n01", 0, xid)
            self.assertStatus(r, 200)
            self.assertTrue(r.body["quarantined"], repr(r))
            self.assertStatus(self.admin.delete("/v1/nodes/fb-n01/gpus/0/fault"), 204)
        _, ca = self.tenant_client()
        for _ in range(6):
            x = self.alloc(ca)
            self.assertFalse(on_node(x, "fa-n02"), repr(x))

    def test_bad_input_and_roles(self):
        path = "/v1/nodes/fa-n01/gpus/0/fault"
        self.assertError(self.fault("no-such-node", 0, 79), 404, "not_found")
        self.assertError(self.fault("fa-n01", 2, 79), 404, "not_found")
        self.assertError(self.fault("fa-n01", "x", 79), 404, "not_found")
        self.assertError(self.fault("fa-n01", "01", 79), 404, "not_found")
        self.assertError(self.fault("fa-n01", "-1", 79), 404, "not_found")
        for body in ({}, {"xid": -1}, {"xid": "79"}, {"xid": 1001}, {"xid": 7.9}, {"xid": None}):
            self.assertError(self.admin.post(path, body), 400, "invalid_argument", "xid",
                             msg=repr(body))
        self.assertError(self.admin.post(path, {"xid": 79, "gpu": 0}), 400, "invalid_argument", "gpu")
        self.assertError(self.admin.post(path, raw="[79]"), 400, "invalid_argument")
        self.assertError(self.admin.post(path), 400, "invalid_argument")
        self.assertError(self.admin.post("/v1/nodes/fa-n01/down", {"now": True}), 400,
                         "invalid_argument", "now")
        self.assertError(self.admin.post("/v1/pools/nope/drain"), 404, "not_found")
        self.assertError(self.admin.post("/v1/nodes/nope/down"), 404, "not_found")
        self.assertError(self.admin.delete("/v1/nodes/fa-n01/down"), 405, "method_not_allowed")
        self.assertError(self.admin.get(path), 405, "method_not_allowed")

        _, ta = self.tenant_client("tenant-admin")
        _, aud = issue_token(self, self.admin, "auditor")
        aud = self.admin.with_token(aud)
        for c in (ta, aud):
            self.assertError(self.fault("fa-n01", 0, 79, client=c), 403, "forbidden")
            self.assertError(c.delete(path), 403, "forbidden")
            self.assertError(c.post("/v1/nodes/fa-n01/down"), 403, "forbidden")
            self.assertError(c.post("/v1/nodes/fa-n01/up"), 403, "forbidden")
            self.assertError(c.post("/v1/pools/a/cordon"), 403, "forbidden")
        # Nothing of it happened, and the refusals are in the log.
        self.assertIsNone(self.gpu("fa-n01", 0)["fault"])
        self.assertEqual(self.admin.get("/v1/nodes/fa-n01").body["state"], "schedulable")
        denied = [e for e in self.events("gpu.fault") if e["outcome"] == "denied"]
        self.assertEqual(len(denied), 2)
        self.assertTrue(all(e["outcome"] != "success" for e in self.events("gpu.fault")))


class TestNodes(FaultCase):
    def test_node_down_evicts_and_up_returns(self):
        ta, ca = self.tenant_client()
        tb, cb = self.tenant_client()
        a = self.alloc(ca)
        b = create_alloc(self, cb, {"gpus": {"count": 1, "whole": True}, "cpus": 1})
        self.assertTrue(on_node(a, "fa-n01") and on_node(b, "fa-n01"))
        self.assertTrue(NODE_GUIDS["fa-n01"] & self.tenant_guids(tb))

        r = self.admin.post("/v1/nodes/fa-n01/down")
        self.assertStatus(r, 200)
        self.assertEqual(r.body["state"], "down")
        self.assertEqual(sorted(r.body["evicted"]), sorted([a["id"], b["id"]]))
        for x in (self.get(a["id"]), self.get(b["id"])):
            self.assertFalse(on_node(x, "fa-n01"), repr(x))
            self.assertIn(x["state"], harness.HOLDING_STATES, "requeued and placed elsewhere")
        self.assertFalse(NODE_GUIDS["fa-n01"] & (self.tenant_guids(ta) | self.tenant_guids(tb)),
                         "fabric membership on a down node")
        for _ in range(4):
            self.assertFalse(on_node(self.alloc(ca), "fa-n01"))
        self.assertEqual(self.admin.get("/v1/capacity").body["schedulable_nodes"], 2)
        self.check_gpus()
        # Again: nothing more happens.
        r = self.admin.post("/v1/nodes/fa-n01/down")
        self.assertStatus(r, 200)
        self.assertEqual(r.body["evicted"], [])
        self.assertEqual(len(self.events("node.down")), 1)
        ev = [e for e in self.events("allocation.fault") if e["object"]["id"] == a["id"]]
        self.assertEqual(ev[0]["details"]["reason"], "node fa-n01 down")

        r = self.admin.post("/v1/nodes/fa-n01/up")
        self.assertStatus(r, 200)
        self.assertEqual(r.body["state"], "schedulable")
        self.assertTrue(on_node(self.alloc(ca), "fa-n01"))
        self.assertEqual(len(self.events("node.up")), 1)

    def test_up_never_undoes_a_cordon(self):
        self.assertStatus(self.admin.post("/v1/nodes/fa-n02/cordon"), 200)
        r = self.admin.post("/v1/nodes/fa-n02/up")
        self.assertStatus(r, 200)
        self.assertEqual(r.body["state"], "cordoned")
        self.assertEqual(self.events("node.up"), [])

    def test_pool_drain_and_uncordon(self):
        _, ca = self.tenant_client()
        a = self.alloc(ca)
        self.assertTrue(on_node(a, "fa-n01"))
        self.assertStatus(self.admin.post("/v1/nodes/fa-n02/down"), 200)
        r = self.admin.post("/v1/pools/a/drain")
        self.assertStatus(r, 200)
        self.assertEqual(r.body, {"pool": "a", "state": "draining", "nodes": ["fa-n01"],
                                  "skipped": ["fa-n02"]})
        states = {n["name"]: n["state"] for n in self.admin.list_all("/v1/nodes")}
        self.assertEqual(states, {"fa-n01": "draining", "fa-n02": "down", "fb-n01": "schedulable"})
        for _ in range(3):
            x = self.alloc(ca)
            self.assertEqual(x["nodes"][0]["node"], "fb-n01", repr(x))
        r = self.admin.post("/v1/pools/a/uncordon")
        self.assertStatus(r, 200)
        self.assertEqual((r.body["nodes"], r.body["skipped"]), (["fa-n01"], ["fa-n02"]))
        states = {n["name"]: n["state"] for n in self.admin.list_all("/v1/nodes?pool=a")}
        self.assertEqual(states, {"fa-n01": "schedulable", "fa-n02": "down"})
        r = self.admin.post("/v1/pools/b/cordon")
        self.assertStatus(r, 200)
        self.assertEqual(r.body["nodes"], ["fb-n01"])
        self.assertEqual(self.admin.get("/v1/nodes/fb-n01").body["state"], "cordoned")
        acts = [(e["action"], e["object"]["id"]) for e in self.events() if e["action"].startswith("node.")]
        self.assertEqual(acts, [("node.down", "fa-n02"), ("node.drain", "fa-n01"),
                                ("node.uncordon", "fa-n01"), ("node.cordon", "fb-n01")])


class TestRestart(FaultCase):
    def test_quarantine_and_down_survive_restart(self):
        _, ca = self.tenant_client()
        a = self.alloc(ca)
        self.assertStatus(self.fault("fa-n01", 0, 79), 200)
        self.assertStatus(self.admin.post("/v1/nodes/fb-n01/down"), 200)
        self.d.stop()
        self.d.start()
        self.admin = self.d.client()
        g = self.gpu("fa-n01", 0)
        self.assertEqual(g["fault"]["xid"], 79)
        self.assertEqual(g["instances"], [])
        self.assertEqual(self.admin.get("/v1/nodes/fb-n01").body["state"], "down")
        self.assertFalse(on_gpu(self.get(a["id"]), "fa-n01", 0))
        for _ in range(6):
            x = self.alloc(ca)
            self.assertFalse(on_gpu(x, "fa-n01", 0) or on_node(x, "fb-n01"), repr(x))
        self.check_gpus()
        self.assertStatus(self.admin.delete("/v1/nodes/fa-n01/gpus/0/fault"), 204)
        self.assertTrue(on_gpu(self.alloc(ca), "fa-n01", 0))

    def test_fault_stored_before_a_crash_is_finished_at_start(self):
        """A fault that is durable but whose evictions never ran (a crash
        between the two) is carried out at the next start."""
        _, ca = self.tenant_client()
        a = self.alloc(ca)
        self.assertTrue(on_gpu(a, "fa-n01", 0))
        self.d.stop()
        db = sqlite3.connect(os.path.join(self.d.state_dir, "state.db"))
        try:
            db.execute("INSERT INTO gpu_faults(node, gpu, xid, at_ms) VALUES ('fa-n01', 0, 79, 1)")
            db.commit()
        finally:
            db.close()
        self.d.start()
        self.admin = self.d.client()
        a2 = self.get(a["id"])
        self.assertFalse(on_gpu(a2, "fa-n01", 0), repr(a2))
        self.assertIn(a2["state"], harness.HOLDING_STATES)
        self.assertEqual(self.gpu("fa-n01", 0)["fault"]["xid"], 79)
        ev = [e for e in self.events("allocation.fault") if e["object"]["id"] == a["id"]]
        self.assertEqual(len(ev), 1)
        self.assertEqual(ev[0]["actor"]["role"], "system")
        self.check_gpus()


class TestCli(FaultCase):
    def isoctl(self, *argv):
        e = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
        e["ISOSTACK_URL"] = self.d.url()
        e["ISOSTACK_TOKEN"] = self.d.admin_token
        return subprocess.run([harness.Binaries.isoctl] + list(argv), env=e, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=T(60))

    def test_cli(self):
        if not harness.Binaries.isoctl:
            self.skipTest("no isoctl binary")
        p = self.isoctl("gpu", "fault", "fa-n01", "0", "--xid", "79", "-o", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('"quarantined": true', p.stdout)
        p = self.isoctl("gpu", "list", "--node", "fa-n01")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("XID 79", p.stdout)
        self.assertEqual(self.isoctl("gpu", "restore", "fa-n01", "0").returncode, 0)
        self.assertIsNone(self.gpu("fa-n01", 0)["fault"])
        p = self.isoctl("gpu", "fault", "fa-n01", "0")
        self.assertEqual(p.returncode, 2, "missing --xid is a usage error")
        p = self.isoctl("gpu", "fault", "fa-n01", "0", "--xid", "x")
        self.assertEqual(p.returncode, 2)
        p = self.isoctl("gpu", "fault", "fa-n01", "9", "--xid", "79")
        self.assertEqual(p.returncode, 3, "unknown GPU: not found")
        p = self.isoctl("node", "down", "fa-n02")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("down", p.stdout)
        self.assertEqual(self.isoctl("node", "up", "fa-n02").returncode, 0)
        p = self.isoctl("pool", "drain", "a")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("fa-n01", p.stdout)
        self.assertEqual(self.admin.get("/v1/nodes/fa-n02").body["state"], "drained")
        self.assertEqual(self.isoctl("pool", "uncordon", "a").returncode, 0)
        self.assertEqual(self.isoctl("pool", "drain", "nope").returncode, 3)
        for argv in (["gpu", "fault", "--help"], ["node", "down", "--help"], ["pool", "--help"]):
            p = self.isoctl(*argv)
            self.assertEqual(p.returncode, 0, argv)
            self.assertIn("Usage: isoctl", p.stdout)


if __name__ == "__main__":
    harness.main(__doc__)

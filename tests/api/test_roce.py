#!/usr/bin/env python3
"""test_roce.py: RoCE VFs on an Ethernet cluster (issue 14, docs/fabric.md
"RoCE VFs", docs/api.md tenants, docs/agents.md "vfs"): with
fabric.vlan_range every tenant holds a VLAN of its own, taken with the
tenant like its VNI, kept across a restart, freed with the tenant; a full
range is a clear 409 naming fabric.vlan_range and makes no tenant; tenants
made before the range was given get one at the next start; without the
range no tenant has a vlan. A tenant on a node with port.vfs holds a VF
whose desired entry carries its VLAN; the gate waits until the agent reads
back that VLAN with the spoof check on; a real agent (sim VF driver) sets
it; the verifier's Ethernet mode finds a VF on another tenant's VLAN, one
without VLAN or spoof check, on a VLAN nobody holds, or not reported.

Run: python3 tests/api/test_roce.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, create_alloc, create_tenant, issue_token  # noqa: E402
from test_agent_daemon import Agent  # noqa: E402
from test_overlay import instance, status  # noqa: E402

# tests/api/data/eth-roce.yaml: vni_range [10001, 10003], vlan_range [100, 101];
# eth-n01 has mlx5_0 with 2 VFs, eth-n02 has no port.
ROCE = "eth-roce.yaml"
N1, N2 = "eth-n01", "eth-n02"
# tests/api/data/eth.yaml: the same kind of cluster without vlan_range.
ETH = "eth.yaml"


class DaemonCase(harness.FreshDaemonCase):
    config = ROCE

    def tenant(self, name):
        r = self.admin.get("/v1/tenants/" + name)
        self.assertStatus(r, 200)
        return r.body


def one_gpu(tenant):
    return {"tenant": tenant, "gpus": {"count": 1, "profile": "1g.10gb"}}


class TestRoceVfs(DaemonCase):
    def vfs(self, node):
        r = self.admin.get("/v1/nodes/%s/desired" % node)
        self.assertStatus(r, 200)
        return r.body["vfs"]

    def test_a_tenant_on_a_node_with_vfs_gets_one_with_its_vlan(self):
        t1 = create_tenant(self, self.admin)
        t2 = create_tenant(self, self.admin)
        a = create_alloc(self, self.admin, one_gpu(t1["name"]))
        self.assertEqual(a["nodes"][0]["node"], N1)  # first-fit
        self.assertEqual(self.vfs(N1), [{"index": 0, "device": "mlx5_0", "tenant": t1["name"],
                                         "vlan": t1["vlan"],
                                         "members": [{"allocation": a["id"], "member": 0}]}])
        # a second member of the same tenant shares the tenant's VF
        a2 = create_alloc(self, self.admin, one_gpu(t1["name"]))
        self.assertEqual(a2["nodes"][0]["node"], N1)
        (vf,) = self.vfs(N1)
        self.assertEqual(len(vf["members"]), 2)
        # another tenant: the next VF, its own VLAN
        b = create_alloc(self, self.admin, one_gpu(t2["name"]))
        self.assertEqual(b["nodes"][0]["node"], N1)
        vfs = {v["tenant"]: v for v in self.vfs(N1)}
        self.assertEqual((vfs[t2["name"]]["index"], vfs[t2["name"]]["vlan"]), (1, t2["vlan"]))
        self.assertNotIn("guid", vfs[t2["name"]])
        self.assertNotIn("pkey", vfs[t2["name"]])
        # kept across a restart
        self.d.restart()
        self.admin = self.d.client()
        self.assertEqual({v["tenant"]: (v["index"], v["vlan"]) for v in self.vfs(N1)},
                         {t1["name"]: (0, t1["vlan"]), t2["name"]: (1, t2["vlan"])})
        # the tenant leaves the node: its VF is free again
        for x in (a, a2):
            self.assertStatus(self.admin.delete("/v1/allocations/" + x["id"]), 200)
        self.assertEqual([v["tenant"] for v in self.vfs(N1)], [t2["name"]])
        # a node without VFs lists none
        self.assertEqual(self.vfs(N2), [])


class TestRoceGate(DaemonCase):
    """With the agent gate on, a member on a node with RoCE VFs is ready
    only once its agent reads back the tenant's VLAN with the spoof check on
    the tenant's VF."""

    agents = True

    def put_status(self, body):
        return self.admin.request("PUT", "/v1/nodes/%s/status" % N1, body)

    def state(self, a):
        got = self.admin.get("/v1/allocations/" + a["id"]).body
        return got["state"], got

    def test_the_member_waits_for_its_vf_vlan_and_spoofchk(self):
        t = create_tenant(self, self.admin)
        a = create_alloc(self, self.admin, one_gpu(t["name"]))
        p = a["placement"][0]
        self.assertEqual(p["node"], N1)
        doc = self.admin.get("/v1/nodes/%s/desired" % N1).body
        (want,) = doc["vfs"]
        inst = instance(a["id"], 0, p["gpu"], p["start"], profile="1g.10gb")

        def vf(vlan, spoofchk, ready=True):
            return [{"index": want["index"], "netdev": "eth0v0", "vlan": vlan,
                     "spoofchk": spoofchk, "ready": ready}]

        # another VLAN read back, the spoof check off, or not ready: waiting
        for vfs in (vf(t["vlan"] + 1, True), vf(t["vlan"], False), vf(t["vlan"], True, False), []):
            self.assertStatus(self.put_status(status(doc["term"], [inst], vfs)), 204)
            state, got = self.state(a)
            self.assertEqual(state, "provisioning", repr(vfs))
            self.assertIsNone(got["nodes"][0]["vf"])
        # a RoCE VF with a GUID beside its VLAN is refused naming the field
        bad = vf(t["vlan"], True)
        bad[0]["guid"] = "0x0002c90300ef0102"
        self.assertError(self.put_status(status(doc["term"], [inst], bad)), 400,
                         "invalid_argument", "vfs[0].guid")
        # the tenant's VLAN with the spoof check on: active, the VF shown by its VLAN
        self.assertStatus(self.put_status(status(doc["term"], [inst], vf(t["vlan"], True))), 204)
        state, got = self.state(a)
        self.assertEqual(state, "active", repr(got))
        self.assertEqual(got["nodes"][0]["vf"],
                         {"kind": "vf", "index": want["index"], "netdev": "eth0v0", "vlan": t["vlan"]})


class TestVerifyRoce(DaemonCase):
    """The verifier's Ethernet mode judges each RoCE VF as its agent read it
    back: the tenant's VLAN with the spoof check on, else a finding."""

    def setUp(self):
        super().setUp()
        self.t1 = create_tenant(self, self.admin)
        self.t2 = create_tenant(self, self.admin)
        a = create_alloc(self, self.admin, one_gpu(self.t1["name"]))
        b = create_alloc(self, self.admin, one_gpu(self.t2["name"]))
        self.assertEqual([a["nodes"][0]["node"], b["nodes"][0]["node"]], [N1, N1])
        self.a, self.b = a["id"], b["id"]
        doc = self.admin.get("/v1/nodes/%s/desired" % N1).body
        self.term = doc["term"]
        self.index = {v["tenant"]: v["index"] for v in doc["vfs"]}

    def vf(self, tenant, vlan=None, spoofchk=True):
        return {"index": self.index[tenant["name"]], "netdev": "", "ready": True,
                "vlan": tenant["vlan"] if vlan is None else vlan, "spoofchk": spoofchk}

    def report(self, vfs):
        def ten(t, alloc):
            return {"vni": t["vni"], "bridge": "isobr%d" % t["vni"], "vxlan": "isovx%d" % t["vni"],
                    "members": [{"allocation": alloc, "member": 0, "ifname": "eth0",
                                 "address": "10.0.0.2"}]}
        overlay = {"guard": True, "drops": 0, "allowed": [],
                   "tenants": [ten(self.t1, self.a), ten(self.t2, self.b)]}
        self.assertStatus(self.admin.request("PUT", "/v1/nodes/%s/status" % N1,
                                             status(self.term, [], vfs, overlay=overlay)), 204)
        r = self.admin.get("/v1/fabric/verify")
        self.assertStatus(r, 200, "verify")
        return r.body

    def findings(self, vfs):
        rep = self.report(vfs)
        return rep["ok"], [(v["kind"], v["nodes"], v["tenants"]) for v in rep["violations"]], rep

    def test_vfs_on_their_tenants_vlans_are_clean(self):
        ok, found, rep = self.findings([self.vf(self.t1), self.vf(self.t2)])
        self.assertTrue(ok, repr(rep))
        self.assertEqual(found, [])

    def test_a_vf_on_another_tenants_vlan_is_cross_tenant(self):
        ok, found, rep = self.findings([self.vf(self.t1), self.vf(self.t2, vlan=self.t1["vlan"])])
        self.assertFalse(ok)
        self.assertEqual(found, [("cross_tenant", [N1], [self.t2["name"], self.t1["name"]])])
        self.assertIn("VLAN %d of tenant %s" % (self.t1["vlan"], self.t1["name"]),
                      rep["violations"][0]["message"])

    def test_no_vlan_or_the_spoof_check_off_is_no_guard(self):
        for bad in (self.vf(self.t1, vlan=0), self.vf(self.t1, spoofchk=False)):
            ok, found, rep = self.findings([bad, self.vf(self.t2)])
            self.assertFalse(ok)
            self.assertEqual(found, [("no_guard", [N1], [self.t1["name"]])], repr(bad))

    def test_a_vlan_no_tenant_holds_is_extra_and_an_unreported_vf_missing(self):
        ok, found, rep = self.findings([self.vf(self.t1, vlan=3000)])
        self.assertFalse(ok)
        self.assertEqual(sorted(found), [("extra", [N1], [self.t1["name"]]),
                                         ("missing", [N1], [self.t2["name"]])])


class TestRoceAgent(ApiTestCase):
    """End to end with a real isostack-agent (sim VF driver: the VF's VLAN
    and spoof check as files of its tree in the state dir): the agent sets
    the tenant's VLAN with the spoof check on, the gate opens on its read-back,
    and a VLAN planted on the VF is put right."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_roce.")
        self.d = Daemon(ROCE, extra_args=("--agent-lease-s", "3", "--agent-grace-s", "600",
                                          "--provisioning-timeout-s", "30"), agents=True)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()
        token_file = os.path.join(self.tmp, "agent.token")
        with open(token_file, "w") as f:
            f.write(self.d.admin_token + "\n")
        self.agent = Agent(self.d.url(), token_file, os.path.join(self.tmp, "state"), [N1])
        self.agent.argv += ["--vf-driver", "sim"]

    def tearDown(self):
        try:
            self.agent.kill()
            text = self.agent.text()
            self.agent.close()
            self.assertNotIn("Sanitizer", text, text[-3000:])
            self.assertNotIn("runtime error:", text, text[-3000:])
            self.d.stop()
        finally:
            self.d.cleanup()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def wait_context(self):
        return "; agent log:\n" + self.agent.text()[-3000:]

    def sim_vf(self, vf, what):
        path = os.path.join(self.tmp, "state", N1, "vf-sim", "sys", "class", "infiniband", "mlx5_0",
                            "device", "sriov", str(vf), what)
        try:
            with open(path) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def test_the_agent_sets_the_vlan_and_the_gate_opens_on_its_read_back(self):
        t = create_tenant(self, self.admin)
        self.agent.start()
        a = create_alloc(self, self.admin, one_gpu(t["name"]))
        self.assertEqual(a["placement"][0]["node"], N1)
        self.wait_until("active", lambda: self.admin.get("/v1/allocations/" + a["id"]).body["state"]
                        == "active")
        self.assertEqual(self.sim_vf(0, "vlan"), "%d\n" % t["vlan"])
        self.assertEqual(self.sim_vf(0, "spoofchk"), "on\n")
        m = self.admin.get("/v1/allocations/" + a["id"]).body["nodes"][0]
        self.assertEqual(m["vf"], {"kind": "vf", "index": 0, "netdev": "mlx5_0v0", "vlan": t["vlan"]})
        self.assertIn("event=agent.vf_vlan_set node=eth-n01 device=mlx5_0 vf=0", self.agent.text())
        # another VLAN planted on the VF: the next tick sets the tenant's again
        with open(os.path.join(self.tmp, "state", N1, "vf-sim", "sys", "class", "infiniband", "mlx5_0",
                               "device", "sriov", "0", "vlan"), "w") as f:
            f.write("7\n")
        self.wait_until("the VLAN is put right", lambda: self.sim_vf(0, "vlan") == "%d\n" % t["vlan"])


class TestTenantVlan(DaemonCase):
    def test_each_tenant_holds_its_own_vlan_until_it_is_deleted(self):
        t1 = create_tenant(self, self.admin)
        t2 = create_tenant(self, self.admin)
        self.assertEqual(sorted([t1["vlan"], t2["vlan"]]), [100, 101])
        self.assertIn("vni", t1)
        # the VLAN range is full (the VNI range is not): refused naming it,
        # and no tenant made
        r = self.admin.post("/v1/tenants", {"name": "t-third"})
        err = self.assertError(r, 409, "insufficient_capacity", "fabric.vlan_range")
        self.assertIn("VLAN", err["message"])
        self.assertStatus(self.admin.get("/v1/tenants/t-third"), 404)
        # kept across a restart
        self.d.restart()
        self.assertEqual(self.tenant(t1["name"])["vlan"], t1["vlan"])
        self.assertEqual(self.tenant(t2["name"])["vlan"], t2["vlan"])
        # a deleted tenant's VLAN is free again, also after a restart
        self.assertStatus(self.admin.delete("/v1/tenants/" + t1["name"]), 204)
        self.d.restart()
        t3 = create_tenant(self, self.admin, name="t-third")
        self.assertEqual(t3["vlan"], t1["vlan"])
        self.assertNotEqual(t3["vlan"], self.tenant(t2["name"])["vlan"])
        # the tenant sees its own
        _, secret = issue_token(self, self.admin, "tenant-user", tenant="t-third")
        body = self.d.client(secret).get("/v1/tenants/t-third").body
        self.assertEqual(body["vlan"], t3["vlan"])

    def test_tenants_made_before_the_range_get_one_at_start(self):
        state = self.d.state_dir
        self.d.stop()
        old = Daemon(ETH, state_dir=state)
        try:
            old.start()
            t1 = create_tenant(self, old.client())
            self.assertNotIn("vlan", t1)  # no range, no VLAN
            old.stop()
        finally:
            old.cleanup()
        self.d.start()
        self.admin = self.d.client()
        self.assertEqual(self.tenant(t1["name"])["vlan"], 100)
        self.assertEqual(create_tenant(self, self.admin)["vlan"], 101)


if __name__ == "__main__":
    harness.main()

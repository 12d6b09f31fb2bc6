#!/usr/bin/env python3
"""test_overlay.py: the controller's side of the job sandbox and of the
Ethernet overlay (issue 14; docs/agents.md "members" and "sandboxes",
docs/api.md, docs/fabric.md "Ethernet") against a real isostackd: each
node's desired document lists its members (cpus, memory, tenant, and on an
ethernet fabric the tenant's VNI, the node's index and the underlay
addresses of the tenant's other nodes); the gate waits for a member's
sandbox when the agent says it makes them (sandbox_mode "real") and not
otherwise; a member object shows its sandbox to cluster roles only; every
tenant of an ethernet cluster holds a VNI of its own from fabric.vni_range,
kept across a restart, freed with the tenant, and a full range is a clear
409 naming fabric.vni_range; the live verifier's Ethernet mode finds each
violation planted in an agent's reported overlay.

Run: python3 tests/api/test_overlay.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Daemon, create_alloc, create_tenant, issue_token  # noqa: E402

# tests/api/data/agents.yaml: ag-n01 = 2 x h100-80gb with MIG (pool "mig").
AGENTS, MIG_NODE = "agents.yaml", "ag-n01"
# tests/api/data/eth.yaml: eth-n01 (192.0.2.11), eth-n02 (192.0.2.12) and
# eth-n03 (no underlay_ip), vni_range [10001, 10002].
ETH = "eth.yaml"
N1, N2, N3 = "eth-n01", "eth-n02", "eth-n03"
IP1, IP2 = "192.0.2.11", "192.0.2.12"


class DaemonCase(harness.FreshDaemonCase):
    config = AGENTS

    def put_status(self, node, body):
        return self.admin.request("PUT", "/v1/nodes/%s/status" % node, body)


def status(term, instances=(), vfs=None, **extra):
    body = {"term_seen": term, "version": "0.1.0",
            "gpus": [{"index": 0, "model": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0a",
                      "mig_mode": "enabled"}],
            "instances": list(instances)}
    if vfs is not None:
        body["vfs"] = vfs
    body.update(extra)
    return body


def instance(alloc, member, gpu, start, profile="3g.40gb"):
    return {"gpu": gpu, "start": start, "profile": profile, "uuid": "MIG-%s-%d" % (alloc[-4:], member),
            "allocation": alloc, "member": member, "ready": True}


def sandbox(alloc, member, ready=True, cpus="2-3"):
    sb = {"allocation": alloc, "member": member, "ready": ready}
    if ready:
        sb.update(cgroup="iso-%s-%d" % (alloc, member), cpus=cpus)
    else:
        sb["reason"] = "making the cgroup"
    return sb


class TestMembers(DaemonCase):
    def test_each_member_on_the_node_is_listed_with_what_it_was_placed_with(self):
        tenant = create_tenant(self, self.admin)["name"]
        a = create_alloc(self, self.admin, {"tenant": tenant, "members": 2, "cpus": 4, "memory_mib": 1024,
                                            "gpus": {"count": 1, "profile": "3g.40gb"}, "pool": "mig"})
        members = self.desired(MIG_NODE)["members"]
        self.assertEqual(members, [
            {"allocation": a["id"], "member": k, "tenant": tenant, "cpus": 4, "memory_mib": 1024,
             "io_uring": False, "overlay": None} for k in (0, 1)])
        self.assertEqual(self.desired("ag-n02")["members"], [])
        self.assertStatus(self.admin.delete("/v1/allocations/" + a["id"]), 200)
        self.assertEqual(self.desired(MIG_NODE)["members"], [])


class TestSandboxGate(DaemonCase):
    """With the gate on, an agent that makes sandboxes (sandbox_mode real)
    must report each member's sandbox ready before the member is ready; an
    agent with sandbox_mode off is not waited for."""

    agents = True

    def start_alloc(self):
        self.tenant = create_tenant(self, self.admin)["name"]
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "3g.40gb"},
                                            "pool": "mig"})
        p = a["placement"][0]
        doc = self.desired(MIG_NODE)
        self.vfs = [{"index": v["index"], "guid": v["guid"], "ready": True} for v in doc["vfs"]]
        return a, doc["term"], instance(a["id"], 0, p["gpu"], p["start"])

    def state(self, a, client=None):
        got = (client or self.admin).get("/v1/allocations/" + a["id"]).body
        return got["state"], got

    def test_real_sandboxes_are_waited_for_and_shown_to_cluster_roles_only(self):
        a, term, inst = self.start_alloc()
        # the instance ready, no sandbox reported: still waiting
        self.assertStatus(self.put_status(MIG_NODE, status(term, [inst], self.vfs, sandbox_mode="real")), 204)
        self.assertEqual(self.state(a)[0], "provisioning")
        # the sandbox reported, not ready: still waiting, and no sandbox to show
        self.assertStatus(self.put_status(MIG_NODE, status(term, [inst], self.vfs, sandbox_mode="real",
                                                           sandboxes=[sandbox(a["id"], 0, ready=False)])), 204)
        state, got = self.state(a)
        self.assertEqual(state, "provisioning")
        self.assertIsNone(got["nodes"][0]["sandbox"], repr(got))
        # ready: active, and a cluster role sees its cgroup and cpus
        self.assertStatus(self.put_status(MIG_NODE, status(term, [inst], self.vfs, sandbox_mode="real",
                                                           sandboxes=[sandbox(a["id"], 0, cpus="2-3,8")])), 204)
        state, got = self.state(a)
        self.assertEqual(state, "active", repr(got))
        self.assertEqual(got["nodes"][0]["sandbox"], {"cgroup": "iso-%s-0" % a["id"], "cpus": "2-3,8"})
        _, auditor = issue_token(self, self.admin, "auditor")
        self.assertEqual(self.state(a, self.d.client(auditor))[1]["nodes"][0]["sandbox"]["cpus"], "2-3,8")
        # a tenant never sees the key
        _, secret = issue_token(self, self.admin, "tenant-admin", tenant=self.tenant)
        got = self.state(a, self.d.client(secret))[1]
        self.assertNotIn("sandbox", got["nodes"][0], repr(got))
        self.assertIn("vf", got["nodes"][0], repr(got))

    def test_an_agent_without_sandboxes_is_not_waited_for(self):
        a, term, inst = self.start_alloc()
        self.assertStatus(self.put_status(MIG_NODE, status(term, [inst], self.vfs, sandbox_mode="off")), 204)
        state, got = self.state(a)
        self.assertEqual(state, "active", repr(got))
        self.assertIsNone(got["nodes"][0]["sandbox"])

    def test_a_bad_sandbox_is_refused_naming_the_field(self):
        a, term, inst = self.start_alloc()
        bad = sandbox(a["id"], 0, cpus="3-2")
        r = self.put_status(MIG_NODE, status(term, [inst], self.vfs, sandbox_mode="real", sandboxes=[bad]))
        self.assertError(r, 400, "invalid_argument", "sandboxes[0].cpus")
        r = self.put_status(MIG_NODE, status(term, [inst], self.vfs, sandbox_mode="yes"))
        self.assertError(r, 400, "invalid_argument", "sandbox_mode")
        r = self.put_status(MIG_NODE, status(term, [inst], self.vfs, overlay={"guard": True}))
        self.assertError(r, 400, "invalid_argument", "overlay.drops")
        self.assertEqual(self.state(a)[0], "provisioning")


class TestTenantVni(DaemonCase):
    config = ETH

    def tenant(self, name):
        r = self.admin.get("/v1/tenants/" + name)
        self.assertStatus(r, 200)
        return r.body

    def test_each_tenant_holds_its_own_vni_until_it_is_deleted(self):
        t1 = create_tenant(self, self.admin)
        t2 = create_tenant(self, self.admin)
        self.assertEqual(sorted([t1["vni"], t2["vni"]]), [10001, 10002])
        # the range is full: a clear refusal naming it, and no tenant made
        r = self.admin.post("/v1/tenants", {"name": "t-third"})
        err = self.assertError(r, 409, "insufficient_capacity", "fabric.vni_range")
        self.assertIn("vni_range", err["message"])
        self.assertStatus(self.admin.get("/v1/tenants/t-third"), 404)
        # kept across a restart
        self.d.restart()
        self.assertEqual(self.tenant(t1["name"])["vni"], t1["vni"])
        self.assertEqual(self.tenant(t2["name"])["vni"], t2["vni"])
        # a deleted tenant's VNI is free again (the last one left here)
        self.assertStatus(self.admin.delete("/v1/tenants/" + t1["name"]), 204)
        t3 = create_tenant(self, self.admin, name="t-third")
        self.assertEqual(t3["vni"], t1["vni"])
        self.assertNotEqual(t3["vni"], self.tenant(t2["name"])["vni"])
        # the tenant sees its own
        _, secret = issue_token(self, self.admin, "tenant-user", tenant="t-third")
        self.assertEqual(self.d.client(secret).get("/v1/tenants/t-third").body["vni"], t3["vni"])

    def test_a_freed_vni_is_given_again_last(self):
        """A deleted tenant's VNI goes to the back of the line, also across a
        restart: a node that missed the deletion must not meet a new tenant
        on it while other VNIs are free."""
        self.d.stop()
        self.d.cleanup()
        with open(harness.data_path(ETH)) as f:
            text = f.read()
        self.assertIn("vni_range: [10001, 10002]", text)
        wide = os.path.join(tempfile.mkdtemp(prefix="iso-eth-"), "eth4.yaml")
        self.addCleanup(shutil.rmtree, os.path.dirname(wide), True)
        with open(wide, "w") as f:
            f.write(text.replace("vni_range: [10001, 10002]", "vni_range: [10001, 10004]"))
        self.d = Daemon(wide)
        self.d.start()
        self.admin = self.d.client()
        t1 = create_tenant(self, self.admin)
        t2 = create_tenant(self, self.admin)
        self.assertEqual([t1["vni"], t2["vni"]], [10001, 10002])
        self.assertStatus(self.admin.delete("/v1/tenants/" + t1["name"]), 204)
        self.assertEqual(create_tenant(self, self.admin)["vni"], 10003)
        self.d.restart()
        self.assertStatus(self.admin.delete("/v1/tenants/" + t2["name"]), 204)
        self.assertEqual(create_tenant(self, self.admin)["vni"], 10004)
        # the end of the range: on from its start, the freed 10001 before 10002
        self.assertEqual(create_tenant(self, self.admin)["vni"], 10001)
        self.assertEqual(create_tenant(self, self.admin)["vni"], 10002)

    def test_no_vni_off_an_ethernet_fabric(self):
        self.d.stop()
        self.d.cleanup()
        self.d = Daemon(AGENTS)
        self.d.start()
        self.admin = self.d.client()
        t = create_tenant(self, self.admin)
        self.assertNotIn("vni", t)
        self.assertIsNotNone(t["pkey"])


class TestOverlayDocument(DaemonCase):
    config = ETH

    def test_members_carry_the_tenant_vni_and_the_peers_that_hold_the_tenant(self):
        t1 = create_tenant(self, self.admin)
        t2 = create_tenant(self, self.admin)
        a = create_alloc(self, self.admin, {"tenant": t1["name"], "members": 3, "spread": "node",
                                            "gpus": {"count": 1, "profile": "3g.40gb"}})
        nodes = {m["member"]: m["node"] for m in a["nodes"]}
        self.assertEqual(sorted(nodes.values()), [N1, N2, N3])
        want = {N1: (0, [IP2]), N2: (1, [IP1]), N3: (2, [IP1, IP2])}  # eth-n03 has no underlay_ip
        for k, node in nodes.items():
            (m,) = self.desired(node)["members"]
            self.assertEqual((m["allocation"], m["member"], m["tenant"]), (a["id"], k, t1["name"]))
            self.assertEqual(m["overlay"], {"vni": t1["vni"], "node_index": want[node][0],
                                            "peers": want[node][1]}, node)
        # another tenant on one node: its own VNI, no peers; the first's unchanged
        b = create_alloc(self, self.admin, {"tenant": t2["name"], "gpus": {"count": 1, "profile": "1g.10gb"}})
        node = b["nodes"][0]["node"]
        ms = {m["tenant"]: m for m in self.desired(node)["members"]}
        self.assertEqual(ms[t2["name"]]["overlay"]["vni"], t2["vni"])
        self.assertEqual(ms[t2["name"]]["overlay"]["peers"], [])
        self.assertEqual(ms[t1["name"]]["overlay"]["vni"], t1["vni"])
        # t1 leaves: t2's document loses t1's member, t2's peers stay none
        self.assertStatus(self.admin.delete("/v1/allocations/" + a["id"]), 200)
        self.assertEqual([m["tenant"] for m in self.desired(node)["members"]], [t2["name"]])
        for n in (N1, N2, N3):
            self.assertFalse([m for m in self.desired(n)["members"] if m["tenant"] == t1["name"]])

    def test_peers_follow_the_tenant_coming_and_going(self):
        t1 = create_tenant(self, self.admin)
        a = create_alloc(self, self.admin, {"tenant": t1["name"], "gpus": {"count": 1, "profile": "3g.40gb"}})
        first = a["nodes"][0]["node"]
        self.assertEqual(first, N1)
        self.assertEqual(self.desired(N1)["members"][0]["overlay"]["peers"], [])
        gen = self.desired(N1)["generation"]
        # the tenant comes to eth-n02: eth-n01's peers gain it, its generation moves
        b = create_alloc(self, self.admin, {"tenant": t1["name"], "gpus": {"count": 2, "profile": "7g.80gb"}})
        self.assertEqual(b["nodes"][0]["node"], N2)
        self.assertEqual(self.desired(N1)["members"][0]["overlay"]["peers"], [IP2])
        self.assertGreater(self.desired(N1)["generation"], gen)
        self.assertEqual(self.desired(N2)["members"][0]["overlay"]["peers"], [IP1])
        # and leaves again
        self.assertStatus(self.admin.delete("/v1/allocations/" + b["id"]), 200)
        self.assertEqual(self.desired(N1)["members"][0]["overlay"]["peers"], [])


class TestVerifyEthernet(DaemonCase):
    """GET /v1/fabric/verify (and `isoctl fabric verify`) on an ethernet
    fabric judges the overlays the agents report: clean when each node's
    kernel keeps the tenants apart, and each kind of violation planted in a
    report is found."""

    config = ETH

    def setUp(self):
        super().setUp()
        self.t1 = create_tenant(self, self.admin)
        self.t2 = create_tenant(self, self.admin)
        self.v1, self.v2 = self.t1["vni"], self.t2["vni"]
        a = create_alloc(self, self.admin, {"tenant": self.t1["name"], "members": 2, "spread": "node",
                                            "gpus": {"count": 1, "profile": "3g.40gb"}})
        self.assertEqual([m["node"] for m in a["nodes"]], [N1, N2])
        b = create_alloc(self, self.admin, {"tenant": self.t2["name"], "gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertEqual(b["nodes"][0]["node"], N1)
        self.a, self.b = a["id"], b["id"]
        self.term = self.desired(N1)["term"]

    def member(self, alloc, k, address):
        return {"allocation": alloc, "member": k, "ifname": "eth0", "address": address}

    def tenant(self, vni, members, bridge=None):
        return {"vni": vni, "bridge": bridge or "isobr%d" % vni, "vxlan": "isovx%d" % vni, "members": members}

    def clean(self):
        """The overlays as a correct agent reads them back on eth-n01 and eth-n02."""
        n1 = {"guard": True, "drops": 3, "allowed": [{"peer": IP2, "vni": self.v1}],
              "tenants": [self.tenant(self.v1, [self.member(self.a, 0, "10.0.0.2")]),
                          self.tenant(self.v2, [self.member(self.b, 0, "10.0.0.2")])]}
        n2 = {"guard": True, "drops": 0, "allowed": [{"peer": IP1, "vni": self.v1}],
              "tenants": [self.tenant(self.v1, [self.member(self.a, 1, "10.0.1.2")])]}
        return n1, n2

    def report(self, n1, n2):
        for node, ov in ((N1, n1), (N2, n2)):
            extra = {"sandbox_mode": "real"}
            if ov is not None:
                extra["overlay"] = ov
            self.assertStatus(self.put_status(node, status(self.term, **extra)), 204)
        r = self.admin.get("/v1/fabric/verify")
        self.assertStatus(r, 200, "verify")
        return r.body

    def kinds(self, rep):
        return sorted({v["kind"] for v in rep["violations"]})

    def isoctl(self, *argv):
        env = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
        env.update(ISOSTACK_URL=self.d.url(), ISOSTACK_TOKEN=self.d.admin_token)
        return subprocess.run([harness.Binaries.isoctl] + list(argv), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=harness.T(60))

    def test_a_clean_overlay_is_clean(self):
        rep = self.report(*self.clean())
        self.assertTrue(rep["ok"], repr(rep))
        self.assertEqual(rep["violations"], [])
        self.assertEqual((rep["ports_checked"], rep["partitions_checked"]), (2, 2))
        p = self.isoctl("fabric", "verify")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(p.stdout.startswith("clean: 2 ports, 2 partitions"), p.stdout)

    def test_a_member_on_another_tenants_vni_is_cross_tenant(self):
        n1, n2 = self.clean()
        n1["tenants"][0]["members"].append(self.member(self.b, 0, "10.0.0.3"))
        rep = self.report(n1, n2)
        self.assertFalse(rep["ok"])
        (v,) = [v for v in rep["violations"] if v["kind"] == "cross_tenant"]
        self.assertEqual((v["vni"], v["nodes"], v["tenants"]),
                         (self.v1, [N1], [self.t2["name"], self.t1["name"]]), repr(v))
        self.assertIn(self.b, v["message"])
        p = self.isoctl("fabric", "verify")
        self.assertEqual(p.returncode, 8, p.stdout + p.stderr)
        self.assertIn("cross_tenant", p.stdout)

    def test_a_vni_on_another_vnis_bridge_is_cross_tenant(self):
        n1, n2 = self.clean()
        n1["tenants"][1]["bridge"] = "isobr%d" % self.v1
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["cross_tenant"], repr(rep))
        self.assertEqual(len(rep["violations"]), 2, repr(rep))  # the wrong bridge, and two VNIs on one

    def test_a_vni_carrying_two_tenants_is_shared(self):
        n1, n2 = self.clean()
        n1["tenants"].append(self.tenant(77, [self.member(self.b, 0, "10.0.0.9")]))
        n2["tenants"].append(self.tenant(77, [self.member(self.a, 1, "10.0.1.9")]))
        rep = self.report(n1, n2)
        self.assertIn("shared_vni", self.kinds(rep))
        (v,) = [v for v in rep["violations"] if v["kind"] == "shared_vni"]
        self.assertEqual((v["vni"], v["nodes"], v["tenants"]),
                         (77, [N1, N2], [self.t2["name"], self.t1["name"]]), repr(v))
        self.assertIn("extra", self.kinds(rep))  # VNI 77 is no tenant's

    def test_a_node_holding_members_without_its_guard(self):
        n1, n2 = self.clean()
        n1["guard"] = False
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["no_guard"], repr(rep))
        self.assertEqual(rep["violations"][0]["nodes"], [N1])
        # no overlay reported at all: no guard either, and its members are on none
        rep = self.report(n1, None)
        self.assertEqual(self.kinds(rep), ["missing", "no_guard"], repr(rep))

    def test_a_peer_that_holds_no_member_of_the_tenant_is_stray(self):
        n1, n2 = self.clean()
        n2["allowed"].append({"peer": IP1, "vni": self.v2})         # eth-n02 holds nothing of t2
        n1["allowed"].append({"peer": "192.0.2.99", "vni": self.v1})  # no node's address
        n1["allowed"].append({"peer": IP1, "vni": self.v1})           # its own address
        n1["allowed"].append({"peer": IP2, "vni": 77})                # no tenant's VNI
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["stray_peer"], repr(rep))
        self.assertEqual(len(rep["violations"]), 4, repr(rep))
        msgs = " | ".join(v["message"] for v in rep["violations"])
        for needle in ("holds no member of tenant %s" % self.t2["name"], "192.0.2.99, which is no node",
                       "its own address", "VNI 77"):
            self.assertIn(needle, msgs)
        # eth-n03 holds no member of t1: letting t1 in from it is stray too
        n1, n2 = self.clean()
        n2["allowed"].append({"peer": "192.0.2.13", "vni": self.v1})
        self.assertEqual(self.kinds(self.report(n1, n2)), ["stray_peer"])

    def test_a_node_with_members_whose_agent_never_reported_is_unreachable(self):
        c = create_alloc(self, self.admin, {"tenant": self.t1["name"], "members": 3, "spread": "node",
                                            "gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertIn(N3, [m["node"] for m in c["nodes"]])
        n1, n2 = self.clean()
        n1["tenants"][0]["members"].append(self.member(c["id"], 0, "10.0.0.4"))
        n2["tenants"][0]["members"].append(self.member(c["id"], 1, "10.0.1.4"))
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["unreachable"], repr(rep))
        self.assertEqual(rep["violations"][0]["nodes"], [N3])

    def test_a_member_attached_nowhere_is_missing_and_an_unknown_one_extra(self):
        n1, n2 = self.clean()
        n2["tenants"][0]["members"] = [self.member("a-00000000000000ff", 0, "10.0.1.2")]
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["extra", "missing"], repr(rep))


if __name__ == "__main__":
    harness.main(__doc__)

#!/usr/bin/env python3
"""test_e2e_node.py: an allocation made real on its host, end to end.

isostackd with the OpenSM fabric driver on an ibsim fabric (the fabric of
test_fabric_api.py: scripts/ibsim-fabric.sh, P_Keys read back with
`smpquery`), and one isostack-agent for node "shared" with the nvml GPU
driver over the project's fake libnvidia-ml.so.1 (build/tests/fakes) and the
ibsim VF driver, with a node-agent token. Two tenants' allocations on that
node go active only once the agent made their MIG instances and the fabric
confirmed their P_Keys; they get distinct MIG UUIDs (the fake's instances)
and their tenants' P_Keys on their VFs. Release removes the instance and the
membership. An XID 79 queued in the fake's shared state file (as its inject
hook does) is read by the agent and evicts every slice on the GPU, which is
quarantined. Skips (77) only when ibsim/opensm are absent.

argv: isostackd isoctl"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.environ.get("ISO_SOURCE_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402
from test_agent_faults import inject_xid  # noqa: E402
from test_fabric_api import VF0, VF1, Fabric, wait_pkeys, wait_state  # noqa: E402

NODE = "shared"  # test_fabric_api's inventory: 2 x h100-80gb with MIG, 2 VFs


def build_dir():
    return os.path.dirname(harness.Binaries.isostackd)


def fake_library():
    return os.path.join(build_dir(), "tests", "fakes", "libnvidia-ml.so.1")


class NodeE2E(harness.ApiTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_e2e_node.")
        self.fab = Fabric()
        self.addCleanup(self.fab.stop)
        self.daemon = harness.Daemon(self.fab.config, env=self.fab.env, agents=True)
        self.addCleanup(self.daemon.cleanup)
        self.daemon.start()
        self.admin = harness.Client(self.daemon, self.daemon.admin_token)
        # The fake's GPUs (the inventory's two H100s, MIG on) and its state,
        # shared by the agent and this process (the inject hook).
        self.nvml_config = os.path.join(self.tmp, "nvml-config.json")
        self.nvml_state = os.path.join(self.tmp, "nvml-state.json")
        with open(self.nvml_config, "w") as f:
            json.dump({"gpus": [{"model": "H100-80GB"}, {"model": "H100-80GB"}]}, f)
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": NODE})
        self.assertStatus(r, 201)
        token_file = os.path.join(self.tmp, "agent.token")
        with open(token_file, "w") as f:
            f.write(r.body["token"] + "\n")
        env = dict(os.environ, ISOSTACK_NVML_LIBRARY=fake_library(),
                   ISOSTACK_FAKE_NVML_CONFIG=self.nvml_config,
                   ISOSTACK_FAKE_NVML_STATE=self.nvml_state)
        self.log = open(os.path.join(self.tmp, "agent.log"), "w+b")
        self.agent = subprocess.Popen(
            [os.path.join(build_dir(), "isostack-agent"), "--controller", self.daemon.url(),
             "--token-file", token_file, "--node", NODE, "--gpu-driver", "nvml",
             "--vf-driver", "ibsim", "--ibsim-net", self.fab.net,
             "--state-dir", os.path.join(self.tmp, "state"), "--heartbeat-s", "1",
             "--sandbox", "off"],  # sandboxes: tests/api/test_agent_sandbox.py
            stdout=self.log, stderr=self.log, env=env)
        self.addCleanup(self.stop_agent)

    def stop_agent(self):
        if self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            try:
                self.agent.wait(timeout=harness.T(20))
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait()
        text = self.agent_text()
        self.log.close()
        self.assertNotIn("Sanitizer", text, text[-3000:])
        self.assertNotIn("runtime error:", text, text[-3000:])

    def agent_text(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def wait_context(self):
        return "; agent log:\n" + self.agent_text()[-4000:]

    wait_timeout = 30

    def fake_uuids(self):
        """The MIG UUIDs of the fake's instances, by GPU."""
        with open(self.nvml_state) as f:
            st = json.load(f)
        return {g: {ci["uuid"] for i in gpu["instances"] for ci in i["cis"]}
                for g, gpu in enumerate(st["gpus"])}

    def tenant_key(self, name):
        for p in self.admin.get("/v1/fabric/intent").body["partitions"]:
            if p["kind"] == "tenant" and p["tenant"] == name:
                return int(p["pkey"], 16)
        return None

    def test_two_tenants_on_one_node_then_release_and_xid_79(self):
        a = harness.create_tenant(self, self.admin, "acme")["name"]
        b = harness.create_tenant(self, self.admin, "beta")["name"]
        shape = {"gpus": {"profile": "3g.40gb", "count": 1}, "cpus": 1, "memory_mib": 1024,
                 "pool": "shared"}
        ra = harness.create_alloc(self, self.admin, dict(shape, tenant=a))
        rb = harness.create_alloc(self, self.admin, dict(shape, tenant=b))
        # Active only once the agent made the instances (and the VFs) and
        # OpenSM confirmed the P_Keys.
        ra = wait_state(self, self.admin, ra["id"], "active", timeout=60)
        rb = wait_state(self, self.admin, rb["id"], "active", timeout=60)
        ma, mb = ra["nodes"][0], rb["nodes"][0]
        self.assertTrue(ma["ready"] and mb["ready"], (ma, mb))
        ua, ub = ma["devices"][0]["uuid"], mb["devices"][0]["uuid"]
        self.assertTrue(ua.startswith("MIG-") and ub.startswith("MIG-") and ua != ub, (ua, ub))
        self.assertEqual((ma["cuda_visible_devices"], mb["cuda_visible_devices"]), (ua, ub))
        gpu_a, gpu_b = ma["devices"][0]["gpu"], mb["devices"][0]["gpu"]
        made = self.fake_uuids()
        self.assertIn(ua, made[gpu_a])
        self.assertIn(ub, made[gpu_b])

        # VF GUIDs (the VF part of the agent, docs/agent.md "VFs"): each
        # tenant's member shows the VF it got, with the GUID read back.
        # More VF assertions (netdev, the GUID restored at release) belong here.
        vfs = {ma["vf"]["guid"], mb["vf"]["guid"]}
        self.assertEqual(vfs, {"0x%016x" % VF0, "0x%016x" % VF1}, (ma, mb))
        vf_of = {x["id"]: int(x["nodes"][0]["vf"]["guid"], 16) for x in (ra, rb)}

        # The tenants' P_Keys, read back from the ports by smpquery.
        ka, kb = self.tenant_key(a), self.tenant_key(b)
        self.assertTrue(ka and kb and ka != kb)
        wait_pkeys(self, self.fab, vf_of[ra["id"]], {0x7fff: False, 0x0010: False, ka: True})
        wait_pkeys(self, self.fab, vf_of[rb["id"]], {0x7fff: False, 0x0010: False, kb: True})

        # Release: the instance leaves the GPU and the tenant leaves the VF.
        r = self.admin.delete("/v1/allocations/" + ra["id"])
        self.assertIn(r.status, (200, 202, 204), repr(r))
        self.wait_until("a's instance destroyed", lambda: ua not in self.fake_uuids()[gpu_a])
        self.assertIn(ub, self.fake_uuids()[gpu_b])
        wait_pkeys(self, self.fab, vf_of[ra["id"]], {0x7fff: False})
        wait_pkeys(self, self.fab, vf_of[rb["id"]], {0x7fff: False, 0x0010: False, kb: True})

        # A third allocation beside b, then XID 79 on their GPU: everything
        # on it is evicted and the GPU is quarantined.
        rc = harness.create_alloc(self, self.admin, dict(shape, tenant=a, gpus={
            "profile": "1g.10gb", "count": 1}))
        rc = wait_state(self, self.admin, rc["id"], "active", timeout=60)
        on_b = [x["id"] for x in (rb, rc) if x["nodes"][0]["devices"][0]["gpu"] == gpu_b]
        inject_xid(self.nvml_state, gpu_b, 79)
        fault = self.wait_until("GPU %d quarantined" % gpu_b, lambda: [
            g for g in self.admin.list_all("/v1/gpus?node=" + NODE)
            if g["index"] == gpu_b and g["fault"]])
        self.assertEqual(fault[0]["fault"]["xid"], 79)
        self.assertEqual(fault[0]["instances"], [])
        evs = [i["event"] for i in self.admin.list_all("/v1/audit/events", limit=1000)]
        evicted = {e["object"]["id"] for e in evs if e["action"] == "allocation.fault"}
        self.assertEqual(evicted, set(on_b))
        f = [e for e in evs if e["action"] == "gpu.fault"]
        self.assertEqual([(e["actor"]["role"], e["details"]["xid"]) for e in f], [("node-agent", 79)])


if __name__ == "__main__":
    harness.main(__doc__)

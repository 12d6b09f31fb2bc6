#!/usr/bin/env python3
"""test_agent_daemon.py: the node agent daemon (build/isostack-agent,
docs/agent.md) against a real isostackd: one agent with the sim GPU driver
serves both nodes of tests/api/data/agents.yaml; a MIG allocation's instance
is created by it and the member shows ready with its MIG UUID; on release the
instance goes away; a killed agent makes its node unreachable (short lease,
--agents-required) and a restarted one makes it reachable again, finding its
instance where it left it; every bad flag exits 2 naming the flag.

Run: python3 tests/api/test_agent_daemon.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T, create_alloc, create_tenant  # noqa: E402

MIG_NODE, WHOLE_NODE = "ag-n01", "ag-n02"


def agent_binary():
    return os.path.join(os.path.dirname(harness.Binaries.isostackd), "isostack-agent")


class Agent:
    """One isostack-agent process serving `nodes`."""

    def __init__(self, url, token_file, state_dir, nodes):
        # --sandbox off: these tests kill agents, and a real-mode agent's
        # members' sandboxes outlive it by design (test_agent_sandbox.py
        # tests them, and releases before it stops its agent)
        self.argv = [agent_binary(), "--controller", url, "--token-file", token_file,
                     "--gpu-driver", "sim", "--state-dir", state_dir, "--heartbeat-s", "1",
                     "--sandbox", "off"]
        for n in nodes:
            self.argv += ["--node", n]
        self.log = tempfile.TemporaryFile()
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log)

    def stop(self):
        """SIGTERM; returns the exit code."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=T(30))
        return self.proc.returncode if self.proc else None

    def close(self):
        self.kill()
        self.log.close()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def text(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")


class TestAgentDaemon(ApiTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_agent_daemon.")
        # With the provisioning gate (no --no-agents): active only once the
        # agent reported the member's instances ready.
        self.d = Daemon("agents.yaml", extra_args=("--agent-lease-s", "3", "--agent-grace-s", "600",
                                                   "--agents-required", "--provisioning-timeout-s", "8"),
                        agents=True)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()
        self.tenant = create_tenant(self, self.admin)["name"]
        self.token_file = os.path.join(self.tmp, "agent.token")
        with open(self.token_file, "w") as f:
            f.write(self.d.admin_token + "\n")
        self.agent = Agent(self.d.url(), self.token_file, os.path.join(self.tmp, "state"),
                           [MIG_NODE, WHOLE_NODE])

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

    def node(self, name):
        return self.admin.get("/v1/nodes/" + name).body

    def state(self, alloc_id):
        return self.admin.get("/v1/allocations/" + alloc_id).body["state"]

    def member(self, alloc_id):
        r = self.admin.get("/v1/allocations/" + alloc_id)
        self.assertStatus(r, 200)
        return r.body["nodes"][0]

    def sim_instances(self, node):
        """The instances in the sim driver's state file of `node`."""
        import json
        with open(os.path.join(self.tmp, "state", node, "gpu-sim.json")) as f:
            st = json.load(f)
        return [(g, i["start"], i["profile"], i["uuid"]) for g, gpu in enumerate(st["gpus"])
                for i in gpu["instances"]]

    def test_instance_created_ready_released_and_lease(self):
        self.agent.start()
        self.wait_until("both nodes connected",
                        lambda: all((self.node(n).get("agent") or {}).get("connected")
                                    for n in (MIG_NODE, WHOLE_NODE)))
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "3g.40gb"},
                                            "pool": "mig"})
        self.assertEqual((a["state"], a["reason"]), ("provisioning", "waiting for the agent of node " + MIG_NODE))
        m = self.wait_until("the member is ready", lambda: (lambda m: m if m.get("ready") else None)(
            self.member(a["id"])))
        self.wait_until("active", lambda: self.state(a["id"]) == "active")
        self.assertEqual(m["node"], MIG_NODE)
        self.assertEqual(len(m["devices"]), 1, repr(m))
        uuid = m["devices"][0]["uuid"]
        self.assertTrue(uuid.startswith("MIG-"), repr(m))
        self.assertEqual(m["cuda_visible_devices"], uuid)
        self.assertEqual([x[3] for x in self.sim_instances(MIG_NODE)], [uuid])
        self.assertIn("event=agent.created node=ag-n01", self.agent.text())

        # Killed: the node goes unreachable after the lease; restarted: back, and
        # the instance is the same one (found, not rebuilt).
        self.agent.kill()
        self.wait_until("ag-n01 unreachable", lambda: self.node(MIG_NODE)["state"] == "unreachable")
        self.agent.start()
        self.wait_until("ag-n01 reachable", lambda: self.node(MIG_NODE)["state"] != "unreachable")
        self.wait_until("ready again", lambda: self.member(a["id"]).get("ready"))
        self.assertEqual(self.member(a["id"])["devices"][0]["uuid"], uuid)

        # Released: the agent destroys the instance and stops reporting it.
        r = self.admin.delete("/v1/allocations/" + a["id"])
        self.assertIn(r.status, (200, 202, 204), repr(r))
        self.wait_until("the instance is gone", lambda: self.sim_instances(MIG_NODE) == [])
        # the sim state file is written before the agent logs the destroy
        self.wait_until("the destroy logged",
                        lambda: "event=agent.destroyed node=ag-n01" in self.agent.text())
        self.assertEqual(self.agent.stop(), 0, self.agent.text()[-2000:])
        self.assertIn("event=agent.stop", self.agent.text())


    def test_provisioning_waits_for_the_agent_and_times_out_without_it(self):
        """With the agent stopped an allocation stays provisioning, saying
        which node it waits for, and fails after --provisioning-timeout-s;
        with it running, the next one goes active."""
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        self.assertEqual(a["state"], "provisioning")
        got = self.wait_until("failed", lambda: (lambda b: b if b["state"] != "provisioning" else None)(
            self.admin.get("/v1/allocations/" + a["id"]).body), timeout=30)
        self.assertEqual(got["state"], "failed")
        self.assertIn("provisioning timed out after 8s: waiting for the agent of node " + MIG_NODE, got["reason"])
        self.agent.start()
        b = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        self.wait_until("active", lambda: self.state(b["id"]) == "active")
        self.assertTrue(self.member(b["id"])["ready"])

    def test_node_agent_token_serves_only_its_node(self):
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": MIG_NODE})
        self.assertStatus(r, 201)
        with open(self.token_file, "w") as f:
            f.write(r.body["token"] + "\n")
        self.agent.close()
        self.agent = Agent(self.d.url(), self.token_file, os.path.join(self.tmp, "state"), [MIG_NODE])
        self.agent.start()
        self.wait_until("ag-n01 connected", lambda: (self.node(MIG_NODE).get("agent") or {}).get("connected"))
        self.agent.close()
        # The same token for the other node: refused (404, as a missing node),
        # logged, and the node never gets an agent.
        self.agent = Agent(self.d.url(), self.token_file, os.path.join(self.tmp, "state"), [WHOLE_NODE])
        self.agent.start()
        self.wait_until("the refusal is logged", lambda: "event=agent.poll_failed node=ag-n02 status=404"
                        in self.agent.text())
        self.assertIsNone(self.node(WHOLE_NODE)["agent"])
        self.assertNotIn(r.body["token"], self.agent.text(), "the token is never logged")


    def test_controller_gone_then_back(self):
        """The agent backs off while isostackd is down and reports again once
        it is back on the same address (the controller knows no agent after a
        restart until one reports, docs/agents.md)."""
        self.agent.start()
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        uuid = self.wait_until("ready", lambda: self.member(a["id"]).get("ready") and
                               self.member(a["id"])["devices"][0]["uuid"])
        self.d.stop()
        self.wait_until("the agent sees the controller gone",
                        lambda: "event=agent.poll_failed node=ag-n01" in self.agent.text())
        port, free = self.d.port, harness.free_port
        harness.free_port = lambda: port
        try:
            self.d.start()
        finally:
            harness.free_port = free
        self.admin = self.d.client()
        self.wait_until("ready again after the restart", lambda: self.member(a["id"]).get("ready"))
        self.assertEqual(self.member(a["id"])["devices"][0]["uuid"], uuid, "the same instance, not rebuilt")
        self.assertEqual(self.agent.text().count("event=agent.connected node=ag-n01"), 2)
        self.assertGreater(self.node(MIG_NODE)["agent"]["term_seen"], 1)

    def test_an_idle_agent_makes_one_request_per_heartbeat(self):
        """Its long poll renews the lease; an unchanged status is not sent
        again (before: a PUT every heartbeat beside the poll)."""
        self.agent.start()
        self.wait_until("both nodes connected",
                        lambda: all((self.node(n).get("agent") or {}).get("connected")
                                    for n in (MIG_NODE, WHOLE_NODE)))
        put = 'method=PUT path="/v1/nodes/%s/status"' % MIG_NODE
        before = self.d.stderr_text().count(put)
        time.sleep(4.5)  # 4 heartbeats of 1 s, past the 3 s lease
        self.assertLessEqual(self.d.stderr_text().count(put) - before, 1)
        self.assertTrue(self.node(MIG_NODE)["agent"]["connected"])
        self.assertEqual(self.node(MIG_NODE)["state"], "schedulable")
        # a change is still reported at once
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        self.wait_until("active", lambda: self.state(a["id"]) == "active")

    def test_config_file(self):
        """The same agent from a --config file: keywords are the long
        flags' names; the command line's --node replaces the file's."""
        conf = os.path.join(self.tmp, "agent.conf")
        with open(conf, "w") as f:
            f.write("# isostack-agent\n\ncontroller %s\ntoken-file   %s\nnode %s\n"
                    "gpu-driver sim\nstate-dir %s\nheartbeat-s 1\n"
                    % (self.d.url(), self.token_file, WHOLE_NODE, os.path.join(self.tmp, "state")))
        self.agent.argv = [agent_binary(), "--config", conf, "--node", MIG_NODE, "--sandbox", "off"]
        self.agent.start()
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        self.wait_until("active", lambda: self.state(a["id"]) == "active")
        self.assertTrue(self.member(a["id"])["devices"][0]["uuid"].startswith("MIG-"))
        self.assertTrue((self.node(MIG_NODE).get("agent") or {}).get("connected"))
        # the file's node was replaced, not added
        self.assertFalse((self.node(WHOLE_NODE).get("agent") or {}).get("connected"))

    def test_sim_host_is_the_inventory_of_its_node(self):
        """Each node's sim host is made from its first desired document
        (docs/agent.md, "The sim host"): ag-n02's GPUs have MIG off as its
        inventory says, so no MigModeMismatch keeps work off them, and a
        whole-GPU allocation there goes active with the GPU's own UUID."""
        import json
        self.agent.start()
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "whole": True},
                                            "pool": "whole"})
        self.wait_until("active", lambda: self.state(a["id"]) == "active")
        m = self.member(a["id"])
        self.assertEqual(m["node"], WHOLE_NODE)
        # The member is ready, so the status that said so carried the conditions.
        self.assertEqual(self.node(WHOLE_NODE)["conditions"], [])
        with open(os.path.join(self.tmp, "state", WHOLE_NODE, "gpu-sim.json")) as f:
            gpus = json.load(f)["gpus"]
        # The GPU itself, not a MIG instance spanning it.
        self.assertEqual([d["uuid"] for d in m["devices"]], [gpus[0]["uuid"]], repr(m))
        self.assertEqual([(g["model"], g.get("mig"), g["instances"]) for g in gpus],
                         [("h100-80gb", False, [])] * 2)
        self.wait_until("ag-n01 reported", lambda: (self.node(MIG_NODE).get("agent") or {}).get("connected"))
        with open(os.path.join(self.tmp, "state", MIG_NODE, "gpu-sim.json")) as f:
            self.assertEqual([g["mig"] for g in json.load(f)["gpus"]], [True, True])
        self.assertEqual(self.node(MIG_NODE)["conditions"], [])


VF_GUID_N01 = "0x0002c90300ef0100"  # agents.yaml: ag-n01's VF 0



class TestAgentVfs(TestAgentDaemon):
    """VF GUIDs (docs/agents.md "vfs", docs/agent.md "VFs"): the desired
    document lists the VF of each tenant on a node with its GUID, tenant and
    P_Key; the agent (sim VF driver: the mlx5 code over plain files in its
    state dir) gives the VF that GUID before the member is ready, the gate
    waits for it, the owning tenant sees it on the member, and at release the
    VF gets its original GUID back."""

    def sim_vf_node(self, node, vf):
        path = os.path.join(self.tmp, "state", node, "vf-sim", "sys", "class", "infiniband", "mlx5_0",
                            "device", "sriov", str(vf), "node")
        with open(path) as f:
            return f.read()

    def desired_vfs(self, node):
        return self.admin.get("/v1/nodes/%s/desired" % node).body["vfs"]

    def put_status(self, node, body):
        return self.admin.request("PUT", "/v1/nodes/%s/status" % node, body)

    # Tests of the parent class run once, there.
    test_instance_created_ready_released_and_lease = None
    test_provisioning_waits_for_the_agent_and_times_out_without_it = None
    test_node_agent_token_serves_only_its_node = None
    test_controller_gone_then_back = None
    test_sim_host_is_the_inventory_of_its_node = None

    def test_vf_gets_its_guid_before_ready_and_the_original_back_at_release(self):
        self.assertEqual(self.desired_vfs(MIG_NODE), [])
        self.agent.start()
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        vfs = self.desired_vfs(MIG_NODE)
        self.assertEqual(len(vfs), 1, repr(vfs))
        pkey = vfs[0].pop("pkey")
        self.assertEqual(vfs[0], {"index": 0, "device": "mlx5_0", "guid": VF_GUID_N01, "tenant": self.tenant,
                                  "members": [{"allocation": a["id"], "member": 0}]})
        self.assertRegex(pkey, "^0x[89a-f][0-9a-f]{3}$", "full membership")
        self.assertEqual(self.desired_vfs(WHOLE_NODE), [], "another node's document is not touched")
        self.wait_until("active", lambda: self.state(a["id"]) == "active")
        m = self.member(a["id"])
        self.assertEqual(m["vf"], {"kind": "vf", "index": 0, "netdev": "mlx5_0v0", "guid": VF_GUID_N01})
        self.assertEqual(self.sim_vf_node(MIG_NODE, 0), "00:02:c9:03:00:ef:01:00\n")
        self.assertIn("event=agent.vf_programmed node=ag-n01 device=mlx5_0 vf=0", self.agent.text())
        # The owning tenant sees its VF; the GPU devices are unchanged.
        _, tok = harness.issue_token(self, self.admin, "tenant-admin", tenant=self.tenant)
        mine = self.d.client(tok).get("/v1/allocations/" + a["id"]).body["nodes"][0]
        self.assertEqual(mine["vf"]["guid"], VF_GUID_N01)
        self.assertTrue(all("uuid" in dev for dev in mine["devices"]), repr(mine))
        # A second allocation of the same tenant on the node shares the VF.
        b = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        vfs = self.desired_vfs(MIG_NODE)
        self.assertEqual([(v["index"], len(v["members"])) for v in vfs], [(0, 2)], repr(vfs))
        self.wait_until("b active", lambda: self.state(b["id"]) == "active")
        # Released: the VF leaves the document and the agent restores the
        # original GUID (zero at VF creation, kept as all-ones).
        for x in (a, b):
            r = self.admin.delete("/v1/allocations/" + x["id"])
            self.assertIn(r.status, (200, 202, 204), repr(r))
        self.assertEqual(self.desired_vfs(MIG_NODE), [])
        self.wait_until("the original GUID is back",
                        lambda: self.sim_vf_node(MIG_NODE, 0) == "ff:ff:ff:ff:ff:ff:ff:ff\n")
        self.wait_until("restored is logged", lambda: "event=agent.vf_restored node=ag-n01" in self.agent.text())

    def test_gate_waits_for_the_vf_with_its_guid(self):
        """Instances ready is not enough on a node with VFs: the member's VF
        must be reported ready with the GUID the fabric names."""
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        p = a["placement"][0]
        term = self.admin.get("/v1/nodes/%s/desired" % MIG_NODE).body["term"]
        body = {"term_seen": term, "version": "0.1.0", "gpus": [],
                "instances": [{"gpu": p["gpu"], "start": p["start"], "profile": "1g.10gb", "uuid": "MIG-aaaa",
                               "allocation": a["id"], "member": 0, "ready": True}]}
        waiting = "waiting for the agent of node " + MIG_NODE
        for vfs in ([], [{"index": 0, "guid": VF_GUID_N01, "ready": False, "reason": "bind failed"}],
                    [{"index": 0, "guid": "0x0002c90300ef0199", "ready": True}],
                    [{"index": 1, "guid": VF_GUID_N01, "ready": True}]):
            self.assertStatus(self.put_status(MIG_NODE, dict(body, vfs=vfs)), 204)
            got = self.admin.get("/v1/allocations/" + a["id"]).body
            self.assertEqual((got["state"], got["reason"]), ("provisioning", waiting), repr(vfs))
            self.assertIsNone(got["nodes"][0]["vf"], repr(vfs))
        self.assertStatus(self.put_status(MIG_NODE, dict(body, vfs=[
            {"index": 0, "netdev": "ibp3s0v0", "guid": VF_GUID_N01, "ready": True, "reason": ""}])), 204)
        got = self.admin.get("/v1/allocations/" + a["id"]).body
        self.assertEqual(got["state"], "active")
        self.assertEqual(got["nodes"][0]["vf"], {"kind": "vf", "index": 0, "netdev": "ibp3s0v0",
                                                 "guid": VF_GUID_N01})

    def test_vfs_are_the_same_after_a_controller_restart(self):
        """The document's vfs come from the fabric's stored assignments, so a
        restarted controller serves the same ones (a new generation)."""
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        before = self.admin.get("/v1/nodes/%s/desired" % MIG_NODE).body
        self.assertEqual([m["allocation"] for v in before["vfs"] for m in v["members"]], [a["id"]])
        self.d.stop()
        self.d.start()
        self.admin = self.d.client()
        after = self.admin.get("/v1/nodes/%s/desired" % MIG_NODE).body
        self.assertEqual(after["vfs"], before["vfs"])
        self.assertGreater(after["generation"], before["generation"])

    def test_agent_without_a_vf_driver_reports_the_vf_not_ready(self):
        self.agent.argv += ["--vf-driver", "none"]
        self.agent.start()
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "gpus": {"count": 1, "profile": "1g.10gb"},
                                            "pool": "mig"})
        self.wait_until("the member's instance is ready", lambda: self.member(a["id"]).get("ready"))
        self.assertEqual(self.state(a["id"]), "provisioning")
        self.assertIsNone(self.member(a["id"])["vf"])

    def test_status_with_bad_vfs_is_refused_naming_the_field(self):
        term = self.admin.get("/v1/nodes/%s/desired" % MIG_NODE).body["term"]
        good = {"index": 0, "netdev": "ibp3s0v0", "guid": VF_GUID_N01, "ready": True, "reason": ""}

        def vf(**over):
            v = dict(good)
            for k, x in over.items():
                if x is None:
                    v.pop(k)
                else:
                    v[k] = x
            return v
        cases = [
            ("x", "vfs"), ([1], "vfs[0]"), ([good] * 129, "vfs"),
            ([vf(index=4)], "vfs[0].index"),  # ag-n01 has 4 VFs
            ([vf(index=-1)], "vfs[0].index"), ([vf(index=128)], "vfs[0].index"),
            ([vf(index="0")], "vfs[0].index"), ([vf(index=None)], "vfs[0].index"),
            ([good, vf(ready=False)], "vfs[1].index"),
            ([vf(guid="0x12")], "vfs[0].guid"), ([vf(guid="0x0002c90300ef01zz")], "vfs[0].guid"),
            ([vf(guid="00:02:c9:03:00:ef:01:00")], "vfs[0].guid"), ([vf(guid=5)], "vfs[0].guid"),
            ([vf(guid="")], "vfs[0].guid"),  # ready without a GUID
            ([vf(ready=None)], "vfs[0].ready"), ([vf(ready="yes")], "vfs[0].ready"),
            ([vf(reason="x" * 257)], "vfs[0].reason"), ([vf(reason="a\nb")], "vfs[0].reason"),
            ([vf(netdev="a/b")], "vfs[0].netdev"), ([vf(netdev="x" * 16)], "vfs[0].netdev"),
            ([vf(netdev="\u00e9")], "vfs[0].netdev"),
            ([vf(tenant="acme")], "vfs[0].tenant"),
        ]
        for vfs, field in cases:
            body = {"term_seen": term, "version": "0.1.0", "gpus": [], "instances": [], "vfs": vfs}
            self.assertError(self.put_status(MIG_NODE, body), 400, "invalid_argument", field, repr(vfs)[:200])
        self.assertIsNone(self.node(MIG_NODE)["agent"], "nothing of a refused status is kept")
        # an empty list, or none at all, is fine
        for extra in ({"vfs": []}, {}):
            body = dict({"term_seen": term, "version": "0.1.0", "gpus": [], "instances": []}, **extra)
            self.assertStatus(self.put_status(MIG_NODE, body), 204)


class TestAgentFlags(unittest.TestCase):
    def run_agent(self, *args):
        p = subprocess.run([agent_binary()] + list(args), capture_output=True, text=True, timeout=T(30))
        return p.returncode, p.stderr

    def test_bad_flags_exit_2_naming_the_flag(self):
        tmp = tempfile.mkdtemp(prefix="test_agent_flags.")
        try:
            tok = os.path.join(tmp, "t")
            with open(tok, "w") as f:
                f.write("iso_0123456789ab_secret\n")
            empty = os.path.join(tmp, "empty")
            open(empty, "w").close()
            good = {"--controller": "http://127.0.0.1:1", "--token-file": tok, "--node": "n1",
                    "--gpu-driver": "sim", "--state-dir": os.path.join(tmp, "s")}

            def argv(**over):
                out = []
                for k, v in good.items():
                    v = over.get(k, v)
                    if v is not None:
                        out += [k, v]
                return out

            cases = [
                (argv() + ["--bogus"], "--bogus"),
                (argv() + ["stray"], "stray"),
                (["--contr", "http://x"] + argv()[2:], "--controller"),
                (argv(**{"--controller": None}), "--controller"),
                (argv(**{"--token-file": None}), "--token-file"),
                (argv(**{"--token-file": os.path.join(tmp, "missing")}), "--token-file"),
                (argv(**{"--token-file": empty}), "--token-file"),
                (argv(**{"--node": None}), "--node"),
                (argv(**{"--node": "Bad Name"}), "--node"),
                (argv() + ["--node", "n1"], "--node"),
                (argv(**{"--gpu-driver": None}), "--gpu-driver"),
                (argv(**{"--gpu-driver": "cuda"}), "--gpu-driver"),
                (argv(**{"--gpu-driver": "nvml"}) + ["--node", "n2"], "--node"),
                (argv(**{"--state-dir": None}), "--state-dir"),
                (argv() + ["--heartbeat-s", "0"], "--heartbeat-s"),
                (argv() + ["--heartbeat-s", "26"], "--heartbeat-s"),
                (argv() + ["--heartbeat-s", "1x"], "--heartbeat-s"),
                (argv() + ["--heartbeat-s"], "--heartbeat-s"),
                (argv() + ["--vf-driver", "cx7"], "--vf-driver"),
                (argv() + ["--vf-driver"], "--vf-driver"),
                (argv() + ["--vf-driver", "ibsim"], "--ibsim-net"),
                (argv() + ["--ibsim-net", empty], "--ibsim-net"),
                (argv() + ["--vf-driver", "mlx5", "--node", "n2"], "--vf-driver"),
                (argv() + ["--sysfs-root", ""], "--sysfs-root"),
                (argv() + ["--vf-driv", "mlx5"], "--vf-driver"),
                (argv() + ["--cxi-library", ""], "--cxi-library"),
                (argv() + ["--cxi-library"], "--cxi-library"),
                (argv() + ["--cxi-library", "/x/libcxi.so.1", "--node", "n2"], "--cxi-library"),
                (argv() + ["--cxi-device", "cxi01"], "--cxi-device"),
                (argv() + ["--cxi-device", "eth0"], "--cxi-device"),
                (argv() + ["--cxi-device", "cxi256"], "--cxi-device"),
                (argv() + ["--cxi-device", "cxi"], "--cxi-device"),
                (argv() + ["--cxi-device", "cxi1", "--node", "n2"], "--cxi-device"),
                (argv() + ["--cni-sm-wait-s", "0"], "--cni-sm-wait-s"),
                (argv() + ["--cni-sm-wait-s", "301"], "--cni-sm-wait-s"),
                (argv() + ["--cni-sm-wait-s", "5s"], "--cni-sm-wait-s"),
                (argv() + ["--cni-sm-wait-s"], "--cni-sm-wait-s"),
            ]
            for args, flag in cases:
                rc, err = self.run_agent(*args)
                self.assertEqual(rc, 2, "%r: %s" % (args, err))
                first = err.splitlines()[0] if err else ""
                self.assertTrue(first.startswith("isostack-agent: "), "%r: %s" % (args, err))
                self.assertIn(flag, first, "%r: %s" % (args, err))
                self.assertIn("usage:", err)
            rc, _ = self.run_agent("--help")
            self.assertEqual(rc, 0)

            # --config: every error names the file, the line and the keyword
            def conf(text):
                path = os.path.join(tmp, "agent.conf")
                with open(path, "w") as f:
                    f.write(text)
                return path
            base = "controller http://127.0.0.1:1\ntoken-file %s\n" % tok
            rest = ["--node", "n1", "--gpu-driver", "sim", "--state-dir", os.path.join(tmp, "s")]
            file_cases = [
                (base + "colour blue\n", ":3:", "colour"),
                (base + "# a comment\nheartbeat-s\n", ":4:", "heartbeat-s needs a value"),
                (base + "heartbeat-s 0\n", ":3:", "heartbeat-s"),
                (base + "node Bad_Name!\n", ":3:", "node"),
                (base + "gpu-driver cuda\n", ":3:", "gpu-driver"),
                (base + "help yes\n", ":3:", "help"),
                (base + "config other.conf\n", ":3:", "config"),
                (base + "state-dir \x01\n", ":3:", "control character"),
                (base + "cxi-device cxi-1\n", ":3:", "cxi-device"),
                (base + "cni-sm-wait-s -1\n", ":3:", "cni-sm-wait-s"),
            ]
            for text, where, what in file_cases:
                rc, err = self.run_agent("--config", conf(text), *rest)
                self.assertEqual(rc, 2, "%r: %s" % (text, err))
                first = err.splitlines()[0] if err else ""
                self.assertIn("agent.conf" + where, first, "%r: %s" % (text, err))
                self.assertIn(what, first, "%r: %s" % (text, err))
            for args, what in ((["--config", os.path.join(tmp, "missing.conf")] + argv(), "--config"),
                               (["--config", tmp] + argv(), "--config"),
                               (["--conf", conf(base)] + argv(), "--config")):
                rc, err = self.run_agent(*args)
                self.assertEqual(rc, 2, "%r: %s" % (args, err))
                self.assertIn(what, err.splitlines()[0], "%r: %s" % (args, err))
            # with a good file, a bad flag still names the flag
            rc, err = self.run_agent("--config", conf(base), *rest, "--heartbeat-s", "99")
            self.assertEqual(rc, 2)
            self.assertIn("--heartbeat-s", err.splitlines()[0])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    harness.main()

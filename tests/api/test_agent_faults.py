#!/usr/bin/env python3
"""test_agent_faults.py: GPU faults and node conditions coming from the node
agent (docs/agent.md "Faults" and "Conditions", docs/agents.md): a real
isostack-agent with the nvml GPU driver over the project's fake
libnvidia-ml.so.1 (build/tests/fakes) serves ag-n01 of
tests/api/data/agent_faults.yaml with a node-agent token. XIDs are injected into
the fake's shared state file from this process (as its inject hook does:
an event under the file's lock), so the agent reads them through the
driver's real event set.

- XID 79 evicts every slice on the GPU and quarantines it; the audit event
  is the node agent's and carries its seq;
- XID 94 (a contained ECC error) naming one instance takes nothing, and the
  report names the allocation and member that own that instance;
- an XID read while isostackd is down stays in the agent's outbox (a file of
  its state dir) across a restart of both, and is applied once it is back;
- a node-agent token reports for its own node only (404 for another), and a
  re-sent fault (same seq) is applied once, even after its GPU was restored;
- a GPU whose MIG mode differs from the inventory shows as a node condition,
  takes no new work while it holds, and both edges are audited.

Run: python3 tests/api/test_agent_faults.py PATH/TO/isostackd PATH/TO/isoctl
"""

import fcntl
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T, create_alloc, create_tenant  # noqa: E402

NODE, OTHER = "ag-n01", "ag-n02"  # agent_faults.yaml: ag-n01 = 2 x h100-80gb, MIG on
NONE_ID = 0xFFFFFFFF


def build_dir():
    return os.path.dirname(harness.Binaries.isostackd)


def fake_library():
    return os.path.join(build_dir(), "tests", "fakes", "libnvidia-ml.so.1")


def inject_xid(state, gpu, xid, gi=NONE_ID, ci=NONE_ID):
    """Queues an XID in the fake NVML's state file as its inject hook does
    (docs/gpu.md, "The fake NVML"): under the lock, one more event, and the
    generation in the lock file bumped so that every process reads it again.
    Done from here, not through the hook, so that a sanitizer build of the
    fake is never loaded into this interpreter."""
    fd = os.open(state + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, 8, 0)
        gen = struct.unpack("=Q", raw)[0] if len(raw) == 8 else 0
        with open(state) as f:
            st = json.load(f)
        st["events"] = (st["events"] + [{"seq": st["next_seq"], "xid": xid, "gpu": gpu,
                                         "gi": gi, "ci": ci}])[-64:]
        st["next_seq"] += 1
        with open(state, "w") as f:
            json.dump(st, f)
        os.pwrite(fd, struct.pack("=Q", gen + 1), 0)
    finally:
        os.close(fd)


class FakeNvml:
    """The fake's config and state files (docs/gpu.md, "The fake NVML")."""
    tmp = None

    @classmethod
    def setup(cls, gpus):
        if cls.tmp is None:
            cls.tmp = tempfile.mkdtemp(prefix="test_agent_faults.nvml.")
            cls.config = os.path.join(cls.tmp, "config.json")
            cls.state = os.path.join(cls.tmp, "state.json")
        for p in (cls.state, cls.state + ".lock"):
            if os.path.exists(p):
                os.unlink(p)
        with open(cls.config, "w") as f:
            json.dump({"gpus": gpus}, f)

    @classmethod
    def inject(cls, gpu, xid, gi=NONE_ID, ci=NONE_ID):
        inject_xid(cls.state, gpu, xid, gi, ci)

    @classmethod
    def instances(cls, gpu):
        with open(cls.state) as f:
            return json.load(f)["gpus"][gpu]["instances"]


def tearDownModule():
    if FakeNvml.tmp:
        shutil.rmtree(FakeNvml.tmp, ignore_errors=True)


class Agent:
    def __init__(self, url, token_file, state_dir):
        self.argv = [os.path.join(build_dir(), "isostack-agent"), "--controller", url,
                     "--token-file", token_file, "--gpu-driver", "nvml", "--state-dir", state_dir,
                     "--heartbeat-s", "1", "--node", NODE,
                     "--sandbox", "off"]  # killed agents would leave their members' sandboxes
        self.env = dict(os.environ, ISOSTACK_NVML_LIBRARY=fake_library(),
                        ISOSTACK_FAKE_NVML_CONFIG=FakeNvml.config,
                        ISOSTACK_FAKE_NVML_STATE=FakeNvml.state)
        self.log = tempfile.TemporaryFile()
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log, env=self.env)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=T(20))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self):
        self.kill()
        self.log.close()

    def text(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")


class AgentCase(ApiTestCase):
    """isostackd with the provisioning gate, and one nvml agent for ag-n01
    (started by the test) over the fake's GPUS."""
    GPUS = [{"model": "H100-80GB"}, {"model": "H100-80GB"}]

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_agent_faults.")
        FakeNvml.setup(self.GPUS)
        self.d = Daemon("agent_faults.yaml", agents=True,
                        extra_args=("--agent-lease-s", "5", "--agent-grace-s", "600",
                                    "--provisioning-timeout-s", "60"))
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()
        self.tenant = create_tenant(self, self.admin)["name"]
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": NODE})
        self.assertStatus(r, 201)
        self.agent_token = r.body["token"]
        self.token_file = os.path.join(self.tmp, "agent.token")
        with open(self.token_file, "w") as f:
            f.write(self.agent_token + "\n")
        self.state_dir = os.path.join(self.tmp, "state")
        self.agent = Agent(self.d.url(), self.token_file, self.state_dir)

    def tearDown(self):
        try:
            self.agent.kill()
            text = self.agent.text()
            self.agent.log.close()
            self.assertNotIn("Sanitizer", text, text[-3000:])
            self.assertNotIn("runtime error:", text, text[-3000:])
            self.d.stop()
        finally:
            self.d.cleanup()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- helpers

    def wait_context(self):
        return "; agent log:\n" + self.agent.text()[-4000:]

    wait_timeout = 30

    def start_agent(self):
        self.agent.start()
        self.wait_until("the agent reported", lambda: (self.node().get("agent") or {}).get("connected"))

    def node(self):
        return self.admin.get("/v1/nodes/" + NODE).body

    def gpu(self, index):
        return [g for g in self.admin.list_all("/v1/gpus?node=" + NODE) if g["index"] == index][0]

    def get(self, aid):
        return self.admin.get("/v1/allocations/" + aid).body

    def events(self, action):
        evs = [i["event"] for i in self.admin.list_all("/v1/audit/events", limit=1000)]
        return [e for e in evs if e["action"] == action]

    def active(self, profile):
        a = create_alloc(self, self.admin, {"tenant": self.tenant, "pool": "mig",
                                            "gpus": {"count": 1, "profile": profile}})
        self.wait_until("%s active" % a["id"], lambda: self.get(a["id"])["state"] == "active")
        return self.get(a["id"])

    def outbox(self):
        path = os.path.join(self.state_dir, NODE, "agent-faults.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def fault(self, gpu, body, token=None, node=NODE):
        return self.d.request("POST", "/v1/nodes/%s/gpus/%d/fault" % (node, gpu), body=body,
                              token=token or self.agent_token)


class TestAgentFaults(AgentCase):
    # ---- XIDs read by the agent

    def test_xid_79_evicts_every_slice_on_the_gpu_and_quarantines_it(self):
        self.start_agent()
        a, b = self.active("3g.40gb"), self.active("3g.40gb")
        self.assertEqual(sorted(i["allocation"] for i in self.gpu(0)["instances"]),
                         sorted([a["id"], b["id"]]))
        self.assertEqual(len(FakeNvml.instances(0)), 2)
        FakeNvml.inject(0, 79)
        fault = self.wait_until("GPU 0 quarantined", lambda: self.gpu(0)["fault"])
        self.assertEqual(fault["xid"], 79)
        ev = {e["object"]["id"]: e for e in self.events("allocation.fault")}
        self.assertEqual(set(ev), {a["id"], b["id"]})
        for x in (a, b):
            self.assertEqual(ev[x["id"]]["details"]["reason"], "GPU %s/0 XID 79" % NODE)
        f = [e for e in self.events("gpu.fault") if e["object"]["id"] == NODE + "/0"]
        self.assertEqual(len(f), 1, f)
        self.assertEqual(f[0]["actor"]["role"], "node-agent")
        self.assertEqual((f[0]["details"]["xid"], f[0]["details"]["effect"]), (79, "quarantine"))
        self.assertGreater(f[0]["details"]["seq"], 0)
        self.assertNotIn("allocation", f[0]["details"])  # an XID of no instance
        # Nothing of anyone's is left on the GPU; the outbox is empty again.
        self.assertEqual(self.gpu(0)["instances"], [])
        self.wait_until("the outbox emptied", lambda: self.outbox() == {
            "last_seq": f[0]["details"]["seq"], "faults": []})
        self.assertIn("event=agent.fault_reported node=%s gpu=0 xid=79" % NODE, self.agent.text())

    def test_contained_xid_names_its_instance_and_takes_nothing(self):
        self.start_agent()
        a, b = self.active("3g.40gb"), self.active("3g.40gb")
        insts = FakeNvml.instances(0)
        # a's instance: the one whose MIG UUID its member got
        uuid_a = a["nodes"][0]["devices"][0]["uuid"]
        gi = [i["gi"] for i in insts if i["cis"][0]["uuid"] == uuid_a]
        self.assertEqual(len(gi), 1, insts)
        FakeNvml.inject(0, 94, gi[0], 0)
        f = self.wait_until("the fault recorded", lambda: [
            e for e in self.events("gpu.fault") if e["details"]["xid"] == 94])
        self.assertEqual(len(f), 1)
        d = f[0]["details"]
        self.assertEqual((d["effect"], d["gi"], d["ci"], d["allocation"], d["member"]),
                         ("recorded", gi[0], 0, a["id"], 0))
        self.assertIsNone(self.gpu(0)["fault"])
        for x in (a, b):
            self.assertEqual(self.get(x["id"])["state"], "active")
        self.assertEqual(self.events("allocation.fault"), [])

    def test_fault_kept_while_the_controller_is_down(self):
        self.start_agent()
        a = self.active("1g.10gb")
        self.d.stop()
        FakeNvml.inject(1, 48)
        box = self.wait_until("the XID in the outbox", lambda: (self.outbox() or {}).get("faults"))
        self.assertEqual([(x["gpu"], x["xid"]) for x in box], [(1, 48)])
        seq = box[0]["seq"]
        # The agent goes too: the outbox is a file, nothing waits in memory.
        self.agent.close()
        self.d.start()
        self.admin = self.d.client()
        self.agent = Agent(self.d.url(), self.token_file, self.state_dir)
        self.agent.start()
        fault = self.wait_until("GPU 1 quarantined", lambda: self.gpu(1)["fault"])
        self.assertEqual(fault["xid"], 48)
        f = [e for e in self.events("gpu.fault") if e["object"]["id"] == NODE + "/1"]
        self.assertEqual([e["details"]["seq"] for e in f], [seq])
        self.wait_until("the outbox emptied", lambda: self.outbox()["faults"] == [])
        self.assertEqual(self.get(a["id"])["state"], "active")  # on GPU 0

    # ---- the fault route as a node agent uses it

    def test_agent_token_reports_for_its_own_node_only(self):
        r = self.fault(0, {"xid": 13}, node=OTHER)
        self.assertError(r, 404, "not_found")
        self.assertError(self.fault(0, {"xid": 79}, node="no-such-node"), 404, "not_found")
        self.assertIsNone([g for g in self.admin.list_all("/v1/gpus?node=" + OTHER)
                           if g["index"] == 0][0]["fault"])
        r = self.fault(0, {"xid": 13, "seq": 1})
        self.assertStatus(r, 200)
        self.assertEqual(r.body["effect"], "recorded")
        for body, field in (({"xid": 13, "seq": 0}, "seq"), ({"xid": 13, "seq": "1"}, "seq"),
                            ({"xid": 13, "gi": -2}, "gi"), ({"xid": 13, "allocation": "a-1"}, "allocation"),
                            ({"xid": 13, "member": 0}, "allocation"), ({"xid": 13, "host": 1}, "host")):
            self.assertError(self.fault(0, body), 400, "invalid_argument", field)

    def test_resent_fault_is_applied_once(self):
        r = self.fault(1, {"xid": 79, "seq": 5})
        self.assertStatus(r, 200)
        self.assertEqual((r.body["effect"], r.body["quarantined"]), ("quarantined", True))
        self.assertStatus(self.admin.delete("/v1/nodes/%s/gpus/1/fault" % NODE), 204)
        # The same fault sent again (its answer was lost), then an older one:
        # neither takes the restored GPU again.
        for seq in (5, 4):
            r = self.fault(1, {"xid": 79, "seq": seq})
            self.assertStatus(r, 200)
            self.assertEqual((r.body["effect"], r.body["quarantined"]), ("duplicate", False))
        self.assertIsNone(self.gpu(1)["fault"])
        # Across a restart of the controller too (the seq is stored).
        self.d.restart()
        self.admin = self.d.client()
        r = self.fault(1, {"xid": 79, "seq": 5})
        self.assertEqual(r.body["effect"], "duplicate")
        r = self.fault(1, {"xid": 79, "seq": 6})
        self.assertEqual((r.body["effect"], r.body["quarantined"]), ("quarantined", True))
        self.assertEqual(len(self.events("gpu.fault")), 2)


class TestMigModeCondition(AgentCase):
    """GPU 1 of ag-n01 reports MIG off; the inventory says on."""
    GPUS = [{"model": "H100-80GB"}, {"model": "H100-80GB", "mig": False}]

    def test_mismatch_is_a_condition_and_blocks_placement(self):
        self.start_agent()
        conds = self.wait_until("the condition", lambda: self.node()["conditions"])
        self.assertEqual([{k: c[k] for k in ("type", "gpu", "want", "have")} for c in conds],
                         [{"type": "MigModeMismatch", "gpu": 1, "want": True, "have": False}])
        self.assertTrue(conds[0]["since"].endswith("Z"))
        # GPU 0 takes a full-GPU instance; the next one may not go to GPU 1.
        a = self.active("7g.80gb")
        b = create_alloc(self, self.admin, {"tenant": self.tenant, "pool": "mig",
                                            "gpus": {"count": 1, "profile": "7g.80gb"}})
        self.assertEqual(b["state"], "pending", repr(b))
        set_ = self.events("node.condition_set")
        self.assertEqual([(e["object"]["id"], e["details"]) for e in set_],
                         [(NODE, {"type": "MigModeMismatch", "gpu": 1, "want": True, "have": False})])
        # Reported every tick, audited once.
        time.sleep(T(2.5))
        self.assertEqual(len(self.events("node.condition_set")), 1)
        self.assertEqual(self.events("node.condition_cleared"), [])
        # The operator turns MIG on (the agent never does): the condition
        # clears, audited, and the waiting allocation gets GPU 1.
        self.agent.close()
        with open(FakeNvml.config, "w") as f:
            json.dump({"gpus": [{"model": "H100-80GB"}, {"model": "H100-80GB"}]}, f)
        self.agent = Agent(self.d.url(), self.token_file, self.state_dir)
        self.agent.start()
        self.wait_until("the condition cleared", lambda: self.node()["conditions"] == [])
        self.assertEqual(len(self.events("node.condition_cleared")), 1)
        self.wait_until("b active", lambda: self.get(b["id"])["state"] == "active")
        self.assertEqual(self.get(a["id"])["state"], "active")


if __name__ == "__main__":
    harness.main(__doc__)

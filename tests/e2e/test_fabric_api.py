#!/usr/bin/env python3
"""test_fabric_api.py: P_Keys follow allocations, end to end, on a real OpenSM.

ibsim simulates a small fat tree whose GUIDs are the test inventory's
(`isoctl fabric ibsim-net`), OpenSM runs on it (scripts/ibsim-fabric.sh), and
a real isostackd with the opensm driver programs it through the REST API. The
P_Key tables are read with `smpquery pkeys` (infiniband-diags), independently
of isostack's own SMP reader. Skips (77) only when ibsim/opensm are absent.

argv: isostackd isoctl"""
import os
import re
import shutil
import json
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.environ.get("ISO_SOURCE_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
import harness  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "ibsim-fabric.sh")

# Node "shared" has two VFs (two tenants may share it); node "solo" has none
# (fabric-exclusive: its PF joins the one tenant there). One storage service.
INVENTORY = """
cluster: e2e
fabric:
  type: infiniband
  driver: opensm
  sm_nodes: [sm1]
  pkey_range: [0x0200, 0x0210]
  partitions_file: {dir}/partitions.conf
  pid_file: {dir}/opensm.pid
  log_file: {dir}/opensm.log
  coalesce_ms: 20
  confirm_timeout_ms: 8000
  shared_services:
    - name: storage
      pkey: 0x0010
      guids: [0x946dae0300f5e001]
{services}pools:
  - name: shared
  - name: solo
racks:
  - name: r1
    pdus: [p1]
nodes:
  - name: shared
    pool: shared
    rack: r1
    pdu: p1
    cpus: 64
    memory_gib: 512
    gpus: {{model: h100-80gb, count: 2, mig: true}}
    port: {{device: mlx5_0, port: 1, pkey_capacity: {cap}, guid: 0x946dae0300a1b001,
           vfs: {{count: 2, guid_base: 0x946dae0300a20100}}}}
  - name: solo
    pool: solo
    rack: r1
    pdu: p1
    cpus: 64
    memory_gib: 512
    gpus: {{model: h100-80gb, count: 2, mig: true}}
    port: {{device: mlx5_0, port: 1, pkey_capacity: {cap}, guid: 0x946dae0300a1b002}}
"""
SHARED_PF, SOLO_PF = 0x946dae0300a1b001, 0x946dae0300a1b002
VF0, VF1 = 0x946dae0300a20100, 0x946dae0300a20101
STORAGE = 0x946dae0300f5e001


class Fabric:
    """ibsim + OpenSM for one inventory, in a temp dir. `inventory`: another
    template of INVENTORY's shape (its {dir}, {cap}, {services} filled in)."""

    def __init__(self, cap=64, services=0, inventory=INVENTORY):
        self.dir = tempfile.mkdtemp(prefix="isofab-")
        self.config = os.path.join(self.dir, "cluster.yaml")
        extra = "".join("    - {name: svc%d, pkey: 0x%04x, guids: [0x%016x]}\n" %
                        (i, 0x0020 + i, 0x946dae0300f6e000 + i) for i in range(services))
        with open(self.config, "w") as f:
            f.write(inventory.format(dir=self.dir, cap=cap, services=extra))
        net = subprocess.run([harness.Binaries.isoctl, "fabric", "ibsim-net", "--config",
                              self.config], capture_output=True, text=True)
        if net.returncode != 0:
            raise AssertionError("ibsim-net: " + net.stderr)
        self.net = os.path.join(self.dir, "ibsim.net")
        with open(self.net, "w") as f:
            f.write(net.stdout)
        r = subprocess.run(["sh", SCRIPT, "start", self.dir, self.net], capture_output=True,
                           text=True)
        if r.returncode == 77:
            raise unittest.SkipTest("ibsim/opensm not installed")
        if r.returncode != 0:
            raise AssertionError("ibsim-fabric start: " + r.stderr)
        self.env = {}
        with open(os.path.join(self.dir, "env")) as f:
            for line in f:
                m = re.match(r"^(IBSIM_SOCKNAME|LD_PRELOAD)=(.*)$", line.strip())
                if m:
                    self.env[m.group(1)] = m.group(2)
        # isostackd may be an ASan build: let it run under the preload.
        self.env["ASAN_OPTIONS"] = "verify_asan_link_order=0:replace_intrin=0:detect_leaks=0"

    def pkeys(self, guid):
        """The P_Key table of port `guid` as smpquery reads it: {base: full?}."""
        env = dict(os.environ, **self.env)
        env.pop("ASAN_OPTIONS", None)
        r = subprocess.run(["smpquery", "-G", "pkeys", "0x%016x" % guid], capture_output=True,
                           text=True, env=env, timeout=30)
        if r.returncode != 0:
            raise AssertionError("smpquery pkeys 0x%x: %s" % (guid, r.stderr))
        keys = {}
        for v in re.findall(r"0x([0-9a-f]{4})", r.stdout):
            raw = int(v, 16)
            if raw & 0x7fff:
                keys[raw & 0x7fff] = bool(raw & 0x8000)
        return keys

    def opensm(self, what):
        with open(os.path.join(self.dir, "opensm.pid")) as f:
            pid = int(f.read())
        if what == "stop":
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGHUP)

    def restart_opensm(self):
        r = subprocess.run(["sh", SCRIPT, "opensm", self.dir], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("opensm restart: " + r.stderr)

    def stop(self):
        subprocess.run(["sh", SCRIPT, "stop", self.dir], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_state(tc, client, aid, state, timeout=15):
    deadline = time.time() + harness.T(timeout)
    while True:
        a = client.get("/v1/allocations/" + aid).body
        if a["state"] == state or time.time() > deadline:
            tc.assertEqual(a["state"], state, a)
            return a
        time.sleep(0.05)


def wait_pkeys(tc, fab, guid, want, timeout=10):
    deadline = time.time() + harness.T(timeout)
    while True:
        got = fab.pkeys(guid)
        if got == want or time.time() > deadline:
            tc.assertEqual(got, want, "port 0x%x" % guid)
            return
        time.sleep(0.1)


class FabricApiTest(harness.ApiTestCase):
    def start(self, cap=64, services=0, agents=False):
        self.fab = Fabric(cap, services)
        self.addCleanup(self.fab.stop)
        self.daemon = harness.Daemon(self.fab.config, env=self.fab.env, agents=agents)
        self.addCleanup(self.daemon.cleanup)
        self.daemon.start()
        self.admin = harness.Client(self.daemon, self.daemon.admin_token)

    def isoctl_verify(self, *flags):
        """`isoctl fabric verify FLAGS -o json` as an admin, on the fabric's
        preload (for --live): (exit code, report)."""
        env = dict(os.environ, **self.fab.env)
        env["ISOSTACK_URL"] = "http://127.0.0.1:%d" % self.daemon.port
        env["ISOSTACK_TOKEN"] = self.daemon.admin_token
        r = subprocess.run([harness.Binaries.isoctl, "fabric", "verify"] + list(flags) +
                           ["-o", "json"], capture_output=True, text=True, env=env, timeout=60)
        try:
            rep = json.loads(r.stdout)
        except ValueError:
            rep = {"stdout": r.stdout, "stderr": r.stderr}
        return r.returncode, rep

    def tenant_key(self, name):
        intent = self.admin.get("/v1/fabric/intent").body
        for p in intent["partitions"]:
            if p["kind"] == "tenant" and p["tenant"] == name:
                return int(p["pkey"], 16)
        return None

    def test_pkeys_follow_allocations(self):
        self.start()
        a = harness.create_tenant(self, self.admin, "acme")["name"]
        b = harness.create_tenant(self, self.admin, "beta")["name"]
        shape = {"gpus": {"profile": "1g.10gb", "count": 1}, "cpus": 1, "memory_mib": 1024,
                 "pool": "shared"}
        ra = harness.create_alloc(self, self.admin, dict(shape, tenant=a, members=1))
        rb = harness.create_alloc(self, self.admin, dict(shape, tenant=b, members=1))
        excl = harness.create_alloc(self, self.admin, dict(
            shape, tenant=a, members=1, pool="solo"))
        for x in (ra, rb, excl):
            wait_state(self, self.admin, x["id"], "active")
        ka, kb = self.tenant_key(a), self.tenant_key(b)
        self.assertTrue(ka and kb and ka != kb)
        self.assertEqual(self.admin.get("/v1/tenants/" + a).body["pkey"], "0x%04x" % ka)
        # Two tenants on one node through two VFs; the PF stays in Default
        # only; the exclusive node's PF joins its one tenant.
        wait_pkeys(self, self.fab, VF0, {0x7fff: False, 0x0010: False, ka: True})
        wait_pkeys(self, self.fab, VF1, {0x7fff: False, 0x0010: False, kb: True})
        wait_pkeys(self, self.fab, SHARED_PF, {0x7fff: False})
        wait_pkeys(self, self.fab, SOLO_PF, {0x7fff: False, 0x0010: False, ka: True})
        wait_pkeys(self, self.fab, STORAGE, {0x7fff: False, 0x0010: True})
        v = self.admin.get("/v1/fabric/verify").body
        self.assertTrue(v["ok"], v)
        self.assertGreaterEqual(v["ports_checked"], 5)
        # The same proof from the CLI: through the controller, and read from
        # this host over SMP (--live).
        for flags in ((), ("--live",)):
            code, rep = self.isoctl_verify(*flags)
            self.assertEqual(code, 0, rep)
            self.assertTrue(rep["ok"], rep)
            self.assertGreaterEqual(rep["ports_checked"], 5, rep)

        # Release removes the membership.
        self.admin.delete("/v1/allocations/" + excl["id"])
        wait_pkeys(self, self.fab, SOLO_PF, {0x7fff: False})
        wait_pkeys(self, self.fab, VF0, {0x7fff: False, 0x0010: False, ka: True})

        # A rogue line put in by hand, then SIGHUP: beta's VF made a full
        # member of acme's key. The verifier names the port and both tenants.
        with open(os.path.join(self.fab.dir, "partitions.conf"), "a") as f:
            f.write("rogue=0x%04x : 0x%016x=full ;\n" % (ka, VF1))
        self.fab.opensm("hup")
        deadline = time.time() + harness.T(10)
        while True:
            v = self.admin.get("/v1/fabric/verify").body
            if not v["ok"] or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertFalse(v["ok"], v)
        kinds = {x["kind"] for x in v["violations"]}
        self.assertIn("cross_tenant", kinds, v)
        self.assertIn("0x%016x" % VF1, [p for x in v["violations"] for p in x["ports"]])
        named = [t for x in v["violations"] if x["kind"] == "cross_tenant" for t in x["tenants"]]
        self.assertIn(a, named, v)
        self.assertIn(b, named, v)
        code, rep = self.isoctl_verify("--live", "--json")
        self.assertEqual(code, 8, rep)
        self.assertIn("cross_tenant", {x["kind"] for x in rep["violations"]}, rep)

    def test_gate_waits_for_the_fabric_then_the_agent(self):
        """Without --no-agents, OpenSM's confirmation is not enough: the
        allocation then waits for its node's agent, and the agent's report
        activates it (docs/agents.md, "Provisioning gate")."""
        self.start(agents=True)
        t = harness.create_tenant(self, self.admin)["name"]
        a = harness.create_alloc(self, self.admin, {"tenant": t, "gpus": {"profile": "1g.10gb", "count": 1},
                                                   "cpus": 1, "memory_mib": 1024, "pool": "shared"})
        self.assertEqual(a["state"], "provisioning")
        p = a["placement"][0]
        waiting = "waiting for the agent of node " + p["node"]
        deadline = time.time() + harness.T(20)
        while True:
            got = self.admin.get("/v1/allocations/" + a["id"]).body
            if got["reason"] == waiting or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual((got["state"], got["reason"]), ("provisioning", waiting))
        self.assertGreaterEqual(self.admin.get("/v1/fabric").body["confirmed"], 1)
        desired = self.admin.get("/v1/nodes/%s/desired" % p["node"]).body
        # The member's VF must be reported with its GUID too (docs/agents.md).
        self.assertEqual([v["guid"] for v in desired["vfs"]], ["0x%016x" % VF0])
        r = self.admin.request("PUT", "/v1/nodes/%s/status" % p["node"], {
            "term_seen": desired["term"], "version": "test", "gpus": [], "instances": [{
                "gpu": p["gpu"], "start": p["start"], "profile": p["profile"], "uuid": "MIG-e2e",
                "allocation": a["id"], "member": 0, "ready": True}],
            "vfs": [{"index": v["index"], "guid": v["guid"], "ready": True} for v in desired["vfs"]]})
        self.assertStatus(r, 204)
        got = self.admin.get("/v1/allocations/" + a["id"]).body
        self.assertEqual((got["state"], got["reason"]), ("active", ""))

    def test_opensm_down_then_back(self):
        self.start()
        t = harness.create_tenant(self, self.admin)["name"]
        self.fab.opensm("stop")
        r = harness.create_alloc(self, self.admin, {
            "tenant": t, "members": 1, "cpus": 1, "memory_mib": 1024, "pool": "shared",
            "gpus": {"profile": "1g.10gb", "count": 1}})
        time.sleep(1.0)
        a = self.admin.get("/v1/allocations/" + r["id"]).body
        self.assertEqual(a["state"], "provisioning", a)  # pending confirmation, not lost
        self.fab.restart_opensm()
        wait_state(self, self.admin, r["id"], "active", timeout=20)
        wait_pkeys(self, self.fab, VF0, {0x7fff: False, 0x0010: False, self.tenant_key(t): True})

    def test_capacity_overflow_refused(self):
        # Default + the storage service + a tenant key = 3 keys on a port of 2.
        self.start(cap=2)
        t = harness.create_tenant(self, self.admin)["name"]
        r = self.admin.post("/v1/allocations", {
            "tenant": t, "members": 1, "cpus": 1, "memory_mib": 1024, "pool": "shared",
            "gpus": {"profile": "1g.10gb", "count": 1}})
        self.assertEqual(r.status, 409, r.text)
        self.assertIn("capacity", r.body["error"]["message"])
        self.assertEqual(self.admin.get("/v1/allocations").body["items"], [])
        # Nothing half-written: OpenSM's file never saw the tenant.
        with open(os.path.join(self.fab.dir, "partitions.conf")) as f:
            self.assertNotIn("t_", f.read())


    def test_capacity_read_from_fabric(self):
        # The inventory claims 128 P_Keys per port, the HCAs (ibsim) report 64
        # in NodeInfo.PartitionCap. With 64 shared services a tenant port would
        # need 66 keys: refused, naming the capacity read from the fabric.
        self.start(cap=128, services=63)
        t = harness.create_tenant(self, self.admin)["name"]
        r = self.admin.post("/v1/allocations", {
            "tenant": t, "members": 1, "cpus": 1, "memory_mib": 1024, "pool": "shared",
            "gpus": {"profile": "1g.10gb", "count": 1}})
        self.assertEqual(r.status, 409, r.text)
        self.assertIn("PartitionCap", r.body["error"]["message"])
        self.assertIn("capacity is 64", r.body["error"]["message"])
        with open(os.path.join(self.fab.dir, "partitions.conf")) as f:
            self.assertNotIn("t_", f.read())


if __name__ == "__main__":
    harness.main(__doc__)

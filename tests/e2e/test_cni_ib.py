#!/usr/bin/env python3
"""test_cni_ib.py: the CNI plugin's InfiniBand mode end to end (issue 17,
docs/cni.md "InfiniBand"), on OpenSM/ibsim.

isostackd with the OpenSM fabric driver on the ibsim fabric of
test_fabric_api.py (node "shared": mlx5_0 with 2 VFs), one isostack-agent for
"shared" with the ibsim VF driver (node-agent token, --sandbox off), in this
namespace. ibsim's VFs have no netdevs: the test stands in veth links
mlx5_0v0 and mlx5_0v1 (the names iso_agent_vf_netdev gives them). Pods are
network namespaces; the plugin is run the way a runtime runs it, over
examples/cni/infiniband.conflist. Checked: a pod's VF GUID is in its tenant's
P_Key read back with smpquery, the VF's netdev is the pod's CNI_IFNAME with
the IPAM address; DEL and GC take it out again (the netdev back on the host);
two tenants' pods get different VFs and P_Keys; a third pod finds no free VF:
code 11 with the reason, nothing left; OpenSM down during ADD: 11 after the
bounded wait, nothing left; the agent killed while the allocation waits for the
SM and restarted: GC frees it; the netns deleted before DEL. After each: no
record, no live attachment allocation, the verifier ok. Root only; skips
(77) without ibsim/opensm or host-local.

argv: isostackd isoctl"""
import copy
import json
import os
import shutil
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
from harness import sh  # noqa: E402
from test_fabric_api import VF0, VF1, Fabric, wait_pkeys  # noqa: E402

NODE = "shared"
CNI_PATH = "/usr/lib/cni"
TAG = "%05d" % (os.getpid() % 100000)
STANDINS = ("mlx5_0v0", "mlx5_0v1")
SHORT_SM_WAIT_S = 2


def build_dir():
    return os.path.dirname(harness.Binaries.isostackd)


def skip_reason():
    if os.geteuid() != 0:
        return "not root: network namespaces need root"
    if not shutil.which("ip"):
        return "no ip on PATH"
    if not os.access(os.path.join(CNI_PATH, "host-local"), os.X_OK):
        return "no host-local in %s" % CNI_PATH
    for name in STANDINS:
        if os.path.exists("/sys/class/net/" + name):
            return "%s exists on this host already" % name
    return None


@unittest.skipIf(skip_reason(), skip_reason() or "")
class CniIb(harness.ApiTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_cni_ib.")
        self.netns = []
        self.fab = Fabric()
        self.addCleanup(self.fab.stop)
        self.daemon = harness.Daemon(self.fab.config, env=self.fab.env, agents=True,
                                     extra_args=("--provisioning-timeout-s", "60"),
                                     fixed_port=True)  # the agent's URL across restarts
        self.addCleanup(self.daemon.cleanup)
        self.daemon.start()
        self.admin = harness.Client(self.daemon, self.daemon.admin_token)
        self.addCleanup(self.drop_netns)
        self.park, _ = self.pod("park")  # the stand-ins' veth peers
        for name in STANDINS:
            self.standin(name)
            self.addCleanup(sh, "ip", "link", "del", name, check=False)
        self.ta = harness.create_tenant(self, self.admin)["name"]
        self.tb = harness.create_tenant(self, self.admin)["name"]
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": NODE})
        self.assertStatus(r, 201)
        self.token_file = os.path.join(self.tmp, "agent.token")
        with open(self.token_file, "w") as f:
            f.write(r.body["token"] + "\n")
        self.state = os.path.join(self.tmp, "state")
        self.log = open(os.path.join(self.tmp, "agent.log"), "w+b")
        self.agent = None
        self.start_agent()
        self.addCleanup(self.log.close)
        self.addCleanup(self.stop_agent)
        with open(os.path.join(ROOT, "examples", "cni", "infiniband.conflist")) as f:
            conf = json.load(f)
        self.conf = conf["plugins"][0]
        self.conf.update({"cniVersion": conf["cniVersion"], "name": "ib" + TAG,
                          "agentStateDir": self.state,
                          "tenants": {"team-a": self.ta, "team-b": self.tb}})
        self.conf["ipam"]["dataDir"] = os.path.join(self.tmp, "ipam")
        self.wait_status()

    def start_agent(self, sm_wait_s=None):
        nvml_config = os.path.join(self.tmp, "nvml-config.json")
        with open(nvml_config, "w") as f:
            json.dump({"gpus": [{"model": "H100-80GB"}, {"model": "H100-80GB"}]}, f)
        env = dict(os.environ, ISOSTACK_FAKE_NVML_CONFIG=nvml_config,
                   ISOSTACK_NVML_LIBRARY=os.path.join(build_dir(), "tests", "fakes",
                                                      "libnvidia-ml.so.1"),
                   ISOSTACK_FAKE_NVML_STATE=os.path.join(self.tmp, "nvml-state.json"))
        self.agent = subprocess.Popen(
            [os.path.join(build_dir(), "isostack-agent"), "--controller", self.daemon.url(),
             "--token-file", self.token_file, "--node", NODE, "--gpu-driver", "nvml",
             "--vf-driver", "ibsim", "--ibsim-net", self.fab.net, "--state-dir", self.state,
             "--heartbeat-s", "1", "--sandbox", "off"] +
            (["--cni-sm-wait-s", str(sm_wait_s)] if sm_wait_s else []),
            stdout=self.log, stderr=self.log, env=env)

    def short_sm_wait(self, seconds=SHORT_SM_WAIT_S):
        """The agent again with ADD's wait for the SM cut from 10 s
        (--cni-sm-wait-s), for the tests that wait it out."""
        self.stop_agent()
        self.start_agent(sm_wait_s=seconds)
        self.wait_status()

    def standin(self, name):
        """A VF's netdev stand-in: a veth (no dummy module here) whose peer
        is parked in a namespace of its own."""
        # After a pod's netns is deleted the kernel destroys the veth pair,
        # and with it the parked peer, asynchronously: until it has, the
        # peer's name is still taken ("File exists"), so try again a while.
        deadline = time.monotonic() + harness.T(10)
        while not os.path.exists("/sys/class/net/" + name):
            r = subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name",
                                "p" + name[-1], "netns", self.park], capture_output=True,
                               text=True)
            if r.returncode == 0:
                break
            if "File exists" not in r.stderr or time.monotonic() > deadline:
                raise AssertionError("ip link add %s: %s" % (name, r.stderr.strip()))
            time.sleep(0.1)

    def stop_agent(self, sig=signal.SIGTERM):
        if self.agent.poll() is None:
            self.agent.send_signal(sig)
            try:
                self.agent.wait(timeout=harness.T(20))
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait()

    def agent_text(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-4000:]

    def drop_netns(self):
        for ns in self.netns:
            sh("ip", "netns", "del", ns, check=False)

    def pod(self, name):
        ns = "cniib%s-%s" % (TAG, name)
        sh("ip", "netns", "add", ns)
        self.netns.append(ns)
        return ns, "/run/netns/" + ns

    def cni(self, command, cid=None, netns=None, ifname="net1", ns="team-a", conf=None):
        e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command,
             "CNI_PATH": CNI_PATH,
             "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=p-%s" % (ns, cid)}
        if cid is not None:
            e["CNI_CONTAINERID"] = cid
            e["CNI_IFNAME"] = ifname
        if netns is not None:
            e["CNI_NETNS"] = netns
        r = subprocess.run([os.path.join(build_dir(), "cni", "isostack-cni")],
                           input=json.dumps(conf or self.conf), capture_output=True,
                           text=True, env=e, timeout=harness.T(90))
        return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None)

    def gc(self, valid):
        conf = copy.deepcopy(self.conf)
        conf["cni.dev/valid-attachments"] = [{"containerID": c, "ifname": "net1"}
                                             for c in valid]
        return self.cni("GC", conf=conf)

    def wait_status(self):
        deadline = time.time() + harness.T(30)
        while True:
            rc, out = self.cni("STATUS")
            if rc == 0 or time.time() > deadline:
                self.assertEqual(rc, 0, "STATUS: %r%s" % (out, self.agent_text()))
                return
            time.sleep(0.2)

    def live_attachments(self):
        r = self.admin.get("/v1/allocations?limit=1000")
        self.assertStatus(r, 200)
        return [a for a in r.body["items"]
                if a["name"].startswith("cni-") and a["state"] not in ("released", "failed")]

    def records(self):
        d = os.path.join(self.state, "cni")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def vf_guid(self, alloc_id):
        r = self.admin.get("/v1/allocations/" + alloc_id)
        self.assertStatus(r, 200)
        return int(r.body["nodes"][0]["vf"]["guid"], 16)

    def tenant_key(self, name):
        for p in self.admin.get("/v1/fabric/intent").body["partitions"]:
            if p["kind"] == "tenant" and p["tenant"] == name:
                return int(p["pkey"], 16)
        return None

    def link_in(self, netns, name):
        return sh("ip", "-n", netns, "-j", "addr", "show", "dev", name, check=False)

    def assert_clean(self):
        """Nothing left: no record, no live attachment, the VFs' stand-ins
        on the host, no P_Key on either VF but Default, the verifier ok."""
        self.assertEqual(self.records(), [], self.agent_text())
        deadline = time.time() + harness.T(15)
        while self.live_attachments() and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.live_attachments(), [])
        for name in STANDINS:
            self.assertTrue(os.path.exists("/sys/class/net/" + name), name)
        for vf in (VF0, VF1):
            wait_pkeys(self, self.fab, vf, {0x7fff: False})
        deadline = time.time() + harness.T(15)
        while True:
            rep = self.admin.get("/v1/fabric/verify").body
            if rep.get("ok") or time.time() > deadline:
                self.assertTrue(rep.get("ok"), rep)
                break
            time.sleep(0.3)
        rc, out = self.gc([])
        self.assertEqual((rc, out and out.get("code")), (0, None), out)

    def add_ok(self, cid, netns, ns="team-a"):
        t0 = time.time()
        rc, out = self.cni("ADD", cid, netns, ns=ns)
        took = time.time() - t0
        self.assertEqual(rc, 0, "ADD %s: %r\n%s" % (cid, out, self.agent_text()))
        return out, took

    def test_add_del_gc_two_tenants(self):
        _, pa = self.pod("a")
        _, pb = self.pod("b")
        nsa, nsb = self.netns[-2], self.netns[-1]
        ra, ta = self.add_ok("ca" + TAG, pa)
        rb, tb = self.add_ok("cb" + TAG, pb, ns="team-b")
        self.assertEqual(ra["interfaces"][0]["name"], "net1")
        self.assertEqual(ra["interfaces"][0]["sandbox"], pa)
        self.assertTrue(ra["ips"][0]["address"].startswith("10.78.1."), ra)
        # the VF netdev is the pod's net1, with the IPAM address, gone from the host
        show = json.loads(self.link_in(nsa, "net1").stdout)
        self.assertEqual(show[0]["addr_info"][0]["local"] + "/16", ra["ips"][0]["address"])
        live = {a["tenant"]: a for a in self.live_attachments()}
        self.assertEqual(set(live), {self.ta, self.tb})
        for a in live.values():
            self.assertEqual(a["state"], "active", a)
        ga, gb = self.vf_guid(live[self.ta]["id"]), self.vf_guid(live[self.tb]["id"])
        self.assertEqual({ga, gb}, {VF0, VF1})  # two pods, two VFs
        ka, kb = self.tenant_key(self.ta), self.tenant_key(self.tb)
        self.assertNotEqual(ka, kb)
        # ADD returned once the SM confirmed: the P_Key is there at once
        self.assertEqual(self.fab.pkeys(ga), {0x7fff: False, 0x0010: False, ka: True})
        self.assertEqual(self.fab.pkeys(gb), {0x7fff: False, 0x0010: False, kb: True})
        moved = {STANDINS[0] if ga == VF0 else STANDINS[1]}
        for name in moved:
            self.assertFalse(os.path.exists("/sys/class/net/" + name))
        # a third pod: no free VF on the node, 11 with the reason, nothing made
        _, pc = self.pod("c")
        rc, out = self.cni("ADD", "cc" + TAG, pc)
        self.assertEqual((rc, out["code"]), (1, 11), out)
        self.assertIn("no free VF", out["msg"])
        self.assertEqual(len(self.records()), 2)
        self.assertEqual(len(self.live_attachments()), 2)
        # DEL: the netdev back on the host, the P_Key gone; twice is fine
        for _ in range(2):
            rc, out = self.cni("DEL", "ca" + TAG, pa)
            self.assertEqual(rc, 0, out)
        self.assertNotEqual(self.link_in(nsa, "net1").returncode, 0)
        wait_pkeys(self, self.fab, ga, {0x7fff: False})
        self.assertEqual(self.fab.pkeys(gb), {0x7fff: False, 0x0010: False, kb: True})
        # GC: kept when listed, freed when not
        rc, out = self.gc(["cb" + TAG])
        self.assertEqual(rc, 0, out)
        self.assertEqual(self.fab.pkeys(gb), {0x7fff: False, 0x0010: False, kb: True})
        rc, out = self.gc([])
        self.assertEqual(rc, 0, out)
        wait_pkeys(self, self.fab, gb, {0x7fff: False})
        self.assertNotEqual(self.link_in(nsb, "net1").returncode, 0)
        self.assert_clean()
        print("IB ADD on the 4-node ibsim fabric: %.3f s, %.3f s" % (ta, tb), file=sys.stderr)

    def test_netns_gone_before_del(self):
        ns, p = self.pod("g")
        self.add_ok("cg" + TAG, p)
        # a veth dies with its netns (a real VF returns to the host):
        # DEL succeeds either way, and releases the VF
        sh("ip", "netns", "del", ns)
        self.netns.remove(ns)
        rc, out = self.cni("DEL", "cg" + TAG, p)
        self.assertEqual(rc, 0, out)
        for name in STANDINS:
            self.standin(name)
        self.assert_clean()

    def test_opensm_down_during_add(self):
        _, p = self.pod("o")
        self.short_sm_wait()
        self.fab.opensm("stop")
        t0 = time.time()
        rc, out = self.cni("ADD", "co" + TAG, p)
        took = time.time() - t0
        self.fab.restart_opensm()
        self.assertEqual((rc, out["code"]), (1, 11), out)
        self.assertIn("subnet manager", out["msg"])
        # the agent's --cni-sm-wait-s bounds it, and the message says so
        self.assertIn("within %d s" % SHORT_SM_WAIT_S, out["msg"])
        self.assertGreaterEqual(took, SHORT_SM_WAIT_S)
        self.assertLess(took, harness.T(SHORT_SM_WAIT_S + 8))
        self.assertEqual(self.records(), [])
        self.assertEqual(self.live_attachments(), [])
        self.assert_clean()

    def test_agent_killed_while_provisioning(self):
        _, p = self.pod("k")
        self.fab.opensm("stop")  # the allocation waits for the SM's read-back
        proc = subprocess.Popen(
            [os.path.join(build_dir(), "cni", "isostack-cni")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={"PATH": "/usr/bin:/bin", "CNI_COMMAND": "ADD", "CNI_PATH": CNI_PATH,
                 "CNI_CONTAINERID": "ck" + TAG, "CNI_IFNAME": "net1", "CNI_NETNS": p,
                 "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=k"})
        proc.stdin.write(json.dumps(self.conf))
        proc.stdin.close()
        deadline = time.time() + harness.T(20)
        while not [a for a in self.live_attachments() if a["state"] == "provisioning"]:
            self.assertLess(time.time(), deadline, self.agent_text())
            time.sleep(0.1)
        self.stop_agent(signal.SIGKILL)
        proc.wait(timeout=harness.T(30))
        self.assertEqual(len(self.records()), 1)  # the record says what to free
        self.fab.restart_opensm()
        self.start_agent()
        self.wait_status()
        rc, out = self.gc([])
        self.assertEqual(rc, 0, out)
        self.assertEqual(out, None)  # GC prints nothing on success
        self.assert_clean()

    def test_status_subnet_manager_down(self):
        """STATUS in InfiniBand mode asks the controller whether the SM is
        reachable (GET /v1/fabric/health, a node-agent token may): OpenSM
        stopped, 50 naming the subnet manager within a few seconds (the
        driver looks at its pid file once a second); restarted, 0 again."""
        rc, out = self.cni("STATUS")
        self.assertEqual(rc, 0, out)
        self.fab.opensm("stop")
        deadline = time.time() + harness.T(5)
        while True:
            rc, out = self.cni("STATUS")
            if rc != 0 or time.time() > deadline:
                break
            time.sleep(0.2)
        health = self.admin.get("/v1/fabric/health").body
        self.fab.restart_opensm()
        self.assertEqual((rc, out and out["code"]), (1, 50), out)
        self.assertIn("isostack: the subnet manager is unreachable: ", out["msg"])
        self.assertIn("OpenSM is not running", out["msg"])
        self.assertEqual(health["sm"]["state"], "down", health)
        self.wait_status()
        health_up = self.admin.get("/v1/fabric/health").body
        self.assertEqual(health_up["sm"]["state"], "up", health_up)
        self.assertGreaterEqual(health_up["sm"]["since"], health["sm"]["since"])
        self.assert_clean()


    # ---- CHECK in InfiniBand mode (docs/cni.md "Verbs") ----

    def check(self, cid, netns, prev, conf=None, **kw):
        """CHECK as a runtime sends it: the ADD's Result as prevResult."""
        conf = copy.deepcopy(conf or self.conf)
        if prev is not None:
            conf["prevResult"] = prev
        return self.cni("CHECK", cid, netns, conf=conf, **kw)

    def assert_check_fails(self, got, *words):
        rc, out = got
        self.assertEqual((rc, out and out.get("code")), (1, 102), out)
        for w in words:
            self.assertIn(w, out["msg"])

    def standin_of(self, cid):
        """The host name of the VF netdev the attachment `cid` holds."""
        live = self.live_attachments()
        self.assertEqual(len(live), 1, live)
        return STANDINS[0] if self.vf_guid(live[0]["id"]) == VF0 else STANDINS[1]

    def test_check_follows_the_pod(self):
        ns, p = self.pod("ck")
        cid = "ck" + TAG
        res, _ = self.add_ok(cid, p)
        addr = res["ips"][0]["address"]
        standin = self.standin_of(cid)
        self.assertEqual(self.check(cid, p, res), (0, None))
        # a prevResult that is not what the pod has: 102 naming both
        wrong = copy.deepcopy(res)
        wrong["ips"][0]["address"] = "10.78.9.9/16"
        self.assert_check_fails(self.check(cid, p, wrong), "10.78.9.9/16", addr, "net1")
        # the pod's net1 down, then up again
        sh("ip", "-n", ns, "link", "set", "net1", "down")
        self.assert_check_fails(self.check(cid, p, res), "net1", "down")
        sh("ip", "-n", ns, "link", "set", "net1", "up")
        self.assertEqual(self.check(cid, p, res), (0, None))
        # its address removed, then given back
        sh("ip", "-n", ns, "addr", "del", addr, "dev", "net1")
        self.assert_check_fails(self.check(cid, p, res), "net1", "none", addr)
        sh("ip", "-n", ns, "addr", "add", addr, "dev", "net1")
        self.assertEqual(self.check(cid, p, res), (0, None))
        # another address on it than the ADD gave
        sh("ip", "-n", ns, "addr", "flush", "dev", "net1")
        sh("ip", "-n", ns, "addr", "add", "10.78.200.1/16", "dev", "net1")
        self.assert_check_fails(self.check(cid, p, res), "10.78.200.1/16", addr)
        # the VF's netdev moved back to the host (its own name there)
        sh("ip", "-n", ns, "link", "set", "net1", "netns", "1")
        sh("ip", "link", "set", "net1", "name", standin)
        self.assert_check_fails(self.check(cid, p, res), "no net1")
        # DEL still frees everything (the netdev is on the host already)
        rc, out = self.cni("DEL", cid, p)
        self.assertEqual(rc, 0, out)
        # after DEL: the runtime must not CHECK (CNI spec, CHECK); ours says
        # 102, nothing attached, and makes nothing
        self.assert_check_fails(self.check(cid, p, res), "not attached")
        self.assert_clean()

    def test_check_interface_deleted(self):
        ns, p = self.pod("cd")
        cid = "cd" + TAG
        res, _ = self.add_ok(cid, p)
        sh("ip", "-n", ns, "link", "del", "net1")  # a veth: its peer goes too
        self.assert_check_fails(self.check(cid, p, res), "no net1")
        rc, out = self.cni("DEL", cid, p)
        self.assertEqual(rc, 0, out)
        for name in STANDINS:
            self.standin(name)
        self.assert_clean()

    def test_check_bad_inputs(self):
        ns, p = self.pod("cb")
        _, p2 = self.pod("cb2")
        cid = "cb" + TAG
        res, _ = self.add_ok(cid, p)
        # no prevResult: the runtime must send the ADD's Result (CNI spec)
        rc, out = self.check(cid, p, None)
        self.assertEqual((rc, out["code"]), (1, 7), out)
        self.assertIn("prevResult", out["msg"])
        # prevResult not a Result
        rc, out = self.check(cid, p, ["x"])
        self.assertEqual((rc, out["code"]), (1, 6), out)
        self.assertIn("prevResult", out["msg"])
        # CHECK came with spec 0.4.0: a 0.3.1 config may not ask it
        old = dict(self.conf, cniVersion="0.3.1")
        rc, out = self.check(cid, p, res, conf=old)
        self.assertEqual((rc, out["code"]), (1, 1), out)
        self.assertIn("cniVersion", out["msg"])
        # no CNI_NETNS
        rc, out = self.check(cid, None, res)
        self.assertEqual((rc, out["code"]), (1, 4), out)
        self.assertIn("CNI_NETNS", out["msg"])
        # another netns than the ADD's, another ifname, another container
        self.assert_check_fails(self.check(cid, p2, res), p, p2)
        self.assert_check_fails(self.check(cid, p, res, ifname="net2"), "net2",
                                "not attached")
        self.assert_check_fails(self.check("cx" + TAG, p, res), "not attached")
        # none of them changed anything: the pod still checks out
        self.assertEqual(self.check(cid, p, res), (0, None))
        rc, out = self.cni("DEL", cid, p)
        self.assertEqual(rc, 0, out)
        self.assert_clean()


    # ---- the controller restarted mid-ADD (issue 17, failure injection) ----

    def add_async(self, cid, netns, ns="team-a"):
        """An ADD run in the background, as a runtime starts it."""
        proc = subprocess.Popen(
            [os.path.join(build_dir(), "cni", "isostack-cni")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={"PATH": "/usr/bin:/bin", "CNI_COMMAND": "ADD", "CNI_PATH": CNI_PATH,
                 "CNI_CONTAINERID": cid, "CNI_IFNAME": "net1", "CNI_NETNS": netns,
                 "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s" % (ns, cid)})
        proc.stdin.write(json.dumps(self.conf))
        proc.stdin.close()
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def restarted_mid_add(self, name, stop, down_past_the_wait=False):
        """OpenSM down holds the ADD in its wait for the SM; the controller
        goes (stop) and comes back on the same store, then OpenSM. With
        down_past_the_wait the controller stays away until the ADD gave up."""
        _, p = self.pod(name)
        cid = "c%s%s" % (name, TAG)
        self.fab.opensm("stop")
        proc = self.add_async(cid, p)
        deadline = time.time() + harness.T(20)
        while not [a for a in self.live_attachments() if a["state"] == "provisioning"]:
            self.assertLess(time.time(), deadline, self.agent_text())
            self.assertIsNone(proc.poll(), "the ADD ended before the SM could confirm")
            time.sleep(0.1)
        stop()
        if down_past_the_wait:
            proc.wait(timeout=harness.T(60))
        self.daemon.start()
        self.admin = harness.Client(self.daemon, self.daemon.admin_token)
        self.fab.restart_opensm()
        out = proc.stdout.read()
        proc.wait(timeout=harness.T(60))
        proc.stdout.close()
        res = json.loads(out)
        if down_past_the_wait:
            self.assertEqual(proc.returncode, 1, res)
        if proc.returncode != 0:
            self.assertEqual(res["code"], 11, "a retry can succeed: %r" % res)
            # the retry of the same (container, ifname, netns) succeeds. (After
            # a success the runtime may not ADD again without a DEL: CNI
            # spec, and host-local refuses the duplicate.)
            res, _ = self.add_ok(cid, p)
        live = self.live_attachments()
        self.assertEqual(len(live), 1, live)  # one allocation for the key
        self.assertEqual((live[0]["tenant"], live[0]["state"]), (self.ta, "active"), live)
        guid = self.vf_guid(live[0]["id"])
        self.assertIn(guid, (VF0, VF1))
        self.assertEqual(self.fab.pkeys(guid).get(self.tenant_key(self.ta)), True,
                         "the pod's VF GUID is a full member of its tenant's P_Key")
        self.assertEqual(self.check(cid, p, res), (0, None))
        rc, out = self.cni("DEL", cid, p)
        self.assertEqual(rc, 0, out)
        self.assert_clean()

    def test_controller_killed_mid_add(self):
        self.restarted_mid_add("rk", self.daemon.kill)

    def test_controller_stopped_mid_add(self):
        self.restarted_mid_add("rs", self.daemon.stop)

    def test_controller_down_past_the_add(self):
        self.short_sm_wait()
        self.restarted_mid_add("rd", self.daemon.kill, down_past_the_wait=True)

if __name__ == "__main__":
    harness.main(__doc__)

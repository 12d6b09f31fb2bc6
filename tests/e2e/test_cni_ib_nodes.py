#!/usr/bin/env python3
"""test_cni_ib_nodes.py: two tenants' pods on two InfiniBand "nodes" (issue 17,
"Tests: real network namespaces play the pods"; docs/cni.md "InfiniBand").

test_cni_ib.py runs one node in this namespace; here isostackd (the OpenSM
driver on ibsim, test_fabric_api's Fabric with the inventory below: nodes ibn1
and ibn2, mlx5_0 with 2 VFs each) listens on a bridge of this namespace
(203.0.113.40), and each node is a namespace-host (203.0.113.41/.42 over veth,
as in tests/api/test_cni.py) with its own isostack-agent inside (node-agent
token, ibsim VF driver, --sandbox off). The agent's VF netdev stand-ins
mlx5_0v0 and mlx5_0v1 (iso_agent_vf_netdev's names: ibsim's VFs have no
netdevs) are veths in each host's namespace, so both nodes have the same names
without colliding. Pods are network namespaces; the plugin is run the way a
runtime runs it, over examples/cni/infiniband.conflist.

Checked: tenants A and B each have a pod on each node; every VF's P_Key table
read back with smpquery holds exactly Default, the storage service and its own
pod's tenant's key (A's two pods share A's key across the nodes, B's are never
in it); the PFs only Default; GET /v1/fabric/verify ok. DEL of one pod takes
its GUID out while the other node's pod of the same tenant keeps the key; GC
on one node frees that node's unlisted attachments only, never the other
node's. Hostile: node 1's agent given node 2's config (`node`), and an agent
holding node 1's token started as node 2 with a copy of node 2's records,
cannot attach on node 2 nor free (or cut) node 2's pod. After each: no record,
no live attachment, only Default on every VF, the verifier ok, GC frees
nothing. Root only; skips (77) without ibsim/opensm or host-local.

argv: isostackd isoctl"""
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
from test_cni import CniDaemon  # noqa: E402
from test_fabric_api import Fabric, wait_pkeys  # noqa: E402

NODES = ("ibn1", "ibn2")
UNDERLAY = {"ibn1": "203.0.113.41", "ibn2": "203.0.113.42"}
CONTROLLER_IP = "203.0.113.40"
RANGE = {"ibn1": ("10.79.1.10", "10.79.1.250"), "ibn2": ("10.79.2.10", "10.79.2.250")}
PF = {"ibn1": 0x946dae0300c1d001, "ibn2": 0x946dae0300c1d002}
VFS = {"ibn1": (0x946dae0300c20100, 0x946dae0300c20101),
       "ibn2": (0x946dae0300c20200, 0x946dae0300c20201)}
STANDINS = ("mlx5_0v0", "mlx5_0v1")
CNI_PATH = "/usr/lib/cni"
TAG = "%05d" % (os.getpid() % 100000)
DEFAULT, STORAGE_KEY = 0x7fff, 0x0010

# test_fabric_api's INVENTORY with two VF nodes instead of "shared" and "solo"
INVENTORY = """
cluster: e2e-ibnodes
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
  - name: ib
racks:
  - name: r1
    pdus: [p1]
nodes:
  - name: ibn1
    pool: ib
    rack: r1
    pdu: p1
    cpus: 64
    memory_gib: 512
    gpus: {{model: h100-80gb, count: 2, mig: true}}
    port: {{device: mlx5_0, port: 1, pkey_capacity: {cap}, guid: 0x946dae0300c1d001,
           vfs: {{count: 2, guid_base: 0x946dae0300c20100}}}}
  - name: ibn2
    pool: ib
    rack: r1
    pdu: p1
    cpus: 64
    memory_gib: 512
    gpus: {{model: h100-80gb, count: 2, mig: true}}
    port: {{device: mlx5_0, port: 1, pkey_capacity: {cap}, guid: 0x946dae0300c1d002,
           vfs: {{count: 2, guid_base: 0x946dae0300c20200}}}}
"""


def agent_binary():
    return os.path.join(os.path.dirname(harness.Binaries.isostackd), "isostack-agent")


def plugin_binary():
    return os.path.join(os.path.dirname(harness.Binaries.isostackd), "cni", "isostack-cni")


def skip_reason():
    if os.geteuid() != 0:
        return "not root: network namespaces need root"
    if not shutil.which("ip"):
        return "no ip on PATH"
    if not os.access(os.path.join(CNI_PATH, "host-local"), os.X_OK):
        return "no host-local in %s" % CNI_PATH
    return None


@unittest.skipIf(skip_reason(), skip_reason() or "")
class CniIbNodes(harness.ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="test_cni_ib_nodes.")
        cls.netns, cls.links, cls.agents, cls.logs = [], [], {}, {}
        cls.fab = cls.d = None
        try:
            cls.fab = Fabric(inventory=INVENTORY)
            cls._hosts()
            cls.d = CniDaemon(cls.fab.config, env=cls.fab.env, agents=True,
                              extra_args=("--agent-lease-s", "5", "--agent-grace-s", "600",
                                          "--provisioning-timeout-s", "60"))
            cls.d.start()
            cls.admin = cls.d.client()
            cls.ta = harness.create_tenant(cls, cls.admin)["name"]
            cls.tb = harness.create_tenant(cls, cls.admin)["name"]
            cls.tokens = {}
            for node in NODES:
                r = cls.admin.post("/v1/tokens", {"role": "node-agent", "node": node})
                if r.status != 201:
                    raise AssertionError("node-agent token: %r" % r)
                cls.tokens[node] = os.path.join(cls.tmp, node + ".token")
                with open(cls.tokens[node], "w") as f:
                    f.write(r.body["token"] + "\n")
                cls.start_agent(node, node, cls.tokens[node], cls.state(node))
            for node in NODES:
                cls.wait_status(cls, node, cls.config(cls, node))
        except BaseException:
            cls._teardown()
            raise

    @classmethod
    def assertStatus(cls, r, status, msg=""):
        if r.status != status:
            raise AssertionError("%s: expected %d, got %r" % (msg, status, r))

    @classmethod
    def _hosts(cls):
        """The bridge isostackd listens on, and per node a namespace-host
        on it with the VFs' stand-ins (their peers parked in a namespace of
        the host's own)."""
        cls.br = "ibu" + TAG
        sh("ip", "link", "add", cls.br, "type", "bridge")
        cls.links.append(cls.br)
        sh("ip", "addr", "add", CONTROLLER_IP + "/24", "dev", cls.br)
        sh("ip", "link", "set", cls.br, "up")
        cls.host_ns, cls.park_ns = {}, {}
        for i, node in enumerate(NODES):
            ns, park = "ibn%s-h%d" % (TAG, i + 1), "ibn%s-k%d" % (TAG, i + 1)
            for n in (ns, park):
                sh("ip", "netns", "add", n)
                cls.netns.append(n)
            cls.host_ns[node], cls.park_ns[node] = ns, park
            peer = "ibh%d%s" % (i + 1, TAG)
            sh("ip", "link", "add", peer, "type", "veth", "peer", "name", "ul0", "netns", ns)
            cls.links.append(peer)
            sh("ip", "link", "set", peer, "master", cls.br, "up")
            sh("ip", "-n", ns, "addr", "add", UNDERLAY[node] + "/24", "dev", "ul0")
            sh("ip", "-n", ns, "link", "set", "ul0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            for name in STANDINS:
                sh("ip", "-n", ns, "link", "add", name, "type", "veth", "peer", "name",
                   "p" + name[-1], "netns", park)

    @classmethod
    def state(cls, node):
        return os.path.join(cls.tmp, "agent-" + node)

    @classmethod
    def start_agent(cls, key, node, token_file, state):
        """An isostack-agent for `node` in that node's namespace-host, with
        `token_file` (another node's, for the hostile case)."""
        log = open(os.path.join(cls.tmp, "agent-%s.log" % key), "ab")
        argv = ["ip", "netns", "exec", cls.host_ns[node], agent_binary(), "--controller",
                "http://%s:%d" % (CONTROLLER_IP, cls.d.fixed), "--token-file", token_file,
                "--node", node, "--gpu-driver", "sim", "--vf-driver", "ibsim", "--ibsim-net",
                cls.fab.net, "--state-dir", state, "--heartbeat-s", "1", "--sandbox", "off"]
        cls.agents[key] = (subprocess.Popen(argv, stdout=log, stderr=log), log)

    @classmethod
    def stop_agent(cls, key):
        proc, log = cls.agents.pop(key)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=harness.T(20))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()

    @classmethod
    def _teardown(cls):
        for key in list(cls.agents):
            cls.stop_agent(key)
        if cls.d:
            cls.d.cleanup()
        if cls.fab:
            cls.fab.stop()
        for ns in reversed(cls.netns):
            sh("ip", "netns", "del", ns, check=False)
        for link in cls.links:
            sh("ip", "link", "del", link, check=False)
        if not os.environ.get("ISO_TEST_KEEP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        cls._teardown()

    def agent_logs(self):
        out = []
        for key in sorted(os.listdir(self.tmp)):
            if key.startswith("agent-") and key.endswith(".log"):
                with open(os.path.join(self.tmp, key), errors="replace") as f:
                    out.append("--- %s\n%s" % (key, f.read()[-3000:]))
        return "\n".join(out)

    # ---- the runtime's side ----

    def config(self, host, state=None, **extra):
        """examples/cni/infiniband.conflist's plugin as a runtime hands it
        over, on this node: its agent (or the agent at `state`), its range."""
        lo, hi = RANGE[host]
        with open(os.path.join(ROOT, "examples", "cni", "infiniband.conflist")) as f:
            lst = json.load(f)
        c = dict(lst["plugins"][0], cniVersion=lst["cniVersion"], name="ib" + TAG)
        c["agentStateDir"] = state or self.state(host)
        c["tenants"] = {"team-a": self.ta, "team-b": self.tb}
        c["ipam"] = dict(c["ipam"], dataDir=os.path.join(self.tmp, "ipam-" + host),
                         ranges=[[{"subnet": "10.79.0.0/16", "rangeStart": lo, "rangeEnd": hi}]])
        c.update(extra)
        return c

    def cni(self, command, node, cid=None, netns=None, ns="team-a", conf=None):
        e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command,
             "CNI_PATH": CNI_PATH,
             "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=p-%s" % (ns, cid)}
        if cid is not None:
            e["CNI_CONTAINERID"] = cid
            e["CNI_IFNAME"] = "net1"
        if netns is not None:
            e["CNI_NETNS"] = netns
        r = subprocess.run([plugin_binary()], input=json.dumps(conf or self.config(node)),
                           capture_output=True, text=True, env=e, timeout=harness.T(90))
        return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None)

    def wait_status(self, node, conf):
        """(Also run as cls.wait_status(cls, ...) from setUpClass.)"""
        deadline = time.time() + harness.T(30)
        while True:
            rc, out = CniIbNodes.cni(self, "STATUS", node, conf=conf)
            if rc == 0 or time.time() > deadline:
                if rc != 0:
                    raise AssertionError("STATUS on %s: %r\n%s" % (node, out,
                                                                    CniIbNodes.agent_logs(self)))
                return
            time.sleep(0.2)

    def gc(self, node, valid):
        conf = self.config(node, **{"cni.dev/valid-attachments": [
            {"containerID": c, "ifname": "net1"} for c in valid]})
        return self.cni("GC", node, conf=conf)

    def pod(self, name):
        ns = "ibn%s-%s" % (TAG, name)
        sh("ip", "netns", "add", ns)
        self.netns.append(ns)
        return ns, "/run/netns/" + ns

    def drop_pod(self, ns):
        sh("ip", "netns", "del", ns, check=False)
        self.netns.remove(ns)

    def add_ok(self, node, cid, netns, ns):
        rc, out = self.cni("ADD", node, cid, netns, ns=ns)
        self.assertEqual(rc, 0, "ADD %s on %s: %r\n%s" % (cid, node, out, self.agent_logs()))
        return out

    # ---- what the controller, the agents and the fabric hold ----

    def records(self, node, state=None):
        d = os.path.join(state or self.state(node), "cni")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def live_attachments(self):
        items = self.admin.list_all("/v1/allocations")
        return [a for a in items
                if a["name"].startswith("cni-") and a["state"] not in ("released", "failed")]

    def attachment(self, alloc_id):
        """(node, VF GUID, state) of one attachment allocation."""
        r = self.admin.get("/v1/allocations/" + alloc_id)
        self.assertStatus(r, 200)
        m = r.body["nodes"][0]
        return m["node"], int(m["vf"]["guid"], 16), r.body["state"]

    def tenant_key(self, name):
        for p in self.admin.get("/v1/fabric/intent").body["partitions"]:
            if p["kind"] == "tenant" and p["tenant"] == name:
                return int(p["pkey"], 16)
        return None

    def netdev_in(self, netns, name):
        return sh("ip", "-n", netns, "-j", "addr", "show", "dev", name, check=False)

    def wait_verified(self):
        deadline = time.time() + harness.T(15)
        while True:
            rep = self.admin.get("/v1/fabric/verify").body
            if rep.get("ok") or time.time() > deadline:
                self.assertTrue(rep.get("ok"), rep)
                return rep
            time.sleep(0.3)

    def assert_clean(self):
        """Nothing left: no record on either node, no live attachment, the
        stand-ins back in their hosts, only Default on every VF and PF, the
        verifier ok, GC on each node frees nothing."""
        for node in NODES:
            self.assertEqual(self.records(node), [], "records on %s\n%s" % (
                node, self.agent_logs()))
        deadline = time.time() + harness.T(15)
        while self.live_attachments() and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.live_attachments(), [])
        for node in NODES:
            links = sh("ip", "-n", self.host_ns[node], "-o", "link", "show").stdout
            for name in STANDINS:
                self.assertIn(" %s@" % name, links, "%s on %s" % (name, node))
            for vf in VFS[node] + (PF[node],):
                wait_pkeys(self, self.fab, vf, {DEFAULT: False})
        self.wait_verified()
        for node in NODES:
            rc, out = self.gc(node, [])
            self.assertEqual((rc, out), (0, None), out)
            self.assertEqual(self.records(node), [])
        self.assertEqual(self.live_attachments(), [])

    # ---- the tests ----

    def test_1_two_tenants_two_nodes(self):
        pods = {}  # name -> (node, tenant namespace, netns name, path, container id)
        for name, node, ns in (("a1", "ibn1", "team-a"), ("b1", "ibn1", "team-b"),
                               ("a2", "ibn2", "team-a"), ("b2", "ibn2", "team-b")):
            nsname, path = self.pod(name)
            cid = "c%s%s" % (name, TAG)
            res = self.add_ok(node, cid, path, ns)
            self.assertEqual(res["interfaces"][0]["name"], "net1")
            self.assertEqual(res["interfaces"][0]["sandbox"], path)
            addr = res["ips"][0]["address"]
            self.assertTrue(addr.startswith("10.79.%d." % (NODES.index(node) + 1)), res)
            shown = json.loads(self.netdev_in(nsname, "net1").stdout)
            self.assertEqual(shown[0]["addr_info"][0]["local"] + "/16", addr)
            pods[name] = (node, ns, nsname, path, cid)
        ka, kb = self.tenant_key(self.ta), self.tenant_key(self.tb)
        self.assertTrue(ka and kb and ka != kb, (ka, kb))
        # each attachment: its tenant's, pinned to its node, active, a VF of that node's own
        live = self.live_attachments()
        self.assertEqual(len(live), 4)
        guid = {}  # pod -> its VF's GUID
        for a in live:
            node, g, state = self.attachment(a["id"])
            self.assertEqual(state, "active", a)
            self.assertIn(g, VFS[node])
            tenant_ns = "team-a" if a["tenant"] == self.ta else "team-b"
            (name,) = [n for n, p in pods.items() if p[0] == node and p[1] == tenant_ns]
            guid[name] = g
        self.assertEqual(len(set(guid.values())), 4, guid)
        # every VF read back: its own pod's tenant's key, no other tenant's;
        # A's two pods share A's key across the nodes, B's are not in it
        want = {"a1": ka, "a2": ka, "b1": kb, "b2": kb}
        for name, g in guid.items():
            self.assertEqual(self.fab.pkeys(g), {DEFAULT: False, STORAGE_KEY: False,
                                                 want[name]: True}, name)
        for node in NODES:
            self.assertEqual(self.fab.pkeys(PF[node]), {DEFAULT: False}, node)
        members = {int(p["pkey"], 16): {int(m["guid"], 16) for m in p["members"]}
                   for p in self.admin.get("/v1/fabric/intent").body["partitions"]
                   if p["kind"] == "tenant"}
        self.assertEqual(members[ka], {guid["a1"], guid["a2"]})
        self.assertEqual(members[kb], {guid["b1"], guid["b2"]})
        self.wait_verified()

        # DEL a1 (twice): its GUID leaves A's key; a2 on the other node keeps it
        for _ in range(2):
            rc, out = self.cni("DEL", "ibn1", pods["a1"][4], pods["a1"][3])
            self.assertEqual(rc, 0, out)
        self.assertNotEqual(self.netdev_in(pods["a1"][2], "net1").returncode, 0)
        wait_pkeys(self, self.fab, guid["a1"], {DEFAULT: False})
        for name in ("a2", "b1", "b2"):
            self.assertEqual(self.fab.pkeys(guid[name]), {DEFAULT: False, STORAGE_KEY: False,
                                                          want[name]: True}, name)
        self.assertEqual(len(self.records("ibn1")), 1)
        self.assertEqual(len(self.records("ibn2")), 2)

        # GC on node 2 listing a2: b2 freed; node 1's b1 (unlisted there) kept
        rc, out = self.gc("ibn2", [pods["a2"][4]])
        self.assertEqual((rc, out), (0, None), out)
        wait_pkeys(self, self.fab, guid["b2"], {DEFAULT: False})
        self.assertNotEqual(self.netdev_in(pods["b2"][2], "net1").returncode, 0)
        self.assertEqual(len(self.records("ibn2")), 1)
        self.assertEqual(len(self.records("ibn1")), 1)
        for name in ("a2", "b1"):
            self.assertEqual(self.fab.pkeys(guid[name]), {DEFAULT: False, STORAGE_KEY: False,
                                                          want[name]: True}, name)
            self.assertEqual(self.netdev_in(pods[name][2], "net1").returncode, 0, name)
        self.assertEqual({a["tenant"] for a in self.live_attachments()}, {self.ta, self.tb})

        # GC on node 1 listing nothing: b1 freed; node 2's a2 kept
        rc, out = self.gc("ibn1", [])
        self.assertEqual((rc, out), (0, None), out)
        wait_pkeys(self, self.fab, guid["b1"], {DEFAULT: False})
        self.assertEqual(self.records("ibn1"), [])
        self.assertEqual(len(self.records("ibn2")), 1)
        self.assertEqual(self.fab.pkeys(guid["a2"]), {DEFAULT: False, STORAGE_KEY: False,
                                                      ka: True})
        self.assertEqual([a["tenant"] for a in self.live_attachments()], [self.ta])
        self.wait_verified()

        rc, out = self.cni("DEL", "ibn2", pods["a2"][4], pods["a2"][3])
        self.assertEqual(rc, 0, out)
        for name in pods:
            self.drop_pod(pods[name][2])
        self.assert_clean()

    def test_2_foreign_node_refused(self):
        """Node 1's agent (token) given node 2's config cannot attach on
        node 2 nor free node 2's pod; neither can an agent holding node 1's
        token started as node 2 with a copy of node 2's records."""
        nsname, path = self.pod("v2")
        cid = "cv2" + TAG
        self.add_ok("ibn2", cid, path, "team-a")
        (victim,) = self.live_attachments()
        _, vguid, _ = self.attachment(victim["id"])
        ka = self.tenant_key(self.ta)
        holds = {DEFAULT: False, STORAGE_KEY: False, ka: True}
        self.assertEqual(self.fab.pkeys(vguid), holds)

        def untouched(what):
            self.assertEqual([a["id"] for a in self.live_attachments()], [victim["id"]], what)
            self.assertEqual(self.fab.pkeys(vguid), holds, what)
            self.assertEqual(len(self.records("ibn2")), 1, what)
            self.assertEqual(self.netdev_in(nsname, "net1").returncode, 0,
                             "%s: the victim pod's net1 is gone" % what)
            for g in VFS["ibn2"]:
                if g != vguid:
                    self.assertEqual(self.fab.pkeys(g), {DEFAULT: False}, what)

        # node 1's agent socket with node 2's config: it serves ibn1 only
        _, mpath = self.pod("m1")
        mconf = self.config("ibn2", state=self.state("ibn1"), node="ibn2")
        rc, out = self.cni("ADD", "ibn2", "cm1" + TAG, mpath, conf=mconf)
        self.assertEqual(rc, 1, out)
        self.assertIn("ibn2", out["msg"], out)
        self.assertEqual(self.records("ibn1"), [])
        for verb, conf in (("DEL", mconf),
                           ("GC", dict(mconf, **{"cni.dev/valid-attachments": []}))):
            rc, out = self.cni(verb, "ibn2", cid, path, conf=conf)
            self.assertEqual(rc, 1, "%s: %r" % (verb, out))
            self.assertIn("ibn2", out["msg"], out)
        untouched("node 2's config at node 1's agent")

        # an agent with node 1's token started as node 2, holding a copy of
        # node 2's records (a token file copied to the wrong host)
        rogue = os.path.join(self.tmp, "rogue")
        os.makedirs(os.path.join(rogue, "cni"), mode=0o700)
        for rec in self.records("ibn2"):
            shutil.copy2(os.path.join(self.state("ibn2"), "cni", rec),
                         os.path.join(rogue, "cni", rec))
        self.start_agent("rogue", "ibn2", self.tokens["ibn1"], rogue)
        try:
            sock = os.path.join(rogue, "agent.sock")
            deadline = time.time() + harness.T(20)
            while not os.path.exists(sock):
                self.assertLess(time.time(), deadline, self.agent_logs())
                time.sleep(0.1)
            rconf = self.config("ibn2", state=rogue)
            rc, out = self.cni("STATUS", "ibn2", conf=rconf)
            self.assertEqual((rc, out and out["code"]), (1, 50), out)
            _, rpath = self.pod("r2")
            rc, out = self.cni("ADD", "ibn2", "cr2" + TAG, rpath, conf=rconf)
            self.assertEqual(rc, 1, out)
            untouched("ADD through the agent with node 1's token")
            rc, out = self.cni("DEL", "ibn2", cid, path, conf=rconf)
            self.assertEqual((rc, out and out["code"]), (1, 11),
                             "DEL of node 2's pod with node 1's token: %r" % out)
            self.assertIn("token", out["msg"])
            untouched("DEL through the agent with node 1's token")
            rc, out = self.cni("GC", "ibn2", conf=dict(
                rconf, **{"cni.dev/valid-attachments": []}))
            self.assertEqual((rc, out and out["code"]), (1, 11),
                             "GC with node 1's token: %r" % out)
            untouched("GC through the agent with node 1's token")
            self.assertEqual(len(self.records("ibn2", state=rogue)), 1,
                             "the record is kept where it could not be freed")
        finally:
            self.stop_agent("rogue")

        rc, out = self.cni("DEL", "ibn2", cid, path)
        self.assertEqual(rc, 0, out)
        for ns in [n for n in self.netns if n.rsplit("-", 1)[1] in ("v2", "m1", "r2")]:
            self.drop_pod(ns)
        self.assert_clean()


if __name__ == "__main__":
    harness.main(__doc__)

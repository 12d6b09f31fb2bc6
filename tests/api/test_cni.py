#!/usr/bin/env python3
"""test_cni.py: the CNI plugin build/cni/isostack-cni run the way a runtime runs
it (issue 17, docs/cni.md): the environment (CNI_COMMAND, CNI_CONTAINERID,
CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH), the network config on stdin, real
network namespaces as pods, Debian's host-local as the IPAM delegate.

Two "nodes" are namespace-hosts h1, h2 (198.51.100.41/.42) on one bridge of this
namespace (198.51.100.40, where isostackd listens), each with its node agent
(node-agent token, --sandbox off) inside; isostackd runs on
tests/api/data/cni-eth.yaml (an Ethernet fabric). Tenants A and B have a pod on
each node. Checked: ADD, CHECK, DEL, ADD again, GC, STATUS in that order; the
Result (interface in the pod's netns, host-local's address); same-tenant pods
reach each other across nodes and cross-tenant pods do not; an unmapped
namespace is refused and nothing is made; the netns vanishes before DEL; the
controller stopped and restarted under an ADD; a join of an existing
allocation. After each: no attachment record, no live attachment allocation,
nothing for GC to free, the pods' veths gone and the fabric verifier ok. Root
only (suite sandbox); skips saying why otherwise.
Run: python3 tests/api/test_cni.py PATH/TO/isostackd PATH/TO/isoctl
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import sh  # noqa: E402
from harness import ApiTestCase, Daemon, T, create_tenant  # noqa: E402
from test_agent_daemon import agent_binary  # noqa: E402

ROOT = os.environ.get("ISO_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
NODES = ("cn-n01", "cn-n02")
UNDERLAY = {"cn-n01": "198.51.100.41", "cn-n02": "198.51.100.42"}
RANGE = {"cn-n01": ("10.77.1.10", "10.77.1.250"), "cn-n02": ("10.77.2.10", "10.77.2.250")}
CNI_PATH = "/usr/lib/cni"
TAG = "%05d" % (os.getpid() % 100000)


def plugin_binary():
    here = os.path.dirname(os.path.abspath(agent_binary()))
    return os.path.join(here, "cni", "isostack-cni")


def skip_reason():
    if os.geteuid() != 0:
        return "not root: network namespaces need root"
    for tool in ("ip",):
        if not shutil.which(tool):
            return "no %s on PATH" % tool
    if not os.access(os.path.join(CNI_PATH, "host-local"), os.X_OK):
        return "no host-local in %s (containernetworking-plugins, scripts/deps.sh)" % CNI_PATH
    return None


class CniDaemon(Daemon):
    """isostackd on 0.0.0.0 at one port for its whole life (the agents in
    the namespace-hosts reach it at 198.51.100.40 across restarts)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.fixed = harness.free_port()

    def command(self, port):
        return [self.binary, "--config", self.config, "--state-dir", self.state_dir,
                "--listen", "0.0.0.0:%d" % self.fixed, "--allow-remote-http"] + self.extra_args

    def start(self, timeout=None):
        real = harness.free_port
        harness.free_port = lambda: self.fixed
        try:
            return super().start(timeout)
        finally:
            harness.free_port = real


@unittest.skipIf(skip_reason(), skip_reason() or "")
class TestCni(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="test_cni.")
        cls.netns = []
        cls.links = []
        cls.agents = {}
        cls.d = CniDaemon("cni-eth.yaml", extra_args=("--agent-lease-s", "5",
                                                      "--agent-grace-s", "600",
                                                      "--provisioning-timeout-s", "60"),
                          agents=True)
        try:
            cls._hosts()
            cls.d.start()
            cls.admin = cls.d.client()
            cls.tenant_a = create_tenant(cls, cls.admin)["name"]
            cls.tenant_b = create_tenant(cls, cls.admin)["name"]
            for node in NODES:
                cls._agent(node)
            cls._wait_agents()
        except BaseException:
            cls._teardown()
            raise

    @classmethod
    def assertStatus(cls, r, status, msg=""):
        if r.status != status:
            raise AssertionError("%s: expected %d, got %r" % (msg, status, r))

    @classmethod
    def _hosts(cls):
        cls.br = "cnu" + TAG
        sh("ip", "link", "add", cls.br, "type", "bridge")
        cls.links.append(cls.br)
        sh("ip", "addr", "add", "198.51.100.40/24", "dev", cls.br)
        sh("ip", "link", "set", cls.br, "up")
        cls.host_ns = {}
        for i, node in enumerate(NODES):
            ns = "cni%s-h%d" % (TAG, i + 1)
            sh("ip", "netns", "add", ns)
            cls.netns.append(ns)
            cls.host_ns[node] = ns
            peer = "cnh%d%s" % (i + 1, TAG)
            sh("ip", "link", "add", peer, "type", "veth", "peer", "name", "ul0", "netns", ns)
            cls.links.append(peer)
            sh("ip", "link", "set", peer, "master", cls.br, "up")
            sh("ip", "-n", ns, "addr", "add", UNDERLAY[node] + "/24", "dev", "ul0")
            sh("ip", "-n", ns, "link", "set", "ul0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    @classmethod
    def _agent(cls, node):
        r = cls.admin.post("/v1/tokens", {"role": "node-agent", "node": node})
        cls.assertStatus(r, 201, "node-agent token")
        tok = os.path.join(cls.tmp, node + ".token")
        with open(tok, "w") as f:
            f.write(r.body["token"] + "\n")
        state = os.path.join(cls.tmp, "agent-" + node)
        log = open(os.path.join(cls.tmp, "agent-%s.log" % node), "ab")
        argv = ["ip", "netns", "exec", cls.host_ns[node], agent_binary(), "--controller",
                "http://198.51.100.40:%d" % cls.d.fixed, "--token-file", tok, "--gpu-driver",
                "sim", "--state-dir", state, "--heartbeat-s", "2", "--sandbox", "off",
                "--node", node]
        if os.environ.get("ISO_CNI_GDB"):  # debugging aid: a backtrace in the log
            argv = argv[:4] + ["gdb", "-q", "-batch", "-ex", "run", "-ex", "thread apply all bt",
                               "--args"] + argv[4:]
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
        cls.agents[node] = (proc, state, log)

    @classmethod
    def _wait_agents(cls):
        deadline = time.time() + T(30)
        while time.time() < deadline:
            # STATUS answers once each agent had its first desired state
            if all(cls.cni(cls, "STATUS", node, conf=cls.config(cls, node))[0] == 0
                   for node in NODES):
                return
            time.sleep(0.1)
        raise AssertionError("the agents did not come up: %s" % cls.agent_logs())

    @classmethod
    def agent_logs(cls):
        out = []
        for node, (_, _, log) in cls.agents.items():
            log.flush()
            with open(os.path.join(cls.tmp, "agent-%s.log" % node), errors="replace") as f:
                out.append("--- %s\n%s" % (node, f.read()[-3000:]))
        return "\n".join(out)

    @classmethod
    def _teardown(cls):
        for proc, _, log in cls.agents.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=T(20))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.close()
        cls.d.cleanup()
        for ns in reversed(cls.netns):
            sh("ip", "netns", "del", ns, check=False)
        for l in cls.links:
            sh("ip", "link", "del", l, check=False)
        if not os.environ.get("ISO_TEST_KEEP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        cls._teardown()

    # ---- the runtime's side ----

    def config(self, node, **extra):
        """examples/cni/ethernet.conflist's plugin as a runtime hands it over
        (cniVersion and name of the list put in), for this node and run."""
        lo, hi = RANGE[node]
        with open(os.path.join(ROOT, "examples", "cni", "ethernet.conflist")) as f:
            lst = json.load(f)
        c = dict(lst["plugins"][0], cniVersion=lst["cniVersion"], name=lst["name"])
        c["agentStateDir"] = self.agents[node][1]
        c["tenants"] = {"team-a": self.tenant_a, "team-b": self.tenant_b}
        c["ipam"] = dict(c["ipam"], dataDir=os.path.join(self.tmp, "ipam-" + node),
                         ranges=[[{"subnet": "10.77.0.0/16", "rangeStart": lo, "rangeEnd": hi}]])
        c.update(extra)
        return c

    def cni(self, command, node, cid=None, netns=None, ifname="eth0", ns="team-a",
            conf=None, args=None, env=None):
        e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command,
             "CNI_PATH": CNI_PATH}
        if cid is not None:
            e["CNI_CONTAINERID"] = cid
            e["CNI_IFNAME"] = ifname
        if netns is not None:
            e["CNI_NETNS"] = netns
        if args is None:
            args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=pod-%s" % (ns, cid)
        e["CNI_ARGS"] = args
        e.update(env or {})
        stdin = json.dumps(conf if conf is not None else self.config(node))
        r = subprocess.run([plugin_binary()], input=stdin, capture_output=True, text=True,
                           env=e, timeout=T(60))
        out = json.loads(r.stdout) if r.stdout.strip() else None
        return r.returncode, out

    def pod(self, name):
        ns = "cni%s-%s" % (TAG, name)
        sh("ip", "netns", "add", ns)
        self.netns.append(ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns, "/run/netns/" + ns

    def add(self, node, cid, netns, **kw):
        rc, out = self.cni("ADD", node, cid, netns, **kw)
        self.assertEqual(rc, 0, "ADD %s on %s: %r\n%s" % (cid, node, out, self.agent_logs()))
        return out

    SERVER = ("import socket,sys\n"
              "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
              "s.bind(('0.0.0.0', 7777)); s.listen(8); s.settimeout(%d)\n"
              "try:\n"
              "    while True:\n"
              "        c, _ = s.accept(); c.sendall(b'hello'); c.close()\n"
              "except socket.timeout:\n"
              "    pass\n")
    CLIENT = ("import socket,sys\n"
              "try:\n"
              "    c = socket.create_connection((sys.argv[1], 7777), timeout=1)\n"
              "    sys.exit(0 if c.recv(5) == b'hello' else 1)\n"
              "except OSError:\n"
              "    sys.exit(1)\n")

    def reach(self, src_ns, dst_ns, ip, want):
        """A TCP connection from src_ns to ip (a server in dst_ns) within a
        few seconds (want True), or none in 2 s (want False)."""
        srv = subprocess.Popen(["ip", "netns", "exec", dst_ns, sys.executable, "-c",
                                self.SERVER % int(T(15))])
        try:
            time.sleep(0.3)
            deadline = time.time() + (T(10) if want else 2)
            while time.time() < deadline:
                r = subprocess.run(["ip", "netns", "exec", src_ns, sys.executable, "-c",
                                    self.CLIENT, ip], capture_output=True)
                if r.returncode == 0:
                    return True
                time.sleep(0.2)
            return False
        finally:
            srv.kill()
            srv.wait()

    def records(self, node):
        d = os.path.join(self.agents[node][1], "cni")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def live(self, tenant):
        items = self.admin.list_all("/v1/allocations?tenant=" + tenant)
        return [a for a in items if a["state"] not in ("released", "failed")]

    def assertNothingLeft(self):
        for node in NODES:
            self.assertEqual(self.records(node), [], "attachment records on %s" % node)
            rc, out = self.cni("GC", node, conf=self.config(
                node, **{"cni.dev/valid-attachments": []}))
            self.assertEqual(rc, 0, "GC: %r" % out)
            veths = sh("ip", "-n", self.host_ns[node], "-o", "link", "show").stdout
            self.assertIsNone(re.search(r"isov[0-9a-f]{8}", veths),
                              "a pod veth is left on %s: %s" % (node, veths))
        for t in (self.tenant_a, self.tenant_b):
            self.assertEqual(self.live(t), [], "live allocations of %s" % t)
        # the verifier reads the agents' reports, which follow the release
        deadline = time.time() + T(15)
        while True:
            r = self.admin.get("/v1/fabric/verify")
            self.assertStatus(r, 200, "verify")
            if r.body["ok"] or time.time() > deadline:
                break
            time.sleep(0.3)
        self.assertTrue(r.body["ok"], "the verifier: %r" % r.body)

    # ---- the tests ----

    def test_1_lifecycle_and_isolation(self):
        pods = {}
        for name, node, ns in (("a1", NODES[0], "team-a"), ("a2", NODES[1], "team-a"),
                               ("b1", NODES[0], "team-b"), ("b2", NODES[1], "team-b")):
            pns, path = self.pod(name)
            res = self.add(node, "ctr" + name, path, ns=ns)
            self.assertEqual(res["cniVersion"], "1.1.0")
            self.assertEqual(res["interfaces"][0]["name"], "eth0")
            self.assertEqual(res["interfaces"][0]["sandbox"], path)
            addr = res["ips"][0]["address"]
            self.assertTrue(addr.startswith("10.77.%d." % (NODES.index(node) + 1)), res)
            self.assertTrue(addr.endswith("/16"), res)
            shown = sh("ip", "-n", pns, "-o", "-4", "addr", "show", "eth0").stdout
            self.assertIn(addr, shown)
            mac = sh("ip", "-n", pns, "-o", "link", "show", "eth0").stdout
            self.assertIn(res["interfaces"][0]["mac"], mac)
            pods[name] = (pns, path, node, ns, addr.split("/")[0], res)
        # each attachment is an allocation member of its tenant, pinned to its node
        a_allocs = self.live(self.tenant_a)
        self.assertEqual(len(a_allocs), 2)
        self.assertEqual(sorted(a["nodes"][0]["node"] for a in a_allocs), list(NODES))
        self.assertTrue(all(a["idempotency_key"].startswith("cni:") for a in a_allocs))
        # same tenant across nodes: reach; other tenant: never
        self.assertTrue(self.reach(pods["a1"][0], pods["a2"][0], pods["a2"][4], True),
                        self.agent_logs())
        self.assertTrue(self.reach(pods["b2"][0], pods["b1"][0], pods["b1"][4], True))
        self.assertFalse(self.reach(pods["b1"][0], pods["a2"][0], pods["a2"][4], False),
                         "cross-tenant")
        self.assertFalse(self.reach(pods["b1"][0], pods["a1"][0], pods["a1"][4], False),
                         "cross-tenant, one node")
        # CHECK against the agent's state, with the Result as prevResult
        for name, (pns, path, node, ns, ip, res) in pods.items():
            rc, out = self.cni("CHECK", node, "ctr" + name, path, ns=ns,
                               conf=self.config(node, prevResult=res))
            self.assertEqual(rc, 0, "CHECK %s: %r" % (name, out))
        # CHECK of a pod whose interface went away fails, naming it
        pns, path, node, ns, ip, res = pods["a1"]
        sh("ip", "-n", pns, "link", "del", "eth0")
        rc, out = self.cni("CHECK", node, "ctra1", path, conf=self.config(node, prevResult=res))
        self.assertEqual(rc, 1)
        self.assertIn(out["code"], (11, 102), out)
        # DEL, and DEL again (idempotent)
        for name, (pns, path, node, ns, ip, res) in pods.items():
            for _ in range(2):
                rc, out = self.cni("DEL", node, "ctr" + name, path, ns=ns)
                self.assertEqual(rc, 0, "DEL %s: %r" % (name, out))
        self.assertNothingLeft()
        # ADD again: a new lease of the same (container, ifname)
        pns, path, node, ns, ip, res = pods["a2"]
        res2 = self.add(node, "ctra2", path)
        self.assertEqual(len(self.live(self.tenant_a)), 1)
        # GC with it listed keeps it; GC without frees it
        conf = self.config(node, **{"cni.dev/valid-attachments": [
            {"containerID": "ctra2", "ifname": "eth0"}]})
        self.assertEqual(self.cni("GC", node, conf=conf)[0], 0)
        self.assertEqual(len(self.records(node)), 1)
        rc, out = self.cni("GC", node, conf=self.config(node, **{"cni.dev/valid-attachments": []}))
        self.assertEqual(rc, 0, out)
        self.assertEqual(self.records(node), [])
        self.assertEqual(self.live(self.tenant_a), [])
        self.assertIn(res2["ips"][0]["address"].split("/")[0].rsplit(".", 1)[0], "10.77.2")
        # STATUS: ready while the agent and the controller answer
        self.assertEqual(self.cni("STATUS", node)[0], 0)
        self.cni("DEL", node, "ctra2", path)  # host-local's address back
        self.assertNothingLeft()

    def test_2_unmapped_namespace_refused(self):
        pns, path = self.pod("u1")
        rc, out = self.cni("ADD", NODES[0], "ctru1", path, ns="kube-system")
        self.assertEqual(rc, 1)
        self.assertEqual(out["code"], 101, out)
        self.assertIn("kube-system", out["msg"])
        self.assertIn("K8S_POD_NAMESPACE", out["msg"])
        self.assertEqual(len(sh("ip", "-n", pns, "-o", "link").stdout.splitlines()), 1,
                         "only lo")
        self.assertNothingLeft()

    def test_3_netns_gone_before_del(self):
        pns, path = self.pod("g1")
        self.add(NODES[0], "ctrg1", path)
        sh("ip", "netns", "del", pns)
        self.netns.remove(pns)
        rc, out = self.cni("DEL", NODES[0], "ctrg1", path)
        self.assertEqual(rc, 0, out)
        rc, out = self.cni("DEL", NODES[0], "ctrg1", None)  # no CNI_NETNS at all
        self.assertEqual(rc, 0, out)
        self.assertNothingLeft()

    def test_4_controller_restarted_mid_add(self):
        pns, path = self.pod("r1")
        os.kill(self.d.proc.pid, signal.SIGSTOP)
        e = dict(os.environ)
        conf_file = os.path.join(self.tmp, "r1.conf")
        with open(conf_file, "w") as f:
            json.dump(self.config(NODES[0]), f)
        with open(conf_file) as stdin:
            proc = subprocess.Popen(
                [plugin_binary()], stdin=stdin, stdout=subprocess.PIPE, text=True,
                env={"PATH": e.get("PATH", "/bin"), "CNI_COMMAND": "ADD",
                     "CNI_CONTAINERID": "ctrr1", "CNI_IFNAME": "eth0", "CNI_NETNS": path,
                     "CNI_PATH": CNI_PATH,
                     "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a"})
        time.sleep(1)  # the agent's create waits on the stopped controller
        os.kill(self.d.proc.pid, signal.SIGCONT)
        self.d.kill()
        self.d.start()
        out, _ = proc.communicate(timeout=T(60))
        res = json.loads(out)
        if proc.returncode != 0:
            self.assertEqual(res["code"], 11, "a retry can succeed: %r" % res)
            res = self.add(NODES[0], "ctrr1", path)
        # one allocation for the key, whatever the retries
        self.assertEqual(len(self.live(self.tenant_a)), 1)
        self.assertEqual(self.cni("CHECK", NODES[0], "ctrr1", path,
                                  conf=self.config(NODES[0], prevResult=res))[0], 0)
        self.assertEqual(self.cni("DEL", NODES[0], "ctrr1", path)[0], 0)
        self.assertNothingLeft()

    def test_5_join_existing_allocation(self):
        # a cluster-admin's allocation of tenant B with a member on node 1
        r = self.admin.post("/v1/allocations", {"tenant": self.tenant_b, "memory_mib": 64,
                                                "nodes": [NODES[0]]})
        self.assertStatus(r, 201)
        alloc = r.body["id"]
        pns, path = self.pod("j1")
        deadline = time.time() + T(10)
        while True:
            rc, out = self.cni("ADD", NODES[0], "ctrj1", path, ns="team-b",
                               args="IgnoreUnknown=1;K8S_POD_NAMESPACE=team-b;ISOSTACK_ALLOCATION=" + alloc)
            if rc == 0 or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(rc, 0, out)
        self.assertEqual(len(self.live(self.tenant_b)), 1, "joined, not created")
        # another tenant's pod may not join it (said like a missing one)
        pns2, path2 = self.pod("j2")
        rc, out = self.cni("ADD", NODES[0], "ctrj2", path2, ns="team-a",
                           args="IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;ISOSTACK_ALLOCATION=" + alloc)
        self.assertEqual(rc, 1)
        self.assertEqual(out["code"], 100, out)
        self.assertIn("has no member of tenant", out["msg"])
        self.assertEqual(self.cni("DEL", NODES[0], "ctrj2", path2)[0], 0)
        self.assertEqual(self.cni("DEL", NODES[0], "ctrj1", path)[0], 0)
        self.assertEqual(len(self.live(self.tenant_b)), 1, "DEL of a join releases nothing")
        self.assertStatus(self.admin.delete("/v1/allocations/" + alloc), 200)
        self.assertNothingLeft()

    def test_7_concurrent_adds(self):
        """70 pods ADD at once on one node (more than isostackd's 64 connections
        from one client address, which the agent's creates share): all succeed,
        each with its own address and allocation; then all DEL at once."""
        n = 70
        pods = [self.pod("c%d" % i) for i in range(n)]
        out = [None] * n

        def run(i, cmd):
            out[i] = self.cni(cmd, NODES[0], "ctrc%d" % i, pods[i][1])

        for cmd in ("ADD", "DEL"):
            threads = [threading.Thread(target=run, args=(i, cmd)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            bad = [o for o in out if o[0] != 0]
            self.assertEqual(bad, [], "%s: %d of %d failed" % (cmd, len(bad), n))
            if cmd == "ADD":
                self.assertEqual(len({o[1]["ips"][0]["address"] for o in out}), n)
                self.assertEqual(len(self.live(self.tenant_a)), n)
        self.assertNothingLeft()

    def host_links(self, node):
        return sh("ip", "-n", self.host_ns[node], "-o", "-d", "link", "show").stdout

    def guard_pairs(self, node):
        r = sh("ip", "netns", "exec", self.host_ns[node], "nft", "list", "set", "inet",
               "isostack", "allowed", check=False)
        return r.stdout if r.returncode == 0 else ""

    def test_8_guard_in_place_when_add_returns(self):
        """The pod's veth, its tenant's tunnel and the guard's pair for the
        tenant's other node are in the kernel when ADD returns, before any
        later tick: also when the tenant's bridge lingered after its last pod
        on the node left (the bridge alone: no port, no tunnel, no guard pair;
        gone after its hold)."""
        node, other = NODES
        pns2, path2 = self.pod("g2")
        ip2 = self.add(other, "ctrg2", path2)["ips"][0]["address"].split("/")[0]

        def pair(vni):  # as nft lists the set (the VNI in hex: @th,96,24)
            return "%s . 0x%x" % (UNDERLAY[other], int(vni))

        def plugged(cid, path):
            res = self.add(node, cid, path)
            links = self.host_links(node)  # at once: no tick in between
            alloc = [a["id"] for a in self.live(self.tenant_a)
                     if a["nodes"][0]["node"] == node]
            self.assertEqual(len(alloc), 1, alloc)
            veth = [l for l in links.splitlines() if "alias iso-%s-0" % alloc[0] in l]
            self.assertEqual(len(veth), 1, links)
            m = re.search(r"master (isobr(\d+))", veth[0])
            self.assertIsNotNone(m, veth[0])
            vni = m.group(2)
            self.assertIn("isovx%s" % vni, links, "no tunnel when ADD returned")
            self.assertIn(pair(vni), self.guard_pairs(node),
                          "no guard pair when ADD returned")
            return res, vni

        pns1, path1 = self.pod("g1")
        _, vni = plugged("ctrg1", path1)
        self.assertTrue(self.reach(pns1, pns2, ip2, True), self.agent_logs())
        self.assertEqual(self.cni("DEL", node, "ctrg1", path1)[0], 0)
        # the last pod of the tenant on the node gone: its tunnel and guard
        # pair go with the next tick, its bridge alone stays a while
        deadline = time.time() + T(10)
        while time.time() < deadline and ("isovx%s" % vni in self.host_links(node) or
                                          pair(vni) in self.guard_pairs(node)):
            time.sleep(0.05)
        self.assertNotIn(pair(vni), self.guard_pairs(node))
        links = self.host_links(node)
        self.assertNotIn("isovx%s" % vni, links)
        self.assertIn("isobr%s" % vni, links, "the bridge did not linger")
        self.assertNotIn("master isobr%s" % vni, links, "a port on the lingering bridge")
        # a pod of the tenant again: on the same bridge, tunnel and guard made again
        pns3, path3 = self.pod("g3")
        _, vni3 = plugged("ctrg3", path3)
        self.assertEqual(vni3, vni)
        self.assertTrue(self.reach(pns3, pns2, ip2, True), self.agent_logs())
        for n, cid, path in ((node, "ctrg3", path3), (other, "ctrg2", path2)):
            self.assertEqual(self.cni("DEL", n, cid, path)[0], 0)
        self.assertNothingLeft()
        deadline = time.time() + T(15)
        while "isobr%s" % vni in self.host_links(node) and time.time() < deadline:
            time.sleep(0.2)
        self.assertNotIn("isobr%s" % vni, self.host_links(node), "the bridge stayed")

    def test_6_status_without_agent_or_controller(self):
        conf = self.config(NODES[0], agentStateDir=os.path.join(self.tmp, "nowhere"))
        rc, out = self.cni("STATUS", NODES[0], conf=conf)
        self.assertEqual((rc, out["code"]), (1, 50), out)
        self.assertIn("cannot reach the agent", out["msg"])
        os.kill(self.d.proc.pid, signal.SIGSTOP)
        try:
            rc, out = self.cni("STATUS", NODES[0])
        finally:
            os.kill(self.d.proc.pid, signal.SIGCONT)
        self.assertEqual((rc, out["code"]), (1, 50), out)
        self.assertIn("controller", out["msg"])
        self.assertEqual(self.cni("STATUS", NODES[0])[0], 0)


if __name__ == "__main__":
    harness.main(__doc__)

#!/usr/bin/env python3
"""test_cni_cxi.py: the CNI plugin in Slingshot mode (issue 17, docs/cni.md
"Slingshot mode"): build/cni/isostack-cni run the way a runtime runs it, a
real isostack-agent (node-agent token, --sandbox off) on a Slingshot node
over the project's fake libcxi (tests/fakes/fake_cxi.c, its state in a file
every process of the test shares, like one NIC), isostackd on
tests/api/data/slingshot.yaml. A pod is a network namespace; its identity is
CNI_ARGS' ISOSTACK_UID/ISOSTACK_GID.

Checked: ADD admits the pod's uid/gid to its member's CXI service (the
agent's cxi_admit path): a process of that uid uses its tenant's VNI and not
the other tenant's, another uid cannot use the service; two tenants' pods;
CHECK verifies the service (and fails once it is gone); DEL and GC leave no
service and no live allocation; the verifier clean after; a pod of another
tenant given the same uid is refused (it would reach both VNIs); bad or
missing ISOSTACK_UID/GID and ipam in this mode refused naming the field,
with nothing made. Root only (the agent's socket answers root; processes of
other uids); skips saying why otherwise.
Run: python3 tests/api/test_cni_cxi.py PATH/TO/isostackd PATH/TO/isoctl
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T, create_tenant  # noqa: E402
from test_agent_cxi import HELPER, cxi_services, fake_cxi  # noqa: E402
from test_agent_daemon import Agent, agent_binary  # noqa: E402

NODE = "ss-n01"
UID_A, UID_B, UID_OTHER = 5101, 6101, 5102
TAG = "%05d" % (os.getpid() % 100000)


def plugin_binary():
    return os.path.join(os.path.dirname(os.path.abspath(agent_binary())), "cni",
                        "isostack-cni")


def sh(*argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("%s: %s" % (" ".join(argv), r.stderr.strip()))
    return r


class TestCniCxi(ApiTestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root: the agent's socket answers root only")
        if not shutil.which("ip"):
            self.skipTest("no ip on PATH")
        self.tmp = tempfile.mkdtemp(prefix="test_cni_cxi.")
        os.chmod(self.tmp, 0o755)  # the NIC's state is every user's
        self.cxi_state = os.path.join(self.tmp, "cxi.json")
        self.saved = os.environ.get("ISOSTACK_FAKE_CXI_STATE")
        os.environ["ISOSTACK_FAKE_CXI_STATE"] = self.cxi_state
        self.netns = []
        self.d = Daemon("slingshot.yaml", extra_args=("--agent-lease-s", "5", "--agent-grace-s",
                                                      "600", "--provisioning-timeout-s", "60"),
                        agents=True)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()
        self.t1 = create_tenant(self, self.admin)
        self.t2 = create_tenant(self, self.admin)
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": NODE})
        self.assertStatus(r, 201, "node-agent token")
        tok = os.path.join(self.tmp, "agent.token")
        with open(tok, "w") as f:
            f.write(r.body["token"] + "\n")
        self.state_dir = os.path.join(self.tmp, "state")
        self.agent = Agent(self.d.url(), tok, self.state_dir, [NODE])
        self.agent.argv += ["--cxi-library", fake_cxi()]
        self.agent.start()
        deadline = time.time() + T(30)
        while self.cni("STATUS")[0] != 0:
            self.assertLess(time.time(), deadline, "the agent did not come up" + self.log())
            time.sleep(0.1)

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
            for ns in self.netns:
                sh("ip", "netns", "del", ns, check=False)
            if self.saved is None:
                os.environ.pop("ISOSTACK_FAKE_CXI_STATE", None)
            else:
                os.environ["ISOSTACK_FAKE_CXI_STATE"] = self.saved
            shutil.rmtree(self.tmp, ignore_errors=True)

    def log(self):
        return "; agent log:\n" + self.agent.text()[-3000:]

    # ---- the runtime's side ----

    def config(self, **extra):
        """examples/cni/slingshot.conflist's isostack-cni entry (chained after
        the bridge plugin there) as a runtime hands it over, at 1.1.0 for GC."""
        root = os.environ.get("ISO_SOURCE_ROOT",
                              os.path.join(os.path.dirname(__file__), "..", ".."))
        with open(os.path.join(root, "examples", "cni", "slingshot.conflist")) as f:
            lst = json.load(f)
        (c,) = [p for p in lst["plugins"] if p["type"] == "isostack-cni"]
        c = dict(c, cniVersion="1.1.0", name=lst["name"], agentStateDir=self.state_dir,
                 tenants={"team-a": self.t1["name"], "team-b": self.t2["name"]})
        c.update(extra)
        return c

    def cni(self, command, cid=None, netns=None, ns="team-a", uid=None, gid=None, args=None,
            conf=None):
        e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command,
             "CNI_PATH": "/usr/lib/cni"}
        if cid is not None:
            e.update(CNI_CONTAINERID=cid, CNI_IFNAME="cxi")
        if netns is not None:
            e["CNI_NETNS"] = netns
        if args is None:
            args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=pod-%s" % (ns, cid)
            if uid is not None:
                args += ";ISOSTACK_UID=%s" % uid
            if gid is not None:
                args += ";ISOSTACK_GID=%s" % gid
        e["CNI_ARGS"] = args
        r = subprocess.run([plugin_binary()], input=json.dumps(conf or self.config()),
                           capture_output=True, text=True, env=e, timeout=T(60))
        return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None)

    def pod(self, name):
        ns = "cxp%s-%s" % (TAG, name)
        sh("ip", "netns", "add", ns)
        self.netns.append(ns)
        return "/run/netns/" + ns

    def add(self, cid, netns, **kw):
        rc, out = self.cni("ADD", cid, netns, **kw)
        self.assertEqual(rc, 0, "ADD %s: %r%s" % (cid, out, self.log()))
        return out

    # ---- the NIC and the controller ----

    def services(self):
        """The fake's services but the default one: (svc_id, vnis, uid, gid)."""
        return cxi_services(self.cxi_state)

    def use(self, uid, svc, *vnis):
        """HELPER as a process of uid: [lni rc, cp rc per VNI]."""
        p = subprocess.run([sys.executable, "-c", HELPER, fake_cxi(), "use", str(svc)] +
                           [str(v) for v in vnis], capture_output=True, text=True,
                           env=dict(os.environ, AS_UID=str(uid),
                                    # an ASan build's fake libcxi in a python without
                                    # the ASan runtime
                                    ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0"),
                           timeout=T(30))
        self.assertEqual(p.returncode, 0, p.stderr)
        return [None if x == "None" else int(x) for x in p.stdout.split()]

    def vni(self, tenant):
        return self.admin.get("/v1/tenants/" + tenant["name"]).body["vni"]

    def live(self):
        out = []
        for t in (self.t1, self.t2):
            items = self.admin.list_all("/v1/allocations?tenant=" + t["name"])
            out += [a["id"] for a in items if a["state"] not in ("released", "failed")]
        return out

    def records(self):
        d = os.path.join(self.state_dir, "cni")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def verify_clean(self):
        deadline = time.time() + T(20)
        while True:
            r = self.admin.get("/v1/fabric/verify")
            self.assertStatus(r, 200, "verify")
            if r.body["ok"] and not r.body["violations"]:
                return
            self.assertLess(time.time(), deadline, "verifier: %r%s" % (r.body, self.log()))
            time.sleep(0.2)

    def wait_services(self, want):
        deadline = time.time() + T(20)
        while sorted((v, u, g) for _, v, u, g in self.services()) != sorted(want):
            self.assertLess(time.time(), deadline,
                            "services %r, want %r%s" % (self.services(), want, self.log()))
            time.sleep(0.1)

    def assertNothingLeft(self):
        self.assertEqual(self.records(), [], "attachment records")
        deadline = time.time() + T(20)
        while self.live():
            self.assertLess(time.time(), deadline, "live allocations %r" % self.live())
            time.sleep(0.2)
        self.wait_services([])
        self.verify_clean()

    # ---- the tests ----

    def test_1_two_tenants_add_check_del_gc(self):
        va, vb = self.vni(self.t1), self.vni(self.t2)
        self.assertNotEqual(va, vb)
        pa, pb = self.pod("a"), self.pod("b")
        res = self.add("ca", pa, ns="team-a", uid=UID_A, gid=UID_A)
        self.assertEqual(res, {"cniVersion": "1.1.0", "interfaces": [], "ips": []})
        # chained: the previous plugin's Result is passed on
        prev = {"cniVersion": "1.1.0", "interfaces": [{"name": "eth0", "sandbox": pb}],
                "ips": [{"address": "10.9.0.5/24", "interface": 0}]}
        res = self.add("cb", pb, ns="team-b", uid=UID_B, gid=UID_B,
                       conf=self.config(prevResult=prev))
        self.assertEqual(res, prev)
        self.wait_services([([va], UID_A, UID_A), ([vb], UID_B, UID_B)])
        svc = {u: s for s, _, u, _ in self.services()}
        # a pod's process uses its tenant's VNI, not the other's
        self.assertEqual(self.use(UID_A, svc[UID_A], va, vb)[:2], [0, 0])
        self.assertNotEqual(self.use(UID_A, svc[UID_A], va, vb)[2], 0)
        self.assertEqual(self.use(UID_B, svc[UID_B], vb)[:2], [0, 0])
        self.assertNotEqual(self.use(UID_B, svc[UID_A])[0], 0, "B's uid on A's service")
        self.assertNotEqual(self.use(UID_OTHER, svc[UID_A])[0], 0, "another uid")
        # a retried ADD: the same service, one allocation each
        self.add("ca", pa, ns="team-a", uid=UID_A, gid=UID_A)
        self.assertEqual(len(self.live()), 2)
        self.wait_services([([va], UID_A, UID_A), ([vb], UID_B, UID_B)])
        # CHECK as a runtime sends it: the ADD's Result as prevResult
        results = {"ca": {"cniVersion": "1.1.0", "interfaces": [], "ips": []}, "cb": prev}
        for cid, p in (("ca", pa), ("cb", pb)):
            rc, out = self.cni("CHECK", cid, p, conf=self.config(prevResult=results[cid]))
            self.assertEqual(rc, 0, "CHECK %s: %r" % (cid, out))
        self.verify_clean()
        # DEL: the member released, its service destroyed by the agent's pass
        rc, out = self.cni("DEL", "ca", pa)
        self.assertEqual(rc, 0, out)
        self.wait_services([([vb], UID_B, UID_B)])
        rc, out = self.cni("CHECK", "ca", pa, conf=self.config(prevResult=results["ca"]))
        self.assertEqual(rc, 1)
        self.assertEqual(out["code"], 102, out)
        rc, out = self.cni("DEL", "ca", pa)  # idempotent
        self.assertEqual(rc, 0, out)
        # GC: B's kept while listed, freed when not
        rc, out = self.cni("GC", conf=self.config(**{"cni.dev/valid-attachments": [
            {"containerID": "cb", "ifname": "cxi"}]}))
        self.assertEqual(rc, 0, out)
        self.wait_services([([vb], UID_B, UID_B)])
        rc, out = self.cni("GC", conf=self.config(**{"cni.dev/valid-attachments": []}))
        self.assertEqual(rc, 0, out)
        self.assertNothingLeft()

    def test_2_identity_of_another_tenant_refused(self):
        pa, pb = self.pod("a"), self.pod("b")
        self.add("ca", pa, ns="team-a", uid=UID_A, gid=UID_A)
        # B's pod given A's uid would reach both VNIs through that identity
        rc, out = self.cni("ADD", "cb", pb, ns="team-b", uid=UID_A, gid=UID_B)
        self.assertEqual(rc, 1, out)
        self.assertEqual(out["code"], 100, out)
        self.assertIn("uid", out["msg"])
        self.assertNotIn(self.t1["name"], out["msg"], "never whose")
        self.wait_services([([self.vni(self.t1)], UID_A, UID_A)])
        for cid, p in (("cb", pb), ("ca", pa)):  # the runtime DELs a failed ADD
            rc, out = self.cni("DEL", cid, p)
            self.assertEqual(rc, 0, out)
        self.assertNothingLeft()

    def test_3_bad_identity_named(self):
        p = self.pod("x")
        cases = [
            ({}, "ISOSTACK_UID"),
            ({"uid": UID_A}, "ISOSTACK_GID"),
            ({"gid": UID_A}, "ISOSTACK_UID"),
            ({"uid": 0, "gid": UID_A}, "ISOSTACK_UID"),
            ({"uid": UID_A, "gid": 0}, "ISOSTACK_GID"),
            ({"uid": "abc", "gid": UID_A}, "ISOSTACK_UID"),
            ({"uid": "-5", "gid": UID_A}, "ISOSTACK_UID"),
            ({"uid": UID_A, "gid": "4294967295"}, "ISOSTACK_GID"),
            ({"uid": "05101", "gid": UID_A}, "ISOSTACK_UID"),
        ]
        for kw, field in cases:
            rc, out = self.cni("ADD", "cx", p, **kw)
            self.assertEqual((rc, out["code"]), (1, 4), "%r: %r" % (kw, out))
            self.assertIn(field, out["msg"], "%r: %r" % (kw, out))
        rc, out = self.cni("ADD", "cx", p, uid=UID_A, gid=UID_A,
                           conf=self.config(ipam={"type": "host-local"}))
        self.assertEqual((rc, out["code"]), (1, 7), out)
        self.assertIn("ipam", out["msg"])
        self.assertEqual(self.records(), [])
        self.assertEqual(self.live(), [])
        self.assertEqual(self.services(), [])


if __name__ == "__main__":
    harness.main()

#!/usr/bin/env python3
"""test_agent_cxi.py: a real isostack-agent on a Slingshot node (issue 17;
docs/agent.md "CXI services") against isostackd with the provisioning gate,
over the project's fake libcxi.so.1 (tests/fakes/fake_cxi.c, its state in a
file that every process of the test shares, like one NIC). The agent loads
the library (--cxi-library), keeps the NIC's services in step with the
desired members every tick and reports them; an identity is admitted to a
member's service over the agent's socket (the request the Slurm and CNI
plugins send): the service appears with the tenant's VNI and that uid/gid,
a process of another uid cannot use the VNI (the fake's rules, as the
driver's), the refusals name their field, the verifier is clean, a restarted
agent adopts the service a running process holds, planted drift is reported
by the verifier and removed by the next tick, and a release removes the
service. Also: a node whose library is missing keeps the allocation
provisioning with the reason.

Needs root (the socket answers root only; processes of other uids). Run:
python3 tests/api/test_agent_cxi.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T, create_alloc, create_tenant  # noqa: E402
from test_agent_daemon import Agent  # noqa: E402

NODE = "ss-n01"  # tests/api/data/slingshot.yaml; first-fit places here first
UID_A, UID_B, UID_OTHER, UID_DRIFT = 5001, 6001, 5002, 7777

# What a process does with the fake NIC, as a separate process of its own
# uid: "use SVC VNI [VNI2]" allocates an LNI on the service and a
# communication profile for each VNI and prints the return codes; "hold SVC"
# keeps an LNI until killed; "plant VNI UID" (root) makes a service as an
# intruder would, holds an LNI on it as UID and waits.
HELPER = r"""
import ctypes, os, struct, sys, time
lib = ctypes.CDLL(sys.argv[1])
mode, args = sys.argv[2], [int(a) for a in sys.argv[3:]]
dev = ctypes.c_void_p()
assert lib.cxil_open_device(0, ctypes.byref(dev)) == 0
def become(uid):
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
def lni(svc):
    l = ctypes.c_void_p()
    return lib.cxil_alloc_lni(dev, ctypes.byref(l), svc), l
if mode == "plant":
    vni, uid = args
    desc = struct.pack("<BBHHHH5sxIiIi32sI", 0x13, 1, vni, 0, 0, 0, b"\x01\x01\x01\x01\x00",
                       uid, 1, uid, 2, b"\x00" * 32, 0)
    fail = ctypes.create_string_buffer(20)
    svc = lib.cxil_alloc_svc(dev, ctypes.c_char_p(desc), fail)
    assert svc > 1, svc
    become(uid)
    rc, l = lni(svc)
    print("planted", svc, rc, flush=True)
    time.sleep(3600)
become(int(os.environ["AS_UID"]))
rc, l = lni(args[0])
if mode == "hold":
    print("held", rc, flush=True)
    time.sleep(3600)
out = [rc]
for vni in args[1:]:
    cp = ctypes.c_void_p()
    out.append(lib.cxil_alloc_cp(l, vni, 3, 0, ctypes.byref(cp)) if rc == 0 else None)
print(" ".join(str(x) for x in out), flush=True)
"""


def fake_cxi():
    return os.path.join(os.path.dirname(harness.Binaries.isostackd), "tests", "fakes",
                        "libcxi.so.1")


def cxi_services(state):
    """The fake NIC's services (its state file) other than the default one:
    sorted (svc_id, vnis, uid, gid); [] while the file is not written."""
    for _ in range(50):
        try:
            with open(state) as f:
                st = json.load(f)
            break
        except (OSError, ValueError):
            time.sleep(0.05)  # not written yet, or mid-write
    else:
        return []
    out = []
    for s in st["services"]:
        if s["svc_id"] == 1:
            continue
        ids = {m["type"]: m["id"] for m in s["members"]}
        out.append((s["svc_id"], s["vnis"], ids.get("uid"), ids.get("gid")))
    return sorted(out)


class CxiCase(ApiTestCase):
    library = None  # set per test class: the fake, or a path that is not there

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root: the agent's socket answers root only")
        self.tmp = tempfile.mkdtemp(prefix="test_agent_cxi.")
        os.chmod(self.tmp, 0o755)  # the NIC's state is every user's
        self.cxi_state = os.path.join(self.tmp, "cxi.json")
        self.env_saved = {k: os.environ.get(k) for k in ("ISOSTACK_FAKE_CXI_STATE",)}
        os.environ["ISOSTACK_FAKE_CXI_STATE"] = self.cxi_state
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
        self.token_file = os.path.join(self.tmp, "agent.token")
        with open(self.token_file, "w") as f:
            f.write(self.d.admin_token + "\n")
        self.state_dir = os.path.join(self.tmp, "state")
        self.agent = self.new_agent()
        self.helpers = []

    def new_agent(self):
        a = Agent(self.d.url(), self.token_file, self.state_dir, [NODE])
        a.argv += ["--cxi-library", self.library or fake_cxi()]
        return a

    def tearDown(self):
        try:
            for p in self.helpers:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            self.agent.kill()
            text = self.agent.text()
            self.agent.close()
            self.assertNotIn("Sanitizer", text, text[-3000:])
            self.assertNotIn("runtime error:", text, text[-3000:])
            self.d.stop()
        finally:
            self.d.cleanup()
            for k, v in self.env_saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            shutil.rmtree(self.tmp, ignore_errors=True)

    def wait_context(self):
        return "; agent log:\n" + self.agent.text()[-3000:]

    # ---- the NIC, as the fake holds it ----

    def services(self):
        """The fake's services other than the default one: (svc_id, vnis, uid, gid)."""
        return cxi_services(self.cxi_state)

    def helper(self, mode, *args, uid=0, wait_line=True):
        """Runs HELPER as a process of `uid`; "use" returns its output line,
        "hold"/"plant" the process (kept until killed) and its line."""
        # the fake libcxi may be an ASan build, loaded here into a python
        # without the ASan runtime
        env = dict(os.environ, AS_UID=str(uid),
                   ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0")
        p = subprocess.Popen([sys.executable, "-c", HELPER, fake_cxi(), mode] +
                             [str(a) for a in args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, text=True)
        if mode == "use":
            out, err = p.communicate(timeout=T(30))
            self.assertEqual(p.returncode, 0, err)
            return [None if x == "None" else int(x) for x in out.split()]
        self.helpers.append(p)
        line = p.stdout.readline()
        self.assertTrue(line, p.stderr.read() if p.poll() is not None else "no output")
        return p, line.split()

    # ---- the controller's side ----

    def state(self, alloc_id):
        return self.admin.get("/v1/allocations/" + alloc_id).body["state"]

    def verify(self):
        r = self.admin.get("/v1/fabric/verify")
        self.assertStatus(r, 200, "verify")
        return r.body

    def kinds(self):
        return sorted({v["kind"] for v in self.verify()["violations"]})

    def alloc(self, tenant):
        a = create_alloc(self, self.admin, {"tenant": tenant["name"],
                                            "gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertEqual(a["nodes"][0]["node"], NODE)
        return a["id"]

    # ---- the agent's socket ----

    def ask(self, req):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(T(10))
        s.connect(os.path.join(self.state_dir, "agent.sock"))
        s.sendall(json.dumps(req).encode())
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        s.close()
        return json.loads(data)

    def admit(self, tenant, alloc_id, uid, gid=None, member=0):
        return self.ask({"op": "cxi_admit", "tenant": tenant["name"], "allocation": alloc_id,
                         "member": member, "uid": uid, "gid": uid if gid is None else gid})


class TestAgentCxi(CxiCase):
    def test_admit_service_refusals_verify_restart_drift_release(self):
        self.agent.start()
        a = self.alloc(self.t1)
        # The gate opens with the driver up and no identity yet: the job's
        # task (or pod) that admits one starts after activation.
        self.wait_until("active", lambda: self.state(a) == "active")
        self.assertEqual(self.services(), [], "no identity, no service")
        self.wait_until("t1 missing on the node", lambda: "missing" in self.kinds())

        g = self.admit(self.t1, a, UID_A)
        self.assertNotIn("error", g, repr(g))
        self.assertEqual((g["vni"], g["uid"], g["gid"], g["device"], g["allocation"]),
                         (self.t1["vni"], UID_A, UID_A, "cxi0", a))
        svc = g["svc_id"]
        self.assertEqual(self.services(), [(svc, [self.t1["vni"]], UID_A, UID_A)])
        self.assertEqual(self.admit(self.t1, a, UID_A)["svc_id"], svc, "idempotent")
        self.assertIn("event=agent.cxi_admitted node=ss-n01 allocation=%s" % a, self.agent.text())

        # The fake's rules: the member's uid uses its VNI and no other;
        # another uid cannot use the service at all.
        rc = self.helper("use", svc, self.t1["vni"], self.t2["vni"], uid=UID_A)
        self.assertEqual(rc[0], 0, rc)
        self.assertEqual(rc[1], 0, rc)
        self.assertLess(rc[2], 0, "another tenant's VNI through the member's service: %r" % rc)
        rc = self.helper("use", svc, self.t1["vni"], uid=UID_OTHER)
        self.assertLess(rc[0], 0, "another uid on the member's service: %r" % rc)

        # Refusals, each naming its field.
        b = self.alloc(self.t2)
        self.wait_until("b active", lambda: self.state(b) == "active")
        r = self.admit(self.t2, a, UID_B)
        self.assertEqual(r["error"], "forbidden", repr(r))
        self.assertTrue(r["message"].startswith("tenant:"), repr(r))
        for bad, field in (({"uid": 0}, "uid"), ({"gid": 0}, "gid"),
                           ({"uid": 4294967295}, "uid"), ({"uid": "5001"}, "uid"),
                           ({"member": 2000}, "member"), ({"op": "cxi_grant"}, "op"),
                           ({"extra": 1}, "extra")):
            req = {"op": "cxi_admit", "tenant": self.t1["name"], "allocation": a, "member": 0,
                   "uid": UID_A, "gid": UID_A}
            req.update(bad)
            r = self.ask(req)
            self.assertEqual(r.get("error"), "invalid_argument", repr((bad, r)))
            self.assertTrue(r["message"].startswith(field), repr((bad, r)))
        r = self.admit(self.t1, a, UID_A + 1)
        self.assertEqual((r["error"], r["message"][:4]), ("conflict", "uid:"), repr(r))
        r = self.admit(self.t2, b, UID_A)  # t1's identity on t2's VNI
        self.assertEqual((r["error"], r["message"][:4]), ("conflict", "uid:"), repr(r))
        self.assertIn("another tenant's VNI", r["message"])
        self.assertNotIn(a, r["message"], "does not tell whose")
        r = self.admit(self.t1, "a-%016x" % 1, UID_A)
        self.assertEqual((r["error"], r["message"]), ("not_found", "not on this node"))
        self.assertEqual(len(self.services()), 1, "no refusal made a service")

        gb = self.admit(self.t2, b, UID_B)
        self.assertNotIn("error", gb, repr(gb))
        self.wait_until("the verifier is clean", lambda: self.verify()["ok"])

        # Restart: the agent adopts the services (the identities are in its
        # state dir; each service is found by its VNI, uid and gid), and a
        # process using one is never disturbed (a destroy would be EBUSY).
        holder, line = self.helper("hold", svc, uid=UID_A)
        self.assertEqual(line, ["held", "0"])
        self.agent.kill()
        self.agent.close()
        before = self.services()
        self.agent = self.new_agent()
        self.agent.start()
        self.wait_until("reported again", lambda: "event=agent.connected" in self.agent.text())
        time.sleep(2.5)  # two ticks
        self.assertEqual(self.services(), before)
        self.assertNotIn("event=cxi_destroy", self.agent.text())
        self.assertEqual(self.admit(self.t1, a, UID_A)["svc_id"], svc)
        self.assertTrue(self.verify()["ok"], repr(self.verify()))
        holder.kill()
        holder.wait()

        # Drift: a service nobody intends (an unknown VNI, held busy by its
        # process so that the agent cannot remove it at once) is reported
        # by the verifier; once free, the next tick removes it.
        self.agent.proc.send_signal(signal.SIGSTOP)
        try:
            planted, line = self.helper("plant", 3000, UID_DRIFT)
        finally:
            self.agent.proc.send_signal(signal.SIGCONT)
        self.assertEqual(line[0], "planted", line)
        drift = int(line[1])
        self.assertEqual(line[2], "0", "the intruder's process holds an LNI on it")
        self.wait_until("the verifier sees the drift", lambda: "extra" in self.kinds())
        self.assertIn(drift, [s[0] for s in self.services()])
        planted.kill()
        planted.wait()
        self.wait_until("the drift is removed",
                        lambda: drift not in [s[0] for s in self.services()])
        self.wait_until("the verifier is clean again", lambda: self.verify()["ok"])
        self.assertIn("event=agent.cxi_removed node=ss-n01 svc_id=%d" % drift, self.agent.text())

        # Release: the member's service goes with it; t2's stays.
        r = self.admin.delete("/v1/allocations/" + a)
        self.assertIn(r.status, (200, 202, 204), repr(r))
        self.wait_until("a's service is gone",
                        lambda: [s[0] for s in self.services()] == [gb["svc_id"]])
        self.assertIn("event=agent.cxi_released node=ss-n01 allocation=%s" % a, self.agent.text())
        r = self.admit(self.t1, a, UID_A)
        self.assertEqual((r["error"], r["message"]), ("not_found", "released"))
        self.wait_until("clean after the release", lambda: self.verify()["ok"])
        self.assertEqual(self.agent.stop(), 0)


class TestAgentCxiNoLibrary(CxiCase):
    library = "/nonexistent/libcxi.so.1"

    def test_a_missing_library_holds_the_allocation_with_the_reason(self):
        self.agent.start()
        a = self.alloc(self.t1)
        self.wait_until("the agent says why",
                        lambda: "event=agent.cxi_unavailable node=ss-n01" in self.agent.text())
        time.sleep(2)
        self.assertEqual(self.state(a), "provisioning", "never a silent success")
        r = self.admit(self.t1, a, UID_A)
        self.assertEqual(r["error"], "unavailable", repr(r))
        self.assertIn("no CXI driver on this node: cannot load /nonexistent/libcxi.so.1",
                      r["message"])


if __name__ == "__main__":
    harness.main()

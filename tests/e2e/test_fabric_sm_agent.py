#!/usr/bin/env python3
"""test_fabric_sm_agent.py: partitions.conf through the SM host's agent
(fabric.partitions_writer agent, docs/fabric.md), on a real OpenSM on ibsim.

isostackd writes no SM file: the agent of node "solo" (fabric.sm_node)
long-polls the document, writes it with its term/generation header, SIGHUPs
OpenSM, and reports; the controller confirms by reading the ports back. The
P_Key tables are read with `smpquery pkeys`. Then the fence: a document of a
lower term (or of the same term and a lower generation) from a controller
stand-in is refused and the file is not touched, whether the higher mark is
known from the state dir or only from the file's own header; a file whose
header does not parse stops the agent, naming the file and line 1.

argv: isostackd isoctl"""
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.environ.get("ISO_SOURCE_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402
import test_fabric_api as fa  # noqa: E402

SM_NODE = "solo"
HEADER = re.compile(r"^# isostack term (\d+) generation (\d+): do not edit; "
                    r"written by isostack-agent\n")


def read(path):
    with open(path) as f:
        return f.read()


def agent_binary():
    return os.path.join(os.path.dirname(harness.Binaries.isostackd), "isostack-agent")


def agent_config(fab):
    """The Fabric's inventory with the SM files left to the agent."""
    with open(fab.config) as f:
        text = f.read()
    text = re.sub(r"  partitions_file: .*\n  pid_file: .*\n  log_file: .*\n",
                  "  partitions_writer: agent\n  sm_node: %s\n" % SM_NODE, text)
    assert "partitions_writer" in text
    with open(fab.config, "w") as f:
        f.write(text)


class SmAgent:
    """isostack-agent --sm-partitions, its log in a file."""

    def __init__(self, tc, url, token, parts, pid_file, log_file=None, state=None):
        self.tmp = tempfile.mkdtemp(prefix="smagent-")
        self.token_file = os.path.join(self.tmp, "token")
        with open(self.token_file, "w") as f:
            f.write(token + "\n")
        self.state = state or os.path.join(self.tmp, "state")
        self.log = open(os.path.join(self.tmp, "agent.log"), "w+b")
        args = [agent_binary(), "--controller", url, "--token-file", self.token_file,
                "--node", SM_NODE, "--state-dir", self.state, "--heartbeat-s", "1",
                "--sm-partitions", parts, "--sm-pid-file", pid_file]
        if log_file:
            args += ["--sm-log", log_file]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        tc.addCleanup(self.stop)

    def text(self):
        if self.log.closed:
            return ""
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def wait_log(self, tc, what, timeout=15):
        deadline = time.time() + harness.T(timeout)
        while what not in self.text():
            if time.time() > deadline or self.proc.poll() is not None:
                tc.fail("agent log lacks %r:\n%s" % (what, self.text()[-3000:]))
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=harness.T(20))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            text = self.text()
            self.log.close()
            assert "Sanitizer" not in text and "runtime error:" not in text, text[-3000:]


class SmAgentOnOpenSM(harness.ApiTestCase):
    def setUp(self):
        self.fab = fa.Fabric()
        self.addCleanup(self.fab.stop)
        agent_config(self.fab)
        self.daemon = harness.Daemon(self.fab.config, env=self.fab.env)
        self.addCleanup(self.daemon.cleanup)
        self.daemon.start()
        self.admin = harness.Client(self.daemon, self.daemon.admin_token)
        self.parts = os.path.join(self.fab.dir, "partitions.conf")

    def node_token(self, node):
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": node})
        self.assertStatus(r, 201)
        return r.body["token"]

    def test_pkey_confirmed_through_the_sm_agent(self):
        before = read(self.parts)
        token = self.node_token(SM_NODE)
        # Who may read the document: only the SM node's agent.
        other = harness.Client(self.daemon, self.node_token("shared"))
        self.assertStatus(other.get("/v1/fabric/sm/partitions"), 403)
        self.assertStatus(self.admin.get("/v1/fabric/sm/partitions"), 403)
        _, aud = harness.issue_token(self, self.admin, "auditor")
        self.assertStatus(harness.Client(self.daemon, aud).get("/v1/fabric/sm/partitions"), 403)
        sm = harness.Client(self.daemon, token)
        r = sm.get("/v1/fabric/sm/partitions")
        self.assertStatus(r, 200)
        term = r.body["term"]
        self.assertEqual(r.body["generation"] >> 32, term)
        self.assertIn("Default=0x7fff", r.body["text"])
        self.assertStatus(sm.get("/v1/allocations"), 403)
        # Nothing written by isostackd itself: the file is OpenSM's start one.
        a = harness.create_tenant(self, self.admin, "acme")["name"]
        shape = {"gpus": {"profile": "1g.10gb", "count": 1}, "cpus": 1, "memory_mib": 1024,
                 "pool": "shared", "tenant": a, "members": 1}
        alloc = harness.create_alloc(self, self.admin, shape)
        time.sleep(0.5)
        self.assertEqual(read(self.parts), before)
        self.assertEqual(self.admin.get("/v1/allocations/" + alloc["id"]).body["state"],
                         "provisioning")
        agent = SmAgent(self, self.daemon.url(), token, self.parts,
                        os.path.join(self.fab.dir, "opensm.pid"),
                        os.path.join(self.fab.dir, "opensm.log"))
        fa.wait_state(self, self.admin, alloc["id"], "active", timeout=20)
        key = [int(p["pkey"], 16) for p in self.admin.get("/v1/fabric/intent").body["partitions"]
               if p["kind"] == "tenant" and p["tenant"] == a][0]
        fa.wait_pkeys(self, self.fab, fa.VF0, {0x7fff: False, 0x0010: False, key: True})
        text = read(self.parts)
        m = HEADER.match(text)
        self.assertTrue(m, text[:200])
        self.assertEqual(int(m.group(1)), term)
        f = self.admin.get("/v1/fabric").body
        self.assertEqual(int(m.group(2)) & 0xffffffff, f["confirmed"], f)
        self.assertEqual(f["applied"], f["confirmed"], f)
        self.assertIn("t_acme=0x%04x" % key, text)
        agent.wait_log(self, "agent.sm_signalled")
        # Release: the key leaves the port through the agent too.
        self.admin.delete("/v1/allocations/" + alloc["id"])
        fa.wait_pkeys(self, self.fab, fa.VF0, {0x7fff: False})
        # A report above the controller's term is a newer leader's: 409.
        r = sm.request("PUT", "/v1/fabric/sm/status", {"version": "x", "term": term + 1,
                                             "generation": (term + 1) << 32})
        self.assertStatus(r, 409)
        r = sm.request("PUT", "/v1/fabric/sm/status", {"version": "x", "term": term, "generation": 1,
                                             "bogus": 1})
        self.assertStatus(r, 400)
        self.assertEqual(r.body["error"]["field"], "bogus")

    def wait_health(self, state, timeout):
        deadline = time.time() + harness.T(timeout)
        while True:
            h = self.admin.get("/v1/fabric/health").body
            if h["sm"]["state"] == state or time.time() > deadline:
                self.assertEqual(h["sm"]["state"], state, h)
                return h

    def test_sm_health_through_the_sm_agent(self):
        """Whether OpenSM runs, as the SM host's agent reports it (sm_alive,
        at once on a change and at least every 2 s): up with the agent
        running; OpenSM stopped on the SM host, down within a few seconds;
        started again, up; the agent gone, down once it has been silent for
        3 x 2 s. Any node agent reads the same small answer."""
        self.assertNotEqual(self.admin.get("/v1/fabric/health").body["sm"]["state"], "up")
        agent = SmAgent(self, self.daemon.url(), self.node_token(SM_NODE), self.parts,
                        os.path.join(self.fab.dir, "opensm.pid"),
                        os.path.join(self.fab.dir, "opensm.log"))
        self.wait_health("up", 10)
        self.fab.opensm("stop")
        t0 = time.time()
        try:
            h = self.wait_health("down", 5)
        finally:
            self.fab.restart_opensm()
        print("SM down seen after %.2f s" % (time.time() - t0), file=sys.stderr)
        self.assertIn("OpenSM is not running on the SM host", h["sm"]["reason"])
        other = harness.Client(self.daemon, self.node_token("shared"))
        r = other.get("/v1/fabric/health")
        self.assertStatus(r, 200)
        self.assertEqual(set(r.body), {"driver", "sm"}, r.body)
        self.assertEqual(r.body["sm"]["state"], "down", r.body)
        up = self.wait_health("up", 10)
        self.assertGreater(up["sm"]["since"], h["sm"]["since"])
        agent.wait_log(self, "agent.sm_process")
        agent.stop()
        t0 = time.time()
        h = self.wait_health("down", 15)
        self.assertEqual(h["sm"]["reason"], "the SM host's agent has not reported for 6 s")
        self.assertGreater(time.time() - t0, 3.5)  # not before the bound (one report late)


class Fake(http.server.BaseHTTPRequestHandler):
    """A controller stand-in: serves `doc` and keeps the reports."""
    doc = None
    reports = []

    def log_message(self, *a):
        pass

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = json.dumps(Fake.doc).encode()
        if "wait_s=" in self.path and "after=%d&" % Fake.doc["generation"] in self.path:
            time.sleep(0.5)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):  # noqa: N802
        n = int(self.headers.get("Content-Length", "0"))
        Fake.reports.append(json.loads(self.rfile.read(n)))
        self.send_response(204)
        self.end_headers()


class SmAgentFence(harness.ApiTestCase):
    """The agent against a controller stand-in that serves a stale leader's
    document. No OpenSM needed: the pid file names no process, so an
    accepted document would be written (and the SM found down)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="smfence-")
        self.parts = os.path.join(self.tmp, "partitions.conf")
        self.pid = os.path.join(self.tmp, "opensm.pid")
        with open(self.pid, "w") as f:
            f.write("999999999\n")
        Fake.reports = []
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fake)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.addCleanup(self.srv.server_close)
        self.addCleanup(self.srv.shutdown)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]

    def doc(self, term, n, text="Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n"):
        return {"term": term, "generation": term << 32 | n, "text": text}

    def wait_refused(self, term, gen):
        deadline = time.time() + harness.T(10)
        while time.time() < deadline:
            for r in Fake.reports:
                x = r.get("refused")
                if x and x["term"] == term and x["generation"] == gen:
                    return r
            time.sleep(0.05)
        self.fail("no refusal of %d/%d reported: %r" % (term, gen, Fake.reports))

    def test_lower_term_refused_file_untouched(self):
        written = ("# isostack term 5 generation %d: do not edit; written by isostack-agent\n"
                   "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n"
                   "t_new=0x0101, ipoib : 0x946dae0300a20100=full ;\n" % (5 << 32 | 7))
        with open(self.parts, "w") as f:
            f.write(written)
        # The state dir is empty: the higher term is known from the header only.
        Fake.doc = self.doc(4, 99)
        agent = SmAgent(self, self.url, "tok", self.parts, self.pid)
        rep = self.wait_refused(4, 4 << 32 | 99)
        self.assertIn("term 4 is below term 5", rep["refused"]["reason"])
        self.assertEqual(read(self.parts), written)
        # The same term, a lower generation: refused too.
        Fake.doc = self.doc(5, 6)
        self.wait_refused(5, 5 << 32 | 6)
        self.assertEqual(read(self.parts), written)
        self.assertIn("agent.sm_refused", agent.text())
        # A newer one is written, header first; the state dir keeps it.
        Fake.doc = self.doc(6, 1)
        deadline = time.time() + harness.T(10)
        while HEADER.match(read(self.parts)).group(1) != "6":
            self.assertLess(time.time(), deadline, agent.text()[-2000:])
            time.sleep(0.05)
        self.assertEqual(read(self.parts)[HEADER.match(read(self.parts)).end():],
                         Fake.doc["text"])
        agent.stop()
        with open(os.path.join(agent.state, "sm-mark")) as f:
            self.assertEqual(f.read(), "term 6 generation %d\n" % (6 << 32 | 1))
        # A restart with the file rolled back by hand: the state dir refuses term 5.
        with open(self.parts, "w") as f:
            f.write(written)
        Fake.reports = []
        Fake.doc = self.doc(5, 8)
        SmAgent(self, self.url, "tok", self.parts, self.pid, state=agent.state)
        self.wait_refused(5, 5 << 32 | 8)
        self.assertEqual(read(self.parts), written)

    def test_bad_header_stops_the_agent(self):
        with open(self.parts, "w") as f:
            f.write("# isostack term 5 generation x\nDefault=0x7fff : ALL ;\n")
        Fake.doc = self.doc(9, 1)
        agent = SmAgent(self, self.url, "tok", self.parts, self.pid)
        self.assertEqual(agent.proc.wait(timeout=harness.T(10)), 1, agent.text())
        self.assertIn(self.parts + ":1: header: ", agent.text())
        self.assertEqual(Fake.reports, [])

    def test_bad_document_refused(self):
        Fake.doc = {"term": 3, "generation": 3 << 32 | 1,
                    "text": "# isostack term 99 generation 1: forged\n"}
        SmAgent(self, self.url, "tok", self.parts, self.pid)
        rep = self.wait_refused(3, 3 << 32 | 1)
        self.assertIn("only the agent writes the header", rep["refused"]["reason"])
        self.assertFalse(os.path.exists(self.parts))


if __name__ == "__main__":
    harness.main(__doc__)

#!/usr/bin/env python3
"""test_leader.py: several isostackd on one PostgreSQL, one leader, fenced
(issue 16, "One leader, fenced"; docs/store.md, "High availability").

Three isostackd with their own --state-dir and --listen on one throwaway
PostgreSQL (scripts/pg-test-cluster.sh): exactly one leads and the others
follow, naming it in GET /v1/healthz and refusing everything else with 503
not_leader. kill -9 of the leader: another leads within 10 s with a higher
term and every acknowledged write is there, for several rounds. SIGTERM
hands the lease over (with a 60 s lease looked at every 30 s, only the
release and its NOTIFY let another take it within 10 s). A leader frozen
past its lease (SIGSTOP) and then thawed
cannot land a write and steps down; a term moved under a leader fails its
next write transaction (the fence), and nothing of it is stored. isoctl and
a node agent given the three URLs find the leader, the agent again after a
failover, holding the new term.

Each daemon has its own audit signing key (made at its first start, leader or
follower); the three audit.pub lines are published as one key set in every
state dir's audit-keys, and the audit log stays one log across leaders: each
head names its signer's key id, and `isoctl audit verify --keys` accepts the
log of several signers, and refuses it when one signer's key is taken out of
the set or a head is signed by a key nobody published.

Run: python3 tests/api/test_leader.py PATH/TO/isostackd PATH/TO/isoctl
Skips (exit 77, saying why) only when the PostgreSQL binaries are missing.
"""

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import PgCluster, T, free_port, http_request, needs_postgres, psql  # noqa: E402

CONFIG = harness.data_path("small.yaml")
MIG_1G = {"count": 1, "profile": "1g.10gb"}
# The goal for a crash failover, not scaled for slow builds: it is
# the lease (5 s) plus a renew interval plus the new leader's start, measured
# at 5.0-5.2 s here also under ASan.
FAILOVER_BOUND_S = 10.0


class Node:
    """One isostackd of the group: its own state dir and port, kept across
    restarts (a restart of a node is a new process and a new lease holder)."""

    def __init__(self, tmp, i, conninfo, extra, config=CONFIG):
        self.state = os.path.join(tmp, "node%d" % i)
        os.makedirs(self.state, mode=0o700)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.conninfo = conninfo
        self.extra = list(extra)
        self.config = config
        self.proc = None
        self.log = os.path.join(tmp, "node%d.log" % i)
        self.stopped = False

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [harness.Binaries.isostackd, "--config", self.config, "--state-dir", self.state,
                 "--listen", "127.0.0.1:%d" % self.port, "--store", self.conninfo,
                 "--tenant-writes-per-s", "100000", "--tenant-reads-per-s", "100000"]
                + self.extra,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)

    def health(self):
        try:
            r = http_request(self.port, "GET", "/v1/healthz", timeout=T(2))
        except OSError:
            return None
        return r.body if r.status == 200 else None

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            if self.stopped:
                self.signal(signal.SIGCONT)
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.stopped = False

    def log_text(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")


@needs_postgres
class TestLeader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PgCluster("iso-leader-")
        cls.dir, cls.base = cls.pg.dir, cls.pg.base

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()

    # -- a group of three

    def group(self, extra=("--no-agents",), config=CONFIG):
        """Three nodes on a fresh database; the first leads. Each has its own
        audit key; the key set of all three is then published in every state
        dir (audit-keys), read when a node opens its controller (at its start
        or when elected). Returns (nodes, leader, admin token)."""
        self.conninfo = self.pg.fresh_db("iso_leader")
        tmp = tempfile.mkdtemp(prefix="nodes-", dir=self.dir)
        nodes = [Node(tmp, i, self.conninfo, extra, config) for i in range(3)]
        self.nodes = nodes
        self.addCleanup(self.dump_logs_on_failure)
        self.addCleanup(self.check_sanitizers)
        for node in nodes:
            self.addCleanup(node.kill)
        nodes[0].start()
        first = self.wait_leader(nodes[:1], T(20))
        self.assertIs(first, nodes[0])
        with open(os.path.join(nodes[0].state, "admin.token")) as f:
            token = f.read().strip()
        for node in nodes[1:]:
            node.start()
        for node in nodes[1:]:
            self.wait_role(node, "follower", T(20))
        self.keys = self.publish_keys(nodes)
        return nodes, nodes[0], token

    def publish_keys(self, nodes, path=None):
        """Writes the key set of the nodes' audit.pub lines into every state
        dir's audit-keys (or to `path`); returns its text."""
        text = "# the cluster's audit keys\n"
        for i, node in enumerate(nodes):
            with open(os.path.join(node.state, "audit.pub")) as f:
                text += "%s node%d\n" % (f.read().strip(), i)
        for dest in [path] if path else [os.path.join(n.state, "audit-keys") for n in self.nodes]:
            with open(dest, "w") as f:
                f.write(text)
            os.chmod(dest, 0o644)
        return text

    def check_sanitizers(self):
        """No AddressSanitizer, LeakSanitizer or UBSan report in any node's
        log (the ASan build; stopped and re-executed processes report)."""
        for node in self.nodes:
            text = node.log_text()
            for mark in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
                self.assertNotIn(mark, text, "%s:\n%s" % (node.log, text[-4000:]))

    def dump_logs_on_failure(self):
        if hasattr(self, "_outcome") and any(
                e for _, e in getattr(self._outcome, "errors", []) if e):
            for node in self.nodes:
                sys.stderr.write("--- %s ---\n%s\n" % (node.log, node.log_text()[-3000:]))

    def wait_leader(self, nodes, timeout, exclude=None):
        """The one node that reports role leader (polling healthz)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in nodes:
                if node is exclude:
                    continue
                h = node.health()
                if h and h.get("role") == "leader":
                    return node
            time.sleep(0.05)
        self.fail("no leader among %s within %.1f s"
                  % ([n.url for n in nodes if n is not exclude], timeout))

    def wait_role(self, node, role, timeout):
        deadline = time.monotonic() + timeout
        h = None
        while time.monotonic() < deadline:
            h = node.health()
            if h and h.get("role") == role:
                return h
            time.sleep(0.05)
        self.fail("%s is not %s within %.1f s (last healthz %r)" % (node.url, role, timeout, h))

    def check_one_leader(self, nodes, leader):
        """Exactly one leader; every other node follows and names it."""
        lh = leader.health()
        self.assertEqual(lh["role"], "leader")
        self.assertEqual(lh["leader"], leader.url)
        for node in nodes:
            if node is leader:
                continue
            h = self.wait_follower_naming(node, leader)
            self.assertEqual(h["term"], lh["term"], "a follower reports the leader's term")
        return lh["term"]

    def wait_follower_naming(self, node, leader):
        deadline = time.monotonic() + T(10)
        h = None
        while time.monotonic() < deadline:
            h = node.health()
            if h and h["role"] == "follower" and h["leader"] == leader.url:
                return h
            time.sleep(0.05)
        self.fail("%s does not follow %s (healthz %r)" % (node.url, leader.url, h))

    def post(self, node, path, body, token):
        return http_request(node.port, "POST", path, body=body, token=token)

    def get(self, node, path, token):
        return http_request(node.port, "GET", path, token=token)

    # -- the tests

    def test_one_leader_followers_name_it(self):
        nodes, leader, token = self.group()
        term = self.check_one_leader(nodes, leader)
        self.assertGreaterEqual(term, 1)
        r = self.post(leader, "/v1/tenants", {"name": "acme"}, token)
        self.assertEqual(r.status, 201, r)
        for node in nodes[1:]:
            for method, path in (("POST", "/v1/tenants"), ("GET", "/v1/tenants"),
                                 ("GET", "/v1/version"), ("DELETE", "/v1/tenants/acme")):
                r = http_request(node.port, method, path,
                                 body={"name": "x"} if method == "POST" else None, token=token)
                self.assertEqual(r.status, 503, r)
                self.assertEqual(r.body["error"]["code"], "not_leader", r)
                self.assertEqual(r.body["leader"], leader.url, r)
                self.assertEqual(r.header("X-Isostack-Leader"), leader.url, r)
        # The followers wrote nothing: one tenant, and the term is the agents' term.
        self.assertEqual(psql(self.conninfo, "SELECT count(*) FROM tenants"), "1")
        self.assertEqual(psql(self.conninfo, "SELECT value FROM meta WHERE key = 'agent_term'"),
                         str(term))
        self.assertEqual(psql(self.conninfo, "SELECT url FROM leader"), leader.url)

    def test_kill9_rounds(self):
        nodes, leader, token = self.group()
        term = self.check_one_leader(nodes, leader)
        tenants, allocs = [], []
        for rnd in range(5):
            # Acknowledged writes on the current leader...
            name = "round%d" % rnd
            r = self.post(leader, "/v1/tenants", {"name": name}, token)
            self.assertEqual(r.status, 201, r)
            tenants.append(name)
            r = self.post(leader, "/v1/allocations",
                          {"tenant": name, "gpus": MIG_1G, "cpus": 1}, token)
            self.assertEqual(r.status, 201, r)
            allocs.append((r.body["id"], r.body["state"]))
            # ...then a crash at once.
            t0 = time.monotonic()
            leader.kill()
            new = self.wait_leader(nodes, FAILOVER_BOUND_S, exclude=leader)
            took = time.monotonic() - t0
            self.assertLess(took, FAILOVER_BOUND_S, "crash failover bound")
            sys.stderr.write("round %d: crash failover %.2f s\n" % (rnd, took))
            new_term = new.health()["term"]
            self.assertGreater(new_term, term)
            term = new_term
            for t in tenants:
                self.assertEqual(self.get(new, "/v1/tenants/" + t, token).status, 200, t)
            for a, state in allocs:  # as acknowledged (the small cluster fills up)
                r = self.get(new, "/v1/allocations/" + a, token)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.body["state"], state, r)
            # The killed node comes back as a follower of the new leader.
            leader.start()
            self.wait_follower_naming(leader, new)
            leader = new
        self.check_one_leader(nodes, leader)
        # Nothing placed twice: every live allocation's slots are distinct.
        self.assertEqual(psql(self.conninfo,
                              "SELECT count(*) FROM (SELECT m.node, s.gpu, s.start "
                              "FROM alloc_slots s JOIN alloc_members m ON m.alloc_id = s.alloc_id"
                              " AND m.idx = s.member JOIN allocations a ON a.id = s.alloc_id"
                              " WHERE a.state NOT IN ('released', 'failed') GROUP BY 1, 2, 3"
                              " HAVING count(*) > 1) d"), "0")

    def test_sigterm_hands_over(self):
        # A 60 s lease that followers look at every 30 s: only a release and
        # its notification let another node lead within 10 s.
        nodes, leader, token = self.group(
            ["--no-agents", "--lease-ms", "60000", "--renew-ms", "30000"])
        term = self.check_one_leader(nodes, leader)
        t0 = time.monotonic()
        leader.signal(signal.SIGTERM)
        new = self.wait_leader(nodes, FAILOVER_BOUND_S, exclude=leader)
        sys.stderr.write("graceful handoff %.2f s\n" % (time.monotonic() - t0))
        self.assertEqual(leader.proc.wait(timeout=T(15)), 0)
        self.assertGreater(new.health()["term"], term, "the next taker bumps the term")
        self.assertIn("leader_released", leader.log_text())
        r = self.post(new, "/v1/tenants", {"name": "after-handoff"}, token)
        self.assertEqual(r.status, 201, r)

    def test_paused_leader_is_fenced(self):
        nodes, leader, token = self.group(
            ["--no-agents", "--lease-ms", "2000", "--renew-ms", "500"])
        term = self.check_one_leader(nodes, leader)
        leader.signal(signal.SIGSTOP)
        leader.stopped = True
        new = self.wait_leader(nodes, T(FAILOVER_BOUND_S) + 5, exclude=leader)
        self.assertGreater(new.health()["term"], term)
        # Thawed: its first write must not land, and it steps down.
        leader.signal(signal.SIGCONT)
        leader.stopped = False
        try:
            r = self.post(leader, "/v1/tenants", {"name": "stale-write"}, token)
            self.assertNotIn(r.status, (200, 201), r)
        except OSError:
            pass  # already stepping down: the connection was refused or closed
        h = self.wait_role(leader, "follower", T(20))
        self.assertEqual(h["leader"], new.url)
        self.assertIn("leader_deposed", leader.log_text())
        self.assertEqual(psql(self.conninfo,
                              "SELECT count(*) FROM tenants WHERE name = 'stale-write'"), "0")
        self.assertEqual(self.get(new, "/v1/tenants/stale-write", token).status, 404)
        self.check_one_leader(nodes, new)

    def test_moved_term_fails_the_write(self):
        # Renewed only every 30 s: the fence in the write transaction, not
        # the renew, is what finds the term moved.
        nodes, leader, token = self.group(
            ["--no-agents", "--lease-ms", "60000", "--renew-ms", "30000"])
        term = self.check_one_leader(nodes, leader)
        psql(self.conninfo, "UPDATE leader SET term = term + 1")
        r = self.post(leader, "/v1/tenants", {"name": "fenced"}, token)
        self.assertEqual(r.status, 503, r)
        self.assertIn("not the leader", r.body["error"]["message"], r)
        self.assertEqual(psql(self.conninfo,
                              "SELECT count(*) FROM tenants WHERE name = 'fenced'"), "0")
        self.assertIn("leader_deposed", leader.log_text())
        # It starts again as a follower of the lease it no longer holds.
        h = self.wait_role(leader, "follower", T(20))
        self.assertEqual(h["term"], term + 1)

    def test_same_holder_after_expiry_bumps_the_term(self):
        # One node, nobody to take over: frozen past its lease and thawed, it
        # takes the lease back with a new term (SkyPilot #10347), and since
        # someone could have led in between, it drops its state and starts
        # again (a new holder: a takeover, another term).
        self.conninfo = self.pg.fresh_db("iso_leader")
        node = Node(tempfile.mkdtemp(prefix="nodes-", dir=self.dir), 0, self.conninfo,
                    ["--no-agents", "--lease-ms", "1000", "--renew-ms", "500"])
        self.nodes = [node]
        self.addCleanup(self.dump_logs_on_failure)
        self.addCleanup(self.check_sanitizers)
        self.addCleanup(node.kill)
        node.start()
        term = self.wait_role(node, "leader", T(20))["term"]
        holder = psql(self.conninfo, "SELECT holder FROM leader")
        node.signal(signal.SIGSTOP)
        node.stopped = True
        deadline = time.monotonic() + T(10)
        while psql(self.conninfo, "SELECT expires_at < clock_timestamp() FROM leader") != "t":
            self.assertLess(time.monotonic(), deadline, "the lease never expired")
            time.sleep(0.1)
        time.sleep(0.2)
        node.signal(signal.SIGCONT)
        node.stopped = False
        deadline = time.monotonic() + T(20)
        while "the lease expired before it was renewed" not in node.log_text():
            self.assertLess(time.monotonic(), deadline, node.log_text()[-2000:])
            time.sleep(0.1)
        h = self.wait_role(node, "leader", T(20))
        self.assertGreaterEqual(h["term"], term + 2, "re-acquired after expiry, then a takeover")
        self.assertNotEqual(psql(self.conninfo, "SELECT holder FROM leader"), holder)

    def test_a_node_that_cannot_lead_hands_the_lease_on(self):
        # node2 has no published key set, so it trusts only its own key: the
        # log's heads (signed by node0) do not verify under it and its
        # controller refuses to open: elected, it stops (exit 1, as a start
        # over a log that fails its check does), handing the lease back first
        # rather than leaving it held for a lease.
        nodes, leader, token = self.group()
        r = self.post(leader, "/v1/tenants", {"name": "signed-by-node0"}, token)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.get(leader, "/v1/audit/head", token).status, 200)
        nodes[2].kill()
        os.unlink(os.path.join(nodes[2].state, "audit-keys"))
        nodes[2].start()
        self.wait_follower_naming(nodes[2], leader)
        nodes[1].kill()
        leader.kill()  # node2 alone: it takes the lease after expiry and fails
        deadline = time.monotonic() + T(20)
        while "leader_start_failed" not in nodes[2].log_text():
            self.assertLess(time.monotonic(), deadline, nodes[2].log_text()[-2000:])
            time.sleep(0.1)
        self.assertIn("leader_released", nodes[2].log_text())
        self.assertEqual(nodes[2].proc.wait(timeout=T(15)), 1)
        self.assertEqual(psql(self.conninfo, "SELECT expires_at <= clock_timestamp() FROM leader"),
                         "t", "the lease was handed back")
        nodes[0].start()  # a node that can lead finds the lease free
        new = self.wait_leader(nodes[:1], FAILOVER_BOUND_S)
        r = self.post(new, "/v1/tenants", {"name": "after-refusal"}, token)
        self.assertEqual(r.status, 201, r)

    # -- one audit log across leaders

    def export_log(self, path):
        """A full export of the log as the store holds it (every head, every
        event), written in the export format of docs/audit.md. Returns the
        heads as "size root time signature key_id" lines."""
        b64 = "translate(encode(%s, 'base64'), E'\\n', '')"
        heads = psql(self.conninfo, "SELECT size || ' ' || encode(root, 'hex') || ' ' || time_ms"
                     " || ' ' || " + b64 % "sig" + " || ' ' ||"
                     " coalesce(encode(key_id, 'hex'), '') FROM audit_heads ORDER BY id")
        events = psql(self.conninfo, "SELECT seq || ' ' || encode(leaf, 'hex') || ' ' || "
                      + b64 % "body" + " FROM audit_events ORDER BY seq")
        with open(path, "wb") as f:
            for ln in heads.splitlines():
                size, root, ms, sig, kid = ln.split(" ")
                h = {"type": "head", "size": int(size), "root": root, "time": int(ms),
                     "signature": sig}
                if kid:
                    h["key"] = kid
                f.write(json.dumps(h, separators=(",", ":")).encode() + b"\n")
            for ln in events.splitlines():
                seq, leaf, body = ln.split(" ")
                f.write(b'{"type":"event","seq":%d,"leaf":"%s","event":' % (int(seq), leaf.encode())
                        + base64.b64decode(body) + b"}\n")
        return heads.splitlines()

    def verify(self, keys_text, export):
        keys = os.path.join(self.dir, "verify-keys-%d" % self.pg.n)
        with open(keys, "w") as f:
            f.write(keys_text)
        return subprocess.run([harness.Binaries.isoctl, "audit", "verify", "--keys", keys, export],
                              capture_output=True, text=True, timeout=T(30))

    def key_id(self, node):
        with open(os.path.join(node.state, "audit.pub")) as f:
            pk = base64.b64decode(f.read().strip()[len("ed25519:"):])
        return hashlib.sha256(pk).hexdigest()[:16]

    def test_one_audit_log_across_leaders(self):
        # Three daemons, each with its own key, one published set: the leader
        # signs heads, is killed, the next signs the next heads with its own
        # key, and the whole log verifies against the set.
        nodes, leader, token = self.group()
        keys = {self.key_id(n) for n in nodes}
        self.assertEqual(len(keys), 3, "each daemon has its own key")
        self.assertEqual(self.post(leader, "/v1/tenants", {"name": "before"}, token).status, 201)
        h = self.get(leader, "/v1/audit/head", token)
        self.assertEqual(h.body["key_id"], self.key_id(leader), h)
        leader.kill()
        new = self.wait_leader(nodes, FAILOVER_BOUND_S, exclude=leader)
        self.assertIn("audit_keys", new.log_text())  # it read the published set
        self.assertEqual(self.post(new, "/v1/tenants", {"name": "after"}, token).status, 201)
        h = self.get(new, "/v1/audit/head", token)
        self.assertEqual(h.body["key_id"], self.key_id(new), h)
        export = os.path.join(self.dir, "log-%d.jsonl" % self.pg.n)
        heads = self.export_log(export)
        signers = {ln.split(" ")[4] for ln in heads}
        self.assertEqual(signers, {self.key_id(leader), self.key_id(new)}, heads)
        out = self.verify(self.keys, export)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertRegex(out.stdout, r": ok \(\d+ events, %d heads\)" % len(heads))
        # The first leader's key taken out of the set: its first head is named.
        without = "".join(ln + "\n" for ln in self.keys.splitlines()
                          if not ln.endswith("node%d" % nodes.index(leader)))
        out = self.verify(without, export)
        self.assertEqual(out.returncode, 8, out.stdout + out.stderr)
        self.assertIn("FAILED (line 1): the head of size", out.stdout)
        self.assertIn("is signed by key %s, which is not in the key set" % self.key_id(leader),
                      out.stdout)
        # The last head re-signed by a key nobody published (openssl's own
        # Ed25519), naming that key's id: refused, naming the id.
        with open(export) as f:
            lines = f.read().splitlines(True)
        at = len(heads) - 1
        h = json.loads(lines[at])
        sig, pk = self.openssl_sign("isostack-audit-head-v1\n%d\n%s\n%d\n"
                                    % (h["size"], h["root"], h["time"]))
        h["signature"], h["key"] = sig, hashlib.sha256(pk).hexdigest()[:16]
        lines[at] = json.dumps(h, separators=(",", ":")) + "\n"
        forged = export + ".forged"
        with open(forged, "w") as f:
            f.writelines(lines)
        out = self.verify(self.keys, forged)
        self.assertEqual(out.returncode, 8, out.stdout + out.stderr)
        self.assertIn("FAILED (line %d): the head of size %d is signed by key %s, which is not in"
                      % (at + 1, h["size"], h["key"]), out.stdout)
        # ... and verifies once that key is published too (the signature is
        # good): so the refusal was the key set's, not a broken line.
        out = self.verify(self.keys + "ed25519:%s forger\n" % base64.b64encode(pk).decode(),
                          forged)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        # The killed node comes back, its key checked against the set, and
        # follows.
        leader.start()
        self.wait_follower_naming(leader, new)

    def openssl_sign(self, msg):
        """An Ed25519 signature of msg by a new key (openssl), base64, and
        the key's 32 public bytes."""
        d = tempfile.mkdtemp(dir=self.dir)
        key = os.path.join(d, "k.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], check=True,
                       capture_output=True, timeout=T(30))
        pub = subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-outform", "DER"],
                             check=True, capture_output=True, timeout=T(30)).stdout
        with open(os.path.join(d, "msg"), "w") as f:
            f.write(msg)
        sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", key, "-rawin", "-in",
                              os.path.join(d, "msg")], check=True, capture_output=True,
                             timeout=T(30)).stdout
        return base64.b64encode(sig).decode(), pub[-32:]

    def test_a_key_outside_the_set_refuses_to_start(self):
        nodes, leader, token = self.group()
        other = nodes[2]
        other.kill()
        # node2's key replaced: the published set no longer holds it.
        os.unlink(os.path.join(other.state, "audit.key"))
        os.unlink(os.path.join(other.state, "audit.pub"))
        other.start()
        self.assertEqual(other.proc.wait(timeout=T(20)), 1)
        text = other.log_text()
        self.assertIn("--audit-keys: this daemon's audit key", text)
        self.assertIn("is not in the published key set %s/audit-keys" % other.state, text)

    def test_agent_follows_the_leader(self):
        # A sim node agent given the three URLs, followers first: it finds the
        # leader, and after a kill -9 the new one, whose term it then holds.
        nodes, leader, token = self.group(extra=(), config=harness.data_path("agents.yaml"))
        self.check_one_leader(nodes, leader)
        token_file = os.path.join(self.dir, "agent-%d.token" % self.pg.n)
        with open(token_file, "w") as f:
            f.write(token + "\n")
        agent_state = tempfile.mkdtemp(prefix="agent-", dir=self.dir)
        agent_log = open(os.path.join(agent_state, "agent.log"), "wb")
        self.addCleanup(agent_log.close)
        agent = subprocess.Popen(
            [os.path.join(os.path.dirname(harness.Binaries.isostackd), "isostack-agent"),
             "--controller", ",".join(n.url for n in reversed(nodes)), "--token-file",
             token_file, "--gpu-driver", "sim", "--state-dir", os.path.join(agent_state, "s"),
             "--heartbeat-s", "1", "--sandbox", "off", "--node", "ag-n01"],
            stdout=agent_log, stderr=agent_log)
        self.addCleanup(lambda: (agent.kill(), agent.wait()))

        def agent_seen(node, term):
            deadline = time.monotonic() + T(20)
            a = None
            while time.monotonic() < deadline:
                r = self.get(node, "/v1/nodes/ag-n01", token)
                a = r.body.get("agent") if r.status == 200 else None
                if a and a["connected"] and a["term_seen"] == term:
                    return
                time.sleep(0.1)
            self.fail("agent not seen by %s at term %d (last %r)" % (node.url, term, a))

        agent_seen(leader, leader.health()["term"])
        leader.kill()
        new = self.wait_leader(nodes, FAILOVER_BOUND_S, exclude=leader)
        agent_seen(new, new.health()["term"])
        self.assertIsNone(agent.poll(), "the agent keeps running across the failover")

    def test_isoctl_finds_the_leader(self):
        nodes, leader, token = self.group()
        self.check_one_leader(nodes, leader)
        dead = "http://127.0.0.1:%d" % free_port()
        urls = ",".join([dead] + [n.url for n in reversed(nodes)])
        env = dict(os.environ, ISOSTACK_URL=urls, ISOSTACK_TOKEN=token)
        out = subprocess.run([harness.Binaries.isoctl, "tenant", "create", "via-list"],
                             capture_output=True, text=True, timeout=T(30), env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        out = subprocess.run([harness.Binaries.isoctl, "-o", "json", "tenant", "list"],
                             capture_output=True, text=True, timeout=T(30), env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("via-list", out.stdout)
        # A bad entry in the list is refused naming the flag's field.
        env["ISOSTACK_URL"] = leader.url + ",ftp://x"
        out = subprocess.run([harness.Binaries.isoctl, "tenant", "list"],
                             capture_output=True, text=True, timeout=T(30), env=env)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("ftp://x", out.stderr)


if __name__ == "__main__":
    harness.main()

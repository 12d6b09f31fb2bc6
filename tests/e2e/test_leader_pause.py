#!/usr/bin/env python3
"""test_leader_pause.py: a leader paused past its lease sends nothing that
takes effect (issue 16, "Tests" -> "Pause"; docs/store.md, "Pause").

Three isostackd on one throwaway PostgreSQL (harness.PgCluster) with the
opensm fabric driver on ibsim + OpenSM and `fabric.partitions_writer: agent`;
the SM host's agent (node "solo") writes partitions.conf, a node agent (node
"shared", sim GPU driver) makes MIG instances. The race is built so that the
stale leader really holds something to send:

1. steady state under leader L (term T): the SM file and the node agent at T;
2. both agents stopped; L accepts a change (tenant "stale", an allocation on
   node shared: a new SM document, with the tenant's P_Key on a VF, and a
   new desired document, with one more instance), which nobody has fetched;
3. L frozen (SIGSTOP), and a write sent to it (it sits in L's backlog);
4. both agents started again, L first in their URL lists: their requests
   connect (the kernel accepts into L's backlog) and wait on L;
5. a follower N takes the lease (term T+1) and makes its own change: the
   stale allocation released (its VF leaves the stale tenant's partition);
6. L thawed (SIGCONT) while the agents' requests still wait on it. L's
   first turn finds its lease gone; what it answers them must not be its
   term-T documents.

Checked: the write sent to L is not in PostgreSQL and the lease row names N;
the SM file's header, polled through the thaw, is never of term T again and
ends at N's term; the SM agent wrote nothing of term T after its restart;
OpenSM's P_Key tables (smpquery) hold exactly N's intent; every desired
document the node agent took after its restart has N's term, it made no
instance (the stale allocation's was never made) and N sees it at term T+1.

Without the fix (iso_lease_holds in request_head and the parked answers), L
served both agents its term-T documents in that first turn: the SM agent
wrote the stale P_Key onto the VF and the node agent made the stale
allocation's MIG instance, both after N had released it.

argv: isostackd isoctl. Skips (77) only without PostgreSQL, ibsim or opensm.
"""
import os
import re
import signal
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
from harness import PgCluster, T, http_request, needs_postgres, psql  # noqa: E402
import test_fabric_api as fa  # noqa: E402
from test_fabric_sm_agent import HEADER, SM_NODE, agent_config  # noqa: E402
from test_leader import Node  # noqa: E402

NODE = "shared"
LEASE = ["--lease-ms", "2000", "--renew-ms", "500"]
# The agents' requests time out after heartbeat + 10 s: the whole window
# from their restart to the thaw must fit in it (it takes about 3-4 s). Below
# the controller's agent lease (10 s), so the node stays reachable.
HEARTBEAT_S = 5
AGENT_TIMEOUT_S = HEARTBEAT_S + 10


class FabricNode(Node):
    """A test_leader Node that runs isostackd under the fabric's umad2sim
    preload (the opensm driver's SMP read-back)."""

    def __init__(self, tmp, i, conninfo, config, env):
        super().__init__(tmp, i, conninfo, LEASE, config)
        self.env = dict(os.environ, **env)

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [harness.Binaries.isostackd, "--config", self.config, "--state-dir", self.state,
                 "--listen", "127.0.0.1:%d" % self.port, "--store", self.conninfo,
                 "--tenant-writes-per-s", "100000", "--tenant-reads-per-s", "100000"]
                + self.extra,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                env=self.env)


class Agent:
    """isostack-agent with its log in a file; start() again reuses its state
    dir (the fencing marks it keeps)."""

    def __init__(self, tc, name, args, env=None):
        self.dir = tempfile.mkdtemp(prefix="agent-%s-" % name, dir=tc.tmp)
        self.args = args + ["--state-dir", os.path.join(self.dir, "state")]
        self.logpath = os.path.join(self.dir, "agent.log")
        self.env = env
        self.proc = None
        self.offset = 0  # where the current run's log starts
        tc.addCleanup(self.stop)

    def start(self, urls):
        self.offset = os.path.getsize(self.logpath) if os.path.exists(self.logpath) else 0
        log = open(self.logpath, "ab")
        binary = os.path.join(os.path.dirname(harness.Binaries.isostackd), "isostack-agent")
        self.proc = subprocess.Popen([binary, "--controller", ",".join(urls)] + self.args,
                                     stdout=log, stderr=log, env=self.env)
        log.close()

    def kill(self):
        """Gone at once (a SIGTERM waits for the long poll to end)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=T(20))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def text(self, this_run=True):
        if not os.path.exists(self.logpath):
            return ""
        with open(self.logpath, "rb") as f:
            f.seek(self.offset if this_run else 0)
            return f.read().decode("utf-8", "replace")


@needs_postgres
class LeaderPause(harness.ApiTestCase):
    def setUp(self):
        self.fab = fa.Fabric()
        self.addCleanup(self.fab.stop)
        agent_config(self.fab)
        self.pg = PgCluster("iso-pause-")
        self.addCleanup(self.pg.stop)
        self.tmp = tempfile.mkdtemp(prefix="pause-", dir=self.pg.dir)
        self.conninfo = self.pg.fresh_db("iso_pause")
        self.parts = os.path.join(self.fab.dir, "partitions.conf")
        self.nodes = [FabricNode(self.tmp, i, self.conninfo, self.fab.config, self.fab.env)
                      for i in range(3)]
        self.addCleanup(self.dump_on_failure)
        for n in self.nodes:
            self.addCleanup(n.kill)

    def dump_on_failure(self):
        res = getattr(self._outcome, "result", None)
        if res and any(t is self for t, _ in res.failures + res.errors):
            for n in self.nodes:
                sys.stderr.write("--- %s ---\n%s\n" % (n.log, n.log_text()[-3000:]))
            for a in getattr(self, "agents", []):
                sys.stderr.write("--- %s ---\n%s\n" % (a.logpath, a.text(False)[-3000:]))

    # -- helpers

    def wait_leader(self, exclude=None, timeout=20):
        deadline = time.monotonic() + T(timeout)
        while time.monotonic() < deadline:
            for n in self.nodes:
                if n is exclude:
                    continue
                h = n.health()
                if h and h.get("role") == "leader":
                    return n, h["term"]
            time.sleep(0.05)
        self.fail("no leader within %d s" % timeout)

    def call(self, node, method, path, body=None, want=None):
        r = http_request(node.port, method, path, body=body, token=self.token, timeout=T(10))
        if want is not None:
            self.assertIn(r.status, want if isinstance(want, tuple) else (want,), r)
        return r.body

    def tenant_ports(self, node, tenant):
        """The member GUIDs of `tenant`'s partition in node's intent."""
        for p in self.call(node, "GET", "/v1/fabric/intent", want=200)["partitions"]:
            if p["kind"] == "tenant" and p["tenant"] == tenant:
                return int(p["pkey"], 16), {int(m["guid"], 16) for m in p["members"]}
        return None, set()

    def header(self):
        """(term, generation) of the SM file's header, or None."""
        try:
            with open(self.parts) as f:
                m = HEADER.match(f.read())
        except FileNotFoundError:
            return None
        return (int(m.group(1)), int(m.group(2))) if m else None

    def wait_header(self, pred, what, timeout=20):
        return self.wait_until(what, lambda: (lambda h: h if h and pred(h) else None)(
            self.header()), timeout)

    def desired_terms(self, agent):
        return [int(t) for t in re.findall(r"agent\.desired node=%s generation=\d+ term=(\d+)"
                                           % NODE, agent.text())]

    def expected_tables(self, node, guids):
        """Each port's P_Key table as node's intent says: {guid: {key: full}}
        with the default partition (limited) always there."""
        want = {g: {0x7fff: False} for g in guids}
        for p in self.call(node, "GET", "/v1/fabric/intent", want=200)["partitions"]:
            key = int(p["pkey"], 16)
            for m in p["members"]:
                g = int(m["guid"], 16)
                if g in want and key != 0x7fff:
                    want[g][key] = m["membership"] == "full"
        return want

    # -- the test

    def test_paused_leader_sends_nothing_that_takes_effect(self):
        t_start = time.monotonic()
        l0 = self.nodes[0]
        l0.start()
        self.wait_until("node0 leads", lambda: (l0.health() or {}).get("role") == "leader")
        with open(os.path.join(l0.state, "admin.token")) as f:
            self.token = f.read().strip()
        for n in self.nodes[1:]:
            n.start()
        for n in self.nodes[1:]:
            self.wait_until("%s follows" % n.url,
                            lambda n=n: (n.health() or {}).get("role") == "follower")
        keys = ""
        for i, n in enumerate(self.nodes):
            with open(os.path.join(n.state, "audit.pub")) as f:
                keys += "%s node%d\n" % (f.read().strip(), i)
        for n in self.nodes:
            with open(os.path.join(n.state, "audit-keys"), "w") as f:
                f.write(keys)
        leader, term = self.wait_leader()
        self.assertIs(leader, l0)
        urls = [leader.url] + [n.url for n in self.nodes if n is not leader]

        # The agents: the SM host's and node shared's, with their tokens.
        def token_file(node):
            body = self.call(leader, "POST", "/v1/tokens", {"role": "node-agent", "node": node},
                             want=201)
            path = os.path.join(self.tmp, "%s.token" % node)
            with open(path, "w") as f:
                f.write(body["token"] + "\n")
            return path

        sm = Agent(self, "sm", ["--token-file", token_file(SM_NODE), "--node", SM_NODE,
                                "--heartbeat-s", str(HEARTBEAT_S), "--sm-partitions", self.parts,
                                "--sm-pid-file", os.path.join(self.fab.dir, "opensm.pid"),
                                "--sm-log", os.path.join(self.fab.dir, "opensm.log")])
        na = Agent(self, "node", ["--token-file", token_file(NODE), "--node", NODE,
                                  "--gpu-driver", "sim", "--sandbox", "off",
                                  "--heartbeat-s", str(HEARTBEAT_S)])
        self.agents = [sm, na]
        sm.start(urls)
        na.start(urls)

        # 1. Steady state at term T: one tenant's allocation everywhere.
        shape = {"gpus": {"profile": "1g.10gb", "count": 1}, "cpus": 1, "memory_mib": 1024,
                 "pool": "shared"}
        self.call(leader, "POST", "/v1/tenants", {"name": "acme"}, want=201)
        a0 = self.call(leader, "POST", "/v1/allocations", dict(shape, tenant="acme"), want=201)
        fa.wait_state(self, harness_client(leader, self.token), a0["id"], "active", timeout=30)
        before = self.wait_header(lambda h: h[0] == term, "the SM file at term %d" % term)
        self.wait_until("the node agent at term %d" % term,
                        lambda: self.desired_terms(na) and self.desired_terms(na)[-1] == term)

        # 2. The agents go away; the leader accepts a change nobody fetches.
        sm.kill()
        na.kill()
        self.call(leader, "POST", "/v1/tenants", {"name": "stale"}, want=201)
        a1 = self.call(leader, "POST", "/v1/allocations", dict(shape, tenant="stale"), want=201)
        stale_key, stale_ports = self.wait_until(
            "the stale tenant's partition in the intent",
            lambda: (lambda kp: kp if kp[1] else None)(self.tenant_ports(leader, "stale")))
        time.sleep(0.3)  # the driver's coalesce and the SM document published
        self.assertEqual(self.header(), before, "nobody wrote the SM file meanwhile")

        # 3. Frozen; a write sent to it waits in its backlog.
        leader.signal(signal.SIGSTOP)
        leader.stopped = True
        stale_write = {}

        def write_to_frozen():
            try:
                stale_write["r"] = http_request(leader.port, "POST", "/v1/tenants",
                                                body={"name": "thawed-write"}, token=self.token,
                                                timeout=T(30))
            except OSError as e:
                stale_write["r"] = e

        writer = threading.Thread(target=write_to_frozen, daemon=True)
        writer.start()

        # 4. The agents come back, the frozen leader first in their lists.
        t_agents = time.monotonic()
        sm.start(urls)
        na.start(urls)

        # 5. Another takes over and makes its own change: the stale
        #    allocation released, its VF out of the stale tenant's partition.
        new, new_term = self.wait_leader(exclude=leader)
        self.assertGreater(new_term, term)
        self.call(new, "DELETE", "/v1/allocations/" + a1["id"], want=(200, 202, 204))
        self.wait_until("the stale VF out of the new leader's intent",
                        lambda: not self.tenant_ports(new, "stale")[1] & stale_ports)
        waited = time.monotonic() - t_agents
        # The race: the agents' first requests still wait on the frozen
        # leader (nothing answered them, nothing timed out).
        for a in (sm, na):
            self.assertNotIn("agent.connected", a.text())
            self.assertNotIn("poll_failed", a.text())
            self.assertNotIn("sm_written", a.text())
        self.assertLess(waited, AGENT_TIMEOUT_S - 3,
                        "the thaw must come before the agents' requests time out")

        # 6. Thawed: watch the SM file through the window.
        seen = []
        leader.signal(signal.SIGCONT)
        leader.stopped = False
        deadline = time.monotonic() + T(20)
        while time.monotonic() < deadline:
            h = self.header()
            if h and (not seen or seen[-1] != h):
                seen.append(h)
            done = (h and h[0] == new_term and self.desired_terms(na)
                    and (leader.health() or {}).get("role") == "follower")
            if done:
                break
            time.sleep(0.02)
        # A few more looks: nothing goes back later either.
        for _ in range(25):
            h = self.header()
            if seen[-1] != h:
                seen.append(h)
            time.sleep(0.02)
        writer.join(T(30))

        # No write of the old leader in PostgreSQL; the lease is N's.
        r = stale_write.get("r")
        self.assertTrue(isinstance(r, OSError) or r.status not in (200, 201), r)
        self.assertEqual(psql(self.conninfo,
                              "SELECT count(*) FROM tenants WHERE name = 'thawed-write'"), "0")
        self.assertEqual(psql(self.conninfo, "SELECT url || ' ' || term FROM leader"),
                         "%s %d" % (new.url, new_term))
        self.assertIn("leader_deposed", leader.log_text())

        # The SM file: from the one of T before the freeze straight to N's
        # term, never a term-T document after it (seen: every header polled).
        self.assertEqual(seen[0], before, seen)
        self.assertTrue(all(h[0] >= new_term for h in seen[1:]), (before, seen))
        self.assertEqual(seen[-1][0], new_term, seen)
        written = re.findall(r"agent\.sm_written term=(\d+)", sm.text())
        self.assertTrue(written and all(int(t) == new_term for t in written), sm.text())
        with open(self.parts) as f:
            text = f.read()
        stale_line = re.search(r"t_stale=0x%04x[^;]*;" % stale_key, text)
        for g in stale_ports:
            self.assertFalse(stale_line and "0x%016x" % g in stale_line.group(0), text)
        # OpenSM's tables: exactly the new leader's intent, on every end
        # port of the shared node (its PF and VFs) and the SM host's PF.
        ports = [fa.SHARED_PF, fa.VF0, fa.VF1, fa.SOLO_PF]
        for g, want in self.expected_tables(new, ports).items():
            fa.wait_pkeys(self, self.fab, g, want)
            self.assertNotIn(stale_key, self.fab.pkeys(g), "port 0x%x" % g)

        # The node agent: every document it took since its restart is N's,
        # it made no instance (the stale allocation's never), and N sees it
        # at N's term.
        terms = self.desired_terms(na)
        self.assertTrue(terms and all(t == new_term for t in terms), na.text())
        self.assertNotIn("term_refused", na.text())  # nothing of T ever reached it
        self.assertIsNone(re.search(r"agent\.reconciled .*created=[1-9]", na.text()), na.text())

        def seen_at_new_term():
            body = self.call(new, "GET", "/v1/nodes/" + NODE, want=200)
            a = body.get("agent") or {}
            return a.get("connected") and a.get("term_seen") == new_term

        self.wait_until("node agent seen by the new leader at its term", seen_at_new_term)
        # The thawed leader follows the new one.
        self.wait_until("the old leader follows",
                        lambda: (leader.health() or {}).get("leader") == new.url)
        sys.stderr.write("pause test: %.1f s, SM headers seen %r\n"
                         % (time.monotonic() - t_start, seen))


def harness_client(node, token):
    """A harness.Client-like object for fa.wait_state."""

    class C:
        def get(self, path):
            return http_request(node.port, "GET", path, token=token, timeout=T(10))

    return C()


if __name__ == "__main__":
    harness.main(__doc__)

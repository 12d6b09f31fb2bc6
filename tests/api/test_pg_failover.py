#!/usr/bin/env python3
"""test_pg_failover.py: PostgreSQL itself fails over under a running isostackd
(issue 16, Tests: "PostgreSQL failover"; docs/store.md, "PostgreSQL failover").

A primary and a streaming standby (scripts/pg-test-cluster.sh start, standby),
each on its own unix socket. isostackd runs with the multi-host conninfo
"host=P/sock,S/sock port=5432,5432 ... target_session_attrs=read-write".
Clients create tenants and allocations; the primary is killed (SIGKILL to the
postmaster and every process of it: the host is gone) while they run; the
standby is promoted (pg_ctl promote).

- With a synchronous standby (synchronous_standby_names naming it), with
  group commit and without: every request is answered 2xx or 5xx (never
  another failure), the daemon stops (status 1: a cut flush or commit, or
  the new timeline) and, started again as its supervisor would on the same
  conninfo, serves from the new primary; every write answered 2xx is there,
  what the daemon then holds is what a restart reads back (nothing
  half-applied), and the audit log exported from the new primary verifies.
- A clean switchover: the next request is 503 and the daemon stops
  (store_timeline_changed); started again it serves. With two isostackd the
  leader stops so, and the follower is elected and serves (it takes the new
  timeline when it opens its controller).
- Without a synchronous standby (asynchronous streaming): the same run, but
  the answered writes missing on the promoted standby are only counted and
  printed, not asserted: that loss is what the synchronous standby is for.

Run: python3 tests/api/test_pg_failover.py PATH/TO/isostackd PATH/TO/isoctl
Skips (exit 77, saying why) only when the PostgreSQL binaries are missing.
"""

import http.client
import json
import os
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
from harness import PG_SCRIPT, ApiTestCase, Daemon, T, needs_postgres, psql  # noqa: E402

CPU = {"pool": "cpu", "cpus": 1, "memory_mib": 16}
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)
CLIENTS = 8


def script(*args):
    out = subprocess.run([PG_SCRIPT] + list(args), capture_output=True, text=True,
                         timeout=T(60))
    if out.returncode != 0:
        raise AssertionError("pg-test-cluster.sh %s: %s" % (" ".join(args), out.stderr))
    lines = out.stdout.strip().splitlines()
    return lines[-1] if lines else ""  # start and standby: the conninfo


def kill_cluster(dir_):
    """SIGKILL to the postmaster of dir_ and every process it started, as if
    its host were lost: nothing gets to flush or to say goodbye."""
    with open(os.path.join(dir_, "data", "postmaster.pid")) as f:
        pm = int(f.readline())
    os.kill(pm, signal.SIGSTOP)  # it forks no backend between the listing and the kill
    kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pm)], capture_output=True,
                          text=True, timeout=T(30)).stdout.split()
    for pid in [pm] + [int(k) for k in kids]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def snapshot(admin):
    allocs = sorted(admin.list_all("/v1/allocations"), key=lambda a: a["id"])
    for a in allocs:
        a.pop("updated", None)
    return {"allocations": allocs,
            "tenants": sorted(t["name"] for t in admin.list_all("/v1/tenants")),
            "capacity": admin.get("/v1/capacity").body,
            "gpus": admin.get("/v1/gpus").body["items"]}


class Load:
    """CLIENTS threads, each on its own keep-alive connection, creating a
    tenant and then allocations for it, in a loop. It records what was
    answered 2xx (acked), every other status (others: must be 5xx) and
    whether a request was refused at the transport (the daemon gone)."""

    def __init__(self, daemon):
        self.d = daemon
        self.lock = threading.Lock()
        self.tenants, self.allocs = [], []
        self.statuses = []   # (what, status, body) of every non-2xx answer
        self.transport = 0
        self.after = 0       # 2xx answers since mark()
        self.marked = None   # when mark() was called (monotonic)
        self.first = None    # the first 2xx to a request sent after it (monotonic)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.worker, args=(i,), daemon=True)
                        for i in range(CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()

    def mark(self, when):
        with self.lock:
            self.after = 0
            self.marked, self.first = when, None

    def answered(self, sent):  # under self.lock
        self.after += 1
        if self.marked is not None and self.first is None and sent >= self.marked:
            self.first = time.monotonic()

    def request(self, conn, method, path, body):
        conn.request(method, path, body=json.dumps(body),
                     headers={"Authorization": "Bearer " + self.d.admin_token,
                              "Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")

    def worker(self, i):
        n = 0
        tenant = None
        while not self.stop.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=T(30))
            try:
                while not self.stop.is_set():
                    n += 1
                    sent = time.monotonic()
                    if tenant is None or n % 4 == 0:
                        name = what = "fo-%d-%d" % (i, n)
                        st, body = self.request(conn, "POST", "/v1/tenants", {"name": name})
                        if st == 201:
                            tenant = name
                            with self.lock:
                                self.tenants.append(name)
                                self.answered(sent)
                            continue
                    else:
                        what = "allocation of " + tenant
                        st, body = self.request(conn, "POST", "/v1/allocations",
                                                dict(CPU, tenant=tenant))
                        if st == 201:
                            with self.lock:
                                self.allocs.append(body["id"])
                                self.answered(sent)
                            continue
                    with self.lock:
                        self.statuses.append((what, st, body))
                    time.sleep(0.02)
            except TRANSPORT_ERRORS:
                with self.lock:
                    self.transport += 1
                time.sleep(0.05)  # the daemon is gone or restarting
            finally:
                conn.close()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(T(60))
            assert not t.is_alive(), "a client hangs"


@needs_postgres
class TestPgFailover(ApiTestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="iso-pgfo-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        os.chmod(self.dir, 0o711)  # as root the servers run as isopg, in p/ and s/
        self.p, self.s = os.path.join(self.dir, "p"), os.path.join(self.dir, "s")
        self.killed = False
        self.addCleanup(script, "stop", self.s)
        # a killed primary is not stopped: its postmaster may linger as a
        # zombie where nothing reaps orphans, and pg_ctl would wait on it
        self.addCleanup(lambda: self.killed or script("stop", self.p))
        base = script("start", self.p)
        psql(base, "CREATE DATABASE iso_fo")
        script("standby", self.p, self.s)
        # libpq takes unix-socket directories in a host list too; the first
        # read-write one wins
        self.conninfo = ("host=%s/sock,%s/sock port=5432,5432 user=postgres dbname=iso_fo "
                         "target_session_attrs=read-write connect_timeout=3"
                         % (self.p, self.s))
        self.primary = base.replace("dbname=postgres", "dbname=iso_fo")
        self.standby = self.primary.replace(self.p, self.s)

    def sync_names(self):
        return psql(self.primary, "SHOW synchronous_standby_names")

    def failover(self, synchronous, extra=()):
        """Load, kill -9 the primary mid-load, promote the standby, wait
        until isostackd serves again; returns (daemon, load, restarted)."""
        d = Daemon("small.yaml", extra_args=["--store", self.conninfo] + list(extra))
        self.addCleanup(d.cleanup)
        d.start()
        # the standby streams, in the mode the case wants
        row = psql(self.primary, "SELECT sync_state FROM pg_stat_replication")
        self.assertEqual(row, "sync" if synchronous else "async")
        load = Load(d)
        load.start()
        self.wait_until("answers come in", lambda: len(load.allocs) >= 100 or load.statuses)
        self.assertEqual(load.statuses, [], "failures before the failover")
        kill_cluster(self.p)
        self.killed = True
        load.mark(time.monotonic())  # requests sent from now on met a dead primary
        script("promote", self.s)
        restarted = False
        deadline = time.monotonic() + T(60)
        while load.after < 20 and time.monotonic() < deadline:
            if not d.alive() and not restarted:
                # the daemon stopped on a flush it could not vouch for
                # (docs/store.md, "PostgreSQL failover"): its supervisor
                # starts it again on the same conninfo
                d.proc.wait(T(30))
                rc = d.proc.returncode
                d.proc = None
                self.assertEqual(rc, 1, d.stderr_tail())
                d.start()
                restarted = True
            time.sleep(0.1)
        load.finish()
        self.assertGreaterEqual(load.after, 20, "isostackd does not serve again after the "
                                "failover: %s" % d.stderr_tail())
        self.assertTrue(d.alive(), d.stderr_tail())
        # measured, not asserted (timing belongs to bench/)
        self.assertIsNotNone(load.first)
        sys.stderr.write("\n  first write sent after the kill answered %.2f s after it (promotion, the "
                         "daemon's stop and start, its lease)" % (load.first - load.marked))
        # it never goes on over the new timeline with what it held before
        self.assertTrue(restarted, "the daemon went on after the failover")
        # every failure was a clean 5xx answer (500: the store lost its
        # connection under the request; 503: refused while the daemon
        # stops, or not_leader while the restarted one waits for the lease)
        for what, st, body in load.statuses:
            self.assertIn(st, (500, 503), "%s: %s %r" % (what, st, body))
        self.assertGreater(len(load.statuses) + load.transport, 0,
                           "the failover was not seen at all")
        return d, load, restarted

    def consistent(self, d):
        """Nothing half-applied: what the daemon holds is what a start reads
        back from the new primary (its start also re-checks the audit log
        against every signed head), and the audit log exported from the new
        primary verifies offline."""
        before = snapshot(d.client())
        d.stop()
        d.start()
        self.assertEqual(snapshot(d.client()), before)
        out = os.path.join(d.tmp, "audit.export")
        env = dict(os.environ, ISOSTACK_URL=d.url(), ISOSTACK_TOKEN=d.admin_token)
        for argv in (["audit", "export", "--out", out],
                     ["audit", "verify", "--pubkey", os.path.join(d.state_dir, "audit.pub"),
                      out]):
            p = subprocess.run([harness.Binaries.isoctl] + argv, capture_output=True, text=True,
                               timeout=T(120), env=env)
            self.assertEqual(p.returncode, 0, "isoctl %s: %s%s" % (argv[:2], p.stdout, p.stderr))

    def missing(self, d, load):
        admin = d.client()
        tenants = set(t["name"] for t in admin.list_all("/v1/tenants"))
        allocs = set(a["id"] for a in admin.list_all("/v1/allocations"))
        return ([t for t in load.tenants if t not in tenants],
                [a for a in load.allocs if a not in allocs])

    def test_synchronous_standby_loses_nothing_answered(self):
        self.synchronous_case([])

    def test_synchronous_standby_group_commit_off(self):
        """Each commit waits for the standby itself: a COMMIT cut by the
        failover has an unknown outcome (it may be on the standby)."""
        self.synchronous_case(["--group-commit", "off"])

    def synchronous_case(self, extra):
        self.assertEqual(self.sync_names(), "s_s")
        d, load, restarted = self.failover(True, extra)
        # the daemon is on the promoted standby
        self.assertEqual(psql(self.standby, "SELECT pg_is_in_recovery()"), "f")
        lost_t, lost_a = self.missing(d, load)
        self.assertEqual((lost_t, lost_a), ([], []), "answered writes lost")
        self.consistent(d)
        sys.stderr.write("\n  synchronous standby: %d tenants, %d allocations answered, "
                         "%d answered 5xx, %d refused, daemon restarted: %s, lost: 0\n"
                         % (len(load.tenants), len(load.allocs), len(load.statuses),
                            load.transport, restarted))

    def test_reconnect_to_another_timeline_stops_the_daemon(self):
        """A clean switchover (the primary stopped with everything sent, the
        standby promoted): the daemon's next write reconnects to a server
        on a new timeline. It does not go on as if nothing happened (it
        cannot know what an asynchronous standby lacks): that write gets 503
        and the daemon stops with status 1; started again it serves."""
        d = Daemon("small.yaml", extra_args=["--store", self.conninfo])
        self.addCleanup(d.cleanup)
        d.start()
        admin = d.client()
        self.assertStatus(admin.post("/v1/tenants", {"name": "before"}), 201)
        script("stop", self.p)
        script("promote", self.s)
        r = admin.post("/v1/tenants", {"name": "after"})
        self.assertEqual(r.status, 503, r)  # its token is read from the store first
        d.proc.wait(T(30))
        rc = d.proc.returncode
        d.proc = None
        self.assertEqual(rc, 1, d.stderr_tail())
        self.assertIn("store_timeline_changed", d.stderr_text())
        d.start()
        self.wait_until("it leads again",
                        lambda: d.client().post("/v1/tenants", {"name": "after"}).status == 201)
        self.assertStatus(d.client().get("/v1/tenants/before"), 200)

    def test_follower_elected_after_the_failover_serves(self):
        """Two isostackd on the two-socket conninfo. After a clean
        switchover the leader's next write finds the new timeline: 503, it
        stops with status 1 and hands the lease on. The follower, whose
        store session was opened on the old timeline, is elected, rebuilds
        its state from the new primary (taking its timeline then) and
        serves: it does not stop as well."""
        from test_leader import Node  # the group's node: own state dir and port
        tmp = tempfile.mkdtemp(prefix="nodes-", dir=self.dir)
        nodes = [Node(tmp, i, self.conninfo, ["--no-agents"]) for i in range(2)]
        for node in nodes:
            self.addCleanup(node.kill)
        nodes[0].start()
        self.wait_until("node0 leads", lambda: (nodes[0].health() or {}).get("role") == "leader")
        with open(os.path.join(nodes[0].state, "admin.token")) as f:
            token = f.read().strip()
        nodes[1].start()
        self.wait_until("node1 follows",
                        lambda: (nodes[1].health() or {}).get("role") == "follower")
        keys = ""
        for i, n in enumerate(nodes):
            with open(os.path.join(n.state, "audit.pub")) as f:
                keys += "%s node%d\n" % (f.read().strip(), i)
        for n in nodes:  # the cluster's key set, read when a node opens its controller
            with open(os.path.join(n.state, "audit-keys"), "w") as f:
                f.write(keys)
        r = harness.http_request(nodes[0].port, "POST", "/v1/tenants", {"name": "before"},
                                 token=token)
        self.assertEqual(r.status, 201, r)
        script("stop", self.p)
        script("promote", self.s)
        r = harness.http_request(nodes[0].port, "POST", "/v1/tenants", {"name": "t0"},
                                 token=token)
        self.assertEqual(r.status, 503, r)
        self.assertEqual(nodes[0].proc.wait(T(30)), 1, nodes[0].log_text()[-3000:])
        self.assertIn("store_timeline_changed", nodes[0].log_text())

        def serves():
            if nodes[1].proc.poll() is not None:
                self.fail("node1 stopped: %s" % nodes[1].log_text()[-3000:])
            r = harness.http_request(nodes[1].port, "POST", "/v1/tenants", {"name": "after"},
                                     token=token)
            return r.status == 201
        self.wait_until("node1 leads and serves", serves)
        r = harness.http_request(nodes[1].port, "GET", "/v1/tenants/before", token=token)
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(nodes[1].proc.poll())
        for node in nodes:  # the ASan build: no report from either process
            for mark in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
                self.assertNotIn(mark, node.log_text())

    def test_asynchronous_standby_documents_the_loss(self):
        """Documents, does not assert, what an asynchronous standby can lose:
        commits acknowledged by the primary that had not reached the standby
        when the primary died."""
        psql(self.primary.replace("dbname=iso_fo", "dbname=postgres"),
             "ALTER SYSTEM RESET synchronous_standby_names")
        psql(self.primary, "SELECT pg_reload_conf()")
        self.wait_until("the standby is asynchronous", lambda: self.sync_names() == "")
        d, load, restarted = self.failover(synchronous=False)
        lost_t, lost_a = self.missing(d, load)
        # what is lost is lost whole: the restart read a consistent prefix
        # (before the timeline check, a daemon that went on wrote past the
        # lost audit events and the next start refused the log's hole)
        self.consistent(d)
        sys.stderr.write("\n  asynchronous standby: %d tenants, %d allocations answered, "
                         "lost %d tenants and %d allocations (not asserted), daemon "
                         "restarted: %s\n" % (len(load.tenants), len(load.allocs), len(lost_t),
                                              len(lost_a), restarted))


if __name__ == "__main__":
    harness.main()

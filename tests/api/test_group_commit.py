#!/usr/bin/env python3
"""test_group_commit.py: concurrent changes share one flush of the store, and
group commit changes nothing that a client can see but the speed
(docs/store.md, "Group commit").

- A burst of concurrent creates, releases and failing members (a duplicate
  tenant, a release of a missing allocation, a create over the tenant's
  max_live) from
  their own connections: every request gets its own right answer, the
  failing ones leave nothing behind, the commits shared flushes
  (GET /v1/version: syncs below commits), and what the daemon holds in memory
  is what a restart reads back from the store.
- kill -9 while 16 clients create and release: every answered create is there
  after the restart, every answered release too, and the audit log verifies
  offline (isoctl audit verify) and at the start.
- A flush that fails (tests/fakes/fail_fsync.c, LD_PRELOAD): every member
  waiting for it is answered 500, none 2xx, the daemon stops with status 1,
  and what was answered before is there at the next start.
- --group-commit off: every commit has its own flush.
- The same on PostgreSQL (TestGroupCommitPostgres, --store CONNINFO on a
  throwaway cluster, scripts/pg-test-cluster.sh): commits run with
  synchronous_commit=off and one synchronous transaction per turn flushes
  them; the failed-flush test is SQLite's (its shim fails SQLite's fsync).

Run: python3 tests/api/test_group_commit.py PATH/TO/isostackd PATH/TO/isoctl
"""

import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, PgCluster, T, needs_postgres  # noqa: E402

CPU = {"pool": "cpu", "cpus": 1, "memory_mib": 16}
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


def commits(d):
    r = harness.http_request(d.port, "GET", "/v1/version", token=d.admin_token)
    assert r.status == 200, r
    return r.body["commits"]


def burst(port, requests):
    """Sends every (method, path, body, token) from its own connection, all
    released at once by a barrier; returns the answers in order."""
    answers = [None] * len(requests)
    barrier = threading.Barrier(len(requests))

    def one(i, method, path, body, token):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=T(30))
        try:
            conn.connect()
            barrier.wait(T(30))
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data,
                         headers={"Authorization": "Bearer " + token,
                                  "Content-Type": "application/json"})
            r = conn.getresponse()
            answers[i] = harness.Response(method, path, r.status, r.headers, r.read())
        except Exception as e:  # noqa: BLE001 - the answer slot says what happened
            answers[i] = e
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(i,) + tuple(req))
               for i, req in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(T(60))
    return answers




class TestGroupCommit(ApiTestCase):
    def store_args(self):
        return []

    def setUp(self):
        self.d = Daemon("small.yaml", extra_args=self.store_args())
        self.d.start()
        self.admin = self.d.client()

    def tearDown(self):
        self.d.cleanup()

    def snapshot(self):
        allocs = sorted(self.admin.list_all("/v1/allocations"), key=lambda a: a["id"])
        for a in allocs:
            a.pop("updated", None)
        return {"allocations": allocs,
                "tenants": sorted(t["name"] for t in self.admin.list_all("/v1/tenants")),
                "capacity": self.admin.get("/v1/capacity").body,
                "nodes": self.admin.list_all("/v1/nodes"),
                "gpus": self.admin.get("/v1/gpus").body["items"]}

    def test_concurrent_batch_each_member_answers_its_own(self):
        tok = self.d.admin_token
        self.assertStatus(self.admin.post("/v1/tenants", {"name": "gc"}), 201)
        # a tenant whose live limit is already full: its create fails in the controller
        self.assertStatus(self.admin.post("/v1/tenants", {"name": "gc-full",
                                                          "limits": {"max_live": 1}}), 201)
        self.assertStatus(self.admin.post("/v1/allocations", dict(CPU, tenant="gc-full")), 201)
        before = commits(self.d)
        self.assertTrue(before["group"], before)
        created, released = [], []
        for rnd in range(3):
            olds = []
            for _ in range(6):
                r = self.admin.post("/v1/allocations", dict(CPU, tenant="gc"))
                self.assertStatus(r, 201)
                olds.append(r.body["id"])
            reqs = [("POST", "/v1/allocations", dict(CPU, tenant="gc", name="b%d-%d" % (rnd, i)), tok)
                    for i in range(12)]
            reqs += [("DELETE", "/v1/allocations/" + a, None, tok) for a in olds]
            reqs += [("POST", "/v1/tenants", {"name": "gc"}, tok),
                     ("DELETE", "/v1/allocations/a-0000000000000000", None, tok),
                     ("POST", "/v1/allocations", dict(CPU, tenant="gc-full"), tok)]
            random.shuffle(reqs)
            for req, r in zip(reqs, burst(self.d.port, reqs)):
                self.assertIsInstance(r, harness.Response, "%s %s: %r" % (req[0], req[1], r))
                method, path, body = req[0], req[1], req[2]
                if method == "POST" and path == "/v1/tenants":
                    self.assertError(r, 409, "conflict")
                elif method == "DELETE" and path.endswith("a-0000000000000000"):
                    self.assertError(r, 404, "not_found")
                elif method == "POST" and body["tenant"] == "gc-full":
                    self.assertEqual(r.status, 429, "%r" % r)
                    self.assertEqual(r.body["error"]["field"], "limits.max_live", "%r" % r)
                elif method == "POST":
                    self.assertStatus(r, 201)
                    self.assertEqual(r.body["name"], body["name"])
                    self.assertIn(r.body["state"], ("active", "pending"), "%r" % r)
                    created.append(r.body)
                else:
                    self.assertStatus(r, 200)
                    self.assertEqual(r.body["state"], "released", "%r" % r)
                    released.append(r.body["id"])
        after = commits(self.d)
        n_ok = len(created) + len(released)
        self.assertGreaterEqual(after["commits"] - before["commits"], n_ok, after)
        # what the burst committed shared flushes
        self.assertLess(after["syncs"] - before["syncs"], after["commits"] - before["commits"],
                        (before, after))
        # each answer is what is stored; the failing members changed nothing
        for a in created:
            g = self.admin.get("/v1/allocations/" + a["id"])
            self.assertStatus(g, 200)
            self.assertEqual((g.body["name"], g.body["tenant"]), (a["name"], "gc"))
            if a["state"] == "active":  # a pending one may have started since
                self.assertEqual((g.body["state"], g.body["nodes"]), ("active", a["nodes"]))
        for aid in released:
            self.assertEqual(self.admin.get("/v1/allocations/" + aid).body["state"], "released")
        full = [a for a in self.admin.list_all("/v1/allocations?tenant=gc-full")]
        self.assertEqual(len(full), 1, full)
        names = [t["name"] for t in self.admin.list_all("/v1/tenants")]
        self.assertEqual(names.count("gc"), 1)
        # memory equals the store: a restart rebuilds the same view from it
        mem = self.snapshot()
        self.d.stop()
        self.d.start()
        self.admin = self.d.client()
        self.assertEqual(self.snapshot(), mem)

    def test_kill9_under_concurrent_load_loses_nothing_answered(self):
        self.assertStatus(self.admin.post("/v1/tenants", {"name": "kc"}), 201)
        lock = threading.Lock()
        acked = {}      # id -> the state answered: "active", "pending", "released"
        failures = []
        killed = threading.Event()

        def worker(seed):
            rnd = random.Random(seed)
            conn = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=T(30))
            hdrs = {"Authorization": "Bearer " + self.d.admin_token,
                    "Content-Type": "application/json"}
            mine = []
            try:
                while not killed.is_set():
                    if mine and rnd.random() < 0.4:
                        aid = mine.pop(rnd.randrange(len(mine)))
                        with lock:  # sent, not answered: either state may be stored
                            acked[aid] = "maybe-released:" + acked[aid]
                        conn.request("DELETE", "/v1/allocations/" + aid, headers=hdrs)
                        r = conn.getresponse()
                        body = json.loads(r.read() or b"null")
                        if r.status != 200:
                            failures.append(("release", r.status, body))
                            return
                        with lock:
                            acked[aid] = "released"
                    else:
                        conn.request("POST", "/v1/allocations", headers=hdrs,
                                     body=json.dumps(dict(CPU, tenant="kc")))
                        r = conn.getresponse()
                        body = json.loads(r.read() or b"null")
                        if r.status != 201:
                            failures.append(("create", r.status, body))
                            return
                        with lock:
                            acked[body["id"]] = body["state"]  # active, or pending when full
                        mine.append(body["id"])
            except TRANSPORT_ERRORS as e:
                if not killed.is_set():
                    failures.append(("transport", repr(e)))
            finally:
                conn.close()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(16)]
        for t in threads:
            t.start()
        # at a random moment once a few hundred answers are in
        self.wait_until("answers come in", lambda: len(acked) >= 200 or failures)
        self.assertEqual(failures, [])
        time.sleep(random.uniform(0, 0.3))
        stats = commits(self.d)
        killed.set()
        self.d.kill()
        for t in threads:
            t.join(T(60))
            self.assertFalse(t.is_alive(), "a client hangs after the kill")
        self.assertEqual(failures, [])
        self.assertLess(stats["syncs"], stats["commits"], stats)
        # the start checks the log against its signed heads (and refuses a
        # broken one), then signs over what the crash left unsigned
        self.d.start()
        self.admin = self.d.client()
        for aid, state in sorted(acked.items()):
            r = self.admin.get("/v1/allocations/" + aid)
            self.assertStatus(r, 200, "answered allocation %s lost" % aid)
            if state.startswith("maybe-released:"):
                state = state.split(":")[1]
                want = ("released", "active") if state == "active" else ("released", "pending",
                                                                         "active")
            else:
                want = ("pending", "active") if state == "pending" else (state,)
            self.assertIn(r.body["state"], want, "allocation %s: %r" % (aid, r))
        # and the whole log verifies offline (exported straight from SQLite's
        # file, or through the API from PostgreSQL)
        out = os.path.join(self.d.tmp, "audit.export")
        env = dict(os.environ, ISOSTACK_URL=self.d.url(), ISOSTACK_TOKEN=self.d.admin_token)
        if self.store_args():
            export = ["audit", "export", "--out", out]
        else:
            self.d.stop()
            export = ["audit", "export", "--state-dir", self.d.state_dir, "--out", out]
        for argv in (export,
                     ["audit", "verify", "--pubkey", os.path.join(self.d.state_dir, "audit.pub"),
                      out]):
            p = subprocess.run([harness.Binaries.isoctl] + argv, capture_output=True, text=True,
                               timeout=T(120), env=env)
            self.assertEqual(p.returncode, 0, "isoctl %s: %s%s" % (argv[:2], p.stdout, p.stderr))

    def test_failed_flush_answers_every_member_5xx_and_stops(self):
        if self.store_args():
            self.skipTest("the fsync shim fails SQLite's WAL flush")
        shim = os.environ.get("ISO_FAIL_FSYNC") or os.path.join(
            os.path.dirname(harness.Binaries.isostackd), "tests", "fakes",
            "libiso_fail_fsync.so")
        if not os.path.exists(shim):
            self.skipTest("no %s (tests/fakes/fail_fsync.c)" % shim)
        trigger = os.path.join(self.d.tmp, "fail-fsync")
        self.d.stop()
        self.d.env["LD_PRELOAD"] = shim
        self.d.env["ISO_FAIL_FSYNC_TRIGGER"] = trigger
        # an ASan build wants its runtime first; the shim only wraps two calls
        self.d.env["ASAN_OPTIONS"] = (self.d.env.get("ASAN_OPTIONS", "") +
                                      ":verify_asan_link_order=0").lstrip(":")
        self.d.start()
        self.admin = self.d.client()
        tok = self.d.admin_token
        self.assertStatus(self.admin.post("/v1/tenants", {"name": "ff"}), 201)
        before = burst(self.d.port, [("POST", "/v1/allocations", dict(CPU, tenant="ff"), tok)] * 8)
        for r in before:
            self.assertStatus(r, 201)
        with open(trigger, "w"):
            pass
        after = burst(self.d.port, [("POST", "/v1/allocations", dict(CPU, tenant="ff"), tok)] * 16)
        failed = 0
        for r in after:
            if isinstance(r, harness.Response):
                # the flush failed under it (500), or it came after and nothing
                # more was committed (503); never a success
                self.assertIn(r.status, (500, 503), "%r" % r)
                if r.status == 500:
                    self.assertIn("could not make the change durable", r.body["error"]["message"])
                    failed += 1
            else:
                self.assertIsInstance(r, TRANSPORT_ERRORS)  # refused: the daemon stopped
        self.assertGreater(failed, 0, after)
        self.d.proc.wait(T(30))
        rc = self.d.proc.returncode
        self.d.proc = None
        self.assertEqual(rc, 1, self.d.stderr_tail())
        self.assertIn("store_sync_failed", self.d.stderr_text())
        # what was answered before is there after a start on the same disk
        os.unlink(trigger)
        self.d.start()
        self.admin = self.d.client()
        for r in before:
            self.assertStatus(self.admin.get("/v1/allocations/" + r.body["id"]), 200)

    def test_off_flushes_every_commit(self):
        self.d.stop()
        self.d.extra_args += ["--group-commit", "off"]
        self.d.start()
        self.admin = self.d.client()
        self.assertStatus(self.admin.post("/v1/tenants", {"name": "off"}), 201)
        before = commits(self.d)
        self.assertFalse(before["group"], before)
        reqs = [("POST", "/v1/allocations", dict(CPU, tenant="off"), self.d.admin_token)] * 16
        for r in burst(self.d.port, reqs):
            self.assertStatus(r, 201)
        after = commits(self.d)
        self.assertGreaterEqual(after["commits"] - before["commits"], 16)
        self.assertEqual(after["syncs"], 0)

    def test_bad_flag_value(self):
        p = subprocess.run([harness.Binaries.isostackd, "--config", self.d.config,
                            "--group-commit", "maybe"], capture_output=True, text=True,
                           timeout=T(30))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--group-commit: \"maybe\" is neither on nor off", p.stderr)


@needs_postgres
class TestGroupCommitPostgres(TestGroupCommit):
    """Every test above with isostackd --store CONNINFO, a database per test."""

    @classmethod
    def setUpClass(cls):
        cls.pg = PgCluster("iso-pg-gc-")
        cls.dir, cls.base = cls.pg.dir, cls.pg.base

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()

    def store_args(self):
        if not getattr(self, "conninfo", None):
            self.conninfo = self.pg.fresh_db("iso_gc")
        return ["--store", self.conninfo]

    def psql(self, sql):
        p = subprocess.run(["psql", self.base, "-XtAq", "-c", sql], capture_output=True,
                           text=True, timeout=T(30))
        return p.returncode, p.stdout.strip()

    def test_postgres_crash_under_load_loses_nothing_answered(self):
        """The server itself crashes under 16 clients' creates, and every
        create answered 201 is there after its crash recovery: each was
        flushed by a sync before its answer. To make unflushed commits stay
        unflushed, the WAL writer is stopped (SIGSTOP) during the load, so
        WAL reaches the disk only when a backend flushes it itself, as the
        sync does; the crash is a SIGKILL of that WAL writer, after which
        the postmaster kills every backend, drops shared memory with its WAL
        buffers, and recovers from the WAL on disk."""
        rc, out = self.psql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")
        self.assertEqual(rc, 0, out)
        walwriter = int(out)
        self.assertStatus(self.admin.post("/v1/tenants", {"name": "pc"}), 201)
        lock = threading.Lock()
        acked = []
        stop = threading.Event()

        def worker():
            conn = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=T(30))
            hdrs = {"Authorization": "Bearer " + self.d.admin_token,
                    "Content-Type": "application/json"}
            try:
                while not stop.is_set():
                    conn.request("POST", "/v1/allocations", headers=hdrs,
                                 body=json.dumps(dict(CPU, tenant="pc")))
                    r = conn.getresponse()
                    body = json.loads(r.read() or b"null")
                    if r.status != 201:
                        return  # the crash: 5xx, then the daemon stops
                    with lock:
                        acked.append(body["id"])
            except TRANSPORT_ERRORS:
                pass
            finally:
                conn.close()

        os.kill(walwriter, signal.SIGSTOP)
        try:
            threads = [threading.Thread(target=worker, daemon=True) for _ in range(16)]
            for t in threads:
                t.start()
            self.wait_until("answers come in", lambda: len(acked) >= 300)
            time.sleep(random.uniform(0, 0.2))
        finally:
            os.kill(walwriter, signal.SIGKILL)  # the crash (a stopped process dies too)
        stop.set()
        for t in threads:
            t.join(T(60))
        self.d.kill()
        with lock:
            answered = list(acked)
        self.wait_until("PostgreSQL recovered", lambda: self.psql("SELECT 1") == (0, "1"))
        self.d.start()
        self.admin = self.d.client()
        self.assertStatus(self.admin.get("/v1/tenants/pc"), 200, "the answered tenant is lost")
        stored = {a["id"] for a in self.admin.list_all("/v1/allocations?tenant=pc")}
        lost = [a for a in answered if a not in stored]
        self.assertEqual(lost, [], "%d of %d answered creates lost" % (len(lost), len(answered)))

    def test_store_is_postgres(self):
        v = self.admin.get("/v1/version")
        self.assertEqual((v.body["store"], v.body["commits"]["group"]), ("postgres", True),
                         v.body)


if __name__ == "__main__":
    harness.main()

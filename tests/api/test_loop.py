#!/usr/bin/env python3
"""test_loop.py: isostackd's one event loop (src/api/loop.c,
docs/architecture.md, "One event loop") against a real daemon:
- it idles with exactly the threads documented: the loop (the main thread)
  and the deferred worker, none of libmicrohttpd's own and no sweeper;
- it serves 2,000 connections at once (more than select's FD_SETSIZE of
  1,024: the loop waits with epoll) while healthz still answers;
- the tick runs while requests stream in: a long poll's wait_s deadline,
  which only the tick answers, is met under a stream from several clients;
- SIGTERM answers what waits before the exit: a parked long poll gets its
  200 and a held refusal its 429, not a closed connection.
(A slow fabric verify off the loop: test_protocol.py, TestVerifyOffThread.)

Run: python3 tests/api/test_loop.py PATH/TO/isostackd PATH/TO/isoctl
"""

import http.client
import os
import resource
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T, create_tenant, issue_token  # noqa: E402

AGENTS = "agents.yaml"  # ag-n01, ag-n02 (tests/api/test_agents.py)
NODE = "ag-n01"
N_CONNS = 2000


class LoopCase(ApiTestCase):
    daemon_args = ()

    def setUp(self):
        self.d = Daemon(AGENTS, extra_args=self.daemon_args)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()

    def tearDown(self):
        try:
            if self.d.alive():
                self.d.stop()
        finally:
            self.d.cleanup()

    def generation(self):
        r = self.admin.get("/v1/nodes/%s/desired" % NODE)
        self.assertStatus(r, 200)
        return r.body["generation"]

    def long_poll(self, after, wait_s, out):
        """GET desired?after=&wait_s= on a thread: (response or exception, seconds)."""
        def run():
            t0 = time.monotonic()
            try:
                r = harness.http_request(
                    self.d.port, "GET", "/v1/nodes/%s/desired?after=%d&wait_s=%d"
                    % (NODE, after, wait_s), token=self.d.admin_token, timeout=T(90))
            except Exception as e:  # noqa: BLE001 (a closed connection is the failure)
                r = e
            out.append((r, time.monotonic() - t0))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t


class TestThreads(LoopCase):
    def test_idle_daemon_runs_the_loop_and_the_worker_only(self):
        # a request first, so that anything started lazily has started
        self.assertStatus(self.admin.get("/v1/fabric/verify"), 200)
        time.sleep(0.2)  # ordering only: the verify's connection is closed
        task = "/proc/%d/task" % self.d.proc.pid
        names = []
        for tid in os.listdir(task):
            with open(os.path.join(task, tid, "comm")) as f:
                names.append(f.read().strip())
        self.assertEqual(sorted(names), ["iso-worker", "isostackd"],
                         "threads of an idle isostackd (sim fabric): %r" % names)


class TestManyConnections(LoopCase):
    daemon_args = ("--max-connections", str(N_CONNS + 500),
                   "--max-connections-per-address", str(N_CONNS + 500),
                   "--header-timeout", "120")

    @classmethod
    def setUpClass(cls):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = N_CONNS * 2 + 256  # ours and the daemon's (it inherits the limit)
        if hard != resource.RLIM_INFINITY and hard < want:
            raise harness.unittest.SkipTest("RLIMIT_NOFILE hard limit %d < %d" % (hard, want))
        cls.old_nofile = (soft, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))

    @classmethod
    def tearDownClass(cls):
        resource.setrlimit(resource.RLIMIT_NOFILE, cls.old_nofile)

    def test_two_thousand_connections_are_served(self):
        socks = []
        try:
            for _ in range(N_CONNS):
                socks.append(socket.create_connection(("127.0.0.1", self.d.port), timeout=T(30)))
            # every one of them is served: a request each, kept alive
            req = b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            for s in socks:
                s.sendall(req)
            for i, s in enumerate(socks):
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = s.recv(4096)
                    self.assertTrue(chunk, "connection %d closed without an answer" % i)
                    data += chunk
                self.assertTrue(data.startswith(b"HTTP/1.1 200"), "connection %d: %r" % (i, data[:80]))
            # all still open, and a new client is answered
            self.assertStatus(self.d.request("GET", "/v1/healthz"), 200)
            r = self.admin.get("/v1/tenants")
            self.assertStatus(r, 200)
        finally:
            for s in socks:
                s.close()
        self.assertNotIn("http_server", self.d.stderr_text(), "libmicrohttpd complained")


class TestTickUnderLoad(LoopCase):
    def test_long_poll_deadline_is_met_while_requests_stream_in(self):
        """Only the tick answers a long poll at its wait_s. A loop that ran
        the tick only when libmicrohttpd had nothing to do would answer it
        seconds late (or never) under this stream."""
        stop = threading.Event()
        counts = []

        def stream():
            # pipelined requests, so that the server always has one to answer
            s = socket.create_connection(("127.0.0.1", self.d.port), timeout=T(30))
            batch = b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 200
            n = 0
            pending = b""
            try:
                while not stop.is_set():
                    s.sendall(batch)
                    got = 0
                    while got < 200:
                        chunk = s.recv(65536)
                        if not chunk:
                            return
                        pending += chunk
                        got += pending.count(b"HTTP/1.1 200")
                        pending = pending[pending.rfind(b"HTTP/1.1 200") + 1:] \
                            if b"HTTP/1.1 200" in pending else pending
                    n += got
            finally:
                s.close()
                counts.append(n)

        g = self.generation()
        streams = [threading.Thread(target=stream, daemon=True) for _ in range(6)]
        for t in streams:
            t.start()
        try:
            time.sleep(0.3)  # ordering only: the stream is flowing
            for _ in range(3):
                out = []
                self.long_poll(g, 1, out).join(T(30))
                self.assertEqual(len(out), 1, "the long poll was not answered")
                r, took = out[0]
                self.assertStatus(r, 200)
                self.assertEqual(r.body["generation"], g, "answered at wait_s, unchanged")
                # wait_s is 1 s and the tick comes every 50 ms: seconds late
                # would be the tick starved by the stream
                self.assertLess(took, 1.0 + T(1.0), "answered %.2f s after a 1 s wait_s" % took)
        finally:
            stop.set()
            for t in streams:
                t.join(T(30))
        self.assertGreater(sum(counts), 50, "the stream did not flow: %r" % counts)


class TestStopAnswersWaiters(LoopCase):
    daemon_args = ("--tenant-reads-per-s", "1")

    def test_sigterm_answers_long_polls_and_held_refusals(self):
        tenant = create_tenant(self, self.admin)["name"]
        _, secret = issue_token(self, self.admin, "tenant-user", tenant=tenant)
        g = self.generation()
        polls = []
        threads = [self.long_poll(g, 60, polls) for _ in range(3)]
        # a tenant past its read rate (burst 2): three reads at once, of
        # which at most one finds a token; the others' 429s are held a second
        for _ in range(3):
            harness.http_request(self.d.port, "GET", "/v1/allocations", token=secret)
        held = []

        def ask():
            try:
                held.append(harness.http_request(self.d.port, "GET", "/v1/allocations",
                                                 token=secret, timeout=T(30)).status)
            except Exception as e:  # noqa: BLE001 (a closed connection is the failure)
                held.append(e)
        asks = [threading.Thread(target=ask, daemon=True) for _ in range(3)]
        for t in asks:
            t.start()
        time.sleep(0.3)  # ordering only: the polls are parked, the refusals held
        self.d.proc.send_signal(signal.SIGTERM)
        for t in threads + asks:
            t.join(T(20))
            self.assertFalse(t.is_alive(), "a waiting request outlived the daemon")
        self.assertEqual(len(polls), 3)
        for r, _ in polls:
            self.assertIsInstance(r, harness.Response, "a long poll got %r, not an answer" % r)
            self.assertStatus(r, 200)
            self.assertEqual(r.body["node"], NODE)
        self.assertTrue(all(x in (200, 429) for x in held), "answers: %r" % held)
        self.assertGreaterEqual(held.count(429), 2, "answers: %r" % held)
        self.d.stop()  # exit status 0, no sanitizer report


if __name__ == "__main__":
    harness.main()

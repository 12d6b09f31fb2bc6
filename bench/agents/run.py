#!/usr/bin/env python3
"""run.py: how does one isostackd hold up with 100, 1,000 and 10,000 node agents?

Why this exists: isostack issue 13 ("Benchmark (bench/agents ...)"). The node
agents' protocol (docs/agents.md) puts one long poll and one status report per
node per heartbeat on the controller, and the provisioning gate puts an agent
round trip inside every allocation's create -> active. This script measures
both against a real isostackd on loopback, with N simulated agents that speak
the real protocol, so that the goals (p99 create -> ready under 250 ms with
1,000 agents; 10,000 agents connected with the controller under 25% of one
core at idle; a silent node unreachable within lease + 1 s) are checked by a
command anyone can run, not argued.

    python3 bench/agents/run.py [--build build] [--quick] [--sizes 100,1000,10000]
                                [--lease-s 10] [--heartbeat-s 3] [--creates 200]
                                [--members 2] [--idle-s 10] [--silent 3]
                                [--gpus-per-node 8] [--json PATH]
    python3 bench/agents/run.py --self-test --build build

For each N (everything on loopback, in one temp dir, stopped and removed on
any exit):
  1. Writes an inventory of N nodes of 8 H100-80GB with MIG on
     (bench/agents/inventory.py) and starts isostackd on it WITHOUT --no-agents
     (the provisioning gate holds), with --agent-lease-s, and
     --max-connections, --max-connections-per-address and --agent-max-waiters
     raised to fit N agents on one loopback address. The script raises its own
     RLIMIT_NOFILE (the daemon inherits it).
  2. Idle baseline: the controller's CPU share (utime+stime from
     /proc/PID/stat over --idle-s) and RSS with no agent connected.
  3. Starts the agents: ceil(N / 2,500) processes of this file (--worker),
     each driving its agents on non-blocking sockets with one epoll selector.
     Each agent does what isostack-agent does (docs/agent.md, "What it does"),
     on one keep-alive connection: GET /v1/nodes/{n}/desired?after=G&wait_s=H
     (H = --heartbeat-s, the agent's default 3 = a third of the default lease),
     then PUT /v1/nodes/{n}/status with the GPUs of the document and every
     desired instance reported created and ready (a MIG UUID made up from the
     node, GPU and start), then the next long poll. So an idle agent sends one
     long poll and one heartbeat every H seconds, and a changed document is
     answered within one round trip. The agents authenticate with the
     bootstrap cluster-admin token, which may act for any node (docs/agents.md;
     a node-agent token costs the same per request: one cached token check).
     Connections are opened at most 256 at a time; "connected" is the time
     until every agent's first status was answered 204.
  4. Memory per connected agent: (RSS after all connected and one heartbeat
     period - RSS idle) / N. CPU at idle heartbeats: the same window as the
     baseline, with every agent connected and nothing changing; the requests
     the agents made in the window are counted.
  5. create -> ready: --creates times, as a tenant-user: POST /v1/allocations
     (--members members of one 3g.40gb, pool mig), then GET the allocation
     on one keep-alive connection until it is `active` (or failed, or 10 s),
     then DELETE it. Reported: p50/p99/max of POST -> active seen, and the
     POST's own latency (the baseline in the same run: the part of
     create -> ready that is not the agents' round trip).
  6. Unreachable: --silent agents (spread over the node list) stop right
     after a status was answered (so the time of their last heartbeat is
     known, on CLOCK_MONOTONIC shared by the processes), and never send
     again; GET /v1/nodes/{n} every 20 ms until `state` is `unreachable`.
     Reported: last heartbeat -> unreachable, against the lease.
  7. Stops the agents and the daemon (SIGTERM, exit 0, no sanitizer report).

--quick: N = 100 only, lease 3 s, heartbeat 1 s, 2 s idle windows, 30
creates, 1 silent node (about 15 s). Timing is reported, never asserted:
exit 0 when every step ran, 1 when the daemon died, did not stop cleanly,
or a step failed (agents that never connected, an allocation that never went
active). Results go to BUILD/agents-bench.json (--json) and a table on stdout.

--self-test checks that the bench is wired right against a real isostackd
(3 nodes, short lease), without timing: an allocation made before any agent
runs stays `provisioning` waiting for an agent (so create -> ready measures
the gate), the simulated agents make it active, every agent is shown
connected, a silenced agent's node becomes unreachable and only that one, and
the agents saw no error. It runs with the API tests (`meson test
agents_bench_selftest`); the bench itself is `meson test --benchmark agents`
/ `agents-quick`.

The agents and the daemon share this machine's cores: say which machine
numbers come from.
"""

import argparse
import heapq
import json
import math
import os
import platform
import resource
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
sys.path.insert(0, HERE)

import inventory  # noqa: E402 - bench/agents/inventory.py

AGENTS_PER_WORKER = 2500
RAMP = 256  # agents in their first turn at once
GPU_MODEL = "NVIDIA H100 80GB HBM3"
ALLOC_NAME = "agb"
POLL_GAP_S = 0.002  # create -> ready: the allocation is read again this often
NODE_POLL_GAP_S = 0.020


def percentile(sorted_vals, q):
    """Nearest rank; None when there are no samples."""
    if not sorted_vals:
        return None
    k = max(0, math.ceil(q * len(sorted_vals)) - 1)
    return sorted_vals[k]


# ---------------------------------------------------------------- the simulated agents


def status_body(node, term, doc):
    """What isostack-agent reports for `doc` once every desired instance is
    made: the document's GPUs, each instance (or whole GPU) ready with a UUID."""
    gpus, inst = [], []
    for g in doc["gpus"]:
        gpus.append({"index": g["index"], "model": GPU_MODEL,
                     "uuid": "GPU-%s-%d" % (node, g["index"]),
                     "mig_mode": "enabled" if g["mig"] else "disabled"})
        for i in g["instances"]:
            inst.append({"gpu": g["index"], "start": i["start"], "profile": i["profile"],
                         "uuid": "MIG-%s-%d-%d" % (node, g["index"], i["start"]),
                         "allocation": i["allocation"], "member": i["member"], "ready": True})
        if g.get("whole"):
            w = g["whole"]
            inst.append({"gpu": g["index"], "start": 0, "profile": "whole",
                         "uuid": "GPU-%s-%d" % (node, g["index"]),
                         "allocation": w["allocation"], "member": w["member"], "ready": True})
    return json.dumps({"term_seen": term, "version": "bench-agents", "gpus": gpus,
                       "instances": inst}, separators=(",", ":")).encode()


def parse_response(buf):
    """(status, headers dict lower-cased, body, bytes used), or None when `buf`
    does not hold a whole response yet. Responses carry Content-Length
    (libmicrohttpd's buffers); a chunked answer is an error."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError("bad status line %r" % lines[0][:80])
    status = int(parts[1])
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise ValueError("chunked answer")
    n = int(headers.get("content-length", "0"))
    if len(buf) < end + 4 + n:
        return None
    return status, headers, bytes(buf[end + 4:end + 4 + n]), end + 4 + n


class Agent:
    __slots__ = ("node", "sock", "phase", "inbuf", "out", "applied", "body", "term",
                 "last_ok", "first_done", "silence", "backoff", "get_head", "put_head", "sent",
                 "accepted")

    def __init__(self, node, token, heartbeat_s):
        self.node = node
        self.sock = None
        self.phase = "idle"  # idle, connecting, get, put, silent
        self.inbuf = bytearray()
        self.out = b""
        self.applied = 0
        self.body = None
        self.term = 0
        self.last_ok = None
        self.first_done = False
        self.silence = False
        self.backoff = 0.5
        self.sent = 0.0  # when the request in flight was sent
        # the status body the controller last accepted on this connection:
        # while the status is unchanged the long poll (heartbeat=1) is the
        # heartbeat, as isostack-agent does (docs/agent.md)
        self.accepted = None
        auth = "Authorization: Bearer %s\r\nHost: 127.0.0.1\r\n" % token
        self.get_head = ("GET /v1/nodes/%s/desired?after=%%d&wait_s=%d%%s HTTP/1.1\r\n%s\r\n"
                         % (node, heartbeat_s, auth))
        self.put_head = ("PUT /v1/nodes/%s/status HTTP/1.1\r\n%sContent-Type: application/json"
                         "\r\nContent-Length: %%d\r\n\r\n" % (node, auth))


class AgentPool:
    """N agents on one epoll selector. Counters are what the parent reads."""

    def __init__(self, port, token, nodes, heartbeat_s, emit, ramp=RAMP):
        self.port = port
        self.ramp = ramp
        self.sel = selectors.DefaultSelector()
        self.agents = {n: Agent(n, token, heartbeat_s) for n in nodes}
        self.todo = list(reversed(nodes))  # not started yet
        self.starting = 0
        self.timers = []  # (when, seq, agent)
        self.seq = 0
        self.emit = emit
        self.c = {"gets": 0, "puts": 0, "get_changed": 0, "heartbeat_gets": 0, "connected": 0,
                  "reconnects": 0, "errors": {}, "silenced": {}}
        # Round trips since the last "stats", in 0.1 ms: status reports (the
        # heartbeat), and each agent's first GET of its document (answered at
        # once: after=0).
        self.put_rt = []
        self.first_rt = []
        self.connected_reported = False

    def bump_error(self, what):
        self.c["errors"][what] = self.c["errors"].get(what, 0) + 1

    def start_some(self):
        while self.todo and self.starting < self.ramp:
            a = self.agents[self.todo.pop()]
            self.starting += 1
            self.connect(a)

    def connect(self, a):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        except OSError as e:
            s.close()
            self.fail(a, "connect:%s" % type(e).__name__)
            return
        a.sock = s
        a.phase = "connecting"
        a.inbuf = bytearray()
        self.sel.register(s, selectors.EVENT_WRITE, a)

    def close(self, a):
        if a.sock is not None:
            try:
                self.sel.unregister(a.sock)
            except (KeyError, ValueError):
                pass
            a.sock.close()
            a.sock = None

    def fail(self, a, what):
        """A transport failure or an error answer: back off (0.5 s doubling
        to 10 s, as isostack-agent does) and start the turn again."""
        self.bump_error(what)
        self.close(a)
        a.accepted = None  # a status goes again once the controller is back
        a.phase = "idle"
        self.seq += 1
        heapq.heappush(self.timers, (time.monotonic() + a.backoff, self.seq, a))
        a.backoff = min(10.0, a.backoff * 2)

    def send(self, a, data, phase):
        a.phase = phase
        a.out = data
        self.flush(a)

    def flush(self, a):
        try:
            n = a.sock.send(a.out)
        except BlockingIOError:
            n = 0
        except OSError as e:
            self.fail(a, "send:%s" % type(e).__name__)
            return
        a.out = a.out[n:]
        self.sel.modify(a.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if a.out else 0), a)

    def send_get(self, a):
        self.c["gets"] += 1
        a.sent = time.monotonic()
        self.send(a, (a.get_head % (a.applied, "&heartbeat=1" if a.accepted else "")).encode(), "get")

    def send_put(self, a):
        self.c["puts"] += 1
        a.sent = time.monotonic()
        self.send(a, (a.put_head % len(a.body)).encode() + a.body, "put")

    def on_writable(self, a):
        if a.phase == "connecting":
            err = a.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self.fail(a, "connect:%d" % err)
                return
            self.send_get(a)
        elif a.out:
            self.flush(a)

    def on_readable(self, a):
        try:
            data = a.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError as e:
            self.fail(a, "recv:%s" % type(e).__name__)
            return
        if not data:
            self.fail(a, "closed_by_server:%s" % a.phase)
            return
        a.inbuf += data
        try:
            got = parse_response(a.inbuf)
        except ValueError as e:
            self.fail(a, "bad_answer:%s" % e)
            return
        if got is None:
            return
        status, headers, body, used = got
        del a.inbuf[:used]
        keep = headers.get("connection", "").lower() != "close"
        if a.phase == "get":
            if status != 200:
                self.fail(a, "get:%d" % status)
                return
            doc = json.loads(body)
            if doc["generation"] != a.applied or a.body is None:
                if a.body is None:
                    self.first_rt.append(int((time.monotonic() - a.sent) * 10000))
                else:
                    self.c["get_changed"] += 1
                a.applied = doc["generation"]
                a.term = doc["term"]
                a.body = status_body(a.node, a.term, doc)
            if a.accepted is not None and a.accepted == a.body:
                # unchanged: this long poll was the heartbeat (renewed when it arrived)
                self.c["heartbeat_gets"] += 1
                a.last_ok = a.sent
                if a.silence:
                    self.go_silent(a)
                    return
                if not keep:
                    self.reconnect(a)
                    return
                self.send_get(a)
                return
            if not keep:
                self.reconnect(a, then_put=True)
                return
            self.send_put(a)
        elif a.phase == "put":
            if status != 204:
                self.fail(a, "put:%d" % status)
                return
            a.last_ok = time.monotonic()
            a.accepted = a.body
            self.put_rt.append(int((a.last_ok - a.sent) * 10000))
            a.backoff = 0.5
            if not a.first_done:
                a.first_done = True
                self.starting -= 1
                self.c["connected"] += 1
                self.start_some()
                if self.c["connected"] == len(self.agents) and not self.connected_reported:
                    self.connected_reported = True
                    self.emit({"event": "connected", "n": self.c["connected"],
                               "t": time.monotonic()})
            if a.silence:
                self.go_silent(a)
                return
            if not keep:
                self.reconnect(a)
                return
            self.send_get(a)

    def go_silent(self, a):
        self.close(a)
        a.phase = "silent"
        self.c["silenced"][a.node] = a.last_ok
        self.emit({"event": "silenced", "node": a.node, "last_ok": a.last_ok})

    def reconnect(self, a, then_put=False):
        """The server closed a kept-alive connection after an answer: a new
        connection for the next request (counted)."""
        self.c["reconnects"] += 1
        self.close(a)
        self.connect(a)
        if then_put and a.sock is not None:
            a.phase = "connecting_put"

    def run_timers(self):
        now = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            _, _, a = heapq.heappop(self.timers)
            if a.phase == "idle":
                self.connect(a)

    def step(self, timeout):
        """One round of the selector; True when the command pipe is readable."""
        wait = timeout
        pipe = False
        if self.timers:
            wait = max(0.0, min(wait, self.timers[0][0] - time.monotonic()))
        for key, mask in self.sel.select(wait):
            a = key.data
            if a is None:
                pipe = True  # the command pipe: handled by the caller
                continue
            if mask & selectors.EVENT_WRITE and a.phase == "connecting_put":
                err = a.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    self.fail(a, "connect:%d" % err)
                    continue
                self.send_put(a)
                continue
            if mask & selectors.EVENT_WRITE:
                self.on_writable(a)
            if mask & selectors.EVENT_READ and a.sock is not None:
                self.on_readable(a)
        self.run_timers()
        return pipe

    def stats(self):
        """The counters, and the round trips since the last call (then cleared)."""
        out = dict(self.c, errors=dict(self.c["errors"]), silenced=dict(self.c["silenced"]),
                   agents=len(self.agents), t=time.monotonic(), put_rt=self.put_rt,
                   first_rt=self.first_rt)
        self.put_rt, self.first_rt = [], []
        return out


def worker_main():
    """One process of agents: parameters on the first line of stdin, then one
    command a line ({"cmd": "stats" | "silence" | "quit"}); events and
    answers as JSON lines on stdout."""
    p = json.loads(sys.stdin.readline())

    def emit(obj):
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    pool = AgentPool(p["port"], p["token"], p["nodes"], p["heartbeat_s"], emit,
                     p.get("ramp", RAMP))
    stdin_fd = sys.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    pool.sel.register(stdin_fd, selectors.EVENT_READ, None)
    pending = b""
    pool.start_some()
    while True:
        if pool.step(0.05):
            try:
                chunk = os.read(stdin_fd, 65536)
            except BlockingIOError:
                chunk = b""
            if not chunk and not pending:
                chunk = None
            if chunk is None:
                break  # the parent is gone
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                cmd = json.loads(line)
                if cmd["cmd"] == "stats":
                    emit(dict(pool.stats(), reply="stats"))
                elif cmd["cmd"] == "silence":
                    for n in cmd["nodes"]:
                        if n in pool.agents:
                            pool.agents[n].silence = True
                elif cmd["cmd"] == "quit":
                    for a in pool.agents.values():
                        pool.close(a)
                    emit(dict(pool.stats(), reply="quit"))
                    return 0
    return 0


class Workers:
    """The agent processes of one run, and what they said."""

    def __init__(self, port, token, nodes, heartbeat_s):
        self.procs = []
        self.events = []
        self.replies = []
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        k = max(1, math.ceil(len(nodes) / AGENTS_PER_WORKER))
        for i in range(k):
            part = nodes[i::k]
            pr = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            pr.stdin.write((json.dumps({"port": port, "token": token, "nodes": part,
                                        "heartbeat_s": heartbeat_s}) + "\n").encode())
            pr.stdin.flush()
            self.procs.append(pr)
            threading.Thread(target=self.reader, args=(i, pr), daemon=True).start()

    def reader(self, i, pr):
        for line in pr.stdout:
            msg = json.loads(line)
            msg["worker"] = i
            with self.cond:
                (self.replies if "reply" in msg else self.events).append(msg)
                self.cond.notify_all()

    def command(self, cmd):
        for pr in self.procs:
            pr.stdin.write((json.dumps(cmd) + "\n").encode())
            pr.stdin.flush()

    def wait_events(self, kind, count, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = [e for e in self.events if e["event"] == kind]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0 or any(pr.poll() is not None for pr in self.procs):
                    return got
                self.cond.wait(min(left, 0.2))

    def ask(self, cmd, timeout=30):
        """Sends cmd to every worker; their replies (one each), merged."""
        with self.cond:
            self.replies = []
        self.command({"cmd": cmd})
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.replies) < len(self.procs) and time.monotonic() < deadline:
                self.cond.wait(0.2)
            reps = list(self.replies)
        total = {"gets": 0, "puts": 0, "get_changed": 0, "heartbeat_gets": 0, "connected": 0,
                 "reconnects": 0,
                 "agents": 0, "errors": {}, "workers_answered": len(reps)}
        put_rt, first_rt = [], []
        for r in reps:
            put_rt += r["put_rt"]
            first_rt += r["first_rt"]
            for k in ("gets", "puts", "get_changed", "heartbeat_gets", "connected", "reconnects",
                      "agents"):
                total[k] += r[k]
            for k, v in r["errors"].items():
                total["errors"][k] = total["errors"].get(k, 0) + v
        total["put_rt_ms"] = summary_ms([v / 10 for v in put_rt])
        total["first_get_rt_ms"] = summary_ms([v / 10 for v in first_rt])
        return total

    def cpu_s(self):
        """CPU seconds the agent processes have used."""
        return sum(proc_cpu_s(pr.pid) for pr in self.procs if pr.poll() is None)

    def stop(self):
        try:
            final = self.ask("quit", timeout=15)
        except (BrokenPipeError, OSError):
            final = None
        for pr in self.procs:
            try:
                pr.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pr.kill()
                pr.wait()
        return final


# ---------------------------------------------------------------- the controller's side


def proc_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def cpu_window(pid, seconds):
    """The process's CPU share of one core over `seconds`."""
    c0, t0 = proc_cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    c1, t1 = proc_cpu_s(pid), time.monotonic()
    return (c1 - c0) / (t1 - t0), t1 - t0


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = min(hard, max(soft, want)) if hard != resource.RLIM_INFINITY else max(soft, want)
    if new != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return new


def daemon_args(n, lease_s):
    # Every agent holds one connection; room for the tenant's and the probes'.
    conns = n + max(64, n // 8) + 64
    return ["--agent-lease-s", str(lease_s), "--max-connections", str(conns),
            "--max-connections-per-address", str(conns), "--agent-max-waiters", str(n + 64)]


class Api:
    """One keep-alive connection (the tenant's, or the admin's), reconnecting."""

    def __init__(self, port, token):
        import http.client
        self.hc = http.client
        self.port, self.token = port, token
        self.conn = None

    def request(self, method, path, body=None):
        headers = {"Authorization": "Bearer " + self.token}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = self.hc.HTTPConnection("127.0.0.1", self.port, timeout=30)
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                raw = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status, (json.loads(raw) if raw else None)
            except (OSError, self.hc.HTTPException):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def set_up_tenant(admin):
    st, b = admin.request("POST", "/v1/tenants", {"name": "bench"})
    if st != 201:
        raise RuntimeError("create tenant: %d %r" % (st, b))
    st, b = admin.request("POST", "/v1/tokens", {"role": "tenant-user", "tenant": "bench",
                                                 "user": "bench-user"})
    if st != 201:
        raise RuntimeError("tenant token: %d %r" % (st, b))
    return b["token"]


def alloc_body(members):
    return {"name": ALLOC_NAME, "members": members, "gpus": {"count": 1, "profile": "3g.40gb"},
            "pool": "mig"}


def wait_state(api, aid, until, timeout):
    """Reads the allocation until its state is in `until`; (state, body, seconds)."""
    t0 = time.monotonic()
    while True:
        st, b = api.request("GET", "/v1/allocations/" + aid)
        if st != 200:
            return "http_%d" % st, b, time.monotonic() - t0
        if b["state"] in until or time.monotonic() - t0 > timeout:
            return b["state"], b, time.monotonic() - t0
        time.sleep(POLL_GAP_S)


def create_to_ready(api, count, members, gap_s):
    """count times: POST, read until active, DELETE. Returns the samples."""
    ready_ms, post_ms, bad = [], [], {}
    for _ in range(count):
        t0 = time.monotonic()
        st, b = api.request("POST", "/v1/allocations", alloc_body(members))
        t1 = time.monotonic()
        if st != 201:
            bad["post_%d" % st] = bad.get("post_%d" % st, 0) + 1
            time.sleep(gap_s)
            continue
        post_ms.append((t1 - t0) * 1000)
        state = b["state"]
        if state != "active":
            state, _, _ = wait_state(api, b["id"], ("active", "failed", "released"), 10.0)
        t2 = time.monotonic()
        if state == "active":
            ready_ms.append((t2 - t0) * 1000)
        else:
            bad["ended_" + state] = bad.get("ended_" + state, 0) + 1
        st, _ = api.request("DELETE", "/v1/allocations/" + b["id"])
        if st != 200:
            bad["release_%d" % st] = bad.get("release_%d" % st, 0) + 1
        time.sleep(gap_s)
    return ready_ms, post_ms, bad


def summary_ms(vals):
    s = sorted(vals)
    r = (lambda v: None if v is None else round(v, 2))
    return {"n": len(s), "p50": r(percentile(s, 0.5)), "p99": r(percentile(s, 0.99)),
            "max": r(s[-1] if s else None)}


def wait_unreachable(admin, nodes, timeout):
    """GET /v1/nodes/{n} every 20 ms until each is unreachable: {node: monotonic}."""
    seen, deadline = {}, time.monotonic() + timeout
    while len(seen) < len(nodes) and time.monotonic() < deadline:
        for n in nodes:
            if n in seen:
                continue
            st, b = admin.request("GET", "/v1/nodes/" + n)
            if st == 200 and b["state"] == "unreachable":
                seen[n] = time.monotonic()
        time.sleep(NODE_POLL_GAP_S)
    return seen


def start_daemon(harness, cfg, n, lease_s, extra=()):
    d = harness.Daemon(cfg, extra_args=daemon_args(n, lease_s) + list(extra), agents=True)
    d.start(timeout=harness.T(120))
    return d


def run_size(harness, a, n, tmp):
    """One N: returns the result dict (result["ok"] says whether every step ran)."""
    res = {"n": n, "ok": False, "steps": []}
    cfg = os.path.join(tmp, "agents-%d.yaml" % n)
    with open(cfg, "w") as f:
        f.write(inventory.inventory(n, a.gpus_per_node))
    nodes = [inventory.node_name(i) for i in range(1, n + 1)]
    d = start_daemon(harness, cfg, n, a.lease_s)
    workers = None
    try:
        pid = d.proc.pid
        res["daemon_args"] = daemon_args(n, a.lease_s)
        admin = Api(d.port, d.admin_token)
        tenant = Api(d.port, set_up_tenant(admin))
        time.sleep(0.5)
        rss0 = proc_rss_kib(pid)
        cpu0, w0 = cpu_window(pid, a.idle_s)
        res["idle_no_agents"] = {"cpu_share": round(cpu0, 4), "window_s": round(w0, 2),
                                 "rss_kib": rss0}
        res["steps"].append("baseline")
        print("  N=%d: baseline cpu %.1f%%, rss %d KiB" % (n, cpu0 * 100, rss0), flush=True)

        t0 = time.monotonic()
        workers = Workers(d.port, d.admin_token, nodes, a.heartbeat_s)
        got = workers.wait_events("connected", len(workers.procs), a.connect_timeout)
        if len(got) < len(workers.procs):
            st = workers.ask("stats")
            res["connect_failed"] = st
            print("  N=%d: agents did not all connect: %r" % (n, st), flush=True)
            return res
        res["connect_s"] = round(max(e["t"] for e in got) - t0, 2)
        sc = workers.ask("stats")
        res["connect_round_trips"] = {"first_get_ms": sc["first_get_rt_ms"],
                                      "put_ms": sc["put_rt_ms"], "errors": sc["errors"]}
        res["steps"].append("connected")
        print("  N=%d: %d agents connected in %.1f s (first GET max %s ms, PUT max %s ms, "
              "errors %r)" % (n, n, res["connect_s"], sc["first_get_rt_ms"]["max"],
                              sc["put_rt_ms"]["max"], sc["errors"]), flush=True)

        time.sleep(a.heartbeat_s + 0.5)  # one whole heartbeat period after the ramp
        rss1 = proc_rss_kib(pid)
        s0 = workers.ask("stats")
        wc0 = workers.cpu_s()
        cpu1, w1 = cpu_window(pid, a.idle_s)
        wc1 = workers.cpu_s()
        s1 = workers.ask("stats")
        reqs = (s1["gets"] - s0["gets"]) + (s1["puts"] - s0["puts"])
        res["idle_agents"] = {"cpu_share": round(cpu1, 4), "window_s": round(w1, 2),
                              "rss_kib": rss1, "requests": reqs,
                              "requests_per_s": round(reqs / w1, 1),
                              "status_put_ms": s1["put_rt_ms"],
                              # the simulated agents' own share of the machine
                              "agents_cpu_share": round((wc1 - wc0) / w1, 3),
                              "errors_in_window": {k: v - s0["errors"].get(k, 0)
                                                   for k, v in s1["errors"].items()
                                                   if v != s0["errors"].get(k, 0)}}
        res["rss_per_agent_kib"] = round((rss1 - rss0) / n, 2)
        res["steps"].append("idle")
        print("  N=%d: idle cpu %.1f%% (%d req/s; agents' processes %.0f%%; status PUT p50 %s "
              "p99 %s max %s ms), rss %d KiB (+%.1f KiB/agent)"
              % (n, cpu1 * 100, reqs / w1, res["idle_agents"]["agents_cpu_share"] * 100, s1["put_rt_ms"]["p50"], s1["put_rt_ms"]["p99"],
                 s1["put_rt_ms"]["max"], rss1, res["rss_per_agent_kib"]), flush=True)

        ready, post, bad = create_to_ready(tenant, a.creates, a.members, a.create_gap_s)
        res["create_ready_ms"] = summary_ms(ready)
        res["create_post_ms"] = summary_ms(post)
        res["create_problems"] = bad
        if len(ready) != a.creates:
            print("  N=%d: %d of %d creates went active: %r" % (n, len(ready), a.creates, bad),
                  flush=True)
            return res
        res["steps"].append("create")
        print("  N=%d: create -> ready p50 %.1f ms p99 %.1f ms (POST p50 %.1f ms)"
              % (n, res["create_ready_ms"]["p50"], res["create_ready_ms"]["p99"],
                 res["create_post_ms"]["p50"]), flush=True)

        k = min(a.silent, n)
        victims = [nodes[(i * n) // k] for i in range(k)]
        workers.command({"cmd": "silence", "nodes": victims})
        ev = workers.wait_events("silenced", k, a.heartbeat_s * 3 + 5)
        last_ok = {e["node"]: e["last_ok"] for e in ev}
        seen = wait_unreachable(admin, list(last_ok), a.lease_s + 10)
        after = sorted(seen[v] - last_ok[v] for v in seen)
        res["unreachable_s"] = {"lease_s": a.lease_s, "nodes": len(victims),
                                "became_unreachable": len(seen),
                                "after_last_heartbeat_s": [round(x, 3) for x in after],
                                "max_over_lease_s": round(max(after) - a.lease_s, 3)
                                if after else None}
        # No other node may have gone unreachable meanwhile.
        st, b = admin.request("GET", "/v1/nodes/" + nodes[1 if nodes[0] in victims else 0])
        res["unreachable_s"]["a_live_node_state"] = b["state"] if st == 200 else st
        if len(seen) != len(victims):
            print("  N=%d: %d of %d silent nodes became unreachable"
                  % (n, len(seen), len(victims)), flush=True)
            return res
        res["steps"].append("unreachable")
        print("  N=%d: silent -> unreachable %s s (lease %d s)"
              % (n, ", ".join("%.2f" % x for x in after), a.lease_s), flush=True)
        res["ok"] = True
    finally:
        if workers is not None:
            final = workers.stop()
            res["agents_final"] = final
        alive = d.proc is not None and d.proc.poll() is None
        res["daemon_alive_at_end"] = alive
        if alive:
            try:
                d.stop()
            except harness.DaemonError as e:
                res["ok"] = False
                res["daemon_stop_problem"] = str(e)[:4000]
        else:
            res["ok"] = False
            res["daemon_stderr_tail"] = d.stderr_tail(30)
        reports = harness.sanitizer_reports()
        if reports:
            res["ok"] = False
            res["sanitizer_reports"] = [r[:4000] for r in reports]
        d.cleanup()
    return res


def git_head():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--",
                                     "src", "include"], capture_output=True, text=True).stdout)
        return head, dirty
    except (OSError, subprocess.CalledProcessError):
        return None, None


def fmt(v, unit=""):
    return "-" if v is None else ("%.1f%s" % (v, unit))


def print_table(rep):
    m = rep["machine"]
    print("isostackd agents bench: %sHEAD %s%s, %d CPUs, lease %d s, heartbeat %d s, %d creates "
          "of %d members, %.0f s" % (rep["label"] + ", " if rep["label"] else "",
                                     (rep["commit"] or "?")[:12],
                                     " (src dirty)" if rep["src_dirty"] else "", m["cpus"],
                                     rep["params"]["lease_s"], rep["params"]["heartbeat_s"],
                                     rep["params"]["creates"], rep["params"]["members"],
                                     rep["run_s"]))
    hdr = ("%7s %9s %13s %13s %9s %11s %11s %11s %11s %15s" %
           ("agents", "connect", "cpu idle 0", "cpu idle N", "req/s", "KiB/agent",
            "ready p50", "ready p99", "POST p50", "unreach-lease"))
    print(hdr)
    print("-" * len(hdr))
    for r in rep["runs"]:
        i0, i1 = r.get("idle_no_agents", {}), r.get("idle_agents", {})
        cr, cp = r.get("create_ready_ms", {}), r.get("create_post_ms", {})
        un = r.get("unreachable_s", {})
        print("%7d %9s %13s %13s %9s %11s %11s %11s %11s %15s%s" % (
            r["n"], fmt(r.get("connect_s"), " s"),
            fmt(i0.get("cpu_share", 0) * 100 if i0 else None, "%"),
            fmt(i1.get("cpu_share", 0) * 100 if i1 else None, "%"),
            fmt(i1.get("requests_per_s")), fmt(r.get("rss_per_agent_kib")),
            fmt(cr.get("p50"), " ms"), fmt(cr.get("p99"), " ms"), fmt(cp.get("p50"), " ms"),
            fmt(un.get("max_over_lease_s"), " s"), "" if r["ok"] else "  (FAILED: %s)"
            % ",".join(r["steps"])))


# ---------------------------------------------------------------- self-test


def self_test(harness, build):
    """The bench is wired right: checked against a real isostackd, no timing."""
    problems = []

    def check(what, ok, detail=None):
        print("%s %s" % ("ok  " if ok else "FAIL", what))
        if not ok:
            problems.append("%s: %r" % (what, detail))

    tmp = tempfile.mkdtemp(prefix="isobench-agents-st-")
    cfg = os.path.join(tmp, "agents.yaml")
    with open(cfg, "w") as f:
        f.write(inventory.inventory(3, 2))
    nodes = [inventory.node_name(i) for i in (1, 2, 3)]
    lease = 2
    d = start_daemon(harness, cfg, 3, lease)
    workers = None
    try:
        admin = Api(d.port, d.admin_token)
        tenant = Api(d.port, set_up_tenant(admin))
        st, b = tenant.request("POST", "/v1/allocations", alloc_body(2))
        check("a create before any agent runs is provisioning, waiting for an agent",
              st == 201 and b["state"] == "provisioning" and
              b["reason"].startswith("waiting for the agent of node"), (st, b))
        first = b["id"] if st == 201 else None
        workers = Workers(d.port, d.admin_token, nodes, 1)
        got = workers.wait_events("connected", 1, harness.T(30))
        check("every simulated agent connects (its first status answered 204)",
              len(got) == 1 and got[0]["n"] == 3, got)
        if first:
            state, b, _ = wait_state(tenant, first, ("active", "failed"), harness.T(20))
            check("the agents make the waiting allocation active", state == "active", b)
            if state == "active":
                check("its members are ready with the agents' MIG UUIDs",
                      all(m["ready"] is True and (m["cuda_visible_devices"] or "")
                          .startswith("MIG-ag-") for m in b["nodes"]), b["nodes"])
            tenant.request("DELETE", "/v1/allocations/" + first)
        ready, post, bad = create_to_ready(tenant, 3, 2, 0.0)
        check("create -> ready: three allocations go active", len(ready) == 3 and not bad, bad)
        shown = [admin.request("GET", "/v1/nodes/" + n)[1] for n in nodes]
        check("every node shows its agent connected",
              all(s["agent"] and s["agent"]["connected"] and
                  s["agent"]["version"] == "bench-agents" for s in shown), shown)
        workers.command({"cmd": "silence", "nodes": [nodes[1]]})
        ev = workers.wait_events("silenced", 1, harness.T(10))
        check("a silenced agent stops after an answered status", len(ev) == 1, ev)
        seen = wait_unreachable(admin, [nodes[1]], harness.T(lease + 15))
        check("its node becomes unreachable", nodes[1] in seen, seen)
        others = [admin.request("GET", "/v1/nodes/" + n)[1]["state"] for n in (nodes[0], nodes[2])]
        check("the others stay reachable", "unreachable" not in others, others)
        st = workers.ask("stats")
        check("the agents made requests and saw no error",
              st["gets"] > 3 and st["puts"] > 3 and st["get_changed"] >= 2 and not st["errors"],
              st)
    finally:
        if workers is not None:
            workers.stop()
        try:
            d.stop()
        except harness.DaemonError as e:
            problems.append("daemon stop: %s" % e)
        d.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    for pr in problems:
        print("FAIL %s" % pr)
    print("self-test: %s" % ("ok" if not problems else "%d failed" % len(problems)))
    return 1 if problems else 0


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", help="comma-separated N (default 100,1000,10000; quick: 100)")
    ap.add_argument("--lease-s", type=int)
    ap.add_argument("--heartbeat-s", type=int)
    ap.add_argument("--idle-s", type=float)
    ap.add_argument("--creates", type=int)
    ap.add_argument("--create-gap-s", type=float, default=0.05)
    ap.add_argument("--members", type=int, default=2)
    ap.add_argument("--silent", type=int)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--connect-timeout", type=float, default=300.0)
    ap.add_argument("--json")
    ap.add_argument("--label", help="free text kept in the JSON and the table (e.g. the commit "
                    "BUILD was built from, when it is not this checkout's)")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        raise_nofile(AGENTS_PER_WORKER + 256)
        return worker_main()

    isostackd = os.path.join(a.build, "isostackd")
    if not os.path.exists(isostackd):
        ap.error("no isostackd in %s" % a.build)
    import harness  # noqa: E402 - the tests' daemon runner: start, wait, admin token, cleanup
    harness.Binaries.isostackd = os.path.abspath(isostackd)
    harness.install_signal_handlers()
    if a.self_test:
        raise_nofile(1024)
        return self_test(harness, a.build)

    sizes = [int(x) for x in (a.sizes or ("100" if a.quick else "100,1000,10000")).split(",")]
    a.lease_s = a.lease_s or (3 if a.quick else 10)
    a.heartbeat_s = a.heartbeat_s or (1 if a.quick else 3)
    a.idle_s = a.idle_s or (2.0 if a.quick else 10.0)
    a.creates = a.creates or (30 if a.quick else 200)
    a.silent = a.silent or (1 if a.quick else 3)
    if not 1 <= a.heartbeat_s <= 60 or a.lease_s < 1:
        ap.error("--heartbeat-s: 1..60 (the long poll's wait_s), --lease-s >= 1")
    nofile = raise_nofile(max(sizes) + 4096)
    if nofile < max(sizes) + 512:
        ap.error("RLIMIT_NOFILE is %d: too low for %d agents (raise the hard limit)"
                 % (nofile, max(sizes)))
    json_path = a.json or os.path.join(a.build, "agents-bench.json")
    head, dirty = git_head()
    if harness.is_sanitized(isostackd):
        print("warning: %s is a sanitizer build; timings will be slow" % isostackd,
              file=sys.stderr)
    rep = {"label": a.label, "commit": head, "src_dirty": dirty, "build": os.path.abspath(a.build),
           "machine": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
                       "platform": platform.platform(), "python": platform.python_version()},
           "params": {"sizes": sizes, "lease_s": a.lease_s, "heartbeat_s": a.heartbeat_s,
                      "idle_s": a.idle_s, "creates": a.creates, "members": a.members,
                      "create_gap_s": a.create_gap_s, "silent": a.silent,
                      "gpus_per_node": a.gpus_per_node, "nofile": nofile,
                      "agents_per_worker": AGENTS_PER_WORKER},
           "runs": []}
    tmp = tempfile.mkdtemp(prefix="isobench-agents-")
    t_run = time.monotonic()
    ok = True
    try:
        for n in sizes:
            r = run_size(harness, a, n, tmp)
            rep["runs"].append(r)
            ok = ok and r["ok"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        rep["run_s"] = round(time.monotonic() - t_run, 1)
        rep["ok"] = ok
        with open(json_path, "w") as f:
            json.dump(rep, f, indent=1, default=str)
            f.write("\n")
    print_table(rep)
    print("JSON: %s" % json_path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

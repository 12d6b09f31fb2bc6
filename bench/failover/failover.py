#!/usr/bin/env python3
"""bench/failover/failover.py: how long the control plane has no leader when
the leader of three isostackd on one PostgreSQL crashes (kill -9) or is
stopped (SIGTERM, which releases its lease), over many rounds (issue 16,
"One leader, fenced"; docs/store.md, "High availability").

Why this exists: the failover time is what a site's users wait for (the
issue's goals: crash within 10 s, a graceful handoff within about 1 s), and
it depends on the lease, the renew interval and the new leader's start, so
it is measured, not argued. The tests (tests/api/test_leader.py) only check
the bound.

One throwaway PostgreSQL (scripts/pg-test-cluster.sh, fsync on), three
isostackd (tests/api/data/small.yaml, lease and renew as given, defaults
5000/1000 ms), each with its own state dir and the first leader's audit key.
Each round: a bounded write load (one client creating at most --writes
tenants, default 20, on the leader) runs for a random 0.2-1.0 s, then the
leader is killed (crash) or sent
SIGTERM (graceful); the time from the signal to the first healthz that
reports role leader on another node is the failover time. The writes
acknowledged so far must all be on the new leader (checked every round). The
old node then starts again as a follower. Prints every round and p50/p99/max
per kind.

usage: python3 bench/failover/failover.py [BUILD_DIR] [--rounds N]
       [--lease-ms N] [--renew-ms N] [--kinds crash,graceful] [--seed S]
       [--writes N]
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
import harness  # noqa: E402
from harness import free_port, http_request  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "pg-test-cluster.sh")
CONFIG = harness.data_path("small.yaml")


class Node:
    def __init__(self, build, tmp, i, conninfo, extra):
        self.binary = os.path.join(build, "isostackd")
        self.state = os.path.join(tmp, "node%d" % i)
        os.makedirs(self.state, mode=0o700)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.conninfo = conninfo
        self.extra = extra
        self.log = os.path.join(tmp, "node%d.log" % i)
        self.proc = None

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "--config", CONFIG, "--state-dir", self.state, "--listen",
                 "127.0.0.1:%d" % self.port, "--store", self.conninfo, "--no-agents",
                 "--tenant-writes-per-s", "100000", "--tenant-reads-per-s", "100000"]
                + self.extra, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True)

    def role(self):
        try:
            r = http_request(self.port, "GET", "/v1/healthz", timeout=1)
        except OSError:
            return None
        return r.body.get("role") if r.status == 200 and isinstance(r.body, dict) else None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def wait_leader(nodes, exclude, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for n in nodes:
            if n is not exclude and n.role() == "leader":
                return n, time.monotonic()
        time.sleep(0.01)
    raise SystemExit("no leader within %.0f s" % timeout)


def writer(node, token, prefix, stop, acked, limit):
    """Creates tenants on `node` until told to stop (at most `limit`, 0: no
    limit); records each 201."""
    i = 0
    while not stop.is_set() and (limit == 0 or i < limit):
        name = "%s-%d" % (prefix, i)
        i += 1
        try:
            r = http_request(node.port, "POST", "/v1/tenants", body={"name": name}, token=token,
                             timeout=5)
        except OSError:
            return
        if r.status == 201:
            acked.append(name)
        elif r.status >= 500:
            return


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--lease-ms", type=int, default=5000)
    ap.add_argument("--renew-ms", type=int, default=1000)
    ap.add_argument("--kinds", default="crash,graceful")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--writes", type=int, default=20,
                    help="creates per round at most (0: until the signal): the state, "
                         "which a new leader rebuilds, stays small")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    print("seed %d, lease %d ms, renew %d ms, %d rounds each of %s"
          % (a.seed, a.lease_ms, a.renew_ms, a.rounds, a.kinds))
    tmp = tempfile.mkdtemp(prefix="iso-failover-")
    pgdir = tempfile.mkdtemp(prefix="iso-failover-pg-")  # the script gives it to its own user
    out = subprocess.run([SCRIPT, "start", pgdir], capture_output=True,
                         text=True, check=True)
    conninfo = out.stdout.strip().splitlines()[-1]
    nodes = []
    try:
        extra = ["--lease-ms", str(a.lease_ms), "--renew-ms", str(a.renew_ms)]
        nodes = [Node(a.build, tmp, i, conninfo, extra) for i in range(3)]
        nodes[0].start()
        leader, _ = wait_leader(nodes[:1], None, 30)
        with open(os.path.join(nodes[0].state, "admin.token")) as f:
            token = f.read().strip()
        for n in nodes[1:]:
            shutil.copy(os.path.join(nodes[0].state, "audit.key"), n.state)
            n.start()
        time.sleep(1)
        results = {}
        acked = []
        for kind in a.kinds.split(","):
            times = results.setdefault(kind, [])
            for rnd in range(a.rounds):
                stop = threading.Event()
                t = threading.Thread(target=writer,
                                     args=(leader, token, "%s%d" % (kind, rnd), stop, acked,
                                           a.writes))
                t.start()
                time.sleep(rng.uniform(0.2, 1.0))
                t0 = time.monotonic()
                if kind == "crash":
                    leader.stop()
                else:
                    leader.proc.send_signal(signal.SIGTERM)
                new, t1 = wait_leader(nodes, leader, 60)
                stop.set()
                t.join()
                if kind == "graceful":
                    leader.proc.wait(timeout=30)
                times.append(t1 - t0)
                # Every acknowledged create is on the new leader.
                for name in acked[-50:]:
                    r = http_request(new.port, "GET", "/v1/tenants/" + name, token=token)
                    if r.status != 200:
                        raise SystemExit("round %d: acknowledged tenant %s missing: %r"
                                         % (rnd, name, r))
                print("%-8s round %2d: %.3f s (%d acknowledged so far)"
                      % (kind, rnd, t1 - t0, len(acked)))
                sys.stdout.flush()
                leader.start()
                leader = new
                time.sleep(0.3)
        listed, after = set(), None
        while True:  # every page of the tenant list
            q = "/v1/tenants?limit=1000" + ("&after=" + after if after else "")
            r = http_request(leader.port, "GET", q, token=token)
            listed |= {t["name"] for t in r.body["items"]}
            after = r.body.get("next")
            if not after:
                break
        missing = [n for n in acked if n not in listed]
        print(json.dumps({k: {"rounds": len(v), "p50_s": round(pct(v, 50), 3),
                              "p99_s": round(pct(v, 99), 3), "max_s": round(max(v), 3)}
                          for k, v in results.items()}))
        print("acknowledged creates: %d, missing at the end: %d" % (len(acked), len(missing)))
    finally:
        for n in nodes:
            n.stop()
        subprocess.run([SCRIPT, "stop", pgdir], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(pgdir, ignore_errors=True)


if __name__ == "__main__":
    main()

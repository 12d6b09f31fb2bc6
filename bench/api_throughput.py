#!/usr/bin/env python3
"""bench/api_throughput.py: what a durable API mutation costs, as a ratio
against the cheapest request the same daemon serves in the same run.

Starts a real isostackd (examples/cluster.yaml, fresh temp state dir) and,
over one keep-alive connection each, times:
  baseline  GET /v1/healthz                 (HTTP + routing, no auth, no store)
  read      GET /v1/allocations/{id}        (auth + one indexed store read)
  create    POST /v1/allocations (1g.10gb)  (auth + placement + one fsync'd commit)
  release   DELETE /v1/allocations/{id}     (auth + one fsync'd commit)
Prints requests/s for each and the ratio to the baseline. Absolute numbers
depend on the disk's fsync latency; the ratios are what to compare.

usage: python3 bench/api_throughput.py [BUILD_DIR] [N]
"""

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def timed(conn, n, method, path_of, body=None, token=None, want=200):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    results = []
    t0 = time.perf_counter()
    for i in range(n):
        conn.request(method, path_of(i), body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        if r.status != want:
            raise SystemExit("%s %s -> %d %s" % (method, path_of(i), r.status, data[:200]))
        results.append(data)
    return n / (time.perf_counter() - t0), results


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    tmp = tempfile.mkdtemp(prefix="isobench-")
    port = free_port()
    proc = subprocess.Popen([os.path.join(build, "isostackd"), "--config",
                             os.path.join(ROOT, "examples", "cluster.yaml"), "--state-dir",
                             os.path.join(tmp, "state"), "--listen", "127.0.0.1:%d" % port,
                             "--no-agents"],  # no node agents run here (docs/agents.md)
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(200):
            try:
                conn.request("GET", "/v1/healthz")
                conn.getresponse().read()
                break
            except OSError:
                conn.close()
                time.sleep(0.05)
        with open(os.path.join(tmp, "state", "admin.token")) as f:
            token = f.read().strip()
        timed(conn, 1, "POST", lambda i: "/v1/tenants", json.dumps({"name": "bench"}), token, 201)

        base, _ = timed(conn, n, "GET", lambda i: "/v1/healthz")
        body = json.dumps({"tenant": "bench", "gpus": {"count": 1, "profile": "1g.10gb"}})
        create, made = timed(conn, n, "POST", lambda i: "/v1/allocations", body, token, 201)
        ids = [json.loads(m)["id"] for m in made]
        read, _ = timed(conn, n, "GET", lambda i: "/v1/allocations/" + ids[i], None, token)
        release, _ = timed(conn, n, "DELETE", lambda i: "/v1/allocations/" + ids[i], None, token)
        rows = [("baseline GET /v1/healthz", base), ("read GET /v1/allocations/{id}", read),
                ("create POST /v1/allocations", create),
                ("release DELETE /v1/allocations/{id}", release)]
        print("isostackd API throughput, %d requests each, one keep-alive connection" % n)
        print("%-40s %10s %8s" % ("request", "req/s", "ratio"))
        for name, rate in rows:
            print("%-40s %10.0f %8.3f" % (name, rate, rate / base))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

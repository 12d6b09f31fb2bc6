#!/usr/bin/env python3
"""bench/api/group_commit.py: durable creates per second and their latency with
1, 16 and 64 concurrent keep-alive clients, with group commit off and on, in
one run on one machine (issue 16; docs/store.md, "Group commit").

Why this exists: one fsync per mutation caps the daemon at the disk's flush
rate however many clients ask; group commit lets the commits of one loop turn
share a flush. What matters is the ratio on/off at each concurrency, and that
one client is not slower with it on.

For each concurrency C and each mode it starts a fresh isostackd (SQLite, a
synthetic inventory of NODES nodes x 8 H100-80GB with MIG from
bench/agents/inventory.py, first-fit placement, no agents, tenant limits
raised so that only the disk limits), creates four tenants, then C
asyncio clients on their own keep-alive connections send POST /v1/allocations
(1g.10gb, each answered 201 active: durable) back to back until TOTAL creates
are answered. Prints creates/s (answered creates over the wall time of the
burst), p50/p99 latency per request, the daemon's CPU time (user + system,
/proc) per create during the burst, and the ratios on/off.

--stores sqlite,postgres runs every cell on both backends in the same run:
PostgreSQL is a throwaway cluster (scripts/pg-test-cluster.sh, fsync on, in
the temp directory), a fresh database per cell, isostackd --store CONNINFO.

usage: python3 bench/api/group_commit.py [BUILD_DIR] [--total N] [--nodes N]
       [--clients 1,16,64] [--rounds R] [--stores sqlite,postgres]
"""

import argparse
import asyncio
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "agents"))
import inventory  # noqa: E402 - bench/agents/inventory.py


TENANTS = 4  # the clients' tenants, round robin (each tenant's P_Key takes a port slot)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    def __init__(self, build, config, group_commit, tmp, store=None):
        self.port = free_port()
        self.state = tempfile.mkdtemp(prefix="state-", dir=tmp)
        extra = ["--store", store] if store else []
        self.proc = subprocess.Popen(
            [os.path.join(build, "isostackd"), "--config", config, "--state-dir", self.state,
             "--listen", "127.0.0.1:%d" % self.port, "--no-agents", "--placement", "first-fit",
             "--group-commit", group_commit, "--tenant-writes-per-s", "1000000",
             "--tenant-reads-per-s", "1000000", "--tenant-max-live", "1000000",
             "--max-connections-per-address", "256"] + extra,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/v1/healthz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("isostackd did not start (group commit %s)" % group_commit)
            time.sleep(0.05)
        with open(os.path.join(self.state, "admin.token")) as f:
            self.token = f.read().strip()

    def request(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Authorization": "Bearer " + self.token,
                           "Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, json.loads(data) if data else None

    def cpu_s(self):
        """The daemon's CPU time so far (user + system), in seconds."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


async def client(port, token, tenant, quota, lat):
    """Creates until the shared quota is spent, one request at a time on one
    keep-alive connection; appends each latency (s) to lat."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"tenant": tenant, "gpus": {"count": 1, "profile": "1g.10gb"}}).encode()
    head = ("POST /v1/allocations HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (token, len(body))).encode()
    try:
        while quota[0] > 0:
            quota[0] -= 1
            t0 = time.perf_counter()
            writer.write(head + body)
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                k, _, v = line.decode().partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v)
            data = await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            if b" 201 " not in status_line or b'"state":"active"' not in data:
                raise SystemExit("unexpected answer: %r %r" % (status_line, data[:300]))
    finally:
        writer.close()


async def burst(d, tenants, total):
    quota = [total]
    lat = []
    t0 = time.perf_counter()
    await asyncio.gather(*(client(d.port, d.token, t, quota, lat) for t in tenants))
    return len(lat) / (time.perf_counter() - t0), lat


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


class Postgres:
    """A throwaway PostgreSQL (scripts/pg-test-cluster.sh) and a fresh
    database per cell."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "pg")
        os.makedirs(self.dir)
        out = subprocess.run([os.path.join(ROOT, "scripts", "pg-test-cluster.sh"), "start",
                              self.dir], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise SystemExit("pg-test-cluster.sh start: %s" % out.stderr)
        self.base = out.stdout.strip().splitlines()[-1]
        self.n = 0

    def fresh(self):
        self.n += 1
        name = "bench_%d" % self.n
        subprocess.run(["psql", self.base, "-XtAq", "-c", "CREATE DATABASE " + name],
                       check=True, capture_output=True, timeout=60)
        return self.base.replace("dbname=postgres", "dbname=" + name)

    def stop(self):
        subprocess.run([os.path.join(ROOT, "scripts", "pg-test-cluster.sh"), "stop", self.dir],
                       capture_output=True, timeout=120)


def run_one(build, config, mode, n_clients, total, tmp, store=None):
    d = Daemon(build, config, mode, tmp, store)
    try:
        names = []
        for i in range(TENANTS):
            name = "bench-%d" % i
            st, body = d.request("POST", "/v1/tenants", {"name": name})
            if st != 201:
                raise SystemExit("tenant: %d %r" % (st, body))
            names.append(name)
        tenants = [names[i % TENANTS] for i in range(n_clients)]
        cpu0 = d.cpu_s()
        rate, lat = asyncio.run(burst(d, tenants, total))
        cpu_us = (d.cpu_s() - cpu0) / len(lat) * 1e6
        st, ver = d.request("GET", "/v1/version")
        return rate, pct(lat, 50) * 1000, pct(lat, 99) * 1000, ver["commits"], cpu_us
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--total", type=int, default=3000, help="creates per burst (default 3000)")
    ap.add_argument("--nodes", type=int, default=128, help="inventory nodes (default 128)")
    ap.add_argument("--clients", default="1,16,64")
    ap.add_argument("--rounds", type=int, default=1, help="bursts per cell, best kept")
    ap.add_argument("--stores", default="sqlite", help="sqlite, postgres or both (sqlite,postgres)")
    a = ap.parse_args()
    stores = a.stores.split(",")
    if not stores or any(x not in ("sqlite", "postgres") for x in stores):
        raise SystemExit("--stores: %r is not a list of sqlite and postgres" % a.stores)
    levels = [int(x) for x in a.clients.split(",")]
    if a.total > a.nodes * 8 * 7:
        raise SystemExit("--total %d does not fit %d nodes (%d 1g.10gb slices)"
                         % (a.total, a.nodes, a.nodes * 56))
    tmp = tempfile.mkdtemp(prefix="isobench-gc-")
    os.chmod(tmp, 0o755)  # pg-test-cluster.sh may run the server as another user
    pg = None
    try:
        if "postgres" in stores:
            pg = Postgres(tmp)
        config = os.path.join(tmp, "cluster.yaml")
        with open(config, "w") as f:
            f.write(inventory.inventory(a.nodes))
        print("isostackd group commit: %d durable creates per burst, %d nodes, stores %s in %s"
              % (a.total, a.nodes, ",".join(stores), tmp))
        print("%8s %8s %5s %10s %9s %9s %8s %8s %12s" % ("store", "clients", "group",
                                                         "creates/s", "p50 ms", "p99 ms",
                                                         "commits", "syncs", "cpu us/create"))
        results = {}
        for n in levels:
            for store in stores:
                for mode in ("off", "on"):
                    best = None
                    for _ in range(a.rounds):
                        conninfo = pg.fresh() if store == "postgres" else None
                        r = run_one(a.build, config, mode, n, a.total, tmp, conninfo)
                        if best is None or r[0] > best[0]:
                            best = r
                    results[(store, n, mode)] = best
                    rate, p50, p99, c, cpu_us = best
                    print("%8s %8d %5s %10.0f %9.2f %9.2f %8d %8d %12.0f"
                          % (store, n, mode, rate, p50, p99, c["commits"], c["syncs"], cpu_us))
                    sys.stdout.flush()
        print("ratios on/off:")
        for store in stores:
            for n in levels:
                on, off = results[(store, n, "on")], results[(store, n, "off")]
                print("%8s %8d clients: creates/s x%.2f, p99 x%.2f"
                      % (store, n, on[0] / off[0], on[2] / off[2]))
    finally:
        if pg:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

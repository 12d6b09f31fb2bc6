#!/usr/bin/env python3
"""bench/api/callgrind_create.py: instructions the daemon executes per durable
create, counted by valgrind's callgrind, and where they go (issue 16).

Why this exists: creates/s on a shared 2-vCPU machine move by 2x between runs,
so a change to the create path cannot be judged by them alone. Callgrind counts
instructions, which do not depend on the machine's load: the same tree gives
the same count within a fraction of a percent, so a before/after ratio of
instructions per create is the stable figure beside bench/api/group_commit.py's
rates.

It starts isostackd (the same set-up as bench/api/group_commit.py: SQLite or
PostgreSQL, NODES synthetic nodes, first-fit, no agents, group commit on)
under `valgrind --tool=callgrind`, creates four tenants, answers WARMUP creates
(the first statements, caches, the tree's first levels), zeroes the counters
(`callgrind_control -z`), answers TOTAL creates from CLIENTS keep-alive
clients, dumps the counters (`callgrind_control -d`) and prints the
instructions per create and the top functions, inclusive and self, from
callgrind_annotate. System calls are not counted (the kernel's share of a
write or an fsync is not in the figure): the daemon's CPU column of
group_commit.py has them.

usage: python3 bench/api/callgrind_create.py [BUILD_DIR] [--total N]
       [--warmup N] [--clients C] [--nodes N] [--store sqlite|postgres]
       [--top N] [--keep DIR]
"""

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import group_commit as gc  # noqa: E402 - bench/api/group_commit.py

sys.path.insert(0, os.path.join(gc.ROOT, "bench", "agents"))
import inventory  # noqa: E402


def total_ir(path):
    """The summary line of a callgrind out file: the instructions counted."""
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise SystemExit("%s: no summary line" % path)


def annotate(path, inclusive, top):
    args = ["callgrind_annotate", "--threshold=100"]
    if inclusive:
        args.append("--inclusive=yes")
    out = subprocess.run(args + [path], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(\S.*)$", line)
        if m and "PROGRAM TOTALS" not in line:
            rows.append((int(m.group(1).replace(",", "")), float(m.group(2)), m.group(3)))
    return rows[:top]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(gc.ROOT, "build"))
    ap.add_argument("--total", type=int, default=500, help="creates counted (default 500)")
    ap.add_argument("--warmup", type=int, default=200, help="creates before (default 200)")
    ap.add_argument("--clients", type=int, default=16, help="keep-alive clients (default 16)")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--store", default="sqlite", choices=("sqlite", "postgres"))
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--keep", help="copy the callgrind out file here")
    a = ap.parse_args()
    if a.total + a.warmup > a.nodes * 56:
        raise SystemExit("--total + --warmup do not fit %d nodes" % a.nodes)
    tmp = tempfile.mkdtemp(prefix="isobench-cg-")
    os.chmod(tmp, 0o755)
    pg = None
    d = None
    try:
        out = os.path.join(tmp, "callgrind.out")
        wrap = os.path.join(tmp, "wrap")
        os.makedirs(wrap)
        with open(os.path.join(wrap, "isostackd"), "w") as f:
            f.write("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s "
                    "%s \"$@\"\n" % (out, os.path.join(os.path.abspath(a.build), "isostackd")))
        os.chmod(os.path.join(wrap, "isostackd"), 0o755)
        config = os.path.join(tmp, "cluster.yaml")
        with open(config, "w") as f:
            f.write(inventory.inventory(a.nodes))
        conninfo = None
        if a.store == "postgres":
            pg = gc.Postgres(tmp)
            conninfo = pg.fresh()
        d = gc.Daemon(wrap, config, "on", tmp, conninfo)
        names = []
        for i in range(gc.TENANTS):
            st, body = d.request("POST", "/v1/tenants", {"name": "bench-%d" % i})
            if st != 201:
                raise SystemExit("tenant: %d %r" % (st, body))
            names.append("bench-%d" % i)
        tenants = [names[i % gc.TENANTS] for i in range(a.clients)]
        asyncio.run(gc.burst(d, tenants, a.warmup))
        pid = str(d.proc.pid)
        subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
        _, lat = asyncio.run(gc.burst(d, tenants, a.total))
        subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
        dumps = sorted((p for p in os.listdir(tmp) if p.startswith("callgrind.out.")),
                       key=lambda p: int(p.rsplit(".", 1)[1]))
        if not dumps:
            raise SystemExit("callgrind_control -d wrote no dump in %s" % tmp)
        path = os.path.join(tmp, dumps[-1])
        if a.keep:
            shutil.copy(path, a.keep)
        ir = total_ir(path)
        print("store %s, %d clients, %d creates counted after %d: %d instructions, "
              "%.0f per create" % (a.store, a.clients, len(lat), a.warmup, ir, ir / len(lat)))
        # The settle step runs once per turn of the loop, so its share of a
        # create depends on how many creates shared a turn, which depends on
        # timing; the rest does not. Both are printed.
        settle = sum(n for n, _, fn in annotate(path, True, 10**6)
                     if fn.startswith("build/../src/controller/controller.c:iso_controller_settle"))
        print("  of which the settle step (once per turn): %.0f per create; the rest: %.0f"
              % (settle / len(lat), (ir - settle) / len(lat)))
        for title, inclusive in (("inclusive", True), ("self", False)):
            print("\ntop functions, %s (instructions per create, share):" % title)
            for n, share, fn in annotate(path, inclusive, a.top):
                print("%10.0f %6.2f%%  %s" % (n / len(lat), share, fn))
    finally:
        if d:
            d.stop()
        if pg:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

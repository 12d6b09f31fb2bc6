#!/usr/bin/env python3
"""bench/cni/ab.py: two builds of isostack against each other with
bench/cni/run.py, alternating (before, after, before, after, ...) in one
script, so that the shared machine's load falls on both alike. Each run has
its own bridge-plugin baseline; the summary gives each run's figures and the
pooled medians of the per-run ratios to the bridge plugin.

Usage (root): bench/cni/ab.py --before BUILD --after BUILD [--pairs 2]
              [run.py's --rounds/--per-round/--concurrent]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--per-round", type=int, default=20)
    p.add_argument("--concurrent", type=int, default=100)
    a = p.parse_args()
    runs = {"before": [], "after": []}
    for i in range(a.pairs):
        for label in (("before", "after") if i % 2 == 0 else ("after", "before")):
            build = getattr(a, label)
            r = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--build", build,
                                "--rounds", str(a.rounds), "--per-round", str(a.per_round),
                                "--concurrent", str(a.concurrent)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit("run.py --build %s: %s" % (build, r.stderr[-2000:]))
            rep = json.loads(r.stdout)
            runs[label].append(rep)
            print("%s #%d: %s" % (label, len(runs[label]), json.dumps(
                {k: rep[k] for k in ("bridge", "isostack", "ratio", "load_avg")})),
                flush=True)
    summary = {}
    for label, reps in runs.items():
        s = {}
        for k in ("add_p50_ms", "add_p99_ms", "del_p50_ms", "del_p99_ms"):
            s["bridge_" + k] = statistics.median(r["bridge"][k] for r in reps)
            s["isostack_" + k] = statistics.median(r["isostack"][k] for r in reps)
            s["ratio_" + k] = statistics.median(r["ratio"][k] for r in reps)
        s["concurrent"] = [r["concurrent"]["ADD"]["ok"] for r in reps]
        s["concurrent_live"] = [r["concurrent"]["ADD"]["live_allocations"] for r in reps]
        s["concurrent_wall_s"] = [round(r["concurrent"]["ADD"]["wall_s"], 2) for r in reps]
        summary[label] = s
    print(json.dumps({"summary": summary, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()

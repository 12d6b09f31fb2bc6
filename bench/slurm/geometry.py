#!/usr/bin/env python3
"""bench/slurm/geometry.py: geometry misses of Slurm's count-based node choice
(issue 15, docs/benchmarks.md "Slurm: geometry misses").

Replays the Alibaba openb traces through `isoctl sim` with, in one run per
trace and seed (the same arrivals for every policy):
  slurm-count        Slurm's node choice by a count GRES of compute slices
                     (select/cons_tres's default best fit), isostack's slice on
                     that node; a node whose count allows the pod but whose GPUs
                     cannot hold it is a requeue;
  slurm-count-first  the same with the first node that the counts allow
                     (node Weight rising in node order);
  isostack           isostack choosing node and slice itself;
  first-fit          the daemon's baseline, also choosing both.
and prints the share of the GPU pods that needed a requeue (at least one
node chosen by count could not hold them), the misses per requeued pod, and
what each policy allocated. Saturate on the whole cluster (every trace,
SEEDS seeds) and replay of the default trace on REPLAY_GPUS-GPU sub-clusters.

Usage: bench/slurm/geometry.py [--build DIR] [--traces DIR] [--seeds N]
       [--replay-gpus N] [--replay-seeds N] [--traces-list a,b,...]
Needs `make build`; skips cleanly (exit 0) without the traces.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLICIES = ["slurm-count", "slurm-count-first", "isostack", "first-fit"]
SAT_TRACES = ["default", "gpushare20", "gpushare40", "gpushare100", "multigpu20",
              "multigpu30", "multigpu40"]


def sim(isoctl, nodes, trace, *extra):
    argv = [isoctl, "sim", "--nodes", nodes, "--trace", trace, "--policy", ",".join(POLICIES),
            "--no-curve", "--json"] + list(extra)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       check=False)
    if p.returncode != 0:
        sys.exit("bench/slurm: %s failed (%d): %s" % (" ".join(argv), p.returncode, p.stderr))
    runs = {r["policy"]: r for r in json.loads(p.stdout)}
    for r in runs.values():  # the bookkeeping the table relies on
        assert r["requeued"] <= r["pods"] - r["cpu_only"], r
        assert r["counts_requeues"] or (r["requeued"], r["requeues"]) == (0, 0), r
    return runs


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def pct(x):
    return "%.1f%%" % (100 * x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--traces", default=os.path.join(ROOT, "..", "shared", "traces",
                                                     "alibaba-openb"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--replay-gpus", type=int, default=48)
    ap.add_argument("--replay-seeds", type=int, default=5)
    ap.add_argument("--traces-list", default=",".join(SAT_TRACES))
    a = ap.parse_args()
    isoctl = os.path.join(a.build, "isoctl")
    nodes = os.path.join(a.traces, "openb_node_list_gpu_node.csv")
    if not os.path.exists(nodes):
        print("bench/slurm: no traces in %s; skipped" % a.traces, file=sys.stderr)
        return 0
    if not os.access(isoctl, os.X_OK):
        sys.exit("bench/slurm: %s missing: run 'make build' first" % isoctl)
    t0 = time.monotonic()

    print("Saturate, whole cluster (6,212 H100s), seeds 1-%d: share of GPU pods that needed "
          "a requeue up to 100%% / 130%% offered; misses per requeued pod; compute slices "
          "allocated at 100%% / 130%% (mean over seeds)\n" % a.seeds)
    print("| trace | GPU pods | slurm-count requeued | misses/requeued | "
          "slurm-count-first requeued | misses/requeued | isostack requeued | "
          "alloc slurm-count | alloc slurm-count-first | alloc isostack | alloc first-fit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for t in a.traces_list.split(","):
        trace = os.path.join(a.traces, "openb_pod_list_%s.csv" % t)
        runs = [sim(isoctl, nodes, trace, "--mode", "saturate", "--seed", str(s))
                for s in range(1, a.seeds + 1)]

        def m(pol, key):
            return mean([r[pol][key] for r in runs])

        def req(pol):
            per = mean([r[pol]["requeues"] / r[pol]["requeued"] if r[pol]["requeued"] else None
                        for r in runs])
            return "%s / %s | %.1f" % (pct(m(pol, "requeue_share_at_100")),
                                       pct(m(pol, "requeue_share")), per)

        def alloc(pol):
            return "%.4f / %.4f" % (m(pol, "alloc_ratio_at_100"), m(pol, "alloc_ratio_at_130"))

        gpu_pods = mean([r["isostack"]["pods"] - r["isostack"]["cpu_only"] for r in runs])
        print("| %s | %.0f | %s | %s | %s | %s | %s | %s | %s |" %
              (t, gpu_pods, req("slurm-count"), req("slurm-count-first"),
               pct(m("isostack", "requeue_share")), alloc("slurm-count"),
               alloc("slurm-count-first"), alloc("isostack"), alloc("first-fit")))

    trace = os.path.join(a.traces, "openb_pod_list_default.csv")
    print("\nReplay of the default trace (its own arrival and departure times) on %d-GPU "
          "sub-clusters, seeds 1-%d: share of GPU pods that needed a requeue (a pod counted "
          "once however often it missed); pods queued on arrival and never placed\n" %
          (a.replay_gpus, a.replay_seeds))
    print("| seed | GPUs | GPU pods | slurm-count requeued | misses/requeued | "
          "slurm-count-first requeued | isostack requeued | queued / rejected: slurm-count | "
          "slurm-count-first | isostack | first-fit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    shares = {p: [] for p in POLICIES}
    for s in range(1, a.replay_seeds + 1):
        r = sim(isoctl, nodes, trace, "--mode", "replay", "--gpus", str(a.replay_gpus),
                "--seed", str(s))
        for p in POLICIES:
            shares[p].append(r[p]["requeue_share"])
        sc = r["slurm-count"]
        print("| %d | %d | %d | %s | %.1f | %s | %s | %d / %d | %d / %d | %d / %d | %d / %d |" %
              (s, sc["gpus"], sc["pods"] - sc["cpu_only"], pct(sc["requeue_share"]),
               sc["requeues"] / sc["requeued"] if sc["requeued"] else 0,
               pct(r["slurm-count-first"]["requeue_share"]),
               pct(r["isostack"]["requeue_share"]),
               *[x for p in POLICIES for x in (r[p]["queued"], r[p]["rejected"])]))
    print("| mean | | | %s | | %s | %s | | | | |" %
          (pct(mean(shares["slurm-count"])), pct(mean(shares["slurm-count-first"])),
           pct(mean(shares["isostack"]))))
    print("\n%.0f s" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

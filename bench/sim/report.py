#!/usr/bin/env python3
"""bench/sim/report.py: turns the JSON of `isoctl sim` runs (bench/sim/run.sh) into
CSVs (results.csv, curves.csv, ilp.csv) and prints the markdown tables of
docs/benchmarks.md. Usage: report.py DIR"""
import csv
import glob
import json
import os
import statistics
import sys

POLICIES = ["static", "first-fit", "best-fit", "fgd", "isostack"]
TRACES = ("default", "gpushare20", "gpushare40", "gpushare100")


def load(path):
    with open(path) as f:
        runs = json.load(f)
    return runs if isinstance(runs, list) else [runs]


def fmt(v, digits=4):
    return "-" if v is None else f"{v:.{digits}f}"


def policy_table(traces, cell):
    """A markdown table, one row per policy and one column per trace:
    cell(policy, trace) is the text of a cell."""
    print("| policy | " + " | ".join(traces) + " |")
    print("|---|" + "---|" * len(traces))
    for p in POLICIES:
        print(f"| {p} | " + " | ".join(cell(p, t) for t in traces) + " |")


def main(out):
    sat, rep, ilp, order = {}, {}, {}, {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        name = os.path.basename(path)[:-5]
        for r in load(path):
            if name.startswith("saturate_"):
                sat.setdefault(name[len("saturate_"):], {})[r["policy"]] = r
            elif name.startswith("replay_"):
                rep.setdefault(name[len("replay_"):], {})[r["policy"]] = r
            elif name.startswith("ilp_"):
                trace, seed = name[len("ilp_"):].rsplit("_s", 1)
                ilp.setdefault(trace, {}).setdefault(int(seed), {})[r["policy"]] = r
            elif name.startswith("order_"):
                trace, seed = name[len("order_"):].rsplit("_s", 1)
                order.setdefault(trace, {}).setdefault(int(seed), {})[r["policy"]] = r

    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "mode", "policy", "gpus", "seed", "pods", "placed", "rejected",
                    "alloc_ratio_at_100", "alloc_ratio_at_130", "mem_alloc_ratio_at_100",
                    "mem_alloc_ratio_at_130", "utilisation", "mem_utilisation", "queued",
                    "mean_wait_s", "elapsed_s"])
        for group in (sat, rep):
            for run, pols in sorted(group.items()):
                for p in POLICIES:
                    r = pols.get(p)
                    if r:
                        w.writerow([run, r["mode"], p, r["gpus"], r["seed"], r["pods"],
                                    r["placed"], r["rejected"], r["alloc_ratio_at_100"],
                                    r["alloc_ratio_at_130"], r["mem_alloc_ratio_at_100"],
                                    r["mem_alloc_ratio_at_130"], r.get("utilisation"),
                                    r.get("mem_utilisation"), r.get("queued"),
                                    r.get("mean_wait_s"), r["elapsed_s"]])
    # One curve file per trace for gnuplot: offered_pct, then one column per policy.
    for trace, pols in sat.items():
        with open(os.path.join(out, f"curve_{trace}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            have = [p for p in POLICIES if p in pols]
            w.writerow(["offered_pct"] + have)
            for k in range(len(pols[have[0]]["curve"])):
                w.writerow([pols[have[0]]["curve"][k]["offered_pct"]] +
                           [pols[p]["curve"][k]["alloc_ratio"] for p in have])
    with open(os.path.join(out, "curves.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trace", "policy", "offered_pct", "alloc_ratio", "mem_alloc_ratio"])
        for trace, pols in sorted(sat.items()):
            for p in POLICIES:
                for pt in pols.get(p, {}).get("curve", []):
                    w.writerow([trace, p, pt["offered_pct"], pt["alloc_ratio"],
                                pt["mem_alloc_ratio"]])
    with open(os.path.join(out, "ilp.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trace", "seed", "policy", "gpus", "at", "pods", "optimal", "best", "bound",
                    "policy_alloc", "gap", "ilp_s"])
        for trace, seeds in sorted(ilp.items()):
            for seed, pols in sorted(seeds.items()):
                for p in POLICIES:
                    r = pols.get(p)
                    if not r:
                        continue
                    for at in ("at_100", "at_max"):
                        i = r["ilp"][at]
                        w.writerow([trace, seed, p, r["ilp"]["gpus"], i["offered_pct"], i["pods"],
                                    i["optimal"], i["best"], i["bound"], i["policy_alloc"],
                                    i["gap"], i["elapsed_s"]])

    traces = [t for t in TRACES if t in sat]
    print("\n### Saturate, whole cluster: share of compute slices allocated at 100% / 130% "
          "offered demand\n")
    policy_table(traces, lambda p, t: "not in build" if p not in sat[t] else
                 f"{fmt(sat[t][p]['alloc_ratio_at_100'])} / {fmt(sat[t][p]['alloc_ratio_at_130'])}")
    print("\nMemory slices, same runs (100% / 130%):\n")
    policy_table(traces, lambda p, t: "-" if p not in sat[t] else
                 f"{fmt(sat[t][p]['mem_alloc_ratio_at_100'])} / "
                 f"{fmt(sat[t][p]['mem_alloc_ratio_at_130'])}")
    if traces:
        r0 = next(iter(sat[traces[0]].values()))
        print(f"\n{r0['gpus']} GPUs, {r0['slices_total']} compute slices; pods offered "
              "(default/gpushare20/40/100): " +
              "/".join(str(next(iter(sat[t].values()))["pods"]) for t in traces) +
              "; run time per policy (s, default): " +
              ", ".join(f"{p} {sat[traces[0]][p]['elapsed_s']:.1f}"
                        for p in POLICIES if p in sat[traces[0]]))

    if ilp:
        print(f"\n### Gap to the exact optimum (ILP), sub-clusters: mean over seeds of "
              "1 - policy/optimum at 100% / 130% offered\n")
        tr = [t for t in TRACES if t in ilp]

        def gap_cell(p, t):
            g100 = [s[p]["ilp"]["at_100"]["gap"] for s in ilp[t].values() if p in s]
            gmax = [s[p]["ilp"]["at_max"]["gap"] for s in ilp[t].values() if p in s]
            return ("not in build" if not g100 else
                    f"{statistics.mean(g100):.4f} / {statistics.mean(gmax):.4f}")
        policy_table(tr, gap_cell)
        for t in tr:
            runs = [next(iter(s.values()))["ilp"] for s in ilp[t].values()]
            opt = sum(1 for r in runs for a in ("at_100", "at_max") if r[a]["optimal"])
            secs = [r[a]["elapsed_s"] for r in runs for a in ("at_100", "at_max")]
            print(f"\n{t}: {len(runs)} seeds on sub-clusters of "
                  f"{statistics.median(r['gpus'] for r in runs):.0f} GPUs (median), "
                  f"{opt} of {2 * len(runs)} ILPs proven optimal, ILP time median "
                  f"{statistics.median(secs):.1f} s, max {max(secs):.1f} s")

    if order:
        print_in_order(order)

    if rep:
        print("\n### Replay of the default trace (time-weighted compute utilisation, "
              "queued, rejected)\n")
        full = rep.get("default_all", {})
        subs = {k: v for k, v in rep.items() if k != "default_all"}
        print("| policy | whole cluster: util / queued / rejected | "
              f"sub-clusters ({len(subs)} seeds, mean): util / queued / rejected / wait s |")
        print("|---|---|---|")
        for p in POLICIES:
            r = full.get(p)
            a = "not in build" if not r else \
                f"{fmt(r['utilisation'])} / {r['queued']} / {r['rejected']}"
            s = [v[p] for v in subs.values() if p in v]
            b = "-" if not s else (
                f"{statistics.mean(x['utilisation'] for x in s):.4f} / "
                f"{statistics.mean(x['queued'] for x in s):.0f} / "
                f"{statistics.mean(x['rejected'] for x in s):.0f} / "
                f"{statistics.mean(x['mean_wait_s'] or 0 for x in s):.0f}")
            print(f"| {p} | {a} | {b} |")


def print_in_order(order):
    """Both bounds on the same small sub-clusters: the any-subset optimum and the
    in-order one (the best a policy that places every arrival that fits can do).
    Gaps are against each ILP's bound, an upper bound whether or not GLPK proved
    it optimal, so an unproven point can only overstate a gap."""
    tr = [t for t in TRACES if t in order]
    print("\n### Both bounds on small sub-clusters: mean over seeds of the gap to the "
          "any-subset / the in-order bound, at 100% ; at 130% offered\n")
    def both_cell(p, t):
        parts = []
        for at in ("at_100", "at_max"):
            runs = [s[p]["ilp"] for s in order[t].values() if p in s]
            parts.append("-" if not runs else
                         f"{statistics.mean(r[at]['gap'] for r in runs):.4f} / "
                         f"{statistics.mean(r['in_order'][at]['gap'] for r in runs):.4f}")
        return " ; ".join(parts)
    policy_table(tr, both_cell)
    for t in tr:
        runs = [next(iter(s.values()))["ilp"] for s in order[t].values()]
        proven = sum(1 for r in runs for a in ("at_100", "at_max")
                     if r["in_order"][a]["optimal"])
        lower = sum(1 for r in runs for a in ("at_100", "at_max")
                    if r["in_order"][a]["bound"] < r[a]["bound"])
        secs = [r["in_order"][a]["elapsed_s"] for r in runs for a in ("at_100", "at_max")]
        print(f"\n{t}: {len(runs)} seeds on sub-clusters of "
              f"{statistics.median(r['gpus'] for r in runs):.0f} GPUs (median); "
              f"in-order optimum proven at {proven} of {2 * len(runs)} points, its bound "
              f"below the any-subset one at {lower}; in-order ILP time median "
              f"{statistics.median(secs):.1f} s, max {max(secs):.1f} s")


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/env python3
"""bench/slurm/start.py: what the isostack plugin adds to a Slurm job's start
(issue 15, docs/benchmarks.md "Slurm: job start overhead").

Why this exists: a site adds isostack under an unchanged Slurm, and every job
then waits in PrologSlurmctld for its allocation (fabric confirmation, MIG
instances, the agent gate) and in task_init_privileged for the plugin's lookup.
This measures that wait against the same Slurm without the plugin, in one run.

For each fabric mode (scripts/slurm-test-cluster.sh FABRIC_MODE: sim, ibsim,
ibsim-1000) it brings up the test cluster in a fresh STATE_DIR and submits the
same stream of short jobs in alternating batches to two configurations of the
same slurmctld, slurmd and nodes:
  with     the cluster as started: plugstack `required isostack.so`,
           PrologSlurmctld/EpilogSlurmctld = isoctl slurm prolog|epilog; each
           job `sbatch -A acme --isostack-profile=1g.10gb`;
  without  slurm.conf with PrologSlurmctld and EpilogSlurmctld removed and
           PlugStackConfig an empty file, applied by `scontrol reconfigure`;
           each job `sbatch -A acme` (the option is unknown without the plugin).
Each job is one task on one node (Slurm chooses it): `date +%s.%N` first
thing, then `ISOSTACK_ALLOCATION` (checked: set in every with-job, unset in
every without-job). Jobs go one at a time: the next is submitted when the last
has left squeue, so that the time measured is the start path and not a queue.
Batches alternate with/without, every other pair in the other order (ABBA),
so that drift and noise hit both.

Measured per job: submit (CLOCK_REALTIME just before sbatch) -> running (the
task's own timestamp). With the plugin, also where the time goes: the prolog's
start and end (a wrapper around the cluster's prolog.sh writes them; it costs
the with-jobs two `date` forks), the allocation's created/active times from
isostackd's log, and the rest (Slurm's launch after the prolog + the plugin's
lookup at the agent).

Usage: bench/slurm/start.py [--build build] [--jobs 100] [--batch 10]
                            [--modes sim,ibsim,ibsim-1000] [--keep]
Exit 77 when Slurm, munge, ibsim or OpenSM is missing.
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "slurm-test-cluster.sh")
GOALS = {"sim": 0.100, "ibsim-1000": 1.0}  # p99 overhead, seconds (issue 15)


def pct(xs, p):
    """Nearest-rank percentile (bench/fabric/run.py's)."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


class Cluster:
    def __init__(self, build, mode, keep, sched_delay):
        self.mode, self.keep, self.sched_delay = mode, keep, sched_delay
        # short: munge's socket path must fit sun_path
        self.dir = tempfile.mkdtemp(prefix="isob15.", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.jobs = os.path.join(self.dir, "jobs")
        os.makedirs(self.jobs)
        self.env = dict(os.environ, BUILD=build, FABRIC_MODE=mode, WAIT_S="180")

    def script(self, cmd):
        return subprocess.run(["bash", SCRIPT, cmd, self.dir], capture_output=True, text=True,
                              env=self.env, timeout=900)

    def start(self):
        r = self.script("start")
        if r.returncode == 77:
            sys.stderr.write("skip: %s\n" % r.stderr.strip().splitlines()[-1])
            sys.exit(77)
        if r.returncode != 0:
            raise RuntimeError("slurm-test-cluster.sh start (%s): exit %d\n%s" % (
                self.mode, r.returncode, r.stderr[-4000:]))
        for line in r.stdout.strip().splitlines()[-3:]:
            m = re.match(r"^export (SLURM_CONF|ISOSTACK_URL|ISOSTACK_TOKEN)='([^']*)'$", line)
            if not m:
                raise RuntimeError("start's last lines are not the exports: %r" % line)
            self.env[m.group(1)] = m.group(2)
        self.conf = self.env["SLURM_CONF"]
        sdir = os.path.dirname(self.conf)
        with open(self.conf) as f:
            text = f.read()
        # Slurm's own batch_sched_delay (3 s by default) delays a batch job's
        # scheduling by up to 3 s in both arms alike; it is set for both (0
        # unless --batch-sched-delay) so that it does not drown the overhead.
        text = text.replace("\nPlugStackConfig=", "\nSchedulerParameters=batch_sched_delay=%d"
                            "\nPlugStackConfig=" % self.sched_delay, 1)
        self.conf_with = text
        text = re.sub(r"(?m)^(PrologSlurmctld|EpilogSlurmctld)=.*\n", "", text)
        if "PrologSlurmctld" in text or "batch_sched_delay" not in text:
            raise RuntimeError("slurm.conf: cannot make the configuration without the plugin")
        self.conf_without = text
        self.plugstack = os.path.join(sdir, "plugstack.conf")
        with open(self.plugstack) as f:
            self.plugstack_with = f.read()
        if "isostack.so" not in self.plugstack_with:
            raise RuntimeError("the cluster's plugstack has no isostack.so: is it built?")
        # the prolog, timed: start and end of each run in prolog.times
        prolog = os.path.join(sdir, "prolog.sh")
        inner = os.path.join(sdir, "prolog-inner.sh")
        self.times = os.path.join(sdir, "prolog.times")
        os.rename(prolog, inner)
        with open(prolog + ".tmp", "w") as f:
            f.write("#!/bin/sh\n# bench/slurm/start.py: the cluster's prolog, timed\n"
                    "t0=$(date +%%s.%%N)\n'%s'\nrc=$?\n"
                    "echo \"$SLURM_JOB_ID $t0 $(date +%%s.%%N) $rc\" >>'%s'\nexit $rc\n"
                    % (inner, self.times))
        os.chmod(prolog + ".tmp", 0o755)
        os.rename(prolog + ".tmp", prolog)
        self.arm = None
        self.warm = 0
        self.rng = random.Random(15)

    def run(self, *argv, check=True, timeout=60):
        r = subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("%s: exit %d: %s%s" % (" ".join(argv), r.returncode, r.stdout,
                                                      r.stderr))
        return r

    def configure(self, arm):
        """slurm.conf and plugstack.conf of the arm, slurmctld restarted (a
        reconfigure of Slurm 22.05 leaves slurmscriptd running a removed
        PrologSlurmctld: exit 127 for every job). The plugstack is read by
        sbatch and by slurmstepd at each launch, so its file is rewritten."""
        if arm == self.arm:
            return
        for path, text in ((self.conf, self.conf_with if arm == "with" else self.conf_without),
                           (self.plugstack, self.plugstack_with if arm == "with" else
                            "# bench/slurm/start.py: the run without the plugin\n")):
            with open(path + ".tmp", "w") as f:
                f.write(text)
            os.rename(path + ".tmp", path)
        pidf = os.path.join(self.dir, "run", "slurmctld.pid")
        with open(pidf) as f:
            pid = int(f.read())
        os.kill(pid, signal.SIGTERM)
        t0 = time.monotonic()
        while os.path.exists("/proc/%d" % pid) and not gone(pid):
            if time.monotonic() - t0 > 30:
                raise RuntimeError("slurmctld %d did not stop" % pid)
            time.sleep(0.05)
        with open(os.path.join(self.dir, "log", "slurmctld.log"), "a") as log:
            p = subprocess.Popen(["slurmctld", "-D", "-i", "-f", self.conf], stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=log, start_new_session=True, env=self.env)
        with open(pidf, "w") as f:
            f.write("%d\n" % p.pid)
        self.ctld = p
        t0 = time.monotonic()
        while True:
            up = "is UP" in self.run("scontrol", "ping", check=False).stdout
            idle = self.run("sinfo", "-h", "-N", "-o", "%t", check=False).stdout.split() if up else []
            if len(idle) == 4 and set(idle) == {"idle"}:
                break
            if p.poll() is not None or time.monotonic() - t0 > 60:
                raise RuntimeError("slurmctld (%s) not up with 4 idle nodes: %s" % (arm, idle))
            time.sleep(0.2)
        r = self.run("scontrol", "show", "config")
        m = re.search(r"(?m)^PrologSlurmctld\s*=\s*(\S+)", r.stdout)
        want = "(null)" if arm == "without" else os.path.join(os.path.dirname(self.conf),
                                                              "prolog.sh")
        if not m or m.group(1) != want or "batch_sched_delay=%d" % self.sched_delay not in r.stdout:
            raise RuntimeError("slurmctld (%s): PrologSlurmctld %s" % (arm, m and m.group(1)))
        self.arm = arm
        self.warm -= 1
        self.job(arm, self.warm)  # unmeasured: the first job after a restart

    def job(self, arm, seq):
        out = os.path.join(self.jobs, "%s-%d.out" % (arm, seq))
        argv = ["sbatch", "--parsable", "-A", "acme", "-N", "1", "-n", "1", "-o", out]
        if arm == "with":
            argv.append("--isostack-profile=1g.10gb")
        argv += ["--wrap", "date +%s.%N; echo A=$ISOSTACK_ALLOCATION"]
        # a random pause first: Slurm schedules batch jobs on a 1 s tick, and
        # without it each arm's own cycle length would fix its phase on it
        time.sleep(self.rng.random())
        t_submit = time.time()
        r = self.run(*argv)
        t_sbatch = time.time()
        jobid = r.stdout.strip().split(";")[0]
        t0 = time.monotonic()
        while True:  # the task's timestamp, then the job gone from the queue
            if os.path.exists(out):
                with open(out) as f:
                    lines = f.read().splitlines()
                if len(lines) >= 2:
                    break
            if time.monotonic() - t0 > 120:
                raise RuntimeError("job %s (%s) wrote nothing in 120 s: %s" % (
                    jobid, arm, self.run("squeue", "-h", "-t", "all", "-j", jobid,
                                         "-o", "%T %r %k", check=False).stdout))
            time.sleep(0.01)
        running = float(lines[0])
        alloc = lines[1][2:]
        if (arm == "with") != bool(alloc):
            raise RuntimeError("job %s (%s): ISOSTACK_ALLOCATION=%r" % (jobid, arm, alloc))
        while self.run("squeue", "-h", "-j", jobid, "-o", "%i", check=False).stdout.strip():
            if time.monotonic() - t0 > 120:
                raise RuntimeError("job %s (%s) still listed after 120 s" % (jobid, arm))
            time.sleep(0.05)
        return {"id": jobid, "arm": arm, "submit": t_submit, "sbatch": t_sbatch - t_submit,
                "running": running, "start": running - t_submit, "alloc": alloc}

    def stop(self):
        self.script("stop")
        if self.keep:
            sys.stderr.write("kept %s\n" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def gone(pid):
    """The process has exited (a zombie counts)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def log_times(path, event):
    """{allocation id: epoch seconds} of isostackd's `event=EVENT ... id=ID` lines."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            if " event=%s " % event not in line:
                continue
            m = re.search(r"\bid=(\S+)", line)
            ts = line.split(" ", 1)[0]
            try:
                t = datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            if m:
                out.setdefault(m.group(1), t)
    return out


def allocate_times(c):
    """{job id: epoch seconds} of slurmctld's `sched: Allocate JobId=N` (the
    main scheduler) and `_start_job: Started JobId=N` (backfill) lines (local
    time, ms)."""
    out = {}
    with open(os.path.join(c.dir, "log", "slurmctld.log"), errors="replace") as f:
        for line in f:
            m = re.match(r"^\[([0-9T:.-]+)\] (?:sched: Allocate|sched/backfill: _start_job: Started) "
                         r"JobId=(\d+) ", line)
            if m:
                out[m.group(2)] = datetime.fromisoformat(m.group(1)).timestamp()
    return out


def breakdown(c, jobs):
    """Per with-job: submit -> prolog start, prolog start -> created, created
    -> active, active -> prolog end, prolog end -> running."""
    prolog = {}
    with open(c.times) as f:
        for line in f:
            jid, t0, t1, rc = line.split()
            prolog[jid] = (float(t0), float(t1), int(rc))
    log = os.path.join(c.dir, "log", "isostackd.log")
    created, active = log_times(log, "allocation_created"), log_times(log, "allocation_active")
    parts = {k: [] for k in ("to_prolog", "to_created", "to_active", "to_prolog_end",
                             "to_running")}
    for j in jobs:
        p = prolog.get(j["id"])
        a = j["alloc"]
        if not p or a not in created or a not in active:
            raise RuntimeError("job %s: no prolog time or log line (%r %r)" % (j["id"], p, a))
        parts["to_prolog"].append(p[0] - j["submit"])
        parts["to_created"].append(created[a] - p[0])
        parts["to_active"].append(active[a] - created[a])
        parts["to_prolog_end"].append(p[1] - active[a])
        parts["to_running"].append(j["running"] - p[1])
    return parts


def run_mode(args, build, mode):
    c = Cluster(build, mode, args.keep, args.batch_sched_delay)
    t0 = time.monotonic()
    try:
        c.start()
        up = time.monotonic() - t0
        print("# %s: cluster up in %.1f s (%s)" % (mode, up, c.dir), flush=True)
        res = {"with": [], "without": []}
        seq = 0
        pairs = (args.jobs + args.batch - 1) // args.batch
        for i in range(pairs):
            order = ("with", "without") if i % 2 == 0 else ("without", "with")
            for arm in order:
                c.configure(arm)
                for _ in range(min(args.batch, args.jobs - len(res[arm]))):
                    seq += 1
                    res[arm].append(c.job(arm, seq))
        parts = breakdown(c, res["with"])
        alloc = allocate_times(c)
        for j in res["with"] + res["without"]:
            if j["id"] not in alloc:
                raise RuntimeError("job %s: no 'sched: Allocate' or backfill line" % j["id"])
            j["launch"] = j["running"] - alloc[j["id"]]
        return res, parts, time.monotonic() - t0
    finally:
        c.stop()


def fmt_ms(x):
    return "%.0f" % (1000 * x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--jobs", type=int, default=100, help="jobs per arm and mode")
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--modes", default="sim,ibsim,ibsim-1000")
    ap.add_argument("--batch-sched-delay", type=int, default=0,
                    help="Slurm's SchedulerParameters=batch_sched_delay, both arms (Slurm: 3)")
    ap.add_argument("--keep", action="store_true", help="keep each cluster's STATE_DIR")
    args = ap.parse_args()
    modes = args.modes.split(",")
    for m in modes:
        if m not in ("sim", "ibsim", "ibsim-1000"):
            ap.error("--modes: unknown mode %r (sim, ibsim, ibsim-1000)" % m)
    if args.jobs < 1 or args.batch < 1:
        ap.error("--jobs and --batch must be 1 or more")
    build = args.build if os.path.isabs(args.build) else os.path.join(ROOT, args.build)

    details = []
    for mode in modes:
        res, parts, wall = run_mode(args, build, mode)
        details.append((mode, wall, parts, res))
        print("# %s done in %.0f s" % (mode, wall), flush=True)

    def table(title, key, goals):
        print(title)
        print()
        print("| fabric | jobs per arm | without p50 | with p50 | overhead p50 | ratio p50 | "
              "without p99 | with p99 | overhead p99 | ratio p99 |%s" % (
                  " goal (p99 overhead) |" if goals else ""))
        print("|---|---|---|---|---|---|---|---|---|---|%s" % ("---|" if goals else ""))
        for mode, wall, parts, res in details:
            w = [j[key] for j in res["with"]]
            wo = [j[key] for j in res["without"]]
            cells = [mode, "%d" % len(w)]
            for p in (50, 99):
                cells += ["%s ms" % fmt_ms(pct(wo, p)), "%s ms" % fmt_ms(pct(w, p)),
                          "%s ms" % fmt_ms(pct(w, p) - pct(wo, p)),
                          "%.2f" % (pct(w, p) / pct(wo, p))]
            if goals:
                g = GOALS.get(mode)
                over = pct(w, 99) - pct(wo, 99)
                cells.append("-" if g is None else "< %s ms: %s" % (
                    fmt_ms(g), "met" if over < g else "NOT met"))
            print("| %s |" % " | ".join(cells))
        print()

    print()
    table("Submit (just before sbatch) -> the task's first timestamp:", "start", True)
    table("Slurm's `sched: Allocate` (slurmctld log) -> the task's first timestamp (without "
          "Slurm's 1 s scheduling tick):", "launch", False)
    print("Where a with-job's time goes (ms, p50 / p99 of each part; the parts' p50s need not "
          "add up to the total's):")
    print()
    print("| fabric | submit -> prolog starts | prolog -> allocation created | created -> active "
          "| active -> prolog ends | prolog end -> task runs | sbatch itself (with / without) |")
    print("|---|---|---|---|---|---|---|")
    for mode, wall, parts, res in details:
        cells = ["%s / %s" % (fmt_ms(pct(parts[k], 50)), fmt_ms(pct(parts[k], 99)))
                 for k in ("to_prolog", "to_created", "to_active", "to_prolog_end",
                           "to_running")]
        sb = "%s / %s" % (fmt_ms(pct([j["sbatch"] for j in res["with"]], 50)),
                          fmt_ms(pct([j["sbatch"] for j in res["without"]], 50)))
        print("| %s | %s | %s |" % (mode, " | ".join(cells), sb))
    print()
    for mode, wall, parts, res in details:
        print("- %s: %.0f s; submit -> running max: without %s ms, with %s ms" % (
            mode, wall, fmt_ms(max(j["start"] for j in res["without"])),
            fmt_ms(max(j["start"] for j in res["with"]))))


if __name__ == "__main__":
    main()

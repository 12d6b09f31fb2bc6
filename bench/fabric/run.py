#!/usr/bin/env python3
"""run.py: how long a tenant waits for its P_Keys on a 1,000-HCA fabric.

Why this exists: isostack issue 5's benchmark. An allocation on an InfiniBand
cluster only goes `active` once the opensm driver has read the tenant's P_Key
back from every port it changed (docs/fabric.md), so the latency a user sees is
isostack's work plus OpenSM's reload. This script measures it end to end on a
real OpenSM over ibsim, against OpenSM's own reload cost measured in the same
run, and times the full-fabric verifier.

    python3 bench/fabric/run.py [--build build] [--hcas 1000] [--vfs 1]
                                [--tenants 100] [--baseline-runs 10]
                                [--verify-runs 5] [--keep]

Steps (everything in one temp dir, removed at the end unless --keep):
  1. `isoctl fabric ibsim-net --synthetic N --vfs K --inventory-out` gives the
     fat tree and its inventory. The inventory's fabric section is rewritten
     for `driver: opensm` (files in the temp dir, coalesce_ms 50) and its node
     class gets 8 H100-80GB so that every allocation holds a whole GPU.
  2. scripts/ibsim-fabric.sh starts ibsim (IBSIM_ARGS from the net file's
     `# isostack-ibsim:` counts) and OpenSM.
  3. Baseline, before isostackd runs: OpenSM alone. Each run writes
     partitions.conf with one more partition (one VF full), SIGHUPs OpenSM and
     polls `smpquery -G pkeys` every 5 ms until that VF holds the key.
  4. isostackd (the plain build, under the env file's LD_PRELOAD) starts;
     2 x TENANTS tenants are created. (isostackd unregisters its MAD agents
     before closing a port, so umad2sim, which never frees them itself, does
     not run out: docs/benchmarks.md.)
  5. Sequential: for each of the first TENANTS tenants, POST one allocation
     (1 member, 1 whole GPU) and poll GET /v1/allocations/ID every 5 ms until
     it is active.
  6. Burst: one allocation for each of the other TENANTS tenants (new tenants,
     so that every allocation adds a partition and a port), POSTed by 16
     threads at once; then GET /v1/fabric every 5 ms until nothing waits.
     Reloads = partitions.conf writes, counted by a thread that watches the
     file's inode (the driver replaces it by rename) and its generation line.
  7. Verify: GET /v1/fabric/verify VERIFY_RUNS times.

Prints a markdown table; exit 0 when every step worked (1 otherwise). ibsim,
OpenSM and isostackd are stopped on any exit, Ctrl-C included. Exit 77 when
ibsim or OpenSM is not installed.
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
import harness  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "ibsim-fabric.sh")
POLL_S = 0.005

# umad2sim stand-in for what the kernel does when a umad fd is closed: drop
# the agents registered on it. Without it one process can open a MAD port
# only ~31 times under umad2sim (libibmad's mad_rpc_close_port closes the fd
# without umad_unregister, and umad2sim never frees the agents), and
# isostackd opens one per read-back poll: see docs/benchmarks.md.
def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def fabric_section(d, services_line, coalesce_ms=50):
    return ("fabric:\n"
            "  type: infiniband\n"
            "  name: ib0\n"
            "  driver: opensm\n"
            "  sm_nodes: [sm-1]\n"
            "  pkey_range: [0x0100, 0x7ffe]\n"
            "  partitions_file: %s/partitions.conf\n"
            "  pid_file: %s/opensm.pid\n"
            "  log_file: %s/opensm.log\n"
            "  coalesce_ms: %d\n"
            "  confirm_timeout_ms: 20000\n"
            "%s" % (d, d, d, coalesce_ms, services_line))


def rewrite_inventory(text, d):
    """The synthetic inventory, driven by OpenSM, with GPUs on every node."""
    m = re.search(r"^fabric:\n((?:  .*\n)+)", text, re.M)
    if not m:
        raise RuntimeError("synthetic inventory without a fabric section")
    svc = re.search(r"^  shared_services:\n(?:    .*\n)+", m.group(1), re.M)
    text = text[:m.start()] + fabric_section(d, svc.group(0) if svc else "") + text[m.end():]
    text, n = re.subn(r"^(  hca:\n)", r"\1    gpus: {model: h100-80gb, count: 8, mig: true}\n",
                      text, flags=re.M)
    if n != 1:
        raise RuntimeError("synthetic inventory without the hca node class")
    return text


class Fabric:
    """ibsim + OpenSM in `dir`, started through scripts/ibsim-fabric.sh."""

    def __init__(self, d):
        self.dir = d
        self.started = False
        self.env = {}

    def start(self, net, ibsim_args):
        env = dict(os.environ, IBSIM_ARGS=ibsim_args)
        self.started = True  # stop even a half start
        r = subprocess.run(["sh", SCRIPT, "start", self.dir, net], capture_output=True, text=True,
                           env=env)
        if r.returncode == 77:
            sys.stderr.write("ibsim/opensm not installed: %s" % r.stderr)
            sys.exit(77)
        if r.returncode != 0:
            raise RuntimeError("ibsim-fabric start: %s" % r.stderr)
        with open(os.path.join(self.dir, "env")) as f:
            for line in f:
                m = re.match(r"^(IBSIM_SOCKNAME|LD_PRELOAD)=(.*)$", line.strip())
                if m:
                    self.env[m.group(1)] = m.group(2)

    def opensm_pid(self):
        with open(os.path.join(self.dir, "opensm.pid")) as f:
            return int(f.read())

    def has_key(self, guid, raw):
        """True when smpquery reads raw P_Key `raw` in port `guid`'s table."""
        r = subprocess.run(["smpquery", "-G", "pkeys", "0x%016x" % guid], capture_output=True,
                           text=True, env=dict(os.environ, **self.env), timeout=30)
        return r.returncode == 0 and ("0x%04x" % raw) in r.stdout

    def pkeys(self, guid):
        """Port `guid`'s P_Key table as smpquery reads it: {base: full?}
        (bench/cni/ib.py)."""
        r = subprocess.run(["smpquery", "-G", "pkeys", "0x%016x" % guid], capture_output=True,
                           text=True, env=dict(os.environ, **self.env), timeout=30)
        if r.returncode != 0:
            raise RuntimeError("smpquery pkeys 0x%016x: %s" % (guid, r.stderr.strip()))
        keys = {}
        for v in re.findall(r"0x([0-9a-f]{4})", r.stdout):
            raw = int(v, 16)
            if raw & 0x7fff:
                keys[raw & 0x7fff] = bool(raw & 0x8000)
        return keys

    def stop(self):
        if self.started:
            subprocess.run(["sh", SCRIPT, "stop", self.dir], capture_output=True)
            self.started = False


class FileWatch(threading.Thread):
    """Counts replacements of partitions.conf (a new inode each: the driver
    writes a temp file and renames it) and the generations written."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.writes = 0
        self.gens = []
        self.last = None

    def run(self):
        while not self.halt.is_set():
            try:
                st = os.stat(self.path)
                key = (st.st_ino, st.st_mtime_ns)
                if key != self.last:
                    with open(self.path) as f:
                        head = f.readline()
                    with self.lock:
                        if self.last is not None:
                            self.writes += 1
                            m = re.search(r"generation (\d+)", head)
                            self.gens.append(int(m.group(1)) if m else None)
                        self.last = key
            except OSError:
                pass
            time.sleep(0.001)

    def mark(self):
        with self.lock:
            return self.writes, len(self.gens)

    def since(self, mark):
        with self.lock:
            return self.writes - mark[0], self.gens[mark[1]:]


def baseline(fab, guids, runs):
    """OpenSM alone: one more partition in the file, SIGHUP, poll smpquery."""
    path = os.path.join(fab.dir, "partitions.conf")
    rules = ["Default=0x7fff, ipoib : ALL=limited, SELF=full ;"]
    out = []
    for k in range(runs):
        key = 0x7000 + k
        rules.append("b%d=0x%04x, ipoib : 0x%016x=full ;" % (k, key, guids[k]))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(rules) + "\n")
            f.flush()
            os.fsync(f.fileno())
        t0 = time.monotonic()
        os.rename(tmp, path)
        os.kill(fab.opensm_pid(), signal.SIGHUP)
        while not fab.has_key(guids[k], 0x8000 | key):
            if time.monotonic() - t0 > 30:
                raise RuntimeError("baseline: key 0x%04x never reached 0x%016x" % (key, guids[k]))
            time.sleep(POLL_S)
        out.append(time.monotonic() - t0)
    # Back to Default only, and wait until OpenSM has taken the keys away
    # again, so isostackd starts on a clean fabric.
    with open(path, "w") as f:
        f.write(rules[0] + "\n")
    os.kill(fab.opensm_pid(), signal.SIGHUP)
    t0 = time.monotonic()
    while fab.has_key(guids[runs - 1], 0x8000 | (0x7000 + runs - 1)):
        if time.monotonic() - t0 > 30:
            raise RuntimeError("baseline: keys not removed")
        time.sleep(0.05)
    return out


def fabric_state(c):
    r = c.get("/v1/fabric")
    if r.status != 200:
        raise RuntimeError("GET /v1/fabric: %r" % r)
    return r.body


def wait_settled(c, timeout):
    """Until the intent is confirmed and no allocation waits."""
    t0 = time.monotonic()
    while True:
        f = fabric_state(c)
        if f["confirmed"] >= f["generation"] and f["waiting"] == 0:
            return f
        if time.monotonic() - t0 > timeout:
            raise RuntimeError("fabric not settled after %.0f s: %r" % (timeout, f))
        time.sleep(POLL_S)


ALLOC = {"members": 1, "cpus": 1, "memory_mib": 1024, "gpus": {"count": 1, "whole": True}}


def post_alloc(c, tenant):
    r = c.post("/v1/allocations", dict(ALLOC, tenant=tenant))
    if r.status != 201:
        raise RuntimeError("POST /v1/allocations for %s: %r" % (tenant, r))
    return r.body


def sequential(c, tenants, timeout):
    lat = []
    for t in tenants:
        t0 = time.monotonic()
        a = post_alloc(c, t)
        while a["state"] != "active":
            if time.monotonic() - t0 > timeout:
                raise RuntimeError("allocation %s not active after %.0f s: %r; fabric %r"
                                   % (a["id"], timeout, a, fabric_state(c)))
            time.sleep(POLL_S)
            r = c.get("/v1/allocations/" + a["id"])
            if r.status != 200:
                raise RuntimeError("GET allocation: %r" % r)
            a = r.body
        lat.append(time.monotonic() - t0)
    return lat


def burst(c, tenants, timeout):
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as ex:
        allocs = list(ex.map(lambda t: post_alloc(c, t), tenants))
    posted = time.monotonic() - t0
    while True:
        f = fabric_state(c)
        if f["waiting"] == 0 and f["confirmed"] >= f["generation"]:
            break
        if time.monotonic() - t0 > timeout:
            raise RuntimeError("burst not confirmed after %.0f s: %r" % (timeout, f))
        time.sleep(POLL_S)
    done = time.monotonic() - t0
    states = {}
    for a in allocs:
        s = c.get("/v1/allocations/" + a["id"]).body["state"]
        states[s] = states.get(s, 0) + 1
    if states != {"active": len(allocs)}:
        raise RuntimeError("burst: states %r" % states)
    return posted, done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--hcas", type=int, default=1000)
    ap.add_argument("--vfs", type=int, default=1)
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--baseline-runs", type=int, default=10)
    ap.add_argument("--verify-runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs)")
    args = ap.parse_args()
    if args.vfs < 0:
        ap.error("--vfs must be 0 or more (0: every node fabric-exclusive, its PF a tenant's)")
    build = os.path.join(ROOT, args.build) if not os.path.isabs(args.build) else args.build
    isoctl, isostackd = os.path.join(build, "isoctl"), os.path.join(build, "isostackd")
    if harness.is_sanitized(isostackd):
        sys.stderr.write("warning: %s is a sanitizer build; timings will be slow\n" % isostackd)

    # SIGTERM/SIGHUP end the run like Ctrl-C does, through the finally below.
    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    d = tempfile.mkdtemp(prefix="isobench-fabric-")
    fab = daemon = watch = None
    ok = False
    try:
        inv_path, net_path = os.path.join(d, "synthetic.yaml"), os.path.join(d, "ibsim.net")
        t0 = time.monotonic()
        with open(net_path, "w") as f:
            subprocess.run([isoctl, "fabric", "ibsim-net", "--synthetic", str(args.hcas),
                            "--vfs", str(args.vfs), "--inventory-out", inv_path],
                           stdout=f, check=True)
        with open(net_path) as f:
            m = re.search(r"^# isostack-ibsim: cas=(\d+) leaves=(\d+) spines=(\d+) nodes=(\d+) "
                          r"switches=(\d+) ports=(\d+)", f.read(), re.M)
        cas, nodes, switches, ports = (int(m.group(i)) for i in (1, 4, 5, 6))
        ibsim_args = "-N %d -S %d -P %d" % (max(2048, nodes), max(256, switches),
                                             max(13312, ports))
        with open(inv_path) as f:
            inv = rewrite_inventory(f.read(), d)
        cfg = os.path.join(d, "cluster.yaml")
        with open(cfg, "w") as f:
            f.write(inv)
        # VF 0 (or, without VFs, the PF) of the last HCAs: ports no tenant
        # will get in this run.
        if args.vfs > 0:
            vf_guids = [int(g, 16) for g in re.findall(r"vfs: \{guid_base: (0x[0-9a-f]+)\}", inv)]
        else:
            vf_guids = [int(g, 16) for g in re.findall(r"port: \{guid: (0x[0-9a-f]+)\}", inv)]
        print("# %d HCAs x %d VFs: %d CAs, %d switches; ibsim %s" %
              (args.hcas, args.vfs, cas, switches, ibsim_args), flush=True)

        fab = Fabric(d)
        fab.start(net_path, ibsim_args)
        print("# ibsim + OpenSM up in %.1f s" % (time.monotonic() - t0), flush=True)
        base = baseline(fab, vf_guids[-args.baseline_runs:], args.baseline_runs)
        print("# baseline (OpenSM alone) s: %s" % " ".join("%.3f" % x for x in base), flush=True)

        env = dict(fab.env)
        daemon = harness.Daemon(cfg, binary=isostackd, env=env)
        daemon.start(timeout=60)
        c = harness.Client(daemon, daemon.admin_token)
        wait_settled(c, 60)
        names = []
        for i in range(2 * args.tenants):
            name = "bench-%04d" % i
            r = c.post("/v1/tenants", {"name": name})
            if r.status != 201:
                raise RuntimeError("POST /v1/tenants: %r" % r)
            names.append(name)
        wait_settled(c, 60)

        watch = FileWatch(os.path.join(d, "partitions.conf"))
        watch.start()
        time.sleep(0.05)
        mk = watch.mark()
        seq = sequential(c, names[:args.tenants], 60)
        seq_writes, _ = watch.since(mk)
        print("# sequential done: p50 %.3f s, max %.3f s" % (statistics.median(seq), max(seq)),
              flush=True)

        time.sleep(0.5)
        g0 = fabric_state(c)
        mk = watch.mark()
        posted, done = burst(c, names[args.tenants:], 120)
        time.sleep(0.2)  # let the watcher see the last rename
        b_writes, b_gens = watch.since(mk)
        g1 = fabric_state(c)
        print("# burst done: %.3f s, %d writes (generations %s)" % (done, b_writes, b_gens),
              flush=True)

        vers = []
        for _ in range(args.verify_runs):
            t1 = time.monotonic()
            r = c.get("/v1/fabric/verify")
            wall = time.monotonic() - t1
            if r.status != 200 or not r.body.get("ok"):
                raise RuntimeError("verify not ok: %s" % r.text[:2000])
            vers.append((r.body["elapsed_ms"], wall, r.body["ports_checked"],
                         r.body["partitions_checked"]))

        b50 = statistics.median(base)
        rows = [
            ("baseline: OpenSM alone, file + SIGHUP -> key on the port (%d runs)" % len(base),
             "%.3f" % b50, "-", "%.3f" % max(base), "1"),
            ("sequential: POST -> active (%d allocations)" % len(seq),
             "%.3f" % statistics.median(seq), "%.3f" % pct(seq, 99), "%.3f" % max(seq),
             "%.2f (p50) / %.2f (p99)" % (statistics.median(seq) / b50, pct(seq, 99) / b50)),
            ("burst: first POST -> last active (%d allocations; POSTs took %.3f s)"
             % (args.tenants, posted), "%.3f" % done, "-", "-", "%.2f" % (done / b50)),
        ]
        el = [v[0] / 1000.0 for v in vers]
        wl = [v[1] for v in vers]
        rows.append(("verify: GET /v1/fabric/verify, elapsed_ms (%d runs, %d ports, "
                     "%d partitions)" % (len(vers), vers[0][2], vers[0][3]),
                     "%.3f" % statistics.median(el), "-", "%.3f" % max(el), "-"))
        rows.append(("verify: the same, request wall time", "%.3f" % statistics.median(wl), "-",
                     "%.3f" % max(wl), "-"))
        print()
        print("| measure (seconds) | p50 | p99 | max | ratio to baseline p50 |")
        print("|---|---|---|---|---|")
        for row in rows:
            print("| %s |" % " | ".join(row))
        print()
        print("- partitions.conf writes (OpenSM reloads): sequential %d for %d allocations; "
              "burst %d for %d allocations (generation %d -> %d, written %s)"
              % (seq_writes, len(seq), b_writes, args.tenants, g0["generation"],
                 g1["generation"], b_gens))
        print("- verify: ok in all %d runs; elapsed_ms %s" %
              (len(vers), " ".join(str(v[0]) for v in vers)))
        ok = True
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
    except Exception as e:  # noqa: BLE001 - report, clean up, exit 1
        sys.stderr.write("FAILED: %s\n" % e)
        if daemon is not None:
            sys.stderr.write("--- isostackd stderr tail ---\n%s\n" % daemon.stderr_tail(30))
        args.keep = True
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if watch is not None:
            watch.halt.set()
        if daemon is not None:
            daemon.cleanup()
        if fab is not None:
            fab.stop()
        if args.keep:
            sys.stderr.write("kept %s\n" % d)
        else:
            shutil.rmtree(d, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

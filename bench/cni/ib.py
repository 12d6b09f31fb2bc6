#!/usr/bin/env python3
"""bench/cni/ib.py: what an isostack-cni InfiniBand attachment costs a pod's
start and stop on bench/fabric's 1,000-HCA fabric (issue 17, docs/cni.md
"InfiniBand"), against Debian's bridge plugin with host-local in the same
run, and 100 concurrent IB ADDs on one node.

Why a sibling of run.py: the same bench (pods as namespaces, the plugin run
as a runtime runs it in the node namespace h1, rotating rounds of ADD+DEL
cycles against the bridge plugin, the concurrent burst: its Bench class,
reused here), on another fabric. What differs:
  - the fabric: `isoctl fabric ibsim-net --synthetic HCAS --vfs 0` (as
    bench/fabric and bench/slurm's ibsim-1000), its node n00001 given VFS VFs
    (a node class of its own, VF GUIDs right after its PF's), the net file
    rendered from that edited inventory, ibsim (limits from the net file's
    counts) and OpenSM (scripts/ibsim-fabric.sh, bench/fabric's Fabric);
    isostackd with the opensm driver on it (coalesce_ms --coalesce-ms);
  - the node: one agent for n00001 in h1 (ibsim VF driver, node-agent token,
    --sandbox off), a veth stand-in per VF in h1 (mlx5_0v<i>, the name
    iso_agent_vf_netdev gives ibsim's VFs) whose peer is parked in a
    namespace of its own;
  - isostack's variant: examples/cni/infiniband.conflist (mode infiniband,
    two tenants), ifname net1. After each timed IB ADD, outside the timing:
    the pod's VF GUID (the agent's agent.cni_attached line, checked against
    GET /v1/allocations/ID) holds its tenant's P_Key full, read with
    `smpquery pkeys`, and nothing else but Default and the storage key;
  - concurrent: C ADDs at once, tenants alternating; every one must succeed
    with a VF of its own (distinct GUIDs and indexes in the agent's lines and
    in the node's desired document), each GUID in its tenant's P_Key and in no
    other; then C DELs at once, and nothing left: no record, no live
    attachment, only Default on every VF, GET /v1/fabric/verify ok;
  - where an ADD's time goes, from isostackd's, the agent's and OpenSM's log
    timestamps (the "breakdown" in the report; see breakdown()).

Usage (root): bench/cni/ib.py [--build build] [--hcas 1000] [--vfs 100]
              [--rounds 3] [--per-round 20] [--concurrent 100]
              [--coalesce-ms 50]
KEEP=1 keeps the temp dir (logs). Everything the bench started (ibsim,
OpenSM, isostackd, the agent, namespaces, links) is removed on any exit,
SIGTERM and Ctrl-C included. Exit 77 when ibsim or OpenSM is not installed.
"""
import calendar
import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


eth = load("bench_cni_run", os.path.join(HERE, "run.py"))
fabric = load("bench_fabric_run", os.path.join(ROOT, "bench", "fabric", "run.py"))
harness = eth.harness
sh, pct, TAG = eth.sh, eth.pct, eth.TAG

NODE = "n00001"
DEVICE = "mlx5_0"
DEFAULT, STORAGE = 0x7FFF, 0x0010


def bench_inventory(text, d, vfs, coalesce_ms):
    """The synthetic inventory driven by OpenSM in `d`, node n00001 with
    `vfs` VFs (GUIDs right after its PF's, below the next node's)."""
    m = re.search(r"^fabric:\n((?:  .*\n)+)", text, re.M)
    svc = re.search(r"^  shared_services:\n(?:    .*\n)+", m.group(1), re.M) if m else None
    if not svc:
        raise RuntimeError("synthetic inventory without a fabric section or its storage")
    text = (text[:m.start()] + fabric.fabric_section(d, svc.group(0), coalesce_ms) +
            "  pkey_quarantine_s: 0\n" + text[m.end():])
    text, n = re.subn(r"^node_classes:\n", "node_classes:\n  cnihost:\n    pool: gpu\n"
                      "    cpus: 64\n    memory_gib: 512\n    port: {device: %s, port: 1, "
                      "pkey_capacity: 64, vfs: {count: %d}}\n" % (DEVICE, vfs), text,
                      flags=re.M)
    line = re.compile(r"^  - \{name: %s, class: hca, (.*)port: \{guid: (0x[0-9a-f]+)\}\}$"
                      % NODE, re.M)
    pf = line.search(text)
    if n != 1 or not pf:
        raise RuntimeError("synthetic inventory without node_classes or node %s" % NODE)
    text = line.sub("  - {name: %s, class: cnihost, %sport: {guid: %s, vfs: {guid_base: "
                    "0x%016x}}}" % (NODE, pf.group(1), pf.group(2), int(pf.group(2), 16) + 1),
                    text, count=1)
    return text


class IbBench(eth.Bench):
    ifname = "net1"

    def __init__(self, args):
        super().__init__(args)
        self.fab = None
        self.park = None
        self.spawns = {}  # IB ADDs: container -> (spawned, CLOCK_REALTIME s; took s)
        self.seq = []  # the containers of the sequential IB ADDs, in order

    # ---- setup ----

    def setup(self):
        a = self.args
        build = a.build
        isoctl = os.path.join(build, "isoctl")
        d = os.path.join(self.tmp, "ib")
        os.makedirs(d)
        syn = os.path.join(d, "synthetic.yaml")
        subprocess.run([isoctl, "fabric", "ibsim-net", "--synthetic", str(a.hcas), "--vfs", "0",
                        "--inventory-out", syn], stdout=subprocess.DEVNULL, check=True)
        with open(syn) as f:
            inv = bench_inventory(f.read(), d, a.vfs, a.coalesce_ms)
        self.cfg = os.path.join(d, "cluster.yaml")
        with open(self.cfg, "w") as f:
            f.write(inv)
        self.net = os.path.join(d, "ibsim.net")
        with open(self.net, "w") as f:
            subprocess.run([isoctl, "fabric", "ibsim-net", "--config", self.cfg], stdout=f,
                           check=True)
        with open(self.net) as f:
            m = re.search(r"^# isostack-ibsim: cas=(\d+) leaves=(\d+) spines=(\d+) nodes=(\d+) "
                          r"switches=(\d+) ports=(\d+)", f.read(), re.M)
        nodes, switches, ports = (int(m.group(i)) for i in (4, 5, 6))
        self.fabric_size = "%s CAs, %d switches" % (m.group(1), switches)
        t0 = time.monotonic()
        self.fab = fabric.Fabric(d)
        self.fab.start(self.net, "-N %d -S %d -P %d" % (max(2048, nodes), max(256, switches),
                                                        max(13312, ports)))
        sys.stderr.write("# %s; ibsim + OpenSM up in %.1f s\n" % (self.fabric_size,
                                                                  time.monotonic() - t0))
        self.underlay()
        self.d = eth.Daemon(self.cfg, env=self.fab.env, agents=True, extra_args=(
            "--agent-lease-s", "10", "--agent-grace-s", "600"))
        self.d.start(timeout=120)
        self.admin = self.d.client()
        self.ta = self.new_tenant("ibb-a-" + TAG)
        self.tb = self.new_tenant("ibb-b-" + TAG)
        fabric.wait_settled(self.admin, 120)
        self.keys = {}  # tenant -> its P_Key, from the intent once it has one
        # the VFs' netdev stand-ins in h1, their peers parked
        self.park = "cbn%s-park" % TAG
        sh("ip", "netns", "add", self.park)
        self.netns.append(self.park)
        for i in range(a.vfs):
            sh("ip", "-n", self.h1, "link", "add", "%sv%d" % (DEVICE, i), "type", "veth",
               "peer", "name", "p%d" % i, "netns", self.park)
        with open(os.path.join(ROOT, "examples", "cni", "infiniband.conflist")) as f:
            conf = json.load(f)
        self.ib_conf = dict(conf["plugins"][0], cniVersion=conf["cniVersion"],
                            name="ibb" + TAG)
        self.ib_conf["tenants"] = {"team-a": self.ta, "team-b": self.tb}
        self.ib_conf["ipam"] = copy.deepcopy(self.ib_conf["ipam"])
        self.ib_conf["ipam"]["dataDir"] = os.path.join(self.tmp, "ipam-isostack")
        self.ib_conf["agentStateDir"] = os.path.join(self.tmp, "agent")  # start_agent's
        self.start_agent(NODE, ["--gpu-driver", "sim", "--vf-driver", "ibsim", "--ibsim-net",
                                self.net])
        self.log_seen = 0
        self.attached = {}  # container -> its agent.cni_attached fields

    def conf(self, variant):
        if variant == "bridge":
            return super().conf(variant)
        return self.ib_conf

    def tenant_key(self, name):
        if name in self.keys:
            return self.keys[name]
        for p in self.admin.get("/v1/fabric/intent").body["partitions"]:
            if p["kind"] == "tenant" and p["tenant"] == name:
                self.keys[name] = int(p["pkey"], 16)
                return self.keys[name]
        raise RuntimeError("tenant %s has no P_Key in the intent" % name)

    # ---- checks ----

    def agent_lines(self):
        """The agent's agent.cni_attached lines since the last call, by
        container: {guid, vf, allocation, pkey, tenant}."""
        self.agent_log.flush()
        with open(self.agent_log_path, "rb") as f:
            f.seek(self.log_seen)
            text = f.read().decode("utf-8", "replace")
        cut = text.rfind("\n") + 1
        self.log_seen += len(text[:cut].encode())
        for line in text[:cut].splitlines():
            if "agent.cni_attached" not in line:
                continue
            kv = dict(re.findall(r"(\w+)=(\S+)", line))
            self.attached[kv["container"]] = kv
        return self.attached

    def vf_of(self, cid):
        kv = self.agent_lines().get(cid)
        if not kv:
            raise RuntimeError("no agent.cni_attached line for %s" % cid)
        guid = int(kv["guid"], 16)
        r = self.admin.get("/v1/allocations/" + kv["allocation"])
        vf = r.body["nodes"][0].get("vf") or {}
        if r.status != 200 or int(vf.get("guid", "0"), 16) != guid:
            raise RuntimeError("%s: the agent's VF GUID 0x%x is not its allocation's: %r"
                               % (cid, guid, r.body))
        return guid, int(kv["vf"]), r.body["tenant"]

    def check_in_key(self, cid, guid, tenant):
        """The VF's table, read by smpquery: Default, the storage key
        (limited) and its tenant's key full, nothing else (no other key)."""
        want = {DEFAULT: False, STORAGE: False, self.tenant_key(tenant): True}
        got = self.fab.pkeys(guid)
        if got != want:
            raise RuntimeError("%s: VF 0x%016x holds %s, not %s (tenant %s)" % (
                cid, guid, fmt_keys(got), fmt_keys(want), tenant))

    def after_add(self, variant, cid, out):
        if variant == "isostack":
            guid, _, tenant = self.vf_of(cid)
            self.check_in_key(cid, guid, tenant)
            self.checked += 1
            self.seq.append(cid)

    def after_del(self, variant, cid):
        if variant == "isostack":  # the next ADD on a fabric at rest
            fabric.wait_settled(self.admin, 60)

    def run_plugin(self, variant, command, cid=None, netns=None, pod_ns="team-a"):
        t = time.time()
        r = super().run_plugin(variant, command, cid, netns, pod_ns)
        if variant == "isostack" and command == "ADD":
            self.spawns[cid] = (t, r[1])
        return r

    def live_attachments(self):
        return [a for a in self.admin.list_all("/v1/allocations")
                if a["name"].startswith("cni-") and a["state"] not in ("released", "failed")]

    def records(self):
        d = os.path.join(self.state, "cni")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def vf_guids(self):
        return [int(v["guid"], 16) for v in self.desired().get("vfs", [])]

    def desired(self):
        r = self.admin.get("/v1/nodes/%s/desired" % NODE)
        if r.status != 200:
            raise RuntimeError("GET desired: %r" % r)
        return r.body

    def wait_clean(self, timeout=60):
        """Nothing left: no record, no live attachment, no VF in the node's
        desired document, only Default on every VF, the verifier ok."""
        deadline = time.time() + timeout
        while True:
            left = {"records": len(self.records()), "live": len(self.live_attachments()),
                    "desired_vfs": len(self.vf_guids())}
            if not any(left.values()):
                break
            if time.time() > deadline:
                raise RuntimeError("not clean after DEL: %r" % left)
            time.sleep(0.2)
        pf = int(re.search(r"name: %s, class: cnihost, .*port: \{guid: (0x[0-9a-f]+)" % NODE,
                           open(self.cfg).read()).group(1), 16)
        dirty = {}
        for g in range(pf + 1, pf + 1 + self.args.vfs):
            while True:
                got = self.fab.pkeys(g)
                if got == {DEFAULT: False}:
                    break
                if time.time() > deadline:
                    dirty["0x%016x" % g] = fmt_keys(got)
                    break
                time.sleep(0.2)
        if dirty:
            raise RuntimeError("VFs with keys after DEL: %r" % dirty)
        while True:
            rep = self.admin.get("/v1/fabric/verify").body
            if rep.get("ok"):
                return rep
            if time.time() > deadline:
                raise RuntimeError("verify not ok after DEL: %r" % rep)
            time.sleep(0.3)

    # ---- the run ----

    def concurrent(self, n):
        tenants = (self.ta, self.tb)
        pods = [self.pod() for _ in range(n)]
        out = {}
        results, wall = self.at_once(pods, "ADD", lambda i: ("team-a", "team-b")[i % 2])
        lat = [r[1] for r in results]
        failures = [r[2][:300] for r in results if r[0] != 0]
        add = out["ADD"] = {"ok": n - len(failures), "of": n, "wall_s": wall,
                            "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3,
                            "failures": failures[:3]}
        seen = {}
        for i, (ns, _) in enumerate(pods):
            if results[i][0] != 0:
                continue
            cid = "cc" + ns.replace("-", "")
            guid, vf, tenant = self.vf_of(cid)
            if tenant != tenants[i % 2]:
                raise RuntimeError("%s: tenant %s, not %s" % (cid, tenant, tenants[i % 2]))
            seen[cid] = (guid, vf, tenant)
        add["distinct_guids"] = len({g for g, _, _ in seen.values()})
        add["distinct_vf_indexes"] = len({v for _, v, _ in seen.values()})
        desired = [int(v["guid"], 16) for v in self.desired().get("vfs", [])]
        add["desired_vfs"] = len(desired)
        add["desired_distinct_guids"] = len(set(desired))
        add["desired_matches_agent"] = set(desired) == {g for g, _, _ in seen.values()}
        add["records"] = len(self.records())
        add["live_attachments"] = len(self.live_attachments())
        t0 = time.monotonic()
        for cid, (guid, _, tenant) in seen.items():
            self.check_in_key(cid, guid, tenant)
        add["pkeys_read_back"] = len(seen)
        add["pkeys_read_back_s"] = time.monotonic() - t0
        results, wall = self.at_once(pods, "DEL")
        lat = [r[1] for r in results]
        out["DEL"] = {"ok": sum(1 for r in results if r[0] == 0), "of": n, "wall_s": wall,
                      "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3}
        rep = self.wait_clean()
        out["DEL"]["after"] = {"records": 0, "live_attachments": 0, "desired_vfs": 0,
                               "vfs_default_only": self.args.vfs, "verify_ok": rep["ok"],
                               "verify_ports": rep.get("ports_checked")}
        for ns, _ in pods:
            self.drop_pod(ns)
        bad = [k for k, want in (("ok", n), ("distinct_guids", n), ("distinct_vf_indexes", n),
                                 ("desired_vfs", n), ("desired_distinct_guids", n),
                                 ("live_attachments", n), ("records", n)) if add[k] != want]
        if bad or not add["desired_matches_agent"] or out["DEL"]["ok"] != n:
            raise RuntimeError("concurrent: %s wrong: %s" % (bad, json.dumps(out)))
        return out

    def run(self):
        self.checked = 0
        up0 = sh("uptime").stdout.strip()
        report = super().run()
        report.update(fabric=self.fabric_size, hcas=self.args.hcas, vfs=self.args.vfs,
                      coalesce_ms=self.args.coalesce_ms, pkey_checks_after_add=self.checked,
                      uptime_start=up0, uptime_end=sh("uptime").stdout.strip())
        report["breakdown"] = self.breakdown()
        for i, log in enumerate(self.d.logs):  # kept with KEEP=1
            shutil.copy(log, os.path.join(self.tmp, "isostackd.%d.log" % (i + 1)))
        return report

    # ---- where the time goes ----

    def breakdown(self):
        """Where each timed sequential IB ADD's time goes (see log_breakdown)."""
        self.agent_log.flush()
        return log_breakdown(self.d.logs, self.agent_log_path,
                             os.path.join(self.fab.dir, "opensm.log"),
                             [(c, self.spawns[c]) for c in self.seq[self.WARMUP:]])

    def teardown_more(self):
        if self.fab is not None:
            self.fab.stop()


def fmt_keys(keys):
    return "{%s}" % ", ".join("0x%04x%s" % (k, " full" if v else "")
                              for k, v in sorted(keys.items()))


STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z .*event=(\S+)(.*)$")
STEPS = (
    ("plugin spawned -> allocation created (plugin, agent, controller's create)",
     "spawn", "created"),
    ("created -> agent's report makes the member ready (desired doc, VF pass, status)",
     "created", "ready"),
    ("created -> partitions.conf written + SIGHUP (coalesce window)", "created", "written"),
    ("SIGHUP -> read back confirmed (OpenSM's heavy sweep to the P_Key set, after any sweep "
     "still running; the driver's 50 ms read-back poll of the changed ports)", "written",
     "confirmed"),
    ("  the same, no earlier sweep running at the SIGHUP", "written", "confirmed_idle"),
    ("  the same, an earlier sweep still running (its SUBNET UP came after the SIGHUP)",
     "written", "confirmed_busy"),
    ("confirmed and ready -> allocation active (controller)", "gate", "active"),
    ("active -> attached (agent's 50 ms poll, netdev move)", "active", "attached"),
    ("attached -> plugin exit (answer, IPAM, process)", "attached", "exit"),
    ("total: plugin spawned -> exit", "spawn", "exit"),
)


def log_events(path):
    """(seconds since the epoch, event, the rest) of each line of one of our
    logs (UTC stamps with milliseconds)."""
    with open(path, errors="replace") as f:
        for line in f:
            m = STAMP.match(line)
            if m:
                t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
                yield t + int(m.group(2)) / 1000.0, m.group(3), dict(
                    re.findall(r"(\w+)=(\S+)", m.group(4)))


def opensm_sweeps(path):
    """When OpenSM logged SUBNET UP (the end of a sweep), local time to the
    microsecond."""
    year = time.localtime().tm_year
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = re.match(r"^(\w{3} \d\d \d\d:\d\d:\d\d) (\d{6}) .*SUBNET UP", line)
            if m:
                t = time.mktime(time.strptime("%d %s" % (year, m.group(1)), "%Y %b %d %H:%M:%S"))
                out.append(t + int(m.group(2)) / 1e6)
    return out


def first_after(ts, t0):
    return next((t for t in ts if t >= t0), None)


def log_breakdown(daemon_logs, agent_log, opensm_log, adds):
    """Per IB ADD (container, (spawned, took)): the times of its steps from
    isostackd's log (allocation_created, agent_member_ready,
    fabric.opensm_written, fabric.opensm_confirmed, allocation_active) and
    the agent's (agent.cni_attached); OpenSM's SUBNET UP lines tell whether a
    sweep was still running when the SIGHUP came (OpenSM logs no sweep start
    at its default level). n/p50/p99/max of each step in ms, and the ADDs
    whose steps could not all be found."""
    created, ready, active = {}, {}, {}
    written, confirmed = [], []
    for path in daemon_logs:
        for t, ev, kv in log_events(path):
            if ev == "allocation_created":
                created[kv.get("id")] = t
            elif ev == "agent_member_ready":
                ready.setdefault(kv.get("allocation"), []).append(t)
            elif ev == "fabric.opensm_written":
                written.append(t)
            elif ev == "fabric.opensm_confirmed":
                confirmed.append(t)
            elif ev == "allocation_active":
                active[kv.get("id")] = t
    attached = {}
    for t, ev, kv in log_events(agent_log):
        if ev == "agent.cni_attached":
            attached[kv.get("container")] = (t, kv.get("allocation"))
    sweeps = opensm_sweeps(opensm_log)
    per_step = {name: [] for name, _, _ in STEPS}
    missing = []
    for cid, (spawn, took) in adds:
        at, aid = attached.get(cid, (None, None))
        e = {"spawn": spawn, "exit": spawn + took, "attached": at,
             "created": created.get(aid), "active": active.get(aid)}
        if None in e.values():
            missing.append(cid)
            continue
        e["ready"] = first_after(ready.get(aid, []), e["created"])
        e["written"] = first_after(written, e["created"])
        e["confirmed"] = first_after(confirmed, e["written"]) if e["written"] else None
        if None in e.values():
            missing.append(cid)
            continue
        e["gate"] = max(e["confirmed"], e["ready"])
        # OpenSM takes a SIGHUP in the middle of a sweep after that sweep
        busy = any(e["written"] <= t <= e["confirmed"] for t in sweeps)
        e["confirmed_busy" if busy else "confirmed_idle"] = e["confirmed"]
        for name, a, b in STEPS:
            if b in e:
                per_step[name].append(e[b] - e[a])
    out = {"adds": len(adds) - len(missing), "missing": missing[:5], "steps_ms": {}}
    for name, xs in per_step.items():
        if xs:
            out["steps_ms"][name] = {"n": len(xs), "p50": round(pct(xs, 50) * 1e3, 1),
                                     "p99": round(pct(xs, 99) * 1e3, 1),
                                     "max": round(max(xs) * 1e3, 1)}
    return out


def main():
    p = eth.arguments(__doc__, rounds=3)
    p.add_argument("--hcas", type=int, default=1000)
    p.add_argument("--vfs", type=int, default=100)
    p.add_argument("--coalesce-ms", type=int, default=50)
    a = p.parse_args()
    if not 1 <= a.vfs <= 127 or a.concurrent > a.vfs:
        p.error("--vfs must be 1..127 and at least --concurrent")
    a.build = os.path.abspath(a.build)
    eth.bench_main(IbBench, a)


if __name__ == "__main__":
    main()

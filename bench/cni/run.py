#!/usr/bin/env python3
"""bench/cni/run.py: what an isostack-cni Ethernet attachment costs a pod's
start and stop (issue 17, docs/cni.md), against Debian's bridge plugin with
host-local in the same run, and 100 concurrent ADDs on one node.

One "node" is a network namespace h1 on a bridge of this namespace (where
isostackd listens, as in tests/api/test_cni.py), with its node agent inside
(--sandbox off, node-agent token). Pods are namespaces made beforehand. Each
round runs, in a rotating order, R ADD+DEL cycles of each variant on fresh
pods, each plugin run the way a runtime runs it (`ip netns exec h1 PLUGIN`
with the CNI environment and the config on stdin), timing the plugin
process from spawn to exit:
  - bridge: /usr/lib/cni/bridge + host-local (cniVersion 1.0.0: Debian 12's
    plugins are 1.1.1 and do not speak 1.1.0), a bridge of its own in h1;
  - isostack: build/cni/isostack-cni + host-local (cniVersion 1.1.0): an
    allocation member created at isostackd, the pod's veth on its tenant's
    bridge with the guard.
Then C pods ADD at once (threads), each must succeed with a distinct
address and its own allocation, and DEL at once.

Usage (root): bench/cni/run.py [--build build] [--rounds 5] [--per-round 20]
              [--concurrent 100]
InfiniBand mode on the 1,000-HCA fabric: bench/cni/ib.py, a subclass of this
Bench (its hooks: underlay, start_agent, after_add, after_del, at_once,
teardown_more).
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
import harness  # noqa: E402

TAG = "%05d" % (os.getpid() % 100000)
NODE = "cn-n01"
HOST_IP = "198.51.100.41"
CNI_PATH = "/usr/lib/cni"


def sh(*argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit("%s: %s" % (" ".join(argv), r.stderr.strip()))
    return r


class Daemon(harness.Daemon):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.fixed = harness.free_port()

    def command(self, port):
        return [self.binary, "--config", self.config, "--state-dir", self.state_dir,
                "--listen", "0.0.0.0:%d" % self.fixed, "--allow-remote-http"] + self.extra_args

    def start(self, timeout=None):
        real = harness.free_port
        harness.free_port = lambda: self.fixed
        try:
            return super().start(timeout)
        finally:
            harness.free_port = real


def pct(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="bench_cni.")
        self.netns, self.links, self.pod_n = [], [], 0
        self.agent = None
        self.d = None

    def setup(self):
        self.underlay()
        self.d = Daemon("cni-eth.yaml", extra_args=("--agent-lease-s", "10",
                                                    "--agent-grace-s", "600"), agents=True)
        self.d.start()
        self.admin = self.d.client()
        self.tenant = self.new_tenant("bench-" + TAG)
        self.start_agent(NODE, ["--gpu-driver", "sim"])

    def underlay(self):
        """The "node": namespace h1 on a bridge of this namespace."""
        harness.Binaries.isostackd = os.path.join(self.args.build, "isostackd")
        self.plugin = os.path.join(self.args.build, "cni", "isostack-cni")
        self.br = "cbu" + TAG
        sh("ip", "link", "add", self.br, "type", "bridge")
        self.links.append(self.br)
        sh("ip", "addr", "add", "198.51.100.40/24", "dev", self.br)
        sh("ip", "link", "set", self.br, "up")
        self.h1 = "cbn%s-h1" % TAG
        sh("ip", "netns", "add", self.h1)
        self.netns.append(self.h1)
        peer = "cbh1" + TAG
        sh("ip", "link", "add", peer, "type", "veth", "peer", "name", "ul0", "netns", self.h1)
        self.links.append(peer)
        sh("ip", "link", "set", peer, "master", self.br, "up")
        sh("ip", "-n", self.h1, "addr", "add", HOST_IP + "/24", "dev", "ul0")
        sh("ip", "-n", self.h1, "link", "set", "ul0", "up")
        sh("ip", "-n", self.h1, "link", "set", "lo", "up")

    def new_tenant(self, name):
        r = self.admin.post("/v1/tenants", {"name": name})
        assert r.status == 201, r
        return r.body["name"]

    def start_agent(self, node, extra):
        """The node's agent inside h1 (node-agent token, --sandbox off),
        then until the plugin's STATUS answers 0."""
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": node})
        tok = os.path.join(self.tmp, "agent.token")
        with open(tok, "w") as f:
            f.write(r.body["token"] + "\n")
        self.state = os.path.join(self.tmp, "agent")
        self.agent_log_path = os.path.join(self.tmp, "agent.log")
        self.agent_log = open(self.agent_log_path, "ab")
        self.agent = subprocess.Popen(
            ["ip", "netns", "exec", self.h1, os.path.join(self.args.build, "isostack-agent"),
             "--controller", "http://198.51.100.40:%d" % self.d.fixed, "--token-file", tok,
             "--state-dir", self.state, "--heartbeat-s", "5", "--sandbox", "off",
             "--node", node] + extra, stdout=self.agent_log, stderr=self.agent_log)
        deadline = time.time() + 30
        while self.run_plugin("isostack", "STATUS")[0] != 0:
            if time.time() > deadline or self.agent.poll() is not None:
                raise SystemExit("the agent did not come up")
            time.sleep(0.2)

    def conf(self, variant):
        ipam = {"type": "host-local", "dataDir": os.path.join(self.tmp, "ipam-" + variant)}
        if variant == "bridge":
            ipam["ranges"] = [[{"subnet": "10.88.0.0/16"}]]
            return {"cniVersion": "1.0.0", "name": "brnet", "type": "bridge",
                    "bridge": "cbr" + TAG, "ipam": ipam}
        ipam["ranges"] = [[{"subnet": "10.77.0.0/16"}]]
        return {"cniVersion": "1.1.0", "name": "isonet", "type": "isostack-cni",
                "agentStateDir": self.state, "tenants": {"team-a": self.tenant},
                "memoryMiB": 64, "ipam": ipam}

    ifname = "eth0"
    WARMUP = 3  # untimed cycles of each variant first

    def run_plugin(self, variant, command, cid=None, netns=None, pod_ns="team-a"):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command,
               "CNI_PATH": CNI_PATH,
               "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=p" % pod_ns}
        if cid:
            env.update(CNI_CONTAINERID=cid, CNI_IFNAME=self.ifname)
        if netns:
            env["CNI_NETNS"] = netns
        binary = self.plugin if variant == "isostack" else os.path.join(CNI_PATH, "bridge")
        t0 = time.perf_counter()
        r = subprocess.run(["ip", "netns", "exec", self.h1, binary],
                           input=json.dumps(self.conf(variant)), capture_output=True, text=True,
                           env=env)
        dt = time.perf_counter() - t0
        return r.returncode, dt, r.stdout

    def pod(self):
        self.pod_n += 1
        ns = "cbn%s-p%d" % (TAG, self.pod_n)
        sh("ip", "netns", "add", ns)
        self.netns.append(ns)
        return ns, "/run/netns/" + ns

    def drop_pod(self, ns):
        sh("ip", "netns", "del", ns, check=False)
        self.netns.remove(ns)

    def cycles(self, variant, n):
        add, dele = [], []
        for _ in range(n):
            ns, path = self.pod()
            cid = "c" + ns.replace("-", "")
            rc, dt, out = self.run_plugin(variant, "ADD", cid, path)
            if rc != 0:
                raise SystemExit("%s ADD failed: %s" % (variant, out))
            add.append(dt)
            self.after_add(variant, cid, out)
            rc, dt, out = self.run_plugin(variant, "DEL", cid, path)
            if rc != 0:
                raise SystemExit("%s DEL failed: %s" % (variant, out))
            dele.append(dt)
            self.after_del(variant, cid)
            self.drop_pod(ns)
        return add, dele

    def after_add(self, variant, cid, out):
        """Checks an attachment outside the timed part (InfiniBand mode)."""

    def after_del(self, variant, cid):
        """Waits, outside the timed part, for what a DEL set off (InfiniBand
        mode: the fabric settled)."""

    def at_once(self, pods, cmd, pod_ns=lambda i: "team-a"):
        """`cmd` for every pod at once, one thread each: (results, wall s),
        results[i] = (rc, seconds, stdout) of pod i, container "cc" + its ns."""
        results = [None] * len(pods)

        def one(i):
            ns, path = pods[i]
            results[i] = self.run_plugin("isostack", cmd, "cc" + ns.replace("-", ""), path,
                                         pod_ns(i))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(pods))]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results, time.perf_counter() - t0

    def concurrent(self, n):
        pods = [self.pod() for _ in range(n)]
        out = {}
        for cmd in ("ADD", "DEL"):
            results, wall = self.at_once(pods, cmd)
            ok = sum(1 for r in results if r[0] == 0)
            lat = [r[1] for r in results]
            out[cmd] = {"ok": ok, "of": n, "wall_s": wall, "p50_ms": pct(lat, 50) * 1e3,
                        "p99_ms": pct(lat, 99) * 1e3}
            if cmd == "ADD":
                addrs = set()
                for r in results:
                    if r[0] == 0:
                        addrs.add(json.loads(r[2])["ips"][0]["address"])
                out[cmd]["distinct_addresses"] = len(addrs)
                live = [a for a in self.admin.list_all("/v1/allocations?tenant=" + self.tenant)
                        if a["state"] not in ("released", "failed")]
                out[cmd]["live_allocations"] = len(live)
                out[cmd]["failures"] = [r[2][:300] for r in results if r[0] != 0][:3]
        live = [a for a in self.admin.list_all("/v1/allocations?tenant=" + self.tenant)
                if a["state"] not in ("released", "failed")]
        out["DEL"]["live_allocations_after"] = len(live)
        for ns, _ in pods:
            self.drop_pod(ns)
        return out

    def run(self):
        a = self.args
        res = {"bridge": ([], []), "isostack": ([], [])}
        variants = ["bridge", "isostack"]
        self.cycles("bridge", self.WARMUP)  # warm-up (page cache, host-local's dir, the bridge)
        self.cycles("isostack", self.WARMUP)
        for rnd in range(a.rounds):
            order = variants if rnd % 2 == 0 else variants[::-1]
            for v in order:
                add, dele = self.cycles(v, a.per_round)
                res[v][0].extend(add)
                res[v][1].extend(dele)
        report = {"rounds": a.rounds, "per_round": a.per_round,
                  "load_avg": os.getloadavg()}
        for v in variants:
            add, dele = res[v]
            report[v] = {"add_p50_ms": pct(add, 50) * 1e3, "add_p99_ms": pct(add, 99) * 1e3,
                         "del_p50_ms": pct(dele, 50) * 1e3, "del_p99_ms": pct(dele, 99) * 1e3,
                         "n": len(add), "add_mean_ms": statistics.mean(add) * 1e3}
        b, i = report["bridge"], report["isostack"]
        report["ratio"] = {k: i[k] / b[k] for k in ("add_p50_ms", "add_p99_ms", "del_p50_ms",
                                                      "del_p99_ms")}
        report["concurrent"] = self.concurrent(a.concurrent)
        return report

    def teardown_more(self):
        """What a subclass started besides (InfiniBand mode: ibsim, OpenSM)."""

    def teardown(self):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            try:
                self.agent.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.agent.kill()
        if self.d:
            self.d.cleanup()
        for ns in reversed(self.netns):
            sh("ip", "netns", "del", ns, check=False)
        for l in self.links + ["cbr" + TAG]:
            sh("ip", "link", "del", l, check=False)
        self.teardown_more()
        if not os.environ.get("KEEP"):
            shutil.rmtree(self.tmp, ignore_errors=True)


def arguments(doc, rounds=5):
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--per-round", type=int, default=20)
    p.add_argument("--concurrent", type=int, default=100)
    return p


def bench_main(cls, args):
    """Runs bench `cls`: its JSON report on stdout; everything it made is
    removed on any exit, SIGTERM, SIGHUP and Ctrl-C included."""
    if os.geteuid() != 0:
        raise SystemExit("bench/cni: needs root (network namespaces)")

    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    b = cls(args)
    try:
        b.setup()
        print(json.dumps(b.run(), indent=2))
    finally:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        b.teardown()


def main():
    bench_main(Bench, arguments(__doc__).parse_args())


if __name__ == "__main__":
    main()

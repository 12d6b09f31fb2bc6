#!/usr/bin/env python3
"""test_slurm.py: Slurm jobs isolated by isostack, end to end (issue 15).

The whole test cluster of scripts/slurm-test-cluster.sh, started and stopped
here in a fresh STATE_DIR: munge, slurmctld and four slurmd (n1..n4) of
Debian's slurm-wlm, the isostack SPANK plugin (build/slurm/isostack.so) in
the plugstack, `isoctl slurm prolog|epilog` as PrologSlurmctld/
EpilogSlurmctld, isostackd with the opensm driver on ibsim + OpenSM, and one
isostack-agent per node over the fake NVML and the ibsim VF driver.

Each job prints the environment the plugin gave it and waits for a file, so
that the test looks at the allocation, the fake NVML's instances and the VF's
P_Key table (smpquery, independently of isostack) exactly while the job runs,
then lets it end (or cancels it) and checks that nothing is left: the
allocation released, its MIG instances gone from the fake, its tenant's key
off the VF and the VF in no partition.

With root and cgroups (harness.sandbox_skip_reason) the cluster runs with
SANDBOX_MODE=real: every agent makes a real sandbox per member and the plugin
joins it (no allow_no_sandbox=1). Then STATE_DIR is under /var/tmp (a
sandbox's /tmp is its own, which would hide the slurmd spool and the job
files from the tasks), and the jobs run as nobody (the plugin refuses a
sandbox to uid 0). The MIG test then also checks, while the jobs run, that
each task and the process it starts are in their member's sandbox (cgroup,
the holder's namespaces, cores, device filter) and, after, that the sandbox
is gone; tearDownClass that no holder, cgroup or process is left.

Skips (77) when slurmd, munge, ibsim or opensm is missing; the tests that need
the plugin and `isoctl slurm` skip, naming what is missing, until those exist.

argv: isostackd isoctl"""
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.environ.get("ISO_SOURCE_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
import harness  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "slurm-test-cluster.sh")
NODES = ["n1", "n2", "n3", "n4"]
DEFAULT = {0x7FFF: False}  # a VF in no tenant's partition: the default one, limited
NOBODY = 65534  # the jobs' uid and gid with real sandboxes
CG_ROOT = harness.CGROUP_ROOT
# what a sandbox's /dev holds, with no GPU or VF device node on this host
# (the fake NVML makes none): docs/sandbox.md "Namespaces"
SANDBOX_DEV = {"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout",
               "tty", "urandom", "zero"}

# The probe a job's task starts (so it runs in the sandbox's pid namespace,
# which setns gives only to the children of the task). argv: OUT FOREIGN,
# FOREIGN a device node (a copy of /dev/fuse) in no sandbox's list.
PROBE = r"""
import errno, json, os, socket, stat, sys
out, foreign = sys.argv[1], sys.argv[2]
def try_(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def open_rw(p):
    os.close(os.open(p, os.O_RDWR))
status = dict(l.rstrip("\n").split(":\t", 1) for l in open("/proc/self/status") if ":\t" in l)
r = {
    "task_pid": int(os.environ["TASK_PID"]),
    "pid": os.getpid(),
    "uid": os.getuid(),
    "cgroup": open("/proc/self/cgroup").read(),
    "ns": {n: os.readlink("/proc/self/ns/" + n) for n in ("pid", "mnt", "uts", "ipc", "net")},
    "hostname": socket.gethostname(),
    "cap_eff": status["CapEff"], "no_new_privs": status["NoNewPrivs"],
    "seccomp": status["Seccomp"], "cpus": status["Cpus_allowed_list"],
    "procs": len([p for p in os.listdir("/proc") if p.isdigit()]),
    "dev": sorted(os.listdir("/dev")),
    "open_foreign": try_(lambda: open_rw(foreign)),
    "open_host_fuse": try_(lambda: open_rw("/dev/fuse")),
    "mknod": try_(lambda: os.mknod(out + ".node", stat.S_IFCHR | 0o666, os.makedev(10, 229))),
}
with open(out + ".tmp", "w") as f:
    json.dump(r, f)
os.rename(out + ".tmp", out)
"""


def build_dir():
    return os.path.dirname(harness.Binaries.isostackd)


class Endpoint:
    """What harness.Client needs: request() to one port."""

    def __init__(self, port):
        self.port = port

    def request(self, method, path, body=None, **kw):
        return harness.http_request(self.port, method, path, body=body, **kw)


class Cluster:
    """The script's cluster in a temp dir: start, stop, its env and files."""

    def __init__(self):
        self.no_sandbox = harness.sandbox_skip_reason("setpriv")
        self.real = not self.no_sandbox
        # short: munge's socket path must fit sun_path; with real sandboxes
        # not under /tmp, which a sandbox replaces with its own
        self.dir = tempfile.mkdtemp(prefix="isoslurm.", dir="/var/tmp" if self.real else "/tmp")
        self.env = dict(os.environ, BUILD=build_dir(), SANDBOX_MODE="real" if self.real else "off")
        self.jobs = os.path.join(self.dir, "jobs")
        os.makedirs(self.jobs)
        os.chmod(self.dir, 0o755)
        os.chmod(self.jobs, 0o1777)  # the jobs (nobody with real sandboxes) write here
        self.probe = os.path.join(self.jobs, "probe.py")
        with open(self.probe, "w") as f:
            f.write(PROBE)
        # a device node no sandbox lists: a copy of /dev/fuse (10:229),
        # which anyone may open outside a sandbox
        self.foreign = os.path.join(self.jobs, "fuse")
        os.mknod(self.foreign, 0o666 | stat.S_IFCHR, os.makedev(10, 229))
        os.chmod(self.foreign, 0o666)

    def script(self, *args, check=True, timeout=240):
        r = subprocess.run(["bash", SCRIPT] + list(args) + [self.dir], capture_output=True,
                           text=True, env=self.env, timeout=harness.T(timeout))
        if check and r.returncode != 0:
            raise AssertionError("slurm-test-cluster.sh %s: exit %d\n%s" % (
                " ".join(args), r.returncode, r.stderr[-4000:]))
        return r

    def start(self):
        r = self.script("start", check=False)
        if r.returncode == 77:
            raise unittest.SkipTest("slurm-test-cluster: " + r.stderr.strip().splitlines()[-1])
        if r.returncode != 0:
            raise AssertionError("slurm-test-cluster.sh start: exit %d\n%s" % (
                r.returncode, r.stderr[-6000:]))
        lines = r.stdout.strip().splitlines()[-3:]
        for line in lines:
            m = re.match(r"^export (SLURM_CONF|ISOSTACK_URL|ISOSTACK_TOKEN)='([^']*)'$", line)
            if not m:
                raise AssertionError("start's last lines are not the exports: %r" % lines)
            self.env[m.group(1)] = m.group(2)
        self.port = int(self.env["ISOSTACK_URL"].rsplit(":", 1)[1])
        self.warnings = r.stderr
        return r

    def stop(self):
        return self.script("stop", check=False)

    def cleanup(self):
        """Stops the cluster, removes the dir; returns stop's stderr."""
        r = self.stop()
        if os.environ.get("ISO_TEST_KEEP"):
            sys.stderr.write("test_slurm: kept %s\n" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        return r.stderr

    def run(self, *argv, conf=None, check=True, timeout=60, user=None):
        env = dict(self.env)
        if conf:
            env["SLURM_CONF"] = conf
        argv = list(argv)
        if user is not None:
            # a user's job never gets the cluster-admin token (sbatch
            # exports the submitter's environment to the job)
            env.pop("ISOSTACK_TOKEN", None)
            argv = ["setpriv", "--reuid", str(user), "--regid", str(user), "--clear-groups"] + argv
        r = subprocess.run(argv, capture_output=True, text=True, env=env,
                           timeout=harness.T(timeout))
        if check and r.returncode != 0:
            raise AssertionError("%s: exit %d: %s%s" % (" ".join(argv), r.returncode, r.stdout,
                                                         r.stderr))
        return r

    def pid(self, name):
        with open(os.path.join(self.dir, "run", name + ".pid")) as f:
            return int(f.read())

    def fabric_env(self):
        env = dict(os.environ)
        with open(os.path.join(self.dir, "ib", "env")) as f:
            for line in f:
                m = re.match(r"^(IBSIM_SOCKNAME|LD_PRELOAD)=(.*)$", line.strip())
                if m:
                    env[m.group(1)] = m.group(2)
        return env

    def pkey_table(self, guid):
        """The P_Key table of port `guid` as smpquery reads it, in index order."""
        r = subprocess.run(["smpquery", "-G", "pkeys", guid], capture_output=True, text=True,
                           env=self.fabric_env(), timeout=harness.T(30))
        if r.returncode != 0:
            raise AssertionError("smpquery pkeys %s: %s" % (guid, r.stderr))
        table = []
        for line in r.stdout.splitlines():
            m = re.match(r"^\s*\d+:((?:\s+0x[0-9a-f]{4})+)\s*$", line)
            if m:
                table.extend(int(v, 16) for v in m.group(1).split())
        return table

    def pkeys(self, guid):
        """{base: full member?} of the port's table."""
        return {v & 0x7FFF: bool(v & 0x8000) for v in self.pkey_table(guid) if v & 0x7FFF}

    def agent_member(self, node, tenant, key):
        """The agent socket's answer for (tenant, key) on `node`, as the plugin gets it."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(harness.T(10))
            s.connect(os.path.join(self.dir, "agent", node, "agent.sock"))
            s.sendall(json.dumps({"tenant": tenant, "key": key}).encode())
            s.shutdown(socket.SHUT_WR)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return json.loads(data)

    def fake_uuids(self, node):
        """The MIG UUIDs of the instances the fake NVML of `node` holds."""
        path = os.path.join(self.dir, "nvml", node + ".json")
        if not os.path.exists(path):
            return set()
        with open(path) as f:
            st = json.load(f)
        return {ci["uuid"] for g in st["gpus"] for i in g["instances"] for ci in i["cis"]}

    def sandbox_record(self, node, name):
        """The agent's record of sandbox `name` on `node`, or None."""
        try:
            with open(os.path.join(self.dir, "agent", node, "sandboxes", name + ".json")) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def jobs_listed(self):
        return self.run("squeue", "-h", "-t", "R,PD,CG,S", "-o", "%i", check=False).stdout.split()


def cgroup_dirs(name):
    """The directories of cgroup `name`: one per v1 hierarchy, or the v2 one."""
    found = [os.path.join(CG_ROOT, name)] if os.path.isdir(os.path.join(CG_ROOT, name)) else []
    for ctl in sorted(os.listdir(CG_ROOT)):
        d = os.path.join(CG_ROOT, ctl, name)
        if os.path.isdir(d):
            found.append(d)
    return found


def our_cgroups():
    """Every iso-* cgroup on the host (a sandbox's: iso-<allocation>-<member>)."""
    names = set()
    for base in [CG_ROOT] + [os.path.join(CG_ROOT, c) for c in os.listdir(CG_ROOT)]:
        if os.path.isdir(base):
            names.update(n for n in os.listdir(base) if n.startswith("iso-a-"))
    return names


def readns(pid, ns):
    return os.readlink("/proc/%d/ns/%s" % (pid, ns))


def gone(pid):
    """The process has exited (a zombie counts: nobody may reap it here)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def isostack_missing():
    """What of the Slurm integration is not built, or None."""
    missing = []
    if not os.path.exists(os.path.join(build_dir(), "slurm", "isostack.so")):
        missing.append("the SPANK plugin build/slurm/isostack.so")
    r = subprocess.run([harness.Binaries.isoctl, "slurm", "prolog", "--help"],
                       capture_output=True)
    if r.returncode != 0:
        missing.append("'isoctl slurm'")
    return " and ".join(missing) or None


CLUSTER = "isotest"  # slurm-test-cluster.sh's ClusterName


def job_key(jobid, restart=0):
    """The Idempotency-Key of a Slurm job's allocation (docs/slurm.md)."""
    return "slurm:%s:%s:%d" % (CLUSTER, jobid, restart)


ENV_VARS = ("CUDA_VISIBLE_DEVICES", "UCX_IB_PKEY", "NCCL_IB_PKEY", "OMPI_MCA_btl_openib_pkey",
            "ISOSTACK_ALLOCATION", "SLURMD_NODENAME", "SLURM_JOB_ACCOUNT")


class SlurmE2E(harness.ApiTestCase):
    wait_timeout = 60

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster()
        try:
            cls.c.start()
        except BaseException:
            cls.c.cleanup()
            raise
        cls.admin = harness.Client(Endpoint(cls.c.port), cls.c.env["ISOSTACK_TOKEN"])
        cls.missing = isostack_missing()
        cls.seq = 0
        cls.cgroups_before = our_cgroups() if cls.c.real else set()
        if not cls.c.real:
            sys.stderr.write("test_slurm: sandboxes off (%s): no sandbox checks\n"
                             % cls.c.no_sandbox)

    @classmethod
    def tearDownClass(cls):
        stopped = cls.c.cleanup()
        # the agents removed every sandbox themselves (their allocations
        # released); stop's own clean-up found nothing left
        if "removing the sandbox" in stopped or "sandboxes still there" in stopped:
            raise AssertionError("stop: " + stopped)
        # stop leaves no process of the cluster behind: none whose command
        # line names the dir, which a sandbox's holder (cloned by an agent)
        # and a job's processes (its files are there) do too
        left = subprocess.run(["grep", "-l", cls.c.dir] + [
            "/proc/%s/cmdline" % p for p in os.listdir("/proc") if p.isdigit()],
            capture_output=True, text=True).stdout.split()
        if left:
            raise AssertionError("processes left by stop: %r" % left)
        # and no sandbox's cgroup
        if cls.c.real:
            extra = our_cgroups() - cls.cgroups_before
            if extra:
                raise AssertionError("cgroups left behind: %r" % sorted(extra))

    def tearDown(self):
        # a test's leftover job must not hold nodes for the next test
        ids = self.c.jobs_listed()
        if ids:
            self.c.run("scancel", *ids, check=False)
            self.wait_until("every job gone", lambda: not self.c.jobs_listed(), 60)

    def wait_context(self):
        return "\n" + self.log_tails()

    def log_tails(self):
        out = []
        for name in ["slurmctld.log", "slurmd-n1.log", "slurmd-n2.log", "isostackd.log",
                     "agent-n1.log"]:
            p = os.path.join(self.c.dir, "log", name)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out.append("--- %s:\n%s" % (name, "".join(f.readlines()[-15:])))
        return "\n".join(out)

    def need_isostack(self):
        if self.missing:
            self.skipTest("needs " + self.missing)

    # ---- jobs ----

    def job_script(self, tag, srun=False, wait=True, probe=False):
        """A job that writes its isostack env to jobs/TAG.NODE.env (every task
        with srun, else the batch step), with `probe` starts the probe (its
        report in jobs/TAG.NODE.probe), and waits for jobs/TAG.go."""
        j = self.c.jobs
        body = ("env | grep -E '^(%s)=' | sort > %s/%s.$SLURMD_NODENAME.tmp && "
                "mv %s/%s.$SLURMD_NODENAME.tmp %s/%s.$SLURMD_NODENAME.env; " % (
                    "|".join(ENV_VARS), j, tag, j, tag, j, tag))
        if probe:
            body += "TASK_PID=$$ python3 %s %s/%s.$SLURMD_NODENAME.probe %s; " % (
                self.c.probe, j, tag, self.c.foreign)
        if wait:
            body += "while [ ! -e %s/%s.go ]; do sleep 0.2; done" % (j, tag)
        if srun:
            body = "srun --ntasks-per-node=1 sh -c \"%s\"" % body.replace('"', '\\"').replace(
                "$", "\\$")
        return "#!/bin/sh\n" + body + "\n"

    def submit(self, account, *opts, srun=False, wait=True, conf=None, check=True, probe=False):
        SlurmE2E.seq += 1
        tag = "j%d" % SlurmE2E.seq
        path = os.path.join(self.c.jobs, tag + ".sh")
        with open(path, "w") as f:
            f.write(self.job_script(tag, srun=srun, wait=wait, probe=probe))
        # real sandboxes take no job of uid 0: the jobs run as nobody
        r = self.c.run("sbatch", "--parsable", "-A", account, "-o",
                       os.path.join(self.c.jobs, tag + ".out"), *opts, path, conf=conf,
                       check=check, user=NOBODY if self.c.real else None)
        if not check:
            return r, tag
        return r.stdout.strip().split(";")[0], tag

    def release(self, tag):
        open(os.path.join(self.c.jobs, tag + ".go"), "w").close()

    def job(self, jobid):
        """{state, comment, nodes, reason} from squeue (finished jobs too)."""
        r = self.c.run("squeue", "-h", "-t", "all", "-j", jobid, "-o", "%T|%N|%r|%k",
                       check=False)
        line = r.stdout.strip()
        if not line:
            return {"state": "GONE", "nodes": "", "reason": "", "comment": ""}
        state, nodes, reason, comment = line.split("|", 3)
        return {"state": state, "nodes": nodes, "reason": reason,
                "comment": "" if comment == "(null)" else comment}

    def wait_job(self, jobid, states, timeout=60):
        return self.wait_until("job %s in %s" % (jobid, states), lambda: (
            lambda j: j if j["state"] in states else None)(self.job(jobid)), timeout)

    def hostnames(self, nodelist):
        r = self.c.run("scontrol", "show", "hostnames", nodelist)
        return r.stdout.split()

    def task_env(self, tag, node, timeout=60):
        p = os.path.join(self.c.jobs, "%s.%s.env" % (tag, node))
        self.wait_until("%s wrote its env on %s" % (tag, node), lambda: os.path.exists(p),
                        timeout)
        with open(p) as f:
            return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)

    def out(self, tag):
        p = os.path.join(self.c.jobs, tag + ".out")
        if not os.path.exists(p):
            return ""
        with open(p, errors="replace") as f:
            return f.read()

    def assert_no_drain(self):
        r = self.c.run("sinfo", "-h", "-N", "-o", "%N %t")
        states = dict(line.split() for line in r.stdout.splitlines())
        self.assertEqual(sorted(states), NODES, r.stdout)
        for n, s in states.items():
            self.assertNotIn("drain", s, "node %s: %s" % (n, r.stdout))
            self.assertNotIn(s, ("drng", "drain", "down", "down*"), "node %s: %s" % (n, r.stdout))

    # ---- isostack ----

    def alloc_of(self, jobid, tenant):
        r = self.admin.get("/v1/allocations?idempotency_key=%s&tenant=%s" % (job_key(jobid), tenant))
        self.assertStatus(r, 200)
        items = r.body["items"]
        self.assertLessEqual(len(items), 1, items)
        return items[0] if items else None

    def tenant_pkey(self, tenant):
        for p in self.admin.get("/v1/fabric/intent").body["partitions"]:
            if p["kind"] == "tenant" and p["tenant"] == tenant:
                return p
        return None

    def partitions_with(self, guid):
        guid = int(guid, 16)
        found = []
        for p in self.admin.get("/v1/fabric/intent").body["partitions"]:
            if p["kind"] != "tenant":
                continue
            if guid in {int(m["guid"] if isinstance(m, dict) else m, 16)
                        for m in p.get("members", p.get("guids", []))}:
                found.append(p)
        return found

    def check_running(self, jobid, tag, tenant, nodes):
        """While the job runs: one active allocation keyed slurm-JOBID with a
        member per node of the job, each task's env its member's, the MIG
        UUIDs the fake's, the tenant's P_Key full on each member's VF.
        Returns the allocation."""
        a = self.wait_until("job %s's allocation active" % jobid, lambda: (
            lambda x: x if x and x["state"] == "active" else None)(self.alloc_of(jobid, tenant)))
        self.assertEqual(a["tenant"], tenant)
        self.assertEqual(a["name"], "slurm-" + jobid)
        self.assertEqual(a["idempotency_key"], job_key(jobid))
        members = {m["node"]: m for m in a["nodes"]}
        self.assertEqual(sorted(members), sorted(nodes), a)
        part = self.tenant_pkey(tenant)
        self.assertIsNotNone(part, "no partition for " + tenant)
        key = int(part["pkey"], 16) & 0x7FFF
        for n in nodes:
            m = members[n]
            env = self.task_env(tag, n)
            self.assertEqual(env.get("SLURMD_NODENAME"), n, env)
            self.assertEqual(env.get("ISOSTACK_ALLOCATION"), a["id"], env)
            self.assertEqual(env.get("CUDA_VISIBLE_DEVICES"), m["cuda_visible_devices"], (env, m))
            uuids = env["CUDA_VISIBLE_DEVICES"].split(",")
            for u in uuids:
                self.assertTrue(u.startswith("MIG-"), env)
                self.assertIn(u, self.c.fake_uuids(n), "%s is not an instance of %s" % (u, n))
            self.assertEqual(int(env["UCX_IB_PKEY"], 16) & 0x7FFF, key, env)
            self.assertEqual(int(env["OMPI_MCA_btl_openib_pkey"], 16) & 0x7FFF, key, env)
            # the VF's table, read by smpquery while the job runs: the key
            # full member; NCCL_IB_PKEY is its index there, as the agent
            # read it (the ibsim VF driver reads no table: no index)
            vf = m["vf"]["guid"]
            self.wait_until("key 0x%x full on %s's VF %s" % (key, n, vf),
                            lambda: self.c.pkeys(vf).get(key) is True, 20)
            table = self.c.pkey_table(vf)
            info = self.c.agent_member(n, tenant, job_key(jobid))
            self.assertEqual(info.get("cuda_visible_devices"), env["CUDA_VISIBLE_DEVICES"], info)
            if info.get("pkey_index") is None:
                self.assertNotIn("NCCL_IB_PKEY", env, (env, info))
            else:
                self.assertEqual(int(env["NCCL_IB_PKEY"]), info["pkey_index"], (env, info))
                self.assertEqual(table[info["pkey_index"]], key | 0x8000, (env, table))
        return a

    def probe(self, tag, node, timeout=60):
        p = os.path.join(self.c.jobs, "%s.%s.probe" % (tag, node))
        self.wait_until("%s's probe reported on %s" % (tag, node), lambda: os.path.exists(p),
                        timeout)
        with open(p) as f:
            return json.load(f)

    def check_sandbox(self, a, tag, node):
        """While the job runs: its task and the probe it started are in the
        sandbox of a's member on `node`, as the allocation and the agent's
        record name it. Returns (sandbox name, holder pid, task pid, probe)."""
        member = next(m for m in self.admin.get("/v1/allocations/" + a["id"]).body["nodes"]
                      if m["node"] == node)
        name = "iso-%s-%d" % (a["id"], member["member"])
        self.assertEqual(member["sandbox"]["cgroup"], name, member)
        rec = self.c.sandbox_record(node, name)
        self.assertIsNotNone(rec, "no agent record of " + name)
        self.assertEqual(member["sandbox"]["cpus"], rec["cpus"], (member, rec))
        holder = rec["holder_pid"]
        p = self.probe(tag, node)
        task = p["task_pid"]
        ctx = (name, p)
        # the cgroup: the probe's and the task's (read from the host), in
        # every hierarchy the sandbox uses
        ctls = ["cpuset", "memory", "pids", "devices"] if os.path.isdir(
            os.path.join(CG_ROOT, "cpuset")) else [""]
        with open("/proc/%d/cgroup" % task) as f:
            task_cg = f.read()
        for ctl in ctls:
            line = r"(?m)^\d+:%s:/%s$" % (ctl, re.escape(name))
            self.assertRegex(p["cgroup"], line, ctx)
            self.assertRegex(task_cg, line, (name, task_cg))
        # the holder's namespaces: the probe is in its pid namespace; the
        # task (setns cannot move the caller) is in the host's, with the
        # holder's for its children
        for ns in ("pid", "mnt", "uts", "ipc"):
            self.assertEqual(p["ns"][ns], readns(holder, ns), (ns,) + ctx)
        self.assertNotEqual(p["ns"]["pid"], readns(os.getpid(), "pid"), ctx)
        self.assertEqual(readns(task, "pid"), readns(os.getpid(), "pid"))
        self.assertEqual(readns(task, "pid_for_children"), readns(holder, "pid"))
        for ns in ("mnt", "uts", "ipc"):
            self.assertEqual(readns(task, ns), readns(holder, ns), ns)
        self.assertLess(p["procs"], 10, ctx)  # its sandbox's processes only
        self.assertEqual(p["hostname"], name, ctx)
        # the member's cores, its identity
        self.assertEqual(p["cpus"], rec["cpus"], ctx)
        if ctls[0]:
            with open(os.path.join(CG_ROOT, "cpuset", name, "cpuset.cpus")) as f:
                self.assertEqual(f.read().strip(), rec["cpus"])
        self.assertEqual((p["uid"], int(p["cap_eff"], 16), p["no_new_privs"], p["seccomp"]),
                         (NOBODY, 0, "1", "2"), ctx)
        # the device list: /dev holds the sandbox's nodes only, and a node
        # outside the list is refused by the cgroup's filter (EPERM, where
        # nobody outside a sandbox opens it: the control below)
        self.assertEqual(set(p["dev"]), SANDBOX_DEV, ctx)
        self.assertEqual(p["open_foreign"], "EPERM", ctx)
        self.assertEqual(p["open_host_fuse"], "ENOENT", ctx)
        self.assertEqual(p["mknod"], "EPERM", ctx)
        if ctls[0]:
            with open(os.path.join(CG_ROOT, "devices", name, "devices.list")) as f:
                rules = f.read().split("\n")
            self.assertIn("c 1:3 rw", rules)
            self.assertNotIn("a *:* rwm", rules)
            self.assertFalse([r for r in rules if r.startswith("c 10:")], rules)
        return name, holder, task, p

    def check_sandbox_gone(self, name, holder, task):
        self.wait_until("sandbox %s's holder %d gone" % (name, holder), lambda: gone(holder), 30)
        self.wait_until("the job's task %d gone" % task, lambda: gone(task), 30)
        self.wait_until("cgroup %s removed" % name, lambda: not cgroup_dirs(name), 30)
        node_dirs = os.path.join(self.c.dir, "agent")
        self.wait_until("record of %s removed" % name, lambda: not any(
            os.path.exists(os.path.join(node_dirs, n, "sandboxes", name + ".json"))
            for n in NODES), 30)

    def check_clean(self, a):
        """Nothing of allocation `a` is left: released, its instances gone
        from the fake, its VFs in no partition and back to the default key."""
        self.wait_until("allocation %s released" % a["id"], lambda: self.admin.get(
            "/v1/allocations/" + a["id"]).body["state"] in ("released", "failed"))
        for m in a["nodes"]:
            n = m["node"]
            uuids = set(m["cuda_visible_devices"].split(","))
            self.wait_until("%s's instances destroyed on %s" % (a["id"], n),
                            lambda: not (uuids & self.c.fake_uuids(n)), 30)
            vf = m["vf"]["guid"]
            self.assertEqual(self.partitions_with(vf), [])
            self.wait_until("VF %s of %s back to the default partition" % (vf, n),
                            lambda: self.c.pkeys(vf) == DEFAULT, 20)

    # ---- the tests ----

    def test_a_plain_jobs_run_on_every_node(self):
        """The Slurm half alone: a job of account acme on each node."""
        jobs = [self.submit("acme", "-w", n, wait=False) for n in NODES]
        for (jobid, tag), n in zip(jobs, NODES):
            j = self.wait_job(jobid, ("COMPLETED", "FAILED", "CANCELLED"))
            if self.missing:
                self.assertEqual(j["state"], "COMPLETED", (j, self.out(tag)))
                env = self.task_env(tag, n)
                self.assertEqual(env["SLURMD_NODENAME"], n)
                self.assertEqual(env["SLURM_JOB_ACCOUNT"], "acme")
                self.assertNotIn("ISOSTACK_ALLOCATION", env)
        if self.missing:
            self.assertIn("warning", self.c.warnings)
        self.assert_no_drain()

    def test_mig_jobs_of_two_accounts_on_one_node(self):
        self.need_isostack()
        ja, ta = self.submit("acme", "-w", "n1", "--isostack-profile=1g.10gb", probe=True)
        jb, tb = self.submit("globex", "-w", "n1", "--isostack-profile=1g.10gb", probe=True)
        aa = self.check_running(ja, ta, "acme", ["n1"])
        ab = self.check_running(jb, tb, "globex", ["n1"])
        ea, eb = self.task_env(ta, "n1"), self.task_env(tb, "n1")
        self.assertNotEqual(ea["CUDA_VISIBLE_DEVICES"], eb["CUDA_VISIBLE_DEVICES"])
        self.assertNotEqual(int(ea["UCX_IB_PKEY"], 16), int(eb["UCX_IB_PKEY"], 16))
        va, vb = aa["nodes"][0]["vf"]["guid"], ab["nodes"][0]["vf"]["guid"]
        self.assertNotEqual(va, vb)
        # each VF holds its own tenant's key only
        kb = int(eb["UCX_IB_PKEY"], 16) & 0x7FFF
        self.assertNotIn(kb, self.c.pkeys(va))
        sandboxes = []
        if self.c.real:
            # each task in its member's sandbox; the two tenants' apart
            sa = self.check_sandbox(aa, ta, "n1")
            sb = self.check_sandbox(ab, tb, "n1")
            self.assertNotEqual(sa[0], sb[0])
            self.assertNotEqual(sa[3]["ns"]["pid"], sb[3]["ns"]["pid"])
            self.assertNotEqual(sa[3]["ns"]["mnt"], sb[3]["ns"]["mnt"])
            self.assertNotEqual(sa[3]["cpus"], sb[3]["cpus"])  # one agent: cores of its own
            # the control: outside a sandbox nobody opens the foreign node
            r = self.c.run("python3", "-c", "import os; os.close(os.open(%r, os.O_RDWR))"
                           % self.c.foreign, user=NOBODY, check=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            sandboxes = [sa[:3], sb[:3]]
        # job end
        self.release(ta)
        self.release(tb)
        self.assertEqual(self.wait_job(ja, ("COMPLETED", "FAILED"))["state"], "COMPLETED")
        self.assertEqual(self.wait_job(jb, ("COMPLETED", "FAILED"))["state"], "COMPLETED")
        self.check_clean(aa)
        self.check_clean(ab)
        for name, holder, task in sandboxes:
            self.check_sandbox_gone(name, holder, task)

    def test_whole_gpu_job(self):
        self.need_isostack()
        jobid, tag = self.submit("acme", "-w", "n2", "--isostack-gpus=1")
        a = self.check_running(jobid, tag, "acme", ["n2"])
        env = self.task_env(tag, "n2")
        self.assertEqual(len(env["CUDA_VISIBLE_DEVICES"].split(",")), 1, env)
        self.release(tag)
        self.wait_job(jobid, ("COMPLETED", "FAILED"))
        self.check_clean(a)

    def test_two_node_job_one_allocation_one_partition(self):
        self.need_isostack()
        jobid, tag = self.submit("acme", "-N", "2", "-w", "n3,n4", "--isostack-profile=1g.10gb",
                                 srun=True, probe=True)
        a = self.check_running(jobid, tag, "acme", ["n3", "n4"])
        self.assertEqual(len(a["nodes"]), 2)
        vfs = [m["vf"]["guid"] for m in a["nodes"]]
        parts = [self.partitions_with(v) for v in vfs]
        self.assertEqual(len(parts[0]), 1, parts)
        self.assertEqual(parts[0], parts[1])
        e3, e4 = self.task_env(tag, "n3"), self.task_env(tag, "n4")
        self.assertEqual(e3["UCX_IB_PKEY"], e4["UCX_IB_PKEY"])
        sandboxes = []
        if self.c.real:
            # the step's task on each node in that node's member's sandbox
            # (on n3 the batch task, which ran srun, is in the same one)
            sandboxes = [self.check_sandbox(a, tag, n)[:3] for n in ("n3", "n4")]
            self.assertNotEqual(sandboxes[0][0], sandboxes[1][0])
        self.release(tag)
        self.wait_job(jobid, ("COMPLETED", "FAILED"))
        self.check_clean(a)
        for name, holder, task in sandboxes:
            self.check_sandbox_gone(name, holder, task)

    def test_scancel_leaves_nothing(self):
        self.need_isostack()
        jobid, tag = self.submit("acme", "-w", "n2", "--isostack-profile=2g.20gb")
        a = self.check_running(jobid, tag, "acme", ["n2"])
        self.c.run("scancel", jobid)
        self.wait_job(jobid, ("CANCELLED", "GONE"))
        self.check_clean(a)

    def test_node_failure_leaves_nothing(self):
        self.need_isostack()
        jobid, tag = self.submit("acme", "-w", "n2", "--no-requeue", "--isostack-profile=1g.10gb")
        a = self.check_running(jobid, tag, "acme", ["n2"])
        # n2's slurmd dies with the job on it, and Slurm takes the node down
        # (as it would after SlurmdTimeout): the job ends NODE_FAIL, its
        # EpilogSlurmctld releases the allocation (the reaper would too)
        pid = self.c.pid("slurmd-n2")
        os.kill(pid, signal.SIGKILL)
        self.wait_until("slurmd n2 stopped", lambda: gone(pid), 30)
        try:
            self.c.run("scontrol", "update", "NodeName=n2", "State=DOWN",
                       "Reason=isostack-test-node-failure")
            j = self.wait_job(jobid, ("NODE_FAIL", "FAILED", "CANCELLED", "GONE"), timeout=90)
            self.assertNotEqual(j["state"], "COMPLETED", j)
            self.c.run(harness.Binaries.isoctl, "slurm", "reap", "--cluster", CLUSTER)
            self.check_clean(a)
        finally:
            self.c.start()
            self.c.run("scontrol", "update", "NodeName=n2", "State=RESUME", check=False)
            self.wait_until("n2 back", lambda: "idle" in self.c.run(
                "sinfo", "-h", "-n", "n2", "-o", "%t").stdout, 60)

    def test_slurmctld_restart_then_reap_leaves_nothing(self):
        self.need_isostack()
        jobid, tag = self.submit("acme", "-w", "n3", "--isostack-profile=1g.10gb")
        a = self.check_running(jobid, tag, "acme", ["n3"])
        # slurmctld stops (SIGTERM: it saves its state; a SIGKILL a second
        # after the job started loses the start, and the restarted slurmctld
        # launches the job again and drains the node for the duplicate);
        # the job ends while it is away; it comes back
        pid = self.c.pid("slurmctld")
        os.kill(pid, signal.SIGTERM)
        self.wait_until("slurmctld stopped", lambda: gone(pid), 30)
        self.release(tag)
        time.sleep(1)
        self.c.start()
        self.wait_job(jobid, ("COMPLETED", "FAILED", "GONE"))
        self.c.run(harness.Binaries.isoctl, "slurm", "reap", "--cluster", CLUSTER)
        self.check_clean(a)
        self.assert_no_drain()

    def test_isostackd_down_fails_the_job_not_the_node(self):
        self.need_isostack()
        os.kill(self.c.pid("isostackd"), signal.SIGTERM)
        try:
            self.wait_until("isostackd stopped", lambda: subprocess.run(
                ["bash", SCRIPT, "status", self.c.dir], capture_output=True,
                text=True).stdout.find("isostackd stopped") >= 0, 20)
            jobid, tag = self.submit("acme", "-w", "n4", "--isostack-profile=1g.10gb",
                                     wait=False)
            j = self.wait_job(jobid, ("FAILED", "COMPLETED", "CANCELLED"), timeout=150)
            self.assertEqual(j["state"], "FAILED", (j, self.out(tag)))
            self.assertTrue(j["comment"].startswith("isostack: "), j)
            self.assertFalse(os.path.exists(os.path.join(self.c.jobs, tag + ".n4.env")),
                             "the job ran: " + self.out(tag))
            self.assertIn("cannot reach", j["comment"], j)
            # the plugin's refusal names the job's key: it asked the agent
            self.assertIn(job_key(jobid), self.out(tag))
            self.assert_no_drain()
        finally:
            self.c.start()

    def test_over_quota_fails_with_isostacks_reason(self):
        self.need_isostack()
        # globex: 1 whole GPU (slurm-test-cluster.sh)
        jobid, tag = self.submit("globex", "-w", "n1", "--isostack-gpus=2", wait=False)
        j = self.wait_job(jobid, ("FAILED", "COMPLETED", "CANCELLED"), timeout=120)
        self.assertEqual(j["state"], "FAILED", (j, self.out(tag)))
        self.assertTrue(j["comment"].startswith("isostack: "), j)
        self.assertRegex(j["comment"], r"globex.*(hard limit|quota)", j)
        self.assertFalse(os.path.exists(os.path.join(self.c.jobs, tag + ".n1.env")),
                         "the job ran: " + self.out(tag))
        self.assertIn(job_key(jobid), self.out(tag))
        self.assertIsNone(self.alloc_of(jobid, "globex"))
        self.assert_no_drain()

    def test_sandbox_mode_refused(self):
        """SANDBOX_MODE: a bad value, real under /tmp, and the other mode than
        the one a running cluster was started with are refused, naming it,
        before anything starts."""
        for d, mode, want in [("/tmp", "bogus", "SANDBOX_MODE: 'bogus' is not one of real, off"),
                              ("/tmp", "real", "STATE_DIR must not be under /tmp"),
                              ("/var/tmp", "bogus", "SANDBOX_MODE: 'bogus'")]:
            tmp = tempfile.mkdtemp(prefix="isoslurm-bad.", dir=d)
            try:
                r = subprocess.run(["bash", SCRIPT, "start", tmp], capture_output=True, text=True,
                                   env=dict(self.c.env, SANDBOX_MODE=mode), timeout=harness.T(60))
                self.assertEqual(r.returncode, 1, (mode, d, r.stderr))
                self.assertIn(want, r.stderr, (mode, d))
                self.assertFalse(os.path.exists(os.path.join(tmp, "sandbox-mode")))
                self.assertFalse(os.listdir(os.path.join(tmp, "run")), "something started")
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        other = "off" if self.c.real else "real"
        r = subprocess.run(["bash", SCRIPT, "start", self.c.dir], capture_output=True, text=True,
                           env=dict(self.c.env, SANDBOX_MODE=other), timeout=harness.T(60))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("SANDBOX_MODE=%s, but %s was started with %s" % (
            other, self.c.dir, "real" if self.c.real else "off"), r.stderr)

    def test_plugin_missing_the_job_does_not_run(self):
        self.need_isostack()
        conf = self.c.env["SLURM_CONF"]
        sdir = os.path.dirname(conf)
        with open(conf) as f:
            text = f.read()
        missing = os.path.join(sdir, "plugstack-missing.conf")
        with open(missing, "w") as f:
            f.write("required %s/no-such-isostack.so agent_state_dir=%s/agent/%%n\n" % (
                sdir, self.c.dir))
        # On the submit host: sbatch refuses, nothing is submitted.
        submit_missing = os.path.join(sdir, "submit-missing.conf")
        with open(submit_missing, "w") as f:
            f.write(re.sub(r"(?m)^PlugStackConfig=.*$", "PlugStackConfig=" + missing, text))
        r, tag = self.submit("acme", "-w", "n1", wait=False, conf=submit_missing, check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertEqual(self.c.run("squeue", "-h", "-o", "%i").stdout.strip(), "")
        # On the nodes (the plugstack is read at every launch): the job's
        # script never runs.
        plug = os.path.join(sdir, "plugstack.conf")
        shutil.copy(plug, plug + ".good")
        try:
            shutil.copy(missing, plug)
            submit_good = os.path.join(sdir, "submit-good.conf")
            with open(submit_good, "w") as f:
                f.write(re.sub(r"(?m)^PlugStackConfig=.*$", "PlugStackConfig=" + plug + ".good",
                               text))
            jobid, tag = self.submit("acme", "-w", "n1", "--isostack-profile=1g.10gb",
                                     wait=False, conf=submit_good)
            j = self.wait_job(jobid, ("FAILED", "COMPLETED", "CANCELLED", "PENDING"), timeout=60)
            time.sleep(2)
            self.assertFalse(os.path.exists(os.path.join(self.c.jobs, tag + ".n1.env")),
                             "the job ran without the plugin: %r %s" % (j, self.out(tag)))
            self.c.run("scancel", jobid, check=False)
        finally:
            shutil.copy(plug + ".good", plug)
            # a node that a failed launch drained comes back for the next tests
            self.c.run("scontrol", "update", "NodeName=n1", "State=RESUME", check=False)


if __name__ == "__main__":
    harness.main(__doc__)

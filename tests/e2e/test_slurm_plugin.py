#!/usr/bin/env python3
"""test_slurm_plugin.py: the SPANK plugin (build/slurm/isostack.so, issue 15,
docs/slurm.md) in a real Slurm: munged, slurmctld and two slurmd (n1, n2) on
this host (shared/reference/host.md 1.4: NodeHostname=localhost, %n in the
spool, pid and log paths, proctrack/linuxproc, task/none, switch/none), all
on their own ports, munge socket and directory, with the plugin `required` in
plugstack.conf. No isostackd and no agent: what it shows is the plugin's part
that needs none (scripts/slurm-test-cluster.sh runs the whole path).

  - `srun --help` lists --isostack-profile, --isostack-gpus and
    --isostack-isolation (registered in the local context);
  - a bad --isostack-profile fails the submission with the plugin's message
    naming the option, and no job is created;
  - a job on a node whose agent state dir has no socket fails in
    task_init_privileged with the plugin's "isostack: ..." message, and the
    node is NOT drained (sinfo: idle), since that is the only callback that
    may fail.

Skips (exit 77) when slurmctld, slurmd, munged or srun is missing, when not
root, or when the plugin was not built (no slurm/spank.h).
Usage: test_slurm_plugin.py PATH/isostack.so
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

PLUGIN = None


def free_ports(n):
    """n consecutive free TCP ports on 127.0.0.1 (Port=[a-b] wants a range)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        ok = True
        for p in range(base, base + n):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return list(range(base, base + n))
    raise RuntimeError("no free ports")


class SlurmPlugin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="iso-slurm-plugin.")
        os.chmod(cls.dir, 0o755)
        d = cls.dir
        for sub in ("munge", "state", "spool", "log", "agents/n1", "agents/n2"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        os.chmod(os.path.join(d, "munge"), 0o700)
        key = os.path.join(d, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        cls.sock = os.path.join(d, "munge", "munge.sock")
        cls.procs = []
        cls.procs.append(subprocess.Popen(
            ["munged", "-F", "--force", "--key-file", key, "--socket", cls.sock,
             "--pid-file", os.path.join(d, "munge", "munged.pid"),
             "--log-file", os.path.join(d, "munge", "munged.log"),
             "--seed-file", os.path.join(d, "munge", "seed")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        ctld, n1, n2 = free_ports(3)
        cls.conf = os.path.join(d, "slurm.conf")
        plugstack = os.path.join(d, "plugstack.conf")
        with open(plugstack, "w") as f:
            f.write(f"required {PLUGIN} agent_state_dir={d}/agents/%n wait=1\n")
        with open(cls.conf, "w") as f:
            f.write(f"""ClusterName=isoplugin
SlurmctldHost=localhost
SlurmctldPort={ctld}
AuthType=auth/munge
AuthInfo=socket={cls.sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
PlugStackConfig={plugstack}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=n[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[{n1}-{n2}] CPUs=2 RealMemory=1000
PartitionName=p Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
""")
        cls.env = dict(os.environ, SLURM_CONF=cls.conf)
        for k in list(cls.env):
            if k.startswith("SLURM_") and k != "SLURM_CONF":
                del cls.env[k]
        deadline = time.time() + 10
        while not os.path.exists(cls.sock) and time.time() < deadline:
            time.sleep(0.1)
        cls.procs.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", cls.conf],
                                          env=cls.env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        for node in ("n1", "n2"):
            cls.procs.append(subprocess.Popen(["slurmd", "-D", "-N", node, "-f", cls.conf],
                                              env=cls.env, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
        deadline = time.time() + 60
        while time.time() < deadline:
            if cls.states() == {"n1": "idle", "n2": "idle"}:
                return
            time.sleep(0.5)
        cls.tearDownClass()
        raise RuntimeError(f"slurm did not come up: {cls.states()}; logs in {d}/log")

    @classmethod
    def states(cls):
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=cls.env,
                           capture_output=True, text=True, timeout=20)
        return dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)

    @classmethod
    def tearDownClass(cls):
        for p in reversed(cls.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(cls.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        cls.procs = []
        if os.environ.get("ISO_TEST_KEEP"):
            print(f"kept {cls.dir}", file=sys.stderr)
        else:
            shutil.rmtree(cls.dir, ignore_errors=True)

    def run_slurm(self, *argv, timeout=60):
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def jobs(self):
        r = self.run_slurm("squeue", "-h", "-a", "-t", "all", "-o", "%i")
        return r.stdout.split()

    def test_help_lists_the_options(self):
        r = self.run_slurm("srun", "--help")
        for opt in ("--isostack-profile", "--isostack-gpus", "--isostack-isolation"):
            self.assertIn(opt, r.stdout + r.stderr)

    def test_bad_option_fails_the_submission(self):
        before = self.jobs()
        for argv, want in (
                (["--isostack-profile=3g.41gb"], "isostack: --isostack-profile"),
                (["--isostack-gpus=0"], "isostack: --isostack-gpus"),
                (["--isostack-isolation=exclusive"], "isostack: --isostack-isolation"),
                (["--isostack-profile=1g.10gb", "--isostack-gpus=1"],
                 "isostack: --isostack-gpus")):
            r = self.run_slurm("srun", "-A", "acme", "-N1", *argv, "true")
            self.assertNotEqual(r.returncode, 0, r)
            self.assertIn(want, r.stderr)
            r = self.run_slurm("sbatch", "-A", "acme", *argv, "--wrap", "true")
            self.assertNotEqual(r.returncode, 0, r)
            self.assertIn(want, r.stderr)
        self.assertEqual(self.jobs(), before, "a refused submission made a job")

    def test_no_agent_fails_the_job_not_the_node(self):
        t0 = time.time()
        r = self.run_slurm("srun", "-A", "acme", "-N1", "-w", "n1",
                           "--isostack-profile=1g.10gb", "true")
        self.assertNotEqual(r.returncode, 0, r)
        with open(os.path.join(self.dir, "log", "slurmd-n1.log"), encoding="utf-8",
                  errors="replace") as f:
            log = f.read()
        sock = os.path.join(self.dir, "agents", "n1", "agent.sock")
        # the plugin's words, naming the node's own state dir (%n) and the
        # job's key; where Slurm shows them: the user's stderr or the node's log
        seen = r.stderr + log
        self.assertIn("isostack: job ", seen)
        self.assertIn(f"cannot reach the agent at {sock}", seen)
        self.assertIn("tenant acme, key slurm:", seen)
        self.assertGreaterEqual(time.time() - t0, 1.0, "wait=1 was not honoured")
        # the failure is the job's: the node goes back to idle, never drained
        deadline = time.time() + 20
        while time.time() < deadline and self.states().get("n1") != "idle":
            time.sleep(0.5)
        self.assertEqual(self.states().get("n1"), "idle", self.states())
        # a batch job the same: FAILED, the node idle
        r = self.run_slurm("sbatch", "-A", "acme", "-w", "n2", "--parsable",
                           "-o", os.path.join(self.dir, "batch-%j.out"), "--wrap", "true")
        self.assertEqual(r.returncode, 0, r)
        job = r.stdout.strip().split(";")[0]
        deadline = time.time() + 30
        state = ""
        while time.time() < deadline:
            s = self.run_slurm("scontrol", "show", "job", job, "-o").stdout
            state = next((w.split("=", 1)[1] for w in s.split() if w.startswith("JobState=")),
                         "")
            if state in ("FAILED", "COMPLETED", "CANCELLED", "NODE_FAIL"):
                break
            time.sleep(0.5)
        self.assertEqual(state, "FAILED")
        deadline = time.time() + 20
        while time.time() < deadline and self.states().get("n2") != "idle":
            time.sleep(0.5)
        self.assertEqual(self.states(), {"n1": "idle", "n2": "idle"})


def main():
    global PLUGIN
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    PLUGIN = os.path.abspath(sys.argv[1])
    for tool in ("slurmctld", "slurmd", "munged", "srun", "sinfo", "sbatch"):
        if not shutil.which(tool):
            print(f"skip: {tool} is not installed (scripts/deps.sh)")
            return 77
    if os.geteuid() != 0:
        print("skip: slurmd must run as root")
        return 77
    if not os.path.exists(PLUGIN):
        print(f"skip: {PLUGIN} not built (no slurm/spank.h)")
        return 77
    prog = unittest.main(argv=[sys.argv[0], "-v"], exit=False)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""test_slurm_isoctl.py: `isoctl slurm prolog|epilog|reap|gres` (docs/slurm.md,
"Prolog, epilog and orphans") against a real isostackd, with fake scontrol and
squeue (tests/api/slurm_fakes, chosen by SCONTROL and SQUEUE) that print what
Slurm 22.05 prints and log how they were called. The prolog creates one
allocation pinned to the job's nodes and keyed slurm:CLUSTER:ID:RESTART, once however often it
runs, and on any failure exits 0 all the same with the reason on stderr and in
the job's comment; the epilog releases it; the reaper releases only what
squeue no longer lists and nothing when squeue fails. Real Slurm: branch
h-cluster's tests.

Run: python3 tests/api/test_slurm_isoctl.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import T  # noqa: E402

FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slurm_fakes")
CLUSTER = "testc"


def key(job, restart=0, cluster=CLUSTER):
    """The Idempotency-Key of a Slurm job's allocation (docs/slurm.md)."""
    return "slurm:%s:%d:%d" % (cluster, job, restart)


def job_line(job, name, nodes, mem, cpus=4, num_nodes=None):
    """One line of `scontrol -o -d show job` as Slurm 22.05.8 prints it
    (captured from a real slurmctld), with one detail block."""
    n = num_nodes if num_nodes is not None else 1
    return ("JobId=%d JobName=%s UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901755 "
            "Nice=0 Account=acme QOS=(null) JobState=CONFIGURING Reason=None Dependency=(null) "
            "Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 DerivedExitCode=0:0 "
            "RunTime=00:00:00 TimeLimit=365-00:00:00 TimeMin=N/A SubmitTime=2026-12-01T19:27:50 "
            "Partition=p AllocNode:Sid=localhost:9825 ReqNodeList=(null) ExcNodeList=(null) "
            "NodeList=%s BatchHost=n1 NumNodes=%d NumCPUs=%d NumTasks=2 CPUs/Task=1 "
            "ReqB:S:C:T=0:0:*:* TRES=cpu=2,mem=1000M,node=2,billing=2 Socks/Node=* "
            "NtasksPerN:B:S:C=0:0:*:* CoreSpec=* JOB_GRES=(null)   Nodes=%s CPU_IDs=0 Mem=%d GRES= "
            "MinCPUsNode=1 MinMemoryNode=%dM MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
            "OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
            "WorkDir=/tmp Comment=Nodes=x CPU_IDs=0 Mem=999999 StdErr=/tmp/slurm-%d.out "
            "StdIn=/dev/null StdOut=/tmp/slurm-%d.out Power= \n"
            % (job, name, nodes, n, cpus * n, nodes, mem, mem, job, job))


class SlurmIsoctlCase(harness.SharedDaemonCase):
    config = "small.yaml"

    @classmethod
    def set_up_world(cls):
        harness.create_tenant(cls("run"), cls.admin, "acme")

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="iso-slurm-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    # ---- helpers ----

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def calls(self):
        try:
            with open(os.path.join(self.dir, "calls.log")) as f:
                return [json.loads(line) for line in f]
        except FileNotFoundError:
            return []

    def comments(self, job):
        """The Comment= values the prolog set on `job` through scontrol update."""
        out = []
        for c in self.calls():
            if c[:2] == ["update", "JobId=%d" % job]:
                self.assertEqual(len(c), 3, c)
                self.assertTrue(c[2].startswith("Comment="), c)
                out.append(c[2][len("Comment="):])
        return out

    def isoctl(self, *argv, env=None):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("ISOSTACK_", "SLURM_", "SPANK_"))}
        e.update({"ISOSTACK_URL": self.d.url(), "ISOSTACK_TOKEN": self.d.admin_token,
                  "FAKE_SLURM_DIR": self.dir, "SCONTROL": os.path.join(FAKES, "scontrol"),
                  "SQUEUE": os.path.join(FAKES, "squeue"), "SLURM_CLUSTER_NAME": CLUSTER})
        e.update(env or {})
        e = {k: v for k, v in e.items() if v is not None}
        p = subprocess.run([harness.Binaries.isoctl] + list(argv), env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=T(90))
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, p.stderr, "sanitizer report from isoctl: %s" % p.stderr)
        return p

    def prolog(self, job, nodes, account="acme", extra=None, mem=1024, cpus_env="4",
               args=(), name="train job"):
        """Runs `isoctl slurm prolog` for job `job` on `nodes` (names)."""
        nodelist = ",".join(nodes)
        self.write("hostnames", "".join(n + "\n" for n in nodes))
        self.write("job.%d" % job, job_line(job, name, nodelist, mem, num_nodes=len(nodes)))
        env = {"SLURM_JOB_ID": str(job), "SLURM_JOB_ACCOUNT": account,
               "SLURM_JOB_NODELIST": nodelist, "SLURM_JOB_NAME": name,
               "SLURM_JOB_CPUS_PER_NODE": "%s(x%d)" % (cpus_env, len(nodes)) if cpus_env else None,
               "SPANK_ISOSTACK": "1", "SPANK_ISOSTACK_PROFILE": "1g.10gb"}
        env.update(extra or {})
        p = self.isoctl("slurm", "prolog", *args, env=env)
        self.assertEqual(p.returncode, 0, "prolog must always exit 0: %s" % p.stderr)
        return p

    def by_key(self, job, tenant=None, restart=0):
        path = "/v1/allocations?idempotency_key=" + key(job, restart)
        if tenant:
            path += "&tenant=" + tenant
        r = self.admin.get(path)
        self.assertStatus(r, 200)
        items = [a for a in r.body["items"] if a.get("idempotency_key") == key(job, restart)]
        self.assertEqual(len(items), len(r.body["items"]), "the key filter: %r" % r.body)
        return items

    def live(self, job):
        return [a for a in self.by_key(job) if a["state"] in harness.LIVE_STATES]

    def assertRefused(self, p, job, variable):
        """Nothing made, the reason on stderr naming `variable`, and (with a
        job id) in the job's comment."""
        self.assertIn("isostack: ", p.stderr)
        self.assertIn(variable, p.stderr)
        if job:
            self.assertEqual(self.live(job), [])
            cs = self.comments(job)
            self.assertEqual(len(cs), 1, self.calls())
            self.assertTrue(cs[0].startswith("isostack: "), cs)
            self.assertIn(variable, cs[0])

    # ---- prolog ----

    def test_prolog_creates_one_pinned_allocation(self):
        p = self.prolog(4101, ["sm-n03", "sm-n02"])
        self.assertNotIn("isostack: ", p.stderr.replace("isostack: job", ""), p.stderr)
        [a] = self.by_key(4101)
        self.assertEqual(a["state"], "active", a)
        self.assertEqual((a["tenant"], a["name"], a["members"]), ("acme", "slurm-4101", 2))
        # Member i on node i, in Slurm's order, not the placer's.
        self.assertEqual([(m["member"], m["node"]) for m in a["nodes"]],
                         [(0, "sm-n03"), (1, "sm-n02")])
        self.assertEqual((a["cpus"], a["memory_mib"]), (4, 1024))
        self.assertEqual(a["gpus"]["profile"], "1g.10gb")
        self.assertEqual(a["gpus"]["count"], 1)
        self.assertEqual(self.comments(4101), [])
        # The job line's Comment= holds "Mem=999999": text after MinTmpDiskNode= is not read.
        self.assertNotEqual(a["memory_mib"], 999999)

    def test_prolog_twice_is_one_allocation(self):
        self.prolog(4102, ["sm-n01"])
        self.prolog(4102, ["sm-n01"])
        items = self.by_key(4102)
        self.assertEqual(len(items), 1, items)
        self.assertEqual(items[0]["state"], "active")
        r = self.admin.get("/v1/allocations?tenant=acme")
        self.assertEqual(len([a for a in r.body["items"] if a["name"] == "slurm-4102"]), 1)

    def test_requeued_job_gets_a_new_allocation(self):
        # A requeued job keeps its id; its restart count makes a new key, so
        # its second run is not handed the first run's released allocation.
        self.prolog(4108, ["sm-n01"])
        p = self.isoctl("slurm", "epilog", env={"SLURM_JOB_ID": "4108", "SLURM_JOB_ACCOUNT": "acme"})
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.prolog(4108, ["sm-n01"], extra={"SLURM_JOB_RESTART_COUNT": "1"})
        self.assertEqual(self.comments(4108), [], p.stderr)
        [first], [second] = self.by_key(4108), self.by_key(4108, restart=1)
        self.assertEqual((first["state"], second["state"]), ("released", "active"))
        p = self.isoctl("slurm", "epilog", env={"SLURM_JOB_ID": "4108", "SLURM_JOB_ACCOUNT": "acme",
                                                "SLURM_JOB_RESTART_COUNT": "1"})
        self.assertEqual(self.by_key(4108, restart=1)[0]["state"], "released", p.stdout)

    def test_prolog_needs_the_cluster_name(self):
        for job, bad in ((4190, None), (4191, ""), (4192, "a b"), (4193, "c:d")):
            with self.subTest(cluster=bad):
                p = self.prolog(job, ["sm-n01"], extra={"SLURM_CLUSTER_NAME": bad})
                self.assertRefused(p, job, "SLURM_CLUSTER_NAME")
        p = self.prolog(4194, ["sm-n01"], extra={"SLURM_JOB_RESTART_COUNT": "-1"})
        self.assertRefused(p, 4194, "SLURM_JOB_RESTART_COUNT")

    def test_prolog_whole_gpus_and_isolation(self):
        self.prolog(4103, ["sm-n01"], extra={"SPANK_ISOSTACK_PROFILE": None,
                                             "SPANK_ISOSTACK_GPUS": "2",
                                             "SPANK_ISOSTACK_ISOLATION": "exclusive-gpu"})
        [a] = self.by_key(4103)
        self.assertEqual(a["state"], "active", a)
        self.assertTrue(a["gpus"]["whole"])
        self.assertEqual(a["gpus"]["count"], 2)
        self.assertEqual(a["isolation"], "exclusive-gpu")

    def test_prolog_refused_sets_comment_and_exits_0(self):
        # A MIG slice on the CPU-only node: the pinned create is refused.
        p = self.prolog(4104, ["sm-c01"])
        self.assertRefused(p, 4104, "sm-c01")

    def test_prolog_cpus_from_scontrol_without_env(self):
        self.prolog(4105, ["sm-n01"], cpus_env=None)
        [a] = self.by_key(4105)
        self.assertEqual(a["cpus"], 4)  # NumCPUs=4 / NumNodes=1

    def test_prolog_tenant_map(self):
        m = os.path.join(self.dir, "map")
        # (acme: in small.yaml a node's port without VFs serves one tenant)
        self.write("map", "# accounts of the old cluster\nphysics  acme\n")
        p = self.prolog(4106, ["sm-n01"], account="physics", args=("--tenant-map", m))
        self.assertEqual(self.comments(4106), [], p.stderr)
        [a] = self.by_key(4106)
        self.assertEqual(a["tenant"], "acme")
        self.write("map", "physics\n")
        p = self.prolog(4107, ["sm-n01"], account="physics", args=("--tenant-map", m))
        self.assertRefused(p, 4107, "%s:1" % m)

    # ---- bad environment and bad Slurm output: a clear error, nothing made ----

    def test_prolog_bad_environment(self):
        p = self.prolog(4110, ["sm-n01"], extra={"SLURM_JOB_ID": None})
        self.assertRefused(p, None, "SLURM_JOB_ID is not set")
        self.assertEqual(self.calls(), [])  # no job to comment on
        p = self.prolog(4111, ["sm-n01"], extra={"SLURM_JOB_ID": "41x1"})
        self.assertRefused(p, None, "SLURM_JOB_ID: '41x1' is not a job id")
        cases = [(4112, {"SLURM_JOB_NODELIST": "sm-n01;reboot"}, "SLURM_JOB_NODELIST"),
                 (4113, {"SPANK_ISOSTACK_GPUS": "two"}, "SPANK_ISOSTACK_GPUS"),
                 (4114, {"SPANK_ISOSTACK_GPUS": "65"}, "SPANK_ISOSTACK_GPUS"),
                 (4115, {"SPANK_ISOSTACK_PROFILE": "3G 40GB"}, "SPANK_ISOSTACK_PROFILE"),
                 (4116, {"SLURM_JOB_ACCOUNT": None}, "SLURM_JOB_ACCOUNT"),
                 (4117, {"SLURM_JOB_CPUS_PER_NODE": "4(x"}, "SLURM_JOB_CPUS_PER_NODE"),
                 (4118, {"SLURM_JOB_CPUS_PER_NODE": "4(x3)"}, "SLURM_JOB_CPUS_PER_NODE")]
        for job, extra, variable in cases:
            with self.subTest(variable=variable, extra=extra):
                self.assertRefused(self.prolog(job, ["sm-n01"], extra=extra), job, variable)

    def test_prolog_bad_scontrol_output(self):
        self.write("hostnames", "sm-n01\nSM N02\n")
        env = {"SLURM_JOB_ID": "4120", "SLURM_JOB_ACCOUNT": "acme", "SLURM_JOB_NAME": "x",
               "SLURM_JOB_NODELIST": "sm-n[01-02]"}
        p = self.isoctl("slurm", "prolog", env=env)
        self.assertEqual(p.returncode, 0)
        self.assertRefused(p, 4120, "scontrol show hostnames, line 2")
        # A job name that imitates the fields: skipped by its length.
        p = self.prolog(4121, ["sm-n01"], name="x NumNodes=7 Nodes=a CPU_IDs=0 Mem=77")
        [a] = self.by_key(4121)
        self.assertEqual(a["memory_mib"], 1024)
        # scontrol show job fails (job unknown): refused, naming scontrol.
        os.unlink(os.path.join(self.dir, "job.4121"))
        env.update({"SLURM_JOB_ID": "4122", "SLURM_JOB_NODELIST": "sm-n01"})
        self.write("hostnames", "sm-n01\n")
        p = self.isoctl("slurm", "prolog", env=env)
        self.assertRefused(p, 4122, "scontrol -o failed (exit 1): slurm_load_jobs error")

    def test_prolog_isostackd_unreachable(self):
        self.write("hostnames", "sm-n01\n")
        self.write("job.4125", job_line(4125, "x", "sm-n01", 100))
        env = {"SLURM_JOB_ID": "4125", "SLURM_JOB_ACCOUNT": "acme", "SLURM_JOB_NAME": "x",
               "SLURM_JOB_NODELIST": "sm-n01", "ISOSTACK_URL": "http://127.0.0.1:%d" % harness.free_port()}
        p = self.isoctl("slurm", "prolog", "--timeout", "5", env=env)
        self.assertEqual(p.returncode, 0)
        [c] = self.comments(4125)
        self.assertIn("cannot reach server", c)

    # ---- epilog ----

    def test_epilog_releases(self):
        self.prolog(4130, ["sm-n01"])
        self.assertEqual(len(self.live(4130)), 1)
        env = {"SLURM_JOB_ID": "4130", "SLURM_JOB_ACCOUNT": "acme"}
        p = self.isoctl("slurm", "epilog", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("released allocation", p.stdout)
        [a] = self.by_key(4130)
        self.assertEqual(a["state"], "released")
        p = self.isoctl("slurm", "epilog", env=env)  # again: fine, nothing to do
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        p = self.isoctl("slurm", "epilog", env={"SLURM_JOB_ID": "4139", "SLURM_JOB_ACCOUNT": "acme"})
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertIn("no allocation with key " + key(4139), p.stdout)
        p = self.isoctl("slurm", "epilog", env={"SLURM_JOB_ID": "x"})
        self.assertEqual(p.returncode, 0)
        self.assertIn("SLURM_JOB_ID", p.stderr)

    # ---- reap ----

    def squeue(self, *jobs, errors=()):
        self.write("squeue.json", json.dumps({
            "meta": {"Slurm": {"release": "22.05.8"}}, "errors": list(errors),
            "jobs": [{"job_id": j, "job_state": s} for j, s in jobs]}))

    def test_reap_releases_only_vanished_jobs(self):
        self.prolog(4140, ["sm-n01"])
        self.prolog(4141, ["sm-n02"])
        self.prolog(4142, ["sm-n03"])
        # Another client's allocation with a key that is not ours is never touched.
        # 4140 runs, 4141 is gone, 4142 is listed but finished.
        self.squeue((4140, "RUNNING"), (4142, "COMPLETED"), (9, "PENDING"))
        p = self.isoctl("slurm", "reap")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(self.live(4140)), 1)
        self.assertEqual(self.live(4141), [])
        self.assertEqual(self.live(4142), [])
        self.assertIn("(%s, tenant acme): job 4141 is gone" % key(4141), p.stdout)
        self.assertIn(key(4142), p.stdout)
        self.assertNotIn(key(4140), p.stdout)
        # 23.02's job_state is a list; COMPLETING means the epilog still runs.
        self.squeue((4140, ["COMPLETING", "COMPLETED"]))
        p = self.isoctl("slurm", "reap")
        self.assertEqual(len(self.live(4140)), 1, p.stdout)

    def test_reap_releases_nothing_when_squeue_fails(self):
        self.prolog(4150, ["sm-n01"])
        self.write("squeue.rc", "1")
        p = self.isoctl("slurm", "reap")
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertIn("nothing released", p.stderr)
        self.assertEqual(len(self.live(4150)), 1)
        os.unlink(os.path.join(self.dir, "squeue.rc"))
        # squeue 22.05 with slurmctld down: exit 0, "jobs": [] and an error.
        self.squeue(errors=[{"description": "Failed while looking for jobs",
                             "error_number": -1, "error": "Unspecified error",
                             "source": "slurm_load_jobs"}])
        p = self.isoctl("slurm", "reap")
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertIn("Failed while looking for jobs", p.stderr)
        self.assertEqual(len(self.live(4150)), 1)
        for bad in ("not json", '{"jobs": []}', '{"errors": [], "jobs": [{"job_id": "1"}]}',
                    '{"errors": [], "jobs": [{"job_id": 4150}]}'):
            with self.subTest(output=bad):
                self.write("squeue.json", bad)
                p = self.isoctl("slurm", "reap")
                self.assertEqual(p.returncode, 7, p.stderr)
                self.assertIn("squeue --json", p.stderr)
                self.assertEqual(len(self.live(4150)), 1)

    def test_reap_leaves_other_clusters_alone(self):
        # Job ids are per slurmctld: another cluster's job 4160 is not this
        # cluster's, whatever this cluster's squeue says.
        self.prolog(4160, ["sm-n01"], extra={"SLURM_CLUSTER_NAME": "other"})
        self.squeue()
        p = self.isoctl("slurm", "reap")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = self.admin.get("/v1/allocations?idempotency_key=" + key(4160, cluster="other"))
        self.assertEqual([a["state"] for a in r.body["items"]], ["active"], p.stdout)
        p = self.isoctl("slurm", "reap", "--cluster", "other")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = self.admin.get("/v1/allocations?idempotency_key=" + key(4160, cluster="other"))
        self.assertEqual([a["state"] for a in r.body["items"]], ["released"], p.stdout)

    def test_reap_usage(self):
        p = self.isoctl("slurm", "reap", "--every", "0")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--every", p.stderr)
        for bad in ({"SLURM_CLUSTER_NAME": None}, {"SLURM_CLUSTER_NAME": "a b"}):
            p = self.isoctl("slurm", "reap", env=bad)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--cluster", p.stderr)

    # ---- gres ----

    def test_gres(self):
        p = self.isoctl("slurm", "gres")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("GresTypes=isogpu,isomig", lines)
        for n in ("sm-n01", "sm-n02", "sm-n03"):
            self.assertIn("NodeName=%s Gres=isogpu:8,isomig:56" % n, lines)
            self.assertIn("NodeName=%s Name=isogpu Count=8 Flags=CountOnly" % n, lines)
            self.assertIn("NodeName=%s Name=isomig Count=56 Flags=CountOnly" % n, lines)
        self.assertNotIn("sm-c01", p.stdout)  # no GPUs: nothing to declare


if __name__ == "__main__":
    harness.main()

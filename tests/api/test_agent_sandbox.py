#!/usr/bin/env python3
"""test_agent_sandbox.py: members' sandboxes made by the node agent (issue 14,
docs/agent.md "Sandboxes") and `isostack-agent exec` (docs/cli.md), on the
real kernel: an agent with the sim GPU driver serving ag-n01 of
tests/api/data/agents.yaml with --sandbox real, against isostackd. A MIG
allocation's member gets its sandbox; `exec -- cat /proc/self/cgroup` shows
the member's cgroup and `hostname` the sandbox's name; exit codes pass
through (and 127 for a missing command); a caller that is not root (uid
65534 through setpriv) is refused; a member of the other node and a released
member are refused with those words, exit 125; release removes the sandbox
(holder, cgroup); a restarted agent keeps a live member's sandbox (same
holder pid). Root only (suite sandbox); skips saying why otherwise.

Run: python3 tests/api/test_agent_sandbox.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, create_alloc, create_tenant  # noqa: E402
from test_agent_daemon import Agent, agent_binary  # noqa: E402

MIG_NODE, WHOLE_NODE = "ag-n01", "ag-n02"
CG_ROOT = harness.CGROUP_ROOT


def skip_reason():
    return harness.sandbox_skip_reason("setpriv")


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@unittest.skipIf(skip_reason(), skip_reason() or "")
class TestAgentSandbox(ApiTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_agent_sandbox.")
        self.state = os.path.join(self.tmp, "state")
        self.d = Daemon("agents.yaml", extra_args=("--agent-lease-s", "3", "--agent-grace-s", "600",
                                                   "--provisioning-timeout-s", "60"),
                        agents=True)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()
        self.tenant = create_tenant(self, self.admin)["name"]
        token_file = os.path.join(self.tmp, "agent.token")
        with open(token_file, "w") as f:
            f.write(self.d.admin_token + "\n")
        self.agent = Agent(self.d.url(), token_file, self.state, [MIG_NODE])
        i = self.agent.argv.index("--sandbox")
        self.agent.argv[i + 1] = "real"

    def tearDown(self):
        try:
            for a in getattr(self, "allocs", []):
                self.admin.delete("/v1/allocations/" + a)
            if self.agent.proc and self.agent.proc.poll() is None and getattr(self, "allocs", []):
                # let the agent remove what it made before it stops
                self.wait_until("sandboxes removed", lambda: not self.records(), timeout=30)
            self.agent.kill()
            text = self.agent.text()
            self.agent.close()
            self.assertNotIn("Sanitizer", text, text[-3000:])
            self.assertNotIn("runtime error:", text, text[-3000:])
            self.d.stop()
        finally:
            self.d.cleanup()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def wait_context(self):
        return "; agent log:\n" + self.agent.text()[-3000:]

    def records(self):
        d = os.path.join(self.state, "sandboxes")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def record(self, alloc_id, member=0):
        with open(os.path.join(self.state, "sandboxes", "iso-%s-%d.json" % (alloc_id, member))) as f:
            return json.load(f)

    def exec(self, alloc_id, cmd, member=0, as_user=None, extra=()):
        argv = [agent_binary(), "exec", "--state-dir", self.state, "--allocation", alloc_id,
                "--member", str(member)] + list(extra) + ["--"] + cmd
        if as_user is not None:
            argv = ["setpriv", "--reuid", str(as_user), "--regid", str(as_user), "--clear-groups"] + argv
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    def create(self, pool="mig", profile="1g.10gb"):
        body = {"tenant": self.tenant, "gpus": {"count": 1, "profile": profile}, "pool": pool,
                "cpus": 1}
        if pool == "whole":
            body["gpus"] = {"count": 1, "whole": True}
        a = create_alloc(self, self.admin, body)
        self.allocs = getattr(self, "allocs", []) + [a["id"]]
        return a

    def active(self, alloc_id):
        return self.admin.get("/v1/allocations/" + alloc_id).body["state"] == "active"

    def test_exec_in_the_members_sandbox(self):
        self.agent.start()
        a = self.create()
        name = "iso-%s-0" % a["id"]
        self.wait_until("active", lambda: self.active(a["id"]))
        self.assertIn("event=agent.sandbox_mode mode=real", self.agent.text())
        member = self.admin.get("/v1/allocations/" + a["id"]).body["nodes"][0]
        self.assertEqual(member["sandbox"]["cgroup"], name, repr(member))
        rec = self.record(a["id"])
        self.assertEqual(member["sandbox"]["cpus"], rec["cpus"], repr(member))

        r = self.exec(a["id"], ["cat", "/proc/self/cgroup"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/" + name, r.stdout)
        if os.path.isdir(CG_ROOT + "/cpuset"):  # v1: a line per hierarchy
            self.assertIn(":cpuset:/" + name, r.stdout)
        r = self.exec(a["id"], ["hostname"])
        self.assertEqual((r.returncode, r.stdout.strip()), (0, name), r.stderr)
        # the job's identity, and exit codes passed through
        r = self.exec(a["id"], ["sh", "-c", "id -u; id -g; exit 42"], extra=["--uid", "1000", "--gid", "1001"])
        self.assertEqual((r.returncode, r.stdout.split()), (42, ["1000", "1001"]), r.stderr)
        r = self.exec(a["id"], ["/nonexistent/command"])
        self.assertEqual(r.returncode, 127, r.stderr)
        # the other processes on the host are not visible: the sandbox's own pid namespace
        r = self.exec(a["id"], ["sh", "-c", "ls /proc | grep -c '^[0-9]'"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(int(r.stdout.strip()), 10, r.stdout)

        # a caller that is not root: refused by the socket, exit 125
        os.chmod(self.tmp, 0o755)
        os.chmod(self.state, 0o755)
        os.chmod(os.path.join(self.state, "agent.sock"), 0o666)
        r = self.exec(a["id"], ["true"], as_user=65534)
        self.assertEqual(r.returncode, 125, r.stdout + r.stderr)
        self.assertIn("refused: only root may ask the agent", r.stderr)
        self.assertIn("event=agent.socket_refused uid=65534", self.agent.text())
        os.chmod(os.path.join(self.state, "agent.sock"), 0o600)

        # a member of another node: not on this node
        other = self.create(pool="whole")
        r = self.exec(other["id"], ["true"])
        self.assertEqual((r.returncode, r.stderr.strip()),
                         (125, "isostack-agent exec: not on this node"))

        # released: the sandbox goes (holder, cgroup, record), and exec says so
        holder = rec["holder_pid"]
        self.assertTrue(alive(holder))
        r = self.admin.delete("/v1/allocations/" + a["id"])
        self.assertIn(r.status, (200, 202, 204), repr(r))
        self.wait_until("the record is gone", lambda: ("%s.json" % name) not in self.records())
        self.assertFalse(alive(holder), "the holder is gone")
        for ctl in ("cpuset", "memory", "pids"):
            self.assertFalse(os.path.exists(os.path.join(CG_ROOT, ctl, name)), ctl)
        self.assertIn("event=agent.sandbox_destroyed node=ag-n01 sandbox=" + name, self.agent.text())
        r = self.exec(a["id"], ["true"])
        self.assertEqual((r.returncode, r.stderr.strip()), (125, "isostack-agent exec: released"))

    def test_restart_keeps_a_live_sandbox(self):
        self.agent.start()
        a = self.create()
        self.wait_until("active", lambda: self.active(a["id"]))
        holder = self.record(a["id"])["holder_pid"]
        self.agent.kill()
        self.assertTrue(alive(holder), "the holder outlives the agent")
        self.agent.start()
        self.wait_until("exec works again", lambda: self.exec(a["id"], ["true"]).returncode == 0)
        self.assertEqual(self.record(a["id"])["holder_pid"], holder)
        r = self.exec(a["id"], ["hostname"])
        self.assertEqual(r.stdout.strip(), "iso-%s-0" % a["id"])
        self.assertNotIn("event=agent.sandbox_created", self.agent.text().split("event=agent.start")[-1])

    def test_bad_exec_flags_exit_125(self):
        cases = [
            ([], "--state-dir is required"),
            (["--state-dir", self.state, "--allocation", "a-0123456789abcdef"], "--member is required"),
            (["--state-dir", self.state, "--allocation", "a-0123456789abcdef", "--member", "x"],
             "--member: expected 0..1023"),
            (["--state-dir", self.state, "--allocation", "a-0123456789abcdef", "--member", "0",
              "--uid", "1000"], "--uid and --gid go together"),
            (["--state-dir", self.state, "--allocation", "a-0123456789abcdef", "--member", "0",
              "--uid", "0", "--gid", "0"], "--uid: expected a uid"),
            (["--state-dir", self.state, "--allocation", "a-0123456789abcdef", "--member", "0",
              "--bogus", "1"], "unknown option '--bogus'"),
            (["--state-dir", self.state, "--allocation", "a-0123456789abcdef", "--member", "0"],
             "no command"),
            (["--state-dir", self.state, "--allocation", "a-0123456789abcdef", "--member", "0", "--", "true"],
             "cannot reach the agent"),
        ]
        for args, want in cases:
            r = subprocess.run([agent_binary(), "exec"] + args + ([] if "--" in args else []),
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 125, (args, r.stderr))
            self.assertIn(want, r.stderr, args)


if __name__ == "__main__":
    harness.main()

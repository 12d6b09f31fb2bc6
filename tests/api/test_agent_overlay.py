#!/usr/bin/env python3
"""test_agent_overlay.py: the tenant overlay made by a real node agent (issue
14, docs/agent.md "Sandboxes", docs/sandbox.md "Tenant overlay"), end to end:
isostackd on tests/api/data/agents-eth.yaml (an Ethernet fabric) and an agent
with the sim GPU driver serving eg-n01 with --sandbox real, in this host's
network namespace. A one-GPU allocation's member is on its tenant's overlay:
the member becomes active only with it, `isostack-agent exec -- ip -4 -o addr
show eth0` inside its sandbox shows 10.0.0.2/8 (node index 0, slot 0), and
the host holds the tenant's bridge isobr<vni> with the member's veth on it.
The tenant has no member on another node, so there is no tunnel and no guard
(the bridge alone). Release removes the veth and the bridge. Root only (suite
sandbox); skips saying why otherwise.
Run: python3 tests/api/test_agent_overlay.py PATH/TO/isostackd PATH/TO/isoctl
"""
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

NODE = "eg-n01"
CG_ROOT = harness.CGROUP_ROOT


def skip_reason():
    return harness.sandbox_skip_reason("ip")


def link(name):
    """`ip -o link show NAME` in this namespace, "" when there is none."""
    r = subprocess.run(["ip", "-o", "link", "show", name], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


@unittest.skipIf(skip_reason(), skip_reason() or "")
class TestAgentOverlay(ApiTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_agent_overlay.")
        self.state = os.path.join(self.tmp, "state")
        self.d = Daemon("agents-eth.yaml",
                        extra_args=("--agent-lease-s", "3", "--agent-grace-s", "600",
                                    "--provisioning-timeout-s", "60"),
                        agents=True)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()
        self.tenant = create_tenant(self, self.admin)
        token_file = os.path.join(self.tmp, "agent.token")
        with open(token_file, "w") as f:
            f.write(self.d.admin_token + "\n")
        self.agent = Agent(self.d.url(), token_file, self.state, [NODE])
        i = self.agent.argv.index("--sandbox")
        self.agent.argv[i + 1] = "real"
        self.allocs = []

    def tearDown(self):
        try:
            for a in self.allocs:
                self.admin.delete("/v1/allocations/" + a)
            if self.agent.proc and self.agent.proc.poll() is None and self.allocs:
                self.wait_until("overlay removed", lambda: not link(self.bridge()), timeout=30)
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

    def bridge(self):
        return "isobr%d" % self.tenant["vni"]

    def active(self, alloc_id):
        return self.admin.get("/v1/allocations/" + alloc_id).body["state"] == "active"

    def exec(self, alloc_id, cmd):
        argv = [agent_binary(), "exec", "--state-dir", self.state, "--allocation", alloc_id,
                "--member", "0", "--"] + cmd
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    def test_member_on_its_tenants_overlay(self):
        self.assertIsInstance(self.tenant.get("vni"), int, repr(self.tenant))
        self.assertFalse(link(self.bridge()), "a bridge of this VNI before the test")
        self.agent.start()
        a = create_alloc(self, self.admin, {"tenant": self.tenant["name"], "pool": "whole",
                                            "gpus": {"count": 1, "whole": True}, "cpus": 1})
        self.allocs.append(a["id"])
        self.wait_until("active", lambda: self.active(a["id"]))

        # inside the member's sandbox: eth0 with its address
        r = self.exec(a["id"], ["ip", "-4", "-o", "addr", "show", "eth0"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("inet 10.0.0.2/8", r.stdout)
        # on the host: the tenant's bridge, the member's veth on it, no tunnel
        self.assertIn("UP", link(self.bridge()))
        r = subprocess.run(["ip", "-o", "link", "show", "master", self.bridge()],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        ports = [ln for ln in r.stdout.splitlines() if ln.strip()]
        self.assertEqual(len(ports), 1, r.stdout)
        self.assertIn(": isov", ports[0])
        self.assertIn("alias iso-%s-0" % a["id"], subprocess.run(
            ["ip", "-o", "-d", "link", "show", ports[0].split(":")[1].strip().split("@")[0]],
            capture_output=True, text=True).stdout)
        self.assertFalse(link("isovx%d" % self.tenant["vni"]), "a tunnel without a peer")

        # release: the member's veth and the tenant's bridge go
        self.admin.delete("/v1/allocations/" + a["id"])
        self.wait_until("bridge removed", lambda: not link(self.bridge()), timeout=30)
        self.allocs = []


if __name__ == "__main__":
    harness.main()

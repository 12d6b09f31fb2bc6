#!/usr/bin/env python3
"""test_readme.py: README.md's five-minute walkthrough, run as a new user
would run it, so that it cannot rot: every ```sh block of the section
"A five-minute walkthrough", in order, as one bash script with `set -e`,
against a fresh isostackd serving examples/cluster.yaml (the cluster `make
run` serves), in a directory laid out like the repository after `make run`:
build/isoctl and var/admin.token. The one change made to the text is the
server's address (`make run` listens on 127.0.0.1:8470; the test on a free
port).

Run: python3 tests/api/test_readme.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T  # noqa: E402

README = os.path.join(harness.SOURCE_ROOT, "README.md")
SECTION = "## A five-minute walkthrough"
README_URL = "http://127.0.0.1:8470"


def walkthrough_blocks(text):
    """The ```sh blocks of the walkthrough section, in order."""
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    return re.findall(r"^```sh\n(.*?)^```$", section, re.S | re.M)


class TestReadme(ApiTestCase):
    def setUp(self):
        if not harness.Binaries.isoctl or not os.path.exists(harness.Binaries.isoctl):
            raise AssertionError("no isoctl binary: pass it as argv[2]")
        # As `make run` serves it (scripts/run.sh): with the provisioning gate
        # and one sim agent for every node, the admin token as its credential.
        self.d = Daemon(os.path.join(harness.SOURCE_ROOT, "examples", "cluster.yaml"), agents=True)
        self.addCleanup(self.d.cleanup)
        self.d.start()
        self.addCleanup(self.d.stop)
        self.admin = self.d.client()
        self.agent_dir = tempfile.mkdtemp(prefix="isoreadme-agent-")
        self.addCleanup(shutil.rmtree, self.agent_dir, True)
        token_file = os.path.join(self.agent_dir, "admin.token")
        with open(token_file, "w") as f:
            f.write(self.d.admin_token + "\n")
        argv = [os.path.join(os.path.dirname(harness.Binaries.isostackd), "isostack-agent"),
                "--controller", self.d.url(), "--token-file", token_file, "--gpu-driver", "sim",
                "--state-dir", os.path.join(self.agent_dir, "state")]
        for n in self.admin.list_all("/v1/nodes"):
            argv += ["--node", n["name"]]
        self.agent_log = open(os.path.join(self.agent_dir, "agent.log"), "w+b")
        self.addCleanup(self.agent_log.close)
        self.agent = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.agent_log,
                                      stderr=subprocess.STDOUT)
        self.addCleanup(self.stop_agent)

    def stop_agent(self):
        self.agent.terminate()
        try:
            self.agent.wait(timeout=T(10))
        except subprocess.TimeoutExpired:
            self.agent.kill()
            self.agent.wait()

    def test_blocks_found(self):
        with open(README, encoding="utf-8") as f:
            blocks = walkthrough_blocks(f.read())
        self.assertGreaterEqual(len(blocks), 4, "the walkthrough lost its shell blocks")
        self.assertIn(README_URL, blocks[0])

    def test_walkthrough_runs(self):
        with open(README, encoding="utf-8") as f:
            blocks = walkthrough_blocks(f.read())
        script = "set -euo pipefail\n" + "\n".join(blocks).replace(README_URL, self.d.url())
        with tempfile.TemporaryDirectory(prefix="isoreadme-") as top:
            # The repository's layout after `make run`: build/isoctl, var/admin.token.
            os.mkdir(os.path.join(top, "build"))
            os.symlink(os.path.abspath(harness.Binaries.isoctl), os.path.join(top, "build", "isoctl"))
            os.symlink(self.d.state_dir, os.path.join(top, "var"))
            env = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
            p = subprocess.run(["bash", "-x", "-c", script], cwd=top, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=T(240))
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, p.stdout, "sanitizer report from isoctl:\n" + p.stdout[-4000:])
        self.assertEqual(p.returncode, 0, "the walkthrough failed at the last '+' line:\n"
                         + p.stdout[-6000:])
        # What it says it did, it did: alice's allocation came and went, the
        # whole-GPU one too, and acme ends in pharma with its quota.
        allocs = self.admin.list_all("/v1/allocations?tenant=acme")
        self.assertEqual([a["state"] for a in allocs], ["released", "released"])
        self.assertEqual([a["owner"] for a in allocs], ["alice", "bootstrap-admin"])
        self.assertEqual(allocs[0]["members"], 3)
        t = self.admin.get("/v1/tenants/acme").body
        self.assertEqual((t["org"], t["isolation"]), ("pharma", "exclusive-gpu"))
        q = self.admin.get("/v1/tenants/acme/quota").body["quotas"]["h100-80gb"]
        self.assertEqual((q["guaranteed"], q["borrow_limit"]), (56, 28))
        self.assertIn("clean:", p.stdout)  # fabric verify found nothing
        # The tenant received the MIG UUIDs the agent made for its members.
        self.assertRegex(p.stdout, r'"cuda_visible_devices": "MIG-[0-9a-f-]+"')
        self.agent_log.seek(0)
        log = self.agent_log.read().decode("utf-8", "replace")
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, log, "sanitizer report from isostack-agent:\n" + log[-4000:])


if __name__ == "__main__":
    harness.main()

#!/usr/bin/env python3
"""test_io_uring_sandbox.py: the tenant's io_uring switch reaches the seccomp
filter of its members' processes (issue 14; docs/sandbox.md "seccomp"), end
to end on the real kernel: isostackd, a node agent with --sandbox real (the
set-up of test_agent_sandbox.py) and `isostack-agent exec` of a probe that
calls io_uring_setup. With the tenant's switch off (the default) the call
answers EPERM in the sandbox; after a cluster-admin's PATCH {"io_uring":true}
it succeeds in a process that joins next, and after {"io_uring":false} it is
EPERM again. Root only (suite sandbox); skips saying why otherwise, and when
the host itself refuses io_uring (kernel.io_uring_disabled).

Run: python3 tests/api/test_io_uring_sandbox.py PATH/TO/isostackd PATH/TO/isoctl
"""

import ctypes
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_agent_sandbox as tas  # noqa: E402

# io_uring_setup(1, params) with a zeroed struct io_uring_params (120 bytes);
# 425 on every architecture that uses the generic syscall table and x86-64.
PROBE = ("import ctypes\n"
         "libc = ctypes.CDLL(None, use_errno=True)\n"
         "fd = libc.syscall(425, 1, ctypes.create_string_buffer(120))\n"
         "print('ok' if fd >= 0 else 'errno %d' % ctypes.get_errno())\n")


def host_reason():
    reason = tas.skip_reason()
    if reason:
        return reason
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(425, 1, ctypes.create_string_buffer(120))
    if fd < 0:
        return "the host refuses io_uring_setup (errno %d): nothing to switch" % ctypes.get_errno()
    os.close(fd)
    return None


@unittest.skipIf(host_reason(), host_reason() or "")
class TestIoUringInSandbox(tas.TestAgentSandbox):
    def probe(self, alloc_id):
        r = self.exec(alloc_id, [sys.executable, "-c", PROBE])
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def test_the_switch_reaches_the_filter(self):
        self.agent.start()
        a = self.create()
        self.wait_until("active", lambda: self.active(a["id"]))
        self.assertEqual(self.probe(a["id"]), "errno 1")  # EPERM: denied by default

        r = self.admin.patch("/v1/tenants/" + self.tenant, {"io_uring": True})
        self.assertStatus(r, 200)
        self.wait_until("io_uring allowed in the sandbox", lambda: self.probe(a["id"]) == "ok")

        r = self.admin.patch("/v1/tenants/" + self.tenant, {"io_uring": False})
        self.assertStatus(r, 200)
        self.wait_until("io_uring denied again", lambda: self.probe(a["id"]) == "errno 1")


def load_tests(loader, tests, pattern):
    """Only this file's test: the base class's are test_agent_sandbox's."""
    return loader.loadTestsFromNames(
        [n for n in loader.getTestCaseNames(TestIoUringInSandbox)
         if n in TestIoUringInSandbox.__dict__], TestIoUringInSandbox)


if __name__ == "__main__":
    harness.main(__doc__)

"""test_listen.py: how isostackd serves and guards its state dir: TLS from a
certificate and key, plain HTTP only on loopback unless explicitly allowed,
one daemon per state dir, and the bootstrap admin token (0600, never logged,
recoverable with --new-admin-token)."""

import json
import os
import shutil
import socket
import ssl
import stat
import subprocess
import tempfile
import time
import unittest
import urllib.request

import harness
from harness import Binaries, T, data_path, free_port

CONFIG = "small.yaml"


def run_daemon(args, state_dir):
    return subprocess.Popen([Binaries.isostackd, "--config", data_path(CONFIG), "--state-dir",
                             state_dir] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def read(path):
    with open(path) as f:
        return f.read().strip()


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(T(10))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    out, err = proc.communicate()
    return out.decode(errors="replace"), err.decode(errors="replace")


def wait_url(url, context=None, timeout=None):
    deadline = time.monotonic() + (timeout or T(20))
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as r:
                return r.status, json.loads(r.read())
        except Exception as e:  # not up yet
            last = e
            time.sleep(0.1)
    raise AssertionError("no answer from %s: %s" % (url, last))


def get_json(url, token, context=None):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=5, context=context) as r:
        return r.status, json.loads(r.read())


class ListenTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="isolisten-")
        self.state = os.path.join(self.tmp, "state")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            stop(p)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, args, state=None):
        p = run_daemon(args, state or self.state)
        self.procs.append(p)
        return p

    def test_tls(self):
        if not shutil.which("openssl"):
            self.skipTest("openssl not installed")
        cert = os.path.join(self.tmp, "cert.pem")
        key = os.path.join(self.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=isostack-test", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        port = free_port()
        p = self.start(["--listen", "127.0.0.1:%d" % port, "--tls-cert", cert, "--tls-key", key])
        ctx = ssl.create_default_context(cafile=cert)
        status, body = wait_url("https://127.0.0.1:%d/v1/healthz" % port, context=ctx)
        self.assertEqual((status, body["status"], body["role"], body["leader"]),
                         (200, "ok", "leader", "https://127.0.0.1:%d" % port))
        token = read(os.path.join(self.state, "admin.token"))
        status, who = get_json("https://127.0.0.1:%d/v1/whoami" % port, token, context=ctx)
        self.assertEqual(who["role"], "cluster-admin")
        # A client that does not trust the certificate is refused by TLS itself.
        with self.assertRaises(Exception):
            urllib.request.urlopen("https://127.0.0.1:%d/v1/healthz" % port, timeout=3)
        # Plain HTTP to the TLS port gets no API answer.
        with self.assertRaises(Exception):
            urllib.request.urlopen("http://127.0.0.1:%d/v1/healthz" % port, timeout=3)
        self.assertIsNone(p.poll())

    def test_tls_needs_both_files(self):
        p = self.start(["--listen", "127.0.0.1:%d" % free_port(), "--tls-cert",
                        os.path.join(self.tmp, "cert.pem")])
        p.wait(T(20))
        out, err = stop(p)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("tls: give both a certificate and a key", err)

    def test_plain_http_is_loopback_only(self):
        p = self.start(["--listen", "0.0.0.0:%d" % free_port()])
        p.wait(T(20))
        out, err = stop(p)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("refusing plain HTTP on non-loopback address", err)
        self.assertIn("--allow-remote-http", err)
        # ... unless explicitly allowed.
        port = free_port()
        self.start(["--listen", "0.0.0.0:%d" % port, "--allow-remote-http"])
        status, _ = wait_url("http://127.0.0.1:%d/v1/healthz" % port)
        self.assertEqual(status, 200)

    def test_bad_listen(self):
        for listen in ("nonsense", "127.0.0.1:99999", "127.0.0.1:", ":80", "[::1:80"):
            p = self.start(["--listen", listen], state=os.path.join(self.tmp, "s-" + str(len(self.procs))))
            p.wait(T(20))
            out, err = stop(p)
            self.assertNotEqual(p.returncode, 0, listen)
            self.assertIn("listen", err, listen)

    def test_one_daemon_per_state_dir_and_token_file(self):
        port = free_port()
        p1 = self.start(["--listen", "127.0.0.1:%d" % port])
        wait_url("http://127.0.0.1:%d/v1/healthz" % port)
        p2 = self.start(["--listen", "127.0.0.1:%d" % free_port()])
        p2.wait(T(20))
        _, err2 = stop(p2)
        self.assertNotEqual(p2.returncode, 0)
        self.assertIn("another isostackd is already using", err2)

        path = os.path.join(self.state, "admin.token")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.state, "state.db")).st_mode) & 0o077, 0)
        token = read(path)
        self.assertRegex(token, harness.TOKEN_RE)
        out, err = stop(p1)
        secret = token.split("_", 2)[2]
        self.assertNotIn(secret, out + err, "the admin token leaked into the daemon's output")

        # Restart: same token, no new file. --new-admin-token: a new one, old one still valid.
        port = free_port()
        p3 = self.start(["--listen", "127.0.0.1:%d" % port])
        wait_url("http://127.0.0.1:%d/v1/healthz" % port)
        self.assertEqual(read(path), token)
        stop(p3)
        port = free_port()
        self.start(["--listen", "127.0.0.1:%d" % port, "--new-admin-token"])
        wait_url("http://127.0.0.1:%d/v1/healthz" % port)
        new = read(path)
        self.assertNotEqual(new, token)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        for t in (token, new):
            status, who = get_json("http://127.0.0.1:%d/v1/whoami" % port, t)
            self.assertEqual(who["role"], "cluster-admin")


if __name__ == "__main__":
    harness.main()

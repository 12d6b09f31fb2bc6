#!/usr/bin/env python3
"""test_bad_input.py: every input from outside, malformed. Request bodies
(syntax, type, unknown and out-of-range fields, size), query parameters,
names, paths, methods, raw garbage on the socket; and bad inventory files at
start-up. Each must get a clear error naming the field (file and line for
files), and none may leave partial state behind or take the daemon down.

Run: python3 tests/api/test_bad_input.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, T, uniq  # noqa: E402

CONFIG = "small.yaml"


class TestBadRequests(harness.SharedDaemonCase):
    config = CONFIG

    @classmethod
    def set_up_world(cls):
        r = cls.admin.post("/v1/tenants", {"name": "badin", "description": "d"})
        assert r.status == 201, r
        r = cls.admin.post("/v1/allocations", {"tenant": "badin", "gpus": {"count": 1, "profile": "1g.10gb"}})
        assert r.status == 201, r
        cls.alloc = r.body
        r = cls.admin.post("/v1/tokens", {"role": "tenant-user", "tenant": "badin", "user": "u"})
        assert r.status == 201, r
        cls.tok = r.body

    def snapshot(self):
        return (self.admin.list_all("/v1/tenants"), self.admin.list_all("/v1/tokens"),
                self.admin.list_all("/v1/allocations"), self.admin.list_all("/v1/nodes"),
                self.admin.get("/v1/capacity").body, self.admin.get("/v1/gpus").body)

    def setUp(self):
        self.before = self.snapshot()

    def tearDown(self):
        # the daemon is alive and nothing changed
        r = self.d.request("GET", "/v1/healthz")
        self.assertStatus(r, 200, "daemon unhealthy after bad input")
        self.assertEqual(self.snapshot(), self.before, "bad input changed state")
        self.d.check_sanitizers()

    def bad(self, method, path, body=None, raw=None, status=400, code="invalid_argument",
            field=Ellipsis, token="admin", headers=None):
        tok = self.d.admin_token if token == "admin" else token
        r = self.d.request(method, path, body=body, raw=raw, token=tok,
                                 headers=headers)
        self.assertError(r, status, code, field,
                         msg="%s %s %s" % (method, path, (raw if raw is not None else body)))
        return r

    # ---------------------------------------------------------- syntax

    def test_malformed_json(self):
        for raw in ('{"name":', "{name: 1}", "{'name': 'x'}", '{"name": "x",}', '{"name": "x"} x',
                    "\x00\x01", '{"name": "\\ud800"}', '{"name": "x"', "[", "nul"):
            with self.subTest(raw=raw):
                self.bad("POST", "/v1/tenants", raw=raw)

    def test_duplicate_keys(self):
        # strict parsing: an object naming a key twice is ambiguous, not "last wins"
        self.bad("POST", "/v1/tenants", raw='{"name":"dupkey-a","name":"dupkey-b"}')

    def test_invalid_utf8(self):
        self.bad("POST", "/v1/tenants", raw=b'{"name": "\xff\xfe"}')

    def test_empty_body(self):
        for path in ("/v1/tenants", "/v1/tokens", "/v1/allocations"):
            with self.subTest(path=path):
                self.bad("POST", path, raw=b"")

    def test_not_an_object(self):
        for raw in ("[]", '["name"]', '"x"', "42", "null", "true"):
            for path in ("/v1/tenants", "/v1/tokens", "/v1/allocations"):
                with self.subTest(raw=raw, path=path):
                    self.bad("POST", path, raw=raw)
            with self.subTest(raw=raw, path="PATCH allocation"):
                self.bad("PATCH", "/v1/allocations/" + self.alloc["id"], raw=raw)

    # ---------------------------------------------------------- types

    def test_wrong_types(self):
        cases = [
            ("/v1/tenants", {"name": 5}, "name"),
            ("/v1/tenants", {"name": None}, "name"),
            ("/v1/tenants", {"name": "ok-name", "description": 5}, "description"),
            ("/v1/tenants", {"name": "ok-name", "description": ["x"]}, "description"),
            ("/v1/tokens", {"role": 1}, "role"),
            ("/v1/tokens", {"role": "auditor", "user": 7}, "user"),
            ("/v1/tokens", {"role": "auditor", "expires_in_s": "60"}, "expires_in_s"),
            ("/v1/tokens", {"role": "auditor", "expires_in_s": 1.5}, "expires_in_s"),
            ("/v1/tokens", {"role": "tenant-user", "tenant": ["badin"]}, "tenant"),
            ("/v1/allocations", {"tenant": "badin", "members": True}, "members"),
            ("/v1/allocations", {"tenant": "badin", "members": "2"}, "members"),
            ("/v1/allocations", {"tenant": "badin", "members": 1.5}, "members"),
            ("/v1/allocations", {"tenant": "badin", "gpus": {"count": "1", "profile": "1g.10gb"}}, "gpus.count"),
            ("/v1/allocations", {"tenant": "badin", "gpus": {"count": 1, "whole": "yes"}}, "gpus.whole"),
            ("/v1/allocations", {"tenant": "badin", "gpus": {"count": 1, "profile": 3}}, "gpus.profile"),
            ("/v1/allocations", {"tenant": "badin", "gpus": "1g.10gb"}, "gpus"),
            ("/v1/allocations", {"tenant": "badin", "gpus": [1]}, "gpus"),
            ("/v1/allocations", {"tenant": "badin", "cpus": "8"}, "cpus"),
            ("/v1/allocations", {"tenant": "badin", "memory_mib": False}, "memory_mib"),
            ("/v1/allocations", {"tenant": "badin", "pool": 1}, "pool"),
            ("/v1/allocations", {"tenant": "badin", "name": {}}, "name"),
            ("/v1/allocations", {"tenant": 1}, "tenant"),
        ]
        for path, body, field in cases:
            with self.subTest(body=body):
                self.bad("POST", path, body, field=field)
        for body, field in (({"members": "2"}, "members"), ({"members": True}, "members"),
                            ({"members": None}, "members")):
            with self.subTest(patch=body):
                self.bad("PATCH", "/v1/allocations/" + self.alloc["id"], body, field=field)
        self.bad("PATCH", "/v1/tenants/badin", {"description": 1}, field="description")

    def test_unknown_fields(self):
        cases = [
            ("POST", "/v1/tenants", {"name": uniq("unk"), "bogus": 1}, "bogus"),
            ("POST", "/v1/tokens", {"role": "auditor", "scope": "all"}, "scope"),
            ("POST", "/v1/allocations", {"tenant": "badin", "gpus": {"count": 1, "profile": "1g.10gb"},
                                         "urgency": 9}, "urgency"),
            ("POST", "/v1/allocations", {"tenant": "badin",
                                         "gpus": {"count": 1, "profile": "1g.10gb", "colour": "red"}},
             "gpus.colour"),
            ("PATCH", "/v1/allocations/" + self.alloc["id"], {"members": 2, "cpus": 4}, "cpus"),
            ("PATCH", "/v1/tenants/badin", {"description": "x", "name": "renamed"}, "name"),
        ]
        for method, path, body, field in cases:
            with self.subTest(body=body):
                self.bad(method, path, body, field=field)

    def test_out_of_range(self):
        g = {"count": 1, "profile": "1g.10gb"}
        cases = [
            ({"tenant": "badin", "members": 0, "gpus": g}, "members"),
            ({"tenant": "badin", "members": 1025, "gpus": g}, "members"),
            ({"tenant": "badin", "members": -1, "gpus": g}, "members"),
            ({"tenant": "badin", "members": 2 ** 31, "gpus": g}, "members"),
            ({"tenant": "badin", "gpus": {"count": 0, "profile": "1g.10gb"}}, "gpus.count"),
            ({"tenant": "badin", "gpus": {"count": 65, "whole": True}}, "gpus.count"),
            ({"tenant": "badin", "gpus": {"count": -1, "whole": True}}, "gpus.count"),
            ({"tenant": "badin", "cpus": -1}, "cpus"),
            ({"tenant": "badin", "memory_mib": -1}, "memory_mib"),
            ({"tenant": "badin", "gpus": {"count": 1, "profile": "9g.99gb"}}, "gpus.profile"),
            ({"tenant": "badin", "gpus": {"count": 1, "profile": "3g.20gb"}}, "gpus.profile"),  # A100-40 only
            ({"tenant": "badin", "gpus": {"count": 1, "profile": ""}}, "gpus.profile"),
        ]
        for body, field in cases:
            with self.subTest(body=body):
                self.bad("POST", "/v1/allocations", body, field=field)
        for body in ({"tenant": "badin", "gpus": {"count": 1, "profile": "1g.10gb", "whole": True}},
                     {"tenant": "badin", "gpus": {"count": 1}},
                     {"tenant": "badin", "gpus": {"count": 1, "whole": False}}):
            with self.subTest(body=body):
                self.bad("POST", "/v1/allocations", body,
                         field=lambda f: f is not None and f.startswith("gpus"))
        for body in ({"members": 0}, {"members": 1025}, {"members": -3}, {}):
            with self.subTest(patch=body):
                self.bad("PATCH", "/v1/allocations/" + self.alloc["id"], body, field="members")
        for body, field in (({"role": "root"}, "role"), ({"role": ""}, "role"), ({}, "role"),
                            ({"role": "auditor", "expires_in_s": -5}, "expires_in_s")):
            with self.subTest(token=body):
                self.bad("POST", "/v1/tokens", body, field=field)
        self.bad("POST", "/v1/tenants", {"name": "ok", "description": "x" * 300}, field="description")
        self.bad("POST", "/v1/tenants", {}, field="name")
        huge = self.d.request("POST", "/v1/allocations", token=self.d.admin_token,
                                    raw='{"tenant":"badin","members":99999999999999999999999}')
        self.assertError(huge, 400, "invalid_argument", lambda f: f in (None, "members"))
        bad_name = self.admin.post("/v1/tokens", {"role": "tenant-user", "tenant": "Not_A_Name"})
        self.assertIn(bad_name.status, (400, 404), repr(bad_name))
        self.assertEqual(bad_name.body["error"]["field"], "tenant")

    def test_bad_tenant_names(self):
        for name in ("", "A", "Upper", "-lead", ".lead", "_lead", "x" * 64, "has space", "tab\t",
                     "sl/ash", "../etc", "dots..ok?", "ünï", "new\nline", "semi;colon"):
            with self.subTest(name=name):
                self.bad("POST", "/v1/tenants", {"name": name}, field="name")
        # a NUL may already be refused by the JSON parser (then no field is at fault)
        self.bad("POST", "/v1/tenants", {"name": "a\u0000b"}, field=lambda f: f in (None, "name"))

    def test_good_edge_names_then_cleanup(self):
        # the contract's edges are accepted (and removed again, leaving no trace)
        for name in ("a" * 63, "0", "a.b_c-d", "9z"):
            with self.subTest(name=name):
                r = self.admin.post("/v1/tenants", {"name": name})
                self.assertStatus(r, 201)
                self.assertStatus(self.admin.delete("/v1/tenants/" + name), 204)

    # ---------------------------------------------------------- size

    def test_oversized_body(self):
        big = {"name": "big", "description": "x" * (70 * 1024)}
        r = self.bad("POST", "/v1/tenants", big, status=413, code="payload_too_large")
        self.assertIsNone(r.body["error"]["field"])
        self.bad("POST", "/v1/allocations", raw=b'{"tenant":"badin","name":"' + b"y" * (1 << 20) + b'"}',
                 status=413, code="payload_too_large")
        self.assertError(self.admin.get("/v1/tenants/big"), 404, "not_found")

    def test_oversized_body_refused_while_streaming(self):
        # Content-Length says 10 MB; after 128 KiB the server must answer 413
        # without waiting for (or buffering) the rest.
        s = socket.create_connection(("127.0.0.1", self.d.port), timeout=T(10))
        try:
            s.sendall(("POST /v1/tenants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                       "Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n"
                       % self.d.admin_token).encode())
            try:
                s.sendall(b'{"name":"' + b"z" * (128 * 1024))
            except OSError:
                pass  # the server may close as soon as it has answered
            data = _recv_some(s, 8)  # a server that refuses answers in milliseconds
        finally:
            s.close()
        self.assertRegex(data.split(b"\r\n", 1)[0].decode("latin-1"), r"^HTTP/1\.[01] 413 ",
                         "no 413 before the whole announced body arrived")

    def test_body_just_under_limit_is_parsed(self):
        # 60 KiB of valid JSON is read (and refused for its content, not its size)
        body = {"name": "under", "description": "x" * (60 * 1024)}
        self.bad("POST", "/v1/tenants", body, field="description")

    # ---------------------------------------------------------- query parameters

    def test_bad_query_params(self):
        for q, field in (("limit=0", "limit"), ("limit=1001", "limit"), ("limit=abc", "limit"),
                         ("limit=-1", "limit"), ("limit=", "limit"), ("limit=1.5", "limit"),
                         ("limit=99999999999999999999", "limit")):
            for path in ("/v1/tenants", "/v1/allocations", "/v1/tokens", "/v1/nodes"):
                with self.subTest(path=path, q=q):
                    self.bad("GET", path + "?" + q, field=field)
        for q in ("state=bogus", "state=", "state=ACTIVE"):
            with self.subTest(q=q):
                self.bad("GET", "/v1/allocations?" + q, field="state")
        with self.subTest(q="unknown parameter"):
            self.bad("GET", "/v1/allocations?colour=red", field="colour")
        with self.subTest(q="tenant=Bad Name"):
            self.bad("GET", "/v1/allocations?tenant=Bad%20Name", field="tenant")

    # ---------------------------------------------------------- paths, methods

    def test_unknown_paths(self):
        for path in ("/", "/v1", "/v1/", "/v2/tenants", "/v1/nope", "/v1/tenants/badin/extra",
                     "/v1/allocations/" + self.alloc["id"] + "/x", "/v1/nodes/sm-n01/reboot",
                     "/v1/healthz/x", "/V1/tenants",
                     "/v1/tenants/" + "x" * 5000):
            with self.subTest(path=path[:80]):
                r = self.d.request("GET", path, token=self.d.admin_token)
                self.assertIn(r.status, (404, 414, 400), repr(r))
                if r.status == 404:
                    self.assertError(r, 404, "not_found")

    def test_wrong_methods(self):
        cases = [("DELETE", "/v1/tenants"), ("PUT", "/v1/tenants/badin"), ("POST", "/v1/healthz"),
                 ("POST", "/v1/tenants/badin"), ("PUT", "/v1/allocations"),
                 ("POST", "/v1/allocations/" + self.alloc["id"]), ("GET", "/v1/nodes/sm-n01/cordon"),
                 ("DELETE", "/v1/nodes/sm-n01"), ("PATCH", "/v1/tokens/" + self.tok["id"]),
                 ("DELETE", "/v1/capacity"), ("POST", "/v1/gpus"), ("PUT", "/v1/version"),
                 ("DELETE", "/v1/whoami")]
        for method, path in cases:
            with self.subTest(method=method, path=path):
                self.bad(method, path, status=405, code="method_not_allowed", field=None)

    # ---------------------------------------------------------- raw socket

    def test_garbage_on_the_socket(self):
        for payload in (b"GARBAGE\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64),
                        b"GET /v1/healthz HTTP/1.1\r\n" + b"X-Long: " + b"a" * 100000 + b"\r\n\r\n",
                        b"POST /v1/tenants HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"na"):
            with self.subTest(payload=payload[:30]):
                s = socket.create_connection(("127.0.0.1", self.d.port), timeout=T(10))
                try:
                    s.sendall(payload)
                    s.shutdown(socket.SHUT_WR)
                    _recv_some(s, 2)  # an answer is welcome, not required: the daemon must live
                except OSError:
                    pass
                finally:
                    s.close()
                self.assertStatus(self.d.request("GET", "/v1/healthz"), 200)

    def test_idle_half_request_does_not_block_others(self):
        s = socket.create_connection(("127.0.0.1", self.d.port), timeout=T(10))
        try:
            s.sendall(b"POST /v1/tenants HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
            t0 = time.monotonic()
            r = self.admin.get("/v1/version", timeout=T(10))
            self.assertStatus(r, 200)
            self.assertLess(time.monotonic() - t0, T(5), "one slow client stalls the server")
        finally:
            s.close()


def _recv_some(s, timeout):
    s.settimeout(timeout)
    chunks = []
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
            if b"\r\n\r\n" in b"".join(chunks):
                break
    except OSError:
        pass
    return b"".join(chunks)


# ---------------------------------------------------------- inventory files


class TestBadInventory(ApiTestCase):
    """isostackd refuses a bad cluster.yaml: exits non-zero, names file, line
    and key, and never listens."""

    def run_daemon(self, config):
        tmp = tempfile.mkdtemp(prefix="isoapi-badinv-")
        try:
            port = harness.free_port()
            cmd = [harness.Binaries.isostackd, "--config", config, "--state-dir",
                   os.path.join(tmp, "state"), "--listen", "127.0.0.1:%d" % port]
            os.makedirs(os.path.join(tmp, "state"))
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
            listened = False
            deadline = time.monotonic() + T(20)
            while p.poll() is None and time.monotonic() < deadline:
                if harness.port_accepts(port, 0.1):
                    listened = True
                time.sleep(0.02)
            if p.poll() is None:
                p.kill()
                out, err = p.communicate()
                self.fail("isostackd kept running on a bad inventory %s:\n%s" % (config, err.decode()[-3000:]))
            out, err = p.communicate()
            text = err.decode("utf-8", "replace") + out.decode("utf-8", "replace")
            for m in harness.SANITIZER_MARKERS:
                self.assertNotIn(m, text, "sanitizer report:\n" + text[-4000:])
            self.assertFalse(listened, "isostackd listened on a bad inventory")
            self.assertFalse(harness.port_accepts(port), "port still open")
            self.assertNotEqual(p.returncode, 0, "exit status 0 on a bad inventory:\n" + text)
            self.assertFalse(os.path.exists(os.path.join(tmp, "state", "admin.token")),
                             "a bad inventory still bootstrapped a token")
            return p.returncode, text
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @staticmethod
    def marked_line(fixture):
        """The 1-based line carrying the fixture's "# <- error" marker."""
        with open(harness.data_path(fixture)) as f:
            for i, line in enumerate(f, 1):
                if "# <- error" in line:
                    return i
        raise AssertionError("%s has no '# <- error' marker" % fixture)

    def expect_message(self, fixture, key, lines=None):
        path = harness.data_path(fixture)
        line = self.marked_line(fixture)
        rc, text = self.run_daemon(path)
        self.assertIn(fixture, text, "file not named:\n" + text)
        want = lines or (line,)
        self.assertRegex(text, r"%s:(%s)\b" % (re.escape(fixture), "|".join(str(n) for n in want)),
                         "line %s not named as FILE:LINE:\n%s" % (want, text))
        if key:
            self.assertIn(key, text, "key %r not named:\n%s" % (key, text))

    def test_unknown_key(self):
        self.expect_message("bad_unknown_key.yaml", "colour")

    def test_unknown_nested_key(self):
        self.expect_message("bad_unknown_nested_key.yaml", "mig_mode")

    def test_duplicate_guid(self):
        self.expect_message("bad_duplicate_guid.yaml", "guid")

    def test_duplicate_node(self):
        self.expect_message("bad_duplicate_node.yaml", "sm-n01")

    def test_duplicate_yaml_key(self):
        self.expect_message("bad_duplicate_key.yaml", "cpus")

    def test_syntax_error(self):
        # libfyaml may blame the offending line or the one it looked ahead to
        line = self.marked_line("bad_syntax.yaml")
        self.expect_message("bad_syntax.yaml", None, lines=(line, line + 1))

    def test_bad_value(self):
        self.expect_message("bad_value.yaml", "cpus")

    def test_unknown_gpu_model(self):
        self.expect_message("bad_gpu_model.yaml", "model")

    def test_missing_file(self):
        path = os.path.join(tempfile.gettempdir(), "isoapi-no-such-%s.yaml" % os.urandom(4).hex())
        rc, text = self.run_daemon(path)
        self.assertIn(os.path.basename(path), text)

    def test_empty_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            name = f.name
        try:
            rc, text = self.run_daemon(name)
            self.assertIn(os.path.basename(name), text)
        finally:
            os.unlink(name)


if __name__ == "__main__":
    harness.main()

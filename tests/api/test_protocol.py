#!/usr/bin/env python3
"""test_protocol.py: the HTTP edges, spoken on raw sockets where a client
library would tidy them up: query strings with hundreds of parameters or a
key given twice, ambiguous heads (two Authorization headers, Content-Length
with Transfer-Encoding, a NUL or control character in the path), the same 404
for trailing slashes and empty segments on every route, oversized heads
answered in our JSON error shape rather than libmicrohttpd's HTML, and slow
clients that must not take the API away from everyone else.

Run: python3 tests/api/test_protocol.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import T, check_error_shape  # noqa: E402

CONFIG = "small.yaml"


class Raw:
    """One answer read from a raw socket: status, headers (lower-case names), body."""

    def __init__(self, data):
        self.data = data
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
        self.headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.raw = body
        self.is_json = False
        self.body = body
        try:
            self.body = json.loads(body.decode("utf-8"))
            self.is_json = True
        except (UnicodeDecodeError, ValueError):
            pass

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return "Raw(%d %r)" % (self.status, self.data[:300])


def raw_request(port, payload, timeout=None, source="127.0.0.1"):
    """Sends payload bytes on a fresh connection and reads until the server
    closes or one whole response (by Content-Length) is in."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout or T(10))
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(payload)
        data = b""
        while True:
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                cl = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                if cl and len(body) >= int(cl[0].split(b":")[1]):
                    break
            b = s.recv(65536)
            if not b:
                break
            data += b
        return Raw(data)
    finally:
        s.close()


def req(method, target, headers=(), body=b"", host=True):
    lines = ["%s %s HTTP/1.1" % (method, target)]
    if host:
        lines.append("Host: 127.0.0.1")
    lines += ["%s: %s" % h for h in headers]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class TestProtocolEdges(harness.SharedDaemonCase):
    config = CONFIG

    def tearDown(self):
        self.assertEqual(self.d.request("GET", "/v1/healthz").status, 200)
        self.d.check_sanitizers()

    def raw(self, payload, **kw):
        return raw_request(self.d.port, payload, **kw)

    def auth(self):
        return ("Authorization", "Bearer " + self.d.admin_token)

    def assertRawError(self, r, status, code, field=Ellipsis):
        self.assertEqual(r.status, status, repr(r))
        check_error_shape(self, r)
        self.assertEqual(r.body["error"]["code"], code, repr(r))
        if field is not Ellipsis:
            self.assertEqual(r.body["error"]["field"], field, repr(r))

    # ---------------------------------------------------------- query strings

    def test_many_query_parameters_get_a_prompt_json_error(self):
        for n in (33, 500, 2000):
            with self.subTest(n=n):
                q = "&".join("p%d=%d" % (i, i) for i in range(n))
                r = self.raw(req("GET", "/v1/tenants?" + q, [self.auth()]), timeout=T(5))
                if len(q) > 8192:
                    self.assertRawError(r, 414, "uri_too_long", "path")
                else:
                    self.assertRawError(r, 400, "invalid_argument", "query")

    def test_query_at_the_parameter_limit_is_parsed(self):
        # 32 parameters are parsed (and refused for the first unknown name, not their number)
        q = "limit=5&" + "&".join("p%d=1" % i for i in range(31))
        r = self.admin.get("/v1/tenants?" + q)
        self.assertError(r, 400, "invalid_argument", "p0")

    def test_repeated_query_key_is_refused(self):
        for path in ("/v1/tenants?limit=1&limit=2", "/v1/allocations?state=active&state=active",
                     "/v1/tenants?limit=1&after=a&limit=1"):
            with self.subTest(path=path):
                r = self.admin.get(path)
                key = path.split("?")[1].split("&")[0].split("=")[0]
                self.assertError(r, 400, "invalid_argument", key)
                self.assertIn("more than once", r.body["error"]["message"])

    def test_query_values_are_decoded(self):
        r = self.admin.get("/v1/tenants?lim%69t=%32")
        self.assertStatus(r, 200)
        r = self.admin.get("/v1/tenants?limit=1%00")
        self.assertError(r, 400, "invalid_argument", "query")

    def test_uri_too_long_is_json(self):
        r = self.raw(req("GET", "/v1/tenants?limit=1&x=" + "a" * 9000, [self.auth()]))
        self.assertRawError(r, 414, "uri_too_long", "path")

    # ---------------------------------------------------------- ambiguous heads

    def test_two_authorization_headers(self):
        r = self.raw(req("GET", "/v1/whoami", [self.auth(), ("Authorization", "Bearer x")]))
        self.assertRawError(r, 400, "invalid_argument", "Authorization")
        r = self.raw(req("GET", "/v1/whoami", [self.auth(), self.auth()]))
        self.assertRawError(r, 400, "invalid_argument", "Authorization")

    def test_content_length_with_transfer_encoding(self):
        body = b'{"name":"te-cl"}'
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        r = self.raw(req("POST", "/v1/tenants", [self.auth(), ("Content-Type", "application/json"),
                                                 ("Content-Length", str(len(chunked))),
                                                 ("Transfer-Encoding", "chunked")], chunked))
        self.assertRawError(r, 400, "invalid_argument", "Transfer-Encoding")
        self.assertEqual(self.admin.get("/v1/tenants/te-cl").status, 404)

    def test_chunked_alone_is_accepted(self):
        body = b'{"name":"chunky"}'
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        r = self.raw(req("POST", "/v1/tenants", [self.auth(), ("Content-Type", "application/json"),
                                                 ("Transfer-Encoding", "chunked")], chunked))
        self.assertEqual(r.status, 201, repr(r))
        self.assertStatus(self.admin.delete("/v1/tenants/chunky"), 204)

    def test_nul_and_control_characters_in_the_path(self):
        for target in ("/v1/healthz%00", "/v1/healthz%00/x", "/v1/tenants/a%00b",
                       "/v1/tenants/a%0Aevent=tenant_deleted", "/v1/tenants/a%0d", "/v1/tenants/a%7f",
                       "/v1/tenants/a%1b[31m", "/v1/healthz%zz", "/v1/healthz%4"):
            with self.subTest(target=target):
                r = self.raw(req("GET", target, [self.auth()]))
                self.assertRawError(r, 400, "invalid_argument", "path")
        log = self.d.stderr_text()
        self.assertNotIn("\nevent=tenant_deleted", log)

    # ---------------------------------------------------------- one 404 for odd paths

    def test_trailing_slashes_and_empty_segments_404_everywhere(self):
        server_routes = [
            ("GET", "/v1/healthz"), ("GET", "/v1/version"), ("GET", "/v1/tenants"),
            ("GET", "/v1/tenants/x"), ("GET", "/v1/tenants/x/projects"), ("GET", "/v1/orgs/x/quota"),
            ("GET", "/v1/tenants/x/projects/y/quota"), ("GET", "/v1/allocations"), ("GET", "/v1/nodes/n"),
            ("POST", "/v1/nodes/n/cordon"), ("POST", "/v1/nodes/n/gpus/0/fault"), ("GET", "/v1/fabric/verify"),
            ("GET", "/v1/audit/proof/inclusion"), ("GET", "/v1/queue"), ("DELETE", "/v1/tokens/t")]
        for method, path in server_routes:
            segs = path.split("/")
            variants = [path + "/", path + "//", "/" + path, path.replace("/v1/", "/v1//", 1)]
            variants += ["/".join(segs[:i] + [""] + segs[i:]) for i in range(2, len(segs))]
            for v in variants:
                for q in ("", "?limit=1", "?"):
                    with self.subTest(method=method, target=v + q):
                        r = self.d.request(method, v + q, token=self.d.admin_token)
                        self.assertError(r, 404, "not_found", None)
                        self.assertEqual(r.body["error"]["message"], "no such path")

    # ---------------------------------------------------------- libmicrohttpd's own limits

    def test_big_head_is_json(self):
        # many header lines, and one long header: over our limits, far under libmicrohttpd's
        r = self.raw(req("GET", "/v1/healthz", [("X-H%d" % i, "v") for i in range(200)]))
        self.assertRawError(r, 431, "header_fields_too_large", "headers")
        r = self.raw(req("GET", "/v1/healthz", [("X-Long", "a" * 40000)]))
        self.assertRawError(r, 431, "header_fields_too_large", "headers")

    def test_body_too_large_is_json(self):
        r = self.raw(req("POST", "/v1/tenants", [self.auth(), ("Content-Length", str(64 << 20))]))
        self.assertRawError(r, 413, "payload_too_large")

    def test_anonymous_upload_refused_before_its_body(self):
        # The head says 60 KiB are coming; the 401 comes without them.
        r = self.raw(req("POST", "/v1/tenants", [("Content-Length", str(60 * 1024)),
                                                 ("Content-Type", "application/json")]), timeout=T(5))
        self.assertRawError(r, 401, "unauthorized")


def slow_conn(port, source):
    """A connection that has sent part of a head and waits."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n")
    return s


def closed_by_server(s, wait):
    """True when the server closed s within `wait` seconds (EOF or reset),
    False when it is still open then."""
    s.settimeout(wait)
    try:
        return s.recv(4096) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


class TestSlowClients(harness.SharedDaemonCase):
    """Connection policy with small limits: 24 connections, 8 of them out of
    reach of clients still sending their head, 6 per address, and a head
    deadline long enough (30 s) not to interfere here."""

    config = CONFIG
    daemon_args = ("--max-connections", "24", "--connection-reserve", "8",
                   "--max-connections-per-address", "6", "--header-timeout", "30")

    def setUp(self):
        self.socks = []

    def tearDown(self):
        for s in self.socks:
            s.close()
        self.d.check_sanitizers()

    def test_per_address_limit(self):
        for _ in range(10):
            self.socks.append(slow_conn(self.d.port, "127.0.0.2"))
        closed = [closed_by_server(s, T(1)) for s in self.socks]
        self.assertEqual(closed, [False] * 6 + [True] * 4)
        self.assertEqual(self.d.request("GET", "/v1/healthz").status, 200)
        self.assertIn("event=http_conn_limit_address", self.d.stderr_text())

    def test_waiting_clients_leave_the_reserve(self):
        # 30 slow clients from 5 addresses: beyond 16 waiting, the oldest go
        for i in range(30):
            self.socks.append(slow_conn(self.d.port, "127.0.0.%d" % (10 + i % 5)))
        for _ in range(5):
            self.assertEqual(self.d.request("GET", "/v1/healthz").status, 200)
            r = self.d.request("GET", "/v1/whoami", token=self.d.admin_token)
            self.assertEqual(r.status, 200, repr(r))
        open_now = [s for s in self.socks if not closed_by_server(s, 0.05)]
        self.assertLessEqual(len(open_now), 16)
        self.assertIn(self.socks[-1], open_now)  # the newest stay, the oldest went
        self.assertIn("event=http_conn_reserve", self.d.stderr_text())


class TestHeadDeadline(harness.SharedDaemonCase):
    """A 1 s deadline for the request head, however slowly it trickles."""

    config = CONFIG
    daemon_args = ("--header-timeout", "1")

    def test_trickling_head_is_cut(self):
        s = slow_conn(self.d.port, "127.0.0.1")
        try:
            cut = False
            deadline = time.monotonic() + T(20)
            while time.monotonic() < deadline and not cut:
                try:
                    s.sendall(b"X")  # one byte of a header name, every 0.2 s
                except OSError:
                    cut = True
                    break
                cut = closed_by_server(s, 0.2)
            self.assertTrue(cut, "a head trickling a byte every 0.2 s was never cut")
        finally:
            s.close()
        self.assertIn("event=http_header_timeout", self.d.stderr_text())
        self.assertEqual(self.d.request("GET", "/v1/healthz").status, 200)

    def test_idle_kept_alive_connection_is_closed(self):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=T(10))
        try:
            c.request("GET", "/v1/healthz")
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            r.read()
            self.assertTrue(closed_by_server(c.sock, T(15)))
        finally:
            c.close()


class TestVerifyOffThread(harness.SharedDaemonCase):
    """GET /v1/fabric/verify reads the fabric on the worker thread, off the
    daemon's one loop (docs/architecture.md): the sim driver is made to take
    3 s (x the sanitizer scale) per read, and other requests, a change
    included, are answered by the loop while it reads (run on the loop, the
    read would hold them all). A second verify meanwhile is refused (503)."""

    config = CONFIG

    @classmethod
    def setUpClass(cls):
        cls.delay = T(3)  # scaled once the binaries (ASan or not) are known
        cls.daemon_env = {"ISO_TEST_SIM_FABRIC_READ_MS": str(int(cls.delay * 1000))}
        super().setUpClass()

    def test_other_requests_are_served_while_verify_reads(self):
        result = {}

        def verify(name):
            result[name] = self.admin.get("/v1/fabric/verify", timeout=T(60))

        # Two verifies at once: whichever comes second is refused at once (503)
        # while the first reads; meanwhile the server answers everything else.
        threads = {n: threading.Thread(target=verify, args=(n,)) for n in ("a", "b")}
        threads["a"].start()
        time.sleep(0.1)
        threads["b"].start()
        try:
            deadline = time.monotonic() + self.delay / 2
            while time.monotonic() < deadline and all(t.is_alive() for t in threads.values()):
                time.sleep(0.02)
            done = [n for n, t in threads.items() if not t.is_alive()]
            self.assertEqual(len(done), 1, "neither verify was refused while the other read")
            reading = threads["b" if done == ["a"] else "a"]
            refused = result[done[0]]
            self.assertError(refused, 503, "unavailable", None)
            self.assertIn("try again", refused.body["error"]["message"])
            self.assertEqual(self.d.request("GET", "/v1/healthz").status, 200)
            self.assertStatus(self.admin.get("/v1/tenants"), 200)
            self.assertStatus(self.admin.post("/v1/tenants", {"name": "while-verify"}), 201)
            self.assertTrue(reading.is_alive(), "the verify ended before the other requests: "
                            "they were not served while it read")
        finally:
            for t in threads.values():
                t.join(T(60))
        r = result["b" if done == ["a"] else "a"]
        self.assertStatus(r, 200)
        self.assertTrue(r.body["ok"], repr(r))
        self.assertGreaterEqual(r.body["elapsed_ms"], 1000)
        # the slot is free again, and the verify was audited
        self.assertStatus(self.admin.get("/v1/fabric/verify", timeout=T(60)), 200)
        ev = self.admin.get("/v1/audit/events?limit=1000").body["items"]
        self.assertEqual(sum(1 for e in ev if e["event"]["action"] == "fabric.verify"), 2)


if __name__ == "__main__":
    harness.main()

"""test_abuse_audit.py: what an anonymous client or a local user can do to
the daemon's logs and state dir, and must not (issue 12, sections 3 and 5):

- anonymous failures are counted per (source, outcome, action) and interval,
  not written as one signed event each, and nothing counted is lost at a
  clean stop;
- client-chosen text (request ids, path segments, messages quoting a body)
  reaches a stored event bounded and escaped;
- a %0A, %0D or %1B in a URL path never forges a line in the daemon's log;
- a state dir others can write, files in it the daemon's user does not own,
  and planted symbolic links are refused at start with the path and the fix.
"""

import os
import re
import shutil
import socket
import sqlite3
import stat
import subprocess
import tempfile
import time
import unittest

import harness
from harness import ApiTestCase, Binaries, Daemon, T, data_path, issue_token, create_tenant

CONFIG = "small.yaml"
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=(debug|info|warn|error) event=\S+")
SAFE_TEXT = re.compile(r"^[\x20-\x7e\u00a0-\uffff]*$")


def raw_request(port, method, path, headers=(), source="127.0.0.1"):
    """One request written by hand (so the path goes out byte for byte),
    optionally from another loopback address. Returns the status."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(T(10))
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1", "Connection: close",
                 "Content-Length: 0"] + list(headers)
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return int(data.split(b" ", 2)[1])
    finally:
        s.close()


def parse_logfmt(tc, line):
    """`TS k=v k="v with \\" escapes" ...` into [(k, v)]; fails the test on
    anything else, so a value can never have opened a field of its own."""
    m = re.match(r"^(\S+) ", line)
    tc.assertIsNotNone(m, line)
    i, out = m.end(), []
    while i < len(line):
        m = re.compile(r'([A-Za-z0-9_.]+)=("((?:[^"\\]|\\.)*)"|[^ "]*)( |$)').match(line, i)
        tc.assertIsNotNone(m, "not key=value at %d: %r" % (i, line))
        out.append((m.group(1), m.group(3) if m.group(3) is not None else m.group(2)))
        i = m.end()
    return out


def events_of(client):
    return [it["event"] for it in client.list_all("/v1/audit/events")]


def anonymous(events, action=None):
    return [e for e in events if e["actor"]["role"] == "anonymous"
            and (action is None or e["action"] == action)]


def stored_events(state_dir):
    """The events as stored, read straight from the store (no API read, which
    would end the counting interval early)."""
    import json
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(state_dir, "state.db"), uri=True,
                         timeout=T(10))
    try:
        return [json.loads(bytes(b).decode()) for (b,) in
                db.execute("SELECT body FROM audit_events ORDER BY seq")]
    finally:
        db.close()


# ---------------------------------------------------------------- failures counted


class TestAnonymousFailuresCounted(ApiTestCase):
    def setUp(self):
        self.d = Daemon(CONFIG)
        self.d.start()
        self.admin = self.d.client()

    def tearDown(self):
        try:
            if self.d.alive():
                self.d.stop()
        finally:
            self.d.cleanup()

    def test_a_flood_of_401s_is_a_few_events_with_the_count(self):
        before = len(events_of(self.admin))
        n = 300
        for i in range(n):
            h = ["X-Request-Id: flood-%d" % i]
            if i % 3 == 0:
                raw_request(self.d.port, "GET", "/v1/whoami", h)
            elif i % 3 == 1:
                raw_request(self.d.port, "DELETE", "/v1/tenants/victim-%d" % i, h)
            else:
                raw_request(self.d.port, "GET", "/v1/nodes", h + ["Authorization: Bearer iso_x"])
        items = events_of(self.admin)
        # Reading flushed the counts: one event per (source, outcome, action),
        # and the only others are this test's own two reads.
        new = items[before:]
        anon = anonymous(new)
        self.assertEqual(sorted(e["action"] for e in anon),
                         ["node.list", "tenant.delete", "whoami"], anon)
        self.assertLessEqual(len(new), len(anon) + 2, new)
        self.assertEqual(sum(e["details"]["count"] for e in anon), n)
        for e in anon:
            d = e["details"]
            self.assertEqual(d["count"], n // 3, e)
            self.assertEqual(e["outcome"], "denied")
            self.assertEqual(e["source"], "127.0.0.1")
            self.assertEqual(e["request_id"], "")
            self.assertLessEqual(d["first"], d["last"])
            self.assertLessEqual(d["last"], e["time"])
            self.assertEqual(d["interval_ms"], 10000)
            self.assertFalse(d["overflow"])
            self.assertTrue(1 <= len(d["request_ids"]) <= 4, d)
            self.assertTrue(all(r.startswith("flood-") for r in d["request_ids"]), d)
            self.assertTrue(e["reason"], e)
        td = [e for e in anon if e["action"] == "tenant.delete"][0]["details"]
        self.assertEqual(td["object_ids"], ["victim-1", "victim-4", "victim-7", "victim-10"])

    def test_counts_survive_a_clean_stop_and_reach_the_store_at_the_interval(self):
        for i in range(25):
            raw_request(self.d.port, "GET", "/v1/capacity", ["X-Request-Id: stop-%d" % i])
        # The tick writes the interval's counts once it is over (10 s), with
        # no read to end it early: watch the store itself.
        deadline = time.monotonic() + T(40)
        while True:
            got = anonymous(stored_events(self.d.state_dir), "capacity.read")
            if got or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual([e["details"]["count"] for e in got], [25], got)
        # Counted after that, then a clean stop: written before daemon.stop.
        for i in range(7):
            raw_request(self.d.port, "GET", "/v1/capacity", ["X-Request-Id: late-%d" % i])
        self.d.stop()
        stored = stored_events(self.d.state_dir)
        got = anonymous(stored, "capacity.read")
        self.assertEqual([e["details"]["count"] for e in got], [25, 7], got)
        stop_at = max(i for i, e in enumerate(stored) if e["action"] == "daemon.stop")
        self.assertLess(stored.index(got[1]), stop_at)

    def test_sources_beyond_the_bound_share_an_overflow_bucket(self):
        # 70 loopback addresses: 64 buckets, the other 6 sources counted together.
        for k in range(70):
            src = "127.0.%d.%d" % (1 + k // 200, 2 + k % 200)
            self.assertEqual(raw_request(self.d.port, "GET", "/v1/whoami", source=src), 401)
        items = events_of(self.admin)
        anon = anonymous(items, "whoami") + anonymous(items, "*")
        self.assertEqual(len(anon), 65, [e["source"] for e in anon])
        self.assertEqual(sum(e["details"]["count"] for e in anon), 70)
        over = [e for e in anon if e["details"]["overflow"]]
        self.assertEqual(len(over), 1)
        self.assertEqual((over[0]["source"], over[0]["action"], over[0]["details"]["count"]),
                         ("*", "*", 6))

    def test_client_text_in_events_is_bounded_and_escaped(self):
        _, tu_tok = issue_token(self, self.admin, "tenant-user",
                                tenant=create_tenant(self, self.admin)["name"])
        long_id = "x" * 400  # the daemon routes paths up to 511 bytes
        # C1 CSI and a right-to-left override, bytes that are not UTF-8, a
        # long id. (C0 controls in a path are refused before routing.)
        cases = [("/v1/tenants/ab%C2%9B2J%E2%80%AEx", "ab\\u009b2J\\u202ex"),
                 ("/v1/tenants/%FF%FE%C3", "\\xff\\xfe\\xc3"),
                 ("/v1/tenants/" + long_id, "x" * 64)]
        for path, want in cases:
            raw_request(self.d.port, "DELETE", path, ["Authorization: Bearer " + tu_tok,
                                                      "X-Request-Id: esc-1"])
            raw_request(self.d.port, "DELETE", path, ["X-Request-Id: esc-anon"])
        items = events_of(self.admin)
        mine = [e for e in items if e["request_id"] == "esc-1"]
        self.assertEqual(len(mine), 3, mine)
        anon = anonymous(items, "tenant.delete")
        self.assertEqual(len(anon), 1, anon)
        for e in mine:
            self.assertIn(e["outcome"], ("denied", "error"), e)
        for want, e in zip([w for _, w in cases], mine):
            self.assertTrue(e["object"]["id"].startswith(want), (want, e["object"]["id"]))
        for e in mine + anon:
            for text in [e["object"]["id"], e["reason"], e["request_id"]] + \
                    e["details"].get("object_ids", []) + e["details"].get("request_ids", []):
                self.assertRegex(text, SAFE_TEXT)
                self.assertLessEqual(len(text), 320, text)
        self.assertLessEqual(max(len(o) for o in anon[0]["details"]["object_ids"]), 80)

    def test_descriptions_with_control_characters_are_refused(self):
        t = create_tenant(self, self.admin)["name"]
        for bad in ("line\nbreak", "esc \u001b[2J", "rlo \u202e", "c1 \u009b"):
            self.assertError(self.admin.post("/v1/tenants", {"name": harness.uniq("d"),
                                                             "description": bad}),
                             400, "invalid_argument", "description")
            self.assertError(self.admin.patch("/v1/tenants/" + t, {"description": bad}),
                             400, "invalid_argument", "description")
            self.assertError(self.admin.post("/v1/tokens", {"role": "auditor", "description": bad}),
                             400, "invalid_argument", "description")
        r = self.admin.post("/v1/tokens", {"role": "auditor", "description": "ops \"night\" \u00e9 \\"})
        self.assertStatus(r, 201)


# ---------------------------------------------------------------- the daemon's log


class TestLogInjection(ApiTestCase):
    def test_control_characters_in_a_path_forge_no_line(self):
        with Daemon(CONFIG, env={"ISOSTACK_DEBUG": "1"}) as d:
            forged = "2026-01-01T00:00:00.000Z level=info event=tenant_deleted tenant=acme"
            paths = ["/v1/tenants/x%0A" + forged.replace(" ", "%20"),
                     "/v1/tenants/x%0D" + forged.replace(" ", "%20"),
                     "/v1/tenants/x%1B%5B2K%0D" + forged.replace(" ", "%20"),
                     "/v1/nodes/%E2%80%A8" + forged.replace(" ", "%20"),
                     "/v1/nodes/a%22%20event=tenant_deleted%20b=%22"]
            for p in paths:
                for m in ("GET", "DELETE"):
                    raw_request(d.port, m, p)
                    raw_request(d.port, m, p, ["Authorization: Bearer " + d.admin_token])
            d.stop()
            text = d.stderr_text()
        raw = text.encode("utf-8", "surrogateescape")
        self.assertNotIn(b"\x1b", raw)
        self.assertNotIn(b"\r", raw)
        self.assertNotIn("\u2028", text)
        for line in text.split("\n"):
            if not line:
                continue
            self.assertRegex(line, LOG_LINE)
            fields = parse_logfmt(self, line)
            self.assertEqual([v for k, v in fields if k == "event"].count("tenant_deleted"), 0,
                             line)
            self.assertEqual([k for k, _ in fields].count("event"), 1, line)
        # Every attempt has its line, the attack text inside its one path value.
        paths_logged = [v for line in text.split("\n") if line
                        for k, v in parse_logfmt(self, line) if k == "path"]
        self.assertEqual(len([v for v in paths_logged if "tenant_deleted" in v]),
                         len(paths) * 4, paths_logged)


# ---------------------------------------------------------------- the state dir


class TestStateDir(ApiTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="isostate-")
        self.state = os.path.join(self.tmp, "state")
        os.mkdir(self.state, 0o700)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def first_start(self):
        """A normal start and stop, so that the state dir holds its files."""
        d = Daemon(CONFIG, state_dir=self.state)
        try:
            d.start()
            d.stop()
        finally:
            d.cleanup()

    def refused(self, *want):
        """Starts isostackd, which must exit at once (not serve) with a
        message holding every `want`."""
        port = harness.free_port()
        p = subprocess.Popen([Binaries.isostackd, "--config", data_path(CONFIG), "--state-dir",
                              self.state, "--listen", "127.0.0.1:%d" % port],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = p.communicate(timeout=T(15))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail("isostackd started on an unsafe state dir:\n%s" % err.decode(errors="replace"))
        err = err.decode(errors="replace")
        self.assertNotEqual(p.returncode, 0, err)
        for w in want:
            self.assertIn(w, err)
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, err)
        return err

    def test_world_writable_state_dir(self):
        os.chmod(self.state, 0o777)
        self.refused(self.state, "writable by group or others", "chmod 700")
        self.assertFalse(os.path.exists(os.path.join(self.state, "state.db")))
        os.chmod(self.state, 0o770)
        self.refused(self.state, "writable by group or others")

    def require_root(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to give files to another uid (CI runs as root)")

    def test_state_dir_of_another_user(self):
        self.require_root()
        os.chown(self.state, 65534, 65534)
        self.refused(self.state, "owned by uid 65534", "uid 0")

    def test_foreign_owned_state_db(self):
        self.require_root()
        self.first_start()
        for name in ("state.db", "admin.token", "audit.pub"):
            path = os.path.join(self.state, name)
            os.chown(path, 65534, 65534)
            self.refused(path, "owned by uid 65534")
            os.chown(path, 0, 0)

    def test_group_writable_state_db(self):
        self.first_start()
        path = os.path.join(self.state, "state.db")
        os.chmod(path, 0o664)
        self.refused(path, "writable by group or others", "chmod go-w")

    def test_readable_admin_token(self):
        self.first_start()
        path = os.path.join(self.state, "admin.token")
        os.chmod(path, 0o644)
        self.refused(path, "readable by group or others", "chmod 600")

    def test_symlinked_lock_file(self):
        target = os.path.join(self.tmp, "elsewhere")
        os.symlink(target, os.path.join(self.state, "isostackd.lock"))
        self.refused(os.path.join(self.state, "isostackd.lock"), "symbolic link")
        self.assertFalse(os.path.lexists(target), "the lock was created through the link")

    def test_symlink_planted_at_the_token_temp_path(self):
        # The old writer used admin.token.tmp.<pid>, opened without O_EXCL:
        # a link there sent the bootstrap token wherever it pointed.
        target = os.path.join(self.tmp, "stolen")
        for pid in ("1", "4242"):
            os.symlink(target, os.path.join(self.state, "admin.token.tmp." + pid))
        self.refused("admin.token.tmp.", "symbolic link", "remove it")
        self.assertFalse(os.path.lexists(target))

    def test_symlinked_state_db(self):
        self.first_start()
        db = os.path.join(self.state, "state.db")
        moved = os.path.join(self.tmp, "planted.db")
        shutil.move(db, moved)
        os.symlink(moved, db)
        self.refused(db, "symbolic link")

    def test_safe_state_dir_still_starts_and_token_file_is_private(self):
        self.first_start()
        names = sorted(os.listdir(self.state))
        self.assertIn("admin.token", names)
        self.assertFalse([n for n in names if ".tmp" in n], names)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.state, "admin.token")).st_mode),
                         0o600)
        self.first_start()  # and again over its own files


if __name__ == "__main__":
    harness.main()

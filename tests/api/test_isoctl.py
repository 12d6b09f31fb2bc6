#!/usr/bin/env python3
"""test_isoctl.py: the real isoctl binary against a real isostackd: the
README walkthrough, `-o json` output that parses and matches the API, the
exit codes of docs/cli.md (2 usage, 3 not found, 4 unauthorized/forbidden,
5 conflict/capacity, 6 invalid input, 7 unreachable) and help at every level.

Run: python3 tests/api/test_isoctl.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, T  # noqa: E402

CONFIG = "small.yaml"

COMMANDS = {
    "health": [], "version": [], "whoami": [], "capacity": [],
    "tenant": ["create", "list", "get", "update", "delete"],
    "token": ["issue", "list", "get", "revoke"],
    "node": ["list", "get", "cordon", "uncordon", "drain"],
    "gpu": ["list"],
    "alloc": ["create", "list", "get", "resize", "release"],
}


class Result:
    def __init__(self, argv, p):
        self.argv, self.rc, self.out, self.err = argv, p.returncode, p.stdout, p.stderr

    def json(self):
        try:
            return json.loads(self.out)
        except ValueError as e:
            raise AssertionError("isoctl %s: stdout is not JSON (%s):\n%s" % (" ".join(self.argv), e, self.out))

    def __repr__(self):
        return "isoctl %s -> %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
            " ".join(self.argv), self.rc, self.out[-3000:], self.err[-3000:])


class IsoctlCase(harness.SharedDaemonCase):
    config = CONFIG

    @classmethod
    def setUpClass(cls):
        if not harness.Binaries.isoctl or not os.path.exists(harness.Binaries.isoctl):
            raise AssertionError("no isoctl binary: pass it as argv[2]")
        super().setUpClass()

    def isoctl(self, *argv, token="admin", url=None, env=None, stdin=None):
        e = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
        e["ISOSTACK_URL"] = url or self.d.url()
        if token == "admin":
            token = self.d.admin_token
        if token is not None:
            e["ISOSTACK_TOKEN"] = token
        if env:
            e.update(env)
        p = subprocess.run([harness.Binaries.isoctl] + list(argv), env=e, input=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=T(60))
        r = Result(list(argv), p)
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, r.err, "sanitizer report from isoctl: %r" % r)
        return r

    def ok(self, *argv, **kw):
        r = self.isoctl(*argv, **kw)
        self.assertEqual(r.rc, 0, repr(r))
        return r

    def fails(self, rc, *argv, **kw):
        r = self.isoctl(*argv, **kw)
        self.assertEqual(r.rc, rc, repr(r))
        self.assertEqual(r.out, "", "stdout not empty on an error: %r" % r)
        self.assertTrue(r.err.strip(), "no message on stderr: %r" % r)
        return r


class TestWalkthrough(IsoctlCase):
    """README.md's five-minute walkthrough, checked against the API."""

    def test_readme_walkthrough(self):
        r = self.ok("health")
        self.assertEqual(r.out.strip(), "ok")
        cap = self.ok("capacity", "-o", "json").json()
        self.assertEqual(cap, self.admin.get("/v1/capacity").body)
        self.ok("capacity")  # table form

        r = self.ok("tenant", "create", "acme", "--description", "ACME Pharma")
        self.assertIn("acme", r.out)
        self.assertIn("ACME Pharma", r.out)
        self.assertEqual(self.admin.get("/v1/tenants/acme").body["description"], "ACME Pharma")

        r = self.ok("token", "issue", "--tenant", "acme", "--role", "tenant-admin", "--user", "alice",
                    "-o", "json")
        tok = r.json()
        self.assertRegex(tok["token"], harness.TOKEN_RE)
        self.assertEqual((tok["role"], tok["tenant"], tok["user"]), ("tenant-admin", "acme", "alice"))
        alice = tok["token"]

        who = self.ok("whoami", "-o", "json", token=alice).json()
        self.assertEqual(who, {"token_id": tok["id"], "role": "tenant-admin", "tenant": "acme", "user": "alice"})

        a = self.ok("alloc", "create", "--members", "2", "--profile", "3g.40gb", "--cpus", "8",
                    "--memory-mib", "65536", "--name", "train-1", "-o", "json", token=alice).json()
        harness.check_allocation(self, a)
        self.assertEqual((a["tenant"], a["name"], a["state"], a["members"], a["owner"]),
                         ("acme", "train-1", "active", 2, "alice"))
        self.assertEqual(harness.slots_of(a), [("sm-n01", 0, 0, 4), ("sm-n01", 0, 4, 4)])

        lst = self.ok("alloc", "list", "-o", "json", token=alice).json()
        self.assertEqual([x["id"] for x in lst["items"]], [a["id"]])

        got = self.ok("alloc", "get", a["id"], "-o", "json", token=alice).json()
        self.assertEqual(got, harness.tenant_view(self.admin.get("/v1/allocations/" + a["id"]).body))
        table = self.ok("alloc", "get", a["id"], token=alice).out
        for s in ("PLACEMENT", "sm-n01", "3g.40gb", a["id"], "active"):
            self.assertIn(s, table)

        rs = self.ok("alloc", "resize", a["id"], "--members", "3", "-o", "json", token=alice).json()
        self.assertEqual((rs["members"], len(rs["placement"])), (3, 3))

        rel = self.ok("alloc", "release", a["id"], "-o", "json", token=alice).json()
        self.assertEqual(rel["state"], "released")
        self.assertEqual(self.admin.get("/v1/allocations/" + a["id"]).body["state"], "released")

    def test_whole_gpus_and_cpu_only(self):
        self.ok("tenant", "create", "wholeco")
        a = self.ok("alloc", "create", "--tenant", "wholeco", "--whole", "--count", "2", "-o", "json").json()
        self.assertEqual(a["gpus"], {"count": 2, "whole": True, "profile": None, "model": None})
        self.assertEqual(len({p["node"] for p in a["placement"]}), 1)
        c = self.ok("alloc", "create", "--tenant", "wholeco", "--cpus", "2", "--pool", "cpu", "-o", "json").json()
        self.assertEqual((c["placement"], c["nodes"][0]["node"]), ([], "sm-c01"))
        for x in (a, c):
            self.ok("alloc", "release", x["id"])
        self.ok("tenant", "delete", "wholeco")

    def test_token_issue_warns_secret_shown_once(self):
        self.ok("tenant", "create", "warnco")
        for mode in (["-o", "table"], ["-o", "json"]):
            with self.subTest(mode=mode):
                r = self.ok("token", "issue", "--tenant", "warnco", "--role", "tenant-user", *mode)
                self.assertIn("isoctl: warning: the token secret is shown only once", r.err)
                self.assertRegex(r.out, r"iso_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")

    def test_token_issue_for_a_node_agent(self):
        node = self.ok("node", "list", "-o", "id").out.split()[0]
        tok = json.loads(self.ok("-o", "json", "token", "issue", "--role", "node-agent",
                                 "--node", node).out)
        self.assertEqual((tok["role"], tok["node"]), ("node-agent", node))
        r = self.fails(6, "token", "issue", "--role", "node-agent", "--node", "no-such-node")
        self.assertIn("node", r.err)

    def test_token_file(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("  %s  \n" % self.d.admin_token)
            path = f.name
        try:
            os.chmod(path, 0o600)
            who = self.ok("whoami", "-o", "json", token=None, env={"ISOSTACK_TOKEN_FILE": path}).json()
            self.assertEqual(who["role"], "cluster-admin")
            who = self.ok("--token-file", path, "whoami", "-o", "json", token=None).json()
            self.assertEqual(who["role"], "cluster-admin")
            self.fails(2, "--token-file", path, "--token", self.d.admin_token, "whoami", token=None)
        finally:
            os.unlink(path)
        self.fails(2, "--token-file", "/nonexistent/isoctl-token", "whoami", token=None)


class TestJsonOutput(IsoctlCase):
    def test_every_read_command_prints_json(self):
        self.ok("tenant", "create", "jsonco")
        tok = self.ok("token", "issue", "--tenant", "jsonco", "--role", "tenant-user", "-o", "json").json()
        a = self.ok("alloc", "create", "--tenant", "jsonco", "--profile", "1g.10gb", "-o", "json").json()
        cases = [
            (["version"], "/v1/version", False),
            (["whoami"], "/v1/whoami", False),
            (["capacity"], "/v1/capacity", False),
            (["tenant", "list"], "/v1/tenants", True),
            (["tenant", "get", "jsonco"], "/v1/tenants/jsonco", False),
            (["token", "list"], "/v1/tokens", True),
            (["token", "get", tok["id"]], "/v1/tokens/" + tok["id"], False),
            (["node", "list"], "/v1/nodes", True),
            (["node", "list", "--pool", "cpu"], "/v1/nodes?pool=cpu", True),
            (["node", "get", "sm-n02"], "/v1/nodes/sm-n02", False),
            (["gpu", "list", "--node", "sm-n01"], "/v1/gpus?node=sm-n01", True),
            (["alloc", "list"], "/v1/allocations", True),
            (["alloc", "list", "--tenant", "jsonco", "--state", "active"],
             "/v1/allocations?tenant=jsonco&state=active", True),
            (["alloc", "get", a["id"]], "/v1/allocations/" + a["id"], False),
        ]
        for argv, path, is_list in cases:
            with self.subTest(argv=argv):
                got = self.ok(*(argv + ["-o", "json"])).json()
                if is_list:
                    want = self.admin.list_all(path)
                    self.assertEqual(got, {"items": want})
                elif path == "/v1/version":
                    self.assertEqual({k: got.get(k) for k in ("api", "store", "placement", "fabric")},
                                     {k: v for k, v in self.admin.get(path).body.items()
                                      if k in ("api", "store", "placement", "fabric")})
                else:
                    self.assertEqual(got, self.admin.get(path).body)
                # global flags may stand anywhere
                self.assertEqual(self.ok("-o", "json", *argv).json(), got)
                self.ok(*argv)  # and the table form works too
        self.ok("alloc", "release", a["id"])
        r = self.ok("token", "revoke", tok["id"], "-o", "json")
        self.assertEqual(r.out, "")
        self.assertTrue(self.admin.get("/v1/tokens/" + tok["id"]).body["revoked"])

    def test_lists_fetch_every_page(self):
        for i in range(105):
            self.assertStatus(self.admin.post("/v1/tenants", {"name": "page-%03d" % i}), 201)
        got = self.ok("tenant", "list", "-o", "json").json()
        names = [t["name"] for t in got["items"]]
        for i in range(105):
            self.assertIn("page-%03d" % i, names)
        self.assertEqual(len(names), len(set(names)))
        # /v1/usage is paged too: every account, once.
        accounts = [x["account"] for x in self.ok("usage", "-o", "json").json()["items"]]
        for i in range(105):
            self.assertIn("page-%03d" % i, accounts)
        self.assertEqual(len(accounts), len(set(accounts)))


class TestExitCodes(IsoctlCase):
    def test_usage_is_2(self):
        for argv in (["bogus"], ["tenant"], ["tenant", "bogus"], ["tenant", "list", "--bogus"],
                     ["tenant", "get"], ["tenant", "get", "a", "b"], ["alloc", "get"],
                     ["alloc", "create", "--profile", "1g.10gb", "--whole"],
                     ["alloc", "create", "--count", "2"], ["alloc", "create", "--members", "abc"],
                     ["alloc", "resize", "a-1"], ["-o", "yaml", "whoami"], ["--timeout", "x", "whoami"]):
            with self.subTest(argv=argv):
                r = self.fails(2, *argv)
                self.assertIn("--help", r.err)
        for argv in (["--url", "ftp://x", "whoami"], ["--url", "http://user:pw@127.0.0.1:1", "whoami"]):
            with self.subTest(argv=argv):
                r = self.fails(2, *argv)
                self.assertIn("url", r.err)
                self.assertNotIn(":pw@", r.err, "isoctl echoed the credentials")

    def test_not_found_is_3(self):
        self.ok("tenant", "create", "nfco")
        _, alice = harness.issue_token(self, self.admin, "tenant-user", tenant="nfco", user="nf")
        self.assertStatus(self.admin.post("/v1/tenants", {"name": "otherco"}), 201)
        other = harness.create_alloc(self, self.admin, {"tenant": "otherco", "gpus": {"count": 1, "profile": "1g.10gb"}})
        r = self.fails(3, "tenant", "get", "nope")
        self.assertIn("not_found", r.err)
        self.fails(3, "alloc", "get", "a-0000000000000000")
        self.fails(3, "node", "get", "no-such-node")
        self.fails(3, "token", "revoke", "0123456789ab")
        # another tenant's allocation: 3, and the message as for a missing one
        mine = self.fails(3, "alloc", "get", other["id"], token=alice)
        missing_id = other["id"][:-8] + "00000000"
        miss = self.fails(3, "alloc", "get", missing_id, token=alice)
        norm = lambda s, i: s.replace(i, "<ID>").split("request id:")[0]  # noqa: E731
        self.assertEqual(norm(mine.err, other["id"]), norm(miss.err, missing_id))
        self.fails(3, "tenant", "get", "otherco", token=alice)
        self.fails(3, "alloc", "release", other["id"], token=alice)
        self.assertEqual(self.admin.get("/v1/allocations/" + other["id"]).body["state"], "active")

    def test_unauthorized_and_forbidden_are_4(self):
        secret = "iso_0123456789ab_" + "Q" * 43
        r = self.fails(4, "whoami", token=secret)
        self.assertIn("unauthorized", r.err)
        self.assertNotIn("Q" * 43, r.err, "isoctl printed the token")
        self.fails(4, "capacity", token=None)
        self.ok("tenant", "create", "forbco")
        _, user = harness.issue_token(self, self.admin, "tenant-user", tenant="forbco", user="fb")
        r = self.fails(4, "node", "list", token=user)
        self.assertIn("forbidden", r.err)
        self.fails(4, "tenant", "create", "x-by-user", token=user)
        self.fails(4, "token", "issue", "--role", "auditor", token=user)
        self.assertEqual(self.admin.get("/v1/tenants/x-by-user").status, 404)
        self.ok("health", token=None)

    def test_conflict_and_capacity_are_5(self):
        self.ok("tenant", "create", "confco")
        r = self.fails(5, "tenant", "create", "confco")
        self.assertIn("conflict", r.err)
        r = self.fails(5, "alloc", "create", "--tenant", "confco", "--whole", "--count", "9")
        self.assertIn("unsatisfiable", r.err)
        a = self.ok("alloc", "create", "--tenant", "confco", "--profile", "1g.10gb", "-o", "json").json()
        self.fails(5, "tenant", "delete", "confco")
        self.fails(5, "alloc", "resize", a["id"], "--members", "1000")
        self.ok("alloc", "release", a["id"])
        r = self.ok("tenant", "delete", "confco")
        self.assertIn("confco", r.out)

    def test_invalid_input_is_6(self):
        self.ok("tenant", "create", "badco")
        r = self.fails(6, "alloc", "create", "--tenant", "badco", "--members", "0")
        self.assertIn("field: members", r.err)
        r = self.fails(6, "alloc", "create", "--tenant", "badco", "--profile", "9g.99gb")
        self.assertIn("field: gpus.profile", r.err)
        self.fails(6, "tenant", "create", "Bad Name")
        self.assertEqual(self.admin.get("/v1/allocations?tenant=badco").body["items"], [])

    def test_unreachable_is_7(self):
        url = "http://127.0.0.1:%d" % harness.free_port()
        for argv in (["health"], ["whoami"], ["alloc", "list"], ["tenant", "create", "x"]):
            with self.subTest(argv=argv):
                r = self.fails(7, *argv, url=url)
                self.assertIn("127.0.0.1", r.err)


class TestFirstFiveMinutes(IsoctlCase):
    """What a new user meets first (issue 12, 7b): --version, -o token and
    -o id for scripts, whole option names only, tables that show what
    matters, and a released allocation that no longer shows a placement."""

    def test_version_flag(self):
        # Needs no server: the URL points nowhere.
        url = "http://127.0.0.1:%d" % harness.free_port()
        r = self.ok("--version", url=url, token=None)
        self.assertRegex(r.out, r"^isoctl \d+\.\d+\.\d+\n$")
        self.assertEqual(r.err, "")
        self.assertIn(r.out.split()[1], self.ok("version").out)  # the client line agrees
        # Only before the command; elsewhere it is an unknown option.
        self.fails(2, "tenant", "list", "--version", url=url)

    def test_abbreviated_long_options_are_refused(self):
        self.ok("tenant", "create", "abbrco")
        before = self.admin.list_all("/v1/allocations?tenant=abbrco")
        cases = (
            (["alloc", "create", "--tenant", "abbrco", "--member", "2"], "--members"),
            (["alloc", "create", "--tenant=abbrco", "--prof", "1g.10gb"], "--profile"),
            (["alloc", "create", "--ten", "abbrco"], "--tenant"),
            (["--out", "json", "whoami"], "--output"),
            (["whoami", "--time", "5"], "--timeout"),
            (["tenant", "get", "abbrco", "--out=json"], "--output"),
            (["alloc", "list", "--stat", "active"], "--state"),
            (["--vers"], "--version"),
        )
        for argv, full in cases:
            with self.subTest(argv=argv):
                r = self.fails(2, *argv)
                self.assertIn("write '%s'" % full, r.err)
                self.assertIn("abbreviated", r.err)
        self.assertEqual(self.admin.list_all("/v1/allocations?tenant=abbrco"), before)
        # Written in full, with the value attached or apart, they work.
        a = self.ok("alloc", "create", "--tenant=abbrco", "--members", "1", "--profile=1g.10gb",
                    "--output=json").json()
        self.ok("alloc", "release", a["id"], "--output", "json")

    def test_token_output_prints_only_the_secret(self):
        self.ok("tenant", "create", "tokco")
        r = self.ok("token", "issue", "--tenant", "tokco", "--role", "tenant-admin", "--user", "bob",
                    "-o", "token")
        self.assertRegex(r.out, r"^" + harness.TOKEN_RE.pattern.strip("^$") + r"\n$")
        self.assertIn("shown only once", r.err)
        who = self.ok("whoami", "-o", "json", token=r.out.strip()).json()
        self.assertEqual((who["role"], who["tenant"], who["user"]), ("tenant-admin", "tokco", "bob"))
        # Elsewhere -o token is a usage error, found before any request: exit 2
        # even where no server answers.
        url = "http://127.0.0.1:%d" % harness.free_port()
        for argv in (["tenant", "list"], ["alloc", "create", "--tenant", "tokco"], ["whoami"]):
            with self.subTest(argv=argv):
                r = self.fails(2, *(argv + ["-o", "token"]), url=url)
                self.assertIn("-o token", r.err)

    def test_id_output(self):
        self.ok("tenant", "create", "idco")
        r = self.ok("alloc", "create", "--tenant", "idco", "--profile", "1g.10gb", "-o", "id")
        aid = r.out.strip()
        self.assertRegex(r.out, r"^a-[0-9a-f]{16}\n$")
        self.assertEqual(self.admin.get("/v1/allocations/" + aid).body["tenant"], "idco")
        self.assertEqual(self.ok("alloc", "list", "--tenant", "idco", "-o", "id").out, aid + "\n")
        self.assertEqual(self.ok("tenant", "get", "idco", "-o", "id").out, "idco\n")
        names = self.ok("tenant", "list", "-o", "id").out.split()
        self.assertIn("idco", names)
        self.assertEqual(self.ok("alloc", "release", aid, "-o", "id").out, aid + "\n")
        # An answer without an id or name: a usage error, nothing on stdout.
        r = self.fails(2, "capacity", "-o", "id")
        self.assertIn("no id", r.err)

    def test_released_allocation_shows_no_placement(self):
        self.ok("tenant", "create", "relco")
        a = self.ok("alloc", "create", "--tenant", "relco", "--profile", "3g.40gb", "-o", "json").json()
        live = self.ok("alloc", "get", a["id"]).out
        self.assertIn("PLACEMENT", live)
        self.assertNotIn("placement:", live)
        for out in (self.ok("alloc", "release", a["id"]).out, self.ok("alloc", "get", a["id"]).out):
            self.assertNotIn("PLACEMENT", out)
            self.assertNotIn("3g.40gb   ", out)  # no row of a slot it held
            self.assertRegex(out, r"\nplacement: +none \(released\)\n")
        # The JSON is the server's, unchanged.
        self.assertEqual(self.ok("alloc", "get", a["id"], "-o", "json").json(),
                         self.admin.get("/v1/allocations/" + a["id"]).body)

    def test_tenant_table_shows_org_isolation_and_pkey(self):
        self.ok("org", "create", "taborg")
        self.ok("tenant", "create", "tabco", "--org", "taborg", "--isolation", "exclusive-node",
                "--shares", "3")
        t = self.admin.get("/v1/tenants/tabco").body
        for argv in (["tenant", "get", "tabco"], ["tenant", "list"]):
            with self.subTest(argv=argv):
                lines = self.ok(*argv).out.splitlines()
                self.assertEqual(lines[0].split(), ["NAME", "ORG", "SHARES", "ISOLATION", "PKEY",
                                                    "DESCRIPTION", "CREATED"])
                row = [x for x in lines[1:] if x.startswith("tabco ")][0].split()
                self.assertEqual(row[:5], ["tabco", "taborg", "3", "exclusive-node", t["pkey"]])

    def test_usage_columns_are_named_and_explained(self):
        out = self.ok("usage").out
        header = out.splitlines()[0].split()
        self.assertEqual(header, ["ACCOUNT", "LEVEL", "SHARES", "SHARE_OF_SIBLINGS",
                                  "USAGE_OF_SIBLINGS", "FAIR_SHARE", "RANK", "HOLDS_NOW"])
        for col in header[3:]:
            self.assertRegex(out, r"\n%s +\S" % col, "no legend line for %s" % col)
        # -o json is the server's answer (decayed usage moves, so compare its shape).
        got = self.ok("usage", "-o", "json").json()
        want = self.admin.get("/v1/usage").body["items"]
        self.assertEqual([(x["account"], sorted(x)) for x in got["items"]],
                         [(x["account"], sorted(x)) for x in want])


class TestWait(IsoctlCase):
    """alloc create --wait S: 0 once active, 9 when it ends released or
    failed, 10 when it is still pending after S seconds. The cluster is
    filled so that the next request stays pending."""

    def setUp(self):
        self.tenant = harness.uniq("wait")
        self.ok("tenant", "create", self.tenant)
        # Three nodes of 8 GPUs: every GPU, so the next GPU request waits.
        self.blocker = self.ok("alloc", "create", "--tenant", self.tenant, "--members", "3", "--whole",
                               "--count", "8", "-o", "id").out.strip()

    def tearDown(self):
        for a in self.admin.list_all("/v1/allocations?tenant=" + self.tenant):
            if a["state"] not in ("released", "failed"):
                self.admin.delete("/v1/allocations/" + a["id"])

    def start_waiting(self, *extra):
        e = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
        e.update(ISOSTACK_URL=self.d.url(), ISOSTACK_TOKEN=self.d.admin_token)
        return subprocess.Popen([harness.Binaries.isoctl, "alloc", "create", "--tenant", self.tenant,
                                 "--whole", "-o", "json"] + list(extra), env=e,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def pending_id(self, proc):
        """The id of the allocation the waiting isoctl created, from the API."""
        for _ in range(400):
            items = self.admin.list_all("/v1/allocations?tenant=%s&state=pending" % self.tenant)
            if items:
                return items[0]["id"]
            self.assertIsNone(proc.poll(), "isoctl ended before its allocation was pending")
            time.sleep(0.05)
        self.fail("no pending allocation appeared")

    def test_active_at_once(self):
        self.admin.delete("/v1/allocations/" + self.blocker)
        a = self.ok("alloc", "create", "--tenant", self.tenant, "--profile", "1g.10gb", "--wait", "30",
                    "-o", "json").json()
        self.assertEqual(a["state"], "active")

    def test_still_pending_is_10(self):
        r = self.fails(10, "alloc", "create", "--tenant", self.tenant, "--whole", "--wait", "1")
        pending = self.admin.list_all("/v1/allocations?tenant=%s&state=pending" % self.tenant)
        self.assertEqual(len(pending), 1)
        self.assertIn("%s is still pending after 1 s" % pending[0]["id"], r.err)

    def test_becomes_active_while_waiting(self):
        proc = self.start_waiting("--wait", "120")
        try:
            aid = self.pending_id(proc)
            self.assertStatus(self.admin.delete("/v1/allocations/" + self.blocker), 200)
            out, err = proc.communicate(timeout=T(120))
        finally:
            proc.kill()
        self.assertEqual(proc.returncode, 0, err)
        a = json.loads(out)
        self.assertEqual((a["id"], a["state"]), (aid, "active"))

    def test_active_noticed_quickly_in_the_first_seconds(self):
        """In its first 10 s the wait polls at most 0.25 s apart (a Slurm
        job's prolog waits here, docs/benchmarks.md "Slurm: job start
        overhead"): the allocation going active 3.5 s in is seen well under
        1 s later (polling 0.1 s doubling to 2 s, the next look was at 5.1 s)."""
        proc = self.start_waiting("--wait", "120")
        try:
            t0 = time.monotonic()
            self.pending_id(proc)
            time.sleep(max(0, 3.5 - (time.monotonic() - t0)))
            self.assertStatus(self.admin.delete("/v1/allocations/" + self.blocker), 200)
            t1 = time.monotonic()
            out, err = proc.communicate(timeout=T(120))
            noticed = time.monotonic() - t1
        finally:
            proc.kill()
        self.assertEqual(proc.returncode, 0, err)
        self.assertLess(noticed, T(1.0), "isoctl saw the allocation active %.2f s late" % noticed)

    def test_released_while_waiting_is_9(self):
        proc = self.start_waiting("--wait", "120")
        try:
            aid = self.pending_id(proc)
            self.assertStatus(self.admin.delete("/v1/allocations/" + aid), 200)
            out, err = proc.communicate(timeout=T(120))
        finally:
            proc.kill()
        self.assertEqual(proc.returncode, 9, err)
        self.assertEqual(out, "")
        self.assertIn("allocation %s is released" % aid, err)

    def test_bad_wait_is_usage(self):
        for v in ("0", "-1", "x", "86401"):
            with self.subTest(wait=v):
                r = self.fails(2, "alloc", "create", "--tenant", self.tenant, "--whole", "--wait", v)
                self.assertIn("--wait", r.err)
        self.assertEqual(len(self.admin.list_all("/v1/allocations?tenant=" + self.tenant)), 1)


class TestMigLayout(IsoctlCase):
    """`isoctl mig layout`: the table, the mig-parted YAML, and its errors,
    checked against the allocations' own slots from the API."""

    def test_table_and_mig_parted(self):
        self.ok("tenant", "create", "migco")
        c = self.admin
        a3 = harness.create_alloc(self, c, {"tenant": "migco", "gpus": {"count": 1, "profile": "3g.40gb"}})
        a4 = harness.create_alloc(self, c, {"tenant": "migco", "gpus": {"count": 1, "profile": "4g.40gb"}})
        w = harness.create_alloc(self, c, {"tenant": "migco", "gpus": {"count": 1, "whole": True}})
        expect = {}  # (node, gpu) -> cells of the layout column
        for a, cell in ((a3, "[3g.40gb@%d]"), (a4, "[4g.40gb@%d]"), (w, "[whole]")):
            for node, gpu, start, _width in harness.slots_of(a):
                expect.setdefault((node, gpu), []).append(cell % start if "%d" in cell else cell)
        nodes = sorted({n for n, _ in expect})
        for node in nodes:
            out = self.ok("mig", "layout", "--node", node).out
            rows = {}
            for line in out.splitlines()[1:]:
                f = line.split()
                self.assertEqual(f[0], node, out)
                rows[int(f[1])] = f[4]
            self.assertEqual(len(rows), 8, out)
            for (n, gpu), cells in expect.items():
                if n != node:
                    continue
                for cell in cells:
                    self.assertIn(cell, rows[gpu], out)
            for gpu, layout in rows.items():
                if (node, gpu) not in expect:
                    self.assertEqual(layout, "[free@0-7]", out)
        # mig-parted: one config per distinct node layout, counts per device.
        yml = self.ok("mig", "layout", "-o", "mig-parted").out
        self.assertIn("version: v1", yml)
        self.assertIn("mig-configs:", yml)
        self.assertIn('mig-devices: {"3g.40gb": 1}', yml)
        self.assertIn('mig-devices: {"4g.40gb": 1}', yml)
        self.assertEqual(yml, self.ok("mig", "layout", "--format", "mig-parted").out)
        # The GPU taken whole is in an entry of its own with MIG off.
        (wnode, wgpu, _, _), = harness.slots_of(w)
        config = yml[yml.index("# nodes: " + wnode):]
        entry = config[config.index("devices: [%d]" % wgpu):]
        self.assertTrue(entry.split("\n")[1].strip() == "mig-enabled: false", config)
        # errors: unknown node (3), bad format (2), a tenant's token (4)
        r = self.fails(3, "mig", "layout", "--node", "nope")
        self.assertIn("nope", r.err)
        self.fails(2, "mig", "layout", "--format", "yaml")
        _, secret = harness.issue_token(self, self.admin, "tenant-user", tenant="migco", user="m")
        self.fails(4, "mig", "layout", token=secret)


class TestHelp(ApiTestCase):
    def run_help(self, argv):
        p = subprocess.run([harness.Binaries.isoctl] + argv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=T(30),
                           env={k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")})
        self.assertEqual(p.returncode, 0, "isoctl %s -> %d: %s" % (" ".join(argv), p.returncode, p.stderr))
        self.assertIn("Usage", p.stdout, "isoctl %s" % " ".join(argv))
        self.assertEqual(p.stderr, "")
        return p.stdout

    def test_help_everywhere(self):
        top = self.run_help(["--help"])
        self.assertEqual(self.run_help(["-h"]), top)
        self.assertEqual(self.run_help(["help"]), top)
        for cmd, subs in COMMANDS.items():
            self.assertIn(cmd, top)
            with self.subTest(cmd=cmd):
                out = self.run_help([cmd, "--help"])
                self.run_help([cmd, "-h"])
                for sub in subs:
                    self.assertIn(sub, out)
                    with self.subTest(sub=sub):
                        long_form = self.run_help([cmd, sub, "--help"])
                        self.assertEqual(self.run_help([cmd, sub, "-h"]), long_form)

    def test_help_runs_nothing(self):
        # --help prints the usage and stops: no request, no rendering of an
        # empty answer after it (health/version once printed "-" and
        # "client: VERSION" below their usage).
        for argv in (["health"], ["version"], ["whoami"], ["capacity"]):
            with self.subTest(argv=argv):
                out = self.run_help(argv + ["--help"])
                self.assertTrue(out.startswith("Usage"), out)
                self.assertNotIn("client:", out)
                self.assertNotIn("\n-\n", out)


class TestSimOffline(ApiTestCase):
    """`isoctl sim` needs no server: its flag errors are usage (2), a bad trace
    names file, line and column (6), and the bounds reach the JSON."""

    DATA = os.path.join(harness.SOURCE_ROOT, "tests", "unit", "data", "sim")

    def sim(self, *argv):
        p = subprocess.run([harness.Binaries.isoctl, "sim"] + list(argv), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=T(120),
                           env={k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")})
        r = Result(["sim"] + list(argv), p)
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, r.err, "sanitizer report from isoctl: %r" % r)
        return r

    def files(self, trace="pods.csv"):
        return ["--nodes", os.path.join(self.DATA, "nodes.csv"),
                "--trace", os.path.join(self.DATA, trace)]

    def test_usage_errors(self):
        cases = (
            (["--policy", "all", "--ilp-in-order"], "--ilp-in-order needs --ilp-gpus"),
            (["--policy", "bogus"], "bogus"),
            (["--policy", "all", "--ilp-gpus", "65"], "--ilp-gpus"),
            (["--policy", "all", "--mode", "replay", "--ilp-gpus", "4"], "saturate"),
            (["--policy", "all", "--ilp-gpus", "4", "--ilp-time-limit", "0"], "--ilp-time-limit"),
            (["--policy", "all", "--mode", "replay", "--lp-bound"], "--lp-bound needs --mode saturate"),
            (["--policy", "all", "--mode", "replay", "--placements"],
             "--placements needs --mode saturate"),
        )
        for extra, words in cases:
            with self.subTest(argv=extra):
                r = self.sim(*(self.files() + extra))
                self.assertEqual(r.rc, 2, repr(r))
                self.assertEqual(r.out, "")
                self.assertIn(words, r.err)

    def test_bad_trace_names_line_and_column(self):
        r = self.sim(*(self.files("pods_garbage.csv") + ["--policy", "first-fit"]))
        self.assertEqual(r.rc, 6, repr(r))
        self.assertIn("pods_garbage.csv:3: gpu_milli:", r.err)
        self.assertEqual(r.out, "")

    def test_in_order_bound_in_json(self):
        probe = self.sim(*(self.files() + ["--policy", "first-fit", "--ilp-gpus", "8",
                                           "--max-demand", "50", "--no-curve"]))
        if probe.rc == 2 and "no ILP" in probe.err:
            self.skipTest("this build has no GLPK")
        dynamic = ["first-fit", "best-fit", "fgd", "isostack"]
        r = self.sim(*(self.files() + ["--policy", ",".join(dynamic), "--ilp-gpus", "8",
                                       "--ilp-in-order", "--max-demand", "90", "--seed", "2",
                                       "--no-curve", "--json"]))
        self.assertEqual(r.rc, 0, repr(r))
        runs = r.json()
        self.assertEqual([x["policy"] for x in runs], dynamic)
        for x in runs:
            for at in ("at_100", "at_max"):
                anys, order = x["ilp"][at], x["ilp"]["in_order"][at]
                self.assertTrue(order["optimal"], order)
                # Arrival order can only take away, and no policy that places
                # every arrival that fits does better than the in-order optimum.
                self.assertLessEqual(order["best"], anys["bound"])
                self.assertLessEqual(x["ilp"]["in_order"][at]["policy_alloc"], order["bound"])
                self.assertGreaterEqual(order["gap"], 0)
        # Without the flag the JSON has no in-order part, and the table no numbers.
        r = self.sim(*(self.files() + ["--policy", "isostack", "--ilp-gpus", "8",
                                       "--max-demand", "90", "--seed", "2", "--no-curve", "--json"]))
        self.assertEqual(r.rc, 0, repr(r))
        self.assertNotIn("in_order", r.json()["ilp"])
        self.assertNotIn("lp_bound", r.json())

    def test_lp_bound_and_cold(self):
        probe = self.sim(*(self.files() + ["--policy", "first-fit", "--lp-bound", "--no-curve"]))
        if probe.rc == 2 and "no LP" in probe.err:
            self.skipTest("this build has no GLPK")
        r = self.sim(*(self.files() + ["--policy", "all", "--lp-bound", "--ilp-gpus", "8",
                                       "--seed", "2", "--no-curve", "--json"]))
        self.assertEqual(r.rc, 0, repr(r))
        for x in r.json():
            self.assertFalse(x["cold"])
            for at in ("at_100", "at_max"):
                lp = x["lp_bound"][at]
                # A relaxation: never below the ILP's optimum nor what a policy placed.
                self.assertGreaterEqual(lp["bound"], x["ilp"][at]["best"])
                self.assertGreaterEqual(lp["bound"], lp["policy_alloc"])
                self.assertLessEqual(lp["bound"], x["slices_total"])
                self.assertGreaterEqual(lp["gap"], 0)
        r = self.sim(*(self.files() + ["--policy", "isostack", "--cold", "--no-curve", "--json"]))
        self.assertEqual(r.rc, 0, repr(r))
        self.assertTrue(r.json()["cold"])
        # The table shows a gap column pair for each bound asked for, and no other.
        r = self.sim(*(self.files() + ["--policy", "isostack", "--lp-bound", "--no-curve"]))
        self.assertEqual(r.rc, 0, repr(r))
        self.assertIn("LPGAP@MAX", r.out)
        self.assertNotIn("ORDGAP", r.out)
        self.assertNotIn(" GAP@100", r.out)

    def test_requeues(self):
        """slurm-count: the requeue counts reach the JSON of every policy (0 for
        those that choose node and slice together), the table shows them only
        when a policy chooses nodes by Slurm's counts."""
        for mode in ("saturate", "replay"):
            r = self.sim(*(self.files() + ["--policy", "isostack,slurm-count,slurm-count-first",
                                           "--mode", mode, "--no-curve", "--json"]))
            self.assertEqual(r.rc, 0, repr(r))
            for x in r.json():
                slurm = x["policy"].startswith("slurm-count")
                self.assertEqual(x["counts_requeues"], slurm)
                self.assertLessEqual(x["requeued"], x["requeues"])
                self.assertLessEqual(x["requeued"], x["pods"] - x["cpu_only"])
                gpu_pods = x["pods"] - x["cpu_only"]
                self.assertAlmostEqual(x["requeue_share"], x["requeued"] / gpu_pods)
                self.assertEqual("requeue_share_at_100" in x, mode == "saturate")
                if not slurm:
                    self.assertEqual((x["requeued"], x["requeues"]), (0, 0))
        r = self.sim(*(self.files() + ["--policy", "isostack,slurm-count", "--no-curve"]))
        self.assertEqual(r.rc, 0, repr(r))
        self.assertIn("REQ_SHARE@100", r.out.splitlines()[0])
        r = self.sim(*(self.files() + ["--policy", "isostack", "--no-curve"]))
        self.assertNotIn("REQUEUED", r.out)

    def test_placements(self):
        """--placements: one entry per arrival for each policy and ILP optimum,
        consistent with the counts, and a table after the summary."""
        probe = self.sim(*(self.files() + ["--policy", "first-fit", "--ilp-gpus", "8",
                                           "--max-demand", "50", "--no-curve"]))
        have_ilp = not (probe.rc == 2 and "no ILP" in probe.err)
        extra = ["--ilp-gpus", "8", "--seed", "2"] if have_ilp else ["--gpus", "8", "--seed", "2"]
        r = self.sim(*(self.files() + ["--policy", "first-fit,isostack", "--placements",
                                       "--no-curve", "--json"] + extra))
        self.assertEqual(r.rc, 0, repr(r))
        for x in r.json():
            places = x["placements"]
            self.assertEqual(len(places), x["pods"])
            self.assertEqual([p["arrival"] for p in places], list(range(x["pods"])))
            self.assertEqual(sum(p["node"] is not None for p in places), x["placed"])
            for p in places:
                self.assertTrue(p["pod"].startswith("p"), p)
                if p["node"] is None:
                    self.assertEqual((p["gpus"], p["start"]), ([], None))
                elif p["asks"] == "cpu only":
                    self.assertEqual(p["gpus"], [])
                elif "whole" in p["asks"]:
                    self.assertEqual(len(p["gpus"]), int(p["asks"].split()[0]))
                    self.assertIsNone(p["start"])
                else:
                    self.assertEqual(len(p["gpus"]), 1)
                    self.assertIsNotNone(p["start"])
            self.assertTrue(all(p["modelled"] for p in places))
            if have_ilp:
                for at in ("at_100", "at_max"):
                    ilp = x["ilp"][at]
                    self.assertEqual([p["pod"] for p in ilp["placements"]],
                                     [p["pod"] for p in places[:len(ilp["placements"])]])
                    # The any-subset ILP models only pods that hold slices.
                    for p in ilp["placements"]:
                        self.assertEqual(p["modelled"], p["asks"] != "cpu only", p)
                        if not p["modelled"]:
                            self.assertIsNone(p["node"])
        # The same arrivals for every policy, and the summary table comes first.
        self.assertEqual([p["pod"] for p in r.json()[0]["placements"]],
                         [p["pod"] for p in r.json()[1]["placements"]])
        pods = r.json()[0]["pods"]
        r = self.sim(*(self.files() + ["--policy", "first-fit,isostack", "--placements"] + extra))
        self.assertEqual(r.rc, 0, repr(r))
        summary, _, places = r.out.partition("\nARRIVAL ")
        self.assertIn("POLICY", summary)
        self.assertIn("first-fit", places.splitlines()[0])
        self.assertEqual(len(places.splitlines()) - 1, pods)
        # Without the flag, nothing of it.
        r = self.sim(*(self.files() + ["--policy", "isostack", "--no-curve", "--json"]))
        self.assertNotIn("placements", r.json())


if __name__ == "__main__":
    harness.main()

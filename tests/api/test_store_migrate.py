#!/usr/bin/env python3
"""test_store_migrate.py: isoctl store migrate --from sqlite:DIR --to CONNINFO
(issue 16; docs/store.md, "Moving a site to PostgreSQL").

A site populated through the API on the embedded SQLite store (tenants in an
organisation, with projects, quotas and limits; tokens; allocations active,
pending, released; a cordoned node; the fabric's keys) is moved into an
empty PostgreSQL database; isostackd then starts on the same state dir with
--store CONNINFO and shows exactly what it showed before, the old tokens
work, a new tenant never reuses an id, and the audit log exported from it
verifies with `isoctl audit verify`. Refusals: a target that holds rows, a
state dir an isostackd is running on, and bad arguments, each naming its
flag and leaving the target as it was.

Run: python3 tests/api/test_store_migrate.py PATH/TO/isostackd PATH/TO/isoctl
Skips (exit 77, saying why) only when the PostgreSQL binaries are missing.
"""

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (ApiTestCase, Daemon, PgCluster, T, create_alloc, issue_token,  # noqa: E402
                     needs_postgres, psql)

MIG_1G = {"count": 1, "profile": "1g.10gb"}
TABLES = ["meta", "tenants", "tokens", "node_state", "allocations", "alloc_members",
          "alloc_slots", "audit_events", "audit_heads", "fabric_keys", "fabric_ports", "orgs",
          "projects", "quotas", "usage_log", "gpu_faults"]


def sqlite_count(path, table):
    with sqlite3.connect("file:%s?mode=ro" % path, uri=True) as db:
        return db.execute('SELECT count(*) FROM "%s"' % table).fetchone()[0]


@needs_postgres
class TestStoreMigrate(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PgCluster("iso-pg-migrate-")
        cls.dir, cls.base = cls.pg.dir, cls.pg.base

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()

    def fresh_db(self):
        return self.pg.fresh_db("iso_migrate")

    def isoctl(self, *argv, env=None):
        return subprocess.run([harness.Binaries.isoctl] + list(argv), capture_output=True,
                              text=True, timeout=T(120), env=env)

    def migrate(self, d, conninfo):
        return self.isoctl("store", "migrate", "--from", "sqlite:" + d.state_dir, "--to", conninfo)

    def populate(self, d):
        admin = d.client()
        self.assertStatus(admin.post("/v1/orgs", {"name": "acme", "shares": 2}), 201)
        self.assertStatus(admin.post("/v1/tenants", {"name": "ta", "org": "acme", "shares": 3,
                                                     "limits": {"max_live": 50}}), 201)
        self.assertStatus(admin.post("/v1/tenants", {"name": "tb"}), 201)
        self.assertStatus(admin.post("/v1/tenants", {"name": "gone"}), 201)
        self.assertStatus(admin.delete("/v1/tenants/gone"), 204)  # its id stays used
        self.assertStatus(admin.post("/v1/tenants/ta/projects", {"name": "train"}), 201)
        self.assertStatus(admin.request("PUT", "/v1/orgs/acme/quota",
                                        {"h100-80gb": {"guaranteed": 14}}), 200)
        self.assertStatus(admin.request("PUT", "/v1/tenants/ta/quota",
                                        {"h100-80gb": {"guaranteed": 7, "borrow_limit": 7}}), 200)
        _, secret = issue_token(self, admin, "tenant-user", tenant="ta", user="alice")
        user = d.client(secret)
        kept = create_alloc(self, user, {"gpus": MIG_1G, "cpus": 2})
        gone = create_alloc(self, user, {"gpus": MIG_1G})
        self.assertStatus(user.delete("/v1/allocations/" + gone["id"]), 200)
        create_alloc(self, admin, {"tenant": "tb", "pool": "cpu", "cpus": 1, "memory_mib": 16})
        self.assertStatus(admin.post("/v1/nodes/sm-n03/cordon", {}), 200)
        return secret, kept

    def snapshot(self, admin):
        allocs = sorted(admin.list_all("/v1/allocations"), key=lambda a: a["id"])
        return {"allocations": allocs,
                "tenants": sorted(admin.list_all("/v1/tenants"), key=lambda t: t["name"]),
                "tokens": sorted(admin.list_all("/v1/tokens"), key=lambda t: t["id"]),
                "orgs": admin.get("/v1/orgs").body["items"],
                "projects": admin.get("/v1/tenants/ta/projects").body["items"],
                "quota": admin.get("/v1/tenants/ta/quota").body,
                "nodes": admin.list_all("/v1/nodes"),
                "capacity": admin.get("/v1/capacity").body}

    def test_migrate_then_run_on_postgres(self):
        d = Daemon("small.yaml")
        self.addCleanup(d.cleanup)
        d.start()
        secret, kept = self.populate(d)
        before = self.snapshot(d.client())
        d.stop()
        db = os.path.join(d.state_dir, "state.db")
        counts = {t: sqlite_count(db, t) for t in TABLES}
        max_tenant = max(sqlite_count(db, "tenants"), 3)
        with sqlite3.connect("file:%s?mode=ro" % db, uri=True) as c:
            head_size = c.execute("SELECT size FROM audit_heads ORDER BY id DESC LIMIT 1").fetchone()[0]
        conninfo = self.fresh_db()

        p = self.migrate(d, conninfo)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn(conninfo, p.stdout + p.stderr, "the conninfo is never printed")
        for t in TABLES:  # the summary and the target hold every row
            self.assertRegex(p.stdout, r"(?m)^%s +%d$" % (t, counts[t]))
            self.assertEqual(int(psql(conninfo, 'SELECT count(*) FROM "%s"' % t)), counts[t], t)
        self.assertGreater(counts["audit_events"], 0)
        self.assertGreater(counts["fabric_keys"], 0)
        self.assertIn("signature verified", p.stdout)
        # the newest head signed on SQLite (at the stop) is the one verified
        self.assertIn("head size %d " % head_size, p.stdout)

        # the daemon on the PostgreSQL target shows exactly the same site
        d.extra_args += ["--store", conninfo]
        d.start()
        admin = d.client()
        self.assertEqual(admin.get("/v1/version").body["store"], "postgres")
        self.assertEqual(self.snapshot(admin), before)
        user = d.client(secret)  # a token issued on SQLite works on PostgreSQL
        self.assertEqual(user.get("/v1/allocations/" + kept["id"]).body["state"], "active")
        # a tenant id is never handed out again: the deleted tenant's neither
        self.assertStatus(admin.post("/v1/tenants", {"name": "after"}), 201)
        new_id = int(psql(conninfo, "SELECT id FROM tenants WHERE name = 'after'"))
        self.assertGreater(new_id, max_tenant)
        self.assertGreater(new_id, int(psql(conninfo, "SELECT max(id) FROM tenants "
                                                      "WHERE name <> 'after'")))
        self.assertStatus(user.delete("/v1/allocations/" + kept["id"]), 200)
        # one log across the move: it exports from PostgreSQL and verifies
        out = os.path.join(d.tmp, "audit.export")
        env = dict(os.environ, ISOSTACK_URL=d.url(), ISOSTACK_TOKEN=d.admin_token)
        p = self.isoctl("audit", "export", "--out", out, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = self.isoctl("audit", "verify", "--pubkey", os.path.join(d.state_dir, "audit.pub"),
                        out, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        d.stop()

    def test_refuses_a_target_with_rows(self):
        d = Daemon("small.yaml")
        self.addCleanup(d.cleanup)
        d.start()
        self.assertStatus(d.client().post("/v1/tenants", {"name": "ta"}), 201)
        d.stop()
        conninfo = self.fresh_db()
        p = self.migrate(d, conninfo)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        n = psql(conninfo, "SELECT count(*) FROM audit_events")
        p = self.migrate(d, conninfo)
        self.assertEqual(p.returncode, 5, p.stdout + p.stderr)
        self.assertIn("--to: store migrate: the target is not empty", p.stderr)
        self.assertEqual(psql(conninfo, "SELECT count(*) FROM audit_events"), n)
        self.assertEqual(psql(conninfo, "SELECT count(*) FROM tenants"), "1")

    def test_refuses_a_table_it_does_not_copy_and_an_unreachable_target(self):
        d = Daemon("small.yaml")
        self.addCleanup(d.cleanup)
        d.start()
        d.stop()
        # every table of the source is copied: one the copy does not know is
        # refused before anything is made (a schema change must extend the copy)
        with sqlite3.connect(os.path.join(d.state_dir, "state.db")) as c:
            c.execute("CREATE TABLE extra (x INTEGER)")
        conninfo = self.fresh_db()
        p = self.migrate(d, conninfo)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("--from: store migrate: SQLite table extra is not one this isoctl copies",
                      p.stderr)
        self.assertEqual(psql(conninfo, "SELECT count(*) FROM pg_tables WHERE tablename = "
                                        "'tenants'"), "0")
        with sqlite3.connect(os.path.join(d.state_dir, "state.db")) as c:
            c.execute("DROP TABLE extra")
        p = self.migrate(d, "host=%s/nosuch dbname=x password=sekrit connect_timeout=3"
                         % self.dir)
        self.assertEqual(p.returncode, 7, p.stdout + p.stderr)
        self.assertIn("--to: ", p.stderr)
        self.assertIn("cannot connect to PostgreSQL", p.stderr)
        self.assertNotIn("sekrit", p.stderr)

    def test_refuses_while_isostackd_runs(self):
        d = Daemon("small.yaml")
        self.addCleanup(d.cleanup)
        d.start()
        conninfo = self.fresh_db()
        p = self.migrate(d, conninfo)
        self.assertEqual(p.returncode, 5, p.stdout + p.stderr)
        self.assertIn("--from: an isostackd is running on %s" % d.state_dir, p.stderr)
        # nothing was made in the target, not even the schema
        self.assertEqual(psql(conninfo, "SELECT count(*) FROM pg_tables WHERE tablename = "
                                        "'tenants'"), "0")
        d.stop()

    def test_bad_arguments_name_the_flag(self):
        empty = tempfile.mkdtemp(prefix="iso-migrate-empty-")
        self.addCleanup(shutil.rmtree, empty, True)
        cases = [
            ([], "missing --from"),
            (["--from", empty], "--from: \"%s\" is not sqlite:DIR" % empty),
            (["--from", "sqlite:"], "--from: empty directory name"),
            (["--from", "sqlite:" + empty], "missing --to"),
            (["--from", "sqlite:" + empty, "--to", "mysql://h/db"],
             "--to: not a PostgreSQL conninfo"),
            (["--from", "sqlite:" + empty, "--to", self.base], "--from: no store at"),
            (["--from", "sqlite:" + empty, "--to", self.base, "--bogus"], "--bogus"),
        ]
        for argv, want in cases:
            p = self.isoctl("store", "migrate", *argv)
            self.assertEqual(p.returncode, 2, "%s: %s" % (argv, p.stderr))
            self.assertIn(want, p.stderr, argv)
        p = self.isoctl("store", "migrate", "--help")
        self.assertEqual(p.returncode, 0)
        self.assertIn("--from sqlite:DIR", p.stdout)


if __name__ == "__main__":
    harness.main()

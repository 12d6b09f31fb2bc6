#!/usr/bin/env python3
"""test_store_pg.py: isostackd --store with a real PostgreSQL (issue 16).

A throwaway cluster (scripts/pg-test-cluster.sh) in a private temp directory;
each test gets a database of its own. The daemon runs with --store CONNINFO:
its state goes to PostgreSQL and not to STATE_DIR/state.db, everything it
acknowledged is there after kill -9 and a restart (tenants, tokens,
allocations in place, the audit log verified at start), and bad --store
values fail the start naming the flag without echoing a password.

Run: python3 tests/api/test_store_pg.py PATH/TO/isostackd
Skips (exit 77, saying why) only when the PostgreSQL binaries are missing.
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (ApiTestCase, Daemon, PgCluster, T, create_alloc, create_tenant,  # noqa: E402
                     issue_token, needs_postgres, psql)

CONFIG = "small.yaml"
MIG_1G = {"count": 1, "profile": "1g.10gb"}


@needs_postgres
class TestStorePostgres(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PgCluster("iso-pg-api-")
        cls.dir, cls.base = cls.pg.dir, cls.pg.base

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()

    def fresh_db(self):
        return self.pg.fresh_db("iso_api")

    def test_state_in_postgres_survives_kill9(self):
        conninfo = self.fresh_db()
        d = Daemon(CONFIG, extra_args=["--store", conninfo])
        self.addCleanup(d.cleanup)
        d.start()
        admin = d.client()
        v = admin.get("/v1/version")
        self.assertStatus(v, 200)
        self.assertEqual(v.body["store"], "postgres")
        t = create_tenant(self, admin)["name"]
        _, secret = issue_token(self, admin, "tenant-user", tenant=t, user="alice")
        user = d.client(secret)
        a = create_alloc(self, user, {"gpus": MIG_1G, "cpus": 2})
        gone = create_alloc(self, user, {"gpus": MIG_1G})
        self.assertStatus(user.delete("/v1/allocations/" + gone["id"]), 200)
        # The state is in PostgreSQL, and no SQLite file was made beside it.
        self.assertFalse(os.path.exists(os.path.join(d.state_dir, "state.db")))
        self.assertEqual(psql(conninfo, "SELECT count(*) FROM tenants WHERE name = '%s'" % t), "1")
        self.assertEqual(psql(conninfo, "SELECT state FROM allocations WHERE id = '%s'"
                              % gone["id"]), "released")
        self.assertNotIn(conninfo, d.stderr_text(-1), "the conninfo is never logged")

        d.kill()
        d.start()
        admin = d.client()
        user = d.client(secret)  # the token survived too
        g = user.get("/v1/allocations/" + a["id"])
        self.assertStatus(g, 200)
        self.assertEqual(g.body["state"], "active")
        self.assertEqual(g.body["placement"], a["placement"])
        self.assertEqual(user.get("/v1/allocations/" + gone["id"]).body["state"], "released")
        self.assertStatus(admin.get("/v1/tenants/" + t), 200)
        # (Started at all means the audit log read back from PostgreSQL verified:
        # a log that fails its check stops the start.)
        self.assertStatus(user.delete("/v1/allocations/" + a["id"]), 200)
        d.stop()

    def start_fails(self, store):
        state = tempfile.mkdtemp(prefix="iso-pg-api-state-")
        self.addCleanup(shutil.rmtree, state, True)
        os.chmod(state, 0o700)
        out = subprocess.run([harness.Binaries.isostackd, "--config", harness.data_path(CONFIG),
                              "--state-dir", state, "--listen", "127.0.0.1:0", "--store", store],
                             capture_output=True, text=True, timeout=T(60))
        return out.returncode, out.stderr

    def test_bad_store_values(self):
        rc, err = self.start_fails("mysql://h/db")
        self.assertEqual(rc, 2)
        self.assertIn("--store", err)
        rc, err = self.start_fails("host='unterminated password=sekrit")
        self.assertNotEqual(rc, 0)
        self.assertIn("--store postgres: not a valid PostgreSQL conninfo", err)
        self.assertNotIn("sekrit", err)
        rc, err = self.start_fails("host=%s/nosuch dbname=x password=sekrit connect_timeout=3"
                                   % self.dir)
        self.assertNotEqual(rc, 0)
        self.assertIn("--store postgres: cannot connect to PostgreSQL", err)
        self.assertNotIn("sekrit", err)
        missing = self.base.replace("dbname=postgres", "dbname=nosuchdb")
        rc, err = self.start_fails(missing)
        self.assertNotEqual(rc, 0)
        self.assertIn("nosuchdb", err)


if __name__ == "__main__":
    harness.main()

#!/usr/bin/env python3
"""test_crash.py: nothing acknowledged is ever lost, and nothing half-done
survives a crash.

Several client threads create tenants and allocations, resize and release
them and delete tenants, as fast as the daemon answers, recording every
request that got a 2xx (acknowledged) and what it answered. At a random
moment the daemon is SIGKILLed; it is restarted on the same state dir and
everything acknowledged must be there (creates present, deletes and releases
reflected, an acknowledged active allocation exactly where it was placed), no
allocation may be left in a transient state or contradict its placement, and
GPU occupancy, node usage and capacity must agree with the live allocations
(no slice held twice). Repeated over several rounds with different delays on
the same, growing state dir; then a clean SIGTERM and one more start.

Run: python3 tests/api/test_crash.py PATH/TO/isostackd PATH/TO/isoctl
Set ISO_CRASH_SEED to replay a run (the seed is printed).
"""

import http.client
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T, check_allocation, check_gpu_view  # noqa: E402

CONFIG = "small.yaml"
SMALL_NODE_CPUS = {"sm-n01": 64, "sm-n02": 64, "sm-n03": 64, "sm-c01": 32}
ROUNDS = 5
WORKERS = 4
SHAPES = [
    {"gpus": {"count": 1, "profile": "1g.10gb"}},
    {"gpus": {"count": 2, "profile": "1g.10gb"}, "cpus": 2},
    {"gpus": {"count": 1, "profile": "2g.20gb"}, "memory_mib": 4096},
    {"gpus": {"count": 1, "profile": "3g.40gb"}, "cpus": 4},
    {"gpus": {"count": 1, "profile": "4g.40gb"}},
    {"gpus": {"count": 1, "profile": "7g.80gb"}},
    {"gpus": {"count": 1, "whole": True}, "cpus": 8},
    {"gpus": {"count": 4, "whole": True}},
    {"cpus": 4, "memory_mib": 1024, "pool": "cpu"},
]
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


class Ledger:
    """What the daemon acknowledged, and what was in flight when it died."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tenants = {}   # name -> "live" | "deleted" | "maybe-created" | "maybe-deleted"
        self.allocs = {}    # id -> {"body": last acked body, "uncertain": bool}
        self.failures = []  # unexpected answers before the kill
        self.acks = 0

    def fail(self, msg):
        with self.lock:
            self.failures.append(msg)


class Worker(threading.Thread):
    def __init__(self, port, token, ledger, killed, stop, rnd, prefix):
        super().__init__(daemon=True)
        self.port, self.token, self.ledger = port, token, ledger
        self.killed, self.stop, self.rnd, self.prefix = killed, stop, rnd, prefix
        self.my_tenants = []  # acked live tenants of this worker
        self.my_allocs = []   # ids this worker created
        self.n = 0

    def req(self, method, path, body=None):
        return harness.http_request(self.port, method, path, body=body, token=self.token,
                                    timeout=T(30))

    def run(self):
        try:
            while not self.stop.is_set():
                self.step()
        except TRANSPORT_ERRORS as e:
            if not self.killed.is_set():
                self.ledger.fail("%s: transport error before the kill: %r" % (self.name, e))
        except Exception as e:  # noqa: BLE001 - report, never hang the test
            self.ledger.fail("%s: %r" % (self.name, e))

    def unexpected(self, what, r):
        if not self.killed.is_set():
            self.ledger.fail("%s: unexpected answer to %s: %r" % (self.name, what, r))

    def step(self):
        L = self.ledger
        live = [a for a in self.my_allocs if L.allocs[a]["body"]["state"] not in harness.TERMINAL_STATES
                and not L.allocs[a]["uncertain"]]
        x = self.rnd.random()
        if not self.my_tenants or x < 0.08:
            return self.create_tenant()
        if x < 0.55:
            return self.create_alloc()
        if x < 0.80 and live:
            return self.release(self.rnd.choice(live))
        if x < 0.90 and live:
            return self.resize(self.rnd.choice(live))
        return self.delete_tenant()

    def create_tenant(self):
        self.n += 1
        name = "%s-%d" % (self.prefix, self.n)
        with self.ledger.lock:
            self.ledger.tenants[name] = "maybe-created"
        r = self.req("POST", "/v1/tenants", {"name": name})
        if r.status != 201:
            return self.unexpected("create tenant", r)
        with self.ledger.lock:
            self.ledger.tenants[name] = "live"
            self.ledger.acks += 1
        self.my_tenants.append(name)

    def create_alloc(self):
        body = dict(self.rnd.choice(SHAPES))
        body["tenant"] = self.rnd.choice(self.my_tenants)
        body["members"] = self.rnd.choice((1, 1, 1, 2))
        body["name"] = "crash-%d" % self.rnd.randrange(1 << 30)
        r = self.req("POST", "/v1/allocations", body)
        if r.status != 201 or r.body.get("state") not in ("active", "pending"):
            return self.unexpected("create allocation %r" % body, r)
        with self.ledger.lock:
            self.ledger.allocs[r.body["id"]] = {"body": r.body, "uncertain": False}
            self.ledger.acks += 1
        self.my_allocs.append(r.body["id"])

    def release(self, aid):
        with self.ledger.lock:
            self.ledger.allocs[aid]["uncertain"] = True
        r = self.req("DELETE", "/v1/allocations/" + aid)
        if r.status != 200 or r.body.get("state") != "released":
            return self.unexpected("release " + aid, r)
        with self.ledger.lock:
            self.ledger.allocs[aid] = {"body": r.body, "uncertain": False}
            self.ledger.acks += 1

    def resize(self, aid):
        with self.ledger.lock:
            cur = self.ledger.allocs[aid]["body"]
            self.ledger.allocs[aid]["uncertain"] = True
        want = max(1, min(3, cur["members"] + self.rnd.choice((-1, 1))))
        r = self.req("PATCH", "/v1/allocations/" + aid, {"members": want})
        if r.status == 200 and r.body.get("members") == want:
            with self.ledger.lock:
                self.ledger.allocs[aid] = {"body": r.body, "uncertain": False}
                self.ledger.acks += 1
            return
        if r.status == 409 and r.body["error"]["code"] in ("insufficient_capacity", "conflict"):
            # nothing changed; a pending one may have been placed meanwhile
            g = self.req("GET", "/v1/allocations/" + aid)
            if g.status == 200:
                with self.ledger.lock:
                    self.ledger.allocs[aid] = {"body": g.body, "uncertain": False}
            return
        self.unexpected("resize %s to %d" % (aid, want), r)

    def delete_tenant(self):
        L = self.ledger
        with L.lock:
            free = [t for t in self.my_tenants
                    if all(L.allocs[a]["body"]["tenant"] != t
                           or (L.allocs[a]["body"]["state"] in harness.TERMINAL_STATES
                               and not L.allocs[a]["uncertain"])
                           for a in self.my_allocs)]
        if not free:
            return self.create_alloc()
        name = self.rnd.choice(free)
        with L.lock:
            L.tenants[name] = "maybe-deleted"
        self.my_tenants.remove(name)
        r = self.req("DELETE", "/v1/tenants/" + name)
        if r.status != 204:
            return self.unexpected("delete tenant " + name, r)
        with L.lock:
            L.tenants[name] = "deleted"
            L.acks += 1


class TestCrash(ApiTestCase):
    def setUp(self):
        seed = os.environ.get("ISO_CRASH_SEED")
        self.seed = int(seed) if seed else random.randrange(1 << 30)
        sys.stderr.write("test_crash: seed %d (replay with ISO_CRASH_SEED=%d)\n" % (self.seed, self.seed))
        self.rnd = random.Random(self.seed)
        self.d = Daemon(CONFIG)
        self.d.start()
        self.ledger = Ledger()

    def tearDown(self):
        self.d.cleanup()

    def test_sigkill_loses_nothing_acknowledged(self):
        for rnd_no in range(ROUNDS):
            with self.subTest(round=rnd_no):
                self.one_round(rnd_no)
        # a clean stop and start agree too
        self.d.stop()
        self.d.start()
        self.verify("after the final clean restart")
        self.d.stop()

    def one_round(self, rnd_no):
        killed = threading.Event()
        stop = threading.Event()
        workers = [Worker(self.d.port, self.d.admin_token, self.ledger, killed, stop,
                          random.Random(self.rnd.randrange(1 << 30)), "c%d-w%d" % (rnd_no, w))
                   for w in range(WORKERS)]
        acks0 = self.ledger.acks
        delay = self.rnd.uniform(0.3, 2.5) * (1.0 if rnd_no % 2 == 0 else 0.5)
        for w in workers:
            w.start()
        time.sleep(delay)
        self.assertTrue(self.d.alive(), "isostackd died under load:\n" + self.d.stderr_tail())
        killed.set()
        self.d.kill()
        stop.set()
        for w in workers:
            w.join(T(60))
            self.assertFalse(w.is_alive(), "a client thread hangs after the kill")
        self.assertEqual(self.ledger.failures, [], "round %d: unexpected answers" % rnd_no)
        sys.stderr.write("test_crash: round %d killed after %.2fs, %d acknowledged\n"
                         % (rnd_no, delay, self.ledger.acks - acks0))
        # restart first, so that a failure here still leaves a daemon for the next round
        self.d.start()
        self.d.check_sanitizers()
        self.verify("round %d" % rnd_no)
        self.release_everything()

    def verify(self, when):
        admin = self.d.client()
        L = self.ledger
        tenants = {t["name"] for t in admin.list_all("/v1/tenants")}
        for name, st in sorted(L.tenants.items()):
            if st == "live":
                self.assertIn(name, tenants, "%s: acknowledged tenant %s lost" % (when, name))
            elif st == "deleted":
                self.assertNotIn(name, tenants, "%s: deleted tenant %s came back" % (when, name))
        allocs = admin.list_all("/v1/allocations")
        by_id = {a["id"]: a for a in allocs}
        self.assertEqual(len(by_id), len(allocs), "%s: an allocation listed twice" % when)
        for a in allocs:
            check_allocation(self, a)
            self.assertNotIn(a["state"], ("placed", "provisioning", "releasing"),
                             "%s: allocation left mid-transition: %r" % (when, a))
            if a["state"] not in harness.TERMINAL_STATES:
                self.assertIn(a["tenant"], tenants, "%s: live allocation of a missing tenant: %r" % (when, a))
        for aid, rec in sorted(L.allocs.items()):
            if L.tenants.get(rec["body"]["tenant"], "live") != "live":
                continue  # a deleted tenant's released allocations may go with it
            self.assertIn(aid, by_id, "%s: acknowledged allocation %s lost" % (when, aid))
            got, acked = by_id[aid], rec["body"]
            if rec["uncertain"]:
                continue
            if acked["state"] == "released":
                self.assertEqual(got["state"], "released", "%s: release of %s lost" % (when, aid))
            elif acked["state"] == "active":
                self.assertEqual((got["state"], got["members"], got["placement"], got["nodes"]),
                                 ("active", acked["members"], acked["placement"], acked["nodes"]),
                                 "%s: active allocation %s changed across the crash" % (when, aid))
            elif acked["state"] == "pending":
                self.assertIn(got["state"], ("pending", "active"), "%s: %r" % (when, got))
            for k in ("tenant", "name", "gpus", "cpus", "memory_mib", "owner", "created"):
                self.assertEqual(got[k], acked[k], "%s: %s.%s changed" % (when, aid, k))
        gpus = admin.get("/v1/gpus").body["items"]
        check_gpu_view(self, gpus, allocs)
        self.check_usage(when, admin, allocs, gpus)
        # and the daemon still works: one more allocation lands and goes
        t = admin.post("/v1/tenants", {"name": harness.uniq("after")})
        self.assertStatus(t, 201)
        a = admin.post("/v1/allocations", {"tenant": t.body["name"], "pool": "cpu", "cpus": 1})
        self.assertStatus(a, 201)
        self.assertStatus(admin.delete("/v1/allocations/" + a.body["id"]), 200)
        self.assertStatus(admin.delete("/v1/tenants/" + t.body["name"]), 204)

    def check_usage(self, when, admin, allocs, gpus):
        holding = [a for a in allocs if a["state"] in harness.HOLDING_STATES]
        cpus = {n: 0 for n in SMALL_NODE_CPUS}
        mem = {n: 0 for n in SMALL_NODE_CPUS}
        members = {n: 0 for n in SMALL_NODE_CPUS}
        for a in holding:
            for m in a["nodes"]:
                cpus[m["node"]] += a["cpus"]
                mem[m["node"]] += a["memory_mib"]
                members[m["node"]] += 1
        for n in admin.list_all("/v1/nodes"):
            self.assertEqual((n["cpus_used"], n["memory_mib_used"], n["members"]),
                             (cpus[n["name"]], mem[n["name"]], members[n["name"]]),
                             "%s: node %s usage disagrees with its allocations" % (when, n["name"]))
            self.assertLessEqual(n["cpus_used"], n["cpus"])
        cap = admin.get("/v1/capacity").body
        self.assertEqual(cap["memory_slices_free"], sum(g["free_slices"] for g in gpus), when)
        self.assertEqual(cap["compute_slices_free"],
                         sum(g["compute_slices"] - g["compute_used"] for g in gpus), when)
        self.assertEqual(cap["gpus_free"], sum(1 for g in gpus if not g["instances"]), when)
        self.assertEqual(cap["cpus_free"], cap["cpus"] - sum(cpus.values()), when)
        self.assertEqual(cap["memory_mib_free"], cap["memory_mib"] - sum(mem.values()), when)

    def release_everything(self):
        admin = self.d.client()
        for a in admin.list_all("/v1/allocations"):
            if a["state"] not in harness.TERMINAL_STATES:
                r = admin.delete("/v1/allocations/" + a["id"])
                self.assertStatus(r, 200)
                with self.ledger.lock:
                    self.ledger.allocs[a["id"]] = {"body": r.body, "uncertain": False}
        self.assertEqual(admin.get("/v1/allocations?state=active").body["items"], [])
        self.assertEqual(admin.get("/v1/allocations?state=pending").body["items"], [])


if __name__ == "__main__":
    harness.main()

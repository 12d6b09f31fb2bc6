#!/usr/bin/env python3
"""test_audit.py: the tamper-evident audit log on a real isostackd and the real
isoctl: what is recorded (actor, action, object, outcome, request id, never a
secret), that a change and its event are one transaction, RFC 6962 inclusion
and consistency proofs checked by an RFC 9162 verifier written here
(independent of the C code), tenant scoping of events, proofs and exports,
`isoctl audit export` / `isoctl audit verify` round trips (Ed25519 signatures
are checked there: Python's standard library has no Ed25519), and tampering
with the real SQLite file and with export files.

Run: python3 tests/api/test_audit.py PATH/TO/isostackd PATH/TO/isoctl
"""

import base64
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (ApiTestCase, Daemon, T, create_alloc, create_tenant,  # noqa: E402
                     free_port, issue_token, token_id, uniq)

CONFIG = "small.yaml"
EXIT_VERIFY = 8
MIG_SHAPE = {"members": 1, "gpus": {"count": 1, "profile": "1g.10gb"}}
# A valid Ed25519 public key that is no daemon's (RFC 8032, test 1).
RFC8032_PK = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")

# ---------------------------------------------------------------- RFC 6962 / 9162


def sha256(b):
    return hashlib.sha256(b).digest()


def leaf_hash(data):
    return sha256(b"\x00" + data)


def node_hash(left, right):
    return sha256(b"\x01" + left + right)


def _split(n):
    """Largest power of two smaller than n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves):
    """RFC 6962 2.1 Merkle Tree Hash over leaf hashes."""
    n = len(leaves)
    if n == 0:
        return sha256(b"")
    if n == 1:
        return leaves[0]
    k = _split(n)
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def rfc6962_path(m, leaves):
    """RFC 6962 2.1.1 PATH(m, D[n]): the reference inclusion proof."""
    n = len(leaves)
    if n <= 1:
        return []
    k = _split(n)
    if m < k:
        return rfc6962_path(m, leaves[:k]) + [mth(leaves[k:])]
    return rfc6962_path(m - k, leaves[k:]) + [mth(leaves[:k])]


def rfc6962_proof(m, leaves):
    """RFC 6962 2.1.2 PROOF(m, D[n]): the reference consistency proof."""
    def sub(m, d, b):
        n = len(d)
        if m == n:
            return [] if b else [mth(d)]
        k = _split(n)
        if m <= k:
            return sub(m, d[:k], b) + [mth(d[k:])]
        return sub(m - k, d[k:], False) + [mth(d[:k])]
    return sub(m, leaves, True)


def verify_inclusion(index, size, leaf, proof, root):
    """RFC 9162 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(first, second, first_root, second_root, proof):
    """RFC 9162 2.1.4.2 (first == second: an empty proof and equal roots)."""
    if first > second or first == 0:
        return False
    if first == second:
        return not proof and first_root == second_root
    if not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:
        path = [first_root] + path
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_root and sr == second_root


def unhex(xs):
    return [bytes.fromhex(x) for x in xs]


# ---------------------------------------------------------------- helpers


def events_of(client, query=""):
    return client.list_all("/v1/audit/events" + query)


def ev(item):
    return item["event"]


def find(items, **want):
    """Items whose event matches every want: action=, outcome=, request_id=,
    object_id=, object_kind=."""
    out = []
    for it in items:
        e = ev(it)
        got = {"action": e["action"], "outcome": e["outcome"], "request_id": e["request_id"],
               "object_id": e["object"]["id"], "object_kind": e["object"]["kind"]}
        if all(got[k] == v for k, v in want.items()):
            out.append(it)
    return out


def rid(tag):
    return "rq-%s-%s" % (tag, os.urandom(5).hex())


def secret_of(token):
    return token.split("_", 2)[2]


class Run:
    def __init__(self, argv, p):
        self.argv, self.rc, self.out, self.err = argv, p.returncode, p.stdout, p.stderr

    def __repr__(self):
        return "%s -> %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
            " ".join(self.argv), self.rc, self.out[-3000:], self.err[-3000:])


class AuditCase(harness.SharedDaemonCase):
    """A daemon per class plus the isoctl runner."""

    config = CONFIG

    @classmethod
    def setUpClass(cls):
        if not harness.Binaries.isoctl or not os.path.exists(harness.Binaries.isoctl):
            raise AssertionError("no isoctl binary: pass it as argv[2]")
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="isoaudit-")

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def isoctl(self, *argv, token="admin", daemon=None):
        d = daemon or getattr(self, "d", None)
        e = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
        if d is not None and d.port:
            e["ISOSTACK_URL"] = d.url()
        if token == "admin":
            token = d.admin_token
        if token is not None:
            e["ISOSTACK_TOKEN"] = token
        p = subprocess.run([harness.Binaries.isoctl] + list(argv), env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=T(120))
        r = Run(["isoctl"] + list(argv), p)
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, r.err, "sanitizer report from isoctl: %r" % r)
        return r

    def ok(self, *argv, **kw):
        r = self.isoctl(*argv, **kw)
        self.assertEqual(r.rc, 0, repr(r))
        return r

    def verify(self, *files, pubkey=None, state_dir=None):
        pubkey = pubkey or os.path.join(state_dir or self.d.state_dir, "audit.pub")
        return self.isoctl("audit", "verify", "--pubkey", pubkey, *files, token=None)

    def assertVerifies(self, *files, **kw):
        r = self.verify(*files, **kw)
        self.assertEqual(r.rc, 0, repr(r))
        for f in files:
            self.assertRegex(r.out, r"(?m)^%s: ok \(\d+ events, \d+ heads\)$" % re.escape(f))
        return r

    def assertVerifyFails(self, file, seq=None, **kw):
        """verify exits 8 and names the first bad seq (when given)."""
        r = self.verify(file, **kw)
        self.assertEqual(r.rc, EXIT_VERIFY, repr(r))
        line = [ln for ln in r.out.splitlines() if ln.startswith(file + ": ")]
        self.assertEqual(len(line), 1, repr(r))
        self.assertIn(": FAILED", line[0], repr(r))
        if seq is not None:
            self.assertRegex(line[0], r"^%s: FAILED at seq %d \(line \d+\): \S" % (re.escape(file), seq),
                             repr(r))
        return line[0]


# ---------------------------------------------------------------- self-test of the verifier


class TestRfc9162Verifier(ApiTestCase):
    """The Python verifier this file trusts, against RFC 6962's own proof
    definitions: every (m, n) up to 33 leaves, and one changed hash fails."""

    def test_reference_proofs_verify_and_tampering_fails(self):
        leaves = [leaf_hash(b"event %d" % i) for i in range(33)]
        for n in range(1, 34):
            root = mth(leaves[:n])
            for m in range(n):
                path = rfc6962_path(m, leaves[:n])
                self.assertTrue(verify_inclusion(m, n, leaves[m], path, root), (m, n))
                self.assertFalse(verify_inclusion(m, n, leaves[(m + 1) % 33], path, root)
                                 if n > 1 else False, (m, n))
                if path:
                    bad = list(path)
                    bad[len(bad) // 2] = sha256(bad[len(bad) // 2])
                    self.assertFalse(verify_inclusion(m, n, leaves[m], bad, root), (m, n))
                    self.assertFalse(verify_inclusion(m, n, leaves[m], path[:-1], root), (m, n))
                self.assertFalse(verify_inclusion(m, m, leaves[m], path, root), (m, n))
            for m in range(1, n + 1):
                proof = rfc6962_proof(m, leaves[:n])
                old = mth(leaves[:m])
                self.assertTrue(verify_consistency(m, n, old, root, proof), (m, n))
                if m < n:
                    self.assertFalse(verify_consistency(m, n, sha256(old), root, proof), (m, n))
                    self.assertFalse(verify_consistency(m, n, old, sha256(root), proof), (m, n))
                    bad = list(proof)
                    bad[0] = sha256(bad[0])
                    self.assertFalse(verify_consistency(m, n, old, root, bad), (m, n))


# ---------------------------------------------------------------- recording


class TestRecording(AuditCase):
    """What the log holds after the operations an auditor asks about."""

    def test_operations_are_recorded_with_actor_object_outcome_and_request_id(self):
        adm = self.admin
        admin_id = token_id(self.d.admin_token)
        t = uniq("rec")
        ids = {k: rid(k) for k in ("tenant", "token", "create", "resize", "release", "cordon",
                                   "denied", "unauth", "dup", "read", "uncordon")}

        def hdr(k):
            return {"X-Request-Id": ids[k]}

        self.assertStatus(adm.post("/v1/tenants", {"name": t}, headers=hdr("tenant")), 201)
        r = adm.post("/v1/tokens", {"role": "tenant-admin", "tenant": t, "user": "rec-admin"},
                     headers=hdr("token"))
        self.assertStatus(r, 201)
        ta_tok, ta_id = r.body["token"], r.body["id"]
        tu, tu_tok = issue_token(self, adm, "tenant-user", tenant=t, user="rec-user")
        ta = adm.with_token(ta_tok)
        r = ta.post("/v1/allocations", MIG_SHAPE, headers=hdr("create"))
        self.assertStatus(r, 201)
        aid = r.body["id"]
        self.assertStatus(ta.patch("/v1/allocations/" + aid, {"members": 2}, headers=hdr("resize")), 200)
        self.assertStatus(ta.delete("/v1/allocations/" + aid, headers=hdr("release")), 200)
        self.assertStatus(adm.post("/v1/nodes/sm-c01/cordon", headers=hdr("cordon")), 200)
        self.assertStatus(adm.post("/v1/nodes/sm-c01/uncordon", headers=hdr("uncordon")), 200)
        r = adm.with_token(tu_tok).post("/v1/tenants", {"name": uniq("nope")}, headers=hdr("denied"))
        self.assertStatus(r, 403)
        r = adm.with_token("iso_000000000000_" + "A" * 43).get("/v1/whoami", headers=hdr("unauth"))
        self.assertStatus(r, 401)
        self.assertStatus(adm.post("/v1/tenants", {"name": t}, headers=hdr("dup")), 409)
        self.assertStatus(adm.get("/v1/audit/head", headers=hdr("read")), 200)

        items = events_of(adm)
        self.assertEqual([it["seq"] for it in items], list(range(len(items))), "seqs are 0..n-1")

        def one(k, action, outcome="success"):
            got = find(items, request_id=ids[k], action=action)
            self.assertEqual(len(got), 1, "%s %s: %r" % (k, action, find(items, request_id=ids[k])))
            e = ev(got[0])
            self.assertEqual(e["outcome"], outcome, e)
            self.assertEqual(e["seq"], got[0]["seq"], e)
            self.assertIsInstance(e["time"], int)
            self.assertEqual(e["source"], "127.0.0.1", e)
            return e

        def actor(e, tok, role, tenant=""):
            self.assertEqual((e["actor"]["token"], e["actor"]["role"], e["actor"]["tenant"]),
                             (tok, role, tenant), e)

        def obj(e, kind, oid, tenant):
            self.assertEqual((e["object"]["kind"], e["object"]["id"], e["object"]["tenant"]),
                             (kind, oid, tenant), e)

        e = one("tenant", "tenant.create")
        actor(e, admin_id, "cluster-admin")
        obj(e, "tenant", t, t)
        self.assertEqual(e["reason"], "")
        e = one("token", "token.issue")
        actor(e, admin_id, "cluster-admin")
        obj(e, "token", ta_id, t)
        self.assertEqual(e["details"]["role"], "tenant-admin", e)
        for action in ("allocation.create", "allocation.place", "allocation.provision"):
            e = one("create", action)
            actor(e, ta_id, "tenant-admin", t)
            obj(e, "allocation", aid, t)
        e = one("resize", "allocation.resize")
        actor(e, ta_id, "tenant-admin", t)
        obj(e, "allocation", aid, t)
        self.assertEqual((e["details"]["from"], e["details"]["to"]), (1, 2), e)
        e = one("release", "allocation.release")
        actor(e, ta_id, "tenant-admin", t)
        obj(e, "allocation", aid, t)
        e = one("cordon", "node.cordon")
        actor(e, admin_id, "cluster-admin")
        obj(e, "node", "sm-c01", "")
        self.assertEqual((e["details"]["from"], e["details"]["to"]), ("schedulable", "cordoned"))
        one("uncordon", "node.uncordon")
        e = one("denied", "tenant.create", "denied")
        actor(e, tu["id"], "tenant-user", t)
        self.assertTrue(e["reason"], e)
        # Without a valid token: counted, not an event each (docs/audit.md); the
        # read above ended the interval, so the count is already there.
        got = [it for it in find(items, action="whoami", outcome="denied", request_id="")
               if ids["unauth"] in ev(it)["details"]["request_ids"]]
        self.assertEqual(len(got), 1, find(items, action="whoami"))
        e = ev(got[0])
        actor(e, "", "anonymous")
        self.assertEqual(e["source"], "127.0.0.1", e)
        self.assertEqual(e["details"]["count"], 1, e)
        self.assertTrue(e["reason"], e)
        e = one("dup", "tenant.create", "error")
        actor(e, admin_id, "cluster-admin")
        self.assertTrue(e["reason"], e)
        e = one("read", "audit.read")
        actor(e, admin_id, "cluster-admin")
        self.assertEqual((e["object"]["kind"], e["object"]["id"]), ("audit", "head"))

        # The daemon's own start, first of all, by the system.
        e = ev(items[0])
        self.assertEqual(e["action"], "daemon.start", e)
        actor(e, "", "system")
        self.assertEqual((e["object"]["kind"], e["object"]["id"]), ("daemon", "apitest-small"))
        self.assertEqual(e["request_id"], "")

    def test_every_read_of_the_log_is_recorded(self):
        adm = self.admin
        ids = {k: rid(k) for k in ("events", "head", "inclusion", "consistency")}
        size = adm.get("/v1/audit/head").body["size"]
        self.assertStatus(adm.get("/v1/audit/events?limit=1", headers={"X-Request-Id": ids["events"]}), 200)
        self.assertStatus(adm.get("/v1/audit/head", headers={"X-Request-Id": ids["head"]}), 200)
        self.assertStatus(adm.get("/v1/audit/proof/inclusion?seq=0&size=%d" % size,
                                  headers={"X-Request-Id": ids["inclusion"]}), 200)
        self.assertStatus(adm.get("/v1/audit/proof/consistency?from=1&to=%d" % size,
                                  headers={"X-Request-Id": ids["consistency"]}), 200)
        items = events_of(adm)
        for what, r in ids.items():
            got = find(items, request_id=r)
            self.assertEqual([(ev(g)["action"], ev(g)["object"]["kind"], ev(g)["object"]["id"])
                              for g in got], [("audit.read", "audit", what)], what)

    def test_canonical_bytes_leaf_and_parsed_event_agree(self):
        items = events_of(self.admin)
        self.assertTrue(items)
        for it in items:
            canon = it["canonical"].encode("ascii")  # canonical encoding is ASCII only
            self.assertEqual(it["leaf"], leaf_hash(canon).hex(), it)
            self.assertEqual(json.loads(canon), it["event"], it)
            # Compact, keys sorted at every level, ASCII (docs/audit.md).
            self.assertEqual(json.dumps(it["event"], sort_keys=True, separators=(",", ":"),
                                        ensure_ascii=True), it["canonical"], it)

    def test_restart_records_stop_then_start(self):
        before = len(events_of(self.admin))
        self.d.restart()
        self.admin = self.d.client()
        type(self).admin = self.admin
        items = events_of(self.admin)
        actions = [ev(it)["action"] for it in items]
        self.assertGreater(len(items), before)
        stops = [i for i, a in enumerate(actions) if a == "daemon.stop"]
        self.assertTrue(stops, actions[-10:])
        s = stops[-1]
        self.assertEqual(actions[s + 1], "daemon.start", actions[s - 2:s + 3])
        for i in (s, s + 1):
            e = ev(items[i])
            self.assertEqual((e["actor"]["role"], e["outcome"], e["object"]["kind"]),
                             ("system", "success", "daemon"), e)
        # The stop is covered by a signed head written at shutdown, which the
        # start-up check accepted.
        head = self.admin.get("/v1/audit/head").body
        self.assertGreaterEqual(head["size"], s + 2)

    def test_no_secret_anywhere(self):
        adm = self.admin
        t = create_tenant(self, adm)["name"]
        secrets = [self.d.admin_token]
        for role, tenant in (("auditor", None), ("tenant-admin", t), ("tenant-user", t)):
            _, tok = issue_token(self, adm, role, tenant=tenant, user="u-" + role)
            secrets.append(tok)
            self.assertStatus(adm.with_token(tok).get("/v1/whoami"), 200)
        # A refused attempt with a well-formed but wrong secret for a real id.
        wrong = "iso_%s_%s" % (token_id(secrets[1]), "B" * 43)
        self.assertStatus(adm.with_token(wrong).get("/v1/whoami"), 401)
        secrets.append(wrong)
        self.assertStatus(adm.delete("/v1/tokens/" + token_id(secrets[2])), 204)
        export = self.path("nosecret.jsonl")
        self.ok("audit", "export", "--out", export)
        with open(export) as f:
            text = f.read()
        raw = adm.get("/v1/audit/events?limit=1000").text
        for s in secrets:
            for blob, what in ((raw, "API"), (text, "export")):
                self.assertNotIn(secret_of(s), blob, what)
                self.assertNotIn(s, blob, what)


class TestSameTransaction(AuditCase):
    """An acknowledged change always has its event; a refused one has an
    error/denied event and no change, even across a kill -9."""

    def test_burst_then_kill(self):
        adm = self.admin
        names = [uniq("burst") for _ in range(24)]
        names += names[:6]  # duplicates: some of these are refused (409)
        answers = {}
        lock = threading.Lock()

        def worker(chunk):
            for n in chunk:
                r = adm.post("/v1/tenants", {"name": n}, headers={"X-Request-Id": "b-" + n[-12:]})
                with lock:
                    answers.setdefault(n, []).append(r.status)

        threads = [threading.Thread(target=worker, args=(names[i::6],)) for i in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.d.kill()
        self.d.start()
        adm = self.d.client()
        type(self).admin = adm
        for n, st in answers.items():
            self.assertEqual(sorted(st), [201] if len(st) == 1 else [201, 409], (n, st))
        items = events_of(adm)
        created = [ev(it)["object"]["id"] for it in find(items, action="tenant.create", outcome="success")]
        failed = [it for it in find(items, action="tenant.create", outcome="error")]
        burst = set(answers)
        self.assertEqual(sorted(x for x in created if x in burst), sorted(burst),
                         "one success event per acknowledged tenant")
        self.assertEqual(len(failed), 6, "one error event per refused duplicate")
        tenants = {x["name"] for x in adm.list_all("/v1/tenants")}
        self.assertTrue(burst <= tenants)

    def test_refused_changes_have_an_event_and_no_change(self):
        adm = self.admin
        t = create_tenant(self, adm)["name"]
        _, tu_tok = issue_token(self, adm, "tenant-user", tenant=t, user="tx-user")
        a = create_alloc(self, adm, dict(MIG_SHAPE, tenant=t))
        # 409: a tenant with live allocations cannot be deleted.
        r = adm.delete("/v1/tenants/" + t, headers={"X-Request-Id": "tx-del"})
        self.assertStatus(r, 409)
        self.assertStatus(adm.get("/v1/tenants/" + t), 200)
        # 409 insufficient_capacity: growth that cannot be placed.
        r = adm.patch("/v1/allocations/" + a["id"], {"members": 1000}, headers={"X-Request-Id": "tx-grow"})
        self.assertIn(r.status, (409, 422), repr(r))
        self.assertEqual(adm.get("/v1/allocations/" + a["id"]).body["members"], 1)
        # 403: a tenant-user may not cordon.
        r = adm.with_token(tu_tok).post("/v1/nodes/sm-n01/cordon", headers={"X-Request-Id": "tx-cordon"})
        self.assertStatus(r, 403)
        self.assertEqual(adm.get("/v1/nodes/sm-n01").body["state"], "schedulable")
        items = events_of(adm)
        for r_id, action, outcome in (("tx-del", "tenant.delete", "error"),
                                      ("tx-grow", "allocation.resize", "error"),
                                      ("tx-cordon", "node.cordon", "denied")):
            got = find(items, request_id=r_id)
            self.assertEqual([(ev(g)["action"], ev(g)["outcome"]) for g in got], [(action, outcome)], r_id)
            self.assertTrue(ev(got[0])["reason"])
        self.assertEqual(find(items, action="tenant.delete", outcome="success", object_id=t), [])
        self.assertEqual(find(items, action="node.cordon", object_id="sm-n01", outcome="success"), [])


# ---------------------------------------------------------------- proofs


class TestProofs(AuditCase):
    def _head(self):
        r = self.admin.get("/v1/audit/head")
        self.assertStatus(r, 200)
        h = r.body
        self.assertEqual(set(h), {"size", "root", "time_ms", "time", "signature", "key_id"}, h)
        # The signer's key id: the first 8 bytes of SHA-256 of its public key.
        with open(os.path.join(self.d.state_dir, "audit.pub")) as f:
            pk = base64.b64decode(f.read().strip()[len("ed25519:"):])
        self.assertEqual(h["key_id"], hashlib.sha256(pk).hexdigest()[:16], h)
        self.assertTime(h["time"])
        self.assertRegex(h["root"], r"^[0-9a-f]{64}$")
        return h

    def test_inclusion_proofs_verify_against_the_signed_head(self):
        for i in range(5):
            create_tenant(self, self.admin, name=uniq("proof"))
        head = self._head()
        size, root = head["size"], bytes.fromhex(head["root"])
        items = events_of(self.admin)
        leaves = [bytes.fromhex(it["leaf"]) for it in items]
        # The whole log up to the head rebuilds its root.
        self.assertEqual(mth(leaves[:size]), root)
        for seq in sorted({0, 1, size // 3, size // 2, size - 2, size - 1}):
            r = self.admin.get("/v1/audit/proof/inclusion?seq=%d&size=%d" % (seq, size))
            self.assertStatus(r, 200)
            self.assertEqual((r.body["seq"], r.body["size"], r.body["leaf"]), (seq, size, items[seq]["leaf"]))
            proof = unhex(r.body["proof"])
            self.assertTrue(verify_inclusion(seq, size, leaves[seq], proof, root), r)
            self.assertEqual(proof, rfc6962_path(seq, leaves[:size]))
            if proof:
                proof[0] = sha256(proof[0])
                self.assertFalse(verify_inclusion(seq, size, leaves[seq], proof, root))
        # The same proofs inline in the event list (?size=N).
        page = self.admin.get("/v1/audit/events?size=%d&limit=1000" % size).body["items"]
        for it in page:
            if it["seq"] < size:
                inc = it["inclusion"]
                self.assertEqual(inc["size"], size)
                self.assertTrue(verify_inclusion(it["seq"], size, bytes.fromhex(it["leaf"]),
                                                 unhex(inc["proof"]), root), it)
            else:
                self.assertNotIn("inclusion", it)

    def test_consistency_between_two_heads(self):
        h1 = self._head()
        for i in range(7):
            create_tenant(self, self.admin, name=uniq("cons"))
        h2 = self._head()
        self.assertGreater(h2["size"], h1["size"])
        r = self.admin.get("/v1/audit/proof/consistency?from=%d&to=%d" % (h1["size"], h2["size"]))
        self.assertStatus(r, 200)
        self.assertEqual((r.body["from"], r.body["to"]), (h1["size"], h2["size"]))
        proof = unhex(r.body["proof"])
        r1, r2 = bytes.fromhex(h1["root"]), bytes.fromhex(h2["root"])
        self.assertTrue(verify_consistency(h1["size"], h2["size"], r1, r2, proof))
        self.assertFalse(verify_consistency(h1["size"], h2["size"], r1, sha256(r2), proof))
        leaves = [bytes.fromhex(it["leaf"]) for it in events_of(self.admin)]
        self.assertEqual(proof, rfc6962_proof(h1["size"], leaves[:h2["size"]]))
        # Bad ranges.
        for q in ("from=0&to=%d" % h2["size"], "from=%d&to=%d" % (h2["size"], h1["size"]),
                  "from=1&to=%d" % (h2["size"] + 10 ** 6), "from=x&to=2", "to=2"):
            self.assertError(self.admin.get("/v1/audit/proof/consistency?" + q), 400, "invalid_argument")

    def test_bad_proof_queries(self):
        size = self._head()["size"]
        for q in ("seq=%d&size=%d" % (size, size), "seq=0&size=%d" % (size + 10 ** 6), "seq=-1&size=2",
                  "seq=1", "size=2", "seq=a&size=2", "seq=0&size=2&x=1"):
            self.assertError(self.admin.get("/v1/audit/proof/inclusion?" + q), 400, "invalid_argument")
        for q in ("size=%d" % (size + 10 ** 6), "after=-1", "limit=0", "limit=1001", "bogus=1"):
            self.assertError(self.admin.get("/v1/audit/events?" + q), 400, "invalid_argument")

    def test_head_signature_verifies_through_isoctl(self):
        out = self.path("proofs-full.jsonl")
        r = self.ok("audit", "export", "--out", out)
        self.assertRegex(r.out, r"full export: \d+ events, 1 heads")
        self.assertVerifies(out)
        with open(out) as f:
            lines = [json.loads(x) for x in f]
        head = lines[0]
        self.assertEqual(head["type"], "head")
        self.assertEqual([x["seq"] for x in lines[1:]], list(range(head["size"])))
        self.assertEqual(mth([bytes.fromhex(x["leaf"]) for x in lines[1:]]).hex(), head["root"])
        # A forged signature (another valid-looking base64 string) fails.
        forged = self.path("proofs-forged.jsonl")
        sig = bytearray(base64.b64decode(head["signature"]))
        sig[10] ^= 0x01
        with open(out) as f:
            text = f.read().split("\n", 1)
        text[0] = text[0].replace(head["signature"], base64.b64encode(bytes(sig)).decode())
        with open(forged, "w") as f:
            f.write("\n".join(text))
        self.assertVerifyFails(forged)

    def test_pubkey_file_api_and_isoctl_agree(self):
        key = os.path.join(self.d.state_dir, "audit.key")
        pub = os.path.join(self.d.state_dir, "audit.pub")
        self.assertEqual(os.stat(key).st_mode & 0o777, 0o600)
        with open(pub) as f:
            text = f.read()
        self.assertRegex(text, r"^ed25519:[A-Za-z0-9+/]{43}=\n$")
        r = self.admin.get("/v1/audit/pubkey")
        self.assertStatus(r, 200)
        self.assertEqual(r.body, {"algorithm": "ed25519", "key": text.strip()})
        self.assertEqual(self.ok("audit", "pubkey").out, text)
        out = self.path("fetched.pub")
        self.ok("audit", "pubkey", "--out", out)
        with open(out) as f:
            self.assertEqual(f.read(), text)
        self.assertEqual(json.loads(self.ok("audit", "pubkey", "-o", "json").out), r.body)
        # The fetched key verifies an export as the file does.
        exp = self.path("pubkey-full.jsonl")
        self.ok("audit", "export", "--out", exp)
        self.assertVerifies(exp, pubkey=out)
        # Another (valid) key does not: RFC 8032's first test key.
        other = self.path("other.pub")
        rfc8032 = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        with open(other, "w") as f:
            f.write("ed25519:" + base64.b64encode(rfc8032).decode() + "\n")
        self.assertVerifyFails(exp, pubkey=other)


# ---------------------------------------------------------------- tenant scoping


class TestTenantScoping(AuditCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        adm = cls.admin
        tc = cls("run")
        cls.names = {}
        cls.secrets = {}
        for x in ("A", "B"):
            t = create_tenant(tc, adm, name=uniq("scope" + x.lower()))["name"]
            ta, ta_tok = issue_token(tc, adm, "tenant-admin", tenant=t, user="boss-" + os.urandom(3).hex())
            tu, tu_tok = issue_token(tc, adm, "tenant-user", tenant=t, user="worker-" + os.urandom(3).hex())
            a1 = create_alloc(tc, adm.with_token(ta_tok), MIG_SHAPE)
            a2 = create_alloc(tc, adm.with_token(tu_tok), dict(MIG_SHAPE, name="job-" + os.urandom(3).hex()))
            adm.with_token(ta_tok).patch("/v1/allocations/" + a1["id"], {"members": 2})
            adm.with_token(tu_tok).delete("/v1/allocations/" + a2["id"])
            # A refused attempt of this tenant's admin on nothing of its own.
            adm.with_token(ta_tok).post("/v1/tenants", {"name": uniq("no")})
            cls.names[x] = {"tenant": t, "tokens": [ta["id"], tu["id"]], "users": [ta["user"], tu["user"]],
                            "allocs": [a1["id"], a2["id"]], "alloc_names": [a2["name"]]}
            cls.secrets[x] = {"admin": ta_tok, "user": tu_tok}
        # B's admin reads the log too: its reads are B's events.
        adm.with_token(cls.secrets["B"]["admin"]).get("/v1/audit/events")

    def strings_of(self, x):
        n = self.names[x]
        return [n["tenant"]] + n["tokens"] + n["users"] + n["allocs"] + n["alloc_names"]

    def assertNothingOf(self, x, text, what):
        for s in self.strings_of(x):
            self.assertNotIn(s, text, "%s of tenant %s in %s" % (s, x, what))

    def test_tenant_admin_sees_only_its_tenants_events(self):
        a_admin = self.admin.with_token(self.secrets["A"]["admin"])
        items = events_of(a_admin)
        self.assertTrue(items)
        ta = self.names["A"]["tenant"]
        for it in items:
            self.assertEqual(ev(it)["object"]["tenant"], ta, it)
        actions = {ev(it)["action"] for it in items}
        for want in ("tenant.create", "token.issue", "allocation.create", "allocation.resize",
                     "allocation.release", "audit.read"):
            self.assertIn(want, actions)
        # The same as the admin's view of tenant A (less the reads since).
        mine = {it["seq"]: it for it in items}
        adm_view = {it["seq"]: it for it in events_of(self.admin, "?tenant=" + ta)}
        for seq, it in mine.items():
            self.assertEqual(adm_view[seq], it)
        # And the raw answers carry nothing of B.
        for q in ("", "?tenant=" + ta, "?size=%d" % a_admin.get("/v1/audit/head").body["size"]):
            r = a_admin.get("/v1/audit/events" + q + ("&" if q else "?") + "limit=1000")
            self.assertStatus(r, 200)
            self.assertNothingOf("B", r.text, "events" + q)
        # Another tenant is as absent as a missing one.
        r1 = a_admin.get("/v1/audit/events?tenant=" + self.names["B"]["tenant"])
        r2 = a_admin.get("/v1/audit/events?tenant=" + uniq("nosuch"))
        self.assertError(r1, 404, "not_found", "tenant")
        self.assertEqual(r1.body["error"], r2.body["error"])
        self.assertNothingOf("B", r1.text, "404")

    def test_tenant_user_is_forbidden(self):
        tu = self.admin.with_token(self.secrets["A"]["user"])
        for p in ("/v1/audit/events", "/v1/audit/head", "/v1/audit/proof/inclusion?seq=0&size=1",
                  "/v1/audit/proof/consistency?from=1&to=1"):
            self.assertError(tu.get(p), 403, "forbidden")
        r = self.isoctl("audit", "events", token=self.secrets["A"]["user"])
        self.assertEqual(r.rc, 4, repr(r))
        r = self.isoctl("audit", "export", "--out", self.path("tu.jsonl"), token=self.secrets["A"]["user"])
        self.assertEqual(r.rc, 4, repr(r))
        self.assertFalse(os.path.exists(self.path("tu.jsonl")))
        self.assertFalse(os.path.exists(self.path("tu.jsonl.tmp")))

    def test_inclusion_of_another_tenants_event_is_404_like_a_missing_one(self):
        a_admin = self.admin.with_token(self.secrets["A"]["admin"])
        size = a_admin.get("/v1/audit/head").body["size"]
        every = events_of(self.admin)[:size]
        b_seqs = [it["seq"] for it in every if ev(it)["object"]["tenant"] == self.names["B"]["tenant"]]
        a_seqs = [it["seq"] for it in every if ev(it)["object"]["tenant"] == self.names["A"]["tenant"]]
        none_seqs = [it["seq"] for it in every if ev(it)["object"]["tenant"] == ""]
        self.assertTrue(b_seqs and a_seqs and none_seqs)
        head = self.admin.get("/v1/audit/head").body
        root = bytes.fromhex(head["root"])
        for seq in a_seqs[:3]:
            r = a_admin.get("/v1/audit/proof/inclusion?seq=%d&size=%d" % (seq, head["size"]))
            self.assertStatus(r, 200)
            self.assertTrue(verify_inclusion(seq, head["size"], bytes.fromhex(r.body["leaf"]),
                                             unhex(r.body["proof"]), root))
        absent = a_admin.get("/v1/audit/proof/inclusion?seq=%d&size=%d" % (none_seqs[0], size))
        self.assertError(absent, 404, "not_found")
        for seq in b_seqs:
            r = a_admin.get("/v1/audit/proof/inclusion?seq=%d&size=%d" % (seq, size))
            self.assertError(r, 404, "not_found")
            self.assertEqual(r.body["error"], absent.body["error"], seq)
            self.assertNothingOf("B", r.text, "inclusion 404")
        r = a_admin.get("/v1/audit/proof/consistency?from=1&to=%d" % size)
        self.assertStatus(r, 200)
        self.assertNothingOf("B", r.text, "consistency")

    def test_partial_export_verifies_and_holds_nothing_of_b(self):
        out = self.path("a-partial.jsonl")
        r = self.ok("audit", "export", "--out", out, token=self.secrets["A"]["admin"])
        self.assertRegex(r.out, r"partial export: \d+ events, 1 heads, \d+ inclusion proofs")
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o600)
        self.assertVerifies(out)
        with open(out) as f:
            text = f.read()
        self.assertNothingOf("B", text, "A's export")
        lines = [json.loads(x) for x in text.splitlines()]
        self.assertEqual(lines[0]["type"], "head")
        evs = [x for x in lines if x["type"] == "event"]
        incs = [x for x in lines if x["type"] == "inclusion"]
        self.assertTrue(evs)
        self.assertEqual([x["seq"] for x in evs], [x["seq"] for x in incs])
        for x in evs:
            self.assertEqual(x["event"]["object"]["tenant"], self.names["A"]["tenant"])
        root = bytes.fromhex(lines[0]["root"])
        for e, inc in zip(evs, incs):
            self.assertTrue(verify_inclusion(e["seq"], lines[0]["size"], bytes.fromhex(e["leaf"]),
                                             unhex(inc["proof"]), root))
        # The cluster-admin's export of one tenant is partial too.
        out2 = self.path("a-by-admin.jsonl")
        self.ok("audit", "export", "--out", out2, "--tenant", self.names["A"]["tenant"])
        self.assertVerifies(out2)
        with open(out2) as f:
            self.assertNothingOf("B", f.read(), "admin's export of A")
        # Editing an event of a partial export breaks its proof.
        bad = self.path("a-partial-bad.jsonl")
        k = next(i for i, x in enumerate(lines) if x["type"] == "event")
        raw = text.splitlines()
        raw[k] = raw[k].replace('"action":"', '"action":"x', 1)
        with open(bad, "w") as f:
            f.write("\n".join(raw) + "\n")
        self.assertVerifyFails(bad, seq=lines[k]["seq"])

    def test_full_export_verifies(self):
        out = self.path("full.jsonl")
        r = self.ok("audit", "export", "--out", out, "-o", "json")
        summary = json.loads(r.out)
        self.assertEqual((summary["file"], summary["export"], summary["heads"], summary["proofs"],
                          summary["left_out"]), (out, "full", 1, 0, 0))
        r = self.assertVerifies(out)
        self.assertIn("%s: ok (%d events, 1 heads)" % (out, summary["events"]), r.out)
        r = self.isoctl("audit", "verify", "--pubkey", os.path.join(self.d.state_dir, "audit.pub"),
                        out, "-o", "json", token=None)
        self.assertEqual(r.rc, 0, repr(r))
        self.assertEqual(json.loads(r.out), [{"file": out, "ok": True, "events": summary["events"],
                                              "heads": 1, "first_bad": None, "line": None, "message": ""}])

    def test_export_names_the_signer_and_verify_takes_a_key_set(self):
        out = self.path("keyed.jsonl")
        self.ok("audit", "export", "--out", out)
        with open(os.path.join(self.d.state_dir, "audit.pub")) as f:
            own = f.read().strip()
        kid = hashlib.sha256(base64.b64decode(own[len("ed25519:"):])).hexdigest()[:16]
        with open(out) as f:
            head = json.loads(f.readline())
        self.assertEqual(head["key"], kid, head)
        other = "ed25519:" + base64.b64encode(RFC8032_PK).decode()
        keys = self.path("keys")
        with open(keys, "w") as f:
            f.write("# published\n%s other\n%s this-node\n" % (other, own))
        r = self.isoctl("audit", "verify", "--keys", keys, out, token=None)
        self.assertEqual(r.rc, 0, repr(r))
        self.assertRegex(r.out, r"(?m)^%s: ok \(\d+ events, 1 heads\)$" % re.escape(out))
        # This node's key taken out of the set: its head is named, with its key id.
        with open(keys, "w") as f:
            f.write("%s other\n" % other)
        r = self.isoctl("audit", "verify", "--keys", keys, out, token=None)
        self.assertEqual(r.rc, EXIT_VERIFY, repr(r))
        self.assertIn("is signed by key %s, which is not in the key set" % kid, r.out)
        # A bad key set: exit 2, naming the file and the line.
        for text, want in (("%s a\nnot-a-key\n" % own, "%s: line 2: expected" % keys),
                           ("%s a\n%s b\n" % (own, own), "%s: line 2: the key of line 1 again" % keys),
                           ("# none\n", "%s: holds no key" % keys)):
            with open(keys, "w") as f:
                f.write(text)
            r = self.isoctl("audit", "verify", "--keys", keys, out, token=None)
            self.assertEqual(r.rc, 2, repr(r))
            self.assertIn(want, r.err)
        r = self.isoctl("audit", "verify", "--keys", keys, "--pubkey",
                        os.path.join(self.d.state_dir, "audit.pub"), out, token=None)
        self.assertEqual(r.rc, 2, repr(r))
        self.assertIn("exclude each other", r.err)


# ---------------------------------------------------------------- tampering


def db_path(state):
    return os.path.join(state, "state.db")


def db_exec(state, fn):
    con = sqlite3.connect(db_path(state))
    try:
        fn(con)
        con.commit()
    finally:
        con.close()


def db_rows(state):
    con = sqlite3.connect(db_path(state))
    try:
        return con.execute("SELECT seq, body, leaf FROM audit_events ORDER BY seq").fetchall()
    finally:
        con.close()


class TestTamper(AuditCase):
    """Edits of the real SQLite store: the daemon refuses to start and says
    what is wrong, the offline export + verify name the first bad seq, and
    --audit-accept-break starts anyway, recording the break."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        adm = cls.admin
        tc = cls("run")
        t = create_tenant(tc, adm)["name"]
        _, tok = issue_token(tc, adm, "tenant-admin", tenant=t, user="tamper")
        for _ in range(4):
            a = create_alloc(tc, adm.with_token(tok), MIG_SHAPE)
            adm.with_token(tok).delete("/v1/allocations/" + a["id"])
        adm.post("/v1/nodes/sm-n02/cordon")
        cls.d.stop()
        cls.golden = cls.d.state_dir
        cls.rows = db_rows(cls.golden)
        cls.n = len(cls.rows)
        if cls.n < 20:
            raise AssertionError("only %d events in the golden log" % cls.n)

    def copy_state(self, tag):
        dst = self.path("state-" + tag)
        shutil.copytree(self.golden, dst)
        return dst

    def refuses(self, state, *needles):
        """The daemon exits non-zero, naming the problem and the way out."""
        d = Daemon(CONFIG, state_dir=state)
        try:
            p = subprocess.run(d.command(free_port()), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=T(30), env=d.env)
        finally:
            d.cleanup()
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, p.stderr)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("isoctl audit verify", p.stderr)
        self.assertIn("--audit-accept-break", p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)
        return p.stderr

    def start_refused(self, state, *extra):
        d = Daemon(CONFIG, state_dir=state, extra_args=extra)
        try:
            p = subprocess.run(d.command(free_port()), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=T(30), env=d.env)
        finally:
            d.cleanup()
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m, p.stderr)
        self.assertEqual(p.returncode, 1, p.stderr)
        return p.stderr

    def test_key_set_without_own_key_refused(self):
        # A daemon whose own key is not in the published set would sign heads
        # no verifier accepts: it refuses to start, naming --audit-keys.
        state = self.copy_state("keyset")
        keys = self.path("keyset-keys")
        with open(keys, "w") as f:
            f.write("ed25519:%s someone-else\n" % base64.b64encode(RFC8032_PK).decode())
        err = self.start_refused(state, "--audit-keys", keys)
        self.assertIn("--audit-keys", err)
        self.assertIn("is not in the published key set %s" % keys, err)
        # The same from STATE_DIR/audit-keys, the default.
        shutil.copy(keys, os.path.join(state, "audit-keys"))
        os.chmod(os.path.join(state, "audit-keys"), 0o644)
        err = self.start_refused(state)
        self.assertIn("is not in the published key set %s/audit-keys" % state, err)
        # A bad line names the file and the line.
        with open(keys, "w") as f:
            f.write("\nbad line\n")
        err = self.start_refused(state, "--audit-keys", keys)
        self.assertIn("--audit-keys: %s: line 2: expected" % keys, err)
        err = self.start_refused(state, "--audit-keys", self.path("no-such-keys"))
        self.assertIn("--audit-keys: %s: cannot open" % self.path("no-such-keys"), err)

    def test_log_of_two_signers_needs_both_keys(self):
        # The stored heads were signed by the golden key; with a set holding
        # only a new key for this node, the start-up check names the head's
        # key id as not in the set.
        state = self.copy_state("foreignhead")
        with open(os.path.join(state, "audit.pub")) as f:
            old = f.read().strip()
        old_id = hashlib.sha256(base64.b64decode(old[len("ed25519:"):])).hexdigest()[:16]
        os.unlink(os.path.join(state, "audit.key"))
        os.unlink(os.path.join(state, "audit.pub"))
        d = Daemon(CONFIG, state_dir=state, extra_args=["--audit-accept-break"])
        d.start()  # makes a new key (the break is recorded), then stops
        d.stop()
        with open(os.path.join(state, "audit.pub")) as f:
            new = f.read().strip()
        with open(os.path.join(state, "audit-keys"), "w") as f:
            f.write("%s new\n" % new)
        out = self.path("foreignhead.jsonl")
        self.ok("audit", "export", "--state-dir", state, "--out", out, token=None)
        r = self.isoctl("audit", "verify", "--keys", os.path.join(state, "audit-keys"), out,
                        token=None)
        self.assertEqual(r.rc, EXIT_VERIFY, repr(r))
        self.assertIn("signed by key %s, which is not in the key set" % old_id, r.out)
        # With both keys published the whole log, of two signers, verifies.
        with open(os.path.join(state, "audit-keys"), "w") as f:
            f.write("%s old\n%s new\n" % (old, new))
        r = self.isoctl("audit", "verify", "--keys", os.path.join(state, "audit-keys"), out,
                        token=None)
        self.assertEqual(r.rc, 0, repr(r))

    def offline_verify_fails(self, state, tag, seq=None):
        out = self.path(tag + ".jsonl")
        r = self.isoctl("audit", "export", "--state-dir", state, "--out", out, token=None)
        self.assertEqual(r.rc, 0, repr(r))
        self.assertIn("offline export", r.out)
        return self.assertVerifyFails(out, seq=seq, state_dir=state)

    def accept_break(self, state, first_bad=None):
        d = Daemon(CONFIG, state_dir=state, extra_args=["--audit-accept-break"])
        try:
            d.start()
            items = events_of(d.client())
            got = [it for it in items if ev(it)["action"] == "audit.break_accepted"]
            self.assertEqual(len(got), 1, [ev(it)["action"] for it in items[-5:]])
            e = ev(got[0])
            self.assertEqual((e["outcome"], e["actor"]["role"], e["object"]["kind"]), ("error", "system", "audit"))
            self.assertTrue(e["reason"])
            self.assertEqual(e["details"]["first_bad"], -1 if first_bad is None else first_bad, e)
            after = [ev(it)["action"] for it in items if it["seq"] > got[0]["seq"]]
            self.assertEqual(after[:1], ["daemon.start"], after)
            # It works from here on: a change is made and recorded.
            t = uniq("afterbreak")
            self.assertStatus(d.client().post("/v1/tenants", {"name": t}), 201)
            self.assertEqual(len(find(events_of(d.client()), action="tenant.create", object_id=t)), 1)
            d.stop()
        finally:
            d.cleanup()

    def test_golden_log_is_intact(self):
        out = self.path("golden.jsonl")
        r = self.ok("audit", "export", "--state-dir", self.golden, "--out", out, token=None)
        self.assertRegex(r.out, r"offline export: %d events, \d+ heads" % self.n)
        self.assertVerifies(out, state_dir=self.golden)
        with open(out) as f:
            lines = [json.loads(x) for x in f]
        heads = [x for x in lines if x["type"] == "head"]
        self.assertGreaterEqual(len(heads), 2)
        self.assertEqual(heads[-1]["size"], self.n, "the stop signs a head over everything")
        # And it starts without a word about the log.
        d = Daemon(CONFIG, state_dir=self.copy_state("intact"))
        try:
            d.start()
            d.stop()
        finally:
            d.cleanup()

    def test_flipped_byte_in_an_event(self):
        k = self.n // 2
        state = self.copy_state("flip")

        def flip(con):
            body = bytearray(con.execute("SELECT body FROM audit_events WHERE seq = ?", (k,)).fetchone()[0])
            i = body.index(b'"action":"') + len(b'"action":"')
            body[i] ^= 0x20  # one letter changes case: still canonical JSON, another event
            con.execute("UPDATE audit_events SET body = ? WHERE seq = ?", (bytes(body), k))
        db_exec(state, flip)
        err = self.refuses(state, "event %d" % k)
        self.assertIn("modified", err)
        self.offline_verify_fails(state, "flip", seq=k)
        self.accept_break(state, first_bad=k)

    def test_event_bytes_that_are_not_one_line(self):
        # A newline written into an event's bytes: the offline export cannot
        # put them on one line, leaves the event out and says so; verify
        # then names the gap.
        k = self.n // 2 + 1
        state = self.copy_state("newline")

        def newline(con):
            body = bytearray(con.execute("SELECT body FROM audit_events WHERE seq = ?", (k,)).fetchone()[0])
            body[body.index(b'"action":"') + len(b'"action":"')] = 0x0a
            con.execute("UPDATE audit_events SET body = ? WHERE seq = ?", (bytes(body), k))
        db_exec(state, newline)
        self.refuses(state, "event %d" % k)
        out = self.path("newline.jsonl")
        r = self.isoctl("audit", "export", "--state-dir", state, "--out", out, token=None)
        self.assertEqual(r.rc, 0, repr(r))
        self.assertIn("event %d:" % k, r.err)
        self.assertIn("1 stored events left out", r.out)
        self.assertVerifyFails(out, seq=k, state_dir=state)

    def test_deleted_row(self):
        k = self.n // 3
        state = self.copy_state("delete")
        db_exec(state, lambda con: con.execute("DELETE FROM audit_events WHERE seq = ?", (k,)))
        self.refuses(state, "event %d is missing" % k)
        self.offline_verify_fails(state, "delete", seq=k)
        self.accept_break(state, first_bad=k)

    def test_swapped_rows(self):
        i, j = 4, self.n - 6
        state = self.copy_state("swap")

        def swap(con):
            bi, li = con.execute("SELECT body, leaf FROM audit_events WHERE seq = ?", (i,)).fetchone()
            bj, lj = con.execute("SELECT body, leaf FROM audit_events WHERE seq = ?", (j,)).fetchone()
            con.execute("UPDATE audit_events SET body = ?, leaf = ? WHERE seq = ?", (bj, lj, i))
            con.execute("UPDATE audit_events SET body = ?, leaf = ? WHERE seq = ?", (bi, li, j))
        db_exec(state, swap)
        self.refuses(state, "event stored as %d says it is %d" % (i, j))
        self.offline_verify_fails(state, "swap", seq=i)
        self.accept_break(state, first_bad=i)

    def test_truncated_log(self):
        keep = self.n - 3
        state = self.copy_state("truncate")
        db_exec(state, lambda con: con.execute("DELETE FROM audit_events WHERE seq >= ?", (keep,)))
        err = self.refuses(state, "truncated")
        self.assertRegex(err, r"covers \d+ events, %d are stored" % keep)
        self.offline_verify_fails(state, "truncate", seq=keep)
        self.accept_break(state, first_bad=keep)

    def test_altered_head_root_or_signature(self):
        for column in ("root", "sig"):
            with self.subTest(column=column):
                state = self.copy_state("head-" + column)

                def alter(con):
                    size, blob = con.execute("SELECT size, %s FROM audit_heads ORDER BY size LIMIT 1 OFFSET 1"
                                             % column).fetchone()
                    blob = bytearray(blob)
                    blob[5] ^= 0x01
                    con.execute("UPDATE audit_heads SET %s = ? WHERE size = ?" % column, (bytes(blob), size))
                db_exec(state, alter)
                self.refuses(state, "bad signature")
                self.offline_verify_fails(state, "head-" + column)
                self.accept_break(state)

    def test_offline_export_errors(self):
        r = self.isoctl("audit", "export", "--state-dir", self.path("nowhere"), "--out", self.path("x.jsonl"),
                        token=None)
        self.assertEqual(r.rc, 2, repr(r))
        self.assertIn("state.db", r.err)
        self.assertFalse(os.path.exists(self.path("nowhere")), "a store was created")
        self.assertFalse(os.path.exists(self.path("x.jsonl")))


class TestExportEdits(AuditCase):
    """Edits of an export file are caught by verify, naming the right seq."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for _ in range(12):
            create_tenant(cls("run"), cls.admin)
        cls.full = os.path.join(cls.tmp, "edits-full.jsonl")
        r = cls("run").ok("audit", "export", "--out", cls.full)
        with open(cls.full) as f:
            cls.lines = f.read().splitlines()
        cls.size = json.loads(cls.lines[0])["size"]

    def edited(self, tag, lines):
        p = self.path("edit-%s.jsonl" % tag)
        with open(p, "w") as f:
            f.write("\n".join(lines) + "\n")
        return p

    def line_of(self, seq):
        return 1 + seq  # line 0 (index) is the head

    def test_untouched_export_verifies(self):
        self.assertVerifies(self.full)

    def test_modified_event(self):
        k = self.size // 2
        lines = list(self.lines)
        i = self.line_of(k)
        lines[i] = lines[i].replace('"outcome":"success"', '"outcome":"denied"', 1) \
            if '"outcome":"success"' in lines[i] else lines[i].replace('"action":"', '"action":"X', 1)
        self.assertNotEqual(lines[i], self.lines[i])
        self.assertVerifyFails(self.edited("modify", lines), seq=k)

    def test_modified_leaf_and_event_together(self):
        # Rehashing the edited event does not help: the head's root no longer matches.
        k = 3
        lines = list(self.lines)
        obj = json.loads(lines[self.line_of(k)])
        canon = json.dumps(obj["event"], sort_keys=True, separators=(",", ":"))
        new = canon.replace('"action":"', '"action":"y', 1)
        lines[self.line_of(k)] = '{"type":"event","seq":%d,"leaf":"%s","event":%s}' % (
            k, leaf_hash(new.encode()).hex(), new)
        line = self.assertVerifyFails(self.edited("rehash", lines))
        self.assertIn("FAILED", line)

    def test_deleted_line(self):
        k = self.size // 3
        lines = list(self.lines)
        del lines[self.line_of(k)]
        self.assertVerifyFails(self.edited("delete", lines), seq=k)

    def test_inserted_line(self):
        k = 5
        lines = list(self.lines)
        lines.insert(self.line_of(k) + 1, lines[self.line_of(k)])  # event k twice
        self.assertVerifyFails(self.edited("insert", lines), seq=k)
        # A forged event inserted where event k+1 belongs: its leaf matches
        # its bytes, but the leaves no longer rebuild the signed root.
        lines = list(self.lines)
        forged = json.loads(lines[self.line_of(k)])["event"]
        forged.update(seq=k + 1, action="tenant.delete")
        canon = json.dumps(forged, sort_keys=True, separators=(",", ":"))
        lines.insert(self.line_of(k + 1), '{"type":"event","seq":%d,"leaf":"%s","event":%s}' % (
            k + 1, leaf_hash(canon.encode()).hex(), canon))
        line = self.assertVerifyFails(self.edited("insert-forged", lines))
        self.assertIn("FAILED", line)

    def test_reordered_lines(self):
        k = 6
        lines = list(self.lines)
        a, b = self.line_of(k), self.line_of(k + 1)
        lines[a], lines[b] = lines[b], lines[a]
        self.assertVerifyFails(self.edited("reorder", lines), seq=k)

    def test_truncated_export(self):
        lines = list(self.lines)[:-4]
        self.assertVerifyFails(self.edited("truncate", lines), seq=self.size - 4)

    def test_several_files_one_bad(self):
        lines = list(self.lines)
        del lines[self.line_of(2)]
        bad = self.edited("several", lines)
        r = self.verify(self.full, bad)
        self.assertEqual(r.rc, EXIT_VERIFY, repr(r))
        self.assertIn("%s: ok (" % self.full, r.out)
        self.assertIn("%s: FAILED at seq 2" % bad, r.out)
        r = self.verify(self.path("missing.jsonl"))
        self.assertEqual(r.rc, EXIT_VERIFY, repr(r))
        self.assertIn("missing.jsonl: FAILED", r.out)


# ---------------------------------------------------------------- the CLI


class TestCli(AuditCase):
    def test_events_table_and_json(self):
        t = create_tenant(self, self.admin)["name"]
        r = self.ok("audit", "events")
        lines = r.out.splitlines()
        self.assertRegex(lines[0], r"^SEQ\s+TIME\s+ACTOR\s+ACTION\s+OBJECT\s+OUTCOME$")
        self.assertRegex(lines[1], r"^0\s+\d{4}-\d\d-\d\dT\S+Z\s+system\s+daemon\.start\s+daemon/apitest-small\s+success$")
        row = [ln for ln in lines if " tenant.create " in ln and t in ln]
        self.assertEqual(len(row), 1, r.out)
        self.assertIn("%s(cluster-admin)" % token_id(self.d.admin_token), row[0])
        self.assertIn("tenant/%s [%s]" % (t, t), row[0])
        r = self.ok("audit", "events", "--tenant", t, "-o", "json")
        items = json.loads(r.out)["items"]
        self.assertTrue(items)
        self.assertTrue(all(ev(it)["object"]["tenant"] == t for it in items))
        r = self.ok("audit", "head", "-o", "json")
        self.assertEqual(set(json.loads(r.out)),
                         {"size", "root", "time_ms", "time", "signature", "key_id"})
        r = self.ok("audit", "head")
        self.assertRegex(r.out, r"(?m)^key_id:\s+[0-9a-f]{16}$")
        self.assertRegex(r.out, r"(?m)^size:\s+\d+$")
        self.assertRegex(r.out, r"(?m)^root:\s+[0-9a-f]{64}$")

    def test_usage_errors_and_help(self):
        for argv in (["audit"], ["audit", "bogus"], ["audit", "export"], ["audit", "export", "--out", ""],
                     ["audit", "export", "--out", "x", "--tenant", "t", "--state-dir", "d"],
                     ["audit", "verify", "x.jsonl"], ["audit", "verify", "--pubkey", "k"],
                     ["audit", "events", "extra"], ["audit", "head", "--tenant", "x"],
                     ["audit", "pubkey", "x"], ["audit", "export", "--bogus"]):
            with self.subTest(argv=argv):
                r = self.isoctl(*argv)
                self.assertEqual(r.rc, 2, repr(r))
                self.assertEqual(r.out, "")
                self.assertIn("--help", r.err)
        r = self.isoctl("audit", "verify", "--pubkey", self.path("no.pub"), self.path("x.jsonl"), token=None)
        self.assertEqual(r.rc, 2, repr(r))
        top = self.ok("--help", token=None).out
        self.assertIn("audit", top)
        self.assertIn("8  verification failed", top)
        sub = self.ok("audit", "--help", token=None).out
        for verb in ("events", "head", "pubkey", "export", "verify"):
            self.assertIn(verb, sub)
            h = self.ok("audit", verb, "--help", token=None).out
            self.assertTrue(h.startswith("Usage: isoctl audit " + verb), h)
            self.assertEqual(self.ok("audit", verb, "-h", token=None).out, h)

    def test_export_needs_no_partial_file_on_failure(self):
        # Unreachable server: exit 7, no file left behind.
        out = self.path("unreachable.jsonl")
        e = {k: v for k, v in os.environ.items() if not k.startswith("ISOSTACK_")}
        e["ISOSTACK_URL"] = "http://127.0.0.1:%d" % free_port()
        p = subprocess.run([harness.Binaries.isoctl, "audit", "export", "--out", out], env=e,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=T(60))
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(out + ".tmp"))


if __name__ == "__main__":
    harness.main()

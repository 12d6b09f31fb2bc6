#!/usr/bin/env python3
"""test_rbac.py: the role matrix of docs/api.md, checked on a real isostackd.

Two tenants A and B, a token for every role (cluster-admin, auditor, a
node-agent, and a tenant-admin and a tenant-user in each tenant, plus a second
tenant-user per tenant to tell "own" allocations and tokens from a colleague's),
and objects in both tenants. For every endpoint x role x target (own / a colleague's / other
tenant's / cluster-wide / missing) the expected status is written out in the
EXPECT table below and asserted. On top of the statuses:
  - every body a tenant-scoped token receives is searched for every name and
    id of the other tenant (tenant name and description, allocation ids and
    names, token ids, user labels, the nodes its allocations run on);
  - another tenant's object answers 404 with the same bytes as a missing one;
  - lists hold exactly what the role may see (filtered on the server);
  - a refused mutation changes nothing.

Run: python3 tests/api/test_rbac.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check_error_shape  # noqa: E402

# tests/api/data/rbac.yaml: pool "kiwi" = kiwi01, kiwi02; pool "lime" = lime01,
# lime02; 8 x h100-80gb each. A's allocations go to kiwi, B's to lime, so the
# nodes of B's placements never appear legitimately in A's answers.
CONFIG = "rbac.yaml"
TENANT = {"A": "alpha-tenant-kq", "B": "bravo-tenant-zx"}
DESC = {"A": "alpha-desc-hush", "B": "bravo-desc-hush"}
POOL = {"A": "kiwi", "B": "lime"}
POOL_NODES = {"A": ["kiwi01", "kiwi02"], "B": ["lime01", "lime02"]}
MISSING_TENANT = "nosuch-tenant-qq"
USER = {
    "admin": None, "auditor": "audrey-aud",
    "A-admin": "alice-adm-a", "A-user": "andy-usr-a", "A-user2": "amos-usr-a",
    "B-admin": "bella-adm-b", "B-user": "boris-usr-b", "B-user2": "bart-usr-b",
    "agent": None,
}
AGENT_NODE = "kiwi01"
ROLE_OF = {"admin": "cluster-admin", "auditor": "auditor",
           "A-admin": "tenant-admin", "A-user": "tenant-user", "A-user2": "tenant-user",
           "B-admin": "tenant-admin", "B-user": "tenant-user", "B-user2": "tenant-user",
           "agent": "node-agent"}
CALLERS = ["none", "admin", "auditor", "A-admin", "A-user", "B-admin", "B-user", "agent"]
COL = {"none": 0, "admin": 1, "auditor": 2, "A-admin": 3, "B-admin": 3, "A-user": 4, "B-user": 4,
       "agent": 5}
ALLOC_GPUS = {"count": 1, "profile": "1g.10gb"}


def tenant_of(role):
    return role[0] if role[:2] in ("A-", "B-") else None


def other(t):
    return "B" if t == "A" else "A"


# Expected status per (endpoint, target) for the callers
#   (no token, cluster-admin, auditor, tenant-admin, tenant-user, node-agent).
# None: not asserted (the order of checks is the server's choice there).
# The node-agent (a token of node kiwi01) may only read its node's desired
# state and report its status and its GPUs' faults (docs/agents.md), and read or release its
# own node's pod attachments (issue 17, docs/cni.md: any other allocation is 404 like a missing
# one; test_cni_authz.py has the rest): any other node is 404 like a
# missing one, and every other authenticated route answers 403, before any
# lookup, so it also learns nothing of which tenants or objects exist
# (docs/api.md, "Roles").
#
# Targets, relative to the caller (cluster roles: "own" is tenant A, "other" B):
#   own       the caller's tenant (for tenant roles) / an object in it
#   mine      an allocation the caller's user owns     (cluster roles: A's)
#   sibling   a colleague's allocation or token, same tenant (cluster roles: A's)
#   other     the other tenant / its object
#   self      the caller's own token
#   cluster   a cluster-wide token (auditor's, or the admin's for the auditor)
#   missing   a well-formed id or name that does not exist
#   omit      the request leaves `tenant` out
EXPECT = {
    #                                   none admin audit t-adm t-usr agent
    ("GET /v1/healthz", "-"):          (200, 200, 200, 200, 200, 200),
    ("GET /v1/version", "-"):          (401, 200, 200, 200, 200, 403),
    ("GET /v1/whoami", "-"):           (401, 200, 200, 200, 200, 403),
    ("GET /v1/capacity", "-"):         (401, 200, 200, 200, 200, 403),

    ("GET /v1/tenants", "-"):          (401, 200, 200, 200, 200, 403),
    ("POST /v1/tenants", "-"):         (401, 201, 403, 403, 403, 403),
    ("GET /v1/tenants/X", "own"):      (401, 200, 200, 200, 200, 403),
    ("GET /v1/tenants/X", "other"):    (401, 200, 200, 404, 404, 403),
    ("GET /v1/tenants/X", "missing"):  (401, 404, 404, 404, 404, 403),
    ("PATCH /v1/tenants/X", "own"):    (401, 200, 403, 403, 403, 403),
    ("PATCH /v1/tenants/X", "other"):  (401, 200, 403, 404, 404, 403),
    ("PATCH /v1/tenants/X", "missing"): (401, 404, None, 404, 404, 403),
    ("DELETE /v1/tenants/X", "own"):   (401, 204, 403, 403, 403, 403),
    ("DELETE /v1/tenants/X", "other"): (401, 204, 403, 404, 404, 403),
    ("DELETE /v1/tenants/X", "missing"): (401, 404, None, 404, 404, 403),

    ("GET /v1/tokens", "-"):           (401, 200, 200, 200, 200, 403),
    ("GET /v1/tokens?tenant=X", "own"): (401, 200, 200, 200, 200, 403),
    ("GET /v1/tokens?tenant=X", "other"): (401, 200, 200, 404, 404, 403),
    ("GET /v1/tokens?tenant=X", "missing"): (401, 404, 404, 404, 404, 403),
    ("POST /v1/tokens", "tenant-user/own"):     (401, 201, 403, 201, 403, 403),
    ("POST /v1/tokens", "tenant-user/omit"):    (401, 400, 403, 201, 403, 403),
    ("POST /v1/tokens", "tenant-admin/own"):    (401, 201, 403, 201, 403, 403),
    ("POST /v1/tokens", "tenant-user/other"):   (401, 201, 403, 404, 403, 403),
    ("POST /v1/tokens", "tenant-user/missing"): (401, 404, 403, 404, 403, 403),
    ("POST /v1/tokens", "auditor"):             (401, 201, 403, 403, 403, 403),
    ("POST /v1/tokens", "cluster-admin"):       (401, 201, 403, 403, 403, 403),
    ("GET /v1/tokens/X", "self"):      (401, 200, 200, 200, 200, 403),
    ("GET /v1/tokens/X", "sibling"):   (401, 200, 200, 200, 404, 403),
    ("GET /v1/tokens/X", "other"):     (401, 200, 200, 404, 404, 403),
    ("GET /v1/tokens/X", "cluster"):   (401, 200, 200, 404, 404, 403),
    ("GET /v1/tokens/X", "missing"):   (401, 404, 404, 404, 404, 403),
    ("DELETE /v1/tokens/X", "self"):   (401, 204, 403, 204, 204, 403),
    ("DELETE /v1/tokens/X", "sibling"): (401, 204, 403, 204, 404, 403),
    ("DELETE /v1/tokens/X", "other"):  (401, 204, 403, 404, 404, 403),
    ("DELETE /v1/tokens/X", "cluster"): (401, 204, 403, 404, 404, 403),
    ("DELETE /v1/tokens/X", "missing"): (401, 404, None, 404, 404, 403),

    ("GET /v1/nodes", "-"):            (401, 200, 200, 403, 403, 403),
    ("GET /v1/nodes?pool=P", "-"):     (401, 200, 200, 403, 403, 403),
    ("GET /v1/nodes/X", "-"):          (401, 200, 200, 403, 403, 403),
    ("POST /v1/nodes/X/cordon", "-"):  (401, 200, 403, 403, 403, 403),
    ("POST /v1/nodes/X/drain", "-"):   (401, 200, 403, 403, 403, 403),
    ("POST /v1/nodes/X/uncordon", "-"): (401, 200, 403, 403, 403, 403),
    ("GET /v1/gpus", "-"):             (401, 200, 200, 403, 403, 403),
    # node agents: "own" is the agent's node (kiwi01), "other" another node
    ("GET /v1/nodes/X/desired", "own"):     (401, 200, 200, 403, 403, 200),
    ("GET /v1/nodes/X/desired", "other"):   (401, 200, 200, 403, 403, 404),
    ("GET /v1/nodes/X/desired", "missing"): (401, 404, 404, 403, 403, 404),
    ("PUT /v1/nodes/X/status", "own"):      (401, 204, 403, 403, 403, 204),
    ("PUT /v1/nodes/X/status", "other"):    (401, 204, 403, 403, 403, 404),
    ("PUT /v1/nodes/X/status", "missing"):  (401, 404, 403, 403, 403, 404),
    # a node agent reports its own node's XIDs (docs/agents.md, "Faults")
    ("POST /v1/nodes/X/gpus/0/fault", "own"):     (401, 200, 403, 403, 403, 200),
    ("POST /v1/nodes/X/gpus/0/fault", "other"):   (401, 200, 403, 403, 403, 404),
    ("POST /v1/nodes/X/gpus/0/fault", "missing"): (401, 404, 403, 403, 403, 404),
    ("GET /v1/gpus?node=N", "-"):      (401, 200, 200, 403, 403, 403),

    ("GET /v1/allocations", "-"):      (401, 200, 200, 200, 200, 403),
    ("GET /v1/allocations?tenant=X", "own"): (401, 200, 200, 200, 200, 403),
    ("GET /v1/allocations?tenant=X", "other"): (401, 200, 200, 404, 404, 403),
    ("GET /v1/allocations?tenant=X", "missing"): (401, 404, 404, 404, 404, 403),
    ("POST /v1/allocations", "own"):   (401, 201, 403, 201, 201, 403),
    ("POST /v1/allocations", "omit"):  (401, 400, 403, 201, 201, 403),
    ("POST /v1/allocations", "other"): (401, 201, 403, 404, 404, 403),
    ("POST /v1/allocations", "missing"): (401, 404, 403, 404, 404, 403),
    ("GET /v1/allocations/X", "mine"):    (401, 200, 200, 200, 200, 404),
    ("GET /v1/allocations/X", "sibling"): (401, 200, 200, 200, 404, 404),
    ("GET /v1/allocations/X", "other"):   (401, 200, 200, 404, 404, 404),
    ("GET /v1/allocations/X", "missing"): (401, 404, 404, 404, 404, 404),
    ("PATCH /v1/allocations/X", "mine"):    (401, 200, 403, 200, 200, 403),
    ("PATCH /v1/allocations/X", "sibling"): (401, 200, 403, 200, 404, 403),
    ("PATCH /v1/allocations/X", "other"):   (401, 200, 403, 404, 404, 403),
    ("PATCH /v1/allocations/X", "missing"): (401, 404, None, 404, 404, 403),
    ("DELETE /v1/allocations/X", "mine"):    (401, 200, 403, 200, 200, 404),
    ("DELETE /v1/allocations/X", "sibling"): (401, 200, 403, 200, 404, 404),
    ("DELETE /v1/allocations/X", "other"):   (401, 200, 403, 404, 404, 404),
    ("DELETE /v1/allocations/X", "missing"): (401, 404, None, 404, 404, 404),

    ("GET /v1/audit/events", "-"):     (401, 200, 200, 200, 403, 403),
    ("GET /v1/audit/events?tenant=X", "own"): (401, 200, 200, 200, 403, 403),
    ("GET /v1/audit/events?tenant=X", "other"): (401, 200, 200, 404, 403, 403),
    ("GET /v1/audit/head", "-"):       (401, 200, 200, 200, 403, 403),
    ("GET /v1/audit/pubkey", "-"):     (401, 200, 200, 200, 200, 403),
    ("GET /v1/audit/proof/inclusion", "own"): (401, 200, 200, 200, 403, 403),
    ("GET /v1/audit/proof/inclusion", "other"): (401, 200, 200, 404, 403, 403),
    ("GET /v1/audit/proof/inclusion", "missing"): (401, 400, 400, 400, 403, 403),
    ("GET /v1/audit/proof/consistency", "-"): (401, 200, 200, 200, 403, 403),

    # tenancy (docs/tenancy.md "The API"); "own"/"other" as for tenants
    ("GET /v1/orgs", "-"):             (401, 200, 200, 403, 403, 403),
    ("POST /v1/orgs", "-"):            (401, 201, 403, 403, 403, 403),
    ("DELETE /v1/orgs/X", "-"):        (401, 204, 403, 403, 403, 403),
    ("GET /v1/orgs/X/quota", "-"):     (401, 200, 200, 404, 404, 403),
    ("PUT /v1/orgs/X/quota", "-"):     (401, 200, 403, 404, 404, 403),
    ("GET /v1/tenants/X/projects", "own"):     (401, 200, 200, 200, 200, 403),
    ("GET /v1/tenants/X/projects", "other"):   (401, 200, 200, 404, 404, 403),
    ("GET /v1/tenants/X/projects", "missing"): (401, 404, 404, 404, 404, 403),
    ("POST /v1/tenants/X/projects", "own"):    (401, 201, 403, 201, 403, 403),
    ("POST /v1/tenants/X/projects", "other"):  (401, 201, 403, 404, 404, 403),
    ("DELETE /v1/tenants/X/projects/P", "own"):   (401, 204, 403, 204, 403, 403),
    ("DELETE /v1/tenants/X/projects/P", "other"): (401, 204, 403, 404, 404, 403),
    ("GET /v1/tenants/X/quota", "own"):        (401, 200, 200, 200, 200, 403),
    ("GET /v1/tenants/X/quota", "other"):      (401, 200, 200, 404, 404, 403),
    ("GET /v1/tenants/X/quota", "missing"):    (401, 404, 404, 404, 404, 403),
    ("PUT /v1/tenants/X/quota", "own"):        (401, 200, 403, 403, 403, 403),
    ("PUT /v1/tenants/X/quota", "other"):      (401, 200, 403, 404, 404, 403),
    ("GET /v1/tenants/X/projects/P/quota", "own"):   (401, 200, 200, 200, 200, 403),
    ("GET /v1/tenants/X/projects/P/quota", "other"): (401, 200, 200, 404, 404, 403),
    ("PUT /v1/tenants/X/projects/P/quota", "own"):   (401, 200, 403, 200, 403, 403),
    ("PUT /v1/tenants/X/projects/P/quota", "other"): (401, 200, 403, 404, 404, 403),
    ("GET /v1/queue", "-"):            (401, 200, 200, 200, 200, 403),
    ("GET /v1/usage", "-"):            (401, 200, 200, 200, 200, 403),
}
ORG = "rbac-org-hush"
PROJECT = {"A": "alpha-proj-hush", "B": "bravo-proj-hush"}
GPU_QUOTA = {"gpus": {"guaranteed": 0}}

# Every endpoint of docs/api.md must appear in the table.
DOC_ENDPOINTS = [
    "GET /v1/healthz", "GET /v1/version", "GET /v1/whoami", "GET /v1/capacity",
    "GET /v1/tenants", "POST /v1/tenants", "GET /v1/tenants/X", "PATCH /v1/tenants/X",
    "DELETE /v1/tenants/X", "GET /v1/tokens", "POST /v1/tokens", "GET /v1/tokens/X",
    "DELETE /v1/tokens/X", "GET /v1/nodes", "GET /v1/nodes/X", "POST /v1/nodes/X/cordon",
    "POST /v1/nodes/X/drain", "POST /v1/nodes/X/uncordon", "GET /v1/gpus", "GET /v1/allocations",
    "GET /v1/nodes/X/desired", "PUT /v1/nodes/X/status",
    "POST /v1/allocations", "GET /v1/allocations/X", "PATCH /v1/allocations/X",
    "DELETE /v1/allocations/X", "GET /v1/audit/events", "GET /v1/audit/head",
    "GET /v1/audit/pubkey", "GET /v1/audit/proof/inclusion", "GET /v1/audit/proof/consistency",
    "GET /v1/orgs", "POST /v1/orgs", "DELETE /v1/orgs/X", "GET /v1/orgs/X/quota",
    "PUT /v1/orgs/X/quota", "GET /v1/tenants/X/projects", "POST /v1/tenants/X/projects",
    "DELETE /v1/tenants/X/projects/P", "GET /v1/tenants/X/quota", "PUT /v1/tenants/X/quota",
    "GET /v1/tenants/X/projects/P/quota", "PUT /v1/tenants/X/projects/P/quota", "GET /v1/queue",
    "GET /v1/usage",
]

def missing_like(real_id):
    """A well-formed id of the same shape that does not exist."""
    tail = "00000000" if real_id[-8:] != "00000000" else "11111111"
    return real_id[:-8] + tail


class TestRbac(harness.SharedDaemonCase):
    config = CONFIG

    @classmethod
    def set_up_world(cls):
        cls._setup_world()

    # ------------------------------------------------------------ fixture

    @classmethod
    def _must(cls, r, status):
        if r.status != status:
            raise AssertionError("fixture setup: expected %d, got %r" % (status, r))
        return r.body

    @classmethod
    def _setup_world(cls):
        cls.admin = cls.d.client()
        # secrets[T]: strings that name tenant T's objects; never in the other's answers
        cls.secrets = {"A": set(), "B": set()}
        cls.tok = {}     # role -> token object
        cls.secret = {}  # role -> bearer secret
        cls.alloc = {}   # role -> an allocation its user owns
        cls.tok["admin"] = {"id": harness.token_id(cls.d.admin_token)}
        cls.secret["admin"] = cls.d.admin_token
        for t in ("A", "B"):
            cls._must(cls.admin.post("/v1/tenants", {"name": TENANT[t], "description": DESC[t]}), 201)
            cls.secrets[t].update([TENANT[t], DESC[t], "%s-tokdesc" % TENANT[t][:5]] + POOL_NODES[t])
        cls._must(cls.admin.post("/v1/orgs", {"name": ORG}), 201)
        for t in ("A", "B"):
            cls._must(cls.admin.post("/v1/tenants/%s/projects" % TENANT[t], {"name": PROJECT[t]}), 201)
            cls.secrets[t].add(PROJECT[t])
        for role in ("auditor", "A-admin", "A-user", "A-user2", "B-admin", "B-user", "B-user2",
                     "agent"):
            obj, sec = cls._issue(role)
            cls.tok[role], cls.secret[role] = obj, sec
            if tenant_of(role):
                cls.secrets[tenant_of(role)].add(USER[role])
        for role in ("A-admin", "A-user", "A-user2", "B-admin", "B-user", "B-user2"):
            cls.alloc[role] = cls._fresh_alloc(role, name="%s-job-%s" % (TENANT[tenant_of(role)][:5], USER[role]))
        for t in ("A", "B"):
            for role in ("%s-admin" % t, "%s-user" % t, "%s-user2" % t):
                nodes = {n["node"] for n in cls.alloc[role]["nodes"]}
                if not nodes <= set(POOL_NODES[t]):
                    raise AssertionError("fixture: %s placed outside pool %s: %r" % (role, POOL[t], nodes))

    @classmethod
    def _issue(cls, role, user=Ellipsis, tenant=Ellipsis):
        body = {"role": ROLE_OF[role]}
        if ROLE_OF[role] == "node-agent":
            body["node"] = AGENT_NODE
        u = USER[role] if user is Ellipsis else user
        if u is not None:
            body["user"] = u
        t = tenant_of(role) if tenant is Ellipsis else tenant
        if t:
            body["tenant"] = TENANT[t]
            body["description"] = "%s-tokdesc" % TENANT[t][:5]
        obj = cls._must(cls.admin.post("/v1/tokens", body), 201)
        if t:
            cls.secrets[t].add(obj["id"])
        return obj, obj["token"]

    @classmethod
    def _fresh_alloc(cls, owner_role, name=None):
        """An allocation owned by owner_role's user, created with its token."""
        t = tenant_of(owner_role)
        body = {"gpus": ALLOC_GPUS, "pool": POOL[t]}
        if name:
            body["name"] = name
        r = harness.http_request(cls.d.port, "POST", "/v1/allocations", body=body,
                                 token=cls.secret[owner_role])
        a = cls._must(r, 201)
        cls.secrets[t].update([a["id"], a["name"]] if a["name"] else [a["id"]])
        return a

    # ------------------------------------------------------------ calling

    def call(self, role, method, path, body=None, token=Ellipsis, headers=None):
        """One request as `role` (token defaults to the role's own). Every
        answer to a tenant-scoped caller is searched for the other tenant's
        names and ids, even those the request itself carried: the server never
        echoes a name or id it will not show."""
        if token is Ellipsis:
            token = None if role == "none" else self.secret[role]
        r = self.d.request(method, path, body=body, token=token, headers=headers)
        t = tenant_of(role)
        if t is not None:
            self.assert_no_leak(r, t)
        return r

    def assert_no_leak(self, r, t):
        text = r.text + " " + " ".join("%s: %s" % kv for kv in r.headers.items())
        for s in sorted(self.secrets[other(t)]):
            if s and s in text:
                self.fail("tenant %s's caller sees %r of tenant %s in %r" % (t, s, other(t), r))

    def expected(self, endpoint, target, role):
        return EXPECT[(endpoint, target)][COL[role]]

    def check(self, endpoint, target, role, r, before=None, after=None):
        """Asserts the table's status (and error code). For a refused
        mutation, before/after snapshots must be equal."""
        want = self.expected(endpoint, target, role)
        if want is None:
            return
        if r.status != want:
            self.fail("%s [%s] as %s: expected %d, got %r" % (endpoint, target, role, want, r))
        if want >= 400:
            check_error_shape(self, r)
            code = {400: "invalid_argument", 401: "unauthorized", 403: "forbidden",
                    404: "not_found", 409: "conflict"}[want]
            self.assertEqual(r.body["error"]["code"], code, repr(r))
            if before is not None:
                self.assertEqual(after, before, "%s [%s] as %s was refused but changed state"
                                 % (endpoint, target, role))

    def assert_token_keys(self, tok):
        """A token object: `node` on node-agent tokens only."""
        want = set(harness.TOKEN_KEYS)
        if tok["role"] == "node-agent":
            want.add("node")
        self.assertEqual(set(tok.keys()), want, tok)

    def state_of(self, path):
        """What the admin sees at path: the body when it exists, else the status."""
        r = self.admin.get(path)
        return r.body if r.status == 200 else r.status

    def targets_of(self, endpoint):
        return sorted(tg for (ep, tg) in EXPECT if ep == endpoint)

    def assert_same_as_missing(self, role, method, path_other, body_other, other_str,
                               path_missing, body_missing, missing_str, token=Ellipsis):
        """The answer about another tenant's object and about a missing one
        must be the same bytes (the id itself and the request id aside: both
        requests carry the same X-Request-Id)."""
        h = {"X-Request-Id": "rbac-same-as-missing"}
        r1 = self.call(role, method, path_other, body_other, token=token, headers=h)
        r2 = self.call(role, method, path_missing, body_missing, token=token, headers=h)
        n1 = r1.raw.replace(other_str.encode(), b"<ID>")
        n2 = r2.raw.replace(missing_str.encode(), b"<ID>")
        self.assertEqual((r1.status, n1), (r2.status, n2),
                         "%s %s as %s: another tenant's object answers differently from a missing one"
                         % (method, path_other, role))
        self.assertEqual(r1.header("Content-Type"), r2.header("Content-Type"))

    # ------------------------------------------------------------ the table itself

    def test_table_covers_every_endpoint(self):
        eps = {ep.split("?")[0] for (ep, _) in EXPECT}
        for ep in DOC_ENDPOINTS:
            self.assertIn(ep, eps, "endpoint of docs/api.md missing from EXPECT")
        for key, row in EXPECT.items():
            self.assertEqual(len(row), 6, key)

    # ------------------------------------------------------------ health, identity, capacity

    def test_open_endpoints(self):
        for ep in ("GET /v1/healthz", "GET /v1/version", "GET /v1/whoami", "GET /v1/capacity"):
            method, path = ep.split(" ")
            for role in CALLERS:
                with self.subTest(endpoint=ep, role=role):
                    r = self.call(role, method, path)
                    self.check(ep, "-", role, r)
                    if r.status != 200:
                        continue
                    if path == "/v1/whoami":
                        t = tenant_of(role)
                        self.assertEqual(r.body["role"], ROLE_OF[role])
                        self.assertEqual(r.body["tenant"], TENANT[t] if t else None)
                        self.assertEqual(r.body["token_id"], self.tok[role]["id"])
                        if USER.get(role):
                            self.assertEqual(r.body["user"], USER[role])
                    if path == "/v1/version":
                        # rbac.yaml names no policy: the daemon's default
                        self.assertEqual(r.body["placement"], "isostack")
                    if path == "/v1/capacity":
                        self.assertEqual(set(r.body.keys()), harness.CAPACITY_KEYS,
                                         "capacity grew a breakdown: %r" % r)

    # ------------------------------------------------------------ tenants

    def test_tenants_list(self):
        for role in CALLERS:
            with self.subTest(role=role):
                r = self.call(role, "GET", "/v1/tenants")
                self.check("GET /v1/tenants", "-", role, r)
                if r.status != 200:
                    continue
                names = [x["name"] for x in r.body["items"]]
                t = tenant_of(role)
                if t:
                    self.assertEqual(names, [TENANT[t]])
                    self.assertIsNone(r.body["next"])
                else:
                    self.assertIn(TENANT["A"], names)
                    self.assertIn(TENANT["B"], names)
                # paging with limit=1 must not leak either
                if t:
                    r1 = self.call(role, "GET", "/v1/tenants?limit=1")
                    self.assertEqual([x["name"] for x in r1.body["items"]], [TENANT[t]])
                    self.assertIsNone(r1.body["next"])

    def test_tenants_create(self):
        for role in CALLERS:
            with self.subTest(role=role):
                name = harness.uniq("rbac-new")
                r = self.call(role, "POST", "/v1/tenants", {"name": name})
                before = 404
                after = self.admin.get("/v1/tenants/" + name).status
                if r.status == 201:
                    self.assertEqual(r.body["name"], name)
                    self.assertStatus(self.admin.delete("/v1/tenants/" + name), 204)
                self.check("POST /v1/tenants", "-", role, r, before=before, after=after)

    def _tenant_target(self, role, target):
        t = tenant_of(role) or "A"
        if target == "own":
            return TENANT[t]
        if target == "other":
            return TENANT[other(t)]
        return MISSING_TENANT

    def test_tenants_get(self):
        ep = "GET /v1/tenants/X"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target):
                    name = self._tenant_target(role, target)
                    r = self.call(role, "GET", "/v1/tenants/" + name)
                    self.check(ep, target, role, r)
                    if r.status == 200:
                        self.assertEqual(r.body["name"], name)
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o = self._tenant_target(role, "other")
                self.assert_same_as_missing(role, "GET", "/v1/tenants/" + o, None, o,
                                            "/v1/tenants/" + MISSING_TENANT, None, MISSING_TENANT)

    def test_tenants_update(self):
        ep = "PATCH /v1/tenants/X"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target):
                    name = self._tenant_target(role, target)
                    t = "A" if name == TENANT["A"] else "B"
                    before = self.state_of("/v1/tenants/" + name)
                    r = self.call(role, "PATCH", "/v1/tenants/" + name, {"description": DESC[t]})
                    after = self.state_of("/v1/tenants/" + name)
                    self.check(ep, target, role, r, before, after)
                    if r.status == 200:
                        self.assertEqual(r.body["description"], DESC[t])
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o = self._tenant_target(role, "other")
                b = {"description": "x"}
                self.assert_same_as_missing(role, "PATCH", "/v1/tenants/" + o, b, o,
                                            "/v1/tenants/" + MISSING_TENANT, b, MISSING_TENANT)

    def test_tenants_delete(self):
        ep = "DELETE /v1/tenants/X"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target):
                    if role == "admin" and target != "missing":
                        name = self.admin.post("/v1/tenants", {"name": harness.uniq("rbac-del")}).body["name"]
                    else:
                        name = self._tenant_target(role, target)
                    before = self.state_of("/v1/tenants/" + name)
                    r = self.call(role, "DELETE", "/v1/tenants/" + name)
                    after = self.state_of("/v1/tenants/" + name)
                    self.check(ep, target, role, r, before, after)
        for t in ("A", "B"):
            self.assertStatus(self.admin.get("/v1/tenants/" + TENANT[t]), 200)
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o = self._tenant_target(role, "other")
                self.assert_same_as_missing(role, "DELETE", "/v1/tenants/" + o, None, o,
                                            "/v1/tenants/" + MISSING_TENANT, None, MISSING_TENANT)

    # ------------------------------------------------------------ tokens

    def test_tokens_list(self):
        for role in CALLERS:
            with self.subTest(role=role):
                r = self.call(role, "GET", "/v1/tokens")
                self.check("GET /v1/tokens", "-", role, r)
                if r.status != 200:
                    continue
                items = self._all_pages(role, "/v1/tokens", limit=2)
                ids = [x["id"] for x in items]
                self.assertEqual(len(ids), len(set(ids)))
                for x in items:
                    self.assertNotIn("token", x)
                    self.assert_token_keys(x)
                t = tenant_of(role)
                if role in ("A-user", "B-user"):
                    self.assertEqual(ids, [self.tok[role]["id"]], "a tenant-user lists other tokens")
                elif t:
                    self.assertTrue(all(x["tenant"] == TENANT[t] for x in items), items)
                    for rr in ("%s-admin" % t, "%s-user" % t, "%s-user2" % t):
                        self.assertIn(self.tok[rr]["id"], ids)
                else:
                    for rr in ("auditor", "A-admin", "A-user", "A-user2", "B-admin", "B-user", "B-user2"):
                        self.assertIn(self.tok[rr]["id"], ids)
                    self.assertIn(self.tok["admin"]["id"], ids)
        ep = "GET /v1/tokens?tenant=X"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target, query="tenant"):
                    name = self._tenant_target(role, target)
                    r = self.call(role, "GET", "/v1/tokens?tenant=" + name)
                    self.check(ep, target, role, r)
                    if r.status == 200:
                        self.assertTrue(all(x["tenant"] == name for x in r.body["items"]), repr(r))
                        if role in ("A-user", "B-user"):
                            self.assertEqual([x["id"] for x in r.body["items"]], [self.tok[role]["id"]])
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o = self._tenant_target(role, "other")
                self.assert_same_as_missing(role, "GET", "/v1/tokens?tenant=" + o, None, o,
                                            "/v1/tokens?tenant=" + MISSING_TENANT, None, MISSING_TENANT)

    def _all_pages(self, role, path, limit):
        items, after = [], None
        for _ in range(1000):
            q = "%s%slimit=%d" % (path, "&" if "?" in path else "?", limit)
            if after:
                q += "&after=" + harness._quote(after)
            r = self.call(role, "GET", q)
            self.assertStatus(r, 200)
            items += r.body["items"]
            after = r.body["next"]
            if after is None:
                return items
        self.fail("endless paging")

    def _token_create_body(self, role, target):
        t = tenant_of(role) or "A"
        role_req, _, rel = target.partition("/")
        body = {"role": role_req, "user": "%s-made-%s" % (TENANT[t][:5], role_req)}
        if rel == "own":
            body["tenant"] = TENANT[t]
        elif rel == "other":
            body["tenant"] = TENANT[other(t)]
            body["user"] = "%s-made-%s" % (TENANT[other(t)][:5], role_req)
        elif rel == "missing":
            body["tenant"] = MISSING_TENANT
        return body

    def test_tokens_create(self):
        ep = "POST /v1/tokens"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target):
                    body = self._token_create_body(role, target)
                    n_before = len(self.admin.list_all("/v1/tokens"))
                    r = self.call(role, "POST", "/v1/tokens", body)
                    if r.status == 201:
                        tn = r.body["tenant"]
                        for t in ("A", "B"):
                            if tn == TENANT[t]:
                                self.secrets[t].update([r.body["id"], r.body["user"]])
                        self.assertEqual(r.body["role"], body["role"])
                        if tenant_of(role):
                            self.assertEqual(tn, TENANT[tenant_of(role)])
                        self.assertTrue(harness.TOKEN_RE.match(r.body["token"]))
                    n_after = len(self.admin.list_all("/v1/tokens"))
                    self.check(ep, target, role, r, n_before, n_after)
        for role in ("A-admin", "B-admin", "A-user", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                bo = self._token_create_body(role, "tenant-user/other")
                bm = dict(bo, tenant=MISSING_TENANT)
                self.assert_same_as_missing(role, "POST", "/v1/tokens", bo, bo["tenant"],
                                            "/v1/tokens", bm, MISSING_TENANT)

    def _token_target(self, role, target, fresh):
        """(token id, caller token) for a token endpoint. `fresh`: make new
        objects so that a revocation does not break later cases."""
        t = tenant_of(role)
        caller = self.secret.get(role)
        if fresh and role != "none":
            obj, caller = self._issue(role if role != "admin" else "admin")
            caller_id = obj["id"]
        else:
            caller_id = self.tok[role]["id"] if role != "none" else self.tok["A-user"]["id"]
        if target == "self":
            return caller_id, caller
        if target == "missing":
            return missing_like(self.tok["A-user2"]["id"]), caller
        if target == "cluster":
            src = "admin" if role == "auditor" else "auditor"
            if fresh:
                return self._issue("auditor")[0]["id"], caller
            return self.tok[src]["id"], caller
        tt = t or "A"
        owner = "%s-user2" % (tt if target == "sibling" else other(tt))
        if fresh:
            return self._issue(owner)[0]["id"], caller
        return self.tok[owner]["id"], caller

    def test_tokens_get(self):
        ep = "GET /v1/tokens/X"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target):
                    tid, caller = self._token_target(role, target, fresh=False)
                    r = self.call(role, "GET", "/v1/tokens/" + tid, token=None if role == "none" else caller)
                    self.check(ep, target, role, r)
                    if r.status == 200:
                        self.assertEqual(r.body["id"], tid)
                        self.assert_token_keys(r.body)
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o, _ = self._token_target(role, "other", fresh=False)
                m = missing_like(o)
                self.assert_same_as_missing(role, "GET", "/v1/tokens/" + o, None, o,
                                            "/v1/tokens/" + m, None, m)

    def test_tokens_revoke(self):
        ep = "DELETE /v1/tokens/X"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target):
                    tid, caller = self._token_target(role, target, fresh=True)
                    before = self.state_of("/v1/tokens/" + tid)
                    r = self.call(role, "DELETE", "/v1/tokens/" + tid, token=None if role == "none" else caller)
                    after = self.state_of("/v1/tokens/" + tid)
                    self.check(ep, target, role, r, before, after)
                    if r.status == 204:
                        self.assertIsNotNone(after["revoked"], "204 but not revoked")
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o, caller = self._token_target(role, "other", fresh=True)
                m = missing_like(o)
                self.assert_same_as_missing(role, "DELETE", "/v1/tokens/" + o, None, o,
                                            "/v1/tokens/" + m, None, m, token=caller)
                self.assertIsNone(self.admin.get("/v1/tokens/" + o).body["revoked"])
        # the long-lived tokens still work
        for role in ("auditor", "A-admin", "A-user", "B-admin", "B-user"):
            self.assertStatus(self.call(role, "GET", "/v1/whoami"), 200, role)

    # ------------------------------------------------------------ nodes, gpus

    def test_infrastructure(self):
        for role in CALLERS:
            with self.subTest(role=role):
                for ep, path in (("GET /v1/nodes", "/v1/nodes"), ("GET /v1/nodes?pool=P", "/v1/nodes?pool=lime"),
                                 ("GET /v1/nodes/X", "/v1/nodes/kiwi02"), ("GET /v1/gpus", "/v1/gpus"),
                                 ("GET /v1/gpus?node=N", "/v1/gpus?node=lime01")):
                    r = self.call(role, "GET", path)
                    self.check(ep, "-", role, r)
                    if r.status == 200 and path == "/v1/gpus":
                        allocs = {i["allocation"] for g in r.body["items"] for i in g["instances"]}
                        self.assertIn(self.alloc["A-user"]["id"], allocs)
                        self.assertIn(self.alloc["B-user"]["id"], allocs)
                for verb in ("cordon", "drain", "uncordon"):
                    ep = "POST /v1/nodes/X/%s" % verb
                    before = self.admin.get("/v1/nodes/kiwi02").body["state"]
                    r = self.call(role, "POST", "/v1/nodes/kiwi02/" + verb)
                    after = self.admin.get("/v1/nodes/kiwi02").body["state"]
                    self.check(ep, "-", role, r, before, after)
                    if r.status == 200:
                        self.assertEqual(r.body["name"], "kiwi02")
                    self.assertStatus(self.admin.post("/v1/nodes/kiwi02/uncordon"), 200)

    # ------------------------------------------------------------ allocations

    def test_allocations_list(self):
        for role in CALLERS:
            with self.subTest(role=role):
                r = self.call(role, "GET", "/v1/allocations")
                self.check("GET /v1/allocations", "-", role, r)
                if r.status != 200:
                    continue
                items = self._all_pages(role, "/v1/allocations", limit=1)
                ids = [a["id"] for a in items]
                self.assertEqual(len(ids), len(set(ids)))
                t = tenant_of(role)
                if role in ("A-user", "B-user"):
                    self.assertTrue(all(a["owner"] == USER[role] for a in items),
                                    "a tenant-user lists allocations it does not own")
                    self.assertIn(self.alloc[role]["id"], ids)
                    self.assertNotIn(self.alloc[role + "2"]["id"], ids)
                elif t:
                    self.assertTrue(all(a["tenant"] == TENANT[t] for a in items))
                    for rr in ("-admin", "-user", "-user2"):
                        self.assertIn(self.alloc[t + rr]["id"], ids)
                else:
                    for rr in ("A-admin", "A-user", "A-user2", "B-admin", "B-user", "B-user2"):
                        self.assertIn(self.alloc[rr]["id"], ids)
        ep = "GET /v1/allocations?tenant=X"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target, query="tenant"):
                    name = self._tenant_target(role, target)
                    r = self.call(role, "GET", "/v1/allocations?tenant=" + name)
                    self.check(ep, target, role, r)
                    if r.status == 200:
                        self.assertTrue(all(a["tenant"] == name for a in r.body["items"]))
                        if role in ("A-user", "B-user"):
                            self.assertTrue(all(a["owner"] == USER[role] for a in r.body["items"]))
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o = self._tenant_target(role, "other")
                self.assert_same_as_missing(role, "GET", "/v1/allocations?tenant=" + o, None, o,
                                            "/v1/allocations?tenant=" + MISSING_TENANT, None,
                                            MISSING_TENANT)

    def _alloc_create_body(self, role, target):
        t = tenant_of(role) or "A"
        tt = other(t) if target == "other" else t
        body = {"gpus": ALLOC_GPUS, "pool": POOL[tt], "name": "%s-made" % TENANT[tt][:5]}
        if target in ("own", "other"):
            body["tenant"] = TENANT[tt]
        elif target == "missing":
            body["tenant"] = MISSING_TENANT
        return body, tt

    def test_allocations_create(self):
        ep = "POST /v1/allocations"
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target):
                    body, tt = self._alloc_create_body(role, target)
                    n_before = len(self.admin.list_all("/v1/allocations"))
                    r = self.call(role, "POST", "/v1/allocations", body)
                    if r.status == 201:
                        self.secrets[tt].update([r.body["id"], body["name"]])
                        self.assertEqual(r.body["tenant"], TENANT[tt])
                        if USER.get(role):
                            self.assertEqual(r.body["owner"], USER[role])
                    n_after = len(self.admin.list_all("/v1/allocations"))
                    self.check(ep, target, role, r, n_before, n_after)
                    if r.status == 400:
                        self.assertEqual(r.body["error"]["field"], "tenant")
                    if r.status == 404:
                        self.assertEqual(r.body["error"]["field"], "tenant")
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                bo, _ = self._alloc_create_body(role, "other")
                bm = dict(bo, tenant=MISSING_TENANT)
                self.assert_same_as_missing(role, "POST", "/v1/allocations", bo, bo["tenant"],
                                            "/v1/allocations", bm, MISSING_TENANT)

    def _alloc_target(self, role, target, fresh):
        t = tenant_of(role) or "A"
        if target == "missing":
            return missing_like(self.alloc["A-user"]["id"])
        if target == "mine":
            owner = role if tenant_of(role) else "A-user"
        elif target == "sibling":
            if role.endswith("-admin") and tenant_of(role):
                owner = t + "-user"
            else:
                owner = t + "-user2"
        else:
            owner = other(t) + "-user2"
        if fresh:
            return self._fresh_alloc(owner)["id"]
        return self.alloc[owner]["id"]

    def _alloc_cases(self, ep, method, body, fresh):
        for role in CALLERS:
            for target in self.targets_of(ep):
                with self.subTest(role=role, target=target):
                    aid = self._alloc_target(role, target, fresh)
                    before = self.state_of("/v1/allocations/" + aid)
                    r = self.call(role, method, "/v1/allocations/" + aid, body)
                    after = self.state_of("/v1/allocations/" + aid)
                    self.check(ep, target, role, r, before, after)
                    if r.status == 200:
                        self.assertEqual(r.body["id"], aid)
                        harness.check_allocation(self, r.body)
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o = self._alloc_target(role, "other", fresh)
                m = missing_like(o)
                self.assert_same_as_missing(role, method, "/v1/allocations/" + o, body, o,
                                            "/v1/allocations/" + m, body, m)
                self.assertEqual(self.admin.get("/v1/allocations/" + o).body["state"], "active")

    def test_allocations_get(self):
        self._alloc_cases("GET /v1/allocations/X", "GET", None, fresh=False)

    def test_allocations_resize(self):
        self._alloc_cases("PATCH /v1/allocations/X", "PATCH", {"members": 2}, fresh=True)

    def test_allocations_release(self):
        self._alloc_cases("DELETE /v1/allocations/X", "DELETE", None, fresh=True)

    # ------------------------------------------------------------ tenancy

    def test_tenancy_routes(self):
        for role in CALLERS:
            with self.subTest(role=role, area="orgs"):
                r = self.call(role, "GET", "/v1/orgs")
                self.check("GET /v1/orgs", "-", role, r)
                if r.status == 200:
                    self.assertIn(ORG, [o["name"] for o in r.body["items"]])
                name = harness.uniq("rbac-org")
                r = self.call(role, "POST", "/v1/orgs", {"name": name})
                after = name in [o["name"] for o in self.admin.get("/v1/orgs").body["items"]]
                self.check("POST /v1/orgs", "-", role, r, False, after)
                if not after:
                    self.assertStatus(self.admin.post("/v1/orgs", {"name": name}), 201)
                r = self.call(role, "DELETE", "/v1/orgs/" + name)
                self.check("DELETE /v1/orgs/X", "-", role, r)
                r = self.call(role, "GET", "/v1/orgs/%s/quota" % ORG)
                self.check("GET /v1/orgs/X/quota", "-", role, r)
                before = self.state_of("/v1/orgs/%s/quota" % ORG)
                r = self.call(role, "PUT", "/v1/orgs/%s/quota" % ORG, GPU_QUOTA)
                self.check("PUT /v1/orgs/X/quota", "-", role, r, before,
                           self.state_of("/v1/orgs/%s/quota" % ORG))
            for target in ("own", "other", "missing"):
                with self.subTest(role=role, target=target, area="projects"):
                    name = self._tenant_target(role, target)
                    t = "A" if name == TENANT["A"] else "B"
                    base = "/v1/tenants/" + name
                    r = self.call(role, "GET", base + "/projects")
                    self.check("GET /v1/tenants/X/projects", target, role, r)
                    if r.status == 200:
                        self.assertEqual([p["name"] for p in r.body["items"]], [PROJECT[t]])
                    r = self.call(role, "GET", base + "/quota")
                    self.check("GET /v1/tenants/X/quota", target, role, r)
                    if target == "missing":
                        continue
                    before = self.state_of(base + "/quota")
                    r = self.call(role, "PUT", base + "/quota", GPU_QUOTA)
                    self.check("PUT /v1/tenants/X/quota", target, role, r, before,
                               self.state_of(base + "/quota"))
                    pq = "%s/projects/%s/quota" % (base, PROJECT[t])
                    r = self.call(role, "GET", pq)
                    self.check("GET /v1/tenants/X/projects/P/quota", target, role, r)
                    before = self.state_of(pq)
                    r = self.call(role, "PUT", pq, GPU_QUOTA)
                    self.check("PUT /v1/tenants/X/projects/P/quota", target, role, r, before,
                               self.state_of(pq))
                    pname = "%s-p%d" % (t.lower(), harness._uniq_counter[0])
                    harness.uniq("p")
                    r = self.call(role, "POST", base + "/projects", {"name": pname})
                    created = pname in [p["name"] for p in
                                        self.admin.get(base + "/projects").body["items"]]
                    self.check("POST /v1/tenants/X/projects", target, role, r, False, created)
                    if not created:
                        self.assertStatus(self.admin.post(base + "/projects", {"name": pname}), 201)
                    self.secrets[t].add(pname)
                    r = self.call(role, "DELETE", "%s/projects/%s" % (base, pname))
                    self.check("DELETE /v1/tenants/X/projects/P", target, role, r)
                    if r.status != 204:
                        self.assertStatus(self.admin.delete("%s/projects/%s" % (base, pname)), 204)
            with self.subTest(role=role, area="queue"):
                for ep in ("GET /v1/queue", "GET /v1/usage"):
                    r = self.call(role, "GET", ep.split(" ")[1])
                    self.check(ep, "-", role, r)
                    t = tenant_of(role)
                    if r.status == 200 and t and ep == "GET /v1/usage":
                        self.assertEqual({x["account"] for x in r.body["items"]},
                                         {TENANT[t], "%s/%s" % (TENANT[t], PROJECT[t])})
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role, check="same-as-missing"):
                o = self._tenant_target(role, "other")
                for suffix in ("/quota", "/projects"):
                    self.assert_same_as_missing(role, "GET", "/v1/tenants/" + o + suffix, None, o,
                                                "/v1/tenants/" + MISSING_TENANT + suffix, None,
                                                MISSING_TENANT)

    # ------------------------------------------------------------ auditor

    # ------------------------------------------------------------ audit log

    def _event_seq(self, tenant):
        """The seq of an event about tenant's objects (the admin's view)."""
        for it in self.admin.list_all("/v1/audit/events?tenant=" + TENANT[tenant]):
            if it["event"]["object"]["tenant"] == TENANT[tenant]:
                return it["seq"]
        raise AssertionError("no event about tenant %s" % tenant)

    def test_audit_endpoints(self):
        head = self.admin.get("/v1/audit/head").body
        size = head["size"]
        for role in CALLERS:
            t = tenant_of(role) or "A"
            with self.subTest(role=role):
                r = self.call(role, "GET", "/v1/audit/events")
                self.check("GET /v1/audit/events", "-", role, r)
                if r.status == 200 and tenant_of(role):
                    for it in r.body["items"]:
                        self.assertEqual(it["event"]["object"]["tenant"], TENANT[t], it)
                for target, tn in (("own", t), ("other", other(t))):
                    r = self.call(role, "GET", "/v1/audit/events?tenant=" + TENANT[tn])
                    self.check("GET /v1/audit/events?tenant=X", target, role, r)
                for ep in ("GET /v1/audit/head", "GET /v1/audit/pubkey"):
                    r = self.call(role, "GET", ep.split(" ")[1])
                    self.check(ep, "-", role, r)
                for target, tn in (("own", t), ("other", other(t))):
                    seq = self._event_seq(tn)
                    r = self.call(role, "GET", "/v1/audit/proof/inclusion?seq=%d&size=%d"
                                  % (seq, size))
                    self.check("GET /v1/audit/proof/inclusion", target, role, r)
                r = self.call(role, "GET", "/v1/audit/proof/inclusion?seq=%d&size=%d"
                              % (size + 1000, size))
                self.check("GET /v1/audit/proof/inclusion", "missing", role, r)
                r = self.call(role, "GET", "/v1/audit/proof/consistency?from=1&to=%d" % size)
                self.check("GET /v1/audit/proof/consistency", "-", role, r)

    def test_auditor_reads_all_and_changes_nothing(self):
        aud = "auditor"
        snap = self._world_snapshot()
        muts = [
            ("POST", "/v1/tenants", {"name": harness.uniq("aud")}),
            ("PATCH", "/v1/tenants/" + TENANT["A"], {"description": "changed"}),
            ("DELETE", "/v1/tenants/" + TENANT["B"], None),
            ("POST", "/v1/tokens", {"role": "auditor"}),
            ("POST", "/v1/tokens", {"role": "tenant-user", "tenant": TENANT["A"]}),
            ("DELETE", "/v1/tokens/" + self.tok["A-user"]["id"], None),
            ("DELETE", "/v1/tokens/" + self.tok["auditor"]["id"], None),
            ("POST", "/v1/nodes/lime01/cordon", None),
            ("POST", "/v1/nodes/lime01/drain", None),
            ("POST", "/v1/nodes/lime01/uncordon", None),
            ("POST", "/v1/allocations", {"tenant": TENANT["A"], "gpus": ALLOC_GPUS}),
            ("PATCH", "/v1/allocations/" + self.alloc["B-user"]["id"], {"members": 2}),
            ("DELETE", "/v1/allocations/" + self.alloc["A-user"]["id"], None),
        ]
        for method, path, body in muts:
            with self.subTest(method=method, path=path):
                r = self.call(aud, method, path, body)
                self.assertError(r, 403, "forbidden")
        self.assertEqual(self._world_snapshot(), snap, "an auditor's refused mutation changed state")
        for path in ("/v1/tenants/" + TENANT["B"], "/v1/tokens/" + self.tok["B-user"]["id"],
                     "/v1/allocations/" + self.alloc["B-user2"]["id"], "/v1/nodes/lime02", "/v1/gpus"):
            self.assertStatus(self.call(aud, "GET", path), 200, path)

    # ------------------------------------------------------------ node-agent

    def test_node_agent_is_refused_beyond_the_matrix(self):
        """The routes the matrix leaves out (fabric, faults, node down/up,
        pools) refuse a node-agent too, before reading the body, and change
        nothing; each refusal is an audit event naming the role."""
        node = self.admin.get("/v1/nodes/" + AGENT_NODE).body
        routes = [
            ("GET", "/v1/fabric", None), ("GET", "/v1/fabric/intent", None),
            ("GET", "/v1/fabric/verify", None),
            ("POST", "/v1/nodes/%s/down" % AGENT_NODE, None),
            ("POST", "/v1/nodes/%s/up" % AGENT_NODE, None),
            ("DELETE", "/v1/nodes/%s/gpus/0/fault" % AGENT_NODE, None),
            ("POST", "/v1/pools/kiwi/cordon", None), ("POST", "/v1/pools/kiwi/drain", None),
            ("POST", "/v1/pools/kiwi/uncordon", None),
            ("POST", "/v1/tokens", {"role": "node-agent", "node": AGENT_NODE}),
        ]
        size = self.admin.get("/v1/audit/head").body["size"]
        for method, path, body in routes:
            with self.subTest(method=method, path=path):
                self.assertError(self.call("agent", method, path, body), 403, "forbidden")
        # a malformed body is not even read
        r = self.d.request("POST", "/v1/tokens", raw=b"{not json", token=self.secret["agent"])
        self.assertError(r, 403, "forbidden")
        self.assertEqual(self.admin.get("/v1/nodes/" + AGENT_NODE).body, node)
        denied = [it["event"] for it in self.admin.list_all("/v1/audit/events?after=%d" % (size - 1))
                  if it["event"]["actor"]["role"] == "node-agent"]
        self.assertTrue(all(e["outcome"] == "denied" for e in denied), denied)
        self.assertIn("node.down", {e["action"] for e in denied})
        self.assertIn("gpu.restore", {e["action"] for e in denied})

    def test_fabric_health(self):
        """GET /v1/fabric/health (issue 17, the CNI plugin's STATUS): any
        node agent reads whether the SM is reachable, and only that (no
        generation, no tenant's data); cluster roles get the driver's
        generations too; tenant roles 403 as for /v1/fabric. The sim driver
        has no SM process to reach: "none"."""
        for role in ("A-admin", "A-user", "B-admin", "B-user"):
            with self.subTest(role=role):
                self.assertError(self.call(role, "GET", "/v1/fabric/health"), 403, "forbidden")
        self.assertStatus(self.call("none", "GET", "/v1/fabric/health"), 401)
        since = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        # this node's agent, and any other node's: the same small body
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": "lime02"})
        self.assertStatus(r, 201)
        other_agent = r.body["token"]
        self.addCleanup(self.admin.delete, "/v1/tokens/" + r.body["id"])
        bodies = []
        for role, token in (("agent", Ellipsis), ("agent", other_agent)):
            r = self.call(role, "GET", "/v1/fabric/health", token=token)
            self.assertStatus(r, 200)
            self.assertEqual(set(r.body), {"driver", "sm"}, r.body)
            self.assertEqual(set(r.body["sm"]), {"state", "reason", "since"}, r.body)
            self.assertEqual((r.body["driver"], r.body["sm"]["state"]), ("sim", "none"), r.body)
            self.assertRegex(r.body["sm"]["since"], since)
            for t in ("A", "B"):
                for secret in self.secrets[t]:
                    self.assertNotIn(secret, r.text)
            bodies.append(r.body)
        self.assertEqual(bodies[0], bodies[1])
        fabric = self.admin.get("/v1/fabric").body
        for role in ("admin", "auditor"):
            with self.subTest(role=role):
                r = self.call(role, "GET", "/v1/fabric/health")
                self.assertStatus(r, 200)
                self.assertEqual(set(r.body), {"driver", "sm", "generation", "applied",
                                               "confirmed", "incident"}, r.body)
                self.assertEqual(r.body["sm"], bodies[0]["sm"])
                self.assertEqual(r.body["generation"], fabric["generation"])
                self.assertEqual(r.body["confirmed"], fabric["confirmed"])
                self.assertIs(r.body["incident"], False)
        # strict like every read: no query
        self.assertStatus(self.call("agent", "GET", "/v1/fabric/health?x=1"), 400)

    def test_node_agent_routes(self):
        """The agent routes (docs/agents.md), on a daemon of their own: a
        status report starts the node's lease, which must not touch the
        shared world."""
        status = {"term_seen": 0, "version": "rbac", "gpus": [], "instances": []}
        with harness.Daemon(CONFIG) as d:
            admin = d.client()
            self.assertStatus(admin.post("/v1/tenants", {"name": TENANT["A"]}), 201)
            secret = {"none": None, "admin": d.admin_token}
            for role, body in (("auditor", {"role": "auditor"}),
                               ("A-admin", {"role": "tenant-admin", "tenant": TENANT["A"]}),
                               ("A-user", {"role": "tenant-user", "tenant": TENANT["A"], "user": "u"}),
                               ("agent", {"role": "node-agent", "node": AGENT_NODE})):
                r = admin.post("/v1/tokens", body)
                self.assertStatus(r, 201)
                secret[role] = r.body["token"]
            for role, tok in secret.items():
                for target, node in (("own", AGENT_NODE), ("other", "kiwi02"),
                                     ("missing", "nosuch-node-qq")):
                    with self.subTest(role=role, target=target):
                        r = d.request("GET", "/v1/nodes/%s/desired" % node, token=tok)
                        self.check("GET /v1/nodes/X/desired", target, role, r)
                        if r.status == 200:
                            self.assertEqual(r.body["node"], node)
                        r = d.request("PUT", "/v1/nodes/%s/status" % node, body=status, token=tok)
                        self.check("PUT /v1/nodes/X/status", target, role, r)
                        # an application XID: recorded, takes nothing
                        r = d.request("POST", "/v1/nodes/%s/gpus/0/fault" % node, body={"xid": 13},
                                      token=tok)
                        self.check("POST /v1/nodes/X/gpus/0/fault", target, role, r)

    def test_node_agent_tokens(self):
        tok = self.tok["agent"]
        self.assertEqual((tok["role"], tok["node"], tok["tenant"]), ("node-agent", AGENT_NODE, None))
        got = self.admin.get("/v1/tokens/" + tok["id"])
        self.assertStatus(got, 200)
        self.assert_token_keys(got.body)
        self.assertEqual(got.body["node"], AGENT_NODE)
        self.assertIn(tok["id"], [t["id"] for t in self.admin.list_all("/v1/tokens")
                                  if t.get("node") == AGENT_NODE])
        # the auditor sees it too; tenants never see it
        self.assertEqual(self.call("auditor", "GET", "/v1/tokens/" + tok["id"]).body["node"],
                         AGENT_NODE)
        self.assertStatus(self.call("A-admin", "GET", "/v1/tokens/" + tok["id"]), 404)
        # other roles carry no node
        for role in ("auditor", "A-admin", "A-user"):
            self.assertNotIn("node", self.tok[role])

        refused = [
            # (caller, body, status, field)
            ("admin", {"role": "node-agent"}, 400, "node"),
            ("admin", {"role": "node-agent", "node": "nosuch-node-qq"}, 400, "node"),
            ("admin", {"role": "node-agent", "node": "Kiwi01"}, 400, "node"),
            ("admin", {"role": "node-agent", "node": ""}, 400, "node"),
            ("admin", {"role": "node-agent", "node": 7}, 400, "node"),
            ("admin", {"role": "node-agent", "node": AGENT_NODE, "tenant": TENANT["A"]}, 400,
             "tenant"),
            ("admin", {"role": "tenant-user", "tenant": TENANT["A"], "node": AGENT_NODE}, 400,
             "node"),
            ("admin", {"role": "auditor", "node": AGENT_NODE}, 400, "node"),
            ("admin", {"role": "cluster-admin", "node": AGENT_NODE}, 400, "node"),
            ("A-admin", {"role": "node-agent", "node": AGENT_NODE}, 403, "role"),
            ("A-user", {"role": "node-agent", "node": AGENT_NODE}, 403, None),
            ("auditor", {"role": "node-agent", "node": AGENT_NODE}, 403, None),
        ]
        n_before = len(self.admin.list_all("/v1/tokens"))
        for caller, body, status, field in refused:
            with self.subTest(caller=caller, body=body):
                r = self.call(caller, "POST", "/v1/tokens", body)
                code = "invalid_argument" if status == 400 else "forbidden"
                self.assertError(r, status, code, field=field)
        self.assertEqual(len(self.admin.list_all("/v1/tokens")), n_before)
        # the node's agent token is revoked like any other, by the cluster-admin
        obj, sec = self._issue("agent")
        self.assertStatus(self.d.request("GET", "/v1/whoami", token=sec), 403)
        self.assertStatus(self.admin.delete("/v1/tokens/" + obj["id"]), 204)
        self.assertStatus(self.d.request("GET", "/v1/whoami", token=sec), 401)

    def test_node_agent_token_survives_a_restart(self):
        with harness.Daemon(CONFIG) as d:
            r = d.client().post("/v1/tokens", {"role": "node-agent", "node": "lime02",
                                               "description": "agent of lime02"})
            self.assertStatus(r, 201)
            d.restart()
            got = d.client().get("/v1/tokens/" + r.body["id"])
            self.assertStatus(got, 200)
            self.assertEqual((got.body["role"], got.body["node"]), ("node-agent", "lime02"))
            self.assertStatus(d.request("GET", "/v1/tenants", token=r.body["token"]), 403)

    def _world_snapshot(self):
        return (self.admin.list_all("/v1/tenants"), self.admin.list_all("/v1/tokens"),
                self.admin.list_all("/v1/allocations"), self.admin.list_all("/v1/nodes"))


if __name__ == "__main__":
    harness.main()

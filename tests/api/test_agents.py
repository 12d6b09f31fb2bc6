#!/usr/bin/env python3
"""test_agents.py: the controller's side of the node agents (docs/agents.md)
against a real isostackd: each node's desired-state document (MIG instances
and whole GPUs, exactly), its generation (moves on create and release, only
for the node touched, and only grows across a restart), the fencing term, the
long poll (answered on a change, or with the same document at wait_s), the
waiter limits, who may read it (a node-agent only its own node), and bad input
for every query parameter.

Run: python3 tests/api/test_agents.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T, create_alloc, create_tenant, issue_token  # noqa: E402

# tests/api/data/agents.yaml: ag-n01 = 2 x h100-80gb with MIG (pool "mig"),
# ag-n02 = 2 x h100-80gb without MIG (pool "whole"); first-fit placement.
AGENTS = "agents.yaml"
MIG_NODE, WHOLE_NODE = "ag-n01", "ag-n02"
DOC_KEYS = {"node", "generation", "term", "gpus", "vfs"}


def empty_gpus(mig):
    return [{"index": i, "mig": mig, "instances": [], "whole": None} for i in (0, 1)]


class AgentCase(ApiTestCase):
    """A fresh daemon per test: documents and generations are exact."""

    daemon_args = ()

    def setUp(self):
        self.d = Daemon(AGENTS, extra_args=self.daemon_args)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()
        self.tenant = create_tenant(self, self.admin)["name"]

    def tearDown(self):
        try:
            self.d.stop()
        finally:
            self.d.cleanup()

    def desired(self, node, client=None, query=""):
        r = (client or self.admin).get("/v1/nodes/%s/desired%s" % (node, query))
        self.assertStatus(r, 200, "desired state of %s" % node)
        self.assertEqual(set(r.body), DOC_KEYS, "%r" % r)
        self.assertEqual(r.body["node"], node)
        return r.body

    def alloc(self, body):
        body = dict(body, tenant=self.tenant)
        return create_alloc(self, self.admin, body)

    def agent_token(self, node):
        r = self.admin.post("/v1/tokens", {"role": "node-agent", "node": node})
        self.assertStatus(r, 201, "node-agent token")
        return r.body["token"]

    def poll(self, node, after, wait_s, out, token=None):
        """GET ...?after=&wait_s= on a thread; the answer lands in out."""
        def run():
            out.append(harness.http_request(
                self.d.port, "GET", "/v1/nodes/%s/desired?after=%d&wait_s=%d" % (node, after, wait_s),
                token=token or self.d.admin_token, timeout=T(90)))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t


class TestDesired(AgentCase):
    def test_document_for_mig_and_whole_gpu_allocations(self):
        self.assertEqual(self.desired(MIG_NODE)["gpus"], empty_gpus(True))
        self.assertEqual(self.desired(WHOLE_NODE)["vfs"], [])
        mig = self.alloc({"gpus": {"count": 1, "profile": "3g.40gb"}, "pool": "mig"})
        small = self.alloc({"gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "mig"})
        whole = self.alloc({"members": 2, "gpus": {"count": 1, "whole": True}, "pool": "whole"})
        gpus = self.desired(MIG_NODE)["gpus"]
        # first-fit: the 3g.40gb at slice 0 (4 wide), the 1g.10gb at the next free start
        p = [x for x in small["placement"]][0]
        self.assertEqual(gpus[0], {"index": 0, "mig": True, "whole": None, "instances": [
            {"profile": "3g.40gb", "start": 0, "width": 4, "allocation": mig["id"], "member": 0},
            {"profile": "1g.10gb", "start": p["start"], "width": 1, "allocation": small["id"],
             "member": 0}]})
        self.assertEqual(p["gpu"], 0)
        self.assertEqual(gpus[1], empty_gpus(True)[1])
        gpus = self.desired(WHOLE_NODE)["gpus"]
        self.assertEqual(gpus, [
            {"index": 0, "mig": False, "instances": [], "whole": {"allocation": whole["id"], "member": 0}},
            {"index": 1, "mig": False, "instances": [], "whole": {"allocation": whole["id"], "member": 1}}])
        # released: gone from the document
        self.assertStatus(self.admin.delete("/v1/allocations/" + mig["id"]), 200)
        self.assertEqual([i["allocation"] for i in self.desired(MIG_NODE)["gpus"][0]["instances"]],
                         [small["id"]])

    def test_generation_moves_on_change_and_only_for_the_node_touched(self):
        g1, g2 = self.desired(MIG_NODE)["generation"], self.desired(WHOLE_NODE)["generation"]
        self.assertEqual(self.desired(MIG_NODE)["generation"], g1, "a read moves nothing")
        a = self.alloc({"gpus": {"count": 1, "profile": "2g.20gb"}, "pool": "mig"})
        after_create = self.desired(MIG_NODE)["generation"]
        self.assertGreater(after_create, g1)
        self.assertEqual(self.desired(WHOLE_NODE)["generation"], g2)
        # a change elsewhere (a tenant, a cordon of the other node) moves nothing here
        create_tenant(self, self.admin)
        self.assertStatus(self.admin.post("/v1/nodes/%s/cordon" % WHOLE_NODE), 200)
        self.assertEqual(self.desired(MIG_NODE)["generation"], after_create)
        self.assertStatus(self.admin.delete("/v1/allocations/" + a["id"]), 200)
        after_release = self.desired(MIG_NODE)["generation"]
        self.assertGreater(after_release, after_create)
        self.assertEqual(self.desired(WHOLE_NODE)["generation"], g2)
        # a request that waits (pending) changes no document
        self.alloc({"gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "mig"})
        g = self.desired(MIG_NODE)["generation"]
        self.assertGreater(g, after_release)
        p = self.alloc({"gpus": {"count": 2, "profile": "7g.80gb"}, "pool": "mig"})
        self.assertEqual(p["state"], "pending")
        self.assertEqual(self.desired(MIG_NODE)["generation"], g)

    def test_term_and_generations_grow_across_a_restart(self):
        a = self.alloc({"gpus": {"count": 1, "profile": "3g.40gb"}, "pool": "mig"})
        before = self.desired(MIG_NODE)
        before2 = self.desired(WHOLE_NODE)
        self.assertGreaterEqual(before["term"], 1)
        self.d.restart()
        self.admin = self.d.client()
        after = self.desired(MIG_NODE)
        self.assertEqual(after["term"], before["term"] + 1)
        self.assertGreater(after["generation"], before["generation"])
        self.assertGreater(self.desired(WHOLE_NODE)["generation"], before2["generation"])
        self.assertEqual(after["gpus"], before["gpus"], "rebuilt from the store")
        self.assertEqual(after["gpus"][0]["instances"][0]["allocation"], a["id"])
        self.d.restart()
        self.admin = self.d.client()
        self.assertEqual(self.desired(MIG_NODE)["term"], before["term"] + 2)


class TestLongPoll(AgentCase):
    def test_long_poll_is_answered_when_the_document_changes(self):
        g = self.desired(MIG_NODE)["generation"]
        out = []
        t = self.poll(MIG_NODE, g, 60, out)
        a = self.alloc({"gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "mig"})
        # wait_s is 60: an answer within this bound is the change's, not the deadline's
        t.join(T(20))
        self.assertFalse(t.is_alive(), "the waiting request was not answered on the change")
        r = out[0]
        self.assertStatus(r, 200)
        self.assertGreater(r.body["generation"], g)
        self.assertEqual(r.body["gpus"][0]["instances"][0]["allocation"], a["id"])

    def test_a_waiter_on_another_node_is_not_answered_by_a_change(self):
        g2 = self.desired(WHOLE_NODE)["generation"]
        out = []
        t = self.poll(WHOLE_NODE, g2, 2, out)
        self.alloc({"gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "mig"})
        t.join(T(20))
        self.assertFalse(t.is_alive())
        self.assertStatus(out[0], 200)
        self.assertEqual(out[0].body["generation"], g2, "answered only at wait_s, unchanged")

    def test_wait_s_timeout_returns_the_same_document(self):
        doc = self.desired(MIG_NODE)
        out = []
        t = self.poll(MIG_NODE, doc["generation"], 1, out)
        t.join(T(20))
        self.assertFalse(t.is_alive())
        self.assertStatus(out[0], 200)
        self.assertEqual(out[0].body, doc)

    def test_an_old_generation_is_answered_at_once(self):
        doc = self.desired(MIG_NODE)
        out = []
        t = self.poll(MIG_NODE, doc["generation"] - 1, 60, out)
        t.join(T(20))
        self.assertFalse(t.is_alive())
        self.assertEqual(out[0].body, doc)

    def test_at_most_four_waiters_per_node(self):
        g = self.desired(MIG_NODE)["generation"]
        outs = [[] for _ in range(5)]
        threads = [self.poll(MIG_NODE, g, 3, outs[i]) for i in range(5)]
        for t in threads:
            t.join(T(30))
            self.assertFalse(t.is_alive())
        statuses = sorted(o[0].status for o in outs)
        self.assertEqual(statuses, [200, 200, 200, 200, 429], "%r" % [o[0] for o in outs])
        refused = [o[0] for o in outs if o[0].status == 429][0]
        self.assertError(refused, 429, "limit_exceeded", "wait_s")
        # the slots come back once they are answered
        self.assertStatus(self.admin.get("/v1/nodes/%s/desired?after=%d&wait_s=1" % (MIG_NODE, g)), 200)


class TestWaiterCap(AgentCase):
    daemon_args = ("--agent-max-waiters", "2")

    def test_waiters_in_all_are_capped_by_the_flag(self):
        g1, g2 = self.desired(MIG_NODE)["generation"], self.desired(WHOLE_NODE)["generation"]
        outs = [[] for _ in range(3)]
        threads = [self.poll(MIG_NODE, g1, 3, outs[0]), self.poll(WHOLE_NODE, g2, 3, outs[1]),
                   self.poll(MIG_NODE, g1, 3, outs[2])]
        for t in threads:
            t.join(T(30))
            self.assertFalse(t.is_alive())
        self.assertEqual(sorted(o[0].status for o in outs), [200, 200, 429])


class TestScope(AgentCase):
    def test_node_agent_reads_only_its_own_node(self):
        agent = self.d.client(self.agent_token(MIG_NODE))
        self.desired(MIG_NODE, client=agent)
        self.assertError(agent.get("/v1/nodes/%s/desired" % WHOLE_NODE), 404, "not_found")
        self.assertError(agent.get("/v1/nodes/nope/desired"), 404, "not_found")
        # the same answer for another node and for none: nothing to learn
        other = agent.get("/v1/nodes/%s/desired" % WHOLE_NODE).body["error"]
        missing = agent.get("/v1/nodes/ag-n09/desired").body["error"]
        self.assertEqual(other["message"].replace(WHOLE_NODE, "N"), missing["message"].replace("ag-n09", "N"))
        self.assertError(agent.get("/v1/allocations"), 403, "forbidden")
        self.assertError(agent.get("/v1/nodes/" + MIG_NODE), 403, "forbidden")
        self.assertError(agent.get("/v1/tenants"), 403, "forbidden")

    def test_roles(self):
        auditor = self.d.client(issue_token(self, self.admin, "auditor")[1])
        self.desired(WHOLE_NODE, client=auditor)
        for role in ("tenant-admin", "tenant-user"):
            tok = issue_token(self, self.admin, role, tenant=self.tenant,
                              user="u1" if role == "tenant-user" else None)[1]
            self.assertError(self.d.client(tok).get("/v1/nodes/%s/desired" % MIG_NODE), 403,
                             "forbidden")
        self.assertStatus(self.d.client(None).get("/v1/nodes/%s/desired" % MIG_NODE), 401)
        self.assertError(self.admin.get("/v1/nodes/nope/desired"), 404, "not_found")

    def test_bad_query(self):
        base = "/v1/nodes/%s/desired" % MIG_NODE
        for q, field in (("?after=-1", "after"), ("?after=x", "after"), ("?after=", "after"),
                         ("?after=1e3", "after"), ("?after=99999999999999999999", "after"),
                         ("?after=1&wait_s=61", "wait_s"), ("?after=1&wait_s=-1", "wait_s"),
                         ("?after=1&wait_s=x", "wait_s"), ("?after=1&wait_s=", "wait_s"),
                         ("?wait_s=5", "after"), ("?since=1", "since")):
            self.assertError(self.admin.get(base + q), 400, "invalid_argument", field, q)
        self.assertError(self.admin.post(base, {}), 405, "method_not_allowed")


if __name__ == "__main__":
    harness.main(__doc__)

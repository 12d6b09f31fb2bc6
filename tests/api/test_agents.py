#!/usr/bin/env python3
"""test_agents.py: the controller's side of the node agents (docs/agents.md)
against a real isostackd: each node's desired-state document (MIG instances
and whole GPUs, exactly), its generation (moves on create and release, only
for the node touched, and only grows across a restart), the fencing term, the
long poll (answered on a change, or with the same document at wait_s), the
waiter limits, who may read it (a node-agent only its own node), and bad input
for every query parameter; the status an agent reports (strict parsing,
every field named; a term above the controller's is 409; in memory only) and
what it shows (agent on the node, ready/devices/cuda_visible_devices on the
allocation's members); the lease (unreachable, then evicted after the grace,
reachable again on a report; nodes that never had an agent are left alone
unless --agents-required).

Run: python3 tests/api/test_agents.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ApiTestCase, Daemon, T, create_alloc, create_tenant, issue_token  # noqa: E402

# tests/api/data/agents.yaml: ag-n01 = 2 x h100-80gb with MIG (pool "mig"),
# ag-n02 = 2 x h100-80gb without MIG (pool "whole"); first-fit placement.
AGENTS = "agents.yaml"
MIG_NODE, WHOLE_NODE = "ag-n01", "ag-n02"
DOC_KEYS = {"node", "generation", "term", "gpus", "vfs", "members"}


def empty_gpus(mig):
    return [{"index": i, "mig": mig, "instances": [], "whole": None} for i in (0, 1)]


class AgentCase(ApiTestCase):
    """A fresh daemon per test: documents and generations are exact."""

    daemon_args = ()
    agents = False  # True: with the provisioning gate (no --no-agents)

    def setUp(self):
        self.d = Daemon(AGENTS, extra_args=self.daemon_args, agents=self.agents)
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


class TestUndoneChanges(AgentCase):
    daemon_args = ("--preempt-grace", "2")

    def test_a_preemption_trial_moves_no_generation(self):
        """Deciding a preemption gives the victims back and places the
        preemptor on trial, then undoes both: the document, and so its
        generation, must not move until the victims really go."""
        low = self.alloc({"members": 2, "gpus": {"count": 1, "profile": "7g.80gb"}, "pool": "mig"})
        self.assertEqual(low["state"], "active")
        g = self.desired(MIG_NODE)["generation"]
        high = self.alloc({"gpus": {"count": 1, "profile": "7g.80gb"}, "pool": "mig", "priority": 5})
        self.assertEqual(high["state"], "pending")
        got = self.admin.get("/v1/allocations/" + low["id"]).body
        self.assertTrue(got["reason"].startswith("preempted"), "no preemption decided: %r" % got)
        self.assertEqual(self.desired(MIG_NODE)["generation"], g)
        # after the grace the victim goes and the preemptor runs: now it moves
        deadline = time.time() + T(20)
        while time.time() < deadline and self.admin.get("/v1/allocations/" + high["id"]).body["state"] != "active":
            time.sleep(0.1)
        doc = self.desired(MIG_NODE)
        self.assertGreater(doc["generation"], g)
        self.assertEqual([i["allocation"] for gp in doc["gpus"] for i in gp["instances"]], [high["id"]])


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


class TestStop(AgentCase):
    def test_a_daemon_stops_cleanly_with_requests_waiting(self):
        g = self.desired(MIG_NODE)["generation"]
        outs = [[] for _ in range(3)]
        threads = [self.poll(MIG_NODE, g, 60, outs[i]) for i in range(3)]
        time.sleep(0.5)  # ordering only: let them park
        self.d.stop()  # exit status 0, no sanitizer report (harness)
        for t in threads:
            t.join(T(20))
            self.assertFalse(t.is_alive(), "a waiting request outlived the daemon")


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
                         ("?wait_s=5", "after"), ("?since=1", "since"),
                         ("?heartbeat=2", "heartbeat"), ("?heartbeat=yes", "heartbeat")):
            self.assertError(self.admin.get(base + q), 400, "invalid_argument", field, q)
        self.assertError(self.admin.post(base, {}), 405, "method_not_allowed")


def status_body(term_seen=1, gpus=None, instances=None, version="0.1.0"):
    return {"term_seen": term_seen, "version": version,
            "gpus": gpus if gpus is not None else
            [{"index": 0, "model": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0a", "mig_mode": "enabled"}],
            "instances": instances if instances is not None else []}


def instance(alloc, member=0, gpu=0, start=0, profile="3g.40gb", uuid="MIG-0a-1", ready=True, reason=None):
    i = {"gpu": gpu, "start": start, "profile": profile, "uuid": uuid, "allocation": alloc,
         "member": member, "ready": ready}
    if reason is not None:
        i["reason"] = reason
    return i


class TestStatus(AgentCase):
    def put(self, node, body, client=None):
        return (client or self.admin).request("PUT", "/v1/nodes/%s/status" % node, body)

    def test_status_shows_on_the_node_and_the_allocation(self):
        a = self.alloc({"members": 2, "gpus": {"count": 1, "profile": "3g.40gb"}, "pool": "mig"})
        # first-fit: member 0 at GPU 0 slice 0, member 1 at slice 4 of the same GPU
        starts = {p["member"]: (p["gpu"], p["start"]) for p in a["placement"]}
        node = self.admin.get("/v1/nodes/" + MIG_NODE).body
        self.assertIsNone(node["agent"], "no agent reported yet")
        got = self.admin.get("/v1/allocations/" + a["id"]).body
        for m in got["nodes"]:
            self.assertIsNone(m["ready"])
            self.assertEqual(m["devices"], [])
            self.assertIsNone(m["cuda_visible_devices"])
        term = self.desired(MIG_NODE)["term"]
        agent = self.d.client(self.agent_token(MIG_NODE))
        self.assertStatus(self.put(MIG_NODE, status_body(term, instances=[
            instance(a["id"], 0, *starts[0], uuid="MIG-aaaa"),
            instance(a["id"], 1, *starts[1], uuid="", ready=False, reason="creating")]),
            client=agent), 204)
        node = self.admin.get("/v1/nodes/" + MIG_NODE).body
        self.assertEqual(set(node["agent"]), {"connected", "last_seen", "version", "term_seen"})
        self.assertTrue(node["agent"]["connected"])
        self.assertEqual(node["agent"]["version"], "0.1.0")
        self.assertEqual(node["agent"]["term_seen"], term)
        self.assertTime(node["agent"]["last_seen"])
        self.assertIsNone(self.admin.get("/v1/nodes/" + WHOLE_NODE).body["agent"])
        # the owning tenant sees its members' readiness and devices
        tok = issue_token(self, self.admin, "tenant-admin", tenant=self.tenant)[1]
        got = self.d.client(tok).get("/v1/allocations/" + a["id"])
        self.assertStatus(got, 200)
        m0, m1 = got.body["nodes"]
        self.assertEqual((m0["ready"], m0["devices"], m0["cuda_visible_devices"]),
                         (True, [{"gpu": starts[0][0], "uuid": "MIG-aaaa"}], "MIG-aaaa"))
        self.assertEqual((m1["ready"], m1["devices"], m1["cuda_visible_devices"]), (False, [], None))
        # the next report replaces the last one
        self.assertStatus(self.put(MIG_NODE, status_body(term, instances=[
            instance(a["id"], 0, *starts[0], uuid="MIG-aaaa"),
            instance(a["id"], 1, *starts[1], uuid="MIG-bbbb")]), client=agent), 204)
        m1 = self.admin.get("/v1/allocations/" + a["id"]).body["nodes"][1]
        self.assertEqual((m1["ready"], m1["cuda_visible_devices"]), (True, "MIG-bbbb"))

    def test_whole_gpus_join_cuda_visible_devices(self):
        a = self.alloc({"gpus": {"count": 2, "whole": True}, "pool": "whole"})
        self.assertStatus(self.put(WHOLE_NODE, status_body(instances=[
            instance(a["id"], 0, 1, 0, "whole", "GPU-bbbb"), instance(a["id"], 0, 0, 0, "whole", "GPU-aaaa")],
            gpus=[])), 204)
        m = self.admin.get("/v1/allocations/" + a["id"]).body["nodes"][0]
        self.assertEqual(m["cuda_visible_devices"], "GPU-aaaa,GPU-bbbb")
        self.assertEqual(m["devices"], [{"gpu": 0, "uuid": "GPU-aaaa"}, {"gpu": 1, "uuid": "GPU-bbbb"}])
        self.assertTrue(m["ready"])

    def test_status_is_not_kept_across_a_restart(self):
        self.assertStatus(self.put(MIG_NODE, status_body()), 204)
        self.assertIsNotNone(self.admin.get("/v1/nodes/" + MIG_NODE).body["agent"])
        self.d.restart()
        self.admin = self.d.client()
        self.assertIsNone(self.admin.get("/v1/nodes/" + MIG_NODE).body["agent"])

    def test_a_term_above_the_controllers_is_refused(self):
        term = self.desired(MIG_NODE)["term"]
        self.assertError(self.put(MIG_NODE, status_body(term + 1)), 409, "conflict", "term_seen")
        self.assertIsNone(self.admin.get("/v1/nodes/" + MIG_NODE).body["agent"], "nothing kept")
        self.assertStatus(self.put(MIG_NODE, status_body(term)), 204)
        self.assertStatus(self.put(MIG_NODE, status_body(0)), 204, "an older term seen is fine")

    def test_who_may_report(self):
        agent = self.d.client(self.agent_token(MIG_NODE))
        self.assertError(self.put(WHOLE_NODE, status_body(), client=agent), 404, "not_found")
        self.assertError(self.put("nope", status_body(), client=agent), 404, "not_found")
        self.assertError(self.put("nope", status_body()), 404, "not_found")
        auditor = self.d.client(issue_token(self, self.admin, "auditor")[1])
        self.assertError(self.put(MIG_NODE, status_body(), client=auditor), 403, "forbidden")
        tok = issue_token(self, self.admin, "tenant-admin", tenant=self.tenant)[1]
        self.assertError(self.put(MIG_NODE, status_body(), client=self.d.client(tok)), 403, "forbidden")
        self.assertIsNone(self.admin.get("/v1/nodes/" + WHOLE_NODE).body["agent"])

    def test_bad_input_names_the_field(self):
        good_i = instance("a-0123456789abcdef")
        cases = [
            ({"version": "x", "gpus": [], "instances": []}, "term_seen"),
            (dict(status_body(), term_seen=-1), "term_seen"),
            (dict(status_body(), term_seen="1"), "term_seen"),
            (dict(status_body(), term_seen=1.5), "term_seen"),
            (dict(status_body(), version=""), "version"),
            (dict(status_body(), version="x" * 65), "version"),
            (dict(status_body(), version="v\n1"), "version"),
            (dict(status_body(), version=7), "version"),
            ({"term_seen": 1, "version": "x", "instances": []}, "gpus"),
            (dict(status_body(), gpus={}), "gpus"),
            (dict(status_body(), gpus=[1]), "gpus[0]"),
            (dict(status_body(), gpus=[{"index": 0}] * 65), "gpus"),
            (dict(status_body(), extra=1), "extra"),
            ({"term_seen": 1, "version": "x", "gpus": []}, "instances"),
            (dict(status_body(), instances=[{}] * 257), "instances"),
        ]
        gpu = status_body()["gpus"][0]
        for key, bad in (("index", -1), ("index", 2), ("index", 64), ("index", "0"), ("model", ""),
                         ("model", "m" * 97), ("uuid", None), ("uuid", "\u00e9"), ("mig_mode", "on"),
                         ("mig_mode", True), ("colour", "red")):
            g = dict(gpu)
            if bad is None:
                del g[key]
            else:
                g[key] = bad
            cases.append((status_body(gpus=[g]), "gpus[0].%s" % key))
        cases.append((status_body(gpus=[gpu, gpu]), "gpus[1].index"))
        for key, bad in (("gpu", 2), ("gpu", -1), ("gpu", None), ("start", 8), ("start", -1),
                         ("profile", "9g.90gb"), ("profile", ""), ("profile", None),
                         ("uuid", "u" * 97), ("uuid", 5), ("allocation", "a-xyz"),
                         ("allocation", "t-0123456789abcdef"), ("allocation", None),
                         ("member", -1), ("member", 1024), ("member", None), ("ready", "yes"),
                         ("ready", None), ("reason", "r" * 257), ("reason", "a\u0007b"), ("reason", 1),
                         ("extra", 1)):
            i = dict(good_i)
            if bad is None:
                del i[key]
            else:
                i[key] = bad
            cases.append((status_body(instances=[dict(good_i), i]), "instances[1].%s" % key))
        for body, field in cases:
            r = self.put(MIG_NODE, body)
            self.assertError(r, 400, "invalid_argument", field, "%.300r" % body)
        # a MIG profile on a GPU without MIG; "whole" is fine there
        self.assertError(self.put(WHOLE_NODE, status_body(instances=[dict(good_i, gpu=1)], gpus=[])),
                         400, "invalid_argument", "instances[0].profile")
        self.assertStatus(self.put(WHOLE_NODE, status_body(
            instances=[dict(good_i, gpu=1, profile="whole")], gpus=[])), 204)
        for raw in ("", "[]", "{", "null"):
            self.assertError(self.admin.request("PUT", "/v1/nodes/%s/status" % MIG_NODE, raw=raw),
                             400, "invalid_argument")
        self.assertError(self.admin.request("PUT", "/v1/nodes/%s/status?x=1" % MIG_NODE, status_body()),
                         400, "invalid_argument", "x")
        self.assertIsNone(self.admin.get("/v1/nodes/" + MIG_NODE).body["agent"], "nothing refused is kept")


class TestLease(AgentCase):
    daemon_args = ("--agent-lease-s", "1", "--agent-grace-s", "2", "--agents-required")

    def node(self, name):
        return self.admin.get("/v1/nodes/" + name).body

    def events(self, action):
        evs = [i["event"] for i in self.admin.list_all("/v1/audit/events", limit=1000)]
        return [e for e in evs if e["action"] == action]

    def test_silent_node_becomes_unreachable_then_evicted_and_a_report_brings_it_back(self):
        a = self.alloc({"gpus": {"count": 1, "profile": "3g.40gb"}, "pool": "mig"})
        self.assertEqual(a["state"], "active")
        self.wait_until("ag-n01 is unreachable", lambda: self.node(MIG_NODE)["state"] == "unreachable")
        # no new work goes there: it waits instead
        b = self.alloc({"gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "mig"})
        self.assertEqual(b["state"], "pending", "placed on an unreachable node: %r" % b)
        # the stored cordon state is unchanged: after a restart nothing of it is left
        # (checked below through the audit trail: no node.cordon event)
        self.assertEqual(len(self.events("node.unreachable")), 2, "both silent nodes, once each")
        # after the grace its work is evicted and requeued (on_preempt requeue)
        got = self.wait_until("a is evicted", lambda: (lambda x: x if x["state"] == "pending" else None)(
            self.admin.get("/v1/allocations/" + a["id"]).body))
        self.assertEqual(got["nodes"], [])
        self.assertEqual(self.desired(MIG_NODE)["gpus"][0]["instances"], [])
        lost = self.events("node.agent_lost")
        self.assertIn(MIG_NODE, [e["object"]["id"] for e in lost])
        faults = [e for e in self.events("allocation.fault") if e["object"]["id"] == a["id"]]
        self.assertEqual(len(faults), 1)
        self.assertIn("node %s unreachable" % MIG_NODE, json.dumps(faults[0]))
        # the agent reports again: reachable, audited, and the waiting work is placed
        self.assertStatus(self.admin.request("PUT", "/v1/nodes/%s/status" % MIG_NODE, status_body()), 204)
        node = self.node(MIG_NODE)
        self.assertEqual(node["state"], "schedulable")
        self.assertTrue(node["agent"]["connected"])
        self.assertEqual([e["object"]["id"] for e in self.events("node.reachable")], [MIG_NODE])
        self.assertEqual(self.admin.get("/v1/allocations/" + a["id"]).body["state"], "active")
        self.assertEqual(self.admin.get("/v1/allocations/" + b["id"]).body["state"], "active")
        self.assertEqual(self.events("node.cordon"), [])
        # the other node's agent never reported: still unreachable
        self.assertEqual(self.node(WHOLE_NODE)["state"], "unreachable")
        self.assertIsNone(self.node(WHOLE_NODE)["agent"])

    def test_the_long_poll_of_an_agent_that_reported_is_its_heartbeat(self):
        """?heartbeat=1 renews the lease of a node whose agent has reported
        (one request per period, not two), brings an unreachable one back
        with the status it last sent, and renews nothing before a report."""
        q = "/v1/nodes/%s/desired?heartbeat=1" % MIG_NODE
        self.assertStatus(self.admin.get(q), 200)
        self.wait_until("ag-n01 is unreachable", lambda: self.node(MIG_NODE)["state"] == "unreachable")
        self.assertStatus(self.admin.get(q), 200)  # never reported: no lease to renew
        self.assertEqual(self.node(MIG_NODE)["state"], "unreachable")
        self.assertStatus(self.admin.request("PUT", "/v1/nodes/%s/status" % MIG_NODE, status_body()), 204)
        self.assertEqual(self.node(MIG_NODE)["state"], "schedulable")
        # heartbeats alone, past several leases (1 s): still reachable
        last, gaps = time.monotonic(), []
        for _ in range(12):
            self.assertStatus(self.admin.get(q), 200)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()
            time.sleep(0.25)
        self.assertEqual(self.node(MIG_NODE)["state"], "schedulable")
        if max(gaps) < 0.9:  # a machine stalled past the lease proves nothing here
            self.assertEqual(len([e for e in self.events("node.unreachable")
                                  if e["object"]["id"] == MIG_NODE]), 1)
        # silent again: unreachable; one heartbeat brings it back (audited)
        self.wait_until("ag-n01 is unreachable again", lambda: self.node(MIG_NODE)["state"] == "unreachable")
        self.assertStatus(self.admin.get(q), 200)
        self.assertEqual(self.node(MIG_NODE)["state"], "schedulable")
        self.assertEqual([e["object"]["id"] for e in self.events("node.reachable")], [MIG_NODE, MIG_NODE])
        # a reader's poll renews nothing and may not ask to
        auditor = self.d.client(issue_token(self, self.admin, "auditor")[1])
        self.assertError(auditor.get(q), 403, "forbidden", "heartbeat")
        self.assertStatus(auditor.get("/v1/nodes/%s/desired" % MIG_NODE), 200)
        self.wait_until("ag-n01 unreachable while only read", lambda: self.node(MIG_NODE)["state"] == "unreachable")

    def test_a_cordon_under_an_unreachable_node_is_kept(self):
        self.assertStatus(self.admin.post("/v1/nodes/%s/cordon" % MIG_NODE), 200)
        self.wait_until("unreachable", lambda: self.node(MIG_NODE)["state"] == "unreachable")
        self.assertStatus(self.admin.request("PUT", "/v1/nodes/%s/status" % MIG_NODE, status_body()), 204)
        self.assertEqual(self.node(MIG_NODE)["state"], "cordoned")


class TestLeaseNotRequired(AgentCase):
    daemon_args = ("--agent-lease-s", "1", "--agent-grace-s", "1")

    def test_nodes_that_never_had_an_agent_are_not_held_to_the_lease(self):
        self.assertStatus(self.admin.request("PUT", "/v1/nodes/%s/status" % MIG_NODE, status_body()), 204)
        deadline = time.time() + T(20)
        while time.time() < deadline:
            if self.admin.get("/v1/nodes/" + MIG_NODE).body["state"] == "unreachable":
                break
            time.sleep(0.1)
        self.assertEqual(self.admin.get("/v1/nodes/" + MIG_NODE).body["state"], "unreachable")
        self.assertFalse(self.admin.get("/v1/nodes/" + MIG_NODE).body["agent"]["connected"])
        self.assertEqual(self.admin.get("/v1/nodes/" + WHOLE_NODE).body["state"], "schedulable")
        a = self.alloc({"gpus": {"count": 1, "whole": True}, "pool": "whole"})
        self.assertEqual(a["state"], "active")


class TestProvisioningGate(AgentCase):
    """Without --no-agents an allocation goes active only once every member's
    agent reported all its instances (or whole GPUs) present and ready, in
    one audited transaction; until then it is provisioning and says which
    node it waits for; past --provisioning-timeout-s it fails with that."""

    agents = True
    daemon_args = ("--provisioning-timeout-s", "4")

    def put(self, node, body):
        # The gate also waits for each member's VF (test_agent_daemon.py's VF
        # tests); these tests are about the instances, so their VFs are ready.
        if "vfs" not in body:
            body = dict(body, vfs=[{"index": v["index"], "guid": v["guid"], "ready": True}
                                   for v in self.desired(node)["vfs"]])
        return self.admin.request("PUT", "/v1/nodes/%s/status" % node, body)

    def state(self, a):
        got = self.admin.get("/v1/allocations/" + a["id"]).body
        return got["state"], got["reason"]

    def events(self, action, alloc_id):
        evs = [i["event"] for i in self.admin.list_all("/v1/audit/events", limit=1000)]
        return [e for e in evs if e["action"] == action and e["object"]["id"] == alloc_id]

    def test_active_only_when_every_member_is_ready(self):
        a = self.alloc({"members": 2, "gpus": {"count": 1, "profile": "3g.40gb"}, "pool": "mig"})
        waiting = ("provisioning", "waiting for the agent of node %s" % MIG_NODE)
        self.assertEqual((a["state"], a["reason"]), waiting)
        starts = {p["member"]: (p["gpu"], p["start"]) for p in a["placement"]}
        term = self.desired(MIG_NODE)["term"]
        # one member ready, the other still being made: still waiting
        self.assertStatus(self.put(MIG_NODE, status_body(term, instances=[
            instance(a["id"], 0, *starts[0], uuid="MIG-aaaa"),
            instance(a["id"], 1, *starts[1], uuid="", ready=False, reason="creating")])), 204)
        self.assertEqual(self.state(a), waiting)
        # ready, but not where the member was placed: still waiting
        self.assertStatus(self.put(MIG_NODE, status_body(term, instances=[
            instance(a["id"], 0, *starts[0], uuid="MIG-aaaa"),
            instance(a["id"], 1, starts[1][0], starts[1][1] ^ 4, uuid="MIG-bbbb")])), 204)
        self.assertEqual(self.state(a), waiting)
        self.assertEqual(self.events("allocation.active", a["id"]), [])
        # both ready: active at once (the report itself activates it)
        self.assertStatus(self.put(MIG_NODE, status_body(term, instances=[
            instance(a["id"], 0, *starts[0], uuid="MIG-aaaa"),
            instance(a["id"], 1, *starts[1], uuid="MIG-bbbb")])), 204)
        self.assertEqual(self.state(a), ("active", ""))
        ev = self.events("allocation.active", a["id"])
        self.assertEqual(len(ev), 1, repr(ev))
        self.assertEqual(ev[0]["details"]["agents"], "ready", repr(ev))

    def test_whole_gpus_are_waited_for_too(self):
        a = self.alloc({"gpus": {"count": 2, "whole": True}, "pool": "whole"})
        self.assertEqual((a["state"], a["reason"]),
                         ("provisioning", "waiting for the agent of node %s" % WHOLE_NODE))
        self.assertStatus(self.put(WHOLE_NODE, status_body(instances=[
            instance(a["id"], 0, 0, 0, "whole", "GPU-aaaa")], gpus=[])), 204)
        self.assertEqual(self.state(a)[0], "provisioning")
        self.assertStatus(self.put(WHOLE_NODE, status_body(instances=[
            instance(a["id"], 0, 0, 0, "whole", "GPU-aaaa"),
            instance(a["id"], 0, 1, 0, "whole", "GPU-bbbb")], gpus=[])), 204)
        self.assertEqual(self.state(a), ("active", ""))

    def test_still_waiting_after_a_restart(self):
        """A restart does not carry a provisioning allocation to active: the
        controller knows no agent until one reports again."""
        a = self.alloc({"gpus": {"count": 1, "profile": "3g.40gb"}, "pool": "mig"})
        p = a["placement"][0]
        self.d.stop()
        self.d.start()
        self.admin = self.d.client()
        self.assertEqual(self.state(a), ("provisioning", "waiting for the agent of node %s" % MIG_NODE))
        self.assertStatus(self.put(MIG_NODE, status_body(self.desired(MIG_NODE)["term"], instances=[
            instance(a["id"], 0, p["gpu"], p["start"], uuid="MIG-aaaa")])), 204)
        self.assertEqual(self.state(a), ("active", ""))

    def test_provisioning_timeout_fails_it_with_the_reason(self):
        a = self.alloc({"gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "mig"})
        self.assertEqual(a["state"], "provisioning")
        deadline = time.time() + T(20)
        while time.time() < deadline and self.state(a)[0] == "provisioning":
            time.sleep(0.2)
        state, reason = self.state(a)
        self.assertEqual(state, "failed")
        self.assertIn("provisioning timed out after 4s", reason)
        self.assertIn("waiting for the agent of node %s" % MIG_NODE, reason)
        self.assertEqual(len(self.events("allocation.provision_timeout", a["id"])), 1)
        # what it held is given back
        self.assertEqual(self.desired(MIG_NODE)["gpus"], empty_gpus(True))


class TestNoAgents(AgentCase):
    def test_no_agents_is_active_at_once(self):
        a = self.alloc({"gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "mig"})
        self.assertEqual((a["state"], a["reason"]), ("active", ""))


class TestFlags(ApiTestCase):
    def test_bad_agent_flags_are_refused_by_name(self):
        for flag, value in (("--agent-lease-s", "0"), ("--agent-lease-s", "x"), ("--agent-lease-s", "-1"),
                            ("--agent-lease-s", "86401"), ("--agent-grace-s", "0"),
                            ("--agent-grace-s", "1.5"), ("--agent-max-waiters", "0"),
                            ("--agent-max-waiters", ""), ("--provisioning-timeout-s", "0"),
                            ("--provisioning-timeout-s", "x")):
            p = subprocess.run([harness.Binaries.isostackd, "--config", harness.data_path(AGENTS),
                                "--check-config", flag, value], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=T(30))
            self.assertNotEqual(p.returncode, 0, "%s %r accepted" % (flag, value))
            self.assertIn("%s: \"%s\" is not a whole number" % (flag, value), p.stderr)
        p = subprocess.run([harness.Binaries.isostackd, "--help"], stdout=subprocess.PIPE, text=True)
        for flag in ("--agent-lease-s", "--agent-grace-s", "--agents-required", "--agent-max-waiters",
                     "--no-agents", "--provisioning-timeout-s"):
            self.assertIn(flag, p.stdout)


if __name__ == "__main__":
    harness.main(__doc__)

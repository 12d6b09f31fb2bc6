#!/usr/bin/env python3
"""test_slingshot.py: the controller's side of Slingshot isolation (issue
17; docs/fabric.md "Slingshot", docs/agents.md "cxi") against a real
isostackd: every tenant of a slingshot cluster holds a 16-bit VNI of its own
from fabric.vni_range (a full range is a clear 409 naming it); members on a
slingshot node carry "cxi": {"vni"} in the desired document, and no overlay;
the live verifier's Slingshot mode is clean when each node's NIC keeps the
tenants apart and finds each violation planted in an agent's reported CXI
services (cross_tenant, shared_vni, no_guard, extra, missing, unreachable).

Run: python3 tests/api/test_slingshot.py PATH/TO/isostackd PATH/TO/isoctl
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import create_alloc, create_tenant  # noqa: E402

# tests/api/data/slingshot.yaml: ss-n01, ss-n02 (2 x h100-80gb, MIG), vni_range [1024, 1025].
SS = "slingshot.yaml"
N1, N2 = "ss-n01", "ss-n02"


def status(term, cxi=None):
    body = {"term_seen": term, "version": "0.1.0",
            "gpus": [{"index": 0, "model": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0a",
                      "mig_mode": "enabled"}],
            "instances": []}
    if cxi is not None:
        body["cxi"] = {"device": "cxi0", "services": cxi}
    return body


def svc(svc_id, vnis, uid, gid=None, enabled=True, members=True, restrict_vnis=True):
    m = [{"type": "uid", "id": uid}, {"type": "gid", "id": gid if gid is not None else uid}]
    return {"svc_id": svc_id, "enabled": enabled, "system": False,
            "restricted_members": members, "restricted_vnis": restrict_vnis,
            "vnis": list(vnis), "members": m}


DEFAULT = {"svc_id": 1, "enabled": False, "system": False, "restricted_members": False,
           "restricted_vnis": True, "vnis": [1, 10], "members": []}


class SlingshotCase(harness.FreshDaemonCase):
    config = SS

    def setUp(self):
        super().setUp()
        self.t1 = create_tenant(self, self.admin)
        self.t2 = create_tenant(self, self.admin)
        self.v1, self.v2 = self.t1["vni"], self.t2["vni"]
        a = create_alloc(self, self.admin, {"tenant": self.t1["name"], "members": 2, "spread": "node",
                                            "gpus": {"count": 1, "profile": "3g.40gb"}})
        self.assertEqual([m["node"] for m in a["nodes"]], [N1, N2])
        b = create_alloc(self, self.admin, {"tenant": self.t2["name"], "gpus": {"count": 1, "profile": "1g.10gb"}})
        self.assertEqual(b["nodes"][0]["node"], N1)
        self.a, self.b = a["id"], b["id"]
        self.term = self.desired(N1)["term"]

    def clean(self):
        """The services a correct agent reads back: t1 on both nodes, t2 on n01."""
        n1 = [dict(DEFAULT), svc(2, [self.v1], 5001), svc(3, [self.v2], 5002)]
        n2 = [dict(DEFAULT), svc(2, [self.v1], 5001)]
        return n1, n2

    def report(self, n1, n2):
        for node, cx in ((N1, n1), (N2, n2)):
            self.assertStatus(self.admin.request("PUT", "/v1/nodes/%s/status" % node,
                                                 status(self.term, cx)), 204)
        r = self.admin.get("/v1/fabric/verify")
        self.assertStatus(r, 200, "verify")
        return r.body

    def kinds(self, rep):
        return sorted({v["kind"] for v in rep["violations"]})


class TestVniPool(SlingshotCase):
    def test_each_tenant_holds_its_own_vni_and_a_full_range_is_refused(self):
        self.assertEqual(sorted([self.v1, self.v2]), [1024, 1025])
        r = self.admin.post("/v1/tenants", {"name": "t-third"})
        err = self.assertError(r, 409, "insufficient_capacity", "fabric.vni_range")
        self.assertIn("vni_range", err["message"])

    def test_members_carry_their_tenants_vni_as_cxi(self):
        doc = self.desired(N1)
        by = {(m["allocation"], m["member"]): m for m in doc["members"]}
        self.assertEqual(by[(self.a, 0)]["cxi"], {"vni": self.v1})
        self.assertEqual(by[(self.b, 0)]["cxi"], {"vni": self.v2})
        self.assertIsNone(by[(self.a, 0)]["overlay"])
        self.assertEqual([m["cxi"] for m in self.desired(N2)["members"]], [{"vni": self.v1}])

    def test_a_bad_cxi_report_is_refused_naming_the_field(self):
        bad = status(self.term, [svc(2, [0], 5001)])
        r = self.admin.request("PUT", "/v1/nodes/%s/status" % N1, bad)
        self.assertError(r, 400, "invalid_argument", "cxi.services[0].vnis[0]")


class TestVerifySlingshot(SlingshotCase):
    def test_a_clean_fabric_is_clean(self):
        rep = self.report(*self.clean())
        self.assertTrue(rep["ok"], repr(rep))
        self.assertEqual(rep["violations"], [])
        self.assertEqual((rep["ports_checked"], rep["partitions_checked"]), (2, 2))

    def test_a_service_with_two_tenants_vnis_is_cross_tenant(self):
        n1, n2 = self.clean()
        n1[2]["vnis"] = [self.v2, self.v1]
        rep = self.report(n1, n2)
        self.assertIn("cross_tenant", self.kinds(rep), repr(rep))
        (v,) = [v for v in rep["violations"] if v["kind"] == "cross_tenant"]
        self.assertEqual(v["nodes"], [N1])

    def test_one_identity_in_two_tenants_services_is_shared(self):
        n1, n2 = self.clean()
        n1[2] = svc(3, [self.v2], 5001)  # t2's service admits t1's uid
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["shared_vni"], repr(rep))
        self.assertIn("uid 5001", rep["violations"][0]["message"])

    def test_an_open_default_service_or_an_unrestricted_one_is_no_guard(self):
        n1, n2 = self.clean()
        n1[0]["enabled"] = True
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["no_guard"], repr(rep))
        self.assertIn("default service", rep["violations"][0]["message"])
        n1, n2 = self.clean()
        n2[1]["restricted_members"] = False
        self.assertEqual(self.kinds(self.report(n1, n2)), ["no_guard"])

    def test_a_service_nobody_intends_is_extra(self):
        n1, n2 = self.clean()
        n2.append(svc(3, [self.v2], 5002))  # t2 has no member on ss-n02
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["extra"], repr(rep))
        n1, n2 = self.clean()
        n2.append(svc(3, [4000], 5009))  # a VNI no tenant holds
        self.assertEqual(self.kinds(self.report(n1, n2)), ["extra"])

    def test_an_intended_service_missing_is_missing(self):
        n1, n2 = self.clean()
        del n1[2]  # t2's member on ss-n01 has no service
        rep = self.report(n1, n2)
        self.assertEqual(self.kinds(rep), ["missing"], repr(rep))
        self.assertEqual(rep["violations"][0]["tenants"][0], self.t2["name"])

    def test_a_node_whose_agent_never_reported_is_unreachable(self):
        n1, _ = self.clean()
        rep = self.report(n1, None)
        self.assertEqual(self.kinds(rep), ["unreachable"], repr(rep))


if __name__ == "__main__":
    harness.main(__doc__)

#!/usr/bin/env python3
"""test_neutron.py: isostackd as the fabric service behind OpenStack
Neutron's mlnx_sdn_assist ML2 driver (issue 17; docs/openstack.md), on the
sim fabric. Neutron cannot run here, so a small client plays the driver as
networking-mlnx's client.py and journal.py behave: it logs in with a form
before every request and sends the session's cookie, takes the reply's JSON
string as the job id, polls GET <url>/<job> until Status is Completed, and
counts 501 and a DELETE's 404 as done. A network with a segmentation id
becomes a P_Key of the mapped tenant, a bound port the membership of its
GUID in that partition (read back in GET /v1/fabric/intent), both survive a
restart, duplicate PUTs change nothing, and a hostile project can take
neither another tenant's key nor another port's (or the inventory's) GUID.

Run: python3 tests/api/test_neutron.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import sys
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import create_tenant, http_request, issue_token  # noqa: E402

DOMAIN = "cloudx"
USER = "neutron-cloudx"


def net_dict(project, seg, net_id=None, net_type="vlan"):
    """A Neutron network dict as the driver sends it (the keys it ignores too)."""
    return {
        "id": net_id or str(uuid.uuid4()),
        "name": "net",
        "project_id": project,
        "tenant_id": project,
        "admin_state_up": True,
        "mtu": 2044,
        "status": "ACTIVE",
        "subnets": [],
        "shared": False,
        "provider:network_type": net_type,
        "provider:physical_network": "ibphys",
        "provider:segmentation_id": seg,
        "router:external": False,
        "network_qos_policy": None,
        "revision_number": 1,
    }


def port_dict(project, net_id, host, mac="fa:16:3e:12:34:56", port_id=None, **extra):
    d = {
        "id": port_id or str(uuid.uuid4()),
        "project_id": project,
        "tenant_id": project,
        "network_id": net_id,
        "mac_address": mac,
        "binding:host_id": host,
        "binding:vnic_type": "direct",
        "binding:profile": {"pci_slot": "0000:03:00.2", "physical_network": "ibphys"},
        "binding:vif_type": "ib_hostdev",
        "device_owner": "compute:nova",
        "fixed_ips": [],
        "extra_dhcp_opts": [],
    }
    d.update(extra)
    return d


class Driver:
    """mlnx_sdn_assist's SdnRestClient and journal, as far as the wire goes."""

    def __init__(self, tc, username, password, domain=DOMAIN):
        self.tc = tc
        self.username = username
        self.password = password
        self.domain = domain

    def login(self):
        form = urllib.parse.urlencode({"username": self.username, "password": self.password})
        return http_request(self.tc.d.port, "POST", "/neutron/login", raw=form,
                            headers={"Content-Type": "application/x-www-form-urlencoded"})

    def cookie(self):
        r = self.login()
        self.tc.assertStatus(r, 200)
        c = r.header("Set-Cookie")
        self.tc.assertTrue(c.startswith("isostack_neutron="), c)
        self.tc.assertIn("HttpOnly", c)
        self.tc.assertIn("Path=/neutron", c)
        return c.split(";")[0]

    def send(self, method, path, body=None):
        """A fresh login, then the request in that session (client.py)."""
        hdrs = {"Cookie": self.cookie()}
        raw = json.dumps(body, indent=2) if body is not None else None
        return http_request(self.tc.d.port, method, "/neutron/" + path, raw=raw, headers=hdrs)

    def obj(self, method, kind, body, uuid_in_path=True):
        path = "%s/%s" % (self.domain, kind)
        if method != "POST" and uuid_in_path:
            path += "/" + body["id"]
        return self.send(method, path, body)

    def job_of(self, r):
        self.tc.assertStatus(r, 202)
        self.tc.assertIsInstance(r.body, str, "the job id is a JSON string: %r" % r)
        self.tc.assertRegex(r.body, r"^job-[0-9a-f]{16}$")
        return r.body.strip("/")

    def wait(self, job):
        def done():
            r = self.send("GET", job)
            self.tc.assertStatus(r, 200)
            self.tc.assertIn(r.body["Status"], ("Pending", "Running", "Completed"))
            return r.body["Status"] == "Completed"
        self.tc.wait_until("job %s completed" % job, done)

    def sync(self, method, kind, body, uuid_in_path=True):
        """One journal row to completion; returns the reply."""
        r = self.obj(method, kind, body, uuid_in_path)
        self.wait(self.job_of(r))
        return r


class Case(harness.FreshDaemonCase):
    config = "neutron.yaml"

    def setUp(self):
        super().setUp()
        self.tenant = create_tenant(self, self.admin)["name"]
        self.other = create_tenant(self, self.admin)["name"]
        self.project = uuid.uuid4().hex
        self.hostile = uuid.uuid4().hex
        self.map(self.project, self.tenant)
        self.map(self.hostile, self.other)
        _, self.secret = issue_token(self, self.admin, "neutron", user=USER)
        self.drv = Driver(self, USER, self.secret)

    def map(self, project, tenant):
        r = self.admin.request("PUT", "/v1/neutron/projects/" + project, {"tenant": tenant})
        self.assertStatus(r, 200)
        self.assertEqual(r.body["tenant"], tenant)

    def events(self):
        r = self.admin.get("/v1/audit/events?limit=1000")
        self.assertStatus(r, 200)
        return [item["event"] for item in r.body["items"]]

    def intent_parts(self):
        r = self.admin.get("/v1/fabric/intent")
        self.assertStatus(r, 200)
        return r.body["partitions"]

    def part_of(self, net_id):
        for p in self.intent_parts():
            if p.get("allocation") == "n-" + net_id:
                return p
        return None

    def members(self, net_id):
        p = self.part_of(net_id)
        return sorted(m["guid"] for m in p["members"]) if p else []


class TestLifecycle(Case):
    def test_create_bind_unbind_delete(self):
        net = net_dict(self.project, 0x123)
        self.drv.sync("POST", "Network", net)
        # no port yet: the key is held, no partition in the intent
        r = self.drv.send("GET", DOMAIN + "/Network")
        self.assertStatus(r, 200)
        self.assertEqual([(n["id"], n["pkey"], n["tenant"]) for n in r.body["items"]],
                         [(net["id"], "0x0123", self.tenant)])
        port = port_dict(self.project, net["id"], "cmp-01")
        self.drv.sync("POST", "Port", port)
        p = self.part_of(net["id"])
        self.assertEqual(p["pkey"], "0x0123")
        self.assertEqual(p["tenant"], self.tenant)
        self.assertEqual([(m["guid"], m["membership"]) for m in p["members"]],
                         [("0xfa163e0000123456", "full")])
        r = self.drv.send("GET", DOMAIN + "/Port")
        self.assertEqual([(x["id"], x["guid"], x["binding:host_id"]) for x in r.body["items"]],
                         [(port["id"], "0xfa163e0000123456", "cmp-01")])
        # a second port, its GUID from an InfiniBand client-id
        cid = "ff:00:00:00:00:00:02:00:00:02:c9:00:00:11:22:33:44:55:66:77"
        port2 = port_dict(self.project, net["id"], "cmp-02", mac="fa:16:3e:00:00:02",
                          extra_dhcp_opts=[{"opt_name": "client-id", "opt_value": cid,
                                            "ip_version": 4}])
        self.drv.sync("POST", "Port", port2)
        self.assertEqual(self.members(net["id"]), ["0x0011223344556677", "0xfa163e0000123456"])
        # unbind: the host cleared (update_port_precommit sends DELETE with
        # the original dict), then a PUT without host for the other
        self.drv.sync("DELETE", "Port", port)
        self.assertEqual(self.members(net["id"]), ["0x0011223344556677"])
        unbound = dict(port2, **{"binding:host_id": ""})
        self.drv.sync("PUT", "Port", unbound)
        self.assertIsNone(self.part_of(net["id"]))
        # the same unbind again: nothing to do, which the driver counts done
        r = self.drv.obj("PUT", "Port", unbound)
        self.assertError(r, 501, "not_implemented", "binding:host_id")
        self.drv.sync("DELETE", "Network", net)
        r = self.drv.send("GET", DOMAIN + "/Network")
        self.assertEqual(r.body["items"], [])
        # the key is in quarantine, then free for another network
        r = self.drv.obj("POST", "Network", net_dict(self.project, 0x123))
        self.assertError(r, 409, "conflict", "provider:segmentation_id")

    def test_audited(self):
        net = net_dict(self.project, 0x130)
        self.drv.sync("POST", "Network", net)
        port = port_dict(self.project, net["id"], "cmp-01")
        self.drv.sync("POST", "Port", port)
        self.drv.sync("DELETE", "Network", net)
        events = self.events()
        acts = [(e["action"], e["object"]["id"], e["object"]["kind"], e["outcome"])
                for e in events if e["action"].startswith("neutron.")]
        self.assertEqual(acts, [
            ("neutron.project.map", self.project, "neutron_project", "success"),
            ("neutron.project.map", self.hostile, "neutron_project", "success"),
            ("neutron.network.put", net["id"], "neutron_network", "success"),
            ("neutron.port.put", port["id"], "neutron_port", "success"),
            ("neutron.network.delete", net["id"], "neutron_network", "success")])
        last = [e for e in events if e["action"] == "neutron.network.delete"][0]
        self.assertEqual(last["actor"]["role"], "neutron")
        self.assertEqual(last["object"]["tenant"], self.tenant)

    def test_delete_unknown_is_404(self):
        for kind in ("Network", "Port"):
            r = self.drv.obj("DELETE", kind, {"id": str(uuid.uuid4())})
            self.assertError(r, 404, "not_found")

    def test_duplicate_puts_change_nothing(self):
        net = net_dict(self.project, 0x140)
        port = port_dict(self.project, net["id"], "cmp-01")
        self.drv.sync("POST", "Network", net)
        self.drv.sync("POST", "Port", port)
        gen = self.admin.get("/v1/fabric").body["generation"]
        n_events = len(self.events())
        for _ in range(3):
            self.drv.sync("PUT", "Network", net)
            self.drv.sync("POST", "Network", net)  # a journal replay of the create
            self.drv.sync("PUT", "Port", port)
            self.drv.sync("POST", "Port", port)
        self.assertEqual(self.admin.get("/v1/fabric").body["generation"], gen)
        events = self.events()
        self.assertEqual([e["action"] for e in events[n_events:]
                          if e["action"].startswith("neutron.")], [])
        self.assertEqual(self.members(net["id"]), ["0xfa163e0000123456"])
        # a PUT that moves the network to another key moves its members
        self.drv.sync("PUT", "Network", dict(net, **{"provider:segmentation_id": 0x141}))
        self.assertEqual(self.part_of(net["id"])["pkey"], "0x0141")
        self.assertEqual(self.members(net["id"]), ["0xfa163e0000123456"])

    def test_nothing_to_do_is_501(self):
        r = self.drv.obj("POST", "Network", net_dict(self.project, None, net_type="flat"))
        self.assertError(r, 501, "not_implemented", "provider:segmentation_id")
        r = self.drv.obj("POST", "Network", net_dict(self.project, 0x150, net_type="vxlan"))
        self.assertError(r, 501, "not_implemented", "provider:network_type")

    def test_restart_replays(self):
        net = net_dict(self.project, 0x160)
        port = port_dict(self.project, net["id"], "cmp-02", mac="fa:16:3e:ab:cd:ef")
        self.drv.sync("POST", "Network", net)
        r = self.drv.obj("POST", "Port", port)
        job = self.drv.job_of(r)
        before = self.part_of(net["id"])
        self.d.restart()
        self.admin = self.d.client()
        # the partition and its member are back
        self.assertEqual(self.part_of(net["id"]), before)
        # a job from before the restart is forgotten: the driver's row goes
        # back to pending and the request is sent again, which changes nothing
        r = self.drv.send("GET", job)
        self.assertError(r, 404, "not_found")
        self.drv.sync("POST", "Port", port)
        self.drv.sync("POST", "Network", net)
        self.assertEqual(self.part_of(net["id"]), before)
        # and the held key is still refused to anyone else
        r = Driver(self, USER, self.secret).obj("POST", "Network",
                                                 net_dict(self.hostile, 0x160))
        self.assertError(r, 409, "conflict", "provider:segmentation_id")
        self.drv.sync("DELETE", "Port", port)
        self.drv.sync("DELETE", "Network", net)
        self.assertIsNone(self.part_of(net["id"]))


class TestVerify(Case):
    """GET /v1/fabric/verify with Neutron's ports in the intent: a port's
    GUID is the VF's that Neutron's agent set, on the fabric like any port."""

    def verify(self):
        r = self.admin.get("/v1/fabric/verify")
        self.assertStatus(r, 200)
        return r.body

    def test_verify_with_ports(self):
        net = net_dict(self.project, 0x1f0)
        port = port_dict(self.project, net["id"], "cmp-01")
        guid = "0xfa163e0000123456"
        self.drv.sync("POST", "Network", net)
        self.drv.sync("POST", "Port", port)
        rep = self.verify()
        self.assertTrue(rep["ok"], rep)
        p = self.part_of(net["id"])
        self.assertEqual((p["pkey"], p["tenant"]), ("0x01f0", self.tenant))
        self.assertIn(guid, [m["guid"] for m in p["members"]])
        # a second project's network, of another tenant, with a port: still
        # ok, and no path between the two tenants
        mine = net_dict(self.hostile, 0x1f1)
        self.drv.sync("POST", "Network", mine)
        self.drv.sync("POST", "Port", port_dict(self.hostile, mine["id"], "cmp-01",
                                                mac="fa:16:3e:00:00:77"))
        rep = self.verify()
        self.assertTrue(rep["ok"], rep)
        self.assertNotIn("cross_tenant", [v["kind"] for v in rep["violations"]])
        # unbind and delete: ok, the GUID gone from the intent
        self.drv.sync("DELETE", "Port", port)
        self.drv.sync("DELETE", "Network", net)
        rep = self.verify()
        self.assertTrue(rep["ok"], rep)
        guids = [m["guid"] for p in self.intent_parts() for m in p["members"]]
        self.assertNotIn(guid, guids)


class TestHostile(Case):
    def test_another_tenants_segmentation_id(self):
        net = net_dict(self.project, 0x170)
        self.drv.sync("POST", "Network", net)
        r = self.drv.obj("POST", "Network", net_dict(self.hostile, 0x170))
        self.assertError(r, 409, "conflict", "provider:segmentation_id")
        self.assertNotIn(self.tenant, r.text)
        # the storage service's key lies outside the tenants' range
        r = self.drv.obj("POST", "Network", net_dict(self.hostile, 0x10))
        self.assertError(r, 400, "invalid_argument", "provider:segmentation_id")
        self.assertNotIn("storage", r.text)
        # a tenant's own P_Key is not free either
        own = int(self.admin.get("/v1/tenants/" + self.tenant).body["pkey"], 16)
        r = self.drv.obj("POST", "Network", net_dict(self.hostile, own))
        self.assertError(r, 409, "conflict", "provider:segmentation_id")
        self.assertNotIn(self.tenant, r.text)

    def test_another_ports_guid_or_the_inventorys(self):
        net = net_dict(self.project, 0x180)
        mine = net_dict(self.hostile, 0x181)
        self.drv.sync("POST", "Network", net)
        self.drv.sync("POST", "Network", mine)
        self.drv.sync("POST", "Port", port_dict(self.project, net["id"], "cmp-01"))
        cases = [
            ({}, "mac_address"),  # the same MAC, so the same GUID
            ({"binding:profile": {"guid": "0x0002c90300de0101"}}, "binding:profile.guid"),
            ({"binding:profile": {"guid": "0x0002c90300dd0002"}}, "binding:profile.guid"),
            ({"binding:profile": {"guid": "0x0002c90300ff0001"}}, "binding:profile.guid"),
        ]
        for extra, field in cases:
            r = self.drv.obj("POST", "Port", port_dict(self.hostile, mine["id"], "cmp-02", **extra))
            self.assertError(r, 409, "conflict", field)
            self.assertNotIn(self.tenant, r.text)
        self.assertEqual(self.members(net["id"]), ["0xfa163e0000123456"])
        self.assertIsNone(self.part_of(mine["id"]))

    def test_another_tenants_network_and_uuids(self):
        net = net_dict(self.project, 0x190)
        port = port_dict(self.project, net["id"], "cmp-01")
        self.drv.sync("POST", "Network", net)
        self.drv.sync("POST", "Port", port)
        # a port of the hostile project on the other tenant's network: as missing
        r = self.drv.obj("POST", "Port", port_dict(self.hostile, net["id"], "cmp-02",
                                                    mac="fa:16:3e:00:00:09"))
        self.assertError(r, 404, "not_found", "network_id")
        missing = self.drv.obj("POST", "Port", port_dict(self.hostile, str(uuid.uuid4()),
                                                          "cmp-02", mac="fa:16:3e:00:00:09"))
        self.assertEqual(missing.body["error"]["message"], r.body["error"]["message"])
        # the other tenant's network and port UUIDs: in use, never taken over
        r = self.drv.obj("PUT", "Network", net_dict(self.hostile, 0x191, net_id=net["id"]))
        self.assertError(r, 409, "conflict", "id")
        r = self.drv.obj("PUT", "Port", dict(port, project_id=self.hostile, tenant_id=self.hostile))
        self.assertError(r, 409, "conflict", "id")
        # another domain does not see them: its DELETE is a 404
        other = Driver(self, USER, self.secret, domain="cloudy")
        r = other.obj("DELETE", "Network", net)
        self.assertError(r, 404, "not_found")
        self.assertEqual(self.members(net["id"]), ["0xfa163e0000123456"])

    def test_unmapped_project(self):
        r = self.drv.obj("POST", "Network", net_dict(uuid.uuid4().hex, 0x1a0))
        self.assertError(r, 400, "invalid_argument", "project_id")
        self.assertIn("not mapped", r.body["error"]["message"])

    def test_mapping_held_while_objects(self):
        net = net_dict(self.project, 0x1b0)
        self.drv.sync("POST", "Network", net)
        r = self.admin.delete("/v1/neutron/projects/" + self.project)
        self.assertError(r, 409, "conflict")
        r = self.admin.request("PUT", "/v1/neutron/projects/" + self.project,
                               {"tenant": self.other})
        self.assertError(r, 409, "conflict", "tenant")
        r = self.admin.delete("/v1/tenants/" + self.tenant)
        self.assertError(r, 409, "conflict")
        self.drv.sync("DELETE", "Network", net)
        r = self.admin.delete("/v1/neutron/projects/" + self.project)
        self.assertStatus(r, 204)
        r = self.admin.get("/v1/neutron/projects")
        self.assertEqual([p["project_id"] for p in r.body["items"]], [self.hostile])


class TestAuth(Case):
    def test_login(self):
        for user, pw in ((USER, self.secret + "x"), ("someone", self.secret),
                         (USER, harness.Daemon.__name__)):
            r = Driver(self, user, pw).login()
            self.assertError(r, 401, "unauthorized")
            self.assertIsNone(r.header("Set-Cookie"))
        # another role's token, with its user
        _, admin_tok = issue_token(self, self.admin, "cluster-admin", user="ops")
        r = Driver(self, "ops", admin_tok).login()
        self.assertError(r, 401, "unauthorized")
        # a token of role neutron needs a user
        r = self.admin.post("/v1/tokens", {"role": "neutron"})
        self.assertError(r, 400, "invalid_argument", "user")

    def test_bad_form(self):
        port = self.d.port
        cases = [
            ("username=a", "password"),
            ("password=b", "username"),
            ("username=a&username=b&password=c", "username"),
            ("username=a&password=b&extra=1", "extra"),
            ("username=a&password=%zz", "password"),
            ("garbage", None),
        ]
        for form, field in cases:
            r = http_request(port, "POST", "/neutron/login", raw=form,
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
            self.assertError(r, 400, "invalid_argument", field, form)
        r = http_request(port, "POST", "/neutron/login", raw="username=a&password=b")
        self.assertError(r, 400, "invalid_argument", "Content-Type")

    def test_neutron_token_reaches_no_v1_route(self):
        cookie = self.drv.cookie()
        for method, path in (("GET", "/v1/whoami"), ("GET", "/v1/tenants"),
                             ("GET", "/v1/fabric/intent"), ("GET", "/v1/neutron/projects"),
                             ("POST", "/v1/allocations"), ("GET", "/v1/version")):
            r = self.d.request(method, path, token=self.secret)
            self.assertError(r, 403, "forbidden")
            # the cookie is no credential for /v1 at all
            r = http_request(self.d.port, method, path, headers={"Cookie": cookie})
            self.assertError(r, 401, "unauthorized")
        r = self.d.request("PUT", "/v1/neutron/projects/" + self.hostile, {"tenant": self.tenant},
                           token=self.secret)
        self.assertError(r, 403, "forbidden")

    def test_other_roles_do_not_write_the_wire(self):
        _, tadm = issue_token(self, self.admin, "tenant-admin", tenant=self.tenant)
        net = net_dict(self.project, 0x1c0)
        for tok in (self.admin.token, tadm):
            r = http_request(self.d.port, "POST", "/neutron/%s/Network" % DOMAIN, body=net,
                             token=tok)
            self.assertError(r, 403, "forbidden")
        # the operators' list: cluster-admin yes, a tenant no
        r = self.admin.get("/neutron/%s/Network" % DOMAIN)
        self.assertStatus(r, 200)
        r = http_request(self.d.port, "GET", "/neutron/%s/Port" % DOMAIN, token=tadm)
        self.assertError(r, 403, "forbidden")
        # no credential at all
        r = http_request(self.d.port, "POST", "/neutron/%s/Network" % DOMAIN, body=net)
        self.assertError(r, 401, "unauthorized")


class TestBadBodies(Case):
    def test_network_fields(self):
        good = net_dict(self.project, 0x1d0)
        cases = [
            (dict(good, id="not-a-uuid"), "id"),
            (dict(good, id=None), "id"),
            ({k: v for k, v in good.items() if k not in ("project_id", "tenant_id")},
             "project_id"),
            (dict(good, tenant_id="other"), "project_id"),
            (dict(good, project_id=7), "project_id"),
            (dict(good, **{"provider:segmentation_id": "0x1d0"}), "provider:segmentation_id"),
            (dict(good, **{"provider:segmentation_id": 0x8000}), "provider:segmentation_id"),
            (dict(good, **{"provider:segmentation_id": 0x50}), "provider:segmentation_id"),
            (dict(good, **{"provider:network_type": 5}), "provider:network_type"),
        ]
        for body, field in cases:
            r = self.drv.obj("POST", "Network", body, uuid_in_path=False)
            self.assertError(r, 400, "invalid_argument", field, json.dumps(body))
        r = self.drv.send("PUT", "%s/Network/%s" % (DOMAIN, uuid.uuid4()), good)
        self.assertError(r, 400, "invalid_argument", "id")
        r = self.drv.send("POST", "job-x/Network", good)
        self.assertError(r, 400, "invalid_argument", "domain")
        r = self.drv.send("POST", "Bad_Domain/Network", good)
        self.assertError(r, 400, "invalid_argument", "domain")
        r = self.drv.send("POST", DOMAIN + "/Network", [good])
        self.assertError(r, 400, "invalid_argument")

    def test_port_fields(self):
        net = net_dict(self.project, 0x1e0)
        self.drv.sync("POST", "Network", net)
        good = port_dict(self.project, net["id"], "cmp-01")
        cases = [
            (dict(good, network_id="x"), "network_id"),
            ({k: v for k, v in good.items() if k != "network_id"}, "network_id"),
            (dict(good, **{"binding:host_id": 3}), "binding:host_id"),
            (dict(good, **{"binding:host_id": "nowhere"}), "binding:host_id"),
            (dict(good, mac_address="fa:16:3e:12:34"), "mac_address"),
            ({k: v for k, v in good.items() if k != "mac_address"}, "mac_address"),
            (dict(good, **{"binding:profile": "x"}), "binding:profile"),
            (dict(good, **{"binding:profile": {"guid": "0x12"}}), "binding:profile.guid"),
            (dict(good, **{"binding:profile": {"guid": 5}}), "binding:profile.guid"),
            (dict(good, extra_dhcp_opts={}), "extra_dhcp_opts"),
            (dict(good, extra_dhcp_opts=[7]), "extra_dhcp_opts[0]"),
            (dict(good, extra_dhcp_opts=[{"opt_value": "x"}]), "extra_dhcp_opts[0].opt_name"),
            (dict(good, extra_dhcp_opts=[{"opt_name": "mtu", "opt_value": "1"},
                                         {"opt_name": "client-id", "opt_value": "01:02"}]),
             "extra_dhcp_opts[1].opt_value"),
        ]
        for body, field in cases:
            r = self.drv.obj("POST", "Port", body, uuid_in_path=False)
            self.assertError(r, 400, "invalid_argument", field, json.dumps(body))
        self.assertIsNone(self.part_of(net["id"]))

    def test_mapping_fields(self):
        for pid, body, field in (("has space", {"tenant": self.tenant}, "project_id"),
                                 ("x" * 65, {"tenant": self.tenant}, "project_id"),
                                 ("p1", {}, "tenant"),
                                 ("p1", {"tenant": "nope"}, None),
                                 ("p1", {"tenant": self.tenant, "x": 1}, "x")):
            r = self.admin.request("PUT", "/v1/neutron/projects/" + urllib.parse.quote(pid), body)
            self.assertIn(r.status, (400, 404), repr(r))
            if field:
                self.assertEqual(r.body["error"]["field"], field, repr(r))


if __name__ == "__main__":
    harness.main(__doc__)

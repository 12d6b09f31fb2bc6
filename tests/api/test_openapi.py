#!/usr/bin/env python3
"""test_openapi.py: docs/openapi.yaml describes what the server really
answers. A walk over every route (tenants, tokens, nodes and GPUs, pools,
tenancy, allocations in several states, fabric, audit) validates each
answer's status and body against the spec's schema for that path, method
and status: a field the code sends that the spec does not list
(`additionalProperties: false`), a missing required field, a wrong type, a
null where the spec does not allow one, or an undocumented status fails,
naming the JSON path. The spec is read through redocly's JSON bundle
(tools/redocly, installed by `scripts/deps.sh test`); the validator below
covers the subset of OpenAPI 3.0 schemas the spec uses.

Run: python3 tests/api/test_openapi.py PATH/TO/isostackd PATH/TO/isoctl
"""

import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

REDOCLY = os.path.join(harness.SOURCE_ROOT, "tools", "redocly", "node_modules", ".bin", "redocly")


def load_spec():
    if not os.access(REDOCLY, os.X_OK):
        raise AssertionError("%s is missing: run 'scripts/deps.sh test' (make test does)" % REDOCLY)
    env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true", NO_COLOR="1")
    with tempfile.TemporaryDirectory(prefix="openapi-") as tmp:
        out = os.path.join(tmp, "openapi.json")
        p = subprocess.run([REDOCLY, "bundle", os.path.join(harness.SOURCE_ROOT, "docs", "openapi.yaml"),
                            "--ext", "json", "-o", out], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise AssertionError("redocly bundle failed:\n" + p.stdout)
        with open(out, encoding="utf-8") as f:
            return json.load(f)


class Validator:
    """The OpenAPI 3.0 schema subset of docs/openapi.yaml."""

    TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}

    def __init__(self, spec):
        self.spec = spec

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/"), ref
            node = self.spec
            for part in ref[2:].split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def errors(self, schema, v, at="$"):
        s = self.resolve(schema)
        out = []
        if v is None:
            return [] if s.get("nullable") or not s else ["%s: null, and the spec does not allow null" % at]
        for sub in s.get("allOf", []):
            out += self.errors(sub, v, at)
        if "oneOf" in s:
            ok = [sub for sub in s["oneOf"] if not self.errors(sub, v, at)]
            if len(ok) != 1:
                out.append("%s: matches %d of oneOf's schemas, not 1" % (at, len(ok)))
        t = s.get("type")
        if t == "integer":
            if not isinstance(v, int) or isinstance(v, bool):
                return out + ["%s: %r is not an integer" % (at, v)]
        elif t == "number":
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                return out + ["%s: %r is not a number" % (at, v)]
        elif t:
            if not isinstance(v, self.TYPES[t]):
                return out + ["%s: %r is not of type %s" % (at, v, t)]
        if "enum" in s and v not in s["enum"]:
            out.append("%s: %r is not one of %r" % (at, v, s["enum"]))
        if isinstance(v, str) and "pattern" in s and not re.search(s["pattern"], v):
            out.append("%s: %r does not match %s" % (at, v, s["pattern"]))
        if isinstance(v, dict):
            props = s.get("properties", {})
            for k in s.get("required", []):
                if k not in v:
                    out.append("%s: required field %r missing" % (at, k))
            extra = s.get("additionalProperties", True)
            for k, x in v.items():
                if k in props:
                    out += self.errors(props[k], x, "%s.%s" % (at, k))
                elif extra is False:
                    out.append("%s: field %r is not in the spec" % (at, k))
                elif isinstance(extra, dict):
                    out += self.errors(extra, x, "%s.%s" % (at, k))
        if isinstance(v, list) and "items" in s:
            for i, x in enumerate(v):
                out += self.errors(s["items"], x, "%s[%d]" % (at, i))
        return out


class TestOpenApiMatchesServer(harness.SharedDaemonCase):
    config = "small.yaml"

    @classmethod
    def setUpClass(cls):
        cls.spec = load_spec()
        cls.v = Validator(cls.spec)
        cls.seen = set()
        super().setUpClass()

    def operation(self, method, path):
        """The spec's operation for a concrete path: the template that matches."""
        path = path.split("?", 1)[0]
        for tmpl, item in self.spec["paths"].items():
            if re.fullmatch(re.sub(r"\\\{[^}/]+\\\}", "[^/]+", re.escape(tmpl)), path):
                if method.lower() in item:
                    return tmpl, item[method.lower()]
        self.fail("%s %s: no operation in docs/openapi.yaml" % (method, path))

    def check(self, r, method, path, status):
        """r's status is `status`, documented, and its body fits the schema."""
        self.assertEqual(r.status, status, "%s %s: %r" % (method, path, r))
        tmpl, op = self.operation(method, path)
        self.seen.add((method, tmpl))
        resp = op["responses"].get(str(status))
        self.assertIsNotNone(resp, "%s %s answered %d, which the spec does not list" % (method, tmpl, status))
        resp = self.v.resolve(resp)
        content = resp.get("content", {}).get("application/json")
        if content is None:
            self.assertIn(r.body, (None, b"", ""), "%s %s %d: a body the spec does not describe" % (method, tmpl, status))
            return r.body
        errs = self.v.errors(content["schema"], r.body)
        self.assertEqual(errs, [], "%s %s %d: the answer does not fit docs/openapi.yaml:\n  %s\nbody: %s"
                         % (method, tmpl, status, "\n  ".join(errs), json.dumps(r.body)[:2000]))
        return r.body

    def call(self, method, path, body=None, status=200, client=None):
        c = client or self.admin
        r = {"GET": lambda: c.get(path), "DELETE": lambda: c.delete(path),
             "POST": lambda: c.post(path, body), "PATCH": lambda: c.patch(path, body),
             "PUT": lambda: c.request("PUT", path, body)}[method]()
        return self.check(r, method, path, status)

    def test_every_route_answers_as_documented(self):
        call = self.call
        call("GET", "/v1/healthz")
        call("GET", "/v1/version")
        call("GET", "/v1/whoami")
        call("GET", "/v1/capacity")
        # tenancy: an organisation, tenants, projects and quotas
        call("POST", "/v1/orgs", {"name": "oa-org", "shares": 2}, 201)
        call("GET", "/v1/orgs")
        call("POST", "/v1/tenants", {"name": "oa", "description": "spec", "org": "oa-org"}, 201)
        call("POST", "/v1/tenants", {"name": "ob"}, 201)
        call("GET", "/v1/tenants")
        call("GET", "/v1/tenants/oa")
        call("PATCH", "/v1/tenants/ob", {"description": "other", "isolation": "exclusive-gpu",
                                         "limits": {"max_pending": 5, "max_live": 10}})
        call("POST", "/v1/tenants/oa/projects", {"name": "train", "shares": 1}, 201)
        call("GET", "/v1/tenants/oa/projects")
        call("PUT", "/v1/orgs/oa-org/quota", {"h100-80gb": {"guaranteed": 56}})
        call("GET", "/v1/orgs/oa-org/quota")
        call("PUT", "/v1/tenants/oa/quota", {"h100-80gb": {"guaranteed": 28, "borrow_limit": None}})
        call("GET", "/v1/tenants/oa/quota")
        call("PUT", "/v1/tenants/oa/projects/train/quota", {"h100-80gb": {"guaranteed": 14}})
        call("GET", "/v1/tenants/oa/projects/train/quota")
        # tokens
        tok = call("POST", "/v1/tokens", {"role": "tenant-admin", "tenant": "oa", "user": "alice"}, 201)
        call("GET", "/v1/tokens")
        call("GET", "/v1/tokens/" + tok["id"])
        alice = self.d.client(tok["token"])
        call("GET", "/v1/whoami", client=alice)
        call("GET", "/v1/nodes", status=403, client=alice)
        # allocations: active, whole, CPU-only, pending, resized, released
        a = call("POST", "/v1/allocations", {"tenant": "oa", "name": "t1", "members": 2, "project": "train",
                                             "gpus": {"count": 1, "profile": "3g.40gb"}, "cpus": 4,
                                             "memory_mib": 1024, "duration_s": 60}, 201)
        w = call("POST", "/v1/allocations", {"tenant": "ob", "members": 2, "gpus": {"count": 8, "whole": True}},
                 201)
        cpu = call("POST", "/v1/allocations", {"tenant": "ob", "cpus": 2, "pool": "cpu"}, 201)
        big = call("POST", "/v1/allocations", {"tenant": "ob", "members": 2, "gpus": {"count": 8, "whole": True},
                                               "on_preempt": "fail"}, 201)
        self.assertEqual(big["state"], "pending")
        # ob may hold 10 live allocations: the 11th is 429 limit_exceeded
        extra = [call("POST", "/v1/allocations", {"tenant": "ob", "cpus": 1}, 201) for _ in range(8)]
        r = self.admin.post("/v1/allocations", {"tenant": "ob", "cpus": 1})
        self.check(r, "POST", "/v1/allocations", 429)
        self.assertEqual(r.body["error"]["field"], "limits.max_live")
        for x in extra:
            call("DELETE", "/v1/allocations/" + x["id"])
        call("GET", "/v1/queue")
        call("GET", "/v1/usage")
        call("GET", "/v1/usage", client=alice)
        call("GET", "/v1/allocations")
        call("GET", "/v1/allocations?tenant=oa&state=active&limit=1")
        call("GET", "/v1/allocations/" + a["id"], client=alice)
        call("PATCH", "/v1/allocations/" + a["id"], {"members": 3}, client=alice)
        # infrastructure
        call("GET", "/v1/nodes")
        call("GET", "/v1/nodes/sm-n01")
        call("GET", "/v1/gpus?node=sm-n01")
        call("POST", "/v1/nodes/sm-n03/cordon")
        call("POST", "/v1/nodes/sm-n03/uncordon")
        call("POST", "/v1/nodes/sm-n03/drain")
        call("POST", "/v1/nodes/sm-n03/uncordon")
        call("POST", "/v1/pools/cpu/cordon")
        call("POST", "/v1/pools/cpu/drain")
        call("POST", "/v1/pools/cpu/uncordon")
        call("POST", "/v1/nodes/sm-n01/gpus/7/fault", {"xid": 79})
        call("GET", "/v1/gpus?node=sm-n01")
        call("DELETE", "/v1/nodes/sm-n01/gpus/7/fault", status=204)
        call("POST", "/v1/nodes/sm-n02/down")
        call("GET", "/v1/nodes/sm-n02")
        call("POST", "/v1/nodes/sm-n02/up")
        # node agents (docs/agents.md): the desired state, as its own agent reads it
        agent = call("POST", "/v1/tokens", {"role": "node-agent", "node": "sm-n01"}, 201)
        doc = call("GET", "/v1/nodes/sm-n01/desired", client=self.d.client(agent["token"]))
        call("GET", "/v1/nodes/sm-n01/desired?after=%d&wait_s=1" % doc["generation"])
        call("GET", "/v1/nodes/sm-n02/desired", status=404, client=self.d.client(agent["token"]))
        held = [i for g in doc["gpus"] for i in g["instances"]] + [
            dict(g["whole"], start=0, profile="whole") for g in doc["gpus"] if g["whole"]]
        call("PUT", "/v1/nodes/sm-n01/status", {
            "term_seen": doc["term"], "version": "spec",
            "gpus": [{"index": 0, "model": "H100", "uuid": "GPU-0", "mig_mode": "enabled"}],
            "instances": [{"gpu": g["index"], "start": i["start"], "profile": i["profile"],
                           "uuid": "MIG-%d-%d" % (g["index"], i["start"]), "allocation": i["allocation"],
                           "member": i["member"], "ready": True}
                          for g in doc["gpus"] for i in g["instances"]]},
             status=204, client=self.d.client(agent["token"]))
        call("PUT", "/v1/nodes/sm-n01/status", {"term_seen": doc["term"] + 1, "version": "spec",
                                               "gpus": [], "instances": []}, status=409)
        call("GET", "/v1/nodes/sm-n01")
        for i in held[:1]:
            call("GET", "/v1/allocations/" + i["allocation"])
        # fabric
        call("GET", "/v1/fabric")
        call("GET", "/v1/fabric/intent")
        call("GET", "/v1/fabric/health")
        call("GET", "/v1/fabric/verify")
        # the SM host's agent's routes: nobody else's (docs/fabric.md)
        call("GET", "/v1/fabric/sm/partitions", status=403)
        call("PUT", "/v1/fabric/sm/status", {"version": "spec", "term": 0, "generation": 0},
             status=403)
        # OpenStack Neutron (docs/openstack.md): the mapping, the driver's wire
        call("PUT", "/v1/neutron/projects/p0a", {"tenant": "oa"})
        call("GET", "/v1/neutron/projects")
        neu = call("POST", "/v1/tokens", {"role": "neutron", "user": "neutron-spec"}, 201)
        r = harness.http_request(self.d.port, "POST", "/neutron/login",
                                 raw="username=neutron-spec&password=" + neu["token"],
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.check(r, "POST", "/neutron/login", 200)
        drv = self.d.client(neu["token"])
        nid, pid = "11111111-2222-4333-8444-555555555555", "11111111-2222-4333-8444-666666666666"
        net = {"id": nid, "project_id": "p0a", "provider:network_type": "vlan",
               "provider:segmentation_id": 3000, "mtu": 2044}
        port = {"id": pid, "project_id": "p0a", "network_id": nid, "binding:host_id": "sm-n01",
                "mac_address": "fa:16:3e:00:00:01"}
        job = call("POST", "/neutron/cloudx/Network", net, 202, client=drv)
        call("GET", "/neutron/" + job, client=drv)
        call("PUT", "/neutron/cloudx/Network/" + nid, net, 202, client=drv)
        call("POST", "/neutron/cloudx/Network", dict(net, id=nid.replace("1", "7"),
                                                     **{"provider:segmentation_id": None}),
             501, client=drv)
        call("POST", "/neutron/cloudx/Port", port, 202, client=drv)
        call("PUT", "/neutron/cloudx/Port/" + pid, port, 202, client=drv)
        call("GET", "/neutron/cloudx/Network", client=drv)
        call("GET", "/neutron/cloudx/Port")
        call("DELETE", "/neutron/cloudx/Port/" + pid, status=202, client=drv)
        call("DELETE", "/neutron/cloudx/Network/" + nid, status=202, client=drv)
        call("DELETE", "/neutron/cloudx/Network/" + nid, status=404, client=drv)
        call("DELETE", "/v1/neutron/projects/p0a", status=204)
        # releases and deletes
        for x in (a, w, cpu, big):
            call("DELETE", "/v1/allocations/" + x["id"])
        call("GET", "/v1/allocations/" + a["id"])
        call("DELETE", "/v1/tenants/oa/projects/train", status=204)
        call("DELETE", "/v1/tokens/" + tok["id"], status=204)
        # audit
        events = call("GET", "/v1/audit/events?limit=5")
        head = call("GET", "/v1/audit/head")
        call("GET", "/v1/audit/pubkey")
        seq = events["items"][0]["seq"]
        call("GET", "/v1/audit/proof/inclusion?seq=%d&size=%d" % (seq, head["size"]))
        call("GET", "/v1/audit/proof/consistency?from=1&to=%d" % head["size"])
        # errors have the Error shape everywhere
        call("GET", "/v1/tenants/nope", status=404)
        call("POST", "/v1/tenants", {"name": "Bad Name"}, 400)
        call("POST", "/v1/tenants", {"name": "oa"}, 409)
        call("GET", "/v1/whoami", status=401, client=self.d.client(None))
        call("DELETE", "/v1/tenants/ob", status=204)
        call("DELETE", "/v1/tenants/oa", status=204)
        call("DELETE", "/v1/orgs/oa-org", status=204)
        # Every operation of the spec was exercised: a new route gets a call here.
        ops = {(m.upper(), p) for p, item in self.spec["paths"].items()
               for m in ("get", "post", "put", "patch", "delete") if m in item}
        self.assertEqual(sorted(ops - self.seen), [], "operations of the spec this test never called")


if __name__ == "__main__":
    harness.main()

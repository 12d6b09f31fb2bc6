#!/usr/bin/env python3
"""openapi_routes.py: docs/openapi.yaml describes exactly the routes the
server serves. The routes are read from the route tables in src/api/*.c
(`{"GET", "v1/tenants/*", handler, ...}`), the spec's paths and methods from
redocly's JSON bundle of it (a real OpenAPI parser, tools/redocly); a route
without its path in the spec, or a path the server does not serve, fails
with both lists. `{param}` in the spec matches `*` in the table.

Usage: openapi_routes.py SOURCE_ROOT
       openapi_routes.py --self-test
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

# /v1, and /neutron for OpenStack's mlnx_sdn_assist driver (docs/openstack.md)
ROUTE_RE = re.compile(r'\{\s*"(GET|POST|PUT|PATCH|DELETE)"\s*,\s*"((?:v1|neutron)/[^"]*)"')
METHODS = ("get", "post", "put", "patch", "delete")


def server_routes(sources):
    """{(METHOD, "/v1/tenants/*")} from the C route tables."""
    routes = set()
    for text in sources:
        for m in ROUTE_RE.finditer(text):
            routes.add((m.group(1), "/" + m.group(2)))
    return routes


def spec_routes(spec):
    """{(METHOD, "/v1/tenants/*")} from a parsed OpenAPI document."""
    routes = set()
    for path, item in spec.get("paths", {}).items():
        norm = re.sub(r"\{[^}/]+\}", "*", path)
        for method in METHODS:
            if method in item:
                routes.add((method.upper(), norm))
    return routes


def compare(served, described):
    """Lines describing every difference; empty when they agree."""
    out = []
    for m, p in sorted(served - described, key=lambda r: (r[1], r[0])):
        out.append("served but not in docs/openapi.yaml: %s %s" % (m, p))
    for m, p in sorted(described - served, key=lambda r: (r[1], r[0])):
        out.append("in docs/openapi.yaml but not served: %s %s" % (m, p))
    return out


def bundle(root):
    redocly = os.path.join(root, "tools", "redocly", "node_modules", ".bin", "redocly")
    if not os.access(redocly, os.X_OK):
        sys.exit("openapi_routes: %s is missing: run 'scripts/deps.sh test' (make test does)" % redocly)
    env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true",
               NO_COLOR="1")
    with tempfile.TemporaryDirectory(prefix="openapi-") as tmp:
        out = os.path.join(tmp, "openapi.json")
        p = subprocess.run([redocly, "bundle", os.path.join(root, "docs", "openapi.yaml"),
                            "--ext", "json", "-o", out], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            sys.exit("openapi_routes: redocly bundle failed:\n" + p.stdout)
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def self_test():
    c = '''static const struct route routes[] = {
    {"GET", "v1/healthz", api_healthz, ROUTE_OPEN, "healthz", "daemon"},
    {"DELETE", "v1/tenants/*/projects/*", api_project_delete, ROUTE_AUTH, "project.delete",
     "project"},
};'''
    served = server_routes([c])
    assert served == {("GET", "/v1/healthz"), ("DELETE", "/v1/tenants/*/projects/*")}, served
    spec = {"paths": {"/v1/healthz": {"get": {}, "parameters": []},
                      "/v1/tenants/{tenant}/projects/{project}": {"delete": {}}}}
    assert compare(served, spec_routes(spec)) == []
    spec["paths"]["/v1/healthz"]["post"] = {}
    del spec["paths"]["/v1/tenants/{tenant}/projects/{project}"]
    diff = compare(served, spec_routes(spec))
    assert diff == ["served but not in docs/openapi.yaml: DELETE /v1/tenants/*/projects/*",
                    "in docs/openapi.yaml but not served: POST /v1/healthz"], diff
    print("openapi_routes: self-test ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    texts = []
    for name in sorted(glob.glob(os.path.join(root, "src", "api", "*.c"))):
        with open(name, encoding="utf-8") as f:
            texts.append(f.read())
    served = server_routes(texts)
    if len(served) < 10:
        sys.exit("openapi_routes: found only %d routes in src/api/*.c: has the table's shape "
                 "changed? Update ROUTE_RE." % len(served))
    diff = compare(served, spec_routes(bundle(root)))
    for line in diff:
        print(line)
    if diff:
        return 1
    print("openapi_routes: the %d routes of src/api agree with docs/openapi.yaml" % len(served))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""layers.py: keeps the module layering of isostack true. Why: a header
included "upwards" (sched including sim.h, model.h including mig.h) ties a
lower layer to everything above it, and nothing in the compiler stops it.

The LAYERS table below is the single source of truth for which module may
include which; docs/architecture.md draws it. Every #include in src/<module>/
and include/isostack/<module>.h is checked:
  - "isostack/<m>.h" (or <isostack/<m>.h>) may name the file's own module, a
    module of a lower layer, or a module of the same layer only when the edge
    is listed in SIDEWAYS;
  - "<m>/<file>.h" names a private header: only module m itself may use it;
  - a module missing from the table is an error, so that a new module gets
    its place in the table (and the diagram) when it is added.
The LIBRARY table says which of the three libraries (meson.build) holds each
module: isostack-core (pure logic), isostack-server (store, controller, API,
fabric drivers) or isostack-client (HTTP client, node agent, GPU drivers; it
is loaded into foreign processes such as slurmstepd). On top of the layers:
  - a module of core includes only core headers, a module of the server or
    the client only its own library's and core's (so the client never drags
    in SQLite or libmicrohttpd, and the server none of libcurl);
  - src/<module>/meson.build appends its files to <library>_sources and to no
    other list.
The mains' helpers, tests/, bench/ and fuzz harnesses stand above every layer
and are not checked.

Usage: layers.py [--root DIR]   exit 0 when clean, 1 with one line a violation
       layers.py --self-test    the checker against small made-up trees
"""

import argparse
import os
import re
import sys
import tempfile

# Lowest first. A module may include headers of modules in earlier rows.
LAYERS = [
    ["util"],
    ["smfile"],  # the SM's files both sides read: header, refusal rule, log scan
    ["model"],
    ["mig", "inventory", "audit", "fabric", "store", "gpu", "codec"],  # codec: JSON shapes
    ["sched"],
    ["tenancy"],
    ["sim"],
    ["controller"],
    ["api", "client"],  # client/ is drawn beside api/: the HTTP client isoctl uses
    ["sandbox"],  # the job sandbox (cgroups, seccomp, namespaces): over util/ and model/
    ["agent"],  # the node agent's reconcile and loop: over gpu/, client/ and sandbox/
    # the mains; slurm/ is the SPANK plugin (build/slurm/isostack.so) and
    # cni/ the CNI plugin (build/cni/isostack-cni), thin mains over
    # isostack-client like isostack-agent
    ["isoctl", "isostackd", "isostack-agent", "slurm", "cni"],
]

# Edges between modules of one layer, (from, to): each says which of the two
# sits on top. Anything not listed here is refused, so no cycle can form.
SIDEWAYS = {
    ("inventory", "mig"),  # GPU models in cluster.yaml are looked up in the MIG tables
    ("fabric", "inventory"),  # partitions are built from the inventory's ports
    ("store", "audit"),  # the store persists audit events and heads
    ("gpu", "mig"),  # GPU drivers create MIG instances by the MIG tables
}

# Which library holds each module (the mains hold none: they link libraries).
LIBRARY = {
    "util": "core", "model": "core", "mig": "core", "inventory": "core", "audit": "core",
    "sched": "core", "tenancy": "core", "sim": "core", "codec": "core", "smfile": "core",
    "store": "server", "fabric": "server", "controller": "server", "api": "server",
    "gpu": "client", "client": "client", "agent": "client", "sandbox": "client",
}
MAINS = {"isoctl", "isostackd", "isostack-agent", "slurm", "cni"}

# The libraries a library's modules may include headers of.
USES = {"core": {"core"}, "server": {"server", "core"}, "client": {"client", "core"}}

RANK = {m: i for i, row in enumerate(LAYERS) for m in row}

SOURCES = re.compile(r"^\s*(\w+)\s*\+=", re.M)

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SOURCE_EXT = (".c", ".h")


def allowed(frm, to):
    if frm == to:
        return True
    if RANK[to] < RANK[frm]:
        return True
    return RANK[to] == RANK[frm] and (frm, to) in SIDEWAYS


def target_of(root, path):
    """(module, private) named by an include path, or None when it is not
    one of ours (system headers, same-directory includes)."""
    parts = path.split("/")
    if len(parts) != 2:
        return None
    d, f = parts
    if d == "isostack" and f.endswith(".h"):
        return (f[:-2], False)
    if d in RANK or os.path.isdir(os.path.join(root, "src", d)):
        return (d, True)
    return None


def files_of(root):
    """(module, path) for every file the table governs."""
    src = os.path.join(root, "src")
    for d in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        base = os.path.join(src, d)
        if not os.path.isdir(base):
            continue
        for top, dirs, names in os.walk(base):
            dirs.sort()
            for n in sorted(names):
                if n.endswith(SOURCE_EXT):
                    yield d, os.path.join(top, n)
    inc = os.path.join(root, "include", "isostack")
    for n in sorted(os.listdir(inc)) if os.path.isdir(inc) else []:
        if n.endswith(".h"):
            yield n[:-2], os.path.join(inc, n)


def check(root):
    problems = []
    unknown = set()
    for mod, path in files_of(root):
        rel = os.path.relpath(path, root)
        if mod not in RANK:
            if mod not in unknown:
                problems.append(f"{rel}: module '{mod}' is not in the LAYERS table of "
                                "tests/lint/layers.py (give it a layer there and in "
                                "docs/architecture.md)")
                unknown.add(mod)
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            for no, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                t = target_of(root, m.group(1))
                if t is None:
                    continue
                to, private = t
                if private and to != mod:
                    problems.append(f"{rel}:{no}: {mod} includes {m.group(1)}, a private "
                                    f"header of {to}")
                elif to not in RANK:
                    problems.append(f"{rel}:{no}: {mod} includes {m.group(1)}: module "
                                    f"'{to}' is not in the LAYERS table")
                elif not allowed(mod, to):
                    how = (f"a higher layer ({RANK[to]} above {RANK[mod]})"
                           if RANK[to] > RANK[mod] else
                           "the same layer, and the edge is not in SIDEWAYS")
                    problems.append(f"{rel}:{no}: {mod} includes {m.group(1)}: {to} is {how}")
                elif (mod in LIBRARY and to in LIBRARY and
                      LIBRARY[to] not in USES[LIBRARY[mod]]):
                    problems.append(f"{rel}:{no}: {mod} (isostack-{LIBRARY[mod]}) includes "
                                    f"{m.group(1)} of isostack-{LIBRARY[to]}")
    return problems + check_meson(root)


def check_meson(root):
    """Each module's meson.build appends to its own library's source list."""
    problems = []
    src = os.path.join(root, "src")
    for d in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        path = os.path.join(src, d, "meson.build")
        if d not in RANK or d in MAINS or not os.path.isfile(path):
            continue
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        want = f"{LIBRARY[d]}_sources"
        for m in SOURCES.finditer(text):
            if m.group(1).endswith("_sources") and m.group(1) != want:
                no = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{no}: {d} belongs to isostack-{LIBRARY[d]}: append to "
                                f"{want}, not {m.group(1)}")
    return problems



def self_test():
    """Made-up trees with a known verdict each: the checker must find
    exactly the expected problems (by substring), no more, no fewer."""
    cases = [
        ("clean", {"src/model/m.c": '#include "isostack/util.h"\n#include <stdio.h>\n',
                   "src/model/internal.h": '#include "isostack/model.h"\n',
                   "src/model/n.c": '#include "model/internal.h"\n#include "internal.h"\n',
                   "include/isostack/sched.h": '#include "isostack/mig.h"\n'}, []),
        ("source back-edge", {"src/sched/fgd.c": '#include "isostack/sim.h"\n'},
         ["src/sched/fgd.c:1: sched includes isostack/sim.h: sim is a higher layer"]),
        ("header back-edge", {"include/isostack/model.h":
                              '#include <stdint.h>\n  # include "isostack/mig.h"\n'},
         ["include/isostack/model.h:2: model includes isostack/mig.h: mig is a higher"]),
        ("angle brackets", {"src/util/u.c": "#include <isostack/model.h>\n"},
         ["util includes isostack/model.h: model is a higher layer"]),
        ("private header", {"src/sim/s.c": '#include "sched/internal.h"\n',
                            "src/sched/internal.h": "\n"},
         ["src/sim/s.c:1: sim includes sched/internal.h, a private header of sched"]),
        ("unknown module", {"src/newmod/x.c": '#include "isostack/util.h"\n'},
         ["module 'newmod' is not in the LAYERS table"]),
        ("unknown header", {"src/api/x.c": '#include "isostack/nosuch.h"\n'},
         ["module 'nosuch' is not in the LAYERS table"]),
        ("sideways listed", {"src/store/x.c": '#include "isostack/audit.h"\n'}, []),
        ("sideways reversed", {"src/audit/x.c": '#include "isostack/store.h"\n'},
         ["audit includes isostack/store.h: store is the same layer"]),
        ("commented out", {"src/mig/x.c": '// #include "isostack/sched.h"\n'
                                          '/* #include "isostack/sched.h" */\n'}, []),
        ("core includes server", {"src/sched/x.c": '#include "isostack/store.h"\n'},
         ["src/sched/x.c:1: sched (isostack-core) includes isostack/store.h of isostack-server"]),
        ("client includes server", {"include/isostack/agent.h":
                                    '#include "isostack/controller.h"\n'},
         ["agent (isostack-client) includes isostack/controller.h of isostack-server"]),
        ("server includes client", {"src/api/x.c": '#include "isostack/gpu.h"\n'},
         ["api (isostack-server) includes isostack/gpu.h of isostack-client"]),
        ("libraries share core", {"src/agent/x.c": '#include "isostack/mig.h"\n',
                                  "src/controller/x.c": '#include "isostack/tenancy.h"\n'}, []),
        ("meson lists", {"src/gpu/meson.build": "client_sources += files('a.c')\n",
                         "src/store/meson.build": "server_sources += files('s.c')\n",
                         "src/isoctl/meson.build": "isoctl_sources = files('main.c')\n"
                                                   "isoctl_sources += files('x.c')\n"}, []),
        ("meson old list", {"src/client/meson.build": "# c\nisostack_sources += files('c.c')\n"},
         ["src/client/meson.build:2: client belongs to isostack-client: append to client_sources, "
          "not isostack_sources"]),
        ("meson wrong library", {"src/util/meson.build": "server_sources += files('e.c')\n"},
         ["util belongs to isostack-core: append to core_sources, not server_sources"]),
    ]
    failed = 0
    for name, tree, want in cases:
        with tempfile.TemporaryDirectory() as d:
            for rel, text in tree.items():
                p = os.path.join(d, rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w", encoding="utf-8") as fh:
                    fh.write(text)
            got = check(d)
        ok = len(got) == len(want) and all(any(w in g for g in got) for w in want)
        if not ok:
            failed += 1
            print(f"self-test {name}: want {want}, got {got}")
    print(f"self-test: {len(cases) - failed} of {len(cases)} cases as expected")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    for t in SIDEWAYS:
        assert RANK[t[0]] == RANK[t[1]], f"SIDEWAYS {t} spans layers"
    for m in RANK:
        assert (m in LIBRARY) != (m in MAINS), f"{m}: give it a LIBRARY (or list it in MAINS)"
    problems = check(os.path.abspath(args.root))
    for p in problems:
        print(p)
    if problems:
        print(f"layers: {len(problems)} problem(s) with the layering or the libraries "
              "(tables: tests/lint/layers.py, picture: docs/architecture.md)")
        return 1
    print("layers: every include points down the layers and stays in its library's reach; "
          "every module's files are in its library")
    return 0


if __name__ == "__main__":
    sys.exit(main())

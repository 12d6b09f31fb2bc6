#!/usr/bin/env python3
"""inventory.py: writes the inventory of a large synthetic GPU cluster for
bench/agents (N nodes, each an HGX node of 8 H100-80GB with MIG on).

Why this exists: the agents bench needs 100 to 10,000 nodes whose desired
state carries MIG instances, and the only other generator of large
inventories (`isoctl fabric ibsim-net --synthetic`) writes nodes without GPUs.
The nodes here have the shape of examples/cluster.yaml's rack B (pool `mig`),
16 to a rack, each with a distinct port GUID; nothing else about them matters
to the bench. The result is checked by `isostackd --check-config` before a
run (bench/agents/run.py), so the schema is the daemon's, not restated here.

    python3 bench/agents/inventory.py N [--gpus-per-node 8] > cluster.yaml
"""

import argparse
import sys

RACK_NODES = 16
PORT_GUID_BASE = 0x0002C90600000000  # node i: base + i * 0x100 (its VFs, none here, would follow)
MAX_NODES = 65536


def node_name(i):
    """The name of node i (1-based), the same in every run: ag-000001..."""
    return "ag-%06d" % i


def inventory(n_nodes, gpus_per_node=8):
    """The inventory text of n_nodes nodes."""
    if not 1 <= n_nodes <= MAX_NODES:
        raise ValueError("nodes: %d is out of range 1..%d" % (n_nodes, MAX_NODES))
    if not 1 <= gpus_per_node <= 8:
        raise ValueError("gpus per node: %d is out of range 1..8" % gpus_per_node)
    n_racks = (n_nodes + RACK_NODES - 1) // RACK_NODES
    out = ["# Synthetic cluster for bench/agents: %d nodes of %d x H100-80GB with MIG,\n"
           "# %d to a rack (bench/agents/inventory.py).\n" % (n_nodes, gpus_per_node, RACK_NODES),
           "cluster: agents-bench\n",
           "controller:\n  placement: isostack\n",
           "fabric:\n  type: infiniband\n  name: ib0\n  sm_nodes: [sm-1]\n"
           "  pkey_range: [0x0100, 0x7ffe]\n",
           "pools:\n  - name: mig\n",
           "racks:\n"]
    for r in range(1, n_racks + 1):
        out.append("  - {name: rack-%05d, pdus: [pdu-%05d]}\n" % (r, r))
    out.append("node_classes:\n  hgx:\n    pool: mig\n    cpus: 112\n    memory_gib: 2048\n"
               "    gpus: {model: h100-80gb, count: %d, mig: true}\n"
               "    port: {device: mlx5_0, port: 1, pkey_capacity: 128}\n" % gpus_per_node)
    out.append("nodes:\n")
    for i in range(1, n_nodes + 1):
        rack = (i - 1) // RACK_NODES + 1
        out.append("  - {name: %s, class: hgx, rack: rack-%05d, pdu: pdu-%05d, "
                   "port: {guid: 0x%016x}}\n" % (node_name(i), rack, rack,
                                                 PORT_GUID_BASE + i * 0x100))
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nodes", type=int)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    a = ap.parse_args()
    try:
        sys.stdout.write(inventory(a.nodes, a.gpus_per_node))
    except ValueError as e:
        ap.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Parse + build + write time for a large fabric (run by hand; figures in docs/topology.md).

    .venv/bin/python bench/topology.py [--nodes 16384] [--rails 8]

Generates a 3-level rail-optimized fat tree in ibnetdiscover format (radix-64
switches: 32 hosts per leaf, pods of 4 leaves per rail with 32 spines, 32 cores; as on
real Quantum switches, each switch's SHARP aggregation node on port 65 unless
--no-aggregation-nodes), then
times parsing, building the tree and writing topology.conf, in CPU seconds of this
process, and reports the process's peak resident memory (input text included) before
and after, so memory per node can be compared across sizes.
"""

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from kiln.topology import fabric_tree, ibnetdiscover, writers

# The fabric generator is a test aid (tests/, not in the wheel).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import synthetic_fabric as synthetic


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=16384)
    parser.add_argument("--rails", type=int, default=8)
    parser.add_argument("--no-aggregation-nodes", action="store_true")
    options = parser.parse_args()
    tree = synthetic.FatTree(
        nodes=options.nodes,
        rails=options.rails,
        per_leaf=32,
        levels=3,
        spines=32,
        pod_leaves=4,
        cores=32,
        aggregation_nodes=not options.no_aggregation_nodes,
    )
    text = synthetic.generate(tree)
    figures = {
        "nodes": options.nodes,
        "rails": options.rails,
        "aggregation_nodes": tree.aggregation_nodes,
        "input_mb": round(len(text) / 1e6, 1),
        "input_lines": text.count("\n"),
    }
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    fabric = ibnetdiscover.parse(text, "bench")
    parsed = time.process_time()
    topology = fabric_tree.build(fabric, fabric_tree.Selection())
    built = time.process_time()
    output = writers.tree_conf(topology)
    written = time.process_time()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    got = {name: (s.level, s.nodes or s.children) for name, s in topology.switches.items()}
    assert got == synthetic.expected(tree), "the tree differs from the fabric's"
    figures.update(
        parse_cpu_s=round(parsed - start, 2),
        build_cpu_s=round(built - parsed, 2),
        write_cpu_s=round(written - built, 3),
        total_cpu_s=round(written - start, 2),
        rss_before_mb=round(rss_before / 1024),
        rss_peak_mb=round(rss_after / 1024),
        switches=len(topology.switches),
        output_lines=output.count("\n"),
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

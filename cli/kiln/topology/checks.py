"""Checks before a topology is written: every cluster node under exactly one leaf
(or block), never an empty file."""

from enum import StrEnum

from kiln import hostlist
from kiln.topology.model import Block, Switch, Topology, TopologyError

CATCH_ALL = "kiln-unplaced"


class MissingPolicy(StrEnum):
    FAIL = "fail"
    CATCH_ALL = "catch-all"


def apply(topology: Topology, cluster_nodes: set[str] | None, missing: MissingPolicy) -> None:
    """Check (and, with the catch-all policy, complete) the topology for these nodes."""
    _no_node_twice(topology)
    if cluster_nodes is not None:
        _restrict(topology, cluster_nodes)
        absent = cluster_nodes - topology.nodes()
        if absent:
            listed = hostlist.compress(absent)
            if missing is MissingPolicy.FAIL:
                raise TopologyError(
                    f"{len(absent)} Slurm nodes are not in the topology source: {listed}"
                    " (to place them under one switch: --missing catch-all,"
                    " or slurm_topology_missing: catch-all in the inventory)"
                )
            _catch_all(topology, absent)
            topology.warnings.append(f"{len(absent)} nodes placed under {CATCH_ALL}: {listed}")
    if not topology.nodes():
        # An empty topology.conf with a topology plugin configured stops slurmctld.
        raise TopologyError(f"{topology.source}: the topology places no node; refusing to write it")


def _no_node_twice(topology: Topology) -> None:
    groups = topology.blocks.values() if topology.is_block else topology.leaves()
    owner: dict[str, str] = {}
    for group in groups:
        for node in group.nodes:
            if node in owner:
                kind = "block" if topology.is_block else "leaf switch"
                raise TopologyError(
                    f"node {node} is under two of a {kind}: {owner[node]} and {group.name}"
                )
            owner[node] = group.name


def _restrict(topology: Topology, cluster_nodes: set[str]) -> None:
    extra = topology.nodes() - cluster_nodes
    if not extra:
        return
    for group in list(topology.blocks.values()) + list(topology.switches.values()):
        group.nodes -= extra
    topology.notes.append(f"left out {len(extra)} hosts that are not Slurm nodes")


def _catch_all(topology: Topology, absent: set[str]) -> None:
    if topology.is_block:
        topology.blocks[CATCH_ALL] = Block(CATCH_ALL, set(absent))
        return
    topology.switches[CATCH_ALL] = Switch(CATCH_ALL, 0, nodes=set(absent))
    roots = [s for s in topology.switches.values() if s.level == topology.levels() - 1]
    if len(roots) == 1 and roots[0].name != CATCH_ALL:
        roots[0].children.add(CATCH_ALL)

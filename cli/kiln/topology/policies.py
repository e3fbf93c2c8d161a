"""Checks before a topology is written: every cluster node under exactly one leaf
(or block), one connected tree, never an empty file."""

from enum import StrEnum

from kiln import formats, hostlist
from kiln.topology.shape import Block, Switch, Topology, TopologyError
from kiln_node import counted

CATCH_ALL = "kiln-unplaced"
# Joins the tops of a fabric that has several (a partial dump, two fabrics): without
# a switch above them all, Slurm's topology/tree never lets a job span two of them.
ROOT = "kiln-root"
_NAMED = 8  # switches named in a message before "and N more"


class MissingPolicy(StrEnum):
    FAIL = "fail"
    CATCH_ALL = "catch-all"


class DisconnectedPolicy(StrEnum):
    ROOT = "root"
    FAIL = "fail"


class PolicyError(TopologyError):
    """A topology that another value of a policy would accept: `remedy` says what that
    value does, `policy` and `value` name it; the caller names its setting (the
    command's option, or the inventory variable)."""

    def __init__(self, message: str, remedy: str, policy: str, value: str) -> None:
        super().__init__(message)
        self.remedy, self.policy, self.value = remedy, policy, value


def apply(
    topology: Topology,
    cluster_nodes: set[str] | None,
    missing: MissingPolicy,
    disconnected: DisconnectedPolicy = DisconnectedPolicy.ROOT,
) -> None:
    """Check (and, as the policies allow, complete) the topology for these nodes."""
    _names_slurm_reads(topology)
    _no_node_twice(topology)
    absent: set[str] = set()
    if cluster_nodes is not None:
        _restrict(topology, cluster_nodes)
        absent = cluster_nodes - topology.nodes()
        if absent and missing is MissingPolicy.FAIL:
            raise PolicyError(
                f"{len(absent)} Slurm nodes are not in the topology source: "
                f"{hostlist.compress(absent)}",
                "to place them under one switch",
                "missing",
                MissingPolicy.CATCH_ALL,
            )
    if not topology.nodes() and not absent:
        # An empty topology.conf with a topology plugin configured stops slurmctld.
        raise TopologyError(f"{topology.source}: the topology places no node; refusing to write it")
    top = None if topology.is_block or not topology.nodes() else _connect(topology, disconnected)
    if absent:
        _catch_all(topology, absent, top)
        topology.warnings.append(
            f"{len(absent)} nodes placed under {CATCH_ALL}: {hostlist.compress(absent)}"
        )


def _names_slurm_reads(topology: Topology) -> None:
    """Every node, switch and block name is one plain name: Slurm expands a hostlist
    where it finds one, so `gpu001,evil[1-9]` would add evil1..evil9 to a switch."""
    groups = list(topology.blocks.values()) + list(topology.switches.values())
    names = [g.name for g in groups] + [n for g in groups for n in getattr(g, "nodes", ())]
    names += [child for switch in topology.switches.values() for child in switch.children]
    for name in names:
        if not formats.is_name(name):
            raise TopologyError(f"{topology.source}: name {name!r} {formats.NAME_RULE}")


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
    _prune(topology)


def _prune(topology: Topology) -> None:
    """Removes switches left with neither nodes nor children (a leaf of only non-Slurm
    hosts, then a spine of only such leaves): Slurm rejects a switch it cannot place."""
    while empty := {n for n, s in topology.switches.items() if not s.nodes and not s.children}:
        for name in empty:
            del topology.switches[name]
        for switch in topology.switches.values():
            switch.children -= empty


def _below(topology: Topology, name: str, seen: set[str]) -> set[str]:
    """The nodes under a switch."""
    switch = topology.switches[name]
    nodes = set(switch.nodes)
    for child in switch.children - seen:
        seen.add(child)
        nodes |= _below(topology, child, seen)
    return nodes


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMED])
    return shown + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")


def _connect(topology: Topology, policy: DisconnectedPolicy) -> str:
    """Makes the tree one tree: the name of a switch that reaches every node, adding
    ROOT above the tops when none does (or failing, as the policy says)."""
    children = set().union(*(s.children for s in topology.switches.values()))
    tops = sorted(set(topology.switches) - children)
    everyone = topology.nodes()
    reach = {top: _below(topology, top, {top}) for top in tops}
    if covering := [top for top in tops if reach[top] == everyone]:
        top = covering[0]
        if partial := [t for t in tops if t != top]:
            topology.warnings.append(
                f"{counted(len(partial), 'top switch', 'top switches')} "
                f"reach{'es' if len(partial) == 1 else ''} only part of the fabric that {top} "
                f"reaches ({_listed(partial)}): a missing or down cable?"
            )
        return top
    described = _listed([f"{t} ({counted(len(reach[t]), 'node')})" for t in tops])
    if policy is DisconnectedPolicy.FAIL:
        raise PolicyError(
            f"the fabric has {len(tops)} top switches and none reaches every node: "
            f"{described} (a partial dump, or two fabrics?)",
            f"to join them under {ROOT}",
            "disconnected",
            DisconnectedPolicy.ROOT,
        )
    if ROOT in topology.switches:
        raise TopologyError(f"a switch is named {ROOT}, which Kiln keeps for its own root")
    level = topology.levels()
    topology.switches[ROOT] = Switch(ROOT, level, children=set(tops))
    topology.warnings.append(
        f"{len(tops)} top switches share no switch above them: {described} (a partial "
        f"dump, or two fabrics?); joined under {ROOT} so that jobs can span them"
    )
    return ROOT


def _catch_all(topology: Topology, absent: set[str], top: str | None) -> None:
    """The nodes the source does not place, under one switch that hangs under the top
    of the tree, so they can share a job with the rest."""
    if topology.is_block:
        topology.blocks[CATCH_ALL] = Block(CATCH_ALL, set(absent))
        return
    if top is not None and topology.switches[top].nodes:
        # A one-switch tree: a switch lists nodes or switches, so a root joins the two.
        topology.switches[ROOT] = Switch(ROOT, 1, children={top})
        top = ROOT
    topology.switches[CATCH_ALL] = Switch(CATCH_ALL, 0, nodes=set(absent))
    if top is not None:
        topology.switches[top].children.add(CATCH_ALL)

"""Build a Slurm switch tree from an InfiniBand fabric.

Leaves are switches cabled to a selected HCA of a named host; their parents are
found level by level; switches of one level with the same children (redundant
spines) are merged into one. On a rail-optimized fabric each host has one HCA per
rail; the tree is built from one rail so each host sits under exactly one leaf.
"""

import fnmatch
import functools
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from kiln.topology.ibnetdiscover import Fabric, FabricNode
from kiln.topology.model import Switch, Topology, TopologyError, safe_name, unique_names

_MELLANOX_DESC = re.compile(r"^MF0;(?P<name>[^:]+):")
# Factory descriptions: the device was never given a name of its own.
_UNNAMED_HCA = re.compile(r"^(MT\d+|Mellanox Technologies|NVIDIA|ConnectX)", re.IGNORECASE)
_UNNAMED_SWITCH = re.compile(r"Mellanox Technologies|NVIDIA|^Quantum|^MT\d+|switch", re.IGNORECASE)
_MAP_LINE = re.compile(r'^(0x[0-9a-fA-F]+)\s+"([^"]*)"')


@dataclass
class Selection:
    """Which HCAs make up the compute fabric, and names that override descriptions."""

    hca_patterns: list[str] = field(default_factory=list)  # e.g. mlx5_[0-7]
    guids: set[str] = field(default_factory=set)
    name_map: dict[str, str] = field(default_factory=dict)  # node GUID -> description

    def selects(self, node: FabricNode, device: str) -> bool:
        if not self.guids and not self.hca_patterns:
            return True
        if self.guids and node.guid not in self.guids:
            return False
        patterns = self.hca_patterns or ["*"]
        return any(fnmatch.fnmatchcase(device, p) for p in patterns)


def read_name_map(path: Path) -> dict[str, str]:
    """The ibnetdiscover --node-name-map format: `0xGUID "name"` per line, # comments."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read: {exc.strerror}") from None
    mapping: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _MAP_LINE.match(line)
        if not match:
            raise TopologyError(f'{path}:{number}: expected 0xGUID "name", got {raw.strip()!r}')
        guid = match.group(1).lower().removeprefix("0x").lstrip("0") or "0"
        name = match.group(2)
        if name in first_line:
            raise TopologyError(
                f"{path}:{number}: name {name!r} is already given to another GUID on line "
                f"{first_line[name]}"
            )
        first_line[name] = number
        mapping[guid] = name
    return mapping


@functools.cache
def _natural(text: str) -> tuple[object, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _switch_label(node: FabricNode) -> str:
    if match := _MELLANOX_DESC.match(node.desc):
        return match["name"]
    desc = node.desc.strip()
    if desc and not _UNNAMED_SWITCH.search(desc):
        return desc.split()[0]
    return f"sw-{node.guid}"


def _host_of(node: FabricNode, selection: Selection) -> tuple[str | None, str, str]:
    """(host, device, why-skipped) for a channel adapter."""
    desc = node.desc
    if selection.name_map:
        desc = selection.name_map.get(node.guid, desc)
    desc = desc.strip()
    if not desc:
        return None, "", "unnamed"
    if "aggregation node" in desc.lower():
        return None, "", "SHARP aggregation node"
    if desc.startswith("MF0;") or ";" in desc:
        return None, "", "switch management port"
    if _UNNAMED_HCA.match(desc):
        return None, "", "unnamed"
    parts = desc.split()
    return parts[0], (parts[1] if len(parts) > 1 else ""), ""


def build(fabric: Fabric, selection: Selection, source: str = "ibnetdiscover") -> Topology:
    topology = Topology(source=source)
    hcas: dict[str, list[tuple[str, FabricNode]]] = defaultdict(list)  # host -> (device, CA)
    skipped: Counter[str] = Counter()
    for node in fabric.nodes.values():
        if node.kind != "ca":
            continue
        host, device, why = _host_of(node, selection)
        if host is None:
            skipped[why] += 1
        elif selection.selects(node, device):
            hcas[host].append((device, node))
    if skipped:
        detail = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
        topology.warnings.append(
            f"skipped {sum(skipped.values())} HCAs without a host name ({detail})"
        )
    if not hcas:
        if not any(node.kind == "ca" for node in fabric.nodes.values()):
            raise TopologyError(f"{source}: the file describes no HCAs (truncated output?)")
        raise TopologyError(f"{source}: no HCA of a named host matches the selection")
    rail = min((d for entries in hcas.values() for d, _ in entries), key=_natural)
    topology.notes.append(f"built from rail {rail or '(unnamed device)'}")

    leaf_of_host: dict[str, str] = {}
    off_rail = []
    for host, entries in hcas.items():
        entries.sort(key=lambda e: _natural(e[0]))
        device, ca = next(((d, c) for d, c in entries if d == rail), entries[0])
        if device != rail:
            off_rail.append(host)
        switches = {peer for peer in ca.peers() if fabric.nodes[peer].kind == "switch"}
        if not switches:
            topology.warnings.append(f"{host}: HCA {device} is not cabled to a switch; left out")
            continue
        leaf_of_host[host] = min(switches)
    if off_rail:
        topology.warnings.append(
            f"{len(off_rail)} hosts have no HCA {rail}; placed by their first HCA instead"
        )
    _grow(fabric, leaf_of_host, topology)
    return topology


def _switch_neighbours(fabric: Fabric, switch_id: str) -> set[str]:
    return {peer for peer in fabric.nodes[switch_id].peers() if fabric.nodes[peer].kind == "switch"}


def _grow(fabric: Fabric, leaf_of_host: dict[str, str], topology: Topology) -> None:
    members: dict[str, set[str]] = defaultdict(set)  # leaf id -> hosts
    for host, leaf in leaf_of_host.items():
        members[leaf].add(host)
    levels: list[dict[str, set[str]]] = [{leaf: set() for leaf in members}]  # id -> child ids
    placed = set(members)
    # A switch cabled to an HCA is a leaf of some rail; it is never anyone's parent.
    faces_hosts: dict[str, bool] = {}
    while True:
        parents: dict[str, set[str]] = defaultdict(set)
        for child in levels[-1]:
            for peer in _switch_neighbours(fabric, child) - placed:
                if peer not in faces_hosts:
                    faces_hosts[peer] = fabric.nodes[peer].cabled_to_hca()
                if not faces_hosts[peer]:
                    parents[peer].add(child)
        if not parents:
            break
        placed |= set(parents)
        levels.append(parents)
    _name_and_merge(fabric, levels, members, topology)


def _name_and_merge(
    fabric: Fabric,
    levels: list[dict[str, set[str]]],
    members: dict[str, set[str]],
    topology: Topology,
) -> None:
    all_ids = sorted({sid for level in levels for sid in level})
    labels = unique_names(
        [(sid, safe_name(_switch_label(fabric.nodes[sid]), f"sw-{sid}")) for sid in all_ids]
    )
    alias: dict[str, str] = {}  # switch id -> the id it was merged into
    merged: Counter[int] = Counter()
    for depth, level in enumerate(levels):
        by_children: dict[frozenset[str], list[str]] = defaultdict(list)
        for sid, children in level.items():
            kids = frozenset(alias.get(c, c) for c in children)
            by_children[kids if depth else frozenset({sid})].append(sid)
        for kids, group in by_children.items():
            group.sort(key=lambda s: _natural(labels[s]))
            keep = group[0]
            for other in group[1:]:
                alias[other] = keep
            merged[depth] += len(group) - 1
            switch = Switch(name=labels[keep], level=depth)
            if depth == 0:
                switch.nodes = set(members[keep])
            else:
                switch.children = {labels[c] for c in kids}
            topology.switches[switch.name] = switch
    for depth, count in sorted(merged.items()):
        if count:
            topology.notes.append(f"merged {count} redundant level-{depth} switches")

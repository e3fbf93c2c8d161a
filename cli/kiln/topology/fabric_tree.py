"""Build a Slurm switch tree from an InfiniBand fabric.

Leaves are switches cabled to a selected HCA of a named host, on one rail: on a
rail-optimized fabric each host has one HCA per rail, so each host sits under exactly
one leaf. Their parents are found level by level among the switches that are not at
the edge (an edge switch is cabled to some end host's HCA: another rail's, a storage or
UFM server's); a switch's own SHARP aggregation node or management port, which
ibnetdiscover shows as an HCA, does not count. Switches of one level with the same
children (redundant spines) are merged into one.
"""

import fnmatch
import functools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter, not_
from pathlib import Path

from kiln import formats
from kiln.files import read_text
from kiln.topology.bulk import no_gc
from kiln.topology.ibnetdiscover import Fabric, FabricNode, guid_of, normal_guid
from kiln.topology.shape import Switch, Topology, TopologyError, safe_name, unique_names

_MELLANOX_DESC = re.compile(r"^MF0;(?P<name>[^:]+):")
# Factory descriptions: the device was never given a name of its own.
_UNNAMED_HCA = re.compile(r"^(MT\d+|Mellanox Technologies|NVIDIA|ConnectX)", re.IGNORECASE)
# Descriptions, one per line, split at once into their first two words where there are
# at most two (else ("", "")): "gpu017 mlx5_3" -> ("gpu017", "mlx5_3").
_TWO_WORDS = re.compile(r"(?m)^[ \t]*([^\s;]+)(?:[ \t]+([^\s;]+))?[ \t]*$|^[^\n]*$")
_UNNAMED_SWITCH = re.compile(r"Mellanox Technologies|NVIDIA|^Quantum|^MT\d+|switch", re.IGNORECASE)
Hca = tuple[str, str, str]  # host, device, HCA id
_MAP_LINE = re.compile(r'^(0x[0-9a-fA-F]+)\s+"([^"]*)"')


@dataclass
class Selection:
    """Which HCAs make up the compute fabric, and names that override descriptions."""

    hca_patterns: list[str] = field(default_factory=list)  # e.g. mlx5_[0-7]
    guids: set[str] = field(default_factory=set)
    name_map: dict[str, str] = field(default_factory=dict)  # node GUID -> description

    def selects_device(self, device: str) -> bool:
        return not self.hca_patterns or any(
            fnmatch.fnmatchcase(device, p) for p in self.hca_patterns
        )


def read_name_map(path: Path) -> dict[str, str]:
    """The ibnetdiscover --node-name-map format: `0xGUID "name"` per line, # comments."""
    lines = read_text(path).splitlines()
    mapping: dict[str, str] = {}
    first_line: dict[str, int] = {}
    guid_line: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _MAP_LINE.match(line)
        if not match:
            raise TopologyError(f'{path}:{number}: expected 0xGUID "name", got {raw.strip()!r}')
        guid = normal_guid(match.group(1))
        name = match.group(2)
        if name in first_line:
            raise TopologyError(
                f"{path}:{number}: name {name!r} is already given to another GUID on line "
                f"{first_line[name]}"
            )
        if guid in guid_line:
            raise TopologyError(
                f"{path}:{number}: GUID {match.group(1)} is already named on line {guid_line[guid]}"
            )
        first_line[name] = guid_line[guid] = number
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


def _host_of(desc: str) -> tuple[str | None, str, str]:
    """(host, device, why-skipped) from an HCA's description."""
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


_SWITCH_PARTS = ("SHARP aggregation node", "switch management port")


def _maybe_skipped(word: str) -> bool:
    """Whether a first word could begin "Mellanox Technologies" or "... aggregation node"."""
    word = word.lower()
    return word == "mellanox" or "aggregation" in word


def _named_hcas(
    fabric: Fabric, selection: Selection, topology: Topology
) -> tuple[list[Hca], set[str]]:
    """(host, device, HCA id) for every selected HCA of a named host, and the ids of the
    HCAs that are parts of a switch (SHARP aggregation nodes, management ports). The
    rest are counted in a note or a warning. Done in bulk: a large fabric has over
    100,000 HCAs, and one aggregation node per switch."""
    ids, descs = fabric.hcas()
    if not ids:
        raise TopologyError(f"{topology.source}: the file describes no HCAs (truncated output?)")
    if selection.name_map:
        descs = [selection.name_map.get(guid_of(i), d) for i, d in zip(ids, descs, strict=True)]
    split = _TWO_WORDS.findall("\n".join(descs))
    hosts = list(map(itemgetter(0), split))
    # Words that may make _host_of skip the HCA (or need more than two words): only
    # such descriptions are read one by one, which keeps _host_of the one place for the
    # rules and the rest in bulk.
    odd = {h for h in set(hosts) if not h or _UNNAMED_HCA.match(h) or _maybe_skipped(h)}
    rows = zip(hosts, map(itemgetter(1), split), ids, strict=True)
    if not odd:
        hcas = list(rows)
        internal: set[str] = set()
    else:
        is_odd = list(map(odd.__contains__, hosts))
        hcas = list(compress(rows, map(not_, is_odd)))
        internal = _read_odd(compress(zip(ids, descs, strict=True), is_odd), hcas, topology)
    hcas = _with_plain_names(hcas, topology)
    if selection.guids:
        hcas = [hca for hca in hcas if guid_of(hca[2]) in selection.guids]
    devices = set(map(itemgetter(1), hcas))
    if (wanted := {d for d in devices if selection.selects_device(d)}) != devices:
        hcas = [hca for hca in hcas if hca[1] in wanted]
    if not hcas:
        raise TopologyError(f"{topology.source}: no HCA of a named host matches the selection")
    return hcas, internal


def _with_plain_names(hcas: list[Hca], topology: Topology) -> list[Hca]:
    """Drops, with a warning naming them, the HCAs whose host word is not a name Slurm
    reads as one node (`gpu001,evil[1-9]` is a hostlist to Slurm): fabric text is
    never written into topology.conf as it is. Skipped, as other HCAs no host owns
    are, so one odd description does not stop a whole fabric's topology."""
    odd = sorted(h for h in set(map(itemgetter(0), hcas)) if not formats.is_name(h))
    if not odd:
        return hcas
    dropped = set(odd)
    kept = [hca for hca in hcas if hca[0] not in dropped]
    shown = ", ".join(repr(h) for h in odd[:8]) + (
        f" and {len(odd) - 8} more" if len(odd) > 8 else ""
    )
    topology.warnings.append(
        f"skipped {len(hcas) - len(kept)} HCAs whose host name is not a Slurm node name "
        f"({shown}): names {formats.NAME_RULE}"
    )
    return kept


def _read_odd(odd: Iterable[tuple[str, str]], hcas: list[Hca], topology: Topology) -> set[str]:
    """Adds the named ones of these (id, description) to `hcas`; returns the ids of
    switch parts and reports the skipped: switch parts in a note (every Quantum switch
    has an aggregation node), HCAs of unnamed hosts in a warning."""
    internal: set[str] = set()
    parts: Counter[str] = Counter()
    unnamed = 0
    for i, desc in odd:
        host, device, why = _host_of(desc)
        if host is not None:
            hcas.append((host, device, i))
        elif why in _SWITCH_PARTS:
            internal.add(i)
            parts[why] += 1
        else:
            unnamed += 1
    if parts:
        detail = ", ".join(f"{why}s: {n}" for why, n in sorted(parts.items()))
        topology.notes.append(f"left out the switches' own HCAs ({detail})")
    if unnamed:
        topology.warnings.append(
            f"skipped {unnamed} HCAs without a host name (a factory or empty description)"
        )
    return internal


def _without_generic_names(
    fabric: Fabric, switches: set[str], hcas: list[Hca], topology: Topology
) -> list[Hca]:
    """Drops the HCAs of host names that are no host's own: a name given to several
    HCAs of one device (rail), as `localhost HCA-1` is on every host whose node
    description was never set."""
    pairs = list(map(itemgetter(0, 1), hcas))
    if len(set(pairs)) == len(pairs):
        return hcas
    generic = {host for (host, _), n in Counter(pairs).items() if n > 1}
    dropped = [hca for hca in hcas if hca[0] in generic]
    for word in sorted(generic):
        mine = [hca for hca in dropped if hca[0] == word]
        leaves = set().union(*(fabric.peers(hca[2]) & switches for hca in mine))
        topology.warnings.append(
            f"skipped {len(mine)} HCAs described as '{word} ...' (under {len(leaves)} "
            "leaves): one name on several HCAs of a rail is no host's own, as when a node "
            "description was never set; set each node's description (rdma-ndd, or "
            "/sys/class/infiniband/DEVICE/node_desc) or map the GUIDs with --node-name-map"
        )
    return [hca for hca in hcas if hca[0] not in generic]


def _edges(fabric: Fabric, switches: set[str], internal: set[str]) -> set[str]:
    """Switches cabled to an end host's HCA (any rail, storage, UFM, unnamed): the edge
    of the fabric, never above another switch. A switch's own aggregation node or
    management port does not put it at the edge."""
    edges = {row[3] for hca, row in fabric.plain_hcas.items() if hca not in internal}
    for node in fabric.nodes.values():
        if node.kind == "ca" and node.id not in internal:
            edges |= node.peers() & switches
    return edges & switches


@no_gc
def build(fabric: Fabric, selection: Selection, source: str = "ibnetdiscover") -> Topology:
    topology = Topology(source=source)
    switches = fabric.switches()
    hcas, internal = _named_hcas(fabric, selection, topology)
    hcas = _without_generic_names(fabric, switches, hcas, topology)
    if not hcas:
        raise TopologyError(f"{topology.source}: no HCA of a named host matches the selection")
    devices = list(map(itemgetter(1), hcas))
    rail = min(set(devices), key=_natural)
    topology.notes.append(f"built from rail {rail or '(unnamed device)'}")
    # Each host's HCA on that rail (the first listed, should a host have two); built
    # with C-level iteration, as there are over 100,000 HCAs on a large fabric.
    on_rail = list(compress(hcas, map(rail.__eq__, devices)))[::-1]
    chosen = dict(zip(map(itemgetter(0), on_rail), on_rail, strict=True))
    if off_rail := set(map(itemgetter(0), hcas)).difference(chosen):
        others = sorted((h for h in hcas if h[0] in off_rail), key=lambda h: _natural(h[1]))
        for hca in others:
            chosen.setdefault(hca[0], hca)  # its first HCA in device order
        topology.warnings.append(
            f"{len(off_rail)} hosts have no HCA {rail}; placed by their first HCA instead"
        )

    leaf_of_host: dict[str, str] = {}
    uncabled = []
    for host, device, ca in chosen.values():
        if leaves := fabric.peers(ca) & switches:
            leaf_of_host[host] = min(leaves)
        else:
            uncabled.append((host, device))
    for host, device in sorted(uncabled, key=lambda h: _natural(h[0])):
        topology.warnings.append(f"{host}: HCA {device} is not cabled to a switch; left out")
    _grow(fabric, switches, _edges(fabric, switches, internal), leaf_of_host, topology)
    return topology


def _grow(
    fabric: Fabric,
    switches: set[str],
    edges: set[str],
    leaf_of_host: dict[str, str],
    topology: Topology,
) -> None:
    members: dict[str, set[str]] = defaultdict(set)  # leaf id -> hosts
    for host, leaf in leaf_of_host.items():
        members[leaf].add(host)
    levels: list[dict[str, set[str]]] = [{leaf: set() for leaf in members}]  # id -> child ids
    placed = set(members)
    # An edge switch (a leaf of some rail, storage, ...) is never anyone's parent.
    above = switches - edges
    while True:
        parents: dict[str, set[str]] = defaultdict(set)
        for child in levels[-1]:
            for peer in above.intersection(fabric.peers(child)).difference(placed):
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

"""The shape Slurm cares about: switches in levels (tree) or blocks of nodes."""

import re
from dataclasses import dataclass, field

from kiln.errors import InputError

# slurmctld's hostlist parser crashes on a numeric suffix longer than this.
MAX_NUMERIC_TAIL = 19
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_TAIL = re.compile(r"(\d+)$")


class TopologyError(InputError):
    """Topology input that cannot be used: names the file, line or node."""


@dataclass
class Switch:
    name: str
    level: int  # 0 for leaves (switches with nodes), 1 for their parents, ...
    nodes: set[str] = field(default_factory=set)
    children: set[str] = field(default_factory=set)


@dataclass
class Block:
    name: str
    nodes: set[str]


@dataclass
class Topology:
    """A tree of switches, or a set of blocks, plus what the source had to say."""

    source: str
    switches: dict[str, Switch] = field(default_factory=dict)
    blocks: dict[str, Block] = field(default_factory=dict)
    block_sizes: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def is_block(self) -> bool:
        return bool(self.blocks)

    def leaves(self) -> list[Switch]:
        return sorted((s for s in self.switches.values() if s.nodes), key=lambda s: s.name)

    def nodes(self) -> set[str]:
        if self.is_block:
            return set().union(*(b.nodes for b in self.blocks.values()))
        return set().union(*(s.nodes for s in self.switches.values())) if self.switches else set()

    def levels(self) -> int:
        return 1 + max((s.level for s in self.switches.values()), default=-1)


def safe_name(raw: str, fallback: str) -> str:
    """A switch or block name slurmctld accepts: [A-Za-z0-9_.-], no long numeric tail."""
    name = _UNSAFE.sub("_", raw.strip()).strip("_") or fallback
    tail = _TAIL.search(name)
    if tail and len(tail.group(1)) > MAX_NUMERIC_TAIL:
        name += "x"  # ends the numeric suffix; still unique because it is injective
    return name


def unique_names(wanted: list[tuple[str, str]]) -> dict[str, str]:
    """key -> name, with -2, -3... for repeats, in the order given (stable input order
    gives stable names)."""
    seen: dict[str, int] = {}
    names = {}
    for key, name in wanted:
        count = seen.get(name, 0) + 1
        seen[name] = count
        names[key] = name if count == 1 else f"{name}-{count}"
    return names

"""Parse ibnetdiscover output: the default topology format and the `-p` port report.

Both become a Fabric: nodes (switches and channel adapters) keyed by an id, each with
its description and its cabled ports.
"""

import re
from dataclasses import dataclass, field

from kiln.topology.model import TopologyError

# Default format -----------------------------------------------------------------
_NODE = re.compile(
    r'^(?P<kind>Switch|Ca|Rt)\s+(?P<nports>\d+)\s+"(?P<id>[SHR]-[0-9a-fA-F]+)"'
    r'(?:\s*#\s*"(?P<desc>[^"]*)")?.*$'
)
_PORT = re.compile(
    r"^\[(?P<port>\d+)\](?:\((?P<pguid>[0-9a-fA-F]+)\))?\s+"
    r'"(?P<peer>[SHR]-[0-9a-fA-F]+)"\[(?P<pport>\d+)\](?:\([0-9a-fA-F]+\))?'
    r"(?:\s*#.*)?$"
)

# -p format ------------------------------------------------------------------------
_P_LINE = re.compile(
    r"^(?P<kind>SW|CA|RT)\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+(?P<guid>0x[0-9a-fA-F]+)\s+"
    r"(?P<width>\S+)\s+(?P<speed>\S+)\s*"
    r"(?:-\s+(?P<pkind>SW|CA|RT)\s+(?P<plid>\d+)\s+(?P<pport>\d+)\s+(?P<pguid>0x[0-9a-fA-F]+)\s*)?"
    r"\(\s*'(?P<desc>.*?)'\s*(?:-\s*'(?P<pdesc>.*?)'\s*)?\)\s*$"
)
_KINDS = {
    "Switch": "switch",
    "Ca": "ca",
    "Rt": "router",
    "SW": "switch",
    "CA": "ca",
    "RT": "router",
}


@dataclass
class FabricNode:
    id: str
    kind: str  # switch, ca or router
    guid: str
    desc: str = ""
    ports: dict[int, tuple[str, int]] = field(default_factory=dict)  # port -> (peer id, port)


@dataclass
class Fabric:
    nodes: dict[str, FabricNode] = field(default_factory=dict)

    def node(self, node_id: str, kind: str, guid: str) -> FabricNode:
        found = self.nodes.get(node_id)
        if found is None:
            found = self.nodes[node_id] = FabricNode(node_id, kind, guid)
        return found

    def merge(self, other: "Fabric") -> None:
        for node_id, node in other.nodes.items():
            mine = self.nodes.setdefault(node_id, node)
            if mine is not node:
                mine.ports.update(node.ports)
                mine.desc = mine.desc or node.desc


def parse(text: str, label: str = "ibnetdiscover") -> Fabric:
    """Parse either format (detected from the content); errors name the line."""
    lines = text.splitlines()
    if any(_P_LINE.match(line) for line in lines[:50] if line.strip()):
        fabric = _parse_ports(lines, label)
    else:
        fabric = _parse_default(lines, label)
    if not any(n.kind == "switch" for n in fabric.nodes.values()):
        raise TopologyError(f"{label}: no switches found; is this ibnetdiscover output?")
    return fabric


def _guid_of(node_id: str) -> str:
    return node_id.split("-", 1)[1].lower().lstrip("0") or "0"


_SKIP_PREFIXES = ("#", "vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")


def _canonical(node_id: str) -> str:
    return node_id[:2].upper() + node_id[2:].lower()


def _parse_default(lines: list[str], label: str) -> Fabric:
    fabric = Fabric()
    current: FabricNode | None = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(_SKIP_PREFIXES):
            continue
        if line[0] == "[" and current is not None and (match := _PORT.match(line)):
            current.ports[int(match["port"])] = (_canonical(match["peer"]), int(match["pport"]))
            continue
        if match := _NODE.match(line):
            node_id = _canonical(match["id"])
            current = fabric.node(node_id, _KINDS[match["kind"]], _guid_of(node_id))
            current.desc = match["desc"] or current.desc
            continue
        raise TopologyError(f"{label}:{number}: not ibnetdiscover output: {line[:80]!r}")
    _check_peers(fabric, label)
    return fabric


def _check_peers(fabric: Fabric, label: str) -> None:
    """A port that points at a node never described means the dump was cut short."""
    for node in fabric.nodes.values():
        for port, (peer, _) in node.ports.items():
            if peer not in fabric.nodes:
                raise TopologyError(
                    f"{label}: {node.id} port {port} leads to {peer}, which the file never "
                    "describes (truncated output?)"
                )


def _parse_ports(lines: list[str], label: str) -> Fabric:
    fabric = Fabric()
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _P_LINE.match(line)
        if not match:
            raise TopologyError(f"{label}:{number}: not ibnetdiscover -p output: {line[:80]!r}")
        node = _p_node(fabric, match["kind"], match["guid"], match["desc"])
        if match["pkind"] is None:
            continue  # an inactive port: nothing is cabled to it
        peer = _p_node(fabric, match["pkind"], match["pguid"], match["pdesc"] or "")
        node.ports[int(match["port"])] = (peer.id, int(match["pport"]))
        peer.ports[int(match["pport"])] = (node.id, int(match["port"]))
    return fabric


def _p_node(fabric: Fabric, kind: str, guid: str, desc: str) -> FabricNode:
    guid = guid.lower().removeprefix("0x").lstrip("0") or "0"
    prefix = {"SW": "S", "CA": "H", "RT": "R"}[kind]
    node = fabric.node(f"{prefix}-{guid}", _KINDS[kind], guid)
    node.desc = node.desc or desc
    return node

"""Parse ibnetdiscover output: the default topology format and the `-p` port report.

Both become a Fabric: nodes (switches and channel adapters) keyed by an id, each with
its description and its cabled ports.

The default format is read in two steps so that a 16k-node, 8-rail fabric (1.5 million
lines) parses in a fraction of a second: one scan finds every node's header line (id and
description) and checks that every other line is one ibnetdiscover writes; a node's
port lines are parsed when its ports are first asked for, which the tree builder does
only for one rail's HCAs and the switches above them. So a malformed port line, or a
port leading to a node the dump never describes (cut short), is reported when that
node is read.
"""

import re
from dataclasses import dataclass, field

from kiln.topology.model import TopologyError

# Default format -----------------------------------------------------------------
# Every pattern starts with a literal "\n" (the text is read with one prepended), which
# lets the regex engine jump from line start to line start at C speed.
_HEADER = re.compile(
    r'\n(?:(Switch|Ca|Rt)[ \t]+\d+[ \t]+"([SHR]-[0-9a-fA-F]+)"(?:[ \t]*#[ \t]*"([^"]*)")?'
    r"[^\n]*|(?:Switch|Ca|Rt)[ \t])"  # the second branch: a header line gone wrong
)
# A line that is none of: port, comment, blank, a node's attribute lines, a header.
_STRANGE_LINE = re.compile(
    r"\n(?!\[|#|\n|$|vendid=|devid=|sysimgguid=|switchguid=|caguid=|rtguid=|"
    r"Switch[ \t]|Ca[ \t]|Rt[ \t])"
)
# [port](port guid) "peer id"[peer port]; _PEER reads only the id, which is cheaper.
_PORT_FORM = r'\n\[{}\](?:\([0-9a-fA-F]+\))?[ \t]+"([SHR]-[0-9a-f]+)"\[{}\]'
_PORT_LINE = re.compile(_PORT_FORM.format(r"(\d+)", r"(\d+)"))
_PEER = re.compile(_PORT_FORM.format(r"\d+", r"\d+"))
# ibnetdiscover prints ids in lowercase hex; a hand-edited file may not.
_UPPER_HEX_ID = re.compile(r'(?<=")[SHR]-[0-9a-fA-F]*[A-F][0-9a-fA-F]*(?=")')

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

Ports = dict[int, tuple[str, int]]  # port -> (peer id, peer port)


class FabricNode:
    """A switch, channel adapter or router: id like S-0002c903..., kind, description."""

    __slots__ = ("_peers", "_ports", "_source", "_spans", "desc", "id", "kind")

    def __init__(
        self, node_id: str, kind: str, desc: str = "", source: "_Source | None" = None
    ) -> None:
        self.id = node_id
        self.kind = kind  # switch, ca or router
        self.desc = desc
        self._source = source  # where its port lines are, if not read yet
        self._spans: tuple[tuple[int, int], ...] = ()  # its port lines in the source
        self._ports: Ports | None = None if source else {}
        self._peers: set[str] | None = None

    @property
    def guid(self) -> str:
        return self.id[2:].lstrip("0") or "0"

    @property
    def ports(self) -> Ports:
        """port -> (peer id, peer port)."""
        if self._ports is None:
            assert self._source is not None
            self._ports = self._source.ports(self)
        return self._ports

    def peers(self) -> set[str]:
        """Ids of the nodes cabled to this one; cheaper than `ports` on an unread node."""
        if self._peers is None:
            if self._ports is None:
                assert self._source is not None
                self._peers = self._source.peers(self)
            else:
                self._peers = {peer for peer, _ in self._ports.values()}
        return self._peers

    def cabled_to_hca(self) -> bool:
        if self._ports is None and self._peers is None:
            assert self._source is not None
            return self._source.mentions_hca(self)
        return any(peer.startswith("H-") for peer in self.peers())


@dataclass
class Fabric:
    nodes: dict[str, FabricNode] = field(default_factory=dict)

    def node(self, node_id: str, kind: str) -> FabricNode:
        found = self.nodes.get(node_id)
        if found is None:
            found = self.nodes[node_id] = FabricNode(node_id, kind)
        return found

    def merge(self, other: "Fabric") -> None:
        for node_id, node in other.nodes.items():
            mine = self.nodes.setdefault(node_id, node)
            if mine is not node:
                mine.ports.update(node.ports)
                mine.desc = mine.desc or node.desc


def parse(text: str, label: str = "ibnetdiscover") -> Fabric:
    """Parse either format (detected from the content); errors name the line."""
    head = text[:20000].splitlines()[:50]
    if any(_P_LINE.match(line) for line in head if line.strip()):
        fabric = _parse_ports(text.splitlines(), label)
    else:
        fabric = _parse_default(text, label)
    if not any(n.kind == "switch" for n in fabric.nodes.values()):
        raise TopologyError(f"{label}: no switches found; is this ibnetdiscover output?")
    return fabric


class _Source:
    """One file's text, "\\n"-prefixed, kept for reading port lines on demand."""

    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label
        self.nodes: dict[str, FabricNode] = {}  # a port leading elsewhere: a cut dump

    def error(self, at: int) -> TopologyError:
        """Names the line that starts after the newline at offset `at`."""
        number = self.text.count("\n", 0, at + 1)
        line = self.text[at + 1 :].split("\n", 1)[0].strip()
        return TopologyError(f"{self.label}:{number}: not ibnetdiscover output: {line[:80]!r}")

    def ports(self, node: FabricNode) -> Ports:
        ports: Ports = {}
        for start, end in node._spans:
            for port, peer, peer_port in self._port_lines(start, end, _PORT_LINE):
                ports[int(port)] = (peer, int(peer_port))
        self._check_described(node, {peer for peer, _ in ports.values()})
        return ports

    def peers(self, node: FabricNode) -> set[str]:
        peers: set[str] = set()
        for start, end in node._spans:
            peers.update(self._port_lines(start, end, _PEER))
        self._check_described(node, peers)
        return peers

    def mentions_hca(self, node: FabricNode) -> bool:
        return any(self.text.find('"H-', start, end) != -1 for start, end in node._spans)

    def _port_lines(self, start: int, end: int, pattern: re.Pattern[str]) -> list:
        """`pattern`'s matches in a node's port lines, which must all match."""
        region = self.text[start:end]
        found = pattern.findall(region)
        if len(found) != region.count("\n["):
            region = _UPPER_HEX_ID.sub(lambda m: _lower_hex(m[0]), region)
            found = pattern.findall(region)
            if len(found) != region.count("\n["):
                raise self._bad_port_line(start, region)
        return found

    def _check_described(self, node: FabricNode, peers: set[str]) -> None:
        if missing := [peer for peer in peers if peer not in self.nodes]:
            raise TopologyError(
                f"{self.label}: {node.id} is cabled to {min(missing)}, which the file never "
                "describes (truncated output?)"
            )

    def _bad_port_line(self, start: int, region: str) -> TopologyError:
        at = region.find("\n[")
        while at != -1 and _PORT_LINE.match(region, at):
            at = region.find("\n[", at + 1)
        return self.error(start + at)


def _parse_default(text: str, label: str) -> Fabric:
    source = _Source("\n" + text, label)
    if _STRANGE_LINE.search(source.text):
        # A paste with indented or CRLF lines: strip them, which keeps their numbers.
        source.text = "\n" + "\n".join(line.strip() for line in text.splitlines())
        if strange := _STRANGE_LINE.search(source.text):
            raise source.error(strange.start())
    nodes = source.nodes
    node: FabricNode | None = None
    start = 0
    for header in _HEADER.finditer(source.text):
        kind, node_id, desc = header.groups()
        if node is None:
            if (stray := source.text.find("\n[", 0, header.start())) != -1:
                raise source.error(stray)  # a port line before any node
        else:
            node._spans += ((start, header.start()),)
        if kind is None:
            raise source.error(header.start())
        if not node_id[2:].islower():
            node_id = _lower_hex(node_id)
        node = nodes.get(node_id)
        if node is None:
            node = nodes[node_id] = FabricNode(node_id, _KINDS[kind], desc or "", source)
        else:
            node.desc = desc or node.desc
        start = header.end()
    if node is not None:
        node._spans += ((start, len(source.text)),)
    return Fabric(dict(nodes))


def _lower_hex(node_id: str) -> str:
    return node_id[:2] + node_id[2:].lower()


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
    node = fabric.node(f"{prefix}-{guid}", _KINDS[kind])
    node.desc = node.desc or desc
    return node

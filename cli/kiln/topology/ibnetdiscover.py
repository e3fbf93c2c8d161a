"""Parse ibnetdiscover output: the default topology format and the `-p` port report.

Both become a Fabric: nodes (switches and channel adapters) keyed by an id, each with
its description and its cabled ports.

The default format is read in two regex scans so that a 16k-node, 8-rail fabric (1.5
million lines, 80 MB) parses in a fraction of a second. One reads every HCA printed the
usual way (one cabled port) into a plain tuple: there are over a hundred thousand. The
other reads every switch and router with its block of lines; a block's port lines are
parsed when its ports are first asked for, which the tree builder does only for one
rail's leaves and the switches above them. A check beforehand makes sure every line is
one ibnetdiscover writes. So a malformed port line in a switch's block, or a port
leading to a node the dump never describes (cut short), is reported when that node is
read.
"""

import re
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter

from kiln.topology.bulk import no_gc
from kiln.topology.shape import TopologyError

# Default format -----------------------------------------------------------------
# Every pattern starts with a literal "\n" (the text is read with one prepended), which
# lets the regex engine jump from line start to line start at C speed.
# Two scans find every node (one pattern with all the branches would be slower: the
# regex engine could no longer jump to "\nCa"). The first reads HCAs printed the usual
# way: header, then the one cabled port's line (the line after that is not a port line),
# as id, description, port, peer id, peer port; any other HCA header gives an empty row,
# and those are read one by one.
_PLAIN_HCAS = re.compile(
    r'\nCa[ \t]+\d+[ \t]+"(H-[0-9a-f]+)"[ \t]*#[ \t]*"([^"\n]*)"[^\n]*'
    r'\n\[(\d+)\](?:\([0-9a-fA-F]+\))?[ \t]+"([SHR]-[0-9a-f]+)"\[(\d+)\][^\n]*(?![^\n])(?!\n\[)'
    r"|\nCa"
)
# The second reads switches and routers: kind, id, description, the lines of its block;
# no id for a header line gone wrong. (Its one top-level branch keeps it fast.)
_SWITCHES = re.compile(
    r'\n(Switch|Rt)[ \t](?:[ \t]*\d+[ \t]+"([SHR]-[0-9a-fA-F]+)"(?:[ \t]*#[ \t]*"([^"\n]*)")?'
    r"[^\n]*((?:\n(?!Switch[ \t]|Ca[ \t]|Rt[ \t])[^\n]*)*)|[^\n]*)"
)
# An HCA header, read one by one when not all are plain: kind, id, description; or no
# groups, for a line that starts like one but is not.
_CA_HEADER = re.compile(
    r'\n(?:(Ca)[ \t]+\d+[ \t]+"([SHR]-[0-9a-fA-F]+)"(?:[ \t]*#[ \t]*"([^"\n]*)")?[^\n]*|Ca[ \t])'
)
_NODE_START = re.compile(r"\n(?:Switch|Ca|Rt)[ \t]")
# A line that is none of: port, comment, blank, a node's attribute lines, a header.
_STRANGE_LINE = re.compile(
    r"\n(?!\[|#|\n|$|vendid=|devid=|sysimgguid=|switchguid=|caguid=|rtguid=|"
    r"Switch[ \t]|Ca[ \t]|Rt[ \t])"
)
# [port](port guid) "peer id"[peer port]. _PEER reads only the id, which is cheaper,
# and matches every line that starts with "[", giving "" for one that is not a port line.
_PORT_LINE = re.compile(r'\n\[(\d+)\](?:\([0-9a-fA-F]+\))?[ \t]+"([SHR]-[0-9a-f]+)"\[(\d+)\]')
_PEER = re.compile(r'\n\[(?:\d+\](?:\([0-9a-fA-F]+\))?[ \t]+"([SHR]-[0-9a-f]+)"\[\d+\]|)')
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
PlainHca = tuple[str, str, str, str, str]  # id, description, port, peer id, peer port


def normal_guid(text: str) -> str:
    """A GUID as Kiln compares them: lower-case hex, no 0x, no leading zeros."""
    return text.lower().removeprefix("0x").lstrip("0") or "0"


def guid_of(node_id: str) -> str:
    """The GUID of a node id (`S-…`, `H-…`), in the form node-name maps use."""
    return normal_guid(node_id[2:])


class FabricNode:
    """A switch, channel adapter or router: id like S-0002c903..., kind, description."""

    __slots__ = ("_blocks", "_peers", "_ports", "_source", "desc", "id", "kind")

    def __init__(
        self, node_id: str, kind: str, desc: str = "", source: "_Source | None" = None
    ) -> None:
        self.id = node_id
        self.kind = kind  # switch, ca or router
        self.desc = desc
        self._source = source  # where its port lines are, if not read yet
        self._blocks: tuple[str, ...] = ()  # the lines after its header (twice if listed so)
        self._ports: Ports | None = None if source else {}
        self._peers: set[str] | None = None

    @property
    def guid(self) -> str:
        return guid_of(self.id)

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


@dataclass
class Fabric:
    """Switches, routers and unusual HCAs as nodes; plain HCAs as tuples."""

    nodes: dict[str, FabricNode] = field(default_factory=dict)
    plain_hcas: dict[str, PlainHca] = field(default_factory=dict)

    def node(self, node_id: str, kind: str) -> FabricNode:
        found = self.nodes.get(node_id)
        if found is None:
            found = self.nodes[node_id] = FabricNode(node_id, kind)
        return found

    def hcas(self) -> tuple[list[str], list[str]]:
        """Every HCA's id and description, as two lists in the same order."""
        ids = list(self.plain_hcas)
        descs = list(map(itemgetter(1), self.plain_hcas.values()))
        for node in self.nodes.values():
            if node.kind == "ca":
                ids.append(node.id)
                descs.append(node.desc)
        return ids, descs

    def switches(self) -> set[str]:
        return {node_id for node_id, node in self.nodes.items() if node.kind == "switch"}

    def peers(self, node_id: str) -> set[str]:
        """Ids of the nodes cabled to this one."""
        row = self.plain_hcas.get(node_id)
        return {row[3]} if row else self.nodes[node_id].peers()

    def merge(self, other: "Fabric") -> None:
        # A node in both dumps is read as a node in both, so that its ports can merge.
        mine = self.nodes.keys() | self.plain_hcas.keys()
        for node_id in (other.nodes.keys() | other.plain_hcas.keys()) & mine:
            self._as_node(node_id)
            other._as_node(node_id)
        for node_id, node in other.nodes.items():
            kept = self.nodes.setdefault(node_id, node)
            if kept is not node:
                kept.ports.update(node.ports)
                kept.desc = kept.desc or node.desc
        self.plain_hcas.update(other.plain_hcas)

    def _as_node(self, node_id: str) -> None:
        if row := self.plain_hcas.pop(node_id, None):
            node = self.nodes[node_id] = FabricNode(node_id, "ca", row[1])
            node.ports[int(row[2])] = (row[3], int(row[4]))


@no_gc
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
    """One file's text, kept for reading port lines on demand. The patterns find a line
    by the newline before it, so the text gets a leading one, unless its first line is a
    comment as in ibnetdiscover's own output: copying 80 MB costs 0.04 s."""

    def __init__(self, text: str, label: str) -> None:
        self.prefixed = not text.startswith(("#", "\n"))
        self.text = "\n" + text if self.prefixed else text
        self.label = label
        self.nodes: dict[str, FabricNode] = {}  # a port leading elsewhere: a cut dump
        self.plain: dict[str, PlainHca] = {}

    def error(self, at: int) -> TopologyError:
        """Names the line that starts after the newline at offset `at`."""
        number = self.text.count("\n", 0, at + 1) + (not self.prefixed)
        line = self.text[at + 1 :].split("\n", 1)[0].strip()
        return TopologyError(f"{self.label}:{number}: not ibnetdiscover output: {line[:80]!r}")

    def ports(self, node: FabricNode) -> Ports:
        ports: Ports = {}
        for block in node._blocks:
            for port, peer, peer_port in self._port_lines(block, _PORT_LINE):
                ports[int(port)] = (peer, int(peer_port))
        self._check_described(node, {peer for peer, _ in ports.values()})
        return ports

    def peers(self, node: FabricNode) -> set[str]:
        peers: set[str] = set()
        for block in node._blocks:
            found = set(_PEER.findall(block))
            if "" in found:
                found = set(self._port_lines(block, _PEER))
            peers |= found
        self._check_described(node, peers)
        return peers

    def _port_lines(self, block: str, pattern: re.Pattern[str]) -> list:
        """`pattern`'s matches in a node's port lines, which must all match."""
        found = pattern.findall(block)
        if len(found) != block.count("\n[") or "" in found:
            edited = _UPPER_HEX_ID.sub(lambda m: _lower_hex(m[0]), block)
            found = pattern.findall(edited)
            if len(found) != edited.count("\n[") or "" in found:
                raise self._bad_port_line(block)
        return found

    def _check_described(self, node: FabricNode, peers: set[str]) -> None:
        # difference() with a dict looks each of `peers` up, rather than copying the keys
        if missing := peers.difference(self.nodes).difference(self.plain):
            raise TopologyError(
                f"{self.label}: {node.id} is cabled to {min(missing)}, which the file never "
                "describes (truncated output?)"
            )

    def _bad_port_line(self, block: str) -> TopologyError:
        at = block.find("\n[")
        while at != -1 and _PORT_LINE.match(block, at):
            at = block.find("\n[", at + 1)
        return self.error(self.text.find(block) + at)


def _parse_default(text: str, label: str) -> Fabric:
    source = _Source(text, label)
    if _STRANGE_LINE.search(source.text):
        # A paste with indented or CRLF lines: strip them, which keeps their numbers.
        source = _Source("\n".join(line.strip() for line in text.splitlines()), label)
        if strange := _STRANGE_LINE.search(source.text):
            raise source.error(strange.start())
    text = source.text
    first = _NODE_START.search(text)
    if first and (stray := text.find("\n[", 0, first.start())) != -1:
        raise source.error(stray)  # a port line before any node
    rows = _PLAIN_HCAS.findall(text)
    hcas = list(compress(rows, map(itemgetter(0), rows)))
    plain = dict(zip(map(itemgetter(0), hcas), hcas, strict=True))
    if len(plain) != len(hcas):
        plain = {}  # an HCA listed twice: read every HCA as a node, merging its blocks
    source.plain = plain
    for kind, node_id, desc, block in _SWITCHES.findall(text):
        if not node_id:
            bad = next(m for m in _SWITCHES.finditer(text) if not m[2])
            raise source.error(bad.start())
        _add_node(source, kind, node_id, desc, block)
    if len(plain) != len(rows):
        _read_hcas(source, plain)  # unusual HCAs, or a bad header
    cabled = set(map(itemgetter(3), hcas))
    if missing := cabled.difference(source.nodes).difference(plain):
        row = min(row for row in plain.values() if row[3] in missing)
        raise TopologyError(
            f"{label}: {row[0]} is cabled to {row[3]}, which the file never describes "
            "(truncated output?)"
        )
    return Fabric(dict(source.nodes), dict(plain))  # merging may move entries


def _add_node(source: _Source, kind: str, node_id: str, desc: str, block: str) -> None:
    if not node_id[2:].islower():
        node_id = _lower_hex(node_id)
    node = source.nodes.get(node_id)
    if node is None:
        node = source.nodes[node_id] = FabricNode(node_id, _KINDS[kind], desc, source)
    else:
        node.desc = desc or node.desc
    node._blocks += (block,)


def _read_hcas(source: _Source, plain: dict[str, PlainHca]) -> None:
    """Nodes for the HCAs not in `plain`; a header line gone wrong names its line."""
    text = source.text
    for header in _CA_HEADER.finditer(text):
        kind, node_id, desc = header.groups()
        if kind is None:
            raise source.error(header.start())
        if node_id not in plain:
            end = found.start() if (found := _NODE_START.search(text, header.end())) else None
            _add_node(source, kind, node_id, desc or "", text[header.end() : end])


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
    guid = normal_guid(guid)
    prefix = {"SW": "S", "CA": "H", "RT": "R"}[kind]
    node = fabric.node(f"{prefix}-{guid}", _KINDS[kind])
    node.desc = node.desc or desc
    return node

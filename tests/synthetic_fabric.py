"""Synthetic rail-optimized fat trees written as ibnetdiscover output, for tests and
bench/topology.py (a test aid: not in the wheel, no command uses it): generate -> parse
-> build must give `expected()`, the whole tree.

Layout: `nodes` hosts with `rails` HCAs each (mlx5_0...). Per rail, leaves of
`per_leaf` hosts. Two levels: every leaf of every rail is cabled to each of `spines`
spine switches. Three levels: leaves are grouped in pods of `pod_leaves` per rail; each
pod has `spines` spines cabled to the pod's leaves (all rails); every spine is cabled to
each of `cores` core switches.

What real fabrics have and hand-written ones forget, each on by a field:
- `aggregation_nodes`: every Quantum switch shows its SHARP Aggregation Node as an HCA
  cabled to its last port (65 on a 64-port switch), with a `Ca` block of its own;
- `generic`: hosts whose node description was never set, `localhost HCA-1` style
  (host index -> the word), which are no host's own name;
- `islands`: separate fabrics (or a partial dump), each with its own spines and cores;
- `ufm`: a UFM server's HCA on the first leaf of rail 0, like a compute host.
"""

from dataclasses import dataclass, field

RADIX = 64  # Quantum-2 (QM9700): 64 ports; the aggregation node sits on port 65
AGGREGATION_NODE = "Mellanox Technologies Aggregation Node"
UFM_HOST = "ufm01"


@dataclass
class FatTree:
    nodes: int
    rails: int = 1
    per_leaf: int = 32
    levels: int = 2
    spines: int = 4
    pod_leaves: int = 16
    cores: int = 4
    aggregation_nodes: bool = True
    generic: dict[int, str] = field(default_factory=dict)  # host index -> e.g. "localhost"
    islands: int = 1
    ufm: bool = False
    true_leaf: dict[str, str] = field(default_factory=dict)  # host -> rail-0 leaf name

    def host(self, index: int) -> str:
        return f"gpu{index + 1:05d}"

    def compute_hosts(self) -> set[str]:
        return {self.host(i) for i in range(self.nodes) if i not in self.generic}


class _Writer:
    def __init__(self, aggregation_nodes: bool) -> None:
        self.aggregation_nodes = aggregation_nodes
        self.next_guid = 0xB83FD20300000000
        self.next_lid = 1
        self.switches: dict[str, tuple[int, int, list]] = {}  # name -> (guid, lid, ports)
        self.cas: list[tuple[str, int, int, list]] = []  # desc, guid, lid, ports

    def guid(self) -> int:
        self.next_guid += 0x10
        self.next_lid += 1
        return self.next_guid

    def switch(self, name: str) -> None:
        self.switches[name] = (self.guid(), self.next_lid, [])

    def link_ca(self, desc: str, switch: str) -> None:
        ports = self.switches[switch][2]
        ca_guid = self.guid()
        ports.append(("H", ca_guid, 1, desc, self.next_lid))
        self.cas.append((desc, ca_guid, self.next_lid, [(switch, len(ports))]))

    def link(self, a: str, b: str) -> None:
        a_guid, a_lid, a_ports = self.switches[a]
        b_guid, b_lid, b_ports = self.switches[b]
        a_ports.append(("S", b_guid, len(b_ports) + 1, b, b_lid))
        b_ports.append(("S", a_guid, len(a_ports), a, a_lid))

    def text(self) -> str:
        first = next(iter(self.cas))[1] if self.cas else 0
        out = [
            "#",
            "# Topology file: generated on Mon Nov 23 09:00:00 2026",
            "#",
            f"# Initiated from node {first:016x} port {first + 1:016x}",
            "",
        ]
        aggregation: list[tuple[int, int, str, int, int]] = []
        for name, (guid, lid, ports) in self.switches.items():
            radix = max(RADIX, len(ports))
            numbered = list(enumerate(ports, 1))
            if self.aggregation_nodes:
                # The switch's own SHARP aggregation node, GUID next to the switch's.
                an_guid, an_lid = guid + 8, self.next_lid + 1 + len(aggregation)
                numbered.append((radix + 1, ("H", an_guid, 1, AGGREGATION_NODE, an_lid)))
                aggregation.append((an_guid, an_lid, name, radix + 1, lid))
            out += [
                "vendid=0x2c9",
                "devid=0xd2f2",
                f"sysimgguid=0x{guid:x}",
                f"switchguid=0x{guid:x}({guid:x})",
                f'Switch\t{radix + self.aggregation_nodes} "S-{guid:016x}"\t\t'
                f'# "MF0;{name}:MQM9700/U1" enhanced port 0 lid {lid} lmc 0',
            ]
            for port, (kind, peer, peer_port, desc, peer_lid) in numbered:
                if kind == "H":
                    out.append(
                        f'[{port}]\t"H-{peer:016x}"[{peer_port}]({peer + 1:x}) \t\t'
                        f'# "{desc}" lid {peer_lid} 4xNDR'
                    )
                else:
                    out.append(
                        f'[{port}]\t"S-{peer:016x}"[{peer_port}]\t\t'
                        f'# "MF0;{desc}:MQM9700/U1" lid {peer_lid} 4xNDR'
                    )
            out.append("")
        for desc, guid, lid, links in self.cas:
            switch, port = links[0]
            out += self._ca(desc, guid, lid, "0x1021", switch, port)
        for guid, lid, switch, port, _ in aggregation:
            out += self._ca(AGGREGATION_NODE, guid, lid, "0xcf09", switch, port)
        return "\n".join(out)

    def _ca(self, desc: str, guid: int, lid: int, devid: str, switch: str, port: int) -> list:
        sw_guid, sw_lid, _ = self.switches[switch]
        return [
            "vendid=0x2c9",
            f"devid={devid}",
            f"sysimgguid=0x{guid:x}",
            f"caguid=0x{guid:x}",
            f'Ca\t1 "H-{guid:016x}"\t\t# "{desc}"',
            f'[1]({guid + 1:x}) \t"S-{sw_guid:016x}"[{port}]\t\t# lid {lid} lmc 0 '
            f'"MF0;{switch}:MQM9700/U1" lid {sw_lid} 4xNDR',
            "",
        ]


def _islands(tree: FatTree) -> list[tuple[str, range]]:
    """(name prefix, host indexes) per island; no prefix for a single fabric."""
    size = -(-tree.nodes // tree.islands)
    if tree.islands == 1:
        return [("", range(tree.nodes))]
    return [
        (f"i{k}-", range(k * size, min((k + 1) * size, tree.nodes))) for k in range(tree.islands)
    ]


def generate(tree: FatTree) -> str:
    w = _Writer(tree.aggregation_nodes)
    for prefix, hosts in _islands(tree):
        _island(w, tree, prefix, hosts)
    if tree.ufm:
        w.link_ca(f"{UFM_HOST} mlx5_0", f"{_islands(tree)[0][0]}leaf-r0-0000")
    return w.text()


def _island(w: _Writer, tree: FatTree, prefix: str, hosts: range) -> None:
    leaves_per_rail = -(-len(hosts) // tree.per_leaf)
    leaf = [
        [f"{prefix}leaf-r{r}-{n:04d}" for n in range(leaves_per_rail)] for r in range(tree.rails)
    ]
    for names in leaf:
        for name in names:
            w.switch(name)
    for position, index in enumerate(hosts):
        on = position // tree.per_leaf
        word = tree.generic.get(index)
        if word is None:
            tree.true_leaf[tree.host(index)] = leaf[0][on]
        for rail in range(tree.rails):
            desc = f"{word} HCA-{rail + 1}" if word else f"{tree.host(index)} mlx5_{rail}"
            w.link_ca(desc, leaf[rail][on])
    if tree.levels == 2:
        for spine in range(tree.spines):
            w.switch(name := f"{prefix}spine-{spine:02d}")
            for names in leaf:
                for child in names:
                    w.link(child, name)
        return
    pods = -(-leaves_per_rail // tree.pod_leaves)
    for pod in range(pods):
        for spine in range(tree.spines):
            w.switch(name := f"{prefix}spine-p{pod:02d}-{spine:02d}")
            for names in leaf:
                for child in names[pod * tree.pod_leaves : (pod + 1) * tree.pod_leaves]:
                    w.link(child, name)
    for core in range(tree.cores):
        w.switch(name := f"{prefix}core-{core:02d}")
        for pod in range(pods):
            for spine in range(tree.spines):
                w.link(f"{prefix}spine-p{pod:02d}-{spine:02d}", name)


def expected(tree: FatTree, root: str = "kiln-root") -> dict[str, tuple[int, set[str]]]:
    """The whole tree Kiln must build from rail 0, after `generate(tree)`: switch ->
    (level, its nodes for a leaf or its children above). Redundant spines and cores are
    merged into the first by name; islands are joined under `root`."""
    switches: dict[str, tuple[int, set[str]]] = {}
    tops = []
    for prefix, hosts in _islands(tree):
        members: dict[str, set[str]] = {}
        for index in hosts:
            if (host := tree.host(index)) in tree.true_leaf:
                members.setdefault(tree.true_leaf[host], set()).add(host)
        for name, nodes in members.items():
            switches[name] = (0, nodes)
        if tree.levels == 2:
            top = f"{prefix}spine-00"
            switches[top] = (1, set(members))
        else:
            spines = {}
            for name in members:
                pod = int(name.rsplit("-", 1)[1]) // tree.pod_leaves
                spines.setdefault(f"{prefix}spine-p{pod:02d}-00", set()).add(name)
            for name, children in spines.items():
                switches[name] = (1, children)
            top = f"{prefix}core-00"
            switches[top] = (2, set(spines))
        tops.append(top)
    if len(tops) > 1:
        switches[root] = (tree.levels, set(tops))
    return switches

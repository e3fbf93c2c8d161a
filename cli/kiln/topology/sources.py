"""Topology sources other than the fabric: inventory labels, NVLink domains, and a
file written by hand."""

import re
from collections import defaultdict
from typing import Any

from kiln import formats, hostlist, yaml_input
from kiln.topology.shape import Block, Switch, Topology, TopologyError, safe_name

LABEL_VARIABLE = "topology_path"


def from_labels(paths: dict[str, Any], source: str = "inventory labels") -> Topology:
    """host -> [top switch, ..., leaf switch], e.g. topology_path: [spine1, leaf3]."""
    topology = Topology(source=source)
    leaf_of: dict[str, str] = {}
    for host, path in sorted(paths.items()):
        if not isinstance(path, list) or not path or not all(isinstance(p, str) for p in path):
            raise TopologyError(
                f"host {host}: {LABEL_VARIABLE} must be a non-empty list of switch names, "
                f"top first (e.g. [spine1, leaf3]), got {path!r}"
            )
        names = [safe_name(p, p) for p in path]
        depth = len(names)
        for index, name in enumerate(names):
            level = depth - 1 - index
            switch = topology.switches.setdefault(name, Switch(name, level))
            if switch.level != level:
                raise TopologyError(
                    f"host {host}: switch {name} is at level {level} here but at level "
                    f"{switch.level} for other hosts; paths must have one length per tree"
                )
            if index + 1 < depth:
                switch.children.add(names[index + 1])
        topology.switches[names[-1]].nodes.add(host)
        leaf_of[host] = names[-1]
    return topology


# nvidia-smi's fabric.clusterUuid is a UUID and fabric.cliqueId a number, or N/A where
# the GPU has no NVLink fabric: nothing else is taken, so no text rides along into a name.
_NOT_APPLICABLE = r"\[?(?i:N/A)\]?"
_UUID = r"[0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)*"  # hex groups, as nvidia-smi prints a UUID
_NVLINK = re.compile(
    rf"\s*(?P<host>[^\s:,]+)\s*[:,]\s*(?P<uuid>{_UUID}|{_NOT_APPLICABLE})"
    rf"\s*,\s*(?P<clique>[0-9]+|{_NOT_APPLICABLE})\s*"
)


def read_nvlink(text: str, label: str) -> dict[str, tuple[str, str] | None]:
    """Each host's NVLink domain (clusterUuid, cliqueId), None where its GPUs report
    N/A. Input: one line per GPU, `HOST: UUID, CLIQUE` (as a parallel shell prints
    `nvidia-smi --query-gpu=fabric.clusterUuid,fabric.cliqueId --format=csv,noheader`)
    or `HOST,UUID,CLIQUE`. The block topology and IMEX's domains both read it here."""
    domains: dict[str, set[tuple[str, str]]] = defaultdict(set)
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        match = _NVLINK.fullmatch(raw)
        if not match:
            raise TopologyError(
                f"{label}:{number}: expected 'HOST: clusterUuid, cliqueId', "
                f"got {raw.strip()[:80]!r}"
            )
        if not formats.is_name(match["host"]):
            raise TopologyError(
                f"{label}:{number}: host {match['host']!r} is not a Slurm node name: "
                f"names {formats.NAME_RULE}"
            )
        domains[match["host"]].add((match["uuid"], match["clique"]))
        first_line.setdefault(match["host"], number)
    hosts: dict[str, tuple[str, str] | None] = {}
    for host, seen in sorted(domains.items()):
        if len(seen) > 1:
            listed = "; ".join(f"{u}/{c}" for u, c in sorted(seen))
            raise TopologyError(
                f"{label}:{first_line[host]}: the GPUs of {host} report "
                f"different NVLink domains ({listed})"
            )
        domain = next(iter(seen))
        hosts[host] = None if any(re.fullmatch(_NOT_APPLICABLE, v) for v in domain) else domain
    return hosts


def from_nvlink(text: str, label: str, block_size: int | None = None) -> Topology:
    """Blocks of nodes sharing an NVLink domain (clusterUuid + cliqueId), from the
    lines read_nvlink reads."""
    topology = Topology(source=f"nvlink {label}")
    members: dict[tuple[str, str], set[str]] = defaultdict(set)
    no_fabric = []
    for host, domain in read_nvlink(text, label).items():
        if domain is None:
            no_fabric.append(host)
        else:
            members[domain].add(host)
    if no_fabric:
        topology.warnings.append(f"no NVLink domain reported by {hostlist.compress(no_fabric)}")
    ordered = sorted(members.values(), key=lambda hosts: min(hosts))
    for index, hosts in enumerate(ordered, 1):
        name = f"nvl{index:02d}"
        topology.blocks[name] = Block(name, hosts)
    if topology.blocks:
        base = block_size or max(len(b.nodes) for b in topology.blocks.values())
        topology.block_sizes = [base]
    return topology


def from_text(text: str, label: str) -> Topology:
    """A hand-written topology: Slurm's topology.conf tree/block form, or YAML
    `{switches: {NAME: {nodes: HOSTLIST} | {switches: [NAME...]}}}`."""
    if re.search(r"^\s*(SwitchName|BlockName)=", text, re.MULTILINE):
        return _from_conf(text, label)
    data = yaml_input.parse(text, label)
    if not isinstance(data, dict) or not isinstance(data.get("switches"), dict):
        raise TopologyError(f"{label}: expected topology.conf lines or a YAML 'switches:' mapping")
    lines = []
    for name, body in data["switches"].items():
        body = body or {}
        # Made into topology.conf lines below: a line break would make another line.
        for text in [name, body.get("nodes", ""), *(body.get("switches") or [])]:
            if why := formats.word(text) if text != "" else "":
                raise TopologyError(f"{label}: switch {name!r}: {str(text)!r} {why}")
        if "nodes" in body:
            lines.append(f"SwitchName={name} Nodes={body['nodes']}")
        else:
            children = body.get("switches") or []
            lines.append(f"SwitchName={name} Switches={','.join(children)}")
    return _from_conf("\n".join(lines), label)


def _from_conf(text: str, label: str) -> Topology:
    topology = Topology(source=label)
    children: dict[str, list[str]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        try:
            if "BlockName" in fields:
                topology.blocks[fields["BlockName"]] = Block(
                    fields["BlockName"], set(hostlist.expand(fields.get("Nodes", "")))
                )
            elif "BlockSizes" in fields:
                sizes = fields["BlockSizes"].split(",")
                if not all(re.fullmatch(r"[0-9]+", size) for size in sizes):  # not "٣"
                    raise ValueError(f"BlockSizes={fields['BlockSizes']}: expected numbers")
                topology.block_sizes = [int(size) for size in sizes]
            elif "SwitchName" in fields:
                name = fields["SwitchName"]
                switch = Switch(name, 0, nodes=set(hostlist.expand(fields.get("Nodes", ""))))
                topology.switches[name] = switch
                children[name] = hostlist.expand(fields.get("Switches", ""))
            else:
                raise ValueError("expected SwitchName=, BlockName= or BlockSizes=")
        except ValueError as exc:
            raise TopologyError(f"{label}:{number}: {exc}") from None
    for name, kids in children.items():
        unknown = [k for k in kids if k not in topology.switches]
        if unknown:
            raise TopologyError(
                f"{label}: switch {name} lists unknown switches {', '.join(unknown)}"
            )
        topology.switches[name].children = set(kids)
    _assign_levels(topology)
    return topology


def _assign_levels(topology: Topology) -> None:
    def level(name: str, trail: tuple[str, ...]) -> int:
        if name in trail:
            raise TopologyError(f"{topology.source}: switch {name} contains itself")
        switch = topology.switches[name]
        if not switch.children:
            return 0
        return 1 + max(level(c, (*trail, name)) for c in switch.children)

    for name, switch in topology.switches.items():
        switch.level = level(name, ())

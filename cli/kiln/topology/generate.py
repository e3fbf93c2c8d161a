"""From a source and options to a checked Topology: what `kiln topology` and the
slurm role (through kiln.topology.for_slurm) call."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln import hostlist
from kiln.files import read_text
from kiln.topology import fabric_tree, ibnetdiscover, policies, sources
from kiln.topology.shape import Topology, TopologyError

SOURCES = ("ibnetdiscover", "labels", "nvlink", "file")


@dataclass
class Request:
    """Input comes from files, or already read (`texts`: label, text pairs; `labels`:
    host -> path, from an inventory or Ansible's facts). The node set is `nodes` (the
    inventory's slurm_compute); without it, every host in the input."""

    source: str
    files: list[Path] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)
    labels: dict[str, Any] | None = None
    labels_from: str = "inventory labels"  # where the labels were read, for messages
    nodes: set[str] | None = None
    hca: list[str] = field(default_factory=list)
    node_name_map: Path | None = None
    block_size: int | None = None
    missing: policies.MissingPolicy = policies.MissingPolicy.FAIL
    disconnected: policies.DisconnectedPolicy = policies.DisconnectedPolicy.ROOT


def generate(request: Request) -> Topology:
    nodes = request.nodes
    if request.source == "labels":
        if request.labels is None:
            raise TopologyError("the labels source needs the nodes' labels (an inventory)")
        topology = from_labels(request.labels, nodes, request.missing, request.labels_from)
    else:
        topology = _from_input(request, _inputs(request))
    policies.apply(topology, nodes, request.missing, request.disconnected)
    return topology


def from_labels(
    labels: dict[str, Any], nodes: set[str] | None, missing: policies.MissingPolicy, source: str
) -> Topology:
    """Nodes without a label are an error, unless the policy places them under the
    catch-all switch."""
    labeled = {h: p for h, p in labels.items() if p not in (None, "", [])}
    unlabeled = sorted((nodes or set()) - set(labeled))
    if unlabeled and missing is policies.MissingPolicy.FAIL:
        raise TopologyError(
            f"{len(unlabeled)} compute nodes have no {sources.LABEL_VARIABLE} label: "
            f"{hostlist.compress(unlabeled)}"
        )
    return sources.from_labels(labeled, source=source)


def _inputs(request: Request) -> list[tuple[str, str]]:
    inputs = list(request.texts) + [(str(f), read_text(f, errors="replace")) for f in request.files]
    if not inputs:
        raise TopologyError(f"the {request.source} source needs at least one input file")
    return inputs


def _from_input(request: Request, inputs: list[tuple[str, str]]) -> Topology:
    label = ", ".join(name for name, _ in inputs)
    if request.source == "ibnetdiscover":
        selection = fabric_tree.Selection(hca_patterns=request.hca)
        if request.node_name_map:
            selection.name_map = fabric_tree.read_name_map(request.node_name_map)
        fabric = ibnetdiscover.Fabric()
        for name, text in inputs:
            fabric.merge(ibnetdiscover.parse(text, name))
        return fabric_tree.build(fabric, selection, source=label)
    if request.source == "nvlink":
        text = "\n".join(text for _, text in inputs)
        return sources.from_nvlink(text, inputs[0][0], request.block_size)
    if request.source == "file":
        return sources.from_text(inputs[0][1], inputs[0][0])
    raise TopologyError(f"unknown source {request.source!r} (one of {', '.join(SOURCES)})")


def describe(topology: Topology) -> list[str]:
    """The short summary: shape, then notes and warnings, one line each."""
    if topology.is_block:
        sizes = ", ".join(
            f"{b.name}={len(b.nodes)}"
            for b in sorted(topology.blocks.values(), key=lambda b: b.name)
        )
        count = len(topology.nodes())
        lines = [f"topology: {len(topology.blocks)} blocks ({sizes}), {count} nodes"]
    else:
        leaves = topology.leaves()
        per_leaf = sorted({len(s.nodes) for s in leaves})
        lines = [
            f"topology: {topology.levels()} levels, {len(topology.switches)} switches, "
            f"{len(leaves)} leaves, {len(topology.nodes())} nodes, "
            f"{'-'.join(map(str, (per_leaf[0], per_leaf[-1])))} nodes per leaf"
        ]
    lines += [f"note: {note}" for note in topology.notes]
    lines += [f"warning: {warning}" for warning in topology.warnings]
    return lines

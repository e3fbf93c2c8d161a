"""From a source and options to a checked Topology: what `kiln topology` and the
role's filter plugin call."""

from dataclasses import dataclass, field
from pathlib import Path

from kiln import inventory
from kiln.topology import checks, fabric_tree, ibnetdiscover, sources
from kiln.topology.model import Topology, TopologyError

SOURCES = ("ibnetdiscover", "labels", "nvlink", "file")


@dataclass
class Request:
    source: str
    files: list[Path] = field(default_factory=list)
    inventory_path: Path | None = None
    hca: list[str] = field(default_factory=list)
    node_name_map: Path | None = None
    block_size: int | None = None
    missing: checks.MissingPolicy = checks.MissingPolicy.FAIL


def generate(request: Request) -> Topology:
    spec = inventory.load(request.inventory_path) if request.inventory_path else None
    if request.source != "labels" and not request.files:
        raise TopologyError(f"--from {request.source} needs at least one FILE")
    if request.source == "ibnetdiscover":
        selection = fabric_tree.Selection(hca_patterns=request.hca)
        if request.node_name_map:
            selection.name_map = fabric_tree.read_name_map(request.node_name_map)
        topology = fabric_tree.build(
            ibnetdiscover.parse_files(request.files),
            selection,
            source=", ".join(str(f) for f in request.files),
        )
    elif request.source == "labels":
        if spec is None:
            raise TopologyError("--from labels reads the inventory: give -i INVENTORY")
        topology = _from_inventory_labels(spec)
    elif request.source == "nvlink":
        text = "\n".join(_read(f) for f in request.files)
        topology = sources.from_nvlink(text, str(request.files[0]), request.block_size)
    elif request.source == "file":
        topology = sources.from_file(request.files[0])
    else:
        raise TopologyError(f"unknown source {request.source!r} (one of {', '.join(SOURCES)})")
    nodes = set(spec.group("slurm_compute")) if spec else None
    checks.apply(topology, nodes, request.missing)
    return topology


def _from_inventory_labels(spec: inventory.ClusterSpec) -> Topology:
    compute = spec.group("slurm_compute")
    unlabeled = [h for h in compute if sources.LABEL_VARIABLE not in spec.hosts[h].vars]
    if unlabeled:
        from kiln import hostlist

        raise TopologyError(
            f"{len(unlabeled)} compute nodes have no {sources.LABEL_VARIABLE} label: "
            f"{hostlist.compress(unlabeled)}"
        )
    paths = {h: spec.hosts[h].vars[sources.LABEL_VARIABLE] for h in compute}
    return sources.from_labels(paths, source=f"labels in {spec.path}")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read: {exc.strerror}") from None

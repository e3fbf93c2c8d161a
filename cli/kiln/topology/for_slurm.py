"""The topology file the slurm role writes, from what Ansible collected: the
file's name and content, the TopologyPlugin it needs, and the summary to show."""

from pathlib import Path
from typing import Any

from kiln.topology import policies, writers
from kiln.topology.generate import SOURCES, Request, describe, generate
from kiln.topology.shape import TopologyError

FILE_OF = {"tree": "topology.conf", "block": "topology.conf", "yaml": "topology.yaml"}
# topology.yaml names its plugin itself; slurm.conf's TopologyPlugin is for the .conf forms.
PLUGIN_OF = {"tree": "topology/tree", "block": "topology/block", "yaml": ""}
FIRST_RELEASE = {"tree": (0, 0), "block": (23, 11), "yaml": (25, 5)}


def fmt_for(source: str, fmt: str) -> str:
    if fmt == "auto":
        return "block" if source == "nvlink" else "tree"
    if fmt not in FILE_OF:
        raise TopologyError(f"slurm_topology_format {fmt!r}: expected auto, tree, block or yaml")
    return fmt


def render(
    source: str,
    fmt: str,
    version: tuple[int, int] | None,
    nodes: list[str],
    *,
    labels: dict[str, Any] | None = None,
    texts: list[tuple[str, str]] | None = None,
    files: list[str] | None = None,
    hca: list[str] | None = None,
    node_name_map: str = "",
    block_size: int = 0,
    missing: str = "fail",
    disconnected: str = "root",
    base_dir: str = ".",
) -> dict[str, Any]:
    """version None: the installed Slurm is not known yet (the CLI's pre-flight check).
    Relative paths are relative to base_dir, the inventory's directory."""
    if source not in SOURCES:
        raise TopologyError(
            f"slurm_topology_source {source!r}: expected none or one of {', '.join(SOURCES)}"
        )
    fmt = fmt_for(source, fmt)
    if version is not None and version < FIRST_RELEASE[fmt]:
        first = ".".join(
            f"{part:02d}" if i else str(part) for i, part in enumerate(FIRST_RELEASE[fmt])
        )
        raise TopologyError(
            f"slurm_topology_format {fmt} needs Slurm {first} or later; this cluster runs "
            f"{version[0]}.{version[1]:02d}"
        )
    request = Request(
        source=source,
        files=[Path(base_dir, f) for f in files or []],
        texts=texts or [],
        labels=labels,
        nodes=set(nodes),
        hca=list(hca or []),
        node_name_map=Path(base_dir, node_name_map) if node_name_map else None,
        block_size=int(block_size) or None,
        missing=policies.MissingPolicy(missing),
        disconnected=policies.DisconnectedPolicy(disconnected),
    )
    try:
        topology = generate(request)
    except policies.PolicyError as exc:  # the inventory variable that holds the policy
        raise TopologyError(
            f"{exc.message}; {exc.remedy}: slurm_topology_{exc.policy}: {exc.value} in the "
            "inventory"
        ) from None
    return {
        "file": FILE_OF[fmt],
        "content": writers.render(topology, fmt),
        "plugin": PLUGIN_OF[fmt],
        "summary": describe(topology),
    }


def preflight(
    settings: dict[str, Any], labels: dict[str, Any], nodes: list[str], base_dir: str
) -> None:
    """What can be checked before any task runs: labels, and files on the control node.
    A fabric read live or NVLink domains are known only on the nodes."""
    source = settings.get("source", "none")
    if source == "none" or (source == "ibnetdiscover" and not settings.get("files")):
        return
    if source == "nvlink":
        return
    render(
        source,
        settings.get("format", "auto"),
        None,
        nodes,
        labels=labels if source == "labels" else None,
        files=settings.get("files"),
        hca=settings.get("hca"),
        node_name_map=settings.get("node_name_map", ""),
        block_size=settings.get("block_size", 0),
        missing=settings.get("missing", "fail"),
        disconnected=settings.get("disconnected", "root"),
        base_dir=base_dir,
    )

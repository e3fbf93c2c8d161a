"""`kiln topology generate | show`: Slurm topology from a fabric, labels, NVLink or a file."""

from pathlib import Path

import click

from kiln import files, inventory
from kiln.commands import Whole, stack
from kiln.errors import InputError
from kiln.printable import printable
from kiln.topology import policies
from kiln.topology.generate import SOURCES, Request, describe, generate
from kiln.topology.shape import TopologyError
from kiln.topology.sources import LABEL_VARIABLE
from kiln.topology.writers import FORMATS, render

source_options = stack(
    click.option(
        "--from",
        "source",
        type=click.Choice(SOURCES),
        required=True,
        help="Where the topology comes from.",
    ),
    click.argument("files", nargs=-1, type=click.Path(path_type=Path)),
    click.option(
        "-i",
        "--inventory",
        "inventory_path",
        type=click.Path(path_type=Path),
        help="Use this inventory's Slurm compute nodes as the node set.",
    ),
    click.option(
        "--hca",
        multiple=True,
        help="HCA device pattern of the compute fabric (e.g. 'mlx5_[0-7]'); "
        "the first matching device is the rail the tree is built from.",
    ),
    click.option(
        "--node-name-map",
        type=click.Path(path_type=Path),
        help='ibnetdiscover node-name map (0xGUID "name" lines).',
    ),
    click.option(
        "--block-size",
        type=Whole(min=1),
        help="Base block size (nvlink; default: largest).",
    ),
    click.option(
        "--missing",
        type=click.Choice([p.value for p in policies.MissingPolicy]),
        default="fail",
        show_default=True,
        help="Nodes of the inventory absent from the source: fail, or place them "
        f"under '{policies.CATCH_ALL}'.",
    ),
    click.option(
        "--disconnected",
        type=click.Choice([p.value for p in policies.DisconnectedPolicy]),
        default="root",
        show_default=True,
        help="A tree with several top switches, none above every node (a partial dump, "
        f"two fabrics): join them under '{policies.ROOT}', or fail.",
    ),
)


def _request(
    source, files, inventory_path, hca, node_name_map, block_size, missing, disconnected
) -> Request:
    request = Request(
        source=source,
        files=list(files),
        hca=list(hca),
        node_name_map=node_name_map,
        block_size=block_size,
        missing=policies.MissingPolicy(missing),
        disconnected=policies.DisconnectedPolicy(disconnected),
    )
    if source == "labels" and inventory_path is None:
        raise InputError("--from labels reads the inventory: give -i INVENTORY")
    if not files and source != "labels":
        raise InputError(f"--from {source} needs at least one FILE")
    if inventory_path is not None:
        spec = inventory.load(inventory_path)
        request.nodes = set(spec.group("slurm_compute"))
        if source == "labels":
            request.labels = {h: spec.hosts[h].vars.get(LABEL_VARIABLE) for h in request.nodes}
            request.labels_from = f"labels in {spec.path}"
    return request


def _generate(request: Request):
    try:
        return generate(request)
    except policies.PolicyError as exc:  # the option that holds the policy
        raise TopologyError(f"{exc.message}; {exc.remedy}: --{exc.policy} {exc.value}") from None


@click.group()
def topology() -> None:
    """Generate Slurm topology (topology.conf / topology.yaml)."""


@topology.command("generate")
@source_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="tree", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write here, not stdout.")
def generate_command(fmt: str, output: Path | None, **options) -> None:
    """Print (or write) the topology, with a summary on stderr."""
    if output:
        files.output_path(output)
    topo = _generate(_request(**options))
    try:
        text = render(topo, fmt)
    except TopologyError as exc:
        if topo.is_block and fmt == "tree":
            raise InputError(f"{exc.message}: use --format block") from None
        raise
    if output:
        files.write_output(output, text)
    else:
        click.echo(text, nl=False)
    _summary(topo)


@topology.command("show")
@source_options
def show(**options) -> None:
    """Draw the topology as a tree in the terminal."""
    from rich.console import Console
    from rich.tree import Tree

    from kiln import hostlist
    from kiln.run.display import shown  # names from a dump: no markup, no control character

    topo = _generate(_request(**options))
    root = Tree(f"[bold]{shown(topo.source)}")
    if topo.is_block:
        for block in sorted(topo.blocks.values(), key=lambda b: b.name):
            root.add(shown(f"{block.name}: {hostlist.compress(block.nodes)} ({len(block.nodes)})"))
    else:

        def add(parent, name):
            switch = topo.switches[name]
            if switch.nodes:
                parent.add(
                    shown(f"{name}: {hostlist.compress(switch.nodes)} ({len(switch.nodes)})")
                )
                return
            branch = parent.add(f"[bold]{shown(name)}")
            for child in sorted(switch.children):
                add(branch, child)

        top = topo.levels() - 1
        for switch in sorted(topo.switches.values(), key=lambda s: s.name):
            if switch.level == top:
                add(root, switch.name)
    Console(highlight=False).print(root)
    _summary(topo)


def _summary(topo) -> None:
    for line in describe(topo):  # names from a fabric dump: control characters escaped
        click.echo(printable(line), err=True)

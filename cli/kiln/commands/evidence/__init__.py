"""`kiln evidence NODE`: collect the node's evidence bundle now."""

from pathlib import Path

import click

from kiln import inventory
from kiln.commands import inventory_option
from kiln.run import display


@click.command()
@inventory_option
@click.argument("node")
def evidence(inventory_path: Path | None, node: str) -> None:
    """Collect NODE's evidence bundle (nvidia-smi, NVIDIA's bug report, the kernel's XID
    lines, kiln-health's and DCGM's JSON, the node's records, the serials: one tarball
    with a manifest) into the run's directory, and print its path.

    Exit 0, 2 when NODE is not a compute node of the inventory, 4 when the node brought
    no bundle."""
    from kiln.commands.evidence import bundle as library

    spec = inventory.load(inventory_path)
    [chosen] = spec.compute_nodes([node], "collect evidence from")
    click.echo(str(library.collect(spec, chosen, display.for_output(False))))

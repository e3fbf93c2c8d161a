"""`kiln nccl show`: the NCCL settings in effect on each compute node."""

import sys
from pathlib import Path

import click

from kiln import inventory
from kiln.commands import inventory_option
from kiln.errors import InputError
from kiln.printable import printable
from kiln.run import display
from kiln.validation.verdicts import Verdict, exit_code


@click.group()
def nccl() -> None:
    """NCCL's site settings on the compute nodes."""


@nccl.command()
@inventory_option
@click.option("--node", help="Only this compute node.")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def show(inventory_path: Path | None, node: str | None, json_mode: bool) -> None:
    """Print each node's NCCL settings and where each came from (preset, override, file,
    environment); flag groups whose nodes differ.

    Exit 0 when every node was read, 3 when one could not be (not checked)."""
    from kiln.commands.nccl import in_effect

    spec = inventory.load(inventory_path)
    compute = spec.group("slurm_compute")
    if node is not None and node not in compute:
        raise InputError(f"--node {node}: not a compute node of {spec.path}")
    nodes = [node] if node else compute
    shown = in_effect.show(spec, nodes, display.for_output(json_mode))
    if json_mode:
        display.emit_json(shown.to_json())
    else:
        _print(shown)
    unread = any(n.error for n in shown.nodes)
    sys.exit(int(exit_code(Verdict.UNCHECKED if unread else Verdict.PASS)))


def _print(shown) -> None:
    # Settings, notes and errors are what the nodes said: control characters escaped.
    for node in shown.nodes:
        title = f"preset {node.preset}" if node.preset else node.note or node.error
        click.echo(printable(f"{node.node}: {title}"))
        if node.error:
            click.echo(printable(f"  error: {node.error}"))
            continue
        if node.note and node.preset:
            click.echo(printable(f"  {node.note}"))
        settings = [(printable(f"{e.key}={e.value}"), printable(e.source)) for e in node.settings]
        width = max((len(setting) for setting, _ in settings), default=0)
        for setting, source in settings:
            click.echo(f"  {setting:<{width}}  ({source})")
    if shown.differences:
        for line in shown.differences:
            click.echo(printable(f"differs: {line}"))
    else:
        click.echo("every group's nodes have the same settings")

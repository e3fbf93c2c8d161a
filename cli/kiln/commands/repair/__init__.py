"""`kiln repair`: the repair loop's breaker, the nodes in repair, its history, and
closing the breaker (docs/health.md, "Repair")."""

import click

from kiln import inventory
from kiln.commands import inventory_option
from kiln.errors import InputError
from kiln.printable import printable
from kiln.run import display


@click.group()
def repair() -> None:
    """The repair loop on the first controller: its breaker, its nodes, its history.

    Exit 0, 4 when the controller's records could not be read, 2 for bad input."""


def _breaker_line(status) -> str:
    from kiln.commands.repair.loop_state import stamp

    breaker = status.breaker
    if not breaker.open:
        return "breaker: closed"
    since = f" since {stamp(breaker.since)}" if breaker.since is not None else ""
    return f"breaker: OPEN{since}: {breaker.reason}"


@repair.command()
@inventory_option
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def status(inventory_path, json_mode: bool) -> None:
    """Whether the breaker is open and why; the nodes in repair and their last step."""
    from kiln.commands.repair import loop_state as library

    found = library.read(inventory.load(inventory_path), display.for_output(json_mode))
    if json_mode:
        display.emit_json(found.to_json())
        return
    click.echo(printable(_breaker_line(found)))
    if found.slurm_error:
        click.echo(printable(f"warning: Slurm's node states not read: {found.slurm_error}"))
    if not found.nodes:
        click.echo("nodes in repair: none")
    for node in found.nodes:
        step = f"{node.step} {node.outcome} at {node.since}" if node.step else "no action yet"
        click.echo(printable(f"{node.node} {node.state}: {step} ({node.reason})"))


@repair.command()
@inventory_option
@click.argument("node", required=False)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON array.")
def history(inventory_path, node: str | None, json_mode: bool) -> None:
    """Every action of the repair loop, oldest first; NODE: that node's only."""
    import json

    from kiln.commands.repair import loop_state as library

    spec = inventory.load(inventory_path)
    if node is not None and node not in spec.hosts:
        raise InputError(f"{node}: not a host of {spec.path}")
    found = library.read(spec, display.for_output(json_mode))
    entries = [e for e in found.history if node is None or e.node == node]
    if json_mode:
        display.emit_json([json.loads(e.json()) for e in entries])
        return
    if not entries:
        click.echo("no repair actions recorded" + (f" for {node}" if node else ""))
    for e in entries:
        where = f" evidence {e.evidence}" if e.evidence else ""
        detail = f": {e.detail}" if e.detail else ""
        line = f"{library.stamp(e.time)} {e.node} {e.cls} {e.step} {e.outcome}{where}{detail}"
        click.echo(printable(line))


@repair.command()
@inventory_option
def reset(inventory_path) -> None:
    """Close the breaker; the nodes Kiln still has out are queued for the loop again."""
    from kiln.commands.repair import loop_state as library

    found = library.read(inventory.load(inventory_path), display.for_output(False), reset=True)
    if found.breaker.open:
        click.echo(printable(f"closed the breaker (was {_breaker_line(found)[9:]})"))
    else:
        click.echo("the breaker was closed already")

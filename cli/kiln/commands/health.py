"""`kiln health`: Kiln's node check on every compute node now."""

import sys
from pathlib import Path

import click

from kiln import inventory
from kiln.commands import inventory_option, parse_nodes
from kiln.errors import ExitCode
from kiln.run import display


@click.command()
@inventory_option
@click.option("--nodes", help="Only these compute nodes (a Slurm hostlist, e.g. gpu[001-004]).")
@click.option(
    "--no-slurm", is_flag=True, help="Report only: drain and resume no node (nodes without Slurm)."
)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def health(inventory_path: Path | None, nodes: str | None, no_slurm: bool, json_mode: bool) -> None:
    """Run Kiln's node check (what Slurm runs as HealthCheckProgram) on every compute
    node now and print a node x check table. As under Slurm, a failing node is drained
    with a `kiln-health:` reason and a node that check drained is resumed once it passes.

    Exit 0 when no node fails (warnings included), 5 when one fails, 4 when a node could
    not be checked."""
    from kiln import health_check

    spec = inventory.load(inventory_path)
    chosen = spec.compute_nodes(parse_nodes(nodes), "check")
    result = health_check.check(spec, chosen, display.for_output(json_mode), no_slurm)
    if json_mode:
        display.emit_json(result.to_json())
    else:
        _print(result)
    if result.failed:
        sys.exit(int(ExitCode.VALIDATION_FAILED))
    sys.exit(int(ExitCode.HOSTS_FAILED if result.unchecked else ExitCode.OK))


def _print(result) -> None:
    checks = result.checks
    width = max([len(n.node) for n in result.nodes] + [4])
    click.echo(" ".join([f"{'node':<{width}}", f"{'status':<6}", *checks]))
    for node in result.nodes:
        cells = {r.check: r.status for r in node.results}
        row = [f"{node.node:<{width}}", f"{node.status:<6}"]
        row += [f"{cells.get(c, '-'):<{len(c)}}" for c in checks]
        click.echo(" ".join(row).rstrip())
    for node in result.nodes:
        if node.error:
            click.echo(f"{node.node}: error: {node.error}")
        for r in node.results:
            if r.status != "OK":
                click.echo(f"{node.node}: {r.status} {r.check}: {r.reason}")
        if node.action:
            click.echo(f"{node.node}: {node.action}")

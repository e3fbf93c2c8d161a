"""`kiln health`: Kiln's node check on every compute node now."""

import sys
from pathlib import Path

import click

from kiln import inventory
from kiln.commands import inventory_option, parse_nodes
from kiln.errors import InputError
from kiln.printable import printable
from kiln.run import display
from kiln.validation.verdicts import exit_code


@click.command()
@inventory_option
@click.option("--nodes", help="Only these compute nodes (a Slurm hostlist, e.g. gpu[001-004]).")
@click.option(
    "--no-slurm", is_flag=True, help="Report only: drain and resume no node (nodes without Slurm)."
)
@click.option(
    "--schedule",
    is_flag=True,
    help="Show the scheduled active check instead: its timer, next run and last results "
    "(new runs go into the report history).",
)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def health(
    inventory_path: Path | None, nodes: str | None, no_slurm: bool, schedule: bool, json_mode: bool
) -> None:
    """Run Kiln's node check (what Slurm runs as HealthCheckProgram) on every compute
    node now and print a node x check table. As under Slurm, a failing node is drained
    with a `kiln-health:` reason and a node that check drained is resumed once it passes.

    Exit 0 when no node fails (warnings included), 5 when one fails, 3 when a node could
    not be checked (none failed). With --schedule: 0, or 4 when the controller could not be read."""
    from kiln.health import check as health_check

    spec = inventory.load(inventory_path)
    if schedule:
        if nodes or no_slurm:
            raise InputError("--schedule reads the controller: it takes no --nodes or --no-slurm")
        _show_schedule(spec, json_mode)
        return
    chosen = spec.compute_nodes(parse_nodes(nodes), "check")
    result = health_check.check(spec, chosen, display.for_output(json_mode), no_slurm)
    if json_mode:
        display.emit_json(result.to_json())
    else:
        _print(result)
    sys.exit(int(exit_code(result.verdict)))


def _print(result) -> None:
    # Node names, check names and statuses come from the nodes: escaped, then aligned.
    checks = {c: printable(c) for c in result.checks}
    width = max([len(printable(n.node)) for n in result.nodes] + [4])
    click.echo(" ".join([f"{'node':<{width}}", f"{'status':<6}", *checks.values()]))
    for node in result.nodes:
        cells = {r.check: printable(r.status) for r in node.results}
        row = [f"{printable(node.node):<{width}}", f"{printable(node.status):<6}"]
        row += [f"{cells.get(c, '-'):<{len(shown)}}" for c, shown in checks.items()]
        click.echo(" ".join(row).rstrip())
    for node in result.nodes:  # what the nodes said: no control character reaches the terminal
        if node.error:
            click.echo(printable(f"{node.node}: error: {node.error}"))
        for r in node.results:
            if r.status != "OK":
                click.echo(printable(f"{node.node}: {r.status} {r.check}: {r.reason}"))
        if node.action:
            click.echo(printable(f"{node.node}: {node.action}"))


def _show_schedule(spec, json_mode: bool) -> None:
    from kiln.health import schedule as health_schedule

    found = health_schedule.read(spec, display.for_output(json_mode))
    if json_mode:
        display.emit_json(found.to_json())
        return
    timer = found.timer
    if not timer.installed:
        click.echo(
            f"active check: no timer on {found.controller} "
            "(health_active_schedule is empty, or `kiln provision --tags health` has not run)"
        )
    else:
        said = f"kiln-health-active.timer on {found.controller} ({timer.calendar})"
        click.echo(printable(f"active check: {said}"))
        click.echo(printable(f"next run: {timer.next_run or 'none'}"))
    for line in found.unreadable:
        click.echo(printable(f"warning: {line}"))
    if not found.runs:
        click.echo("last run: none yet")
        return
    last = found.runs[-1]
    tested = last.nodes
    failed = [n for n, r in tested.items() if r["status"] in ("FAIL", "ERROR")]
    click.echo(
        printable(
            f"last run: {last.started}: {len(tested)} tested, {len(failed)} failed, "
            f"{len(last.skipped)} skipped (kiln report show {last.report_id})"
        )
    )
    if last.error:
        click.echo(printable(f"  could not run: {last.error}"))
    for node, record in tested.items():
        bad = [f"{r['status']} {r['check']}: {r['reason']}" for r in record["results"]]
        bad = [line for line in bad if not line.startswith("OK ")] + [record["error"]]
        detail = "; ".join(line for line in bad if line)
        click.echo(printable(f"  {node} {record['status']}{': ' + detail if detail else ''}"))
        if record["action"]:
            click.echo(printable(f"  {node} {record['action']}"))
    for node, why in last.skipped.items():
        click.echo(printable(f"  {node} skipped: {why}"))
    if found.imported:
        click.echo(f"{len(found.imported)} run(s) added to the report history (kiln report list)")

"""`kiln drift`: what on the nodes differs from what the inventory declares."""

import sys
from pathlib import Path

import click

from kiln import inventory, lock, selection
from kiln.commands import inventory_option, warn
from kiln.printable import printable
from kiln.run import display


@click.command()
@inventory_option
@click.option("-l", "--limit", help="Only these hosts (an Ansible host pattern).")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def drift(inventory_path: Path | None, limit: str | None, json_mode: bool) -> None:
    """Run provisioning in check and diff mode and list, per host, every task that would
    change something, with its diff, and each version in which a node differs from most
    of its group. Nothing on the nodes changes.

    Exit 0 when nothing drifted, 6 when something did, 4 when a host failed or was
    unreachable (it was not checked)."""
    from kiln import drift as drift_lib
    from kiln.run.execute import resolve_playbook

    spec = inventory.load(inventory_path)
    if not json_mode:
        for warning in spec.warnings:
            warn(warning)
    selection.check(resolve_playbook("site.yml"), spec, limit, None, None)
    with lock.held(spec.path, "kiln drift") as held:
        result, code = drift_lib.drift(
            drift_lib.DriftRequest(
                inventory=spec, limit=limit, display=display.for_output(json_mode), lock=held
            )
        )
    if json_mode:
        display.emit_json(result.to_json())
    else:
        _show(result)
    sys.exit(int(code))


def _show(result) -> None:
    # Task names, versions, reasons and files' contents come from the nodes: their
    # control characters are escaped (a diff keeps its line breaks and tabs).
    hosts = result.report.nodes
    width = max((len(h) for h in hosts), default=4)
    click.echo(f"{'host':<{width}} tasks  fingerprint")
    for host in hosts:
        tasks = "-" if host in result.unchecked else len(result.tasks.get(host, []))
        odd = result.outliers.get(host, [])
        seen = (
            "-" if host not in result.fingerprints else f"{len(odd)} differ" if odd else "as peers"
        )
        click.echo(f"{host:<{width}} {tasks:<6} {seen}")
    for host in hosts:
        if host in result.unchecked:
            click.echo(printable(f"{host}: not checked: {result.unchecked[host]}"))
        for one in result.outliers.get(host, []):
            click.echo(printable(f"{host}: {one.describe()}"))
        for one in result.tasks.get(host, []):
            click.echo("\n" + printable(f"{host}: {one.task} ({one.action})"))
            if one.diff:
                click.echo(printable(one.diff.rstrip("\n"), lines=True))
    for note in result.report.notes:
        click.echo(printable(f"note: {note}"))
    click.echo("\n" + printable(f"{result.summary()}; report: kiln report show {result.report.id}"))

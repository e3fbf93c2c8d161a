"""`kiln monitoring show`: the alerts firing now, a line per node, from Prometheus."""

import sys
from pathlib import Path

import click

from kiln.commands import inventory_option
from kiln.run import display


@click.group()
def monitoring() -> None:
    """The cluster as Prometheus sees it (the monitoring role)."""


@monitoring.command()
@inventory_option
@click.option(
    "--url",
    help="Prometheus's address (default: the first monitoring host, else the first "
    "controller, at its monitoring_prometheus_port, 9090).",
)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def show(inventory_path: Path | None, url: str | None, json_mode: bool) -> None:
    """Print each node with the alerts firing on it now, or "ok".

    Exit 0 when no alert fires, 5 when one does, 1 when Prometheus cannot be reached
    or answers what its API never does, 2 for bad input."""
    from kiln import inventory
    from kiln.commands.monitoring import alerts

    if url is not None:
        base = alerts.check_url(url, "--url")
    else:
        base = alerts.url_from_inventory(inventory.load(inventory_path))
    found = alerts.show(base)
    if json_mode:
        display.emit_json(found.to_json())
    elif found.nodes:
        for line in display.columns(found.rows()):
            click.echo(line)
    else:
        click.echo(f"no scrape target and no alert firing at {base}")
    sys.exit(int(found.exit_code))

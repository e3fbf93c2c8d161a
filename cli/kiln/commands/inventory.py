"""`kiln inventory check`: validate an inventory and show what it declares."""

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kiln import inventory as inventory_model
from kiln.commands import inventory_option
from kiln.run import display


@click.group("inventory")
def inventory_group() -> None:
    """Inspect and validate inventories."""


@inventory_group.command("check")
@inventory_option
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def check(inventory_path: Path | None, json_mode: bool) -> None:
    """Validate an inventory; list its groups, hosts and each host's Kiln roles."""
    spec = inventory_model.load(inventory_path)
    if json_mode:
        display.emit_json(
            {
                "inventory": str(spec.path),
                "groups": spec.groups,
                "hosts": {
                    h: {"address": spec.hosts[h].address, "roles": spec.kiln_roles(h)}
                    for h in spec.hosts
                },
                "warnings": spec.warnings,
                "unchecked": spec.unchecked,
            }
        )
        return
    console = Console(highlight=False)
    for warning in spec.warnings:
        console.print(f"[yellow]warning[/yellow]: {escape(warning)}")
    table = Table(title=escape(f"inventory {spec.path}: valid"), box=None)
    for column in ("host", "address", "kiln roles", "groups"):
        table.add_column(column)
    for name, host in spec.hosts.items():
        cells = (
            name,
            host.address,
            ", ".join(spec.kiln_roles(name)) or "-",
            ", ".join(host.groups),
        )
        table.add_row(*map(escape, cells))
    console.print(table)
    console.print(", ".join(f"{g}: {len(h)}" for g, h in spec.groups.items()))
    for name in spec.unchecked:
        console.print(f"not checked (ansible-vault; Ansible decrypts it): {escape(name)}")


inventory = inventory_group

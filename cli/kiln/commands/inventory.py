"""`kiln inventory check` and `diff`: validate an inventory and show what it declares;
compare two."""

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

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
    """Validate an inventory; list its groups, hosts and each host's Kiln roles.

    Hosts whose facts an earlier run cached are also checked against the operating
    systems their roles support (the pre-flight of every run reads them afresh)."""
    from kiln import os_support

    spec = inventory_model.load(inventory_path)
    cached = os_support.cached_facts(spec.hosts)
    releases = {host: os_support.release(facts) for host, facts in cached.items()}
    if refused := os_support.refusals(releases, spec.groups, spec.hosts):
        raise inventory_model.InventoryError(
            [f"{line} (facts cached by an earlier run)" for line in refused]
        )
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
    rows = [("host", "address", "kiln roles", "groups")]
    rows += [
        (name, host.address, ", ".join(spec.kiln_roles(name)) or "-", ", ".join(host.groups))
        for name, host in spec.hosts.items()
    ]
    # Plain text, never markup: host names and addresses are the operator's.
    click.echo("\n".join([f"inventory {spec.path}: valid", *display.columns(rows)]))
    click.echo(", ".join(f"{g}: {len(h)}" for g, h in spec.groups.items()))
    for name in spec.unchecked:
        click.echo(f"not checked (ansible-vault; Ansible decrypts it): {name}")


@inventory_group.command("diff")
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def diff(before: Path, after: Path, json_mode: bool) -> None:
    """What differs between two inventories in effect: per group, the hosts added and
    removed and the variables whose value differs (secrets: only that they differ).

    Exit 0 whether or not they differ; 2 when either inventory is not valid."""
    from kiln.inventory import diff as inventory_diff

    found = inventory_diff.diff(inventory_model.load(before), inventory_model.load(after))
    if json_mode:
        display.emit_json(found.to_dict())
        return
    for line in found.lines():
        click.echo(line)


inventory = inventory_group

"""`kiln validate`: run the validation suites through Slurm, judge, drain, report."""

from pathlib import Path

import click

from kiln import inventory, lock
from kiln.commands import end_campaign, inventory_option, parse_nodes, warn
from kiln.errors import InputError
from kiln.run import display
from kiln.validation import registry


@click.command()
@inventory_option
@click.option("--suite", "suites", help=registry.help_text())
@click.option(
    "--profile",
    help="Reference numbers: a shipped profile or a YAML file "
    "(default: the inventory's validate_profile; none judges against the fleet only).",
)
@click.option("--nodes", help="Only these compute nodes (a Slurm hostlist, e.g. gpu[001-004]).")
@click.option("--no-drain", is_flag=True, help="Change no node's Slurm state.")
@click.option(
    "--idle-only",
    is_flag=True,
    help="Test only idle nodes, held without waiting for any job (the scheduled run).",
)
@click.option(
    "--install-timer",
    is_flag=True,
    help="Install (or update) a systemd timer on this machine that runs "
    "`kiln validate --idle-only` on the inventory's validate_schedule; an empty schedule "
    "removes it.",
)
@click.option("--json", "json_mode", is_flag=True, help="Print the report as one JSON object.")
def validate(
    inventory_path: Path | None,
    suites: str | None,
    profile: str | None,
    nodes: str | None,
    no_drain: bool,
    idle_only: bool,
    install_timer: bool,
    json_mode: bool,
) -> None:
    """Validate the cluster: Slurm, storage and collectives on every compute node.

    Exit 0 when every node passes (warnings included), 5 when a node fails, 3 when a
    node was not checked and none failed."""
    from kiln.campaigns import validate as validation

    spec = inventory.load(inventory_path)
    if install_timer:
        if suites or profile or nodes or no_drain or idle_only or json_mode:
            raise InputError("--install-timer takes no other option than -i")
        _install_timer(spec)
        return
    if not json_mode:
        for warning in spec.warnings:
            warn(warning)
    request = validation.Request(
        inventory=spec,
        suites=_suites(suites),
        suites_named=bool(suites),
        profile=profile,
        nodes=parse_nodes(nodes),
        no_drain=no_drain,
        idle_only=idle_only,
        display=display.for_output(json_mode),
    )
    with lock.held(spec.path, "kiln validate") as request.lock:
        report, code = validation.validate(request)
    end_campaign(report, code, json_mode)


def _install_timer(spec: inventory.ClusterSpec) -> None:
    from kiln import schedules

    timer, next_run = schedules.install(spec)
    if not timer.schedule:
        click.echo(f"{schedules.VARIABLE} is empty: no timer ({timer.name}.timer is removed)")
        return
    click.echo(
        f"{timer.name}.timer in {timer.directory}: {timer.schedule}, next run {next_run}\n"
        f"each run: kiln validate -i {spec.path.resolve()} --idle-only "
        "(its report joins `kiln report list`)"
    )


def _suites(text: str | None) -> list[str]:
    if not text:
        return list(registry.NAMES)
    asked = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in asked if s not in registry.NAMES]
    if unknown or not asked:
        raise InputError(
            f"--suite: unknown suite {unknown[0] if unknown else text!r}; "
            f"choose from {', '.join(registry.NAMES)}"
        )
    return [s for s in registry.NAMES if s in asked]

"""`kiln burn-in`: hours of load on the nodes through Slurm, judged round by round."""

from pathlib import Path

import click

from kiln import inventory, lock
from kiln.commands import Whole, end_campaign, inventory_option, parse_nodes, warn
from kiln.errors import InputError
from kiln.run import display


@click.command("burn-in")
@inventory_option
@click.option("--nodes", help="Only these compute nodes (a Slurm hostlist, e.g. gpu[001-004]).")
@click.option("--duration", help="How long to load the nodes: 4h, 90m, 1h30m, 2d.")
@click.option(
    "--rounds",
    type=Whole(1, 1000),
    help="How many rounds to run (with --duration: whichever ends first).",
)
@click.option(
    "--profile",
    help="Load and limits: a profile with a burn_in: section, shipped or a YAML file "
    "(default: the inventory's validate_profile).",
)
@click.option("--no-drain", is_flag=True, help="Change no node's Slurm state.")
@click.option("--json", "json_mode", is_flag=True, help="Print the report as one JSON object.")
def burn_in(
    inventory_path: Path | None,
    nodes: str | None,
    duration: str | None,
    rounds: int | None,
    profile: str | None,
    no_drain: bool,
    json_mode: bool,
) -> None:
    """Burn the compute nodes in: GPU stress, collectives and storage under load, in
    rounds until DURATION is spent or ROUNDS have run, inside a maintenance reservation.

    Exit 0 when every node passes, 5 when a node fails, 3 when a node was not checked
    and none failed, 130 when stopped (Ctrl-C ends
    the current round; the rounds that ended are judged and the nodes let go)."""
    from kiln.campaigns import burn_in as burn

    # bad input stops before the inventory is read
    if duration is None and rounds is None:
        raise InputError("burn-in needs --duration, --rounds or both: how long to load the nodes")
    try:
        seconds = None if duration is None else burn.parse_duration(duration)
    except InputError as exc:
        raise InputError(f"--duration {exc.message}") from None
    spec = inventory.load(inventory_path)
    if not json_mode:
        for warning in spec.warnings:
            warn(warning)
    request = burn.Request(
        inventory=spec,
        duration_s=seconds,
        rounds=rounds,
        profile=profile,
        nodes=parse_nodes(nodes),
        no_drain=no_drain,
        display=display.for_output(json_mode),
    )
    with lock.held(spec.path, "kiln burn-in") as request.lock:
        try:
            report, code = burn.burn_in(request)
        except burn.NoProfile as exc:
            raise InputError(f"{exc.message}; name one with --profile NAME") from None
    end_campaign(report, code, json_mode)

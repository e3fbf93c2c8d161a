"""`kiln provision` and `kiln run PLAYBOOK`: run a playbook against a validated inventory."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kiln import inventory, selection, yaml_input
from kiln.commands import Whole, inventory_option, stack, warn
from kiln.errors import InputError
from kiln.run import display

if TYPE_CHECKING:  # imported where used: the runner's modules are not for --help
    from kiln.run import dispatch
    from kiln.run.execute import RunRequest


def parse_extravars(items: tuple[str, ...]) -> dict[str, Any]:
    """-e KEY=VALUE (a string, as in Ansible) or -e @FILE (YAML)."""
    extravars: dict[str, Any] = {}
    for item in items:
        if item.startswith("@"):
            data = yaml_input.load(Path(item[1:]), f"-e {item}")
            if not isinstance(data, dict):
                raise InputError(f"-e {item}: expected a YAML mapping")
            extravars.update(data)
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise InputError(f"-e {item!r}: expected KEY=VALUE or @FILE")
        extravars[key] = value
    return extravars


playbook_options = stack(
    inventory_option,
    click.option("-l", "--limit", help="Only these hosts (an Ansible host pattern)."),
    click.option("-t", "--tags", help="Only tasks and roles with these tags (comma-separated)."),
    click.option("--skip-tags", help="Skip tasks and roles with these tags."),
    click.option("--check", is_flag=True, help="Report what would change; change nothing."),
    click.option("--diff", is_flag=True, help="Show the differences in changed files."),
    click.option(
        "-e",
        "--extra-vars",
        "extra_vars",
        multiple=True,
        help="KEY=VALUE or @FILE; may repeat.",
    ),
    click.option(
        "--no-reboot",
        is_flag=True,
        help="Reboot no node (a new GPU driver waits to load): report them instead.",
    ),
    click.option("--json", "json_mode", is_flag=True, help="Print one JSON object."),
)


def _chosen(request: "RunRequest", slices: int | None, part: str | None) -> "dispatch.Runs":
    """One run, a sliced run, or one part of one alone; bad input stops here, before the
    lock, a bad $KILN_FACT_CACHE included (every run uses it)."""
    from kiln import paths
    from kiln.run import dispatch
    from kiln.run import slices as slicing

    paths.fact_cache()
    if part is not None and slices is None:
        raise InputError(
            "--part needs --slices N: a part (slice-K, controllers, slurm-K) is one of "
            "the runs --slices N makes"
        )
    if slices is None:
        return dispatch.Runs()
    if request.limit:
        raise InputError(
            "--slices with --limit: slices split the whole inventory's compute "
            "nodes; run --limit without --slices"
        )
    try:
        # The cluster provisioned before: its first controller's facts, read from the
        # fact cache (one that several control machines share, with --part).
        plan = slicing.plan(request, slices)
    except InputError as exc:
        raise InputError(f"--slices: {exc.message}") from None
    if part is None:
        return dispatch.Runs(plan)
    try:
        return dispatch.Runs(plan, plan.part(part))
    except InputError as exc:
        raise InputError(f"--part {exc.message}") from None


def _run(
    playbook: str,
    inventory_path: Path | None,
    json_mode: bool,
    slices: int | None = None,
    part: str | None = None,
    **options: Any,
) -> None:
    from kiln.run import dispatch
    from kiln.run.execute import RunRequest, resolve_playbook

    operator_extravars = parse_extravars(options.pop("extra_vars"))
    extravars: dict[str, Any] = {}
    if options.pop("no_reboot"):
        extravars["nvidia_driver_reboot"] = False  # the nvidia_driver role reports instead
    spec = inventory.load(inventory_path)
    if not json_mode:
        for warning in spec.warnings:
            warn(warning)
    selection.check(
        resolve_playbook(playbook), spec, options["limit"], options["tags"], options["skip_tags"]
    )
    request = RunRequest(
        playbook=playbook,
        inventory=spec,
        extravars=extravars,
        operator_extravars=operator_extravars,
        display=display.for_output(json_mode),
        **options,
    )
    if slices is not None and part is None:  # the parts print side by side, each named
        request.display = display.silent if json_mode else display.prefixed
    runs = _chosen(request, slices, part)
    if runs.plan and runs.plan.note and not json_mode:
        warn(f"--slices {slices}: {runs.plan.note}")
    command = f"kiln {Path(playbook).stem}" + (f" --part {part}" if runs.part else "")
    summary = dispatch.run(request, runs, command)
    if json_mode:
        display.emit_json(summary.to_json())
    else:
        display.run_summary(summary)
    sys.exit(int(summary.exit_code))


@click.command()
@playbook_options
@click.option(
    "--slices",
    type=Whole(min=1),
    help="Run the compute nodes as N ansible-playbook processes side by side, then the "
    "controllers (docs/performance.md#slices).",
)
@click.option(
    "--part",
    metavar="NAME",
    help="With --slices N: run only this part of it here (slice-K, controllers, slurm-K), "
    "the others on other control machines sharing $KILN_FACT_CACHE "
    "(docs/performance.md#several-control-machines).",
)
def provision(**options: Any) -> None:
    """Provision the cluster: run playbooks/site.yml."""
    _run("site.yml", **options)


@click.command()
@click.argument("playbook")
@playbook_options
def run(playbook: str, **options: Any) -> None:
    """Run a playbook: one of Kiln's by name (e.g. `site`), or a path to your own."""
    _run(playbook, **options)

"""`kiln awx workflow`: `kiln provision --slices N` as an AWX workflow to import."""

import sys
from pathlib import Path

import click

from kiln import files, inventory
from kiln.awx_workflow import Names
from kiln.commands import Whole, inventory_option, stack, warn


@click.group()
def awx() -> None:
    """AWX / Automation Controller: the provision as a workflow (docs/ansible.md)."""


@awx.command()
@inventory_option
@click.option(
    "--slices",
    type=Whole(min=1),
    required=True,
    help="Slices of the compute nodes, as for `kiln provision --slices`.",
)
@stack(
    *(
        click.option(option, field, default=getattr(Names, field), show_default=True, help=text)
        for option, field, text in (
            ("--organization", "organization", "AWX organization."),
            ("--project", "project", "AWX project."),
            ("--awx-inventory", "inventory", "AWX inventory."),
            ("--execution-environment", "execution_environment", "AWX execution environment."),
            ("--credential", "credential", "AWX Machine credential."),
            (
                "--playbooks",
                "playbooks",
                "The project's folder holding site.yml and slurm_state.yml ('.' for its root).",
            ),
            ("--prefix", "prefix", "Start of the templates' names."),
        )
    )
)
@click.option(
    "--forks",
    type=Whole(min=0),
    default=Names.forks,
    show_default=True,
    help="Forks per job (0: ansible.cfg's).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Write the workflow to this file (default: standard output).",
)
def workflow(inventory_path: Path | None, slices: int, output: Path | None, **names: str) -> None:
    """Write the `awx import` document of `kiln provision --slices N` for an inventory:
    the slices' job templates side by side, then the controllers', then each slice's
    Slurm check, as one workflow."""
    from kiln.awx_workflow import export

    if output is not None:
        files.output_path(output)  # before any work
    # Only the groups matter here: unfetched pins do not stop it.
    spec = inventory.load(inventory_path, unpinned_ok=True)
    chosen = Names(**names)  # type: ignore[arg-type]
    document, note = export(spec, slices, chosen)
    if note:
        warn(f"--slices {slices}: {note}")
    text = files.json_text(document) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        files.write_output(output, text)

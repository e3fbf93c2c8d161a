"""`kiln accounting dump | load`: Slurm's accounts, users and QOS, moved between clusters."""

from pathlib import Path

import click

from kiln import files, inventory, lock
from kiln.commands import inventory_option
from kiln.run import display


@click.group()
def accounting() -> None:
    """Slurm accounting that moves with the cluster (a region migration)."""


@accounting.command()
@inventory_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="The dump file to write (JSON, mode 0600).",
)
def dump(inventory_path: Path | None, output: Path) -> None:
    """Write the cluster's associations (accounts, users, limits) and QOS to a file.
    Changes nothing on the cluster. Exit 0, 2 when the inventory keeps no accounting,
    4 when the controller failed or was unreachable."""
    from kiln import accounting as accounting_lib

    files.output_path(output)
    spec = inventory.load(inventory_path)
    with lock.held(spec.path, "kiln accounting dump"):
        found = accounting_lib.dump(spec, display.for_people)
    found.write(output)
    click.echo(f"dumped {found.describe()} to {output}")


@accounting.command()
@inventory_option
@click.argument("dump_file", type=click.Path(path_type=Path, dir_okay=False))
def load(inventory_path: Path | None, dump_file: Path) -> None:
    """Create DUMP_FILE's QOS and load its associations on this cluster, under its own
    cluster name. What exists already is kept and set as in the dump. Exit 0, 2 for a
    file that is not a Kiln accounting dump (nothing runs), 4 when the controller failed."""
    from kiln import accounting as accounting_lib

    found = accounting_lib.read(dump_file)
    spec = inventory.load(inventory_path)
    with lock.held(spec.path, "kiln accounting load"):
        accounting_lib.load(spec, found, display.for_people)
    click.echo(f"loaded {found.describe()} from {dump_file}")

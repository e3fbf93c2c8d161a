"""`kiln image build`: a compute node image from the inventory's roles (docs/images.md)."""

import sys
from pathlib import Path

import click

from kiln import inventory
from kiln.commands import inventory_option, warn
from kiln.errors import ExitCode, InputError
from kiln.run import display

DEFAULT_BASE = "localhost/kiln-node:trixie"  # the lab's node image (`kiln lab up`)


@click.group()
def image() -> None:
    """Node images: the node-independent part of a compute node, built once."""


@image.command()
@inventory_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Directory for image.oci.tar, rootfs.tar and manifest.json (made if missing).",
)
@click.option(
    "--base",
    default=DEFAULT_BASE,
    show_default=True,
    help="The podman image to start from (systemd and sshd, as a node boots).",
)
@click.option("--like", metavar="HOST", help="Build with this compute node's variables.")
@click.option("--tag", help="Name of the committed image [default: localhost/kiln-image:ID].")
@click.option("--network", help="Podman network of the build container (a lab's: kiln-NAME).")
@click.option("--force", is_flag=True, help="Replace an image the output directory holds.")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def build(
    inventory_path: Path | None,
    output: Path,
    base: str,
    like: str | None,
    tag: str | None,
    force: bool,
    network: str | None,
    json_mode: bool,
) -> None:
    """Apply the compute roles' node-independent part to a container of --base and write
    it as an OCI archive, a root-filesystem tarball and a manifest of the pins."""
    from kiln.image import build as building

    spec = inventory.load(inventory_path)
    if not json_mode:
        for warning in spec.warnings:
            warn(warning)
    request = building.BuildRequest(
        spec, output, base, like=like, tag=tag, force=force, network=network
    )
    try:
        plan = building.check(request)
    except building.BadValue as exc:
        hint = "; --force replaces it" if isinstance(exc, building.HoldsImage) else ""
        raise InputError(f"--{exc.option} {exc.value}: {exc.message}{hint}") from None
    summary, manifest = building.build(
        plan, display.for_output(json_mode), lambda m: click.echo(f"image: {m}", err=True)
    )
    if json_mode:
        display.emit_json(
            {"run": summary.to_json(), "manifest": manifest.to_json() if manifest else None}
        )
    else:
        display.run_summary(summary)
        if manifest:
            for name in building.OUTPUTS:
                click.echo(f"{name}: {output / name}")
            click.echo(f"image: {manifest.image['name']} {manifest.image['id'][:12]}")
    sys.exit(int(summary.exit_code if manifest is None else ExitCode.OK))

"""`kiln lab up | down | status | ssh | doctor | image`: the local podman lab."""

import os
import sys

import click
from rich.console import Console
from rich.table import Table

from kiln import paths
from kiln.commands import Whole
from kiln.errors import ExitCode, InputError
from kiln.lab import distros
from kiln.run import display

DEFAULT_NAME = paths.DEFAULT_LAB
name_option = click.option(
    "--name",
    default=DEFAULT_NAME,
    show_default=True,
    help="Lab name (prefix of its node names).",
    callback=lambda ctx, param, value: _checked_name(value),
)


distro_option = click.option(
    "--distro",
    type=click.Choice(distros.NAMES),
    help="Release of the nodes, by codename or name [default: $KILN_LAB_DISTRO, else trixie].",
)


def _checked_name(name: str) -> str:
    from kiln.lab import cluster

    return cluster.check_name(name)


def _log(message: str) -> None:
    click.echo(f"lab: {message}", err=True)


@click.group()
def lab() -> None:
    """The local lab: a real multi-node cluster of systemd containers on this machine."""


@lab.command()
@name_option
@click.option("--compute", default=2, show_default=True, type=Whole(1, 64), help="Compute nodes.")
@distro_option
@click.option(
    "--image",
    "boot_image",
    metavar="NAME",
    help="Boot the compute nodes this run adds from NAME, a `kiln image build` image"
    " of the lab's node image (docs/images.md); nodes that exist are kept.",
)
def up(name: str, compute: int, distro: str | None, boot_image: str | None) -> None:
    """Create the lab (or complete it; running it twice is safe) and write its inventory."""
    from kiln.lab import cluster

    codename = distros.chosen(distro).codename
    try:
        plan, hosts = cluster.up(name, compute, codename, _log, boot_image=boot_image)
    except cluster.BootImageError as exc:
        hint = {
            "missing": f" (`kiln image build --tag {boot_image}` builds one)",
            "other-base": f"; build it again with `kiln image build --base {exc.node_image}`",
        }.get(exc.reason, "")
        raise InputError(f"--image {boot_image}: {exc}{hint}") from None
    for node in plan.nodes:
        click.echo(f"{node.name:<24} {node.role:<11} {node.address:<15} {node.image}")
    click.echo(f"inventory: {hosts}")


@lab.command()
@name_option
def down(name: str) -> None:
    """Remove every container of the lab, its network and its inventory."""
    from kiln.lab import cluster

    cluster.down(name, _log)


@lab.command()
@name_option
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def status(name: str, json_mode: bool) -> None:
    """Show the lab's nodes, addresses, container state and SSH reachability."""
    from kiln.lab import cluster

    nodes = cluster.status(name)
    if json_mode:
        display.emit_json(
            {
                "lab": name,
                "nodes": [
                    {
                        "name": s.node.name,
                        "role": s.node.role,
                        "address": s.node.address,
                        "image": s.node.image,
                        "state": s.state,
                        "ssh": s.ssh,
                    }
                    for s in nodes
                ],
            }
        )
        return
    table = Table(title=f"lab {name}", box=None)
    for column in ("node", "role", "address", "image", "container", "ssh"):
        table.add_column(column)
    for s in nodes:
        cells = (s.node.name, s.node.role, s.node.address, s.node.image, s.state)  # podman's
        table.add_row(*(display.shown(c) for c in cells), "ok" if s.ssh else "[red]no")
    Console(highlight=False).print(table)
    if not all(s.ssh and s.state == "running" for s in nodes):
        sys.exit(int(ExitCode.FAILED))


@lab.command(context_settings={"ignore_unknown_options": True})
@name_option
@click.argument("host")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def ssh(name: str, host: str, command: tuple[str, ...]) -> None:
    """Open a shell on a lab node (HOST: its name, e.g. kiln-compute01 or compute01)."""
    from kiln.lab import cluster

    argv = cluster.ssh_argv(name, host) + list(command)
    os.execvp(argv[0], argv)


@lab.command()
def doctor() -> None:
    """Check this host for what the lab needs and print the exact fix for each gap."""
    from kiln.lab import doctor as checks

    results = checks.run_checks()
    console = Console(highlight=False)
    for check in results:
        mark = "[green]ok" if check.ok else ("[red]FAIL" if check.required else "[yellow]warn")
        console.print(f"{mark:<14} {check.name:<12} {display.shown(check.detail)}")
        if not check.ok:
            console.print(f"{'':<6} {'fix:':<12} {display.shown(check.fix)}")
    if any(c.required and not c.ok for c in results):
        sys.exit(int(ExitCode.BAD_INPUT))


@lab.command()
@distro_option
@click.option("--rebuild", is_flag=True, help="Build even if the cached image is current.")
@click.option(
    "--ee-base",
    is_flag=True,
    help="The execution environment's base image instead (docs/ansible.md).",
)
def image(distro: str | None, rebuild: bool, ee_base: bool) -> None:
    """Build (or reuse) the cached node image; Molecule scenarios use it too."""
    from kiln.lab import doctor as checks
    from kiln.lab import image as images

    checks.require()
    recipe = images.EE_BASE if ee_base else images.NODE
    release = distros.chosen(distro).codename
    click.echo(images.ensure_image(release, _log, rebuild=rebuild, recipe=recipe))

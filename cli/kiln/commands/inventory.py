"""`kiln inventory`: write a starting inventory (`new`), read the hosts and propose what
follows (`discover`), pin the releases (`pins`), validate one (`check`), compare two
(`diff`)."""

import re
import shlex
import sys
from pathlib import Path

import click
from rich.console import Console

from kiln import inventory as inventory_model
from kiln.commands import inventory_option
from kiln.errors import InputError
from kiln.printable import printable
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
        console.print(f"[yellow]warning[/yellow]: {display.shown(warning)}")
    rows = [("host", "address", "kiln roles", "groups")]
    rows += [
        (name, host.address, ", ".join(spec.kiln_roles(name)) or "-", ", ".join(host.groups))
        for name, host in spec.hosts.items()
    ]
    # Plain text, never markup: host names and addresses are the operator's.
    click.echo("\n".join([printable(f"inventory {spec.path}: valid"), *display.columns(rows)]))
    click.echo(printable(", ".join(f"{g}: {len(h)}" for g, h in spec.groups.items())))
    for name in spec.unchecked:
        click.echo(printable(f"not checked (ansible-vault; Ansible decrypts it): {name}"))


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
        click.echo(printable(line))


inventory = inventory_group


@inventory_group.command("discover")
@inventory_option
@click.option("--write", is_flag=True, help="Write the proposed settings into group_vars.")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def discover(inventory_path: Path | None, write: bool, json_mode: bool) -> None:
    """Read every host (OS, CPUs, memory, disks, GPUs by PCI id, NVSwitches, RDMA ports)
    and propose the settings that follow: the validation profile, the GPUs and
    compute-rail ports the health check expects, the topology source. Changes nothing on
    the hosts; --write writes the proposals into group_vars.

    Exit 0 when every host was read, 4 when one could not be (the others are still
    shown and written)."""

    from kiln.errors import ExitCode
    from kiln.inventory import discover as discovery
    from kiln.inventory import edit

    spec = inventory_model.load(inventory_path, unpinned_ok=True)
    found, _summary = discovery.discover(spec, display.for_output(json_mode))
    differences = discovery.differences(spec, found)
    written: list[Path] = []
    if write and differences:
        changes = [
            edit.Change(d.setting.group, d.setting.name, d.setting.value, d.setting.reason)
            for d in differences
        ]
        texts = edit.plan(spec.path, changes, discovery.NEW_FILE)
        written = edit.apply(texts, lambda: inventory_model.load(inventory_path, unpinned_ok=True))
    if json_mode:
        display.emit_json(
            {
                "nodes": {h: n.to_json() for h, n in found.nodes.items()},
                "unreachable": found.unreachable,
                "proposals": [
                    {
                        "group": d.setting.group,
                        "name": d.setting.name,
                        "value": d.setting.value,
                        "reason": d.setting.reason,
                        "current": d.current,
                        "current_from": d.source,
                    }
                    for d in differences
                ],
                "notes": found.notes,
                "written": [str(p) for p in written],
            }
        )
    else:
        _print_discovery(found, differences, written, write)
    sys.exit(int(ExitCode.HOSTS_FAILED if found.unreachable else ExitCode.OK))


def _print_discovery(found, differences, written: list[Path], write: bool) -> None:
    from kiln.inventory import edit

    for node in found.nodes.values():
        click.echo(printable(node.line()))
    for host, why in found.unreachable.items():
        click.echo(printable(f"{host}: not read: {why}"))
    for note in found.notes:
        click.echo(printable(f"note: {note}"))
    if not differences:
        click.echo("the inventory already holds every proposed setting")
        return
    for group in dict.fromkeys(d.setting.group for d in differences):
        click.echo(f"group_vars/{group}:")
        for d in (d for d in differences if d.setting.group == group):
            was = edit.line(d.setting.name, d.current) + f"   ({d.source})"
            click.echo(printable(f"  - {was}"))
            click.echo(
                printable(
                    f"  + {edit.line(d.setting.name, d.setting.value)}   # {d.setting.reason}"
                )
            )
    if written:
        click.echo("written: " + ", ".join(str(p) for p in written))
    elif not write:
        click.echo("not written: run again with --write to write them")


@inventory_group.command("pins")
@inventory_option
@click.option("--write", is_flag=True, help="Write the sha256 values into group_vars.")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def pins(inventory_path: Path | None, write: bool, json_mode: bool) -> None:
    """Fetch every release the inventory pins by version without its sha256 (from the
    URL the role would use: NVIDIA's, or your mirror), check it is what the version says,
    and propose its sha256; --write writes them where each version is set.

    Exit 0; 2 when a download fails or is not what the version says (nothing written)."""
    from kiln.inventory import edit, reader
    from kiln.inventory import pins as pinning

    spec = inventory_model.load(inventory_path, unpinned_ok=True)
    nodes = pinning.nodes(spec)
    found = pinning.plan(spec, nodes.arch, nodes.flavour, nodes.cuda_distro)
    for wanted in found.wanted:
        if not json_mode:
            click.echo(f"fetching {wanted.variable}: {pinning.shown(wanted.url)}")
        pinning.fetch(wanted)
    written: list[Path] = []
    if write and found.wanted:
        _, definitions = reader.read(inventory_path)
        changes = [
            edit.Change(pinning.group_of(w.variable, definitions), w.variable, w.sha256, w.note)
            for w in found.wanted
        ]
        texts = edit.plan(spec.path, changes, "pins.yml")
        written = edit.apply(texts, lambda: inventory_model.load(inventory_path, unpinned_ok=True))
    if json_mode:
        display.emit_json(
            {
                "pins": {
                    w.variable: {
                        "sha256": w.sha256,
                        "url": pinning.shown(w.url),
                        "checked": w.note,
                        "warning": w.warning,
                    }
                    for w in found.wanted
                },
                "not_pinned": found.skipped,
                "notes": list(nodes.notes),
                "written": [str(p) for p in written],
            }
        )
        return
    for wanted in found.wanted:
        click.echo(f"  + {wanted.variable}: {wanted.sha256}   # {wanted.note}")
        if wanted.warning:
            click.echo(f"warning: {wanted.warning}")
    if not found.wanted and not found.skipped:
        click.echo("every pinned release has its sha256")
        return
    for line in found.skipped:
        click.echo(f"not pinned: {line}")
    for line in nodes.notes:
        click.echo(f"note: {line}")
    if written:
        click.echo("written: " + ", ".join(str(p) for p in written))
    elif found.wanted and not write:
        click.echo("not written: run again with --write to write them")


@inventory_group.command("new")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--name", default="", help="The cluster's name (default: the directory's).")
@click.option(
    "--controller",
    multiple=True,
    required=True,
    metavar="NAME[=ADDRESS]",
    help="The Slurm controller; twice for a backup controller.",
)
@click.option(
    "--compute",
    multiple=True,
    required=True,
    metavar="HOSTLIST[=ADDRESSES]",
    help="Compute nodes, e.g. 'gpu[001-016]' or 'gpu[01-02]=10.0.0.[11-12]'.",
)
@click.option("--login", multiple=True, metavar="HOSTLIST[=ADDRESSES]", help="Login nodes.")
@click.option(
    "--storage",
    default="none",
    show_default=True,
    help="Shared storage at --shared-path: none, nfs:SERVER:/EXPORT, or glusterfs "
    "(served by --storage-host).",
)
@click.option(
    "--storage-host",
    multiple=True,
    metavar="HOSTLIST[=ADDRESSES]",
    help="Hosts that serve a GlusterFS volume (--storage glusterfs).",
)
@click.option(
    "--shared-path",
    default="/shared",
    show_default=True,
    help="Where every node mounts the shared storage.",
)
@click.option(
    "--gpu",
    default="auto",
    show_default=True,
    help="The compute nodes' GPUs: auto (discover reads them), none, or "
    "a100, h100, h200, b200, gb200.",
)
@click.option(
    "--fabric",
    type=click.Choice(["auto", "infiniband", "roce", "none"]),
    default="auto",
    show_default=True,
    help="The compute fabric.",
)
@click.option(
    "--driver-source",
    type=click.Choice(["debian", "cuda-repo", "ubuntu", "preinstalled"]),
    default="cuda-repo",
    show_default=True,
    help="Where the NVIDIA driver comes from.",
)
@click.option(
    "--containers/--no-containers",
    default=True,
    show_default=True,
    help="enroot and pyxis for containers in jobs.",
)
@click.option(
    "--monitoring/--no-monitoring",
    default=True,
    show_default=True,
    help="Prometheus, Alertmanager and Kiln's metrics.",
)
@click.option("--ssh-user", default="root", show_default=True, help="Ansible's SSH user.")
@click.option("--ssh-key", default="", help="The SSH private key Ansible uses.")
@click.option("--ssh-args", default="", help="More ssh options (-o ProxyJump=bastion).")
@click.option("--apt-proxy", default="", help="An apt cache or mirror near the nodes (URL).")
@click.option(
    "--mirror",
    default="",
    help="A mirror of NVIDIA's releases (URL): enroot/, "
    "pyxis/, nccl-tests/ and hpcx/ below it, each in the layout of its origin.",
)
@click.option("--force", is_flag=True, help="Write into a directory that is not empty.")
def new(directory: Path, **answers) -> None:
    """Write a complete, commented starting inventory into DIRECTORY: hosts.yml from the
    host lists, and every role's settings with their defaults, those the answers decide
    set. `kiln inventory check` accepts it as written, but for the releases' sha256
    (`kiln inventory pins --write`)."""
    from kiln.inventory import scaffold

    force = answers.pop("force")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise InputError(f"{directory}: not empty (--force writes over the files Kiln writes)")
    # The command as the README records it: the directory by its name, no --force.
    given = sys.argv[sys.argv.index("new") + 1 :] if "new" in sys.argv else []
    flags = [a for a in given if a not in (str(directory), "--force")]
    try:
        cluster = scaffold.NewCluster(
            command=shlex.join(["kiln", "inventory", "new", directory.name, *flags]),
            name=answers["name"] or re.sub(r"[^A-Za-z0-9_-]", "-", directory.absolute().name),
            controllers=scaffold.hosts("controller", answers["controller"]),
            compute=scaffold.hosts("compute", answers["compute"]),
            login=scaffold.hosts("login", answers["login"]),
            storage_hosts=scaffold.hosts("storage-host", answers["storage_host"]),
            storage=answers["storage"],
            shared_path=answers["shared_path"],
            gpu=answers["gpu"],
            fabric=answers["fabric"],
            driver_source=answers["driver_source"],
            containers=answers["containers"],
            monitoring=answers["monitoring"],
            ssh_user=answers["ssh_user"],
            ssh_key=answers["ssh_key"],
            ssh_args=answers["ssh_args"],
            apt_proxy=answers["apt_proxy"],
            mirror=answers["mirror"],
        )
        texts = scaffold.files(cluster)
    except scaffold.AnswerError as exc:
        gap = "" if exc.message.startswith(":") else " "
        raise InputError(f"--{exc.answer}{gap}{exc.message}") from None
    written = scaffold.write(directory, texts)
    click.echo(f"wrote {len(written)} files to {directory}; next: {directory}/README.md")

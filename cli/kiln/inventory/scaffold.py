"""`kiln inventory new`: a complete, commented starting inventory from a host list and a
few answers (GPU model, fabric, storage, driver source, containers, monitoring).

Every setting of every role is in the written files, each with its description and its
default (commented out, so later Kiln defaults still reach the cluster); the settings
the answers decide are written as values. Per-node hardware (GPUs, compute-rail ports)
goes to group_vars/slurm_compute/hardware.yml, where `kiln inventory discover --write`
puts what it reads. Releases are pinned by version; their sha256 are left empty for
`kiln inventory pins`, which fetches each from where the nodes will (NVIDIA's servers or
the mirror) and checks it, also against the digests Kiln documents.
"""

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln import argspec, formats, hostlist, paths, pinned, roles
from kiln.errors import InputError
from kiln.inventory.edit import lines

MAX_HOSTS = 100_000
# --gpu: the models Kiln knows, by a short name, and their GPUs per node.
GPUS: dict[str, tuple[str, int]] = {
    "a100": ("NVIDIA A100-SXM4-80GB", 8),
    "h100": ("NVIDIA H100 80GB HBM3", 8),
    "h200": ("NVIDIA H200", 8),
    "b200": ("NVIDIA B200", 8),
    "gb200": ("NVIDIA GB200", 4),  # an NVL72 compute tray: 4 GPUs beside 2 Grace CPUs
}
FABRICS = {"infiniband": "InfiniBand", "roce": "Ethernet", "none": "", "auto": ""}
DRIVER_SOURCES = ("debian", "cuda-repo", "ubuntu", "preinstalled")
# The driver branch NVIDIA's and Canonical's packages are asked for (CUDA 13).
DRIVER_BRANCH = "580"
# Per-node hardware, written for the compute nodes only (the health role also runs on
# the controllers, which have neither GPUs nor compute rails).
COMPUTE_SETTINGS = ("health_gpus", "health_ib_ports", "nvidia_driver_required")
# Settings Kiln's Python reads with no role declaring them (kiln.validation, schedules).
KILN_SETTINGS = {
    "validate_profile": "The validation profile `kiln validate` and `kiln burn-in` judge "
    "against: a shipped one (`kiln validate --help`) or a YAML file of your own.",
    "validate_schedule": "When `kiln validate --install-timer` runs validation on idle "
    "nodes (a systemd OnCalendar expression).",
}
KILN_DEFAULTS = {"validate_schedule": "Sun *-*-* 05:00:00"}  # kiln.schedules.VALIDATE


class AnswerError(InputError):
    """An answer `kiln inventory new` cannot use; the command names its option."""

    def __init__(self, answer: str, message: str) -> None:
        super().__init__(message)
        self.answer = answer


@dataclass(frozen=True)
class Node:
    name: str
    address: str = ""


@dataclass
class NewCluster:
    """The answers `kiln inventory new` is given."""

    name: str
    controllers: list[Node]
    compute: list[Node]
    login: list[Node] = field(default_factory=list)
    storage_hosts: list[Node] = field(default_factory=list)
    storage: str = "none"  # none, glusterfs, nfs:SERVER:/EXPORT
    shared_path: str = "/shared"
    gpu: str = "auto"
    fabric: str = "auto"
    driver_source: str = "cuda-repo"
    containers: bool = True
    monitoring: bool = True
    ssh_user: str = "root"
    ssh_key: str = ""
    ssh_args: str = ""  # extra ssh options (a bastion's ProxyJump)
    apt_proxy: str = ""
    mirror: str = ""  # a mirror of the releases: <mirror>/enroot, /pyxis, /nccl-tests, /hpcx
    command: str = ""  # the command that wrote it, for the README


def hosts(answer: str, values: tuple[str, ...]) -> list[Node]:
    """Hostlists, each optionally with as many addresses ('gpu[001-004]=10.0.0.[11-14]');
    a name or address no shell may see is refused."""
    found: list[Node] = []
    for value in values:
        names_text, _, addresses_text = value.partition("=")
        try:
            if hostlist.total(names_text) + len(found) > MAX_HOSTS:
                raise AnswerError(answer, f"{value!r}: more than {MAX_HOSTS:,} hosts")
            names = hostlist.expand(names_text)
            addresses = hostlist.expand(addresses_text) if addresses_text else []
        except ValueError as exc:
            raise AnswerError(answer, f"{value!r}: {exc}") from None
        if addresses and len(addresses) != len(names):
            raise AnswerError(
                answer, f"{value!r}: {len(names)} names but {len(addresses)} addresses"
            )
        for index, name in enumerate(names):
            if not formats.is_name(name):
                raise AnswerError(answer, f"{name!r}: host names {formats.NAME_RULE}")
            address = addresses[index] if addresses else ""
            if address and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.:_-]*", address):
                raise AnswerError(answer, f"{address!r}: not an address or host name")
            found.append(Node(name, address))
    return found


def files(cluster: NewCluster) -> dict[str, str]:
    """The inventory's files: {path relative to its directory: text}."""
    _check(cluster)
    decided = decisions(cluster)
    written = {"hosts.yml": _hosts_yml(cluster), "README.md": _readme(cluster)}
    catalogue = argspec.load_catalogue(paths.roles_dir())
    for role in roles.ROLES:
        names = [n for n, v in catalogue.items() if v.role == role and n not in COMPUTE_SETTINGS]
        extra = list(KILN_SETTINGS) if role == "validate" else []
        if not names and not extra:
            continue  # a role with nothing to set (node_library): no file
        written[f"group_vars/all/{role}.yml"] = _role_file(
            role, [*extra, *names], catalogue, decided
        )
    written["group_vars/slurm_compute/hardware.yml"] = _role_file(
        "", list(COMPUTE_SETTINGS), catalogue, decided, _HARDWARE_HEADER
    )
    return written


def _check(cluster: NewCluster) -> None:
    if not formats.is_name(cluster.name):
        raise AnswerError("name", f"{cluster.name!r}: cluster names {formats.NAME_RULE}")
    if len(cluster.controllers) not in (1, 2):
        raise AnswerError("controller", ": give 1, or 2 for a backup controller")
    if not cluster.compute:
        raise AnswerError("compute", ": give at least one compute node")
    every = [n.name for n in [*cluster.controllers, *cluster.login, *cluster.compute]]
    twice = sorted({n for n in every if every.count(n) > 1})
    if twice:
        raise AnswerError(
            "compute",
            f"{hostlist.compress(twice)}: named twice among the controllers, "
            "login and compute nodes",
        )
    if cluster.gpu not in ("auto", "none", *GPUS):
        raise AnswerError(
            "gpu", f"{cluster.gpu!r}: expected auto, none or one of {', '.join(GPUS)}"
        )
    if cluster.storage.startswith("nfs:"):
        server, _, export = cluster.storage.removeprefix("nfs:").partition(":")
        if not server or not export.startswith("/") or formats.autofs_word(export):
            raise AnswerError("storage", f"{cluster.storage!r}: expected nfs:SERVER:/EXPORT")
    elif cluster.storage == "glusterfs" and not cluster.storage_hosts:
        raise AnswerError("storage", "glusterfs: name its server(s), storage hosts")
    elif cluster.storage not in ("none", "glusterfs"):
        raise AnswerError(
            "storage", f"{cluster.storage!r}: expected none, glusterfs or nfs:SERVER:/EXPORT"
        )
    for answer, url in (("apt-proxy", cluster.apt_proxy), ("mirror", cluster.mirror)):
        if url and (why := formats.url(url)):
            raise AnswerError(answer, f"{url!r}: {why}")


def decisions(cluster: NewCluster) -> dict[str, tuple[Any, str]]:
    """The settings the answers decide: {variable: (value, why)}."""
    found: dict[str, tuple[Any, str]] = {}

    def set_(name: str, value: Any, why: str) -> None:
        found[name] = (value, why)

    if cluster.apt_proxy:
        set_(
            "base_apt_proxy",
            cluster.apt_proxy,
            "--apt-proxy: packages through a cache near the nodes",
        )
    set_("slurm_cluster_name", cluster.name, "--name")
    set_("slurm_accounting_enabled", True, "accounting (slurmdbd) on the first controller")
    shared = {"name": "shared", "path": cluster.shared_path}
    if cluster.storage.startswith("nfs:"):
        source = cluster.storage.removeprefix("nfs:")
        set_(
            "autofs_mounts",
            [{**shared, "type": "nfs", "source": source}],
            f"--storage {cluster.storage}",
        )
    elif cluster.storage == "glusterfs":
        source = "{{ groups['storage'][0] }}:/shared"
        set_(
            "autofs_mounts",
            [{**shared, "type": "glusterfs", "source": source}],
            "--storage glusterfs",
        )
    model, per_node = GPUS.get(cluster.gpu, ("", 0))
    fabric = FABRICS.get(cluster.fabric, "")
    if cluster.gpu != "none":
        set_("nvidia_driver_source", cluster.driver_source, "--driver-source")
        if cluster.driver_source in ("cuda-repo", "ubuntu"):
            set_("nvidia_driver_version", DRIVER_BRANCH, "the driver branch of CUDA 13")
        if cluster.driver_source == "cuda-repo":
            set_("nvidia_driver_cuda_repo_key_sha256", "", "`kiln inventory pins` fills it in")
        set_("nvidia_driver_required", True, "a compute node that shows no GPU is a fault")
        _release(set_, cluster, "nccl_tests", "the collectives suite's benchmark")
    if per_node:
        set_("health_gpus", per_node, f"--gpu {cluster.gpu}: {per_node}x {model}")
    if fabric:
        _release(set_, cluster, "hpcx", "MPI for the RDMA fabric")
    if cluster.gpu == "gb200":
        set_("slurm_topology_source", "nvlink", "NVL72 racks as Slurm blocks")
    elif cluster.fabric == "infiniband":
        set_("slurm_topology_source", "ibnetdiscover", "the switch tree from the fabric")
        set_("slurm_topology_fabric_hosts", [cluster.compute[0].name], "one node per fabric")
    if cluster.containers:
        _release(set_, cluster, "enroot", "--containers")
        set_("enroot_caps_sha256", "", PIN_WHY)
        _release(set_, cluster, "pyxis", "--containers")
    if not cluster.monitoring:
        set_("monitoring_enabled", False, "--no-monitoring")
    profile = _profile(model, fabric)
    if profile:
        set_("validate_profile", profile, f"the shipped profile for {per_node}x {model}")
    return found


PIN_WHY = "`kiln inventory pins -i DIR --write` fetches the release and fills it in"
# Where each release lies below --mirror (the layouts the roles' base URLs name).
MIRROR_DIRS = {"enroot": "enroot", "pyxis": "pyxis", "nccl_tests": "nccl-tests", "hpcx": "hpcx"}


def _release(set_: Any, cluster: NewCluster, role: str, why: str) -> None:
    set_(f"{role}_version", pinned.DEFAULT_VERSIONS[role], why)
    set_(f"{role}_sha256", "", PIN_WHY)
    if cluster.mirror:
        url = f"{cluster.mirror.rstrip('/')}/{MIRROR_DIRS[role]}"
        set_(f"{role}_base_url", url, "--mirror")


def _profile(model: str, fabric: str) -> str:
    from kiln.validation import profiles

    for name in profiles.shipped():
        hardware = profiles.load(name).hardware
        if hardware and model and model in hardware.gpu and hardware.fabric == fabric:
            return name
    return ""


def _hosts_yml(cluster: NewCluster) -> str:
    def group(nodes: list[Node]) -> dict[str, Any]:
        entries: dict[str, Any] = {}
        if all(not n.address for n in nodes):
            entries = {key: {} for key in ansible_ranges([n.name for n in nodes])}
        else:
            entries = {n.name: ({"ansible_host": n.address} if n.address else {}) for n in nodes}
        return {"hosts": entries}

    top: dict[str, Any] = {"ansible_user": cluster.ssh_user}
    if cluster.ssh_key:
        top["ansible_ssh_private_key_file"] = cluster.ssh_key
    if cluster.ssh_args:
        top["ansible_ssh_common_args"] = cluster.ssh_args
    children = {"slurm_controller": group(cluster.controllers)}
    if cluster.login:
        children["slurm_login"] = group(cluster.login)
    children["slurm_compute"] = group(cluster.compute)
    if cluster.storage_hosts:
        children["storage"] = group(cluster.storage_hosts)
    import yaml

    body = yaml.safe_dump({"all": {"vars": top, "children": children}}, sort_keys=False, width=100)
    return (
        f"# Cluster {cluster.name}, written by `kiln inventory new`. Groups: docs/inventory.md.\n"
        f"---\n{body}"
    )


def ansible_ranges(names: list[str]) -> list[str]:
    """Host keys in Ansible's range syntax (gpu[001:128]) where names run in order."""
    keys = []
    for part in _top_level(hostlist.compress(names)):
        match = re.fullmatch(r"([^\[]*)\[([^\]]+)\](.*)", part)
        if not match:
            keys.append(part)
            continue
        prefix, body, suffix = match.groups()
        for item in body.split(","):
            low, _, high = item.partition("-")
            keys.append(f"{prefix}[{low}:{high}]{suffix}" if high else f"{prefix}{low}{suffix}")
    return keys


def _top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current] if current else parts


_HARDWARE_HEADER = (
    "What the compute nodes have: the health check fails a node that shows less. "
    "`kiln inventory discover --write` fills these in from the nodes themselves."
)


def _role_file(
    role: str,
    names: list[str],
    catalogue: dict[str, argspec.VariableSpec],
    decided: dict[str, tuple[Any, str]],
    header: str = "",
) -> str:
    out = ["---"]
    title = header or (
        f"Role {role}: every setting with its default (roles/{role}/README.md). A commented "
        "line is the role's default; uncomment it to change it."
    )
    out += [f"# {text}" for text in textwrap.wrap(title, 86)]
    for name in names:
        variable = catalogue.get(name)
        role_of = variable.role if variable else "validate"
        description = KILN_SETTINGS.get(name) or str(
            (variable.spec if variable else {}).get("description", "")
        )
        out.append("")
        out += [f"# {text}" for text in textwrap.wrap(" ".join(description.split()), 86)]
        defaults = {**roles.defaults(role_of), **KILN_DEFAULTS}
        if name in decided:
            value, why = decided[name]
            out.append(f"# Set by kiln inventory new: {why}.")
            out.extend(lines(name, value))
        elif name in defaults:
            out.extend("# " + text for text in lines(name, defaults[name]))
        else:
            out.append(f"# {name}:")
    return "\n".join(out) + "\n"


def _readme(cluster: NewCluster) -> str:
    return f"""# Inventory of {cluster.name}

Written by `{cluster.command or "kiln inventory new"}`.
Ansible skips this file (`.md`). Next:

1. `kiln inventory discover -i DIR --write`: read every host (OS, GPUs by PCI id, RDMA
   ports) and write what follows (validation profile, GPUs and ports the health check
   expects, topology source).
2. `kiln inventory pins -i DIR --write`: fetch each pinned release once and write its
   sha256.
3. `kiln inventory check -i DIR`, then `kiln provision -i DIR` and
   `kiln validate -i DIR`.

`group_vars/all/<role>.yml` holds every setting of each role with its default;
`group_vars/slurm_compute/hardware.yml` what the compute nodes must show.
"""


def write(directory: Path, texts: dict[str, str]) -> list[Path]:
    """Write the files into DIRECTORY (made where missing)."""
    if directory.exists() and not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    written = []
    for relative, text in texts.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written

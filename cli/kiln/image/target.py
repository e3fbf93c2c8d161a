"""The inventory of an image build: one host, the build container, reached through
podman, with the variables of the compute node the image is for (`--like`, else the
first compute node). The other Kiln groups keep their members' names, so settings that
name them (a time server: `groups['slurm_controller'][0]`) still resolve.

Ansible reads the build inventory as it reads the operator's: `!vault` values stay
encrypted and `!unsafe` ones unrendered, and the whole files encrypted with
ansible-vault that apply to the `--like` node (which Kiln cannot read) are copied as the
build host's own variable files, in Ansible's order: group `all`, the node's other
groups by name, the node's own. Being host files, their values win over the readable
ones where a variable is set in both."""

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from kiln.inventory.spec import KILN_GROUPS, ClusterSpec, Host
from kiln.yaml_input import Dumper

# Modules piped to the container's Python: one `podman exec` per task
# (plugins/connection/kiln_podman.py).
CONNECTION = "kiln.cluster.kiln_podman"


def build_vars(like: Host, container: str) -> dict[str, Any]:
    """LIKE's variables without how Ansible reaches it (its address, user, SSH options),
    and the build container's instead."""
    kept = {k: v for k, v in like.vars.items() if not k.startswith("ansible_")}
    return {
        **kept,
        "ansible_connection": CONNECTION,
        "ansible_host": container,
        "ansible_python_interpreter": "/usr/bin/python3",
    }


def hosts_yml(spec: ClusterSpec, like: str, container: str) -> dict[str, Any]:
    compute = set(spec.group("slurm_compute"))
    children: dict[str, Any] = {
        "slurm_compute": {"hosts": {container: build_vars(spec.hosts[like], container)}}
    }
    for group in KILN_GROUPS:
        if group != "slurm_compute":
            children[group] = {"hosts": {h: {} for h in spec.group(group) if h not in compute}}
    return {"all": {"children": children}}


def encrypted_files(spec: ClusterSpec, like: str) -> list[str]:
    """The whole-file encrypted variable files (relative to the inventory) that apply to
    LIKE, in the order Ansible applies them."""

    def applies(rel: str) -> tuple[int, str] | None:
        # group_vars/NAME/FILE, or group_vars/NAME with .yml, .yaml or no extension
        kind, name, *inside = rel.split("/")
        name = name if inside else re.sub(r"\.ya?ml$", "", name)
        if kind == "host_vars":
            return (2, rel) if name == like else None
        if name == "all":
            return (0, rel)
        return (1, rel) if name in spec.hosts[like].groups else None

    return [rel for _, rel in sorted(filter(None, map(applies, spec.unchecked)))]


def write(spec: ClusterSpec, like: str, container: str, directory: Path) -> ClusterSpec:
    """The build inventory written to DIRECTORY/hosts.yml (and the encrypted files that
    apply to LIKE under host_vars/CONTAINER/), and its spec for the run."""
    tree = hosts_yml(spec, like, container)
    source = directory / "hosts.yml"
    source.write_text(yaml.dump(tree, Dumper=Dumper, sort_keys=False))
    encrypted = encrypted_files(spec, like)
    if encrypted:
        own = directory / "host_vars" / container
        own.mkdir(parents=True)
        for number, rel in enumerate(encrypted):
            name = re.sub(r"\.ya?ml$", "", rel.replace("/", "-"))
            shutil.copyfile(spec.path / rel, own / f"{number:02d}-{name}.yml")
    children = tree["all"]["children"]
    groups = {g: list(children[g]["hosts"]) for g in children}
    hosts = {
        name: Host(name, [g for g in groups if name in groups[g]], values or {})
        for g in children
        for name, values in children[g]["hosts"].items()
    }
    return ClusterSpec(path=directory, source=source, hosts=hosts, groups=groups)

"""The inventory of an image build: one host, the build container, reached through
podman, with the variables of the compute node the image is for (`--like`, else the
first compute node). The other Kiln groups keep their members' names, so settings that
name them (a time server: `groups['slurm_controller'][0]`) still resolve."""

from pathlib import Path
from typing import Any

import yaml

from kiln.inventory.spec import KILN_GROUPS, ClusterSpec, Host

CONNECTION = "containers.podman.podman"


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


def write(spec: ClusterSpec, like: str, container: str, directory: Path) -> ClusterSpec:
    """The build inventory written to DIRECTORY/hosts.yml, and its spec for the run."""
    tree = hosts_yml(spec, like, container)
    source = directory / "hosts.yml"
    source.write_text(yaml.safe_dump(tree, sort_keys=False))
    children = tree["all"]["children"]
    groups = {g: list(children[g]["hosts"]) for g in children}
    hosts = {
        name: Host(name, [g for g in groups if name in groups[g]], values or {})
        for g in children
        for name, values in children[g]["hosts"].items()
    }
    return ClusterSpec(path=directory, source=source, hosts=hosts, groups=groups)

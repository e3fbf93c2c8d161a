"""What an inventory declares, in the terms the CLI and reports reason about."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kiln import hostlist
from kiln.errors import InputError

KILN_GROUPS = ("slurm_controller", "slurm_compute", "slurm_login", "storage")


class Host(BaseModel):
    name: str
    groups: list[str]
    vars: dict[str, Any]

    @property
    def address(self) -> str:
        return str(self.vars.get("ansible_host", self.name))


class ClusterSpec(BaseModel):
    """What an inventory declares, in the terms the CLI and reports reason about."""

    path: Path  # the inventory's directory (group_vars/, relative file names)
    source: Path  # what Ansible is given: that directory, or the one file named
    hosts: dict[str, Host]
    groups: dict[str, list[str]]
    warnings: list[str] = []
    # Files Kiln could not look into (whole-file ansible-vault); Ansible reads them.
    unchecked: list[str] = []

    def group(self, name: str) -> list[str]:
        return self.groups.get(name, [])

    def compute_nodes(self, asked: list[str] | None, purpose: str) -> list[str]:
        """The compute nodes asked for (each must be one), or all of them, in hostlist
        order; InputError when there are none to PURPOSE (e.g. "validate")."""
        compute = self.group("slurm_compute")
        if not asked:
            if not compute:
                raise InputError(f"{self.path}: no host in slurm_compute to {purpose}")
            return sorted(compute, key=hostlist.sort_key)
        outside = [n for n in asked if n not in compute]
        if outside:
            raise InputError(
                f"{hostlist.compress(outside)} not in the inventory's slurm_compute "
                f"({hostlist.compress(compute) or 'empty'})"
            )
        return sorted(set(asked), key=hostlist.sort_key)

    def kiln_roles(self, host: str) -> list[str]:
        return [g for g in KILN_GROUPS if host in self.groups.get(g, [])]

    def positions(self, hosts: list[str]) -> dict[str, str]:
        """Each host's role and place in it, e.g. "slurm_compute 3": its first Kiln
        group and its 1-based index there in hostlist order. Hosts keep their position
        when a migration renames them, so reports of two clusters line up by it."""
        found = {}
        for host in hosts:
            roles = self.kiln_roles(host)
            if roles:
                members = sorted(self.group(roles[0]), key=hostlist.sort_key)
                found[host] = f"{roles[0]} {members.index(host) + 1}"
        return found


class InventoryError(InputError):
    """One or more problems in an inventory; each is one line of the message."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Definition:
    """One variable as written in one place, so errors can name that place."""

    source: str
    name: str
    value: Any

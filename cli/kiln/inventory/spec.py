"""What an inventory declares, in the terms the CLI and reports reason about."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kiln import hostlist
from kiln.errors import InputError

KILN_GROUPS = ("slurm_controller", "slurm_compute", "slurm_login", "storage")


@dataclass
class Host:
    """A plain dataclass, not a model: the reader builds one per host from checked parts,
    and validating 100,000 of them again took seconds."""

    name: str
    groups: list[str]
    vars: dict[str, Any]  # may be one dict with other hosts of the same groups: read only

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
        members = set(compute)
        outside = [n for n in asked if n not in members]
        if outside:
            raise InputError(
                f"{hostlist.compress(outside)} not in the inventory's slurm_compute "
                f"({hostlist.compress(compute) or 'empty'})"
            )
        return sorted(set(asked), key=hostlist.sort_key)

    def kiln_roles(self, host: str) -> list[str]:
        # The host's own few groups, not each Kiln group's (long) list of hosts.
        found = self.hosts.get(host)
        return [g for g in KILN_GROUPS if g in found.groups] if found else []

    def positions(self, hosts: list[str]) -> dict[str, str]:
        """Each host's role and place in it, e.g. "slurm_compute 3": its first Kiln
        group and its 1-based index there in hostlist order. Hosts keep their position
        when a migration renames them, so reports of two clusters line up by it."""
        places: dict[str, dict[str, int]] = {}  # each role's order, computed once
        found = {}
        for host in hosts:
            roles = self.kiln_roles(host)
            if roles:
                if roles[0] not in places:
                    members = sorted(self.group(roles[0]), key=hostlist.sort_key)
                    places[roles[0]] = {name: index for index, name in enumerate(members, 1)}
                found[host] = f"{roles[0]} {places[roles[0]][host]}"
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

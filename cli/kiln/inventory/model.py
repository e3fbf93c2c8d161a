"""What an inventory declares, in the terms the CLI and reports reason about."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

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

    def kiln_roles(self, host: str) -> list[str]:
        return [g for g in KILN_GROUPS if host in self.groups.get(g, [])]


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

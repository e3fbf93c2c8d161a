"""The roles and where each one's Python lives: one entry per role of roles/.

A role's logic is the module (or package) named after it, `kiln.roles.<role>`; its
filter plugin, plugins/filter/kiln_<role>.py, calls it. A role without one
(glusterfs_server) has no Python logic. Each entry names the inventory groups whose
hosts the role runs on (the plays of playbooks/ that apply it; tests/unit/test_roles.py
reads them); a role that no play applies, only other roles (node_library), has none.
Every variable of a role begins with its prefix, `<role>_`. What the inventory checks
take from a role's module, by name:

- `settings_problems(settings)`: the role's settings taken together (a version and its
  sha256), as each host of its groups resolves them, without the prefix; one line per
  problem.
- `INVENTORY_CHECKS`: `{variable: (type, check)}`, one value at a time.

Modules are imported when asked for, so a filter plugin that reads a role's defaults
loads no other role's module.

Each entry also says which operating systems and releases the role supports
(`platforms`): the pre-flight (kiln.os_support) refuses any other before a change.
"""

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from kiln import paths

SettingsCheck = Callable[[dict[str, Any]], list[str]]
ValueCheck = tuple[type, Callable[[Any, dict[str, list[str]]], None]]

# The releases tested (docs/index.md says how), by Ansible's distribution fact: Debian by
# its major version, Ubuntu by its version (22.04, 24.04).
SUPPORTED: dict[str, tuple[str, ...]] = {"Debian": ("12", "13"), "Ubuntu": ("22.04", "24.04")}


@dataclass(frozen=True)
class Role:
    name: str
    # The inventory groups whose hosts it runs on ("all": every host); none for a role
    # that only other roles apply.
    groups: tuple[str, ...]
    # {distribution: releases} it supports (meta/main.yml's platforms say the same).
    platforms: dict[str, tuple[str, ...]] = field(default_factory=lambda: SUPPORTED)

    @property
    def prefix(self) -> str:
        return f"{self.name}_"

    @property
    def module(self) -> str:
        """Where its logic is, if it has any: the module named after it, always."""
        return f"kiln.roles.{self.name}"

    def logic(self) -> ModuleType | None:
        """Its module, imported now; None for a role without Python logic."""
        try:
            return importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            if exc.name != self.module:
                raise
            return None

    def settings_check(self) -> SettingsCheck | None:
        return getattr(self.logic(), "settings_problems", None)

    def value_checks(self) -> dict[str, ValueCheck]:
        return getattr(self.logic(), "INVENTORY_CHECKS", {})

    def hosts(self, groups: dict[str, list[str]], every_host: Iterable[str]) -> list[str]:
        """The hosts it runs on, each once, in the order of its groups."""
        return list(
            dict.fromkeys(
                host
                for group in self.groups
                for host in (every_host if group == "all" else groups.get(group, []))
            )
        )

    def defaults(self) -> dict[str, Any]:
        return defaults(self.name)


# In the order playbooks/site.yml applies them; validate runs in validate.yml.
ROLES: dict[str, Role] = {
    role.name: role
    for role in (
        Role("base", ("all",)),
        # Imported by base, included by each role whose node programs import kiln_node.
        Role("node_library", ()),
        Role("nvidia_driver", ("slurm_compute",)),
        Role("glusterfs_server", ("storage",)),
        Role("autofs", ("all",)),
        Role("health", ("slurm_compute", "slurm_controller")),
        Role("munge", ("slurm_controller", "slurm_compute", "slurm_login")),
        Role("slurm", ("slurm_controller", "slurm_compute", "slurm_login")),
        Role("repair", ("slurm_compute", "slurm_controller")),
        Role("mpi", ("slurm_compute", "slurm_login")),
        Role("hpcx", ("slurm_compute", "slurm_login")),
        Role("nccl_env", ("slurm_compute",)),
        Role("nccl_tests", ("slurm_compute",)),
        Role("enroot", ("slurm_compute", "slurm_login")),
        Role("pyxis", ("slurm_controller", "slurm_compute", "slurm_login")),
        Role("monitoring", ("all",)),
        Role("validate", ("slurm_controller", "slurm_compute")),
    )
}


def applied_to(host: str, groups: dict[str, list[str]]) -> list[str]:
    """The roles playbooks/site.yml applies to `host` (each by its groups), in its order:
    every role but validate, which validate.yml applies."""
    return [
        role.name
        for role in ROLES.values()
        if role.name != "validate"
        and any(group == "all" or host in groups.get(group, ()) for group in role.groups)
    ]


# Cluster-wide settings a role declares (its defaults and argument spec) without its
# prefix: more than the role reads them (kiln rollout reads the cap too). Variable ->
# the role that declares it.
CLUSTER_WIDE: dict[str, str] = {"rollout_max_unavailable": "nvidia_driver"}


def defaults(role: str, roles_dir: Path | None = None) -> dict[str, Any]:
    """The role's defaults as its defaults/main.yml writes them (none without one); a
    Jinja expression stays its text, which Ansible resolves on each host."""
    path = (roles_dir or paths.roles_dir()) / role / "defaults" / "main.yml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}

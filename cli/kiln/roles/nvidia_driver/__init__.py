"""The nvidia_driver role's logic (roles/nvidia_driver), by job: `hardware` (sysfs),
`versions` (loaded and installed modules, version rules), `apt` (the packages' pin),
`node_plan` (one node's plan and fact), `reboots` (reboots and the room for them),
`settings` (the inventory pre-flight). The registry (kiln.roles) takes the role's
checks from here by name."""

from typing import Any

CHECKS = ("INVENTORY_CHECKS", "settings_problems")


def __getattr__(name: str) -> Any:
    # The registry's checks, imported when asked for: a filter plugin that reads the
    # hardware or the apt policy loads no settings checks.
    if name in CHECKS:
        from kiln.roles.nvidia_driver import settings

        return getattr(settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

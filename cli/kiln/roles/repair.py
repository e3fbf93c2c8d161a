"""The repair role's logic on the control node: its settings as `kiln inventory check`
judges them, by the same rules kiln-repair applies on the controller
(kiln_node.repair_decision.settings, kiln_node.bmc_power), before any node is touched."""

from typing import Any

from kiln_node import bmc_power, repair_decision

_DECIDING = ("max_unavailable", "rma_after", "rma_window_s", "retry_after_s", "back_after_s")


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """One line per problem in the repair_* settings (given without the prefix); a
    value still a Jinja expression is Ansible's to resolve on the host."""
    given = {
        f"repair_{name}": _number(settings[name])
        for name in _DECIDING
        if name in settings and "{{" not in str(settings[name])
    }
    try:
        repair_decision.settings(given)
    except repair_decision.SettingsError as exc:
        return [str(exc)]
    return []


def _number(value: Any) -> Any:
    """An inventory's "3" is the whole number Ansible makes of it (repair_rma_after: '3')."""
    return int(value) if isinstance(value, str) and value.isdigit() else value


def _check_bmc_address(value: object, _groups: Any = None) -> None:
    """A compute node's BMC for the repair loop's power cycle, as kiln-repair reads it."""
    try:
        bmc_power.base_url(str(value))
    except bmc_power.BmcError as exc:
        raise ValueError(str(exc)) from None


# Inventory variables this module checks before anything runs (kiln.inventory.checks):
# name -> (the type the check applies to, the check; it raises ValueError).
INVENTORY_CHECKS = {"bmc_address": (str, _check_bmc_address)}

"""The validate role's logic (roles/validate) beside the judging floor it runs on: its
settings as `kiln inventory check` judges them (the registry, kiln.roles, takes
INVENTORY_CHECKS from here). What the role's filter hands to Python (the suites'
command lines, the drain decisions, the result paths) is the floor's own
(kiln.validation: registry, suites, drain, results), which every campaign judges by."""

from typing import Any

PROFILE_VARIABLE = "validate_profile"


def _check_profile(value: Any, _groups: object = None) -> None:
    """validate_profile names a shipped profile or a readable profile file: a misspelt
    one is refused by `kiln inventory check`, not when `kiln validate` starts."""
    from kiln.validation import profiles

    try:
        profiles.load(str(value))
    except profiles.ProfileError as exc:
        raise ValueError(f"{PROFILE_VARIABLE}: {exc.message}") from None


# `kiln inventory check` (through the role registry: kiln.roles, role validate).
INVENTORY_CHECKS = {PROFILE_VARIABLE: (str, _check_profile)}

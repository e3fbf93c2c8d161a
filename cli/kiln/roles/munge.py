"""Checks on a munge key supplied in the inventory, before anything runs."""

import base64
import binascii

# munge accepts keys from 32 bytes (256 bits) up to 1 KiB.
MIN_KEY_BYTES = 32
MAX_KEY_BYTES = 1024


def key_problem(value: str) -> str | None:
    """Why a base64 munge key is unusable, or None. Never echoes the key."""
    text = "".join(str(value).split())
    if not text:
        return None
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return "is not valid base64"
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        return f"decodes to {len(key)} bytes; a munge key has {MIN_KEY_BYTES} to {MAX_KEY_BYTES}"
    return None


def _check_key(value: object, groups: dict[str, list[str]]) -> None:
    problem = key_problem(str(value))
    if problem:
        raise ValueError(f"munge_key_b64 {problem}")


# Inventory variables this module checks before anything runs (kiln.inventory.checks):
# name -> (the type the check applies to, the check; it raises ValueError).
INVENTORY_CHECKS = {"munge_key_b64": (str, _check_key)}

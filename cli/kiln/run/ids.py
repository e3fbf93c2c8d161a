"""Ids of what Kiln keeps in its state directory (ansible runs, validation runs): they
sort by time, and an operator names one by id, a unique prefix of it, or 'latest'."""

import secrets
from datetime import UTC, datetime
from pathlib import Path

from kiln.errors import InputError


def new_id(label: str = "") -> str:
    """UTC time, an optional label, a random suffix: 20261122-231500-site-3fa2."""
    parts = [datetime.now(UTC).strftime("%Y%m%d-%H%M%S"), label, secrets.token_hex(2)]
    return "-".join(part for part in parts if part)


def pick(known: list[str], wanted: str, what: str, where: Path, listing: str) -> str:
    """One of `known` (newest first) by id, unique id prefix, or 'latest'; else a one-line
    error naming `what` and the command (`listing`) that lists them."""
    if wanted == "latest":
        matches = known[:1]
    else:
        matches = [k for k in known if k == wanted] or [k for k in known if k.startswith(wanted)]
    if not matches:
        raise InputError(f"no {what} {wanted!r} in {where} (see `{listing}`)")
    if len(matches) > 1:
        raise InputError(f"{what} {wanted!r} is ambiguous: {', '.join(matches[:5])}")
    return matches[0]

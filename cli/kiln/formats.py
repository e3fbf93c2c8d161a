"""What a value may hold where it lands in a file Kiln writes: one rule per format.

A value written into a config file is text inside that file's syntax: a line break
starts a new setting, a quote ends a string, a space starts the next word. So every
value is checked against what its place allows, by `kiln inventory check` (through the
INVENTORY_CHECKS of the module that owns the variable) and again by the role, on the
value Ansible resolved, before anything is written. Each function returns why the value
does not fit ("" when it does), never repeating the value: some are secrets; the caller
names the variable and, where it may, the value.
"""

import re
from typing import Any

# Host, cluster, partition and switch names: what Slurm's hostlists, shells and every
# report take as one plain name.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
NAME_RULE = "may hold only letters, digits, '.', '_' and '-'"

# One word of a whitespace-separated file (slurm.conf, limits.conf, chrony's sources):
# printable ASCII but the space, '"' (Slurm's quotes), '#' (a comment) and '\'
# (an escape, or a line continued).
_WORD = re.compile(r"[!$-\[\]-~]+")
WORD_RULE = "must be one word of printable ASCII: no spaces, line breaks, '\"', '#' or '\\'"

# One word of an autofs map line: as _WORD, but '#' is a character there and '\'
# escapes the next one (`:sshfs\#host\:/dir`, as autofs documents for FUSE mounts); a
# '\' at the end would continue the line.
_AUTOFS_WORD = re.compile(r"(?:[!#-\[\]-~]|\\[!-~])+")
AUTOFS_WORD_RULE = (
    "must be one word of printable ASCII: no spaces, line breaks or '\"', and a '\\' only "
    "before another character"
)

# A URL as apt reads it inside apt.conf's quotes and in a deb822 sources field: a
# scheme, then only the characters RFC 3986 allows (none of them a quote or a space).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+")
URL_RULE = (
    "expected a URL (http://host:3142/...) of the characters URLs allow: no spaces, "
    "quotes or line breaks"
)

# Slurm's time format (MaxTime and the like): INFINITE or UNLIMITED, or minutes,
# minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
# days-hours:minutes:seconds; ASCII digits only.
_SLURM_TIME = re.compile(r"(?i:infinite|unlimited)|[0-9]+(?:-[0-9]+)?(?::[0-9]+){0,2}")
SLURM_TIME_RULE = "expected INFINITE, minutes (60), or [days-]hours:minutes:seconds (1-00:00:00)"
# A slurm.conf key, and a key=value word of a NodeName or PartitionName line.
_SLURM_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")

# enroot.conf: enroot expands each value in a shell, so a value may use only the
# expansions its documentation shows, `$(id -u)`, `$(id -g)` and `${VARIABLE}`, among
# plain characters. A path has no spaces.
_ENROOT_VARIABLE = r"\$\{[A-Za-z_][A-Za-z0-9_]*\}"
_ENROOT_EXPANSION = rf"\$\(id -[ug]\)|{_ENROOT_VARIABLE}"
_ENROOT_PATH = re.compile(
    rf"(?:/|{_ENROOT_VARIABLE})(?:[A-Za-z0-9._/+@%:,=-]|{_ENROOT_EXPANSION})*"
)
_ENROOT_VALUE = re.compile(rf"(?:[A-Za-z0-9._/+@%:,= -]|{_ENROOT_EXPANSION})*")
ENROOT_EXPANSIONS = "$(id -u), $(id -g) and ${VARIABLE}"


def is_name(value: Any) -> bool:
    return isinstance(value, str) and NAME.fullmatch(value) is not None


def word(value: Any) -> str:
    """One word of a whitespace-separated config file."""
    return "" if _WORD.fullmatch(_text(value)) else WORD_RULE


def autofs_word(value: Any) -> str:
    return "" if _AUTOFS_WORD.fullmatch(_text(value)) else AUTOFS_WORD_RULE


def one_line(value: Any) -> str:
    """A value that may hold spaces but must stay on its line: no control character
    (a line break is a new setting) and no '\\' at the end (which continues the line in
    systemd units and slurm.conf)."""
    text = _text(value)
    if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in text) or text.endswith("\\"):
        return "must be one line: no line breaks or other control characters, no '\\' at the end"
    return ""


def url(value: Any) -> str:
    return "" if _URL.fullmatch(_text(value)) else URL_RULE


def slurm_key(value: Any) -> str:
    return "" if _SLURM_KEY.fullmatch(_text(value)) else "is not a Slurm setting name"


def slurm_time(value: Any) -> str:
    return "" if _SLURM_TIME.fullmatch(_text(value)) else SLURM_TIME_RULE


def enroot_path(value: Any) -> str:
    text = _text(value)
    if not _ENROOT_PATH.fullmatch(text) or "/../" in text or text.endswith("/.."):
        return (
            "expected an absolute path (or one from ${VARIABLE}) of letters, digits and "
            f"._/+@%:,=- with no '..', which may use {ENROOT_EXPANSIONS} (enroot expands it in "
            "a shell)"
        )
    return ""


def enroot_value(value: Any) -> str:
    if not _ENROOT_VALUE.fullmatch(_text(value)):
        return (
            "may hold only letters, digits, spaces and ._/+@%:,=-, and "
            f"{ENROOT_EXPANSIONS} (enroot expands it in a shell)"
        )
    return ""


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value if isinstance(value, str) else str(value)

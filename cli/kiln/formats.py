"""What a value may hold where it lands in a file Kiln writes: one rule per format.

A value written into a config file is text inside that file's syntax: a line break
starts a new setting, a quote ends a string, a space starts the next word. So every
value is checked against what its place allows, by `kiln inventory check` (through the
INVENTORY_CHECKS of the module that owns the variable) and again by the role, on the
value Ansible resolved, before anything is written. Each function returns why the value
does not fit ("" when it does), never repeating the value: some are secrets; the caller
names the variable and, where it may, the value.
"""

import ipaddress
import posixpath
import re
import urllib.parse
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


# An absolute path Kiln writes into a command line or a config file, or makes a
# directory of: plain characters (none a shell, systemd or a quoted ARGS= line reads
# specially), and normalised, so that it names the directory it seems to: no '.' or
# '..' part ('/srv/x/../../etc/cron.d'), no '//' and no '/' at the end.
_PATH = re.compile(r"/[A-Za-z0-9._+/-]*")
PATH_RULE = (
    "expected an absolute path of letters, digits and . _ + - /, with no '.' or '..' "
    "part, no '//' and no '/' at the end"
)

# A URL Kiln downloads from (get_url, on the control node or on each node): what _URL
# allows, of a scheme get_url fetches, with a host but for file:, and no '.' or '..'
# in its path, encoded or not (file:///../../etc). A base URL has a file name added to
# it: no query or fragment either.
_DOWNLOAD_SCHEMES = ("http", "https", "ftp", "file")
DOWNLOAD_URL_RULE = (
    "expected an http, https, ftp or file URL of the characters URLs allow (no spaces, "
    "quotes or line breaks), with a host (but file:) and no '.' or '..' in its path"
)
BASE_URL_RULE = f"{DOWNLOAD_URL_RULE}, nor '?' or '#' (Kiln adds a file name to it)"

# A systemd OnCalendar expression (systemd.time(7)): weekdays, dates, times, ranges
# (Mon..Fri), lists, repetitions (/2), '~', timestamps (@1700000000) and time zones
# (Europe/Berlin, Etc/GMT+5). A ';' or a line break is no part of one.
_CALENDAR = re.compile(r"[A-Za-z0-9 *.,:~/_+@-]+")
CALENDAR_CHARACTERS = "letters, digits, spaces and * . , : ~ / _ + @ -"

# A Debian package name (Debian Policy 5.6.7), as apt's preferences and the apt module
# take it: a glob ('*', '?') and an architecture (':amd64') or version ('=1.2-1') too.
# Nothing else: apt-get would read a name starting with '-' as an option.
_PACKAGE_NAME = re.compile(r"[a-z0-9*?][a-z0-9+.*?-]*")
_APT_VERSION = re.compile(r"[A-Za-z0-9.+~:*?-]+")
_PACKAGE = re.compile(rf"{_PACKAGE_NAME.pattern}(?::[a-z0-9-]+)?(?:={_APT_VERSION.pattern})?")
PACKAGE_RULE = "is not a Debian package name (lower-case letters, digits and + . -)"
APT_VERSION_RULE = "is not an apt version or glob (letters, digits and . + ~ : * ? -)"

# An account name (useradd's default rule): what `su`, `runuser` and chown take.
_USER = re.compile(r"[a-z_][a-z0-9_-]*")
# A program to run: a command name on PATH or an absolute path, one word.
_PROGRAM = re.compile(r"[A-Za-z0-9._+/-]+")
# A Python module to import (torch, torch.distributed).
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


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


def name(value: Any) -> str:
    return "" if is_name(value) else NAME_RULE


def absolute_path(value: Any) -> str:
    text = _text(value)
    plain = _PATH.fullmatch(text) is not None
    if not plain or posixpath.normpath(text) != text or text.startswith("//"):
        return PATH_RULE
    return ""


def download_url(value: Any) -> str:
    return "" if _download_url(_text(value)) else DOWNLOAD_URL_RULE


def base_url(value: Any) -> str:
    text = _text(value)
    return "" if _download_url(text) and not {"?", "#"} & set(text) else BASE_URL_RULE


def _download_url(text: str) -> bool:
    if not _URL.fullmatch(text):
        return False
    parts = urllib.parse.urlsplit(text)
    segments = urllib.parse.unquote(parts.path).split("/")
    return (
        parts.scheme.lower() in _DOWNLOAD_SCHEMES
        and (bool(parts.netloc) or parts.scheme.lower() == "file")
        and not {".", ".."} & set(segments)
    )


def calendar(value: Any) -> str:
    """A systemd OnCalendar expression, as far as its characters go (systemd-analyze
    judges the rest where it runs)."""
    if _CALENDAR.fullmatch(_text(value)):
        return ""
    return f"must be a systemd OnCalendar expression on one line, of {CALENDAR_CHARACTERS}"


def ip_address(value: Any) -> str:
    try:
        ipaddress.ip_address(_text(value))
    except ValueError:
        return "is not an IP address (10.0.0.1, fd00::1)"
    return ""


def package(value: Any) -> str:
    return "" if _PACKAGE.fullmatch(_text(value)) else PACKAGE_RULE


def package_name(value: Any) -> str:
    return "" if _PACKAGE_NAME.fullmatch(_text(value)) else PACKAGE_RULE


def apt_version(value: Any) -> str:
    return "" if _APT_VERSION.fullmatch(_text(value)) else APT_VERSION_RULE


def user(value: Any) -> str:
    if _USER.fullmatch(_text(value)):
        return ""
    return "is not an account name (lower-case letters, digits, '_' and '-')"


def program(value: Any) -> str:
    if _PROGRAM.fullmatch(_text(value)) and not _text(value).startswith("-"):
        return ""
    return "expected a command (python3) or its absolute path: letters, digits and . _ + - /"


def python_module(value: Any) -> str:
    return "" if _MODULE.fullmatch(_text(value)) else "is not a Python module name (torch)"


def argument(value: Any) -> str:
    """One word of a command's arguments (an image to run): printable ASCII without
    spaces, not starting with '-' (which would read as an option)."""
    text = _text(value)
    if re.fullmatch(r"[!-~]+", text) and not text.startswith("-"):
        return ""
    return "must be one word of printable ASCII, not starting with '-'"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value if isinstance(value, str) else str(value)

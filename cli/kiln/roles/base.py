"""The base role's settings that land in config files: apt's proxy (inside apt.conf's
quotes), chrony's sources and allowed networks, limits.conf, sysctl.d and systemd's
manager defaults. Each is checked against its file's format by `kiln inventory check`
and by the role's pre-flight, before it writes anything (kiln.inventory.checks).
"""

import re
from collections.abc import Callable
from typing import Any

from kiln import formats

# limits.conf's four fields, in order.
LIMIT_FIELDS = ("domain", "type", "item", "value")
_SYSCTL_KEY = re.compile(r"[A-Za-z0-9_*-]+(?:[./][A-Za-z0-9_*-]+)*")
_SYSTEMD_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")


class BaseSettingError(ValueError):
    """A base_* value its config file cannot hold; the message names the variable."""


def _fail(name: str, value: Any, why: str) -> None:
    if why:
        raise BaseSettingError(f"{name} {value!r}: {why}")


def check_apt_proxy(value: Any, _groups: Any = None) -> None:
    """Written as Acquire::http::Proxy "VALUE"; a quote would end the string."""
    _fail("base_apt_proxy", value, formats.url(value) if value else "")


def _check_words(name: str) -> Callable[[Any, Any], None]:
    """A list of chrony words: `server NAME iburst`, `allow NETWORK`."""

    def check(values: Any, _groups: Any = None) -> None:
        for value in values:
            _fail(name, value, formats.word(value))

    return check


def check_limits(values: Any, _groups: Any = None) -> None:
    """limits.conf: four whitespace-separated fields a line."""
    for limit in values:
        if not isinstance(limit, dict):
            continue  # the argument spec reports the type
        for field in LIMIT_FIELDS:
            if field in limit:
                _fail(f"base_limits {field}", limit[field], formats.word(limit[field]))


def check_sysctl(values: Any, _groups: Any = None) -> None:
    """sysctl.d: `key = value` a line; a value may hold spaces (tcp_rmem's three)."""
    for key, value in values.items():
        if not _SYSCTL_KEY.fullmatch(str(key)):
            _fail("base_sysctl", key, "is not a kernel setting name (net.core.rmem_max)")
        _fail(f"base_sysctl {key}", value, formats.one_line(value))


def check_systemd_limits(values: Any, _groups: Any = None) -> None:
    """A systemd unit file's `Key=value` lines ([Manager] of system.conf.d)."""
    for key, value in values.items():
        if not _SYSTEMD_KEY.fullmatch(str(key)):
            _fail("base_systemd_limits", key, "is not a systemd setting name")
        _fail(f"base_systemd_limits {key}", value, formats.one_line(value))


def check_address(name: str) -> Callable[[Any, Any], None]:
    """A host's address, written into chrony's sources (and /etc/hosts)."""
    return lambda value, _groups=None: _fail(name, value, formats.word(value))


INVENTORY_CHECKS = {
    "base_apt_proxy": (str, check_apt_proxy),
    "base_ntp_servers": (list, _check_words("base_ntp_servers")),
    "base_ntp_allow": (list, _check_words("base_ntp_allow")),
    "base_limits": (list, check_limits),
    "base_sysctl": (dict, check_sysctl),
    "base_systemd_limits": (dict, check_systemd_limits),
    "ansible_host": (str, check_address("ansible_host")),
    "kiln_address": (str, check_address("kiln_address")),
}

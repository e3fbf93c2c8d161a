"""Which hosts run an operating system that a role they get does not support
(kiln.roles: each role's `platforms`). The pre-flight refuses them before any change,
from each node's /etc/os-release (playbooks/preflight.yml: read raw, so a node without
Python is judged too); `kiln inventory check` from the facts an earlier run cached."""

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kiln import hostlist, paths, roles


def release(facts: Mapping[str, Any]) -> tuple[str, str]:
    """(distribution, release) as kiln.roles.SUPPORTED names them: Ubuntu by its version
    (24.04), others by their major version (Debian 12, Rocky 9). Facts as
    ansible_facts holds them, or as the fact cache does (with the ansible_ prefix)."""

    def fact(name: str) -> str:
        return str(facts.get(name, facts.get(f"ansible_{name}", "")) or "")

    distribution = fact("distribution") or "unknown"
    if distribution == "Ubuntu":
        return distribution, fact("distribution_version")
    return distribution, fact("distribution_major_version") or fact("distribution_version")


# os-release IDs as Ansible's distribution fact names them; others keep their NAME.
_DISTRIBUTIONS = {"debian": "Debian", "ubuntu": "Ubuntu"}


def os_release(text: str) -> tuple[str, str]:
    """(distribution, release) from /etc/os-release's text (ID, VERSION_ID, NAME)."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            fields[key] = value.strip().strip('"').strip("'")
    distribution = _DISTRIBUTIONS.get(fields.get("ID", ""), fields.get("NAME") or "unknown")
    version = fields.get("VERSION_ID", "")
    if distribution != "Ubuntu":
        version = version.split(".")[0]
    return distribution, version


def _supported(platforms: Mapping[str, tuple[str, ...]]) -> str:
    return "; ".join(f"{name} {', '.join(versions)}" for name, versions in platforms.items())


def refusals(
    releases: Mapping[str, tuple[str, str]],
    groups: Mapping[str, Iterable[str]],
    every_host: Iterable[str],
) -> list[str]:
    """One line per operating system and set of refusing roles, naming the hosts, e.g.
    "rocky01: Rocky Linux 9 is not supported by base, autofs (supported: Debian 12, 13;
    Ubuntu 22.04, 24.04)". RELEASES: {host: (distribution, release)}; hosts not in it
    are not judged."""
    groups = {name: list(hosts) for name, hosts in groups.items()}
    every_host = list(every_host)
    by_host: dict[str, list[str]] = {}
    for role in roles.ROLES.values():
        for host in role.hosts(groups, every_host):
            if host not in releases:
                continue
            distribution, version = releases[host]
            if version not in role.platforms.get(distribution, ()):
                by_host.setdefault(host, []).append(role.name)
    lines: dict[str, list[str]] = {}
    for host, refusing in by_host.items():
        distribution, version = releases[host]
        supported = sorted({_supported(roles.ROLES[r].platforms) for r in refusing})
        line = (
            f"{distribution} {version} is not supported by {', '.join(refusing)}"
            f" (supported: {' / '.join(supported)})"
        )
        lines.setdefault(line, []).append(host)
    return [f"{hostlist.compress(hosts)}: {line}" for line, hosts in lines.items()]


def fact_files(host: str, cache: Path | None = None) -> list[Path]:
    """Where Ansible's jsonfile cache keeps HOST's facts: `s1_<host>` (ansible-core
    2.19), else `<host>` (earlier releases)."""
    cache = cache or paths.fact_cache()
    return [cache / f"s1_{host}", cache / host]


def cached_facts(hosts: Iterable[str], cache: Path | None = None) -> dict[str, dict[str, Any]]:
    """The facts an earlier run cached for each host that has them. Ansible's jsonfile
    cache: ansible-core 2.19 writes `s1_<host>` holding {"__payload__": the facts as JSON
    text}; earlier releases wrote `<host>` holding the facts. A file of another shape is
    taken as no facts."""
    found = {}
    for host in hosts:
        for path in fact_files(host, cache):
            try:
                facts = json.loads(path.read_text())
                if isinstance(facts, dict) and isinstance(facts.get("__payload__"), str):
                    facts = json.loads(facts["__payload__"])
            except (OSError, ValueError):
                continue
            if isinstance(facts, dict):
                found[host] = facts
                break
    return found

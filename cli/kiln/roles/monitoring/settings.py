"""The monitoring role's settings as `kiln inventory check` and the role's pre-flight
judge them (kiln.roles: INVENTORY_CHECKS, one value at a time), before any node is
touched: the hosts it names (inventory hosts only: the servers, node_exporter's and
dcgm-exporter's targets) and Grafana's key. The values written into its command lines
and config files are checked by their kinds (kiln.setting_kinds), of which
Prometheus's retention (a duration and a size in its own formats) are defined here.
monitoring_gpu_source's values are its argument spec's choices
(kiln.roles.monitoring.dcgm.SOURCES)."""

import re
from typing import Any

from kiln import pinned

# Prometheus's duration: units from largest to smallest, each at most once (1d12h).
_DURATION = re.compile(
    r"(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?", re.ASCII
)
DURATION_RULE = "is not a Prometheus duration such as 15d, 12h or 1w2d"
# --storage.tsdb.retention.size's units (Prometheus's storage documentation).
_SIZE = re.compile(r"[1-9]\d*(?:B|KB|MB|GB|TB|PB|EB)", re.ASCII)
SIZE_RULE = "is not a size such as 512MB or 50GB (units B, KB, MB, GB, TB, PB, EB)"


class MonitoringSettingError(ValueError):
    """A monitoring_* value Prometheus or its files cannot take; the message names it."""


def is_duration(value: Any) -> bool:
    """A positive Prometheus duration (0s keeps nothing, or means "unset" to some flags)."""
    text = str(value)
    positive = any(c in "123456789" for c in text)
    return positive and _DURATION.fullmatch(text) is not None


def is_size(value: Any) -> bool:
    return _SIZE.fullmatch(str(value)) is not None


def _inventory_hosts(name: str):
    """Prometheus scrapes inventory hosts only, each labelled with its inventory name: a
    name that is no host would be a target nobody declared (or a typo never scraped)."""

    def check(value: Any, groups: dict[str, list[str]] | None = None) -> None:
        known = {host for hosts in (groups or {}).values() for host in hosts}
        unknown = [host for host in value if host not in known]
        if unknown:
            raise MonitoringSettingError(
                f"{name}: {', '.join(map(repr, unknown))}"
                f" {'is not a host' if len(unknown) == 1 else 'are not hosts'} in the inventory"
            )

    return check


# The values written into files, each by its kind: kiln.setting_kinds.
INVENTORY_CHECKS = {
    name: (list, _inventory_hosts(name))
    for name in ("monitoring_servers", "monitoring_scrape_hosts", "monitoring_dcgm_exporter_hosts")
}


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """The settings taken together (without the monitoring_ prefix): Grafana's
    repository key is trusted only by its sha256, as NVIDIA's CUDA repository's is."""
    if settings.get("grafana") is True and (
        wrong := pinned.sha256_problem(
            "monitoring_grafana_repository_key_sha256",
            settings.get("grafana_repository_key_sha256"),
            "the repository's signing key's",
            "monitoring_grafana",
        )
    ):
        return [wrong]
    return []

"""The monitoring role's settings as `kiln inventory check` and the role's pre-flight
judge them (kiln.roles: INVENTORY_CHECKS, one value at a time), before any node is
touched: Prometheus's retention (a duration and a size in its own formats), the
scrape targets (inventory hosts only: node_exporter's and dcgm-exporter's), the ports,
and the values written into its command line and config files. monitoring_gpu_source's
values are its argument spec's choices (kiln.monitoring.dcgm.SOURCES)."""

import re
from typing import Any

from kiln import formats, pinned

# Prometheus's duration: units from largest to smallest, each at most once (1d12h).
_DURATION = re.compile(r"(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?")
DURATION_RULE = "is not a Prometheus duration such as 15d, 12h or 1w2d"
# --storage.tsdb.retention.size's units (Prometheus's storage documentation).
_SIZE = re.compile(r"[1-9]\d*(?:B|KB|MB|GB|TB|PB|EB)")
SIZE_RULE = "is not a size such as 512MB or 50GB (units B, KB, MB, GB, TB, PB, EB)"


class MonitoringSettingError(ValueError):
    """A monitoring_* value Prometheus or its files cannot take; the message names it."""


def is_duration(value: Any) -> bool:
    """A positive Prometheus duration (0s keeps nothing, or means "unset" to some flags)."""
    text = str(value)
    positive = any(c in "123456789" for c in text)
    return positive and _DURATION.fullmatch(text) is not None


def _duration(name: str):
    def check(value: Any, _groups: Any = None) -> None:
        if not is_duration(value):
            raise MonitoringSettingError(f"{name} {value!r}: {DURATION_RULE}")

    return check


def check_retention_size(value: Any, _groups: Any = None) -> None:
    if not _SIZE.fullmatch(str(value)):
        raise MonitoringSettingError(f"monitoring_retention_size {value!r}: {SIZE_RULE}")


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


def _word(name: str):
    """A value written into a service's command line (/etc/default's ARGS)."""

    def check(value: Any, _groups: Any = None) -> None:
        if why := formats.word(value):
            raise MonitoringSettingError(f"{name} {value!r}: {why}")

    return check


def _url(name: str):
    def check(value: Any, _groups: Any = None) -> None:
        if why := formats.url(value):
            raise MonitoringSettingError(f"{name} {value!r}: {why}")

    return check


def _port(name: str):
    def check(value: Any, _groups: Any = None) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
            raise MonitoringSettingError(f"{name} {value!r}: not a port (1-65535)")

    return check


PORTS = ("prometheus", "alertmanager", "node_exporter", "grafana", "dcgm_exporter")

INVENTORY_CHECKS = {
    **{f"monitoring_{p}_port": (int, _port(f"monitoring_{p}_port")) for p in PORTS},
    "monitoring_retention_time": (str, _duration("monitoring_retention_time")),
    "monitoring_retention_size": (str, check_retention_size),
    "monitoring_scrape_interval": (str, _duration("monitoring_scrape_interval")),
    "monitoring_scrape_hosts": (list, _inventory_hosts("monitoring_scrape_hosts")),
    "monitoring_dcgm_exporter_hosts": (list, _inventory_hosts("monitoring_dcgm_exporter_hosts")),
    "monitoring_listen_address": (str, _word("monitoring_listen_address")),
    "monitoring_storage_path": (str, _word("monitoring_storage_path")),
    "monitoring_repository_url": (str, _url("monitoring_repository_url")),
    "monitoring_grafana_repository_url": (str, _url("monitoring_grafana_repository_url")),
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

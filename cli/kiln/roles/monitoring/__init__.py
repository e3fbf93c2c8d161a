"""The monitoring role's logic (roles/monitoring, docs/monitoring.md), by job: `queries`
(the one query library over kiln_node.metrics' catalogue), `rules` (Prometheus's alert
and recording rules), `dashboards` (Grafana's dashboards and provisioning files),
`consoles` (Prometheus's console pages), `dcgm` (dcgm-exporter's fields as Kiln's
metrics), `settings` (the inventory pre-flight). The registry (kiln.roles) takes the
role's checks from here by name."""

from typing import Any

CHECKS = ("INVENTORY_CHECKS", "settings_problems")


def __getattr__(name: str) -> Any:
    # The registry's checks, imported when asked for: the filter that builds the rules
    # or dashboards loads no settings checks.
    if name in CHECKS:
        from kiln.roles.monitoring import settings

        return getattr(settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

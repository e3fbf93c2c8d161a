"""Grafana dashboards as code, built with Grafana's own typed builders
(grafana-foundation-sdk, generated from Grafana's schema: its release pinned in
pyproject.toml is the one for Grafana 11.6's dashboard JSON). Each panel is one or more
named queries of the library (kiln.roles.monitoring.queries, the one the alert rules
read) and how to show them (kiln.roles.monitoring.panel_display: units, thresholds,
colours, value mappings). The
monitoring role writes one JSON file per dashboard and the provisioning files that load
them with a Prometheus datasource, through the filters kiln_monitoring_dashboards and
kiln_monitoring_grafana_provisioning. The dashboards themselves, as data:
kiln.roles.monitoring.dashboard_panels."""

import json
from typing import Any

import yaml

from kiln.roles.monitoring.dashboard_panels import DASHBOARDS, Dashboard
from kiln.roles.monitoring.rules import seconds

DATASOURCE_UID = "kiln-prometheus"  # the datasource Kiln provisions
DATASOURCE_NAME = "Kiln Prometheus"


def dashboard_json(dashboard: Dashboard, datasource_uid: str = DATASOURCE_UID) -> dict:
    """Grafana's dashboard JSON model of DASHBOARD, as the foundation SDK writes it."""
    from kiln.roles.monitoring import grafana_build

    return grafana_build.dashboard(dashboard, datasource_uid)


def dashboard_files(datasource_uid: str | None = None) -> dict[str, str]:
    """{file name: JSON text}, one file per dashboard. DATASOURCE_UID: the Prometheus
    datasource the dashboards open on (Kiln's provisioned one by default; an existing
    Grafana's own)."""
    uid = datasource_uid or DATASOURCE_UID
    return {
        f"{d.uid}.json": json.dumps(dashboard_json(d, uid), indent=2) + "\n" for d in DASHBOARDS
    }


def provisioning_files(
    prometheus_url: str, dashboards_dir: str, scrape_interval: int | str = 15
) -> dict[str, str]:
    """Grafana's provisioning files, by path under its provisioning directory: the
    Prometheus datasource (uid DATASOURCE_UID) and the provider that loads the dashboard
    files from DASHBOARDS_DIR."""
    # Plain strings: YAML represents no subclass (Ansible hands a filter tagged ones).
    prometheus_url, dashboards_dir = str(prometheus_url), str(dashboards_dir)
    if not prometheus_url.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL of Prometheus: {prometheus_url!r}")
    if not dashboards_dir.startswith("/"):
        raise ValueError(f"not an absolute directory: {dashboards_dir!r}")
    interval = int(seconds(scrape_interval))
    datasource = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": DATASOURCE_NAME,
                "uid": DATASOURCE_UID,
                "type": "prometheus",
                "access": "proxy",
                "url": prometheus_url,
                "editable": False,
                # Grafana's $__rate_interval and step floor follow the scrape interval
                "jsonData": {"timeInterval": f"{interval}s", "httpMethod": "POST"},
            }
        ],
    }
    provider: dict[str, Any] = {
        "apiVersion": 1,
        "providers": [
            {
                "name": "kiln",
                "orgId": 1,
                "folder": "Kiln",
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 60,
                "options": {"path": dashboards_dir},
            }
        ],
    }
    header = "# Written by Kiln's monitoring role (kiln.roles.monitoring): do not edit.\n"
    return {
        "datasources/kiln.yaml": header + yaml.safe_dump(datasource, sort_keys=False),
        "dashboards/kiln.yaml": header + yaml.safe_dump(provider, sort_keys=False),
    }

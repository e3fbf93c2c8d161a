"""Grafana dashboards as code: each dashboard a list of panels, each panel one or more
named queries of the library (kiln.roles.monitoring.queries), turned into Grafana's dashboard
JSON (one file per dashboard) and the provisioning files that load them with a
Prometheus datasource. The monitoring role writes them through the filters
kiln_monitoring_dashboards and kiln_monitoring_grafana_provisioning."""

import json
from dataclasses import dataclass
from typing import Any

import yaml

from kiln.roles.monitoring.queries import query
from kiln.roles.monitoring.rules import seconds

DATASOURCE_UID = "kiln-prometheus"  # the datasource Kiln provisions
DATASOURCE_NAME = "Kiln Prometheus"
SCHEMA_VERSION = 39  # Grafana 10.4 / 11's dashboard JSON
WIDTH = 24  # Grafana's grid columns
# The node variable's choices: every node a target carries (the role labels each).
NODE_VALUES = "label_values(up, node)"


@dataclass(frozen=True)
class Panel:
    queries: tuple[str, ...]
    kind: str = "timeseries"  # or stat (one number), table (the series now, as rows)
    width: int = 12
    height: int = 8
    title: str = ""  # "": the first query's title


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...]
    one_node: bool = False  # the node variable picks one node, not any set of them


def _stat(name: str) -> Panel:
    return Panel((name,), "stat", 4, 4)


def _table(name: str, width: int = 12) -> Panel:
    return Panel((name,), "table", width)


# fmt: off
DASHBOARDS: tuple[Dashboard, ...] = (
    Dashboard("kiln-overview", "Kiln: cluster overview",
              "Targets, alerts, Slurm's view of the nodes and what Kiln drained.", (
        _stat("targets_up_count"), _stat("targets_count"), _stat("drained_by_kiln_count"),
        _stat("slurm_jobs_running"), _stat("slurm_jobs_pending"),
        _stat("active_last_run_age"),
        _table("alerts_firing_by_node"), _table("drained_by_kiln"),
        Panel(("slurm_node_states",)), Panel(("gpu_tflops_estimate",)),
        Panel(("gpu_temperature",)), _table("health_failing"),
    )),
    Dashboard("kiln-node", "Kiln: node detail",
              "One node: its load, GPUs, InfiniBand ports, checks and metric files.", (
        _stat("node_uptime"), _stat("slurm_node_state"), _stat("textfile_errors"),
        Panel(("node_load",), width=8), Panel(("node_cpu_busy",), width=8),
        Panel(("node_memory_used",), width=8), Panel(("node_filesystem_used",)),
        Panel(("textfile_age",)), _table("gpu_info", 24),
        Panel(("gpu_temperature", "gpu_temperature_ceiling"), title="GPU temperature"),
        Panel(("gpu_power", "gpu_power_limit"), title="GPU power"),
        Panel(("gpu_sm_clock",)), Panel(("gpu_memory_clock",)),
        Panel(("gpu_utilization",)), Panel(("gpu_memory_used",)),
        Panel(("gpu_ecc_uncorrected", "gpu_ecc_corrected"), title="GPU ECC errors"),
        Panel(("gpu_xids",)),
        Panel(("ib_rate",)), Panel(("ib_link_downed",)),
        Panel(("health_check",)), _table("drained_by_kiln"),
    ), one_node=True),
    Dashboard("kiln-gpu-fabric", "Kiln: GPU fleet and fabric",
              "Every GPU, NVLink and InfiniBand port: estimated FLOP/s, heat, power, "
              "clocks, errors and link flaps.", (
        Panel(("gpu_tflops_estimate",), width=24), _table("gpu_info", 24),
        Panel(("gpu_temperature",)), Panel(("gpu_power",)),
        Panel(("gpu_utilization",)), Panel(("gpu_sm_clock",)),
        Panel(("gpu_ecc_uncorrected",)), Panel(("gpu_xids",)),
        Panel(("gpu_remap_pending",)), Panel(("gpu_nvlink_errors",)),
        Panel(("ib_active",), width=24),
        Panel(("ib_rate",)), Panel(("ib_link_downed",)),
        Panel(("ib_symbol_errors",)), Panel(("ib_link_error_recovery",)),
    )),
    Dashboard("kiln-slurm", "Kiln: Slurm queue",
              "The queue by job state and the nodes by Slurm state, from the controller.", (
        _stat("slurm_jobs_running"), _stat("slurm_jobs_pending"),
        _stat("drained_by_kiln_count"),
        Panel(("slurm_jobs",)), Panel(("slurm_node_states",)),
        _table("drained_by_kiln"), _table("slurm_node_state"),
    )),
    Dashboard("kiln-checks", "Kiln: checks",
              "Kiln's node check, the scheduled active check and the last validate and "
              "burn-in: verdicts over time and when each last ran.", (
        _stat("active_last_run_age"), _stat("drained_by_kiln_count"),
        Panel(("result_last_run_age",), "stat", 8, 4),
        Panel(("result_verdicts",)), _table("result_verdict"),
        Panel(("health_check",)), _table("health_failing"),
        Panel(("health_last_run_age",)), Panel(("active_check",)),
        Panel(("result_busbw",), width=8), Panel(("result_flops",), width=8),
        Panel(("result_storage",), width=8),
    )),
)
# fmt: on

_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _target(name: str, ref: str, kind: str) -> dict[str, Any]:
    q = query(name)
    target: dict[str, Any] = {"datasource": _DATASOURCE, "refId": ref, "expr": q.expr}
    if kind != "timeseries":  # a stat or a table shows the value now
        target |= {"instant": True, "range": False}
    if kind == "table":  # each series a row, its labels columns
        target["format"] = "table"
    if q.legend:
        target["legendFormat"] = q.legend
    return target


def _panels(dashboard: Dashboard) -> list[dict[str, Any]]:
    """Panels placed left to right, a new row where the next one does not fit."""
    found = []
    x = y = row_height = 0
    for number, panel in enumerate(dashboard.panels, 1):
        if x + panel.width > WIDTH:
            x, y, row_height = 0, y + row_height, 0
        first = query(panel.queries[0])
        refs = [chr(ord("A") + i) for i in range(len(panel.queries))]
        found.append(
            {
                "id": number,
                "type": panel.kind,
                "title": panel.title or first.title,
                "datasource": _DATASOURCE,
                "gridPos": {"x": x, "y": y, "w": panel.width, "h": panel.height},
                "fieldConfig": {"defaults": {"unit": first.unit}, "overrides": []},
                "options": {},
                "targets": [
                    _target(name, ref, panel.kind)
                    for name, ref in zip(panel.queries, refs, strict=True)
                ],
            }
        )
        x += panel.width
        row_height = max(row_height, panel.height)
    return found


def _variables(dashboard: Dashboard, datasource_uid: str) -> list[dict[str, Any]]:
    many = not dashboard.one_node
    return [
        {
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus",
            "current": {"text": datasource_uid, "value": datasource_uid},
            "hide": 0,
        },
        {
            "name": "node",
            "label": "Node",
            "type": "query",
            "datasource": _DATASOURCE,
            "query": {"query": NODE_VALUES, "refId": "node"},
            "definition": NODE_VALUES,
            "refresh": 2,  # on time range change: nodes come and go
            "sort": 1,
            "multi": many,
            "includeAll": many,
            **({"allValue": ".+", "current": {"text": "All", "value": "$__all"}} if many else {}),
            "hide": 0,
        },
    ]


def dashboard_json(dashboard: Dashboard, datasource_uid: str = DATASOURCE_UID) -> dict:
    """Grafana's dashboard JSON model of DASHBOARD."""
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": ["kiln"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": False,  # provisioned: a change belongs in kiln.roles.monitoring.dashboards
        "graphTooltip": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "browser",
        "annotations": {"list": []},
        "templating": {"list": _variables(dashboard, datasource_uid)},
        "panels": _panels(dashboard),
    }


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
    provider = {
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

"""Grafana's dashboards and provisioning files (kiln.roles.monitoring.dashboards) and
Prometheus's console pages (kiln.roles.monitoring.consoles), all built from the query library,
as the monitoring role gets them through its filters. The metrics they name:
tests/unit/test_monitoring_rules.py."""

import json
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from kiln.roles.monitoring import consoles, dashboard_panels, dashboards, panel_display, queries
from tests.conftest import REPO
from tests.unit.test_filter_plugins import filters

FILES = dashboards.dashboard_files()
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def test_one_file_per_dashboard_the_issue_names():
    assert {name: json.loads(text)["title"] for name, text in FILES.items()} == {
        "kiln-overview.json": "Kiln: cluster overview",
        "kiln-node.json": "Kiln: node detail",
        "kiln-gpu-fabric.json": "Kiln: GPU fleet and fabric",
        "kiln-slurm.json": "Kiln: Slurm queue",
        "kiln-checks.json": "Kiln: checks",
    }


# Grafana 11.6's dashboard schema: the version the pinned grafana-foundation-sdk writes.
SCHEMA_VERSION = 41
# The unit a panel shows for the base unit its metric's name ends in (docs/monitoring.md,
# "Naming"), where the query is the metric itself or its age.
UNIT_OF_SUFFIX = {
    "_celsius": "celsius", "_watts": "watt", "_hertz": "hertz", "_bytes": "bytes",
    "_bytes_per_second": "Bps", "_ratio": "percentunit", "_timestamp_seconds": "s",
    "_seconds": "s", "_flops_per_second": "flops",
}  # fmt: skip


def panels(name: str) -> list[dict]:
    return json.loads(FILES[name])["panels"]


def the_panel(name: str, title: str, kind: str = "") -> dict:
    (found,) = [p for p in panels(name) if p["title"] == title and kind in ("", p["type"])]
    return found


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_dashboard_is_grafana_dashboard_json(name):
    model = json.loads(FILES[name])
    assert model["uid"] == name.removesuffix(".json")
    assert model["schemaVersion"] == SCHEMA_VERSION
    assert model["editable"] is False and model["tags"] == ["kiln"]
    assert model["annotations"]["list"][0]["builtIn"] == 1
    assert [p["id"] for p in model["panels"]] == list(range(1, len(model["panels"]) + 1))
    cells = set()
    library = {q.expr: q for q in queries.QUERIES.values()}
    for panel in model["panels"]:
        assert panel["type"] in ("timeseries", "stat", "table")
        assert panel["datasource"] == DATASOURCE
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= dashboard_panels.WIDTH, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        refs = [t["refId"] for t in panel["targets"]]
        assert refs == sorted(set(refs)) and refs[0] == "A"
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE
            assert target["expr"] in library, target["expr"]  # the alerts' library
            assert target.get("instant", False) is (panel["type"] != "timeseries")
        first = library[panel["targets"][0]["expr"]]
        assert panel["fieldConfig"]["defaults"]["unit"] == first.unit
        assert panel["description"].startswith(f"{first.title}: {first.expr}")


def test_a_panel_shows_the_unit_its_metric_is_written_in():
    """Every panel whose query is a metric itself (or the time since a timestamp) shows
    that metric's base unit; counts and states show plain numbers."""
    checked = {}
    for name in FILES:
        for panel in panels(name):
            expr = panel["targets"][0]["expr"]
            names = queries.metric_names(expr)
            metric = names.pop() if len(names) == 1 else ""
            selector = re.escape(metric) + r"(\{[^}]*\})?"
            plain = re.fullmatch(rf"(time\(\) - )?(max\({selector}\)|{selector})", expr)
            suffixes = [s for s in UNIT_OF_SUFFIX if metric.endswith(s)]
            if plain and suffixes:
                checked[metric] = panel["fieldConfig"]["defaults"]["unit"]
                assert checked[metric] == UNIT_OF_SUFFIX[max(suffixes, key=len)], panel["title"]
    assert {"kiln_gpu_temperature_celsius", "kiln_gpu_power_watts", "kiln_gpu_sm_clock_hertz",
            "kiln_gpu_memory_used_bytes", "kiln_gpu_utilization_ratio",
            "kiln_ib_port_rate_bytes_per_second", "kiln_result_flops_per_second",
            "kiln_metrics_last_run_timestamp_seconds"} <= set(checked)  # fmt: skip
    units = {the_panel(n, t)["fieldConfig"]["defaults"]["unit"] for n, t in (
        ("kiln-node.json", "Memory used"), ("kiln-node.json", "Filesystem used"),
        ("kiln-node.json", "CPU busy"))}  # fmt: skip
    assert units == {"percentunit"}
    assert the_panel("kiln-gpu-fabric.json", "NVLink errors per second")["fieldConfig"][
        "defaults"]["unit"] == "ops"  # fmt: skip


def test_counts_answer_0_not_no_data():
    """Every stat of a count asks for 0 when nothing matches (`or vector(0)`)."""
    for name in FILES:
        for panel in panels(name):
            expr = panel["targets"][0]["expr"]
            if panel["type"] == "stat" and expr.startswith(("count(", "sum(")):
                assert expr.endswith(" or vector(0)"), (name, panel["title"])


def test_no_panel_estimates_flops():
    """The estimated FLOP/s (utilization x the last measured rate) is gone: the rate
    shown is the one measured, and named so."""
    titles = {p["title"] for name in FILES for p in panels(name)}
    assert not [t for t in titles if "estimat" in t.lower()]
    assert the_panel("kiln-gpu-fabric.json", "Matmul rate, last run")["targets"][0]["expr"] == (
        'kiln_result_flops_per_second{node=~"$node"}'
    )


def test_the_slurm_state_stat_shows_the_state_by_name_whole():
    """The node page's Slurm state: the `state` label's text (IDLE+DRAIN), coloured by
    the words in it, not the 1 every kiln_slurm_node_state series has."""
    assert the_panel("kiln-node.json", "Slurm state") == {
        "type": "stat",
        "id": 2,
        "targets": [
            {
                "expr": 'kiln_slurm_node_state{node=~"$node"}',
                "refId": "A",
                "instant": True,
                "range": False,
                "format": "table",
                "legendFormat": "{{node}} {{state}}",
                "datasource": DATASOURCE,
            }
        ],
        "title": "Slurm state",
        "description": 'Slurm state: kiln_slurm_node_state{node=~"$node"}',
        "transparent": False,
        "datasource": DATASOURCE,
        "gridPos": {"h": 4, "w": 4, "x": 4, "y": 0},
        "repeatDirection": "h",
        "options": {
            "graphMode": "none",
            "colorMode": "background",
            "justifyMode": "auto",
            "textMode": "value",
            "wideLayout": True,
            "showPercentChange": False,
            "reduceOptions": {"calcs": ["lastNotNull"], "values": True, "fields": "/^state$/"},
            "percentChangeColorMode": "standard",
            "orientation": "auto",
        },
        "fieldConfig": {
            "defaults": {
                "unit": "short",
                "mappings": [
                    {
                        "type": "regex",
                        "options": {"pattern": pattern, "result": {"color": colour, "index": i}},
                    }
                    for i, (pattern, colour) in enumerate(
                        [
                            (".*(DOWN|FAIL|NOT_RESPONDING).*", "red"),
                            (".*(DRAIN|MAINT|REBOOT).*", "orange"),
                            ("(ALLOCATED|MIXED|COMPLETING).*", "blue"),
                            ("IDLE.*", "green"),
                        ]
                    )
                ],
            },
            "overrides": [],
        },
    }
    # Slurm's states as its scontrol prints them, each coloured by its first match
    colours = {
        state: next(c for p, c in panel_display.SLURM_STATES if re.match(p, state))
        for state in ("IDLE", "IDLE+DRAIN", "DOWN+NOT_RESPONDING", "MIXED", "ALLOCATED+DRAIN",
                      "IDLE+CLOUD+POWERED_DOWN")
    }  # fmt: skip
    assert colours == {
        "IDLE": "green", "IDLE+DRAIN": "orange", "DOWN+NOT_RESPONDING": "red",
        "MIXED": "blue", "ALLOCATED+DRAIN": "orange", "IDLE+CLOUD+POWERED_DOWN": "red",
    }  # fmt: skip


def test_a_state_panel_maps_numbers_to_words_and_colours_whole():
    """node_exporter's InfiniBand port state as words, the threshold colours drawn."""
    assert the_panel("kiln-gpu-fabric.json", "IB port state") == {
        "type": "timeseries",
        "id": 14,
        "targets": [
            {
                "expr": 'node_infiniband_state_id{node=~"$node"}',
                "refId": "A",
                "legendFormat": "{{node}} {{device}}/{{port}}",
                "datasource": DATASOURCE,
            }
        ],
        "title": "IB port state",
        "description": 'IB port state: node_infiniband_state_id{node=~"$node"}',
        "transparent": False,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12, "y": 56},
        "repeatDirection": "h",
        "options": {
            "legend": {
                "displayMode": "list",
                "placement": "bottom",
                "showLegend": True,
                "calcs": [],
            },
            "tooltip": {"mode": "single", "sort": "asc"},
        },
        "fieldConfig": {
            "defaults": {
                "unit": "short",
                "mappings": [
                    {
                        "type": "value",
                        "options": {
                            "1": {"text": "down", "color": "red", "index": 0},
                            "2": {"text": "init", "color": "orange", "index": 1},
                            "3": {"text": "armed", "color": "orange", "index": 2},
                            "4": {"text": "active", "color": "green", "index": 3},
                            "5": {"text": "active defer", "color": "orange", "index": 4},
                        },
                    }
                ],
                "thresholds": {
                    "mode": "absolute",
                    "steps": [
                        {"value": None, "color": "red"},
                        {"value": 2, "color": "orange"},
                        {"value": 4, "color": "green"},
                        {"value": 5, "color": "orange"},
                    ],
                },
                "color": {"mode": "thresholds"},
                "custom": {"thresholdsStyle": {"mode": "dashed"}},
            },
            "overrides": [],
        },
    }


def test_a_table_panel_is_its_library_query_whole():
    assert the_panel("kiln-overview.json", "Nodes drained by Kiln", "table") == {
        "type": "table",
        "id": 12,
        "targets": [
            {
                "expr": 'kiln_slurm_node_drain_info{node=~"$node"}',
                "refId": "A",
                "instant": True,
                "range": False,
                "format": "table",
                "legendFormat": "{{node}} {{by}}: {{reason}}",
                "datasource": DATASOURCE,
            }
        ],
        "title": "Nodes drained by Kiln",
        "description": 'Nodes drained by Kiln: kiln_slurm_node_drain_info{node=~"$node"}',
        "transparent": False,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12, "y": 8},
        "repeatDirection": "h",
        "fieldConfig": {"defaults": {"unit": "short"}, "overrides": []},
    }
    temperature = the_panel("kiln-node.json", "GPU temperature")
    assert [(t["refId"], t["expr"], t["legendFormat"]) for t in temperature["targets"]] == [
        ("A", 'kiln_gpu_temperature_celsius{node=~"$node"}', "{{node}} GPU {{gpu}}"),
        ("B", 'kiln_gpu_temperature_ceiling_celsius{node=~"$node"}', "{{node}} ceiling"),
    ]
    assert temperature["fieldConfig"]["defaults"]["unit"] == "celsius"


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_dashboard_picks_its_datasource_and_nodes(name):
    datasource, node = json.loads(FILES[name])["templating"]["list"]
    assert datasource == {
        "type": "datasource",
        "name": "datasource",
        "label": "Prometheus",
        "skipUrlSync": False,
        "query": "prometheus",
        "current": {"text": "kiln-prometheus", "value": "kiln-prometheus"},
        "multi": False,
        "allowCustomValue": True,
        "includeAll": False,
        "auto": False,
        "auto_min": "10s",
        "auto_count": 30,
    }
    many = name != "kiln-node.json"
    assert node == {
        "type": "query",
        "name": "node",
        "label": "Node",
        "skipUrlSync": False,
        "query": "label_values(up, node)",
        "datasource": DATASOURCE,
        "multi": many,
        "allowCustomValue": True,
        "refresh": 2,
        "sort": 1,
        "includeAll": many,
        "auto": False,
        "auto_min": "10s",
        "auto_count": 30,
        **({"allValue": ".+", "current": {"text": "All", "value": "$__all"}} if many else {}),
    }


def test_the_dashboards_open_on_an_existing_grafanas_datasource():
    files = dashboards.dashboard_files("PBFA97CFB590B2093")
    for text in files.values():
        datasource = json.loads(text)["templating"]["list"][0]
        assert datasource["current"] == {"text": "PBFA97CFB590B2093", "value": "PBFA97CFB590B2093"}
    assert {name: json.loads(t)["panels"] for name, t in files.items()} == {
        name: json.loads(t)["panels"] for name, t in FILES.items()
    }


def test_grafana_provisioning_files():
    files = dashboards.provisioning_files("http://10.0.0.1:9090", "/var/lib/kiln/dashboards", "30s")
    assert {path: yaml.safe_load(text) for path, text in files.items()} == {
        "datasources/kiln.yaml": {
            "apiVersion": 1,
            "datasources": [
                {
                    "name": "Kiln Prometheus",
                    "uid": "kiln-prometheus",
                    "type": "prometheus",
                    "access": "proxy",
                    "url": "http://10.0.0.1:9090",
                    "editable": False,
                    "jsonData": {"timeInterval": "30s", "httpMethod": "POST"},
                }
            ],
        },
        "dashboards/kiln.yaml": {
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
                    "options": {"path": "/var/lib/kiln/dashboards"},
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("url", "directory", "interval", "message"),
    [
        ("10.0.0.1:9090", "/d", 15, "not an http(s) URL of Prometheus: '10.0.0.1:9090'"),
        ("http://p:9090", "dashboards", 15, "not an absolute directory: 'dashboards'"),
        ("http://p:9090", "/d", "often", "not a duration: 'often' (seconds, or e.g. 15s, 1m)"),
    ],
)
def test_bad_provisioning_settings_are_refused_in_one_line(url, directory, interval, message):
    provisioning = filters("kiln_monitoring")["kiln_monitoring_grafana_provisioning"]
    with pytest.raises(AnsibleFilterError) as error:
        provisioning(url, directory, interval)
    assert str(error.value) == f"kiln_monitoring_grafana_provisioning: {message}"


def test_the_role_gets_dashboards_and_consoles_through_its_filters():
    offered = filters("kiln_monitoring")
    assert offered["kiln_monitoring_dashboards"](None) == FILES
    assert offered["kiln_monitoring_dashboards"]("") == FILES
    assert offered["kiln_monitoring_consoles"](None) == consoles.console_pages()
    assert offered["kiln_monitoring_grafana_provisioning"](
        "https://prom:9090", "/etc/grafana/dashboards/kiln"
    ) == dashboards.provisioning_files("https://prom:9090", "/etc/grafana/dashboards/kiln", 15)


class TaggedStr(str):
    """A str subclass, as ansible-core (2.19 on) hands a filter its templated strings."""


def test_the_provisioning_filter_takes_strings_as_ansible_templates_them():
    # YAML's safe dumper represents no str subclass: the role's first real run failed so.
    provisioning = filters("kiln_monitoring")["kiln_monitoring_grafana_provisioning"]
    assert provisioning(
        TaggedStr("http://prom:9090"), TaggedStr("/var/lib/grafana/dashboards/kiln"), "5s"
    ) == dashboards.provisioning_files("http://prom:9090", "/var/lib/grafana/dashboards/kiln", 5)


PAGES = consoles.console_pages()
# The only Go template actions a page holds: Kiln's console library's frame, the node
# page's parameter, and the overview's list of nodes.
ACTIONS = {
    '{{ template "kiln_head" . }}',
    '{{ template "kiln_tail" . }}',
    "{{ .Params.node }}",
    '{{ range query "count by (node) (up)" | sortByLabel "node" }}',
    "{{ with .Labels.node }}",
    "{{ . }}",
    "{{ end }}",
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_console_page_graphs_its_dashboards_panels(name):
    page = PAGES[name]
    (dashboard,) = [d for d in dashboard_panels.DASHBOARDS if f"{d.uid}.html" == name]
    assert page.startswith(
        '{{ template "kiln_head" . }}\n<p class="kiln-links"><a href="kiln-overview.html">'
        'cluster overview</a> | <a href="kiln-gpu-fabric.html">GPU fleet and fabric</a> | '
        '<a href="kiln-slurm.html">Slurm queue</a> | <a href="kiln-checks.html">checks</a> | '
        '<a href="../classic/alerts">Alerts</a> | <a href="../classic/graph">Graph</a></p>\n'
    )
    assert page.endswith('{{ template "kiln_tail" . }}\n')
    assert set(re.findall(r"\{\{.*?\}\}", page)) <= ACTIONS
    graphs = [json.loads(e) for e in re.findall(r"  expr: (\[.*\]),\n", page)]
    node = "{{ .Params.node }}" if dashboard.one_node else None
    assert graphs == [
        [queries.for_nodes(queries.query(q).expr, node) for q in panel.queries]
        for panel in dashboard.panels
    ]
    assert re.findall(r'<div id="(graph\d+)"></div>', page) == [
        f"graph{n}" for n in range(1, len(dashboard.panels) + 1)
    ]


def test_kiln_console_library_defines_every_template_the_pages_use():
    """Debian's prometheus ships no console library: the role installs Kiln's."""
    library = (REPO / "roles/monitoring/files/kiln.lib").read_text()
    defined = set(re.findall(r'\{\{ define "(\w+)" -?\}\}', library))
    used = {n for page in PAGES.values() for n in re.findall(r'\{\{ template "(\w+)"', page)}
    assert used == defined == {consoles.HEAD, consoles.TAIL}


def test_a_console_graph_whole():
    page = PAGES["kiln-node.html"]
    (graph,) = [g for g in page.split("<h3>") if g.startswith("GPU temperature<")]
    assert graph == (
        "GPU temperature</h3>\n"
        '<div id="graph11"></div>\n'
        "<script>\n"
        "new PromConsole.Graph({\n"
        '  node: document.querySelector("#graph11"),\n'
        '  expr: ["kiln_gpu_temperature_celsius{node=~\\"{{ .Params.node }}\\"}",'
        ' "kiln_gpu_temperature_ceiling_celsius{node=~\\"{{ .Params.node }}\\"}"],\n'
        '  name: ["[[node]] GPU [[gpu]]", "[[node]] ceiling"],\n'
        "  yAxisFormatter: PromConsole.NumberFormatter.humanizeNoSmallPrefix,\n"
        "  yHoverFormatter: PromConsole.NumberFormatter.humanizeNoSmallPrefix,\n"
        '  yTitle: "GPU temperature"\n'
        "})\n"
        "</script>\n"
    )
    overview = PAGES["kiln-overview.html"]
    assert (
        '<h3>Nodes</h3>\n<ul>\n{{ range query "count by (node) (up)" | sortByLabel "node" }}'
        "{{ with .Labels.node }}"
        '<li><a href="kiln-node.html?node={{ . }}">{{ . }}</a></li>{{ end }}{{ end }}\n</ul>\n'
    ) in overview

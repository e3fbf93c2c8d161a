"""Grafana's dashboards and provisioning files (kiln.roles.monitoring.dashboards) and
Prometheus's console pages (kiln.roles.monitoring.consoles), all built from the query library,
as the monitoring role gets them through its filters. The metrics they name:
tests/unit/test_monitoring_rules.py."""

import json
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from kiln.roles.monitoring import consoles, dashboards, queries
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


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_dashboard_is_grafana_dashboard_json(name):
    model = json.loads(FILES[name])
    assert model["uid"] == name.removesuffix(".json")
    assert model["schemaVersion"] == dashboards.SCHEMA_VERSION
    assert model["editable"] is False and model["tags"] == ["kiln"]
    panels = model["panels"]
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    cells = set()
    for panel in panels:
        assert panel["type"] in ("timeseries", "stat", "table")
        assert panel["datasource"] == DATASOURCE
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= dashboards.WIDTH, panel["title"]
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
            assert target["expr"] in {q.expr for q in queries.QUERIES.values()}
            assert target.get("instant", False) is (panel["type"] != "timeseries")
    datasource, node = model["templating"]["list"]
    assert datasource == {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {"text": "kiln-prometheus", "value": "kiln-prometheus"},
        "hide": 0,
    }
    assert (node["name"], node["type"], node["definition"]) == (
        "node",
        "query",
        "label_values(up, node)",
    )
    assert node["multi"] is node["includeAll"] is (name != "kiln-node.json")


def test_a_panel_is_its_library_query_whole():
    overview = json.loads(FILES["kiln-overview.json"])
    drained = overview["panels"][7]
    assert drained == {
        "id": 8,
        "type": "table",
        "title": "Nodes drained by Kiln",
        "datasource": DATASOURCE,
        "gridPos": {"x": 12, "y": 4, "w": 12, "h": 8},
        "fieldConfig": {"defaults": {"unit": "short"}, "overrides": []},
        "options": {},
        "targets": [
            {
                "datasource": DATASOURCE,
                "refId": "A",
                "expr": 'kiln_slurm_node_drain_info{node=~"$node"}',
                "instant": True,
                "range": False,
                "format": "table",
                "legendFormat": "{{node}} {{by}}: {{reason}}",
            }
        ],
    }
    node = json.loads(FILES["kiln-node.json"])
    (temperature,) = [p for p in node["panels"] if p["title"] == "GPU temperature"]
    assert [(t["refId"], t["expr"], t["legendFormat"]) for t in temperature["targets"]] == [
        ("A", 'kiln_gpu_temperature_celsius{node=~"$node"}', "{{node}} GPU {{gpu}}"),
        ("B", 'kiln_gpu_temperature_ceiling_celsius{node=~"$node"}', "{{node}} ceiling"),
    ]
    assert temperature["fieldConfig"]["defaults"]["unit"] == "celsius"


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
    (dashboard,) = [d for d in dashboards.DASHBOARDS if f"{d.uid}.html" == name]
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
        '<div id="graph10"></div>\n'
        "<script>\n"
        "new PromConsole.Graph({\n"
        '  node: document.querySelector("#graph10"),\n'
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

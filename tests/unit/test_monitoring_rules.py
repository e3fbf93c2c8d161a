"""Kiln's alert rules (kiln.roles.monitoring.rules) as Prometheus's promtool reads and runs
them, the query library they share with the dashboards and console pages
(kiln.roles.monitoring.queries), and the filters the monitoring role calls."""

import json
import re
import shutil
import subprocess

import click
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from kiln.cli import cli
from kiln.roles.monitoring import consoles, dashboards, queries, rules
from kiln_node.metrics import CATALOGUE
from tests.conftest import REPO
from tests.unit.test_filter_plugins import filters

FIXTURES = REPO / "tests" / "fixtures" / "monitoring"
PROMTOOL_TESTS = FIXTURES / "rules_test.yml"
ALERT_NAMES = [alert.name for alert in rules.ALERTS]


def write_rules(directory, scrape_interval=15):
    path = directory / "kiln.rules.yml"
    path.write_text(rules.rules_text(scrape_interval))
    return path


def test_rules_file_passes_promtool_check(tmp_path, promtool):
    path = write_rules(tmp_path)
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (
        0,
        f"Checking {path}\n  SUCCESS: {len(rules.ALERTS)} rules found\n\n",
    ), done.stderr


def test_every_query_of_the_library_is_promql_prometheus_reads(tmp_path, promtool):
    """Each query, as a dashboard sends it (every node chosen) and as a rule reads it, is
    a recording rule promtool accepts: the panels' queries, not only the alerts', parse."""
    exprs = {
        f"{q.name}:{which}": expr
        for q in queries.QUERIES.values()
        for which, expr in (("panel", queries.for_nodes(q.expr, ".+")),
                            ("rule", queries.for_nodes(q.expr)))
    }  # fmt: skip
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "queries", "rules": [
        {"record": f"kiln:query:{name.replace(':', '_')}", "expr": expr}
        for name, expr in exprs.items()
    ]}]}))  # fmt: skip
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (
        0,
        f"Checking {path}\n  SUCCESS: {len(exprs)} rules found\n\n",
    ), done.stderr


def test_every_alert_fires_in_promtools_tests(tmp_path, promtool):
    """promtool runs rules_test.yml against the rules Kiln writes: each alert's input
    series, its labels and its annotations (summary, runbook) as Prometheus renders them."""
    write_rules(tmp_path)
    shutil.copy(PROMTOOL_TESTS, tmp_path / "rules_test.yml")
    done = subprocess.run(
        [promtool, "test", "rules", "rules_test.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "Unit Testing:  rules_test.yml\n  SUCCESS\n\n"


def test_every_alert_has_a_promtool_test_that_expects_it():
    tests = yaml.safe_load(PROMTOOL_TESTS.read_text())["tests"]
    expected = {
        case["alertname"]
        for test in tests
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert sorted(expected) == sorted(ALERT_NAMES)


def test_the_rules_file_reads_back_as_written():
    data = yaml.safe_load(rules.rules_text())
    assert [group["name"] for group in data["groups"]] == ["kiln"]
    assert data == rules.rules(15)
    assert [r["alert"] for r in data["groups"][0]["rules"]] == ALERT_NAMES
    assert data["groups"][0]["rules"][0] == {
        "alert": "KilnNodeDrained",
        "expr": "kiln_slurm_node_drain_info",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "{{ $labels.node }} drained: {{ $labels.reason }}",
            "runbook": "kiln health --nodes {{ $labels.node }} (a kiln-health: drain is resumed"
            " once it passes); a kiln: drain: kiln validate --nodes {{ $labels.node }};"
            " a kiln-active: drain: kiln health --schedule",
        },
    }


@pytest.mark.parametrize(
    ("interval", "hold"),
    [(15, "1m"), ("15s", "1m"), ("30s", "90s"), ("1m", "3m"), ("1m30s", "270s"), ("300", "15m")],
)
def test_a_target_is_down_after_three_failed_scrapes_and_at_least_a_minute(interval, hold):
    (target_down,) = [r for r in rules.rules(interval)["groups"][0]["rules"]
                      if r["alert"] == "KilnTargetDown"]  # fmt: skip
    assert target_down == {
        "alert": "KilnTargetDown",
        "expr": "up == 0",
        "for": hold,
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "{{ $labels.job }} on {{ with $labels.node }}{{ . }}{{ else }}"
            "{{ $labels.instance }}{{ end }} cannot be scraped",
            "runbook": "kiln health --nodes {{ $labels.node }} (exit 3: the node is unreachable);"
            " kiln provision --limit {{ $labels.node }} --tags monitoring",
        },
    }


@pytest.mark.parametrize("interval", ["", "15", "0", "0s", "fast", "15 s", "-1m", "1.5m", True])
def test_a_scrape_interval_that_is_not_a_duration_is_refused(interval):
    if interval == "15":
        assert rules.seconds(interval) == 15
        return
    with pytest.raises(ValueError, match=r"^not a duration: "):
        rules.rules_text(interval)


def _runbook_commands(text: str) -> list[list[str]]:
    """Each `kiln ...` command of a runbook line, as words up to the next ; or (."""
    return [m.split() for m in re.findall(r"\bkiln ([a-z][^;(]*)", text)]


@pytest.mark.parametrize("alert", rules.ALERTS, ids=lambda a: a.name)
def test_each_runbook_names_real_kiln_commands_and_options(alert):
    commands = _runbook_commands(alert.runbook)
    assert commands, alert.runbook
    ctx = click.Context(cli)
    for words in commands:
        command = cli.get_command(ctx, words[0])
        assert command is not None, words
        options = {o for p in command.params for o in p.opts}
        assert {w for w in words if w.startswith("-")} <= options, words
    assert alert.severity in ("warning", "critical")
    assert alert.summary


# Every expression a dashboard, console page or rule sends to Prometheus.
def every_expression() -> dict[str, str]:
    found = {f"query {q.name}": q.expr for q in queries.QUERIES.values()}
    for rule in rules.rules()["groups"][0]["rules"]:
        found[f"rule {rule['alert']}"] = rule["expr"]
    for name, text in dashboards.dashboard_files().items():
        model = json.loads(text)
        for panel in model["panels"]:
            for target in panel["targets"]:
                found[f"{name} panel {panel['id']} {target['refId']}"] = target["expr"]
        for variable in model["templating"]["list"]:
            if variable["type"] == "query":
                # label_values(SELECTOR, LABEL): the selector names a metric
                (selector,) = re.fullmatch(
                    r"label_values\((.+), *\w+\)", variable["query"]
                ).groups()
                found[f"{name} ${variable['name']}"] = selector
    for name, page in consoles.console_pages().items():
        for number, exprs in enumerate(re.findall(r"expr: (\[.*\]),", page)):
            for expr in json.loads(exprs):
                found[f"{name} graph {number}"] = expr
        for expr in re.findall(r"range query (\"(?:[^\"\\]|\\.)*\")", page):
            found[f"{name} node list"] = json.loads(expr)
    return found


def test_every_metric_named_anywhere_is_written_by_kiln_node_exporter_or_prometheus():
    expressions = every_expression()
    unknown = {where: queries.unknown_metrics(e) for where, e in expressions.items()}
    assert {where: names for where, names in unknown.items() if names} == {}
    named = set().union(*(queries.metric_names(e) for e in expressions.values()))
    # the external names listed are each used, and no Kiln metric is left unshown
    assert sorted(queries.EXTERNAL - named) == []
    assert sorted(set(CATALOGUE) - named) == []


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("kiln_gpu_temprature_celsius > 85", {"kiln_gpu_temprature_celsius"}),
        (
            'sum by (node, gpu) (rate(kiln_gpu_xid_errors_total{xid=~"7.|up"}[5m] offset 1h))'
            " > on (node) group_left (job) kiln_gpu_temperature_ceiling_celsius",
            {"kiln_gpu_xid_errors_total", "kiln_gpu_temperature_ceiling_celsius"},
        ),
        ("time() - max(up) > 8 * 86400 or absent(ALERTS)", {"up", "ALERTS"}),
        ('count without (instance) (up{job="node"}) == bool 1', {"up"}),
        ('{__name__=~"kiln_.*"}', set()),
        ("node_load1 and inf > 1e3", {"node_load1"}),
    ],
)
def test_metric_names_reads_every_metric_an_expression_names(expr, names):
    assert queries.metric_names(expr) == names


def test_a_misspelt_metric_in_a_query_is_caught():
    assert queries.unknown_metrics('kiln_gpu_temprature_celsius{node=~"$node"}') == {
        "kiln_gpu_temprature_celsius"
    }
    assert queries.unknown_metrics("node_lod1") == {"node_lod1"}


def test_for_nodes_fills_in_or_removes_the_node_matcher():
    expr = queries.query("node_filesystem_used").expr
    assert queries.for_nodes(expr) == (
        '1 - node_filesystem_avail_bytes{fstype!~"overlay|squashfs"}'
        ' / node_filesystem_size_bytes{fstype!~"overlay|squashfs"}'
    )
    assert queries.for_nodes(queries.query("gpu_power").expr, "gpu00[12]") == (
        'kiln_gpu_power_watts{node=~"gpu00[12]"}'
    )
    assert queries.for_nodes(queries.query("slurm_jobs").expr) == (
        "sum by (state) (kiln_slurm_jobs)"
    )


def test_the_role_gets_the_rules_through_its_filter():
    offered = filters("kiln_monitoring")
    assert offered["kiln_monitoring_rules"]("30s") == rules.rules_text("30s")
    with pytest.raises(AnsibleFilterError) as error:
        offered["kiln_monitoring_rules"]("soon")
    assert str(error.value) == (
        "kiln_monitoring_rules: not a duration: 'soon' (seconds, or e.g. 15s, 1m)"
    )

"""The monitoring stack as converged: node_exporter on every node on its cluster address
only, Prometheus and Alertmanager on the first controller, every target up, Kiln's
rules loaded, and a Kiln textfile metric reaching Prometheus with its node label."""

import json
import shlex
import time
from urllib.parse import quote

import pytest

from kiln.node import metrics

testinfra_hosts = ["podman://mon-ctl", "podman://mon-n1"]
ADDRESS = {"mon-ctl": "10.214.0.71", "mon-n1": "10.214.0.72"}
PROMETHEUS = "http://10.214.0.71:9090"
PINS = {
    "trixie": {
        "prometheus": "2.53.3+ds1-2",
        "prometheus-alertmanager": "0.28.1+ds-1",
        "prometheus-node-exporter": "1.9.0-1+b4",
    },
    "bookworm": {
        "prometheus": "2.42.0+ds-5+deb12u1",
        "prometheus-alertmanager": "0.25.0-1+b4",
        "prometheus-node-exporter": "1.5.0-1+b6",
    },
}


@pytest.fixture(scope="module")
def server():
    import testinfra

    return testinfra.get_host("podman://mon-ctl")


def name(host) -> str:
    return host.check_output("hostname")


def release(host) -> str:
    return host.check_output(". /etc/os-release && echo $VERSION_CODENAME")


def api(server, path: str) -> dict:
    answer = json.loads(server.check_output(f"curl -sf {shlex.quote(PROMETHEUS + path)}"))
    assert answer["status"] == "success", answer
    return answer["data"]


def listening(host) -> set[str]:
    """Local addresses with a listening TCP socket (ss's 'Local Address:Port')."""
    return {line.split()[3] for line in host.check_output("ss -Hltn").splitlines()}


def test_node_exporter_listens_on_the_cluster_address_only(host):
    node = name(host)
    exporter = host.service("prometheus-node-exporter")
    assert exporter.is_running and exporter.is_enabled
    assert host.file("/etc/default/prometheus-node-exporter").content_string == (
        "# Managed by Kiln (monitoring role): node_exporter's command line; its textfile\n"
        "# collector reads Kiln's metrics.\n"
        f'ARGS="--web.listen-address={ADDRESS[node]}:9100'
        ' --collector.textfile.directory=/var/lib/prometheus/node-exporter"\n'
    )
    ports = {a for a in listening(host) if a.endswith((":9090", ":9093", ":9094", ":9100"))}
    expected = {f"{ADDRESS[node]}:9100"}
    if node == "mon-ctl":
        expected |= {f"{ADDRESS[node]}:9090", f"{ADDRESS[node]}:9093"}
    assert ports == expected  # no *:9100, no Alertmanager cluster port with one server


def test_packages_at_their_pinned_versions(host):
    pins = PINS[release(host)]
    wanted = ["prometheus-node-exporter"]
    if name(host) == "mon-ctl":
        wanted += ["prometheus", "prometheus-alertmanager"]
    else:
        assert not host.package("prometheus").is_installed
    assert {p: host.package(p).version for p in wanted} == {p: pins[p] for p in wanted}
    preferences = host.file("/etc/apt/preferences.d/kiln-monitoring").content_string
    header = "# Managed by Kiln (monitoring role): each monitoring package stays at its"
    expected = (
        header
        + " pinned version.\n"
        + "\n".join(f"Package: {p}\nPin: version {pins[p]}\nPin-Priority: 1001\n" for p in wanted)
    )
    assert preferences == expected


def test_prometheus_and_alertmanager_on_the_first_controller(server):
    for service in ("prometheus", "prometheus-alertmanager"):
        assert server.service(service).is_running and server.service(service).is_enabled
    assert server.file("/etc/default/prometheus").content_string == (
        "# Managed by Kiln (monitoring role): Prometheus's command line.\n"
        'ARGS="--config.file=/etc/prometheus/prometheus.yml'
        " --storage.tsdb.path=/var/lib/prometheus/metrics2"
        " --storage.tsdb.retention.time=7d --storage.tsdb.retention.size=1GB"
        " --web.listen-address=10.214.0.71:9090"
        " --web.console.templates=/etc/prometheus/consoles"
        ' --web.console.libraries=/etc/prometheus/console_libraries"\n'
    )
    receivers = server.file("/etc/prometheus/alertmanager.yml")
    assert (receivers.user, receivers.group, receivers.mode) == ("root", "prometheus", 0o640)
    flags = api(server, "/api/v1/status/flags")
    assert flags["storage.tsdb.retention.time"] == "1w"  # 7d, as Prometheus writes it
    assert flags["web.listen-address"] == "10.214.0.71:9090"


def test_every_inventory_host_is_scraped_and_up(server):
    """Each target labelled with its inventory name, all up (retried: the first scrape
    of a just-reloaded target may not have happened yet)."""
    expected = {
        ("node", "mon-ctl", "10.214.0.71:9100"),
        ("node", "mon-n1", "10.214.0.72:9100"),
        ("prometheus", "mon-ctl", "10.214.0.71:9090"),
        ("alertmanager", "mon-ctl", "10.214.0.71:9093"),
    }
    for _ in range(30):
        targets = api(server, "/api/v1/targets")["activeTargets"]
        found = {
            (t["labels"]["job"], t["labels"]["node"], t["scrapeUrl"].split("/")[2]) for t in targets
        }
        if found == expected and all(t["health"] == "up" for t in targets):
            break
        time.sleep(2)
    assert found == expected
    assert {t["labels"]["instance"]: t["health"] for t in targets} == {
        instance: "up" for _, _, instance in expected
    }


def test_kilns_rules_are_loaded(server):
    groups = api(server, "/api/v1/rules")["groups"]
    assert [g["file"] for g in groups if g["name"] == "kiln"] == ["/etc/prometheus/kiln-rules.yml"]
    assert api(server, "/api/v1/alertmanagers")["activeAlertmanagers"] == [
        {"url": "http://10.214.0.71:9093/api/v2/alerts"}
    ]


def test_a_kiln_textfile_metric_reaches_prometheus_with_its_node(host, server):
    node = name(host)
    gauge = metrics.gauge("kiln_health_check")
    gauge.add(1, node=node, check="molecule")
    path = f"/var/lib/prometheus/node-exporter/{metrics.HEALTH}"
    host.check_output(f"printf %s {shlex.quote(metrics.text([gauge]))} > {path}")
    try:
        served = host.check_output(f"curl -sf http://{ADDRESS[node]}:9100/metrics")
        assert f'kiln_health_check{{check="molecule",node="{node}"}} 1' in served.splitlines()
        query = quote(f'kiln_health_check{{check="molecule",node="{node}"}}')
        for _ in range(20):
            result = api(server, f"/api/v1/query?query={query}")["result"]
            if result:
                break
            time.sleep(1)
        assert [r["metric"] for r in result] == [
            {
                "__name__": "kiln_health_check",
                "check": "molecule",
                "instance": f"{ADDRESS[node]}:9100",
                "job": "node",
                "node": node,
            }
        ]
    finally:
        host.run(f"rm -f {path}")


def test_kilns_console_pages_render_with_kilns_library(server):
    """Debian's prometheus ships no console library: Kiln's own frames its pages; each
    page renders (an undefined template or a bad query is a 500 from Prometheus)."""
    for page in ("kiln-overview", "kiln-node", "kiln-gpu-fabric", "kiln-slurm", "kiln-checks"):
        url = f"{PROMETHEUS}/consoles/{page}.html?node=mon-n1"
        shown = server.check_output(f"curl -sf {shlex.quote(url)}")
        assert shown.startswith("<!doctype html>") and "PromConsole.Graph" in shown, page
    for script in ("rickshaw/rickshaw.min.js", "d3/d3.min.js", "js/prom_console.js"):
        server.check_output(f"curl -sf -o /dev/null {PROMETHEUS}/classic/static/{script}")
    overview = server.check_output(f"curl -sf {PROMETHEUS}/consoles/kiln-overview.html")
    assert '<a href="kiln-node.html?node=mon-n1">mon-n1</a>' in overview

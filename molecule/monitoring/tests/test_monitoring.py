"""The monitoring stack as converged: node_exporter on every node on its cluster address
only, Prometheus and Alertmanager on the first controller, every target up, Kiln's
rules loaded, a Kiln textfile metric reaching Prometheus with its node label, and
Grafana on the controller from a STAND-IN of Grafana's repository (tests/standins.py:
the real package's metadata and maintainer scripts; its server answers /api/health
only), provisioned with Prometheus and Kiln's dashboards."""

import configparser
import importlib.util
import json
import shlex
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from kiln.roles.monitoring import dashboards
from kiln_node import metrics

testinfra_hosts = ["podman://mon-ctl", "podman://mon-n1"]
ADDRESS = {"mon-ctl": "10.214.0.71", "mon-n1": "10.214.0.72"}
PROMETHEUS = "http://10.214.0.71:9090"
GRAFANA_URL = "http://10.214.0.71:3000"
DASHBOARDS_DIR = "/var/lib/grafana/dashboards/kiln"
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
    "noble": {
        "prometheus": "2.45.3+ds-2ubuntu0.3",
        "prometheus-alertmanager": "0.26.0+ds-1ubuntu0.3",
        "prometheus-node-exporter": "1.7.0-1ubuntu0.3",
    },
    "jammy": {
        "prometheus": "2.31.2+ds1-1ubuntu1.22.04.3",
        "prometheus-alertmanager": "0.23.0-4ubuntu0.3",
        "prometheus-node-exporter": "1.3.1-1ubuntu0.22.04.3",
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
        " --collector.textfile.directory=/var/lib/prometheus/node-exporter"
        ' --collector.infiniband"\n'
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


def _standins():
    path = Path(__file__).resolve().parents[3] / "tests" / "standins.py"
    spec = importlib.util.spec_from_file_location("standins", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STANDINS = _standins()
GRAFANA = STANDINS.facts("grafana", STANDINS.GRAFANA_FACTS_DOC)


def test_grafana_is_installed_from_the_stand_in_repository(server):
    version = GRAFANA["version"]
    arch = server.check_output("dpkg --print-architecture")
    assert server.check_output("apt-cache policy grafana").splitlines() == [
        "grafana:",
        f"  Installed: {version}",
        f"  Candidate: {version}",
        "  Version table:",
        f" *** {version} 500",
        f"        500 file:/srv/standin-grafana stable/main {arch} Packages",
        "        100 /var/lib/dpkg/status",
    ]
    assert server.file("/etc/apt/sources.list.d/kiln-grafana.sources").content_string == (
        "# Managed by Kiln (monitoring_grafana_repository_url)\n"
        "Types: deb\nURIs: file:/srv/standin-grafana\nSuites: stable\nComponents: main\n"
        "Signed-By: /etc/apt/keyrings/kiln-grafana.asc\n"
    )
    # The key the role fetched from URL/gpg.key is the one its sha256 pinned.
    key = server.file("/etc/apt/keyrings/kiln-grafana.asc")
    assert key.sha256sum == server.file("/srv/standin-grafana/gpg.key").sha256sum
    assert (key.user, key.group, key.mode) == ("root", "root", 0o644)


def test_grafanas_postinst_made_its_user_and_directories(server):
    group, user = server.group("grafana"), server.user("grafana")
    assert group.exists and group.gid < 1000  # --system
    assert (user.uid < 1000, user.group, user.home, user.shell) == (
        True,
        "grafana",
        "/usr/share/grafana",
        "/bin/false",
    )
    for path in ("/var/lib/grafana", "/var/log/grafana"):
        made = server.file(path)
        assert (made.is_directory, made.user, made.group, made.mode) == (
            True,
            "grafana",
            "grafana",
            0o755,
        ), path


def test_grafana_runs_on_the_cluster_address_only_and_answers_health(server):
    service = server.service("grafana-server")
    assert service.is_enabled and service.is_running
    pid = server.check_output("systemctl show -P MainPID grafana-server")
    assert server.check_output(f"ps -o user=,group= -p {pid}").split() == ["grafana", "grafana"]
    assert {a for a in listening(server) if a.endswith(":3000")} == {"10.214.0.71:3000"}
    health = json.loads(server.check_output(f"curl -sf {GRAFANA_URL}/api/health"))
    assert health == {"database": "ok", "version": GRAFANA["version"], "commit": "STAND-IN"}
    said = server.check_output("journalctl -u grafana-server -o cat --no-pager")
    assert f"{STANDINS.GRAFANA_LABEL}: listening on 10.214.0.71:3000" in said


def test_grafanas_configuration_is_roots_and_readable_by_grafana(server):
    found = {}
    for line in server.check_output("find /etc/grafana -printf '%p %u:%g %m\\n'").splitlines():
        path, owner, mode = line.split()
        found[path] = (owner, mode)
    kinds = ("access-control", "alerting", "dashboards", "datasources", "plugins")
    provisioning = "/etc/grafana/provisioning"
    assert found == {
        "/etc/grafana": ("root:root", "755"),
        "/etc/grafana/grafana.ini": ("root:grafana", "640"),
        "/etc/grafana/ldap.toml": ("root:grafana", "640"),
        provisioning: ("root:grafana", "755"),
        **{f"{provisioning}/{kind}": ("root:grafana", "755") for kind in kinds},
        **{f"{provisioning}/{kind}/sample.yaml": ("root:grafana", "640") for kind in kinds},
        f"{provisioning}/datasources/kiln.yaml": ("root:grafana", "640"),
        f"{provisioning}/dashboards/kiln.yaml": ("root:grafana", "640"),
    }
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(server.file("/etc/grafana/grafana.ini").content_string)
    assert {k: v for k, v in ini["server"].items()} == {
        "http_addr": "10.214.0.71",
        "http_port": "3000",
    }


def test_grafana_is_provisioned_with_prometheus_and_kilns_dashboards(server):
    wanted = dashboards.provisioning_files(PROMETHEUS, DASHBOARDS_DIR, "5s")
    for path, text in wanted.items():
        assert server.file(f"/etc/grafana/provisioning/{path}").content_string == text, path
    datasources = yaml.safe_load(wanted["datasources/kiln.yaml"])["datasources"]
    assert [(d["type"], d["url"]) for d in datasources] == [("prometheus", PROMETHEUS)]
    providers = yaml.safe_load(wanted["dashboards/kiln.yaml"])["providers"]
    assert [p["options"] for p in providers] == [{"path": DASHBOARDS_DIR}]
    files = dashboards.dashboard_files()
    directory = server.file(DASHBOARDS_DIR)
    assert (directory.user, directory.group, directory.mode) == ("root", "root", 0o755)
    assert sorted(directory.listdir()) == sorted(files) and len(files) == 5
    for name, text in files.items():
        written = server.file(f"{DASHBOARDS_DIR}/{name}")
        assert (written.content_string, written.mode) == (text, 0o644), name

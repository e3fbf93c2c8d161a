"""The monitoring role's files as Ansible's own Templar renders them from the role's
defaults and vars: Prometheus's scrape targets from the inventory, and the command lines
that keep every service on the cluster address."""

import subprocess
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from kiln import paths, roles

ROLE = paths.roles_dir() / "monitoring"
HOSTVARS = {
    "ctl1": {"kiln_address": "10.0.0.1"},
    "ctl2": {"ansible_host": "10.0.0.2"},
    "gpu001": {"kiln_address": "10.0.1.1", "ansible_host": "192.0.2.1"},
    "gpu002": {},
    "gpu003": {"kiln_address": "fd00::3"},
}
GROUPS = {
    "all": list(HOSTVARS),
    "slurm_controller": ["ctl1", "ctl2"],
    "slurm_compute": ["gpu001", "gpu002", "gpu003"],
}


def render(template: str, host: str, **overrides) -> str:
    """TEMPLATE as the role writes it on HOST: inventory values over the role's defaults,
    its vars/main.yml, and Ansible's magic variables."""
    loader = DataLoader()
    variables = {
        **loader.load_from_file(str(ROLE / "defaults" / "main.yml"), trusted_as_template=True),
        **loader.load_from_file(str(ROLE / "vars" / "main.yml"), trusted_as_template=True),
        **HOSTVARS[host],
        **overrides,
        "inventory_hostname": host,
        "groups": GROUPS,
        "hostvars": {name: {**values, **overrides} for name, values in HOSTVARS.items()},
    }
    text = (ROLE / "templates" / template).read_text()
    return Templar(loader=loader, variables=variables).template(trust_as_template(text))


def test_prometheus_scrapes_every_inventory_host_by_its_name():
    config = yaml.safe_load(render("prometheus.yml.j2", "ctl1"))

    def targets(*pairs):
        return [{"targets": [target], "labels": {"node": node}} for node, target in pairs]

    assert config == {
        "global": {"scrape_interval": "30s", "evaluation_interval": "30s"},
        "rule_files": ["/etc/prometheus/kiln-rules.yml"],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": ["10.0.0.1:9093"]}]}]},
        "scrape_configs": [
            {
                "job_name": "node",
                "honor_labels": True,
                "static_configs": targets(
                    ("ctl1", "10.0.0.1:9100"),
                    ("ctl2", "10.0.0.2:9100"),
                    ("gpu001", "10.0.1.1:9100"),  # kiln_address before ansible_host
                    ("gpu002", "gpu002:9100"),  # no address: its name
                    ("gpu003", "[fd00::3]:9100"),
                ),
            },
            {"job_name": "prometheus", "static_configs": targets(("ctl1", "10.0.0.1:9090"))},
            {"job_name": "alertmanager", "static_configs": targets(("ctl1", "10.0.0.1:9093"))},
        ],
    }


def test_the_monitoring_group_and_scrape_hosts_choose_servers_and_targets():
    config = yaml.safe_load(
        render(
            "prometheus.yml.j2",
            "ctl2",
            monitoring_servers=["ctl1", "ctl2"],
            monitoring_scrape_hosts=["gpu001"],
            monitoring_scrape_interval="15s",
        )
    )
    assert config["global"] == {"scrape_interval": "15s", "evaluation_interval": "15s"}
    assert config["alerting"]["alertmanagers"] == [
        {"static_configs": [{"targets": ["10.0.0.1:9093", "10.0.0.2:9093"]}]}
    ]
    assert [(c["job_name"], c["static_configs"]) for c in config["scrape_configs"]] == [
        ("node", [{"targets": ["10.0.1.1:9100"], "labels": {"node": "gpu001"}}]),
        (
            "prometheus",
            [
                {"targets": ["10.0.0.1:9090"], "labels": {"node": "ctl1"}},
                {"targets": ["10.0.0.2:9090"], "labels": {"node": "ctl2"}},
            ],
        ),
        (
            "alertmanager",
            [
                {"targets": ["10.0.0.1:9093"], "labels": {"node": "ctl1"}},
                {"targets": ["10.0.0.2:9093"], "labels": {"node": "ctl2"}},
            ],
        ),
    ]


HEADER = "# Managed by Kiln (monitoring role): "


@pytest.mark.parametrize(
    ("host", "overrides", "args"),
    [
        ("gpu001", {}, "--web.listen-address=10.0.1.1:9100"),
        ("gpu003", {}, "--web.listen-address=[fd00::3]:9100"),
        ("gpu002", {}, "--web.listen-address=gpu002:9100"),
        ("gpu002", {"monitoring_listen_address": "0.0.0.0"}, "--web.listen-address=0.0.0.0:9100"),
    ],
)
def test_node_exporter_listens_on_the_cluster_address(host, overrides, args):
    assert render("prometheus-node-exporter.default.j2", host, **overrides) == (
        HEADER + "node_exporter's command line; its textfile\n"
        "# collector reads Kiln's metrics.\n"
        f'ARGS="{args} --collector.textfile.directory=/var/lib/prometheus/node-exporter'
        ' --collector.infiniband"\n'
    )


def test_prometheus_command_line_carries_storage_and_retention():
    assert render(
        "prometheus.default.j2",
        "ctl1",
        monitoring_storage_path="/srv/prometheus",
        monitoring_retention_time="90d",
        monitoring_retention_size="500GB",
    ) == (
        HEADER + "Prometheus's command line.\n"
        'ARGS="--config.file=/etc/prometheus/prometheus.yml --storage.tsdb.path=/srv/prometheus'
        " --storage.tsdb.retention.time=90d --storage.tsdb.retention.size=500GB"
        " --web.listen-address=10.0.0.1:9090 --web.console.templates=/etc/prometheus/consoles"
        ' --web.console.libraries=/etc/prometheus/console_libraries"\n'
    )


def alertmanager_args(host: str, **overrides) -> str:
    (line,) = [
        line
        for line in render("prometheus-alertmanager.default.j2", host, **overrides).splitlines()
        if line.startswith("ARGS=")
    ]
    return line


def test_alertmanager_cluster_port_only_with_several_servers():
    common = (
        "--config.file=/etc/prometheus/alertmanager.yml"
        " --storage.path=/var/lib/prometheus/alertmanager"
    )
    assert alertmanager_args("ctl1") == (
        f'ARGS="{common} --web.listen-address=10.0.0.1:9093 --cluster.listen-address="'
    )
    assert alertmanager_args("ctl2", monitoring_servers=["ctl1", "ctl2"]) == (
        f'ARGS="{common} --web.listen-address=10.0.0.2:9093'
        ' --cluster.listen-address=10.0.0.2:9094 --cluster.peer=10.0.0.1:9094"'
    )


def test_alertmanager_routes_to_the_first_receiver_or_none():
    assert yaml.safe_load(render("alertmanager.yml.j2", "ctl1")) == {
        "route": {"receiver": "kiln-none", "group_by": ["alertname", "node"]},
        "receivers": [{"name": "kiln-none"}],
    }
    receivers = [{"name": "ops", "webhook_configs": [{"url": "http://hook.example/x"}]}]
    assert yaml.safe_load(
        render(
            "alertmanager.yml.j2",
            "ctl1",
            monitoring_alertmanager_receivers=receivers,
            monitoring_alertmanager_route={"repeat_interval": "4h"},
        )
    ) == {
        "route": {"receiver": "ops", "group_by": ["alertname", "node"], "repeat_interval": "4h"},
        "receivers": receivers,
    }


def test_each_package_pinned_on_its_host():
    text = render(
        "kiln-monitoring.pref.j2",
        "ctl1",
        _monitoring_os_versions={
            "prometheus": "2.53.3+ds1-2",
            "prometheus-alertmanager": "0.28.1+ds-1",
            "prometheus-node-exporter": "1.9.0-1+b4",
        },
        monitoring_versions={"prometheus": "2.53.3*"},
    )
    assert text == (
        HEADER + "each monitoring package stays at its pinned version.\n"
        "Package: prometheus-node-exporter\nPin: version 1.9.0-1+b4\nPin-Priority: 1001\n\n"
        "Package: prometheus\nPin: version 2.53.3*\nPin-Priority: 1001\n\n"
        "Package: prometheus-alertmanager\nPin: version 0.28.1+ds-1\nPin-Priority: 1001\n"
    )


def test_pinned_versions_name_every_package_per_release():
    # Every release the role supports (kiln.roles) has its pins, by Ansible's
    # distribution and major version as tasks/main.yml looks them up.
    supported = roles.ROLES["monitoring"].platforms
    releases = [f"{d}-{v.split('.')[0]}.yml" for d, versions in supported.items() for v in versions]
    assert sorted(releases) == sorted(p.name for p in (ROLE / "vars").glob("*-*.yml"))
    for release in releases:
        versions = yaml.safe_load((ROLE / "vars" / release).read_text())["_monitoring_os_versions"]
        assert sorted(versions) == [
            "prometheus",
            "prometheus-alertmanager",
            "prometheus-node-exporter",
        ], release
    assert Path(ROLE / "vars" / "default.yml").exists()


def dcgm_config(**overrides) -> dict:
    """prometheus.yml with dcgm-exporter as the GPU metrics' source (the relabelling as
    the role's filter gives it: tests/unit/test_monitoring_dcgm.py)."""
    from kiln.roles.monitoring import dcgm

    text = render(
        "prometheus.yml.j2",
        "ctl1",
        monitoring_gpu_source="dcgm-exporter",
        _monitoring_dcgm_relabel_configs=dcgm.relabel_configs(),
        **overrides,
    )
    return yaml.safe_load(text)


def test_dcgm_exporter_is_scraped_on_the_compute_hosts_with_kilns_label_names():
    from kiln.roles.monitoring import dcgm

    config = dcgm_config()
    assert [c["job_name"] for c in config["scrape_configs"]] == [
        "node",
        "prometheus",
        "alertmanager",
        "dcgm",
    ]
    assert config["scrape_configs"][3] == {
        "job_name": "dcgm",
        "static_configs": [
            {"targets": ["10.0.1.1:9400"], "labels": {"node": "gpu001"}},
            {"targets": ["gpu002:9400"], "labels": {"node": "gpu002"}},
            {"targets": ["[fd00::3]:9400"], "labels": {"node": "gpu003"}},
        ],
        "metric_relabel_configs": dcgm.relabel_configs(),
    }
    # everything else as with Kiln's own GPU metrics
    kiln = yaml.safe_load(render("prometheus.yml.j2", "ctl1"))
    assert {**config, "scrape_configs": config["scrape_configs"][:3]} == kiln


def test_dcgm_exporter_hosts_and_port_choose_the_targets():
    config = dcgm_config(
        monitoring_dcgm_exporter_hosts=["gpu003", "ctl2"], monitoring_dcgm_exporter_port=19400
    )
    assert config["scrape_configs"][3]["static_configs"] == [
        {"targets": ["[fd00::3]:19400"], "labels": {"node": "gpu003"}},
        {"targets": ["10.0.0.2:19400"], "labels": {"node": "ctl2"}},
    ]


@pytest.mark.parametrize("source", ["kiln", "dcgm-exporter"])
def test_prometheus_accepts_the_config_for_either_gpu_source(tmp_path, promtool, source):
    """promtool check config: the scrape jobs, the relabelling and the rules file the
    role writes for that source (its path made to exist here)."""
    from kiln.roles.monitoring import dcgm, rules

    rules_file = tmp_path / "kiln-rules.yml"
    rules_file.write_text(rules.rules_text(30, source))
    config = tmp_path / "prometheus.yml"
    config.write_text(
        render(
            "prometheus.yml.j2",
            "ctl1",
            monitoring_gpu_source=source,
            _monitoring_rules_file=str(rules_file),
            _monitoring_dcgm_relabel_configs=dcgm.relabel_configs(),
        )
    )
    done = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True
    )
    count = len(rules.ALERTS) + (len(dcgm.recording_rules()) if source != "kiln" else 0)
    assert (done.returncode, done.stdout) == (
        0,
        f"Checking {config}\n  SUCCESS: 1 rule files found\n SUCCESS: {config} is valid"
        f" prometheus config file syntax\n\nChecking {rules_file}\n  SUCCESS: {count} rules"
        " found\n\n",
    ), done.stdout + done.stderr

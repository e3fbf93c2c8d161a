"""The base role's real effects on a node, checked inside the container."""

import json
import os
import re

import pytest

# Straight to the containers: testinfra's ansible backend would start Ansible for
# every command it runs.
testinfra_hosts = ["podman://base-node1", "podman://base-node2"]


def test_systemd_is_healthy(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_hostname_is_the_inventory_name(host):
    assert host.check_output("hostname") == host.backend.get_hostname()


@pytest.mark.parametrize("package", ["chrony", "jq", "numactl", "rsync", "python3"])
def test_packages_installed(host, package):
    assert host.package(package).is_installed


@pytest.mark.parametrize("package", ["publicsuffix", "gpg-wks-client"])
def test_recommended_packages_are_left_out(host, package):
    # curl's and gnupg's Recommends (base_install_recommends: false).
    assert not host.package(package).is_installed


def test_etc_hosts_lists_every_node(host):
    text = host.file("/etc/hosts").content_string
    block = text.split("# BEGIN Kiln cluster hosts")[1].split("# END Kiln cluster hosts")[0]
    assert "10.214.0.11 base-node1" in block
    assert "10.214.0.12 base-node2" in block


def test_chrony_runs_without_touching_the_clock(host):
    assert host.service("chrony").is_running
    assert host.service("chrony").is_enabled
    assert 'DAEMON_OPTS="-F 1 -x"' in host.file("/etc/default/chrony").content_string
    assert "chronyd" in host.check_output("ps -eo comm")


def test_time_flows_from_the_server_host(host):
    name = host.backend.get_hostname()
    server_conf = host.file("/etc/chrony/conf.d/kiln-server.conf")
    if name == "base-node1":
        assert server_conf.exists
        assert "local stratum 10" in server_conf.content_string
        assert re.search(r"^allow 0\.0\.0\.0/0$", server_conf.content_string, re.MULTILINE)
    else:
        assert not server_conf.exists
        sources = host.file("/etc/chrony/sources.d/kiln.sources").content_string
        assert "server 10.214.0.11 iburst prefer" in sources
        assert "10.214.0.11" in host.check_output("chronyc -n sources")


def test_hpc_limits(host):
    limits = host.file("/etc/security/limits.d/90-kiln.conf")
    assert limits.mode == 0o644
    assert "* - memlock unlimited" in limits.content_string
    assert "* - nofile 1048576" in limits.content_string
    # systemd was re-executed, so services inherit the new defaults now.
    assert (
        host.check_output("systemctl show -p DefaultLimitMEMLOCK") == "DefaultLimitMEMLOCK=infinity"
    )


def test_sysctl_file_written(host):
    text = host.file("/etc/sysctl.d/90-kiln.conf").content_string
    assert "kernel.numa_balancing = 0" in text
    assert "net.ipv4.neigh.default.gc_thresh3 = 65536" in text


def test_local_fact_records_kiln(host):
    fact = json.loads(host.file("/etc/ansible/facts.d/kiln.fact").content_string)
    assert fact["kiln_version"] == "molecule"
    assert fact["first_provisioned"] <= fact["provisioned"]


def test_the_fingerprint_fact_answers_the_nodes_versions(host):
    fact = host.file("/etc/ansible/facts.d/kiln_fingerprint.fact")
    assert (fact.user, fact.mode) == ("root", 0o755)
    found = json.loads(host.check_output("/etc/ansible/facts.d/kiln_fingerprint.fact"))
    release = host.check_output("uname -r")
    pretty = host.check_output(". /etc/os-release && echo $PRETTY_NAME")
    # A raw node: the kernel and the distribution, nothing of the GPU or Slurm stack.
    assert found == {"distribution": pretty, "kernel": release}


def test_apt_proxy_matches_the_setting(host):
    proxy_file = host.file("/etc/apt/apt.conf.d/01kiln-proxy")
    proxy = os.environ.get("KILN_MOLECULE_APT_PROXY", "")
    if proxy:
        assert f'Acquire::http::Proxy "{proxy}";' in proxy_file.content_string
    else:
        assert not proxy_file.exists


def test_apt_gives_up_on_a_stalled_download(host):
    config = host.run("apt-config dump Acquire").stdout
    assert 'Acquire::Retries "3";' in config
    assert 'Acquire::http::Timeout "60";' in config


# The nccl_env role on the same nodes: no RDMA device, so the socket preset over the
# interface holding the node's kiln_address; base-node2 has overrides.
NCCL = {
    "base-node1": (
        ["NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME==eth0"],
        {"NCCL_IB_DISABLE": "socket", "NCCL_SOCKET_IFNAME": "socket"},
        [],
    ),
    "base-node2": (
        [
            "NCCL_SOCKET_IFNAME==eth0",
            "# override: the operator's nccl_env_overrides",
            "NCCL_DEBUG=WARN",
        ],
        {"NCCL_SOCKET_IFNAME": "socket", "NCCL_DEBUG": "override"},
        ["NCCL_IB_DISABLE removed by nccl_env_overrides"],
    ),
}


def test_nccl_site_settings_and_their_record(host):
    name = host.backend.get_hostname()
    lines, sources, notes = NCCL[name]
    assert host.check_output("ip -o -4 addr show eth0 | awk '{print $4}'").startswith("10.214.0.")
    conf = host.file("/etc/nccl.conf")
    assert (conf.user, conf.group, conf.mode) == ("root", "root", 0o644)
    assert conf.content_string.splitlines() == [
        "# Written by Kiln (role nccl_env): preset socket",
        "# socket: no RDMA device: NCCL over TCP sockets",
        *lines,
        *(f"# {note}" for note in notes),
    ]
    fact = json.loads(host.file("/etc/ansible/facts.d/kiln_nccl.fact").content_string)
    values = dict(line.split("=", 1) for line in lines if not line.startswith("#"))
    assert fact == {"preset": "socket", "values": values, "sources": sources, "notes": notes}

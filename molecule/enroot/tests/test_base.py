"""The base and nccl_env roles' real effects on the enroot scenario's nodes (the releases
scripts/molecule.sh picks: Debian 13 and 12, or Ubuntu), checked inside the containers."""

import json
import os
import re

import pytest

# Straight to the containers: testinfra's ansible backend would start Ansible for
# every command it runs.
testinfra_hosts = ["podman://enroot-a", "podman://enroot-b"]


def test_systemd_is_healthy(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state == "running", host.run("systemctl --failed --no-legend").stdout


def test_hostname_is_the_inventory_name(host):
    assert host.check_output("hostname") == host.backend.get_hostname()


@pytest.mark.parametrize("package", ["chrony", "jq", "numactl", "rsync", "python3"])
def test_packages_installed(host, package):
    assert host.package(package).is_installed


# Recommends of base's packages (base_install_recommends: false), by release: libpsl's
# publicsuffix, and gnupg's gpg-wks-client on Debian 13 and Ubuntu 24.04 (Debian 12's and
# Ubuntu 22.04's gnupg depend on it).
RECOMMENDS = {
    "trixie": ["publicsuffix", "gpg-wks-client"],
    "bookworm": ["publicsuffix"],
    "noble": ["publicsuffix", "gpg-wks-client"],
    "jammy": ["publicsuffix"],
}


def test_recommended_packages_are_left_out(host):
    release = host.check_output(". /etc/os-release && echo $VERSION_CODENAME")
    installed = [p for p in RECOMMENDS[release] if host.package(p).is_installed]
    assert installed == []


def test_etc_hosts_lists_every_node(host):
    text = host.file("/etc/hosts").content_string
    block = text.split("# BEGIN Kiln cluster hosts")[1].split("# END Kiln cluster hosts")[0]
    assert "10.214.0.51 enroot-a" in block
    assert "10.214.0.52 enroot-b" in block


def test_chrony_runs_without_touching_the_clock(host):
    assert host.service("chrony").is_running
    assert host.service("chrony").is_enabled
    assert 'DAEMON_OPTS="-F 1 -x"' in host.file("/etc/default/chrony").content_string
    assert "chronyd" in host.check_output("ps -eo comm")


def test_time_flows_from_the_server_host(host):
    name = host.backend.get_hostname()
    server_conf = host.file("/etc/chrony/conf.d/kiln-server.conf")
    if name == "enroot-a":
        assert server_conf.exists
        assert "local stratum 10" in server_conf.content_string
        assert re.search(r"^allow 0\.0\.0\.0/0$", server_conf.content_string, re.MULTILINE)
    else:
        assert not server_conf.exists
        sources = host.file("/etc/chrony/sources.d/kiln.sources").content_string
        assert "server 10.214.0.51 iburst prefer" in sources
        assert "10.214.0.51" in host.check_output("chronyc -n sources")


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


def test_the_fingerprint_program_answers_the_nodes_versions(host):
    program = host.file("/usr/local/sbin/kiln-fingerprint")
    assert (program.user, program.mode) == ("root", 0o755)
    # Not a local fact: Ansible's gathers do not run it.
    assert not host.file("/etc/ansible/facts.d/kiln_fingerprint.fact").exists
    found = json.loads(host.check_output("/usr/local/sbin/kiln-fingerprint"))
    release = host.check_output("uname -r")
    pretty = host.check_output(". /etc/os-release && echo $PRETTY_NAME")
    # The kernel, the distribution and enroot (the package, either flavour): nothing of
    # the GPU or Slurm stack is installed here.
    assert found == {"distribution": pretty, "kernel": release, "enroot": "4.1.2-1"}


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


# The nccl_env role on the compute node (the playbook's hosts: slurm_compute): no RDMA
# device, so the socket preset over the interface holding the node's kiln_address, with
# enroot-a's overrides on top. The login node gets no NCCL file.
NCCL_LINES = [
    "NCCL_SOCKET_IFNAME==eth0",
    "# override: the operator's nccl_env_overrides",
    "NCCL_DEBUG=WARN",
    "NCCL_TOPO_FILE=/etc/nccl/topo.xml",
]
NCCL_SOURCES = {
    "NCCL_SOCKET_IFNAME": "socket",
    "NCCL_DEBUG": "override",
    "NCCL_TOPO_FILE": "override",
}
NCCL_NOTES = ["NCCL_IB_DISABLE removed by nccl_env_overrides"]


def test_nccl_site_settings_and_their_record(host):
    conf = host.file("/etc/nccl.conf")
    fact = host.file("/etc/ansible/facts.d/kiln_nccl.fact")
    if host.backend.get_hostname() == "enroot-b":
        assert (conf.exists, fact.exists) == (False, False)
        return
    assert host.check_output("ip -o -4 addr show eth0 | awk '{print $4}'").startswith("10.214.0.")
    assert (conf.user, conf.group, conf.mode) == ("root", "root", 0o644)
    assert conf.content_string.splitlines() == [
        "# Written by Kiln (role nccl_env): preset socket",
        "# socket: no RDMA device: NCCL over TCP sockets",
        *NCCL_LINES,
        *(f"# {note}" for note in NCCL_NOTES),
    ]
    values = dict(line.split("=", 1) for line in NCCL_LINES if not line.startswith("#"))
    assert json.loads(fact.content_string) == {
        "preset": "socket",
        "values": values,
        "sources": NCCL_SOURCES,
        "notes": NCCL_NOTES,
    }

"""IMEX on NVL72 nodes (kiln.imex): domains grouped from the NVLink data the block
topology reads, each domain's nodes_config.cfg, the package at the driver's version,
and SwitchType in slurm.conf."""

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from kiln import imex
from kiln.roles import slurm
from tests.unit.test_filter_plugins import filters

FIXTURE = Path(__file__).parent.parent / "fixtures" / "gpu" / "imex"
# One GB200 compute tray's four GPUs in rack A's default partition (the recorded format).
RACK_A = (FIXTURE / "query-fabric-clusterUuid-cliqueId.csv").read_text().splitlines()
UUID_A = "8c1f2a4e-5b3d-4e6f-9a7b-0c1d2e3f4a5b"
UUID_B = "1d2e3f4a-5b6c-4d7e-8f90-a1b2c3d4e5f6"
RACK_B = [f"{UUID_B}, 32766"] * 4
PARTITION_A1 = [f"{UUID_A}, 1"] * 4
NO_DOMAIN = ["N/A, N/A"] * 8


def node(nvlink, address, setting="auto", domain=""):
    return {"nvlink": nvlink, "address": address, "setting": setting, "domain": domain}


CLUSTER = {
    "gb01": node(RACK_A, "10.0.1.11"),
    "gb02": node(RACK_A, "10.0.1.12"),
    "gb10": node(RACK_A, "10.0.1.20"),
    "gb03": node(PARTITION_A1, "10.0.1.13"),
    "gb04": node(PARTITION_A1, "10.0.1.14"),
    "gb19": node(RACK_B, "10.0.2.19"),
    "gb20": node(RACK_B, "10.0.2.20"),
    "h100": node(NO_DOMAIN, "10.0.3.1"),
    "gb21": node(RACK_B, "10.0.2.21", setting="off"),
}


def test_domains_are_the_nvlink_partitions_each_with_its_nodes_addresses():
    found = imex.domains(CLUSTER)
    assert {name: d.nodes_config() for name, d in found.items()} == {
        f"{UUID_A}/32766": "10.0.1.11\n10.0.1.12\n10.0.1.20\n",
        f"{UUID_A}/1": "10.0.1.13\n10.0.1.14\n",
        f"{UUID_B}/32766": "10.0.2.19\n10.0.2.20\n",
    }


def test_each_nodes_plan():
    plans = {h: imex.host_plan(CLUSTER, h, "cuda-repo") for h in CLUSTER}
    assert plans == {
        "gb01": imex.HostPlan(True, f"{UUID_A}/32766", "10.0.1.11\n10.0.1.12\n10.0.1.20\n"),
        "gb02": imex.HostPlan(True, f"{UUID_A}/32766", "10.0.1.11\n10.0.1.12\n10.0.1.20\n"),
        "gb10": imex.HostPlan(True, f"{UUID_A}/32766", "10.0.1.11\n10.0.1.12\n10.0.1.20\n"),
        "gb03": imex.HostPlan(True, f"{UUID_A}/1", "10.0.1.13\n10.0.1.14\n"),
        "gb04": imex.HostPlan(True, f"{UUID_A}/1", "10.0.1.13\n10.0.1.14\n"),
        "gb19": imex.HostPlan(True, f"{UUID_B}/32766", "10.0.2.19\n10.0.2.20\n"),
        "gb20": imex.HostPlan(True, f"{UUID_B}/32766", "10.0.2.19\n10.0.2.20\n"),
        "h100": imex.HostPlan(
            skip="IMEX not set up: no NVLink domain reported (fabric clusterUuid N/A)"
        ),
        "gb21": imex.HostPlan(skip="IMEX not set up: nvidia_driver_imex is off"),
    }
    assert imex.imex_hosts(CLUSTER, sorted(CLUSTER)) == [
        "gb01", "gb02", "gb03", "gb04", "gb10", "gb19", "gb20",
    ]  # fmt: skip


def test_a_declared_domain_spans_partitions_of_one_nvlink_domain():
    nodes = {
        "gb01": node(RACK_A, "10.0.1.11", domain="rackA"),
        "gb03": node(PARTITION_A1, "10.0.1.13", domain="rackA"),
    }
    assert imex.host_plan(nodes, "gb03", "cuda-repo") == imex.HostPlan(
        True, "rackA", "10.0.1.11\n10.0.1.13\n"
    )


def test_a_domain_whose_nodes_disagree_on_cluster_uuid_is_refused_naming_them():
    nodes = {
        "gb01": node(RACK_A, "10.0.1.11", domain="rackA"),
        "gb02": node(RACK_A, "10.0.1.12", domain="rackA"),
        "gb19": node(RACK_B, "10.0.2.19", domain="rackA"),
    }
    message = (
        f"IMEX domain rackA: its nodes disagree on clusterUuid (gb[01-02] report {UUID_A}; "
        f"gb19 reports {UUID_B}): one IMEX domain is one NVLink domain; fix "
        "nvidia_driver_imex_domain"
    )
    with pytest.raises(imex.ImexError) as caught:
        imex.host_plan(nodes, "gb01", "cuda-repo")
    assert str(caught.value) == message
    # The role's filter: every node fails at the same task, before any is changed.
    hostvars = {h: {imex.NODE_FACT: data} for h, data in nodes.items()}
    with pytest.raises(AnsibleFilterError) as caught:
        filters("kiln_imex")["kiln_imex_plan"](hostvars, list(nodes), "gb19", "cuda-repo")
    assert str(caught.value) == message


def test_a_node_whose_gpus_report_two_domains_is_named():
    nodes = {"gb01": node(RACK_A[:2] + RACK_B[:2], "10.0.1.11")}
    with pytest.raises(imex.ImexError) as caught:
        imex.domains(nodes)
    assert str(caught.value) == (
        f"nvidia-smi on gb01:1: the GPUs of gb01 report different NVLink domains "
        f"({UUID_B}/32766; {UUID_A}/32766)"
    )


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        (
            {"gb01": node(RACK_A, "")},
            "gb01: IMEX needs the node's IP address, got '': set nvidia_driver_imex_address, "
            "or gather facts so its default IPv4 is known",
        ),
        (
            {"gb01": node(RACK_A, "gb01.example")},
            "gb01: IMEX needs the node's IP address, got 'gb01.example': set "
            "nvidia_driver_imex_address, or gather facts so its default IPv4 is known",
        ),
        (
            {"gb01": node(RACK_A, "10.0.1.11"), "gb02": node(RACK_A, "10.0.1.11")},
            f"IMEX domain {UUID_A}/32766: gb01 and gb02 have the same address 10.0.1.11",
        ),
    ],
)
def test_addresses_must_be_distinct_ip_addresses(nodes, message):
    with pytest.raises(imex.ImexError) as caught:
        imex.domains(nodes)
    assert str(caught.value) == message


def test_what_a_node_cannot_have():
    assert imex.host_plan(CLUSTER, "gb01", "debian") == imex.HostPlan(
        fail=f"gb01 is in NVLink domain {UUID_A}/32766 and needs IMEX, which Debian does "
        "not package: use nvidia_driver_source cuda-repo, or set nvidia_driver_imex off"
    )
    nodes = {**CLUSTER, "h100": node(NO_DOMAIN, "10.0.3.1", setting="required")}
    assert imex.host_plan(nodes, "h100", "cuda-repo") == imex.HostPlan(
        fail="nvidia_driver_imex is required, but h100 has no NVLink domain reported "
        "(fabric clusterUuid N/A)"
    )
    # Never reported: the driver did not run there yet.
    assert imex.host_plan({}, "gb01", "cuda-repo") == imex.HostPlan(
        skip="IMEX not set up: no NVLink domain data (the driver is not loaded yet)"
    )


def test_the_filter_reads_cached_facts_of_hosts_outside_the_limit():
    hostvars = {
        "gb01": {imex.NODE_FACT: CLUSTER["gb01"]},
        "gb02": {"ansible_facts": {imex.NODE_FACT: CLUSTER["gb02"]}},  # outside --limit
        "ctl": {},
    }
    offered = filters("kiln_imex")
    assert offered["kiln_imex_plan"](hostvars, ["gb01", "gb02", "ctl"], "gb01", "cuda-repo") == {
        "imex": True,
        "domain": f"{UUID_A}/32766",
        "nodes_config": "10.0.1.11\n10.0.1.12\n",
        "skip": "",
        "fail": "",
    }
    assert offered["kiln_imex_hosts"](hostvars, ["gb01", "gb02", "ctl"]) == ["gb01", "gb02"]


def test_the_package_is_named_for_the_driver_and_offered_at_exactly_its_version():
    offered = filters("kiln_imex")
    assert offered["kiln_imex_package"]("570.172.08") == "nvidia-imex-570"
    assert offered["kiln_imex_package"]("580.95.05") == "nvidia-imex"
    policy = (
        "nvidia-imex:\n  Installed: (none)\n  Candidate: 580.105.08-1\n  Version table:\n"
        "     580.105.08-1 600\n        600 https://developer.download.nvidia.com/compute/cuda/"
        "repos/debian12/x86_64  Packages\n"
        "     580.95.05-1 600\n        600 https://developer.download.nvidia.com/compute/cuda/"
        "repos/debian12/x86_64  Packages\n"
    )
    assert offered["kiln_imex_mismatch"](policy, "580.95.05") == ""
    assert offered["kiln_imex_mismatch"](policy, "580.82.07") == (
        "IMEX must equal the driver exactly: driver 580.82.07, nvidia-imex offered at "
        "580.95.05, 580.105.08"
    )


def test_slurm_gives_jobs_imex_channels_where_nodes_run_imex():
    plugins = ["mpi_pmix.so", "libpmix.so", "switch_nvidia_imex.so"]
    cluster = slurm.Cluster(["ctl"], plugins, cgroup=False, imex_nodes=["gb01", "gb02"])
    assert slurm.settings({}, cluster, {}) == {
        "SlurmctldHost": ["ctl"],
        "MpiDefault": "pmix",
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/linux",
        "SwitchType": "switch/nvidia_imex",
    }
    # No IMEX node: no SwitchType, whatever the controller has.
    assert "SwitchType" not in slurm.settings({}, slurm.Cluster(["ctl"], plugins), {})


def test_slurm_without_the_imex_plugin_is_refused():
    cluster = slurm.Cluster(["ctl"], ["mpi_pmix.so"], imex_nodes=["gb01", "gb02", "gb03"])
    message = (
        "gb[01-03] run IMEX, but this Slurm has no switch/nvidia_imex plugin "
        "(switch_nvidia_imex.so, Slurm 24.11 or later): upgrade Slurm, or set "
        "nvidia_driver_imex off for them"
    )
    with pytest.raises(slurm.SlurmConfigError) as caught:
        slurm.settings({}, cluster, {})
    assert str(caught.value) == message
    with pytest.raises(AnsibleFilterError) as caught:
        filters("kiln_slurm")["kiln_slurm_settings"](
            {}, {}, ["/usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so"], ["ctl"],
            imex_nodes=["gb01", "gb02", "gb03"],
        )  # fmt: skip
    assert str(caught.value) == message

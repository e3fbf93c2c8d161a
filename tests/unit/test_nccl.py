"""kiln.nccl: the fabric from /sys/class/infiniband dumps (tests/fixtures/nccl, written
from the kernel's sysfs formats), the preset for it, overrides, and /etc/nccl.conf as
NCCL reads it."""

import re
from pathlib import Path

import pytest
import yaml

from kiln import nccl

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl"
COMPUTE = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10"]


def fabric(name: str, **extra) -> nccl.Fabric:
    sysfs = yaml.safe_load((FIXTURES / f"{name}.yml").read_text())
    return nccl.Fabric(ports=tuple(nccl.read_ports(sysfs)), **extra)


def test_the_ports_of_a_dgx_h100():
    ports = nccl.read_ports(yaml.safe_load((FIXTURES / "dgx-h100-ib.yml").read_text()))
    assert [p.device for p in ports] == [f"mlx5_{n}" for n in range(12)]  # mlx5_10 after 9
    assert ports[0] == nccl.Port(
        device="mlx5_0",
        port=1,
        state="ACTIVE",
        rate_gbps=400.0,
        link_layer="InfiniBand",
        driver="mlx5_core",
        netdevs=("ibp24s0",),
        roce_v2_gid=None,
    )
    assert ports[1] == nccl.Port(
        device="mlx5_1",
        port=1,
        state="ACTIVE",
        rate_gbps=200.0,
        link_layer="Ethernet",
        driver="mlx5_core",
        netdevs=("enp41s0f0np0",),
        roce_v2_gid=3,  # GID 1 is RoCE v2 too, but link-local IPv6
    )
    assert ports[11].state == "DOWN"


def test_infiniband_preset_uses_active_compute_rails_by_exact_name():
    name, settings = nccl.preset(fabric("dgx-h100-ib", socket_ifname="enp170s0f0np0"))
    assert name == "infiniband"
    assert settings.values == {
        "NCCL_IB_HCA": "=" + ",".join(f"{d}:1" for d in COMPUTE),
        "NCCL_SOCKET_IFNAME": "=enp170s0f0np0",
    }
    assert settings.notes == [
        "mlx5_1:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "mlx5_2:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "mlx5_7:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "mlx5_8:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "mlx5_11:1 left out: DOWN",
    ]


def test_the_whole_file_for_a_dgx_h100_with_an_exclusion_and_an_override():
    name, settings = nccl.preset(fabric("dgx-h100-ib", socket_ifname="bond0"), ["mlx5_10"])
    settings = nccl.with_overrides(settings, {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": ""})
    text = nccl.render(name, settings)
    assert text.splitlines() == [
        "# Written by Kiln (role nccl_env): preset infiniband",
        "# infiniband: NCCL's environment variable documentation (NCCL_IB_HCA exact match)",
        "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1",
        "# override: the operator's nccl_env_overrides",
        "NCCL_DEBUG=WARN",
        "# mlx5_1:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "# mlx5_2:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "# mlx5_7:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "# mlx5_8:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "# mlx5_10:1 excluded by nccl_env_exclude_hcas",
        "# mlx5_11:1 left out: DOWN",
        "# NCCL_SOCKET_IFNAME removed by nccl_env_overrides",
    ]
    # What NCCL takes from it: the settings, and nothing from the comments.
    assert nccl.parse(text) == {
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1",
        "NCCL_DEBUG": "WARN",
    }


def test_roce_preset_takes_the_common_roce_v2_gid():
    name, settings = nccl.preset(fabric("roce-8rail", socket_ifname="eno1"))
    assert name == "roce"
    assert settings.values == {
        "NCCL_IB_HCA": "=" + ",".join(f"mlx5_{n}:1" for n in range(8)),
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
        "NCCL_SOCKET_IFNAME": "=eno1",
    }
    assert settings.notes == []


def test_efa_sets_little():
    name, settings = nccl.preset(fabric("aws-p5-efa", socket_ifname="enp71s0", cloud="aws"))
    assert (name, settings.values) == ("efa", {"FI_PROVIDER": "efa"})


def test_azure_ndv5_adds_its_topology_file():
    azure = fabric("dgx-h100-ib", cloud="azure", machine="Standard_ND96isr_H100_v5")
    name, settings = nccl.preset(azure)
    assert name == "azure-ndv5"
    assert list(settings.values) == [
        "NCCL_IB_HCA",
        "NCCL_TOPO_FILE",
        "NCCL_IB_PCI_RELAXED_ORDERING",
        "NCCL_IGNORE_CPU_AFFINITY",
    ]
    assert settings.values["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv5/topo.xml"


def test_no_rdma_device_means_sockets():
    name, settings = nccl.preset(nccl.Fabric(socket_ifname="eth0"))
    assert (name, settings.values) == (
        "socket",
        {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eth0"},
    )


@pytest.mark.parametrize(
    ("line", "taken"),
    [
        ("NCCL_DEBUG=INFO", {"NCCL_DEBUG": "INFO"}),
        ("  NCCL_DEBUG = INFO", {"  NCCL_DEBUG ": " INFO"}),  # a variable NCCL never reads
        ("# a comment", {}),
        ("# NCCL_DEBUG=INFO", {"# NCCL_DEBUG": "INFO"}),
        ("NCCL_IB_HCA==mlx5_0:1", {"NCCL_IB_HCA": "=mlx5_0:1"}),
    ],
)
def test_parse_reads_lines_as_nccl_does(line, taken):
    assert nccl.parse(line + "\n") == taken


def test_the_first_of_two_lines_wins_as_in_nccl():
    assert nccl.parse("NCCL_DEBUG=WARN\nNCCL_DEBUG=INFO\n") == {"NCCL_DEBUG": "WARN"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"nccl_debug": "INFO"}, "nccl_env_overrides: 'nccl_debug' is not an environment"),
        ({"NCCL_DEBUG": " INFO"}, "nccl_env_overrides: NCCL_DEBUG's value ' INFO' has a"),
        ({"NCCL_DEBUG": "INFO\nX=1"}, "nccl_env_overrides: NCCL_DEBUG's value 'INFO\\nX=1'"),
    ],
)
def test_overrides_nccl_would_misread_are_refused(overrides, message):
    with pytest.raises(nccl.NcclError, match="^" + re.escape(message)):
        nccl.with_overrides(nccl.Settings(), overrides)


def test_clouds_from_dmi():
    assert nccl.cloud_of({"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge"}) == "aws"
    azure = {"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}
    assert nccl.cloud_of(azure) == "azure"
    assert nccl.cloud_of({"sys_vendor": "Google", "product_name": "Google Compute Engine"}) == "gcp"
    assert nccl.cloud_of({"sys_vendor": "NVIDIA", "product_name": "DGXH100"}) == ""

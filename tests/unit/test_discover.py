"""`kiln inventory discover`'s reading of the hosts (kiln.inventory.discover) on recorded
outputs: the H100 and H200 machines' kiln-gpu-detect and kiln-nccl-probe (tests/fixtures/gpu,
../shared/fixtures/gpu), a DGX H100's InfiniBand sysfs (tests/fixtures/nccl), and a lab
node's whole discover report (tests/fixtures/discover, recorded by playbooks/discover.yml)."""

import copy
import json
from pathlib import Path

import yaml

from kiln import inventory
from kiln.inventory import discover
from kiln.inventory.discover import Setting
from tests.conftest import REPO, cluster_inventory

FIXTURES = REPO / "tests" / "fixtures"
H100 = FIXTURES / "gpu" / "h100-80gb-hbm3-580.159.04"
H200 = FIXTURES / "gpu" / "h200-141gb-580.159.04"
LAB_NODE = FIXTURES / "discover" / "debian12-container.json"


def _dgx_h100(port_11: str = "4: ACTIVE", gpus: int = 8) -> dict:
    """A DGX H100 as discover reads it: the recorded H100's PCI entry as 8 GPUs with 4
    NVSwitches (HGX H100's), the recorded DGX H100 InfiniBand sysfs, a lab node's facts."""
    detect = json.loads((H100 / "kiln-gpu-detect.json").read_text())
    gpu = next(p for p in detect["pci"] if p["vendor"] == "0x10de")
    detect["pci"] = [p for p in detect["pci"] if p["vendor"] != "0x10de"]
    detect["pci"] += [{**gpu, "address": f"0000:{0x18 + 16 * i:02x}:00.0"} for i in range(gpus)]
    detect["pci"] += [
        {
            "address": f"0000:0{5 + i}:00.0",
            "vendor": "0x10de",
            "device": "0x22a3",
            "class": "0x068000",
            "driver": "nvidia-nvswitch",
        }
        for i in range(4)
    ]
    sysfs = yaml.safe_load((FIXTURES / "nccl" / "dgx-h100-ib.yml").read_text())
    sysfs["mlx5_11/ports/1/state"] = port_11
    report = json.loads(LAB_NODE.read_text())
    return {
        "facts": {**report["facts"], "virtualization_role": "host", "virtualization_type": ""},
        "gpu_detect": detect,
        "nccl_probe": {
            "infiniband": sysfs,
            "dmi": {"sys_vendor": "NVIDIA", "product_name": "DGXH100"},
            "socket_ifname": "enp170s0f0np0",
        },
    }


def _spec(tmp_path: Path, compute: tuple[str, ...]):
    directory = tmp_path / "inv"
    directory.mkdir()
    (directory / "hosts.yml").write_text(yaml.safe_dump(cluster_inventory(compute=compute)))
    return inventory.load(directory)


def test_the_h200_is_known_by_its_pci_id_alone():
    raw = {
        "facts": {},
        "gpu_detect": json.loads((H200 / "kiln-gpu-detect.json").read_text()),
        "nccl_probe": json.loads((H200 / "kiln-nccl-probe.json").read_text()),
    }
    node = discover.read_node("h200", raw)
    assert (node.gpu_model, node.gpu_ids, node.nvswitches, node.ports) == (
        "NVIDIA H200",
        ["0x2335"],
        0,
        [],
    )
    assert node.preset == "socket"


def test_a_lab_node_as_the_playbook_brought_it_back():
    node = discover.read_node("compute01", json.loads(LAB_NODE.read_text()))
    report = json.loads(LAB_NODE.read_text())["facts"]
    assert node.os == f"{report['distribution']} {report['distribution_version']}"
    assert (node.container, node.gpu_ids, node.ports) == (True, [], [])
    assert node.vcpus == report["processor_vcpus"] and node.memory_mb == report["memtotal_mb"]
    assert node.line() == (
        "compute01: Debian 12.11; x86_64; 1x2 cores, 2 threads; 24 GiB; no GPU; vda 274.9 GB; "
        "container"
    )


def test_three_dgx_h100_one_with_a_port_down(tmp_path):
    """The majority is the norm: the node with mlx5_11 down is named, and the ports the
    health check expects are the healthy nodes' eight NDR rails."""
    spec = _spec(tmp_path, ("gpu001", "gpu002", "gpu003"))
    nodes = {
        "gpu001": discover.read_node("gpu001", _dgx_h100()),
        "gpu002": discover.read_node("gpu002", _dgx_h100()),
        "gpu003": discover.read_node("gpu003", _dgx_h100("1: DOWN")),
    }
    found = discover.propose(spec, nodes, {})
    rails = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert found.notes == [
        "gpu003 differs from the other compute nodes: compute rails 7x InfiniBand 400 Gb/s "
        "(mlx5_[0,3-6,9-10]) (most have 8x NVIDIA H100 80GB HBM3, 8x InfiniBand 400 Gb/s "
        "(mlx5_[0,3-6,9-11])): a fault, or a node for another group"
    ]
    assert found.settings == [
        Setting(
            "all",
            "validate_profile",
            "h100-sxm-8x-ib400",
            "the shipped profile for HGX/DGX H100 8-GPU nodes, 8x 400 Gb/s InfiniBand",
        ),
        Setting("slurm_compute", "health_gpus", 8, "8x NVIDIA H100 80GB HBM3 on the compute nodes"),
        Setting(
            "slurm_compute",
            "nvidia_driver_required",
            True,
            "a compute node that shows no GPU is a fault, not a CPU node",
        ),
        Setting(
            "slurm_compute",
            "health_ib_ports",
            [{"device": d, "port": 1, "rate": 400} for d in rails],
            "the compute rails: 8x InfiniBand 400 Gb/s (mlx5_[0,3-6,9-11])",
        ),
        Setting(
            "all",
            "slurm_topology_source",
            "ibnetdiscover",
            "the compute rails are InfiniBand: the switch tree from the fabric",
        ),
        Setting(
            "all",
            "slurm_topology_fabric_hosts",
            ["gpu001"],
            "one node per fabric runs ibnetdiscover",
        ),
        Setting(
            "all",
            "slurm_topology_hca",
            rails,
            "the compute rails' HCAs (a storage rail stays out of the tree)",
        ),
    ]
    assert nodes["gpu001"].preset == "infiniband"
    assert nodes["gpu003"].line() == (
        "gpu003: Debian 12.11; x86_64; 1x2 cores, 2 threads; 24 GiB; 8x NVIDIA H100 80GB HBM3; "
        "4 NVSwitches; 7x InfiniBand 400 Gb/s (mlx5_[0,3-6,9-10]); also 4x Ethernet 200 Gb/s "
        "(mlx5_[1-2,7-8]); also 1x InfiniBand 400 Gb/s (mlx5_11, DOWN); vda 274.9 GB"
    )


def test_a_node_missing_a_gpu_is_named_and_no_profile_fits_a_single_gpu(tmp_path):
    spec = _spec(tmp_path, ("gpu001", "gpu002", "gpu003"))
    nodes = {
        h: discover.read_node(h, _dgx_h100(gpus=7 if h == "gpu002" else 8))
        for h in ("gpu001", "gpu002", "gpu003")
    }
    found = discover.propose(spec, nodes, {"gpu004": "UNREACHABLE: ssh: connect to host"})
    assert found.notes[0].startswith("gpu002 differs from the other compute nodes: 7x NVIDIA")
    assert ("health_gpus", 8) in [(s.name, s.value) for s in found.settings]
    assert found.unreachable == {"gpu004": "UNREACHABLE: ssh: connect to host"}
    single = {
        "h200": discover.read_node(
            "h200", {"gpu_detect": json.loads((H200 / "kiln-gpu-detect.json").read_text())}
        )
    }
    (tmp_path / "b").mkdir()
    alone = discover.propose(_spec(tmp_path / "b", ("h200",)), single, {})
    assert alone.notes == [
        "no shipped validation profile fits 1x NVIDIA H200 with none: write your own "
        "(docs/validation.md, profiles) and name it in validate_profile"
    ]


def test_container_nodes_get_the_lab_profile_and_keep_the_hosts_clock(tmp_path):
    spec = _spec(tmp_path, ("compute01",))
    node = discover.read_node("compute01", json.loads(LAB_NODE.read_text()))
    found = discover.propose(spec, {"compute01": node}, {})
    assert found.settings == [
        Setting(
            "all",
            "validate_profile",
            "lab-cpu",
            "the shipped profile for the local podman lab (CPU nodes, gloo, GlusterFS)",
        ),
        Setting(
            "all",
            "base_chrony_control_clock",
            False,
            "every host is a container: it shares its host's clock and kernel settings",
        ),
        Setting(
            "all",
            "base_sysctl_apply",
            False,
            "every host is a container: it shares its host's clock and kernel settings",
        ),
        Setting(
            "all",
            "slurm_cgroup_enabled",
            False,
            "every host is a container: Slurm cannot constrain jobs with cgroups there",
        ),
    ]
    assert found.notes == []


# /proc/filesystems as the playbook reads it: a virtual machine's kernel built without
# autofs (one of Kiln's test hosts), and Debian 12's, where systemd loaded autofs4.
NO_AUTOFS = "nodev\tsysfs\nnodev\ttmpfs\n\text4\nnodev\tfuse\nnodev\toverlay\n"
WITH_AUTOFS = NO_AUTOFS + "nodev\tautofs\n"


def test_a_kernel_without_autofs_gets_mounts_made_at_boot(tmp_path):
    spec = _spec(tmp_path, ("compute01", "compute02"))
    report = json.loads(LAB_NODE.read_text())
    nodes = {
        "compute01": discover.read_node("compute01", {**report, "filesystems": NO_AUTOFS}),
        "compute02": discover.read_node("compute02", {**report, "filesystems": WITH_AUTOFS}),
    }
    assert nodes["compute01"].line() == (
        "compute01: Debian 12.11; x86_64; 1x2 cores, 2 threads; 24 GiB; no GPU; vda 274.9 GB; "
        "container; no autofs in its kernel"
    )
    assert [n.to_json()["autofs"] for n in nodes.values()] == [False, True]
    found = discover.propose(spec, nodes, {})
    assert found.settings[-1] == Setting(
        "all",
        "autofs_automount",
        False,
        "compute01: the kernel has no autofs: shared mounts are made at boot (systemd mount "
        "units), not on access",
    )
    del nodes["compute01"]
    assert "autofs_automount" not in [s.name for s in discover.propose(spec, nodes, {}).settings]


def test_differences_name_the_value_the_inventory_holds_now(tmp_path):
    spec = _spec(tmp_path, ("gpu001",))
    nodes = {"gpu001": discover.read_node("gpu001", _dgx_h100())}
    found = discover.propose(spec, nodes, {})
    changed = {d.setting.name: (d.current, d.source) for d in discover.differences(spec, found)}
    assert changed["health_gpus"] == ("", "default")
    assert changed["slurm_topology_source"] == ("none", "default")
    assert changed["validate_profile"] == (None, "default")


def test_the_report_keeps_every_field_it_read():
    node = discover.read_node("gpu001", _dgx_h100())
    kept = node.to_json()
    assert (kept["gpus"], kept["gpu_model"], kept["nvswitches"], kept["nccl_preset"]) == (
        8,
        "NVIDIA H100 80GB HBM3",
        4,
        "infiniband",
    )
    assert [p["name"] for p in kept["ports"] if p["compute_rail"]] == [
        "mlx5_0:1",
        "mlx5_3:1",
        "mlx5_4:1",
        "mlx5_5:1",
        "mlx5_6:1",
        "mlx5_9:1",
        "mlx5_10:1",
        "mlx5_11:1",
    ]
    assert copy.deepcopy(kept) == json.loads(json.dumps(kept))

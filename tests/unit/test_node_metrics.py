"""kiln-metrics and its writers (kiln_node.gpu_metrics, ib_metrics, slurm_metrics) on
recorded outputs: the H100 VMs of tests/fixtures/gpu (faulty variants change only the
fields at fault), Slurm 24.11's scontrol and squeue (tests/fixtures/slurm), and an
InfiniBand sysfs tree in the kernel's format. Every written file passes promtool."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kiln.roles.monitoring import dcgm
from kiln_node import gpu_metrics, ib_metrics, metrics, nvidia_smi, slurm_metrics, slurm_state
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures"
H100_VM = FIXTURES / "gpu" / "h100-80gb-hbm3-vm"
H100_580 = FIXTURES / "gpu" / "h100-80gb-hbm3-580.159.04"
SLURM = FIXTURES / "slurm"
SCRIPT = REPO / "roles" / "monitoring" / "files" / "kiln-metrics"


def promtool_check(promtool: str, text: str) -> None:
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")


def help_type(name: str) -> str:
    metric = metrics.CATALOGUE[name]
    return f"# HELP {name} {metric.help}\n# TYPE {name} {metric.type}\n"


def gpu_text(samples: dict[str, list[str]]) -> str:
    """The GPU file: every catalogued kiln_gpu_* metric in order, with these samples."""
    return "".join(
        help_type(name) + "".join(f"{line}\n" for line in samples.get(name, []))
        for name, m in metrics.CATALOGUE.items()
        if m.file == metrics.GPU
    )


# --- GPUs ------------------------------------------------------------------------------


def vm_variant(*changes: tuple[str, str]) -> str:
    """The recorded XML with each (old, new) replaced once: the first occurrence, which
    for the ECC counters is the volatile one."""
    text = (H100_VM / "nvidia-smi-q.xml").read_text()
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


GPU0 = 'node="gpu001",gpu="0"'
VM_INFO = (
    'kiln_gpu_info{node="gpu001",gpu="0",uuid="GPU-320a3b5b-5f8b-e47d-48a5-f808c0da1f70",'
    'name="NVIDIA H100 80GB HBM3",bus_id="00000000:00:06.0",driver="580.159.04"} 1'
)


# nvidia-smi's clock event reasons, in the order it lists them (driver 580).
CLOCK_REASONS = (
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
    "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown",
    "display_clocks_setting",
)  # fmt: skip


def clock_reasons(labels: str, *active: str) -> list[str]:
    """kiln_gpu_clock_event_reason's lines for one GPU: 1 for each reason in ACTIVE."""
    return [
        f'kiln_gpu_clock_event_reason{{{labels},reason="{r}"}} {int(r in active)}'
        for r in CLOCK_REASONS
    ]


def test_gpu_file_of_the_recorded_h100_vm(promtool):
    """The healthy VM at rest: its kernel log has NVRM lines but no XID."""
    log = nvidia_smi.parse_xml((H100_VM / "nvidia-smi-q.xml").read_text())
    xids = nvidia_smi.parse_xids((H100_VM / "dmesg-nvrm.txt").read_text())
    text = metrics.text(gpu_metrics.gauges(log, xids, "gpu001", 85))
    assert text == gpu_text(
        {
            "kiln_gpu_info": [VM_INFO],
            "kiln_gpu_temperature_celsius": [f"kiln_gpu_temperature_celsius{{{GPU0}}} 36"],
            "kiln_gpu_temperature_ceiling_celsius": [
                'kiln_gpu_temperature_ceiling_celsius{node="gpu001"} 85'
            ],
            "kiln_gpu_power_watts": [f"kiln_gpu_power_watts{{{GPU0}}} 70.94"],
            "kiln_gpu_power_limit_watts": [f"kiln_gpu_power_limit_watts{{{GPU0}}} 700"],
            "kiln_gpu_sm_clock_hertz": [f"kiln_gpu_sm_clock_hertz{{{GPU0}}} 345000000"],
            "kiln_gpu_memory_clock_hertz": [f"kiln_gpu_memory_clock_hertz{{{GPU0}}} 2619000000"],
            "kiln_gpu_utilization_ratio": [f"kiln_gpu_utilization_ratio{{{GPU0}}} 0"],
            "kiln_gpu_memory_used_bytes": [f"kiln_gpu_memory_used_bytes{{{GPU0}}} 0"],
            "kiln_gpu_ecc_uncorrected_errors": [f"kiln_gpu_ecc_uncorrected_errors{{{GPU0}}} 0"],
            "kiln_gpu_ecc_corrected_errors": [f"kiln_gpu_ecc_corrected_errors{{{GPU0}}} 0"],
            "kiln_gpu_remapped_rows_pending": [f"kiln_gpu_remapped_rows_pending{{{GPU0}}} 0"],
            "kiln_gpu_remap_failure": [f"kiln_gpu_remap_failure{{{GPU0}}} 0"],
            # at rest: its clocks are down because it is idle
            "kiln_gpu_clock_event_reason": clock_reasons(GPU0, "gpu_idle"),
        }
    )
    promtool_check(promtool, text)


def test_gpu_file_of_the_recorded_h100_under_the_burn_in_driver(promtool):
    """The second recording (same driver, SM clock at its maximum); no ceiling set."""
    log = nvidia_smi.parse_xml((H100_580 / "nvidia-smi-q.xml").read_text())
    text = metrics.text(gpu_metrics.gauges(log, [], "gpu002", None))
    node = 'node="gpu002",gpu="0"'
    assert text == gpu_text(
        {
            "kiln_gpu_info": [
                'kiln_gpu_info{node="gpu002",gpu="0",'
                'uuid="GPU-00000000-0000-0000-0000-000000000001",name="NVIDIA H100 80GB HBM3",'
                'bus_id="00000000:00:06.0",driver="580.159.04"} 1'
            ],
            "kiln_gpu_temperature_celsius": [f"kiln_gpu_temperature_celsius{{{node}}} 40"],
            "kiln_gpu_power_watts": [f"kiln_gpu_power_watts{{{node}}} 129.04"],
            "kiln_gpu_power_limit_watts": [f"kiln_gpu_power_limit_watts{{{node}}} 700"],
            "kiln_gpu_sm_clock_hertz": [f"kiln_gpu_sm_clock_hertz{{{node}}} 1980000000"],
            "kiln_gpu_memory_clock_hertz": [f"kiln_gpu_memory_clock_hertz{{{node}}} 2619000000"],
            "kiln_gpu_utilization_ratio": [f"kiln_gpu_utilization_ratio{{{node}}} 0"],
            "kiln_gpu_memory_used_bytes": [f"kiln_gpu_memory_used_bytes{{{node}}} 0"],
            "kiln_gpu_ecc_uncorrected_errors": [f"kiln_gpu_ecc_uncorrected_errors{{{node}}} 0"],
            "kiln_gpu_ecc_corrected_errors": [f"kiln_gpu_ecc_corrected_errors{{{node}}} 0"],
            "kiln_gpu_remapped_rows_pending": [f"kiln_gpu_remapped_rows_pending{{{node}}} 0"],
            "kiln_gpu_remap_failure": [f"kiln_gpu_remap_failure{{{node}}} 0"],
            "kiln_gpu_clock_event_reason": clock_reasons(node),
        }
    )
    promtool_check(promtool, text)


# A faulty, busy H100: hot, under load, ECC errors on both counters, a remap pending and
# failed, the power reading N/A (no sample), and XIDs in the kernel's line format: two
# 79s and a 48 on this GPU, one 79 on an address nvidia-smi no longer lists.
FAULTY = vm_variant(
    ("<gpu_temp>36 C</gpu_temp>", "<gpu_temp>91 C</gpu_temp>"),
    ("<instant_power_draw>70.94 W<", "<instant_power_draw>N/A<"),
    ("<sm_clock>345 MHz</sm_clock>", "<sm_clock>1755 MHz</sm_clock>"),
    ("<gpu_util>0 %</gpu_util>", "<gpu_util>37 %</gpu_util>"),
    ("<used>0 MiB</used>", "<used>40960 MiB</used>"),
    ("<sram_correctable>0</sram_correctable>", "<sram_correctable>5</sram_correctable>"),
    ("<dram_correctable>0</dram_correctable>", "<dram_correctable>2</dram_correctable>"),
    ("<sram_uncorrectable_secded>0<", "<sram_uncorrectable_secded>1<"),
    ("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>"),
    ("<remapped_row_pending>No<", "<remapped_row_pending>Yes<"),
    ("<remapped_row_failure>No<", "<remapped_row_failure>Yes<"),
    ("<clocks_event_reason_gpu_idle>Active<", "<clocks_event_reason_gpu_idle>Not Active<"),
    ("<clocks_event_reason_hw_thermal_slowdown>Not Active<",
     "<clocks_event_reason_hw_thermal_slowdown>Active<"),
)  # fmt: skip
FAULTY_DMESG = (H100_VM / "dmesg-nvrm.txt").read_text() + (
    "[ 4242.1] NVRM: Xid (PCI:0000:00:06): 79, pid=0, GPU has fallen off the bus.\n"
    "[ 4243.5] NVRM: Xid (PCI:0000:00:06): 48, pid=1234, name=python3, DBE (0x1)\n"
    "[ 4250.0] NVRM: Xid (PCI:0000:00:06): 79, pid=0, GPU has fallen off the bus.\n"
    "[ 4251.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"
)
FAULTY_TEXT = gpu_text(
    {
        "kiln_gpu_info": [VM_INFO],
        "kiln_gpu_temperature_celsius": [f"kiln_gpu_temperature_celsius{{{GPU0}}} 91"],
        "kiln_gpu_temperature_ceiling_celsius": [
            'kiln_gpu_temperature_ceiling_celsius{node="gpu001"} 85'
        ],
        "kiln_gpu_power_limit_watts": [f"kiln_gpu_power_limit_watts{{{GPU0}}} 700"],
        "kiln_gpu_sm_clock_hertz": [f"kiln_gpu_sm_clock_hertz{{{GPU0}}} 1755000000"],
        "kiln_gpu_memory_clock_hertz": [f"kiln_gpu_memory_clock_hertz{{{GPU0}}} 2619000000"],
        "kiln_gpu_utilization_ratio": [f"kiln_gpu_utilization_ratio{{{GPU0}}} 0.37"],
        "kiln_gpu_memory_used_bytes": [f"kiln_gpu_memory_used_bytes{{{GPU0}}} 42949672960"],
        "kiln_gpu_ecc_uncorrected_errors": [f"kiln_gpu_ecc_uncorrected_errors{{{GPU0}}} 4"],
        "kiln_gpu_ecc_corrected_errors": [f"kiln_gpu_ecc_corrected_errors{{{GPU0}}} 7"],
        "kiln_gpu_remapped_rows_pending": [f"kiln_gpu_remapped_rows_pending{{{GPU0}}} 1"],
        "kiln_gpu_remap_failure": [f"kiln_gpu_remap_failure{{{GPU0}}} 1"],
        "kiln_gpu_xid_errors_total": [
            'kiln_gpu_xid_errors_total{node="gpu001",gpu="0",xid="48"} 1',
            'kiln_gpu_xid_errors_total{node="gpu001",gpu="0",xid="79"} 2',
            'kiln_gpu_xid_errors_total{node="gpu001",gpu="0000:3b:00",xid="79"} 1',
        ],
        "kiln_gpu_clock_event_reason": clock_reasons(GPU0, "hw_thermal_slowdown"),
    }
)


def test_gpu_file_of_a_faulty_gpu(promtool):
    log = nvidia_smi.parse_xml(FAULTY)
    text = metrics.text(gpu_metrics.gauges(log, nvidia_smi.parse_xids(FAULTY_DMESG), "gpu001", 85))
    assert text == FAULTY_TEXT
    promtool_check(promtool, text)


def test_older_drivers_clocks_throttle_reasons_are_the_same_reasons():
    """Drivers before 535 name the element clocks_throttle_reasons, each child
    clocks_throttle_reason_*; a reason given as N/A has no series."""
    text = (H100_VM / "nvidia-smi-q.xml").read_text()
    text = text.replace("clocks_event_reasons>", "clocks_throttle_reasons>")
    text = text.replace("clocks_event_reason_", "clocks_throttle_reason_")
    text = text.replace(
        "<clocks_throttle_reason_sync_boost>Not Active<", "<clocks_throttle_reason_sync_boost>N/A<"
    )
    (gpu,) = nvidia_smi.parse_xml(text).gpus
    assert gpu.clock_events == ("gpu_idle",)
    assert gpu.clock_event_states == tuple(
        (r, r == "gpu_idle") for r in CLOCK_REASONS if r != "sync_boost"
    )


def test_older_drivers_power_and_ecc_fields():
    """Drivers before the SRAM/DRAM split write power_readings/ and double/single_bit."""
    old = vm_variant(
        ("<gpu_power_readings>", "<power_readings>"),
        ("<instant_power_draw>70.94 W</instant_power_draw>", "<power_draw>301.50 W</power_draw>"),
        ("<current_power_limit>700.00 W</current_power_limit>",
         "<enforced_power_limit>650.00 W</enforced_power_limit>"),
        ("</gpu_power_readings>", "</power_readings>"),
        ("<sram_correctable>0</sram_correctable>",
         "<single_bit><total>12</total></single_bit><double_bit><total>1</total></double_bit>"),
    )  # fmt: skip
    gpu = nvidia_smi.parse_xml(old).gpus[0]
    assert (gpu.power_w, gpu.power_limit_w, gpu.correctable_volatile) == (301.5, 650.0, 12)
    assert gpu.uncorrectable_volatile == 1


def test_pci_slots_match_across_nvidia_smi_and_the_kernel():
    assert gpu_metrics.pci_slot("00000000:3B:00.0") == gpu_metrics.pci_slot("0000:3b:00")
    assert gpu_metrics.pci_slot("00000001:3b:00.0") != gpu_metrics.pci_slot("0000:3b:00")
    assert gpu_metrics.pci_slot("3b:00") is None


# --- NVLink (nvidia-smi nvlink -e) ---------------------------------------------------

HGX_H100 = FIXTURES / "gpu" / "hgx-h100-nvlink"
NVLINK_COUNTERS = ("replay", "recovery", "crc")
# The fixture's planted errors: GPU 3, link 7 (README.md).
PLANTED = {(3, 7, "replay"): 14, (3, 7, "recovery"): 1, (3, 7, "crc"): 3}


def test_nvlink_errors_of_an_hgx_h100():
    """8 GPUs x 18 links x 3 counters, in nvidia-smi's order, the planted link's values
    where they are."""
    found = nvidia_smi.parse_nvlink_errors((HGX_H100 / "nvidia-smi-nvlink-e.txt").read_text())
    assert found == [
        nvidia_smi.NvlinkCounter(gpu, link, name, PLANTED.get((gpu, link, name), 0))
        for gpu in range(8)
        for link in range(18)
        for name in NVLINK_COUNTERS
    ]


def test_no_nvlink_no_counters():
    """The H100 VM's recorded answer: nothing at all."""
    recorded = (H100_580 / "nvidia-smi-nvlink-e.txt").read_text()
    assert recorded == ""
    assert nvidia_smi.parse_nvlink_errors(recorded) == []


def test_nvlink_counter_names_not_available_and_stray_lines():
    """Any `<Name> Errors` is a counter (older drivers' CRC Flit and CRC Data); N/A gives
    no sample; a link line before any GPU header, and lines of another shape, none."""
    text = (
        "\t Link 0: Replay Errors: 9\n"
        "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-4000-8000-000000000001)\n"
        "\t Link 0: Replay Errors: 0\n"
        "\t Link 0: Recovery Errors: 2\n"
        "\t Link 0: CRC Flit Errors: 5\n"
        "\t Link 0: CRC Data Errors: 0\n"
        "\n"
        "\t Link 1: Replay Errors: N/A\n"
        "\t Link 1: Tx Throughput: 12345\n"
        "\t Link 1: 25 GB/s\n"
        "\t Link 1: <inactive>\n"
        "\t Link 1: Recovery Errors: -\n"
        "GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-4000-8000-000000000002)\n"
        "         Link 11: CRC Errors: 7\n"
    )
    assert nvidia_smi.parse_nvlink_errors(text) == [
        nvidia_smi.NvlinkCounter(1, 0, "replay", 0),
        nvidia_smi.NvlinkCounter(1, 0, "recovery", 2),
        nvidia_smi.NvlinkCounter(1, 0, "crc_flit", 5),
        nvidia_smi.NvlinkCounter(1, 0, "crc_data", 0),
        nvidia_smi.NvlinkCounter(2, 11, "crc", 7),
    ]


def nvlink_lines(node: str, gpus: range) -> list[str]:
    """kiln_gpu_nvlink_errors_total's lines for the fixture's GPUs GPUS."""
    return [
        f'kiln_gpu_nvlink_errors_total{{node="{node}",gpu="{gpu}",link="{link}",'
        f'counter="{name}"}} {PLANTED.get((gpu, link, name), 0)}'
        for gpu in gpus
        for link in range(18)
        for name in NVLINK_COUNTERS
    ]


def test_gpu_file_with_nvlink_counters(promtool):
    """The recorded H100's XML with the HGX fixture's NVLink counters: one series per GPU,
    link and counter, after the XIDs; the file passes promtool."""
    log = nvidia_smi.parse_xml((H100_580 / "nvidia-smi-q.xml").read_text())
    nvlink = nvidia_smi.parse_nvlink_errors((HGX_H100 / "nvidia-smi-nvlink-e.txt").read_text())
    text = metrics.text(gpu_metrics.gauges(log, [], "gpu002", None, nvlink))
    # kiln_gpu_nvlink_errors_total is the file's last metric: its lines end it.
    without = metrics.text(gpu_metrics.gauges(log, [], "gpu002", None))
    assert text == without + "".join(f"{line}\n" for line in nvlink_lines("gpu002", range(8)))
    promtool_check(promtool, text)


# --- InfiniBand ------------------------------------------------------------------------


def sysfs_port(root: Path, device: str, port: int, state: str, rate: str, **counters: int):
    """One port as the kernel lays it out under /sys/class/infiniband."""
    where = root / device / "ports" / str(port)
    (where / "counters").mkdir(parents=True)
    (where / "state").write_text(f"{state}\n")
    (where / "phys_state").write_text("5: LinkUp\n")
    (where / "rate").write_text(f"{rate}\n")
    for name in ("link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors"):
        (where / "counters" / name).write_text(f"{counters.get(name, 0)}\n")


@pytest.fixture
def infiniband(tmp_path) -> Path:
    """Two NDR HCAs: mlx5_0 active, mlx5_1 trained down to HDR with link errors; a
    two-port mlx5_10 to show ports and devices sort as the names read."""
    root = tmp_path / "infiniband"
    sysfs_port(root, "mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)")
    sysfs_port(
        root, "mlx5_1", 1, "4: ACTIVE", "200 Gb/sec (4X HDR)",
        link_downed=3, link_error_recovery=7, symbol_error=129,
    )  # fmt: skip
    sysfs_port(root, "mlx5_10", 2, "1: DOWN", "10 Gb/sec (4X SDR)")
    sysfs_port(root, "mlx5_10", 1, "2: INIT", "2.5 Gb/sec (1X SDR)")
    return root


IB_EXPECTED = [
    {"device": "mlx5_0", "port": 1, "rate": 400},
    {"device": "mlx5_1", "rate": 400},  # port 1 by default, as in the health settings
    {"device": "mlx5_2", "port": 1, "rate": 400},  # not in sysfs
]


def ib_lines(name: str, *rows: tuple[str, str, str]) -> str:
    return help_type(name) + "".join(
        f'{name}{{node="gpu001",device="{d}",port="{p}"}} {v}\n' for d, p, v in rows
    )


def test_ib_file_of_a_sysfs_tree(infiniband, promtool):
    ports = ib_metrics.read_ports(str(infiniband))
    assert ports[:2] == [
        ib_metrics.Port("mlx5_0", "1", "ACTIVE", 400.0, {"link_downed": 0,
                        "link_error_recovery": 0, "symbol_error": 0}),
        ib_metrics.Port("mlx5_1", "1", "ACTIVE", 200.0, {"link_downed": 3,
                        "link_error_recovery": 7, "symbol_error": 129}),
    ]  # fmt: skip
    text = metrics.text(ib_metrics.gauges(ports, IB_EXPECTED, "gpu001"))
    assert text == (
        ib_lines(
            "kiln_ib_port_active",
            ("mlx5_0", "1", "1"), ("mlx5_1", "1", "1"), ("mlx5_10", "1", "0"),
            ("mlx5_10", "2", "0"), ("mlx5_2", "1", "0"),
        )
        + ib_lines(
            "kiln_ib_port_rate_bytes_per_second",
            ("mlx5_0", "1", "50000000000"), ("mlx5_1", "1", "25000000000"),
            ("mlx5_10", "1", "312500000"), ("mlx5_10", "2", "1250000000"),
        )
        + ib_lines(
            "kiln_ib_port_expected_rate_bytes_per_second",
            ("mlx5_0", "1", "50000000000"), ("mlx5_1", "1", "50000000000"),
            ("mlx5_2", "1", "50000000000"),
        )
        + ib_lines(
            "kiln_ib_port_link_downed_total",
            ("mlx5_0", "1", "0"), ("mlx5_1", "1", "3"), ("mlx5_10", "1", "0"),
            ("mlx5_10", "2", "0"),
        )
        + ib_lines(
            "kiln_ib_port_link_error_recovery_total",
            ("mlx5_0", "1", "0"), ("mlx5_1", "1", "7"), ("mlx5_10", "1", "0"),
            ("mlx5_10", "2", "0"),
        )
        + ib_lines(
            "kiln_ib_port_symbol_errors_total",
            ("mlx5_0", "1", "0"), ("mlx5_1", "1", "129"), ("mlx5_10", "1", "0"),
            ("mlx5_10", "2", "0"),
        )
    )  # fmt: skip
    promtool_check(promtool, text)


def test_no_infiniband_no_ports(tmp_path):
    assert ib_metrics.read_ports(str(tmp_path / "absent")) == []


# --- Slurm -----------------------------------------------------------------------------

SLURM_TEXT = (
    help_type("kiln_slurm_node_state")
    + 'kiln_slurm_node_state{node="kiln-compute01",state="IDLE+DRAIN"} 1\n'
    + 'kiln_slurm_node_state{node="kiln-compute02",state="IDLE+DRAIN"} 1\n'
    + help_type("kiln_slurm_node_out_of_service")
    + 'kiln_slurm_node_out_of_service{node="kiln-compute01"} 1\n'
    + 'kiln_slurm_node_out_of_service{node="kiln-compute02"} 1\n'
    + help_type("kiln_slurm_node_drain_info")
    # compute01's drain is an operator's (RMA): not Kiln's, in the next metric
    + 'kiln_slurm_node_drain_info{node="kiln-compute02",by="health",reason="kiln-health: '
    'mounts: shared /shared: autofs could not mount kiln-storage:/shared (server kiln-storag"} 1\n'
    + help_type("kiln_slurm_node_drain_other_info")
    + 'kiln_slurm_node_drain_other_info{node="kiln-compute01",reason="RMA 4711: replace the'
    ' fan"} 1\n'
    + help_type("kiln_slurm_jobs")
    + 'kiln_slurm_jobs{state="PENDING"} 4\n'
    + 'kiln_slurm_jobs{state="RUNNING"} 2\n'
)


def test_slurm_file_of_the_recorded_lab(promtool):
    """Two drained compute nodes (an operator's drain, kiln-health's); a queue of two
    running jobs, a pending one and a pending array of three (`squeue` shows it as
    `4_[1-3]`: tests/fixtures/slurm/squeue-24.11.txt)."""
    nodes = slurm_state.parse((SLURM / "show-node-oneliner-24.11.txt").read_text())
    squeue = (SLURM / "squeue-array-noheader-T-24.11.txt").read_text()
    text = metrics.text(slurm_metrics.gauges(nodes, squeue))
    assert text == SLURM_TEXT
    promtool_check(promtool, text)


def test_an_empty_queue_still_has_its_depth():
    """And a node in service, one Slurm cannot reach, one rebooting."""
    nodes = {
        "gpu001": slurm_state.NodeState("gpu001", "IDLE", ""),
        "gpu002": slurm_state.NodeState("gpu002", "IDLE+NOT_RESPONDING", "Not responding"),
        "gpu003": slurm_state.NodeState("gpu003", "MIXED+REBOOT_REQUESTED", ""),
    }
    assert metrics.text(slurm_metrics.gauges(nodes, "")) == (
        help_type("kiln_slurm_node_state")
        + 'kiln_slurm_node_state{node="gpu001",state="IDLE"} 1\n'
        + 'kiln_slurm_node_state{node="gpu002",state="IDLE+NOT_RESPONDING"} 1\n'
        + 'kiln_slurm_node_state{node="gpu003",state="MIXED+REBOOT_REQUESTED"} 1\n'
        + help_type("kiln_slurm_node_out_of_service")
        + 'kiln_slurm_node_out_of_service{node="gpu001"} 0\n'
        + 'kiln_slurm_node_out_of_service{node="gpu002"} 1\n'
        + 'kiln_slurm_node_out_of_service{node="gpu003"} 1\n'
        + help_type("kiln_slurm_node_drain_info")
        + help_type("kiln_slurm_node_drain_other_info")
        + help_type("kiln_slurm_jobs")
        + 'kiln_slurm_jobs{state="PENDING"} 0\n'
        + 'kiln_slurm_jobs{state="RUNNING"} 0\n'
    )


def test_each_kiln_program_is_named_by_its_drain_prefix():
    assert {
        reason: slurm_metrics.drained_by(reason)
        for reason in (
            "kiln-health: munge: munge does not answer",
            "kiln-active: dcgm: pcie failed on GPU 0",
            "kiln: rollout batch 2",
            "kiln: validate nccl busbw 310 GB/s < 360",
            "RMA 4711: replace the fan",
            "kilnish",
        )
    } == {
        "kiln-health: munge: munge does not answer": "health",
        "kiln-active: dcgm: pcie failed on GPU 0": "health-active",
        "kiln: rollout batch 2": "rollout",
        "kiln: validate nccl busbw 310 GB/s < 360": "validate",
        "RMA 4711: replace the fan": None,
        "kilnish": None,
    }


def test_a_kiln_reason_on_a_node_no_longer_drained_is_not_a_drain():
    """A node down (not drained) keeps its last reason: only a drain is a drain."""
    nodes = {
        "gpu001": slurm_state.NodeState("gpu001", "DOWN", "kiln-health: gpu_smi"),
        "gpu002": slurm_state.NodeState("gpu002", "DOWN+NOT_RESPONDING", "Not responding"),
    }
    _, out, drains, others, _ = slurm_metrics.gauges(nodes, "")
    assert drains.samples == others.samples == []
    assert out.samples == [({"node": "gpu001"}, 1), ({"node": "gpu002"}, 1)]


def test_drains_by_anyone_but_kiln_are_others():
    """The repair loop's RMA drain is Kiln's, though no program resumes it; Slurm's own
    drains and an operator's are others'."""
    nodes = {
        name: slurm_state.NodeState(name, "IDLE+DRAIN", reason)
        for name, reason in (
            ("gpu001", "kiln-rma: disk-full: 2 failed repairs; evidence ctl1:/e.tar.gz"),
            ("gpu002", "Kill task failed"),
            ("gpu003", "kilnish"),
            ("gpu004", "kiln-active: dcgm: pcie failed on GPU 0"),
        )
    }
    _, _, drains, others, _ = slurm_metrics.gauges(nodes, "")
    assert [labels for labels, _ in drains.samples] == [
        {
            "node": "gpu004",
            "by": "health-active",
            "reason": "kiln-active: dcgm: pcie failed on GPU 0",
        }
    ]
    assert others.samples == [
        ({"node": "gpu002", "reason": "Kill task failed"}, 1),
        ({"node": "gpu003", "reason": "kilnish"}, 1),
    ]


# `scontrol ping` as root, in scontrol's own format ("Slurmctld(%s) at %s is %s", then a
# banner when one is DOWN); it exits 1 only when no controller answers.
PING_ONE_DOWN = (
    "Slurmctld(primary) at ctl1 is UP\n"
    "Slurmctld(backup) at ctl2 is DOWN\n"
    "*****************************************\n"
    "** RESTORE SLURMCTLD DAEMON TO SERVICE **\n"
    "*****************************************\n"
)


def test_each_slurmctld_is_up_or_down_as_scontrol_ping_says(promtool):
    text = metrics.text(slurm_metrics.controller_gauges(PING_ONE_DOWN))
    assert text == (
        help_type("kiln_slurm_controller_up")
        + 'kiln_slurm_controller_up{node="ctl1",role="primary"} 1\n'
        + 'kiln_slurm_controller_up{node="ctl2",role="backup"} 0\n'
    )
    promtool_check(promtool, text)
    with pytest.raises(ValueError, match=r"^scontrol ping named no controller: slurm_load_ctl"):
        slurm_metrics.controller_gauges("slurm_load_ctl_conf error: Unable to contact\n")


# --- kiln-metrics, the program ---------------------------------------------------------


def fake(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def run_program(tmp_path: Path, config: dict, bin_dir: Path) -> subprocess.CompletedProcess:
    (tmp_path / "metrics.json").write_text(json.dumps(config))
    env = {"PATH": str(bin_dir), "KILN_NODE_LIBRARY": str(REPO / "node_library")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--config", str(tmp_path / "metrics.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


NO_NVLINK = H100_580 / "nvidia-smi-nvlink-e.txt"  # recorded: empty


def nvidia_smi_answering(xml: Path, nvlink: Path) -> str:
    """A stand-in nvidia-smi: XML for `-q -x`, NVLINK for `nvlink -e`, else exit 1."""
    return f'[ "$*" = "-q -x" ] && exec cat {xml}\n[ "$*" = "nvlink -e" ] && exec cat {nvlink}'


@pytest.fixture
def bin_dir(tmp_path) -> Path:
    """Stand-ins for nvidia-smi, dmesg, scontrol and squeue printing recorded outputs."""
    path = tmp_path / "bin"
    path.mkdir()
    (tmp_path / "faulty.xml").write_text(FAULTY)
    (tmp_path / "dmesg.txt").write_text(FAULTY_DMESG)
    fake(path, "nvidia-smi", nvidia_smi_answering(tmp_path / "faulty.xml", NO_NVLINK))
    fake(path, "dmesg", f"exec cat {tmp_path / 'dmesg.txt'}")
    fake(
        path,
        "scontrol",
        f'[ "$*" = ping ] && {{ echo "Slurmctld(primary) at ctl1 is UP"; exit 0; }}\n'
        f"exec cat {SLURM / 'show-node-oneliner-24.11.txt'}",
    )
    fake(
        path,
        "squeue",
        f'[ "$*" = "--array --noheader --format=%T" ] && '
        f"exec cat {SLURM / 'squeue-array-noheader-T-24.11.txt'}",
    )
    # cat itself, for the stand-ins, on a PATH that is only this directory
    os.symlink("/bin/cat", path / "cat")
    return path


def test_the_program_writes_each_file_whole(tmp_path, bin_dir, infiniband, promtool):
    out = tmp_path / "textfile"
    config = {
        "metrics_dir": str(out),
        "node": "gpu001",
        "temperature_ceiling": 85,
        "ib_ports": IB_EXPECTED,
        "slurm": True,
        "sysfs_infiniband": str(infiniband),
    }
    before = time.time()
    done = run_program(tmp_path, config, bin_dir)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert sorted(p.name for p in out.iterdir()) == [
        "kiln_gpu.prom",
        "kiln_ib.prom",
        "kiln_metrics.prom",
        "kiln_slurm.prom",
        "kiln_slurmctld.prom",
    ]
    assert (out / "kiln_gpu.prom").read_text() == FAULTY_TEXT
    assert (out / "kiln_slurm.prom").read_text() == SLURM_TEXT
    assert (out / "kiln_slurmctld.prom").read_text() == (
        help_type("kiln_slurm_controller_up")
        + 'kiln_slurm_controller_up{node="ctl1",role="primary"} 1\n'
    )
    assert_run_file(out, "gpu001", before, 30)
    ib = metrics.text(
        ib_metrics.gauges(ib_metrics.read_ports(str(infiniband)), IB_EXPECTED, "gpu001")
    )
    assert (out / "kiln_ib.prom").read_text() == ib
    for written in out.iterdir():
        promtool_check(promtool, written.read_text())


def assert_run_file(out: Path, node: str, before: float, interval: int) -> None:
    """kiln_metrics.prom: when this run happened (between BEFORE and now) and its interval."""
    text = (out / "kiln_metrics.prom").read_text()
    stamp = re.search(r'^kiln_metrics_last_run_timestamp_seconds\{node="(.+)"\} (\S+)$', text, re.M)
    assert stamp and stamp[1] == node, text
    assert before <= float(stamp[2]) <= time.time(), text
    assert text == (
        help_type("kiln_metrics_last_run_timestamp_seconds") + f"{stamp[0]}\n"
        + help_type("kiln_metrics_interval_seconds")
        + f'kiln_metrics_interval_seconds{{node="{node}"}} {interval}\n'
    )  # fmt: skip


def test_the_gpu_file_has_the_nvlink_counters_nvidia_smi_prints(tmp_path, bin_dir, promtool):
    """nvidia-smi nvlink -e answering GPU 0's links of the HGX fixture (the faulty VM
    has one GPU): its 54 counters end the GPU file."""
    nvlink = tmp_path / "nvlink.txt"
    nvlink.write_text((HGX_H100 / "nvidia-smi-nvlink-e.txt").read_text().split("GPU 1:")[0])
    fake(bin_dir, "nvidia-smi", nvidia_smi_answering(tmp_path / "faulty.xml", nvlink))
    out = tmp_path / "textfile"
    config = {"metrics_dir": str(out), "node": "gpu001", "temperature_ceiling": 85,
              "sysfs_infiniband": str(tmp_path / "none")}  # fmt: skip
    done = run_program(tmp_path, config, bin_dir)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    written = (out / "kiln_gpu.prom").read_text()
    assert written == FAULTY_TEXT + "".join(
        f"{line}\n" for line in nvlink_lines("gpu001", range(1))
    )
    promtool_check(promtool, written)


def test_nvlink_counters_that_cannot_be_read_leave_the_gpu_file(tmp_path, bin_dir):
    """`nvidia-smi nvlink -e` past its time: the GPU file is one source, so it stays as
    last written (no file without its NVLink series), exit 1 with one line."""
    xml = tmp_path / "faulty.xml"
    fake(bin_dir, "nvidia-smi", f'[ "$*" = "-q -x" ] && exec cat {xml}\nexec sleep 10')
    os.symlink("/bin/sleep", bin_dir / "sleep")
    out = tmp_path / "textfile"
    out.mkdir()
    (out / "kiln_gpu.prom").write_text("# the last run's\n")
    config = {"metrics_dir": str(out), "node": "gpu001", "timeout": 1,
              "sysfs_infiniband": str(tmp_path / "none")}  # fmt: skip
    done = run_program(tmp_path, config, bin_dir)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        f"kiln-metrics: kiln_gpu.prom not written: {bin_dir / 'nvidia-smi'} nvlink -e: "
        "no answer within 1s\n",
    )
    assert (out / "kiln_gpu.prom").read_text() == "# the last run's\n"


def test_where_dcgm_exporter_gives_the_gpu_metrics_the_file_keeps_the_rest(tmp_path, bin_dir):
    """The role's "gpu_omit" on a dcgm-exporter host: the GPU file keeps the ceiling and
    the kernel's XID counts (and any GPU metric the mapping does not cover), each family
    as the whole file would have it."""
    out = tmp_path / "textfile"
    config = {"metrics_dir": str(out), "node": "gpu001", "temperature_ceiling": 85,
              "slurm": False, "sysfs_infiniband": str(tmp_path / "none"),
              "gpu_omit": dcgm.from_dcgm()}  # fmt: skip
    done = run_program(tmp_path, config, bin_dir)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    families = ["# HELP " + f for f in FAULTY_TEXT.split("# HELP ")[1:]]
    kept = [f for f in families if f.split(" ", 3)[2] not in dcgm.from_dcgm()]
    names = {f.split(" ", 3)[2] for f in kept}
    assert {"kiln_gpu_temperature_ceiling_celsius", "kiln_gpu_xid_errors_total"} <= names
    assert (out / "kiln_gpu.prom").read_text() == "".join(kept)


def test_a_node_without_gpus_ib_or_slurm_gets_only_its_run_file(tmp_path):
    """No nvidia-smi on PATH, no InfiniBand, not the controller: no source file, no
    error; the run itself is written, so a stopped kiln-metrics is seen there too."""
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "textfile"
    config = {"metrics_dir": str(out), "node": "login1", "slurm": False, "interval": 15,
              "sysfs_infiniband": str(tmp_path / "none")}  # fmt: skip
    before = time.time()
    done = run_program(tmp_path, config, empty)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert [p.name for p in out.iterdir()] == ["kiln_metrics.prom"]
    assert_run_file(out, "login1", before, 15)


def test_a_slurmctld_that_does_not_answer_is_written_as_down(tmp_path, bin_dir, promtool):
    """slurmctld stopped: scontrol ping exits 1 with its DOWN line, scontrol show node
    fails; kiln_slurm.prom stays as it was, kiln_slurmctld.prom says DOWN, exit 1."""
    fake(
        bin_dir,
        "scontrol",
        '[ "$*" = ping ] && { echo "Slurmctld(primary) at ctl1 is DOWN"; exit 1; }\n'
        "echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2\n"
        "exit 1",
    )
    out = tmp_path / "textfile"
    out.mkdir()
    (out / "kiln_slurm.prom").write_text("# the last run's\n")
    config = {"metrics_dir": str(out), "node": "ctl1", "slurm": True,
              "sysfs_infiniband": str(tmp_path / "none")}  # fmt: skip
    os.unlink(bin_dir / "nvidia-smi")
    done = run_program(tmp_path, config, bin_dir)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        "kiln-metrics: kiln_slurm.prom not written: scontrol --oneliner show node: "
        "slurm_load_node error: Unable to contact slurm controller (connect failure)\n",
    )
    assert (out / "kiln_slurm.prom").read_text() == "# the last run's\n"
    text = (out / "kiln_slurmctld.prom").read_text()
    assert text == (
        help_type("kiln_slurm_controller_up")
        + 'kiln_slurm_controller_up{node="ctl1",role="primary"} 0\n'
    )
    promtool_check(promtool, text)


def test_a_source_that_fails_leaves_its_file_and_says_so(tmp_path, bin_dir):
    """nvidia-smi failing (a driver fault): kiln_gpu.prom stays as last written, the
    other files are written, exit 1 with one line on stderr."""
    broken = "Unable to determine the device handle for GPU0000:00:06.0: Unknown Error"
    fake(bin_dir, "nvidia-smi", f"echo '{broken}' >&2; exit 15")
    out = tmp_path / "textfile"
    out.mkdir()
    (out / "kiln_gpu.prom").write_text("# the last run's\n")
    config = {"metrics_dir": str(out), "node": "ctl1", "slurm": True,
              "sysfs_infiniband": str(tmp_path / "none")}  # fmt: skip
    done = run_program(tmp_path, config, bin_dir)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        f"kiln-metrics: kiln_gpu.prom not written: {bin_dir / 'nvidia-smi'} -q -x: {broken}\n",
    )
    assert (out / "kiln_gpu.prom").read_text() == "# the last run's\n"
    assert (out / "kiln_slurm.prom").read_text() == SLURM_TEXT
    assert sorted(p.name for p in out.iterdir()) == [
        "kiln_gpu.prom", "kiln_metrics.prom", "kiln_slurm.prom", "kiln_slurmctld.prom"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "why"),
    [
        (None, "[Errno 2] No such file or directory: '{path}'"),
        ({"node": "gpu001"}, "no metrics_dir"),
        ({"metrics_dir": "/x", "node": ""}, "no node"),
        (["not", "an", "object"], "'list' object has no attribute 'get'"),
        (
            {"metrics_dir": "/x", "node": "n", "ib_ports": [{"device": "mlx5_0"}]},
            "ib_ports: each port needs a device and a rate in Gb/s (KeyError('rate'))",
        ),
        (
            {"metrics_dir": "/x", "node": "n", "ib_ports": [{"device": "mlx5_0", "rate": "x"}]},
            "ib_ports: each port needs a device and a rate in Gb/s "
            "(ValueError(\"could not convert string to float: 'x'\"))",
        ),
        (
            {"metrics_dir": "/x", "node": "n", "gpu_omit": ["kiln_gpu_info", 3]},
            "gpu_omit is not a list of metric names",
        ),
        (
            {"metrics_dir": "/x", "node": "n", "gpu_omit": "kiln_gpu_info"},
            "gpu_omit is not a list of metric names",
        ),
        (
            {"metrics_dir": "/x", "node": "n", "timeout": "soon"},
            "could not convert string to float: 'soon'",
        ),
        (
            {"metrics_dir": "/x", "node": "n", "interval": 0},
            "interval is not a number of seconds above 0",
        ),
    ],
)
def test_an_unreadable_configuration_is_exit_2(tmp_path, config, why):
    path = tmp_path / "metrics.json"
    if config is not None:
        path.write_text(json.dumps(config))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--config", str(path)],
        capture_output=True,
        text=True,
        env={"PATH": "", "KILN_NODE_LIBRARY": str(REPO / "node_library")},
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        f"kiln-metrics: cannot read {path}: {why.format(path=path)}\n",
    )


# --- the role's tasks (tasks/metrics.yml), in a dry run on this machine --------------

DRY_RUN = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The first controller, with InfiniBand ports, and a login node
      ansible.builtin.add_host:
        name: "{{ item.name }}"
        groups: "{{ item.groups }}"
        ansible_connection: local
        ansible_python_interpreter: PYTHON
        health_ib_ports: "{{ item.ports }}"
        # as if an earlier role had installed the library (test_node tests that part)
        node_library_dir: /usr/local/lib/kiln
      loop:
        - {name: ctl1, groups: [slurm_controller], ports: [{device: mlx5_0, port: 1, rate: 400}]}
        - {name: ctl2, groups: [slurm_controller], ports: []}
        - {name: login1, groups: [login], ports: []}
      changed_when: false
- hosts: ctl1,ctl2,login1
  gather_facts: false
  vars:
    monitoring_metrics_dir: /var/lib/prometheus/node-exporter
    monitoring_metrics_interval: 15
    monitoring_gpu_temperature_ceiling: 87
    # dcgm-exporter gives ctl2's GPU metrics (as if it had GPUs)
    monitoring_gpu_source: dcgm-exporter
    monitoring_dcgm_exporter_hosts: [ctl2]
  tasks:
    - name: The monitoring role's metrics tasks
      ansible.builtin.include_role:
        name: kiln.cluster.monitoring
        tasks_from: metrics
"""

SERVICE = """\
# Managed by Kiln (monitoring role).
[Unit]
Description=Kiln's node metrics for node_exporter's textfile collector
Documentation=file:///usr/local/sbin/kiln-metrics

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/kiln-metrics
# Each command it runs has 20 s (nvidia-smi, dmesg, scontrol, squeue); a run that takes
# longer is stuck, and the next tick starts afresh.
TimeoutStartSec=90
Nice=10
"""
TIMER = """\
# Managed by Kiln (monitoring role).
[Unit]
Description=Kiln's node metrics every 15 s

[Timer]
OnBootSec=15s
OnUnitActiveSec=15s
# systemd's default accuracy (a minute) would stretch a 30 s interval.
AccuracySec=1s

[Install]
WantedBy=timers.target
"""


def test_the_role_installs_the_program_its_config_and_timer_on_every_host(tmp_path):
    """Check mode with --diff: what each host would get, nothing written. Only the first
    controller writes the Slurm file; the health settings' ports go with each host."""
    from tests.collection import local_playbook

    playbook = tmp_path / "metrics.yml"
    playbook.write_text(DRY_RUN.replace("PYTHON", sys.executable))
    report = local_playbook(playbook, "--check", "--diff", timeout=300)
    tasks = {t["task"]["name"].split(" : ")[-1]: t["hosts"] for t in report["plays"][1]["tasks"]}
    hosts = ("ctl1", "ctl2", "login1")
    # One write_files step: a diff per file, by path (/etc/kiln's, where it is missing,
    # only named).
    written = {
        host: {
            d["after_header"]: d["after"]
            for d in tasks["Install kiln-metrics and write what it reads and where it writes"][
                host
            ]["diff"]
            if "after_header" in d
        }
        for host in hosts
    }
    assert {host: json.loads(written[host]["/etc/kiln/metrics.json"]) for host in hosts} == {
        "ctl1": {
            "node": "ctl1",
            "metrics_dir": "/var/lib/prometheus/node-exporter",
            "temperature_ceiling": 87,
            "ib_ports": [{"device": "mlx5_0", "port": 1, "rate": 400}],
            "slurm": True,
            "gpu_omit": [],
            "interval": 15,
        },
        "ctl2": {"node": "ctl2", "metrics_dir": "/var/lib/prometheus/node-exporter",
                 "temperature_ceiling": 87, "ib_ports": [], "slurm": False,
                 "gpu_omit": dcgm.from_dcgm(), "interval": 15},
        "login1": {"node": "login1", "metrics_dir": "/var/lib/prometheus/node-exporter",
                   "temperature_ceiling": 87, "ib_ports": [], "slurm": False, "gpu_omit": [],
                   "interval": 15},
    }  # fmt: skip
    for host in hosts:
        assert written[host]["/usr/local/sbin/kiln-metrics"] == SCRIPT.read_text()
        units = tasks["Install kiln-metrics' service and timer"][host]["results"]
        assert [(u["item"], u["diff"][0]["after"]) for u in units] == [
            ("kiln-metrics.service", SERVICE),
            ("kiln-metrics.timer", TIMER),
        ]
        # a dry run on a node without the units has no timer to start
        assert tasks["Start kiln-metrics' timer"][host].get("skipped") is True


def test_the_docs_list_the_whole_catalogue():
    """docs/monitoring.md's catalogue table, row for row: a metric added to the catalogue
    needs its row (the expected table is the assertion's right side)."""
    docs = (REPO / "docs" / "monitoring.md").read_text()
    section = docs.split("## Metrics Kiln writes", 1)[1].split("\n## ", 1)[0]
    table = section.split("| metric | type | labels | file | meaning |\n|---|---|---|---|---|\n")[1]
    assert table.strip().splitlines() == [
        f"| `{m.name}` | {m.type} | {', '.join(m.labels) or '-'} | `{m.file}` | {m.help} |"
        for m in metrics.CATALOGUE.values()
    ]

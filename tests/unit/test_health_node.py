"""kiln-health, the node check the health role installs, on recorded outputs: the H100
SXM VM in tests/fixtures/gpu/h100-80gb-hbm3-vm (driver 580.159.04, healthy). Each faulty
variant changes only the fields at fault in the recorded `nvidia-smi -q -x`; the XID
lines are in the kernel's `NVRM: Xid (PCI:…): N, …` format, appended to the recorded
kernel log."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kiln_node import gpu_checks, nvidia_smi, slurm_state
from tests.node_scripts import health

H100_VM = Path(__file__).parent.parent / "fixtures" / "gpu" / "h100-80gb-hbm3-vm"
SCRIPT = Path(health.__file__)
BUS = "00000000:00:06.0"
DRIVER = "580.159.04"


def recorded(name: str) -> str:
    return (H100_VM / name).read_text()


def variant(*changes: tuple[str, str]) -> str:
    """The recorded XML with each (old, new) replaced once: the first occurrence, which
    for the ECC counters is the volatile one."""
    text = recorded("nvidia-smi-q.xml")
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def judged(xml: str, expected: int = 1, loaded: str = DRIVER, installed: str = DRIVER):
    return [
        r.line()
        for r in gpu_checks.judge_gpus(gpu_checks.parse_smi_xml(xml), expected, loaded, installed)
    ]


HEALTHY = [
    "OK gpu_count: 1 GPU",
    f"OK gpu_driver: driver {DRIVER}",
    "OK gpu_persistence: persistence mode on",
    "OK gpu_ecc: no uncorrectable ECC error",
    "OK gpu_remap: no remap pending or failed",
    "OK gpu_clocks: no hardware slowdown",
    "OK gpu_pcie: PCIe links at full width",
]


def test_the_recorded_h100_passes_every_gpu_rule():
    assert judged(recorded("nvidia-smi-q.xml")) == HEALTHY


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        (
            [("<dram_uncorrectable>0<", "<dram_uncorrectable>2<")],
            f"FAIL gpu_ecc: {BUS} 2 uncorrectable ECC errors",
        ),
        (
            [("<sram_uncorrectable_secded>0<", "<sram_uncorrectable_secded>1<")],
            f"FAIL gpu_ecc: {BUS} 1 uncorrectable ECC error",
        ),
        (
            [("<remapped_row_pending>No<", "<remapped_row_pending>Yes<")],
            f"WARN gpu_remap: {BUS} row remap pending (GPU reset needed)",
        ),
        (
            [
                ("<remapped_row_pending>No<", "<remapped_row_pending>Yes<"),
                ("<remapped_row_failure>No<", "<remapped_row_failure>Yes<"),
            ],
            f"FAIL gpu_remap: {BUS} row remapping failed",
        ),
        (
            [("<unrepairable_memory>No<", "<unrepairable_memory>Yes<")],
            f"FAIL gpu_remap: {BUS} unrepairable memory",
        ),
        (
            [
                (
                    "<clocks_event_reason_hw_thermal_slowdown>Not Active<",
                    "<clocks_event_reason_hw_thermal_slowdown>Active<",
                ),
                (
                    "<clocks_event_reason_hw_slowdown>Not Active<",
                    "<clocks_event_reason_hw_slowdown>Active<",
                ),
            ],
            f"FAIL gpu_clocks: {BUS} HW slowdown, HW thermal slowdown active",
        ),
        (
            [
                (
                    "<clocks_event_reason_hw_power_brake_slowdown>Not Active<",
                    "<clocks_event_reason_hw_power_brake_slowdown>Active<",
                )
            ],
            f"FAIL gpu_clocks: {BUS} HW power brake active",
        ),
        (
            [("<current_link_width>16x<", "<current_link_width>8x<")],
            f"FAIL gpu_pcie: {BUS} PCIe x8 of x16",
        ),
        (
            [("<persistence_mode>Enabled<", "<persistence_mode>Disabled<")],
            f"FAIL gpu_persistence: {BUS} persistence Disabled",
        ),
    ],
)
def test_each_fault_fails_only_its_rule(changes, line):
    check = line.split(" ", 2)[1].rstrip(":")
    expected = [line if h.split(" ", 2)[1].rstrip(":") == check else h for h in HEALTHY]
    assert judged(variant(*changes)) == expected


def test_the_states_an_idle_or_loaded_gpu_shows_are_not_faults():
    # Recorded: GPU idle at rest, SW power cap under full load (query-gpu-under-load.csv),
    # and PCIe generation 1 at idle where the maximum is 5.
    xml = variant(
        (
            "<clocks_event_reason_sw_power_cap>Not Active<",
            "<clocks_event_reason_sw_power_cap>Active<",
        ),
        ("<current_link_gen>5<", "<current_link_gen>1<"),
    )
    assert judged(xml) == HEALTHY


def test_a_missing_gpu_and_a_driver_awaiting_reboot():
    assert judged(recorded("nvidia-smi-q.xml"), expected=8, installed="580.172.08")[:2] == [
        "FAIL gpu_count: 1 GPU visible, 8 expected",
        f"FAIL gpu_driver: driver {DRIVER} loaded, 580.172.08 installed: reboot",
    ]


def test_an_older_drivers_ecc_counters():
    # Drivers before the SRAM/DRAM split report volatile double-bit errors as a total.
    xml = variant(
        (
            "<volatile>\n\t\t\t\t<sram_correctable>0</sram_correctable>",
            "<volatile>\n\t\t\t\t<double_bit><total>3</total></double_bit>"
            "<sram_correctable>0</sram_correctable>",
        )
    )
    assert gpu_checks.parse_smi_xml(xml)[0].uncorrectable_volatile == 3


XID_LINES = {
    79: "[ 8012.345678] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, "
    "GPU has fallen off the bus.",
    63: "[ 9120.000001] NVRM: Xid (PCI:0000:00:06): 63, pid='<unknown>', name=<unknown>, "
    "Row Remapper: New row (0x0000000d0a9e4000) Marked for Remap",
    13: "[ 9500.100000] NVRM: Xid (PCI:0000:00:06): 13, pid=4242, name=python3, "
    "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Illegal Instruction Encoding",
    31: "[ 9600.200000] NVRM: Xid (PCI:0000:00:06): 31, pid=4242, name=python3, "
    "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_e4000000",
    94: "[ 9650.000000] NVRM: Xid (PCI:0000:00:06): 94, pid=4242, name=python3, "
    "Contained: CE User Channel (0x9). RST: No, D-RST: No",
    48: "[ 9660.000000] NVRM: Xid (PCI:0000:00:06): 48, pid='<unknown>', name=<unknown>, "
    "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer",
    149: "[ 9700.000000] NVRM: Xid (PCI:0000:00:06): 149, pid='<unknown>', name=<unknown>, "
    "unknown to Kiln",
}


def xids(*numbers: int) -> list[tuple[str, int]]:
    log = recorded("dmesg-nvrm.txt") + "".join(XID_LINES[n] + "\n" for n in numbers)
    return nvidia_smi.parse_xids(log)


@pytest.mark.parametrize(
    ("numbers", "line"),
    [
        ((), "OK gpu_xid: no XID since boot"),
        ((13, 31, 13), "OK gpu_xid: only application faults since boot (XID 13, XID 31)"),
        ((63,), "WARN gpu_xid: XID 63 row remapping pending on 0000:00:06 (GPU reset needed)"),
        ((149,), "WARN gpu_xid: XID 149 since boot, not in Kiln's table"),
        (
            (94, 13),
            "WARN gpu_xid: XID 94 contained ECC error on 0000:00:06 (watch: a part may be failing)",
        ),
        ((94, 48), "FAIL gpu_xid: XID 48 double-bit ECC error on 0000:00:06"),
        (
            (149, 94),
            "WARN gpu_xid: XID 94 contained ECC error on 0000:00:06 (watch: a part may be "
            "failing); XID 149 since boot, not in Kiln's table",
        ),
        ((13, 63, 79), "FAIL gpu_xid: XID 79 GPU fell off the bus on 0000:00:06"),
    ],
)
def test_xids_since_boot_are_classified(numbers, line):
    assert gpu_checks.judge_xids(xids(*numbers)).line() == line


def test_xid_lines_parse_with_their_gpu():
    assert xids(79, 13) == [("0000:00:06", 79), ("0000:00:06", 13)]


# `nvidia-smi nvlink -s` as printed on a V100 board with two links down (reported in
# Azure/azhpc-diagnostics#73) and on healthy GPUs.
NVLINK_DOWN = """GPU 3: Tesla V100-SXM2-32GB (UUID: GPU-0a1b2c3d-0000-0000-0000-000000000003)
\t Link 0: 25.781 GB/s
\t Link 1: 25.781 GB/s
\t Link 2: 25.781 GB/s
\t Link 3: <inactive>
\t Link 4: 25.781 GB/s
\t Link 5: <inactive>
"""


def nvlink_up(gpus: int, links: int) -> str:
    return "".join(
        f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-{g:08d}-0000-0000-0000-000000000000)\n"
        + "".join(f"\t Link {k}: 26.562 GB/s\n" for k in range(links))
        for g in range(gpus)
    )


def test_nvlinks():
    assert gpu_checks.parse_nvlink_status(NVLINK_DOWN) == {
        "GPU 3": ["25.781 GB/s"] * 3 + ["<inactive>", "25.781 GB/s", "<inactive>"]
    }
    assert gpu_checks.judge_nvlinks(gpu_checks.parse_nvlink_status(NVLINK_DOWN), 6).line() == (
        "FAIL gpu_nvlink: GPU 3 4 of 6 NVLinks active"
    )
    assert gpu_checks.judge_nvlinks(
        gpu_checks.parse_nvlink_status(nvlink_up(8, 18)), 18
    ).line() == ("OK gpu_nvlink: 18 NVLinks per GPU active")
    assert gpu_checks.judge_nvlinks({}, 18).line() == "FAIL gpu_nvlink: no NVLink reported"


def test_a_count_of_one_is_said_in_the_singular():
    """Every count a check's reason gives: one GPU, link, node, test, port or error."""
    healthy = gpu_checks.parse_smi_xml(recorded("nvidia-smi-q.xml"))  # one H100
    ecc = gpu_checks.parse_smi_xml(variant(("<dram_uncorrectable>0<", "<dram_uncorrectable>1<")))
    one_test = json.loads((DCGM / "diag-r2-pass.json").read_text())
    body = one_test["DCGM Diagnostic"]
    body["test_categories"] = body["test_categories"][:1]  # the software test alone
    # nvidia-imex-ctl -N of a domain of one node (the recorded one's first node alone)
    one_node = (
        "Nodes:\nNode #0   - 10.0.1.11       - READY                - Version: 580.95.05\n\n"
        " Nodes From\\To  0\n       0        C\n\nDomain State: UP\n"
    )
    assert [
        gpu_checks.judge_gpus(healthy, 1, DRIVER, DRIVER)[0].line(),
        gpu_checks.judge_gpus(healthy, 2, DRIVER, DRIVER)[0].line(),
        gpu_checks.judge_gpus(healthy[:0], 1, DRIVER, DRIVER)[0].line(),
        gpu_checks.judge_gpus(ecc, 1, DRIVER, DRIVER)[3].line(),
        gpu_checks.judge_nvlinks(gpu_checks.parse_nvlink_status(nvlink_up(1, 1)), 1).line(),
        gpu_checks.judge_nvlinks({"GPU 0": []}, 1).line(),
        gpu_checks.judge_nvlink_fabric(
            gpu_checks.parse_smi_xml(nvl72("Completed", "Success"))
        ).line(),
        gpu_checks.judge_imex(one_node).line(),
        gpu_checks.judge_dcgm_diag(json.dumps(one_test), 2).line(),
    ] == [
        "OK gpu_count: 1 GPU",
        "FAIL gpu_count: 1 GPU visible, 2 expected",
        "FAIL gpu_count: 0 GPUs visible, 1 expected",
        f"FAIL gpu_ecc: {BUS} 1 uncorrectable ECC error",
        "OK gpu_nvlink: 1 NVLink per GPU active",
        "FAIL gpu_nvlink: GPU 0 0 of 1 NVLink active",
        "OK nvlink_fabric: 1 GPU registered with the NVLink fabric",
        "OK imex_domain: IMEX domain UP, 1 node connected",
        "OK dcgm_diag: level 2: 1 test passed",
    ]


def test_fabric_manager():
    gpus = gpu_checks.parse_smi_xml(recorded("nvidia-smi-q.xml"))
    assert (
        gpu_checks.judge_fabric("inactive", gpus).line()
        == "FAIL fabric_manager: nvidia-fabricmanager is inactive"
    )
    assert gpu_checks.judge_fabric("active", gpus).status == "OK"
    training = gpu_checks.parse_smi_xml(
        variant(
            ("<state>N/A</state>", "<state>In Progress</state>"),
            ("<status>N/A</status>", "<status>N/A</status>"),
        )
    )
    assert (
        gpu_checks.judge_fabric("active", training).line()
        == f"FAIL fabric_manager: {BUS} fabric In Progress/N/A"
    )


def test_ib_ports(tmp_path):
    def port(device, state, rate):
        where = tmp_path / device / "ports" / "1"
        where.mkdir(parents=True)
        (where / "state").write_text(state + "\n")
        (where / "rate").write_text(rate + "\n")

    port("mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)")
    port("mlx5_1", "1: DOWN", "10 Gb/sec (4X SDR)")
    port("mlx5_2", "4: ACTIVE", "200 Gb/sec (4X HDR)")
    config = {
        "sysfs_infiniband": str(tmp_path),
        "ib_ports": [
            {"device": d, "port": 1, "rate": 400} for d in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
        ],
    }
    assert [r.line() for r in health.check_ib(config, None)] == [
        "FAIL ib_ports: mlx5_1/1 DOWN; mlx5_2/1 at 200 Gb/s, 400 expected; mlx5_3/1 missing"
    ]
    config["ib_ports"] = config["ib_ports"][:1]
    assert health.check_ib(config, None)[0].line() == (
        "OK ib_ports: 1 port active at the expected rate"
    )
    port("mlx5_4", "4: ACTIVE", "400 Gb/sec (4X NDR)")
    config["ib_ports"].append({"device": "mlx5_4", "port": 1, "rate": 400})
    assert health.check_ib(config, None)[0].line() == (
        "OK ib_ports: 2 ports active at the expected rate"
    )


def test_free_space(tmp_path):
    room = health.check_free_space({"free_space": [{"path": str(tmp_path), "min_mb": 1}]}, None)
    assert room[0].status == "OK"
    full = health.check_free_space(
        {"free_space": [{"path": str(tmp_path), "min_mb": 10**12}]}, None
    )
    assert full[0].status == "FAIL" and full[0].reason.startswith(f"{tmp_path} ")
    absent = health.check_free_space(
        {"free_space": [{"path": str(tmp_path / "none"), "min_mb": 10**12}]}, None
    )
    assert absent[0].status == "OK"


def fail(check="munge", reason="munge does not answer"):
    return health.Result(check, "FAIL", reason)


OK = health.Result("munge", "OK", "munge answers")
MUNGE_DRAIN = "kiln-health: munge: munge does not answer"
STAMP = "[root@2026-11-24T10:00:00]"


@pytest.mark.parametrize(
    ("results", "scontrol", "action"),
    [
        ([OK], "NodeName=c1 State=IDLE ThreadsPerCore=1", None),
        (
            [fail()],
            "NodeName=c1 State=IDLE ThreadsPerCore=1",
            ("drain", "kiln-health: munge: munge does not answer"),
        ),
        (
            [fail()],
            f"NodeName=c1 State=MIXED+DRAIN Reason={MUNGE_DRAIN} {STAMP}",
            None,
        ),
        (
            [fail("free_space", "/var/spool/slurmd 3 MiB free, 1024 needed")],
            f"NodeName=c1 State=IDLE+DRAIN Reason={MUNGE_DRAIN} {STAMP}",
            ("drain", "kiln-health: free_space: /var/spool/slurmd 3 MiB free, 1024 needed"),
        ),
        (
            [OK],
            f"NodeName=c1 State=IDLE+DRAIN Reason={MUNGE_DRAIN} {STAMP}",
            ("resume", ""),
        ),
        ([fail()], "NodeName=c1 State=IDLE+DRAIN Reason=RMA 42 [admin@2026-11-24T10:00:00]", None),
        ([OK], "NodeName=c1 State=IDLE+DRAIN Reason=RMA 42 [admin@2026-11-24T10:00:00]", None),
        (
            [OK],
            f"NodeName=c1 State=IDLE+DRAIN Reason=kiln: storage.mount /shared {STAMP}",
            None,
        ),
        (
            [OK, health.Result("gpu_xid", "WARN", "XID 63")],
            "NodeName=c1 State=IDLE ThreadsPerCore=1",
            None,
        ),
    ],
)
def test_the_drain_policy(results, scontrol, action):
    seen = slurm_state.parse_line(scontrol)
    assert health.drain_action(results, set(seen.flags), seen.reason) == action


def test_a_drain_reason_fits_slurms_field():
    seen = slurm_state.parse_line("NodeName=c1 State=IDLE")
    _, wanted = health.drain_action([fail("gpu_ecc", "x" * 300)], set(seen.flags), seen.reason)
    assert len(wanted) == health.REASON_LIMIT and wanted.startswith("kiln-health: gpu_ecc: xxx")


def test_metrics_for_the_textfile_collector(tmp_path):
    health.write_metrics(str(tmp_path), "c1", [OK, fail("mounts", "shared mounts failing")])
    lines = (tmp_path / "kiln_health.prom").read_text().splitlines()
    assert lines[:4] == [
        "# HELP kiln_health_check 1 when Kiln's node check passed (OK or WARN), 0 when it failed.",
        "# TYPE kiln_health_check gauge",
        'kiln_health_check{node="c1",check="munge"} 1',
        'kiln_health_check{node="c1",check="mounts"} 0',
    ]
    stamp = float(lines[-1].rsplit(" ", 1)[1])
    assert lines[-1].startswith('kiln_health_last_run_timestamp_seconds{node="c1"} ')
    assert abs(stamp - time.time()) < 60
    assert [p.name for p in tmp_path.iterdir()] == ["kiln_health.prom"]


def program(tmp_path, config: dict, *args: str, path: str = "/usr/bin:/bin"):
    (tmp_path / "health.json").write_text(json.dumps(config))
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--config",
            str(tmp_path / "health.json"),
            "--node",
            "c1",
            *args,
        ],
        capture_output=True,
        text=True,
        env={"PATH": path},
        timeout=60,
    )
    return done, time.monotonic() - started


def fake_smi(tmp_path, body: str) -> Path:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir(exist_ok=True)
    smi.write_text("#!/bin/sh\n" + body)
    smi.chmod(0o755)
    return smi


NO_NODE = {"munge": False, "slurm": False}


def test_a_gpu_that_fell_off_the_bus_is_named_from_nvidia_smis_exit_code(tmp_path):
    smi = fake_smi(
        tmp_path,
        "echo 'Unable to determine the device handle for GPU0000:00:06.0: Unknown Error' >&2\n"
        "exit 15\n",
    )
    done, _ = program(tmp_path, {**NO_NODE, "gpus": 8, "nvidia_smi": str(smi)})
    assert (done.returncode, done.stdout) == (
        1,
        "FAIL gpu_smi: nvidia-smi: a GPU has fallen off the bus\n",
    )


def test_a_hung_check_is_cut_at_its_limit_and_the_program_ends_in_time(tmp_path):
    hang = fake_smi(tmp_path, "exec sleep 120\n")
    mount_check = tmp_path / "bin" / "mount-check"
    mount_check.write_text("#!/bin/sh\nexec sleep 120\n")
    mount_check.chmod(0o755)
    config = {
        **NO_NODE,
        "gpus": 1,
        "nvidia_smi": str(hang),
        "mount_check": str(mount_check),
        "check_timeout": 2,
        "timeout": 4,
    }
    done, took = program(tmp_path, config, "--json")
    assert took < 10
    assert done.returncode == 1
    assert json.loads(done.stdout)["results"] == [
        {"check": "gpu_smi", "status": "FAIL", "reason": "nvidia-smi: no answer within 2s"},
        {"check": "mounts", "status": "FAIL", "reason": "mount-check: no answer within 2s"},
    ]


def test_bad_configuration_exits_2(tmp_path):
    (tmp_path / "health.json").write_text("{not json")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--config", str(tmp_path / "health.json")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"kiln-health: cannot read {tmp_path / 'health.json'}: ")


def test_the_failing_mounts_are_named_from_kiln_mount_checks_lines(tmp_path):
    mount_check = tmp_path / "mount-check"
    mount_check.write_text(
        "#!/bin/sh\necho 'OK home /home: glusterfs storage:/home'\n"
        "echo 'FAIL shared /shared: not mounted after access: autofs could not mount s:/shared'\n"
        "exit 1\n"
    )
    mount_check.chmod(0o755)
    deadline = health.Deadline(10, 5)
    [result] = health.check_mounts({"mount_check": str(mount_check)}, deadline)
    assert result.line() == (
        "FAIL mounts: shared /shared: not mounted after access: autofs could not mount s:/shared"
    )


# --- DCGM's diagnostic (--active) -----------------------------------------------------

DCGM = Path(__file__).parent.parent / "fixtures" / "gpu" / "dcgm"


@pytest.mark.parametrize(
    ("fixture", "line"),
    [
        ("diag-r2-pass.json", "OK dcgm_diag: level 2: 4 tests passed"),
        (
            "diag-r2-pcie-fail.json",
            "FAIL dcgm_diag: level 2 pcie GPU 0: Found 104 PCIe replay errors on GPU 0, more "
            "than the threshold of 8: check the GPU's PCIe link and its riser",
        ),
        (
            "diag-runtime-error.json",
            "FAIL dcgm_diag: dcgmi diag -r 2: Error: unable to establish a connection to the "
            "specified host: localhost",
        ),
    ],
)
def test_dcgm_diagnostic_verdicts(fixture, line):
    assert gpu_checks.judge_dcgm_diag((DCGM / fixture).read_text(), 2).line() == line


def test_dcgm_warnings_are_recorded_and_counted():
    data = json.loads((DCGM / "diag-r2-pcie-fail.json").read_text())
    for category in data["DCGM Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            for result in test["results"]:
                if result["status"] == "Fail":
                    result["status"] = "Warn"
    memory = data["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    memory["results"][0] |= {
        "status": "Warn",
        "warnings": [{"warning": "a", "error_id": 1, "error_category": 1, "error_severity": 1}],
    }
    assert (
        gpu_checks.judge_dcgm_diag(json.dumps(data), 2)
        .line()
        .startswith("WARN dcgm_diag: level 2 pcie GPU 0: Found 104 PCIe replay errors")
    )
    assert gpu_checks.judge_dcgm_diag(json.dumps(data), 2).reason.endswith("(+1 more)")


def test_dcgm_3_output_is_read_too():
    # DCGM 3 named the object "DCGM GPU Diagnostic" and each result's GPU gpu_id.
    old = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Integration",
                    "tests": [
                        {
                            "name": "PCIe",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {"gpu_id": "1", "status": "Fail", "warnings": ["replays"]},
                            ],
                        }
                    ],
                }
            ]
        },
        "version": "3.3.9",
    }
    assert gpu_checks.judge_dcgm_diag(json.dumps(old), 2).line() == (
        "FAIL dcgm_diag: level 2 PCIe GPU 1: replays"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Error: not json", "dcgmi diag -r 2 printed no result (substring not found)"),
        ('{"DCGM Diagnostic": {"test_categories": []}}', "dcgmi diag -r 2 ran no test"),
        ('{"other": 1}', "dcgmi diag -r 2 printed no result (no 'DCGM Diagnostic' object)"),
    ],
)
def test_dcgm_output_that_says_nothing_fails(text, reason):
    assert gpu_checks.judge_dcgm_diag(text, 2) == health.Result("dcgm_diag", "FAIL", reason)


def fake_dcgmi(tmp_path, fixture: str, exit_code: int) -> Path:
    dcgmi = tmp_path / "bin" / "dcgmi"
    dcgmi.parent.mkdir(exist_ok=True)
    dcgmi.write_text(
        f'#!/bin/sh\n[ "$*" = "diag -r 2 -j" ] || exit 99\ncat {DCGM / fixture}\nexit {exit_code}\n'
    )
    dcgmi.chmod(0o755)
    return dcgmi


def test_active_mode_runs_dcgm_and_leaves_slurm_and_metrics_alone(tmp_path):
    # dcgmi exits non-zero on a failing test and still prints the JSON.
    dcgmi = fake_dcgmi(tmp_path, "diag-r2-pcie-fail.json", 226)
    config = {
        "munge": False,
        "slurm": True,  # --active must still not touch Slurm (no scontrol here)
        "dcgm_diag_level": 2,
        "dcgmi": str(dcgmi),
        "metrics_dir": str(tmp_path / "metrics"),
    }
    done, _ = program(tmp_path, config, "--active", "--json", "--node", "gpu001")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["action"] == ""
    assert [r for r in result["results"] if r["check"] == "dcgm_diag"] == [
        {
            "check": "dcgm_diag",
            "status": "FAIL",
            "reason": "level 2 pcie GPU 0: Found 104 PCIe replay errors on GPU 0, more than the "
            "threshold of 8: check the GPU's PCIe link and its riser",
        }
    ]
    assert not (tmp_path / "metrics").exists()


def test_the_passive_check_never_runs_dcgm(tmp_path):
    dcgmi = fake_dcgmi(tmp_path, "diag-r2-pass.json", 0)
    config = {**NO_NODE, "dcgm_diag_level": 2, "dcgmi": str(dcgmi)}
    assert health.checks_for(config) == []
    assert [name for name, _ in health.checks_for(config, active=True)] == ["dcgm_diag"]
    assert health.checks_for({**config, "dcgm_diag_level": 0}, active=True) == []
    assert health.checks_for({**config, "dcgmi": str(tmp_path / "none")}, active=True) == []


# --- NVL72: the NVLink fabric and IMEX's domain (tests/fixtures/gpu/imex) ----------------

IMEX = Path(__file__).parent.parent / "fixtures" / "gpu" / "imex"
NVL72_UUID = "8c1f2a4e-5b3d-4e6f-9a7b-0c1d2e3f4a5b"


def nvl72(state: str, status: str) -> str:
    """The recorded XML as a GPU of an NVLink domain reports its fabric."""
    return variant(
        ("<state>N/A</state>", f"<state>{state}</state>"),
        ("<status>N/A</status>", f"<status>{status}</status>"),
        ("<cliqueId>N/A</cliqueId>", "<cliqueId>32766</cliqueId>"),
        ("<clusterUuid>N/A</clusterUuid>", f"<clusterUuid>{NVL72_UUID}</clusterUuid>"),
    )


def test_a_gpu_of_an_nvlink_domain_must_have_its_fabric_completed():
    judge = gpu_checks.judge_nvlink_fabric
    assert judge(gpu_checks.parse_smi_xml(nvl72("Completed", "Success"))) == gpu_checks.Result(
        "nvlink_fabric", "OK", "1 GPU registered with the NVLink fabric"
    )
    assert judge(gpu_checks.parse_smi_xml(nvl72("In Progress", "N/A"))) == gpu_checks.Result(
        "nvlink_fabric", "FAIL", f"{BUS} fabric In Progress/N/A"
    )
    # N/A passes the fabric manager's rule (no NVLink domain there); here it is a GPU that
    # dropped out of its domain.
    assert judge(gpu_checks.parse_smi_xml(recorded("nvidia-smi-q.xml"))) == gpu_checks.Result(
        "nvlink_fabric", "FAIL", f"{BUS} fabric N/A/N/A"
    )
    assert judge([]) == gpu_checks.Result("nvlink_fabric", "FAIL", "no GPU reported")


def test_imex_domain_status_from_nvidia_imex_ctl():
    judge = gpu_checks.judge_imex
    assert judge((IMEX / "nvidia-imex-ctl-N-up.txt").read_text()) == gpu_checks.Result(
        "imex_domain", "OK", "IMEX domain UP, 4 nodes connected"
    )
    assert judge((IMEX / "nvidia-imex-ctl-N-degraded.txt").read_text()) == gpu_checks.Result(
        "imex_domain", "FAIL", "IMEX domain DEGRADED: 10.0.1.14 UNAVAILABLE"
    )
    # Every node READY and the domain UP, but one pair never connected: both named.
    split = (IMEX / "nvidia-imex-ctl-N-up.txt").read_text()
    split = split.replace("       1        C   C   C   C", "       1        C   C   C   N")
    assert judge(split) == gpu_checks.Result(
        "imex_domain",
        "FAIL",
        "IMEX domain UP: 10.0.1.12 not connected (N); 10.0.1.14 not connected (N)",
    )
    assert judge("nvidia-imex-ctl: connection refused\n") == gpu_checks.Result(
        "imex_domain", "FAIL", "nvidia-imex-ctl -N printed no domain status"
    )


def test_kiln_health_runs_the_nvl72_checks_on_an_imex_node(tmp_path):
    (tmp_path / "smi.xml").write_text(nvl72("Completed", "Success"))
    smi = fake_smi(tmp_path, f"cat {tmp_path / 'smi.xml'}\n")
    ctl = tmp_path / "bin" / "nvidia-imex-ctl"
    ctl.write_text(f'#!/bin/sh\n[ "$1" = -N ] && cat {IMEX / "nvidia-imex-ctl-N-degraded.txt"}\n')
    ctl.chmod(0o755)
    config = {"gpus": 1, "nvidia_smi": str(smi), "imex_ctl": str(ctl)}
    deadline = gpu_checks.Deadline(30, 10)
    nvl72_checks = ("nvlink_fabric", "imex_domain")
    found = [r for r in gpu_checks.check_gpus(config, deadline) if r.check in nvl72_checks]
    assert found == []  # not in an NVLink domain: neither rule runs
    config.update(nvlink_domain=True, imex=True)
    found = [r for r in gpu_checks.check_gpus(config, deadline) if r.check in nvl72_checks]
    assert found == [
        gpu_checks.Result("nvlink_fabric", "OK", "1 GPU registered with the NVLink fabric"),
        gpu_checks.Result("imex_domain", "FAIL", "IMEX domain DEGRADED: 10.0.1.14 UNAVAILABLE"),
    ]

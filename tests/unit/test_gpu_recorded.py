"""Kiln's parsers and rules on what a real H100 printed, recorded by `make gpu-check`
(tests/fixtures/gpu/h100-80gb-hbm3-580.159.04, see its README): one NVIDIA H100 80GB
HBM3 in a VM, driver 580.159.04, no NVLink peer, NVSwitch or InfiniBand."""

import json
import re
import subprocess
from pathlib import Path

from kiln.roles.nvidia_driver import node_plan
from kiln.validation import burn_in_samples, nccl_judge, nccl_parse, profiles
from kiln.validation.burn_in_judge import Limits, judge_round
from kiln.validation.verdicts import Judgement, Verdict
from kiln_node import gpu_checks, gpu_metrics, metrics, nvidia_smi
from kiln_node.health_checks import Result
from tests.unit.test_node_metrics import CLOCK_REASONS

RECORDED = Path(__file__).parent.parent / "fixtures" / "gpu" / "h100-80gb-hbm3-580.159.04"
DRIVER = "580.159.04"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def test_smi_xml():
    assert nvidia_smi.parse_xml(recorded("nvidia-smi-q.xml")) == nvidia_smi.SmiLog(
        driver_version=DRIVER,
        cuda_version="13.0",
        gpus=[
            nvidia_smi.SmiGpu(
                bus_id="00000000:00:06.0",
                name="NVIDIA H100 80GB HBM3",
                architecture="Hopper",
                uuid="GPU-00000000-0000-0000-0000-000000000001",
                vbios="96.00.DA.00.0C",
                driver=DRIVER,
                persistence="Enabled",
                uncorrectable_volatile=0,
                remap_pending=False,
                remap_failure=False,
                unrepairable_memory=False,
                clock_events=(),
                width_current=16,
                width_max=16,
                fabric_state="N/A",
                fabric_status="N/A",
                clique_id="N/A",
                cluster_uuid="N/A",
                temperature_c=40.0,
                power_w=129.04,
                power_limit_w=700.0,
                sm_clock_mhz=1980.0,
                memory_clock_mhz=2619.0,
                utilization_pct=0.0,
                memory_used_mib=0.0,
                correctable_volatile=0,
                clock_event_states=tuple((reason, False) for reason in CLOCK_REASONS),
            )
        ],
    )


def test_driver_plan_from_detection():
    """The driver came from the VM's host: loaded, open module, no modinfo on disk."""
    detected = json.loads(recorded("kiln-gpu-detect.json"))
    plan = node_plan.node_plan(detected, {"source": "preinstalled"})
    assert plan == node_plan.NodePlan(
        gpus=1,
        nvswitches=0,
        hcas=0,
        work=True,
        loaded=DRIVER,
        loaded_open=True,
        installed="",
        reboot_needed=False,
        rdma_stack="none",
        rdma_path="none",
    )
    assert node_plan.preinstalled_problems(plan.to_json(), DRIVER, 1) == []


def test_health_rules_give_what_kiln_health_printed():
    """kiln-health's recorded verdicts are what its rules make of the recorded XML."""
    printed = json.loads(recorded("kiln-health.json"))
    gpus = nvidia_smi.parse_xml(recorded("nvidia-smi-q.xml")).gpus
    judged = gpu_checks.judge_gpus(gpus, 1, DRIVER, "")
    # Recorded before a count of one was said in the singular: the rest is as printed.
    assert printed["results"][1] == {"check": "gpu_count", "status": "OK", "reason": "1 GPUs"}
    printed["results"][1]["reason"] = "1 GPU"
    assert [Result(**r) for r in printed["results"]] == [
        Result("gpu_smi", "OK", "nvidia-smi answers"),
        *judged,
        Result("gpu_xid", "OK", "no XID since boot"),
    ]


def test_burn_in_round_judged():
    """Two minutes of bf16 16384^3 products, 10 s intervals: 681 TFLOP/s at the 700 W
    power cap (SW power cap active under load is not a throttle)."""
    data = json.loads(recorded("burn_stress.json"))
    node = burn_in_samples.read_node("gpu-test-host", data)
    assert (node.devices["0"].tflops, node.new_errors, node.error) == (681.02, [], "")
    assert [round(t) for t, _ in node.devices["0"].intervals] == [10 * i for i in range(1, 13)]
    samples = node.devices["0"].samples
    assert len(samples) == 13 and all(s.throttles == [] for s in samples)
    assert "Active" in recorded("burn-samples.csv")  # the power cap, sampled under load
    limits = Limits.from_profile(profiles.load("h100-sxm-8x-ib400").burn_in)
    where = "gpu 0, round 0"
    assert judge_round(0, {"gpu-test-host": node}, {}, limits) == [
        Judgement(
            "gpu-test-host",
            "burn_in.tflops",
            where,
            681.02,
            "TFLOP/s",
            Verdict.PASS,
            f"{where}: 681 TFLOP/s",
            612.92,
        ),
        Judgement(
            "gpu-test-host",
            "burn_in.temperature_c",
            where,
            74.0,
            "C",
            Verdict.PASS,
            f"{where}: reached 74 C",
            85.0,
        ),
        Judgement(
            "gpu-test-host",
            "burn_in.throttle_percent",
            where,
            0.0,
            "%",
            Verdict.PASS,
            f"{where}: throttled in 0% of 13 samples",
            5.0,
        ),
    ]


def test_nccl_tests_one_gpu():
    """nccl-tests 2.19.6 built by Kiln, all_reduce_perf on one GPU: read whole, and one
    rank is not judged."""
    runs = nccl_parse.parse_text(recorded("all_reduce_perf.txt"), "all_reduce_perf.txt")
    assert [
        (r.collective, r.ranks, r.hosts, r.devices, r.max_bytes, r.out_of_bounds, len(r.rows))
        for r in runs
    ] == [("all_reduce", 1, ["gpu-test-host"], ["NVIDIA H100 80GB HBM3"], 1 << 30, 0, 28)]
    assert [row.size for row in runs[0].rows] == [8 << i for i in range(28)]
    assert all(row.wrong() == 0 and row.best_busbw() == 0 for row in runs[0].rows)
    (result,) = nccl_judge.judge(runs, None)
    assert (result.verdict, result.notes, result.wrong) == (
        Verdict.SKIP,
        [nccl_judge.ONE_RANK],
        0,
    )


def test_kiln_metrics_gpu_file_as_the_h100_wrote_it(promtool):
    """kiln-metrics' kiln_gpu.prom from the live H100 (2026-11-27) passes promtool, and
    gpu_metrics makes the same series, line for line, from the XML and the (empty)
    `nvidia-smi nvlink -e` recorded beside it (a day apart on the same machine: only
    temperature and power moved; no NVLink there, so no NVLink sample)."""
    written = recorded("kiln_gpu.prom")
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=written, capture_output=True, text=True
    )
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")
    nvlink = nvidia_smi.parse_nvlink_errors(recorded("nvidia-smi-nvlink-e.txt"))
    made = metrics.text(
        gpu_metrics.gauges(
            nvidia_smi.parse_xml(recorded("nvidia-smi-q.xml")), [], "gpu-test-host", 85, nvlink
        )
    )
    assert nvlink == []
    # The recording predates kiln_gpu_clock_event_reason: its family (every reason 0,
    # none held the clocks then) is left out of the comparison.
    family = re.compile(r"^(# (HELP|TYPE) )?kiln_gpu_clock_event_reason\b.*\n", re.M)
    assert len(family.findall(made)) == 2 + 9
    assert "kiln_gpu_clock_event_reason{" not in written
    made = family.sub("", made)
    moved = re.compile(r"^(kiln_gpu_(?:power_watts|temperature_celsius)\{[^}]*\}) \S+$", re.M)
    assert moved.sub(r"\1 _", made) == moved.sub(r"\1 _", written)

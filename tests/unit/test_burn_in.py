"""The burn-in rules on recorded outputs: the healthy H100 under three minutes of bf16
load (tests/fixtures/gpu/h100-80gb-hbm3-vm: nvidia-smi's samples, the per-round
TFLOP/s, the error counters) is the baseline; each faulty variant changes only the
fields at fault."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kiln.campaigns import burn_in, campaign
from kiln.errors import InputError
from kiln.report import document, html
from kiln.validation import profiles
from kiln.validation.burn_in_judge import Limits, first_failures, judge_round
from kiln.validation.burn_in_samples import (
    Device,
    NodeRound,
    Sample,
    new_errors,
    parse_samples,
    read_node,
)
from kiln.validation.verdicts import Judgement, Verdict
from tests.conftest import REPO

H100 = REPO / "tests" / "fixtures" / "gpu" / "h100-80gb-hbm3-vm"
LOADED = (H100 / "query-gpu-under-load.csv").read_text()
STARTED = "2026/11/23 09:03:54.901"  # the first sample's time stamp
H100_LIMITS = Limits.from_profile(profiles.load("h100-sxm-8x-ib400").burn_in or {})


def recorded_rounds() -> list[tuple[float, float]]:
    """bf16-matmul-rounds.txt: 'round 0 t=10s tflops=700.3' -> (10.0, 700.3) (the file
    ends with the reason mask read after the load)."""
    out = []
    for line in (H100 / "bf16-matmul-rounds.txt").read_text().splitlines():
        if not line.startswith("round "):
            continue
        fields = dict(part.split("=") for part in line.split()[2:])
        out.append((float(fields["t"].rstrip("s")), float(fields["tflops"])))
    return out


def counters(ecc="0", pending="No", xids=()) -> dict:
    """Error counters in the recorded shapes (query-gpu, query-remapped-rows, dmesg)."""
    remapped = (
        (H100 / "query-remapped-rows.csv")
        .read_text()
        .replace("0, 0, No, No", f"0, 0, {pending}, No")
    )
    dmesg = (H100 / "dmesg-nvrm.txt").read_text().splitlines()
    return {
        "ecc": "index, ecc.errors.uncorrected.volatile.total, ecc.errors.corrected.volatile.total\n"
        f"0, {ecc}, 0\n",
        "remapped": remapped,
        "xids": [line for line in dmesg + list(xids) if "NVRM: Xid" in line],
    }


def stress_json(samples=LOADED, intervals=None, after=None, started=1000.0) -> dict:
    """What kiln-burn-stress writes for one node with the recorded H100."""
    return {
        "node": "gpu001",
        "kind": "cuda",
        "started": started,
        "started_local": STARTED,
        "seconds": 180,
        "size": 16384,
        "dtype": "bfloat16",
        "devices": {
            "0": {
                "name": "NVIDIA H100 80GB HBM3",
                "intervals": [list(p) for p in (intervals or recorded_rounds())],
                "error": "",
            }
        },
        "samples": samples,
        "before": counters(),
        "after": after or counters(),
        "error": "",
    }


def test_the_recorded_samples_parse_whole():
    samples = parse_samples(LOADED, STARTED)
    assert list(samples) == ["0"]
    got = samples["0"]
    assert len(got) == 38
    assert got[:3] == [
        Sample(0.0, 33.0, 115.14, 510.0, []),
        Sample(5.01, 33.0, 72.87, 345.0, []),
        Sample(10.01, 52.0, 692.89, 1380.0, []),
    ]
    assert got[-1] == Sample(185.04, 67.0, 698.33, 1365.0, [])
    # Only the SW power cap was active under load: not a throttle.
    assert all(s.throttles == [] for s in got)
    assert max(s.temperature_c for s in got) == 67.0


def test_the_healthy_h100_passes_every_rule():
    first: dict = {}
    found = {"gpu001": read_node("gpu001", stress_json())}
    judgements = judge_round(1, found, first, H100_LIMITS)
    assert judgements == [
        Judgement("gpu001", "burn_in.tflops", "gpu 0, round 1", 695.15, "TFLOP/s", Verdict.PASS,
                  "gpu 0, round 1: 695 TFLOP/s", 625.63),
        Judgement("gpu001", "burn_in.temperature_c", "gpu 0, round 1", 67.0, "C", Verdict.PASS,
                  "gpu 0, round 1: reached 67 C", 85.0),
        Judgement("gpu001", "burn_in.throttle_percent", "gpu 0, round 1", 0.0, "%",
                  Verdict.PASS, "gpu 0, round 1: throttled in 0% of 38 samples", 5.0),
    ]  # fmt: skip
    assert first == {("gpu001", "0"): (1, 695.15)}


def thermal(text: str, rows: range, temperature: int) -> str:
    """The recorded samples with HW thermal slowdown active (and hotter) in `rows`."""
    lines = text.splitlines()
    for i in rows:
        cells = lines[i].split(", ")
        cells[1] = str(temperature)
        cells[9] = "Active"  # clocks_event_reasons.hw_thermal_slowdown
        lines[i] = ", ".join(cells)
    return "\n".join(lines) + "\n"


def test_a_hot_throttling_gpu_fails_on_temperature_and_throttle():
    hot = thermal(LOADED, range(20, 30), 89)
    found = {"gpu001": read_node("gpu001", stress_json(samples=hot))}
    judgements = judge_round(2, found, {("gpu001", "0"): (1, 695.1)}, H100_LIMITS)
    assert [(j.test, j.verdict, j.reason) for j in judgements] == [
        ("burn_in.tflops", Verdict.PASS, "gpu 0, round 2: 695 TFLOP/s"),
        ("burn_in.temperature_c", Verdict.FAIL,
         "gpu 0, round 2: reached 89 C, over the ceiling of 85 C"),
        ("burn_in.throttle_percent", Verdict.FAIL,
         "gpu 0, round 2: throttled in 26% of 38 samples (hw_thermal_slowdown)"),
    ]  # fmt: skip


def test_new_ecc_errors_remapped_rows_and_xids_fail_the_node():
    xid = "[ 9512.301277] NVRM: Xid (PCI:0000:00:06.0): 48, pid=4121, name=python3, DBE"
    after = counters(ecc="2", pending="Yes", xids=[xid])
    assert new_errors(counters(), after) == [
        "gpu 0: 2 new uncorrectable ECC errors",
        "gpu 00000000:00:06.0: remapped rows pending +1",
        "XID 48 double-bit ECC error on PCI:0000:00:06.0",
    ]
    # An XID from before the round is not news.
    assert new_errors(counters(xids=[xid]), after) == [
        "gpu 0: 2 new uncorrectable ECC errors",
        "gpu 00000000:00:06.0: remapped rows pending +1",
    ]
    found = {"gpu001": read_node("gpu001", stress_json(after=after))}
    errors = [j for j in judge_round(1, found, {}, H100_LIMITS) if j.test == "burn_in.errors"]
    assert errors == [
        Judgement("gpu001", "burn_in.errors", "round 1", 3.0, "", Verdict.FAIL,
                  "round 1: gpu 0: 2 new uncorrectable ECC errors; gpu 00000000:00:06.0: "
                  "remapped rows pending +1; XID 48 double-bit ECC error on PCI:0000:00:06.0"),
    ]  # fmt: skip


def test_every_new_xid_fails_the_burn_in_application_faults_too():
    """The only application on the GPUs is Kiln's own stress, in a reservation: an
    application-class XID (kiln-health lets it pass) from it points at the GPU."""
    lines = [
        "[ 9600.200000] NVRM: Xid (PCI:0000:00:06.0): 31, pid=4242, name=python3, Ch 00000010",
        "[ 9700.000000] NVRM: Xid (PCI:0000:00:06.0): 149, pid='<unknown>', name=<unknown>, x",
    ]
    assert new_errors(counters(), counters(xids=lines)) == [
        "XID 31 GPU memory page fault on PCI:0000:00:06.0",
        "XID 149 (not in Kiln's table) on PCI:0000:00:06.0",
    ]


def slowed(factor: float) -> list[tuple[float, float]]:
    return [(t, v * factor) for t, v in recorded_rounds()]


def write_round(store, nodes, slow=None, health=None, started=1000.0) -> None:
    """What a burn-in round leaves in its results directory, as the role lays it out:
    each node's stress (SLOW: node -> factor on the recorded TFLOP/s; STARTED: the
    epoch second its load began), suites and kiln-health (HEALTH: node -> (status,
    reason); OK otherwise)."""
    from kiln.validation import results as layout
    from tests.unit.test_validation_run import bench, storage_result

    ok = layout.Step(rc=0).to_json()
    store.write(layout.STORAGE_STEPS, layout.StorageSteps(storage=ok, cold_import=ok).to_json())
    store.write(
        layout.COLLECTIVES_STEPS,
        layout.CollectivesSteps(single_node=ok, multi_node=ok, nccl_tests_skipped="absent")
        .to_json(),
    )  # fmt: skip
    for n in nodes:
        intervals = slowed((slow or {}).get(n, 1.0))
        store.write_node("burn_stress", n, stress_json(intervals=intervals, started=started))
        store.write_node("storage", n, storage_result(n))
        store.write_node("cold_import", n, {"node": n, "module": "m", "seconds": 2.5})
        store.write_node("collectives_node", n, bench(8, [n]))
        status, reason = (health or {}).get(n, ("OK", "8"))
        checked = {"check": "gpu", "status": status, "reason": reason}
        store.write_node(layout.HEALTH, n, {"node": n, "results": [checked]})
    store.write_node("collectives_all", "gpu001", bench(16, nodes, scale=0.9))


def tflops(judgements):
    return {(j.node, j.subject): (j.verdict, j.reason) for j in judgements
            if j.test == "burn_in.tflops"}  # fmt: skip


def test_a_gpu_that_falls_below_its_first_round_or_the_fleet_fails():
    first: dict = {}
    nodes = ["gpu001", "gpu002", "gpu003", "gpu004"]
    healthy = {n: read_node(n, stress_json()) for n in nodes}
    assert all(j.verdict is Verdict.PASS for j in judge_round(1, healthy, first, H100_LIMITS))
    # Round 2: gpu002 at 85% of its own round 1 (and of the fleet); gpu003 brings nothing.
    second = dict(healthy, gpu002=read_node("gpu002", stress_json(intervals=slowed(0.85))))
    second["gpu003"] = None
    got = judge_round(2, second, first, H100_LIMITS)
    assert tflops(got) == {
        ("gpu001", "gpu 0, round 2"): (Verdict.PASS, "gpu 0, round 2: 695 TFLOP/s"),
        ("gpu002", "gpu 0, round 2"): (
            Verdict.FAIL,
            "gpu 0, round 2: 591 TFLOP/s, 15% below its round 1 (695) and 15% below the "
            "fleet median (695) and under the profile's floor of 600",
        ),
        ("gpu004", "gpu 0, round 2"): (Verdict.PASS, "gpu 0, round 2: 695 TFLOP/s"),
    }
    assert [j for j in got if j.node == "gpu003"] == [
        Judgement("gpu003", "burn_in.stress", "round 2", None, "", Verdict.FAIL,
                  "round 2: no stress result came back")
    ]  # fmt: skip


def test_a_gpu_slow_from_the_start_fails_against_the_fleet_only():
    no_floor = Limits(10.0, 0.0, 85.0, 5.0)
    nodes = {n: read_node(n, stress_json()) for n in ("gpu001", "gpu002", "gpu003")}
    nodes["gpu003"] = read_node("gpu003", stress_json(intervals=slowed(0.8)))
    got = tflops(judge_round(1, nodes, {}, no_floor))
    assert got[("gpu003", "gpu 0, round 1")] == (
        Verdict.FAIL,
        "gpu 0, round 1: 556 TFLOP/s, 20% below the fleet median (695)",
    )
    assert got[("gpu001", "gpu 0, round 1")][0] is Verdict.PASS


def test_each_failure_is_named_once_in_the_round_it_first_appeared():
    limits = Limits(10.0, 0.0, 85.0, 5.0)
    first: dict = {}
    judgements = []
    for index, factor in ((1, 1.0), (2, 0.8), (3, 0.7)):
        found = {
            "gpu001": read_node("gpu001", stress_json()),
            "gpu002": read_node("gpu002", stress_json(intervals=slowed(factor))),
        }
        judgements += judge_round(index, found, first, limits)
    assert first_failures(judgements, ["gpu001", "gpu002"]) == {
        "gpu001": [],
        "gpu002": ["gpu 0, round 2: 556 TFLOP/s, 20% below its round 1 (695) and 11% below "
                   "the fleet median (626)"],
    }  # fmt: skip


def test_a_node_whose_stress_could_not_start_fails_with_its_reason():
    data = {"node": "gpu001", "devices": {}, "error": "torch sees no GPU"}
    got = judge_round(1, {"gpu001": read_node("gpu001", data)}, {}, H100_LIMITS)
    assert got == [
        Judgement("gpu001", "burn_in.stress", "round 1", None, "", Verdict.FAIL,
                  "round 1: torch sees no GPU")
    ]  # fmt: skip


def test_nan_and_infinity_from_a_node_are_no_figures():
    """The stress program's JSON and nvidia-smi's text may hold NaN or inf: no comparison
    fails on NaN, and a report holding one is not JSON. They read as no figure (the GPU
    fails) and no reading (the sample is left out)."""
    samples = LOADED.replace(", 67, ", ", nan, ")  # the four hottest samples' temperature
    intervals = [(10.0, float("nan")), (20.0, float("inf"))]
    node = read_node("gpu001", stress_json(samples=samples, intervals=intervals))
    assert node.devices["0"].intervals == []
    temperatures = [s.temperature_c for s in node.devices["0"].samples]
    assert (temperatures.count(None), max(t for t in temperatures if t is not None)) == (4, 66.0)
    got = judge_round(1, {"gpu001": node}, {}, H100_LIMITS)
    assert got == [
        Judgement("gpu001", "burn_in.stress", "gpu 0, round 1", None, "", Verdict.FAIL,
                  "gpu 0, round 1: no figure")
    ]  # fmt: skip


def test_cpu_rounds_have_figures_and_no_samples():
    data = {
        "node": "lab-compute01",
        "started": 5.0,
        "started_local": "2026/11/25 10:00:00.000",
        "devices": {"cpu": {"name": "cpu", "intervals": [[3.0, 0.02], [6.0, 0.021]], "error": ""}},
        "error": "",
    }
    node = read_node("lab-compute01", data)
    assert node == NodeRound(
        "lab-compute01",
        {"cpu": node.devices["cpu"]},
        [],
        5.0,
        "",
    )
    assert node.devices["cpu"].tflops == pytest.approx(0.0205)
    limits = Limits.from_profile(profiles.load("lab-cpu").burn_in or {})
    assert [j.test for j in judge_round(1, {"lab-compute01": node}, {}, limits)] == [
        "burn_in.tflops"
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("4h", 14400), ("90m", 5400), ("1h30m", 5400), ("2d", 172800), ("45s", 45), ("3M", 180)],
)
def test_durations(text, seconds):
    assert burn_in.parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a length such as 4h"),
        ("4", "expected a length such as 4h"),
        ("4 h", "expected a length such as 4h"),
        ("-1h", "expected a length such as 4h"),
        ("1.5h", "expected a length such as 4h"),
        ("4x", "expected a length such as 4h"),
        ("10s", "must be between 30s and 14d"),
        ("15d", "must be between 30s and 14d"),
    ],
)
def test_bad_durations(text, message):
    with pytest.raises(InputError, match=message):
        burn_in.parse_duration(text)


@pytest.mark.parametrize("number", ["1209601", "99999999999", "9" * 5000])
def test_a_duration_past_14_days_in_any_number_of_digits_is_one_line(number):
    """Python's int() refuses a number of over 4,300 digits (a ValueError, which read
    as an internal error): past 14d is refused before any number is read."""
    with pytest.raises(InputError) as caught:
        burn_in.parse_duration(f"{number}s")
    assert caught.value.message == f"{number + 's'!r}: must be between 30s and 14d"
    assert burn_in.parse_duration("0000000000000000000030s") == 30


def test_a_burn_in_setting_of_more_digits_than_python_reads_is_one_line(tmp_path):
    own = tmp_path / "bad.yaml"
    own.write_text("burn_in:\n  round_s: " + "9" * 5000 + "\n")
    with pytest.raises(profiles.ProfileError) as caught:
        profiles.load(str(own))
    assert caught.value.message == (
        f"{own}: YAML does not parse: a value cannot be read (Exceeds the limit (4300 "
        "digits) for integer string conversion: value has 5000 digits)"
    )


def test_every_shipped_profile_but_none_has_a_burn_in_section():
    assert {n: profiles.load(n).burn_in is not None for n in profiles.shipped()} == {
        "a100-sxm-8x": True,
        "h100-sxm-8x-ib400": True,
        "h100-sxm-8x-roce400": True,
        "h200-sxm-8x-ib400": True,
        "lab-cpu": True,
    }


def test_a_profile_section_extends_and_overrides(tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("extends: h100-sxm-8x-ib400\nburn_in:\n  round_s: 1200\n  drop_percent: 7\n")
    loaded = profiles.load(str(own))
    assert loaded.burn_in == {
        **profiles.BURN_IN_DEFAULTS,
        "round_s": 1200,
        "drop_percent": 7.0,
        "tflops_min": 600.0,
    }
    bare = tmp_path / "bare.yaml"
    bare.write_text("thresholds: {slurm.srun_s: 5}\n")
    assert profiles.load(str(bare)).burn_in is None


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{device: tpu}", "burn_in.device must be one of cuda, cpu"),
        ("{dtype: int8}", "burn_in.dtype must be one of bfloat16, float16, float32"),
        ("{round_s: 5}", "burn_in.round_s 5: must be 10 to 86400"),
        ("{sample_s: 700}", r"burn_in.sample_s 700: must be at most burn_in.round_s \(600\)"),
        ("{drop_percent: 120}", "burn_in.drop_percent 120.0: must be 0 to 100"),
        ("{memory_fraction: 1.5}", "burn_in.memory_fraction 1.5: must be 0 to 0.95"),
        ("{round_s: 1h}", "burn_in.round_s must be a whole number, got '1h'"),
        ("{rounds: 3}", "unknown burn_in setting 'rounds'"),
    ],
)
def test_bad_burn_in_sections(tmp_path, section, message):
    own = tmp_path / "bad.yaml"
    own.write_text(f"burn_in: {section}\n")
    with pytest.raises(profiles.ProfileError, match=message):
        profiles.load(str(own))


def test_the_html_report_plots_every_series_over_time():
    report = document.Report(
        id="20261125-100000-burn-in-ab12",
        started="2026-11-25T10:00:00+00:00",
        inventory="inv",
        profile="h100-sxm-8x-ib400",
        suites=["burn-in"],
        nodes=["gpu001"],
        series=[
            {"node": "gpu001", "device": "gpu0", "metric": m, "points": [[5, 1.0], [10, 2.0]]}
            for m in ("tflops", "temperature_c", "power_w", "sm_clock_mhz")
        ]
        + [
            {
                "node": "gpu[001-002]",
                "device": "all_reduce",
                "metric": "busbw_gbps",
                "points": [[60, 380.0]],
            }
        ],
    )
    page = html.render(report)
    assert "<title>Kiln burn-in 20261125-100000-burn-in-ab12</title>" in page
    # A plot per metric, in order; the one round of busbw is a point that says its value.
    assert re.findall(r"<figure class='plot' data-kind='(\w+)' data-thresholds='(\d+)' "
                      r"aria-label='([^']*)'", page) == [
        ("time", "0", "TFLOP/s per device"),
        ("time", "0", "GPU temperature"),
        ("time", "0", "power draw"),
        ("time", "0", "SM clock"),
        ("time", "0", "multi-node all_reduce busbw, per round"),
    ]  # fmt: skip
    assert '"mode":"markers+text"' in page and '"text":["380"]' in page
    assert page.count("<script type='text/javascript'>/**") == 1  # Plotly's, once
    again = document.Report.from_json(json.loads(json.dumps(report.to_json())))
    assert again.series == report.series


BURN_IN_METRICS = """\
# HELP kiln_result_verdict 1 for each node of the campaign's last run, its verdict in `verdict`.
# TYPE kiln_result_verdict gauge
kiln_result_verdict{campaign="burn_in",node="gpu001",verdict="pass"} 1
kiln_result_verdict{campaign="burn_in",node="gpu002",verdict="fail"} 1
# HELP kiln_result_last_run_timestamp_seconds When the campaign's last run finished.
# TYPE kiln_result_last_run_timestamp_seconds gauge
kiln_result_last_run_timestamp_seconds{campaign="burn_in"} 1795779225
# HELP kiln_result_busbw_bytes_per_second NCCL bus bandwidth at the large-message plateau, last run.
# TYPE kiln_result_busbw_bytes_per_second gauge
kiln_result_busbw_bytes_per_second{campaign="burn_in",node="gpu001",test="collectives.all_gather.single_node"} 450000000000
kiln_result_busbw_bytes_per_second{campaign="burn_in",node="gpu001",test="collectives.all_reduce.single_node"} 450000000000
kiln_result_busbw_bytes_per_second{campaign="burn_in",node="gpu002",test="collectives.all_gather.single_node"} 450000000000
kiln_result_busbw_bytes_per_second{campaign="burn_in",node="gpu002",test="collectives.all_reduce.single_node"} 450000000000
# HELP kiln_result_flops_per_second GPU matmul rate, last run.
# TYPE kiln_result_flops_per_second gauge
kiln_result_flops_per_second{campaign="burn_in",node="gpu001",test="burn_in.tflops"} 695150000000000
kiln_result_flops_per_second{campaign="burn_in",node="gpu002",test="burn_in.tflops"} 556120000000000
# HELP kiln_result_storage_bytes_per_second Storage throughput (fio), last run.
# TYPE kiln_result_storage_bytes_per_second gauge
kiln_result_storage_bytes_per_second{campaign="burn_in",node="gpu001",test="storage.seq_read"} 1200000000
kiln_result_storage_bytes_per_second{campaign="burn_in",node="gpu001",test="storage.seq_write"} 2000000000
kiln_result_storage_bytes_per_second{campaign="burn_in",node="gpu002",test="storage.seq_read"} 1200000000
kiln_result_storage_bytes_per_second{campaign="burn_in",node="gpu002",test="storage.seq_write"} 2000000000
"""  # noqa: E501


NOW = 1795779225.4  # the burn-in's clock (kiln.campaigns.campaign's time.time)


def burn_in_session(tmp_path, monkeypatch, write_inventory, duration_s=3600, rounds=None):
    """The whole session against a stand-in for the playbook runs, which write what the
    role writes: the hold's plan, then per round the stress (recorded H100 figures), the
    suites and kiln-health. gpu002 slows in round 2; Ctrl-C comes in round 3. Returns
    the report, the exit code and the playbook runs asked for."""
    from kiln import inventory
    from kiln.run import execute
    from kiln.run.events import RunSummary
    from kiln.validation import drain
    from kiln.validation import results as layout
    from tests.results_files import Written
    from tests.unit.test_validation_run import scontrol_line

    nodes = ["gpu001", "gpu002"]  # write_inventory's compute nodes

    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    asked = []
    scontrol = "\n".join(
        [scontrol_line("gpu001", "IDLE+DRAIN", "kiln: old"), scontrol_line("gpu002")]
    )

    began = time.time()

    def fake_run(request):
        ev = request.extravars
        asked.append((request.playbook, ev.get("validate_burn_in_step"), ev))
        if request.playbook == "validate_drain.yml":
            return RunSummary(run="r-act", playbook=request.playbook, status="successful")
        store = Written(Path(ev["validate_results_dir"]))
        if ev["validate_burn_in_step"] == "hold":
            plan = drain.plan(scontrol, nodes).to_dict()
            store.write(layout.SLURM_STATE, {"scontrol": scontrol, "plan": plan})
            return RunSummary(run="r-hold", playbook=request.playbook, status="successful")
        index = int(ev["validate_run"].rsplit("-r", 1)[1])
        if index == 3:
            return RunSummary(run="r3", playbook=request.playbook, status="canceled")
        # Each round's load begins a minute into its 10 minutes (burn_in's own clock).
        started = began + 60 + (index - 1) * 600
        write_round(store, nodes, slow={"gpu002": 0.8} if index == 2 else {}, started=started)
        return RunSummary(run=f"r{index}", playbook=request.playbook, status="successful")

    monkeypatch.setattr(execute, "run_playbook", fake_run)
    monkeypatch.setattr(campaign, "time", SimpleNamespace(time=lambda: NOW))
    spec = inventory.load(write_inventory())
    request = burn_in.Request(
        inventory=spec, duration_s=duration_s, rounds=rounds, profile="h100-sxm-8x-ib400"
    )
    report, code = burn_in.burn_in(request)
    return report, code, asked


@pytest.mark.parametrize(
    ("duration_s", "minutes"),
    [
        # Rounds alone: each round's 10 minutes of stress and 10 of suites, three rounds
        # more and an hour: (2 x 20 + 30) + 60 minutes.
        (None, 130),
        # The rounds end first: the hold is the duration's, as without --rounds.
        (3600, 150),
    ],
)
def test_rounds_end_the_burn_in_after_that_many(
    tmp_path, monkeypatch, write_inventory, duration_s, minutes
):
    from kiln.errors import ExitCode

    report, code, asked = burn_in_session(
        tmp_path, monkeypatch, write_inventory, duration_s=duration_s, rounds=2
    )
    assert code == ExitCode.VALIDATION_FAILED  # gpu002 slows in round 2
    assert [(p, step) for p, step, _ in asked] == [
        ("burn_in.yml", "hold"),
        ("burn_in.yml", "round"),
        ("burn_in.yml", "round"),
        ("validate_drain.yml", None),
    ]
    assert asked[0][2]["validate_reservation_minutes"] == minutes
    # Every round's stress is the profile's whole round.
    assert [ev["validate_burn_in_seconds"] for _, _, ev in asked[1:3]] == [600, 600]
    assert re.fullmatch(r"2 rounds in 0m[0-9]{2}s", report.notes[-1]), report.notes
    rounds = {j.subject.rsplit("round ", 1)[1] for j in report.judgements if "round" in j.subject}
    assert rounds == {"1", "2"}


def test_a_burn_in_judges_each_round_and_a_cancel_ends_it_judged_and_released(
    tmp_path, monkeypatch, write_inventory
):
    from kiln.errors import ExitCode

    report, code, asked = burn_in_session(tmp_path, monkeypatch, write_inventory)
    nodes = ["gpu001", "gpu002"]
    assert code == ExitCode.VALIDATION_FAILED
    assert [(p, step) for p, step, _ in asked] == [
        ("burn_in.yml", "hold"),
        ("burn_in.yml", "round"),
        ("burn_in.yml", "round"),
        ("burn_in.yml", "round"),
        ("validate_drain.yml", None),
    ]
    reservation = f"kiln_burn_in_{report.id}"
    hold = asked[0][2]
    # The hold lasts the hour of burn-in, three of the profile's 10-minute rounds and an
    # hour more: 60 + 30 + 60 minutes.
    assert (hold["validate_reservation"], hold["validate_reservation_minutes"]) == (
        reservation,
        150,
    )
    assert asked[1][2]["validate_burn_in_seconds"] == 600
    assert asked[1][2]["validate_nodes"] == nodes  # gpu001 was Kiln's: resumed to test
    assert report.node_verdicts == {
        "gpu001": {"verdict": "pass", "reasons": []},
        "gpu002": {
            "verdict": "fail",
            "reasons": ["gpu 0, round 2: 556 TFLOP/s, 20% below its round 1 (695) and 11% "
                        "below the fleet median (626) and under the profile's floor of 600"],
        },
    }  # fmt: skip
    assert report.actions == {
        "drain": {"gpu002": "kiln: burn-in: " + report.node_verdicts["gpu002"]["reasons"][0]},
        "resume": ["gpu001"],
        "left": {},
    }
    metrics = asked[-1][2].pop("validate_results")
    assert asked[-1][2] == {
        "validate_drain": report.actions["drain"],
        "validate_resume": ["gpu001"],
        "validate_release": {"reservation": reservation, "redrain": {"gpu001": "kiln: old"}},
    }
    # The last run as metrics (kiln.report.result_metrics): the lowest figure of each node
    # and test over both rounds (gpu002's slow GPU 0 in round 2), busbw of the
    # within-node runs only (the multi-node figure is no one node's).
    assert metrics == {"file": "kiln_result_burn_in.prom", "text": BURN_IN_METRICS}
    assert report.notes[-1] == "canceled in round 3: judged the rounds that had ended"
    # Two judged rounds: every node's stress and suites in each, none from round 3.
    rounds = {j.subject.rsplit("round ", 1)[1] for j in report.judgements if "round" in j.subject}
    assert rounds == {"1", "2"}
    tflops = [s for s in report.series if s["metric"] == "tflops"]
    # Each judged round brings the recorded 18 intervals.
    assert [(s["node"], s["device"], len(s["points"])) for s in tflops] == [
        ("gpu001", "gpu0", 36),
        ("gpu002", "gpu0", 36),
    ]
    # The multi-node busbw: one series, a point per judged round.
    busbw = [s for s in report.series if s["metric"] == "busbw_gbps"]
    assert [(s["node"], s["device"], len(s["points"])) for s in busbw] == [
        ("gpu[001-002]", "all_reduce", 2)
    ]
    # The temperatures of both rounds, from the recorded samples.
    temperatures = [s for s in report.series if s["metric"] == "temperature_c"]
    assert len(temperatures) == 2 and len(temperatures[0]["points"]) == 2 * 38
    assert (document.directory(report.id) / "report.html").is_file()


BURN_STRESS = REPO / "roles" / "validate" / "files" / "kiln-burn-stress"


def burn_stress(results: Path, node: str, *args: str) -> int:
    """kiln-burn-stress run here as the role runs it on a node: its file where the role's
    task puts it (results/burn_stress/NODE.json), read back as the campaign reads it."""
    pytest.importorskip("torch")
    out = results / "burn_stress" / f"{node}.json"
    argv = [sys.executable, "-W", "ignore", str(BURN_STRESS), *args, "--out", str(out)]
    env = {**os.environ, "SLURMD_NODENAME": node}
    return subprocess.run(argv, env=env, capture_output=True, timeout=120).returncode


def test_burn_stress_output_on_the_cpu_reads_and_judges_whole(tmp_path):
    """The lab profile's stress (CPU, float32, one thread), one short round: a key
    kiln-burn-stress renames leaves the round without figures, and this fails."""
    from kiln.validation import results as layout

    settings = profiles.load("lab-cpu").burn_in or {}
    rc = burn_stress(
        tmp_path, "lab-compute01", "--seconds", "1", "--interval", "0.3",
        "--device", settings["device"], "--dtype", settings["dtype"],
        "--size", str(settings["size"]), "--threads", str(settings["threads"]),
    )  # fmt: skip
    assert rc == 0
    data = layout.Layout(tmp_path).load_node("burn_stress", "lab-compute01")
    node = read_node("lab-compute01", data)
    intervals = node.devices["cpu"].intervals
    assert node == NodeRound(
        "lab-compute01", {"cpu": Device("cpu", intervals, [], "")}, [], data["started"], ""
    )
    times = [t for t, _ in intervals]
    assert len(times) >= 3 and times == sorted(set(times)) and times[-1] >= 1.0
    assert all(figure > 0 for _, figure in intervals)
    figure = node.devices["cpu"].tflops
    first: dict = {}
    (judged,) = judge_round(1, {"lab-compute01": node}, first, Limits.from_profile(settings))
    assert judged == Judgement(
        "lab-compute01", "burn_in.tflops", "cpu, round 1", figure, "TFLOP/s", Verdict.PASS,
        judged.reason, judged.threshold,
    )  # fmt: skip
    assert re.fullmatch(r"cpu, round 1: [0-9.]+ TFLOP/s", judged.reason)
    assert 0 < judged.threshold < figure
    assert first == {("lab-compute01", "cpu"): (1, figure)}


def test_burn_stress_without_a_gpu_fails_the_node_with_its_reason(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: tests/gpu runs the stress on it")
    from kiln.validation import results as layout

    assert burn_stress(tmp_path, "gpu001", "--seconds", "1", "--device", "cuda") == 1
    node = read_node("gpu001", layout.Layout(tmp_path).load_node("burn_stress", "gpu001"))
    reason = "torch sees no GPU (torch.cuda.is_available() is false)"
    assert node == NodeRound("gpu001", {}, [], 0.0, reason)
    assert judge_round(1, {"gpu001": node}, {}, H100_LIMITS) == [
        Judgement("gpu001", "burn_in.stress", "round 1", None, "", Verdict.FAIL,
                  f"round 1: {reason}")
    ]  # fmt: skip


def test_a_node_whose_health_check_could_not_report_is_not_checked_in_its_round(tmp_path):
    """kiln-health after a round, by kiln.health.judgements' one rule: its failures and
    warnings are the round's, its passes are not news, a node whose output cannot be
    read is not checked (never a pass, and no fault to drain it for), and a node
    without the health role brings nothing to read."""
    from kiln.campaigns import burn_in
    from kiln.validation import results as layout

    store = layout.make(tmp_path)
    results = {
        "gpu001": [{"check": "gpu", "status": "FAIL", "reason": "XID 79 fallen off the bus"}],
        "gpu002": [{"check": "gpu", "status": "OK", "reason": "8 GPUs"}],
    }
    for node, found in results.items():
        store.node_path(layout.HEALTH, node).write_text(json.dumps({"results": found}))
    store.node_path(layout.HEALTH, "gpu003").write_text("kiln-health: Killed\n")
    tested = ["gpu001", "gpu002", "gpu003", "gpu004"]
    unread = "kiln-health printed no readable result (Expecting value: line 1 column 1 (char 0))"
    assert burn_in._health(store, tested, 2) == [
        Judgement("gpu001", "burn_in.health", "gpu, round 2", None, "", Verdict.FAIL,
                  "round 2: gpu: XID 79 fallen off the bus"),
        Judgement("gpu003", "burn_in.health", "round 2", None, "", Verdict.UNCHECKED,
                  f"round 2: {unread}"),
    ]  # fmt: skip

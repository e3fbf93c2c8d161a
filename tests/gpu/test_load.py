"""The programs that load the GPUs: burn-in's stress judged by the burn-in rules, the
torch.distributed benchmark on NCCL, and nccl-tests built by Kiln and judged by
`kiln judge nccl-tests`."""

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kiln import gpu_models
from kiln.roles import nccl_tests
from kiln.validation import burn_in_samples, nccl_judge, profiles
from kiln.validation import nccl_parse as nccl_output
from kiln.validation.burn_in_judge import Limits, judge_round
from kiln.validation.verdicts import Verdict
from kiln_node import cuda_toolchain
from tests.gpu import machine as gm
from tests.gpu.conftest import run_program

BURN_SECONDS = float(os.environ.get("KILN_GPU_BURN_SECONDS", "120"))
BURN_INTERVAL_S = 10.0


def profile_for(model: str) -> profiles.Profile | None:
    """The shipped profile of this GPU model (h100-..., h200-...), if Kiln has one."""
    short = re.sub(r"^nvidia\s+", "", model, flags=re.I).split()[0].split("-")[0].lower()
    names = [name for name in profiles.shipped() if name.split("-")[0] == short]
    return profiles.load(names[0]) if names else None


def test_burn_in_stress_judged(gpu_machine, record, summary, tmp_path):
    """kiln-burn-stress on every GPU, judged by the burn-in rules with the profile's floor
    for this GPU model; nvidia-smi's clock-event reasons read as its own mask says."""
    out = tmp_path / "burn.json"
    done = run_program(
        "burn",
        "--seconds",
        f"{BURN_SECONDS:g}",
        "--interval",
        f"{BURN_INTERVAL_S:g}",
        "--out",
        str(out),
        timeout=BURN_SECONDS + 300,
    )
    data = json.loads(
        record.write(
            "burn_stress.json", out.read_text(), f"kiln-burn-stress --seconds {BURN_SECONDS:g}"
        )
    )
    assert (done.returncode, data["error"]) == (0, ""), done.stderr
    record.write(
        "burn-samples.csv",
        data["samples"],
        "nvidia-smi --query-gpu=<kiln-burn-stress's SAMPLE_FIELDS> --format=csv -lms=10000",
    )
    node = burn_in_samples.read_node("gpu-test-host", data)
    assert sorted(node.devices) == [g["index"] for g in gpu_machine.gpus]
    profile = profile_for(gpu_machine.model)
    settings = profile.burn_in if profile else None
    limits = (
        Limits.from_profile(settings)
        if settings
        else Limits(drop_percent=10, tflops_min=0, temperature_max_c=85, throttle_percent=5)
    )
    judgements = judge_round(0, {"gpu-test-host": node}, {}, limits)
    assert [
        (j.subject, j.verdict, j.reason) for j in judgements if j.verdict is not Verdict.PASS
    ] == []
    peak = gpu_models.model(gpu_machine.model)
    for index, device in sorted(node.devices.items()):
        assert device.tflops and device.tflops >= limits.tflops_min
        if peak:
            assert device.tflops <= peak.bf16_tflops  # a figure above the datasheet is wrong
        summary.append(
            f"- burn-in, GPU {index}: {device.tflops:g} TFLOP/s bf16 (median of "
            f"{len(device.intervals)} intervals of {BURN_INTERVAL_S:g} s; floor "
            f"{limits.tflops_min:g} from profile {profile.name if profile else '(none)'})"
        )
    # The reasons Kiln parsed from each sample are the bits of the sample's own mask.
    parsed = burn_in_samples.parse_samples(data["samples"], data["started_local"])
    masks = {}
    for row in burn_in_samples.rows(data["samples"]):
        mask = row.get("clocks_event_reasons.active", "")
        if re.fullmatch(r"0x[0-9a-fA-F]+", mask) and re.match(r"\d{4}/", row.get("timestamp", "")):
            masks.setdefault(row.get("index", "0"), []).append(int(mask, 16))
    assert {i: [s.throttles for s in found] for i, found in parsed.items()} == {
        i: [[r for r in burn_in_samples.THROTTLES if m & gm.EVENT_BITS[r]] for m in found]
        for i, found in masks.items()
    }
    assert masks


def test_torch_bench_on_nccl(gpu_machine, record, summary, tmp_path):
    """Every GPU the machine has, one rank each; one GPU: one rank is refused, as
    docs/validation.md says (no link is crossed)."""
    count = len(gpu_machine.gpus)
    if count == 1:
        done = run_program("torch_bench", "--backend", "nccl", timeout=120)
        said = done.stderr.strip().splitlines()  # torch may warn on import first
        assert (done.returncode, done.stdout, said[-1:]) == (
            2,
            "",
            [
                "kiln-torch-bench: 1 rank: no link is crossed; nothing to measure"
                " (run 2 or more ranks)"
            ],
        )
        summary.append("- kiln-torch-bench: one GPU, one rank refused (exit 2), as documented.")
        return
    out = tmp_path / "torch.json"
    env = {"WORLD_SIZE": str(count), "MASTER_ADDR": "127.0.0.1"}
    ranks = [
        subprocess.Popen(
            [
                sys.executable,
                str(gm.REPO / "roles/validate/files/kiln-torch-bench"),
                "--backend",
                "nccl",
                "--max-bytes",
                str(1 << 30),
                "--out",
                str(out),
            ],
            env={
                **os.environ,
                **env,
                "RANK": str(r),
                "LOCAL_RANK": str(r),
                "PYTHONPATH": os.pathsep.join(
                    filter(None, (str(gm.REPO / "node_library"), os.environ.get("PYTHONPATH")))
                ),
            },
        )
        for r in range(count)
    ]
    assert [p.wait(timeout=600) for p in ranks] == [0] * count
    document = json.loads(record.write("torch_bench.json", out.read_text(), "kiln-torch-bench"))
    assert (document["ranks"], document["backend"]) == (count, "nccl")
    largest = [r for r in document["results"] if r["size_bytes"] >= 1 << 29]
    assert largest and all(r["busbw_gbps"] > 0 for r in largest)
    for r in largest:
        summary.append(
            f"- kiln-torch-bench {r['collective']} {count} GPUs, {r['size_bytes']} B: busbw "
            f"{r['busbw_gbps']} GB/s, algbw {r['algbw_gbps']} GB/s"
        )


def test_nccl_tests_built_and_judged(gpu_machine, kiln_dependencies, record, summary, tmp_path):
    """nccl-tests built as the nccl_tests role builds it (kiln.roles.nccl_tests), run on every
    GPU and judged by `kiln judge nccl-tests`."""
    tarball = os.environ.get("KILN_NCCL_TESTS_TARBALL", "")
    sha256 = os.environ.get("KILN_NCCL_TESTS_SHA256", "")
    if not (tarball and sha256):
        pytest.skip("KILN_NCCL_TESTS_TARBALL and KILN_NCCL_TESTS_SHA256 are not set")
    data = Path(tarball).read_bytes()
    assert hashlib.sha256(data).hexdigest() == sha256, f"{tarball}: sha256 differs from the pin"
    version = re.search(r"(\d+\.\d+\.\d+)\.tar\.gz$", tarball)
    assert version, f"{tarball}: no release number in the name"
    toolchain = cuda_toolchain.find(os.environ.get("KILN_GPU_CUDA_HOME", ""))
    if not toolchain["cuda"] or not toolchain["nccl"]:
        pytest.skip(f"no CUDA toolkit or no NCCL here: {toolchain}")
    # One process drives every GPU (-g N): no MPI needed on one machine.
    toolchain["mpi"] = None
    with tarfile.open(tarball) as archive:
        archive.extractall(tmp_path / "src", filter="data")
    source = nccl_tests.source(version.group(1), sha256, nccl_tests.DEFAULT_BASE_URL)
    build = str(tmp_path / "build")
    archs = nccl_tests.archs([], [g["compute_cap"] for g in gpu_machine.gpus])
    command = nccl_tests.make_command(
        str(tmp_path / "src" / source["top"]), build, toolchain, archs, os.cpu_count() or 1
    )
    for link in (command["nccl_link"] or {}).values():
        Path(link["path"]).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(link["src"], link["path"])
    made = subprocess.run(
        command["argv"],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, **command["env"]},
    )
    assert made.returncode == 0, (made.stdout + made.stderr)[-3000:]
    assert [Path(p).name for p in nccl_tests.programs(build) if os.access(p, os.X_OK)] == [
        f"{name}_perf" for name in nccl_tests.PROGRAMS
    ]
    count = len(gpu_machine.gpus)
    argv = [f"{build}/bin/all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", str(count)]
    # No LD_LIBRARY_PATH: the build's run path finds NCCL and the CUDA runtime.
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    text = record.write(
        "all_reduce_perf.txt", ran.stdout, " ".join(["<build>/bin/all_reduce_perf", *argv[1:]])
    )
    runs = nccl_output.parse_text(text, "all_reduce_perf.txt")
    assert [(r.collective, r.ranks, r.finished, r.out_of_bounds) for r in runs] == [
        ("all_reduce", count, True, 0)
    ]
    assert max(row.size for row in runs[0].rows) == 1 << 30
    assert all(row.wrong() == 0 for row in runs[0].rows)
    judged = subprocess.run(
        [
            sys.executable,
            "-m",
            "kiln",
            "judge",
            "nccl-tests",
            "--json",
            str(record.directory / "all_reduce_perf.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, (str(gm.REPO / "node_library"), os.environ.get("PYTHONPATH")))
            ),
            "KILN_STATE_DIR": str(tmp_path / "state"),
        },
    )
    said = (judged.stderr.strip().splitlines() or [""])[-1]
    assert judged.stdout.strip(), f"kiln judge nccl-tests: exit {judged.returncode}: {said}"
    results = json.loads(judged.stdout)["results"]
    expected = "skip" if count == 1 else "pass"
    assert (judged.returncode, [r["verdict"] for r in results]) == (0, [expected]), judged.stderr
    if count == 1:
        assert results[0]["notes"] == [nccl_judge.ONE_RANK]
    largest = runs[0].rows[-1]
    summary.append(
        f"- nccl-tests {version.group(1)} all_reduce_perf -g {count}, 1 GiB: busbw "
        f"{largest.best_busbw():g} GB/s, algbw "
        f"{max(m.algbw for m in (largest.out_of_place, largest.in_place) if m):g} GB/s "
        f"(NCCL {toolchain['nccl']['version']}, CUDA {toolchain['cuda']['version']}, "
        f"archs {','.join(archs)}); `kiln judge nccl-tests`: {results[0]['verdict']}"
    )

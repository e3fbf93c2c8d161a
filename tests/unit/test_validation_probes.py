"""The node-side scripts, run for real on this host: the probe's package tree, cold
import and small-file test, and Kiln's torch benchmark with two gloo ranks."""

import argparse
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kiln.validation import node_probe, torch_bench

BENCH = Path(torch_bench.__file__)


def test_tree_is_written_once_and_imports(tmp_path):
    args = types.SimpleNamespace(root=str(tmp_path), modules=250)
    assert node_probe.tree(args)["written"] is True
    assert node_probe.tree(args)["written"] is False  # the marker makes it idempotent
    modules = list((tmp_path / node_probe.TREE_PACKAGE).rglob("m*.py"))
    assert len(modules) == 250
    result = subprocess.run(
        [
            sys.executable,
            "-B",
            "-c",
            "import kiln_cold_import.all as a; print(a.sub0002.m049.value())",
        ],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "249"


def test_cold_import_times_the_import_and_reports_a_missing_module(tmp_path, monkeypatch):
    node_probe.tree(types.SimpleNamespace(root=str(tmp_path), modules=120))
    monkeypatch.setattr(node_probe, "MOUNT_CHECK", "/nonexistent/kiln-mount-check")
    config = {
        "module": "kiln_cold_import.all",
        "root": str(tmp_path),
        "python": sys.executable,
        "needs_mount": "",
        "mount_timeout_s": 1,
        "timeout_s": 60,
        "start_at": 0,
    }
    done = node_probe.cold_import(config)
    assert done["seconds"] > 0 and done["module"] == "kiln_cold_import.all"
    missing = node_probe.cold_import({**config, "module": "no_such_package"})
    assert missing["error"].startswith("import no_such_package failed: ModuleNotFoundError")
    # a mount the node does not have is reported, and nothing is imported from it
    unmounted = node_probe.cold_import({**config, "needs_mount": "/shared"})
    assert unmounted["error"] == "/shared is not mounted"


def test_small_files_counts_create_stat_delete(tmp_path):
    done = node_probe.small_files(tmp_path, 200)
    assert done["files"] == 200 and done["ops"] == 600 and done["seconds"] > 0
    assert not (tmp_path / "meta").exists()


def test_storage_never_benchmarks_a_mount_the_check_did_not_pass(tmp_path, monkeypatch):
    check = tmp_path / "kiln-mount-check"
    broken = {
        "name": "shared",
        "path": str(tmp_path),
        "status": "FAIL",
        "reason": "not mounted after access",
    }
    check.write_text(f"#!/bin/sh\necho '{json.dumps({'host': 'n', 'mounts': [broken]})}'\nexit 1\n")
    check.chmod(0o755)
    monkeypatch.setattr(node_probe, "MOUNT_CHECK", str(check))
    params = {"mount_timeout_s": 1}
    result = node_probe.storage({"params": params, "scratch": []})
    assert result["targets"] == []
    assert result["mount_check"]["mounts"][0]["status"] == "FAIL"
    assert list(tmp_path.iterdir()) == [check]  # nothing written on the bare mount point


def test_bus_factors_match_nccl_tests():
    assert torch_bench.bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert torch_bench.bus_factor("all_gather", 8) == pytest.approx(0.875)
    assert torch_bench.bus_factor("reduce_scatter", 2) == pytest.approx(0.5)
    assert torch_bench.sizes(1024, 8192) == [1024, 2048, 4096, 8192]


def test_torch_benchmark_two_gloo_ranks(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "bench.json"
    argv = [
        sys.executable,
        "-W",
        "ignore",
        str(BENCH),
        "--backend",
        "gloo",
        "--min-bytes",
        "4096",
        "--max-bytes",
        "65536",
        "--warmup",
        "1",
        "--iters",
        "3",
        "--master-port",
        "29641",
        "--out",
        str(out),
    ]
    ranks = [
        subprocess.Popen(
            argv,
            env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    for rank in ranks:
        _, err = rank.communicate(timeout=180)
        assert rank.returncode == 0, err
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "kiln-torch-bench" and doc["ranks"] == 2 and doc["backend"] == "gloo"
    rows = doc["results"]
    assert {r["collective"] for r in rows} == {"all_reduce", "all_gather", "reduce_scatter"}
    assert [r["size_bytes"] for r in rows if r["collective"] == "all_reduce"] == [
        4096,
        8192,
        16384,
        32768,
        65536,
    ]
    for r in rows:
        # algbw = bytes / time; busbw = algbw x the collective's factor for 2 ranks
        algbw = r["size_bytes"] / (r["time_us"] / 1e6) / 1e9
        assert r["algbw_gbps"] == pytest.approx(algbw, rel=0.01)
        factor = 1.0 if r["collective"] == "all_reduce" else 0.5
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * factor, rel=1e-3)


@pytest.mark.parametrize(
    "env",
    [{"WORLD_SIZE": "1"}, {"SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "1(x4)"}],
    ids=["world of one", "one rank per node, --per-node"],
)
def test_torch_benchmark_refuses_one_rank(tmp_path, env):
    pytest.importorskip("torch")
    argv = [sys.executable, "-W", "ignore", str(BENCH), "--backend", "gloo"]
    argv += ["--per-node"] if "SLURM_NTASKS" in env else []
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "WORLD_", "RANK"))}
    done = subprocess.run(
        [*argv, "--out", str(tmp_path / "x.json")],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "torch_bench: 1 rank: no link is crossed; nothing to measure (run 2 or more ranks)"
    ]
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("ranks_per_node", [1, 8])
def test_nccl_tests_never_schedules_a_one_rank_run(monkeypatch, ranks_per_node):
    launched = []

    def fake_run(argv, timeout, stdin=None):
        launched.append(argv)
        return {"rc": 0, "stdout": "", "stderr": ""}

    monkeypatch.setattr(node_probe, "run", fake_run)
    args = argparse.Namespace(
        nodes="a,b", reservation="r", bin_dir="/x", collectives="all_reduce", time=1,
        ranks_per_node=ranks_per_node, min_bytes=1, max_bytes=2, container=[],
    )  # fmt: skip
    node_probe.nccl_tests(args)
    nodes = sorted(next(a for a in argv if a.startswith("--nodes=")) for argv in launched)
    if ranks_per_node == 1:
        assert nodes == ["--nodes=2"]  # only across the nodes: 2 ranks
    else:
        assert nodes == ["--nodes=1", "--nodes=1", "--nodes=2"]

"""`kiln health` through the real `kiln` process and ansible-runner, against this
machine: each "node" is a local connection running the real kiln-health with its own
configuration (no Slurm here, so the check runs in its report-only mode). The lab e2e
runs it on real nodes under Slurm."""

import json
import os
import sys
from pathlib import Path

from kiln.errors import ExitCode
from tests.conftest import LOCAL, run_kiln
from tests.node_scripts import health


def node(tmp_path, name: str, config: dict) -> dict:
    """Host vars making NAME run kiln-health with CONFIG."""
    (tmp_path / f"{name}.json").write_text(json.dumps({"munge": False, "slurm": False, **config}))
    wrapper = tmp_path / f"{name}-kiln-health"
    wrapper.write_text(
        f"#!/bin/sh\nexec {sys.executable} {health.__file__} --config {tmp_path / name}.json "
        f'--node {name} "$@"\n'
    )
    wrapper.chmod(0o755)
    return {**LOCAL, "health_program": str(wrapper)}


def test_a_healthy_and_a_failing_node(local_inventory, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 15\n")
    smi.chmod(0o755)
    inv = local_inventory(
        {
            "local-c1": node(tmp_path, "local-c1", {"free_space": [{"path": "/", "min_mb": 1}]}),
            "local-c2": node(
                tmp_path,
                "local-c2",
                {
                    "gpus": 8,
                    "nvidia_smi": str(smi),
                    "free_space": [{"path": "/", "min_mb": 10**12}],
                },
            ),
        },
    )
    shown = run_kiln("health", "-i", inv, "--no-slurm")
    assert shown.returncode == ExitCode.VALIDATION_FAILED, shown.stderr
    table = shown.stdout[shown.stdout.index("\nnode ") + 1 :].splitlines()
    assert table[:3] == [
        "node     status free_space gpu_smi",
        "local-c1 OK     OK         -",
        "local-c2 FAIL   FAIL       FAIL",
    ]
    assert table[3] == "local-c2: FAIL gpu_smi: nvidia-smi: a GPU has fallen off the bus"
    assert table[4].startswith("local-c2: FAIL free_space: / ")

    as_json = run_kiln("health", "-i", inv, "--no-slurm", "--json", "--nodes", "local-c1")
    assert as_json.returncode == ExitCode.OK, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["nodes"] == {
        "local-c1": {
            "status": "OK",
            "results": [
                {"check": "free_space", "status": "OK", "reason": "spool and cache paths have room"}
            ],
            "action": "",
            "error": "",
        }
    }
    assert data["run"]


def test_a_node_whose_check_cannot_run_exits_3(local_inventory, tmp_path):
    broken = node(tmp_path, "local-c1", {})
    (tmp_path / "local-c1.json").write_text("{not json")
    inv = local_inventory({"local-c1": broken})
    shown = run_kiln("health", "-i", inv, "--no-slurm", "--json")
    assert shown.returncode == ExitCode.NOT_CHECKED, shown.stderr
    found = json.loads(shown.stdout)["nodes"]["local-c1"]
    assert found["status"] == "ERROR" and found["results"] == []
    assert "Run kiln-health" in found["error"]


def test_bad_input(local_inventory):
    inv = local_inventory({"local-c1": LOCAL})
    for args, message in [
        (["--nodes", "gpu[3-1]"], "kiln: error: --nodes 'gpu[3-1]': "),
        (["--nodes", "gpu1"], "kiln: error: gpu1 not in the inventory's slurm_compute (local-c1)"),
    ]:
        shown = run_kiln("health", "-i", inv, *args)
        assert shown.returncode == ExitCode.BAD_INPUT
        assert shown.stderr.startswith(message) and len(shown.stderr.splitlines()) == 1


def test_the_schedule_and_its_runs_enter_the_history(local_inventory, tmp_path, state_dir):
    # The controller is this machine, which has no systemd: a systemctl TEST DOUBLE on
    # PATH prints what systemd 252 prints for the installed timer (the real timer is
    # tested in molecule/slurm). The run record is kiln-health-active's own format.
    from tests.unit.test_health_schedule import RECORD, SHOWN

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "shown.txt").write_text(SHOWN)
    (bin_dir / "systemctl").write_text(f"#!/bin/sh\ncat {tmp_path / 'shown.txt'}\n")
    (bin_dir / "systemctl").chmod(0o755)
    results = tmp_path / "results"
    results.mkdir()
    (results / "active-20261122T030004Z.json").write_text(json.dumps(RECORD))
    inv = local_inventory({"local-c1": LOCAL})
    (Path(inv) / "group_vars").mkdir()
    (Path(inv) / "group_vars" / "all.yml").write_text(f"health_active_results_dir: {results}\n")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    shown = run_kiln("health", "-i", inv, "--schedule", env=env)
    assert shown.returncode == ExitCode.OK, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[
        lines.index("active check: kiln-health-active.timer on local-ctl (Sun *-*-* 03:00:00)") :
    ] == [
        "active check: kiln-health-active.timer on local-ctl (Sun *-*-* 03:00:00)",
        "next run: Sun 2026-11-29 03:00:00 UTC",
        "last run: 2026-11-22T03:00:04+00:00: 3 tested, 2 failed, 1 skipped "
        "(kiln report show 20261122-030004-health-active)",
        "  gpu001 FAIL: FAIL dcgm_diag: level 2 pcie GPU 0: replays",
        "  gpu001 drained: kiln-active: dcgm_diag: level 2 pcie GPU 0: replays",
        "  gpu004 WARN: WARN free_space: /tmp not found",
        "  gpu004 resumed",
        "  gpu005 ERROR: no result",
        "  gpu002 skipped: allocated: not idle",
        "1 run(s) added to the report history (kiln report list)",
    ]
    listed = run_kiln("report", "list")
    assert "20261122-030004-health-active" in listed.stdout

    again = run_kiln("health", "-i", inv, "--schedule", "--json", env=env)
    assert again.returncode == ExitCode.OK, again.stderr
    data = json.loads(again.stdout)
    assert data["imported"] == []
    assert data["timer"] == {
        "load_state": "loaded",
        "active_state": "active",
        "calendar": "Sun *-*-* 03:00:00",
        "next_run": "Sun 2026-11-29 03:00:00 UTC",
        "last_run": "Sun 2026-11-22 03:00:00 UTC",
        "installed": True,
    }
    assert [r["report"] for r in data["runs"]] == ["20261122-030004-health-active"]


def test_a_controller_that_cannot_be_read_exits_4(local_inventory, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    (bin_dir / "systemctl").chmod(0o755)
    inv = local_inventory({"local-c1": LOCAL})
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    shown = run_kiln("health", "-i", inv, "--schedule", env=env)
    assert shown.returncode == ExitCode.HOSTS_FAILED
    assert shown.stderr.startswith(
        "kiln: error: local-ctl: the active check's timer could not be read: Read the timer: "
    )
    assert len(shown.stderr.strip().splitlines()) == 1

"""`kiln repair status|history|reset` against a local controller: the records are
kiln-repair's own files (written with kiln_node.repair_records, as the program writes
them), Slurm's node states the lab's real `scontrol --oneliner show node` lines printed
by an scontrol TEST DOUBLE on PATH (this machine has no Slurm)."""

import json
import os
from pathlib import Path

from kiln.errors import ExitCode
from kiln_node import repair_records
from kiln_node.repair_records import Entry
from tests.conftest import LOCAL, run_kiln
from tests.unit.test_repair_program import DISK, OPERATOR, node

T0 = 1_795_000_000.0  # 2026-11-18T11:06:40+00:00


def controller(tmp_path, local_inventory, breaker: bool = True):
    state = tmp_path / "repair"
    state.mkdir()
    history = str(state / "history.jsonl")
    for entry in (
        Entry("c1", T0, "mount", "restart-mounts", "done"),
        Entry("c1", T0 + 20, "mount", "recheck", "passed"),
        Entry("c1", T0 + 21, "mount", "return", "done"),
        Entry("c2", T0 + 60, "disk-full", "recheck", "failed", detail="free_space: 12 MiB free"),
    ):
        repair_records.append_history(history, entry)
    if breaker:
        repair_records.open_breaker(str(state / "breaker.json"), T0 + 90, "2 of 3 nodes out")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lines = [node("c1"), node("c2", "IDLE+DRAIN", DISK), node("c3", "IDLE+DRAIN", OPERATOR)]
    (tmp_path / "nodes.txt").write_text("\n".join(lines) + "\n")
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\ncat {tmp_path / 'nodes.txt'}\n")
    (bin_dir / "scontrol").chmod(0o755)
    inv = local_inventory({"c1": LOCAL, "c2": LOCAL, "c3": LOCAL})
    (Path(inv) / "group_vars").mkdir()
    (Path(inv) / "group_vars" / "all.yml").write_text(f"repair_state_dir: {state}\n")
    return inv, {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, state


def test_status_history_and_reset(local_inventory, tmp_path, state_dir):
    inv, env, state = controller(tmp_path, local_inventory)
    shown = run_kiln("repair", "status", "-i", inv, env=env)
    assert shown.returncode == ExitCode.OK, shown.stderr
    lines = shown.stdout.splitlines()
    start = lines.index("breaker: OPEN since 2026-11-18T11:08:10+00:00: 2 of 3 nodes out")
    assert lines[start:] == [
        "breaker: OPEN since 2026-11-18T11:08:10+00:00: 2 of 3 nodes out",
        f"c2 IDLE+DRAIN: recheck failed at 2026-11-18T11:07:40+00:00 ({DISK})",
    ]
    as_json = json.loads(run_kiln("repair", "status", "-i", inv, "--json", env=env).stdout)
    assert as_json["breaker"] == {"open": True, "since": T0 + 90, "reason": "2 of 3 nodes out"}
    assert [n["node"] for n in as_json["nodes"]] == ["c2"]

    history = run_kiln("repair", "history", "c1", "-i", inv, env=env)
    assert history.returncode == ExitCode.OK, history.stderr
    assert history.stdout.splitlines()[-3:] == [
        "2026-11-18T11:06:40+00:00 c1 mount restart-mounts done",
        "2026-11-18T11:07:00+00:00 c1 mount recheck passed",
        "2026-11-18T11:07:01+00:00 c1 mount return done",
    ]

    reset = run_kiln("repair", "reset", "-i", inv, env=env)
    assert reset.returncode == ExitCode.OK, reset.stderr
    assert reset.stdout.splitlines()[-1] == (
        "closed the breaker (was OPEN since 2026-11-18T11:08:10+00:00: 2 of 3 nodes out)"
    )
    assert not (state / "breaker.json").exists()
    again = run_kiln("repair", "reset", "-i", inv, env=env)
    assert again.stdout.splitlines()[-1] == "the breaker was closed already"


def test_bad_input_and_unreadable_records(local_inventory, tmp_path):
    inv, env, state = controller(tmp_path, local_inventory, breaker=False)
    unknown = run_kiln("repair", "history", "gpu9", "-i", inv, env=env)
    assert (unknown.returncode, unknown.stderr) == (
        ExitCode.BAD_INPUT,
        f"kiln: error: gpu9: not a host of {inv}\n",
    )
    (state / "history.jsonl").write_text("not json\n")
    broken = run_kiln("repair", "status", "-i", inv, env=env)
    assert broken.returncode == ExitCode.HOSTS_FAILED
    assert broken.stderr == (
        "kiln: error: repair history local-ctl:repair_state_dir/history.jsonl line 1: not a "
        "record (Expecting value: line 1 column 1 (char 0))\n"
    )

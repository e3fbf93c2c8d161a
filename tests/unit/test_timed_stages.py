"""scripts/timed-stages.sh, as `make test` runs it: stages joined by + run side by side,
each one's failure is reported, the run fails, and the side stage's output is printed
whole after the group. Stages make has no rule for fail at once, as a broken stage
would."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST, SIDE = "kiln-test-no-such-stage-a", "kiln-test-no-such-stage-b"


def test_stages_side_by_side_each_report_a_failure_and_the_run_fails():
    done = subprocess.run(
        ["bash", "scripts/timed-stages.sh", f"{FIRST}+{SIDE}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    log = f"build/logs/{SIDE}.log"
    assert lines[0] == f"== stage {SIDE} runs beside {FIRST}; its output: {log}"
    assert f"== stage {FIRST} failed (exit 2)" in lines
    assert f"== stage {SIDE} failed (exit 2)" in lines
    # The first stage's own output came as it ran; the side stage's after the group.
    assert f"No rule to make target '{FIRST}'" in done.stderr
    shown = lines.index(f"== stage {SIDE}'s output ({log})")
    assert f"No rule to make target '{SIDE}'" in lines[shown + 1]
    table = lines[lines.index("== time per stage") + 1 :]
    assert sorted(row.split()[0] for row in table[:2]) == sorted([FIRST, SIDE])
    assert table[2].split()[0] == f"{FIRST}+{SIDE}"
    assert len(table) == 3

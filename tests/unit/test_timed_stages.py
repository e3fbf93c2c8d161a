"""scripts/timed-stages.sh, as `make test` runs it: stages joined by + run side by side,
each one's failure is reported, the run fails, the side stage's output is printed whole
after the group, and the last lines name the failed tests (CI shows only the end of a
run's output). Stages make has no rule for fail at once, as a broken stage would; a
stage from an extra makefile (MAKEFILES) fails as pytest does."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST, SIDE = "kiln-test-failing-pytest", "kiln-test-no-such-stage"
PYTEST_END = [
    "=========================== short test summary info ============================",
    "FAILED tests/e2e/test_lab.py::TestRepair::test_loop - AssertionError: drained",
    "ERROR tests/e2e/test_lab.py::TestImage::test_build - TimeoutError",
    "============= 1 failed, 37 passed, 1 error in 3508.00s (0:58:28) ==============",
]


def timed_stages(group: str, makefile: Path) -> subprocess.CompletedProcess:
    """The script on GROUP, with MAKEFILE's targets as stages; the stages' logs beside
    MAKEFILE (logs/), out of the checkout."""
    return subprocess.run(
        ["bash", "scripts/timed-stages.sh", group],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "MAKEFILES": str(makefile),
            "KILN_STAGE_LOGS": str(makefile.parent / "logs"),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_stages_side_by_side_each_report_a_failure_and_the_end_names_the_tests(tmp_path):
    makefile = tmp_path / "extra.mk"
    echoes = "".join(f"\t@echo '{line}'\n" for line in PYTEST_END)
    makefile.write_text(f"{FIRST}:\n\t@echo 'collected 39 items'\n{echoes}\t@exit 1\n")
    done = timed_stages(f"{FIRST}+{SIDE}", makefile)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    logs = tmp_path / "logs"
    side_log, first_log = f"{logs}/{SIDE}.log", f"{logs}/{FIRST}.log"
    assert lines[0] == f"== stage {SIDE} runs beside {FIRST}; its output: {side_log}"
    # The first stage's own output came as it ran (and is kept); the side stage's after the group.
    own = [line for line in lines if not line.startswith("== ")]
    assert own[:5] == ["collected 39 items", *PYTEST_END]
    assert Path(first_log).read_text().splitlines()[:5] == ["collected 39 items", *PYTEST_END]
    assert f"== stage {FIRST} failed (exit 2)" in lines
    assert f"== stage {SIDE} failed (exit 2)" in lines
    shown = lines.index(f"== stage {SIDE}'s output ({side_log})")
    assert f"No rule to make target '{SIDE}'" in lines[shown + 1]
    table = lines.index("== time per stage")
    rows = lines[table + 1 : table + 4]
    assert sorted(row.split()[0] for row in rows[:2]) == sorted([FIRST, SIDE])
    assert rows[2].split()[0] == f"{FIRST}+{SIDE}"
    # What failed, last, in the order the stages failed; a stage's lines after its name.
    end = "\n".join(lines[table + 4 :])
    assert end.count("== stage") == 2
    assert f"== stage {SIDE} failed; from {side_log}:" in end
    assert f"== stage {FIRST} failed; from {first_log}:\n{PYTEST_END[1]}\n{PYTEST_END[2]}" in end


def test_a_lane_runs_its_stages_one_after_another_beside_the_first(tmp_path):
    """`e2e+molecule,e2e-newuser`: the second lane's stages in order, the later one run
    though the earlier failed, each timed and its output printed after the group."""
    makefile = tmp_path / "extra.mk"
    first, earlier, later = "kiln-test-lane-first", "kiln-test-lane-earlier", "kiln-test-lane-later"
    order, logs = tmp_path / "order", tmp_path / "logs"
    makefile.write_text(
        # The first lane ends after the other, so that the rows' order is known.
        f"{first}:\n\t@until grep -qs {later} {order}; do sleep 0.1; done\n"
        f"\t@echo {first} >> {order}\n"
        f"{earlier}:\n\t@echo {earlier} >> {order}; echo 'earlier ran'; exit 1\n"
        f"{later}:\n\t@echo {later} >> {order}; echo 'later ran'\n"
    )
    done = timed_stages(f"{first}+{earlier},{later}", makefile)
    assert done.returncode == 2, done.stdout + done.stderr
    assert order.read_text().split() == [earlier, later, first]
    lines = done.stdout.splitlines()
    assert lines[:2] == [
        f"== stage {earlier} runs beside {first}; its output: {logs}/{earlier}.log",
        f"== stage {later} runs beside {first}; its output: {logs}/{later}.log",
    ]
    after = lines[lines.index(f"== stage {earlier}'s output ({logs}/{earlier}.log)") :]
    assert after[:4] == [
        f"== stage {earlier}'s output ({logs}/{earlier}.log)",
        "earlier ran",
        "make: *** [" + str(makefile) + f":5: {earlier}] Error 1",
        f"== stage {later}'s output ({logs}/{later}.log)",
    ]
    assert after[4] == "later ran"
    table = lines.index("== time per stage")
    assert [row.split()[0] for row in lines[table + 1 : table + 5]] == [
        earlier,
        later,
        first,
        f"{first}+{earlier},{later}",
    ]
    assert lines[table + 5 :] == [f"== stage {earlier} failed; from {logs}/{earlier}.log:"]

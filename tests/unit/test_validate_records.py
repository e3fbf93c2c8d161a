"""The run's records as kiln_node.records writes them on the controller and the nodes
(through kiln-validate-probe record, as the validate role runs it), read back by the records
of kiln.validation.results that kiln.validation.collect judges."""

import json
import os
import stat
import subprocess
import sys

from kiln.validation import results as layout
from kiln.validation import suites
from kiln_node import records
from tests.conftest import REPO
from tests.unit.test_validate_suites import HOSTVARS, SETTINGS, VALIDATE

PROBE = REPO / "roles" / "validate" / "files" / "kiln-validate-probe"
# unmunge's output for a good credential (munge 0.5.15), its STATUS line among others.
UNMUNGE_OK = """STATUS:          Success (0)
ENCODE_HOST:     kiln-controller (10.89.0.2)
ENCODE_TIME:     2026-11-29 00:10:01 +0000 (1795914601)
DECODE_TIME:     2026-11-29 00:10:02 +0000 (1795914602)
TTL:             300
CIPHER:          aes128 (4)
MAC:             sha256 (5)
ZIP:             none (0)
UID:             root (0)
GID:             root (0)
LENGTH:          0
"""


def node_probe(*argv: str, stdin: str = "", env: dict | None = None):
    """kiln-validate-probe as the role starts it, the node library from this checkout."""
    return subprocess.run(
        [sys.executable, str(PROBE), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "KILN_NODE_LIBRARY": str(REPO / "node_library"), **(env or {})},
        check=False,
    )


def read(path) -> dict:
    return json.loads(path.read_text())


def test_a_record_is_written_private_and_whole_and_merged_on_request(tmp_path):
    out = tmp_path / "run-controller" / "storage_steps.json"
    first = suites.first_records({})["storage_steps"]
    done = node_probe("record", "write", "--out", str(out), stdin=json.dumps(first))
    assert (done.returncode, done.stderr) == (0, "")
    assert read(out) == first
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert stat.S_IMODE(out.parent.stat().st_mode) == 0o700
    assert [p.name for p in out.parent.iterdir()] == ["storage_steps.json"]  # no partial left
    node_probe("record", "note", "--out", str(out), "--name", "cold_import_skipped", "--", "why")
    assert read(out) == {**first, "cold_import_skipped": "why"}
    # write replaces, unless asked to merge
    node_probe("record", "write", "--out", str(out), stdin='{"storage": {"rc": 0}}')
    assert read(out) == {"storage": {"rc": 0}}
    node_probe("record", "write", "--merge", "--out", str(out), stdin='{"cold_import": {}}')
    assert read(out) == {"storage": {"rc": 0}, "cold_import": {}}


def test_each_step_adds_how_it_ended_and_the_report_reads_it(tmp_path):
    out = tmp_path / "collectives_steps.json"
    notes = {"torch_skipped": "", "nccl_tests_skipped": "", "single_node_skipped": ""}
    records.write(str(out), suites.first_records({**notes, "unmeasured": {}})["collectives_steps"])
    failing = ["sh", "-c", "echo 'srun: error: gpu2: task 1: Exited with exit code 3' >&2; exit 3"]
    node_probe("record", "step", "--out", str(out), "--name", "multi_node", "--", *failing)
    written = layout.CollectivesSteps.from_json(read(out))
    assert written.step("single_node").problem() == "the step did not run"
    assert written.step("multi_node").problem() == (
        "srun exited 3: srun: error: gpu2: task 1: Exited with exit code 3"
    )
    # A long stderr keeps its end, where srun says why.
    noisy = ["sh", "-c", "yes x | head -c 5000 >&2; echo last words >&2; exit 1"]
    node_probe("record", "step", "--out", str(out), "--name", "single_node", "--", *noisy)
    kept = read(out)["single_node"]["stderr"]
    assert (len(kept), kept.endswith("x\nlast words")) == (records.STDERR_TAIL, True)


def test_a_launchers_output_is_the_record_with_what_the_role_adds(tmp_path):
    out = tmp_path / "mpi.json"
    printed = {"all": {"rc": 0, "stdout": "ok"}, "alone": {}}
    launcher = ["sh", "-c", f"echo '{json.dumps(printed)}'; echo 'srun: warning' >&2"]
    done = node_probe(
        "record", "run", "--out", str(out), "--json", '{"unbuilt": ["gpu3"]}', "--", *launcher
    )
    assert (done.returncode, done.stderr) == (0, "srun: warning")
    assert layout.MpiRun.from_json(read(out)) == layout.MpiRun(
        all={"rc": 0, "stdout": "ok"}, alone={}, unbuilt=["gpu3"]
    )
    # A launcher that fails fails its task with its status, and prints no record.
    missing = tmp_path / "srun.json"
    done = node_probe("record", "run", "--out", str(missing), "--", "sh", "-c", "exit 4")
    assert (done.returncode, missing.exists()) == (4, False)


def test_no_mpi_check_on_any_node_is_recorded_as_the_reason(tmp_path):
    on = SETTINGS["paths"]["on_controller"]
    here = {**SETTINGS["paths"], "on_controller": {**on, "mpi": str(tmp_path / "mpi.json")}}
    shared = VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu3"], {**SETTINGS, "paths": here})
    argv = shared["commands"]["mpi_skipped"]
    assert shared["commands"]["mpi_nodes"] == []
    done = node_probe(*argv[2:])
    assert done.returncode == 0
    assert layout.MpiRun.from_json(read(tmp_path / "mpi.json")).skipped == suites.NO_MPI_CHECK


def test_munge_records_unmungess_status_line_or_its_error(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    unmunge = bin_dir / "unmunge"
    # A stand-in for munge's unmunge: reads the credential, answers as unmunge does.
    unmunge.write_text(
        "#!/bin/sh\nread cred\n"
        '[ "$cred" = "MUNGE:good:" ] || { echo "unmunge: Error: Invalid credential" >&2;'
        " echo 'STATUS:          Invalid credential (15)'; exit 15; }\n"
        f"cat <<'EOF'\n{UNMUNGE_OK}EOF\n"
    )
    unmunge.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = tmp_path / "munge.json"
    for credential, expected in (
        ("MUNGE:good:", layout.Munge(rc=0, status="STATUS:          Success (0)")),
        ("MUNGE:bad:", layout.Munge(rc=15, status="STATUS:          Invalid credential (15)")),
    ):
        done = node_probe("record", "munge", "--out", str(out), stdin=credential + "\n", env=env)
        assert done.returncode == 0
        assert layout.Munge.from_json(read(out)) == expected


def test_munge_without_unmunge_on_the_node_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    outcome = records.munge_outcome("MUNGE:x:", timeout=5)
    assert outcome == {
        "rc": 127,
        "status": "[Errno 2] No such file or directory: 'unmunge'",
    }

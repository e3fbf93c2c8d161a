"""`kiln judge nccl-tests` through the real process: table, JSON, exit codes, bad input."""

import json
import re
from pathlib import Path

import pytest

from kiln.errors import ExitCode
from tests.conftest import run_kiln

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-tests"


def test_healthy_runs_pass():
    result = run_kiln(
        "judge",
        "nccl-tests",
        str(FIXTURES / "all_reduce_1node.txt"),
        str(FIXTURES / "all_reduce_2nodes.json"),
        "--profile",
        "h100-sxm-8x-ib400",
    )
    assert result.returncode == ExitCode.OK, result.stderr
    assert "2 results (profile h100-sxm-8x-ib400): 2 pass, 0 warn, 0 fail" in result.stdout
    assert "collectives.all_reduce.single_node busbw 478 GB/s >= 400 GB/s" in result.stdout


def test_nccl_tests_2_19_healthy_passes_and_one_rank_is_not_judged(tmp_path):
    v219 = FIXTURES / "v2.19"
    result = run_kiln(
        "judge",
        "nccl-tests",
        str(v219 / "all_reduce_2nodes.json"),
        str(v219 / "all_reduce_1gpu.json"),
        "--profile",
        "h100-sxm-8x-ib400",
        "--json",
        env={"KILN_STATE_DIR": str(tmp_path)},
    )
    assert result.returncode == ExitCode.OK, result.stdout + result.stderr
    payload = json.loads(result.stdout)
    assert [(r["verdict"], r["reasons"], r["best_busbw_gbps"]) for r in payload["results"]] == [
        ("pass", [], 370.737265),
        ("skip", [], None),
    ]
    assert payload["results"][1]["notes"] == ["1 rank: no link is crossed; nothing to judge"]
    report = json.loads(Path(payload["report"]).with_name("report.json").read_text())
    assert report["verdict"] == "pass"
    junit = Path(payload["report"]).with_name("junit.xml").read_text()
    assert '<skipped message="1 rank: no link is crossed; nothing to judge"' in junit
    alone = run_kiln(
        "judge", "nccl-tests", str(v219 / "all_reduce_1gpu.txt"),
        env={"KILN_STATE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert alone.returncode == ExitCode.OK, alone.stderr
    assert "1 result (no profile: correctness and peers only): 0 pass, 0 warn, 0 fail, " \
        "1 with nothing to judge" in alone.stdout  # fmt: skip
    assert "SKIP" in alone.stdout and "PASS" not in alone.stdout


def test_without_a_profile_a_healthy_run_is_measured_not_passed(tmp_path):
    """No reference number: the figure is measured, not judged; correctness and peers
    are still checked (a wrong value fails). Exit 0: nothing failed."""
    result = run_kiln(
        "judge", "nccl-tests", str(FIXTURES / "all_reduce_2nodes.json"),
        env={"KILN_STATE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (ExitCode.OK, "")
    lines = result.stdout.splitlines()
    assert lines[1].split()[-1] == "MEASURED" and "PASS" not in result.stdout
    assert lines[2] == (
        f"note {FIXTURES / 'all_reduce_2nodes.json'}: collectives.all_reduce.multi_node busbw "
        "371 GB/s: measured, not judged: no reference number (no --profile)"
    )
    assert (
        "1 result (no profile: correctness and peers only): 0 pass, 0 warn, 0 fail, 1 measured, "
        "not judged"
    ) in lines
    junit = Path(lines[-1].removeprefix("report: ")).with_name("junit.xml").read_text()
    assert '<skipped message="collectives.all_reduce.multi_node busbw 371 GB/s: measured' in junit


def test_failures_exit_5_with_reasons():
    result = run_kiln(
        "judge",
        "nccl-tests",
        str(FIXTURES / "all_reduce_slow_avg_failed.txt"),
        str(FIXTURES / "all_gather_wrong.txt"),
        "--profile",
        "h100-sxm-8x-ib400",
    )
    assert result.returncode == ExitCode.VALIDATION_FAILED == 5
    assert "busbw 150 GB/s < 340 GB/s (profile h100-sxm-8x-ib400)" in result.stdout
    assert "data corruption" in result.stdout


def test_json_for_a_provider_paste():
    result = run_kiln(
        "judge",
        "nccl-tests",
        str(FIXTURES / "provider_paste.txt"),
        "--collective",
        "reduce_scatter",
        "--profile",
        "h200-sxm-8x-ib400",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    (entry,) = json.loads(result.stdout)["results"]
    assert entry["best_busbw_gbps"] == pytest.approx(359.0, abs=0.5)
    assert entry["largest_size_busbw_gbps"] == entry["best_busbw_gbps"]
    assert entry["largest_size_bytes"] == 8 << 30
    assert entry["verdict"] == "pass"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["all_reduce_1node.txt", "--profile", "h100"], "unknown profile 'h100'"),
        (["provider_paste.txt"], "cannot tell which collective this is; pass --collective"),
        (["not-there.txt"], "not-there.txt: cannot read"),
    ],
)
def test_bad_input(args, message):
    args = [str(FIXTURES / a) if a.endswith(".txt") else a for a in args]
    result = run_kiln("judge", "nccl-tests", *args)
    assert result.returncode == ExitCode.BAD_INPUT
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_profile_with_a_misspelled_test(tmp_path):
    profile = tmp_path / "mine.yaml"
    profile.write_text("thresholds:\n  collectives.all_reduce.multinode: 300\n")
    result = run_kiln(
        "judge", "nccl-tests", str(FIXTURES / "all_reduce_1node.txt"), "--profile", str(profile)
    )
    assert result.returncode == ExitCode.BAD_INPUT
    assert "did you mean 'collectives.all_reduce.multi_node'" in result.stderr


def test_judge_writes_the_report_with_plots_that_report_show_renders():
    result = run_kiln("judge", "nccl-tests", str(FIXTURES / "all_reduce_2nodes.json"), "--json")
    assert result.returncode == ExitCode.OK, result.stderr
    html = Path(json.loads(result.stdout)["report"])
    page = html.read_text()
    assert "<figure class='plot' data-kind='curve' data-thresholds='0' " \
        "aria-label='all_reduce: bus bandwidth by message size'>" in page  # fmt: skip
    assert '"name":"gpu[001-002] (all_reduce_2nodes.json)"' in page
    assert "Measured per node" not in page  # busbw is on the curve: no empty heading
    report_id = html.parent.name
    shown = run_kiln("report", "show", report_id, "--format", "markdown")
    assert shown.returncode == ExitCode.OK
    # No profile: measured, not judged, in the report as on the terminal (exit 0); the
    # node column holds the nodes the file names, the file is the subject.
    assert "| gpu[001-002] | measured | collectives.all_reduce.multi_node busbw 371 GB/s: " \
        "measured, not judged: no reference number (no --profile) |" in shown.stdout  # fmt: skip
    assert shown.stdout.startswith("# Kiln validation ")
    assert ": MEASURED, NOT JUDGED\n" in shown.stdout and "PASS" not in shown.stdout


def test_one_file_it_cannot_identify_is_named_and_the_rest_are_judged(tmp_path):
    """Four files: a healthy one-node and two-node run, a one-GPU run (a skip) and a
    paste that does not say its collective. The paste is named in a warning and in the
    report, unchecked (exit 3); the others are judged, each row under its nodes."""
    files = [
        FIXTURES / "all_reduce_1node.txt",
        FIXTURES / "all_reduce_2nodes.json",
        FIXTURES / "v2.19" / "all_reduce_1gpu.json",
        FIXTURES / "provider_paste.txt",
    ]
    result = run_kiln("judge", "nccl-tests", *map(str, files), "--profile", "h100-sxm-8x-ib400",
                      env={"KILN_STATE_DIR": str(tmp_path)})  # fmt: skip
    assert result.returncode == ExitCode.NOT_CHECKED, result.stderr
    paste = files[3]
    assert result.stderr == (
        f"kiln: warning: {paste}: cannot tell which collective this is; "
        "pass --collective (not judged)\n"
    )
    assert result.stdout.splitlines()[-2] == (
        "3 results (profile h100-sxm-8x-ib400): 2 pass, 0 warn, 0 fail, 1 with nothing to "
        "judge; 1 file not judged (warned above)"
    )
    report = tmp_path / "validations" / result.stdout.split("report: ")[1].split("/")[-2]
    page = (report / "report.html").read_text()
    rows = re.findall(r"<tr><td>([^<]*)</td><td class='(\w+)'>\w+</td><td>([^<]*)</td></tr>", page)
    assert rows == [
        ("gpu001", "pass", "all tests passed"),
        ("gpu[001-002]", "pass", "all tests passed"),
        ("h100-vm", "skip",
         f"{files[2]} all_reduce: 1 rank: no link is crossed; nothing to judge"),
        ("unknown nodes", "unchecked",
         f"not judged: {paste}: cannot tell which collective this is; pass --collective"),
    ]  # fmt: skip
    assert "<span class='unchecked'>UNCHECKED</span>" in page


def test_when_no_file_can_be_identified_nothing_is_judged(tmp_path):
    paste = str(FIXTURES / "provider_paste.txt")
    result = run_kiln("judge", "nccl-tests", paste, paste, env={"KILN_STATE_DIR": str(tmp_path)})
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr == (
        f"kiln: error: {FIXTURES / 'provider_paste.txt'}: cannot tell which collective this is; "
        "pass --collective\n"
    )
    assert not (tmp_path / "validations").exists()


def strict(text: str):
    """JSON as strict readers take it: NaN and Infinity, which Python reads, are refused."""

    def refuse(token: str):
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("footer", ["nan", "inf"])
def test_a_footer_average_that_is_no_number_is_noted_and_the_json_stays_json(tmp_path, footer):
    """nccl-tests' footer average is only noted: a nan there leaves the figure out
    (null) and says so, in --json and in the report, which stay strict JSON."""
    text = (FIXTURES / "all_reduce_1node.txt").read_text()
    assert "# Avg bus bandwidth    : 355.495 \n" in text
    path = tmp_path / "all_reduce.txt"
    path.write_text(text.replace("355.495", footer))
    result = run_kiln(
        "judge", "nccl-tests", str(path), "--profile", "h100-sxm-8x-ib400", "--json",
        env={"KILN_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (ExitCode.OK, "")
    payload = strict(result.stdout)
    (entry,) = payload["results"]
    assert (entry["average_busbw_gbps"], entry["verdict"], entry["notes"]) == (
        None,
        "pass",
        [
            "collectives.all_reduce.single_node busbw 478 GB/s >= 400 GB/s "
            "(profile h100-sxm-8x-ib400)",
            f"footer average {footer} is no figure, not judged",
        ],
    )
    report = strict(Path(payload["report"]).with_name("report.json").read_text())
    assert report["notes"] == [f"{path} all_reduce: {note}" for note in entry["notes"]]
    shown = run_kiln(
        "report", "show", report["id"], "--format", "json",
        env={"KILN_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert (shown.returncode, strict(shown.stdout)) == (ExitCode.OK, report)

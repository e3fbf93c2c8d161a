"""Every kind of HTML report, made from the unit fixtures, opened in headless Chromium:
no console errors; every plot drew both axes with their titles and ticks, and its
threshold lines with their labels; no label outside its plot. Screenshots are kept
under build/screenshots (or $KILN_ARTIFACTS/screenshots) for CI to keep.

CI installs Chromium (`make prereqs`); elsewhere these tests skip without it, and in
CI (CI=true) its absence is a failure, not a skip."""

import os
from pathlib import Path

import pytest

from kiln.report import document, html, judged
from kiln.validation import nccl_judge, profiles
from kiln.validation.verdicts import Judgement, Verdict
from tests import browser
from tests.unit.test_burn_in import burn_in_session
from tests.unit.test_rollout import Slurm, simulated
from tests.unit.test_validation_run import make_report, raw, storage_result  # noqa: F401

if browser.CHROMIUM is None and os.environ.get("CI") == "true":
    raise RuntimeError("chromium is missing: `make prereqs` installs it (scripts/setup-host.sh)")
pytestmark = pytest.mark.skipif(browser.CHROMIUM is None, reason="chromium is not installed")

NCCL = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"


def validation_report(raw):  # noqa: F811
    """A validation of three nodes where gpu003's storage writes at a tenth."""
    raw.node("storage", "gpu003", storage_result("gpu003", seq_mbps_scale=0.1))
    return make_report(raw)


def judge_report():
    """`kiln judge nccl-tests` on a healthy one-node and two-node run, a one-GPU run
    (a skip) and a paste that does not say its collective (not judged)."""
    paths = [NCCL / "all_reduce_1node.txt", NCCL / "all_reduce_2nodes.json",
             NCCL / "v2.19" / "all_reduce_1gpu.json", NCCL / "provider_paste.txt"]  # fmt: skip
    runs, not_judged = nccl_judge.read_files(paths, None)
    profile = profiles.load("h100-sxm-8x-ib400")
    return judged.nccl_tests(runs, nccl_judge.judge(runs, profile), profile, not_judged)


def opened(report, name: str, tmp_path: Path) -> dict:
    """REPORT rendered, opened in Chromium, checked (browser.assert_drawn)."""
    page = tmp_path / f"{name}.html"
    page.write_text(html.render(report))
    found = browser.opened(page, name)
    browser.assert_drawn(found)
    return found


def kinds(found: dict) -> set[str]:
    return {p["kind"] for p in found["plots"]}


def by_title(found: dict) -> dict[str, dict]:
    return {p["title"]: p for p in found["plots"]}


def test_a_failing_validation_report_draws_every_plot_with_its_thresholds(raw, tmp_path):  # noqa: F811
    found = opened(validation_report(raw), "validation-failing", tmp_path)
    assert kinds(found) == {"curve", "bar", "fleet"}
    plots = by_title(found)
    curve = plots["all_reduce: bus bandwidth by message size"]
    # Sizes on a log2 axis as people write them; each node's curve in the legend.
    assert curve["x_ticks"] == ["1 MiB", "4 MiB", "16 MiB", "64 MiB", "256 MiB", "1 GiB"]
    assert curve["thresholds"] == 2  # the single-node and the multi-node floor
    assert len(curve["legend"]) == 4  # three nodes and the three together, none hidden
    writes = plots["storage.seq_write: per node"]
    assert writes["thresholds"] == 1 and writes["legend"] == ["pass", "fail"]
    fleet = plots["storage.seq_write: across the fleet"]
    assert "more than 15% from the fleet median" in fleet["legend"]


def test_a_failing_burn_in_report_breaks_its_lines_between_rounds(
    tmp_path, monkeypatch, write_inventory
):
    report, _code, _asked = burn_in_session(tmp_path, monkeypatch, write_inventory)
    found = opened(report, "burn-in-failing", tmp_path)
    assert kinds(found) == {"time", "bar", "fleet"}
    plots = by_title(found)
    assert plots["TFLOP/s per device"]["thresholds"] == 1  # the profile's floor
    assert plots["TFLOP/s per device"]["legend"] == ["gpu001 gpu0", "gpu002 gpu0"]
    # Two rounds, ten minutes apart: each GPU's line in two pieces, none across the pause.
    for title in ("TFLOP/s per device", "GPU temperature", "power draw", "SM clock"):
        assert plots[title]["line_pieces"] == [2, 2], title
    assert plots["burn_in.tflops: across the fleet"]["legend"] == [
        "more than 15% from the fleet median"
    ]


def test_a_rollout_report_plots_the_nodes_in_service(tmp_path, monkeypatch):
    slurm = Slurm(["gpu001", "gpu002", "gpu003", "gpu004"])
    failing = {"gpu002": "storage.mount /shared: not mounted"}
    report, _code = simulated(tmp_path, monkeypatch, slurm, failing, max_unavailable="2").run()
    found = opened(report, "rollout-failing", tmp_path)
    assert kinds(found) == {"time"}
    (plot,) = found["plots"]
    assert plot["y_title"] == "nodes in service" and plot["thresholds"] == 0


def test_a_judge_report_draws_the_curves_against_the_profile(tmp_path):
    found = opened(judge_report(), "judge", tmp_path)
    assert kinds(found) == {"curve"}
    (curve,) = found["plots"]
    assert curve["x_ticks"] == ["2 MiB", "8 MiB", "32 MiB", "128 MiB", "512 MiB", "2 GiB",
                                "8 GiB"]  # fmt: skip
    # The one-GPU run (a skip: busbw is 0 by definition) has no curve.
    assert curve["legend"] == ["gpu001 (all_reduce_1node.txt)",
                               "gpu[001-002] (all_reduce_2nodes.json)"]  # fmt: skip
    assert curve["thresholds"] == 2


def test_long_names_and_sixteen_nodes_leave_no_label_outside_its_plot(tmp_path):
    """Sixteen nodes with long names, identical curves and a long mount path: every
    series keeps its legend entry, the outlier's name stays inside its plot, and the
    bars keep the report's node order whatever their verdict."""
    nodes = [f"kiln-lab-longname-compute{n:02d}" for n in range(1, 17)]
    report = document.Report(id="20261129-040000-long", started="s", inventory="inv",
                          profile="p", suites=["storage", "collectives"], nodes=nodes)  # fmt: skip
    sweep = [[1 << s, 12.0 * s] for s in range(3, 35)]  # 8 B to 16 GiB
    for i, node in enumerate(nodes):
        report.curves.append({"node": node, "collective": "all_reduce", "points": sweep})
        verdict = Verdict.FAIL if i == 15 else Verdict.PASS
        value = 500.0 if i == 15 else 1000.0 + 10 * i
        report.judgements.append(Judgement(node, "storage.seq_read", "/shared/a/long/mount/path",
                                           value, "MB/s", verdict, "why", 900.0))  # fmt: skip
    report.judge_nodes()
    found = opened(report, "long-names", tmp_path)
    assert kinds(found) == {"curve", "bar", "fleet"}
    plots = by_title(found)
    curve = plots["all_reduce: bus bandwidth by message size"]
    assert curve["legend"] == nodes
    assert curve["x_ticks"][0] == "8 B" and curve["x_ticks"][-1] == "16 GiB"
    bars = plots["storage.seq_read: per node"]
    # The DOM holds the ticks bottom up; the first node is at the top.
    assert bars["y_ticks"] == [f"{n} /shared/a/long/mount/path" for n in reversed(nodes)]
    assert plots["storage.seq_read: across the fleet"]["legend"] == [
        "more than 15% from the fleet median"
    ]

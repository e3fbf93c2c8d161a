"""nccl-tests parsing and judging on recorded-format outputs (tests/fixtures/nccl-tests)."""

import json
from pathlib import Path

import pytest

from kiln.validation import nccl_judge, nccl_parse, profiles
from kiln.validation.nccl_parse import NcclTestsError
from kiln.validation.verdicts import Verdict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-tests"


def runs(name: str, collective: str | None = None) -> list[nccl_parse.Run]:
    return nccl_parse.parse_file(FIXTURES / name, collective)


def test_one_node_log():
    (run,) = runs("all_reduce_1node.txt")
    assert run.collective == "all_reduce"
    assert (run.ranks, run.hosts) == (8, ["gpu001"])
    assert run.devices[0] == "NVIDIA H100 80GB HBM3"
    assert run.max_bytes == 8 << 30
    assert [r.size for r in run.rows] == [1 << s for s in range(20, 34)]
    last = run.rows[-1]
    assert (last.count, last.type, last.redop, last.root) == (2147483648, "float", "sum", "-1")
    assert last.out_of_place is not None and last.in_place is not None
    assert last.out_of_place.busbw == pytest.approx(478.0, abs=0.5)
    assert last.in_place.wrong == 0
    assert run.finished and run.out_of_bounds == 0 and not run.out_of_bounds_failed
    assert run.average_busbw == pytest.approx(355.3, abs=0.5)


def test_busbw_is_algbw_times_the_collective_factor():
    """nccl-tests' all_reduce busbw = algbw * 2(n-1)/n; 16 ranks: 1.875."""
    (run,) = runs("all_reduce_2nodes.txt")
    for row in run.rows:
        measure = row.out_of_place
        assert measure is not None
        assert measure.busbw == pytest.approx(measure.algbw * 2 * 15 / 16, rel=0.01)
        # algbw is bytes / time: GB/s from bytes and microseconds.
        assert measure.algbw == pytest.approx(row.size / measure.time_us / 1e3, rel=0.01)


def test_two_node_log_with_launcher_chatter_and_json_agree():
    (text,) = runs("all_reduce_2nodes.txt")
    (data,) = runs("all_reduce_2nodes.json")
    assert text.hosts == data.hosts == ["gpu001", "gpu002"]
    assert text.ranks == data.ranks == 16
    assert data.collective == "all_reduce"  # from args[0]
    assert [r.size for r in text.rows] == [r.size for r in data.rows]
    for a, b in zip(text.rows, data.rows, strict=True):
        assert a.best_busbw() == pytest.approx(b.best_busbw(), rel=0.01)
    assert data.finished and not data.average_failed


def test_wrong_values_and_failed_footer():
    (run,) = runs("all_gather_wrong.txt")
    bad = [r for r in run.rows if r.wrong()]
    assert [r.size for r in bad] == [256 << 20]
    assert run.out_of_bounds == 3 and run.out_of_bounds_failed
    (result,) = nccl_judge.judge([run], None)
    assert result.verdict is Verdict.FAIL
    assert "3 wrong values in 1 size (first at 256 MiB): data corruption" in result.reasons


def test_no_validation_prints_na():
    (run,) = runs("provider_paste.txt", "reduce_scatter")
    assert all(r.out_of_place and r.out_of_place.wrong is None for r in run.rows)
    assert run.ranks is None and run.hosts == []


def test_average_flagged_failed_is_a_note_not_the_verdict():
    (run,) = runs("all_reduce_slow_avg_failed.txt")
    assert run.average_failed
    profile = profiles.load("h100-sxm-8x-ib400")
    (result,) = nccl_judge.judge([run], profile)
    assert result.verdict is Verdict.FAIL
    assert result.reasons == [
        "collectives.all_reduce.multi_node busbw 150 GB/s < 340 GB/s (profile h100-sxm-8x-ib400)"
    ]
    assert any("FAILED against -G" in note for note in result.notes)


def test_plateau_not_footer_average_decides():
    """A healthy run's footer average (all sizes) is far below the threshold; the plateau
    is above it, so it passes."""
    (run,) = runs("all_reduce_2nodes.txt")
    profile = profiles.load("h100-sxm-8x-ib400")
    (result,) = nccl_judge.judge([run], profile)
    assert run.average_busbw is not None and run.average_busbw < 340
    assert result.verdict is Verdict.PASS
    assert result.best_busbw_gbps == pytest.approx(371.0, abs=0.5)
    assert result.best_busbw_bytes == 8 << 30
    assert result.largest_size_bytes == 8 << 30


def test_best_of_in_place_and_out_of_place():
    text = (
        "1073741824 268435456 float sum -1 5000.0 214.7 402.6 0 4900.0 219.1 410.8 0\n"
        "2147483648 536870912 float sum -1 9900.0 216.9 406.7 0 9950.0 215.8 404.7 0\n"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 405.2\n"
    )
    (run,) = nccl_parse.parse_text(text, "paste", "all_reduce")
    (result,) = nccl_judge.judge([run], None)
    assert (result.best_busbw_gbps, result.best_busbw_bytes) == (410.8, 1 << 30)
    assert (result.largest_size_busbw_gbps, result.largest_size_bytes) == (406.7, 2 << 30)


def test_truncated_run_fails():
    (run,) = runs("all_reduce_truncated.txt")
    assert not run.finished
    (result,) = nccl_judge.judge([run], None)
    assert result.verdict is Verdict.FAIL
    assert result.best_busbw_gbps is None
    assert result.largest_size_bytes == 512 << 20
    assert "the run ended after 512 MiB without its footer" in result.reasons[0]


def test_srun_label_prefixes_and_timestamps():
    text = (
        "0: # Collective test starting: all_gather_perf\n"
        "0:   1073741824  16777216  float  none  -1  3000.0  357.9  335.5  0"
        "  3001.0  357.8  335.4  0  2026-11-20 10:00:01\n"
        "0: # Out of bounds values : 0 OK\n"
    )
    (run,) = nccl_parse.parse_text(text, "log")
    assert run.collective == "all_gather"
    assert run.rows[0].best_busbw() == 335.5


def test_several_tests_in_one_log():
    text = (FIXTURES / "all_reduce_1node.txt").read_text() + (
        FIXTURES / "all_gather_wrong.txt"
    ).read_text()
    found = nccl_parse.parse_text(text, "both.log")
    assert [r.collective for r in found] == ["all_reduce", "all_gather"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello\n", "no nccl-tests result rows found"),
        ("  1048576  262144  float  sum  -1  65.2  16.0\n", "x:1: not an nccl-tests result row"),
        ("  1048576  262144  float  sum  -1  65.2  x  30.1  0  65.4  16.0  30.0  0\n", "x:1:"),
    ],
)
def test_garbage_text(text, message):
    with pytest.raises(NcclTestsError, match=message):
        nccl_parse.parse_text(text, "x", "all_reduce")


def test_cut_json_names_the_line(tmp_path):
    cut = tmp_path / "all_reduce.json"
    cut.write_text((FIXTURES / "all_reduce_2nodes.json").read_text()[:3000])
    with pytest.raises(NcclTestsError, match=r"all_reduce.json:1: not nccl-tests JSON .*cut short"):
        nccl_parse.parse_file(cut)


def test_outlier_among_peers_without_a_profile(tmp_path):
    healthy = (FIXTURES / "all_reduce_2nodes.txt").read_text()
    files = []
    for name, scale in (("a", 1.0), ("b", 1.01), ("c", 0.99), ("slow", 0.6)):
        text = healthy
        if scale != 1.0:
            text = "".join(_scaled(line, scale) + "\n" for line in healthy.splitlines())
        path = tmp_path / f"{name}_all_reduce.txt"
        path.write_text(text)
        files += nccl_parse.parse_file(path)
    results = {Path(r.source).name: r for r in nccl_judge.judge(files, None)}
    assert results["slow_all_reduce.txt"].verdict is Verdict.FAIL
    assert "15% off the fleet median" in results["slow_all_reduce.txt"].reasons[0]
    # The others are no outliers; with no reference number they are measured, not judged.
    assert {
        results[n].verdict for n in ("a_all_reduce.txt", "b_all_reduce.txt", "c_all_reduce.txt")
    } == {Verdict.MEASURED}


def _scaled(line: str, scale: float) -> str:
    tokens = line.split()
    if line.startswith("#") or not tokens or not tokens[0].isdigit():
        return line
    for i in (6, 7, 10, 11):  # algbw, busbw of both halves
        tokens[i] = f"{float(tokens[i]) * scale:.2f}"
    return "  ".join(tokens)


def test_sweep_that_stopped_short_of_max_bytes_fails():
    text = (FIXTURES / "all_reduce_1node.txt").read_text()
    short = "\n".join(
        line
        for line in text.splitlines()
        if not line.lstrip().startswith(("4294967296", "8589934592"))
    )
    (run,) = nccl_parse.parse_text(short, "short_all_reduce.txt")
    (result,) = nccl_judge.judge([run], None)
    assert result.verdict is Verdict.FAIL
    assert result.reasons == ["the sweep stopped at 2 GiB of 8 GiB"]


V219 = "v2.19/"


def test_nccl_tests_2_19_json_and_text_read_whole():
    """Every field Kiln reads, from the 2.19 JSON (version 3, root "    -1", float
    nwrong, booleans as strings, errors [""]) and from the text of the same run."""
    (data,) = runs(V219 + "all_reduce_2nodes.json")
    (text,) = runs(V219 + "all_reduce_2nodes.txt")
    for run in (data, text):
        assert run.collective == "all_reduce"
        assert (run.ranks, run.hosts) == (16, ["gpu001", "gpu002"])
        assert run.devices == ["NVIDIA H100 80GB HBM3"] * 16
        assert (run.max_bytes, run.step) == (8 << 30, (2, True))
        assert [r.size for r in run.rows] == [1 << s for s in range(20, 34)]
        assert {(r.type, r.redop, r.root) for r in run.rows} == {("float", "sum", "-1")}
        assert [r.count for r in run.rows] == [r.size // 4 for r in run.rows]
        assert all(r.wrong() == 0 for r in run.rows)
        assert (run.out_of_bounds, run.out_of_bounds_failed) == (0, False)
        assert run.average_failed is False
        assert run.errors == []
        assert run.finished
    assert data.average_busbw == pytest.approx(262.135, abs=1e-3)
    assert text.average_busbw == pytest.approx(262.135, abs=1e-3)
    for a, b in zip(data.rows, text.rows, strict=True):
        for x, y in ((a.out_of_place, b.out_of_place), (a.in_place, b.in_place)):
            assert x is not None and y is not None
            assert (y.time_us, y.algbw, y.busbw) == pytest.approx(
                (x.time_us, x.algbw, x.busbw), rel=0.01
            )
            assert x.wrong == y.wrong == 0.0


def test_a_healthy_2_19_run_passes():
    """nccl-tests 2.19 writes "errors": [""] on a healthy run: an empty string is no error."""
    profile = profiles.load("h100-sxm-8x-ib400")
    results = nccl_judge.judge(runs(V219 + "all_reduce_2nodes.json"), profile)
    assert [(r.verdict, r.reasons) for r in results] == [(Verdict.PASS, [])]
    assert results[0].best_busbw_gbps == pytest.approx(370.74, abs=0.01)
    # Without a profile the same run is measured, not judged: never a pass.
    [alone] = nccl_judge.judge(runs(V219 + "all_reduce_2nodes.json"), None)
    assert (alone.verdict, alone.reasons, alone.notes[0]) == (
        Verdict.MEASURED,
        [],
        "collectives.all_reduce.multi_node busbw 371 GB/s: measured, not judged: no reference "
        "number (no --profile)",
    )


def test_2_19_text_columns_print_13959_and_2e06():
    (run,) = runs(V219 + "all_reduce_1gpu.txt")
    in_place = [row.in_place for row in run.rows if row.in_place is not None]
    assert in_place[-1].algbw == 2e6
    assert any(m.algbw == 15607 for m in in_place)
    (data,) = runs(V219 + "all_reduce_1gpu.json")
    assert data.rows[-1].in_place is not None
    assert data.rows[-1].in_place.algbw == pytest.approx(1997659.2, abs=0.1)


@pytest.mark.parametrize("name", ["all_reduce_1gpu.json", "all_reduce_1gpu.txt"])
def test_one_rank_is_not_judged(name):
    """With one rank busbw is 0 by definition and all_reduce is a local no-op: the result
    is a note, never PASS or FAIL, and carries no bandwidth."""
    profile = profiles.load("h100-sxm-8x-ib400")
    (result,) = nccl_judge.judge(runs(V219 + name), profile)
    assert result.verdict is Verdict.SKIP
    assert (result.reasons, result.notes) == ([], ["1 rank: no link is crossed; nothing to judge"])
    assert (result.best_busbw_gbps, result.largest_size_busbw_gbps) == (None, None)
    assert (result.ranks, result.nodes) == (1, 1)


@pytest.mark.parametrize("value", ["nan", "inf", "-5.0"])
def test_a_busbw_that_is_no_number_is_refused_not_passed(tmp_path, value):
    """nan passes every comparison ("nan GB/s >= 400 GB/s"): such a row is no result."""
    text = (FIXTURES / "all_reduce_1node.txt").read_text().splitlines()
    row = next(i for i, line in enumerate(text) if line.strip().startswith("8589934592"))
    columns = text[row].split()
    columns[7] = value
    text[row] = "  ".join(columns)
    path = tmp_path / "all_reduce.txt"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(NcclTestsError, match=rf"all_reduce.txt:{row + 1}: .*busbw {value}"):
        nccl_parse.parse_file(path)
    data = json.loads((FIXTURES / "v2.19" / "all_reduce_2nodes.json").read_text())
    data["results"][-1]["in_place"]["bus_bw"] = value  # nccl-tests writes "nan" so
    path.write_text(json.dumps(data))
    with pytest.raises(NcclTestsError, match=r"results\[13\]: unexpected entry \(busbw"):
        nccl_parse.parse_file(path)


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_wrong_count_that_is_no_count_is_refused(tmp_path, value):
    """#wrong nan is true in Python: it read as "nan wrong values ... data corruption"
    and wrote NaN into --json. A count that is not a finite, non-negative number is no
    result, like such a bandwidth."""
    text = (FIXTURES / "all_reduce_1node.txt").read_text().splitlines()
    row = next(i for i, line in enumerate(text) if line.strip().startswith("8589934592"))
    columns = text[row].split()
    columns[8] = value  # out-of-place #wrong
    text[row] = "  ".join(columns)
    path = tmp_path / "all_reduce.txt"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(NcclTestsError) as caught:
        nccl_parse.parse_file(path)
    assert caught.value.message == (
        f"{path}:{row + 1}: not an nccl-tests result row (#wrong {float(value)!r} is no count): "
        f"{text[row].strip()[:80]!r}"
    )
    data = json.loads((FIXTURES / "v2.19" / "all_reduce_2nodes.json").read_text())
    data["results"][-1]["in_place"]["nwrong"] = value
    path.write_text(json.dumps(data))
    with pytest.raises(NcclTestsError) as caught:
        nccl_parse.parse_file(path)
    assert caught.value.message == (
        f"{path}: results[13]: unexpected entry (#wrong {float(value)!r} is no count)"
    )


@pytest.mark.parametrize(
    ("part", "value", "message"),
    [
        ("config", {"maximum_bytes": "8G"}, "config: unexpected entry (invalid literal"),
        ("config", {"step_factor": float("inf")}, "config: unexpected entry (cannot convert"),
        ("config", ["gpu001"], "config: unexpected entry ('list' object has no attribute"),
        ("out_of_bounds", {"count": "none"}, "footer: unexpected entry (invalid literal"),
        ("average_bus_bandwidth", {"bandwidth": None}, "footer: unexpected entry (float()"),
        ("average_bus_bandwidth", "262.1", "footer: unexpected entry ('str' object has no"),
    ],
)
def test_a_json_file_with_a_header_or_footer_of_another_shape_is_one_line(
    tmp_path, part, value, message
):
    data = json.loads((FIXTURES / "v2.19" / "all_reduce_2nodes.json").read_text())
    data[part] = value
    path = tmp_path / "all_reduce.json"
    path.write_text(json.dumps(data))
    with pytest.raises(NcclTestsError) as caught:
        nccl_parse.parse_file(path)
    assert caught.value.message.startswith(f"{path}: {message}")
    assert "\n" not in caught.value.message

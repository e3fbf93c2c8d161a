"""The HTML report's plots as figures (kiln.report.plots): axes, ticks, thresholds,
gaps, legends and the plots left out for lack of data. tests/unit/test_report_browser.py
checks what Chromium draws from them."""

from kiln.report import plots
from kiln.validation.verdicts import Judgement, Verdict


def judged(node, test, value, threshold, verdict=Verdict.PASS, subject=""):
    return Judgement(node, test, subject, value, "GB/s", verdict, "why", threshold)


def test_message_sizes_are_a_log2_axis_from_8_b_to_16_gib_with_the_profiles_floors():
    sizes = [8 << i for i in range(32)]  # 8 B ... 16 GiB
    curves = [{"node": n, "collective": "all_reduce", "points": [[s, 1.0] for s in sizes]}
              for n in ("gpu001", "gpu002")]  # fmt: skip
    floors = [judged("gpu001", "collectives.all_reduce.single_node", 450.0, 400.0),
              judged("gpu[001-002]", "collectives.all_reduce.multi_node", 350.0, 340.0),
              judged("gpu001", "storage.seq_read", 1.0, 9.0)]  # fmt: skip
    plot = plots.curve_plot("all_reduce", curves, floors)
    x = plot.figure["layout"]["xaxis"]
    assert (x["type"], x["title"]["text"]) == ("log", "message size (bytes, log2 scale)")
    assert x["ticktext"] == ["8 B", "64 B", "1 KiB", "16 KiB", "256 KiB", "4 MiB", "64 MiB",
                             "1 GiB", "16 GiB"]  # fmt: skip
    assert x["tickvals"] == [8] + [64 << (4 * i) for i in range(8)]
    assert plot.thresholds == 2
    assert [a["text"] for a in plot.figure["layout"]["annotations"]] == [
        "threshold 340 GB/s (collectives.all_reduce.multi_node)",
        "threshold 400 GB/s (collectives.all_reduce.single_node)",
    ]
    # Identical curves differ in dash and marker, so neither hides the other.
    looks = [(t["line"]["dash"], t["marker"]["symbol"]) for t in plot.figure["data"]]
    assert looks == [("solid", "circle"), ("dash", "square")]


def test_a_pause_between_rounds_is_a_gap_and_a_plot_without_data_is_none():
    rounds = [[t, 690.0] for t in range(70, 250, 10)] + [[t, 700.0] for t in range(670, 850, 10)]
    series = [{"node": "gpu001", "device": "gpu0", "metric": "tflops", "points": rounds}]
    floor = [Judgement("gpu001", "burn_in.tflops", "gpu 0, round 1", 690.0, "TFLOP/s",
                       Verdict.PASS, "why", 600.0)]  # fmt: skip
    plot = plots.time_plot("tflops", series, floor)
    (trace,) = plot.figure["data"]
    assert trace["y"][18] is None and trace["x"][18] == 455.0  # between 240 s and 670 s
    assert trace["y"].count(None) == 1 and trace["connectgaps"] is False
    assert plot.figure["layout"]["yaxis"]["title"]["text"] == "TFLOP/s"
    assert plot.thresholds == 1
    assert plots.time_plot("busbw_gbps", [{**series[0], "points": []}], floor) is None
    assert plots.curve_plot("all_reduce", [], floor) is None
    assert plots.bar_plot("storage.seq_read", [judged("gpu001", "x", None, 1.0)]) is None
    # Two values on one node are no fleet.
    two = [judged("gpu001", "t", 1.0, None), judged("gpu001", "t", 2.0, None)]
    assert plots.fleet_plot("t", two) is None


def test_the_fleet_view_marks_and_names_the_values_far_from_the_median():
    values = [judged(f"gpu00{n}", "burn_in.tflops", v, 600.0, subject=f"gpu {g}")
              for n, g, v in ((1, 0, 700.0), (1, 1, 690.0), (2, 0, 695.0), (2, 1, 500.0),
                              (3, 0, 698.0))]  # fmt: skip
    plot = plots.fleet_plot("burn_in.tflops", values)
    boxes = [t for t in plot.figure["data"] if t["type"] == "box"]
    assert [(b["name"], b["y"]) for b in boxes] == [
        ("gpu001", [700.0, 690.0]), ("gpu002", [695.0, 500.0]), ("gpu003", [698.0])
    ]  # fmt: skip
    (odd,) = [t for t in plot.figure["data"] if t["type"] == "scatter"]
    assert (odd["name"], odd["x"], odd["y"], odd["text"]) == (
        "more than 15% from the fleet median",
        ["gpu002"],
        [500.0],
        ["gpu 1"],
    )
    notes = [a["text"] for a in plot.figure["layout"]["annotations"]]
    assert notes == ["fleet median 695 GB/s ± 15%", "threshold 600 GB/s"]


def test_the_fleet_band_is_the_profiles_outlier_percent():
    values = [judged(f"gpu00{n}", "t", v, None) for n, v in ((1, 100.0), (2, 96.0), (3, 89.0))]
    # 7% below a median of 96 is outside a 5% band, inside the default 15%.
    (odd,) = [t for t in plots.fleet_plot("t", values, 5.0).figure["data"]
              if t["type"] == "scatter"]  # fmt: skip
    assert (odd["name"], odd["x"]) == ("more than 5% from the fleet median", ["gpu003"])
    assert [t for t in plots.fleet_plot("t", values).figure["data"] if t["type"] == "scatter"] == []

"""The HTML report's plots, as Plotly figures (docs/validation.md says why Plotly).

Each builder returns a Plot, or None when it has no data to draw: a report never shows
an empty chart. Every plot labels both axes with their units, draws the profile's
thresholds as lines that show without hovering, tells its series apart by colour, dash
and marker (identical curves still show every legend entry), and leaves gaps where no
data was taken (the pauses between burn-in rounds).
"""

import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Any

from kiln.report.document import Curve, Series
from kiln.validation.verdicts import Judgement, fmt

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down"]
VERDICT_COLOURS = {
    "pass": "#2ca02c",
    "warn": "#e6a700",
    "fail": "#d62728",
    "skip": "#7f7f7f",
    "measured": "#1f77b4",
    "unchecked": "#9467bd",
}
THRESHOLD_COLOUR = "#000000"
OUTLIER_PERCENT = 15.0  # the profiles' default (kiln.validation.profiles.Profile)
# A pause between two samples longer than this many times the usual interval is a gap.
GAP_FACTOR = 3.0

# The burn-in's and rollout's series, in the order the page shows them: title, the
# y axis with its unit, and the test whose thresholds are drawn on it.
METRICS = {
    "tflops": ("TFLOP/s per device", "TFLOP/s", "burn_in.tflops"),
    "temperature_c": ("GPU temperature", "temperature (°C)", "burn_in.temperature_c"),
    "power_w": ("power draw", "power (W)", None),
    "sm_clock_mhz": ("SM clock", "SM clock (MHz)", None),
    "busbw_gbps": (
        "multi-node all_reduce busbw, per round",
        "busbw (GB/s)",
        "collectives.all_reduce.multi_node",
    ),
    "free_nodes": ("compute nodes in service during a rollout", "nodes in service", None),
}

# Counts that change at a moment and hold (nodes in service): drawn as steps.
STEPS = {"free_nodes"}


@dataclass
class Plot:
    kind: str  # curve, time, bar, fleet
    title: str
    figure: dict[str, Any]  # Plotly's figure: data and layout
    thresholds: int  # the threshold lines it draws (the browser tests count them)


def size_label(size: float) -> str:
    """A message size as people write it: 8 B, 512 KiB, 16 GiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):g} {unit}"
    return f"{size:g} B"


def _style(index: int) -> dict[str, Any]:
    """Series INDEX's look: colour, dash and marker change at different rates, so two
    identical curves still differ where they overlap."""
    return {
        "line": {"color": COLOURS[index % len(COLOURS)], "dash": DASHES[index % len(DASHES)]},
        "marker": {"symbol": SYMBOLS[index % len(SYMBOLS)], "size": 7},
    }


def _layout(title: str, x_title: str, y_title: str, height: int = 380) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0, "xanchor": "left"},
        "height": height,
        "margin": {"l": 80, "r": 30, "t": 50, "b": 60},
        "xaxis": {"title": {"text": x_title}, "automargin": True, "zeroline": False},
        "yaxis": {"title": {"text": y_title}, "automargin": True, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.25, "yanchor": "top"},
        "hovermode": "closest",
        "template": "plotly_white",
    }


def _threshold_lines(
    layout: dict[str, Any], limits: dict[float, str], unit: str, axis: str = "y"
) -> int:
    """Each threshold as a dashed line across the plot with its value written beside
    it, so it shows without hovering. Returns how many were drawn."""
    shapes = layout.setdefault("shapes", [])
    notes = layout.setdefault("annotations", [])
    for index, (limit, test) in enumerate(sorted(limits.items())):
        label = f"threshold {fmt(limit)} {unit}" + (f" ({test})" if test else "")
        line = {"color": THRESHOLD_COLOUR, "width": 1.5, "dash": "dash"}
        if axis == "y":
            shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                           "y0": limit, "y1": limit, "line": line})  # fmt: skip
            notes.append({"xref": "paper", "x": 0.01 + 0.3 * index, "xanchor": "left",
                          "yref": "y", "y": limit, "yanchor": "bottom", "text": label,
                          "showarrow": False, "font": {"size": 11}})  # fmt: skip
        else:
            shapes.append({"type": "line", "yref": "paper", "y0": 0, "y1": 1, "xref": "x",
                           "x0": limit, "x1": limit, "line": line})  # fmt: skip
            notes.append({"yref": "paper", "y": 1, "yanchor": "bottom", "xref": "x",
                          "x": limit, "xanchor": "center", "text": label,
                          "showarrow": False, "font": {"size": 11}})  # fmt: skip
    return len(limits)


def _limits(judgements: list[Judgement], test_prefix: str | None) -> tuple[dict[float, str], str]:
    """The distinct thresholds of the tests named TEST_PREFIX..., each with its test
    where there are several tests, and their unit."""
    if test_prefix is None:
        return {}, ""
    chosen = [
        j
        for j in judgements
        if j.threshold is not None and (j.test == test_prefix or j.test.startswith(test_prefix))
    ]
    tests = {j.test for j in chosen}
    limits = {j.threshold: (j.test if len(tests) > 1 else "") for j in chosen}
    return limits, chosen[0].unit if chosen else ""  # type: ignore[misc]


def curve_plot(collective: str, curves: list[Curve], judgements: list[Judgement]) -> Plot | None:
    """Bus bandwidth against message size, a series per node (or file), the sizes on a
    log2 axis, with the profile's thresholds for the collective."""
    drawn = [c for c in curves if any(p[0] > 0 for p in c["points"])]
    if not drawn:
        return None
    sizes = sorted({p[0] for c in drawn for p in c["points"] if p[0] > 0})
    low, high = math.floor(math.log2(sizes[0])), math.ceil(math.log2(sizes[-1]))
    # Ten ticks or so, down from the largest size; the smallest ticked too unless it
    # would crowd the next one.
    step = max(1, math.ceil((high - low) / 9))
    powers = list(reversed(range(high, low - 1, -step)))
    if powers[0] - low > step / 2:
        powers.insert(0, low)
    ticks = [2**e for e in powers]
    title = f"{collective}: bus bandwidth by message size"
    layout = _layout(title, "message size (bytes, log2 scale)", "busbw (GB/s)")
    layout["xaxis"].update(
        {"type": "log", "tickvals": ticks, "ticktext": [size_label(t) for t in ticks]}
    )
    data = []
    for index, curve in enumerate(drawn):
        points = sorted((p for p in curve["points"] if p[0] > 0), key=lambda p: p[0])
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": curve["node"],
                "x": [p[0] for p in points],
                "y": [p[1] for p in points],
                "text": [size_label(p[0]) for p in points],
                "hovertemplate": "%{text}: %{y:.4g} GB/s<extra>%{fullData.name}</extra>",
                **_style(index),
            }
        )
    limits, unit = _limits(judgements, f"collectives.{collective}.")
    count = _threshold_lines(layout, limits, unit or "GB/s")
    return Plot("curve", title, {"data": data, "layout": layout}, count)


def _with_gaps(points: list[list[float]]) -> tuple[list[float], list[float | None]]:
    """A series' x and y, a None between two samples further apart than GAP_FACTOR
    times the usual interval: Plotly breaks the line there."""
    ordered = sorted(points, key=lambda p: p[0])
    steps = [b[0] - a[0] for a, b in itertools.pairwise(ordered) if b[0] > a[0]]
    usual = statistics.median(steps) if steps else 0.0
    xs: list[float] = []
    ys: list[float | None] = []
    for index, (t, value) in enumerate(ordered):
        if index and usual and t - ordered[index - 1][0] > GAP_FACTOR * usual:
            xs.append((t + ordered[index - 1][0]) / 2)
            ys.append(None)
        xs.append(t)
        ys.append(value)
    return xs, ys


def time_plot(metric: str, series: list[Series], judgements: list[Judgement]) -> Plot | None:
    """A figure over time, a series per node's device; the pauses between rounds left
    blank; a lone point (one round) drawn as a marker."""
    drawn = [s for s in series if s["points"]]
    if not drawn:
        return None
    title, y_title, test = METRICS[metric]
    layout = _layout(title, "time since the start (s)", y_title)
    layout["xaxis"]["tickformat"] = ",.0f"  # 3,600 s, not 3.6k
    data = []
    for index, one in enumerate(drawn):
        xs, ys = _with_gaps(one["points"])
        name = " ".join(part for part in (one["node"], one["device"]) if part)
        if len(xs) == 1:  # a lone point says its value
            data.append({"type": "scatter", "mode": "markers+text", "textposition": "top center",
                         "name": name, "x": xs, "y": ys, "text": [fmt(ys[0] or 0)],
                         "hovertemplate": "%{x:.0f} s: %{y:.4g}<extra>%{fullData.name}</extra>",
                         **_style(index)})  # fmt: skip
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers" if len(xs) <= 40 else "lines",
                "text": [fmt(y) if y is not None else "" for y in ys],
                "connectgaps": False,
                "name": name,
                "x": xs,
                "y": ys,
                "hovertemplate": "%{x:.0f} s: %{y:.4g}<extra>%{fullData.name}</extra>",
                **_style(index),
            }
        )
        if metric in STEPS:
            data[-1]["line"]["shape"] = "hv"
    times = [x for one in data for x in one["x"]]
    if max(times) - min(times) < 1:  # one moment (a round's busbw): a minute either side
        layout["xaxis"]["range"] = [max(0, min(times) - 60), max(times) + 60]
    limits, unit = _limits(judgements, test)
    count = _threshold_lines(layout, limits, unit)
    return Plot("time", title, {"data": data, "layout": layout}, count)


def _label(j: Judgement) -> str:
    return " ".join(part for part in (j.node, j.subject) if part)


def bar_plot(test: str, judgements: list[Judgement]) -> Plot | None:
    """Each measured value of TEST as a bar, coloured by its verdict (a legend entry per
    verdict), against the test's thresholds."""
    measured = [j for j in judgements if j.value is not None]
    if not measured:
        return None
    unit = measured[0].unit
    title = f"{test}: per node"
    layout = _layout(title, f"{test} ({unit})" if unit else test, "node and subject",
                     height=140 + 28 * len(measured))  # fmt: skip
    # Nodes in the report's order, whatever their verdict's trace.
    layout["yaxis"].update({"type": "category", "autorange": "reversed",
                            "categoryorder": "array",
                            "categoryarray": [_label(j) for j in measured]})  # fmt: skip
    layout["xaxis"]["rangemode"] = "tozero"
    layout["yaxis"].pop("rangemode")
    layout["margin"]["t"] = 70  # room for the threshold's label above the bars
    layout["bargap"] = 0.25
    layout["showlegend"] = True  # what each colour means, one verdict or several
    data = []
    for verdict in VERDICT_COLOURS:
        chosen = [j for j in measured if j.verdict.value == verdict]
        if chosen:
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "name": verdict,
                    "x": [j.value for j in chosen],
                    "y": [_label(j) for j in chosen],
                    "marker": {"color": VERDICT_COLOURS[verdict]},
                    "text": [fmt(j.value or 0) for j in chosen],
                    "textposition": "outside",  # a 0 says so too
                    "cliponaxis": False,
                    "hovertemplate": f"%{{y}}: %{{x:.4g}} {unit}<extra>{verdict}</extra>",
                }
            )
    limits = {j.threshold: "" for j in measured if j.threshold is not None}
    largest = max([abs(j.value or 0.0) for j in measured] + list(limits)) or 1.0
    layout["xaxis"]["range"] = [0, largest * 1.15]  # room for the values beside the bars
    count = _threshold_lines(layout, limits, unit, axis="x")
    return Plot("bar", title, {"data": data, "layout": layout}, count)


def fleet_plot(
    test: str, judgements: list[Judgement], percent: float = OUTLIER_PERCENT
) -> Plot | None:
    """TEST's values across the fleet: a box per node over its values (its GPUs, its
    rounds), every value a point, the fleet median as a line in a band of ±PERCENT
    (the profile's outlier_percent), and each value outside the band marked and named.
    None below three values on two nodes: there is no fleet to compare with."""
    measured = [j for j in judgements if j.value is not None]
    nodes = sorted({j.node for j in measured})
    if len(measured) < 3 or len(nodes) < 2:
        return None
    unit = measured[0].unit
    median = statistics.median(j.value for j in measured)  # type: ignore[type-var]
    band = abs(median) * percent / 100
    title = f"{test}: across the fleet"
    layout = _layout(title, "node", f"{test} ({unit})" if unit else test)
    layout["yaxis"].pop("rangemode")
    layout["xaxis"]["type"] = "category"
    # Beside the plot: many long node names turn the ticks, which a legend below would hit.
    layout["legend"] = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"}
    data: list[dict[str, Any]] = [
        {
            "type": "box",
            "name": node,
            "x": [node] * len(values),
            "y": [j.value for j in values],
            "text": [j.subject for j in values],
            "boxpoints": "all",
            "jitter": 0.3,
            "pointpos": 0,
            "marker": {"color": COLOURS[0], "size": 6},
            "line": {"color": COLOURS[0]},
            "showlegend": False,
            "hovertemplate": f"%{{x}} %{{text}}: %{{y:.4g}} {unit}<extra></extra>",
        }
        for node in nodes
        if (values := [j for j in measured if j.node == node])
    ]
    odd = [j for j in measured if abs((j.value or 0.0) - median) > band]
    if odd:
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": f"more than {percent:g}% from the fleet median",
                "x": [j.node for j in odd],
                "y": [j.value for j in odd],
                "text": [j.subject or j.node for j in odd],
                # Beside the cross, towards the middle: never past the plot's edge.
                "textposition": [
                    "middle right" if nodes.index(j.node) < len(nodes) / 2 else "middle left"
                    for j in odd
                ],
                "marker": {"color": VERDICT_COLOURS["fail"], "symbol": "x", "size": 12},
                "hovertemplate": f"%{{x}} %{{text}}: %{{y:.4g}} {unit}<extra>outlier</extra>",
            }
        )
    layout["shapes"] = [
        {"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": median - band,
         "y1": median + band, "fillcolor": "#2ca02c", "opacity": 0.08, "line": {"width": 0},
         "layer": "below"},
    ]  # fmt: skip
    layout["annotations"] = [
        {"xref": "paper", "x": 1, "xanchor": "right", "yref": "y", "y": median + band,
         "yanchor": "bottom", "showarrow": False, "font": {"size": 11},
         "text": f"fleet median {fmt(median)} {unit} ± {percent:g}%"},
    ]  # fmt: skip
    median_line = {"color": "#2ca02c", "width": 1.5}
    layout["shapes"].append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                             "y0": median, "y1": median, "line": median_line})  # fmt: skip
    limits = {j.threshold: "" for j in measured if j.threshold is not None}
    count = _threshold_lines(layout, limits, unit)
    return Plot("fleet", title, {"data": data, "layout": layout}, count)

"""The HTML report: one self-contained page (no scripts, no external files) with SVG
plots: bus bandwidth against message size per node, and each measured test per node
against its threshold."""

import math
from html import escape

from kiln.report.document import Report
from kiln.validation.verdicts import Judgement, fmt

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
VERDICT_COLOURS = {
    "pass": "#2ca02c",
    "warn": "#e6a700",
    "fail": "#d62728",
    "skip": "#7f7f7f",
    "measured": "#1f77b4",
    "unchecked": "#9467bd",
}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; font-size: 90%; }
.pass { color: #2ca02c; } .warn { color: #b38200; } .fail { color: #d62728; font-weight: bold; }
.skip { color: #7f7f7f; } .unchecked { color: #9467bd; font-weight: bold; }
.measured { color: #1f77b4; }
svg { margin: 0.5em 1em 1em 0; } text { font-size: 11px; }
"""


def render(report: Report) -> str:
    verdict = report.verdict.value
    kind = report.kind
    parts = [
        "<!DOCTYPE html>",
        f"<html><head><meta charset='utf-8'><title>Kiln {kind} {escape(report.id)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Kiln {kind} {escape(report.id)}: <span class='{verdict}'>"
        f"{verdict.upper()}</span></h1>",
        f"<p>Started {escape(report.started)}; inventory <code>{escape(report.inventory)}</code>;"
        f" profile {escape(report.profile or 'none (fleet only)')};"
        f" suites {escape(', '.join(report.suites))}.</p>",
        "<h2>Nodes</h2><table><tr><th>node</th><th>verdict</th><th>reason</th></tr>",
    ]
    for node in report.nodes:
        entry = report.node_verdict(node)
        reason = "; ".join(entry["reasons"]) or "all tests passed"
        parts.append(
            f"<tr><td>{escape(node)}</td><td class='{entry['verdict']}'>{entry['verdict']}</td>"
            f"<td>{escape(reason)}</td></tr>"
        )
    parts.append("</table>")
    if report.curves:
        parts.append("<h2>Collectives: bus bandwidth against message size</h2>")
        for collective in sorted({c["collective"] for c in report.curves}):
            curves = [c for c in report.curves if c["collective"] == collective]
            parts.append(_curve_plot(collective, curves))
    if report.series:
        parts.append("<h2>Over time (seconds since the start)</h2>")
        for metric, title in METRICS.items():
            chosen = [s for s in report.series if s["metric"] == metric]
            if chosen:
                parts.append(_time_plot(title, chosen))
    measured = [j for j in report.judgements if j.value is not None]
    if measured:
        parts.append("<h2>Measured per node, against the threshold</h2>")
        for test in sorted({j.test for j in measured if not j.test.startswith("collectives")}):
            parts.append(_bar_plot(test, [j for j in measured if j.test == test]))
    parts.append(
        "<h2>Every test</h2><table><tr><th>node</th><th>test</th><th>subject</th>"
        "<th>value</th><th>threshold</th><th>verdict</th><th>reason</th></tr>"
    )
    for j in report.judgements:
        value, limit = j.shown()
        parts.append(
            f"<tr><td>{escape(j.node)}</td><td>{escape(j.test)}</td><td>{escape(j.subject)}</td>"
            f"<td>{value}</td><td>{limit}</td><td class='{j.verdict.value}'>{j.verdict.value}"
            f"</td><td>{escape(j.reason)}</td></tr>"
        )
    parts.append("</table>")
    if items := report.action_lines():
        parts.append("<h2>Slurm</h2><ul>" + "".join(f"<li>{escape(i)}</li>" for i in items))
        parts.append("</ul>")
    if report.notes:
        parts.append("<h2>Notes</h2><ul>")
        parts += [f"<li>{escape(note)}</li>" for note in report.notes]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# The burn-in's series, in the order the page shows them.
METRICS = {
    "tflops": "TFLOP/s per device",
    "temperature_c": "GPU temperature (C)",
    "power_w": "power draw (W)",
    "sm_clock_mhz": "SM clock (MHz)",
    "busbw_gbps": "multi-node all_reduce busbw (GB/s), per round",
    "free_nodes": "compute nodes in service during a rollout",
}


def _frame(
    width: int, height: int, left: int, bottom: int, lines: int, label: str, title: str
) -> list[str]:
    """An SVG plot's opening: room for a legend line per series, the title, the axes."""
    return [
        f"<svg width='{width}' height='{height + 20 * lines}' role='img' "
        f"aria-label='{escape(label)}'>",
        f"<text x='{left}' y='14'>{escape(title)}</text>",
        f"<line x1='{left}' y1='{height - bottom}' x2='{width - 20}' y2='{height - bottom}' "
        "stroke='#444'/>",
        f"<line x1='{left}' y1='20' x2='{left}' y2='{height - bottom}' stroke='#444'/>",
    ]


def _time_plot(title: str, series: list[dict]) -> str:
    """Each series (a node's device) as a line: value against seconds since the start."""
    width, height, left, bottom = 640, 300, 60, 40
    points = [p for s in series for p in s["points"]]
    if not points:
        return ""
    x1 = max(p[0] for p in points) or 1.0
    y1 = max(p[1] for p in points) * 1.1 or 1.0

    def at(t: float, value: float) -> tuple[float, float]:
        x = left + t / x1 * (width - left - 20)
        y = height - bottom - value / y1 * (height - bottom - 20)
        return round(x, 1), round(y, 1)

    svg = [
        *_frame(width, height, left, bottom, len(series), title, title),
        f"<text x='4' y='28'>{fmt(y1)}</text>",
        f"<text x='{width - 60}' y='{height - bottom + 16}'>{fmt(x1)} s</text>",
    ]
    for index, one in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{x},{y}" for x, y in (at(t, v) for t, v in one["points"]))
        shape = "polyline" if len(one["points"]) > 1 else "circle"
        if shape == "circle":
            x, y = at(*one["points"][0])
            svg.append(f"<circle cx='{x}' cy='{y}' r='3' fill='{colour}'/>")
        else:
            svg.append(
                f"<polyline fill='none' stroke='{colour}' stroke-width='1.5' points='{path}'/>"
            )
        svg.append(
            f"<text x='{left}' y='{height + 14 + 20 * index}' fill='{colour}'>"
            f"{escape(one['node'])} {escape(one['device'])}</text>"
        )
    svg.append("</svg>")
    return "".join(svg)


def _size(size: float) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):g}{unit}"
    return f"{size:g}"


def _curve_plot(collective: str, curves: list[dict]) -> str:
    width, height, left, bottom = 560, 300, 60, 40
    points = [p for c in curves for p in c["points"] if p[0] > 0]
    if not points:
        return ""
    xs = [math.log2(p[0]) for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y1 = max(p[1] for p in points) * 1.1 or 1.0

    def at(size: float, bw: float) -> tuple[float, float]:
        x = left + (math.log2(size) - x0) / (x1 - x0) * (width - left - 20)
        y = height - bottom - bw / y1 * (height - bottom - 20)
        return round(x, 1), round(y, 1)

    svg = [
        *_frame(
            width,
            height,
            left,
            bottom,
            len(curves),
            f"{collective} busbw",
            f"{collective}: busbw (GB/s) by message size",
        ),
        f"<text x='4' y='28'>{fmt(y1)}</text>",
    ]
    for size in sorted({p[0] for p in points})[:: max(1, len(points) // 8 or 1)]:
        x, _ = at(size, 0)
        svg.append(f"<text x='{x - 10}' y='{height - bottom + 16}'>{_size(size)}</text>")
    for index, curve in enumerate(curves):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{x},{y}" for x, y in (at(s, b) for s, b in curve["points"] if s > 0))
        svg.append(f"<polyline fill='none' stroke='{colour}' stroke-width='2' points='{path}'/>")
        svg.append(
            f"<text x='{left}' y='{height + 14 + 20 * index}' fill='{colour}'>"
            f"{escape(curve['node'])}</text>"
        )
    svg.append("</svg>")
    return "".join(svg)


def _bar_plot(test: str, judgements: list[Judgement]) -> str:
    bar, gap, left, top = 22, 6, 180, 24
    width = 560
    height = top + len(judgements) * (bar + gap) + 10
    values = [j.value or 0.0 for j in judgements]
    limits = [j.threshold for j in judgements if j.threshold is not None]
    scale_max = max(values + limits) * 1.1 or 1.0
    unit = judgements[0].unit
    svg = [
        f"<svg width='{width}' height='{height}' role='img' aria-label='{escape(test)}'>",
        f"<text x='0' y='14'>{escape(test)} ({escape(unit)})</text>",
    ]
    for index, j in enumerate(judgements):
        y = top + index * (bar + gap)
        length = (j.value or 0.0) / scale_max * (width - left - 60)
        label = " ".join(p for p in (j.node, j.subject) if p)
        svg.append(f"<text x='0' y='{y + bar - 7}'>{escape(label[:28])}</text>")
        svg.append(
            f"<rect x='{left}' y='{y}' width='{length:.1f}' height='{bar}' "
            f"fill='{VERDICT_COLOURS[j.verdict.value]}'/>"
        )
        svg.append(
            f"<text x='{left + length + 4:.1f}' y='{y + bar - 7}'>{fmt(j.value or 0)}</text>"
        )
    for limit in sorted(set(limits)):
        x = left + limit / scale_max * (width - left - 60)
        svg.append(
            f"<line x1='{x:.1f}' y1='{top - 4}' x2='{x:.1f}' y2='{height - 6}' stroke='#000' "
            f"stroke-dasharray='4 3'><title>threshold {fmt(limit)} {escape(unit)}</title></line>"
        )
    svg.append("</svg>")
    return "".join(svg)

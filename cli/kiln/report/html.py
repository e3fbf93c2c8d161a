"""The HTML report: one self-contained page with the verdicts, the tables and the
plots (kiln.report.plots), drawn by Plotly whose JavaScript is embedded once in the
page: it opens offline, on an air-gapped network, or mailed to a vendor (about 5 MB;
docs/validation.md)."""

from html import escape

from kiln.report import plots, wording
from kiln.report.document import Report

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; font-size: 90%; }
.pass { color: #2ca02c; } .warn { color: #b38200; } .fail { color: #d62728; font-weight: bold; }
.skip { color: #7f7f7f; } .unchecked { color: #9467bd; font-weight: bold; }
.measured { color: #1f77b4; }
figure.plot { margin: 0.5em 0 1.5em 0; }
"""
# Plotly's options for every plot: no link to Plotly's site, no editing.
CONFIG = {"displaylogo": False, "responsive": True}
BARS = 48


def render(report: Report) -> str:
    verdict = report.verdict
    kind = report.kind
    sections = _plots(report)
    body = [
        f"<h1>Kiln {kind} {escape(report.id)}: <span class='{verdict.value}'>"
        f"{wording.headline(verdict)}</span></h1>",
        f"<p>Started {escape(report.started)}; inventory <code>{escape(report.inventory)}</code>;"
        f" profile {escape(report.profile or 'none (fleet only)')};"
        f" suites {escape(', '.join(report.suites))}.</p>",
        "<h2>Nodes</h2><table><tr><th>node</th><th>verdict</th><th>reason</th></tr>",
    ]
    for node in report.nodes:
        entry = report.node_verdict(node)
        body.append(
            f"<tr><td>{escape(node)}</td><td class='{entry['verdict']}'>{entry['verdict']}</td>"
            f"<td>{escape(wording.node_reason(entry))}</td></tr>"
        )
    body.append("</table>")
    for heading, drawn in sections:
        body.append(f"<h2>{escape(heading)}</h2>")
        body += [_figure(plot, f"plot-{index}") for index, plot in drawn]
    body.append(
        "<h2>Every test</h2><table><tr><th>node</th><th>test</th><th>subject</th>"
        "<th>value</th><th>threshold</th><th>verdict</th><th>reason</th></tr>"
    )
    for j in report.judgements:
        value, limit = j.shown()
        body.append(
            f"<tr><td>{escape(j.node)}</td><td>{escape(j.test)}</td><td>{escape(j.subject)}</td>"
            f"<td>{value}</td><td>{limit}</td><td class='{j.verdict.value}'>{j.verdict.value}"
            f"</td><td>{escape(j.reason)}</td></tr>"
        )
    body.append("</table>")
    if items := report.action_lines():
        body.append("<h2>Slurm</h2><ul>" + "".join(f"<li>{escape(i)}</li>" for i in items))
        body.append("</ul>")
    if report.notes:
        body.append("<h2>Notes</h2><ul>")
        body += [f"<li>{escape(note)}</li>" for note in report.notes]
        body.append("</ul>")
    head = [
        "<!DOCTYPE html>",
        f"<html><head><meta charset='utf-8'><title>Kiln {kind} {escape(report.id)}</title>",
        f"<style>{STYLE}</style>",
    ]
    if sections:  # the library once, before the first plot's script calls it
        from plotly.offline import get_plotlyjs

        head.append(f"<script type='text/javascript'>{get_plotlyjs()}</script>")
    return "\n".join([*head, "</head><body>", *body, "</body></html>"]) + "\n"


def _plots(report: Report) -> list[tuple[str, list[tuple[int, plots.Plot]]]]:
    """The report's sections of plots, each with its plots numbered across the page;
    a section without a plot is left out (no heading over nothing)."""
    judgements = report.judgements
    wanted: list[tuple[str, list[plots.Plot | None]]] = [
        (
            "Collectives: bus bandwidth against message size",
            [
                plots.curve_plot(
                    collective,
                    [c for c in report.curves if c["collective"] == collective],
                    judgements,
                )
                for collective in sorted({c["collective"] for c in report.curves})
            ],
        ),
        (
            "Over time",
            [
                plots.time_plot(
                    metric, [s for s in report.series if s["metric"] == metric], judgements
                )
                for metric in plots.METRICS
            ],
        ),
    ]
    measured = [j for j in judgements if j.value is not None]
    band = report.outlier_percent or plots.OUTLIER_PERCENT
    # The collectives' busbw is on the curves; a test of more values than BARS (a
    # burn-in's, a GPU a round) is shown in the fleet view only.
    tests = sorted({j.test for j in measured})
    barred = [
        t for t in tests
        if not t.startswith("collectives") and sum(j.test == t for j in measured) <= BARS
    ]  # fmt: skip
    wanted.append(
        (
            "Measured per node, against the threshold",
            [plots.bar_plot(t, [j for j in measured if j.test == t]) for t in barred],
        )
    )
    wanted.append(
        (
            "Across the fleet: per-GPU and per-node values against the fleet median",
            [plots.fleet_plot(t, [j for j in measured if j.test == t], band) for t in tests],
        )
    )
    sections, index = [], 0
    for heading, found in wanted:
        drawn = []
        for plot in found:
            if plot is not None:
                drawn.append((index, plot))
                index += 1
        if drawn:
            sections.append((heading, drawn))
    return sections


def _figure(plot: plots.Plot, div_id: str) -> str:
    """A plot in its figure element; the data-* attributes tell the browser tests what
    it should have drawn."""
    from plotly import graph_objects, io

    figure = graph_objects.Figure(plot.figure)
    drawn = io.to_html(
        figure, full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG
    )
    return (
        f"<figure class='plot' data-kind='{plot.kind}' data-thresholds='{plot.thresholds}'"
        f" aria-label='{escape(plot.title)}'>{drawn}</figure>"
    )

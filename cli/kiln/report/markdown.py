"""The Markdown summary: verdict per node, then every judged test."""

import html

from kiln.printable import printable
from kiln.report import wording
from kiln.report.document import Report


def render(report: Report) -> str:
    lines = [
        f"# Kiln {report.kind} {_cell(report.id)}: {wording.headline(report.verdict)}",
        "",
        f"- started {_cell(report.started)}, inventory `{printable(report.inventory)}`",
        f"- profile: {_cell(report.profile or 'none (judged against the fleet only)')}",
        f"- suites: {_cell(', '.join(report.suites))}; nodes: {len(report.nodes)}",
        "",
        "## Nodes",
        "",
        "| node | verdict | reason |",
        "|---|---|---|",
    ]
    for node in report.nodes:
        entry = report.node_verdict(node)
        reason = wording.node_reason(entry, most=2)
        lines.append(f"| {_cell(node)} | {entry['verdict']} | {_cell(reason)} |")
    lines += ["", "## Tests", "", "| node | test | subject | value | threshold | verdict |"]
    lines.append("|---|---|---|---|---|---|")
    for j in report.judgements:
        value, limit = j.shown()
        lines.append(
            f"| {_cell(j.node)} | {_cell(j.test)} | {_cell(j.subject)} | {value} | {limit} "
            f"| {j.verdict.value} |"
        )
    if actions := report.action_lines():
        lines += ["", "## Slurm", "", *[f"- {_cell(line)}" for line in actions]]
    if report.notes:
        lines += ["", "## Notes", "", *[f"- {_cell(note)}" for note in report.notes]]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Names and reasons come from the cluster: no HTML of theirs is rendered, a `|`
    does not split a table cell, and no control character reaches a terminal that
    shows the file (`kiln report show --format markdown`)."""
    return html.escape(printable(text), quote=False).replace("|", "\\|")

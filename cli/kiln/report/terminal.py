"""The terminal summary of a validation run: node x test, value, threshold, verdict.

Plain lines in columns (kiln.run.display.columns), the verdict coloured on a terminal:
a report of 100,000 nodes prints in seconds (a Rich table took minutes). Names,
reasons and notes come from the cluster: their control characters are escaped.
"""

import click

from kiln.printable import printable
from kiln.report.compare import Change
from kiln.report.document import Report
from kiln.run.display import columns
from kiln.validation.verdicts import fmt
from kiln_node import counted

# click.style's arguments; click.echo drops the colours where stdout is no terminal.
STYLES: dict[str, dict[str, str | bool]] = {
    "pass": {"fg": "green"},
    "warn": {"fg": "yellow"},
    "fail": {"fg": "red", "bold": True},
    "skip": {"dim": True},
    "measured": {"fg": "cyan"},
    "unchecked": {"fg": "magenta", "bold": True},
    "better": {"fg": "green"},
    "worse": {"fg": "red"},
}


def _styled(word: str, shown: str | None = None) -> str:
    """WORD (a verdict, a direction) in its colour, written as SHOWN."""
    return click.style(shown or word, **STYLES.get(word, {}))  # type: ignore[arg-type]


def _table(rows: list[tuple[str, ...]]) -> None:
    """Rows under their header, the last column (a verdict, a direction) coloured."""
    for index, line in enumerate(columns(rows)):
        last = rows[index][-1]
        if index and last and line.endswith(last):
            line = line[: -len(last)] + _styled(last)
        click.echo(line)


def show(report: Report) -> None:
    click.echo(printable(f"{report.kind} {report.id}: profile {report.profile or 'none'}"))
    # A burn-in judges every device every round: the terminal shows what did not pass
    # (the HTML report and report.json keep them all).
    shown = report.judgements
    if report.kind == "burn-in":
        shown = [j for j in shown if j.verdict.value != "pass"]
    rows = [("node", "test", "subject", "value", "threshold", "verdict")]
    for j in shown:
        value, limit = j.shown()
        rows.append((j.node, j.test, j.subject, value or _said(j.reason), limit, j.verdict.value))
    if shown or not report.judgements:
        _table(rows)
    else:
        passed = f"all {len(report.judgements)} judgements passed"
        click.echo(printable(f"{report.kind} {report.id}: {passed}"))
    for node in report.nodes:
        entry = report.node_verdict(node)
        if entry["verdict"] in ("warn", "unchecked", "fail") and entry["reasons"]:
            said = printable(f"{node}: {entry['reasons'][0]}")
            click.echo(f"{_styled(entry['verdict'])} {said}")
    for line in report.action_lines():
        click.echo(printable(line))
    for note in report.notes:
        click.echo(printable(f"note: {note}"))
    click.echo(summary(report))


# The order a summary counts nodes in: what needs a look first.
SUMMARY_ORDER = ["fail", "unchecked", "warn", "measured", "skip", "pass"]


def summary(report: Report) -> str:
    """The last line: the verdict and the nodes, counted by verdict where they differ
    ("FAIL 2 nodes: 1 fail, 1 pass", never "FAIL 2 nodes" for one failure)."""
    verdict = report.verdict.value
    line = f"{_styled(verdict, verdict.upper())} {counted(len(report.nodes), 'node')}"
    found = [str(report.node_verdict(node)["verdict"]) for node in report.nodes]
    if len(set(found)) > 1:
        line += ": " + ", ".join(f"{found.count(v)} {v}" for v in SUMMARY_ORDER if found.count(v))
    return line


def _said(reason: str) -> str:
    """What a check found, short: the part of its reason after the test's name."""
    text = reason.split(": ", 1)[-1]
    return text if len(text) <= 40 else text[:39] + "…"


def show_changes(changes: list[Change]) -> None:
    rows = [("node", "test", "subject", "before", "after", "change", "")]
    for c in changes:
        before = (
            f"{fmt(c.before)} {c.unit} {c.verdict_before}"
            if c.before is not None
            else c.verdict_before or "-"
        )
        after = (
            f"{fmt(c.after)} {c.unit} {c.verdict_after}"
            if c.after is not None
            else c.verdict_after or "-"
        )
        percent = f"{c.percent:+.0f}%" if c.percent is not None else ""
        node = f"{c.node_before} -> {c.node}" if c.node_before else c.node
        rows.append((node, c.test, c.subject, before, after, percent, c.direction))
    _table(rows)

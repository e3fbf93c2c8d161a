"""The terminal summary of a validation run: node x test, value, threshold, verdict."""

import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kiln.report.compare import Change
from kiln.report.model import Report
from kiln.validation.verdicts import fmt

STYLES = {
    "pass": "green",
    "warn": "yellow",
    "fail": "bold red",
    "skip": "dim",
    "unchecked": "bold magenta",
    "better": "green",
    "worse": "red",
}


def _console() -> Console:
    # Not a terminal (CI logs, pipes): wide enough that test names are not cut.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def show(report: Report, console: Console | None = None) -> None:
    console = console or _console()
    table = Table(title=f"{report.kind} {report.id}: profile {report.profile or 'none'}", box=None)
    for column in ("node", "test", "subject", "value", "threshold", "verdict"):
        table.add_column(column)
    # A burn-in judges every device every round: the terminal shows what did not pass
    # (the HTML report and report.json keep them all).
    shown = report.judgements
    if report.kind == "burn-in":
        shown = [j for j in shown if j.verdict.value != "pass"]
    for j in shown:
        style = STYLES[j.verdict.value]
        value, limit = j.shown()
        table.add_row(
            escape(j.node),
            escape(j.test),
            escape(j.subject),
            value or escape(_said(j.reason)),
            limit,
            f"[{style}]{j.verdict.value}[/{style}]",
        )
    if shown or not report.judgements:
        console.print(table)
    else:
        console.print(f"{report.kind} {report.id}: all {len(report.judgements)} judgements passed")
    for node in report.nodes:
        entry = report.node_verdict(node)
        if entry["verdict"] in ("warn", "unchecked", "fail") and entry["reasons"]:
            style = STYLES[entry["verdict"]]
            # Names and reasons come from the cluster: "[/path]" in one is text, not markup.
            said = escape(f"{node}: {entry['reasons'][0]}")
            console.print(f"[{style}]{entry['verdict']}[/{style}] {said}")
    for line in report.action_lines():
        console.print(line, markup=False)
    for note in report.notes:
        console.print(f"note: {note}", markup=False)
    verdict = report.verdict.value
    console.print(
        f"[{STYLES[verdict]}]{verdict.upper()}[/{STYLES[verdict]}] {len(report.nodes)} nodes"
    )


def _said(reason: str) -> str:
    """What a check found, short: the part of its reason after the test's name."""
    text = reason.split(": ", 1)[-1]
    return text if len(text) <= 40 else text[:39] + "…"


def show_changes(changes: list[Change], console: Console | None = None) -> None:
    console = console or _console()
    table = Table(box=None)
    for column in ("node", "test", "subject", "before", "after", "change", ""):
        table.add_column(column)
    for c in changes:
        percent = f"{c.percent:+.0f}%" if c.percent is not None else ""
        style = STYLES.get(c.direction, "")
        table.add_row(
            escape(f"{c.node_before} -> {c.node}" if c.node_before else c.node),
            escape(c.test),
            escape(c.subject),
            f"{fmt(c.before)} {c.unit} {c.verdict_before}"
            if c.before is not None
            else c.verdict_before or "-",
            f"{fmt(c.after)} {c.unit} {c.verdict_after}"
            if c.after is not None
            else c.verdict_after or "-",
            percent,
            f"[{style}]{c.direction}[/{style}]" if style else c.direction,
        )
    console.print(table)

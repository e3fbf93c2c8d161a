"""Render run summaries for people (rich on a terminal, plain text otherwise) and machines."""

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from kiln.summary import RunSummary


def emit_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def run_summary(summary: RunSummary, console: Console | None = None) -> None:
    console = console or Console(highlight=False, soft_wrap=True)
    table = Table(title=f"run {summary.run}: {summary.playbook} {summary.status}", box=None)
    for column in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
        table.add_column(column, justify="left" if column == "host" else "right")
    for host, c in sorted(summary.hosts.items()):
        bad = c.failed or c.unreachable
        table.add_row(
            f"[red]{host}" if bad else host,
            str(c.ok),
            str(c.changed),
            str(c.failed),
            str(c.unreachable),
            str(c.skipped),
        )
    console.print(table)
    for failure in summary.failures:
        kind = "unreachable" if failure.unreachable else "failed"
        console.print(f"[red]{kind}[/red] {failure.host}: {failure.task}: {failure.message}")
    if summary.error:
        console.print(f"[red]error[/red]: {summary.error}")
    total_changed = sum(c.changed for c in summary.hosts.values())
    console.print(f"changed={total_changed} exit={int(summary.exit_code)}")

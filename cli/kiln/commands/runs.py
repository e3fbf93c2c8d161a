"""`kiln runs list | show RUN`: past runs, re-rendered from their kept artifacts."""

import sys

import click
from rich.console import Console
from rich.table import Table

from kiln.commands import Whole, warn
from kiln.run import display
from kiln.run import record as run_records


@click.group("runs")
def runs() -> None:
    """Past runs, kept under Kiln's state directory."""


@runs.command("list")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
@click.option(
    "-n",
    "--last",
    type=Whole(min=1),
    default=20,
    show_default=True,
    help="How many to list.",
)
def list_runs(json_mode: bool, last: int) -> None:
    """List runs, newest first."""
    problems: list[str] = []
    records = run_records.list_records(problems)[:last]
    for problem in problems:
        warn(f"{problem}; skipped")
    if json_mode:
        display.emit_json({"runs": [r.model_dump() for r in records]})
        return
    table = Table(box=None)
    for column in ("run", "playbook", "status", "exit", "started", "limit"):
        # Ids are copied from logs and pipes too: never cut them.
        table.add_column(column, no_wrap=column != "limit", overflow="fold")
    for r in records:
        exit_code = "" if r.exit_code is None else str(r.exit_code)
        # One part of a sliced provision run alone (--part) says which: its limit does not.
        playbook = f"{r.playbook} ({r.part} of {r.slices})" if r.part else r.playbook
        cells = (r.run, playbook, r.status, exit_code, r.started, r.limit or "")
        table.add_row(*(display.shown(cell) for cell in cells))
    width = None if sys.stdout.isatty() else 200
    Console(highlight=False, width=width).print(table)


@runs.command("show")
@click.argument("run", default="latest")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
@click.option(
    "--slowest",
    type=Whole(min=1),
    help="Also list the N tasks that took longest (wall time across their hosts).",
)
def show(run: str, json_mode: bool, slowest: int | None) -> None:
    """Re-render a past run's summary (RUN: an id, a unique prefix, or 'latest')."""
    from kiln.run import timings

    record, run_dir = run_records.find(run)
    problems: list[str] = []
    summary = run_records.replay(record, run_dir, problems)
    for problem in problems:
        warn(f"{problem}; skipped")
    events = run_records.load_events(run_dir, record=record) if slowest else []
    tasks = timings.slowest(events, slowest) if slowest else []
    if json_mode:
        shown = summary.to_json()
        if slowest:
            shown["slowest"] = [t.to_json() for t in tasks]
        display.emit_json(shown)
        return
    display.run_summary(summary)
    if slowest:
        table = Table(box=None, title=f"slowest {len(tasks)} tasks", title_justify="left")
        for column in ("seconds", "task", "hosts", "slowest host"):
            table.add_column(column, overflow="fold")
        for t in tasks:
            slow = f"{display.shown(t.slowest_host)} ({t.slowest_seconds:.1f}s)"
            table.add_row(f"{t.seconds:.1f}", display.shown(t.task), str(t.hosts), slow)
        width = None if sys.stdout.isatty() else 200
        Console(highlight=False, width=width).print(table)

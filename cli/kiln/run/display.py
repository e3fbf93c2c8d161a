"""What a person or a program sees of a run: live progress (a rich display on a
terminal, one line per event otherwise, nothing for --json), then the summary, or one
JSON object."""

import sys
from collections.abc import Callable
from typing import Any, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kiln import files
from kiln.printable import printable
from kiln.run.events import EventAccumulator, RunSummary, failure_message, outcome


class Display(Protocol):
    def __enter__(self) -> "Display": ...
    def __exit__(self, *exc: object) -> None: ...
    def update(self, event: dict[str, Any], acc: EventAccumulator) -> None: ...


class NoDisplay:
    """For --json: nothing but the final object goes to stdout."""

    def __enter__(self) -> "NoDisplay":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, event: dict[str, Any], acc: EventAccumulator) -> None:
        pass


class PlainDisplay:
    """One line per host result: readable in CI logs and pipes. PREFIX starts each line:
    a sliced run's parts print side by side, each line saying whose it is."""

    def __init__(self, stream: Any = None, prefix: str = "") -> None:
        self.stream = stream or sys.stdout
        self.prefix = prefix

    def __enter__(self) -> "PlainDisplay":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, event: dict[str, Any], acc: EventAccumulator) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            line = f"{self.prefix}PLAY {data.get('play', '')}"
            print(printable(line), file=self.stream, flush=True)
            return
        result = outcome(event)
        if result is None:
            return
        line = f"{self.prefix}{result.label:<11} {result.host}  {result.task}"
        if result.failed:
            line += f": {failure_message(result.res)}"
        print(printable(line), file=self.stream, flush=True)


class LiveDisplay:
    """A table with one line per host and an overall bar, redrawn as events arrive."""

    def __init__(self, title: str, expected_tasks: int | None, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self.bar = self.progress.add_task(title, total=expected_tasks)
        # Transient: the run summary printed afterwards replaces the live view.
        self.live = Live(console=console, refresh_per_second=8, transient=True)
        self.acc: EventAccumulator | None = None

    def __enter__(self) -> "LiveDisplay":
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def update(self, event: dict[str, Any], acc: EventAccumulator) -> None:
        self.acc = acc
        total = self.progress.tasks[0].total
        if total is not None and acc.tasks_started > total:
            total = None  # the estimate from the last run was short; stop pretending
        self.progress.update(self.bar, completed=acc.tasks_started, total=total)
        self.live.update(self._render())

    def _render(self) -> Group:
        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("host", "task", "ok", "changed", "failed", "unreachable"):
            table.add_column(column, justify="right" if column not in ("host", "task") else "left")
        if self.acc:
            for host, counts in sorted(self.acc.summary.hosts.items()):
                task = self.acc.current_task.get(host, "")
                table.add_row(
                    shown(host),
                    shown(task[:60]),
                    str(counts.ok),
                    f"[yellow]{counts.changed}" if counts.changed else "0",
                    f"[red]{counts.failed}" if counts.failed else "0",
                    f"[red]{counts.unreachable}" if counts.unreachable else "0",
                )
        return Group(self.progress, table)


# What a run is shown with: made from its title and the tasks the last such run started.
Displays = Callable[[str, int | None], Display]


def for_people(title: str, expected_tasks: int | None) -> Display:
    """A live table on a terminal; one plain line per result in logs and pipes."""
    console = Console()
    if console.is_terminal:
        return LiveDisplay(title, expected_tasks, console)
    return PlainDisplay()


def silent(title: str, expected_tasks: int | None) -> Display:
    """For --json: nothing but the final object goes to stdout."""
    return NoDisplay()


def prefixed(title: str, expected_tasks: int | None) -> Display:
    """For the parts of a sliced run, side by side: plain lines, each starting with the
    part's name (the first word of TITLE), on a terminal too (one live table per part
    would overwrite the others')."""
    return PlainDisplay(prefix=f"[{title.split(' ')[0]}] ")


def for_output(json_mode: bool) -> Displays:
    return silent if json_mode else for_people


def emit_json(obj: Any) -> None:
    print(files.json_text(obj))


def shown(text: str) -> str:
    """Text from outside (nodes, Ansible, records) for a Rich console: its control
    characters escaped, its "[...]" text rather than markup."""
    return escape(printable(text))


def columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as lines of left-aligned columns, two spaces apart: plain text, so a table
    of 100,000 hosts prints in a fraction of a second (a Rich table took some 40 s).
    Cells hold names and words from outside: their control characters are escaped."""
    rows = [tuple(printable(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))] if rows else []
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def run_summary(summary: RunSummary, console: Console | None = None) -> None:
    console = console or Console(highlight=False, soft_wrap=True)
    # Everything here comes from Ansible and the nodes: text, never markup.
    title = shown(f"run {summary.run}: {summary.playbook} {summary.status}")
    table = Table(title=title, box=None)
    for column in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
        table.add_column(column, justify="left" if column == "host" else "right")
    for host, c in sorted(summary.hosts.items()):
        bad = c.failed or c.unreachable
        table.add_row(
            f"[red]{shown(host)}" if bad else shown(host),
            str(c.ok),
            str(c.changed),
            str(c.failed),
            str(c.unreachable),
            str(c.skipped),
        )
    console.print(table)
    for failure in summary.failures:
        kind = "unreachable" if failure.unreachable else "failed"
        what = shown(f"{failure.host}: {failure.task}: {failure.message}")
        console.print(f"[red]{kind}[/red] {what}")
    for host, notes in sorted(summary.notes.items()):
        for note in notes:
            console.print(f"[cyan]note[/cyan] {shown(f'{host}: {note}')}")
    if summary.error:
        console.print(f"[red]error[/red]: {shown(summary.error)}")
    total_changed = sum(c.changed for c in summary.hosts.values())
    console.print(f"changed={total_changed} exit={int(summary.exit_code)}")

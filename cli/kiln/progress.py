"""Live progress for a run: a rich display on a terminal, one line per event otherwise."""

import sys
from typing import Any, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kiln.summary import EventAccumulator, failure_message

_RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "FAILED",
    "runner_on_skipped": "skipping",
    "runner_on_unreachable": "UNREACHABLE",
}


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
    """One line per host result: readable in CI logs and pipes."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stdout

    def __enter__(self) -> "PlainDisplay":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, event: dict[str, Any], acc: EventAccumulator) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            print(f"PLAY {data.get('play', '')}", file=self.stream, flush=True)
            return
        label = _RESULT_EVENTS.get(kind)
        if label is None:
            return
        res = data.get("res") or {}
        if kind == "runner_on_ok" and res.get("changed"):
            label = "changed"
        if kind == "runner_on_failed" and data.get("ignore_errors"):
            label = "ignored"
        line = f"{label:<11} {data.get('host', '?')}  {data.get('task', '')}"
        if label in ("FAILED", "UNREACHABLE"):
            line += f": {failure_message(res)}"
        print(line, file=self.stream, flush=True)


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
                    host,
                    task[:60],
                    str(counts.ok),
                    f"[yellow]{counts.changed}" if counts.changed else "0",
                    f"[red]{counts.failed}" if counts.failed else "0",
                    f"[red]{counts.unreachable}" if counts.unreachable else "0",
                )
        return Group(self.progress, table)


def choose(json_mode: bool, title: str, expected_tasks: int | None) -> Display:
    if json_mode:
        return NoDisplay()
    console = Console()
    if console.is_terminal:
        return LiveDisplay(title, expected_tasks, console)
    return PlainDisplay()

#!/usr/bin/env python3
"""Kiln's own CPU cost per Ansible event, and where a kept run's time went (run by hand;
no lab needed).

    .venv/bin/python bench/events.py [--run RUN] [--repeats 3] [--top 10]
                                     [--ansible-cpu-s X --events N] [--wall-s S]

Feeds a stream of ansible-runner job events through the code a `kiln` run puts each
event through, in Kiln's process, and times each part in CPU seconds
(time.process_time, all threads):
  handler       kiln.run.events.EventAccumulator.feed (the run summary)
  runner_merge  ansible-runner's Runner.event_callback with a handler that keeps
                nothing: it reads and removes the callback plugin's partial file, merges
                it into what came on Ansible's stdout (ansible-runner's own cost)
  record        the same with a handler that keeps the event, as Kiln's does: it also
                writes job_events/N-UUID.json, the run record `kiln runs show` replays
  plain         kiln.run.display.PlainDisplay.update, to a file (a pipe, CI logs)
  live          kiln.run.display.LiveDisplay.update on a terminal console (no redraw)
  total_plain / total_live
                Runner.event_callback with kiln.run.execute.event_handler: all of it
The live display also redraws 8 times a second whatever the events: live_redraw_us is
one redraw, a cost per second of the run rather than per event.

The stream is a kept run's job events (--run: a run id, 'latest', or a run directory
under KILN_STATE_DIR/runs), else a synthetic no-op provision of 226 tasks on 4 hosts.
Each part's figure is the fastest of --repeats passes. With --ansible-cpu-s (Ansible's
controller CPU seconds for a real run) and --events (that run's event count), it also
prints Kiln's share of Ansible's CPU per event. With --run, it prints where the run's
time went: task wall time summed by role and by module (kiln.run.timings).
"""

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ansible_runner.runner import Runner
from rich.console import Console

from kiln.errors import KilnError
from kiln.run import record, timings
from kiln.run.display import LiveDisplay, PlainDisplay
from kiln.run.events import EventAccumulator
from kiln.run.execute import event_handler

# The lab's no-op provision: steps and hosts (docs/performance.md).
TASKS = 226
HOSTS = 4
# Redraws a second of the live display (kiln.run.display.LiveDisplay).
REDRAWS_PER_S = 8
# Top-level fields that ansible-runner reads from Ansible's stdout; the rest of an
# event comes from the callback plugin's partial file.
STDOUT_FIELDS = ("uuid", "counter", "stdout", "start_line", "end_line")


def _event(counter: int, kind: str, data: dict[str, Any], stdout: str = "") -> dict[str, Any]:
    return {
        "uuid": str(uuid.UUID(int=counter)),
        "counter": counter,
        "stdout": stdout,
        "start_line": counter,
        "end_line": counter + 1,
        "runner_ident": record.RUNNER_IDENT,
        "event": kind,
        "pid": 4242,
        "created": data.get("end") or "2026-11-27T00:00:00+00:00",
        "event_data": data,
    }


def _res(task: int) -> dict[str, Any]:
    """A no-op module result shaped like the lab's: mostly a command's or a file's few
    hundred bytes; facts at the start, and now and then a large one (a copied library
    of ~60 KB, a long stdout)."""
    res: dict[str, Any] = {
        "changed": False,
        "invocation": {"module_args": {"path": f"/etc/kiln/{task}.conf", "state": "file"}},
        "_ansible_no_log": False,
    }
    if task == 0:
        res["ansible_facts"] = {f"ansible_fact_{i}": "x" * 40 for i in range(400)}
    elif task % 40 == 7:
        res["stdout"] = "line of output\n" * 4000
        res["stdout_lines"] = ["line of output"] * 4000
    else:
        res.update(stdout="0", stderr="", rc=0, stdout_lines=["0"], stderr_lines=[])
    return res


def synthetic_events(tasks: int = TASKS, hosts: int = HOSTS) -> list[dict[str, Any]]:
    """A no-op provision's events: a play per 20 tasks; each task started, then each
    host's start and result (2 tasks in 5 skipped), then the stats."""
    names = [f"node{h:02d}" for h in range(1, hosts + 1)]
    events = [_event(1, "playbook_on_start", {"playbook": "site.yml"})]
    clock = datetime(2026, 11, 27, tzinfo=UTC)
    skipped = 0
    for task in range(tasks):
        counter = len(events) + 1
        role = f"role{task // 20:02d}"
        module = ("ansible.builtin.command", "ansible.builtin.file", "ansible.builtin.copy")[
            task % 3
        ]
        common = {
            "playbook": "site.yml",
            "play": f"Play {task // 20}",
            "task": f"Task {task}",
            "task_uuid": f"task-{task}",
            "role": role,
            "task_action": module,
            "resolved_action": module,
        }
        if task % 20 == 0:
            events.append(_event(counter, "playbook_on_play_start", {"play": common["play"]}))
            counter += 1
        stdout = f"\r\nTASK [{role} : Task {task}] " + "*" * 50
        events.append(_event(counter, "playbook_on_task_start", common, stdout))
        skip = task % 5 in (1, 3)
        skipped += skip
        for host in names:
            start, clock = clock, clock + timedelta(seconds=0.05)
            data = {**common, "host": host, "remote_addr": host}
            events.append(_event(len(events) + 1, "runner_on_start", data))
            data = {**data, "start": start.isoformat(), "end": clock.isoformat(), "duration": 0.05}
            if skip:
                data["res"] = {"changed": False, "skip_reason": "Conditional result was False"}
                kind, line = "runner_on_skipped", f"skipping: [{host}]"
            else:
                data["res"] = _res(task)
                kind, line = "runner_on_ok", f"ok: [{host}]"
            events.append(_event(len(events) + 1, kind, data, line))
    stats = {
        "ok": dict.fromkeys(names, tasks - skipped),
        "changed": {},
        "failures": {},
        "dark": {},
        "skipped": dict.fromkeys(names, skipped),
    }
    events.append(_event(len(events) + 1, "playbook_on_stats", stats))
    return events


def _runner(artifacts: Path, handler: Callable[[dict], bool]) -> Runner:
    """ansible-runner's Runner, as far as its event_callback needs one."""
    (artifacts / "job_events").mkdir(parents=True, exist_ok=True)
    config = SimpleNamespace(
        artifact_dir=str(artifacts), ident=record.RUNNER_IDENT, check_job_event_data=False
    )
    return Runner(config, event_handler=handler)


def _partials(events: list[dict[str, Any]], artifacts: Path) -> list[dict[str, Any]]:
    """Write each event's partial file as Ansible's callback plugin does (Ansible's cost,
    untimed), and return what ansible-runner reads from Ansible's stdout for each."""
    job_events = artifacts / "job_events"
    job_events.mkdir(parents=True, exist_ok=True)
    for event in events:
        partial = {k: v for k, v in event.items() if k not in STDOUT_FIELDS[2:]}
        (job_events / f"{event['uuid']}-partial.json").write_text(json.dumps(partial))
    return [{k: event[k] for k in STDOUT_FIELDS if k in event} for event in events]


def _live(console_file: Any) -> LiveDisplay:
    console = Console(file=console_file, force_terminal=True, width=120, height=40)
    return LiveDisplay("site.yml (bench)", TASKS, console)


def _cpu(work: Callable[[], None]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def measure(events: list[dict[str, Any]]) -> dict[str, float]:
    """CPU seconds of one pass of each part over the events (see the module's text)."""
    figures = {}
    sink = open(os.devnull, "w")  # noqa: SIM115 - closed below
    try:
        acc = EventAccumulator("bench", "site.yml")
        figures["handler"] = _cpu(lambda: [acc.feed(e) for e in events])

        plain, acc = PlainDisplay(sink), _fed(events)
        figures["plain"] = _cpu(lambda: [plain.update(e, acc) for e in events])
        live, acc = _live(io.StringIO()), _fed(events)
        figures["live"] = _cpu(lambda: [live.update(e, acc) for e in events])
        live.live.auto_refresh = False  # redrawn here, not by Rich's thread
        with live:
            figures["live_redraw"] = _cpu(lambda: [live.live.refresh() for _ in range(50)]) / 50

        with tempfile.TemporaryDirectory(prefix="kiln-bench-") as scratch:
            for part, handler in (
                ("runner_merge", lambda event: False),
                ("record", lambda event: True),
                ("total_plain", event_handler(EventAccumulator("b", "s"), PlainDisplay(sink))),
                ("total_live", event_handler(EventAccumulator("b", "s"), _live(io.StringIO()))),
            ):
                artifacts = Path(scratch) / part
                arriving = _partials(events, artifacts)
                runner = _runner(artifacts, handler)
                figures[part] = _cpu(lambda r=runner, a=arriving: [r.event_callback(e) for e in a])
    finally:
        sink.close()
    return figures


def _fed(events: list[dict[str, Any]]) -> EventAccumulator:
    """An accumulator that has seen the run: what the display draws from."""
    acc = EventAccumulator("bench", "site.yml")
    for event in events:
        acc.feed(event)
    return acc


def costs(events: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """Microseconds of CPU per event for each part, the fastest of `repeats` passes."""
    passes = [measure(events) for _ in range(repeats)]
    best = {part: min(p[part] for p in passes) for part in passes[0]}
    per_event = {
        part: round(s / len(events) * 1e6, 1) for part, s in best.items() if part != "live_redraw"
    }
    return {
        "events": len(events),
        "per_event_us": per_event,
        "events_per_s": {
            part: round(len(events) / best[part]) if best[part] else None
            for part in ("total_plain", "total_live")
        },
        "live_redraw_us": round(best["live_redraw"] * 1e6, 1),
        "live_redraw_cpu_per_s": round(best["live_redraw"] * REDRAWS_PER_S, 4),
    }


def share(figures: dict[str, Any], ansible_cpu_s: float, events: int, wall_s: float | None):
    """Kiln's CPU per event as a share of Ansible's controller CPU per event; the live
    display's redraws counted over the run's wall time when it is known."""
    ansible_us = ansible_cpu_s / events * 1e6
    per_event = figures["per_event_us"]
    result = {
        "ansible_per_event_us": round(ansible_us, 1),
        "plain": round(per_event["total_plain"] / ansible_us, 4),
        "live": round(per_event["total_live"] / ansible_us, 4),
    }
    if wall_s:
        redraw_us = figures["live_redraw_cpu_per_s"] * wall_s / events * 1e6
        result["live_with_redraws"] = round((per_event["total_live"] + redraw_us) / ansible_us, 4)
    return result


def wall_seconds(events: list[dict[str, Any]]) -> float | None:
    """From the first event's creation to the last's."""
    created = [datetime.fromisoformat(e["created"]) for e in events if e.get("created")]
    return (max(created) - min(created)).total_seconds() if created else None


def where_time_goes(events: list[dict[str, Any]], top: int) -> dict[str, Any]:
    """The run's steps, and its task time summed by role and by module, longest first."""
    tasks = timings.task_times(events)
    return {
        "tasks_started": sum(e.get("event") == "playbook_on_task_start" for e in events),
        "steps": len(tasks),
        "results": sum(t.hosts for t in tasks),
        "seconds": round(sum(t.seconds for t in tasks), 3),
        "host_seconds": round(sum(t.host_seconds for t in tasks), 3),
        "by_role": [g.to_json() for g in timings.grouped(tasks, lambda t: t.role)[:top]],
        "by_module": [g.to_json() for g in timings.grouped(tasks, lambda t: t.module)[:top]],
    }


def run_dir(run: str) -> Path:
    """A kept run's directory: the directory itself, or a run id under the state dir."""
    given = Path(run)
    if record.events_dir(given).is_dir():
        return given
    return record.find(run)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="a kept run: id, 'latest', or its directory")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--ansible-cpu-s", type=float, help="Ansible's controller CPU seconds")
    parser.add_argument("--events", type=int, help="the events of that Ansible run")
    parser.add_argument("--wall-s", type=float, help="that run's wall seconds")
    options = parser.parse_args()
    if (options.ansible_cpu_s is None) != (options.events is None):
        sys.exit("--ansible-cpu-s and --events go together")
    try:
        events = record.load_events(run_dir(options.run)) if options.run else synthetic_events()
    except KilnError as exc:
        sys.exit(str(exc))
    if not events:
        sys.exit(f"no job events in run {options.run}")
    figures: dict[str, Any] = {"source": options.run or f"synthetic {TASKS} tasks x {HOSTS}"}
    figures.update(costs(events, options.repeats))
    wall_s = options.wall_s or (wall_seconds(events) if options.run else None)
    if options.ansible_cpu_s is not None:
        figures["share_of_ansible"] = share(figures, options.ansible_cpu_s, options.events, wall_s)
    if options.run:
        figures["run_wall_s"] = wall_s
        figures["where_time_goes"] = where_time_goes(events, options.top)
    figures.update(
        cpus=os.cpu_count(),
        python=platform.python_version(),
        date=datetime.now(UTC).date().isoformat(),
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

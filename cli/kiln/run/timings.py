"""Where a run's time went: each task's wall time from ansible-runner's job events,
slowest first (`kiln runs show --slowest N`), and summed by role or module
(bench/events.py)."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kiln.run.events import RESULT_EVENTS, EventData, JobEvent


@dataclass(frozen=True)
class TaskTime:
    task: str  # "role : name", as Ansible prints it
    seconds: float  # from the first host's start to the last host's end
    hosts: int
    slowest_host: str
    slowest_seconds: float
    role: str = ""
    module: str = ""  # the action Ansible resolved it to (ansible.builtin.copy)
    host_seconds: float = 0.0  # each host's duration, summed

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "seconds": round(self.seconds, 3),
            "hosts": self.hosts,
            "slowest_host": self.slowest_host,
            "slowest_seconds": round(self.slowest_seconds, 3),
        }


@dataclass(frozen=True)
class GroupTime:
    name: str
    steps: int  # tasks
    results: int  # host results of those tasks
    seconds: float  # the tasks' wall times, summed
    host_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "steps": self.steps,
            "results": self.results,
            "seconds": round(self.seconds, 3),
            "host_seconds": round(self.host_seconds, 3),
        }


def task_times(events: list[dict[str, Any]]) -> list[TaskTime]:
    """Every task that reported a host's result, in the order it first did. Each
    event's fields are read through its typed record (kiln.run.events.JobEvent)."""
    by_task: dict[str, list[EventData]] = {}
    for raw in events:
        event = JobEvent.model_validate(raw)
        data = event.event_data
        if event.event in RESULT_EVENTS and data and data.start and data.end:
            by_task.setdefault(data.task_uuid or data.task, []).append(data)
    found = []
    for results in by_task.values():
        start = min(d.start for d in results if d.start)
        end = max(d.end for d in results if d.end)
        slow = max(results, key=lambda d: d.duration or 0.0)
        found.append(
            TaskTime(
                task=f"{slow.role} : {slow.task}" if slow.role else slow.task,
                seconds=(end - start).total_seconds(),
                hosts=len({d.host for d in results}),
                slowest_host=slow.host or "",
                slowest_seconds=slow.duration or 0.0,
                role=slow.role or "",
                module=slow.resolved_action or slow.task_action or "",
                host_seconds=sum(d.duration or 0.0 for d in results),
            )
        )
    return found


def slowest(events: list[dict[str, Any]], count: int) -> list[TaskTime]:
    """The `count` tasks that took longest, by wall time across their hosts."""
    return sorted(task_times(events), key=lambda t: t.seconds, reverse=True)[:count]


def grouped(tasks: list[TaskTime], key: Callable[[TaskTime], str]) -> list[GroupTime]:
    """Tasks' times summed by `key` (the role, the module), longest first."""
    groups: dict[str, list[TaskTime]] = {}
    for task in tasks:
        groups.setdefault(key(task) or "(none)", []).append(task)
    found = [
        GroupTime(
            name=name,
            steps=len(members),
            results=sum(t.hosts for t in members),
            seconds=sum(t.seconds for t in members),
            host_seconds=sum(t.host_seconds for t in members),
        )
        for name, members in groups.items()
    ]
    return sorted(found, key=lambda g: (-g.seconds, g.name))

"""Where a run's time went: each task's wall time from ansible-runner's job events,
slowest first (`kiln runs show --slowest N`)."""

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

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "seconds": round(self.seconds, 3),
            "hosts": self.hosts,
            "slowest_host": self.slowest_host,
            "slowest_seconds": round(self.slowest_seconds, 3),
        }


def slowest(events: list[dict[str, Any]], count: int) -> list[TaskTime]:
    """The `count` tasks that took longest, by wall time across their hosts. Each
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
            )
        )
    return sorted(found, key=lambda t: t.seconds, reverse=True)[:count]

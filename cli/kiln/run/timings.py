"""Where a run's time went: each task's wall time from ansible-runner's job events,
slowest first (`kiln runs show --slowest N`)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

# The events that end a task on one host; each carries its start, end and duration.
RESULT_EVENTS = (
    "runner_on_ok",
    "runner_on_failed",
    "runner_on_skipped",
    "runner_on_unreachable",
)


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


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def slowest(events: list[dict[str, Any]], count: int) -> list[TaskTime]:
    """The `count` tasks that took longest, by wall time across their hosts."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        data = event.get("event_data") or {}
        if (
            event.get("event") in RESULT_EVENTS
            and _when(data.get("start"))
            and _when(data.get("end"))
        ):
            by_task.setdefault(data.get("task_uuid") or data.get("task", ""), []).append(data)
    found = []
    for results in by_task.values():
        start = min(_when(d["start"]) for d in results)
        end = max(_when(d["end"]) for d in results)
        slow = max(results, key=lambda d: d.get("duration") or 0.0)
        name = slow.get("task", "")
        found.append(
            TaskTime(
                task=f"{slow['role']} : {name}" if slow.get("role") else name,
                seconds=(end - start).total_seconds(),  # type: ignore[operator]
                hosts=len({d.get("host") for d in results}),
                slowest_host=slow.get("host", ""),
                slowest_seconds=float(slow.get("duration") or 0.0),
            )
        )
    return sorted(found, key=lambda t: t.seconds, reverse=True)[:count]

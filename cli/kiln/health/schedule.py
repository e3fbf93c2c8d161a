"""`kiln health --schedule`: the scheduled active check (the health role's
kiln-health-active and its systemd timer on the first controller) as the control node
sees it: when it runs next, what its runs found, each run kept in the report history
like a `kiln validate` run (kiln.campaigns.health_active concludes each).

The node and controller programs decide; this module reads their records."""

from dataclasses import dataclass, field
from typing import Any

from kiln.campaigns.health_active import RunRecord, import_runs, read_records
from kiln.inventory.spec import ClusterSpec
from kiln.run.display import Displays

PLAYBOOK = "health_schedule.yml"


@dataclass
class Timer:
    load_state: str = ""  # loaded / not-found
    active_state: str = ""
    calendar: str = ""  # the OnCalendar expression
    next_run: str = ""
    last_run: str = ""

    @property
    def installed(self) -> bool:
        return self.load_state == "loaded"


@dataclass
class Schedule:
    controller: str
    timer: Timer
    runs: list[RunRecord] = field(default_factory=list)  # oldest first
    unreadable: list[str] = field(default_factory=list)  # a line per record not read
    imported: list[str] = field(default_factory=list)  # report ids new in the history

    def to_json(self) -> dict[str, Any]:
        return {
            "controller": self.controller,
            "timer": vars(self.timer) | {"installed": self.timer.installed},
            "runs": [run.model_dump() | {"report": run.report_id} for run in self.runs],
            "unreadable": self.unreadable,
            "imported": self.imported,
        }


def parse_timer(text: str) -> Timer:
    """`systemctl show kiln-health-active.timer --property=...`: KEY=value lines."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    calendar = values.get("TimersCalendar", "")
    # "{ OnCalendar=Sun *-*-* 03:00:00 ; next_elapse=Sun 2026-11-29 03:00:00 UTC }"
    expression = calendar.split("OnCalendar=", 1)[-1].split(" ;", 1)[0] if calendar else ""
    return Timer(
        load_state=values.get("LoadState", ""),
        active_state=values.get("ActiveState", ""),
        calendar=expression.strip(),
        next_run=_unset(values.get("NextElapseUSecRealtime", "")),
        last_run=_unset(values.get("LastTriggerUSec", "")),
    )


def _unset(value: str) -> str:
    return "" if value in ("", "0", "n/a") else value


def read(spec: ClusterSpec, display: Displays) -> Schedule:
    """The first controller's timer and run records; new runs go into the history."""
    from kiln.run.gather import from_controller

    controller, data = from_controller(
        PLAYBOOK, spec, display, "health_dir", "the active check's timer runs",
        "the active check's timer",
    )  # fmt: skip
    runs, unreadable = read_records(data["records"])
    schedule = Schedule(controller, parse_timer(data["timer"]), runs, unreadable)
    schedule.imported = import_runs(runs, str(spec.path))
    return schedule

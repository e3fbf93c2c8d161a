"""`kiln health --schedule`: the scheduled active check (the health role's
kiln-health-active and its systemd timer on the first controller) as the control node
sees it: when it runs next, what its runs found, each run kept in the report history
like a `kiln validate` run.

The node and controller programs decide; this module reads their records."""

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic
from typing_extensions import TypedDict

from kiln import health
from kiln.errors import ExitCode, KilnError
from kiln.inventory.model import ClusterSpec
from kiln.report import model
from kiln.run.display import Displays
from kiln.validation import drain
from kiln.validation.verdicts import Judgement, Verdict

PLAYBOOK = "health-schedule.yml"
SUITE = "health-active"


class CheckRecord(TypedDict):
    check: str
    status: str
    reason: str


class NodeRecord(TypedDict):
    results: list[CheckRecord]
    error: str
    action: str
    status: str


class RunRecord(pydantic.BaseModel):
    """One run of kiln-health-active, as it writes it (active-<time>.json)."""

    started: str
    finished: str | None
    dcgm_diag_level: int
    nodes: dict[str, NodeRecord]
    skipped: dict[str, str]
    error: str

    @property
    def report_id(self) -> str:
        """Sorts by time among `kiln validate`'s ids, and is the same each time a run is
        read, so reading it again adds nothing to the history."""
        return datetime.fromisoformat(self.started).strftime("%Y%m%d-%H%M%S-") + SUITE


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


def read_records(texts: list[str]) -> tuple[list[RunRecord], list[str]]:
    runs, unreadable = [], []
    for text in texts:
        try:
            runs.append(RunRecord.model_validate_json(text))
        except pydantic.ValidationError as exc:
            unreadable.append(f"a run record is not kiln-health-active's: {exc.errors()[0]['msg']}")
    return sorted(runs, key=lambda r: r.started), unreadable


def to_report(run: RunRecord, inventory: str) -> model.Report:
    """A run as a validation report, concluded as every campaign concludes
    (docs/architecture.md): a judgement per node and check, each node's verdict from
    them (Report.judge_nodes; a node no check ran on was not checked), the drains and
    resumes kiln-health-active made, the nodes it left alone and why."""
    judgements, reasons = [], {}
    for node, record in run.nodes.items():
        for result in record["results"]:
            verdict = health.VERDICTS.get(result["status"], Verdict.FAIL)
            judgements.append(
                Judgement(
                    node, f"health.{result['check']}", "", None, "", verdict, result["reason"]
                )
            )
        if record["error"] and record["results"]:  # an error beside results fails the node
            judgements.append(
                Judgement(node, "health.run", "", None, "", Verdict.FAIL, record["error"])
            )
        # In the order the checks ran, each named: the run's own words, not the judgements'.
        mine = [f"{r['check']}: {r['reason']}" for r in record["results"] if r["status"] != "OK"]
        mine += [record["error"]] if record["error"] else []
        reasons[node] = mine or ([] if record["results"] else ["no check ran"])
    # What kiln-health-active did in Slurm (it acts on the controller, before this reads).
    actions = drain.Actions(
        drain={
            n: r["action"].removeprefix("drained: ")
            for n, r in run.nodes.items()
            if r["action"].startswith("drained: ")
        },
        resume=[n for n, r in run.nodes.items() if r["action"] == "resumed"],
        left=dict(run.skipped),
    )
    notes = [f"DCGM diagnostic level {run.dcgm_diag_level}" if run.dcgm_diag_level else ""]
    if run.error:
        notes.append(f"the run could not start: {run.error}")
    report = model.Report(
        id=run.report_id,
        started=run.started,
        inventory=inventory,
        profile=None,
        suites=[SUITE],
        nodes=sorted(run.nodes),
        judgements=judgements,
        notes=[n for n in notes if n],
        actions=model.Actions(**actions.to_dict()),
        finished=run.finished,
    )
    report.judge_nodes(reasons)
    return report


def import_runs(runs: list[RunRecord], inventory: str) -> list[str]:
    """Write each run not yet in the history; the ids written."""
    from kiln.report.write import write_all

    written = []
    for run in runs:
        if not (model.directory(run.report_id) / model.REPORT_FILE).exists():
            write_all(to_report(run, inventory))
            written.append(run.report_id)
    return written


def read(spec: ClusterSpec, display: Displays) -> Schedule:
    """The first controller's timer and run records; new runs go into the history."""
    from kiln.run.gather import gather

    controllers = spec.group("slurm_controller")
    if not controllers:
        raise KilnError(
            f"{spec.path}: no host in slurm_controller, where the active check's timer runs"
        )
    controller = controllers[0]
    gathered = gather(PLAYBOOK, spec, [controller], display, "health_dir")
    if controller not in gathered.texts:
        raise KilnError(
            f"{controller}: the active check's timer could not be read: "
            f"{gathered.errors[controller]} (kiln runs show {gathered.summary.run})",
            ExitCode.HOSTS_FAILED,
        )
    data = json.loads(gathered.texts[controller])
    runs, unreadable = read_records(data["records"])
    schedule = Schedule(controller, parse_timer(data["timer"]), runs, unreadable)
    schedule.imported = import_runs(runs, str(spec.path))
    return schedule

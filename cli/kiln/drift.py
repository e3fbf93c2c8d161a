"""`kiln drift`: which nodes no longer match what the inventory declares.

The provisioning playbook (site.yml) runs in check and diff mode: nothing on the nodes
changes, and every task that would change something is what drifted, per host, with
its diff. A task marked no_log shows only that it would change (Ansible censors its
result, diff included, before Kiln sees it). Tasks that only read the nodes run in
check mode too (`check_mode: false`, `changed_when: false`), so they are never drift.
"""

import difflib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from kiln import files, hostlist
from kiln.errors import ExitCode
from kiln.inventory import ClusterSpec
from kiln.lock import Lock
from kiln.report import model, write
from kiln.run import ids
from kiln.run.display import Displays, for_people
from kiln.run.events import RunSummary
from kiln.validation.verdicts import Judgement, Verdict

SUITE = "drift"
HIDDEN = "(no_log: what would change is not shown)"
_DIFF_LIMIT = 200  # lines of one task's diff kept in the report


@dataclass
class TaskDrift:
    task: str  # "role : task name"
    action: str  # the module
    diff: str  # unified diff text; HIDDEN for a no_log task; "" when the module gave none


@dataclass
class DriftRequest:
    inventory: ClusterSpec
    limit: str | None = None
    display: Displays = for_people
    lock: Lock | None = None


@dataclass
class DriftResult:
    report: model.Report
    tasks: dict[str, list[TaskDrift]] = field(default_factory=dict)  # host -> drift
    run: RunSummary | None = None

    @property
    def found(self) -> bool:
        return any(self.tasks.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "report": self.report.id,
            "drift": self.found,
            "hosts": {
                host: [asdict(t) for t in tasks] for host, tasks in sorted(self.tasks.items())
            },
            "run": self.run.to_json() if self.run else None,
        }


def _text(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines(keepends=True)
    return [line + "\n" for line in json.dumps(value, indent=2, sort_keys=True).splitlines()]


def rendered_diff(res: dict[str, Any]) -> str:
    """A module's diff (one dict or a list of them, per loop item too) as unified diff
    text; `prepared` diffs (apt's package list) as the module wrote them."""
    diffs: list[Any] = []
    for source in [res, *(r for r in res.get("results", []) if isinstance(r, dict))]:
        found = source.get("diff")
        diffs += found if isinstance(found, list) else [found] if found else []
    out: list[str] = []
    for one in diffs:
        if not isinstance(one, dict):
            continue
        if one.get("prepared"):
            out += _text(one["prepared"])
            continue
        if "before" not in one and "after" not in one:
            continue
        out += difflib.unified_diff(
            _text(one.get("before", "")),
            _text(one.get("after", "")),
            fromfile=str(one.get("before_header", "before")),
            tofile=str(one.get("after_header", "after")),
        )
    if len(out) > _DIFF_LIMIT:
        out = [*out[:_DIFF_LIMIT], f"... ({len(out) - _DIFF_LIMIT} more lines)\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def _changed(event: dict[str, Any], res: dict[str, Any]) -> bool:
    # A no_log result is censored whole, `changed` with it: Ansible's own line for the
    # event ("changed: [host]") still says it.
    if "censored" in res:
        return str(event.get("stdout", "")).lstrip().startswith("changed:")
    return bool(res.get("changed"))


def task_drift(events: list[dict[str, Any]]) -> dict[str, list[TaskDrift]]:
    """Every task result that reports changed, per host, in the order they ran."""
    found: dict[str, list[TaskDrift]] = {}
    for event in events:
        data = event.get("event_data") or {}
        res = data.get("res") or {}
        if event.get("event") != "runner_on_ok" or not _changed(event, res):
            continue
        host = data.get("host") or data.get("remote_addr") or "?"
        name = data.get("task") or data.get("task_action", "")
        task = f"{data['role']} : {name}" if data.get("role") else name
        hidden = "censored" in res
        diff = HIDDEN if hidden else rendered_diff(res)
        found.setdefault(host, []).append(TaskDrift(task, data.get("task_action", ""), diff))
    return found


def to_report(
    report_id: str, started: str, spec: ClusterSpec, hosts: list[str], tasks: dict
) -> model.Report:
    """Drift as a report in the history: a judgement per host and drifting task."""
    judgements = []
    verdicts = {}
    for host in hosts:
        drifted = tasks.get(host, [])
        for one in drifted:
            why = "would change" + (" (no_log)" if one.diff == HIDDEN else "")
            judgements.append(Judgement(host, "drift.task", one.task, None, "", Verdict.FAIL, why))
        verdicts[host] = model.NodeVerdict(
            verdict=Verdict.FAIL if drifted else Verdict.PASS,
            reasons=[f"would change: {t.task}" for t in drifted],
        )
    return model.Report(
        id=report_id,
        started=started,
        inventory=str(spec.path),
        profile=None,
        suites=[SUITE],
        nodes=hosts,
        judgements=judgements,
        node_verdicts=verdicts,
        finished=model.now(),
    )


def drift(request: DriftRequest) -> tuple[DriftResult, ExitCode]:
    from kiln.run import record
    from kiln.run.execute import RunRequest, run_playbook  # ansible_runner: only when running

    started = model.now()
    summary = run_playbook(
        RunRequest(
            playbook="site.yml",
            inventory=request.inventory,
            limit=request.limit,
            check=True,
            diff=True,
            extravars={"nvidia_driver_reboot": False},
            display=request.display,
            lock=request.lock,
        )
    )
    _kept, run_dir = record.find(summary.run)
    tasks = task_drift(record.load_events(run_dir))
    hosts = sorted(
        (h for h in summary.hosts if h in request.inventory.hosts), key=hostlist.sort_key
    )
    report_id = ids.new_id(SUITE)
    report = to_report(report_id, started, request.inventory, hosts, tasks)
    report.runs.append(summary.run)
    for failure in summary.failures:
        report.notes.append(f"{failure.host}: {failure.task}: {failure.message}")
    result = DriftResult(report, {h: t for h, t in tasks.items() if h in hosts}, summary)
    write.write_all(report)
    # Diffs show configuration files as they are on the nodes: private, like the runs.
    files.write_private(model.directory(report.id) / "drift.json", json.dumps(result.to_json()))
    if summary.exit_code not in (ExitCode.OK,):
        return result, summary.exit_code
    return result, ExitCode.DRIFT if result.found else ExitCode.OK

"""`kiln drift`: which nodes no longer match what the inventory declares.

The provisioning playbook (site.yml) runs in check and diff mode: nothing on the nodes
changes, and every task that would change something is what drifted, per host, with
its diff. A task marked no_log shows only that it would change (Ansible censors its
result, diff included, before Kiln sees it). Tasks that only read the nodes run in
check mode too (`check_mode: false`, `changed_when: false`), so they are never drift.

Then each node's fingerprint (the versions that decide how jobs behave: the base role's
kiln-fingerprint program) is compared with its peers': a node whose kernel, driver,
firmware or package version differs from the one most nodes of its group have is an
outlier, field by field.

A node the run did not reach, or where a task failed (Ansible runs nothing more there),
was not checked: it is never "no drift", and its verdict says why.
"""

import difflib
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from kiln import files, hostlist, redact
from kiln.errors import ExitCode
from kiln.inventory import ClusterSpec
from kiln.lock import Lock
from kiln.report import document, write
from kiln.run import ids
from kiln.run.display import Displays, for_people
from kiln.run.events import Failure, RunSummary, outcome
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
class Outlier:
    field: str
    value: str | None  # None: the node lacks what its peers have
    majority: str
    count: int  # nodes of the group with the majority's value
    group: str

    def describe(self) -> str:
        mine = self.value if self.value is not None else "absent"
        return f"{self.field} {mine} (group {self.group}: {self.majority} on {self.count} nodes)"


@dataclass
class DriftRequest:
    inventory: ClusterSpec
    limit: str | None = None
    display: Displays = for_people
    lock: Lock | None = None


@dataclass
class DriftResult:
    report: document.Report
    tasks: dict[str, list[TaskDrift]] = field(default_factory=dict)  # host -> drift
    fingerprints: dict[str, dict[str, str]] = field(default_factory=dict)
    outliers: dict[str, list[Outlier]] = field(default_factory=dict)  # host -> fields
    run: RunSummary | None = None
    unchecked: dict[str, str] = field(default_factory=dict)  # host -> why it was not checked

    @property
    def found(self) -> bool:
        return any(self.tasks.values()) or any(self.outliers.values())

    def summary(self) -> str:
        """One line: whether anything drifted, and which nodes were not checked."""
        hosts = self.report.nodes
        missed = [h for h in hosts if h in self.unchecked]
        if len(missed) == len(hosts):
            said = "nothing was checked"
        elif self.found:
            said = "drift found"
        elif missed:
            checked = len(hosts) - len(missed)
            said = f"no drift on the {checked} node{'' if checked == 1 else 's'} checked"
        else:
            said = "no drift"
        return said + (f"; not checked: {hostlist.compress(missed)}" if missed else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "report": self.report.id,
            "drift": self.found,
            "unchecked": dict(sorted(self.unchecked.items())),
            "hosts": {
                host: [asdict(t) for t in tasks] for host, tasks in sorted(self.tasks.items())
            },
            "outliers": {
                host: [asdict(o) for o in found] for host, found in sorted(self.outliers.items())
            },
            "fingerprints": self.fingerprints,
            "run": self.run.to_json() if self.run else None,
        }


def _text(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines(keepends=True)
    return [line + "\n" for line in json.dumps(value, indent=2, sort_keys=True).splitlines()]


def rendered_diff(res: dict[str, Any]) -> str:
    """A module's diff (one dict or a list of them, per loop item too) as unified diff
    text; `prepared` diffs (apt's package list) as the module wrote them."""
    diffs: list[Any] = []  # shown without URL credentials (kiln.redact)
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
    return redact.text("".join(line if line.endswith("\n") else line + "\n" for line in out))


def task_drift(events: list[dict[str, Any]]) -> dict[str, list[TaskDrift]]:
    """Every task result that reports changed, per host, in the order they ran."""
    found: dict[str, list[TaskDrift]] = {}
    for event in events:
        result = outcome(event)
        if result is None or result.label != "changed":
            continue
        data = event.get("event_data") or {}
        res, host = result.res, result.host
        name = data.get("task") or data.get("task_action", "")
        task = f"{data['role']} : {name}" if data.get("role") else name
        diff = HIDDEN if redact.censored(res) else rendered_diff(res)
        found.setdefault(host, []).append(TaskDrift(task, data.get("task_action", ""), diff))
    return found


FINGERPRINT_TASK = "Read the node's fingerprint"


def fingerprints(events: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each node's fingerprint, from drift.yml's last task (JSON on its stdout)."""
    found = {}
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") != "runner_on_ok" or data.get("task") != FINGERPRINT_TASK:
            continue
        try:
            value = files.loads((data.get("res") or {}).get("stdout") or "")
        except ValueError:
            continue
        if isinstance(value, dict):
            found[data.get("host", "?")] = {str(k): str(v) for k, v in value.items()}
    return found


def peer_group(spec: ClusterSpec, host: str) -> str:
    """Nodes are compared with those of their first Kiln group (compute with compute)."""
    return next(iter(spec.kiln_roles(host)), "ungrouped")


def outliers(
    prints: dict[str, dict[str, str]], groups: dict[str, str]
) -> tuple[dict[str, list[Outlier]], list[str]]:
    """Per node, each field whose value differs from the one most nodes of its group
    have; and, for a field whose values tie (two nodes, two kernels), a note: no value
    is the group's, so no node is the odd one."""
    members: dict[str, list[str]] = {}
    for host in prints:
        members.setdefault(groups.get(host, "ungrouped"), []).append(host)
    found: dict[str, list[Outlier]] = {}
    ties = []
    for group, hosts in sorted(members.items()):
        fields = sorted({f for h in hosts for f in prints[h]})
        for name in fields:
            counts = Counter(prints[h].get(name) for h in hosts)
            top = counts.most_common()
            value, count = top[0]
            if len(top) > 1 and top[1][1] == count:
                seen = ", ".join(f"{v or 'absent'} on {n}" for v, n in sorted(top, key=str))
                ties.append(f"{group}: {name} differs with no majority: {seen}")
                continue
            if value is None:
                continue
            for host in sorted(hosts, key=hostlist.sort_key):
                mine = prints[host].get(name)
                if mine != value:
                    found.setdefault(host, []).append(Outlier(name, mine, value, count, group))
    return found, ties


def unchecked(failures: list[Failure]) -> dict[str, str]:
    """Each host a task failed on or that was unreachable: Ansible ran nothing more
    there, so the rest of it was not checked. Why, from its first failure."""
    found: dict[str, str] = {}
    for failure in failures:
        kind = "unreachable" if failure.unreachable else "failed"
        found.setdefault(failure.host, f"{kind} at {failure.task}: {failure.message}")
    return found


def to_report(
    report_id: str,
    started: str,
    spec: ClusterSpec,
    hosts: list[str],
    tasks: dict,
    odd: dict[str, list[Outlier]] | None = None,
    missed: dict[str, str] | None = None,
) -> document.Report:
    """Drift as a report in the history: a judgement per host and drifting task (fail:
    the node is not as declared), per host not checked (unchecked, never a pass) and
    per field that differs from its peers (warn: what is declared may allow both)."""
    judgements, reasons = [], {}
    odd, missed = odd or {}, missed or {}
    for host in hosts:
        drifted = tasks.get(host, [])
        judgements += [
            Judgement(
                host,
                "drift.task",
                one.task,
                None,
                "",
                Verdict.FAIL,
                "would change" + (" (no_log)" if one.diff == HIDDEN else ""),
            )
            for one in drifted
        ]
        why_not = [f"not checked: {missed[host]}"] if host in missed else []
        judgements += [
            Judgement(host, "drift.run", "", None, "", Verdict.UNCHECKED, why) for why in why_not
        ]
        differs = odd.get(host, [])
        judgements += [
            Judgement(host, "drift.fingerprint", o.field, None, "", Verdict.WARN, o.describe())
            for o in differs
        ]
        # In the order they ran, each task named (its judgement names it as its subject).
        reasons[host] = (
            [f"would change: {t.task}" for t in drifted] + why_not + [o.describe() for o in differs]
        )
    report = document.Report(
        id=report_id,
        started=started,
        inventory=str(spec.path),
        profile=None,
        suites=[SUITE],
        nodes=hosts,
        positions=spec.positions(hosts),
        judgements=judgements,
        finished=document.now(),
    )
    # fail, unchecked, warn, else pass: a node with nothing judged drifted in nothing
    report.judge_nodes(reasons, unjudged=Verdict.PASS)
    return report


def drift(request: DriftRequest) -> tuple[DriftResult, ExitCode]:
    from kiln.run import record
    from kiln.run.execute import RunRequest, run_playbook  # ansible_runner: only when running

    started = document.now()
    summary = run_playbook(
        RunRequest(
            playbook="drift.yml",
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
    events = record.load_events(run_dir)
    tasks = task_drift(events)
    prints = {h: p for h, p in fingerprints(events).items() if h in request.inventory.hosts}
    odd, ties = outliers(prints, {h: peer_group(request.inventory, h) for h in prints})
    hosts = sorted(
        (h for h in summary.hosts if h in request.inventory.hosts), key=hostlist.sort_key
    )
    missed = {h: why for h, why in unchecked(summary.failures).items() if h in hosts}
    report_id = ids.new_id(SUITE)
    report = to_report(report_id, started, request.inventory, hosts, tasks, odd, missed)
    report.runs.append(summary.run)
    if summary.error:
        report.notes.append(summary.error)
    for failure in summary.failures:  # the nodes' own are their verdicts' reasons
        if failure.host not in hosts:
            report.notes.append(f"{failure.host}: {failure.task}: {failure.message}")
    report.notes += ties
    missing = [h for h in hosts if h not in prints and h not in missed]
    if missing:
        report.notes.append(
            f"no fingerprint from {hostlist.compress(missing)} (kiln provision installs it)"
        )
    result = DriftResult(
        report,
        {h: t for h, t in tasks.items() if h in hosts},
        {h: prints[h] for h in hosts if h in prints},
        {h: o for h, o in odd.items() if h in hosts},
        summary,
        missed,
    )
    write.write_all(report)
    # Diffs show configuration files as they are on the nodes: private, like the runs.
    files.write_private(
        document.directory(report.id) / "drift.json", files.json_text(result.to_json(), None)
    )
    if summary.exit_code not in (ExitCode.OK,):
        return result, summary.exit_code
    return result, ExitCode.DRIFT if result.found else ExitCode.OK

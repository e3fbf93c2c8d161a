"""Turn ansible-runner job events into a run summary.

The same accumulator serves the live display while a run is going and
`kiln runs show`, which replays a past run's job_events/ files.
"""

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt

from kiln import redact
from kiln.errors import ExitCode

_MESSAGE_LIMIT = 400
# ansible-core 2.19 wraps messages in "Task failed: Module failed: ..."; the summary
# already says it failed.
_ANSIBLE_PREFIX = re.compile(r"^(?:(?:Task|Module|Action) failed: )+")
# ...and a filter's error in where templating failed; Kiln's own filters name in their
# message what is wrong (autofs_mounts: ..., autofs: ...), which is all the summary needs.
_KILN_FILTER_PREFIX = re.compile(
    r"^Finalization of task args for '[^']+' failed: "
    r"(?:Error while resolving value for '[^']+': )?"
    r"The filter plugin 'kiln\.cluster\.[^']+' failed: "
)
# Mitogen's word for a connection that closed before it started: what followed is the
# transport's own stderr. Said as Ansible says it, so both strategies read the same.
_MITOGEN_EOF = re.compile(r"^EOF on stream; last \d+ lines received:\s*(?=(ssh:)?)")
# Tasks named so only read the nodes and refuse settings that cannot work on them
# (playbooks/preflight.yml): failing before anything changed, the input was bad.
PREFLIGHT = "Pre-flight"


@dataclass
class HostCounts:
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0


@dataclass
class Failure:
    host: str
    task: str
    message: str
    unreachable: bool = False


@dataclass
class RunSummary:
    run: str
    playbook: str
    status: str
    hosts: dict[str, HostCounts] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    # What a role wants the operator to know about a host that is not a failure (a
    # compute node without a GPU, a reboot pending): set_stats' kiln_notes.
    notes: dict[str, list[str]] = field(default_factory=dict)
    # Nodes whose slurmd runs and that wait for a reboot only `kiln rollout` gives them
    # (node -> the reason Slurm shows for it): set_stats' kiln_reboots.
    reboots: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # a failure outside any host (e.g. a playbook that does not parse)

    @property
    def exit_code(self) -> ExitCode:
        if self.status == "canceled":
            return ExitCode.INTERRUPTED
        if self.refused:
            return ExitCode.BAD_INPUT
        if any(c.failed or c.unreachable for c in self.hosts.values()):
            return ExitCode.HOSTS_FAILED
        if self.status != "successful":
            return ExitCode.FAILED
        return ExitCode.OK

    @property
    def refused(self) -> bool:
        """Stopped by pre-flight tasks before any host changed anything."""
        return (
            bool(self.failures)
            and all(
                not f.unreachable and f.task.split(" : ")[-1].startswith(PREFLIGHT)
                for f in self.failures
            )
            and not any(c.changed for c in self.hosts.values())
        )

    def to_json(self) -> dict[str, Any]:
        """The documented --json shape (docs/cli.md)."""
        return {
            "run": self.run,
            "playbook": self.playbook,
            "status": self.status,
            "hosts": {h: asdict(c) for h, c in sorted(self.hosts.items())},
            "failures": [
                {"host": f.host, "task": f.task, "message": f.message} for f in self.failures
            ],
            "notes": {h: list(n) for h, n in sorted(self.notes.items())},
            "reboots": dict(sorted(self.reboots.items())),
            **({"error": self.error} if self.error else {}),
        }


def failure_message(result: dict[str, Any]) -> str:
    """The module's own words for a failure, on one line."""
    if not isinstance(result, dict):
        return str(result)
    results = result.get("results")
    for item in results if isinstance(results, list) else []:
        if isinstance(item, dict) and (item.get("failed") or item.get("unreachable")):
            return failure_message(item)
    for key in ("msg", "stderr", "module_stderr", "reason", "censored", "stdout"):
        text = result.get(key)
        if text:
            text = text if isinstance(text, str) else json.dumps(text)
            break
    else:
        text = "failed without a message"
    # A command's message alone ("non-zero return code") hides what it said.
    if result.get("rc") not in (None, 0):
        text += f" (rc={result['rc']})"
        stderr = result.get("stderr")
        stderr = stderr.strip() if isinstance(stderr, str) else ""
        if stderr and stderr not in text:
            text += f": {stderr}"
    text = _ANSIBLE_PREFIX.sub("", " ".join(text.split()))
    text = _KILN_FILTER_PREFIX.sub("", text)
    text = redact.text(_MITOGEN_EOF.sub(_connection_failed, text))
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def _connection_failed(match: re.Match[str]) -> str:
    return "Failed to connect to the host" + (" via ssh: " if match.group(1) else ": ")


def _utc(when: datetime) -> datetime:
    # ansible-runner writes UTC; older releases wrote it without saying so.
    return when if when.tzinfo else when.replace(tzinfo=UTC)


class EventData(BaseModel):
    """The fields of a job event that Kiln reads, with their types: a kept event that
    has another type there is refused whole, naming the file and the field."""

    model_config = ConfigDict(extra="allow")
    host: str | None = None
    remote_addr: str | None = None
    task: str = ""
    task_uuid: str | None = None
    role: str | None = None
    # The module as written, and as Ansible resolved it (ansible-core 2.15 and later).
    task_action: str | None = None
    resolved_action: str | None = None
    play: str = ""
    res: dict[str, Any] | None = None
    ignore_errors: bool | None = None
    # A host's result: when its task started and ended there, and the seconds between.
    start: Annotated[datetime, AfterValidator(_utc)] | None = None
    end: Annotated[datetime, AfterValidator(_utc)] | None = None
    duration: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] | None = None
    # playbook_on_stats: host -> count
    ok: dict[str, int] | None = None
    changed: dict[str, int] | None = None
    failures: dict[str, int] | None = None
    dark: dict[str, int] | None = None
    skipped: dict[str, int] | None = None


class JobEvent(BaseModel):
    """One ansible-runner job event (job_events/N-UUID.json)."""

    model_config = ConfigDict(extra="allow")
    counter: StrictInt = 0  # ansible-runner's; events are replayed in its order
    event: str = ""
    event_data: EventData | None = None


# A host's result of a task, by event; failed with ignore_errors reads "ignored".
RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "FAILED",
    "runner_on_skipped": "skipping",
    "runner_on_unreachable": "UNREACHABLE",
}


@dataclass
class Outcome:
    """One host's result of one task: what the summary counts and the display prints."""

    label: str  # ok, changed, skipping, ignored, FAILED, UNREACHABLE
    host: str
    task: str
    res: dict[str, Any]

    @property
    def failed(self) -> bool:
        return self.label in ("FAILED", "UNREACHABLE")


def changed(event: dict[str, Any], res: dict[str, Any]) -> bool:
    # A no_log result is censored whole, `changed` with it: Ansible's own line for the
    # event ("changed: [host]") still says it.
    if redact.censored(res):
        return str(event.get("stdout", "")).lstrip().startswith("changed:")
    return bool(res.get("changed"))


def outcome(event: dict[str, Any]) -> Outcome | None:
    """The result an event reports, or None for events that report none."""
    kind = event.get("event", "")
    label = RESULT_EVENTS.get(kind)
    if label is None:
        return None
    data = event.get("event_data") or {}
    res = data.get("res") or {}
    if kind == "runner_on_ok" and changed(event, res):
        label = "changed"
    if kind == "runner_on_failed" and data.get("ignore_errors"):
        label = "ignored"
    host = data.get("host") or data.get("remote_addr") or "?"
    return Outcome(label, host, data.get("task", ""), res)


class EventAccumulator:
    """Counts per host as events arrive; final counts come from the playbook stats."""

    def __init__(self, run: str, playbook: str) -> None:
        self.summary = RunSummary(run=run, playbook=playbook, status="running")
        self.current_task: dict[str, str] = {}
        self.tasks_started = 0
        self.play = ""

    def host(self, name: str) -> HostCounts:
        return self.summary.hosts.setdefault(name, HostCounts())

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        host = data.get("host") or data.get("remote_addr")
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
        elif kind == "playbook_on_task_start":
            self.tasks_started += 1
        elif kind == "runner_on_start" and host:
            self.host(host)
            self.current_task[host] = data.get("task", "")
        elif kind == "playbook_on_stats":
            self._apply_stats(data)
        elif (result := outcome(event)) and host:
            self._count(host, result)

    def _count(self, host: str, result: "Outcome") -> None:
        counts = self.host(host)
        if result.label in ("ok", "changed", "ignored"):
            counts.ok += 1
        if result.label == "changed":
            counts.changed += 1
        elif result.label == "skipping":
            counts.skipped += 1
        elif result.label == "FAILED":
            counts.failed += 1
            self._add_failure(host, result.task, result.res, unreachable=False)
        elif result.label == "UNREACHABLE":
            counts.unreachable += 1
            self._add_failure(host, result.task, result.res, unreachable=True)

    def _add_failure(self, host: str, task: str, res: dict[str, Any], unreachable: bool) -> None:
        message = failure_message(res)
        self.summary.failures.append(Failure(host, task, message, unreachable))

    def _apply_stats(self, data: dict[str, Any]) -> None:
        # Ansible's recap is authoritative (it counts rescued and looped tasks its own way).
        fields = {
            "ok": "ok",
            "changed": "changed",
            "failed": "failures",
            "unreachable": "dark",
            "skipped": "skipped",
        }
        artifacts = data.get("artifact_data")
        artifacts = artifacts if isinstance(artifacts, dict) else {}
        self.summary.notes = _notes(artifacts.get("kiln_notes"))
        self.summary.reboots = _reboots(artifacts.get("kiln_reboots"))
        hosts = set().union(*(set((data.get(src) or {}).keys()) for src in fields.values()))
        for host in hosts:
            self.summary.hosts[host] = HostCounts(
                **{mine: int((data.get(src) or {}).get(host, 0)) for mine, src in fields.items()}
            )


def _notes(data: Any) -> dict[str, list[str]]:
    """Roles' notes, gathered by set_stats (kiln_notes: {host: [text, ...]}); anything
    else in that place is ignored rather than trusted."""
    if not isinstance(data, dict):
        return {}
    notes = {}
    for host, texts in data.items():
        texts = texts if isinstance(texts, list) else [texts]
        kept = [str(t) for t in texts if isinstance(t, (str, int, float)) and str(t)]
        if kept:
            notes[str(host)] = kept
    return notes


def _reboots(data: Any) -> dict[str, str]:
    """The nodes left to kiln rollout's reboot (kiln_reboots: {host: reason}); a reason
    that is not one line of text is dropped rather than trusted."""
    if not isinstance(data, dict):
        return {}
    return {
        str(host): reason
        for host, reason in data.items()
        if isinstance(reason, str) and reason.strip() and "\n" not in reason
    }

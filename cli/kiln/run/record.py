"""Kiln's record of runs: one ansible-runner private data dir per run, kept.

Layout of a run directory (under paths.runs_dir()):
    kiln.json                     what was asked and how it ended (RunRecord)
    artifacts/ansible/job_events/ ansible-runner's events, replayed by `kiln runs show`
    artifacts/ansible/stdout      Ansible's own output
"""

import json
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kiln import files, paths
from kiln.errors import InputError
from kiln.run import ids, merge
from kiln.run.events import EventAccumulator, JobEvent, RunSummary

RUNNER_IDENT = "ansible"
RECORD_FILE = "kiln.json"
# A run's record is under a kilobyte; an event holds one task's result on one host.
MAX_RECORD_BYTES = 1024 * 1024


class RunRecord(BaseModel):
    run: str
    playbook: str
    inventory: str
    limit: str | None = None
    tags: str | None = None
    check: bool = False
    diff: bool = False
    kiln_version: str
    started: str
    finished: str | None = None
    status: str = "running"
    exit_code: int | None = None
    tasks_started: int = 0
    # The kiln process running it, when that process started (so a reused pid is not
    # taken for it) and on which machine (a state directory in a shared home is read
    # from others): a "running" record whose process is gone reads as LOST.
    pid: int | None = None
    pid_start: int | None = None
    control_host: str | None = None
    # A sliced run (`kiln provision --slices N`, kiln.run.sliced): the number of slices
    # and its parts, each an ansible-runner private data dir under parts/, in run order.
    slices: int | None = None
    parts: list[str] = []
    # One part of such a run, run alone (`kiln provision --slices N --part NAME`: this
    # control machine's share of a provision spread over several): its name, `slices`
    # its N; an ordinary run otherwise (no parts/, `limit` its hosts).
    part: str | None = None


# A run whose kiln process ended without writing how the run ended: killed (SIGKILL,
# a crash of the control node) or stopped by a disk too full to write even that.
LOST = "lost"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def process_start(pid: int) -> int | None:
    """When process PID started (clock ticks since boot: /proc/PID/stat, field 22), or
    None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2, the command, is in parentheses and may hold spaces and ")".
    return int(stat.rpartition(")")[2].split()[19])


def new_run_dir(playbook: str) -> tuple[str, Path]:
    run_id = ids.new_id(Path(playbook).stem)
    run_dir = paths.runs_dir() / run_id
    try:
        run_dir.mkdir(parents=True, mode=0o700)
    except OSError as exc:
        raise files.cannot_write(run_dir, exc) from None
    return run_id, run_dir


def save(run_dir: Path, record: RunRecord) -> None:
    files.write_private(run_dir / RECORD_FILE, record.model_dump_json(indent=2))


def events_dir(run_dir: Path) -> Path:
    return run_dir / "artifacts" / RUNNER_IDENT / "job_events"


PARTS_DIR = "parts"


def part_dir(run_dir: Path, part: str) -> Path:
    return run_dir / PARTS_DIR / part


def _private_dirs(record: RunRecord, run_dir: Path) -> list[Path]:
    """Where a run's events are: its own directory, or each of its parts'."""
    return [part_dir(run_dir, p) for p in record.parts] if record.parts else [run_dir]


def list_records(problems: list[str] | None = None) -> list[RunRecord]:
    """Every kept run, newest first; a line in `problems` for each unreadable record."""
    records = []
    if paths.runs_dir().is_dir():
        for record_file in paths.runs_dir().glob(f"*/{RECORD_FILE}"):
            try:
                raw = files.read_bytes(record_file, limit=MAX_RECORD_BYTES)
                data = files.loads(raw, strict=True)
                records.append(_settled(RunRecord.model_validate(data)))
            except InputError as exc:  # not a regular file, too large
                if problems is not None:
                    problems.append(exc.message)
            except ValueError as exc:
                if problems is not None:
                    problems.append(f"{record_file}: not a Kiln run record ({_first(exc)})")
    return sorted(records, key=lambda r: (r.started, r.run), reverse=True)


def _settled(record: RunRecord) -> RunRecord:
    """A record still "running" whose process is gone is LOST. (Records of older Kiln
    versions name no process, and another machine's processes are not to be seen from
    here: those stay as written.)"""
    if (
        record.status == "running"
        and record.pid is not None
        and record.control_host == socket.gethostname()
        and process_start(record.pid) != record.pid_start
    ):
        record.status = LOST
    return record


def _first(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"{where}: {error['msg']}" if where else error["msg"]
    return getattr(exc, "strerror", None) or str(exc).splitlines()[0]


def find(run: str) -> tuple[RunRecord, Path]:
    """A run by id, unique id prefix, or 'latest'."""
    problems: list[str] = []
    records = {r.run: r for r in list_records(problems)}
    try:
        found = ids.pick(list(records), run, "run", paths.runs_dir(), "kiln runs list")
    except InputError:
        # the run asked for is there, but its record cannot be read: say that instead
        unreadable = [p for p in problems if Path(p.split(":")[0]).parent.name.startswith(run)]
        if len(unreadable) == 1:
            raise InputError(unreadable[0]) from None
        raise
    return records[found], paths.runs_dir() / found


def replay(record: RunRecord, run_dir: Path, problems: list[str] | None = None) -> RunSummary:
    """Rebuild a run's summary from its job events (`problems`: as load_events)."""
    parts = []
    for directory in _private_dirs(record, run_dir):
        accumulator = EventAccumulator(record.run, record.playbook)
        for event in _part_events(directory, problems):
            accumulator.feed(event)
        parts.append((directory.name, accumulator.summary))
    summary = parts[0][1] if len(parts) == 1 else merge.merge(record.run, record.playbook, parts)
    summary.status = record.status
    return summary


def load_events(
    run_dir: Path, problems: list[str] | None = None, record: RunRecord | None = None
) -> list[dict[str, Any]]:
    """A run's job events in the order they happened (a sliced run's RECORD: part after
    part). A file cut short (a write interrupted by a kill or a full disk) is left out,
    with a line in `problems`."""
    if record is None:
        return _part_events(run_dir, problems)
    return [e for d in _private_dirs(record, run_dir) for e in _part_events(d, problems)]


def _part_events(run_dir: Path, problems: list[str] | None) -> list[dict[str, Any]]:
    events = []
    for event_file in sorted(events_dir(run_dir).glob("*.json")):
        # A FIFO or a device in its place is refused, never read (files.read_bytes).
        raw = files.read_bytes(event_file)
        try:
            data = files.loads(raw)
            counter = JobEvent.model_validate(data).counter
        except json.JSONDecodeError as exc:
            if problems is not None:
                problems.append(f"{event_file}: cut short, not whole JSON ({exc})")
            continue
        except ValueError as exc:  # nested too deeply, no event, a counter "12"
            raise InputError(
                f"{event_file}: not an ansible-runner job event ({_first(exc)})"
            ) from None
        events.append((counter, data))
    return [data for _, data in sorted(events, key=lambda pair: pair[0])]


def last_task_count(playbook: str) -> int | None:
    """Tasks started by the last completed run of a playbook: the progress bar's total."""
    for record in list_records():
        # A sliced run's parts started many runs' tasks, one part (--part) a share of
        # the hosts and plays: neither is one whole run's total.
        whole = not record.parts and not record.part
        if record.playbook == playbook and record.status == "successful" and whole:
            return record.tasks_started or None
    return None

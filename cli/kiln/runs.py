"""Kiln's record of runs: one ansible-runner private data dir per run, kept.

Layout of a run directory (under paths.runs_dir()):
    kiln.json                     what was asked and how it ended (RunRecord)
    artifacts/ansible/job_events/ ansible-runner's events, replayed by `kiln runs show`
    artifacts/ansible/stdout      Ansible's own output
"""

import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from kiln import files, paths, record_ids
from kiln.summary import EventAccumulator, RunSummary

RUNNER_IDENT = "ansible"
RECORD_FILE = "kiln.json"


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


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_run_dir(playbook: str) -> tuple[str, Path]:
    run_id = record_ids.new_id(Path(playbook).stem)
    run_dir = paths.runs_dir() / run_id
    run_dir.mkdir(parents=True, mode=0o700)
    return run_id, run_dir


def save(run_dir: Path, record: RunRecord) -> None:
    files.write_private(run_dir / RECORD_FILE, record.model_dump_json(indent=2))


def events_dir(run_dir: Path) -> Path:
    return run_dir / "artifacts" / RUNNER_IDENT / "job_events"


def list_records() -> list[RunRecord]:
    """Every kept run, newest first."""
    records = []
    if paths.runs_dir().is_dir():
        for record_file in paths.runs_dir().glob(f"*/{RECORD_FILE}"):
            try:
                records.append(RunRecord.model_validate_json(record_file.read_text()))
            except ValueError:
                continue  # a run killed while writing its record; nothing to show
    return sorted(records, key=lambda r: (r.started, r.run), reverse=True)


def find(run: str) -> tuple[RunRecord, Path]:
    """A run by id, unique id prefix, or 'latest'."""
    records = {r.run: r for r in list_records()}
    found = record_ids.pick(list(records), run, "run", paths.runs_dir(), "kiln runs list")
    return records[found], paths.runs_dir() / found


def replay(record: RunRecord, run_dir: Path) -> RunSummary:
    """Rebuild a run's summary from its job events."""
    accumulator = EventAccumulator(record.run, record.playbook)
    events = []
    for event_file in events_dir(run_dir).glob("*.json"):
        try:
            events.append(json.loads(event_file.read_text()))
        except ValueError:
            continue  # a partial file from an interrupted write
    for event in sorted(events, key=lambda e: e.get("counter", 0)):
        accumulator.feed(event)
    accumulator.summary.status = record.status
    return accumulator.summary


def last_task_count(playbook: str) -> int | None:
    """Tasks started by the last completed run of a playbook: the progress bar's total."""
    for record in list_records():
        if record.playbook == playbook and record.status == "successful":
            return record.tasks_started or None
    return None

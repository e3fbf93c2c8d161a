"""A rollout's record: its options, its plan and how far each batch got, written after
every step (atomically) under the state directory, so `kiln rollout --resume ID` carries
on after Ctrl-C, a crash of the control machine or a lost connection, and never drains
again a batch that is done."""

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from kiln import files, paths
from kiln.errors import ExitCode, InputError, KilnError
from kiln.run import ids

RUNNING = "running"  # under way, or cut short (Ctrl-C, a crash): --resume carries on
STOPPED = "stopped"  # the stop rule (--max-failures) or no room: --resume carries on
FINISHED = "finished"  # every batch done: nothing to resume
STATUSES = (RUNNING, STOPPED, FINISHED)
# Above a rollout's record on 100,000 nodes (its plan and batches, about 30 MB).
MAX_RECORD_BYTES = 256 * 1024 * 1024


class Resumable(KilnError):
    """The rollout cannot go on now, and `--resume` carries it on once the cause is
    gone (the command says how)."""

    def __init__(self, message: str, rollout: str, code: ExitCode = ExitCode.BAD_INPUT) -> None:
        super().__init__(message, code)
        self.rollout = rollout


# A batch's states in order (kiln.rollout.batch.State); each records when it ended
# (UTC, ISO 8601), and --resume carries on from the last.
STEPS = ("drained", "idle", "applied", "rebooted", "checked", "resumed")


@dataclass
class Options:
    nodes: list[str] | None = None
    max_unavailable: int = 1
    max_failures: int = 1
    deadline: str | None = None  # ISO 8601 with its zone: when every batch stops waiting
    wait_s: int | None = None  # or: how long each batch waits for its jobs; both None: no end
    at_deadline: str = "skip"  # skip: leave the batch's busy nodes; requeue their jobs
    tags: str | None = None
    suites: list[str] = field(default_factory=list)
    profile: str | None = None  # validate's; None: the inventory's validate_profile


@dataclass
class Step:
    """One host or batch: its nodes, the steps done (step -> when), its verdicts."""

    nodes: list[str]
    reboot: list[str] = field(default_factory=list)
    done: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # node -> first reason
    # Of `failed`, the nodes whose check could not report (kiln.health.judgements): held
    # drained like the failed, judged not checked.
    unchecked: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why (a deadline)

    @property
    def finished(self) -> bool:
        return "resumed" in self.done


@dataclass
class Record:
    id: str
    inventory: str
    started: str
    options: Options
    status: str = RUNNING
    services: list[Step] = field(default_factory=list)
    batches: list[Step] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)  # kiln.rollout.plan.Plan.to_dict
    capacity: list[list[Any]] = field(default_factory=list)  # [UTC time, free nodes]
    judgements: list[dict[str, Any]] = field(default_factory=list)  # Judgement.to_dict
    notes: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)

    @property
    def failed(self) -> dict[str, str]:
        return {
            n: why for step in [*self.services, *self.batches] for n, why in step.failed.items()
        }

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> "Record":
        """The record Kiln wrote, every field of its type (a status of 1 or an inventory
        of 5 is no record; pydantic's lax rules take the digits "2" for 2), its status one
        Kiln writes: ValueError naming the first field that is not."""
        try:
            record = _RECORD.validate_python(data)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise ValueError(f"{where}: {error['msg']}" if where else error["msg"]) from None
        if record.status not in STATUSES:
            raise ValueError(f"status {record.status!r} is none of {', '.join(STATUSES)}")
        return record


_RECORD = pydantic.TypeAdapter(Record)


def directory() -> Path:
    return paths.state_dir() / "rollouts"


def new_id() -> str:
    return ids.new_id("rollout")


def save(record: Record) -> None:
    files.write_private(
        directory() / f"{record.id}.json", files.json_text(record.to_json(), indent=1)
    )


def known() -> list[str]:
    """Every record's id, newest first."""
    found = directory().glob("*.json") if directory().is_dir() else []
    return sorted((p.stem for p in found), reverse=True)


def read(chosen: str) -> Record:
    """The record `chosen`, or InputError naming its file and why it cannot be read (not
    a regular file, too large, not JSON, not a record)."""
    path = directory() / f"{chosen}.json"
    data = files.read_json(path, str(path), MAX_RECORD_BYTES)
    try:
        return Record.from_json(data)
    except ValueError as exc:
        raise InputError(f"{path}: not a rollout record Kiln can read ({exc})") from None


def load(wanted: str, inventory: Path) -> Record:
    """The record to resume: by id (a unique prefix, or 'latest'), of this inventory, and
    not finished."""
    chosen = ids.pick(known(), wanted, "rollout", directory(), "kiln report list")
    record = read(chosen)
    if record.status == FINISHED:
        raise InputError(f"rollout {chosen} is finished: nothing to resume")
    if not _same_inventory(record.inventory, inventory):
        raise InputError(
            f"rollout {chosen} is of the inventory {record.inventory!r}, not {inventory}"
        )
    return record


def unfinished(inventory: Path, problems: list[str]) -> list[str]:
    """The rollouts of this inventory cut short (not stopped by their rule, not
    finished): a new one would drain around their drained nodes. A record that cannot
    be read is left out with a line in `problems` naming it: one stray file must not
    stop every rollout."""
    found = []
    for chosen in known():
        try:
            record = read(chosen)
        except InputError as exc:
            problems.append(str(exc))
            continue
        if record.status == RUNNING and _same_inventory(record.inventory, inventory):
            found.append(chosen)
    return found


def _same_inventory(recorded: str, inventory: Path) -> bool:
    try:
        return Path(recorded).resolve() == inventory.resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a loop of links
        return False

"""A rollout's record: its options, its plan and how far each batch got, written after
every step (atomically) under the state directory, so `kiln rollout --resume ID` carries
on after Ctrl-C, a crash of the control machine or a lost connection, and never drains
again a batch that is done."""

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kiln import files, paths
from kiln.errors import ExitCode, InputError, KilnError
from kiln.run import ids

RUNNING = "running"  # under way, or cut short (Ctrl-C, a crash): --resume carries on
STOPPED = "stopped"  # the stop rule (--max-failures) or no room: --resume carries on
FINISHED = "finished"  # every batch done: nothing to resume


class Resumable(KilnError):
    """The rollout cannot go on now, and `--resume` carries it on once the cause is
    gone (the command says how)."""

    def __init__(self, message: str, rollout: str, code: ExitCode = ExitCode.BAD_INPUT) -> None:
        super().__init__(message, code)
        self.rollout = rollout


# A batch's steps in order; each records when it ended (UTC, ISO 8601).
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
    def from_json(cls, data: dict[str, Any]) -> "Record":
        return cls(
            **{
                **data,
                "options": Options(**data["options"]),
                "services": [Step(**s) for s in data["services"]],
                "batches": [Step(**s) for s in data["batches"]],
            }
        )


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


def load(wanted: str, inventory: Path) -> Record:
    """The record to resume: by id (a unique prefix, or 'latest'), of this inventory, and
    not finished."""
    chosen = ids.pick(known(), wanted, "rollout", directory(), "kiln report list")
    path = directory() / f"{chosen}.json"
    try:
        record = Record.from_json(json.loads(files.read_text(path, f"rollout {chosen}")))
    except (ValueError, TypeError, KeyError) as exc:
        raise InputError(f"{path}: not a rollout record Kiln can read ({exc})") from None
    if record.status == FINISHED:
        raise InputError(f"rollout {chosen} is finished: nothing to resume")
    if Path(record.inventory).resolve() != inventory.resolve():
        raise InputError(
            f"rollout {chosen} is of the inventory {record.inventory}, not {inventory}"
        )
    return record


def unfinished(inventory: Path) -> list[str]:
    """The rollouts of this inventory cut short (not stopped by their rule, not
    finished): a new one would drain around their drained nodes."""
    found = []
    for chosen in known():
        try:
            data = json.loads((directory() / f"{chosen}.json").read_text())
        except (OSError, ValueError):
            continue
        same = Path(str(data.get("inventory", ""))).resolve() == inventory.resolve()
        if same and data.get("status") == RUNNING:
            found.append(chosen)
    return found

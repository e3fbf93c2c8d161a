"""The record of one validation run, kept as report.json beside its renderings.

Everything a rendering or a comparison needs is in it, so `kiln report show` works
after the cluster is gone (for example after a region migration).
"""

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kiln import paths, record_ids
from kiln.errors import InputError
from kiln.validation.verdicts import Judgement, Verdict, worst

REPORT_FILE = "report.json"
FORMATS = {
    "json": REPORT_FILE,
    "markdown": "report.md",
    "html": "report.html",
    "junit": "junit.xml",
}


@dataclass
class Report:
    id: str
    started: str
    inventory: str
    profile: str | None
    suites: list[str]
    nodes: list[str]
    judgements: list[Judgement] = field(default_factory=list)
    node_verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    curves: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    actions: dict[str, Any] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)  # the ansible runs (kiln runs show)
    finished: str | None = None

    @property
    def verdict(self) -> Verdict:
        found = {Verdict(v["verdict"]) for v in self.node_verdicts.values()}
        found |= {j.verdict for j in self.judgements}
        return worst(found)

    def action_lines(self) -> list[str]:
        """What the run did in Slurm, a line each: drained, resumed, left alone."""
        actions = self.actions
        lines = [f"drained {n}: {r}" for n, r in sorted(actions.get("drain", {}).items())]
        lines += [f"resumed {n}" for n in actions.get("resume", [])]
        lines += [f"left {n}: {r}" for n, r in sorted(actions.get("left", {}).items())]
        return lines

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["judgements"] = [j.to_dict() for j in self.judgements]
        data["verdict"] = self.verdict.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Report":
        data = {k: v for k, v in data.items() if k != "verdict"}
        judgements = [
            Judgement(**{**j, "verdict": Verdict(j["verdict"])}) for j in data.pop("judgements")
        ]
        return cls(**data, judgements=judgements)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def directory(report_id: str) -> Path:
    return paths.state_dir() / "validations" / report_id


def load(report_id: str) -> Report:
    """A run by id, unique id prefix, 'latest', or the path of a report.json."""
    given = Path(report_id)
    if given.name == REPORT_FILE and given.is_file():
        path = given
    else:
        base = paths.state_dir() / "validations"
        known = sorted((p.parent.name for p in base.glob(f"*/{REPORT_FILE}")), reverse=True)
        found = record_ids.pick(known, report_id, "validation run", base, "kiln report list")
        path = base / found / REPORT_FILE
    try:
        return Report.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise InputError(f"{path}: not a Kiln validation report ({exc})") from None


def list_reports() -> list[Report]:
    base = paths.state_dir() / "validations"
    found = []
    for path in sorted(base.glob(f"*/{REPORT_FILE}"), reverse=True):
        try:
            found.append(Report.from_json(json.loads(path.read_text())))
        except (OSError, ValueError, TypeError, KeyError):
            continue  # a run killed while writing; nothing to list
    return found

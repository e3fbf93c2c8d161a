"""The record of one validation run, kept as report.json beside its renderings.

Everything a rendering or a comparison needs is in it, so `kiln report show` works
after the cluster is gone (for example after a region migration).
"""

import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import pydantic
from typing_extensions import TypedDict  # pydantic validates these only on 3.12+ otherwise

from kiln import paths
from kiln.errors import ExitCode, InputError
from kiln.files import loads, read_text
from kiln.run import ids
from kiln.validation import assess
from kiln.validation.verdicts import Judgement, Verdict, exit_code, worst

REPORT_FILE = "report.json"
FORMATS = {
    "json": REPORT_FILE,
    "markdown": "report.md",
    "html": "report.html",
    "junit": "junit.xml",
}


class NodeVerdict(TypedDict):
    verdict: Verdict
    reasons: list[str]


# [bytes, busbw GB/s]
Point = Annotated[list[int | float], pydantic.Field(min_length=2, max_length=2)]


class Curve(TypedDict):
    node: str
    collective: str
    points: list[Point]


class Series(TypedDict):
    """A figure over time (burn-in): [seconds since the start, value] points."""

    node: str
    device: str  # "gpu0", "cpu"; the collective for busbw
    metric: str  # tflops, temperature_c, power_w, sm_clock_mhz, busbw_gbps
    points: list[Point]


class Actions(TypedDict, total=False):
    drain: dict[str, str]  # node -> reason
    resume: list[str]
    left: dict[str, str]  # node -> why it was left alone


@dataclass
class Report:
    id: str
    started: str
    inventory: str
    profile: str | None
    suites: list[str]
    nodes: list[str]
    # node -> its role and place in the inventory ("slurm_compute 3"): how `kiln report
    # compare` lines up two clusters' nodes when their names differ
    positions: dict[str, str] = field(default_factory=dict)
    judgements: list[Judgement] = field(default_factory=list)
    node_verdicts: dict[str, NodeVerdict] = field(default_factory=dict)
    curves: list[Curve] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    actions: Actions = field(default_factory=lambda: Actions())
    runs: list[str] = field(default_factory=list)  # the ansible runs (kiln runs show)
    finished: str | None = None
    # The profile's outlier band (its outlier_percent), drawn around the fleet median in
    # the HTML report's fleet view; None: no profile (the profiles' default is drawn).
    outlier_percent: float | None = None

    def node_verdict(self, node: str) -> NodeVerdict:
        """A node's verdict; a node without one was not checked, which is never a pass."""
        return self.node_verdicts.get(node) or NodeVerdict(
            verdict=Verdict.UNCHECKED, reasons=["not checked"]
        )

    def judge_nodes(
        self,
        reasons: dict[str, list[str]] | None = None,
        unjudged: Verdict = Verdict.UNCHECKED,
        nodes: list[str] | None = None,
    ) -> dict[str, assess.NodeVerdict]:
        """node_verdicts from the judgements, for `nodes` (default: the report's): the
        one place they are derived, for every command that writes a report (validate,
        burn-in, the scheduled active check, drift, judge). By kiln.validation.assess:
        the worst judgement decides; `reasons` are the caller's where it has better
        ones; `unjudged` is the verdict of a node with no judgement."""
        found = assess.per_node(
            self.judgements, self.nodes if nodes is None else nodes, reasons, unjudged
        )
        self.node_verdicts = {n: NodeVerdict(**v.to_dict()) for n, v in found.items()}
        return found

    @property
    def verdict(self) -> Verdict:
        """The worst of its nodes' and judgements' verdicts; a report of nothing was not
        checked."""
        found = {Verdict(self.node_verdict(n)["verdict"]) for n in self.nodes}
        found |= {Verdict(v["verdict"]) for v in self.node_verdicts.values()}
        found |= {j.verdict for j in self.judgements}
        return worst(found, default=Verdict.UNCHECKED)

    @property
    def exit_code(self) -> ExitCode:
        """5 when something failed, else 3 when a node was not checked, else 0."""
        return exit_code(self.verdict)

    @property
    def kind(self) -> str:
        """What the report is of: a validation, a burn-in, a drift check."""
        named = {"burn-in": "burn-in", "drift": "drift check", "rollout": "rollout"}
        return named.get(self.suites[0], "validation") if len(self.suites) == 1 else "validation"

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
    def from_json(cls, data: Any) -> "Report":
        """A report read back; every field has its type, or ValueError says which not."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k != "verdict"}  # derived
        try:
            return _REPORT.validate_python(data)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "the top level"
            raise ValueError(f"{where}: {error['msg']}") from None


_REPORT = pydantic.TypeAdapter(Report)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def directory(report_id: str) -> Path:
    return paths.state_dir() / "validations" / report_id


def load(report_id: str) -> Report:
    """A run by id, unique id prefix, 'latest', or the path of a report.json."""
    given = Path(report_id)
    if given.name == REPORT_FILE and given.exists():  # the reader refuses a FIFO
        path = given
    else:
        base = paths.state_dir() / "validations"
        known = sorted((p.parent.name for p in base.glob(f"*/{REPORT_FILE}")), reverse=True)
        found = ids.pick(known, report_id, "validation run", base, "kiln report list")
        path = base / found / REPORT_FILE
    return _read(path)


def _finite(token: str) -> float:
    """JSON's numbers only: Python reads NaN, Infinity and 1e999 too, and a report
    holding one compares as "+inf% better"."""
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"{token} is not a finite number")
    return value


def _not_a_number(token: str) -> None:
    raise ValueError(f"{token} is not a number JSON allows")


def _read(path: Path) -> Report:
    try:
        data = loads(read_text(path), parse_float=_finite, parse_constant=_not_a_number)
        return Report.from_json(data)
    except ValueError as exc:
        raise InputError(f"{path}: not a Kiln validation report ({exc})") from None


def list_reports() -> tuple[list[Report], list[str]]:
    """Every kept report, newest first, and a line for each that cannot be read."""
    base = paths.state_dir() / "validations"
    found, problems = [], []
    for path in sorted(base.glob(f"*/{REPORT_FILE}"), reverse=True):
        try:
            found.append(_read(path))
        except InputError as exc:
            problems.append(exc.message)
    return found, problems

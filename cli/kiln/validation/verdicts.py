"""Verdicts: a measured value against a threshold, or against the fleet's median.

A threshold has a direction: `min` (bandwidth, IOPS: higher is better) or `max`
(seconds: lower is better). Within `warn_band` of the limit on the good side the
verdict is warn: it passes, but with no headroom.
"""

import math
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum

from kiln.errors import ExitCode


class Verdict(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # not judged: nothing meaningful was measured (e.g. a one-rank collective)
    # Measured, not judged: a figure with no reference number to hold it to (no profile,
    # or none for that test). Never a pass; it fails nothing either (exit 0).
    MEASURED = "measured"
    # A node nothing was checked on (unreachable, its run stopped first): never a pass,
    # and no proof of a fault either (it is not drained for it).
    UNCHECKED = "unchecked"


# Worst last: a node or a run takes the worst verdict of its parts (a run that judged
# some figures and only measured others did not pass as a whole).
SEVERITY = (
    Verdict.SKIP,
    Verdict.PASS,
    Verdict.MEASURED,
    Verdict.WARN,
    Verdict.UNCHECKED,
    Verdict.FAIL,
)


def worst(found: Iterable[Verdict], default: Verdict = Verdict.PASS) -> Verdict:
    return max(found, key=SEVERITY.index, default=default)


def exit_code(verdict: Verdict, canceled: bool = False) -> ExitCode:
    """Every command that judges exits by this: 5 when something failed (even in a
    canceled run: what was judged stands), else 130 when the run was canceled, else 3
    when a node was not checked, else 0 (warnings, skips and figures measured but not
    judged fail nothing). Not 4: that is a host that failed a run (docs/cli.md)."""
    if verdict is Verdict.FAIL:
        return ExitCode.VALIDATION_FAILED
    if canceled:
        return ExitCode.INTERRUPTED
    return ExitCode.NOT_CHECKED if verdict is Verdict.UNCHECKED else ExitCode.OK


@dataclass(frozen=True)
class Threshold:
    limit: float
    higher_is_better: bool
    source: str  # "profile h100-sxm-8x-ib400", "fleet median"


@dataclass
class Judgement:
    node: str  # a host, a pair "a,b", or a file for numbers Kiln did not run
    test: str  # catalogue name, e.g. storage.seq_read
    subject: str  # what was measured: "/shared", "8 ranks on 2 nodes"; may be ""
    value: float | None
    unit: str
    verdict: Verdict
    reason: str
    threshold: float | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        return data

    def shown(self) -> tuple[str, str]:
        """(value, threshold), each with its unit, as every rendering of a report shows
        them; "" where there is none."""
        return _with_unit(self.value, self.unit), _with_unit(self.threshold, self.unit)


def _with_unit(value: float | None, unit: str) -> str:
    return f"{fmt(value)} {unit}" if value is not None else ""


def fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def judge(
    node: str,
    test: str,
    subject: str,
    value: float,
    unit: str,
    threshold: Threshold | None,
    warn_band: float = 0.05,
) -> Judgement:
    what = " ".join(p for p in (test, subject) if p)
    if not math.isfinite(value):  # NaN passes every comparison; no report holds it
        limit = threshold.limit if threshold else None
        reason = f"{what}: no measurement ({value} {unit})"
        return Judgement(node, test, subject, None, unit, Verdict.FAIL, reason, limit)
    if threshold is None:
        return Judgement(
            node, test, subject, value, unit, Verdict.PASS, f"{what} {fmt(value)} {unit}"
        )
    limit = threshold.limit
    if threshold.higher_is_better:
        failed, close, sign = value < limit, value < limit * (1 + warn_band), "<"
    else:
        failed, close, sign = value > limit, value > limit * (1 - warn_band), ">"
    verdict = Verdict.FAIL if failed else Verdict.WARN if close else Verdict.PASS
    relation = sign if failed else ">=" if threshold.higher_is_better else "<="
    reason = f"{what} {fmt(value)} {unit} {relation} {fmt(limit)} {unit} ({threshold.source})"
    if verdict is Verdict.WARN:
        reason += f", within {warn_band:.0%} of the limit"
    return Judgement(node, test, subject, value, unit, verdict, reason, limit)


def outliers(
    judgements: list[Judgement], percent: float, higher_is_better: dict[str, bool]
) -> list[Judgement]:
    """Fail every judgement more than `percent` worse than the median of its test and
    subject across the fleet (needs three or more nodes: with two, neither is the odd one).
    Returns the judgements, replaced where they became failures."""
    groups: dict[tuple[str, str], list[Judgement]] = {}
    for j in judgements:
        if j.value is not None:
            groups.setdefault((j.test, j.subject), []).append(j)
    replaced: dict[int, Judgement] = {}
    for (test, subject), group in groups.items():
        if len(group) < 3 or all(j.verdict is Verdict.FAIL for j in group):
            continue
        median = statistics.median(j.value for j in group if j.value is not None)
        better = higher_is_better.get(test, True)
        limit = median * (1 - percent / 100) if better else median * (1 + percent / 100)
        source = f"{percent:g}% off the fleet median {fmt(median)}"
        for j in group:
            assert j.value is not None
            if j.verdict is Verdict.FAIL:
                continue
            worse = j.value < limit if better else j.value > limit
            if worse:
                outlier = judge(
                    j.node, test, subject, j.value, j.unit, Threshold(limit, better, source)
                )
                replaced[id(j)] = outlier
    return [replaced.get(id(j), j) for j in judgements]

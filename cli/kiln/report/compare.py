"""What got better or worse between two validation runs, per node and test.

Nodes are matched by name; after a region migration with new names, the tests still
line up under the fleet's medians (`node` is `fleet median` there)."""

import statistics
from dataclasses import dataclass

from kiln.report.model import Report
from kiln.validation.profiles import TESTS
from kiln.validation.verdicts import Judgement, worst

FLEET = "fleet median"


@dataclass
class Change:
    node: str
    test: str
    subject: str
    before: float | None
    after: float | None
    unit: str
    verdict_before: str
    verdict_after: str

    @property
    def percent(self) -> float | None:
        if self.before in (None, 0) or self.after is None:
            return None
        return (self.after - self.before) / self.before * 100

    @property
    def direction(self) -> str:
        """better, worse or same, by the test's direction; verdicts first."""
        order = {"skip": 0, "pass": 0, "warn": 1, "fail": 2, "": 3}
        if order[self.verdict_after] != order[self.verdict_before]:
            return "better" if order[self.verdict_after] < order[self.verdict_before] else "worse"
        if self.percent is None or abs(self.percent) < 5:
            return "same"
        higher = TESTS[self.test].higher_is_better if self.test in TESTS else True
        return "better" if (self.percent > 0) == higher else "worse"


def _index(judgements: list[Judgement]) -> dict[tuple[str, str, str], Judgement]:
    return {(j.node, j.test, j.subject): j for j in judgements}


def _medians(report: Report) -> dict[tuple[str, str, str], Judgement]:
    groups: dict[tuple[str, str], list[Judgement]] = {}
    for j in report.judgements:
        if j.value is not None and j.node in report.nodes:
            groups.setdefault((j.test, j.subject), []).append(j)
    out = {}
    for (test, subject), group in groups.items():
        median = statistics.median(j.value for j in group if j.value is not None)
        out[(FLEET, test, subject)] = Judgement(
            FLEET, test, subject, median, group[0].unit, worst(j.verdict for j in group), ""
        )
    return out


def compare(a: Report, b: Report) -> list[Change]:
    before = {**_index(a.judgements), **_medians(a)}
    after = {**_index(b.judgements), **_medians(b)}
    changes = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        changes.append(
            Change(
                *key,
                old.value if old else None,
                new.value if new else None,
                (old or new).unit if (old or new) else "",
                old.verdict.value if old else "",
                new.verdict.value if new else "",
            )
        )
    return changes

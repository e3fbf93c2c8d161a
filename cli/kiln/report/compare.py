"""What got better or worse between two validation runs, per node and test.

Nodes are matched by name, and a node the second run does not have by name is matched
by its role and place in the inventory (the report's positions): after a region
migration renamed every node, gpu007 of the old cluster lines up with gpx007 of the new
one. The fleet's medians line up either way (`node` is `fleet median` there)."""

import statistics
from dataclasses import dataclass

from kiln import hostlist
from kiln.report.document import Report
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
    node_before: str | None = None  # the first run's name, where it differs

    @property
    def percent(self) -> float | None:
        if self.before in (None, 0) or self.after is None:
            return None
        return (self.after - self.before) / self.before * 100

    @property
    def direction(self) -> str:
        """better, worse or same, by the test's direction; verdicts first."""
        order = {"skip": 0, "pass": 0, "measured": 0, "warn": 1, "unchecked": 2, "fail": 3, "": 4}
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
    nodes = set(report.nodes)  # a list's `in` made 100,000 nodes take minutes
    for j in report.judgements:
        if j.value is not None and j.node in nodes:
            groups.setdefault((j.test, j.subject), []).append(j)
    out = {}
    for (test, subject), group in groups.items():
        median = statistics.median(j.value for j in group if j.value is not None)
        out[(FLEET, test, subject)] = Judgement(
            FLEET, test, subject, median, group[0].unit, worst(j.verdict for j in group), ""
        )
    return out


def matching(a: Report, b: Report) -> dict[str, str]:
    """Each node of A that B has under another name: A's name -> B's, by position."""
    named_a, named_b = set(a.nodes) | set(a.positions), set(b.nodes) | set(b.positions)
    # B's nodes that A does not have by name, by position
    free = {place: node for node, place in b.positions.items() if node not in named_a}
    return {
        node: free[place]
        for node, place in a.positions.items()
        if node not in named_b and place in free
    }


def _renamed(node: str, names: dict[str, str]) -> str:
    """NODE in B's names: one node, or a hostlist of several (a multi-node run)."""
    if not names or node == FLEET:
        return node
    try:
        members = hostlist.expand(node)
    except ValueError:  # not a hostlist
        return node
    if not all(m in names for m in members):
        return node
    if "[" not in node:  # one node, or a pair "a,b" as the pairwise search writes it
        return ",".join(names[m] for m in members)
    return hostlist.compress(names[m] for m in members)


def compare(a: Report, b: Report) -> list[Change]:
    names = matching(a, b)
    was = {}
    before = {}
    for key, judgement in {**_index(a.judgements), **_medians(a)}.items():
        node = _renamed(key[0], names)
        if node != key[0]:
            was[node] = key[0]
        before[(node, *key[1:])] = judgement
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
                was.get(key[0]),
            )
        )
    return changes

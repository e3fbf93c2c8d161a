"""Find the slow node when a multi-node collectives run fails: pairwise runs.

Round 1 pairs the nodes (a,b), (c,d), ...; an odd one out is paired with the first
node. A pair that meets the threshold clears both its nodes. Round 2 pairs each node of
a failed pair with a cleared node: a node that fails again is the slow one; one that
passes was the victim of its partner. With no cleared node to pair with (every pair
failed), the fabric or the test itself is suspect, not one node, and round 2 says so.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from kiln.validation.verdicts import Judgement, Verdict, fmt

# The multi-node result whose failure (validate) or drop (burn-in) starts the search.
MULTI_NODE = "collectives.all_reduce.multi_node"


def first_round(nodes: list[str]) -> list[tuple[str, str]]:
    pairs = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and len(nodes) > 1:
        pairs.append((nodes[-1], nodes[0]))
    return pairs


@dataclass
class Findings:
    slow: list[str] = field(default_factory=list)  # failed with a good partner
    cleared: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)  # in a failed pair, not yet told apart
    note: str = ""


def after_first(results: dict[tuple[str, str], bool]) -> tuple[Findings, list[tuple[str, str]]]:
    """results: pair -> passed. The findings so far, and the pairs of round 2."""
    cleared = sorted({n for pair, ok in results.items() if ok for n in pair})
    suspects = sorted({n for pair, ok in results.items() if not ok for n in pair} - set(cleared))
    findings = Findings(cleared=cleared, suspects=suspects)
    if not suspects:
        return findings, []
    if not cleared:
        findings.note = (
            "every pair failed: the fabric, the switches or the threshold are suspect, "
            "not a single node"
        )
        return findings, []
    # Each suspect with a good partner it has not run with, a different one for each
    # suspect where there are enough of them.
    second = []
    for index, suspect in enumerate(suspects):
        before = {n for pair in results if suspect in pair for n in pair}
        fresh = [n for n in cleared if n not in before] or cleared
        second.append((suspect, fresh[index % len(fresh)]))
    return findings, second


def after_second(findings: Findings, results: dict[tuple[str, str], bool]) -> Findings:
    for (suspect, _), ok in sorted(results.items()):
        if ok:
            findings.cleared.append(suspect)
        else:
            findings.slow.append(suspect)
        findings.suspects.remove(suspect)
    findings.cleared.sort()
    if not findings.slow:
        findings.note = (
            "every suspect passed with a healthy partner: the multi-node failure does not "
            "come from one node (load at the time, or the fabric between pairs)"
        )
    return findings


# One round of pairs run: its index (1, 2) and the pairs -> whether each pair passed.
RunRound = Callable[[int, list[tuple[str, str]]], dict[tuple[str, str], bool]]


def search(tested: list[str], run_round: RunRound) -> Findings:
    """The two rounds, each run by `run_round`."""
    first = run_round(1, first_round(tested))
    findings, second = after_first(first)
    if second:
        findings = after_second(findings, run_round(2, second))
    return findings


def slow_judgements(
    found: Findings, limit: float, subject: str, lead: str, what: str, tail: str = ""
) -> list[Judgement]:
    """A fail for each slow node: `lead` opens the reason, `what` names the result that
    started the search ("run", "drop"), `tail` closes it."""
    return [
        Judgement(
            node,
            "collectives.pairwise",
            subject,
            None,
            "",
            Verdict.FAIL,
            f"{lead}the slow node of the multi-node {what}: all_reduce with a healthy "
            f"partner stays under {fmt(limit)} GB/s{tail}",
        )
        for node in found.slow
    ]

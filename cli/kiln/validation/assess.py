"""Judge a validation run's findings: values against the profile and the fleet, checks
as they are; then one verdict per node, with the reason that decides it."""

from dataclasses import dataclass, field

from kiln.validation import verdicts
from kiln.validation.collect import Collected
from kiln.validation.profiles import CHECKS, TESTS, Profile
from kiln.validation.verdicts import Judgement, Verdict

# With no profile, only the fleet judges: a node this far below its peers fails.
DEFAULT_OUTLIER_PERCENT = 25.0


@dataclass
class NodeVerdict:
    node: str
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)  # failures first, then warnings

    def to_dict(self) -> dict:
        """As a report keeps it (kiln.report.document.NodeVerdict)."""
        return {"verdict": self.verdict.value, "reasons": self.reasons}


def judge(found: Collected, profile: Profile | None) -> list[Judgement]:
    band = profile.warn_band_percent / 100 if profile else 0.05
    measured = [
        verdicts.judge(
            m.node,
            m.test,
            m.subject,
            m.value,
            TESTS[m.test].unit,
            profile.threshold(m.test) if profile else None,
            band,
        )
        for m in found.measures
    ]
    percent = profile.outlier_percent if profile else DEFAULT_OUTLIER_PERCENT
    direction = {name: test.higher_is_better for name, test in TESTS.items()}
    # The multi-node collectives run is one result for all nodes: no peers to compare.
    measured = verdicts.outliers(measured, percent, direction)
    checks = [
        Judgement(c.node, c.test, c.subject, None, "", c.verdict, _check_reason(c))
        for c in found.checks
    ]
    return sorted(checks + measured, key=lambda j: (j.node, j.test, j.subject))


def _check_reason(check) -> str:
    what = " ".join(p for p in (check.test, check.subject) if p)
    return f"{what}: {check.reason}"


NOTHING_CHECKED = "nothing was checked on the node"


def per_node(
    judgements: list[Judgement],
    nodes: list[str],
    reasons: dict[str, list[str]] | None = None,
    unjudged: Verdict = Verdict.UNCHECKED,
) -> dict[str, NodeVerdict]:
    """Each node's verdict: the worst of its judgements. A node with none (skips aside)
    gets `unjudged`: not checked, unless the caller knows better (`kiln drift` judges
    only what drifted; a one-rank nccl-tests file is a skip). Its reasons: the caller's
    where it gives any (`reasons`, node -> list), else its judgements' reasons, failures
    first, then what was not checked, then warnings. Results of several nodes together
    (a multi-node run) are reported but decide no single node's verdict."""
    given = reasons or {}
    idle = [NOTHING_CHECKED] if unjudged is Verdict.UNCHECKED else []
    found = {node: NodeVerdict(node, Verdict.PASS) for node in nodes}
    judged = {j.node for j in judgements if j.verdict is not Verdict.SKIP}
    for node in found.keys() - judged:
        found[node] = NodeVerdict(node, unjudged, list(idle))
    # The cause first: a missing mount explains the failed import that follows from it.
    order = list(CHECKS)
    ranked = sorted(
        judgements,
        key=lambda j: (order.index(j.test) if j.test in order else len(order), j.test, j.subject),
    )
    for verdict in (Verdict.FAIL, Verdict.UNCHECKED, Verdict.WARN, Verdict.MEASURED):
        for j in ranked:
            if j.node in found and j.verdict is verdict:
                entry = found[j.node]
                if entry.verdict is Verdict.PASS:
                    entry.verdict = verdict
                entry.reasons.append(j.reason)
    for node, entry in found.items():
        entry.reasons = given.get(node) or entry.reasons
    return found

"""kiln-health's results (the health role's node check) as the control node reads and
judges them: `kiln health` (kiln.health.check runs it), the rollout's batch check,
burn-in's rounds and the scheduled active check (kiln.health.schedule).

The check's rules live in the node program, which Slurm also runs on its own; this
package only reads what each node reported. The role's own logic (its settings, each
node's configuration) is kiln.roles.health."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kiln import files
from kiln.validation.verdicts import Judgement, Verdict, worst

if TYPE_CHECKING:
    from kiln.run.events import RunSummary

# kiln-health's statuses as verdicts: the one mapping `kiln health`, the rollout's
# batch check, burn-in's rounds and the scheduled active check's reports judge them by.
VERDICTS = {"OK": Verdict.PASS, "WARN": Verdict.WARN, "FAIL": Verdict.FAIL}
STATUSES = tuple(VERDICTS)
TEST = "health"  # a check's judgement is health.<check>
RUN = "health.run"  # a node that could not report: why, not checked


@dataclass
class CheckResult:
    check: str
    status: str
    reason: str


@dataclass
class NodeHealth:
    node: str
    results: list[CheckResult] = field(default_factory=list)
    action: str = ""  # what the check did in Slurm: drained or resumed the node
    error: str = ""  # why the node could not be checked

    @property
    def status(self) -> str:
        if self.error:
            return "ERROR"
        found = {r.status for r in self.results}
        return next((s for s in reversed(STATUSES) if s in found), "OK")

    @property
    def verdict(self) -> Verdict:
        """Its judgements' worst (`judgements`): not checked when it could not report,
        unless a check it did report failed."""
        return worst(j.verdict for j in judgements([self]))

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "results": [vars(r) for r in self.results],
            "action": self.action,
            "error": self.error,
        }


@dataclass
class Health:
    nodes: list[NodeHealth]
    summary: "RunSummary"

    @property
    def checks(self) -> list[str]:
        """Every check any node ran, in the order the nodes report them."""
        seen: dict[str, None] = {}
        for node in self.nodes:
            seen.update((r.check, None) for r in node.results)
        return list(seen)

    @property
    def verdict(self) -> Verdict:
        """The run's verdict for its exit code: a failing node, else one not checked."""
        return worst(n.verdict for n in self.nodes)

    def to_json(self) -> dict[str, Any]:
        return {"nodes": {n.node: n.to_json() for n in self.nodes}, "run": self.summary.run}


def read_node(node: str, text: str) -> NodeHealth:
    """A node's results from kiln-health --json; an error when they cannot be read."""
    try:
        data = files.loads(text)
        return from_results(node, data["results"], data.get("action", ""))
    except (ValueError, KeyError, TypeError) as exc:
        return NodeHealth(node, error=f"kiln-health printed no readable result ({exc})")


def from_results(node: str, results: list[dict], action: str = "", error: str = "") -> NodeHealth:
    """A node's results as kiln-health writes them ({check, status, reason}); a status
    it never writes makes the whole report unreadable (KeyError, TypeError: a result
    that is not one)."""
    checked = [CheckResult(r["check"], r["status"], r["reason"]) for r in results]
    unknown = sorted({r.status for r in checked} - set(STATUSES))
    if unknown:
        said = f"kiln-health reported an unknown status {unknown[0]!r}"
        return NodeHealth(node, action=action, error="; ".join(e for e in (error, said) if e))
    return NodeHealth(node, checked, action, error)


def judgements(checked: Iterable[NodeHealth]) -> list[Judgement]:
    """kiln-health's results as judgements, for every campaign that reads them (the
    rollout's batch check, burn-in's rounds, the scheduled active check's reports): a
    judgement `health.<check>` per result, by VERDICTS.

    The one rule for a node that could not report (`NodeHealth.error`: unreachable,
    its output unreadable, its run cut short, even beside some results): a judgement
    `health.run`, not checked, with why. Never a pass (a node not measured is never
    PASS), and not a failure either (nothing was found wrong on it): its campaign
    resumes only passing nodes, so it stays out of service where it was drained, and
    is drained for no fault it was not shown to have."""
    out = []
    for node in checked:
        out += [
            Judgement(node.node, f"{TEST}.{r.check}", "", None, "", VERDICTS[r.status], r.reason)
            for r in node.results
        ]
        if node.error:
            out.append(Judgement(node.node, RUN, "", None, "", Verdict.UNCHECKED, node.error))
    return out

"""Words the report's renderings share: a verdict as a heading says it, and the reason
shown for a node whose judgements gave none."""

from kiln.report.document import NodeVerdict
from kiln.validation.verdicts import Verdict

# What a node's verdict means when no judgement gave a reason: only a pass means that
# every test passed.
DEFAULT_REASONS = {
    Verdict.PASS: "all tests passed",
    Verdict.WARN: "a test warned",
    Verdict.FAIL: "a test failed",
    Verdict.SKIP: "nothing to judge",
    Verdict.MEASURED: "measured, not judged: no reference number",
    Verdict.UNCHECKED: "not checked",
}


def headline(verdict: Verdict) -> str:
    """The report's verdict as its title says it: MEASURED is no pass, and says so."""
    return "MEASURED, NOT JUDGED" if verdict is Verdict.MEASURED else verdict.value.upper()


def node_reason(entry: NodeVerdict, most: int | None = None) -> str:
    """A node's reasons (the first MOST of them), or what its verdict means."""
    reasons = entry["reasons"][:most] if most else entry["reasons"]
    return "; ".join(reasons) or DEFAULT_REASONS[Verdict(entry["verdict"])]

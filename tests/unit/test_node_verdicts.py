"""Report.judge_nodes (kiln.validation.assess.per_node): the one place a report's
node verdicts are derived from its judgements, for validate, burn-in, the scheduled
active check, drift and `kiln judge`."""

from kiln.errors import ExitCode
from kiln.report import document
from kiln.validation.assess import NOTHING_CHECKED, NodeVerdict
from kiln.validation.verdicts import Judgement, Verdict


def judged(node: str, test: str, verdict: Verdict, reason: str, subject: str = "") -> Judgement:
    return Judgement(node, test, subject, None, "", verdict, reason)


JUDGEMENTS = [
    # gpu001: the worst decides; failures first (the cause first: the mount before the
    # import that follows from it), then what was not checked, then warnings.
    judged("gpu001", "storage.cold_import", Verdict.FAIL, "import failed"),
    judged("gpu001", "storage.mount", Verdict.FAIL, "/shared not mounted"),
    judged("gpu001", "health.xid", Verdict.WARN, "XID 13"),
    judged("gpu001", "drift.run", Verdict.UNCHECKED, "unreachable"),
    judged("gpu001", "slurm.munge", Verdict.PASS, "decodes"),
    # gpu002: not checked beats a warning
    judged("gpu002", "storage.io", Verdict.WARN, "/shared slow", "/shared"),
    judged("gpu002", "drift.run", Verdict.UNCHECKED, "unreachable"),
    # gpu003: only skips: nothing was judged there
    judged("gpu003", "collectives.nccl_tests", Verdict.SKIP, "one rank"),
    judged("gpu004", "slurm.munge", Verdict.PASS, "decodes"),
    # several nodes together: reported, decides no single node's verdict
    judged("gpu004,gpu005", "collectives.pairwise", Verdict.FAIL, "slow pair"),
]
NODES = ["gpu001", "gpu002", "gpu003", "gpu004", "gpu005"]


def report(judgements: list[Judgement] = JUDGEMENTS) -> document.Report:
    return document.Report(
        id="r", started="", inventory="", profile=None, suites=[], nodes=NODES,
        judgements=judgements,
    )  # fmt: skip


def test_each_node_takes_its_worst_judgement_with_its_reasons_worst_first():
    found = report()
    verdicts = found.judge_nodes()
    assert found.node_verdicts == {
        "gpu001": {
            "verdict": "fail",
            "reasons": ["/shared not mounted", "import failed", "unreachable", "XID 13"],
        },
        "gpu002": {"verdict": "unchecked", "reasons": ["unreachable", "/shared slow"]},
        "gpu003": {"verdict": "unchecked", "reasons": [NOTHING_CHECKED]},
        "gpu004": {"verdict": "pass", "reasons": []},
        "gpu005": {"verdict": "unchecked", "reasons": [NOTHING_CHECKED]},
    }
    assert verdicts == {
        n: NodeVerdict(n, Verdict(v["verdict"]), v["reasons"])
        for n, v in found.node_verdicts.items()
    }
    assert found.verdict is Verdict.FAIL


def test_a_callers_reasons_and_its_verdict_for_nodes_with_no_judgement():
    """The caller's reasons where it gives any (an empty list: the judgements'); its
    verdict for a node nothing was judged on (drift: no drift is a pass; a one-rank
    nccl-tests file: a skip), with no reason of its own."""
    found = report()
    found.judge_nodes(
        {"gpu001": ["would change: munge key"], "gpu002": [], "gpu005": ["no check ran"]},
        unjudged=Verdict.PASS,
        nodes=["gpu001", "gpu002", "gpu003", "gpu005"],
    )
    assert found.node_verdicts == {
        "gpu001": {"verdict": "fail", "reasons": ["would change: munge key"]},
        "gpu002": {"verdict": "unchecked", "reasons": ["unreachable", "/shared slow"]},
        "gpu003": {"verdict": "pass", "reasons": []},
        "gpu005": {"verdict": "pass", "reasons": ["no check ran"]},
    }
    skipped = report([JUDGEMENTS[7]])
    skipped.judge_nodes(unjudged=Verdict.SKIP, nodes=["gpu003"])
    assert skipped.node_verdicts == {"gpu003": {"verdict": "skip", "reasons": []}}


def test_nothing_judged_leaves_every_node_unchecked():
    found = report([])
    found.judge_nodes()
    assert found.node_verdicts == {
        n: {"verdict": "unchecked", "reasons": [NOTHING_CHECKED]} for n in NODES
    }
    assert found.exit_code == ExitCode.NOT_CHECKED == 3

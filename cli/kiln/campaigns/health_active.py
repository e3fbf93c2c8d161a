"""The scheduled active check as a campaign (docs/architecture.md): kiln-health-active,
on the first controller, selects, holds, runs and acts by itself (it runs without
Kiln, with kiln_node only); Kiln reads each run's record and concludes it as every
campaign concludes, into the report history like a `kiln validate` run."""

from datetime import datetime

import pydantic
from typing_extensions import TypedDict

from kiln import health
from kiln.report import document
from kiln.validation import drain

SUITE = "health-active"


class CheckRecord(TypedDict):
    check: str
    status: str
    reason: str


class NodeRecord(TypedDict):
    results: list[CheckRecord]
    error: str
    action: str
    status: str


class RunRecord(pydantic.BaseModel):
    """One run of kiln-health-active, as it writes it (active-<time>.json)."""

    started: str
    finished: str | None
    dcgm_diag_level: int
    nodes: dict[str, NodeRecord]
    skipped: dict[str, str]
    error: str

    @property
    def report_id(self) -> str:
        """Sorts by time among `kiln validate`'s ids, and is the same each time a run is
        read, so reading it again adds nothing to the history."""
        return datetime.fromisoformat(self.started).strftime("%Y%m%d-%H%M%S-") + SUITE


def read_records(texts: list[str]) -> tuple[list[RunRecord], list[str]]:
    runs, unreadable = [], []
    for text in texts:
        try:
            runs.append(RunRecord.model_validate_json(text))
        except pydantic.ValidationError as exc:
            unreadable.append(f"a run record is not kiln-health-active's: {exc.errors()[0]['msg']}")
    return sorted(runs, key=lambda r: r.started), unreadable


def to_report(run: RunRecord, inventory: str) -> document.Report:
    """A run as a validation report, concluded as every campaign concludes
    (docs/architecture.md): a judgement per node and check, each node's verdict from
    them (Report.judge_nodes; a node no check ran on was not checked), the drains and
    resumes kiln-health-active made, the nodes it left alone and why."""
    checked = [
        health.from_results(node, list(record["results"]), error=record["error"])
        for node, record in run.nodes.items()
    ]
    judgements = health.judgements(checked)  # one rule for a node that could not report
    reasons = {}
    for node, record in run.nodes.items():
        # In the order the checks ran, each named: the run's own words, not the judgements'.
        mine = [f"{r['check']}: {r['reason']}" for r in record["results"] if r["status"] != "OK"]
        mine += [record["error"]] if record["error"] else []
        reasons[node] = mine or ([] if record["results"] else ["no check ran"])
    # What kiln-health-active did in Slurm (it acts on the controller, before this reads).
    actions = drain.Actions(
        drain={
            n: r["action"].removeprefix("drained: ")
            for n, r in run.nodes.items()
            if r["action"].startswith("drained: ")
        },
        resume=[n for n, r in run.nodes.items() if r["action"] == "resumed"],
        left=dict(run.skipped),
    )
    notes = [f"DCGM diagnostic level {run.dcgm_diag_level}" if run.dcgm_diag_level else ""]
    if run.error:
        notes.append(f"the run could not start: {run.error}")
    report = document.Report(
        id=run.report_id,
        started=run.started,
        inventory=inventory,
        profile=None,
        suites=[SUITE],
        nodes=sorted(run.nodes),
        judgements=judgements,
        notes=[n for n in notes if n],
        actions=document.Actions(**actions.to_dict()),
        finished=run.finished,
    )
    report.judge_nodes(reasons)
    return report


def import_runs(runs: list[RunRecord], inventory: str) -> list[str]:
    """Write each run not yet in the history; the ids written."""
    from kiln.report.write import write_all

    written = []
    for run in runs:
        if not (document.directory(run.report_id) / document.REPORT_FILE).exists():
            write_all(to_report(run, inventory))
            written.append(run.report_id)
    return written

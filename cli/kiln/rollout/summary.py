"""A rollout's record as its report's parts: the judgements (the checks' and each
batch's outcome per node), the notes (the plan, each batch's timings), the free
capacity over time, and what the batches did in Slurm."""

from datetime import datetime
from typing import Any

from kiln import hostlist
from kiln.report import document
from kiln.rollout import plan as planning
from kiln.rollout import progress as records
from kiln.rollout.progress import Record
from kiln.validation import drain
from kiln.validation.verdicts import Judgement, Verdict

NOT_REACHED = "not rolled out (the rollout did not reach it)"


def judgements(record: Record) -> list[Judgement]:
    """The checks' judgements, then per batch: a failed node fails (rollout.node), one
    its check could not report on or left out at the deadline is not checked, and a
    batch not finished did not roll out to its nodes."""
    found = [_judgement(j) for j in record.judgements]
    for step in record.batches:
        found += [
            Judgement(n, "rollout.node", "", None, "", _verdict(step.unchecked, n), why)
            for n, why in step.failed.items()
        ]
        found += [
            Judgement(n, "rollout.wait", "", None, "", Verdict.UNCHECKED, why)
            for n, why in step.skipped.items()
        ]
        if not step.finished:
            found += [
                Judgement(n, "rollout.batch", "", None, "", Verdict.UNCHECKED, NOT_REACHED)
                for n in step.nodes
                if n not in step.failed
            ]
    return found


def _verdict(unchecked: list[str], node: str) -> Verdict:
    return Verdict.UNCHECKED if node in unchecked else Verdict.FAIL


def reasons(record: Record) -> dict[str, list[str]]:
    """Each node's reason, where a batch has one for it."""
    found: dict[str, list[str]] = {}
    for step in record.batches:
        for node in step.nodes:
            if node in step.failed:
                found[node] = [step.failed[node]]
            elif node in step.skipped:
                found[node] = [step.skipped[node]]
            elif not step.finished:
                found.setdefault(node, [NOT_REACHED])
    return found


def planned(record: Record) -> list[str]:
    return [*dict.fromkeys(n for s in record.batches for n in s.nodes)]


def notes(record: Record) -> list[str]:
    """The plan as it was shown, each batch's timings, then the record's notes."""
    shown = [f"plan: {p}" for p in planning.Plan(**record.plan).lines()] if record.plan else []
    return [*shown, *timings(record), *record.notes]


def actions(record: Record) -> drain.Actions:
    """What the batches did in Slurm: drained the failing, resumed the rest of each
    finished batch."""
    return drain.Actions(
        drain={n: why for s in record.batches for n, why in s.failed.items()},
        resume=[n for s in record.batches if s.finished for n in s.nodes
                if n not in s.failed and n not in s.skipped],
    )  # fmt: skip


def timings(record: Record) -> list[str]:
    """Per batch, how long each step took."""
    lines = []
    for index, step in enumerate(record.batches, 1):
        times = step.done
        previous = times.get("started")
        parts = []
        for name in records.STEPS:
            if name in times and previous:
                seconds = (_t(times[name]) - _t(previous)).total_seconds()
                parts.append(f"{name} {seconds:.0f} s")
                previous = times[name]
        lines.append(
            f"batch {index} {hostlist.compress(step.nodes)}: " + (", ".join(parts) or "not started")
        )
    return lines


def capacity(record: Record) -> document.Series:
    """The compute nodes in service after each step, in seconds since the first."""
    start = _t(record.capacity[0][0]) if record.capacity else None
    points = (
        [[(_t(t) - start).total_seconds(), float(free)] for t, free in record.capacity]
        if start
        else []
    )
    return document.Series(
        node="cluster", device="compute nodes in service", metric="free_nodes", points=points
    )


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _judgement(data: dict[str, Any]) -> Judgement:
    return Judgement(**{**data, "verdict": Verdict(data["verdict"])})

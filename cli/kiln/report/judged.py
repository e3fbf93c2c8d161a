"""The report of `kiln judge nccl-tests`: the same report `kiln validate` writes, one
"node" per judged file and collective (kiln.validation.nccl_judge judges them)."""

from kiln.report import document
from kiln.run import ids
from kiln.validation.nccl_judge import Result
from kiln.validation.nccl_parse import Run
from kiln.validation.profiles import Profile
from kiln.validation.verdicts import Judgement, Verdict


def nccl_tests(runs: list[Run], results: list[Result], profile: Profile | None) -> document.Report:
    """The same report `kiln validate` writes, one "node" per judged file and collective,
    with busbw against message size plotted from every row."""
    found = document.Report(
        id=ids.new_id(),
        started=document.now(),
        inventory="(kiln judge nccl-tests)",
        profile=profile.name if profile else None,
        suites=["nccl-tests"],
        nodes=[],
    )
    reasons = {}
    for run, result in zip(runs, results, strict=True):
        name = f"{result.source} {result.collective or '?'}"
        reasons[name] = result.reasons
        found.nodes.append(name)
        value = result.best_busbw_gbps
        if value is None:
            value = result.largest_size_busbw_gbps
        why = "; ".join(result.reasons) or (result.notes[0] if result.notes else "")
        found.judgements.append(
            Judgement(
                name,
                result.test or f"collectives.{result.collective}",
                "busbw",
                value,
                "GB/s",
                result.verdict,
                why,
                profile.thresholds.get(result.test) if profile and result.test else None,
            )
        )
        found.curves.append(
            {
                "node": name,
                "collective": result.collective or "?",
                "points": [[row.size, row.best_busbw()] for row in run.rows],
            }
        )
        found.notes += [f"{name}: {note}" for note in result.notes]
    # A one-rank file is a skip, not a node left unchecked (kiln.validation.nccl_judge).
    found.judge_nodes(reasons, Verdict.SKIP)
    found.finished = document.now()
    return found

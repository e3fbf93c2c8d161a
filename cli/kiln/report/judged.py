"""The report of `kiln judge nccl-tests`: the same report `kiln validate` writes, a
judgement per file and collective on the nodes the file names (kiln.validation.nccl_judge
judges them)."""

from pathlib import Path

from kiln import hostlist
from kiln.report import document
from kiln.run import ids
from kiln.validation.nccl_judge import Result
from kiln.validation.nccl_parse import Run
from kiln.validation.profiles import Profile
from kiln.validation.verdicts import Judgement, Verdict

UNKNOWN = "unknown nodes"  # a file without device lines does not say where it ran


def nccl_tests(
    runs: list[Run],
    results: list[Result],
    profile: Profile | None,
    not_judged: list[tuple[str, str]] = (),  # type: ignore[assignment]
) -> document.Report:
    """The same report `kiln validate` writes: a row per node set (the hosts a file's
    device lines name), a judgement per file and collective with the file as its
    subject, busbw against message size plotted from every row, and an unchecked
    judgement for each file NOT_JUDGED (its name, the message saying why)."""
    found = document.Report(
        id=ids.new_id(),
        started=document.now(),
        inventory="(kiln judge nccl-tests)",
        profile=profile.name if profile else None,
        outlier_percent=profile.outlier_percent if profile else None,
        suites=["nccl-tests"],
        nodes=[],
    )
    reasons: dict[str, list[str]] = {}
    for run, result in zip(runs, results, strict=True):
        node = hostlist.compress(run.hosts) or UNKNOWN
        subject = f"{result.source} {result.collective or '?'}"
        if node not in found.nodes:
            found.nodes.append(node)
        # A skip's why is its note (one rank); a pass or a measurement has no reason.
        said = result.reasons or (result.notes[:1] if result.verdict is Verdict.SKIP else [])
        reasons.setdefault(node, []).extend(f"{subject}: {why}" for why in said)
        value = result.best_busbw_gbps
        if value is None:
            value = result.largest_size_busbw_gbps
        why = "; ".join(result.reasons) or (result.notes[0] if result.notes else "")
        found.judgements.append(
            Judgement(
                node,
                result.test or f"collectives.{result.collective}",
                subject,
                value,
                "GB/s",
                result.verdict,
                why,
                profile.thresholds.get(result.test) if profile and result.test else None,
            )
        )
        if result.verdict is not Verdict.SKIP:  # one rank: busbw 0 by definition, no curve
            found.curves.append(
                {
                    "node": f"{node} ({Path(result.source).name})",
                    "collective": result.collective or "?",
                    "points": [[row.size, row.best_busbw()] for row in run.rows],
                }
            )
        found.notes += [f"{subject}: {note}" for note in result.notes]
    for source, why in not_judged:
        if UNKNOWN not in found.nodes:
            found.nodes.append(UNKNOWN)
        reasons.setdefault(UNKNOWN, []).append(f"not judged: {why}")
        found.judgements.append(
            Judgement(UNKNOWN, "nccl-tests.file", source, None, "", Verdict.UNCHECKED,
                      f"not judged: {why}")
        )  # fmt: skip
        found.notes.append(f"not judged: {why}")
    # A one-rank file is a skip, not a node left unchecked (kiln.validation.nccl_judge).
    found.judge_nodes(reasons, Verdict.SKIP)
    found.finished = document.now()
    return found

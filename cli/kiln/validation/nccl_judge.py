"""Judge nccl-tests runs: the large-message plateau against a profile and the peers.

Bus bandwidth is judged at its best among message sizes of 1 GiB and more (out-of-place
and in-place both count): small messages measure latency, and the footer's "Avg bus
bandwidth" averages over every size of the sweep, so it says more about the sweep than
about the fabric. It is reported as a note only.
"""

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kiln.validation import verdicts
from kiln.validation.nccl_parse import NcclTestsError, Run, parse_file
from kiln.validation.profiles import TESTS, Profile
from kiln.validation.verdicts import Judgement, Verdict
from kiln_node import counted

PLATEAU_BYTES = 1 << 30
# One rank crosses no link: busbw is 0 by definition (the factor 2(n-1)/n is 0) and
# all_reduce is a local no-op whose algbw only measures the launch latency.
ONE_RANK = "1 rank: no link is crossed; nothing to judge"
NOT_JUDGED = "measured, not judged: no reference number"


@dataclass
class Result:
    source: str
    collective: str | None
    test: str | None  # catalogue name when Kiln has reference numbers for it
    ranks: int | None
    nodes: int | None
    best_busbw_gbps: float | None
    best_busbw_bytes: int | None
    largest_size_bytes: int | None
    largest_size_busbw_gbps: float | None
    average_busbw_gbps: float | None
    wrong: float
    verdict: Verdict = Verdict.PASS
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        return data


def summarize(run: Run) -> Result:
    nodes = len(run.hosts) or None
    scope = "single_node" if nodes == 1 else "multi_node"
    test = f"collectives.{run.collective}.{scope}"
    plateau = [row for row in run.rows if row.size >= PLATEAU_BYTES]
    best = max(plateau, key=lambda row: row.best_busbw(), default=None)
    largest = max(run.rows, key=lambda row: row.size, default=None)
    # The footer's average is only noted; a nan or inf there (the text parser reads
    # both) is no figure, and JSON has no NaN: None, and the note says what it was.
    average = run.average_busbw
    if average is not None and not math.isfinite(average):
        average = None
    result = Result(
        source=run.source,
        collective=run.collective,
        test=test if test in TESTS else None,
        ranks=run.ranks,
        nodes=nodes,
        best_busbw_gbps=best.best_busbw() if best else None,
        best_busbw_bytes=best.size if best else None,
        largest_size_bytes=largest.size if largest else None,
        largest_size_busbw_gbps=largest.best_busbw() if largest else None,
        average_busbw_gbps=average,
        wrong=sum(row.wrong() for row in run.rows),
    )
    if run.collective and not result.test:
        result.notes.append(f"Kiln has no reference numbers for {run.collective}")
    if nodes is None:
        result.notes.append("node count unknown (no device lines): judged as a multi-node run")
    flagged = " (nccl-tests flagged it FAILED against -G)" if run.average_failed else ""
    if average is not None:
        result.notes.append(
            f"footer average {verdicts.fmt(average)} GB/s over all sizes, not judged{flagged}"
        )
    elif run.average_busbw is not None:
        result.notes.append(f"footer average {run.average_busbw} is no figure, not judged{flagged}")
    return result


def read_files(
    paths: list[Path], collective: str | None
) -> tuple[list[Run], list[tuple[str, str]]]:
    """The runs in PATHS, and each file that gives none to judge with the message
    saying why, which names it (no result row, no telling collective): one such file
    among others leaves the rest judged.
    Raises the first one's error when no file gives a run, and InputError for a file
    that cannot be read (a mistyped name)."""
    runs: list[Run] = []
    not_judged: list[tuple[str, str]] = []
    first: NcclTestsError | None = None
    for path in paths:
        try:
            found = parse_file(path, collective)
        except NcclTestsError as exc:
            first = first or exc
            not_judged.append((str(path), exc.message))
            continue
        for run in found:
            if run.collective is None:
                why = f"{run.source}: cannot tell which collective this is; pass --collective"
                first = first or NcclTestsError(why)
                not_judged.append((run.source, why))
            else:
                runs.append(run)
    if not runs and first is not None:
        raise first
    return runs, not_judged


def judge(runs: list[Run], profile: Profile | None) -> list[Result]:
    results = [summarize(run) for run in runs]
    measured: list[tuple[Result, Judgement]] = []
    for run, result in zip(runs, results, strict=True):
        if run.ranks == 1:
            result.verdict, result.notes = Verdict.SKIP, [ONE_RANK]
            result.best_busbw_gbps = result.best_busbw_bytes = None
            result.largest_size_busbw_gbps = None
            continue
        _correctness(run, result)
        if result.best_busbw_gbps is None and result.largest_size_busbw_gbps is not None:
            result.notes.append(
                f"no message of 1 GiB or more (largest {human_size(result.largest_size_bytes)}): "
                "judged at the largest size; sweep to -e 8G for the plateau"
            )
            _worsen(result, Verdict.WARN, None)
        value = result.best_busbw_gbps
        if value is None:
            value = result.largest_size_busbw_gbps
        if value is None or result.test is None:
            _worsen(result, Verdict.MEASURED, None)  # no reference numbers: not judged
            continue
        threshold = profile.threshold(result.test) if profile else None
        band = profile.warn_band_percent / 100 if profile else 0.05
        judgement = verdicts.judge(
            result.source, result.test, "busbw", value, "GB/s", threshold, band
        )
        measured.append((result, judgement))
    percent = profile.outlier_percent if profile else 15.0
    direction = {name: test.higher_is_better for name, test in TESTS.items()}
    judged = verdicts.outliers([j for _, j in measured], percent, direction)
    for (result, _), judgement in zip(measured, judged, strict=True):
        _worsen(result, judgement.verdict, judgement.reason)
        if judgement.verdict is Verdict.PASS and judgement.threshold is None:
            # No reference number held it (an outlier would have failed): measured only.
            _worsen(result, Verdict.MEASURED, None)
            why = f"profile {profile.name} has none for it" if profile else "no --profile"
            result.notes.insert(0, f"{judgement.reason}: {NOT_JUDGED} ({why})")
        elif judgement.verdict is Verdict.PASS:
            result.notes.insert(0, judgement.reason)
    return results


def _correctness(run: Run, result: Result) -> None:
    if result.wrong:
        rows = [r for r in run.rows if r.wrong()]
        _worsen(
            result,
            Verdict.FAIL,
            f"{verdicts.fmt(result.wrong)} wrong value{'' if result.wrong == 1 else 's'} "
            f"in {counted(len(rows), 'size')} "
            f"(first at {human_size(rows[0].size)}): data corruption",
        )
    if run.out_of_bounds_failed:
        _worsen(
            result,
            Verdict.FAIL,
            f"{counted(run.out_of_bounds or 0, 'out-of-bounds value')} (FAILED)",
        )
    if not run.finished:
        last = human_size(result.largest_size_bytes)
        _worsen(
            result,
            Verdict.FAIL,
            f"the run ended after {last} without its footer (crashed or cut short)",
        )
    elif (
        (largest := result.largest_size_bytes)
        and run.max_bytes
        and run.next_size(largest) <= run.max_bytes
    ):
        stopped = f"{human_size(largest)} of {human_size(run.max_bytes)}"
        _worsen(result, Verdict.FAIL, f"the sweep stopped at {stopped}")
    for error in run.errors:
        _worsen(result, Verdict.FAIL, f"NCCL error: {error}")


def _worsen(result: Result, verdict: Verdict, reason: str | None) -> None:
    result.verdict = verdicts.worst((result.verdict, verdict))
    if reason and verdict is not Verdict.PASS:
        result.reasons.append(reason)


def human_size(size: int | None) -> str:
    if size is None:
        return "?"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"

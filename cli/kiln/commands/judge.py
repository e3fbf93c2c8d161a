"""`kiln judge nccl-tests FILE...`: verdicts on nccl-tests output captured elsewhere."""

import sys
from pathlib import Path

import click

from kiln.commands import warn
from kiln.printable import printable
from kiln.report import document, judged, write
from kiln.run import display
from kiln.validation import nccl_judge, nccl_parse, profiles
from kiln.validation.verdicts import Verdict, exit_code, fmt, worst
from kiln_node import counted


@click.group()
def judge() -> None:
    """Judge benchmark output that Kiln did not run (a provider's trial, an old log)."""


@judge.command("nccl-tests")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--profile", "profile_name", help="Reference profile: a shipped name or a YAML file.")
@click.option(
    "--collective",
    type=click.Choice(nccl_parse.COLLECTIVES),
    help="The collective, for pastes that do not say (no preamble, no telling file name).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def nccl_tests_command(
    files: tuple[Path, ...], profile_name: str | None, collective: str | None, as_json: bool
) -> None:
    """Judge nccl-tests output (text or -J JSON): best busbw at >= 1 GiB, busbw at the
    largest size, correctness; exit 5 when any result fails. A file with no result row
    or no telling collective is named in a warning and the rest are judged (exit 3
    unless one fails; 2 when no file could be judged). Without a reference number (no
    --profile) a correct result is "measured", not judged: never a pass (exit 0)."""
    profile = profiles.load(profile_name) if profile_name else None
    runs, not_judged = nccl_judge.read_files(list(files), collective)
    for _source, why in not_judged:  # the rest are judged; the report says it too
        warn(f"{why} (not judged)")
    results = nccl_judge.judge(runs, profile)
    found = judged.nccl_tests(runs, results, profile, not_judged)
    page = document.directory(found.id) / document.FORMATS["html"]
    # The verdict first: a report that cannot be written (a full disk) still leaves it.
    if as_json:
        payload = {
            "profile": profile.name if profile else None,
            "results": [r.to_dict() for r in results],
            "not_judged": [{"source": source, "reason": why} for source, why in not_judged],
            "report": str(page),
        }
        display.emit_json(payload)
    else:
        _print(results, profile, len(not_judged))
        click.echo(f"report: {page}")
    write.write_all(found)
    # A file not judged leaves its result unchecked: exit 3 unless something failed.
    verdicts = [r.verdict for r in results] + [Verdict.UNCHECKED] * len(not_judged)
    sys.exit(int(exit_code(worst(verdicts, default=Verdict.PASS))))


def _print(
    results: list[nccl_judge.Result], profile: profiles.Profile | None, not_judged: int
) -> None:
    rows = [
        ("file", "collective", "ranks/nodes", "best busbw >=1GiB", "at largest size", "verdict")
    ]
    for r in results:
        best = f"{fmt(r.best_busbw_gbps)} GB/s" if r.best_busbw_gbps is not None else "-"
        largest = (
            f"{fmt(r.largest_size_busbw_gbps)} GB/s @ {nccl_judge.human_size(r.largest_size_bytes)}"
            if r.largest_size_busbw_gbps is not None
            else "-"
        )
        shape = f"{r.ranks or '?'}/{r.nodes or '?'}"
        rows.append((r.source, r.collective or "?", shape, best, largest, r.verdict.value.upper()))
    for line in display.columns(rows):
        click.echo(line)
    for r in results:  # reasons quote the file (NCCL's error text): control characters escaped
        for line in r.reasons:
            click.echo(printable(f"{r.verdict.value.upper()} {r.source}: {line}"))
        for line in r.notes:
            click.echo(printable(f"note {r.source}: {line}"))
    judged_by = f"profile {profile.name}" if profile else "no profile: correctness and peers only"
    counts = {v: sum(r.verdict is v for r in results) for v in Verdict}
    click.echo(
        f"{counted(len(results), 'result')} ({judged_by}): {counts[Verdict.PASS]} pass, "
        f"{counts[Verdict.WARN]} warn, {counts[Verdict.FAIL]} fail"
        + (f", {counts[Verdict.MEASURED]} measured, not judged" if counts[Verdict.MEASURED] else "")
        + (f", {counts[Verdict.SKIP]} with nothing to judge" if counts[Verdict.SKIP] else "")
        + (f"; {counted(not_judged, 'file')} not judged (warned above)" if not_judged else "")
    )

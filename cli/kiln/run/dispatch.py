"""Which runs `kiln provision` and `kiln run` make of one request, run under the
inventory's lock: one run; a sliced run (`--slices N`: kiln.run.sliced, one record);
or one part of a sliced run alone (`--slices N --part NAME`): this control machine's
share of a provision spread over several that share one fact cache ($KILN_FACT_CACHE,
docs/performance.md#several-control-machines), as an ordinary run and record here.
"""

from dataclasses import dataclass

from kiln import lock, paths
from kiln.errors import InputError
from kiln.run import slices as slicing
from kiln.run.events import RunSummary
from kiln.run.execute import RunRequest, run_playbook
from kiln.run.sliced import run_sliced


@dataclass
class Runs:
    plan: slicing.Plan | None = None  # --slices N: its parts, all run here unless...
    part: slicing.Part | None = None  # --part NAME: only this one


def choose(request: RunRequest, slices: int | None, part: str | None) -> Runs:
    """The runs REQUEST makes; bad input stops here, before the lock."""
    paths.fact_cache()  # a bad $KILN_FACT_CACHE too, for every run
    if part is not None and slices is None:
        raise InputError(
            "--part needs --slices N: a part (slice-K, controllers, slurm-K) is one of "
            "the runs --slices N makes"
        )
    if slices is None:
        return Runs()
    if request.limit:
        raise InputError(
            "--slices with --limit: slices split the whole inventory's compute "
            "nodes; run --limit without --slices"
        )
    try:
        # The cluster provisioned before: the first controller's facts, read from the
        # fact cache every control machine shares.
        plan = slicing.plan(request, slices)
    except InputError as exc:
        raise InputError(f"--slices: {exc.message}") from None
    return Runs(plan, plan.part(part) if part is not None else None)


def run(request: RunRequest, runs: Runs, command: str) -> RunSummary:
    """RUNS under this control machine's lock of the inventory (taken once: a sliced
    run's parts all run under it; one part alone holds it for itself only, so parts
    on other machines are never blocked by it, nor ordered: their orchestrator does)."""
    with lock.held(request.inventory.path, command) as held:
        request.lock = held
        if runs.plan and runs.part:
            runs.part.request.lock = held
            return run_playbook(runs.part.request, slices=runs.plan.slices, part=runs.part.name)
        if runs.plan:
            return run_sliced(request, runs.plan)
        return run_playbook(request)

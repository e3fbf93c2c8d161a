"""Which runs `kiln provision` and `kiln run` make of one request, run under the
inventory's lock: one run; a sliced run (`--slices N`: kiln.run.sliced, one record);
or one part of a sliced run alone (`--slices N --part NAME`): this control machine's
share of a provision spread over several that share one fact cache ($KILN_FACT_CACHE,
docs/performance.md#several-control-machines), as an ordinary run and record here.
"""

from dataclasses import dataclass

from kiln import lock
from kiln.run import slices as slicing
from kiln.run.events import RunSummary
from kiln.run.execute import RunRequest, run_playbook
from kiln.run.sliced import run_sliced


@dataclass
class Runs:
    plan: slicing.Plan | None = None  # a sliced run: its parts, all run here unless...
    part: slicing.Part | None = None  # ...one part alone, of that plan


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

"""Run a sliced provision (kiln.run.slices' plan) as ONE run: one record in `kiln runs`
whose parts are ansible-runner private data dirs under its parts/, run phase after
phase, the parts of a phase side by side (threads: each part's work is its own
ansible-playbook process). A failed or unreachable host in one slice stops no other:
every phase runs, and the summary merges every part's (kiln.run.merge)."""

from concurrent.futures import ThreadPoolExecutor

from kiln.run import merge, record
from kiln.run.events import RunSummary
from kiln.run.execute import Interrupt, RunRequest, finish, new_record, resolve_playbook, run_part
from kiln.run.slices import Plan


def run_sliced(request: RunRequest, plan: Plan) -> RunSummary:
    """REQUEST's record, the plan's parts run under it; the caller holds the lock."""
    playbook = resolve_playbook(request.playbook)
    names = [part.name for part in plan.parts]
    kept, run_dir = new_record(request, playbook, slices=plan.slices, parts=names)
    if request.lock:  # held by the caller for the whole run; the parts are told nothing
        request.lock.running(kept.run)
    for name in kept.parts:
        record.part_dir(run_dir, name).mkdir(parents=True, mode=0o700)

    def run_all() -> RunSummary:
        done: list[tuple[str, RunSummary]] = []
        with Interrupt() as interrupt:
            for phase in plan.phases:
                if interrupt.requested:
                    break
                with ThreadPoolExecutor(max_workers=len(phase)) as pool:
                    futures = [
                        pool.submit(
                            run_part,
                            part.request,
                            resolve_playbook(part.request.playbook),
                            record.part_dir(run_dir, part.name),
                            kept.run,
                            interrupt,
                            f"{part.name} ({kept.run})",
                        )
                        for part in phase
                    ]
                    results = [future.result() for future in futures]
                for part, (summary, tasks) in zip(phase, results, strict=True):
                    done.append((part.name, summary))
                    kept.tasks_started += tasks
        summary = merge.merge(kept.run, playbook.name, done)
        if interrupt.requested:
            summary.status = "canceled"
        return summary

    return finish(kept, run_dir, run_all)

"""One summary from the parts of a sliced run (kiln.run.sliced): the slices' hosts are
disjoint, but a compute node is in its slice's part and again in the part that checks
its Slurm state, so a host's counts are summed over the parts."""

from dataclasses import fields

from kiln.run.events import HostCounts, RunSummary

# The worst status of any part is the run's: one failed slice fails the run (exit 4 for
# its hosts), a canceled one cancels it.
_STATUS_ORDER = ["successful", "failed", "timeout", "canceled"]


def merged_status(statuses: list[str]) -> str:
    known = [s for s in statuses if s in _STATUS_ORDER]
    if len(known) != len(statuses):
        return next(s for s in statuses if s not in _STATUS_ORDER)  # e.g. "running"
    return max(known, key=_STATUS_ORDER.index) if known else "successful"


def merge(run: str, playbook: str, parts: list[tuple[str, RunSummary]]) -> RunSummary:
    """PARTS: (part name, its summary), in the order they ran. A part's error (a failure
    outside any host) keeps the part's name."""
    summary = RunSummary(run=run, playbook=playbook, status="running")
    for _, part in parts:
        for host, counts in part.hosts.items():
            total = summary.hosts.setdefault(host, HostCounts())
            for counted in fields(HostCounts):
                name = counted.name
                setattr(total, name, getattr(total, name) + getattr(counts, name))
        summary.failures.extend(part.failures)
        for host, notes in part.notes.items():
            kept = summary.notes.setdefault(host, [])
            kept.extend(n for n in notes if n not in kept)
        summary.reboots.update(part.reboots)
    errors = [f"{name}: {part.error}" for name, part in parts if part.error]
    summary.error = "; ".join(errors) or None
    summary.status = merged_status([part.status for _, part in parts])
    return summary

"""kiln-metrics' Slurm metrics (kiln_slurm.prom, the first controller only): each
node's state and the drains Kiln's programs set (`scontrol --oneliner show node`), and
the queue's jobs by state (`squeue`, one line per job and array task)."""

from collections import Counter

from kiln_node import metrics, slurm_state

# squeue's states as it prints them with %T, one line per job (array tasks one each).
SQUEUE = ["squeue", "--array", "--noheader", "--format=%T"]
# Always written, 0 when none: the queue depth's series exist on an empty queue.
QUEUE_STATES = ("PENDING", "RUNNING")

# Which Kiln program a drain reason's prefix names (`by`), the longest prefix first.
PROGRAMS = {
    slurm_state.ROLLOUT_PREFIX: "rollout",
    slurm_state.HEALTH_PREFIX: "health",
    slurm_state.ACTIVE_PREFIX: "health-active",
    slurm_state.REPAIR_PREFIX: "repair",
    slurm_state.VALIDATE_PREFIX: "validate",
}


def drained_by(reason: str) -> str | None:
    """The Kiln program whose prefix the reason carries; None for anyone else's."""
    for prefix in sorted(PROGRAMS, key=len, reverse=True):
        if reason.startswith(prefix):
            return PROGRAMS[prefix]
    return None


def gauges(nodes: dict[str, slurm_state.NodeState], squeue: str) -> list[metrics.Gauge]:
    """The Slurm file's gauges, in the catalogue's order; nodes by name."""
    state = metrics.gauge("kiln_slurm_node_state")
    drains = metrics.gauge("kiln_slurm_node_drain_info")
    for name in sorted(nodes):
        node = nodes[name]
        state.add(1, node=name, state=node.state)
        by = drained_by(node.reason) if node.drained else None
        if by:
            drains.add(1, node=name, by=by, reason=node.reason)
    jobs = metrics.gauge("kiln_slurm_jobs")
    counted = Counter(line.strip() for line in squeue.splitlines() if line.strip())
    for job_state in sorted({*QUEUE_STATES, *counted}):
        jobs.add(counted[job_state], state=job_state)
    return [state, drains, jobs]

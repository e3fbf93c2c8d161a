"""kiln-metrics' Slurm metrics (kiln_slurm.prom, the first controller only): each
node's state, the drains Kiln's programs set and those anyone else set (`scontrol
--oneliner show node`), and the queue's jobs by state (`squeue`, one line per job and
array task). Apart, in kiln_slurmctld.prom: whether each slurmctld answers (`scontrol
ping`), written also when none does."""

import re
from collections import Counter

from kiln_node import metrics, slurm_state

# squeue's states as it prints them with %T, one line per job (array tasks one each).
SQUEUE = ["squeue", "--array", "--noheader", "--format=%T"]
# Always written, 0 when none: the queue depth's series exist on an empty queue.
QUEUE_STATES = ("PENDING", "RUNNING")

# Each controller's line of `scontrol ping` (Slurm 22.05 to 24.11): "Slurmctld(primary)
# at ctl1 is UP"; the role is primary, backup, or backupN with more than one backup.
PING = ["scontrol", "ping"]
_PING_LINE = re.compile(r"Slurmctld\((\w+)\) at (\S+) is (UP|DOWN)")

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


def kiln_drain(reason: str) -> bool:
    """Whether a drain reason is one of Kiln's programs' (the repair loop's RMA too)."""
    return drained_by(reason) is not None or reason.startswith(slurm_state.RMA_PREFIX)


def gauges(nodes: dict[str, slurm_state.NodeState], squeue: str) -> list[metrics.Gauge]:
    """The Slurm file's gauges, in the catalogue's order; nodes by name."""
    out = metrics.file_gauges(metrics.SLURM)
    for name in sorted(nodes):
        node = nodes[name]
        out["kiln_slurm_node_state"].add(1, node=name, state=node.state)
        out_of_service = bool(node.flags & slurm_state.OUT_OF_SERVICE)
        out["kiln_slurm_node_out_of_service"].add(int(out_of_service), node=name)
        if not node.drained:
            continue
        by = drained_by(node.reason)
        if by:
            out["kiln_slurm_node_drain_info"].add(1, node=name, by=by, reason=node.reason)
        elif not kiln_drain(node.reason):
            out["kiln_slurm_node_drain_other_info"].add(1, node=name, reason=node.reason)
    counted = Counter(line.strip() for line in squeue.splitlines() if line.strip())
    for job_state in sorted({*QUEUE_STATES, *counted}):
        out["kiln_slurm_jobs"].add(counted[job_state], state=job_state)
    return list(out.values())


def parse_ping(text: str) -> list[tuple[str, str, bool]]:
    """(role, host, up) for each controller `scontrol ping` printed."""
    return [(role, host, state == "UP") for role, host, state in _PING_LINE.findall(text)]


def controller_gauges(text: str) -> list[metrics.Gauge]:
    """kiln_slurmctld.prom's gauges from `scontrol ping`'s output. Raises ValueError when
    it names no controller."""
    pings = parse_ping(text)
    if not pings:
        last = (text.strip().splitlines() or ["nothing"])[-1]
        raise ValueError(f"scontrol ping named no controller: {last}")
    out = metrics.file_gauges(metrics.SLURMCTLD)
    for role, host, up in pings:
        out["kiln_slurm_controller_up"].add(int(up), node=host, role=role)
    return list(out.values())

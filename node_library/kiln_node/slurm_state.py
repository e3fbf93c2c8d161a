"""A node's state as Slurm reports it (`scontrol --oneliner show node`), the state
sets each decision needs, and the drain reason prefixes of Kiln's programs.

Slurm's state is a base state and flags joined by `+` (`IDLE+DRAIN`,
`DOWN+NOT_RESPONDING`, `IDLE+CLOUD+POWERED_DOWN`); older releases and sinfo also mark
flags with one of `*~#!%$@^-`.
"""

import re
from dataclasses import dataclass

# Drain reasons Kiln's programs write start with one of these; a node is resumed only
# by the program whose prefix its reason carries (NHC's convention).
VALIDATE_PREFIX = "kiln:"  # kiln validate and kiln burn-in
ROLLOUT_PREFIX = "kiln: rollout"  # kiln rollout: a Kiln drain validate may test and lift
HEALTH_PREFIX = "kiln-health:"  # the passive check Slurm runs (HealthCheckProgram)
ACTIVE_PREFIX = "kiln-active:"  # the controller's scheduled active check
# The repair loop, for a node Slurm set DOWN as not responding: drained before its
# daemons are restarted, so it comes back drained for the re-check (kiln-health, which
# resumes only its own prefix, leaves it to the loop).
REPAIR_PREFIX = "kiln-repair:"
HEALTH_PREFIXES = (HEALTH_PREFIX, ACTIVE_PREFIX, REPAIR_PREFIX)
# The repair loop's end (kiln_node.repair_decision): a person replaces a part; nothing of
# Kiln resumes it.
RMA_PREFIX = "kiln-rma:"
# Slurm's own reason for a node whose slurmd stopped answering (it sets it DOWN).
NOT_RESPONDING_REASON = "Not responding"

# A reboot asked for (scontrol reboot) or under way.
REBOOTING = frozenset({"REBOOT_REQUESTED", "REBOOT_ISSUED"})
# In use, or about to change by itself (jobs, a reservation, a reboot, a power
# transition, a node powered down to save power): not free for a test now, and
# nothing against the node. An idle-only run leaves it for the next run.
BUSY = REBOOTING | frozenset({"ALLOCATED", "MIXED", "COMPLETING", "RESERVED", "MAINT",
                              "PLANNED", "POWERING_UP", "POWERING_DOWN", "POWER_DOWN",
                              "POWERED_DOWN"})  # fmt: skip
# Slurm cannot run a job there: down, failed, not answering, not yet in the cluster,
# or not registered since slurmctld started. A test there would only wait.
UNAVAILABLE = frozenset({"DOWN", "FAIL", "NOT_RESPONDING", "FUTURE", "UNKNOWN"})
DRAINED = frozenset({"DRAIN", "DRAINED", "DRAINING"})
# Runs no new job: drained or draining, down, failed, not answering, or rebooting.
OUT_OF_SERVICE = DRAINED | UNAVAILABLE | REBOOTING

_FLAG_SEPARATORS = r"[+*~#!%$@^-]"
_NAME = re.compile(r"\bNodeName=(\S+)")
_STATE = re.compile(r"\bState=(\S+)")
_REASON = re.compile(r"\bReason=(.*?)(?= \w+=|$)", re.M)  # oneliner or not
_PARTITIONS = re.compile(r"\bPartitions=(\S+)")
_REASON_STAMP = re.compile(r"\s*\[[^\]]*@[^\]]*\]$")  # Slurm's "[user@time]" suffix


def flags(state: str) -> frozenset[str]:
    """The base state and every flag of a State= value."""
    return frozenset(re.split(_FLAG_SEPARATORS, state)) - {""}


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # as Slurm wrote it, e.g. IDLE+DRAIN; UNKNOWN when the line has none
    reason: str  # without Slurm's [user@time] suffix

    @property
    def base(self) -> str:
        return re.split(_FLAG_SEPARATORS, self.state, maxsplit=1)[0]

    @property
    def flags(self) -> frozenset[str]:
        return flags(self.state)

    @property
    def drained(self) -> bool:
        return bool(self.flags & DRAINED)

    @property
    def busy(self) -> frozenset[str]:
        return self.flags & BUSY

    # Whose drain it is, by its reason's prefix: each program lifts only its own.
    @property
    def drained_by_kiln(self) -> bool:
        """Drained by kiln validate, burn-in or rollout (not by the health checks)."""
        return self.drained and self.reason.startswith(VALIDATE_PREFIX)

    @property
    def drained_by_others(self) -> bool:
        return self.drained and not self.drained_by_kiln

    @property
    def drained_by_health(self) -> bool:
        return self.drained and self.reason.startswith(HEALTH_PREFIXES)


def parse_line(line: str) -> NodeState:
    """One node's line (or the whole output for one node)."""
    line = line.strip()
    name = _NAME.search(line)
    state = _STATE.search(line)
    reason = _REASON.search(line)
    return NodeState(
        name.group(1) if name else "",
        state.group(1) if state else "UNKNOWN",
        _REASON_STAMP.sub("", reason.group(1).strip()) if reason else "",
    )


def parse(text: str) -> dict[str, NodeState]:
    """`scontrol --oneliner show node [NODES]`: any number of nodes, one line each."""
    found = (parse_line(line) for line in text.splitlines() if line.startswith("NodeName="))
    return {node.name: node for node in found if node.name}


def reason_times(text: str) -> dict[str, str]:
    """{node: when its reason was set} (Slurm's `[user@2026-11-29T09:03:05]` suffix, ISO
    text that sorts by time) from `scontrol --oneliner show node`; nodes without one are
    left out."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        reason = _REASON.search(line) if line.startswith("NodeName=") else None
        stamp = _REASON_STAMP.search(reason.group(1).strip()) if reason else None
        if stamp:
            found[parse_line(line).name] = stamp.group(0).strip(" []").split("@", 1)[1]
    return found


def partitions(text: str) -> dict[str, list[str]]:
    """{partition: [nodes]} from `scontrol --oneliner show node` (the repair breaker
    counts per partition)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        name = parse_line(line).name if line.startswith("NodeName=") else ""
        listed = _PARTITIONS.search(line)
        for part in listed.group(1).split(",") if name and listed else ():
            found.setdefault(part, []).append(name)
    return found

"""What a rollout will do, decided before anything changes: how many compute nodes may
be out of service at once, until when it waits for jobs, which hosts the change
touches (a check-mode run of site.yml, as `kiln drift` reads it), which of them need a
reboot, and the batches."""

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kiln import hostlist
from kiln.errors import InputError
from kiln.inventory.spec import ClusterSpec
from kiln.roles.nvidia_driver import reboots
from kiln_node import slurm_state

# Slurm's upgrade order for the hosts that are not compute nodes: slurmdbd and slurmctld
# live on the controllers (the slurm role restarts slurmdbd before slurmctld), then the
# login nodes, then the rest (storage), one at a time; then the compute batches.
SERVICE_ORDER = ("slurm_controller", "slurm_login", "storage")
# A driver package that changes loads only at boot.
REBOOT_ROLES = frozenset({"nvidia_driver"})
PACKAGE_ACTIONS = frozenset(
    {"ansible.builtin.apt", "ansible.builtin.package", "kiln.cluster.apt_present", "apt"}
)
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
# How long a batch may wait for its jobs, and how far ahead a deadline may be: longer
# is a typo (999999999999h), and past the calendar's end (year 9999) no time exists.
LONGEST_WAIT = timedelta(days=365)


class BadValue(InputError):
    """A rollout setting that cannot be: `setting` names it (max_unavailable,
    wait_for_jobs, deadline, max_failures); the command says which option gave it."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


def max_unavailable(text: str, compute: int) -> int:
    """A node count (2) or a share of the compute nodes (10%, at least one node), read
    as kiln.roles.nvidia_driver.reboots.batch_size reads rollout_max_unavailable; never
    more than the nodes."""
    given = str(text).strip()
    if reboots.share_problem("", given):
        raise BadValue(
            "max_unavailable",
            f"{given!r}: expected a node count (2) or a share of the compute nodes (10%), "
            "at least one node",
        )
    # By its length first: Python refuses to read an integer of over 4,300 digits.
    if not given.endswith("%") and (len(given) > len(str(compute)) or int(given) > compute):
        raise BadValue(
            "max_unavailable",
            f"{_shown(given)}: more than the {compute} compute node"
            f"{'' if compute == 1 else 's'} of the rollout",
        )
    return reboots.batch_size(given, compute)


def duration(text: str) -> timedelta:
    """1h30m, 45m, 90s: at least one second, at most LONGEST_WAIT."""
    found = _DURATION.fullmatch(text.strip())
    parts = [g or "" for g in found.groups()] if found else []
    # 365 days is 8,760 hours or 31,536,000 seconds: a longer number is too long, and
    # not read (Python refuses integers of over 4,300 digits).
    if any(len(g) > 9 for g in parts):
        raise BadValue("wait_for_jobs", f"{_shown(text)}: more than {LONGEST_WAIT.days} days")
    hours, minutes, seconds = (int(g or 0) for g in parts) if any(parts) else (0, 0, 0)
    span = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    if not span:
        raise BadValue(
            "wait_for_jobs", f"{text!r}: expected a duration such as 2h, 45m, 1h30m or 90s"
        )
    if span > LONGEST_WAIT:
        raise BadValue("wait_for_jobs", f"{text}: more than {LONGEST_WAIT.days} days")
    return span


def _shown(text: str) -> str:
    """A value for a one-line message: a number of thousands of digits cut short."""
    return text if len(text) <= 20 else f"{text[:20]}... ({len(text)} characters)"


def deadline(wait_for_jobs: str | None, until: str | None, now: datetime) -> datetime | None:
    """When a batch stops waiting for its jobs (`now` has the local time zone): after
    `wait_for_jobs` from now, at `until` (ISO 8601; a time of day alone is today), or
    never. A deadline in the past is refused."""
    if wait_for_jobs and until:
        raise BadValue("wait_for_jobs+deadline", "give one of them")
    if wait_for_jobs:
        return now + duration(wait_for_jobs)
    if not until:
        return None
    text = until.strip()
    try:
        if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", text):
            clock = datetime.strptime(text if text.count(":") == 2 else text + ":00", "%H:%M:%S")
            when = now.replace(hour=clock.hour, minute=clock.minute, second=clock.second,
                               microsecond=0)  # fmt: skip
        else:
            when = datetime.fromisoformat(text)
    except ValueError:
        raise BadValue(
            "deadline", f"{until!r}: expected a time (18:00) or a date and time (2026-11-28T06:00)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    if when <= now:
        raise BadValue("deadline", f"{until}: that is in the past ({now:%Y-%m-%d %H:%M})")
    if when - now > LONGEST_WAIT:
        raise BadValue(
            "deadline",
            f"{until}: more than {LONGEST_WAIT.days} days away (leave --deadline out to wait "
            "for the jobs however long they run)",
        )
    return when


@dataclass
class Plan:
    """The hosts to change, in order: the service hosts one at a time, then the compute
    batches. `reboot`: the nodes whose change loads only at boot."""

    services: list[str] = field(default_factory=list)
    batches: list[list[str]] = field(default_factory=list)
    reboot: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why it is left alone
    unchanged: list[str] = field(default_factory=list)  # compute nodes already as declared

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def nodes(self) -> list[str]:
        return [n for batch in self.batches for n in batch]

    def lines(self) -> list[str]:
        """The plan as the operator reads it before anything changes."""
        said = [f"{host}: alone (service host)" for host in self.services]
        for index, batch in enumerate(self.batches, 1):
            rebooted = [n for n in batch if n in self.reboot]
            said.append(
                f"batch {index}: {hostlist.compress(batch)}"
                + (f" (reboot: {hostlist.compress(rebooted)})" if rebooted else "")
            )
        said += [f"{node}: left alone: {why}" for node, why in sorted(self.skipped.items())]
        if self.unchanged:
            said.append(f"already as declared: {hostlist.compress(self.unchanged)}")
        return said or ["nothing to change"]


def touched(tasks: dict[str, list[Any]]) -> dict[str, bool]:
    """From a check-mode run (kiln.drift.task_drift): each host that would change, and
    whether a reboot follows (a driver package would change)."""
    return {
        host: any(
            t.task.split(" : ")[0] in REBOOT_ROLES and t.action in PACKAGE_ACTIONS for t in found
        )
        for host, found in tasks.items()
        if found
    }


def make_plan(
    spec: ClusterSpec,
    compute: list[str],
    changes: dict[str, bool],
    states: dict[str, slurm_state.NodeState],
    size: int,
    unchecked: dict[str, str] | None = None,
) -> Plan:
    """Service hosts first (in SERVICE_ORDER), then the compute nodes that change in
    batches of `size`: idle nodes first, nodes running jobs last (their jobs get the
    longest to end). A node Slurm cannot run (down, unknown to it) or that the check
    did not reach is left alone."""
    plan = Plan(reboot=sorted((h for h, r in changes.items() if r), key=hostlist.sort_key))
    for group in SERVICE_ORDER:
        for host in spec.group(group):
            if host in changes and host not in compute and host not in plan.services:
                plan.services.append(host)
    idle, busy = [], []
    for node in sorted(compute, key=hostlist.sort_key):
        seen = states.get(node)
        if unchecked and node in unchecked:
            plan.skipped[node] = f"not checked: {unchecked[node]}"
        elif node not in changes:
            plan.unchanged.append(node)
        elif seen is None:
            plan.skipped[node] = "Slurm does not know this node"
        elif seen.flags & slurm_state.UNAVAILABLE:
            plan.skipped[node] = f"Slurm reports it {seen.state}"
        elif seen.drained and not seen.reason.startswith(slurm_state.VALIDATE_PREFIX):
            # Someone's (or the health check's) drain: theirs to lift, never rebooted
            # or resumed by the rollout.
            plan.skipped[node] = f"drained by someone else: {seen.reason or 'no reason'}"
        else:
            (busy if seen.busy else idle).append(node)
    ordered = idle + busy
    plan.batches = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    return plan

"""Reboots for a new kernel module, and the room for them: how many compute nodes may be
out of service at once (rollout_max_unavailable, which kiln rollout reads too), which
nodes reboot here in batches and which are left to kiln rollout, and a refusal when a
plain provisioning would leave more waiting than that."""

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from kiln.roles.nvidia_driver.versions import (
    branch,
    is_exact,
    loaded_module,
    needs_reboot,
    version_key,
)
from kiln_node import slurm_state

# The cluster-wide cap on compute nodes out of service at once for a change that needs
# them out (kiln rollout's batches, the driver's reboots), and its default.
MAX_UNAVAILABLE = "rollout_max_unavailable"
MAX_UNAVAILABLE_DEFAULT = "10%"
REBOOT_BATCH = re.compile(r"[1-9][0-9]*|(?:100|[1-9][0-9]?(?:\.[0-9]+)?)%")


@dataclass
class RebootPlan:
    """Nodes whose new kernel module waits for a reboot, and how each gets it."""

    rollout: list[str] = field(default_factory=list)  # slurmd runs: kiln rollout reboots
    batches: list[list[str]] = field(default_factory=list)  # not in Slurm yet: reboot now
    reported: dict[str, str] = field(default_factory=dict)  # not rebooted here: node -> why

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def batch_size(batch: str | int, total: int) -> int:
    """A node count or a share of `total` nodes (`nvidia_driver_reboot_batch`,
    `rollout_max_unavailable`: 10% or 4) as a count; at least one node."""
    text = str(batch).strip()
    if not REBOOT_BATCH.fullmatch(text):
        raise ValueError(f"not a node count or a share: {text!r}")
    if text.endswith("%"):
        count = int(total * float(text[:-1]) / 100)
    else:  # a count longer than total's is more than total (and may be past int()'s limit)
        count = int(text) if len(text) <= len(str(total)) else total
    return max(1, min(count, total)) if total else 0


def share_problem(name: str, value: Any) -> str:
    """Why a setting read by batch_size is neither a node count nor a share, or ""."""
    text = str(value).strip()
    if REBOOT_BATCH.fullmatch(text):
        return ""
    return f"{name} {text!r}: expected a node count (4) or a share of the nodes (10%)"


def out_of_service(states: dict[str, slurm_state.NodeState], nodes: list[str]) -> list[str]:
    """The nodes Slurm lists as out of service now."""
    return sorted(n for n in nodes if n in states and states[n].flags & slurm_state.OUT_OF_SERVICE)


def reboot_room(limit: str | int, compute: list[str], states: dict[str, Any]) -> int:
    """How many more compute nodes may go out of service for a reboot now: `limit`
    (rollout_max_unavailable: a count, or a share of the compute nodes) less the nodes
    out of service already, so a change never takes more of the cluster at once than
    the operator allows."""
    return max(0, batch_size(limit, len(compute)) - len(out_of_service(states, compute)))


def reboot_plan(
    pending: list[str], in_slurm: list[str], batch: str | int, reboot: bool = True
) -> RebootPlan:
    """The role never reboots a node whose slurmd runs: it is left to `kiln rollout`,
    which drains it, waits for its jobs and reboots it through Slurm within
    rollout_max_unavailable. Nodes Slurm does not run yet (a first provisioning) reboot
    here in batches, so a bad driver stops at the first batch. --no-reboot (`reboot`
    false) only reports, and leaves nothing to the rollout."""
    plan = RebootPlan()
    rest = []
    for node in sorted(pending):
        if not reboot:
            plan.reported[node] = "not rebooted (--no-reboot)"
        elif node in in_slurm:
            plan.rollout.append(node)
            plan.reported[node] = "slurmd runs here: kiln rollout reboots it through Slurm"
        else:
            rest.append(node)
    size = batch_size(batch, len(rest))  # checks the batch even when no node waits
    plan.batches = [rest[i : i + size] for i in range(0, len(rest), size)] if rest else []
    return plan


def reboot_reason(version: str) -> str:
    """The reason Slurm shows while a node waits for its reboot (set_stats' kiln_reboots)."""
    return f"kiln: driver {version}"


def reboot_target(fact: dict[str, Any], proc_version: str, version: str, source: str) -> str:
    """The driver a node in Slurm would wait to load, after a reboot, once the role has
    applied `version` (nvidia_driver_version) from `source`; "" when none would wait.
    Read before anything is installed: `fact` is the node's kiln_gpu local fact (what the
    role installed last time; the packages are held since), `proc_version` the module
    loaded now (/proc/driver/nvidia/version). A reboot already pending counts. A node
    without the fact (the role never ran there) is not judged: the role itself still
    leaves its reboot to kiln rollout. A branch is judged by the installed driver's
    branch (the role keeps the installed version within it while it is offered)."""
    if not fact.get("gpu_count"):
        return ""
    module = loaded_module(proc_version)
    loaded = module.version if module else ""
    installed = str((fact.get("driver") or {}).get("installed") or "")
    if needs_reboot(loaded, installed):
        return installed
    if source == "preinstalled":
        return ""
    if is_exact(version):
        target = version
    elif installed and (not version or branch(installed) == version):
        target = installed
    else:
        target = f"of branch {version}" if version else "(a first install)"
    return target if target != loaded else ""


def reboot_refusal(
    targets: dict[str, str],
    limit: str | int,
    compute: list[str],
    states: dict[str, slurm_state.NodeState],
    inventory: str,
) -> str:
    """Why a plain provisioning must not install the driver, or "": it would leave more
    nodes in Slurm waiting for a reboot (`targets`: node -> the driver it would wait to
    load) than rollout_max_unavailable allows out of service now (reboot_room: nodes
    already out count, and a waiting node already out takes no more room)."""
    out = set(out_of_service(states, compute))
    waiting = sorted(n for n, target in targets.items() if target and n not in out)
    room = reboot_room(limit, compute, states)
    if len(waiting) <= room:
        return ""
    drivers = ", ".join(sorted({targets[n] for n in waiting}, key=version_key))
    already = f" more, {len(out)} compute nodes being out of service already" if out else ""
    return (
        f"{len(waiting)} nodes in Slurm would need a reboot for driver {drivers}; "
        f"{MAX_UNAVAILABLE} ({limit}) allows {room}{already}: apply it with "
        f"`kiln rollout -i {inventory}`"
    )

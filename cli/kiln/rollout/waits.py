"""What each of a rollout's waits looks for in the controller's view (`scontrol
--oneliner show node`, `scontrol ping`): the batch's jobs ended, its nodes back after a
reboot with all their GRES, the controller answering; and the free capacity."""

import re

from kiln_node import slurm_state

IDLE, BACK, CONTROLLER = "idle", "back", "controller"
RUNNING = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
# slurmd registered with fewer GRES than slurm.conf gives the node: Slurm drains it or
# marks it INVAL with this reason.
_GRES_LOW = re.compile(r"gres/\S+ count (reported )?(too low|lower than configured)", re.I)


def idle(states: dict[str, slurm_state.NodeState], nodes: list[str]) -> bool:
    """No job runs on the nodes any more (drained, so none starts)."""
    return all(n in states and not states[n].flags & RUNNING for n in nodes)


def not_back(states: dict[str, slurm_state.NodeState], nodes: list[str]) -> dict[str, str]:
    """The nodes not back after a reboot, and why: not registered yet, or registered
    without all their GRES."""
    found = {}
    for node in nodes:
        seen = states.get(node)
        if seen is None:
            found[node] = "Slurm does not know this node"
        elif _GRES_LOW.search(seen.reason):
            found[node] = f"slurmd registered without all its GRES: {seen.reason}"
        elif seen.flags & (slurm_state.UNAVAILABLE | slurm_state.REBOOTING | {"INVAL"}):
            found[node] = f"Slurm reports it {seen.state}"
    return found


def controller_up(ping: str) -> bool:
    """`scontrol ping`: every slurmctld it names is UP (a backup too)."""
    said = re.findall(r"Slurmctld\(\w+\) at \S+ is (\w+)", ping)
    return bool(said) and all(s == "UP" for s in said)


def free(states: dict[str, slurm_state.NodeState], compute: list[str]) -> int:
    """Compute nodes in service: known to Slurm, not drained, down or rebooting."""
    return sum(
        1 for n in compute if n in states and not states[n].flags & slurm_state.OUT_OF_SERVICE
    )


def ready(text: str, kind: str, nodes: list[str]) -> bool:
    """The step playbook's test after each poll (`text`: the command's output)."""
    if kind == CONTROLLER:
        return controller_up(text)
    states = slurm_state.parse(text)
    return idle(states, nodes) if kind == IDLE else not not_back(states, nodes)

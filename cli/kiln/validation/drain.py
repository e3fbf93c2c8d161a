"""Draining and resuming nodes on validation verdicts.

Kiln marks its own drains: the reason starts with `kiln:`. A node Kiln drained is
tested again on the next run (inside a maintenance reservation, so no user job lands
on it meanwhile) and resumed when it passes. A node someone else drained keeps its
drain and its reason: Kiln neither tests nor resumes it. A node Kiln's health check
drained (kiln_node.slurm_state.HEALTH_PREFIXES) is not tested or resumed either (the check
resumes it once it passes), but it fails: the check found a fault on it.
"""

from dataclasses import asdict, dataclass, field

from kiln.validation.verdicts import Verdict
from kiln_node import slurm_state
from kiln_node.slurm_state import NodeState

PREFIX = slurm_state.VALIDATE_PREFIX
# A node's verdicts that let Kiln resume it: one that was not checked stays drained.
PASSING = (Verdict.PASS, Verdict.WARN)
# Not free for a test now, nothing against the node: an idle-only run (the scheduled
# one) leaves it for the next run rather than wait or preempt.
BUSY = slurm_state.BUSY
# Why a node was not tested, when that says nothing against the node itself.
NOT_A_FAULT = ("drained by someone else", "busy")
HEALTH_DRAINED = "drained by Kiln's health check"
# slurmctld keeps reasons short in `sinfo`; a long one is cut, not refused.
REASON_LIMIT = 200


def skipped_verdict(why: str) -> Verdict:
    """A node the plan did not test (`why`, from Plan.skipped): a warn when that says
    nothing against the node (someone else's drain, busy), else a fail (down, unknown to
    Slurm, drained by Kiln's health check)."""
    return Verdict.WARN if why.startswith(NOT_A_FAULT) else Verdict.FAIL


@dataclass
class Plan:
    """Before the suites: what the cluster looks like and which nodes can be tested."""

    states: dict[str, NodeState]
    test: list[str] = field(default_factory=list)  # nodes the suites run on
    resume_to_test: list[str] = field(default_factory=list)  # drained by Kiln earlier
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why not tested

    def to_dict(self) -> dict:
        return asdict(self)


def parse_states(scontrol_text: str) -> dict[str, NodeState]:
    """`scontrol show node --oneliner` (any number of nodes) -> state per node."""
    return slurm_state.parse(scontrol_text)


def still_ours(scontrol_text: str, nodes: list[str]) -> list[str]:
    """Of the nodes Kiln decided to drain or resume, those it may still act on, read
    again just before it acts: a node someone else drained meanwhile is theirs."""
    states = parse_states(scontrol_text)
    return [
        n for n in nodes if n in states and (not states[n].drained or states[n].drained_by_kiln)
    ]


def drained_by_kiln(scontrol_text: str, nodes: list[str]) -> list[str]:
    """Of the nodes Kiln decided to resume, those still drained with Kiln's reason, read
    again just before it resumes them: someone else's drain since is theirs to lift."""
    states = parse_states(scontrol_text)
    return [n for n in nodes if n in states and states[n].drained_by_kiln]


def plan(scontrol_text: str, nodes: list[str], idle_only: bool = False) -> Plan:
    """idle_only: test only the nodes without jobs or reservations (and those Kiln
    drained, which are idle once drained); the rest are skipped as busy."""
    result = Plan(parse_states(scontrol_text))
    for node in nodes:
        seen = result.states.get(node)
        if seen is None:
            result.skipped[node] = "Slurm does not know this node"
        elif idle_only and not seen.drained_by_others and (busy := sorted(seen.flags & BUSY)):
            result.skipped[node] = f"busy: {'+'.join(busy)} (an idle-only run tests idle nodes)"
        elif seen.drained_by_kiln:
            result.test.append(node)
            result.resume_to_test.append(node)
        elif seen.drained_by_health:
            result.skipped[node] = f"{HEALTH_DRAINED}: {seen.reason}"
        elif seen.drained:
            result.skipped[node] = f"drained by someone else: {seen.reason or 'no reason'}"
        elif seen.flags & slurm_state.UNAVAILABLE:
            result.skipped[node] = f"Slurm reports it {seen.state}"
        else:
            result.test.append(node)
    return result


@dataclass
class Actions:
    drain: dict[str, str] = field(default_factory=dict)  # node -> reason (with the prefix)
    resume: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)  # node -> why Kiln did not act

    def to_dict(self) -> dict:
        return asdict(self)


def reason(text: str) -> str:
    full = f"{PREFIX} {text}"
    return full if len(full) <= REASON_LIMIT else full[: REASON_LIMIT - 3] + "..."


def decide(
    failing: dict[str, str], passing: list[str], states: dict[str, NodeState], no_drain: bool
) -> Actions:
    """failing: node -> its first failure reason; passing: nodes with no failure;
    states: as seen before the run (a Kiln drain is recognised by its reason)."""
    actions = Actions()
    for node, why in sorted(failing.items()):
        seen = states.get(node)
        if seen and seen.drained_by_health:  # the check resumes it once it passes
            actions.left[node] = f"already {HEALTH_DRAINED} ({seen.reason})"
        elif seen and seen.drained and not seen.drained_by_kiln:
            actions.left[node] = f"already drained by someone else ({seen.reason})"
        elif no_drain:
            actions.left[node] = "--no-drain"
        else:
            actions.drain[node] = reason(why)
    for node in sorted(passing):
        seen = states.get(node)
        if seen and seen.drained_by_kiln:
            if no_drain:  # a --no-drain run changes no node's state either way
                actions.left[node] = "passes, stays drained (--no-drain)"
            else:
                actions.resume.append(node)
    return actions

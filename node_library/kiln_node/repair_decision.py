"""The repair loop's decision: for one node, from its Slurm state, its failure class, its
repair history, its partition's states and the settings, the one thing to do now. The
repair program on the controller (not built yet) runs it on each of Slurm's events and
does what it says; this module only decides.

Rules (docs/health.md, "Repair"):
- only nodes Kiln's own checks drained (kiln-health:, kiln-active:) are worked on, and
  nodes Slurm itself set DOWN as not responding; any other drain is never touched;
- an unknown Slurm state is never healthy, and an UNKNOWN failure class is never
  drained nor resumed: both alert only;
- the circuit breaker: Kiln's automation never has more than repair_max_unavailable of a
  partition out; past it a new failure is recorded and alerted, not drained (may_drain),
  and while the breaker is open no repair starts;
- after repair_rma_after failed repairs within repair_rma_window_s, RMA: a `kiln-rma:`
  reason with the evidence bundle's path, never resumed by Kiln;
- a reboot or power cycle that has not brought the node back within repair_back_after_s
  failed; after a reboot the node's BMC power-cycles it (kiln_node.bmc_power).
"""

import re
from dataclasses import dataclass

from kiln_node import repair_classes, slurm_state
from kiln_node.repair_classes import RECHECK, Failure
from kiln_node.repair_records import Breaker, Entry

NONE = "none"
REPAIR = "repair"  # the evidence bundle first where the step says so, then the step
HOLD = "hold-for-recheck"  # a reservation, then kiln-health, DCGM and a short stress
RETURN = "return"  # resume
RMA = "rma"
ALERT = "alert-only"
LATE = "late"  # a reboot or power cycle did not bring the node back in time: it failed
RUNNING = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})  # a job still on the node
ENDS = (RETURN, RMA)  # history steps that close a node's episode


class SettingsError(ValueError):
    """A repair setting out of range; the message is one line (the program exits 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Settings:
    max_unavailable: str | int = "10%"  # of the partition ("N%"), or a number of nodes
    rma_after: int = 3  # failed repairs ...
    rma_window_s: int = 7 * 86400  # ... within this window make an RMA
    retry_after_s: int = 600  # after a failed round, before the ladder starts again
    back_after_s: int = 900  # a rebooted or power-cycled node is back within this

    def limit(self, partition_size: int) -> int:
        """Nodes Kiln's automation may have out of a partition of this size (at least 1)."""
        most = str(self.max_unavailable)
        if most.endswith("%"):
            return max(1, partition_size * int(most[:-1]) // 100)
        return int(most)


_PERCENT = re.compile(r"(\d+)%")


def _count(values: dict, key: str, default: int, least: int) -> int:
    value = values.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise SettingsError(f"{key}: {value!r} is not a whole number of {least} or more")
    return value


def settings(values: dict) -> Settings:
    """The repair_* settings (as the inventory names them); SettingsError for one that
    is unknown or out of range."""
    known = {"repair_max_unavailable", "repair_rma_after", "repair_rma_window_s",
             "repair_retry_after_s", "repair_back_after_s"}  # fmt: skip
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError(
            f"unknown repair setting {unknown[0]}: known are {', '.join(sorted(known))}"
        )
    most = values.get("repair_max_unavailable", "10%")
    percent = _PERCENT.fullmatch(most) if isinstance(most, str) else None
    whole = isinstance(most, int) and not isinstance(most, bool)
    if not (percent and 1 <= int(percent[1]) <= 100) and not (whole and most >= 1):
        raise SettingsError(
            f"repair_max_unavailable: {most!r} is out of range "
            "(a number of nodes, 1 or more, or a percentage of the partition, 1% to 100%)"
        )
    return Settings(
        most,
        _count(values, "repair_rma_after", 3, 1),
        _count(values, "repair_rma_window_s", 7 * 86400, 1),
        _count(values, "repair_retry_after_s", 600, 0),
        _count(values, "repair_back_after_s", 900, 1),
    )


# --- the breaker's cap ----------------------------------------------------------------


def out_by_kiln(state: slurm_state.NodeState) -> bool:
    """Out of service by Kiln's automation: drained by its checks (or rebooting for
    them), or not answering; an unknown state counts as out (never read as healthy).
    RMA nodes are a person's now and do not count."""
    if state.state == "UNKNOWN" or "UNKNOWN" in state.flags:
        return True
    return state.drained_by_health or _slurm_not_responding(state)


def may_drain(
    node: str, states: dict[str, slurm_state.NodeState], partition: list[str], settings: Settings
) -> tuple[bool, str]:
    """Whether Kiln's checks may drain `node` now: (True, "") or (False, why); past the
    cap the failure is recorded and alerted, and the breaker opens."""
    out = [n for n in partition if n != node and (n not in states or out_by_kiln(states[n]))]
    limit = settings.limit(len(partition))
    if len(out) + 1 > limit:
        return False, (
            f"breaker: {len(out)} of {len(partition)} nodes already out by Kiln's automation "
            f"(repair_max_unavailable {settings.max_unavailable}: {limit}); {node} not drained"
        )
    return True, ""


# --- the decision -----------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    action: str
    why: str
    cls: str = ""
    step: str = ""  # REPAIR: the ladder step (kiln_node.repair_classes.STEPS)
    evidence: bool = False  # collect the evidence bundle first
    reason: str = ""  # RMA: the drain reason to set


def rma_reason(cls: str, failures: int, evidence: str) -> str:
    where = f"; evidence {evidence}" if evidence else "; no evidence bundle"
    return f"{slurm_state.RMA_PREFIX} {cls}: {failures} failed repairs{where}"


def _slurm_not_responding(state: slurm_state.NodeState) -> bool:
    """Slurm's own DOWN for a silent slurmd: not an operator's drain."""
    return bool(state.flags & {"DOWN", "NOT_RESPONDING"}) and (
        state.reason == slurm_state.NOT_RESPONDING_REASON
    )


def failure_of(state: slurm_state.NodeState) -> Failure:
    if _slurm_not_responding(state):
        return Failure("slurmd")
    return repair_classes.classify_reason(state.reason)


def _steps(failure: Failure) -> tuple[str, ...]:
    """The ladder from the failure's first step on."""
    ladder = repair_classes.ladder(failure.cls)
    return ladder[ladder.index(failure.start) :] if failure.start in ladder else ladder


def _first(failure: Failure, why: str) -> Decision:
    steps = _steps(failure)
    if not steps:
        return Decision(HOLD, f"{why}; {failure.cls} has no repair: re-check", failure.cls)
    step = repair_classes.STEPS[steps[0]]
    return Decision(REPAIR, why, failure.cls, step.name, step.evidence)


def _after(failure: Failure, last_step: str, why: str) -> Decision | None:
    steps = _steps(failure)
    rest = steps[steps.index(last_step) + 1 :] if last_step in steps else ()
    if not rest:
        return None
    step = repair_classes.STEPS[rest[0]]
    return Decision(REPAIR, why, failure.cls, step.name, step.evidence)


def _coming_back(
    node: str, state: slurm_state.NodeState, failure: Failure, last: Entry | None,
    settings: Settings, now: float,
) -> Decision | None:  # fmt: skip
    """After a reboot, a power cycle or its daemons restarted over ssh, while the node
    does not answer Slurm (or Slurm still reboots it): wait up to back_after_s; past it
    the step failed (LATE). A reboot that failed leaves a silent node to its BMC's power
    cycle."""
    silent = state.flags & (slurm_state.UNAVAILABLE | slurm_state.REBOOTING)
    # The daemons restarted over ssh come back the same way (Slurm hears from slurmd).
    back_steps = (repair_classes.REBOOT, repair_classes.POWER_CYCLE, "restart-slurmd")
    if not (silent and last and last.step in back_steps):
        return None
    if last.outcome in ("started", "done"):
        waited = round(now - last.time)
        if waited < settings.back_after_s:
            return Decision(NONE, f"{node}: waiting for it to come back", failure.cls)
        why = f"{node}: {last.step} {last.outcome} {waited}s ago, not back"
        return Decision(LATE, why, failure.cls, last.step)
    if last.step == repair_classes.REBOOT and last.outcome == "failed":
        step = repair_classes.STEPS[repair_classes.POWER_CYCLE]
        why = f"{node}: the reboot failed and it does not answer"
        return Decision(REPAIR, why, failure.cls, step.name, step.evidence)
    return None


def since_rma(mine: list[Entry]) -> list[Entry]:
    """A node's entries since its last RMA: a person replaced the part and resumed it,
    so its count of failed repairs starts again (a return does not restart it: faults
    that come back after repairs add up to an RMA)."""
    last = max((i for i, e in enumerate(mine) if e.step == RMA), default=-1)
    return mine[last + 1 :]


def failed_repairs(history: list[Entry], node: str, now: float, settings: Settings) -> list[Entry]:
    """The node's failed steps and re-checks within repair_rma_window_s since its last RMA."""
    mine = since_rma([e for e in history if e.node == node])
    return [e for e in mine if e.outcome == "failed" and e.time >= now - settings.rma_window_s]


def decide(
    node: str,
    states: dict[str, slurm_state.NodeState],
    history: list[Entry],
    breaker: Breaker,
    settings: Settings,
    now: float,
) -> Decision:
    """What to do about `node` now, by the rules of the module doc. `states` holds at
    least the node's own state (scontrol show node); `history` every entry (any node)."""
    state = states.get(node)
    if state is None or state.state == "UNKNOWN" or "UNKNOWN" in state.flags:
        return Decision(ALERT, f"{node}: Slurm state unknown, never read as healthy")
    if state.reason.startswith(slurm_state.RMA_PREFIX):
        return Decision(NONE, f"{node}: RMA, never resumed by Kiln")
    if not (state.drained_by_health or _slurm_not_responding(state)):
        if state.drained or state.flags & slurm_state.UNAVAILABLE:
            return Decision(NONE, f"{node}: not Kiln's drain ({state.reason or 'no reason'})")
        return Decision(NONE, f"{node}: not drained")
    failure = failure_of(state)
    if failure.cls == repair_classes.UNKNOWN:
        return Decision(ALERT, f"{node}: failure class unknown ({failure.why})")
    mine = [e for e in history if e.node == node]
    ended = max((i for i, e in enumerate(mine) if e.step in ENDS), default=-1)
    episode = [e for e in mine[ended + 1 :] if e.cls == failure.cls and e.outcome != "alerted"]
    last = episode[-1] if episode else None
    if last and last.step == RECHECK and last.outcome == "passed":
        return Decision(RETURN, f"{node}: passed its re-check", failure.cls)
    if breaker.open:
        why = f"breaker open: {breaker.reason}; `kiln repair reset` closes it"
        return Decision(ALERT, why, failure.cls)
    coming = _coming_back(node, state, failure, last, settings, now)
    if coming:
        return coming
    if state.flags & slurm_state.REBOOTING:
        return Decision(NONE, f"{node}: reboot under way", failure.cls)
    if state.flags & RUNNING:
        return Decision(NONE, f"{node}: a job still runs there; the ladder waits", failure.cls)
    if state.flags & slurm_state.UNAVAILABLE and failure.cls != "slurmd":
        # No step on the node reaches it; its BMC's power cycle follows a reboot only.
        return Decision(ALERT, f"{node}: does not answer Slurm ({state.state})", failure.cls)
    failed = failed_repairs(history, node, now, settings)
    if len(failed) >= settings.rma_after:
        evidence = next((e.evidence for e in reversed(since_rma(mine)) if e.evidence), "")
        why = f"{node}: {len(failed)} failed repairs within {settings.rma_window_s}s"
        return Decision(
            RMA, why, failure.cls, evidence=not evidence,
            reason=rma_reason(failure.cls, len(failed), evidence),
        )  # fmt: skip
    if last is None:
        return _first(failure, f"{node}: {failure.cls}, first step")
    if last.step != RECHECK:
        if last.outcome in ("done", "started"):
            return Decision(HOLD, f"{node}: {last.step} {last.outcome}: re-check", failure.cls)
        following = _after(failure, last.step, f"{node}: {last.step} {last.outcome}, next step")
        if following:
            return following
    else:
        repaired = [e.step for e in episode if e.step != RECHECK]
        following = _after(failure, repaired[-1], f"{node}: re-check failed, next step") if (
            repaired
        ) else None  # fmt: skip
        if following:
            return following
    if now - last.time < settings.retry_after_s:
        wait = round(settings.retry_after_s - (now - last.time))
        return Decision(NONE, f"{node}: ladder tried, next round in {wait}s", failure.cls)
    return _first(failure, f"{node}: {failure.cls}, next round")

"""A rollout batch's state machine: one batch of compute nodes through

    planned ─▶ drained ─▶ idle ─▶ applied ─▶ rebooted ─▶ checked ─▶ resumed

Each transition is recorded in the batch's Step (kiln.rollout.progress: `done`, state ->
when) and the record saved before the next begins, so `kiln rollout --resume` carries
on from the recorded state and never repeats a transition that ended (never drains a
batch again, never asks Slurm twice for a reboot).

The rollout alone drains and resumes the batch's nodes: the check only judges (the
campaign's `check`: kiln-health, which acts on no drain but its own, then the suites
with `acted_by`), and `resume` acts on its verdicts. The campaign
(kiln.campaigns.rollout) gives the machine its actor: the controller's view after each
step, the apply, the check.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol

from kiln import hostlist
from kiln.errors import ExitCode
from kiln.report import document
from kiln.rollout import waits
from kiln.rollout.progress import Record, Resumable, Step
from kiln.run.events import RunSummary
from kiln.validation import drain
from kiln.validation.verdicts import Verdict
from kiln_node import slurm_jobs, slurm_state

POLL_S = 10  # between two looks at the nodes while waiting
WAIT_CHUNK_S = 600  # one step run waits at most this long, then Kiln looks again
BACK_TIMEOUT_S = 1800  # a node not back this long after its reboot has failed
APPLYING = "applying the change"
UNKNOWN = "Slurm does not know this node"
PAST_DEADLINE = "its jobs ran past the deadline: left as it was"


class State(StrEnum):
    PLANNED = "planned"  # nothing done yet
    DRAINED = "drained"  # drained with this rollout's reason (room checked first)
    IDLE = "idle"  # its jobs ended (or the deadline left its busy nodes out)
    APPLIED = "applied"  # site.yml (or its tags) ran on it
    REBOOTED = "rebooted"  # the nodes whose change loads at boot are back with their GRES
    CHECKED = "checked"  # kiln-health and the suites judged it
    RESUMED = "resumed"  # the passing resumed, the failing drained with why


# In order; the record's steps (kiln.rollout.progress.STEPS) are their names.
ORDER = tuple(s for s in State if s is not State.PLANNED)


def state(step: Step) -> State:
    """The last transition the record says ended."""
    return next((s for s in reversed(ORDER) if s in step.done), State.PLANNED)


def next_state(step: Step) -> State | None:
    """Where the batch goes next; None once resumed."""
    now = state(step)
    return None if now is State.RESUMED else ORDER[ORDER.index(now) + 1 if now in ORDER else 0]


@dataclass
class View:
    """The controller's view after a step: every node's state, the jobs, the ping."""

    states: dict[str, slurm_state.NodeState]
    jobs: str
    ping: str


def wait(kind: str, nodes: list[str], seconds: int, argv: list[str] | None = None) -> dict:
    """A wait for rollout_step.yml: poll `argv` until kiln.rollout.waits.ready."""
    return {
        "kind": kind,
        "nodes": nodes,
        "argv": argv or slurm_jobs.show_nodes(nodes),
        "retries": max(0, seconds // POLL_S),
        "delay": POLL_S,
    }


# The check's verdicts on the nodes that did not pass: node -> (FAIL or UNCHECKED, why).
Failures = dict[str, tuple[Verdict, str]]


class Actor(Protocol):
    """What the machine needs from its campaign (kiln.campaigns.rollout.Rollout)."""

    record: Record
    cluster: list[str]  # every compute node of the inventory: the room counts them all
    say: Callable[[str], None]

    def step(
        self,
        commands: list[list[str]] | None = None,
        wait: dict | None = None,
        tries: list[list[str]] | None = None,
    ) -> View: ...

    def apply(self, hosts: list[str]) -> RunSummary: ...

    def check(self, nodes: list[str]) -> Failures: ...

    def save(self) -> None: ...


class Batch:
    """One batch through the machine, from the state its record gives."""

    def __init__(self, actor: Actor, index: int, step: Step) -> None:
        self.actor, self.index, self.step = actor, index, step
        self.record = actor.record
        self.options = actor.record.options
        self.view: View | None = None  # the drain's view, for the wait that follows
        total = len(self.record.batches)
        self.named = f"batch {index}/{total} {hostlist.compress(step.nodes)}"

    def run(self) -> bool:
        """Every transition left; False when the rollout must stop (no room)."""
        while (target := next_state(self.step)) is not None:
            if not TRANSITIONS[target](self):
                return False
            self.step.done[target] = document.now()
            self.actor.save()
        return True

    # --- the transitions ----------------------------------------------------------------

    def drain(self) -> bool:
        """Room for the batch (shrunk to it), then drain it with this rollout's reason
        and wait a first chunk for its jobs; False when there is no room at all."""
        step, record = self.step, self.record
        view = self.actor.step()
        for node in step.nodes:
            if node not in view.states:
                step.failed.setdefault(node, UNKNOWN)
        others = [n for n in self.actor.cluster if n not in step.nodes]
        out = [n for n in others if out_of_service(view, n)]
        room = self.options.max_unavailable - len(out)
        if room < 1:
            self.actor.step([slurm_jobs.resume(n) for n in self.ours(view, step.nodes)])
            record.notes.append(
                f"stopped before batch {self.index}: {len(out)} compute node(s) out of service "
                f"({hostlist.compress(out)}), at most {self.options.max_unavailable} may be"
            )
            return False
        if room < len(step.nodes):  # the rest waits for a batch of its own
            rest = Step(step.nodes[room:], [n for n in step.reboot if n in step.nodes[room:]])
            step.nodes, step.reboot = (
                step.nodes[:room],
                [n for n in step.reboot if n in step.nodes[:room]],
            )
            record.batches.insert(record.batches.index(step) + 1, rest)
            self.named = f"batch {self.index} {hostlist.compress(step.nodes)}"
        step.done["started"] = document.now()
        self.actor.say(f"{self.named}: draining, waiting for its jobs to end")
        reason = drain.reason(f"rollout {record.id}: {APPLYING}")
        known = [n for n in step.nodes if n in view.states]
        drains = [slurm_jobs.drain(n, reason) for n in known if not view.states[n].drained]
        self.view = self.actor.step(drains, wait(waits.IDLE, known, self.wait_left()))
        return True

    def idle(self) -> bool:
        """Until the batch's jobs end, or the deadline: then requeue their jobs, or leave
        the busy nodes out of this rollout (resumed, as they were)."""
        step, nodes, view = self.step, self.known, self.view
        while True:
            if view is None:
                view = self.actor.step(wait=wait(waits.IDLE, nodes, self.wait_left()))
            busy = [n for n in nodes if not waits.idle(view.states, [n])]
            if not busy:
                return True
            if self.deadline() is not None and not self.wait_left():
                break
            view = None
        if self.options.at_deadline == "requeue":
            jobs = jobs_on(view.jobs, busy)
            self.actor.say(f"deadline: requeueing job(s) {','.join(jobs)}")
            # One at a time, a refusal (a job that cannot be requeued) aside.
            self.actor.step(tries=[["scontrol", "requeue", job] for job in jobs])
            view = self.actor.step(wait=wait(waits.IDLE, nodes, WAIT_CHUNK_S))
            busy = [n for n in nodes if not waits.idle(view.states, [n])]
        for node in busy:
            step.skipped[node] = PAST_DEADLINE
        ours = self.ours(view, busy)
        if ours:
            self.actor.step([slurm_jobs.resume(n) for n in ours])
        return True

    def apply(self) -> bool:
        """site.yml on the batch; a node it fails on has failed. The run itself or a
        controller failing stops the rollout (resumable): KilnError."""
        step, active = self.step, self.active
        self.actor.say(f"{self.named}: applying")
        summary = self.actor.apply(active)
        beside = [f for f in summary.failures if f.host not in active]
        if summary.error or beside:  # the run itself, or a controller, failed
            why = summary.error or f"{beside[0].host}: {beside[0].task}: {beside[0].message}"
            raise Resumable(
                f"the change failed outside the batch: {why} (kiln runs show {summary.run})",
                self.record.id,
                ExitCode.HOSTS_FAILED,
            )
        for failure in summary.failures:
            step.failed.setdefault(failure.host, f"apply: {failure.task}: {failure.message}")
        # The driver role's: a new module waits to load (kiln_reboots).
        step.reboot = sorted({*step.reboot, *(n for n in summary.reboots if n in active)})
        return True

    def reboot(self) -> bool:
        """Slurm reboots the nodes whose change loads at boot (asked once, ever), then
        the machine waits for slurmd with all its GRES."""
        step = self.step
        rebooting = [n for n in step.reboot if n in self.ok]
        if not rebooting:
            return True
        self.actor.say(f"{self.named}: rebooting {hostlist.compress(rebooting)}")
        # Drained and idle already: Slurm reboots them now and they come back drained
        # (this rollout's reason is set again before the checks).
        argv = slurm_jobs.reboot_drained(rebooting)
        asked = [] if "reboot_asked" in step.done else [argv]  # never twice
        step.done.setdefault("reboot_asked", document.now())
        view = self.actor.step(asked, wait(waits.BACK, rebooting, BACK_TIMEOUT_S))
        for node, why in waits.not_back(view.states, rebooting).items():
            step.failed.setdefault(node, why)
        # Whatever reason the reboot left, the node is this rollout's until checked.
        reason = drain.reason(f"rollout {self.record.id}: rebooted, checking")
        back = [n for n in rebooting if n not in step.failed]
        self.actor.step([slurm_jobs.drain(n, reason) for n in back])
        return True

    def check(self) -> bool:
        """The campaign's judgement of the nodes still in the batch: nothing in Slurm
        changes here. A node that could not be checked stays drained (fail closed) and
        is recorded as not checked, not as failed."""
        step = self.step
        nodes = self.ok
        self.actor.say(f"{self.named}: health check and validation")
        for node, (verdict, why) in self.actor.check(nodes).items() if nodes else []:
            step.failed.setdefault(node, why)
            if verdict is Verdict.UNCHECKED and node not in step.unchecked:
                step.unchecked.append(node)
        return True

    def resume(self) -> bool:
        """Resume the batch's nodes that passed and still carry this rollout's drain;
        a failing node stays drained, with the reason that failed it."""
        step, active = self.step, self.active
        view = self.actor.step()
        for node, why in waits.not_back(view.states, self.ok).items():  # GRES, registration
            step.failed.setdefault(node, why)
        ours = self.ours(view, active)
        commands = [slurm_jobs.resume(n) for n in ours if n not in step.failed]
        # A Kiln drain (this rollout's, an earlier validate's) gets why the node failed
        # now; a health check's drain is the check's to lift, someone else's is theirs.
        commands += [
            slurm_jobs.drain(n, drain.reason(f"rollout {self.record.id}: {why}"))
            for n, why in step.failed.items()
            if n in view.states and kiln_or_none(view.states[n])
        ]
        if commands:
            self.actor.step(commands)
        for node, why in step.failed.items():
            self.actor.say(f"{node}: failed: {why}")
        return True

    # --- what the transitions share ----------------------------------------------------

    @property
    def known(self) -> list[str]:
        return [n for n in self.step.nodes if self.step.failed.get(n) != UNKNOWN]

    @property
    def active(self) -> list[str]:
        """The nodes the change goes to: known to Slurm, not left out at the deadline."""
        return [n for n in self.known if n not in self.step.skipped]

    @property
    def ok(self) -> list[str]:
        return [n for n in self.active if n not in self.step.failed]

    def deadline(self) -> datetime | None:
        """--deadline, or the batch's own start plus --wait-for-jobs."""
        if self.options.deadline:
            return datetime.fromisoformat(self.options.deadline)
        if self.options.wait_s is not None:
            started = datetime.fromisoformat(self.step.done["started"])
            return started + timedelta(seconds=self.options.wait_s)
        return None

    def wait_left(self) -> int:
        """Seconds one wait may take: a chunk, or what is left before the deadline."""
        deadline = self.deadline()
        if deadline is None:
            return WAIT_CHUNK_S
        left = deadline - datetime.now(UTC)
        return max(0, min(WAIT_CHUNK_S, int(left.total_seconds())))

    def ours(self, view: View, nodes: list[str]) -> list[str]:
        return ours(view, nodes, self.record.id)


TRANSITIONS: dict[State, Callable[[Batch], bool]] = {
    State.DRAINED: Batch.drain,
    State.IDLE: Batch.idle,
    State.APPLIED: Batch.apply,
    State.REBOOTED: Batch.reboot,
    State.CHECKED: Batch.check,
    State.RESUMED: Batch.resume,
}


def ours(view: View, nodes: list[str], rollout: str) -> list[str]:
    """Of `nodes`, those drained with this rollout's reason."""
    mine = drain.reason(f"rollout {rollout}:")
    return [n for n in nodes if n in view.states and view.states[n].drained
            and view.states[n].reason.startswith(mine)]  # fmt: skip


def kiln_or_none(seen: slurm_state.NodeState) -> bool:
    """Not drained, or drained by Kiln's validate or rollout (not its health check)."""
    return not seen.drained or seen.drained_by_kiln


def out_of_service(view: View, node: str) -> bool:
    seen = view.states.get(node)
    return seen is None or bool(seen.flags & slurm_state.OUT_OF_SERVICE)


def jobs_on(squeue: str, nodes: list[str]) -> list[str]:
    """Job ids running on any of `nodes` (squeue --format=%i|%T|%N)."""
    found = []
    for line in squeue.splitlines():
        job, _state, where = [*line.split("|"), "", ""][:3]
        if job and set(hostlist.expand(where)) & set(nodes):
            found.append(job)
    return found
